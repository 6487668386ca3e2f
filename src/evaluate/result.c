/*
 * result.c - the typed result of a candidate and its one JSON form.
 */
#include "ksearch/evaluate/result.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/json.h"
#include "ksearch/base/sha256.h"
#include "ksearch/base/util.h"
#include "ksearch/compile/arch.h"
#include "ksearch/compile/ptx.h"

/* The evidence of a result that has none: not allocated, so that an empty result owns nothing. */
static char no_evidence[1];

static void free_evidence(struct ks_result *res)
{
	if (res->evidence != no_evidence)
		free(res->evidence);
	res->evidence = no_evidence;
}

void ks_result_init(struct ks_result *res)
{
	memset(res, 0, sizeof(*res));
	res->verdict = KS_VERDICT_CRASH; /* until someone says otherwise: never ok by omission */
	res->evidence = no_evidence;
	res->where.gpu = res->where.rank = -1;
}

static void release_measured(struct ks_result *res)
{
	for (size_t i = 0; i < res->n_workloads; i++)
		free(res->workloads[i].id);
	free(res->workloads);
	for (size_t i = 0; i < res->n_launches; i++)
		free(res->launches[i].kernel);
	free(res->launches);
	free(res->printf_head);
	res->workloads = NULL;
	res->launches = NULL;
	res->printf_head = NULL;
	res->n_workloads = res->alloc_workloads = res->n_launches = res->alloc_launches = 0;
	res->printf_bytes = 0;
}

void ks_result_release(struct ks_result *res)
{
	release_measured(res);
	for (size_t i = 0; i < res->n_kernels; i++)
		free(res->kernels[i].kernel);
	free(res->kernels);
	free_evidence(res);
	ks_result_init(res);
}

static void set_evidence_v(struct ks_result *res, const char *fmt, va_list ap)
{
	char *evidence = ks_vasprintf(fmt, ap); /* before the old one goes: fmt may name it */

	free_evidence(res);
	res->evidence = evidence;
}

void ks_result_set_evidence(struct ks_result *res, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_evidence_v(res, fmt, ap);
	va_end(ap);
}

void ks_result_fail(struct ks_result *res, enum ks_verdict verdict, const char *fmt, ...)
{
	va_list ap;

	res->verdict = verdict;
	res->fitness = 0;
	va_start(ap, fmt);
	set_evidence_v(res, fmt, ap);
	va_end(ap);
}

void ks_result_set_build(struct ks_result *res, const struct ks_build *build)
{
	for (size_t i = 0; i < res->n_kernels; i++)
		free(res->kernels[i].kernel);
	free(res->kernels);
	res->verdict = KS_VERDICT_OK;
	free_evidence(res);
	memcpy(res->descriptors, build->descriptors, sizeof(res->descriptors));
	res->n_kernels = build->n_launches;
	res->kernels = ks_calloc(build->n_launches ? build->n_launches : 1, sizeof(*res->kernels));
	for (size_t i = 0; i < build->n_launches; i++) {
		const struct ks_launch_report *r = &build->launches[i];
		struct ks_result_kernel *k = &res->kernels[i];

		k->kernel = ks_strdup(r->kernel ? r->kernel : r->res.name);
		k->registers = r->res.registers;
		k->static_smem = r->res.static_smem;
		k->dynamic_smem = r->dynamic_smem;
		k->stack_bytes = r->res.stack_bytes;
		k->spill_stores = r->res.spill_stores;
		k->spill_loads = r->res.spill_loads;
		k->threads = r->threads;
		k->occupancy = r->occupancy.fraction;
		k->blocks_per_sm = r->occupancy.blocks_per_sm;
		snprintf(k->occupancy_limit, sizeof(k->occupancy_limit), "%s",
			 ks_occupancy_limit_name(r->occupancy.limit));
		snprintf(k->tensor_cores, sizeof(k->tensor_cores), "%s",
			 ks_tensor_cores_name(r->desc.tensor_cores));
		snprintf(k->async_copy, sizeof(k->async_copy), "%s", ks_async_copy_name(r->desc.async_copy));
		k->widest_load_bytes = r->desc.widest_load_bytes;
	}
	ks_hex(build->binary, sizeof(build->binary), res->binary);
	res->has |= KS_RESULT_BUILT;
}

struct ks_result_workload *ks_result_add_workload(struct ks_result *res, const char *id)
{
	struct ks_result_workload *w;

	KS_ALLOC_GROW(res->workloads, res->n_workloads + 1, res->alloc_workloads);
	w = &res->workloads[res->n_workloads++];
	memset(w, 0, sizeof(*w));
	w->id = ks_strdup(id);
	return w;
}

struct ks_result_launch *ks_result_add_launch(struct ks_result *res, const char *kernel)
{
	struct ks_result_launch *l;

	KS_ALLOC_GROW(res->launches, res->n_launches + 1, res->alloc_launches);
	l = &res->launches[res->n_launches++];
	memset(l, 0, sizeof(*l));
	l->kernel = ks_strdup(kernel);
	return l;
}

void ks_result_add_evaluation(struct ks_result *res, struct ks_result *eval)
{
	release_measured(res);
	res->verdict = eval->verdict;
	free_evidence(res);
	res->evidence = eval->evidence;
	eval->evidence = no_evidence;
	res->fitness = eval->fitness;
	res->sol_fraction = eval->sol_fraction;
	res->workloads = eval->workloads;
	res->n_workloads = eval->n_workloads;
	res->alloc_workloads = eval->alloc_workloads;
	res->launches = eval->launches;
	res->n_launches = eval->n_launches;
	res->alloc_launches = eval->alloc_launches;
	res->overhead = eval->overhead;
	res->printf_bytes = eval->printf_bytes;
	res->printf_head = eval->printf_head;
	eval->workloads = NULL;
	eval->launches = NULL;
	eval->printf_head = NULL;
	eval->n_workloads = eval->alloc_workloads = eval->n_launches = eval->alloc_launches = 0;
	eval->printf_bytes = 0;
	res->timing.verify_s = eval->timing.verify_s;
	res->timing.time_s = eval->timing.time_s;
	res->timing.wall_s = eval->timing.wall_s;
	res->has = (res->has & KS_RESULT_BUILT) | (eval->has & (KS_RESULT_EVALUATED | KS_RESULT_OVERHEAD)) |
		   KS_RESULT_EVALUATED;

	/* what a GPU measures replaces what the build estimated */
	if (res->has & KS_RESULT_BUILT) {
		int first = 1;

		for (size_t i = 0; i < res->n_launches; i++) {
			double occ = res->launches[i].occupancy;

			if (occ > 0 && (first || occ < res->descriptors[KS_DESC_OCCUPANCY])) {
				res->descriptors[KS_DESC_OCCUPANCY] = occ;
				first = 0;
			}
		}
		/* the measured descriptors' stand-ins until a profile replaces them (op.h) */
		res->descriptors[KS_DESC_ACHIEVED_OCCUPANCY] = res->descriptors[KS_DESC_OCCUPANCY];
		res->descriptors[KS_DESC_DRAM_FRACTION] = res->sol_fraction > 1 ? 1 : res->sol_fraction;
	}
}

/* ---- the one serialiser ---- */

static json_t *workload_json(const struct ks_result_workload *w)
{
	json_t *obj =
		json_pack("{s:s, s:f, s:f, s:f, s:f, s:I, s:I, s:f, s:f, s:f, s:f}", "id", w->id, "median_us",
			  w->median_us, "p10_us", w->p10_us, "p90_us", w->p90_us, "min_us", w->min_us, "reps",
			  (json_int_t)w->reps, "runs", (json_int_t)w->runs, "ref_median_us", w->ref_median_us,
			  "speedup", w->speedup, "floor_us", w->floor_us, "sol_fraction", w->sol_fraction);

	if (w->n_splits) {
		json_t *splits = json_array();

		for (size_t i = 0; i < w->n_splits; i++)
			json_array_append_new(splits, json_pack("{s:s, s:f}", "kind", w->splits[i].kind,
								"median_us", w->splits[i].median_us));
		json_object_set_new(obj, "splits", splits);
	}
	return obj;
}

static json_t *kernel_json(const struct ks_result_kernel *k)
{
	return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:s, s:s, s:s, s:I}", "kernel",
			 k->kernel, "registers", (json_int_t)k->registers, "static_smem",
			 (json_int_t)k->static_smem, "dynamic_smem", (json_int_t)k->dynamic_smem,
			 "stack_bytes", (json_int_t)k->stack_bytes, "spill_stores",
			 (json_int_t)k->spill_stores, "spill_loads", (json_int_t)k->spill_loads, "threads",
			 (json_int_t)k->threads, "occupancy", k->occupancy, "blocks_per_sm",
			 (json_int_t)k->blocks_per_sm, "occupancy_limit", k->occupancy_limit, "tensor_cores",
			 k->tensor_cores, "async_copy", k->async_copy, "widest_load_bytes",
			 (json_int_t)k->widest_load_bytes);
}

static json_t *launch_json(const struct ks_result_launch *l)
{
	return json_pack("{s:s, s:I, s:f, s:I, s:I}", "kernel", l->kernel, "blocks_per_sm",
			 (json_int_t)l->blocks_per_sm, "occupancy", l->occupancy, "threads",
			 (json_int_t)l->threads, "dynamic_smem", (json_int_t)l->dynamic_smem);
}

static void timing_into(json_t *obj, const char *name, double seconds)
{
	if (seconds != 0)
		json_object_set_new(obj, name, json_real(seconds));
}

void ks_result_to_json_into(const struct ks_result *res, json_t *obj)
{
	json_t *timing = json_object();

	if (res->arch[0])
		json_object_set_new(obj, "arch", json_string(res->arch));
	json_object_set_new(obj, "verdict", json_string(ks_verdict_name(res->verdict)));
	json_object_set_new(obj, "evidence", ks_json_text(res->evidence));
	if (res->has & KS_RESULT_EVALUATED) {
		json_t *list = json_array();

		for (size_t i = 0; i < res->n_workloads; i++)
			json_array_append_new(list, workload_json(&res->workloads[i]));
		json_object_set_new(obj, "workloads", list);
		json_object_set_new(obj, "fitness", json_real(res->fitness));
		json_object_set_new(obj, "sol_fraction", json_real(res->sol_fraction));
	}
	if (res->has & KS_RESULT_BUILT) {
		json_t *desc = json_object(), *list = json_array();

		for (int d = 0; d < KS_DESC_COUNT; d++)
			json_object_set_new(desc, ks_descriptor_name((enum ks_descriptor)d),
					    json_real(res->descriptors[d]));
		json_object_set_new(obj, "descriptors", desc);
		if (res->binary[0])
			json_object_set_new(obj, "binary", json_string(res->binary));
		for (size_t i = 0; i < res->n_kernels; i++)
			json_array_append_new(list, kernel_json(&res->kernels[i]));
		json_object_set_new(obj, "kernels", list);
	}
	if (res->has & KS_RESULT_EVALUATED) {
		json_t *list = json_array();

		for (size_t i = 0; i < res->n_launches; i++)
			json_array_append_new(list, launch_json(&res->launches[i]));
		json_object_set_new(obj, "launches", list);
	}
	if (res->has & KS_RESULT_OVERHEAD) {
		const struct ks_result_overhead *o = &res->overhead;

		json_object_set_new(
			obj, "overhead",
			json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:I, s:I}", "inputs_s",
				  o->inputs_s, "prepare_s", o->prepare_s, "checks_s", o->checks_s, "verify_s",
				  o->verify_s, "wait_s", o->wait_s, "warmup_s", o->warmup_s, "prechecks_s",
				  o->prechecks_s, "announce_s", o->announce_s, "runs", (json_int_t)o->runs,
				  "verified_runs", (json_int_t)o->verified_runs, "announcements",
				  (json_int_t)o->announcements, "allocations", (json_int_t)o->allocations));
	}
	if (res->evaluator > 0)
		json_object_set_new(obj, "evaluator", json_integer(res->evaluator));
	if (res->where.gpu >= 0) {
		json_t *where = json_pack("{s:s, s:i}", "host", res->where.host, "gpu", res->where.gpu);

		if (res->where.rank >= 0)
			json_object_set_new(where, "rank", json_integer(res->where.rank));
		/* what is known of which GPU and what host (result.h), and nothing that is not */
		if (*res->where.gpu_uuid)
			json_object_set_new(where, "gpu_uuid", json_string(res->where.gpu_uuid));
		if (*res->where.cpu_model)
			json_object_set_new(where, "cpu_model", json_string(res->where.cpu_model));
		if (res->where.host_cpus > 0)
			json_object_set_new(where, "host_cpus", json_integer(res->where.host_cpus));
		if (res->where.host_gpus > 0)
			json_object_set_new(where, "host_gpus", json_integer(res->where.host_gpus));
		json_object_set_new(obj, "where", where);
	}
	if (res->printf_bytes)
		json_object_set_new(obj, "printf",
				    json_pack("{s:I, s:s}", "bytes", (json_int_t)res->printf_bytes, "head",
					      res->printf_head ? res->printf_head : ""));
	timing_into(timing, "compile_s", res->timing.compile_s);
	timing_into(timing, "verify_s", res->timing.verify_s);
	timing_into(timing, "time_s", res->timing.time_s);
	timing_into(timing, "wall_s", res->timing.wall_s);
	timing_into(timing, "eval_s", res->timing.eval_s);
	if (json_object_size(timing))
		json_object_set_new(obj, "timing", timing);
	else
		json_decref(timing);
}

json_t *ks_result_to_json(const struct ks_result *res)
{
	json_t *obj = json_object();

	ks_result_to_json_into(res, obj);
	return obj;
}

json_t *ks_result_check_json(const char *file, const struct ks_candidate *cand, const int64_t *params,
			     const struct ks_result *res)
{
	json_t *obj = json_object();

	json_object_set_new(obj, "file", ks_json_text(file));
	if (cand && params) {
		json_t *pj = json_object();

		for (size_t i = 0; i < cand->n_params; i++)
			json_object_set_new(pj, cand->params[i].name, json_integer(params[i]));
		json_object_set_new(obj, "params", pj);
	}
	ks_result_to_json_into(res, obj);
	return obj;
}

/* ---- the one parser ---- */

/*
 * Typed field readers: absent is fine (the value stays), a value of the
 * wrong type is an error naming where.
 */
struct reader {
	const char *where; /* "workloads[2]", "" at the top */
	struct ks_error *err;
	int failed;
};

static const json_t *field(struct reader *r, const json_t *obj, const char *name, int (*is)(const json_t *),
			   const char *expected)
{
	const json_t *v = json_object_get(obj, name);

	if (!v || r->failed)
		return NULL;
	if (!is(v)) {
		ks_fail(r->err, "%s%s%s: expected %s, got %s", r->where, r->where[0] ? "." : "", name,
			expected, ks_json_type_word(v));
		r->failed = 1;
		return NULL;
	}
	return v;
}

static int is_number(const json_t *v)
{
	return json_is_number(v);
}

static int is_integer(const json_t *v)
{
	return json_is_integer(v);
}

static int is_string(const json_t *v)
{
	return json_is_string(v);
}

static int is_array(const json_t *v)
{
	return json_is_array(v);
}

static int is_object(const json_t *v)
{
	return json_is_object(v);
}

static void read_num(struct reader *r, const json_t *obj, const char *name, double *out)
{
	const json_t *v = field(r, obj, name, is_number, "a number");

	if (v)
		*out = json_number_value(v);
}

static void read_int(struct reader *r, const json_t *obj, const char *name, int64_t *out)
{
	const json_t *v = field(r, obj, name, is_integer, "an integer");

	if (v)
		*out = json_integer_value(v);
}

static const char *read_str(struct reader *r, const json_t *obj, const char *name)
{
	const json_t *v = field(r, obj, name, is_string, "a string");

	return v ? json_string_value(v) : NULL;
}

static void read_name(struct reader *r, const json_t *obj, const char *name, char *out, size_t size)
{
	const char *s = read_str(r, obj, name);

	if (s)
		snprintf(out, size, "%s", s);
}

/* A workload's "splits" (optional: records before generation 3 have none). */
static void read_splits(struct reader *r, const json_t *list, struct ks_result_workload *out)
{
	const json_t *split;
	size_t i;

	if (!list)
		return;
	if (!json_is_array(list) || json_array_size(list) > KS_RESULT_MAX_SPLITS) {
		ks_fail(r->err, "%s.splits: expected a list of at most %d splits", r->where,
			KS_RESULT_MAX_SPLITS);
		r->failed = 1;
		return;
	}
	json_array_foreach(list, i, split)
	{
		char where[96];
		struct reader sub = { where, r->err, 0 };

		if (!json_is_object(split)) {
			ks_fail(r->err, "%s.splits[%zu]: expected an object, got %s", r->where, i,
				ks_json_type_word(split));
			r->failed = 1;
			return;
		}
		snprintf(where, sizeof(where), "%s.splits[%zu]", r->where, i);
		read_name(&sub, split, "kind", out->splits[i].kind, sizeof(out->splits[i].kind));
		read_num(&sub, split, "median_us", &out->splits[i].median_us);
		r->failed |= sub.failed;
	}
	out->n_splits = json_array_size(list);
}

static void read_workloads(struct reader *r, const json_t *list, struct ks_result *res)
{
	char where[64];
	size_t i;
	const json_t *w;

	json_array_foreach(list, i, w)
	{
		struct ks_result_workload *out;
		struct reader sub = { where, r->err, 0 };

		snprintf(where, sizeof(where), "workloads[%zu]", i);
		if (!json_is_object(w)) {
			ks_fail(r->err, "%s: expected an object, got %s", where, ks_json_type_word(w));
			r->failed = 1;
			return;
		}
		out = ks_result_add_workload(res, read_str(&sub, w, "id") ?: "");
		read_num(&sub, w, "median_us", &out->median_us);
		read_num(&sub, w, "p10_us", &out->p10_us);
		read_num(&sub, w, "p90_us", &out->p90_us);
		read_num(&sub, w, "min_us", &out->min_us);
		read_int(&sub, w, "reps", &out->reps);
		read_int(&sub, w, "runs", &out->runs);
		read_num(&sub, w, "ref_median_us", &out->ref_median_us);
		read_num(&sub, w, "speedup", &out->speedup);
		read_num(&sub, w, "floor_us", &out->floor_us);
		read_num(&sub, w, "sol_fraction", &out->sol_fraction);
		read_splits(&sub, json_object_get(w, "splits"), out);
		if (sub.failed) {
			r->failed = 1;
			return;
		}
	}
}

static void read_launches(struct reader *r, const json_t *list, struct ks_result *res)
{
	char where[64];
	size_t i;
	const json_t *l;

	json_array_foreach(list, i, l)
	{
		struct ks_result_launch *out;
		struct reader sub = { where, r->err, 0 };

		snprintf(where, sizeof(where), "launches[%zu]", i);
		if (!json_is_object(l)) {
			ks_fail(r->err, "%s: expected an object, got %s", where, ks_json_type_word(l));
			r->failed = 1;
			return;
		}
		out = ks_result_add_launch(res, read_str(&sub, l, "kernel") ?: "");
		read_int(&sub, l, "blocks_per_sm", &out->blocks_per_sm);
		read_num(&sub, l, "occupancy", &out->occupancy);
		read_int(&sub, l, "threads", &out->threads);
		read_int(&sub, l, "dynamic_smem", &out->dynamic_smem);
		if (sub.failed) {
			r->failed = 1;
			return;
		}
	}
}

static void read_kernels(struct reader *r, const json_t *list, struct ks_result *res)
{
	char where[64];
	size_t i;
	const json_t *k;

	res->n_kernels = json_array_size(list);
	res->kernels = ks_calloc(res->n_kernels ? res->n_kernels : 1, sizeof(*res->kernels));
	json_array_foreach(list, i, k)
	{
		struct ks_result_kernel *out = &res->kernels[i];
		struct reader sub = { where, r->err, 0 };
		const char *name;

		snprintf(where, sizeof(where), "kernels[%zu]", i);
		if (!json_is_object(k)) {
			ks_fail(r->err, "%s: expected an object, got %s", where, ks_json_type_word(k));
			r->failed = 1;
			return;
		}
		/* records before the result was typed may name it "name" */
		name = read_str(&sub, k, "kernel");
		out->kernel = ks_strdup(name ? name : read_str(&sub, k, "name") ?: "");
		read_int(&sub, k, "registers", &out->registers);
		read_int(&sub, k, "static_smem", &out->static_smem);
		read_int(&sub, k, "dynamic_smem", &out->dynamic_smem);
		read_int(&sub, k, "stack_bytes", &out->stack_bytes);
		read_int(&sub, k, "spill_stores", &out->spill_stores);
		read_int(&sub, k, "spill_loads", &out->spill_loads);
		read_int(&sub, k, "threads", &out->threads);
		read_num(&sub, k, "occupancy", &out->occupancy);
		read_int(&sub, k, "blocks_per_sm", &out->blocks_per_sm);
		read_name(&sub, k, "occupancy_limit", out->occupancy_limit, sizeof(out->occupancy_limit));
		read_name(&sub, k, "tensor_cores", out->tensor_cores, sizeof(out->tensor_cores));
		read_name(&sub, k, "async_copy", out->async_copy, sizeof(out->async_copy));
		read_int(&sub, k, "widest_load_bytes", &out->widest_load_bytes);
		if (sub.failed) {
			r->failed = 1;
			return;
		}
	}
}

int ks_result_from_json(const json_t *obj, struct ks_result *res, struct ks_error *err)
{
	struct reader r = { "", err, 0 };
	const json_t *v, *sub;
	const char *text;

	ks_result_release(res);
	if (!json_is_object(obj))
		return ks_fail(err, "a result must be a JSON object, got %s", ks_json_type_word(obj));
	text = read_str(&r, obj, "verdict");
	if (r.failed)
		goto fail;
	if (!text || ks_verdict_parse(text, &res->verdict) < 0) {
		ks_fail(err,
			"verdict: %s%s%s (expected one of ok, compile_error, contract_error, refused, "
			"wrong, crash, timeout, implausible)",
			text ? "unknown verdict '" : "missing", text ? text : "", text ? "'" : "");
		goto fail;
	}
	if ((text = read_str(&r, obj, "evidence")))
		ks_result_set_evidence(res, "%s", text);
	read_name(&r, obj, "arch", res->arch, sizeof(res->arch));

	if ((v = field(&r, obj, "descriptors", is_object, "an object of descriptor -> number"))) {
		struct reader d = { "descriptors", err, 0 };

		for (int i = 0; i < KS_DESC_COUNT; i++)
			read_num(&d, v, ks_descriptor_name((enum ks_descriptor)i), &res->descriptors[i]);
		r.failed |= d.failed;
		res->has |= KS_RESULT_BUILT;
	}
	read_name(&r, obj, "binary", res->binary, sizeof(res->binary));
	if ((v = field(&r, obj, "kernels", is_array, "a list")))
		read_kernels(&r, v, res);

	if ((v = field(&r, obj, "workloads", is_array, "a list"))) {
		read_workloads(&r, v, res);
		res->has |= KS_RESULT_EVALUATED;
	}
	if (json_object_get(obj, "fitness") || json_object_get(obj, "sol_fraction"))
		res->has |= KS_RESULT_EVALUATED;
	read_num(&r, obj, "fitness", &res->fitness);
	read_num(&r, obj, "sol_fraction", &res->sol_fraction);
	if ((v = field(&r, obj, "launches", is_array, "a list"))) {
		read_launches(&r, v, res);
		res->has |= KS_RESULT_EVALUATED;
	}

	if ((v = field(&r, obj, "overhead", is_object, "an object"))) {
		struct reader o = { "overhead", err, 0 };

		read_num(&o, v, "inputs_s", &res->overhead.inputs_s);
		read_num(&o, v, "prepare_s", &res->overhead.prepare_s);
		read_num(&o, v, "checks_s", &res->overhead.checks_s);
		read_num(&o, v, "verify_s", &res->overhead.verify_s);
		/* absent from records made before they were measured: 0 */
		if (json_object_get(v, "wait_s"))
			read_num(&o, v, "wait_s", &res->overhead.wait_s);
		if (json_object_get(v, "warmup_s"))
			read_num(&o, v, "warmup_s", &res->overhead.warmup_s);
		if (json_object_get(v, "prechecks_s"))
			read_num(&o, v, "prechecks_s", &res->overhead.prechecks_s);
		if (json_object_get(v, "announce_s"))
			read_num(&o, v, "announce_s", &res->overhead.announce_s);
		if (json_object_get(v, "announcements"))
			read_int(&o, v, "announcements", &res->overhead.announcements);
		if (json_object_get(v, "allocations"))
			read_int(&o, v, "allocations", &res->overhead.allocations);
		read_int(&o, v, "runs", &res->overhead.runs);
		read_int(&o, v, "verified_runs", &res->overhead.verified_runs);
		r.failed |= o.failed;
		res->has |= KS_RESULT_OVERHEAD;
	}
	if ((v = field(&r, obj, "where", is_object, "an object"))) {
		struct reader w = { "where", err, 0 };
		int64_t gpu = -1, rank = -1, host_cpus = 0, host_gpus = 0;

		read_name(&w, v, "host", res->where.host, sizeof(res->where.host));
		read_int(&w, v, "gpu", &gpu);
		if (json_object_get(v, "rank")) /* only over MPI */
			read_int(&w, v, "rank", &rank);
		/* which GPU and what host: absent in records from before they were kept */
		read_name(&w, v, "gpu_uuid", res->where.gpu_uuid, sizeof(res->where.gpu_uuid));
		read_name(&w, v, "cpu_model", res->where.cpu_model, sizeof(res->where.cpu_model));
		read_int(&w, v, "host_cpus", &host_cpus);
		read_int(&w, v, "host_gpus", &host_gpus);
		if (!w.failed && (host_cpus < 0 || host_cpus > 1 << 20))
			w.failed = ks_fail(err, "where.host_cpus: %lld is not a count of CPUs",
					   (long long)host_cpus) < 0;
		else if (!w.failed && (host_gpus < 0 || host_gpus > 65536))
			w.failed = ks_fail(err, "where.host_gpus: %lld is not a count of GPUs",
					   (long long)host_gpus) < 0;
		res->where.host_cpus = w.failed ? 0 : (int)host_cpus;
		res->where.host_gpus = w.failed ? 0 : (int)host_gpus;
		if (!w.failed && !json_object_get(v, "gpu"))
			w.failed = ks_fail(err, "where.gpu: missing (the GPU's index on its host)") < 0;
		else if (!w.failed && (gpu < 0 || gpu > 65535))
			w.failed = ks_fail(err, "where.gpu: %lld is not a GPU's index", (long long)gpu) < 0;
		else if (!w.failed && json_object_get(v, "rank") && (rank < 0 || rank > INT32_MAX))
			w.failed = ks_fail(err, "where.rank: %lld is not an MPI rank", (long long)rank) < 0;
		r.failed |= w.failed;
		res->where.gpu = w.failed ? -1 : (int)gpu;
		res->where.rank = w.failed ? -1 : (int)rank;
	}
	if ((v = field(&r, obj, "printf", is_object, "an object"))) {
		struct reader p = { "printf", err, 0 };
		int64_t bytes = 0;

		read_int(&p, v, "bytes", &bytes);
		text = read_str(&p, v, "head");
		r.failed |= p.failed;
		res->printf_bytes = bytes > 0 ? (uint64_t)bytes : 0;
		res->printf_head = res->printf_bytes ? ks_strdup(text ? text : "") : NULL;
	}
	{
		int64_t evaluator = 0;

		read_int(&r, obj, "evaluator", &evaluator);
		res->evaluator = evaluator > 0 && evaluator < 1000 ? (int)evaluator : 0;
	}
	if ((sub = field(&r, obj, "timing", is_object, "an object"))) {
		struct reader t = { "timing", err, 0 };

		read_num(&t, sub, "compile_s", &res->timing.compile_s);
		read_num(&t, sub, "verify_s", &res->timing.verify_s);
		read_num(&t, sub, "time_s", &res->timing.time_s);
		read_num(&t, sub, "wall_s", &res->timing.wall_s);
		read_num(&t, sub, "eval_s", &res->timing.eval_s);
		r.failed |= t.failed;
	}
	if (r.failed)
		goto fail;
	return 0;
fail:
	ks_result_release(res);
	return -1;
}
