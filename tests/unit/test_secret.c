/*
 * test_secret.c - the LLM credentials leave the environment at start-up
 * (secret.h): captured, then gone from getenv(), from /proc/self/environ
 * and from the environment of any child exec'd afterwards.
 *
 * /proc/self/environ shows the environment block the process was exec'd
 * with, so to be a real test the values must be in that block: main()
 * re-execs the test with them set (and KSEARCH_API_KEY twice, as execve()
 * allows), checks they show in /proc/self/environ, and only then captures.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ksearch/base/secret.h"
#include "ksearch/base/util.h"

extern char **environ;

#define STAGE_MARKER "KS_TEST_SECRET_STAGE=captured"
#define API_KEY "ks-test-api-key-5d1e0c7b"
#define API_KEY_SHADOWED "ks-test-shadowed-key-93a4f2e6"
#define OPENAI_KEY "ks-test-openai-key-0b8c61d3"
#define HEADER_SECRET "ks-test-header-secret-c4e29a17"
#define HEADERS "X-Title: ksearch\nX-Secret: " HEADER_SECRET

static const char *const secret_values[] = { API_KEY, API_KEY_SHADOWED, OPENAI_KEY, HEADER_SECRET };
#define N_VALUES (sizeof(secret_values) / sizeof(secret_values[0]))

/* what /proc/self/environ showed before the capture */
static int seen_before_capture[N_VALUES];

/* All of a stream, NUL bytes included. */
static char *read_all(FILE *f, size_t *len)
{
	char *buf = NULL;
	size_t cap = 0, n = 0, got;

	do {
		if (n == cap) {
			cap = cap ? 2 * cap : 4096;
			buf = ks_realloc(buf, cap);
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
	} while (got);
	*len = n;
	return buf;
}

static char *read_proc_environ(size_t *len)
{
	FILE *f = fopen("/proc/self/environ", "rb");
	char *buf;

	if (!f)
		return NULL;
	buf = read_all(f, len);
	fclose(f);
	return buf;
}

static int contains(const char *buf, size_t len, const char *needle)
{
	return memmem(buf, len, needle, strlen(needle)) != NULL;
}

static void test_values_were_in_the_initial_environment(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_VALUES; i++)
		assert_true(seen_before_capture[i]);
}

static void test_capture_returns_the_values(void **state)
{
	(void)state;
	/* the first entry of a name is the one getenv() would have given */
	assert_string_equal(ks_secret_env("KSEARCH_API_KEY"), API_KEY);
	assert_string_equal(ks_secret_env("OPENAI_API_KEY"), OPENAI_KEY);
	assert_string_equal(ks_secret_env("KSEARCH_LLM_HEADERS"), HEADERS);
	/* set but empty counts as unset */
	assert_null(ks_secret_env("ANTHROPIC_API_KEY"));
	assert_null(ks_secret_env("KSEARCH_LLM_URL"));
}

static void test_capture_unsets_the_names(void **state)
{
	(void)state;
	assert_null(getenv("KSEARCH_API_KEY"));
	assert_null(getenv("OPENAI_API_KEY"));
	assert_null(getenv("ANTHROPIC_API_KEY"));
	assert_null(getenv("KSEARCH_LLM_HEADERS"));
	assert_non_null(getenv("KS_TEST_SECRET_STAGE"));
}

static void test_proc_self_environ_holds_no_value(void **state)
{
	size_t len;
	char *env = read_proc_environ(&len);

	(void)state;
	assert_non_null(env);
	/* the read sees the block: the marker set beside the secrets is there */
	assert_true(contains(env, len, STAGE_MARKER));
	for (size_t i = 0; i < N_VALUES; i++)
		assert_false(contains(env, len, secret_values[i]));
	free(env);
}

static void test_child_environment_holds_no_secret(void **state)
{
	FILE *child = popen("cat /proc/self/environ", "r");
	size_t len;
	char *env;

	(void)state;
	assert_non_null(child);
	env = read_all(child, &len);
	assert_int_equal(pclose(child), 0);
	assert_true(contains(env, len, STAGE_MARKER));
	for (size_t i = 0; i < N_VALUES; i++)
		assert_false(contains(env, len, secret_values[i]));
	assert_false(contains(env, len, "KSEARCH_API_KEY="));
	assert_false(contains(env, len, "OPENAI_API_KEY="));
	assert_false(contains(env, len, "KSEARCH_LLM_HEADERS="));
	free(env);
}

static void test_second_capture_changes_nothing(void **state)
{
	(void)state;
	ks_secrets_capture();
	assert_string_equal(ks_secret_env("KSEARCH_API_KEY"), API_KEY);
	assert_string_equal(ks_secret_env("OPENAI_API_KEY"), OPENAI_KEY);
	assert_string_equal(ks_secret_env("KSEARCH_LLM_HEADERS"), HEADERS);
	assert_null(ks_secret_env("ANTHROPIC_API_KEY"));
}

static void test_environment_is_not_read_after_capture(void **state)
{
	(void)state;
	setenv("KSEARCH_API_KEY", "set-after-start-up", 1);
	setenv("ANTHROPIC_API_KEY", "set-after-start-up", 1);
	assert_string_equal(ks_secret_env("KSEARCH_API_KEY"), API_KEY);
	assert_null(ks_secret_env("ANTHROPIC_API_KEY"));
	unsetenv("KSEARCH_API_KEY");
	unsetenv("ANTHROPIC_API_KEY");
}

static int is_secret_entry(const char *entry)
{
	static const char *const names[] = { "KSEARCH_API_KEY=", "OPENAI_API_KEY=", "ANTHROPIC_API_KEY=",
					     "KSEARCH_LLM_HEADERS=", "KS_TEST_SECRET_STAGE=" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strncmp(entry, names[i], strlen(names[i])))
			return 1;
	return 0;
}

/* Run this test again with the secrets in its initial environment block. */
static int reexec_with_secrets(char **argv)
{
	size_t n = 0, k = 0;
	char **envp;

	while (environ[n])
		n++;
	envp = ks_calloc(n + 7, sizeof(*envp));
	for (size_t i = 0; i < n; i++)
		if (!is_secret_entry(environ[i]))
			envp[k++] = environ[i];
	envp[k++] = "KSEARCH_API_KEY=" API_KEY;
	envp[k++] = "OPENAI_API_KEY=" OPENAI_KEY;
	envp[k++] = "ANTHROPIC_API_KEY=";
	envp[k++] = "KSEARCH_LLM_HEADERS=" HEADERS;
	envp[k++] = "KSEARCH_API_KEY=" API_KEY_SHADOWED;
	envp[k++] = STAGE_MARKER;
	envp[k] = NULL;
	execve("/proc/self/exe", argv, envp);
	perror("test_secret: re-exec with the secrets set");
	return 1;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values_were_in_the_initial_environment),
		cmocka_unit_test(test_capture_returns_the_values),
		cmocka_unit_test(test_capture_unsets_the_names),
		cmocka_unit_test(test_proc_self_environ_holds_no_value),
		cmocka_unit_test(test_child_environment_holds_no_secret),
		cmocka_unit_test(test_second_capture_changes_nothing),
		cmocka_unit_test(test_environment_is_not_read_after_capture),
	};
	const char *stage = getenv("KS_TEST_SECRET_STAGE");
	size_t len;
	char *env;

	(void)argc;
	if (!stage || strcmp(stage, "captured"))
		return reexec_with_secrets(argv);
	env = read_proc_environ(&len);
	for (size_t i = 0; env && i < N_VALUES; i++)
		seen_before_capture[i] = contains(env, len, secret_values[i]);
	free(env);
	ks_secrets_capture();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
