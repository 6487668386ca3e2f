/* ksearch
{ "params": {},
  "launch": [
    {"kernel": "rmsnorm_state_shared_replay", "grid": ["num_rows"], "block": ["256"], "smem": "1024", "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]} ] }
*/
// expect: ok
// Leaves a signature and its row number in dynamic shared memory, and skips a row whose
// signature it finds on entry, betting that a block of the last call ran the same row on the
// same SM and that y still holds it. Shared memory is scrubbed before every run (and every kernel
// runs in the largest carveout, which the scrub wipes whole: in a smaller one about 1 KB per SM
// outlived it, and this kernel found its signature there in 2 of 5 runs), so it never
// finds one and computes every row: ok, with an honest time. Without the scrub its skipped rows

// would be NaN (and, with fresh inputs each run, a stale row would be wrong anyway).
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
rmsnorm_state_shared_replay(const __nv_bfloat16 *x, const __nv_bfloat16 *weight, float eps, __nv_bfloat16 *y, int num_rows, int hidden)
{
	__shared__ float warp_sums[WARPS];
	extern __shared__ unsigned int carried[];
	const int row = blockIdx.x;
	if (row >= num_rows)
		return;
	const __nv_bfloat16 *xr = x + (size_t)row * hidden;
	__nv_bfloat16 *yr = y + (size_t)row * hidden;
	if (carried[0] == 0x5eedf00du && carried[1] == (unsigned int)row && row > 3)
		return; /* HOSTILE: "this row is done already" */
	__syncthreads();

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
	__syncthreads();
	if (threadIdx.x == 0) {
		carried[0] = 0x5eedf00du;
		carried[1] = (unsigned int)row;
	}
}
