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

int cmd_internal_worker(int argc, char **argv)
{
	int gpu = 0;

	if (argc == 3 && !strcmp(argv[1], "--gpu"))
		gpu = atoi(argv[2]);
	else if (argc != 1)
		return ks_cli_usage("__worker", "internal command: expected --gpu N");
	return ks_worker_main(0, KS_CHILD_REPLY_FD, gpu);
}

int cmd_internal_compile(int argc, char **argv)
{
	(void)argv;
	if (argc != 1)
		return ks_cli_usage("__compile", "internal command: takes no arguments");
	return ks_compile_child_main(0, KS_CHILD_REPLY_FD);
}
