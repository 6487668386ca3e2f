/*
 * expr.c - the integer expressions of expr.h: one recursive-descent
 * parser that builds the syntax tree, and the evaluator over it.
 *
 * Every reader of the grammar goes through ks_expr_parse(): evaluation
 * (ks_expr_eval), the names an expression uses (ks_expr_names) and
 * export.c's translation to C walk the same tree, so they can never
 * disagree about what is valid syntax.  The parser makes every check that
 * does not depend on values; the evaluator the rest (unknown names,
 * division by zero, overflow), left to right.
 */
#include "ksearch/op/expr.h"

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/util.h"

/*
 * Every level of parentheses, unary minus or function call costs a few
 * stack frames; 200 is far beyond any real launch expression and far
 * below any stack limit.  The tree is as deep as the nesting (chains are
 * flat), so walking it is bounded too.
 */
#define MAX_DEPTH 200

/* Longest stretch of the source quoted in an error message. */
#define QUOTE_MAX 160

#define NAME_MAX_LEN ((int)sizeof(((struct ks_env_entry *)0)->name) - 1)

struct parser {
	struct ks_expr *expr; /* being built */
	const char *src;
	const char *p;
	int depth;
	struct ks_error *err;
};

static const struct func {
	const char *name;
	enum ks_expr_func func;
	int min_args, max_args;
} funcs[] = {
	{ "cdiv", KS_EXPR_CDIV, 2, 2 },
	{ "min", KS_EXPR_MIN, 2, INT_MAX },
	{ "max", KS_EXPR_MAX, 2, INT_MAX },
};

void ks_env_init(struct ks_env *env)
{
	env->entries = NULL;
	env->count = 0;
	env->alloc = 0;
}

void ks_env_release(struct ks_env *env)
{
	free(env->entries);
	ks_env_init(env);
}

static struct ks_env_entry *env_find(const struct ks_env *env, const char *name, size_t len)
{
	size_t i;

	/* From the back, so later entries shadow earlier ones. */
	for (i = env->count; i-- > 0;) {
		struct ks_env_entry *e = &env->entries[i];

		if (strncmp(e->name, name, len) == 0 && e->name[len] == '\0')
			return e;
	}
	return NULL;
}

int ks_env_set(struct ks_env *env, const char *name, int64_t value, struct ks_error *err)
{
	struct ks_env_entry *e;
	size_t len;

	if (!name)
		return ks_fail(err, "environment: no name given");
	len = strlen(name);
	if (len > (size_t)NAME_MAX_LEN)
		return ks_fail(err, "name '%.*s...' is %zu bytes long; names are at most %d", 32, name, len,
			       NAME_MAX_LEN);
	e = env_find(env, name, len);
	if (e) {
		e->value = value;
		return 0;
	}
	if (KS_ALLOC_TRY_GROW(env->entries, env->count + 1, env->alloc))
		return ks_fail(err, "out of memory: environment of %zu names", env->count + 1);
	e = &env->entries[env->count++];
	memcpy(e->name, name, len + 1);
	e->value = value;
	return 0;
}

int ks_env_get(const struct ks_env *env, const char *name, int64_t *value)
{
	const struct ks_env_entry *e;

	if (!env || !name)
		return 0;
	e = env_find(env, name, strlen(name));
	if (!e)
		return 0;
	if (value)
		*value = e->value;
	return 1;
}

static int is_name_start(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static int is_name_char(char c)
{
	return is_name_start(c) || (c >= '0' && c <= '9');
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static void skip_ws(struct parser *ps)
{
	while (isspace((unsigned char)*ps->p))
		ps->p++;
}

/*
 * Fail with 'in "<src>": <message> at column N' (columns count bytes
 * from 1; at SIZE_MAX leaves the column out).  Control characters in the
 * quote become spaces so that a newline in the source cannot break the
 * message, and the column still lines up.
 */
static int vfail_in(const char *src, size_t at, struct ks_error *err, const char *fmt, va_list ap)
{
	char quote[QUOTE_MAX + 4];
	char msg[KS_ERROR_MAX];
	size_t len = strlen(src), i;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	for (i = 0; i < len && i < QUOTE_MAX; i++) {
		unsigned char c = (unsigned char)src[i];

		quote[i] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
	}
	if (len > QUOTE_MAX) {
		memcpy(quote + i, "...", 3);
		i += 3;
	}
	quote[i] = '\0';
	if (at == SIZE_MAX)
		return ks_fail(err, "in \"%s\": %s", quote, msg);
	return ks_fail(err, "in \"%s\": %s at column %d", quote, msg, (int)at + 1);
}

int ks_expr_fail(const struct ks_expr *expr, size_t at, struct ks_error *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail_in(expr->src, at, err, fmt, ap);
	va_end(ap);
	return -1;
}

static int fail_at(struct parser *ps, const char *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail_at(struct parser *ps, const char *at, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail_in(ps->src, at ? (size_t)(at - ps->src) : SIZE_MAX, ps->err, fmt, ap);
	va_end(ap);
	return -1;
}

/* Name the token at p for a syntax error: 'x', 'TILE', 12, end of expression. */
static void describe(const char *p, char *buf, size_t size)
{
	size_t len = 0;

	if (!*p) {
		snprintf(buf, size, "the end of the expression");
		return;
	}
	if (is_name_start(*p) || is_digit(*p)) {
		while (is_name_char(p[len]) && len < 32)
			len++;
		snprintf(buf, size, "'%.*s%s'", (int)len, p, is_name_char(p[len]) ? "..." : "");
		return;
	}
	if (isprint((unsigned char)*p))
		snprintf(buf, size, "'%c'", *p);
	else
		snprintf(buf, size, "byte 0x%02x", (unsigned char)*p);
}

/* The names env defines, sorted and comma-separated, for "unknown name" errors. */
static void known_names(const struct ks_env *env, char *buf, size_t size)
{
	const char *last = NULL;
	size_t len = 0;

	buf[0] = '\0';
	for (;;) {
		const char *next = NULL;
		size_t i, need;

		/* Selection by "smallest name after the last one" needs no allocation. */
		for (i = 0; i < env->count; i++) {
			const char *name = env->entries[i].name;

			if (last && strcmp(name, last) <= 0)
				continue;
			if (!next || strcmp(name, next) < 0)
				next = name;
		}
		if (!next)
			break;
		need = strlen(next) + 2;
		if (len + need + sizeof(", ...") > size) {
			snprintf(buf + len, size - len, "%s...", len ? ", " : "");
			return;
		}
		len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : "", next);
		last = next;
	}
	if (!len)
		snprintf(buf, size, "nothing is defined");
}

/* Building the tree.  Running out of memory is an error like any other. */

static struct ks_expr_node *new_node(struct parser *ps, enum ks_expr_kind kind, const char *at)
{
	struct ks_expr *expr = ps->expr;
	struct ks_expr_node *node;

	if (KS_ALLOC_TRY_GROW(expr->nodes, expr->n_nodes + 1, expr->alloc_nodes) ||
	    !(node = calloc(1, sizeof(*node)))) {
		fail_at(ps, at, "out of memory");
		return NULL;
	}
	expr->nodes[expr->n_nodes++] = node;
	node->kind = kind;
	node->at = (size_t)(at - ps->src);
	return node;
}

static int add_kid(struct parser *ps, struct ks_expr_node *node, struct ks_expr_node *kid)
{
	if (KS_ALLOC_TRY_GROW(node->kids, node->n_kids + 1, node->alloc_kids))
		return fail_at(ps, ps->p, "out of memory");
	node->kids[node->n_kids++] = kid;
	return 0;
}

static struct ks_expr_node *parse_expr(struct parser *ps);

/*
 * INTEGER, accumulated with the sign it will have so that
 * -9223372036854775808 is expressible; minus is where the '-' was.
 */
static struct ks_expr_node *parse_number(struct parser *ps, const char *minus)
{
	const char *start = ps->p;
	struct ks_expr_node *node;
	int64_t value = 0;
	int overflow = 0;

	while (is_digit(*ps->p)) {
		int64_t digit = *ps->p - '0';

		if (!overflow) {
			overflow = __builtin_mul_overflow(value, 10, &value);
			if (!overflow) {
				if (minus)
					overflow = __builtin_sub_overflow(value, digit, &value);
				else
					overflow = __builtin_add_overflow(value, digit, &value);
			}
		}
		ps->p++;
	}
	if (overflow) {
		fail_at(ps, start, "integer literal %s%.*s does not fit in int64", minus ? "-" : "",
			(int)(ps->p - start), start);
		return NULL;
	}
	if (is_name_start(*ps->p)) {
		char found[64];

		describe(ps->p, found, sizeof(found));
		fail_at(ps, ps->p, "unexpected %s right after the number %.*s", found, (int)(ps->p - start),
			start);
		return NULL;
	}
	if (!(node = new_node(ps, KS_EXPR_NUMBER, minus ? minus : start)))
		return NULL;
	node->value = value;
	return node;
}

/* NAME '(' expr (',' expr)* ')', with p at the '('. */
static struct ks_expr_node *parse_call(struct parser *ps, const char *name, int len)
{
	const struct func *fn = NULL;
	struct ks_expr_node *node;
	char found[64];
	size_t i;

	for (i = 0; i < sizeof(funcs) / sizeof(funcs[0]); i++)
		if ((int)strlen(funcs[i].name) == len && !strncmp(funcs[i].name, name, (size_t)len))
			fn = &funcs[i];
	if (!fn) {
		fail_at(ps, name, "unknown function '%.*s' (known: cdiv, min, max)", len, name);
		return NULL;
	}
	if (!(node = new_node(ps, KS_EXPR_CALL, name)))
		return NULL;
	node->func = fn->func;
	node->name = strdup(fn->name);
	if (!node->name) {
		fail_at(ps, name, "out of memory");
		return NULL;
	}
	ps->p++; /* '(' */
	skip_ws(ps);
	if (*ps->p != ')') {
		for (;;) {
			struct ks_expr_node *arg = parse_expr(ps);

			if (!arg || add_kid(ps, node, arg))
				return NULL;
			skip_ws(ps);
			if (*ps->p == ',') {
				ps->p++;
				continue;
			}
			if (*ps->p == ')')
				break;
			describe(ps->p, found, sizeof(found));
			fail_at(ps, ps->p, "expected ',' or ')' in the arguments of %s(), found %s", fn->name,
				found);
			return NULL;
		}
	}
	ps->p++; /* ')' */
	if ((int)node->n_kids < fn->min_args || (int)node->n_kids > fn->max_args) {
		if (fn->min_args == fn->max_args)
			fail_at(ps, name, "%s() takes %d arguments, got %zu", fn->name, fn->min_args,
				node->n_kids);
		else
			fail_at(ps, name, "%s() takes at least %d arguments, got %zu", fn->name, fn->min_args,
				node->n_kids);
		return NULL;
	}
	return node;
}

static struct ks_expr_node *parse_name(struct parser *ps)
{
	const char *name = ps->p;
	struct ks_expr_node *node;
	int len;

	while (is_name_char(*ps->p))
		ps->p++;
	len = (int)(ps->p - name);
	skip_ws(ps);
	if (*ps->p == '(')
		return parse_call(ps, name, len);
	if (len > NAME_MAX_LEN) {
		fail_at(ps, name, "name '%.32s...' is %d bytes long; names are at most %d", name, len,
			NAME_MAX_LEN);
		return NULL;
	}
	if (!(node = new_node(ps, KS_EXPR_NAME, name)))
		return NULL;
	if (!(node->name = strndup(name, (size_t)len))) {
		fail_at(ps, name, "out of memory");
		return NULL;
	}
	return node;
}

static struct ks_expr_node *parse_primary(struct parser *ps)
{
	char found[64];

	skip_ws(ps);
	if (is_digit(*ps->p))
		return parse_number(ps, NULL);
	if (is_name_start(*ps->p))
		return parse_name(ps);
	if (*ps->p == '(') {
		const char *open = ps->p++;
		struct ks_expr_node *group = new_node(ps, KS_EXPR_GROUP, open), *inner;

		if (!group || !(inner = parse_expr(ps)) || add_kid(ps, group, inner))
			return NULL;
		skip_ws(ps);
		if (*ps->p != ')') {
			describe(ps->p, found, sizeof(found));
			fail_at(ps, ps->p, "expected ')' to close the '(' at column %d, found %s",
				(int)(open - ps->src) + 1, found);
			return NULL;
		}
		ps->p++;
		return group;
	}
	describe(ps->p, found, sizeof(found));
	fail_at(ps, ps->p, "expected a number, a name or '(', found %s", found);
	return NULL;
}

static struct ks_expr_node *parse_unary(struct parser *ps)
{
	struct ks_expr_node *node = NULL, *operand;
	const char *minus;

	skip_ws(ps);
	if (ps->depth >= MAX_DEPTH) {
		fail_at(ps, ps->p, "expression nested deeper than %d levels", MAX_DEPTH);
		return NULL;
	}
	ps->depth++;
	if (ps->p[0] == '!' && ps->p[1] != '=') {
		node = new_node(ps, KS_EXPR_NOT, ps->p++);
		if (node && (!(operand = parse_unary(ps)) || add_kid(ps, node, operand)))
			node = NULL;
		goto cleanup;
	}
	if (*ps->p != '-') {
		node = parse_primary(ps);
		goto cleanup;
	}
	minus = ps->p++;
	skip_ws(ps);
	if (is_digit(*ps->p)) {
		node = parse_number(ps, minus);
		goto cleanup;
	}
	node = new_node(ps, KS_EXPR_NEG, minus);
	if (node && (!(operand = parse_unary(ps)) || add_kid(ps, node, operand)))
		node = NULL;
cleanup:
	ps->depth--;
	return node;
}

static const struct {
	char code;
	const char *text;
} op_texts[] = {
	{ KS_OP_LE, "<=" }, { KS_OP_GE, ">=" }, { KS_OP_EQ, "==" }, { KS_OP_NE, "!=" }, { KS_OP_AND, "&&" },
	{ KS_OP_OR, "||" }, { '<', "<" },	{ '>', ">" },	    { '+', "+" },	{ '-', "-" },
	{ '*', "*" },	    { '/', "/" },	{ '%', "%" },
};

const char *ks_expr_op_text(char op)
{
	for (size_t i = 0; i < sizeof(op_texts) / sizeof(op_texts[0]); i++)
		if (op_texts[i].code == op)
			return op_texts[i].text;
	return "?";
}

/*
 * The operator of level ops at p, as its code (0: none).  ops lists the
 * level's codes; a longer spelling wins ("<=" before "<"), and "<" is not
 * taken from "<=" nor "&" alone for "&&".
 */
static char match_op(const char *p, const char *ops, size_t *len)
{
	char best = 0;

	*len = 0;
	for (const char *c = ops; *c; c++) {
		const char *text = ks_expr_op_text(*c);
		size_t n = strlen(text);

		if (!strncmp(p, text, n) && n > *len) {
			best = *c;
			*len = n;
		}
	}
	/* '<' must not stop at the first character of "<=" when only '<' is on this level, etc. */
	if (best && *len == 1 &&
	    (p[1] == '=' || (best == '<' && p[1] == '<') || (best == '>' && p[1] == '>')))
		return 0;
	return best;
}

/* operand (op operand)*, with ops one precedence level: a flat chain, or the single operand. */
static struct ks_expr_node *parse_chain(struct parser *ps, const char *ops,
					struct ks_expr_node *(*operand)(struct parser *))
{
	struct ks_expr_node *first = operand(ps), *chain = NULL;

	if (!first)
		return NULL;
	for (;;) {
		struct ks_expr_node *rhs;
		const char *op;
		size_t len;
		char code;

		skip_ws(ps);
		op = ps->p;
		code = *op ? match_op(op, ops, &len) : 0;
		if (!code)
			break;
		if (!chain && (!(chain = new_node(ps, KS_EXPR_CHAIN, ps->src + first->at)) ||
			       add_kid(ps, chain, first)))
			return NULL;
		ps->p += len;
		if (!(rhs = operand(ps)) || add_kid(ps, chain, rhs))
			return NULL;
		rhs->op = code;
		rhs->op_at = (size_t)(op - ps->src);
	}
	return chain ? chain : first;
}

static struct ks_expr_node *parse_term(struct parser *ps)
{
	return parse_chain(ps, "*/%", parse_unary);
}

static struct ks_expr_node *parse_sum(struct parser *ps)
{
	return parse_chain(ps, "+-", parse_term);
}

static struct ks_expr_node *parse_rel(struct parser *ps)
{
	static const char ops[] = { '<', KS_OP_LE, '>', KS_OP_GE, 0 };

	return parse_chain(ps, ops, parse_sum);
}

static struct ks_expr_node *parse_eq(struct parser *ps)
{
	static const char ops[] = { KS_OP_EQ, KS_OP_NE, 0 };

	return parse_chain(ps, ops, parse_rel);
}

static struct ks_expr_node *parse_and(struct parser *ps)
{
	static const char ops[] = { KS_OP_AND, 0 };

	return parse_chain(ps, ops, parse_eq);
}

static struct ks_expr_node *parse_expr(struct parser *ps)
{
	static const char ops[] = { KS_OP_OR, 0 };

	return parse_chain(ps, ops, parse_and);
}

void ks_expr_free(struct ks_expr *expr)
{
	if (!expr)
		return;
	for (size_t i = 0; i < expr->n_nodes; i++) {
		free(expr->nodes[i]->name);
		free(expr->nodes[i]->kids);
		free(expr->nodes[i]);
	}
	free(expr->nodes);
	free(expr->src);
	free(expr);
}

int ks_expr_parse(const char *src, struct ks_expr **out, struct ks_error *err)
{
	struct parser ps = { 0 };
	struct ks_expr *expr;
	char found[64];

	*out = NULL;
	if (!src)
		return ks_fail(err, "no expression given");
	if (!(expr = calloc(1, sizeof(*expr))) || !(expr->src = strdup(src))) {
		free(expr);
		return ks_fail(err, "out of memory: an expression of %zu bytes", strlen(src));
	}
	/* the tree's offsets are into expr->src, the same text as src */
	ps.expr = expr;
	ps.src = ps.p = expr->src;
	ps.err = err;
	skip_ws(&ps);
	if (!*ps.p) {
		fail_at(&ps, NULL, "empty expression");
		goto fail;
	}
	if (!(expr->root = parse_expr(&ps)))
		goto fail;
	skip_ws(&ps);
	if (*ps.p == ')') {
		fail_at(&ps, ps.p, "unexpected ')' without a matching '('");
		goto fail;
	}
	if (*ps.p) {
		describe(ps.p, found, sizeof(found));
		fail_at(&ps, ps.p, "unexpected %s after a complete expression", found);
		goto fail;
	}
	*out = expr;
	return 0;
fail:
	ks_expr_free(expr);
	return -1;
}

/* Evaluation */

static int binary(const struct ks_expr *expr, char op, size_t at, int64_t a, int64_t b, int64_t *out,
		  struct ks_error *err)
{
	int overflow = 0;

	switch (op) {
	case '+':
		overflow = __builtin_add_overflow(a, b, out);
		break;
	case '-':
		overflow = __builtin_sub_overflow(a, b, out);
		break;
	case '*':
		overflow = __builtin_mul_overflow(a, b, out);
		break;
	case '/':
		if (b == 0)
			return ks_expr_fail(expr, at, err, "division by zero");
		if (a == INT64_MIN && b == -1)
			overflow = 1;
		else
			*out = a / b;
		break;
	case '%':
		if (b == 0)
			return ks_expr_fail(expr, at, err, "modulo by zero");
		/* INT64_MIN % -1 is 0, but computing it traps on x86. */
		*out = b == -1 ? 0 : a % b;
		break;
	case '<':
		*out = a < b;
		break;
	case '>':
		*out = a > b;
		break;
	case KS_OP_LE:
		*out = a <= b;
		break;
	case KS_OP_GE:
		*out = a >= b;
		break;
	case KS_OP_EQ:
		*out = a == b;
		break;
	case KS_OP_NE:
		*out = a != b;
		break;
	case KS_OP_AND:
		*out = a && b;
		break;
	case KS_OP_OR:
		*out = a || b;
		break;
	default:
		return ks_expr_fail(expr, at, err, "internal error: operator '%c'", op);
	}
	if (overflow)
		return ks_expr_fail(expr, at, err, "%" PRId64 " %c %" PRId64 " overflows int64", a, op, b);
	return 0;
}

static int value_of(const struct ks_expr *expr, const struct ks_expr_node *node, const struct ks_env *env,
		    int64_t *out, struct ks_error *err)
{
	const struct ks_env_entry *e;
	char known[1024];
	int64_t v, lo = 0, hi = 0, first_two[2] = { 0, 0 };

	switch (node->kind) {
	case KS_EXPR_NUMBER:
		*out = node->value;
		return 0;
	case KS_EXPR_NAME:
		e = env_find(env, node->name, strlen(node->name));
		if (!e) {
			known_names(env, known, sizeof(known));
			return ks_expr_fail(expr, node->at, err, "unknown name '%s' (known: %s)", node->name,
					    known);
		}
		*out = e->value;
		return 0;
	case KS_EXPR_NEG:
		if (value_of(expr, node->kids[0], env, &v, err))
			return -1;
		if (v == INT64_MIN)
			return ks_expr_fail(expr, node->at, err, "-(%" PRId64 ") overflows int64", v);
		*out = -v;
		return 0;
	case KS_EXPR_NOT:
		if (value_of(expr, node->kids[0], env, &v, err))
			return -1;
		*out = !v;
		return 0;
	case KS_EXPR_GROUP:
		return value_of(expr, node->kids[0], env, out, err);
	case KS_EXPR_CALL:
		for (size_t i = 0; i < node->n_kids; i++) {
			if (value_of(expr, node->kids[i], env, &v, err))
				return -1;
			if (i < 2)
				first_two[i] = v;
			if (i == 0 || v < lo)
				lo = v;
			if (i == 0 || v > hi)
				hi = v;
		}
		if (node->func == KS_EXPR_MIN) {
			*out = lo;
		} else if (node->func == KS_EXPR_MAX) {
			*out = hi;
		} else {
			if (first_two[1] <= 0)
				return ks_expr_fail(expr, node->at, err,
						    "cdiv(%" PRId64 ", %" PRId64 ") needs a positive divisor",
						    first_two[0], first_two[1]);
			/* Truncation already rounds negative quotients up; b >= 1 so no overflow. */
			*out = first_two[0] / first_two[1] + (first_two[0] % first_two[1] > 0);
		}
		return 0;
	case KS_EXPR_CHAIN:
		if (value_of(expr, node->kids[0], env, &v, err))
			return -1;
		for (size_t i = 1; i < node->n_kids; i++) {
			char op = node->kids[i]->op;
			int64_t rhs;

			/* as in C, && and || stop as soon as the left side decides */
			if ((op == KS_OP_AND && !v) || (op == KS_OP_OR && v)) {
				v = op == KS_OP_OR;
				continue;
			}
			if (value_of(expr, node->kids[i], env, &rhs, err) ||
			    binary(expr, op, node->kids[i]->op_at, v, rhs, &v, err))
				return -1;
		}

		*out = v;
		return 0;
	}
	return ks_expr_fail(expr, node->at, err, "internal error: node kind %d", (int)node->kind);
}

int ks_expr_value(const struct ks_expr *expr, const struct ks_env *env, int64_t *out, struct ks_error *err)
{
	static const struct ks_env empty;
	int64_t value;

	if (value_of(expr, expr->root, env ? env : &empty, &value, err))
		return -1;
	if (out)
		*out = value;
	return 0;
}

int ks_expr_eval(const char *src, const struct ks_env *env, int64_t *out, struct ks_error *err)
{
	struct ks_expr *expr;
	int rc;

	if (ks_expr_parse(src, &expr, err) < 0)
		return -1;
	rc = ks_expr_value(expr, env, out, err);
	ks_expr_free(expr);
	return rc;
}

/* Names in order of appearance: the tree's kids are in source order. */
static void visit_names(const struct ks_expr_node *node, void (*visit)(const char *name, void *ctx),
			void *ctx)
{
	if (node->kind == KS_EXPR_NAME) {
		visit(node->name, ctx);
		return;
	}
	for (size_t i = 0; i < node->n_kids; i++)
		visit_names(node->kids[i], visit, ctx);
}

int ks_expr_names(const char *src, void (*visit)(const char *name, void *ctx), void *ctx,
		  struct ks_error *err)
{
	struct ks_expr *expr;

	if (ks_expr_parse(src, &expr, err) < 0)
		return -1;
	if (visit)
		visit_names(expr->root, visit, ctx);
	ks_expr_free(expr);
	return 0;
}
