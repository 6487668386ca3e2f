/*
 * test_profile.c - hardware evidence without a GPU: ncu's CSV (real
 * output of ncu 2025.3.1 on an H100, and a synthetic two-launch case)
 * read into a profile, its plain lines, the budget that
 * keeps profiling to a share of the GPU time, and the profiler run as a
 * subprocess through fake ncu scripts: missing, without permission,
 * unable to start, failing, hanging past its deadline, and working.
 */
#include "testlib.h"

#include <errno.h>
#include <math.h>
#include <signal.h>

#include "ksearch/base/fs.h"
#include "ksearch/base/util.h"
#include "ksearch/evaluate/profile.h"
#include "ksearch/search/search.h"

static char *fixture(const char *name)
{
	const char *dir = getenv("KS_TEST_FIXTURES");
	char path[4096], *text;
	size_t len;
	struct ks_error err;

	snprintf(path, sizeof(path), "%s/ncu/%s", dir ? dir : "tests/unit/fixtures", name);
	if (ks_read_file(path, &text, &len, &err) < 0)
		fail_msg("%s", err.msg);
	return text;
}

#define assert_near(a, b) assert_true(fabs((a) - (b)) < 1e-9)

/* Two launches: fractions weighted by duration, stalls ranked by share, spills summed. */
static void test_two_launches_are_weighted_by_duration(void **state)
{
	char *csv = fixture("synthetic-two-launches.csv");
	struct ks_profile p;
	struct ks_error err;

	(void)state;
	if (ks_profile_parse_ncu_csv(csv, &p, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(p.launches, 2);
	assert_int_equal(p.n_kernels, 2);
	assert_string_equal(p.kernels[0].name, "decode_split");
	assert_near(p.kernels[0].duration_us, 30);
	assert_near(p.kernels[1].duration_us, 10); /* "usecond" */
	assert_near(p.duration_us, 40);
	assert_near(p.dram_fraction, (30 * 0.60 + 10 * 0.10) / 40);
	assert_near(p.achieved_occupancy, (30 * 0.25 + 10 * 0.45) / 40);
	assert_near(p.sm_throughput, (30 * 0.20 + 10 * 0.04) / 40);
	assert_near(p.l2_hit_rate, 0.40); /* the second launch's "n/a" is left out */
	assert_near(p.local_load_bytes, 2048);
	assert_near(p.local_store_bytes, 1024);
	/* weighted stall cycles: long_scoreboard 180, barrier 70, wait 30, not_selected 15, math 15; never
	 * "selected" */
	assert_int_equal(p.n_stalls, 3);
	assert_string_equal(p.stalls[0].reason, "long_scoreboard");
	assert_near(p.stalls[0].share, 180.0 / 310);
	assert_string_equal(p.stalls[1].reason, "barrier");
	assert_near(p.stalls[1].share, 70.0 / 310);
	assert_string_equal(p.stalls[2].reason, "wait");
	free(csv);
}

/* Real output: ncu 2025.3.1.0 on an H100, gqa's mma_tiles seed (two launches) on b64_kv46287. */
static void test_real_ncu_output_of_a_gqa_kernel(void **state)
{
	char *csv = fixture("gqa-mma-tiles-h100.csv");
	struct ks_profile p;
	struct ks_error err;

	(void)state;
	if (ks_profile_parse_ncu_csv(csv, &p, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(p.launches, 2);
	assert_string_equal(p.kernels[0].name, "gqa_mma_partial");
	assert_string_equal(p.kernels[1].name, "gqa_mma_merge");
	assert_near(p.kernels[0].duration_us, 50.912); /* "ns", "50,912" */
	assert_near(p.kernels[0].dram_fraction, 0.6059);
	assert_near(p.kernels[0].l2_hit_rate, 0.4028);
	assert_true(fabs(p.dram_fraction - 0.5836) < 0.001);
	assert_true(fabs(p.achieved_occupancy - 0.12) < 0.01);
	assert_true(p.sm_throughput > 0.1 && p.sm_throughput < 0.2);
	assert_near(p.local_load_bytes + p.local_store_bytes, 0);
	assert_int_equal(p.n_stalls, 3);
	assert_string_equal(p.stalls[0].reason, "long_scoreboard");
	assert_true(fabs(p.stalls[0].share - 0.64) < 0.01);
	assert_string_equal(p.stalls[1].reason, "wait");
	assert_string_equal(p.stalls[2].reason, "short_scoreboard");
	free(csv);
}

static void test_what_is_not_ncu_csv_is_refused(void **state)
{
	struct ks_profile p;
	struct ks_error err;

	(void)state;
	assert_int_equal(ks_profile_parse_ncu_csv(
				 "==PROF== Connected\n==WARNING== No kernels were profiled.\n", &p, &err),
			 -1);
	assert_contains(err.msg, "no CSV in ncu's output");
	assert_int_equal(ks_profile_parse_ncu_csv("\"a\",\"b\"\n\"1\",\"2\"\n", &p, &err), -1);
	assert_contains(err.msg, "expected ncu's CSV header");
	assert_int_equal(ks_profile_parse_ncu_csv("\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\","
						  "\"Metric Value\"\n",
						  &p, &err),
			 -1);
	assert_contains(err.msg, "ncu measured no launch");
}

/* The JSON a record stores, and the lines people and the LLM read. */
static void test_profile_json_and_its_lines(void **state)
{
	char *csv = fixture("synthetic-two-launches.csv"), *text;
	struct ks_profile p;
	struct ks_error err;
	json_t *j;

	(void)state;
	if (ks_profile_parse_ncu_csv(csv, &p, &err) < 0)
		fail_msg("%s", err.msg);
	snprintf(p.tool, sizeof(p.tool), "ncu 2025.3.1.0");
	snprintf(p.workload, sizeof(p.workload), "b64_kv46287");
	j = ks_profile_to_json(&p);
	assert_string_equal(json_string_value(json_object_get(j, "workload")), "b64_kv46287");
	assert_near(json_number_value(json_object_get(j, "dram_fraction")), p.dram_fraction);
	assert_near(json_number_value(json_object_get(j, "achieved_occupancy")), p.achieved_occupancy);
	assert_int_equal(json_array_size(json_object_get(j, "stalls")), 3);
	assert_int_equal(json_array_size(json_object_get(j, "kernels")), 2);
	text = ks_profile_text(j, "> ");
	assert_string_equal(text,
			    "> DRAM throughput 48% of peak, SM throughput 16% of peak, L2 hit rate 40%\n"
			    "> achieved occupancy 0.30\n"
			    "> warp stalls: long scoreboard 58%, barrier 23%, wait 10%\n"
			    "> local memory (spills): 2.0 KB loaded, 1.0 KB stored\n");
	free(text);
	json_object_set_new(j, "local_load_bytes", json_real(0));
	json_object_set_new(j, "local_store_bytes", json_real(0));
	text = ks_profile_text(j, "");
	assert_contains(text, "local memory (spills): none\n");
	free(text);
	assert_null(ks_profile_text(NULL, ""));
	json_decref(j);
	free(csv);
}

/* Profiling may start only while it stays within its share of the GPU time. */
static void test_budget_keeps_profiling_to_its_share(void **state)
{
	struct ks_evidence_budget b;

	(void)state;
	ks_evidence_budget_init(&b, 0.1, 10);
	assert_false(ks_evidence_budget_allows(&b, 0)); /* no GPU time yet to pay for it */
	b.eval_s = 89;
	assert_false(ks_evidence_budget_allows(&b, 0)); /* 10 / 99 > 10% */
	b.eval_s = 90;
	assert_true(ks_evidence_budget_allows(&b, 0));	/* 10 / 100 */
	assert_false(ks_evidence_budget_allows(&b, 1)); /* not with one already running */
	ks_evidence_budget_spent(&b, 4);
	assert_near(b.expected_s, 4);
	assert_near(ks_evidence_budget_used(&b), 4.0 / 94);
	/* 4 + 4 <= 0.1 * (90 + 4 + 4)? no: 8 > 9.8 is false, so yes */
	assert_true(ks_evidence_budget_allows(&b, 0));
	ks_evidence_budget_spent(&b, 6);
	assert_near(b.expected_s, 5);
	assert_false(ks_evidence_budget_allows(&b, 0)); /* 15 > 0.1 * 105 */
	/* whatever is allowed, the share never passes the budget by more than a surprise */
	for (int i = 0; i < 1000; i++) {
		b.eval_s += 3;
		if (ks_evidence_budget_allows(&b, 0))
			ks_evidence_budget_spent(&b, 5);
		assert_true(ks_evidence_budget_used(&b) <= 0.1 + 1e-12);
	}
	assert_true(ks_evidence_budget_used(&b) > 0.09);
	ks_evidence_budget_init(&b, 0, 1);
	b.eval_s = 1e9;
	assert_false(ks_evidence_budget_allows(&b, 0)); /* share 0: never */
}

/* ---- the profiler as a subprocess, through fake ncu scripts ---- */

struct fake {
	char *dir;
	struct ks_op op;
};

static int setup(void **state)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct ks_error err;

	f->dir = test_tmpdir();
	if (ks_op_find("gqa", &f->op, &err) < 0)
		fail_msg("%s", err.msg);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fake *f = *state;

	ks_op_release(&f->op);
	test_rmtree(f->dir);
	free(f);
	return 0;
}

/* A fake ncu: the script's body after the shebang; returns its path (caller frees). */
static char *script(struct fake *f, const char *name, const char *body)
{
	char *path = ks_path_join(f->dir, name), *text = ks_asprintf("#!/bin/sh\n%s", body);

	test_write(f->dir, name, text);
	assert_int_equal(chmod(path, 0755), 0);
	free(text);
	return path;
}

static void profile_with(struct fake *f, const char *ncu, int timeout_ms, struct ks_profile_outcome *out)
{
	const char *params[] = { "SPLITS=8" };
	struct ks_profile_request req = { .op = &f->op,
					  .source = "/* ksearch {} */\n",
					  .path = "fake.cu",
					  .params = params,
					  .n_params = 1,
					  .ncu = ncu,
					  .timeout_ms = timeout_ms };
	struct ks_error err;

	if (ks_profile_run(&req, out, &err) < 0)
		fail_msg("%s", err.msg);
}

static void test_no_ncu_no_permission_and_no_profiler_are_said(void **state)
{
	struct fake *f = *state;
	struct ks_profile_outcome out;
	char *perm = script(
		f, "ncu-perm",
		"echo '==PROF== Connected to process 77 (/usr/bin/ksearch)'\n"
		"echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA "
		"GPU Performance Counters on the target device 0.' >&2\n"
		"exit 1\n");
	char *gvisor = script(f, "ncu-lib",
			      "echo '==ERROR== Failed to initialize the profiler: LibraryNotLoaded' >&2\n"
			      "exit 1\n");

	(void)state;
	profile_with(f, "/nonexistent/ncu", 0, &out);
	assert_int_equal(out.status, KS_PROFILE_UNAVAILABLE);
	assert_contains(out.why, "/nonexistent/ncu not found");
	profile_with(f, perm, 0, &out);
	assert_int_equal(out.status, KS_PROFILE_NO_PERMISSION);
	assert_contains(out.why, "ERR_NVGPUCTRPERM");
	assert_contains(out.why, "NVreg_RestrictProfilingToAdminUsers=0");
	profile_with(f, gvisor, 0, &out);
	assert_int_equal(out.status, KS_PROFILE_UNAVAILABLE);
	assert_contains(out.why, "Failed to initialize the profiler: LibraryNotLoaded");
	free(perm);
	free(gvisor);
}

/*
 * A working fake: it keeps its arguments, writes the runner's result file
 * (the value after --result) and prints a fixture as ncu would.
 */
static void test_a_profile_runs_ncu_over_the_runner(void **state)
{
	struct fake *f = *state;
	struct ks_profile_outcome out;
	char *body = ks_asprintf(
		"[ \"$1\" = --version ] && echo 'Version 2025.3.1.0 (build 36398880)' && exit 0\n"
		"printf '%%s\\n' \"$@\" > '%s/args'\n"
		"while [ $# -gt 0 ]; do [ \"$1\" = --result ] && echo '{\"ok\": true}' > \"$2\"; "
		"shift; done\n"
		"cat '%s/ncu/synthetic-two-launches.csv'\n",
		f->dir, getenv("KS_TEST_FIXTURES") ? getenv("KS_TEST_FIXTURES") : "tests/unit/fixtures");
	char *ncu = script(f, "ncu-ok", body), *args_path = ks_path_join(f->dir, "args"), *args;
	size_t len;
	struct ks_error err;

	(void)state;
	profile_with(f, ncu, 0, &out);
	if (out.status != KS_PROFILE_OK)
		fail_msg("%s", out.why);
	assert_near(out.profile.dram_fraction, 0.475);
	assert_string_equal(out.profile.workload, ks_profile_default_workload(&f->op)->id);
	assert_string_equal(out.profile.workload, "b64_kv46287");
	assert_true(out.profile.seconds > 0);
	assert_string_equal(out.profile.tool, "ncu 2025.3.1.0");
	if (ks_read_file(args_path, &args, &len, &err) < 0)
		fail_msg("%s", err.msg);
	/* counters at the clocks the timing ran at; only the runner's window; the candidate's params */
	assert_contains(args, "--clock-control\nnone\n");
	assert_contains(args, "--profile-from-start\noff\n");
	assert_contains(args, "--target-processes\napplication-only\n");
	assert_contains(args, "__profile_run\n");
	assert_contains(args, "--workload\nb64_kv46287\n");
	assert_contains(args, "--param\nSPLITS=8\n");
	free(args);
	free(args_path);
	free(ncu);
	free(body);
}

/* The runner's own failure is the candidate's: its words come back. */
static void test_a_candidate_that_fails_under_the_profiler(void **state)
{
	struct fake *f = *state;
	struct ks_profile_outcome out;
	char *ncu = script(
		f, "ncu-crash",
		"while [ $# -gt 0 ]; do [ \"$1\" = --result ] && echo '{\"ok\": false, \"error\": \"workload "
		"b64: running the candidate under the profiler: CUDA_ERROR_ILLEGAL_ADDRESS\"}' > \"$2\"; "
		"shift; done\n"
		"echo '==PROF== Disconnected'\nexit 3\n");

	(void)state;
	profile_with(f, ncu, 0, &out);
	assert_int_equal(out.status, KS_PROFILE_FAILED);
	assert_contains(out.why, "CUDA_ERROR_ILLEGAL_ADDRESS");
	free(ncu);
}

/*
 * Only ncu's own "==ERROR==" lines say what the profiler cannot do: a
 * runner's failure that mentions "not supported" is the candidate's, and
 * the words of the permission error elsewhere (a kernel's printf, were it
 * to get through) change nothing.
 */
static void test_only_ncu_errors_speak_for_the_profiler(void **state)
{
	struct fake *f = *state;
	struct ks_profile_outcome out;
	char *fp16 =
		script(f, "ncu-fp16",
		       "while [ $# -gt 0 ]; do [ \"$1\" = --result ] && echo '{\"ok\": false, \"error\": "
		       "\"float16 scalar inputs are not supported yet\"}' > \"$2\"; shift; done\n"
		       "echo 'ksearch __profile_run: float16 scalar inputs are not supported yet' >&2\n"
		       "echo '==ERROR== The application returned an error code (3).' >&2\nexit 3\n");
	char *body =
		ks_asprintf("[ \"$1\" = --version ] && exit 0\n"
			    "while [ $# -gt 0 ]; do [ \"$1\" = --result ] && echo '{\"ok\": true}' > \"$2\"; "
			    "shift; done\n"
			    "echo 'ERR_NVGPUCTRPERM - The user does not have permission'\n"
			    "cat '%s/ncu/synthetic-two-launches.csv'\n",
			    getenv("KS_TEST_FIXTURES") ? getenv("KS_TEST_FIXTURES") : "tests/unit/fixtures");
	char *printed = script(f, "ncu-printed", body);

	(void)state;
	profile_with(f, fp16, 0, &out);
	assert_int_equal(out.status, KS_PROFILE_FAILED);
	assert_contains(out.why, "float16 scalar inputs are not supported yet");
	profile_with(f, printed, 0, &out);
	if (out.status != KS_PROFILE_OK)
		fail_msg("%s", out.why);
	free(fp16);
	free(printed);
	free(body);
}

/* A profile that hangs is killed at its deadline, with everything it started. */
static void test_a_hanging_profile_is_killed_with_its_children(void **state)
{
	struct fake *f = *state;
	struct ks_profile_outcome out;
	char *body = ks_asprintf("sleep 60 &\necho $! > '%s/pid'\nwait\n", f->dir);
	char *ncu = script(f, "ncu-hang", body), *pid_path = ks_path_join(f->dir, "pid"), *text;
	size_t len;
	struct ks_error err;
	pid_t pid;
	int gone = 0;

	(void)state;
	profile_with(f, ncu, 1000, &out);
	assert_int_equal(out.status, KS_PROFILE_FAILED);
	assert_contains(out.why, "did not finish within 1 s");
	assert_true(out.profile.seconds < 10);
	if (ks_read_file(pid_path, &text, &len, &err) < 0)
		fail_msg("%s", err.msg);
	pid = (pid_t)atoi(text);
	assert_true(pid > 0);
	/* killed with its group (reaped by whoever adopted it, so allow a moment) */
	for (int i = 0; i < 200 && !gone; i++) {
		char stat[64], buf[512];
		FILE *s;

		snprintf(stat, sizeof(stat), "/proc/%d/stat", (int)pid);
		s = fopen(stat, "r");
		gone = !s || (fgets(buf, sizeof(buf), s) && strstr(buf, ") Z"));
		if (s)
			fclose(s);
		if (!gone)
			usleep(10000);
	}
	assert_true(gone);
	free(text);
	free(pid_path);
	free(ncu);
	free(body);
}

/* ---- the outcome between ranks ---- */

/* Doubles must come back bit for bit, not nearly. */
#define assert_same_double(a, b)                                                                             \
	do {                                                                                                 \
		if ((a) != (b))                                                                              \
			fail_msg("%s: sent %.17g, got %.17g", #a, (a), (b));                                 \
	} while (0)

/* text of len bytes, each c, in buf (of at least len + 1) */
static char *repeat(char *buf, char c, size_t len)
{
	memset(buf, c, len);
	buf[len] = '\0';
	return buf;
}

/* Every field distinctive, the lists full, the text as long as its array allows. */
static void full_outcome(struct ks_profile_outcome *o)
{
	struct ks_profile *p = &o->profile;
	static const double awkward[] = { 0.1, 1e-300, 1.0 / 3, 5e-324, 1.7976931348623157e308, 123456.789 };

	memset(o, 0, sizeof(*o));
	o->status = KS_PROFILE_FAILED;
	snprintf(o->why, sizeof(o->why), "ncu: ==ERROR== \"quoted\", a tab\tand \xc3\xa9 (UTF-8)");
	repeat(p->tool, 't', sizeof(p->tool) - 1);
	snprintf(p->workload, sizeof(p->workload), "b64_kv46287");
	p->launches = 4000000000u;
	p->duration_us = 0.1;
	p->dram_fraction = 1e-300;
	p->achieved_occupancy = 1.0 / 3;
	p->l2_hit_rate = 0.7;
	p->sm_throughput = 5e-324;
	p->local_load_bytes = 2048;
	p->local_store_bytes = 1.7976931348623157e308;
	p->seconds = 12.345678901234567;
	o->held_s = 13.000000000000002;
	for (size_t i = 0; i < KS_PROFILE_STALLS; i++) {
		snprintf(p->stalls[i].reason, sizeof(p->stalls[i].reason), "stall_%zu", i);
		p->stalls[i].share = awkward[i];
	}
	repeat(p->stalls[1].reason, 'r', sizeof(p->stalls[1].reason) - 1);
	p->n_stalls = KS_PROFILE_STALLS;
	for (size_t i = 0; i < KS_PROFILE_MAX_KERNELS; i++) {
		struct ks_profile_kernel *k = &p->kernels[i];

		snprintf(k->name, sizeof(k->name), "void attention<%zu>(float const*)", i);
		k->duration_us = awkward[i % 6] + (double)i;
		k->dram_fraction = awkward[(i + 1) % 6];
		k->achieved_occupancy = awkward[(i + 2) % 6];
		k->l2_hit_rate = awkward[(i + 3) % 6];
		k->sm_throughput = awkward[(i + 4) % 6];
		k->local_load_bytes = awkward[(i + 5) % 6];
		k->local_store_bytes = (double)i * 1024;
	}
	repeat(p->kernels[KS_PROFILE_MAX_KERNELS - 1].name, 'k', sizeof(p->kernels[0].name) - 1);
	p->n_kernels = KS_PROFILE_MAX_KERNELS;
}

static void test_a_profile_outcome_comes_back_whole(void **state)
{
	struct ks_profile_outcome *sent = calloc(1, sizeof(*sent)), *got = calloc(1, sizeof(*got));
	const struct ks_profile *a = &sent->profile, *b = &got->profile;
	struct ks_error err;

	(void)state;
	full_outcome(sent);
	for (int s = KS_PROFILE_OK; s <= KS_PROFILE_NO_PERMISSION; s++) {
		json_t *j = ks_profile_outcome_to_json((sent->status = s, sent)), *back;
		char *text = json_dumps(j, JSON_COMPACT);

		assert_non_null(text);
		back = json_loads(text, 0, NULL);
		assert_non_null(back);
		memset(got, 0x5a, sizeof(*got));
		if (ks_profile_outcome_from_json(back, got, &err) < 0)
			fail_msg("%s", err.msg);
		assert_int_equal(got->status, s);
		assert_string_equal(got->why, sent->why);
		assert_string_equal(b->tool, a->tool);
		assert_string_equal(b->workload, a->workload);
		assert_int_equal(b->launches, a->launches);
		assert_same_double(a->duration_us, b->duration_us);
		assert_same_double(a->dram_fraction, b->dram_fraction);
		assert_same_double(a->achieved_occupancy, b->achieved_occupancy);
		assert_same_double(a->l2_hit_rate, b->l2_hit_rate);
		assert_same_double(a->sm_throughput, b->sm_throughput);
		assert_same_double(a->local_load_bytes, b->local_load_bytes);
		assert_same_double(a->local_store_bytes, b->local_store_bytes);
		assert_same_double(a->seconds, b->seconds);
		assert_same_double(sent->held_s, got->held_s);
		assert_int_equal(b->n_stalls, KS_PROFILE_STALLS);
		for (size_t i = 0; i < KS_PROFILE_STALLS; i++) {
			assert_string_equal(b->stalls[i].reason, a->stalls[i].reason);
			assert_same_double(a->stalls[i].share, b->stalls[i].share);
		}
		assert_int_equal(b->n_kernels, KS_PROFILE_MAX_KERNELS);
		for (size_t i = 0; i < KS_PROFILE_MAX_KERNELS; i++) {
			const struct ks_profile_kernel *x = &a->kernels[i], *y = &b->kernels[i];

			assert_string_equal(y->name, x->name);
			assert_same_double(x->duration_us, y->duration_us);
			assert_same_double(x->dram_fraction, y->dram_fraction);
			assert_same_double(x->achieved_occupancy, y->achieved_occupancy);
			assert_same_double(x->l2_hit_rate, y->l2_hit_rate);
			assert_same_double(x->sm_throughput, y->sm_throughput);
			assert_same_double(x->local_load_bytes, y->local_load_bytes);
			assert_same_double(x->local_store_bytes, y->local_store_bytes);
		}
		/* nothing beyond the lists: the decoder zeroed it, as the sender had */
		assert_memory_equal(got, sent, sizeof(*got));
		json_decref(back);
		json_decref(j);
		free(text);
	}
	free(sent);
	free(got);
}

/* The value at a path like "profile.kernels.15" (object keys and list indices). */
static json_t *find(json_t *root, const char *path)
{
	char buf[128], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *part = strtok_r(buf, ".", &save); part && root; part = strtok_r(NULL, ".", &save))
		root = json_is_array(root) ? json_array_get(root, strtoul(part, NULL, 10))
					   : json_object_get(root, part);
	assert_non_null(root);
	return root;
}

/*
 * good with where.key replaced by value (deleted when value is NULL; where
 * a list: the entry at index key) must be refused, the message naming named.
 */
static void assert_refused(const json_t *good, const char *where, const char *key, json_t *value,
			   const char *named)
{
	json_t *bad = json_deep_copy(good), *in = find(bad, where);
	struct ks_profile_outcome *out = malloc(sizeof(*out)), *zero = calloc(1, sizeof(*zero));
	struct ks_error err;

	if (json_is_array(in))
		assert_int_equal(json_array_set_new(in, strtoul(key, NULL, 10), value), 0);
	else if (value)
		assert_int_equal(json_object_set_new(in, key, value), 0);
	else
		assert_int_equal(json_object_del(in, key), 0);
	memset(out, 0x5a, sizeof(*out));
	err.msg[0] = '\0';
	if (ks_profile_outcome_from_json(bad, out, &err) == 0)
		fail_msg("%s%s%s: accepted", where, *where ? "." : "", key);
	assert_contains(err.msg, named);
	assert_memory_equal(out, zero, sizeof(*out)); /* no half outcome */
	json_decref(bad);
	free(out);
	free(zero);
}

static json_t *text_of_length(size_t len)
{
	char buf[KS_ERROR_MAX + 1];

	return json_string(repeat(buf, 'x', len));
}

static void test_a_malformed_profile_outcome_is_refused_by_field(void **state)
{
	struct ks_profile_outcome *o = malloc(sizeof(*o));
	struct ks_error err;
	json_t *good, *list;

	(void)state;
	full_outcome(o);
	good = ks_profile_outcome_to_json(o);
	assert_non_null(good);

	/* not an outcome at all */
	assert_int_equal(ks_profile_outcome_from_json(NULL, o, &err), -1);
	assert_contains(err.msg, "profile outcome");
	list = json_array();
	assert_int_equal(ks_profile_outcome_from_json(list, o, &err), -1);
	assert_contains(err.msg, "profile outcome: expected an object, got a list");
	json_decref(list);

	/* a status that is not one of ks_profile_status_name()'s */
	assert_refused(good, "", "status", json_string("clean"), "status: \"clean\" is not one of \"ok\"");
	assert_refused(good, "", "status", json_string("?"), "status");
	assert_refused(good, "", "status", json_integer(0), "status: expected a string, got an integer");
	assert_refused(good, "", "status", NULL, "status: missing");

	/* missing, or of the wrong type */
	assert_refused(good, "", "held_s", NULL, "held_s: missing");
	assert_refused(good, "", "held_s", json_real(-1.0), "held_s");
	assert_refused(good, "", "why", NULL, "why: missing");
	assert_refused(good, "", "profile", NULL, "profile: missing");
	assert_refused(good, "", "profile", json_string("none"), "profile: expected an object, got a string");
	assert_refused(good, "profile", "workload", NULL, "profile.workload: missing");
	assert_refused(good, "profile", "tool", json_integer(2025), "profile.tool: expected a string");
	assert_refused(good, "profile", "launches", json_real(3.0), "profile.launches: expected an integer");
	assert_refused(good, "profile", "launches", json_string("3"),
		       "profile.launches: expected an integer");
	assert_refused(good, "profile", "dram_fraction", json_null(),
		       "profile.dram_fraction: expected a number");
	assert_refused(good, "profile", "seconds", NULL, "profile.seconds: missing");
	assert_refused(good, "profile", "stalls", json_object(), "profile.stalls: expected a list");
	assert_refused(good, "profile.stalls", "0", json_string("long_scoreboard"),
		       "profile.stalls[0]: expected an object, got a string");
	assert_refused(good, "profile.stalls.2", "share", NULL, "profile.stalls[2].share: missing");
	assert_refused(good, "profile.kernels.7", "sm_throughput", json_true(),
		       "profile.kernels[7].sm_throughput: expected a number, got a boolean");
	assert_refused(good, "profile.kernels.0", "name", json_stringn("a\0b", 3),
		       "profile.kernels[0].name: holds a NUL byte");

	/* text longer than its array: refused, not cut */
	assert_refused(good, "", "why", text_of_length(KS_ERROR_MAX), "why: 4096 bytes");
	assert_refused(good, "profile", "tool", text_of_length(64), "profile.tool: 64 bytes");
	assert_refused(good, "profile.stalls.1", "reason", text_of_length(48), "profile.stalls[1].reason");
	assert_refused(good, "profile.kernels.15", "name", text_of_length(128), "profile.kernels[15].name");

	/* more stalls or kernels than the struct keeps */
	list = json_deep_copy(json_object_get(json_object_get(good, "profile"), "stalls"));
	json_array_append(list, json_array_get(list, 0));
	assert_refused(good, "profile", "stalls", list, "profile.stalls: 4 entries, more than the 3 kept");
	list = json_deep_copy(json_object_get(json_object_get(good, "profile"), "kernels"));
	json_array_append(list, json_array_get(list, 0));
	assert_refused(good, "profile", "kernels", list,
		       "profile.kernels: 17 entries, more than the 16 kept");

	/* a negative count or duration (or byte count) */
	assert_refused(good, "profile", "launches", json_integer(-1), "profile.launches: -1 is negative");
	assert_refused(good, "profile", "duration_us", json_real(-0.5),
		       "profile.duration_us: -0.5 is negative");
	assert_refused(good, "profile", "seconds", json_integer(-2), "profile.seconds: -2 is negative");
	assert_refused(good, "profile", "local_store_bytes", json_real(-1), "profile.local_store_bytes");
	assert_refused(good, "profile.kernels.3", "duration_us", json_real(-1e-9),
		       "profile.kernels[3].duration_us");

	/*
	 * A number that is not finite cannot arrive (jansson neither reads nor
	 * makes one), so the sender is where it is refused: no outcome at all
	 * rather than one short of a kernel or a field.
	 */
	assert_null(json_loads("{\"seconds\": 1e999}", 0, NULL));
	o->profile.seconds = INFINITY;
	assert_null(ks_profile_outcome_to_json(o));
	full_outcome(o);
	o->profile.kernels[5].l2_hit_rate = NAN;
	assert_null(ks_profile_outcome_to_json(o));
	full_outcome(o);
	o->held_s = NAN;
	assert_null(ks_profile_outcome_to_json(o));
	full_outcome(o);
	snprintf(o->why, sizeof(o->why), "not UTF-8: \xff");
	assert_null(ks_profile_outcome_to_json(o));
	full_outcome(o);
	o->profile.n_kernels = KS_PROFILE_MAX_KERNELS + 1;
	assert_null(ks_profile_outcome_to_json(o));

	json_decref(good);
	free(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_launches_are_weighted_by_duration),
		cmocka_unit_test(test_real_ncu_output_of_a_gqa_kernel),
		cmocka_unit_test(test_what_is_not_ncu_csv_is_refused),
		cmocka_unit_test(test_profile_json_and_its_lines),
		cmocka_unit_test(test_budget_keeps_profiling_to_its_share),
		cmocka_unit_test(test_a_profile_outcome_comes_back_whole),
		cmocka_unit_test(test_a_malformed_profile_outcome_is_refused_by_field),
		cmocka_unit_test_setup_teardown(test_no_ncu_no_permission_and_no_profiler_are_said, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_a_profile_runs_ncu_over_the_runner, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_candidate_that_fails_under_the_profiler, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_only_ncu_errors_speak_for_the_profiler, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_hanging_profile_is_killed_with_its_children, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
