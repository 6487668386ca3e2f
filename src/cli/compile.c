/*
 * compile.c - `ksearch compile`: NVRTC resource report and descriptors.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "ksearch/base/json.h"
#include "ksearch/compile/build.h"
#include "ksearch/evaluate/result.h"
#include "ksearch/op/candidate.h"
#include "ksearch/op/op.h"
#include "ksearch/base/util.h"

enum { EXIT_CANDIDATE_BAD = 3 };

static const struct ks_help help = {
	.usage = "ksearch compile FILE.cu --op NAME [--param K=V ...] [--all-params] [--arch sm_XX] [--json]",
	.description = "Check a candidate against an operator and compile it with NVRTC, without\n"
		       "running it.  The ksearch block is validated (arguments, expressions and\n"
		       "launch limits for every workload of the op), the source is compiled for\n"
		       "the given architecture (else GPU 0's, else sm_90a), and for each kernel\n"
		       "the report gives: registers, static and dynamic shared memory, stack,\n"
		       "spills; tensor-core use (none/mma/wgmma) and async copies (none/cp.async/\n"
		       "TMA) read from the PTX; the widest global load; and the theoretical\n"
		       "occupancy from the architecture's limits for the launch's block size and\n"
		       "shared memory.  Then the candidate's MAP-Elites descriptors and its cell.\n"
		       "\n"
		       "Without --param the default params are used (the block's \"start\", else the\n"
		       "first value of each); --param changes some; --all-params compiles every\n"
		       "combination and prints one row each.",
	.examples =
		"  ksearch compile operators/gqa/seeds/split_kv.cu --op gqa\n"
		"  ksearch compile operators/gqa/seeds/split_kv.cu --op gqa --param SPLITS=8 --arch sm_80\n"
		"  ksearch compile my_kernel.cu --op gqa --all-params --json > report.json\n",
	.exit_codes = "  3  the candidate (or one of its param combinations) is not ok: compile_error,\n"
		      "     contract_error or refused; the evidence is printed\n",
};

static void print_report(const struct ks_candidate *cand, const struct ks_op *op, const struct ks_build *b)
{
	int cell[16];

	printf("%-18s %5s %8s %8s %6s %11s %7s  %-28s %-6s %-9s %s\n", "kernel", "regs", "smem.st",
	       "smem.dyn", "stack", "spill st/ld", "threads", "occupancy", "tensor", "async", "load");
	for (size_t i = 0; i < b->n_launches; i++) {
		const struct ks_launch_report *r = &b->launches[i];
		char occ[64], spills[32];

		snprintf(occ, sizeof(occ), "%3.0f%% (%d/%d warps, %s)", 100.0 * r->occupancy.fraction,
			 r->occupancy.active_warps, b->limits.max_warps_per_sm,
			 ks_occupancy_limit_name(r->occupancy.limit));
		snprintf(spills, sizeof(spills), "%d/%d", r->res.spill_stores, r->res.spill_loads);
		printf("%-18s %5d %8d %8lld %6d %11s %7lld  %-28s %-6s %-9s %d B\n", r->kernel,
		       r->res.registers, r->res.static_smem, (long long)r->dynamic_smem, r->res.stack_bytes,
		       spills, (long long)r->threads, occ, ks_tensor_cores_name(r->desc.tensor_cores),
		       ks_async_copy_name(r->desc.async_copy), r->desc.widest_load_bytes);
	}
	printf("\ndescriptors:");
	for (int d = 0; d < KS_DESC_COUNT; d++)
		if (!ks_descriptor_is_measured((enum ks_descriptor)d))
			printf(" %s=%g", ks_descriptor_name((enum ks_descriptor)d), b->descriptors[d]);
	/* the profiler's descriptors: what stands in for them until a candidate is timed and profiled */
	printf("\nmeasured:    ");
	for (int d = 0; d < KS_DESC_COUNT; d++)
		if (ks_descriptor_is_measured((enum ks_descriptor)d))
			printf(" %s=%g (until profiled: %s%s)", ks_descriptor_name((enum ks_descriptor)d),
			       b->descriptors[d], ks_descriptor_stand_in((enum ks_descriptor)d),
			       d == KS_DESC_DRAM_FRACTION ? ", known once timed" : "");
	ks_build_cell(op, b->descriptors, cell);
	printf("\ncell:       ");
	for (size_t g = 0; g < op->n_grid && g < 16; g++) {
		const struct ks_grid_axis *axis = &op->grid[g];

		if (cell[g] < 0)
			printf(" %s outside the grid", ks_descriptor_name(axis->descriptor));
		else
			printf(" %s [%g, %g)", ks_descriptor_name(axis->descriptor), axis->edges[cell[g]],
			       axis->edges[cell[g] + 1]);
	}
	printf("\n");
	(void)cand;
}

/* The build's result as every command writes one (result.h), with the file, op, params and cell. */
static json_t *report_json(const struct ks_candidate *cand, const struct ks_op *op, const int64_t *params,
			   const char *arch, const struct ks_build *b, const char *evidence)
{
	json_t *obj = json_object(), *pj = json_object();
	struct ks_result res;

	ks_result_init(&res);
	if (b->verdict == KS_VERDICT_OK)
		ks_result_set_build(&res, b);
	else
		ks_result_fail(&res, b->verdict, "%s", evidence);
	snprintf(res.arch, sizeof(res.arch), "%s", arch);
	for (size_t i = 0; i < cand->n_params; i++)
		json_object_set_new(pj, cand->params[i].name, json_integer(params[i]));
	json_object_set_new(obj, "file", ks_json_text(cand->path));
	json_object_set_new(obj, "op", json_string(op->key));
	json_object_set_new(obj, "params", pj);
	ks_result_to_json_into(&res, obj);
	if (b->verdict == KS_VERDICT_OK) {
		json_t *cellj = json_object();
		int cell[16];

		ks_build_cell(op, b->descriptors, cell);
		for (size_t g = 0; g < op->n_grid && g < 16; g++)
			json_object_set_new(cellj, ks_descriptor_name(op->grid[g].descriptor),
					    json_integer(cell[g]));
		json_object_set_new(obj, "cell", cellj);
	}
	ks_result_release(&res);
	return obj;
}

/* One row of the --all-params table. */
static void print_row(const struct ks_candidate *cand, const int64_t *params, const struct ks_build *b,
		      const char *evidence)
{
	char pbuf[256];
	int regs = 0, spills = 0;

	ks_params_format(cand, params, pbuf, sizeof(pbuf));
	if (b->verdict != KS_VERDICT_OK) {
		char first[160];
		const char *nl = strchr(evidence, '\n');

		snprintf(first, sizeof(first), "%.*s", nl ? (int)(nl - evidence) : (int)strlen(evidence),
			 evidence);
		printf("%-40s %-14s %s\n", pbuf, ks_verdict_name(b->verdict), first);
		return;
	}
	for (size_t i = 0; i < b->n_launches; i++) {
		if (b->launches[i].res.registers > regs)
			regs = b->launches[i].res.registers;
		spills += b->launches[i].res.spill_stores + b->launches[i].res.spill_loads;
	}
	printf("%-40s %-14s regs=%-3d smem=%-7g occupancy=%-5.2f spills=%-5d load=%gB tensor=%s async=%s\n",
	       pbuf, "ok", regs, b->descriptors[KS_DESC_SMEM_BYTES], b->descriptors[KS_DESC_OCCUPANCY],
	       spills, b->descriptors[KS_DESC_LOAD_WIDTH],
	       ks_tensor_cores_name((enum ks_tensor_cores)b->descriptors[KS_DESC_TENSOR_CORES]),
	       ks_async_copy_name((enum ks_async_copy)b->descriptors[KS_DESC_ASYNC_COPY]));
}

int cmd_compile(int argc, char **argv)
{
	const char *op_name = NULL, *arch_given = NULL;
	struct ks_opt_list param = { 0 };
	int all_params = 0, json = 0;
	struct ks_option opts[] = {
		KS_OPT_STRING(0, "op", &op_name, "NAME", "the operator the candidate implements (required)"),
		KS_OPT_LIST('p', "param", &param, "K=V",
			    "set a param (repeatable); others take their default (start or first value)"),
		KS_OPT_BOOL(0, "all-params", &all_params, "compile every combination of the params"),
		KS_OPT_STRING(0, "arch", &arch_given, "sm_XX",
			      "target architecture (default: GPU 0's, else sm_90a)"),
		KS_OPT_BOOL(0, "json", &json, "print JSON instead of text"),
		KS_OPT_END,
	};
	struct ks_op op = { 0 };
	struct ks_candidate cand = { 0 };
	const char **positional = NULL;
	size_t n_positional, combos = 1;
	struct ks_error err;
	struct ks_arch_limits limits;
	int64_t *params = NULL;
	char arch_buf[32], *source = NULL;
	const char *arch, *arch_why;
	json_t *all = NULL;
	int rc, ret = KS_EXIT_OK;

	rc = ks_opts_parse("compile", opts, &help, argc, argv, &positional, &n_positional);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	if (n_positional != 1) {
		if (n_positional)
			ret = ks_cli_usage("compile", "expected one candidate file, got %zu", n_positional);
		else
			ret = ks_cli_usage("compile", "expected a candidate file (FILE.cu)");
		goto cleanup;
	}
	if (!op_name) {
		ret = ks_cli_usage("compile", "--op NAME is required (see `ksearch ops`)");
		goto cleanup;
	}
	if (param.n && all_params) {
		ret = ks_cli_usage("compile", "--param and --all-params do not go together");
		goto cleanup;
	}
	if (arch_given && ks_arch_limits(arch_given, &limits, &err) < 0) {
		ret = ks_cli_usage("compile", "--arch %s: %s", arch_given, err.msg);
		goto cleanup;
	}
	if (ks_op_find(op_name, &op, &err) < 0) {
		ks_cli_error("compile", "%s", err.msg);
		ret = KS_EXIT_FAILED;
		goto cleanup;
	}
	/* a file that cannot be read is no candidate (exit 1); one that breaks the contract is (exit 3) */
	rc = ks_candidate_read(positional[0], &source, &err);
	if (rc < 0) {
		ks_cli_error("compile", "%s", err.msg);
		ret = KS_EXIT_FAILED;
		goto cleanup;
	}
	arch = ks_cli_pick_arch(arch_given, arch_buf, sizeof(arch_buf), &arch_why);
	if (json)
		all = json_array();
	if (rc > 0 || ks_candidate_parse(positional[0], source, &cand, &err) < 0 ||
	    ks_candidate_bind(&cand, &op, &err) < 0) {
		ret = EXIT_CANDIDATE_BAD;
		if (all) {
			json_t *obj = json_pack("{s:o, s:s, s:{}}", "file", ks_json_text(positional[0]), "op",
						op.key, "params");
			struct ks_result res;

			ks_result_init(&res);
			ks_result_fail(&res, KS_VERDICT_CONTRACT_ERROR, "%s", err.msg);
			snprintf(res.arch, sizeof(res.arch), "%s", arch);
			ks_result_to_json_into(&res, obj);
			ks_result_release(&res);
			json_array_append_new(all, obj);
		} else {

			printf("%s: op %s, %s (%s)\n\nverdict:     contract_error\n\n%s\n", positional[0],
			       op.key, arch, arch_why, err.msg);
		}
		goto print_json;
	}
	params = ks_calloc(cand.n_params ? cand.n_params : 1, sizeof(*params));
	ks_params_first(&cand, params);
	if (ks_params_assign(&cand, param.items, param.n, params, &err) < 0) {
		ret = ks_cli_usage("compile", "%s", err.msg);
		goto cleanup;
	}
	/* params the user chose; a candidate with no allowed combination at all is a contract_error below */
	if (param.n && !ks_params_allowed(&cand, params, err.msg, sizeof(err.msg))) {
		ret = ks_cli_usage("compile", "%s: %s: the candidate's constraints rule these params out",
				   cand.path, err.msg);
		goto cleanup;
	}
	if (all_params)
		combos = ks_params_count(&cand);
	if (all_params && !ks_params_count_allowed(&cand))
		combos = 1; /* none allowed: the first one's contract_error says why */
	if (!all && all_params)
		printf("%s: %zu param combinations meet the constraints (of %zu), op %s, %s (%s)\n\n",
		       cand.path, ks_params_count_allowed(&cand), combos, op.key, arch, arch_why);
	for (size_t c = 0; c < combos; c++) {
		struct ks_build build;
		char pbuf[256];

		if (combos > 1) {
			ks_params_nth(&cand, c, params);
			if (!ks_params_allowed(&cand, params, NULL, 0))
				continue; /* ruled out before compilation: not a failure */
		}

		ks_error_clear(&err);
		if (ks_build(&cand, &op, params, arch, KS_BUILD_ISOLATED, &build, &err) < 0) {
			ks_cli_error("compile", "%s", err.msg);
			ks_build_release(&build);
			ret = KS_EXIT_FAILED;
			goto cleanup;
		}
		if (build.verdict != KS_VERDICT_OK)
			ret = EXIT_CANDIDATE_BAD;
		if (all) {
			json_array_append_new(all, report_json(&cand, &op, params, arch, &build, err.msg));
		} else if (all_params) {
			print_row(&cand, params, &build, err.msg);
		} else {
			ks_params_format(&cand, params, pbuf, sizeof(pbuf));
			printf("%s: op %s, %s (%s), %s\n\n", cand.path, op.key, arch, arch_why, pbuf);
			if (build.verdict == KS_VERDICT_OK) {
				print_report(&cand, &op, &build);
				printf("verdict:     ok\n");
			} else {
				printf("verdict:     %s\n\n%s\n", ks_verdict_name(build.verdict), err.msg);
			}
		}
		ks_build_release(&build);
	}
print_json:
	if (all) {
		json_t *out = all_params ? json_incref(all) : json_incref(json_array_get(all, 0));

		ks_cli_json_print(out, JSON_INDENT(2));
		json_decref(out);
	}
cleanup:
	json_decref(all);
	free(params);
	free(source);
	free(positional);
	ks_candidate_release(&cand);
	ks_op_release(&op);
	ks_opts_release(opts);
	return ret;
}
