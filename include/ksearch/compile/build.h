/*
 * build.h - from a candidate, an op and a choice of params to a checked
 * module: compile with NVRTC, apply the contract's static checks, and
 * measure what can be measured without a GPU.
 *
 * ks_build() is the one path every candidate takes before it may reach a
 * GPU.  Its verdict is KS_VERDICT_OK or the first failure met, in order:
 *   contract_error  a launch plan that cannot be resolved for some
 *                   workload (bad expression, out-of-range grid or block)
 *   refused         a directive that would make the compiler read a file
 *                   other than the toolkit's headers (includes.h), before
 *                   NVRTC runs
 *   compile_error   NVRTC's log, with the user's line numbers
 *   contract_error  a launch naming a kernel the source does not define;
 *                   a launch whose arguments do not match the kernel's
 *                   parameters in number or kind, or whose blocks exceed
 *                   its __launch_bounds__ (or differ from its .reqntid)
 *   refused         a call to an external function other than printf and
 *                   assert (device malloc/free); a .global or .const
 *                   variable a store can reach (ptx.h); a launch needing
 *                   more registers, threads or shared memory than the
 *                   architecture has
 * and err->msg holds the evidence.  The report gives, per launch, ptxas's
 * resources, the PTX descriptors and the theoretical occupancy, and for
 * the candidate the MAP-Elites descriptors (enum ks_descriptor).
 */
#ifndef KSEARCH_BUILD_H
#define KSEARCH_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/compile/arch.h"
#include "ksearch/op/candidate.h"
#include "ksearch/base/error.h"
#include "ksearch/compile/nvrtc.h"
#include "ksearch/op/op.h"
#include "ksearch/compile/ptx.h"
#include "ksearch/op/verdict.h"

struct ks_launch_report {
	const char *kernel; /* borrowed from the candidate */
	struct ks_kernel_resources res;
	struct ks_ptx_descriptors desc;
	int64_t threads;      /* per block (largest over benchmark workloads) */
	int64_t dynamic_smem; /* bytes (largest over benchmark workloads) */
	int64_t smem;	      /* static + dynamic */
	struct ks_occupancy occupancy;
};

struct ks_build {
	enum ks_verdict verdict;
	struct ks_arch_limits limits;
	struct ks_compile_result compiled;
	struct ks_launch_report *launches; /* n_launches, valid when verdict is ok */
	size_t n_launches;
	double descriptors[KS_DESC_COUNT];
	/*
	 * Every module-scope .global/.const variable (valid when verdict is
	 * ok): the evaluator checks that none of them changes while it runs.
	 */
	char **variables;
	size_t n_variables;
	/*
	 * What the GPU would run, as a SHA-256 (valid when verdict is ok): the
	 * architecture, the cubin, the launch plan and scratch as written and
	 * the params they refer to.  Two builds with equal fingerprints behave
	 * alike on every workload, so the search evaluates one of them.
	 */
	unsigned char binary[32];
};

enum ks_build_flags {
	/* compile in a killable child process (compiler.h) instead of in-process */
	KS_BUILD_ISOLATED = 1 << 0,
};

/*
 * Build cand (bound to op) with params for arch.  Returns 0 when a verdict
 * was reached (ok or not: see out->verdict and err) and -1 only when
 * ksearch itself could not work (NVRTC missing, unknown architecture, no
 * process could be started): whatever the candidate's text or PTX does
 * is its verdict (PTX the checks cannot read is refused), so a search
 * or a batch goes on past it.
 */
int ks_build(const struct ks_candidate *cand, const struct ks_op *op, const int64_t *params, const char *arch,
	     unsigned flags, struct ks_build *out, struct ks_error *err);
void ks_build_release(struct ks_build *build);

/* The grid cell index of each grid axis for these descriptors (-1: outside the edges). */
void ks_build_cell(const struct ks_op *op, const double *descriptors, int *cell);

#endif
