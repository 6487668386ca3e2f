#include "ksearch/base/json.h"

#include <math.h>
#include <stdio.h>
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

const json_t *ks_json_field(const json_t *obj, const char *at, const char *key, struct ks_error *err)
{
	const json_t *v = json_object_get(obj, key);

	if (!v)
		ks_fail(err, "%s%s: missing", at, key);
	return v;
}

int ks_json_want_object(const json_t *v, const char *name, struct ks_error *err)
{
	if (!v)
		return ks_fail(err, "%s: missing", name);
	if (!json_is_object(v))
		return ks_fail(err, "%s: expected an object, got %s", name, ks_json_type_word(v));
	return 0;
}

int ks_json_text_into(const json_t *v, const char *at, const char *key, char *buf, size_t size,
		      struct ks_error *err)
{
	size_t len;

	if (!json_is_string(v))
		return ks_fail(err, "%s%s: expected a string, got %s", at, key, ks_json_type_word(v));
	len = json_string_length(v);
	if (len >= size)
		return ks_fail(err, "%s%s: %zu bytes, more than the %zu it may have", at, key, len, size - 1);
	if (memchr(json_string_value(v), '\0', len))
		return ks_fail(err, "%s%s: holds a NUL byte", at, key);
	memcpy(buf, json_string_value(v), len + 1);
	return 0;
}

int ks_json_field_text(const json_t *obj, const char *at, const char *key, char *buf, size_t size,
		       struct ks_error *err)
{
	const json_t *v = ks_json_field(obj, at, key, err);

	return v ? ks_json_text_into(v, at, key, buf, size, err) : -1;
}

int ks_json_field_number(const json_t *obj, const char *at, const char *key, int at_least_zero, double *out,
			 struct ks_error *err)
{
	const json_t *v = ks_json_field(obj, at, key, err);

	if (!v)
		return -1;
	if (!json_is_number(v))
		return ks_fail(err, "%s%s: expected a number, got %s", at, key, ks_json_type_word(v));
	*out = json_number_value(v);
	if (!isfinite(*out))
		return ks_fail(err, "%s%s: not a finite number", at, key);
	if (at_least_zero && *out < 0)
		return ks_fail(err, "%s%s: %g is negative", at, key, *out);
	return 0;
}

int ks_json_field_count(const json_t *obj, const char *at, const char *key, json_int_t max, json_int_t *out,
			struct ks_error *err)
{
	const json_t *v = ks_json_field(obj, at, key, err);

	if (!v)
		return -1;
	if (!json_is_integer(v))
		return ks_fail(err, "%s%s: expected an integer, got %s", at, key, ks_json_type_word(v));
	*out = json_integer_value(v);
	if (*out < 0)
		return ks_fail(err, "%s%s: %lld is negative", at, key, (long long)*out);
	if (*out > max)
		return ks_fail(err, "%s%s: %lld is more than %lld", at, key, (long long)*out, (long long)max);
	return 0;
}

const json_t *ks_json_field_list(const json_t *obj, const char *at, const char *key, size_t max,
				 struct ks_error *err)
{
	const json_t *v = ks_json_field(obj, at, key, err);

	if (!v)
		return NULL;
	if (!json_is_array(v)) {
		ks_fail(err, "%s%s: expected a list, got %s", at, key, ks_json_type_word(v));
		return NULL;
	}
	if (json_array_size(v) > max) {
		ks_fail(err, "%s%s: %zu entries, more than the %zu kept", at, key, json_array_size(v), max);
		return NULL;
	}
	return v;
}

int ks_json_field_word(const json_t *obj, const char *at, const char *key, const char *const *names, int n,
		       int *out, struct ks_error *err)
{
	const json_t *v = ks_json_field(obj, at, key, err);
	char list[256] = "";

	if (!v)
		return -1;
	if (!json_is_string(v))
		return ks_fail(err, "%s%s: expected a string, got %s", at, key, ks_json_type_word(v));
	for (int i = 0; i < n; i++) {
		if (!strcmp(json_string_value(v), names[i])) {
			*out = i;
			return 0;
		}
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s\"%s\"", i ? ", " : "",
			 names[i]);
	}
	return ks_fail(err, "%s%s: \"%.64s\" is not one of %s", at, key, json_string_value(v), list);
}
