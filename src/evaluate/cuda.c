/*
 * cuda.c - loading the CUDA driver API with dlopen().
 *
 * Loading happens once per process, under pthread_once(), in two stages:
 * the library and its symbols, then cuInit(0).  Each stage's outcome is
 * kept, so that ks_cuda_driver_version() can answer on a machine whose
 * driver sees no GPU, and so that every later caller gets the first
 * caller's error message.  The library is never closed: the table and the
 * error strings the driver hands out point into it.
 */
#include "ksearch/evaluate/cuda.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define LIBCUDA "libcuda.so.1"

#define INSTALL_HINT "install the NVIDIA driver to run kernels; compilation works without it"

/*
 * Where each table field comes from.  name is the export whose signature
 * the field declares (the _v2 names are what the toolkit's <cuda.h>
 * macros call); fallback, when set, is an older export with the same
 * signature, for drivers that predate name.
 */
static const struct symbol {
	size_t offset;
	const char *name;
	const char *fallback;
	int optional;
} symbols[] = {
#define SYM(field, name)                                                                                     \
	{                                                                                                    \
		offsetof(struct ks_cuda, field), name, NULL, 0                                               \
	}
#define SYM_OR(field, name, fallback)                                                                        \
	{                                                                                                    \
		offsetof(struct ks_cuda, field), name, fallback, 0                                           \
	}
#define SYM_OPTIONAL(field, name, fallback)                                                                  \
	{                                                                                                    \
		offsetof(struct ks_cuda, field), name, fallback, 1                                           \
	}
	SYM(get_error_name, "cuGetErrorName"),
	SYM(get_error_string, "cuGetErrorString"),
	SYM(init, "cuInit"),
	SYM(driver_get_version, "cuDriverGetVersion"),
	SYM(device_get_count, "cuDeviceGetCount"),
	SYM(device_get, "cuDeviceGet"),
	SYM(device_get_name, "cuDeviceGetName"),
	SYM(device_get_attribute, "cuDeviceGetAttribute"),
	SYM(device_total_mem, "cuDeviceTotalMem_v2"),
	SYM_OPTIONAL(device_get_uuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid"),
	SYM(primary_ctx_retain, "cuDevicePrimaryCtxRetain"),
	SYM_OR(primary_ctx_release, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
	SYM(ctx_set_current, "cuCtxSetCurrent"),
	/* Not _v2: that one takes a context argument, this one syncs the current context. */
	SYM(ctx_synchronize, "cuCtxSynchronize"),
	SYM(ctx_get_limit, "cuCtxGetLimit"),
	SYM(ctx_set_limit, "cuCtxSetLimit"),
	SYM(module_load_data, "cuModuleLoadData"),
	SYM(module_load_data_ex, "cuModuleLoadDataEx"),
	SYM(module_unload, "cuModuleUnload"),
	SYM(module_get_function, "cuModuleGetFunction"),
	SYM(module_get_global, "cuModuleGetGlobal_v2"),
	SYM(func_get_attribute, "cuFuncGetAttribute"),
	SYM(func_set_attribute, "cuFuncSetAttribute"),
	SYM(launch_kernel, "cuLaunchKernel"),
	SYM(launch_cooperative_kernel, "cuLaunchCooperativeKernel"),

	SYM_OPTIONAL(launch_kernel_ex, "cuLaunchKernelEx", NULL),

	SYM(occupancy_max_active_blocks, "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
	SYM(mem_alloc, "cuMemAlloc_v2"),
	SYM(mem_free, "cuMemFree_v2"),
	SYM(mem_get_info, "cuMemGetInfo_v2"),
	SYM(memcpy_htod, "cuMemcpyHtoD_v2"),
	SYM(memcpy_dtoh, "cuMemcpyDtoH_v2"),
	SYM(memcpy_dtod, "cuMemcpyDtoD_v2"),
	SYM(memset_d8, "cuMemsetD8_v2"),
	SYM(memset_d32, "cuMemsetD32_v2"),
	SYM(memcpy_htod_async, "cuMemcpyHtoDAsync_v2"),
	SYM(memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2"),
	SYM(memcpy_dtod_async, "cuMemcpyDtoDAsync_v2"),
	SYM(memset_d8_async, "cuMemsetD8Async"),
	SYM(memset_d32_async, "cuMemsetD32Async"),
	SYM(stream_create, "cuStreamCreate"),
	SYM(stream_destroy, "cuStreamDestroy_v2"),
	SYM(stream_synchronize, "cuStreamSynchronize"),
	SYM(event_create, "cuEventCreate"),
	SYM(event_record, "cuEventRecord"),
	SYM(event_synchronize, "cuEventSynchronize"),
	SYM_OR(event_elapsed_time, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
	SYM(event_destroy, "cuEventDestroy_v2"),
	SYM_OPTIONAL(profiler_start, "cuProfilerStart", NULL),
	SYM_OPTIONAL(profiler_stop, "cuProfilerStop", NULL),
#undef SYM
#undef SYM_OR
#undef SYM_OPTIONAL
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct ks_cuda table;
static int library_ok; /* dlopen and every required symbol succeeded */
static int init_ok;    /* and cuInit(0) too */
static char load_error[KS_ERROR_MAX];

static void set_load_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void set_load_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(load_error, sizeof(load_error), fmt, ap);
	va_end(ap);
}

/* The file the loader picked for libcuda.so.1, for messages about it. */
static const char *library_path(void *lib)
{
	struct link_map *map = NULL;

	if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && map->l_name[0])
		return map->l_name;
	return LIBCUDA;
}

static int resolve_symbols(void *lib)
{
	size_t i;

	for (i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
		const struct symbol *s = &symbols[i];
		void *sym = dlsym(lib, s->name);

		if (!sym && s->fallback)
			sym = dlsym(lib, s->fallback);
		if (!sym && !s->optional) {
			int version = 0;

			if (table.driver_get_version)
				table.driver_get_version(&version);
			set_load_error("the NVIDIA driver is too old for ksearch: %s (CUDA %d.%d) "
				       "lacks %s; update the NVIDIA driver",
				       library_path(lib), version / 1000, version % 1000 / 10, s->name);
			return -1;
		}
		/* POSIX guarantees a data pointer from dlsym can hold a function. */
		memcpy((char *)&table + s->offset, &sym, sizeof(sym));
	}
	return 0;
}

static void load(void)
{
	const char *why;
	void *lib;
	CUresult rc;

	lib = dlopen(LIBCUDA, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		why = dlerror();
		if (!why)
			why = "unknown reason";
		set_load_error("no NVIDIA driver: " LIBCUDA " %s (%s); " INSTALL_HINT,
			       strstr(why, "No such file") ? "not found" : "could not be loaded", why);
		return;
	}
	if (resolve_symbols(lib))
		return;
	library_ok = 1;

	rc = table.init(0);
	switch (rc) {
	case CUDA_SUCCESS:
		init_ok = 1;
		break;
	case CUDA_ERROR_NO_DEVICE:
		set_load_error("no GPU visible: cuInit failed with CUDA_ERROR_NO_DEVICE; check "
			       "that nvidia-smi lists a GPU and that CUDA_VISIBLE_DEVICES "
			       "does not hide it");
		break;
	case CUDA_ERROR_STUB_LIBRARY:
		/* Not a driver at all: nothing, not even the version, comes from it. */
		library_ok = 0;
		set_load_error("no NVIDIA driver: %s is the CUDA toolkit's stub library, not a "
			       "driver (cuInit: CUDA_ERROR_STUB_LIBRARY); " INSTALL_HINT,
			       library_path(lib));
		break;
	default:
		set_load_error("cuInit failed: %s (driver library %s)", ks_cuda_strerror(rc),
			       library_path(lib));
		break;
	}
}

int ks_cuda_load(const struct ks_cuda **out, struct ks_error *err)
{
	pthread_once(&load_once, load);
	if (!init_ok)
		return ks_fail(err, "%s", load_error);
	*out = &table;
	return 0;
}

CUresult ks_cuda_allow_cluster(const struct ks_cuda *cu, CUfunction fn)
{
	const CUfunction_attribute dims[3] = { CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
					       CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
					       CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH };
	long long ctas = 1;

	for (int i = 0; i < 3; i++) {
		int v = 0;

		/* a driver or GPU without clusters has nothing to allow */
		if (cu->func_get_attribute(&v, dims[i], fn) != CUDA_SUCCESS)
			return CUDA_SUCCESS;
		ctas *= v > 0 ? v : 1;
	}
	if (ctas <= 8)
		return CUDA_SUCCESS;
	return cu->func_set_attribute(fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
}

const char *ks_cuda_strerror(CUresult rc)
{
	static _Thread_local char text[512];
	const char *name = NULL, *desc = NULL;

	/*
	 * Codes only come from a loaded driver, and whoever got one has
	 * been through pthread_once(), so reading the table here is safe.
	 */
	if (table.get_error_name && table.get_error_name(rc, &name) != CUDA_SUCCESS)
		name = NULL;
	if (table.get_error_string && table.get_error_string(rc, &desc) != CUDA_SUCCESS)
		desc = NULL;
	if (name && desc)
		snprintf(text, sizeof(text), "%s: %s", name, desc);
	else if (name)
		snprintf(text, sizeof(text), "%s", name);
	else
		snprintf(text, sizeof(text), "CUDA error %d", (int)rc);
	return text;
}

int ks_cuda_driver_version(int *version, struct ks_error *err)
{
	CUresult rc;

	/* Needs the library only, so it answers even when no GPU is visible. */
	pthread_once(&load_once, load);
	if (!library_ok)
		return ks_fail(err, "%s", load_error);
	rc = table.driver_get_version(version);
	if (rc != CUDA_SUCCESS)
		return ks_fail(err, "cuDriverGetVersion failed: %s", ks_cuda_strerror(rc));
	return 0;
}

int ks_cuda_device_count(int *n, struct ks_error *err)
{
	const struct ks_cuda *cu;
	CUresult rc;

	if (ks_cuda_load(&cu, err))
		return -1;
	rc = cu->device_get_count(n);
	if (rc != CUDA_SUCCESS)
		return ks_fail(err, "cuDeviceGetCount failed: %s", ks_cuda_strerror(rc));
	return 0;
}

static const struct attribute {
	size_t offset;
	CUdevice_attribute attrib;
	const char *what;
	int optional; /* informational: 0 rather than failure when the driver won't say */
} attributes[] = {
	{ offsetof(struct ks_gpu_info, cc_major), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
	  "compute capability (major)", 0 },
	{ offsetof(struct ks_gpu_info, cc_minor), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
	  "compute capability (minor)", 0 },
	{ offsetof(struct ks_gpu_info, sm_count), CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
	  "multiprocessor count", 0 },
	{ offsetof(struct ks_gpu_info, l2_bytes), CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 cache size", 0 },
	{ offsetof(struct ks_gpu_info, max_smem_per_block_optin),
	  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "opt-in shared memory per block", 0 },
	{ offsetof(struct ks_gpu_info, max_smem_per_sm),
	  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, "shared memory per multiprocessor", 0 },
	{ offsetof(struct ks_gpu_info, regs_per_sm), CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
	  "registers per multiprocessor", 0 },
	{ offsetof(struct ks_gpu_info, max_threads_per_sm),
	  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, "threads per multiprocessor", 0 },
	{ offsetof(struct ks_gpu_info, max_blocks_per_sm), CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR,
	  "blocks per multiprocessor", 0 },
	{ offsetof(struct ks_gpu_info, mem_clock_khz), CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, "memory clock",
	  1 },
	{ offsetof(struct ks_gpu_info, mem_bus_width), CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH,
	  "memory bus width", 1 },
	{ offsetof(struct ks_gpu_info, clock_khz), CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "SM clock", 1 },
};

/* nvidia-smi's spelling, which CUDA_VISIBLE_DEVICES also accepts. */
static void format_uuid(const CUuuid *uuid, char *buf, size_t n)
{
	const unsigned char *b = (const unsigned char *)uuid->bytes;

	snprintf(buf, n, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
		 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
		 b[15]);
}

int ks_cuda_device_info(int ordinal, struct ks_gpu_info *out, struct ks_error *err)
{
	const struct ks_cuda *cu;
	CUdevice dev;
	CUresult rc;
	CUuuid uuid;
	int count;
	size_t i;

	if (ks_cuda_device_count(&count, err))
		return -1;
	if (ordinal < 0 || ordinal >= count) {
		if (count == 0)
			return ks_fail(err, "GPU %d does not exist: the driver sees no GPU", ordinal);
		return ks_fail(err, "GPU %d does not exist: the driver sees %d GPU%s (0 to %d)", ordinal,
			       count, count == 1 ? "" : "s", count - 1);
	}
	if (ks_cuda_load(&cu, err))
		return -1;

	memset(out, 0, sizeof(*out));
	out->ordinal = ordinal;
	rc = cu->device_get(&dev, ordinal);
	if (rc != CUDA_SUCCESS)
		return ks_fail(err, "cuDeviceGet(%d) failed: %s", ordinal, ks_cuda_strerror(rc));
	rc = cu->device_get_name(out->name, (int)sizeof(out->name), dev);
	if (rc != CUDA_SUCCESS)
		return ks_fail(err, "GPU %d: cuDeviceGetName failed: %s", ordinal, ks_cuda_strerror(rc));
	out->name[sizeof(out->name) - 1] = '\0';

	for (i = 0; i < sizeof(attributes) / sizeof(attributes[0]); i++) {
		const struct attribute *a = &attributes[i];
		int value = 0;

		rc = cu->device_get_attribute(&value, a->attrib, dev);
		if (rc != CUDA_SUCCESS && !a->optional)
			return ks_fail(err, "GPU %d (%s): cannot read the %s (attribute %d): %s", ordinal,
				       out->name, a->what, (int)a->attrib, ks_cuda_strerror(rc));
		if (rc != CUDA_SUCCESS)
			value = 0;
		memcpy((char *)out + a->offset, &value, sizeof(value));
	}

	rc = cu->device_total_mem(&out->total_mem, dev);
	if (rc != CUDA_SUCCESS)
		return ks_fail(err, "GPU %d (%s): cuDeviceTotalMem failed: %s", ordinal, out->name,
			       ks_cuda_strerror(rc));

	if (cu->device_get_uuid && cu->device_get_uuid(&uuid, dev) == CUDA_SUCCESS)
		format_uuid(&uuid, out->uuid, sizeof(out->uuid));
	return 0;
}

void ks_gpu_arch(const struct ks_gpu_info *gpu, char *buf, size_t n)
{
	/* Arch-specific features (wgmma, TMA multicast, tcgen05) need the 'a' target. */
	int specific = gpu->cc_minor == 0 && (gpu->cc_major == 9 || gpu->cc_major == 10);

	if (n == 0)
		return;
	snprintf(buf, n, "sm_%d%d%s", gpu->cc_major, gpu->cc_minor, specific ? "a" : "");
}
