/*
 * mutator_llm.h - the LLM mutator: an LLM writes new kernels, behind the
 * struct ks_mutator interface of mutator.h.
 *
 * Requests go out while the client has room: a parent from the grid, a
 * strategy prompt by the bandit (strategy.h), elites of other cells, the
 * target (improve the parent's cell or reach a neighbouring one).  An
 * answer becomes a new family ("llm-<n>") and its first params are
 * proposed next, ahead of the mutators after it in the list; a child that
 * fails (unusable answer, compile, contract, wrong ...) goes back with its
 * evidence for up to max_repairs turns; a child that verifies has up to
 * tune_budget more param combinations of its own tried.  Every
 * rewrite_every LLM children, the most rewarding strategy is rewritten by
 * the LLM.  The mutators after it fill every slot it leaves empty, so a
 * paused or spent LLM never stops the search.  Once they have nothing
 * left, the search waits on the LLM alone, but not for ever: after
 * give_up_after (12) replies in a row that brought nothing usable (no
 * code, edits that do not apply, kernels tried already, cut-off answers,
 * failed requests) it says it may produce nothing more (stats.gave_up),
 * and the search ends "exhausted", saying why.  Its choices depend on when
 * answers arrive: a resumed search re-dispatches its saved proposals
 * exactly, but answers not yet proposed when it stopped are dropped.
 *
 * It lives in src/search/ rather than src/llm/: it is a part of the
 * search that uses the LLM client, and the client, prompts and strategy
 * population (src/llm/) know nothing of the search.
 */
#ifndef KSEARCH_MUTATOR_LLM_H
#define KSEARCH_MUTATOR_LLM_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/llm/llm.h"
#include "ksearch/search/mutator.h"

struct ks_llm_mutator_config {
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
	int give_up_after;	   /* barren replies in a row that end an exhausted search; 0: 12 */
};

/* What it did in the last run (reset when a run starts). */
struct ks_llm_mutator_stats {
	uint64_t requests, failed; /* requests answered / failed (transport, HTTP) */
	uint64_t children, ok;	   /* kernels from answers (with repairs) evaluated / verified */
	uint64_t answer_errors;	   /* answers with no usable kernel (cut-off ones included) */
	uint64_t cut_off;	   /* answers that stopped at the budget (--max-tokens) */
	uint64_t repairs;	   /* repair turns sent */
	uint64_t tuned;		   /* tuner variants evaluated */
	uint64_t rewrites;	   /* strategies the LLM rewrote */
	int gave_up; /* it ended the search waiting on it: the barren replies in a row then, else 0 */
};

/*
 * A new LLM mutator (cfg is copied; the client and strings it points to
 * are borrowed and must outlive it).  Free it with ks_mutator_free().
 */
struct ks_mutator *ks_llm_mutator_new(const struct ks_llm_mutator_config *cfg);
/* The statistics of m, which ks_llm_mutator_new() made. */
void ks_llm_mutator_stats(const struct ks_mutator *m, struct ks_llm_mutator_stats *stats);

#endif
