/*
 * test_pcg.c - PCG32 against the reference implementation's published
 * output, plus the properties the search relies on: bounded draws are in
 * range and unbiased, streams differ, a copied state replays.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "ksearch/base/pcg.h"

/*
 * Output of pcg32-demo (seed 42u, stream 54u, 5 rounds) as published in
 * imneme/pcg-c, test-high/expected/check-pcg32.out; round 1 and round 5
 * also appear in pcg-c-basic's documentation on pcg-random.org.  Each
 * round draws 6 raw values, 65 coins (bound 2), 33 dice (bound 6) and
 * a Fisher-Yates shuffle of 52 cards (bounds 52 down to 2), so it pins
 * ks_pcg32_bounded() as well as ks_pcg32_next().
 */
static const struct demo_round {
	uint32_t raw[6];
	const char *coins;
	const char *rolls;
	const char *cards;
} demo_rounds[] = {
	{
		{ 0xa15c02b7, 0x7b47f409, 0xba1d3330, 0x83d2f293, 0xbfa4784b, 0xcbed606e },
		"HHTTTHTHHHTHTTTHHHHHTTTHHHTHTHTHTTHTTTHHHHHHTTTTHHTTTTTHTTTTTTTHT",
		"3 4 1 1 2 2 3 2 4 3 2 4 3 3 5 2 3 1 3 1 5 1 4 1 5 6 4 6 6 2 6 3 3",
		"Qd Ks 6d 3s 3d 4c 3h Td Kc 5c Jh Kd Jd As 4s 4h Ad Th Ac Jc 7s Qs "
		"2s 7h Kh 2d 6c Ah 4d Qh 9h 6s 5s 2c 9c Ts 8d 9s 3c 8c Js 5d 2h 6h "
		"7d 8s 9d 5h 8h Qc 7c Tc",
	},
	{
		{ 0x74ab93ad, 0x1c1da000, 0x494ff896, 0x34462f2f, 0xd308a3e5, 0x0fa83bab },
		"HHHHHHHHHHTHHHTHTHTHTHTTTTHHTTTHHTHHTHTTHHTTTHHHHHHTHTTHTHTTTTTTT",
		"5 1 1 3 3 2 4 5 3 2 2 6 4 3 2 4 2 4 3 2 3 6 3 2 3 4 2 4 1 1 5 4 4",
		"7d 2s 7h Td 8s 3c 3d Js 2d Tc 4h Qs 5c 9c Th 2c Jc Qd 9d Qc 7s 3s "
		"5s 6h 4d Jh 4c Ac 4s 5h 5d Kc 8h 8d Jd 9s Ad 6s 6c Kd 2h 3h Kh Ts "
		"Qh 9h 6d As 7c Ks Ah 8c",
	},
	{
		{ 0x39af5f9f, 0x04196b18, 0xc3c3eb28, 0xc076c60c, 0xc693e135, 0xf8f63932 },
		"HTTHHTTTTTHTTHHHTHTTHHTTHTHHTHTHTTTTHHTTTHHTHHTTHTTHHHTHHHTHTTTHT",
		"5 1 5 3 2 2 4 5 3 3 1 3 4 6 3 2 3 4 2 2 3 1 5 2 4 6 6 4 2 4 3 3 6",
		"Kd Jh Kc Qh 4d Qc 4h 9d 3c Kh Qs 8h 5c Jd 7d 8d 3h 7c 8s 3s 2h Ks "
		"9c 9h 2c 8c Ad 7s 4s 2s 5h 6s 4c Ah 7h 5s Ac 3d 5d Qd As Tc 6h 9s "
		"2d 6c 6d Td Jc Ts Th Js",
	},
	{
		{ 0x55ce6851, 0x97a7726d, 0x17e10815, 0x58007d43, 0x962fb148, 0xb9bb55bd },
		"HHTHHTTTTHTHHHHHTTHHHTTTHHTHTHTHTHHTTHTHHHHHHTHHTHHTHHTTTTHHTHHTT",
		"6 6 3 2 3 4 2 6 4 2 6 3 2 3 5 5 3 4 4 6 6 2 6 5 4 4 6 1 6 1 3 6 5",
		"Qd 8h 5d 8s 8d Ts 7h Th Qs Js 7s Kc 6h 5s 4d Ac Jd 7d 7c Td 2c 6s "
		"5h 6d 3s Kd 9s Jh Kh As Ah 9h 3c Qh 9c 2d Tc 9d 2s 3d Ks 4h Qc Ad "
		"Jc 8c 2h 3h 4s 4c 5c 6c",
	},
	{
		{ 0xfcef7cd6, 0x1b488b5a, 0xd0daf7ea, 0x1d9a70f7, 0x241a37cf, 0x9a3857b7 },
		"HHHHTHHTTHTTHHHTTTHHTHTHTTTTHTTHTHTTTHHHTHTHTTHTTHTHHTHTHHHTHTHTT",
		"5 4 1 2 6 1 3 1 5 6 3 6 2 1 4 4 5 2 1 5 6 5 6 4 4 4 5 2 6 4 3 5 6",
		"4d 9s Qc 9h As Qs 7s 4c Kd 6h 6s 2c 8c 5d 7h 5h Jc 3s 7c Jh Js Ks "
		"Tc Jd Kc Th 3h Ts Qh Ad Td 3c Ah 2d 3d 5c Ac 8s 5s 9c 2h 6c 6d Kh "
		"Qd 8d 7d 2s 8h 4h 9d 4s",
	},
};

static void test_pcg32_reproduces_reference_demo(void **state)
{
	static const char number[] = "A23456789TJQK";
	static const char suit[] = "hcds";
	struct ks_pcg32 rng;
	size_t round;

	(void)state;
	ks_pcg32_seed(&rng, 42u, 54u);
	for (round = 0; round < sizeof(demo_rounds) / sizeof(demo_rounds[0]); round++) {
		const struct demo_round *want = &demo_rounds[round];
		char coins[66], rolls[128], cards[256];
		char deck[52];
		size_t len = 0;
		int i;

		for (i = 0; i < 6; i++)
			assert_int_equal(ks_pcg32_next(&rng), want->raw[i]);

		for (i = 0; i < 65; i++)
			coins[i] = ks_pcg32_bounded(&rng, 2) ? 'H' : 'T';
		coins[65] = '\0';
		assert_string_equal(coins, want->coins);

		for (i = 0; i < 33; i++) {
			rolls[len++] = (char)('1' + ks_pcg32_bounded(&rng, 6));
			rolls[len++] = ' ';
		}
		rolls[len - 1] = '\0';
		assert_string_equal(rolls, want->rolls);

		for (i = 0; i < 52; i++)
			deck[i] = (char)i;
		for (i = 52; i > 1; i--) {
			uint32_t chosen = ks_pcg32_bounded(&rng, (uint32_t)i);
			char card = deck[chosen];

			deck[chosen] = deck[i - 1];
			deck[i - 1] = card;
		}
		len = 0;
		for (i = 0; i < 52; i++) {
			cards[len++] = number[deck[i] / 4];
			cards[len++] = suit[deck[i] % 4];
			cards[len++] = ' ';
		}
		cards[len - 1] = '\0';
		assert_string_equal(cards, want->cards);
	}
}

/* Chi-square of counts against a uniform expectation. */
static double chi_square(const unsigned *counts, unsigned bins, unsigned draws)
{
	double expected = (double)draws / bins;
	double sum = 0;
	unsigned i;

	for (i = 0; i < bins; i++) {
		double d = counts[i] - expected;

		sum += d * d / expected;
	}
	return sum;
}

static void test_bounded_small_bounds_in_range_and_uniform(void **state)
{
	/*
	 * 99.9th percentiles of chi-square with bound-1 degrees of freedom;
	 * with a fixed seed the test is deterministic, the limits only say
	 * how far from uniform is too far.
	 */
	static const struct {
		uint32_t bound;
		double limit;
	} cases[] = {
		{ 2, 10.83 }, { 3, 13.82 }, { 6, 20.52 }, { 7, 22.46 }, { 10, 27.88 },
	};
	enum { DRAWS = 100000 };
	size_t c;

	(void)state;
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		unsigned counts[10] = { 0 };
		struct ks_pcg32 rng;
		unsigned i;

		ks_pcg32_seed(&rng, 12345u + c, 7u);
		for (i = 0; i < DRAWS; i++) {
			uint32_t v = ks_pcg32_bounded(&rng, cases[c].bound);

			assert_true(v < cases[c].bound);
			counts[v]++;
		}
		for (i = 0; i < cases[c].bound; i++)
			assert_true(counts[i] > 0);
		assert_true(chi_square(counts, cases[c].bound, DRAWS) < cases[c].limit);
	}
}

static void test_bounded_large_bound_has_no_modulo_bias(void **state)
{
	/*
	 * With bound = 3 * 2^30, a plain r % bound would land in the lowest
	 * third twice as often as in either other third (P = 1/2 instead of
	 * 1/3); rejection sampling must keep it at 1/3.
	 */
	const uint32_t bound = 3u << 30;
	enum { DRAWS = 60000 };
	struct ks_pcg32 rng;
	unsigned low = 0, i;
	double fraction;

	(void)state;
	ks_pcg32_seed(&rng, 2024u, 3u);
	for (i = 0; i < DRAWS; i++) {
		uint32_t v = ks_pcg32_bounded(&rng, bound);

		assert_true(v < bound);
		if (v < (1u << 30))
			low++;
	}
	fraction = (double)low / DRAWS;
	assert_true(fabs(fraction - 1.0 / 3.0) < 0.01);
}

static void test_bounded_one_is_always_zero(void **state)
{
	struct ks_pcg32 rng;
	int i;

	(void)state;
	ks_pcg32_seed(&rng, 1u, 1u);
	for (i = 0; i < 1000; i++)
		assert_int_equal(ks_pcg32_bounded(&rng, 1), 0);
}

static void test_streams_differ(void **state)
{
	struct ks_pcg32 a, b;
	int i, same = 0;

	(void)state;
	ks_pcg32_seed(&a, 42u, 54u);
	ks_pcg32_seed(&b, 42u, 55u);
	assert_true(a.inc != b.inc);
	assert_true(a.inc & 1);
	assert_true(b.inc & 1);
	for (i = 0; i < 1000; i++)
		if (ks_pcg32_next(&a) == ks_pcg32_next(&b))
			same++;
	/* Two independent 32-bit sequences agree by chance ~1000/2^32 times. */
	assert_true(same <= 1);
}

static void test_seeds_differ(void **state)
{
	struct ks_pcg32 a, b;
	int i, same = 0;

	(void)state;
	ks_pcg32_seed(&a, 1u, 54u);
	ks_pcg32_seed(&b, 2u, 54u);
	for (i = 0; i < 1000; i++)
		if (ks_pcg32_next(&a) == ks_pcg32_next(&b))
			same++;
	assert_true(same <= 1);
}

static void test_copied_state_replays(void **state)
{
	struct ks_pcg32 rng, saved;
	uint32_t first[100];
	int i;

	(void)state;
	ks_pcg32_seed(&rng, 987654321u, 11u);
	for (i = 0; i < 37; i++)
		ks_pcg32_next(&rng);
	memcpy(&saved, &rng, sizeof(saved));
	for (i = 0; i < 100; i++)
		first[i] = ks_pcg32_next(&rng);
	rng = saved;
	for (i = 0; i < 100; i++)
		assert_int_equal(ks_pcg32_next(&rng), first[i]);
}

static void test_double_uses_53_bits_in_unit_interval(void **state)
{
	struct ks_pcg32 rng, twin;
	double sum = 0;
	int i, low_bits_seen = 0;

	(void)state;
	ks_pcg32_seed(&rng, 42u, 54u);
	twin = rng;
	/* First draw is the high word: 0xa15c02b7 0x7b47f409, top 53 bits. */
	{
		uint64_t hi = ks_pcg32_next(&twin), lo = ks_pcg32_next(&twin);
		uint64_t bits = ((hi << 32) | lo) >> 11;

		assert_true(ks_pcg32_double(&rng) == (double)bits / 9007199254740992.0);
		assert_true(bits == ((0xa15c02b77b47f409ULL) >> 11));
	}
	for (i = 0; i < 100000; i++) {
		double d = ks_pcg32_double(&rng);
		double scaled = d * 9007199254740992.0;

		assert_true(d >= 0.0 && d < 1.0);
		assert_true(scaled == floor(scaled));
		/* Bits below 2^-32 come from the second draw. */
		if (fmod(scaled, 2097152.0) != 0.0)
			low_bits_seen++;
		sum += d;
	}
	assert_true(low_bits_seen > 99000);
	assert_true(fabs(sum / 100000 - 0.5) < 0.005);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pcg32_reproduces_reference_demo),
		cmocka_unit_test(test_bounded_small_bounds_in_range_and_uniform),
		cmocka_unit_test(test_bounded_large_bound_has_no_modulo_bias),
		cmocka_unit_test(test_bounded_one_is_always_zero),
		cmocka_unit_test(test_streams_differ),
		cmocka_unit_test(test_seeds_differ),
		cmocka_unit_test(test_copied_state_replays),
		cmocka_unit_test(test_double_uses_53_bits_in_unit_interval),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
