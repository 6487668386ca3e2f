/*
 * report.c - gathering a report: what the page shows, read from one
 * pinned snapshot of the archive, bounded whatever its size.
 */
#include "ksearch/report/report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ksearch/archive/record.h"
#include "ksearch/base/json.h"
#include "ksearch/base/util.h"
#include "ksearch/evaluate/profile.h"

/* "2026-11-22T01:50:00Z" -> seconds since the epoch; -1 when text is not that. */
static double parse_time(const char *text)
{
	struct tm tm;
	const char *end;

	if (!text)
		return -1;
	memset(&tm, 0, sizeof(tm));
	end = strptime(text, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end || (*end && *end != 'Z' && *end != '.'))
		return -1;
	return (double)timegm(&tm);
}

/* A count in a JSON object, 0 when absent or negative. */
static uint64_t stat_u64(const json_t *stats, const char *name)
{
	json_int_t v = json_integer_value(json_object_get(stats, name));

	return v > 0 ? (uint64_t)v : 0;
}

static void copy_text(char *buf, size_t size, const char *text)
{
	snprintf(buf, size, "%s", text ? text : "");
}

/* "SPLITS=8 WARPS=4" from a record's params; caller frees. */
static char *format_params(const json_t *params)
{
	struct ks_strbuf sb;
	const char *key;
	json_t *value;

	ks_strbuf_init(&sb);
	json_object_foreach((json_t *)params, key, value)
	{
		char *text = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);

		ks_strbuf_addf(&sb, "%s%s=%s", sb.len ? " " : "", key, text ? text : "?");
		free(text);
	}
	return ks_strbuf_detach(&sb);
}

static void candidate_from_record(struct ks_report_candidate *c, const struct ks_record *rec)
{
	memset(c, 0, sizeof(*c));
	c->id = rec->id;
	c->verdict = rec->result.verdict;
	c->fitness = ks_record_ok(rec) ? rec->result.fitness : 0;
	c->sol_fraction =
		(rec->has & KS_RECORD_SOL_FRACTION) && ks_record_ok(rec) ? rec->result.sol_fraction : -1;
	c->created = parse_time(*rec->created ? rec->created : NULL);
	copy_text(c->family, sizeof(c->family), rec->family);
	copy_text(c->mutation, sizeof(c->mutation), rec->mutation);
	c->params = format_params(rec->params);
	for (int d = 0; d < KS_DESC_COUNT; d++)
		if (rec->has_descriptor & (1u << d))
			c->descriptors[d] = rec->result.descriptors[d];
	c->has_descriptor = rec->has_descriptor;
	c->parent = rec->n_parents ? rec->parents[0] : 0;
	c->profile = ks_profile_text(rec->profile, "");
	copy_text(c->profile_workload, sizeof(c->profile_workload),
		  json_string_value(json_object_get(rec->profile, "workload")));
	c->detailed = 1;
}

static void candidate_release(struct ks_report_candidate *c)
{
	free(c->params);
	free(c->profile);
	c->params = NULL;
	c->profile = NULL;
}

static void candidates_free(struct ks_report_candidate *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		candidate_release(&list[i]);
	free(list);
}

/*
 * Read one record into *c: 1 when found, 0 when there is no such id, -1
 * on error.  With llm, *llm is a new reference to its "llm" object (or NULL).
 */
static int read_candidate_llm(struct ks_archive *ar, uint64_t id, struct ks_report_candidate *c, json_t **llm,
			      struct ks_error *err)
{
	struct ks_record rec;
	int ret = -1;

	ks_record_init(&rec);
	if (ks_archive_get_record(ar, id, &rec, NULL, err) < 0)
		goto cleanup;
	ret = rec.id != 0;
	if (!ret)
		goto cleanup;
	candidate_from_record(c, &rec);
	if (llm)
		*llm = rec.llm ? json_incref(rec.llm) : NULL;
cleanup:
	ks_record_release(&rec);
	return ret;
}

static int read_candidate(struct ks_archive *ar, uint64_t id, struct ks_report_candidate *c,
			  struct ks_error *err)
{
	return read_candidate_llm(ar, id, c, NULL, err);
}

/* Elites, most of them with their records: the best KS_REPORT_ELITE_DETAILS. */
static int by_fitness_desc(const void *a, const void *b)
{
	const struct ks_archive_elite *x = a, *y = b;

	return x->fitness < y->fitness	 ? 1
	       : x->fitness > y->fitness ? -1
					 : (x->cell > y->cell) - (x->cell < y->cell);
}

static int gather_elites(struct ks_archive *ar, struct ks_report *r, struct ks_error *err)
{
	struct ks_archive_elite *elites = NULL, *ranked = NULL;
	double threshold = -INFINITY;
	size_t n;
	int ret = -1;

	if (ks_archive_elites(ar, &elites, &n, err) < 0)
		return -1;
	if (n > KS_REPORT_ELITE_DETAILS) {
		ranked = ks_malloc(n * sizeof(*ranked));
		memcpy(ranked, elites, n * sizeof(*ranked));
		KS_QSORT(ranked, n, by_fitness_desc);
		threshold = ranked[KS_REPORT_ELITE_DETAILS - 1].fitness;
	}
	r->elites = ks_calloc(n ? n : 1, sizeof(*r->elites));
	for (size_t i = 0; i < n; i++) {
		struct ks_report_elite *e = &r->elites[r->n_elites];
		int got = 0;

		e->cell = elites[i].cell;
		ks_archive_cell_coords(ar, e->cell, e->coords);
		if (elites[i].fitness >= threshold &&
		    (got = read_candidate(ar, elites[i].id, &e->c, err)) < 0)
			goto cleanup;
		if (!got) {
			e->c.id = elites[i].id;
			e->c.verdict = KS_VERDICT_OK;
			e->c.fitness = elites[i].fitness;
			e->c.sol_fraction = -1;
			e->c.created = -1;
			e->c.params = ks_strdup("");
		}
		/* the grid's fitness is the placement's truth (a record read later could differ) */
		e->c.fitness = elites[i].fitness;
		r->n_elites++;
	}
	ret = 0;
cleanup:
	free(ranked);
	free(elites);
	return ret;
}

struct id_list {
	uint64_t *v;
	size_t n, alloc;
};

static int collect_id(const struct ks_record *rec, void *list, struct ks_error *err)
{
	struct id_list *ids = list;

	(void)err;
	KS_ALLOC_GROW(ids->v, ids->n + 1, ids->alloc);
	ids->v[ids->n++] = rec->id;
	return 0;
}

/*
 * The metrics' history, each point with the id and time of the candidate
 * that made it: the evals-th record, which has id evals when the ids are
 * dense (a search's are).  When they are not (an import of a sample or of
 * elites only keeps the ids it had), the records' ids in id order, the
 * order an import inserts them in, say which.
 */
static int gather_history(struct ks_archive *ar, struct ks_report *r, struct ks_error *err)
{
	struct ks_archive_qd_point *points = NULL;
	struct id_list ids = { 0 };
	size_t n = 0;
	int dense = r->metrics.next_id == r->metrics.candidates + 1, ret = -1;

	if (ks_archive_history(ar, KS_REPORT_HISTORY, &points, &n, err) < 0)
		goto cleanup;
	if (!dense && n) {
		struct ks_archive_query query = { .verdict = -1, .sort = KS_ARCHIVE_SORT_ID };

		if (ks_archive_foreach_record(ar, &query, collect_id, &ids, err) < 0)
			goto cleanup;
	}
	r->history = ks_calloc(n ? n : 1, sizeof(*r->history));
	for (size_t i = 0; i < n; i++) {
		struct ks_report_point *p = &r->history[i];
		struct ks_report_candidate c;

		p->evals = points[i].evals;
		p->id = dense ? p->evals : p->evals && p->evals <= ids.n ? ids.v[p->evals - 1] : 0;
		p->best_fitness = points[i].best_fitness;
		p->coverage = points[i].coverage;
		p->qd_score = points[i].qd_score;
		p->cells_filled = points[i].cells_filled;
		p->time = -1;
		if (p->id) {
			int got = read_candidate(ar, p->id, &c, err);

			if (got < 0)
				goto cleanup;
			if (got) {
				p->time = c.created;
				candidate_release(&c);
			}
		}
		r->n_history = i + 1;
	}
	ret = 0;
cleanup:
	free(ids.v);
	free(points);
	return ret;
}

static void count_mutation(struct ks_report *r, const struct ks_report_candidate *c, size_t *alloc)
{
	const char *name = *c->mutation ? c->mutation : "unknown";
	size_t i;

	for (i = 0; i < r->n_mutations; i++)
		if (!strcmp(r->mutations[i].name, name))
			break;
	if (i == r->n_mutations) {
		KS_ALLOC_GROW(r->mutations, r->n_mutations + 1, *alloc);
		memset(&r->mutations[i], 0, sizeof(r->mutations[i]));
		copy_text(r->mutations[i].name, sizeof(r->mutations[i].name), name);
		r->n_mutations++;
	}
	r->mutations[i].count++;
	if (c->verdict == KS_VERDICT_OK)
		r->mutations[i].ok++;
}

static int by_count_desc(const void *a, const void *b)
{
	const struct ks_report_mutation *x = a, *y = b;

	return x->count < y->count ? 1 : x->count > y->count ? -1 : strcmp(x->name, y->name);
}

/* KS_REPORT_SAMPLE ids spread evenly from the first to the last (every id when fewer). */
static int gather_sample(struct ks_archive *ar, struct ks_report *r, struct ks_error *err)
{
	uint64_t last = r->metrics.next_id > 1 ? r->metrics.next_id - 1 : 0, previous = 0;
	size_t want = last < KS_REPORT_SAMPLE ? (size_t)last : KS_REPORT_SAMPLE, alloc = 0;

	r->sample = ks_calloc(want ? want : 1, sizeof(*r->sample));
	for (size_t k = 0; k < want; k++) {
		uint64_t id = want < 2 ? last : 1 + (uint64_t)((double)(last - 1) * k / (want - 1) + 0.5);
		json_t *llm = NULL;
		int got;

		if (id == previous)
			continue;
		previous = id;
		got = read_candidate_llm(ar, id, &r->sample[r->n_sample], &llm, err);
		if (got < 0)
			return -1;
		if (!got)
			continue;
		if (json_is_object(llm)) {
			r->llm_sample.children++;
			r->llm_sample.ok += r->sample[r->n_sample].verdict == KS_VERDICT_OK;
			r->llm_sample.prompt_tokens += stat_u64(llm, "prompt_tokens");
			r->llm_sample.completion_tokens += stat_u64(llm, "completion_tokens");
			r->llm_sample.cost_usd += json_number_value(json_object_get(llm, "cost_usd"));
		}
		json_decref(llm);
		count_mutation(r, &r->sample[r->n_sample++], &alloc);
	}
	if (r->n_sample && r->sample[0].created >= 0)
		r->first_time = r->sample[0].created;
	KS_QSORT(r->mutations, r->n_mutations, by_count_desc);
	return 0;
}

static int top_row(const struct ks_record *rec, void *report, struct ks_error *err)
{
	struct ks_report *r = report;

	(void)err;
	candidate_from_record(&r->top[r->n_top++], rec);
	return r->n_top >= KS_REPORT_TOP;
}

static int gather_top(struct ks_archive *ar, struct ks_report *r, struct ks_error *err)
{
	struct ks_archive_query query = { KS_VERDICT_OK, KS_ARCHIVE_SORT_FITNESS, KS_REPORT_TOP };

	r->top = ks_calloc(KS_REPORT_TOP, sizeof(*r->top));
	return ks_archive_foreach_record(ar, &query, top_row, r, err);
}

/* Back from the best along parents[0], then turned oldest first. */
static int gather_lineage(struct ks_archive *ar, struct ks_report *r, const struct ks_record *best,
			  struct ks_error *err)
{
	uint64_t id = r->metrics.best_id;

	r->lineage = ks_calloc(KS_REPORT_LINEAGE, sizeof(*r->lineage));
	candidate_from_record(&r->lineage[r->n_lineage++], best);
	id = r->lineage[0].parent;
	while (id && r->n_lineage < KS_REPORT_LINEAGE) {
		int got, seen = 0;

		for (size_t i = 0; i < r->n_lineage; i++)
			seen |= r->lineage[i].id == id;
		if (seen)
			break; /* a cycle: damaged data, not a search */
		got = read_candidate(ar, id, &r->lineage[r->n_lineage], err);
		if (got < 0)
			return -1;
		if (!got)
			break;
		id = r->lineage[r->n_lineage++].parent;
	}
	for (size_t i = 0, j = r->n_lineage - 1; i < j; i++, j--) {
		struct ks_report_candidate t = r->lineage[i];

		r->lineage[i] = r->lineage[j];
		r->lineage[j] = t;
	}
	return 0;
}

static double number_or_nan(const json_t *value)
{
	return json_is_number(value) ? json_number_value(value) : NAN;
}

/* A time as the page shows it: NaN for none (0 is never a measurement). */
static double time_or_nan(double us)
{
	return us > 0 ? us : NAN;
}

/* The best candidate's workloads, with the per-workload bests beside them. */
static int gather_workloads(struct ks_archive *ar, struct ks_report *r, const struct ks_record *best,
			    struct ks_error *err)
{
	const struct ks_result *res = &best->result;
	json_t *bests = NULL;

	if (ks_archive_workload_bests(ar, &bests, err) < 0)
		return -1;
	if (json_object_size(bests))
		r->dispatch_fitness = ks_archive_dispatch_fitness(bests);
	r->workloads = ks_calloc(res->n_workloads + 1, sizeof(*r->workloads));
	for (size_t i = 0; i < res->n_workloads; i++) {
		const struct ks_result_workload *w = &res->workloads[i];
		struct ks_report_workload *wl = &r->workloads[r->n_workloads];
		const json_t *b;

		if (!*w->id)
			continue;
		copy_text(wl->id, sizeof(wl->id), w->id);
		wl->best_us = time_or_nan(w->median_us);
		wl->ref_us = time_or_nan(w->ref_median_us);
		wl->floor_us = time_or_nan(w->floor_us);
		wl->dispatch_us = NAN;
		if ((b = json_object_get(bests, w->id))) {
			wl->dispatch_us = number_or_nan(json_object_get(b, "median_us"));
			wl->dispatch_id = (uint64_t)json_integer_value(json_object_get(b, "id"));
		}
		r->n_workloads++;
	}
	json_decref(bests);
	return 0;
}

/* The names compare-torch.py writes, as the page says them. */
static void anchor_name(const char *key, size_t key_len, char *buf, size_t size)
{
	static const struct {
		const char *key, *name;
	} known[] = {
		{ "torch_paged", "PyTorch, paged (the op's reference)" },
		{ "sdpa_cudnn", "PyTorch SDPA, cuDNN" },
		{ "sdpa_flash", "PyTorch SDPA, flash" },
		{ "candidate", "candidate, in the compare run" },
	};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strlen(known[i].key) == key_len && !strncmp(key, known[i].key, key_len)) {
			snprintf(buf, size, "%s", known[i].name);
			return;
		}
	snprintf(buf, size, "%.*s", (int)key_len, key);
}

/*
 * tools/compare-torch.py's JSON: {"gpu", "copy_gbps", "rows": [{"id",
 * "floor_us", "<name>_us": number or null ...}]}.  Every "<name>_us" but
 * the floor is an anchor of its workload.
 */
static int gather_compare(struct ks_report *r, const struct ks_report_options *opts, struct ks_error *err)
{
	const json_t *rows = json_object_get(opts->compare, "rows"), *row;
	const char *file = opts->compare_file ? opts->compare_file : "--compare";
	size_t i;

	if (!json_is_object(opts->compare) || !json_is_array(rows))
		return ks_fail(err,
			       "%s: expected tools/compare-torch.py's JSON, an object with \"rows\": [...]",
			       file);
	r->compare_file = ks_strdup(file);
	if (json_is_string(json_object_get(opts->compare, "gpu")))
		r->compare_gpu = ks_strdup(json_string_value(json_object_get(opts->compare, "gpu")));
	json_array_foreach(rows, i, row)
	{
		const char *id = json_string_value(json_object_get(row, "id")), *key;
		struct ks_report_workload *wl = NULL;
		json_t *value;

		if (!json_is_object(row) || !id)
			return ks_fail(err, "%s: rows[%zu]: expected an object with a string \"id\"", file,
				       i);
		for (size_t k = 0; k < r->n_workloads; k++)
			if (!strcmp(r->workloads[k].id, id))
				wl = &r->workloads[k];
		json_object_foreach((json_t *)row, key, value)
		{
			size_t len = strlen(key);

			if (len < 4 || strcmp(key + len - 3, "_us") || !strcmp(key, "floor_us") ||
			    json_is_null(value))
				continue;
			if (!json_is_number(value) || !isfinite(json_number_value(value)) ||
			    json_number_value(value) <= 0)
				return ks_fail(
					err,
					"%s: rows[%zu] (%s): %s: expected a time in microseconds, got %s",
					file, i, id, key, ks_json_type_word(value));
			if (!wl || wl->n_anchors == KS_REPORT_MAX_ANCHORS)
				continue;
			anchor_name(key, len - 3, wl->anchors[wl->n_anchors].name,
				    sizeof(wl->anchors[0].name));
			wl->anchors[wl->n_anchors++].us = json_number_value(value);
		}
		if (wl && isnan(wl->floor_us))
			wl->floor_us = number_or_nan(json_object_get(row, "floor_us"));
	}
	for (size_t k = 0; k < r->n_workloads; k++)
		r->compare_matched += r->workloads[k].n_anchors > 0;
	return 0;
}

static int by_reward_desc(const void *a, const void *b)
{
	const struct ks_report_strategy *x = a, *y = b;

	return x->reward < y->reward ? 1 : x->reward > y->reward ? -1 : (x->id > y->id) - (x->id < y->id);
}

static int gather_llm(struct ks_archive *ar, struct ks_report *r, struct ks_error *err)
{
	json_t *prompts = NULL, *p, *usage = NULL;
	void *data = NULL;
	size_t size = 0, i;

	if (ks_archive_prompts(ar, &prompts, err) < 0)
		return -1;
	r->strategies = ks_calloc(json_array_size(prompts) + 1, sizeof(*r->strategies));
	json_array_foreach(prompts, i, p)
	{
		struct ks_report_strategy *s = &r->strategies[r->n_strategies++];
		const json_t *stats = json_object_get(p, "stats");

		s->id = (uint64_t)json_integer_value(json_object_get(p, "id"));
		s->name = ks_strdup(json_string_value(json_object_get(p, "name")) ?: "?");
		copy_text(s->origin, sizeof(s->origin), json_string_value(json_object_get(p, "origin")));
		s->active = !json_is_false(json_object_get(p, "active"));
		s->uses = stat_u64(stats, "uses");
		s->children = stat_u64(stats, "children");
		s->ok = stat_u64(stats, "ok");
		s->improvements = stat_u64(stats, "improvements");
		s->best_fitness = json_number_value(json_object_get(stats, "best_fitness"));
		s->reward = s->uses ? (s->improvements + 0.25 * s->ok) / s->uses : 0;
	}
	json_decref(prompts);
	KS_QSORT(r->strategies, r->n_strategies, by_reward_desc);
	if (ks_archive_state_get(ar, "llm/usage", &data, &size, err) < 0)
		return -1;
	if (data)
		usage = json_loadb(data, size, 0, NULL);
	free(data);
	if (json_is_object(usage)) {
		r->has_llm_usage = 1;
		r->llm_requests = stat_u64(usage, "requests");
		r->llm_failed = stat_u64(usage, "failed");
		r->prompt_tokens = stat_u64(usage, "prompt_tokens");
		r->completion_tokens = stat_u64(usage, "completion_tokens");
		r->cost_usd = json_number_value(json_object_get(usage, "cost_usd"));
	}
	json_decref(usage);
	return 0;
}

static int gather(struct ks_archive *ar, const struct ks_report_options *opts, struct ks_report *r,
		  struct ks_error *err)
{
	const struct ks_grid_axis *axes;
	struct ks_record best;
	time_t now = time(NULL);
	int ret = -1;

	ks_record_init(&best);
	r->op = ks_strdup(ks_archive_op(ar));
	r->gpu = ks_strdup(ks_archive_gpu(ar));
	r->path = ks_strdup(ks_archive_path(ar));
	strftime(r->generated, sizeof(r->generated), "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
	r->first_time = -1;
	axes = ks_archive_grid(ar, &r->n_axes);
	r->axes = ks_calloc(r->n_axes ? r->n_axes : 1, sizeof(*r->axes));
	for (size_t i = 0; i < r->n_axes; i++) {
		r->axes[i].descriptor = axes[i].descriptor;
		r->axes[i].n_edges = axes[i].n_edges;
		r->axes[i].edges = ks_malloc(axes[i].n_edges * sizeof(double));
		memcpy(r->axes[i].edges, axes[i].edges, axes[i].n_edges * sizeof(double));
	}
	if (ks_archive_metrics(ar, &r->metrics, err) < 0 || gather_elites(ar, r, err) < 0 ||
	    gather_history(ar, r, err) < 0 ||
	    ks_archive_verdict_spans(ar, KS_REPORT_SPANS, &r->spans, &r->n_spans, err) < 0 ||
	    gather_sample(ar, r, err) < 0 || gather_top(ar, r, err) < 0 || gather_llm(ar, r, err) < 0)
		goto cleanup;
	if (r->metrics.best_id) {
		if (ks_archive_get_record(ar, r->metrics.best_id, &best, NULL, err) < 0)
			goto cleanup;
		if (best.id &&
		    (gather_lineage(ar, r, &best, err) < 0 || gather_workloads(ar, r, &best, err) < 0))
			goto cleanup;
	}
	if (opts && opts->compare && gather_compare(r, opts, err) < 0)
		goto cleanup;
	ret = 0;
cleanup:
	ks_record_release(&best);
	return ret;
}

int ks_report_gather(struct ks_archive *ar, const struct ks_report_options *opts, struct ks_report **out,
		     struct ks_error *err)
{
	struct ks_report *r = ks_calloc(1, sizeof(*r));
	int ret;

	*out = NULL;
	if (ks_archive_pin(ar, err) < 0) {
		ks_report_free(r);
		return -1;
	}
	ret = gather(ar, opts, r, err);
	ks_archive_unpin(ar);
	if (ret < 0) {
		ks_report_free(r);
		return -1;
	}
	*out = r;
	return 0;
}

void ks_report_free(struct ks_report *r)
{
	if (!r)
		return;
	free(r->op);
	free(r->gpu);
	free(r->path);
	ks_grid_axes_free(r->axes, r->n_axes);
	for (size_t i = 0; i < r->n_elites; i++)
		candidate_release(&r->elites[i].c);
	free(r->elites);
	free(r->history);
	free(r->spans);
	candidates_free(r->sample, r->n_sample);
	candidates_free(r->top, r->n_top);
	candidates_free(r->lineage, r->n_lineage);
	free(r->workloads);
	free(r->mutations);
	for (size_t i = 0; i < r->n_strategies; i++)
		free(r->strategies[i].name);
	free(r->strategies);
	free(r->compare_file);
	free(r->compare_gpu);
	free(r);
}
