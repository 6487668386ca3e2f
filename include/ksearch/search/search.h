/*
 * search.h - the MAP-Elites search loop.
 *
 * Seeds first (every seed family with its first params), then whatever
 * the mutators propose, asked in order (mutator.h: the built-in one moves
 * params of elites and crosses them, mutator_param.c; the LLM's writes
 * kernels, mutator_llm.h) -> build -> evaluate -> insert into the archive
 * -> the mutator that proposed it is told the result.
 *
 * The loop is a pipeline: proposals are made by the calling thread, built
 * by `jobs` compile threads and evaluated by one thread per lane (GPU);
 * results are inserted strictly in proposal order.  Proposal i is made
 * from the archive as it stood after result i - depth was inserted, with
 * depth fixed by the configuration, so the choices depend only on the seed
 * and the results, never on timing (for mutators that do not wait on the
 * outside world).  Each proposal is saved in the archive before it is
 * dispatched, so a search killed at any moment resumes with exactly the
 * proposals it would have made.
 *
 * The search stops at the first of: the budget of evaluations, the time
 * limit, the target fitness, a signal, or "exhausted": no seed is left,
 * no mutator proposes, and none may produce later (may_produce).  A
 * mutator that waits on the outside world must not claim that for ever:
 * the LLM's stops claiming it after twelve replies in a row that brought
 * nothing usable (mutator_llm.h), so a search with a budget larger than
 * its space and no time limit ends even when the model never sends a
 * usable kernel.
 *
 * Candidates that build to the same binary (build.h's fingerprint) are
 * evaluated once: the first in proposal order holds the measurement, the
 * others are recorded with its result and "duplicate_of", in this run and
 * in later ones on the archive (state "search/binary/<hex>").
 *
 * New elites (results that fill or improve a cell) are profiled with the
 * backend's profile(), on a lane between two evaluations and within a
 * share of the GPU time (search_evidence.c); the profiles land in their
 * records.  On a grid with a measured descriptor (op.h) they move
 * candidates between cells at moments that depend on timing, so such a
 * search, like one that waits on the outside world, does not repeat its
 * choices exactly.
 *
 * New bests (the archive's best, or a benchmark workload's best) are
 * checked with the backend's sanitize() the same way, within a share of
 * their own (search_sanitize.c); a check that fails demotes its record
 * (archive.h, ks_archive_set_sanitizer()) and the records that are its
 * duplicates, so the parents and climbs that follow start from the next
 * best.
 *
 * The backend (how a proposal becomes a record) is an interface, struct
 * ks_backend with the struct ks_family it is handed, declared in
 * evaluate/backend.h beside the real one (NVRTC, then GPU workers) so
 * that evaluate needs nothing of search; tests plug in a deterministic
 * one.
 */
#ifndef KSEARCH_SEARCH_H
#define KSEARCH_SEARCH_H

#include <jansson.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ksearch/archive/archive.h"
#include "ksearch/base/error.h"
#include "ksearch/evaluate/backend.h"
#include "ksearch/op/candidate.h"
#include "ksearch/op/op.h"

struct ks_mutator;

/*
 * The share of the GPU one kind of hardware evidence (profiles, sanitizer
 * checks) may take.  A job may start only while what the kind took so
 * far, plus what the next job is expected to take (the mean of those
 * measured, or a first guess), stays within share of all the GPU time
 * (evaluations, profiles and checks); the share can pass it only by a job
 * that ran longer than expected.
 */
struct ks_evidence_budget {
	double share;	   /* the most the kind may take, as a fraction of GPU time */
	double eval_s;	   /* GPU time spent on everything else */
	double spent_s;	   /* GPU time spent on the kind's jobs */
	double expected_s; /* what the next job is expected to take */
	uint64_t runs;	   /* jobs run (whatever came of them) */
};

void ks_evidence_budget_init(struct ks_evidence_budget *b, double share, double first_guess_s);
/* May one more job start, with `running` already under way? */
int ks_evidence_budget_allows(const struct ks_evidence_budget *b, int running);
/* A job took seconds. */
void ks_evidence_budget_spent(struct ks_evidence_budget *b, double seconds);
/* spent_s / (eval_s + spent_s); 0 before any GPU time. */
double ks_evidence_budget_used(const struct ks_evidence_budget *b);

struct ks_search_config {
	uint64_t seed;
	uint64_t budget;		 /* evaluations in this run; 0: none */
	double time_limit_s;		 /* 0: none */
	double target_fitness;		 /* 0: none */
	int jobs;			 /* compile threads */
	double explore, exploit, recent; /* parent selection ratios (normalised) */
	double climb;			 /* share of built-in proposals that climb from a best (0 to 1) */

	FILE *log;		     /* JSON-lines events, or NULL */
	int status_tty;		     /* redraw one status line instead of printing lines */
	double status_every_s;	     /* plain status lines (not a tty) */
	volatile sig_atomic_t *stop; /* set non-zero to finish in-flight work and stop */
	FILE *out;		     /* progress and summary (stdout); NULL: quiet */
	/* who proposes after the seeds, asked in this order (mutator.h); borrowed */
	const struct ks_mutator *const *mutators;
	size_t n_mutators;
	/*
	 * Profiling new elites (backend->profile): at most this share of the
	 * GPU time (0: never; ksearch evolve's default is 0.1), the first
	 * profile expected to take profile_guess_s (0: 5 s).
	 */
	double profile_share;
	double profile_guess_s;
	/*
	 * Sanitizer checks (backend->sanitize) of every new best and every new
	 * per-workload best, and at the start of those the archive holds
	 * unchecked: at most this share of the GPU time (0: never; ksearch
	 * evolve's default is 0.1), the first expected to take
	 * sanitize_guess_s (0: 30 s).
	 */
	double sanitize_share;
	double sanitize_guess_s;
	/*
	 * Confirmations (backend->build and evaluate again, search_confirm.c)
	 * of every new per-workload best, and at the start of those the
	 * archive holds unconfirmed: at most this share of the GPU time (0:
	 * never; ksearch evolve's default is 0.05), the first expected to take
	 * confirm_guess_s (0: 1 s).
	 */
	double confirm_share;
	double confirm_guess_s;
	/*
	 * A run with a time limit starts its last confirmations (those of the
	 * bests it leaves) no later than this long after the limit; the rest
	 * wait for the next run on the archive.  0:
	 * ks_search_confirm_grace_s(time_limit_s).
	 */
	double confirm_grace_s;
};

/*
 * The default time a run's last confirmations may take past its time limit:
 * 5% of the limit, at least 10 s and at most a minute.
 */
double ks_search_confirm_grace_s(double time_limit_s);

/* What one kind of hardware evidence did in a run. */
#define KS_SEARCH_EVIDENCE_IDS 16
struct ks_search_evidence {
	uint64_t stored; /* made and stored in their records */
	uint64_t failed; /* could not be made for their candidate (a crash, a deadline) */
	/*
	 * Stored and changed the grid: profiles that moved their candidate to
	 * another cell; sanitizer checks that failed, demoting it;
	 * confirmations that took a workload's best from it.
	 */
	uint64_t changed;
	uint64_t changed_ids[KS_SEARCH_EVIDENCE_IDS]; /* the first of those, by record id */
	double seconds;				      /* GPU time spent */
	double share;				      /* seconds over all the GPU time */
	char off[1024]; /* why it stopped for the run (no tool, no permission ...); "" if it did not */
};

struct ks_search_summary {
	uint64_t evaluated;  /* in this run */
	uint64_t duplicates; /* built to a binary already evaluated: recorded with its result, not run */
	uint64_t by_verdict[KS_VERDICT_COUNT];
	double wall_s;
	double compile_s, eval_s; /* summed over candidates */
	double gpu_busy_s;	  /* summed over lanes */
	const char *stop_reason;  /* "budget", "time", "target", "signal", "exhausted" */
	int resumed;
	uint64_t resumed_from; /* records in the archive when the run started */
	size_t added_families; /* families mutators added (the LLM's kernels), over the archive's life */
	struct ks_search_evidence profiles;  /* of new elites */
	struct ks_search_evidence sanitizer; /* checks of new bests */
	struct ks_search_evidence confirm;   /* new workloads' bests timed again; changed: bests replaced */
	uint64_t unconfirmed; /* workloads' bests the run left unconfirmed: its time and grace were up */
};

/*
 * Load the op's seed families (sorted by file name) into *families (the
 * caller's, freed with ks_families_free()).  On -1 nothing is left held:
 * *families is NULL and *n 0.
 */
int ks_families_load(const struct ks_op *op, struct ks_family **families, size_t *n, struct ks_error *err);
void ks_families_free(struct ks_family *families, size_t n);
/* Free one family's contents (not the struct). */
void ks_family_release(struct ks_family *family);

/*
 * The compile processes (ks_search_config.jobs) a search on `lanes` GPUs
 * keeps busy on a host with `cpus` CPUs when none are asked for:
 * 8 per lane, but no more than the CPUs left after one for each GPU
 * worker (its thread waits on the GPU, spinning, and a descheduled worker
 * stretches the launches it times) and one for the search itself; at
 * least 1, at most 256.  One lane evaluates about 5 candidates a second
 * (0.2 s of GPU time each) and a large seed compiles in 1 to 2 s on one
 * core, so 8 compiles keep one lane fed even when no candidate is a twin
 * (docs/design.md, "The search").
 */
int ks_search_default_jobs(long cpus, size_t lanes);

/*
 * Run the search on an open archive (created with the op's grid).
 * Returns 0 when it stopped for one of the configured reasons, -1 when
 * ksearch itself failed.
 */
int ks_search_run(struct ks_archive *ar, const struct ks_op *op, const struct ks_family *families,
		  size_t n_families, const struct ks_backend *backend, const struct ks_search_config *cfg,
		  struct ks_search_summary *summary, struct ks_error *err);

#endif
