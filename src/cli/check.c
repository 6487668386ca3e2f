/*
 * check.c - `ksearch check`: verify and time candidates on the GPU.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ksearch/compile/build.h"
#include "ksearch/op/candidate.h"
#include "ksearch/evaluate/backend.h"
#include "ksearch/evaluate/cuda.h"
#include "ksearch/evaluate/eval.h"
#include "ksearch/evaluate/result.h"
#include "ksearch/op/op.h"
#include "ksearch/base/util.h"

enum {
	EXIT_REJECTED = 3, /* compile_error, contract_error, refused */
	EXIT_WRONG = 4,
	EXIT_CRASH = 5, /* crash or timeout */
	EXIT_IMPLAUSIBLE = 6,
};

static const struct ks_help help = {
	.usage = "ksearch check FILE.cu... --op NAME [--param K=V ...] [--all-params] [--workload ID ...] "
		 "[--gpu "
		 "N] [--json]",
	.description = "Compile a candidate, verify it against the operator's reference on every\n"
		       "check workload (two fresh random input sets each, outputs poisoned, inputs\n"
		       "checksummed), then time it on the benchmark workloads (L2 flushed before\n"
		       "every repetition, fresh inputs, half the timed runs verified at random;\n"
		       "a workload with request lengths on three length splits drawn for the run:\n"
		       "even, skewed, uniform).  Prints per workload its time (the median; with\n"
		       "request lengths, the slowest split's median), the spread of the samples,\n"
		       "speedup over the reference and fraction of the speed-of-light floor; the\n"
		       "fitness (geometric-mean speedup); the occupancy the driver reports; and the\n"
		       "verdict with its evidence.  The candidate runs in a separate worker process:\n"
		       "a kernel that crashes or hangs costs that process, never ksearch, and the\n"
		       "next candidate (several files can be given) runs in a fresh worker.\n"
		       "\n"
		       "Each candidate is compiled before a GPU worker starts, so the static\n"
		       "verdicts (contract_error, compile_error, refused) need no GPU; without one,\n"
		       "what compiled ok is listed as not run and the command fails (exit 1).",
	.examples = "  ksearch check operators/gqa/seeds/split_kv.cu --op gqa\n"
		    "  ksearch check operators/gqa/seeds/split_kv.cu --op gqa --param SPLITS=16 --workload "
		    "b64_kv46287\n"
		    "  ksearch check my.cu --op gqa --all-params --json > results.json\n",
	.exit_codes = "  3  compile_error, contract_error or refused\n"
		      "  4  wrong (outputs differ from the reference)\n"
		      "  5  crash or timeout\n"
		      "  6  implausible (faster than the speed-of-light floor)\n"
		      "  with --all-params, the worst outcome over the combinations; 1 when a\n"
		      "  file cannot be read, or candidates that compiled could not be run (no GPU)\n",
};

static int exit_for(enum ks_verdict v)
{
	switch (v) {
	case KS_VERDICT_OK:
		return KS_EXIT_OK;
	case KS_VERDICT_COMPILE_ERROR:
	case KS_VERDICT_CONTRACT_ERROR:
	case KS_VERDICT_REFUSED:
		return EXIT_REJECTED;
	case KS_VERDICT_WRONG:
		return EXIT_WRONG;
	case KS_VERDICT_IMPLAUSIBLE:
		return EXIT_IMPLAUSIBLE;
	default:
		return EXIT_CRASH;
	}
}

static void print_result(const struct ks_candidate *cand, const int64_t *params, const struct ks_result *r,
			 const struct ks_evaluator *ev)
{
	char pbuf[256];

	ks_params_format(cand, params, pbuf, sizeof(pbuf));
	printf("%s  %s  on %s (%s)\n", cand->path, pbuf, ev->profile.name, ev->profile.arch);
	if (r->n_workloads) {
		printf("\n%-16s %10s %9s %11s %8s %10s %6s  %s\n", "workload", "time us", "spread", "ref us",
		       "speedup", "floor us", "SOL", "length splits (us)");
		for (size_t i = 0; i < r->n_workloads; i++) {
			const struct ks_result_workload *w = &r->workloads[i];

			printf("%-16s %10.2f %8.1f%% %11.2f %7.2fx %10.2f %5.0f%% ", w->id, w->median_us,
			       100.0 * (w->p90_us - w->p10_us) / w->median_us, w->ref_median_us, w->speedup,
			       w->floor_us, 100.0 * w->sol_fraction);
			for (size_t k = 0; k < w->n_splits; k++)
				printf(" %s %.2f", w->splits[k].kind, w->splits[k].median_us);
			printf("\n");
		}
		if (r->n_workloads && r->workloads[0].n_splits)
			printf("(a workload with request lengths is timed on one split of each kind, drawn "
			       "for this run; its time is the slowest split's median)\n");
		printf("\nfitness %.3f (geometric-mean speedup over the reference), speed of light %.0f%%\n",
		       r->fitness, 100.0 * r->sol_fraction);
	}
	if (r->n_launches) {
		printf("\n%-20s %8s %10s %8s %8s %10s\n", "kernel", "regs", "smem", "threads", "blocks/SM",
		       "occupancy");
		for (size_t i = 0; i < r->n_launches; i++) {
			const struct ks_result_launch *l = &r->launches[i];
			const struct ks_result_kernel *k = i < r->n_kernels ? &r->kernels[i] : NULL;

			printf("%-20s %8lld %10lld %8lld %8lld %9.0f%%\n", l->kernel,
			       (long long)(k ? k->registers : 0),
			       (long long)(k ? k->static_smem : 0) + (long long)l->dynamic_smem,
			       (long long)l->threads, (long long)l->blocks_per_sm, 100.0 * l->occupancy);
		}
	}
	printf("\nverdict: %s\n", ks_verdict_name(r->verdict));
	if (r->evidence[0])
		printf("%s\n", r->evidence);
	if (r->printf_bytes) {
		/* evidence for a person: what the kernel printed is never read as a message */
		printf("device printf, %llu bytes (the first ones):\n%s\n",
		       (unsigned long long)r->printf_bytes, r->printf_head ? r->printf_head : "");
	}

	printf("(verification %.2f s, timing %.2f s, wall %.2f s)\n\n", r->timing.verify_s, r->timing.time_s,
	       r->timing.wall_s);
}

/* What the command line asks of every file. */
struct check_args {
	struct ks_opt_list param; /* --param K=V */
	int all_params;
};

/*
 * The GPU side, started at the first candidate that builds ok: the static
 * verdicts (contract_error, compile_error, refused) need no GPU, so every
 * candidate is compiled first and a machine without one still gets them.
 */
struct gpu_side {
	struct ks_evaluator ev;
	int gpu;
	const struct ks_eval_options *eopts;
	int state;		  /* 0 not started yet, 1 running, -1 could not start */
	char arch[16];		  /* what candidates are compiled for: the GPU's, else the default */
	const char *arch_why;	  /* and why */
	char error[KS_ERROR_MAX]; /* why it could not start */
	size_t not_run;		  /* candidates that built ok and were not run for want of it */
};

static void gpu_side_init(struct gpu_side *side, int gpu, const struct ks_eval_options *eopts)
{
	const struct ks_cuda *cuda;
	struct ks_gpu_info info;
	struct ks_error err;

	memset(side, 0, sizeof(*side));
	side->gpu = gpu;
	side->eopts = eopts;
	if (ks_cuda_load(&cuda, &err) == 0 && ks_cuda_device_info(gpu, &info, &err) == 0) {
		ks_gpu_arch(&info, side->arch, sizeof(side->arch));
		side->arch_why = "the GPU's";
	} else {
		snprintf(side->arch, sizeof(side->arch), "sm_90a");
		side->arch_why = "the default: no GPU";
	}
}

/* Start the worker the first time it is needed; 0 when it runs, -1 when it cannot (side->error says why). */
static int gpu_side_ready(struct gpu_side *side)
{
	struct ks_error err;

	if (side->state == 0) {
		if (ks_evaluator_open(&side->ev, side->gpu, side->eopts, &err) < 0) {
			snprintf(side->error, sizeof(side->error), "%s", err.msg);
			side->state = -1;
		} else if (strcmp(side->ev.profile.arch, side->arch)) {
			/* the candidates were built for the architecture the driver named */
			snprintf(side->error, sizeof(side->error),
				 "GPU %d's worker reports architecture %s, the driver said %s", side->gpu,
				 side->ev.profile.arch, side->arch);
			ks_evaluator_close(&side->ev);
			side->state = -1;
		} else {
			side->state = 1;
		}
	}
	return side->state > 0 ? 0 : -1;
}

static void gpu_side_close(struct gpu_side *side)
{
	if (side->state > 0)
		ks_evaluator_close(&side->ev);
	side->state = 0;
}

/* Check every requested param combination of one file; returns its worst exit code. */
static int check_file(struct gpu_side *side, const struct ks_op *op, const char *path,
		      const struct check_args *args, json_t *all)
{
	struct ks_candidate cand = { 0 };
	struct ks_error err;
	int64_t *params = NULL;
	char *source = NULL;
	size_t combos = 1;
	int worst = KS_EXIT_OK, ret, rc;

	rc = ks_candidate_read(path, &source, &err);
	if (rc < 0) {
		ks_cli_error("check", "%s", err.msg);
		ret = KS_EXIT_FAILED;
		goto cleanup;
	}
	if (rc > 0 || ks_candidate_parse(path, source, &cand, &err) < 0 ||
	    ks_candidate_bind(&cand, op, &err) < 0) {
		if (all) {
			struct ks_result res;

			ks_result_init(&res);
			ks_result_fail(&res, KS_VERDICT_CONTRACT_ERROR, "%s", err.msg);
			snprintf(res.arch, sizeof(res.arch), "%s", side->arch);
			json_array_append_new(all, ks_result_check_json(path, NULL, NULL, &res));
			ks_result_release(&res);
		} else {
			printf("%s\n\nverdict: contract_error\n%s\n\n", path, err.msg);
		}
		ret = EXIT_REJECTED;
		goto cleanup;
	}
	params = ks_calloc(cand.n_params ? cand.n_params : 1, sizeof(*params));
	ks_params_first(&cand, params);
	if (ks_params_assign(&cand, args->param.items, args->param.n, params, &err) < 0) {
		ret = ks_cli_usage("check", "%s", err.msg);
		goto cleanup;
	}
	if (args->all_params && ks_params_count_allowed(&cand))
		combos = ks_params_count(&cand); /* none allowed: the first one's contract_error says why */
	for (size_t c = 0; c < combos; c++) {
		struct ks_build build;
		struct ks_result res;
		char pbuf[256];
		int code;

		if (combos > 1) {
			ks_params_nth(&cand, c, params);
			if (!ks_params_allowed(&cand, params, NULL, 0))
				continue; /* ruled out before compilation: not a failure */
		}
		/* the one path to a result, the search's too (backend.h) */
		ks_result_init(&res);
		if (ks_gpu_build(op, &cand, params, side->arch, KS_BUILD_ISOLATED, &build, &res, &err) < 0) {
			ks_cli_error("check", "%s", err.msg);
			ks_result_release(&res);
			ret = KS_EXIT_FAILED;
			goto cleanup;
		}
		ks_params_format(&cand, params, pbuf, sizeof(pbuf));
		code = exit_for(res.verdict);
		if (build.verdict != KS_VERDICT_OK) {
			if (all)
				json_array_append_new(all,
						      ks_result_check_json(cand.path, &cand, params, &res));
			else
				printf("%s  %s\n\nverdict: %s\n%s\n\n", cand.path, pbuf,
				       ks_verdict_name(res.verdict), res.evidence);
		} else if (gpu_side_ready(side) < 0) {
			/* compiled ok, but nothing can run it: said once, at the end */
			side->not_run++;
			code = KS_EXIT_OK;
			if (all) {
				json_t *obj = ks_result_check_json(cand.path, &cand, params, &res);

				json_object_set_new(obj, "verdict", json_null());
				json_object_set_new(obj, "not_run", json_string(side->error));
				json_array_append_new(all, obj);
			} else {
				printf("%s  %s\n\ncompiled ok for %s; not verified or timed: no GPU to run "
				       "it\n\n",
				       cand.path, pbuf, side->arch);
			}
		} else {
			if (ks_gpu_evaluate(&side->ev, op, &cand, params, &build, side->eopts, &res, &err) <
			    0) {
				ks_cli_error("check", "%s", err.msg);
				ks_build_release(&build);
				ks_result_release(&res);
				ret = KS_EXIT_FAILED;
				goto cleanup;
			}
			code = exit_for(res.verdict);
			if (all)
				json_array_append_new(all,
						      ks_result_check_json(cand.path, &cand, params, &res));
			else
				print_result(&cand, params, &res, &side->ev);
		}
		if (code > worst)
			worst = code;
		ks_build_release(&build);
		ks_result_release(&res);
		fflush(stdout);
	}
	ret = worst;
cleanup:
	free(params);
	free(source);
	ks_candidate_release(&cand);
	return ret;
}

int cmd_check(int argc, char **argv)
{
	struct ks_eval_options eopts = { 0 };
	struct check_args args = { 0 };
	struct ks_opt_list workload = { 0 };
	const char *op_name = NULL;
	int gpu = 0, json = 0;
	struct ks_option opts[] = {
		KS_OPT_STRING(0, "op", &op_name, "NAME", "the operator the candidate implements (required)"),
		KS_OPT_LIST('p', "param", &args.param, "K=V",
			    "set a param (repeatable); others take their default (start or first value)"),
		KS_OPT_BOOL(0, "all-params", &args.all_params, "check every combination of the params"),
		KS_OPT_LIST('w', "workload", &workload, "ID",
			    "time only this benchmark workload (repeatable)"),
		KS_OPT_INT(0, "gpu", &gpu, "N", 0, 1024, "a GPU number (0, 1, ...)",
			   "the GPU to use (default 0)"),
		KS_OPT_BOOL(0, "json", &json, "print JSON instead of text"),
		KS_OPT_INT(0, "time-cap", &eopts.time_cap_ms, "MS", 1, 3600000,
			   "milliseconds from 1 to 3600000",
			   "time budget per benchmark workload (default 300)"),
		KS_OPT_END,
	};
	struct ks_op op = { 0 };
	struct gpu_side side = { 0 };
	const char **positional = NULL;
	size_t n_positional;
	struct ks_error err;
	json_t *all = NULL;
	int rc, ret = KS_EXIT_OK, worst = KS_EXIT_OK;

	rc = ks_opts_parse("check", opts, &help, argc, argv, &positional, &n_positional);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	if (n_positional < 1) {
		ret = ks_cli_usage("check", "expected a candidate file (FILE.cu)");
		goto cleanup;
	}
	if (!op_name) {
		ret = ks_cli_usage("check", "--op NAME is required (see `ksearch ops`)");
		goto cleanup;
	}
	if (args.param.n && args.all_params) {
		ret = ks_cli_usage("check", "--param and --all-params do not go together");
		goto cleanup;
	}
	if (ks_op_find(op_name, &op, &err) < 0) {
		ks_cli_error("check", "%s", err.msg);
		ret = KS_EXIT_FAILED;
		goto cleanup;
	}
	for (size_t i = 0; i < workload.n; i++) {
		const struct ks_workload *w = ks_op_workload(&op, workload.items[i]);

		if (!w || w < op.workloads || w >= op.workloads + op.n_workloads) {
			struct ks_strbuf known;

			ks_strbuf_init(&known);
			for (size_t k = 0; k < op.n_workloads; k++)
				ks_strbuf_addf(&known, "%s%s", k ? ", " : "", op.workloads[k].id);
			ret = ks_cli_usage("check", "--workload %s: not a benchmark workload of %s (%s)%s",
					   workload.items[i], op.key, known.buf,
					   w ? "; check workloads always all run" : "");
			ks_strbuf_release(&known);
			goto cleanup;
		}
	}
	eopts.workloads = workload.items;
	eopts.n_workloads = workload.n;
	/* every file that cannot be read and every usage error, before anything is compiled */
	for (size_t f = 0; f < n_positional; f++) {
		struct ks_candidate cand;
		int64_t *params;
		char *source;

		rc = ks_candidate_read(positional[f], &source, &err);
		if (rc < 0) {
			ks_cli_error("check", "%s", err.msg);
			ret = KS_EXIT_FAILED;
			goto cleanup;
		}
		if (rc > 0)
			continue; /* a contract_error, reported when its turn comes */
		if (ks_candidate_parse(positional[f], source, &cand, &err) < 0 ||
		    ks_candidate_bind(&cand, &op, &err) < 0) {
			free(source);
			continue; /* a contract_error, reported when its turn comes */
		}
		free(source);
		params = ks_calloc(cand.n_params ? cand.n_params : 1, sizeof(*params));
		ks_params_first(&cand, params);
		if (ks_params_assign(&cand, args.param.items, args.param.n, params, &err) < 0)
			ret = ks_cli_usage("check", "%s", err.msg);
		else if (args.param.n && !ks_params_allowed(&cand, params, err.msg, sizeof(err.msg)))
			/* params the user chose; a candidate none of whose combinations is allowed is its
			 * own contract_error, reported in its turn */
			ret = ks_cli_usage("check",
					   "%s: %s: the candidate's constraints rule these params out",
					   cand.path, err.msg);

		free(params);
		ks_candidate_release(&cand);
		if (ret == KS_EXIT_USAGE)
			goto cleanup;
	}
	gpu_side_init(&side, gpu, &eopts);
	if (json)
		all = json_array();
	for (size_t f = 0; f < n_positional; f++) {
		int code = check_file(&side, &op, positional[f], &args, all);

		if (code == KS_EXIT_FAILED || code == KS_EXIT_USAGE) {
			ret = code;
			goto cleanup;
		}
		if (code > worst)
			worst = code;
	}
	ret = worst;
	if (side.not_run) {
		ks_cli_error(
			"check",
			"%zu candidate%s compiled ok for %s but could not be verified or timed: %s\n"
			"(`ksearch check` needs an NVIDIA GPU and driver to run kernels; `ksearch doctor` "
			"says what is missing; the static verdicts above need none)",
			side.not_run, side.not_run == 1 ? "" : "s", side.arch, side.error);
		ret = KS_EXIT_FAILED;
	}
	if (all) {
		json_t *out = args.all_params || n_positional > 1 ? json_incref(all)
								  : json_incref(json_array_get(all, 0));

		ks_cli_json_print(out, JSON_INDENT(2));
		json_decref(out);
	}
cleanup:
	gpu_side_close(&side);
	json_decref(all);
	free(positional);
	ks_op_release(&op);
	ks_opts_release(opts);
	return ret;
}
