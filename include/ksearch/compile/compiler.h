/*
 * compiler.h - NVRTC in a killable child process.
 *
 * A candidate can make the compiler hang or eat memory (deep templates,
 * huge unrolls), and so can the analysis of the PTX it compiles to.
 * ks_compile_isolated() runs ks_nvrtc_compile(), then ks_ptx_analyze(), in a
 * child ("ksearch __compile") under an address-space limit and a wall-clock
 * deadline, so such a candidate costs one verdict, not the search.
 * The result is the same struct ks_compile_result as an in-process compile.
 *
 * The child serves the calling thread for up to KS_COMPILE_SERVES clean
 * compiles in a row and is replaced after anything else (a compile error,
 * a timeout, a crash): starting one costs a compile 5-10% of its CPU.  A
 * thread's child ends when the thread does (the main thread's at exit).
 */
#ifndef KSEARCH_COMPILER_H
#define KSEARCH_COMPILER_H

#include <sys/types.h>

#include "ksearch/base/error.h"
#include "ksearch/compile/nvrtc.h"
#include "ksearch/compile/ptx.h"

/* How much lower a compiler child's priority is than its parent's (nice). */
#define KS_COMPILE_NICE 10

/* How many clean compiles one compile process serves before it is replaced (compiler.c). */
#define KS_COMPILE_SERVES 32

struct ks_compile_limits {
	int timeout_ms;	     /* wall clock; default 120 s */
	size_t memory_bytes; /* address space; default 8 GiB; set: a child of its own, for this compile only
			      */
};

/*
 * Like ks_nvrtc_compile(): -1 with out->log set is the candidate's compile
 * error (a timeout or a killed compiler counts as one, with a log saying
 * so); -1 with out->log NULL is ksearch's own failure (no NVRTC, cannot
 * start a process).
 *
 * With analysis not NULL, the child also reads the PTX
 * (ks_ptx_analyze(), for req->kernels) before it answers, so that the
 * analysis of what a candidate compiled to runs under the same deadline
 * and memory limit as the compiler: 0 with *analysis filled (the caller
 * releases it), or 1 when it compiled but its PTX cannot be read (err
 * says why; the candidate's verdict).
 */
int ks_compile_isolated(const struct ks_compile_request *req, const struct ks_compile_limits *limits,
			struct ks_compile_result *out, struct ks_ptx_analysis *analysis,
			struct ks_error *err);

/* The pid of the child that serves the calling thread now; 0 when none. */
pid_t ks_compile_process(void);

/*
 * The child's side: answer requests from in_fd on out_fd until in_fd
 * closes. Returns an exit code.
 */
int ks_compile_child_main(int in_fd, int out_fd);

#endif
