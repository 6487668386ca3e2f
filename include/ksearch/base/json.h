/*
 * json.h - what the modules that read user-written JSON (op.json,
 * candidate blocks) share for their error messages.
 */
#ifndef KSEARCH_JSON_H
#define KSEARCH_JSON_H

#include <jansson.h>

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

#endif
