/*
 * error.h - how every ksearch function reports failure.
 *
 * One convention, used everywhere in the library: a function that can fail
 * returns 0 on success and -1 on failure, and fills the caller's
 * struct ks_error with a message a user can act on (which file, line,
 * field; what was expected and what was found).  Callers add context on
 * the way up with ks_error_prefix() ("operators/gqa/op.json: " ...).
 * Library code never prints and never exits; only src/cli/ does.
 */
#ifndef KSEARCH_ERROR_H
#define KSEARCH_ERROR_H

#include <stddef.h>

#define KS_ERROR_MAX 4096

struct ks_error {
	char msg[KS_ERROR_MAX];
};

/* Set err (if not NULL) from a printf format; always returns -1. */
int ks_fail(struct ks_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepend context to an existing message: "<context>: <old message>". */
void ks_error_prefix(struct ks_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Empty the message. */
void ks_error_clear(struct ks_error *err);

#endif
