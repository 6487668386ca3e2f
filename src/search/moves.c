/*
 * moves.c - the moves the built-in mutators share (mutator.h): whether a
 * combination may be proposed, and a step to an unevaluated neighbour.
 * Everything is drawn from the host's generator and decided from the
 * archive, so the same seed makes the same moves.
 */
#include <stdint.h>
#include <string.h>

#include "ksearch/search/mutator.h"

int ks_move_usable(struct ks_mutator_host *host, size_t fam, const int64_t *params)
{
	const struct ks_family *f = ks_mutator_host_family(host, fam);

	return !f->broken && ks_params_allowed(&f->cand, params, NULL, 0) &&
	       !ks_mutator_host_seen(host, fam, params);
}

int ks_move_neighbour(struct ks_mutator_host *host, size_t fam, const int64_t *base, int64_t *params)
{
	struct ks_pcg32 *rng = ks_mutator_host_rng(host);
	const struct ks_family *f = ks_mutator_host_family(host, fam);
	size_t moves[2 * KS_MAX_PARAMS], n = 0;

	for (size_t i = 0; i < f->cand.n_params && i < KS_MAX_PARAMS; i++) {
		moves[n++] = 2 * i;	/* one place down */
		moves[n++] = 2 * i + 1; /* one place up */
	}
	/* Fisher-Yates: every order of the moves as likely */
	for (size_t i = n; i > 1; i--) {
		size_t j = ks_pcg32_bounded(rng, (uint32_t)i), t = moves[i - 1];

		moves[i - 1] = moves[j];
		moves[j] = t;
	}
	for (size_t m = 0; m < n; m++) {
		size_t k = moves[m] / 2;
		const struct ks_param *par = &f->cand.params[k];
		size_t at = 0;

		while (at < par->n_values && par->values[at] != base[k])
			at++;
		if (at == par->n_values || (moves[m] % 2 ? at + 1 >= par->n_values : at == 0))
			continue;
		memcpy(params, base, f->cand.n_params * sizeof(*base));
		params[k] = par->values[moves[m] % 2 ? at + 1 : at - 1];
		if (ks_move_usable(host, fam, params))
			return 0;
	}
	return 1;
}
