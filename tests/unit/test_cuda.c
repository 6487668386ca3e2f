/*
 * test_cuda.c - the run-time loaded driver API.
 *
 * The same binary runs on machines without a driver (where every GPU call
 * must fail with a message that names libcuda.so.1 and the fix) and on GPU
 * machines (where device 0 must look like a real GPU and a tiny kernel
 * must run through the table).  Which branch runs is decided by whether
 * ks_cuda_load() succeeds; each branch checks real things.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ksearch/evaluate/cuda.h"

static int have_gpu(void)
{
	const struct ks_cuda *cu = NULL;
	struct ks_error err;

	return ks_cuda_load(&cu, &err) == 0;
}

static void assert_contains(const char *haystack, const char *needle)
{
	if (!strstr(haystack, needle))
		fail_msg("\"%s\" lacks \"%s\"", haystack, needle);
}

static void test_gpu_arch_names_nvrtc_target(void **state)
{
	static const struct {
		int major, minor;
		const char *arch;
	} cases[] = {
		{ 7, 0, "sm_70" },    { 7, 5, "sm_75" },   { 8, 0, "sm_80" },
		{ 8, 6, "sm_86" },    { 8, 9, "sm_89" },   { 9, 0, "sm_90a" },
		{ 10, 0, "sm_100a" }, { 10, 3, "sm_103" }, { 12, 0, "sm_120" },
	};
	struct ks_gpu_info gpu;
	char buf[16];
	size_t i;

	(void)state;
	memset(&gpu, 0, sizeof(gpu));
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		gpu.cc_major = cases[i].major;
		gpu.cc_minor = cases[i].minor;
		ks_gpu_arch(&gpu, buf, sizeof(buf));
		assert_string_equal(buf, cases[i].arch);
	}

	/* Short buffers are truncated but terminated; n == 0 writes nothing. */
	gpu.cc_major = 10;
	gpu.cc_minor = 0;
	ks_gpu_arch(&gpu, buf, 4);
	assert_string_equal(buf, "sm_");
	buf[0] = 'x';
	ks_gpu_arch(&gpu, buf, 0);
	assert_int_equal(buf[0], 'x');
}

/* Without a usable driver, every entry point fails with the load message. */
static void check_failure_everywhere(const char *load_msg)
{
	const struct ks_cuda *cu = (const struct ks_cuda *)&cu; /* sentinel */
	struct ks_gpu_info info;
	struct ks_error err;
	int n = -7;

	/* Idempotent: the second call reports the same thing and leaves *out alone. */
	assert_int_equal(ks_cuda_load(&cu, &err), -1);
	assert_string_equal(err.msg, load_msg);
	assert_ptr_equal(cu, (const struct ks_cuda *)&cu);

	memset(&err, 0, sizeof(err));
	assert_int_equal(ks_cuda_device_count(&n, &err), -1);
	assert_string_equal(err.msg, load_msg);
	assert_int_equal(n, -7);

	memset(&err, 0, sizeof(err));
	assert_int_equal(ks_cuda_device_info(0, &info, &err), -1);
	assert_string_equal(err.msg, load_msg);

	/* A NULL error struct is allowed. */
	assert_int_equal(ks_cuda_load(&cu, NULL), -1);
}

static void test_without_gpu_fails_cleanly(void **state)
{
	const struct ks_cuda *cu = NULL;
	struct ks_error err;
	int version = -1;

	(void)state;
	if (have_gpu())
		skip();
	memset(&err, 0, sizeof(err));
	assert_int_equal(ks_cuda_load(&cu, &err), -1);
	assert_null(cu);

	if (strncmp(err.msg, "no NVIDIA driver: ", 18) == 0) {
		/* No driver at all, or only the toolkit's stub: name the library and the fix. */
		assert_contains(err.msg, "libcuda.so");
		assert_contains(err.msg, "install the NVIDIA driver to run kernels");
		assert_contains(err.msg, "compilation works without it");
		if (!strstr(err.msg, "stub library"))
			assert_contains(err.msg, "libcuda.so.1 not found (");
		check_failure_everywhere(err.msg);
		/* No driver to name the code, so the number is all there is. */
		assert_string_equal(ks_cuda_strerror(CUDA_ERROR_ILLEGAL_ADDRESS), "CUDA error 700");
		{
			struct ks_error verr;

			if (ks_cuda_driver_version(&version, &verr) != 0)
				assert_string_equal(verr.msg, err.msg);
		}
	} else if (strncmp(err.msg, "no GPU visible: ", 16) == 0) {
		/* A driver that sees no GPU still knows its version and its error names. */
		assert_contains(err.msg, "CUDA_ERROR_NO_DEVICE");
		check_failure_everywhere(err.msg);
		assert_int_equal(ks_cuda_driver_version(&version, &err), 0);
		assert_true(version >= 10000);
		assert_string_equal(ks_cuda_strerror(CUDA_ERROR_ILLEGAL_ADDRESS),
				    "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered");
	} else {
		fail_msg("unexpected load failure: %s", err.msg);
	}
}

static void test_with_gpu_device_zero_is_sane(void **state)
{
	const struct ks_cuda *cu = NULL, *again = NULL;
	struct ks_gpu_info info;
	struct ks_error err;
	char arch[16], expect[16];
	int n = 0, version = 0;

	(void)state;
	if (!have_gpu())
		skip();
	assert_int_equal(ks_cuda_load(&cu, &err), 0);
	assert_int_equal(ks_cuda_load(&again, &err), 0);
	assert_non_null(cu);
	assert_ptr_equal(cu, again);

	assert_int_equal(ks_cuda_driver_version(&version, &err), 0);
	assert_true(version >= 11000);
	assert_int_equal(ks_cuda_device_count(&n, &err), 0);
	assert_true(n >= 1);

	if (ks_cuda_device_info(0, &info, &err) != 0)
		fail_msg("device_info(0): %s", err.msg);
	print_message("GPU 0: %s, cc %d.%d, %d SMs, %zu MiB, L2 %d KiB, smem optin %d, "
		      "smem/SM %d, regs/SM %d, threads/SM %d, blocks/SM %d, clock %d kHz, "
		      "mem clock %d kHz, bus %d bits, %s, driver %d\n",
		      info.name, info.cc_major, info.cc_minor, info.sm_count, info.total_mem >> 20,
		      info.l2_bytes >> 10, info.max_smem_per_block_optin, info.max_smem_per_sm,
		      info.regs_per_sm, info.max_threads_per_sm, info.max_blocks_per_sm, info.clock_khz,
		      info.mem_clock_khz, info.mem_bus_width, info.uuid, version);
	assert_int_equal(info.ordinal, 0);
	assert_true(info.name[0] != '\0');
	assert_true(info.cc_major >= 7);
	assert_true(info.cc_minor >= 0 && info.cc_minor <= 9);
	assert_true(info.sm_count > 0);
	assert_true(info.total_mem > ((size_t)1 << 30));
	assert_true(info.l2_bytes > 0);
	assert_true(info.max_smem_per_block_optin >= 48 * 1024);
	assert_true(info.max_smem_per_sm >= info.max_smem_per_block_optin);
	assert_true(info.regs_per_sm >= 65536);
	assert_true(info.max_threads_per_sm >= 1024);
	assert_true(info.max_blocks_per_sm >= 16);
	if (info.uuid[0]) {
		assert_int_equal(strlen(info.uuid), 40);
		assert_memory_equal(info.uuid, "GPU-", 4);
	}

	ks_gpu_arch(&info, arch, sizeof(arch));
	snprintf(expect, sizeof(expect), "sm_%d%d", info.cc_major, info.cc_minor);
	assert_memory_equal(arch, expect, strlen(expect));

	assert_int_equal(ks_cuda_device_info(n, &info, &err), -1);
	assert_contains(err.msg, "does not exist");
	assert_int_equal(ks_cuda_device_info(-1, &info, &err), -1);
	assert_contains(err.msg, "GPU -1 does not exist");

	assert_string_equal(ks_cuda_strerror(CUDA_ERROR_ILLEGAL_ADDRESS),
			    "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered");
	assert_string_equal(ks_cuda_strerror((CUresult)123456), "CUDA error 123456");
}

/* A kernel written as PTX for the oldest target, so any driver JITs it. */
static const char store_ptx[] = ".version 6.0\n"
				".target sm_70\n"
				".address_size 64\n"
				".visible .entry store(.param .u64 out, .param .u32 value)\n"
				"{\n"
				"	.reg .b32 %r<4>;\n"
				"	.reg .b64 %rd<5>;\n"
				"	ld.param.u64 %rd1, [out];\n"
				"	ld.param.u32 %r1, [value];\n"
				"	cvta.to.global.u64 %rd2, %rd1;\n"
				"	mov.u32 %r2, %tid.x;\n"
				"	mul.wide.u32 %rd3, %r2, 4;\n"
				"	add.s64 %rd4, %rd2, %rd3;\n"
				"	add.u32 %r3, %r1, %r2;\n"
				"	st.global.u32 [%rd4], %r3;\n"
				"	ret;\n"
				"}\n";

#define CU_OK(call)                                                                                          \
	do {                                                                                                 \
		CUresult rc_ = (call);                                                                       \
		if (rc_ != CUDA_SUCCESS)                                                                     \
			fail_msg("%s: %s", #call, ks_cuda_strerror(rc_));                                    \
	} while (0)

static void test_with_gpu_table_runs_a_kernel(void **state)
{
	const struct ks_cuda *cu = NULL;
	struct ks_error err;
	CUdevice dev;
	CUcontext ctx;
	CUmodule module;
	CUfunction func;
	CUstream stream;
	CUevent start, stop;
	CUdeviceptr buf;
	uint32_t host[256];
	unsigned char bytes[64];
	uint32_t value = 1000;
	void *params[2];
	size_t free_bytes = 0, total_bytes = 0;
	int regs = -1, blocks = 0, i;
	float ms = -1;

	(void)state;
	if (!have_gpu())
		skip();
	assert_int_equal(ks_cuda_load(&cu, &err), 0);
	CU_OK(cu->device_get(&dev, 0));
	CU_OK(cu->primary_ctx_retain(&ctx, dev));
	CU_OK(cu->ctx_set_current(ctx));
	CU_OK(cu->mem_get_info(&free_bytes, &total_bytes));
	assert_true(free_bytes > 0 && total_bytes >= free_bytes);

	CU_OK(cu->mem_alloc(&buf, sizeof(host)));
	CU_OK(cu->memset_d8(buf, 0xab, sizeof(bytes)));
	CU_OK(cu->memcpy_dtoh(bytes, buf, sizeof(bytes)));
	for (i = 0; i < (int)sizeof(bytes); i++)
		assert_int_equal(bytes[i], 0xab);
	CU_OK(cu->memset_d32(buf, 0x01020304u, 256));
	CU_OK(cu->memcpy_dtoh(host, buf, sizeof(host)));
	assert_int_equal(host[255], 0x01020304u);

	CU_OK(cu->module_load_data(&module, store_ptx));
	CU_OK(cu->module_get_function(&func, module, "store"));
	CU_OK(cu->func_get_attribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, func));
	assert_true(regs > 0);
	CU_OK(cu->occupancy_max_active_blocks(&blocks, func, 256, 0));
	assert_true(blocks > 0);

	CU_OK(cu->stream_create(&stream, CU_STREAM_NON_BLOCKING));
	CU_OK(cu->event_create(&start, CU_EVENT_DEFAULT));
	CU_OK(cu->event_create(&stop, CU_EVENT_DEFAULT));
	params[0] = &buf;
	params[1] = &value;
	CU_OK(cu->event_record(start, stream));
	CU_OK(cu->launch_kernel(func, 1, 1, 1, 256, 1, 1, 0, stream, params, NULL));
	CU_OK(cu->event_record(stop, stream));
	CU_OK(cu->event_synchronize(stop));
	CU_OK(cu->event_elapsed_time(&ms, start, stop));
	assert_true(ms >= 0);
	memset(host, 0, sizeof(host));
	CU_OK(cu->memcpy_dtoh_async(host, buf, sizeof(host), stream));
	CU_OK(cu->stream_synchronize(stream));
	for (i = 0; i < 256; i++)
		assert_int_equal(host[i], 1000 + i);
	CU_OK(cu->ctx_synchronize());

	CU_OK(cu->event_destroy(start));
	CU_OK(cu->event_destroy(stop));
	CU_OK(cu->stream_destroy(stream));
	CU_OK(cu->module_unload(module));
	CU_OK(cu->mem_free(buf));
	CU_OK(cu->primary_ctx_release(dev));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpu_arch_names_nvrtc_target),
		cmocka_unit_test(test_without_gpu_fails_cleanly),
		cmocka_unit_test(test_with_gpu_device_zero_is_sane),
		cmocka_unit_test(test_with_gpu_table_runs_a_kernel),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
