#include "ksearch/base/json.h"

#include <stdlib.h>
#include <string.h>

#include "ksearch/base/util.h"

json_t *ks_json_text(const char *text)
{
	json_t *s;
	char *clean;

	if (!text)
		return json_string("");
	if (ks_utf8_invalid(text, strlen(text)) < 0 && (s = json_string(text)))
		return s;
	clean = ks_utf8_sanitize(text);
	s = json_string(clean);
	free(clean);
	return s ? s : json_string("");
}

const char *ks_json_type_word(const json_t *value)
{
	switch (json_typeof(value)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "a list";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		return "null";
	}
	return "?";
}
