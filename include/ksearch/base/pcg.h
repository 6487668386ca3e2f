/*
 * pcg.h - PCG32 random numbers (O'Neill, "PCG: A Family of Simple Fast
 * Space-Efficient Statistically Good Algorithms for Random Number
 * Generation", 2014; the pcg32 = PCG-XSH-RR 64/32 generator of the
 * reference C implementation, pcg_basic.c).
 *
 * Every random choice ksearch makes goes through one of these, so a search
 * is reproducible from its seed and resumable from its saved state.  The
 * struct is plain data: copy it, store it, restore it.
 */
#ifndef KSEARCH_PCG_H
#define KSEARCH_PCG_H

#include <stdint.h>

struct ks_pcg32 {
	uint64_t state;
	uint64_t inc; /* always odd: selects the stream */
};

/* pcg32_srandom_r: seed with an initial state and a stream selector. */
void ks_pcg32_seed(struct ks_pcg32 *rng, uint64_t initstate, uint64_t initseq);

/* pcg32_random_r: the next uniformly distributed 32-bit value. */
uint32_t ks_pcg32_next(struct ks_pcg32 *rng);

/*
 * pcg32_boundedrand_r: uniform in [0, bound) without modulo bias.
 * bound must be > 0.
 */
uint32_t ks_pcg32_bounded(struct ks_pcg32 *rng, uint32_t bound);

/* Uniform double in [0, 1) with 53 random bits (two draws). */
double ks_pcg32_double(struct ks_pcg32 *rng);

#endif
