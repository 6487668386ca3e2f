/*
 * eval.h - the coordinator's side of GPU evaluation.
 *
 * A struct ks_evaluator owns one GPU worker process (worker.h) and turns a
 * built candidate into a result (result.h): a verdict with evidence and
 * timings.  It enforces the worker's announced deadlines: a worker that
 * does not answer in time (a kernel that hangs) is killed and the verdict
 * is "timeout"; a worker that dies is a "crash".  Either way the next job gets a fresh worker.
 * Each job carries a token drawn from the OS; the worker draws the job's
 * other secrets itself (docs/design.md, "Secrets").
 */
#ifndef KSEARCH_EVAL_H
#define KSEARCH_EVAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ksearch/compile/build.h"
#include "ksearch/op/candidate.h"
#include "ksearch/base/error.h"
#include "ksearch/evaluate/gpukit.h"
#include "ksearch/evaluate/result.h"
#include "ksearch/op/op.h"
#include "ksearch/base/proc.h"
#include "ksearch/op/verdict.h"

struct ks_evaluator {
	int gpu;
	struct ks_child worker; /* pid 0 while none runs */
	struct ks_device_profile profile;
	json_t *profile_json;
	uint64_t jobs;
	int restarts;  /* workers started after the first */
	char cpus[64]; /* the worker's own core's CPUs ("62-63"), "" if it has none (base/cpus.h) */
	char uuid[48]; /* the GPU's, as nvidia-smi prints it; "" unknown */
};

struct ks_eval_options {
	const char *const *workloads; /* benchmark workload ids to time; NULL/0: all */
	size_t n_workloads;
	int time_cap_ms;	/* per workload; 0: the worker's default */
	int startup_timeout_ms; /* for a worker's hello; 0: 180 s */
};

/* Start the worker for GPU gpu and wait for it to say hello. */
int ks_evaluator_open(struct ks_evaluator *ev, int gpu, const struct ks_eval_options *opts,
		      struct ks_error *err);
void ks_evaluator_close(struct ks_evaluator *ev);

/*
 * Evaluate a candidate that built ok (build->verdict == KS_VERDICT_OK)
 * into *res (initialised; its contents are replaced): what the worker
 * answered (ks_result_from_json() of its result frame), or the timeout or
 * crash the evaluator saw; KS_RESULT_EVALUATED either way, and the job's
 * wall time.  Returns 0 with a verdict, or -1 when ksearch itself failed
 * (the worker cannot start, it sent something that is not a result);
 * *res is empty then.  Most callers want ks_gpu_evaluate() (backend.h),
 * which joins this to the build's result.
 */
int ks_evaluator_run(struct ks_evaluator *ev, const struct ks_op *op, const struct ks_candidate *cand,
		     const int64_t *params, const struct ks_build *build, const struct ks_eval_options *opts,
		     struct ks_result *res, struct ks_error *err);

#endif
