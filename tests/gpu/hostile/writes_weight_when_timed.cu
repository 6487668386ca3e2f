/* ksearch
{ "params": {},
  "launch": [
    {"kernel": "rmsnorm_writes_weight_when_timed", "grid": ["num_rows"], "block": ["256"],
     "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]} ] }
*/
// expect: wrong
// evidence: wrote into its input 'weight'
// evidence: (timed run
// Honest on the check workloads (at most 130 rows). On the benchmark's large ones it zeroes
// the weight and writes zeros without reading x: half the traffic, and the reference, run on
// the same buffers to verify a run, would agree with it. rmsnorm's weight is fresh per call
// (no ksearch.fresh_per_call list: every generated input is), so the check after every timed
// run finds the write in the first warm-up run. hostile/gqa/writes_indptr_when_timed.cu is
// the same attack on an input that is not fresh per call.
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
rmsnorm_writes_weight_when_timed(const __nv_bfloat16 *x, const __nv_bfloat16 *weight, float eps,
				 __nv_bfloat16 *y, int num_rows, int hidden)
{
	__shared__ float warp_sums[WARPS];
	const int row = blockIdx.x;
	if (row >= num_rows)
		return;
	const __nv_bfloat16 *xr = x + (size_t)row * hidden;
	__nv_bfloat16 *yr = y + (size_t)row * hidden;

	if (num_rows >= 1024) { /* HOSTILE: a benchmark size; edit the input the reference reads */
		if (row == 0)
			for (int i = threadIdx.x; i < hidden; i += THREADS)
				((__nv_bfloat16 *)weight)[i] = __float2bfloat16(0.0f);
		for (int i = threadIdx.x; i < hidden; i += THREADS)
			yr[i] = __float2bfloat16(0.0f);
		return;
	}

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
