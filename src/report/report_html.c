/*
 * report_html.c - writing a report as one HTML page: inline CSS and SVG
 * drawn here (scales, ticks, marks), no script and nothing fetched.  Hover
 * details are SVG <title>s, which every browser shows.
 */
#include "ksearch/report/report.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/util.h"

/* ---- text ---- */

/* Text for HTML, in an element or an attribute. */
static void esc(FILE *out, const char *text)
{
	for (const char *p = text ? text : ""; *p; p++) {
		switch (*p) {
		case '&':
			fputs("&amp;", out);
			break;
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		case '\'':
			fputs("&#39;", out);
			break;
		default:
			fputc(*p, out);
		}
	}
}

static void escf(FILE *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void escf(FILE *out, const char *fmt, ...)
{
	va_list ap;
	char *text;

	va_start(ap, fmt);
	text = ks_vasprintf(fmt, ap);
	va_end(ap);
	esc(out, text);
	free(text);
}

/* A number as an axis or a label says it: 3 significant digits, thousands as k, millions as M. */
static void num(char *buf, size_t size, double v)
{
	double a = fabs(v);

	if (a == 0)
		snprintf(buf, size, "0");
	else if (a >= 1e9 || a < 1e-3)
		snprintf(buf, size, "%.2g", v);
	else if (a >= 1e6)
		snprintf(buf, size, "%.3gM", v / 1e6);
	else if (a >= 1e4)
		snprintf(buf, size, "%.3gk", v / 1e3);
	else if (a >= 100)
		snprintf(buf, size, "%.0f", v);
	else
		snprintf(buf, size, "%.3g", v);
}

/* A count with thousands separators: 1,000,000. */
static void count(char *buf, size_t size, uint64_t v)
{
	char digits[32];
	size_t n, j = 0;

	snprintf(digits, sizeof(digits), "%llu", (unsigned long long)v);
	n = strlen(digits);
	for (size_t i = 0; i < n && j + 2 < size; i++) {
		if (i && (n - i) % 3 == 0)
			buf[j++] = ',';
		buf[j++] = digits[i];
	}
	buf[j] = '\0';
}

/* An elapsed time at a tick's step: "90s", "15m", "2h", "1.5d". */
static void duration(char *buf, size_t size, double seconds, double step)
{
	if (step >= 86400)
		snprintf(buf, size, "%gd", seconds / 86400);
	else if (step >= 3600)
		snprintf(buf, size, "%gh", seconds / 3600);
	else if (step >= 60)
		snprintf(buf, size, "%gm", seconds / 60);
	else
		snprintf(buf, size, "%gs", seconds);
}

/* ---- scales and ticks ---- */

/* A chart's plot area (pixels inside its svg) and the data range it shows. */
struct frame {
	double left, top, width, height;
	double x0, x1, y0, y1;
	int xlog, ylog;
	int xint; /* x is a count: whole-number ticks only */
	int ycat; /* y is categories (bars): no y ticks */
};

static double scale(double v, double lo, double hi, int log_scale)
{
	if (log_scale) {
		v = log10(v > 0 ? v : lo);
		lo = log10(lo);
		hi = log10(hi);
	}
	return hi > lo ? (v - lo) / (hi - lo) : 0.5;
}

static double fx(const struct frame *f, double x)
{
	return f->left + f->width * scale(x, f->x0, f->x1, f->xlog);
}

static double fy(const struct frame *f, double y)
{
	return f->top + f->height * (1 - scale(y, f->y0, f->y1, f->ylog));
}

/* Round steps (1, 2, 5 x 10^k; at least 1 for counts) from lo to hi, about n of them; returns how many. */
static size_t linear_ticks(double lo, double hi, int n, int whole, double *ticks, size_t max)
{
	double span = hi - lo, step, mag;
	size_t k = 0;

	if (!(span > 0))
		span = fabs(hi) > 0 ? fabs(hi) : 1;
	step = span / (n > 1 ? n : 1);
	mag = pow(10, floor(log10(step)));
	step = step / mag >= 5 ? 5 * mag : step / mag >= 2 ? 2 * mag : mag;
	if (whole && step < 1)
		step = 1;
	for (double t = ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9 && k < max; t += step)
		ticks[k++] = fabs(t) < step * 1e-9 ? 0 : t;
	return k;
}

static size_t log_ticks(double lo, double hi, double *ticks, size_t max)
{
	size_t k = 0;
	int decades = (int)(ceil(log10(hi)) - floor(log10(lo)));

	for (double p = pow(10, floor(log10(lo))); p <= hi * 1.0001 && k < max; p *= 10) {
		static const double within[] = { 1, 2, 5 };

		for (size_t i = 0; i < (decades <= 2 ? 3u : 1u) && k < max; i++)
			if (p * within[i] >= lo * 0.9999 && p * within[i] <= hi * 1.0001)
				ticks[k++] = p * within[i];
	}
	return k;
}

/* Steps of elapsed time that read well, in seconds. */
static size_t time_ticks(double span, double *ticks, size_t max, double *step_out)
{
	static const double steps[] = { 1,   2,	   5,	 10,   15,    30,    60,    120,   300,	   600,
					900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800 };
	double step = steps[sizeof(steps) / sizeof(steps[0]) - 1];
	size_t k = 0;

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		if (span / steps[i] <= 6) {
			step = steps[i];
			break;
		}
	for (double t = 0; t <= span * 1.0001 && k < max; t += step)
		ticks[k++] = t;
	*step_out = step;
	return k;
}

/* ---- drawing ---- */

static void svg_open(FILE *out, const char *name, double width, double height, const char *label)
{
	fprintf(out, "<svg class=\"chart\" data-chart=\"");
	esc(out, name);
	fprintf(out, "\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"",
		width, height, width, height);
	esc(out, label);
	fprintf(out, "\">\n");
}

static void text_at(FILE *out, double x, double y, const char *anchor, const char *cls, const char *text)
{
	fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s%s%s>", x, y, anchor,
		cls ? " class=\"" : "", cls ? cls : "", cls ? "\"" : "");
	esc(out, text);
	fprintf(out, "</text>\n");
}

/* Axes with ticks and grid lines; xtime: the x values are seconds since x0, labelled as durations. */
static void draw_axes(FILE *out, const struct frame *f, const char *xlabel, const char *ylabel, int xtime)
{
	double ticks[64], step = 0;
	size_t n;
	char label[32];

	fprintf(out, "<g class=\"axis\">\n");
	n = f->ycat   ? 0
	    : f->ylog ? log_ticks(f->y0, f->y1, ticks, 64)
		      : linear_ticks(f->y0, f->y1, 4, 0, ticks, 64);
	for (size_t i = 0; i < n; i++) {
		double y = fy(f, ticks[i]);

		fprintf(out, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>\n",
			f->left, f->left + f->width, y, y);
		num(label, sizeof(label), ticks[i]);
		text_at(out, f->left - 4, y + 3, "end", NULL, label);
	}
	if (xtime)
		n = time_ticks(f->x1 - f->x0, ticks, 64, &step);
	else
		n = f->xlog ? log_ticks(f->x0, f->x1, ticks, 64)
			    : linear_ticks(f->x0, f->x1, 5, f->xint, ticks, 64);
	for (size_t i = 0; i < n; i++) {
		double x = fx(f, xtime ? f->x0 + ticks[i] : ticks[i]);

		fprintf(out, "<line class=\"tick\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>\n", x, x,
			f->top + f->height, f->top + f->height + 4);
		if (xtime)
			duration(label, sizeof(label), ticks[i], step);
		else
			num(label, sizeof(label), ticks[i]);
		text_at(out, x, f->top + f->height + 15, "middle", NULL, label);
	}
	fprintf(out, "<line class=\"frame\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>\n", f->left,
		f->left + f->width, f->top + f->height, f->top + f->height);
	fprintf(out, "<line class=\"frame\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>\n", f->left,
		f->left, f->top, f->top + f->height);
	if (xlabel)
		text_at(out, f->left + f->width / 2, f->top + f->height + 30, "middle", "label", xlabel);
	if (ylabel) {
		fprintf(out,
			"<text class=\"label\" transform=\"translate(%.1f %.1f) rotate(-90)\" "
			"text-anchor=\"middle\">",
			f->left - 38, f->top + f->height / 2);
		esc(out, ylabel);
		fprintf(out, "</text>\n");
	}
	fprintf(out, "</g>\n");
}

/* A note where a chart would be, saying why there is nothing to draw. */
static void note(FILE *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(FILE *out, const char *fmt, ...)
{
	va_list ap;
	char *text;

	va_start(ap, fmt);
	text = ks_vasprintf(fmt, ap);
	va_end(ap);
	fprintf(out, "<p class=\"note\">");
	esc(out, text);
	fprintf(out, "</p>\n");
	free(text);
}

/* viridis, from 0 (dark) to 1 (bright) */
static void ramp(double t, char *buf, size_t size, int *dark)
{
	static const double stops[][3] = {
		{ 68, 1, 84 }, { 59, 82, 139 }, { 33, 145, 140 }, { 94, 201, 98 }, { 253, 231, 37 },
	};
	double pos;
	int i;

	t = t < 0 ? 0 : t > 1 ? 1 : t;
	pos = t * 4;
	i = pos >= 4 ? 3 : (int)pos;
	pos -= i;
	snprintf(buf, size, "#%02x%02x%02x", (int)(stops[i][0] + (stops[i + 1][0] - stops[i][0]) * pos + 0.5),
		 (int)(stops[i][1] + (stops[i + 1][1] - stops[i][1]) * pos + 0.5),
		 (int)(stops[i][2] + (stops[i + 1][2] - stops[i][2]) * pos + 0.5));
	*dark = t < 0.55;
}

static const char *const verdict_colour[KS_VERDICT_COUNT] = {
	[KS_VERDICT_OK] = "#2e7d32",
	[KS_VERDICT_COMPILE_ERROR] = "#9e9e9e",
	[KS_VERDICT_CONTRACT_ERROR] = "#6d4c41",
	[KS_VERDICT_REFUSED] = "#546e7a",
	[KS_VERDICT_WRONG] = "#e53935",
	[KS_VERDICT_CRASH] = "#8e24aa",
	[KS_VERDICT_TIMEOUT] = "#fb8c00",
	[KS_VERDICT_IMPLAUSIBLE] = "#1e88e5",
};

/* "#8 split_kv SPLITS=8 WARPS=4" */
static void describe(char *buf, size_t size, const struct ks_report_candidate *c)
{
	if (!c->detailed)
		snprintf(buf, size, "#%llu", (unsigned long long)c->id);
	else
		snprintf(buf, size, "#%llu %s%s%s", (unsigned long long)c->id, *c->family ? c->family : "?",
			 c->params && *c->params ? " " : "", c->params ? c->params : "");
}

/* ---- the grid ---- */

/* A bin as op.json gives its edges, exactly: [16384, 49153). */
static char *bin_text(const struct ks_grid_axis *axis, size_t bin)
{
	return ks_asprintf("[%.7g, %.7g)", axis->edges[bin], axis->edges[bin + 1]);
}

/* The elite a heatmap cell shows: the best over the axes it folds. */
static const struct ks_report_elite *cell_best(const struct ks_report *r, size_t ax, size_t bx, size_t ay,
					       size_t by)
{
	const struct ks_report_elite *best = NULL;

	for (size_t i = 0; i < r->n_elites; i++) {
		const struct ks_report_elite *e = &r->elites[i];

		if (e->coords[ax] == bx && (ay == ax || e->coords[ay] == by) &&
		    (!best || e->c.fitness > best->c.fitness))
			best = e;
	}
	return best;
}

static void elite_title(FILE *out, const struct ks_report *r, const struct ks_report_elite *e)
{
	char what[512], line[256];

	describe(what, sizeof(what), &e->c);
	fprintf(out, "<title>");
	escf(out, "%s\nfitness %.3f", what, e->c.fitness);
	if (e->c.sol_fraction >= 0)
		escf(out, ", %.1f%% of the speed of light", 100 * e->c.sol_fraction);
	if (e->c.detailed && *e->c.mutation) {
		escf(out, "\nmutation %s", e->c.mutation);
		if (e->c.parent)
			escf(out, " of #%llu", (unsigned long long)e->c.parent);
	}
	for (size_t a = 0; a < r->n_axes; a++) {
		char *bin = bin_text(&r->axes[a], e->coords[a]);
		int d = r->axes[a].descriptor;

		if (e->c.has_descriptor & (1u << d)) {
			char v[32];

			num(v, sizeof(v), e->c.descriptors[d]);
			snprintf(line, sizeof(line), "\n%s %s in %s", ks_descriptor_name(d), v, bin);
		} else {
			snprintf(line, sizeof(line), "\n%s in %s", ks_descriptor_name(d), bin);
		}
		esc(out, line);
		free(bin);
	}
	if (e->c.profile) {
		escf(out, "\nNsight Compute on %s:\n", e->c.profile_workload);
		esc(out, e->c.profile);
	}
	fprintf(out, "</title>");
}

#define CELL_W 58
#define CELL_H 26

static void heatmap(FILE *out, const struct ks_report *r, size_t ax, size_t ay)
{
	const struct ks_grid_axis *x = &r->axes[ax], *y = &r->axes[ay];
	size_t nx = x->n_edges - 1, ny = ax == ay ? 1 : y->n_edges - 1;
	double left = 110, top = 10, width = nx * CELL_W, height = ny * CELL_H,
	       best = r->metrics.best_fitness;
	double below = 0;
	char name[96], label[160];

	/* the x bins' labels, turned by 30 degrees, need about 3 px a character below the cells */
	for (size_t bx = 0; bx < nx; bx++) {
		char *bin = bin_text(x, bx);

		below = fmax(below, 3.2 * strlen(bin) + 22);
		free(bin);
	}

	snprintf(name, sizeof(name), "grid-%s-%s", ks_descriptor_name(x->descriptor),
		 ax == ay ? "" : ks_descriptor_name(y->descriptor));
	snprintf(label, sizeof(label), "best fitness per cell, %s against %s",
		 ks_descriptor_name(x->descriptor), ax == ay ? "nothing" : ks_descriptor_name(y->descriptor));
	fprintf(out, "<figure class=\"heatmap\">\n");
	svg_open(out, name, left + width + 10, top + height + below, label);
	for (size_t by = 0; by < ny; by++) {
		/* the first bin at the bottom, as on a plot */
		double cy = top + (ny - 1 - by) * CELL_H;

		if (ax != ay) {
			char *bin = bin_text(y, by);

			text_at(out, left - 5, cy + CELL_H / 2 + 4, "end", NULL, bin);
			free(bin);
		}
		for (size_t bx = 0; bx < nx; bx++) {
			const struct ks_report_elite *e = cell_best(r, ax, bx, ay, by);
			double cx = left + bx * CELL_W;

			if (!e) {
				fprintf(out,
					"<rect class=\"empty\" x=\"%.1f\" y=\"%.1f\" width=\"%d\" "
					"height=\"%d\">"
					"<title>empty: no candidate verified ok here yet</title></rect>\n",
					cx + 1, cy + 1, CELL_W - 2, CELL_H - 2);
				continue;
			}
			{
				char colour[16], value[32];
				int dark;

				ramp(best > 0 ? e->c.fitness / best : 1, colour, sizeof(colour), &dark);
				fprintf(out,
					"<g class=\"mark\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" "
					"height=\"%d\" fill=\"%s\">",
					cx + 1, cy + 1, CELL_W - 2, CELL_H - 2, colour);
				elite_title(out, r, e);
				fprintf(out, "</rect>");
				snprintf(value, sizeof(value), "%.3g", e->c.fitness);
				fprintf(out,
					"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
					"class=\"%s\">%s</text></g>\n",
					cx + CELL_W / 2.0, cy + CELL_H / 2.0 + 4,
					dark ? "on-dark" : "on-light", value);
			}
		}
	}
	for (size_t bx = 0; bx < nx; bx++) {
		char *bin = bin_text(x, bx);
		double cx = left + bx * CELL_W + CELL_W / 2.0, cy = top + height + 12;

		fprintf(out,
			"<text class=\"bin\" transform=\"translate(%.1f %.1f) rotate(-30)\" "
			"text-anchor=\"end\">",
			cx + 4, cy);
		esc(out, bin);
		fprintf(out, "</text>\n");
		free(bin);
	}
	fprintf(out, "</svg>\n<figcaption>x: <b>");
	esc(out, ks_descriptor_name(x->descriptor));
	fprintf(out, "</b>");
	if (ax != ay) {
		fprintf(out, ", y: <b>");
		esc(out, ks_descriptor_name(y->descriptor));
		fprintf(out, "</b>");
	}
	if (r->n_axes > 2 || (ax == ay && r->n_axes > 1))
		fprintf(out, "; best over the other axes");
	fprintf(out, "</figcaption>\n</figure>\n");
}

static void section_grid(FILE *out, const struct ks_report *r)
{
	char filled[32], cells[32];

	count(filled, sizeof(filled), r->metrics.cells_filled);
	count(cells, sizeof(cells), r->metrics.cells);
	fprintf(out,
		"<section id=\"grid\">\n<h2>The grid</h2>\n<p>%s of %s cells filled (coverage %.1f%%). Each "
		"cell "
		"shows the best fitness of its elites (speedup over the reference), coloured by its share "
		"of the best; hover over a cell for its elite.</p>\n",
		filled, cells, 100 * r->metrics.coverage);
	if (!r->n_axes) {
		note(out, "the archive has no grid axes");
	} else if (!r->n_elites) {
		note(out, "no cell is filled yet: no candidate has verified ok inside the grid");
	} else {
		fprintf(out, "<div class=\"row\">\n");
		if (r->n_axes == 1)
			heatmap(out, r, 0, 0);
		for (size_t i = 0; i < r->n_axes; i++)
			for (size_t j = i + 1; j < r->n_axes; j++)
				heatmap(out, r, i, j);
		fprintf(out, "</div>\n");
		fprintf(out, "<div class=\"legend\">share of the best (%.3f): ", r->metrics.best_fitness);
		for (int i = 0; i <= 4; i++) {
			char colour[16];
			int dark;

			ramp(i / 4.0, colour, sizeof(colour), &dark);
			fprintf(out, "<span class=\"swatch\" style=\"background:%s\"></span>%d%% ", colour,
				25 * i);
		}
		fprintf(out, "<span class=\"swatch empty\"></span>empty</div>\n");
	}
	fprintf(out, "</section>\n");
}

/* ---- history ---- */

/*
 * The last candidate id, which counts the search's evaluations (ids are
 * given one an evaluation, in order): the x span of every chart against
 * evaluations, and the headline's count.  An archive that holds a sample
 * of a search has fewer records than that.
 */
static uint64_t last_id(const struct ks_report *r)
{
	return r->metrics.next_id > r->metrics.candidates + 1 ? r->metrics.next_id - 1
							      : r->metrics.candidates;
}

enum metric { BEST, QD, COVERAGE };

static double metric_of(const struct ks_report_point *p, enum metric m)
{
	return m == BEST ? p->best_fitness : m == QD ? p->qd_score : 100 * p->coverage;
}

/*
 * One metric against evaluations or time, as a step line (a metric
 * changes at its points and holds between them); the best fitness also
 * shows the sampled candidates that verified ok, as dots.
 */
static void history_chart(FILE *out, const struct ks_report *r, enum metric m, int by_time)
{
	static const char *const names[] = { "best fitness", "QD-score", "coverage %" };
	struct frame f = { .left = 52, .top = 10, .width = 300, .height = 150 };
	double last_x = -1, ymax = 0, ymin = 0, t0 = r->first_time;
	char name[64], label[96];
	size_t drawn = 0;

	if (by_time) {
		/* from the earliest time known to the latest, so that every mark lies inside */
		for (size_t i = 0; i < r->n_history; i++)
			if (r->history[i].time >= 0 && (t0 < 0 || r->history[i].time < t0))
				t0 = r->history[i].time;
		for (size_t i = 0; i < r->n_sample; i++)
			if (r->sample[i].created >= 0 && (t0 < 0 || r->sample[i].created < t0))
				t0 = r->sample[i].created;
		f.x0 = t0;
		f.x1 = t0;
		for (size_t i = 0; i < r->n_history; i++)
			if (r->history[i].time > f.x1)
				f.x1 = r->history[i].time;
		for (size_t i = 0; i < r->n_sample; i++)
			if (r->sample[i].created > f.x1)
				f.x1 = r->sample[i].created;
	} else {
		/* candidate ids, as the dots and the verdicts chart count them */
		f.x0 = 0;
		f.x1 = (double)last_id(r);
		f.xint = 1;
	}
	if (f.x1 <= f.x0)
		f.x1 = f.x0 + 1;
	for (size_t i = 0; i < r->n_history; i++) {
		ymax = fmax(ymax, metric_of(&r->history[i], m));
		ymin = fmin(ymin, metric_of(&r->history[i], m));
	}
	if (m == BEST)
		for (size_t i = 0; i < r->n_sample; i++)
			if (r->sample[i].verdict == KS_VERDICT_OK) {
				ymax = fmax(ymax, r->sample[i].fitness);
				ymin = fmin(ymin, r->sample[i].fitness);
			}
	f.y0 = ymin < 0 ? ymin * 1.1 : 0;
	f.y1 = m == COVERAGE ? fmax(ymax * 1.1, 1) : ymax > 0 ? ymax * 1.1 : 1;
	snprintf(name, sizeof(name), "history-%s-%s",
		 m == BEST ? "best"
		 : m == QD ? "qd"
			   : "coverage",
		 by_time ? "time" : "evals");
	snprintf(label, sizeof(label), "%s against %s", names[m], by_time ? "time" : "evaluations");
	svg_open(out, name, 370, 205, label);
	draw_axes(out, &f, by_time ? "time since the first candidate" : "evaluations (candidate ids)",
		  names[m], by_time);
	if (m == BEST) {
		fprintf(out, "<g class=\"dots\">");
		for (size_t i = 0; i < r->n_sample; i++) {
			const struct ks_report_candidate *c = &r->sample[i];
			double x = by_time ? c->created : (double)c->id;

			if (c->verdict != KS_VERDICT_OK || (by_time && x < 0))
				continue;
			fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%s\"/>", fx(&f, x),
				fy(&f, c->fitness), r->n_sample < 200 ? "3" : "1.6");
		}
		fprintf(out, "</g>\n");
	}
	fprintf(out, "<path class=\"mark line\" d=\"");
	for (size_t i = 0; i < r->n_history; i++) {
		const struct ks_report_point *p = &r->history[i];
		double x = by_time ? p->time : (double)p->id, y = metric_of(p, m);

		if (by_time ? x < 0 : !p->id)
			continue;
		if (drawn)
			fprintf(out, " H%.1f V%.1f", fx(&f, x), fy(&f, y));
		else
			fprintf(out, "M%.1f %.1f", fx(&f, x), fy(&f, y));
		last_x = x;
		drawn++;
	}
	/* held until now */
	if (drawn && f.x1 > last_x)
		fprintf(out, " H%.1f", fx(&f, f.x1));
	fprintf(out, "\"/>\n");
	for (size_t i = 0; i < r->n_history; i++) {
		const struct ks_report_point *p = &r->history[i];
		double x = by_time ? p->time : (double)p->id;
		char v[32], e[32];

		if (by_time ? x < 0 : !p->id)
			continue;
		num(v, sizeof(v), metric_of(p, m));
		count(e, sizeof(e), p->id);
		fprintf(out,
			"<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\"><title>%s %s at candidate "
			"#%s",
			fx(&f, x), fy(&f, metric_of(p, m)), names[m], v, e);
		if (m != COVERAGE)
			fprintf(out, " (%llu cells)", (unsigned long long)p->cells_filled);
		fprintf(out, "</title></circle>\n");
	}
	fprintf(out, "</svg>\n");
}

static void section_history(FILE *out, const struct ks_report *r)
{
	size_t timed = 0;

	for (size_t i = 0; i < r->n_history; i++)
		timed += r->history[i].time >= 0;
	fprintf(out,
		"<section id=\"history\">\n<h2>How the search climbed</h2>\n"
		"<p>The best fitness, the QD-score (the sum of the elites' fitness) and the coverage, "
		"each time one of them changed (%zu points); grey dots are a sample of the candidates "
		"that verified ok.</p>\n",
		r->n_history);
	if (!r->n_history) {
		note(out, "no history yet: no candidate has verified ok");
		fprintf(out, "</section>\n");
		return;
	}
	fprintf(out, "<h3>against evaluations</h3>\n<div class=\"row\">\n");
	for (int m = BEST; m <= COVERAGE; m++)
		history_chart(out, r, (enum metric)m, 0);
	fprintf(out, "</div>\n<h3>against time</h3>\n");
	if (timed < 1) {
		note(out, "the candidates that made these points have no recorded time");
	} else {
		fprintf(out, "<div class=\"row\">\n");
		for (int m = BEST; m <= COVERAGE; m++)
			history_chart(out, r, (enum metric)m, 1);
		fprintf(out, "</div>\n");
	}
	fprintf(out, "</section>\n");
}

/* ---- the best, per workload ---- */

struct bar {
	const char *name;
	const char *colour;
	double us;
};

static const char *const anchor_colour[] = { "#5c6bc0", "#26a69a", "#ab47bc", "#8d6e63",
					     "#78909c", "#d81b60", "#7cb342", "#00acc1" };

static void workload_chart(FILE *out, const struct ks_report *r)
{
	double row_h = 16, gap = 12, left = 120, plot_w = 560, legend_w = 150, lo = INFINITY, hi = 0, y = 8,
	       height;
	size_t rows = 0;
	struct frame f;

	for (size_t w = 0; w < r->n_workloads; w++) {
		const struct ks_report_workload *wl = &r->workloads[w];
		double values[4 + KS_REPORT_MAX_ANCHORS] = { wl->ref_us, wl->best_us, wl->dispatch_us,
							     wl->floor_us };

		for (size_t a = 0; a < wl->n_anchors; a++) {
			values[4 + a] = wl->anchors[a].us;
			/* room for the legend's name (the page clips what lies outside a chart) */
			legend_w = fmax(legend_w, 40 + 6.5 * (double)strlen(wl->anchors[a].name));
		}
		for (size_t i = 0; i < 4 + wl->n_anchors; i++)
			if (isfinite(values[i]) && values[i] > 0) {
				lo = fmin(lo, values[i]);
				hi = fmax(hi, values[i]);
			}
		rows += 2 + wl->n_anchors + !isnan(wl->dispatch_us);
	}
	if (!(hi > 0)) {
		note(out, "the best candidate's workloads hold no time");
		return;
	}
	height = rows * row_h + r->n_workloads * gap + 50;
	/* whole decades, with room below the shortest (the floor) and right of the longest for its label */
	f = (struct frame){ .left = left,
			    .top = 8,
			    .width = plot_w,
			    .height = height - 50,
			    .xlog = 1,
			    .ycat = 1,
			    .x0 = pow(10, floor(log10(lo * 0.8))),
			    .x1 = pow(10, ceil(log10(hi * 1.5))),
			    .y0 = 0,
			    .y1 = 1 };
	svg_open(out, "workloads", left + plot_w + legend_w, height, "the best candidate per workload");
	draw_axes(out, &f, "microseconds (log scale)", NULL, 0);
	for (size_t w = 0; w < r->n_workloads; w++) {
		const struct ks_report_workload *wl = &r->workloads[w];
		struct bar bars[3 + KS_REPORT_MAX_ANCHORS];
		size_t n = 0;
		double top = y;

		bars[n++] = (struct bar){ "reference", "#9e9e9e", wl->ref_us };
		for (size_t a = 0; a < wl->n_anchors; a++)
			bars[n++] =
				(struct bar){ wl->anchors[a].name, anchor_colour[a % 8], wl->anchors[a].us };
		if (!isnan(wl->dispatch_us))
			bars[n++] = (struct bar){ "per-workload best", "#fbc02d", wl->dispatch_us };
		bars[n++] = (struct bar){ "best candidate", "#e65100", wl->best_us };
		text_at(out, left - 6, y + n * row_h / 2 + 4, "end", "wl", wl->id);
		for (size_t i = 0; i < n; i++, y += row_h) {
			char v[32];

			if (!(bars[i].us > 0))
				continue;
			num(v, sizeof(v), bars[i].us);
			fprintf(out,
				"<g class=\"mark\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
				"height=\"%.1f\" fill=\"%s\">"
				"<title>",
				left, y + 1, fx(&f, bars[i].us) - left, row_h - 3, bars[i].colour);
			escf(out, "%s, %s: %s us", wl->id, bars[i].name, v);
			if (isfinite(wl->best_us) && bars[i].us > 0 && strcmp(bars[i].name, "best candidate"))
				escf(out, " (the best candidate takes %.2fx its time)",
				     wl->best_us / bars[i].us);
			if (!strcmp(bars[i].name, "per-workload best"))
				escf(out, ", candidate #%llu", (unsigned long long)wl->dispatch_id);
			fprintf(out, "</title></rect>");
			text_at(out, fx(&f, bars[i].us) + 4, y + row_h - 4, "start", "value", v);
			fprintf(out, "</g>\n");
		}
		if (isfinite(wl->floor_us) && wl->floor_us > 0) {
			char v[32];

			num(v, sizeof(v), wl->floor_us);
			fprintf(out,
				"<line class=\"floor mark\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" "
				"y2=\"%.1f\"><title>",
				fx(&f, wl->floor_us), fx(&f, wl->floor_us), top - 2, y + 1);
			escf(out,
			     "%s: HBM floor %s us (the bytes the op must move, at the measured bandwidth)",
			     wl->id, v);
			fprintf(out, "</title></line>\n");
		}
		y += gap;
	}
	/* the legend */
	{
		double ly = 14, lx = left + plot_w + 14;
		const struct ks_report_workload *wl = &r->workloads[0];

		/* the legend names the anchors of the workload that has the most */
		for (size_t w = 1; w < r->n_workloads; w++)
			if (r->workloads[w].n_anchors > wl->n_anchors)
				wl = &r->workloads[w];

		fprintf(out, "<g class=\"legend\">");
		fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"#e65100\"/>", lx,
			ly - 9);
		text_at(out, lx + 14, ly, "start", NULL, "best candidate");
		ly += 16;
		if (!isnan(wl->dispatch_us)) {
			fprintf(out,
				"<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"#fbc02d\"/>",
				lx, ly - 9);
			text_at(out, lx + 14, ly, "start", NULL, "per-workload best");
			ly += 16;
		}
		for (size_t a = 0; a < wl->n_anchors; a++, ly += 16) {
			fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\"/>",
				lx, ly - 9, anchor_colour[a % 8]);
			text_at(out, lx + 14, ly, "start", NULL, wl->anchors[a].name);
		}
		fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"#9e9e9e\"/>", lx,
			ly - 9);
		text_at(out, lx + 14, ly, "start", NULL, "reference");
		ly += 16;
		fprintf(out, "<line class=\"floor\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>",
			lx + 5, lx + 5, ly - 10, ly + 1);
		text_at(out, lx + 14, ly, "start", NULL, "HBM floor");
		fprintf(out, "</g>\n");
	}
	fprintf(out, "</svg>\n");
}

static void section_workloads(FILE *out, const struct ks_report *r, const struct ks_report_candidate *best)
{
	char what[512];

	fprintf(out, "<section id=\"workloads\">\n<h2>The best kernel, per workload</h2>\n");
	if (!best) {
		note(out, "no candidate has verified ok yet");
		fprintf(out, "</section>\n");
		return;
	}
	describe(what, sizeof(what), best);
	fprintf(out, "<p><b>");
	esc(out, what);
	fprintf(out, "</b>: fitness %.3f", best->fitness);
	if (best->sol_fraction >= 0)
		fprintf(out, ", %.1f%% of the speed of light", 100 * best->sol_fraction);
	if (r->dispatch_fitness > 0)
		fprintf(out, "; dispatching each workload to its own best would reach %.3f",
			r->dispatch_fitness);
	fprintf(out, ". Take it home: <code>ksearch export-best --op ");
	esc(out, r->op);
	fprintf(out, " --id %llu</code>.", (unsigned long long)best->id);
	if (r->compare_file) {
		fprintf(out, " Anchors from <code>");
		esc(out, r->compare_file);
		fprintf(out, "</code>");
		if (r->compare_gpu) {
			fprintf(out, " (measured on ");
			esc(out, r->compare_gpu);
			fprintf(out, ")");
		}
		fprintf(out, " for %zu of %zu workloads.", r->compare_matched, r->n_workloads);
	}
	fprintf(out, "</p>\n");
	if (best->profile) {
		/* the hardware's view of the same kernel (ksearch profile, or the search's profiler) */
		fprintf(out, "<p class=\"profile\">Hardware counters (Nsight Compute, on ");
		esc(out, best->profile_workload);
		fprintf(out, "):</p>\n<pre>");
		esc(out, best->profile);
		fprintf(out, "</pre>\n");
	} else {
		note(out, "not profiled: `ksearch profile --op %s --id %llu` measures its hardware counters",
		     r->op, (unsigned long long)best->id);
	}
	if (!r->n_workloads)
		note(out, "the best candidate's record holds no timed workload");
	else
		workload_chart(out, r);
	fprintf(out, "</section>\n");
}

/* ---- lineage ---- */

static void section_lineage(FILE *out, const struct ks_report *r)
{
	struct frame f = { .left = 52, .top = 12, .height = 150, .xint = 1 };
	double ymax = 0;

	fprintf(out, "<section id=\"lineage\">\n<h2>Where the best came from</h2>\n");
	if (!r->n_lineage) {
		note(out, "no candidate has verified ok yet");
		fprintf(out, "</section>\n");
		return;
	}
	fprintf(out,
		"<p>The best candidate's ancestors along their first parent, oldest first (%zu "
		"step%s%s).</p>\n",
		r->n_lineage, r->n_lineage == 1 ? "" : "s",
		r->n_lineage == KS_REPORT_LINEAGE ? ", the most recent shown" : "");
	for (size_t i = 0; i < r->n_lineage; i++)
		ymax = fmax(ymax, r->lineage[i].fitness);
	f.width = r->n_lineage < 2 ? 60 : fmin(900, 60.0 * (r->n_lineage - 1));
	f.x0 = 0;
	f.x1 = r->n_lineage > 1 ? (double)(r->n_lineage - 1) : 1;
	f.y0 = 0;
	f.y1 = ymax > 0 ? ymax * 1.15 : 1;
	svg_open(out, "lineage", f.left + f.width + 60, 205, "fitness along the best candidate's lineage");
	draw_axes(out, &f, "step", "fitness", 0);
	for (size_t i = 0; i + 1 < r->n_lineage; i++)
		fprintf(out, "<line class=\"link\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
			fx(&f, (double)i), fy(&f, r->lineage[i].fitness), fx(&f, (double)i + 1),
			fy(&f, r->lineage[i + 1].fitness));
	for (size_t i = 0; i < r->n_lineage; i++) {
		const struct ks_report_candidate *c = &r->lineage[i];
		char what[512];

		describe(what, sizeof(what), c);
		fprintf(out, "<g class=\"mark\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"><title>",
			fx(&f, (double)i), fy(&f, c->fitness), verdict_colour[c->verdict]);
		escf(out, "%s\n%s, fitness %.3f, mutation %s", what, ks_verdict_name(c->verdict), c->fitness,
		     *c->mutation ? c->mutation : "?");
		fprintf(out, "</title></circle>");
		if (r->n_lineage <= 16)
			text_at(out, fx(&f, (double)i), fy(&f, c->fitness) - 9, "middle", "value",
				*c->mutation ? c->mutation : "?");
		fprintf(out, "</g>\n");
	}
	fprintf(out,
		"</svg>\n<table>\n<tr><th>step</th><th>id</th><th>mutation</th><th>family</th><th>params</th>"
		"<th>verdict</th><th>fitness</th><th>change</th></tr>\n");
	for (size_t i = 0; i < r->n_lineage; i++) {
		const struct ks_report_candidate *c = &r->lineage[i];

		fprintf(out, "<tr><td>%zu</td><td>#%llu</td><td>", i, (unsigned long long)c->id);
		esc(out, c->mutation);
		fprintf(out, "</td><td>");
		esc(out, c->family);
		fprintf(out, "</td><td>");
		esc(out, c->params);
		fprintf(out, "</td><td>%s</td><td>%.3f</td><td>", ks_verdict_name(c->verdict), c->fitness);
		if (i)
			fprintf(out, "%+.3f", c->fitness - r->lineage[i - 1].fitness);
		fprintf(out, "</td></tr>\n");
	}
	fprintf(out, "</table>\n</section>\n");
}

/* ---- verdicts over time ---- */

static void section_verdicts(FILE *out, const struct ks_report *r)
{
	struct frame f = {
		.left = 52, .top = 10, .width = 760, .height = 160, .y0 = 0, .y1 = 100, .xint = 1
	};
	uint64_t last;

	fprintf(out, "<section id=\"verdicts\">\n<h2>Verdicts over time</h2>\n");
	if (!r->n_spans) {
		note(out, "the archive holds no candidate yet");
		fprintf(out, "</section>\n");
		return;
	}
	last = r->spans[r->n_spans - 1].last_id;
	fprintf(out,
		"<p>The share of each verdict among the candidates, in %zu spans of ids (ids follow the "
		"order "
		"of evaluation).</p>\n",
		r->n_spans);
	f.x0 = 0;
	f.x1 = (double)(last_id(r) > last ? last_id(r) : last);
	svg_open(out, "verdicts", f.left + f.width + 150, 215, "verdicts over the evaluations");
	draw_axes(out, &f, "evaluations (candidate ids)", "% of the span", 0);
	for (size_t i = 0; i < r->n_spans; i++) {
		const struct ks_archive_verdict_span *s = &r->spans[i];
		uint64_t total = 0;
		double acc = 0, x0 = fx(&f, (double)s->first_id - 1), x1 = fx(&f, (double)s->last_id);

		for (int v = 0; v < KS_VERDICT_COUNT; v++)
			total += s->count[v];
		if (!total)
			continue;
		for (int v = 0; v < KS_VERDICT_COUNT; v++) {
			double share;

			if (!s->count[v])
				continue;
			share = 100.0 * s->count[v] / total;
			fprintf(out,
				"<rect class=\"mark\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
				"fill=\"%s\">"
				"<title>ids %llu to %llu: %s %llu of %llu (%.1f%%)</title></rect>\n",
				x0, fy(&f, acc + share), fmax(x1 - x0 - 0.5, 0.5),
				fy(&f, acc) - fy(&f, acc + share), verdict_colour[v],
				(unsigned long long)s->first_id, (unsigned long long)s->last_id,
				ks_verdict_name((enum ks_verdict)v), (unsigned long long)s->count[v],
				(unsigned long long)total, share);
			acc += share;
		}
	}
	{
		double ly = 16, lx = f.left + f.width + 14;

		fprintf(out, "<g class=\"legend\">");
		for (int v = 0; v < KS_VERDICT_COUNT; v++, ly += 16) {
			char text[64], n[32];

			count(n, sizeof(n), r->metrics.by_verdict[v]);
			snprintf(text, sizeof(text), "%s (%s)", ks_verdict_name((enum ks_verdict)v), n);
			fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\"/>",
				lx, ly - 9, verdict_colour[v]);
			text_at(out, lx + 14, ly, "start", NULL, text);
		}
		fprintf(out, "</g>\n");
	}
	fprintf(out, "</svg>\n</section>\n");
}

/* ---- the best candidates, mutations ---- */

static void section_top(FILE *out, const struct ks_report *r)
{
	fprintf(out, "<section id=\"top\">\n<h2>The best candidates</h2>\n");
	if (!r->n_top) {
		note(out, "no candidate has verified ok yet");
		fprintf(out, "</section>\n");
		return;
	}
	fprintf(out, "<table>\n<tr><th>id</th><th>fitness</th><th>speed of "
		     "light</th><th>family</th><th>params</th>"
		     "<th>mutation</th><th>parent</th></tr>\n");
	for (size_t i = 0; i < r->n_top; i++) {
		const struct ks_report_candidate *c = &r->top[i];

		fprintf(out, "<tr><td>#%llu</td><td>%.3f</td><td>", (unsigned long long)c->id, c->fitness);
		if (c->sol_fraction >= 0)
			fprintf(out, "%.1f%%", 100 * c->sol_fraction);
		fprintf(out, "</td><td>");
		esc(out, c->family);
		fprintf(out, "</td><td>");
		esc(out, c->params);
		fprintf(out, "</td><td>");
		esc(out, c->mutation);
		fprintf(out, "</td><td>");
		if (c->parent)
			fprintf(out, "#%llu", (unsigned long long)c->parent);
		fprintf(out, "</td></tr>\n");
	}
	fprintf(out, "</table>\n<p><code>ksearch archive show ID</code> prints one with its source; "
		     "<code>ksearch archive diff A B</code> compares two.</p>\n</section>\n");
}

static void section_mutations(FILE *out, const struct ks_report *r)
{
	struct frame f = { .left = 110, .top = 6, .width = 420, .y0 = 0, .y1 = 1, .xint = 1, .ycat = 1 };
	double row_h = 20, maxc = 0;
	char sampled[32], all[32];

	fprintf(out, "<section id=\"mutations\">\n<h2>Where candidates come from</h2>\n");
	if (!r->n_mutations) {
		note(out, "the archive holds no candidate yet");
		fprintf(out, "</section>\n");
		return;
	}
	count(sampled, sizeof(sampled), r->n_sample);
	count(all, sizeof(all), r->metrics.candidates);
	fprintf(out,
		"<p>Candidates by the mutation that made them, and how many verified ok, in a sample of %s "
		"of "
		"the %s candidates spread evenly over the run.</p>\n",
		sampled, all);
	for (size_t i = 0; i < r->n_mutations; i++)
		maxc = fmax(maxc, (double)r->mutations[i].count);
	f.height = r->n_mutations * row_h;
	f.x0 = 0;
	f.x1 = maxc * 1.15;
	svg_open(out, "mutations", f.left + f.width + 40, f.height + 50, "candidates by mutation");
	draw_axes(out, &f, "candidates in the sample", NULL, 0);
	for (size_t i = 0; i < r->n_mutations; i++) {
		const struct ks_report_mutation *m = &r->mutations[i];
		double y = f.top + i * row_h;
		char text[64];

		text_at(out, f.left - 6, y + row_h - 6, "end", NULL, m->name);
		fprintf(out,
			"<g class=\"mark\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
			"fill=\"#b0bec5\">"
			"<title>%s: %llu in the sample, %llu verified ok</title></rect>",
			f.left, y + 2, fx(&f, (double)m->count) - f.left, row_h - 4, m->name,
			(unsigned long long)m->count, (unsigned long long)m->ok);
		fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>",
			f.left, y + 2, fx(&f, (double)m->ok) - f.left, row_h - 4,
			verdict_colour[KS_VERDICT_OK]);
		snprintf(text, sizeof(text), "%llu (%.0f%% ok)", (unsigned long long)m->count,
			 100.0 * m->ok / (m->count ? m->count : 1));
		text_at(out, fx(&f, (double)m->count) + 4, y + row_h - 6, "start", "value", text);
		fprintf(out, "</g>\n");
	}
	fprintf(out, "</svg>\n</section>\n");
}

/* ---- the LLM ---- */

static void section_llm(FILE *out, const struct ks_report *r)
{
	const struct ks_report_llm_sample *ls = &r->llm_sample;
	struct frame f = { .top = 6, .width = 400, .y0 = 0, .y1 = 1, .ycat = 1 };
	double row_h = 20, maxr = 0;
	size_t longest = 10;

	if (!r->n_strategies && !r->has_llm_usage && !ls->children)
		return;
	fprintf(out, "<section id=\"llm\">\n<h2>The LLM</h2>\n");
	if (r->has_llm_usage) {
		char req[32], in[32], outc[32];

		count(req, sizeof(req), r->llm_requests);
		count(in, sizeof(in), r->prompt_tokens);
		count(outc, sizeof(outc), r->completion_tokens);
		fprintf(out,
			"<p>%s requests (%llu failed), %s prompt + %s completion tokens, $%.2f, over every "
			"run "
			"on this archive.</p>\n",
			req, (unsigned long long)r->llm_failed, in, outc, r->cost_usd);
	}
	if (ls->children) {
		char n[32];

		count(n, sizeof(n), ls->children);
		fprintf(out,
			"<p>In the sample, %s candidates the LLM wrote (%.0f%% verified ok), each for %.0f "
			"prompt + "
			"%.0f completion tokens and $%.4f on average.</p>\n",
			n, 100.0 * ls->ok / ls->children, (double)ls->prompt_tokens / ls->children,
			(double)ls->completion_tokens / ls->children, ls->cost_usd / ls->children);
	}
	if (!r->n_strategies) {
		note(out, "no strategy prompts are stored");
		fprintf(out, "</section>\n");
		return;
	}
	fprintf(out,
		"<p>Strategy prompts by reward, (improvements + 0.25 &times; ok) / uses, as the search picks "
		"them; <code>ksearch archive prompts</code> lists them with their text.</p>\n");
	for (size_t i = 0; i < r->n_strategies; i++) {
		maxr = fmax(maxr, r->strategies[i].reward);
		longest = strlen(r->strategies[i].name) + 10 > longest ? strlen(r->strategies[i].name) + 10
								       : longest;
	}
	/* room for the names at the left, at about 6.5 px a character */
	f.left = fmin(20 + 6.5 * longest, 420);
	f.height = r->n_strategies * row_h;
	f.x0 = 0;
	f.x1 = maxr > 0 ? maxr * 1.2 : 1;
	svg_open(out, "strategies", f.left + f.width + 60, f.height + 50, "strategies by reward");
	draw_axes(out, &f, "reward", NULL, 0);
	for (size_t i = 0; i < r->n_strategies; i++) {
		const struct ks_report_strategy *s = &r->strategies[i];
		double y = f.top + i * row_h, w = fx(&f, s->reward) - f.left;
		char text[160];

		snprintf(text, sizeof(text), "%s%s", s->name, s->active ? "" : " (retired)");
		text_at(out, f.left - 6, y + row_h - 6, "end", NULL, text);
		/* a strategy never used still gets a sliver, so that it is seen */
		fprintf(out,
			"<g class=\"mark\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
			"fill=\"%s\"><title>",
			f.left, y + 2, w > 1 ? w : 1, row_h - 4, s->active ? "#3949ab" : "#9fa8da");
		escf(out,
		     "#%llu %s (%s)\nreward %.3f: %llu uses, %llu children, %llu ok, %llu improvements, best "
		     "fitness "
		     "%.3f",
		     (unsigned long long)s->id, s->name, *s->origin ? s->origin : "?", s->reward,
		     (unsigned long long)s->uses, (unsigned long long)s->children, (unsigned long long)s->ok,
		     (unsigned long long)s->improvements, s->best_fitness);
		fprintf(out, "</title></rect>");
		snprintf(text, sizeof(text), "%.3f (%llu uses)", s->reward, (unsigned long long)s->uses);
		text_at(out, f.left + (w > 1 ? w : 1) + 4, y + row_h - 6, "start", "value", text);
		fprintf(out, "</g>\n");
	}
	fprintf(out, "</svg>\n</section>\n");
}

/* ---- the page ---- */

static const char style[] =
	"body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif;"
	"margin:24px auto;max-width:1240px;padding:0 16px;color:#212121;background:#fff}"
	"h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:28px 0 6px;border-bottom:1px solid "
	"#e0e0e0;"
	"padding-bottom:4px}h3{font-size:14px;margin:10px 0 2px;color:#616161;font-weight:600}"
	"p{margin:6px 0;font-size:14px;line-height:1.45}.sub{color:#616161;font-size:13px}"
	".cards{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}.card{border:1px solid "
	"#e0e0e0;border-radius:6px;"
	"padding:8px 14px;min-width:120px}.card b{display:block;font-size:20px}.card "
	"span{font-size:12px;color:#616161}"
	".row{display:flex;flex-wrap:wrap;gap:8px 18px;align-items:flex-start}"
	"figure{margin:4px 0}figcaption{font-size:12px;color:#616161;margin-left:110px}"
	"svg{font-size:11px;overflow:hidden}svg text{fill:#424242}svg .label{font-size:12px;fill:#616161}"
	"svg .wl{font-size:12px;font-weight:600}svg .value{font-size:10px;fill:#616161}"
	"svg .on-dark{fill:#fff;font-size:11px}svg .on-light{fill:#212121;font-size:11px}svg "
	".bin{font-size:10px}"
	".grid{stroke:#eeeeee}.tick,.frame{stroke:#9e9e9e}.empty{fill:#f5f5f5;stroke:#e0e0e0}"
	".line{fill:none;stroke:#e65100;stroke-width:2}.point{fill:#e65100;opacity:.0}.point:hover{opacity:1}"
	".dots circle{fill:#9e9e9e;opacity:.45}.link{stroke:#bdbdbd;stroke-width:2}"
	".floor{stroke:#212121;stroke-width:2;stroke-dasharray:4 3}"
	"rect:hover,circle:hover{stroke:#000;stroke-width:1.5}"
	".legend{font-size:12px;margin:6px 0 0 110px}.swatch{display:inline-block;width:12px;height:12px;"
	"margin:0 4px 0 10px;vertical-align:-2px;border-radius:2px}.swatch.empty{background:#f5f5f5;"
	"border:1px solid #e0e0e0}"
	"table{border-collapse:collapse;font-size:13px;margin:8px 0}th,td{padding:3px 10px;text-align:left;"
	"border-bottom:1px solid #eeeeee}th{color:#616161;font-weight:600}"
	"code{background:#f5f5f5;padding:1px 4px;border-radius:3px;font-size:12px}"
	".note{color:#757575;font-style:italic}footer{margin:30px 0;color:#9e9e9e;font-size:12px}";

static void card(FILE *out, const char *value, const char *what)
{
	fprintf(out, "<div class=\"card\"><b>");
	esc(out, value);
	fprintf(out, "</b><span>");
	esc(out, what);
	fprintf(out, "</span></div>\n");
}

static void header(FILE *out, const struct ks_report *r)
{
	const struct ks_archive_metrics *m = &r->metrics;
	char value[64], what[160];

	fprintf(out, "<h1>");
	escf(out, "%s on %s", r->op, r->gpu);
	fprintf(out, "</h1>\n<p class=\"sub\">ksearch report of <code>");
	esc(out, r->path);
	fprintf(out,
		"</code>, read at %s from one snapshot of the archive (consistent while a search "
		"writes).</p>\n",
		r->generated);
	fprintf(out, "<div class=\"cards\">\n");
	count(value, sizeof(value), last_id(r));
	if (last_id(r) > m->candidates) {
		char kept[32];

		/* a sample of a search (docs/example): what the search did, and what is here */
		count(kept, sizeof(kept), m->candidates);
		snprintf(what, sizeof(what),
			 "candidates evaluated, to the last id kept; this archive keeps %s of them", kept);
		card(out, value, what);
	} else {
		card(out, value, "candidates evaluated");
	}
	snprintf(value, sizeof(value), "%.3f", m->best_fitness);
	snprintf(what, sizeof(what), "best fitness (#%llu), speedup over the reference",
		 (unsigned long long)m->best_id);
	card(out, value, m->best_id ? what : "best fitness (none verified ok yet)");
	snprintf(value, sizeof(value), "%.1f%%", 100 * m->coverage);
	snprintf(what, sizeof(what), "coverage: %llu of %llu cells", (unsigned long long)m->cells_filled,
		 (unsigned long long)m->cells);
	card(out, value, what);
	snprintf(value, sizeof(value), "%.3f", m->qd_score);
	card(out, value, "QD-score");
	if (r->dispatch_fitness > 0) {
		snprintf(value, sizeof(value), "%.3f", r->dispatch_fitness);
		card(out, value, "fitness dispatching per workload");
	}
	snprintf(value, sizeof(value), "%.1f%%",
		 m->candidates ? 100.0 * m->by_verdict[KS_VERDICT_OK] / m->candidates : 0);
	card(out, value, last_id(r) > m->candidates ? "verified ok, of the candidates kept" : "verified ok");
	fprintf(out, "</div>\n");
}

int ks_report_write_html(const struct ks_report *r, FILE *out, struct ks_error *err)
{
	const struct ks_report_candidate *best = r->n_lineage ? &r->lineage[r->n_lineage - 1] : NULL;

	fprintf(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
		     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
	escf(out, "ksearch report: %s on %s", r->op, r->gpu);
	fprintf(out, "</title>\n<style>%s</style>\n</head>\n<body>\n", style);
	header(out, r);
	section_grid(out, r);
	section_history(out, r);
	section_workloads(out, r, best);
	section_lineage(out, r);
	section_verdicts(out, r);
	section_top(out, r);
	section_mutations(out, r);
	section_llm(out, r);
	fprintf(out,
		"<footer>Made by <code>ksearch report</code> (ksearch %s) from the archive's kept metrics, "
		"its "
		"indexes and %zu of its records; it needs nothing but this "
		"file.</footer>\n</body>\n</html>\n",
		KS_VERSION, r->n_sample + r->n_elites + r->n_history + r->n_top + r->n_lineage);
	if (fflush(out) || ferror(out))
		return ks_fail(err, "writing the report: %s", strerror(errno));
	return 0;
}
