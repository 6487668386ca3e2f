/*
 * build.c - compile a candidate and apply the contract's static checks.
 */
#include "ksearch/compile/build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/compile/compiler.h"
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

static int check_globals(const struct ks_candidate *cand, struct ks_build *out, struct ks_error *err)
{
	char **names;
	size_t count;
	struct ks_strbuf list;

	if (ks_ptx_mutable_globals(out->compiled.ptx, &names, &count, err) < 0)
		return -1;
	if (!count)
		return 0;
	ks_strbuf_init(&list);
	for (size_t i = 0; i < count; i++)
		ks_strbuf_addf(&list, "%s'%s'", i ? ", " : "", names[i]);
	ks_fail(err,
		"%s: refused: mutable __device__ global %s; a kernel must not keep state between "
		"calls (it could return results carried from a previous call). Use __constant__ for "
		"read-only tables, and scratch buffers for working memory",
		cand->path, list.buf);
	ks_strbuf_release(&list);
	ks_ptx_names_free(names, count);
	out->verdict = KS_VERDICT_REFUSED;
	return 1;
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
}

int ks_build(const struct ks_candidate *cand, const struct ks_op *op, const int64_t *params, const char *arch,
	     unsigned flags, struct ks_build *out, struct ks_error *err)
{
	struct ks_define *defines = NULL;
	struct ks_compile_request req;

	memset(out, 0, sizeof(*out));
	if (!cand->bound)
		return ks_fail(err, "%s: internal error: candidate not bound to op %s", cand->path, op->key);
	if (ks_arch_limits(arch, &out->limits, err) < 0)
		return -1;
	out->n_launches = cand->n_launches;
	out->launches = ks_calloc(cand->n_launches, sizeof(*out->launches));
	for (size_t i = 0; i < cand->n_launches; i++)
		out->launches[i].kernel = cand->launches[i].kernel;

	if (resolve_all(cand, op, params, out, err) < 0) {
		out->verdict = KS_VERDICT_CONTRACT_ERROR;
		return 0;
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
	if ((flags & KS_BUILD_ISOLATED ? ks_compile_isolated(&req, NULL, &out->compiled, err)
				       : ks_nvrtc_compile(&req, &out->compiled, err)) < 0) {
		free(defines);
		if (!out->compiled.log)
			return -1; /* NVRTC itself is unusable: not the candidate's fault */
		out->verdict = KS_VERDICT_COMPILE_ERROR;
		return 0;
	}
	free(defines);

	for (size_t i = 0; i < cand->n_launches; i++) {
		struct ks_launch_report *r = &out->launches[i];

		if (!ks_ptx_has_entry(out->compiled.ptx, r->kernel)) {
			ks_fail(err,
				"%s: launch[%zu] names kernel '%s', but the source defines no such "
				"extern \"C\" __global__ function",
				cand->path, i, r->kernel);
			out->verdict = KS_VERDICT_CONTRACT_ERROR;
			return 0;
		}
	}
	if (check_globals(cand, out, err))
		return out->verdict == KS_VERDICT_REFUSED ? 0 : -1;

	for (size_t i = 0; i < cand->n_launches; i++) {
		struct ks_launch_report *r = &out->launches[i];
		const struct ks_kernel_resources *res = ks_compile_result_kernel(&out->compiled, r->kernel);

		if (res)
			r->res = *res;
		if (ks_ptx_kernel_descriptors(out->compiled.ptx, r->kernel, &r->desc, err) < 0)
			return -1;
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
	out->verdict = KS_VERDICT_OK;
	return 0;
}

void ks_build_release(struct ks_build *build)
{
	if (!build)
		return;
	ks_compile_result_release(&build->compiled);
	free(build->launches);
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
