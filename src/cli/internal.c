/*
 * internal.c - the hidden subcommands ksearch runs as its own children:
 * `__worker --gpu N` (the GPU evaluator, worker.h) and `__compile`
 * (NVRTC in a killable process, compiler.h), which read frames on stdin
 * and answer on KS_CHILD_REPLY_FD (proc.h); and `__profile_run`, the
 * process Nsight Compute profiles (profile.h), which answers in a file.
 * People never run them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ksearch/base/proc.h"
#include "ksearch/compile/compiler.h"
#include "ksearch/evaluate/profile.h"
#include "ksearch/evaluate/worker.h"

static const struct ks_help worker_help = {
	.usage = "ksearch __worker [--gpu N]",
	.description = "Internal: the GPU evaluator ksearch starts as its child; frames on stdin and stdout.",
};

static const struct ks_help compile_help = {
	.usage = "ksearch __compile",
	.description = "Internal: NVRTC in a killable child ksearch starts; frames on stdin and stdout.",
};

static const struct ks_help profile_run_help = {
	.usage = "ksearch __profile_run --op-dir DIR --source FILE --workload ID --result FILE [options]",
	.description = "Internal: runs one candidate's launches on one workload for the profiler (ncu),\n"
		       "once to warm up and once inside cuProfilerStart/Stop; with --plain, once on each\n"
		       "--workload for compute-sanitizer; writes what happened to FILE.",
};

int cmd_internal_worker(int argc, char **argv)
{
	int gpu = 0, rc;
	struct ks_option opts[] = {
		KS_OPT_INT(0, "gpu", &gpu, "N", 0, 1024, "a GPU number (0, 1, ...)",
			   "the GPU to evaluate on"),
		KS_OPT_END,
	};
	const char **positional;
	size_t n_positional;

	rc = ks_opts_parse("__worker", opts, &worker_help, argc, argv, &positional, &n_positional);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	free(positional);
	if (n_positional)
		return ks_cli_usage("__worker", "internal command: expected --gpu N");
	return ks_worker_main(0, KS_CHILD_REPLY_FD, gpu);
}

int cmd_internal_compile(int argc, char **argv)
{
	struct ks_option opts[] = { KS_OPT_END };
	const char **positional;
	size_t n_positional;
	int rc;

	rc = ks_opts_parse("__compile", opts, &compile_help, argc, argv, &positional, &n_positional);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	free(positional);
	if (n_positional)
		return ks_cli_usage("__compile", "internal command: takes no arguments");
	return ks_compile_child_main(0, KS_CHILD_REPLY_FD);
}

int cmd_internal_profile_run(int argc, char **argv)
{
	struct ks_profile_runner_args args = { .path = "candidate.cu", .deadline_s = 120 };
	struct ks_opt_list params = { 0 }, workloads = { 0 };
	struct ks_option opts[] = {
		KS_OPT_STRING(0, "op-dir", &args.op_dir, "DIR", "the operator's folder"),
		KS_OPT_STRING(0, "source", &args.source_file, "FILE", "the candidate's source"),
		KS_OPT_STRING(0, "path", &args.path, "NAME", "the candidate's name in messages"),
		KS_OPT_LIST(0, "param", &params, "K=V", "a param value (repeatable)"),
		KS_OPT_LIST(0, "workload", &workloads, "ID", "a workload to run (repeatable with --plain)"),
		KS_OPT_BOOL(0, "plain", &args.plain,
			    "each workload once, no profiler window (the sanitizer's run)"),
		KS_OPT_INT(0, "gpu", &args.gpu, "N", 0, 1024, "a GPU number (0, 1, ...)", "the GPU"),
		KS_OPT_STRING(0, "result", &args.result_file, "FILE", "where to say what happened"),
		KS_OPT_INT(0, "deadline", &args.deadline_s, "S", 1, 86400, "1 to 86400 seconds",
			   "end after this long"),
		KS_OPT_END,
	};
	const char **positional;
	size_t n_positional;
	int rc;

	rc = ks_opts_parse("__profile_run", opts, &profile_run_help, argc, argv, &positional, &n_positional);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	free(positional);
	if (n_positional || !args.op_dir || !args.source_file || !workloads.n || !args.result_file) {
		ks_opts_release(opts);
		return ks_cli_usage("__profile_run",
				    "internal command: expected --op-dir, --source, --workload and --result");
	}
	args.params = params.items;
	args.n_params = params.n;
	args.workloads = workloads.items;
	args.n_workloads = workloads.n;
	rc = ks_profile_runner_main(&args);
	ks_opts_release(opts);
	return rc;
}
