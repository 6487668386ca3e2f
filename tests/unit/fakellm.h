/*
 * fakellm.h - start tools/fake-llm (python3) on a free port with a script,
 * read what it recorded, stop it.  Shared by the tests that need an LLM
 * endpoint; each test starts its own.
 */
#ifndef KS_TEST_FAKELLM_H
#define KS_TEST_FAKELLM_H

#include <jansson.h>
#include <sys/types.h>

struct fake {
	pid_t pid;
	int port;
	char *dir;
	char record[4200]; /* the fake's --record file */
};

double now_s(void);
void sleep_s(double s);
/* $KS_SOURCE_ROOT, else "." */
const char *source_root(void);
/* A whole file as text (caller frees), or NULL. */
char *read_text(const char *path);
/* Start tools/fake-llm with script_json; returns once its port is known. */
void fake_start(struct fake *f, const char *script_json);
/* The same with more command-line options for it (NULL-terminated, e.g. "--mode", "think", NULL). */
void fake_start_with(struct fake *f, const char *script_json, const char *const *options);
/* SIGTERM it, check it exited 0, remove its folder. */
void fake_stop(struct fake *f);
/* Its recorded requests, waiting up to 5 s for at least expect of them. */
json_t *fake_records(const struct fake *f, size_t expect);

#endif
