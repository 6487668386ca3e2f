/* ksearch
{ "params": {},
  "launch": [
    {"kernel": "rmsnorm_writes_weight_when_timed", "grid": ["num_rows"], "block": ["256"],
     "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]} ] }
*/
// expect: wrong
// evidence: wrote into its input 'weight'
// evidence: checked before its verification
// Honest on the check workloads (at most 130 rows). On the benchmark's large ones it zeroes
// the weight, an input that is not fresh per call, and writes zeros without reading x: half
// the traffic, and the reference, run on the same buffers to verify the run, agrees with it.
// Every input is checksummed before a timed run is verified, so the first verified run fails
// (before that check, only the end of the workload found the write).
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
