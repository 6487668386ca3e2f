/*
 * archive_json.c - the portable JSON form of an archive: export (streamed
 * from one snapshot, so it works on any size while a search writes) and
 * import (the whole document checked before anything is written).  The
 * format is documented in archive/README.md.
 */
#include "archive_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/json.h"
#include "ksearch/base/util.h"

#define EXPORT_FORMAT "ksearch-archive"
/*
 * Import writes this many records per transaction: one transaction holds
 * every page it dirties in memory (LMDB caps that), so a large archive
 * cannot go in one.  The document is checked completely first, so only an
 * I/O failure can stop an import between two batches.
 */
#define IMPORT_BATCH 10000

/* Export */

static void put_string(FILE *out, const char *s)
{
	json_t *str = json_string(s);

	json_dumpf(str, out, JSON_ENCODE_ANY);
	json_decref(str);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_hash(const void *a, const void *b)
{
	return memcmp(a, b, KS_SHA256_LEN);
}

static void write_header(struct ks_archive *ar, FILE *out, unsigned flags)
{
	json_t *grid = ks_grid_to_json(ar->axes, ar->n_axes);
	char now[32];

	ks_archive_now(now, sizeof(now));
	fprintf(out, "{\n  \"format\": \"%s\",\n  \"version\": %d,\n  \"op\": ", EXPORT_FORMAT,
		KS_ARCHIVE_EXPORT_VERSION);
	put_string(out, ar->op);
	fprintf(out, ",\n  \"gpu\": ");
	put_string(out, ar->gpu);
	fprintf(out, ",\n  \"grid\": ");
	json_dumpf(grid, out, JSON_COMPACT);
	fprintf(out,
		",\n  \"qd_offset\": %.17g,\n  \"exported\": \"%s\",\n  \"elites_only\": %s,\n"
		"  \"candidates\": [",
		ar->qd_offset, now, (flags & KS_ARCHIVE_EXPORT_ELITES) ? "true" : "false");
	json_decref(grid);
}

/* Source hashes, to write each source once. */
struct hashes {
	unsigned char (*items)[KS_SHA256_LEN];
	size_t n, alloc;
};

/* One record line; remembers its source hash in *hashes when hashes is not NULL. */
static int write_record(FILE *out, uint64_t id, const MDB_val *val, int *first, struct hashes *hashes,
			struct ks_error *err)
{
	json_t *record;

	if (ks_archive_parse_record(id, val, &record, err) < 0)
		return -1;
	if (hashes) {
		KS_ALLOC_GROW(hashes->items, hashes->n + 1, hashes->alloc);
		if (ks_unhex_sha256(json_string_value(json_object_get(record, "source_hash")),
				    hashes->items[hashes->n]) == 0)
			hashes->n++;
	}
	fputs(*first ? "\n    " : ",\n    ", out);
	*first = 0;
	json_dumpf(record, out, KS_ARCHIVE_RECORD_JSON);
	json_decref(record);
	return 0;
}

static int write_source(struct ks_archive *ar, MDB_txn *txn, FILE *out, const unsigned char *hash,
			const MDB_val *pointer, int *first, struct ks_error *err)
{
	char hex[KS_SHA256_HEX_LEN + 1];
	char *text;
	size_t len;
	json_t *str;

	if (ks_archive_source_read(ar, txn, pointer, &text, &len, err) < 0)
		return -1;
	str = json_stringn(text, len);
	free(text);

	ks_hex(hash, KS_SHA256_LEN, hex);
	fprintf(out, "%s    \"%s\": ", *first ? "\n" : ",\n", hex);
	*first = 0;
	json_dumpf(str ? str : json_null(), out, JSON_ENCODE_ANY);
	json_decref(str);
	return 0;
}

static int export_elites(struct ks_archive *ar, MDB_txn *txn, FILE *out, struct ks_error *err)
{
	MDB_cursor *cur = NULL;
	MDB_val key, val;
	uint64_t *ids = NULL;
	struct hashes hashes = { 0 };
	size_t n_ids = 0, alloc_ids = 0;
	int first = 1, rc, ret = -1;

	rc = mdb_cursor_open(txn, ar->grid, &cur);
	for (rc = rc ? rc : mdb_cursor_get(cur, &key, &val, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		if (val.mv_size != 16)
			continue; /* verify reports it */
		KS_ALLOC_GROW(ids, n_ids + 1, alloc_ids);
		ids[n_ids++] = ks_be64_get(val.mv_data);
	}
	if (rc != MDB_NOTFOUND) {
		ks_archive_lmdb_fail(err, rc, "reading the grid");
		goto cleanup;
	}
	KS_QSORT(ids, n_ids, cmp_u64);
	for (size_t i = 0; i < n_ids; i++) {
		unsigned char k[8];
		MDB_val kv = { 8, k };

		ks_be64_put(k, ids[i]);
		rc = mdb_get(txn, ar->candidates, &kv, &val);
		if (rc == MDB_NOTFOUND)
			continue;
		if (rc) {
			ks_archive_lmdb_fail(err, rc, "reading a record");
			goto cleanup;
		}
		if (write_record(out, ids[i], &val, &first, &hashes, err) < 0)
			goto cleanup;
	}
	fprintf(out, "\n  ],\n  \"sources\": {");
	KS_QSORT(hashes.items, hashes.n, cmp_hash);
	first = 1;
	for (size_t i = 0; i < hashes.n; i++) {
		MDB_val kv = { KS_SHA256_LEN, hashes.items[i] };

		if (i && !memcmp(hashes.items[i], hashes.items[i - 1], KS_SHA256_LEN))
			continue;
		if (mdb_get(txn, ar->sources, &kv, &val) == 0 &&
		    write_source(ar, txn, out, kv.mv_data, &val, &first, err) < 0)
			goto cleanup;
	}
	ret = 0;
cleanup:
	if (cur)
		mdb_cursor_close(cur);
	free(ids);
	free(hashes.items);
	return ret;
}

/* Walk a whole database with fn(key, value). */
static int walk_db(MDB_txn *txn, MDB_dbi dbi, const char *what,
		   int (*fn)(const MDB_val *key, const MDB_val *val, void *ctx), void *ctx,
		   struct ks_error *err)
{
	MDB_cursor *cur;
	MDB_val key, val;
	int rc = mdb_cursor_open(txn, dbi, &cur);

	if (rc)
		return ks_archive_lmdb_fail(err, rc, what);
	for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		int r = fn(&key, &val, ctx);

		if (r) {
			mdb_cursor_close(cur);
			return r;
		}
	}
	mdb_cursor_close(cur);
	if (rc != MDB_NOTFOUND)
		return ks_archive_lmdb_fail(err, rc, what);
	return 0;
}

struct export_ctx {
	struct ks_archive *ar;
	MDB_txn *txn;
	FILE *out;
	int first;
	struct ks_error *err;
};

static int export_record_fn(const MDB_val *key, const MDB_val *val, void *ctx_)
{
	struct export_ctx *ctx = ctx_;

	if (key->mv_size != 8)
		return ks_fail(ctx->err, "a record key is damaged");
	return write_record(ctx->out, ks_be64_get(key->mv_data), val, &ctx->first, NULL, ctx->err);
}

static int export_source_fn(const MDB_val *key, const MDB_val *val, void *ctx_)
{
	struct export_ctx *ctx = ctx_;

	if (key->mv_size != KS_SHA256_LEN)
		return 0; /* verify reports it */
	return write_source(ctx->ar, ctx->txn, ctx->out, key->mv_data, val, &ctx->first, ctx->err);
}

static int export_prompt_fn(const MDB_val *key, const MDB_val *val, void *ctx_)
{
	struct export_ctx *ctx = ctx_;
	json_t *prompt;

	if (key->mv_size != 8)
		return 0; /* verify reports it */
	if (ks_archive_parse_prompt(ks_be64_get(key->mv_data), val, &prompt, ctx->err) < 0)
		return -1;
	fputs(ctx->first ? "\n    " : ",\n    ", ctx->out);
	ctx->first = 0;
	json_dumpf(prompt, ctx->out, KS_ARCHIVE_RECORD_JSON);
	json_decref(prompt);
	return 0;
}

int ks_archive_export(struct ks_archive *ar, FILE *out, unsigned flags, struct ks_error *err)
{
	struct export_ctx ctx = { ar, NULL, out, 1, err };
	MDB_txn *txn;
	int ret = -1;

	if (ks_archive_txn_begin(ar, 1, &txn, err) < 0)
		return -1;
	ctx.txn = txn;
	write_header(ar, out, flags);
	if (flags & KS_ARCHIVE_EXPORT_ELITES) {
		if (export_elites(ar, txn, out, err) < 0)
			goto cleanup;
	} else {
		if (walk_db(txn, ar->candidates, "reading the records", export_record_fn, &ctx, err))
			goto cleanup;
		fprintf(out, "\n  ],\n  \"sources\": {");
		ctx.first = 1;
		if (walk_db(txn, ar->sources, "reading the sources", export_source_fn, &ctx, err))
			goto cleanup;
	}
	fprintf(out, "\n  },\n  \"prompts\": [");
	ctx.first = 1;
	if (walk_db(txn, ar->prompts, "reading the prompts", export_prompt_fn, &ctx, err))
		goto cleanup;
	fprintf(out, ctx.first ? "]\n}\n" : "\n  ]\n}\n");
	if (fflush(out) || ferror(out)) {
		ks_fail(err, "writing the export: %s", strerror(errno));
		goto cleanup;
	}
	ret = 0;
cleanup:
	ks_archive_txn_end(ar, txn);
	return ret;
}

/* Import */

int ks_archive_export_header(const json_t *doc, const char **op, const char **gpu, struct ks_grid_axis **grid,
			     size_t *n_grid, struct ks_error *err)
{
	const char *format = json_string_value(json_object_get(doc, "format"));
	const json_t *version = json_object_get(doc, "version");

	if (grid) {
		*grid = NULL;
		*n_grid = 0;
	}
	if (!json_is_object(doc))
		return ks_fail(err, "not a ksearch archive export: expected a JSON object");
	if (!format || strcmp(format, EXPORT_FORMAT))
		return ks_fail(err, "format: expected \"%s\", found %s%s%s", EXPORT_FORMAT,
			       format ? "\"" : "", format ? format : "none", format ? "\"" : "");
	if (!json_is_integer(version))
		return ks_fail(err, "version: expected an integer");
	if (json_integer_value(version) != KS_ARCHIVE_EXPORT_VERSION)
		return ks_fail(err, "version: export format version %lld, but this ksearch reads version %d",
			       (long long)json_integer_value(version), KS_ARCHIVE_EXPORT_VERSION);
	*op = json_string_value(json_object_get(doc, "op"));
	*gpu = json_string_value(json_object_get(doc, "gpu"));
	if (!*op || !*gpu)
		return ks_fail(err, "%s: expected the operator and GPU model names", *op ? "gpu" : "op");
	if (grid && ks_grid_from_json(json_object_get(doc, "grid"), grid, n_grid, err) < 0)
		return -1;
	return 0;
}

/* One candidate of the document, checked. */
struct import_item {
	uint64_t old_id;
	const json_t *record; /* borrowed from the document */
	const char *source;   /* borrowed from the document */
	uint64_t new_id;
	int skipped;
};

static int cmp_item(const void *a, const void *b)
{
	const struct import_item *x = a, *y = b;

	return x->old_id < y->old_id ? -1 : x->old_id > y->old_id;
}

static int check_sources(const json_t *sources, struct ks_error *err)
{
	const char *hex;
	json_t *text;

	if (!sources || json_is_null(sources))
		return 0;
	if (!json_is_object(sources))
		return ks_fail(err, "sources: expected an object of SHA-256 -> source text");
	json_object_foreach((json_t *)sources, hex, text)
	{
		unsigned char want[KS_SHA256_LEN], got[KS_SHA256_LEN];
		char got_hex[KS_SHA256_HEX_LEN + 1];

		if (ks_unhex_sha256(hex, want) < 0)
			return ks_fail(err, "sources: key '%.80s' is not a SHA-256 (64 hex digits)", hex);
		if (!json_is_string(text))
			return ks_fail(err, "sources.%s: expected the source text", hex);
		ks_sha256(json_string_value(text), json_string_length(text), got);
		if (memcmp(want, got, KS_SHA256_LEN)) {
			ks_hex(got, KS_SHA256_LEN, got_hex);
			return ks_fail(err, "sources.%s: the text's SHA-256 is %s (damaged or edited)", hex,
				       got_hex);
		}
		if (strlen(json_string_value(text)) != json_string_length(text))
			return ks_fail(err, "sources.%s: the text holds a NUL byte", hex);
	}
	return 0;
}

/* One prompt of the document, checked. */
struct import_prompt {
	uint64_t id;
	const json_t *prompt; /* borrowed from the document */
};

static int cmp_prompt(const void *a, const void *b)
{
	const struct import_prompt *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static int check_prompt_field(const json_t *prompt, size_t i, const char *field, json_type type,
			      struct ks_error *err)
{
	const json_t *value = json_object_get(prompt, field);

	if (value && json_typeof(value) == type)
		return 0;
	return ks_fail(err, "prompts[%zu] (id %lld): %s: expected %s, got %s", i,
		       (long long)json_integer_value(json_object_get(prompt, "id")), field,
		       type == JSON_STRING ? "a string" : "an object",
		       value ? ks_json_type_word(value) : "nothing");
}

/*
 * The document's prompts, checked and sorted by id into *list (*n of
 * them).  Exports before strategy prompts wrote an empty object, read as
 * none.
 */
static int check_prompts(const json_t *prompts, struct import_prompt **list, size_t *n, struct ks_error *err)
{
	size_t i;
	json_t *prompt;
	int ret = -1;

	*list = NULL;
	*n = 0;
	if (!prompts || json_is_null(prompts) || (json_is_object(prompts) && !json_object_size(prompts)))
		return 0;
	if (!json_is_array(prompts))
		return ks_fail(err, "prompts: expected a list of prompt objects, got %s",
			       ks_json_type_word(prompts));
	*list = ks_calloc(json_array_size(prompts), sizeof(**list));
	json_array_foreach(prompts, i, prompt)
	{
		const json_t *id = json_object_get(prompt, "id");

		if (!json_is_object(prompt)) {
			ks_fail(err, "prompts[%zu]: expected an object, got %s", i,
				ks_json_type_word(prompt));
			goto cleanup;
		}
		if (!json_is_integer(id) || json_integer_value(id) < 1) {
			ks_fail(err, "prompts[%zu].id: expected an integer >= 1", i);
			goto cleanup;
		}
		if (check_prompt_field(prompt, i, "name", JSON_STRING, err) < 0 ||
		    check_prompt_field(prompt, i, "text", JSON_STRING, err) < 0 ||
		    check_prompt_field(prompt, i, "stats", JSON_OBJECT, err) < 0)
			goto cleanup;
		(*list)[*n].id = (uint64_t)json_integer_value(id);
		(*list)[*n].prompt = prompt;
		(*n)++;
	}
	KS_QSORT(*list, *n, cmp_prompt);
	for (i = 1; i < *n; i++) {
		if ((*list)[i].id == (*list)[i - 1].id) {
			ks_fail(err, "prompts: id %llu appears twice", (unsigned long long)(*list)[i].id);
			goto cleanup;
		}
	}
	ret = 0;
cleanup:
	if (ret < 0) {
		free(*list);
		*list = NULL;
		*n = 0;
	}
	return ret;
}

static int check_item(const json_t *sources, const json_t *record, size_t i, struct import_item *item,
		      struct ks_error *err)
{
	const json_t *id = json_object_get(record, "id");
	const json_t *inline_source = json_object_get(record, "source");
	const char *hex = json_string_value(json_object_get(record, "source_hash"));

	if (!json_is_object(record))
		return ks_fail(err, "candidates[%zu]: expected an object", i);
	if (!json_is_integer(id) || json_integer_value(id) < 1)
		return ks_fail(err, "candidates[%zu].id: expected an integer >= 1", i);
	item->old_id = (uint64_t)json_integer_value(id);
	item->record = record;
	if (ks_archive_check_record(record, err) < 0) {
		ks_error_prefix(err, "candidates[%zu] (id %llu)", i, (unsigned long long)item->old_id);
		return -1;
	}
	if (inline_source) {
		unsigned char want[KS_SHA256_LEN], got[KS_SHA256_LEN];

		if (!json_is_string(inline_source))
			return ks_fail(err, "candidates[%zu].source: expected the source text", i);
		item->source = json_string_value(inline_source);
		ks_sha256(item->source, strlen(item->source), got);
		if (hex && (ks_unhex_sha256(hex, want) < 0 || memcmp(want, got, KS_SHA256_LEN)))
			return ks_fail(err, "candidates[%zu]: source_hash does not match its source text", i);
		return 0;
	}
	if (!hex)
		return ks_fail(err, "candidates[%zu] (id %llu): no \"source\" and no \"source_hash\"", i,
			       (unsigned long long)item->old_id);
	item->source = json_string_value(json_object_get(sources, hex));
	if (!item->source)
		return ks_fail(err, "candidates[%zu] (id %llu): source_hash %s is not in \"sources\"", i,
			       (unsigned long long)item->old_id, hex);
	return 0;
}

struct import_ctx {
	struct import_item *items;
	size_t n_items;
	size_t from, to; /* this batch */
	int keep_ids;
	uint64_t first_new_id; /* ids below it existed before the import */
	struct import_prompt *prompts;
	size_t n_prompts;
	uint64_t prompts_imported, prompts_skipped;
};

/* The new id of a record of the document, or 0 when it is not in it (or not imported yet). */
static uint64_t mapped_id(const struct import_ctx *ctx, uint64_t old_id, size_t before)
{
	size_t lo = 0, hi = before;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (ctx->items[mid].old_id < old_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < before && ctx->items[lo].old_id == old_id ? ctx->items[lo].new_id : 0;
}

/* The record as it goes into this archive: parents renumbered, its old id kept for reference. */
static json_t *remapped_record(const struct import_ctx *ctx, size_t i)
{
	json_t *record = json_deep_copy(ctx->items[i].record);
	json_t *parents = json_object_get(record, "parents");
	json_t *renumbered = json_array();
	size_t k;
	json_t *p;

	json_array_foreach(parents, k, p)
	{
		uint64_t id = mapped_id(ctx, (uint64_t)json_integer_value(p), i);

		if (id)
			json_array_append_new(renumbered, json_integer((json_int_t)id));
	}
	json_object_set_new(record, "parents", renumbered);
	json_object_set_new(record, "imported_from_id", json_integer((json_int_t)ctx->items[i].old_id));
	return record;
}

/*
 * The prompts, inside the transaction of the last batch.  They keep their
 * ids (the search and the records name them by id); one whose id the
 * archive holds already is skipped.  A best child the import renumbered
 * follows its record.
 */
static int import_prompts(struct ks_archive *ar, MDB_txn *txn, struct import_ctx *ctx, struct ks_error *err)
{
	ctx->prompts_imported = ctx->prompts_skipped = 0;
	for (size_t i = 0; i < ctx->n_prompts; i++) {
		unsigned char key[8];
		MDB_val k = { 8, key }, v;
		json_t *prompt, *stats, *best_child;
		char *text;
		int rc;

		ks_be64_put(key, ctx->prompts[i].id);
		rc = mdb_get(txn, ar->prompts, &k, &v);
		if (rc && rc != MDB_NOTFOUND)
			return ks_archive_lmdb_fail(err, rc, "reading the prompts");
		if (!rc) {
			ctx->prompts_skipped++;
			continue;
		}
		prompt = json_deep_copy(ctx->prompts[i].prompt);
		stats = json_object_get(prompt, "stats");
		best_child = json_object_get(stats, "best_child");
		if (!ctx->keep_ids && json_is_integer(best_child)) {
			uint64_t id = mapped_id(ctx, (uint64_t)json_integer_value(best_child), ctx->n_items);

			json_object_set_new(stats, "best_child",
					    id ? json_integer((json_int_t)id) : json_null());
		}
		text = json_dumps(prompt, JSON_COMPACT);
		json_decref(prompt);
		v.mv_size = strlen(text);
		v.mv_data = text;
		rc = mdb_put(txn, ar->prompts, &k, &v, 0);
		free(text);
		if (rc == MDB_MAP_FULL)
			return KS_ARCHIVE_GROW;
		if (rc)
			return ks_archive_lmdb_fail(err, rc, "writing a prompt");
		ctx->prompts_imported++;
	}
	return 0;
}

static int import_step(struct ks_archive *ar, MDB_txn *txn, void *ctx_, struct ks_error *err)
{
	struct import_ctx *ctx = ctx_;
	struct ks_counters c;
	int rc;

	if (ks_counters_load(ar, txn, &c, err) < 0)
		return -1;
	if (ctx->from == 0) {
		if (ctx->keep_ids && c.candidates)
			return ks_fail(err,
				       "%s: the archive received candidates while importing; import again",
				       ar->path);
		ctx->first_new_id = c.next_id;
	}
	for (size_t i = ctx->from; i < ctx->to; i++) {
		struct import_item *item = &ctx->items[i];
		struct ks_archive_insert_result res;
		json_t *record;

		item->skipped = 0;
		if (!ctx->keep_ids) {
			uint64_t existing;
			unsigned char hash[KS_SHA256_LEN], key[KS_SHA256_LEN];
			char hex[KS_SHA256_HEX_LEN + 1];
			MDB_val k = { KS_SHA256_LEN, key }, v;

			ks_sha256(item->source, strlen(item->source), hash);
			ks_hex(hash, sizeof(hash), hex);
			ks_archive_dedup_key(hex, json_object_get(item->record, "params"), key);
			rc = mdb_get(txn, ar->dedup, &k, &v);
			if (rc && rc != MDB_NOTFOUND)
				return ks_archive_lmdb_fail(err, rc, "reading the dedup index");
			existing = !rc && v.mv_size == 8 ? ks_be64_get(v.mv_data) : 0;
			if (existing && existing < ctx->first_new_id) {
				item->new_id = existing;
				item->skipped = 1;
				continue;
			}
		}
		record = ctx->keep_ids ? json_incref((json_t *)item->record) : remapped_record(ctx, i);
		rc = ks_archive_insert_txn(ar, txn, &c, record, item->source,
					   ctx->keep_ids ? item->old_id : 0, &res, err);
		json_decref(record);
		if (rc) {
			if (rc < 0)
				ks_error_prefix(err, "candidate %llu", (unsigned long long)item->old_id);
			return rc;
		}
		item->new_id = res.id;
	}
	if (ctx->to == ctx->n_items && (rc = import_prompts(ar, txn, ctx, err)))
		return rc;
	return ks_counters_store(ar, txn, &c, err);
}

static int archive_is_empty(struct ks_archive *ar, int *empty, struct ks_error *err)
{
	struct ks_counters c;
	MDB_txn *txn;
	int ret;

	if (ks_archive_txn_begin(ar, 1, &txn, err) < 0)
		return -1;
	ret = ks_counters_load(ar, txn, &c, err);
	ks_archive_txn_end(ar, txn);
	*empty = c.candidates == 0;
	return ret;
}

int ks_archive_import(struct ks_archive *ar, const json_t *doc, struct ks_archive_import_result *result,
		      struct ks_error *err)
{
	struct import_ctx ctx = { 0 };
	const json_t *candidates, *sources;
	const char *op, *gpu;
	int empty, ret = -1;

	memset(result, 0, sizeof(*result));
	if (ks_archive_export_header(doc, &op, &gpu, NULL, NULL, err) < 0)
		return -1;
	candidates = json_object_get(doc, "candidates");
	sources = json_object_get(doc, "sources");
	if (!json_is_array(candidates))
		return ks_fail(err, "candidates: expected a list of candidate records");
	if (check_sources(sources, err) < 0)
		return -1;
	if (check_prompts(json_object_get(doc, "prompts"), &ctx.prompts, &ctx.n_prompts, err) < 0)
		return -1;
	ctx.n_items = json_array_size(candidates);
	ctx.items = ks_calloc(ctx.n_items, sizeof(*ctx.items));
	for (size_t i = 0; i < ctx.n_items; i++)
		if (check_item(sources, json_array_get(candidates, i), i, &ctx.items[i], err) < 0)
			goto cleanup;
	KS_QSORT(ctx.items, ctx.n_items, cmp_item);
	for (size_t i = 1; i < ctx.n_items; i++) {
		if (ctx.items[i].old_id == ctx.items[i - 1].old_id) {
			ks_fail(err, "candidates: id %llu appears twice",
				(unsigned long long)ctx.items[i].old_id);
			goto cleanup;
		}
	}
	if (archive_is_empty(ar, &empty, err) < 0)
		goto cleanup;
	ctx.keep_ids = empty;
	for (ctx.from = 0; ctx.from < ctx.n_items || ctx.from == 0; ctx.from = ctx.to) {
		ctx.to = ctx.from + IMPORT_BATCH < ctx.n_items ? ctx.from + IMPORT_BATCH : ctx.n_items;
		if (ks_archive_write(ar, import_step, &ctx, err) < 0)
			goto cleanup;
		if (ctx.to == ctx.n_items)
			break;
	}
	for (size_t i = 0; i < ctx.n_items; i++) {
		if (ctx.items[i].skipped)
			result->skipped++;
		else
			result->imported++;
	}
	result->ids_kept = ctx.keep_ids;
	result->prompts_imported = ctx.prompts_imported;
	result->prompts_skipped = ctx.prompts_skipped;
	ret = 0;
cleanup:
	free(ctx.items);
	free(ctx.prompts);
	return ret;
}
