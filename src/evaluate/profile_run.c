/*
 * profile_run.c - `ksearch __profile_run`: the process ncu profiles, and
 * the one compute-sanitizer checks (see profile.h and sanitize.h).  For
 * the profiler it runs one candidate's launch sequence on one workload:
 * once to warm up, once inside the profiler's window; for the sanitizer
 * (--plain), once on each workload it is given.  No verification and no
 * timing happen here; the candidate was verified and timed by a worker
 * before, and nothing this process measures or survives feeds a timing.
 */
#include "ksearch/evaluate/profile.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "ksearch/base/fs.h"
#include "ksearch/base/hash.h"
#include "ksearch/base/random.h"
#include "ksearch/base/util.h"
#include "ksearch/compile/build.h"
#include "ksearch/evaluate/cuda.h"
#include "ksearch/evaluate/gpukit.h"
#include "ksearch/evaluate/launch.h"
#include "ksearch/op/candidate.h"

#define MAX_BUFFERS 64
#define MAX_WORKLOADS 64

struct runner {
	const struct ks_cuda *cu;
	struct ks_gpukit *kit;
	CUstream stream;
	struct ks_op op;
	struct ks_candidate cand;
	struct ks_build build;
	struct ks_plan plan;
	int64_t *params;
	CUmodule module;
	CUfunction fns[KS_PROFILE_MAX_KERNELS];
	CUdeviceptr inputs[MAX_BUFFERS], outputs[MAX_BUFFERS], scratch[MAX_BUFFERS];
	double scalars[MAX_BUFFERS];
	char device[256], arch[16];
	const char *workload; /* the one being run, for messages */
	long long smem_bytes; /* the most shared memory a launch used */
};

static int cuda_fail(struct ks_error *err, CUresult rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int cuda_fail(struct ks_error *err, CUresult rc, const char *fmt, ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return ks_fail(err, "%s: %s", what, ks_cuda_strerror(rc));
}

/*
 * The workload's inputs from the op's generators, split as split says,
 * every seed drawn from the OS: a kernel that could tell it runs under the
 * sanitizer (or the profiler) from a structure or values it knows could
 * behave there and write outside its buffers elsewhere.  The profiler
 * takes uniform splits, so that counters compare between profiles (a
 * kernel with a CTA per request moves data faster on an even one); the
 * sanitizer a kind at random, as likely as any the timing uses.
 *
 * Every buffer is allocated at its exact size, with nothing around it:
 * memcheck sees only accesses outside every allocation, so a guard band
 * inside one would hide the overflow it exists to catch.
 */
static int make_inputs(struct runner *r, const struct ks_workload *wl, enum ks_split split,
		       struct ks_error *err)
{
	uint64_t structure = ks_os_random64();

	if (r->op.n_inputs > MAX_BUFFERS || r->op.n_outputs > MAX_BUFFERS || r->plan.n_scratch > MAX_BUFFERS)
		return ks_fail(err, "%s: more buffers than the profile runner handles", r->op.key);
	for (size_t i = 0; i < r->op.n_inputs; i++) {
		const struct ks_tensor *t = &r->op.inputs[i];
		const struct ks_generator *gen = &wl->generators[i];
		int structural = gen->kind == KS_GEN_INDPTR || gen->kind == KS_GEN_PAGE_PERMUTATION;
		uint64_t seed = structural ? ks_mix64_pair(structure, i + 1) : ks_os_random64();
		int64_t numel;
		CUresult rc;

		if (t->is_scalar) {
			r->scalars[i] = ks_gpukit_scalar(gen, seed);
			continue;
		}
		if (ks_tensor_numel(t, wl, &numel, err) < 0)
			return -1;
		rc = r->cu->mem_alloc(&r->inputs[i], numel ? (size_t)numel * ks_dtype_size(t->dtype) : 256);
		if (rc != CUDA_SUCCESS)
			return cuda_fail(err, rc, "allocating input %s", t->name);
		if (numel && ks_gpukit_generate_split(r->kit, r->inputs[i], t->dtype, numel, gen, &wl->axes,
						      seed, split, err) < 0)
			return -1;
	}
	for (size_t i = 0; i < r->op.n_outputs; i++) {
		int64_t numel;
		CUresult rc;

		if (ks_tensor_numel(&r->op.outputs[i], wl, &numel, err) < 0)
			return -1;
		rc = r->cu->mem_alloc(&r->outputs[i],
				      numel ? (size_t)numel * ks_dtype_size(r->op.outputs[i].dtype) : 256);
		if (rc != CUDA_SUCCESS)
			return cuda_fail(err, rc, "allocating output %s", r->op.outputs[i].name);
	}
	for (size_t i = 0; i < r->plan.n_scratch; i++) {
		CUresult rc = r->cu->mem_alloc(
			&r->scratch[i], r->plan.scratch_bytes[i] ? (size_t)r->plan.scratch_bytes[i] : 256);

		if (rc != CUDA_SUCCESS)
			return cuda_fail(err, rc, "allocating scratch '%s' of %lld bytes",
					 r->cand.scratch[i].name, (long long)r->plan.scratch_bytes[i]);
	}
	return 0;
}

/* Compile the candidate for this GPU and load it, with the dynamic shared memory its launches need. */
static int load(struct runner *r, struct ks_error *err)
{
	struct ks_error why;
	CUresult rc;

	ks_error_clear(&why);
	/*
	 * In a child, as the search builds (compiler.h): in a process that has
	 * loaded the driver, as this one has, NVRTC may leave out ptxas's
	 * resource report, and the build would refuse the candidate.
	 */
	if (ks_build(&r->cand, &r->op, r->params, r->arch, KS_BUILD_ISOLATED, &r->build, &why) < 0) {
		*err = why;
		return -1;
	}
	if (r->build.verdict != KS_VERDICT_OK)
		return ks_fail(err, "%s does not build (%s): %s", r->cand.path,
			       ks_verdict_name(r->build.verdict), why.msg);
	if (r->cand.n_launches > KS_PROFILE_MAX_KERNELS)
		return ks_fail(err, "%zu launches (the profile runner handles %d)", r->cand.n_launches,
			       KS_PROFILE_MAX_KERNELS);
	rc = r->cu->module_load_data(&r->module, r->build.compiled.cubin);
	if (rc != CUDA_SUCCESS) {
		r->module = NULL;
		return cuda_fail(err, rc, "loading the compiled module");
	}
	for (size_t i = 0; i < r->cand.n_launches; i++) {
		rc = r->cu->module_get_function(&r->fns[i], r->module, r->cand.launches[i].kernel);
		if (rc != CUDA_SUCCESS)
			return cuda_fail(err, rc, "kernel '%s'", r->cand.launches[i].kernel);
		/* the configuration it was timed in (worker.c, program_set_smem()) */
		rc = r->cu->func_set_attribute(r->fns[i], CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
					       CU_SHAREDMEM_CARVEOUT_MAX_SHARED);
		if (rc != CUDA_SUCCESS)
			return cuda_fail(err, rc, "kernel '%s': the largest shared-memory carveout",
					 r->cand.launches[i].kernel);
		if (r->build.launches && i < r->build.n_launches && r->build.launches[i].smem > r->smem_bytes)
			r->smem_bytes = r->build.launches[i].smem;
	}
	return 0;
}

/* The dynamic shared memory the launches need on the workload of r->plan, and their clusters. */
static int set_dynamic_smem(struct runner *r, struct ks_error *err)
{
	for (size_t i = 0; i < r->cand.n_launches; i++) {
		int64_t dynamic = r->plan.launches[i].smem;
		CUresult rc = ks_cuda_allow_cluster(r->cu, r->fns[i]);

		if (rc != CUDA_SUCCESS)
			return cuda_fail(err, rc, "kernel '%s': allowing its cluster of more than 8 CTAs",
					 r->cand.launches[i].kernel);
		if (dynamic > r->smem_bytes)
			r->smem_bytes = dynamic;
		if (dynamic <= 48 * 1024)
			continue;
		rc = r->cu->func_set_attribute(r->fns[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					       (int)dynamic);
		if (rc != CUDA_SUCCESS)
			return cuda_fail(err, rc, "kernel '%s': %lld bytes of dynamic shared memory",
					 r->cand.launches[i].kernel, (long long)dynamic);
	}
	return 0;
}

static void free_buffers(struct runner *r)
{
	for (size_t i = 0; r->cu && i < MAX_BUFFERS; i++) {
		if (r->inputs[i])
			r->cu->mem_free(r->inputs[i]);
		if (r->outputs[i])
			r->cu->mem_free(r->outputs[i]);
		if (r->scratch[i])
			r->cu->mem_free(r->scratch[i]);
		r->inputs[i] = r->outputs[i] = r->scratch[i] = 0;
	}
}

static int run_once(struct runner *r, const struct ks_workload *wl, const char *what, struct ks_error *err)
{
	struct ks_launch_buffers bufs = { r->inputs, r->scalars, r->outputs, r->scratch };
	struct ks_launch_error why;
	CUresult rc;

	if (ks_launch_sequence(r->cu, r->stream, &r->op, &r->cand, r->fns, &r->plan, wl, &bufs, &why) < 0)
		return why.cuda_rc != CUDA_SUCCESS ? cuda_fail(err, why.cuda_rc, "%s", why.what)
						   : ks_fail(err, "%s", why.what);
	rc = r->cu->stream_synchronize(r->stream);
	if (rc != CUDA_SUCCESS)
		return cuda_fail(err, rc, "workload %s: %s", wl->id, what);
	return 0;
}

/* One workload: its plan and inputs, the launches (twice for the profiler), then its buffers go. */
static int run_workload(struct runner *r, const struct ks_profile_runner_args *a,
			const struct ks_workload *wl, struct ks_error *err)
{
	CUresult rc;
	int ret = -1;

	r->workload = wl->id;
	if (ks_plan_resolve(&r->cand, &r->op, wl, r->params, &r->plan, err) < 0)
		return -1;
	if (set_dynamic_smem(r, err) < 0 ||
	    make_inputs(r, wl,
			a->plain ? (enum ks_split)(ks_os_random64() % KS_SPLIT_COUNT) : KS_SPLIT_UNIFORM,
			err) < 0)
		goto cleanup;
	rc = r->cu->stream_synchronize(r->stream);
	if (rc != CUDA_SUCCESS) {
		cuda_fail(err, rc, "workload %s: making the inputs", wl->id);
		goto cleanup;
	}
	if (a->plain) {
		ret = run_once(r, wl, "running the candidate", err);
		goto cleanup;
	}
	/* warm: the first launch of a module pays for loading it */
	if (run_once(r, wl, "running the candidate (warm-up)", err) < 0)
		goto cleanup;
	rc = r->cu->profiler_start();
	if (rc != CUDA_SUCCESS) {
		cuda_fail(err, rc, "starting the profiler's window");
		goto cleanup;
	}
	if (run_once(r, wl, "running the candidate under the profiler", err) < 0)
		goto cleanup;
	rc = r->cu->profiler_stop();
	if (rc != CUDA_SUCCESS) {
		cuda_fail(err, rc, "closing the profiler's window");
		goto cleanup;
	}
	ret = 0;
cleanup:
	free_buffers(r);
	ks_plan_release(&r->plan);
	memset(&r->plan, 0, sizeof(r->plan));
	return ret;
}

static int run(struct runner *r, const struct ks_profile_runner_args *a, struct ks_error *err)
{
	const struct ks_workload *wls[MAX_WORKLOADS];
	struct ks_gpu_info gpu;
	char *source = NULL;
	size_t len;
	int ret = -1;

	if (ks_op_load(a->op_dir, &r->op, err) < 0 || ks_read_file(a->source_file, &source, &len, err) < 0)
		goto cleanup;
	if (ks_candidate_parse(a->path, source, &r->cand, err) < 0 ||
	    ks_candidate_bind(&r->cand, &r->op, err) < 0)
		goto cleanup;
	r->params = ks_calloc(r->cand.n_params ? r->cand.n_params : 1, sizeof(*r->params));
	ks_params_first(&r->cand, r->params);
	if (ks_params_assign(&r->cand, a->params, a->n_params, r->params, err) < 0)
		goto cleanup;
	if (!a->n_workloads || a->n_workloads > MAX_WORKLOADS || (!a->plain && a->n_workloads != 1)) {
		ks_fail(err, "expected %s workloads, got %zu", a->plain ? "1 to 64" : "exactly 1",
			a->n_workloads);
		goto cleanup;
	}
	for (size_t i = 0; i < a->n_workloads; i++) {
		if (!(wls[i] = ks_op_workload(&r->op, a->workloads[i]))) {
			ks_fail(err, "no workload '%s' in %s", a->workloads[i], r->op.key);
			goto cleanup;
		}
	}
	if (ks_cuda_load(&r->cu, err) < 0 || ks_cuda_device_info(a->gpu, &gpu, err) < 0 ||
	    ks_gpukit_open(&r->kit, r->cu, a->gpu, err) < 0)
		goto cleanup;
	snprintf(r->device, sizeof(r->device), "%s", gpu.name);
	ks_gpu_arch(&gpu, r->arch, sizeof(r->arch));
	r->stream = ks_gpukit_stream(r->kit);
	if (!a->plain && (!r->cu->profiler_start || !r->cu->profiler_stop)) {
		ks_fail(err,
			"this driver has no cuProfilerStart: the profiler cannot be told what to measure");
		goto cleanup;
	}
	if (load(r, err) < 0)
		goto cleanup;
	for (size_t i = 0; i < a->n_workloads; i++)
		if (run_workload(r, a, wls[i], err) < 0)
			goto cleanup;
	ret = 0;
cleanup:
	free(source);
	return ret;
}

static void release(struct runner *r)
{
	free_buffers(r);
	if (r->module)
		r->cu->module_unload(r->module);
	ks_gpukit_close(r->kit);
	ks_build_release(&r->build);
	ks_plan_release(&r->plan);
	ks_candidate_release(&r->cand);
	ks_op_release(&r->op);
	free(r->params);
}

/* What the runner says when its deadline passes: made before, written by the signal handler. */
static const char *deadline_file;
static char deadline_text[256];

static void on_deadline(int sig)
{
	int fd = open(deadline_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	(void)sig;
	if (fd >= 0) {
		if (write(fd, deadline_text, strlen(deadline_text)) < 0) {
			/* nothing more can be done from here */
		}
		close(fd);
	}
	_exit(4);
}

/* Send fd to /dev/null. */
static int silence(int fd)
{
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

	if (null < 0 || dup2(null, fd) < 0)
		return -1;
	if (null != fd)
		close(null);
	return 0;
}

int ks_profile_runner_main(const struct ks_profile_runner_args *a)
{
	struct runner r;
	struct ks_error err;
	json_t *result;
	int ok;

	/* a child of ncu: it goes when ncu goes, and ends itself at its deadline, saying so */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/*
	 * Device printf lands on stdout, which is ncu's output: a kernel could
	 * print counters of its choosing there.  Nothing it prints is kept.
	 * Under the sanitizer, stderr goes too: its text (an error names the
	 * candidate's kernels) could otherwise sit beside the sanitizer's own.
	 */
	if (silence(STDOUT_FILENO) < 0) {
		fprintf(stderr, "ksearch __profile_run: cannot send stdout to /dev/null\n");
		return 3;
	}
	if (a->plain && silence(STDERR_FILENO) < 0)
		return 3;
	if (a->deadline_s > 0) {
		deadline_file = a->result_file;
		snprintf(deadline_text, sizeof(deadline_text),
			 "{\"ok\": false, \"error\": \"the candidate did not finish within %d s under the "
			 "%s (its time limit here)\"}",
			 a->deadline_s, a->plain ? "sanitizer" : "profiler");
		signal(SIGALRM, on_deadline);
		alarm((unsigned)a->deadline_s);
	}
	memset(&r, 0, sizeof(r));
	ks_error_clear(&err);
	ok = run(&r, a, &err) == 0;
	if (ok) {
		json_t *workloads = json_array();

		for (size_t i = 0; i < a->n_workloads; i++)
			json_array_append_new(workloads, json_string(a->workloads[i]));
		result = json_pack("{s:b, s:s, s:s, s:o, s:I, s:I}", "ok", 1, "device", r.device, "arch",
				   r.arch, "workloads", workloads, "launches", (json_int_t)r.cand.n_launches,
				   "smem_bytes", (json_int_t)r.smem_bytes);
	} else {
		result = json_pack("{s:b, s:s, s:s}", "ok", 0, "error", err.msg, "workload",
				   r.workload ? r.workload : "");
	}
	release(&r);
	if (json_dump_file(result, a->result_file, JSON_COMPACT) < 0) {
		fprintf(stderr, "ksearch __profile_run: cannot write %s\n", a->result_file);
		ok = 0;
	}
	if (!ok)
		fprintf(stderr, "ksearch __profile_run: %s\n", err.msg);
	json_decref(result);
	return ok ? 0 : 3;
}
