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
#include <time.h>

#include "ksearch/base/util.h"
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
	 * The __constant__ table is only read; __device__ const int k_three
	 * was folded, so no instruction names it; buf is read at run time
	 * through an address, but no store can reach it.
	 */
	static const char *const sm80[] = { "counter", "managed_flag" };

	(void)state;
	check_globals("nvcc_sm80.ptx", sm80, sizeof(sm80) / sizeof(sm80[0]));
	check_globals("nvcc_sm90a.ptx", NULL, 0);
}

static void test_nvrtc_globals_skip_toolchain_tables(void **state)
{
	/*
	 * With -default-device, const and constexpr namespace arrays become
	 * .global; indexed at run time, their address is taken, but only ever
	 * loaded through, so they cannot change: read-only tables are fine.
	 * So are kconst (folded), $str (printf's format) and
	 * __cudart_i2opi_f (sinf's table, loaded in a loop).
	 */
	static const char *const expected[] = { "hidden", "ticket" };

	(void)state;
	check_globals("nvrtc_globals_sm80.ptx", expected, sizeof(expected) / sizeof(expected[0]));
}

static void test_edge_globals_every_form(void **state)
{
	/*
	 * Not reported: pair_a and ro_only (only loaded by name), fn_table
	 * (loaded), ext_buf and managed_flag (their addresses are taken but
	 * reach no store), never_used and alias_of_aliased (never mentioned),
	 * the .const table (only declared) and the .shared and commented-out
	 * declarations.  aliased counts: its address initializes
	 * alias_of_aliased.
	 */
	static const char *const expected[] = {
		"counter",
		"pair_b",
		"weak_total",
		"aliased",
	};

	(void)state;
	check_globals("edge_sm100a.ptx", expected, sizeof(expected) / sizeof(expected[0]));
}

static void test_state_every_channel_and_what_stays_allowed(void **state)
{
	/*
	 * Reported: ctab (__constant__, written through cvta.const), asm_counter
	 * (st in inline asm), laundered (its address stored to memory, so it
	 * can come back untracked), via_atomic, $str (a string literal written
	 * through a cast) and $str$2 (a literal passed to printf's %s: its
	 * address is stored in the argument buffer, which the analysis cannot
	 * tell from laundering; refused, with the reason).  Not reported:
	 * ro_table (read at run time only) and $str$1 (printf's format).
	 */
	static const char *const expected[] = { "ctab",	      "asm_counter", "laundered",
						"via_atomic", "$str",	     "$str$2" };
	char *ptx = read_fixture("nvrtc_state_sm90a.ptx");
	struct ks_error err = { "" };
	char **names;
	size_t count;

	(void)state;
	check_globals("nvrtc_state_sm90a.ptx", expected, sizeof(expected) / sizeof(expected[0]));
	assert_int_equal(ks_ptx_forbidden_calls(ptx, &names, &count, &err), 0);
	assert_int_equal(count, 2);
	assert_string_equal(names[0], "malloc");
	assert_string_equal(names[1], "free");
	ks_ptx_names_free(names, count);
	assert_int_equal(ks_ptx_variables(ptx, &names, &count, &err), 0);
	assert_int_equal(count, 8); /* every .global and .const variable, whatever its name */
	assert_string_equal(names[1], "ro_table");
	ks_ptx_names_free(names, count);
	free(ptx);
}

/* printf and assert may be called; nothing else external. */
static void test_forbidden_calls_allow_printf_and_assert(void **state)
{
	static const char ptx[] =
		".version 8.0\n.target sm_90\n.address_size 64\n"
		".extern .func (.param .b32 func_retval0) vprintf(.param .b64 a, .param .b64 b);\n"
		".extern .func __assertfail(.param .b64 a, .param .b64 b, .param .b32 c, "
		".param .b64 d, .param .b64 e);\n"
		".extern .func (.param .b64 func_retval0) malloc(.param .b64 n);\n"
		".visible .entry k() { ret; }\n";
	struct ks_error err = { "" };
	char **names;
	size_t count;

	(void)state;
	/* malloc is declared but never named in a body: nothing calls it */
	assert_int_equal(ks_ptx_forbidden_calls(ptx, &names, &count, &err), 0);
	assert_int_equal(count, 0);
	ks_ptx_names_free(names, count);
}

/* Parameters and launch bounds, as the launch plan is checked against them. */
static void test_entry_signature_and_bounds(void **state)
{
	static const char ptx[] =
		".version 8.0\n.target sm_90\n.address_size 64\n"
		".visible .entry k(\n\t.param .u64 k_param_0,\n\t.param .f32 k_param_1,\n"
		"\t.param .u32 k_param_2,\n\t.param .align 2 .b8 k_param_3[2],\n"
		"\t.param .u64 .ptr .global .align 16 k_param_4,\n\t.param .b32 k_param_5\n)\n"
		".maxntid 256, 1, 1\n{\n\tret;\n}\n"
		".visible .entry fixed()\n.reqntid 128, 2, 1\n{\n\tret;\n}\n"
		".visible .entry plain()\n{\n\tret;\n}\n";
	struct ks_ptx_entry e;
	struct ks_error err = { "" };

	(void)state;
	assert_int_equal(ks_ptx_entry(ptx, "k", &e, &err), 0);
	assert_int_equal(e.n_params, 6);
	assert_int_equal(e.params[0].cls, KS_PTX_PARAM_INT);
	assert_int_equal(e.params[0].bytes, 8);
	assert_string_equal(e.params[0].type, "u64");
	assert_int_equal(e.params[1].cls, KS_PTX_PARAM_FLOAT);
	assert_int_equal(e.params[1].bytes, 4);
	assert_int_equal(e.params[2].cls, KS_PTX_PARAM_INT);
	assert_int_equal(e.params[3].cls, KS_PTX_PARAM_AGGREGATE);
	assert_int_equal(e.params[3].bytes, 2);
	assert_int_equal(e.params[4].bytes, 8);
	assert_int_equal(e.params[5].cls, KS_PTX_PARAM_BITS);
	assert_int_equal(e.maxntid[0] * e.maxntid[1] * e.maxntid[2], 256);
	assert_int_equal(e.reqntid[0], 0);
	ks_ptx_entry_release(&e);
	assert_int_equal(ks_ptx_entry(ptx, "fixed", &e, &err), 0);
	assert_int_equal(e.n_params, 0);
	assert_int_equal(e.reqntid[0], 128);
	assert_int_equal(e.reqntid[1], 2);
	assert_int_equal(e.reqntid[2], 1);
	ks_ptx_entry_release(&e);
	assert_int_equal(ks_ptx_entry(ptx, "plain", &e, &err), 0);
	assert_int_equal(e.maxntid[0], 0);
	ks_ptx_entry_release(&e);
	assert_int_equal(ks_ptx_entry(ptx, "nope", &e, &err), -1);
	assert_non_null(strstr(err.msg, "'nope'"));
}

/*
 * Every list the reader keeps (functions, declarations, externs, callees,
 * tainted registers, names, parameters) grows far past its first
 * allocation, and keeps what it was given, in order.
 */
static void test_lists_grow_past_their_first_allocation(void **state)
{
	enum { N = 70 };
	struct ks_strbuf sb;
	struct ks_error err = { "" };
	struct ks_ptx_descriptors d;
	struct ks_ptx_entry e;
	char **names, want[32];
	size_t count;

	(void)state;
	ks_strbuf_init(&sb);
	ks_strbuf_adds(&sb, ".version 8.0\n.target sm_90\n.address_size 64\n");
	for (int i = 0; i < N; i++)
		ks_strbuf_addf(&sb, ".global .align 4 .u32 g%d;\n.extern .func x%d();\n", i, i);
	for (int i = 0; i < N; i++)
		ks_strbuf_addf(&sb, ".func f%d()\n{\n\tret;\n}\n", i);
	ks_strbuf_adds(&sb, ".visible .entry k(");
	for (int i = 0; i < N; i++)
		ks_strbuf_addf(&sb, "%s\n\t.param .u64 k_param_%d", i ? "," : "", i);
	ks_strbuf_adds(&sb, "\n)\n{\n\t.reg .b32 %r<2>;\n\t.reg .b64 %rd<100>;\n");
	for (int i = 0; i < N; i++)
		ks_strbuf_addf(&sb,
			       "\tmov.u64 %%rd%d, g%d;\n\tst.global.u32 [%%rd%d], %%r1;\n\tcall f%d;\n"
			       "\tcall x%d;\n",
			       i, i, i, i, i);
	ks_strbuf_adds(&sb, "\tret;\n}\n");

	assert_int_equal(ks_ptx_kernel_descriptors(sb.buf, "k", &d, &err), 0);
	assert_int_equal(ks_ptx_variables(sb.buf, &names, &count, &err), 0);
	assert_int_equal(count, N);
	for (int i = 0; i < N; i++) {
		snprintf(want, sizeof(want), "g%d", i);
		assert_string_equal(names[i], want);
	}
	ks_ptx_names_free(names, count);
	/* each is stored to through a register of its own: every one is mutable */
	if (ks_ptx_mutable_globals(sb.buf, &names, &count, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(count, N);
	ks_ptx_names_free(names, count);
	assert_int_equal(ks_ptx_forbidden_calls(sb.buf, &names, &count, &err), 0);
	assert_int_equal(count, N);
	assert_string_equal(names[N - 1], "x69");
	ks_ptx_names_free(names, count);
	assert_int_equal(ks_ptx_entry(sb.buf, "k", &e, &err), 0);
	assert_int_equal(e.n_params, N);
	assert_int_equal(e.params[N - 1].bytes, 8);
	ks_ptx_entry_release(&e);
	ks_strbuf_release(&sb);
}

static double seconds_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The mutable globals of ptx, which must be found within a second (the analysis is linear). */
static size_t mutable_count_fast(const char *ptx, char ***names)
{
	struct ks_error err = { "" };
	size_t count;
	double t0 = seconds_now();

	if (ks_ptx_mutable_globals(ptx, names, &count, &err))
		fail_msg("%s", err.msg);
	if (seconds_now() - t0 > 1.0)
		fail_msg("the taint analysis took %.1f s on %zu bytes of PTX", seconds_now() - t0,
			 strlen(ptx));
	return count;
}

/*
 * A chain of N movs from a variable's address, written last to first so
 * that each register is defined after its use (the order that made the
 * old fixpoint run N passes of N instructions, each searching N registers:
 * 800 movs took 12 s); ending in a load (a read-only table) or a store.
 */
static void mov_chain(struct ks_strbuf *sb, int n, int store)
{
	ks_strbuf_adds(sb, ".version 8.0\n.target sm_90\n.address_size 64\n"
			   ".const .align 4 .b8 table[64];\n.visible .entry k(\n\t.param .u64 out\n)\n{\n");
	ks_strbuf_addf(sb, "\t.reg .b32 %%r<2>;\n\t.reg .b64 %%rd<%d>;\n", n + 2);
	if (store)
		ks_strbuf_addf(sb, "\tst.u32 [%%rd%d], %%r1;\n", n);
	else
		ks_strbuf_addf(sb, "\tld.const.u32 %%r1, [%%rd%d];\n", n);
	for (int i = n; i > 0; i--)
		ks_strbuf_addf(sb, "\tmov.u64 %%rd%d, %%rd%d;\n", i, i - 1);
	ks_strbuf_adds(sb, "\tmov.u64 %rd0, table;\n\tret;\n}\n");
}

static void test_taint_is_linear_in_a_mov_chain(void **state)
{
	struct ks_strbuf sb;
	char **names;
	size_t count;

	(void)state;
	for (int store = 0; store < 2; store++) {
		ks_strbuf_init(&sb);
		mov_chain(&sb, 20000, store);
		count = mutable_count_fast(sb.buf, &names);
		assert_int_equal(count, store);
		if (store)
			assert_string_equal(names[0], "table");
		ks_ptx_names_free(names, count);
		ks_strbuf_release(&sb);
	}
}

/*
 * Written differently: the address moves through arithmetic with several
 * sources and vector destinations, over many variables at once, each
 * chain interleaved with the others; the odd variables' chains end in an
 * atomic, the even ones' in loads.
 */
static void test_taint_is_linear_over_many_variables_and_operators(void **state)
{
	enum { VARS = 2000, STEPS = 10 };
	static const char *const ops[] = { "add.s64 %%rd%d, %%rd%d, 4;", "cvta.const.u64 %%rd%d, %%rd%d;",
					   "selp.b64 %%rd%d, %%rd%d, 0, %%p1;",
					   "mad.lo.s64 %%rd%d, %%rd%d, 1, 0;" };
	struct ks_strbuf sb;
	char **names;
	size_t count;

	(void)state;
	ks_strbuf_init(&sb);
	ks_strbuf_adds(&sb, ".version 8.0\n.target sm_90\n.address_size 64\n");
	for (int v = 0; v < VARS; v++)
		ks_strbuf_addf(&sb, ".global .align 4 .u32 var%d[4];\n", v);
	ks_strbuf_adds(&sb, ".visible .entry k()\n{\n\t.reg .pred %p<2>;\n\t.reg .b32 %r<2>;\n");
	ks_strbuf_addf(&sb, "\t.reg .b64 %%rd<%d>;\n", VARS * (STEPS + 1));
	for (int v = 0; v < VARS; v++) {
		int last = v * (STEPS + 1) + STEPS;

		if (v % 2)
			ks_strbuf_addf(&sb, "\tatom.global.add.u32 %%r1, [%%rd%d], 1;\n", last);
		else
			ks_strbuf_addf(&sb, "\tld.global.v2.u32 {%%r0, %%r1}, [%%rd%d];\n", last);
	}
	for (int step = STEPS; step > 0; step--)
		for (int v = 0; v < VARS; v++) {
			int base = v * (STEPS + 1);

			ks_strbuf_adds(&sb, "\t");
			ks_strbuf_addf(&sb, ops[(v + step) % 4], base + step, base + step - 1);
			ks_strbuf_adds(&sb, "\n");
		}
	for (int v = 0; v < VARS; v++)
		ks_strbuf_addf(&sb, "\tmov.u64 %%rd%d, var%d;\n", v * (STEPS + 1), v);
	ks_strbuf_adds(&sb, "\tret;\n}\n");
	count = mutable_count_fast(sb.buf, &names);
	assert_int_equal(count, VARS / 2);
	assert_string_equal(names[0], "var1");
	assert_string_equal(names[count - 1], "var1999");
	ks_ptx_names_free(names, count);
	ks_strbuf_release(&sb);
}

/*
 * Written differently again: many functions, each passing a table to the
 * next through .param slots and calls, and a printf with thousands of
 * argument slots; only a table that reaches a call other than as
 * vprintf's format is mutable, and it is found as fast.
 */
static void test_taint_is_linear_through_calls_and_params(void **state)
{
	enum { FUNCS = 3000, ARGS = 5000 };
	struct ks_strbuf sb;
	char **names;
	size_t count;

	(void)state;
	ks_strbuf_init(&sb);
	ks_strbuf_adds(&sb, ".version 8.0\n.target sm_90\n.address_size 64\n"
			    ".extern .func (.param .b32 r) vprintf(.param .b64 f, .param .b64 a);\n"
			    ".global .align 1 .b8 fmt[4] = {37, 100, 10, 0};\n"
			    ".global .align 4 .u32 passed[4];\n");
	for (int f = 0; f < FUNCS; f++) {
		ks_strbuf_addf(&sb, ".func f%d(.param .b64 p)\n{\n\t.reg .b64 %%rd<4>;\n", f);
		ks_strbuf_adds(
			&sb,
			"\tld.param.u64 %rd1, [p];\n\tmov.u64 %rd2, fmt;\n\t{\n"
			"\t.param .b64 param0;\n\tst.param.b64 [param0], %rd2;\n"
			"\t.param .b64 param1;\n\tst.param.b64 [param1], %rd1;\n"
			"\t.param .b32 retval0;\n\tcall.uni (retval0), vprintf, (param0, param1);\n\t}\n");
		if (f == FUNCS - 1)
			ks_strbuf_adds(&sb,
				       "\tmov.u64 %rd3, passed;\n\t{\n\t.param .b64 param0;\n"
				       "\tst.param.b64 [param0], %rd3;\n\tcall.uni f0, (param0);\n\t}\n");
		ks_strbuf_adds(&sb, "\tret;\n}\n");
	}
	ks_strbuf_adds(&sb, ".visible .entry k()\n{\n\t.reg .b64 %rd<3>;\n\tmov.u64 %rd1, fmt;\n\t{\n");
	for (int a = 0; a < ARGS; a++)
		ks_strbuf_addf(&sb, "\t.param .b64 param%d;\n\tst.param.b64 [param%d], %%rd%d;\n", a, a,
			       a ? 2 : 1);
	ks_strbuf_adds(&sb, "\tcall.uni vprintf, (param0");
	for (int a = 1; a < ARGS; a++)
		ks_strbuf_addf(&sb, ", param%d", a);
	ks_strbuf_adds(&sb, ");\n\t}\n\tret;\n}\n");
	count = mutable_count_fast(sb.buf, &names);
	assert_int_equal(count, 1);
	assert_string_equal(names[0], "passed");
	ks_ptx_names_free(names, count);
	ks_strbuf_release(&sb);
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
		cmocka_unit_test(test_state_every_channel_and_what_stays_allowed),
		cmocka_unit_test(test_forbidden_calls_allow_printf_and_assert),
		cmocka_unit_test(test_entry_signature_and_bounds),
		cmocka_unit_test(test_has_entry),
		cmocka_unit_test(test_lists_grow_past_their_first_allocation),
		cmocka_unit_test(test_unknown_kernel_fails_naming_it),
		cmocka_unit_test(test_malformed_ptx_fails_with_line),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_taint_is_linear_in_a_mov_chain),
		cmocka_unit_test(test_taint_is_linear_over_many_variables_and_operators),
		cmocka_unit_test(test_taint_is_linear_through_calls_and_params),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
