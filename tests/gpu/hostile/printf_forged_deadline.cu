/* ksearch
{ "params": {},
  "launch": [
    {"kernel": "rmsnorm_printf_forged_deadline", "grid": ["num_rows"], "block": ["256"], "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]} ] }
*/
// expect: timeout
// evidence: deadline
// Writes the right output, prints a forged deadline frame asking for 100000 s more, then spins
// forever. Had the frame reached the coordinator, the hang would have held check (and a search)
// for a day; the coordinator never sees it and kills the worker at the real deadline.
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
rmsnorm_printf_forged_deadline(const __nv_bfloat16 *x, const __nv_bfloat16 *weight, float eps, __nv_bfloat16 *y, int num_rows, int hidden)
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
	if (row == 0 && threadIdx.x == 0) {
		printf("KSF1%c%c%c%c%c%c%c%c{\"type\":\"deadline\",\"ms\":100000000}", 34, 0, 0, 0, 0, 0, 0, 0); /* HOSTILE: more time, please */
		while (*(volatile const unsigned short *)xr == *(volatile const unsigned short *)xr)
			;
	}
}
