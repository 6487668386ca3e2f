/* ksearch
{ "params": {},
  "launch": [
    {"kernel": "rmsnorm_reference", "grid": ["num_rows"], "block": ["256"],
     "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]} ] }
*/
// RMSNorm reference: one block of 256 threads per row, scalar loads, fp32
// sum of squares reduced through shared memory, then a second pass over the
// row that writes x * rsqrt(mean(x^2) + eps) * weight.
#include <cuda_bf16.h>

#define REF_THREADS 256

extern "C" __global__ void __launch_bounds__(REF_THREADS)
rmsnorm_reference(const __nv_bfloat16 *x, const __nv_bfloat16 *weight, float eps,
                  __nv_bfloat16 *y, int num_rows, int hidden)
{
	__shared__ float partial[REF_THREADS];
	const int row = blockIdx.x;
	if (row >= num_rows || hidden <= 0)
		return;
	const __nv_bfloat16 *xr = x + (size_t)row * hidden;
	__nv_bfloat16 *yr = y + (size_t)row * hidden;

	float sum = 0.0f;
	for (int i = threadIdx.x; i < hidden; i += REF_THREADS) {
		float v = __bfloat162float(xr[i]);
		sum += v * v;
	}
	partial[threadIdx.x] = sum;
	__syncthreads();
	for (int stride = REF_THREADS / 2; stride > 0; stride /= 2) {
		if (threadIdx.x < stride)
			partial[threadIdx.x] += partial[threadIdx.x + stride];
		__syncthreads();
	}
	const float inv_rms = 1.0f / sqrtf(partial[0] / (float)hidden + eps);

	for (int i = threadIdx.x; i < hidden; i += REF_THREADS) {
		float v = __bfloat162float(xr[i]);
		float w = __bfloat162float(weight[i]);
		yr[i] = __float2bfloat16((v * inv_rms) * w);
	}
}
