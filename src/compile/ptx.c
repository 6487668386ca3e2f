/*
 * ptx.c - read descriptors and forbidden globals out of PTX text.
 *
 * The PTX is parsed just far enough: comments are blanked, then the module
 * is split into top-level statements (variable declarations, function
 * prototypes) and function definitions (.entry and .func with a body).
 * Inside a body only the first word of each instruction matters, plus the
 * operands of ld, cp.async and call.
 *
 * A kernel's descriptors count the .func bodies it can reach through
 * direct calls.  An indirect call (through a register) could reach any
 * function, so a kernel that makes one counts every .func in the module.
 *
 * A .global variable is reported as mutable unless the module provably
 * leaves it alone: no relocatable device code means nothing outside the
 * module can name it, so if every instruction that names it only loads
 * from it, it is a constant in all but state space.
 */
#include "ksearch/compile/ptx.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/util.h"

struct ptx_span {
	const char *start;
	size_t len;
};

struct ptx_function {
	struct ptx_span name;
	struct ptx_span body; /* between the braces */
	int is_entry;
};

struct ptx_module {
	char *text; /* the PTX with comments blanked; spans point into it */
	struct ptx_function *functions;
	size_t n_functions, alloc_functions;
	struct ptx_span *decls; /* top-level statements other than functions */
	size_t n_decls, alloc_decls;
	struct ptx_span *externs; /* functions declared .extern (defined elsewhere) */
	size_t n_externs, alloc_externs;
};

static int is_ident_char(int c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '$' || c == '%';
}

static int is_space(int c)
{
	return isspace((unsigned char)c);
}

static int span_equals(struct ptx_span s, const char *str)
{
	return strlen(str) == s.len && !memcmp(s.start, str, s.len);
}

static int line_of(const struct ptx_module *mod, const char *at)
{
	int line = 1;

	for (const char *p = mod->text; p < at; p++)
		if (*p == '\n')
			line++;
	return line;
}

/* Past the closing quote of the string starting at p (on the quote). */
static const char *skip_string(const char *p)
{
	for (p++; *p && *p != '"'; p++)
		if (*p == '\\' && p[1])
			p++;
	return *p ? p + 1 : p;
}

/*
 * Blank // and block comments so that commented-out code ("// .globl",
 * "// demoted variable", a kernel that was disabled) is never parsed.
 * Newlines stay, so line numbers in messages still match the input.
 */
static char *strip_comments(const char *ptx)
{
	size_t len = strlen(ptx);
	char *text = malloc(len + 1);
	char *p;

	if (!text)
		return NULL;
	memcpy(text, ptx, len + 1);
	for (p = text; *p;) {
		if (*p == '"') {
			p = (char *)skip_string(p);
		} else if (p[0] == '/' && p[1] == '/') {
			while (*p && *p != '\n')
				*p++ = ' ';
		} else if (p[0] == '/' && p[1] == '*') {
			*p++ = ' ';
			*p++ = ' ';
			while (*p && !(p[0] == '*' && p[1] == '/')) {
				if (*p != '\n')
					*p = ' ';
				p++;
			}
			if (*p) {
				*p++ = ' ';
				*p++ = ' ';
			}
		} else {
			p++;
		}
	}
	return text;
}

/* The '}' matching the '{' at p, or NULL. */
static const char *matching_brace(const char *p)
{
	int depth = 0;

	while (*p) {
		if (*p == '"') {
			p = skip_string(p);
			continue;
		}
		if (*p == '{') {
			depth++;
		} else if (*p == '}') {
			if (--depth == 0)
				return p;
		}
		p++;
	}
	return NULL;
}

/* The ')' matching the '(' at p, or NULL. */
static const char *matching_paren(const char *p)
{
	int depth = 0;

	for (; *p; p++) {
		if (*p == '(') {
			depth++;
		} else if (*p == ')') {
			if (--depth == 0)
				return p;
		}
	}
	return NULL;
}

static const char *skip_space(const char *p)
{
	while (*p && is_space(*p))
		p++;
	return p;
}

/* The word at p: a directive (.global), a mnemonic (ld.global.v4.f32) or a name. */
static struct ptx_span word_at(const char *p)
{
	struct ptx_span w = { p, 0 };

	while (p[w.len] && (is_ident_char(p[w.len]) || p[w.len] == '.' || p[w.len] == ':'))
		w.len++;
	return w;
}

static struct ptx_span ident_at(const char *p)
{
	struct ptx_span w = { p, 0 };

	while (p[w.len] && is_ident_char(p[w.len]))
		w.len++;
	return w;
}

static int word_is(const char *p, const char *directive)
{
	return span_equals(word_at(p), directive);
}

static int push_function(struct ptx_module *mod, const struct ptx_function *fn)
{
	if (KS_ALLOC_TRY_GROW(mod->functions, mod->n_functions + 1, mod->alloc_functions) < 0)
		return -1;
	mod->functions[mod->n_functions++] = *fn;
	return 0;
}

static int push_decl(struct ptx_module *mod, struct ptx_span decl)
{
	if (KS_ALLOC_TRY_GROW(mod->decls, mod->n_decls + 1, mod->alloc_decls) < 0)
		return -1;
	mod->decls[mod->n_decls++] = decl;
	return 0;
}

static int push_extern(struct ptx_module *mod, struct ptx_span name)
{
	if (KS_ALLOC_TRY_GROW(mod->externs, mod->n_externs + 1, mod->alloc_externs) < 0)
		return -1;
	mod->externs[mod->n_externs++] = name;
	return 0;
}

static int mentions(struct ptx_span text, struct ptx_span name, const char **at);

static void module_release(struct ptx_module *mod)

{
	free(mod->text);
	free(mod->functions);
	free(mod->decls);
	free(mod->externs);
	memset(mod, 0, sizeof(*mod));
}

/* Directives that take the rest of their line and no semicolon. */
static int is_line_directive(const char *p)
{
	return word_is(p, ".version") || word_is(p, ".target") || word_is(p, ".address_size") ||
	       word_is(p, ".file") || word_is(p, ".loc");
}

/*
 * The name after ".entry" / ".func" at p: a .func may put its return
 * parameters first, as in ".func (.param .b32 func_retval0) _Z3fooi(".
 */
static struct ptx_span function_name(const char *p)
{
	const char *close;

	p = skip_space(p + word_at(p).len);
	if (*p == '(') {
		close = matching_paren(p);
		if (!close)
			return (struct ptx_span){ p, 0 };
		p = skip_space(close + 1);
	}
	return ident_at(p);
}

/*
 * Read one top-level statement starting at *pos: either a declaration that
 * ends with ';' (recorded in decls) or a function header followed by its
 * body (recorded in functions).
 */
static int parse_statement(struct ptx_module *mod, const char **pos, struct ks_error *err)
{
	const char *start = *pos, *p = *pos;
	struct ptx_function fn = { { NULL, 0 }, { NULL, 0 }, 0 };
	int is_function = 0, paren = 0, initializer = 0;

	while (*p) {
		if (*p == '"') {
			p = skip_string(p);
			continue;
		}
		if (*p == '.' && (p == start || !is_ident_char(p[-1]))) {
			if (word_is(p, ".entry") || word_is(p, ".func")) {
				is_function = 1;
				fn.is_entry = word_is(p, ".entry");
				fn.name = function_name(p);
				if (!fn.name.len)
					return ks_fail(err, "PTX line %d: %s without a name", line_of(mod, p),
						       fn.is_entry ? ".entry" : ".func");
			}
			p += word_at(p).len;
			continue;
		}
		if (*p == '(') {
			paren++;
		} else if (*p == ')') {
			paren--;
		} else if (*p == '=') {
			initializer = 1;
		} else if (*p == ';' && paren <= 0) {
			*pos = p + 1;
			if (is_function) {
				const char *at;

				/* a prototype: only the external ones matter (what the module calls but
				 * lacks) */
				if (mentions((struct ptx_span){ start, (size_t)(p - start) },
					     (struct ptx_span){ ".extern", 7 }, &at) &&
				    push_extern(mod, fn.name))
					return ks_fail(err, "out of memory reading PTX");
				return 0;
			}
			if (push_decl(mod, (struct ptx_span){ start, (size_t)(p - start) }))
				return ks_fail(err, "out of memory reading PTX");
			return 0;
		} else if (*p == '{') {
			const char *close = matching_brace(p);

			if (!close)
				return ks_fail(err, "PTX line %d: '{' is never closed", line_of(mod, p));
			if (is_function && paren <= 0 && !initializer) {
				fn.body.start = p + 1;
				fn.body.len = (size_t)(close - p - 1);
				*pos = close + 1;
				if (push_function(mod, &fn))
					return ks_fail(err, "out of memory reading PTX");
				return 0;
			}
			p = close; /* an initializer such as "= {0, 0, 128, 63}" */
		} else if (*p == '}') {
			return ks_fail(err, "PTX line %d: '}' without a matching '{'", line_of(mod, p));
		}
		p++;
	}
	if (is_function)
		return ks_fail(err, "PTX line %d: function '%.*s' has no body and no ';'",
			       line_of(mod, start), (int)fn.name.len, fn.name.start);
	/* Trailing text without ';': keep it, a declaration may still be read. */
	*pos = p;
	if (push_decl(mod, (struct ptx_span){ start, (size_t)(p - start) }))
		return ks_fail(err, "out of memory reading PTX");
	return 0;
}

static int module_parse(const char *ptx, struct ptx_module *mod, struct ks_error *err)
{
	const char *p;

	memset(mod, 0, sizeof(*mod));
	if (!ptx)
		return ks_fail(err, "no PTX given");
	mod->text = strip_comments(ptx);
	if (!mod->text)
		return ks_fail(err, "out of memory reading PTX");

	p = mod->text;
	while (*p) {
		if (is_space(*p) || *p == ';') {
			p++;
		} else if (is_line_directive(p)) {
			while (*p && *p != '\n')
				p++;
		} else if (word_is(p, ".section")) {
			/* DWARF sections (-G): a braced block of data, no code. */
			const char *open = strchr(p, '{');
			const char *close = open ? matching_brace(open) : NULL;

			if (!close)
				return ks_fail(err, "PTX line %d: .section without a closed body",
					       line_of(mod, p));
			p = close + 1;
		} else if (parse_statement(mod, &p, err)) {
			return -1;
		}
	}
	return 0;
}

static const struct ptx_function *find_function(const struct ptx_module *mod, struct ptx_span name,
						int want_entry)
{
	for (size_t i = 0; i < mod->n_functions; i++) {
		const struct ptx_function *fn = &mod->functions[i];

		if (fn->is_entry == want_entry && fn->name.len == name.len &&
		    !memcmp(fn->name.start, name.start, name.len))
			return fn;
	}
	return NULL;
}

/* Bytes of one element of a PTX type suffix (u32, f16x2, b128), 0 if not a type. */
static int type_bytes(struct ptx_span t)
{
	static const struct {
		const char *name;
		int bytes;
	} types[] = {
		{ "b8", 1 },  { "u8", 1 },  { "s8", 1 },    { "b16", 2 },    { "u16", 2 },
		{ "s16", 2 }, { "f16", 2 }, { "bf16", 2 },  { "b32", 4 },    { "u32", 4 },
		{ "s32", 4 }, { "f32", 4 }, { "f16x2", 4 }, { "bf16x2", 4 }, { "tf32", 4 },
		{ "b64", 8 }, { "u64", 8 }, { "s64", 8 },   { "f64", 8 },    { "b128", 16 },
	};

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (span_equals(t, types[i].name))
			return types[i].bytes;
	return 0;
}

/*
 * Bytes one thread moves with a load mnemonic such as ld.global.nc.v4.f32
 * or ld.relaxed.gpu.global.L2::64B.v2.u64: vector width times element
 * size; 0 when it does not read the .global state space.
 */
static int global_load_bytes(struct ptx_span mnemonic)
{
	const char *p = mnemonic.start, *end = mnemonic.start + mnemonic.len;
	int is_global = 0, lanes = 1, bytes = 0;

	while (p < end) {
		struct ptx_span part = { p, 0 };

		while (p + part.len < end && p[part.len] != '.')
			part.len++;
		if (span_equals(part, "global"))
			is_global = 1;
		else if (span_equals(part, "v2"))
			lanes = 2;
		else if (span_equals(part, "v4"))
			lanes = 4;
		else if (span_equals(part, "v8"))
			lanes = 8;
		else if (type_bytes(part))
			bytes = type_bytes(part);
		p += part.len + 1;
	}
	return is_global ? lanes * bytes : 0;
}

static int starts_with(struct ptx_span s, const char *prefix)
{
	size_t n = strlen(prefix);

	return s.len >= n && !memcmp(s.start, prefix, n);
}

/*
 * Offset of ".part" in the mnemonic, where part is a whole component
 * (".shared" matches ".shared" and ".shared::cta", not ".sharedx"), or -1.
 */
static long part_offset(struct ptx_span mnemonic, const char *part)
{
	size_t n = strlen(part);

	for (size_t i = 0; i + n < mnemonic.len; i++) {
		size_t after = i + 1 + n;

		if (mnemonic.start[i] == '.' && !memcmp(mnemonic.start + i + 1, part, n) &&
		    (after == mnemonic.len || mnemonic.start[after] == '.' || mnemonic.start[after] == ':'))
			return (long)i;
	}
	return -1;
}

/*
 * The n-th (0-based) comma-separated operand of an instruction, with
 * brackets and braces respected: "[%r2], [%rd2], 16" -> 2 -> "16".
 */
static struct ptx_span operand(struct ptx_span operands, int n)
{
	const char *p = operands.start, *end = operands.start + operands.len;
	int depth = 0;

	for (; p < end && n > 0; p++) {
		if (*p == '[' || *p == '{' || *p == '(')
			depth++;
		else if (*p == ']' || *p == '}' || *p == ')')
			depth--;
		else if (*p == ',' && depth == 0)
			n--;
	}
	if (n > 0)
		return (struct ptx_span){ end, 0 };
	while (p < end && is_space(*p))
		p++;
	return ident_at(p);
}

struct scan {
	struct ks_ptx_descriptors desc;
	int indirect_call;
	/* callees, as spans into the module text */
	struct ptx_span *callees;
	size_t n_callees, alloc_callees;
};

static int add_callee(struct scan *s, struct ptx_span name)
{
	for (size_t i = 0; i < s->n_callees; i++)
		if (s->callees[i].len == name.len && !memcmp(s->callees[i].start, name.start, name.len))
			return 0;
	if (KS_ALLOC_TRY_GROW(s->callees, s->n_callees + 1, s->alloc_callees) < 0)
		return -1;
	s->callees[s->n_callees++] = name;
	return 0;
}

/* call{.uni} [(ret),] target, ... : record the target. */
static int scan_call(struct scan *s, struct ptx_span operands)
{
	const char *p = operands.start, *end = operands.start + operands.len;
	struct ptx_span target;

	while (p < end && is_space(*p))
		p++;
	if (p < end && *p == '(') {
		while (p < end && *p != ')')
			p++;
		p++;
		while (p < end && (is_space(*p) || *p == ','))
			p++;
	}
	if (p >= end)
		return 0;
	target = ident_at(p);
	if (!target.len || target.start[0] == '%') {
		s->indirect_call = 1;
		return 0;
	}
	return add_callee(s, target);
}

static void widen_load(struct scan *s, int bytes)
{
	if (bytes > s->desc.widest_load_bytes)
		s->desc.widest_load_bytes = bytes;
}

static int scan_instruction(struct scan *s, struct ptx_span mnemonic, struct ptx_span operands)
{
	if (starts_with(mnemonic, "wgmma.")) {
		s->desc.tensor_cores = KS_TC_WGMMA;
	} else if (starts_with(mnemonic, "mma.sync") || starts_with(mnemonic, "mma.sp") ||
		   starts_with(mnemonic, "wmma.")) {
		if (s->desc.tensor_cores < KS_TC_MMA)
			s->desc.tensor_cores = KS_TC_MMA;
	} else if (starts_with(mnemonic, "cp.async.bulk") || starts_with(mnemonic, "cp.reduce.async.bulk")) {
		long shared = part_offset(mnemonic, "shared");
		long global = part_offset(mnemonic, "global");

		s->desc.async_copy = KS_ASYNC_TMA;
		/* Destination comes first: shared...global is a load from global. */
		if (shared >= 0 && global > shared)
			widen_load(s, 16);
	} else if (starts_with(mnemonic, "cp.async.ca") || starts_with(mnemonic, "cp.async.cg")) {
		struct ptx_span size = operand(operands, 2);

		if (s->desc.async_copy < KS_ASYNC_CP_ASYNC)
			s->desc.async_copy = KS_ASYNC_CP_ASYNC;
		if (size.len && isdigit((unsigned char)size.start[0]))
			widen_load(s, atoi(size.start));
	} else if (starts_with(mnemonic, "ld.") || starts_with(mnemonic, "ldu.")) {
		widen_load(s, global_load_bytes(mnemonic));
	} else if (span_equals(mnemonic, "call") || starts_with(mnemonic, "call.")) {
		return scan_call(s, operands);
	}
	return 0;
}

typedef int (*instruction_fn)(void *ctx, struct ptx_span mnemonic, struct ptx_span operands);

/*
 * Call visit for each instruction of a function body, with its mnemonic
 * (ld.global.v4.f32) and the text of its operands; labels, guards (@%p1),
 * scope braces and directives (.reg, .loc) are stepped over.
 */
static int for_each_instruction(struct ptx_span body, instruction_fn visit, void *ctx)
{
	const char *p = body.start, *end = body.start + body.len;

	while (p < end) {
		const char *stmt_end;
		struct ptx_span first, operands;
		int depth = 0;

		if (is_space(*p) || *p == ';' || *p == '{' || *p == '}') {
			p++; /* braces here open or close a scope block, not operands */
			continue;
		}
		if (word_is(p, ".loc") || word_is(p, ".file")) {
			while (p < end && *p != '\n')
				p++;
			continue;
		}
		first = word_at(p);
		if (first.len && first.start[first.len - 1] == ':' && !memchr(first.start, '.', first.len)) {
			p += first.len; /* a label: "$L__BB0_2:" */
			continue;
		}
		if (*p == '@') {
			p++;
			while (p < end && !is_space(*p))
				p++;
			continue;
		}
		for (stmt_end = p; stmt_end < end; stmt_end++) {
			if (*stmt_end == '{' || *stmt_end == '[' || *stmt_end == '(')
				depth++;
			else if (*stmt_end == '}' || *stmt_end == ']' || *stmt_end == ')')
				depth--;
			if ((*stmt_end == ';' && depth <= 0) || depth < 0)
				break;
		}
		operands.start = p + first.len;
		operands.len = (size_t)(stmt_end - operands.start);
		if (first.len && first.start[0] != '.' && visit(ctx, first, operands))
			return -1;
		p = stmt_end;
		if (p < end && *p == ';')
			p++;
	}
	return 0;
}

static int scan_visit(void *ctx, struct ptx_span mnemonic, struct ptx_span operands)
{
	return scan_instruction(ctx, mnemonic, operands);
}

static int scan_body(struct scan *s, struct ptx_span body)
{
	return for_each_instruction(body, scan_visit, s);
}

int ks_ptx_kernel_descriptors(const char *ptx, const char *name, struct ks_ptx_descriptors *out,
			      struct ks_error *err)
{
	struct ptx_module mod;
	struct scan s;
	const struct ptx_function *entry;
	int failed, ret = -1;

	memset(&s, 0, sizeof(s));
	if (module_parse(ptx, &mod, err))
		goto cleanup;
	entry = name ? find_function(&mod, (struct ptx_span){ name, strlen(name) }, 1) : NULL;
	if (!entry) {
		ks_fail(err, "the PTX has no kernel (.entry) called '%s'", name ? name : "(null)");
		goto cleanup;
	}
	failed = scan_body(&s, entry->body);
	/* s.callees grows while it is walked: callees of callees get appended. */
	for (size_t i = 0; !failed && i < s.n_callees; i++) {
		const struct ptx_function *fn = find_function(&mod, s.callees[i], 0);

		if (fn)
			failed = scan_body(&s, fn->body);
	}
	for (size_t i = 0; !failed && s.indirect_call && i < mod.n_functions; i++)
		if (!mod.functions[i].is_entry)
			failed = scan_body(&s, mod.functions[i].body);
	if (failed) {
		ks_fail(err, "out of memory reading PTX");
		goto cleanup;
	}
	*out = s.desc;
	ret = 0;
cleanup:
	free(s.callees);
	module_release(&mod);
	return ret;
}

int ks_ptx_has_entry(const char *ptx, const char *name)
{
	struct ptx_module mod;
	int found = 0;

	if (!name)
		return 0;
	if (!module_parse(ptx, &mod, NULL))
		found = find_function(&mod, (struct ptx_span){ name, strlen(name) }, 1) != NULL;
	module_release(&mod);
	return found;
}

static int push_name(char ***names, size_t *count, size_t *alloc, struct ptx_span name)
{
	char *copy;

	if (KS_ALLOC_TRY_GROW(*names, *count + 1, *alloc) < 0)
		return -1;
	copy = malloc(name.len + 1);
	if (!copy)
		return -1;
	memcpy(copy, name.start, name.len);
	copy[name.len] = '\0';
	(*names)[(*count)++] = copy;
	return 0;
}

static int has_name(char **names, size_t count, struct ptx_span name)
{
	for (size_t i = 0; i < count; i++)
		if (span_equals(name, names[i]))
			return 1;
	return 0;
}

/* Whether name occurs in text as a whole identifier; *at gets the first one. */
static int mentions(struct ptx_span text, struct ptx_span name, const char **at)
{
	const char *p = text.start, *end = text.start + text.len;

	for (; p + name.len <= end; p++) {
		if (memcmp(p, name.start, name.len))
			continue;
		if (p > text.start && (is_ident_char(p[-1]) || p[-1] == '.'))
			continue;
		if (p + name.len < end && is_ident_char(p[name.len]))
			continue;
		*at = p;
		return 1;
	}
	return 0;
}

/* ---- which stores can reach a module variable (taint analysis) ---- */

/*
 * Instructions whose result is computed from their sources: an address in
 * a source makes the destination an address of the same variable.
 */
static int propagates(struct ptx_span mnemonic)
{
	static const char *const ops[] = {
		"mov",	"cvta", "cvt",	"add",	"sub",	"mul",	"mad",	    "mul24", "mad24", "sad",
		"div",	"rem",	"abs",	"neg",	"min",	"max",	"shl",	    "shr",   "and",   "or",
		"xor",	"not",	"cnot", "lop3", "shf",	"bfe",	"bfi",	    "brev",  "popc",  "clz",
		"prmt", "selp", "slct", "setp", "set",	"fma",	"copysign", "testp", "bfind", "isspacep",
		"fns",	"dp4a", "dp2a", "addc", "subc", "madc",
	};
	struct ptx_span op = { mnemonic.start, 0 };

	while (op.len < mnemonic.len && mnemonic.start[op.len] != '.')
		op.len++;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (span_equals(op, ops[i]))
			return 1;
	return 0;
}

/* Instructions that may write memory through an address operand. */
static int writes_memory(struct ptx_span mnemonic)
{
	return starts_with(mnemonic, "st.") || span_equals(mnemonic, "st") || starts_with(mnemonic, "atom") ||
	       starts_with(mnemonic, "red") || starts_with(mnemonic, "multimem") ||
	       starts_with(mnemonic, "tensormap") || starts_with(mnemonic, "discard") ||
	       starts_with(mnemonic, "sust") || starts_with(mnemonic, "sured") ||
	       starts_with(mnemonic, "stmatrix") || starts_with(mnemonic, "applypriority") ||
	       starts_with(mnemonic, "mbarrier");
}

static int reads_memory(struct ptx_span mnemonic)
{
	return starts_with(mnemonic, "ld.") || span_equals(mnemonic, "ld") || starts_with(mnemonic, "ldu") ||
	       starts_with(mnemonic, "prefetch");
}

/*
 * The functions a module may call without defining them.  printf's
 * vprintf only reads its format string (which may be a string literal in
 * .global); assert() calls __assertfail.  Everything else (malloc and
 * free above all: the device heap outlives a call) is refused.
 */
static int allowed_extern(struct ptx_span name)
{
	return span_equals(name, "vprintf") || span_equals(name, "__assertfail");
}

struct taint {
	struct ptx_span name;  /* the variable */
	struct ptx_span *regs; /* registers that may hold its address */
	size_t n_regs, alloc_regs;
	struct ptx_span params[16]; /* .param slots of the call being set up that hold one */
	size_t n_params;
	int grew, may_write, oom;
};

static int is_tainted(const struct taint *t, struct ptx_span reg)
{
	for (size_t i = 0; i < t->n_regs; i++)
		if (t->regs[i].len == reg.len && !memcmp(t->regs[i].start, reg.start, reg.len))
			return 1;
	return 0;
}

static void taint_reg(struct taint *t, struct ptx_span reg)
{
	if (!reg.len || reg.start[0] != '%' || is_tainted(t, reg))
		return;
	if (KS_ALLOC_TRY_GROW(t->regs, t->n_regs + 1, t->alloc_regs) < 0) {
		t->oom = 1;
		return;
	}
	t->regs[t->n_regs++] = reg;
	t->grew = 1;
}

/* Whether text names the variable or a register that may hold its address. */
static int uses_taint(const struct taint *t, struct ptx_span text)
{
	const char *p = text.start, *end = text.start + text.len, *at;

	if (mentions(text, t->name, &at))
		return 1;
	while (p < end) {
		if (*p == '%' && (p == text.start || !is_ident_char(p[-1]))) {
			struct ptx_span reg = ident_at(p);

			if (reg.len > (size_t)(end - p))
				reg.len = (size_t)(end - p);
			if (is_tainted(t, reg))
				return 1;
			p += reg.len ? reg.len : 1;
		} else {
			p++;
		}
	}
	return 0;
}

/* The n-th top-level operand as raw text (brackets and braces included). */
static struct ptx_span operand_text(struct ptx_span operands, int n)
{
	const char *p = operands.start, *end = operands.start + operands.len, *start;
	int depth = 0;

	for (; p < end && n > 0; p++) {
		if (*p == '[' || *p == '{' || *p == '(')
			depth++;
		else if (*p == ']' || *p == '}' || *p == ')')
			depth--;
		else if (*p == ',' && depth == 0)
			n--;
	}
	if (n > 0)
		return (struct ptx_span){ end, 0 };
	start = p;
	for (depth = 0; p < end; p++) {
		if (*p == '[' || *p == '{' || *p == '(')
			depth++;
		else if (*p == ']' || *p == '}' || *p == ')')
			depth--;
		else if (*p == ',' && depth == 0)
			break;
	}
	return (struct ptx_span){ start, (size_t)(p - start) };
}

static int operand_count(struct ptx_span operands)
{
	int n = 0;

	while (operand_text(operands, n).len)
		n++;
	return n;
}

/* Every register named in text becomes tainted ("%rd1", "{%r1, %r2}", "%p1|%p2"). */
static void taint_regs_in(struct taint *t, struct ptx_span text)
{
	const char *p = text.start, *end = text.start + text.len;

	while (p < end) {
		if (*p == '%') {
			struct ptx_span reg = ident_at(p);

			if (reg.len > (size_t)(end - p))
				reg.len = (size_t)(end - p);
			taint_reg(t, reg);
			p += reg.len ? reg.len : 1;
		} else {
			p++;
		}
	}
}

/* The name inside "[param0+0]". */
static struct ptx_span bracket_name(struct ptx_span text)
{
	const char *p = text.start, *end = text.start + text.len;

	while (p < end && (*p == '[' || is_space(*p)))
		p++;
	{
		struct ptx_span name = ident_at(p);

		if (name.len > (size_t)(end - p))
			name.len = (size_t)(end - p);
		return name;
	}
}

/* call (ret), target, (args): is every tainted argument vprintf's format? */
static int call_is_harmless(struct taint *t, struct ptx_span operands)
{
	const char *p = operands.start, *end = operands.start + operands.len, *open;
	struct ptx_span target;
	int arg = 0;

	while (p < end && is_space(*p))
		p++;
	if (p < end && *p == '(') {
		while (p < end && *p != ')')
			p++;
		p++;
		while (p < end && (is_space(*p) || *p == ','))
			p++;
	}
	target = ident_at(p);
	open = memchr(p, '(', (size_t)(end - p));
	if (!open)
		return t->n_params == 0;
	for (p = open + 1; p < end && *p != ')';) {
		struct ptx_span a;

		while (p < end && (is_space(*p) || *p == ','))
			p++;
		a = ident_at(p);
		if (!a.len)
			break;
		for (size_t i = 0; i < t->n_params; i++)
			if (t->params[i].len == a.len && !memcmp(t->params[i].start, a.start, a.len) &&
			    !(arg == 0 && span_equals(target, "vprintf")))
				return 0;
		p += a.len;
		arg++;
	}
	return 1;
}

static int taint_visit(void *ctx, struct ptx_span mnemonic, struct ptx_span operands)
{
	struct taint *t = ctx;

	if (t->may_write)
		return 0;
	if (span_equals(mnemonic, "call") || starts_with(mnemonic, "call.")) {
		if (!call_is_harmless(t, operands))
			t->may_write = 1;
		t->n_params = 0;
		return 0;
	}
	if (!uses_taint(t, operands))
		return 0;
	if (starts_with(mnemonic, "st.param")) {
		/* an argument being set up: harmless only if it goes to vprintf's format */
		if (uses_taint(t, operand_text(operands, 0)) || t->n_params == 16)
			t->may_write = 1;
		else
			t->params[t->n_params++] = bracket_name(operand_text(operands, 0));
	} else if (reads_memory(mnemonic)) {
		/* the loaded value is the variable's contents, not its address */
	} else if (starts_with(mnemonic, "cp.")) {
		/* copies: a source may be the variable, never the destination */
		if (uses_taint(t, operand_text(operands, 0)))
			t->may_write = 1;
	} else if (writes_memory(mnemonic) || !propagates(mnemonic) || operand_count(operands) < 2) {
		t->may_write = 1; /* a store through it, or an instruction we cannot vouch for */
	} else {
		struct ptx_span dest = operand_text(operands, 0);
		struct ptx_span rest = { dest.start + dest.len,
					 (size_t)(operands.start + operands.len - (dest.start + dest.len)) };

		if (uses_taint(t, rest))
			taint_regs_in(t, dest);
	}
	return 0;
}

/*
 * Whether the module could change the variable declared by statement
 * own_decl.  An address of it may flow through any register arithmetic;
 * the module may change it if such an address reaches a store, an atomic,
 * the destination of a copy, a call (other than as vprintf's format) or
 * an instruction this analysis does not know, or if it initializes
 * another variable.  No relocatable device code: nothing outside the
 * module can name it.  Registers are tracked per function and without
 * regard to order (a register that ever holds the address counts
 * everywhere), which errs towards refusing.
 */
static int module_may_write(const struct ptx_module *mod, size_t own_decl, struct ptx_span name)
{
	struct taint t = { .name = name };
	const char *at, *eq;

	for (size_t i = 0; i < mod->n_decls; i++) {
		struct ptx_span d = mod->decls[i];

		if (i == own_decl) {
			/* only its own initializer, after '=', can name it a second time */
			eq = memchr(d.start, '=', d.len);
			if (!eq)
				continue;
			d.len -= (size_t)(eq - d.start);
			d.start = eq;
		}
		if (mentions(d, name, &at))
			return 1; /* its address initializes a variable */
	}
	for (size_t i = 0; i < mod->n_functions && !t.may_write; i++) {
		t.n_regs = 0;
		do {
			t.grew = 0;
			t.n_params = 0;
			for_each_instruction(mod->functions[i].body, taint_visit, &t);
		} while (t.grew && !t.may_write && !t.oom);
		if (t.oom)
			t.may_write = 1;
	}
	free(t.regs);
	return t.may_write;
}

/* The state space a module-scope declaration puts its variables in, or NULL. */
static const char *decl_space(struct ptx_span decl)
{
	static const char *const spaces[] = { ".global", ".const" };
	const char *p = decl.start, *end = decl.start + decl.len;

	while (p < end) {
		if (*p == '.' && (p == decl.start || is_space(p[-1])))
			for (size_t i = 0; i < sizeof(spaces) / sizeof(spaces[0]); i++)
				if (word_at(p).len == strlen(spaces[i]) &&
				    !memcmp(p, spaces[i], strlen(spaces[i])))
					return spaces[i];
		p++;
	}
	return NULL;
}

typedef int (*declared_fn)(void *ctx, const struct ptx_module *mod, size_t decl, struct ptx_span name);

/*
 * Call visit for each name declared by a statement such as
 * ".global .align 4 .u32 a, b[4] = {...}".
 */
static int for_each_declared(const struct ptx_module *mod, size_t index, declared_fn visit, void *ctx)
{
	struct ptx_span decl = mod->decls[index];
	const char *p = decl.start, *end = decl.start + decl.len;
	int depth = 0, want_name = 1;

	while (p < end) {
		if (is_space(*p)) {
			p++;
		} else if (want_name && *p == '.') {
			p += word_at(p).len;
			if (p < end && *p == '(') { /* .attribute(.managed) */
				const char *close = matching_paren(p);

				p = close && close < end ? close + 1 : end;
			}
		} else if (want_name && isdigit((unsigned char)*p)) {
			p += word_at(p).len; /* the operand of .align */
		} else if (want_name && is_ident_char(*p)) {
			struct ptx_span name = ident_at(p);

			if (visit(ctx, mod, index, name))
				return -1;
			p += name.len;
			want_name = 0;
		} else {
			if (*p == '[' || *p == '{' || *p == '(')
				depth++;
			else if (*p == ']' || *p == '}' || *p == ')')
				depth--;
			else if (*p == ',' && depth == 0)
				want_name = 1;
			p++;
		}
	}
	return 0;
}

struct name_list {
	char **names;
	size_t count, alloc;
	int only_mutable;
};

static int collect_declared(void *ctx, const struct ptx_module *mod, size_t decl, struct ptx_span name)
{
	struct name_list *list = ctx;

	if (list->only_mutable && !module_may_write(mod, decl, name))
		return 0;
	return push_name(&list->names, &list->count, &list->alloc, name);
}

static int module_variables(const char *ptx, int only_mutable, char ***names, size_t *count,
			    struct ks_error *err)
{
	struct ptx_module mod;
	struct name_list list = { NULL, 0, 0, only_mutable };
	int ret = -1;

	*names = NULL;
	*count = 0;
	if (module_parse(ptx, &mod, err))
		goto cleanup;
	for (size_t i = 0; i < mod.n_decls; i++) {
		if (!decl_space(mod.decls[i]))
			continue;
		if (for_each_declared(&mod, i, collect_declared, &list)) {
			ks_fail(err, "out of memory reading PTX");
			ks_ptx_names_free(list.names, list.count);
			goto cleanup;
		}
	}
	*names = list.names;
	*count = list.count;
	ret = 0;
cleanup:
	module_release(&mod);
	return ret;
}

int ks_ptx_mutable_globals(const char *ptx, char ***names, size_t *count, struct ks_error *err)
{
	return module_variables(ptx, 1, names, count, err);
}

int ks_ptx_variables(const char *ptx, char ***names, size_t *count, struct ks_error *err)
{
	return module_variables(ptx, 0, names, count, err);
}

int ks_ptx_forbidden_calls(const char *ptx, char ***names, size_t *count, struct ks_error *err)
{
	struct ptx_module mod;
	size_t alloc = 0;
	int ret = -1;

	*names = NULL;
	*count = 0;
	if (module_parse(ptx, &mod, err))
		goto cleanup;
	for (size_t i = 0; i < mod.n_externs; i++) {
		struct ptx_span name = mod.externs[i];
		const char *at;
		int used = 0;

		if (allowed_extern(name) || has_name(*names, *count, name))
			continue;
		for (size_t f = 0; f < mod.n_functions && !used; f++)
			used = mentions(mod.functions[f].body, name, &at);
		if (used && push_name(names, count, &alloc, name)) {
			ks_fail(err, "out of memory reading PTX");
			ks_ptx_names_free(*names, *count);
			*names = NULL;
			*count = 0;
			goto cleanup;
		}
	}
	ret = 0;
cleanup:
	module_release(&mod);
	return ret;
}

/* ---- an entry's signature and launch bounds ---- */

/* ".u64" -> bytes and class; 0 if not a scalar type. */
static int param_type(struct ptx_span word, enum ks_ptx_param_class *cls)
{
	struct ptx_span t = { word.start + 1, word.len - 1 };
	int bytes = word.len > 1 ? type_bytes(t) : 0;

	if (!bytes)
		return 0;
	*cls = t.start[0] == 'f' || starts_with(t, "bf") ? KS_PTX_PARAM_FLOAT
	       : t.start[0] == 'b'			 ? KS_PTX_PARAM_BITS
							 : KS_PTX_PARAM_INT;
	return bytes;
}

/* One ".param .align 8 .b8 name[16]" or ".param .u64 .ptr .global name". */
static void parse_param(struct ptx_span text, struct ks_ptx_param *out)
{
	const char *p = text.start, *end = text.start + text.len;
	int elem = 0, count = 1;

	memset(out, 0, sizeof(*out));
	while (p < end) {
		if (*p == '.') {
			struct ptx_span w = word_at(p);
			enum ks_ptx_param_class cls;
			int bytes = param_type(w, &cls);

			if (w.len > (size_t)(end - p))
				w.len = (size_t)(end - p);
			if (bytes) {
				elem = bytes;
				out->cls = cls;
				snprintf(out->type, sizeof(out->type), "%.*s", (int)(w.len - 1), w.start + 1);
			}
			p += w.len ? w.len : 1;
		} else if (*p == '[') {
			count = atoi(p + 1);
			out->cls = KS_PTX_PARAM_AGGREGATE;
			p++;
		} else {
			p++;
		}
	}
	out->bytes = elem * (count > 0 ? count : 1);
	if (out->cls == KS_PTX_PARAM_AGGREGATE)
		snprintf(out->type, sizeof(out->type), "%d-byte struct", out->bytes);
}

/* ".maxntid 128, 1, 1" -> dims (missing ones 1). */
static void parse_dims3(const char *p, const char *end, int dims[3])
{
	dims[0] = dims[1] = dims[2] = 1;
	for (int i = 0; i < 3 && p < end; i++) {
		while (p < end && (is_space(*p) || *p == ','))
			p++;
		if (p >= end || !isdigit((unsigned char)*p))
			break;
		dims[i] = atoi(p);
		while (p < end && isdigit((unsigned char)*p))
			p++;
	}
}

int ks_ptx_entry(const char *ptx, const char *name, struct ks_ptx_entry *out, struct ks_error *err)
{
	struct ptx_module mod;
	const struct ptx_function *fn;
	const char *p, *end, *open, *close;
	size_t alloc_params = 0;
	int ret = -1;

	memset(out, 0, sizeof(*out));
	if (module_parse(ptx, &mod, err))
		goto cleanup;
	fn = name ? find_function(&mod, (struct ptx_span){ name, strlen(name) }, 1) : NULL;
	if (!fn) {
		ks_fail(err, "the PTX has no kernel (.entry) called '%s'", name ? name : "(null)");
		goto cleanup;
	}
	p = fn->name.start + fn->name.len;
	end = fn->body.start;
	open = memchr(p, '(', (size_t)(end - p));
	close = open ? matching_paren(open) : NULL;
	if (open && close && close < end) {
		const char *q = open + 1;

		while (q < close) {
			const char *stop = q;
			int depth = 0;

			while (stop < close && (depth || *stop != ',')) {
				depth += *stop == '[' ? 1 : *stop == ']' ? -1 : 0;
				stop++;
			}
			if (stop > q) {
				struct ptx_span param = { q, (size_t)(stop - q) };
				const char *at;

				if (mentions(param, (struct ptx_span){ ".param", 6 }, &at) ||
				    memchr(q, '.', (size_t)(stop - q))) {
					if (KS_ALLOC_TRY_GROW(out->params, out->n_params + 1, alloc_params) <
					    0) {
						ks_fail(err, "out of memory reading PTX");
						goto cleanup;
					}
					parse_param(param, &out->params[out->n_params++]);
				}
			}
			q = stop + 1;
		}
		p = close + 1;
	}
	/* directives between the parameter list and the body */
	while (p < end) {
		if (*p == '.') {
			struct ptx_span w = word_at(p);
			const char *stop = p + w.len;

			while (stop < end && *stop != '.' && *stop != '{')
				stop++;
			if (span_equals(w, ".maxntid"))
				parse_dims3(p + w.len, stop, out->maxntid);
			else if (span_equals(w, ".reqntid"))
				parse_dims3(p + w.len, stop, out->reqntid);
			p = stop;
		} else {
			p++;
		}
	}
	ret = 0;
cleanup:
	if (ret)
		ks_ptx_entry_release(out);
	module_release(&mod);
	return ret;
}

void ks_ptx_entry_release(struct ks_ptx_entry *entry)
{
	free(entry->params);
	memset(entry, 0, sizeof(*entry));
}

void ks_ptx_names_free(char **names, size_t count)
{
	if (!names)
		return;
	for (size_t i = 0; i < count; i++)
		free(names[i]);
	free(names);
}

const char *ks_tensor_cores_name(enum ks_tensor_cores tc)
{
	switch (tc) {
	case KS_TC_NONE:
		return "none";
	case KS_TC_MMA:
		return "mma";
	case KS_TC_WGMMA:
		return "wgmma";
	}
	return "unknown";
}

const char *ks_async_copy_name(enum ks_async_copy ac)
{
	switch (ac) {
	case KS_ASYNC_NONE:
		return "none";
	case KS_ASYNC_CP_ASYNC:
		return "cp.async";
	case KS_ASYNC_TMA:
		return "tma";
	}
	return "unknown";
}
