/*
 * worker.c - the GPU evaluator process: verification and timing that no
 * kernel can fool (see worker.h for the protocol and its guarantees).
 */
#include "ksearch/evaluate/worker.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ksearch/op/candidate.h"
#include "ksearch/evaluate/compare.h"
#include "ksearch/evaluate/cuda.h"
#include "ksearch/base/frame.h"
#include "ksearch/evaluate/gpukit.h"
#include "ksearch/compile/nvrtc.h"
#include "ksearch/op/op.h"
#include "ksearch/base/util.h"
#include "ksearch/op/verdict.h"

/* A time this far under the floor cannot be real (the floor's bandwidth is a copy kernel's). */
#define SOL_IMPLAUSIBLE 1.25

/* A loaded program: a candidate or the reference. */
struct program {
	const struct ks_candidate *cand;
	const int64_t *params;
	CUmodule module;
	CUfunction fns[16];
};

/* The device buffers of one workload and one input set. */
struct inputs {
	CUdeviceptr *ptr; /* 0 for scalars */
	size_t *bytes;
	double *scalar; /* scalar inputs' values */
	uint64_t *sum;	/* checksums after generation */
};

struct outputs {
	CUdeviceptr *ptr;
	size_t *bytes;
	int64_t *numel;
};

struct scratch {
	CUdeviceptr ptr[16];
	size_t bytes[16];
	size_t n;
};

struct settings {
	int trials; /* input sets per check workload */
	int min_reps, max_reps, warmup;
	int time_cap_ms; /* per benchmark workload */
	int timing_sets; /* input sets rotated while timing */
};

struct worker {
	int out_fd;
	const struct ks_cuda *cu;
	struct ks_gpukit *kit;
	CUstream stream;
	struct ks_device_profile prof;
	CUevent start, stop;
	/* the operator of the last job, its reference and the reference's times */
	char *op_dir;
	struct ks_op op;
	struct ks_candidate ref_cand;
	struct program ref;
	double *ref_us; /* per benchmark workload; < 0: not measured yet */
};

/* What ends a job early: the verdict (not ok) with its evidence. */
struct outcome {
	enum ks_verdict verdict;
	int internal; /* ksearch's own failure, not the candidate's */
	char evidence[KS_ERROR_MAX];
};

static uint64_t mix64(uint64_t a, uint64_t b)
{
	uint64_t z = a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int fail_cuda(struct outcome *oc, enum ks_verdict verdict, CUresult rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Record a failure; CUDA's words go last so the evidence reads "what: why". */
static int fail_cuda(struct outcome *oc, enum ks_verdict verdict, CUresult rc, const char *fmt, ...)
{
	char what[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	oc->verdict = verdict;
	if (rc != CUDA_SUCCESS)
		snprintf(oc->evidence, sizeof(oc->evidence), "%s: %s", what, ks_cuda_strerror(rc));
	else
		snprintf(oc->evidence, sizeof(oc->evidence), "%s", what);
	return -1;
}

static int fail_internal(struct outcome *oc, const char *msg)
{
	oc->internal = 1;
	oc->verdict = KS_VERDICT_CRASH;
	snprintf(oc->evidence, sizeof(oc->evidence), "%s", msg);
	return -1;
}

static void send_msg(struct worker *w, json_t *msg)
{
	struct ks_error err;

	if (ks_frame_write(w->out_fd, msg, NULL, 0, &err) < 0) {
		/* the coordinator is gone: nothing left to work for */
		json_decref(msg);
		exit(1);
	}
	json_decref(msg);
}

/* Tell the coordinator how long the next step may take before it should give up on us. */
static void announce(struct worker *w, double seconds)
{
	send_msg(w, json_pack("{s:s, s:I}", "type", "deadline", "ms", (json_int_t)(seconds * 1000.0)));
}

/* ---- buffers ---- */

static void inputs_free(struct worker *w, const struct ks_op *op, struct inputs *in)
{
	if (!in->ptr)
		return;
	for (size_t i = 0; i < op->n_inputs; i++)
		if (in->ptr[i])
			w->cu->mem_free(in->ptr[i]);
	free(in->ptr);
	free(in->bytes);
	free(in->scalar);
	free(in->sum);
	memset(in, 0, sizeof(*in));
}

/*
 * Generate a workload's inputs.  Values come from seed; the structure
 * (indptr lengths, page permutations) from structure_seed, so that timed
 * input sets differ in their data but not in their shape: a random split
 * of the KV lengths changes a kernel's time, and every candidate of a run
 * (and the reference) must be timed on the same one.
 */
static int inputs_make(struct worker *w, const struct ks_op *op, const struct ks_workload *wl, uint64_t seed,
		       uint64_t structure_seed, struct inputs *in, struct outcome *oc)
{
	struct ks_error err;

	in->ptr = ks_calloc(op->n_inputs, sizeof(*in->ptr));
	in->bytes = ks_calloc(op->n_inputs, sizeof(*in->bytes));
	in->scalar = ks_calloc(op->n_inputs, sizeof(*in->scalar));
	in->sum = ks_calloc(op->n_inputs, sizeof(*in->sum));
	for (size_t i = 0; i < op->n_inputs; i++) {
		const struct ks_tensor *t = &op->inputs[i];
		enum ks_generator_kind kind = wl->generators[i].kind;
		int structural = kind == KS_GEN_INDPTR || kind == KS_GEN_PAGE_PERMUTATION;
		uint64_t s = mix64(structural ? structure_seed : seed, i + 1);
		int64_t numel;
		CUresult rc;

		if (t->is_scalar) {
			in->scalar[i] = ks_gpukit_scalar(&wl->generators[i], s);
			continue;
		}
		if (ks_tensor_numel(t, wl, &numel, &err) < 0)
			return fail_internal(oc, err.msg);
		in->bytes[i] = (size_t)numel * ks_dtype_size(t->dtype);
		rc = w->cu->mem_alloc(&in->ptr[i], in->bytes[i] ? in->bytes[i] : 16);
		if (rc != CUDA_SUCCESS) {
			in->ptr[i] = 0;
			snprintf(err.msg, sizeof(err.msg), "cannot allocate input %s (%zu bytes): %s",
				 t->name, in->bytes[i], ks_cuda_strerror(rc));
			return fail_internal(oc, err.msg);
		}
		if (ks_gpukit_generate(w->kit, in->ptr[i], t->dtype, numel, &wl->generators[i], &wl->axes, s,
				       &err) < 0)
			return fail_internal(oc, err.msg);
		if (ks_gpukit_checksum(w->kit, in->ptr[i], in->bytes[i], &in->sum[i], &err) < 0)
			return fail_internal(oc, err.msg);
	}
	return 0;
}

/* After a candidate ran: did it write into any input? */
static int inputs_unchanged(struct worker *w, const struct ks_op *op, const struct ks_workload *wl,
			    const struct inputs *in, struct outcome *oc)
{
	struct ks_error err;

	for (size_t i = 0; i < op->n_inputs; i++) {
		uint64_t sum;

		if (!in->ptr[i])
			continue;
		if (ks_gpukit_checksum(w->kit, in->ptr[i], in->bytes[i], &sum, &err) < 0)
			return fail_cuda(oc, KS_VERDICT_CRASH, CUDA_SUCCESS, "workload %s: %s", wl->id,
					 err.msg);
		if (sum != in->sum[i])
			return fail_cuda(
				oc, KS_VERDICT_WRONG, CUDA_SUCCESS,
				"workload %s: the candidate wrote into its input '%s' (inputs are read-only)",
				wl->id, op->inputs[i].name);
	}
	return 0;
}

static void outputs_free(struct worker *w, const struct ks_op *op, struct outputs *out)
{
	if (!out->ptr)
		return;
	for (size_t i = 0; i < op->n_outputs; i++)
		if (out->ptr[i])
			w->cu->mem_free(out->ptr[i]);
	free(out->ptr);
	free(out->bytes);
	free(out->numel);
	memset(out, 0, sizeof(*out));
}

static int outputs_make(struct worker *w, const struct ks_op *op, const struct ks_workload *wl,
			struct outputs *out, struct outcome *oc)
{
	struct ks_error err;

	out->ptr = ks_calloc(op->n_outputs, sizeof(*out->ptr));
	out->bytes = ks_calloc(op->n_outputs, sizeof(*out->bytes));
	out->numel = ks_calloc(op->n_outputs, sizeof(*out->numel));
	for (size_t i = 0; i < op->n_outputs; i++) {
		CUresult rc;

		if (ks_tensor_numel(&op->outputs[i], wl, &out->numel[i], &err) < 0)
			return fail_internal(oc, err.msg);
		out->bytes[i] = (size_t)out->numel[i] * ks_dtype_size(op->outputs[i].dtype);
		rc = w->cu->mem_alloc(&out->ptr[i], out->bytes[i] ? out->bytes[i] : 16);
		if (rc != CUDA_SUCCESS) {
			out->ptr[i] = 0;
			snprintf(err.msg, sizeof(err.msg), "cannot allocate output %s (%zu bytes): %s",
				 op->outputs[i].name, out->bytes[i], ks_cuda_strerror(rc));
			return fail_internal(oc, err.msg);
		}
	}
	return 0;
}

static void scratch_free(struct worker *w, struct scratch *s)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->ptr[i])
			w->cu->mem_free(s->ptr[i]);
	memset(s, 0, sizeof(*s));
}

/* Scratch is the candidate's request: failing to satisfy it is the candidate's problem. */
static int scratch_make(struct worker *w, const struct program *prog, const struct ks_plan *plan,
			struct scratch *s, struct outcome *oc)
{
	s->n = plan->n_scratch;
	for (size_t i = 0; i < plan->n_scratch; i++) {
		CUresult rc;

		s->bytes[i] = (size_t)plan->scratch_bytes[i];
		rc = w->cu->mem_alloc(&s->ptr[i], s->bytes[i] ? s->bytes[i] : 16);
		if (rc != CUDA_SUCCESS) {
			s->ptr[i] = 0;
			return fail_cuda(oc, KS_VERDICT_REFUSED, rc,
					 "cannot allocate scratch '%s' of %zu bytes",
					 prog->cand->scratch[i].name, s->bytes[i]);
		}
	}
	return 0;
}

/* NaN bytes in everything the program writes, so unwritten elements fail. */
static int poison(struct worker *w, const struct ks_op *op, const struct outputs *out,
		  const struct scratch *s, struct outcome *oc)
{
	struct ks_error err;

	for (size_t i = 0; i < op->n_outputs; i++)
		if (out->bytes[i] && ks_gpukit_poison(w->kit, out->ptr[i], out->bytes[i], &err) < 0)
			return fail_internal(oc, err.msg);
	for (size_t i = 0; i < s->n; i++)
		if (s->bytes[i] && ks_gpukit_poison(w->kit, s->ptr[i], s->bytes[i], &err) < 0)
			return fail_internal(oc, err.msg);
	return 0;
}

/* ---- programs ---- */

static int program_load(struct worker *w, struct program *prog, const void *image, struct outcome *oc)
{
	CUresult rc = w->cu->module_load_data(&prog->module, image);

	if (rc != CUDA_SUCCESS) {
		prog->module = NULL;
		return fail_cuda(oc, KS_VERDICT_CRASH, rc, "loading the compiled module");
	}
	for (size_t i = 0; i < prog->cand->n_launches && i < 16; i++) {
		rc = w->cu->module_get_function(&prog->fns[i], prog->module, prog->cand->launches[i].kernel);
		if (rc != CUDA_SUCCESS)
			return fail_cuda(oc, KS_VERDICT_CONTRACT_ERROR, rc, "kernel '%s'",
					 prog->cand->launches[i].kernel);
	}
	return 0;
}

static void program_unload(struct worker *w, struct program *prog)
{
	if (prog->module)
		w->cu->module_unload(prog->module);
	prog->module = NULL;
}

/* Allow each kernel the most dynamic shared memory any workload asks of it. */
static int program_set_smem(struct worker *w, struct program *prog, const struct ks_op *op,
			    struct outcome *oc)
{
	const struct ks_workload *lists[2] = { op->workloads, op->check_workloads };
	size_t counts[2] = { op->n_workloads, op->n_check_workloads };
	int64_t most[16] = { 0 };
	struct ks_error err;

	for (int l = 0; l < 2; l++) {
		for (size_t k = 0; k < counts[l]; k++) {
			struct ks_plan plan;

			if (ks_plan_resolve(prog->cand, op, &lists[l][k], prog->params, &plan, &err) < 0)
				return fail_cuda(oc, KS_VERDICT_CONTRACT_ERROR, CUDA_SUCCESS, "%s", err.msg);
			for (size_t i = 0; i < plan.n_launches && i < 16; i++)
				if (plan.launches[i].smem > most[i])
					most[i] = plan.launches[i].smem;
			ks_plan_release(&plan);
		}
	}
	for (size_t i = 0; i < prog->cand->n_launches && i < 16; i++) {
		CUresult rc;

		if (most[i] <= 48 * 1024)
			continue;
		rc = w->cu->func_set_attribute(prog->fns[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					       (int)most[i]);
		if (rc != CUDA_SUCCESS)
			return fail_cuda(oc, KS_VERDICT_REFUSED, rc,
					 "kernel '%s' asks for %lld bytes of dynamic shared memory; this GPU "
					 "allows %d per block",
					 prog->cand->launches[i].kernel, (long long)most[i],
					 w->prof.max_smem_per_block_optin);
	}
	return 0;
}

/* Queue the program's launches on the stream; no synchronization. */
static int program_launch(struct worker *w, const struct program *prog, const struct ks_plan *plan,
			  const struct ks_workload *wl, const struct inputs *in, const struct outputs *out,
			  const struct scratch *s, struct outcome *oc)
{
	const struct ks_op *op = &w->op;

	for (size_t l = 0; l < prog->cand->n_launches; l++) {
		const struct ks_launch *launch = &prog->cand->launches[l];
		const struct ks_launch_dims *d = &plan->launches[l];
		union {
			CUdeviceptr ptr;
			float f32;
			double f64;
			int32_t i32;
			int64_t i64;
			uint16_t u16;
		} slots[64];
		void *args[64];
		CUresult rc;

		if (launch->n_args > 64)
			return fail_cuda(oc, KS_VERDICT_CONTRACT_ERROR, CUDA_SUCCESS,
					 "launch[%zu] has %zu arguments (at most 64)", l, launch->n_args);
		for (size_t a = 0; a < launch->n_args; a++) {
			const struct ks_arg *arg = &launch->args[a];

			switch (arg->kind) {
			case KS_ARG_INPUT:
				slots[a].ptr = in->ptr[arg->index];
				break;
			case KS_ARG_OUTPUT:
				slots[a].ptr = out->ptr[arg->index];
				break;
			case KS_ARG_SCRATCH:
				slots[a].ptr = s->ptr[arg->index];
				break;
			case KS_ARG_AXIS: {
				int64_t v = 0;

				ks_env_get(&wl->axes, op->axes[arg->index].name, &v);
				slots[a].i32 = (int32_t)v;
				break;
			}
			case KS_ARG_SCALAR: {
				double v = in->scalar[arg->index];

				switch (op->inputs[arg->index].dtype) {
				case KS_DTYPE_FLOAT32:
					slots[a].f32 = (float)v;
					break;
				case KS_DTYPE_INT32:
					slots[a].i32 = (int32_t)v;
					break;
				case KS_DTYPE_INT64:
					slots[a].i64 = (int64_t)v;
					break;
				case KS_DTYPE_BFLOAT16: {
					float f = (float)v;
					uint32_t bits;

					memcpy(&bits, &f, 4);
					slots[a].u16 = (uint16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
					break;
				}
				case KS_DTYPE_FLOAT16:
					return fail_internal(oc,
							     "float16 scalar inputs are not supported yet");
				}
				break;
			}
			}
			args[a] = &slots[a];
		}
		rc = w->cu->launch_kernel(prog->fns[l], (unsigned)d->grid[0], (unsigned)d->grid[1],
					  (unsigned)d->grid[2], (unsigned)d->block[0], (unsigned)d->block[1],
					  (unsigned)d->block[2], (unsigned)d->smem, w->stream, args, NULL);
		if (rc != CUDA_SUCCESS)
			return fail_cuda(oc, KS_VERDICT_CRASH, rc, "workload %s: launching %s", wl->id,
					 launch->kernel);
	}
	return 0;
}

static int sync_stream(struct worker *w, const char *what, const struct ks_workload *wl, struct outcome *oc)
{
	CUresult rc = w->cu->stream_synchronize(w->stream);

	if (rc != CUDA_SUCCESS)
		return fail_cuda(oc, KS_VERDICT_CRASH, rc, "workload %s: %s", wl->id, what);
	return 0;
}

/* Copy every output to the host (malloc'd arrays the caller frees). */
static int download(struct worker *w, const struct ks_op *op, const struct outputs *out, void **host,
		    const struct ks_workload *wl, struct outcome *oc)
{
	for (size_t i = 0; i < op->n_outputs; i++) {
		CUresult rc;

		host[i] = ks_malloc(out->bytes[i] ? out->bytes[i] : 1);
		rc = w->cu->memcpy_dtoh(host[i], out->ptr[i], out->bytes[i]);
		if (rc != CUDA_SUCCESS)
			return fail_cuda(oc, KS_VERDICT_CRASH, rc, "workload %s: reading output %s", wl->id,
					 op->outputs[i].name);
	}
	return 0;
}

static void host_free(void **host, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(host[i]);
		host[i] = NULL;
	}
}

static int compare_all(const struct ks_op *op, void **got, void **ref, const struct outputs *out,
		       const struct ks_workload *wl, const char *when, struct outcome *oc)
{
	for (size_t i = 0; i < op->n_outputs; i++) {
		const struct ks_tensor *t = &op->outputs[i];
		struct ks_compare_report report;
		char text[2048];

		if (ks_compare(t->dtype, got[i], ref[i], out->numel[i], t->atol, t->rtol, &report))
			continue;
		ks_compare_describe(&report, t->name, text, sizeof(text));
		return fail_cuda(oc, KS_VERDICT_WRONG, CUDA_SUCCESS, "workload %s%s: %s", wl->id, when, text);
	}
	return 0;
}

/* ---- the reference ---- */

static void drop_op(struct worker *w)
{
	program_unload(w, &w->ref);
	ks_candidate_release(&w->ref_cand);
	ks_op_release(&w->op);
	free(w->op_dir);
	free(w->ref_us);
	free((void *)w->ref.params);
	w->op_dir = NULL;
	w->ref_us = NULL;
	memset(&w->ref, 0, sizeof(w->ref));
}

/* Load the op and build its reference (trusted code: compiled here, in-process). */
static int use_op(struct worker *w, const char *op_dir, struct outcome *oc)
{
	struct ks_compile_request req = { 0 };
	struct ks_compile_result res = { 0 };
	struct ks_error err;
	int64_t *params;

	if (w->op_dir && !strcmp(w->op_dir, op_dir))
		return 0;
	drop_op(w);
	if (ks_op_load(op_dir, &w->op, &err) < 0 ||
	    ks_candidate_load(w->op.reference_path, &w->ref_cand, &err) < 0 ||
	    ks_candidate_bind(&w->ref_cand, &w->op, &err) < 0)
		return fail_internal(oc, err.msg);
	params = ks_calloc(w->ref_cand.n_params ? w->ref_cand.n_params : 1, sizeof(*params));
	ks_params_first(&w->ref_cand, params);
	w->ref.cand = &w->ref_cand;
	w->ref.params = params;
	req.source = w->ref_cand.source;
	req.source_name = w->ref_cand.path;
	req.arch = w->prof.arch;
	req.resources_optional = 1;
	if (ks_nvrtc_compile(&req, &res, &err) < 0) {
		ks_compile_result_release(&res);
		return fail_internal(oc, err.msg);
	}
	if (program_load(w, &w->ref, res.cubin, oc) < 0 || program_set_smem(w, &w->ref, &w->op, oc) < 0) {
		ks_compile_result_release(&res);
		oc->internal = 1;
		return -1;
	}
	ks_compile_result_release(&res);
	w->ref_us = ks_calloc(w->op.n_workloads, sizeof(*w->ref_us));
	for (size_t i = 0; i < w->op.n_workloads; i++)
		w->ref_us[i] = -1;
	w->op_dir = ks_strdup(op_dir);
	return 0;
}

/*
 * Run the reference on in and bring its outputs home; its device outputs
 * are freed before the function returns, so the candidate can never see
 * them.  *seconds gets the wall time of the run.
 */
static int reference_outputs(struct worker *w, const struct ks_workload *wl, const struct inputs *in,
			     void **host, double *seconds, struct outcome *oc)
{
	struct outputs out = { 0 };
	struct scratch s = { 0 };
	struct ks_plan plan = { 0 };
	struct ks_error err;
	double t0;
	int ret = -1;

	if (ks_plan_resolve(w->ref.cand, &w->op, wl, w->ref.params, &plan, &err) < 0) {
		fail_internal(oc, err.msg);
		goto cleanup;
	}
	if (outputs_make(w, &w->op, wl, &out, oc) < 0 || scratch_make(w, &w->ref, &plan, &s, oc) < 0 ||
	    poison(w, &w->op, &out, &s, oc) < 0)
		goto internal;
	t0 = now_s();
	if (program_launch(w, &w->ref, &plan, wl, in, &out, &s, oc) < 0 ||
	    sync_stream(w, "running the reference", wl, oc) < 0)
		goto internal;
	*seconds = now_s() - t0;
	if (download(w, &w->op, &out, host, wl, oc) < 0)
		goto internal;
	/* the reference must produce finite values everywhere, or nothing can be judged */
	for (size_t i = 0; i < w->op.n_outputs; i++) {
		struct ks_compare_report report;

		if (!ks_compare(w->op.outputs[i].dtype, host[i], host[i], out.numel[i], 0, 0, &report)) {
			char text[1024];

			ks_compare_describe(&report, w->op.outputs[i].name, text, sizeof(text));
			snprintf(err.msg, sizeof(err.msg),
				 "workload %s: the reference produced non-finite values: %s", wl->id, text);
			fail_internal(oc, err.msg);
			goto cleanup;
		}
	}
	ret = 0;
	goto cleanup;
internal:
	oc->internal = 1;
cleanup:
	outputs_free(w, &w->op, &out);
	scratch_free(w, &s);
	ks_plan_release(&plan);
	return ret;
}

/* ---- correctness ---- */

static int check_workload(struct worker *w, const struct program *cand, const struct ks_workload *wl,
			  uint64_t seed, const struct settings *set, struct outcome *oc)
{
	struct ks_plan plan = { 0 };
	struct ks_error err;
	int ret = -1;

	if (ks_plan_resolve(cand->cand, &w->op, wl, cand->params, &plan, &err) < 0)
		return fail_cuda(oc, KS_VERDICT_CONTRACT_ERROR, CUDA_SUCCESS, "%s", err.msg);
	for (int trial = 0; trial < set->trials; trial++) {
		struct inputs in = { 0 };
		struct outputs out = { 0 };
		struct scratch s = { 0 };
		void *ref[16] = { 0 }, *got[16] = { 0 };
		double ref_s = 0;
		int ok = 0;

		announce(w, 120);
		uint64_t trial_seed = mix64(seed, (uint64_t)trial);

		if (inputs_make(w, &w->op, wl, trial_seed, trial_seed, &in, oc) < 0 ||
		    reference_outputs(w, wl, &in, ref, &ref_s, oc) < 0)
			goto trial_done;
		/* the candidate gets a hundred times the reference's time, and a few seconds */
		announce(w, 5 + 100 * ref_s);
		if (outputs_make(w, &w->op, wl, &out, oc) < 0 || scratch_make(w, cand, &plan, &s, oc) < 0 ||
		    poison(w, &w->op, &out, &s, oc) < 0 ||
		    program_launch(w, cand, &plan, wl, &in, &out, &s, oc) < 0 ||
		    sync_stream(w, "running the candidate", wl, oc) < 0 ||
		    inputs_unchanged(w, &w->op, wl, &in, oc) < 0 ||
		    download(w, &w->op, &out, got, wl, oc) < 0)
			goto trial_done;
		ok = compare_all(&w->op, got, ref, &out, wl, trial ? " (second input set)" : "", oc) == 0;
	trial_done:
		host_free(ref, w->op.n_outputs);
		host_free(got, w->op.n_outputs);
		outputs_free(w, &w->op, &out);
		scratch_free(w, &s);
		inputs_free(w, &w->op, &in);
		if (!ok)
			goto cleanup;
	}
	ret = 0;
cleanup:
	ks_plan_release(&plan);
	return ret;
}

/* ---- timing ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double quantile(const double *sorted, int n, double q)
{
	double pos = q * (n - 1);
	int lo = (int)pos;

	if (lo + 1 >= n)
		return sorted[n - 1];
	return sorted[lo] + (pos - lo) * (sorted[lo + 1] - sorted[lo]);
}

struct stats {
	double median, p10, p90, min;
	int reps;
};

static void summarize(double *samples, int n, struct stats *st)
{
	qsort(samples, (size_t)n, sizeof(*samples), cmp_double);
	st->median = quantile(samples, n, 0.5);
	st->p10 = quantile(samples, n, 0.1);
	st->p90 = quantile(samples, n, 0.9);
	st->min = samples[0];
	st->reps = n;
}

/*
 * Time prog on the input sets: every repetition poisons what the program
 * writes (so no repetition can reuse the last one's results), flushes the
 * L2, and times the launch sequence alone with events.  Repeats until the
 * median stops moving or the time cap.
 */
static int time_program(struct worker *w, const struct program *prog, const struct ks_plan *plan,
			const struct ks_workload *wl, struct inputs *sets, int n_sets,
			const struct outputs *out, const struct scratch *s, const struct settings *set,
			int *last_set, struct stats *st, struct outcome *oc)
{
	double *samples = ks_calloc((size_t)set->max_reps, sizeof(*samples));
	double *sorted = ks_calloc((size_t)set->max_reps, sizeof(*sorted));
	double t_start = now_s(), last_median = -1;
	struct ks_error err;
	int n = 0, ret = -1, stable = 0;

	/* warm up until the clocks have settled: a few runs and at least 20 ms */
	for (int i = 0; i < set->warmup || now_s() - t_start < 0.02; i++) {
		if (program_launch(w, prog, plan, wl, &sets[i % n_sets], out, s, oc) < 0 ||
		    sync_stream(w, "warming up", wl, oc) < 0)
			goto cleanup;
		if (now_s() - t_start > set->time_cap_ms / 2000.0)
			break; /* a slow kernel: its timed runs need the time more */
	}
	t_start = now_s();
	while (n < set->max_reps) {
		int k = n % n_sets;
		float ms = 0;
		CUresult rc;

		if (poison(w, &w->op, out, s, oc) < 0 || ks_gpukit_flush_l2(w->kit, &err) < 0) {
			if (!oc->evidence[0])
				fail_internal(oc, err.msg);
			goto cleanup;
		}
		rc = w->cu->event_record(w->start, w->stream);
		if (rc != CUDA_SUCCESS) {
			fail_cuda(oc, KS_VERDICT_CRASH, rc, "workload %s: recording an event", wl->id);
			goto cleanup;
		}
		if (program_launch(w, prog, plan, wl, &sets[k], out, s, oc) < 0)
			goto cleanup;
		rc = w->cu->event_record(w->stop, w->stream);
		if (rc == CUDA_SUCCESS)
			rc = w->cu->event_synchronize(w->stop);
		if (rc == CUDA_SUCCESS)
			rc = w->cu->event_elapsed_time(&ms, w->start, w->stop);
		if (rc != CUDA_SUCCESS) {
			fail_cuda(oc, KS_VERDICT_CRASH, rc, "workload %s: timed run %d", wl->id, n + 1);
			goto cleanup;
		}
		samples[n++] = ms * 1000.0;
		*last_set = k;
		if (n >= 3 && now_s() - t_start > set->time_cap_ms / 1000.0)
			break;
		if (n >= set->min_reps && n % 10 == 0) {
			double median;

			memcpy(sorted, samples, (size_t)n * sizeof(*samples));
			qsort(sorted, (size_t)n, sizeof(*sorted), cmp_double);
			median = quantile(sorted, n, 0.5);
			/* stable: two checks in a row within 0.5% */
			if (last_median > 0 && fabs(median - last_median) <= 0.005 * median) {
				if (++stable >= 2)
					break;
			} else {
				stable = 0;
			}
			last_median = median;
		}
	}
	summarize(samples, n, st);
	ret = 0;
cleanup:
	free(samples);
	free(sorted);
	return ret;
}

struct timing {
	const char *id;
	struct stats cand;
	double ref_median;
	double floor_us;
};

static int time_workload(struct worker *w, const struct program *cand, size_t wi, uint64_t seed,
			 uint64_t structure_seed, const struct settings *set, struct timing *tm,
			 struct outcome *oc)
{
	const struct ks_workload *wl = &w->op.workloads[wi];
	struct inputs sets[4] = { { 0 } };
	void *ref_host[4][16] = { { 0 } }, *got[16] = { 0 };
	struct ks_plan plan = { 0 }, ref_plan = { 0 };
	struct outputs out = { 0 };
	struct scratch s = { 0 };
	struct ks_error err;
	int n_sets = set->timing_sets > 4 ? 4 : set->timing_sets, last = 0, ret = -1;
	double ref_s = 0, slowest_ref_s = 0;

	tm->id = wl->id;
	if (ks_plan_resolve(cand->cand, &w->op, wl, cand->params, &plan, &err) < 0) {
		fail_cuda(oc, KS_VERDICT_CONTRACT_ERROR, CUDA_SUCCESS, "%s", err.msg);
		goto cleanup;
	}
	announce(w, 120);
	for (int k = 0; k < n_sets; k++) {
		if (inputs_make(w, &w->op, wl, mix64(seed, 1000 + (uint64_t)k),
				mix64(structure_seed, hash_str(wl->id)), &sets[k], oc) < 0 ||
		    reference_outputs(w, wl, &sets[k], ref_host[k], &ref_s, oc) < 0)
			goto cleanup;
		if (ref_s > slowest_ref_s)
			slowest_ref_s = ref_s;
	}
	if (w->ref_us[wi] < 0) {
		struct outputs ref_out = { 0 };
		struct scratch ref_s_buf = { 0 };
		struct stats ref_stats;
		int ignored;

		if (ks_plan_resolve(w->ref.cand, &w->op, wl, w->ref.params, &ref_plan, &err) < 0) {
			fail_internal(oc, err.msg);
			goto cleanup;
		}
		announce(w, set->time_cap_ms / 1000.0 + 60 + 10 * slowest_ref_s * set->warmup);
		if (outputs_make(w, &w->op, wl, &ref_out, oc) < 0 ||
		    scratch_make(w, &w->ref, &ref_plan, &ref_s_buf, oc) < 0 ||
		    time_program(w, &w->ref, &ref_plan, wl, sets, n_sets, &ref_out, &ref_s_buf, set, &ignored,
				 &ref_stats, oc) < 0) {
			oc->internal = 1;
			outputs_free(w, &w->op, &ref_out);
			scratch_free(w, &ref_s_buf);
			goto cleanup;
		}
		outputs_free(w, &w->op, &ref_out);
		scratch_free(w, &ref_s_buf);
		w->ref_us[wi] = ref_stats.median;
	}
	tm->ref_median = w->ref_us[wi];

	announce(w, set->time_cap_ms / 1000.0 + 10 + 100 * slowest_ref_s * (set->warmup + 3));
	if (outputs_make(w, &w->op, wl, &out, oc) < 0 || scratch_make(w, cand, &plan, &s, oc) < 0 ||
	    time_program(w, cand, &plan, wl, sets, n_sets, &out, &s, set, &last, &tm->cand, oc) < 0)
		goto cleanup;
	for (int k = 0; k < n_sets; k++)
		if (inputs_unchanged(w, &w->op, wl, &sets[k], oc) < 0)
			goto cleanup;
	/* what the timed runs computed must be right too */
	if (download(w, &w->op, &out, got, wl, oc) < 0 ||
	    compare_all(&w->op, got, ref_host[last], &out, wl, " (output of the timed runs)", oc) < 0)
		goto cleanup;
	{
		int64_t bytes = 0, flops = 0;
		double t_bytes, t_flops;

		if (ks_expr_eval(w->op.min_bytes, &wl->axes, &bytes, &err) < 0 ||
		    ks_expr_eval(w->op.flops, &wl->axes, &flops, &err) < 0) {
			fail_internal(oc, err.msg);
			goto cleanup;
		}
		t_bytes = (double)bytes / (w->prof.dram_gbps * 1e3);
		t_flops = (double)flops / (w->prof.peak_bf16_tflops * 1e6);
		tm->floor_us = t_bytes > t_flops ? t_bytes : t_flops;
	}
	ret = 0;
cleanup:
	host_free(got, w->op.n_outputs);
	for (int k = 0; k < n_sets; k++) {
		host_free(ref_host[k], w->op.n_outputs);
		inputs_free(w, &w->op, &sets[k]);
	}
	outputs_free(w, &w->op, &out);
	scratch_free(w, &s);
	ks_plan_release(&plan);
	ks_plan_release(&ref_plan);
	return ret;
}

/* ---- one job ---- */

static void read_settings(const json_t *job, struct settings *set)
{
	const json_t *v;

	*set = (struct settings){ .trials = 2,
				  .min_reps = 30,
				  .max_reps = 500,
				  .warmup = 3,
				  .time_cap_ms = 300,
				  .timing_sets = 2 };
	if ((v = json_object_get(job, "trials")) && json_integer_value(v) >= 2)
		set->trials = (int)json_integer_value(v);
	if ((v = json_object_get(job, "min_reps")) && json_integer_value(v) >= 3)
		set->min_reps = (int)json_integer_value(v);
	if ((v = json_object_get(job, "max_reps")) && json_integer_value(v) >= set->min_reps)
		set->max_reps = (int)json_integer_value(v);
	if ((v = json_object_get(job, "time_cap_ms")) && json_integer_value(v) > 0)
		set->time_cap_ms = (int)json_integer_value(v);
	if ((v = json_object_get(job, "timing_sets")) && json_integer_value(v) >= 1)
		set->timing_sets = (int)json_integer_value(v);
}

static json_t *launches_json(struct worker *w, const struct program *cand)
{
	json_t *arr = json_array();
	struct ks_plan plan;
	struct ks_error err;

	if (ks_plan_resolve(cand->cand, &w->op, &w->op.workloads[w->op.n_workloads - 1], cand->params, &plan,
			    &err) < 0)
		return arr;
	for (size_t i = 0; i < plan.n_launches; i++) {
		const struct ks_launch_dims *d = &plan.launches[i];
		int blocks = 0, warps_per_block = (int)((d->threads + 31) / 32);
		double occupancy = 0;

		if (w->cu->occupancy_max_active_blocks(&blocks, cand->fns[i], (int)d->threads,
						       (size_t)d->smem) == CUDA_SUCCESS)
			occupancy = (double)blocks * warps_per_block / (w->prof.max_threads_per_sm / 32);
		json_array_append_new(
			arr, json_pack("{s:s, s:i, s:f, s:I, s:I}", "kernel", cand->cand->launches[i].kernel,
				       "blocks_per_sm", blocks, "occupancy", occupancy, "threads",
				       (json_int_t)d->threads, "dynamic_smem", (json_int_t)d->smem));
	}
	ks_plan_release(&plan);
	return arr;
}

static json_t *evaluate(struct worker *w, const json_t *job, const struct ks_blob *cubin, int *crashed)
{
	struct outcome oc = { .verdict = KS_VERDICT_OK };
	struct ks_candidate cand = { 0 };
	struct program prog = { 0 };
	struct settings set;
	struct ks_error err;
	struct timing *timings = NULL;
	json_t *result = NULL, *params_json, *workloads_json = json_array(), *launches = NULL;
	const char *op_dir, *path, *source, *seed_text, *structure_text;
	int64_t *params = NULL;
	uint64_t seed, structure_seed;
	double t0 = now_s(), verify_s = 0, time_s = 0, log_speedup = 0, log_sol = 0;
	size_t n_timed = 0;

	read_settings(job, &set);
	if (json_unpack((json_t *)job, "{s:s, s:s, s:s, s:o, s:s, s:s}", "op_dir", &op_dir, "path", &path,
			"source", &source, "params", &params_json, "seed", &seed_text, "structure_seed",
			&structure_text) ||
	    !json_is_array(params_json)) {
		fail_internal(&oc, "malformed eval job");
		goto done;
	}
	seed = strtoull(seed_text, NULL, 10);
	structure_seed = strtoull(structure_text, NULL, 10);
	if (use_op(w, op_dir, &oc) < 0)
		goto done;
	if (ks_candidate_parse(path, source, &cand, &err) < 0 || ks_candidate_bind(&cand, &w->op, &err) < 0) {
		fail_cuda(&oc, KS_VERDICT_CONTRACT_ERROR, CUDA_SUCCESS, "%s", err.msg);
		goto done;
	}
	if (json_array_size(params_json) != cand.n_params || cand.n_launches > 16) {
		fail_internal(&oc, "eval job: params do not match the candidate");
		goto done;
	}
	params = ks_calloc(cand.n_params ? cand.n_params : 1, sizeof(*params));
	for (size_t i = 0; i < cand.n_params; i++)
		params[i] = json_integer_value(json_array_get(params_json, i));
	prog.cand = &cand;
	prog.params = params;
	seed = mix64(seed, hash_str(source));
	if (program_load(w, &prog, cubin->data, &oc) < 0 || program_set_smem(w, &prog, &w->op, &oc) < 0)
		goto done;
	launches = launches_json(w, &prog);

	for (size_t i = 0; i < w->op.n_check_workloads; i++)
		if (check_workload(w, &prog, &w->op.check_workloads[i], mix64(seed, 7 + i), &set, &oc) < 0)
			goto done;
	verify_s = now_s() - t0;

	timings = ks_calloc(w->op.n_workloads, sizeof(*timings));
	for (size_t i = 0; i < w->op.n_workloads; i++) {
		const json_t *only = json_object_get(job, "workloads");
		int wanted = !json_array_size(only);

		for (size_t k = 0; k < json_array_size(only); k++)
			wanted |= !strcmp(json_string_value(json_array_get(only, k)), w->op.workloads[i].id);
		if (!wanted)
			continue;
		if (time_workload(w, &prog, i, mix64(seed, 100 + i), structure_seed, &set, &timings[n_timed],
				  &oc) < 0)
			goto done;
		n_timed++;
	}
	time_s = now_s() - t0 - verify_s;
	for (size_t i = 0; i < n_timed; i++) {
		const struct timing *tm = &timings[i];
		double speedup = tm->ref_median / tm->cand.median;
		double sol = tm->floor_us / tm->cand.median;

		json_array_append_new(workloads_json,
				      json_pack("{s:s, s:f, s:f, s:f, s:f, s:i, s:f, s:f, s:f, s:f}", "id",
						tm->id, "median_us", tm->cand.median, "p10_us", tm->cand.p10,
						"p90_us", tm->cand.p90, "min_us", tm->cand.min, "reps",
						tm->cand.reps, "ref_median_us", tm->ref_median, "speedup",
						speedup, "floor_us", tm->floor_us, "sol_fraction", sol));
		log_speedup += log(speedup);
		log_sol += log(sol);
		if (sol > SOL_IMPLAUSIBLE && oc.verdict == KS_VERDICT_OK)
			fail_cuda(&oc, KS_VERDICT_IMPLAUSIBLE, CUDA_SUCCESS,
				  "workload %s: %.2f us is %.2fx faster than the speed-of-light floor of "
				  "%.2f us "
				  "(min_bytes over the measured %.0f GB/s); no kernel can do that",
				  tm->id, tm->cand.median, sol, tm->floor_us, w->prof.dram_gbps);
	}
done:
	*crashed = oc.verdict == KS_VERDICT_CRASH && !oc.internal;
	if (oc.internal) {
		result = json_pack("{s:s, s:s}", "type", "result", "internal_error", oc.evidence);
	} else {
		result = json_pack("{s:s, s:s, s:s, s:o, s:f, s:f, s:f, s:f}", "type", "result", "verdict",
				   ks_verdict_name(oc.verdict), "evidence", oc.evidence, "workloads",
				   json_incref(workloads_json), "fitness",
				   oc.verdict == KS_VERDICT_OK && n_timed ? exp(log_speedup / (double)n_timed)
									  : 0.0,
				   "sol_fraction", n_timed ? exp(log_sol / (double)n_timed) : 0.0, "verify_s",
				   verify_s, "time_s", time_s);
		json_object_set_new(result, "launches", launches ? launches : json_array());
		launches = NULL;
	}
	json_decref(launches);
	json_decref(workloads_json);
	free(timings);
	program_unload(w, &prog);
	ks_candidate_release(&cand);
	free(params);
	if (oc.internal) {
		/* a half-evaluated op may have left state behind: start clean next time */
		drop_op(w);
	}
	return result;
}

static json_t *profile_json(const struct ks_device_profile *p)
{
	return json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:i, s:i, s:f, s:f, s:f, s:s}", "name",
			 p->name, "slug", p->slug, "arch", p->arch, "cc_major", p->cc_major, "cc_minor",
			 p->cc_minor, "sm_count", p->sm_count, "l2_bytes", p->l2_bytes, "total_mem",
			 (json_int_t)p->total_mem, "max_smem_per_block_optin", p->max_smem_per_block_optin,
			 "max_threads_per_sm", p->max_threads_per_sm, "dram_gbps", p->dram_gbps,
			 "peak_fp32_tflops", p->peak_fp32_tflops, "peak_bf16_tflops", p->peak_bf16_tflops,
			 "peak_source", p->peak_source);
}

static const char *cache_dir(char *buf, size_t size)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");

	if (getenv("KSEARCH_CACHE"))
		snprintf(buf, size, "%s", getenv("KSEARCH_CACHE"));
	else if (xdg && *xdg)
		snprintf(buf, size, "%s/ksearch/devices", xdg);
	else if (home && *home)
		snprintf(buf, size, "%s/.cache/ksearch/devices", home);
	else
		return NULL;
	return buf;
}

int ks_worker_main(int in_fd, int out_fd, int gpu)
{
	struct worker w = { .out_fd = out_fd };
	struct ks_error err;
	char dir[4096];
	int cached = 0;

	if (ks_cuda_load(&w.cu, &err) < 0 || ks_gpukit_open(&w.kit, w.cu, gpu, &err) < 0 ||
	    ks_gpukit_profile(w.kit, cache_dir(dir, sizeof(dir)), &w.prof, &cached, &err) < 0) {
		send_msg(&w, json_pack("{s:s, s:b, s:s}", "type", "hello", "ok", 0, "error", err.msg));
		return 1;
	}
	w.stream = ks_gpukit_stream(w.kit);
	if (w.cu->event_create(&w.start, CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
	    w.cu->event_create(&w.stop, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
		send_msg(&w, json_pack("{s:s, s:b, s:s}", "type", "hello", "ok", 0, "error",
				       "cannot create CUDA events"));
		return 1;
	}
	send_msg(&w, json_pack("{s:s, s:b, s:o, s:b}", "type", "hello", "ok", 1, "profile",
			       profile_json(&w.prof), "profile_cached", cached));
	for (;;) {
		json_t *msg = NULL, *result;
		struct ks_blob *blobs = NULL;
		size_t n_blobs = 0;
		const char *type;
		int crashed = 0;

		if (ks_frame_read(in_fd, -1, &msg, &blobs, &n_blobs, &err) != KS_FRAME_OK)
			break; /* the coordinator closed our stdin: we are done */
		type = json_string_value(json_object_get(msg, "type"));
		if (type && !strcmp(type, "quit")) {
			json_decref(msg);
			ks_blobs_free(blobs, n_blobs);
			break;
		}
		if (!type || strcmp(type, "eval") || n_blobs < 1) {
			result = json_pack("{s:s, s:s}", "type", "result", "internal_error",
					   "unknown request");
		} else {
			result = evaluate(&w, msg, &blobs[0], &crashed);
		}
		send_msg(&w, result);
		json_decref(msg);
		ks_blobs_free(blobs, n_blobs);
		if (crashed)
			return 3; /* the context is gone: the coordinator starts a fresh worker */
	}
	drop_op(&w);
	ks_gpukit_close(w.kit);
	return 0;
}
