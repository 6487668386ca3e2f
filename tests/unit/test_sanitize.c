/*
 * test_sanitize.c - the sanitizer check without a GPU: compute-sanitizer's
 * output read (samples of memcheck and racecheck output in the format the
 * tools print, written by hand: tests/unit/fixtures/sanitizer/), only its
 * own "========= " lines believed, and the check run as a subprocess
 * through a fake compute-sanitizer: clean, failed on memcheck, racecheck
 * only when shared memory is used, unavailable, and missing.
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "ksearch/base/proc.h"
#include "ksearch/base/util.h"
#include "ksearch/evaluate/sanitize.h"
#include "ksearch/op/op.h"

static void parse_fixture(const char *name, struct ks_sanitize_report *rep)
{
	const char *dir = getenv("KS_TEST_FIXTURES");
	char path[4096], *text;
	size_t len;
	struct ks_error err;

	snprintf(path, sizeof(path), "%s/sanitizer/%s", dir ? dir : "tests/unit/fixtures", name);
	if (ks_read_file(path, &text, &len, &err) < 0)
		fail_msg("%s", err.msg);
	ks_sanitize_parse(text, rep);
	free(text);
}

static void test_memcheck_errors_are_counted_and_the_first_named(void **state)
{
	struct ks_sanitize_report rep;

	(void)state;
	parse_fixture("memcheck-undone-write.txt", &rep);
	assert_int_equal(rep.errors, 2);
	assert_true(rep.summary);
	assert_false(rep.unavailable);
	assert_string_equal(rep.first, "Invalid __global__ write of size 4 bytes");
	parse_fixture("memcheck-launch-failed.txt", &rep);
	assert_int_equal(rep.errors, 2);
	assert_string_equal(rep.first, "Invalid __global__ write of size 2 bytes");
	parse_fixture("memcheck-clean.txt", &rep);
	assert_int_equal(rep.errors, 0);
	assert_true(rep.summary);
	assert_string_equal(rep.first, "");
}

static void test_racecheck_errors_count_and_warnings_do_not(void **state)
{
	struct ks_sanitize_report rep;

	(void)state;
	parse_fixture("racecheck-race.txt", &rep);
	assert_int_equal(rep.errors, 1);
	assert_true(rep.summary);
	assert_non_null(strstr(rep.first, "Error: Race reported between Write access"));
	/* captured on an H100 (compute-sanitizer 2025.3.1, tests/gpu/t0240-sanitizer.sh's kernels) */
	parse_fixture("h100-memcheck-undone-write.txt", &rep);
	assert_int_equal(rep.errors, 11);
	assert_true(rep.summary);
	assert_string_equal(rep.first, "Invalid __global__ read of size 2 bytes");
	parse_fixture("h100-racecheck-race.txt", &rep);
	assert_int_equal(rep.errors, 6);
	assert_true(rep.summary);
	assert_string_equal(rep.first,
			    "Error: Race reported between Write access at rmsnorm_race_same_result+0x80");
	parse_fixture("racecheck-warning-only.txt", &rep);
	assert_int_equal(rep.errors, 0);
	assert_true(rep.summary);
}

/* gVisor and unsupported GPUs: the tool's own failure, not an error of the candidate's. */
static void test_device_not_supported_is_unavailable_not_an_error(void **state)
{
	struct ks_sanitize_report rep;

	(void)state;
	parse_fixture("device-not-supported.txt", &rep);
	assert_true(rep.unavailable);
	assert_int_equal(rep.errors, 0);
	assert_non_null(strstr(rep.unavailable_why, "Device not supported"));
}

/* Only lines that start with the exact tag count: what else reaches the output cannot pass for the tool. */
static void test_only_the_sanitizers_own_lines_count(void **state)
{
	struct ks_sanitize_report rep;

	(void)state;
	parse_fixture("forged-by-kernel.txt", &rep);
	assert_int_equal(rep.errors, 1);
	assert_false(rep.unavailable);
	assert_string_equal(rep.first, "Invalid __global__ read of size 16 bytes");
	/* control characters in an error line come out printable */
	ks_sanitize_parse("========= Invalid __global__ write in k\033]52;c;x\007\n", &rep);
	assert_int_equal(rep.errors, 1);
	assert_null(strchr(rep.first, '\033'));
	ks_sanitize_parse("", &rep);
	assert_int_equal(rep.errors, 0);
	assert_false(rep.summary);
}

/*
 * A fake compute-sanitizer: writes $FAKE_<TOOL> (a fixture's text) to
 * --log-file and {"ok": true, "smem_bytes": $FAKE_SMEM} to --result, and
 * logs the tools it ran.
 */
static const char fake_script[] =
	"#!/bin/sh\n"
	"[ \"$1\" = --version ] && { echo 'Version 2099.1.0 (fake)'; exit 0; }\n"
	"tool=; log=; result=\n"
	"while [ $# -gt 0 ]; do case $1 in --tool) tool=$2; shift;; --log-file) log=$2; shift;;\n"
	"  --result) result=$2; shift;; esac; shift; done\n"
	"echo \"$tool\" >>\"$FAKE_RAN\"\n"
	"case $tool in memcheck) cat \"$FAKE_MEMCHECK\" >\"$log\";; racecheck) cat \"$FAKE_RACECHECK\" "
	">\"$log\";; esac\n"
	"echo \"{\\\"ok\\\": true, \\\"smem_bytes\\\": $FAKE_SMEM}\" >\"$result\"\n"
	"grep -q 'ERROR SUMMARY: [1-9]\\|(1 error' \"$log\" && exit 86\n"
	"exit 0\n";

struct fake {
	char *dir, *script, *ran;
};

static void fake_setup(struct fake *f, const char *memcheck, const char *racecheck, int smem)
{
	const char *fixtures = getenv("KS_TEST_FIXTURES");
	char buf[4096];
	FILE *out;

	f->dir = test_tmpdir();
	f->script = ks_path_join(f->dir, "compute-sanitizer");
	f->ran = ks_path_join(f->dir, "ran");
	out = fopen(f->script, "w");
	assert_non_null(out);
	fputs(fake_script, out);
	fclose(out);
	chmod(f->script, 0755);
	snprintf(buf, sizeof(buf), "%s/sanitizer/%s", fixtures ? fixtures : "tests/unit/fixtures", memcheck);
	setenv("FAKE_MEMCHECK", buf, 1);
	snprintf(buf, sizeof(buf), "%s/sanitizer/%s", fixtures ? fixtures : "tests/unit/fixtures", racecheck);
	setenv("FAKE_RACECHECK", buf, 1);
	snprintf(buf, sizeof(buf), "%d", smem);
	setenv("FAKE_SMEM", buf, 1);
	setenv("FAKE_RAN", f->ran, 1);
}

static char *fake_ran(struct fake *f)
{
	char *text = NULL;
	size_t len;
	struct ks_error err;

	if (ks_read_file(f->ran, &text, &len, &err) < 0)
		return ks_strdup("");
	return text;
}

static void fake_release(struct fake *f)
{
	test_rmtree(f->dir);
	free(f->script);
	free(f->ran);
}

static void check(const char *script, struct ks_op *op, struct ks_sanitize_outcome *out)
{
	struct ks_sanitize_request req = {
		.op = op, .source = "// candidate\n", .path = "k.cu", .sanitizer = script, .timeout_ms = 20000
	};
	struct ks_error err;

	if (ks_sanitize_run(&req, out, &err) < 0)
		fail_msg("%s", err.msg);
}

static void test_the_check_runs_tools_in_turn(void **state)
{
	struct ks_sanitize_outcome out;
	struct ks_error err;
	struct ks_op op;
	struct fake f;
	json_t *j;
	char *ran;

	(void)state;
	if (ks_op_find("rmsnorm", &op, &err) < 0)
		fail_msg("%s", err.msg);
	/* clean, with shared memory: memcheck, then racecheck, on their workloads */
	fake_setup(&f, "memcheck-clean.txt", "racecheck-warning-only.txt", 1024);
	check(f.script, &op, &out);
	assert_int_equal(out.status, KS_SANITIZE_CLEAN);
	assert_int_equal(out.check.n_tools, 2);
	assert_int_equal(out.check.n_workloads, op.n_check_workloads + op.n_workloads);
	ran = fake_ran(&f);
	assert_string_equal(ran, "memcheck\nracecheck\n");
	free(ran);
	j = ks_sanitize_to_json(&out);
	assert_string_equal(json_string_value(json_object_get(j, "status")), "clean");
	assert_string_equal(json_string_value(json_object_get(j, "version")), "compute-sanitizer 2099.1.0");
	assert_null(json_object_get(j, "first"));
	json_decref(j);
	fake_release(&f);

	/* no shared memory: no racecheck */
	fake_setup(&f, "memcheck-clean.txt", "racecheck-race.txt", 0);
	check(f.script, &op, &out);
	assert_int_equal(out.status, KS_SANITIZE_CLEAN);
	ran = fake_ran(&f);
	assert_string_equal(ran, "memcheck\n");
	free(ran);
	fake_release(&f);

	/* memcheck fails: the check stops there, naming the first error */
	fake_setup(&f, "memcheck-undone-write.txt", "racecheck-race.txt", 1024);
	check(f.script, &op, &out);
	assert_int_equal(out.status, KS_SANITIZE_FAILED);
	assert_int_equal(out.check.errors, 2);
	assert_string_equal(out.check.first_tool, "memcheck");
	ran = fake_ran(&f);
	assert_string_equal(ran, "memcheck\n");
	free(ran);
	j = ks_sanitize_to_json(&out);
	assert_string_equal(json_string_value(json_object_get(j, "first")),
			    "Invalid __global__ write of size 4 bytes");
	json_decref(j);
	fake_release(&f);

	/* a race */
	fake_setup(&f, "memcheck-clean.txt", "racecheck-race.txt", 1024);
	check(f.script, &op, &out);
	assert_int_equal(out.status, KS_SANITIZE_FAILED);
	assert_string_equal(out.check.first_tool, "racecheck");
	fake_release(&f);

	/* a device it does not support: unavailable, not the candidate's failure */
	fake_setup(&f, "device-not-supported.txt", "racecheck-race.txt", 1024);
	check(f.script, &op, &out);
	assert_int_equal(out.status, KS_SANITIZE_UNAVAILABLE);
	assert_non_null(strstr(out.why, "Device not supported"));
	fake_release(&f);

	/* missing */
	check("/nonexistent/compute-sanitizer", &op, &out);
	assert_int_equal(out.status, KS_SANITIZE_UNAVAILABLE);
	assert_non_null(strstr(out.why, "not found"));
	ks_op_release(&op);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memcheck_errors_are_counted_and_the_first_named),
		cmocka_unit_test(test_racecheck_errors_count_and_warnings_do_not),
		cmocka_unit_test(test_device_not_supported_is_unavailable_not_an_error),
		cmocka_unit_test(test_only_the_sanitizers_own_lines_count),
		cmocka_unit_test(test_the_check_runs_tools_in_turn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
