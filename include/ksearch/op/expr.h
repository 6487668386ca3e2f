/*
 * expr.h - integer expressions over named values.
 *
 * Candidate launch blocks and op definitions size things with expressions
 * such as "cdiv(num_kv_indices, TILE) * B" or "TILE*D*4".  Grammar:
 *
 *   expr    := term (('+' | '-') term)*
 *   term    := unary (('*' | '/' | '%') unary)*
 *   unary   := '-' unary | primary
 *   primary := INTEGER | NAME | NAME '(' expr (',' expr)* ')' | '(' expr ')'
 *
 * Arithmetic is on int64_t.  '/' and '%' truncate toward zero like C.
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

/* Evaluate src in env. */
int ks_expr_eval(const char *src, const struct ks_env *env, int64_t *out, struct ks_error *err);

/*
 * Call visit(name, ctx) for every name (not function) the expression
 * refers to, in order of appearance; fails on a syntax error.  Used to
 * validate expressions before any value is known.
 */
int ks_expr_names(const char *src, void (*visit)(const char *name, void *ctx), void *ctx,
		  struct ks_error *err);

#endif
