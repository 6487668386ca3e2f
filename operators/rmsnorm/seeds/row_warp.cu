/* ksearch
{ "params": {"ROWS_PER_BLOCK": [1, 2, 4, 8]},
  "launch": [
    {"kernel": "rmsnorm_row_warp", "grid": ["cdiv(num_rows, ROWS_PER_BLOCK)"],
     "block": ["ROWS_PER_BLOCK*32"],
     "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]} ] }
*/
// RMSNorm, one warp per row, ROWS_PER_BLOCK rows per block.
//
// A lane loads 8 bf16 (16 bytes) at a time and keeps its 1/32 of the row in
// registers (CACHE_ELEMS / 256 = 16 x uint4 for hidden 4096): all loads are
// issued before the first use, x is read once, and the reduction is five
// warp shuffles with no shared memory and no __syncthreads.  Rows longer than
// CACHE_ELEMS are re-read for the rest; rows whose length or address does not
// allow 16-byte accesses take a scalar path.
#include <cuda_bf16.h>

#if !defined(ROWS_PER_BLOCK)
#error "ROWS_PER_BLOCK must be defined"
#endif
#if ROWS_PER_BLOCK < 1 || ROWS_PER_BLOCK > 32
#error "ROWS_PER_BLOCK must be in 1..32"
#endif

#define VEC 8                   /* bf16 per 16-byte access */
#define CACHE_ELEMS 4096        /* row elements kept in registers */
#define STEP (32 * VEC)
#define CACHE ((CACHE_ELEMS + STEP - 1) / STEP)

union Pack {
	uint4 raw;
	unsigned int w[4]; /* two bf16 per word, element 2k in the low half */
};

static __device__ __forceinline__ float lo_bf16(unsigned int w) { return __uint_as_float(w << 16); }
static __device__ __forceinline__ float hi_bf16(unsigned int w) { return __uint_as_float(w & 0xffff0000u); }

static __device__ __forceinline__ unsigned int pack_bf16x2(float lo, float hi)
{
	return (unsigned int)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
	       ((unsigned int)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16);
}

static __device__ __forceinline__ float sum_squares(const Pack &p)
{
	float s = 0.0f;
#pragma unroll
	for (int k = 0; k < 4; ++k) {
		const float a = lo_bf16(p.w[k]), b = hi_bf16(p.w[k]);
		s = fmaf(a, a, s);
		s = fmaf(b, b, s);
	}
	return s;
}

static __device__ __forceinline__ void scale_store(unsigned short *dst, const Pack &xv,
						   const unsigned short *w, float inv_rms)
{
	Pack wv, out;
	wv.raw = __ldg(reinterpret_cast<const uint4 *>(w));
#pragma unroll
	for (int k = 0; k < 4; ++k)
		out.w[k] = pack_bf16x2((lo_bf16(xv.w[k]) * inv_rms) * lo_bf16(wv.w[k]),
				       (hi_bf16(xv.w[k]) * inv_rms) * hi_bf16(wv.w[k]));
	*reinterpret_cast<uint4 *>(dst) = out.raw;
}

static __device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

extern "C" __global__ void __launch_bounds__(ROWS_PER_BLOCK * 32)
rmsnorm_row_warp(const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ weight,
		 float eps, __nv_bfloat16 *__restrict__ y, int num_rows, int hidden)
{
	const int lane = threadIdx.x & 31;
	const long long row = (long long)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
	if (row >= num_rows || hidden <= 0)
		return; /* uniform over the warp; no block-level synchronisation below */
	const unsigned short *xr = reinterpret_cast<const unsigned short *>(x) + row * hidden;
	unsigned short *yr = reinterpret_cast<unsigned short *>(y) + row * hidden;
	const unsigned short *w = reinterpret_cast<const unsigned short *>(weight);
	const bool vec_ok = hidden % VEC == 0 &&
			    (((unsigned long long)xr | (unsigned long long)yr |
			      (unsigned long long)w) & 15ull) == 0;

	if (vec_ok) {
		Pack cache[CACHE];
#pragma unroll
		for (int c = 0; c < CACHE; ++c) {
			const int i = (c * 32 + lane) * VEC;
			if (i < hidden)
				cache[c].raw = *reinterpret_cast<const uint4 *>(xr + i);
		}
		float ss = 0.0f;
#pragma unroll
		for (int c = 0; c < CACHE; ++c)
			if ((c * 32 + lane) * VEC < hidden)
				ss += sum_squares(cache[c]);
		/* ksearch:unroll */
		for (int i = (CACHE * 32 + lane) * VEC; i < hidden; i += STEP) {
			Pack p;
			p.raw = *reinterpret_cast<const uint4 *>(xr + i);
			ss += sum_squares(p);
		}
		const float inv_rms = rsqrtf(warp_sum(ss) / (float)hidden + eps);
#pragma unroll
		for (int c = 0; c < CACHE; ++c) {
			const int i = (c * 32 + lane) * VEC;
			if (i < hidden)
				scale_store(yr + i, cache[c], w + i, inv_rms);
		}
		/* ksearch:unroll */
		for (int i = (CACHE * 32 + lane) * VEC; i < hidden; i += STEP) {
			Pack p;
			p.raw = *reinterpret_cast<const uint4 *>(xr + i);
			scale_store(yr + i, p, w + i, inv_rms);
		}
	} else {
		float ss = 0.0f;
		for (int i = lane; i < hidden; i += 32) {
			const float v = __uint_as_float((unsigned int)xr[i] << 16);
			ss = fmaf(v, v, ss);
		}
		const float inv_rms = rsqrtf(warp_sum(ss) / (float)hidden + eps);
		for (int i = lane; i < hidden; i += 32) {
			const float v = __uint_as_float((unsigned int)xr[i] << 16);
			const float g = __uint_as_float((unsigned int)w[i] << 16);
			yr[i] = __bfloat16_as_ushort(__float2bfloat16_rn((v * inv_rms) * g));
		}
	}
}
