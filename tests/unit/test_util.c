/*
 * test_util.c - the growable array (KS_ALLOC_GROW), the sort that takes an
 * empty array, and the string buffer that grows with it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/error.h"
#include "ksearch/base/json.h"
#include "ksearch/base/util.h"

static void test_grow_keeps_contents_in_few_steps(void **state)
{
	int *items = NULL;
	size_t n = 0, alloc = 0, last_alloc = 0, grows = 0;

	(void)state;
	for (int i = 0; i < 100000; i++) {
		KS_ALLOC_GROW(items, n + 1, alloc);
		assert_true(alloc >= n + 1);
		if (alloc != last_alloc) {
			grows++;
			last_alloc = alloc;
		}
		items[n++] = i;
	}
	for (int i = 0; i < 100000; i++)
		assert_int_equal(items[i], i);
	/* geometric growth: about log(n)/log(1.5) steps, not one per element */
	assert_true(grows < 40);
	free(items);
}

static void test_grow_to_a_size_at_once(void **state)
{
	double *values = NULL, *before;
	size_t alloc = 0;

	(void)state;
	KS_ALLOC_GROW(values, 1000, alloc);
	assert_true(alloc >= 1000);
	values[999] = 1.5;
	before = values;
	/* room enough already: nothing moves */
	KS_ALLOC_GROW(values, 10, alloc);
	KS_ALLOC_GROW(values, alloc, alloc);
	assert_ptr_equal(values, before);
	assert_true(values[999] == 1.5);
	free(values);
}

static void test_try_grow_fails_without_touching_the_array(void **state)
{
	uint64_t *items = NULL, *before;
	size_t alloc = 0;

	(void)state;
	assert_int_equal(KS_ALLOC_TRY_GROW(items, 3, alloc), 0);
	assert_true(alloc >= 3);
	items[2] = 42;
	before = items;
	/* a size that does not fit size_t */
	assert_int_equal(KS_ALLOC_TRY_GROW(items, SIZE_MAX / 2, alloc), -1);
	assert_ptr_equal(items, before);
	assert_true(alloc >= 3 && alloc < 1000);
	assert_true(items[2] == 42);
	free(items);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

static void test_qsort_takes_an_empty_array(void **state)
{
	int *none = NULL, some[] = { 3, 1, 2 };

	(void)state;
	/* qsort(NULL, 0, ...) is undefined (its base is declared non-null): UBSan flags it */
	KS_QSORT(none, 0, cmp_int);
	KS_QSORT(some, 3, cmp_int);
	assert_int_equal(some[0], 1);
	assert_int_equal(some[1], 2);
	assert_int_equal(some[2], 3);
}

static void test_strbuf_grows_and_is_usable_after_detach(void **state)
{
	struct ks_strbuf sb;
	char *first;

	(void)state;
	ks_strbuf_init(&sb);
	for (int i = 0; i < 1000; i++)
		ks_strbuf_addf(&sb, "%d,", i);
	assert_int_equal(sb.len, strlen(sb.buf));
	assert_true(sb.alloc > sb.len);
	assert_memory_equal(sb.buf, "0,1,2,", 6);
	first = ks_strbuf_detach(&sb);
	/* detached, it holds nothing; adding starts a new buffer */
	ks_strbuf_adds(&sb, "again");
	assert_string_equal(sb.buf, "again");
	free(first);
	ks_strbuf_release(&sb);
}

static void test_asprintf(void **state)
{
	char *text = ks_asprintf("%s-%03d", "x", 7);

	(void)state;
	assert_string_equal(text, "x-007");
	free(text);
}

/* What jansson refuses is what ks_utf8_invalid() finds; ks_fail() and ks_json_text() never pass it on. */
static void test_utf8_is_checked_and_made_safe(void **state)
{
	static const struct {
		const char *text;
		long bad;
	} cases[] = {
		{ "plain", -1 },     { "caf\303\251 \316\261", -1 }, { "caf\351", 3 },
		{ "\300\257", 0 },   { "x\355\240\200", 1 },	     { "\364\220\200\200", 0 },
		{ "ok\342\202", 2 }, { "\360\237\230\200!", -1 },    { "\200", 0 },
	};
	struct ks_error err;
	char *clean;
	json_t *j;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		long bad = ks_utf8_invalid(cases[i].text, strlen(cases[i].text));
		json_t *plain = json_string(cases[i].text);

		if (bad != cases[i].bad)
			fail_msg("case %zu: %ld, expected %ld", i, bad, cases[i].bad);
		assert_int_equal(plain == NULL, bad >= 0); /* the same rule as jansson's */
		json_decref(plain);
		clean = ks_utf8_sanitize(cases[i].text);
		assert_int_equal(ks_utf8_invalid(clean, strlen(clean)), -1);
		free(clean);
		j = ks_json_text(cases[i].text);
		assert_non_null(j);
		json_decref(j);
		ks_fail(&err, "%s: bad", cases[i].text);
		assert_int_equal(ks_utf8_invalid(err.msg, strlen(err.msg)), -1);
	}
	/* a message cut at the limit never ends inside a character */
	{
		char *long_text = malloc(3 * KS_ERROR_MAX);

		for (size_t i = 0; i + 2 < 3 * KS_ERROR_MAX; i += 2)
			memcpy(long_text + i, "\303\251", 2);
		long_text[3 * KS_ERROR_MAX - 1 - (3 * KS_ERROR_MAX - 1) % 2] = '\0';
		for (int shift = 0; shift < 2; shift++) {
			ks_fail(&err, "%.*s%s", shift, "x", long_text);
			assert_int_equal(ks_utf8_invalid(err.msg, strlen(err.msg)), -1);
			ks_error_prefix(&err, "%.*sctx", shift, "y");
			assert_int_equal(ks_utf8_invalid(err.msg, strlen(err.msg)), -1);
		}
		free(long_text);
	}
	assert_int_equal(ks_utf8_prefix("ab\303", 3), 2);
	j = ks_json_text(NULL);
	assert_string_equal(json_string_value(j), "");
	json_decref(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grow_keeps_contents_in_few_steps),
		cmocka_unit_test(test_grow_to_a_size_at_once),
		cmocka_unit_test(test_try_grow_fails_without_touching_the_array),
		cmocka_unit_test(test_qsort_takes_an_empty_array),
		cmocka_unit_test(test_strbuf_grows_and_is_usable_after_detach),
		cmocka_unit_test(test_asprintf),
		cmocka_unit_test(test_utf8_is_checked_and_made_safe),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
