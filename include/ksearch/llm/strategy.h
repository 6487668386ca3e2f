/*
 * strategy.h - the co-evolving population of strategy prompts.
 *
 * A strategy is a few paragraphs of advice (prompts/strategies/<name>.md) put
 * into the LLM mutator's request.  They live in the archive's prompts
 * store, one JSON object per id, with their statistics:
 *
 *   {"id": 3, "name": "vector_loads", "text": "...",
 *    "origin": "seed" | "improve" | "specialise" | "generalise" | "simplify",
 *    "parent": null | id of the strategy it was rewritten from,
 *    "created_at": candidates in the archive when it was made,
 *    "active": true (false: retired by the population cap; kept for lineage),
 *    "stats": {"uses": requests sent with it, "answers": replies that gave a
 *              source, "answer_errors": replies that did not, "cut_off": of
 *              those, replies that stopped at the answer budget (--max-tokens),
 *              "children": candidates evaluated that descend from it
 *              (LLM children, their repairs and their tuned variants),
 *              "ok": of those, verified, "improvements": of those, filled
 *              or improved a cell, "best_fitness": x, "best_child": id | null,
 *              "last_error": "..." | null}}
 *
 * The search seeds the store from prompts/strategies on its first run
 * (ids from 1, in file-name order), picks one per request with UCB1 over
 * a reward of (improvements + 0.25 * ok) per use, asks the LLM every so
 * often to rewrite the most rewarding one, and keeps at most `cap`
 * strategies active by retiring the least rewarding that has been tried.
 *
 * The population is plain data the search owns; every change is written
 * back with ks_archive_prompt_put() by the caller (ks_strategy_save()).
 */
#ifndef KSEARCH_STRATEGY_H
#define KSEARCH_STRATEGY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ksearch/archive/archive.h"
#include "ksearch/base/error.h"
#include "ksearch/base/pcg.h"

/* The ways a strategy is rewritten; the rewrite prompt explains each. */
#define KS_STRATEGY_REWRITES 4
extern const char *const ks_strategy_rewrite_names[KS_STRATEGY_REWRITES];

struct ks_strategy {
	uint64_t id;
	json_t *obj; /* the stored object (owned); its fields are the truth */
};

struct ks_strategies {
	struct ks_strategy *items;
	size_t n, alloc;
	uint64_t next_id;
};

/*
 * Load every stored strategy; when the store is empty, seed it from
 * prompts_dir/strategies/<name>.md first.  An empty population afterwards is
 * an error that names the folder.
 */
int ks_strategies_load(struct ks_archive *ar, const char *prompts_dir, struct ks_strategies *pop,
		       struct ks_error *err);
void ks_strategies_release(struct ks_strategies *pop);

/* The strategy with this id, or NULL (a pointer into pop: valid until the next ks_strategy_add()). */
struct ks_strategy *ks_strategy_find(struct ks_strategies *pop, uint64_t id);
const char *ks_strategy_name(const struct ks_strategy *s);
const char *ks_strategy_text(const struct ks_strategy *s);

/* Reward per use (0 when unused), as the bandit reads it. */
double ks_strategy_reward(const struct ks_strategy *s);

/*
 * UCB1 over the active strategies: an unused one first (lowest id), else
 * the highest reward + c * sqrt(ln(total uses) / uses).  Ties go to the
 * lower id.  NULL when none is active.
 */
struct ks_strategy *ks_strategy_pick(struct ks_strategies *pop, double c);

/* Add n to a statistic ("uses", "children", ...). */
void ks_strategy_count(struct ks_strategy *s, const char *stat, int64_t n);
/* A child of this strategy was evaluated: count it, and keep the best. */
void ks_strategy_child(struct ks_strategy *s, uint64_t child_id, int ok, int improved, double fitness);
/* A reply without a usable source: count it and keep the reason. */
void ks_strategy_answer_error(struct ks_strategy *s, const char *reason);

/* Write one strategy back to the archive. */
int ks_strategy_save(struct ks_archive *ar, const struct ks_strategy *s, struct ks_error *err);

/*
 * Add a rewritten strategy (origin one of ks_strategy_rewrite_names),
 * save it, and retire the least rewarding active strategy that has at
 * least min_uses uses while more than cap are active (saving it too).
 * *added points into pop.  An add may move pop->items: it, and every
 * other pointer into pop (from ks_strategy_find() or _pick()), is valid
 * only until the next add.
 */
int ks_strategy_add(struct ks_archive *ar, struct ks_strategies *pop, const char *name, const char *text,
		    const char *origin, uint64_t parent, uint64_t created_at, size_t cap, uint64_t min_uses,
		    struct ks_strategy **added, struct ks_error *err);

#endif
