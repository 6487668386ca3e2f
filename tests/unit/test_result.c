/*
 * test_result.c - the typed result (result.h): its one JSON form reads
 * back as written, a worker's frame joins the build's result with the
 * driver's occupancy, `check --json` and the archive's record of the same
 * candidate describe it alike, old records still read, and no other code
 * writes a result's fields.
 */
#include "testlib.h"

#include <dirent.h>
#include <math.h>
#include <regex.h>

#include "ksearch/archive/archive.h"
#include "ksearch/archive/record.h"
#include "ksearch/base/fs.h"
#include "ksearch/base/util.h"
#include "ksearch/evaluate/backend.h"
#include "ksearch/evaluate/result.h"
#include "ksearch/search/mutator.h"
#include "ksearch/search/search.h"

static const char *root(void)
{
	const char *r = getenv("KS_SOURCE_ROOT");

	return r && *r ? r : ".";
}

static char *dumps(const json_t *j)
{
	return json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
}

static void assert_json_equal(const json_t *a, const json_t *b)
{
	if (!json_equal((json_t *)a, (json_t *)b)) {
		char *ta = dumps(a), *tb = dumps(b);

		fail_msg("JSON differs:\n%s\n%s", ta, tb);
	}
}

/* Equal JSON, reals to 14 significant digits (the archive keeps 15). */
static int json_close(const json_t *a, const json_t *b)
{
	const char *key;
	json_t *v;
	size_t i;

	if (json_is_number(a) && json_is_number(b)) {
		double x = json_number_value(a), y = json_number_value(b);

		return fabs(x - y) <= 1e-14 * fmax(1.0, fmax(fabs(x), fabs(y)));
	}
	if (json_typeof(a) != json_typeof(b))
		return 0;
	if (json_is_object(a)) {
		if (json_object_size(a) != json_object_size(b))
			return 0;
		json_object_foreach((json_t *)a, key,
				    v) if (!json_close(v, json_object_get(b, key))) return 0;
		return 1;
	}
	if (json_is_array(a)) {
		if (json_array_size(a) != json_array_size(b))
			return 0;
		json_array_foreach(a, i, v) if (!json_close(v, json_array_get(b, i))) return 0;
		return 1;
	}
	return json_equal((json_t *)a, (json_t *)b);
}

/* A result with every part, as the build and the worker make one. */
static void full_result(struct ks_result *r)
{
	struct ks_result_workload *w;
	struct ks_result_launch *l;

	ks_result_init(r);
	r->verdict = KS_VERDICT_IMPLAUSIBLE;
	ks_result_set_evidence(r, "workload %s: too fast", "b1");
	snprintf(r->arch, sizeof(r->arch), "sm_90a");
	r->evaluator = KS_EVALUATOR_GENERATION;
	r->has = KS_RESULT_BUILT | KS_RESULT_EVALUATED | KS_RESULT_OVERHEAD;
	for (int d = 0; d < KS_DESC_COUNT; d++)
		r->descriptors[d] = 1.5 * d;
	r->n_kernels = 2;
	r->kernels = ks_calloc(2, sizeof(*r->kernels));
	for (size_t i = 0; i < 2; i++) {
		struct ks_result_kernel *k = &r->kernels[i];

		k->kernel = ks_asprintf("k%zu", i);
		k->registers = 64 + (int64_t)i;
		k->static_smem = 1024;
		k->dynamic_smem = 4096;
		k->stack_bytes = 8;
		k->spill_stores = 4;
		k->spill_loads = 2;
		k->threads = 256;
		k->occupancy = 0.5;
		k->blocks_per_sm = 4;
		snprintf(k->occupancy_limit, sizeof(k->occupancy_limit), "registers");
		snprintf(k->tensor_cores, sizeof(k->tensor_cores), "mma");
		snprintf(k->async_copy, sizeof(k->async_copy), "cp.async");
		k->widest_load_bytes = 16;
	}
	r->fitness = 0;
	r->sol_fraction = 1.75;
	w = ks_result_add_workload(r, "b1");
	*w = (struct ks_result_workload){
		w->id, 12.5, 12.25, 13.0,
		12.0,  50,   100,   250.0,
		20.0,  4.0,  0.32,  { { "even", 12.25 }, { "skewed", 13.5 }, { "uniform", 12.5 } },
		3
	};
	w = ks_result_add_workload(r, "b2");
	w->median_us = 1;
	l = ks_result_add_launch(r, "k0");
	l->blocks_per_sm = 3;
	l->occupancy = 0.375;
	l->threads = 256;
	l->dynamic_smem = 4096;
	r->overhead = (struct ks_result_overhead){ .inputs_s = 0.25,
						   .prepare_s = 0.5,
						   .checks_s = 0.125,
						   .verify_s = 1.0,
						   .wait_s = 0.375,
						   .warmup_s = 0.0625,
						   .prechecks_s = 0.03125,
						   .announce_s = 0.015625,
						   .runs = 40,
						   .verified_runs = 21,
						   .announcements = 7,
						   .allocations = 9 };
	r->printf_bytes = 9000;
	r->printf_head = ks_strdup("hello\n");
	r->timing = (struct ks_result_timing){ 0.5, 0.25, 1.0, 1.5, 1.75 };
	r->where = (struct ks_result_place){ .host = "node7",
					     .gpu = 2,
					     .rank = 3,
					     .gpu_uuid = "GPU-df7a642a-adef-00a6-9ffd-a2642a57e642",
					     .cpu_model = "AMD EPYC 9654 96-Core Processor",
					     .host_cpus = 16,
					     .host_gpus = 1 };
}

static void test_json_form_reads_back_as_written(void **state)
{
	struct ks_result r, back;
	struct ks_error err;
	json_t *j, *j2;

	(void)state;
	full_result(&r);
	j = ks_result_to_json(&r);
	/* the record's field names, archive/README.md */
	assert_string_equal(json_string_value(json_object_get(j, "verdict")), "implausible");
	assert_int_equal(json_array_size(json_object_get(j, "workloads")), 2);
	assert_true(json_is_object(json_object_get(j, "descriptors")));
	assert_int_equal(json_object_size(json_object_get(j, "descriptors")), KS_DESC_COUNT);
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(json_object_get(j, "kernels"), 1), "kernel")),
			    "k1");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "printf"), "bytes")), 9000);
	assert_true(json_is_object(json_object_get(j, "overhead")));
	assert_true(json_number_value(json_object_get(json_object_get(j, "timing"), "eval_s")) == 1.75);

	ks_result_init(&back);
	if (ks_result_from_json(j, &back, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(back.verdict, KS_VERDICT_IMPLAUSIBLE);
	assert_string_equal(back.evidence, "workload b1: too fast");
	assert_string_equal(back.arch, "sm_90a");
	assert_int_equal(back.has, r.has);
	assert_memory_equal(back.descriptors, r.descriptors, sizeof(r.descriptors));
	assert_int_equal(back.n_kernels, 2);
	assert_string_equal(back.kernels[1].async_copy, "cp.async");
	assert_int_equal(back.n_workloads, 2);
	assert_true(back.workloads[0].p10_us == 12.25 && back.workloads[0].runs == 100);
	/* the length splits a workload was timed on (evaluator 3); a workload without them has none */
	assert_int_equal(back.workloads[0].n_splits, 3);
	assert_string_equal(back.workloads[0].splits[1].kind, "skewed");
	assert_true(back.workloads[0].splits[1].median_us == 13.5);
	assert_int_equal(back.workloads[1].n_splits, 0);
	assert_null(json_object_get(json_array_get(json_object_get(j, "workloads"), 1), "splits"));
	assert_true(back.launches[0].occupancy == 0.375);
	assert_true(back.overhead.verified_runs == 21 && back.overhead.runs == 40);
	assert_true(back.overhead.wait_s == 0.375 && back.overhead.warmup_s == 0.0625);
	assert_true(back.overhead.prechecks_s == 0.03125 && back.overhead.announce_s == 0.015625);
	assert_true(back.overhead.announcements == 7 && back.overhead.allocations == 9);
	assert_string_equal(back.printf_head, "hello\n");
	assert_true(back.timing.wall_s == 1.5);
	assert_int_equal(json_integer_value(json_object_get(j, "evaluator")), KS_EVALUATOR_GENERATION);
	assert_int_equal(back.evaluator, KS_EVALUATOR_GENERATION);
	/* where it was timed: host, GPU, MPI rank */
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "where"), "rank")), 3);
	assert_string_equal(back.where.host, "node7");
	assert_true(back.where.gpu == 2 && back.where.rank == 3);
	/* and which GPU, on what kind of host */
	assert_string_equal(back.where.gpu_uuid, "GPU-df7a642a-adef-00a6-9ffd-a2642a57e642");
	assert_string_equal(back.where.cpu_model, "AMD EPYC 9654 96-Core Processor");
	assert_true(back.where.host_cpus == 16 && back.where.host_gpus == 1);
	j2 = ks_result_to_json(&back);
	assert_json_equal(j, j2);
	json_decref(j2);
	/* a record from an evaluator before these were measured reads, with each 0 */
	json_object_del(json_object_get(j, "overhead"), "wait_s");
	json_object_del(json_object_get(j, "overhead"), "warmup_s");
	json_object_del(json_object_get(j, "overhead"), "prechecks_s");
	json_object_del(json_object_get(j, "overhead"), "announce_s");
	json_object_del(json_object_get(j, "overhead"), "announcements");
	json_object_del(json_object_get(j, "overhead"), "allocations");
	json_object_del(json_object_get(j, "where"), "rank"); /* timed on one host: no rank */
	/* a record from before the GPU and the host's kind were kept */
	json_object_del(json_object_get(j, "where"), "gpu_uuid");
	json_object_del(json_object_get(j, "where"), "cpu_model");
	json_object_del(json_object_get(j, "where"), "host_cpus");
	json_object_del(json_object_get(j, "where"), "host_gpus");
	ks_result_release(&back);
	ks_result_init(&back);
	if (ks_result_from_json(j, &back, &err) < 0)
		fail_msg("%s", err.msg);
	assert_true(back.where.gpu == 2 && back.where.rank == -1);
	assert_true(!*back.where.gpu_uuid && !*back.where.cpu_model);
	assert_true(back.where.host_cpus == 0 && back.where.host_gpus == 0);
	j2 = ks_result_to_json(&back);
	assert_null(json_object_get(json_object_get(j2, "where"), "rank"));
	/* nothing unknown is written */
	assert_int_equal(json_object_size(json_object_get(j2, "where")), 2);
	json_decref(j2);
	assert_true(back.overhead.wait_s == 0 && back.overhead.warmup_s == 0 && back.overhead.runs == 40);
	assert_true(back.overhead.prechecks_s == 0 && back.overhead.announce_s == 0);
	assert_int_equal(back.overhead.announcements, 0);
	assert_int_equal(back.overhead.allocations, 0);

	/* parts a result does not hold are not written, and read back absent */
	ks_result_release(&r);
	ks_result_fail(&r, KS_VERDICT_COMPILE_ERROR, "line %d: expected ';'", 3);
	json_decref(j);
	j = ks_result_to_json(&r);
	assert_int_equal(json_object_size(j), 2); /* verdict, evidence */
	if (ks_result_from_json(j, &back, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(back.has, 0);
	assert_int_equal(back.verdict, KS_VERDICT_COMPILE_ERROR);
	json_decref(j);
	ks_result_release(&r);
	ks_result_release(&back);
}

static void test_a_malformed_frame_is_refused_naming_the_field(void **state)
{
	static const struct {
		const char *json, *error;
	} cases[] = {
		{ "[]", "a result must be a JSON object" },
		{ "{\"evidence\": \"\"}", "verdict: missing" },
		{ "{\"verdict\": \"fantastic\"}", "verdict: unknown verdict 'fantastic'" },
		{ "{\"verdict\": 3}", "verdict: expected a string, got an integer" },
		{ "{\"verdict\": \"ok\", \"fitness\": \"fast\"}",
		  "fitness: expected a number, got a string" },
		{ "{\"verdict\": \"ok\", \"workloads\": [{\"id\": \"a\"}, {\"median_us\": \"x\"}]}",
		  "workloads[1].median_us: expected a number, got a string" },
		{ "{\"verdict\": \"ok\", \"workloads\": [7]}", "workloads[0]: expected an object" },
		{ "{\"verdict\": \"ok\", \"workloads\": [{\"splits\": [{\"kind\": \"even\", \"median_us\": "
		  "[]}]}]}",
		  "workloads[0].splits[0].median_us: expected a number, got a list" },
		{ "{\"verdict\": \"ok\", \"workloads\": [{\"splits\": {}}]}",
		  "workloads[0].splits: expected a list of at most 8 splits" },
		{ "{\"verdict\": \"ok\", \"descriptors\": {\"occupancy\": null}}",
		  "descriptors.occupancy: expected a number" },
		{ "{\"verdict\": \"ok\", \"launches\": [{\"threads\": 1.5}]}",
		  "launches[0].threads: expected an integer" },
		{ "{\"verdict\": \"ok\", \"timing\": []}", "timing: expected an object" },
		{ "{\"verdict\": \"ok\", \"where\": 1}", "where: expected an object, got an integer" },
		{ "{\"verdict\": \"ok\", \"where\": {\"host\": \"a\"}}", "where.gpu: missing" },
		{ "{\"verdict\": \"ok\", \"where\": {\"gpu\": -1}}", "where.gpu: -1 is not a GPU's index" },
		{ "{\"verdict\": \"ok\", \"where\": {\"gpu\": 0, \"rank\": \"x\"}}",
		  "where.rank: expected an integer, got a string" },
		{ "{\"verdict\": \"ok\", \"where\": {\"gpu\": 0, \"host\": 5}}",
		  "where.host: expected a string, got an integer" },
		{ "{\"verdict\": \"ok\", \"where\": {\"gpu\": 0, \"gpu_uuid\": 5}}",
		  "where.gpu_uuid: expected a string, got an integer" },
		{ "{\"verdict\": \"ok\", \"where\": {\"gpu\": 0, \"host_cpus\": -4}}",
		  "where.host_cpus: -4 is not a count of CPUs" },
		{ "{\"verdict\": \"ok\", \"where\": {\"gpu\": 0, \"host_gpus\": 100000}}",
		  "where.host_gpus: 100000 is not a count of GPUs" },
		{ "{\"verdict\": \"ok\", \"where\": {\"gpu\": 0, \"cpu_model\": []}}",
		  "where.cpu_model: expected a string, got a list" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *j = json_loads(cases[i].json, JSON_DECODE_ANY, NULL);
		struct ks_result r;
		struct ks_error err;

		assert_non_null(j);
		ks_result_init(&r);
		if (ks_result_from_json(j, &r, &err) == 0)
			fail_msg("%s: accepted", cases[i].json);
		assert_contains(err.msg, cases[i].error);
		/* left empty, and never ok by omission */
		assert_int_equal(r.has, 0);
		assert_int_equal(r.verdict, KS_VERDICT_CRASH);
		ks_result_release(&r);
		json_decref(j);
	}
}

/* Records of archives written before the result was typed read as results. */
static void test_old_records_read(void **state)
{
	char path[4200];
	json_t *doc, *c;
	json_error_t jerr;
	size_t i;

	(void)state;
	snprintf(path, sizeof(path), "%s/tests/fixtures/export-gqa.json", root());
	doc = json_load_file(path, 0, &jerr);
	if (!doc)
		fail_msg("%s: %s", path, jerr.text);
	json_array_foreach(json_object_get(doc, "candidates"), i, c)
	{
		struct ks_result r;
		struct ks_error err;
		enum ks_verdict v;

		ks_result_init(&r);
		if (ks_result_from_json(c, &r, &err) < 0)
			fail_msg("candidates[%zu]: %s", i, err.msg);
		assert_int_equal(ks_record_verdict(c, &v), 0);
		assert_int_equal(r.verdict, v);
		assert_true(r.fitness == ks_record_num(c, "fitness"));
		/* text for a reader: an empty field is no text */
		assert_string_equal(ks_record_text(c, "verdict", "?"), ks_record_str(c, "verdict", "?"));
		/* before the field: an unknown evaluator (generation 1, result.h) */

		assert_int_equal(r.evaluator, 0);

		/* kernels named "name" then */
		if (r.n_kernels)
			assert_string_equal(
				r.kernels[0].kernel,
				json_string_value(json_object_get(
					json_array_get(json_object_get(c, "kernels"), 0), "name")));
		ks_result_release(&r);
	}
	json_decref(doc);
	doc = json_pack("{s:s, s:s}", "family", "", "gpu", "H200");
	assert_string_equal(ks_record_text(doc, "family", "unknown"), "unknown");
	assert_string_equal(ks_record_str(doc, "family", "unknown"), "");
	assert_string_equal(ks_record_text(doc, "gpu", "?"), "H200");
	assert_string_equal(ks_record_text(doc, "arch", "sm_90a"), "sm_90a");
	json_decref(doc);
}

/* A build of two launches, as build.c reports one. */

static void fake_build(struct ks_build *b, struct ks_launch_report *lr)
{
	memset(b, 0, sizeof(*b));
	memset(lr, 0, 2 * sizeof(*lr));
	lr[0].kernel = "split";
	lr[0].res.registers = 96;
	lr[0].occupancy.fraction = 0.5;
	lr[0].occupancy.limit = KS_LIMIT_REGISTERS;
	lr[1].kernel = "merge";
	lr[1].res.registers = 20;
	lr[1].occupancy.fraction = 1.0;
	b->verdict = KS_VERDICT_OK;
	b->launches = lr;
	b->n_launches = 2;
	for (int d = 0; d < KS_DESC_COUNT; d++)
		b->descriptors[d] = d + 1;
	b->descriptors[KS_DESC_OCCUPANCY] = 0.5;
}

/* What a worker sends for a candidate of those two launches: the frame of result.h. */
static json_t *worker_frame(double occ0, double occ1)
{
	struct ks_result r;
	struct ks_result_launch *l;
	json_t *frame;

	ks_result_init(&r);
	r.verdict = KS_VERDICT_OK;
	r.has = KS_RESULT_EVALUATED | KS_RESULT_OVERHEAD;
	r.fitness = 1.25;
	r.sol_fraction = 0.25;
	ks_result_add_workload(&r, "b1")->median_us = 8;
	l = ks_result_add_launch(&r, "split");
	l->occupancy = occ0;
	l = ks_result_add_launch(&r, "merge");
	l->occupancy = occ1;
	r.timing.verify_s = 0.5;
	r.timing.time_s = 1.0;
	frame = ks_result_to_json(&r);
	json_object_set_new(frame, "type", json_string("result"));
	ks_result_release(&r);
	return frame;
}

static void test_evaluation_joins_the_build_with_the_drivers_occupancy(void **state)
{
	struct ks_build b;
	struct ks_launch_report lr[2];
	struct ks_result res, eval;
	struct ks_error err;
	json_t *frame;

	(void)state;
	fake_build(&b, lr);
	ks_result_init(&res);
	ks_result_set_build(&res, &b);
	res.timing.compile_s = 0.125;
	assert_int_equal(res.verdict, KS_VERDICT_OK);
	assert_int_equal(res.has, KS_RESULT_BUILT);
	assert_int_equal(res.n_kernels, 2);
	assert_string_equal(res.kernels[0].occupancy_limit, "registers");

	/* the driver sees less than the rules: its lowest launch wins */
	frame = worker_frame(0.375, 0.25);
	ks_result_init(&eval);
	if (ks_result_from_json(frame, &eval, &err) < 0)
		fail_msg("%s", err.msg);
	ks_result_add_evaluation(&res, &eval);
	ks_result_release(&eval);
	assert_int_equal(res.has, KS_RESULT_BUILT | KS_RESULT_EVALUATED | KS_RESULT_OVERHEAD);
	assert_true(res.descriptors[KS_DESC_OCCUPANCY] == 0.25);
	assert_true(res.descriptors[KS_DESC_REGISTERS] == KS_DESC_REGISTERS + 1);
	assert_true(res.fitness == 1.25 && res.n_workloads == 1 && res.n_launches == 2);
	assert_true(res.timing.compile_s == 0.125 && res.timing.verify_s == 0.5);
	assert_int_equal(res.n_kernels, 2); /* the build's reports stay */
	json_decref(frame);

	/* a launch the driver could not size (0) keeps the build's estimate out of it */
	frame = worker_frame(0, 0.75);
	ks_result_init(&eval);
	ks_result_set_build(&res, &b);
	if (ks_result_from_json(frame, &eval, &err) < 0)
		fail_msg("%s", err.msg);
	ks_result_add_evaluation(&res, &eval);
	assert_true(res.descriptors[KS_DESC_OCCUPANCY] == 0.75);
	ks_result_release(&eval);
	ks_result_release(&res);
	json_decref(frame);
}

/*
 * `check` and the search: one candidate, built by the one build path
 * (ks_gpu_build(), in-process NVRTC) and joined to the same worker frame
 * as ks_gpu_evaluate() joins it.  `check --json` (ks_result_check_json())
 * and the record the search stores must carry the same descriptors, and
 * every other field of the result alike.
 */
struct fake_gpu {
	const struct ks_op *op;
	const json_t *frame;
};

static int join_frame(const json_t *frame, struct ks_result *res, struct ks_error *err)
{
	struct ks_result eval;

	ks_result_init(&eval);
	if (ks_result_from_json(frame, &eval, err) < 0)
		return -1;
	ks_result_add_evaluation(res, &eval);
	ks_result_release(&eval);
	return 0;
}

static int fg_build(void *ctx, const struct ks_family *fam, const int64_t *params, void **built,
		    struct ks_result *res, struct ks_error *err)
{
	struct fake_gpu *g = ctx;
	struct ks_build *b = ks_calloc(1, sizeof(*b));

	*built = NULL;
	if (ks_gpu_build(g->op, &fam->cand, params, "sm_90a", 0, b, res, err) < 0) {
		free(b);
		return -1;
	}
	if (b->verdict != KS_VERDICT_OK) {
		ks_build_release(b);
		free(b);
		return 0;
	}
	*built = b;
	return 0;
}

static int fg_evaluate(void *ctx, int lane, const struct ks_family *fam, const int64_t *params, void *built,
		       struct ks_result *res, struct ks_error *err)
{
	struct fake_gpu *g = ctx;

	(void)lane;
	(void)fam;
	(void)params;
	ks_build_release(built);
	free(built);
	return join_frame(g->frame, res, err);
}

static void fg_discard(void *ctx, void *built)
{
	(void)ctx;
	ks_build_release(built);
	free(built);
}

static int first_record(const json_t *record, void *ctx)
{
	*(json_t **)ctx = json_incref((json_t *)record);
	return 1;
}

static void test_check_and_the_archive_describe_a_candidate_alike(void **state)
{
	struct ks_op op;
	struct ks_family *fams;
	size_t n_fams;
	struct ks_error err;
	struct ks_build build;
	struct ks_result res;
	int64_t params[KS_MAX_PARAMS];
	json_t *frame, *check, *record = NULL;
	char opdir[4200], *dir = test_tmpdir();
	const char *key;
	json_t *v;

	(void)state;
	snprintf(opdir, sizeof(opdir), "%s/operators/rmsnorm", root());
	if (ks_op_load(opdir, &op, &err) < 0 || ks_families_load(&op, &fams, &n_fams, &err) < 0)
		fail_msg("%s", err.msg);
	frame = worker_frame(0.375, 0.375);

	/* check: the first seed at its first params */
	ks_params_first(&fams[0].cand, params);
	ks_result_init(&res);
	if (ks_gpu_build(&op, &fams[0].cand, params, "sm_90a", 0, &build, &res, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(build.verdict, KS_VERDICT_OK);
	assert_int_equal(join_frame(frame, &res, &err), 0);
	check = ks_result_check_json(fams[0].cand.path, &fams[0].cand, params, &res);
	ks_build_release(&build);
	ks_result_release(&res);

	/* the search: the same candidate is its first proposal */
	{
		struct fake_gpu g = { &op, frame };
		struct ks_backend backend = { .ctx = &g,
					      .lanes = 1,
					      .build = fg_build,
					      .evaluate = fg_evaluate,
					      .discard = fg_discard };
		const struct ks_mutator *mutators[] = { &ks_mutator_param };
		struct ks_search_config cfg = {
			.seed = 1, .budget = 1, .jobs = 1, .explore = 1, .mutators = mutators, .n_mutators = 1
		};
		struct ks_archive_options opts = { .flags = KS_ARCHIVE_CREATE | KS_ARCHIVE_NOSYNC,
						   .grid = op.grid,
						   .n_grid = op.n_grid };
		struct ks_archive_query q = { .verdict = -1 };
		struct ks_search_summary sum;
		struct ks_archive *ar;

		if (ks_archive_open(&ar, dir, op.key, "Test GPU", &opts, &err) < 0 ||
		    ks_search_run(ar, &op, fams, n_fams, &backend, &cfg, &sum, &err) < 0 ||
		    ks_archive_foreach(ar, &q, first_record, &record, &err) < 0)
			fail_msg("%s", err.msg);
		assert_int_equal(sum.evaluated, 1);
		ks_archive_close(ar);
	}
	assert_non_null(record);
	assert_string_equal(ks_record_str(record, "path", ""), fams[0].cand.path);
	assert_json_equal(json_object_get(record, "params"), json_object_get(check, "params"));

	/* the descriptors: the build's, with the driver's occupancy, in both */
	if (!json_close(json_object_get(check, "descriptors"), json_object_get(record, "descriptors"))) {
		char *a = dumps(json_object_get(check, "descriptors")),
		     *b = dumps(json_object_get(record, "descriptors"));

		fail_msg("check --json and the archive describe one candidate differently:\n"
			 "check:   %s\narchive: %s",
			 a, b);
	}
	assert_true(json_number_value(json_object_get(json_object_get(record, "descriptors"), "occupancy")) ==
		    0.375);
	/* and every other field of the result (the pipeline's timings are the search's own) */
	json_object_foreach(check, key, v)
	{
		if (!strcmp(key, "file") || !strcmp(key, "timing"))
			continue;
		if (!json_close(v, json_object_get(record, key)))
			fail_msg("%s differs between check --json and the archive", key);
	}

	json_decref(record);
	json_decref(check);
	json_decref(frame);
	ks_families_free(fams, n_fams);
	ks_op_release(&op);
	test_rmtree(dir);
}

/*
 * The typed record (record.h): every field of a stored record reads into
 * struct ks_record, the result's through the one parser, and the search's
 * side writes back what it read.
 */
static void test_a_record_reads_every_field(void **state)
{
	struct ks_record rec, back;
	struct ks_error err;
	json_t *obj, *again;
	uint64_t parents[2] = { 17, 23 };

	(void)state;
	ks_record_init(&rec);
	full_result(&rec.result);
	rec.family = ks_strdup("split_kv");
	rec.path = ks_strdup("operators/gqa/seeds/split_kv.cu");
	rec.mutation = ks_strdup("llm");
	rec.params = json_pack("{s:i, s:i}", "SPLITS", 8, "WARPS", 4);
	rec.parents = ks_malloc(sizeof(parents));
	memcpy(rec.parents, parents, sizeof(parents));
	rec.n_parents = 2;
	rec.seq = 41;
	rec.prompt_id = 3;
	rec.has = KS_RECORD_SEQ | KS_RECORD_PROMPT_ID;
	rec.llm = json_pack("{s:s, s:i}", "model", "m", "prompt_tokens", 5210);
	rec.duplicate_of = 7;
	obj = ks_record_to_json(&rec);
	/* what the archive adds, and what profiling and the sanitizer add later */
	json_object_set_new(obj, "id", json_integer(42));
	json_object_set_new(obj, "op", json_string("gqa"));
	json_object_set_new(obj, "gpu", json_string("NVIDIA H200"));
	json_object_set_new(obj, "source_hash", json_string("abc123"));
	json_object_set_new(obj, "created", json_string("2026-11-22T01:50:00Z"));
	/* stored as given: records from elsewhere may say what measured them */
	json_object_set_new(obj, "driver", json_string("580.65.06"));
	json_object_set_new(obj, "toolkit", json_string("13.0"));
	json_object_set_new(obj, "nvrtc", json_string("13.0.88"));
	json_object_set_new(obj, "profile", json_pack("{s:s, s:f}", "workload", "b1", "dram_fraction", 0.62));
	json_object_set_new(obj, "sanitizer", json_pack("{s:s, s:i}", "status", "failed", "errors", 2));

	ks_record_init(&back);
	if (ks_record_parse(obj, &back, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(back.id, 42);
	assert_string_equal(back.op, "gqa");
	assert_string_equal(back.gpu, "NVIDIA H200");
	assert_string_equal(back.source_hash, "abc123");
	assert_string_equal(back.created, "2026-11-22T01:50:00Z");
	assert_string_equal(back.driver, "580.65.06");
	assert_string_equal(back.toolkit, "13.0");
	assert_string_equal(back.nvrtc, "13.0.88");
	assert_string_equal(back.family, "split_kv");
	assert_string_equal(back.path, "operators/gqa/seeds/split_kv.cu");
	assert_string_equal(back.mutation, "llm");
	assert_json_equal(back.params, rec.params);
	assert_int_equal(back.n_parents, 2);
	assert_int_equal(back.parents[0], 17);
	assert_int_equal(back.parents[1], 23);
	assert_int_equal(back.seq, 41);
	assert_int_equal(back.prompt_id, 3);
	assert_int_equal(back.duplicate_of, 7);
	assert_json_equal(back.llm, rec.llm);
	assert_string_equal(json_string_value(json_object_get(back.profile, "workload")), "b1");
	assert_int_equal(json_integer_value(json_object_get(back.sanitizer, "errors")), 2);
	assert_true(back.sanitizer_failed);
	assert_int_equal(back.has,
			 KS_RECORD_SEQ | KS_RECORD_PROMPT_ID | KS_RECORD_FITNESS | KS_RECORD_SOL_FRACTION);
	assert_int_equal(back.has_descriptor, (1u << KS_DESC_COUNT) - 1);
	/* the result: every field, as the result's own round trip checks them */
	assert_int_equal(back.result.verdict, KS_VERDICT_IMPLAUSIBLE);
	assert_string_equal(back.result.evidence, "workload b1: too fast");
	assert_string_equal(back.result.arch, "sm_90a");
	assert_int_equal(back.result.has, rec.result.has);
	for (int d = 0; d < KS_DESC_COUNT; d++)
		assert_true(back.result.descriptors[d] == 1.5 * d);
	assert_int_equal(back.result.n_kernels, 2);
	assert_string_equal(back.result.kernels[1].kernel, "k1");
	assert_int_equal(back.result.kernels[1].registers, 65);
	assert_string_equal(back.result.kernels[0].async_copy, "cp.async");
	assert_true(back.result.sol_fraction == 1.75);
	assert_int_equal(back.result.n_workloads, 2);
	assert_string_equal(back.result.workloads[0].id, "b1");
	assert_true(back.result.workloads[0].floor_us == 4.0);
	assert_int_equal(back.result.workloads[0].n_splits, 3);
	assert_string_equal(back.result.workloads[0].splits[1].kind, "skewed");
	assert_int_equal(back.result.n_launches, 1);
	assert_int_equal(back.result.launches[0].blocks_per_sm, 3);
	assert_int_equal(back.result.overhead.verified_runs, 21);
	assert_int_equal(back.result.printf_bytes, 9000);
	assert_true(back.result.timing.eval_s == 1.75);
	assert_int_equal(back.result.evaluator, KS_EVALUATOR_GENERATION);
	/* and the search's side writes back what it read */
	again = ks_record_to_json(&back);
	{
		const char *key;
		json_t *v;

		json_object_foreach(again, key, v) if (!json_close(v, json_object_get(obj, key)))
			fail_msg("%s does not read back as written", key);
	}
	/* parsing again replaces; release leaves an empty record that owns nothing */
	if (ks_record_parse(obj, &back, &err) < 0)
		fail_msg("%s", err.msg);
	ks_record_release(&back);
	assert_int_equal(back.id, 0);
	assert_string_equal(back.family, "");
	assert_string_equal(back.driver, "");
	assert_null(back.params);
	ks_record_release(&back);
	json_decref(again);
	json_decref(obj);
	ks_record_release(&rec);
}

/* Absent fields read as none; a null one as absent (the archive stores the search's fields as given). */
static void test_a_sparse_record_reads(void **state)
{
	struct ks_record rec;
	struct ks_error err;
	json_t *obj = json_loads("{\"id\": 3, \"verdict\": \"ok\", \"fitness\": 1.5, \"llm\": null, "
				 "\"descriptors\": {\"occupancy\": 0.5}, \"toolkit\": null}",
				 0, NULL);

	(void)state;
	ks_record_init(&rec);
	if (ks_record_parse(obj, &rec, &err) < 0)
		fail_msg("%s", err.msg);
	assert_true(ks_record_ok(&rec));
	assert_true(rec.result.fitness == 1.5);
	assert_int_equal(rec.has, KS_RECORD_FITNESS);
	assert_int_equal(rec.has_descriptor, 1u << KS_DESC_OCCUPANCY);
	assert_null(rec.llm);
	assert_null(rec.params);
	assert_int_equal(rec.n_parents, 0);
	assert_string_equal(rec.family, "");
	assert_string_equal(rec.gpu, "");
	assert_string_equal(rec.driver, "");
	assert_string_equal(rec.toolkit, "");
	assert_string_equal(rec.nvrtc, "");
	assert_string_equal(rec.result.evidence, "");
	assert_false(rec.sanitizer_failed);
	ks_record_release(&rec);
	json_decref(obj);
}

/* A malformed record fails with the record's id and the field, and leaves the record empty. */
static void test_a_malformed_record_is_refused_naming_the_field_and_id(void **state)
{
	static const struct {
		const char *json, *msg;
	} cases[] = {
		{ "[1]", "a record must be a JSON object, got a list" },
		{ "{\"id\": 5}", "record 5: verdict: missing" },
		{ "{\"id\": 5, \"verdict\": \"fast\"}", "record 5: verdict: unknown verdict 'fast'" },
		{ "{\"id\": 5, \"verdict\": 3}", "record 5: verdict: expected a string, got " },
		{ "{\"verdict\": 1}", "a record: verdict: expected a string, got " },
		{ "{\"id\": \"5\", \"verdict\": \"ok\"}",
		  "a record: id: expected an integer >= 0, got a string" },
		{ "{\"id\": 6, \"verdict\": \"ok\", \"family\": 1}",
		  "record 6: family: expected a string, got " },
		{ "{\"id\": 6, \"verdict\": \"ok\", \"params\": []}",
		  "record 6: params: expected an object, got " },
		{ "{\"id\": 6, \"verdict\": \"ok\", \"parents\": {}}",
		  "record 6: parents: expected a list of ids, got " },
		{ "{\"id\": 6, \"verdict\": \"ok\", \"parents\": [1, \"2\"]}",
		  "record 6: parents[1]: expected an id (an integer >= 1), got " },
		{ "{\"id\": 6, \"verdict\": \"ok\", \"parents\": [0]}",
		  "record 6: parents[0]: expected an id" },
		{ "{\"id\": 6, \"verdict\": \"ok\", \"seq\": -1}",
		  "record 6: seq: expected an integer >= 0" },
		{ "{\"id\": 6, \"verdict\": \"ok\", \"prompt_id\": 1.5}",
		  "record 6: prompt_id: expected an integer" },
		{ "{\"id\": 6, \"verdict\": \"ok\", \"duplicate_of\": \"x\"}",
		  "record 6: duplicate_of: expected" },
		{ "{\"id\": 6, \"verdict\": \"ok\", \"llm\": 1}", "record 6: llm: expected an object" },
		{ "{\"id\": 6, \"verdict\": \"ok\", \"profile\": \"x\"}",
		  "record 6: profile: expected an object" },
		{ "{\"id\": 6, \"verdict\": \"ok\", \"sanitizer\": []}",
		  "record 6: sanitizer: expected an object" },
		{ "{\"id\": 6, \"verdict\": \"ok\", \"created\": 1}",
		  "record 6: created: expected a string" },
		{ "{\"id\": 6, \"verdict\": \"ok\", \"driver\": 580}",
		  "record 6: driver: expected a string, got an integer" },
		{ "{\"id\": 6, \"verdict\": \"ok\", \"toolkit\": [13]}",
		  "record 6: toolkit: expected a string, got a list" },
		{ "{\"id\": 6, \"verdict\": \"ok\", \"nvrtc\": {}}",
		  "record 6: nvrtc: expected a string, got an object" },
		{ "{\"id\": 7, \"verdict\": \"ok\", \"fitness\": \"1\"}",
		  "record 7: fitness: expected a number" },
		{ "{\"id\": 7, \"verdict\": \"ok\", \"sol_fraction\": []}",
		  "record 7: sol_fraction: expected a number" },
		{ "{\"id\": 7, \"verdict\": \"ok\", \"descriptors\": {\"occupancy\": \"x\"}}",
		  "record 7: descriptors.occupancy: expected a number" },
		{ "{\"id\": 7, \"verdict\": \"ok\", \"workloads\": [{\"id\": \"b\", \"median_us\": \"1\"}]}",
		  "record 7: workloads[0].median_us: expected a number" },
		{ "{\"id\": 7, \"verdict\": \"ok\", \"workloads\": [3]}",
		  "record 7: workloads[0]: expected an object" },
		{ "{\"id\": 7, \"verdict\": \"ok\", \"workloads\": [{\"splits\": [{\"kind\": 1}]}]}",
		  "record 7: workloads[0].splits[0].kind: expected a string" },
		{ "{\"id\": 7, \"verdict\": \"ok\", \"kernels\": [{\"registers\": 1.5}]}",
		  "record 7: kernels[0].registers: expected an integer" },
		{ "{\"id\": 7, \"verdict\": \"ok\", \"launches\": {}}",
		  "record 7: launches: expected a list" },
		{ "{\"id\": 7, \"verdict\": \"ok\", \"overhead\": {\"runs\": \"x\"}}",
		  "record 7: overhead.runs: expected an integer" },
		{ "{\"id\": 7, \"verdict\": \"ok\", \"timing\": {\"wall_s\": null}}",
		  "record 7: timing.wall_s: expected a number" },
		{ "{\"id\": 7, \"verdict\": \"ok\", \"evidence\": 1}",
		  "record 7: evidence: expected a string" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *obj = json_loads(cases[i].json, JSON_DECODE_ANY, NULL);
		struct ks_record rec;
		struct ks_error err;

		assert_non_null(obj);
		ks_record_init(&rec);
		if (ks_record_parse(obj, &rec, &err) == 0)
			fail_msg("%s: parsed", cases[i].json);
		if (strncmp(err.msg, cases[i].msg, strlen(cases[i].msg)))
			fail_msg("%s: got \"%s\", expected \"%s...\"", cases[i].json, err.msg, cases[i].msg);
		assert_int_equal(rec.id, 0);
		assert_int_equal(rec.n_parents, 0);
		assert_null(rec.params);
		assert_int_equal(rec.result.n_workloads, 0);
		ks_record_release(&rec);
		json_decref(obj);
	}
}

/*
 * The serialiser is the only producer: no other code under src/ writes a
 * result's fields into JSON.  A statement that calls json_pack() or
 * json_object_set*() with one of the keys below, outside result.c, fails
 * here unless it is a log event ("event") or listed with its reason.
 */
static const char *const result_keys[] = { "verdict",	   "evidence", "descriptors",
					   "sol_fraction", "overhead", NULL };
static const struct {
	const char *file, *key, *why;
} allowed[] = {
	{ "src/export/export.c", "verdict", "the export's lineage names each ancestor's verdict" },
	{ "src/cli/check.c", "verdict",
	  "a candidate that compiled but found no GPU has no verdict yet (null)" },
	{ "src/archive/archive.c", "descriptors",

	  "ks_archive_set_profile(): a profile's measured descriptors replace their stand-ins in the stored "
	  "record" },

};

static void scan(const char *path, const char *rel, struct ks_strbuf *found)
{
	char *text = NULL;
	size_t size;
	struct ks_error err;
	regex_t call;
	regmatch_t m;
	const char *at;

	if (ks_read_file(path, &text, &size, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(
		regcomp(&call, "(json_pack|json_object_set(_new)?)[[:space:]]*\\([^;]*;", REG_EXTENDED), 0);
	for (at = text; regexec(&call, at, 1, &m, 0) == 0; at += m.rm_eo) {
		char *stmt = ks_strndup(at + m.rm_so, (size_t)(m.rm_eo - m.rm_so));

		for (size_t k = 0; result_keys[k]; k++) {
			char quoted[64];
			const char *hit;
			int ok = strstr(stmt, "\"event\"") != NULL;

			snprintf(quoted, sizeof(quoted), "\"%s\"", result_keys[k]);
			if (!(hit = strstr(stmt, quoted)))
				continue;
			/* a key, not text that happens to contain it: followed by , or ) */
			hit += strlen(quoted);
			while (*hit == ' ' || *hit == '\t' || *hit == '\n')
				hit++;
			if (*hit != ',' && *hit != ')')
				continue;
			for (size_t a = 0; a < sizeof(allowed) / sizeof(allowed[0]); a++)
				ok |= !strcmp(allowed[a].file, rel) &&
				      !strcmp(allowed[a].key, result_keys[k]);
			if (!ok)
				ks_strbuf_addf(found, "%s:%d: writes \"%s\"\n", rel,
					       ks_line_of(text, (size_t)(at + m.rm_so - text)),
					       result_keys[k]);
		}
		free(stmt);
	}
	regfree(&call);
	free(text);
}

static void scan_dir(const char *dir, const char *rel, struct ks_strbuf *found, int *files)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	assert_non_null(d);
	while ((e = readdir(d))) {
		char *path, *sub;
		size_t len = strlen(e->d_name);

		if (e->d_name[0] == '.')
			continue;
		path = ks_path_join(dir, e->d_name);
		sub = ks_path_join(rel, e->d_name);
		if (e->d_type == DT_DIR) {
			scan_dir(path, sub, found, files);
		} else if (len > 2 && !strcmp(e->d_name + len - 2, ".c") &&
			   strcmp(sub, "src/evaluate/result.c")) {
			scan(path, sub, found);
			(*files)++;
		}
		free(path);
		free(sub);
	}
	closedir(d);
}

static void test_the_serialiser_is_the_only_producer(void **state)
{
	struct ks_strbuf found;
	char src[4200];
	int files = 0;

	(void)state;
	snprintf(src, sizeof(src), "%s/src", root());
	ks_strbuf_init(&found);
	scan_dir(src, "src", &found, &files);
	assert_true(files > 40);
	if (found.len)
		fail_msg("a result's fields are written outside src/evaluate/result.c (use "
			 "ks_result_to_json_into()):\n%s",
			 found.buf);
	ks_strbuf_release(&found);

	/* and the lint finds what it looks for */
	{
		char *dir = test_tmpdir(), path[4200];

		test_write(dir, "x.c",
			   "void f(json_t *o) {\n\tjson_object_set_new(o, \"descriptors\", d);\n"
			   "\tlog(json_pack(\"{s:s, s:s}\", \"event\", \"result\", \"verdict\", v));\n}\n");
		snprintf(path, sizeof(path), "%s/x.c", dir);
		ks_strbuf_init(&found);
		scan(path, "src/x.c", &found);
		assert_string_equal(found.buf, "src/x.c:2: writes \"descriptors\"\n");
		ks_strbuf_release(&found);
		test_rmtree(dir);
	}
}

/*
 * And the parsers are the only readers: no other code under src/ looks a
 * record's fields up by name; it reads a struct ks_record (record.h).  A
 * read is json_object_get() with one of record_keys, or one of record.h's
 * JSON accessors (made for records, so with any key of a record, with a
 * key the lint cannot see, or ks_record_id(), ks_record_verdict(),
 * ks_record_sanitizer_failed()).  Whole files that keep the record's JSON
 * on purpose, and keys that json_object_get() reads of other JSON in a
 * file, are listed with their reason.
 */
static const char *const record_keys[] = { "verdict",	  "evidence",	 "fitness",   "sol_fraction",
					   "workloads",	  "descriptors", "kernels",   "launches",
					   "overhead",	  "timing",	 "parents",   "duplicate_of",
					   "source_hash", "mutation",	 "prompt_id", "gpu",
					   "arch",	  "created",	 "family",    "path",
					   "driver",	  "toolkit",	 "nvrtc",     "sanitizer",
					   NULL };
/* keys too common in other JSON to flag under json_object_get(), flagged under record.h's accessors */
static const char *const accessor_keys[] = { "id",	"op",	  "params", "seq",	 "llm",
					     "profile", "binary", "printf", "evaluator", "imported_from_id",
					     NULL };
static const struct {
	const char *file, *key, *why; /* key NULL: every key */
} readers[] = {
	{ "src/evaluate/result.c", NULL, "the result's one parser" },
	{ "src/archive/record.c", NULL, "the record's one parser" },
	{ "src/archive/archive.c", NULL,
	  "the archive's own format: insert checks what it stores and indexes it, profiles and sanitizer "
	  "checks change stored records" },
	{ "src/archive/archive_json.c", NULL,
	  "export and import copy records byte for byte, renumbering parents" },
	{ "src/archive/archive_read.c", NULL, "reads a record's source by its hash" },
	{ "src/archive/archive_salvage.c", NULL, "copies what is readable of a damaged archive, as stored" },
	{ "src/archive/archive_verify.c", NULL, "checks the stored JSON itself, field by field" },
	{ "src/cli/archive.c", "launches", "a profile's launch count (profile.h)" },
	{ "src/cli/profile.c", "kernels", "a profile's kernels (profile.h)" },
	{ "src/compile/compiler.c", "kernels", "the compile server's reply" },
	{ "src/evaluate/sanitize.c", "workloads", "a sanitizer check's workloads (sanitize.h)" },
	{ "src/evaluate/worker.c", "workloads", "a job's workloads" },
	{ "src/op/op.c", "workloads", "op.json's workloads" },
	{ "src/export/export.c", "workloads",
	  "the export's JSON copies each stored workload, with its sizes" },
	{ "src/export/export.c", "arch",
	  "the export's own document: the nvcc target where the record has none" },
	{ "src/report/report.c", "gpu", "the GPU of a --compare file (tools/compare-torch.py)" },
};

static int is_key_of(const char *const *keys, const char *key)
{
	for (size_t k = 0; keys[k]; k++)
		if (!strcmp(keys[k], key))
			return 1;
	return 0;
}

static int allowed_read(const char *rel, const char *key)
{
	for (size_t a = 0; a < sizeof(readers) / sizeof(readers[0]); a++)
		if (!strcmp(readers[a].file, rel) && readers[a].key && !strcmp(readers[a].key, key))
			return 1;
	return 0;
}

static void scan_reads(const char *path, const char *rel, struct ks_strbuf *found)
{
	/* the call, its first argument (one level of parentheses), then what names the field */
#define FIRST_ARG "[[:space:]]*\\((([^,()]|\\([^()]*\\))*),[[:space:]]*"
	static const struct {
		const char *pattern;
		int accessor; /* 1: record.h's accessors with a quoted key; 2: with another key; 3: the key is
				 in the name */
	} calls[] = {
		{ "(json_object_get|ks_record_str|ks_record_num|ks_record_text)" FIRST_ARG "\"([a-z_]+)\"",
		  1 },
		{ "(ks_record_str|ks_record_num|ks_record_text)" FIRST_ARG "([^\"[:space:]])", 2 },
		{ "(ks_record_id|ks_record_verdict|ks_record_sanitizer_failed)[[:space:]]*\\(", 3 },
	};
#undef FIRST_ARG
	char *text = NULL;
	size_t size;
	struct ks_error err;

	for (size_t a = 0; a < sizeof(readers) / sizeof(readers[0]); a++)
		if (!strcmp(readers[a].file, rel) && !readers[a].key)
			return;
	if (ks_read_file(path, &text, &size, &err) < 0)
		fail_msg("%s", err.msg);
	for (size_t c = 0; c < sizeof(calls) / sizeof(calls[0]); c++) {
		regex_t call;
		regmatch_t m[5]; /* the call, its name, its first argument, a part of that, the key */
		const char *at;

		assert_int_equal(regcomp(&call, calls[c].pattern, REG_EXTENDED), 0);
		for (at = text; regexec(&call, at, 5, m, 0) == 0; at += m[0].rm_eo) {
			int line = ks_line_of(text, (size_t)(at + m[0].rm_so - text));
			char name[64], key[64];
			int accessor;

			snprintf(name, sizeof(name), "%.*s", (int)(m[1].rm_eo - m[1].rm_so), at + m[1].rm_so);
			accessor = strcmp(name, "json_object_get") != 0;
			if (calls[c].accessor == 3) {
				ks_strbuf_addf(found, "%s:%d: reads \"%s\" (%s)\n", rel, line,
					       !strcmp(name, "ks_record_id")	    ? "id"
					       : !strcmp(name, "ks_record_verdict") ? "verdict"
										    : "sanitizer",
					       name);
				continue;
			}
			if (calls[c].accessor == 2) {
				ks_strbuf_addf(found, "%s:%d: reads a field named by a value (%s)\n", rel,
					       line, name);
				continue;
			}
			snprintf(key, sizeof(key), "%.*s", (int)(m[4].rm_eo - m[4].rm_so), at + m[4].rm_so);
			if (accessor ? is_key_of(record_keys, key) || is_key_of(accessor_keys, key)
				     : is_key_of(record_keys, key) && !allowed_read(rel, key))
				ks_strbuf_addf(found, "%s:%d: reads \"%s\"\n", rel, line, key);
		}
		regfree(&call);
	}
	free(text);
}

static void scan_dir_reads(const char *dir, const char *rel, struct ks_strbuf *found, int *files)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	assert_non_null(d);
	while ((e = readdir(d))) {
		char *path, *sub;
		size_t len = strlen(e->d_name);

		if (e->d_name[0] == '.')
			continue;
		path = ks_path_join(dir, e->d_name);
		sub = ks_path_join(rel, e->d_name);
		if (e->d_type == DT_DIR) {
			scan_dir_reads(path, sub, found, files);
		} else if (len > 2 && !strcmp(e->d_name + len - 2, ".c")) {
			scan_reads(path, sub, found);
			(*files)++;
		}
		free(path);
		free(sub);
	}
	closedir(d);
}

static void test_the_parsers_are_the_only_readers(void **state)
{
	struct ks_strbuf found;
	char src[4200];
	int files = 0;

	(void)state;
	snprintf(src, sizeof(src), "%s/src", root());
	ks_strbuf_init(&found);
	scan_dir_reads(src, "src", &found, &files);
	assert_true(files > 40);
	if (found.len)
		fail_msg("a record's fields are read by name outside its parsers (read a struct ks_record: "
			 "archive/record.h, ks_archive_get_record()):\n%s",
			 found.buf);
	ks_strbuf_release(&found);

	/* and the lint finds what it looks for */
	{
		char *dir = test_tmpdir(), path[4200];

		test_write(dir, "x.c",
			   "double f(const json_t *r) {\n"
			   "\treturn json_number_value(json_object_get(r, \"fitness\")) +\n"
			   "\t       ks_record_num(json_array_get(list, 0), \"sol_fraction\") +\n"
			   "\t       json_number_value(json_object_get(r, \"fitnessy\"));\n"
			   "\tjson_array_foreach(json_object_get(\n\t\trecord, \"workloads\"), i, w) {}\n"
			   "\tjson_object_get(profile, \"launches\");\n"
			   "\tprintf(\"%s %s %lld\", ks_record_text(rec, \"gpu\", \"?\"),\n"
			   "\t       ks_record_str(records[0], \"arch\", \"sm_90a\"), (long "
			   "long)ks_record_id(rec));\n"
			   "\tks_record_text(record, lib_fields[i], \"\");\n"
			   "\tjson_object_get(w, \"id\"); ks_record_num(rec->llm, \"cost_usd\");\n"
			   "\tks_record_num(r, \"id\"); json_object_get(r, \"created\");\n"
			   "\tks_record_num(r, \"launches\");\n}\n");
		snprintf(path, sizeof(path), "%s/x.c", dir);
		ks_strbuf_init(&found);
		scan_reads(path, "src/x.c", &found);
		assert_string_equal(found.buf,
				    "src/x.c:2: reads \"fitness\"\nsrc/x.c:3: reads \"sol_fraction\"\n"
				    "src/x.c:5: reads \"workloads\"\nsrc/x.c:7: reads \"launches\"\n"
				    "src/x.c:8: reads \"gpu\"\nsrc/x.c:9: reads \"arch\"\n"
				    "src/x.c:12: reads \"id\"\nsrc/x.c:12: reads \"created\"\n"
				    "src/x.c:13: reads \"launches\"\n"
				    "src/x.c:10: reads a field named by a value (ks_record_text)\n"
				    "src/x.c:9: reads \"id\" (ks_record_id)\n");
		ks_strbuf_release(&found);
		ks_strbuf_init(&found);
		scan_reads(path, "src/cli/archive.c", &found);
		assert_string_equal(found.buf,
				    "src/cli/archive.c:2: reads \"fitness\"\n"
				    "src/cli/archive.c:3: reads \"sol_fraction\"\n"
				    "src/cli/archive.c:5: reads \"workloads\"\n"
				    "src/cli/archive.c:8: reads \"gpu\"\n"
				    "src/cli/archive.c:9: reads \"arch\"\n"
				    "src/cli/archive.c:12: reads \"id\"\n"
				    "src/cli/archive.c:12: reads \"created\"\n"
				    "src/cli/archive.c:13: reads \"launches\"\n"
				    "src/cli/archive.c:10: reads a field named by a value (ks_record_text)\n"
				    "src/cli/archive.c:9: reads \"id\" (ks_record_id)\n");
		ks_strbuf_release(&found);
		test_rmtree(dir);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_form_reads_back_as_written),
		cmocka_unit_test(test_a_malformed_frame_is_refused_naming_the_field),
		cmocka_unit_test(test_old_records_read),
		cmocka_unit_test(test_evaluation_joins_the_build_with_the_drivers_occupancy),
		cmocka_unit_test(test_check_and_the_archive_describe_a_candidate_alike),
		cmocka_unit_test(test_a_record_reads_every_field),
		cmocka_unit_test(test_a_sparse_record_reads),
		cmocka_unit_test(test_a_malformed_record_is_refused_naming_the_field_and_id),
		cmocka_unit_test(test_the_serialiser_is_the_only_producer),
		cmocka_unit_test(test_the_parsers_are_the_only_readers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
