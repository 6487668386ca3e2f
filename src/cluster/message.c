/*
 * message.c - the ranks' messages as bytes and back (message.h).
 */
#include "ksearch/cluster/message.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/json.h"
#include "ksearch/base/util.h"

#define MAGIC "KSD1"
#define MAGIC_LEN 4

static const char *const type_names[KS_CLUSTER_TYPE_COUNT] = {
	[KS_CLUSTER_HELLO] = "hello",	[KS_CLUSTER_JOB] = "job",	    [KS_CLUSTER_BUILT] = "built",
	[KS_CLUSTER_EVAL] = "eval",	[KS_CLUSTER_DROP] = "drop",	    [KS_CLUSTER_RESULT] = "result",
	[KS_CLUSTER_FAILED] = "failed", [KS_CLUSTER_ALIVE] = "alive",	    [KS_CLUSTER_STOP] = "stop",
	[KS_CLUSTER_BYE] = "bye",	[KS_CLUSTER_EVIDENCE] = "evidence", [KS_CLUSTER_OUTCOME] = "outcome",
};

const char *ks_cluster_type_name(enum ks_cluster_type type)
{
	return (unsigned)type < KS_CLUSTER_TYPE_COUNT ? type_names[type] : "?";
}

void ks_cluster_msg_init(struct ks_cluster_msg *msg, enum ks_cluster_type type)
{
	memset(msg, 0, sizeof(*msg));
	msg->type = type;
	ks_result_init(&msg->result);
}

void ks_cluster_msg_release(struct ks_cluster_msg *msg)
{
	free(msg->family);
	free(msg->path);
	free(msg->source);
	free(msg->error);
	free(msg->model);
	json_decref(msg->outcome);
	ks_result_release(&msg->result);
	ks_cluster_msg_init(msg, msg->type);
}

void ks_cluster_msg_encode(const struct ks_cluster_msg *msg, char **buf, size_t *len)
{
	json_t *obj = json_object();
	json_t *params;
	char *text;
	size_t n;

	json_object_set_new(obj, "type", json_string(ks_cluster_type_name(msg->type)));
	switch (msg->type) {
	case KS_CLUSTER_HELLO:
		json_object_set_new(obj, "gpus", json_integer(msg->gpus));
		json_object_set_new(obj, "jobs", json_integer(msg->jobs));
		json_object_set_new(obj, "evaluator", json_integer(msg->evaluator));
		json_object_set_new(obj, "model", ks_json_text(msg->model));
		break;
	case KS_CLUSTER_JOB:
	case KS_CLUSTER_EVIDENCE:
		json_object_set_new(obj, "job", json_integer((json_int_t)msg->job));
		if (msg->type == KS_CLUSTER_EVIDENCE)
			json_object_set_new(
				obj, "kind",
				json_string(msg->kind == KS_CLUSTER_SANITIZE ? "sanitize" : "profile"));
		json_object_set_new(obj, "family", ks_json_text(msg->family));
		json_object_set_new(obj, "path", ks_json_text(msg->path));
		json_object_set_new(obj, "source", ks_json_text(msg->source));
		params = json_array();
		for (size_t i = 0; i < msg->n_params; i++)
			json_array_append_new(params, json_integer(msg->params[i]));
		json_object_set_new(obj, "params", params);
		json_object_set_new(obj, "deadline_ms", json_integer(msg->deadline_ms));
		if (msg->type == KS_CLUSTER_JOB)
			json_object_set_new(obj, "evaluate", json_boolean(msg->evaluate));
		break;
	case KS_CLUSTER_OUTCOME:
		json_object_set_new(obj, "job", json_integer((json_int_t)msg->job));
		json_object_set_new(obj, "outcome", msg->outcome ? json_incref(msg->outcome) : json_object());
		break;
	case KS_CLUSTER_BUILT:
	case KS_CLUSTER_RESULT:
		json_object_set_new(obj, "job", json_integer((json_int_t)msg->job));
		if (msg->type == KS_CLUSTER_BUILT)
			json_object_set_new(obj, "held", json_boolean(msg->held));
		json_object_set_new(obj, "result", ks_result_to_json(&msg->result));
		break;
	case KS_CLUSTER_EVAL:
		json_object_set_new(obj, "job", json_integer((json_int_t)msg->job));
		json_object_set_new(obj, "deadline_ms", json_integer(msg->deadline_ms));
		break;
	case KS_CLUSTER_DROP:
		json_object_set_new(obj, "job", json_integer((json_int_t)msg->job));
		break;
	case KS_CLUSTER_FAILED:
		json_object_set_new(obj, "job", json_integer((json_int_t)msg->job));
		json_object_set_new(obj, "error", ks_json_text(msg->error));
		break;
	default:
		break;
	}
	text = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	n = strlen(text);
	*buf = ks_malloc(MAGIC_LEN + n);
	memcpy(*buf, MAGIC, MAGIC_LEN);
	memcpy(*buf + MAGIC_LEN, text, n);
	*len = MAGIC_LEN + n;
	free(text);
}

/* obj's field key as an integer in [lo, hi] into *out; -1 naming the field otherwise. */
static int get_int(const json_t *obj, const char *type, const char *key, int64_t lo, int64_t hi, int64_t *out,
		   struct ks_error *err)
{
	const json_t *v = json_object_get(obj, key);

	if (!v)
		return ks_fail(err, "a '%s' message without '%s'", type, key);
	if (!json_is_integer(v))
		return ks_fail(err, "a '%s' message's '%s' is %s, expected an integer", type, key,
			       ks_json_type_word(v));
	if (json_integer_value(v) < lo || json_integer_value(v) > hi)
		return ks_fail(err, "a '%s' message's '%s' is %lld, expected %lld to %lld", type, key,
			       (long long)json_integer_value(v), (long long)lo, (long long)hi);
	*out = json_integer_value(v);
	return 0;
}

/* obj's field key as a string of at most max bytes, copied into *out. */
static int get_str(const json_t *obj, const char *type, const char *key, size_t max, char **out,
		   struct ks_error *err)
{
	const json_t *v = json_object_get(obj, key);

	if (!v)
		return ks_fail(err, "a '%s' message without '%s'", type, key);
	if (!json_is_string(v))
		return ks_fail(err, "a '%s' message's '%s' is %s, expected a string", type, key,
			       ks_json_type_word(v));
	if (json_string_length(v) > max)
		return ks_fail(err, "a '%s' message's '%s' has %zu bytes, at most %zu", type, key,
			       json_string_length(v), max);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return ks_fail(err, "a '%s' message's '%s' holds a NUL byte", type, key);
	*out = ks_strdup(json_string_value(v));
	return 0;
}

static int get_bool(const json_t *obj, const char *type, const char *key, int *out, struct ks_error *err)
{
	const json_t *v = json_object_get(obj, key);

	if (!json_is_boolean(v))
		return ks_fail(err, "a '%s' message's '%s' is %s, expected true or false", type, key,
			       v ? ks_json_type_word(v) : "missing");
	*out = json_is_true(v);
	return 0;
}

/* An evidence message's "kind": "profile" or "sanitize". */
static int get_kind(const json_t *obj, struct ks_cluster_msg *msg, struct ks_error *err)
{
	const char *kind = json_string_value(json_object_get(obj, "kind"));

	if (kind && !strcmp(kind, "profile"))
		msg->kind = KS_CLUSTER_PROFILE;
	else if (kind && !strcmp(kind, "sanitize"))
		msg->kind = KS_CLUSTER_SANITIZE;
	else
		return ks_fail(err,
			       "an 'evidence' message's 'kind' is %s, expected \"profile\" or \"sanitize\"",
			       kind ? "another word" : "missing or not a string");
	return 0;
}

static int get_job(const json_t *obj, const char *type, struct ks_cluster_msg *msg, struct ks_error *err)
{
	int64_t job;

	if (get_int(obj, type, "job", 1, INT64_MAX, &job, err) < 0)
		return -1;
	msg->job = (uint64_t)job;
	return 0;
}

static int get_result(const json_t *obj, const char *type, struct ks_cluster_msg *msg, struct ks_error *err)
{
	const json_t *v = json_object_get(obj, "result");

	if (!json_is_object(v))
		return ks_fail(err, "a '%s' message's 'result' is %s, expected an object", type,
			       v ? ks_json_type_word(v) : "missing");
	if (ks_result_from_json(v, &msg->result, err) < 0) {
		ks_error_prefix(err, "a '%s' message's result", type);
		return -1;
	}
	return 0;
}

static int decode_fields(const json_t *obj, const char *type, struct ks_cluster_msg *msg,
			 struct ks_error *err)
{
	const json_t *params;
	int64_t v;

	switch (msg->type) {
	case KS_CLUSTER_HELLO:
		if (get_int(obj, type, "gpus", 0, 1024, &v, err) < 0)
			return -1;
		msg->gpus = (int)v;
		if (get_int(obj, type, "jobs", 1, 4096, &v, err) < 0)
			return -1;
		msg->jobs = (int)v;
		if (get_int(obj, type, "evaluator", 0, 1 << 20, &v, err) < 0)
			return -1;
		msg->evaluator = (int)v;
		return get_str(obj, type, "model", 256, &msg->model, err);
	case KS_CLUSTER_JOB:
	case KS_CLUSTER_EVIDENCE:
		if (get_job(obj, type, msg, err) < 0 ||
		    (msg->type == KS_CLUSTER_EVIDENCE && get_kind(obj, msg, err) < 0) ||
		    get_str(obj, type, "family", 4096, &msg->family, err) < 0 ||
		    get_str(obj, type, "path", 4096, &msg->path, err) < 0 ||
		    get_str(obj, type, "source", KS_CANDIDATE_MAX_BYTES, &msg->source, err) < 0 ||
		    get_int(obj, type, "deadline_ms", 1, INT32_MAX, &msg->deadline_ms, err) < 0 ||
		    (msg->type == KS_CLUSTER_JOB && get_bool(obj, type, "evaluate", &msg->evaluate, err) < 0))
			return -1;
		params = json_object_get(obj, "params");
		if (!json_is_array(params))
			return ks_fail(err, "a '%s' message's 'params' is %s, expected a list", type,
				       params ? ks_json_type_word(params) : "missing");
		if (json_array_size(params) > KS_CANDIDATE_MAX_PARAMS)
			return ks_fail(err, "a '%s' message has %zu params, at most %d", type,
				       json_array_size(params), KS_CANDIDATE_MAX_PARAMS);
		for (size_t i = 0; i < json_array_size(params); i++) {
			const json_t *p = json_array_get(params, i);

			if (!json_is_integer(p))
				return ks_fail(err, "a '%s' message's param %zu is %s, expected an integer",
					       type, i, ks_json_type_word(p));
			msg->params[i] = json_integer_value(p);
		}
		msg->n_params = json_array_size(params);
		return 0;
	case KS_CLUSTER_BUILT:
		if (get_job(obj, type, msg, err) < 0 || get_bool(obj, type, "held", &msg->held, err) < 0)
			return -1;
		return get_result(obj, type, msg, err);
	case KS_CLUSTER_RESULT:
		if (get_job(obj, type, msg, err) < 0)
			return -1;
		return get_result(obj, type, msg, err);
	case KS_CLUSTER_EVAL:
		if (get_job(obj, type, msg, err) < 0)
			return -1;
		return get_int(obj, type, "deadline_ms", 1, INT32_MAX, &msg->deadline_ms, err);
	case KS_CLUSTER_DROP:
		return get_job(obj, type, msg, err);
	case KS_CLUSTER_FAILED:
		if (get_job(obj, type, msg, err) < 0)
			return -1;
		return get_str(obj, type, "error", 1 << 20, &msg->error, err);
	case KS_CLUSTER_OUTCOME: {
		json_t *outcome = json_object_get(obj, "outcome");

		if (get_job(obj, type, msg, err) < 0)
			return -1;
		if (!json_is_object(outcome))
			return ks_fail(err, "an 'outcome' message's 'outcome' is %s, expected an object",
				       outcome ? ks_json_type_word(outcome) : "missing");
		msg->outcome = json_incref(outcome);
		return 0;
	}
	default:
		return 0;
	}
}

int ks_cluster_msg_decode(const char *buf, size_t len, struct ks_cluster_msg *msg, struct ks_error *err)
{
	json_t *obj = NULL;
	json_error_t jerr;
	const json_t *type;
	int ret = -1;

	ks_cluster_msg_init(msg, KS_CLUSTER_TYPE_COUNT);
	if (len > KS_CLUSTER_MAX_MESSAGE) {
		ks_fail(err, "a message of %zu bytes, at most %u", len, KS_CLUSTER_MAX_MESSAGE);
		goto cleanup;
	}
	if (len < MAGIC_LEN || memcmp(buf, MAGIC, MAGIC_LEN)) {
		ks_fail(err, "not a ksearch message: %zu bytes that do not start with \"" MAGIC "\"", len);
		goto cleanup;
	}
	obj = json_loadb(buf + MAGIC_LEN, len - MAGIC_LEN, JSON_REJECT_DUPLICATES, &jerr);
	if (!obj) {
		ks_fail(err, "a message's JSON does not parse at byte %d: %s", jerr.position, jerr.text);
		goto cleanup;
	}
	if (!json_is_object(obj)) {
		ks_fail(err, "a message is %s, expected an object", ks_json_type_word(obj));
		goto cleanup;
	}
	type = json_object_get(obj, "type");
	if (!json_is_string(type)) {
		ks_fail(err, "a message's 'type' is %s, expected a string",
			type ? ks_json_type_word(type) : "missing");
		goto cleanup;
	}
	for (int t = 0; t < KS_CLUSTER_TYPE_COUNT; t++)
		if (!strcmp(json_string_value(type), type_names[t]))
			msg->type = (enum ks_cluster_type)t;
	if (msg->type == KS_CLUSTER_TYPE_COUNT) {
		ks_fail(err, "a message of unknown type '%.64s'", json_string_value(type));
		goto cleanup;
	}
	ret = decode_fields(obj, json_string_value(type), msg, err);
cleanup:
	json_decref(obj);
	return ret;
}
