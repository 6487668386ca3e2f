/*
 * archive_grid.c - `ksearch archive grid`: the best fitness per cell over
 * two descriptor axes, the others folded (best over them), as a terminal
 * heatmap: colour on a terminal, marks otherwise.  Reads only the grid.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive_cli.h"

static const struct ks_help grid_help = {
	.usage = "ksearch archive grid [--x DESCRIPTOR] [--y DESCRIPTOR] [--color WHEN]",
	.description = "Draw the grid: columns are the bins of --x, rows the bins of --y (by\n"
		       "default the grid's first two axes), and each cell shows the best fitness\n"
		       "of the elites that fall in it, whatever their bins along the other axes\n"
		       "(those are folded).  Bins are [low, high) of the edges op.json gives.\n"
		       "Cells are coloured by their share of the best fitness on a terminal, and\n"
		       "marked with a character otherwise (--color always|never|auto).",
	.examples = "  ksearch archive grid\n"
		    "  ksearch archive grid --x smem_bytes --y launches\n"
		    "  ksearch archive grid --x tensor_cores --color never\n",
	.exit_codes = NULL,
};

#define LEVELS 5
/* 256-colour backgrounds from dark to bright, and the text colour that reads on each */
static const int level_bg[LEVELS] = { 54, 25, 30, 71, 184 };
static const int level_fg[LEVELS] = { 15, 15, 15, 16, 16 };
static const char level_mark[LEVELS] = { ':', '-', '+', '*', '#' };

/* Which grid axis a descriptor name is; prints a usage error (with a suggestion) and returns -1. */
static int find_axis(const char *cmd, const char *option, const char *name, const struct ks_grid_axis *axes,
		     size_t n_axes)
{
	struct ks_strbuf names;
	enum ks_descriptor d;
	const char *best = NULL;
	size_t best_dist = (size_t)-1;

	for (size_t i = 0; i < n_axes; i++)
		if (!strcmp(name, ks_descriptor_name(axes[i].descriptor)))
			return (int)i;
	ks_strbuf_init(&names);
	for (size_t i = 0; i < n_axes; i++)
		ks_strbuf_addf(&names, "%s%s", i ? ", " : "", ks_descriptor_name(axes[i].descriptor));
	if (ks_descriptor_parse(name, &d, NULL) == 0) {
		ks_cli_usage(cmd, "descriptor '%s' (%s) is not an axis of this archive's grid (its axes: %s)",
			     name, option, names.buf);
		ks_strbuf_release(&names);
		return -1;
	}
	for (int i = 0; i < KS_DESC_COUNT; i++) {
		size_t dist = ks_edit_distance(name, ks_descriptor_name((enum ks_descriptor)i));

		if (dist < best_dist) {
			best_dist = dist;
			best = ks_descriptor_name((enum ks_descriptor)i);
		}
	}
	if (best && (ks_is_close(name, best) || strstr(best, name) == best))
		ks_cli_usage(cmd, "unknown descriptor '%s' for %s; did you mean '%s'? (the grid's axes: %s)",
			     name, option, best, names.buf);
	else
		ks_cli_usage(cmd, "unknown descriptor '%s' for %s (the grid's axes: %s)", name, option,
			     names.buf);
	ks_strbuf_release(&names);
	return -1;
}

static char *bin_label(const struct ks_grid_axis *axis, size_t bin)
{
	return ks_asprintf("[%g,%g)", axis->edges[bin], axis->edges[bin + 1]);
}

static int level_of(double fitness, double best)
{
	int level = best > 0 ? (int)(fitness / best * LEVELS) : LEVELS - 1;

	return level < 0 ? 0 : level >= LEVELS ? LEVELS - 1 : level;
}

struct heatmap {
	const struct ks_grid_axis *x, *y; /* y NULL for a one-axis grid */
	size_t nx, ny;
	double *best; /* ny rows of nx; < 0 when empty */
	double top;
	int color;
};

static void print_cell(const struct heatmap *h, double fitness, int width)
{
	char text[64];

	if (fitness < 0) {
		printf("%*s%*s", width / 2 + 1, ".", width - width / 2 - 1, "");
		return;
	}
	if (h->color) {
		int level = level_of(fitness, h->top);

		snprintf(text, sizeof(text), "%.3f", fitness);
		printf("\033[48;5;%dm\033[38;5;%dm %*s \033[0m", level_bg[level], level_fg[level], width - 2,
		       text);
	} else {
		snprintf(text, sizeof(text), "%.3f%c", fitness, level_mark[level_of(fitness, h->top)]);
		printf("%*s ", width - 1, text);
	}
}

static void print_legend(const struct heatmap *h)
{
	printf("\nlegend: each cell is the best fitness in it; its share of the best (%.3f):\n  ", h->top);
	for (int i = 0; i < LEVELS; i++) {
		char range[32];

		if (i == LEVELS - 1)
			snprintf(range, sizeof(range), ">= %d%%", 100 * i / LEVELS);
		else
			snprintf(range, sizeof(range), "%d-%d%%", 100 * i / LEVELS, 100 * (i + 1) / LEVELS);
		if (h->color)
			printf("\033[48;5;%dm\033[38;5;%dm %s \033[0m ", level_bg[i], level_fg[i], range);
		else
			printf("'%c' %s   ", level_mark[i], range);
	}
	printf("%s'.' empty\n", h->color ? " " : "");
}

static void draw(const struct heatmap *h, const char *x_name, const char *y_name)
{
	char **x_labels = ks_calloc(h->nx, sizeof(char *));
	char **y_labels = ks_calloc(h->ny, sizeof(char *));
	int width = 9, row_width = (int)strlen(y_name);

	for (size_t i = 0; i < h->nx; i++) {
		x_labels[i] = bin_label(h->x, i);
		if ((int)strlen(x_labels[i]) + 2 > width)
			width = (int)strlen(x_labels[i]) + 2;
	}
	for (size_t j = 0; j < h->ny; j++) {
		y_labels[j] = h->y ? bin_label(h->y, j) : ks_strdup("(all)");
		if ((int)strlen(y_labels[j]) > row_width)
			row_width = (int)strlen(y_labels[j]);
	}
	printf("\n%*s  %s\n", row_width, "", x_name);
	printf("%-*s  ", row_width, y_name);
	for (size_t i = 0; i < h->nx; i++)
		printf("%*s", width, x_labels[i]);
	printf("\n");
	for (size_t j = 0; j < h->ny; j++) {
		printf("%-*s  ", row_width, y_labels[j]);
		for (size_t i = 0; i < h->nx; i++)
			print_cell(h, h->best[j * h->nx + i], width);
		printf("\n");
	}
	for (size_t i = 0; i < h->nx; i++)
		free(x_labels[i]);
	for (size_t j = 0; j < h->ny; j++)
		free(y_labels[j]);
	free(x_labels);
	free(y_labels);
}

int ks_archive_cmd_grid(int argc, char **argv)
{
	struct ks_archive_pick pick = KS_ARCHIVE_PICK_INIT;
	const char *x_name = NULL, *y_name = NULL;
	int color_when = KS_COLOR_AUTO;
	struct ks_option opts[] = {
		KS_ARCHIVE_COMMON_OPTS(&pick),
		KS_OPT_STRING(0, "x", &x_name, "DESCRIPTOR", "the axis across (default: the grid's first)"),
		KS_OPT_STRING(0, "y", &y_name, "DESCRIPTOR", "the axis down (default: the grid's second)"),
		KS_OPT_CHOICE(0, "color", &color_when, "WHEN", ks_color_choices,
			      "auto (on a terminal), always or never"),
		KS_OPT_END,
	};
	const char *cmd = "archive grid";
	struct ks_archive *ar = NULL;
	struct ks_archive_elite *elites = NULL;
	struct ks_archive_metrics m;
	struct heatmap h = { 0 };
	const struct ks_grid_axis *axes;
	size_t n_axes, n_elites = 0, coords[KS_DESC_COUNT];
	struct ks_strbuf folded;
	struct ks_error err;
	const char **pos;
	size_t n_pos;
	int xa, ya, rc, ret = KS_EXIT_USAGE;

	ks_strbuf_init(&folded);
	rc = ks_opts_parse(cmd, opts, &grid_help, argc, argv, &pos, &n_pos);
	if (rc) {
		ks_strbuf_release(&folded);
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	}
	if (n_pos) {
		ks_cli_usage(cmd, "unexpected argument '%s' (choose axes with --x and --y)", pos[0]);
		goto cleanup;
	}
	h.color = ks_archive_cli_color((enum ks_color_when)color_when);
	ret = ks_archive_cli_open(cmd, &pick, &ar);
	if (ret)
		goto cleanup;
	ret = KS_EXIT_USAGE;
	axes = ks_archive_grid(ar, &n_axes);
	xa = x_name ? find_axis(cmd, "--x", x_name, axes, n_axes) : 0;
	if (xa < 0)
		goto cleanup;
	if (y_name)
		ya = find_axis(cmd, "--y", y_name, axes, n_axes);
	else
		ya = n_axes < 2 ? -2 : xa == 0 ? 1 : 0;
	if (ya == -1)
		goto cleanup;
	if (ya == xa) {
		ks_cli_usage(cmd, "--x and --y name the same descriptor (%s)",
			     ks_descriptor_name(axes[xa].descriptor));
		goto cleanup;
	}
	ret = KS_EXIT_FAILED;
	if (ks_archive_elites(ar, &elites, &n_elites, &err) < 0 || ks_archive_metrics(ar, &m, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	h.x = &axes[xa];
	h.y = ya >= 0 ? &axes[ya] : NULL;
	h.nx = h.x->n_edges - 1;
	h.ny = h.y ? h.y->n_edges - 1 : 1;
	h.best = ks_malloc(h.nx * h.ny * sizeof(double));
	for (size_t i = 0; i < h.nx * h.ny; i++)
		h.best[i] = -1;
	for (size_t e = 0; e < n_elites; e++) {
		double *cell;

		ks_archive_cell_coords(ar, elites[e].cell, coords);
		cell = &h.best[(h.y ? coords[ya] : 0) * h.nx + coords[xa]];
		if (elites[e].fitness > *cell)
			*cell = elites[e].fitness;
		if (elites[e].fitness > h.top)
			h.top = elites[e].fitness;
	}
	for (size_t i = 0; i < n_axes; i++)
		if ((int)i != xa && (int)i != ya)
			ks_strbuf_addf(&folded, "%s%s", folded.len ? ", " : "",
				       ks_descriptor_name(axes[i].descriptor));
	printf("%s (%s on %s): best fitness per cell; x = %s, y = %s", ks_archive_path(ar), ks_archive_op(ar),
	       ks_archive_gpu(ar), ks_descriptor_name(h.x->descriptor),
	       h.y ? ks_descriptor_name(h.y->descriptor) : "(none)");
	if (folded.len)
		printf("; folded (best over): %s", folded.buf);
	printf("\n%llu of %llu cells filled (coverage %.1f%%), QD-score %.3f, best %.3f",
	       (unsigned long long)m.cells_filled, (unsigned long long)m.cells, 100 * m.coverage, m.qd_score,
	       m.best_fitness);
	if (m.best_id)
		printf(" (#%llu)", (unsigned long long)m.best_id);
	printf("\n");
	draw(&h, ks_descriptor_name(h.x->descriptor), h.y ? ks_descriptor_name(h.y->descriptor) : "");
	print_legend(&h);
	ret = KS_EXIT_OK;
cleanup:
	free(h.best);
	free(elites);
	free(pos);
	ks_strbuf_release(&folded);
	ks_archive_close(ar);
	ks_opts_release(opts);
	return ret;
}
