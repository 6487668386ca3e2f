/*
 * mutator_param.c - the built-in mutator: new params for the sources the
 * search has (mutator.h).
 *
 * A share of the proposals (--climb, 0.5 in evolve) climb: an unevaluated
 * neighbour (one param one place along its list) of the archive's best,
 * half the time, else of one workload's best (what a per-shape dispatch
 * is made of); a target whose neighbourhood is used up passes to the
 * next, and when all are, the proposal is an elite's as below.  Climbing
 * is what made the greedy climber beat plain MAP-Elites on gqa
 * (BENCHMARKS.md, the ablation); the elites' moves keep the grid's
 * diversity and leave local optima.
 *
 * The rest: a parent elite by the search's mix; then, one time in five, a crossover
 * with another elite of the same family (each param from either); else a
 * move of some params along their value lists.  The move grows with the
 * cell's stagnation: an elite that has stood for many evaluations since it
 * was placed (its id against the archive's count) gets more params moved,
 * and further, so a cell that stops improving is searched wider rather
 * than around the same point.  Combinations a family's constraints rule
 * out are never proposed.  Forty parents that only lead to evaluated
 * points, and it takes any allowed combination not evaluated yet, of a
 * random family that works.  Everything is drawn from the host's
 * generator and decided from the archive, so the same seed makes the same
 * proposals, across a resume too.  It has no state.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ksearch/search/mutator.h"

/* Evaluations an elite may stand before its moves widen (doubling each time it is passed again). */
#define STAGNATION_STEP 64
/* The widest move: this many params, each up to this many places along its list. */
#define MAX_STRENGTH 4

static size_t value_index(const struct ks_param *p, int64_t value)
{
	for (size_t i = 0; i < p->n_values; i++)
		if (p->values[i] == value)
			return i;
	return 0;
}

/*
 * How wide to move from an elite: 1 for a fresh one, then one more for
 * every doubling of the evaluations it has stood (STAGNATION_STEP, 2x,
 * 4x ...), up to MAX_STRENGTH.
 */
static int strength_of(uint64_t elite_id, uint64_t candidates)
{
	uint64_t age = candidates > elite_id ? candidates - elite_id : 0;
	int strength = 1;

	for (uint64_t bound = STAGNATION_STEP; age >= bound && strength < MAX_STRENGTH; bound *= 2)
		strength++;
	return strength;
}

/* Move one param up to `reach` places along its list (never off its ends, never in place). */
static int nudge(struct ks_pcg32 *rng, const struct ks_family *f, int64_t *params, int reach)
{
	size_t movable[KS_MAX_PARAMS], n = 0, k;
	const struct ks_param *p;
	int64_t at, step, last;

	for (size_t i = 0; i < f->cand.n_params; i++)
		if (f->cand.params[i].n_values > 1)
			movable[n++] = i;
	if (!n)
		return -1;
	k = movable[ks_pcg32_bounded(rng, (uint32_t)n)];
	p = &f->cand.params[k];
	at = (int64_t)value_index(p, params[k]);
	last = (int64_t)p->n_values - 1;
	step = reach > 1 ? 1 + (int64_t)ks_pcg32_bounded(rng, (uint32_t)reach) : 1;
	if (at == 0)
		at = step < last ? step : last;
	else if (at == last)
		at = at - step > 0 ? at - step : 0;
	else if (ks_pcg32_bounded(rng, 2))
		at = at + step < last ? at + step : last;
	else
		at = at - step > 0 ? at - step : 0;
	params[k] = p->values[at];
	return 0;
}

/*
 * The climb: an unevaluated neighbour of the archive's best (half the
 * time) or of a workload's best (uniformly), the targets after the one
 * drawn in turn when its neighbourhood is used up.  Returns 0 with p
 * filled, 1 when there is nothing to climb from.
 */
static int climb(struct ks_mutator_host *host, uint64_t best_id, struct ks_proposal *p)
{
	struct ks_pcg32 *rng = ks_mutator_host_rng(host);
	uint64_t targets[1 + 64]; /* the best and up to 64 workloads' */
	size_t n = 0, first;
	json_t *bests = NULL, *b;
	const char *wl;
	struct ks_error err;

	if (best_id)
		targets[n++] = best_id;
	if (ks_archive_workload_bests(ks_mutator_host_archive(host), &bests, &err) == 0) {
		json_object_foreach(bests, wl, b)
		{
			uint64_t id = (uint64_t)json_integer_value(json_object_get(b, "id"));
			size_t k = 0;

			while (k < n && targets[k] != id)
				k++;
			if (id && k == n && n < sizeof(targets) / sizeof(*targets))
				targets[n++] = id;
		}
		json_decref(bests);
	}
	if (!n)
		return 1;
	first = n == 1 || ks_pcg32_bounded(rng, 2) == 0 ? 0 : 1 + ks_pcg32_bounded(rng, (uint32_t)(n - 1));
	for (size_t k = 0; k < n; k++) {
		uint64_t id = targets[(first + k) % n];
		int64_t base[KS_MAX_PARAMS];
		int fam = ks_mutator_host_family_of(host, id);

		if (fam < 0 || ks_mutator_host_params_of(host, id, (size_t)fam, base) < 0 ||
		    ks_move_neighbour(host, (size_t)fam, base, p->params) != 0)
			continue;
		p->family = (size_t)fam;
		p->parents[0] = id;
		p->n_parents = 1;
		p->strategy = ks_mutator_host_family(host, (size_t)fam)->strategy;
		snprintf(p->mutation, sizeof(p->mutation), "climb");
		return 0;
	}
	return 1;
}

/* Whether (family, params) is worth proposing: allowed by its constraints, and new. */
static int fresh(struct ks_mutator_host *host, size_t fam, const struct ks_family *f, const int64_t *params)
{
	return ks_params_allowed(&f->cand, params, NULL, 0) && !ks_mutator_host_seen(host, fam, params);
}

/*
 * A mutation of an elite, a crossover of two, or (when those keep landing
 * on evaluated or ruled-out points) an unevaluated allowed combination of
 * a random family.
 */
static int propose(void *ctx, struct ks_mutator_host *host, struct ks_proposal *p, struct ks_error *err)
{
	struct ks_pcg32 *rng = ks_mutator_host_rng(host);
	size_t n_fams = ks_mutator_host_n_families(host);
	struct ks_archive_metrics m;
	struct ks_parents pk;
	int ret = 1;

	(void)ctx;
	if (ks_archive_metrics(ks_mutator_host_archive(host), &m, err) < 0)
		return -1;
	/* no draw at all with --climb 0: such a run makes the proposals it made before climbing was */
	if (ks_mutator_host_climb(host) > 0 && ks_pcg32_double(rng) < ks_mutator_host_climb(host) &&
	    climb(host, m.best_id, p) == 0)
		return 0;
	ks_mutator_host_parents(host, &pk);
	for (int attempt = 0; pk.usable && attempt < 40; attempt++) {
		size_t a = ks_mutator_host_pick_parent(host, rng, &pk);
		size_t fam = (size_t)pk.family[a];
		const struct ks_family *f = ks_mutator_host_family(host, fam);
		int strength = strength_of(pk.elites[a].id, m.candidates), moves;

		if (ks_mutator_host_params_of(host, pk.elites[a].id, fam, p->params) < 0)
			continue;
		p->family = fam;
		p->parents[0] = pk.elites[a].id;
		p->n_parents = 1;
		p->strategy = f->strategy;
		snprintf(p->mutation, sizeof(p->mutation), "param");
		if (ks_pcg32_double(rng) < 0.2) {
			size_t mates[256], n_mates = 0;

			for (size_t i = 0; i < pk.n && n_mates < 256; i++)
				if (i != a && pk.family[i] == (int)fam)
					mates[n_mates++] = i;
			if (n_mates) {
				size_t b = mates[ks_pcg32_bounded(rng, (uint32_t)n_mates)];
				int64_t other[KS_MAX_PARAMS];

				if (ks_mutator_host_params_of(host, pk.elites[b].id, fam, other) == 0) {
					for (size_t i = 0; i < f->cand.n_params; i++)
						if (ks_pcg32_bounded(rng, 2))
							p->params[i] = other[i];
					p->parents[1] = pk.elites[b].id;
					p->n_parents = 2;
					snprintf(p->mutation, sizeof(p->mutation), "crossover");
					if (fresh(host, fam, f, p->params)) {
						ret = 0;
						goto cleanup;
					}
				}
			}
		}
		/*
		 * a crossover that landed on an evaluated point is moved on from
		 * there; a fresh elite moves one param by one place (and a second
		 * three times in ten), a stagnant one up to `strength` params by
		 * up to `strength` places
		 */
		if (nudge(rng, f, p->params, strength) < 0)
			continue;
		moves = strength == 1 ? 1 + (ks_pcg32_double(rng) < 0.3)
				      : 1 + (int)ks_pcg32_bounded(rng, (uint32_t)strength);
		for (int k = 1; k < moves; k++)
			nudge(rng, f, p->params, strength);

		if (fresh(host, fam, f, p->params)) {
			ret = 0;
			goto cleanup;
		}
	}
	/* the neighbourhoods are used up: any allowed combination not evaluated yet, of a family that works
	 */
	p->strategy = 0;
	for (size_t tries = 0, first = ks_pcg32_bounded(rng, (uint32_t)n_fams); tries < n_fams; tries++) {
		size_t fam = (first + tries) % n_fams;
		const struct ks_family *f = ks_mutator_host_family(host, fam);
		size_t count = ks_params_count(&f->cand), start;

		if (!ks_mutator_host_family_ok(host, fam))
			continue;
		if (count == SIZE_MAX || count > 1000000)
			count = 1000000;
		start = ks_pcg32_bounded(rng, (uint32_t)count);
		for (size_t k = 0; k < count; k++) {
			ks_params_nth(&f->cand, (start + k) % count, p->params);
			if (fresh(host, fam, f, p->params)) {
				p->family = fam;
				p->n_parents = 0;
				p->strategy = f->strategy;
				snprintf(p->mutation, sizeof(p->mutation), "random");
				ret = 0;
				goto cleanup;
			}
		}
	}
cleanup:
	ks_parents_release(&pk);
	return ret;
}

static const char *const mutations[] = { "climb", "param", "crossover", "random", NULL };

const struct ks_mutator ks_mutator_param = {
	.name = "param",
	.mutations = mutations,
	.propose = propose,
};

/* the built-in moves of --search map-elites, the default */
const struct ks_mutator *ks_mutator_make_param(const struct ks_mutator_settings *settings)
{
	return strcmp(settings->search, "map-elites") ? NULL : &ks_mutator_param;
}
