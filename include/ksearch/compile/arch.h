/*
 * arch.h - per-architecture limits and theoretical occupancy.
 *
 * Occupancy without a GPU: the same rules the CUDA occupancy calculator
 * applies (register allocation per warp in units, shared memory in
 * allocation units plus the per-block reservation, warp, block and thread
 * limits per SM), from a table of each architecture's limits.  On a GPU the
 * evaluator asks the driver instead and tests compare the two.
 */
#ifndef KSEARCH_ARCH_H
#define KSEARCH_ARCH_H

#include <stddef.h>

#include "ksearch/base/error.h"

struct ks_arch_limits {
	char arch[16];		   /* "sm_90a" */
	int major, minor;	   /* compute capability */
	int max_threads_per_block; /* 1024 */
	int max_threads_per_sm;
	int max_warps_per_sm;
	int max_blocks_per_sm;
	int regs_per_sm;	     /* 65536 */
	int max_regs_per_thread;     /* 255 */
	int reg_alloc_unit;	     /* registers, per warp (256) */
	int smem_per_sm;	     /* bytes usable by blocks */
	int max_smem_per_block;	     /* opt-in maximum, bytes */
	int smem_default_per_block;  /* 48 KiB without opt-in */
	int smem_alloc_unit;	     /* bytes */
	int smem_reserved_per_block; /* bytes the system reserves per block */
};

/*
 * Limits for "sm_XY" or "sm_XYa" (sm_70, 75, 80, 86, 87, 89, 90, 90a,
 * 100, 100a, 120 ...).  Unknown architectures fail with the list of known
 * ones.
 */
int ks_arch_limits(const char *arch, struct ks_arch_limits *out, struct ks_error *err);

/* Comma-separated list of the architectures ks_arch_limits() knows. */
const char *ks_arch_known(void);

enum ks_occupancy_limit {
	KS_LIMIT_WARPS,	 /* threads / warps per SM */
	KS_LIMIT_BLOCKS, /* blocks per SM */
	KS_LIMIT_REGISTERS,
	KS_LIMIT_SMEM,
};

struct ks_occupancy {
	int blocks_per_sm;
	int active_warps;
	double fraction; /* active_warps / max_warps_per_sm */
	enum ks_occupancy_limit limit;
};

/*
 * Theoretical occupancy of a kernel using regs_per_thread registers and
 * smem_bytes of shared memory per block (static + dynamic), launched with
 * threads_per_block threads.  A launch that cannot run at all (too many
 * threads, registers or shared memory) fails with the reason.
 */
int ks_occupancy_compute(const struct ks_arch_limits *lim, int threads_per_block, int regs_per_thread,
			 size_t smem_bytes, struct ks_occupancy *out, struct ks_error *err);

const char *ks_occupancy_limit_name(enum ks_occupancy_limit limit);

#endif
