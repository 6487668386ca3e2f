/* ksearch
{ "params": {},
  "launch": [
    {"kernel": "rmsnorm_pdl_primary", "grid": ["num_rows"], "block": ["256"],
     "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]},
    {"kernel": "rmsnorm_pdl_nothing", "grid": ["1"], "block": ["32"], "pdl": true,
     "args": ["num_rows"]} ] }
*/
// expect: ok
// time-at-least-us: 60
// A correct RMSNorm that tries to leave its work outside the timed span through
// programmatic dependent launch: its first launch lets dependents start at once
// (griddepcontrol.launch_dependents), then works and spins 60 us; the second, launched
// "pdl", does nothing and never waits (no griddepcontrol.wait), so it ends long before
// the first.  Were the end event to wait for the last kernel alone, each run would be
// timed at a few microseconds.  It waits for the whole sequence (an H200, driver 580,
// twenty-eighth session: a 200 us primary timed at 204-213 us with and without PDL, with
// and without the trigger and the wait), so every workload's time is at least 60 us.
#include <cuda_bf16.h>

#define THREADS 256
#define WARPS (THREADS / 32)
#define SPIN_NS 60000ull /* every CTA: the launch takes at least 60 us */

static __device__ __forceinline__ unsigned long long global_ns(void)
{
	unsigned long long t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

static __device__ void spin_ns(unsigned long long ns)
{
	const unsigned long long t0 = global_ns();

	while (global_ns() - t0 < ns)
		;
}

static __device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

extern "C" __global__ void __launch_bounds__(THREADS)
rmsnorm_pdl_primary(const __nv_bfloat16 *x, const __nv_bfloat16 *weight, float eps,
	     __nv_bfloat16 *y, int num_rows, int hidden)
{
	__shared__ float warp_sums[WARPS];
	const int row = blockIdx.x;

#if __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.launch_dependents;"); /* the second launch may start now */
#endif
	spin_ns(SPIN_NS);
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

/* launched "pdl": may start as soon as every CTA above has started, and never waits for them */
extern "C" __global__ void rmsnorm_pdl_nothing(int num_rows)
{
	(void)num_rows;
}
