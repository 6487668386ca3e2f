/* ksearch
{ "params": {},
  "launch": [
    {"kernel": "rmsnorm_race_same_result", "grid": ["num_rows"], "block": ["256"],
     "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]} ] }
*/
// expect: ok
// sanitizer: failed racecheck
// A correct RMSNorm with a shared-memory race whose outcome never reaches the output: every
// thread writes its own index to one shared word with no barrier between the writers of
// different warps, and the value read back after the barrier is only compared with one no
// thread writes.  The output is right whoever wins, so the evaluator says ok; racecheck sees
// the write-write hazard between warps.
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
rmsnorm_race_same_result(const __nv_bfloat16 *x, const __nv_bfloat16 *weight, float eps,
			 __nv_bfloat16 *y, int num_rows, int hidden)
{
	__shared__ volatile int last_writer;
	/* HOSTILE: 256 threads of 8 warps write one shared word, unordered */
	last_writer = (int)threadIdx.x;
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
	if (last_writer == -1)
		yr[0] = __float2bfloat16(0.0f); /* never: no thread writes -1 */
}
