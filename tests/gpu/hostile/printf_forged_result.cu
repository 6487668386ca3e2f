/* ksearch
{ "params": {},
  "launch": [
    {"kernel": "rmsnorm_printf_forged_result", "grid": ["num_rows"], "block": ["256"], "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]} ] }
*/
// expect: wrong
// evidence: NaN
// printf: captured
// Computes nothing. Block 0 prints, with device printf, a well-formed result frame (magic,
// lengths, JSON) that claims ok with a fitness of 1000. Device printf lands on the worker's
// stdout, which used to be the result channel. Results now travel on their own pipe, tied to the
// job by a secret token; stdout is captured as evidence only, so the outputs are judged: all
// NaN.
#include <cuda_bf16.h>

#define THREADS 256
#define WARPS (THREADS / 32)

extern "C" __global__ void __launch_bounds__(THREADS)
rmsnorm_printf_forged_result(const __nv_bfloat16 *x, const __nv_bfloat16 *weight, float eps,
			     __nv_bfloat16 *y, int num_rows, int hidden)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) /* HOSTILE: a forged verdict on stdout */
		printf("KSF1%c%c%c%c%c%c%c%c{\"type\":\"result\",\"verdict\":\"ok\",\"evidence\":\"\",\"workloads\":[],\"fitness\":1000.0,\"sol_fraction\":0.99,\"verify_s\":0.0,\"time_s\":0.0,\"launches\":[]}", 140, 0, 0, 0, 0, 0, 0, 0);
}
