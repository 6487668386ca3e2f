/*
 * test_ptx.c - descriptors and globals read from real PTX.
 *
 * The fixtures in fixtures/ptx/ are compiler output (nvcc -ptx for sm_80
 * and sm_90a, NVRTC with -default-device for sm_80; each .ptx has its .cu
 * beside it, see the README there) plus one hand-written module for the
 * corners.  Run with KS_TEST_FIXTURES pointing at tests/unit/fixtures.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/compile/ptx.h"

static char *read_fixture(const char *name)
{
	const char *dir = getenv("KS_TEST_FIXTURES");
	char path[4096];
	FILE *f;
	char *text;
	long size;

	if (!dir || !*dir)
		fail_msg("KS_TEST_FIXTURES is not set; run with "
			 "KS_TEST_FIXTURES=<repo>/tests/unit/fixtures");
	snprintf(path, sizeof(path), "%s/ptx/%s", dir, name);
	f = fopen(path, "rb");
	if (!f)
		fail_msg("cannot open fixture %s", path);
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	rewind(f);
	text = malloc((size_t)size + 1);
	assert_non_null(text);
	assert_int_equal(fread(text, 1, (size_t)size, f), (size_t)size);
	text[size] = '\0';
	fclose(f);
	return text;
}

struct expected_kernel {
	const char *name;
	enum ks_tensor_cores tensor_cores;
	enum ks_async_copy async_copy;
	int widest_load_bytes;
};

static void check_kernels(const char *fixture, const struct expected_kernel *kernels, size_t n)
{
	char *ptx = read_fixture(fixture);

	for (size_t i = 0; i < n; i++) {
		struct ks_ptx_descriptors d;
		struct ks_error err = { "" };

		if (ks_ptx_kernel_descriptors(ptx, kernels[i].name, &d, &err))
			fail_msg("%s: %s", kernels[i].name, err.msg);
		if (d.tensor_cores != kernels[i].tensor_cores || d.async_copy != kernels[i].async_copy ||
		    d.widest_load_bytes != kernels[i].widest_load_bytes)
			fail_msg("%s/%s: got %s/%s/%d, expected %s/%s/%d", fixture, kernels[i].name,
				 ks_tensor_cores_name(d.tensor_cores), ks_async_copy_name(d.async_copy),
				 d.widest_load_bytes, ks_tensor_cores_name(kernels[i].tensor_cores),
				 ks_async_copy_name(kernels[i].async_copy), kernels[i].widest_load_bytes);
	}
	free(ptx);
}

/* The names found must be exactly the expected ones, in declaration order. */
static void check_globals(const char *fixture, const char *const *expected, size_t n)
{
	char *ptx = read_fixture(fixture);
	struct ks_error err = { "" };
	char **names;
	size_t count;

	if (ks_ptx_mutable_globals(ptx, &names, &count, &err))
		fail_msg("%s: %s", fixture, err.msg);
	for (size_t i = 0; i < count && i < n; i++)
		assert_string_equal(names[i], expected[i]);
	if (count != n)
		fail_msg("%s: %zu mutable globals found, expected %zu (first extra: %s)", fixture, count, n,
			 count > n ? names[n] : expected[count]);
	ks_ptx_names_free(names, count);
	free(ptx);
}

static void test_sm80_loads_cp_async_and_mma(void **state)
{
	static const struct expected_kernel kernels[] = {
		{ "vec4", KS_TC_NONE, KS_ASYNC_NONE, 16 }, /* ld.global.nc.v4.f32 */
		{ "scalar", KS_TC_NONE, KS_ASYNC_NONE, 4 },
		{ "cpasync", KS_TC_NONE, KS_ASYNC_CP_ASYNC, 16 }, /* cp.async.cg ..., 16 */
		{ "mma_caller", KS_TC_MMA, KS_ASYNC_NONE, 4 },	  /* mma.sync in a .func */
		{ "half2load", KS_TC_NONE, KS_ASYNC_NONE, 4 },	  /* ld.global.nc.b32 */
		{ "wmma_kernel", KS_TC_MMA, KS_ASYNC_NONE, 0 },
	};

	(void)state;
	check_kernels("nvcc_sm80.ptx", kernels, sizeof(kernels) / sizeof(kernels[0]));
}

static void test_sm90a_wgmma_and_tma(void **state)
{
	static const struct expected_kernel kernels[] = {
		{ "tma_wgmma", KS_TC_WGMMA, KS_ASYNC_TMA, 16 },
		{ "plain", KS_TC_NONE, KS_ASYNC_NONE, 2 }, /* ld.global.u16 */
	};

	(void)state;
	check_kernels("nvcc_sm90a.ptx", kernels, sizeof(kernels) / sizeof(kernels[0]));
}

static void test_calls_reach_funcs_and_indirect_calls_reach_all(void **state)
{
	static const struct expected_kernel kernels[] = {
		/* helper_a (ld.global.v8.f32) calls helper_b (TMA) */
		{ "direct_caller", KS_TC_NONE, KS_ASYNC_TMA, 32 },
		/* through a register: every .func counts, unreachable_func's mma too */
		{ "indirect_caller", KS_TC_MMA, KS_ASYNC_TMA, 32 },
		/* guarded load after a label, a load inside a scope block */
		{ "predicated", KS_TC_NONE, KS_ASYNC_NONE, 16 },
		/* a bulk copy from shared to global is TMA but loads nothing */
		{ "bulk_store", KS_TC_NONE, KS_ASYNC_TMA, 0 },
		{ "globals_user", KS_TC_NONE, KS_ASYNC_NONE, 4 },
		{ "empty_kernel", KS_TC_NONE, KS_ASYNC_NONE, 0 },
	};

	(void)state;
	check_kernels("edge_sm100a.ptx", kernels, sizeof(kernels) / sizeof(kernels[0]));
}

static void test_nvcc_globals_skip_constant(void **state)
{
	/*
	 * __constant__ table is not .global; __device__ const int k_three is,
	 * but every use was folded, so no instruction can change it.
	 */
	static const char *const sm80[] = { "counter", "buf", "managed_flag" };

	(void)state;
	check_globals("nvcc_sm80.ptx", sm80, sizeof(sm80) / sizeof(sm80[0]));
	check_globals("nvcc_sm90a.ptx", NULL, 0);
}

static void test_nvrtc_globals_skip_toolchain_tables(void **state)
{
	/*
	 * With -default-device, const and constexpr namespace arrays become
	 * .global; indexed at run time, their address is taken, so they count.
	 * kconst (folded), $str (printf) and __cudart_i2opi_f (sinf) do not.
	 */
	static const char *const expected[] = { "lut", "clut", "hidden", "ticket" };

	(void)state;
	check_globals("nvrtc_globals_sm80.ptx", expected, sizeof(expected) / sizeof(expected[0]));
}

static void test_edge_globals_every_form(void **state)
{
	/*
	 * Not reported: pair_a and ro_only (only loaded by name), fn_table
	 * (loaded), never_used and alias_of_aliased (never mentioned), and the
	 * .shared, .const and commented-out declarations.  aliased counts: its
	 * address initializes alias_of_aliased.
	 */
	static const char *const expected[] = {
		"counter", "ext_buf", "pair_b", "managed_flag", "weak_total", "aliased",
	};

	(void)state;
	check_globals("edge_sm100a.ptx", expected, sizeof(expected) / sizeof(expected[0]));
}

static void test_has_entry(void **state)
{
	char *ptx = read_fixture("edge_sm100a.ptx");

	(void)state;
	assert_int_equal(ks_ptx_has_entry(ptx, "direct_caller"), 1);
	assert_int_equal(ks_ptx_has_entry(ptx, "empty_kernel"), 1);
	assert_int_equal(ks_ptx_has_entry(ptx, "helper_a"), 0);	 /* a .func */
	assert_int_equal(ks_ptx_has_entry(ptx, "ghost"), 0);	 /* in a comment */
	assert_int_equal(ks_ptx_has_entry(ptx, "ghost_too"), 0); /* in a comment */
	assert_int_equal(ks_ptx_has_entry(ptx, "direct"), 0);	 /* a prefix */
	free(ptx);
}

static void test_unknown_kernel_fails_naming_it(void **state)
{
	char *ptx = read_fixture("nvcc_sm80.ptx");
	struct ks_ptx_descriptors d;
	struct ks_error err = { "" };

	(void)state;
	assert_int_equal(ks_ptx_kernel_descriptors(ptx, "_Z6do_mmaPfPKjS1_", &d, &err), -1);
	assert_non_null(strstr(err.msg, "'_Z6do_mmaPfPKjS1_'"));
	free(ptx);
}

static void test_malformed_ptx_fails_with_line(void **state)
{
	static const char ptx[] = ".version 8.0\n"
				  ".target sm_80\n"
				  ".visible .entry k()\n"
				  "{\n"
				  "\tret;\n";
	struct ks_ptx_descriptors d;
	struct ks_error err = { "" };
	char **names;
	size_t count;

	(void)state;
	assert_int_equal(ks_ptx_kernel_descriptors(ptx, "k", &d, &err), -1);
	assert_non_null(strstr(err.msg, "line 4"));
	assert_int_equal(ks_ptx_mutable_globals(ptx, &names, &count, &err), -1);
	assert_null(names);
	assert_int_equal(count, 0);
	assert_int_equal(ks_ptx_has_entry(ptx, "k"), 0);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(ks_tensor_cores_name(KS_TC_NONE), "none");
	assert_string_equal(ks_tensor_cores_name(KS_TC_MMA), "mma");
	assert_string_equal(ks_tensor_cores_name(KS_TC_WGMMA), "wgmma");
	assert_string_equal(ks_async_copy_name(KS_ASYNC_NONE), "none");
	assert_string_equal(ks_async_copy_name(KS_ASYNC_CP_ASYNC), "cp.async");
	assert_string_equal(ks_async_copy_name(KS_ASYNC_TMA), "tma");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sm80_loads_cp_async_and_mma),
		cmocka_unit_test(test_sm90a_wgmma_and_tma),
		cmocka_unit_test(test_calls_reach_funcs_and_indirect_calls_reach_all),
		cmocka_unit_test(test_nvcc_globals_skip_constant),
		cmocka_unit_test(test_nvrtc_globals_skip_toolchain_tables),
		cmocka_unit_test(test_edge_globals_every_form),
		cmocka_unit_test(test_has_entry),
		cmocka_unit_test(test_unknown_kernel_fails_naming_it),
		cmocka_unit_test(test_malformed_ptx_fails_with_line),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
