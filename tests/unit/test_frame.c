/*
 * test_frame.c - the framed protocol between ksearch and its children:
 * round trips, deadlines on both reads and writes (no side can hang on a
 * peer that stopped listening), malformed frames, and the reply channel of
 * a real child (replies on KS_CHILD_REPLY_FD; stdout is not a channel).
 */
#include "testlib.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>

#include "ksearch/base/frame.h"
#include "ksearch/base/proc.h"

static void round_trip_with_blobs(void **state)
{
	int fds[2];
	json_t *msg = json_pack("{s:s, s:i}", "type", "eval", "job", 7), *got = NULL;
	char blob_a[] = "cubin bytes", blob_b[1000];
	struct ks_blob blobs[2] = { { blob_a, sizeof(blob_a) }, { blob_b, sizeof(blob_b) } },
		       *read_blobs = NULL;
	size_t n = 0;
	struct ks_error err;

	(void)state;
	memset(blob_b, 0x5a, sizeof(blob_b));
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(ks_frame_write(fds[1], ks_now_ms() + 1000, msg, blobs, 2, &err), 0);
	assert_int_equal(ks_frame_read(fds[0], ks_now_ms() + 1000, &got, &read_blobs, &n, &err), KS_FRAME_OK);
	assert_true(json_equal(msg, got));
	assert_int_equal(n, 2);
	assert_int_equal(read_blobs[0].size, sizeof(blob_a));
	assert_memory_equal(read_blobs[1].data, blob_b, sizeof(blob_b));
	json_decref(msg);
	json_decref(got);
	ks_blobs_free(read_blobs, n);
	close(fds[0]);
	close(fds[1]);
}

/* A reader that never reads: the write gives up at its deadline instead of blocking for ever. */
static void write_to_a_peer_that_stopped_reading_times_out(void **state)
{
	int fds[2];
	size_t big = 4 << 20;
	char *data = calloc(1, big);
	struct ks_blob blob = { data, big };
	json_t *msg = json_pack("{s:s}", "type", "eval");
	struct ks_error err;
	int64_t t0;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK), 0);
	t0 = ks_now_ms();
	assert_int_equal(ks_frame_write(fds[1], t0 + 300, msg, &blob, 1, &err), -1);
	assert_true(ks_now_ms() - t0 >= 250);
	assert_true(ks_now_ms() - t0 < 5000);
	assert_non_null(strstr(err.msg, "stopped reading"));
	json_decref(msg);
	free(data);
	close(fds[0]);
	close(fds[1]);
}

static void read_waits_until_its_deadline(void **state)
{
	int fds[2];
	json_t *msg = NULL;
	struct ks_blob *blobs = NULL;
	size_t n = 0;
	struct ks_error err;
	int64_t t0;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	t0 = ks_now_ms();
	assert_int_equal(ks_frame_read(fds[0], t0 + 200, &msg, &blobs, &n, &err), KS_FRAME_TIMEOUT);
	assert_true(ks_now_ms() - t0 >= 150);
	close(fds[1]);
	assert_int_equal(ks_frame_read(fds[0], ks_now_ms() + 200, &msg, &blobs, &n, &err), KS_FRAME_EOF);
	close(fds[0]);
}

/* What a kernel printing on a worker's stdout would produce, or worse: refused, never trusted. */
static void malformed_frames_are_errors(void **state)
{
	static const struct {
		const char *bytes;
		size_t len;
		const char *why;
	} cases[] = {
		{ "KSF2\x02\0\0\0\0\0\0\0{}", 14, "bad magic" },
		{ "KSF1\xff\xff\xff\x7f\0\0\0\0", 12, "JSON over the bound" },
		{ "KSF1\x02\0\0\0\x09\0\0\0", 12, "too many blobs" },
		{ "KSF1\x05\0\0\0\0\0\0\0{oops", 17, "not JSON" },
		{ "KSF1\x02\0\0\0\x01\0\0\0\xff\xff\xff\xff\xff\xff\xff\xff{}", 22, "blob over the bound" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int fds[2];
		json_t *msg = NULL;
		struct ks_blob *blobs = NULL;
		size_t n = 0;
		struct ks_error err;

		assert_int_equal(pipe(fds), 0);
		assert_int_equal(write(fds[1], cases[i].bytes, cases[i].len), (ssize_t)cases[i].len);
		close(fds[1]);
		if (ks_frame_read(fds[0], ks_now_ms() + 500, &msg, &blobs, &n, &err) == KS_FRAME_OK)
			fail_msg("case '%s' was read as a frame", cases[i].why);
		assert_null(msg);
		close(fds[0]);
	}
}

/*
 * A real child (ksearch __compile): its reply arrives on the reply pipe,
 * and nothing it might write on stdout could take that pipe's place.
 */
static void a_child_replies_on_its_own_pipe(void **state)
{
	const char *const args[] = { "__compile", NULL };
	struct ks_child child;
	json_t *req = json_pack("{s:s, s:s, s:s, s:[]}", "source", "extern \"C\" __global__ void k() {}\n",
				"source_name", "k.cu", "arch", "sm_80", "defines"),
	       *reply = NULL;
	struct ks_blob *blobs = NULL;
	size_t n = 0;
	struct ks_error err;
	int ok = 0;

	(void)state;
	if (!getenv("KSEARCH"))
		skip();
	ks_child_set_program(getenv("KSEARCH"));
	assert_int_equal(ks_child_spawn(&child, args, NULL, &err), 0);
	assert_true(fcntl(child.to_child, F_GETFL) & O_NONBLOCK);
	assert_int_equal(ks_frame_write(child.to_child, ks_now_ms() + 5000, req, NULL, 0, &err), 0);
	assert_int_equal(ks_frame_read(child.from_child, ks_now_ms() + 120000, &reply, &blobs, &n, &err),
			 KS_FRAME_OK);
	assert_int_equal(json_unpack(reply, "{s:b}", "ok", &ok), 0);
	assert_true(ok);
	ks_child_finish(&child, 5000, NULL);
	json_decref(req);
	json_decref(reply);
	ks_blobs_free(blobs, n);
}

/*
 * A signal sent to every process of a job (scancel --signal, kill on the
 * group) is for the coordinator: a child it reaches goes on with its work
 * (the coordinator ends its children itself).
 */
static void a_child_ignores_the_signals_meant_for_the_job(void **state)
{
	const char *const args[] = { "__compile", NULL };
	struct ks_child child;
	json_t *req = json_pack("{s:s, s:s, s:s, s:[]}", "source", "extern \"C\" __global__ void k() {}\n",
				"source_name", "k.cu", "arch", "sm_80", "defines"),
	       *reply = NULL;
	struct ks_blob *blobs = NULL;
	size_t n = 0;
	struct ks_error err;
	int ok = 0;

	(void)state;
	if (!getenv("KSEARCH"))
		skip();
	ks_child_set_program(getenv("KSEARCH"));
	assert_int_equal(ks_child_spawn(&child, args, NULL, &err), 0);
	assert_int_equal(kill(child.pid, SIGTERM), 0);
	assert_int_equal(kill(child.pid, SIGINT), 0);
	assert_int_equal(kill(child.pid, SIGHUP), 0);
	assert_int_equal(ks_frame_write(child.to_child, ks_now_ms() + 5000, req, NULL, 0, &err), 0);
	assert_int_equal(ks_frame_read(child.from_child, ks_now_ms() + 120000, &reply, &blobs, &n, &err),
			 KS_FRAME_OK);
	assert_int_equal(json_unpack(reply, "{s:b}", "ok", &ok), 0);
	assert_true(ok);
	ks_child_finish(&child, 5000, NULL);
	json_decref(req);
	json_decref(reply);
	ks_blobs_free(blobs, n);
}

/* A child spawned with limits.nice runs that much nicer than its parent (compilers yield). */
static void a_child_runs_at_the_nice_value_asked(void **state)
{
	const char *const args[] = { "__compile", NULL };
	struct ks_child_limits limits = { .nice = 7 };
	struct ks_child child;
	char path[64], stat[1024], *close_paren, *p;
	long fields[16];
	int parent_nice, child_nice = -100;
	struct ks_error err;
	FILE *f;

	(void)state;
	if (!getenv("KSEARCH"))
		skip();
	errno = 0;
	parent_nice = getpriority(PRIO_PROCESS, 0);
	assert_int_equal(errno, 0);
	ks_child_set_program(getenv("KSEARCH"));
	assert_int_equal(ks_child_spawn(&child, args, &limits, &err), 0);
	/* it waits for its request on stdin; the 19th field of its stat is its nice value */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)child.pid);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(stat, sizeof(stat), f));
	fclose(f);
	close_paren = strrchr(stat, ')');
	assert_non_null(close_paren);
	/* after the name: state, then 16 numbers, of which the last is the nice value */
	p = close_paren + 3;
	for (int i = 0; i < 16; i++)
		fields[i] = strtol(p, &p, 10);
	child_nice = (int)fields[15];
	assert_int_equal(child_nice, parent_nice + 7 > 19 ? 19 : parent_nice + 7);
	ks_child_kill(&child);
}

static void a_child_runs_on_the_cpus_asked(void **state)
{
	const char *const args[] = { "__compile", NULL };
	struct ks_child_limits limits = { 0 };
	struct ks_child child;
	cpu_set_t mine, one, got;
	struct ks_error err;
	int first = -1;

	(void)state;
	if (!getenv("KSEARCH"))
		skip();
	assert_int_equal(sched_getaffinity(0, sizeof(mine), &mine), 0);
	for (int c = CPU_SETSIZE - 1; c >= 0 && first < 0; c--)
		if (CPU_ISSET(c, &mine))
			first = c;
	CPU_ZERO(&one);
	CPU_SET(first, &one);
	limits.cpus = &one;
	ks_child_set_program(getenv("KSEARCH"));
	assert_int_equal(ks_child_spawn(&child, args, &limits, &err), 0);
	/* set between fork and exec: the exec'd child has it */
	assert_int_equal(sched_getaffinity(child.pid, sizeof(got), &got), 0);
	assert_int_equal(CPU_COUNT(&got), 1);
	assert_true(CPU_ISSET(first, &got));
	ks_child_kill(&child);
	/* and without them, the parent's */
	assert_int_equal(ks_child_spawn(&child, args, NULL, &err), 0);
	assert_int_equal(sched_getaffinity(child.pid, sizeof(got), &got), 0);
	assert_true(CPU_EQUAL(&got, &mine));
	ks_child_kill(&child);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip_with_blobs),
		cmocka_unit_test(write_to_a_peer_that_stopped_reading_times_out),
		cmocka_unit_test(read_waits_until_its_deadline),
		cmocka_unit_test(malformed_frames_are_errors),
		cmocka_unit_test(a_child_replies_on_its_own_pipe),
		cmocka_unit_test(a_child_ignores_the_signals_meant_for_the_job),
		cmocka_unit_test(a_child_runs_at_the_nice_value_asked),
		cmocka_unit_test(a_child_runs_on_the_cpus_asked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
