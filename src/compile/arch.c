/*
 * arch.c - per-architecture limits and the occupancy calculator's rules.
 *
 * The limits are those the CUDA C++ Programming Guide lists per compute
 * capability and the driver reports as device attributes; the allocation
 * rules (registers per warp in units of 256, warps spread over the four
 * schedulers of an SM, shared memory in units plus a per-block reservation)
 * are those of cudaOccMaxActiveBlocksPerMultiprocessor() in the toolkit's
 * cuda_occupancy.h, with the default shared-memory carveout (the largest)
 * and one block barrier, which never limits.  Where the Programming Guide
 * and cuda_occupancy.h disagree (resident blocks per SM on sm_120: 32 in
 * the guide, 24 in the header) the header wins, since the driver's own
 * occupancy API is what the evaluator compares against.
 */
#include "ksearch/compile/arch.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define KIB 1024

/*
 * Registers are allocated per warp in each of the SM's four sub-partitions
 * (one per warp scheduler), on every architecture from Volta on.
 */
#define SUB_PARTITIONS 4
#define WARP_SIZE 32

/* Which architecture-specific variants exist: sm_90a, sm_100f ... */
enum suffixes {
	SUFFIX_A = 1 << 0,
	SUFFIX_F = 1 << 1,
};

struct arch_row {
	struct ks_arch_limits lim;
	unsigned suffixes;
};

#define ROW(name, maj, min, threads_sm, blocks, smem_sm, smem_block, unit, reserved, sfx)                    \
	{                                                                                                    \
		{ name,	    maj,   min,	    1024, threads_sm, (threads_sm) / WARP_SIZE,                      \
		  blocks,   65536, 255,	    256,  smem_sm,    smem_block,                                    \
		  48 * KIB, unit,  reserved },                                                               \
			sfx                                                                                  \
	}

static const struct arch_row arch_table[] = {
	/* Volta and Xavier: 96 KiB per SM, all of it for one block; no reservation. */
	ROW("sm_70", 7, 0, 2048, 32, 96 * KIB, 96 * KIB, 256, 0, 0),
	ROW("sm_72", 7, 2, 2048, 32, 96 * KIB, 96 * KIB, 256, 0, 0),
	/* Turing: half the warps and blocks, 64 KiB. */
	ROW("sm_75", 7, 5, 1024, 16, 64 * KIB, 64 * KIB, 256, 0, 0),
	/* From Ampere on, the driver keeps 1 KiB of every block's shared memory. */
	ROW("sm_80", 8, 0, 2048, 32, 164 * KIB, 163 * KIB, 128, 1 * KIB, 0),
	ROW("sm_86", 8, 6, 1536, 16, 100 * KIB, 99 * KIB, 128, 1 * KIB, 0),
	ROW("sm_87", 8, 7, 1536, 16, 164 * KIB, 163 * KIB, 128, 1 * KIB, 0),
	ROW("sm_89", 8, 9, 1536, 24, 100 * KIB, 99 * KIB, 128, 1 * KIB, 0),
	ROW("sm_90", 9, 0, 2048, 32, 228 * KIB, 227 * KIB, 128, 1 * KIB, SUFFIX_A),
	ROW("sm_100", 10, 0, 2048, 32, 228 * KIB, 227 * KIB, 128, 1 * KIB, SUFFIX_A | SUFFIX_F),
	ROW("sm_103", 10, 3, 2048, 32, 228 * KIB, 227 * KIB, 128, 1 * KIB, SUFFIX_A | SUFFIX_F),
	ROW("sm_120", 12, 0, 1536, 24, 100 * KIB, 99 * KIB, 128, 1 * KIB, SUFFIX_A | SUFFIX_F),
};

#define N_ARCHS (sizeof(arch_table) / sizeof(arch_table[0]))

const char *ks_arch_known(void)
{
	return "sm_70, sm_72, sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a, "
	       "sm_100, sm_100a, sm_100f, sm_103, sm_103a, sm_103f, sm_120, sm_120a, sm_120f";
}

int ks_arch_limits(const char *arch, struct ks_arch_limits *out, struct ks_error *err)
{
	size_t len = arch ? strlen(arch) : 0;

	for (size_t i = 0; i < N_ARCHS && len; i++) {
		const struct arch_row *row = &arch_table[i];
		size_t base = strlen(row->lim.arch);
		unsigned suffix = 0;

		if (strncmp(arch, row->lim.arch, base))
			continue;
		if (len == base + 1 && arch[base] == 'a')
			suffix = SUFFIX_A;
		else if (len == base + 1 && arch[base] == 'f')
			suffix = SUFFIX_F;
		else if (len != base)
			continue;
		if (suffix && !(row->suffixes & suffix))
			continue;
		*out = row->lim;
		snprintf(out->arch, sizeof(out->arch), "%s", arch);
		return 0;
	}
	return ks_fail(err, "unknown architecture '%s' (known: %s)", arch ? arch : "(null)", ks_arch_known());
}

static int round_up(int x, int unit)
{
	return (x + unit - 1) / unit * unit;
}

int ks_occupancy_compute(const struct ks_arch_limits *lim, int threads_per_block, int regs_per_thread,
			 size_t smem_bytes, struct ks_occupancy *out, struct ks_error *err)
{
	int warps_per_block, regs_per_warp, regs_checked, smem_per_block;
	int by_warps, by_regs, by_smem, blocks;

	if (threads_per_block <= 0)
		return ks_fail(err, "a block needs at least one thread (got %d)", threads_per_block);
	if (threads_per_block > lim->max_threads_per_block)
		return ks_fail(err, "%d threads per block is more than the %d %s allows", threads_per_block,
			       lim->max_threads_per_block, lim->arch);
	if (regs_per_thread < 0)
		return ks_fail(err, "a negative register count (%d) is not possible", regs_per_thread);
	if (regs_per_thread > lim->max_regs_per_thread)
		return ks_fail(err, "%d registers per thread is more than the %d %s allows", regs_per_thread,
			       lim->max_regs_per_thread, lim->arch);
	if (smem_bytes > (size_t)lim->max_smem_per_block)
		return ks_fail(err,
			       "%zu bytes of shared memory per block (static + dynamic) is more "
			       "than the %d bytes %s allows a block (with the opt-in)",
			       smem_bytes, lim->max_smem_per_block, lim->arch);

	warps_per_block = (threads_per_block + WARP_SIZE - 1) / WARP_SIZE;
	regs_per_warp = round_up(regs_per_thread * WARP_SIZE, lim->reg_alloc_unit);
	/*
	 * The launch check assumes every sub-partition gets the same number of
	 * warps, so a block of 9 warps is checked as if it had 12.  A block
	 * may use the whole register file on every architecture in the table.
	 */
	regs_checked = regs_per_warp * round_up(warps_per_block, SUB_PARTITIONS);
	if (regs_checked > lim->regs_per_sm)
		return ks_fail(err,
			       "%d threads x %d registers do not fit one block on %s: %d "
			       "registers per warp (rounded to %d) over %d warps (rounded up "
			       "to a multiple of %d schedulers) need %d registers, more than %d",
			       threads_per_block, regs_per_thread, lim->arch, regs_per_warp,
			       lim->reg_alloc_unit, warps_per_block, SUB_PARTITIONS, regs_checked,
			       lim->regs_per_sm);

	by_warps = lim->max_warps_per_sm / warps_per_block;
	by_regs = INT_MAX;
	if (regs_per_warp > 0) {
		int warps_per_sub_partition = lim->regs_per_sm / SUB_PARTITIONS / regs_per_warp;

		by_regs = warps_per_sub_partition * SUB_PARTITIONS / warps_per_block;
	}
	/* The reservation (sm_80+) is counted before rounding to the unit. */
	smem_per_block = round_up((int)smem_bytes + lim->smem_reserved_per_block, lim->smem_alloc_unit);
	by_smem = smem_per_block > 0 ? lim->smem_per_sm / smem_per_block : INT_MAX;

	/* Ties are reported in the calculator's order: warps, registers, smem, blocks. */
	blocks = by_warps;
	out->limit = KS_LIMIT_WARPS;
	if (by_regs < blocks) {
		blocks = by_regs;
		out->limit = KS_LIMIT_REGISTERS;
	}
	if (by_smem < blocks) {
		blocks = by_smem;
		out->limit = KS_LIMIT_SMEM;
	}
	if (lim->max_blocks_per_sm < blocks) {
		blocks = lim->max_blocks_per_sm;
		out->limit = KS_LIMIT_BLOCKS;
	}
	out->blocks_per_sm = blocks;
	out->active_warps = blocks * warps_per_block;
	out->fraction = (double)out->active_warps / lim->max_warps_per_sm;
	return 0;
}

const char *ks_occupancy_limit_name(enum ks_occupancy_limit limit)
{
	switch (limit) {
	case KS_LIMIT_WARPS:
		return "warps";
	case KS_LIMIT_BLOCKS:
		return "blocks";
	case KS_LIMIT_REGISTERS:
		return "registers";
	case KS_LIMIT_SMEM:
		return "shared memory";
	}
	return "unknown";
}
