/*
 * sanitize.h - memory and race checks of one candidate by NVIDIA's
 * compute-sanitizer, in processes of their own.
 *
 * The evaluator's guard bands see a buffer's surroundings only when the
 * run ends: a write outside a buffer that is undone before then (4 KiB
 * past an output, restored by the same thread or by a later launch) comes
 * out ok there, and in a serving process it lands in someone else's
 * memory.  memcheck sees every access as it happens; racecheck sees
 * shared-memory hazards between threads of a block.
 *
 * ks_sanitize_run() runs `compute-sanitizer --tool memcheck ... ksearch
 * __profile_run --plain ...` (the profiler's runner, profile.h: it
 * compiles the candidate, makes inputs from the op's generators, and
 * launches the candidate's kernels with the worker's own code, once per
 * workload), then, when a launch uses shared memory (static or dynamic,
 * as the runner reports), the same under `--tool racecheck`.  The runner
 * allocates every buffer at its exact size, and the sanitizer pads every
 * allocation (KS_SANITIZE_PADDING), so an access past a buffer is outside
 * every allocation, where memcheck sees it.  Each run is in a process
 * group killed at the deadline.
 *
 * Only the sanitizer's own words count: its output goes to a file of its
 * own (--log-file), the runner's stdout (device printf) and stderr go to
 * /dev/null, and only lines that start with "========= " are read.
 *
 * Workloads: memcheck runs every check workload and every benchmark
 * workload (a per-workload best is dispatched on its workload, so it must
 * be checked there); racecheck, ten to a hundred times slower, runs the
 * check workloads and the smallest benchmark workload (a race is a
 * property of a block's code, not of the input's size).
 *
 * Everything here is plain data: the structs own no memory.
 */
#ifndef KSEARCH_SANITIZE_H
#define KSEARCH_SANITIZE_H

#include <jansson.h>
#include <signal.h>
#include <stddef.h>

#include "ksearch/base/error.h"
#include "ksearch/op/op.h"

/* Bytes of padding the sanitizer puts after every allocation (memcheck's --padding). */
#define KS_SANITIZE_PADDING 65536
/* The exit code the sanitizer is told to return when it reports an error. */
#define KS_SANITIZE_ERROR_EXIT 86
#define KS_SANITIZE_MAX_WORKLOADS 32

enum ks_sanitize_status {
	KS_SANITIZE_CLEAN,	 /* every tool ran every workload and reported nothing */
	KS_SANITIZE_FAILED,	 /* a tool reported an error: the candidate's */
	KS_SANITIZE_INCOMPLETE,	 /* no verdict: the check did not finish (deadline, runner failure) */
	KS_SANITIZE_UNAVAILABLE, /* no sanitizer here, or it cannot run on this device */
};

const char *ks_sanitize_status_name(enum ks_sanitize_status status);

/* What one tool's output says (ks_sanitize_parse()). */
struct ks_sanitize_report {
	unsigned errors; /* reported errors (the largest of the summary and the error lines) */
	char first[512]; /* the first error line, without the "========= " tag, printable */
	int summary;	 /* an "ERROR SUMMARY" or "RACECHECK SUMMARY" line was seen */
	int unavailable; /* the tool said it cannot run here */
	char unavailable_why[512];
};

/*
 * Parse compute-sanitizer's output: only lines that start with
 * "========= " are read; anything else is ignored.  Never fails.
 */
void ks_sanitize_parse(const char *text, struct ks_sanitize_report *out);

struct ks_sanitize {
	char version[64];  /* "compute-sanitizer 2025.3.0" */
	char tools[2][16]; /* the tools that ran: "memcheck", "racecheck" */
	size_t n_tools;
	char workloads[KS_SANITIZE_MAX_WORKLOADS][64]; /* checked by memcheck */
	size_t n_workloads;
	unsigned errors; /* over the tools */
	char first[512]; /* the first error, when errors > 0 */
	char first_tool[16];
	long long smem_bytes; /* the most shared memory a launch uses (the runner's report) */
	double seconds;	      /* wall clock, the sanitizer's starts included */
};

/* The sanitizer to run: given, else $KSEARCH_COMPUTE_SANITIZER, on PATH, /usr/local/cuda/bin. Caller frees;
 * NULL: none. */
char *ks_sanitize_find(const char *given);

struct ks_sanitize_request {
	const struct ks_op *op;
	const char *source;	   /* the candidate's text */
	const char *path;	   /* its name in messages */
	const char *const *params; /* "NAME=VALUE" each */
	size_t n_params;
	const char *workload; /* one workload id (both tools); NULL: the module's choice above */
	int gpu;
	int timeout_ms;			     /* each tool's run, its start included; 0: 300 s */
	const char *sanitizer;		     /* NULL for ks_sanitize_find()'s choice */
	const char *raw_path;		     /* when set, the sanitizer's output is copied to this file */
	const volatile sig_atomic_t *cancel; /* may be NULL; set: kill it and return INCOMPLETE */
};

struct ks_sanitize_outcome {
	enum ks_sanitize_status status;
	char why[KS_ERROR_MAX]; /* not clean: what happened */
	struct ks_sanitize check;
	double held_s; /* how long it held its GPU, timed where it ran: what the search's budget counts */
};

/* Check one candidate.  Returns 0 with out->status, or -1 when ksearch itself failed (no temporary folder).
 */
int ks_sanitize_run(const struct ks_sanitize_request *req, struct ks_sanitize_outcome *out,
		    struct ks_error *err);

/*
 * The record's "sanitizer" object (archive/README.md has its fields) of a
 * clean or failed outcome; a new reference.
 */
json_t *ks_sanitize_to_json(const struct ks_sanitize_outcome *o);

/*
 * The outcome as it travels between the ranks of a job: {"status", "why",
 * "check": {"version", "tools", "workloads", "errors", "first",
 * "first_tool", "smem_bytes", "seconds"}}, every field of every status,
 * read back equal (doubles are written with 17 digits).  Not the record's
 * form: ks_sanitize_to_json() leaves out what a record does not keep.  A
 * new reference; NULL when the outcome cannot be read back whole: a
 * status without a name, more tools or workloads than the struct holds, a
 * number that is not finite, text that is not UTF-8.
 */
json_t *ks_sanitize_outcome_to_json(const struct ks_sanitize_outcome *o);

/*
 * Read what ks_sanitize_outcome_to_json() wrote into *out.  Refuses (-1,
 * *out zeroed, err naming the field: "check.workloads[3]: 70 bytes, more
 * than the 63 it may have") anything the struct cannot hold as sent: an
 * unknown status, a missing field or one of the wrong type, text too long
 * for its array, more tools or workloads than kept, a number that is not
 * finite, a negative or too large count, a negative duration.
 */
int ks_sanitize_outcome_from_json(const json_t *obj, struct ks_sanitize_outcome *out, struct ks_error *err);

/*
 * One line from a record's "sanitizer" object, for people: "clean
 * (memcheck, racecheck on 9 workloads, compute-sanitizer 2025.3.0,
 * 4.1 s)" or "FAILED: 2 errors, the first (memcheck): Invalid __global__
 * write of size 4 bytes".  Caller frees; NULL when it is not an object.
 */
char *ks_sanitize_text(const json_t *sanitizer);

#endif
