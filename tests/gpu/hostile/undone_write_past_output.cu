/* ksearch
{ "params": {},
  "launch": [
    {"kernel": "rmsnorm_undone_past_output", "grid": ["num_rows"], "block": ["256"],
     "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]} ] }
*/
// expect: ok
// sanitizer: failed memcheck
// A correct RMSNorm whose last block, once its row is written, saves the two bytes 4 KiB past
// the end of y, overwrites them and puts them back, all in one thread.  The guard bands see
// only the final state, so the evaluator says ok; in a serving process the write lands in
// someone else's memory for a moment.  memcheck sees the access as it happens (t0240).
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
rmsnorm_undone_past_output(const __nv_bfloat16 *x, const __nv_bfloat16 *weight, float eps,
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
	if (row == num_rows - 1 && threadIdx.x == 0) {
		/* HOSTILE: 4 KiB past the output, written and restored by the same thread */
		volatile unsigned short *past =
			(volatile unsigned short *)((char *)(y + (size_t)num_rows * hidden) + 4096);
		const unsigned short saved = *past;
		*past = 0xdead;
		*past = saved;
	}
}
