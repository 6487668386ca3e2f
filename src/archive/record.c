/*
 * record.c - reading fields of candidate records.
 */
#include "ksearch/archive/record.h"

#include <string.h>

uint64_t ks_record_id(const json_t *record)
{
	json_int_t id = json_integer_value(json_object_get(record, "id"));

	return id > 0 ? (uint64_t)id : 0;
}

const char *ks_record_str(const json_t *record, const char *field, const char *fallback)
{
	const char *s = json_string_value(json_object_get(record, field));

	return s ? s : fallback;
}

const char *ks_record_text(const json_t *record, const char *field, const char *fallback)
{
	const char *s = ks_record_str(record, field, NULL);

	return s && *s ? s : fallback;
}

double ks_record_num(const json_t *record, const char *field)

{
	return json_number_value(json_object_get(record, field));
}

int ks_record_verdict(const json_t *record, enum ks_verdict *verdict)
{
	const char *name = json_string_value(json_object_get(record, "verdict"));

	if (name && ks_verdict_parse(name, verdict) == 0)
		return 0;
	*verdict = KS_VERDICT_CRASH;
	return -1;
}

int ks_record_sanitizer_failed(const json_t *record)
{
	const char *status =
		json_string_value(json_object_get(json_object_get(record, "sanitizer"), "status"));

	return status && !strcmp(status, "failed");
}
