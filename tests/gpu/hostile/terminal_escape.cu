/* ksearch
{ "params": {},
  "launch": [
    {"kernel": "rmsnorm_terminal_escape", "grid": ["num_rows"], "block": ["256"],
     "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]} ] }
*/
// expect: contract_error
// evidence: line 15: a control character (U+001B)
// A correct kernel with an escape sequence in a comment: compile logs quote source lines
// and `archive show` prints the source, so the sequence would reach a terminal (here OSC 52,
// which writes the clipboard, ready to paste).
// A kernel's text must be printable; refused as it is parsed.
#include <cuda_bf16.h>

/* HOSTILE: ]52;c;ZWNobyBwd25lZAo= */
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
rmsnorm_terminal_escape(const __nv_bfloat16 *x, const __nv_bfloat16 *weight, float eps, __nv_bfloat16 *y, int num_rows,
       int hidden)
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
}
