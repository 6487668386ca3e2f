/*
 * evolve.c - `ksearch evolve`: the search loop.
 *
 * The loop itself (parents from the grid, built-in mutation, compile pool,
 * GPU workers, archive) is not built yet; until it is, this command checks
 * what it can (the operator, its seeds compile) and says plainly what is
 * missing, so the README's first command is honest on every machine.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "ksearch/build.h"
#include "ksearch/candidate.h"
#include "ksearch/op.h"
#include "ksearch/util.h"

static const struct ks_help help = {
	.usage = "ksearch evolve --op NAME [--arch sm_XX]",
	.description =
		"Search for faster kernels of an operator, starting from its seeds.\n"
		"\n"
		"Not yet: the search loop (issue \"ksearch evolve: the search loop with the\n"
		"built-in mutator\") needs the GPU evaluator and the archive, which are not\n"
		"built yet.  For now this command loads the operator and compiles every\n"
		"seed with its first params, then stops with exit code 4.",
	.examples = "  ksearch evolve --op gqa\n",
	.exit_codes = "  4  not yet: the search loop is not implemented\n",
};

int cmd_evolve(int argc, char **argv)
{
	struct ks_opt opts[] = {
		{ "op", 0, KS_OPT_VALUE, "NAME", "the operator to search (see `ksearch ops`)", 0, 0, 0, 0 },
		{ "arch", 0, KS_OPT_VALUE, "sm_XX", "target architecture (default: GPU 0's, else sm_90a)", 0, 0, 0, 0 },
		{ 0 },
	};
	const char **positional;
	size_t n_positional;
	struct ks_op op;
	struct ks_error err;
	char arch_buf[32];
	const char *arch, *why;
	int rc, ret = 4;

	rc = ks_opts_parse("evolve", opts, &help, argc, argv, &positional, &n_positional);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	free(positional);
	if (n_positional || !opts[0].set) {
		ks_opts_release(opts);
		return ks_cli_usage("evolve", "expected --op NAME and no other arguments");
	}
	if (ks_op_find(opts[0].value, &op, &err) < 0) {
		ks_cli_error("evolve", "%s", err.msg);
		ks_opts_release(opts);
		return KS_EXIT_FAILED;
	}
	arch = ks_cli_pick_arch(opts[1].value, arch_buf, sizeof(arch_buf), &why);
	printf("ksearch evolve: operator %s (%s), %zu seeds, %s (%s)\n", op.key, op.name, op.n_seeds, arch, why);
	for (size_t i = 0; i < op.n_seeds; i++) {
		struct ks_candidate cand;
		struct ks_build build;
		int64_t params[64];

		if (ks_candidate_load(op.seed_paths[i], &cand, &err) < 0 ||
		    ks_candidate_bind(&cand, &op, &err) < 0 || cand.n_params > 64) {
			printf("  %-40s cannot be read: %s\n", op.seed_paths[i], err.msg);
			ks_candidate_release(&cand);
			ret = KS_EXIT_FAILED;
			continue;
		}
		ks_params_first(&cand, params);
		if (ks_build(&cand, &op, params, arch, KS_BUILD_ISOLATED, &build, &err) < 0 || build.verdict != KS_VERDICT_OK) {
			printf("  %-40s %s: %s\n", op.seed_paths[i], ks_verdict_name(build.verdict), err.msg);
			ret = KS_EXIT_FAILED;
		} else {
			printf("  %-40s compiles (%zu launches, occupancy %.2f)\n", op.seed_paths[i],
			       build.n_launches, build.descriptors[KS_DESC_OCCUPANCY]);
		}
		ks_build_release(&build);
		ks_candidate_release(&cand);
	}
	fprintf(stderr,
		"\nksearch evolve: not yet: the search loop (GPU evaluator, archive and mutation)\n"
		"is not implemented in this version; the seeds above were only compiled.\n"
		"What works now: `ksearch ops`, `ksearch compile`, `ksearch doctor`.\n");
	ks_op_release(&op);
	ks_opts_release(opts);
	return ret;
}
