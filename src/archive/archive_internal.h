/*
 * archive_internal.h - what archive.c shares with archive_json.c (export,
 * import) and archive_verify.c: the handle's layout, the counters kept in
 * the meta database, the transaction loop that grows the map, and the
 * insertion of one record inside a caller's transaction.  Not installed;
 * nothing outside the archive module includes it.
 */
#ifndef KSEARCH_ARCHIVE_INTERNAL_H
#define KSEARCH_ARCHIVE_INTERNAL_H

#include <lmdb.h>

#include "ksearch/archive/archive.h"
#include "ksearch/base/sha256.h"

/* A write step returns this when the map is full: grow it and run the step again. */
#define KS_ARCHIVE_GROW 1

struct ks_archive {
	MDB_env *env;
	MDB_dbi meta;	     /* schema_version, info, counters */
	MDB_dbi candidates;  /* u64 id -> record JSON */
	MDB_dbi sources;     /* sha256 -> u64 offset, u64 length in the source stream */
	MDB_dbi source_text; /* u64 chunk -> the source stream's bytes, chunk_bytes a chunk */
	MDB_dbi dedup;	     /* sha256(source hash, params) -> u64 id */
	MDB_dbi grid;	     /* u64 cell -> u64 id, f64 fitness */
	MDB_dbi by_fitness;  /* u8 verdict, u64 fitness key, u64 id -> "" */
	MDB_dbi by_verdict;  /* u8 verdict, u64 id -> "" */
	MDB_dbi history;     /* u64 evals -> point JSON */
	MDB_dbi prompts;     /* u64 id -> prompt JSON */
	MDB_dbi cache;	     /* key text -> blob */
	MDB_dbi state;	     /* key text -> blob */
	char *path;
	char *op;
	char *gpu;
	struct ks_grid_axis *axes;
	size_t n_axes;
	uint64_t n_cells;
	double qd_offset;
	size_t chunk_bytes; /* fixed when the archive is created */
	unsigned flags;
	MDB_txn *pinned; /* ks_archive_pin(): every read uses this snapshot */
};

/* The meta key of the per-workload bests (written by ok inserts; see update_workload_best). */
#define KS_META_WORKLOAD_BEST "workload_best"

/* The meta "counters" value, read and written in every write transaction. */

struct ks_counters {
	uint64_t next_id;
	uint64_t candidates;
	uint64_t by_verdict[KS_VERDICT_COUNT];
	uint64_t sources;
	uint64_t source_bytes;
	uint64_t cells_filled;
	double qd_score;
	double best_fitness;
	uint64_t best_id;
};

/* Big-endian integers keep LMDB's byte order equal to numeric order. */
void ks_be64_put(unsigned char *out, uint64_t v);
uint64_t ks_be64_get(const unsigned char *in);

/* The fitness index's sort key: ascending keys are descending fitness. */
uint64_t ks_archive_fitness_key(double fitness);

/* Fail with "<what>: <LMDB's message>", in words for the common codes. */
int ks_archive_lmdb_fail(struct ks_error *err, int rc, const char *what);

/* mdb_get: 0 found, 1 absent, -1 an error (named with what). */
int ks_archive_db_get(MDB_txn *txn, MDB_dbi dbi, const void *k, size_t klen, MDB_val *val, const char *what,
		      struct ks_error *err);

/*
 * A transaction; a read one adopts a map another process grew.  A read
 * one is the pinned snapshot while ks_archive_pin() holds one: end read
 * transactions with ks_archive_txn_end(), which leaves that one open.
 */
int ks_archive_txn_begin(struct ks_archive *ar, int readonly, MDB_txn **txn, struct ks_error *err);
void ks_archive_txn_end(struct ks_archive *ar, MDB_txn *txn);

/*
 * Run step in a write transaction and commit it; when the map is full
 * (step returns KS_ARCHIVE_GROW, or the commit says so), abort, grow the
 * map and run step again from the start, so step must not keep state
 * from an aborted attempt.
 */
typedef int (*ks_archive_step)(struct ks_archive *ar, MDB_txn *txn, void *ctx, struct ks_error *err);
int ks_archive_write(struct ks_archive *ar, ks_archive_step step, void *ctx, struct ks_error *err);

int ks_counters_load(struct ks_archive *ar, MDB_txn *txn, struct ks_counters *c, struct ks_error *err);
/* Returns 0, -1 or KS_ARCHIVE_GROW. */
int ks_counters_store(struct ks_archive *ar, MDB_txn *txn, const struct ks_counters *c, struct ks_error *err);

/*
 * Insert one record inside txn, updating *c (the caller stores it).  id 0
 * takes c->next_id; import passes the file's id to keep it.  Returns 0,
 * -1 (nothing about the record is valid to store) or KS_ARCHIVE_GROW.
 */
int ks_archive_insert_txn(struct ks_archive *ar, MDB_txn *txn, struct ks_counters *c, const json_t *record,
			  const char *source, uint64_t id, struct ks_archive_insert_result *res,
			  struct ks_error *err);

/*
 * The source stream: every distinct source text, one after the other, cut
 * in chunks of ar->chunk_bytes (two fill an LMDB page exactly, where a
 * text stored whole would take a page of its own, half empty).
 * Append text at the stream's end (c->source_bytes) and set pointer to
 * its (offset, length); 0, -1 or KS_ARCHIVE_GROW.
 */
int ks_archive_source_append(struct ks_archive *ar, MDB_txn *txn, const struct ks_counters *c,
			     const char *text, size_t len, unsigned char pointer[16], struct ks_error *err);
/* The text a sources value points to, NUL-terminated; caller frees. */
int ks_archive_source_read(struct ks_archive *ar, MDB_txn *txn, const MDB_val *pointer, char **text,
			   size_t *len, struct ks_error *err);

/* Check a record's fields without writing (what insert would refuse). */
int ks_archive_check_record(const json_t *record, struct ks_error *err);

/* Canonical dedup key of (source hash, params). */
void ks_archive_dedup_key(const char *source_hash_hex, const json_t *params,
			  unsigned char out[KS_SHA256_LEN]);

/* The grid as JSON [{"descriptor", "edges"}], and back (checked). */
json_t *ks_grid_to_json(const struct ks_grid_axis *axes, size_t n);
int ks_grid_from_json(const json_t *json, struct ks_grid_axis **axes, size_t *n, struct ks_error *err);

/* The fitness a record counts with: its "fitness" when ok, else 0. */
double ks_archive_record_fitness(const json_t *record, enum ks_verdict verdict);

/* "2026-11-22T01:50:00Z" for now, into buf (at least 32 bytes). */
void ks_archive_now(char *buf, size_t size);

/* Parse a stored record; fails naming the id when it is not valid JSON. */
int ks_archive_parse_record(uint64_t id, const MDB_val *val, json_t **record, struct ks_error *err);
/* Parse a stored prompt; fails naming the id when it is not a JSON object. */
int ks_archive_parse_prompt(uint64_t id, const MDB_val *val, json_t **prompt, struct ks_error *err);

#endif
