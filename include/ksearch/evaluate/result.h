/*
 * result.h - the result of one candidate, typed: what `check` prints,
 * what the search stores and tells the mutator that proposed it.
 *
 * It is made once, along the one build and evaluate path (backend.h:
 * ks_gpu_build(), ks_gpu_evaluate()): the build fills the static part
 * (its verdict, the descriptors, each launch's compile report), the GPU
 * worker the measured part (verdict and evidence, per-workload times,
 * fitness, the launches as the driver sees them, what the defences cost,
 * what the kernel printed), and ks_result_add_evaluation() joins them,
 * the driver's occupancy replacing the build's estimate among the
 * descriptors.
 *
 * A result has one JSON form (archive/README.md, "The candidate record"),
 * written only by ks_result_to_json() and read only by
 * ks_result_from_json().  The worker sends it as its result frame (the
 * process boundary), the archive stores it as the result fields of a
 * candidate record (the search adds where the candidate came from), and
 * `check --json` prints it (with the file and params: ks_result_check_json()).
 * So `check` and `evolve` describe the same candidate with the same fields.
 * A stored record is read back as a struct ks_record (archive/record.h),
 * whose result ks_result_from_json() parses; the archive's own checks,
 * export and import, and the commands that print a record as stored are
 * the only other code that holds its JSON (test_result lists them).
 *
 * Ownership: a result owns its strings and arrays; ks_result_init() before
 * use, ks_result_release() after (both leave an empty result, which owns
 * nothing and may be used again or dropped).
 */
#ifndef KSEARCH_RESULT_H
#define KSEARCH_RESULT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ksearch/base/error.h"
#include "ksearch/compile/build.h"
#include "ksearch/op/candidate.h"
#include "ksearch/op/op.h"
#include "ksearch/op/verdict.h"

/* Length splits a workload's timing may rest on (worker.c: 3 unless a job asks otherwise). */
#define KS_RESULT_MAX_SPLITS 8

/* One length split a workload was timed on ("splits"): its kind (gpukit.h, enum ks_split) and median. */
struct ks_result_split {
	char kind[16];
	double median_us;
};

/* One benchmark workload's timing ("workloads" in a record). */
struct ks_result_workload {
	char *id;
	/*
	 * The candidate's verified runs: median_us is the median of the
	 * splits' medians (the one split's median when there is one), the
	 * quantiles and min are over every sample of every split.
	 */
	double median_us, p10_us, p90_us, min_us;
	int64_t reps, runs;				     /* samples; timed runs (verified or not) */
	double ref_median_us;				     /* the reference's median on the same shapes */
	double speedup;					     /* ref_median_us / median_us */
	double floor_us;				     /* the speed-of-light floor */
	double sol_fraction;				     /* floor_us / median_us */
	struct ks_result_split splits[KS_RESULT_MAX_SPLITS]; /* in the order timed; none for older records */
	size_t n_splits;
};

/* One launch of the plan as the driver sees it, at the largest benchmark workload ("launches"). */
struct ks_result_launch {
	char *kernel;
	int64_t blocks_per_sm; /* cuOccupancyMaxActiveBlocksPerMultiprocessor */
	double occupancy;      /* active warps over the maximum, from blocks_per_sm */
	int64_t threads, dynamic_smem;
};

/* One launch's compile report (build.h's struct ks_launch_report) as recorded ("kernels"). */
struct ks_result_kernel {
	char *kernel;
	int64_t registers, static_smem, dynamic_smem, stack_bytes, spill_stores, spill_loads, threads;
	double occupancy; /* theoretical: the architecture's rules */
	int64_t blocks_per_sm;
	char occupancy_limit[16], tensor_cores[16], async_copy[16]; /* the names arch.h and ptx.h give */
	int64_t widest_load_bytes;
};

/* What the evaluator's defences cost during timing, beside the timed launches ("overhead"). */
struct ks_result_overhead {
	double inputs_s, prepare_s, checks_s, verify_s;
	/* the host blocked on a timed candidate run's end (its launches, then the GPU; since the
	   run and its checks are waited for together, the checks' GPU work too): what a busy host
	   adds to each run shows here (0 in records of evaluators before it was measured) */
	double wait_s;
	/* the rest of the timing loop, measured since wait_s too: the candidate's warm-up runs, the
	   input checks before each verification, and the progress messages to the coordinator */
	double warmup_s, prechecks_s, announce_s;
	int64_t runs, verified_runs;
	int64_t announcements; /* deadline messages sent to the coordinator */
	int64_t allocations;   /* device buffers the driver allocated (the rest came from the pool) */
};

/* Seconds; 0: not measured (and not written). */
struct ks_result_timing {
	double compile_s; /* the build */
	double verify_s;  /* the worker: correctness on the check workloads */
	double time_s;	  /* the worker: timing the benchmark workloads */
	double wall_s;	  /* the evaluator: the job, from sending it to the answer */
	double eval_s;	  /* the search: the evaluation, as its lane saw it */
};

/*
 * What evaluated a result, for telling records apart when the evaluator
 * changes what it measures (ks_result.evaluator; 0 unknown, not written):
 *  1  until 2026-11-24: kernels in the driver's default shared-memory carveout
 *     (records without the field);
 *  2  every kernel in the largest carveout, the one the cooperative scrub
 *     wipes whole (docs/design.md, threat model).  L1-bound kernels run
 *     slower than under 1 (BENCHMARKS.md).
 *  3  from 2026-11-26: every secret drawn from the OS on its own, guard bands
 *     of random bytes, and each structured benchmark workload timed on
 *     three length splits (even, skewed, uniform) drawn per job with
 *     secret page tables; its time is the median of the splits' medians
 *     ("splits").  Fitness under 2 rested on one fixed split per operator.
 *  4  from 2026-11-27: a structured workload's time (median_us) is its
 *     slowest split's median; the reference keeps the median of its nine.
 *     Under 3 a kernel up to twice as slow on one split kind could win,
 *     and the winners ran 6-19% slower on other random splits.
 *  5  from 2026-11-27 (twelfth session): a skewed split's longest request
 *     holds a fixed share of the tokens, the p90 of one draw's (16
 *     requests: 61%, 64: 30%), where one draw's ranged 20-56% from p10 to
 *     p90.  Under 4 the search kept kernels timed on a mild draw, and they
 *     ran up to 21% slower on another even after a confirmation.
 */
#define KS_EVALUATOR_GENERATION 5

/* Which parts a result holds (ks_result.has). */
enum ks_result_part {
	KS_RESULT_BUILT = 1 << 0,     /* passed the static checks: descriptors, kernels */
	KS_RESULT_EVALUATED = 1 << 1, /* a GPU evaluation ran: fitness, sol_fraction, workloads, launches */
	KS_RESULT_OVERHEAD = 1 << 2,  /* the worker answered: overhead */
};

/*
 * Where a result was timed (ks_result.where), so that a run over many
 * GPUs, hosts or MPI ranks can be taken apart; written while gpu >= 0.
 */
struct ks_result_place {
	char host[64]; /* the host's name ("" unknown) */
	int gpu;       /* the GPU's index on that host, as --gpus counts them; -1: unknown */
	int rank;      /* the MPI rank that timed it; -1: not over MPI */
	/*
	 * which GPU and what kind of host (base/cpus.h: struct ks_host_kind says
	 * why): "" or 0 unknown, as in records from before they were kept
	 */
	char gpu_uuid[48];  /* "GPU-df7a642a-..." */
	char cpu_model[64]; /* the host's CPU */
	int host_cpus;	    /* its online CPUs */
	int host_gpus;	    /* its GPUs */
};

struct ks_result {
	enum ks_verdict verdict;
	char *evidence; /* never NULL after ks_result_init(); "" when there is none */
	char arch[16];	/* what it was compiled for; "" unknown (not written) */
	unsigned has;	/* enum ks_result_part */
	/* KS_RESULT_BUILT */
	double descriptors[KS_DESC_COUNT];
	char binary[65]; /* the build's fingerprint (build.h) in hex; "" unknown (not written) */

	struct ks_result_kernel *kernels;
	size_t n_kernels;
	/* KS_RESULT_EVALUATED */
	double fitness;	     /* geometric mean of the speedups; 0 unless ok */
	double sol_fraction; /* geometric mean of the workloads' sol_fraction */
	struct ks_result_workload *workloads;
	size_t n_workloads, alloc_workloads;
	struct ks_result_launch *launches;
	size_t n_launches, alloc_launches;
	/* KS_RESULT_OVERHEAD */
	struct ks_result_overhead overhead;
	/* what the kernel printed: evidence for a person, never read as a message; 0: nothing */
	uint64_t printf_bytes;
	char *printf_head; /* the first bytes, unprintable ones as '?' */
	struct ks_result_timing timing;
	int evaluator; /* KS_EVALUATOR_GENERATION of the evaluator that ran it; 0 none or unknown */
	struct ks_result_place where;
};

void ks_result_init(struct ks_result *res);
void ks_result_release(struct ks_result *res);

/* A verdict reached without a GPU evaluation (a static failure, a broken family ...), with evidence. */
void ks_result_fail(struct ks_result *res, enum ks_verdict verdict, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), nonnull(3)));
/* The evidence, replaced. */
void ks_result_set_evidence(struct ks_result *res, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), nonnull(2)));

/*
 * The static part of a build that passed (build->verdict ok): verdict ok,
 * the descriptors and each launch's compile report (KS_RESULT_BUILT).
 */
void ks_result_set_build(struct ks_result *res, const struct ks_build *build);

/*
 * Append a workload or a launch, zeroed but for its name (copied), and
 * return it to fill: the pointer is good until the next append (the
 * array may move).  The worker fills a result this way.
 */
struct ks_result_workload *ks_result_add_workload(struct ks_result *res, const char *id);
struct ks_result_launch *ks_result_add_launch(struct ks_result *res, const char *kernel);

/*
 * Join a GPU evaluation (what the evaluator made of the worker's answer,
 * which is emptied) to the static part in res: the verdict, evidence,
 * measured part, printf and timings come from eval, and the descriptors
 * that a GPU measures replace the build's estimates: the occupancy is
 * the driver's, the lowest over the launches it could ask about.
 */
void ks_result_add_evaluation(struct ks_result *res, struct ks_result *eval);

/*
 * The one serialiser: add the result's fields to obj (a JSON object), in
 * the record's order: arch, verdict, evidence, then the parts it holds
 * (workloads, fitness, sol_fraction; descriptors, kernels; launches,
 * overhead, printf; timing).  Fields obj has already are replaced.
 */
void ks_result_to_json_into(const struct ks_result *res, json_t *obj);
/* The same, as a new object. */
json_t *ks_result_to_json(const struct ks_result *res);

/*
 * The one parser: a result from its JSON form (a worker's result frame, a
 * record; other fields are ignored).  "verdict" is required; each field
 * present must have its type (the error names it); parts are known by
 * their fields.  res must be initialised; its contents are replaced, and
 * on failure it is left empty.
 */
int ks_result_from_json(const json_t *obj, struct ks_result *res, struct ks_error *err);

/*
 * What `check --json` prints for one candidate: {"file", "params", then
 * the result's fields}.  cand and params may be NULL (a file whose
 * ksearch block cannot be read has none).
 */
json_t *ks_result_check_json(const char *file, const struct ks_candidate *cand, const int64_t *params,
			     const struct ks_result *res);

#endif
