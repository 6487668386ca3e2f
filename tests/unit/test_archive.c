/*
 * test_archive.c - the LMDB archive: what an insertion reports, where it
 * lands in the grid, dedup lookups, metrics kept incrementally against a
 * recount, damaged and foreign files refused with a clear error, export
 * and import (candidates and strategy prompts), the prompts store read in
 * id order, and the map growing from a tiny start.
 */
#include "testlib.h"

#include <lmdb.h>
#include <math.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>

#include "ksearch/archive/archive.h"
#include "ksearch/archive/record.h"
#include "ksearch/base/util.h"

/* launches: [1,2) [2,3) [3,9); smem_bytes: [0,1) [1,16384) [16384,49153) -> 9 cells */
static double launch_edges[] = { 1, 2, 3, 9 };
static double smem_edges[] = { 0, 1, 16384, 49153 };
static struct ks_grid_axis grid[] = {
	{ KS_DESC_LAUNCHES, launch_edges, 4 },
	{ KS_DESC_SMEM_BYTES, smem_edges, 4 },
};

static struct ks_archive *open_new(const char *root, size_t map_size)
{
	struct ks_archive_options opts = { .flags = KS_ARCHIVE_CREATE | KS_ARCHIVE_NOSYNC,
					   .grid = grid,
					   .n_grid = 2,
					   .map_size = map_size };
	struct ks_archive *ar;
	struct ks_error err;

	if (ks_archive_open(&ar, root, "testop", "Test GPU 9000", &opts, &err) < 0)
		fail_msg("%s", err.msg);
	return ar;
}

static struct ks_archive *open_reader(const char *root)
{
	struct ks_archive_options opts = { .flags = KS_ARCHIVE_READONLY };
	struct ks_archive *ar;
	struct ks_error err;

	if (ks_archive_open(&ar, root, "testop", "test-gpu-9000", &opts, &err) < 0)
		fail_msg("%s", err.msg);
	return ar;
}

static json_t *make_record(const char *verdict, double fitness, int launches, int smem, int splits)
{
	return json_pack("{s:s, s:s, s:{s:i, s:i}, s:[], s:s, s:f, s:{s:i, s:i, s:f}, s:s}", "verdict",
			 verdict, "family", "split_kv", "params", "SPLITS", splits, "WARPS", 4, "parents",
			 "mutation", "param", "fitness", fitness, "descriptors", "launches", launches,
			 "smem_bytes", smem, "occupancy", 0.5, "evidence", "");
}

static uint64_t insert(struct ks_archive *ar, json_t *record, const char *source,
		       struct ks_archive_insert_result *res)
{
	struct ks_archive_insert_result scratch;
	struct ks_error err;

	if (!res)
		res = &scratch;
	if (ks_archive_insert(ar, record, source, res, &err) < 0)
		fail_msg("%s", err.msg);
	json_decref(record);
	return res->id;
}

static void assert_verify_clean(struct ks_archive *ar)
{
	char **problems;
	size_t n;
	struct ks_error err;

	if (ks_archive_verify(ar, &problems, &n, &err) < 0)
		fail_msg("%s", err.msg);
	if (n)
		fail_msg("verify: %zu problems, first: %s", n, problems[0]);
	ks_archive_problems_free(problems, n);
}

static void test_insert_reports_new_cell_improved_and_not_added(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root, 0);
	struct ks_archive_insert_result r;

	(void)state;
	assert_int_equal(insert(ar, make_record("ok", 1.0, 2, 0, 1), "src a", &r), 1);
	assert_int_equal(r.outcome, KS_ARCHIVE_NEW_CELL);
	assert_int_equal(r.cell, 3); /* launches bin 1, smem bin 0: 1*3 + 0 */
	assert_true(r.new_source);

	insert(ar, make_record("ok", 1.5, 2, 0, 2), "src a", &r);
	assert_int_equal(r.id, 2);
	assert_int_equal(r.outcome, KS_ARCHIVE_IMPROVED);
	assert_int_equal(r.replaced_id, 1);
	assert_true(r.replaced_fitness == 1.0);
	assert_false(r.new_source);

	insert(ar, make_record("ok", 1.5, 2, 0, 3), "src b", &r);
	assert_int_equal(r.outcome, KS_ARCHIVE_NOT_ADDED); /* a tie keeps the first */
	insert(ar, make_record("ok", 0.2, 2, 0, 4), "src b", &r);
	assert_int_equal(r.outcome, KS_ARCHIVE_NOT_ADDED);

	insert(ar, make_record("wrong", 0, 2, 0, 5), "src c", &r);
	assert_int_equal(r.outcome, KS_ARCHIVE_NOT_ELIGIBLE);
	assert_int_equal(r.cell, -1);

	insert(ar, make_record("ok", 9.0, 2, 50000, 6), "src d", &r);
	assert_int_equal(r.outcome, KS_ARCHIVE_OUTSIDE_GRID);
	assert_contains(r.why, "smem_bytes = 50000 is outside");
	{
		json_t *rec = make_record("ok", 1.0, 2, 0, 7);

		json_object_del(json_object_get(rec, "descriptors"), "launches");
		insert(ar, rec, "src d", &r);
		assert_int_equal(r.outcome, KS_ARCHIVE_OUTSIDE_GRID);
		assert_contains(r.why, "launches is missing");
	}
	{
		struct ks_archive_metrics m;
		struct ks_error err;

		assert_int_equal(ks_archive_metrics(ar, &m, &err), 0);
		assert_int_equal(m.candidates, 7);
		assert_int_equal(m.by_verdict[KS_VERDICT_OK], 6);
		assert_int_equal(m.by_verdict[KS_VERDICT_WRONG], 1);
		assert_int_equal(m.cells, 9);
		assert_int_equal(m.cells_filled, 1);
		assert_true(fabs(m.qd_score - 1.5) < 1e-12);
		/* the best counts every ok candidate, placed or not */
		assert_true(m.best_fitness == 9.0);
		assert_int_equal(m.best_id, 6);
		assert_int_equal(m.sources, 4);
	}
	assert_verify_clean(ar);
	ks_archive_close(ar);
	test_rmtree(root);
}

static void test_bad_records_are_refused_and_nothing_written(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root, 0);
	struct ks_archive_metrics m;
	struct ks_error err;
	json_t *rec;

	(void)state;
	rec = make_record("great", 1.0, 2, 0, 1);
	assert_int_equal(ks_archive_insert(ar, rec, "x", NULL, &err), -1);
	assert_contains(err.msg, "unknown verdict 'great'");
	json_decref(rec);
	rec = make_record("ok", -1.0, 2, 0, 1);
	assert_int_equal(ks_archive_insert(ar, rec, "x", NULL, &err), -1);
	assert_contains(err.msg, "fitness");
	json_decref(rec);
	rec = json_pack("{s:s, s:f, s:[s]}", "verdict", "ok", "fitness", 1.0, "parents", "seven");
	assert_int_equal(ks_archive_insert(ar, rec, "x", NULL, &err), -1);
	assert_contains(err.msg, "parents[0]");
	json_decref(rec);
	/* a field every reader would refuse (ks_record_parse()) is refused before it is stored */
	rec = make_record("ok", 1.0, 2, 0, 1);
	json_object_set_new(rec, "driver", json_integer(5));
	assert_int_equal(ks_archive_insert(ar, rec, "x", NULL, &err), -1);
	assert_contains(err.msg, "driver: expected a string");
	json_decref(rec);
	rec = make_record("ok", 1.0, 2, 0, 1);
	json_object_set_new(rec, "family", json_true());
	assert_int_equal(ks_archive_insert(ar, rec, "x", NULL, &err), -1);
	assert_contains(err.msg, "family");
	json_decref(rec);
	assert_int_equal(ks_archive_metrics(ar, &m, &err), 0);
	assert_int_equal(m.candidates, 0);
	assert_int_equal(m.next_id, 1);
	ks_archive_close(ar);
	test_rmtree(root);
}

static void test_grid_placement_and_elites(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root, 0);
	struct ks_archive_elite *elites;
	struct ks_error err;
	size_t n, coords[2];
	uint64_t cell;
	char why[128];
	json_t *desc = json_pack("{s:i, s:i}", "launches", 8, "smem_bytes", 16384);

	(void)state;
	assert_int_equal(ks_archive_cells(ar), 9);
	assert_int_equal(ks_archive_cell_of(ar, desc, &cell, why, sizeof(why)), 0);
	assert_int_equal(cell, 2 * 3 + 2);
	ks_archive_cell_coords(ar, cell, coords);
	assert_int_equal(coords[0], 2);
	assert_int_equal(coords[1], 2);
	json_object_set_new(desc, "launches", json_integer(9)); /* the last edge is exclusive */
	assert_int_equal(ks_archive_cell_of(ar, desc, &cell, why, sizeof(why)), 1);
	json_decref(desc);

	insert(ar, make_record("ok", 2.0, 1, 0, 1), "a", NULL);
	insert(ar, make_record("ok", 3.0, 3, 20000, 1), "b", NULL);
	insert(ar, make_record("ok", 1.0, 2, 100, 1), "c", NULL);
	insert(ar, make_record("ok", 4.0, 3, 20000, 2), "b", NULL);
	assert_int_equal(ks_archive_elites(ar, &elites, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_int_equal(elites[0].cell, 0);
	assert_int_equal(elites[0].id, 1);
	assert_int_equal(elites[1].cell, 4);
	assert_int_equal(elites[1].id, 3);
	assert_int_equal(elites[2].cell, 8);
	assert_int_equal(elites[2].id, 4);
	assert_true(elites[2].fitness == 4.0);
	free(elites);
	ks_archive_close(ar);
	test_rmtree(root);
}

/* A record timed on two workloads (median us, reference us each). */
static json_t *timed_record(const char *verdict, double fitness, double a_us, double b_us, int splits)
{
	json_t *r = make_record(verdict, fitness, 1, 0, splits);

	json_object_set_new(r, "workloads",
			    json_pack("[{s:s, s:f, s:f}, {s:s, s:f, s:f}]", "id", "small", "median_us", a_us,
				      "ref_median_us", 100.0, "id", "big", "median_us", b_us, "ref_median_us",
				      400.0));
	return r;
}

/* The fastest ok candidate of each workload is kept, and what dispatching to them gives. */
static void test_workload_bests_and_dispatch_fitness(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root, 0);
	struct ks_error err;
	json_t *bests;

	(void)state;
	assert_int_equal(ks_archive_workload_bests(ar, &bests, &err), 0);
	assert_int_equal(json_object_size(bests), 0);
	assert_true(ks_archive_dispatch_fitness(bests) == 0);
	json_decref(bests);
	insert(ar, timed_record("ok", 5.0, 20.0, 80.0, 1), "a", NULL);	/* #1: best on both so far */
	insert(ar, timed_record("ok", 6.0, 10.0, 100.0, 2), "a", NULL); /* #2: best on small */
	insert(ar, timed_record("wrong", 0.0, 1.0, 1.0, 3), "a", NULL); /* never counts */
	insert(ar, timed_record("ok", 5.5, 30.0, 50.0, 4), "b", NULL);	/* #4: best on big */
	insert(ar, timed_record("ok", 5.5, 10.0, 50.0, 8), "c", NULL);	/* ties: the first stays */
	assert_int_equal(ks_archive_workload_bests(ar, &bests, &err), 0);
	assert_int_equal(json_object_size(bests), 2);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(bests, "small"), "id")), 2);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(bests, "big"), "id")), 4);
	/* sqrt((100/10) * (400/50)) */
	assert_true(fabs(ks_archive_dispatch_fitness(bests) - sqrt(10.0 * 8.0)) < 1e-12);
	json_decref(bests);
	assert_verify_clean(ar);
	ks_archive_close(ar);
	test_rmtree(root);
}

static void test_dedup_lookup_ignores_param_order(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root, 0);
	struct ks_error err;
	json_t *params;
	uint64_t id;

	(void)state;
	insert(ar, make_record("ok", 1.0, 2, 0, 8), "kernel text", NULL);
	insert(ar, make_record("compile_error", 0, 2, 0, 16), "kernel text", NULL);
	params = json_pack("{s:i, s:i}", "WARPS", 4, "SPLITS", 8);
	assert_int_equal(ks_archive_lookup_candidate(ar, "kernel text", params, &id, &err), 0);
	assert_int_equal(id, 1);
	json_object_set_new(params, "SPLITS", json_integer(16));
	assert_int_equal(ks_archive_lookup_candidate(ar, "kernel text", params, &id, &err), 0);
	assert_int_equal(id, 2);
	json_object_set_new(params, "SPLITS", json_integer(2));
	assert_int_equal(ks_archive_lookup_candidate(ar, "kernel text", params, &id, &err), 0);
	assert_int_equal(id, 0);
	json_object_set_new(params, "SPLITS", json_integer(8));
	assert_int_equal(ks_archive_lookup_candidate(ar, "other text", params, &id, &err), 0);
	assert_int_equal(id, 0);
	json_decref(params);
	ks_archive_close(ar);
	test_rmtree(root);
}

/* Recount coverage, QD-score and best from the records, with the test's own binning. */
struct recount {
	double cell_best[9];
	double best;
	uint64_t n;
};

static int bin_of(const double *edges, size_t n_edges, double v)
{
	for (size_t i = 0; i + 1 < n_edges; i++)
		if (v >= edges[i] && v < edges[i + 1])
			return (int)i;
	return -1;
}

static int recount_fn(const json_t *record, void *ctx)
{
	struct recount *r = ctx;
	const json_t *d = json_object_get(record, "descriptors");
	double f = json_number_value(json_object_get(record, "fitness"));
	int x, y;

	r->n++;
	if (strcmp(json_string_value(json_object_get(record, "verdict")), "ok"))
		return 0;
	if (f > r->best)
		r->best = f;
	x = bin_of(launch_edges, 4, json_number_value(json_object_get(d, "launches")));
	y = bin_of(smem_edges, 4, json_number_value(json_object_get(d, "smem_bytes")));
	if (x >= 0 && y >= 0 && f > r->cell_best[x * 3 + y])
		r->cell_best[x * 3 + y] = f;
	return 0;
}

static void test_metrics_kept_incrementally_match_a_recount(void **state)
{
	static const char *verdicts[] = { "ok", "ok", "ok", "compile_error", "wrong", "timeout" };
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root, 0);
	struct ks_archive_query all = { -1, KS_ARCHIVE_SORT_ID, 0 };
	struct ks_archive_metrics m;
	struct ks_archive_qd_point *points;
	struct recount r;
	struct ks_error err;
	size_t n_points, filled = 0;
	double qd = 0;

	(void)state;
	srand(42);
	for (int i = 0; i < 1500; i++) {
		char source[64];
		/* some outside the grid: launches up to 10, smem up to 60000 */
		json_t *rec = make_record(verdicts[rand() % 6], (rand() % 10000) / 1000.0, 1 + rand() % 10,
					  rand() % 4 ? rand() % 60000 : 0, rand() % 5);

		snprintf(source, sizeof(source), "kernel %d", rand() % 300);
		insert(ar, rec, source, NULL);
	}
	memset(&r, 0, sizeof(r));
	for (int c = 0; c < 9; c++)
		r.cell_best[c] = -1;
	assert_int_equal(ks_archive_foreach(ar, &all, recount_fn, &r, &err), 0);
	assert_int_equal(r.n, 1500);
	for (int c = 0; c < 9; c++) {
		if (r.cell_best[c] >= 0) {
			filled++;
			qd += r.cell_best[c];
		}
	}
	assert_int_equal(ks_archive_metrics(ar, &m, &err), 0);
	assert_int_equal(m.candidates, 1500);
	assert_int_equal(m.cells_filled, filled);
	assert_true(fabs(m.coverage - filled / 9.0) < 1e-12);
	assert_true(fabs(m.qd_score - qd) < 1e-9);
	assert_true(m.best_fitness == r.best);

	/* the history ends at the current metrics and the QD-score never falls */
	assert_int_equal(ks_archive_history(ar, 0, &points, &n_points, &err), 0);
	assert_true(n_points > 1);
	for (size_t i = 1; i < n_points; i++) {
		assert_true(points[i].evals > points[i - 1].evals);
		assert_true(points[i].qd_score >= points[i - 1].qd_score);
		assert_true(points[i].best_fitness >= points[i - 1].best_fitness);
	}
	assert_true(fabs(points[n_points - 1].qd_score - qd) < 1e-9);
	assert_int_equal(points[n_points - 1].cells_filled, filled);
	{
		struct ks_archive_qd_point *sample;
		size_t n_sample;

		/* a sample keeps the first and the last point and reads no more than asked */
		assert_int_equal(ks_archive_history(ar, 5, &sample, &n_sample, &err), 0);
		assert_true(n_sample >= 2 && n_sample <= 5);
		assert_int_equal(sample[0].evals, points[0].evals);
		assert_int_equal(sample[n_sample - 1].evals, points[n_points - 1].evals);
		for (size_t i = 1; i < n_sample; i++)
			assert_true(sample[i].evals > sample[i - 1].evals);
		free(sample);
	}
	free(points);
	assert_verify_clean(ar);
	ks_archive_close(ar);
	test_rmtree(root);
}

struct order {
	uint64_t ids[16];
	size_t n;
};

static int collect(const json_t *record, void *ctx)
{
	struct order *o = ctx;

	o->ids[o->n++] = (uint64_t)json_integer_value(json_object_get(record, "id"));
	return 0;
}

static void test_foreach_orders_filters_and_limits(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root, 0);
	struct ks_archive_query q = { -1, KS_ARCHIVE_SORT_FITNESS, 0 };
	struct ks_error err;
	struct order o;

	(void)state;
	insert(ar, make_record("ok", 1.0, 1, 0, 1), "a", NULL);		 /* 1 */
	insert(ar, make_record("wrong", 0, 1, 0, 1), "b", NULL);	 /* 2 */
	insert(ar, make_record("ok", 3.0, 2, 0, 1), "c", NULL);		 /* 3 */
	insert(ar, make_record("compile_error", 0, 1, 0, 1), "d", NULL); /* 4 */
	insert(ar, make_record("ok", 2.0, 3, 0, 1), "e", NULL);		 /* 5 */
	insert(ar, make_record("wrong", 0, 1, 0, 2), "f", NULL);	 /* 6 */

	memset(&o, 0, sizeof(o));
	assert_int_equal(ks_archive_foreach(ar, &q, collect, &o, &err), 0);
	assert_int_equal(o.n, 6);
	assert_int_equal(o.ids[0], 3);
	assert_int_equal(o.ids[1], 5);
	assert_int_equal(o.ids[2], 1);
	assert_int_equal(o.ids[3], 2); /* then the zero fitness ones by id, across verdicts */
	assert_int_equal(o.ids[4], 4);
	assert_int_equal(o.ids[5], 6);

	memset(&o, 0, sizeof(o));
	q.limit = 2;
	assert_int_equal(ks_archive_foreach(ar, &q, collect, &o, &err), 0);
	assert_int_equal(o.n, 2);

	memset(&o, 0, sizeof(o));
	q = (struct ks_archive_query){ KS_VERDICT_WRONG, KS_ARCHIVE_SORT_TIME, 0 };
	assert_int_equal(ks_archive_foreach(ar, &q, collect, &o, &err), 0);
	assert_int_equal(o.n, 2);
	assert_int_equal(o.ids[0], 6);
	assert_int_equal(o.ids[1], 2);

	memset(&o, 0, sizeof(o));
	q = (struct ks_archive_query){ KS_VERDICT_OK, KS_ARCHIVE_SORT_ID, 0 };
	assert_int_equal(ks_archive_foreach(ar, &q, collect, &o, &err), 0);
	assert_int_equal(o.n, 3);
	assert_int_equal(o.ids[0], 1);
	assert_int_equal(o.ids[2], 5);

	memset(&o, 0, sizeof(o));
	q = (struct ks_archive_query){ -1, KS_ARCHIVE_SORT_TIME, 3 };
	assert_int_equal(ks_archive_foreach(ar, &q, collect, &o, &err), 0);
	assert_int_equal(o.n, 3);
	assert_int_equal(o.ids[0], 6);

	memset(&o, 0, sizeof(o));
	q = (struct ks_archive_query){ KS_VERDICT_CRASH, KS_ARCHIVE_SORT_TIME, 0 };
	assert_int_equal(ks_archive_foreach(ar, &q, collect, &o, &err), 0);
	assert_int_equal(o.n, 0);
	ks_archive_close(ar);
	test_rmtree(root);
}

static void test_get_and_best_return_record_and_source(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root, 0);
	struct ks_error err;
	json_t *record;
	char *source;

	(void)state;
	assert_int_equal(ks_archive_best(ar, &record, &source, &err), 0);
	assert_null(record);
	insert(ar, make_record("ok", 1.0, 1, 0, 1), "first source", NULL);
	insert(ar, make_record("ok", 5.0, 2, 0, 1), "second source", NULL);
	assert_int_equal(ks_archive_get(ar, 1, &record, &source, &err), 0);
	assert_non_null(record);
	assert_string_equal(source, "first source");
	assert_int_equal(json_integer_value(json_object_get(record, "id")), 1);
	assert_string_equal(json_string_value(json_object_get(record, "op")), "testop");
	assert_string_equal(json_string_value(json_object_get(record, "gpu")), "Test GPU 9000");
	assert_int_equal(strlen(json_string_value(json_object_get(record, "source_hash"))), 64);
	assert_non_null(json_object_get(record, "created"));
	json_decref(record);
	free(source);
	assert_int_equal(ks_archive_get(ar, 99, &record, &source, &err), 0);
	assert_null(record);
	assert_null(source);
	assert_int_equal(ks_archive_best(ar, &record, &source, &err), 0);
	assert_int_equal(json_integer_value(json_object_get(record, "id")), 2);
	assert_string_equal(source, "second source");
	json_decref(record);
	free(source);
	ks_archive_close(ar);
	test_rmtree(root);
}

static char *data_path(const char *root)
{
	char *path = malloc(4096);

	snprintf(path, 4096, "%s/testop/test-gpu-9000/data.mdb", root);
	return path;
}

static void assert_open_fails(const char *root, unsigned flags, const char *expected)
{
	struct ks_archive_options opts = { .flags = flags, .grid = grid, .n_grid = 2 };
	struct ks_archive *ar;
	struct ks_error err;

	assert_int_equal(ks_archive_open(&ar, root, "testop", "Test GPU 9000", &opts, &err), -1);
	assert_null(ar);
	assert_contains(err.msg, expected);
}

static void set_schema_version(const char *root, const char *version)
{
	char dir[4096];
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val key = { 14, "schema_version" }, val = { strlen(version), (void *)version };

	snprintf(dir, sizeof(dir), "%s/testop/test-gpu-9000", root);
	assert_int_equal(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 16);
	assert_int_equal(mdb_env_open(env, dir, 0, 0644), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
	assert_int_equal(mdb_put(txn, dbi, &key, &val, 0), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
}

static void test_schema_version_mismatch_names_the_version(void **state)
{
	char *root = test_tmpdir();

	(void)state;
	ks_archive_close(open_new(root, 0));
	set_schema_version(root, "7");
	assert_open_fails(root, KS_ARCHIVE_READONLY,
			  "archive schema version 7, but this ksearch reads version 1");
	assert_open_fails(root, KS_ARCHIVE_CREATE, "schema version 7");
	set_schema_version(root, "banana");
	assert_open_fails(root, KS_ARCHIVE_READONLY, "not a ksearch archive (schema version 'banana')");
	test_rmtree(root);
}

/* An LMDB environment without the meta database: what a copy torn while a search
 * wrote can look like; the error says so and how to copy one. */
static void test_environment_without_meta_says_how_to_copy(void **state)
{
	char *root = test_tmpdir(), dir[4096];
	MDB_env *env;
	MDB_txn *txn;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/testop", root);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(dir, sizeof(dir), "%s/testop/test-gpu-9000", root);
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_open(env, dir, 0, 0644), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	assert_open_fails(root, KS_ARCHIVE_READONLY, "not a ksearch archive (no meta database)");
	assert_open_fails(root, KS_ARCHIVE_READONLY, "`ksearch archive export`");
	test_rmtree(root);
}

static void fill_lineage(struct ks_archive *ar);

/* Change the archive behind its back: delete key from database db (or put value). */
static void tamper(const char *root, const char *db, const void *key, size_t key_len, const char *value)
{
	char dir[4096];
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val k = { key_len, (void *)key }, v = { value ? strlen(value) : 0, (void *)value };

	snprintf(dir, sizeof(dir), "%s/testop/test-gpu-9000", root);
	assert_int_equal(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 16);
	assert_int_equal(mdb_env_open(env, dir, 0, 0644), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, db, 0, &dbi), 0);
	if (value)
		assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
	else
		assert_int_equal(mdb_del(txn, dbi, &k, NULL), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
}

static void assert_problem(const char *root, const char *expected)
{
	struct ks_archive *ar = open_reader(root);
	char **problems;
	size_t n;
	struct ks_error err;
	struct ks_strbuf all;

	if (ks_archive_verify(ar, &problems, &n, &err) < 0)
		fail_msg("%s", err.msg);
	ks_strbuf_init(&all);
	for (size_t i = 0; i < n; i++)
		ks_strbuf_addf(&all, "%s\n", problems[i]);
	assert_contains(all.buf, expected);
	ks_strbuf_release(&all);
	ks_archive_problems_free(problems, n);
	ks_archive_close(ar);
}

static void test_verify_names_what_is_wrong(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root, 0);
	unsigned char cell[8] = { 0, 0, 0, 0, 0, 0, 0, 3 }, id2[8] = { 0, 0, 0, 0, 0, 0, 0, 2 };
	unsigned char hash[32];
	json_t *record;
	struct ks_error err;
	char *source;

	(void)state;
	fill_lineage(ar);
	assert_int_equal(ks_archive_get(ar, 4, &record, &source, &err), 0);
	for (int i = 0; i < 32; i++)
		sscanf(json_string_value(json_object_get(record, "source_hash")) + 2 * i, "%2hhx", &hash[i]);
	json_decref(record);
	free(source);
	assert_verify_clean(ar);
	ks_archive_close(ar);

	tamper(root, "grid", cell, 8, NULL);
	assert_problem(root, "cell 3: empty in the grid, but record #2 belongs there");
	assert_problem(root, "counters: cells_filled is 2, but the archive holds 1");
	tamper(root, "sources", hash, 32, NULL);
	assert_problem(root, "record #4: its source");
	assert_problem(root, "is not in the sources database");
	tamper(root, "candidates", id2, 8, "{\"id\": 2, \"verdict\": \"ok\"");
	assert_problem(root, "record #2 is not a JSON object");
	tamper(root, "meta", "counters", 8, "{\"next_id\": 3, \"candidates\": 9}");
	assert_problem(root, "counters: candidates is 9, but the archive holds 3");
	assert_problem(root, "counters: next_id is 3, but record #4 exists");
	test_rmtree(root);
}

static void fill(const char *root, int n)
{
	struct ks_archive *ar = open_new(root, 0);

	for (int i = 0; i < n; i++) {
		char source[2100];

		memset(source, 'a' + i % 26, sizeof(source) - 1);
		source[sizeof(source) - 1] = '\0';
		snprintf(source, 32, "// kernel %d\n", i);
		source[strlen(source)] = ' ';
		insert(ar, make_record("ok", i, 1 + i % 3, 0, i), source, NULL);
	}
	ks_archive_close(ar);
}

static void test_damaged_files_give_clear_errors(void **state)
{
	char *root = test_tmpdir();
	char *path = data_path(root);
	struct stat st;
	FILE *f;
	char garbage[4096];

	(void)state;
	fill(root, 200);
	assert_int_equal(stat(path, &st), 0);
	/* cut in the middle: LMDB would fault reading pages past the end */
	assert_int_equal(truncate(path, st.st_size / 2), 0);
	assert_open_fails(root, KS_ARCHIVE_READONLY, "is truncated");
	assert_open_fails(root, KS_ARCHIVE_CREATE, "is truncated");
	assert_int_equal(truncate(path, 100), 0);
	assert_open_fails(root, KS_ARCHIVE_READONLY, "is truncated (100 bytes");
	test_rmtree(root);

	root = test_tmpdir();
	free(path);
	path = data_path(root);
	fill(root, 50);
	memset(garbage, 0x5a, sizeof(garbage));
	f = fopen(path, "r+b");
	assert_non_null(f);
	fwrite(garbage, 1, sizeof(garbage), f);
	fclose(f);
	assert_open_fails(root, KS_ARCHIVE_READONLY, "not an LMDB file, or its header is damaged");
	assert_open_fails(root, KS_ARCHIVE_CREATE, "not an LMDB file, or its header is damaged");
	free(path);
	test_rmtree(root);
}

static void test_missing_archive_and_grid_mismatch(void **state)
{
	char *root = test_tmpdir();
	double other_edges[] = { 0, 10 };
	struct ks_grid_axis other[] = { { KS_DESC_REGISTERS, other_edges, 2 } };
	struct ks_archive_options opts = { .flags = KS_ARCHIVE_CREATE, .grid = other, .n_grid = 1 };
	struct ks_archive *ar;
	struct ks_error err;

	(void)state;
	assert_open_fails(root, KS_ARCHIVE_READONLY, "no archive for operator 'testop' on 'Test GPU 9000'");
	ks_archive_close(open_new(root, 0));
	assert_int_equal(ks_archive_open(&ar, root, "testop", "Test GPU 9000", &opts, &err), -1);
	assert_contains(err.msg, "differs from the archive's");
	/* a reader takes the stored grid */
	ar = open_reader(root);
	assert_int_equal(ks_archive_cells(ar), 9);
	assert_string_equal(ks_archive_gpu(ar), "Test GPU 9000");
	{
		json_t *rec = make_record("ok", 1, 1, 0, 1);

		assert_int_equal(ks_archive_insert(ar, rec, "x", NULL, &err), -1);
		assert_contains(err.msg, "read-only");
		json_decref(rec);
	}
	ks_archive_close(ar);
	test_rmtree(root);
}

/* A strategy prompt as strategy.h describes it; parent 0 for a seed, best_child 0 for none. */
static json_t *make_prompt(uint64_t id, const char *name, uint64_t parent, int uses, uint64_t best_child)
{
	json_t *parent_id = parent ? json_integer((json_int_t)parent) : json_null();
	json_t *child_id = best_child ? json_integer((json_int_t)best_child) : json_null();

	return json_pack("{s:I, s:s, s:s, s:s, s:o, s:i, s:b,"
			 " s:{s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:o, s:n}}",
			 "id", (json_int_t)id, "name", name, "text", "# advice\n\nuse wide loads\n", "origin",
			 parent ? "improve" : "seed", "parent", parent_id, "created_at", 0, "active", 1,
			 "stats", "uses", uses, "answers", uses, "answer_errors", 0, "children", uses, "ok",
			 uses / 2, "improvements", uses / 3, "best_fitness", 1.5, "best_child", child_id,
			 "last_error");
}

static void put_prompt(struct ks_archive *ar, json_t *prompt)
{
	uint64_t id = (uint64_t)json_integer_value(json_object_get(prompt, "id"));
	struct ks_error err;

	if (ks_archive_prompt_put(ar, id, prompt, &err) < 0)
		fail_msg("%s", err.msg);
	json_decref(prompt);
}

static json_t *all_prompts(struct ks_archive *ar)
{
	struct ks_error err;
	json_t *prompts;

	if (ks_archive_prompts(ar, &prompts, &err) < 0)
		fail_msg("%s", err.msg);
	assert_true(json_is_array(prompts));
	return prompts;
}

static uint64_t prompt_id_at(const json_t *prompts, size_t i)
{
	return (uint64_t)json_integer_value(json_object_get(json_array_get(prompts, i), "id"));
}

static char *export_text(struct ks_archive *ar, unsigned flags)
{
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);
	struct ks_error err;

	if (ks_archive_export(ar, f, flags, &err) < 0)
		fail_msg("%s", err.msg);
	fclose(f);
	return text;
}

static void fill_lineage(struct ks_archive *ar)
{
	json_t *rec;

	insert(ar, make_record("ok", 1.0, 2, 0, 1), "seed source", NULL); /* 1 */
	rec = make_record("ok", 2.0, 2, 0, 8);				  /* 2 */
	json_array_append_new(json_object_get(rec, "parents"), json_integer(1));
	insert(ar, rec, "seed source", NULL);
	rec = make_record("wrong", 0, 2, 0, 16); /* 3 */
	json_array_append_new(json_object_get(rec, "parents"), json_integer(2));
	json_object_set_new(rec, "evidence", json_string("output[3]: got 1 expected 2"));
	insert(ar, rec, "seed source", NULL);
	rec = make_record("ok", 3.0, 1, 100, 8); /* 4 */
	json_array_append_new(json_object_get(rec, "parents"), json_integer(2));
	insert(ar, rec, "llm source \"quoted\"\n\ttabbed\n", NULL);
}

static void test_export_import_round_trip(void **state)
{
	char *root = test_tmpdir(), *root2 = test_tmpdir();
	struct ks_archive *ar = open_new(root, 0), *copy;
	struct ks_archive_import_result result;
	struct ks_archive_metrics m1, m2;
	struct ks_error err;
	json_t *doc, *a, *b;
	char *text, *text2, *src;

	(void)state;
	fill_lineage(ar);
	put_prompt(ar, make_prompt(7, "use_cp_async", 0, 3, 4));
	text = export_text(ar, 0);
	doc = json_loads(text, 0, NULL);
	assert_non_null(doc);
	assert_string_equal(json_string_value(json_object_get(doc, "format")), "ksearch-archive");
	assert_int_equal(json_array_size(json_object_get(doc, "candidates")), 4);
	assert_int_equal(json_object_size(json_object_get(doc, "sources")), 2);

	copy = open_new(root2, 0);
	assert_int_equal(ks_archive_import(copy, doc, &result, &err), 0);
	assert_int_equal(result.imported, 4);
	assert_true(result.ids_kept);
	for (uint64_t id = 1; id <= 4; id++) {
		char *s1, *s2;

		assert_int_equal(ks_archive_get(ar, id, &a, &s1, &err), 0);
		assert_int_equal(ks_archive_get(copy, id, &b, &s2, &err), 0);
		if (!json_equal(a, b))
			fail_msg("record %llu differs after import", (unsigned long long)id);
		assert_string_equal(s1, s2);
		json_decref(a);
		json_decref(b);
		free(s1);
		free(s2);
	}
	assert_int_equal(ks_archive_metrics(ar, &m1, &err), 0);
	assert_int_equal(ks_archive_metrics(copy, &m2, &err), 0);
	assert_int_equal(m1.candidates, m2.candidates);
	assert_int_equal(m1.cells_filled, m2.cells_filled);
	assert_true(m1.qd_score == m2.qd_score);
	assert_int_equal(m1.best_id, m2.best_id);
	assert_int_equal(m1.next_id, m2.next_id);
	assert_int_equal(ks_archive_prompt_get(copy, 7, &a, &err), 0);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(a, "stats"), "uses")), 3);
	json_decref(a);
	/* exporting the copy gives the same candidates and sources */
	text2 = export_text(copy, 0);
	b = json_loads(text2, 0, NULL);
	assert_true(json_equal(json_object_get(doc, "candidates"), json_object_get(b, "candidates")));
	assert_true(json_equal(json_object_get(doc, "sources"), json_object_get(b, "sources")));
	json_decref(b);
	free(text2);

	/* importing again into a non-empty archive skips what is there already */
	assert_int_equal(ks_archive_import(copy, doc, &result, &err), 0);
	assert_int_equal(result.imported, 0);
	assert_int_equal(result.skipped, 4);
	assert_false(result.ids_kept);
	assert_verify_clean(copy);
	ks_archive_close(copy);
	json_decref(doc);
	free(text);

	/* elites only: the elite of each cell, and the sources they need */
	text = export_text(ar, KS_ARCHIVE_EXPORT_ELITES);
	doc = json_loads(text, 0, NULL);
	assert_int_equal(json_array_size(json_object_get(doc, "candidates")), 2);
	assert_int_equal(json_integer_value(json_object_get(
				 json_array_get(json_object_get(doc, "candidates"), 0), "id")),
			 2);
	assert_true(json_is_true(json_object_get(doc, "elites_only")));
	assert_int_equal(json_object_size(json_object_get(doc, "sources")), 2);
	/* into a non-empty archive they get new ids; parents outside the file are dropped */
	assert_int_equal(ks_archive_import(ar, doc, &result, &err), 0);
	assert_int_equal(result.skipped, 2);
	json_decref(doc);
	free(text);

	/* a hand-written document with inline sources */
	doc = json_loads(
		"{\"format\": \"ksearch-archive\", \"version\": 1, \"op\": \"testop\", \"gpu\": \"x\","
		" \"candidates\": [{\"id\": 5, \"verdict\": \"ok\", \"fitness\": 7.5, \"params\": {\"A\": 1},"
		" \"descriptors\": {\"launches\": 1, \"smem_bytes\": 0}, \"source\": \"new text\"},"
		" {\"id\": 9, \"verdict\": \"crash\", \"parents\": [5], \"source\": \"new text\"}]}",
		0, NULL);
	assert_non_null(doc);
	assert_int_equal(ks_archive_import(ar, doc, &result, &err), 0);
	assert_int_equal(result.imported, 2);
	assert_int_equal(ks_archive_get(ar, 5, &a, &src, &err), 0);
	assert_int_equal(json_integer_value(json_object_get(a, "imported_from_id")), 5);
	assert_string_equal(src, "new text");
	json_decref(a);
	free(src);
	assert_int_equal(ks_archive_get(ar, 6, &a, NULL, &err), 0);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(a, "parents"), 0)), 5);
	json_decref(a);
	json_decref(doc);
	assert_verify_clean(ar);
	ks_archive_close(ar);
	test_rmtree(root);
	test_rmtree(root2);
}

static void assert_import_refused(struct ks_archive *ar, const char *json, const char *expected)
{
	struct ks_archive_import_result result;
	struct ks_archive_metrics before, after;
	struct ks_error err;
	json_error_t jerr;
	json_t *doc = json_loads(json, 0, &jerr);
	json_t *prompts_before, *prompts_after;

	if (!doc)
		fail_msg("test document does not parse: %s", jerr.text);
	assert_int_equal(ks_archive_metrics(ar, &before, &err), 0);
	prompts_before = all_prompts(ar);
	assert_int_equal(ks_archive_import(ar, doc, &result, &err), -1);
	assert_contains(err.msg, expected);
	assert_int_equal(ks_archive_metrics(ar, &after, &err), 0);
	assert_int_equal(before.candidates, after.candidates);
	assert_int_equal(before.next_id, after.next_id);
	assert_int_equal(before.sources, after.sources);
	prompts_after = all_prompts(ar);
	assert_true(json_equal(prompts_before, prompts_after));
	json_decref(prompts_before);
	json_decref(prompts_after);
	json_decref(doc);
}

#define HEAD "{\"format\": \"ksearch-archive\", \"version\": 1, \"op\": \"testop\", \"gpu\": \"x\", "
#define GOOD "{\"id\": 1, \"verdict\": \"ok\", \"fitness\": 1, \"source\": \"a\", \"descriptors\": {}}"

static void test_malformed_import_leaves_archive_unchanged(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root, 0);

	(void)state;
	fill_lineage(ar);
	assert_import_refused(ar, "{\"format\": \"something\"}", "format: expected \"ksearch-archive\"");
	assert_import_refused(ar, "{\"format\": \"ksearch-archive\", \"version\": 2}",
			      "export format version 2, but this ksearch reads version 1");
	assert_import_refused(ar, HEAD "\"candidates\": {}}", "candidates: expected a list");
	/* the bad record is the last: the good ones before it must not be written */
	assert_import_refused(
		ar, HEAD "\"candidates\": [" GOOD ", {\"id\": 2, \"verdict\": \"fine\", \"source\": \"b\"}]}",
		"candidates[1] (id 2): verdict: unknown verdict 'fine'");
	assert_import_refused(ar, HEAD "\"candidates\": [" GOOD ", " GOOD "]}", "id 1 appears twice");
	assert_import_refused(ar,
			      HEAD "\"candidates\": [{\"id\": 3, \"verdict\": \"crash\", \"source_hash\": "
				   "\"0000000000000000000000000000000000000000000000000000000000000000\"}]}",
			      "is not in \"sources\"");
	assert_import_refused(
		ar,
		HEAD "\"candidates\": [], \"sources\": "
		     "{\"0000000000000000000000000000000000000000000000000000000000000000\": \"text\"}}",
		"the text's SHA-256 is");
	assert_import_refused(ar, HEAD "\"candidates\": [" GOOD "], \"prompts\": {\"1\": {}}}",
			      "prompts: expected a list of prompt objects, got an object");
	assert_import_refused(ar,
			      HEAD "\"candidates\": [{\"id\": 1, \"verdict\": \"ok\", \"source\": \"a\"}]}",
			      "an ok candidate needs its fitness");
	assert_import_refused(ar,
			      HEAD "\"candidates\": [{\"id\": 1, \"verdict\": \"crash\", \"source\": \"a\", "
				   "\"toolkit\": [12]}]}",
			      "candidates[0] (id 1): record 1: toolkit: expected a string");
	assert_verify_clean(ar);
	ks_archive_close(ar);
	test_rmtree(root);
}

static void test_map_grows_from_a_tiny_start(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root, 64 << 10);
	struct ks_archive_metrics m;
	struct ks_error err;
	char source[3000];

	(void)state;
	for (int i = 0; i < 400; i++) {
		memset(source, 'x', sizeof(source) - 1);
		source[sizeof(source) - 1] = '\0';
		snprintf(source, 20, "// %d\n", i);
		source[strlen(source)] = ' ';
		insert(ar, make_record(i % 2 ? "ok" : "wrong", i, 1 + i % 3, i % 2000, i), source, NULL);
	}
	assert_int_equal(ks_archive_metrics(ar, &m, &err), 0);
	assert_int_equal(m.candidates, 400);
	assert_int_equal(m.sources, 400);
	assert_verify_clean(ar);
	ks_archive_close(ar);
	/* and a reader opened afterwards sees everything */
	ar = open_reader(root);
	assert_int_equal(ks_archive_metrics(ar, &m, &err), 0);
	assert_int_equal(m.candidates, 400);
	assert_verify_clean(ar);
	ks_archive_close(ar);
	test_rmtree(root);
}

static int count_line(const char *msg, void *ctx)
{
	(void)msg;
	(*(int *)ctx)++;
	return 0;
}

/* Reader slots in use, by LMDB's own table (its header line not counted). */
static int reader_slots(const char *root)
{
	char dir[4096];
	MDB_env *env;
	int lines = 0;

	snprintf(dir, sizeof(dir), "%s/testop/test-gpu-9000", root);
	assert_int_equal(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 16);
	assert_int_equal(mdb_env_open(env, dir, MDB_RDONLY, 0644), 0);
	mdb_reader_list(env, count_line, &lines);
	mdb_env_close(env);
	return lines - 1;
}

static int die_while_reading(const json_t *record, void *ctx)
{
	(void)record;
	(void)ctx;
	raise(SIGKILL); /* killed with the read transaction open: its slot stays taken */
	return 1;
}

static int read_and_die(const char *root)
{
	struct ks_archive_query all = { -1, KS_ARCHIVE_SORT_ID, 0 };
	struct ks_archive *ar = open_reader(root);
	struct ks_error err;

	ks_archive_foreach(ar, &all, die_while_reading, NULL, &err);
	return 1;
}

static int open_and_close(const char *root)
{
	ks_archive_close(open_reader(root));
	return 0;
}

/*
 * Run fn(root) in a child process (an LMDB environment must not be opened
 * twice in one) and return its result, or -1 when the child died first.
 * The child ends with SIGKILL, so that nothing runs at its exit (valgrind
 * would count the parent's memory as the child's leaks).
 */
static int in_child(int (*fn)(const char *root), const char *root)
{
	int fds[2], result = -1;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		result = fn(root);
		if (write(fds[1], &result, sizeof(result)) != sizeof(result))
			abort();
		raise(SIGKILL);
	}
	close(fds[1]);
	if (read(fds[0], &result, sizeof(result)) != sizeof(result))
		result = -1;
	close(fds[0]);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	return result;
}

static void test_stale_reader_slots_are_cleared_on_open(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *writer = open_new(root, 0);

	(void)state;
	/*
	 * The writer stays open throughout, as the coordinator does: LMDB
	 * resets the reader table only when the last process lets go.
	 */
	insert(writer, make_record("ok", 1.0, 1, 0, 1), "a", NULL);
	assert_int_equal(in_child(read_and_die, root), -1);
	assert_int_equal(in_child(reader_slots, root), 1);
	assert_int_equal(in_child(open_and_close, root), 0);
	assert_int_equal(in_child(reader_slots, root), 0);
	ks_archive_close(writer);
	test_rmtree(root);
}

static void test_state_prompts_and_compile_cache(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root, 0);
	struct ks_error err;
	unsigned char rng[16] = { 1, 2, 3, 0, 5 };
	void *data;
	size_t size;
	json_t *prompt;

	(void)state;
	assert_int_equal(ks_archive_state_put(ar, "rng", rng, sizeof(rng), &err), 0);
	assert_int_equal(ks_archive_state_get(ar, "rng", &data, &size, &err), 0);
	assert_int_equal(size, sizeof(rng));
	assert_memory_equal(data, rng, sizeof(rng));
	free(data);
	assert_int_equal(ks_archive_state_get(ar, "absent", &data, &size, &err), 0);
	assert_null(data);
	assert_int_equal(ks_archive_cache_put(ar, "ab12cd", "ptx text", 8, &err), 0);
	assert_int_equal(ks_archive_cache_get(ar, "ab12cd", &data, &size, &err), 0);
	assert_string_equal(data, "ptx text");
	free(data);
	prompt = json_pack("{s:s}", "text", "tile K");
	assert_int_equal(ks_archive_prompt_put(ar, 1, prompt, &err), 0);
	json_decref(prompt);
	assert_int_equal(ks_archive_prompt_get(ar, 1, &prompt, &err), 0);
	assert_string_equal(json_string_value(json_object_get(prompt, "text")), "tile K");
	json_decref(prompt);
	assert_int_equal(ks_archive_prompt_get(ar, 2, &prompt, &err), 0);
	assert_null(prompt);
	ks_archive_close(ar);
	test_rmtree(root);
}

static void test_prompts_lists_every_prompt_in_id_order(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root, 0);
	unsigned char key[8] = { 0, 0, 0, 0, 0, 0, 0, 5 };
	struct ks_error err;
	json_t *prompts, *expected;

	(void)state;
	prompts = all_prompts(ar);
	assert_int_equal(json_array_size(prompts), 0);
	json_decref(prompts);
	/* written out of order, and 300 > 2 only as a big-endian key */
	put_prompt(ar, make_prompt(300, "late", 2, 1, 0));
	put_prompt(ar, make_prompt(2, "wide", 1, 5, 0));
	put_prompt(ar, make_prompt(1, "seed", 0, 9, 0));
	put_prompt(ar, make_prompt(2, "wide", 1, 6, 0)); /* a rewrite of id 2 replaces it */
	ks_archive_close(ar);

	/* a read-only reader sees them */
	ar = open_reader(root);
	prompts = all_prompts(ar);
	assert_int_equal(json_array_size(prompts), 3);
	assert_int_equal(prompt_id_at(prompts, 0), 1);
	assert_int_equal(prompt_id_at(prompts, 1), 2);
	assert_int_equal(prompt_id_at(prompts, 2), 300);
	expected = make_prompt(2, "wide", 1, 6, 0);
	assert_true(json_equal(json_array_get(prompts, 1), expected));
	json_decref(expected);
	json_decref(prompts);
	assert_verify_clean(ar);
	ks_archive_close(ar);

	/* a stored value that is not an object is an error naming its id; verify says so too */
	tamper(root, "prompts", key, 8, "[1, 2]");
	ar = open_reader(root);
	assert_int_equal(ks_archive_prompts(ar, &prompts, &err), -1);
	assert_null(prompts);
	assert_contains(err.msg, "prompt 5 is a list, not a JSON object: the archive is damaged");
	ks_archive_close(ar);
	assert_problem(root, "prompt 5 is a list, not a JSON object");
	tamper(root, "prompts", key, 8, "{\"id\": 4, \"name\": \"moved\"}");
	assert_problem(root, "prompt 5: its \"id\" field says 4");
	test_rmtree(root);
}

static void test_prompts_survive_export_and_import(void **state)
{
	char *root = test_tmpdir(), *root2 = test_tmpdir(), *root3 = test_tmpdir();
	struct ks_archive *ar = open_new(root, 0), *copy, *other;
	struct ks_archive_import_result result;
	struct ks_error err;
	json_t *doc, *exported, *prompts, *original, *stats;
	char *text;

	(void)state;
	fill_lineage(ar);
	put_prompt(ar, make_prompt(1, "vector_loads", 0, 4, 2));
	put_prompt(ar, make_prompt(2, "tile_kv", 0, 2, 0));
	put_prompt(ar, make_prompt(3, "vector_loads_wide", 1, 3, 4));
	original = all_prompts(ar);
	text = export_text(ar, 0);
	doc = json_loads(text, 0, NULL);
	assert_non_null(doc);
	exported = json_object_get(doc, "prompts");
	assert_true(json_is_array(exported));
	assert_true(json_equal(exported, original));

	/* into an empty archive: every prompt, ids and best children as they were */
	copy = open_new(root2, 0);
	assert_int_equal(ks_archive_import(copy, doc, &result, &err), 0);
	assert_int_equal(result.prompts_imported, 3);
	assert_int_equal(result.prompts_skipped, 0);
	prompts = all_prompts(copy);
	assert_true(json_equal(prompts, original));
	json_decref(prompts);
	/* again: the ids are taken, so nothing changes */
	assert_int_equal(ks_archive_import(copy, doc, &result, &err), 0);
	assert_int_equal(result.prompts_imported, 0);
	assert_int_equal(result.prompts_skipped, 3);
	assert_verify_clean(copy);
	ks_archive_close(copy);

	/*
	 * Into an archive with other candidates and a prompt 1 of its own:
	 * that one stays, the others come in with their ids, and a best
	 * child follows its record's new id (4 -> 6).
	 */
	other = open_new(root3, 0);
	insert(other, make_record("ok", 1.0, 2, 0, 1), "another source", NULL);
	insert(other, make_record("ok", 1.0, 2, 0, 2), "another source", NULL);
	put_prompt(other, make_prompt(1, "mine", 0, 1, 0));
	assert_int_equal(ks_archive_import(other, doc, &result, &err), 0);
	assert_int_equal(result.imported, 4);
	assert_int_equal(result.prompts_imported, 2);
	assert_int_equal(result.prompts_skipped, 1);
	prompts = all_prompts(other);
	assert_int_equal(json_array_size(prompts), 3);
	assert_string_equal(json_string_value(json_object_get(json_array_get(prompts, 0), "name")), "mine");
	stats = json_object_get(json_array_get(prompts, 2), "stats");
	assert_int_equal(json_integer_value(json_object_get(stats, "best_child")), 6);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(prompts, 2), "parent")), 1);
	json_decref(prompts);
	assert_verify_clean(other);
	ks_archive_close(other);
	json_decref(doc);
	free(text);
	json_decref(original);
	ks_archive_close(ar);
	test_rmtree(root);
	test_rmtree(root2);
	test_rmtree(root3);
}

static void test_bad_prompt_fails_the_import_and_changes_nothing(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root, 0);

	(void)state;
	fill_lineage(ar);
	put_prompt(ar, make_prompt(1, "vector_loads", 0, 4, 2));
#define PROMPT(id) "{\"id\": " #id ", \"name\": \"p\", \"text\": \"t\", \"stats\": {}}"
	/* the good candidate and the good prompt before the bad one must not be written */
	assert_import_refused(ar,
			      HEAD
			      "\"candidates\": [" GOOD
			      "], \"prompts\": [" PROMPT(2) ", "
							    "{\"id\": 3, \"name\": \"p\", \"stats\": {}}]}",
			      "prompts[1] (id 3): text: expected a string, got nothing");
	assert_import_refused(ar,
			      HEAD "\"candidates\": [" GOOD "], \"prompts\": [" PROMPT(
				      2) ", "
					 "{\"id\": 3, \"name\": 7, \"text\": \"t\", \"stats\": {}}]}",
			      "prompts[1] (id 3): name: expected a string, got an integer");
	assert_import_refused(ar,
			      HEAD "\"candidates\": [], \"prompts\": [{\"id\": 2, \"name\": \"p\", "
				   "\"text\": \"t\", \"stats\": []}]}",
			      "prompts[0] (id 2): stats: expected an object, got a list");
	assert_import_refused(ar, HEAD "\"candidates\": [], \"prompts\": [{\"id\": 0, \"name\": \"p\"}]}",
			      "prompts[0].id: expected an integer >= 1");
	assert_import_refused(ar, HEAD "\"candidates\": [], \"prompts\": [\"advice\"]}",
			      "prompts[0]: expected an object, got a string");
	assert_import_refused(ar, HEAD "\"candidates\": [], \"prompts\": [" PROMPT(2) ", " PROMPT(2) "]}",
			      "prompts: id 2 appears twice");
#undef PROMPT
	assert_verify_clean(ar);
	ks_archive_close(ar);
	test_rmtree(root);
}

/* A grid with a measured axis: launches [1,2) [2,3); dram_fraction [0,0.3) [0.3,0.6) [0.6,1.01). */
static double measured_launch_edges[] = { 1, 2, 3 };
static double dram_edges[] = { 0, 0.3, 0.6, 1.01 };
static struct ks_grid_axis measured_grid[] = {
	{ KS_DESC_LAUNCHES, measured_launch_edges, 3 },
	{ KS_DESC_DRAM_FRACTION, dram_edges, 4 },
};

static struct ks_archive *open_measured(const char *root)
{
	struct ks_archive_options opts = { .flags = KS_ARCHIVE_CREATE | KS_ARCHIVE_NOSYNC,
					   .grid = measured_grid,
					   .n_grid = 2 };
	struct ks_archive *ar;
	struct ks_error err;

	if (ks_archive_open(&ar, root, "measuredop", "Test GPU 9000", &opts, &err) < 0)
		fail_msg("%s", err.msg);
	return ar;
}

/* An ok record with one launch whose dram_fraction is still the stand-in. */
static json_t *standin_record(double fitness, double dram, int splits)
{
	json_t *r = make_record("ok", fitness, 1, 0, splits);

	json_object_set_new(json_object_get(r, "descriptors"), "dram_fraction", json_real(dram));
	return r;
}

static void set_profile(struct ks_archive *ar, uint64_t id, double dram,
			struct ks_archive_profile_result *res)
{
	json_t *profile =
		json_pack("{s:s, s:f, s:f, s:[{s:s, s:f}]}", "workload", "big", "dram_fraction", dram,
			  "achieved_occupancy", 0.3, "stalls", "reason", "long_scoreboard", "share", 0.6);
	struct ks_error err;

	if (ks_archive_set_profile(ar, id, profile, res, &err) < 0)
		fail_msg("%s", err.msg);
	json_decref(profile);
}

static uint64_t elite_of(struct ks_archive *ar, uint64_t cell)
{
	struct ks_archive_elite *elites;
	struct ks_error err;
	uint64_t id = 0;
	size_t n;

	assert_int_equal(ks_archive_elites(ar, &elites, &n, &err), 0);
	for (size_t i = 0; i < n; i++)
		if (elites[i].cell == cell)
			id = elites[i].id;
	free(elites);
	return id;
}

/*
 * A profile lands in the record, its measurements replace the stand-ins,
 * and the candidate moves to its measured cell: the next best of its old
 * cell takes over (or the cell empties), and it competes for the new one;
 * of equal fitness the older record keeps a cell.  The counters always
 * agree with a recount, and an export carries the profile.
 */
static void test_profile_moves_a_candidate_to_its_measured_cell(void **state)
{
	char *root = test_tmpdir(), *root2 = test_tmpdir();
	struct ks_archive *ar = open_measured(root), *copy;
	struct ks_archive_profile_result res;
	struct ks_archive_import_result imported;
	struct ks_archive_metrics m;
	struct ks_error err;
	json_t *rec, *doc;
	char *text;

	(void)state;
	/* cells: dram bin 0 -> cell 0, bin 2 -> cell 2 */
	assert_int_equal(insert(ar, standin_record(2.0, 0.2, 1), "a", NULL), 1);
	assert_int_equal(insert(ar, standin_record(1.5, 0.25, 2), "a", NULL), 2);
	assert_int_equal(insert(ar, standin_record(1.0, 0.7, 3), "a", NULL), 3);
	assert_int_equal(elite_of(ar, 0), 1);
	assert_int_equal(elite_of(ar, 2), 3);

	/* #1 measures 0.75: it leaves cell 0 to #2 and takes cell 2 from #3 */
	set_profile(ar, 1, 0.75, &res);
	assert_true(res.moved);
	assert_int_equal(res.old_cell, 0);
	assert_int_equal(res.cell, 2);
	assert_true(res.left_elite);
	assert_int_equal(res.successor_id, 2);
	assert_int_equal(res.outcome, KS_ARCHIVE_IMPROVED);
	assert_int_equal(res.replaced_id, 3);
	assert_int_equal(elite_of(ar, 0), 2);
	assert_int_equal(elite_of(ar, 2), 1);
	assert_int_equal(ks_archive_metrics(ar, &m, &err), 0);
	assert_int_equal(m.cells_filled, 2);
	assert_true(fabs(m.qd_score - 3.5) < 1e-12);
	assert_int_equal(ks_archive_get(ar, 1, &rec, NULL, &err), 0);
	assert_true(json_number_value(
			    json_object_get(json_object_get(rec, "descriptors"), "dram_fraction")) == 0.75);
	assert_string_equal(json_string_value(json_object_get(json_object_get(rec, "profile"), "workload")),
			    "big");
	json_decref(rec);
	assert_verify_clean(ar);

	/* #2 measures 0.9: nothing is left in cell 0, and #1 keeps cell 2 */
	set_profile(ar, 2, 0.9, &res);
	assert_true(res.left_elite);
	assert_int_equal(res.successor_id, 0);
	assert_int_equal(res.outcome, KS_ARCHIVE_NOT_ADDED);
	assert_int_equal(elite_of(ar, 0), 0);
	assert_int_equal(ks_archive_metrics(ar, &m, &err), 0);
	assert_int_equal(m.cells_filled, 1);
	assert_true(fabs(m.qd_score - 2.0) < 1e-12);
	assert_verify_clean(ar);

	/* the same cell again: nothing moves */
	set_profile(ar, 2, 0.95, &res);
	assert_false(res.moved);
	assert_int_equal(res.outcome, KS_ARCHIVE_NOT_ADDED);

	/* #3 measures 0.1: the empty cell 0 is its own */
	set_profile(ar, 3, 0.1, &res);
	assert_int_equal(res.outcome, KS_ARCHIVE_NEW_CELL);
	assert_false(res.left_elite);
	assert_int_equal(elite_of(ar, 0), 3);

	/* a later record of equal fitness in cell 0 does not replace #3 ... */
	assert_int_equal(insert(ar, standin_record(1.0, 0.15, 4), "a", NULL), 4);
	assert_int_equal(elite_of(ar, 0), 3);
	/* ... but takes over when #3 leaves, and an older record of equal fitness arriving wins */
	set_profile(ar, 3, 0.8, &res);
	assert_int_equal(res.successor_id, 4);
	set_profile(ar, 3, 0.05, &res);
	assert_int_equal(res.outcome, KS_ARCHIVE_IMPROVED);
	assert_int_equal(res.replaced_id, 4);
	assert_verify_clean(ar);

	/* a record that is not ok keeps its profile and is never placed */
	assert_int_equal(insert(ar, make_record("wrong", 0, 1, 0, 5), "a", NULL), 5);
	set_profile(ar, 5, 0.5, &res);
	assert_int_equal(res.outcome, KS_ARCHIVE_NOT_ELIGIBLE);

	/* errors change nothing */
	rec = json_pack("{s:s}", "dram_fraction", "high");
	assert_int_equal(ks_archive_set_profile(ar, 1, rec, NULL, &err), -1);
	assert_contains(err.msg, "profile.dram_fraction: expected a number >= 0");
	json_decref(rec);
	rec = json_pack("{s:f}", "dram_fraction", 0.1);
	assert_int_equal(ks_archive_set_profile(ar, 99, rec, NULL, &err), -1);
	assert_contains(err.msg, "no candidate #99");
	json_decref(rec);
	assert_int_equal(elite_of(ar, 2), 1);
	assert_verify_clean(ar);

	/* an export carries the profiles; an import places by the measured values */
	text = export_text(ar, 0);
	doc = json_loads(text, 0, NULL);
	copy = open_measured(root2);
	assert_int_equal(ks_archive_import(copy, doc, &imported, &err), 0);
	assert_int_equal(elite_of(copy, 0), 3);
	assert_int_equal(elite_of(copy, 2), 1);
	assert_int_equal(ks_archive_get(copy, 1, &rec, NULL, &err), 0);
	assert_non_null(json_object_get(rec, "profile"));
	json_decref(rec);
	assert_verify_clean(copy);
	json_decref(doc);
	free(text);
	ks_archive_close(copy);
	ks_archive_close(ar);
	test_rmtree(root);
	test_rmtree(root2);
}

static void test_gpu_slug_and_env_listing(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive_env *envs;
	struct ks_error err;
	size_t n;
	char *slug;

	(void)state;
	slug = ks_archive_gpu_slug("NVIDIA H200");
	assert_string_equal(slug, "nvidia-h200");
	free(slug);
	slug = ks_archive_gpu_slug("  ../NVIDIA GeForce RTX 4090/ ");
	assert_string_equal(slug, "nvidia-geforce-rtx-4090");
	free(slug);
	assert_int_equal(ks_archive_list_envs(root, &envs, &n, &err), 0);
	assert_int_equal(n, 0);
	ks_archive_close(open_new(root, 0));
	assert_int_equal(ks_archive_list_envs(root, &envs, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(envs[0].op, "testop");
	assert_string_equal(envs[0].gpu_slug, "test-gpu-9000");
	ks_archive_envs_free(envs, n);
	test_rmtree(root);
}

/* A reader that pins a snapshot sees the archive as it was, whatever the writer adds meanwhile. */
static void test_pinned_snapshot_ignores_later_inserts(void **state)
{
	char *root = test_tmpdir();
	struct ks_archive *w = open_new(root, 0), *r;
	struct ks_archive_metrics m;
	struct ks_archive_elite *elites;
	struct ks_archive_qd_point *points;
	json_t *record;
	size_t n;
	struct ks_error err;

	(void)state;
	insert(w, make_record("ok", 1.0, 1, 0, 1), "src a", NULL);
	r = open_reader(root);
	assert_int_equal(ks_archive_pin(r, &err), 0);
	insert(w, make_record("ok", 2.0, 2, 0, 2), "src b", NULL);
	insert(w, make_record("wrong", 0, 2, 0, 3), "src c", NULL);
	assert_int_equal(ks_archive_metrics(r, &m, &err), 0);
	assert_int_equal(m.candidates, 1);
	assert_true(m.best_fitness == 1.0);
	assert_int_equal(ks_archive_elites(r, &elites, &n, &err), 0);
	assert_int_equal(n, 1);
	free(elites);
	assert_int_equal(ks_archive_history(r, 0, &points, &n, &err), 0);
	assert_int_equal(points[n - 1].evals, 1);
	free(points);
	assert_int_equal(ks_archive_get(r, 2, &record, NULL, &err), 0);
	assert_null(record);
	/* pinning twice keeps the first snapshot; unpinning reads the present */
	assert_int_equal(ks_archive_pin(r, &err), 0);
	assert_int_equal(ks_archive_metrics(r, &m, &err), 0);
	assert_int_equal(m.candidates, 1);
	ks_archive_unpin(r);
	assert_int_equal(ks_archive_metrics(r, &m, &err), 0);
	assert_int_equal(m.candidates, 3);
	assert_int_equal(ks_archive_get(r, 2, &record, NULL, &err), 0);
	assert_non_null(record);
	json_decref(record);
	/* closing a pinned archive releases the snapshot */
	assert_int_equal(ks_archive_pin(r, &err), 0);
	ks_archive_close(r);
	ks_archive_close(w);
	test_rmtree(root);
}

static void test_verdict_spans_count_every_record_once(void **state)
{
	static const char *const verdicts[] = { "ok", "wrong", "ok", "compile_error", "ok", "timeout", "ok" };
	char *root = test_tmpdir();
	struct ks_archive *ar = open_new(root, 0);
	struct ks_archive_verdict_span *spans;
	uint64_t total[KS_VERDICT_COUNT] = { 0 };
	size_t n;
	struct ks_error err;

	(void)state;
	assert_int_equal(ks_archive_verdict_spans(ar, 4, &spans, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_null(spans);
	for (int i = 0; i < 7; i++) {
		char source[32];

		snprintf(source, sizeof(source), "src %d", i);
		insert(ar, make_record(verdicts[i], !strcmp(verdicts[i], "ok") ? 1.0 + i : 0, 1, 0, i),
		       source, NULL);
	}
	/* 7 ids in at most 3 spans: width 3, so [1,3] [4,6] [7,7] */
	assert_int_equal(ks_archive_verdict_spans(ar, 3, &spans, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_int_equal(spans[0].first_id, 1);
	assert_int_equal(spans[0].last_id, 3);
	assert_int_equal(spans[2].first_id, 7);
	assert_int_equal(spans[2].last_id, 7);
	assert_int_equal(spans[0].count[KS_VERDICT_OK], 2);
	assert_int_equal(spans[0].count[KS_VERDICT_WRONG], 1);
	assert_int_equal(spans[1].count[KS_VERDICT_COMPILE_ERROR], 1);
	assert_int_equal(spans[1].count[KS_VERDICT_TIMEOUT], 1);
	assert_int_equal(spans[2].count[KS_VERDICT_OK], 1);
	for (size_t i = 0; i < n; i++)
		for (int v = 0; v < KS_VERDICT_COUNT; v++)
			total[v] += spans[i].count[v];
	assert_int_equal(total[KS_VERDICT_OK], 4);
	free(spans);
	/* more spans than ids: one id each */
	assert_int_equal(ks_archive_verdict_spans(ar, 100, &spans, &n, &err), 0);
	assert_int_equal(n, 7);
	assert_int_equal(spans[6].count[KS_VERDICT_OK], 1);
	free(spans);
	ks_archive_close(ar);
	test_rmtree(root);
}

static void set_sanitizer(struct ks_archive *ar, uint64_t id, const char *status,
			  struct ks_archive_sanitizer_result *res)
{
	json_t *check = json_pack("{s:s, s:[s], s:i, s:s}", "status", status, "tools", "memcheck", "errors",
				  strcmp(status, "failed") ? 0 : 1, "first",
				  "Invalid __global__ write of size 4 bytes");
	struct ks_error err;

	if (ks_archive_set_sanitizer(ar, id, check, res, &err) < 0)
		fail_msg("%s", err.msg);
	json_decref(check);
}

static double qd_score(struct ks_archive *ar)
{
	struct ks_archive_metrics m;
	struct ks_error err;

	assert_int_equal(ks_archive_metrics(ar, &m, &err), 0);
	return m.qd_score;
}

/*
 * A failed sanitizer check demotes a record: the next best of its cell
 * takes the cell, the next best record becomes the archive's best, the
 * next fastest the best of each workload it held; later inserts and
 * imports do not place it again, and a clean check undoes it.  The
 * counters agree with a recount throughout.
 */
static void test_failed_sanitizer_check_demotes_a_record(void **state)
{
	char *root = test_tmpdir(), *root2 = ks_path_join(root, "copy"), *doc_text;
	struct ks_archive *ar = open_new(root, 0), *ar2;
	struct ks_archive_sanitizer_result res;
	struct ks_archive_import_result imported;
	struct ks_error err;
	json_t *bests, *record, *doc;
	double qd_before;

	(void)state;
	insert(ar, timed_record("ok", 5.0, 20.0, 80.0, 1), "a", NULL); /* #1: cell 0 */
	insert(ar, timed_record("ok", 7.0, 10.0, 50.0, 2), "a", NULL); /* #2: best, fastest on both */
	insert(ar, timed_record("ok", 4.0, 15.0, 60.0, 3), "b", NULL); /* #3 */
	assert_int_equal(elite_of(ar, 0), 2);
	qd_before = qd_score(ar);

	/* a clean check changes nothing but the record */
	set_sanitizer(ar, 1, "clean", &res);
	assert_false(res.demoted || res.promoted);
	assert_int_equal(ks_archive_get(ar, 1, &record, NULL, &err), 0);
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(record, "sanitizer"), "status")), "clean");
	json_decref(record);

	set_sanitizer(ar, 2, "failed", &res);
	assert_true(res.demoted);
	assert_true(res.left_elite);
	assert_int_equal(res.successor_id, 1);
	assert_true(res.was_best);
	assert_int_equal(res.best_id, 1);
	assert_int_equal(res.workloads_lost, 2);
	assert_int_equal(elite_of(ar, 0), 1);
	assert_true(fabs(qd_score(ar) - (qd_before - 2.0)) < 1e-9);
	assert_int_equal(ks_archive_best(ar, &record, NULL, &err), 0);
	assert_int_equal(ks_record_id(record), 1);
	json_decref(record);
	assert_int_equal(ks_archive_workload_bests(ar, &bests, &err), 0);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(bests, "small"), "id")), 3);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(bests, "big"), "id")), 3);
	json_decref(bests);
	assert_verify_clean(ar);

	/* failing again moves nothing; a profile does not place it again */
	set_sanitizer(ar, 2, "failed", &res);
	assert_false(res.demoted);
	assert_int_equal(elite_of(ar, 0), 1);

	/* an export carries the check, and the import keeps the record demoted */
	doc_text = export_text(ar, 0);
	doc = json_loads(doc_text, 0, NULL);
	assert_non_null(doc);
	ar2 = open_new(root2, 0);
	assert_int_equal(ks_archive_import(ar2, doc, &imported, &err), 0);
	assert_int_equal(elite_of(ar2, 0), 1);
	assert_int_equal(ks_archive_best(ar2, &record, NULL, &err), 0);
	assert_int_equal(ks_record_id(record), 1);
	json_decref(record);
	assert_verify_clean(ar2);
	ks_archive_close(ar2);
	json_decref(doc);
	free(doc_text);

	/* checked clean again, it competes as an insert would */
	set_sanitizer(ar, 2, "clean", &res);
	assert_true(res.promoted);
	assert_int_equal(res.best_id, 2);
	assert_int_equal(res.workloads_gained, 2);
	assert_int_equal(elite_of(ar, 0), 2);
	assert_true(fabs(qd_score(ar) - qd_before) < 1e-9);
	assert_verify_clean(ar);

	/* what is not a check is refused */
	doc = json_pack("{s:s}", "status", "unavailable");
	assert_int_equal(ks_archive_set_sanitizer(ar, 1, doc, NULL, &err), -1);
	assert_non_null(strstr(err.msg, "\"clean\" or \"failed\""));
	json_decref(doc);
	doc = json_pack("{s:s}", "status", "clean");
	assert_int_equal(ks_archive_set_sanitizer(ar, 99, doc, NULL, &err), -1);
	assert_non_null(strstr(err.msg, "no candidate #99"));
	json_decref(doc);
	ks_archive_close(ar);
	free(root2);
	test_rmtree(root);
}

/* A confirmation of record id: "ok" with the small and big workloads timed again, or "failed". */
static void set_confirmation(struct ks_archive *ar, uint64_t id, const char *status, double small_us,
			     double big_us, struct ks_archive_confirmation_result *res)
{
	json_t *doc = strcmp(status, "ok") ? json_pack("{s:s, s:s, s:s}", "status", status, "failed_as",
						       "wrong", "why", "y[3]: 7 != 1")
					   : json_pack("{s:s, s:{s:f, s:f}}", "status", status, "times_us",
						       "small", small_us, "big", big_us);
	struct ks_error err;

	if (ks_archive_set_confirmation(ar, id, doc, res, &err) < 0)
		fail_msg("%s", err.msg);
	json_decref(doc);
}

static uint64_t best_of_workload(struct ks_archive *ar, const char *workload, double *us)
{
	struct ks_error err;
	json_t *bests;
	uint64_t id;

	assert_int_equal(ks_archive_workload_bests(ar, &bests, &err), 0);
	id = (uint64_t)json_integer_value(json_object_get(json_object_get(bests, workload), "id"));
	if (us)
		*us = json_number_value(json_object_get(json_object_get(bests, workload), "median_us"));
	json_decref(bests);
	return id;
}

/*
 * A confirmation ranks a record among each workload's bests by the slower
 * of its two times: a best that was lucky gives its place to the next
 * fastest; one that was not keeps it, at its slower time; one whose
 * confirmation failed holds none.  The grid, the best and the fitness stand;
 * verify, export and import agree.
 */
static void test_confirmation_ranks_a_record_by_its_slower_time(void **state)
{
	char *root = test_tmpdir(), *root2 = ks_path_join(root, "copy"), *doc_text;
	struct ks_archive *ar = open_new(root, 0), *ar2;
	struct ks_archive_confirmation_result res;
	struct ks_archive_import_result imported;
	struct ks_error err;
	json_t *record, *doc;
	double us, qd_before;

	(void)state;
	insert(ar, timed_record("ok", 5.0, 20.0, 80.0, 1), "a", NULL); /* #1 */
	insert(ar, timed_record("ok", 7.0, 10.0, 50.0, 2), "a", NULL); /* #2: fastest on both */
	insert(ar, timed_record("ok", 4.0, 15.0, 60.0, 3), "b", NULL); /* #3: second on both */
	qd_before = qd_score(ar);
	assert_int_equal(best_of_workload(ar, "small", NULL), 2);

	/* #2 was lucky on small (25 us again) and not on big (51 us again) */
	set_confirmation(ar, 2, "ok", 25.0, 51.0, &res);
	assert_int_equal(res.workloads_lost, 1);
	assert_int_equal(res.workloads_held, 1);
	assert_int_equal(best_of_workload(ar, "small", &us), 3);
	assert_true(us == 15.0);
	assert_int_equal(best_of_workload(ar, "big", &us), 2);
	assert_true(us == 51.0); /* the slower of 50 and 51 */
	assert_int_equal(ks_archive_best(ar, &record, NULL, &err), 0);
	assert_int_equal(ks_record_id(record), 2); /* the fitness and the grid stand */
	assert_non_null(json_object_get(record, "confirmation"));
	json_decref(record);
	assert_int_equal(elite_of(ar, 0), 2);
	assert_true(fabs(qd_score(ar) - qd_before) < 1e-9);
	assert_verify_clean(ar);

	/* a later insert competes with the slower time: 50.5 beats #2's 51 */
	insert(ar, timed_record("ok", 3.0, 40.0, 50.5, 4), "c", NULL); /* #4 */
	assert_int_equal(best_of_workload(ar, "big", NULL), 4);
	assert_verify_clean(ar);

	/* #4 failed when timed again: it holds no workload */
	set_confirmation(ar, 4, "failed", 0, 0, &res);
	assert_int_equal(res.workloads_lost, 1);
	assert_int_equal(res.workloads_held, 0);
	assert_int_equal(best_of_workload(ar, "big", NULL), 2);
	assert_verify_clean(ar);

	/* an export carries the confirmations, and the import ranks by them */
	doc_text = export_text(ar, 0);
	doc = json_loads(doc_text, 0, NULL);
	assert_non_null(doc);
	ar2 = open_new(root2, 0);
	assert_int_equal(ks_archive_import(ar2, doc, &imported, &err), 0);
	assert_int_equal(best_of_workload(ar2, "small", NULL), 3);
	assert_int_equal(best_of_workload(ar2, "big", &us), 2);
	assert_true(us == 51.0);
	assert_verify_clean(ar2);
	ks_archive_close(ar2);
	json_decref(doc);
	free(doc_text);

	/* what is not a confirmation is refused, and nothing changes */
	doc = json_pack("{s:s}", "status", "maybe");
	assert_int_equal(ks_archive_set_confirmation(ar, 1, doc, NULL, &err), -1);
	assert_non_null(strstr(err.msg, "\"ok\" or \"failed\""));
	json_decref(doc);
	doc = json_pack("{s:s}", "status", "ok");
	assert_int_equal(ks_archive_set_confirmation(ar, 1, doc, NULL, &err), -1);
	assert_non_null(strstr(err.msg, "\"times_us\""));
	json_decref(doc);
	doc = json_pack("{s:s, s:{}}", "status", "ok", "times_us");
	assert_int_equal(ks_archive_set_confirmation(ar, 99, doc, NULL, &err), -1);
	assert_non_null(strstr(err.msg, "no candidate #99"));
	json_decref(doc);
	assert_int_equal(best_of_workload(ar, "small", NULL), 3);
	ks_archive_close(ar);
	free(root2);
	test_rmtree(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_insert_reports_new_cell_improved_and_not_added),
		cmocka_unit_test(test_bad_records_are_refused_and_nothing_written),
		cmocka_unit_test(test_grid_placement_and_elites),
		cmocka_unit_test(test_workload_bests_and_dispatch_fitness),
		cmocka_unit_test(test_confirmation_ranks_a_record_by_its_slower_time),
		cmocka_unit_test(test_dedup_lookup_ignores_param_order),
		cmocka_unit_test(test_metrics_kept_incrementally_match_a_recount),
		cmocka_unit_test(test_foreach_orders_filters_and_limits),
		cmocka_unit_test(test_get_and_best_return_record_and_source),
		cmocka_unit_test(test_schema_version_mismatch_names_the_version),
		cmocka_unit_test(test_environment_without_meta_says_how_to_copy),
		cmocka_unit_test(test_damaged_files_give_clear_errors),
		cmocka_unit_test(test_missing_archive_and_grid_mismatch),
		cmocka_unit_test(test_export_import_round_trip),
		cmocka_unit_test(test_verify_names_what_is_wrong),
		cmocka_unit_test(test_malformed_import_leaves_archive_unchanged),
		cmocka_unit_test(test_map_grows_from_a_tiny_start),
		cmocka_unit_test(test_stale_reader_slots_are_cleared_on_open),
		cmocka_unit_test(test_state_prompts_and_compile_cache),
		cmocka_unit_test(test_prompts_lists_every_prompt_in_id_order),
		cmocka_unit_test(test_prompts_survive_export_and_import),
		cmocka_unit_test(test_bad_prompt_fails_the_import_and_changes_nothing),
		cmocka_unit_test(test_profile_moves_a_candidate_to_its_measured_cell),
		cmocka_unit_test(test_gpu_slug_and_env_listing),
		cmocka_unit_test(test_pinned_snapshot_ignores_later_inserts),
		cmocka_unit_test(test_verdict_spans_count_every_record_once),
		cmocka_unit_test(test_failed_sanitizer_check_demotes_a_record),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
