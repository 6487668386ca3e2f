/*
 * test_hash.c - the mixers and FNV-1a of base/hash.h give the published
 * values, and the same bits as the copies they replaced (worker.c,
 * profile_run.c, gpukit.c, answer.c): seeds derived from them are
 * measured against, so a changed bit is a changed measurement.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "ksearch/base/hash.h"

/* The copies as they stood, before base/hash.c. */
static uint64_t old_mix64_pair(uint64_t a, uint64_t b)
{
	uint64_t z = a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t old_worker_fnv(const char *text)
{
	uint64_t h = 1469598103934665603ull;

	while (*text)
		h = (h ^ (unsigned char)*text++) * 1099511628211ull;
	return h;
}

static void test_published_values(void **state)
{
	(void)state;
	/* SplitMix64 seeded 0: its first output is the finaliser of the golden gamma */
	assert_true(ks_mix64(0x9e3779b97f4a7c15ull) == 0xe220a8397b1dcdafull);
	assert_true(ks_mix64(0) == 0);
	/* FNV-1a 64 test vectors */
	assert_true(ks_fnv1a("", 0) == 0xcbf29ce484222325ull);
	assert_true(ks_fnv1a("a", 1) == 0xaf63dc4c8601ec8cull);
	assert_true(ks_fnv1a("foobar", 6) == 0x85944171f73967e8ull);
}

static void test_the_same_bits_as_the_copies_replaced(void **state)
{
	static const char *names[] = { "", "gqa", "mla_decode", "rmsnorm", "n4096_h32", "softmax/rows=8" };
	uint64_t x = 1;

	(void)state;
	for (int i = 0; i < 1000; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		assert_true(ks_mix64_pair(x, (uint64_t)i + 1) == old_mix64_pair(x, (uint64_t)i + 1));
		assert_true(ks_mix64_pair(x, x >> 7) == old_mix64_pair(x, x >> 7));
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		assert_true(ks_fnv1a_from(1469598103934665603ull, names[i], strlen(names[i])) ==
			    old_worker_fnv(names[i]));
}

static void test_fnv1a_from_continues_a_hash(void **state)
{
	(void)state;
	assert_true(ks_fnv1a_from(ks_fnv1a("foo", 3), "bar", 3) == ks_fnv1a("foobar", 6));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_published_values),
		cmocka_unit_test(test_the_same_bits_as_the_copies_replaced),
		cmocka_unit_test(test_fnv1a_from_continues_a_hash),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
