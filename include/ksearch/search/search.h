/*
 * search.h - the MAP-Elites search loop with the built-in mutator.
 *
 * Seeds first (every seed family with its first params), then: a parent
 * from the grid (uniform over filled cells, fitness-weighted elites, or a
 * cell whose offspring improved lately) -> a mutation (one or two params to
 * neighbouring values, or a crossover of two elites of the same family)
 * -> build -> evaluate -> insert into the archive.
 *
 * The loop is a pipeline: proposals are made by the calling thread, built
 * by `jobs` compile threads and evaluated by one thread per lane (GPU);
 * results are inserted strictly in proposal order.  Proposal i is made
 * from the archive as it stood after result i - depth was inserted, with
 * depth fixed by the configuration, so the choices depend only on the seed
 * and the results, never on timing.  Each proposal is saved in the archive
 * before it is dispatched, so a search killed at any moment resumes with
 * exactly the proposals it would have made.
 *
 * The backend (how a proposal becomes a record) is an interface: the real
 * one compiles with NVRTC and evaluates on GPU workers; tests plug in a
 * deterministic one.
 */
#ifndef KSEARCH_SEARCH_H
#define KSEARCH_SEARCH_H

#include <jansson.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ksearch/archive/archive.h"
#include "ksearch/op/candidate.h"
#include "ksearch/base/error.h"
#include "ksearch/llm/llm.h"
#include "ksearch/op/op.h"

/*
 * A family: one source whose params the built-in mutator explores.  Seeds
 * come from the op's seeds/ folder; the LLM mutator adds one per kernel it
 * writes ("llm-7"), kept in the archive's run state so a resumed search
 * has them all.
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
 * evaluate() only from lane's own thread.  Both fill *record (a new JSON
 * object: "verdict", "evidence", and for ok "fitness", "sol_fraction",
 * "descriptors", "workloads"...) and return 0, or return -1 when ksearch
 * itself failed (then the search stops with err).
 */
struct ks_backend {
	void *ctx;
	int lanes;
	/* Compile and check statically; *built is passed on to evaluate() (may be NULL when the record is
	 * final). */
	int (*build)(void *ctx, const struct ks_family *fam, const int64_t *params, void **built,
		     json_t **record, struct ks_error *err);
	/* Verify and time a built candidate on a lane; frees built. */
	int (*evaluate)(void *ctx, int lane, const struct ks_family *fam, const int64_t *params, void *built,
			json_t **record, struct ks_error *err);
	/* Free a built candidate that will not be evaluated. */
	void (*discard)(void *ctx, void *built);
};

/*
 * The LLM mutator (search.h's loop runs it when ks_search_config.llm is
 * set).  Requests go out while the client has room: parent from the grid,
 * a strategy prompt by the bandit (strategy.h), elites of other cells,
 * the target (improve the parent's cell or reach a neighbouring one).
 * An answer becomes a new family and its first params are proposed next,
 * ahead of the built-in mutator; a child that fails (unusable answer,
 * compile, contract, wrong ...) goes back with its evidence for up to
 * max_repairs turns; a child that verifies has up to tune_budget more
 * param combinations of its own tried.  Every rewrite_every LLM children,
 * the most rewarding strategy is rewritten by the LLM.  The built-in
 * mutator fills every slot the LLM leaves empty, so a paused or spent LLM
 * never stops the search.  With an LLM, choices also depend on when
 * answers arrive: a resumed search re-dispatches its saved proposals
 * exactly, but answers not yet proposed when it stopped are dropped.
 */
struct ks_search_llm {
	struct ks_llm *client; /* open (borrowed) */
	const char *model;     /* for the records */
	const char *prompts_dir;
	const char *system_prompt; /* rendered prompts/system.md */
	int concurrency;	   /* requests out at once (the client's concurrency) */
	int max_repairs;	   /* repair turns per child (2) */
	int tune_budget;	   /* extra param combinations per new kernel (8) */
	int rewrite_every;	   /* LLM children between strategy rewrites; 0: never (10) */
	size_t population_cap;	   /* active strategies (12) */
	double move_share;	   /* share of requests asking for a neighbouring cell (0.3) */
};

struct ks_search_config {
	uint64_t seed;
	uint64_t budget;		 /* evaluations in this run; 0: none */
	double time_limit_s;		 /* 0: none */
	double target_fitness;		 /* 0: none */
	int jobs;			 /* compile threads */
	double explore, exploit, recent; /* parent selection ratios (normalised) */
	FILE *log;			 /* JSON-lines events, or NULL */
	int status_tty;			 /* redraw one status line instead of printing lines */
	double status_every_s;		 /* plain status lines (not a tty) */
	volatile sig_atomic_t *stop;	 /* set non-zero to finish in-flight work and stop */
	FILE *out;			 /* progress and summary (stdout); NULL: quiet */
	const struct ks_search_llm *llm; /* NULL: the built-in mutator only */
};

struct ks_search_summary {
	uint64_t evaluated; /* in this run */
	uint64_t duplicates_skipped;
	uint64_t by_verdict[KS_VERDICT_COUNT];
	double wall_s;
	double compile_s, eval_s; /* summed over candidates */
	double gpu_busy_s;	  /* summed over lanes */
	const char *stop_reason;  /* "budget", "time", "target", "signal", "exhausted" */
	int resumed;
	uint64_t resumed_from; /* records in the archive when the run started */
	/* the LLM mutator */
	uint64_t llm_requests, llm_failed; /* requests answered / failed (transport, HTTP) */
	uint64_t llm_children, llm_ok;	   /* kernels from answers (with repairs) evaluated / verified */
	uint64_t answer_errors;		   /* answers with no usable kernel (cut-off ones included) */
	uint64_t cut_off;		   /* answers that stopped at the budget (--max-tokens) */
	uint64_t repairs;		   /* repair turns sent */
	uint64_t tuned;			   /* tuner variants evaluated */
	uint64_t rewrites;		   /* strategies the LLM rewrote */
	size_t llm_families;		   /* kernels the LLM wrote, over the archive's life */
};

/* Load the op's seed families (sorted by file name). */
int ks_families_load(const struct ks_op *op, struct ks_family **families, size_t *n, struct ks_error *err);
void ks_families_free(struct ks_family *families, size_t n);
/* Free one family's contents (not the struct). */
void ks_family_release(struct ks_family *family);

/*
 * Run the search on an open archive (created with the op's grid).
 * Returns 0 when it stopped for one of the configured reasons, -1 when
 * ksearch itself failed.
 */
int ks_search_run(struct ks_archive *ar, const struct ks_op *op, const struct ks_family *families,
		  size_t n_families, const struct ks_backend *backend, const struct ks_search_config *cfg,
		  struct ks_search_summary *summary, struct ks_error *err);

#endif
