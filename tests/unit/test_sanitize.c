/*
 * test_sanitize.c - the sanitizer check without a GPU: compute-sanitizer's
 * output read (samples of memcheck and racecheck output in the format the
 * tools print, written by hand: tests/unit/fixtures/sanitizer/), only its
 * own "========= " lines believed, and the check run as a subprocess
 * through a fake compute-sanitizer: clean, failed on memcheck, racecheck
 * only when shared memory is used, unavailable, and missing.
 */
#include "testlib.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "ksearch/base/fs.h"
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

/* ---- the outcome between ranks ---- */

/* text of len bytes, each c, in buf (of at least len + 1) */
static char *repeat(char *buf, char c, size_t len)
{
	memset(buf, c, len);
	buf[len] = '\0';
	return buf;
}

/* Every field distinctive, the lists full, the text as long as its array allows. */
static void full_outcome(struct ks_sanitize_outcome *o)
{
	struct ks_sanitize *c = &o->check;

	memset(o, 0, sizeof(*o));
	o->status = KS_SANITIZE_FAILED;
	snprintf(o->why, sizeof(o->why), "2 errors, the first (memcheck): \"Invalid\"\twrite \xc3\xa9");
	repeat(c->version, 'v', sizeof(c->version) - 1);
	snprintf(c->tools[0], sizeof(c->tools[0]), "memcheck");
	repeat(c->tools[1], 'r', sizeof(c->tools[1]) - 1);
	c->n_tools = 2;
	for (size_t i = 0; i < KS_SANITIZE_MAX_WORKLOADS; i++)
		snprintf(c->workloads[i], sizeof(c->workloads[i]), "b%zu_kv%zu", i, 1000 + 37 * i);
	repeat(c->workloads[KS_SANITIZE_MAX_WORKLOADS - 1], 'w', sizeof(c->workloads[0]) - 1);
	c->n_workloads = KS_SANITIZE_MAX_WORKLOADS;
	c->errors = UINT_MAX;
	repeat(c->first, 'f', sizeof(c->first) - 1);
	snprintf(c->first_tool, sizeof(c->first_tool), "racecheck");
	c->smem_bytes = LLONG_MAX;
	c->seconds = 0.1;
	o->held_s = 0.30000000000000004;
}

static void test_a_sanitizer_outcome_comes_back_whole(void **state)
{
	struct ks_sanitize_outcome *sent = calloc(1, sizeof(*sent)), *got = calloc(1, sizeof(*got));
	const struct ks_sanitize *a = &sent->check, *b = &got->check;
	static const double seconds[] = { 0.1, 1e-300, 5e-324, 1.0 / 3 };
	struct ks_error err;

	(void)state;
	full_outcome(sent);
	for (int s = KS_SANITIZE_CLEAN; s <= KS_SANITIZE_UNAVAILABLE; s++) {
		json_t *j, *back;
		char *text;

		sent->status = s;
		sent->check.seconds = seconds[s];
		j = ks_sanitize_outcome_to_json(sent);
		text = json_dumps(j, JSON_COMPACT);
		assert_non_null(text);
		back = json_loads(text, 0, NULL);
		assert_non_null(back);
		memset(got, 0x5a, sizeof(*got));
		if (ks_sanitize_outcome_from_json(back, got, &err) < 0)
			fail_msg("%s", err.msg);
		assert_int_equal(got->status, s);
		assert_string_equal(got->why, sent->why);
		assert_string_equal(b->version, a->version);
		assert_int_equal(b->n_tools, 2);
		assert_string_equal(b->tools[0], a->tools[0]);
		assert_string_equal(b->tools[1], a->tools[1]);
		assert_int_equal(b->n_workloads, KS_SANITIZE_MAX_WORKLOADS);
		for (size_t i = 0; i < KS_SANITIZE_MAX_WORKLOADS; i++)
			assert_string_equal(b->workloads[i], a->workloads[i]);
		assert_int_equal(b->errors, UINT_MAX);
		assert_string_equal(b->first, a->first);
		assert_string_equal(b->first_tool, a->first_tool);
		assert_true(b->smem_bytes == LLONG_MAX);
		if (b->seconds != a->seconds) /* bit for bit, not nearly */
			fail_msg("seconds: sent %.17g, got %.17g", a->seconds, b->seconds);
		if (got->held_s != sent->held_s)
			fail_msg("held_s: sent %.17g, got %.17g", sent->held_s, got->held_s);
		/* nothing beyond the lists: the decoder zeroed it, as the sender had */
		assert_memory_equal(got, sent, sizeof(*got));
		json_decref(back);
		json_decref(j);
		free(text);
	}
	free(sent);
	free(got);
}

/* The value at a path like "check.workloads.31" (object keys and list indices). */
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
	struct ks_sanitize_outcome *out = malloc(sizeof(*out)), *zero = calloc(1, sizeof(*zero));
	struct ks_error err;

	if (json_is_array(in))
		assert_int_equal(json_array_set_new(in, strtoul(key, NULL, 10), value), 0);
	else if (value)
		assert_int_equal(json_object_set_new(in, key, value), 0);
	else
		assert_int_equal(json_object_del(in, key), 0);
	memset(out, 0x5a, sizeof(*out));
	err.msg[0] = '\0';
	if (ks_sanitize_outcome_from_json(bad, out, &err) == 0)
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

static void test_a_malformed_sanitizer_outcome_is_refused_by_field(void **state)
{
	struct ks_sanitize_outcome *o = malloc(sizeof(*o));
	struct ks_error err;
	json_t *good, *list;

	(void)state;
	full_outcome(o);
	good = ks_sanitize_outcome_to_json(o);
	assert_non_null(good);

	/* not an outcome at all */
	assert_int_equal(ks_sanitize_outcome_from_json(NULL, o, &err), -1);
	assert_contains(err.msg, "sanitizer outcome");
	list = json_array();
	assert_int_equal(ks_sanitize_outcome_from_json(list, o, &err), -1);
	assert_contains(err.msg, "sanitizer outcome: expected an object, got a list");
	json_decref(list);

	/* a status that is not one of ks_sanitize_status_name()'s (ok is the profiler's) */
	assert_refused(good, "", "status", json_string("ok"), "status: \"ok\" is not one of \"clean\"");
	assert_refused(good, "", "status", json_false(), "status: expected a string, got a boolean");
	assert_refused(good, "", "status", NULL, "status: missing");

	/* missing, or of the wrong type */
	assert_refused(good, "", "why", json_null(), "why: expected a string, got null");
	assert_refused(good, "", "held_s", NULL, "held_s: missing");
	assert_refused(good, "", "held_s", json_string("long"), "held_s: expected a number");
	assert_refused(good, "", "check", NULL, "check: missing");
	assert_refused(good, "", "check", json_array(), "check: expected an object, got a list");
	assert_refused(good, "check", "version", NULL, "check.version: missing");
	assert_refused(good, "check", "tools", json_string("memcheck"), "check.tools: expected a list");
	assert_refused(good, "check.tools", "0", json_integer(1), "check.tools[0]: expected a string");
	assert_refused(good, "check", "workloads", NULL, "check.workloads: missing");
	assert_refused(good, "check", "errors", json_real(2.0), "check.errors: expected an integer");
	assert_refused(good, "check", "first_tool", NULL, "check.first_tool: missing");
	assert_refused(good, "check", "smem_bytes", json_string("48K"),
		       "check.smem_bytes: expected an integer");
	assert_refused(good, "check", "seconds", json_string("fast"), "check.seconds: expected a number");
	assert_refused(good, "check", "first", json_stringn("a\0b", 3), "check.first: holds a NUL byte");

	/* text longer than its array: refused, not cut */
	assert_refused(good, "", "why", text_of_length(KS_ERROR_MAX), "why: 4096 bytes");
	assert_refused(good, "check", "version", text_of_length(64), "check.version: 64 bytes");
	assert_refused(good, "check.tools", "1", text_of_length(16), "check.tools[1]: 16 bytes");
	assert_refused(good, "check.workloads", "31", text_of_length(64), "check.workloads[31]: 64 bytes");
	assert_refused(good, "check", "first", text_of_length(512), "check.first: 512 bytes");
	assert_refused(good, "check", "first_tool", text_of_length(16), "check.first_tool: 16 bytes");

	/* more tools or workloads than the struct keeps */
	assert_refused(good, "check", "tools", json_pack("[s, s, s]", "memcheck", "racecheck", "initcheck"),
		       "check.tools: 3 entries, more than the 2 kept");
	list = json_deep_copy(json_object_get(json_object_get(good, "check"), "workloads"));
	json_array_append_new(list, json_string("one_more"));
	assert_refused(good, "check", "workloads", list,
		       "check.workloads: 33 entries, more than the 32 kept");

	/* a negative count or duration, a count the struct cannot hold */
	assert_refused(good, "check", "errors", json_integer(-1), "check.errors: -1 is negative");
	assert_refused(good, "check", "errors", json_integer((json_int_t)UINT_MAX + 1),
		       "check.errors: 4294967296 is more than 4294967295");
	assert_refused(good, "check", "smem_bytes", json_integer(-49152),
		       "check.smem_bytes: -49152 is negative");
	assert_refused(good, "check", "seconds", json_real(-0.25), "check.seconds: -0.25 is negative");

	/*
	 * A number that is not finite cannot arrive (jansson neither reads nor
	 * makes one), so the sender is where it is refused.
	 */
	assert_null(json_loads("{\"seconds\": -1e999}", 0, NULL));
	o->check.seconds = NAN;
	assert_null(ks_sanitize_outcome_to_json(o));
	full_outcome(o);
	o->held_s = -INFINITY;
	assert_null(ks_sanitize_outcome_to_json(o));
	full_outcome(o);
	snprintf(o->check.workloads[3], sizeof(o->check.workloads[3]), "not UTF-8: \xc3");
	assert_null(ks_sanitize_outcome_to_json(o));
	full_outcome(o);
	o->check.n_tools = 3;
	assert_null(ks_sanitize_outcome_to_json(o));

	json_decref(good);
	free(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memcheck_errors_are_counted_and_the_first_named),
		cmocka_unit_test(test_racecheck_errors_count_and_warnings_do_not),
		cmocka_unit_test(test_device_not_supported_is_unavailable_not_an_error),
		cmocka_unit_test(test_only_the_sanitizers_own_lines_count),
		cmocka_unit_test(test_the_check_runs_tools_in_turn),
		cmocka_unit_test(test_a_sanitizer_outcome_comes_back_whole),
		cmocka_unit_test(test_a_malformed_sanitizer_outcome_is_refused_by_field),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
