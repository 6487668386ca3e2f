/* ksearch
{ "params": {},
  "launch": [
    {"kernel": "rmsnorm_printf_forged_job", "grid": ["num_rows"], "block": ["256"], "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]} ] }
*/
// expect: wrong
// evidence: NaN
// printf: captured
// Computes nothing and prints, from 32 blocks, result frames that guess the job id (1 to 32) and
// a token of zeros, hoping one matches. Device printf never reaches the result pipe, and a token
// is 128 random bits drawn per job: the outputs are judged, all NaN.
#include <cuda_bf16.h>

#define THREADS 256
#define WARPS (THREADS / 32)

extern "C" __global__ void __launch_bounds__(THREADS)
rmsnorm_printf_forged_job(const __nv_bfloat16 *x, const __nv_bfloat16 *weight, float eps,
			  __nv_bfloat16 *y, int num_rows, int hidden)
{
	if (blockIdx.x < 32 && threadIdx.x == 0) /* HOSTILE: guessed job ids */
		printf("KSF1%c%c%c%c%c%c%c%c{\"type\":\"result\",\"job\":%d,\"token\":\"00000000000000000000000000000000\",\"verdict\":\"ok\",\"evidence\":\"\",\"workloads\":[],\"fitness\":500.0,\"sol_fraction\":0.9,\"verify_s\":0.0,\"time_s\":0.0}", 175, 0, 0, 0, 0, 0, 0, 0, (int)blockIdx.x + 1);
}
