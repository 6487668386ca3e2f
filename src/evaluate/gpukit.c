/*
 * gpukit.c - the evaluator's own GPU tools: input generation, poison,
 * checksums, L2 flushes and the device profile.
 *
 * The kernels below are compiled at ks_gpukit_open() with NVRTC for the
 * device's own architecture, so the kit needs no fatbinary shipped with
 * ksearch and runs on whatever GPU the driver sees.  They include no
 * header (NVRTC resolves none without the toolkit's include folder, and a
 * header-free program compiles in a fraction of a second), so the half
 * conversions are written out by hand.
 *
 * Random values on the device are counter-based: element pair p of a
 * fill takes its bits from mix64(key ^ mix64(p)), with key derived from
 * the seed, so any grid produces the same bytes and a fill of any size
 * costs one pass over memory.  The host-side generators (indptr,
 * page_permutation) use PCG32 on a stream of their own.
 */
#include "ksearch/evaluate/gpukit.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ksearch/compile/nvrtc.h"
#include "ksearch/base/fs.h"
#include "ksearch/base/hash.h"
#include "ksearch/base/map.h"
#include "ksearch/base/pcg.h"
#include "ksearch/base/util.h"

/*
 * The dtype and kind numbers the kernels switch on are enum ks_dtype and
 * enum ks_generator_kind; the static asserts below keep them in step.
 */
static const char kit_source[] =
	"/* ksearch gpukit: the evaluator's own kernels (src/evaluate/gpukit.c). */\n"
	"typedef unsigned long long u64;\n"
	"typedef unsigned int u32;\n"
	"typedef unsigned short u16;\n"
	"\n"
	"enum { DT_BF16, DT_F16, DT_F32, DT_I32, DT_I64 };\n"
	"enum { GEN_NORMAL, GEN_UNIFORM, GEN_CONST };\n"
	"\n"
	"__device__ __forceinline__ u64 mix64(u64 z)\n"
	"{\n"
	"	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;\n"
	"	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;\n"
	"	return z ^ (z >> 31);\n"
	"}\n"
	"\n"
	"__device__ __forceinline__ u16 f32_to_bf16(float x)\n"
	"{\n"
	"	u32 u = __float_as_uint(x);\n"
	"	if ((u & 0x7fffffffu) > 0x7f800000u)\n"
	"		return (u16)((u >> 16) | 0x40u); /* NaN stays NaN */\n"
	"	return (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); /* round to nearest even */\n"
	"}\n"
	"\n"
	"__device__ __forceinline__ float bf16_to_f32(u16 h)\n"
	"{\n"
	"	return __uint_as_float((u32)h << 16);\n"
	"}\n"
	"\n"
	"__device__ __forceinline__ u16 f32_to_f16(float x)\n"
	"{\n"
	"	u16 h;\n"
	"	asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(x));\n"
	"	return h;\n"
	"}\n"
	"\n"
	"__device__ __forceinline__ float f16_to_f32(u16 h)\n"
	"{\n"
	"	float x;\n"
	"	asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(x) : \"h\"(h));\n"
	"	return x;\n"
	"}\n"
	"\n"
	"/* One step toward -inf / +inf of a sign-magnitude 16-bit float. */\n"
	"__device__ __forceinline__ u16 step_down(u16 h)\n"
	"{\n"
	"	return h == 0 ? (u16)0x8001 : (h & 0x8000) ? (u16)(h + 1) : (u16)(h - 1);\n"
	"}\n"
	"\n"
	"__device__ __forceinline__ u16 step_up(u16 h)\n"
	"{\n"
	"	return h == 0x8000 ? (u16)1 : (h & 0x8000) ? (u16)(h - 1) : (u16)(h + 1);\n"
	"}\n"
	"\n"
	"/*\n"
	" * Rounding to the dtype can carry a uniform draw just below high onto\n"
	" * high (or one just above an unrepresentable low below it); one step\n"
	" * back keeps the promise of [low, high).\n"
	" */\n"
	"__device__ __forceinline__ void put(void *dst, int dtype, int kind, long long i, float x,\n"
	"				    float lo, float hi, long long ivalue)\n"
	"{\n"
	"	if (dtype == DT_F32) {\n"
	"		if (kind == GEN_UNIFORM && x >= hi)\n"
	"			x = nextafterf(hi, lo);\n"
	"		if (kind == GEN_UNIFORM && x < lo)\n"
	"			x = lo;\n"
	"		((float *)dst)[i] = x;\n"
	"	} else if (dtype == DT_BF16 || dtype == DT_F16) {\n"
	"		u16 h = dtype == DT_BF16 ? f32_to_bf16(x) : f32_to_f16(x);\n"
	"		if (kind == GEN_UNIFORM) {\n"
	"			float v = dtype == DT_BF16 ? bf16_to_f32(h) : f16_to_f32(h);\n"
	"			if (v >= hi)\n"
	"				h = step_down(h);\n"
	"			else if (v < lo)\n"
	"				h = step_up(h);\n"
	"		}\n"
	"		((u16 *)dst)[i] = h;\n"
	"	} else if (dtype == DT_I32) {\n"
	"		((int *)dst)[i] = (int)ivalue;\n"
	"	} else {\n"
	"		((long long *)dst)[i] = ivalue;\n"
	"	}\n"
	"}\n"
	"\n"
	"/* Each thread makes a pair of elements: Box-Muller gives two normals per draw. */\n"
	"extern \"C\" __global__ void ks_fill(void *dst, long long n, int dtype, int kind, u64 key,\n"
	"				float a, float b, long long ivalue)\n"
	"{\n"
	"	const long long pairs = (n + 1) / 2;\n"
	"	const long long stride = (long long)gridDim.x * blockDim.x;\n"
	"\n"
	"	for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < pairs;\n"
	"	     p += stride) {\n"
	"		float x0 = a, x1 = a;\n"
	"		if (kind != GEN_CONST) {\n"
	"			u64 h = mix64(key ^ mix64((u64)p));\n"
	"			float u0 = (float)(u32)(h >> 40) * 5.9604644775390625e-8f; /* 2^-24 */\n"
	"			float u1 = (float)((u32)(h >> 16) & 0xffffffu) * 5.9604644775390625e-8f;\n"
	"			if (kind == GEN_NORMAL) {\n"
	"				float r = sqrtf(-2.0f * logf(1.0f - u0)); /* 1 - u0 in (0, 1] */\n"
	"				float s, c;\n"
	"				sincospif(2.0f * u1, &s, &c);\n"
	"				x0 = a + b * r * c;\n"
	"				x1 = a + b * r * s;\n"
	"			} else {\n"
	"				x0 = a + (b - a) * u0;\n"
	"				x1 = a + (b - a) * u1;\n"
	"			}\n"
	"		}\n"
	"		put(dst, dtype, kind, 2 * p, x0, a, b, ivalue);\n"
	"		if (2 * p + 1 < n)\n"
	"			put(dst, dtype, kind, 2 * p + 1, x1, a, b, ivalue);\n"
	"	}\n"
	"}\n"
	"\n"
	"/*\n"
	" * Sum over 8-byte words (the tail zero-padded) of mix64((word ^ k0) +\n"
	" * mix64(index ^ k1)): the index makes it order-sensitive, the mixer makes\n"
	" * any change of any bit change the sum, and the secret key (k0, k1) makes\n"
	" * it impossible for code that does not know the key to balance one change\n"
	" * with another.  One atomic per block.\n"
	" */\n"
	"extern \"C\" __global__ void ks_checksum(const unsigned char *src, u64 bytes, u64 k0, u64 k1,\n"
	"				    u64 *sum)\n"
	"{\n"
	"	__shared__ u64 warp_sums[32];\n"
	"	const u64 words = (bytes + 7) / 8, full = bytes / 8;\n"
	"	const u64 stride = (u64)gridDim.x * blockDim.x;\n"
	"	const bool aligned = ((u64)src & 7) == 0;\n"
	"	u64 acc = 0;\n"
	"\n"
	"	for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride) {\n"
	"		u64 w = 0;\n"
	"		if (aligned && i < full) {\n"
	"			w = ((const u64 *)src)[i];\n"
	"		} else {\n"
	"			for (int k = 0; k < 8; k++)\n"
	"				if (i * 8 + k < bytes)\n"
	"					w |= (u64)src[i * 8 + k] << (8 * k);\n"
	"		}\n"
	"		acc += mix64((w ^ k0) + mix64(i ^ k1));\n"
	"	}\n"
	"	for (int offset = 16; offset; offset >>= 1)\n"
	"		acc += __shfl_down_sync(0xffffffffu, acc, offset);\n"
	"	if ((threadIdx.x & 31) == 0)\n"
	"		warp_sums[threadIdx.x >> 5] = acc;\n"
	"	__syncthreads();\n"
	"	if (threadIdx.x < 32) {\n"
	"		acc = threadIdx.x < (blockDim.x >> 5) ? warp_sums[threadIdx.x] : 0;\n"
	"		for (int offset = 16; offset; offset >>= 1)\n"
	"			acc += __shfl_down_sync(0xffffffffu, acc, offset);\n"
	"		if (threadIdx.x == 0)\n"
	"			atomicAdd(sum, acc);\n"
	"	}\n"
	"}\n"
	"\n"
	"/*\n"
	" * Guard bands: each region (device pointer, bytes, offset) holds the\n"
	" * job's random pattern from its offset on: byte o is pattern[(offset + o)\n"
	" * & mask].  The pattern is uploaded from the host's copy before every fill\n"
	" * and check, so a kernel that rewrote it and a band to match is undone\n"
	" * first.  One launch fills or checks every region (blockIdx.y picks it);\n"
	" * a check counts the bytes that differ and keeps the lowest (region << 40\n"
	" * | offset).\n"
	" */\n"
	"struct region { u64 ptr, bytes, offset; };\n"
	"\n"
	"extern \"C\" __global__ void ks_guard(const region *regions, const unsigned char *pattern, u64 "
	"mask,\n"
	"				    int check, u64 *result)\n"
	"{\n"
	"	const region r = regions[blockIdx.y];\n"
	"	unsigned char *p = (unsigned char *)r.ptr;\n"
	"	u64 bad = 0, first = ~0ull;\n"
	"\n"
	"	for (u64 o = (u64)blockIdx.x * blockDim.x + threadIdx.x; o < r.bytes;\n"
	"	     o += (u64)gridDim.x * blockDim.x) {\n"
	"		unsigned char want = pattern[(r.offset + o) & mask];\n"
	"		if (!check) {\n"
	"			p[o] = want;\n"
	"		} else if (p[o] != want) {\n"
	"			bad++;\n"
	"			if (first == ~0ull)\n"
	"				first = (u64)blockIdx.y << 40 | o;\n"
	"		}\n"
	"	}\n"
	"	if (check && bad) {\n"
	"		atomicAdd(&result[0], bad);\n"
	"		atomicMin(&result[1], first);\n"
	"	}\n"
	"}\n"
	"\n"
	"/*\n"
	" * Output comparison on the device, the same rule as compare.c on the host:\n"
	" * element i fails unless got and ref are both finite and |got - ref| <=\n"
	" * atol + rtol * |ref| (in double, rounded step by step as the host does).\n"
	" * result[0] counts failures, result[1] keeps the lowest failing index.\n"
	" */\n"
	"__device__ __forceinline__ double element(const void *p, int dtype, long long i)\n"
	"{\n"
	"	if (dtype == DT_BF16)\n"
	"		return (double)bf16_to_f32(((const u16 *)p)[i]);\n"
	"	if (dtype == DT_F16)\n"
	"		return (double)f16_to_f32(((const u16 *)p)[i]);\n"
	"	if (dtype == DT_F32)\n"
	"		return (double)((const float *)p)[i];\n"
	"	if (dtype == DT_I32)\n"
	"		return (double)((const int *)p)[i];\n"
	"	return (double)((const long long *)p)[i];\n"
	"}\n"
	"\n"
	"__device__ __forceinline__ bool finite(double x)\n"
	"{\n"
	"	return ((__double_as_longlong(x) >> 52) & 0x7ff) != 0x7ff;\n"
	"}\n"
	"\n"
	"__device__ __forceinline__ double magnitude(double x)\n"
	"{\n"
	"	return __longlong_as_double(__double_as_longlong(x) & 0x7fffffffffffffffll);\n"
	"}\n"
	"\n"
	"extern \"C\" __global__ void ks_compare(const void *got, const void *ref, long long n, int dtype,\n"
	"				   double atol, double rtol, u64 *result)\n"
	"{\n"
	"	u64 bad = 0, first = ~0ull;\n"
	"\n"
	"	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
	"	     i += (long long)gridDim.x * blockDim.x) {\n"
	"		double g = element(got, dtype, i), r = element(ref, dtype, i);\n"
	"		bool ok = finite(g) && finite(r) &&\n"
	"			  magnitude(__dsub_rn(g, r)) <= __dadd_rn(atol, __dmul_rn(rtol, "
	"magnitude(r)));\n"
	"		if (!ok) {\n"
	"			bad++;\n"
	"			if (first == ~0ull)\n"
	"				first = (u64)i;\n"
	"		}\n"
	"	}\n"
	"	if (bad) {\n"
	"		atomicAdd(&result[0], bad);\n"
	"		atomicMin(&result[1], first);\n"
	"	}\n"
	"}\n"
	"\n"
	"/* Overwrite the block's whole dynamic shared memory, so no launch can read another's. */\n"
	"extern \"C\" __global__ void ks_scrub_shared(unsigned int words)\n"
	"{\n"
	"	extern __shared__ unsigned int smem[];\n"
	"	volatile unsigned int *s = smem; /* the stores are the point: none may be dropped */\n"
	"	for (unsigned int i = threadIdx.x; i < words; i += blockDim.x)\n"
	"		s[i] = 0xffffffffu;\n"
	"}\n"

	"\n"
	"/* 16-byte copies, four in flight per thread, for the DRAM bandwidth. */\n"

	"extern \"C\" __global__ void ks_copy(const uint4 *__restrict__ src, uint4 *__restrict__ dst,\n"
	"				u64 n)\n"
	"{\n"
	"	const u64 stride = (u64)gridDim.x * blockDim.x;\n"
	"	u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;\n"
	"\n"
	"	for (; i + 3 * stride < n; i += 4 * stride) {\n"
	"		uint4 v0 = src[i], v1 = src[i + stride];\n"
	"		uint4 v2 = src[i + 2 * stride], v3 = src[i + 3 * stride];\n"
	"		dst[i] = v0;\n"
	"		dst[i + stride] = v1;\n"
	"		dst[i + 2 * stride] = v2;\n"
	"		dst[i + 3 * stride] = v3;\n"
	"	}\n"
	"	for (; i < n; i += stride)\n"
	"		dst[i] = src[i];\n"
	"}\n";

_Static_assert(KS_DTYPE_BFLOAT16 == 0 && KS_DTYPE_FLOAT16 == 1 && KS_DTYPE_FLOAT32 == 2 &&
		       KS_DTYPE_INT32 == 3 && KS_DTYPE_INT64 == 4,
	       "kit_source numbers the dtypes as enum ks_dtype does");
_Static_assert(KS_GEN_NORMAL == 0 && KS_GEN_UNIFORM == 1 && KS_GEN_CONST == 2,
	       "kit_source numbers the generator kinds as enum ks_generator_kind does");

/* The checksum's reduction assumes whole warps, at most 32 of them. */
#define KIT_BLOCK 256

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)

/* Flush buffer: twice the L2 (so no line of the old contents survives), at least this. */
#define FLUSH_MIN_BYTES (64 * MIB)

/* DRAM bandwidth: copy between two buffers this large, many times the L2. */
#define DRAM_COPY_BYTES GIB
#define DRAM_WARMUP 3
#define DRAM_TIMED 10

/* PCG32 streams, one per host-side use, so that they never share draws. */
#define STREAM_INDPTR 0x696e6470747231ull /* "indptr1" */
#define STREAM_PAGES 0x7061676573ull	  /* "pages" */
#define STREAM_SCALAR 0x7363616c6172ull	  /* "scalar" */

/* Salts that keep device fills of different kinds on unrelated sequences. */
#define SALT_FILL 0x243f6a8885a308d3ull
#define SALT_CHECKSUM_LENGTH 0x13198a2e03707344ull

#define CACHE_FORMAT 1

struct ks_gpukit {
	const struct ks_cuda *cu;
	struct ks_gpu_info info;
	char arch[16];
	CUdevice dev;
	CUcontext ctx; /* retained primary context; NULL until retained */
	CUstream stream;
	CUmodule module;
	CUfunction fill, checksum, copy, guard, scrub, compare;
	unsigned int fill_blocks, checksum_blocks, copy_blocks, guard_blocks,
		compare_blocks;	  /* all resident */
	unsigned int scrub_words; /* the scrub kernel's dynamic shared memory, in 4-byte words */
	unsigned int scrub_grid;  /* its blocks: as many as fit on the GPU at once, all resident */
	CUdeviceptr flush_buf;
	size_t flush_bytes;
	unsigned int flushes;
	CUdeviceptr sum_buf; /* the checksum kernel's 8-byte accumulator */
};

/* 0 when rc is CUDA_SUCCESS, else -1 with err naming the GPU, the call and the error. */
static int check(const struct ks_gpukit *kit, CUresult rc, const char *what, struct ks_error *err)
{
	if (rc == CUDA_SUCCESS)
		return 0;
	return ks_fail(err, "GPU %d (%s): %s failed: %s", kit->info.ordinal, kit->info.name, what,
		       ks_cuda_strerror(rc));
}

/* Enough blocks of KIT_BLOCK threads to fill the device once, for grid-stride loops. */
static int resident_blocks(struct ks_gpukit *kit, CUfunction func, unsigned int *blocks, struct ks_error *err)
{
	int per_sm = 0;

	if (check(kit, kit->cu->occupancy_max_active_blocks(&per_sm, func, KIT_BLOCK, 0),
		  "cuOccupancyMaxActiveBlocksPerMultiprocessor", err))
		return -1;
	if (per_sm < 1)
		per_sm = 1;
	*blocks = (unsigned int)per_sm * (unsigned int)kit->info.sm_count;
	return 0;
}

static int build_kernels(struct ks_gpukit *kit, struct ks_error *err)
{
	const struct ks_compile_request req = { .source = kit_source,
						.source_name = "ksearch-gpukit.cu",
						.arch = kit->arch,
						.resources_optional = 1 };
	const struct ks_cuda *cu = kit->cu;
	struct ks_compile_result res;
	int ret = -1;

	if (ks_nvrtc_compile(&req, &res, err)) {
		ks_error_prefix(err, "building the GPU kit's own kernels for %s", kit->arch);
		goto cleanup;
	}
	if (check(kit, cu->module_load_data(&kit->module, res.cubin), "loading the kit's kernels", err) ||
	    check(kit, cu->module_get_function(&kit->fill, kit->module, "ks_fill"),
		  "cuModuleGetFunction(ks_fill)", err) ||
	    check(kit, cu->module_get_function(&kit->checksum, kit->module, "ks_checksum"),
		  "cuModuleGetFunction(ks_checksum)", err) ||
	    check(kit, cu->module_get_function(&kit->copy, kit->module, "ks_copy"),
		  "cuModuleGetFunction(ks_copy)", err) ||
	    check(kit, cu->module_get_function(&kit->guard, kit->module, "ks_guard"),
		  "cuModuleGetFunction(ks_guard)", err) ||
	    check(kit, cu->module_get_function(&kit->scrub, kit->module, "ks_scrub_shared"),
		  "cuModuleGetFunction(ks_scrub_shared)", err) ||
	    check(kit, cu->module_get_function(&kit->compare, kit->module, "ks_compare"),
		  "cuModuleGetFunction(ks_compare)", err))
		goto cleanup;
	if (resident_blocks(kit, kit->fill, &kit->fill_blocks, err) ||
	    resident_blocks(kit, kit->checksum, &kit->checksum_blocks, err) ||
	    resident_blocks(kit, kit->copy, &kit->copy_blocks, err) ||
	    resident_blocks(kit, kit->guard, &kit->guard_blocks, err) ||
	    resident_blocks(kit, kit->compare, &kit->compare_blocks, err))
		goto cleanup;
	/* the scrub takes all the shared memory a block may have, so one block holds a whole SM */
	kit->scrub_words = (unsigned int)(kit->info.max_smem_per_block_optin > 48 * 1024
						  ? kit->info.max_smem_per_block_optin
						  : 48 * 1024) /
			   4;
	if (check(kit,
		  cu->func_set_attribute(kit->scrub, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					 (int)(4 * kit->scrub_words)),
		  "giving the scrub kernel all shared memory", err) ||
	    check(kit,
		  cu->func_set_attribute(kit->scrub, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100),
		  "setting the scrub kernel's shared-memory carveout", err))
		goto cleanup;
	{
		int per_sm = 0;

		if (check(kit,
			  cu->occupancy_max_active_blocks(&per_sm, kit->scrub, 1024,
							  (size_t)4 * kit->scrub_words),
			  "cuOccupancyMaxActiveBlocksPerMultiprocessor (the scrub kernel)", err))
			goto cleanup;
		kit->scrub_grid = (unsigned int)(per_sm > 0 ? per_sm : 1) *
				  (unsigned int)(kit->info.sm_count > 0 ? kit->info.sm_count : 1);
	}

	ret = 0;
cleanup:
	ks_compile_result_release(&res);
	return ret;
}

int ks_gpukit_open(struct ks_gpukit **out, const struct ks_cuda *cu, int ordinal, struct ks_error *err)
{
	struct ks_gpukit *kit = ks_calloc(1, sizeof(*kit));
	size_t l2;
	int ret = -1;

	*out = NULL;
	kit->cu = cu;
	if (ks_cuda_device_info(ordinal, &kit->info, err))
		goto cleanup;
	ks_gpu_arch(&kit->info, kit->arch, sizeof(kit->arch));
	if (check(kit, cu->device_get(&kit->dev, ordinal), "cuDeviceGet", err) ||
	    check(kit, cu->primary_ctx_retain(&kit->ctx, kit->dev), "cuDevicePrimaryCtxRetain", err))
		goto cleanup;
	if (check(kit, cu->ctx_set_current(kit->ctx), "cuCtxSetCurrent", err) ||
	    check(kit, cu->stream_create(&kit->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", err))
		goto cleanup;
	if (build_kernels(kit, err))
		goto cleanup;

	l2 = kit->info.l2_bytes > 0 ? (size_t)kit->info.l2_bytes : 0;
	kit->flush_bytes = (2 * l2 + MIB - 1) / MIB * MIB;
	if (kit->flush_bytes < FLUSH_MIN_BYTES)
		kit->flush_bytes = FLUSH_MIN_BYTES;
	if (check(kit, cu->mem_alloc(&kit->flush_buf, kit->flush_bytes), "allocating the L2 flush buffer",
		  err) ||
	    check(kit, cu->mem_alloc(&kit->sum_buf, sizeof(uint64_t)), "allocating the checksum accumulator",
		  err))
		goto cleanup;
	ret = 0;
cleanup:
	if (ret)
		ks_gpukit_close(kit);
	else
		*out = kit;
	return ret;
}

void ks_gpukit_close(struct ks_gpukit *kit)
{
	const struct ks_cuda *cu;

	if (!kit)
		return;
	cu = kit->cu;
	/*
	 * Errors are ignored: after a sticky fault (a candidate's illegal
	 * address) every call fails, and the context must be released anyway.
	 */
	if (kit->ctx) {
		cu->ctx_set_current(kit->ctx);
		if (kit->stream)
			cu->stream_synchronize(kit->stream);
		if (kit->flush_buf)
			cu->mem_free(kit->flush_buf);
		if (kit->sum_buf)
			cu->mem_free(kit->sum_buf);
		if (kit->module)
			cu->module_unload(kit->module);
		if (kit->stream)
			cu->stream_destroy(kit->stream);
		cu->primary_ctx_release(kit->dev);
	}
	free(kit);
}

CUstream ks_gpukit_stream(const struct ks_gpukit *kit)
{
	return kit->stream;
}

int ks_gpukit_pci(const struct ks_gpukit *kit, int *domain, int *bus, int *device)
{
	const struct ks_cuda *cu = kit->cu;

	if (cu->device_get_attribute(domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, kit->dev) != CUDA_SUCCESS ||
	    cu->device_get_attribute(bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, kit->dev) != CUDA_SUCCESS ||
	    cu->device_get_attribute(device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, kit->dev) != CUDA_SUCCESS)
		return -1;
	return 0;
}

const struct ks_cuda *ks_gpukit_cuda(const struct ks_gpukit *kit)
{
	return kit->cu;
}

static unsigned int grid_for(unsigned int resident, uint64_t work)
{
	uint64_t needed = (work + KIT_BLOCK - 1) / KIT_BLOCK;

	if (needed < 1)
		needed = 1;
	return needed < resident ? (unsigned int)needed : resident;
}

static int launch(struct ks_gpukit *kit, CUfunction func, const char *name, unsigned int grid, void **params,
		  struct ks_error *err)
{
	CUresult rc = kit->cu->launch_kernel(func, grid, 1, 1, KIT_BLOCK, 1, 1, 0, kit->stream, params, NULL);

	if (rc == CUDA_SUCCESS)
		return 0;
	return ks_fail(err, "GPU %d (%s): launching the kit's %s kernel failed: %s", kit->info.ordinal,
		       kit->info.name, name, ks_cuda_strerror(rc));
}

static int is_float(enum ks_dtype dtype)
{
	return dtype == KS_DTYPE_BFLOAT16 || dtype == KS_DTYPE_FLOAT16 || dtype == KS_DTYPE_FLOAT32;
}

/* normal, uniform and const, on the device. */
static int fill(struct ks_gpukit *kit, CUdeviceptr dst, enum ks_dtype dtype, int64_t numel,
		const struct ks_generator *gen, uint64_t seed, struct ks_error *err)
{
	long long n = numel, ivalue = 0;
	int dtype_arg = (int)dtype, kind_arg = (int)gen->kind;
	uint64_t key = ks_mix64(seed ^ ks_mix64(SALT_FILL + (uint64_t)gen->kind));
	float a = (float)gen->a, b = (float)gen->b;
	void *params[] = { &dst, &n, &dtype_arg, &kind_arg, &key, &a, &b, &ivalue };

	if (!is_float(dtype)) {
		if (gen->kind != KS_GEN_CONST)
			return ks_fail(err,
				       "a %s generator makes floating-point values, but the "
				       "tensor is %s",
				       ks_generator_kind_name(gen->kind), ks_dtype_name(dtype));
		if (gen->a != trunc(gen->a) ||
		    (dtype == KS_DTYPE_INT32 && (gen->a < INT32_MIN || gen->a > INT32_MAX)) ||
		    fabs(gen->a) >= 9223372036854775808.0)
			return ks_fail(err, "const value %g is not a %s", gen->a, ks_dtype_name(dtype));
		ivalue = (long long)gen->a;
	}
	return launch(kit, kit->fill, "fill", grid_for(kit->fill_blocks, ((uint64_t)numel + 1) / 2), params,
		      err);
}

/* Uniform in [0, bound), bound > 0, without modulo bias. */
static uint64_t bounded64(struct ks_pcg32 *rng, uint64_t bound)
{
	uint64_t threshold;

	if (bound <= UINT32_MAX)
		return ks_pcg32_bounded(rng, (uint32_t)bound);
	threshold = (0 - bound) % bound;
	for (;;) {
		uint64_t hi = ks_pcg32_next(rng), lo = ks_pcg32_next(rng);
		uint64_t r = hi << 32 | lo;

		if (r >= threshold)
			return r % bound;
	}
}

static int cmp_int64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Copy host data up and wait, so that the caller may free it at once. */
static int upload(struct ks_gpukit *kit, CUdeviceptr dst, const void *src, size_t bytes, struct ks_error *err)
{
	const struct ks_cuda *cu = kit->cu;

	if (check(kit, cu->memcpy_htod_async(dst, src, bytes, kit->stream), "cuMemcpyHtoDAsync", err) ||
	    check(kit, cu->stream_synchronize(kit->stream), "cuStreamSynchronize", err))
		return -1;
	return 0;
}

/* spare over requests at B - 1 uniform cut points (sorted; the gaps between them are the shares). */
static void split_uniform(struct ks_pcg32 *rng, int64_t spare, int64_t requests, int64_t *lengths)
{
	for (int64_t i = 0; i < requests - 1; i++)
		lengths[i] = (int64_t)bounded64(rng, (uint64_t)spare + 1);
	qsort(lengths, (size_t)(requests - 1), sizeof(*lengths), cmp_int64);
	lengths[requests - 1] = spare;
	/* cut points -> gaps, from the back so each cut is read before it is overwritten */
	for (int64_t i = requests - 1; i > 0; i--)
		lengths[i] -= lengths[i - 1];
}

/*
 * A skewed split's longest request holds a fixed share of the tokens: the
 * SKEW_QUANTILE of the longest share over SKEW_SAMPLES log-normal draws of
 * the same batch size (fixed seed, so a function of the batch size alone:
 * 0.61 for 16 requests, 0.30 for 64).  One draw's longest share varies
 * several-fold (16 requests: 0.20 to 0.56 from p10 to p90 of 2,000 draws), and a kernel
 * that splits each request into a bounded number of parts, or merges a long
 * request's partials in rounds, is as slow as that share: rated on one
 * draw, the search kept the kernels timed on the mildest draws, which ran up
 * to 2.1 times slower on another (BENCHMARKS.md, "Bests that held only on a
 * lucky draw"); rated on the most skewed of eight, still up to 16% slower.
 * With the share fixed, which request is long, the other requests' shares
 * and the page tables stay random; nine random draws in ten are milder.
 */
#define SKEW_SIGMA 1.5
#define SKEW_QUANTILE 0.9
#define SKEW_SAMPLES 256
#define STREAM_SKEW 0x736b6577ull /* "skew": the fixed-seed draws that set the share */

/* One set of weights (even: 1 +- 12.5%; skewed: log-normal, sigma SKEW_SIGMA); their sum. */
static double draw_weights(struct ks_pcg32 *rng, int64_t requests, enum ks_split split, double *weight)
{
	const double two_pi = 6.283185307179586476925286766559;
	double sum = 0;

	for (int64_t i = 0; i < requests; i++) {
		double u0 = 1.0 - ks_pcg32_double(rng), u1 = ks_pcg32_double(rng);

		if (split == KS_SPLIT_EVEN)
			weight[i] = 0.875 + 0.25 * u1;
		else
			weight[i] = exp(SKEW_SIGMA * sqrt(-2.0 * log(u0)) * cos(two_pi * u1));
		sum += weight[i];
	}
	return sum;
}

/* Index of the largest of requests weights. */
static int64_t largest(const double *weight, int64_t requests)
{
	int64_t top = 0;

	for (int64_t i = 1; i < requests; i++)
		top = weight[i] > weight[top] ? i : top;
	return top;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The longest request's share in a skewed split of requests (see SKEW_QUANTILE). */
static double skew_share(int64_t requests)
{
	double *weight = ks_calloc((size_t)requests, sizeof(*weight)), shares[SKEW_SAMPLES];
	struct ks_pcg32 rng;

	ks_pcg32_seed(&rng, (uint64_t)requests, STREAM_SKEW);
	for (int d = 0; d < SKEW_SAMPLES; d++) {
		double sum = draw_weights(&rng, requests, KS_SPLIT_SKEWED, weight);

		shares[d] = weight[largest(weight, requests)] / sum;
	}
	free(weight);
	qsort(shares, SKEW_SAMPLES, sizeof(shares[0]), cmp_double);
	return shares[(int)(SKEW_QUANTILE * (SKEW_SAMPLES - 1))];
}

/*
 * spare over requests in proportion to random weights (even: 1 +- 12.5%;
 * skewed: log-normal, sigma 1.5, the largest then scaled to hold
 * skew_share() of the sum), rounded down, and what rounding left given one
 * token each to requests drawn at random.
 */
static void split_shares(struct ks_pcg32 *rng, int64_t spare, int64_t requests, enum ks_split split,
			 int64_t *lengths)
{
	double *weight = ks_calloc((size_t)requests, sizeof(*weight));
	double sum = draw_weights(rng, requests, split, weight);
	int64_t given = 0;

	if (split == KS_SPLIT_SKEWED && requests > 1) {
		int64_t top = largest(weight, requests);
		double rest = sum - weight[top], share = skew_share(requests);

		/* the others keep their proportions; the longest holds share of the new sum */
		weight[top] = rest > 0 ? rest * share / (1.0 - share) : 1.0;
		sum = rest + weight[top];
	}
	for (int64_t i = 0; i < requests; i++) {
		lengths[i] = (int64_t)((double)spare * (weight[i] / sum));
		if (lengths[i] > spare - given)
			lengths[i] = spare - given;
		given += lengths[i];
	}
	while (given < spare) {
		lengths[bounded64(rng, (uint64_t)requests)]++;
		given++;
	}
	free(weight);
}

/*
 * B = numel - 1 request lengths: the given ones, or min each plus a split
 * of the rest (enum ks_split), then their int32 prefix sums.
 */
static int gen_indptr(struct ks_gpukit *kit, CUdeviceptr dst, enum ks_dtype dtype, int64_t numel,
		      const struct ks_generator *gen, const struct ks_env *axes, uint64_t seed,
		      enum ks_split split, struct ks_error *err)
{
	int64_t requests = numel - 1, total, spare, sum = 0;
	int64_t *lengths = NULL;
	int32_t *indptr = NULL;
	struct ks_pcg32 rng;
	int ret = -1;

	if (dtype != KS_DTYPE_INT32) {
		ks_fail(err, "an indptr generator makes int32 values, but the tensor is %s",
			ks_dtype_name(dtype));
		goto cleanup;
	}
	if (requests < 1) {
		ks_fail(err, "an indptr needs at least 2 elements, got %lld", (long long)numel);
		goto cleanup;
	}
	if (ks_expr_eval(gen->expr, axes, &total, err)) {
		ks_error_prefix(err, "indptr total");
		goto cleanup;
	}
	if (total < 0 || total > INT32_MAX) {
		ks_fail(err, "indptr total \"%s\" = %lld does not fit an int32 prefix sum", gen->expr,
			(long long)total);
		goto cleanup;
	}
	if (gen->start < 0 || gen->start > total) {
		ks_fail(err, "indptr start %lld is outside [0, total \"%s\" = %lld]", (long long)gen->start,
			gen->expr, (long long)total);
		goto cleanup;
	}
	total -= gen->start; /* the requests' tokens; indptr[0] = start */

	lengths = ks_calloc((size_t)requests, sizeof(*lengths));
	if (gen->lengths) {
		if ((int64_t)gen->n_lengths != requests) {
			ks_fail(err, "indptr: %zu lengths given for %lld requests", gen->n_lengths,
				(long long)requests);
			goto cleanup;
		}
		for (int64_t i = 0; i < requests; i++) {
			if (gen->lengths[i] < 0 || gen->lengths[i] > total) {
				ks_fail(err, "indptr: length %lld of request %lld is outside [0, %lld]",
					(long long)gen->lengths[i], (long long)i, (long long)total);
				goto cleanup;
			}
			lengths[i] = gen->lengths[i];
		}
	} else {
		if (gen->min < 0 || (gen->min > 0 && requests > total / gen->min)) {
			ks_fail(err,
				"indptr: %lld requests of at least %lld cannot sum to total \"%s\" = %lld",
				(long long)requests, (long long)gen->min, gen->expr, (long long)total);
			goto cleanup;
		}
		spare = total - requests * gen->min;
		ks_pcg32_seed(&rng, seed, STREAM_INDPTR);
		if (split == KS_SPLIT_UNIFORM)
			split_uniform(&rng, spare, requests, lengths);
		else
			split_shares(&rng, spare, requests, split, lengths);
		for (int64_t i = 0; i < requests; i++)
			lengths[i] += gen->min;
	}

	/* Each length is at most total <= INT32_MAX, so the sum cannot overflow int64. */
	for (int64_t i = 0; i < requests; i++)
		sum += lengths[i];
	if (sum != total) {
		ks_fail(err, "indptr: lengths sum to %lld, but total \"%s\" is %lld", (long long)sum,
			gen->expr, (long long)total);
		goto cleanup;
	}
	indptr = ks_calloc((size_t)numel, sizeof(*indptr));
	indptr[0] = (int32_t)gen->start;
	for (int64_t i = 0; i < requests; i++)
		indptr[i + 1] = indptr[i] + (int32_t)lengths[i];
	ret = upload(kit, dst, indptr, (size_t)numel * sizeof(*indptr), err);
cleanup:
	free(lengths);
	free(indptr);
	return ret;
}

/* Add value to the set; returns 1 when it was already there. */
static int set_insert(struct ks_map *set, int64_t value)
{
	int added;

	ks_map_put(set, &value, sizeof(value), &added);
	return !added;
}

/*
 * numel distinct values from [0, pool): Floyd's sampling (memory in
 * numel, not pool, which may be far larger), then a Fisher-Yates shuffle,
 * because Floyd's picks are not in random order.
 */
static int gen_page_permutation(struct ks_gpukit *kit, CUdeviceptr dst, enum ks_dtype dtype, int64_t numel,
				const struct ks_generator *gen, const struct ks_env *axes, uint64_t seed,
				struct ks_error *err)
{
	struct ks_map set = KS_MAP_INIT;
	int32_t *pages = NULL;
	struct ks_pcg32 rng;
	int64_t pool, k = 0;
	int ret = -1;

	if (dtype != KS_DTYPE_INT32) {
		ks_fail(err, "a page_permutation generator makes int32 values, but the tensor is %s",
			ks_dtype_name(dtype));
		goto cleanup;
	}
	if (ks_expr_eval(gen->expr, axes, &pool, err)) {
		ks_error_prefix(err, "page_permutation pool");
		goto cleanup;
	}
	if (pool < numel) {
		ks_fail(err,
			"page_permutation: pool \"%s\" = %lld is smaller than the %lld indices "
			"drawn from it",
			gen->expr, (long long)pool, (long long)numel);
		goto cleanup;
	}
	if (pool - 1 > INT32_MAX) {
		ks_fail(err, "page_permutation: pool \"%s\" = %lld has indices beyond int32", gen->expr,
			(long long)pool);
		goto cleanup;
	}
	if (numel == 0) {
		ret = 0;
		goto cleanup;
	}

	ks_pcg32_seed(&rng, seed, STREAM_PAGES);
	pages = ks_malloc((size_t)numel * sizeof(*pages));
	for (int64_t j = pool - numel; j < pool; j++) {
		int64_t t = (int64_t)bounded64(&rng, (uint64_t)j + 1);

		if (set_insert(&set, t)) {
			t = j; /* j is new: every earlier pick is below it */
			set_insert(&set, t);
		}
		pages[k++] = (int32_t)t;
	}
	for (int64_t i = numel - 1; i > 0; i--) {
		int64_t r = (int64_t)bounded64(&rng, (uint64_t)i + 1);
		int32_t swap = pages[i];

		pages[i] = pages[r];
		pages[r] = swap;
	}
	ret = upload(kit, dst, pages, (size_t)numel * sizeof(*pages), err);
cleanup:
	ks_map_release(&set);
	free(pages);
	return ret;
}

const char *ks_split_name(enum ks_split split)
{
	static const char *const names[KS_SPLIT_COUNT] = { "uniform", "even", "skewed" };

	return split >= 0 && split < KS_SPLIT_COUNT ? names[split] : "unknown";
}

int ks_gpukit_generate_split(struct ks_gpukit *kit, CUdeviceptr dst, enum ks_dtype dtype, int64_t numel,
			     const struct ks_generator *gen, const struct ks_env *axes, uint64_t seed,
			     enum ks_split split, struct ks_error *err)
{
	if (numel < 0)
		return ks_fail(err, "cannot generate %lld elements", (long long)numel);
	if (split < 0 || split >= KS_SPLIT_COUNT)
		return ks_fail(err, "internal error: split kind %d", (int)split);
	switch (gen->kind) {
	case KS_GEN_NORMAL:
	case KS_GEN_UNIFORM:
	case KS_GEN_CONST:
		if (numel == 0)
			return 0;
		return fill(kit, dst, dtype, numel, gen, seed, err);
	case KS_GEN_INDPTR:
		return gen_indptr(kit, dst, dtype, numel, gen, axes, seed, split, err);
	case KS_GEN_PAGE_PERMUTATION:
		return gen_page_permutation(kit, dst, dtype, numel, gen, axes, seed, err);
	}
	return ks_fail(err, "unknown generator kind %d", (int)gen->kind);
}

int ks_gpukit_generate(struct ks_gpukit *kit, CUdeviceptr dst, enum ks_dtype dtype, int64_t numel,
		       const struct ks_generator *gen, const struct ks_env *axes, uint64_t seed,
		       struct ks_error *err)
{
	return ks_gpukit_generate_split(kit, dst, dtype, numel, gen, axes, seed, KS_SPLIT_UNIFORM, err);
}

double ks_gpukit_scalar(const struct ks_generator *gen, uint64_t seed)
{
	const double two_pi = 6.283185307179586476925286766559;
	struct ks_pcg32 rng;
	double u0, u1, x;

	ks_pcg32_seed(&rng, seed, STREAM_SCALAR);
	switch (gen->kind) {
	case KS_GEN_CONST:
		return gen->a;
	case KS_GEN_NORMAL:
		u0 = 1.0 - ks_pcg32_double(&rng); /* (0, 1]: log is finite */
		u1 = ks_pcg32_double(&rng);
		return gen->a + gen->b * sqrt(-2.0 * log(u0)) * cos(two_pi * u1);
	case KS_GEN_UNIFORM:
		x = gen->a + (gen->b - gen->a) * ks_pcg32_double(&rng);
		return x < gen->b ? x : nextafter(gen->b, gen->a);
	case KS_GEN_INDPTR:
	case KS_GEN_PAGE_PERMUTATION:
		break;
	}
	/* op.json rejects these for scalars; NaN makes a misuse fail loudly downstream. */
	return NAN;
}

int ks_gpukit_poison(struct ks_gpukit *kit, CUdeviceptr dst, size_t bytes, struct ks_error *err)
{
	if (!bytes)
		return 0;
	return check(kit, kit->cu->memset_d8_async(dst, 0xff, bytes, kit->stream),
		     "poisoning a buffer (cuMemsetD8Async)", err);
}

int ks_gpukit_checksum_async(struct ks_gpukit *kit, CUdeviceptr src, size_t bytes,
			     const struct ks_hash_key *key, CUdeviceptr slot, struct ks_error *err)
{
	unsigned long long n = bytes;
	uint64_t k0 = key ? key->k0 : 0, k1 = key ? key->k1 : 0x9e3779b97f4a7c15ull;
	void *params[] = { &src, &n, &k0, &k1, &slot };

	if (check(kit, kit->cu->memset_d32_async(slot, 0, 2, kit->stream), "clearing a checksum", err))
		return -1;
	if (!bytes)
		return 0;
	return launch(kit, kit->checksum, "checksum", grid_for(kit->checksum_blocks, (n + 7) / 8), params,
		      err);
}

int ks_gpukit_guards(struct ks_gpukit *kit, CUdeviceptr regions, unsigned int n_regions, uint64_t max_bytes,
		     CUdeviceptr pattern, uint64_t pattern_bytes, CUdeviceptr result, struct ks_error *err)
{
	int checking = result != 0;
	unsigned int grid_x = grid_for(kit->guard_blocks, max_bytes);
	unsigned long long mask = pattern_bytes - 1;
	void *params[] = { &regions, &pattern, &mask, &checking, &result };
	CUresult rc;

	if (!n_regions)
		return 0;
	if (n_regions > 65535)
		return ks_fail(err, "internal error: %u guard regions (at most 65535)", n_regions);
	if (!pattern_bytes || (pattern_bytes & mask))
		return ks_fail(err,
			       "internal error: a guard pattern of %llu bytes (a power of two is needed)",
			       (unsigned long long)pattern_bytes);
	if (checking && (check(kit, kit->cu->memset_d32_async(result, 0, 2, kit->stream),
			       "clearing a guard check", err) ||
			 check(kit, kit->cu->memset_d32_async(result + 8, 0xffffffffu, 2, kit->stream),
			       "clearing a guard check", err)))
		return -1;
	grid_x = (grid_x + n_regions - 1) / n_regions;
	rc = kit->cu->launch_kernel(kit->guard, grid_x ? grid_x : 1, n_regions, 1, KIT_BLOCK, 1, 1, 0,
				    kit->stream, params, NULL);
	return check(kit, rc, checking ? "checking guard bands" : "filling guard bands", err);
}

int ks_gpukit_compare(struct ks_gpukit *kit, enum ks_dtype dtype, CUdeviceptr got, CUdeviceptr ref,
		      int64_t numel, double atol, double rtol, CUdeviceptr result, struct ks_error *err)
{
	long long n = numel;
	int dtype_arg = (int)dtype;
	void *params[] = { &got, &ref, &n, &dtype_arg, &atol, &rtol, &result };

	if (check(kit, kit->cu->memset_d32_async(result, 0, 2, kit->stream), "clearing a comparison", err) ||
	    check(kit, kit->cu->memset_d32_async(result + 8, 0xffffffffu, 2, kit->stream),
		  "clearing a comparison", err))
		return -1;
	if (numel <= 0)
		return 0;
	return launch(kit, kit->compare, "compare", grid_for(kit->compare_blocks, (uint64_t)numel), params,
		      err);
}

int ks_gpukit_scrub_shared(struct ks_gpukit *kit, struct ks_error *err)

{
	unsigned int words = kit->scrub_words;
	void *params[] = { &words };

	/*
	 * A cooperative launch of as many blocks as fit on the GPU at once:
	 * all of them resident together, so every SM holds its share and
	 * every SM's shared memory is written (plain launches in waves leave
	 * that to the block scheduler).  It wipes the largest carveout's
	 * shared memory whole; a kernel run in a smaller carveout could read
	 * about 1 KB per SM that it misses, so the worker runs every kernel
	 * in the largest (worker.c, program_set_smem(); test_gpukit measures
	 * both).
	 */

	return check(kit,
		     kit->cu->launch_cooperative_kernel(kit->scrub, kit->scrub_grid, 1, 1, 1024, 1, 1,
							4 * words, kit->stream, params),
		     "scrubbing shared memory (a cooperative launch of one block per SM)", err);
}

int ks_gpukit_checksum(struct ks_gpukit *kit, CUdeviceptr src, size_t bytes, const struct ks_hash_key *key,
		       uint64_t *sum, struct ks_error *err)
{
	const struct ks_cuda *cu = kit->cu;
	uint64_t device_sum = 0;

	/* The length is mixed in too, so that trailing zero bytes still count. */
	if (bytes &&
	    (ks_gpukit_checksum_async(kit, src, bytes, key, kit->sum_buf, err) ||
	     check(kit, cu->memcpy_dtoh_async(&device_sum, kit->sum_buf, sizeof(device_sum), kit->stream),
		   "reading the checksum", err) ||
	     check(kit, cu->stream_synchronize(kit->stream), "cuStreamSynchronize (checksum)", err)))
		return -1;
	*sum = device_sum + ks_mix64((uint64_t)bytes ^ SALT_CHECKSUM_LENGTH);
	return 0;
}

int ks_gpukit_flush_l2(struct ks_gpukit *kit, struct ks_error *err)
{
	/* A new byte each time, so no write is ever a no-op rewrite of the same data. */
	unsigned char value = (unsigned char)(++kit->flushes);

	return check(kit, kit->cu->memset_d8_async(kit->flush_buf, value, kit->flush_bytes, kit->stream),
		     "flushing the L2", err);
}

/* ---- the device profile ---- */

/*
 * Vendor peaks, matched by compute capability and a model in the name
 * (a whole word: "A10" is not "A10G" or "A100"); the first match wins, so
 * the more specific names come first.
 */
static const struct peak_entry {
	int cc_major, cc_minor;
	const char *name_part;
	const char *model;
	double fp32_tflops, bf16_tflops;
} peak_table[] = {
	{ 9, 0, "H100 PCIe", "H100 PCIe", 51.2, 756.0 },
	{ 9, 0, "H100 NVL", "H100 NVL", 60.0, 835.0 },
	{ 9, 0, "H200 NVL", "H200 NVL", 60.0, 835.0 },
	{ 9, 0, "GH200", "GH200", 67.0, 989.0 },
	{ 9, 0, "H100", "H100 SXM", 67.0, 989.0 },
	{ 9, 0, "H800", "H800 SXM", 67.0, 989.0 },
	{ 9, 0, "H200", "H200 SXM", 67.0, 989.0 },
	{ 8, 0, "A100", "A100", 19.5, 312.0 },
	{ 8, 0, "A800", "A800", 19.5, 312.0 },
	{ 8, 6, "A10", "A10", 31.2, 125.0 },
	{ 8, 6, "A40", "A40", 37.4, 149.7 },
	{ 8, 9, "L40S", "L40S", 91.6, 362.0 },
	{ 8, 9, "L40", "L40", 90.5, 181.0 },
	{ 8, 9, "L4", "L4", 30.3, 121.0 },
	{ 10, 0, "B200", "B200", 75.0, 2250.0 },
};

/*
 * Per-SM, per-clock rates by architecture, for GPUs the table lacks.  They
 * err high: the peaks set a speed-of-light floor below which a timing is
 * refused as impossible, and a floor set too high would refuse real kernels.
 */
static void per_sm_rates(int major, int minor, double *fp32_flops, double *bf16_flops, const char **note)
{
	*note = "";
	if (major < 8) {
		*fp32_flops = 128; /* 64 FMA lanes */
		*bf16_flops = 1024;
		*note = "; no bf16 tensor cores, fp16 rate";
	} else if (major == 8 && minor == 0) {
		*fp32_flops = 128;
		*bf16_flops = 2048;
	} else if (major == 8 || major == 12) {
		*fp32_flops = 256; /* 128 FMA lanes */
		*bf16_flops = 1024;
	} else if (major == 9) {
		*fp32_flops = 256;
		*bf16_flops = 4096;
	} else {
		*fp32_flops = 256;
		*bf16_flops = 8192;
	}
}

static int is_word_edge(char c)
{
	return c == '\0' || c == ' ' || c == '-' || c == '_';
}

/* Whether model occurs in name as whole words: "NVIDIA H100 PCIe" names "H100 PCIe". */
static int names_model(const char *name, const char *model)
{
	size_t len = strlen(model);

	for (const char *at = strstr(name, model); at; at = strstr(at + 1, model))
		if ((at == name || is_word_edge(at[-1])) && is_word_edge(at[len]))
			return 1;
	return 0;
}

static void set_peaks(const struct ks_gpu_info *info, struct ks_device_profile *p)
{
	double fp32_per_clk, bf16_per_clk, ghz;
	const char *note;

	for (size_t i = 0; i < sizeof(peak_table) / sizeof(peak_table[0]); i++) {
		const struct peak_entry *e = &peak_table[i];

		if (e->cc_major != info->cc_major || e->cc_minor != info->cc_minor ||
		    !names_model(info->name, e->name_part))
			continue;
		p->peak_fp32_tflops = e->fp32_tflops;
		p->peak_bf16_tflops = e->bf16_tflops;
		snprintf(p->peak_source, sizeof(p->peak_source),
			 "table: %s vendor peaks (fp32 non-tensor, bf16 dense tensor)", e->model);
		return;
	}
	per_sm_rates(info->cc_major, info->cc_minor, &fp32_per_clk, &bf16_per_clk, &note);
	/* Drivers may stop reporting the clock; 2 GHz is above any shipping boost clock. */
	ghz = info->clock_khz > 0 ? info->clock_khz / 1e6 : 2.0;
	p->peak_fp32_tflops = info->sm_count * ghz * fp32_per_clk / 1e3;
	p->peak_bf16_tflops = info->sm_count * ghz * bf16_per_clk / 1e3;
	snprintf(p->peak_source, sizeof(p->peak_source),
		 "estimate: %d SMs x %.2f GHz x per-SM rates of sm_%d%d%s (not in the table)", info->sm_count,
		 ghz, info->cc_major, info->cc_minor, note);
}

/* "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3" */
static void make_slug(const char *name, char *slug, size_t size)
{
	size_t n = 0;
	int dash = 0;

	for (const char *c = name; *c && n + 1 < size; c++) {
		char ch = *c;

		if (ch >= 'A' && ch <= 'Z')
			ch = (char)(ch - 'A' + 'a');
		if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')) {
			if (dash && n > 0 && n + 2 < size)
				slug[n++] = '-';
			slug[n++] = ch;
			dash = 0;
		} else {
			dash = 1;
		}
	}
	slug[n] = '\0';
	if (!n)
		snprintf(slug, size, "gpu");
}

static void describe_device(const struct ks_gpukit *kit, struct ks_device_profile *p)
{
	const struct ks_gpu_info *info = &kit->info;

	snprintf(p->name, sizeof(p->name), "%s", info->name);
	make_slug(info->name, p->slug, sizeof(p->slug));
	snprintf(p->arch, sizeof(p->arch), "%s", kit->arch);
	p->cc_major = info->cc_major;
	p->cc_minor = info->cc_minor;
	p->sm_count = info->sm_count;
	p->l2_bytes = info->l2_bytes;
	p->total_mem = info->total_mem;
	p->max_smem_per_block_optin = info->max_smem_per_block_optin;
	p->max_smem_per_sm = info->max_smem_per_sm;
	p->regs_per_sm = info->regs_per_sm;
	p->max_threads_per_sm = info->max_threads_per_sm;
	set_peaks(info, p);
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

/*
 * (bytes read + bytes written) / time of a copy between two buffers far
 * larger than the L2: the median of DRAM_TIMED copies after a warm-up.
 */
static int measure_dram(struct ks_gpukit *kit, double *gbps, struct ks_error *err)
{
	const struct ks_cuda *cu = kit->cu;
	CUdeviceptr src = 0, dst = 0;
	CUevent events[DRAM_TIMED + 1] = { 0 };
	float ms[DRAM_TIMED];
	size_t bytes = DRAM_COPY_BYTES, free_bytes = 0, total_bytes = 0, least;
	unsigned long long n16;
	void *params[] = { &src, &dst, &n16 };
	double median;
	int ret = -1;

	if (check(kit, cu->mem_get_info(&free_bytes, &total_bytes), "cuMemGetInfo", err))
		goto cleanup;
	/* Smaller buffers when memory is short, as long as they still dwarf the L2. */
	least = 8 * (size_t)(kit->info.l2_bytes > 0 ? kit->info.l2_bytes : 0);
	if (least < 256 * MIB)
		least = 256 * MIB;
	if (free_bytes < 2 * bytes + 256 * MIB)
		bytes = free_bytes > 256 * MIB ? (free_bytes - 256 * MIB) / 2 / MIB * MIB : 0;
	if (bytes < least) {
		ks_fail(err,
			"GPU %d (%s): only %zu MiB of GPU memory free; measuring the DRAM "
			"bandwidth needs two buffers of %zu MiB",
			kit->info.ordinal, kit->info.name, free_bytes / MIB, least / MIB);
		goto cleanup;
	}
	n16 = bytes / 16;
	if (check(kit, cu->mem_alloc(&src, bytes), "allocating the bandwidth test's source", err) ||
	    check(kit, cu->mem_alloc(&dst, bytes), "allocating the bandwidth test's destination", err) ||
	    check(kit, cu->memset_d8_async(src, 0x5a, bytes, kit->stream), "cuMemsetD8Async", err))
		goto cleanup;
	for (int i = 0; i <= DRAM_TIMED; i++)
		if (check(kit, cu->event_create(&events[i], CU_EVENT_DEFAULT), "cuEventCreate", err))
			goto cleanup;

	for (int i = 0; i < DRAM_WARMUP; i++)
		if (launch(kit, kit->copy, "copy", grid_for(kit->copy_blocks, n16), params, err))
			goto cleanup;
	if (check(kit, cu->event_record(events[0], kit->stream), "cuEventRecord", err))
		goto cleanup;
	for (int i = 0; i < DRAM_TIMED; i++)
		if (launch(kit, kit->copy, "copy", grid_for(kit->copy_blocks, n16), params, err) ||
		    check(kit, cu->event_record(events[i + 1], kit->stream), "cuEventRecord", err))
			goto cleanup;
	if (check(kit, cu->event_synchronize(events[DRAM_TIMED]), "cuEventSynchronize", err))
		goto cleanup;
	for (int i = 0; i < DRAM_TIMED; i++)
		if (check(kit, cu->event_elapsed_time(&ms[i], events[i], events[i + 1]), "cuEventElapsedTime",
			  err))
			goto cleanup;
	qsort(ms, DRAM_TIMED, sizeof(ms[0]), cmp_float);
	median = (ms[(DRAM_TIMED - 1) / 2] + ms[DRAM_TIMED / 2]) / 2.0;
	if (!(median > 0)) {
		ks_fail(err, "GPU %d (%s): the bandwidth test's copies took no time", kit->info.ordinal,
			kit->info.name);
		goto cleanup;
	}
	*gbps = 2.0 * (double)(n16 * 16) / (median * 1e-3) / 1e9;
	ret = 0;
cleanup:
	/* Drain the queued copies before their buffers go. */
	cu->stream_synchronize(kit->stream);
	for (int i = 0; i <= DRAM_TIMED; i++)
		if (events[i])
			cu->event_destroy(events[i]);
	if (src)
		cu->mem_free(src);
	if (dst)
		cu->mem_free(dst);
	return ret;
}

static int json_int_equals(json_t *obj, const char *key, long long want)
{
	json_t *v = json_object_get(obj, key);

	return json_is_integer(v) && json_integer_value(v) == want;
}

/*
 * The cached measurement, if the file holds one for this very device
 * configuration (a MIG slice or another driver may differ in SMs or
 * memory under the same slug).  Anything else, including an unreadable
 * file, is no cache: the caller measures again and rewrites it.
 */
static int cache_read(const char *path, struct ks_device_profile *p)
{
	json_t *root = json_load_file(path, 0, NULL);
	json_t *name, *gbps;
	int ret = -1;

	if (!root)
		return -1;
	name = json_object_get(root, "name");
	gbps = json_object_get(root, "dram_gbps");
	if (json_int_equals(root, "format", CACHE_FORMAT) && json_is_string(name) &&
	    !strcmp(json_string_value(name), p->name) && json_int_equals(root, "sm_count", p->sm_count) &&
	    json_int_equals(root, "l2_bytes", p->l2_bytes) &&
	    json_int_equals(root, "total_mem", (long long)p->total_mem) && json_is_number(gbps) &&
	    json_number_value(gbps) > 0 && isfinite(json_number_value(gbps))) {
		p->dram_gbps = json_number_value(gbps);
		ret = 0;
	}
	json_decref(root);
	return ret;
}

/* Written to a temporary file and renamed, so a reader never sees half of it. */
static int cache_write(const char *dir, const char *path, const struct ks_device_profile *p,
		       struct ks_error *err)
{
	char *text = NULL, *file = NULL;
	json_t *root = NULL;
	int ret = -1;

	if (ks_mkdir_p(dir, err))
		goto cleanup;
	root = json_pack("{s:i, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:i, s:i, s:i, s:i, "
			 "s:f, s:f, s:f, s:s}",
			 "format", CACHE_FORMAT, "name", p->name, "slug", p->slug, "arch", p->arch,
			 "cc_major", p->cc_major, "cc_minor", p->cc_minor, "sm_count", p->sm_count,
			 "l2_bytes", p->l2_bytes, "total_mem", (json_int_t)p->total_mem,
			 "max_smem_per_block_optin", p->max_smem_per_block_optin, "max_smem_per_sm",
			 p->max_smem_per_sm, "regs_per_sm", p->regs_per_sm, "max_threads_per_sm",
			 p->max_threads_per_sm, "dram_gbps", p->dram_gbps, "peak_fp32_tflops",
			 p->peak_fp32_tflops, "peak_bf16_tflops", p->peak_bf16_tflops, "peak_source",
			 p->peak_source);
	text = root ? json_dumps(root, JSON_INDENT(2)) : NULL;
	if (!text) {
		ks_fail(err, "%s: cannot encode the device profile as JSON", path);
		goto cleanup;
	}
	file = ks_asprintf("%s\n", text);
	if (ks_write_file_atomic(path, file, strlen(file), err))
		goto cleanup;
	ret = 0;
cleanup:
	free(file);
	free(text);
	json_decref(root);
	return ret;
}

int ks_gpukit_profile(struct ks_gpukit *kit, const char *cache_dir, struct ks_device_profile *out,
		      int *cached, struct ks_error *err)
{
	char file[sizeof(out->slug) + 8];
	char *path = NULL;
	int ret = -1;

	memset(out, 0, sizeof(*out));
	if (cached)
		*cached = 0;
	/* Attributes and peaks are cheap and always live; only the bandwidth is cached. */
	describe_device(kit, out);
	if (cache_dir) {
		snprintf(file, sizeof(file), "%s.json", out->slug);
		path = ks_path_join(cache_dir, file);
		if (!cache_read(path, out)) {
			if (cached)
				*cached = 1;
			ret = 0;
			goto cleanup;
		}
	}
	if (measure_dram(kit, &out->dram_gbps, err))
		goto cleanup;
	if (cache_dir && cache_write(cache_dir, path, out, err))
		goto cleanup;
	ret = 0;
cleanup:
	free(path);
	return ret;
}
