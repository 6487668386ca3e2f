/*
 * cli.h - what the subcommands in src/cli/ share: the option parser, the
 * exit codes and the command table entry.
 *
 * Each subcommand lives in src/cli/<name>.c and exports cmd_<name>();
 * src/main.c holds the one table that declares them and dispatches to them.  Only this layer
 * prints to the terminal or exits.
 */
#ifndef KSEARCH_CLI_H
#define KSEARCH_CLI_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ksearch/base/error.h"

/* Exit codes shared by every command (others are per command, in its help). */
enum {
	KS_EXIT_OK = 0,
	KS_EXIT_FAILED = 1, /* the command ran and failed */
	KS_EXIT_USAGE = 2,  /* bad command line */
};

/*
 * Options bound to variables (git's parse-options): each row of a
 * command's table says where its value goes, and the parser checks the
 * value's type and range, naming the flag in the error.  The help lists
 * the same rows.  A table is an array ending with KS_OPT_END:
 *
 *	uint64_t budget = 0;
 *	struct ks_option opts[] = {
 *		KS_OPT_UINT64(0, "budget", &budget, "N", 1, "a number of evaluations > 0",
 *			      "stop after N evaluations"),
 *		KS_OPT_END,
 *	};
 *
 * The caller sets defaults before parsing; the parser writes only what is
 * given.  A bad value is a usage error:
 * "--budget 0: expected a number of evaluations > 0".
 */
enum ks_option_type {
	KS_OPTION_END = 0,
	KS_OPTION_BOOL,	    /* int: 1 when given */
	KS_OPTION_STRING,   /* const char *: argv's own text */
	KS_OPTION_INT,	    /* int within [min, max] */
	KS_OPTION_UINT64,   /* uint64_t >= min (max is the type's); a sign is refused */
	KS_OPTION_DOUBLE,   /* double within [min, max], finite */
	KS_OPTION_DURATION, /* double seconds > 0, from 8h, 20m, 90s, 1h30m or 3600 */
	KS_OPTION_CHOICE,   /* int: the index of the value in choices */
	KS_OPTION_LIST,	    /* struct ks_opt_list: repeatable, in order */
	KS_OPTION_CALLBACK, /* callback(opt, value, err) stores it; -1 with err when bad */
	KS_OPTION_GROUP,    /* not an option: the rows after it, up to the next, are in its group */
};

/* The values of a repeatable option (argv's own strings; ks_opts_release() frees the array). */
struct ks_opt_list {
	const char **items;
	size_t n;
	size_t alloc;
};

struct ks_option {
	enum ks_option_type type;
	char short_name;       /* or 0 */
	const char *long_name; /* without dashes */
	void *value;	       /* where the value goes; its type follows the option's */
	const char *argh;      /* the value's name in the help: "N", "K=V" */
	const char *help;
	double min, max;	    /* KS_OPTION_INT, _UINT64, _DOUBLE */
	const char *expect;	    /* what a good value is, after "expected": "1 to 64 requests" */
	const char *const *choices; /* KS_OPTION_CHOICE: NULL-terminated */
	int (*callback)(const struct ks_option *opt, const char *arg, struct ks_error *err);
	int group; /* set by the parser from the KS_OPT_GROUP row above; 0 for none */
	int seen;  /* set by ks_opts_parse(): times given */
};

/*
 * The rows.  The pointer's type is checked at compile time: the
 * conditional below draws a warning (an error, with -Werror) when v is
 * not a pointer to the option's type.
 */
#define KS_OPT_TYPED_(type, v) ((void *)(1 ? (v) : (type *)0))
#define KS_OPT_BOOL(s, l, v, h)                                                                              \
	{                                                                                                    \
		.type = KS_OPTION_BOOL, .short_name = (s), .long_name = (l), .value = KS_OPT_TYPED_(int, v), \
		.help = (h)                                                                                  \
	}
#define KS_OPT_STRING(s, l, v, a, h)                                                                         \
	{                                                                                                    \
		.type = KS_OPTION_STRING, .short_name = (s), .long_name = (l),                               \
		.value = KS_OPT_TYPED_(const char *, v), .argh = (a), .help = (h)                            \
	}
#define KS_OPT_INT(s, l, v, a, lo, hi, e, h)                                                                 \
	{                                                                                                    \
		.type = KS_OPTION_INT, .short_name = (s), .long_name = (l), .value = KS_OPT_TYPED_(int, v),  \
		.argh = (a), .help = (h), .min = (lo), .max = (hi), .expect = (e)                            \
	}
#define KS_OPT_UINT64(s, l, v, a, lo, e, h)                                                                  \
	{                                                                                                    \
		.type = KS_OPTION_UINT64, .short_name = (s), .long_name = (l),                               \
		.value = KS_OPT_TYPED_(uint64_t, v), .argh = (a), .help = (h), .min = (lo),                  \
		.max = 18446744073709551615.0, .expect = (e)                                                 \
	}
#define KS_OPT_DOUBLE(s, l, v, a, lo, hi, e, h)                                                              \
	{                                                                                                    \
		.type = KS_OPTION_DOUBLE, .short_name = (s), .long_name = (l),                               \
		.value = KS_OPT_TYPED_(double, v), .argh = (a), .help = (h), .min = (lo), .max = (hi),       \
		.expect = (e)                                                                                \
	}
#define KS_OPT_DURATION(s, l, v, a, e, h)                                                                    \
	{                                                                                                    \
		.type = KS_OPTION_DURATION, .short_name = (s), .long_name = (l),                             \
		.value = KS_OPT_TYPED_(double, v), .argh = (a), .help = (h), .expect = (e)                   \
	}
#define KS_OPT_CHOICE(s, l, v, a, c, h)                                                                      \
	{                                                                                                    \
		.type = KS_OPTION_CHOICE, .short_name = (s), .long_name = (l),                               \
		.value = KS_OPT_TYPED_(int, v), .argh = (a), .help = (h), .choices = (c)                     \
	}
#define KS_OPT_LIST(s, l, v, a, h)                                                                           \
	{                                                                                                    \
		.type = KS_OPTION_LIST, .short_name = (s), .long_name = (l),                                 \
		.value = KS_OPT_TYPED_(struct ks_opt_list, v), .argh = (a), .help = (h)                      \
	}
#define KS_OPT_CALLBACK(s, l, v, a, fn, h)                                                                   \
	{                                                                                                    \
		.type = KS_OPTION_CALLBACK, .short_name = (s), .long_name = (l), .value = (v), .argh = (a),  \
		.help = (h), .callback = (fn)                                                                \
	}
/* The rows after this one, up to the next KS_OPT_GROUP, are in group g (0: none); not shown in the help. */
#define KS_OPT_GROUP(g)                                                                                      \
	{                                                                                                    \
		.type = KS_OPTION_GROUP, .group = (g)                                                        \
	}
#define KS_OPT_END                                                                                           \
	{                                                                                                    \
		.type = KS_OPTION_END                                                                        \
	}

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
 * Parse argv[1..] of command cmd against opts.  Positional arguments go
 * to *positional (argv's own strings; free the array).  "--" ends
 * options.  Returns 0 when parsed, 1 when --help was asked for and
 * printed (the caller returns KS_EXIT_OK), 2 on a usage error already
 * printed, naming the flag (the caller returns KS_EXIT_USAGE); on 1 and 2
 * the lists are released and *positional is NULL.
 */
int ks_opts_parse(const char *cmd, struct ks_option *opts, const struct ks_help *help, int argc, char **argv,
		  const char ***positional, size_t *n_positional);
/* Free what the parser allocated (the arrays of KS_OPTION_LIST values). */
void ks_opts_release(struct ks_option *opts);
void ks_print_help(const char *cmd, const struct ks_option *opts, const struct ks_help *help);
/* The first option of group (a KS_OPT_GROUP number, not 0) that was given, or NULL. */
const struct ks_option *ks_opts_given_in_group(const struct ks_option *opts, int group);
/* Whether the option bound to value was given (value is the address in the table). */
int ks_opts_given(const struct ks_option *opts, const void *value);
/* "8h", "20m", "90s", "1h30m", "3600" -> seconds; -1 when malformed. */
double ks_parse_duration(const char *text);

/*
 * --json on every outcome.  A command whose table has a --json flag, given
 * it, prints its document with ks_cli_json_print() (or calls
 * ks_cli_json_printing() before streaming one); when it fails without
 * having printed one, ks_cli_finish() (main, after the command returns)
 * prints {"command", "exit_code", "error"} with the messages that
 * ks_cli_error() and ks_cli_usage() printed, usage errors of the option
 * parser included.  The messages still go to stderr.
 */
void ks_cli_json_print(const json_t *doc, size_t flags);
void ks_cli_json_printing(void);
int ks_cli_json_wanted(void);
int ks_cli_finish(const char *cmd, int code);

/* "ksearch <cmd>: error: ..." on stderr. */
void ks_cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A usage error (prints the hint to see --help); returns KS_EXIT_USAGE. */
int ks_cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The architecture to compile for: given, else the GPU's, else sm_90a; says which on *why. */
const char *ks_cli_pick_arch(const char *given, char *buf, size_t size, const char **why);

/* The command table (main.c), which also declares each cmd_<name>(). */
extern const struct ks_cmd ks_commands[];
extern const size_t ks_n_commands;
const struct ks_cmd *ks_find_command(const char *name);

#endif
