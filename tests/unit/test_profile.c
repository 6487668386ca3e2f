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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_launches_are_weighted_by_duration),
		cmocka_unit_test(test_real_ncu_output_of_a_gqa_kernel),
		cmocka_unit_test(test_what_is_not_ncu_csv_is_refused),
		cmocka_unit_test(test_profile_json_and_its_lines),
		cmocka_unit_test(test_budget_keeps_profiling_to_its_share),
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
