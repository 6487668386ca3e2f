/*
 * backend.h - the search's real backend: NVRTC in killable compile
 * processes, and one GPU worker per GPU (eval.h), behind the struct
 * ks_backend interface of search.h.
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
#include "ksearch/op/op.h"
#include "ksearch/search/search.h"

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
