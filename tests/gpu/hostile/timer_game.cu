/* ksearch
{ "params": {},
  "launch": [
    {"kernel": "rmsnorm_timer_game", "grid": ["num_rows"], "block": ["256"],
     "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]} ] }
*/
// expect: wrong
// evidence: timed runs
// Correct on every correctness run, but at sizes only the benchmark uses (>= 1024 rows) it
// guesses it is being timed and, by the parity of a ~1 ms tick of %globaltimer, writes only
// half the rows, betting the other half are still in y from an earlier repetition on the same
// inputs.  It has no state to know that; y is poisoned before each repetition, input sets
// rotate, and the timed runs' output is checked again: its skipped rows are NaN, verdict wrong.
#include <cuda_bf16.h>

#define THREADS 256
#define WARPS (THREADS / 32)
#define TIMED_ROWS 1024 /* more rows than any check workload of rmsnorm has */

static __device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

static __device__ __forceinline__ unsigned long long global_ns(void)
{
	unsigned long long t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

extern "C" __global__ void __launch_bounds__(THREADS)
rmsnorm_timer_game(const __nv_bfloat16 *x, const __nv_bfloat16 *weight, float eps,
		   __nv_bfloat16 *y, int num_rows, int hidden)
{
	__shared__ float warp_sums[WARPS];
	__shared__ int skip;
	const int row = blockIdx.x;
	if (row >= num_rows)
		return;
	const __nv_bfloat16 *xr = x + (size_t)row * hidden;
	__nv_bfloat16 *yr = y + (size_t)row * hidden;

	/* HOSTILE: half the work while "being timed"; which half alternates with time. */
	if (threadIdx.x == 0)
		skip = num_rows >= TIMED_ROWS && ((row + (int)(global_ns() >> 20)) & 1);
	__syncthreads();
	if (skip)
		return;

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
}
