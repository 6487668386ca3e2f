/*
 * test_search.c - the search loop behind a deterministic test backend:
 * the same seed makes the same choices, a resumed search continues the
 * same sequence, budgets and targets stop it, failures cost one
 * evaluation, and (source, params) pairs are never evaluated twice.
 */
#include "testlib.h"

#include <pthread.h>

#include "ksearch/archive.h"
#include "ksearch/search.h"
#include "ksearch/util.h"

static const char op_json[] =
	"{\"name\": \"toy\", \"axes\": {\"n\": {\"type\": \"var\"}},\n"
	" \"inputs\": {\"x\": {\"shape\": [\"n\"], \"dtype\": \"float32\"}},\n"
	" \"outputs\": {\"y\": {\"shape\": [\"n\"], \"dtype\": \"float32\"}},\n"
	" \"ksearch\": {\"generators\": {\"x\": {\"kind\": \"normal\"}},\n"
	"   \"workloads\": [{\"id\": \"n1024\", \"axes\": {\"n\": 1024}}],\n"
	"   \"check_workloads\": [{\"id\": \"n3\", \"axes\": {\"n\": 3}}],\n"
	"   \"tolerances\": {\"y\": {\"atol\": 0, \"rtol\": 0}},\n"
	"   \"min_bytes\": \"8*n\", \"flops\": \"n\",\n"
	"   \"grid\": [{\"descriptor\": \"occupancy\", \"edges\": [0, 0.25, 0.5, 0.75, 1.01]},\n"
	"            {\"descriptor\": \"registers\", \"edges\": [0, 32, 64, 128, 256]}]}}\n";

static const char seed_a[] =
	"/* ksearch {\"params\": {\"A\": [1, 2, 3, 4, 5, 6], \"B\": [1, 2, 3, 4]},\n"
	"  \"launch\": [{\"kernel\": \"a\", \"grid\": [\"n\"], \"block\": [\"32*A\"], \"args\": [\"x\", \"y\", \"n\"]}]} */\n"
	"extern \"C\" __global__ void a(const float *x, float *y, int n) {}\n";
static const char seed_b[] =
	"/* ksearch {\"params\": {\"C\": [1, 2, 3, 4, 5, 6, 7, 8]},\n"
	"  \"launch\": [{\"kernel\": \"b\", \"grid\": [\"n\"], \"block\": [\"64\"], \"args\": [\"x\", \"y\", \"n\"]}]} */\n"
	"extern \"C\" __global__ void b(const float *x, float *y, int n) {}\n";

/* ---- a deterministic backend: results are functions of (family, params) ---- */

struct toy {
	pthread_mutex_t lock;
	int builds, evaluations;
	int fail_internal_at; /* evaluation number that fails ksearch itself, or 0 */
};

static uint64_t toy_hash(const struct ks_family *f, const int64_t *params)
{
	uint64_t h = 1469598103934665603ull;

	for (const char *c = f->name; *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ull;
	for (size_t i = 0; i < f->cand.n_params; i++)
		h = (h ^ (uint64_t)params[i]) * 1099511628211ull;
	return h;
}

static int toy_build(void *ctx, const struct ks_family *f, const int64_t *params, void **built,
		     json_t **record, struct ks_error *err)
{
	struct toy *t = ctx;
	uint64_t h = toy_hash(f, params);

	(void)err;
	pthread_mutex_lock(&t->lock);
	t->builds++;
	pthread_mutex_unlock(&t->lock);
	if (h % 11 == 0) {
		*built = NULL;
		*record = json_pack("{s:s, s:s}", "verdict", "compile_error", "evidence", "toy: h % 11");
		return 0;
	}
	*built = malloc(1);
	*record = NULL;
	return 0;
}

static int toy_evaluate(void *ctx, int lane, const struct ks_family *f, const int64_t *params,
			void *built, json_t **record, struct ks_error *err)
{
	struct toy *t = ctx;
	uint64_t h = toy_hash(f, params);
	double fitness = 0.5 + (double)(h % 1000) / 250.0;
	int n;

	(void)lane;
	free(built);
	pthread_mutex_lock(&t->lock);
	n = ++t->evaluations;
	pthread_mutex_unlock(&t->lock);
	/* vary the order results come back in; insertion order must not care */
	usleep((useconds_t)(h % 7) * 300);
	if (t->fail_internal_at && n == t->fail_internal_at)
		return ks_fail(err, "toy: the GPU fell off the bus");
	if (h % 13 == 0) {
		*record = json_pack("{s:s, s:s}", "verdict", "crash", "evidence", "toy: h % 13");
		return 0;
	}
	*record = json_pack("{s:s, s:s, s:f, s:f, s:{s:f, s:f, s:f}}", "verdict", "ok", "evidence", "",
			    "fitness", fitness, "sol_fraction", fitness / 10,
			    "descriptors", "occupancy", (double)(h % 97) / 97.0,
			    "registers", (double)(16 + (h >> 8) % 200), "launches", 1.0);
	return 0;
}

static void toy_discard(void *ctx, void *built)
{
	(void)ctx;
	free(built);
}

struct fixture {
	char *dir;
	struct ks_op op;
	struct ks_family *families;
	size_t n_families;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct ks_error err;
	char path[4200];

	f->dir = test_tmpdir();
	test_write(f->dir, "op.json", op_json);
	test_write(f->dir, "reference.cu", seed_b);
	snprintf(path, sizeof(path), "%s/seeds", f->dir);
	assert_int_equal(mkdir(path, 0755), 0);
	test_write(f->dir, "seeds/a.cu", seed_a);
	test_write(f->dir, "seeds/b.cu", seed_b);
	if (ks_op_load(f->dir, &f->op, &err) < 0 || ks_families_load(&f->op, &f->families, &f->n_families, &err) < 0)
		fail_msg("%s", err.msg);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	ks_families_free(f->families, f->n_families);
	ks_op_release(&f->op);
	test_rmtree(f->dir);
	free(f);
	return 0;
}

static struct ks_archive *open_archive(struct fixture *f, const char *name)
{
	struct ks_archive_options opts = { .flags = KS_ARCHIVE_CREATE | KS_ARCHIVE_NOSYNC,
					   .grid = f->op.grid, .n_grid = f->op.n_grid };
	struct ks_archive *ar;
	struct ks_error err;
	char root[4200];

	snprintf(root, sizeof(root), "%s/%s", f->dir, name);
	if (ks_archive_open(&ar, root, "toy", "Toy GPU", &opts, &err) < 0)
		fail_msg("%s", err.msg);
	return ar;
}

/*
 * Run a search and return its choices, one line per evaluation:
 * "seq family params mutation", in insertion order (from the JSON log).
 */
static char *run(struct fixture *f, const char *archive, uint64_t seed, uint64_t budget, double target,
		 struct toy *toy, int expect_rc, struct ks_search_summary *sum, struct ks_error *err)
{
	struct ks_backend backend = { .ctx = toy, .lanes = 2, .build = toy_build, .evaluate = toy_evaluate,
				      .discard = toy_discard };
	struct ks_search_config cfg = { .seed = seed, .budget = budget, .target_fitness = target, .jobs = 3,
					.explore = 0.3, .exploit = 0.5, .recent = 0.2 };
	struct ks_archive *ar = open_archive(f, archive);
	char *log_text = NULL;
	size_t log_size = 0;
	struct ks_strbuf choices;
	char *line, *save = NULL;
	int rc;

	cfg.log = open_memstream(&log_text, &log_size);
	rc = ks_search_run(ar, &f->op, f->families, f->n_families, &backend, &cfg, sum, err);
	fclose(cfg.log);
	ks_archive_close(ar);
	if (rc != expect_rc)
		fail_msg("search returned %d, expected %d: %s", rc, expect_rc, err->msg);
	ks_strbuf_init(&choices);
	for (line = strtok_r(log_text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_t *ev = json_loads(line, 0, NULL);
		char *params;

		assert_non_null(ev);
		if (!strcmp(json_string_value(json_object_get(ev, "event")), "result")) {
			params = json_dumps(json_object_get(ev, "params"), JSON_COMPACT | JSON_SORT_KEYS);
			ks_strbuf_addf(&choices, "%lld %s %s %s\n",
				       (long long)json_integer_value(json_object_get(ev, "seq")),
				       json_string_value(json_object_get(ev, "family")), params,
				       json_string_value(json_object_get(ev, "mutation")));
			free(params);
		}
		json_decref(ev);
	}
	free(log_text);
	return ks_strbuf_detach(&choices);
}

static int count_lines(const char *text)
{
	int n = 0;

	for (; *text; text++)
		n += *text == '\n';
	return n;
}

static void test_same_seed_same_choices(void **state)
{
	struct fixture *f = *state;
	struct toy t1 = { .lock = PTHREAD_MUTEX_INITIALIZER }, t2 = { .lock = PTHREAD_MUTEX_INITIALIZER },
		   t3 = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct ks_search_summary sum;
	struct ks_error err;
	char *a = run(f, "det1", 7, 30, 0, &t1, 0, &sum, &err);
	char *b = run(f, "det2", 7, 30, 0, &t2, 0, &sum, &err);
	char *c = run(f, "det3", 8, 30, 0, &t3, 0, &sum, &err);

	if (count_lines(a) != 30)
		fail_msg("%d lines, %llu evaluated:\n%s", count_lines(a), (unsigned long long)sum.evaluated, a);
	assert_string_equal(sum.stop_reason, "budget");
	assert_string_equal(a, b);
	assert_string_not_equal(a, c); /* the seed matters */
	/* seeds first: both families with their first params */
	assert_contains(a, "0 a {\"A\":1,\"B\":1} seed\n1 b {\"C\":1} seed\n");
	assert_contains(a, " param\n");
	free(a);
	free(b);
	free(c);
}

static void test_resume_continues_the_same_sequence(void **state)
{
	struct fixture *f = *state;
	struct toy t1 = { .lock = PTHREAD_MUTEX_INITIALIZER }, t2 = { .lock = PTHREAD_MUTEX_INITIALIZER },
		   t3 = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct ks_search_summary sum;
	struct ks_error err;
	char *whole = run(f, "res1", 11, 26, 0, &t1, 0, &sum, &err);
	char *first = run(f, "res2", 11, 11, 0, &t2, 0, &sum, &err);
	char *second, *joined;

	assert_int_equal(sum.resumed, 0);
	second = run(f, "res2", 11, 15, 0, &t3, 0, &sum, &err);
	assert_int_equal(sum.resumed, 1);
	assert_int_equal(sum.resumed_from, 11);
	joined = malloc(strlen(first) + strlen(second) + 1);
	strcpy(joined, first);
	strcat(joined, second);
	if (strcmp(joined, whole))
		fail_msg("a search stopped after 11 and resumed for 15 chose differently from one run of 26:\n"
			 "--- stopped and resumed:\n%s--- one run:\n%s", joined, whole);
	free(whole);
	free(first);
	free(second);
	free(joined);
}

static void test_no_duplicates_and_failures_cost_one_evaluation(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct ks_search_summary sum;
	struct ks_error err;
	/* 6*4 + 8 = 32 combinations: more budget than space */
	char *all = run(f, "dup", 3, 100, 0, &t, 0, &sum, &err);
	char *line, *save = NULL;
	char *seen[64];
	int n = 0;

	assert_string_equal(sum.stop_reason, "exhausted");
	assert_int_equal(sum.evaluated, 32);
	assert_true(sum.by_verdict[KS_VERDICT_COMPILE_ERROR] + sum.by_verdict[KS_VERDICT_CRASH] > 0);
	for (line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *what = strchr(line, ' ') + 1; /* family and params */
		char key[128];

		snprintf(key, sizeof(key), "%.*s", (int)(strrchr(what, ' ') - what), what);
		for (int i = 0; i < n; i++)
			if (!strcmp(seen[i], key))
				fail_msg("evaluated twice: %s", key);
		seen[n++] = strdup(key);
	}
	assert_int_equal(n, 32);
	for (int i = 0; i < n; i++)
		free(seen[i]);
	free(all);
}

static void test_target_stops_and_internal_failure_is_reported(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER }, bad = { .lock = PTHREAD_MUTEX_INITIALIZER,
								     .fail_internal_at = 5 };
	struct ks_search_summary sum;
	struct ks_error err;
	char *out = run(f, "target", 5, 100, 2.0, &t, 0, &sum, &err);

	assert_string_equal(sum.stop_reason, "target");
	assert_true(sum.evaluated < 32);
	free(out);
	out = run(f, "internal", 5, 100, 0, &bad, -1, &sum, &err);
	assert_contains(err.msg, "the GPU fell off the bus");
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_seed_same_choices),
		cmocka_unit_test(test_resume_continues_the_same_sequence),
		cmocka_unit_test(test_no_duplicates_and_failures_cost_one_evaluation),
		cmocka_unit_test(test_target_stops_and_internal_failure_is_reported),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
