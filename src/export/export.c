/*
 * export.c - writing a candidate as plain CUDA: its kernels as NVRTC
 * compiled them (a cubin, loaded through the driver: add_driver() says
 * why not the text), a generated host launcher and header, a JSON record,
 * the source to read and a README (the contract is in
 * include/ksearch/export.h).
 *
 * The launcher is generated from the candidate's ksearch block.  Its
 * expressions are translated to C here rather than evaluated, because the
 * var axes are only known when the caller runs it: names stay C names (var
 * axes are the launcher's int arguments, const axes int locals, params the
 * #defines), arithmetic is widened to int64_t as ksearch evaluates it, and
 * cdiv/min/max become small helpers.  A divisor that depends on a var axis
 * gets a run-time check, so no size a caller passes can make the host
 * divide by zero.
 */
#include "ksearch/export/export.h"
#include "ksearch/archive/record.h"

#include <ctype.h>
#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ksearch/base/fs.h"
#include "ksearch/base/util.h"

#ifndef KS_VERSION
#define KS_VERSION "unknown"
#endif

/* Dynamic shared memory above this needs cudaFuncAttributeMaxDynamicSharedMemorySize. */
#define SMEM_DEFAULT_LIMIT (48 * 1024)

/*
 * Names the launcher's code uses (its own locals start with ksx_): no
 * param, tensor, axis or scratch buffer may have one.
 */
static const char *const reserved_names[] = {
	"workspace", "workspace_bytes", "stream", "grid", "block", "smem",
};

/* C and C++ keywords: a name that is one cannot be a launcher argument. */
static const char *const keywords[] = {
	"alignas",
	"alignof",
	"and",
	"and_eq",
	"asm",
	"auto",
	"bitand",
	"bitor",
	"bool",
	"break",
	"case",
	"catch",
	"char",
	"char16_t",
	"char32_t",
	"char8_t",
	"class",
	"compl",
	"concept",
	"const",
	"const_cast",
	"consteval",
	"constexpr",
	"constinit",
	"continue",
	"co_await",
	"co_return",
	"co_yield",
	"decltype",
	"default",
	"delete",
	"do",
	"double",
	"dynamic_cast",
	"else",
	"enum",
	"explicit",
	"export",
	"extern",
	"false",
	"float",
	"for",
	"friend",
	"goto",
	"if",
	"inline",
	"int",
	"long",
	"mutable",
	"namespace",
	"new",
	"noexcept",
	"not",
	"not_eq",
	"nullptr",
	"operator",
	"or",
	"or_eq",
	"private",
	"protected",
	"public",
	"register",
	"reinterpret_cast",
	"requires",
	"restrict",
	"return",
	"short",
	"signed",
	"sizeof",
	"static",
	"static_assert",
	"static_cast",
	"struct",
	"switch",
	"template",
	"this",
	"thread_local",
	"throw",
	"true",
	"try",
	"typedef",
	"typeid",
	"typename",
	"union",
	"unsigned",
	"using",
	"virtual",
	"void",
	"volatile",
	"wchar_t",
	"while",
	"xor",
	"xor_eq",
};

_Static_assert(KS_EXPORT_ALIGN == 256, "the generated helpers (helper_place, the launcher) align to 256");

/* Types */

/* The C++ type of a dtype; in C (c_lang) the 16-bit floats are their _raw structs. */
static const char *c_type(enum ks_dtype dtype, int c_lang)
{
	switch (dtype) {
	case KS_DTYPE_BFLOAT16:
		return c_lang ? "__nv_bfloat16_raw" : "__nv_bfloat16";
	case KS_DTYPE_FLOAT16:
		return c_lang ? "__half_raw" : "__half";
	case KS_DTYPE_FLOAT32:
		return "float";
	case KS_DTYPE_INT32:
		return "int32_t";
	case KS_DTYPE_INT64:
		return "int64_t";
	}
	return "void";
}

static int is_half_type(enum ks_dtype dtype)
{
	return dtype == KS_DTYPE_BFLOAT16 || dtype == KS_DTYPE_FLOAT16;
}

/* Params */

int ks_export_params(const struct ks_candidate *cand, const json_t *params, int64_t *values,
		     struct ks_error *err)
{
	const char *key;
	json_t *value;

	if (params && !json_is_object(params))
		return ks_fail(err, "params: expected an object of NAME -> value");
	json_object_foreach((json_t *)params, key, value)
	{
		size_t i;

		for (i = 0; i < cand->n_params; i++)
			if (!strcmp(cand->params[i].name, key))
				break;
		if (i == cand->n_params) {
			struct ks_strbuf known;

			ks_strbuf_init(&known);
			for (size_t k = 0; k < cand->n_params; k++)
				ks_strbuf_addf(&known, "%s%s", k ? ", " : "", cand->params[k].name);
			ks_fail(err,
				"params: the record has param '%s', which the source does not declare "
				"(its params: %s)",
				key, cand->n_params ? known.buf : "none");
			ks_strbuf_release(&known);
			return -1;
		}
	}
	for (size_t i = 0; i < cand->n_params; i++) {
		const struct ks_param *p = &cand->params[i];
		struct ks_strbuf list;
		json_int_t v;
		size_t k;

		value = json_object_get(params, p->name);
		if (!value)
			return ks_fail(err, "params: the record gives no value for the source's param '%s'",
				       p->name);
		if (!json_is_integer(value))
			return ks_fail(err, "params.%s: expected an integer", p->name);
		v = json_integer_value(value);
		for (k = 0; k < p->n_values; k++)
			if (p->values[k] == (int64_t)v)
				break;
		if (k < p->n_values) {
			values[i] = (int64_t)v;
			continue;
		}
		ks_strbuf_init(&list);
		for (k = 0; k < p->n_values; k++)
			ks_strbuf_addf(&list, "%s%lld", k ? ", " : "", (long long)p->values[k]);
		ks_fail(err, "params.%s: %lld is not among the values the source declares [%s]", p->name,
			(long long)v, list.buf);
		ks_strbuf_release(&list);
		return -1;
	}
	return 0;
}

/* Expressions to C */

/*
 * A translated sub-expression.  The tree comes from expr.h's parser, the
 * one every reader of the grammar uses; this walk only decides the C
 * spelling: int64_t arithmetic, parentheses where C needs them, the
 * helpers for cdiv/min/max, and guards for divisors that depend on a var
 * axis.
 */
struct piece {
	struct ks_strbuf text;
	int wide;     /* its C type is int64_t (else int: a literal, a name, or -x of one) */
	int uses_var; /* it depends on a var axis */
	int atom;     /* one operand as it stands: a name, number, call or (...) */
};

struct translator {
	const struct ks_expr *expr; /* the parsed expression, with its source for messages */
	const char *where;
	const struct ks_op *op;
	const struct ks_candidate *cand;
	unsigned char *axis_used; /* per op axis: the expression names it */
	struct ks_strbuf *guards; /* conditions that make it invalid, " || "-joined */
	unsigned *helpers;	  /* enum helper bits */
	struct ks_error *err;
};

enum helper {
	HELPER_CDIV = 1 << 0,
	HELPER_MIN = 1 << 1,
	HELPER_MAX = 1 << 2,
};

static void piece_init(struct piece *pc)
{
	ks_strbuf_init(&pc->text);
	pc->wide = pc->uses_var = pc->atom = 0;
}

/* Replace pc's text with a printf of it (fmt takes the old text once). */
static void piece_wrap(struct piece *pc, const char *fmt)
{
	struct ks_strbuf sb;

	ks_strbuf_init(&sb);
	ks_strbuf_addf(&sb, fmt, pc->text.buf);
	ks_strbuf_release(&pc->text);
	pc->text = sb;
}

static void add_guard(struct translator *t, const struct piece *divisor, const char *bad)
{
	if (t->guards->len)
		ks_strbuf_adds(t->guards, " || ");
	if (divisor->atom)
		ks_strbuf_addf(t->guards, "%s %s", divisor->text.buf, bad);
	else
		ks_strbuf_addf(t->guards, "(%s) %s", divisor->text.buf, bad);
}

static int tr_node(struct translator *t, const struct ks_expr_node *node, struct piece *out);

/* left = left OP right, in int64_t: widen the left operand when neither is wide yet. */
static void combine(struct piece *left, char op, struct piece *right)
{
	struct ks_strbuf sb;

	ks_strbuf_init(&sb);
	if (!left->wide && !right->wide)
		ks_strbuf_addf(&sb, "(int64_t)%s", left->text.buf);
	else
		ks_strbuf_adds(&sb, left->text.buf);
	ks_strbuf_addf(&sb, " %s %s", ks_expr_op_text(op), right->text.buf);
	ks_strbuf_release(&left->text);
	left->text = sb;
	left->wide = 1;
	left->atom = 0;
	left->uses_var |= right->uses_var;
}

static int tr_name(struct translator *t, const char *name, struct piece *out)
{
	for (size_t i = 0; i < t->op->n_axes; i++) {
		if (strcmp(t->op->axes[i].name, name))
			continue;
		t->axis_used[i] = 1;
		out->uses_var = !t->op->axes[i].is_const;
		ks_strbuf_adds(&out->text, name);
		out->atom = 1;
		return 0;
	}
	for (size_t i = 0; i < t->cand->n_params; i++) {
		if (strcmp(t->cand->params[i].name, name))
			continue;
		ks_strbuf_adds(&out->text, name);
		out->atom = 1;
		return 0;
	}
	return ks_fail(t->err, "%s: in \"%s\": '%s' is neither an axis of op %s nor a param", t->where,
		       t->expr->src, name, t->op->key);
}

/* A literal in decimal (the source may say 007); beyond int, C would pick long on its own: say it. */
static void tr_number(int64_t value, struct piece *out)
{
	uint64_t magnitude = value < 0 ? 0 - (uint64_t)value : (uint64_t)value;
	char digits[32];

	if (value == INT64_MIN) {
		ks_strbuf_adds(&out->text, "INT64_MIN");
		out->wide = 1;
		out->atom = 1;
		return;
	}
	if (magnitude > 2147483647)
		snprintf(digits, sizeof(digits), "INT64_C(%llu)", (unsigned long long)magnitude);
	else
		snprintf(digits, sizeof(digits), "%llu", (unsigned long long)magnitude);
	out->wide = magnitude > 2147483647;
	/* a literal written -5 reads as -5; -(INT64_C(...)) as any negation */
	if (value < 0)
		ks_strbuf_addf(&out->text, isdigit((unsigned char)digits[0]) ? "-%s" : "-(%s)", digits);
	else
		ks_strbuf_adds(&out->text, digits);
	out->atom = value >= 0;
}

/* cdiv(a, b) -> ksx_cdiv(a, b); min(a, b, c) -> ksx_min(a, ksx_min(b, c)) */
static int tr_call(struct translator *t, const struct ks_expr_node *node, struct piece *out)
{
	struct piece *args = ks_calloc(node->n_kids, sizeof(*args));
	unsigned fn = node->func == KS_EXPR_CDIV  ? HELPER_CDIV
		      : node->func == KS_EXPR_MIN ? HELPER_MIN
						  : HELPER_MAX;
	size_t n = 0;
	int ret = -1;

	for (; n < node->n_kids; n++) {
		piece_init(&args[n]);
		if (tr_node(t, node->kids[n], &args[n]) < 0) {
			n++;
			goto cleanup;
		}
	}
	*t->helpers |= fn;
	if (fn == HELPER_CDIV && args[1].uses_var)
		add_guard(t, &args[1], "<= 0");
	for (size_t i = 0; i + 1 < n; i++)
		ks_strbuf_addf(&out->text, "ksx_%s(%s, ", node->name, args[i].text.buf);
	ks_strbuf_adds(&out->text, args[n - 1].text.buf);
	for (size_t i = 0; i + 1 < n; i++)
		ks_strbuf_adds(&out->text, ")");
	for (size_t i = 0; i < n; i++)
		out->uses_var |= args[i].uses_var;
	out->wide = 1;
	out->atom = 1;
	ret = 0;
cleanup:
	for (size_t i = 0; i < n; i++)
		ks_strbuf_release(&args[i].text);
	free(args);
	return ret;
}

/* A run of '*', '/', '%' or of '+', '-': left to right, as C groups them too. */
static int tr_chain(struct translator *t, const struct ks_expr_node *node, struct piece *out)
{
	if (tr_node(t, node->kids[0], out) < 0)
		return -1;
	for (size_t i = 1; i < node->n_kids; i++) {
		char op = node->kids[i]->op;
		struct piece right;

		piece_init(&right);
		if (tr_node(t, node->kids[i], &right) < 0) {
			ks_strbuf_release(&right.text);
			return -1;
		}
		if ((op == '/' || op == '%') && right.uses_var)
			add_guard(t, &right, "== 0");
		/*
		 * a * -b is fine in C, but a / -b reads better as a / (-b); a - -b
		 * needs them; the operands of comparisons and logic are wrapped
		 * whole, so no C precedence can regroup them
		 */
		if (((op == '*' || op == '/' || op == '%') && !right.atom) ||
		    (op == '-' && right.text.buf[0] == '-') || (!strchr("+-*/%", op) && !right.atom))
			piece_wrap(&right, "(%s)");
		if (!strchr("+-*/%", op) && !out->atom && i == 1)
			piece_wrap(out, "(%s)");
		combine(out, op, &right);
		ks_strbuf_release(&right.text);
	}
	return 0;
}

static int tr_node(struct translator *t, const struct ks_expr_node *node, struct piece *out)
{
	struct piece inner;
	int rc;

	switch (node->kind) {
	case KS_EXPR_NUMBER:
		tr_number(node->value, out);
		return 0;
	case KS_EXPR_NAME:
		return tr_name(t, node->name, out);
	case KS_EXPR_CALL:
		return tr_call(t, node, out);
	case KS_EXPR_CHAIN:
		return tr_chain(t, node, out);
	case KS_EXPR_GROUP:
	case KS_EXPR_NEG:
	case KS_EXPR_NOT:
		piece_init(&inner);
		rc = tr_node(t, node->kids[0], &inner);
		if (!rc && node->kind == KS_EXPR_NOT) {
			ks_strbuf_addf(&out->text, inner.atom ? "!%s" : "!(%s)", inner.text.buf);
			out->atom = 0;
		} else if (!rc && node->kind == KS_EXPR_GROUP) {

			ks_strbuf_addf(&out->text, inner.atom ? "%s" : "(%s)", inner.text.buf);
			out->atom = 1;
		} else if (!rc) {
			/*
			 * -(x) unless x is a number: a param may be redefined as
			 * -DNEG=-3, and "--3" would not compile
			 */
			ks_strbuf_addf(&out->text,
				       isdigit((unsigned char)inner.text.buf[0]) ? "-%s" : "-(%s)",
				       inner.text.buf);
			out->atom = 0;
		}
		out->wide = inner.wide;
		out->uses_var = inner.uses_var;
		ks_strbuf_release(&inner.text);
		return rc;
	}
	return ks_expr_fail(t->expr, node->at, t->err, "internal error: node kind %d", (int)node->kind);
}

/* The generator's state: what the op and candidate are, and what the code uses. */
struct gen {
	const struct ks_op *op;
	const struct ks_candidate *cand;
	const int64_t *params;
	const json_t *record;			 /* as stored: what the export's JSON copies */
	struct ks_record rec;			 /* the same, read */
	const struct ks_export_lineage *lineage; /* NULL: none */
	const char *name;
	const char *arch;
	const struct ks_export_image *image; /* the kernels as compiled */
	unsigned helpers;		     /* enum helper */
	unsigned char *axis_in_launcher;     /* per axis: the launcher's code names it */
	unsigned char *axis_in_layout;	     /* per axis: the workspace layout names it */
	int has_half;			     /* a bfloat16/float16 tensor or scalar */
	int has_bf16, has_fp16;
	struct ks_error *err;
};

/*
 * Translate src (an expression of the candidate at "where") into *c, and
 * the conditions under which it divides by zero into *guards (may be
 * empty).  used marks the axes it names.
 */
static int translate(struct gen *g, const char *src, const char *where, unsigned char *used,
		     struct ks_strbuf *c, struct ks_strbuf *guards, int *uses_var)
{
	struct translator t = {
		.where = where,
		.op = g->op,
		.cand = g->cand,
		.axis_used = used,
		.guards = guards,
		.helpers = &g->helpers,
		.err = g->err,
	};
	struct ks_expr *expr;
	struct piece out;
	int rc;

	if (ks_expr_parse(src, &expr, g->err) < 0) {
		ks_error_prefix(g->err, "%s", where);
		return -1;
	}
	t.expr = expr;
	piece_init(&out);
	rc = tr_node(&t, expr->root, &out);
	if (!rc) {
		ks_strbuf_adds(c, out.text.buf);
		if (uses_var)
			*uses_var = out.uses_var;
	}
	ks_strbuf_release(&out.text);
	ks_expr_free(expr);
	return rc;
}

/* Names */

static int name_taken(const struct gen *g, const char *name, const char **what)
{
	const struct ks_op *op = g->op;

	for (size_t i = 0; i < op->n_inputs; i++)
		if (!strcmp(op->inputs[i].name, name))
			return *what = "input", 1;
	for (size_t i = 0; i < op->n_outputs; i++)
		if (!strcmp(op->outputs[i].name, name))
			return *what = "output", 1;
	for (size_t i = 0; i < op->n_axes; i++)
		if (!strcmp(op->axes[i].name, name))
			return *what = "axis", 1;
	for (size_t i = 0; i < g->cand->n_scratch; i++)
		if (!strcmp(g->cand->scratch[i].name, name))
			return *what = "scratch buffer", 1;
	for (size_t i = 0; i < g->cand->n_params; i++)
		if (!strcmp(g->cand->params[i].name, name))
			return *what = "param", 1;
	return 0;
}

/*
 * Every name the launcher uses must be a C identifier that means one
 * thing: tensors, axes and scratch become C variables, params macros.
 */
static int check_names(const struct gen *g)
{
	const struct ks_op *op = g->op;
	const char *what;

	for (size_t i = 0; i < sizeof(reserved_names) / sizeof(reserved_names[0]); i++)
		if (name_taken(g, reserved_names[i], &what))
			return ks_fail(g->err,
				       "the %s '%s' has a name the generated launcher uses for its own "
				       "argument or variable; rename it to export",
				       what, reserved_names[i]);
	for (size_t i = 0; i < op->n_inputs + op->n_outputs + op->n_axes + g->cand->n_scratch; i++) {
		const char *name;

		if (i < op->n_inputs)
			name = op->inputs[i].name;
		else if (i < op->n_inputs + op->n_outputs)
			name = op->outputs[i - op->n_inputs].name;
		else if (i < op->n_inputs + op->n_outputs + op->n_axes)
			name = op->axes[i - op->n_inputs - op->n_outputs].name;
		else
			name = g->cand->scratch[i - op->n_inputs - op->n_outputs - op->n_axes].name;
		if (!ks_is_identifier(name))
			return ks_fail(g->err,
				       "'%s' is not a C identifier, so it cannot name a launcher argument",
				       name);
		for (size_t k = 0; k < sizeof(keywords) / sizeof(keywords[0]); k++)
			if (!strcmp(name, keywords[k]))
				return ks_fail(
					g->err,
					"'%s' is a C or C++ keyword, so it cannot name a launcher argument",
					name);
		if (!strncmp(name, "ksx_", 4))
			return ks_fail(g->err,
				       "'%s': names starting with ksx_ are the generated launcher's own",
				       name);
	}
	for (size_t i = 0; i < g->cand->n_params; i++)
		if (!strncmp(g->cand->params[i].name, "ksx_", 4))
			return ks_fail(
				g->err,
				"param '%s': names starting with ksx_ are the generated launcher's own",
				g->cand->params[i].name);
	for (size_t i = 0; i < op->n_inputs + op->n_outputs; i++) {
		const char *name = i < op->n_inputs ? op->inputs[i].name : op->outputs[i - op->n_inputs].name;

		for (size_t a = 0; a < op->n_axes; a++)
			if (!strcmp(name, op->axes[a].name))
				return ks_fail(
					g->err,
					"op %s has a tensor and an axis both called '%s'; the launcher "
					"needs one argument per name",
					op->key, name);
	}
	return 0;
}

/* Text helpers */

/*
 * Append len bytes of text that will stand inside a C comment: a star
 * followed by a slash in it (a record's path or family, as an imported
 * file gives them) would end the comment and put the rest in the code, so
 * a blank goes between them.
 */
static void add_comment_text(struct ks_strbuf *sb, const char *text, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		ks_strbuf_add(sb, &text[i], 1);
		if (text[i] == '*' && i + 1 < len && text[i + 1] == '/')
			ks_strbuf_adds(sb, " ");
	}
}

/*
 * Append text word-wrapped to width columns: the first line starts with
 * first, the others with prefix; a newline in text starts a new line.
 * Text under a comment's prefix (" * ") cannot end the comment.
 */
static void add_wrapped2(struct ks_strbuf *sb, const char *text, const char *first, const char *prefix,
			 size_t width)
{
	const int in_comment = strchr(prefix, '*') || strchr(first, '*');

	size_t col = 0;
	const char *p = text;
	int line = 0;

	while (*p) {
		const char *word = p;
		size_t len;

		if (*p == '\n') {
			if (col) {
				ks_strbuf_adds(sb, "\n");
			} else {
				/* an empty line: the prefix without its trailing blanks */
				const char *lead = line++ ? prefix : first;
				size_t n = strlen(lead);

				while (n && lead[n - 1] == ' ')
					n--;
				ks_strbuf_add(sb, lead, n);
				ks_strbuf_adds(sb, "\n");
			}
			col = 0;
			p++;
			continue;
		}
		while (*p && !isspace((unsigned char)*p))
			p++;
		len = (size_t)(p - word);
		if (len) {
			if (col && col + 1 + len > width) {
				ks_strbuf_adds(sb, "\n");
				col = 0;
			}
			if (!col) {
				const char *lead = line++ ? prefix : first;

				ks_strbuf_adds(sb, lead);
				col = strlen(lead);
			} else {
				ks_strbuf_adds(sb, " ");
				col++;
			}
			if (in_comment)
				add_comment_text(sb, word, len);
			else
				ks_strbuf_add(sb, word, len);
			col += len;
		}
		while (*p == ' ' || *p == '\t' || *p == '\r')
			p++;
	}
	if (col)
		ks_strbuf_adds(sb, "\n");
}

static void add_wrapped(struct ks_strbuf *sb, const char *text, const char *prefix, size_t width)
{
	add_wrapped2(sb, text, prefix, prefix, width);
}

/* "[batch_size, num_qo_heads=32, head_dim=128]" or "scalar". */
static void format_shape(const struct ks_op *op, const struct ks_tensor *t, struct ks_strbuf *sb)
{
	if (t->is_scalar) {
		ks_strbuf_adds(sb, "scalar");
		return;
	}
	ks_strbuf_adds(sb, "[");
	for (size_t d = 0; d < t->rank; d++) {
		int a = ks_op_axis_index(op, t->shape[d]);

		ks_strbuf_addf(sb, "%s%s", d ? ", " : "", t->shape[d]);
		if (a >= 0 && op->axes[a].is_const)
			ks_strbuf_addf(sb, "=%lld", (long long)op->axes[a].value);
	}
	ks_strbuf_adds(sb, "]");
}

/* "SPLITS=16 WARPS=8" or "none". */
static void format_params(const struct gen *g, struct ks_strbuf *sb)
{
	for (size_t i = 0; i < g->cand->n_params; i++)
		ks_strbuf_addf(sb, "%s%s=%lld", i ? " " : "", g->cand->params[i].name,
			       (long long)g->params[i]);
	if (!g->cand->n_params)
		ks_strbuf_adds(sb, "none");
}

const char *ks_export_origin(const struct ks_record *rec, const struct ks_export_lineage *lineage)
{
	const struct ks_record *seed;

	if (!lineage || lineage->missing || !lineage->n_steps)
		return NULL;
	seed = lineage->steps[0];
	if (seed->n_parents || !seed->family || !*seed->family || !rec->family ||
	    !strcmp(seed->family, rec->family))
		return NULL;
	return seed->family;
}

/* "candidate #3 (family split_kv; params SPLITS=16 ...)", "(family knob-6, from split_kv; ..." */
static void describe_candidate(const struct gen *g, struct ks_strbuf *sb)
{
	const char *origin = ks_export_origin(&g->rec, g->lineage);

	if (g->rec.id)
		ks_strbuf_addf(sb, "candidate #%llu", (unsigned long long)g->rec.id);
	else
		ks_strbuf_adds(sb, "the candidate");
	ks_strbuf_addf(sb, " (family %s", *g->rec.family ? g->rec.family : "unknown");
	if (origin)
		ks_strbuf_addf(sb, ", from %s", origin);
	ks_strbuf_adds(sb, "; params ");
	format_params(g, sb);
	ks_strbuf_adds(sb, ")");
}

/* "measured on NVIDIA H200 (sm_90a): fitness 3.10 ..." */
static void describe_measurement(const struct gen *g, struct ks_strbuf *sb)
{
	const struct ks_record *rec = &g->rec;

	ks_strbuf_addf(sb, "measured on %s (%s)", *rec->gpu ? rec->gpu : "an unrecorded GPU", g->arch);
	if (rec->has & KS_RECORD_FITNESS)
		ks_strbuf_addf(sb,
			       ": fitness %.3f (the geometric mean over the op's benchmark workloads of the "
			       "reference kernel's time over this one's)",
			       rec->result.fitness);
	if (rec->has & KS_RECORD_SOL_FRACTION)
		ks_strbuf_addf(sb, ", at %.1f%% of speed of light", 100 * rec->result.sol_fraction);
}

/* Signatures */

enum sig_flavour {
	SIG_CXX,	/* prototype for C++ */
	SIG_C,		/* prototype for C: 16-bit floats as their _raw structs */
	SIG_DEFINITION, /* definition: unused arguments unnamed */
};

/*
 * The launcher's (with_tensors) or workspace function's argument list,
 * wrapped at 100 columns with continuation lines indented by indent;
 * returns the number of arguments (0: nothing added, not even "void").
 * used marks the var axes the definition names (NULL: all).
 */
static size_t add_signature(const struct gen *g, struct ks_strbuf *sb, int with_tensors, enum sig_flavour fl,
			    const unsigned char *used, size_t start_col, const char *indent)
{
	const struct ks_op *op = g->op;
	int c_lang = fl == SIG_C, def = fl == SIG_DEFINITION;
	size_t col = start_col, n = 0;
	struct ks_strbuf arg;

	ks_strbuf_init(&arg);
	for (size_t i = 0; i < op->n_inputs + op->n_outputs + op->n_axes + 3; i++) {
		ks_strbuf_release(&arg);
		ks_strbuf_init(&arg);
		if (i < op->n_inputs + op->n_outputs) {
			const struct ks_tensor *t;
			int is_out = i >= op->n_inputs;

			if (!with_tensors)
				continue;
			t = is_out ? &op->outputs[i - op->n_inputs] : &op->inputs[i];
			if (t->is_scalar)
				ks_strbuf_addf(&arg, "%s %s", c_type(t->dtype, c_lang), t->name);
			else
				ks_strbuf_addf(&arg, "%s%s *%s", is_out ? "" : "const ",
					       c_type(t->dtype, c_lang), t->name);
		} else if (i < op->n_inputs + op->n_outputs + op->n_axes) {
			size_t a = i - op->n_inputs - op->n_outputs;

			if (op->axes[a].is_const)
				continue;
			if (def && used && !used[a])
				ks_strbuf_addf(&arg, "int /* %s: not needed */", op->axes[a].name);
			else
				ks_strbuf_addf(&arg, "int %s", op->axes[a].name);
		} else {
			size_t k = i - op->n_inputs - op->n_outputs - op->n_axes;

			if (!with_tensors)
				continue;
			if (k == 0)
				ks_strbuf_adds(&arg, def && !g->cand->n_scratch
							     ? "void * /* workspace: not needed */"
							     : "void *workspace");
			else if (k == 1)
				ks_strbuf_adds(&arg, def && !g->cand->n_scratch
							     ? "size_t /* workspace_bytes */"
							     : "size_t workspace_bytes");
			else
				ks_strbuf_adds(&arg, "cudaStream_t stream");
		}
		if (n && col + 2 + arg.len > 100) {
			ks_strbuf_addf(sb, ",\n%s", indent);
			col = strlen(indent) + 8 * (size_t)(indent[0] == '\t');
		} else if (n) {
			ks_strbuf_adds(sb, ", ");
			col += 2;
		}
		ks_strbuf_adds(sb, arg.buf);
		col += arg.len;
		n++;
	}
	ks_strbuf_release(&arg);
	return n;
}

/* The var axes as call arguments: "batch_size, num_pages, ...". */
static void add_var_axes(const struct ks_op *op, struct ks_strbuf *sb)
{
	size_t n = 0;

	for (size_t a = 0; a < op->n_axes; a++)
		if (!op->axes[a].is_const)
			ks_strbuf_addf(sb, "%s%s", n++ ? ", " : "", op->axes[a].name);
}

/* The header */

/* One row of the argument table: name, type and direction in columns, the rest wrapped beside them. */
static void add_argument_row(struct ks_strbuf *sb, const char *name, const char *type, const char *dir,
			     const char *text)
{
	char first[128], prefix[128];

	snprintf(first, sizeof(first), " *   %-16s %-24s %-4s ", name, type, dir);
	snprintf(prefix, sizeof(prefix), " *%*s", (int)strlen(first) - 2, "");
	add_wrapped2(sb, text, first, prefix, 100);
}

static void add_argument_doc(const struct gen *g, struct ks_strbuf *sb)
{
	const struct ks_op *op = g->op;
	struct ks_strbuf text;
	char type[64];

	ks_strbuf_init(&text);
	ks_strbuf_adds(sb,
		       " * Arguments, in order.  Tensors are dense row-major (C order) arrays in device\n"
		       " * memory, shaped in the op's axes (=N: a const axis the kernels are built for):\n");
	for (size_t i = 0; i < op->n_inputs + op->n_outputs; i++) {
		int is_out = i >= op->n_inputs;
		const struct ks_tensor *t = is_out ? &op->outputs[i - op->n_inputs] : &op->inputs[i];

		ks_strbuf_release(&text);
		ks_strbuf_init(&text);
		if (t->is_scalar)
			snprintf(type, sizeof(type), "%s", c_type(t->dtype, 0));
		else
			snprintf(type, sizeof(type), "%s%s *", is_out ? "" : "const ", c_type(t->dtype, 0));
		format_shape(op, t, &text);
		if (t->description)
			ks_strbuf_addf(&text, ": %s", t->description);
		add_argument_row(sb, t->name, type, is_out ? "out" : "in", text.buf);
	}
	for (size_t a = 0; a < op->n_axes; a++)
		if (!op->axes[a].is_const)
			add_argument_row(sb, op->axes[a].name, "int", "in",
					 op->axes[a].description ? op->axes[a].description
								 : "a size (var axis)");
	add_argument_row(sb, "workspace", "void *", "tmp", "see Workspace");
	add_argument_row(sb, "workspace_bytes", "size_t", "in", "its size in bytes");
	add_argument_row(sb, "stream", "cudaStream_t", "in", "see Stream");
	ks_strbuf_release(&text);
}

/* op.json's "constraints" (informative strings), or NULL; the caller decrefs. */
static json_t *load_constraints(const struct ks_op *op)
{
	char *path = ks_path_join(op->dir, "op.json");
	json_t *root = json_load_file(path, 0, NULL), *list = NULL;

	free(path);
	if (root) {
		list = json_object_get(root, "constraints");
		if (json_is_array(list) && json_array_size(list))
			json_incref(list);
		else
			list = NULL;
	}
	json_decref(root);
	return list;
}

static void add_scratch_doc(const struct gen *g, struct ks_strbuf *sb)
{
	struct ks_strbuf text;

	ks_strbuf_init(&text);
	if (!g->cand->n_scratch) {
		ks_strbuf_addf(
			&text,
			"Workspace: this kernel needs none: %s_workspace_bytes() returns 0 and workspace may "
			"be NULL.  The arguments are there so that the interface stays the same for any "
			"kernel "
			"exported for this op (another one may need scratch).",
			g->name);
	} else {
		ks_strbuf_addf(
			&text,
			"Workspace: %s_workspace_bytes(sizes) bytes of device memory that the caller "
			"allocates and passes, with its size, to every call; the launcher allocates nothing. "
			" "
			"It must be aligned to %d bytes (cudaMalloc's are).  It holds the kernel's scratch "
			"buffers, each at a %d-byte aligned offset:",
			g->name, KS_EXPORT_ALIGN, KS_EXPORT_ALIGN);
		for (size_t i = 0; i < g->cand->n_scratch; i++)
			ks_strbuf_addf(&text, "%s %s, %s[%s]%s", i ? ";" : "", g->cand->scratch[i].name,
				       ks_dtype_name(g->cand->scratch[i].dtype), g->cand->scratch[i].size,
				       g->cand->scratch[i].zeroed
					       ? ", zeroed by the launcher (cudaMemsetAsync on "
						 "the stream) before every call"
					       : "");
		ks_strbuf_adds(&text,
			       " (in the op's axes and the params above).  It needs no initialisation and "
			       "holds nothing of use after the call.  Calls queued on one stream may share a "
			       "workspace; "
			       "calls that may run at the same time (other streams) need one each.");
	}
	add_wrapped(sb, text.buf, " * ", 100);
	ks_strbuf_release(&text);
}

static void add_header(const struct gen *g, struct ks_strbuf *sb)
{
	const struct ks_op *op = g->op;
	json_t *constraints = load_constraints(op);
	struct ks_strbuf text;
	char guard[160];
	size_t i;
	json_t *c;

	ks_strbuf_init(&text);
	ks_strbuf_addf(&text, "%s.h - %s (ksearch op %s) as plain CUDA, exported by ksearch %s.", g->name,
		       op->name, op->key, KS_VERSION);
	ks_strbuf_adds(sb, "/*\n");
	add_wrapped(sb, text.buf, " * ", 100);
	ks_strbuf_adds(sb, " *\n");
	ks_strbuf_release(&text);
	ks_strbuf_init(&text);
	if (op->description) {
		add_wrapped(sb, op->description, " * ", 100);
		ks_strbuf_adds(sb, " *\n");
	}
	ks_strbuf_adds(&text, "The kernel is ");
	describe_candidate(g, &text);
	ks_strbuf_adds(&text, ", ");
	describe_measurement(g, &text);
	ks_strbuf_addf(&text,
		       ".  %s.json has the timings per workload and the kernel's lineage; README.md says "
		       "how to build it.",
		       g->name);
	add_wrapped(sb, text.buf, " * ", 100);
	ks_strbuf_adds(sb, " *\n");
	add_argument_doc(g, sb);
	ks_strbuf_release(&text);
	ks_strbuf_init(&text);
	for (size_t a = 0, n = 0; a < op->n_axes; a++)
		if (op->axes[a].is_const)
			ks_strbuf_addf(&text, "%s%s = %lld", n++ ? ", " : "Const axes: ", op->axes[a].name,
				       (long long)op->axes[a].value);
	if (text.len) {
		ks_strbuf_adds(&text, ".  The kernels are built for these values only.");
		ks_strbuf_adds(sb, " *\n");
		add_wrapped(sb, text.buf, " * ", 100);
	}
	if (constraints) {
		ks_strbuf_release(&text);
		ks_strbuf_init(&text);
		ks_strbuf_adds(sb, " *\n");
		ks_strbuf_adds(&text, "The caller keeps the op's constraints (nothing checks them):");
		json_array_foreach(constraints, i, c) if (json_is_string(c))
			ks_strbuf_addf(&text, "%s %s", i ? ";" : "", json_string_value(c));
		ks_strbuf_adds(&text, ".");
		add_wrapped(sb, text.buf, " * ", 100);
	}
	ks_strbuf_adds(sb, " *\n");
	add_scratch_doc(g, sb);
	ks_strbuf_adds(sb, " *\n");
	add_wrapped(
		sb,
		"Stream: the kernels are queued on stream, in order, and the call returns without waiting "
		"(0 is the default stream).  The outputs are ready, and the inputs and the workspace free "
		"for "
		"other use, once the stream has passed this point (cudaStreamSynchronize, an event, or later "
		"work on the same stream).  Inputs are only read; every element of the outputs is written.  "
		"Nothing is kept between calls.",
		" * ", 100);
	ks_strbuf_adds(sb, " *\n");
	ks_strbuf_release(&text);
	ks_strbuf_init(&text);
	ks_strbuf_addf(
		&text,
		"Returns cudaSuccess once the kernels are queued; cudaErrorInvalidValue when the workspace "
		"is NULL, misaligned or smaller than %s_workspace_bytes() says, or when the sizes make a "
		"size "
		"expression divide by zero; cudaErrorInvalidConfiguration when the sizes give a launch "
		"outside CUDA's limits (an empty grid included); cudaErrorNoKernelImageForDevice when the "
		"device does not run %s code (the kernels are its cubin); cudaErrorInvalidKernelImage when "
		"the driver cannot load that cubin; cudaErrorSymbolNotFound when the driver lacks the "
		"library API of CUDA 12; "
		"else the error of the first call that failed, a launch's as the driver reports it (its "
		"codes are the runtime's for everything a launch returns).  Faults inside the kernels "
		"surface at the next synchronisation, as for any launch.  The pointers must belong to the "
		"current device, which must run %s code.",
		g->name, g->arch, g->arch);
	add_wrapped(sb, text.buf, " * ", 100);
	ks_strbuf_adds(sb, " */\n");

	snprintf(guard, sizeof(guard), "%s_H", g->name);
	for (char *p = guard; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	ks_strbuf_addf(sb,
		       "#ifndef %s\n#define %s\n\n#include <stddef.h>\n#include <stdint.h>\n\n"
		       "#include <cuda_runtime.h>\n",
		       guard, guard);
	if (g->has_bf16)
		ks_strbuf_adds(sb, "#include <cuda_bf16.h>\n");
	if (g->has_fp16)
		ks_strbuf_adds(sb, "#include <cuda_fp16.h>\n");
	ks_strbuf_adds(sb, "\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
	ks_strbuf_addf(sb, "/* Bytes of workspace %s_launch() needs for these sizes (0: none). */\n",
		       g->name);
	ks_strbuf_addf(sb, "size_t %s_workspace_bytes(", g->name);
	if (!add_signature(g, sb, 0, SIG_CXX, NULL, strlen(g->name) + 24, "\t"))
		ks_strbuf_adds(sb, "void");
	ks_strbuf_adds(sb, ");\n\n");
	ks_strbuf_addf(sb, "/* Queue the kernels on stream (the arguments are described above). */\n");
	if (g->has_half)
		ks_strbuf_adds(sb, "#ifdef __cplusplus\n");
	ks_strbuf_addf(sb, "cudaError_t %s_launch(", g->name);
	add_signature(g, sb, 1, SIG_CXX, NULL, strlen(g->name) + 20, "\t");
	ks_strbuf_adds(sb, ");\n");
	if (g->has_half) {
		ks_strbuf_adds(sb, "#else\n/* C has no arithmetic 16-bit float types; the _raw structs are "
				   "the same two bytes. */\n");
		ks_strbuf_addf(sb, "cudaError_t %s_launch(", g->name);
		add_signature(g, sb, 1, SIG_C, NULL, strlen(g->name) + 20, "\t");
		ks_strbuf_adds(sb, ");\n#endif\n");
	}
	ks_strbuf_addf(sb, "\n#ifdef __cplusplus\n}\n#endif\n\n#endif /* %s */\n", guard);
	ks_strbuf_release(&text);
	json_decref(constraints);
}

/* The launcher */

/* What one launch needs, translated; smem_mode says whether to raise the shared-memory limit. */
enum smem_mode { SMEM_NEVER, SMEM_ALWAYS, SMEM_CHECK };

struct launch_code {
	struct ks_strbuf dims[7]; /* grid x, y, z, block x, y, z, smem */
	struct ks_strbuf guards;
	enum smem_mode smem_mode;
};

struct scratch_code {
	struct ks_strbuf count;
	struct ks_strbuf guards;
};

/* The value of an expression that names no var axis: const axes and params are known. */
static int eval_fixed(const struct gen *g, const char *src, int64_t *value)
{
	struct ks_env env;
	int rc = 0;

	ks_env_init(&env);
	for (size_t a = 0; a < g->op->n_axes && !rc; a++)
		if (g->op->axes[a].is_const)
			rc = ks_env_set(&env, g->op->axes[a].name, g->op->axes[a].value, g->err);
	for (size_t i = 0; i < g->cand->n_params && !rc; i++)
		rc = ks_env_set(&env, g->cand->params[i].name, g->params[i], g->err);
	if (!rc)
		rc = ks_expr_eval(src, &env, value, g->err);
	ks_env_release(&env);
	return rc;
}

static int translate_plan(struct gen *g, struct launch_code *lc, struct scratch_code *sc)
{
	const struct ks_candidate *cand = g->cand;
	static const char axis_name[3] = { 'x', 'y', 'z' };
	char where[200];

	for (size_t i = 0; i < cand->n_scratch; i++) {
		snprintf(where, sizeof(where), "scratch.%s", cand->scratch[i].name);
		if (translate(g, cand->scratch[i].size, where, g->axis_in_layout, &sc[i].count, &sc[i].guards,
			      NULL) < 0)
			return -1;
	}
	for (size_t l = 0; l < cand->n_launches; l++) {
		const struct ks_launch *launch = &cand->launches[l];
		int uses_var = 0;

		for (size_t d = 0; d < 3; d++) {
			snprintf(where, sizeof(where), "launch[%zu] (%s).grid.%c", l, launch->kernel,
				 axis_name[d]);
			if (d >= launch->grid_rank)
				ks_strbuf_adds(&lc[l].dims[d], "1");
			else if (translate(g, launch->grid[d], where, g->axis_in_launcher, &lc[l].dims[d],
					   &lc[l].guards, NULL) < 0)
				return -1;
			snprintf(where, sizeof(where), "launch[%zu] (%s).block.%c", l, launch->kernel,
				 axis_name[d]);
			if (d >= launch->block_rank)
				ks_strbuf_adds(&lc[l].dims[3 + d], "1");
			else if (translate(g, launch->block[d], where, g->axis_in_launcher,
					   &lc[l].dims[3 + d], &lc[l].guards, NULL) < 0)
				return -1;
		}
		snprintf(where, sizeof(where), "launch[%zu] (%s).smem", l, launch->kernel);
		if (translate(g, launch->smem, where, g->axis_in_launcher, &lc[l].dims[6], &lc[l].guards,
			      &uses_var) < 0)
			return -1;
		if (uses_var) {
			lc[l].smem_mode = SMEM_CHECK;
		} else {
			int64_t smem;

			if (eval_fixed(g, launch->smem, &smem) < 0) {
				ks_error_prefix(g->err, "%s", where);
				return -1;
			}
			lc[l].smem_mode = smem > SMEM_DEFAULT_LIMIT ? SMEM_ALWAYS : SMEM_NEVER;
		}
		for (size_t a = 0; a < launch->n_args; a++)
			if (launch->args[a].kind == KS_ARG_AXIS)
				g->axis_in_launcher[launch->args[a].index] = 1;
	}
	/* the launcher passes every var axis to the workspace layout */
	if (cand->n_scratch)
		for (size_t a = 0; a < g->op->n_axes; a++)
			if (!g->op->axes[a].is_const)
				g->axis_in_launcher[a] = 1;
	return 0;
}

static void add_const_locals(const struct gen *g, struct ks_strbuf *sb, const unsigned char *used)
{
	size_t n = 0;

	for (size_t a = 0; a < g->op->n_axes; a++) {
		if (!g->op->axes[a].is_const || !used[a])
			continue;
		ks_strbuf_addf(sb, "\tconst int %s = %lld;\n", g->op->axes[a].name,
			       (long long)g->op->axes[a].value);
		n++;
	}
	if (n)
		ks_strbuf_adds(sb, "\n");
}

static const char helper_config[] =
	"/* One launch's configuration, in the int64_t arithmetic ksearch evaluates it in. */\n"
	"struct ksx_config {\n"
	"\tint64_t grid[3], block[3], smem;\n"
	"};\n\n"
	"/*\n"
	" * CUDA's launch limits, as ksearch checks them: grid x in [1, 2^31), y and z\n"
	" * in [1, 65535]; block x and y in [1, 1024], z in [1, 64], at most 1024\n"
	" * threads; dynamic shared memory in [0, 2^31).\n"
	" */\n"
	"inline bool ksx_config_ok(const ksx_config &c)\n"
	"{\n"
	"\tconst int64_t grid_max[3] = {2147483647, 65535, 65535}, block_max[3] = {1024, 1024, 64};\n\n"
	"\tfor (int d = 0; d < 3; d++)\n"
	"\t\tif (c.grid[d] < 1 || c.grid[d] > grid_max[d] || c.block[d] < 1 || c.block[d] > block_max[d])\n"
	"\t\t\treturn false;\n"
	"\treturn c.block[0] * c.block[1] * c.block[2] <= 1024 && c.smem >= 0 && c.smem <= 2147483647;\n"
	"}\n\n";

static const char helper_cdiv[] = "/* ceil(a / b) for b > 0, negative a included: ksearch's cdiv. */\n"
				  "inline int64_t ksx_cdiv(int64_t a, int64_t b)\n"
				  "{\n"
				  "\treturn a / b + (a % b > 0);\n"
				  "}\n\n";

static const char helper_min[] = "inline int64_t ksx_min(int64_t a, int64_t b)\n"
				 "{\n"
				 "\treturn a < b ? a : b;\n"
				 "}\n\n";

static const char helper_max[] = "inline int64_t ksx_max(int64_t a, int64_t b)\n"
				 "{\n"
				 "\treturn a > b ? a : b;\n"
				 "}\n\n";

static const char helper_place[] =
	"/*\n"
	" * Put count elements of size bytes at the next 256-byte boundary of a\n"
	" * workspace of *total bytes; false when count is negative or too large.\n"
	" */\n"
	"inline bool ksx_place(int64_t *total, int64_t count, int64_t size, size_t *offset)\n"
	"{\n"
	"\tif (count < 0 || count > (INT64_MAX - *total - 256) / size)\n"
	"\t\treturn false;\n"
	"\t*offset = (size_t)*total;\n"
	"\t*total += (count * size + 255) / 256 * 256;\n"
	"\treturn true;\n"
	"}\n\n";

/* The index of launch l's kernel among the candidate's distinct kernels, in order of first launch. */
static size_t kernel_index(const struct ks_candidate *cand, size_t l)
{
	size_t k = 0;

	for (size_t i = 0; i < cand->n_launches; i++) {
		int seen = 0;

		for (size_t j = 0; j < i; j++)
			seen |= !strcmp(cand->launches[j].kernel, cand->launches[i].kernel);
		if (seen)
			continue;
		if (!strcmp(cand->launches[i].kernel, cand->launches[l].kernel))
			return k;
		k++;
	}
	return k;
}

static const char driver_head[] =
	"#if CUDART_VERSION < 12000\n"
	"#error \"the launcher loads its cubin with the library API of CUDA 12 or newer\"\n"
	"#endif\n\n";

static const char driver_loader[] =
	"/*\n"
	" * The driver's library API, reached through the runtime (nothing links\n"
	" * libcuda): the cubin is loaded once a process, in every context at once,\n"
	" * and its kernels found by name.\n"
	" */\n"
	"struct ksx_driver {\n"
	"\tCUresult (*load)(CUlibrary *, const void *, CUjit_option *, void **, unsigned, CUlibraryOption "
	"*,\n"
	"\t\t\t void **, unsigned);\n"
	"\tCUresult (*get)(CUkernel *, CUlibrary, const char *);\n"
	"\tCUresult (*set)(CUfunction_attribute, int, CUkernel, CUdevice);\n"
	"\tCUresult (*attr)(int *, CUfunction_attribute, CUkernel, CUdevice);\n"
	"\tCUresult (*current)(CUcontext *);\n"
	"\tCUresult (*launch)(const CUlaunchConfig *, CUfunction, void **, void **);\n"
	"\tCUlibrary lib;\n"
	"\tCUkernel kernels[KSX_KERNELS];\n"
	"\tcudaError_t err;\n"
	"};\n\n"
	"template <typename F> cudaError_t ksx_entry(const char *name, F *fn)\n"
	"{\n"
	"\tcudaDriverEntryPointQueryResult found;\n"
	"\tvoid *p = nullptr;\n"
	"#if CUDART_VERSION >= 12050\n"
	"\tcudaError_t err = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found);\n"
	"#else\n"
	"\tcudaError_t err = cudaGetDriverEntryPoint(name, &p, cudaEnableDefault, &found);\n"
	"#endif\n\n"
	"\tif (err != cudaSuccess)\n"
	"\t\treturn err;\n"
	"\tif (found != cudaDriverEntryPointSuccess || !p)\n"
	"\t\treturn cudaErrorSymbolNotFound;\n"
	"\t*fn = reinterpret_cast<F>(p);\n"
	"\treturn cudaSuccess;\n"
	"}\n\n"
	"const ksx_driver &ksx_load()\n"
	"{\n"
	"\tstatic ksx_driver d;\n"
	"\tstatic std::once_flag once;\n\n"
	"\tstd::call_once(once, [] {\n"
	"\t\tif ((d.err = ksx_entry(\"cuLibraryLoadData\", &d.load)) != cudaSuccess ||\n"
	"\t\t    (d.err = ksx_entry(\"cuLibraryGetKernel\", &d.get)) != cudaSuccess ||\n"
	"\t\t    (d.err = ksx_entry(\"cuKernelSetAttribute\", &d.set)) != cudaSuccess ||\n"
	"\t\t    (d.err = ksx_entry(\"cuKernelGetAttribute\", &d.attr)) != cudaSuccess ||\n"
	"\t\t    (d.err = ksx_entry(\"cuCtxGetCurrent\", &d.current)) != cudaSuccess ||\n"
	"\t\t    (d.err = ksx_entry(\"cuLaunchKernelEx\", &d.launch)) != cudaSuccess)\n"
	"\t\t\treturn;\n"
	"\t\tif (d.load(&d.lib, ksx_cubin, nullptr, nullptr, 0, nullptr, nullptr, 0) != CUDA_SUCCESS) {\n"
	"\t\t\td.err = cudaErrorInvalidKernelImage; /* a driver that cannot read this cubin */\n"
	"\t\t\treturn;\n"
	"\t\t}\n"
	"\t\tfor (int k = 0; k < KSX_KERNELS; k++)\n"
	"\t\t\tif (d.get(&d.kernels[k], d.lib, ksx_kernel_names[k]) != CUDA_SUCCESS) {\n"
	"\t\t\t\td.err = cudaErrorNoKernelImageForDevice; /* a GPU of another architecture */\n"
	"\t\t\t\treturn;\n"
	"\t\t\t}\n"
	"\t});\n"
	"\treturn d;\n"
	"}\n\n"
	"/*\n"
	" * The current context (the runtime's primary one of the current device when\n"
	" * this thread has none yet) and its device.\n"
	" */\n"
	"cudaError_t ksx_context(const ksx_driver &d, int *dev)\n"
	"{\n"
	"\tCUcontext ctx = nullptr;\n"
	"\tcudaError_t err = cudaGetDevice(dev);\n\n"
	"\tif (err != cudaSuccess)\n"
	"\t\treturn err;\n"
	"\tif (d.current(&ctx) != CUDA_SUCCESS || !ctx)\n"
	"\t\treturn cudaSetDevice(*dev);\n"
	"\treturn cudaSuccess;\n"
	"}\n\n"
	"/*\n"
	" * Kernel k on device dev as ksearch timed it: the largest shared-memory\n"
	" * carveout, the dynamic shared memory it asks for when over the 48 KiB\n"
	" * allowed by default, and a cluster of more than 8 CTAs (__cluster_dims__;\n"
	" * not portable, up to 16 on H100 and H200) when it was compiled with one.\n"
	" * The driver keeps a kernel's attributes per device, not per context, so\n"
	" * each kernel is prepared once a device (again when a launch asks for more\n"
	" * shared memory than any before it): the attribute calls cost up to a\n"
	" * microsecond a launch (tools/launch-cost.cu, on an H200).\n"
	" */\n"
	"#define KSX_DEVICES 64 /* devices past these are prepared on every launch */\n\n"
	"cudaError_t ksx_prepare_now(const ksx_driver &d, int k, int dev, int64_t smem)\n"
	"{\n"
	"\tint w = 1, h = 1, z = 1;\n\n"
	"\tif (d.set(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, CU_SHAREDMEM_CARVEOUT_MAX_SHARED,\n"
	"\t\t  d.kernels[k], dev) != CUDA_SUCCESS)\n"
	"\t\treturn cudaErrorInvalidValue;\n"
	"\tif (smem > 48 * 1024 &&\n"
	"\t    d.set(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem, d.kernels[k], dev) != "
	"CUDA_SUCCESS)\n"
	"\t\treturn cudaErrorInvalidValue;\n"
	"\tif (d.attr(&w, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, d.kernels[k], dev) != CUDA_SUCCESS ||\n"
	"\t    d.attr(&h, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, d.kernels[k], dev) != CUDA_SUCCESS ||\n"
	"\t    d.attr(&z, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, d.kernels[k], dev) != CUDA_SUCCESS)\n"
	"\t\treturn cudaErrorInvalidValue;\n"
	"\tif ((int64_t)w * h * z > 8 &&\n"
	"\t    d.set(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1, d.kernels[k], dev) != "
	"CUDA_SUCCESS)\n"
	"\t\treturn cudaErrorInvalidValue;\n"
	"\treturn cudaSuccess;\n"
	"}\n\n"
	"cudaError_t ksx_prepare(const ksx_driver &d, int k, int dev, int64_t smem)\n"
	"{\n"
	"\t/* per kernel and device, 1 + the most dynamic shared memory prepared (0: none yet) */\n"
	"\tstatic std::atomic<int64_t> prepared[KSX_KERNELS][KSX_DEVICES];\n"
	"\tstd::atomic<int64_t> *slot = dev >= 0 && dev < KSX_DEVICES ? &prepared[k][dev] : nullptr;\n\n"
	"\tif (slot && slot->load(std::memory_order_acquire) > smem)\n"
	"\t\treturn cudaSuccess;\n\n"
	"\tcudaError_t err = ksx_prepare_now(d, k, dev, smem);\n\n"
	"\tif (err != cudaSuccess || !slot)\n"
	"\t\treturn err;\n"
	"\tfor (int64_t seen = slot->load(); seen < smem + 1 && !slot->compare_exchange_weak(seen, smem + "
	"1);)\n"
	"\t\t;\n"
	"\treturn cudaSuccess;\n"
	"}\n\n";

/*
 * The kernels as the host program gets them: the cubin ksearch's build made
 * for the record's arch (g->image, the bytes the search timed when its
 * fingerprint matches), by name through the driver.  No compiler of the
 * program that builds the export sees the candidate's text (NAME_source.txt
 * holds it, for reading): NVRTC refuses host functions and variables, but a
 * source can hide host code from it behind a condition only a host compiler
 * meets (#ifndef __CUDA_ARCH__, __GNUC__, ...), put assembly at namespace
 * scope (NVRTC drops it), or define a macro that reaches the code after it;
 * and nvcc's device pass need not build what NVRTC did (__CUDACC_RTC__).
 */
static void add_driver(const struct gen *g, struct ks_strbuf *sb)
{
	const struct ks_candidate *cand = g->cand;
	size_t n_kernels = 0;

	for (size_t l = 0; l < cand->n_launches; l++)
		if (kernel_index(cand, l) + 1 > n_kernels)
			n_kernels = kernel_index(cand, l) + 1;
	ks_strbuf_adds(sb, driver_head);
	ks_strbuf_addf(sb,
		       "namespace {\n\n"
		       "/*\n * The kernels as NVRTC compiled them for %s: %zu bytes of cubin (%s).\n */\n"
		       "alignas(64) const unsigned char ksx_cubin[] = {",
		       g->arch, g->image->size,
		       g->image->same_as_timed > 0    ? "the binary ksearch timed"
		       : g->image->same_as_timed == 0 ? "rebuilt by another NVRTC than the one that timed it"
						      : "the record names no binary to compare with");
	for (size_t i = 0; i < g->image->size; i++)
		ks_strbuf_addf(sb, "%s0x%02x,", i % 16 ? " " : "\n\t", g->image->cubin[i]);
	ks_strbuf_addf(sb,
		       "\n};\n\n#define KSX_KERNELS %zu\nconst char *const ksx_kernel_names[KSX_KERNELS] = {",
		       n_kernels);
	for (size_t l = 0, k = 0; l < cand->n_launches; l++)
		if (kernel_index(cand, l) == k) {
			ks_strbuf_addf(sb, "%s\"%s\"", k ? ", " : "", cand->launches[l].kernel);
			k++;
		}
	ks_strbuf_adds(sb, "};\n\n");
	ks_strbuf_adds(sb, driver_loader);
	ks_strbuf_adds(sb, "} // namespace\n\n");
}

static void add_helpers(const struct gen *g, struct ks_strbuf *sb)
{
	ks_strbuf_adds(sb, "/* The launcher's helpers. */\nnamespace {\n\n");
	ks_strbuf_adds(sb, helper_config);
	if (g->helpers & HELPER_CDIV)
		ks_strbuf_adds(sb, helper_cdiv);
	if (g->helpers & HELPER_MIN)
		ks_strbuf_adds(sb, helper_min);
	if (g->helpers & HELPER_MAX)
		ks_strbuf_adds(sb, helper_max);
	if (g->cand->n_scratch)
		ks_strbuf_adds(sb, helper_place);
	ks_strbuf_adds(sb, "} // namespace\n\n");
}

/* The workspace layout (inside the anonymous namespace) and NAME_workspace_bytes(). */
static void add_workspace(const struct gen *g, struct ks_strbuf *sb, const struct scratch_code *sc)
{
	const struct ks_candidate *cand = g->cand;
	struct ks_strbuf args;

	ks_strbuf_init(&args);
	add_var_axes(g->op, &args);
	if (cand->n_scratch) {
		ks_strbuf_adds(
			sb, "namespace {\n\n"
			    "/*\n"
			    " * Where each scratch buffer lies in the workspace (ksx_offset[i], a multiple\n"
			    " * of 256) and the workspace's size; SIZE_MAX when the sizes give a buffer a\n"
			    " * negative or too large size, or make a size expression divide by zero.\n"
			    " */\n"
			    "size_t ksx_workspace_layout(");
		if (add_signature(g, sb, 0, SIG_DEFINITION, g->axis_in_layout, 28, "\t\t\t    "))
			ks_strbuf_adds(sb, ", ");
		ks_strbuf_addf(sb, "size_t ksx_offset[%zu])\n{\n", cand->n_scratch);
		add_const_locals(g, sb, g->axis_in_layout);
		ks_strbuf_adds(sb, "\tint64_t ksx_total = 0;\n\n");
		for (size_t i = 0; i < cand->n_scratch; i++) {
			ks_strbuf_addf(sb, "\t/* %s: %s[%s] */\n", cand->scratch[i].name,
				       ks_dtype_name(cand->scratch[i].dtype), cand->scratch[i].size);
			if (sc[i].guards.len)
				ks_strbuf_addf(sb, "\tif (%s)\n\t\treturn SIZE_MAX;\n", sc[i].guards.buf);
			ks_strbuf_addf(sb,
				       "\tif (!ksx_place(&ksx_total, %s, %zu, &ksx_offset[%zu]))\n\t\treturn "
				       "SIZE_MAX;\n",
				       sc[i].count.buf, ks_dtype_size(cand->scratch[i].dtype), i);
		}
		ks_strbuf_adds(sb, "\treturn (size_t)ksx_total;\n}\n\n} // namespace\n\n");
	}
	ks_strbuf_addf(sb, "extern \"C\" size_t %s_workspace_bytes(", g->name);
	if (cand->n_scratch) {
		if (!add_signature(g, sb, 0, SIG_DEFINITION, NULL, strlen(g->name) + 35, "\t\t\t"))
			ks_strbuf_adds(sb, "void");
		ks_strbuf_addf(sb,
			       ")\n{\n\tsize_t ksx_offset[%zu];\n\n\treturn "
			       "ksx_workspace_layout(%s%sksx_offset);\n}\n\n",
			       cand->n_scratch, args.buf, args.len ? ", " : "");
	} else {
		unsigned char *none = ks_calloc(g->op->n_axes + 1, 1);

		if (!add_signature(g, sb, 0, SIG_DEFINITION, none, strlen(g->name) + 35, "\t\t\t"))
			ks_strbuf_adds(sb, "void");
		ks_strbuf_adds(sb, ")\n{\n\treturn 0;\n}\n\n");
		free(none);
	}
	ks_strbuf_release(&args);
}

/*
 * The launcher's zeroing of each "zeroed" scratch buffer, as ksearch zeroes
 * it before every call it times: its whole place in the workspace (up to the
 * next buffer's offset, or the end), on the call's stream, when not empty,
 * just before the first launch.
 */
static void add_scratch_zeroing(const struct gen *g, struct ks_strbuf *sb)
{
	const struct ks_candidate *cand = g->cand;

	for (size_t i = 0; i < cand->n_scratch; i++) {
		char end[64];

		if (!cand->scratch[i].zeroed)
			continue;
		if (i + 1 < cand->n_scratch)
			snprintf(end, sizeof(end), "ksx_offset[%zu]", i + 1);
		else
			snprintf(end, sizeof(end), "ksx_need");
		ks_strbuf_addf(sb,
			       "\t/* %s is \"zeroed\": all zero bytes on entry to every call */\n"
			       "\tif (%s > ksx_offset[%zu]) {\n"
			       "\t\tksx_err = cudaMemsetAsync((char *)workspace + ksx_offset[%zu], 0,\n"
			       "\t\t\t\t\t  %s - ksx_offset[%zu], stream);\n"
			       "\t\tif (ksx_err != cudaSuccess)\n\t\t\treturn ksx_err;\n\t}\n\n",
			       cand->scratch[i].name, end, i, i, end, i);
	}
}

/* One kernel argument as the launcher passes it. */
/* The C++ type a kernel parameter is passed in, of the size ksearch passes it (launch.c). */
static const char *param_type(const struct ks_op *op, const struct ks_arg *arg)
{
	switch (arg->kind) {
	case KS_ARG_INPUT:
	case KS_ARG_OUTPUT:
	case KS_ARG_SCRATCH:
		return "const void *";
	case KS_ARG_AXIS:
		return "int";
	case KS_ARG_SCALAR:
		break;
	}
	switch (op->inputs[arg->index].dtype) {
	case KS_DTYPE_INT32:
		return "int";
	case KS_DTYPE_INT64:
		return "long long";
	default:
		return c_type(op->inputs[arg->index].dtype, 0);
	}
}

static void add_launch(const struct gen *g, struct ks_strbuf *sb, size_t l, const struct launch_code *lc)
{
	const struct ks_launch *launch = &g->cand->launches[l];
	char cfg[32];

	snprintf(cfg, sizeof(cfg), "ksx_launch%zu", l + 1);
	ks_strbuf_addf(sb, "\t/* launch %zu of %zu: %s */\n", l + 1, g->cand->n_launches, launch->kernel);
	if (lc->guards.len)
		ks_strbuf_addf(sb,
			       "\tif (%s)\n\t\treturn cudaErrorInvalidValue; /* a size divides by zero */\n",
			       lc->guards.buf);
	ks_strbuf_addf(sb, "\tconst ksx_config %s = {\n\t\t{%s, %s, %s},\n\t\t{%s, %s, %s},\n\t\t%s};\n", cfg,
		       lc->dims[0].buf, lc->dims[1].buf, lc->dims[2].buf, lc->dims[3].buf, lc->dims[4].buf,
		       lc->dims[5].buf, lc->dims[6].buf);
	ks_strbuf_addf(sb, "\tif (!ksx_config_ok(%s))\n\t\treturn cudaErrorInvalidConfiguration;\n", cfg);
	if (l == 0) /* the kernels, once the sizes are known good: a refused call touches no GPU */
		ks_strbuf_adds(sb, "\tconst ksx_driver &ksx_drv = ksx_load();\n"
				   "\tint ksx_dev = 0;\n"
				   "\tksx_err = ksx_drv.err != cudaSuccess ? ksx_drv.err : "
				   "ksx_context(ksx_drv, &ksx_dev);\n"
				   "\tif (ksx_err != cudaSuccess)\n"
				   "\t\treturn ksx_err;\n");
	/* the shared-memory configuration ksearch timed it in (worker.c, program_set_smem()) */
	ks_strbuf_addf(sb,
		       "\tksx_err = ksx_prepare(ksx_drv, %zu, ksx_dev, %s.smem);\n"
		       "\tif (ksx_err != cudaSuccess)\n\t\treturn ksx_err;\n",
		       kernel_index(g->cand, l), cfg);
	if (l == 0) /* after the first launch's checks, so that a refused call queues nothing */
		add_scratch_zeroing(g, sb);
	/* the arguments, of the sizes ksearch passed them */
	for (size_t a = 0; a < launch->n_args; a++) {
		const struct ks_arg *arg = &launch->args[a];
		const char *type = param_type(g->op, arg);

		ks_strbuf_addf(sb, "\t%s%sksx_a%zu_%zu = (%s)%s;\n", type,
			       type[strlen(type) - 1] == '*' ? "" : " ", l, a, type, arg->name);
	}
	if (launch->n_args) {
		ks_strbuf_addf(sb, "\tvoid *ksx_args%zu[] = {", l);
		for (size_t a = 0; a < launch->n_args; a++)
			ks_strbuf_addf(sb, "%s(void *)&ksx_a%zu_%zu", a ? ", " : "", l, a);
		ks_strbuf_adds(sb, "};\n");
	} else {
		ks_strbuf_addf(sb, "\tvoid **ksx_args%zu = nullptr;\n", l);
	}
	ks_strbuf_addf(sb,
		       "\tCUlaunchConfig ksx_ex%zu = {};\n"
		       "\tksx_ex%zu.gridDimX = (unsigned)%s.grid[0];\n"
		       "\tksx_ex%zu.gridDimY = (unsigned)%s.grid[1];\n"
		       "\tksx_ex%zu.gridDimZ = (unsigned)%s.grid[2];\n"
		       "\tksx_ex%zu.blockDimX = (unsigned)%s.block[0];\n"
		       "\tksx_ex%zu.blockDimY = (unsigned)%s.block[1];\n"
		       "\tksx_ex%zu.blockDimZ = (unsigned)%s.block[2];\n"
		       "\tksx_ex%zu.sharedMemBytes = (unsigned)%s.smem;\n"
		       "\tksx_ex%zu.hStream = (CUstream)stream;\n",
		       l, l, cfg, l, cfg, l, cfg, l, cfg, l, cfg, l, cfg, l, cfg, l);
	if (launch->pdl)
		/* programmatic dependent launch: it may start while the launch before it ends, as measured */
		ks_strbuf_addf(sb,
			       "\tCUlaunchAttribute ksx_pdl%zu = {};\n"
			       "\tksx_pdl%zu.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;\n"
			       "\tksx_pdl%zu.value.programmaticStreamSerializationAllowed = 1;\n"
			       "\tksx_ex%zu.attrs = &ksx_pdl%zu;\n"
			       "\tksx_ex%zu.numAttrs = 1;\n",
			       l, l, l, l, l, l);
	/* the driver's error codes are the runtime's for everything a launch returns */
	ks_strbuf_addf(
		sb,
		"\tksx_err = (cudaError_t)ksx_drv.launch(&ksx_ex%zu, (CUfunction)ksx_drv.kernels[%zu], "
		"ksx_args%zu, nullptr);\n"
		"\tif (ksx_err != cudaSuccess)\n\t\treturn ksx_err;\n\n",
		l, kernel_index(g->cand, l), l);
}

static void add_launcher(const struct gen *g, struct ks_strbuf *sb, const struct launch_code *lc)
{
	const struct ks_candidate *cand = g->cand;
	struct ks_strbuf args;

	ks_strbuf_init(&args);
	add_var_axes(g->op, &args);
	ks_strbuf_addf(sb, "extern \"C\" cudaError_t %s_launch(", g->name);
	add_signature(g, sb, 1, SIG_DEFINITION, g->axis_in_launcher, strlen(g->name) + 31, "\t\t");
	ks_strbuf_adds(sb, ")\n{\n");
	add_const_locals(g, sb, g->axis_in_launcher);
	ks_strbuf_adds(sb, "\tcudaError_t ksx_err;\n\n");
	if (cand->n_scratch) {
		ks_strbuf_addf(sb,
			       "\t/* the scratch buffers, in the caller's workspace */\n"
			       "\tsize_t ksx_offset[%zu];\n"
			       "\tconst size_t ksx_need = ksx_workspace_layout(%s%sksx_offset);\n"
			       "\tif (ksx_need == SIZE_MAX || (ksx_need > 0 && (!workspace || "
			       "workspace_bytes < ksx_need ||\n"
			       "\t\t\t\t\t\t    (uintptr_t)workspace %% %d != 0)))\n"
			       "\t\treturn cudaErrorInvalidValue;\n",
			       cand->n_scratch, args.buf, args.len ? ", " : "", KS_EXPORT_ALIGN);
		for (size_t i = 0; i < cand->n_scratch; i++) {
			int passed = 0;

			/* a buffer no launch takes needs no pointer (it still has its place) */
			for (size_t l = 0; l < cand->n_launches; l++)
				for (size_t a = 0; a < cand->launches[l].n_args; a++)
					passed |= cand->launches[l].args[a].kind == KS_ARG_SCRATCH &&
						  cand->launches[l].args[a].index == (int)i;
			if (passed)
				ks_strbuf_addf(
					sb, "\t%s *const %s = (%s *)((char *)workspace + ksx_offset[%zu]);\n",
					c_type(cand->scratch[i].dtype, 0), cand->scratch[i].name,
					c_type(cand->scratch[i].dtype, 0), i);
		}
		ks_strbuf_adds(sb, "\n");
	}
	for (size_t l = 0; l < cand->n_launches; l++)
		add_launch(g, sb, l, &lc[l]);
	ks_strbuf_adds(sb, "\treturn cudaSuccess;\n}\n");
	ks_strbuf_release(&args);
}

static int add_source(struct gen *g, struct ks_strbuf *sb)
{
	const struct ks_candidate *cand = g->cand;
	struct launch_code *lc = ks_calloc(cand->n_launches + 1, sizeof(*lc));
	struct scratch_code *sc = ks_calloc(cand->n_scratch + 1, sizeof(*sc));
	struct ks_strbuf text;
	const char *path = *g->rec.path ? g->rec.path : NULL;
	int ret = -1;

	for (size_t l = 0; l < cand->n_launches; l++) {
		for (size_t d = 0; d < 7; d++)
			ks_strbuf_init(&lc[l].dims[d]);
		ks_strbuf_init(&lc[l].guards);
	}
	for (size_t i = 0; i < cand->n_scratch; i++) {
		ks_strbuf_init(&sc[i].count);
		ks_strbuf_init(&sc[i].guards);
	}
	ks_strbuf_init(&text);
	if (translate_plan(g, lc, sc) < 0)
		goto cleanup;

	ks_strbuf_addf(&text,
		       "%s.cu - %s (ksearch op %s) as plain CUDA, exported by ksearch %s.\n\nThe kernel is ",
		       g->name, g->op->name, g->op->key, KS_VERSION);
	ks_strbuf_adds(sb, "/*\n");
	describe_candidate(g, &text);
	ks_strbuf_adds(&text, ", ");
	describe_measurement(g, &text);
	ks_strbuf_adds(&text, ".");
	add_wrapped(sb, text.buf, " * ", 100);
	ks_strbuf_addf(
		sb,
		" *\n * Build:\n *     nvcc -c -std=c++17 -arch=%s %s.cu\n"
		" * and call it through %s.h.  This file holds, in order: helpers of the launcher;\n"
		" * the kernels as NVRTC compiled them for %s, the cubin, which the launcher loads\n"
		" * through the CUDA driver (CUDA 12 or newer; the candidate's text, which no compiler\n"
		" * of this program sees, is in %s_source.txt); the params the search chose, fixed;\n"
		" * and the launcher, which launches the kernels as the candidate's ksearch block says.\n "
		"*/\n"
		"#include \"%s.h\"\n\n#include <cuda.h>\n#include <atomic>\n#include <cstdint>\n#include "
		"<mutex>\n\n",
		g->arch, g->name, g->name, g->arch, g->name, g->name);
	add_helpers(g, sb);
	add_driver(g, sb);
	if (cand->n_params) {
		ks_strbuf_adds(sb, "/* The params, as measured: the launch sizes are written in them. */\n");
		for (size_t i = 0; i < cand->n_params; i++)
			ks_strbuf_addf(sb, "#define %s %s%lld%s\n", cand->params[i].name,
				       g->params[i] < 0 ? "(" : "", (long long)g->params[i],
				       g->params[i] < 0 ? ")" : "");
		ks_strbuf_adds(sb, "\n");
	}
	ks_strbuf_addf(
		sb,
		"/* ---- the host launcher, generated by ksearch export-best from the ksearch block of "
		"the candidate's source%s",
		path ? " (" : "");
	if (path)
		add_comment_text(sb, path, strlen(path));
	ks_strbuf_addf(sb, "%s ---- */\n\n", path ? ")" : "");
	add_workspace(g, sb, sc);
	add_launcher(g, sb, lc);
	ret = 0;
cleanup:
	for (size_t l = 0; l < cand->n_launches; l++) {
		for (size_t d = 0; d < 7; d++)
			ks_strbuf_release(&lc[l].dims[d]);
		ks_strbuf_release(&lc[l].guards);
	}
	for (size_t i = 0; i < cand->n_scratch; i++) {
		ks_strbuf_release(&sc[i].count);
		ks_strbuf_release(&sc[i].guards);
	}
	free(lc);
	free(sc);
	ks_strbuf_release(&text);
	return ret;
}

/* The JSON record */

static void now_iso(char *buf, size_t size)
{
	time_t t = time(NULL);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static json_t *var_axes_json(const struct ks_op *op, const struct ks_workload *w)
{
	json_t *axes = json_object();

	for (size_t a = 0; a < op->n_axes; a++) {
		int64_t v;

		if (!op->axes[a].is_const && ks_env_get(&w->axes, op->axes[a].name, &v))
			json_object_set_new(axes, op->axes[a].name, json_integer(v));
	}
	return axes;
}

/* The lineage as the export's JSON has it (export.h: ks_export_write()). */
static json_t *lineage_json(const struct ks_export_lineage *lineage)
{
	json_t *chain = json_array();

	if (!lineage)
		return chain;
	if (lineage->missing)
		json_array_append_new(
			chain, json_pack("{s:I, s:b}", "id", (json_int_t)lineage->missing, "missing", 1));
	for (size_t i = 0; i < lineage->n_steps; i++) {
		const struct ks_record *rec = lineage->steps[i];
		json_t *step = json_object();

		json_object_set_new(step, "id", json_integer((json_int_t)rec->id));
		json_object_set_new(step, "mutation",
				    json_string(*rec->mutation ? rec->mutation : "unknown"));
		json_object_set_new(step, "fitness",
				    rec->has & KS_RECORD_FITNESS ? json_real(rec->result.fitness)
								 : json_null());
		if (!ks_record_ok(rec))
			json_object_set_new(step, "verdict",
					    json_string(ks_verdict_name(rec->result.verdict)));
		json_array_append_new(chain, step);
	}
	return chain;
}

static json_t *record_json(const struct gen *g)
{
	static const char *const copied[] = {
		"gpu",	       "arch",	       "driver",      "toolkit", "nvrtc",  "verdict",
		"fitness",     "sol_fraction", "descriptors", "kernels", "family", "path",
		"source_hash", "mutation",     "parents",     "created",
	};
	const struct ks_op *op = g->op;
	const struct ks_candidate *cand = g->cand;
	json_t *doc = json_object(), *params = json_object(), *workloads = json_array(),
	       *launches = json_array();
	json_t *scratch = json_array(), *w;
	const json_t *id = json_object_get(g->record, "id");
	char now[32], *command;
	size_t i;

	now_iso(now, sizeof(now));
	json_object_set_new(doc, "format", json_string("ksearch-export"));
	json_object_set_new(doc, "version", json_integer(KS_EXPORT_VERSION));
	json_object_set_new(doc, "name", json_string(g->name));
	json_object_set_new(doc, "op", json_string(op->key));
	json_object_set_new(doc, "definition", json_string(op->name));
	if (op->op_type)
		json_object_set_new(doc, "op_type", json_string(op->op_type));
	if (id)
		json_object_set_new(doc, "id", json_deep_copy(id));
	for (i = 0; i < cand->n_params; i++)
		json_object_set_new(params, cand->params[i].name, json_integer((json_int_t)g->params[i]));
	json_object_set_new(doc, "params", params);
	for (i = 0; i < sizeof(copied) / sizeof(copied[0]); i++) {
		const json_t *v = json_object_get(g->record, copied[i]);

		if (v && !json_is_null(v))
			json_object_set_new(doc, copied[i], json_deep_copy(v));
	}
	if (!json_object_get(doc, "arch"))
		json_object_set_new(doc, "arch", json_string(g->arch));
	/* timings, with the sizes of each workload */
	json_array_foreach(json_object_get(g->record, "workloads"), i, w)
	{
		json_t *copy = json_deep_copy(w);
		const struct ks_workload *wl =
			ks_op_workload(op, json_string_value(json_object_get(w, "id")));

		if (wl && json_is_object(copy))
			json_object_set_new(copy, "axes", var_axes_json(op, wl));
		json_array_append_new(workloads, copy);
	}
	json_object_set_new(doc, "workloads", workloads);
	json_object_set_new(doc, "lineage", lineage_json(g->lineage));
	for (i = 0; i < cand->n_scratch; i++)
		json_array_append_new(scratch, json_pack("{s:s, s:s, s:s}", "name", cand->scratch[i].name,
							 "dtype", ks_dtype_name(cand->scratch[i].dtype),
							 "elements", cand->scratch[i].size));
	for (i = 0; i < cand->n_launches; i++) {
		const struct ks_launch *l = &cand->launches[i];
		json_t *grid = json_array(), *block = json_array(), *args = json_array();

		for (size_t d = 0; d < l->grid_rank; d++)
			json_array_append_new(grid, json_string(l->grid[d]));
		for (size_t d = 0; d < l->block_rank; d++)
			json_array_append_new(block, json_string(l->block[d]));
		for (size_t a = 0; a < l->n_args; a++)
			json_array_append_new(args, json_string(l->args[a].name));
		json_array_append_new(launches,
				      json_pack("{s:s, s:s++, s:o, s:o, s:s, s:o}", "kernel", l->kernel,
						"symbol", g->name, "_", l->kernel, "grid", grid, "block",
						block, "smem", l->smem, "args", args));
	}
	json_object_set_new(doc, "workspace",
			    json_pack("{s:i, s:o}", "alignment", KS_EXPORT_ALIGN, "buffers", scratch));
	json_object_set_new(doc, "launch", launches);
	json_object_set_new(doc, "files",
			    json_pack("{s:s+, s:s+, s:s}", "source", g->name, ".cu", "header", g->name, ".h",
				      "readme", "README.md"));
	command = ks_asprintf("nvcc -c -std=c++17 -arch=%s %s.cu", g->arch, g->name);
	json_object_set_new(doc, "build", json_pack("{s:s}", "command", command));
	free(command);
	json_object_set_new(doc, "exported", json_string(now));
	json_object_set_new(doc, "exported_by", json_string("ksearch " KS_VERSION));
	return doc;
}

/* The README */

static void add_readme(const struct gen *g, struct ks_strbuf *sb)
{
	const struct ks_op *op = g->op;
	const struct ks_result *res = &g->rec.result;
	struct ks_strbuf text, args;
	char now[32];
	size_t i;

	ks_strbuf_init(&text);
	ks_strbuf_init(&args);
	now_iso(now, sizeof(now));
	ks_strbuf_addf(sb, "# %s: %s\n\n", g->name, op->name);
	if (op->description)
		add_wrapped(sb, op->description, "", 80);
	ks_strbuf_addf(&text, "\nExported by ksearch %s on %s from ", KS_VERSION, now);
	describe_candidate(g, &text);
	ks_strbuf_addf(&text, " of the `%s` archive, ", op->key);
	describe_measurement(g, &text);
	ks_strbuf_adds(&text, ".\n");
	add_wrapped(sb, text.buf, "", 80);
	if (res->n_workloads) {
		ks_strbuf_adds(sb, "\n| workload | sizes | time (us) | reference (us) | speedup | of speed "
				   "of light |\n"
				   "| --- | --- | ---: | ---: | ---: | ---: |\n");
		for (i = 0; i < res->n_workloads; i++) {
			const struct ks_result_workload *rw = &res->workloads[i];
			const char *id = *rw->id ? rw->id : "?";
			const struct ks_workload *wl = ks_op_workload(op, id);
			struct ks_strbuf sizes;

			ks_strbuf_init(&sizes);
			for (size_t a = 0; wl && a < op->n_axes; a++) {
				int64_t v;

				if (!op->axes[a].is_const && ks_env_get(&wl->axes, op->axes[a].name, &v))
					ks_strbuf_addf(&sizes, "%s%s=%lld", sizes.len ? " " : "",
						       op->axes[a].name, (long long)v);
			}
			ks_strbuf_addf(sb, "| %s | %s | %.2f | %.2f | %.2fx | %.1f%% |\n", id, sizes.buf,
				       rw->median_us, rw->ref_median_us, rw->speedup, 100 * rw->sol_fraction);
			ks_strbuf_release(&sizes);
		}
		if (res->n_workloads && res->workloads[0].n_splits)
			ks_strbuf_addf(sb,
				       "\nEach time is the %s of the medians on three length splits (even,\n"
				       "skewed, uniform) drawn for the evaluation; the reference's is the\n"
				       "median over canonical splits of the same kinds.\n",
				       res->evaluator >= 4 ? "slowest" : "median");
	}
	ks_strbuf_addf(
		sb,
		"\n## Files\n\n"
		"| file | what |\n| --- | --- |\n"
		"| `%s.cu` | the kernels as NVRTC compiled them for %s (a cubin), then the host launcher |\n"
		"| `%s.h` | the C interface: arguments, shapes, workspace, stream, errors |\n"
		"| `%s.json` | what was measured where: GPU, timings per workload, descriptors, lineage |\n"
		"| `%s_source.txt` | the kernels' source and params, to read (nothing compiles it) |\n",
		g->name, g->arch, g->name, g->name, g->name);
	ks_strbuf_addf(sb,
		       "\n## Build\n\n"
		       "    nvcc -c -std=c++17 -arch=%s %s.cu -o %s.o\n\n"
		       "It needs nothing but the CUDA toolkit, 12 or newer.  Link the object into your\n"
		       "program with nvcc, or add `-lcudart` with another linker; the launcher reaches\n"
		       "the CUDA driver through the runtime, so nothing links libcuda.  The header is C\n"
		       "and C++: include `%s.h` with the CUDA include folder on the path\n"
		       "(`-I/usr/local/cuda/include`).  The kernels are the binary the search built with\n"
		       "NVRTC for %s, and run on GPUs of that architecture; no compiler of your program\n"
		       "sees their source, so nothing in it runs on the host.  Several exports link into\n"
		       "one program.\n",
		       g->arch, g->name, g->name, g->name, g->arch);
	add_var_axes(op, &args);
	ks_strbuf_addf(sb, "\n## Call\n\n```c\n#include \"%s.h\"\n\n", g->name);
	ks_strbuf_addf(sb,
		       "/* the workspace for these sizes (a larger one serves too) */\n"
		       "size_t workspace_bytes = %s_workspace_bytes(%s);\n"
		       "void *workspace = NULL;\n"
		       "if (workspace_bytes > 0)\n"
		       "\tcudaMalloc(&workspace, workspace_bytes);\n\n"
		       "/* every call: device pointers, sizes, the workspace, a stream */\n"
		       "cudaError_t err = %s_launch(",
		       g->name, args.buf, g->name);
	{
		size_t n = 0;

		for (i = 0; i < op->n_inputs + op->n_outputs; i++)
			ks_strbuf_addf(sb, "%s%s", n++ ? ", " : "",
				       i < op->n_inputs ? op->inputs[i].name
							: op->outputs[i - op->n_inputs].name);
		ks_strbuf_addf(sb, "%s%s%sworkspace, workspace_bytes, stream);\n```\n\n", n ? ",\n\t" : "",
			       args.buf, args.len ? ", " : "");
	}
	ks_strbuf_release(&text);
	ks_strbuf_init(&text);
	ks_strbuf_addf(
		&text,
		"A workspace is needed only when `%s_workspace_bytes()` is not 0 (this kernel %s).  "
		"The call queues the kernels on the stream and returns; `%s.h` says what each argument "
		"is, its shape, and what the errors mean.\n",
		g->name, g->cand->n_scratch ? "needs one" : "needs none", g->name);
	add_wrapped(sb, text.buf, "", 80);
	if (g->lineage && (g->lineage->n_steps || g->lineage->missing)) {
		ks_strbuf_adds(sb,
			       "\n## Lineage\n\nFrom the seed to this kernel, following first parents:\n\n"
			       "| id | mutation | fitness |\n| ---: | --- | ---: |\n");
		if (g->lineage->missing)
			ks_strbuf_addf(sb, "| %llu | - | - |\n", (unsigned long long)g->lineage->missing);
		for (i = 0; i < g->lineage->n_steps; i++) {
			const struct ks_record *step = g->lineage->steps[i];

			ks_strbuf_addf(sb, "| %llu | %s | ", (unsigned long long)step->id,
				       *step->mutation ? step->mutation : "unknown");
			if (step->has & KS_RECORD_FITNESS)
				ks_strbuf_addf(sb, "%.3f |\n", step->result.fitness);
			else
				ks_strbuf_addf(sb, "%s |\n",
					       ks_record_ok(step) ? "-"
								  : ks_verdict_name(step->result.verdict));
		}
	}
	ks_strbuf_release(&text);
	ks_strbuf_release(&args);
}

/* Files */

void ks_export_files_init(struct ks_export_files *f)
{
	memset(f, 0, sizeof(*f));
}

void ks_export_files_release(struct ks_export_files *f)
{
	for (size_t i = 0; i < f->nr; i++) {
		free(f->files[i].name);
		free(f->files[i].text);
	}
	free(f->files);
	ks_export_files_init(f);
}

void ks_export_files_add(struct ks_export_files *f, const char *name, const char *text, size_t len)
{
	struct ks_export_file *file = NULL;

	for (size_t i = 0; i < f->nr && !file; i++)
		if (!strcmp(f->files[i].name, name))
			file = &f->files[i];
	if (file) {
		free(file->text);
	} else {
		KS_ALLOC_GROW(f->files, f->nr + 1, f->alloc);
		file = &f->files[f->nr++];
		file->name = ks_strdup(name);
	}
	file->text = ks_malloc(len + 1);
	memcpy(file->text, text, len);
	file->text[len] = '\0';
	file->len = len;
}

const struct ks_export_file *ks_export_files_get(const struct ks_export_files *f, const char *name)
{
	for (size_t i = 0; i < f->nr; i++)
		if (!strcmp(f->files[i].name, name))
			return &f->files[i];
	return NULL;
}

int ks_export_files_write(const struct ks_export_files *f, const char *dir, struct ks_error *err)
{
	int ret = 0;

	if (ks_mkdir_p(dir, err) < 0)
		return -1;
	for (size_t i = 0; i < f->nr && !ret; i++) {
		char *path = ks_path_join(dir, f->files[i].name), *slash = strrchr(path, '/');

		/* a name may hold subfolders (csrc/x.cu): make them */
		if (slash && strchr(f->files[i].name, '/')) {
			*slash = '\0';
			ret = ks_mkdir_p(path, err);
			*slash = '/';
		}
		if (!ret)
			ret = ks_write_file_atomic(path, f->files[i].text, f->files[i].len, err);
		free(path);
	}
	return ret;
}

/* Add name to out, taking text's contents (text is left empty and reusable). */
static void add_file(struct ks_export_files *out, const char *name, struct ks_strbuf *text)
{
	ks_export_files_add(out, name, text->buf ? text->buf : "", text->len);
	ks_strbuf_release(text);
	ks_strbuf_init(text);
}

/* The plan must resolve on every workload: a record whose params cannot run is not exported. */
static int check_plan(const struct gen *g)
{
	const struct ks_workload *lists[2] = { g->op->workloads, g->op->check_workloads };
	size_t counts[2] = { g->op->n_workloads, g->op->n_check_workloads };

	for (int l = 0; l < 2; l++) {
		for (size_t k = 0; k < counts[l]; k++) {
			struct ks_plan plan;

			if (ks_plan_resolve(g->cand, g->op, &lists[l][k], g->params, &plan, g->err) < 0)
				return -1;
			ks_plan_release(&plan);
		}
	}
	return 0;
}

static int is_arch_word(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_')
			return 0;
	return 1;
}

int ks_export_render(const struct ks_op *op, const struct ks_candidate *cand, const int64_t *params,
		     const json_t *record, const struct ks_export_lineage *lineage,
		     const struct ks_export_image *image, const char *name, struct ks_export_files *out,
		     struct ks_error *err)
{
	struct gen g = {
		.op = op,
		.cand = cand,
		.params = params,
		.record = record,
		.lineage = lineage,
		.image = image,
		.name = name,
		.err = err,
	};
	struct ks_strbuf cu, h, readme;
	json_t *doc = NULL;
	char *json_text = NULL, *file = NULL;
	int ret = -1;

	ks_strbuf_init(&cu);
	ks_strbuf_init(&h);
	ks_strbuf_init(&readme);
	if (!cand->bound)
		return ks_fail(err, "internal error: the candidate is not bound to op %s", op->key);
	if (!image || !image->cubin || !image->size)
		return ks_fail(err, "internal error: no cubin for the export");
	if (!name || !ks_is_identifier(name))
		return ks_fail(err, "'%s' is not a C identifier; the export's name prefixes its functions",
			       name ? name : "");
	ks_record_init(&g.rec);
	if (ks_record_parse(record, &g.rec, err) < 0)
		return -1;
	g.arch = *g.rec.result.arch ? g.rec.result.arch : "sm_90a";
	if (!is_arch_word(g.arch)) {
		ks_fail(err, "arch: '%s' is not an architecture name such as sm_90a", g.arch);
		goto cleanup;
	}
	for (size_t i = 0; i < op->n_inputs + op->n_outputs; i++) {
		const struct ks_tensor *t =
			i < op->n_inputs ? &op->inputs[i] : &op->outputs[i - op->n_inputs];

		g.has_bf16 |= t->dtype == KS_DTYPE_BFLOAT16;
		g.has_fp16 |= t->dtype == KS_DTYPE_FLOAT16;
		g.has_half |= is_half_type(t->dtype);
	}
	g.axis_in_launcher = ks_calloc(op->n_axes + 1, 1);
	g.axis_in_layout = ks_calloc(op->n_axes + 1, 1);
	if (check_names(&g) < 0) {
		ks_error_prefix(err, "%s", cand->path);
		goto cleanup;
	}
	/* (ks_plan_resolve names the candidate itself) */
	if (check_plan(&g) < 0)
		goto cleanup;
	if (add_source(&g, &cu) < 0) {
		ks_error_prefix(err, "%s", cand->path);
		goto cleanup;
	}
	add_header(&g, &h);
	add_readme(&g, &readme);
	doc = record_json(&g);
	json_text = json_dumps(doc, JSON_INDENT(2));
	file = ks_asprintf("%s.cu", name);
	add_file(out, file, &cu);
	free(file);
	file = ks_asprintf("%s.h", name);
	add_file(out, file, &h);
	free(file);
	file = ks_asprintf("%s.json", name);
	ks_strbuf_adds(&cu, json_text);
	ks_strbuf_adds(&cu, "\n");
	add_file(out, file, &cu);
	free(file);
	/* the candidate's text, for reading: no build compiles a .txt (the torch and FIB formats take every
	 * .cu) */
	file = ks_asprintf("%s_source.txt", name);
	ks_strbuf_addf(&cu,
		       "The source of %s's kernels, as the search compiled it with NVRTC (for reading:\n"
		       "%s.cu carries them compiled).  The params were:",
		       name, name);
	for (size_t i = 0; i < cand->n_params; i++)
		ks_strbuf_addf(&cu, " %s=%lld", cand->params[i].name, (long long)params[i]);
	ks_strbuf_adds(&cu, cand->n_params ? "\n\n" : " none\n\n");
	ks_strbuf_adds(&cu, cand->source);
	add_file(out, file, &cu);
	add_file(out, "README.md", &readme);
	ret = 0;
cleanup:
	free(file);
	free(json_text);
	json_decref(doc);
	free(g.axis_in_launcher);
	free(g.axis_in_layout);
	ks_record_release(&g.rec);
	ks_strbuf_release(&cu);
	ks_strbuf_release(&h);
	ks_strbuf_release(&readme);
	return ret;
}

int ks_export_write(const struct ks_op *op, const struct ks_candidate *cand, const int64_t *params,
		    const json_t *record, const struct ks_export_lineage *lineage,
		    const struct ks_export_image *image, const char *out_dir, const char *name,
		    struct ks_error *err)
{
	struct ks_export_files files;
	int ret;

	ks_export_files_init(&files);
	ret = ks_export_render(op, cand, params, record, lineage, image, name, &files, err);
	if (!ret)
		ret = ks_export_files_write(&files, out_dir, err);
	ks_export_files_release(&files);
	return ret;
}

/* ---- per-shape dispatch ---- */

/* The var axes as a parameter list: "int batch_size, int num_pages, ...". */
static void add_var_axis_params(const struct ks_op *op, struct ks_strbuf *sb)
{
	size_t n = 0;

	for (size_t a = 0; a < op->n_axes; a++)
		if (!op->axes[a].is_const)
			ks_strbuf_addf(sb, "%sint %s", n++ ? ", " : "", op->axes[a].name);
	if (!n)
		ks_strbuf_adds(sb, "void");
}

/* Every argument of a launcher, as a call passes them on: "q, k_cache, ..., stream". */
static void add_call_args(const struct ks_op *op, struct ks_strbuf *sb)
{
	for (size_t i = 0; i < op->n_inputs; i++)
		ks_strbuf_addf(sb, "%s, ", op->inputs[i].name);
	for (size_t i = 0; i < op->n_outputs; i++)
		ks_strbuf_addf(sb, "%s, ", op->outputs[i].name);
	for (size_t a = 0; a < op->n_axes; a++)
		if (!op->axes[a].is_const)
			ks_strbuf_addf(sb, "%s, ", op->axes[a].name);
	ks_strbuf_adds(sb, "workspace, workspace_bytes, stream");
}

int ks_export_render_dispatch(const struct ks_op *op, const struct ks_export_variant *variants,
			      size_t n_variants, const char *name, struct ks_export_files *out,
			      struct ks_error *err)
{
	struct ks_strbuf cu, h, readme, text, axes, calls;
	json_t *doc = json_object(), *table = json_array();
	char guard[160], *vname = NULL, *json_text = NULL;
	const char *arch;
	struct gen g = { .op = op, .name = name, .err = err };
	size_t n_var_axes = 0, n_kernels = 0, *kernel_of = NULL;
	int ret = -1;

	ks_record_init(&g.rec); /* each variant's files are rendered from its own record */
	ks_strbuf_init(&cu);
	ks_strbuf_init(&h);
	ks_strbuf_init(&readme);
	ks_strbuf_init(&text);
	ks_strbuf_init(&axes);
	ks_strbuf_init(&calls);
	if (!name || !ks_is_identifier(name)) {
		ks_fail(err, "'%s' is not a C identifier; the export's name prefixes its functions",
			name ? name : "");
		goto cleanup;
	}
	if (!n_variants || n_variants > 64) {
		ks_fail(err, "a dispatch needs 1 to 64 kernels, got %zu", n_variants);
		goto cleanup;
	}
	arch = *variants[0].rec->result.arch ? variants[0].rec->result.arch : "sm_90a";
	for (size_t a = 0; a < op->n_axes; a++)
		n_var_axes += !op->axes[a].is_const;
	/* each distinct kernel (by record id) once, in its own translation unit, named <name>_v<k> */
	kernel_of = ks_calloc(n_variants, sizeof(*kernel_of));
	for (size_t k = 0; k < n_variants; k++) {
		size_t j = 0;

		while (j < k && variants[j].rec->id != variants[k].rec->id)
			j++;
		if (j < k) {
			kernel_of[k] = kernel_of[j];
			continue;
		}
		kernel_of[k] = n_kernels++;
		free(vname);
		vname = ks_asprintf("%s_v%zu", name, kernel_of[k]);
		if (ks_export_render(op, variants[k].cand, variants[k].params, variants[k].record,
				     variants[k].lineage, variants[k].image, vname, out, err) < 0)
			goto cleanup;
	}
	g.cand = variants[0].cand;
	for (size_t i = 0; i < op->n_inputs + op->n_outputs; i++) {
		const struct ks_tensor *t =
			i < op->n_inputs ? &op->inputs[i] : &op->outputs[i - op->n_inputs];

		g.has_bf16 |= t->dtype == KS_DTYPE_BFLOAT16;
		g.has_fp16 |= t->dtype == KS_DTYPE_FLOAT16;
		g.has_half |= is_half_type(t->dtype);
	}
	add_var_axis_params(op, &axes);
	add_call_args(op, &calls);

	/* the rule, in words and as a table (the header shows both) */
	ks_strbuf_addf(
		&text,
		"%s.h - %s (ksearch op %s) dispatched per shape, exported by ksearch %s.  Each call runs "
		"the kernel the search found fastest on the benchmark workload nearest to the call's "
		"sizes: nearest by the sum, over the var axes, of the squared difference of log2(size) "
		"(a size below 1 counts as 1).  The workloads and their kernels:",
		name, op->name, op->key, KS_VERSION);
	ks_strbuf_adds(&h, "/*\n");
	add_wrapped(&h, text.buf, " * ", 100);
	ks_strbuf_adds(&h, " *\n");
	for (size_t k = 0; k < n_variants; k++) {
		const struct ks_workload *w = variants[k].workload;
		const struct ks_record *rec = variants[k].rec;
		json_t *axes_json = json_object();
		char params[256];
		const char *origin = ks_export_origin(rec, variants[k].lineage);

		ks_params_format(variants[k].cand, variants[k].params, params, sizeof(params));
		ks_strbuf_addf(&h, " *   %-18s ->  %s_v%zu: #%llu %s%s%s (%s)", w->id, name, kernel_of[k],
			       (unsigned long long)rec->id, *rec->family ? rec->family : "?",
			       origin ? " from " : "", origin ? origin : "", params);
		for (size_t a = 0; a < op->n_axes; a++) {
			int64_t v = 0;

			if (op->axes[a].is_const)
				continue;
			ks_env_get(&w->axes, op->axes[a].name, &v);
			json_object_set_new(axes_json, op->axes[a].name, json_integer(v));
		}
		ks_strbuf_addf(&h, ", %.2f us\n", variants[k].median_us);
		json_array_append_new(table, json_pack("{s:s, s:o, s:s, s:O, s:f}", "workload", w->id, "axes",
						       axes_json, "variant", "", "record", variants[k].record,
						       "median_us", variants[k].median_us));
		json_object_set_new(json_array_get(table, k), "variant",
				    json_sprintf("%s_v%zu", name, kernel_of[k]));
	}
	ks_strbuf_addf(
		&h,
		" *\n * The arguments, the workspace and the stream are those of every %s_v<k>_launch()\n"
		" * (see %s_v0.h); %s_workspace_bytes() gives the workspace of the kernel the sizes\n"
		" * pick, and %s_variant() which one that is.\n */\n",
		name, name, name, name);
	snprintf(guard, sizeof(guard), "%s_H", name);
	for (char *p = guard; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	ks_strbuf_addf(&h, "#ifndef %s\n#define %s\n\n", guard, guard);
	for (size_t k = 0; k < n_kernels; k++)
		ks_strbuf_addf(&h, "#include \"%s_v%zu.h\"\n", name, k);
	ks_strbuf_adds(&h, "\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
	ks_strbuf_addf(
		&h,
		"/* Which kernel (the k of %s_v<k>, 0..%zu) these sizes pick. */\nint %s_variant(%s);\n\n",
		name, n_kernels - 1, name, axes.buf);
	ks_strbuf_addf(&h, "/* Bytes of workspace %s_launch() needs for these sizes (0: none). */\n", name);
	ks_strbuf_addf(&h, "size_t %s_workspace_bytes(%s);\n\n", name, axes.buf);
	ks_strbuf_adds(&h, "/* Queue the kernel these sizes pick on stream. */\n");
	if (g.has_half)
		ks_strbuf_adds(&h, "#ifdef __cplusplus\n");
	ks_strbuf_addf(&h, "cudaError_t %s_launch(", name);
	add_signature(&g, &h, 1, SIG_CXX, NULL, strlen(name) + 20, "\t");
	ks_strbuf_adds(&h, ");\n");
	if (g.has_half) {
		ks_strbuf_addf(&h, "#else\ncudaError_t %s_launch(", name);
		add_signature(&g, &h, 1, SIG_C, NULL, strlen(name) + 20, "\t");
		ks_strbuf_adds(&h, ");\n#endif\n");
	}
	ks_strbuf_addf(&h, "\n#ifdef __cplusplus\n}\n#endif\n\n#endif /* %s */\n", guard);

	/* the .cu: the table, the rule, and three functions that forward */
	ks_strbuf_addf(&cu,
		       "/*\n * %s.cu - the per-shape dispatch of ksearch op %s (see %s.h for the rule).\n"
		       " * Build it with the kernels it picks from:\n *     nvcc -c -std=c++17 -arch=%s",
		       name, op->key, name, arch);
	for (size_t k = 0; k < n_kernels; k++)
		ks_strbuf_addf(&cu, " %s_v%zu.cu", name, k);
	ks_strbuf_addf(&cu, " %s.cu\n */\n#include <math.h>\n\n#include \"%s.h\"\n\n", name, name);
	ks_strbuf_adds(
		&cu,
		"namespace {\n\n/* the kernel of each benchmark workload */\nconst int ksx_kernel_of[] = {");
	for (size_t k = 0; k < n_variants; k++)
		ks_strbuf_addf(&cu, "%s%zu", k ? ", " : " ", kernel_of[k]);
	ks_strbuf_adds(&cu, " };\n\n} // namespace\n\n");
	ks_strbuf_addf(&cu,
		       "namespace {\n\n/* log2 of each var axis of the benchmark workloads, one row per "
		       "workload */\n"
		       "const double ksx_workload_log2[%zu][%zu] = {\n",
		       n_variants, n_var_axes ? n_var_axes : 1);
	for (size_t k = 0; k < n_variants; k++) {
		ks_strbuf_adds(&cu, "\t{");
		for (size_t a = 0, n = 0; a < op->n_axes; a++) {
			int64_t v = 1;

			if (op->axes[a].is_const)
				continue;
			ks_env_get(&variants[k].workload->axes, op->axes[a].name, &v);
			ks_strbuf_addf(&cu, "%s%.17g", n++ ? ", " : " ", log2((double)(v < 1 ? 1 : v)));
		}
		ks_strbuf_addf(&cu, "%s }, /* %s */\n", n_var_axes ? "" : " 0", variants[k].workload->id);
	}
	ks_strbuf_adds(&cu,
		       "};\n\ndouble ksx_log2_size(int v)\n{\n\treturn log2(v < 1 ? 1.0 : (double)v);\n}\n\n"
		       "} // namespace\n\n");
	ks_strbuf_addf(&cu, "extern \"C\" int %s_variant(%s)\n{\n\tconst double here[%zu] = {", name,
		       axes.buf, n_var_axes ? n_var_axes : 1);
	for (size_t a = 0, n = 0; a < op->n_axes; a++)
		if (!op->axes[a].is_const)
			ks_strbuf_addf(&cu, "%sksx_log2_size(%s)", n++ ? ", " : " ", op->axes[a].name);
	ks_strbuf_addf(
		&cu,
		"%s };\n\tint best = 0;\n\tdouble best_d = INFINITY;\n\n"
		"\tfor (int k = 0; k < %zu; k++) {\n\t\tdouble d = 0;\n\n"
		"\t\tfor (int a = 0; a < %zu; a++)\n"
		"\t\t\td += (here[a] - ksx_workload_log2[k][a]) * (here[a] - ksx_workload_log2[k][a]);\n"
		"\t\tif (d < best_d) {\n\t\t\tbest = k;\n\t\t\tbest_d = d;\n\t\t}\n\t}\n"
		"\treturn ksx_kernel_of[best];\n}\n\n",
		n_var_axes ? "" : " 0", n_variants, n_var_axes);
	ks_strbuf_addf(&cu, "extern \"C\" size_t %s_workspace_bytes(%s)\n{\n\tswitch (%s_variant(", name,
		       axes.buf, name);
	add_var_axes(op, &cu);
	ks_strbuf_adds(&cu, ")) {\n");
	for (size_t k = 0; k < n_kernels; k++) {
		ks_strbuf_addf(&cu, "\tcase %zu:\n\t\treturn %s_v%zu_workspace_bytes(", k, name, k);
		add_var_axes(op, &cu);
		ks_strbuf_adds(&cu, ");\n");
	}
	ks_strbuf_adds(&cu, "\t}\n\treturn 0;\n}\n\n");
	ks_strbuf_addf(&cu, "extern \"C\" cudaError_t %s_launch(", name);
	add_signature(&g, &cu, 1, SIG_CXX, NULL, strlen(name) + 31, "\t\t");
	ks_strbuf_addf(&cu, ")\n{\n\tswitch (%s_variant(", name);
	add_var_axes(op, &cu);
	ks_strbuf_adds(&cu, ")) {\n");
	for (size_t k = 0; k < n_kernels; k++)
		ks_strbuf_addf(&cu, "\tcase %zu:\n\t\treturn %s_v%zu_launch(%s);\n", k, name, k, calls.buf);
	ks_strbuf_adds(&cu, "\t}\n\treturn cudaErrorInvalidValue;\n}\n");

	json_object_set_new(doc, "format", json_string("ksearch-dispatch"));
	json_object_set_new(doc, "version", json_integer(KS_EXPORT_VERSION));
	json_object_set_new(doc, "op", json_string(op->key));
	json_object_set_new(doc, "definition", json_string(op->name));
	json_object_set_new(doc, "rule",
			    json_string("nearest benchmark workload by the sum over the var axes of "
					"(log2(max(size, 1)) - log2(max(workload size, 1)))^2"));
	json_object_set_new(doc, "kernels", json_incref(table));
	json_text = json_dumps(doc, JSON_INDENT(2));
	ks_strbuf_addf(&readme,
		       "# %s: ksearch op %s, dispatched per shape\n\n"
		       "`%s_launch()` runs, for each call, the kernel the search found fastest on the\n"
		       "benchmark workload nearest to the call's sizes (the rule and the table are in\n"
		       "`%s.h`, the measurements in `%s.json` and `%s_v<k>.json`). Build:\n\n"
		       "```\nnvcc -c -std=c++17 -arch=%s",
		       name, op->key, name, name, name, name, arch);
	for (size_t k = 0; k < n_kernels; k++)
		ks_strbuf_addf(&readme, " %s_v%zu.cu", name, k);
	ks_strbuf_addf(&readme, " %s.cu\n```\n\nand include `%s.h`.\n", name, name);
	free(vname);
	vname = ks_asprintf("%s.cu", name);
	add_file(out, vname, &cu);
	free(vname);
	vname = ks_asprintf("%s.h", name);
	add_file(out, vname, &h);
	free(vname);
	vname = ks_asprintf("%s.json", name);
	ks_strbuf_release(&text);
	ks_strbuf_init(&text);
	ks_strbuf_adds(&text, json_text);
	ks_strbuf_adds(&text, "\n");
	add_file(out, vname, &text);
	add_file(out, "README.md", &readme);
	ret = 0;
cleanup:
	free(kernel_of);
	free(vname);
	free(json_text);
	json_decref(doc);
	json_decref(table);

	ks_strbuf_release(&cu);
	ks_strbuf_release(&h);
	ks_strbuf_release(&readme);
	ks_strbuf_release(&text);
	ks_strbuf_release(&axes);
	ks_strbuf_release(&calls);
	return ret;
}

int ks_export_dispatch(const struct ks_op *op, const struct ks_export_variant *variants, size_t n_variants,
		       const char *out_dir, const char *name, struct ks_error *err)
{
	struct ks_export_files files;
	int ret;

	ks_export_files_init(&files);
	ret = ks_export_render_dispatch(op, variants, n_variants, name, &files, err);
	if (!ret)
		ret = ks_export_files_write(&files, out_dir, err);
	ks_export_files_release(&files);
	return ret;
}
