/* ksearch
{ "params": {},
  "scratch": {"saved": ["int32", "1"]},
  "launch": [
    {"kernel": "rmsnorm_clobber_before_x", "grid": ["num_rows"], "block": ["256"],
     "args": ["x", "weight", "eps", "y", "num_rows", "hidden", "saved"]},
    {"kernel": "rmsnorm_restore_before_x", "grid": ["1"], "block": ["32"], "args": ["x", "saved"]} ] }
*/
// expect: ok
// sanitizer: failed memcheck
// The first launch normalises the rows and, in block 0, keeps the two bytes 4 KiB before the
// first input in scratch and overwrites them; the second launch puts them back.  Between the
// two launches someone else's memory holds the candidate's value; the guard bands, read after
// the call, see it restored.
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
rmsnorm_clobber_before_x(const __nv_bfloat16 *x, const __nv_bfloat16 *weight, float eps,
			 __nv_bfloat16 *y, int num_rows, int hidden, int *saved)
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
		/* HOSTILE: 4 KiB before the first input, restored by the next launch */
		volatile unsigned short *before = (volatile unsigned short *)((const char *)x - 4096);
		saved[0] = *before;
		*before = 0xbeef;
	}
}

extern "C" __global__ void rmsnorm_restore_before_x(const __nv_bfloat16 *x, int *saved)
{
	if (threadIdx.x == 0) {
		volatile unsigned short *before = (volatile unsigned short *)((const char *)x - 4096);
		*before = (unsigned short)saved[0];
	}
}
