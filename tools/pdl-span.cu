// pdl-span.cu - does the end event of a launch sequence wait for a kernel whose programmatic
// dependent launch (PDL) ends first?  A primary that spins SPIN_US on %globaltimer in every
// CTA, then an empty secondary, on one stream between two events: with and without the
// primary's griddepcontrol.launch_dependents, the secondary's griddepcontrol.wait and the PDL
// attribute.  Were the span to end with the secondary, a PDL sequence could leave its work
// outside the timing (docs/design.md, "Threat model"; BENCHMARKS.md, twenty-eighth session).
//
//   nvcc -O2 -std=c++17 -arch=sm_90a -Itools -o pdl-span tools/pdl-span.cu && ./pdl-span
#include <cstdio>

#include "cuda-check.h"

#define SPIN_US 200
#define REPS 20 /* the first two are warm-up */

__global__ void primary(unsigned long long ns, int trigger, int *out)
{
	unsigned long long t0, t;

	if (trigger)
		asm volatile("griddepcontrol.launch_dependents;");
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	while (t - t0 < ns);
	if (threadIdx.x == 0)
		out[blockIdx.x] = 1;
}

__global__ void secondary(int wait, int *out)
{
	if (wait)
		asm volatile("griddepcontrol.wait;" ::: "memory");
	if (threadIdx.x == 0)
		out[1024 + blockIdx.x] = 2;
}

int main()
{
	int *out, sms;
	cudaStream_t s;
	cudaEvent_t a, b;

	CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	CK(cudaMalloc(&out, 2048 * sizeof(int)));
	CK(cudaStreamCreate(&s));
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	printf("primary: %d CTAs spinning %d us; event span over %d repetitions, min-max, us\n", sms, SPIN_US,
	       REPS - 2);
	for (int trigger = 0; trigger < 2; trigger++)
		for (int wait = 0; wait < 2; wait++)
			for (int pdl = 0; pdl < 2; pdl++) {
				float lo = 1e30f, hi = 0;

				for (int r = 0; r < REPS; r++) {
					cudaLaunchAttribute attr = {};
					cudaLaunchConfig_t cfg = {};
					float ms;

					attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
					attr.val.programmaticStreamSerializationAllowed = 1;
					cfg.gridDim = dim3(4);
					cfg.blockDim = dim3(128);
					cfg.stream = s;
					cfg.attrs = &attr;
					cfg.numAttrs = pdl;
					CK(cudaEventRecord(a, s));
					primary<<<sms, 128, 0, s>>>(SPIN_US * 1000ull, trigger, out);
					CK(cudaGetLastError());
					CK(cudaLaunchKernelEx(&cfg, secondary, wait, out));
					CK(cudaEventRecord(b, s));
					CK(cudaEventSynchronize(b));
					CK(cudaEventElapsedTime(&ms, a, b));
					if (r >= 2) {
						lo = ms * 1e3f < lo ? ms * 1e3f : lo;
						hi = ms * 1e3f > hi ? ms * 1e3f : hi;
					}
				}
				printf("trigger %d  wait %d  pdl %d: %.1f-%.1f\n", trigger, wait, pdl, lo,
				       hi);
			}
	return 0;
}
