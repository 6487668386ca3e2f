/*
 * cli.h - what the subcommands in src/cli/ share: the option parser, the
 * exit codes and the command table entry.
 *
 * Each subcommand lives in src/cli/<name>.c and exports cmd_<name>();
 * src/main.c holds the one table that dispatches to them.  Only this layer
 * prints to the terminal or exits.
 */
#ifndef KSEARCH_CLI_H
#define KSEARCH_CLI_H

#include <stddef.h>

/* Exit codes shared by every command (others are per command, in its help). */
enum {
	KS_EXIT_OK = 0,
	KS_EXIT_FAILED = 1, /* the command ran and failed */
	KS_EXIT_USAGE = 2,  /* bad command line */
};

enum ks_opt_kind {
	KS_OPT_FLAG,  /* --json */
	KS_OPT_VALUE, /* --arch sm_90a, --arch=sm_90a */
	KS_OPT_LIST,  /* --param K=V, repeatable */
};

struct ks_opt {
	const char *name; /* long name without dashes */
	char short_name;  /* or 0 */
	enum ks_opt_kind kind;
	const char *value_name; /* shown in help: "K=V" */
	const char *help;
	/* filled by ks_opts_parse() */
	int set;
	const char *value;
	const char **list;
	size_t n_list;
};

struct ks_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary; /* NULL: hidden (internal) */
};

/* What a command prints for --help: usage line, description, options, examples, exit codes. */
struct ks_help {
	const char *usage;	 /* "ksearch compile FILE.cu --op NAME [options]" */
	const char *description; /* paragraphs */
	const char *examples;	 /* lines */
	const char *exit_codes;	 /* extra lines after 0/1/2, or NULL */
};

/*
 * Parse argv[1..] of command cmd against opts (terminated by a NULL name).
 * Positional arguments go to *positional (argv's own strings; free the
 * array).  "--" ends options.  Returns 0 when parsed, 1 when --help was
 * asked for and printed (the caller returns KS_EXIT_OK), 2 on a usage
 * error already printed with a suggestion (the caller returns
 * KS_EXIT_USAGE).
 */
int ks_opts_parse(const char *cmd, struct ks_opt *opts, const struct ks_help *help, int argc, char **argv,
		  const char ***positional, size_t *n_positional);
void ks_opts_release(struct ks_opt *opts);
void ks_print_help(const char *cmd, const struct ks_opt *opts, const struct ks_help *help);

/* "ksearch <cmd>: error: ..." on stderr. */
void ks_cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A usage error (prints the hint to see --help); returns KS_EXIT_USAGE. */
int ks_cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The architecture to compile for: given, else the GPU's, else sm_90a; says which on *why. */
const char *ks_cli_pick_arch(const char *given, char *buf, size_t size, const char **why);

int cmd_help(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_ops(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_evolve(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_archive(int argc, char **argv);
int cmd_export_best(int argc, char **argv);
int cmd_internal_worker(int argc, char **argv);
int cmd_internal_compile(int argc, char **argv);

/* The command table (main.c). */
extern const struct ks_cmd ks_commands[];
extern const size_t ks_n_commands;
const struct ks_cmd *ks_find_command(const char *name);

#endif
