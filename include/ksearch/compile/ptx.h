/*
 * ptx.h - static descriptors read from PTX text.
 *
 * What a kernel's PTX says about how it works, without running it:
 * which tensor-core instructions it uses, which asynchronous copies, how
 * wide its widest global load is, and whether the module declares mutable
 * global variables (which the candidate contract forbids: they would let
 * a kernel carry results from one call to the next).
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
 * Names of module-scope variables in the .global state space (__device__
 * and __managed__ globals) that the module may write, in declaration
 * order.  *names is a malloc'd array of malloc'd strings (NULL when there
 * are none); free with ks_ptx_names_free().  Returns the count in *count.
 *
 * "May write" is decided conservatively from the PTX alone: a variable is
 * left out only if every instruction that names it is a load from it by
 * name (ld.global.u32 %r1, [k]), including when none names it, as with a
 * folded constant.  Taking its address (mov, cvta, an initializer of
 * another variable) counts as a write.  So "__device__ const int k = 3;"
 * is usually left out, but a const or constexpr namespace-scope array
 * indexed at run time (under NVRTC's -default-device such arrays are
 * __device__) is reported: tables belong in __constant__.  What the
 * toolchain itself puts in .global is never reported: string literals
 * ("$str", from printf) and the math library's tables ("__cudart_...",
 * from sinf and friends).
 */
int ks_ptx_mutable_globals(const char *ptx, char ***names, size_t *count, struct ks_error *err);
void ks_ptx_names_free(char **names, size_t count);

const char *ks_tensor_cores_name(enum ks_tensor_cores tc);
const char *ks_async_copy_name(enum ks_async_copy ac);

#endif
