/*
 * mutator_param.c - the built-in mutator: new params for the sources the
 * search has (mutator.h).
 *
 * A parent elite by the search's mix; then, one time in five, a crossover
 * with another elite of the same family (each param from either); else
 * one param moved to a neighbouring value of its list, and three times in
 * ten a second one.  Forty parents that only lead to evaluated points, and
 * it takes any combination not evaluated yet, of a random family that
 * works.  Everything is drawn from the host's generator, so the same seed
 * makes the same proposals, across a resume too.  It has no state.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ksearch/search/mutator.h"

static size_t value_index(const struct ks_param *p, int64_t value)
{
	for (size_t i = 0; i < p->n_values; i++)
		if (p->values[i] == value)
			return i;
	return 0;
}

/* Move one param to a neighbouring value of its list. */
static int nudge(struct ks_pcg32 *rng, const struct ks_family *f, int64_t *params)
{
	size_t movable[KS_MAX_PARAMS], n = 0, k;
	const struct ks_param *p;
	size_t at;

	for (size_t i = 0; i < f->cand.n_params; i++)
		if (f->cand.params[i].n_values > 1)
			movable[n++] = i;
	if (!n)
		return -1;
	k = movable[ks_pcg32_bounded(rng, (uint32_t)n)];
	p = &f->cand.params[k];
	at = value_index(p, params[k]);
	if (at == 0)
		at = 1;
	else if (at == p->n_values - 1)
		at--;
	else
		at = ks_pcg32_bounded(rng, 2) ? at + 1 : at - 1;
	params[k] = p->values[at];
	return 0;
}

/*
 * A mutation of an elite, a crossover of two, or (when those keep landing
 * on evaluated points) an unevaluated combination of a random family.
 */
static int propose(void *ctx, struct ks_mutator_host *host, struct ks_proposal *p, struct ks_error *err)
{
	struct ks_pcg32 *rng = ks_mutator_host_rng(host);
	size_t n_fams = ks_mutator_host_n_families(host);
	struct ks_parents pk;
	int ret = 1;

	(void)ctx;
	(void)err;
	ks_mutator_host_parents(host, &pk);
	for (int attempt = 0; pk.usable && attempt < 40; attempt++) {
		size_t a = ks_mutator_host_pick_parent(host, rng, &pk);
		size_t fam = (size_t)pk.family[a];
		const struct ks_family *f = ks_mutator_host_family(host, fam);

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
					if (!ks_mutator_host_seen(host, fam, p->params)) {
						ret = 0;
						goto cleanup;
					}
				}
			}
		}
		/* a crossover that landed on an evaluated point is moved on from there */
		if (nudge(rng, f, p->params) < 0)
			continue;
		if (ks_pcg32_double(rng) < 0.3)
			nudge(rng, f, p->params);
		if (!ks_mutator_host_seen(host, fam, p->params)) {
			ret = 0;
			goto cleanup;
		}
	}
	/* the neighbourhoods are used up: any combination not evaluated yet, of a family that works */
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
			if (!ks_mutator_host_seen(host, fam, p->params)) {
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

static const char *const mutations[] = { "param", "crossover", "random", NULL };

const struct ks_mutator ks_mutator_param = {
	.name = "param",
	.mutations = mutations,
	.propose = propose,
};
