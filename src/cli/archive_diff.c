/*
 * archive_diff.c - `ksearch archive lineage` (a candidate's chain of first
 * parents, with the mutation and fitness change at each step) and
 * `ksearch archive diff` (what changed between two candidates: params,
 * descriptors, timings, and a unified diff of their sources).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive_cli.h"

/* A lineage longer than this is a cycle in damaged data, not a search. */
#define MAX_LINEAGE 100000
/* Lines of context around a change, as diff -u. */
#define CONTEXT 3
/* The line-by-line diff is exact up to this many cells; beyond, the middle is replaced whole. */
#define MAX_DIFF_CELLS ((size_t)4 << 20)

/* "SPLITS 1 -> 8, WARPS 4 -> 8" (changed, added, removed params of b against a). */
static void param_changes(const struct ks_record *a, const struct ks_record *b, struct ks_strbuf *sb)
{
	const json_t *pa = a->params, *pb = b->params;
	const char *fa = a->family, *fb = b->family;
	const char *key;
	json_t *v;
	size_t start = sb->len;

	if (strcmp(fa, fb))
		ks_strbuf_addf(sb, "family %s -> %s", *fa ? fa : "-", *fb ? fb : "-");
	json_object_foreach((json_t *)pb, key, v)
	{
		json_t *old = json_object_get(pa, key);

		if (old && json_equal(old, v))
			continue;
		ks_strbuf_addf(sb, "%s%s ", sb->len > start ? ", " : "", key);
		if (old) {
			ks_archive_format_value(old, sb);
			ks_strbuf_adds(sb, " -> ");
		} else {
			ks_strbuf_adds(sb, "(new) ");
		}
		ks_archive_format_value(v, sb);
	}
	json_object_foreach((json_t *)pa, key, v) if (!json_object_get(pb, key))
		ks_strbuf_addf(sb, "%s%s removed", sb->len > start ? ", " : "", key);
	if (strcmp(a->source_hash, b->source_hash))
		ks_strbuf_addf(sb, "%ssource changed", sb->len > start ? ", " : "");
}

static void format_fitness(const struct ks_record *rec, struct ks_strbuf *sb)
{
	if (ks_record_ok(rec))
		ks_strbuf_addf(sb, "%.3f", rec->result.fitness);
	else
		ks_strbuf_adds(sb, ks_verdict_name(rec->result.verdict));
}

/* "+0.120 (x1.08)" from a to b, when both are ok. */
static void fitness_change(const struct ks_record *a, const struct ks_record *b, struct ks_strbuf *sb)
{
	double fa, fb;

	if (!a || !ks_record_ok(a) || !ks_record_ok(b))
		return;
	fa = a->result.fitness;
	fb = b->result.fitness;
	ks_strbuf_addf(sb, "%+.3f", fb - fa);
	if (fa > 0)
		ks_strbuf_addf(sb, " (x%.2f)", fb / fa);
}

/* lineage */

static const struct ks_help lineage_help = {
	.usage = "ksearch archive lineage ID",
	.description = "Follow a candidate's first parent back to its seed and print the chain,\n"
		       "oldest first: at each step the mutation that made it, its fitness (or\n"
		       "verdict), the change from its parent, and the params that changed.\n"
		       "Other parents of a crossover are named beside it.",
	.examples = "  ksearch archive lineage 42\n",
	.exit_codes = NULL,
};

static void print_step(const struct ks_record *parent, const struct ks_record *rec)
{
	struct ks_strbuf fit, change, params, others;

	ks_strbuf_init(&fit);
	ks_strbuf_init(&change);
	ks_strbuf_init(&params);
	ks_strbuf_init(&others);
	format_fitness(rec, &fit);
	fitness_change(parent, rec, &change);
	if (parent)
		param_changes(parent, rec, &params);
	else
		ks_archive_format_params(rec->params, &params);
	for (size_t i = 1; i < rec->n_parents; i++)
		ks_strbuf_addf(&others, "%s#%llu", others.len ? ", " : " (also from ",
			       (unsigned long long)rec->parents[i]);
	if (others.len)
		ks_strbuf_adds(&others, ")");
	printf("  #%-8llu %-10s %-14s %-18s %s%s%s%s\n", (unsigned long long)rec->id,
	       *rec->mutation ? rec->mutation : "-", fit.buf,
	       change.len ? change.buf
	       : parent	  ? ""
			  : "(root)",
	       parent ? "" : rec->family, parent ? "" : "  ", params.buf, others.buf);
	ks_strbuf_release(&fit);
	ks_strbuf_release(&change);
	ks_strbuf_release(&params);
	ks_strbuf_release(&others);
}

int ks_archive_cmd_lineage(int argc, char **argv)
{
	struct ks_archive_pick pick = KS_ARCHIVE_PICK_INIT;
	struct ks_option opts[] = { KS_ARCHIVE_COMMON_OPTS(&pick), KS_OPT_END };
	const char *cmd = "archive lineage";
	struct ks_archive *ar = NULL;
	struct ks_record *chain = NULL;
	size_t n = 0, alloc = 0;
	uint64_t id, missing = 0;
	const char **pos;
	size_t n_pos;
	int rc, ret = KS_EXIT_USAGE;

	rc = ks_opts_parse(cmd, opts, &lineage_help, argc, argv, &pos, &n_pos);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	if (n_pos != 1) {
		ks_cli_usage(cmd, "expected one candidate id");
		goto cleanup;
	}
	if (ks_archive_cli_parse_id(cmd, pos[0], &id) < 0)
		goto cleanup;
	ret = ks_archive_cli_open(cmd, &pick, &ar);
	if (ret)
		goto cleanup;
	ret = KS_EXIT_FAILED;
	KS_ALLOC_GROW(chain, 1, alloc);
	ks_record_init(&chain[0]);
	n = 1;
	if (ks_archive_cli_get_record(cmd, ar, id, &chain[0], NULL) < 0)
		goto cleanup;
	while (n < MAX_LINEAGE) {
		const struct ks_record *last = &chain[n - 1];
		uint64_t parent = last->n_parents ? last->parents[0] : 0;
		struct ks_error err;

		/* ids only grow, so a parent has a smaller id; anything else is a loop in damaged data */
		if (!parent || parent >= last->id)
			break;
		KS_ALLOC_GROW(chain, n + 1, alloc);
		ks_record_init(&chain[n]);
		n++;
		if (ks_archive_get_record(ar, parent, &chain[n - 1], NULL, &err) < 0) {
			ks_cli_error(cmd, "%s", err.msg);
			goto cleanup;
		}
		if (!chain[n - 1].id) {
			missing = parent;
			n--;
			break;
		}
	}
	printf("lineage of #%llu, oldest first (%zu step%s):\n", (unsigned long long)id, n,
	       n == 1 ? "" : "s");
	printf("  %-9s %-10s %-14s %-18s %s\n", "id", "mutation", "fitness", "change", "what changed");
	if (missing)
		printf("  #%-8llu (not in this archive)\n", (unsigned long long)missing);
	for (size_t i = n; i-- > 0;)
		print_step(i + 1 < n ? &chain[i + 1] : NULL, &chain[i]);
	ret = KS_EXIT_OK;
cleanup:
	for (size_t i = 0; i < n; i++)
		ks_record_release(&chain[i]);
	free(chain);
	free(pos);
	ks_archive_close(ar);
	ks_opts_release(opts);
	return ret;
}

/* A unified diff of two texts */

struct lines {
	struct line {
		const char *start;
		size_t len; /* without the newline */
	} * line;
	size_t n, alloc;
};

static void split_lines(const char *text, struct lines *l)
{
	*l = (struct lines){ 0 };
	while (*text) {
		const char *nl = strchr(text, '\n');
		size_t len = nl ? (size_t)(nl - text) : strlen(text);

		KS_ALLOC_GROW(l->line, l->n + 1, l->alloc);
		l->line[l->n++] = (struct line){ text, len };
		text += len + (nl != NULL);
	}
}

static int line_eq(const struct lines *a, size_t i, const struct lines *b, size_t j)
{
	return a->line[i].len == b->line[j].len &&
	       !memcmp(a->line[i].start, b->line[j].start, a->line[i].len);
}

struct edit {
	char kind;   /* ' ', '-', '+' */
	size_t a, b; /* lines of a and b before this one */
};

static void add_edit(struct edit **ops, size_t *n, size_t *alloc, char kind, size_t a, size_t b)
{
	KS_ALLOC_GROW(*ops, *n + 1, *alloc);
	(*ops)[(*n)++] = (struct edit){ kind, a, b };
}

/*
 * The edit script: the common prefix and suffix, and between them an LCS
 * (dynamic programming) when it fits in MAX_DIFF_CELLS, else the whole
 * middle removed and added (correct, not minimal).
 */
static size_t edit_script(const struct lines *a, const struct lines *b, struct edit **ops)
{
	size_t pre = 0, suf = 0, n = 0, alloc = 0, na, nb;

	*ops = NULL;
	while (pre < a->n && pre < b->n && line_eq(a, pre, b, pre))
		pre++;
	while (suf < a->n - pre && suf < b->n - pre && line_eq(a, a->n - 1 - suf, b, b->n - 1 - suf))
		suf++;
	na = a->n - pre - suf;
	nb = b->n - pre - suf;
	for (size_t i = 0; i < pre; i++)
		add_edit(ops, &n, &alloc, ' ', i, i);
	if (na && nb && (na + 1) * (nb + 1) <= MAX_DIFF_CELLS) {
		/* lcs[i][j]: LCS length of a's middle from i and b's middle from j */
		unsigned *lcs = ks_calloc((na + 1) * (nb + 1), sizeof(unsigned));
		size_t i = 0, j = 0, w = nb + 1;

		for (size_t x = na; x-- > 0;)
			for (size_t y = nb; y-- > 0;)
				lcs[x * w + y] = line_eq(a, pre + x, b, pre + y)
							 ? lcs[(x + 1) * w + y + 1] + 1
							 : (lcs[(x + 1) * w + y] > lcs[x * w + y + 1]
								    ? lcs[(x + 1) * w + y]
								    : lcs[x * w + y + 1]);
		while (i < na || j < nb) {
			if (i < na && j < nb && line_eq(a, pre + i, b, pre + j)) {
				add_edit(ops, &n, &alloc, ' ', pre + i, pre + j);
				i++, j++;
			} else if (i < na && (j == nb || lcs[(i + 1) * w + j] >= lcs[i * w + j + 1])) {
				/* removals before additions, as diff -u shows them */
				add_edit(ops, &n, &alloc, '-', pre + i, pre + j);
				i++;
			} else {
				add_edit(ops, &n, &alloc, '+', pre + i, pre + j);
				j++;
			}
		}
		free(lcs);
	} else {
		for (size_t i = 0; i < na; i++)
			add_edit(ops, &n, &alloc, '-', pre + i, pre);
		for (size_t j = 0; j < nb; j++)
			add_edit(ops, &n, &alloc, '+', pre + na, pre + j);
	}
	for (size_t i = 0; i < suf; i++)
		add_edit(ops, &n, &alloc, ' ', pre + na + i, pre + nb + i);
	return n;
}

static void print_hunk(const struct lines *a, const struct lines *b, const struct edit *ops, size_t start,
		       size_t stop, int color)
{
	size_t a_count = 0, b_count = 0;

	for (size_t k = start; k < stop; k++) {
		a_count += ops[k].kind != '+';
		b_count += ops[k].kind != '-';
	}
	printf("%s@@ -%zu,%zu +%zu,%zu @@%s\n", color ? "\033[36m" : "", ops[start].a + (a_count ? 1 : 0),
	       a_count, ops[start].b + (b_count ? 1 : 0), b_count, color ? "\033[0m" : "");
	for (size_t k = start; k < stop; k++) {
		const struct lines *l = ops[k].kind == '+' ? b : a;
		size_t line = ops[k].kind == '+' ? ops[k].b : ops[k].a;
		const char *on = !color		      ? ""
				 : ops[k].kind == '+' ? "\033[32m"
				 : ops[k].kind == '-' ? "\033[31m"
						      : "";

		printf("%s%c%.*s%s\n", on, ops[k].kind, (int)l->line[line].len, l->line[line].start,
		       *on ? "\033[0m" : "");
	}
}

/* Print a diff -u of a and b; returns whether they differ. */
static int unified_diff(const char *a_text, const char *b_text, const char *a_name, const char *b_name,
			int color)
{
	struct lines a, b;
	struct edit *ops;
	size_t n, i = 0;
	int printed = 0;

	split_lines(a_text, &a);
	split_lines(b_text, &b);
	n = edit_script(&a, &b, &ops);
	while (i < n) {
		size_t c = i, start, end, stop;

		while (c < n && ops[c].kind == ' ')
			c++;
		if (c == n)
			break;
		start = c >= i + CONTEXT ? c - CONTEXT : i;
		end = c;
		for (;;) {
			size_t e;

			while (end < n && ops[end].kind != ' ')
				end++;
			e = end;
			while (e < n && ops[e].kind == ' ')
				e++;
			if (e < n && e - end <= 2 * CONTEXT) {
				end = e;
				continue;
			}
			break;
		}
		stop = end + CONTEXT < n ? end + CONTEXT : n;
		if (!printed)
			printf("%s--- %s\n+++ %s%s\n", color ? "\033[1m" : "", a_name, b_name,
			       color ? "\033[0m" : "");
		printed = 1;
		print_hunk(&a, &b, ops, start, stop, color);
		i = stop;
	}
	free(ops);
	free(a.line);
	free(b.line);
	return printed;
}

/* diff */

static const struct ks_help diff_help = {
	.usage = "ksearch archive diff A B [--color WHEN]",
	.description = "Compare two candidates: verdict, fitness and speed-of-light fraction with\n"
		       "the change, the params and descriptors that differ, each workload's median\n"
		       "time with the change, and a unified diff of the sources (A is ---, B +++).",
	.examples = "  ksearch archive diff 17 42\n"
		    "  ksearch archive diff 17 42 --color never > change.diff\n",
	.exit_codes = NULL,
};

static void diff_descriptors(const struct ks_record *a, const struct ks_record *b)
{
	struct ks_strbuf sb;

	ks_strbuf_init(&sb);
	for (int d = 0; d < KS_DESC_COUNT; d++) {
		unsigned bit = 1u << d;
		double old = a->result.descriptors[d], v = b->result.descriptors[d];

		if (!(b->has_descriptor & bit) || ((a->has_descriptor & bit) && old == v))
			continue;
		ks_strbuf_addf(&sb, "%s%s ", sb.len ? ", " : "", ks_descriptor_name((enum ks_descriptor)d));
		if (a->has_descriptor & bit)
			ks_strbuf_addf(&sb, "%g", old);
		else
			ks_strbuf_adds(&sb, "-");
		ks_strbuf_addf(&sb, " -> %g", v);
	}
	printf("%-13s%s\n", "descriptors", sb.len ? sb.buf : "(same)");
	ks_strbuf_release(&sb);
}

static void diff_workloads(const struct ks_record *a, const struct ks_record *b)
{
	const struct ks_result *ra = &a->result, *rb = &b->result;

	if (!rb->n_workloads)
		return;
	printf("%-13s%-16s %10s %10s %9s\n", "workloads", "(median_us)", "A", "B", "change");
	for (size_t i = 0; i < rb->n_workloads; i++) {
		const char *id = *rb->workloads[i].id ? rb->workloads[i].id : "?";
		double tb = rb->workloads[i].median_us, ta = -1;

		for (size_t k = 0; k < ra->n_workloads; k++)
			if (!strcmp(ra->workloads[k].id, id))
				ta = ra->workloads[k].median_us;
		if (ta > 0)
			printf("%-13s%-16s %10.2f %10.2f %+8.1f%%\n", "", id, ta, tb, 100 * (tb - ta) / ta);
		else
			printf("%-13s%-16s %10s %10.2f\n", "", id, "-", tb);
	}
}

static void diff_records(const struct ks_record *a, const struct ks_record *b)
{
	struct ks_strbuf sb;

	ks_strbuf_init(&sb);
	printf("%-13s%s -> %s\n", "verdict", ks_verdict_name(a->result.verdict),
	       ks_verdict_name(b->result.verdict));
	format_fitness(a, &sb);
	ks_strbuf_adds(&sb, " -> ");
	format_fitness(b, &sb);
	ks_strbuf_adds(&sb, "  ");
	fitness_change(a, b, &sb);
	printf("%-13s%s\n", "fitness", sb.buf);
	if ((a->has & KS_RECORD_SOL_FRACTION) && (b->has & KS_RECORD_SOL_FRACTION))
		printf("%-13s%.1f%% -> %.1f%%  (%+.1f points)\n", "sol", 100 * a->result.sol_fraction,
		       100 * b->result.sol_fraction, 100 * (b->result.sol_fraction - a->result.sol_fraction));
	sb.len = 0;
	sb.buf[0] = '\0';
	param_changes(a, b, &sb);
	printf("%-13s%s\n", "changes", sb.len ? sb.buf : "(same params and source)");
	ks_strbuf_release(&sb);
	diff_descriptors(a, b);
	diff_workloads(a, b);
}

int ks_archive_cmd_diff(int argc, char **argv)
{
	struct ks_archive_pick pick = KS_ARCHIVE_PICK_INIT;
	int color_when = KS_COLOR_AUTO;
	struct ks_option opts[] = {
		KS_ARCHIVE_COMMON_OPTS(&pick),
		KS_OPT_CHOICE(0, "color", &color_when, "WHEN", ks_color_choices,
			      "colour the source diff: auto, always or never"),
		KS_OPT_END,
	};
	const char *cmd = "archive diff";
	struct ks_archive *ar = NULL;
	struct ks_record a, b;
	char *sa = NULL, *sb = NULL, *na = NULL, *nb = NULL;
	uint64_t ida, idb;
	const char **pos;
	size_t n_pos;
	int rc, color, ret = KS_EXIT_USAGE;

	ks_record_init(&a);
	ks_record_init(&b);
	rc = ks_opts_parse(cmd, opts, &diff_help, argc, argv, &pos, &n_pos);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	if (n_pos != 2) {
		ks_cli_usage(cmd, "expected two candidate ids");
		goto cleanup;
	}
	if (ks_archive_cli_parse_id(cmd, pos[0], &ida) < 0 || ks_archive_cli_parse_id(cmd, pos[1], &idb) < 0)
		goto cleanup;
	color = ks_archive_cli_color((enum ks_color_when)color_when);
	ret = ks_archive_cli_open(cmd, &pick, &ar);
	if (ret)
		goto cleanup;
	ret = KS_EXIT_FAILED;
	if (ks_archive_cli_get_record(cmd, ar, ida, &a, &sa) < 0 ||
	    ks_archive_cli_get_record(cmd, ar, idb, &b, &sb) < 0)
		goto cleanup;
	printf("A = #%llu, B = #%llu\n", (unsigned long long)ida, (unsigned long long)idb);
	diff_records(&a, &b);
	na = ks_asprintf("#%llu %s", (unsigned long long)ida, a.path);
	nb = ks_asprintf("#%llu %s", (unsigned long long)idb, b.path);
	if (!strcmp(sa, sb))
		printf("%-13s(same text, sha256 %s)\n", "source", *a.source_hash ? a.source_hash : "?");
	else {
		printf("%-13s(unified diff, A -> B)\n", "source");
		unified_diff(sa, sb, na, nb, color);
	}
	ret = KS_EXIT_OK;
cleanup:
	ks_record_release(&a);
	ks_record_release(&b);
	free(sa);
	free(sb);
	free(na);
	free(nb);
	free(pos);
	ks_archive_close(ar);
	ks_opts_release(opts);
	return ret;
}
