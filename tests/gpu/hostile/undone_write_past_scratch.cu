/* ksearch
{ "params": {},
  "scratch": {"sync": ["int32", "2", "zeroed"]},
  "launch": [
    {"kernel": "rmsnorm_undone_past_scratch", "grid": ["num_rows"], "block": ["256"],
     "args": ["x", "weight", "eps", "y", "num_rows", "hidden", "sync"]} ] }
*/
// expect: ok
// sanitizer: failed memcheck
// Block 0 keeps the four bytes 4 KiB past its scratch buffer in the buffer and overwrites
// them; the last block to finish (counted with an atomic on the zeroed scratch) puts them
// back, after a fence: another block undoes the write before the launch ends.
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
rmsnorm_undone_past_scratch(const __nv_bfloat16 *x, const __nv_bfloat16 *weight, float eps,
			    __nv_bfloat16 *y, int num_rows, int hidden, int *sync)
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
	if (threadIdx.x == 0) {
		/* HOSTILE: 4 KiB past the scratch buffer, restored by whichever block ends last */
		volatile int *past = (volatile int *)((char *)(sync + 2) + 4096);
		if (row == 0) {
			((volatile int *)sync)[1] = *past;
			*past = 0x7eadbeef;
		}
		__threadfence();
		if (atomicAdd(&sync[0], 1) == num_rows - 1) {
			__threadfence();
			*past = ((volatile int *)sync)[1];
		}
	}
}
