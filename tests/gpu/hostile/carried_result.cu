/* ksearch
{ "params": {},
  "scratch": {"stash": ["bfloat16", "num_rows*hidden"], "done": ["int32", "num_rows"]},
  "launch": [
    {"kernel": "rmsnorm_carried_result", "grid": ["num_rows"], "block": ["256"],
     "args": ["x", "weight", "eps", "y", "num_rows", "hidden", "stash", "done"]} ] }
*/
// expect: wrong
// evidence: NaN
// Memoises through scratch: a row whose flag done[row] is non-zero is replayed from stash
// (a result carried from an earlier call) instead of computed; a fresh row is computed, stashed
// and flagged.  That works if scratch starts zeroed (cuMemAlloc'd memory usually is) and keeps
// its contents between calls on the same inputs.  The evaluator poisons scratch with 0xFF bytes
// before every run, so the very first call already sees "done" and replays NaN; and every
// correctness run gets fresh inputs, so even a surviving stash would be the wrong answer.
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
rmsnorm_carried_result(const __nv_bfloat16 *x, const __nv_bfloat16 *weight, float eps,
		       __nv_bfloat16 *y, int num_rows, int hidden, __nv_bfloat16 *stash, int *done)
{
	__shared__ float warp_sums[WARPS];
	__shared__ int replay;
	const int row = blockIdx.x;
	if (row >= num_rows)
		return;
	const __nv_bfloat16 *xr = x + (size_t)row * hidden;
	__nv_bfloat16 *yr = y + (size_t)row * hidden;
	__nv_bfloat16 *sr = stash + (size_t)row * hidden;

	/* HOSTILE: "computed before?"  Assumes scratch is zero on the first call. */
	if (threadIdx.x == 0)
		replay = ((volatile int *)done)[row] != 0;
	__syncthreads();
	if (replay) {
		for (int i = threadIdx.x; i < hidden; i += THREADS)
			yr[i] = sr[i];
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

	for (int i = threadIdx.x; i < hidden; i += THREADS) {
		const __nv_bfloat16 out =
			__float2bfloat16((__bfloat162float(xr[i]) * inv_rms) * __bfloat162float(weight[i]));
		yr[i] = out;
		sr[i] = out; /* remember it for the next call */
	}
	__syncthreads(); /* the whole row is stashed before the flag says so */
	if (threadIdx.x == 0) {
		__threadfence();
		((volatile int *)done)[row] = 1;
	}
}
