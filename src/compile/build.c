/*
 * build.c - compile a candidate and apply the contract's static checks.
 */
#include "ksearch/compile/build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/compile/compiler.h"
#include "ksearch/compile/includes.h"
#include "ksearch/base/sha256.h"
#include "ksearch/base/util.h"

/* Resolve the plan for every workload: a contract must hold for all of them. */
static int resolve_all(const struct ks_candidate *cand, const struct ks_op *op, const int64_t *params,
		       struct ks_build *out, struct ks_error *err)
{
	const struct ks_workload *lists[2] = { op->workloads, op->check_workloads };
	size_t counts[2] = { op->n_workloads, op->n_check_workloads };

	for (int l = 0; l < 2; l++) {
		for (size_t w = 0; w < counts[l]; w++) {
			struct ks_plan plan;

			if (ks_plan_resolve(cand, op, &lists[l][w], params, &plan, err) < 0)
				return -1;
			for (size_t i = 0; i < plan.n_launches; i++) {
				struct ks_launch_report *r = &out->launches[i];
				const struct ks_launch_dims *d = &plan.launches[i];

				if (d->threads > r->threads)
					r->threads = d->threads;
				if (d->smem > r->dynamic_smem)
					r->dynamic_smem = d->smem;
			}
			ks_plan_release(&plan);
		}
	}
	return 0;
}

static void names_list(struct ks_strbuf *list, char **names, size_t count)
{
	for (size_t i = 0; i < count; i++)
		ks_strbuf_addf(list, "%s'%s'", i ? ", " : "", names[i]);
}

/*
 * The contract's rules about state: nothing a kernel can write may survive
 * the call.  Returns 1 with out->verdict refused, 0 when the module
 * passes.
 */
static int check_state(const struct ks_candidate *cand, const struct ks_ptx_analysis *a, struct ks_build *out,
		       struct ks_error *err)
{
	struct ks_strbuf list;

	if (a->n_forbidden_calls) {
		ks_strbuf_init(&list);
		names_list(&list, a->forbidden_calls, a->n_forbidden_calls);
		ks_fail(err,
			"%s: refused: calls the external function%s %s; a kernel may call only what its "
			"module defines, plus printf and assert (device malloc/free are refused: the device "
			"heap outlives a call, so it could carry results from one call to the next; use a "
			"scratch buffer)",
			cand->path, a->n_forbidden_calls > 1 ? "s" : "", list.buf);
		ks_strbuf_release(&list);
		out->verdict = KS_VERDICT_REFUSED;
		return 1;
	}
	if (!a->n_mutable_globals)
		return 0;
	ks_strbuf_init(&list);
	names_list(&list, a->mutable_globals, a->n_mutable_globals);
	ks_fail(err,
		"%s: refused: mutable global %s (a __device__ or __constant__ variable, string literals "
		"included, that a store can reach): a kernel could keep state in %s between calls and "
		"return results carried from a previous call. Read-only tables (data no store reaches) are "
		"fine; use scratch buffers for working memory",

		cand->path, list.buf, a->n_mutable_globals > 1 ? "them" : "it");
	ks_strbuf_release(&list);
	out->verdict = KS_VERDICT_REFUSED;
	return 1;
}

/* What kind of PTX parameter an argument of the launch plan needs, in words. */
static int arg_fits(const struct ks_op *op, const struct ks_arg *arg, const struct ks_ptx_param *param,
		    const char **want)
{
	int bytes = 8, is_float = 0;

	switch (arg->kind) {
	case KS_ARG_INPUT:
	case KS_ARG_OUTPUT:
	case KS_ARG_SCRATCH:
		*want = "a pointer (8-byte integer: .u64/.s64/.b64)";
		break;
	case KS_ARG_AXIS:
		*want = "an int (.s32/.u32/.b32)";
		bytes = 4;
		break;
	case KS_ARG_SCALAR:
		switch (op->inputs[arg->index].dtype) {
		case KS_DTYPE_FLOAT32:
			*want = "a float (.f32)";
			bytes = 4;
			is_float = 1;
			break;
		case KS_DTYPE_INT32:
			*want = "an int (.s32/.u32/.b32)";
			bytes = 4;
			break;
		case KS_DTYPE_INT64:
			*want = "a 64-bit integer (.s64/.u64/.b64)";
			break;
		case KS_DTYPE_BFLOAT16:
		case KS_DTYPE_FLOAT16:
			*want = "a 16-bit float (a 2-byte value or struct)";
			return param->bytes == 2;
		}
		break;
	}
	if (param->bytes != bytes || param->cls == KS_PTX_PARAM_AGGREGATE)
		return 0;
	if (param->cls == KS_PTX_PARAM_BITS)
		return 1;
	return is_float == (param->cls == KS_PTX_PARAM_FLOAT);
}

static int dims_match(const int64_t *have, const int *want)
{
	return have[0] == want[0] && have[1] == want[1] && have[2] == want[2];
}

/*
 * The launch plan against the binary: each launch passes as many
 * arguments as its kernel takes, each of the kind the kernel declares,
 * and never more threads than its __launch_bounds__ (or other than its
 * .reqntid) on any workload.  Returns 1 with out->verdict contract_error.
 */
static int check_launches(const struct ks_candidate *cand, const struct ks_op *op, const int64_t *params,
			  const struct ks_ptx_analysis *analysis, struct ks_build *out, struct ks_error *err)
{
	const struct ks_workload *lists[2] = { op->workloads, op->check_workloads };
	size_t counts[2] = { op->n_workloads, op->n_check_workloads };
	int ret = 0;

	for (size_t i = 0; i < cand->n_launches && !ret; i++) {
		const struct ks_launch *launch = &cand->launches[i];
		const struct ks_ptx_entry entry = analysis->kernels[i].entry;

		if (entry.n_params != launch->n_args) {
			ks_fail(err,
				"%s: launch[%zu] (%s) passes %zu argument%s, but the kernel takes %zu "
				"parameter%s",
				cand->path, i, launch->kernel, launch->n_args, launch->n_args == 1 ? "" : "s",
				entry.n_params, entry.n_params == 1 ? "" : "s");
			ret = 1;
		}
		for (size_t a = 0; !ret && a < launch->n_args; a++) {
			const char *want = "";

			if (!arg_fits(op, &launch->args[a], &entry.params[a], &want)) {
				ks_fail(err,
					"%s: launch[%zu] (%s) argument %zu '%s' is passed as %s, but the "
					"kernel's "
					"parameter %zu is %s",
					cand->path, i, launch->kernel, a + 1, launch->args[a].name, want,
					a + 1, entry.params[a].type);
				ret = 1;
			}
		}
		for (int l = 0; l < 2 && !ret; l++) {
			for (size_t w = 0; w < counts[l] && !ret; w++) {
				struct ks_plan plan;
				const struct ks_launch_dims *d;
				int64_t bound =
					(int64_t)entry.maxntid[0] * entry.maxntid[1] * entry.maxntid[2];

				if (ks_plan_resolve(cand, op, &lists[l][w], params, &plan, err) < 0)
					return -1; /* resolve_all() resolved it before */
				d = &plan.launches[i];
				if (bound > 0 && d->threads > bound) {
					ks_fail(err,
						"%s: launch[%zu] (%s) runs %lld threads per block on "
						"workload %s, "
						"but the kernel's __launch_bounds__ allow at most %lld",
						cand->path, i, launch->kernel, (long long)d->threads,
						lists[l][w].id, (long long)bound);
					ret = 1;
				} else if (entry.reqntid[0] && !dims_match(d->block, entry.reqntid)) {
					ks_fail(err,
						"%s: launch[%zu] (%s) runs blocks of %lldx%lldx%lld threads "
						"on "
						"workload %s, but the kernel requires %dx%dx%d (.reqntid)",
						cand->path, i, launch->kernel, (long long)d->block[0],
						(long long)d->block[1], (long long)d->block[2],
						lists[l][w].id, entry.reqntid[0], entry.reqntid[1],
						entry.reqntid[2]);
					ret = 1;
				}
				ks_plan_release(&plan);
			}
		}
	}
	if (ret)
		out->verdict = KS_VERDICT_CONTRACT_ERROR;
	return ret;
}

static void compute_descriptors(struct ks_build *out)
{
	double *d = out->descriptors;

	memset(d, 0, sizeof(out->descriptors));
	d[KS_DESC_LAUNCHES] = (double)out->n_launches;
	for (size_t i = 0; i < out->n_launches; i++) {
		const struct ks_launch_report *r = &out->launches[i];

		if ((double)r->smem > d[KS_DESC_SMEM_BYTES])
			d[KS_DESC_SMEM_BYTES] = (double)r->smem;
		if (r->res.registers > d[KS_DESC_REGISTERS])
			d[KS_DESC_REGISTERS] = r->res.registers;
		if (r->desc.tensor_cores > d[KS_DESC_TENSOR_CORES])
			d[KS_DESC_TENSOR_CORES] = r->desc.tensor_cores;
		if (r->desc.async_copy > d[KS_DESC_ASYNC_COPY])
			d[KS_DESC_ASYNC_COPY] = r->desc.async_copy;
		if (r->desc.widest_load_bytes > d[KS_DESC_LOAD_WIDTH])
			d[KS_DESC_LOAD_WIDTH] = r->desc.widest_load_bytes;
		/* the launch with the lowest occupancy is the one occupancy limits */
		if (i == 0 || r->occupancy.fraction < d[KS_DESC_OCCUPANCY])
			d[KS_DESC_OCCUPANCY] = r->occupancy.fraction;
	}
	/*
	 * The measured descriptors' stand-ins, as far as a build knows them:
	 * the theoretical occupancy; the speed-of-light fraction comes with
	 * the timing (backend.c), 0 until then.
	 */
	d[KS_DESC_ACHIEVED_OCCUPANCY] = d[KS_DESC_OCCUPANCY];
	d[KS_DESC_DRAM_FRACTION] = 0;
}

/* ---- the binary's fingerprint ---- */

struct mentions {
	const char *name;
	int found;
};

static void mention_visit(const char *name, void *ctx)
{
	struct mentions *m = ctx;

	if (!strcmp(name, m->name))
		m->found = 1;
}

/* Whether a launch or scratch expression of cand refers to the param called name. */
static int plan_mentions(const struct ks_candidate *cand, const char *name)
{
	struct mentions m = { name, 0 };
	struct ks_error ignored;

	for (size_t i = 0; i < cand->n_launches && !m.found; i++) {
		const struct ks_launch *l = &cand->launches[i];

		for (size_t d = 0; d < l->grid_rank; d++)
			ks_expr_names(l->grid[d], mention_visit, &m, &ignored);
		for (size_t d = 0; d < l->block_rank; d++)
			ks_expr_names(l->block[d], mention_visit, &m, &ignored);
		ks_expr_names(l->smem, mention_visit, &m, &ignored);
	}
	for (size_t i = 0; i < cand->n_scratch && !m.found; i++)
		ks_expr_names(cand->scratch[i].size, mention_visit, &m, &ignored);
	return m.found;
}

/*
 * What the evaluator runs, and nothing else: the architecture, the cubin,
 * the launch plan and scratch as written, and the params those refer to.
 * Params that only reach the code are in the cubin already; a param that
 * changes nothing the GPU sees (a comment, dead code) leaves it alone.
 */
static void fingerprint(const struct ks_candidate *cand, const int64_t *params, const char *arch,
			struct ks_build *out)
{
	struct ks_strbuf sb;

	ks_strbuf_init(&sb);
	ks_strbuf_addf(&sb, "ksearch binary 1\narch %s\ncubin %zu\n", arch, out->compiled.cubin_size);
	ks_strbuf_add(&sb, (const char *)out->compiled.cubin, out->compiled.cubin_size);
	for (size_t i = 0; i < cand->n_launches; i++) {
		const struct ks_launch *l = &cand->launches[i];

		ks_strbuf_addf(&sb, "\nlaunch %s pdl %d grid", l->kernel, l->pdl);
		for (size_t d = 0; d < l->grid_rank; d++)
			ks_strbuf_addf(&sb, " [%s]", l->grid[d]);
		ks_strbuf_adds(&sb, " block");
		for (size_t d = 0; d < l->block_rank; d++)
			ks_strbuf_addf(&sb, " [%s]", l->block[d]);
		ks_strbuf_addf(&sb, " smem [%s] args", l->smem);
		for (size_t a = 0; a < l->n_args; a++)
			ks_strbuf_addf(&sb, " %s:%d:%d", l->args[a].name, (int)l->args[a].kind,
				       l->args[a].index);
	}
	for (size_t i = 0; i < cand->n_scratch; i++)
		ks_strbuf_addf(&sb, "\nscratch %s %s [%s] zeroed %d", cand->scratch[i].name,
			       ks_dtype_name(cand->scratch[i].dtype), cand->scratch[i].size,
			       cand->scratch[i].zeroed);
	for (size_t i = 0; i < cand->n_params; i++)
		if (plan_mentions(cand, cand->params[i].name))
			ks_strbuf_addf(&sb, "\nparam %s=%lld", cand->params[i].name, (long long)params[i]);
	ks_sha256(sb.buf, sb.len, out->binary);
	ks_strbuf_release(&sb);
}

/* The static checks cannot read what the candidate compiled to: refused, since nothing vouches for it. */
static int ptx_unreadable(const struct ks_candidate *cand, struct ks_build *out, struct ks_error *err)
{
	ks_error_prefix(err, "%s: refused: its PTX cannot be checked", cand->path);
	out->verdict = KS_VERDICT_REFUSED;
	return 0;
}

static int check_analysis(const struct ks_candidate *cand, const struct ks_op *op, const int64_t *params,
			  const char *arch, struct ks_ptx_analysis *analysis, struct ks_build *out,
			  struct ks_error *err);

int ks_build(const struct ks_candidate *cand, const struct ks_op *op, const int64_t *params, const char *arch,
	     unsigned flags, struct ks_build *out, struct ks_error *err)
{
	struct ks_define *defines = NULL;
	struct ks_compile_request req;
	struct ks_ptx_analysis analysis = { 0 };
	const char **kernels;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!cand->bound)
		return ks_fail(err, "%s: internal error: candidate not bound to op %s", cand->path, op->key);
	if (ks_arch_limits(arch, &out->limits, err) < 0)
		return -1;
	out->n_launches = cand->n_launches;
	out->launches = ks_calloc(cand->n_launches, sizeof(*out->launches));
	for (size_t i = 0; i < cand->n_launches; i++)
		out->launches[i].kernel = cand->launches[i].kernel;

	{
		char why[KS_ERROR_MAX / 2];

		/* callers filter first (a ruled-out combination is no failure); this is the last line */
		if (!ks_params_allowed(cand, params, why, sizeof(why))) {
			ks_fail(err, "%s: %s: the candidate's constraints rule these params out", cand->path,
				why);
			out->verdict = KS_VERDICT_CONTRACT_ERROR;
			return 0;
		}
	}
	if (resolve_all(cand, op, params, out, err) < 0) {

		out->verdict = KS_VERDICT_CONTRACT_ERROR;
		return 0;
	}

	{
		char why[KS_ERROR_MAX / 2];

		/* before NVRTC runs: it must never open a file the candidate names */
		if (ks_includes_check(cand->source, why, sizeof(why))) {
			ks_fail(err, "%s: refused: %s", cand->path, why);
			out->verdict = KS_VERDICT_REFUSED;
			return 0;
		}
	}

	defines = ks_calloc(cand->n_params, sizeof(*defines));
	for (size_t i = 0; i < cand->n_params; i++) {
		defines[i].name = cand->params[i].name;
		defines[i].value = params[i];
	}
	req = (struct ks_compile_request){
		.source = cand->source,
		.source_name = cand->path,
		.arch = arch,
		.defines = defines,
		.n_defines = cand->n_params,
	};
	kernels = ks_calloc(cand->n_launches ? cand->n_launches : 1, sizeof(*kernels));
	for (size_t i = 0; i < cand->n_launches; i++)
		kernels[i] = cand->launches[i].kernel;
	req.kernels = kernels;
	req.n_kernels = cand->n_launches;
	/*
	 * Isolated, the child reads the PTX too, under the compiler's deadline
	 * and memory limit: whatever a candidate's PTX makes the analysis do
	 * costs that candidate a verdict, never the caller's time.
	 */
	rc = flags & KS_BUILD_ISOLATED ? ks_compile_isolated(&req, NULL, &out->compiled, &analysis, err)
				       : ks_nvrtc_compile(&req, &out->compiled, err);
	free(defines);
	if (rc == 0 && !(flags & KS_BUILD_ISOLATED) &&
	    ks_ptx_analyze(out->compiled.ptx, kernels, cand->n_launches, &analysis, err) < 0)
		rc = 1;
	free(kernels);
	if (rc < 0) {
		if (!out->compiled.log)
			return -1; /* NVRTC itself is unusable: not the candidate's fault */
		out->verdict = KS_VERDICT_COMPILE_ERROR;
		return 0;
	}
	if (rc > 0)
		return ptx_unreadable(cand, out, err);
	rc = check_analysis(cand, op, params, arch, &analysis, out, err);
	ks_ptx_analysis_release(&analysis);
	return rc;
}

/* The static checks on what the candidate compiled to, from the analysis of its PTX. */
static int check_analysis(const struct ks_candidate *cand, const struct ks_op *op, const int64_t *params,
			  const char *arch, struct ks_ptx_analysis *analysis, struct ks_build *out,
			  struct ks_error *err)
{
	for (size_t i = 0; i < cand->n_launches; i++) {
		struct ks_launch_report *r = &out->launches[i];

		if (!analysis->kernels[i].found) {
			ks_fail(err,
				"%s: launch[%zu] names kernel '%s', but the source defines no such "
				"extern \"C\" __global__ function",
				cand->path, i, r->kernel);
			out->verdict = KS_VERDICT_CONTRACT_ERROR;
			return 0;
		}
	}
	if (check_launches(cand, op, params, analysis, out, err) < 0)
		out->verdict = KS_VERDICT_CONTRACT_ERROR; /* a plan resolve_all() resolved: never */
	if (out->verdict != KS_VERDICT_OK || check_state(cand, analysis, out, err))
		return 0;
	/* the evaluator checks these after every run: the build takes them from the analysis */
	out->variables = analysis->variables;
	out->n_variables = analysis->n_variables;
	analysis->variables = NULL;
	analysis->n_variables = 0;

	for (size_t i = 0; i < cand->n_launches; i++) {
		struct ks_launch_report *r = &out->launches[i];
		const struct ks_kernel_resources *res = ks_compile_result_kernel(&out->compiled, r->kernel);

		if (res)
			r->res = *res;
		r->desc = analysis->kernels[i].desc;
		r->smem = r->res.static_smem + r->dynamic_smem;
		if (ks_occupancy_compute(&out->limits, (int)r->threads, r->res.registers, (size_t)r->smem,
					 &r->occupancy, err) < 0) {
			ks_error_prefix(err, "%s: refused: launch[%zu] (%s) cannot run on %s", cand->path, i,
					r->kernel, arch);
			out->verdict = KS_VERDICT_REFUSED;
			return 0;
		}
	}
	compute_descriptors(out);
	fingerprint(cand, params, arch, out);
	out->verdict = KS_VERDICT_OK;
	return 0;
}

void ks_build_release(struct ks_build *build)
{
	if (!build)
		return;
	ks_compile_result_release(&build->compiled);
	free(build->launches);
	ks_ptx_names_free(build->variables, build->n_variables);
	memset(build, 0, sizeof(*build));
}

void ks_build_cell(const struct ks_op *op, const double *descriptors, int *cell)
{
	for (size_t g = 0; g < op->n_grid; g++) {
		const struct ks_grid_axis *axis = &op->grid[g];
		double v = descriptors[axis->descriptor];

		cell[g] = -1;
		for (size_t e = 0; e + 1 < axis->n_edges; e++) {
			if (v >= axis->edges[e] && v < axis->edges[e + 1]) {
				cell[g] = (int)e;
				break;
			}
		}
	}
}
