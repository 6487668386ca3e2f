/*
 * archive_verify.c - `ksearch archive verify`: recount everything the
 * archive keeps incrementally (counters, indexes, grid, metrics) from the
 * records themselves, check that every prompt parses and carries its own
 * id, in one snapshot, and list every disagreement in words.  It reads
 * the whole archive, unlike every other reader.
 */
#include "archive_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/archive/record.h"
#include "ksearch/base/util.h"

/* Past this many problems the rest are only counted. */
#define MAX_PROBLEMS 100

struct problems {
	char **list;
	size_t n, alloc;
	size_t more;
};

static void problem(struct problems *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void problem(struct problems *p, const char *fmt, ...)
{
	va_list ap;

	if (p->n >= MAX_PROBLEMS) {
		p->more++;
		return;
	}
	KS_ALLOC_GROW(p->list, p->n + 1, p->alloc);
	va_start(ap, fmt);
	p->list[p->n++] = ks_vasprintf(fmt, ap);
	va_end(ap);
}

/* A placed ok record: the grid must hold the best of each cell. */
struct placed {
	uint64_t cell;
	double fitness;
	uint64_t id;
};

static int cmp_placed(const void *a, const void *b)
{
	const struct placed *x = a, *y = b;

	if (x->cell != y->cell)
		return x->cell < y->cell ? -1 : 1;
	if (x->fitness != y->fitness)
		return x->fitness > y->fitness ? -1 : 1; /* best first */
	return x->id < y->id ? -1 : x->id > y->id;	 /* then the first found */
}

struct recount {
	struct ks_counters c; /* what the records say */
	uint64_t max_id;
	struct placed *placed;
	size_t n_placed, alloc_placed;
	double qd_score;
	json_t *workload_best; /* recomputed: {"<workload>": {"id", "median_us"}} */
};

static int same_double(double a, double b)
{
	return fabs(a - b) <= 1e-9 * fmax(1.0, fmax(fabs(a), fabs(b)));
}

static int has_key(MDB_txn *txn, MDB_dbi dbi, const void *k, size_t klen)
{
	MDB_val key = { klen, (void *)k }, val;

	return mdb_get(txn, dbi, &key, &val) == 0;
}

static void check_record(struct ks_archive *ar, MDB_txn *txn, uint64_t id, const MDB_val *val,
			 struct recount *r, struct problems *p)
{
	unsigned char hash[KS_SHA256_LEN], fkey[17], vkey[9], dedup[KS_SHA256_LEN];
	struct ks_error err;
	const char *hex;
	enum ks_verdict verdict;
	json_t *record;
	double fitness;
	uint64_t cell;
	char why[256];

	if (ks_archive_parse_record(id, val, &record, &err) < 0) {
		problem(p, "%s", err.msg);
		return;
	}
	if (json_integer_value(json_object_get(record, "id")) != (json_int_t)id)
		problem(p, "record #%llu: its \"id\" field says %lld", (unsigned long long)id,
			(long long)json_integer_value(json_object_get(record, "id")));
	if (ks_archive_check_record(record, &err) < 0) {
		problem(p, "record #%llu: %s", (unsigned long long)id, err.msg);
		json_decref(record);
		return;
	}
	ks_record_verdict(record, &verdict);
	fitness = ks_archive_record_fitness(record, verdict);
	r->c.candidates++;
	r->c.by_verdict[verdict]++;
	if (id > r->max_id)
		r->max_id = id;
	hex = json_string_value(json_object_get(record, "source_hash"));
	if (ks_unhex_sha256(hex, hash) < 0)
		problem(p, "record #%llu: source_hash is not a SHA-256", (unsigned long long)id);
	else if (!has_key(txn, ar->sources, hash, sizeof(hash)))
		problem(p, "record #%llu: its source %s is not in the sources database",
			(unsigned long long)id, hex);
	else {
		ks_archive_dedup_key(hex, json_object_get(record, "params"), dedup);
		if (!has_key(txn, ar->dedup, dedup, sizeof(dedup)))
			problem(p, "record #%llu: missing from the dedup index", (unsigned long long)id);
	}
	fkey[0] = vkey[0] = (unsigned char)verdict;
	ks_be64_put(fkey + 1, ks_archive_fitness_key(fitness));
	ks_be64_put(fkey + 9, id);
	ks_be64_put(vkey + 1, id);
	if (!has_key(txn, ar->by_fitness, fkey, sizeof(fkey)))
		problem(p, "record #%llu: missing from the fitness index", (unsigned long long)id);
	if (!has_key(txn, ar->by_verdict, vkey, sizeof(vkey)))
		problem(p, "record #%llu: missing from the verdict index", (unsigned long long)id);
	/* a record whose sanitizer check failed is no elite, no best (ks_archive_set_sanitizer()) */
	if (verdict == KS_VERDICT_OK && !ks_record_sanitizer_failed(record)) {
		const json_t *w;
		size_t k;

		if (!r->c.best_id || fitness > r->c.best_fitness) {
			r->c.best_id = id;
			r->c.best_fitness = fitness;
		}
		/* records are read in id order, as they were inserted: the first of equal times stays */
		json_array_foreach(json_object_get(record, "workloads"), k, w)
		{
			const char *wid = json_string_value(json_object_get(w, "id"));
			double median = ks_record_ranked_us(record, w);
			const json_t *cur;

			if (!(median > 0))
				continue;
			cur = json_object_get(r->workload_best, wid);
			if (!cur || median < json_number_value(json_object_get(cur, "median_us")))
				json_object_set_new(
					r->workload_best, wid,
					json_pack("{s:I, s:f}", "id", (json_int_t)id, "median_us", median));
		}
		if (!ks_archive_cell_of(ar, json_object_get(record, "descriptors"), &cell, why,
					sizeof(why))) {
			KS_ALLOC_GROW(r->placed, r->n_placed + 1, r->alloc_placed);
			r->placed[r->n_placed++] = (struct placed){ cell, fitness, id };
		}
	}
	json_decref(record);
}

static int scan(struct ks_archive *ar, MDB_txn *txn, MDB_dbi dbi, MDB_cursor **cur, MDB_val *key,
		MDB_val *val, int first, struct ks_error *err)
{
	int rc;

	if (first) {
		rc = mdb_cursor_open(txn, dbi, cur);
		if (rc)
			return ks_archive_lmdb_fail(err, rc, ar->path);
	}
	rc = mdb_cursor_get(*cur, key, val, first ? MDB_FIRST : MDB_NEXT);
	if (rc == MDB_NOTFOUND)
		return 1;
	if (rc)
		return ks_archive_lmdb_fail(err, rc, ar->path);
	return 0;
}

static int check_records(struct ks_archive *ar, MDB_txn *txn, struct recount *r, struct problems *p,
			 struct ks_error *err)
{
	MDB_cursor *cur = NULL;
	MDB_val key, val;
	int rc;

	for (rc = scan(ar, txn, ar->candidates, &cur, &key, &val, 1, err); !rc;
	     rc = scan(ar, txn, ar->candidates, &cur, &key, &val, 0, err)) {
		if (key.mv_size != 8) {
			problem(p, "a record key is %zu bytes long (expected 8)", key.mv_size);
			continue;
		}
		check_record(ar, txn, ks_be64_get(key.mv_data), &val, r, p);
	}
	if (cur)
		mdb_cursor_close(cur);
	return rc < 0 ? -1 : 0;
}

/* The source stream holds exactly the sources' bytes, in full chunks but the last. */
static int check_stream(struct ks_archive *ar, MDB_txn *txn, uint64_t bytes, struct problems *p,
			struct ks_error *err)
{
	uint64_t chunks = (bytes + ar->chunk_bytes - 1) / ar->chunk_bytes;
	MDB_cursor *cur;
	MDB_val key, val;
	MDB_stat st;
	int rc;

	rc = mdb_stat(txn, ar->source_text, &st);
	if (rc)
		return ks_archive_lmdb_fail(err, rc, ar->path);
	if (st.ms_entries != chunks)
		problem(p, "the source stream has %llu chunks for %llu bytes of sources (expected %llu)",
			(unsigned long long)st.ms_entries, (unsigned long long)bytes,
			(unsigned long long)chunks);
	rc = mdb_cursor_open(txn, ar->source_text, &cur);
	if (rc)
		return ks_archive_lmdb_fail(err, rc, ar->path);
	if (mdb_cursor_get(cur, &key, &val, MDB_LAST) == 0 && chunks &&
	    (key.mv_size != 8 || ks_be64_get(key.mv_data) != chunks - 1 ||
	     val.mv_size != bytes - (chunks - 1) * ar->chunk_bytes))
		problem(p, "the source stream's last chunk does not end where the sources do");
	mdb_cursor_close(cur);
	return 0;
}

static int check_sources(struct ks_archive *ar, MDB_txn *txn, struct recount *r, struct problems *p,
			 struct ks_error *err)
{
	MDB_cursor *cur = NULL;
	MDB_val key, val;
	int rc;

	for (rc = scan(ar, txn, ar->sources, &cur, &key, &val, 1, err); !rc;
	     rc = scan(ar, txn, ar->sources, &cur, &key, &val, 0, err)) {
		unsigned char got[KS_SHA256_LEN];
		char hex[KS_SHA256_HEX_LEN + 1];
		struct ks_error read_err;
		char *text;
		size_t len;

		if (key.mv_size != KS_SHA256_LEN) {
			problem(p, "a source key is %zu bytes long (expected 32)", key.mv_size);
			continue;
		}
		ks_hex(key.mv_data, KS_SHA256_LEN, hex);
		r->c.sources++;
		if (ks_archive_source_read(ar, txn, &val, &text, &len, &read_err) < 0) {
			problem(p, "source %s: %s", hex, read_err.msg);
			continue;
		}
		r->c.source_bytes += len;
		ks_sha256(text, len, got);
		free(text);
		if (memcmp(got, key.mv_data, KS_SHA256_LEN))
			problem(p, "source %s: the text does not hash to its key (damaged)", hex);
	}
	if (cur)
		mdb_cursor_close(cur);
	if (rc < 0)
		return -1;
	return check_stream(ar, txn, r->c.source_bytes, p, err);
}

/* The grid must hold, for each cell, the best placed record, and nothing else. */
static int check_grid(struct ks_archive *ar, MDB_txn *txn, struct recount *r, struct problems *p,
		      struct ks_error *err)
{
	MDB_cursor *cur = NULL;
	MDB_val key, val;
	size_t next = 0;
	int rc;

	KS_QSORT(r->placed, r->n_placed, cmp_placed);
	for (rc = scan(ar, txn, ar->grid, &cur, &key, &val, 1, err); !rc;
	     rc = scan(ar, txn, ar->grid, &cur, &key, &val, 0, err)) {
		uint64_t cell, id;
		double fitness;
		uint64_t bits;

		if (key.mv_size != 8 || val.mv_size != 16) {
			problem(p, "a grid entry has the wrong size");
			continue;
		}
		cell = ks_be64_get(key.mv_data);
		id = ks_be64_get(val.mv_data);
		bits = ks_be64_get((unsigned char *)val.mv_data + 8);
		memcpy(&fitness, &bits, sizeof(fitness));
		/* cells the records fill but the grid lacks */
		while (next < r->n_placed && r->placed[next].cell < cell) {
			if (!next || r->placed[next - 1].cell != r->placed[next].cell)
				problem(p, "cell %llu: empty in the grid, but record #%llu belongs there",
					(unsigned long long)r->placed[next].cell,
					(unsigned long long)r->placed[next].id);
			next++;
		}
		if (next >= r->n_placed || r->placed[next].cell != cell) {
			problem(p, "cell %llu: its elite #%llu is not an ok record of that cell",
				(unsigned long long)cell, (unsigned long long)id);
			continue;
		}
		r->c.cells_filled++;
		r->qd_score += fitness - ar->qd_offset;
		if (r->placed[next].id != id || r->placed[next].fitness != fitness)
			problem(p,
				"cell %llu: the elite is #%llu (fitness %g), but the best record there is "
				"#%llu (fitness %g)",
				(unsigned long long)cell, (unsigned long long)id, fitness,
				(unsigned long long)r->placed[next].id, r->placed[next].fitness);
		while (next < r->n_placed && r->placed[next].cell == cell)
			next++;
	}
	for (; next < r->n_placed; next++)
		if (!next || r->placed[next - 1].cell != r->placed[next].cell)
			problem(p, "cell %llu: empty in the grid, but record #%llu belongs there",
				(unsigned long long)r->placed[next].cell,
				(unsigned long long)r->placed[next].id);
	if (cur)
		mdb_cursor_close(cur);
	return rc < 0 ? -1 : 0;
}

/* Each prompt is a JSON object whose "id" is its key. */
static int check_prompts(struct ks_archive *ar, MDB_txn *txn, struct problems *p, struct ks_error *err)
{
	MDB_cursor *cur = NULL;
	MDB_val key, val;
	int rc;

	for (rc = scan(ar, txn, ar->prompts, &cur, &key, &val, 1, err); !rc;
	     rc = scan(ar, txn, ar->prompts, &cur, &key, &val, 0, err)) {
		struct ks_error parse_err;
		json_t *prompt, *id;
		uint64_t key_id;

		if (key.mv_size != 8) {
			problem(p, "a prompt key is %zu bytes long (expected 8)", key.mv_size);
			continue;
		}
		key_id = ks_be64_get(key.mv_data);
		if (ks_archive_parse_prompt(key_id, &val, &prompt, &parse_err) < 0) {
			problem(p, "%s", parse_err.msg);
			continue;
		}
		id = json_object_get(prompt, "id");
		if (!json_is_integer(id))
			problem(p, "prompt %llu: no integer \"id\" field", (unsigned long long)key_id);
		else if (json_integer_value(id) != (json_int_t)key_id)
			problem(p, "prompt %llu: its \"id\" field says %lld", (unsigned long long)key_id,
				(long long)json_integer_value(id));
		json_decref(prompt);
	}
	if (cur)
		mdb_cursor_close(cur);
	return rc < 0 ? -1 : 0;
}

static void check_count(struct problems *p, const char *what, uint64_t stored, uint64_t counted)
{
	if (stored != counted)
		problem(p, "counters: %s is %llu, but the archive holds %llu", what,
			(unsigned long long)stored, (unsigned long long)counted);
}

static void check_counters(struct ks_archive *ar, MDB_txn *txn, const struct ks_counters *c,
			   const struct recount *r, struct problems *p)
{
	MDB_stat st;

	check_count(p, "candidates", c->candidates, r->c.candidates);
	for (int v = 0; v < KS_VERDICT_COUNT; v++) {
		char what[64];

		snprintf(what, sizeof(what), "the %s count", ks_verdict_name((enum ks_verdict)v));
		check_count(p, what, c->by_verdict[v], r->c.by_verdict[v]);
	}
	if (c->next_id <= r->max_id)
		problem(p, "counters: next_id is %llu, but record #%llu exists",
			(unsigned long long)c->next_id, (unsigned long long)r->max_id);
	check_count(p, "sources", c->sources, r->c.sources);
	check_count(p, "source_bytes", c->source_bytes, r->c.source_bytes);
	check_count(p, "cells_filled", c->cells_filled, r->c.cells_filled);
	if (!same_double(c->qd_score, r->qd_score))
		problem(p, "counters: the QD-score is %.17g, but the elites sum to %.17g", c->qd_score,
			r->qd_score);
	if (c->best_id != r->c.best_id || c->best_fitness != r->c.best_fitness)
		problem(p, "counters: the best is #%llu (fitness %g), but the records say #%llu (fitness %g)",
			(unsigned long long)c->best_id, c->best_fitness, (unsigned long long)r->c.best_id,
			r->c.best_fitness);
	if (!mdb_stat(txn, ar->by_verdict, &st))
		check_count(p, "the verdict index's size", st.ms_entries, r->c.candidates);
	if (!mdb_stat(txn, ar->by_fitness, &st))
		check_count(p, "the fitness index's size", st.ms_entries, r->c.candidates);
	if (!mdb_stat(txn, ar->dedup, &st) && st.ms_entries > r->c.candidates)
		problem(p, "the dedup index has %llu entries for %llu records",
			(unsigned long long)st.ms_entries, (unsigned long long)r->c.candidates);
}

/* The last history point must describe the current metrics. */
static void check_history(struct ks_archive *ar, MDB_txn *txn, const struct ks_counters *c,
			  struct problems *p)
{
	MDB_cursor *cur;
	MDB_val key, val;
	json_t *point;

	if (mdb_cursor_open(txn, ar->history, &cur))
		return;
	if (mdb_cursor_get(cur, &key, &val, MDB_LAST) == 0) {
		point = json_loadb(val.mv_data, val.mv_size, 0, NULL);
		if (!json_is_object(point))
			problem(p, "history: the last point is not valid JSON");
		else if ((uint64_t)json_integer_value(json_object_get(point, "cells_filled")) !=
				 c->cells_filled ||
			 json_number_value(json_object_get(point, "best")) != c->best_fitness ||
			 !same_double(json_number_value(json_object_get(point, "qd_score")), c->qd_score))
			problem(p, "history: the last point does not match the counters");
		else if ((uint64_t)json_integer_value(json_object_get(point, "evals")) > c->candidates)
			problem(p, "history: the last point counts more evaluations than the archive holds");
		json_decref(point);
	} else if (c->cells_filled || c->best_id) {
		problem(p, "history: empty, but the grid is not");
	}
	mdb_cursor_close(cur);
}

/* The stored per-workload bests must be what the records say. */
static void check_workload_best(struct ks_archive *ar, MDB_txn *txn, const struct recount *r,
				struct problems *p)
{
	MDB_val val;
	json_t *stored = NULL;
	const char *wid;
	const json_t *want;
	struct ks_error err;
	int rc = ks_archive_db_get(txn, ar->meta, KS_META_WORKLOAD_BEST, strlen(KS_META_WORKLOAD_BEST), &val,
				   "reading the per-workload bests", &err);

	if (rc < 0) {
		problem(p, "%s", err.msg);
		return;
	}
	stored = rc == 0 ? json_loadb(val.mv_data, val.mv_size, 0, NULL) : json_object();
	if (!json_is_object(stored)) {
		problem(p, "meta: the per-workload bests are not valid JSON");
		json_decref(stored);
		return;
	}
	json_object_foreach((json_t *)r->workload_best, wid, want)
	{
		const json_t *got = json_object_get(stored, wid);

		if (json_integer_value(json_object_get(got, "id")) !=
		    json_integer_value(json_object_get(want, "id")))
			problem(p, "meta: the best of workload %s is #%lld, but the records say #%lld", wid,
				(long long)json_integer_value(json_object_get(got, "id")),
				(long long)json_integer_value(json_object_get(want, "id")));
	}
	if (json_object_size(stored) != json_object_size(r->workload_best))
		problem(p, "meta: %zu per-workload bests stored, the records give %zu",
			json_object_size(stored), json_object_size(r->workload_best));
	json_decref(stored);
}

int ks_archive_verify(struct ks_archive *ar, char ***problems, size_t *n_problems, struct ks_error *err)
{

	struct problems p = { 0 };
	struct recount r = { .workload_best = json_object() };
	struct ks_counters c;
	MDB_txn *txn;
	int ret = -1;

	*problems = NULL;
	*n_problems = 0;
	if (ks_archive_txn_begin(ar, 1, &txn, err) < 0)
		return -1;
	if (ks_counters_load(ar, txn, &c, err) < 0 || check_records(ar, txn, &r, &p, err) < 0 ||
	    check_sources(ar, txn, &r, &p, err) < 0 || check_grid(ar, txn, &r, &p, err) < 0 ||
	    check_prompts(ar, txn, &p, err) < 0)
		goto cleanup;
	check_counters(ar, txn, &c, &r, &p);
	check_history(ar, txn, &c, &p);
	check_workload_best(ar, txn, &r, &p);
	if (p.more) {
		KS_ALLOC_GROW(p.list, p.n + 1, p.alloc);
		p.list[p.n++] = ks_asprintf("... and %zu more problems", p.more);
	}
	*problems = p.list;
	*n_problems = p.n;
	p.list = NULL;
	p.n = 0;
	ret = 0;
cleanup:
	ks_archive_txn_end(ar, txn);
	ks_archive_problems_free(p.list, p.n);
	free(r.placed);
	json_decref(r.workload_best);
	return ret;
}

void ks_archive_problems_free(char **problems, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(problems[i]);
	free(problems);
}
