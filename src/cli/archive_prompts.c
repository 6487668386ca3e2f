/*
 * archive_prompts.c - `ksearch archive prompts`: the strategy prompts a
 * search co-evolves (include/ksearch/strategy.h has their fields), as a
 * table sorted by reward, one strategy with its text and ancestry, or
 * JSON.  Reads the archive's prompts store only.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive_cli.h"

static const struct ks_help prompts_help = {
	.usage = "ksearch archive prompts [--sort reward|id|uses] [--all] [--show ID] [--json]",
	.description = "List the strategy prompts the LLM mutator co-evolves, one a line: id,\n"
		       "name, origin (seed, or the rewrite that made it: improve, specialise,\n"
		       "generalise, simplify) and the strategy it was rewritten from, whether it\n"
		       "is active, requests sent with it (uses), replies with a source (answers)\n"
		       "and without (errors), candidates descending from it (children), how many\n"
		       "of those were ok and how many filled or improved a cell, its best child,\n"
		       "and its reward: (improved + 0.25 x ok) / uses, what the search's bandit\n"
		       "picks by.  --sort reward (the default) puts the best first; uses the most\n"
		       "used; id the oldest.  Retired strategies (past the population cap) are\n"
		       "kept for their lineage and listed with --all.  --show ID prints one\n"
		       "strategy's text, statistics and chain of ancestors back to its seed.",
	.examples = "  ksearch archive prompts\n"
		    "  ksearch archive prompts --all --sort id\n"
		    "  ksearch archive prompts --show 4\n"
		    "  ksearch archive prompts --json | jq '.[].stats.uses'\n",
	.exit_codes = NULL,
};

enum prompts_sort { SORT_REWARD, SORT_ID, SORT_USES };

/* Widest name column; longer names are cut. */
#define NAME_WIDTH_MAX 32

static uint64_t prompt_id(const json_t *prompt)
{
	json_int_t id = json_integer_value(json_object_get(prompt, "id"));

	return id > 0 ? (uint64_t)id : 0;
}

static long long stat_of(const json_t *prompt, const char *name)
{
	return (long long)json_integer_value(json_object_get(json_object_get(prompt, "stats"), name));
}

/* What the bandit reads (ks_strategy_reward()): 0 until used. */
static double reward_of(const json_t *prompt)
{
	long long uses = stat_of(prompt, "uses");

	if (uses <= 0)
		return 0;
	return ((double)stat_of(prompt, "improvements") + 0.25 * (double)stat_of(prompt, "ok")) /
	       (double)uses;
}

/* Only an explicit false retires: a hand-written prompt without the field is active. */
static int is_active(const json_t *prompt)
{
	return !json_is_false(json_object_get(prompt, "active"));
}

static const json_t *find_prompt(const json_t *prompts, uint64_t id)
{
	size_t i;
	json_t *prompt;

	json_array_foreach(prompts, i, prompt) if (prompt_id(prompt) == id) return prompt;
	return NULL;
}

static int cmp_id(const void *a, const void *b)
{
	uint64_t x = prompt_id(*(const json_t *const *)a), y = prompt_id(*(const json_t *const *)b);

	return x < y ? -1 : x > y;
}

static int cmp_reward(const void *a, const void *b)
{
	double x = reward_of(*(const json_t *const *)a), y = reward_of(*(const json_t *const *)b);

	if (x != y)
		return x > y ? -1 : 1;
	return cmp_id(a, b);
}

static int cmp_uses(const void *a, const void *b)
{
	long long x = stat_of(*(const json_t *const *)a, "uses");
	long long y = stat_of(*(const json_t *const *)b, "uses");

	if (x != y)
		return x > y ? -1 : 1;
	return cmp_id(a, b);
}

/* "2.600 #8", or "-" before any ok child. */
static void format_best(const json_t *prompt, char *buf, size_t size)
{
	const json_t *stats = json_object_get(prompt, "stats");
	const json_t *child = json_object_get(stats, "best_child");

	if (json_is_integer(child))
		snprintf(buf, size, "%.3f #%lld", json_number_value(json_object_get(stats, "best_fitness")),
			 (long long)json_integer_value(child));
	else
		snprintf(buf, size, "-");
}

static void format_parent(const json_t *prompt, char *buf, size_t size)
{
	const json_t *parent = json_object_get(prompt, "parent");

	if (json_is_integer(parent))
		snprintf(buf, size, "%lld", (long long)json_integer_value(parent));
	else
		snprintf(buf, size, "-");
}

static void print_table(const json_t **rows, size_t n)
{
	int width = 4;

	for (size_t i = 0; i < n; i++) {
		int len = (int)strlen(ks_record_str(rows[i], "name", "?"));

		if (len > width)
			width = len < NAME_WIDTH_MAX ? len : NAME_WIDTH_MAX;
	}
	printf("%4s  %-*s  %-10s %6s  %-7s %5s %7s %6s %8s %5s %8s  %-12s %6s\n", "id", width, "name",
	       "origin", "parent", "state", "uses", "answers", "errors", "children", "ok", "improved", "best",
	       "reward");
	for (size_t i = 0; i < n; i++) {
		const json_t *p = rows[i];
		char parent[24], best[48];

		format_parent(p, parent, sizeof(parent));
		format_best(p, best, sizeof(best));
		printf("%4llu  %-*.*s  %-10s %6s  %-7s %5lld %7lld %6lld %8lld %5lld %8lld  %-12s %6.3f\n",
		       (unsigned long long)prompt_id(p), width, width, ks_record_str(p, "name", "?"),
		       ks_record_str(p, "origin", "-"), parent, is_active(p) ? "active" : "retired",
		       stat_of(p, "uses"), stat_of(p, "answers"), stat_of(p, "answer_errors"),
		       stat_of(p, "children"), stat_of(p, "ok"), stat_of(p, "improvements"), best,
		       reward_of(p));
	}
}

static void print_json_list(const json_t **rows, size_t n)
{
	ks_cli_json_printing();
	for (size_t i = 0; i < n; i++) {
		fputs(i ? ",\n  " : "[\n  ", stdout);
		json_dumpf(rows[i], stdout, KS_ARCHIVE_RECORD_JSON);
	}
	fputs(n ? "\n]\n" : "[]\n", stdout);
}

/* One strategy: where it came from, its statistics, then its text. */
static void print_one(const json_t *prompts, const json_t *prompt)
{
	const json_t *stats = json_object_get(prompt, "stats");
	const json_t *parent = json_object_get(prompt, "parent");
	const json_t *cur = prompt;
	const char *last_error = json_string_value(json_object_get(stats, "last_error"));
	const char *text;

	printf("strategy #%llu  %s  (%s)\n", (unsigned long long)prompt_id(prompt),
	       ks_record_str(prompt, "name", "?"), is_active(prompt) ? "active" : "retired");
	printf("%-12s%s", "origin", ks_record_str(prompt, "origin", "-"));
	if (json_is_integer(parent)) {
		const json_t *from = find_prompt(prompts, (uint64_t)json_integer_value(parent));

		printf(" of #%lld %s", (long long)json_integer_value(parent),
		       from ? ks_record_str(from, "name", "?") : "(not in this archive)");
	}
	if (json_integer_value(json_object_get(prompt, "created_at")) > 0)
		printf(", made when the archive held %lld candidates",
		       (long long)json_integer_value(json_object_get(prompt, "created_at")));
	printf("\n%-12s%lld  (%lld answers, %lld without a usable source", "uses", stat_of(prompt, "uses"),
	       stat_of(prompt, "answers"), stat_of(prompt, "answer_errors"));
	if (stat_of(prompt, "cut_off") > 0)
		printf(", %lld of them cut off at the answer budget", stat_of(prompt, "cut_off"));
	printf(")\n");
	printf("%-12s%lld  (%lld ok, %lld filled or improved a cell)\n", "children",
	       stat_of(prompt, "children"), stat_of(prompt, "ok"), stat_of(prompt, "improvements"));
	if (stat_of(prompt, "uses") > 0)
		printf("%-12s%.3f  ((%lld improved + 0.25 x %lld ok) / %lld uses)\n", "reward",
		       reward_of(prompt), stat_of(prompt, "improvements"), stat_of(prompt, "ok"),
		       stat_of(prompt, "uses"));
	else
		printf("%-12s0  (unused: the search tries it before any used one)\n", "reward");
	if (json_is_integer(json_object_get(stats, "best_child")))
		printf("%-12s#%lld  (fitness %.3f)\n", "best child",
		       (long long)json_integer_value(json_object_get(stats, "best_child")),
		       json_number_value(json_object_get(stats, "best_fitness")));
	else
		printf("%-12snone yet (no ok child)\n", "best child");
	if (last_error)
		printf("%-12s%s\n", "last error", last_error);

	/* a damaged store could hold a cycle: no chain is longer than the store */
	printf("lineage, newest first:\n");
	for (size_t steps = 0; cur && steps <= json_array_size(prompts); steps++) {
		const json_t *up = json_object_get(cur, "parent");

		printf("  #%-4llu %-24s %s\n", (unsigned long long)prompt_id(cur),
		       ks_record_str(cur, "name", "?"), ks_record_str(cur, "origin", "-"));
		if (!json_is_integer(up))
			break;
		cur = find_prompt(prompts, (uint64_t)json_integer_value(up));
		if (!cur)
			printf("  #%-4lld (not in this archive)\n", (long long)json_integer_value(up));
	}
	text = ks_record_str(prompt, "text", "");
	printf("\ntext:\n%s", text);
	if (!*text || text[strlen(text) - 1] != '\n')
		putchar('\n');
}

/* --show ID: a strategy id ("3" or "#3") into the uint64_t the row points to. */
static int prompt_id_option(const struct ks_option *opt, const char *arg, struct ks_error *err)
{
	const char *text = arg[0] == '#' ? arg + 1 : arg;
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(text, &end, 10);
	if (!*text || *end || errno || v == 0 || !isdigit((unsigned char)text[0]))
		return ks_fail(
			err,
			"'%s' is not a strategy id (a number from 1, as `ksearch archive prompts` shows)",
			text);
	*(uint64_t *)opt->value = v;
	return 0;
}

static int show(const char *cmd, struct ks_archive *ar, const json_t *prompts, uint64_t id, int json)
{
	const json_t *prompt = find_prompt(prompts, id);
	uint64_t lo = 0, hi = 0;
	size_t i;
	json_t *p;

	if (prompt) {
		if (json) {
			ks_cli_json_print(prompt, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
		} else {
			print_one(prompts, prompt);
		}
		return KS_EXIT_OK;
	}
	json_array_foreach(prompts, i, p)
	{
		uint64_t pid = prompt_id(p);

		if (!lo || pid < lo)
			lo = pid;
		if (pid > hi)
			hi = pid;
	}
	if (hi)
		ks_cli_error(cmd,
			     "no strategy #%llu in %s (its strategy ids go from %llu to %llu; "
			     "--all lists them)",
			     (unsigned long long)id, ks_archive_path(ar), (unsigned long long)lo,
			     (unsigned long long)hi);
	else
		ks_cli_error(cmd, "no strategy #%llu in %s (it holds no strategy prompts yet)",
			     (unsigned long long)id, ks_archive_path(ar));
	return KS_EXIT_FAILED;
}

int ks_archive_cmd_prompts(int argc, char **argv)
{
	/* the order of the message "--sort takes reward, id or uses" */
	static const char *const sorts[] = { "reward", "id", "uses", NULL };
	static int (*const cmp_of[])(const void *, const void *) = { cmp_reward, cmp_id, cmp_uses };
	struct ks_archive_pick pick = KS_ARCHIVE_PICK_INIT;
	uint64_t show_id = 0;
	int sort = 0, all = 0, json = 0;
	struct ks_option opts[] = {
		KS_ARCHIVE_COMMON_OPTS(&pick),
		KS_OPT_CHOICE(0, "sort", &sort, "KEY", sorts,
			      "reward (best first, the default), uses (most first) or id"),
		KS_OPT_BOOL('a', "all", &all, "include retired strategies"),
		KS_OPT_CALLBACK(0, "show", &show_id, "ID", prompt_id_option,
				"one strategy: its text, statistics and ancestors"),
		KS_OPT_BOOL(0, "json", &json, "print the stored objects as a JSON list (one with --show)"),
		KS_OPT_END,
	};
	const char *cmd = "archive prompts";
	struct ks_archive *ar = NULL;
	json_t *prompts = NULL, *p;
	const json_t **rows = NULL;
	size_t n_rows = 0, retired = 0, i;
	struct ks_error err;
	const char **pos;
	size_t n_pos;
	int ret;

	ret = ks_opts_parse(cmd, opts, &prompts_help, argc, argv, &pos, &n_pos);
	if (ret)
		return ret == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	ret = KS_EXIT_USAGE;
	if (n_pos) {
		ks_cli_usage(cmd, "unexpected argument '%s' (to show one strategy: --show ID)", pos[0]);
		goto cleanup;
	}
	ret = ks_archive_cli_open(cmd, &pick, &ar);
	if (ret)
		goto cleanup;
	ret = KS_EXIT_FAILED;
	if (ks_archive_prompts(ar, &prompts, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	if (show_id) {
		ret = show(cmd, ar, prompts, show_id, json);
		goto cleanup;
	}
	rows = ks_calloc(json_array_size(prompts) + 1, sizeof(*rows));
	json_array_foreach(prompts, i, p)
	{
		if (!is_active(p) && !all)
			retired++;
		else
			rows[n_rows++] = p;
	}
	KS_QSORT(rows, n_rows, cmp_of[sort]);
	ret = KS_EXIT_OK;
	if (json) {
		print_json_list(rows, n_rows);
		goto cleanup;
	}
	if (!json_array_size(prompts)) {
		fprintf(stderr,
			"no strategy prompts in %s yet: strategies appear once `ksearch evolve` runs "
			"with an LLM endpoint (--llm-url)\n",
			ks_archive_path(ar));
		goto cleanup;
	}
	if (n_rows)
		print_table(rows, n_rows);
	else
		printf("no active strategies in %s\n", ks_archive_path(ar));
	if (retired)
		printf("%zu retired (--all to list them)\n", retired);
cleanup:
	free(rows);
	json_decref(prompts);
	ks_archive_close(ar);
	free(pos);
	ks_opts_release(opts);
	return ret;
}
