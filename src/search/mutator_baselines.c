/*
 * mutator_baselines.c - two plain searches over the same design spaces,
 * for comparison with the MAP-Elites mutator (`evolve --search random`,
 * `--search greedy`; tools/ablate-search.sh runs all three).
 *
 *  - random: every proposal a combination drawn uniformly from the whole
 *    allowed space of all seed families (each family weighted by the size
 *    of its allowed space), skipping evaluated ones.  No parents.
 *  - greedy: a neighbourhood climber.  From the best ok candidate so far
 *    (the archive's best), propose its unevaluated allowed neighbours (one
 *    param moved one place) in a random order; when the best has none
 *    left, it is a local optimum: restart from an unevaluated random
 *    combination, and climb from whatever becomes best.
 *
 * Both draw from the host's generator and decide from the archive, so the
 * same seed makes the same proposals.  Neither keeps state.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ksearch/search/mutator.h"

/* Draws before a sampler gives up on a space that is nearly all evaluated or ruled out. */
#define MAX_DRAWS 4096

/*
 * A uniform draw from the union of the families' spaces (raw combinations;
 * ruled-out ones are drawn again, which keeps the draw uniform over the
 * allowed ones).  Returns 0 with p filled, 1 after MAX_DRAWS misses.
 */
static int draw_uniform(struct ks_mutator_host *host, struct ks_proposal *p, const char *mutation)
{
	struct ks_pcg32 *rng = ks_mutator_host_rng(host);
	size_t n_fams = ks_mutator_host_n_families(host);
	double total = 0;

	for (size_t fam = 0; fam < n_fams; fam++)
		total += (double)ks_params_count(&ks_mutator_host_family(host, fam)->cand);
	if (!(total > 0))
		return 1;
	for (int draw = 0; draw < MAX_DRAWS; draw++) {
		double at = ks_pcg32_double(rng) * total;
		size_t fam = 0, count;
		uint64_t index;

		for (; fam + 1 < n_fams; fam++) {
			double c = (double)ks_params_count(&ks_mutator_host_family(host, fam)->cand);

			if (at < c)
				break;
			at -= c;
		}
		count = ks_params_count(&ks_mutator_host_family(host, fam)->cand);
		index = ((uint64_t)ks_pcg32_next(rng) << 32 | ks_pcg32_next(rng)) % (count ? count : 1);
		ks_params_nth(&ks_mutator_host_family(host, fam)->cand, (size_t)index, p->params);
		if (!ks_move_usable(host, fam, p->params))
			continue;
		p->family = fam;
		p->n_parents = 0;
		snprintf(p->mutation, sizeof(p->mutation), "%s", mutation);
		return 0;
	}
	return 1;
}

static int random_propose(void *ctx, struct ks_mutator_host *host, struct ks_proposal *p,
			  struct ks_error *err)
{
	(void)ctx;
	(void)err;
	return draw_uniform(host, p, "uniform");
}

static int greedy_propose(void *ctx, struct ks_mutator_host *host, struct ks_proposal *p,
			  struct ks_error *err)
{
	struct ks_archive_metrics m;
	int64_t base[KS_MAX_PARAMS];
	int fam;

	(void)ctx;
	if (ks_archive_metrics(ks_mutator_host_archive(host), &m, err) < 0)
		return -1;
	if (m.best_id && (fam = ks_mutator_host_family_of(host, m.best_id)) >= 0 &&
	    ks_mutator_host_params_of(host, m.best_id, (size_t)fam, base) == 0 &&
	    ks_move_neighbour(host, (size_t)fam, base, p->params) == 0) {
		p->family = (size_t)fam;
		p->parents[0] = m.best_id;
		p->n_parents = 1;
		snprintf(p->mutation, sizeof(p->mutation), "climb");
		return 0;
	}
	/* a local optimum (or nothing ok yet): restart somewhere new */
	return draw_uniform(host, p, "restart");
}

static const char *const random_mutations[] = { "uniform", NULL };
static const char *const greedy_mutations[] = { "climb", "restart", NULL };

const struct ks_mutator ks_mutator_random = {
	.name = "random",
	.mutations = random_mutations,
	.propose = random_propose,
};

const struct ks_mutator ks_mutator_greedy = {
	.name = "greedy",
	.mutations = greedy_mutations,
	.propose = greedy_propose,
};

const struct ks_mutator *ks_mutator_make_random(const struct ks_mutator_settings *settings)
{
	return strcmp(settings->search, "random") ? NULL : &ks_mutator_random;
}

const struct ks_mutator *ks_mutator_make_greedy(const struct ks_mutator_settings *settings)
{
	return strcmp(settings->search, "greedy") ? NULL : &ks_mutator_greedy;
}
