/*
 * profile.c - the coordinator's side of profiling: running ncu over
 * `ksearch __profile_run`, reading its CSV, and the profile's JSON and
 * plain-text forms (see profile.h).
 */
#include "ksearch/evaluate/profile.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ksearch/base/fs.h"
#include "ksearch/base/json.h"
#include "ksearch/base/proc.h"
#include "ksearch/base/util.h"

#define DEFAULT_TIMEOUT_MS 120000
#define MAX_REASONS 48
#define STALL_PREFIX "smsp__average_warps_issue_stalled_"
#define STALL_SUFFIX "_per_issue_active.ratio"

const char ks_profile_ncu_metrics[] = "gpu__time_duration.sum,"
				      "dram__throughput.avg.pct_of_peak_sustained_elapsed,"
				      "sm__throughput.avg.pct_of_peak_sustained_elapsed,"
				      "sm__warps_active.avg.pct_of_peak_sustained_active,"
				      "lts__t_sector_hit_rate.pct,"
				      "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,"
				      "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum,"
				      "regex:^" STALL_PREFIX "[a-z_]+_per_issue_active\\.ratio$";

const char *ks_profile_status_name(enum ks_profile_status status)
{
	switch (status) {
	case KS_PROFILE_OK:
		return "ok";
	case KS_PROFILE_FAILED:
		return "failed";
	case KS_PROFILE_UNAVAILABLE:
		return "unavailable";
	case KS_PROFILE_NO_PERMISSION:
		return "no_permission";
	}
	return "?";
}

/* ---- ncu's CSV ---- */

/* One CSV line into fields (quoted with "", doubled quotes inside); returns the count. */
static size_t csv_fields(const char *line, size_t len, char **fields, size_t max)
{
	size_t n = 0, i = 0;

	while (i <= len && n < max) {
		struct ks_strbuf sb;

		ks_strbuf_init(&sb);
		if (i < len && line[i] == '"') {
			for (i++; i < len; i++) {
				if (line[i] == '"' && i + 1 < len && line[i + 1] == '"') {
					ks_strbuf_add(&sb, "\"", 1);
					i++;
				} else if (line[i] == '"') {
					i++;
					break;
				} else {
					ks_strbuf_add(&sb, &line[i], 1);
				}
			}
			while (i < len && line[i] != ',')
				i++;
		} else {
			for (; i < len && line[i] != ','; i++)
				ks_strbuf_add(&sb, &line[i], 1);
		}
		fields[n++] = ks_strbuf_detach(&sb);
		i++; /* the comma */
	}
	return n;
}

static void fields_free(char **fields, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(fields[i]);
}

/* "1,234.5" -> 1234.5; -1 when it is not a number (ncu writes "n/a" for what it could not measure). */
static int parse_number(const char *text, double *out)
{
	char buf[64], *end;
	size_t n = 0;

	for (const char *p = text; *p && n + 1 < sizeof(buf); p++)
		if (*p != ',')
			buf[n++] = *p;
	buf[n] = '\0';
	if (!n)
		return -1;
	*out = strtod(buf, &end);
	return *end || !isfinite(*out) ? -1 : 0;
}

/* A value in unit as microseconds, bytes or a fraction, by what the unit measures. */
static double scale(const char *unit, double v)
{
	static const struct {
		const char *unit;
		double factor;
	} units[] = {
		{ "nsecond", 1e-3 }, { "ns", 1e-3 },	{ "usecond", 1 },  { "us", 1 },	  { "msecond", 1e3 },
		{ "ms", 1e3 },	     { "second", 1e6 }, { "s", 1e6 },	   { "byte", 1 }, { "Kbyte", 1e3 },
		{ "Mbyte", 1e6 },    { "Gbyte", 1e9 },	{ "Tbyte", 1e12 }, { "KB", 1e3 }, { "MB", 1e6 },
		{ "GB", 1e9 },	     { "%", 1e-2 },
	};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(unit, units[i].unit))
			return v * units[i].factor;
	return v;
}

struct kernel_acc {
	char id[32];
	char name[128];
	double duration_us, dram, occupancy, l2, sm, local_ld, local_st;
	int have_duration, have_dram, have_occupancy, have_l2, have_sm;
	struct {
		char reason[48];
		double value;
	} stalls[MAX_REASONS];
	size_t n_stalls;
};

static void kernel_metric(struct kernel_acc *k, const char *metric, const char *unit, double v)
{
	size_t plen = strlen(STALL_PREFIX), slen = strlen(STALL_SUFFIX), mlen = strlen(metric);

	if (!strcmp(metric, "gpu__time_duration.sum")) {
		k->duration_us = scale(unit, v);
		k->have_duration = 1;
	} else if (!strcmp(metric, "dram__throughput.avg.pct_of_peak_sustained_elapsed")) {
		k->dram = scale(unit, v);
		k->have_dram = 1;
	} else if (!strcmp(metric, "sm__warps_active.avg.pct_of_peak_sustained_active")) {
		k->occupancy = scale(unit, v);
		k->have_occupancy = 1;
	} else if (!strcmp(metric, "lts__t_sector_hit_rate.pct")) {
		k->l2 = scale(unit, v);
		k->have_l2 = 1;
	} else if (!strcmp(metric, "sm__throughput.avg.pct_of_peak_sustained_elapsed")) {
		k->sm = scale(unit, v);
		k->have_sm = 1;
	} else if (!strcmp(metric, "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum")) {
		k->local_ld = scale(unit, v);
	} else if (!strcmp(metric, "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum")) {
		k->local_st = scale(unit, v);
	} else if (mlen > plen + slen && !strncmp(metric, STALL_PREFIX, plen) &&
		   !strcmp(metric + mlen - slen, STALL_SUFFIX) && k->n_stalls < MAX_REASONS) {
		size_t rlen = mlen - plen - slen;
		char reason[48];

		if (rlen >= sizeof(reason))
			return;
		memcpy(reason, metric + plen, rlen);
		reason[rlen] = '\0';
		/* "selected" is a warp issuing, not waiting; the _not_issued variants count the same stalls
		 * again */
		if (!strcmp(reason, "selected") || strstr(reason, "not_issued"))
			return;
		snprintf(k->stalls[k->n_stalls].reason, sizeof(k->stalls[0].reason), "%s", reason);
		k->stalls[k->n_stalls++].value = v;
	}
}

static int cmp_stall(const void *a, const void *b)
{
	const struct ks_profile_stall *x = a, *y = b;

	if (x->share != y->share)
		return x->share > y->share ? -1 : 1;
	return strcmp(x->reason, y->reason);
}

/* The profile over the launches: fractions weighted by duration (equal weights when none was measured). */
static void aggregate(const struct kernel_acc *ks, size_t n, struct ks_profile *out)
{
	struct ks_profile_stall reasons[MAX_REASONS];
	size_t n_reasons = 0;
	double w_sum[4] = { 0 }, total = 0, stall_total = 0;
	double *targets[4] = { &out->dram_fraction, &out->achieved_occupancy, &out->l2_hit_rate,
			       &out->sm_throughput };
	int all_timed = 1;

	for (size_t i = 0; i < n; i++)
		all_timed &= ks[i].have_duration && ks[i].duration_us > 0;
	out->launches = n;
	for (size_t i = 0; i < n; i++) {
		const struct kernel_acc *k = &ks[i];
		double w = all_timed ? k->duration_us : 1;
		const int have[4] = { k->have_dram, k->have_occupancy, k->have_l2, k->have_sm };
		const double v[4] = { k->dram, k->occupancy, k->l2, k->sm };

		total += k->duration_us;
		out->local_load_bytes += k->local_ld;
		out->local_store_bytes += k->local_st;
		for (int m = 0; m < 4; m++) {
			if (!have[m])
				continue;
			*targets[m] += w * v[m];
			w_sum[m] += w;
		}
		for (size_t s = 0; s < k->n_stalls; s++) {
			size_t r;

			for (r = 0; r < n_reasons && strcmp(reasons[r].reason, k->stalls[s].reason); r++)
				;
			if (r == n_reasons) {
				if (n_reasons == MAX_REASONS)
					continue;
				snprintf(reasons[r].reason, sizeof(reasons[r].reason), "%s",
					 k->stalls[s].reason);
				reasons[r].share = 0;
				n_reasons++;
			}
			reasons[r].share += w * k->stalls[s].value;
			stall_total += w * k->stalls[s].value;
		}
		if (out->n_kernels < KS_PROFILE_MAX_KERNELS) {
			struct ks_profile_kernel *pk = &out->kernels[out->n_kernels++];

			snprintf(pk->name, sizeof(pk->name), "%s", k->name);
			pk->duration_us = k->duration_us;
			pk->dram_fraction = k->dram;
			pk->achieved_occupancy = k->occupancy;
			pk->l2_hit_rate = k->l2;
			pk->sm_throughput = k->sm;
			pk->local_load_bytes = k->local_ld;
			pk->local_store_bytes = k->local_st;
		}
	}
	out->duration_us = total;
	for (int m = 0; m < 4; m++)
		*targets[m] = w_sum[m] > 0 ? *targets[m] / w_sum[m] : 0;
	if (stall_total > 0) {
		for (size_t r = 0; r < n_reasons; r++)
			reasons[r].share /= stall_total;
		KS_QSORT(reasons, n_reasons, cmp_stall);
		for (size_t r = 0; r < n_reasons && r < KS_PROFILE_STALLS && reasons[r].share > 0; r++)
			out->stalls[out->n_stalls++] = reasons[r];
	}
}

int ks_profile_parse_ncu_csv(const char *text, struct ks_profile *out, struct ks_error *err)
{
	struct kernel_acc *ks = NULL;
	size_t n_ks = 0, alloc_ks = 0, line_no = 0;
	int col_id = -1, col_name = -1, col_metric = -1, col_unit = -1, col_value = -1, ret = -1;
	const char *p = text;

	memset(out, 0, sizeof(*out));
	while (p && *p) {
		const char *end = strchr(p, '\n');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char *fields[64];
		size_t n;

		line_no++;
		if (len && p[len - 1] == '\r')
			len--;
		if (!len || p[0] != '"') {
			/* ncu's own messages (==PROF==, ==WARNING==) and the program's output */
			p = end ? end + 1 : NULL;
			continue;
		}
		n = csv_fields(p, len, fields, 64);
		if (col_id < 0) {
			for (size_t i = 0; i < n; i++) {
				if (!strcmp(fields[i], "ID"))
					col_id = (int)i;
				else if (!strcmp(fields[i], "Kernel Name"))
					col_name = (int)i;
				else if (!strcmp(fields[i], "Metric Name"))
					col_metric = (int)i;
				else if (!strcmp(fields[i], "Metric Unit"))
					col_unit = (int)i;
				else if (!strcmp(fields[i], "Metric Value"))
					col_value = (int)i;
			}
			if (col_id < 0 || col_metric < 0 || col_value < 0) {
				fields_free(fields, n);
				ks_fail(err,
					"line %zu: expected ncu's CSV header (\"ID\", ..., \"Metric Name\", "
					"\"Metric Unit\", \"Metric Value\"): run ncu with --csv --page "
					"details",
					line_no);
				goto cleanup;
			}
		} else if ((size_t)col_id < n && (size_t)col_metric < n && (size_t)col_value < n) {
			struct kernel_acc *k = n_ks ? &ks[n_ks - 1] : NULL;
			double v;

			if (!k || strcmp(k->id, fields[col_id])) {
				KS_ALLOC_GROW(ks, n_ks + 1, alloc_ks);
				k = &ks[n_ks++];
				memset(k, 0, sizeof(*k));
				snprintf(k->id, sizeof(k->id), "%s", fields[col_id]);
				snprintf(k->name, sizeof(k->name), "%s",
					 col_name >= 0 && (size_t)col_name < n ? fields[col_name] : "?");
			}
			if (parse_number(fields[col_value], &v) == 0)
				kernel_metric(k, fields[col_metric],
					      col_unit >= 0 && (size_t)col_unit < n ? fields[col_unit] : "",
					      v);
		}
		fields_free(fields, n);
		p = end ? end + 1 : NULL;
	}
	if (!n_ks) {
		ks_fail(err, col_id < 0 ? "no CSV in ncu's output" : "ncu measured no launch");
		goto cleanup;
	}
	aggregate(ks, n_ks, out);
	ret = 0;
cleanup:
	free(ks);
	return ret;
}

/* ---- the record's form ---- */

json_t *ks_profile_to_json(const struct ks_profile *p)
{
	json_t *stalls = json_array(), *kernels = json_array(), *obj;
	char now[32];
	time_t t = time(NULL);
	struct tm tm;

	for (size_t i = 0; i < p->n_stalls; i++)
		json_array_append_new(stalls, json_pack("{s:s, s:f}", "reason", p->stalls[i].reason, "share",
							p->stalls[i].share));
	for (size_t i = 0; i < p->n_kernels; i++) {
		const struct ks_profile_kernel *k = &p->kernels[i];

		json_array_append_new(kernels,
				      json_pack("{s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "name", k->name,
						"duration_us", k->duration_us, "dram_fraction",
						k->dram_fraction, "achieved_occupancy", k->achieved_occupancy,
						"l2_hit_rate", k->l2_hit_rate, "sm_throughput",
						k->sm_throughput, "local_load_bytes", k->local_load_bytes,
						"local_store_bytes", k->local_store_bytes));
	}
	gmtime_r(&t, &tm);
	strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", &tm);
	obj = json_pack("{s:s, s:s, s:I, s:f, s:f, s:f, s:f, s:f, s:o, s:f, s:f, s:o, s:s, s:f}", "tool",
			p->tool, "workload", p->workload, "launches", (json_int_t)p->launches, "duration_us",
			p->duration_us, "dram_fraction", p->dram_fraction, "achieved_occupancy",
			p->achieved_occupancy, "l2_hit_rate", p->l2_hit_rate, "sm_throughput",
			p->sm_throughput, "stalls", stalls, "local_load_bytes", p->local_load_bytes,
			"local_store_bytes", p->local_store_bytes, "kernels", kernels, "profiled", now,
			"seconds", p->seconds);
	return obj;
}

static void bytes_text(struct ks_strbuf *sb, double bytes)
{
	if (bytes >= 1e9)
		ks_strbuf_addf(sb, "%.1f GB", bytes / 1e9);
	else if (bytes >= 1e6)
		ks_strbuf_addf(sb, "%.1f MB", bytes / 1e6);
	else if (bytes >= 1e3)
		ks_strbuf_addf(sb, "%.1f KB", bytes / 1e3);
	else
		ks_strbuf_addf(sb, "%.0f B", bytes);
}

char *ks_profile_text(const json_t *profile, const char *prefix)
{
	const json_t *stalls = json_object_get(profile, "stalls"), *s;
	double ld = json_number_value(json_object_get(profile, "local_load_bytes"));
	double st = json_number_value(json_object_get(profile, "local_store_bytes"));
	struct ks_strbuf sb;
	size_t i;

	if (!json_is_object(profile))
		return NULL;
	if (!prefix)
		prefix = "";
	ks_strbuf_init(&sb);
	ks_strbuf_addf(&sb,
		       "%sDRAM throughput %.0f%% of peak, SM throughput %.0f%% of peak, L2 hit rate %.0f%%\n",
		       prefix, 100 * json_number_value(json_object_get(profile, "dram_fraction")),
		       100 * json_number_value(json_object_get(profile, "sm_throughput")),
		       100 * json_number_value(json_object_get(profile, "l2_hit_rate")));
	ks_strbuf_addf(&sb, "%sachieved occupancy %.2f\n", prefix,
		       json_number_value(json_object_get(profile, "achieved_occupancy")));
	ks_strbuf_addf(&sb, "%swarp stalls:", prefix);
	json_array_foreach(stalls, i, s)
	{
		const char *reason = json_string_value(json_object_get(s, "reason"));

		ks_strbuf_addf(&sb, "%s ", i ? "," : "");
		for (const char *c = reason ? reason : "?"; *c; c++)
			ks_strbuf_add(&sb, *c == '_' ? " " : c, 1);
		ks_strbuf_addf(&sb, " %.0f%%", 100 * json_number_value(json_object_get(s, "share")));
	}
	if (!json_array_size(stalls))
		ks_strbuf_adds(&sb, " not measured");
	ks_strbuf_addf(&sb, "\n%slocal memory (spills): ", prefix);
	if (ld + st <= 0) {
		ks_strbuf_adds(&sb, "none\n");
	} else {
		bytes_text(&sb, ld);
		ks_strbuf_adds(&sb, " loaded, ");
		bytes_text(&sb, st);
		ks_strbuf_adds(&sb, " stored\n");
	}
	return ks_strbuf_detach(&sb);
}

/* ---- the outcome's form, between the ranks of a job ---- */

static int is_utf8(const char *text)
{
	json_t *j = json_string(text);

	json_decref(j);
	return j != NULL;
}

/*
 * Whether ks_profile_to_json() writes every stall and kernel of p: it
 * leaves out one with a number that is not finite or a name that is not
 * UTF-8, and an outcome short of one would arrive looking whole.
 */
static int writes_whole(const struct ks_profile *p)
{
	for (size_t i = 0; i < p->n_stalls; i++)
		if (!isfinite(p->stalls[i].share) || !is_utf8(p->stalls[i].reason))
			return 0;
	for (size_t i = 0; i < p->n_kernels; i++) {
		const struct ks_profile_kernel *k = &p->kernels[i];
		const double v[] = { k->duration_us,	  k->dram_fraction, k->achieved_occupancy,
				     k->l2_hit_rate,	  k->sm_throughput, k->local_load_bytes,
				     k->local_store_bytes };

		if (!is_utf8(k->name))
			return 0;
		for (size_t j = 0; j < sizeof(v) / sizeof(v[0]); j++)
			if (!isfinite(v[j]))
				return 0;
	}
	return 1;
}

json_t *ks_profile_outcome_to_json(const struct ks_profile_outcome *o)
{
	const struct ks_profile *p = &o->profile;
	const char *status = ks_profile_status_name(o->status);
	json_t *profile;

	if (!strcmp(status, "?") || p->n_stalls > KS_PROFILE_STALLS ||
	    p->n_kernels > KS_PROFILE_MAX_KERNELS || !writes_whole(p) || !isfinite(o->held_s) ||
	    o->held_s < 0)
		return NULL;
	profile = ks_profile_to_json(p);
	if (!profile)
		return NULL;
	return json_pack("{s:s, s:s, s:o, s:f}", "status", status, "why", o->why, "profile", profile,
			 "held_s", o->held_s);
}

/*
 * The readers below (with base/json.h's ks_json_field_*) refuse rather
 * than repair, and name the field by its path from the outcome
 * ("profile.kernels[2].name"), at being the path's start up to the key: ""
 * or "profile.kernels[2].".
 */

static int get_status(const json_t *obj, enum ks_profile_status *out, struct ks_error *err)
{
	/* the statuses are 0, 1, ... up to the first that has no name */
	const char *names[8];
	int n = 0, status;

	while (n < 8 && strcmp(ks_profile_status_name(n), "?")) {
		names[n] = ks_profile_status_name(n);
		n++;
	}
	if (ks_json_field_word(obj, "", "status", names, n, &status, err) < 0)
		return -1;
	*out = status;
	return 0;
}

static int get_stall(const json_t *obj, size_t i, struct ks_profile_stall *s, struct ks_error *err)
{
	char at[48];

	snprintf(at, sizeof(at), "profile.stalls[%zu]", i);
	if (ks_json_want_object(obj, at, err) < 0)
		return -1;
	strcat(at, ".");
	if (ks_json_field_text(obj, at, "reason", s->reason, sizeof(s->reason), err) < 0 ||
	    ks_json_field_number(obj, at, "share", 0, &s->share, err) < 0)
		return -1;
	return 0;
}

static int get_kernel(const json_t *obj, size_t i, struct ks_profile_kernel *k, struct ks_error *err)
{
	char at[48];

	snprintf(at, sizeof(at), "profile.kernels[%zu]", i);
	if (ks_json_want_object(obj, at, err) < 0)
		return -1;
	strcat(at, ".");
	if (ks_json_field_text(obj, at, "name", k->name, sizeof(k->name), err) < 0 ||
	    ks_json_field_number(obj, at, "duration_us", 1, &k->duration_us, err) < 0 ||
	    ks_json_field_number(obj, at, "dram_fraction", 0, &k->dram_fraction, err) < 0 ||
	    ks_json_field_number(obj, at, "achieved_occupancy", 0, &k->achieved_occupancy, err) < 0 ||
	    ks_json_field_number(obj, at, "l2_hit_rate", 0, &k->l2_hit_rate, err) < 0 ||
	    ks_json_field_number(obj, at, "sm_throughput", 0, &k->sm_throughput, err) < 0 ||
	    ks_json_field_number(obj, at, "local_load_bytes", 1, &k->local_load_bytes, err) < 0 ||
	    ks_json_field_number(obj, at, "local_store_bytes", 1, &k->local_store_bytes, err) < 0)
		return -1;
	return 0;
}

static int get_profile(const json_t *obj, struct ks_profile *p, struct ks_error *err)
{
	const char *at = "profile.";
	const json_t *stalls, *kernels;
	json_int_t launches = 0;

	if (ks_json_want_object(obj, "profile", err) < 0 ||
	    ks_json_field_text(obj, at, "tool", p->tool, sizeof(p->tool), err) < 0 ||
	    ks_json_field_text(obj, at, "workload", p->workload, sizeof(p->workload), err) < 0 ||
	    ks_json_field_count(obj, at, "launches", LLONG_MAX, &launches, err) < 0 ||
	    ks_json_field_number(obj, at, "duration_us", 1, &p->duration_us, err) < 0 ||
	    ks_json_field_number(obj, at, "dram_fraction", 0, &p->dram_fraction, err) < 0 ||
	    ks_json_field_number(obj, at, "achieved_occupancy", 0, &p->achieved_occupancy, err) < 0 ||
	    ks_json_field_number(obj, at, "l2_hit_rate", 0, &p->l2_hit_rate, err) < 0 ||
	    ks_json_field_number(obj, at, "sm_throughput", 0, &p->sm_throughput, err) < 0 ||
	    ks_json_field_number(obj, at, "local_load_bytes", 1, &p->local_load_bytes, err) < 0 ||
	    ks_json_field_number(obj, at, "local_store_bytes", 1, &p->local_store_bytes, err) < 0 ||
	    ks_json_field_number(obj, at, "seconds", 1, &p->seconds, err) < 0 ||
	    !(stalls = ks_json_field_list(obj, at, "stalls", KS_PROFILE_STALLS, err)) ||
	    !(kernels = ks_json_field_list(obj, at, "kernels", KS_PROFILE_MAX_KERNELS, err)))
		return -1;
	p->launches = (size_t)launches;
	for (; p->n_stalls < json_array_size(stalls); p->n_stalls++)
		if (get_stall(json_array_get(stalls, p->n_stalls), p->n_stalls, &p->stalls[p->n_stalls],
			      err) < 0)
			return -1;
	for (; p->n_kernels < json_array_size(kernels); p->n_kernels++)
		if (get_kernel(json_array_get(kernels, p->n_kernels), p->n_kernels, &p->kernels[p->n_kernels],
			       err) < 0)
			return -1;
	return 0;
}

int ks_profile_outcome_from_json(const json_t *obj, struct ks_profile_outcome *out, struct ks_error *err)
{
	memset(out, 0, sizeof(*out));
	if (ks_json_want_object(obj, "the profile outcome", err) < 0 ||
	    get_status(obj, &out->status, err) < 0 ||
	    ks_json_field_text(obj, "", "why", out->why, sizeof(out->why), err) < 0 ||
	    get_profile(json_object_get(obj, "profile"), &out->profile, err) < 0 ||
	    ks_json_field_number(obj, "", "held_s", 1, &out->held_s, err) < 0) {
		/* half an outcome is none: nothing read before the refusal is left */
		memset(out, 0, sizeof(*out));
		return -1;
	}
	return 0;
}

/* ---- running the profiler ---- */

const struct ks_workload *ks_profile_default_workload(const struct ks_op *op)
{
	const struct ks_workload *best = NULL;
	int64_t most = -1;

	for (size_t i = 0; i < op->n_workloads; i++) {
		int64_t bytes = 0;
		struct ks_error err;

		if (ks_expr_eval(op->min_bytes, &op->workloads[i].axes, &bytes, &err) < 0)
			bytes = 0;
		if (bytes > most) {
			most = bytes;
			best = &op->workloads[i];
		}
	}
	return best;
}

char *ks_profile_find_ncu(const char *given)
{
	const char *env = getenv("KSEARCH_NCU");
	char *path;

	if (given && *given)
		return ks_proc_which(given);
	if (env && *env)
		return ks_proc_which(env);
	if ((path = ks_proc_which("ncu")))
		return path;
	return ks_proc_which("/usr/local/cuda/bin/ncu");
}

static char *read_file(const char *path)
{
	size_t len;
	char *text = NULL;
	struct ks_error err;

	if (ks_read_file(path, &text, &len, &err) < 0)
		return ks_strdup("");
	return text;
}

/*
 * The first of ncu's own error lines ("==ERROR== ...") that holds needle,
 * into buf without the tag.  Only those: what the runner prints is its
 * own, and a candidate's device printf never reaches ncu's output (the
 * runner's stdout is /dev/null), so nothing a kernel does can pass for
 * ncu's words.
 */
static int find_error(const char *text, const char *needle, char *buf, size_t size)
{
	for (const char *line = text; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);

		if (!strncmp(line, "==ERROR== ", 10) && memmem(line, len, needle, strlen(needle))) {
			snprintf(buf, size, "%.*s", (int)(len - 10), line + 10);
			return 1;
		}
		line = end ? end + 1 : NULL;
	}
	return 0;
}

/* Sort out what went wrong from ncu's words, the runner's and the exit status. */
static void classify(const char *ncu_text, const json_t *result, const struct ks_proc_result *pr,
		     int timeout_ms, struct ks_profile_outcome *out)
{
	char line[1024], status[128];

	out->status = KS_PROFILE_FAILED;
	if (pr->timed_out) {
		snprintf(out->why, sizeof(out->why), "the profile did not finish within %d s (killed)",
			 timeout_ms / 1000);
	} else if (pr->cancelled) {
		snprintf(out->why, sizeof(out->why), "stopped before it finished");
	} else if (find_error(ncu_text, "ERR_NVGPUCTRPERM", line, sizeof(line))) {
		out->status = KS_PROFILE_NO_PERMISSION;
		snprintf(out->why, sizeof(out->why),
			 "ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): run as root, "
			 "or let every user read them (the nvidia module's option "
			 "NVreg_RestrictProfilingToAdminUsers=0; see "
			 "https://developer.nvidia.com/ERR_NVGPUCTRPERM)");
	} else if (json_is_false(json_object_get(result, "ok"))) {
		/* the runner got as far as the candidate: its own words */
		snprintf(out->why, sizeof(out->why), "%s",
			 json_string_value(json_object_get(result, "error")) ?: "the runner failed");
	} else if (find_error(ncu_text, "Failed to initialize the profiler", line, sizeof(line)) ||
		   find_error(ncu_text, "not supported", line, sizeof(line)) ||
		   find_error(ncu_text, "Failed to load", line, sizeof(line))) {
		out->status = KS_PROFILE_UNAVAILABLE;
		snprintf(out->why, sizeof(out->why), "ncu cannot profile on this machine: %s", line);
	} else if (find_error(ncu_text, "", line, sizeof(line))) {
		snprintf(out->why, sizeof(out->why), "ncu: %s", line);
	} else {
		ks_child_describe_status(pr->status, status, sizeof(status));
		snprintf(out->why, sizeof(out->why), "the profiled run %s without a result", status);
	}
}

static int copy_text(const char *text, const char *path, struct ks_error *err)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return ks_fail(err, "%s: %s", path, strerror(errno));
	fputs(text, f);
	if (fclose(f) != 0)
		return ks_fail(err, "%s: %s", path, strerror(errno));
	return 0;
}

int ks_profile_run(const struct ks_profile_request *req, struct ks_profile_outcome *out, struct ks_error *err)
{
	const struct ks_workload *wl =
		req->workload ? ks_op_workload(req->op, req->workload) : ks_profile_default_workload(req->op);
	int timeout_ms = req->timeout_ms > 0 ? req->timeout_ms : DEFAULT_TIMEOUT_MS;
	char dir[] = "/tmp/ksearch-profile-XXXXXX", deadline[32], gpu[16];
	char *ncu = NULL, *source_file = NULL, *result_file = NULL, *out_file = NULL, *err_file = NULL;
	char *ncu_text = NULL, *ncu_err = NULL;
	const char **argv = NULL;
	json_t *result = NULL;
	struct ks_proc_result pr;
	struct ks_error why;
	size_t n = 0;
	int ret = -1;

	memset(out, 0, sizeof(*out));
	out->status = KS_PROFILE_FAILED;
	if (!wl) {
		snprintf(out->why, sizeof(out->why), "no workload '%s' in %s",
			 req->workload ? req->workload : "", req->op->key);
		return 0;
	}
	if (!(ncu = ks_profile_find_ncu(req->ncu))) {
		out->status = KS_PROFILE_UNAVAILABLE;
		snprintf(out->why, sizeof(out->why),
			 "%s%s not found: profiling needs Nsight Compute's ncu (on PATH, or name it with "
			 "KSEARCH_NCU)",
			 req->ncu		 ? req->ncu
			 : getenv("KSEARCH_NCU") ? getenv("KSEARCH_NCU")
						 : "ncu",
			 req->ncu || getenv("KSEARCH_NCU") ? "" : " (Nsight Compute)");
		return 0;
	}
	if (!mkdtemp(dir)) {
		ks_fail(err, "cannot create a folder for the profile under /tmp: %s", strerror(errno));
		goto cleanup;
	}
	source_file = ks_path_join(dir, "candidate.cu");
	result_file = ks_path_join(dir, "result.json");
	out_file = ks_path_join(dir, "ncu.out");
	err_file = ks_path_join(dir, "ncu.err");
	if (copy_text(req->source, source_file, err) < 0)
		goto cleanup;
	/* the runner ends itself a little before we would kill it, so that it can say why */
	snprintf(deadline, sizeof(deadline), "%d", timeout_ms / 1000 > 2 ? timeout_ms / 1000 - 1 : 1);
	snprintf(gpu, sizeof(gpu), "%d", req->gpu);
	argv = ks_calloc(40 + 2 * req->n_params, sizeof(*argv));
	argv[n++] = ncu;
	argv[n++] = "--csv";
	argv[n++] = "--page";
	argv[n++] = "details";
	argv[n++] = "--print-units";
	argv[n++] = "base";
	argv[n++] = "--metrics";
	argv[n++] = ks_profile_ncu_metrics;
	argv[n++] = "--profile-from-start";
	argv[n++] = "off";
	argv[n++] = "--clock-control";
	argv[n++] = "none";
	argv[n++] = "--cache-control";
	argv[n++] = "all";
	argv[n++] = "--replay-mode";
	argv[n++] = "kernel";
	/* the runner alone: not the compiler child it starts */
	argv[n++] = "--target-processes";
	argv[n++] = "application-only";
	argv[n++] = ks_child_program();
	argv[n++] = "__profile_run";
	argv[n++] = "--op-dir";
	argv[n++] = req->op->dir;
	argv[n++] = "--source";
	argv[n++] = source_file;
	argv[n++] = "--path";
	argv[n++] = req->path ? req->path : "candidate.cu";
	argv[n++] = "--workload";
	argv[n++] = wl->id;
	argv[n++] = "--gpu";
	argv[n++] = gpu;
	argv[n++] = "--result";
	argv[n++] = result_file;
	argv[n++] = "--deadline";
	argv[n++] = deadline;
	for (size_t i = 0; i < req->n_params; i++) {
		argv[n++] = "--param";
		argv[n++] = req->params[i];
	}
	argv[n] = NULL;
	snprintf(out->profile.workload, sizeof(out->profile.workload), "%s", wl->id);
	if (ks_proc_run(argv, out_file, err_file, timeout_ms, req->cancel, &pr, &why) < 0) {
		out->status = KS_PROFILE_UNAVAILABLE;
		snprintf(out->why, sizeof(out->why), "%.2000s", why.msg);
		ret = 0;
		goto cleanup;
	}
	ncu_text = read_file(out_file);
	ncu_err = read_file(err_file);
	{
		char *both = ks_asprintf("%s\n%s", ncu_text, ncu_err);

		free(ncu_err);
		ncu_err = both;
	}
	if (req->raw_path && copy_text(ncu_err, req->raw_path, err) < 0)
		goto cleanup;
	result = json_load_file(result_file, 0, NULL);
	if (!pr.timed_out && !pr.cancelled && json_is_true(json_object_get(result, "ok")) &&
	    ks_profile_parse_ncu_csv(ncu_text, &out->profile, &why) == 0) {
		out->status = KS_PROFILE_OK;
		ks_proc_tool_version(ncu, "ncu", out->profile.tool, sizeof(out->profile.tool));
		snprintf(out->profile.workload, sizeof(out->profile.workload), "%s", wl->id);
	} else {
		classify(ncu_err, result, &pr, timeout_ms, out);
		if (out->status == KS_PROFILE_FAILED && json_is_true(json_object_get(result, "ok")) &&
		    !pr.timed_out && !pr.cancelled && !strstr(ncu_err, "==ERROR== "))
			snprintf(out->why, sizeof(out->why), "reading ncu's output: %.2000s", why.msg);
	}
	out->profile.seconds = pr.seconds;
	ret = 0;
cleanup:
	json_decref(result);
	if (source_file)
		unlink(source_file);
	if (result_file)
		unlink(result_file);
	if (out_file) {
		unlink(out_file);
		unlink(err_file);
		rmdir(dir);
	}
	free(argv);
	free(ncu);
	free(source_file);
	free(result_file);
	free(out_file);
	free(err_file);
	free(ncu_text);
	free(ncu_err);
	return ret;
}
