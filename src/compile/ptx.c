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
#include <stdint.h>
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

/*
 * The analysis is a graph, built in one pass over the module and searched
 * once, so its cost is linear in the PTX (an earlier version re-ran every
 * function until no register changed, once per variable: a chain of n
 * movs cost n^3).  Nodes are the module variables, each function's
 * registers, the .param slots of each call being set up, and one node per
 * instruction that moves several sources into several destinations.  An
 * edge a -> b says "if a holds an address of a variable, b may too"; a
 * node is bad when such an address there may be written through (a store,
 * an atomic, a copy's destination, a call other than as vprintf's format,
 * an instruction the analysis does not know, another variable's
 * initializer).  A variable may change exactly when a bad node can be
 * reached from it, found by one search backwards from the bad nodes.
 */
struct name_slot {
	const char *name; /* NULL: empty */
	uint32_t len, scope, node;
};

struct taint_graph {
	struct name_slot *table; /* open addressing, a power of two long */
	size_t table_size, table_used;
	size_t n_nodes, alloc_bad;
	unsigned char *bad;
	uint32_t (*edges)[2]; /* from, to */
	size_t n_edges, alloc_edges;
	uint32_t *found; /* the nodes one piece of operand text names */
	size_t n_found, alloc_found;
	uint32_t *slots; /* the .param slot nodes of the call being set up */
	size_t n_slots, alloc_slots;
	uint32_t scope;	   /* of registers: 1 + the function's index */
	uint32_t sequence; /* of .param slots: counts calls, with the top bit set */
	size_t n_vars;	   /* nodes 0 .. n_vars-1 are the variables */
	int oom;
};

#define SCOPE_VARIABLES 0u
#define SCOPE_SLOTS 0x80000000u

static uint32_t name_hash(uint32_t scope, struct ptx_span name)
{
	uint32_t h = 2166136261u ^ scope;

	for (size_t i = 0; i < name.len; i++)
		h = (h ^ (unsigned char)name.start[i]) * 16777619u;
	return h;
}

static uint32_t new_node(struct taint_graph *g)
{
	if (KS_ALLOC_TRY_GROW(g->bad, g->n_nodes + 1, g->alloc_bad) < 0) {
		g->oom = 1;
		return 0;
	}
	g->bad[g->n_nodes] = 0;
	return (uint32_t)g->n_nodes++;
}

static int table_grow(struct taint_graph *g)
{
	size_t size = g->table_size ? 2 * g->table_size : 1024;
	struct name_slot *table = calloc(size, sizeof(*table));

	if (!table)
		return -1;
	for (size_t i = 0; i < g->table_size; i++) {
		const struct name_slot *e = &g->table[i];
		size_t k;

		if (!e->name)
			continue;
		k = name_hash(e->scope, (struct ptx_span){ e->name, e->len }) & (size_t)(size - 1);
		while (table[k].name)
			k = (k + 1) & (size - 1);
		table[k] = *e;
	}
	free(g->table);
	g->table = table;
	g->table_size = size;
	return 0;
}

/* The node of name in scope; a new one when create is set and there is none; -1 when absent. */
static long name_node(struct taint_graph *g, uint32_t scope, struct ptx_span name, int create)
{
	size_t k;

	if (!g->table_size && table_grow(g) < 0) {
		g->oom = 1;
		return -1;
	}
	k = name_hash(scope, name) & (g->table_size - 1);
	for (; g->table[k].name; k = (k + 1) & (g->table_size - 1)) {
		const struct name_slot *e = &g->table[k];

		if (e->scope == scope && e->len == name.len && !memcmp(e->name, name.start, name.len))
			return e->node;
	}
	if (!create || name.len > UINT32_MAX)
		return -1;
	if (2 * (g->table_used + 1) > g->table_size) {
		if (table_grow(g) < 0) {
			g->oom = 1;
			return -1;
		}
		return name_node(g, scope, name, create);
	}
	g->table[k] = (struct name_slot){ name.start, (uint32_t)name.len, scope, new_node(g) };
	g->table_used++;
	return g->oom ? -1 : (long)g->table[k].node;
}

static void add_edge(struct taint_graph *g, uint32_t from, uint32_t to)
{
	if (KS_ALLOC_TRY_GROW(g->edges, g->n_edges + 1, g->alloc_edges) < 0) {
		g->oom = 1;
		return;
	}
	g->edges[g->n_edges][0] = from;
	g->edges[g->n_edges][1] = to;
	g->n_edges++;
}

static void found_push(struct taint_graph *g, uint32_t node)
{
	if (KS_ALLOC_TRY_GROW(g->found, g->n_found + 1, g->alloc_found) < 0) {
		g->oom = 1;
		return;
	}
	g->found[g->n_found++] = node;
}

/*
 * The nodes text names, into g->found (emptied first): registers ("%rd1",
 * "{%r1, %r2}", "%p1|%p2") and, unless registers_only, module variables
 * named as whole identifiers ("gtable", "[gtable+4]"; not ".gtable").
 */
static void find_names(struct taint_graph *g, struct ptx_span text, int registers_only)
{
	const char *p = text.start, *end = text.start + text.len;

	g->n_found = 0;
	while (p < end) {
		struct ptx_span run = { p, 0 };
		long node;

		if (!is_ident_char(*p) || (p > text.start && is_ident_char(p[-1]))) {
			p++;
			continue;
		}
		while (p + run.len < end && is_ident_char(p[run.len]))
			run.len++;
		if (run.start[0] == '%')
			node = name_node(g, g->scope, run, 1);
		else if (!registers_only && !(p > text.start && p[-1] == '.'))
			node = name_node(g, SCOPE_VARIABLES, run, 0);
		else
			node = -1;
		if (node >= 0)
			found_push(g, (uint32_t)node);
		p += run.len;
	}
}

static void mark_found_bad(struct taint_graph *g)
{
	for (size_t i = 0; i < g->n_found; i++)
		g->bad[g->found[i]] = 1;
}

/* call (ret), target, (args): a slot set up for it is bad unless it is vprintf's format. */
static void taint_call(struct taint_graph *g, struct ptx_span operands)
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
	open = p < end ? memchr(p, '(', (size_t)(end - p)) : NULL;
	if (!open) {
		for (size_t i = 0; i < g->n_slots; i++)
			g->bad[g->slots[i]] = 1;
	}
	for (p = open ? open + 1 : end; p < end && *p != ')';) {
		struct ptx_span a;
		long slot;

		while (p < end && (is_space(*p) || *p == ','))
			p++;
		a = ident_at(p);
		if (!a.len)
			break;
		if (a.len > (size_t)(end - p))
			a.len = (size_t)(end - p);
		slot = name_node(g, g->sequence, a, 0);
		if (slot >= 0 && !(arg == 0 && span_equals(target, "vprintf")))
			g->bad[slot] = 1;
		p += a.len;
		arg++;
	}
	/* the next call's slots are new nodes, whatever their names */
	g->sequence = SCOPE_SLOTS | ((g->sequence + 1) & ~SCOPE_SLOTS);
	g->n_slots = 0;
}

static int taint_visit(void *ctx, struct ptx_span mnemonic, struct ptx_span operands)
{
	struct taint_graph *g = ctx;
	struct ptx_span dest, rest;

	if (g->oom)
		return 1;
	if (span_equals(mnemonic, "call") || starts_with(mnemonic, "call.")) {
		taint_call(g, operands);
		return g->oom;
	}
	if (reads_memory(mnemonic))
		return 0; /* the loaded value is the variable's contents, not its address */
	dest = operand_text(operands, 0);
	rest = (struct ptx_span){ dest.start + dest.len,
				  (size_t)(operands.start + operands.len - (dest.start + dest.len)) };
	if (starts_with(mnemonic, "st.param")) {
		/* an argument being set up: harmless only if it goes to vprintf's format */
		long slot;

		find_names(g, dest, 0);
		mark_found_bad(g);
		find_names(g, rest, 0);
		if (!g->n_found)
			return g->oom;
		slot = name_node(g, g->sequence, bracket_name(dest), 1);
		if (slot < 0 || KS_ALLOC_TRY_GROW(g->slots, g->n_slots + 1, g->alloc_slots) < 0) {
			g->oom = 1;
			return 1;
		}
		g->slots[g->n_slots++] = (uint32_t)slot;
		for (size_t i = 0; i < g->n_found; i++)
			add_edge(g, g->found[i], (uint32_t)slot);
	} else if (starts_with(mnemonic, "cp.")) {
		/* copies: a source may be the variable, never the destination */
		find_names(g, dest, 0);
		mark_found_bad(g);
	} else if (writes_memory(mnemonic) || !propagates(mnemonic) || !dest.len ||
		   !operand_text(operands, 1).len) {
		/* a store through it, or an instruction we cannot vouch for */
		find_names(g, operands, 0);
		mark_found_bad(g);
	} else {
		size_t n_sources;
		uint32_t via;

		find_names(g, rest, 0);
		n_sources = g->n_found;
		if (!n_sources)
			return g->oom;
		if (n_sources == 1) {
			via = g->found[0];
		} else {
			/* many sources to many destinations: through one node, not every pair */
			via = new_node(g);
			for (size_t i = 0; i < n_sources && !g->oom; i++)
				add_edge(g, g->found[i], via);
		}
		find_names(g, dest, 1);
		for (size_t i = 0; i < g->n_found; i++)
			add_edge(g, via, g->found[i]);
	}
	return g->oom;
}

/*
 * Which variables the module may change: mutable[i] for variable node i.
 * Registers are tracked per function and without regard to order (a
 * register that ever holds an address counts everywhere), which errs
 * towards refusing.
 */
static int taint_solve(struct taint_graph *g, const struct ptx_module *mod, const size_t *own_decl)
{
	size_t *count = NULL, *stack = NULL, n_stack = 0;
	uint32_t *preds = NULL;
	int ret = -1;

	/* an address in a module-scope initializer: another variable holds it */
	for (size_t d = 0; d < mod->n_decls && !g->oom; d++) {
		struct ptx_span decl = mod->decls[d];
		const char *eq = memchr(decl.start, '=', decl.len);

		g->scope = 0; /* no registers at module scope */
		find_names(g, decl, 0);
		for (size_t i = 0; i < g->n_found; i++) {
			uint32_t v = g->found[i];

			/* naming itself in its own declaration, before the initializer, is the declaration */
			if (v < g->n_vars && own_decl[v] == d)
				continue;
			g->bad[v] = 1;
		}
		if (eq && g->n_found) {
			/* in its own initializer it does count: look again after the '=' */
			find_names(g, (struct ptx_span){ eq, decl.len - (size_t)(eq - decl.start) }, 0);
			mark_found_bad(g);
		}
	}
	for (size_t f = 0; f < mod->n_functions && !g->oom; f++) {
		g->scope = (uint32_t)(f + 1);
		g->n_slots = 0;
		g->sequence = SCOPE_SLOTS | ((g->sequence + 1) & ~SCOPE_SLOTS);
		for_each_instruction(mod->functions[f].body, taint_visit, g);
	}
	if (g->oom)
		goto cleanup;
	/* predecessors of each node (counting sort of the edges by target), then search back from the bad */
	count = calloc(g->n_nodes + 1, sizeof(*count));
	preds = malloc((g->n_edges ? g->n_edges : 1) * sizeof(*preds));
	stack = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof(*stack));
	if (!count || !preds || !stack)
		goto cleanup;
	for (size_t e = 0; e < g->n_edges; e++)
		count[g->edges[e][1] + 1]++;
	for (size_t n = 0; n < g->n_nodes; n++)
		count[n + 1] += count[n];
	for (size_t e = 0; e < g->n_edges; e++)
		preds[count[g->edges[e][1]]++] = g->edges[e][0];
	/* count[n] is now the end of n's predecessors, and count[n - 1] (0 for n = 0) their start */
	for (size_t n = 0; n < g->n_nodes; n++)
		if (g->bad[n])
			stack[n_stack++] = n;
	while (n_stack) {
		size_t n = stack[--n_stack];

		for (size_t i = n ? count[n - 1] : 0; i < count[n]; i++) {
			uint32_t from = preds[i];

			if (!g->bad[from]) {
				g->bad[from] = 1;
				stack[n_stack++] = from;
			}
		}
	}
	ret = 0;
cleanup:
	free(count);
	free(preds);
	free(stack);
	return ret;
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
	struct taint_graph *graph; /* NULL: every variable; else only those it finds mutable */
	size_t *own_decl;	   /* per variable node: the statement that declares it */
	size_t alloc_own;
	int registering; /* first pass: give every variable its node */
};

static int collect_declared(void *ctx, const struct ptx_module *mod, size_t decl, struct ptx_span name)
{
	struct name_list *list = ctx;
	struct taint_graph *g = list->graph;
	long node;

	(void)mod;
	if (g && list->registering) {
		node = name_node(g, SCOPE_VARIABLES, name, 0);
		if (node >= 0) {
			g->bad[node] = 1; /* declared twice: each declaration names it */
			return 0;
		}
		node = name_node(g, SCOPE_VARIABLES, name, 1);
		if (node < 0 || KS_ALLOC_TRY_GROW(list->own_decl, (size_t)node + 1, list->alloc_own) < 0)
			return -1;
		list->own_decl[node] = decl;
		g->n_vars = (size_t)node + 1;
		return 0;
	}
	if (g && !g->bad[name_node(g, SCOPE_VARIABLES, name, 0)])
		return 0;
	return push_name(&list->names, &list->count, &list->alloc, name);
}

static int module_variables(const char *ptx, int only_mutable, char ***names, size_t *count,
			    struct ks_error *err)
{
	struct ptx_module mod;
	struct taint_graph graph = { 0 };
	struct name_list list = { 0 };
	int ret = -1;

	*names = NULL;
	*count = 0;
	if (module_parse(ptx, &mod, err))
		goto cleanup;
	if (only_mutable) {
		list.graph = &graph;
		list.registering = 1;
		for (size_t i = 0; i < mod.n_decls; i++)
			if (decl_space(mod.decls[i]) && for_each_declared(&mod, i, collect_declared, &list)) {
				ks_fail(err, "out of memory reading PTX");
				goto cleanup;
			}
		list.registering = 0;
		if (taint_solve(&graph, &mod, list.own_decl) < 0) {
			ks_fail(err, "out of memory reading PTX");
			goto cleanup;
		}
	}
	for (size_t i = 0; i < mod.n_decls; i++) {
		if (!decl_space(mod.decls[i]))
			continue;
		if (for_each_declared(&mod, i, collect_declared, &list)) {
			ks_fail(err, "out of memory reading PTX");
			ks_ptx_names_free(list.names, list.count);
			list.names = NULL;
			goto cleanup;
		}
	}
	*names = list.names;
	*count = list.count;
	ret = 0;
cleanup:
	free(list.own_decl);
	free(graph.table);
	free(graph.bad);
	free(graph.edges);
	free(graph.found);
	free(graph.slots);
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

int ks_ptx_analyze(const char *ptx, const char *const *kernels, size_t n_kernels, struct ks_ptx_analysis *out,
		   struct ks_error *err)
{
	memset(out, 0, sizeof(*out));
	out->kernels = calloc(n_kernels ? n_kernels : 1, sizeof(*out->kernels));
	if (!out->kernels)
		return ks_fail(err, "out of memory reading PTX");
	out->n_kernels = n_kernels;
	for (size_t i = 0; i < n_kernels; i++) {
		struct ks_ptx_kernel_facts *k = &out->kernels[i];

		k->name = strdup(kernels[i]);
		if (!k->name) {
			ks_fail(err, "out of memory reading PTX");
			goto fail;
		}
		k->found = ks_ptx_has_entry(ptx, kernels[i]);
		if (!k->found)
			continue;
		if (ks_ptx_entry(ptx, kernels[i], &k->entry, err) < 0 ||
		    ks_ptx_kernel_descriptors(ptx, kernels[i], &k->desc, err) < 0)
			goto fail;
	}
	if (ks_ptx_forbidden_calls(ptx, &out->forbidden_calls, &out->n_forbidden_calls, err) < 0 ||
	    ks_ptx_mutable_globals(ptx, &out->mutable_globals, &out->n_mutable_globals, err) < 0 ||
	    ks_ptx_variables(ptx, &out->variables, &out->n_variables, err) < 0)
		goto fail;
	return 0;
fail:
	ks_ptx_analysis_release(out);
	return -1;
}

void ks_ptx_analysis_release(struct ks_ptx_analysis *analysis)
{
	if (!analysis)
		return;
	for (size_t i = 0; i < analysis->n_kernels; i++) {
		free(analysis->kernels[i].name);
		ks_ptx_entry_release(&analysis->kernels[i].entry);
	}
	free(analysis->kernels);
	ks_ptx_names_free(analysis->forbidden_calls, analysis->n_forbidden_calls);
	ks_ptx_names_free(analysis->mutable_globals, analysis->n_mutable_globals);
	ks_ptx_names_free(analysis->variables, analysis->n_variables);
	memset(analysis, 0, sizeof(*analysis));
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
