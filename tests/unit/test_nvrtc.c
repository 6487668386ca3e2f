/*
 * test_nvrtc.c - compiling with NVRTC and reading the ptxas report.
 *
 * Needs libnvrtc and the CUDA headers (CUDA_PATH or /usr/local/cuda), no
 * GPU.  The canned logs below are what NVRTC 13.0 printed for the kernels
 * in this file, plus the older nvcc format for the variants.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ksearch/compile/nvrtc.h"

static const char tile_source[] =
	"/* ksearch\n"
	"{ \"params\": {\"TILE\": [64, 256]} }\n"
	"*/\n"
	"extern \"C\" __global__ void tile_copy(const float *in, float *out, int n)\n"
	"{\n"
	"\t__shared__ float buf[TILE];\n"
	"\tint i = blockIdx.x * blockDim.x + threadIdx.x;\n"
	"\tbuf[threadIdx.x % TILE] = i < n ? in[i] : 0.0f;\n"
	"\t__syncthreads();\n"
	"\tif (i < n)\n"
	"\t\tout[i] = buf[(TILE - 1) - threadIdx.x % TILE] * SCALE;\n"
	"}\n";

static int compile(const char *source, const char *name, const char *arch, const struct ks_define *defines,
		   size_t n_defines, struct ks_compile_result *out, struct ks_error *err)
{
	struct ks_compile_request req = { .source = source,
					  .source_name = name,
					  .arch = arch,
					  .defines = defines,
					  .n_defines = n_defines };

	return ks_nvrtc_compile(&req, out, err);
}

static void check_tile_copy(const char *arch, int64_t tile, int smem)
{
	const struct ks_define defines[] = { { "TILE", tile }, { "SCALE", 3 } };
	struct ks_compile_result res;
	struct ks_error err = { "" };
	const struct ks_kernel_resources *k;

	if (compile(tile_source, "seeds/tile.cu", arch, defines, 2, &res, &err))
		fail_msg("%s: %s", arch, err.msg);
	assert_non_null(res.ptx);
	assert_int_equal(strlen(res.ptx), res.ptx_size);
	assert_non_null(strstr(res.ptx, ".entry tile_copy"));
	assert_true(res.cubin_size > 4);
	assert_memory_equal(res.cubin, "\177ELF", 4);
	assert_int_equal(res.n_kernels, 1);
	k = ks_compile_result_kernel(&res, "tile_copy");
	assert_non_null(k);
	assert_true(k->registers > 0);
	assert_int_equal(k->static_smem, smem);
	assert_int_equal(k->spill_stores, 0);
	assert_int_equal(k->spill_loads, 0);
	assert_int_equal(k->stack_bytes, 0);
	assert_int_equal(k->barriers, 1);
	assert_null(ks_compile_result_kernel(&res, "tile"));
	ks_compile_result_release(&res);
	assert_null(res.ptx);
	assert_null(res.kernels);
}

static void test_compiles_sm80_and_sm90a_with_defines(void **state)
{
	(void)state;
	/* __shared__ float buf[TILE]: 4 bytes per TILE */
	check_tile_copy("sm_80", 256, 1024);
	check_tile_copy("sm_90a", 256, 1024);
	check_tile_copy("sm_90a", 64, 256);
}

/*
 * NVRTC 12.9 and later cache compiles where a CUDA driver loads, and a
 * cached answer comes without ptxas's report: the second of two equal
 * compiles must report its resources too.  Without a driver (CI) there is
 * no cache; tests/gpu/t0212-nvrtc-cache.sh runs this where there is one.
 */
static void test_the_same_compile_twice_reports_resources(void **state)
{
	(void)state;
	check_tile_copy("sm_90a", 128, 512);
	check_tile_copy("sm_90a", 128, 512);
}

static void test_error_points_at_users_line(void **state)
{
	static const char source[] = "/* ksearch\n"
				     "{ \"params\": {} }\n"
				     "*/\n"
				     "extern \"C\" __global__ void k(float *o)\n"
				     "{\n"
				     "\to[0] = 1.0f;\n"
				     "\to[1] = undefined_thing;\n"
				     "}\n";
	struct ks_compile_result res;
	struct ks_error err = { "" };

	(void)state;
	assert_int_equal(compile(source, "operators/gqa/seeds/bad.cu", "sm_90a", NULL, 0, &res, &err), -1);
	assert_true(!strncmp(err.msg, "compilation failed:\n", 20));
	assert_non_null(strstr(err.msg, "operators/gqa/seeds/bad.cu(7): error"));
	assert_non_null(strstr(err.msg, "undefined_thing"));
	assert_non_null(res.log);
	assert_non_null(strstr(res.log, "operators/gqa/seeds/bad.cu(7): error"));
	assert_null(res.ptx);
	assert_null(res.cubin);
	ks_compile_result_release(&res);
	ks_compile_result_release(&res); /* twice is harmless */
}

/* includes.h keeps such sources from NVRTC; should one get through, the
 * lines NVRTC quotes from a file outside the candidate and the toolkit's
 * headers are withheld from the log, and the candidate's own stay. */
static void test_text_of_a_foreign_file_is_withheld(void **state)
{
	char dir[] = "/tmp/ksearch-nvrtc-XXXXXX", path[64], source[256];
	struct ks_compile_result res;
	struct ks_error err = { "" };
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/secret.h", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("KSEARCH_API_KEY=sk-not-for-the-log-4c1d;\nint second_line_of_it = ;\n", f);
	fclose(f);
	snprintf(source, sizeof(source),
		 "#include \"%s\"\nextern \"C\" __global__ void k(float *o)\n{\n\to[0] = own_mistake;\n}\n",
		 path);
	assert_int_equal(compile(source, "cand.cu", "sm_90a", NULL, 0, &res, &err), -1);
	assert_non_null(res.log);
	assert_null(strstr(res.log, "not-for-the-log"));
	assert_null(strstr(res.log, "second_line_of_it"));
	assert_null(strstr(err.msg, "not-for-the-log"));
	assert_non_null(strstr(res.log, "secret.h(1): (a diagnostic in a file outside the candidate"));
	if (!strstr(res.log, "cand.cu(4): error"))
		fail_msg("%s", res.log);
	assert_non_null(strstr(res.log, "own_mistake"));
	ks_compile_result_release(&res);
	unlink(path);
	rmdir(dir);
}

static void test_huge_log_is_trimmed_from_first_error(void **state)
{
	struct ks_compile_result res;
	struct ks_error err = { "" };
	size_t size = 64 * 1024, used = 0;
	char *source = malloc(size);

	(void)state;
	assert_non_null(source);
	used += (size_t)snprintf(source + used, size - used, "extern \"C\" __global__ void k(float *o)\n{\n");
	for (int i = 0; i < 300; i++)
		used += (size_t)snprintf(source + used, size - used, "\to[%d] = missing_%d;\n", i, i);
	snprintf(source + used, size - used, "}\n");
	assert_int_equal(compile(source, "big.cu", "sm_80", NULL, 0, &res, &err), -1);
	assert_true(strlen(res.log) > KS_ERROR_MAX);
	assert_true(strlen(err.msg) < KS_ERROR_MAX - 1);
	assert_non_null(strstr(err.msg, "big.cu(3): error"));
	assert_non_null(strstr(err.msg, "missing_0"));
	assert_non_null(strstr(err.msg, "log trimmed"));
	ks_compile_result_release(&res);
	free(source);
}

static void test_unknown_arch_fails_clearly(void **state)
{
	struct ks_compile_result res;
	struct ks_error err = { "" };

	(void)state;
	/* well formed, but NVRTC 13 no longer targets Volta */
	assert_int_equal(compile(tile_source, "t.cu", "sm_70", NULL, 0, &res, &err), -1);
	assert_non_null(strstr(err.msg, "'sm_70'"));
	assert_non_null(strstr(err.msg, "sm_80"));
	ks_compile_result_release(&res);

	assert_int_equal(compile(tile_source, "t.cu", "compute_90", NULL, 0, &res, &err), -1);
	assert_non_null(strstr(err.msg, "not of the form sm_XY"));
	ks_compile_result_release(&res);
	assert_int_equal(compile(tile_source, "t.cu", "hopper", NULL, 0, &res, &err), -1);
	assert_non_null(strstr(err.msg, "'hopper'"));
	ks_compile_result_release(&res);
}

static void test_bad_define_name_fails(void **state)
{
	const struct ks_define defines[] = { { "TILE", 64 }, { "X=1 -DY", 2 } };
	struct ks_compile_result res;
	struct ks_error err = { "" };

	(void)state;
	assert_int_equal(compile(tile_source, "t.cu", "sm_80", defines, 2, &res, &err), -1);
	assert_non_null(strstr(err.msg, "define #2"));
	ks_compile_result_release(&res);
}

static void test_cuda_headers_resolve(void **state)
{
	static const char source[] =
		"#include <cuda_bf16.h>\n"
		"#include <cuda_fp16.h>\n"
		"#include <cuda/std/cstdint>\n"
		"extern \"C\" __global__ void convert(const __nv_bfloat16 *a, __half *b, float *c)\n"
		"{\n"
		"\tcuda::std::uint32_t i = threadIdx.x;\n"
		"\tfloat x = __bfloat162float(a[i]);\n"
		"\tb[i] = __float2half(x);\n"
		"\tc[i] = x;\n"
		"}\n";
	struct ks_compile_result res;
	struct ks_error err = { "" };

	(void)state;
	if (compile(source, "bf16.cu", "sm_90a", NULL, 0, &res, &err))
		fail_msg("%s", err.msg);
	assert_non_null(ks_compile_result_kernel(&res, "convert"));
	ks_compile_result_release(&res);
}

static void test_several_kernels_mangled_and_spilling(void **state)
{
	static const char source[] =
		"template <int T> __global__ void scaled(float *x) { x[threadIdx.x] *= T; }\n"
		"template __global__ void scaled<3>(float *);\n"
		"extern \"C\" __global__ void __launch_bounds__(1024, 2) spilly(float *o, int k)\n"
		"{\n"
		"\tfloat acc[96];\n"
		"#pragma unroll\n"
		"\tfor (int j = 0; j < 96; j++) acc[j] = o[j * k + threadIdx.x];\n"
		"#pragma unroll\n"
		"\tfor (int r = 0; r < 8; r++)\n"
		"#pragma unroll\n"
		"\t\tfor (int j = 0; j < 96; j++) acc[j] = acc[j] * acc[(j + r) % 96] + 1.0f;\n"
		"\tfloat s = 0;\n"
		"#pragma unroll\n"
		"\tfor (int j = 0; j < 96; j++) s += acc[j];\n"
		"\to[threadIdx.x] = s;\n"
		"}\n";
	struct ks_compile_result res;
	struct ks_error err = { "" };
	const struct ks_kernel_resources *k;

	(void)state;
	if (compile(source, "multi.cu", "sm_80", NULL, 0, &res, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(res.n_kernels, 2);
	k = ks_compile_result_kernel(&res, "_Z6scaledILi3EEvPf");
	assert_non_null(k);
	assert_true(k->registers > 0);
	assert_int_equal(k->spill_stores, 0);
	assert_true(k->const_bytes > 0); /* sm_80 reports cmem[0] */
	k = ks_compile_result_kernel(&res, "spilly");
	assert_non_null(k);
	/* 2 blocks of 1024 threads leave 32 registers a thread */
	assert_true(k->registers <= 32);
	assert_true(k->spill_stores > 0);
	assert_true(k->spill_loads > 0);
	assert_true(k->stack_bytes > 0);
	ks_compile_result_release(&res);
}

static void test_release_zeroed_result(void **state)
{
	struct ks_compile_result res;

	(void)state;
	memset(&res, 0, sizeof(res));
	ks_compile_result_release(&res);
	ks_compile_result_release(NULL);
}

static void test_version(void **state)
{
	struct ks_error err = { "" };
	int major = 0, minor = -1;

	(void)state;
	assert_int_equal(ks_nvrtc_version(&major, &minor, &err), 0);
	assert_true(major >= 12);
	assert_true(minor >= 0);
}

/* NVRTC 13.0, sm_90a: no cmem on Hopper, a .func's properties after the entry. */
static const char log_sm90a[] =
	"ptxas info    : 4 bytes gmem\n"
	"ptxas info    : Compiling entry function 'empty' for 'sm_90a'\n"
	"ptxas info    : Function properties for empty\n"
	"ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
	"ptxas info    : Used 4 registers, used 0 barriers\n"
	"ptxas info    : Compile time = 1.257 ms\n"
	"ptxas info    : Compiling entry function 'spilly' for 'sm_90a'\n"
	"ptxas info    : Function properties for spilly\n"
	"ptxas         .     928 bytes stack frame, 2328 bytes spill stores, 2352 bytes spill loads\n"
	"ptxas info    : Used 32 registers, used 0 barriers, 936 bytes cumulative stack size\n"
	"ptxas info    : Compile time = 143.152 ms\n"
	"ptxas info    : Function properties for _Z6helperPfi\n"
	"ptxas         .     64 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
	"ptxas info    : Compiling entry function 'kern' for 'sm_90a'\n"
	"ptxas info    : Function properties for kern\n"
	"ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
	"ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem\n";

static void test_parse_nvrtc13_log(void **state)
{
	struct ks_kernel_resources *k;
	size_t n;
	struct ks_error err = { "" };

	(void)state;
	assert_int_equal(ks_ptxas_log_parse(log_sm90a, &k, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_string_equal(k[0].name, "empty");
	assert_int_equal(k[0].registers, 4);
	assert_int_equal(k[0].static_smem, 0);
	assert_string_equal(k[1].name, "spilly");
	assert_int_equal(k[1].registers, 32);
	assert_int_equal(k[1].stack_bytes, 936); /* cumulative beats the frame */
	assert_int_equal(k[1].spill_stores, 2328);
	assert_int_equal(k[1].spill_loads, 2352);
	assert_int_equal(k[1].const_bytes, 0);
	assert_string_equal(k[2].name, "kern");
	assert_int_equal(k[2].registers, 10);
	assert_int_equal(k[2].barriers, 1);
	assert_int_equal(k[2].static_smem, 1024);
	assert_int_equal(k[2].stack_bytes, 0); /* the helper's 64 bytes are not kern's */
	assert_int_equal(k[2].spill_stores, 0);
	free(k);
}

/*
 * Older nvcc -Xptxas -v: no barriers, stack line without the "ptxas ."
 * prefix, properties before the entry line, "N+M bytes smem", diagnostics
 * that quote "Used" in user code.
 */
static const char log_old[] =
	"bad.cu(3): warning: Used 5 registers in a comment\n"
	"ptxas info    : 0 bytes gmem, 8 bytes cmem[4]\n"
	"ptxas info    : Function properties for _Z4scanPfi\n"
	"    16 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
	"ptxas info    : Compiling entry function '_Z4scanPfi' for 'sm_70'\n"
	"ptxas info    : Used 40 registers, 4096+0 bytes smem, 356 bytes cmem[0], 4 bytes cmem[2]\n";

static void test_parse_old_log_variants(void **state)
{
	struct ks_kernel_resources *k;
	size_t n;
	struct ks_error err = { "" };

	(void)state;
	assert_int_equal(ks_ptxas_log_parse(log_old, &k, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(k[0].name, "_Z4scanPfi");
	assert_int_equal(k[0].registers, 40);
	assert_int_equal(k[0].barriers, 0);
	assert_int_equal(k[0].static_smem, 4096);
	assert_int_equal(k[0].const_bytes, 356);
	assert_int_equal(k[0].stack_bytes, 16);
	assert_int_equal(k[0].spill_stores, 4);
	assert_int_equal(k[0].spill_loads, 4);
	free(k);

	assert_int_equal(ks_ptxas_log_parse("", &k, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_null(k);
	assert_int_equal(ks_ptxas_log_parse(NULL, &k, &n, &err), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_compiles_sm80_and_sm90a_with_defines),
		cmocka_unit_test(test_the_same_compile_twice_reports_resources),
		cmocka_unit_test(test_error_points_at_users_line),
		cmocka_unit_test(test_text_of_a_foreign_file_is_withheld),
		cmocka_unit_test(test_huge_log_is_trimmed_from_first_error),
		cmocka_unit_test(test_unknown_arch_fails_clearly),
		cmocka_unit_test(test_bad_define_name_fails),
		cmocka_unit_test(test_cuda_headers_resolve),
		cmocka_unit_test(test_several_kernels_mangled_and_spilling),
		cmocka_unit_test(test_release_zeroed_result),
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_parse_nvrtc13_log),
		cmocka_unit_test(test_parse_old_log_variants),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
