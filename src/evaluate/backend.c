/*
 * backend.c - build with NVRTC, evaluate on GPU workers, for the search.
 */
#include "ksearch/evaluate/backend.h"

#include <stdlib.h>
#include <string.h>

#include "ksearch/compile/build.h"
#include "ksearch/base/util.h"
#include "ksearch/evaluate/profile.h"

struct built {
	struct ks_build build;
};

static json_t *kernels_json(const struct ks_build *b)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < b->n_launches; i++) {
		const struct ks_launch_report *r = &b->launches[i];

		json_array_append_new(
			arr, json_pack("{s:s, s:i, s:i, s:I, s:i, s:i, s:i, s:I, s:f, s:s, s:s, s:i}",
				       "kernel", r->kernel, "registers", r->res.registers, "static_smem",
				       r->res.static_smem, "dynamic_smem", (json_int_t)r->dynamic_smem,
				       "stack_bytes", r->res.stack_bytes, "spill_stores", r->res.spill_stores,
				       "spill_loads", r->res.spill_loads, "threads", (json_int_t)r->threads,
				       "occupancy", r->occupancy.fraction, "tensor_cores",
				       ks_tensor_cores_name(r->desc.tensor_cores), "async_copy",
				       ks_async_copy_name(r->desc.async_copy), "widest_load_bytes",
				       r->desc.widest_load_bytes));
	}
	return arr;
}

static json_t *descriptors_json(const double *d)
{
	json_t *obj = json_object();

	for (int i = 0; i < KS_DESC_COUNT; i++)
		json_object_set_new(obj, ks_descriptor_name((enum ks_descriptor)i), json_real(d[i]));
	return obj;
}

static int gb_build(void *ctx, const struct ks_family *fam, const int64_t *params, void **out,
		    json_t **record, struct ks_error *err)
{
	struct ks_gpu_backend *gb = ctx;
	struct built *b = ks_calloc(1, sizeof(*b));
	struct ks_error why;

	*out = NULL;
	*record = NULL;
	ks_error_clear(&why);
	if (ks_build(&fam->cand, gb->op, params, gb->evaluators[0].profile.arch, KS_BUILD_ISOLATED, &b->build,
		     &why) < 0) {
		*err = why;
		ks_build_release(&b->build);
		free(b);
		return -1;
	}
	if (b->build.verdict != KS_VERDICT_OK) {
		*record = json_pack("{s:s, s:s, s:s}", "verdict", ks_verdict_name(b->build.verdict),
				    "evidence", why.msg, "arch", gb->evaluators[0].profile.arch);
		ks_build_release(&b->build);
		free(b);
		return 0;
	}
	*out = b;
	return 0;
}

static int gb_evaluate(void *ctx, int lane, const struct ks_family *fam, const int64_t *params, void *built,
		       json_t **record, struct ks_error *err)
{
	struct ks_gpu_backend *gb = ctx;
	struct built *b = built;
	struct ks_evaluator *ev = &gb->evaluators[lane];
	struct ks_eval_result res;
	double descriptors[KS_DESC_COUNT];
	json_t *launches, *timing;
	int ret = -1;

	*record = NULL;
	if (ks_evaluator_run(ev, gb->op, &fam->cand, params, &b->build, &gb->eval_opts, &res, err) < 0)
		goto cleanup;
	*record = res.result;
	res.result = NULL;
	/* occupancy as the driver reports it, where the worker could ask */
	memcpy(descriptors, b->build.descriptors, sizeof(descriptors));
	launches = json_object_get(*record, "launches");
	for (size_t i = 0; i < json_array_size(launches); i++) {
		double occ = json_number_value(json_object_get(json_array_get(launches, i), "occupancy"));

		if (occ > 0 && (i == 0 || occ < descriptors[KS_DESC_OCCUPANCY]))
			descriptors[KS_DESC_OCCUPANCY] = occ;
	}
	/* the measured descriptors' stand-ins until a profile replaces them (op.h) */
	descriptors[KS_DESC_ACHIEVED_OCCUPANCY] = descriptors[KS_DESC_OCCUPANCY];
	descriptors[KS_DESC_DRAM_FRACTION] = json_number_value(json_object_get(*record, "sol_fraction"));
	if (descriptors[KS_DESC_DRAM_FRACTION] > 1)
		descriptors[KS_DESC_DRAM_FRACTION] = 1;
	json_object_set_new(*record, "descriptors", descriptors_json(descriptors));
	json_object_set_new(*record, "kernels", kernels_json(&b->build));
	json_object_set_new(*record, "arch", json_string(ev->profile.arch));
	timing = json_pack("{s:O?, s:O?, s:f}", "verify_s", json_object_get(*record, "verify_s"), "time_s",
			   json_object_get(*record, "time_s"), "wall_s", res.wall_s);
	json_object_set_new(*record, "timing", timing);
	json_object_del(*record, "verify_s");
	json_object_del(*record, "time_s");
	ks_eval_result_release(&res);
	ret = 0;
cleanup:
	ks_build_release(&b->build);
	free(b);
	return ret;
}

/* Profile a new elite with the lane's GPU, which is between two evaluations (profile.h). */
static int gb_profile(void *ctx, int lane, const struct ks_family *fam, const int64_t *params,
		      const volatile sig_atomic_t *cancel, struct ks_profile_outcome *out,
		      struct ks_error *err)
{
	struct ks_gpu_backend *gb = ctx;
	size_t n = fam->cand.n_params;
	char **assign = ks_calloc(n ? n : 1, sizeof(*assign));
	struct ks_profile_request req = { .op = gb->op,
					  .source = fam->cand.source,
					  .path = fam->cand.path,
					  .params = (const char *const *)assign,
					  .n_params = n,
					  .gpu = gb->gpus[lane],
					  .cancel = cancel };
	int rc;

	for (size_t i = 0; i < n; i++)
		assign[i] = ks_asprintf("%s=%lld", fam->cand.params[i].name, (long long)params[i]);
	rc = ks_profile_run(&req, out, err);
	for (size_t i = 0; i < n; i++)
		free(assign[i]);
	free(assign);
	return rc;
}

static void gb_discard(void *ctx, void *built)
{
	struct built *b = built;

	(void)ctx;
	ks_build_release(&b->build);
	free(b);
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
					   .build = gb_build,
					   .evaluate = gb_evaluate,
					   .discard = gb_discard,
					   .profile = gb_profile };
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
