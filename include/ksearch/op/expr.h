/*
 * expr.h - integer expressions over named values.
 *
 * Candidate launch blocks and op definitions size things with expressions
 * such as "cdiv(num_kv_indices, TILE) * B" or "TILE*D*4".  Grammar:
 *
 *   expr    := and ('||' and)*
 *   and     := eq ('&&' eq)*
 *   eq      := rel (('==' | '!=') rel)*
 *   rel     := sum (('<' | '<=' | '>' | '>=') sum)*
 *   sum     := term (('+' | '-') term)*
 *   term    := unary (('*' | '/' | '%') unary)*
 *   unary   := '-' unary | '!' unary | primary
 *   primary := INTEGER | NAME | NAME '(' expr (',' expr)* ')' | '(' expr ')'
 *
 * Arithmetic is on int64_t.  '/' and '%' truncate toward zero like C.
 * Comparisons and '!' give 1 or 0; '&&' and '||' give 1 or 0 and, as in C,
 * do not evaluate their right side when the left decides (so
 * "B != 0 && A % B == 0" never divides by zero).  These are for a
 * candidate's constraints; sizes use the arithmetic.
 * Functions: cdiv(a, b) (ceiling division, b > 0), min(a, b, ...),
 * max(a, b, ...).  Names are looked up in a struct ks_env.
 *
 * Errors are never crashes: a syntax error, an unknown name, an unknown
 * function or wrong argument count, division or modulo by zero, and any
 * overflow of int64_t each fail with a message that quotes the expression
 * and names the culprit, e.g.
 *   in "TILE*D*4": unknown name 'D' (known: B, HQ, TILE, ...)
 */
#ifndef KSEARCH_EXPR_H
#define KSEARCH_EXPR_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/base/error.h"

struct ks_env_entry {
	char name[64];
	int64_t value;
};

/*
 * A flat list of names and values.  Plain data: ks_env_init() sets it up
 * without allocating, ks_env_release() frees the entries.  Later entries
 * shadow earlier ones with the same name (ks_env_set replaces in place).
 */
struct ks_env {
	struct ks_env_entry *entries;
	size_t count;
	size_t alloc;
};

void ks_env_init(struct ks_env *env);
void ks_env_release(struct ks_env *env);
/* Add or replace; returns -1 only if the name is longer than 63 bytes or memory runs out. */
int ks_env_set(struct ks_env *env, const char *name, int64_t value, struct ks_error *err);
/* Returns 1 and stores the value when found, else 0. */
int ks_env_get(const struct ks_env *env, const char *name, int64_t *value);

/*
 * The syntax tree: one parser for the grammar above, used by every stage
 * that reads an expression (the evaluator here, export.c's translation to
 * C).  A chain is a run of operators of one precedence level, kept flat
 * (kids[0] ops[0] kids[1] ops[1] kids[2] ...) so that a long sum costs no
 * depth (each operand after the first carries the operator before it).
 * A literal written with a minus ("-5") is one NUMBER with a negative
 * value, at the '-', so that -9223372036854775808 is expressible.
 * Offsets ("at") count bytes from the start of the source, for messages.
 */
enum ks_expr_kind {
	KS_EXPR_NUMBER, /* value */
	KS_EXPR_NAME,	/* name */
	KS_EXPR_NEG,	/* -kids[0], at the '-' */
	KS_EXPR_NOT,	/* !kids[0], at the '!' */
	KS_EXPR_GROUP,	/* (kids[0]), at the '(' */
	KS_EXPR_CALL,	/* func(kids...), at the name; arity already checked */
	KS_EXPR_CHAIN,	/* kids[0] op kids[1] op ...: operators of one precedence level (enum ks_expr_op) */
};

enum ks_expr_func { KS_EXPR_CDIV, KS_EXPR_MIN, KS_EXPR_MAX };

/*
 * Chain operators, one char each: the one-character operators stand for
 * themselves; the two-character ones have codes of their own.
 */
enum ks_expr_op {
	KS_OP_LE = 'l',	 /* <= */
	KS_OP_GE = 'g',	 /* >= */
	KS_OP_EQ = 'e',	 /* == */
	KS_OP_NE = 'n',	 /* != */
	KS_OP_AND = 'a', /* && */
	KS_OP_OR = 'o',	 /* || */
};

/* An operator code's C spelling: "+", "<=", "&&" ... */
const char *ks_expr_op_text(char op);

struct ks_expr_node {
	enum ks_expr_kind kind;
	size_t at;
	int64_t value;		/* NUMBER */
	char *name;		/* NAME: the name; CALL: the function's name */
	enum ks_expr_func func; /* CALL */
	struct ks_expr_node **kids;
	size_t n_kids, alloc_kids;
	/* an operand of a CHAIN after its first: the operator before it, and where that is */
	char op;
	size_t op_at;
};

/* A parsed expression: its own copy of the source, and the tree (owned). */
struct ks_expr {
	char *src;
	struct ks_expr_node *root;
	struct ks_expr_node **nodes; /* every node, for ks_expr_free() */
	size_t n_nodes, alloc_nodes;
};

/*
 * Parse src.  Fails on everything that does not depend on values: syntax,
 * unknown functions and their argument counts, literals that do not fit
 * int64, names longer than 63 bytes, nesting deeper than 200 levels.
 */
int ks_expr_parse(const char *src, struct ks_expr **out, struct ks_error *err);
void ks_expr_free(struct ks_expr *expr);
/* The value of a parsed expression in env (NULL: no names). */
int ks_expr_value(const struct ks_expr *expr, const struct ks_env *env, int64_t *out, struct ks_error *err);
/*
 * 'in "<src>": <message> at column <at + 1>' (no column when at is
 * SIZE_MAX), quoting the source as every expression error does; always -1.
 */
int ks_expr_fail(const struct ks_expr *expr, size_t at, struct ks_error *err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Parse and evaluate src in env. */
int ks_expr_eval(const char *src, const struct ks_env *env, int64_t *out, struct ks_error *err);

/*
 * Call visit(name, ctx) for every name (not function) the expression
 * refers to, in order of appearance; fails on a syntax error.  Used to
 * validate expressions before any value is known.
 */
int ks_expr_names(const char *src, void (*visit)(const char *name, void *ctx), void *ctx,
		  struct ks_error *err);

#endif
