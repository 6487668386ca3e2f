/*
 * test_map.c - base/map.h: every key put is found with its value, through
 * growth and through keys that collide in every table size the test
 * reaches; keys that differ only in length or in a NUL are different
 * keys; entries keep their insertion order; a released map is empty and
 * usable again.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ksearch/base/map.h"

static void test_an_empty_map_finds_nothing(void **state)
{
	struct ks_map map = KS_MAP_INIT;
	uint64_t zero = 0;

	(void)state;
	assert_int_equal(ks_map_count(&map), 0);
	assert_null(ks_map_get(&map, "a", 1));
	assert_null(ks_map_get(&map, "", 0));
	assert_null(ks_map_get(&map, &zero, sizeof(zero)));
	ks_map_release(&map);
	ks_map_release(&map); /* twice is fine: released is empty */
}

static void test_put_then_get_in_insertion_order(void **state)
{
	static const char *words[] = { "evolve", "archive", "check", "report", "export-best", "profile" };
	struct ks_map map;
	int added = -1;

	(void)state;
	ks_map_init(&map);
	for (size_t i = 0; i < 6; i++) {
		uint64_t *v = ks_map_put(&map, words[i], strlen(words[i]), &added);

		assert_int_equal(added, 1);
		assert_true(*v == 0); /* a new entry starts at 0 */
		*v = 100 + i;
	}
	/* putting again finds the entry and leaves its value */
	assert_true(*ks_map_put(&map, "check", 5, &added) == 102);
	assert_int_equal(added, 0);
	assert_true(*ks_map_put(&map, "report", 6, NULL) == 103);
	assert_int_equal(ks_map_count(&map), 6);
	for (size_t i = 0; i < 6; i++) {
		size_t len;
		const char *key = ks_map_key(&map, i, &len);

		assert_int_equal(len, strlen(words[i]));
		assert_memory_equal(key, words[i], len);
		assert_true(*ks_map_value(&map, i) == 100 + i);
		assert_true(*ks_map_get(&map, words[i], strlen(words[i])) == 100 + i);
	}
	assert_null(ks_map_get(&map, "evolv", 5));
	assert_null(ks_map_get(&map, "evolve!", 7));
	ks_map_release(&map);
}

static void test_keys_differing_in_length_or_a_nul_are_different(void **state)
{
	/* a string key is its bytes without the NUL: "ab" and "ab\0" are two keys, "" a third */
	static const struct {
		const char *bytes;
		size_t len;
	} keys[] = { { "", 0 },	    { "a", 1 },	 { "a\0", 2 }, { "ab", 2 },
		     { "a\0b", 3 }, { "\0", 1 }, { "\0\0", 2 } };
	struct ks_map map = KS_MAP_INIT;
	int added;

	(void)state;
	for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++) {
		*ks_map_put(&map, keys[i].bytes, keys[i].len, &added) = i + 1;
		assert_int_equal(added, 1);
	}
	for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++) {
		size_t len;

		assert_true(*ks_map_get(&map, keys[i].bytes, keys[i].len) == i + 1);
		ks_map_key(&map, i, &len);
		assert_int_equal(len, keys[i].len);
	}
	ks_map_release(&map);
}

/*
 * Keys whose hashes agree in their low 16 bits share a home slot in every
 * table up to 65536 slots, so each lookup walks past the others: the map
 * must still tell them apart by their bytes.
 */
static void test_keys_sharing_a_home_slot_stay_apart(void **state)
{
	char keys[40][24];
	size_t n = 0;
	struct ks_map map = KS_MAP_INIT;
	uint64_t home = 0;

	(void)state;
	for (unsigned long i = 0; n < 40; i++) {
		char key[24];
		int len = snprintf(key, sizeof(key), "k%lu", i);
		uint64_t h = ks_map_hash(key, (size_t)len) & 0xffff;

		if (!n)
			home = h;
		if (h == home)
			strcpy(keys[n++], key);
	}
	for (size_t i = 0; i < n; i++)
		*ks_map_put(&map, keys[i], strlen(keys[i]), NULL) = i;
	/* other keys between them, so that the table grows past 16 and 1024 slots with the chain in it */
	for (uint64_t i = 0; i < 3000; i++)
		*ks_map_put(&map, &i, sizeof(i), NULL) = 1000000 + i;
	for (size_t i = 0; i < n; i++) {
		uint64_t *v = ks_map_get(&map, keys[i], strlen(keys[i]));

		assert_non_null(v);
		assert_true(*v == i);
	}
	assert_null(ks_map_get(&map, "k", 1));
	assert_int_equal(ks_map_count(&map), n + 3000);
	ks_map_release(&map);
}

/* Many integer keys, against a plain array of which were put: growth keeps every entry. */
static void test_growth_keeps_every_entry(void **state)
{
	enum { N = 200000, RANGE = 3 * N };
	static unsigned char in[RANGE];
	struct ks_map map = KS_MAP_INIT;
	uint64_t x = 42;
	size_t count = 0;

	(void)state;
	memset(in, 0, sizeof(in));
	for (int i = 0; i < N; i++) {
		uint64_t key;
		int added;

		x = x * 6364136223846793005ull + 1442695040888963407ull;
		key = (x >> 33) % RANGE;
		*ks_map_put(&map, &key, sizeof(key), &added) = key * 7;
		assert_int_equal(added, !in[key]);
		count += !in[key];
		in[key] = 1;
		assert_int_equal(ks_map_count(&map), count);
	}
	assert_true(map.n_slots >= 2 * count && !(map.n_slots & (map.n_slots - 1)));
	for (uint64_t key = 0; key < RANGE; key++) {
		uint64_t *v = ks_map_get(&map, &key, sizeof(key));

		if (in[key]) {
			assert_non_null(v);
			assert_true(*v == key * 7);
		} else {
			assert_null(v);
		}
	}
	ks_map_release(&map);
	assert_int_equal(ks_map_count(&map), 0);
	assert_null(ks_map_get(&map, &x, sizeof(x)));
	/* and usable again */
	*ks_map_put(&map, "again", 5, NULL) = 5;
	assert_true(*ks_map_get(&map, "again", 5) == 5);
	ks_map_release(&map);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_an_empty_map_finds_nothing),
		cmocka_unit_test(test_put_then_get_in_insertion_order),
		cmocka_unit_test(test_keys_differing_in_length_or_a_nul_are_different),
		cmocka_unit_test(test_keys_sharing_a_home_slot_stay_apart),
		cmocka_unit_test(test_growth_keeps_every_entry),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
