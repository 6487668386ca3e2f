// cubin-launch.cu - the launcher an export would have if it carried NVRTC's cubin instead of
// the candidate's text (docs/design.md, "Threat model"; export.c): the kernels of a cubin
// (tools/cubin-launch-kernels.cu, built with nvcc -cubin) loaded with the driver's library
// API, reached through cudaGetDriverEntryPointByVersion (so nothing links libcuda), launched
// with cuLaunchKernelEx on the runtime's stream, with the attributes ksearch's launches need:
// the shared-memory carveout, more than 48 KiB of dynamic shared memory, a non-portable cluster
// of 16, programmatic dependent launch.  Each check prints what it found.
//
//   nvcc -cubin -arch=sm_90a -o k.cubin tools/cubin-launch-kernels.cu
//   nvcc -O2 -std=c++17 -arch=sm_90a -o cubin-launch tools/cubin-launch.cu && ./cubin-launch k.cubin
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <cuda.h>
#include <cuda_runtime.h>

#define CK(x)                                                                                                \
	do {                                                                                                 \
		cudaError_t e_ = (x);                                                                        \
		if (e_ != cudaSuccess) {                                                                     \
			printf("FAIL %s: %s\n", #x, cudaGetErrorString(e_));                                 \
			exit(1);                                                                             \
		}                                                                                            \
	} while (0)
#define DK(x)                                                                                                \
	do {                                                                                                 \
		CUresult r_ = (x);                                                                           \
		if (r_ != CUDA_SUCCESS) {                                                                    \
			printf("FAIL %s: CUresult %d\n", #x, (int)r_);                                       \
			exit(1);                                                                             \
		}                                                                                            \
	} while (0)

typedef CUresult (*pLibraryLoadData)(CUlibrary *, const void *, CUjit_option *, void **, unsigned,
				     CUlibraryOption *, void **, unsigned);
typedef CUresult (*pLibraryGetKernel)(CUkernel *, CUlibrary, const char *);
typedef CUresult (*pKernelSetAttribute)(CUfunction_attribute, int, CUkernel, CUdevice);
typedef CUresult (*pKernelGetAttribute)(int *, CUfunction_attribute, CUkernel, CUdevice);
typedef CUresult (*pLaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);

static struct {
	pLibraryLoadData load;
	pLibraryGetKernel get;
	pKernelSetAttribute set;
	pKernelGetAttribute attr;
	pLaunchKernelEx launch;
	CUlibrary lib;
	CUkernel k[4];
	cudaError_t err;
	void *image; /* the cubin's bytes */
	size_t image_size;
} g;

template <typename F> static cudaError_t entry(const char *name, F *fn)
{
	cudaDriverEntryPointQueryResult q;
	void *p = NULL;
	cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q);
	if (e != cudaSuccess)
		return e;
	if (q != cudaDriverEntryPointSuccess || !p)
		return cudaErrorSymbolNotFound;
	*fn = (F)p;
	return cudaSuccess;
}

static void load_once()
{
	const char *names[4] = { "scale_rows", "big_smem", "cluster16", "pdl_second" };
	if ((g.err = entry("cuLibraryLoadData", &g.load)) || (g.err = entry("cuLibraryGetKernel", &g.get)) ||
	    (g.err = entry("cuKernelSetAttribute", &g.set)) ||
	    (g.err = entry("cuKernelGetAttribute", &g.attr)) ||
	    (g.err = entry("cuLaunchKernelEx", &g.launch)))
		return;
	if (g.load(&g.lib, g.image, NULL, NULL, 0, NULL, NULL, 0) != CUDA_SUCCESS) {
		g.err = cudaErrorInvalidKernelImage;
		return;
	}
	for (int i = 0; i < 4; i++)
		if (g.get(&g.k[i], g.lib, names[i]) != CUDA_SUCCESS) {
			g.err = cudaErrorInvalidDeviceFunction;
			return;
		}
}

static CUresult launch(int k, unsigned grid, unsigned block, unsigned smem, cudaStream_t s, void **args,
		       int pdl)
{
	CUlaunchConfig c;
	CUlaunchAttribute a;
	memset(&c, 0, sizeof(c));
	memset(&a, 0, sizeof(a));
	c.gridDimX = grid;
	c.gridDimY = 1;
	c.gridDimZ = 1;
	c.blockDimX = block;
	c.blockDimY = 1;
	c.blockDimZ = 1;
	c.sharedMemBytes = smem;
	c.hStream = (CUstream)s;
	if (pdl) {
		a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
		a.value.programmaticStreamSerializationAllowed = 1;
		c.attrs = &a;
		c.numAttrs = 1;
	}
	return g.launch(&c, (CUfunction)g.k[k], args, NULL);
}

int main(int argc, char **argv)
{
	static std::once_flag once;
	int dev, n = 1 << 20;
	float *x, *y, *z, *h = (float *)malloc(n * sizeof(float));
	int *ranks, hr[64];
	cudaStream_t s;

	FILE *f = argc == 2 ? fopen(argv[1], "rb") : NULL;

	if (!f) {
		printf("usage: cubin-launch FILE.cubin (built from tools/cubin-launch-kernels.cu)\n");
		return 2;
	}
	g.image = malloc(1 << 24);
	g.image_size = fread(g.image, 1, 1 << 24, f);
	fclose(f);
	CK(cudaSetDevice(0));
	CK(cudaGetDevice(&dev));
	CK(cudaStreamCreate(&s)); /* the caller's stream: the runtime's primary context is current */
	std::call_once(once, load_once);
	CK(g.err);
	printf("loaded %zu-byte cubin, 4 kernels\n", g.image_size);
	CK(cudaMalloc(&x, n * 4));
	CK(cudaMalloc(&y, n * 4));
	CK(cudaMalloc(&z, n * 4));
	CK(cudaMalloc(&ranks, 64 * 4));
	for (int i = 0; i < n; i++)
		h[i] = (float)i;
	CK(cudaMemcpy(x, h, n * 4, cudaMemcpyHostToDevice));
	/* the carveout ksearch times in, set per device */
	DK(g.set(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100, g.k[0], dev));
	float sc = 3.0f;
	void *a0[] = { &x, &sc, &y, &n };
	DK(launch(0, (n + 255) / 256, 256, 0, s, a0, 0));
	/* PDL: the second waits for the first with griddepcontrol.wait */
	void *a3[] = { &y, &z, &n };
	DK(launch(3, (n + 255) / 256, 256, 0, s, a3, 1));
	CK(cudaMemcpyAsync(h, z, n * 4, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	int bad = 0;
	for (int i = 0; i < n; i++)
		bad += h[i] != 3.0f * i + 1.0f;
	printf("scale_rows + pdl_second: %d of %d wrong\n", bad, n);
	/* more than 48 KB of dynamic shared memory */
	int m = 150 * 1024 / 4;
	unsigned smem = (unsigned)m * 4;
	void *a1[] = { &y, &m };
	CUresult r = launch(1, 4, 256, smem, s, a1, 0);
	printf("big_smem without the attribute: CUresult %d (expected an error)\n", (int)r);
	cudaGetLastError();
	DK(g.set(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem, g.k[1], dev));
	DK(launch(1, 4, 256, smem, s, a1, 0));
	CK(cudaMemcpyAsync(h, y, 4 * 4, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	printf("big_smem: %g (expected %d)\n", h[0], m - 1);
	/* a cluster of 16 (non-portable): the compile-time cluster dims from the cubin */
	int cw = 0;
	DK(g.attr(&cw, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, g.k[2], dev));
	void *a2[] = { &ranks };
	r = launch(2, 64, 32, 0, s, a2, 0);
	printf("cluster16 (width %d) without non-portable: CUresult %d\n", cw, (int)r);
	DK(g.set(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1, g.k[2], dev));
	DK(launch(2, 64, 32, 0, s, a2, 0));
	CK(cudaMemcpyAsync(hr, ranks, 64 * 4, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	bad = 0;
	for (int i = 0; i < 64; i++)
		bad += hr[i] != i % 16;
	printf("cluster16: %d of 64 ranks wrong\n", bad);
	/* a second thread's call_once does not load again; a second device would set attributes again */
	std::call_once(once, load_once);
	printf("done\n");
	return 0;
}
