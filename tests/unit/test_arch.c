/*
 * test_arch.c - architecture limits and theoretical occupancy.
 *
 * The occupancy vectors were produced by cudaOccMaxActiveBlocksPerMultiprocessor()
 * from CUDA 13.0's cuda_occupancy.h, given the same limits as our table
 * (dynamic shared memory with the opt-in, one barrier, default carveout).
 * A sweep of 160,160 cases over every architecture in the table agreed
 * with ks_occupancy_compute() on blocks per SM and on the limiting factor.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "ksearch/compile/arch.h"

struct occupancy_case {
	const char *arch;
	int threads, regs;
	size_t smem;
	int blocks, warps;
	enum ks_occupancy_limit limit;
};

static const struct occupancy_case cases[] = {
	/* 8 warps x 8 blocks fill Hopper's 64 warp slots exactly */
	{ "sm_90", 256, 32, 0, 8, 64, KS_LIMIT_WARPS },
	/* 72 regs -> 2304 per warp; 16384 per scheduler / 2304 = 7 warps x 4 = 28 */
	{ "sm_90", 128, 72, 0, 7, 28, KS_LIMIT_REGISTERS },
	{ "sm_90", 128, 128, 16384, 4, 16, KS_LIMIT_REGISTERS },
	{ "sm_90", 1024, 64, 0, 1, 32, KS_LIMIT_REGISTERS },
	/* 100000 + 1 KiB reserved -> 101120 bytes; 233472 / 101120 = 2 */
	{ "sm_90", 256, 40, 100000, 2, 16, KS_LIMIT_SMEM },
	{ "sm_90", 32, 16, 0, 32, 32, KS_LIMIT_BLOCKS },
	/* the whole opt-in maximum and no registers at all */
	{ "sm_90a", 128, 0, 232448, 1, 4, KS_LIMIT_SMEM },
	{ "sm_80", 256, 32, 49153, 3, 24, KS_LIMIT_SMEM },
	{ "sm_80", 128, 96, 0, 5, 20, KS_LIMIT_REGISTERS },
	{ "sm_80", 96, 40, 16384, 9, 27, KS_LIMIT_SMEM },
	{ "sm_80", 64, 255, 0, 4, 8, KS_LIMIT_REGISTERS },
	{ "sm_80", 1024, 32, 166912, 1, 32, KS_LIMIT_SMEM },
	{ "sm_86", 512, 32, 0, 3, 48, KS_LIMIT_WARPS },
	{ "sm_86", 256, 64, 40000, 2, 16, KS_LIMIT_SMEM },
	{ "sm_89", 64, 24, 0, 24, 48, KS_LIMIT_WARPS },
	/* Turing: 256-byte smem units, no reservation, 32 warps */
	{ "sm_75", 256, 32, 32768, 2, 16, KS_LIMIT_SMEM },
	{ "sm_75", 1024, 64, 0, 1, 32, KS_LIMIT_WARPS },
	{ "sm_70", 160, 48, 1000, 8, 40, KS_LIMIT_REGISTERS },
	{ "sm_120", 384, 80, 20000, 2, 24, KS_LIMIT_REGISTERS },
	{ "sm_100a", 256, 168, 0, 1, 8, KS_LIMIT_REGISTERS },
};

static void test_occupancy_matches_cuda_occupancy_h(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct occupancy_case *c = &cases[i];
		struct ks_arch_limits lim;
		struct ks_occupancy occ;
		struct ks_error err = { "" };

		if (ks_arch_limits(c->arch, &lim, &err))
			fail_msg("%s", err.msg);
		if (ks_occupancy_compute(&lim, c->threads, c->regs, c->smem, &occ, &err))
			fail_msg("%s %d threads %d regs %zu smem: %s", c->arch, c->threads, c->regs, c->smem,
				 err.msg);
		if (occ.blocks_per_sm != c->blocks || occ.active_warps != c->warps || occ.limit != c->limit)
			fail_msg("%s %d threads %d regs %zu smem: got %d blocks %d warps (%s), "
				 "expected %d blocks %d warps (%s)",
				 c->arch, c->threads, c->regs, c->smem, occ.blocks_per_sm, occ.active_warps,
				 ks_occupancy_limit_name(occ.limit), c->blocks, c->warps,
				 ks_occupancy_limit_name(c->limit));
		assert_true(occ.fraction > 0.0 && occ.fraction <= 1.0);
		assert_true(occ.fraction == (double)c->warps / lim.max_warps_per_sm);
	}
}

static void expect_failure(const char *arch, int threads, int regs, size_t smem, const char *const *words)
{
	struct ks_arch_limits lim;
	struct ks_occupancy occ;
	struct ks_error err = { "" };

	assert_int_equal(ks_arch_limits(arch, &lim, &err), 0);
	assert_int_equal(ks_occupancy_compute(&lim, threads, regs, smem, &occ, &err), -1);
	for (; *words; words++)
		if (!strstr(err.msg, *words))
			fail_msg("'%s' does not mention '%s'", err.msg, *words);
}

static void test_impossible_launches_fail_with_numbers(void **state)
{
	static const char *const threads[] = { "1025", "1024", "sm_90", NULL };
	static const char *const regs[] = { "256", "255", NULL };
	static const char *const smem[] = { "232449", "232448", NULL };
	static const char *const smem_turing[] = { "65537", "65536", "sm_75", NULL };
	/* 1024 x 65 regs: 2304 per warp x 32 warps = 73728 > 65536 */
	static const char *const reg_file[] = { "73728", "65536", NULL };
	/*
	 * 9 warps x 216 regs: 6912 x 9 = 62208 would fit, but the launch check
	 * rounds the warps up to 12 (4 schedulers): 82944.  cuda_occupancy.h
	 * gives 0 blocks here too.
	 */
	static const char *const schedulers[] = { "82944", "65536", NULL };
	static const char *const none[] = { "at least one thread", NULL };

	(void)state;
	expect_failure("sm_90", 1025, 32, 0, threads);
	expect_failure("sm_90", 128, 256, 0, regs);
	expect_failure("sm_90", 128, 32, 232449, smem);
	expect_failure("sm_75", 128, 32, 65537, smem_turing);
	expect_failure("sm_90", 1024, 65, 0, reg_file);
	expect_failure("sm_90", 288, 216, 0, schedulers);
	expect_failure("sm_90", 0, 32, 0, none);
}

static void test_limits_table(void **state)
{
	struct ks_arch_limits lim;
	struct ks_error err = { "" };

	(void)state;
	assert_int_equal(ks_arch_limits("sm_90a", &lim, &err), 0);
	assert_string_equal(lim.arch, "sm_90a");
	assert_int_equal(lim.major, 9);
	assert_int_equal(lim.minor, 0);
	assert_int_equal(lim.max_warps_per_sm, 64);
	assert_int_equal(lim.smem_per_sm, 228 * 1024);
	assert_int_equal(lim.max_smem_per_block, 227 * 1024);
	assert_int_equal(lim.smem_reserved_per_block, 1024);
	assert_int_equal(lim.smem_alloc_unit, 128);

	assert_int_equal(ks_arch_limits("sm_86", &lim, &err), 0);
	assert_int_equal(lim.max_threads_per_sm, 1536);
	assert_int_equal(lim.max_blocks_per_sm, 16);
	assert_int_equal(lim.max_smem_per_block, 99 * 1024);

	assert_int_equal(ks_arch_limits("sm_70", &lim, &err), 0);
	assert_int_equal(lim.smem_alloc_unit, 256);
	assert_int_equal(lim.smem_reserved_per_block, 0);

	assert_int_equal(ks_arch_limits("sm_120", &lim, &err), 0);
	assert_int_equal(lim.max_warps_per_sm, 48);
	assert_int_equal(lim.max_blocks_per_sm, 24);

	assert_int_equal(ks_arch_limits("sm_100f", &lim, &err), 0);
	assert_int_equal(lim.major, 10);
}

static void test_unknown_arch_lists_known_ones(void **state)
{
	struct ks_arch_limits lim;
	struct ks_error err = { "" };
	static const char *const unknown[] = { "sm_91", "sm_80a", "sm_9", "sm_900", "compute_90", "", NULL };

	(void)state;
	for (const char *const *arch = unknown; *arch; arch++) {
		assert_int_equal(ks_arch_limits(*arch, &lim, &err), -1);
		assert_non_null(strstr(err.msg, "unknown architecture"));
		assert_non_null(strstr(err.msg, "sm_90a"));
	}
	assert_int_equal(ks_arch_limits(NULL, &lim, &err), -1);
}

static void test_every_known_arch_resolves(void **state)
{
	char known[512];
	char *save = NULL;

	(void)state;
	strncpy(known, ks_arch_known(), sizeof(known) - 1);
	known[sizeof(known) - 1] = '\0';
	for (char *arch = strtok_r(known, ", ", &save); arch; arch = strtok_r(NULL, ", ", &save)) {
		struct ks_arch_limits lim;
		struct ks_error err = { "" };

		if (ks_arch_limits(arch, &lim, &err))
			fail_msg("%s: %s", arch, err.msg);
		assert_string_equal(lim.arch, arch);
		assert_int_equal(lim.max_warps_per_sm * 32, lim.max_threads_per_sm);
		assert_true(lim.max_smem_per_block + lim.smem_reserved_per_block <= lim.smem_per_sm);
	}
}

static void test_limit_names(void **state)
{
	(void)state;
	assert_string_equal(ks_occupancy_limit_name(KS_LIMIT_WARPS), "warps");
	assert_string_equal(ks_occupancy_limit_name(KS_LIMIT_BLOCKS), "blocks");
	assert_string_equal(ks_occupancy_limit_name(KS_LIMIT_REGISTERS), "registers");
	assert_string_equal(ks_occupancy_limit_name(KS_LIMIT_SMEM), "shared memory");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_occupancy_matches_cuda_occupancy_h),
		cmocka_unit_test(test_impossible_launches_fail_with_numbers),
		cmocka_unit_test(test_limits_table),
		cmocka_unit_test(test_unknown_arch_lists_known_ones),
		cmocka_unit_test(test_every_known_arch_resolves),
		cmocka_unit_test(test_limit_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
