/*
 * json.h - what the modules that read user-written JSON (op.json,
 * candidate blocks) share for their error messages.
 */
#ifndef KSEARCH_JSON_H
#define KSEARCH_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "ksearch/base/error.h"

/* "an object", "a list", "a string", ... for "expected X, got Y" messages. */
const char *ks_json_type_word(const json_t *value);

/*
 * A JSON string of text that may hold bytes other than UTF-8 (a path from
 * the command line, a compiler's log, evidence quoting a candidate):
 * json_string() gives NULL for those, and a NULL set into an object or
 * packed into a message loses the field or the whole message.  Bytes that
 * are not UTF-8 become U+FFFD; NULL text gives "".  Never NULL.
 */
json_t *ks_json_text(const char *text);

/*
 * Strict readers of a JSON object's fields, for what another process wrote
 * (a rank's profile outcome): they refuse rather than repair, and name the
 * field by its path, at being the path up to the key ("" or
 * "profile.kernels[2].").  Each returns -1 (NULL) with err on refusal.
 */
const json_t *ks_json_field(const json_t *obj, const char *at, const char *key, struct ks_error *err);
/* v an object; name is its whole path. */
int ks_json_want_object(const json_t *v, const char *name, struct ks_error *err);
/* v a string that fits buf whole (too long is refused, never cut), without NUL bytes. */
int ks_json_text_into(const json_t *v, const char *at, const char *key, char *buf, size_t size,
		      struct ks_error *err);
int ks_json_field_text(const json_t *obj, const char *at, const char *key, char *buf, size_t size,
		       struct ks_error *err);
/* A finite number; with at_least_zero, not negative either (a duration, a byte count). */
int ks_json_field_number(const json_t *obj, const char *at, const char *key, int at_least_zero, double *out,
			 struct ks_error *err);
/* A whole number from 0 to max. */
int ks_json_field_count(const json_t *obj, const char *at, const char *key, json_int_t max, json_int_t *out,
			struct ks_error *err);
/* One of the n words names[] (an enum's names, in order); its index into *out. */
int ks_json_field_word(const json_t *obj, const char *at, const char *key, const char *const *names, int n,
		       int *out, struct ks_error *err);
/* A list of at most max entries. */
const json_t *ks_json_field_list(const json_t *obj, const char *at, const char *key, size_t max,
				 struct ks_error *err);

#endif
