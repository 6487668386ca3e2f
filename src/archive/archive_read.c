/*
 * archive_read.c - the archive's readers: records by id, the best, the
 * dedup lookup, the ordered walks `ksearch archive ls` makes over the
 * indexes (touching only the records it shows), the elites, the metrics
 * and their history.  Each call reads from one snapshot (a read-only
 * transaction), so it never blocks the writer.
 */
#include "archive_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/archive/record.h"
#include "ksearch/base/json.h"
#include "ksearch/base/util.h"

static double bits_double(uint64_t bits)
{
	double d;

	memcpy(&d, &bits, sizeof(d));
	return d;
}

static uint64_t json_u64(const json_t *obj, const char *name)
{
	json_int_t v = json_integer_value(json_object_get(obj, name));

	return v > 0 ? (uint64_t)v : 0;
}

static json_t *parse_value(const MDB_val *val)
{
	return json_loadb(val->mv_data, val->mv_size, JSON_DECODE_ANY, NULL);
}

int ks_archive_lookup_candidate(struct ks_archive *ar, const char *source, const json_t *params, uint64_t *id,
				struct ks_error *err)
{
	unsigned char hash[KS_SHA256_LEN], key[KS_SHA256_LEN];
	char hex[KS_SHA256_HEX_LEN + 1];
	MDB_txn *txn;
	MDB_val val;
	int rc;

	*id = 0;
	ks_sha256(source, strlen(source), hash);
	ks_hex(hash, sizeof(hash), hex);
	ks_archive_dedup_key(hex, params, key);
	if (ks_archive_txn_begin(ar, 1, &txn, err) < 0)
		return -1;
	rc = ks_archive_db_get(txn, ar->dedup, key, sizeof(key), &val, "reading the dedup index", err);
	if (rc == 0 && val.mv_size == 8)
		*id = ks_be64_get(val.mv_data);
	ks_archive_txn_end(ar, txn);
	return rc < 0 ? -1 : 0;
}

static int get_in_txn(struct ks_archive *ar, MDB_txn *txn, uint64_t id, json_t **record, char **source,
		      struct ks_error *err)
{
	unsigned char key[8], hash[KS_SHA256_LEN];
	const char *hex;
	MDB_val val;
	size_t len;
	int rc;

	*record = NULL;
	if (source)
		*source = NULL;
	ks_be64_put(key, id);
	rc = ks_archive_db_get(txn, ar->candidates, key, 8, &val, "reading a record", err);
	if (rc)
		return rc < 0 ? -1 : 0;
	if (ks_archive_parse_record(id, &val, record, err) < 0)
		return -1;
	if (!source)
		return 0;
	hex = json_string_value(json_object_get(*record, "source_hash"));
	rc = ks_unhex_sha256(hex, hash) < 0
		     ? 1
		     : ks_archive_db_get(txn, ar->sources, hash, sizeof(hash), &val, "reading a source", err);
	if (rc == 1)
		ks_fail(err, "record #%llu: its source (%s) is missing from the archive",
			(unsigned long long)id, hex ? hex : "no source_hash");
	if (rc || ks_archive_source_read(ar, txn, &val, source, &len, err) < 0) {
		json_decref(*record);
		*record = NULL;
		return -1;
	}
	return 0;
}

int ks_archive_get(struct ks_archive *ar, uint64_t id, json_t **record, char **source, struct ks_error *err)
{
	MDB_txn *txn;
	int ret;

	*record = NULL;
	if (source)
		*source = NULL;
	if (ks_archive_txn_begin(ar, 1, &txn, err) < 0)
		return -1;
	ret = get_in_txn(ar, txn, id, record, source, err);
	ks_archive_txn_end(ar, txn);
	return ret;
}

int ks_archive_best(struct ks_archive *ar, json_t **record, char **source, struct ks_error *err)
{
	struct ks_counters c;
	MDB_txn *txn;
	int ret = 0;

	*record = NULL;
	if (source)
		*source = NULL;
	if (ks_archive_txn_begin(ar, 1, &txn, err) < 0)
		return -1;
	if (ks_counters_load(ar, txn, &c, err) < 0)
		ret = -1;
	else if (c.best_id)
		ret = get_in_txn(ar, txn, c.best_id, record, source, err);
	ks_archive_txn_end(ar, txn);
	return ret;
}

/* foreach: walk an index and hand the records it names to fn */

struct walk {
	struct ks_archive *ar;
	MDB_txn *txn;
	int (*fn)(const json_t *record, void *ctx);
	void *ctx;
	uint64_t limit;
	uint64_t seen;
	int stop;
};

/* Hand record id (value val if the caller has it) to fn. */
static int walk_emit(struct walk *w, uint64_t id, const MDB_val *have, struct ks_error *err)
{
	unsigned char key[8];
	MDB_val val;
	json_t *record;
	int rc;

	if (have) {
		val = *have;
	} else {
		ks_be64_put(key, id);
		rc = ks_archive_db_get(w->txn, w->ar->candidates, key, 8, &val, "reading a record", err);
		if (rc < 0)
			return -1;
		if (rc == 1)
			return ks_fail(err,
				       "an index names record #%llu, which is missing: the archive is "
				       "damaged (see `ksearch archive verify`)",
				       (unsigned long long)id);
	}
	if (ks_archive_parse_record(id, &val, &record, err) < 0)
		return -1;
	w->stop = w->fn(record, w->ctx) != 0;
	json_decref(record);
	w->seen++;
	if (w->limit && w->seen >= w->limit)
		w->stop = 1;
	return 0;
}

static int cursor_open(struct walk *w, MDB_dbi dbi, MDB_cursor **cur, struct ks_error *err)
{
	int rc = mdb_cursor_open(w->txn, dbi, cur);

	return rc ? ks_archive_lmdb_fail(err, rc, "opening a cursor") : 0;
}

/* Every record by id, oldest or newest first. */
static int walk_all_by_id(struct walk *w, int newest_first, struct ks_error *err)
{
	MDB_cursor *cur;
	MDB_val key, val;
	int rc, ret = 0;

	if (cursor_open(w, w->ar->candidates, &cur, err) < 0)
		return -1;
	for (rc = mdb_cursor_get(cur, &key, &val, newest_first ? MDB_LAST : MDB_FIRST); !rc && !w->stop;
	     rc = mdb_cursor_get(cur, &key, &val, newest_first ? MDB_PREV : MDB_NEXT)) {
		if (key.mv_size != 8 || walk_emit(w, ks_be64_get(key.mv_data), &val, err) < 0) {
			if (key.mv_size != 8)
				ks_fail(err, "%s: a record key is damaged", w->ar->path);
			ret = -1;
			break;
		}
	}
	if (!ret && rc && rc != MDB_NOTFOUND)
		ret = ks_archive_lmdb_fail(err, rc, "reading the records");
	mdb_cursor_close(cur);
	return ret;
}

/* The records of one verdict by id, from the verdict index. */
static int walk_verdict_by_id(struct walk *w, int verdict, int newest_first, struct ks_error *err)
{
	unsigned char start[9];
	MDB_cursor *cur;
	MDB_val key, val;
	int rc, ret = 0;

	if (cursor_open(w, w->ar->by_verdict, &cur, err) < 0)
		return -1;
	if (newest_first) {
		/* position after the verdict's last key, then step back */
		start[0] = (unsigned char)(verdict + 1);
		memset(start + 1, 0, 8);
		key.mv_size = sizeof(start);
		key.mv_data = start;
		rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
		rc = mdb_cursor_get(cur, &key, &val, rc == MDB_NOTFOUND ? MDB_LAST : MDB_PREV);
	} else {
		start[0] = (unsigned char)verdict;
		memset(start + 1, 0, 8);
		key.mv_size = sizeof(start);
		key.mv_data = start;
		rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
	}
	for (; !rc && !w->stop; rc = mdb_cursor_get(cur, &key, &val, newest_first ? MDB_PREV : MDB_NEXT)) {
		const unsigned char *k = key.mv_data;

		if (key.mv_size != 9 || k[0] != verdict)
			break;
		if (walk_emit(w, ks_be64_get(k + 1), NULL, err) < 0) {
			ret = -1;
			break;
		}
	}
	if (!ret && rc && rc != MDB_NOTFOUND)
		ret = ks_archive_lmdb_fail(err, rc, "reading the verdict index");
	mdb_cursor_close(cur);
	return ret;
}

/*
 * By fitness: the index is grouped by verdict, so for every verdict a
 * cursor sits on its best entry and the walk merges them (a k-way merge
 * of at most KS_VERDICT_COUNT heads).
 */
static int walk_by_fitness(struct walk *w, int verdict, struct ks_error *err)
{
	MDB_cursor *cur[KS_VERDICT_COUNT] = { 0 };
	MDB_val key[KS_VERDICT_COUNT], val;
	int live[KS_VERDICT_COUNT] = { 0 };
	int ret = 0;

	for (int v = 0; v < KS_VERDICT_COUNT; v++) {
		unsigned char start[17] = { (unsigned char)v };
		int rc;

		if (verdict >= 0 && v != verdict)
			continue;
		if (cursor_open(w, w->ar->by_fitness, &cur[v], err) < 0) {
			ret = -1;
			goto cleanup;
		}
		key[v].mv_size = sizeof(start);
		key[v].mv_data = start;
		rc = mdb_cursor_get(cur[v], &key[v], &val, MDB_SET_RANGE);
		live[v] = !rc && key[v].mv_size == 17 && ((unsigned char *)key[v].mv_data)[0] == v;
	}
	while (!w->stop) {
		int pick = -1;

		for (int v = 0; v < KS_VERDICT_COUNT; v++)
			if (live[v] && (pick < 0 || memcmp((char *)key[v].mv_data + 1,
							   (char *)key[pick].mv_data + 1, 16) < 0))
				pick = v;
		if (pick < 0)
			break;
		if (walk_emit(w, ks_be64_get((unsigned char *)key[pick].mv_data + 9), NULL, err) < 0) {
			ret = -1;
			break;
		}
		live[pick] = !mdb_cursor_get(cur[pick], &key[pick], &val, MDB_NEXT) &&
			     key[pick].mv_size == 17 && ((unsigned char *)key[pick].mv_data)[0] == pick;
	}
cleanup:
	for (int v = 0; v < KS_VERDICT_COUNT; v++)
		if (cur[v])
			mdb_cursor_close(cur[v]);
	return ret;
}

int ks_archive_foreach(struct ks_archive *ar, const struct ks_archive_query *query,
		       int (*fn)(const json_t *record, void *ctx), void *ctx, struct ks_error *err)
{
	struct walk w = { ar, NULL, fn, ctx, query->limit, 0, 0 };
	int ret;

	if (query->verdict >= KS_VERDICT_COUNT)
		return ks_fail(err, "unknown verdict %d", query->verdict);
	if (ks_archive_txn_begin(ar, 1, &w.txn, err) < 0)
		return -1;
	switch (query->sort) {
	case KS_ARCHIVE_SORT_FITNESS:
		ret = walk_by_fitness(&w, query->verdict, err);
		break;
	case KS_ARCHIVE_SORT_TIME:
	case KS_ARCHIVE_SORT_ID:
	default:
		if (query->verdict < 0)
			ret = walk_all_by_id(&w, query->sort == KS_ARCHIVE_SORT_TIME, err);
		else
			ret = walk_verdict_by_id(&w, query->verdict, query->sort == KS_ARCHIVE_SORT_TIME,
						 err);
		break;
	}
	ks_archive_txn_end(ar, w.txn);
	return ret;
}

/* The same, typed (record.h) */

/* The record's JSON into rec, the parse failure naming the record. */
static int parse_into(json_t *record, struct ks_record *rec, struct ks_error *err)
{
	int ret = 0;

	if (record)
		ret = ks_record_parse(record, rec, err);
	json_decref(record);
	return ret;
}

int ks_archive_get_record(struct ks_archive *ar, uint64_t id, struct ks_record *rec, char **source,
			  struct ks_error *err)
{
	json_t *record;

	ks_record_release(rec);
	if (ks_archive_get(ar, id, &record, source, err) < 0)
		return -1;
	if (parse_into(record, rec, err) < 0)
		goto fail;
	return 0;
fail:
	if (source) {
		free(*source);
		*source = NULL;
	}
	return -1;
}

int ks_archive_best_record(struct ks_archive *ar, struct ks_record *rec, char **source, struct ks_error *err)
{
	json_t *record;

	ks_record_release(rec);
	if (ks_archive_best(ar, &record, source, err) < 0)
		return -1;
	if (parse_into(record, rec, err) < 0)
		goto fail;
	return 0;
fail:
	if (source) {
		free(*source);
		*source = NULL;
	}
	return -1;
}

struct typed_walk {
	int (*fn)(const struct ks_record *rec, void *ctx, struct ks_error *err);
	void *ctx;
	struct ks_record rec;
	struct ks_error *err;
	int failed;
};

static int typed_visit(const json_t *record, void *ctx)
{
	struct typed_walk *t = ctx;
	int ret;

	if (ks_record_parse(record, &t->rec, t->err) < 0) {
		t->failed = 1;
		return 1;
	}
	ret = t->fn(&t->rec, t->ctx, t->err);
	t->failed = ret < 0;
	return ret;
}

int ks_archive_foreach_record(struct ks_archive *ar, const struct ks_archive_query *query,
			      int (*fn)(const struct ks_record *rec, void *ctx, struct ks_error *err),
			      void *ctx, struct ks_error *err)
{
	struct typed_walk t = { fn, ctx, { 0 }, err, 0 };
	int ret;

	ks_record_init(&t.rec);
	ret = ks_archive_foreach(ar, query, typed_visit, &t, err);
	ks_record_release(&t.rec);
	return ret < 0 || t.failed ? -1 : 0;
}

/* The grid and the metrics */

int ks_archive_elites(struct ks_archive *ar, struct ks_archive_elite **elites, size_t *n,
		      struct ks_error *err)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val key, val;
	size_t alloc = 0;
	int rc, ret = 0;

	*elites = NULL;
	*n = 0;
	if (ks_archive_txn_begin(ar, 1, &txn, err) < 0)
		return -1;
	rc = mdb_cursor_open(txn, ar->grid, &cur);
	if (rc) {
		ks_archive_txn_end(ar, txn);
		return ks_archive_lmdb_fail(err, rc, "reading the grid");
	}
	for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		if (key.mv_size != 8 || val.mv_size != 16) {
			ret = ks_fail(err, "%s: a grid entry is damaged", ar->path);
			break;
		}
		KS_ALLOC_GROW(*elites, *n + 1, alloc);
		(*elites)[*n].cell = ks_be64_get(key.mv_data);
		(*elites)[*n].id = ks_be64_get(val.mv_data);
		(*elites)[*n].fitness = bits_double(ks_be64_get((unsigned char *)val.mv_data + 8));
		(*n)++;
	}
	if (!ret && rc != MDB_NOTFOUND)
		ret = ks_archive_lmdb_fail(err, rc, "reading the grid");
	mdb_cursor_close(cur);
	ks_archive_txn_end(ar, txn);
	if (ret < 0) {
		free(*elites);
		*elites = NULL;
		*n = 0;
	}
	return ret;
}

int ks_archive_metrics(struct ks_archive *ar, struct ks_archive_metrics *m, struct ks_error *err)
{
	struct ks_counters c;
	MDB_txn *txn;
	int ret;

	memset(m, 0, sizeof(*m));
	if (ks_archive_txn_begin(ar, 1, &txn, err) < 0)
		return -1;
	ret = ks_counters_load(ar, txn, &c, err);
	ks_archive_txn_end(ar, txn);
	if (ret < 0)
		return -1;
	m->candidates = c.candidates;
	memcpy(m->by_verdict, c.by_verdict, sizeof(m->by_verdict));
	m->next_id = c.next_id;
	m->sources = c.sources;
	m->source_bytes = c.source_bytes;
	m->cells = ar->n_cells;
	m->cells_filled = c.cells_filled;
	m->coverage = ar->n_cells ? (double)c.cells_filled / (double)ar->n_cells : 0;
	m->qd_score = c.qd_score;
	m->qd_offset = ar->qd_offset;
	m->best_fitness = c.best_fitness;
	m->best_id = c.best_id;
	return 0;
}

int ks_archive_workload_bests(struct ks_archive *ar, json_t **bests, struct ks_error *err)
{
	MDB_txn *txn;
	MDB_val val;
	int rc;

	*bests = NULL;
	if (ks_archive_txn_begin(ar, 1, &txn, err) < 0)
		return -1;
	rc = ks_archive_db_get(txn, ar->meta, KS_META_WORKLOAD_BEST, strlen(KS_META_WORKLOAD_BEST), &val,
			       "reading the per-workload bests", err);
	if (rc == 0)
		*bests = parse_value(&val);
	ks_archive_txn_end(ar, txn);
	if (rc < 0)
		return -1;
	if (rc == 1)
		*bests = json_object();
	if (!json_is_object(*bests)) {
		json_decref(*bests);
		*bests = NULL;
		return ks_fail(err, "%s: the per-workload bests are not valid JSON: the archive is damaged",
			       ar->path);
	}
	return 0;
}

double ks_archive_dispatch_fitness(const json_t *bests)
{
	const char *wid;
	const json_t *b;
	double log_sum = 0;
	size_t n = 0;

	json_object_foreach((json_t *)bests, wid, b)
	{
		double median = json_number_value(json_object_get(b, "median_us"));
		double ref = json_number_value(json_object_get(b, "ref_median_us"));

		if (!(median > 0) || !(ref > 0))
			return 0;
		log_sum += log(ref / median);
		n++;
	}
	return n ? exp(log_sum / (double)n) : 0;
}

static int add_point(const MDB_val *val, struct ks_archive_qd_point **points, size_t *n, size_t *alloc)

{
	json_t *point = parse_value(val);
	struct ks_archive_qd_point *p;

	if (!json_is_object(point)) {
		json_decref(point);
		return -1;
	}
	KS_ALLOC_GROW(*points, *n + 1, *alloc);
	p = &(*points)[(*n)++];
	p->evals = json_u64(point, "evals");
	p->best_fitness = json_number_value(json_object_get(point, "best"));
	p->coverage = json_number_value(json_object_get(point, "coverage"));
	p->qd_score = json_number_value(json_object_get(point, "qd_score"));
	p->cells_filled = json_u64(point, "cells_filled");
	json_decref(point);
	return 0;
}

/* The point at or after each of max_points evaluation counts, from the first to the last. */
static int sample_history(MDB_cursor *cur, size_t max_points, struct ks_archive_qd_point **points, size_t *n,
			  size_t *alloc)
{
	MDB_val key, val;
	uint64_t first, last, previous = 0;
	int rc;

	if ((rc = mdb_cursor_get(cur, &key, &val, MDB_LAST)) || key.mv_size != 8)
		return rc;
	last = ks_be64_get(key.mv_data);
	if ((rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST)) || key.mv_size != 8)
		return rc;
	first = ks_be64_get(key.mv_data);
	for (size_t k = 0; k < max_points; k++) {
		unsigned char target[8];
		/* on a log scale: a search changes most early, and the table should show it */
		double lo = log((double)(first ? first : 1)), hi = log((double)(last ? last : 1));
		uint64_t at =
			k + 1 == max_points ? last : (uint64_t)exp(lo + (hi - lo) * k / (max_points - 1));

		ks_be64_put(target, at);
		key.mv_size = 8;
		key.mv_data = target;
		rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
		if (rc)
			return rc;
		at = ks_be64_get(key.mv_data);
		if (*n && at == previous)
			continue;
		previous = at;
		if (add_point(&val, points, n, alloc) < 0)
			return MDB_CORRUPTED;
	}
	return 0;
}

int ks_archive_history(struct ks_archive *ar, size_t max_points, struct ks_archive_qd_point **points,
		       size_t *n, struct ks_error *err)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val key, val;
	size_t alloc = 0;
	int rc;

	*points = NULL;
	*n = 0;
	if (ks_archive_txn_begin(ar, 1, &txn, err) < 0)
		return -1;
	rc = mdb_cursor_open(txn, ar->history, &cur);
	if (rc) {
		ks_archive_txn_end(ar, txn);
		return ks_archive_lmdb_fail(err, rc, "reading the history");
	}
	if (max_points) {
		rc = sample_history(cur, max_points < 2 ? 2 : max_points, points, n, &alloc);
	} else {
		for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); !rc;
		     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT))
			if (add_point(&val, points, n, &alloc) < 0) {
				rc = MDB_CORRUPTED;
				break;
			}
	}
	mdb_cursor_close(cur);
	ks_archive_txn_end(ar, txn);
	if (rc && rc != MDB_NOTFOUND) {
		free(*points);
		*points = NULL;
		*n = 0;
		if (rc == MDB_CORRUPTED)
			return ks_fail(err, "%s: a history point is damaged", ar->path);
		return ks_archive_lmdb_fail(err, rc, "reading the history");
	}
	return 0;
}

/* Verdicts over the ids */

int ks_archive_verdict_spans(struct ks_archive *ar, size_t n_spans, struct ks_archive_verdict_span **spans,
			     size_t *n, struct ks_error *err)
{
	struct ks_counters c;
	MDB_txn *txn;
	MDB_cursor *cur = NULL;
	MDB_val key, val;
	uint64_t last, width;
	int rc, ret = -1;

	*spans = NULL;
	*n = 0;
	if (ks_archive_txn_begin(ar, 1, &txn, err) < 0)
		return -1;
	if (ks_counters_load(ar, txn, &c, err) < 0)
		goto cleanup;
	last = c.next_id > 1 ? c.next_id - 1 : 0;
	if (!last || !n_spans) {
		ret = 0;
		goto cleanup;
	}
	width = (last + n_spans - 1) / n_spans;
	*n = (size_t)((last + width - 1) / width);
	*spans = ks_calloc(*n, sizeof(**spans));
	for (size_t i = 0; i < *n; i++) {
		(*spans)[i].first_id = 1 + i * width;
		(*spans)[i].last_id = (i + 1) * width < last ? (i + 1) * width : last;
	}
	rc = mdb_cursor_open(txn, ar->by_verdict, &cur);
	for (rc = rc ? rc : mdb_cursor_get(cur, &key, &val, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		const unsigned char *k = key.mv_data;
		uint64_t id;

		if (key.mv_size != 9 || k[0] >= KS_VERDICT_COUNT || !(id = ks_be64_get(k + 1)) || id > last) {
			ks_fail(err, "%s: a verdict index entry is damaged", ar->path);
			goto cleanup;
		}
		(*spans)[(id - 1) / width].count[k[0]]++;
	}
	if (rc != MDB_NOTFOUND) {
		ks_archive_lmdb_fail(err, rc, "reading the verdict index");
		goto cleanup;
	}
	ret = 0;
cleanup:
	if (cur)
		mdb_cursor_close(cur);
	ks_archive_txn_end(ar, txn);
	if (ret < 0) {
		free(*spans);
		*spans = NULL;
		*n = 0;
	}
	return ret;
}

/* Prompts */

int ks_archive_parse_prompt(uint64_t id, const MDB_val *val, json_t **prompt, struct ks_error *err)
{
	json_error_t jerr;

	*prompt = json_loadb(val->mv_data, val->mv_size, JSON_DECODE_ANY, &jerr);
	if (!json_is_object(*prompt)) {
		if (*prompt)
			ks_fail(err, "prompt %llu is %s, not a JSON object: the archive is damaged",
				(unsigned long long)id, ks_json_type_word(*prompt));
		else
			ks_fail(err, "prompt %llu is not valid JSON (%s): the archive is damaged",
				(unsigned long long)id, jerr.text);
		json_decref(*prompt);
		*prompt = NULL;
		return -1;
	}
	return 0;
}

int ks_archive_prompts(struct ks_archive *ar, json_t **prompts, struct ks_error *err)
{
	MDB_txn *txn;
	MDB_cursor *cur = NULL;
	MDB_val key, val;
	json_t *list = json_array();
	int rc, ret = -1;

	*prompts = NULL;
	if (ks_archive_txn_begin(ar, 1, &txn, err) < 0) {
		json_decref(list);
		return -1;
	}
	rc = mdb_cursor_open(txn, ar->prompts, &cur);
	if (rc) {
		ks_archive_lmdb_fail(err, rc, "reading the prompts");
		goto cleanup;
	}
	for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		json_t *prompt;

		if (key.mv_size != 8) {
			ks_fail(err,
				"%s: a prompt key is %zu bytes long (expected 8): the archive is "
				"damaged",
				ar->path, key.mv_size);
			goto cleanup;
		}
		if (ks_archive_parse_prompt(ks_be64_get(key.mv_data), &val, &prompt, err) < 0)
			goto cleanup;
		json_array_append_new(list, prompt);
	}
	if (rc != MDB_NOTFOUND) {
		ks_archive_lmdb_fail(err, rc, "reading the prompts");
		goto cleanup;
	}
	*prompts = list;
	list = NULL;
	ret = 0;
cleanup:
	if (cur)
		mdb_cursor_close(cur);
	ks_archive_txn_end(ar, txn);
	json_decref(list);
	return ret;
}
