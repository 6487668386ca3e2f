/*
 * ptx.h - static descriptors read from PTX text.
 *
 * What a kernel's PTX says about how it works, without running it:
 * which tensor-core instructions it uses, which asynchronous copies, how
 * wide its widest global load is, and whether the module declares mutable
 * global variables (which the candidate contract forbids: they would let
 * a kernel carry results from one call to the next), which external
 * functions it calls, and each kernel's parameters and launch bounds (so
 * a launch plan can be checked against the binary).
 */
#ifndef KSEARCH_PTX_H
#define KSEARCH_PTX_H

#include <stddef.h>

#include "ksearch/base/error.h"

enum ks_tensor_cores {
	KS_TC_NONE = 0,
	KS_TC_MMA = 1,	 /* mma.sync / wmma */
	KS_TC_WGMMA = 2, /* wgmma.mma_async (sm_90a) */
};

enum ks_async_copy {
	KS_ASYNC_NONE = 0,
	KS_ASYNC_CP_ASYNC = 1, /* cp.async.ca / cp.async.cg (sm_80+) */
	KS_ASYNC_TMA = 2,      /* cp.async.bulk[.tensor] (sm_90) */
};

struct ks_ptx_descriptors {
	enum ks_tensor_cores tensor_cores;
	enum ks_async_copy async_copy;
	int widest_load_bytes; /* widest ld.global / cp.async from global, bytes; 0 if none */
};

/*
 * Descriptors of the kernel (.entry) called name, counting the .func
 * bodies it reaches through direct calls (all of the module's .func
 * bodies if it makes an indirect call).  Loads count when they read the
 * .global state space (ld.global*, ld.<sem>.<scope>.global*, ldu.global):
 * vector lanes times element size; cp.async.ca/cg count their size
 * operand; bulk (TMA) copies into shared memory count as 16.  Fails if the
 * PTX has no such entry or cannot be parsed.
 */
int ks_ptx_kernel_descriptors(const char *ptx, const char *name, struct ks_ptx_descriptors *out,
			      struct ks_error *err);

/* Returns 1 if the PTX defines an .entry called name. */
int ks_ptx_has_entry(const char *ptx, const char *name);

/*
 * Names of module-scope variables in the .global and .const state spaces
 * (__device__, __managed__, __constant__, string literals, the math
 * library's tables: every one, whatever its name) that the module may
 * write, in declaration order.  *names is a malloc'd array of malloc'd
 * strings (NULL when there are none); free with ks_ptx_names_free().
 *
 * "May write" is decided conservatively from the PTX alone by following
 * the variable's address through register arithmetic in every function:
 * the variable may change if its address reaches a store, an atomic, the
 * destination of a copy, a call (except as vprintf's format string), an
 * instruction the analysis does not know, or another variable's
 * initializer.  So a read-only table indexed at run time is not
 * reported, and neither is printf's format string; a __constant__ array
 * written through a generic pointer, a writable string literal or a
 * counter are.
 */
int ks_ptx_mutable_globals(const char *ptx, char ***names, size_t *count, struct ks_error *err);

/* Every module-scope variable in .global or .const, in declaration order (same ownership). */
int ks_ptx_variables(const char *ptx, char ***names, size_t *count, struct ks_error *err);

/*
 * External functions the module calls (or takes the address of) other
 * than vprintf (printf) and __assertfail (assert): malloc and free above
 * all, since the device heap outlives a call.  Same ownership as above.
 */
int ks_ptx_forbidden_calls(const char *ptx, char ***names, size_t *count, struct ks_error *err);

enum ks_ptx_param_class {
	KS_PTX_PARAM_INT,	/* .u32 .s64 ... */
	KS_PTX_PARAM_FLOAT,	/* .f32 .f64 .f16 .bf16 */
	KS_PTX_PARAM_BITS,	/* .b32 .b64 ...: any kind of that size */
	KS_PTX_PARAM_AGGREGATE, /* .b8 name[N]: a struct or union by value */
};

struct ks_ptx_param {
	enum ks_ptx_param_class cls;
	int bytes;
	char type[24]; /* "u64", "f32", "16-byte struct" */
};

/* What a kernel's .entry declares: its parameters and launch bounds. */
struct ks_ptx_entry {
	struct ks_ptx_param *params;
	size_t n_params;
	int maxntid[3]; /* __launch_bounds__ (.maxntid); all 0 when absent */
	int reqntid[3]; /* .reqntid; all 0 when absent */
};

/* Read the entry called name (fails if there is none); release with ks_ptx_entry_release(). */
int ks_ptx_entry(const char *ptx, const char *name, struct ks_ptx_entry *out, struct ks_error *err);
void ks_ptx_entry_release(struct ks_ptx_entry *entry);

void ks_ptx_names_free(char **names, size_t count);

/*
 * Everything the static checks read from a module, in one place, so that
 * the killable compiler process (compiler.h) computes it under its
 * deadline and memory limit and the coordinator only reads the answer.
 * kernels[i] is about the i-th name asked for (launches may repeat one).
 * Every array is owned by the analysis; release with
 * ks_ptx_analysis_release().
 */
struct ks_ptx_kernel_facts {
	char *name;
	int found; /* the module defines an .entry of that name; the rest is valid only then */
	struct ks_ptx_entry entry;
	struct ks_ptx_descriptors desc;
};

struct ks_ptx_analysis {
	struct ks_ptx_kernel_facts *kernels;
	size_t n_kernels;
	char **forbidden_calls; /* ks_ptx_forbidden_calls() */
	size_t n_forbidden_calls;
	char **mutable_globals; /* ks_ptx_mutable_globals() */
	size_t n_mutable_globals;
	char **variables; /* ks_ptx_variables() */
	size_t n_variables;
};

/* Fails (the PTX cannot be read, memory ran out) with out released. */
int ks_ptx_analyze(const char *ptx, const char *const *kernels, size_t n_kernels, struct ks_ptx_analysis *out,
		   struct ks_error *err);
void ks_ptx_analysis_release(struct ks_ptx_analysis *analysis);

const char *ks_tensor_cores_name(enum ks_tensor_cores tc);
const char *ks_async_copy_name(enum ks_async_copy ac);

#endif
