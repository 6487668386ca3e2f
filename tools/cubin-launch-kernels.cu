// cubin-launch-kernels.cu - device code only, built with `nvcc -cubin` into what an export
// would embed in place of the candidate's text (NVRTC's cubin): a plain kernel, one with more
// than 48 KiB of dynamic shared memory, one with a compile-time cluster of 16 CTAs, and one
// that waits for its predecessor (programmatic dependent launch).  tools/cubin-launch.cu
// launches them.
extern "C" __global__ void scale_rows(const float *x, float s, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = x[i] * s;
}

extern "C" __global__ void big_smem(float *y, int n)
{
	extern __shared__ float buf[];
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		buf[i] = (float)i;
	__syncthreads();
	if (threadIdx.x == 0)
		y[blockIdx.x] = buf[n - 1];
}

extern "C" __global__ void __cluster_dims__(16, 1, 1) cluster16(int *ranks)
{
	unsigned r;
	asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
	if (threadIdx.x == 0)
		ranks[blockIdx.x] = (int)r;
}

extern "C" __global__ void pdl_second(const float *y, float *z, int n)
{
	asm volatile("griddepcontrol.wait;" ::: "memory");
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		z[i] = y[i] + 1.0f;
}
