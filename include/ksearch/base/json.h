/*
 * json.h - what the modules that read user-written JSON (op.json,
 * candidate blocks) share for their error messages.
 */
#ifndef KSEARCH_JSON_H
#define KSEARCH_JSON_H

#include <jansson.h>

/* "an object", "a list", "a string", ... for "expected X, got Y" messages. */
const char *ks_json_type_word(const json_t *value);

#endif
