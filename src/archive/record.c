/*
 * record.c - reading fields of candidate records.
 */
#include "ksearch/archive/record.h"

#include <stdlib.h>
#include <string.h>

#include "ksearch/base/json.h"
#include "ksearch/base/util.h"

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

double ks_record_ranked_us(const json_t *record, const json_t *w)
{
	const json_t *confirmation = json_object_get(record, "confirmation");
	const char *wid = json_string_value(json_object_get(w, "id")), *status;
	double median = json_number_value(json_object_get(w, "median_us")), again;

	if (!wid || !(median > 0))
		return 0;
	if (!json_is_object(confirmation))
		return median;
	status = json_string_value(json_object_get(confirmation, "status"));
	if (!status || strcmp(status, "ok"))
		return 0; /* it failed when timed again, or the confirmation is not one ksearch wrote */
	again = json_number_value(json_object_get(json_object_get(confirmation, "times_us"), wid));
	return again > median ? again : median;
}

/* ---- the typed record ---- */

/* The text of an absent field: shared, never freed, so an empty record owns nothing. */
static char no_text[1];

static void free_text(char **text)
{
	if (*text != no_text)
		free(*text);
	*text = no_text;
}

void ks_record_init(struct ks_record *rec)
{
	memset(rec, 0, sizeof(*rec));
	rec->op = rec->gpu = rec->source_hash = rec->created = no_text;
	rec->driver = rec->toolkit = rec->nvrtc = no_text;
	rec->family = rec->path = rec->mutation = no_text;
	ks_result_init(&rec->result);
}

void ks_record_release(struct ks_record *rec)
{
	free_text(&rec->op);
	free_text(&rec->gpu);
	free_text(&rec->source_hash);
	free_text(&rec->created);
	free_text(&rec->driver);
	free_text(&rec->toolkit);
	free_text(&rec->nvrtc);
	free_text(&rec->family);
	free_text(&rec->path);
	free_text(&rec->mutation);
	free(rec->parents);
	json_decref(rec->params);
	json_decref(rec->llm);
	json_decref(rec->profile);
	json_decref(rec->sanitizer);
	json_decref(rec->confirmation);
	ks_result_release(&rec->result);
	ks_record_init(rec);
}

/*
 * A field of the expected JSON type, or NULL when absent or null (the
 * archive stores the search's fields as given, and a null one says none);
 * -1 (err set) when of another type.
 */
static int typed(const json_t *obj, const char *name, int (*is)(const json_t *), const char *expected,
		 const json_t **out, struct ks_error *err)
{
	const json_t *v = json_object_get(obj, name);

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!is(v))
		return ks_fail(err, "%s: expected %s, got %s", name, expected, ks_json_type_word(v));
	*out = v;
	return 0;
}

static int is_string(const json_t *v)
{
	return json_is_string(v);
}

static int is_object(const json_t *v)
{
	return json_is_object(v);
}

static int is_array(const json_t *v)
{
	return json_is_array(v);
}

static int is_count(const json_t *v)
{
	return json_is_integer(v) && json_integer_value(v) >= 0;
}

static int read_text(const json_t *obj, const char *name, char **out, struct ks_error *err)
{
	const json_t *v;

	if (typed(obj, name, is_string, "a string", &v, err) < 0)
		return -1;
	if (v) {
		free_text(out);
		*out = ks_strdup(json_string_value(v));
	}
	return 0;
}

static int read_object(const json_t *obj, const char *name, json_t **out, struct ks_error *err)
{
	const json_t *v;

	if (typed(obj, name, is_object, "an object", &v, err) < 0)
		return -1;
	*out = v ? json_incref((json_t *)v) : NULL;
	return 0;
}

static int read_count(const json_t *obj, const char *name, uint64_t *out, struct ks_error *err)
{
	const json_t *v;

	if (typed(obj, name, is_count, "an integer >= 0", &v, err) < 0)
		return -1;
	*out = v ? (uint64_t)json_integer_value(v) : 0;
	return v != NULL;
}

static int read_provenance(const json_t *obj, struct ks_record *rec, struct ks_error *err)
{
	const json_t *v, *p;
	size_t i;
	uint64_t n;
	int got;

	if (read_count(obj, "id", &rec->id, err) < 0 || read_text(obj, "op", &rec->op, err) < 0 ||
	    read_text(obj, "gpu", &rec->gpu, err) < 0 ||
	    read_text(obj, "source_hash", &rec->source_hash, err) < 0 ||
	    read_text(obj, "created", &rec->created, err) < 0 ||
	    read_text(obj, "driver", &rec->driver, err) < 0 ||
	    read_text(obj, "toolkit", &rec->toolkit, err) < 0 ||
	    read_text(obj, "nvrtc", &rec->nvrtc, err) < 0 ||
	    read_text(obj, "family", &rec->family, err) < 0 || read_text(obj, "path", &rec->path, err) < 0 ||
	    read_text(obj, "mutation", &rec->mutation, err) < 0 ||
	    read_object(obj, "params", &rec->params, err) < 0 ||
	    read_object(obj, "llm", &rec->llm, err) < 0 ||
	    read_object(obj, "profile", &rec->profile, err) < 0 ||
	    read_object(obj, "sanitizer", &rec->sanitizer, err) < 0 ||
	    read_object(obj, "confirmation", &rec->confirmation, err) < 0 ||
	    read_count(obj, "duplicate_of", &rec->duplicate_of, err) < 0)
		return -1;
	if ((got = read_count(obj, "prompt_id", &rec->prompt_id, err)) < 0)
		return -1;
	rec->has |= got ? KS_RECORD_PROMPT_ID : 0;
	if ((got = read_count(obj, "seq", &n, err)) < 0)
		return -1;
	rec->seq = (int64_t)n;
	rec->has |= got ? KS_RECORD_SEQ : 0;
	if (typed(obj, "parents", is_array, "a list of ids", &v, err) < 0)
		return -1;
	rec->n_parents = json_array_size(v);
	rec->parents = ks_calloc(rec->n_parents ? rec->n_parents : 1, sizeof(*rec->parents));
	json_array_foreach(v, i, p)
	{
		if (!json_is_integer(p) || json_integer_value(p) < 1)
			return ks_fail(err, "parents[%zu]: expected an id (an integer >= 1), got %s", i,
				       ks_json_type_word(p));
		rec->parents[i] = (uint64_t)json_integer_value(p);
	}
	rec->sanitizer_failed = ks_record_sanitizer_failed(obj);
	return 0;
}

int ks_record_parse(const json_t *obj, struct ks_record *rec, struct ks_error *err)
{
	const json_t *desc;
	uint64_t id;

	ks_record_release(rec);
	if (!json_is_object(obj))
		return ks_fail(err, "a record must be a JSON object, got %s", ks_json_type_word(obj));
	id = ks_record_id(obj);
	if (read_provenance(obj, rec, err) < 0 || ks_result_from_json(obj, &rec->result, err) < 0)
		goto fail;
	rec->has |= json_is_number(json_object_get(obj, "fitness")) ? KS_RECORD_FITNESS : 0;
	rec->has |= json_is_number(json_object_get(obj, "sol_fraction")) ? KS_RECORD_SOL_FRACTION : 0;
	desc = json_object_get(obj, "descriptors");
	for (int d = 0; d < KS_DESC_COUNT; d++)
		if (json_is_number(json_object_get(desc, ks_descriptor_name((enum ks_descriptor)d))))
			rec->has_descriptor |= 1u << d;
	return 0;
fail:
	if (id)
		ks_error_prefix(err, "record %llu", (unsigned long long)id);
	else
		ks_error_prefix(err, "a record");
	ks_record_release(rec);
	return -1;
}

json_t *ks_record_to_json(const struct ks_record *rec)
{
	json_t *record = json_object(), *parents = json_array();

	for (size_t i = 0; i < rec->n_parents; i++)
		json_array_append_new(parents, json_integer((json_int_t)rec->parents[i]));
	json_object_set_new(record, "family", json_string(rec->family));
	json_object_set_new(record, "path", json_string(rec->path));
	json_object_set_new(record, "params", rec->params ? json_incref(rec->params) : json_object());
	json_object_set_new(record, "parents", parents);
	json_object_set_new(record, "mutation", json_string(rec->mutation));
	if (rec->has & KS_RECORD_SEQ)
		json_object_set_new(record, "seq", json_integer((json_int_t)rec->seq));
	if (rec->has & KS_RECORD_PROMPT_ID)
		json_object_set_new(record, "prompt_id", json_integer((json_int_t)rec->prompt_id));
	if (rec->llm)
		json_object_set_new(record, "llm", json_incref(rec->llm));
	if (rec->duplicate_of)
		json_object_set_new(record, "duplicate_of", json_integer((json_int_t)rec->duplicate_of));
	ks_result_to_json_into(&rec->result, record);
	return record;
}
