/*
 * proc.h - child processes ksearch starts: GPU workers and compilers.
 *
 * Children are exec'd (never a bare fork of a process that may hold an
 * LMDB environment or a CUDA context): ks_child_spawn() runs the ksearch
 * binary itself with a hidden subcommand ("__worker", "__compile").  It
 * reads requests on its stdin and writes replies on KS_CHILD_REPLY_FD, both
 * pipes for the framed protocol (frame.h); its stdout goes to /dev/null and
 * its stderr is shared with ours.  Replies never travel on stdout: a GPU
 * worker's stdout is where device printf lands, and code a candidate
 * controls must have no way to write a reply.  Limits (address space, CPU time) are set
 * in the child before exec; the wall-clock deadline is the caller's to
 * enforce with ks_frame_read() and ks_child_kill().
 */
#ifndef KSEARCH_PROC_H
#define KSEARCH_PROC_H

#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

#include "ksearch/base/error.h"

/* The child's end of the reply pipe. */
#define KS_CHILD_REPLY_FD 3

struct ks_child {
	pid_t pid;	/* 0 when not running */
	int to_child;	/* write end of the child's stdin (non-blocking) */
	int from_child; /* read end of the child's replies (its KS_CHILD_REPLY_FD) */
};

struct ks_child_limits {
	size_t address_space; /* bytes; 0: no limit (not applied in an AddressSanitizer build) */
	unsigned cpu_seconds; /* 0: no limit */
	int nice; /* added to the child's nice value: > 0 yields the CPU to the parent's other work */
	const cpu_set_t *cpus; /* the CPUs the child may run on; NULL: the parent's */
};

/*
 * The program children run: by default the running executable
 * (/proc/self/exe).  Tests that link the library into another program
 * point it at the ksearch binary.
 */
void ks_child_set_program(const char *path);
const char *ks_child_program(void);

/* Start `<program> args...` (args NULL-terminated, without argv[0]). */
int ks_child_spawn(struct ks_child *child, const char *const *args, const struct ks_child_limits *limits,
		   struct ks_error *err);

/* SIGKILL the child (if running), close the pipes, reap it. */
void ks_child_kill(struct ks_child *child);

/*
 * Close our end of its stdin and reap it, waiting up to timeout_ms before
 * killing it.  *status gets the wait status (may be NULL).
 */
void ks_child_finish(struct ks_child *child, int timeout_ms, int *status);

/*
 * Programs that are not ksearch (the profiler): run to their end, with
 * no protocol.  ks_proc_run() runs argv (argv[0] looked up in PATH when
 * it has no slash) with stdin from /dev/null and stdout and stderr into
 * the files out_path and err_path (created or emptied).  It runs in a
 * process group of its own, and the group (the program and whatever it
 * started) is killed when timeout_ms passes (0: no limit), when *cancel
 * (may be NULL) becomes non-zero, or when we die.  Returns 0 once the
 * program ended or was killed (res says which), -1 when it could not be
 * started (err says why: "cannot run ncu: No such file or directory").
 */
struct ks_proc_result {
	int status;    /* the wait status */
	int timed_out; /* killed at the deadline */
	int cancelled; /* killed because *cancel was set */
	double seconds;
};

int ks_proc_run(const char *const *argv, const char *out_path, const char *err_path, int timeout_ms,
		const volatile sig_atomic_t *cancel, struct ks_proc_result *res, struct ks_error *err);

/*
 * "<name> <version>" of a tool that answers `--version` with a line
 * "... Version 2025.3.1.0 ..." (NVIDIA's ncu and compute-sanitizer), into
 * out; just name when it cannot be run or says no version.  Asked once
 * per tool path for the process's life; any thread.
 */
void ks_proc_tool_version(const char *tool, const char *name, char *out, size_t size);

/* The path of program name (looked up in PATH when it has no slash), if executable; caller frees; NULL if
 * none. */
char *ks_proc_which(const char *name);

/* "exited with code 3", "killed by signal 9 (Killed)" */
void ks_child_describe_status(int status, char *buf, size_t size);

#endif
