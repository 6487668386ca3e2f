/*
 * test_expr.c - the expression language of expr.h: what it computes, and
 * that every kind of bad input fails with a message naming the problem.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/op/expr.h"

struct fixture {
	struct ks_env env;
	struct ks_error err;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	ks_env_init(&f->env);
	if (ks_env_set(&f->env, "TILE", 64, &f->err) || ks_env_set(&f->env, "B", 4, &f->err) ||
	    ks_env_set(&f->env, "HQ", 32, &f->err) || ks_env_set(&f->env, "num_kv_indices", 1000, &f->err) ||
	    ks_env_set(&f->env, "a", 7, &f->err) || ks_env_set(&f->env, "b", 3, &f->err) ||
	    ks_env_set(&f->env, "big", INT64_MAX, &f->err) ||
	    ks_env_set(&f->env, "small", INT64_MIN, &f->err))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	ks_env_release(&f->env);
	free(f);
	return 0;
}

static int64_t eval_ok(struct fixture *f, const char *src)
{
	int64_t v = -12345;

	f->err.msg[0] = '\0';
	if (ks_expr_eval(src, &f->env, &v, &f->err) != 0)
		fail_msg("\"%s\" failed: %s", src, f->err.msg);
	return v;
}

/* Evaluation must fail and the message must contain every given fragment. */
static void eval_fails(struct fixture *f, const char *src, const char *want)
{
	int64_t v = 777;

	f->err.msg[0] = '\0';
	if (ks_expr_eval(src, &f->env, &v, &f->err) == 0)
		fail_msg("\"%s\" evaluated to %lld but should fail with \"%s\"", src, (long long)v, want);
	assert_int_equal(v, 777); /* out untouched on failure */
	if (!strstr(f->err.msg, want))
		fail_msg("\"%s\": message \"%s\" lacks \"%s\"", src, f->err.msg, want);
}

static void test_integers_and_whitespace(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(eval_ok(f, "0"), 0);
	assert_int_equal(eval_ok(f, "42"), 42);
	assert_int_equal(eval_ok(f, "  \t42\n "), 42);
	assert_int_equal(eval_ok(f, "007"), 7);
	assert_int_equal(eval_ok(f, "9223372036854775807"), INT64_MAX);
	assert_int_equal(eval_ok(f, "-9223372036854775808"), INT64_MIN);
	assert_int_equal(eval_ok(f, " TILE * B "), 256);
	assert_int_equal(eval_ok(f, "cdiv ( num_kv_indices , TILE ) * B"), 64);
}

static void test_precedence_and_associativity(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(eval_ok(f, "1+2*3"), 7);
	assert_int_equal(eval_ok(f, "2*3+1"), 7);
	assert_int_equal(eval_ok(f, "10-4-3"), 3); /* left to right */
	assert_int_equal(eval_ok(f, "100/10/5"), 2);
	assert_int_equal(eval_ok(f, "2*3%4"), 2);     /* (2*3)%4 */
	assert_int_equal(eval_ok(f, "7+10%4*2"), 11); /* 7 + ((10%4)*2) */
	assert_int_equal(eval_ok(f, "TILE*HQ/B-a"), 64 * 32 / 4 - 7);
}

/* Comparisons and logic: C's precedence, 0/1 results, && and || short-circuit. */
static void test_comparisons_and_logic(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(eval_ok(f, "a < b"), 0);
	assert_int_equal(eval_ok(f, "a > b"), 1);
	assert_int_equal(eval_ok(f, "a <= 7"), 1);
	assert_int_equal(eval_ok(f, "a >= 8"), 0);
	assert_int_equal(eval_ok(f, "a == 7"), 1);
	assert_int_equal(eval_ok(f, "a != 7"), 0);
	assert_int_equal(eval_ok(f, "!a"), 0);
	assert_int_equal(eval_ok(f, "!!a"), 1);
	assert_int_equal(eval_ok(f, "!(a - 7)"), 1);
	assert_int_equal(eval_ok(f, "TILE % 16 == 0 && TILE <= 64"), 1);
	assert_int_equal(eval_ok(f, "TILE*4 + 1024 <= 1000 || B == 4"), 1);
	assert_int_equal(eval_ok(f, "1 || 0 && 0"), 1); /* && binds tighter */
	assert_int_equal(eval_ok(f, "1 + 2 == 3"), 1);	/* arithmetic binds tighter */
	assert_int_equal(eval_ok(f, "1 < 2 == 1"), 1);	/* relational before equality */
	assert_int_equal(eval_ok(f, "3 > 2 > 1"), 0);	/* left to right, as C */
	/* the right side is not evaluated when the left decides */
	assert_int_equal(eval_ok(f, "0 && a / 0"), 0);
	assert_int_equal(eval_ok(f, "1 || a / 0"), 1);
	assert_int_equal(eval_ok(f, "b != 0 && a % b == 1"), 1);
	eval_fails(f, "1 && a / 0", "division by zero");
	eval_fails(f, "a = b", "unexpected '='");
	eval_fails(f, "a < ", "expected a number, a name or '('");
	eval_fails(f, "a << 2", "unexpected '<'");
	eval_fails(f, "a & b", "unexpected '&'");
	eval_fails(f, "a =< b", "unexpected '='");
}

static void test_parentheses(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(eval_ok(f, "(1+2)*3"), 9);
	assert_int_equal(eval_ok(f, "((((5))))"), 5);
	assert_int_equal(eval_ok(f, "2*(3+(4-1)*2)"), 18);
	assert_int_equal(eval_ok(f, "10-(4-3)"), 9);
}

static void test_unary_minus(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(eval_ok(f, "-5"), -5);
	assert_int_equal(eval_ok(f, "--5"), 5);
	assert_int_equal(eval_ok(f, "- - -a"), -7);
	assert_int_equal(eval_ok(f, "-a*b"), -21);
	assert_int_equal(eval_ok(f, "2*-3"), -6);
	assert_int_equal(eval_ok(f, "2--3"), 5);
	assert_int_equal(eval_ok(f, "-(a+b)"), -10);
	assert_int_equal(eval_ok(f, "-big"), -INT64_MAX);
}

static void test_division_truncates_toward_zero(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(eval_ok(f, "7/2"), 3);
	assert_int_equal(eval_ok(f, "-7/2"), -3);
	assert_int_equal(eval_ok(f, "7/-2"), -3);
	assert_int_equal(eval_ok(f, "7%3"), 1);
	assert_int_equal(eval_ok(f, "-7%3"), -1);
	assert_int_equal(eval_ok(f, "7%-3"), 1);
	assert_int_equal(eval_ok(f, "small%-1"), 0);
	assert_int_equal(eval_ok(f, "small/1"), INT64_MIN);
}

static void test_functions(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(eval_ok(f, "cdiv(10, 3)"), 4);
	assert_int_equal(eval_ok(f, "cdiv(9, 3)"), 3);
	assert_int_equal(eval_ok(f, "cdiv(0, 5)"), 0);
	assert_int_equal(eval_ok(f, "cdiv(1, 5)"), 1);
	assert_int_equal(eval_ok(f, "cdiv(-7, 2)"), -3); /* ceil(-3.5) */
	assert_int_equal(eval_ok(f, "cdiv(big, 1)"), INT64_MAX);
	assert_int_equal(eval_ok(f, "cdiv(big, 2)"), INT64_MAX / 2 + 1);
	assert_int_equal(eval_ok(f, "cdiv(small, 2)"), INT64_MIN / 2);
	assert_int_equal(eval_ok(f, "min(3, 1)"), 1);
	assert_int_equal(eval_ok(f, "max(3, 1)"), 3);
	assert_int_equal(eval_ok(f, "min(5, -2, 9, 0)"), -2);
	assert_int_equal(eval_ok(f, "max(5, -2, 9, 0)"), 9);
	assert_int_equal(eval_ok(f, "max(min(a, b), cdiv(TILE, b)) + 1"), 23);
	/* A function name without '(' is an ordinary name. */
	assert_int_equal(ks_env_set(&f->env, "min", 11, &f->err), 0);
	assert_int_equal(eval_ok(f, "min + min(min, 2)"), 13);
}

static void test_errors_quote_the_expression(void **state)
{
	struct fixture *f = *state;

	eval_fails(f, "TILE*D*4", "in \"TILE*D*4\": unknown name 'D'");
	eval_fails(f, "a/(b-b)", "in \"a/(b-b)\": division by zero at column 2");
}

static void test_unknown_name_lists_known_names(void **state)
{
	struct fixture *f = *state;

	eval_fails(f, "TILE*D*4",
		   "unknown name 'D' (known: B, HQ, TILE, a, b, big, "
		   "num_kv_indices, small) at column 6");
	eval_fails(f, "tile", "unknown name 'tile'"); /* names are case-sensitive */

	{
		struct ks_env empty;
		struct ks_error err;
		int64_t v;

		ks_env_init(&empty);
		assert_int_equal(ks_expr_eval("x + 1", &empty, &v, &err), -1);
		assert_non_null(strstr(err.msg, "unknown name 'x' (known: nothing is defined)"));
		assert_int_equal(ks_expr_eval("x + 1", NULL, &v, &err), -1);
		assert_non_null(strstr(err.msg, "unknown name 'x'"));
	}
}

static void test_unknown_function_and_arity(void **state)
{
	struct fixture *f = *state;

	eval_fails(f, "2 + floor(a)", "unknown function 'floor' (known: cdiv, min, max) at column 5");
	eval_fails(f, "cdiv(a)", "cdiv() takes 2 arguments, got 1 at column 1");
	eval_fails(f, "cdiv(a, b, 1)", "cdiv() takes 2 arguments, got 3");
	eval_fails(f, "cdiv()", "cdiv() takes 2 arguments, got 0");
	eval_fails(f, "min(a)", "min() takes at least 2 arguments, got 1");
	eval_fails(f, "1 + max()", "max() takes at least 2 arguments, got 0 at column 5");
}

static void test_division_and_modulo_by_zero(void **state)
{
	struct fixture *f = *state;

	eval_fails(f, "a / 0", "division by zero at column 3");
	eval_fails(f, "a % (b - 3)", "modulo by zero at column 3");
	eval_fails(f, "cdiv(a, 0)", "cdiv(7, 0) needs a positive divisor at column 1");
	eval_fails(f, "cdiv(a, -b)", "cdiv(7, -3) needs a positive divisor");
}

static void test_every_overflow_fails(void **state)
{
	struct fixture *f = *state;

	eval_fails(f, "big + 1", "9223372036854775807 + 1 overflows int64 at column 5");
	eval_fails(f, "small - 1", "-9223372036854775808 - 1 overflows int64");
	eval_fails(f, "big * 2", "9223372036854775807 * 2 overflows int64");
	eval_fails(f, "small * -1", "-9223372036854775808 * -1 overflows int64");
	eval_fails(f, "small / -1", "-9223372036854775808 / -1 overflows int64");
	eval_fails(f, "-small", "-(-9223372036854775808) overflows int64 at column 1");
	eval_fails(f, "--9223372036854775808", "-(-9223372036854775808) overflows int64");
	eval_fails(f, "9223372036854775808",
		   "integer literal 9223372036854775808 does not fit in int64 at column 1");
	eval_fails(f, "1 + -9223372036854775809",
		   "integer literal -9223372036854775809 does not fit in int64 at column 6");
	eval_fails(f, "99999999999999999999999999", "does not fit in int64");
	eval_fails(f, "(9223372036854775808)", "does not fit in int64");
	/* An overflowing intermediate is an error even if the final result would fit. */
	eval_fails(f, "big + 1 - 1", "overflows int64");
	assert_int_equal(eval_ok(f, "big - 1 + 1"), INT64_MAX);
}

static void test_syntax_errors(void **state)
{
	struct fixture *f = *state;

	eval_fails(f, "", "in \"\": empty expression");
	eval_fails(f, "   \t\n", "empty expression");
	eval_fails(f, "1 +", "expected a number, a name or '(', found the end of the expression at column 4");
	eval_fails(f, "* 2", "expected a number, a name or '(', found '*' at column 1");
	eval_fails(f, "(1 + 2",
		   "expected ')' to close the '(' at column 1, found the end of the expression at column 7");
	eval_fails(f, "1 + 2)", "unexpected ')' without a matching '(' at column 6");
	eval_fails(f, "min(a b)", "expected ',' or ')' in the arguments of min(), found 'b' at column 7");
	eval_fails(f, "min(a,)", "found ')' at column 7");
	eval_fails(f, "4D", "unexpected 'D' right after the number 4 at column 2");
	eval_fails(f, "0x10", "unexpected 'x10' right after the number 0");
	eval_fails(f, "a $ b", "unexpected '$' after a complete expression at column 3");
	eval_fails(f, "a\x01", "unexpected byte 0x01 after a complete expression");
	eval_fails(f, "a + 1.5", "unexpected '.' after a complete expression");
	eval_fails(f, "TILE B", "unexpected 'B' after a complete expression at column 6");
	eval_fails(
		f, "a +\n* b",
		"in \"a + * b\": expected a number, a name or '(', found '*' at column 5"); /* newline quoted
											       as space */
}

static void test_trailing_garbage_fails(void **state)
{
	struct fixture *f = *state;

	eval_fails(f, "1 2", "unexpected '2' after a complete expression at column 3");
	eval_fails(f, "(a) (b)", "unexpected '(' after a complete expression at column 5");
	eval_fails(f, "a;", "unexpected ';'");
}

static void test_deep_nesting_fails_cleanly(void **state)
{
	struct fixture *f = *state;
	size_t n = 100000, i;
	char *src = malloc(2 * n + 2);

	assert_non_null(src);
	/* Reasonable depth still works. */
	for (i = 0; i < 100; i++)
		src[i] = '(';
	src[100] = '1';
	for (i = 0; i < 100; i++)
		src[101 + i] = ')';
	src[201] = '\0';
	assert_int_equal(eval_ok(f, src), 1);

	/* Hostile depth is an error, not a stack overflow. */
	for (i = 0; i < n; i++)
		src[i] = '(';
	src[n] = '1';
	for (i = 0; i < n; i++)
		src[n + 1 + i] = ')';
	src[2 * n + 1] = '\0';
	eval_fails(f, src, "nested deeper than 200 levels");

	memset(src, '-', n);
	src[n] = '1';
	src[n + 1] = '\0';
	eval_fails(f, src, "nested deeper than 200 levels");

	src[0] = '\0';
	for (i = 0; i < 1000; i++)
		strcat(src, "min(1,");
	eval_fails(f, src, "nested deeper than 200 levels");
	free(src);
}

static void test_long_expression_quote_is_truncated(void **state)
{
	struct fixture *f = *state;
	char src[1200];
	size_t i;

	for (i = 0; i + 2 < sizeof(src) - 2; i += 2)
		memcpy(src + i, "1+", 2);
	strcpy(src + i, "x");
	eval_fails(f, src, "...\": unknown name 'x'");
	assert_true(strlen(f->err.msg) < 500);

	/* Long chains are iterative, not recursive. */
	for (i = 0; i + 2 < sizeof(src) - 2; i += 2)
		memcpy(src + i, "1+", 2);
	strcpy(src + i, "1");
	assert_int_equal(eval_ok(f, src), (int64_t)(i / 2 + 1));
}

static void test_env_set_replace_get(void **state)
{
	struct ks_env env;
	struct ks_error err;
	char name[80];
	int64_t v = 0;
	int i;

	(void)state;
	ks_env_init(&env);
	assert_int_equal(ks_env_get(&env, "x", &v), 0);
	assert_int_equal(ks_env_set(&env, "x", 1, &err), 0);
	assert_int_equal(ks_env_set(&env, "y", 2, &err), 0);
	assert_int_equal(ks_env_get(&env, "x", &v), 1);
	assert_int_equal(v, 1);
	assert_int_equal(ks_env_set(&env, "x", -5, &err), 0); /* replace in place */
	assert_int_equal(env.count, 2);
	assert_string_equal(env.entries[0].name, "x");
	assert_int_equal(ks_env_get(&env, "x", &v), 1);
	assert_int_equal(v, -5);
	assert_int_equal(ks_env_get(&env, "xx", &v), 0);
	assert_int_equal(ks_env_get(&env, "", &v), 0);
	assert_int_equal(ks_env_get(&env, "y", NULL), 1);

	/* Growth keeps every value. */
	for (i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		assert_int_equal(ks_env_set(&env, name, i * 3, &err), 0);
	}
	for (i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		assert_int_equal(ks_env_get(&env, name, &v), 1);
		assert_int_equal(v, i * 3);
	}
	assert_int_equal(env.count, 1002);

	/* 63 bytes fit in the entry, 64 do not. */
	memset(name, 'k', 63);
	name[63] = '\0';
	assert_int_equal(ks_env_set(&env, name, 9, &err), 0);
	assert_int_equal(ks_env_get(&env, name, &v), 1);
	assert_int_equal(v, 9);
	assert_int_equal(ks_expr_eval(name, &env, &v, &err), 0);
	assert_int_equal(v, 9);
	memset(name, 'k', 64);
	name[64] = '\0';
	assert_int_equal(ks_env_set(&env, name, 9, &err), -1);
	assert_non_null(strstr(err.msg, "names are at most 63"));
	assert_int_equal(ks_expr_eval(name, &env, &v, &err), -1);
	assert_non_null(strstr(err.msg, "names are at most 63"));

	ks_env_release(&env);
	assert_null(env.entries);
	assert_int_equal(env.count, 0);
	ks_env_release(&env); /* releasing twice is harmless */
}

struct seen {
	char names[16][64];
	int n;
};

static void collect(const char *name, void *ctx)
{
	struct seen *s = ctx;

	if (s->n < 16)
		snprintf(s->names[s->n], sizeof(s->names[0]), "%s", name);
	s->n++;
}

static void test_names_in_order_of_appearance(void **state)
{
	struct ks_error err;
	struct seen s = { .n = 0 };

	(void)state;
	/* Values are unknown: division by a name that may be 0 is not an error here. */
	assert_int_equal(ks_expr_names("cdiv(num_kv_indices, TILE) * B + x/(y-y) + TILE", collect, &s, &err),
			 0);
	assert_int_equal(s.n, 7);
	assert_string_equal(s.names[0], "num_kv_indices");
	assert_string_equal(s.names[1], "TILE");
	assert_string_equal(s.names[2], "B");
	assert_string_equal(s.names[3], "x");
	assert_string_equal(s.names[4], "y");
	assert_string_equal(s.names[5], "y");
	assert_string_equal(s.names[6], "TILE");

	s.n = 0;
	assert_int_equal(ks_expr_names("1 + 2 * -3", collect, &s, &err), 0);
	assert_int_equal(s.n, 0);
	/* Function names are not names; a name spelled like one is. */
	assert_int_equal(ks_expr_names("max(min, 1)", collect, &s, &err), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.names[0], "min");
	assert_int_equal(ks_expr_names("a + b", NULL, NULL, &err), 0);
}

static void test_names_fails_on_static_errors(void **state)
{
	struct ks_error err;
	struct seen s = { .n = 0 };

	(void)state;
	assert_int_equal(ks_expr_names("a +", collect, &s, &err), -1);
	assert_non_null(strstr(err.msg, "in \"a +\": expected a number, a name or '('"));
	assert_int_equal(ks_expr_names("", collect, &s, &err), -1);
	assert_non_null(strstr(err.msg, "empty expression"));
	assert_int_equal(ks_expr_names("a b", collect, &s, &err), -1);
	assert_non_null(strstr(err.msg, "unexpected 'b' after a complete expression"));
	assert_int_equal(ks_expr_names("sqrt(a)", collect, &s, &err), -1);
	assert_non_null(strstr(err.msg, "unknown function 'sqrt'"));
	assert_int_equal(ks_expr_names("cdiv(a)", collect, &s, &err), -1);
	assert_non_null(strstr(err.msg, "cdiv() takes 2 arguments, got 1"));
	assert_int_equal(ks_expr_names("9223372036854775808", collect, &s, &err), -1);
	assert_non_null(strstr(err.msg, "does not fit in int64"));
	assert_int_equal(ks_expr_names(NULL, collect, &s, &err), -1);
}

static void test_null_arguments(void **state)
{
	struct fixture *f = *state;
	int64_t v;

	assert_int_equal(ks_expr_eval(NULL, &f->env, &v, &f->err), -1);
	assert_non_null(strstr(f->err.msg, "no expression"));
	/* A NULL error struct is allowed: the caller only wants the verdict. */
	assert_int_equal(ks_expr_eval("1/0", &f->env, &v, NULL), -1);
	assert_int_equal(ks_expr_eval("1+1", &f->env, NULL, NULL), 0);
}

/* The tree every reader shares: chains are flat, a literal keeps its sign, offsets point into the source. */
static void test_tree_shape(void **state)
{
	struct ks_expr *e;
	struct ks_error err;
	const struct ks_expr_node *root, *product, *call;

	(void)state;
	assert_int_equal(ks_expr_parse("1 + 2*b - -4 + max(a, (b), -a)", &e, &err), 0);
	root = e->root;
	assert_int_equal(root->kind, KS_EXPR_CHAIN);
	assert_int_equal(root->n_kids, 4);
	assert_int_equal(root->kids[0]->kind, KS_EXPR_NUMBER);
	assert_int_equal(root->kids[0]->value, 1);
	product = root->kids[1];
	assert_int_equal(product->kind, KS_EXPR_CHAIN);
	assert_int_equal(product->op, '+');
	assert_int_equal(product->op_at, 2);
	assert_int_equal(product->n_kids, 2);
	assert_int_equal(product->kids[1]->op, '*');
	assert_int_equal(product->kids[1]->kind, KS_EXPR_NAME);
	assert_string_equal(product->kids[1]->name, "b");
	assert_int_equal(root->kids[2]->kind, KS_EXPR_NUMBER);
	assert_int_equal(root->kids[2]->value, -4);
	assert_int_equal(root->kids[2]->op, '-');
	assert_int_equal(root->kids[2]->at, 10); /* at its '-' */
	call = root->kids[3];
	assert_int_equal(call->kind, KS_EXPR_CALL);
	assert_int_equal(call->func, KS_EXPR_MAX);
	assert_string_equal(call->name, "max");
	assert_int_equal(call->n_kids, 3);
	assert_int_equal(call->kids[1]->kind, KS_EXPR_GROUP);
	assert_int_equal(call->kids[2]->kind, KS_EXPR_NEG);
	assert_int_equal(call->kids[2]->kids[0]->kind, KS_EXPR_NAME);
	ks_expr_free(e);

	/* a long sum is one node with many kids, not a deep tree */
	{
		char src[2001];

		for (int i = 0; i < 1000; i++)
			memcpy(src + 2 * i, "1+", 2);
		src[1999] = '\0';
		assert_int_equal(ks_expr_parse(src, &e, &err), 0);
		assert_int_equal(e->root->kind, KS_EXPR_CHAIN);
		assert_int_equal(e->root->n_kids, 1000);
		ks_expr_free(e);
	}
	assert_int_equal(ks_expr_parse("1 +", &e, &err), -1);
	assert_null(e);
	ks_expr_free(NULL);
}

/*
 * Random expressions, written out with their value computed here
 * independently (left to right, int64 with every overflow an error): the
 * parser and evaluator must agree on every one.
 */
struct rng {
	uint64_t state;
};

static uint32_t rnd(struct rng *r, uint32_t n)
{
	r->state ^= r->state << 13;
	r->state ^= r->state >> 7;
	r->state ^= r->state << 17;
	return (uint32_t)(r->state % n);
}

struct gen {
	char text[4096];
	size_t len;
	int bad;       /* evaluating it fails: overflow or a zero divisor */
	int truncated; /* too long for text: not the expression the value is of */
};

static void put(struct gen *g, struct rng *r, const char *s)
{
	size_t n = strlen(s);

	if (g->len + n + 2 >= sizeof(g->text)) {
		g->truncated = 1;
		return;
	}
	if (rnd(r, 4) == 0)
		g->text[g->len++] = " \t\n"[rnd(r, 3)];
	memcpy(g->text + g->len, s, n);
	g->len += n;
	g->text[g->len] = '\0';
}

static int64_t gen_expr(struct gen *g, struct rng *r, int depth);

static int64_t gen_operand(struct gen *g, struct rng *r, int depth)
{
	static const char *const names[] = { "TILE", "B", "HQ", "a", "b", "num_kv_indices" };
	static const int64_t values[] = { 64, 4, 32, 7, 3, 1000 };
	char buf[64];
	int64_t v, w, lo, hi, first = 0, second = 0;
	uint32_t kind = depth > 2 ? rnd(r, 2) : rnd(r, 6);

	if (depth < 0) /* a leaf: a number or a name */
		kind = rnd(r, 2);

	switch (kind) {
	case 0:
		v = rnd(r, 10) == 0   ? (int64_t)rnd(r, 2000000000) * 4
		    : rnd(r, 20) == 0 ? 0
				      : 1 + (int64_t)rnd(r, 99);
		snprintf(buf, sizeof(buf), "%lld", (long long)v);
		put(g, r, buf);
		return v;
	case 1:
		v = rnd(r, 6);
		put(g, r, names[v]);
		return values[v];
	case 2:
		put(g, r, "(");
		v = gen_expr(g, r, depth + 1);
		put(g, r, ")");
		return v;
	case 3:
		put(g, r, "-");
		put(g, r, "(");
		v = gen_expr(g, r, depth + 1);
		put(g, r, ")");
		if (v == INT64_MIN)
			g->bad = 1;
		return g->bad ? 0 : -v;
	default: {
		int n = kind == 4 ? 2 : 2 + (int)rnd(r, 3);
		const char *fn = kind == 4 ? "cdiv" : rnd(r, 2) ? "min" : "max";

		put(g, r, fn);
		put(g, r, "(");
		lo = hi = 0;
		for (int i = 0; i < n; i++) {
			if (i)
				put(g, r, ",");
			/* a divisor that is mostly positive, so that most calls evaluate */
			w = kind == 4 && i == 1 && rnd(r, 4) ? gen_operand(g, r, -1)
							     : gen_expr(g, r, depth + 1);
			if (i == 0)
				first = w;
			if (i == 1)
				second = w;
			if (i == 0 || w < lo)
				lo = w;
			if (i == 0 || w > hi)
				hi = w;
		}
		put(g, r, ")");
		if (kind != 4)
			return fn[1] == 'i' ? lo : hi;
		if (second <= 0) {
			g->bad = 1;
			return 0;
		}
		return first / second + (first % second > 0);
	}
	}
}

/* A chain of one precedence level, of operands (products within sums). */
static int64_t gen_chain(struct gen *g, struct rng *r, int depth, int sums)
{
	int n = 1 + (int)rnd(r, 3);
	int64_t acc = sums ? gen_chain(g, r, depth, 0) : gen_operand(g, r, depth), rhs;

	for (int i = 1; i < n; i++) {
		char op = sums ? "++-"[rnd(r, 3)] : "***/%"[rnd(r, 5)];
		char s[2] = { op, 0 };
		int64_t out = 0;

		put(g, r, s);
		if (sums)
			rhs = gen_chain(g, r, depth, 0);
		else /* mostly a leaf after '/' and '%', so that most divisors are not 0 */
			rhs = gen_operand(g, r, op != '*' && rnd(r, 4) ? -1 : depth);
		if (g->bad)
			continue;
		switch (op) {
		case '+':
			g->bad |= __builtin_add_overflow(acc, rhs, &out);
			break;
		case '-':
			g->bad |= __builtin_sub_overflow(acc, rhs, &out);
			break;
		case '*':
			g->bad |= __builtin_mul_overflow(acc, rhs, &out);
			break;
		case '/':
			if (rhs == 0 || (acc == INT64_MIN && rhs == -1))
				g->bad = 1;
			else
				out = acc / rhs;
			break;
		case '%':
			if (rhs == 0)
				g->bad = 1;
			else
				out = rhs == -1 ? 0 : acc % rhs;
			break;
		}
		acc = out;
	}
	return acc;
}

static int64_t gen_expr(struct gen *g, struct rng *r, int depth)
{
	return gen_chain(g, r, depth, 1);
}

static void test_random_expressions_agree_with_a_reference(void **state)
{
	struct fixture *f = *state;
	struct rng r = { 0x9e3779b97f4a7c15ull };
	int ok = 0, failed = 0;

	for (int i = 0; i < 20000; i++) {
		struct gen g = { .len = 0 };
		int64_t want = gen_expr(&g, &r, 0), got = 0;
		int rc = ks_expr_eval(g.text, &f->env, &got, &f->err);

		if (g.truncated)
			continue;
		if (g.bad) {
			if (rc == 0)
				fail_msg("\"%s\" evaluated to %lld; the reference finds an overflow or a "
					 "zero divisor",
					 g.text, (long long)got);
			if (!strstr(f->err.msg, "overflows int64") && !strstr(f->err.msg, "by zero") &&
			    !strstr(f->err.msg, "positive divisor"))
				fail_msg("\"%s\": unexpected message \"%s\"", g.text, f->err.msg);
			failed++;
			continue;
		}
		if (rc != 0)
			fail_msg("\"%s\" failed: %s (the reference computes %lld)", g.text, f->err.msg,
				 (long long)want);
		if (got != want)
			fail_msg("\"%s\" is %lld, the reference computes %lld", g.text, (long long)got,
				 (long long)want);
		ok++;
	}
	/* both kinds were really exercised */
	printf("%d evaluated, %d failed as the reference says\n", ok, failed);
	assert_true(ok > 3000);
	assert_true(failed > 1000);
}

static void count_names(const char *name, void *ctx)
{
	(void)name;
	(*(int *)ctx)++;
}

/*
 * Garbled expressions (valid ones with bytes inserted, deleted or
 * replaced, any byte value) must fail with a message that quotes the
 * expression, or evaluate; never crash (the sanitizer suite runs this
 * too).  Evaluation and ks_expr_names() parse alike: a syntax error fails
 * both with the same message.
 */
static void test_garbled_expressions_fail_cleanly(void **state)
{
	struct fixture *f = *state;
	struct rng r = { 12345 };
	static const char alphabet[] = "()+-*/%,0123456789abTILE_ \t\n$#.;\"'\\\x01\x7f\xff";
	int rejected = 0;

	for (int i = 0; i < 20000; i++) {
		struct gen g = { .len = 0 };
		struct ks_error names_err;
		int64_t v = 0;
		int rc, names_rc, n_names = 0;

		gen_expr(&g, &r, 2);
		for (int m = 1 + (int)rnd(&r, 3); m > 0 && g.len + 2 < sizeof(g.text); m--) {
			size_t at = rnd(&r, (uint32_t)g.len + 1);
			uint32_t how = rnd(&r, 3);
			char c = rnd(&r, 8) ? alphabet[rnd(&r, sizeof(alphabet) - 1)]
					    : (char)(1 + rnd(&r, 255));

			if (how == 0) {
				memmove(g.text + at + 1, g.text + at, g.len - at + 1);
				g.text[at] = c;
				g.len++;
			} else if (how == 1 && at < g.len) {
				memmove(g.text + at, g.text + at + 1, g.len - at);
				g.len--;
			} else if (at < g.len) {
				g.text[at] = c;
			}
		}
		f->err.msg[0] = '\0';
		rc = ks_expr_eval(g.text, &f->env, &v, &f->err);
		names_rc = ks_expr_names(g.text, count_names, &n_names, &names_err);
		if (rc != 0) {
			rejected++;
			if (strncmp(f->err.msg, "in \"", 4))
				fail_msg("\"%s\": the message \"%s\" does not quote the expression", g.text,
					 f->err.msg);
		}
		if (names_rc != 0 && (rc == 0 || strcmp(names_err.msg, f->err.msg)))
			fail_msg("\"%s\": ks_expr_names fails (\"%s\") but evaluation says \"%s\"", g.text,
				 names_err.msg, rc ? f->err.msg : "ok");
		/* parsed, it can fail only on values */
		if (names_rc == 0 && rc != 0 && !strstr(f->err.msg, "unknown name") &&
		    !strstr(f->err.msg, "overflows int64") && !strstr(f->err.msg, "by zero") &&
		    !strstr(f->err.msg, "positive divisor"))
			fail_msg("\"%s\" parses, but evaluating it says \"%s\"", g.text, f->err.msg);
	}
	assert_true(rejected > 5000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_integers_and_whitespace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_precedence_and_associativity, setup, teardown),
		cmocka_unit_test_setup_teardown(test_comparisons_and_logic, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parentheses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unary_minus, setup, teardown),
		cmocka_unit_test_setup_teardown(test_division_truncates_toward_zero, setup, teardown),
		cmocka_unit_test_setup_teardown(test_functions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_errors_quote_the_expression, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_name_lists_known_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_function_and_arity, setup, teardown),
		cmocka_unit_test_setup_teardown(test_division_and_modulo_by_zero, setup, teardown),
		cmocka_unit_test_setup_teardown(test_every_overflow_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_syntax_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trailing_garbage_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deep_nesting_fails_cleanly, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_expression_quote_is_truncated, setup, teardown),
		cmocka_unit_test(test_env_set_replace_get),
		cmocka_unit_test(test_names_in_order_of_appearance),
		cmocka_unit_test(test_names_fails_on_static_errors),
		cmocka_unit_test_setup_teardown(test_null_arguments, setup, teardown),
		cmocka_unit_test(test_tree_shape),
		cmocka_unit_test_setup_teardown(test_random_expressions_agree_with_a_reference, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_garbled_expressions_fail_cleanly, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
