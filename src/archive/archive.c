/*
 * archive.c - the LMDB MAP-Elites archive: opening (and refusing damaged
 * or foreign files), growing the map, inserting one result per
 * transaction with the grid and metrics kept incrementally, and the small
 * stores (state, prompts, compile cache).  Readers are in archive_read.c,
 * export and import in archive_json.c, verify in archive_verify.c;
 * archive/README.md describes the databases they read and write.
 */
#include "archive_internal.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ksearch/archive/record.h"
#include "ksearch/base/fs.h"
#include "ksearch/base/util.h"

#ifndef KS_VERSION
#define KS_VERSION "unknown"
#endif

#define DEFAULT_MAP_SIZE ((size_t)64 << 20)
#define MIN_MAP_SIZE ((size_t)64 << 10)
/* Doubling stops here; beyond it the map grows by this much at a time. */
#define MAP_GROWTH_STEP ((size_t)8 << 30)
#define MAX_DBS 16
#define MAX_GROW_ATTEMPTS 64

/* Byte helpers */

void ks_be64_put(unsigned char *out, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		out[i] = (unsigned char)(v & 0xff);
		v >>= 8;
	}
}

uint64_t ks_be64_get(const unsigned char *in)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = (v << 8) | in[i];
	return v;
}

static uint64_t double_bits(double d)
{
	uint64_t bits;

	memcpy(&bits, &d, sizeof(bits));
	return bits;
}

static double bits_double(uint64_t bits)
{
	double d;

	memcpy(&d, &bits, sizeof(d));
	return d;
}

/*
 * A key that sorts the best fitness first: IEEE doubles map to unsigned
 * integers in numeric order (flip the sign bit of positives, every bit of
 * negatives), then inverted so LMDB's ascending order is descending fitness.
 */
uint64_t ks_archive_fitness_key(double fitness)
{
	uint64_t bits = double_bits(fitness);

	bits = (bits >> 63) ? ~bits : bits | ((uint64_t)1 << 63);
	return ~bits;
}

void ks_archive_now(char *buf, size_t size)
{
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int ks_archive_lmdb_fail(struct ks_error *err, int rc, const char *what)
{
	switch (rc) {
	case MDB_INVALID:
		return ks_fail(err, "%s: data.mdb is not an LMDB file, or its header is damaged", what);
	case MDB_VERSION_MISMATCH:
		return ks_fail(err, "%s: written by an incompatible version of LMDB", what);
	case MDB_CORRUPTED:
	case MDB_PAGE_NOTFOUND:
		return ks_fail(err, "%s: the archive is damaged (%s); `ksearch archive verify` says more",
			       what, mdb_strerror(rc));
	case MDB_READERS_FULL:
		return ks_fail(err, "%s: too many processes read the archive at once", what);
	case MDB_TXN_FULL:
		return ks_fail(err, "%s: too much to write in one transaction", what);
	case MDB_PANIC:
		return ks_fail(err, "%s: LMDB hit a fatal error; close and reopen the archive", what);
	default:
		return ks_fail(err, "%s: %s", what, mdb_strerror(rc));
	}
}

/* Names and folders */

char *ks_archive_gpu_slug(const char *gpu_model)
{
	struct ks_strbuf sb;
	int dash = 0;

	ks_strbuf_init(&sb);
	for (const char *p = gpu_model; *p; p++) {
		char c = *p;

		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.') {
			/* '.' only inside a name, never a leading "." or ".." */
			if (c == '.' && !sb.len)
				continue;
		} else if (c >= 'A' && c <= 'Z') {
			c = (char)(c - 'A' + 'a');
		} else {
			dash = sb.len > 0;
			continue;
		}
		if (dash)
			ks_strbuf_add(&sb, "-", 1);
		dash = 0;
		ks_strbuf_add(&sb, &c, 1);
	}
	if (!sb.len)
		ks_strbuf_adds(&sb, "unknown-gpu");
	return ks_strbuf_detach(&sb);
}

char *ks_archive_dir(const char *root, const char *op_key, const char *gpu_model)
{
	char *slug = ks_archive_gpu_slug(gpu_model);
	char *op_dir = ks_path_join(root, op_key);
	char *dir = ks_path_join(op_dir, slug);

	free(slug);
	free(op_dir);
	return dir;
}

static int cmp_env(const void *a, const void *b)
{
	const struct ks_archive_env *x = a, *y = b;
	int c = strcmp(x->op, y->op);

	return c ? c : strcmp(x->gpu_slug, y->gpu_slug);
}

int ks_archive_list_envs(const char *root, struct ks_archive_env **envs, size_t *n, struct ks_error *err)
{
	DIR *top = opendir(root);
	struct dirent *op;
	size_t alloc = 0;

	*envs = NULL;
	*n = 0;
	if (!top) {
		if (errno == ENOENT)
			return 0;
		return ks_fail(err, "cannot read archive folder %s: %s", root, strerror(errno));
	}
	while ((op = readdir(top))) {
		char *op_dir;
		DIR *sub;
		struct dirent *gpu;

		if (op->d_name[0] == '.')
			continue;
		op_dir = ks_path_join(root, op->d_name);
		sub = opendir(op_dir);
		while (sub && (gpu = readdir(sub))) {
			char *dir, *data;
			struct stat st;

			if (gpu->d_name[0] == '.')
				continue;
			dir = ks_path_join(op_dir, gpu->d_name);
			data = ks_path_join(dir, "data.mdb");
			if (stat(data, &st) == 0) {
				KS_ALLOC_GROW(*envs, *n + 1, alloc);
				(*envs)[*n].op = ks_strdup(op->d_name);
				(*envs)[*n].gpu_slug = ks_strdup(gpu->d_name);
				(*envs)[*n].path = dir;
				(*n)++;
			} else {
				free(dir);
			}
			free(data);
		}
		if (sub)
			closedir(sub);
		free(op_dir);
	}
	closedir(top);
	KS_QSORT(*envs, *n, cmp_env);
	return 0;
}

void ks_archive_envs_free(struct ks_archive_env *envs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(envs[i].op);
		free(envs[i].gpu_slug);
		free(envs[i].path);
	}
	free(envs);
}

/* The grid as JSON */

json_t *ks_grid_to_json(const struct ks_grid_axis *axes, size_t n)
{
	json_t *grid = json_array();

	for (size_t i = 0; i < n; i++) {
		json_t *edges = json_array();

		for (size_t k = 0; k < axes[i].n_edges; k++)
			json_array_append_new(edges, json_real(axes[i].edges[k]));
		json_array_append_new(grid,
				      json_pack("{s:s, s:o}", "descriptor",
						ks_descriptor_name(axes[i].descriptor), "edges", edges));
	}
	return grid;
}

void ks_grid_axes_free(struct ks_grid_axis *grid, size_t n)
{
	for (size_t i = 0; grid && i < n; i++)
		free(grid[i].edges);
	free(grid);
}

int ks_grid_from_json(const json_t *json, struct ks_grid_axis **axes, size_t *n, struct ks_error *err)
{
	struct ks_grid_axis *out;
	size_t count = json_array_size(json);

	*axes = NULL;
	*n = 0;
	if (!json_is_array(json) || !count)
		return ks_fail(err, "grid: expected a non-empty list of {\"descriptor\", \"edges\"}");
	out = ks_calloc(count, sizeof(*out));
	for (size_t i = 0; i < count; i++) {
		const json_t *axis = json_array_get(json, i);
		const json_t *edges = json_object_get(axis, "edges");
		const char *name = json_string_value(json_object_get(axis, "descriptor"));

		if (!name || ks_descriptor_parse(name, &out[i].descriptor, err) < 0) {
			if (!name)
				ks_fail(err, "expected a descriptor name");
			ks_error_prefix(err, "grid[%zu].descriptor", i);
			goto fail;
		}
		if (!json_is_array(edges) || json_array_size(edges) < 2) {
			ks_fail(err, "grid[%zu].edges: expected at least two ascending numbers", i);
			goto fail;
		}
		out[i].n_edges = json_array_size(edges);
		out[i].edges = ks_calloc(out[i].n_edges, sizeof(double));
		for (size_t k = 0; k < out[i].n_edges; k++) {
			const json_t *e = json_array_get(edges, k);

			if (!json_is_number(e)) {
				ks_fail(err, "grid[%zu].edges[%zu]: expected a number", i, k);
				goto fail;
			}
			out[i].edges[k] = json_number_value(e);
			if (k && !(out[i].edges[k] > out[i].edges[k - 1])) {
				ks_fail(err, "grid[%zu].edges: not ascending at [%zu]", i, k);
				goto fail;
			}
		}
	}
	*axes = out;
	*n = count;
	return 0;
fail:
	ks_grid_axes_free(out, count);
	return -1;
}

static int grids_equal(const struct ks_grid_axis *a, size_t na, const struct ks_grid_axis *b, size_t nb)
{
	if (na != nb)
		return 0;
	for (size_t i = 0; i < na; i++) {
		if (a[i].descriptor != b[i].descriptor || a[i].n_edges != b[i].n_edges)
			return 0;
		for (size_t k = 0; k < a[i].n_edges; k++)
			if (a[i].edges[k] != b[i].edges[k])
				return 0;
	}
	return 1;
}

static char *grid_text(const struct ks_grid_axis *axes, size_t n)
{
	json_t *json = ks_grid_to_json(axes, n);
	char *text = json_dumps(json, JSON_COMPACT | JSON_REAL_PRECISION(10));

	json_decref(json);
	return text;
}

/* Cells */

int ks_archive_cell_of(const struct ks_archive *ar, const json_t *descriptors, uint64_t *cell, char *why,
		       size_t why_size)
{
	double values[KS_DESC_COUNT] = { 0 };
	unsigned has = 0;

	for (int d = 0; d < KS_DESC_COUNT; d++) {
		const json_t *value = json_object_get(descriptors, ks_descriptor_name((enum ks_descriptor)d));

		if (json_is_number(value)) {
			values[d] = json_number_value(value);
			has |= 1u << d;
		}
	}
	return ks_archive_cell_of_values(ar, values, has, cell, why, why_size);
}

int ks_archive_cell_of_values(const struct ks_archive *ar, const double *descriptors, unsigned has,
			      uint64_t *cell, char *why, size_t why_size)
{
	uint64_t index = 0;

	for (size_t i = 0; i < ar->n_axes; i++) {
		const struct ks_grid_axis *axis = &ar->axes[i];
		const char *name = ks_descriptor_name(axis->descriptor);
		size_t bins = axis->n_edges - 1, bin;
		double v;

		if (!(has & (1u << axis->descriptor))) {
			snprintf(why, why_size, "descriptor %s is missing", name);
			return 1;
		}
		v = descriptors[axis->descriptor];
		for (bin = 0; bin < bins; bin++)
			if (v >= axis->edges[bin] && v < axis->edges[bin + 1])
				break;
		if (bin == bins) {
			snprintf(why, why_size, "%s = %g is outside the grid's edges [%g, %g)", name, v,
				 axis->edges[0], axis->edges[bins]);
			return 1;
		}
		index = index * bins + bin;
	}
	*cell = index;
	return 0;
}

void ks_archive_cell_coords(const struct ks_archive *ar, uint64_t cell, size_t *coords)
{
	for (size_t i = ar->n_axes; i-- > 0;) {
		size_t bins = ar->axes[i].n_edges - 1;

		coords[i] = (size_t)(cell % bins);
		cell /= bins;
	}
}

/* Transactions */

int ks_archive_txn_begin(struct ks_archive *ar, int readonly, MDB_txn **txn, struct ks_error *err)
{
	unsigned flags = readonly ? MDB_RDONLY : 0;
	int rc;

	if (readonly && ar->pinned) {
		*txn = ar->pinned;
		return 0;
	}
	rc = mdb_txn_begin(ar->env, NULL, flags, txn);

	if (rc == MDB_MAP_RESIZED) {
		/* the writer (another process) grew the map: adopt its size */
		rc = mdb_env_set_mapsize(ar->env, 0);
		if (!rc)
			rc = mdb_txn_begin(ar->env, NULL, flags, txn);
	}
	if (rc)
		return ks_archive_lmdb_fail(err, rc, ar->path);
	return 0;
}

void ks_archive_txn_end(struct ks_archive *ar, MDB_txn *txn)
{
	if (txn != ar->pinned)
		mdb_txn_abort(txn);
}

int ks_archive_pin(struct ks_archive *ar, struct ks_error *err)
{
	MDB_txn *txn;

	if (ar->pinned)
		return 0;
	if (ks_archive_txn_begin(ar, 1, &txn, err) < 0)
		return -1;
	ar->pinned = txn;
	return 0;
}

void ks_archive_unpin(struct ks_archive *ar)
{
	if (ar && ar->pinned) {
		mdb_txn_abort(ar->pinned);
		ar->pinned = NULL;
	}
}

static int grow_map(struct ks_archive *ar, struct ks_error *err)
{
	MDB_envinfo info;
	size_t size;
	int rc;

	mdb_env_info(ar->env, &info);
	size = info.me_mapsize;
	size = size < MAP_GROWTH_STEP ? size * 2 : size + MAP_GROWTH_STEP;
	rc = mdb_env_set_mapsize(ar->env, size);
	if (rc)
		return ks_archive_lmdb_fail(err, rc, "growing the archive's map");
	return 0;
}

int ks_archive_write(struct ks_archive *ar, ks_archive_step step, void *ctx, struct ks_error *err)
{
	if (ar->flags & KS_ARCHIVE_READONLY)
		return ks_fail(err, "%s: the archive was opened read-only", ar->path);
	for (int attempt = 0; attempt < MAX_GROW_ATTEMPTS; attempt++) {
		MDB_txn *txn;
		int rc;

		if (ks_archive_txn_begin(ar, 0, &txn, err) < 0)
			return -1;
		rc = step(ar, txn, ctx, err);
		if (rc < 0) {
			mdb_txn_abort(txn);
			return -1;
		}
		if (rc == KS_ARCHIVE_GROW) {
			mdb_txn_abort(txn);
		} else {
			rc = mdb_txn_commit(txn);
			if (!rc)
				return 0;
			if (rc != MDB_MAP_FULL)
				return ks_archive_lmdb_fail(err, rc, "committing to the archive");
		}
		if (grow_map(ar, err) < 0)
			return -1;
	}
	return ks_fail(err, "%s: the map is still full after growing it %d times", ar->path,
		       MAX_GROW_ATTEMPTS);
}

/* Put; MAP_FULL becomes KS_ARCHIVE_GROW, and NOOVERWRITE's KEYEXIST is not an error. */
static int put(MDB_txn *txn, MDB_dbi dbi, const void *k, size_t klen, const void *v, size_t vlen,
	       unsigned flags, const char *what, struct ks_error *err)
{
	MDB_val key = { klen, (void *)k }, val = { vlen, (void *)v };
	int rc = mdb_put(txn, dbi, &key, &val, flags);

	if (rc == MDB_MAP_FULL)
		return KS_ARCHIVE_GROW;
	if (rc == MDB_KEYEXIST && (flags & MDB_NOOVERWRITE) && !(flags & MDB_APPEND))
		return 0;
	if (rc)
		return ks_archive_lmdb_fail(err, rc, what);
	return 0;
}

int ks_archive_db_get(MDB_txn *txn, MDB_dbi dbi, const void *k, size_t klen, MDB_val *val, const char *what,
		      struct ks_error *err)
{
	MDB_val key = { klen, (void *)k };
	int rc = mdb_get(txn, dbi, &key, val);

	if (rc == MDB_NOTFOUND)
		return 1;
	if (rc)
		return ks_archive_lmdb_fail(err, rc, what);
	return 0;
}

static int put_json(MDB_txn *txn, MDB_dbi dbi, const void *k, size_t klen, const json_t *json, unsigned flags,
		    const char *what, struct ks_error *err)
{
	char *text = json_dumps(json, JSON_COMPACT | JSON_ENCODE_ANY);
	int rc = put(txn, dbi, k, klen, text, strlen(text), flags, what, err);

	free(text);
	return rc;
}

static json_t *parse_value(const MDB_val *val)
{
	return json_loadb(val->mv_data, val->mv_size, JSON_DECODE_ANY, NULL);
}

int ks_archive_parse_record(uint64_t id, const MDB_val *val, json_t **record, struct ks_error *err)
{
	json_error_t jerr;

	*record = json_loadb(val->mv_data, val->mv_size, 0, &jerr);
	if (!json_is_object(*record)) {
		json_decref(*record);
		*record = NULL;
		return ks_fail(err, "record #%llu is not a JSON object (%s): the archive is damaged",
			       (unsigned long long)id, jerr.text);
	}
	return 0;
}

/* Counters */

static uint64_t json_u64(const json_t *obj, const char *name)
{
	json_int_t v = json_integer_value(json_object_get(obj, name));

	return v > 0 ? (uint64_t)v : 0;
}

int ks_counters_load(struct ks_archive *ar, MDB_txn *txn, struct ks_counters *c, struct ks_error *err)
{
	MDB_val val;
	json_t *json, *verdicts;
	int rc = ks_archive_db_get(txn, ar->meta, "counters", 8, &val, "reading the counters", err);

	memset(c, 0, sizeof(*c));
	if (rc < 0)
		return -1;
	if (rc == 1)
		return ks_fail(err, "%s: the meta database has no counters: the archive is damaged",
			       ar->path);
	json = parse_value(&val);
	if (!json_is_object(json)) {
		json_decref(json);
		return ks_fail(err, "%s: the counters are not valid JSON: the archive is damaged", ar->path);
	}
	c->next_id = json_u64(json, "next_id");
	c->candidates = json_u64(json, "candidates");
	c->sources = json_u64(json, "sources");
	c->source_bytes = json_u64(json, "source_bytes");
	c->cells_filled = json_u64(json, "cells_filled");
	c->best_id = json_u64(json, "best_id");
	c->qd_score = json_number_value(json_object_get(json, "qd_score"));
	c->best_fitness = json_number_value(json_object_get(json, "best_fitness"));
	verdicts = json_object_get(json, "verdicts");
	for (int v = 0; v < KS_VERDICT_COUNT; v++)
		c->by_verdict[v] = json_u64(verdicts, ks_verdict_name((enum ks_verdict)v));
	if (c->next_id < 1)
		c->next_id = 1;
	json_decref(json);
	return 0;
}

int ks_counters_store(struct ks_archive *ar, MDB_txn *txn, const struct ks_counters *c, struct ks_error *err)
{
	json_t *verdicts = json_object();
	json_t *json;
	int rc;

	for (int v = 0; v < KS_VERDICT_COUNT; v++)
		json_object_set_new(verdicts, ks_verdict_name((enum ks_verdict)v),
				    json_integer((json_int_t)c->by_verdict[v]));
	json = json_pack("{s:I, s:I, s:o, s:I, s:I, s:I, s:f, s:f, s:I}", "next_id", (json_int_t)c->next_id,
			 "candidates", (json_int_t)c->candidates, "verdicts", verdicts, "sources",
			 (json_int_t)c->sources, "source_bytes", (json_int_t)c->source_bytes, "cells_filled",
			 (json_int_t)c->cells_filled, "qd_score", c->qd_score, "best_fitness",
			 c->best_fitness, "best_id", (json_int_t)c->best_id);
	rc = put_json(txn, ar->meta, "counters", 8, json, 0, "writing the counters", err);
	json_decref(json);
	return rc;
}

/* Opening */

static const struct {
	const char *name;
	size_t offset;
	unsigned flags;
} databases[] = {
	{ "candidates", offsetof(struct ks_archive, candidates), 0 },
	{ "sources", offsetof(struct ks_archive, sources), 0 },
	{ "source_text", offsetof(struct ks_archive, source_text), 0 },
	{ "dedup", offsetof(struct ks_archive, dedup), 0 },
	{ "grid", offsetof(struct ks_archive, grid), 0 },
	{ "by_fitness", offsetof(struct ks_archive, by_fitness), 0 },
	{ "by_verdict", offsetof(struct ks_archive, by_verdict), 0 },
	{ "history", offsetof(struct ks_archive, history), 0 },
	{ "prompts", offsetof(struct ks_archive, prompts), 0 },
	{ "compile_cache", offsetof(struct ks_archive, cache), 0 },
	{ "state", offsetof(struct ks_archive, state), 0 },
};

struct create_ctx {
	const struct ks_archive_options *opts;
	int created;
};

/*
 * The largest value LMDB keeps inside a leaf page with an 8-byte key: half
 * a page less the page header, a slot, the node header and the key (2022
 * bytes on 4 KiB pages).  Two such chunks fill a page.
 */
static size_t source_chunk_bytes(struct ks_archive *ar)
{
	MDB_stat st;
	size_t psize = mdb_env_stat(ar->env, &st) ? 4096 : st.ms_psize;

	return (((psize - 16) / 2) & ~(size_t)1) - 2 - 8 - 8;
}

/* Write a new archive's meta: schema version, info, zero counters. */
static int init_meta(struct ks_archive *ar, MDB_txn *txn, const struct ks_archive_options *opts,
		     struct ks_error *err)
{
	char version[16], now[32];
	struct ks_counters zero = { .next_id = 1 };
	json_t *info;
	int rc;

	snprintf(version, sizeof(version), "%d", KS_ARCHIVE_SCHEMA_VERSION);
	ks_archive_now(now, sizeof(now));
	rc = put(txn, ar->meta, "schema_version", 14, version, strlen(version), 0, "writing meta", err);
	if (rc)
		return rc;
	info = json_pack("{s:s, s:s, s:o, s:f, s:I, s:s, s:s}", "op", ar->op, "gpu", ar->gpu, "grid",
			 ks_grid_to_json(opts->grid, opts->n_grid), "qd_offset", opts->qd_offset,
			 "source_chunk_bytes", (json_int_t)source_chunk_bytes(ar), "created", now,
			 "created_by", "ksearch " KS_VERSION);
	rc = put_json(txn, ar->meta, "info", 4, info, 0, "writing meta", err);
	json_decref(info);
	if (rc)
		return rc;
	return ks_counters_store(ar, txn, &zero, err);
}

static int read_info(struct ks_archive *ar, MDB_txn *txn, const struct ks_archive_options *opts,
		     struct ks_error *err)
{
	MDB_val val;
	json_t *info = NULL;
	char version[32];
	long found;
	char *end;
	int rc, ret = -1;

	rc = ks_archive_db_get(txn, ar->meta, "schema_version", 14, &val, "reading meta", err);
	if (rc)
		return rc < 0 ? -1 : ks_fail(err, "%s: not a ksearch archive (no schema version)", ar->path);
	snprintf(version, sizeof(version), "%.*s", (int)(val.mv_size < 31 ? val.mv_size : 31),
		 (const char *)val.mv_data);
	found = strtol(version, &end, 10);
	if (end == version || *end)
		return ks_fail(err, "%s: not a ksearch archive (schema version '%s')", ar->path, version);
	if (found != KS_ARCHIVE_SCHEMA_VERSION)
		return ks_fail(err, "%s: archive schema version %ld, but this ksearch reads version %d%s",
			       ar->path, found, KS_ARCHIVE_SCHEMA_VERSION,
			       found > KS_ARCHIVE_SCHEMA_VERSION
				       ? " (written by a newer ksearch: use that one, or export with it and "
					 "import here)"
				       : " (written by an older ksearch: export with it, and import here)");
	rc = ks_archive_db_get(txn, ar->meta, "info", 4, &val, "reading meta", err);
	if (rc)
		return rc < 0 ? -1
			      : ks_fail(err, "%s: the meta database has no info: the archive is damaged",
					ar->path);
	info = parse_value(&val);
	if (!json_is_object(info) || !json_is_string(json_object_get(info, "op")) ||
	    !json_is_string(json_object_get(info, "gpu"))) {
		ks_fail(err, "%s: the archive's info is not valid: the archive is damaged", ar->path);
		goto cleanup;
	}
	free(ar->op);
	free(ar->gpu);
	ar->op = ks_strdup(json_string_value(json_object_get(info, "op")));
	ar->gpu = ks_strdup(json_string_value(json_object_get(info, "gpu")));
	ar->qd_offset = json_number_value(json_object_get(info, "qd_offset"));
	ar->chunk_bytes = (size_t)json_integer_value(json_object_get(info, "source_chunk_bytes"));
	if (ar->chunk_bytes < 64) {
		ks_fail(err, "%s: the archive's info has no valid source_chunk_bytes: it is damaged",
			ar->path);
		goto cleanup;
	}
	if (ks_grid_from_json(json_object_get(info, "grid"), &ar->axes, &ar->n_axes, err) < 0) {
		ks_error_prefix(err, "%s: the archive's info", ar->path);
		goto cleanup;
	}
	if (opts->grid && !grids_equal(opts->grid, opts->n_grid, ar->axes, ar->n_axes)) {
		char *want = grid_text(opts->grid, opts->n_grid), *have = grid_text(ar->axes, ar->n_axes);

		ks_fail(err,
			"%s: the operator's grid %s differs from the archive's %s; use another "
			"--archive folder, or export this one and import it into a new archive (import "
			"places the elites with the new grid)",
			ar->path, want, have);
		free(want);
		free(have);
		goto cleanup;
	}
	ret = 0;
cleanup:
	json_decref(info);
	return ret;
}

static int open_step(struct ks_archive *ar, MDB_txn *txn, void *ctx_, struct ks_error *err)
{
	struct create_ctx *ctx = ctx_;
	int writer = !(ar->flags & KS_ARCHIVE_READONLY);
	unsigned create = writer && (ar->flags & KS_ARCHIVE_CREATE) ? MDB_CREATE : 0;
	int rc = mdb_dbi_open(txn, "meta", 0, &ar->meta);

	ctx->created = 0;
	if (rc == MDB_NOTFOUND && create) {
		MDB_dbi main_db;
		MDB_stat st;

		/* only an empty environment becomes an archive: never adopt someone else's */
		if (mdb_dbi_open(txn, NULL, 0, &main_db) || mdb_stat(txn, main_db, &st) || st.ms_entries)
			return ks_fail(err, "%s: an LMDB environment, but not a ksearch archive", ar->path);
		if (!ctx->opts->grid || !ctx->opts->n_grid)
			return ks_fail(err, "%s: creating an archive needs the operator's grid", ar->path);
		rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &ar->meta);
		ctx->created = 1;
	}
	if (rc == MDB_MAP_FULL)
		return KS_ARCHIVE_GROW;
	if (rc == MDB_NOTFOUND)
		return ks_fail(err,
			       "%s: not a ksearch archive (no meta database); a copy of an archive's "
			       "files taken while a search wrote to it can look like this: copy one "
			       "with `ksearch archive export`, or while nothing writes to it",
			       ar->path);
	if (rc)
		return ks_archive_lmdb_fail(err, rc, ar->path);
	for (size_t i = 0; i < sizeof(databases) / sizeof(databases[0]); i++) {
		MDB_dbi *dbi = (MDB_dbi *)((char *)ar + databases[i].offset);

		rc = mdb_dbi_open(txn, databases[i].name, databases[i].flags | create, dbi);
		if (rc == MDB_MAP_FULL)
			return KS_ARCHIVE_GROW;
		if (rc == MDB_NOTFOUND)
			return ks_fail(err, "%s: the archive has no '%s' database: it is damaged", ar->path,
				       databases[i].name);
		if (rc)
			return ks_archive_lmdb_fail(err, rc, ar->path);
	}
	if (ctx->created) {
		rc = init_meta(ar, txn, ctx->opts, err);
		if (rc)
			return rc;
	}
	return read_info(ar, txn, ctx->opts, err);
}

/*
 * LMDB trusts the file's length: pages past the end of a truncated file
 * would fault (SIGBUS) when read.  Check the length before any read.
 */
static int check_file(struct ks_archive *ar, const char *data_path, int *exists, struct ks_error *err)
{
	struct stat st;

	*exists = stat(data_path, &st) == 0;
	if (!*exists)
		return 0;
	if (!S_ISREG(st.st_mode))
		return ks_fail(err, "%s: not a regular file", data_path);
	if (st.st_size == 0 && !(ar->flags & KS_ARCHIVE_READONLY) && (ar->flags & KS_ARCHIVE_CREATE)) {
		/* a creation killed before its first write: nothing to lose */
		*exists = 0;
		return 0;
	}
	if (st.st_size < 2 * 4096)
		return ks_fail(err, "%s is truncated (%lld bytes; an archive has at least 8192)", data_path,
			       (long long)st.st_size);
	return 0;
}

static int check_length(struct ks_archive *ar, const char *data_path, struct ks_error *err)
{
	MDB_envinfo info;
	MDB_stat st;
	struct stat fst;
	unsigned long long need;

	if (mdb_env_info(ar->env, &info) || mdb_env_stat(ar->env, &st) || stat(data_path, &fst) < 0)
		return ks_fail(err, "%s: cannot read the archive's size", data_path);
	need = ((unsigned long long)info.me_last_pgno + 1) * st.ms_psize;
	if ((unsigned long long)fst.st_size < need)
		return ks_fail(err, "%s is truncated: %lld bytes, but its pages need %llu", data_path,
			       (long long)fst.st_size, need);
	return 0;
}

int ks_archive_open(struct ks_archive **out, const char *root, const char *op_key, const char *gpu_model,
		    const struct ks_archive_options *opts, struct ks_error *err)
{
	static const struct ks_archive_options none;
	struct ks_archive *ar = ks_calloc(1, sizeof(*ar));
	struct create_ctx ctx;
	char *data_path = NULL;
	/*
	 * Every access is a B-tree walk to a few scattered pages: the kernel's
	 * readahead would read 32 pages around each (on a cold cache, 20x the
	 * time of `archive ls` at a million candidates).
	 */
	unsigned env_flags = MDB_NOTLS | MDB_NORDAHEAD;
	int exists, rc, ret = -1, dead;

	*out = NULL;
	if (!opts)
		opts = &none;
	ar->flags = opts->flags;
	ar->path = ks_archive_dir(root, op_key, gpu_model);
	ar->op = ks_strdup(op_key);
	ar->gpu = ks_strdup(gpu_model);
	data_path = ks_path_join(ar->path, "data.mdb");
	if (check_file(ar, data_path, &exists, err) < 0)
		goto cleanup;
	if (!exists && (!(ar->flags & KS_ARCHIVE_CREATE) || (ar->flags & KS_ARCHIVE_READONLY))) {
		ks_fail(err, "no archive for operator '%s' on '%s' in %s (looked for %s)", op_key, gpu_model,
			root, data_path);
		goto cleanup;
	}
	if (!exists && ks_mkdir_p(ar->path, err) < 0)
		goto cleanup;
	rc = mdb_env_create(&ar->env);
	if (!rc)
		rc = mdb_env_set_maxdbs(ar->env, MAX_DBS);
	if (!rc && (opts->map_size || !exists)) {
		/* LMDB raises a size below what the data uses to that */
		size_t size = opts->map_size ? opts->map_size : DEFAULT_MAP_SIZE;

		rc = mdb_env_set_mapsize(ar->env, size < MIN_MAP_SIZE ? MIN_MAP_SIZE : size);
	}
	if (rc) {
		ks_archive_lmdb_fail(err, rc, ar->path);
		goto cleanup;
	}
	if (ar->flags & KS_ARCHIVE_READONLY)
		env_flags |= MDB_RDONLY;
	if (ar->flags & KS_ARCHIVE_NOSYNC)
		env_flags |= MDB_NOSYNC;
	rc = mdb_env_open(ar->env, ar->path, env_flags, 0644);
	if (rc) {
		ks_archive_lmdb_fail(err, rc, ar->path);
		goto cleanup;
	}
	if (check_length(ar, data_path, err) < 0)
		goto cleanup;
	/* slots of readers that were killed would keep old pages from reuse forever */
	mdb_reader_check(ar->env, &dead);
	ctx.opts = opts;
	if (ar->flags & KS_ARCHIVE_READONLY) {
		MDB_txn *txn;

		if (ks_archive_txn_begin(ar, 1, &txn, err) < 0)
			goto cleanup;
		rc = open_step(ar, txn, &ctx, err);
		if (rc) {
			mdb_txn_abort(txn);
			goto cleanup;
		}
		/* committing (not aborting) keeps the database handles open */
		rc = mdb_txn_commit(txn);
		if (rc) {
			ks_archive_lmdb_fail(err, rc, ar->path);
			goto cleanup;
		}
	} else if (ks_archive_write(ar, open_step, &ctx, err) < 0) {
		goto cleanup;
	}
	ar->n_cells = 1;
	for (size_t i = 0; i < ar->n_axes; i++)
		ar->n_cells *= ar->axes[i].n_edges - 1;
	*out = ar;
	ar = NULL;
	ret = 0;
cleanup:
	free(data_path);
	ks_archive_close(ar);
	return ret;
}

void ks_archive_close(struct ks_archive *ar)
{
	if (!ar)
		return;
	ks_archive_unpin(ar);
	if (ar->env) {
		if ((ar->flags & KS_ARCHIVE_NOSYNC) && !(ar->flags & KS_ARCHIVE_READONLY))
			mdb_env_sync(ar->env, 1);
		mdb_env_close(ar->env);
	}
	ks_grid_axes_free(ar->axes, ar->n_axes);
	free(ar->path);
	free(ar->op);
	free(ar->gpu);
	free(ar);
}

const char *ks_archive_op(const struct ks_archive *ar)
{
	return ar->op;
}

const char *ks_archive_gpu(const struct ks_archive *ar)
{
	return ar->gpu;
}

const char *ks_archive_path(const struct ks_archive *ar)
{
	return ar->path;
}

const struct ks_grid_axis *ks_archive_grid(const struct ks_archive *ar, size_t *n_axes)
{
	*n_axes = ar->n_axes;
	return ar->axes;
}

uint64_t ks_archive_cells(const struct ks_archive *ar)
{
	return ar->n_cells;
}

const char *ks_archive_outcome_name(enum ks_archive_outcome outcome)
{
	switch (outcome) {
	case KS_ARCHIVE_NEW_CELL:
		return "new cell";
	case KS_ARCHIVE_IMPROVED:
		return "improved";
	case KS_ARCHIVE_NOT_ADDED:
		return "not added";
	case KS_ARCHIVE_NOT_ELIGIBLE:
		return "not eligible";
	case KS_ARCHIVE_OUTSIDE_GRID:
		return "outside the grid";
	}
	return "?";
}

/* Records */

double ks_archive_record_fitness(const json_t *record, enum ks_verdict verdict)
{
	if (verdict != KS_VERDICT_OK)
		return 0;
	return json_number_value(json_object_get(record, "fitness"));
}

static int check_id_list(const json_t *list, const char *field, struct ks_error *err)
{
	size_t i;
	const json_t *v;

	if (!list || json_is_null(list))
		return 0;
	if (!json_is_array(list))
		return ks_fail(err, "%s: expected a list of candidate ids", field);
	json_array_foreach(list, i, v) if (!json_is_integer(v) || json_integer_value(v) < 1) return ks_fail(
		err, "%s[%zu]: expected a candidate id (an integer >= 1)", field, i);
	return 0;
}

/* The verdict of a record already checked; -1 when it has none. */
static int record_verdict(const json_t *record, enum ks_verdict *verdict)
{
	return ks_record_verdict(record, verdict);
}

int ks_archive_check_record(const json_t *record, struct ks_error *err)
{
	const json_t *fitness, *descriptors, *params, *v;
	const char *verdict_name, *key;
	enum ks_verdict verdict;

	if (!json_is_object(record))
		return ks_fail(err, "a candidate record must be a JSON object");
	verdict_name = json_string_value(json_object_get(record, "verdict"));
	if (!verdict_name)
		return ks_fail(err, "verdict: missing (expected one of ok, compile_error, contract_error, "
				    "refused, wrong, crash, timeout, implausible)");
	if (ks_verdict_parse(verdict_name, &verdict) < 0)
		return ks_fail(err,
			       "verdict: unknown verdict '%s' (expected one of ok, compile_error, "
			       "contract_error, refused, wrong, crash, timeout, implausible)",
			       verdict_name);
	fitness = json_object_get(record, "fitness");
	if (fitness && !json_is_number(fitness) && !json_is_null(fitness))
		return ks_fail(err, "fitness: expected a number");
	if (verdict == KS_VERDICT_OK) {
		double f = json_number_value(fitness);

		if (!json_is_number(fitness))
			return ks_fail(err, "fitness: an ok candidate needs its fitness");
		if (!isfinite(f) || f < 0)
			return ks_fail(err, "fitness: %g is not a speedup (expected a finite number >= 0)",
				       f);
	}
	descriptors = json_object_get(record, "descriptors");
	if (descriptors && !json_is_object(descriptors) && !json_is_null(descriptors))
		return ks_fail(err, "descriptors: expected an object of descriptor -> number");
	json_object_foreach((json_t *)descriptors, key, v)
	{
		enum ks_descriptor d;

		if (!json_is_number(v) && ks_descriptor_parse(key, &d, NULL) == 0)
			return ks_fail(err, "descriptors.%s: expected a number", key);
	}
	params = json_object_get(record, "params");
	if (params && !json_is_object(params) && !json_is_null(params))
		return ks_fail(err, "params: expected an object of NAME -> value");
	if (check_id_list(json_object_get(record, "parents"), "parents", err) < 0)
		return -1;
	v = json_object_get(record, "evidence");
	if (v && !json_is_string(v) && !json_is_null(v))
		return ks_fail(err, "evidence: expected text");
	v = json_object_get(record, "workloads");
	if (v && !json_is_array(v) && !json_is_null(v))
		return ks_fail(err, "workloads: expected a list of per-workload timings");
	{
		/* what every reader parses it with: a record they would all refuse is refused here, unstored
		 */
		struct ks_record rec;
		int rc;

		ks_record_init(&rec);
		rc = ks_record_parse(record, &rec, err);
		ks_record_release(&rec);
		if (rc < 0)
			return -1;
	}
	return 0;
}

void ks_archive_dedup_key(const char *source_hash_hex, const json_t *params, unsigned char out[KS_SHA256_LEN])
{
	struct ks_strbuf sb;
	char *canonical = NULL;

	if (json_is_object(params))
		canonical = json_dumps(params, JSON_COMPACT | JSON_SORT_KEYS);
	ks_strbuf_init(&sb);
	ks_strbuf_adds(&sb, source_hash_hex);
	ks_strbuf_adds(&sb, "\n");
	ks_strbuf_adds(&sb, canonical ? canonical : "{}");
	ks_sha256(sb.buf, sb.len, out);
	ks_strbuf_release(&sb);
	free(canonical);
}

/*
 * Round every real to 15 significant digits (DBL_DIG): a double printed
 * that way reads back as the same double, so the stored text, the grid's
 * binary fitness and an export all agree exactly, and the text has no
 * "0.32000000000000001" noise.
 */
static void normalize_reals(json_t *json)
{
	const char *key;
	json_t *v;
	size_t i;

	if (json_is_real(json)) {
		char text[32];

		snprintf(text, sizeof(text), "%.15g", json_real_value(json));
		json_real_set(json, strtod(text, NULL));
	} else if (json_is_object(json)) {
		json_object_foreach(json, key, v) normalize_reals(v);
	} else if (json_is_array(json)) {
		json_array_foreach(json, i, v) normalize_reals(v);
	}
}

/*
 * The stored document: "id" first, then what the archive sets, then the
 * caller's fields in their order ("source" never: the text lives in the
 * sources database).
 */
static json_t *stored_record(const struct ks_archive *ar, const json_t *record, uint64_t id,
			     const char *hash_hex)
{
	json_t *doc = json_object();
	const char *key;
	json_t *v;
	char now[32];

	json_object_set_new(doc, "id", json_integer((json_int_t)id));
	v = json_object_get(record, "op");
	json_object_set_new(doc, "op", json_string(json_is_string(v) ? json_string_value(v) : ar->op));
	v = json_object_get(record, "gpu");
	json_object_set_new(doc, "gpu", json_string(json_is_string(v) ? json_string_value(v) : ar->gpu));
	json_object_set_new(doc, "source_hash", json_string(hash_hex));
	json_object_foreach((json_t *)record, key, v)
	{
		if (!strcmp(key, "id") || !strcmp(key, "op") || !strcmp(key, "gpu") ||
		    !strcmp(key, "source_hash") || !strcmp(key, "source"))
			continue;
		json_object_set_new(doc, key, json_deep_copy(v));
	}
	normalize_reals(doc);
	if (!json_is_string(json_object_get(doc, "created"))) {
		ks_archive_now(now, sizeof(now));
		json_object_set_new(doc, "created", json_string(now));
	}
	return doc;
}

static void index_keys(enum ks_verdict verdict, double fitness, uint64_t id, unsigned char fkey[17],
		       unsigned char vkey[9])
{
	fkey[0] = (unsigned char)verdict;
	ks_be64_put(fkey + 1, ks_archive_fitness_key(fitness));
	ks_be64_put(fkey + 9, id);
	vkey[0] = (unsigned char)verdict;
	ks_be64_put(vkey + 1, id);
}

/*
 * Place an ok record in its cell; fills res and updates c.  The higher
 * fitness wins the cell, and of equal fitness the lower id (the first
 * found): an insert always has the highest id, so for it an equal
 * fitness never replaces; a record re-placed by its profile may be older.
 */
static int place(struct ks_archive *ar, MDB_txn *txn, struct ks_counters *c, uint64_t id, double fitness,
		 struct ks_archive_insert_result *res, struct ks_error *err)
{
	unsigned char key[8], value[16];
	MDB_val old;
	int rc;

	ks_be64_put(key, (uint64_t)res->cell);
	rc = ks_archive_db_get(txn, ar->grid, key, 8, &old, "reading the grid", err);
	if (rc < 0)
		return -1;
	if (rc == 0) {
		double old_fitness;

		if (old.mv_size != 16)
			return ks_fail(err, "%s: grid cell %lld has a damaged value", ar->path,
				       (long long)res->cell);
		old_fitness = bits_double(ks_be64_get((unsigned char *)old.mv_data + 8));
		if (!(fitness > old_fitness || (fitness == old_fitness && id < ks_be64_get(old.mv_data)))) {
			res->outcome = KS_ARCHIVE_NOT_ADDED;
			return 0;
		}
		res->outcome = KS_ARCHIVE_IMPROVED;
		res->replaced_id = ks_be64_get(old.mv_data);
		res->replaced_fitness = old_fitness;
		c->qd_score += fitness - old_fitness;
	} else {
		res->outcome = KS_ARCHIVE_NEW_CELL;
		c->cells_filled++;
		c->qd_score += fitness - ar->qd_offset;
	}
	ks_be64_put(value, id);
	ks_be64_put(value + 8, double_bits(fitness));
	return put(txn, ar->grid, key, 8, value, 16, 0, "writing the grid", err);
}

static int append_history(struct ks_archive *ar, MDB_txn *txn, const struct ks_counters *c,
			  struct ks_error *err)
{
	unsigned char key[8];
	json_t *point;
	int rc;

	ks_be64_put(key, c->candidates);
	point = json_pack("{s:I, s:f, s:f, s:f, s:I}", "evals", (json_int_t)c->candidates, "best",
			  c->best_fitness, "coverage",
			  ar->n_cells ? (double)c->cells_filled / (double)ar->n_cells : 0.0, "qd_score",
			  c->qd_score, "cells_filled", (json_int_t)c->cells_filled);
	rc = put_json(txn, ar->history, key, 8, point, 0, "writing the history", err);
	json_decref(point);
	return rc;
}

int ks_archive_source_append(struct ks_archive *ar, MDB_txn *txn, const struct ks_counters *c,
			     const char *text, size_t len, unsigned char pointer[16], struct ks_error *err)
{
	uint64_t chunk = c->source_bytes / ar->chunk_bytes;
	size_t used = (size_t)(c->source_bytes % ar->chunk_bytes);
	unsigned char key[8];
	int rc;

	ks_be64_put(pointer, c->source_bytes);
	ks_be64_put(pointer + 8, len);
	if (used && len) {
		/* top up the last chunk: rewriting it in place keeps its page full */
		size_t take = len < ar->chunk_bytes - used ? len : ar->chunk_bytes - used;
		char *buf = ks_malloc(used + take);
		MDB_val val;

		ks_be64_put(key, chunk);
		rc = ks_archive_db_get(txn, ar->source_text, key, 8, &val, "reading the source stream", err);
		if (rc || val.mv_size != used) {
			free(buf);
			return rc < 0 ? -1
				      : ks_fail(err, "%s: the source stream's last chunk is damaged",
						ar->path);
		}
		memcpy(buf, val.mv_data, used);
		memcpy(buf + used, text, take);
		rc = put(txn, ar->source_text, key, 8, buf, used + take, 0, "writing the source stream", err);
		free(buf);
		if (rc)
			return rc;
		text += take;
		len -= take;
		chunk++;
	}
	while (len) {
		size_t take = len < ar->chunk_bytes ? len : ar->chunk_bytes;

		ks_be64_put(key, chunk++);
		rc = put(txn, ar->source_text, key, 8, text, take, MDB_APPEND, "writing the source stream",
			 err);
		if (rc)
			return rc;
		text += take;
		len -= take;
	}
	return 0;
}

int ks_archive_source_read(struct ks_archive *ar, MDB_txn *txn, const MDB_val *pointer, char **text,
			   size_t *len, struct ks_error *err)
{
	uint64_t offset, length, done = 0;
	MDB_cursor *cur;
	MDB_val key, val;
	unsigned char start[8];
	int rc;

	*text = NULL;
	*len = 0;
	if (pointer->mv_size != 16)
		return ks_fail(err, "%s: a source index entry is damaged", ar->path);
	offset = ks_be64_get(pointer->mv_data);
	length = ks_be64_get((unsigned char *)pointer->mv_data + 8);
	rc = mdb_cursor_open(txn, ar->source_text, &cur);
	if (rc)
		return ks_archive_lmdb_fail(err, rc, "reading the source stream");
	*text = ks_malloc(length + 1);
	ks_be64_put(start, offset / ar->chunk_bytes);
	key.mv_size = 8;
	key.mv_data = start;
	for (rc = length ? mdb_cursor_get(cur, &key, &val, MDB_SET_KEY) : MDB_NOTFOUND; !rc && done < length;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		size_t skip = done ? 0 : (size_t)(offset % ar->chunk_bytes);
		size_t take;

		if (val.mv_size <= skip)
			break;
		take = val.mv_size - skip;
		if (take > length - done)
			take = (size_t)(length - done);
		memcpy(*text + done, (char *)val.mv_data + skip, take);
		done += take;
	}
	mdb_cursor_close(cur);
	if (done != length) {
		free(*text);
		*text = NULL;
		if (rc && rc != MDB_NOTFOUND)
			return ks_archive_lmdb_fail(err, rc, "reading the source stream");
		return ks_fail(err, "%s: the source stream ends before a source does: the archive is damaged",
			       ar->path);
	}
	(*text)[length] = '\0';
	*len = (size_t)length;
	return 0;
}

/* The record, its source, and its entries in the dedup, fitness and verdict indexes. */
static int store(struct ks_archive *ar, MDB_txn *txn, struct ks_counters *c, const json_t *doc,
		 const char *source, enum ks_verdict verdict, double fitness,
		 struct ks_archive_insert_result *res, struct ks_error *err)
{
	unsigned char hash[KS_SHA256_LEN], dedup[KS_SHA256_LEN], key[8], fkey[17], vkey[9];
	const char *hash_hex = json_string_value(json_object_get(doc, "source_hash"));
	size_t source_len = strlen(source);
	MDB_val val;
	char *text;
	int rc;

	ks_unhex_sha256(hash_hex, hash);
	ks_be64_put(key, res->id);
	/* ids only grow, so APPEND keeps the pages full; it fails on a reused id */
	text = json_dumps(doc, KS_ARCHIVE_RECORD_JSON);
	rc = put(txn, ar->candidates, key, 8, text, strlen(text), MDB_APPEND, "writing the record", err);
	free(text);
	if (rc)
		return rc;
	rc = ks_archive_db_get(txn, ar->sources, hash, sizeof(hash), &val, "reading the sources", err);
	if (rc < 0)
		return -1;
	if (rc == 1) {
		unsigned char pointer[16];

		rc = ks_archive_source_append(ar, txn, c, source, source_len, pointer, err);
		if (!rc)
			rc = put(txn, ar->sources, hash, sizeof(hash), pointer, sizeof(pointer), 0,
				 "writing the source index", err);
		if (rc)
			return rc;
		res->new_source = 1;
		c->sources++;
		c->source_bytes += source_len;
	}
	ks_archive_dedup_key(hash_hex, json_object_get(doc, "params"), dedup);
	rc = put(txn, ar->dedup, dedup, sizeof(dedup), key, 8, MDB_NOOVERWRITE, "writing the dedup index",
		 err);
	if (rc)
		return rc;
	index_keys(verdict, fitness, res->id, fkey, vkey);
	rc = put(txn, ar->by_fitness, fkey, sizeof(fkey), "", 0, 0, "writing the fitness index", err);
	if (!rc)
		rc = put(txn, ar->by_verdict, vkey, sizeof(vkey), "", 0, 0, "writing the verdict index", err);
	return rc;
}

/*
 * The fastest ok candidate of each benchmark workload, kept beside the
 * fitness elites (meta "workload_best": {"<workload>": {"id", "median_us",
 * "ref_median_us"}}): what a per-shape dispatch is made of.  A record's time
 * there is ks_record_ranked_us(): the slower of its two timings once it was
 * confirmed.  The first of equal times stays.
 */
static int update_workload_best(struct ks_archive *ar, MDB_txn *txn, const json_t *doc, uint64_t id,
				struct ks_error *err)
{
	const json_t *workloads = json_object_get(doc, "workloads"), *w;
	json_t *best = NULL;
	MDB_val val;
	size_t i;
	int rc, changed = 0;

	if (!json_array_size(workloads))
		return 0;
	rc = ks_archive_db_get(txn, ar->meta, KS_META_WORKLOAD_BEST, strlen(KS_META_WORKLOAD_BEST), &val,
			       "reading the per-workload bests", err);
	if (rc < 0)
		return -1;
	best = rc == 0 ? parse_value(&val) : json_object();
	if (!json_is_object(best)) {
		json_decref(best);
		return ks_fail(err, "%s: the per-workload bests are not valid JSON: the archive is damaged",
			       ar->path);
	}
	json_array_foreach(workloads, i, w)
	{
		const char *wid = json_string_value(json_object_get(w, "id"));
		double median = ks_record_ranked_us(doc, w);
		const json_t *cur;

		if (!(median > 0))
			continue;
		cur = json_object_get(best, wid);
		if (cur && json_number_value(json_object_get(cur, "median_us")) <= median)
			continue;
		json_object_set_new(best, wid,
				    json_pack("{s:I, s:f, s:f}", "id", (json_int_t)id, "median_us", median,
					      "ref_median_us",
					      json_number_value(json_object_get(w, "ref_median_us"))));
		changed = 1;
	}
	rc = changed ? put_json(txn, ar->meta, KS_META_WORKLOAD_BEST, strlen(KS_META_WORKLOAD_BEST), best, 0,
				"writing the per-workload bests", err)
		     : 0;
	json_decref(best);
	return rc;
}

int ks_archive_insert_txn(struct ks_archive *ar, MDB_txn *txn, struct ks_counters *c, const json_t *record,
			  const char *source, uint64_t id, struct ks_archive_insert_result *res,
			  struct ks_error *err)
{
	unsigned char hash[KS_SHA256_LEN];
	char hash_hex[KS_SHA256_HEX_LEN + 1];
	enum ks_verdict verdict;
	double fitness, old_best = c->best_fitness, old_qd = c->qd_score;
	uint64_t old_cells = c->cells_filled, cell;
	json_t *doc;
	int rc;

	memset(res, 0, sizeof(*res));
	res->cell = -1;
	if (ks_archive_check_record(record, err) < 0)
		return -1;
	res->id = id ? id : c->next_id;
	ks_sha256(source, strlen(source), hash);
	ks_hex(hash, sizeof(hash), hash_hex);
	/* everything below reads the stored document, whose numbers are what a reader will see */
	doc = stored_record(ar, record, res->id, hash_hex);
	record_verdict(doc, &verdict);
	fitness = ks_archive_record_fitness(doc, verdict);
	rc = store(ar, txn, c, doc, source, verdict, fitness, res, err);
	if (rc)
		goto cleanup;
	/* an imported record whose sanitizer check failed stays demoted */
	if (verdict != KS_VERDICT_OK || ks_record_sanitizer_failed(doc)) {
		res->outcome = KS_ARCHIVE_NOT_ELIGIBLE;
	} else {
		if (ks_archive_cell_of(ar, json_object_get(doc, "descriptors"), &cell, res->why,
				       sizeof(res->why))) {
			res->outcome = KS_ARCHIVE_OUTSIDE_GRID;
		} else {
			res->cell = (int64_t)cell;
			rc = place(ar, txn, c, res->id, fitness, res, err);
			if (rc)
				goto cleanup;
		}
		if (!c->best_id || fitness > c->best_fitness) {
			c->best_id = res->id;
			c->best_fitness = fitness;
		}
		rc = update_workload_best(ar, txn, doc, res->id, err);
		if (rc)
			goto cleanup;
	}
	c->candidates++;

	c->by_verdict[verdict]++;
	if (res->id >= c->next_id)
		c->next_id = res->id + 1;
	if (c->best_fitness != old_best || c->qd_score != old_qd || c->cells_filled != old_cells)
		rc = append_history(ar, txn, c, err);
cleanup:
	json_decref(doc);
	return rc;
}

struct insert_ctx {
	const json_t *record;
	const char *source;
	struct ks_archive_insert_result *res;
};

static int insert_step(struct ks_archive *ar, MDB_txn *txn, void *ctx_, struct ks_error *err)
{
	struct insert_ctx *ctx = ctx_;
	struct ks_counters c;
	int rc;

	if (ks_counters_load(ar, txn, &c, err) < 0)
		return -1;
	rc = ks_archive_insert_txn(ar, txn, &c, ctx->record, ctx->source, 0, ctx->res, err);
	if (rc)
		return rc;
	return ks_counters_store(ar, txn, &c, err);
}

int ks_archive_insert(struct ks_archive *ar, const json_t *record, const char *source,
		      struct ks_archive_insert_result *result, struct ks_error *err)
{
	struct ks_archive_insert_result scratch;
	struct insert_ctx ctx = { record, source, result ? result : &scratch };

	if (!source)
		return ks_fail(err, "inserting a candidate needs its source text");
	/* refuse a bad record before taking the write lock */
	if (ks_archive_check_record(record, err) < 0)
		return -1;
	return ks_archive_write(ar, insert_step, &ctx, err);
}

/* Profiles: the one change a stored record ever sees */

/*
 * The best ok record of cell other than skip, read from the fitness
 * index (best first, then lowest id: the rule place() keeps), or *id 0
 * when the cell holds no other.  Reads records until one falls in the
 * cell: the price of a grid whose cells can lose their elite, paid only
 * when a profile moves an elite away.
 */
static int cell_successor(struct ks_archive *ar, MDB_txn *txn, uint64_t cell, uint64_t skip, uint64_t *id,
			  double *fitness, struct ks_error *err)
{
	unsigned char start[1] = { (unsigned char)KS_VERDICT_OK };
	MDB_val key = { sizeof(start), start }, val, rec;
	MDB_cursor *cur;
	int rc, ret = -1;

	*id = 0;
	*fitness = 0;
	rc = mdb_cursor_open(txn, ar->by_fitness, &cur);
	if (rc)
		return ks_archive_lmdb_fail(err, rc, "reading the fitness index");
	for (rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE); !rc;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		const unsigned char *k = key.mv_data;
		uint64_t rid, rcell;
		unsigned char rkey[8];
		json_t *record;
		char why[256];
		int in_cell;

		if (key.mv_size != 17 || k[0] != (unsigned char)KS_VERDICT_OK)
			break;
		rid = ks_be64_get(k + 9);
		if (rid == skip)
			continue;
		ks_be64_put(rkey, rid);
		rc = ks_archive_db_get(txn, ar->candidates, rkey, 8, &rec, "reading a record", err);
		if (rc < 0)
			goto cleanup;
		if (rc == 1 || ks_archive_parse_record(rid, &rec, &record, err) < 0) {
			if (rc == 1)
				ks_fail(err, "%s: the fitness index names record #%llu, which is missing",
					ar->path, (unsigned long long)rid);
			goto cleanup;
		}
		in_cell = !ks_archive_cell_of(ar, json_object_get(record, "descriptors"), &rcell, why,
					      sizeof(why)) &&
			  rcell == cell && !ks_record_sanitizer_failed(record);
		if (in_cell) {
			*id = rid;
			*fitness = json_number_value(json_object_get(record, "fitness"));
		}
		json_decref(record);
		if (in_cell)
			break;
	}
	if (rc && rc != MDB_NOTFOUND) {
		ks_archive_lmdb_fail(err, rc, "reading the fitness index");
		goto cleanup;
	}
	ret = 0;
cleanup:
	mdb_cursor_close(cur);
	return ret;
}

/*
 * Record id leaves cell, where it was the elite at fitness: the next best
 * record of the cell takes it over, or the cell empties.  Either way the
 * QD-score loses what the elite brought beyond its successor: the one
 * way it can go down.
 */
static int leave_cell(struct ks_archive *ar, MDB_txn *txn, struct ks_counters *c, uint64_t cell, uint64_t id,
		      double fitness, uint64_t *successor, struct ks_error *err)
{
	unsigned char key[8], value[16];
	double next_fitness;
	MDB_val k = { 8, key };
	int rc;

	if (cell_successor(ar, txn, cell, id, successor, &next_fitness, err) < 0)
		return -1;
	ks_be64_put(key, cell);
	if (*successor) {
		ks_be64_put(value, *successor);
		ks_be64_put(value + 8, double_bits(next_fitness));
		c->qd_score -= fitness - next_fitness;
		return put(txn, ar->grid, key, 8, value, 16, 0, "writing the grid", err);
	}
	rc = mdb_del(txn, ar->grid, &k, NULL);
	if (rc)
		return ks_archive_lmdb_fail(err, rc, "writing the grid");
	c->cells_filled--;
	c->qd_score -= fitness - ar->qd_offset;
	return 0;
}

/* Is record id the elite of cell? */
static int is_elite_of(struct ks_archive *ar, MDB_txn *txn, uint64_t cell, uint64_t id, int *elite,
		       struct ks_error *err)
{
	unsigned char key[8];
	MDB_val val;
	int rc;

	*elite = 0;
	ks_be64_put(key, cell);
	rc = ks_archive_db_get(txn, ar->grid, key, 8, &val, "reading the grid", err);
	if (rc < 0)
		return -1;
	*elite = rc == 0 && val.mv_size == 16 && ks_be64_get(val.mv_data) == id;
	return 0;
}

static int check_profile(const json_t *profile, struct ks_error *err)
{
	if (!json_is_object(profile))
		return ks_fail(err, "a profile must be a JSON object");
	for (int d = 0; d < KS_DESC_COUNT; d++) {
		const char *name = ks_descriptor_name((enum ks_descriptor)d);
		const json_t *v = json_object_get(profile, name);

		if (!ks_descriptor_is_measured((enum ks_descriptor)d) || !v)
			continue;
		if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0)
			return ks_fail(err, "profile.%s: expected a number >= 0", name);
	}
	return 0;
}

/* Record id as stored, parsed, with its verdict: what the set_*_step()s below change. */
static int read_stored_record(struct ks_archive *ar, MDB_txn *txn, uint64_t id, json_t **doc,
			      enum ks_verdict *verdict, struct ks_error *err)
{
	unsigned char key[8];
	MDB_val val;
	int rc;

	*doc = NULL;
	ks_be64_put(key, id);
	rc = ks_archive_db_get(txn, ar->candidates, key, 8, &val, "reading the record", err);
	if (rc)
		return rc < 0 ? -1
			      : ks_fail(err, "no candidate #%llu in %s", (unsigned long long)id, ar->path);
	if (ks_archive_parse_record(id, &val, doc, err) < 0)
		return -1;
	if (record_verdict(*doc, verdict) < 0) {
		json_decref(*doc);
		*doc = NULL;
		return ks_fail(err, "record #%llu has no verdict: the archive is damaged",
			       (unsigned long long)id);
	}
	return 0;
}

/* Record id stored again, as doc now says. */
static int write_stored_record(struct ks_archive *ar, MDB_txn *txn, uint64_t id, const json_t *doc,
			       struct ks_error *err)
{
	unsigned char key[8];
	char *text = json_dumps(doc, KS_ARCHIVE_RECORD_JSON);
	int rc;

	ks_be64_put(key, id);
	rc = put(txn, ar->candidates, key, 8, text, strlen(text), 0, "writing the record", err);
	free(text);
	return rc;
}

struct profile_ctx {
	uint64_t id;
	const json_t *profile;
	struct ks_archive_profile_result *res;
};

static int set_profile_step(struct ks_archive *ar, MDB_txn *txn, void *ctx_, struct ks_error *err)
{
	struct profile_ctx *ctx = ctx_;
	struct ks_archive_profile_result *res = ctx->res;
	struct ks_archive_insert_result placed;
	struct ks_counters c;
	json_t *doc = NULL, *descriptors, *profile;
	enum ks_verdict verdict;
	uint64_t old_cell = 0, new_cell = 0;
	double fitness, old_best, old_qd;
	uint64_t old_cells;
	int had_cell, has_cell, elite, rc = -1;

	memset(res, 0, sizeof(*res));
	res->old_cell = res->cell = -1;
	res->outcome = KS_ARCHIVE_NOT_ADDED;
	if (ks_counters_load(ar, txn, &c, err) < 0)
		return -1;
	old_best = c.best_fitness;
	old_qd = c.qd_score;
	old_cells = c.cells_filled;
	if (read_stored_record(ar, txn, ctx->id, &doc, &verdict, err) < 0)
		return -1;
	rc = -1;
	had_cell = !ks_archive_cell_of(ar, json_object_get(doc, "descriptors"), &old_cell, res->why,
				       sizeof(res->why));

	/* the profile in the record, and its measurements in place of the stand-ins */
	profile = json_deep_copy(ctx->profile);
	normalize_reals(profile);
	json_object_set_new(doc, "profile", profile);
	descriptors = json_object_get(doc, "descriptors");
	if (!json_is_object(descriptors)) {
		descriptors = json_object();
		json_object_set_new(doc, "descriptors", descriptors);
	}
	for (int d = 0; d < KS_DESC_COUNT; d++) {
		const char *name = ks_descriptor_name((enum ks_descriptor)d);
		const json_t *v = json_object_get(profile, name);

		if (ks_descriptor_is_measured((enum ks_descriptor)d) && json_is_number(v))
			json_object_set_new(descriptors, name, json_real(json_number_value(v)));
	}
	rc = write_stored_record(ar, txn, ctx->id, doc, err);
	if (rc)
		goto cleanup;

	rc = -1;
	if (verdict != KS_VERDICT_OK || ks_record_sanitizer_failed(doc)) {
		res->outcome = KS_ARCHIVE_NOT_ELIGIBLE;
		rc = 0;
		goto cleanup;
	}
	fitness = ks_archive_record_fitness(doc, verdict);
	has_cell = !ks_archive_cell_of(ar, descriptors, &new_cell, res->why, sizeof(res->why));
	res->old_cell = had_cell ? (int64_t)old_cell : -1;
	res->cell = has_cell ? (int64_t)new_cell : -1;
	if (res->old_cell == res->cell) {
		res->why[0] = '\0';
		rc = 0;
		goto cleanup;
	}
	res->moved = 1;
	if (had_cell) {
		if (is_elite_of(ar, txn, old_cell, ctx->id, &elite, err) < 0)
			goto cleanup;
		if (elite) {
			res->left_elite = 1;
			rc = leave_cell(ar, txn, &c, old_cell, ctx->id, fitness, &res->successor_id, err);
			if (rc)
				goto cleanup;
			rc = -1;
		}
	}
	if (!has_cell) {
		res->outcome = KS_ARCHIVE_OUTSIDE_GRID;
	} else {
		memset(&placed, 0, sizeof(placed));
		placed.cell = (int64_t)new_cell;
		rc = place(ar, txn, &c, ctx->id, fitness, &placed, err);
		if (rc)
			goto cleanup;
		rc = -1;
		res->outcome = placed.outcome;
		res->replaced_id = placed.replaced_id;
		res->replaced_fitness = placed.replaced_fitness;
		res->why[0] = '\0';
	}
	rc = 0;
	if (c.best_fitness != old_best || c.qd_score != old_qd || c.cells_filled != old_cells)
		rc = append_history(ar, txn, &c, err);
	if (!rc)
		rc = ks_counters_store(ar, txn, &c, err);
cleanup:
	json_decref(doc);
	return rc;
}

int ks_archive_set_profile(struct ks_archive *ar, uint64_t id, const json_t *profile,
			   struct ks_archive_profile_result *result, struct ks_error *err)
{
	struct ks_archive_profile_result scratch;
	struct profile_ctx ctx = { id, profile, result ? result : &scratch };

	if (check_profile(profile, err) < 0)
		return -1;
	return ks_archive_write(ar, set_profile_step, &ctx, err);
}

/* Sanitizer checks: demotion and its undoing */

/*
 * Call visit on every ok record that may be an elite (its sanitizer check
 * did not fail), best fitness first (the fitness index's order: of equal
 * fitness, the lower id first); visit returns non-zero to stop.
 */
static int each_eligible(struct ks_archive *ar, MDB_txn *txn,
			 int (*visit)(uint64_t id, const json_t *record, void *ctx), void *ctx,
			 struct ks_error *err)
{
	unsigned char start[1] = { (unsigned char)KS_VERDICT_OK };
	MDB_val key = { sizeof(start), start }, val, rec;
	MDB_cursor *cur;
	int rc, ret = -1;

	rc = mdb_cursor_open(txn, ar->by_fitness, &cur);
	if (rc)
		return ks_archive_lmdb_fail(err, rc, "reading the fitness index");
	for (rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE); !rc;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		const unsigned char *k = key.mv_data;
		unsigned char rkey[8];
		json_t *record;
		uint64_t rid;
		int stop = 0;

		if (key.mv_size != 17 || k[0] != (unsigned char)KS_VERDICT_OK)
			break;
		rid = ks_be64_get(k + 9);
		ks_be64_put(rkey, rid);
		rc = ks_archive_db_get(txn, ar->candidates, rkey, 8, &rec, "reading a record", err);
		if (rc < 0)
			goto cleanup;
		if (rc == 1 || ks_archive_parse_record(rid, &rec, &record, err) < 0) {
			if (rc == 1)
				ks_fail(err, "%s: the fitness index names record #%llu, which is missing",
					ar->path, (unsigned long long)rid);
			goto cleanup;
		}
		if (!ks_record_sanitizer_failed(record))
			stop = visit(rid, record, ctx);
		json_decref(record);
		if (stop)
			break;
	}
	if (rc && rc != MDB_NOTFOUND) {
		ks_archive_lmdb_fail(err, rc, "reading the fitness index");
		goto cleanup;
	}
	ret = 0;
cleanup:
	mdb_cursor_close(cur);
	return ret;
}

struct best_ctx {
	uint64_t id;
	double fitness;
};

static int first_best(uint64_t id, const json_t *record, void *ctx_)
{
	struct best_ctx *ctx = ctx_;

	ctx->id = id;
	ctx->fitness = json_number_value(json_object_get(record, "fitness"));
	return 1;
}

/* The per-workload bests made again from the records (insert's rule: fastest, then the lower id). */
static int rebuild_workload_best(uint64_t id, const json_t *record, void *ctx_)
{
	json_t *best = ctx_;
	const json_t *w;
	size_t i;

	json_array_foreach(json_object_get(record, "workloads"), i, w)
	{
		const char *wid = json_string_value(json_object_get(w, "id"));
		double median = ks_record_ranked_us(record, w);
		const json_t *cur;
		double cur_median;

		if (!(median > 0))
			continue;
		cur = json_object_get(best, wid);
		cur_median = json_number_value(json_object_get(cur, "median_us"));
		if (cur &&
		    (cur_median < median ||
		     (cur_median == median && (uint64_t)json_integer_value(json_object_get(cur, "id")) < id)))
			continue;
		json_object_set_new(best, wid,
				    json_pack("{s:I, s:f, s:f}", "id", (json_int_t)id, "median_us", median,
					      "ref_median_us",
					      json_number_value(json_object_get(w, "ref_median_us"))));
	}
	return 0;
}

/* How many workloads id is the best of in bests. */
static size_t workloads_held(const json_t *bests, uint64_t id)
{
	const char *wid;
	json_t *b;
	size_t n = 0;

	json_object_foreach((json_t *)bests, wid, b) n +=
		(uint64_t)json_integer_value(json_object_get(b, "id")) == id;
	return n;
}

static int load_workload_best(struct ks_archive *ar, MDB_txn *txn, json_t **best, struct ks_error *err)
{
	MDB_val val;
	int rc = ks_archive_db_get(txn, ar->meta, KS_META_WORKLOAD_BEST, strlen(KS_META_WORKLOAD_BEST), &val,
				   "reading the per-workload bests", err);

	if (rc < 0)
		return -1;
	*best = rc == 0 ? parse_value(&val) : json_object();
	if (!json_is_object(*best)) {
		json_decref(*best);
		*best = NULL;
		return ks_fail(err, "%s: the per-workload bests are not valid JSON: the archive is damaged",
			       ar->path);
	}
	return 0;
}

struct sanitizer_ctx {
	uint64_t id;
	const json_t *sanitizer;
	struct ks_archive_sanitizer_result *res;
};

static int set_sanitizer_step(struct ks_archive *ar, MDB_txn *txn, void *ctx_, struct ks_error *err)
{
	struct sanitizer_ctx *ctx = ctx_;
	struct ks_archive_sanitizer_result *res = ctx->res;
	struct ks_counters c;
	struct best_ctx top = { 0, 0 };
	json_t *doc = NULL, *sanitizer, *old_best = NULL, *new_best = NULL;
	enum ks_verdict verdict;
	uint64_t cell, old_cells;
	double fitness, old_best_fitness, old_qd;
	int was_failed, now_failed, elite, rc;
	char why[256];

	memset(res, 0, sizeof(*res));
	res->cell = -1;
	if (ks_counters_load(ar, txn, &c, err) < 0)
		return -1;
	old_best_fitness = c.best_fitness;
	old_qd = c.qd_score;
	old_cells = c.cells_filled;
	if (read_stored_record(ar, txn, ctx->id, &doc, &verdict, err) < 0)
		return -1;
	rc = -1;
	was_failed = ks_record_sanitizer_failed(doc);
	sanitizer = json_deep_copy(ctx->sanitizer);
	normalize_reals(sanitizer);
	json_object_set_new(doc, "sanitizer", sanitizer);
	now_failed = ks_record_sanitizer_failed(doc);
	rc = write_stored_record(ar, txn, ctx->id, doc, err);
	if (rc || verdict != KS_VERDICT_OK || was_failed == now_failed)
		goto cleanup; /* nothing moves: the grid and the bests stand */

	rc = -1;
	fitness = ks_archive_record_fitness(doc, verdict);
	if (!ks_archive_cell_of(ar, json_object_get(doc, "descriptors"), &cell, why, sizeof(why)))
		res->cell = (int64_t)cell;
	if (load_workload_best(ar, txn, &old_best, err) < 0)
		goto cleanup;
	if (now_failed) {
		res->demoted = 1;
		res->was_best = c.best_id == ctx->id;
		res->workloads_lost = workloads_held(old_best, ctx->id);
		if (res->cell >= 0) {
			if (is_elite_of(ar, txn, cell, ctx->id, &elite, err) < 0)
				goto cleanup;
			if (elite) {
				res->left_elite = 1;
				if (leave_cell(ar, txn, &c, cell, ctx->id, fitness, &res->successor_id, err))
					goto cleanup;
			}
		}
	} else {
		struct ks_archive_insert_result placed;

		res->promoted = 1;
		if (res->cell >= 0) {
			memset(&placed, 0, sizeof(placed));
			placed.cell = res->cell;
			if (place(ar, txn, &c, ctx->id, fitness, &placed, err))
				goto cleanup;
		}
	}
	/* the best and the per-workload bests, from the records that may hold them */
	if (each_eligible(ar, txn, first_best, &top, err) < 0)
		goto cleanup;
	c.best_id = top.id;
	c.best_fitness = top.id ? top.fitness : 0;
	res->best_id = c.best_id;
	new_best = json_object();
	if (each_eligible(ar, txn, rebuild_workload_best, new_best, err) < 0)
		goto cleanup;
	if (res->promoted)
		res->workloads_gained = workloads_held(new_best, ctx->id);
	if (put_json(txn, ar->meta, KS_META_WORKLOAD_BEST, strlen(KS_META_WORKLOAD_BEST), new_best, 0,
		     "writing the per-workload bests", err))
		goto cleanup;
	rc = 0;
	if (c.best_fitness != old_best_fitness || c.qd_score != old_qd || c.cells_filled != old_cells)
		rc = append_history(ar, txn, &c, err);
	if (!rc)
		rc = ks_counters_store(ar, txn, &c, err);
cleanup:
	json_decref(old_best);
	json_decref(new_best);
	json_decref(doc);
	return rc;
}

int ks_archive_set_sanitizer(struct ks_archive *ar, uint64_t id, const json_t *sanitizer,
			     struct ks_archive_sanitizer_result *result, struct ks_error *err)
{
	struct ks_archive_sanitizer_result scratch;
	struct sanitizer_ctx ctx = { id, sanitizer, result ? result : &scratch };
	const char *status = json_string_value(json_object_get(sanitizer, "status"));

	if (!json_is_object(sanitizer) || !status || (strcmp(status, "clean") && strcmp(status, "failed")))
		return ks_fail(err,
			       "a sanitizer check must be a JSON object whose \"status\" is \"clean\" or "
			       "\"failed\"");
	return ks_archive_write(ar, set_sanitizer_step, &ctx, err);
}

struct confirmation_ctx {
	uint64_t id;
	const json_t *confirmation;
	struct ks_archive_confirmation_result *res;
};

static int set_confirmation_step(struct ks_archive *ar, MDB_txn *txn, void *ctx_, struct ks_error *err)
{
	struct confirmation_ctx *ctx = ctx_;
	struct ks_archive_confirmation_result *res = ctx->res;
	json_t *doc = NULL, *confirmation, *old_best = NULL, *new_best = NULL;
	enum ks_verdict verdict;
	size_t before;
	int rc;

	memset(res, 0, sizeof(*res));
	if (read_stored_record(ar, txn, ctx->id, &doc, &verdict, err) < 0)
		return -1;
	rc = -1;
	confirmation = json_deep_copy(ctx->confirmation);
	normalize_reals(confirmation);
	json_object_set_new(doc, "confirmation", confirmation);
	rc = write_stored_record(ar, txn, ctx->id, doc, err);
	if (rc || verdict != KS_VERDICT_OK || ks_record_sanitizer_failed(doc))
		goto cleanup; /* no best before, none after */

	/* the per-workload bests, again from the records that may hold them */
	rc = -1;
	if (load_workload_best(ar, txn, &old_best, err) < 0)
		goto cleanup;
	new_best = json_object();
	if (each_eligible(ar, txn, rebuild_workload_best, new_best, err) < 0)
		goto cleanup;
	before = workloads_held(old_best, ctx->id);
	res->workloads_held = workloads_held(new_best, ctx->id);
	res->workloads_lost = before > res->workloads_held ? before - res->workloads_held : 0;
	rc = put_json(txn, ar->meta, KS_META_WORKLOAD_BEST, strlen(KS_META_WORKLOAD_BEST), new_best, 0,
		      "writing the per-workload bests", err);
cleanup:
	json_decref(old_best);
	json_decref(new_best);
	json_decref(doc);
	return rc;
}

int ks_archive_set_confirmation(struct ks_archive *ar, uint64_t id, const json_t *confirmation,
				struct ks_archive_confirmation_result *result, struct ks_error *err)
{
	struct ks_archive_confirmation_result scratch;
	struct confirmation_ctx ctx = { id, confirmation, result ? result : &scratch };
	const char *status = json_string_value(json_object_get(confirmation, "status"));

	if (!json_is_object(confirmation) || !status || (strcmp(status, "ok") && strcmp(status, "failed")))
		return ks_fail(err, "a confirmation must be a JSON object whose \"status\" is \"ok\" or "
				    "\"failed\"");
	if (!strcmp(status, "ok") && !json_is_object(json_object_get(confirmation, "times_us")))
		return ks_fail(err, "a confirmation that is \"ok\" needs its \"times_us\": {\"<workload>\": "
				    "microseconds}");
	return ks_archive_write(ar, set_confirmation_step, &ctx, err);
}

/* Small stores: state, prompts, compile cache */

struct blob_put_ctx {
	MDB_dbi dbi;
	const void *key;
	size_t key_len;
	const void *data;
	size_t size;
};

static int blob_put_step(struct ks_archive *ar, MDB_txn *txn, void *ctx_, struct ks_error *err)
{
	struct blob_put_ctx *ctx = ctx_;

	(void)ar;
	return put(txn, ctx->dbi, ctx->key, ctx->key_len, ctx->data, ctx->size, 0, "writing", err);
}

static int blob_put(struct ks_archive *ar, MDB_dbi dbi, const void *key, size_t key_len, const void *data,
		    size_t size, struct ks_error *err)
{
	struct blob_put_ctx ctx = { dbi, key, key_len, data, size };

	if (!key_len || key_len > 400)
		return ks_fail(err, "archive keys are 1 to 400 bytes long (got %zu)", key_len);
	return ks_archive_write(ar, blob_put_step, &ctx, err);
}

static int blob_get(struct ks_archive *ar, MDB_dbi dbi, const void *key, size_t key_len, void **data,
		    size_t *size, struct ks_error *err)
{
	MDB_txn *txn;
	MDB_val val;
	int rc;

	*data = NULL;
	*size = 0;
	if (!key_len || key_len > 400)
		return ks_fail(err, "archive keys are 1 to 400 bytes long (got %zu)", key_len);
	if (ks_archive_txn_begin(ar, 1, &txn, err) < 0)
		return -1;
	rc = ks_archive_db_get(txn, dbi, key, key_len, &val, "reading", err);
	if (rc == 0) {
		*data = ks_malloc(val.mv_size + 1);
		memcpy(*data, val.mv_data, val.mv_size);
		((char *)*data)[val.mv_size] = '\0'; /* text blobs come back NUL-terminated */
		*size = val.mv_size;
	}
	ks_archive_txn_end(ar, txn);
	return rc < 0 ? -1 : 0;
}

int ks_archive_state_put(struct ks_archive *ar, const char *key, const void *data, size_t size,
			 struct ks_error *err)
{
	return blob_put(ar, ar->state, key, strlen(key), data, size, err);
}

int ks_archive_state_get(struct ks_archive *ar, const char *key, void **data, size_t *size,
			 struct ks_error *err)
{
	return blob_get(ar, ar->state, key, strlen(key), data, size, err);
}

int ks_archive_state_each(struct ks_archive *ar, const char *prefix,
			  int (*visit)(const char *key, const void *data, size_t size, void *ctx), void *ctx,
			  struct ks_error *err)
{
	size_t plen = strlen(prefix);
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val key = { plen, (void *)prefix }, val;
	int rc, ret = 0;

	if (!plen || plen > 400)
		return ks_fail(err, "archive keys are 1 to 400 bytes long (got a prefix of %zu)", plen);
	if (ks_archive_txn_begin(ar, 1, &txn, err) < 0)
		return -1;
	rc = mdb_cursor_open(txn, ar->state, &cur);
	if (rc) {
		ks_archive_txn_end(ar, txn);
		return ks_archive_lmdb_fail(err, rc, "reading the run state");
	}
	for (rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		char name[401];

		if (key.mv_size < plen || key.mv_size > 400 || memcmp(key.mv_data, prefix, plen))
			break;
		memcpy(name, key.mv_data, key.mv_size);
		name[key.mv_size] = '\0';
		if ((ret = visit(name, val.mv_data, val.mv_size, ctx)) != 0)
			break;
	}
	if (rc && rc != MDB_NOTFOUND && ret == 0)
		ret = ks_archive_lmdb_fail(err, rc, "reading the run state");
	mdb_cursor_close(cur);
	ks_archive_txn_end(ar, txn);
	return ret < 0 ? -1 : 0;
}

int ks_archive_cache_put(struct ks_archive *ar, const char *key, const void *data, size_t size,
			 struct ks_error *err)
{

	return blob_put(ar, ar->cache, key, strlen(key), data, size, err);
}

int ks_archive_cache_get(struct ks_archive *ar, const char *key, void **data, size_t *size,
			 struct ks_error *err)
{
	return blob_get(ar, ar->cache, key, strlen(key), data, size, err);
}

int ks_archive_prompt_put(struct ks_archive *ar, uint64_t id, const json_t *prompt, struct ks_error *err)
{
	unsigned char key[8];
	char *text;
	int ret;

	if (!json_is_object(prompt))
		return ks_fail(err, "a prompt must be a JSON object");
	ks_be64_put(key, id);
	text = json_dumps(prompt, JSON_COMPACT);
	ret = blob_put(ar, ar->prompts, key, 8, text, strlen(text), err);
	free(text);
	return ret;
}

int ks_archive_prompt_get(struct ks_archive *ar, uint64_t id, json_t **prompt, struct ks_error *err)
{
	unsigned char key[8];
	void *data;
	size_t size;

	*prompt = NULL;
	ks_be64_put(key, id);
	if (blob_get(ar, ar->prompts, key, 8, &data, &size, err) < 0)
		return -1;
	if (data) {
		*prompt = json_loadb(data, size, 0, NULL);
		free(data);
		if (!*prompt)
			return ks_fail(err, "prompt %llu is not valid JSON: the archive is damaged",
				       (unsigned long long)id);
	}
	return 0;
}
