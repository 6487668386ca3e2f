/* ksearch
{ "params": {"THREADS": [128, 256, 512, 1024], "VEC": [1, 2, 4, 8]},
  "launch": [
    {"kernel": "rmsnorm_row_block", "grid": ["num_rows"], "block": ["THREADS"],
     "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]} ] }
*/
// RMSNorm, one block per row.
//
// Each thread loads VEC bf16 at a time (VEC*2 bytes: 2, 4, 8 or 16) and
// keeps its part of the row in registers (up to CACHE_ELEMS elements per row,
// the op's hidden size), so x is read from global memory exactly once.  The
// fp32 sum of squares is reduced with warp shuffles, then across warps
// through a tiny shared array.  Rows that are longer than CACHE_ELEMS are
// still correct (the rest is re-read), and rows whose length or address does
// not allow VEC-wide accesses take a scalar path.
#include <cuda_bf16.h>

#if !defined(THREADS) || !defined(VEC)
#error "THREADS and VEC must be defined (-DTHREADS=... -DVEC=...)"
#endif
#if THREADS % 32 != 0 || THREADS > 1024
#error "THREADS must be a multiple of 32, at most 1024"
#endif
#if VEC != 1 && VEC != 2 && VEC != 4 && VEC != 8
#error "VEC must be 1, 2, 4 or 8"
#endif

#define CACHE_ELEMS 4096 /* row elements kept in registers */
#define STEP (THREADS * VEC)
#define CACHE ((CACHE_ELEMS + STEP - 1) / STEP)
#define WARPS (THREADS / 32)

template <int N> struct RawOf;
template <> struct RawOf<1> { typedef unsigned short T; };
template <> struct RawOf<2> { typedef unsigned int T; };
template <> struct RawOf<4> { typedef uint2 T; };
template <> struct RawOf<8> { typedef uint4 T; };
typedef RawOf<VEC>::T raw_t;

/* VEC bf16 values as one load/store unit and as their 16-bit patterns. */
union Pack {
	raw_t raw;
	unsigned short u[VEC];
};

static __device__ __forceinline__ float bf16_bits_to_float(unsigned short b)
{
	return __uint_as_float((unsigned int)b << 16);
}

static __device__ __forceinline__ unsigned short float_to_bf16_bits(float f)
{
	return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

static __device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/* Sum over the block; every thread gets the total.  Called once per kernel. */
static __device__ __forceinline__ float block_sum(float v, float *warp_sums)
{
	const int lane = threadIdx.x & 31;
	v = warp_sum(v);
	if (WARPS == 1)
		return v;
	if (lane == 0)
		warp_sums[threadIdx.x >> 5] = v;
	__syncthreads();
	float t = lane < WARPS ? warp_sums[lane] : 0.0f;
	return warp_sum(t);
}

static __device__ __forceinline__ float sum_squares(const Pack &p)
{
	float s = 0.0f;
#pragma unroll
	for (int j = 0; j < VEC; ++j) {
		const float v = bf16_bits_to_float(p.u[j]);
		s = fmaf(v, v, s);
	}
	return s;
}

static __device__ __forceinline__ void scale_store(unsigned short *dst, const Pack &xv,
						   const unsigned short *w, float inv_rms)
{
	Pack wv, out;
	wv.raw = __ldg(reinterpret_cast<const raw_t *>(w));
#pragma unroll
	for (int j = 0; j < VEC; ++j)
		out.u[j] = float_to_bf16_bits((bf16_bits_to_float(xv.u[j]) * inv_rms) *
					      bf16_bits_to_float(wv.u[j]));
	*reinterpret_cast<raw_t *>(dst) = out.raw;
}

extern "C" __global__ void __launch_bounds__(THREADS)
rmsnorm_row_block(const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ weight,
		  float eps, __nv_bfloat16 *__restrict__ y, int num_rows, int hidden)
{
	__shared__ float warp_sums[WARPS];
	const int row = blockIdx.x;
	if (row >= num_rows || hidden <= 0)
		return; /* uniform over the block */
	const int tid = threadIdx.x;
	const unsigned short *xr = reinterpret_cast<const unsigned short *>(x) + (long long)row * hidden;
	unsigned short *yr = reinterpret_cast<unsigned short *>(y) + (long long)row * hidden;
	const unsigned short *w = reinterpret_cast<const unsigned short *>(weight);
	const unsigned long long align_mask = sizeof(raw_t) - 1;
	const bool vec_ok = hidden % VEC == 0 &&
			    (((unsigned long long)xr | (unsigned long long)yr |
			      (unsigned long long)w) & align_mask) == 0;

	if (vec_ok) {
		Pack cache[CACHE];
		float ss = 0.0f;
#pragma unroll
		for (int c = 0; c < CACHE; ++c) {
			const int i = (c * THREADS + tid) * VEC;
			if (i < hidden) {
				cache[c].raw = *reinterpret_cast<const raw_t *>(xr + i);
				ss += sum_squares(cache[c]);
			}
		}
		/* ksearch:unroll */
		for (int i = (CACHE * THREADS + tid) * VEC; i < hidden; i += STEP) {
			Pack p;
			p.raw = *reinterpret_cast<const raw_t *>(xr + i);
			ss += sum_squares(p);
		}
		const float inv_rms = rsqrtf(block_sum(ss, warp_sums) / (float)hidden + eps);
#pragma unroll
		for (int c = 0; c < CACHE; ++c) {
			const int i = (c * THREADS + tid) * VEC;
			if (i < hidden)
				scale_store(yr + i, cache[c], w + i, inv_rms);
		}
		/* ksearch:unroll */
		for (int i = (CACHE * THREADS + tid) * VEC; i < hidden; i += STEP) {
			Pack p;
			p.raw = *reinterpret_cast<const raw_t *>(xr + i);
			scale_store(yr + i, p, w + i, inv_rms);
		}
	} else {
		float ss = 0.0f;
		for (int i = tid; i < hidden; i += THREADS) {
			const float v = bf16_bits_to_float(xr[i]);
			ss = fmaf(v, v, ss);
		}
		const float inv_rms = rsqrtf(block_sum(ss, warp_sums) / (float)hidden + eps);
		for (int i = tid; i < hidden; i += THREADS)
			yr[i] = float_to_bf16_bits((bf16_bits_to_float(xr[i]) * inv_rms) *
						   bf16_bits_to_float(w[i]));
	}
}
