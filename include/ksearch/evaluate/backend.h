/*
 * backend.h - the one path from a candidate to its result (result.h), and
 * the search's real backend built on it: NVRTC in killable compile
 * processes, and one GPU worker per GPU (eval.h), behind struct
 * ks_backend: the interface the search (search.h) takes a backend by.
 * The interface and the family it is handed are declared here, below
 * the search in the pipeline, so that the real backend needs nothing of
 * the search; the search owns what they mean.
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

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "ksearch/base/error.h"
#include "ksearch/evaluate/eval.h"
#include "ksearch/evaluate/profile.h"
#include "ksearch/evaluate/result.h"
#include "ksearch/evaluate/sanitize.h"
#include "ksearch/op/candidate.h"
#include "ksearch/op/op.h"

/*
 * A family: one source whose params the mutators explore.  Seeds come
 * from the op's seeds/ folder; a mutator may add more (the LLM's, one per
 * kernel it writes: "llm-7"), kept in the archive's run state so a
 * resumed search has them all.
 */
struct ks_family {
	char *name; /* file stem: "split_kv"; "llm-<n>" for the LLM's */
	struct ks_candidate cand;
	uint64_t strategy; /* the strategy prompt that led to it; 0 for seeds */
	char *broken;	   /* an LLM source whose ksearch block is unusable: why; else NULL */
};

/*
 * What the search needs from the outside world.  build() and evaluate()
 * are called from the search's threads: build() from any compile thread,
 * evaluate() only from lane's own thread.  The search hands both the same
 * result (result.h, initialised): build() fills it, and it is final when
 * *built is NULL (a static verdict); else evaluate() completes it.  Both
 * return 0, or -1 when ksearch itself failed (then the search stops with
 * err).  The search stores the result in the archive (the serialiser's
 * fields, then where the candidate came from) and tells the mutator that
 * proposed it.
 */
struct ks_backend {
	void *ctx;
	int lanes;
	/*
	 * The generation of the evaluator evaluate() runs (result.h,
	 * KS_EVALUATOR_GENERATION); 0: none to tell (a test's backend).  The
	 * search says so when the archive holds records of another.
	 */
	int evaluator;
	/*
	 * Proposals the search keeps in flight beyond its compile jobs and two
	 * per lane (the GPU backend's: KS_GPU_DEPTH_PER_LANE per GPU).  Results are inserted in proposal
	 * order, so the depth is how far the pipeline runs ahead of its slowest candidate; a backend whose
	 * candidates take longer from proposal to answer (an MPI rank's queue and round trips) needs more of
	 * it.
	 */
	int depth_extra;

	/* Compile and check statically; *built is passed on to evaluate() (NULL when res is final). */
	int (*build)(void *ctx, const struct ks_family *fam, const int64_t *params, void **built,
		     struct ks_result *res, struct ks_error *err);
	/* Verify and time a built candidate on a lane, completing res; frees built. */
	int (*evaluate)(void *ctx, int lane, const struct ks_family *fam, const int64_t *params, void *built,
			struct ks_result *res, struct ks_error *err);
	/* Free a built candidate that will not be evaluated. */
	void (*discard)(void *ctx, void *built);
	/*
	 * Profile an ok candidate on a lane, between its evaluations (NULL: the
	 * backend cannot profile).  Called from the lane's thread; fills *out
	 * (profile.h) and returns 0, or -1 when ksearch itself failed.  A
	 * profile that cannot be made is a status, never a -1.
	 */
	int (*profile)(void *ctx, int lane, const struct ks_family *fam, const int64_t *params,
		       const volatile sig_atomic_t *cancel, struct ks_profile_outcome *out,
		       struct ks_error *err);
	/*
	 * Check an ok candidate with the sanitizer (sanitize.h) on a lane,
	 * between its evaluations (NULL: the backend cannot).  As profile():
	 * fills *out and returns 0, or -1 when ksearch itself failed.
	 */
	int (*sanitize)(void *ctx, int lane, const struct ks_family *fam, const int64_t *params,
			const volatile sig_atomic_t *cancel, struct ks_sanitize_outcome *out,
			struct ks_error *err);
	/*
	 * The evaluations running on, or waiting for, each GPU that would time
	 * built (NULL: any lane times any build, on its own GPU).  A free lane
	 * takes the waiting build whose GPUs have the fewest, the oldest among
	 * equals: where the build's host decides the GPU (an MPI rank), a lane
	 * taking the oldest would queue behind a busy rank while an idle one's
	 * builds wait.  Called with the search's lock held; it may take the
	 * backend's own.
	 */
	double (*backlog)(void *ctx, const void *built);
};

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

/*
 * The GPU backend's depth_extra per GPU.  A proposal is made when the one
 * depth places before it is inserted, so on one host it has about
 * (depth - 1) x (an evaluation's time / GPUs) to be compiled before its
 * GPU needs it.  With the oracle an evaluation takes 0.16 s; one GPU's
 * depth of 10 (8 jobs + 2) then gave 1.4 s, the 95th percentile of its
 * compiles.  Replayed with the runs' own times (tools/pipeline-replay.py),
 * depth 10 cost 0.4-1.7 points of the GPU's time and 14 or more nothing;
 * 8 more per GPU (depth 18 on one GPU, 72 on four) leave room for slower
 * compiles (BENCHMARKS.md, "The oracle").
 */
#define KS_GPU_DEPTH_PER_LANE 8

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
