/*
 * test_compiler.c - NVRTC in a child process that serves its thread for
 * several compiles (compiler.h).
 *
 * Needs the ksearch binary (KSEARCH) for the child, libnvrtc and the CUDA
 * headers; no GPU.
 */
#include "testlib.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include "ksearch/base/frame.h"
#include "ksearch/base/proc.h"
#include "ksearch/compile/compiler.h"

static const char good_source[] = "extern \"C\" __global__ void k(float *o) { o[threadIdx.x] = SCALE; }\n";

/* NVVM takes seconds over it (about 5 s at DEPTH 30 on one core) */
static const char slow_source[] =
	"template <int N> struct R { __device__ static int f(int x) "
	"{ return R<N - 1>::f(x) * 3 + R<N - 2>::f(x ^ N); } };\n"
	"template <> struct R<1> { __device__ static int f(int x) { return x + 1; } };\n"
	"template <> struct R<0> { __device__ static int f(int x) { return x; } };\n"
	"extern \"C\" __global__ void k(int *o) { o[0] = R<32>::f(o[1]); }\n";

static int setup(void **state)
{
	(void)state;
	if (!getenv("KSEARCH"))
		return 0;
	ks_child_set_program(getenv("KSEARCH"));
	return 0;
}

/* Compile source with SCALE=scale in the thread's child; the result's cubin size, -1 on failure. */
static long compile_in_child(const char *source, int64_t scale, const struct ks_compile_limits *limits,
			     struct ks_error *err)
{
	const struct ks_define defines[] = { { "SCALE", scale } };
	struct ks_compile_request req = {
		.source = source, .source_name = "k.cu", .arch = "sm_80", .defines = defines, .n_defines = 1
	};
	struct ks_compile_result res;
	long size;

	ks_error_clear(err);
	if (ks_compile_isolated(&req, limits, &res, NULL, err) != 0) {
		ks_compile_result_release(&res);
		return -1;
	}
	size = (long)res.cubin_size;
	assert_memory_equal(res.cubin, "\177ELF", 4);
	ks_compile_result_release(&res);
	return size;
}

static int gone(pid_t pid)
{
	return kill(pid, 0) < 0 && errno == ESRCH;
}

/* The child serving this thread after a clean compile (the test skips without the ksearch binary). */
static pid_t serving_child(void)
{
	struct ks_error err;

	if (!getenv("KSEARCH"))
		skip();
	assert_true(compile_in_child(good_source, 2, NULL, &err) > 0);
	assert_true(ks_compile_process() > 0);
	return ks_compile_process();
}

/* The same child compiles again, and gives what a fresh one would. */
static void a_child_serves_its_thread_again(void **state)
{
	struct ks_error err;
	pid_t first;
	long a, b;

	(void)state;
	if (!getenv("KSEARCH"))
		skip();
	a = compile_in_child(good_source, 2, NULL, &err);
	assert_true(a > 0);
	first = ks_compile_process();
	assert_true(first > 0);
	b = compile_in_child(good_source, 3, NULL, &err);
	assert_true(b > 0);
	assert_int_equal(ks_compile_process(), first);
	/* a memory limit of its own: a child of its own, and the thread's stays */
	assert_true(compile_in_child(good_source, 2,
				     &(struct ks_compile_limits){ .memory_bytes = (size_t)6 << 30 },
				     &err) == a);
	assert_int_equal(ks_compile_process(), first);
}

/* A compile error ends the child; the next compile starts a new one. */
static void a_compile_error_ends_the_child(void **state)
{
	struct ks_error err;
	pid_t first;

	(void)state;
	first = serving_child();
	assert_int_equal(compile_in_child("extern \"C\" __global__ void k(float *o) { o[0] = nope; }\n", 2,
					  NULL, &err),
			 -1);
	assert_non_null(strstr(err.msg, "nope"));
	assert_int_equal(ks_compile_process(), 0);
	assert_true(gone(first)); /* ended and reaped */
	assert_true(compile_in_child(good_source, 2, NULL, &err) > 0);
	assert_true(ks_compile_process() > 0);
	assert_true(ks_compile_process() != first);
}

/* After KS_COMPILE_SERVES clean compiles the child is replaced. */
static void a_child_serves_at_most_its_share(void **state)
{
	struct ks_error err;
	pid_t first;

	(void)state;
	if (!getenv("KSEARCH"))
		skip();
	/* start from a fresh child: a failed compile ends the one there is */
	assert_int_equal(compile_in_child("#error stop\n", 1, NULL, &err), -1);
	assert_true(compile_in_child(good_source, 1, NULL, &err) > 0);
	first = ks_compile_process();
	for (int i = 2; i < KS_COMPILE_SERVES; i++) {
		assert_true(compile_in_child(good_source, i, NULL, &err) > 0);
		assert_int_equal(ks_compile_process(), first);
	}
	assert_true(compile_in_child(good_source, KS_COMPILE_SERVES, NULL, &err) > 0);
	assert_int_equal(ks_compile_process(), 0);
	assert_true(gone(first));
}

/* A child that died between two compiles (the OOM killer) is replaced: the candidate does not pay. */
static void a_child_that_died_idle_is_replaced(void **state)
{
	struct ks_error err;
	pid_t first;

	(void)state;
	first = serving_child();
	assert_int_equal(kill(first, SIGKILL), 0);
	usleep(100000);
	assert_true(compile_in_child(good_source, 2, NULL, &err) > 0);
	assert_true(ks_compile_process() > 0);
	assert_true(ks_compile_process() != first);
}

/* The deadline holds for a served child: killed, and the next compile has a new one. */
static void a_served_child_past_its_deadline_is_killed(void **state)
{
	struct ks_error err;
	pid_t first;
	int64_t t0;

	(void)state;
	first = serving_child();
	t0 = ks_now_ms();
	assert_int_equal(
		compile_in_child(slow_source, 2, &(struct ks_compile_limits){ .timeout_ms = 1000 }, &err),
		-1);
	assert_true(ks_now_ms() - t0 < 20000);
	assert_non_null(strstr(err.msg, "ran past its time limit (1 s)"));
	assert_int_equal(ks_compile_process(), 0);
	assert_true(gone(first));
	assert_true(compile_in_child(good_source, 2, NULL, &err) > 0);
}

/*
 * The child's CPU limit counts from each request: one that served before
 * is not killed for the CPU its earlier compiles took, and one request
 * cannot take more than its own seconds.
 */
static void the_cpu_limit_counts_from_each_request(void **state)
{
	const char *const args[] = { "__compile", NULL };
	struct ks_child child;
	struct ks_error err;
	json_t *reply = NULL;
	struct ks_blob *blobs = NULL;
	size_t n = 0;
	int ok = 0, status = 0;

	(void)state;
	if (!getenv("KSEARCH"))
		skip();
	assert_int_equal(ks_child_spawn(&child, args, NULL, &err), 0);
	for (int i = 0; i < 3; i++) {
		json_t *req =
			json_pack("{s:s, s:s, s:s, s:[[si]], s:i}", "source", good_source, "source_name",
				  "k.cu", "arch", "sm_80", "defines", "SCALE", i, "cpu_seconds", 1);

		assert_int_equal(ks_frame_write(child.to_child, ks_now_ms() + 5000, req, NULL, 0, &err), 0);
		assert_int_equal(
			ks_frame_read(child.from_child, ks_now_ms() + 60000, &reply, &blobs, &n, &err),
			KS_FRAME_OK);
		assert_int_equal(json_unpack(reply, "{s:b}", "ok", &ok), 0);
		assert_true(ok);
		json_decref(req);
		json_decref(reply);
		ks_blobs_free(blobs, n);
	}
	{
		json_t *req = json_pack("{s:s, s:s, s:s, s:[], s:i}", "source", slow_source, "source_name",
					"k.cu", "arch", "sm_80", "defines", "cpu_seconds", 1);

		assert_int_equal(ks_frame_write(child.to_child, ks_now_ms() + 5000, req, NULL, 0, &err), 0);
		assert_int_equal(
			ks_frame_read(child.from_child, ks_now_ms() + 60000, &reply, &blobs, &n, &err),
			KS_FRAME_EOF);
		json_decref(req);
	}
	ks_child_finish(&child, 5000, &status);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGXCPU);
}

static void *compile_in_a_thread(void *arg)
{
	struct ks_error err;
	pid_t *pid = arg;

	if (compile_in_child(good_source, 2, NULL, &err) > 0)
		*pid = ks_compile_process();
	return NULL;
}

/* Each thread has a child of its own, which ends with the thread. */
static void a_thread_has_its_own_child_until_it_ends(void **state)
{
	pthread_t t;
	pid_t mine, theirs = 0;

	(void)state;
	mine = serving_child();
	assert_int_equal(pthread_create(&t, NULL, compile_in_a_thread, &theirs), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(theirs > 0);
	assert_true(theirs != mine);
	assert_true(gone(theirs));
	assert_int_equal(ks_compile_process(), mine);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_child_serves_its_thread_again),
		cmocka_unit_test(a_compile_error_ends_the_child),
		cmocka_unit_test(a_child_serves_at_most_its_share),
		cmocka_unit_test(a_child_that_died_idle_is_replaced),
		cmocka_unit_test(a_served_child_past_its_deadline_is_killed),
		cmocka_unit_test(the_cpu_limit_counts_from_each_request),
		cmocka_unit_test(a_thread_has_its_own_child_until_it_ends),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
