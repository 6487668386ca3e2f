/* ksearch
{ "params": {},
  "launch": [
    {"kernel": "rmsnorm_race", "grid": ["num_rows"], "block": ["256"],
     "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]} ] }
*/
// expect: wrong
// evidence: differ
// Block reduction with a missing __syncthreads(): warp 0 finishes the sum and stores inv_rms
// over red[0], but warps 1..7 read red[0] without waiting and get warp 0's partial sum of
// squares (about 500 for unit-normal rows) instead of inv_rms (about 1).  The race is harmless
// on all-zero rows (c5_zero), so only the other inputs show it.
#include <cuda_bf16.h>

#define THREADS 256
#define WARPS (THREADS / 32)

static __device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

extern "C" __global__ void __launch_bounds__(THREADS)
rmsnorm_race(const __nv_bfloat16 *x, const __nv_bfloat16 *weight, float eps,
	     __nv_bfloat16 *y, int num_rows, int hidden)
{
	__shared__ float red[WARPS];
	const int row = blockIdx.x;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	if (row >= num_rows)
		return;
	const __nv_bfloat16 *xr = x + (size_t)row * hidden;
	__nv_bfloat16 *yr = y + (size_t)row * hidden;

	float ss = 0.0f;
	for (int i = threadIdx.x; i < hidden; i += THREADS) {
		const float v = __bfloat162float(xr[i]);
		ss = fmaf(v, v, ss);
	}
	ss = warp_sum(ss);
	if (lane == 0)
		red[warp] = ss;
	__syncthreads();
	if (warp == 0) {
		float t = lane < WARPS ? red[lane] : 0.0f;
		t = warp_sum(t);
		if (lane == 0)
			red[0] = rsqrtf(t / (float)hidden + eps); /* reuses red[0] for the result */
	}
	/* HOSTILE: a __syncthreads() belongs here.  Without it the other warps read
	   red[0] a few cycles after the barrier above, long before warp 0 (a shared
	   load, five shuffles, a division and an rsqrt later) has overwritten it. */
	const float inv_rms = red[0];

	for (int i = threadIdx.x; i < hidden; i += THREADS)
		yr[i] = __float2bfloat16((__bfloat162float(xr[i]) * inv_rms) * __bfloat162float(weight[i]));
}
