/*
 * backend.c - build with NVRTC, evaluate on GPU workers: the one path to a
 * result, for `check` and the search.
 */
#include "ksearch/evaluate/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ksearch/base/cpus.h"
#include "ksearch/base/frame.h"
#include "ksearch/compile/build.h"
#include "ksearch/base/util.h"
#include "ksearch/evaluate/profile.h"
#include "ksearch/evaluate/sanitize.h"

int ks_gpu_build(const struct ks_op *op, const struct ks_candidate *cand, const int64_t *params,
		 const char *arch, unsigned flags, struct ks_build *build, struct ks_result *res,
		 struct ks_error *err)
{
	struct ks_error why;
	int64_t t0 = ks_now_ms();

	ks_result_release(res);
	ks_error_clear(&why);
	if (ks_build(cand, op, params, arch, flags, build, &why) < 0) {
		*err = why;
		ks_build_release(build);
		ks_result_release(res);
		return -1;
	}
	if (build->verdict == KS_VERDICT_OK)
		ks_result_set_build(res, build);
	else
		ks_result_fail(res, build->verdict, "%s", why.msg);
	snprintf(res->arch, sizeof(res->arch), "%s", arch);
	res->timing.compile_s = (double)(ks_now_ms() - t0) / 1000.0;
	return 0;
}

int ks_gpu_evaluate(struct ks_evaluator *ev, const struct ks_op *op, const struct ks_candidate *cand,
		    const int64_t *params, const struct ks_build *build, const struct ks_eval_options *opts,
		    struct ks_result *res, struct ks_error *err)
{
	const struct ks_host_kind *kind;
	struct ks_result eval;

	ks_result_init(&eval);
	if (ks_evaluator_run(ev, op, cand, params, build, opts, &eval, err) < 0)
		return -1;
	ks_result_add_evaluation(res, &eval);
	ks_result_release(&eval);
	res->evaluator = KS_EVALUATOR_GENERATION;
	res->where.gpu = ev->gpu;
	if (gethostname(res->where.host, sizeof(res->where.host)) < 0)
		res->where.host[0] = '\0';
	res->where.host[sizeof(res->where.host) - 1] = '\0';
	snprintf(res->where.gpu_uuid, sizeof(res->where.gpu_uuid), "%s", ev->uuid);
	kind = ks_cpu_host_kind();
	snprintf(res->where.cpu_model, sizeof(res->where.cpu_model), "%s", kind->cpu_model);
	res->where.host_cpus = kind->cpus;
	res->where.host_gpus = kind->gpus;
	return 0;
}

/* The search's backend: a build that passed waits in *built for a lane. */

static int gb_build(void *ctx, const struct ks_family *fam, const int64_t *params, void **out,
		    struct ks_result *res, struct ks_error *err)
{
	struct ks_gpu_backend *gb = ctx;
	struct ks_build *build = ks_calloc(1, sizeof(*build));

	*out = NULL;
	if (ks_gpu_build(gb->op, &fam->cand, params, gb->evaluators[0].profile.arch, KS_BUILD_ISOLATED, build,
			 res, err) < 0) {
		free(build);
		return -1;
	}
	if (build->verdict != KS_VERDICT_OK) {
		ks_build_release(build);
		free(build);
		return 0;
	}
	*out = build;
	return 0;
}

static int gb_evaluate(void *ctx, int lane, const struct ks_family *fam, const int64_t *params, void *built,
		       struct ks_result *res, struct ks_error *err)
{
	struct ks_gpu_backend *gb = ctx;
	struct ks_build *build = built;
	int ret = ks_gpu_evaluate(&gb->evaluators[lane], gb->op, &fam->cand, params, build, &gb->eval_opts,
				  res, err);

	ks_build_release(build);
	free(build);
	return ret;
}

/* fam's params as "NAME=VALUE" strings, for the profiler's and the sanitizer's runner; free with
 * free_assign(). */
static char **assign_params(const struct ks_family *fam, const int64_t *params)
{
	size_t n = fam->cand.n_params;
	char **assign = ks_calloc(n ? n : 1, sizeof(*assign));

	for (size_t i = 0; i < n; i++)
		assign[i] = ks_asprintf("%s=%lld", fam->cand.params[i].name, (long long)params[i]);
	return assign;
}

static void free_assign(char **assign, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(assign[i]);
	free(assign);
}

/* Profile a new elite with the lane's GPU, which is between two evaluations (profile.h). */
static int gb_profile(void *ctx, int lane, const struct ks_family *fam, const int64_t *params,
		      const volatile sig_atomic_t *cancel, struct ks_profile_outcome *out,
		      struct ks_error *err)
{
	struct ks_gpu_backend *gb = ctx;
	char **assign = assign_params(fam, params);
	struct ks_profile_request req = { .op = gb->op,
					  .source = fam->cand.source,
					  .path = fam->cand.path,
					  .params = (const char *const *)assign,
					  .n_params = fam->cand.n_params,
					  .gpu = gb->gpus[lane],
					  .cancel = cancel };
	double t0 = ks_now_s();
	int rc = ks_profile_run(&req, out, err);

	out->held_s = ks_now_s() - t0;
	free_assign(assign, fam->cand.n_params);
	return rc;
}

/* Check a new best with compute-sanitizer on the lane's GPU, between two evaluations (sanitize.h). */
static int gb_sanitize(void *ctx, int lane, const struct ks_family *fam, const int64_t *params,
		       const volatile sig_atomic_t *cancel, struct ks_sanitize_outcome *out,
		       struct ks_error *err)
{
	struct ks_gpu_backend *gb = ctx;
	char **assign = assign_params(fam, params);
	struct ks_sanitize_request req = { .op = gb->op,
					   .source = fam->cand.source,
					   .path = fam->cand.path,
					   .params = (const char *const *)assign,
					   .n_params = fam->cand.n_params,
					   .gpu = gb->gpus[lane],
					   .cancel = cancel };
	double t0 = ks_now_s();
	int rc = ks_sanitize_run(&req, out, err);

	out->held_s = ks_now_s() - t0;
	free_assign(assign, fam->cand.n_params);
	return rc;
}

static void gb_discard(void *ctx, void *built)
{
	(void)ctx;
	ks_build_release(built);
	free(built);
}

int ks_gpu_backend_open(struct ks_gpu_backend *gb, const struct ks_op *op, const int *gpus, size_t n_gpus,
			int time_cap_ms, struct ks_error *err)
{
	memset(gb, 0, sizeof(*gb));
	gb->op = op;
	gb->eval_opts.time_cap_ms = time_cap_ms;
	gb->evaluators = ks_calloc(n_gpus, sizeof(*gb->evaluators));
	gb->gpus = ks_calloc(n_gpus, sizeof(*gb->gpus));
	for (size_t i = 0; i < n_gpus; i++) {
		if (ks_evaluator_open(&gb->evaluators[i], gpus[i], &gb->eval_opts, err) < 0) {
			ks_gpu_backend_close(gb);
			return -1;
		}
		gb->gpus[i] = gpus[i];
		gb->n_gpus = i + 1;
		if (strcmp(gb->evaluators[i].profile.name, gb->evaluators[0].profile.name)) {
			ks_fail(err,
				"GPU %d is a %s but GPU %d is a %s: one search times kernels on one GPU "
				"model "
				"(run one search per model, each with its own --gpus)",
				gpus[0], gb->evaluators[0].profile.name, gpus[i],
				gb->evaluators[i].profile.name);
			ks_gpu_backend_close(gb);
			return -1;
		}
	}
	gb->backend = (struct ks_backend){ .ctx = gb,
					   .lanes = (int)n_gpus,
					   .depth_extra = KS_GPU_DEPTH_PER_LANE * (int)n_gpus,
					   .evaluator = KS_EVALUATOR_GENERATION,

					   .build = gb_build,
					   .evaluate = gb_evaluate,
					   .discard = gb_discard,
					   .profile = gb_profile,
					   .sanitize = gb_sanitize };
	return 0;
}

void ks_gpu_backend_close(struct ks_gpu_backend *gb)
{
	for (size_t i = 0; i < gb->n_gpus; i++)
		ks_evaluator_close(&gb->evaluators[i]);
	free(gb->evaluators);
	free(gb->gpus);
	memset(gb, 0, sizeof(*gb));
}

const char *ks_gpu_backend_model(const struct ks_gpu_backend *gb)
{
	return gb->n_gpus ? gb->evaluators[0].profile.name : "";
}
