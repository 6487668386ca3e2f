/*
 * archive_cli.h - what the `ksearch archive` subcommands share: the three
 * options that pick an archive, opening it read-only, and formatting of
 * record fields.  The subcommands live in archive.c (ls, show, stats,
 * export, import, verify), archive_grid.c (grid), archive_diff.c
 * (lineage, diff), archive_prompts.c (prompts) and archive_salvage.c
 * (salvage); archive.c holds their table.  Opening, reading records and
 * formatting live in archive_open.c; picking a candidate to run again, its
 * lineage and the take-home line in archive_pick.c.
 */
#ifndef KSEARCH_CLI_ARCHIVE_H
#define KSEARCH_CLI_ARCHIVE_H

#include <jansson.h>
#include <stdint.h>

#include "cli.h"
#include "ksearch/archive/archive.h"
#include "ksearch/archive/record.h"
#include "ksearch/base/util.h"
#include "ksearch/export/export.h"

/* Default of --archive. */
#define KS_ARCHIVE_DEFAULT_ROOT "archive"

/* Which archive a subcommand reads: the three options every subcommand takes. */
struct ks_archive_pick {
	const char *root; /* --archive DIR */
	const char *op;	  /* --op NAME, or NULL */
	const char *gpu;  /* --gpu MODEL, or NULL */
};
#define KS_ARCHIVE_PICK_INIT                                                                                 \
	{                                                                                                    \
		KS_ARCHIVE_DEFAULT_ROOT, NULL, NULL                                                          \
	}

/* The first three rows of every subcommand's option table, bound to *pick. */
#define KS_ARCHIVE_COMMON_OPTS(pick)                                                                         \
	KS_OPT_STRING(0, "archive", &(pick)->root, "DIR", "the archive folder (default: archive)"),          \
		KS_OPT_STRING(0, "op", &(pick)->op, "NAME", "the operator; needed when DIR holds several"),  \
		KS_OPT_STRING(                                                                               \
			0, "gpu", &(pick)->gpu, "MODEL",                                                     \
			"the GPU model or its folder name; needed when DIR holds several for the operator")

/*
 * Open the archive pick names, read-only.  Prints the error (listing the
 * archives the folder holds when the choice is ambiguous) and returns
 * KS_EXIT_FAILED, or returns 0.
 */
int ks_archive_cli_open(const char *cmd, const struct ks_archive_pick *pick, struct ks_archive **ar);

/*
 * Which archive pick names, without opening it: its operator key and GPU
 * folder name (the caller's to free).  Prints the error as
 * ks_archive_cli_open() does and returns KS_EXIT_FAILED, or returns 0.
 */
int ks_archive_cli_resolve(const char *cmd, const struct ks_archive_pick *pick, char **op_key,
			   char **gpu_slug);

/*
 * What an import may create: the archive folder and any of its parents
 * that do not exist yet (the archive makes them all).  A failed import
 * removes what it made and leaves nothing behind, not even an empty
 * folder.
 */
struct ks_archive_new_dirs {
	char *archive;	 /* root/op/gpu */
	int new_archive; /* it held no data.mdb */
	char **made;	 /* the folders that did not exist, outermost first */
	size_t n_made, alloc;
};

/*
 * Open (creating) the archive under pick->root for an export document's
 * op and GPU (pick's --op and --gpu override), noting in dirs what it
 * made.  Prints the error and returns KS_EXIT_FAILED, or returns 0.
 */
int ks_archive_cli_import_open(const char *cmd, const struct ks_archive_pick *pick, const json_t *doc,
			       struct ks_archive **ar, struct ks_archive_new_dirs *dirs);
/* Remove what dirs notes was made (after a failure); then release it. */
void ks_archive_cli_new_dirs_undo(const struct ks_archive_new_dirs *d);
void ks_archive_cli_new_dirs_release(struct ks_archive_new_dirs *d);

/* A candidate id ("42" or "#42"); -1 with err when text is not one. */
int ks_archive_parse_id(const char *text, uint64_t *id, struct ks_error *err);
/* The same, printing a usage error for cmd. */
int ks_archive_cli_parse_id(const char *cmd, const char *text, uint64_t *id);
/* An option callback: a candidate id into the uint64_t the row's value points to. */
int ks_archive_id_option(const struct ks_option *opt, const char *arg, struct ks_error *err);

/* Get a record (and its source); prints "no candidate #N ..." when absent. */
int ks_archive_cli_get(const char *cmd, struct ks_archive *ar, uint64_t id, json_t **record, char **source);
/* The same, typed (for everything but what prints the record as stored). */
int ks_archive_cli_get_record(const char *cmd, struct ks_archive *ar, uint64_t id, struct ks_record *rec,
			      char **source);

/*
 * A verified candidate to run again (archive_pick.c): record id, or the
 * best with best, with its source, the archive's operator and GPU model
 * (all the caller's to free), and *origin, the seed family a knob or LLM
 * child came from (NULL for any other, or when its chain of parents is
 * not whole; the caller's to free); verb says what is done to it ("profiled")
 * when it is not verified.  Prints the error and returns
 * KS_EXIT_FAILED, or returns 0.
 */
int ks_archive_cli_pick_verified(const char *cmd, const char *verb, const struct ks_archive_pick *pick,
				 uint64_t id, int best, struct ks_record *rec, char **source, char **op_key,
				 char **gpu, char **origin);
/*
 * The candidate a command runs again (`profile`, `sanitize`): --id ID or
 * --best in the archive pick names, or one FILE.cu with --param values,
 * for the operator --op names; its source, the params to build it with,
 * its operator (loaded) and, from an archive, its record and GPU model.
 * The usage rules are the same for every such command.
 */
struct ks_archive_target_args {
	const struct ks_archive_pick *pick;
	int root_given, id_given, best;
	uint64_t id;
	const char *const *files; /* the positional arguments */
	size_t n_files;
	const struct ks_opt_list *params; /* --param */
	const char *workload;		  /* --workload, or NULL */
};
struct ks_archive_target {
	struct ks_record record; /* id 0 for a FILE */
	uint64_t id;
	char *source, *op_key, *gpu; /* gpu: the archive's GPU model, NULL for a FILE */
	const char *const *params;   /* "NAME=VALUE" */
	size_t n_params;
	const char *path;
	char what[256]; /* "#12 (split_kv)", "#66 (knob-3, from split_kv)" or the file, for messages */
	struct ks_op op;
	char **record_params; /* owned, when params are a record's */
	size_t n_record_params;
};
/* Prints the error and returns its exit code (usage 2, or KS_EXIT_FAILED), or returns 0. */
int ks_archive_cli_target_pick(const char *cmd, const char *verb, const struct ks_archive_target_args *a,
			       struct ks_archive_target *t);
void ks_archive_cli_target_release(struct ks_archive_target *t);

/* "NAME=VALUE" for each param of a record, *n of them; free with ks_archive_cli_params_free(). */
char **ks_archive_cli_record_params(const struct ks_record *rec, size_t *n);
void ks_archive_cli_params_free(char **params, size_t n);

/*
 * A candidate's chain of first parents (the export's lineage, export.h)
 * and the ancestors' records it points to.
 */
struct ks_archive_cli_lineage {
	struct ks_record **ancestors; /* read from the archive, owned: the parent first */
	size_t n_ancestors, alloc;
	const struct ks_record **steps; /* oldest first, the candidate last */
	struct ks_export_lineage chain;
};

/*
 * The chain of first parents, oldest first, ending with rec (borrowed: it
 * must outlive lin).  A parent the archive lacks (an elites-only import)
 * ends the chain as its missing id.  lin must be zeroed.
 */
int ks_archive_cli_lineage_build(struct ks_archive *ar, const struct ks_record *rec,
				 struct ks_archive_cli_lineage *lin, struct ks_error *err);
void ks_archive_cli_lineage_release(struct ks_archive_cli_lineage *lin);

/*
 * Where a result was timed, as "GPU 0 (GPU-df7a...) of host vm: 16 CPUs
 * (AMD EPYC ...), 1 GPU", appended to sb; what the record does not say is
 * left out.
 */
void ks_archive_cli_format_where(const struct ks_result_place *w, struct ks_strbuf *sb);

/*
 * "take it home:" and the export-best command of best_id (the best by
 * fitness); when other kernels are the fastest on some benchmark
 * workloads, the export of all of them as one per-shape dispatch too, and
 * its fitness.  gpu (may be NULL) is the --gpu the archive was picked by.
 */
void ks_archive_cli_take_home(struct ks_archive *ar, const char *op, const char *root, const char *gpu,
			      uint64_t best_id);

/* "SPLITS=8 WARPS=4" from a record's params. */
void ks_archive_format_params(const json_t *params, struct ks_strbuf *sb);
/* A JSON scalar as text: 8, 0.5, "x". */
void ks_archive_format_value(const json_t *value, struct ks_strbuf *sb);

/* --color WHEN: a KS_OPT_CHOICE over ks_color_choices, and whether that means colour on stdout. */
enum ks_color_when { KS_COLOR_AUTO, KS_COLOR_ALWAYS, KS_COLOR_NEVER };
extern const char *const ks_color_choices[];
int ks_archive_cli_color(enum ks_color_when when);

int ks_archive_cmd_grid(int argc, char **argv);
int ks_archive_cmd_lineage(int argc, char **argv);
int ks_archive_cmd_diff(int argc, char **argv);
int ks_archive_cmd_prompts(int argc, char **argv);
int ks_archive_cmd_salvage(int argc, char **argv);

#endif
