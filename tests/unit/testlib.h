/*
 * testlib.h - what the C unit tests share: cmocka, and temporary folders
 * holding operators written from strings.
 */
#ifndef KS_TESTLIB_H
#define KS_TESTLIB_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A fresh folder under /tmp; the caller removes it with test_rmtree(). */
static inline char *test_tmpdir(void)
{
	char *dir = strdup("/tmp/ksearch-test-XXXXXX");

	assert_non_null(mkdtemp(dir));
	return dir;
}

static inline void test_write(const char *dir, const char *name, const char *text)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static inline void test_rmtree(char *dir)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	free(dir);
}

/* Replace the first occurrence of from in text by to; caller frees. */
static inline char *test_replace(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	size_t n;
	char *out;

	assert_non_null(at);
	n = strlen(text) - strlen(from) + strlen(to) + 1;
	out = malloc(n);
	snprintf(out, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
	return out;
}

/* assert that haystack contains needle, printing both when it does not */
#define assert_contains(haystack, needle)                                                                    \
	do {                                                                                                 \
		if (!strstr((haystack), (needle)))                                                           \
			fail_msg("expected \"%s\" in: %s", (needle), (haystack));                            \
	} while (0)

#endif
