/*
 * mutator.h - the seam between the search loop and the things that
 * propose candidates.
 *
 * The search (search.h) owns the archive, the families, the pipeline and
 * the persistence of proposals; a mutator only proposes.  For each free
 * slot of the pipeline the search takes the next seed (every seed family
 * with its first params, once), then asks each mutator of
 * ks_search_config.mutators in turn; the first that proposes wins the
 * slot.  When none does, the search has nothing left unless a mutator
 * says it may still produce (may_produce) and later wakes it
 * (ks_mutator_host_wake()).  A mutator is then told the result of every
 * proposal it made, in proposal order, once it is in the archive.
 *
 * Adding one is a new file that fills a struct ks_mutator and defines its
 * ks_mutator_make_<name>(), and its row in the table of
 * src/search/mutators.c, which `evolve` assembles a run's list from.  The built-in one is
 * mutator_param.c (params of elites, crossover, the random fallback); the
 * LLM's is mutator_llm.c.
 *
 * Threads: every call in both directions is on the search's calling
 * thread.  Determinism: a mutator that draws from the host's generator
 * (ks_mutator_host_rng()) and decides only from the archive makes the
 * same proposals for the same seed, also across a resume, because the
 * host saves that generator with every proposal; one that waits on the
 * outside world (the LLM) keeps its own generator and makes no such
 * promise.
 */
#ifndef KSEARCH_MUTATOR_H
#define KSEARCH_MUTATOR_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ksearch/archive/archive.h"
#include "ksearch/base/error.h"
#include "ksearch/base/pcg.h"
#include "ksearch/search/search.h"

/* The most params a family may have: a proposal carries them inline. */
#define KS_MAX_PARAMS 32

/* One candidate to build and evaluate: a family at params. */
struct ks_proposal {
	size_t family; /* index among the host's families */
	int64_t params[KS_MAX_PARAMS];
	uint64_t parents[2]; /* archive ids */
	int n_parents;
	char mutation[16]; /* the record's "mutation"; says which mutator made it (mutations[]) */
	uint64_t strategy; /* the record's "prompt_id": the strategy prompt credited; 0: none */
	uint64_t tag;	   /* the mutator's own mark, handed back with the result; 0: none; not saved */
	json_t *llm;	   /* the record's "llm" field, or NULL; the search takes this reference */
};

/* The search, as a mutator sees it. */
struct ks_mutator_host;

struct ks_mutator {
	const char *name; /* "param", "llm": for logs */
	/*
	 * The record "mutation" names it proposes with, NULL-terminated: the
	 * search tells it the results of proposals with those names, also
	 * of proposals a stopped run saved and this run evaluates.
	 */
	const char *const *mutations;
	void *ctx;
	/* Once, before the first proposal; may be NULL. */
	int (*start)(void *ctx, struct ks_mutator_host *host, struct ks_error *err);
	/*
	 * Make a proposal into *p (zeroed by the caller), with one of its
	 * mutations.  The search proposes what it is given, so a mutator
	 * checks ks_mutator_host_seen() itself.
	 * Returns 0 with *p filled, 1 when it has nothing to propose now,
	 * -1 when ksearch itself failed (the search stops with err).
	 */
	int (*propose)(void *ctx, struct ks_mutator_host *host, struct ks_proposal *p, struct ks_error *err);
	/*
	 * The result of a proposal with one of its mutations (result.h) is in
	 * the archive (res: its id, its cell); may be NULL.
	 */
	int (*told)(void *ctx, struct ks_mutator_host *host, const struct ks_proposal *p,
		    const struct ks_result *result, const struct ks_archive_insert_result *res,
		    struct ks_error *err);
	/*
	 * Work of its own between results (send requests, take answers),
	 * waiting up to timeout_ms for it; stopping: the search is finishing
	 * what is in flight, start nothing new.  May be NULL; a mutator with
	 * one is polled every 100 ms when nothing else happens.
	 */
	int (*step)(void *ctx, struct ks_mutator_host *host, int timeout_ms, int stopping,
		    struct ks_error *err);
	/* Whether step() has outside work under way that the search should wait on in it; may be NULL. */
	int (*busy)(void *ctx);
	/* Whether it may still propose later, so that an exhausted search waits; may be NULL (no). */
	int (*may_produce)(void *ctx, struct ks_mutator_host *host);
	/* A fragment for the status line ("  LLM 3 answers ..."), into buf; may be NULL. */
	void (*status)(void *ctx, char *buf, size_t size);
	/* Its lines of the summary `evolve` prints after a run (what it did in the run); may be NULL. */
	void (*summary)(void *ctx, FILE *out);
	/* After the last result of the run: drop what the run held (the mutator is reused or freed); may be
	 * NULL. */
	void (*stop)(void *ctx, struct ks_mutator_host *host);
	/* Free the mutator (ctx included); may be NULL for a static one. */
	void (*free)(void *ctx);
};

/* Free a mutator made by its constructor (NULL is fine; a static one has no free and stays). */
void ks_mutator_free(const struct ks_mutator *m);

struct ks_llm_mutator_config;

/*
 * What `evolve` was asked for, as the table of mutators reads it
 * (src/search/mutators.c).  A mutator with settings of its own adds its
 * fields here and its options to src/cli/evolve.c.
 */
struct ks_mutator_settings {
	const char *search;			 /* --search: "map-elites", "random" or "greedy" */
	double knob_share;			 /* --knob-share, 0 to 1; < 0: not given */
	const struct ks_llm_mutator_config *llm; /* an open endpoint to ask (borrowed); NULL: none */
};

/*
 * A row of the table: the mutator `name` for a run with settings, or NULL
 * when it takes no part in it.  Each mutator's file defines its own,
 * `ks_mutator_make_<name>()`; the table declares it.
 */
typedef const struct ks_mutator *ks_mutator_make_fn(const struct ks_mutator_settings *settings);

/*
 * The mutators of a run with settings, in the table's order, which is the
 * order the search asks them in: *list (free it, and them, with
 * ks_mutators_free() before what settings borrowed) and its length *n.
 */
void ks_mutators_make(const struct ks_mutator_settings *settings, const struct ks_mutator ***list, size_t *n);
void ks_mutators_free(const struct ks_mutator **list, size_t n);

/* The built-in mutator (mutator_param.c): stateless, shared. */
extern const struct ks_mutator ks_mutator_param;
/*
 * Baselines for comparison (mutator_baselines.c), stateless: uniform
 * sampling of the allowed space, and a greedy neighbourhood climber.
 */
extern const struct ks_mutator ks_mutator_random;
extern const struct ks_mutator ks_mutator_greedy;

/* ---- what a mutator may ask of the search ---- */

struct ks_archive *ks_mutator_host_archive(struct ks_mutator_host *h);
const struct ks_op *ks_mutator_host_op(struct ks_mutator_host *h);
/* The run's seed (ks_search_config.seed), to seed a generator of its own. */
uint64_t ks_mutator_host_seed(struct ks_mutator_host *h);
/* The search's generator: saved with every proposal and restored on resume. */
struct ks_pcg32 *ks_mutator_host_rng(struct ks_mutator_host *h);
/* Proposals in flight at most (the pipeline's depth). */
size_t ks_mutator_host_depth(struct ks_mutator_host *h);

/*
 * The families: the seeds (index < the number of seeds), then those
 * mutators added, in order.  A family pointer stays valid for the run.
 */
size_t ks_mutator_host_n_families(struct ks_mutator_host *h);
const struct ks_family *ks_mutator_host_family(struct ks_mutator_host *h, size_t index);
/* Whether a candidate of the family verified (always, for seeds). */
int ks_mutator_host_family_ok(struct ks_mutator_host *h, size_t index);
/*
 * The family holding source: an existing one (*is_new 0), or a new one
 * named "<prefix>-<n>" (n counting every added family from 1), saved in
 * the archive so a resumed search has it, with strategy and parent
 * recorded.  A source whose ksearch block is unusable makes a broken
 * family, whose candidates are contract errors.
 */
int ks_mutator_host_add_family(struct ks_mutator_host *h, const char *prefix, const char *source,
			       uint64_t strategy, uint64_t parent, size_t *index, int *is_new,
			       struct ks_error *err);
/*
 * The family an archived candidate belongs to, or -1.  This, params_of(),
 * seen() and parents() read the archive; a read that fails answers as if nothing were there (-1,
 * "seen", no parents) and stops the search with its error after the
 * proposal under way.
 */
int ks_mutator_host_family_of(struct ks_mutator_host *h, uint64_t id);
/* An archived candidate's params in the family's order; -1 when they do not fit it. */
int ks_mutator_host_params_of(struct ks_mutator_host *h, uint64_t id, size_t family, int64_t *params);
/* Whether (family, params) is in the archive or in flight: proposing it again is wasted. */
int ks_mutator_host_seen(struct ks_mutator_host *h, size_t family, const int64_t *params);

/* Parents: the grid's elites, each with its family (family[i] < 0: not usable as a parent). */
struct ks_parents {
	struct ks_archive_elite *elites;
	size_t n;
	int *family;
	size_t usable;
};
void ks_mutator_host_parents(struct ks_mutator_host *h, struct ks_parents *pk);
void ks_parents_release(struct ks_parents *pk);
/*
 * A parent by the search's mix (--explore uniform over filled cells,
 * --exploit weighted by fitness, --recent from recently improved cells),
 * drawn from rng; returns its index in pk, which must have a usable one.
 */
size_t ks_mutator_host_pick_parent(struct ks_mutator_host *h, struct ks_pcg32 *rng,
				   const struct ks_parents *pk);

/* Append an event (owned: the host takes it) to the JSON-lines log. */
void ks_mutator_host_log(struct ks_mutator_host *h, json_t *event);
/* A line for the user, above the status line. */
void ks_mutator_host_say(struct ks_mutator_host *h, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* It has proposals again after answering 1: ask it again. */
void ks_mutator_host_wake(struct ks_mutator_host *h);
/*
 * The share of proposals that climb (--climb): an unevaluated neighbour
 * of the archive's best or of a workload's best; from 0 to 1.
 */
double ks_mutator_host_climb(struct ks_mutator_host *h);

/* ---- moves the built-in mutators share (moves.c) ---- */

/* Whether (fam, params) may be proposed: a usable family's allowed combination, not seen yet. */
int ks_move_usable(struct ks_mutator_host *host, size_t fam, const int64_t *params);
/*
 * A neighbour of (fam, base) that may be proposed: one param moved one
 * place along its list, the moves tried in a random order (the host's
 * generator).  Returns 0 with params filled, 1 when base has none left.
 */
int ks_move_neighbour(struct ks_mutator_host *host, size_t fam, const int64_t *base, int64_t *params);

#endif
