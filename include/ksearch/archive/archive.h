/*
 * archive.h - the MAP-Elites archive: every candidate ever evaluated, the
 * grid of elites, the quality-diversity metrics, and the run's state, in
 * one LMDB environment per (operator, GPU model) at
 * <root>/<op key>/<gpu slug>/ (archive/README.md has the on-disk format).
 *
 * Promises:
 *  - One write transaction per result: a process killed at any moment
 *    leaves an archive where every insert that returned 0 is present and
 *    the counters, indexes and grid agree (ks_archive_verify() checks it).
 *  - Readers never block the writer and see a consistent snapshot; open
 *    them with KS_ARCHIVE_READONLY from any number of other processes.
 *  - The map grows by itself when full; stale reader slots of killed
 *    processes are cleared on open.
 *  - A damaged file is an error that says so (wrong schema version, not
 *    an LMDB file, truncated), not a crash.  LMDB does not checksum its
 *    pages: damage inside a page can go unnoticed until it is read.
 *  - Coverage, QD-score and best fitness are kept incrementally, so
 *    ks_archive_metrics() reads one small value, never the records.
 *
 * Rules for callers:
 *  - One writer per archive (the coordinator).  LMDB serialises writers,
 *    so a second one is safe but waits.
 *  - A struct ks_archive is used by one thread at a time.
 *  - Do not carry an open archive across fork(): close it first, or
 *    start children before opening, or exec in the child.
 *
 * Records are stored as JSON objects (the fields are listed in
 * archive/README.md) and read as struct ks_record (record.h):
 * ks_archive_get_record(), ks_archive_best_record(),
 * ks_archive_foreach_record().  The functions that hand out the JSON
 * itself are for what must pass a record through unchanged (`archive show
 * --json`, `ls --json`, export and import, salvage, the record's own
 * checks); nothing else reads a record's fields from it.
 * Every json_t a function returns is a new reference the caller
 * decrefs; every json_t it takes is borrowed.  Strings and arrays it
 * returns are the caller's to free.
 */
#ifndef KSEARCH_ARCHIVE_H
#define KSEARCH_ARCHIVE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ksearch/base/error.h"
#include "ksearch/op/op.h"
#include "ksearch/op/verdict.h"

/* The version of the on-disk layout this build reads and writes. */
#define KS_ARCHIVE_SCHEMA_VERSION 1
/* The version of the JSON export format. */
#define KS_ARCHIVE_EXPORT_VERSION 1

struct ks_archive;
struct ks_record; /* record.h */

/*
 * jansson flags to print a record with: reals in a record have 15
 * significant digits (the archive rounds them on insert), and print
 * exactly so, without "0.32000000000000001" noise.
 */
#define KS_ARCHIVE_RECORD_JSON (JSON_COMPACT | JSON_REAL_PRECISION(15))

enum ks_archive_flags {
	KS_ARCHIVE_READONLY = 1 << 0, /* inspection: never writes, never blocks the writer */
	KS_ARCHIVE_CREATE = 1 << 1,   /* create the archive when it does not exist */
	/*
	 * Skip the fsync at each commit.  A killed process still leaves a
	 * consistent archive; a power loss may not.  For benchmarks and tests.
	 */
	KS_ARCHIVE_NOSYNC = 1 << 2,
};

struct ks_archive_options {
	unsigned flags; /* enum ks_archive_flags */
	/*
	 * The operator's grid.  Required to create an archive; when given for
	 * an existing one it must equal the stored grid (the bins define the
	 * cells).  Readers leave it NULL and get the stored grid.
	 */
	const struct ks_grid_axis *grid;
	size_t n_grid;
	/*
	 * New archives only: an elite adds (fitness - qd_offset) to the
	 * QD-score.  It must not exceed any fitness an ok candidate can have
	 * (fitness is a speedup, >= 0; the default 0 is right), which is what
	 * makes the score grow whenever a cell is filled or improved.
	 */
	double qd_offset;
	/*
	 * The map size to start with, in bytes (it grows when full); 0 for
	 * 64 MiB on a new archive and what the file holds on an existing one.
	 */
	size_t map_size;
};

/* "NVIDIA H200" -> "nvidia-h200": the folder name of a GPU model. Caller frees. */
char *ks_archive_gpu_slug(const char *gpu_model);

/* <root>/<op key>/<gpu slug>. Caller frees. */
char *ks_archive_dir(const char *root, const char *op_key, const char *gpu_model);

/*
 * Open the archive of (op_key, gpu_model) under root.  gpu_model may be
 * the model name or its slug when the archive exists already.  Fails
 * with a message naming the folder when there is no archive (without
 * KS_ARCHIVE_CREATE), when its schema version is not ours (naming the
 * version found), when its files are damaged, or when the grid differs.
 */
int ks_archive_open(struct ks_archive **out, const char *root, const char *op_key, const char *gpu_model,
		    const struct ks_archive_options *opts, struct ks_error *err);
/* Close and free; NULL is fine. */
void ks_archive_close(struct ks_archive *ar);

/*
 * Read every following call from one snapshot until ks_archive_unpin()
 * (or close): a report gathered with several calls while a search writes
 * sees one archive, whose counters, grid, history and records agree.
 * Writes are not affected.  A pinned snapshot keeps the pages it sees
 * from reuse, so the writer's file grows while it is held: hold it for
 * seconds, not for a run.
 */
int ks_archive_pin(struct ks_archive *ar, struct ks_error *err);
void ks_archive_unpin(struct ks_archive *ar);

/* What the archive was created for. Borrowed; valid until close. */
const char *ks_archive_op(const struct ks_archive *ar);
const char *ks_archive_gpu(const struct ks_archive *ar);
const char *ks_archive_path(const struct ks_archive *ar);
const struct ks_grid_axis *ks_archive_grid(const struct ks_archive *ar, size_t *n_axes);
/* Number of cells: the product of the axes' bin counts. */
uint64_t ks_archive_cells(const struct ks_archive *ar);

/* An archive found under a root folder. */
struct ks_archive_env {
	char *op;	/* op key (folder name) */
	char *gpu_slug; /* folder name */
	char *path;
};

/* Every <op>/<gpu>/data.mdb under root, sorted; none is not an error. */
int ks_archive_list_envs(const char *root, struct ks_archive_env **envs, size_t *n, struct ks_error *err);
void ks_archive_envs_free(struct ks_archive_env *envs, size_t n);

/* Inserting results */

enum ks_archive_outcome {
	KS_ARCHIVE_NEW_CELL,	 /* filled an empty cell */
	KS_ARCHIVE_IMPROVED,	 /* beat the cell's elite, which it replaced */
	KS_ARCHIVE_NOT_ADDED,	 /* the cell's elite is at least as good */
	KS_ARCHIVE_NOT_ELIGIBLE, /* verdict not ok: stored, never an elite */
	KS_ARCHIVE_OUTSIDE_GRID, /* ok, but a descriptor is missing or outside the edges */
};

const char *ks_archive_outcome_name(enum ks_archive_outcome outcome);

struct ks_archive_insert_result {
	uint64_t id;
	enum ks_archive_outcome outcome;
	int64_t cell;		 /* the cell it falls in, or -1 */
	uint64_t replaced_id;	 /* IMPROVED: the elite it replaced */
	double replaced_fitness; /* IMPROVED: and its fitness */
	int new_source;		 /* its source text was not in the archive before */
	char why[256];		 /* OUTSIDE_GRID: which descriptor, and the edges */
};

/*
 * Store one evaluated candidate in one transaction: the record (fields in
 * archive/README.md; "verdict" required, "fitness" and "descriptors"
 * required for ok), its source text (stored once per content hash), the
 * indexes, the grid and the metrics.  The archive assigns the id (from 1)
 * and sets "id", "source_hash", "op", "gpu" and, when absent, "created".
 * A record that breaks the format fails with the field named, and nothing
 * is written.
 */
int ks_archive_insert(struct ks_archive *ar, const json_t *record, const char *source,
		      struct ks_archive_insert_result *result, struct ks_error *err);

/*
 * Profiles (profile.h makes them): the one change a stored record ever
 * sees.  In one transaction the record gets "profile" (the object as
 * given: any fields, rounded like a record's), and each measured
 * descriptor the profile holds (dram_fraction, achieved_occupancy: op.h)
 * replaces the stand-in in its "descriptors".  An ok record whose cell
 * changes moves: if it was the elite of its old cell, the next best
 * record of that cell takes the cell over (or it empties, and the
 * QD-score and coverage go down: the only way they can), and it competes
 * for its new cell as an insert would.  Profiling again replaces the
 * profile.  Fails, changing nothing, when there is no such id or a
 * measured descriptor in the profile is not a number >= 0.
 */
struct ks_archive_profile_result {
	int64_t old_cell; /* the cell it was placed in before, or -1 */
	int64_t cell;	  /* the cell its descriptors give now, or -1 */
	int moved;	  /* cell differs from old_cell: the grid changed around it */
	/*
	 * moved: NEW_CELL, IMPROVED or NOT_ADDED in its new cell, or
	 * OUTSIDE_GRID (why says which descriptor); not moved: NOT_ADDED (or
	 * NOT_ELIGIBLE for a record that is not ok, which is never placed).
	 */
	enum ks_archive_outcome outcome;
	uint64_t replaced_id; /* IMPROVED: the elite it replaced */
	double replaced_fitness;
	int left_elite;	       /* it was the elite of old_cell */
	uint64_t successor_id; /* left_elite: the record that holds old_cell now; 0: the cell is empty */
	char why[256];
};

int ks_archive_set_profile(struct ks_archive *ar, uint64_t id, const json_t *profile,
			   struct ks_archive_profile_result *result, struct ks_error *err);

/*
 * Sanitizer checks (sanitize.h makes them): in one transaction the record
 * gets "sanitizer" (the object as given, with a "status").  A record whose
 * check failed is demoted: it keeps its verdict and fitness, but it is no
 * longer the elite of its cell (the next best record of the cell takes it
 * over, as when a profile moves a record, or the cell empties), nor the
 * archive's best, nor the best of any benchmark workload (the next
 * fastest takes each over); and no later insert, import or profile places
 * it again.  A record that failed and is checked clean again competes
 * for its cell and the bests as an insert would.  Checking again
 * replaces the check.  Fails, changing nothing, when there is no such id
 * or the object has no "status" of "clean" or "failed".
 */
struct ks_archive_sanitizer_result {
	int demoted;		 /* an ok record's check failed, and it had not failed before */
	int promoted;		 /* a record that had failed is clean now */
	int64_t cell;		 /* its cell, or -1 */
	int left_elite;		 /* demoted: it was the elite of cell */
	uint64_t successor_id;	 /* left_elite: the record that holds the cell now; 0: the cell is empty */
	int was_best;		 /* demoted: it was the archive's best */
	uint64_t best_id;	 /* the archive's best after the change (0: none) */
	size_t workloads_lost;	 /* demoted: the per-workload bests it held */
	size_t workloads_gained; /* promoted: the per-workload bests it holds now */
};

int ks_archive_set_sanitizer(struct ks_archive *ar, uint64_t id, const json_t *sanitizer,
			     struct ks_archive_sanitizer_result *result, struct ks_error *err);

/*
 * Confirmations (the search makes them: a new per-workload best is timed
 * again on fresh length splits, so that no best holds its place by a lucky
 * draw of them): in one transaction the record gets "confirmation" (the
 * object as given: "status" "ok" with "times_us": {"<workload>": microseconds},
 * or "failed" with "failed_as", the verdict it got, and "why") and the
 * per-workload bests are made again from the records, each ranked by ks_record_ranked_us() (record.h): the
 * slower of its two timings, and none for a record whose confirmation failed.  Its verdict, fitness, cell and
 * the grid stand.
 */
struct ks_archive_confirmation_result {
	size_t workloads_held; /* the workloads it is the best of now */
	size_t workloads_lost; /* those it was the best of before and is not now */
};

int ks_archive_set_confirmation(struct ks_archive *ar, uint64_t id, const json_t *confirmation,
				struct ks_archive_confirmation_result *result, struct ks_error *err);

/*
 * Was (source, params) evaluated already?  Sets *id to the first record
 * with that source text and those params (params compared as canonical
 * JSON, key order ignored; NULL means {}), or to 0 when none.
 */
int ks_archive_lookup_candidate(struct ks_archive *ar, const char *source, const json_t *params, uint64_t *id,
				struct ks_error *err);

/* Reading records */

/*
 * The record with this id, and (if source is not NULL) its source text.
 * *record is NULL (and *source too) when there is no such id.
 */
int ks_archive_get(struct ks_archive *ar, uint64_t id, json_t **record, char **source, struct ks_error *err);

/* The best ok candidate so far (highest fitness, first found on ties); NULL when none. */
int ks_archive_best(struct ks_archive *ar, json_t **record, char **source, struct ks_error *err);

enum ks_archive_sort {
	KS_ARCHIVE_SORT_FITNESS, /* best first, then by id */
	KS_ARCHIVE_SORT_TIME,	 /* newest first */
	KS_ARCHIVE_SORT_ID,	 /* oldest first */
};

struct ks_archive_query {
	int verdict; /* an enum ks_verdict, or -1 for every verdict */
	enum ks_archive_sort sort;
	uint64_t limit; /* 0 for no limit */
};

/*
 * Call fn on each record the query selects, in order, from one snapshot;
 * the record is borrowed for the call.  fn returns nonzero to stop.
 * Reads only the records it passes to fn (indexes give the order).
 */
int ks_archive_foreach(struct ks_archive *ar, const struct ks_archive_query *query,
		       int (*fn)(const json_t *record, void *ctx), void *ctx, struct ks_error *err);

/*
 * Typed: the record with this id parsed into rec (initialised by the
 * caller, released by the caller; rec->id is 0 when there is no such id),
 * and its source text when source is not NULL.  A record that does not
 * parse fails, naming the record and the field (record.h).
 */
int ks_archive_get_record(struct ks_archive *ar, uint64_t id, struct ks_record *rec, char **source,
			  struct ks_error *err);
/* The best ok candidate so far, typed; rec->id is 0 when there is none. */
int ks_archive_best_record(struct ks_archive *ar, struct ks_record *rec, char **source, struct ks_error *err);
/*
 * ks_archive_foreach(), typed: fn gets each record parsed, borrowed for
 * the call; it returns 0 to go on, > 0 to stop, < 0 to fail with err
 * filled (returned as -1).  A record that does not parse fails the walk.
 */
int ks_archive_foreach_record(struct ks_archive *ar, const struct ks_archive_query *query,
			      int (*fn)(const struct ks_record *rec, void *ctx, struct ks_error *err),
			      void *ctx, struct ks_error *err);

/* The grid and the quality-diversity metrics */

struct ks_archive_elite {
	uint64_t cell;
	uint64_t id;
	double fitness;
};

/* Every filled cell, in cell order; free *elites. */
int ks_archive_elites(struct ks_archive *ar, struct ks_archive_elite **elites, size_t *n,
		      struct ks_error *err);

/*
 * The cell of a descriptors object: 0 and *cell set when it falls in the
 * grid; 1 with why filled when a descriptor is missing or outside.
 */
int ks_archive_cell_of(const struct ks_archive *ar, const json_t *descriptors, uint64_t *cell, char *why,
		       size_t why_size);
/* The same from values (enum ks_descriptor order; bit d of has: descriptor d is there): a record's. */
int ks_archive_cell_of_values(const struct ks_archive *ar, const double *descriptors, unsigned has,
			      uint64_t *cell, char *why, size_t why_size);
/* The bin index along each axis of a cell (coords has n_axes entries). */
void ks_archive_cell_coords(const struct ks_archive *ar, uint64_t cell, size_t *coords);

struct ks_archive_metrics {
	uint64_t candidates; /* every record */
	uint64_t by_verdict[KS_VERDICT_COUNT];
	uint64_t next_id;
	uint64_t sources;      /* distinct source texts */
	uint64_t source_bytes; /* their total length */
	uint64_t cells;
	uint64_t cells_filled;
	double coverage; /* cells_filled / cells */
	double qd_score; /* sum over elites of (fitness - qd_offset) */
	double qd_offset;
	double best_fitness; /* over every ok candidate; 0 when none */
	uint64_t best_id;    /* 0 when none */
};

int ks_archive_metrics(struct ks_archive *ar, struct ks_archive_metrics *metrics, struct ks_error *err);

/*
 * The fastest ok candidate of each benchmark workload (what a per-shape
 * dispatch is made of): *bests is a new JSON object {"<workload id>":
 * {"id": N, "median_us": x, "ref_median_us": r}, ...}, {} when no ok
 * candidate was timed yet.  Kept at insert, read in one small value.
 */
int ks_archive_workload_bests(struct ks_archive *ar, json_t **bests, struct ks_error *err);

/*
 * The fitness of dispatching each workload to its own best: the
 * geometric mean over the workloads in bests of reference time / best
 * time (as fitness is for one kernel).  0 when bests is empty.
 */
double ks_archive_dispatch_fitness(const json_t *bests);

/* One point of the metrics' history, recorded whenever one of them changes. */

struct ks_archive_qd_point {
	uint64_t evals; /* candidates in the archive at that moment */
	double best_fitness;
	double coverage;
	double qd_score;
	uint64_t cells_filled;
};

/*
 * Oldest first; free *points.  With max_points 0, every point; else at
 * most max_points (at least 2), spread evenly over the evaluations on a
 * log scale, the first and the last always among them (reads only those).
 */
int ks_archive_history(struct ks_archive *ar, size_t max_points, struct ks_archive_qd_point **points,
		       size_t *n, struct ks_error *err);

/* The verdicts of one span of ids: every record with first_id <= id <= last_id. */
struct ks_archive_verdict_span {
	uint64_t first_id, last_id;
	uint64_t count[KS_VERDICT_COUNT];
};

/*
 * The verdicts over the course of the archive: ids 1 to the last one cut
 * into at most n_spans equal spans (ids follow insertion order), each with
 * its count per verdict; free *spans.  Walks the verdict index's keys, not
 * the records (about 0.1 s a million candidates).  None when empty.
 */
int ks_archive_verdict_spans(struct ks_archive *ar, size_t n_spans, struct ks_archive_verdict_span **spans,
			     size_t *n, struct ks_error *err);

/* Run state, prompts and the compile cache: small stores for later features */

/* Caller-owned key/value state (RNG state, config ...). Keys up to 400 bytes. */
int ks_archive_state_put(struct ks_archive *ar, const char *key, const void *data, size_t size,
			 struct ks_error *err);
/* *data is NULL (and *size 0) when the key is absent; caller frees *data. */
int ks_archive_state_get(struct ks_archive *ar, const char *key, void **data, size_t *size,
			 struct ks_error *err);
/*
 * visit(key, data, size, ctx) for every state entry whose key starts with
 * prefix, in key order, on one snapshot; data is valid during the call.
 * A visit that returns non-zero stops the walk (-1 is returned when it
 * was negative: the visitor's error, which it puts in err itself).
 */
int ks_archive_state_each(struct ks_archive *ar, const char *prefix,
			  int (*visit)(const char *key, const void *data, size_t size, void *ctx), void *ctx,
			  struct ks_error *err);

/*
 * Prompts by id: the strategy prompts (strategy.h has their fields), one
 * JSON object each, whose "id" is its key (verify checks it).
 */
int ks_archive_prompt_put(struct ks_archive *ar, uint64_t id, const json_t *prompt, struct ks_error *err);
/* *prompt is NULL when there is no such id. */
int ks_archive_prompt_get(struct ks_archive *ar, uint64_t id, json_t **prompt, struct ks_error *err);
/*
 * Every stored prompt, in id order, from one snapshot: *prompts is a new
 * array (empty when there are none).  A stored value that is not a JSON
 * object fails, naming its id.
 */
int ks_archive_prompts(struct ks_archive *ar, json_t **prompts, struct ks_error *err);

/* The compile cache: key (hex of the compile hash) -> blob. */
int ks_archive_cache_put(struct ks_archive *ar, const char *key, const void *data, size_t size,
			 struct ks_error *err);
int ks_archive_cache_get(struct ks_archive *ar, const char *key, void **data, size_t *size,
			 struct ks_error *err);

/* Export, import and verification (archive_json.c) */

enum ks_archive_export_flags {
	KS_ARCHIVE_EXPORT_ELITES = 1 << 0, /* only the elites (and their sources) */
};

/* Write the archive (one snapshot) as the JSON export format to out. */
int ks_archive_export(struct ks_archive *ar, FILE *out, unsigned flags, struct ks_error *err);

struct ks_archive_import_result {
	uint64_t imported;
	uint64_t skipped; /* already present: same source and params */
	int ids_kept;	  /* the archive was empty, so the file's ids were kept */
	uint64_t prompts_imported;
	uint64_t prompts_skipped; /* the archive holds a prompt with that id already */
};

/*
 * Add the candidates and prompts of an export document: anything wrong
 * with the document (named by field) leaves the archive unchanged.  Into
 * an empty archive the ids are kept; otherwise records get new ids,
 * parents are renumbered, and a record whose (source, params) the archive
 * holds already is skipped.  Elites are placed with the archive's own
 * grid.  Prompts keep their ids, and one whose id the archive holds
 * already is skipped; they are written in the same transaction as the
 * last candidates.
 */
int ks_archive_import(struct ks_archive *ar, const json_t *doc, struct ks_archive_import_result *result,
		      struct ks_error *err);

/*
 * Salvage (archive_salvage.c): everything readable of the archive
 * root/op_key/gpu_model, which may be damaged, as an export document for
 * ks_archive_import() into a new archive.  Reads happen in child
 * processes, record by record, so a damaged page that makes a read fail,
 * fault or hang loses the records under it and nothing else; the archive
 * is only read.  Fails only when its header (meta database) cannot be read.
 */
struct ks_archive_salvage_lost {
	uint64_t id;
	char why[160];
};
struct ks_archive_salvage {
	json_t *doc;	  /* the export document; owned */
	uint64_t last_id; /* the highest id the archive says it holds */
	uint64_t
		counted; /* records its counters count (0: unreadable); more than saved + lost: some hidden */
	uint64_t records; /* records read whole, with their sources */
	struct ks_archive_salvage_lost *lost;
	size_t n_lost, alloc_lost;
	uint64_t prompts;	/* strategy prompts read */
	char prompts_lost[160]; /* "" when the prompts were read to the end */
};
int ks_archive_salvage_read(const char *root, const char *op_key, const char *gpu_model,
			    struct ks_archive_salvage *s, struct ks_error *err);
void ks_archive_salvage_release(struct ks_archive_salvage *s);

/* Read an export file's header fields without importing: op, gpu, grid. */
int ks_archive_export_header(const json_t *doc, const char **op, const char **gpu, struct ks_grid_axis **grid,
			     size_t *n_grid, struct ks_error *err);
void ks_grid_axes_free(struct ks_grid_axis *grid, size_t n);

/*
 * Check the archive's integrity from one snapshot: every record parses
 * and names a stored source, every source matches its hash, the indexes
 * and the grid agree with the records, the counters and metrics match a
 * recount.  *problems lists what is wrong (empty when nothing is); free
 * it with ks_archive_problems_free().  Returns -1 only when it could not
 * check.
 */
int ks_archive_verify(struct ks_archive *ar, char ***problems, size_t *n_problems, struct ks_error *err);
void ks_archive_problems_free(char **problems, size_t n);

#endif
