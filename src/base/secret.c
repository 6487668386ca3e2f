/*
 * secret.c - the LLM credentials, moved out of the environment (secret.h).
 *
 * unsetenv() alone is not enough: it drops the pointer from environ, but
 * the "NAME=value" bytes stay in the initial environment block above the
 * stack, and /proc/self/environ reads that block, not environ.  So the value
 * is zeroed where it lies first.  Every entry of the name is zeroed: execve()
 * accepts an environment with a name twice, and getenv() shows only the first.
 */
#include "ksearch/base/secret.h"

#include <stdlib.h>
#include <string.h>

#include "ksearch/base/util.h"

extern char **environ;

static const char *const secret_names[] = {
	"KSEARCH_API_KEY",
	"OPENAI_API_KEY",
	"ANTHROPIC_API_KEY",
	"KSEARCH_LLM_HEADERS",
};
#define N_SECRETS (sizeof(secret_names) / sizeof(secret_names[0]))

static char *captured[N_SECRETS]; /* NULL: unset or empty */
static int capture_done;

static int secret_index(const char *name)
{
	for (size_t i = 0; i < N_SECRETS; i++)
		if (!strcmp(secret_names[i], name))
			return (int)i;
	return -1;
}

/* A copy of the value getenv() would give (NULL if unset or empty); every value of name zeroed, name unset.
 */
static char *take_from_environment(const char *name)
{
	size_t name_len = strlen(name);
	char *copy = NULL;
	int first = 1;

	for (char **entry = environ; entry && *entry; entry++) {
		char *value;

		if (strncmp(*entry, name, name_len) || (*entry)[name_len] != '=')
			continue;
		value = *entry + name_len + 1;
		if (first && *value)
			copy = ks_strdup(value);
		first = 0;
		memset(value, 0, strlen(value));
	}
	unsetenv(name);
	return copy;
}

void ks_secrets_capture(void)
{
	for (size_t i = 0; i < N_SECRETS; i++) {
		char *value = take_from_environment(secret_names[i]);

		/* a second call finds nothing; what the first captured stays */
		if (value) {
			if (captured[i]) {
				memset(captured[i], 0, strlen(captured[i]));
				free(captured[i]);
			}
			captured[i] = value;
		}
	}
	capture_done = 1;
}

const char *ks_secret_env(const char *name)
{
	int i = secret_index(name);
	const char *value;

	if (i < 0)
		return NULL;
	if (capture_done)
		return captured[i];
	value = getenv(name);
	return value && *value ? value : NULL;
}
