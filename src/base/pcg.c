/*
 * pcg.c - PCG32 (PCG-XSH-RR 64/32), as in O'Neill's pcg_basic.c.
 *
 * The constants and the order of operations must match the reference
 * exactly: saved search states and the published test vectors depend on
 * every bit of it.
 */
#include "ksearch/base/pcg.h"

#define PCG32_MULT 6364136223846793005ULL

void ks_pcg32_seed(struct ks_pcg32 *rng, uint64_t initstate, uint64_t initseq)
{
	rng->state = 0;
	rng->inc = (initseq << 1) | 1;
	ks_pcg32_next(rng);
	rng->state += initstate;
	ks_pcg32_next(rng);
}

uint32_t ks_pcg32_next(struct ks_pcg32 *rng)
{
	uint64_t oldstate = rng->state;
	uint32_t xorshifted, rot;

	rng->state = oldstate * PCG32_MULT + rng->inc;
	/* The output permutes the old state, as in the reference, so it does not wait on the multiply. */
	xorshifted = (uint32_t)(((oldstate >> 18) ^ oldstate) >> 27);
	rot = (uint32_t)(oldstate >> 59);
	return (xorshifted >> rot) | (xorshifted << ((-rot) & 31));
}

uint32_t ks_pcg32_bounded(struct ks_pcg32 *rng, uint32_t bound)
{
	uint32_t threshold;

	/* bound 0 breaks the contract; answer 0 rather than trap on % 0. */
	if (bound == 0)
		return 0;
	/*
	 * Reject the lowest (2^32 mod bound) outputs so that the accepted
	 * range is a whole multiple of bound and r % bound is unbiased;
	 * -bound % bound is 2^32 mod bound in 32-bit arithmetic.
	 */
	threshold = (0u - bound) % bound;
	for (;;) {
		uint32_t r = ks_pcg32_next(rng);

		if (r >= threshold)
			return r % bound;
	}
}

double ks_pcg32_double(struct ks_pcg32 *rng)
{
	/* First draw gives the high bits; 64 bits are cut to the 53 a double holds exactly. */
	uint64_t hi = ks_pcg32_next(rng);
	uint64_t lo = ks_pcg32_next(rng);
	uint64_t bits = ((hi << 32) | lo) >> 11;

	return (double)bits * (1.0 / 9007199254740992.0); /* 2^53 */
}
