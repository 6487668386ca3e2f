/*
 * archive.c - `ksearch archive`: inspect, share and check an archive.
 * A small table of subcommands (as git bundle has), each with its own
 * options and help.  Every reading subcommand opens the archive
 * read-only, so it works while a search writes to it.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_cli.h"
#include "ksearch/evaluate/profile.h"
#include "ksearch/evaluate/sanitize.h"

/*
 * Parse a subcommand's options and count its arguments.  Returns 0 to go
 * on, or 1 when the command is done (help shown, or a usage error
 * printed) with *exit_code what it returns.
 */
static int parse(const char *cmd, struct ks_option *opts, const struct ks_help *help, int argc, char **argv,
		 const char ***pos, size_t *n_pos, size_t min_pos, size_t max_pos, const char *what,
		 int *exit_code)
{
	int rc = ks_opts_parse(cmd, opts, help, argc, argv, pos, n_pos);

	if (rc) {
		*exit_code = rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
		return 1;
	}
	if (*n_pos < min_pos || *n_pos > max_pos) {
		if (*n_pos < min_pos)
			*exit_code = ks_cli_usage(cmd, "expected %s", what);
		else
			*exit_code = ks_cli_usage(cmd, "unexpected argument '%s' (expected %s)",
						  (*pos)[max_pos], what);
		free(*pos);
		ks_opts_release(opts);
		return 1;
	}
	return 0;
}

/* The verdict names, for messages. */
static void verdict_list(struct ks_strbuf *sb)
{
	for (int v = 0; v < KS_VERDICT_COUNT; v++)
		ks_strbuf_addf(sb, "%s%s", v ? ", " : "", ks_verdict_name((enum ks_verdict)v));
}

/* --verdict V: the verdict's number into the int the row points to; a suggestion when misspelt. */
static int verdict_option(const struct ks_option *opt, const char *name, struct ks_error *err)
{
	enum ks_verdict v;
	const char *best = NULL;
	size_t best_dist = (size_t)-1;
	struct ks_strbuf sb;

	if (ks_verdict_parse(name, &v) == 0) {
		*(int *)opt->value = (int)v;
		return 0;
	}
	for (int i = 0; i < KS_VERDICT_COUNT; i++) {
		size_t d = ks_edit_distance(name, ks_verdict_name((enum ks_verdict)i));

		if (d < best_dist) {
			best_dist = d;
			best = ks_verdict_name((enum ks_verdict)i);
		}
	}
	ks_strbuf_init(&sb);
	verdict_list(&sb);
	if (best && ks_is_close(name, best))
		ks_fail(err, "unknown verdict '%s'; did you mean '%s'? (verdicts: %s)", name, best, sb.buf);
	else
		ks_fail(err, "unknown verdict '%s' (verdicts: %s)", name, sb.buf);
	ks_strbuf_release(&sb);
	return -1;
}

/* ls */

static const struct ks_help ls_help = {
	.usage = "ksearch archive ls [--verdict V] [--sort fitness|time|id] [--limit N] [--json]",
	.description = "List candidates, one a line: id, verdict, fitness, speed-of-light fraction,\n"
		       "cell (the bin along each grid axis; * marks the cell's elite), mutation,\n"
		       "parents, family and params.  --sort fitness (the default) puts the best\n"
		       "first; time puts the newest first; id the oldest.  Indexes give the order,\n"
		       "so --limit N reads only N records however large the archive is.",
	.examples = "  ksearch archive ls --limit 20\n"
		    "  ksearch archive ls --verdict wrong --sort time --limit 5\n"
		    "  ksearch archive ls --op gqa --gpu 'NVIDIA H200' --sort id --json > all.json\n",
	.exit_codes = NULL,
};

struct ls_ctx {
	struct ks_archive *ar;
	struct ks_archive_elite *elites;
	size_t n_elites;
	int json;
	uint64_t shown;
};

static int is_elite(const struct ls_ctx *ctx, uint64_t cell, uint64_t id)
{
	size_t lo = 0, hi = ctx->n_elites;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (ctx->elites[mid].cell < cell)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < ctx->n_elites && ctx->elites[lo].cell == cell && ctx->elites[lo].id == id;
}

static void format_cell(struct ks_archive *ar, uint64_t cell, struct ks_strbuf *sb)
{
	size_t n_axes, coords[KS_DESC_COUNT];

	ks_archive_grid(ar, &n_axes);
	ks_archive_cell_coords(ar, cell, coords);
	for (size_t i = 0; i < n_axes; i++)
		ks_strbuf_addf(sb, "%s%zu", i ? "," : "", coords[i]);
}

static void format_parents(const struct ks_record *rec, struct ks_strbuf *sb)
{
	for (size_t i = 0; i < rec->n_parents; i++)
		ks_strbuf_addf(sb, "%s%llu", i ? "," : "", (unsigned long long)rec->parents[i]);
	if (!sb->len)
		ks_strbuf_adds(sb, "-");
}

/* A text field as the tables show it: "-" for none. */
static const char *or_dash(const char *text)
{
	return *text ? text : "-";
}

/* ls --json: each record as stored. */
static int ls_json_row(const json_t *record, void *ctx_)
{
	struct ls_ctx *ctx = ctx_;

	ks_cli_json_printing();
	fputs(ctx->shown ? ",\n  " : "[\n  ", stdout);
	json_dumpf(record, stdout, KS_ARCHIVE_RECORD_JSON);
	ctx->shown++;
	return ferror(stdout) != 0;
}

static int ls_row(const struct ks_record *rec, void *ctx_, struct ks_error *err)
{
	struct ls_ctx *ctx = ctx_;
	struct ks_strbuf cell, parents, params;
	const char *verdict = ks_verdict_name(rec->result.verdict);
	uint64_t c;
	char why[128], fitness[32], sol[16];

	(void)err;
	if (!ctx->shown)
		printf("%8s  %-14s %8s %6s  %-9s %-9s %-9s %-14s %s\n", "id", "verdict", "fitness", "sol",
		       "cell", "mutation", "parents", "family", "params");
	ctx->shown++;
	ks_strbuf_init(&cell);
	ks_strbuf_init(&parents);
	ks_strbuf_init(&params);
	if (!ks_record_ok(rec)) {
		ks_strbuf_adds(&cell, "-");
		snprintf(fitness, sizeof(fitness), "-");
		snprintf(sol, sizeof(sol), "-");
	} else {
		if (ks_archive_cell_of_values(ctx->ar, rec->result.descriptors, rec->has_descriptor, &c, why,
					      sizeof(why)))
			ks_strbuf_adds(&cell, "outside");
		else {
			format_cell(ctx->ar, c, &cell);
			if (is_elite(ctx, c, rec->id))
				ks_strbuf_adds(&cell, " *");
		}
		snprintf(fitness, sizeof(fitness), "%.3f", rec->result.fitness);
		if (rec->has & KS_RECORD_SOL_FRACTION)
			snprintf(sol, sizeof(sol), "%.1f%%", 100 * rec->result.sol_fraction);
		else
			snprintf(sol, sizeof(sol), "-");
	}
	format_parents(rec, &parents);
	ks_archive_format_params(rec->params, &params);
	printf("%8llu  %-14s %8s %6s  %-9s %-9s %-9s %-14s %s\n", (unsigned long long)rec->id, verdict,
	       fitness, sol, cell.buf, or_dash(rec->mutation), parents.buf, or_dash(rec->family), params.buf);
	ks_strbuf_release(&cell);
	ks_strbuf_release(&parents);
	ks_strbuf_release(&params);
	/* stop early when the reader went away (| head) */
	return ferror(stdout) != 0;
}

static int archive_ls(int argc, char **argv)
{
	static const char *const sorts[] = { "fitness", "time", "id", NULL };
	static const enum ks_archive_sort sort_of[] = { KS_ARCHIVE_SORT_FITNESS, KS_ARCHIVE_SORT_TIME,
							KS_ARCHIVE_SORT_ID };
	struct ks_archive_pick pick = KS_ARCHIVE_PICK_INIT;
	struct ks_archive_query query = { -1, KS_ARCHIVE_SORT_FITNESS, 0 };
	struct ls_ctx ctx = { 0 };
	int sort = 0;
	struct ks_option opts[] = {
		KS_ARCHIVE_COMMON_OPTS(&pick),
		KS_OPT_CALLBACK(0, "verdict", &query.verdict, "V", verdict_option,
				"only candidates with this verdict"),
		KS_OPT_CHOICE(0, "sort", &sort, "KEY", sorts,
			      "fitness (best first, the default), time (newest first) or id"),
		KS_OPT_UINT64('n', "limit", &query.limit, "N", 1, "a number >= 1",
			      "show at most N candidates"),
		KS_OPT_BOOL(0, "json", &ctx.json, "print the records as a JSON list"),
		KS_OPT_END,
	};
	const char *cmd = "archive ls";
	const char **pos;
	size_t n_pos;
	struct ks_error err;
	int ret;

	if (parse(cmd, opts, &ls_help, argc, argv, &pos, &n_pos, 0, 0, "no arguments", &ret))
		return ret;
	free(pos);
	query.sort = sort_of[sort];
	ret = ks_archive_cli_open(cmd, &pick, &ctx.ar);
	if (ret)
		goto cleanup;
	ret = KS_EXIT_FAILED;
	if (!ctx.json && ks_archive_elites(ctx.ar, &ctx.elites, &ctx.n_elites, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	if ((ctx.json ? ks_archive_foreach(ctx.ar, &query, ls_json_row, &ctx, &err)
		      : ks_archive_foreach_record(ctx.ar, &query, ls_row, &ctx, &err)) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	if (ctx.json) {
		ks_cli_json_printing();
		fputs(ctx.shown ? "\n]\n" : "[]\n", stdout);
	} else if (!ctx.shown)
		fprintf(stderr, "no candidates%s%s in %s\n", query.verdict >= 0 ? " with verdict " : "",
			query.verdict >= 0 ? ks_verdict_name((enum ks_verdict)query.verdict) : "",
			ks_archive_path(ctx.ar));
	ret = KS_EXIT_OK;
cleanup:
	free(ctx.elites);
	ks_archive_close(ctx.ar);
	ks_opts_release(opts);
	return ret;
}

/* show */

static const struct ks_help show_help = {
	.usage = "ksearch archive show ID [--json] [--no-source]",
	.description = "Show one candidate: verdict and evidence, fitness and speed-of-light\n"
		       "fraction, family, params, parents (with their fitness), mutation, LLM use,\n"
		       "descriptors and the grid cell they put it in, per-workload timings, its\n"
		       "profile (Nsight Compute's counters, `ksearch profile`), its sanitizer check\n"
		       "(`ksearch sanitize`), and its source.\n"
		       "--json prints the record with its source as one object.",
	.examples = "  ksearch archive show 42\n"
		    "  ksearch archive show 42 --no-source\n"
		    "  ksearch archive show 42 --json | jq .workloads\n",
	.exit_codes = NULL,
};

static void show_parents(struct ks_archive *ar, const struct ks_record *rec)
{
	struct ks_record parent;

	if (!rec->n_parents)
		return;
	ks_record_init(&parent);
	printf("%-12s", "parents");
	for (size_t i = 0; i < rec->n_parents; i++) {
		struct ks_error err;
		uint64_t id = rec->parents[i];

		printf("%s#%llu", i ? ", " : "", (unsigned long long)id);
		if (ks_archive_get_record(ar, id, &parent, NULL, &err) < 0 || !parent.id)
			printf(" (not in this archive)");
		else if (ks_record_ok(&parent))
			printf(" (fitness %.3f)", parent.result.fitness);
		else
			printf(" (%s)", ks_verdict_name(parent.result.verdict));
	}
	ks_record_release(&parent);
	printf("\n");
}

static void show_cell(struct ks_archive *ar, const struct ks_record *rec)
{
	struct ks_archive_elite *elites = NULL;
	size_t n_axes, n_elites = 0, coords[KS_DESC_COUNT];
	const struct ks_grid_axis *axes = ks_archive_grid(ar, &n_axes);
	struct ks_error err;
	uint64_t cell;
	char why[256];

	if (rec->has_descriptor) {
		printf("%-12s", "descriptors");
		for (int d = 0, n = 0; d < KS_DESC_COUNT; d++)
			if (rec->has_descriptor & (1u << d))
				printf("%s%s=%g", n++ ? " " : "", ks_descriptor_name((enum ks_descriptor)d),
				       rec->result.descriptors[d]);
		printf("\n");
	}
	if (!ks_record_ok(rec))
		return;
	if (ks_archive_cell_of_values(ar, rec->result.descriptors, rec->has_descriptor, &cell, why,
				      sizeof(why))) {
		printf("%-12soutside the grid: %s\n", "cell", why);
		return;
	}
	ks_archive_cell_coords(ar, cell, coords);
	printf("%-12s%llu:", "cell", (unsigned long long)cell);
	for (size_t i = 0; i < n_axes; i++)
		printf(" %s [%g, %g)", ks_descriptor_name(axes[i].descriptor), axes[i].edges[coords[i]],
		       axes[i].edges[coords[i] + 1]);
	if (ks_archive_elites(ar, &elites, &n_elites, &err) == 0) {
		for (size_t i = 0; i < n_elites; i++) {
			if (elites[i].cell != cell)
				continue;
			if (elites[i].id == rec->id)
				printf("  (the cell's elite)");
			else
				printf("  (elite: #%llu, fitness %.3f)", (unsigned long long)elites[i].id,
				       elites[i].fitness);
		}
	}
	free(elites);
	printf("\n");
}

static const char *or_unknown(const char *text)
{
	return *text ? text : "?";
}

/*
 * Each workload's time on the length splits it was timed on (from
 * evaluator 3): the time above is the slowest's (from 4; the median of
 * them under 3), and the spread says how much the kernel's time depends on
 * how the lengths fall.
 */
static void show_splits(const struct ks_result *res)
{
	int header = 0;

	for (size_t i = 0; i < res->n_workloads; i++) {
		const struct ks_result_workload *w = &res->workloads[i];
		double lo = INFINITY, hi = 0, median = w->median_us;

		if (!w->n_splits)
			continue;
		if (!header++)
			printf("\nlength splits (the time above is %s; spread: (slowest - fastest) / "
			       "that time)\n",
			       res->evaluator >= 4 ? "the slowest's" : "their median");
		printf("%-16s", or_unknown(w->id));
		for (size_t k = 0; k < w->n_splits; k++) {
			double us = w->splits[k].median_us;

			lo = us < lo ? us : lo;
			hi = us > hi ? us : hi;
			printf(" %s %.2f us%s", or_unknown(w->splits[k].kind), us,
			       k + 1 < w->n_splits ? "," : "");
		}
		printf("  (spread %.0f%%)\n", median > 0 ? 100 * (hi - lo) / median : 0.0);
	}
}

static void show_workloads(const struct ks_record *rec)
{
	const struct ks_result *res = &rec->result;

	if (!res->n_workloads)
		return;
	printf("\n%-16s %10s %10s %10s %5s %10s %8s %9s %6s\n", "workload", "median_us", "p10_us", "p90_us",
	       "reps", "ref_us", "speedup", "floor_us", "sol");
	for (size_t i = 0; i < res->n_workloads; i++) {
		const struct ks_result_workload *w = &res->workloads[i];

		printf("%-16s %10.2f %10.2f %10.2f %5lld %10.2f %7.2fx %9.2f %5.1f%%\n", or_unknown(w->id),
		       w->median_us, w->p10_us, w->p90_us, (long long)w->reps, w->ref_median_us, w->speedup,
		       w->floor_us, 100 * w->sol_fraction);
	}
	show_splits(res);
}

/* The profiler's counters, or how to get them. */
static void show_profile(const struct ks_record *rec)
{
	const json_t *profile = rec->profile;
	char *text;

	if (!ks_record_ok(rec))
		return;
	if (!profile) {
		printf("\n%-12snot yet (`ksearch profile --op %s --id %llu`); until then dram_fraction holds "
		       "the "
		       "speed-of-light fraction and achieved_occupancy the theoretical occupancy\n",
		       "profile", or_unknown(rec->op), (unsigned long long)rec->id);
		return;
	}
	text = ks_profile_text(profile, "  ");
	printf("\n%-12s%s on %s, %lld launch%s, %.2f us under the profiler, %s\n%s", "profile",
	       ks_record_str(profile, "tool", "ncu"), ks_record_str(profile, "workload", "?"),
	       (long long)json_integer_value(json_object_get(profile, "launches")),
	       json_integer_value(json_object_get(profile, "launches")) == 1 ? "" : "es",
	       ks_record_num(profile, "duration_us"), ks_record_str(profile, "profiled", "-"),
	       text ? text : "");
	free(text);
}

/* The sanitizer's check, or how to make it. */
static void show_sanitizer(const struct ks_record *rec)
{
	const json_t *check = rec->sanitizer;
	char *text;

	if (!ks_record_ok(rec))
		return;
	if (!check) {
		printf("%-12snot checked (`ksearch sanitize --op %s --id %llu`)\n", "sanitizer",
		       or_unknown(rec->op), (unsigned long long)rec->id);
		return;
	}
	text = ks_sanitize_text(check);
	printf("%-12s%s, %s%s\n", "sanitizer", text ? text : "?", ks_record_str(check, "checked", "-"),
	       rec->sanitizer_failed ? "; demoted: no elite, no best" : "");
	free(text);
}

/* Timed again on fresh length splits (the search's confirmation of a workload's best), if it was. */
static void show_confirmation(const struct ks_record *rec)
{
	const json_t *c = rec->confirmation, *us;
	const char *status = ks_record_str(c, "status", "?"), *wid;

	if (!c)
		return;
	if (strcmp(status, "ok")) {
		printf("%-12s%s as %s when timed again (%s): no workload's best\n", "confirmed", status,
		       ks_record_str(c, "failed_as", "?"), ks_record_str(c, "why", "-"));
		return;
	}
	printf("%-12stimed again on fresh length splits:", "confirmed");
	json_object_foreach((json_t *)json_object_get(c, "times_us"), wid, us)
		printf(" %s %.2f us", wid, json_number_value(us));
	printf(" (it ranks among each workload's bests by the slower of its two times)\n");
}

static void show_text(const struct ks_record *rec, const char *source, int with_source)
{
	const char *evidence = rec->result.evidence;

	if (*evidence) {
		printf("\nevidence:\n");
		for (const char *line = evidence; *line;) {
			const char *nl = strchr(line, '\n');
			int len = nl ? (int)(nl - line) : (int)strlen(line);

			printf("  %.*s\n", len, line);
			line += len + (nl != NULL);
		}
	}
	if (with_source)
		printf("\nsource (sha256 %s):\n%s%s", or_unknown(rec->source_hash), source,
		       *source && source[strlen(source) - 1] != '\n' ? "\n" : "");
}

static void show_where(const struct ks_record *rec)
{
	struct ks_strbuf sb;

	if (rec->result.where.gpu < 0)
		return;
	ks_strbuf_init(&sb);
	ks_archive_cli_format_where(&rec->result.where, &sb);
	printf("%-12s%s\n", "timed on", sb.buf);
	ks_strbuf_release(&sb);
}

static void show_record(struct ks_archive *ar, const struct ks_record *rec, const char *source,
			int with_source)
{
	const struct ks_result *res = &rec->result;
	struct ks_archive_cli_lineage lineage = { 0 };
	struct ks_error err;
	const char *origin = NULL;
	struct ks_strbuf sb;
	int own_path;

	/* a knob or LLM child is a family of its own: name the seed it came from */
	if (ks_archive_cli_lineage_build(ar, rec, &lineage, &err) == 0)
		origin = ks_export_origin(rec, &lineage.chain);

	printf("candidate #%llu  %s", (unsigned long long)rec->id, ks_verdict_name(res->verdict));
	if (ks_record_ok(rec)) {
		printf("  fitness %.3f", res->fitness);
		if (rec->has & KS_RECORD_SOL_FRACTION)
			printf("  speed of light %.1f%%", 100 * res->sol_fraction);
	}
	printf("\n%-12s%s on %s%s%s%s\n", "operator", or_unknown(rec->op), or_unknown(rec->gpu),
	       *res->arch ? " (" : "", res->arch, *res->arch ? ")" : "");
	/* a seed's path is its file; a derived source's is its family's name, not repeated */
	own_path = *rec->path && strcmp(rec->path, rec->family);
	printf("%-12s%s%s%s%s%s%s\n", "family", *rec->family ? rec->family : "-", origin ? ", from " : "",
	       origin ? origin : "", own_path ? "  (" : "", own_path ? rec->path : "", own_path ? ")" : "");
	ks_strbuf_init(&sb);
	ks_archive_format_params(rec->params, &sb);
	printf("%-12s%s\n", "params", sb.len ? sb.buf : "(none)");
	ks_strbuf_release(&sb);
	printf("%-12s%s\n", "mutation", *rec->mutation ? rec->mutation : "-");
	if (rec->duplicate_of)
		printf("%-12s#%llu: the same binary (cubin, launch plan, scratch), so its result; not run "
		       "again\n",
		       "duplicate", (unsigned long long)rec->duplicate_of);

	show_parents(ar, rec);
	if (rec->has & KS_RECORD_PROMPT_ID)
		printf("%-12s%llu\n", "prompt", (unsigned long long)rec->prompt_id);
	if (rec->llm)
		printf("%-12s%lld prompt + %lld completion tokens, $%.4f\n", "llm",
		       (long long)json_integer_value(json_object_get(rec->llm, "prompt_tokens")),
		       (long long)json_integer_value(json_object_get(rec->llm, "completion_tokens")),
		       ks_record_num(rec->llm, "cost_usd"));
	show_cell(ar, rec);
	/* the serialiser writes "timing" when any of them was measured */
	if (res->timing.compile_s || res->timing.verify_s || res->timing.time_s || res->timing.wall_s ||
	    res->timing.eval_s)
		printf("%-12scompile %.2f s, verify %.2f s, time %.2f s\n", "timing", res->timing.compile_s,
		       res->timing.verify_s, res->timing.time_s);
	show_where(rec);
	printf("%-12s%s\n", "created", *rec->created ? rec->created : "-");
	show_workloads(rec);
	show_profile(rec);
	show_sanitizer(rec);
	show_confirmation(rec);
	show_text(rec, source, with_source);
	ks_archive_cli_lineage_release(&lineage);
}

/*
 * The fastest candidate of each workload and what dispatching to them
 * would give; mark (may be 0) flags the workloads whose best it is.
 */
static void print_workload_bests_of(const json_t *bests, uint64_t mark)
{
	const char *wid;
	const json_t *b;

	if (!json_object_size(bests))
		return;
	printf("\nbest per workload (what `ksearch export-best --dispatch` combines):\n%-16s %10s %12s %9s\n",
	       "workload", "id", "time us", "speedup");
	json_object_foreach((json_t *)bests, wid, b)
	{
		double median = json_number_value(json_object_get(b, "median_us"));
		uint64_t id = (uint64_t)json_integer_value(json_object_get(b, "id"));

		printf("%-16s %10llu %12.2f %8.2fx%s\n", wid, (unsigned long long)id, median,
		       median > 0 ? json_number_value(json_object_get(b, "ref_median_us")) / median : 0.0,
		       mark && id == mark ? "  <- this one" : "");
	}
	printf("%-16s fitness %.3f (geometric-mean speedup, each workload on its own best)\n", "dispatch",
	       ks_archive_dispatch_fitness(bests));
}

static void print_workload_bests(const json_t *bests)
{
	print_workload_bests_of(bests, 0);
}

static int archive_show(int argc, char **argv)
{
	struct ks_archive_pick pick = KS_ARCHIVE_PICK_INIT;
	int json = 0, no_source = 0;
	struct ks_option opts[] = {
		KS_ARCHIVE_COMMON_OPTS(&pick),
		KS_OPT_BOOL(0, "json", &json, "print the record and its source as JSON"),
		KS_OPT_BOOL(0, "no-source", &no_source, "leave the source text out"),
		KS_OPT_END,
	};
	const char *cmd = "archive show";
	struct ks_archive *ar = NULL;
	json_t *record = NULL, *bests = NULL;

	char *source = NULL;
	const char **pos;
	size_t n_pos;
	uint64_t id;
	int ret;

	if (parse(cmd, opts, &show_help, argc, argv, &pos, &n_pos, 1, 1, "one candidate id", &ret))
		return ret;
	ret = KS_EXIT_USAGE;
	if (ks_archive_cli_parse_id(cmd, pos[0], &id) < 0)
		goto cleanup;
	ret = ks_archive_cli_open(cmd, &pick, &ar);
	if (ret)
		goto cleanup;
	ret = KS_EXIT_FAILED;
	if (ks_archive_cli_get(cmd, ar, id, &record, &source) < 0)
		goto cleanup;
	{
		struct ks_error err;

		if (ks_archive_workload_bests(ar, &bests, &err) < 0) {
			ks_cli_error(cmd, "%s", err.msg);
			goto cleanup;
		}
	}
	if (json) {
		json_t *best_of = json_array();
		const char *wid;
		const json_t *b;

		if (!no_source)
			json_object_set_new(record, "source", json_string(source));
		/* the workloads on which this candidate is the fastest of the archive */
		json_object_foreach(bests, wid,
				    b) if ((uint64_t)json_integer_value(json_object_get(b, "id")) == id)
			json_array_append_new(best_of, json_string(wid));
		json_object_set_new(record, "best_on_workloads", best_of);
		json_object_set_new(record, "dispatch_fitness",
				    json_real(ks_archive_dispatch_fitness(bests)));
		ks_cli_json_print(record, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
	} else {
		struct ks_record rec;
		struct ks_error err;

		ks_record_init(&rec);
		if (ks_record_parse(record, &rec, &err) < 0) {
			ks_cli_error(cmd, "%s", err.msg);
			goto cleanup;
		}
		show_record(ar, &rec, source, !no_source);
		ks_record_release(&rec);
		print_workload_bests_of(bests, id);
	}
	ret = KS_EXIT_OK;
cleanup:
	json_decref(record);
	json_decref(bests);
	free(source);
	free(pos);
	ks_archive_close(ar);
	ks_opts_release(opts);
	return ret;
}

/* stats */

static const struct ks_help stats_help = {
	.usage = "ksearch archive stats [--json]",
	.description = "Counts by verdict, distinct sources, the grid's coverage (filled cells /\n"
		       "cells), the QD-score (the sum over elites of fitness minus the archive's\n"
		       "offset), the best fitness, the fastest kernel of each benchmark workload\n"
		       "and which GPU of what host timed it (a search resumed on another machine\n"
		       "mixes hosts, whose times differ even for one GPU model), and how the best,\n"
		       "coverage and QD-score grew with the number of evaluations; then the\n"
		       "export-best commands that take the best home (and, when other kernels are\n"
		       "faster on some workloads, all of them as one dispatch).  Reads only the\n"
		       "kept metrics and the bests' records, so it answers at once on any\n"
		       "archive.  --json adds the full history, for plots.",
	.examples = "  ksearch archive stats\n"
		    "  ksearch archive stats --json | jq '.history[] | [.evals, .best] | @tsv'\n",
	.exit_codes = NULL,
};

/* The LLM totals the search keeps in the run state ("llm/usage"), or NULL. */
static json_t *llm_usage(struct ks_archive *ar)
{
	void *data = NULL;
	size_t size = 0;
	struct ks_error err;
	json_t *usage = NULL;

	if (ks_archive_state_get(ar, "llm/usage", &data, &size, &err) == 0 && data)
		usage = json_loadb(data, size, 0, NULL);
	free(data);
	if (!json_is_object(usage)) {
		json_decref(usage);
		return NULL;
	}
	return usage;
}

static json_t *stats_json(struct ks_archive *ar, const struct ks_archive_metrics *m,
			  const struct ks_archive_qd_point *points, size_t n)
{
	json_t *verdicts = json_object(), *history = json_array();

	for (int v = 0; v < KS_VERDICT_COUNT; v++)
		json_object_set_new(verdicts, ks_verdict_name((enum ks_verdict)v),
				    json_integer((json_int_t)m->by_verdict[v]));
	for (size_t i = 0; i < n; i++)
		json_array_append_new(history, json_pack("{s:I, s:f, s:f, s:f, s:I}", "evals",
							 (json_int_t)points[i].evals, "best",
							 points[i].best_fitness, "coverage",
							 points[i].coverage, "qd_score", points[i].qd_score,
							 "cells_filled", (json_int_t)points[i].cells_filled));
	return json_pack("{s:s, s:s, s:s, s:I, s:o, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:I, s:o}",
			 "archive", ks_archive_path(ar), "op", ks_archive_op(ar), "gpu", ks_archive_gpu(ar),
			 "candidates", (json_int_t)m->candidates, "verdicts", verdicts, "sources",
			 (json_int_t)m->sources, "source_bytes", (json_int_t)m->source_bytes, "cells",
			 (json_int_t)m->cells, "cells_filled", (json_int_t)m->cells_filled, "coverage",
			 m->coverage, "qd_score", m->qd_score, "qd_offset", m->qd_offset, "best_fitness",
			 m->best_fitness, "best_id", (json_int_t)m->best_id, "history", history);
}

/*
 * Where each workload's best was timed: {"GPU 0 (GPU-...) of host ...":
 * [workload ids]} in *text, and a list of {"workload", "id", "where"} in
 * *json.  The bests are a handful of records, so stats still answers at
 * once; one that does not read is named, and stats goes on.
 */
static void bests_timed_on(struct ks_archive *ar, const json_t *bests, json_t **text, json_t **json)
{
	struct ks_error err;
	const char *wid;
	const json_t *b;

	*text = json_object();
	*json = json_array();
	json_object_foreach((json_t *)bests, wid, b)
	{
		uint64_t id = (uint64_t)json_integer_value(json_object_get(b, "id"));
		struct ks_record rec;
		json_t *record = NULL, *ids;
		struct ks_strbuf sb;

		ks_record_init(&rec);
		ks_strbuf_init(&sb);
		/* a record that does not read says so here; the rest of stats does not need it */
		if (ks_archive_get_record(ar, id, &rec, NULL, &err) < 0 ||
		    ks_archive_get(ar, id, &record, NULL, &err) < 0)
			ks_strbuf_addf(&sb, "unknown (#%llu does not read: `ksearch archive verify`)",
				       (unsigned long long)id);
		else if (rec.result.where.gpu >= 0)
			ks_archive_cli_format_where(&rec.result.where, &sb);
		else
			ks_strbuf_addf(&sb, "not recorded");
		if (!(ids = json_object_get(*text, sb.buf))) {
			ids = json_array();
			json_object_set_new(*text, sb.buf, ids);
		}
		json_array_append_new(ids, json_string(wid));
		json_array_append_new(*json,
				      json_pack("{s:s, s:I, s:O?}", "workload", wid, "id", (json_int_t)id,
						"where", json_object_get(record, "where")));
		json_decref(record);
		ks_strbuf_release(&sb);
		ks_record_release(&rec);
	}
}

static void print_bests_timed_on(const json_t *text)
{
	const char *where;
	const json_t *ids, *id;
	size_t i;

	if (!json_object_size(text) || (json_object_size(text) == 1 && json_object_get(text, "not recorded")))
		return; /* an archive from before "where" was kept */
	printf("%-12s", "timed on");
	if (json_object_size(text) > 1)
		printf("%zu GPUs or hosts: compare their times only roughly (hosts of one GPU model "
		       "differ)\n",
		       json_object_size(text));
	json_object_foreach((json_t *)text, where, ids)
	{
		if (json_object_size(text) > 1)
			printf("%-12s", "");
		printf("%s:", where);
		json_array_foreach(ids, i, id) printf(" %s", json_string_value(id));
		printf("\n");
	}
}

static const char *human_bytes(uint64_t bytes, char *buf, size_t size)
{
	if (bytes < 10000)
		snprintf(buf, size, "%llu bytes", (unsigned long long)bytes);
	else if (bytes < 10000000)
		snprintf(buf, size, "%.1f kB", (double)bytes / 1e3);
	else if (bytes < 10000000000ull)
		snprintf(buf, size, "%.1f MB", (double)bytes / 1e6);
	else
		snprintf(buf, size, "%.1f GB", (double)bytes / 1e9);
	return buf;
}

static void print_history(const struct ks_archive_qd_point *points, size_t n, uint64_t evals)

{
	printf("\nbest over time:\n%12s %10s %9s %12s\n", "evals", "best", "coverage", "QD-score");
	for (size_t i = 0; i < n; i++)
		printf("%12llu %10.3f %8.1f%% %12.3f\n", (unsigned long long)points[i].evals,
		       points[i].best_fitness, 100 * points[i].coverage, points[i].qd_score);
	if (n && points[n - 1].evals < evals)
		printf("%12llu %10s %9s %12s  (now)\n", (unsigned long long)evals, "same", "same", "same");
}

static int archive_stats(int argc, char **argv)
{
	struct ks_archive_pick pick = KS_ARCHIVE_PICK_INIT;
	int json = 0;
	struct ks_option opts[] = {
		KS_ARCHIVE_COMMON_OPTS(&pick),
		KS_OPT_BOOL(0, "json", &json, "print JSON, with the full history"),
		KS_OPT_END,
	};
	const char *cmd = "archive stats";
	struct ks_archive *ar = NULL;
	struct ks_archive_metrics m;
	json_t *usage = NULL, *bests = NULL, *timed_on = NULL, *timed_on_json = NULL;
	struct ks_archive_qd_point *points = NULL;
	size_t n_points = 0, n_axes;
	const struct ks_grid_axis *axes;
	struct ks_error err;
	char size[32];
	const char **pos;
	size_t n_pos;
	int ret;

	if (parse(cmd, opts, &stats_help, argc, argv, &pos, &n_pos, 0, 0, "no arguments", &ret))
		return ret;
	free(pos);
	ret = ks_archive_cli_open(cmd, &pick, &ar);
	if (ret)
		goto cleanup;
	ret = KS_EXIT_FAILED;
	/* the text shows a dozen points; --json all of them, for plots */
	if (ks_archive_metrics(ar, &m, &err) < 0 ||
	    ks_archive_history(ar, json ? 0 : 12, &points, &n_points, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	usage = llm_usage(ar);
	if (ks_archive_workload_bests(ar, &bests, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	bests_timed_on(ar, bests, &timed_on, &timed_on_json);
	if (json) {
		json_t *doc = stats_json(ar, &m, points, n_points);

		if (usage)
			json_object_set(doc, "llm", usage);
		json_object_set(doc, "workload_best", bests);
		json_object_set(doc, "workload_best_timed_on", timed_on_json);
		json_object_set_new(doc, "dispatch_fitness", json_real(ks_archive_dispatch_fitness(bests)));
		ks_cli_json_print(doc, JSON_INDENT(2));
		json_decref(doc);
		ret = KS_EXIT_OK;
		goto cleanup;
	}
	axes = ks_archive_grid(ar, &n_axes);
	printf("%-12s%s  (%s on %s)\n", "archive", ks_archive_path(ar), ks_archive_op(ar),
	       ks_archive_gpu(ar));
	printf("%-12s%llu  (%llu distinct sources, %s of source text)\n", "candidates",
	       (unsigned long long)m.candidates, (unsigned long long)m.sources,
	       human_bytes(m.source_bytes, size, sizeof(size)));
	for (int v = 0; v < KS_VERDICT_COUNT; v++)
		printf("  %-16s %10llu  %5.1f%%\n", ks_verdict_name((enum ks_verdict)v),
		       (unsigned long long)m.by_verdict[v],
		       m.candidates ? 100.0 * (double)m.by_verdict[v] / (double)m.candidates : 0.0);
	printf("%-12s%llu cells (", "grid", (unsigned long long)m.cells);
	for (size_t i = 0; i < n_axes; i++)
		printf("%s%s %zu", i ? " x " : "", ks_descriptor_name(axes[i].descriptor),
		       axes[i].n_edges - 1);
	printf("), %llu filled: coverage %.1f%%\n", (unsigned long long)m.cells_filled, 100 * m.coverage);
	printf("%-12s%.3f  (sum over elites of fitness - %g)\n", "QD-score", m.qd_score, m.qd_offset);
	if (m.best_id)
		printf("%-12s%.3f  (#%llu)\n", "best", m.best_fitness, (unsigned long long)m.best_id);
	else
		printf("%-12snone yet (no candidate is ok)\n", "best");
	print_workload_bests(bests);
	print_bests_timed_on(timed_on);
	if (usage)
		printf("%-12s%lld requests (%lld failed), %lld prompt + %lld completion tokens, $%.4f  "
		       "(over every run; `ksearch archive prompts` has the strategies)\n",
		       "LLM", (long long)json_integer_value(json_object_get(usage, "requests")),
		       (long long)json_integer_value(json_object_get(usage, "failed")),
		       (long long)json_integer_value(json_object_get(usage, "prompt_tokens")),
		       (long long)json_integer_value(json_object_get(usage, "completion_tokens")),
		       json_number_value(json_object_get(usage, "cost_usd")));
	if (usage && (json_integer_value(json_object_get(usage, "reasoning_tokens")) ||
		      json_integer_value(json_object_get(usage, "cached_tokens")) ||
		      json_integer_value(json_object_get(usage, "cut_off"))))
		printf("%-12sof those, %lld reasoning and %lld cached prompt tokens; %lld answers cut off at "
		       "the "
		       "budget (--max-tokens)\n",
		       "", (long long)json_integer_value(json_object_get(usage, "reasoning_tokens")),
		       (long long)json_integer_value(json_object_get(usage, "cached_tokens")),
		       (long long)json_integer_value(json_object_get(usage, "cut_off")));
	if (n_points)
		print_history(points, n_points, m.candidates);
	if (m.best_id) {
		printf("\n");
		ks_archive_cli_take_home(ar, ks_archive_op(ar), pick.root, pick.gpu, m.best_id);
	}
	ret = KS_EXIT_OK;
cleanup:
	json_decref(usage);
	json_decref(bests);
	json_decref(timed_on);
	json_decref(timed_on_json);
	free(points);
	ks_archive_close(ar);
	ks_opts_release(opts);
	return ret;
}

/* export */

static const struct ks_help export_help = {
	.usage = "ksearch archive export [--elites] [-o FILE]",
	.description = "Write the archive as JSON (the format is in archive/README.md): every\n"
		       "candidate record, the source texts by SHA-256, the grid and the strategy\n"
		       "prompts.  --elites keeps only the best candidate of each cell (and every\n"
		       "prompt).  The export is one snapshot, taken while a search may go on\n"
		       "writing.  `ksearch archive import` reads it back, here or on another\n"
		       "machine.",
	.examples = "  ksearch archive export > gqa-h200.json\n"
		    "  ksearch archive export --elites -o elites.json\n",
	.exit_codes = NULL,
};

static int archive_export(int argc, char **argv)
{
	struct ks_archive_pick pick = KS_ARCHIVE_PICK_INIT;
	const char *output = NULL;
	int elites = 0;
	struct ks_option opts[] = {
		KS_ARCHIVE_COMMON_OPTS(&pick),
		KS_OPT_BOOL(0, "elites", &elites, "only the elites of the grid"),
		KS_OPT_STRING('o', "output", &output, "FILE", "write to FILE instead of stdout"),
		KS_OPT_END,
	};
	const char *cmd = "archive export";
	struct ks_archive *ar = NULL;
	struct ks_error err;
	FILE *out = stdout;
	const char **pos;
	size_t n_pos;
	int ret;

	if (parse(cmd, opts, &export_help, argc, argv, &pos, &n_pos, 0, 0,
		  "no arguments (the export goes to stdout or -o FILE)", &ret))
		return ret;
	free(pos);
	ret = ks_archive_cli_open(cmd, &pick, &ar);
	if (ret)
		goto cleanup;
	ret = KS_EXIT_FAILED;
	if (output && !(out = fopen(output, "w"))) {
		ks_cli_error(cmd, "cannot write %s: %s", output, strerror(errno));
		out = stdout;
		goto cleanup;
	}
	if (ks_archive_export(ar, out, elites ? KS_ARCHIVE_EXPORT_ELITES : 0, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	ret = KS_EXIT_OK;
cleanup:
	if (out != stdout && fclose(out) && ret == KS_EXIT_OK) {
		ks_cli_error(cmd, "writing %s: %s", output, strerror(errno));
		ret = KS_EXIT_FAILED;
	}
	ks_archive_close(ar);
	ks_opts_release(opts);
	return ret;
}

/* import */

static const struct ks_help import_help = {
	.usage = "ksearch archive import FILE|- [--archive DIR] [--op NAME] [--gpu MODEL]",
	.description = "Add the candidates of an export (from `ksearch archive export`, or written\n"
		       "by hand: archive/README.md) to the archive of its operator and GPU, or of\n"
		       "--op and --gpu; the archive is created when there is none.  The whole file\n"
		       "is checked first: an error (named by field) leaves the archive unchanged.\n"
		       "Into an empty archive the ids are kept; otherwise candidates get new ids\n"
		       "and those already present (same source and params) are skipped.  Elites\n"
		       "are placed with the archive's own grid.  Strategy prompts keep their ids;\n"
		       "one whose id the archive holds already is skipped.  FILE - reads stdin.\n"
		       "An import trusts the file: its verdicts and times are not measured again.\n"
		       "Before trusting those of a file you did not make, re-time its kernels: the\n"
		       "source from `ksearch archive show ID`, with its params, to `ksearch check`.",
	.examples = "  ksearch archive import gqa-h200.json\n"
		    "  ksearch archive import colleague.json --archive /data/archive --gpu 'NVIDIA H100'\n",
	.exit_codes = NULL,
};

static void import_dirs_note(struct ks_archive_new_dirs *d, const char *root, const char *op, const char *gpu)
{
	char *data;
	struct stat st;

	d->archive = ks_archive_dir(root, op, gpu);
	data = ks_path_join(d->archive, "data.mdb");
	d->new_archive = stat(data, &st) != 0;
	free(data);
	for (char *p = d->archive;; p++) {
		if (*p != '/' && *p)
			continue;
		if (p > d->archive && p[-1] != '/') {
			char *prefix = ks_strndup(d->archive, (size_t)(p - d->archive));

			if (stat(prefix, &st) == 0) {
				free(prefix);
			} else {
				KS_ALLOC_GROW(d->made, d->n_made + 1, d->alloc);
				d->made[d->n_made++] = prefix;
			}
		}
		if (!*p)
			break;
	}
}

void ks_archive_cli_new_dirs_undo(const struct ks_archive_new_dirs *d)
{
	char *path;

	if (!d->archive || !d->new_archive)
		return;
	path = ks_path_join(d->archive, "data.mdb");
	unlink(path);
	free(path);
	path = ks_path_join(d->archive, "lock.mdb");
	unlink(path);
	free(path);
	for (size_t i = d->n_made; i-- > 0;)
		rmdir(d->made[i]);
}

void ks_archive_cli_new_dirs_release(struct ks_archive_new_dirs *d)
{
	for (size_t i = 0; i < d->n_made; i++)
		free(d->made[i]);
	free(d->made);
	free(d->archive);
}

int ks_archive_cli_import_open(const char *cmd, const struct ks_archive_pick *pick, const json_t *doc,
			       struct ks_archive **ar, struct ks_archive_new_dirs *dirs)
{
	const char *root = pick->root;
	struct ks_archive_options options = { .flags = KS_ARCHIVE_CREATE };
	const char *op, *gpu;
	struct ks_grid_axis *grid = NULL;
	size_t n_grid = 0;
	struct ks_error err;
	int ret = KS_EXIT_FAILED;

	if (ks_archive_export_header(doc, &op, &gpu, &grid, &n_grid, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		return KS_EXIT_FAILED;
	}
	if (pick->op)
		op = pick->op;
	if (pick->gpu)
		gpu = pick->gpu;
	if (!*op || strchr(op, '/') || !strcmp(op, ".") || !strcmp(op, "..")) {
		ks_cli_error(cmd, "'%s' is not an operator name", op);
		goto cleanup;
	}
	import_dirs_note(dirs, root, op, gpu);
	if (dirs->new_archive) {
		/* a new archive takes the file's grid; an existing one keeps its own */
		options.grid = grid;
		options.n_grid = n_grid;
		options.qd_offset = json_number_value(json_object_get(doc, "qd_offset"));
	}
	if (ks_archive_open(ar, root, op, gpu, &options, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	ret = 0;
cleanup:
	ks_grid_axes_free(grid, n_grid);
	return ret;
}

static int archive_import(int argc, char **argv)
{
	struct ks_archive_pick pick = KS_ARCHIVE_PICK_INIT;
	struct ks_option opts[] = { KS_ARCHIVE_COMMON_OPTS(&pick), KS_OPT_END };
	const char *cmd = "archive import";
	struct ks_archive *ar = NULL;
	struct ks_archive_import_result result;
	struct ks_error err;
	json_error_t jerr;
	json_t *doc = NULL;
	struct ks_archive_new_dirs dirs = { 0 };
	const char **pos;
	size_t n_pos;
	int ret;

	if (parse(cmd, opts, &import_help, argc, argv, &pos, &n_pos, 1, 1, "one export file", &ret))
		return ret;
	ret = KS_EXIT_FAILED;
	doc = strcmp(pos[0], "-") ? json_load_file(pos[0], 0, &jerr) : json_loadf(stdin, 0, &jerr);
	if (!doc) {
		if (jerr.line > 0)
			ks_cli_error(cmd, "%s:%d:%d: %s", pos[0], jerr.line, jerr.column, jerr.text);
		else
			ks_cli_error(cmd, "%s: %s", pos[0], jerr.text);
		goto cleanup;
	}
	ret = ks_archive_cli_import_open(cmd, &pick, doc, &ar, &dirs);
	if (ret)
		goto cleanup;
	ret = KS_EXIT_FAILED;
	if (ks_archive_import(ar, doc, &result, &err) < 0) {
		ks_cli_error(cmd, "%s: %s (the archive is unchanged)", pos[0], err.msg);
		goto cleanup;
	}
	printf("imported %llu candidates into %s%s", (unsigned long long)result.imported, ks_archive_path(ar),
	       result.ids_kept ? " (ids kept)" : " (new ids)");
	if (result.prompts_imported)
		printf(", and %llu strategy prompt%s", (unsigned long long)result.prompts_imported,
		       result.prompts_imported == 1 ? "" : "s");
	if (result.skipped)
		printf("; skipped %llu already there", (unsigned long long)result.skipped);
	if (result.prompts_skipped)
		printf("; skipped %llu prompt%s whose id the archive holds already",
		       (unsigned long long)result.prompts_skipped, result.prompts_skipped == 1 ? "" : "s");
	printf("\n");
	ret = KS_EXIT_OK;
cleanup:
	ks_archive_close(ar);
	if (ret)
		ks_archive_cli_new_dirs_undo(&dirs);
	ks_archive_cli_new_dirs_release(&dirs);
	json_decref(doc);
	free(pos);
	ks_opts_release(opts);
	return ret;
}

/* verify */

static const struct ks_help verify_help = {
	.usage = "ksearch archive verify",
	.description = "Check the archive's integrity from one snapshot: every record parses and\n"
		       "its source text is stored and matches its hash; every index entry and\n"
		       "every elite of the grid names an existing record, and each cell holds the\n"
		       "best record that falls in it; the counters, coverage, QD-score and best\n"
		       "match a recount.  Prints what is wrong, one problem a line.  Reads the\n"
		       "whole archive; works while a search writes.",
	.examples = "  ksearch archive verify\n  ksearch archive verify --archive /data/archive --op gqa\n",
	.exit_codes = "  3  the archive has problems (listed)\n",
};

static int archive_verify(int argc, char **argv)
{
	struct ks_archive_pick pick = KS_ARCHIVE_PICK_INIT;
	struct ks_option opts[] = { KS_ARCHIVE_COMMON_OPTS(&pick), KS_OPT_END };
	const char *cmd = "archive verify";
	struct ks_archive *ar = NULL;
	struct ks_archive_metrics m;
	char **problems = NULL;
	size_t n_problems = 0;
	struct ks_error err;
	const char **pos;
	size_t n_pos;
	int ret;

	if (parse(cmd, opts, &verify_help, argc, argv, &pos, &n_pos, 0, 0, "no arguments", &ret))
		return ret;
	free(pos);
	ret = ks_archive_cli_open(cmd, &pick, &ar);
	if (ret)
		goto cleanup;
	ret = KS_EXIT_FAILED;
	if (ks_archive_verify(ar, &problems, &n_problems, &err) < 0 || ks_archive_metrics(ar, &m, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	for (size_t i = 0; i < n_problems; i++)
		printf("problem: %s\n", problems[i]);
	if (n_problems) {
		ks_cli_error(cmd, "%s has %zu problem%s", ks_archive_path(ar), n_problems,
			     n_problems == 1 ? "" : "s");
		ret = 3;
		goto cleanup;
	}
	printf("ok: %s: %llu candidates, %llu sources, %llu elites; counters, indexes and metrics agree\n",
	       ks_archive_path(ar), (unsigned long long)m.candidates, (unsigned long long)m.sources,
	       (unsigned long long)m.cells_filled);
	ret = KS_EXIT_OK;
cleanup:
	ks_archive_problems_free(problems, n_problems);
	ks_archive_close(ar);
	ks_opts_release(opts);
	return ret;
}

/* The subcommand table */

static const struct ks_cmd subcommands[] = {
	{ "ls", archive_ls, "list candidates (filter by verdict; sort by fitness, time or id)" },
	{ "show", archive_show, "one candidate: source, params, descriptors, timings, verdict, parents" },
	{ "grid", ks_archive_cmd_grid, "a heatmap of the best fitness per cell over two descriptors" },
	{ "stats", archive_stats, "counts by verdict, coverage, QD-score, best over time" },
	{ "lineage", ks_archive_cmd_lineage, "the chain of ancestors, with mutation and fitness change" },
	{ "diff", ks_archive_cmd_diff, "param changes, a unified diff of sources, metric deltas" },
	{ "prompts", ks_archive_cmd_prompts, "the strategy prompts: reward, statistics, lineage, text" },
	{ "export", archive_export, "write the archive (or its elites) as portable JSON" },
	{ "import", archive_import, "add the candidates of an export" },
	{ "verify", archive_verify, "check integrity and say what is wrong" },
	{ "salvage", ks_archive_cmd_salvage, "copy what is readable of a damaged archive into a new one" },
};
#define N_SUBCOMMANDS (sizeof(subcommands) / sizeof(subcommands[0]))

static void print_archive_help(FILE *out)
{
	fprintf(out,
		"usage: ksearch archive <subcommand> [--archive DIR] [--op NAME] [--gpu MODEL] [options]\n"
		"\n"
		"Inspect, share and check the MAP-Elites archive a search writes: every\n"
		"candidate evaluated, the grid of elites, and the quality-diversity metrics.\n"
		"Archives live in DIR/<operator>/<gpu model>/ (DIR is ./archive unless\n"
		"--archive says otherwise); --op and --gpu are needed only when DIR holds\n"
		"several.  Every subcommand but import only reads, so all of them work while\n"
		"`ksearch evolve` writes to the same archive.\n"
		"\n"
		"subcommands:\n");
	for (size_t i = 0; i < N_SUBCOMMANDS; i++)
		fprintf(out, "  %-9s %s\n", subcommands[i].name, subcommands[i].summary);
	fprintf(out, "\n"
		     "examples:\n"
		     "  ksearch archive ls --limit 20                  the 20 best candidates\n"
		     "  ksearch archive show 42                        everything about candidate 42\n"
		     "  ksearch archive grid --x smem_bytes --y launches\n"
		     "  ksearch archive stats\n"
		     "  ksearch archive lineage 42\n"
		     "  ksearch archive diff 17 42\n"
		     "  ksearch archive prompts                        strategies, the most rewarding first\n"
		     "  ksearch archive export --elites > elites.json\n"
		     "  ksearch archive import elites.json --archive /tmp/other\n"
		     "  ksearch archive verify\n"
		     "  ksearch archive ls --help                      options of one subcommand\n"
		     "\n"
		     "exit codes: 0 ok, 1 the command failed, 2 usage error; `verify` 3 when the\n"
		     "archive has problems.\n");
}

int cmd_archive(int argc, char **argv)
{
	const char *best = NULL;
	size_t best_dist = (size_t)-1;

	if (argc < 2) {
		print_archive_help(stderr);
		return KS_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		print_archive_help(stdout);
		return KS_EXIT_OK;
	}
	for (size_t i = 0; i < N_SUBCOMMANDS; i++) {
		size_t d;

		if (!strcmp(argv[1], subcommands[i].name))
			return subcommands[i].fn(argc - 1, argv + 1);
		d = ks_edit_distance(argv[1], subcommands[i].name);
		if (d < best_dist) {
			best_dist = d;
			best = subcommands[i].name;
		}
	}
	if (argv[1][0] == '-')
		return ks_cli_usage("archive",
				    "expected a subcommand before options (ls, show, grid, stats, "
				    "lineage, diff, prompts, export, import, verify); got '%s'",
				    argv[1]);
	if (best && ks_is_close(argv[1], best))
		return ks_cli_usage("archive", "unknown subcommand '%s'; did you mean '%s'?", argv[1], best);
	return ks_cli_usage("archive",
			    "unknown subcommand '%s' (ls, show, grid, stats, lineage, diff, "
			    "prompts, export, import, verify)",
			    argv[1]);
}
