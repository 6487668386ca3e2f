/*
 * fakellm.c - tools/fake-llm as a child process, for the tests that talk
 * to an LLM endpoint (see fakellm.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fakellm.h"
#include "ksearch/base/fs.h"
#include "ksearch/base/util.h"
#include "testlib.h"

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - floor(s)) * 1e9) };

	while (nanosleep(&ts, &ts))
		;
}

const char *source_root(void)
{
	const char *root = getenv("KS_SOURCE_ROOT");

	return root && *root ? root : ".";
}

char *read_text(const char *path)
{
	char *data = NULL;
	size_t size;
	struct ks_error err;

	if (ks_read_file(path, &data, &size, &err))
		return NULL;
	return data;
}

void fake_start(struct fake *f, const char *script_json)
{
	fake_start_with(f, script_json, NULL);
}

void fake_start_with(struct fake *f, const char *script_json, const char *const *options)
{
	char script[4200], port_file[4200], log[4200], fake[4200];
	const char *argv[64];
	size_t argc = 0;
	double deadline = now_s() + 15;
	pid_t parent;

	memset(f, 0, sizeof(*f));

	f->dir = test_tmpdir();
	test_write(f->dir, "script.json", script_json);
	snprintf(script, sizeof(script), "%s/script.json", f->dir);
	snprintf(port_file, sizeof(port_file), "%s/port", f->dir);
	snprintf(log, sizeof(log), "%s/fake.log", f->dir);
	snprintf(f->record, sizeof(f->record), "%s/record.jsonl", f->dir);
	snprintf(fake, sizeof(fake), "%s/tools/fake-llm", source_root());
	if (access(fake, R_OK))
		fail_msg("%s is missing (run from the source root or set KS_SOURCE_ROOT)", fake);
	{
		const char *base[] = { "python3", fake,	      "--port", "0",	    "--port-file",
				       port_file, "--script", script,	"--record", f->record };

		for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++)
			argv[argc++] = base[i];
		for (size_t i = 0; options && options[i] && argc < 63; i++)
			argv[argc++] = options[i];
		argv[argc] = NULL;
	}
	/* or the child would flush our buffered output into its log */
	fflush(NULL);
	parent = getpid();
	f->pid = fork();
	assert_true(f->pid >= 0);
	if (f->pid == 0) {
		/* a test that crashes, or is killed at its timeout, takes its endpoint with it */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
			_exit(125);
		if (!freopen(log, "w", stdout) || dup2(fileno(stdout), 2) < 0)

			_exit(126);
		execvp("python3", (char *const *)argv);
		_exit(127);
	}
	for (;;) {
		char *text = read_text(port_file);
		int status;

		if (text) {
			f->port = atoi(text);
			free(text);
			if (f->port > 0)
				return;
		}
		if (waitpid(f->pid, &status, WNOHANG) == f->pid) {
			char *why = read_text(log);

			f->pid = 0;
			fail_msg("fake-llm exited before listening: %s", why ? why : "(no log)");
		}
		if (now_s() > deadline)
			fail_msg("fake-llm did not write its port file within 15 s");
		sleep_s(0.01);
	}
}

void fake_stop(struct fake *f)
{
	int status;

	if (f->pid > 0) {
		kill(f->pid, SIGTERM);
		assert_int_equal(waitpid(f->pid, &status, 0), f->pid);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	test_rmtree(f->dir);
	f->dir = NULL;
}

static int by_seq(const void *a, const void *b)
{
	json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "seq"));
	json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "seq"));

	return (x > y) - (x < y);
}

/* The records in the order their requests arrived (the fake's "seq"). */
static json_t *in_arrival_order(json_t *list)
{
	size_t n = json_array_size(list);
	json_t **recs = calloc(n ? n : 1, sizeof(*recs)), *sorted = json_array();

	assert_non_null(recs);
	for (size_t i = 0; i < n; i++)
		recs[i] = json_array_get(list, i);
	qsort(recs, n, sizeof(*recs), by_seq);
	for (size_t i = 0; i < n; i++)
		json_array_append(sorted, recs[i]);
	free(recs);
	json_decref(list);
	return sorted;
}

/*
 * The fake's recording: one object per request, returned in the order the
 * requests arrived.  A line is written just after its answer is sent, on the
 * request's own thread, so the file may hold two close requests the other way
 * round, or the first part of a long line; and wait (up to 5 s) until at least
 * `expect` are there.
 */
json_t *fake_records(const struct fake *f, size_t expect)
{
	double deadline = now_s() + 5;
	json_t *list;

	for (;;) {
		char *text = read_text(f->record), *line, *save = NULL, *end;

		/* a line longer than the fake's write buffer reaches the file in pieces: only lines
		 * that end are read, the rest comes on a later pass */
		end = text ? strrchr(text, '\n') : NULL;
		if (text)
			*(end ? end + 1 : text) = '\0';
		list = json_array();
		for (line = text ? strtok_r(text, "\n", &save) : NULL; line;
		     line = strtok_r(NULL, "\n", &save)) {
			json_error_t jerr;
			json_t *rec = json_loads(line, 0, &jerr);

			if (!rec)
				fail_msg("record line is not JSON (%s): %s", jerr.text, line);
			json_array_append_new(list, rec);
		}
		free(text);
		if (json_array_size(list) >= expect || now_s() > deadline)
			return in_arrival_order(list);
		json_decref(list);
		sleep_s(0.01);
	}
}
