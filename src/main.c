/*
 * main.c - the ksearch command: one table of subcommands.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "ksearch/base/secret.h"
#include "ksearch/base/util.h"

/*
 * The commands, one row each: the name a user types, the function (in
 * src/cli/<command>.c) and the line `ksearch --help` shows; a NULL summary
 * hides an internal command.  The row also declares the function, and
 * meson compiles every file in src/cli/, so a new command is its file and
 * its row (HACKING.md, Adding a CLI command).  `--help` lists them in this
 * order; t0001-help checks every one.
 */
#define KS_COMMANDS(X)                                                                                       \
	X("evolve", cmd_evolve, "search for faster kernels of an operator (the main job)")                   \
	X("archive", cmd_archive,                                                                            \
	  "inspect an archive: ls, show, grid, stats, lineage, diff, export, import, verify")                \
	X("check", cmd_check, "verify and time a candidate on the GPU against the reference")                \
	X("report", cmd_report,                                                                              \
	  "write an archive as one HTML page: grid, progress, the best, lineage, verdicts")                  \
	X("export-best", cmd_export_best,                                                                    \
	  "write the best kernel of an archive as plain CUDA: source, launcher, header, record")             \
	X("profile", cmd_profile,                                                                            \
	  "measure a candidate with Nsight Compute: DRAM, occupancy, L2, stalls, spills")                    \
	X("sanitize", cmd_sanitize, "check a candidate for memory errors and races with compute-sanitizer")  \
	X("compile", cmd_compile, "compile a candidate with NVRTC; report resources and descriptors")        \
	X("ops", cmd_ops, "list the operators and their workloads")                                          \
	X("op", cmd_op, "make an operator folder from a FlashInfer-Bench Definition (op new)")               \
	X("doctor", cmd_doctor, "check the toolkit, NVRTC, driver and GPUs, and say how to fix problems")    \
	X("version", cmd_version, "print versions of ksearch, NVRTC and the driver")                         \
	X("help", cmd_help, "show help for ksearch or one of its commands")                                  \
	X("__worker", cmd_internal_worker, NULL)                                                             \
	X("__compile", cmd_internal_compile, NULL)                                                           \
	X("__profile_run", cmd_internal_profile_run, NULL)

#define DECLARE(name, fn, summary) int fn(int argc, char **argv);
KS_COMMANDS(DECLARE)
#undef DECLARE

#define ROW(name, fn, summary) { name, fn, summary },
const struct ks_cmd ks_commands[] = { KS_COMMANDS(ROW) };
#undef ROW
const size_t ks_n_commands = sizeof(ks_commands) / sizeof(ks_commands[0]);

const struct ks_cmd *ks_find_command(const char *name)
{
	for (size_t i = 0; i < ks_n_commands; i++)
		if (!strcmp(ks_commands[i].name, name))
			return &ks_commands[i];
	return NULL;
}

static void print_main_help(FILE *out)
{
	fprintf(out, "usage: ksearch <command> [options]\n"
		     "\n"
		     "ksearch searches for fast CUDA kernels: it keeps a MAP-Elites archive of\n"
		     "candidates, mutates them, compiles them with NVRTC, verifies and times them\n"
		     "on the GPU, and keeps the best of each cell.\n"
		     "\n"
		     "commands:\n");
	for (size_t i = 0; i < ks_n_commands; i++)
		if (ks_commands[i].summary)
			fprintf(out, "  %-11s %s\n", ks_commands[i].name, ks_commands[i].summary);
	fprintf(out, "\n"
		     "examples:\n"
		     "  ksearch ops                                         list operators\n"
		     "  ksearch compile operators/gqa/seeds/split_kv.cu --op gqa\n"
		     "  ksearch help compile                                more on one command\n"
		     "\n"
		     "exit codes: 0 ok, 1 the command failed, 2 usage error; commands add their own\n"
		     "(see `ksearch <command> --help`).\n");
}

static int suggest_command(const char *name)
{
	const char *best = NULL;
	size_t best_dist = (size_t)-1;

	for (size_t i = 0; i < ks_n_commands; i++) {
		size_t d = ks_edit_distance(name, ks_commands[i].name);

		if (!ks_commands[i].summary)
			continue;

		if (d < best_dist) {
			best_dist = d;
			best = ks_commands[i].name;
		}
	}
	if (best && ks_is_close(name, best))
		fprintf(stderr, "ksearch: unknown command '%s'; did you mean '%s'?\n", name, best);
	else
		fprintf(stderr, "ksearch: unknown command '%s'\n", name);
	fprintf(stderr, "(see `ksearch --help` for the list of commands)\n");
	return KS_EXIT_USAGE;
}

int cmd_help(int argc, char **argv)
{
	const struct ks_cmd *cmd;
	char *help_argv[4];

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		print_main_help(stdout);
		return KS_EXIT_OK;
	}
	if (argc > 3)
		return ks_cli_usage("help",
				    "expected a command name and at most one subcommand, got %d arguments",
				    argc - 1);
	cmd = ks_find_command(argv[1]);
	if (!cmd)
		return suggest_command(argv[1]);
	if (cmd->fn == cmd_help) {
		print_main_help(stdout);
		return KS_EXIT_OK;
	}
	/* `help archive ls` is `archive ls --help`: the command finds its subcommand */
	help_argv[0] = argv[1];
	help_argv[1] = argc == 3 ? argv[2] : "--help";
	help_argv[2] = argc == 3 ? "--help" : NULL;
	help_argv[3] = NULL;
	return cmd->fn(argc, help_argv);
}

int main(int argc, char **argv)
{
	const struct ks_cmd *cmd;

	/* before anything can read the environment or inherit it (secret.h) */
	ks_secrets_capture();
	if (argc < 2) {
		print_main_help(stderr);
		return KS_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		print_main_help(stdout);
		return KS_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version"))
		return cmd_version(1, argv + 1);
	if (argv[1][0] == '-') {
		fprintf(stderr,
			"ksearch: unknown option '%s' before the command\n"
			"(usage: ksearch <command> [options]; see `ksearch --help`)\n",
			argv[1]);
		return KS_EXIT_USAGE;
	}
	cmd = ks_find_command(argv[1]);
	if (!cmd)
		return suggest_command(argv[1]);
	return ks_cli_finish(cmd->name, cmd->fn(argc - 1, argv + 1));
}
