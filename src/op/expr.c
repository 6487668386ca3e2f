/*
 * expr.c - recursive-descent evaluator for the integer expressions of
 * expr.h.
 *
 * One parser serves both entry points: ks_expr_eval() computes as it
 * parses, ks_expr_names() runs the same grammar with no environment, so
 * the two can never disagree about what is valid syntax.  In names mode
 * values are meaningless (always 0) and only the checks that do not
 * depend on values are made.
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
 * below any stack limit.
 */
#define MAX_DEPTH 200

/* Longest stretch of the source quoted in an error message. */
#define QUOTE_MAX 160

#define NAME_MAX_LEN ((int)sizeof(((struct ks_env_entry *)0)->name) - 1)

struct parser {
	const char *src;
	const char *p;
	const struct ks_env *env; /* NULL: check syntax and visit names only */
	void (*visit)(const char *name, void *ctx);
	void *ctx;
	int depth;
	struct ks_error *err;
};

enum func_kind { FUNC_CDIV, FUNC_MIN, FUNC_MAX };

static const struct func {
	const char *name;
	enum func_kind kind;
	int min_args, max_args;
} funcs[] = {
	{ "cdiv", FUNC_CDIV, 2, 2 },
	{ "min", FUNC_MIN, 2, INT_MAX },
	{ "max", FUNC_MAX, 2, INT_MAX },
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
 * from 1; at NULL leaves the column out).  Control characters in the
 * quote become spaces so that a newline in the source cannot break the
 * message, and the column still lines up.
 */
static int fail_at(struct parser *ps, const char *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail_at(struct parser *ps, const char *at, const char *fmt, ...)
{
	char quote[QUOTE_MAX + 4];
	char msg[KS_ERROR_MAX];
	size_t len = strlen(ps->src), i;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	for (i = 0; i < len && i < QUOTE_MAX; i++) {
		unsigned char c = (unsigned char)ps->src[i];

		quote[i] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
	}
	if (len > QUOTE_MAX) {
		memcpy(quote + i, "...", 3);
		i += 3;
	}
	quote[i] = '\0';

	if (!at)
		return ks_fail(ps->err, "in \"%s\": %s", quote, msg);
	return ks_fail(ps->err, "in \"%s\": %s at column %d", quote, msg, (int)(at - ps->src) + 1);
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

static int parse_expr(struct parser *ps, int64_t *out);

/*
 * INTEGER, accumulated with the sign it will have so that
 * -9223372036854775808 is expressible.
 */
static int parse_number(struct parser *ps, int negative, int64_t *out)
{
	const char *start = ps->p;
	int64_t value = 0;
	int overflow = 0;

	while (is_digit(*ps->p)) {
		int64_t digit = *ps->p - '0';

		if (!overflow) {
			overflow = __builtin_mul_overflow(value, 10, &value);
			if (!overflow) {
				if (negative)
					overflow = __builtin_sub_overflow(value, digit, &value);
				else
					overflow = __builtin_add_overflow(value, digit, &value);
			}
		}
		ps->p++;
	}
	if (overflow)
		return fail_at(ps, start, "integer literal %s%.*s does not fit in int64", negative ? "-" : "",
			       (int)(ps->p - start), start);
	if (is_name_start(*ps->p)) {
		char found[64];

		describe(ps->p, found, sizeof(found));
		return fail_at(ps, ps->p, "unexpected %s right after the number %.*s", found,
			       (int)(ps->p - start), start);
	}
	*out = value;
	return 0;
}

static int binary(struct parser *ps, char op, const char *at, int64_t a, int64_t b, int64_t *out)
{
	int overflow = 0;

	if (!ps->env) {
		*out = 0;
		return 0;
	}
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
			return fail_at(ps, at, "division by zero");
		if (a == INT64_MIN && b == -1)
			overflow = 1;
		else
			*out = a / b;
		break;
	case '%':
		if (b == 0)
			return fail_at(ps, at, "modulo by zero");
		/* INT64_MIN % -1 is 0, but computing it traps on x86. */
		*out = b == -1 ? 0 : a % b;
		break;
	}
	if (overflow)
		return fail_at(ps, at, "%" PRId64 " %c %" PRId64 " overflows int64", a, op, b);
	return 0;
}

static int call(struct parser *ps, const struct func *fn, const char *at, const int64_t *first_two,
		int64_t lo, int64_t hi, int64_t *out)
{
	int64_t a, b;

	if (!ps->env) {
		*out = 0;
		return 0;
	}
	switch (fn->kind) {
	case FUNC_CDIV:
		a = first_two[0];
		b = first_two[1];
		if (b <= 0)
			return fail_at(ps, at, "cdiv(%" PRId64 ", %" PRId64 ") needs a positive divisor", a,
				       b);
		/* Truncation already rounds negative quotients up; b >= 1 so no overflow. */
		*out = a / b + (a % b > 0);
		return 0;
	case FUNC_MIN:
		*out = lo;
		return 0;
	case FUNC_MAX:
		*out = hi;
		return 0;
	}
	return fail_at(ps, at, "internal error: function '%s' has no implementation", fn->name);
}

static int parse_call(struct parser *ps, const char *name, int len, int64_t *out)
{
	const struct func *fn = NULL;
	int64_t first_two[2] = { 0, 0 }, lo = 0, hi = 0;
	char found[64];
	int nargs = 0;
	size_t i;

	for (i = 0; i < sizeof(funcs) / sizeof(funcs[0]); i++)
		if ((int)strlen(funcs[i].name) == len && !strncmp(funcs[i].name, name, (size_t)len))
			fn = &funcs[i];
	if (!fn)
		return fail_at(ps, name, "unknown function '%.*s' (known: cdiv, min, max)", len, name);

	ps->p++; /* '(' */
	skip_ws(ps);
	if (*ps->p != ')') {
		for (;;) {
			int64_t arg;

			if (parse_expr(ps, &arg))
				return -1;
			if (nargs < 2)
				first_two[nargs] = arg;
			if (nargs == 0 || arg < lo)
				lo = arg;
			if (nargs == 0 || arg > hi)
				hi = arg;
			nargs++;
			skip_ws(ps);
			if (*ps->p == ',') {
				ps->p++;
				continue;
			}
			if (*ps->p == ')')
				break;
			describe(ps->p, found, sizeof(found));
			return fail_at(ps, ps->p, "expected ',' or ')' in the arguments of %s(), found %s",
				       fn->name, found);
		}
	}
	ps->p++; /* ')' */

	if (nargs < fn->min_args || nargs > fn->max_args) {
		if (fn->min_args == fn->max_args)
			return fail_at(ps, name, "%s() takes %d arguments, got %d", fn->name, fn->min_args,
				       nargs);
		return fail_at(ps, name, "%s() takes at least %d arguments, got %d", fn->name, fn->min_args,
			       nargs);
	}
	return call(ps, fn, name, first_two, lo, hi, out);
}

static int parse_name(struct parser *ps, int64_t *out)
{
	const char *name = ps->p;
	const struct ks_env_entry *e;
	char known[1024];
	int len;

	while (is_name_char(*ps->p))
		ps->p++;
	len = (int)(ps->p - name);
	skip_ws(ps);
	if (*ps->p == '(')
		return parse_call(ps, name, len, out);

	if (len > NAME_MAX_LEN)
		return fail_at(ps, name, "name '%.32s...' is %d bytes long; names are at most %d", name, len,
			       NAME_MAX_LEN);
	if (!ps->env) {
		char copy[64];

		memcpy(copy, name, (size_t)len);
		copy[len] = '\0';
		if (ps->visit)
			ps->visit(copy, ps->ctx);
		*out = 0;
		return 0;
	}
	e = env_find(ps->env, name, (size_t)len);
	if (!e) {
		known_names(ps->env, known, sizeof(known));
		return fail_at(ps, name, "unknown name '%.*s' (known: %s)", len, name, known);
	}
	*out = e->value;
	return 0;
}

static int parse_primary(struct parser *ps, int64_t *out)
{
	char found[64];

	skip_ws(ps);
	if (is_digit(*ps->p))
		return parse_number(ps, 0, out);
	if (is_name_start(*ps->p))
		return parse_name(ps, out);
	if (*ps->p == '(') {
		const char *open = ps->p++;

		if (parse_expr(ps, out))
			return -1;
		skip_ws(ps);
		if (*ps->p != ')') {
			describe(ps->p, found, sizeof(found));
			return fail_at(ps, ps->p, "expected ')' to close the '(' at column %d, found %s",
				       (int)(open - ps->src) + 1, found);
		}
		ps->p++;
		return 0;
	}
	describe(ps->p, found, sizeof(found));
	return fail_at(ps, ps->p, "expected a number, a name or '(', found %s", found);
}

static int parse_unary(struct parser *ps, int64_t *out)
{
	const char *minus;
	int64_t value;
	int ret;

	skip_ws(ps);
	if (ps->depth >= MAX_DEPTH)
		return fail_at(ps, ps->p, "expression nested deeper than %d levels", MAX_DEPTH);
	ps->depth++;
	if (*ps->p != '-') {
		ret = parse_primary(ps, out);
		goto cleanup;
	}
	minus = ps->p++;
	skip_ws(ps);
	if (is_digit(*ps->p)) {
		ret = parse_number(ps, 1, out);
		goto cleanup;
	}
	ret = parse_unary(ps, &value);
	if (ret || !ps->env) {
		*out = 0;
		goto cleanup;
	}
	if (value == INT64_MIN)
		ret = fail_at(ps, minus, "-(%" PRId64 ") overflows int64", value);
	else
		*out = -value;
cleanup:
	ps->depth--;
	return ret;
}

static int parse_term(struct parser *ps, int64_t *out)
{
	int64_t lhs, rhs;

	if (parse_unary(ps, &lhs))
		return -1;
	for (;;) {
		const char *op;

		skip_ws(ps);
		op = ps->p;
		if (*op != '*' && *op != '/' && *op != '%')
			break;
		ps->p++;
		if (parse_unary(ps, &rhs) || binary(ps, *op, op, lhs, rhs, &lhs))
			return -1;
	}
	*out = lhs;
	return 0;
}

static int parse_expr(struct parser *ps, int64_t *out)
{
	int64_t lhs, rhs;

	if (parse_term(ps, &lhs))
		return -1;
	for (;;) {
		const char *op;

		skip_ws(ps);
		op = ps->p;
		if (*op != '+' && *op != '-')
			break;
		ps->p++;
		if (parse_term(ps, &rhs) || binary(ps, *op, op, lhs, rhs, &lhs))
			return -1;
	}
	*out = lhs;
	return 0;
}

static int parse_all(struct parser *ps, int64_t *out)
{
	char found[64];

	skip_ws(ps);
	if (!*ps->p)
		return fail_at(ps, NULL, "empty expression");
	if (parse_expr(ps, out))
		return -1;
	skip_ws(ps);
	if (*ps->p == ')')
		return fail_at(ps, ps->p, "unexpected ')' without a matching '('");
	if (*ps->p) {
		describe(ps->p, found, sizeof(found));
		return fail_at(ps, ps->p, "unexpected %s after a complete expression", found);
	}
	return 0;
}

int ks_expr_eval(const char *src, const struct ks_env *env, int64_t *out, struct ks_error *err)
{
	static const struct ks_env empty;
	struct parser ps = { 0 };
	int64_t value;

	if (!src)
		return ks_fail(err, "no expression given");
	ps.src = ps.p = src;
	ps.env = env ? env : &empty;
	ps.err = err;
	if (parse_all(&ps, &value))
		return -1;
	if (out)
		*out = value;
	return 0;
}

int ks_expr_names(const char *src, void (*visit)(const char *name, void *ctx), void *ctx,
		  struct ks_error *err)
{
	struct parser ps = { 0 };
	int64_t ignored;

	if (!src)
		return ks_fail(err, "no expression given");
	ps.src = ps.p = src;
	ps.visit = visit;
	ps.ctx = ctx;
	ps.err = err;
	return parse_all(&ps, &ignored);
}
