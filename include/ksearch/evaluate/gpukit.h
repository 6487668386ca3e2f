/*
 * gpukit.h - trusted device-side tools the evaluator stands on.
 *
 * Everything here runs ksearch's own kernels, never a candidate's: input
 * generation on the GPU from an op's generator vocabulary, poisoning
 * buffers, keyed checksums, guard bands, scrubbing shared memory, flushing
 * the L2, and characterising the device (DRAM bandwidth from a copy
 * kernel, L2 size, SMs, peak rates).

 * The kit's kernels are compiled once with NVRTC for the device.
 *
 * A kit owns a retained primary context of one device (made current on the
 * calling thread by ks_gpukit_open()), one stream, and a flush buffer;
 * ks_gpukit_close() releases them.  All work is queued on the kit's stream;
 * functions that return data to the host synchronize it.
 */
#ifndef KSEARCH_GPUKIT_H
#define KSEARCH_GPUKIT_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/evaluate/cuda.h"
#include "ksearch/base/error.h"
#include "ksearch/op/op.h"

struct ks_device_profile {
	char name[256]; /* "NVIDIA H200" */
	char slug[64];	/* "nvidia-h200": for file names */
	char arch[16];	/* "sm_90a" */
	int cc_major, cc_minor;
	int sm_count;
	int l2_bytes;
	size_t total_mem;
	int max_smem_per_block_optin;
	int max_smem_per_sm;
	int regs_per_sm;
	int max_threads_per_sm;
	double dram_gbps;	 /* measured: (bytes read + written) / time of a large copy */
	double peak_fp32_tflops; /* non-tensor fp32 */
	double peak_bf16_tflops; /* dense bf16 tensor core */
	char peak_source[128];	 /* where the peaks come from ("table: ..." or "measured") */
};

struct ks_gpukit;

/* Open device ordinal: retain its primary context, make it current, build the kit's kernels. */
int ks_gpukit_open(struct ks_gpukit **kit, const struct ks_cuda *cu, int ordinal, struct ks_error *err);
void ks_gpukit_close(struct ks_gpukit *kit);

CUstream ks_gpukit_stream(const struct ks_gpukit *kit);
const struct ks_cuda *ks_gpukit_cuda(const struct ks_gpukit *kit);

/* The device's PCI domain, bus and device numbers; -1 if the driver does not say. */
int ks_gpukit_pci(const struct ks_gpukit *kit, int *domain, int *bus, int *device);

/*
 * The device's profile.  Measured once per GPU model and cached as JSON in
 * cache_dir/<slug>.json (cache_dir is created if missing; NULL: do not
 * cache); *cached says whether it came from the cache.
 */
int ks_gpukit_profile(struct ks_gpukit *kit, const char *cache_dir, struct ks_device_profile *out,
		      int *cached, struct ks_error *err);

/*
 * Fill numel elements of dtype at dst from generator gen, resolving its
 * expressions (indptr total, page pool) in axes.  Same seed, same values.
 * normal/uniform/const are generated on the device (counter-based, so any
 * size is fast); indptr and page_permutation on the host with PCG32 and
 * copied up.
 */
int ks_gpukit_generate(struct ks_gpukit *kit, CUdeviceptr dst, enum ks_dtype dtype, int64_t numel,
		       const struct ks_generator *gen, const struct ks_env *axes, uint64_t seed,
		       struct ks_error *err);

/*
 * How an indptr generator without given lengths splits its total over the
 * requests (each gets the generator's min first, then a share of the
 * rest).  The timed workloads are measured on one split of each kind,
 * drawn anew for every job (worker.c), so that a kernel's time holds for
 * other splits of the same (B, N) and no kernel can bake one split in.
 */
enum ks_split {
	KS_SPLIT_UNIFORM, /* B - 1 uniform cut points: lengths of every size (ks_gpukit_generate) */
	KS_SPLIT_EVEN,	  /* equal shares within +-12.5%, in random order */
	KS_SPLIT_SKEWED,  /* log-normal shares (sigma 1.5), the longest set to hold a fixed share (p90) */
	KS_SPLIT_COUNT
};

const char *ks_split_name(enum ks_split split);

/* ks_gpukit_generate(), with an indptr generator's lengths split as split says (other kinds ignore it). */
int ks_gpukit_generate_split(struct ks_gpukit *kit, CUdeviceptr dst, enum ks_dtype dtype, int64_t numel,
			     const struct ks_generator *gen, const struct ks_env *axes, uint64_t seed,
			     enum ks_split split, struct ks_error *err);

/* Host-side value of a scalar input (const: its value; normal/uniform: one draw from seed). */
double ks_gpukit_scalar(const struct ks_generator *gen, uint64_t seed);

/* Set every byte to 0xFF (a NaN in every float dtype), asynchronously. */
int ks_gpukit_poison(struct ks_gpukit *kit, CUdeviceptr dst, size_t bytes, struct ks_error *err);

/*
 * The secret key of a keyed checksum.  Without the key, no change to the
 * bytes can be balanced by another so that the sum stays the same (the
 * terms are mix64((word ^ k0) + mix64(index ^ k1)), unknown to the writer).
 */
struct ks_hash_key {
	uint64_t k0, k1;
};

/*
 * A 64-bit keyed checksum of bytes at src (order-sensitive; key NULL: a
 * fixed public key), including the length; synchronizes.
 */
int ks_gpukit_checksum(struct ks_gpukit *kit, CUdeviceptr src, size_t bytes, const struct ks_hash_key *key,
		       uint64_t *sum, struct ks_error *err);

/*
 * The same sum (without the length term) into the 8-byte device word
 * slot, asynchronously: for checks queued between runs and read in one go.
 */
int ks_gpukit_checksum_async(struct ks_gpukit *kit, CUdeviceptr src, size_t bytes,
			     const struct ks_hash_key *key, CUdeviceptr slot, struct ks_error *err);

/*
 * Guard bands.  regions is a device array of n_regions
 * struct ks_guard_region; max_bytes the largest region.  pattern is a
 * device copy of pattern_bytes (a power of two) random bytes: region r's
 * byte o should be pattern[(r.offset + o) mod pattern_bytes].  With result
 * 0 each region is filled so; otherwise the regions are checked against
 * it, and result (two device u64) gets the number of bytes that differ and
 * the lowest (region index << 40 | byte offset) among them (all ones if
 * none).  Asynchronous.  The caller uploads the table and the pattern from
 * its host copies before every use: a kernel may have rewritten both.
 */
struct ks_guard_region {
	uint64_t ptr, bytes, offset;
};
int ks_gpukit_guards(struct ks_gpukit *kit, CUdeviceptr regions, unsigned int n_regions, uint64_t max_bytes,
		     CUdeviceptr pattern, uint64_t pattern_bytes, CUdeviceptr result, struct ks_error *err);

/*
 * Compare numel elements of dtype at got against ref on the device, with
 * compare.h's rule (both finite and |got - ref| <= atol + rtol * |ref|):
 * result (two device u64) gets the number of failing elements and the
 * lowest failing index (all ones if none).  Asynchronous.  A filter only:
 * where it finds failures, compare.h describes them from host copies.
 */
int ks_gpukit_compare(struct ks_gpukit *kit, enum ks_dtype dtype, CUdeviceptr got, CUdeviceptr ref,
		      int64_t numel, double atol, double rtol, CUdeviceptr result, struct ks_error *err);

/*
 * Overwrite the shared memory of every SM (asynchronously), so that no
 * launch can find what an earlier one left there.
 */

int ks_gpukit_scrub_shared(struct ks_gpukit *kit, struct ks_error *err);

/* Evict the L2 by writing a buffer larger than it, asynchronously on the kit's stream. */
int ks_gpukit_flush_l2(struct ks_gpukit *kit, struct ks_error *err);

#endif
