/*
 * internal.c - the hidden subcommands ksearch runs as its own children:
 * `__worker --gpu N` (the GPU evaluator, worker.h) and `__compile`
 * (NVRTC in a killable process, compiler.h).  They read frames on stdin
 * and answer on KS_CHILD_REPLY_FD (proc.h); people never run them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ksearch/base/proc.h"
#include "ksearch/compile/compiler.h"
#include "ksearch/evaluate/worker.h"

static const struct ks_help worker_help = {
	.usage = "ksearch __worker [--gpu N]",
	.description = "Internal: the GPU evaluator ksearch starts as its child; frames on stdin and stdout.",
};

static const struct ks_help compile_help = {
	.usage = "ksearch __compile",
	.description = "Internal: NVRTC in a killable child ksearch starts; frames on stdin and stdout.",
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
