/*
 * archive_cli.h - what the `ksearch archive` subcommands share: the three
 * options that pick an archive, opening it read-only, and formatting of
 * record fields.  The subcommands live in archive.c (ls, show, stats,
 * export, import, verify), archive_grid.c (grid), archive_diff.c
 * (lineage, diff) and archive_prompts.c (prompts); archive.c holds their
 * table.
 */
#ifndef KSEARCH_CLI_ARCHIVE_H
#define KSEARCH_CLI_ARCHIVE_H

#include <jansson.h>
#include <stdint.h>

#include "cli.h"
#include "ksearch/archive/archive.h"
#include "ksearch/base/util.h"

/* The first three entries of every subcommand's option table. */
#define KS_ARCHIVE_COMMON_OPTS                                                                                \
	{ "archive", 0, KS_OPT_VALUE, "DIR", "the archive folder (default: archive)", 0, 0, 0, 0 },           \
		{ "op", 0, KS_OPT_VALUE, "NAME", "the operator; needed when DIR holds several", 0, 0, 0, 0 }, \
	{                                                                                                     \
		"gpu", 0, KS_OPT_VALUE, "MODEL",                                                              \
			"the GPU model or its folder name; needed when DIR "                                  \
			"holds several for the operator",                                                     \
			0, 0, 0, 0                                                                            \
	}

/* Default of --archive. */
#define KS_ARCHIVE_DEFAULT_ROOT "archive"

/*
 * Open the archive opts (a table starting with KS_ARCHIVE_COMMON_OPTS)
 * names, read-only.  Prints the error (listing the archives the folder
 * holds when the choice is ambiguous) and returns KS_EXIT_FAILED, or
 * returns 0.
 */
int ks_archive_cli_open(const char *cmd, const struct ks_opt *opts, struct ks_archive **ar);

/* A candidate id from the command line; prints a usage error and returns -1 when it is not one. */
int ks_archive_cli_parse_id(const char *cmd, const char *text, uint64_t *id);

/* Get a record (and its source); prints "no candidate #N ..." when absent. */
int ks_archive_cli_get(const char *cmd, struct ks_archive *ar, uint64_t id, json_t **record, char **source);

/* "SPLITS=8 WARPS=4" from a record's params. */
void ks_archive_format_params(const json_t *params, struct ks_strbuf *sb);
/* A JSON scalar as text: 8, 0.5, "x". */
void ks_archive_format_value(const json_t *value, struct ks_strbuf *sb);

/* Record fields with defaults. */
uint64_t ks_record_id(const json_t *record);
const char *ks_record_str(const json_t *record, const char *field, const char *fallback);
double ks_record_num(const json_t *record, const char *field);

/* Whether to use colour on stdout: --color always|never|auto; -1 on a bad value. */
int ks_archive_cli_color(const char *cmd, const char *when);

int ks_archive_cmd_grid(int argc, char **argv);
int ks_archive_cmd_lineage(int argc, char **argv);
int ks_archive_cmd_diff(int argc, char **argv);
int ks_archive_cmd_prompts(int argc, char **argv);

#endif
