/*
 * cuda.h - the CUDA driver API, loaded at run time.
 *
 * ksearch never links against libcuda: ks_cuda_load() dlopen()s
 * "libcuda.so.1" the first time a command needs the GPU, so everything
 * that does not run a kernel (compiling, checking, reading archives) works
 * on a machine without an NVIDIA driver.  When the driver is missing, too
 * old, or sees no GPU, the call fails with a message that says so and what
 * to do about it.
 *
 * The toolkit's <cuda.h> is included for its types only.  Its macros
 * rename many functions (cuMemAlloc is really cuMemAlloc_v2), so the
 * table below uses its own field names; each field points at the exported
 * symbol whose signature it declares, and call sites go through the table:
 *
 *	const struct ks_cuda *cu;
 *	if (ks_cuda_load(&cu, err))
 *		return -1;
 *	rc = cu->mem_alloc(&ptr, bytes);
 *
 * Ownership: the table is loaded once per process, is never freed and never
 * changes after ks_cuda_load() returns it, so the pointer can be kept and
 * shared between threads.  ks_cuda_load() makes no context current;
 * callers retain a primary context themselves (primary_ctx_retain,
 * ctx_set_current) and release it when done.
 */
#ifndef KSEARCH_CUDA_H
#define KSEARCH_CUDA_H

#include <stddef.h>

#include <cuda.h>

#include "ksearch/base/error.h"

struct ks_cuda {
	/* Initialization and devices */
	CUresult (*init)(unsigned int flags);
	CUresult (*driver_get_version)(int *version);
	CUresult (*device_get_count)(int *count);
	CUresult (*device_get)(CUdevice *dev, int ordinal);
	CUresult (*device_get_name)(char *name, int len, CUdevice dev);
	CUresult (*device_get_attribute)(int *value, CUdevice_attribute attrib, CUdevice dev);
	CUresult (*device_total_mem)(size_t *bytes, CUdevice dev);
	CUresult (*device_get_uuid)(CUuuid *uuid, CUdevice dev); /* NULL if the driver lacks it */

	/* Contexts */
	CUresult (*primary_ctx_retain)(CUcontext *ctx, CUdevice dev);
	CUresult (*primary_ctx_release)(CUdevice dev);
	CUresult (*ctx_set_current)(CUcontext ctx);
	CUresult (*ctx_synchronize)(void);
	CUresult (*ctx_get_limit)(size_t *value, CUlimit limit);
	CUresult (*ctx_set_limit)(CUlimit limit, size_t value);

	/* Modules and kernels */
	CUresult (*module_load_data)(CUmodule *module, const void *image);
	CUresult (*module_load_data_ex)(CUmodule *module, const void *image, unsigned int num_options,
					CUjit_option *options, void **option_values);
	CUresult (*module_unload)(CUmodule module);
	CUresult (*module_get_function)(CUfunction *func, CUmodule module, const char *name);
	CUresult (*module_get_global)(CUdeviceptr *ptr, size_t *bytes, CUmodule module, const char *name);
	CUresult (*func_get_attribute)(int *value, CUfunction_attribute attrib, CUfunction func);
	CUresult (*func_set_attribute)(CUfunction func, CUfunction_attribute attrib, int value);
	CUresult (*launch_kernel)(CUfunction func, unsigned int grid_x, unsigned int grid_y,
				  unsigned int grid_z, unsigned int block_x, unsigned int block_y,
				  unsigned int block_z, unsigned int smem_bytes, CUstream stream,
				  void **params, void **extra);
	/* every block resident at once (or an error): the shared-memory scrub's one block per SM */
	CUresult (*launch_cooperative_kernel)(CUfunction func, unsigned int grid_x, unsigned int grid_y,
					      unsigned int grid_z, unsigned int block_x, unsigned int block_y,
					      unsigned int block_z, unsigned int smem_bytes, CUstream stream,
					      void **params);
	/* NULL if the driver lacks it (before CUDA 12): launches with attributes (PDL) */

	CUresult (*launch_kernel_ex)(const CUlaunchConfig *config, CUfunction func, void **params,
				     void **extra);
	CUresult (*occupancy_max_active_blocks)(int *blocks, CUfunction func, int block_size,

						size_t dynamic_smem_bytes);

	/* Memory */
	CUresult (*mem_alloc)(CUdeviceptr *ptr, size_t bytes);
	CUresult (*mem_free)(CUdeviceptr ptr);
	CUresult (*mem_get_info)(size_t *free_bytes, size_t *total_bytes);
	CUresult (*memcpy_htod)(CUdeviceptr dst, const void *src, size_t bytes);
	CUresult (*memcpy_dtoh)(void *dst, CUdeviceptr src, size_t bytes);
	CUresult (*memcpy_dtod)(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
	CUresult (*memset_d8)(CUdeviceptr dst, unsigned char value, size_t count);
	CUresult (*memset_d32)(CUdeviceptr dst, unsigned int value, size_t count);
	CUresult (*memcpy_htod_async)(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream);
	CUresult (*memcpy_dtoh_async)(void *dst, CUdeviceptr src, size_t bytes, CUstream stream);
	CUresult (*memcpy_dtod_async)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
	CUresult (*memset_d8_async)(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream);
	CUresult (*memset_d32_async)(CUdeviceptr dst, unsigned int value, size_t count, CUstream stream);

	/* Streams and events */
	CUresult (*stream_create)(CUstream *stream, unsigned int flags);
	CUresult (*stream_destroy)(CUstream stream);
	CUresult (*stream_synchronize)(CUstream stream);
	CUresult (*event_create)(CUevent *event, unsigned int flags);
	CUresult (*event_record)(CUevent event, CUstream stream);
	CUresult (*event_synchronize)(CUevent event);
	CUresult (*event_elapsed_time)(float *ms, CUevent start, CUevent end);
	CUresult (*event_destroy)(CUevent event);

	/* The profiler's collection window (NULL if the driver lacks them): profile.h's runner */
	CUresult (*profiler_start)(void);
	CUresult (*profiler_stop)(void);

	/* Errors (prefer ks_cuda_strerror) */
	CUresult (*get_error_name)(CUresult error, const char **name);
	CUresult (*get_error_string)(CUresult error, const char **text);
};

/*
 * Load libcuda.so.1 and call cuInit(0), once per process (later calls
 * return the first call's outcome).  On success *out points at the table.
 * Fails when the driver library is missing ("no NVIDIA driver: ..."), lacks
 * a function ksearch needs, or cuInit fails (CUDA_ERROR_NO_DEVICE: "no GPU
 * visible").
 */
int ks_cuda_load(const struct ks_cuda **out, struct ks_error *err);

/*
 * A kernel whose compile-time cluster (__cluster_dims__) has more CTAs than
 * the 8 every GPU with clusters schedules may use the larger, non-portable
 * sizes (up to 16 on H100 and H200) once allowed to; this allows it, and
 * leaves every other kernel as it is. CUDA_SUCCESS, or the driver's error.
 */
CUresult ks_cuda_allow_cluster(const struct ks_cuda *cu, CUfunction fn);

/*
 * "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered",
 * or "CUDA error 719" when no driver is loaded to name the code.  The
 * text lives in a per-thread buffer, valid until the thread's next call.
 */
const char *ks_cuda_strerror(CUresult rc);

/* What ksearch needs to know about one GPU; sizes in bytes, clocks in kHz. */
struct ks_gpu_info {
	int ordinal;
	char name[256];
	int cc_major, cc_minor;
	size_t total_mem;
	int sm_count;
	int l2_bytes;
	int max_smem_per_block_optin;
	int max_smem_per_sm;
	int regs_per_sm;
	int max_threads_per_sm;
	int max_blocks_per_sm;
	int mem_clock_khz;
	int mem_bus_width; /* bits */
	int clock_khz;
	char uuid[48]; /* "GPU-xxxxxxxx-xxxx-..." as nvidia-smi prints it; "" if unknown */
};

/* Number of GPUs the driver sees (loads the driver first). */
int ks_cuda_device_count(int *n, struct ks_error *err);

/* Properties of GPU ordinal; needs no context. */
int ks_cuda_device_info(int ordinal, struct ks_gpu_info *out, struct ks_error *err);

/* The driver's CUDA version, e.g. 13000 for 13.0. */
int ks_cuda_driver_version(int *version, struct ks_error *err);

/*
 * The NVRTC --gpu-architecture for this GPU: the arch-specific "sm_90a"
 * and "sm_100a" on compute capability 9.0 and 10.0 (so that wgmma, TMA
 * and tcgen05 are available), "sm_XY" otherwise.  Always NUL-terminates
 * when n > 0.
 */
void ks_gpu_arch(const struct ks_gpu_info *gpu, char *buf, size_t n);

#endif
