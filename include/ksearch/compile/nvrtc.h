/*
 * nvrtc.h - compiling a candidate with NVRTC and reading what ptxas says.
 *
 * ks_nvrtc_compile() turns one CUDA C++ source (a candidate as the user
 * wrote it) plus -D defines into PTX and a cubin for one architecture, and
 * reports, per __global__ kernel, the resources ptxas assigned (parsed from
 * the --ptxas-options=-v log).  It needs no GPU and no driver.
 *
 * Diagnostics point into the file as the user wrote it: the program is
 * named after the source path and nothing is prepended to the source, so
 * "path.cu(12): error: ..." means line 12 of path.cu.
 *
 * Options always given: --gpu-architecture=<arch>, -std=c++17,
 * --ptxas-options=-v, -I<CUDA include dir> (so that
 * <cuda_bf16.h> and friends resolve), plus -D<NAME>=<value> per define,
 * and --no-cache from NVRTC 12.9 on: its cache (kept in the driver's
 * compute cache, so only where a driver loads) answers a compile it has
 * seen with the cubin and an empty log, without ptxas's report, so the
 * second `ksearch doctor` on a GPU machine took NVRTC for broken
 * (twenty-seventh session).
 * The CUDA include dir is $CUDA_PATH/include, else /usr/local/cuda/include;
 * NVRTC 13 resolves none of <cuda_fp16.h>, <cuda_bf16.h>, <cuda/std/...>
 * without it.  Its cccl/ subdirectory (where CUDA 13 keeps <cuda/...> and
 * CUB) is added too when it exists.
 *
 * No -default-device: a candidate must compile with nvcc as it is (that
 * is what `ksearch export-best` hands over), and nvcc has no such flag, so
 * device functions say __device__.  A "__device__ const float lut[4]"
 * indexed at run time is a .global variable whose address is taken, which
 * ks_ptx_mutable_globals() reports; use __constant__ for tables.
 */
#ifndef KSEARCH_NVRTC_H
#define KSEARCH_NVRTC_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/base/error.h"

struct ks_define {
	const char *name;
	int64_t value;
};

struct ks_compile_request {
	const char *source;	 /* NUL-terminated candidate text */
	const char *source_name; /* path shown in diagnostics */
	const char *arch;	 /* "sm_90a", "sm_80", ... */
	const struct ks_define *defines;
	size_t n_defines;
	/*
	 * Accept a compile without ptxas's resource report.  Seen on an H200:
	 * in a process that has loaded the driver (libcuda), NVRTC 13 left
	 * the program log empty.  Candidates are compiled in processes that
	 * never load the driver (compiler.h) and need the report; the
	 * evaluator's own trusted kernels do not.
	 */
	int resources_optional;
	/* the kernels whose facts ks_compile_isolated() reads from the PTX (ignored by ks_nvrtc_compile()) */
	const char *const *kernels;
	size_t n_kernels;
};

/* What ptxas reported for one kernel (an .entry in the PTX). */
struct ks_kernel_resources {
	char name[128];	  /* as ptxas prints it; longer names are truncated */
	int registers;	  /* per thread */
	int static_smem;  /* bytes of static __shared__ */
	int stack_bytes;  /* per thread: the larger of the kernel's own frame
			     and the cumulative stack ptxas reports with calls */
	int spill_stores; /* bytes */
	int spill_loads;  /* bytes */
	int const_bytes;  /* cmem[0] bytes (kernel parameters etc.) */
	int barriers;
};

/*
 * All buffers are owned by the result and freed by
 * ks_compile_result_release().  ptx is NUL-terminated; ptx_size does not
 * count the NUL.
 */
struct ks_compile_result {
	char *ptx;
	size_t ptx_size;
	unsigned char *cubin;
	size_t cubin_size;
	char *log; /* NVRTC + ptxas log, NUL-terminated, may be "" */
	struct ks_kernel_resources *kernels;
	size_t n_kernels;
};

/*
 * Compile.  out is overwritten (not released first).  On a compilation
 * error returns -1 with err saying "compilation failed:\n" plus the log,
 * trimmed from the first error on when it is too long for err; the whole
 * log stays in out->log.  On any failure only out->log may be set, and
 * the caller releases out as after a success.  An architecture NVRTC does
 * not know fails naming the ones it does.  Fails with a clear message
 * naming the library and the fix when NVRTC cannot be used.
 */
int ks_nvrtc_compile(const struct ks_compile_request *req, struct ks_compile_result *out,
		     struct ks_error *err);

void ks_compile_result_release(struct ks_compile_result *res);

/* Resources of the kernel called name (borrowed from res), or NULL. */
const struct ks_kernel_resources *ks_compile_result_kernel(const struct ks_compile_result *res,
							   const char *name);

/* NVRTC's version, e.g. 13 and 0. */
int ks_nvrtc_version(int *major, int *minor, struct ks_error *err);

/*
 * Parse a ptxas -v log into kernels, one per "Compiling entry function";
 * *kernels is malloc'd (NULL when there are none), free() it.  Lines other
 * than ptxas's are ignored (exposed for tests).
 */
int ks_ptxas_log_parse(const char *log, struct ks_kernel_resources **kernels, size_t *n_kernels,
		       struct ks_error *err);

#endif
