/* ksearch
{ "params": {},
  "launch": [
    {"kernel": "rmsnorm_infinite_loop", "grid": ["num_rows"], "block": ["256"],
     "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]} ] }
*/
// expect: timeout
// evidence: deadline
// Writes the right output, then one thread spins forever on a volatile load the compiler
// cannot remove.  The kernel never finishes: the worker's deadline (5 s + 100x the
// reference's time) passes, the worker is killed, and a fresh one serves the next job.
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
rmsnorm_infinite_loop(const __nv_bfloat16 *x, const __nv_bfloat16 *weight, float eps,
		      __nv_bfloat16 *y, int num_rows, int hidden)
{
	__shared__ float warp_sums[WARPS];
	const int row = blockIdx.x;
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
	if ((threadIdx.x & 31) == 0)
		warp_sums[threadIdx.x >> 5] = ss;
	__syncthreads();
	float total = 0.0f;
#pragma unroll
	for (int w = 0; w < WARPS; ++w)
		total += warp_sums[w];
	const float inv_rms = rsqrtf(total / (float)hidden + eps);

	for (int i = threadIdx.x; i < hidden; i += THREADS)
		yr[i] = __float2bfloat16((__bfloat162float(xr[i]) * inv_rms) * __bfloat162float(weight[i]));

	/* HOSTILE: never returns.  It waits for weight[0] to change, which it never
	   does (inputs are read-only); the load is volatile, so every iteration reads
	   global memory again, and neither NVVM nor ptxas may drop the loop. */
	if (row == 0 && threadIdx.x == 0) {
		const volatile unsigned short *w0 = (const volatile unsigned short *)weight;
		const unsigned short first = w0[0];
		while (w0[0] == first)
			;
	}
}
