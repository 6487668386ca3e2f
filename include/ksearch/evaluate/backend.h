/*
 * backend.h - the one path from a candidate to its result (result.h), and
 * the search's real backend built on it: NVRTC in killable compile
 * processes, and one GPU worker per GPU (eval.h), behind the struct
 * ks_backend interface of search.h.
 *
 * `ksearch check` and the search both take a candidate through
 * ks_gpu_build() and then, when it built ok, ks_gpu_evaluate(): one
 * result, made the same way, whoever asks.
 *
 * Every lane is one GPU of the same model (one archive holds one GPU
 * model's timings).  The backend is opened before the archive, so the
 * worker processes never inherit an open LMDB environment.
 */
#ifndef KSEARCH_BACKEND_H
#define KSEARCH_BACKEND_H

#include <stddef.h>

#include "ksearch/base/error.h"
#include "ksearch/evaluate/eval.h"
#include "ksearch/evaluate/result.h"
#include "ksearch/op/op.h"
#include "ksearch/search/search.h"

/*
 * Build cand with params for arch (ks_build(), flags as there) into
 * *build, and its result into *res (initialised; its contents are
 * replaced): the static verdict with its evidence, or ok with the
 * descriptors and kernels (ks_result_set_build()); the arch and the
 * compile time either way.  Returns -1 when ksearch itself failed
 * (*build and *res released then); else release both.  A result that is
 * not ok is final; an ok one goes to ks_gpu_evaluate() with its build.
 */
int ks_gpu_build(const struct ks_op *op, const struct ks_candidate *cand, const int64_t *params,
		 const char *arch, unsigned flags, struct ks_build *build, struct ks_result *res,
		 struct ks_error *err);

/*
 * Verify and time a build that passed on ev's GPU (ks_evaluator_run())
 * and join that to its result res (ks_result_add_evaluation(): the
 * driver's occupancy among the descriptors).  Returns -1 when ksearch
 * itself failed (res keeps the build's part).
 */
int ks_gpu_evaluate(struct ks_evaluator *ev, const struct ks_op *op, const struct ks_candidate *cand,
		    const int64_t *params, const struct ks_build *build, const struct ks_eval_options *opts,
		    struct ks_result *res, struct ks_error *err);

struct ks_gpu_backend {
	const struct ks_op *op;
	struct ks_evaluator *evaluators; /* one per GPU */
	int *gpus;
	size_t n_gpus;
	struct ks_eval_options eval_opts;
	struct ks_backend backend; /* what ks_search_run() takes */
};

/*
 * Start one worker per GPU in gpus (all of the same model; fails naming
 * them otherwise).  time_cap_ms: timing budget per benchmark workload
 * (0: the worker's default).
 */
int ks_gpu_backend_open(struct ks_gpu_backend *gb, const struct ks_op *op, const int *gpus, size_t n_gpus,
			int time_cap_ms, struct ks_error *err);
void ks_gpu_backend_close(struct ks_gpu_backend *gb);

/* The GPU model every lane has ("NVIDIA H200"). */
const char *ks_gpu_backend_model(const struct ks_gpu_backend *gb);

#endif
