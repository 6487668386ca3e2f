/* ksearch
{ "params": {},
  "launch": [
    {"kernel": "softmax_reference", "grid": ["num_rows"], "block": ["256"],
     "args": ["x", "y", "num_rows", "row_len"]} ] }
*/
// Softmax reference: one block of 256 threads per row, three passes over the
// row in global memory (max, sum of exp(x - max), write), scalar loads, fp32
// math with expf, reductions through shared memory.
#include <cuda_bf16.h>

#define REF_THREADS 256
#define NEG_INF __int_as_float(0xff800000u)

extern "C" __global__ void __launch_bounds__(REF_THREADS)
softmax_reference(const __nv_bfloat16 *x, __nv_bfloat16 *y, int num_rows, int row_len)
{
	__shared__ float red[REF_THREADS];
	const int row = blockIdx.x;
	if (row >= num_rows || row_len <= 0)
		return;
	const __nv_bfloat16 *xr = x + (size_t)row * row_len;
	__nv_bfloat16 *yr = y + (size_t)row * row_len;

	float m = NEG_INF;
	for (int i = threadIdx.x; i < row_len; i += REF_THREADS)
		m = fmaxf(m, __bfloat162float(xr[i]));
	red[threadIdx.x] = m;
	__syncthreads();
	for (int stride = REF_THREADS / 2; stride > 0; stride /= 2) {
		if (threadIdx.x < stride)
			red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + stride]);
		__syncthreads();
	}
	const float row_max = red[0];
	__syncthreads(); /* everyone has read red[0] before it is reused */

	float s = 0.0f;
	for (int i = threadIdx.x; i < row_len; i += REF_THREADS)
		s += expf(__bfloat162float(xr[i]) - row_max);
	red[threadIdx.x] = s;
	__syncthreads();
	for (int stride = REF_THREADS / 2; stride > 0; stride /= 2) {
		if (threadIdx.x < stride)
			red[threadIdx.x] += red[threadIdx.x + stride];
		__syncthreads();
	}
	const float inv_sum = 1.0f / red[0];

	for (int i = threadIdx.x; i < row_len; i += REF_THREADS)
		yr[i] = __float2bfloat16(expf(__bfloat162float(xr[i]) - row_max) * inv_sum);
}
