/*
 * test_search.c - the search loop behind a deterministic test backend:
 * the same seed makes the same choices, a resumed search continues the
 * same sequence, budgets and targets stop it, failures cost one
 * evaluation, and (source, params) pairs are never evaluated twice.
 */
#include "testlib.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <signal.h>

#include "fakellm.h"
#include "ksearch/archive/archive.h"
#include "ksearch/archive/record.h"
#include "ksearch/llm/llm.h"
#include "ksearch/search/mutator.h"
#include "ksearch/search/mutator_knobs.h"
#include "ksearch/search/mutator_llm.h"
#include "ksearch/search/search.h"
#include "ksearch/base/sha256.h"
#include "ksearch/base/util.h"

/* distinctive, so that a leak anywhere is found by strstr */
#define KEY "sk-ksearch-SEARCH-TEST-91c4e7a2"

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

static const char seed_a[] = "/* ksearch {\"params\": {\"A\": [1, 2, 3, 4, 5, 6], \"B\": [1, 2, 3, 4]},\n"
			     "  \"launch\": [{\"kernel\": \"a\", \"grid\": [\"n\"], \"block\": [\"32*A\"], "
			     "\"args\": [\"x\", \"y\", \"n\"]}]} */\n"
			     "extern \"C\" __global__ void a(const float *x, float *y, int n) {}\n";
static const char seed_b[] = "/* ksearch {\"params\": {\"C\": [1, 2, 3, 4, 5, 6, 7, 8]},\n"
			     "  \"launch\": [{\"kernel\": \"b\", \"grid\": [\"n\"], \"block\": [\"64\"], "
			     "\"args\": [\"x\", \"y\", \"n\"]}]} */\n"
			     "extern \"C\" __global__ void b(const float *x, float *y, int n) {}\n";

/* ---- a deterministic backend: results are functions of (family, params) ---- */

struct toy {
	pthread_mutex_t lock;
	int builds, evaluations;
	int profiles;			       /* profile calls */
	enum ks_profile_status profile_status; /* what a profile comes back with */
	int sanitizes;			       /* sanitize calls */
	int sanitize_fail_first;	       /* this many checks fail (FAILED), the rest come back clean */
	enum ks_sanitize_status sanitize_status; /* or, when not CLEAN, what every check comes back with */
	int fail_internal_at;			 /* evaluation number that fails ksearch itself, or 0 */
	int eval_us;	       /* extra time per evaluation, so LLM answers arrive during a run */
	int by_first_param;    /* builds fingerprint their binary by family and first param only */
	double last_profile_s; /* when the latest profile started (ks_now_s()) */
	double held_s;	       /* profiles and checks say they held their GPU this long (else 0: unknown) */
	/*
	 * With backlog: a build's GPUs are busy (1) or idle (0) by its hash, and
	 * the first evaluation waits for hold_builds builds, so that the lane
	 * then chooses among all of them; the classes of the builds evaluated,
	 * in order.
	 */
	int backlog, hold_builds;
	char classes[64];
	int n_classes;
	/*
	 * With luck: every ok result times workload n1024 at 100 / fitness us,
	 * except the first evaluation of one (family, params) in three, which
	 * drew lucky splits and took half that.
	 */
	int luck; /* 2: workload n2048 too, lucky on (h % 3 == 1) */
	uint64_t seen[1024];
	int n_seen;
	/*
	 * With main set (the thread that runs the search), builds made by a
	 * lane thread: one that has evaluated and is not main, whose GPU would
	 * wait for the compile.
	 */
	int has_main;
	pthread_t main;
	int lane_builds;
	int main_builds; /* and builds made by main itself: the run's last confirmations run there */
};

/* Has this thread evaluated (toy_evaluate())?  Lanes have; build threads never do. */
static _Thread_local int toy_evaluated;

/* With by_first_param, the toy's binary: family a's B (or nothing of b's C but C itself) changes none. */
static void toy_binary(const struct ks_family *f, const int64_t *params, char *hex)
{
	char text[64];
	unsigned char key[KS_SHA256_LEN];

	snprintf(text, sizeof(text), "%s %lld", f->name, (long long)params[0]);
	ks_sha256(text, strlen(text), key);
	ks_hex(key, KS_SHA256_LEN, hex);
}

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
		     struct ks_result *res, struct ks_error *err)
{
	struct toy *t = ctx;
	uint64_t h = toy_hash(f, params);

	(void)err;
	pthread_mutex_lock(&t->lock);
	t->builds++;
	if (t->has_main && toy_evaluated && !pthread_equal(pthread_self(), t->main))
		t->lane_builds++;
	if (t->has_main && pthread_equal(pthread_self(), t->main))
		t->main_builds++;
	pthread_mutex_unlock(&t->lock);
	if (h % 11 == 0) {
		*built = NULL;
		ks_result_fail(res, KS_VERDICT_COMPILE_ERROR, "toy: h %% 11");
		return 0;
	}
	if (t->by_first_param)
		toy_binary(f, params, res->binary);
	*built = malloc(1);
	*(char *)*built = (char)(h % 2);
	return 0;
}

static double toy_backlog(void *ctx, const void *built)
{
	(void)ctx;
	return *(const char *)built;
}

/* A workload of several requests timed at 100 / fitness us, half that on a lucky draw. */
static void lucky_workload(struct ks_result *res, const char *id, double fitness, int lucky)
{
	struct ks_result_workload *w = ks_result_add_workload(res, id);

	w->median_us = 100.0 / fitness * (lucky ? 0.5 : 1.0);
	w->n_splits = 3; /* luck is in its splits */
	for (int k = 0; k < 3; k++) {
		snprintf(w->splits[k].kind, sizeof(w->splits[k].kind), "%s",
			 k == 0	  ? "even"
			 : k == 1 ? "skewed"
				  : "uniform");
		w->splits[k].median_us = w->median_us;
	}
	w->ref_median_us = 100.0;
	w->speedup = w->ref_median_us / w->median_us;
}

static int toy_evaluate(void *ctx, int lane, const struct ks_family *f, const int64_t *params, void *built,
			struct ks_result *res, struct ks_error *err)
{
	struct toy *t = ctx;
	uint64_t h = toy_hash(f, params);
	double fitness = 0.5 + (double)(h % 1000) / 250.0;
	int n;

	(void)lane;
	toy_evaluated = 1;
	pthread_mutex_lock(&t->lock);
	n = ++t->evaluations;
	if (t->n_classes < (int)sizeof(t->classes))
		t->classes[t->n_classes++] = *(char *)built;
	pthread_mutex_unlock(&t->lock);
	free(built);
	for (double t0 = ks_now_s(); n == 1 && t->hold_builds && ks_now_s() - t0 < 5;) {
		int builds;

		pthread_mutex_lock(&t->lock);
		builds = t->builds;
		pthread_mutex_unlock(&t->lock);
		if (builds >= t->hold_builds)
			break;
		usleep(1000);
	}
	/* vary the order results come back in; insertion order must not care */
	usleep((useconds_t)(h % 7) * 300 + (useconds_t)t->eval_us);
	if (t->fail_internal_at && n == t->fail_internal_at)
		return ks_fail(err, "toy: the GPU fell off the bus");
	if (h % 13 == 0) {
		ks_result_fail(res, KS_VERDICT_CRASH, "toy: h %% 13");
		return 0;
	}
	res->verdict = KS_VERDICT_OK;
	res->has = KS_RESULT_BUILT | KS_RESULT_EVALUATED;
	res->fitness = fitness;
	res->sol_fraction = fitness / 10;
	res->descriptors[KS_DESC_OCCUPANCY] = (double)(h % 97) / 97.0;
	res->descriptors[KS_DESC_REGISTERS] = (double)(16 + (h >> 8) % 200);
	res->descriptors[KS_DESC_LAUNCHES] = 1.0;
	if (t->luck) {
		int first = 1;

		pthread_mutex_lock(&t->lock);
		for (int i = 0; i < t->n_seen; i++)
			first &= t->seen[i] != h;
		if (first && t->n_seen < (int)(sizeof(t->seen) / sizeof(t->seen[0])))
			t->seen[t->n_seen++] = h;
		pthread_mutex_unlock(&t->lock);
		lucky_workload(res, "n1024", fitness, first && h % 3 == 0);
		if (t->luck == 2) /* a second such workload, lucky on other draws */
			lucky_workload(res, "n2048", fitness, first && h % 3 == 1);
	}
	return 0;
}

/* Profiles in a millisecond: dram_fraction from (family, params), or the status the toy is set to. */
static int toy_profile(void *ctx, int lane, const struct ks_family *f, const int64_t *params,
		       const volatile sig_atomic_t *cancel, struct ks_profile_outcome *out,
		       struct ks_error *err)
{
	struct toy *t = ctx;
	uint64_t h = toy_hash(f, params);

	(void)lane;
	(void)cancel;
	(void)err;
	pthread_mutex_lock(&t->lock);
	t->profiles++;
	t->last_profile_s = ks_now_s();
	pthread_mutex_unlock(&t->lock);
	usleep(1000);
	memset(out, 0, sizeof(*out));
	out->status = t->profile_status;
	if (out->status == KS_PROFILE_NO_PERMISSION)
		snprintf(out->why, sizeof(out->why),
			 "ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM)");
	else if (out->status != KS_PROFILE_OK)
		snprintf(out->why, sizeof(out->why), "toy: it crashed under the profiler");
	snprintf(out->profile.tool, sizeof(out->profile.tool), "toy-ncu");
	snprintf(out->profile.workload, sizeof(out->profile.workload), "n1024");
	out->profile.launches = 1;
	out->profile.dram_fraction = (double)(h % 100) / 100.0;
	out->profile.achieved_occupancy = 0.25;
	out->profile.seconds = 0.001;
	out->held_s = t->held_s;
	return 0;
}

/* Sanitizer checks in two milliseconds: the first sanitize_fail_first fail, or all come back sanitize_status.
 */
static int toy_sanitize(void *ctx, int lane, const struct ks_family *f, const int64_t *params,
			const volatile sig_atomic_t *cancel, struct ks_sanitize_outcome *out,
			struct ks_error *err)
{
	struct toy *t = ctx;
	int n;

	(void)lane;
	(void)f;
	(void)params;
	(void)cancel;
	(void)err;
	pthread_mutex_lock(&t->lock);
	n = ++t->sanitizes;
	pthread_mutex_unlock(&t->lock);
	usleep(2000);
	memset(out, 0, sizeof(*out));
	out->status = t->sanitize_status;
	if (out->status == KS_SANITIZE_CLEAN && n <= t->sanitize_fail_first)
		out->status = KS_SANITIZE_FAILED;
	snprintf(out->check.version, sizeof(out->check.version), "toy-sanitizer 1.0");
	snprintf(out->check.tools[0], sizeof(out->check.tools[0]), "memcheck");
	out->check.n_tools = 1;
	snprintf(out->check.workloads[0], sizeof(out->check.workloads[0]), "n1024");
	out->check.n_workloads = 1;
	out->check.seconds = 0.002;
	out->held_s = t->held_s;
	if (out->status == KS_SANITIZE_FAILED) {
		out->check.errors = 1;
		snprintf(out->check.first, sizeof(out->check.first),
			 "Invalid __global__ write of size 4 bytes");
		snprintf(out->check.first_tool, sizeof(out->check.first_tool), "memcheck");
	} else if (out->status == KS_SANITIZE_UNAVAILABLE) {
		snprintf(out->why, sizeof(out->why),
			 "compute-sanitizer cannot check on this machine: Device not supported");
	} else if (out->status == KS_SANITIZE_INCOMPLETE) {
		snprintf(out->why, sizeof(out->why), "memcheck did not finish within 300 s (killed)");
	}
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
	if (ks_op_load(f->dir, &f->op, &err) < 0 ||
	    ks_families_load(&f->op, &f->families, &f->n_families, &err) < 0)
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

/* A seed that loads but does not bind (an argument the op lacks): -1, naming it, and nothing held. */
static void test_a_seed_that_fails_to_bind_fails_the_load_and_holds_nothing(void **state)
{
	static const char unbound[] =
		"/* ksearch {\"params\": {\"D\": [1, 2]},\n"
		"  \"launch\": [{\"kernel\": \"c\", \"grid\": [\"n\"], \"block\": [\"32\"], "
		"\"args\": [\"x\", \"nonesuch\", \"n\"]}]} */\n"
		"extern \"C\" __global__ void c(const float *x, float *y, int n) {}\n";
	struct fixture *f = *state;
	struct ks_op op;
	struct ks_family *families = (struct ks_family *)1;
	size_t n = 7;
	struct ks_error err;
	char path[4200];

	test_write(f->dir, "seeds/c.cu", unbound); /* after a.cu and b.cu: two families to free */
	if (ks_op_load(f->dir, &op, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(ks_families_load(&op, &families, &n, &err), -1);
	assert_non_null(strstr(err.msg, "c.cu"));
	assert_non_null(strstr(err.msg, "nonesuch"));
	assert_null(families);
	assert_int_equal(n, 0);
	ks_op_release(&op);
	snprintf(path, sizeof(path), "%s/seeds/c.cu", f->dir);
	assert_int_equal(unlink(path), 0); /* the group's fixture is shared */
}

static struct ks_archive *open_archive(struct fixture *f, const char *name)
{
	struct ks_archive_options opts = { .flags = KS_ARCHIVE_CREATE | KS_ARCHIVE_NOSYNC,
					   .grid = f->op.grid,
					   .n_grid = f->op.n_grid };
	struct ks_archive *ar;
	struct ks_error err;
	char root[4200];

	snprintf(root, sizeof(root), "%s/%s", f->dir, name);
	if (ks_archive_open(&ar, root, "toy", "Toy GPU", &opts, &err) < 0)
		fail_msg("%s", err.msg);
	return ar;
}

/*
 * Run a search with the mutators first (NULL-terminated; NULL: none)
 * before the built-in one, as evolve orders them, and return its choices,
 * one line per evaluation: "seq family params mutation", in insertion
 * order (from the JSON log).  *log, when asked for, gets the log.
 */
/* The share of map-elites proposals that climb in run_with()'s searches: 0, as in the pinned runs. */
static double test_climb;
/* The toy backend's evaluator generation (search.h): 0, none to tell, but where a test sets it. */
static int test_evaluator;
/* run_with()'s compile jobs and lanes: 3 and 2, but where a test sets them. */
static int test_jobs = 3, test_lanes = 2;

static char *run_with(struct fixture *f, const char *archive, uint64_t seed, uint64_t budget, double target,
		      struct ks_mutator *const *first, struct toy *toy, int expect_rc,
		      struct ks_search_summary *sum, struct ks_error *err, char **log)
{
	const struct ks_mutator *mutators[8];
	size_t n_mutators = 0;

	struct ks_backend backend = { .ctx = toy,
				      .lanes = test_lanes,
				      .evaluator = test_evaluator,
				      .build = toy_build,
				      .evaluate = toy_evaluate,
				      .discard = toy_discard,
				      .backlog = toy->backlog ? toy_backlog : NULL };
	struct ks_search_config cfg = { .seed = seed,
					.budget = budget,
					.target_fitness = target,
					.jobs = test_jobs,
					.explore = 0.3,
					.exploit = 0.5,
					.recent = 0.2,
					.climb = test_climb,
					.mutators = mutators };
	struct ks_archive *ar = open_archive(f, archive);
	char *log_text = NULL, log_path[4200] = "";
	size_t log_size = 0;
	struct ks_strbuf choices;
	char *line, *save = NULL;
	int rc;

	for (size_t i = 0; first && first[i] && n_mutators < 7; i++)
		mutators[n_mutators++] = first[i];
	mutators[n_mutators++] = &ks_mutator_param;
	cfg.n_mutators = n_mutators;
	cfg.log = open_memstream(&log_text, &log_size);
	if (getenv("KS_TEST_SEARCH_LOG")) {
		/* debugging: the log as it is written, in the file $KS_TEST_SEARCH_LOG-ARCHIVE.log */
		snprintf(log_path, sizeof(log_path), "%s-%s.log", getenv("KS_TEST_SEARCH_LOG"), archive);
		fclose(cfg.log);
		free(log_text);
		cfg.log = fopen(log_path, "w");
	}
	rc = ks_search_run(ar, &f->op, f->families, f->n_families, &backend, &cfg, sum, err);
	fclose(cfg.log);
	if (log_path[0])
		log_text = read_text(log_path);
	ks_archive_close(ar);
	if (rc != expect_rc)
		fail_msg("search returned %d, expected %d: %s", rc, expect_rc, err->msg);
	if (log)
		*log = strdup(log_text);
	ks_strbuf_init(&choices);
	for (line = strtok_r(log_text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_t *ev = json_loads(line, 0, NULL);
		char *params;

		assert_non_null(ev);
		if (!strcmp(json_string_value(json_object_get(ev, "event")), "log_error"))
			fail_msg("the search could not write an event (a json_pack format and its arguments "
				 "disagree)");
		if (!strcmp(json_string_value(json_object_get(ev, "event")), "result")) {
			/* for timelines: when it was evaluated, and what its build and evaluation took */
			assert_true(json_is_number(json_object_get(ev, "evaluated_t")) &&
				    json_is_number(json_object_get(ev, "compile_s")) &&
				    json_is_number(json_object_get(ev, "eval_s")) &&
				    json_is_number(json_object_get(ev, "worker_s")));
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

static char *run(struct fixture *f, const char *archive, uint64_t seed, uint64_t budget, double target,
		 struct toy *toy, int expect_rc, struct ks_search_summary *sum, struct ks_error *err)
{
	return run_with(f, archive, seed, budget, target, NULL, toy, expect_rc, sum, err, NULL);
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
		fail_msg("%d lines, %llu evaluated:\n%s", count_lines(a), (unsigned long long)sum.evaluated,
			 a);
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
		fail_msg(
			"a search stopped after 11 and resumed for 15 chose differently from one run of 26:\n"
			"--- stopped and resumed:\n%s--- one run:\n%s",
			joined, whole);
	free(whole);
	free(first);
	free(second);
	free(joined);
}

/*
 * A stopped run leaves up to jobs + 2 x lanes proposals saved ahead of its
 * insertions (an MPI run's lanes are every rank's); a run resumed with fewer
 * jobs and lanes, on one host, evaluates them all and goes on.
 */
static void test_a_search_resumes_with_fewer_jobs_and_lanes_than_it_stopped_with(void **state)
{
	struct fixture *f = *state;
	struct toy t1 = { .lock = PTHREAD_MUTEX_INITIALIZER }, t2 = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct ks_search_summary sum;
	struct ks_error err;
	struct ks_archive *ar;
	void *data = NULL;
	size_t size = 0;
	char *first, *second;

	test_jobs = 12;
	test_lanes = 4;
	first = run(f, "shrink", 5, 11, 0, &t1, 0, &sum, &err);
	/* the stopped run saved more proposals than the resumed one's depth (1 + 2 x 1) */
	ar = open_archive(f, "shrink");
	assert_int_equal(ks_archive_state_get(ar, "search/proposal/00000000000000000015", &data, &size, &err),
			 0);
	assert_non_null(data);
	free(data);
	ks_archive_close(ar);
	test_jobs = 1;
	test_lanes = 1;
	second = run(f, "shrink", 5, 20, 0, &t2, 0, &sum, &err);
	test_jobs = 3;
	test_lanes = 2;
	assert_int_equal(sum.resumed, 1);
	assert_int_equal(sum.resumed_from, 11);
	assert_string_equal(sum.stop_reason, "budget");
	if (count_lines(second) != 20)
		fail_msg("the resumed run evaluated %d, not its budget of 20:\n%s", count_lines(second),
			 second);
	assert_contains(second, "11 ");
	free(first);
	free(second);
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

static json_t *all_records(struct fixture *f, const char *archive);

/* Both absent, or equal. */
static int same_json(const json_t *a, const json_t *b)
{
	return (!a && !b) || (a && b && json_equal(a, b));
}

/*
 * Candidates that build to the same binary are evaluated once: the first

 * in proposal order is measured, the others are recorded as its
 * duplicates with its result, in this run and in the next.
 */
static void test_the_same_binary_is_evaluated_once(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER, .by_first_param = 1 };
	struct ks_search_summary sum1, sum2;
	struct ks_error err;
	char *choices;
	json_t *records, *r, *first_of = json_object();
	size_t i;
	int binaries = 0, compile_errors = 0, duplicates = 0;

	/* what the toy builds: distinct binaries among the 32 combinations that compile */
	for (size_t fi = 0; fi < f->n_families; fi++) {
		const struct ks_family *fam = &f->families[fi];
		json_t *seen = json_object();
		int64_t params[2];

		for (size_t c = 0; c < ks_params_count(&fam->cand); c++) {
			char hex[KS_SHA256_HEX_LEN + 1];

			ks_params_nth(&fam->cand, c, params);
			if (toy_hash(fam, params) % 11 == 0) {
				compile_errors++;
				continue;
			}
			toy_binary(fam, params, hex);
			if (!json_object_get(seen, hex)) {
				json_object_set_new(seen, hex, json_true());
				binaries++;
			}
		}
		json_decref(seen);
	}
	assert_true(binaries < 32 - compile_errors); /* the test means something */

	/* two runs on one archive: the second dedupes against the first's binaries too */
	free(run(f, "bins", 3, 10, 0, &t, 0, &sum1, &err));
	assert_string_equal(sum1.stop_reason, "budget");
	choices = run(f, "bins", 3, 100, 0, &t, 0, &sum2, &err);
	free(choices);
	assert_string_equal(sum2.stop_reason, "exhausted");
	assert_int_equal(sum1.evaluated + sum1.duplicates + sum2.evaluated + sum2.duplicates, 32);
	assert_int_equal(t.evaluations, binaries);
	assert_int_equal(sum1.duplicates + sum2.duplicates, 32 - compile_errors - binaries);

	records = all_records(f, "bins");
	assert_int_equal(json_array_size(records), 32);
	/* each binary's first record in proposal order (ids follow it) is the original, measured */
	json_array_foreach(records, i, r)
	{
		const char *bin = json_string_value(json_object_get(r, "binary"));
		json_t *dup_of = json_object_get(r, "duplicate_of"), *orig;

		if (!dup_of) {
			if (bin) {
				assert_null(json_object_get(first_of, bin));
				json_object_set(first_of, bin, r);
			}
			continue;
		}
		duplicates++;
		orig = NULL;
		for (size_t k = 0; k < json_array_size(records); k++)
			if (json_integer_value(json_object_get(json_array_get(records, k), "id")) ==
			    json_integer_value(dup_of))
				orig = json_array_get(records, k);
		assert_non_null(orig);

		assert_null(json_object_get(orig, "duplicate_of"));
		assert_true(json_integer_value(dup_of) < json_integer_value(json_object_get(r, "id")));
		assert_string_equal(json_string_value(json_object_get(r, "verdict")),
				    json_string_value(json_object_get(orig, "verdict")));
		assert_true(json_number_value(json_object_get(r, "fitness")) ==
			    json_number_value(json_object_get(orig, "fitness")));
		assert_true(
			same_json(json_object_get(r, "descriptors"), json_object_get(orig, "descriptors")));
		assert_true(same_json(json_object_get(r, "binary"), json_object_get(orig, "binary")));
	}
	assert_int_equal(duplicates, 32 - compile_errors - binaries);
	assert_true(json_object_size(first_of) > 0);
	json_decref(first_of);
	json_decref(records);
}

static void test_target_stops_and_internal_failure_is_reported(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER },
		   bad = { .lock = PTHREAD_MUTEX_INITIALIZER, .fail_internal_at = 5 };
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

/* ---- the profiler ---- */

/* A search whose backend profiles and checks; *out_text gets what it printed. */
/* The profiler's, the sanitizer's and the confirmations' shares in run_profiled()'s searches. */
static double profiled_share = 0.5, sanitized_share = 0, confirmed_share = 0;

static double profiled_time_s;				     /* run_profiled()'s --time (0: none) */
static double confirmed_guess_s = 0.0001, confirmed_grace_s; /* and its confirmations' */

static void run_profiled(struct fixture *f, const char *archive, struct toy *toy, uint64_t budget,
			 struct ks_search_summary *sum, char **out_text, char **log_text)
{
	struct ks_backend backend = { .ctx = toy,
				      .lanes = 2,
				      .build = toy_build,
				      .evaluate = toy_evaluate,
				      .discard = toy_discard,
				      .profile = toy_profile,
				      .sanitize = toy_sanitize };
	struct ks_search_config cfg = { .seed = 4,
					.budget = budget,
					.jobs = 2,
					.explore = 0.3,
					.exploit = 0.5,
					.recent = 0.2,
					.profile_share = profiled_share,
					.profile_guess_s = 0.0001,
					.sanitize_share = sanitized_share,
					.sanitize_guess_s = 0.0001,
					.confirm_share = confirmed_share,
					.confirm_guess_s = confirmed_guess_s,
					.confirm_grace_s = confirmed_grace_s };
	const struct ks_mutator *mutators[] = { &ks_mutator_param };
	struct ks_archive *ar = open_archive(f, archive);
	size_t out_size = 0, log_size = 0;
	struct ks_error err;

	cfg.mutators = mutators;
	cfg.n_mutators = 1;
	cfg.out = open_memstream(out_text, &out_size);
	cfg.log = open_memstream(log_text, &log_size);
	cfg.status_every_s = 1000;
	cfg.time_limit_s = profiled_time_s;
	if (ks_search_run(ar, &f->op, f->families, f->n_families, &backend, &cfg, sum, &err) < 0)
		fail_msg("%s", err.msg);
	fclose(cfg.out);
	fclose(cfg.log);
	ks_archive_close(ar);
}

/*
 * New elites are profiled between evaluations within the share, and the
 * profiles land in their records; the summary says what it cost.
 */
static void test_new_elites_are_profiled_within_the_share(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER, .eval_us = 3000 };
	struct ks_search_summary sum;
	struct ks_archive_elite *elites;
	struct ks_archive *ar;
	struct ks_error err;
	char *out, *log;
	size_t n, with_profile = 0;

	(void)state;
	run_profiled(f, "prof", &t, 24, &sum, &out, &log);
	assert_int_equal(sum.evaluated, 24);
	assert_true(sum.profiles.stored > 0);
	assert_int_equal(sum.profiles.stored, (uint64_t)t.profiles);
	assert_true(sum.profiles.seconds > 0);
	/*
	 * A profile is admitted on its expected time (the mean so far), so the
	 * two lanes' profiles in flight may end past the share: allow each a
	 * mean's worth (a host busy with other tests made usleep run long and
	 * a bare 0.5 fail, seventeenth session).
	 */
	assert_true(sum.profiles.share > 0 &&
		    sum.profiles.share < 0.5 + 2.0 * sum.profiles.share / (double)sum.profiles.stored);
	assert_string_equal(sum.profiles.off, "");
	assert_contains(log, "\"event\":\"profile\"");
	ar = open_archive(f, "prof");
	assert_int_equal(ks_archive_elites(ar, &elites, &n, &err), 0);
	for (size_t i = 0; i < n; i++) {
		json_t *rec;

		assert_int_equal(ks_archive_get(ar, elites[i].id, &rec, NULL, &err), 0);
		if (json_is_object(json_object_get(rec, "profile"))) {
			with_profile++;
			assert_string_equal(
				json_string_value(json_object_get(json_object_get(rec, "profile"), "tool")),
				"toy-ncu");
			assert_true(json_is_number(
				json_object_get(json_object_get(rec, "descriptors"), "dram_fraction")));
		}
		json_decref(rec);
	}
	assert_true(with_profile > 0);
	free(elites);
	ks_archive_close(ar);
	free(out);
	free(log);
}

/*
 * The budget counts what a profile or check held its GPU for, as timed
 * where it ran, not the lane's wall time: over MPI a lane also waits for
 * the answer, and for a rank of one GPU to finish the candidates it holds
 * while that GPU goes on timing them (a 4-rank search reported its GPUs
 * 102% busy).  The toy's take a millisecond or two and say 50 µs.
 */
static void test_evidence_counts_the_time_it_held_the_gpu_where_it_ran(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER, .eval_us = 3000, .held_s = 50e-6 };
	struct ks_search_summary sum;
	char *out, *log;

	sanitized_share = 0.5;
	run_profiled(f, "held", &t, 24, &sum, &out, &log);
	sanitized_share = 0;
	assert_true(sum.profiles.stored > 0);
	assert_true(fabs(sum.profiles.seconds - (double)t.profiles * 50e-6) < 1e-9);
	assert_true(sum.sanitizer.stored > 0);
	assert_true(fabs(sum.sanitizer.seconds - (double)t.sanitizes * 50e-6) < 1e-9);
	assert_contains(log, "\"seconds\":5.0000000000000002e-5");
	free(out);
	free(log);
}

/*
 * Elites an earlier run left without a profile (it stopped with them
 * queued, or did not profile) are profiled by the next run on the archive.
 */
/*
 * A search stopped by its time finishes the candidates in flight and starts
 * no profile meanwhile: each would hold a GPU for seconds after the time
 * the user gave (a check, ten).  Evaluations of 150 ms on 2 lanes leave some
 * 0.4 s of candidates in flight when the time is up, whose new elites would
 * be profiled.
 */
static void test_a_search_out_of_time_starts_no_profile(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER, .eval_us = 150000 };
	struct ks_search_summary sum;
	char *out, *log;
	double t0 = ks_now_s();

	profiled_time_s = 0.5;
	run_profiled(f, "prof_time", &t, 0, &sum, &out, &log);
	profiled_time_s = 0;
	assert_string_equal(sum.stop_reason, "time");
	assert_true(t.profiles > 0);
	/* the main loop sees the time within its wait (50 ms; 0.2 s on a loaded machine) */
	if (t.last_profile_s > t0 + 0.5 + 0.2)
		fail_msg("a profile started %.3f s after the time was up (%d profiles)",
			 t.last_profile_s - t0 - 0.5, t.profiles);
	assert_true(ks_now_s() - t0 < 0.5 + 3.0);
	free(out);
	free(log);
}

/*
 * A free lane takes the waiting build whose GPUs have the fewest
 * evaluations (an MPI rank's), not the oldest: with every proposal built
 * before the one lane is free again, the builds of idle GPUs all go first.
 */
static void test_a_free_lane_takes_the_build_of_the_least_busy_gpus(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER, .backlog = 1, .hold_builds = 10 };
	struct ks_search_summary sum;
	struct ks_error err;
	int idle = 0, busy = 0;
	char *out;

	test_jobs = 8; /* the depth, 8 + 2 x 1, is the budget: every proposal is made at once */
	test_lanes = 1;
	out = run(f, "backlog", 5, 10, 0, &t, 0, &sum, &err);
	test_jobs = 3;
	test_lanes = 2;
	/* after the first (which waited for every build), idle GPUs' builds, then busy ones' */
	for (int i = 1; i < t.n_classes; i++) {
		if (t.classes[i] == 0 && busy)
			fail_msg("evaluation %d was of an idle GPU's build, after %d of a busy one's", i + 1,
				 busy);
		idle += t.classes[i] == 0;
		busy += t.classes[i] == 1;
	}
	assert_true(idle > 0 && busy > 0);
	free(out);
}

static void test_a_resumed_search_profiles_the_elites_left_unprofiled(void **state)
{
	struct fixture *f = *state;
	struct toy t1 = { .lock = PTHREAD_MUTEX_INITIALIZER, .eval_us = 3000 },
		   t2 = { .lock = PTHREAD_MUTEX_INITIALIZER, .eval_us = 3000 };
	struct ks_search_summary sum;
	struct ks_archive_elite *elites;
	struct ks_archive *ar;
	struct ks_error err;
	char *out, *log;
	size_t n, old_profiled = 0, old = 0;

	profiled_share = 0;
	run_profiled(f, "unprof", &t1, 24, &sum, &out, &log);
	profiled_share = 0.5;
	assert_int_equal(sum.profiles.stored, 0);
	free(out);
	free(log);
	run_profiled(f, "unprof", &t2, 8, &sum, &out, &log);
	assert_true(sum.profiles.stored > 0);
	ar = open_archive(f, "unprof");
	assert_int_equal(ks_archive_elites(ar, &elites, &n, &err), 0);
	for (size_t i = 0; i < n; i++) {
		json_t *rec;

		if (elites[i].id > 24)
			continue; /* this run's own */
		old++;
		assert_int_equal(ks_archive_get(ar, elites[i].id, &rec, NULL, &err), 0);
		old_profiled += json_is_object(json_object_get(rec, "profile"));
		json_decref(rec);
	}
	if (!old || !old_profiled)
		fail_msg("%zu of the first run's %zu elites profiled by the second:\n%s", old_profiled, old,
			 out);
	free(elites);
	ks_archive_close(ar);
	free(out);
	free(log);
}

/* Without permission to read counters the search says so once, stops profiling and goes on. */
static void test_no_permission_is_said_once_and_the_search_goes_on(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER,
			 .eval_us = 3000,
			 .profile_status = KS_PROFILE_NO_PERMISSION };
	struct ks_search_summary sum;
	char *out, *log, *first;

	(void)state;
	run_profiled(f, "noperm", &t, 24, &sum, &out, &log);
	assert_int_equal(sum.evaluated, 24);
	assert_string_equal(sum.stop_reason, "budget");
	assert_int_equal(sum.profiles.stored, 0);
	assert_true(t.profiles >= 1 && t.profiles <= 2); /* both lanes may have started one */
	assert_contains(sum.profiles.off, "ERR_NVGPUCTRPERM");
	first = strstr(out, "profiler: ncu may not read");
	assert_non_null(first);
	assert_contains(first, "; the search goes on without profiles\n");
	assert_null(strstr(first + 1, "profiler: ncu may not read"));
	assert_contains(log, "\"event\":\"profiler_off\"");
	free(out);
	free(log);
}

/* Profiles that keep failing for their candidates end profiling for the run. */
static void test_profiles_failing_in_a_row_stop_profiling(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER,
			 .eval_us = 3000,
			 .profile_status = KS_PROFILE_FAILED };
	struct ks_search_summary sum;
	char *out, *log;

	(void)state;
	run_profiled(f, "proffail", &t, 30, &sum, &out, &log);
	assert_int_equal(sum.evaluated, 30);
	assert_int_equal(sum.profiles.stored, 0);
	assert_true(sum.profiles.failed >= 3);
	assert_contains(sum.profiles.off, "3 profiles in a row failed");
	assert_contains(log, "\"event\":\"profile_failed\"");
	free(out);
	free(log);
}

/* ---- the sanitizer ---- */

/* A record's sanitizer status ("clean", "failed"), or "" when it was never checked. */
static const char *sanitizer_status(const json_t *record)
{
	const char *status =
		json_string_value(json_object_get(json_object_get(record, "sanitizer"), "status"));

	return status ? status : "";
}

/* run_profiled() checking new bests only, with this sanitizer share. */
static void run_sanitized(struct fixture *f, const char *archive, struct toy *toy, uint64_t budget,
			  double share, struct ks_search_summary *sum, char **out, char **log)
{
	profiled_share = 0;
	sanitized_share = share;
	run_profiled(f, archive, toy, budget, sum, out, log);
	profiled_share = 0.5;
	sanitized_share = 0;
}

/*
 * New bests are checked between evaluations within the share; the checks
 * land in their records; the summary says how many, and what they cost.
 */
static void test_new_bests_are_sanitizer_checked_within_the_share(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER, .eval_us = 3000 };
	struct ks_search_summary sum;
	json_t *records, *rec;
	size_t i, checked = 0;
	char *out, *log;

	run_sanitized(f, "san", &t, 24, 0.5, &sum, &out, &log);
	assert_int_equal(sum.evaluated, 24);
	assert_true(sum.sanitizer.stored > 0);
	assert_int_equal(sum.sanitizer.stored, (uint64_t)t.sanitizes);
	assert_int_equal(sum.sanitizer.changed, 0);
	assert_true(sum.sanitizer.seconds > 0);
	assert_true(sum.sanitizer.share > 0 && sum.sanitizer.share <= 0.5 + 0.05);
	assert_string_equal(sum.sanitizer.off, "");
	assert_int_equal(sum.profiles.stored, 0);
	assert_contains(log, "\"event\":\"sanitizer\"");
	records = all_records(f, "san");
	json_array_foreach(records, i, rec)
	{
		if (!*sanitizer_status(rec))
			continue;
		checked++;
		assert_string_equal(sanitizer_status(rec), "clean");
		assert_string_equal(
			json_string_value(json_object_get(json_object_get(rec, "sanitizer"), "version")),
			"toy-sanitizer 1.0");
	}
	assert_int_equal(checked, sum.sanitizer.stored);
	json_decref(records);
	free(out);
	free(log);

	/* share 0: never */
	t.sanitizes = 0;
	run_sanitized(f, "san0", &t, 24, 0, &sum, &out, &log);
	assert_int_equal(sum.evaluated, 24);
	assert_int_equal(t.sanitizes, 0);
	assert_int_equal(sum.sanitizer.stored, 0);
	assert_null(strstr(log, "\"event\":\"sanitizer"));
	free(out);
	free(log);
}

/*
 * A failed check demotes its record: it is no longer the best, the next
 * best is (and is checked in turn), the search goes on, and the summary
 * names it.  Its duplicates (the same binary) carry the same check.
 */
static void test_a_failed_check_demotes_the_best_and_the_search_goes_on(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER,
			 .eval_us = 3000,
			 .sanitize_fail_first = 2,
			 .by_first_param = 1 };
	struct ks_search_summary sum;
	struct ks_archive_metrics m;
	struct ks_archive *ar;
	struct ks_error err;
	json_t *records, *rec, *bests, *entry;
	const char *workload;
	char *out, *log, *line, *save = NULL, said[64];
	size_t i, failed = 0, twins = 0, demotions = 0;

	run_sanitized(f, "sanfail", &t, 26, 0.5, &sum, &out, &log);
	assert_string_equal(sum.stop_reason, "budget"); /* the search went on (of 32 combinations) */
	assert_int_equal(sum.sanitizer.changed, 2);
	assert_true(sum.sanitizer.stored > 2); /* the next bests were checked too */
	for (i = 0; i < 2; i++) {
		snprintf(said, sizeof(said), "sanitizer: #%llu FAILED: 1 error",
			 (unsigned long long)sum.sanitizer.changed_ids[i]);
		assert_contains(out, said);
	}
	/*
	 * Each demotion names the new best, another record, or says there is
	 * none (when the first check lands before a second ok record: under
	 * load the checks come at other moments of the search).
	 */
	for (line = strtok_r(log, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_t *ev = json_loads(line, 0, NULL);

		if (!strcmp(json_string_value(json_object_get(ev, "event")), "sanitizer") &&
		    json_is_true(json_object_get(ev, "was_best"))) {
			uint64_t id = (uint64_t)json_integer_value(json_object_get(ev, "id")),
				 next = (uint64_t)json_integer_value(json_object_get(ev, "best_id"));

			demotions++;
			assert_true(next != id);
			if (next)
				snprintf(said, sizeof(said), "; the best is now #%llu",
					 (unsigned long long)next);
			else
				snprintf(said, sizeof(said), "; there is no best now");
			assert_contains(out, said);
		}
		json_decref(ev);
	}
	assert_true(demotions >= 1);

	records = all_records(f, "sanfail");
	ar = open_archive(f, "sanfail");
	assert_int_equal(ks_archive_metrics(ar, &m, &err), 0);
	assert_int_equal(ks_archive_workload_bests(ar, &bests, &err), 0);
	json_array_foreach(records, i, rec)
	{
		uint64_t id = ks_record_id(rec), of;

		if (strcmp(sanitizer_status(rec), "failed"))
			continue;
		failed++;
		assert_true(m.best_id != id);
		json_object_foreach(bests, workload, entry)
		{
			assert_true((uint64_t)json_integer_value(json_object_get(entry, "id")) != id);
		}
		/* a twin carries its original's check; so does every twin of a failed original */
		of = (uint64_t)json_integer_value(json_object_get(rec, "duplicate_of"));
		twins += of != 0;
		if (!of) {
			size_t j;
			json_t *other;

			json_array_foreach(records, j, other)
			{
				if ((uint64_t)json_integer_value(json_object_get(other, "duplicate_of")) ==
				    id)
					assert_string_equal(sanitizer_status(other), "failed");
			}
		}
	}
	assert_true(failed >= 2);
	if (!twins)
		fail_msg("no duplicate of a failed record to show that twins share the check:\n%s", out);
	json_decref(bests);
	json_decref(records);
	ks_archive_close(ar);
	free(out);
	free(log);
}

/* ---- confirmations ---- */

/* The best of workload n1024 in archive name: its id, its time there, and its record. */
static uint64_t n1024_best(struct fixture *f, const char *name, double *us, struct ks_record *rec)
{
	struct ks_archive *ar = open_archive(f, name);
	struct ks_error err;
	json_t *bests;
	uint64_t id;

	assert_int_equal(ks_archive_workload_bests(ar, &bests, &err), 0);
	id = (uint64_t)json_integer_value(json_object_get(json_object_get(bests, "n1024"), "id"));
	*us = json_number_value(json_object_get(json_object_get(bests, "n1024"), "median_us"));
	json_decref(bests);
	assert_int_equal(ks_archive_get_record(ar, id, rec, NULL, &err), 0);
	ks_archive_close(ar);
	return id;
}

/*
 * Every new best of a workload is timed again between evaluations, within
 * the share; a best that was lucky (half its time on its first draw) loses
 * its place to one that holds, which is confirmed in turn; the best left
 * holds its time when timed again, so the workload's best time is one the
 * kernel makes on any draw.  Without the share, a lucky time stands.
 */
static void test_lucky_bests_are_confirmed_and_lose_their_place(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER, .luck = 1 };
	struct toy t2 = { .lock = PTHREAD_MUTEX_INITIALIZER, .luck = 1 };
	struct ks_search_summary sum;
	struct ks_record rec;
	char *out = NULL, *log = NULL;
	double us;

	profiled_share = 0;
	confirmed_share = 0.5;
	t.has_main = 1;
	t.main = pthread_self();
	run_profiled(f, "confirm", &t, 40, &sum, &out, &log);
	confirmed_share = 0;
	profiled_share = 0.5;
	assert_true(sum.confirm.stored > 0);
	/* a confirmation's build was made by a build thread, not on the lane that timed it */
	assert_int_equal(t.lane_builds, 0);
	assert_int_equal(t.main_builds, 0);
	assert_true(sum.confirm.changed > 0); /* some lucky best was found out */
	assert_true(sum.confirm.seconds > 0 && sum.confirm.share <= 0.5 + 0.05);
	assert_contains(log, "\"event\":\"confirmation\"");
	assert_contains(out, "was slower on fresh length splits; no longer the best of 1 workload\n");
	ks_record_init(&rec);
	n1024_best(f, "confirm", &us, &rec);
	/* the best standing was confirmed, at the time every draw gives it */
	assert_non_null(rec.confirmation);
	assert_string_equal(json_string_value(json_object_get(rec.confirmation, "status")), "ok");
	assert_true(fabs(us - 100.0 / rec.result.fitness) < 1e-9);
	ks_record_release(&rec);
	free(out);
	free(log);

	/* without confirmations, the lucky best keeps a time no draw gives it again */
	run_profiled(f, "unconfirmed", &t2, 40, &sum, &out, &log);
	assert_int_equal(sum.confirm.stored, 0);
	assert_null(strstr(log, "\"event\":\"confirmation"));
	ks_record_init(&rec);
	n1024_best(f, "unconfirmed", &us, &rec);
	assert_null(rec.confirmation);
	assert_true(fabs(us - 50.0 / rec.result.fitness) < 1e-9); /* lucky */
	ks_record_release(&rec);
	free(out);
	free(log);
}

/* Has the best of workload n1024 in archive name been confirmed? */
static int n1024_best_confirmed(struct fixture *f, const char *name)
{
	struct ks_record rec;
	double us;
	int confirmed;

	ks_record_init(&rec);
	n1024_best(f, name, &us, &rec);
	confirmed = rec.confirmation != NULL;
	ks_record_release(&rec);
	return confirmed;
}

/*
 * A run with a time limit starts no last confirmation past the limit and
 * its grace: the bests it leaves are counted, said and logged, and the next
 * run on the archive confirms them.  With time enough, it confirms the bests
 * and nothing else.  The grace is 5% of the limit, from 10 s to a minute.
 */
static void test_last_confirmations_end_with_the_time_s_grace(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER, .luck = 1, .eval_us = 30000 };
	struct toy t2 = { .lock = PTHREAD_MUTEX_INITIALIZER, .luck = 2, .eval_us = 80000 };
	struct ks_search_summary sum;
	char *out = NULL, *log = NULL;

	assert_true(fabs(ks_search_confirm_grace_s(60) - 10) < 1e-9);
	assert_true(fabs(ks_search_confirm_grace_s(550) - 27.5) < 1e-9);
	assert_true(fabs(ks_search_confirm_grace_s(8 * 3600) - 60) < 1e-9);

	/* confirmations only at the end (a first guess no share pays for), and no grace to speak of */
	profiled_share = 0;
	confirmed_share = 0.05;
	confirmed_guess_s = 1000;
	confirmed_grace_s = 1e-9;
	profiled_time_s = 0.3;
	run_profiled(f, "grace", &t, 100000, &sum, &out, &log);
	assert_string_equal(sum.stop_reason, "time");
	assert_int_equal(sum.confirm.stored, 0);
	/* n1024's best, one record, however many bests came and went in the queue */
	assert_int_equal(sum.unconfirmed, 1);
	assert_contains(log, "\"unconfirmed\":1");
	assert_false(n1024_best_confirmed(f, "grace"));
	free(out);
	free(log);

	/*
	 * With time for them, the last confirmations are of the bests alone: none
	 * is spent on a record that was queued as a best and replaced since
	 * (such a one neither holds nor loses a workload)
	 */
	confirmed_grace_s = 30;
	t2.has_main = 1;
	t2.main = pthread_self();
	run_profiled(f, "grace-whole", &t2, 100000, &sum, &out, &log);
	assert_string_equal(sum.stop_reason, "time");
	assert_true(sum.confirm.stored >= 1);
	/* their builds were made by the build threads, which outlive the lanes for them */
	assert_int_equal(t2.main_builds, 0);
	assert_int_equal(t2.lane_builds, 0);
	/*
	 * Eight rounds a workload the archive holds bests of (two here, though
	 * the op has one), and each round confirms another record: 16 rounds
	 * outlast the chains of lucky bests of the dozen evaluations 0.3 s
	 * holds.  (Eight rounds for the op's one workload did not, at times.)
	 */
	assert_true(sum.evaluated <= 16);
	assert_int_equal(sum.unconfirmed, 0);
	assert_null(strstr(log, "\"workloads_held\":0,\"workloads_lost\":0"));
	assert_true(sum.wall_s < 0.3 + 30);
	free(out);
	free(log);
	confirmed_grace_s = 1e-9;

	/* the next run, with no time limit, confirms what the first left */
	profiled_time_s = 0;
	run_profiled(f, "grace", &t, 2, &sum, &out, &log);
	assert_int_equal(sum.unconfirmed, 0);
	assert_true(sum.confirm.stored >= 1);
	assert_contains(log, "\"unconfirmed\":0");
	assert_true(n1024_best_confirmed(f, "grace"));
	free(out);
	free(log);
	confirmed_share = 0;
	confirmed_guess_s = 0.0001;
	confirmed_grace_s = 0;
	profiled_share = 0.5;
}

/* No sanitizer that can run here: said once, with why, and the search goes on without checks. */
static void test_an_unavailable_sanitizer_is_said_once_and_the_search_goes_on(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER,
			 .eval_us = 3000,
			 .sanitize_status = KS_SANITIZE_UNAVAILABLE };
	struct ks_search_summary sum;
	char *out, *log, *first;

	run_sanitized(f, "sanoff", &t, 24, 0.5, &sum, &out, &log);
	assert_int_equal(sum.evaluated, 24);
	assert_string_equal(sum.stop_reason, "budget");
	assert_int_equal(sum.sanitizer.stored, 0);
	assert_true(t.sanitizes >= 1 && t.sanitizes <= 2); /* both lanes may have started one */
	assert_contains(sum.sanitizer.off, "Device not supported");
	first = strstr(out, "sanitizer: compute-sanitizer cannot check on this machine");
	assert_non_null(first);
	assert_contains(first, "; the search goes on without sanitizer checks\n");
	assert_null(strstr(first + 1, "sanitizer: compute-sanitizer cannot check"));
	assert_contains(log, "\"event\":\"sanitizer_off\"");
	free(out);
	free(log);
}

/* A search on an archive whose best was never checked checks it. */
static void test_a_resumed_search_checks_the_unchecked_best(void **state)
{
	struct fixture *f = *state;
	struct toy t1 = { .lock = PTHREAD_MUTEX_INITIALIZER, .eval_us = 3000 },
		   t2 = { .lock = PTHREAD_MUTEX_INITIALIZER, .eval_us = 3000 };
	struct ks_search_summary sum;
	struct ks_archive *ar;
	struct ks_error err;
	json_t *best;
	uint64_t old_best;
	char *out, *log;

	run_sanitized(f, "sanres", &t1, 24, 0, &sum, &out, &log);
	free(out);
	free(log);
	ar = open_archive(f, "sanres");
	assert_int_equal(ks_archive_best(ar, &best, NULL, &err), 0);
	assert_non_null(best);
	old_best = ks_record_id(best);
	assert_string_equal(sanitizer_status(best), "");
	json_decref(best);
	ks_archive_close(ar);

	run_sanitized(f, "sanres", &t2, 8, 0.5, &sum, &out, &log);
	ar = open_archive(f, "sanres");
	assert_int_equal(ks_archive_get(ar, old_best, &best, NULL, &err), 0);
	if (strcmp(sanitizer_status(best), "clean"))
		fail_msg("the first run's best #%llu was not checked by the second:\n%s",
			 (unsigned long long)old_best, out);
	json_decref(best);
	ks_archive_close(ar);
	free(out);
	free(log);
}

/* ---- the LLM mutator, against tools/fake-llm ---- */

struct llm_env {
	struct fake fake;
	struct ks_llm *client;
	struct ks_mutator *llm[2]; /* the LLM mutator, NULL: run_with()'s list */
	char prompts[4200];
};

/* What the LLM mutator did in the last run. */
static struct ks_llm_mutator_stats llm_stats(const struct llm_env *e)
{
	struct ks_llm_mutator_stats st;

	ks_llm_mutator_stats(e->llm[0], &st);
	return st;
}

/* How an endpoint differs from the plain fake, and how the client is set for it. */
struct endpoint {
	const char *const *fake_options; /* e.g. "--mode", "think", NULL */
	int no_key;
	double temperature; /* > 0: --temperature */
	int max_tokens;	    /* 0: the default */
	const char *header; /* --llm-header */
	int give_up_after;  /* the mutator's; 0: 1000, so the search never ends on it; -1: its default */
};

static void llm_up_endpoint(struct llm_env *e, enum ks_llm_provider provider, const char *script,
			    int concurrency, uint64_t budget_tokens, const struct endpoint *ep)
{
	struct ks_llm_config cfg;
	struct ks_error err;

	fake_start_with(&e->fake, script, ep ? ep->fake_options : NULL);
	ks_llm_config_init(&cfg);
	cfg.provider = provider;
	cfg.base_url = ks_asprintf("http://127.0.0.1:%d/v1", e->fake.port);
	cfg.model = ks_strdup("fake-model");
	cfg.api_key = ks_strdup(KEY);
	cfg.concurrency = concurrency;
	cfg.backoff_base_s = 0.01;
	cfg.backoff_max_s = 0.05;
	cfg.max_retries = 2;
	cfg.pause_after = 0;
	cfg.budget_tokens = budget_tokens;
	if (ep && ep->no_key) {
		free(cfg.api_key);
		cfg.api_key = NULL;
	}
	if (ep && ep->temperature > 0) {
		cfg.temperature = ep->temperature;
		cfg.has_temperature = 1;
	}
	if (ep && ep->max_tokens)
		cfg.max_tokens = ep->max_tokens;
	if (ep && ep->header && ks_llm_config_add_header(&cfg, ep->header, "--llm-header", &err) < 0)
		fail_msg("%s", err.msg);
	if (ks_llm_open(&e->client, &cfg, &err) < 0)
		fail_msg("%s", err.msg);
	ks_llm_config_release(&cfg);
	snprintf(e->prompts, sizeof(e->prompts), "%s/prompts", source_root());
	e->llm[0] = ks_llm_mutator_new(&(struct ks_llm_mutator_config){
		.client = e->client,
		.model = "fake-model",
		.prompts_dir = e->prompts,
		.system_prompt = "You write CUDA kernels for the toy operator.",
		.concurrency = concurrency,
		.max_repairs = 2,
		.tune_budget = 3,
		.rewrite_every = 3,
		.population_cap = 6,
		.move_share = 0.3,
		.give_up_after = !ep || !ep->give_up_after ? 1000 : ep->give_up_after });
	e->llm[1] = NULL;
}

static void llm_up_with(struct llm_env *e, enum ks_llm_provider provider, const char *script, int concurrency,
			uint64_t budget_tokens)
{
	llm_up_endpoint(e, provider, script, concurrency, budget_tokens, NULL);
}

static void llm_up(struct llm_env *e, const char *script, int concurrency, uint64_t budget_tokens)
{
	llm_up_with(e, KS_LLM_OPENAI, script, concurrency, budget_tokens);
}

static void llm_down(struct llm_env *e)
{
	ks_mutator_free(e->llm[0]);
	ks_llm_close(e->client);
	fake_stop(&e->fake);
}

/* Every record of the archive, by a query over all of them. */
static int collect(const json_t *record, void *ctx)
{
	json_array_append((json_t *)ctx, (json_t *)record);
	return 0;
}

static json_t *all_records(struct fixture *f, const char *archive)
{
	struct ks_archive *ar = open_archive(f, archive);
	struct ks_archive_query q = { .verdict = -1 };
	json_t *list = json_array();
	struct ks_error err;

	if (ks_archive_foreach(ar, &q, collect, list, &err) < 0)
		fail_msg("%s", err.msg);
	ks_archive_close(ar);
	return list;
}

static json_t *all_prompts(struct fixture *f, const char *archive)
{
	struct ks_archive *ar = open_archive(f, archive);
	json_t *prompts;
	struct ks_error err;

	if (ks_archive_prompts(ar, &prompts, &err) < 0)
		fail_msg("%s", err.msg);
	ks_archive_close(ar);
	return prompts;
}

static int64_t stat_sum(const json_t *prompts, const char *name)
{
	int64_t total = 0;
	size_t i;
	json_t *p;

	json_array_foreach(prompts, i, p) total +=
		json_integer_value(json_object_get(json_object_get(p, "stats"), name));
	return total;
}

/*
 * The proposals of fixed-seed runs, pinned: tests/unit/fixtures/search/
 * holds what the search chose when the mutators moved behind
 * mutator.h (issue 12): "seq family params mutation parents verdict", one
 * line per candidate, in proposal order.  A change that moves any choice
 * fails here; one that means to (a new move, a new RNG use) rewrites the
 * files with KS_TEST_SEARCH_GOLDEN=write and says so in its commit.
 */
static char *proposals_of(struct fixture *f, const char *archive)
{
	struct ks_archive *ar = open_archive(f, archive);
	struct ks_archive_query q = { .verdict = -1, .sort = KS_ARCHIVE_SORT_ID };
	json_t *list = json_array(), *r;
	struct ks_strbuf sb;
	struct ks_error err;
	size_t i;

	if (ks_archive_foreach(ar, &q, collect, list, &err) < 0)
		fail_msg("%s", err.msg);
	ks_archive_close(ar);
	ks_strbuf_init(&sb);
	json_array_foreach(list, i, r)
	{
		char *params = json_dumps(json_object_get(r, "params"), JSON_COMPACT | JSON_SORT_KEYS);
		char *parents = json_dumps(json_object_get(r, "parents"), JSON_COMPACT);

		ks_strbuf_addf(&sb, "%lld %s %s %s %s %s\n",
			       (long long)json_integer_value(json_object_get(r, "seq")),
			       json_string_value(json_object_get(r, "family")), params,
			       json_string_value(json_object_get(r, "mutation")), parents,
			       json_string_value(json_object_get(r, "verdict")));
		free(params);
		free(parents);
	}
	json_decref(list);
	return ks_strbuf_detach(&sb);
}

static void check_golden(const char *name, const char *got)
{
	char path[4200];
	char *want;

	snprintf(path, sizeof(path), "%s/search/%s", getenv("KS_TEST_FIXTURES"), name);
	if (getenv("KS_TEST_SEARCH_GOLDEN") && !strcmp(getenv("KS_TEST_SEARCH_GOLDEN"), "write")) {
		FILE *out = fopen(path, "w");

		assert_non_null(out);
		fputs(got, out);
		fclose(out);
		return;
	}
	want = read_text(path);
	if (!want)
		fail_msg("%s: cannot read the pinned proposals", path);
	if (strcmp(want, got))
		fail_msg("the search's proposals moved from %s:\n--- now:\n%s--- pinned:\n%s", path, got,
			 want);
	free(want);
}

static void test_fixed_seed_proposals_are_pinned(void **state)
{
	struct fixture *f = *state;
	struct toy t1 = { .lock = PTHREAD_MUTEX_INITIALIZER }, t2 = { .lock = PTHREAD_MUTEX_INITIALIZER },
		   t3 = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct ks_search_summary sum;
	struct ks_error err;
	char *choices, *got;

	/* parents, crossovers and nudges */
	choices = run(f, "pin7", 7, 40, 0, &t1, 0, &sum, &err);
	got = proposals_of(f, "pin7");
	check_golden("seed7-budget40.txt", got);
	free(choices);
	free(got);
	/* to the end of the space: the random fallback, and the stop when nothing is left */
	choices = run(f, "pin3", 3, 100, 0, &t2, 0, &sum, &err);
	assert_string_equal(sum.stop_reason, "exhausted");
	got = proposals_of(f, "pin3");
	check_golden("seed3-exhaustive.txt", got);
	free(choices);
	free(got);
	/* another mix of parent selection */
	choices = run(f, "pin11", 11, 30, 0, &t3, 0, &sum, &err);
	got = proposals_of(f, "pin11");
	check_golden("seed11-budget30.txt", got);
	free(choices);
	free(got);
}

/*
 * The seam: a mutator is a struct ks_mutator and one line in the list.
 * This one walks family b's params from the top down; the search must
 * take the seeds first, then ask it before the built-in mutator, tell it
 * each of its results, show its status fragment, start and stop it once,
 * and stop with its error when it fails.
 */
struct walker {
	int64_t next_c;
	int started, stopped, told, fail_at_c;
	uint64_t told_ids[16];
	enum ks_verdict told_verdicts[16];
};

static int walker_start(void *ctx, struct ks_mutator_host *h, struct ks_error *err)
{
	struct walker *w = ctx;

	(void)err;
	assert_string_equal(ks_mutator_host_family(h, 1)->name, "b");
	w->started++;
	return 0;
}

static int walker_propose(void *ctx, struct ks_mutator_host *h, struct ks_proposal *p, struct ks_error *err)
{
	struct walker *w = ctx;

	for (; w->next_c >= 1; w->next_c--) {
		if (w->next_c == w->fail_at_c)
			return ks_fail(err, "walker: C=%lld is where it breaks", (long long)w->next_c);
		p->family = 1;
		p->params[0] = w->next_c;
		if (ks_mutator_host_seen(h, 1, p->params))
			continue;
		snprintf(p->mutation, sizeof(p->mutation), "walk");
		w->next_c--;
		return 0;
	}
	return 1;
}

static int walker_told(void *ctx, struct ks_mutator_host *h, const struct ks_proposal *p,
		       const struct ks_result *result, const struct ks_archive_insert_result *res,
		       struct ks_error *err)
{
	struct walker *w = ctx;

	(void)h;
	(void)err;
	assert_string_equal(p->mutation, "walk");
	if (w->told < 16) {
		w->told_ids[w->told] = res->id;
		w->told_verdicts[w->told] = result->verdict;
	}
	w->told++;
	return 0;
}

static void walker_status(void *ctx, char *buf, size_t size)
{
	snprintf(buf, size, "  walker told %d", ((struct walker *)ctx)->told);
}

static void walker_stop(void *ctx, struct ks_mutator_host *h)
{
	(void)h;
	((struct walker *)ctx)->stopped++;
}

static const char *const walker_mutations[] = { "walk", NULL };

static void test_a_mutator_is_a_table_and_one_line(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER }, t2 = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct walker w = { .next_c = 8 };
	struct ks_mutator walker = { .name = "walker",
				     .mutations = walker_mutations,
				     .ctx = &w,
				     .start = walker_start,
				     .propose = walker_propose,
				     .told = walker_told,
				     .status = walker_status,
				     .stop = walker_stop };
	struct ks_mutator *list[] = { &walker, NULL };
	struct ks_search_summary sum;
	struct ks_error err;
	char *choices = run_with(f, "walker", 5, 12, 0, list, &t, 0, &sum, &err, NULL);
	json_t *records = all_records(f, "walker"), *r;
	int walked = 0;
	size_t i;

	/* the seeds, then the walker's seven (C=1 was a seed), then the built-in mutator */
	assert_contains(
		choices,
		"0 a {\"A\":1,\"B\":1} seed\n1 b {\"C\":1} seed\n2 b {\"C\":8} walk\n3 b {\"C\":7} walk\n");
	assert_contains(choices, "8 b {\"C\":2} walk\n9 ");
	assert_null(strstr(strstr(choices, "\n9 "), " walk\n"));
	assert_int_equal(w.started, 1);
	assert_int_equal(w.stopped, 1);
	assert_int_equal(w.told, 7);
	json_array_foreach(records, i, r)
	{
		if (strcmp(json_string_value(json_object_get(r, "mutation")), "walk"))
			continue;
		for (int k = 0; k < 7; k++) {
			if (w.told_ids[k] != (uint64_t)json_integer_value(json_object_get(r, "id")))
				continue;
			/* told the result the archive holds */
			assert_string_equal(ks_verdict_name(w.told_verdicts[k]),
					    json_string_value(json_object_get(r, "verdict")));
			walked++;
		}
	}
	assert_int_equal(walked, 7); /* told exactly about its own records */
	json_decref(records);
	free(choices);

	/* a mutator that fails stops the search with its error */
	w = (struct walker){ .next_c = 8, .fail_at_c = 6 };
	choices = run_with(f, "walker-fails", 5, 12, 0, list, &t2, -1, &sum, &err, NULL);
	assert_contains(err.msg, "the walker mutator: walker: C=6 is where it breaks");
	assert_int_equal(w.stopped, 1);
	free(choices);
}

/*
 * The knob mutator: children of elites of any family, knob children
 * included, as new families "knob-<n>" at their parent's params, the same
 * for the same seed; with a share of 0 the proposals are exactly those of
 * a search without it.
 */
static void test_knob_children_are_new_sources_at_their_parents_params(void **state)
{
	struct fixture *f = *state;
	struct toy t1 = { .lock = PTHREAD_MUTEX_INITIALIZER }, t2 = { .lock = PTHREAD_MUTEX_INITIALIZER },
		   t3 = { .lock = PTHREAD_MUTEX_INITIALIZER }, t4 = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct ks_mutator *knobs = ks_mutator_knobs_new(0.5), *off = ks_mutator_knobs_new(0);
	struct ks_mutator *list[] = { knobs, NULL }, *list_off[] = { off, NULL };
	struct ks_search_summary sum;
	struct ks_error err;
	char *choices = run_with(f, "knobs", 5, 40, 0, list, &t1, 0, &sum, &err, NULL);
	char *again = run_with(f, "knobs-again", 5, 40, 0, list, &t2, 0, &sum, &err, NULL);
	char *plain = run(f, "knobs-plain", 5, 40, 0, &t3, 0, &sum, &err);
	char *zero = run_with(f, "knobs-zero", 5, 40, 0, list_off, &t4, 0, &sum, &err, NULL);
	struct ks_archive *ar;
	json_t *records = all_records(f, "knobs"), *by_id = json_object(), *r;
	int knob_children = 0, of_knob_children = 0;
	size_t i;

	assert_string_equal(choices, again);
	assert_string_equal(plain, zero);
	assert_contains(choices, " knob\n");
	assert_null(strstr(zero, " knob\n"));
	json_array_foreach(records, i, r)
	{
		char key[32];

		snprintf(key, sizeof(key), "%lld", (long long)json_integer_value(json_object_get(r, "id")));
		json_object_set(by_id, key, r);
	}
	ar = open_archive(f, "knobs");
	json_array_foreach(records, i, r)
	{
		const json_t *parent;
		json_t *record = NULL, *parent_record = NULL;
		char *source = NULL, *parent_source = NULL, key[32];

		if (strcmp(json_string_value(json_object_get(r, "mutation")), "knob"))
			continue;
		knob_children++;
		assert_true(!strncmp(json_string_value(json_object_get(r, "family")), "knob-", 5));
		assert_int_equal(json_array_size(json_object_get(r, "parents")), 1);
		snprintf(key, sizeof(key), "%lld",
			 (long long)json_integer_value(json_array_get(json_object_get(r, "parents"), 0)));
		parent = json_object_get(by_id, key);
		assert_non_null(parent);
		assert_true(json_equal(json_object_get(r, "params"), json_object_get(parent, "params")));
		of_knob_children +=
			!strncmp(json_string_value(json_object_get(parent, "family")), "knob-", 5);
		/* the toy's kernels have no bounds: the child's come from the plan's block */
		if (ks_archive_get(ar, (uint64_t)json_integer_value(json_object_get(r, "id")), &record,
				   &source, &err) < 0 ||
		    ks_archive_get(ar, (uint64_t)json_integer_value(json_object_get(parent, "id")),
				   &parent_record, &parent_source, &err) < 0)
			fail_msg("%s", err.msg);
		assert_non_null(source);
		assert_non_null(parent_source);
		assert_string_not_equal(source, parent_source);
		if (!strstr(source, "__launch_bounds__((32*A), ") &&
		    !strstr(source, "__launch_bounds__((64), "))
			fail_msg("no bound derived from the plan in %s", source);
		json_decref(record);
		json_decref(parent_record);
		free(source);
		free(parent_source);
	}
	ks_archive_close(ar);
	assert_true(knob_children >= 3);
	assert_true(of_knob_children >= 1);
	json_decref(records);
	json_decref(by_id);
	ks_mutator_free(knobs);
	ks_mutator_free(off);
	free(choices);
	free(again);
	free(plain);
	free(zero);
}

/*
 * The default compile processes: 8 per GPU lane, within the CPUs left
 * after one per lane and one for the search, at least 1, at most 256.
 */
/* The run's mutators are the rows of src/search/mutators.c that take part, in the table's order. */
static void test_the_mutators_of_a_run_come_from_the_table(void **state)
{
	static const struct {
		const char *search;
		double knob_share;
		const char *names;
	} runs[] = {
		{ "map-elites", -1, "knob param" }, /* knobs by default beside map-elites */
		{ "map-elites", 0, "param" },
		{ "random", -1, "random" }, /* a baseline stays itself unless knobs are asked for */
		{ "greedy", 0.5, "knob greedy" },
		{ "none-such", 0, "" },
	};

	(void)state;
	for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
		struct ks_mutator_settings settings = { .search = runs[r].search,
							.knob_share = runs[r].knob_share };
		const struct ks_mutator **list;
		char names[128] = "";
		size_t n;

		ks_mutators_make(&settings, &list, &n);
		for (size_t i = 0; i < n; i++)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", i ? " " : "",
				 list[i]->name);
		assert_string_equal(names, runs[r].names);
		ks_mutators_free(list, n);
	}
}

static void test_default_jobs_follow_the_gpus_and_the_cpus(void **state)
{
	(void)state;
	assert_int_equal(ks_search_default_jobs(64, 4), 32);  /* the 4-GPU host of issue 24 */
	assert_int_equal(ks_search_default_jobs(64, 8), 55);  /* the CPUs bound it */
	assert_int_equal(ks_search_default_jobs(16, 1), 8);   /* one H100 VM: as before */
	assert_int_equal(ks_search_default_jobs(128, 8), 64); /* eight GPUs: 8 each */
	assert_int_equal(ks_search_default_jobs(8, 1), 6);
	assert_int_equal(ks_search_default_jobs(2, 1), 1);
	assert_int_equal(ks_search_default_jobs(1, 1), 1);
	assert_int_equal(ks_search_default_jobs(-1, 1), 1); /* sysconf failed */
	assert_int_equal(ks_search_default_jobs(64, 0), 8); /* no lane said: one */
	assert_int_equal(ks_search_default_jobs(1024, 64), 256);
}

/* A family whose constraints rule out most of its space: X*Y <= 12, X != 3 (23 of 64 allowed). */
static const char seed_c[] =
	"/* ksearch {\"params\": {\"X\": [1, 2, 3, 4, 5, 6, 7, 8], \"Y\": [1, 2, 3, 4, 5, 6, 7, 8]},\n"
	"  \"constraints\": [\"X * Y <= 12\", \"X != 3\"],\n"
	"  \"launch\": [{\"kernel\": \"c\", \"grid\": [\"n\"], \"block\": [\"32*X\"], "
	"\"args\": [\"x\", \"y\", \"n\"]}]} */\n"
	"extern \"C\" __global__ void c(const float *x, float *y, int n) {}\n";

/*
 * Every built-in search (map-elites, random, greedy) proposes only what the
 * constraints allow, never twice, and ends "exhausted" having tried exactly
 * the allowed space: 24 (seed a) + 23 (seed c).
 */
static void test_searches_respect_constraints_and_exhaust_the_allowed_space(void **state)
{
	const struct ks_mutator *builtins[] = { &ks_mutator_param, &ks_mutator_random, &ks_mutator_greedy };
	const char *names[] = { "map-elites", "random", "greedy" };
	struct fixture *base = *state, f = *base;
	struct ks_error err;
	char path[4200];

	/* the same op, with seeds a and c */
	f.dir = test_tmpdir();
	test_write(f.dir, "op.json", op_json);
	test_write(f.dir, "reference.cu", seed_b);
	snprintf(path, sizeof(path), "%s/seeds", f.dir);
	assert_int_equal(mkdir(path, 0755), 0);
	test_write(f.dir, "seeds/a.cu", seed_a);
	test_write(f.dir, "seeds/c.cu", seed_c);
	if (ks_op_load(f.dir, &f.op, &err) < 0 ||
	    ks_families_load(&f.op, &f.families, &f.n_families, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(ks_params_count_allowed(&f.families[1].cand), 23);
	for (size_t b = 0; b < 3; b++) {
		struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER };
		struct ks_mutator *first[] = { (struct ks_mutator *)builtins[b], NULL };
		struct ks_search_summary sum;
		json_t *records, *r;
		size_t i;
		int seen_mutation = 0;
		char *choices = run_with(&f, names[b], 11, 1000, 0, first, &t, 0, &sum, &err, NULL);

		records = all_records(&f, names[b]);
		assert_int_equal(json_array_size(records), 24 + 23);
		json_array_foreach(records, i, r)
		{
			const json_t *params = json_object_get(r, "params");
			const char *mutation = json_string_value(json_object_get(r, "mutation"));

			if (!strcmp(json_string_value(json_object_get(r, "family")), "c")) {
				int64_t x = json_integer_value(json_object_get(params, "X"));
				int64_t y = json_integer_value(json_object_get(params, "Y"));

				if (x * y > 12 || x == 3)
					fail_msg("%s proposed X=%lld Y=%lld, which the constraints rule out",
						 names[b], (long long)x, (long long)y);
			}
			if (b == 1)
				seen_mutation |= !strcmp(mutation, "uniform");
			if (b == 2 && !strcmp(mutation, "climb")) {
				/* a climb is one param one place from its parent */
				assert_int_equal(json_array_size(json_object_get(r, "parents")), 1);
				seen_mutation = 1;
			}
		}
		assert_true(seen_mutation || b == 0);
		assert_string_equal(sum.stop_reason, "exhausted");
		json_decref(records);
		free(choices);
	}
	ks_families_free(f.families, f.n_families);
	ks_op_release(&f.op);
	test_rmtree(f.dir);
}

/*
 * --climb: map-elites proposals that step from the best (or a workload's
 * best) to an untried neighbour, one param one place along its list, with
 * that best as the one parent; the others are the elites' moves.
 */
static void test_map_elites_climbs_from_the_bests(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct ks_search_summary sum;
	struct ks_error err;
	json_t *records, *r, *by_id = json_object();
	size_t i;
	int climbs = 0, others = 0;
	char *choices;

	test_climb = 0.5;
	choices = run(f, "climb", 5, 28, 0, &t, 0, &sum, &err);
	test_climb = 0;
	records = all_records(f, "climb");
	json_array_foreach(records, i, r)
	{
		char key[32];

		snprintf(key, sizeof(key), "%lld", (long long)json_integer_value(json_object_get(r, "id")));
		json_object_set(by_id, key, r);
	}
	json_array_foreach(records, i, r)
	{
		const char *mutation = json_string_value(json_object_get(r, "mutation"));
		const json_t *parents = json_object_get(r, "parents"), *parent, *mine, *theirs;
		const struct ks_family *fam = NULL;
		char key[32];
		int moved = 0;

		if (strcmp(mutation, "climb")) {
			others += strcmp(mutation, "seed") != 0;
			continue;
		}
		climbs++;
		assert_int_equal(json_array_size(parents), 1);
		snprintf(key, sizeof(key), "%lld", (long long)json_integer_value(json_array_get(parents, 0)));
		parent = json_object_get(by_id, key);
		assert_non_null(parent);
		assert_string_equal(json_string_value(json_object_get(parent, "verdict")), "ok");

		for (size_t k = 0; k < f->n_families; k++)
			if (!strcmp(f->families[k].name, json_string_value(json_object_get(r, "family"))))
				fam = &f->families[k];
		assert_non_null(fam);
		mine = json_object_get(r, "params");
		theirs = json_object_get(parent, "params");
		for (size_t k = 0; k < fam->cand.n_params; k++) {
			const struct ks_param *p = &fam->cand.params[k];
			int64_t a = json_integer_value(json_object_get(mine, p->name));
			int64_t b = json_integer_value(json_object_get(theirs, p->name));
			size_t ia = 0, ib = 0;

			while (ia < p->n_values && p->values[ia] != a)
				ia++;
			while (ib < p->n_values && p->values[ib] != b)
				ib++;
			if (ia == ib)
				continue;
			moved++;
			if (ia + 1 != ib && ib + 1 != ia)
				fail_msg("climb %s moved %s from %lld to %lld: more than one place", key,
					 p->name, (long long)b, (long long)a);
		}
		assert_int_equal(moved, 1);
	}
	if (climbs < 5 || others < 3)
		fail_msg("%d climbs and %d other moves in 26 proposals at --climb 0.5:\n%s", climbs, others,
			 choices);
	json_decref(by_id);
	json_decref(records);
	free(choices);
}

/*
 * An archive with records of an older evaluator generation (records from
 * before the archive kept it: generation 1) is said at every start, with
 * a log event; one a single generation wrote is not.
 */
static void test_a_mix_of_evaluators_is_said(void **state)
{
	struct fixture *f = *state;
	struct toy t1 = { .lock = PTHREAD_MUTEX_INITIALIZER }, t2 = { .lock = PTHREAD_MUTEX_INITIALIZER },
		   t3 = { .lock = PTHREAD_MUTEX_INITIALIZER }, t4 = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct ks_search_summary sum;
	struct ks_error err;
	char *choices, *log;

	/* an archive as an evaluator before the key wrote it */
	free(run(f, "evmix", 3, 6, 0, &t1, 0, &sum, &err));
	test_evaluator = 2;
	choices = run_with(f, "evmix", 3, 4, 0, NULL, &t2, 0, &sum, &err, &log);
	assert_contains(log, "\"event\":\"evaluator_mix\"");
	assert_contains(log, "\"oldest\":1");
	free(choices);
	free(log);
	/* and again at the next start: the archive still mixes them */
	choices = run_with(f, "evmix", 3, 2, 0, NULL, &t3, 0, &sum, &err, &log);
	assert_contains(log, "\"event\":\"evaluator_mix\"");
	free(choices);
	free(log);
	/* one generation from the start: nothing to say, then or later */
	choices = run_with(f, "evone", 3, 4, 0, NULL, &t4, 0, &sum, &err, &log);
	assert_null(strstr(log, "evaluator_mix"));
	free(choices);
	free(log);
	choices = run_with(f, "evone", 3, 2, 0, NULL, &t4, 0, &sum, &err, &log);
	assert_null(strstr(log, "evaluator_mix"));
	test_evaluator = 0;
	free(choices);
	free(log);
}

static void test_llm_children_verify_and_strategies_learn(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER, .eval_us = 10000 },
		   t2 = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct ks_search_summary sum;
	struct ks_error err;
	struct llm_env e;
	struct ks_llm_mutator_stats ls;
	json_t *records, *prompts, *reqs, *r, *p;
	char *choices, *log;
	size_t i, llm_ok = 0, rewritten = 0;

	llm_up(&e, "[{\"edit_params\": \"auto\"}]", 2, 0);
	/* more budget than the seeds' 32 combinations: the rest must come from the LLM */
	choices = run_with(f, "llm", 4, 80, 0, e.llm, &t, 0, &sum, &err, &log);
	ls = llm_stats(&e);
	assert_string_equal(sum.stop_reason, "budget");
	assert_int_equal(sum.evaluated, 80);
	assert_true(ls.requests > 0);
	assert_true(ls.children > 0 && ls.ok > 0);
	assert_true(ls.tuned > 0);
	assert_true(ls.rewrites > 0);
	assert_contains(choices, " llm\n");
	assert_contains(choices, " tune\n");
	assert_contains(log, "\"event\":\"llm_request\"");
	assert_contains(log, "\"event\":\"strategy_rewrite\"");

	/* LLM children are in the archive with their prompt, usage and a family of their own */
	records = all_records(f, "llm");
	json_array_foreach(records, i, r)
	{
		if (strcmp(json_string_value(json_object_get(r, "mutation")), "llm"))
			continue;
		assert_true(json_integer_value(json_object_get(r, "prompt_id")) > 0);
		assert_true(json_integer_value(json_object_get(json_object_get(r, "llm"), "prompt_tokens")) >
			    0);
		assert_string_equal(
			json_string_value(json_object_get(json_object_get(r, "llm"), "answer_form")),
			"edits");
		assert_true(!strncmp(json_string_value(json_object_get(r, "family")), "llm-", 4));
		assert_int_equal(json_array_size(json_object_get(r, "parents")), 1);
		llm_ok += !strcmp(json_string_value(json_object_get(r, "verdict")), "ok");
	}
	assert_true(llm_ok > 0);

	/* token totals are kept in the archive, over runs */
	{
		struct ks_archive *ar = open_archive(f, "llm");
		void *data = NULL;
		size_t size = 0;
		json_t *usage;

		assert_int_equal(ks_archive_state_get(ar, "llm/usage", &data, &size, &err), 0);
		usage = json_loadb(data, size, 0, NULL);
		assert_non_null(usage);
		assert_int_equal(json_integer_value(json_object_get(usage, "requests")),
				 (json_int_t)(ls.requests + ls.failed));
		assert_true(json_integer_value(json_object_get(usage, "prompt_tokens")) > 0);
		json_decref(usage);
		free(data);
		ks_archive_close(ar);
	}

	/* the strategies' statistics moved, and the LLM rewrote one */
	prompts = all_prompts(f, "llm");
	assert_true(json_array_size(prompts) >= 9); /* 8 seeds + rewrites */
	assert_true(stat_sum(prompts, "uses") > 0);
	assert_true(stat_sum(prompts, "answers") > 0);
	assert_true(stat_sum(prompts, "children") >= (int64_t)ls.children);
	assert_true(stat_sum(prompts, "ok") > 0);
	json_array_foreach(prompts, i, p) if (strcmp(json_string_value(json_object_get(p, "origin")), "seed"))
	{
		assert_true(json_integer_value(json_object_get(p, "parent")) > 0);
		assert_contains(json_string_value(json_object_get(p, "text")), "Rewritten by fake-llm");
		rewritten++;
	}
	assert_true(rewritten > 0);

	/* what the LLM was sent: the system prompt, then the parent's source and a strategy */
	reqs = fake_records(&e.fake, ls.requests);
	r = json_object_get(json_array_get(reqs, 0), "body");
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(json_object_get(r, "messages"), 0), "content")),
			    "You write CUDA kernels for the toy operator.");
	assert_contains(json_string_value(json_object_get(json_array_get(json_object_get(r, "messages"), 1),
							  "content")),
			"/* ksearch");
	assert_contains(json_string_value(json_object_get(json_array_get(json_object_get(r, "messages"), 1),
							  "content")),
			"## The strategy to follow this time");

	/* a later run without the LLM resumes with the LLM's families */
	free(choices);
	choices = run_with(f, "llm", 4, 10, 0, NULL, &t2, 0, &sum, &err, NULL);
	assert_int_equal(sum.resumed, 1);
	/* it may find nothing left: the LLM's children were tuned in the first run, as time allowed */
	assert_true(sum.evaluated <= 10);
	if (sum.evaluated == 0)
		assert_string_equal(sum.stop_reason, "exhausted");
	assert_true(sum.added_families > 0);

	json_decref(reqs);
	json_decref(records);
	json_decref(prompts);
	free(choices);
	free(log);
	llm_down(&e);
}

static void test_llm_faults_are_survived_and_recorded(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER, .eval_us = 5000 };
	struct ks_search_summary sum;
	struct ks_error err;
	struct llm_env e;
	struct ks_llm_mutator_stats ls;
	json_t *records, *reqs, *r, *prompts;
	char *choices, *log;
	size_t i, contract = 0, repair_turns = 0;

	/* one request at a time, so the steps meet the requests in order */
	llm_up(&e,
	       "[{\"status\": 429, \"retry_after\": 1}, {\"status\": 500}, {\"malformed\": true},"
	       " {\"truncated\": true}, {\"no_code\": true},"
	       " {\"edit\": {\"search\": \"no such line\", \"replace\": \"x\"}},"
	       " {\"reply\": \"Here:\\n```cuda\\n/* ksearch {\\\"launch\\\": 7} */\\nextern \\\"C\\\" "
	       "__global__ void k() {}\\n```\\n\"},"
	       " {\"edit_params\": \"auto\"}]",
	       1, 0);
	choices = run_with(f, "faults", 6, 60, 0, e.llm, &t, 0, &sum, &err, &log);
	ls = llm_stats(&e);
	assert_string_equal(sum.stop_reason, "budget");
	assert_int_equal(sum.evaluated, 60);
	assert_true(ls.failed >= 2);	    /* malformed and truncated bodies are not retried */
	assert_true(ls.answer_errors >= 2); /* no code; an edit that does not apply */
	assert_true(ls.repairs >= 2);
	assert_true(ls.ok > 0); /* and it goes on to verified LLM kernels */
	assert_contains(log, "\"event\":\"llm_error\"");
	assert_contains(log, "\"event\":\"answer_error\"");
	assert_contains(log, "no code block and no SEARCH/REPLACE edits");
	assert_contains(log, "SEARCH text not found");

	/* the unusable kernel is in the archive as a contract error of the LLM's */
	records = all_records(f, "faults");
	json_array_foreach(records, i, r) if (!strcmp(json_string_value(json_object_get(r, "verdict")),
						      "contract_error") &&
					      json_object_get(r, "llm")) contract++;
	assert_true(contract > 0);

	/* repair turns carry the earlier answer and the evidence */
	reqs = fake_records(&e.fake, 8);
	json_array_foreach(reqs, i, r)
	{
		json_t *msgs = json_object_get(json_object_get(r, "body"), "messages");

		if (json_array_size(msgs) == 4) {
			assert_string_equal(
				json_string_value(json_object_get(json_array_get(msgs, 2), "role")),
				"assistant");
			assert_contains(
				json_string_value(json_object_get(json_array_get(msgs, 3), "content")),
				"This is repair attempt");
			repair_turns++;
		}
	}
	assert_true(repair_turns >= 2);
	prompts = all_prompts(f, "faults");
	assert_true(stat_sum(prompts, "answer_errors") >= 2);

	json_decref(prompts);
	json_decref(reqs);
	json_decref(records);
	free(choices);
	free(log);
	llm_down(&e);
}

static void test_llm_budget_spent_the_search_goes_on_and_the_key_is_never_written(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct ks_search_summary sum;
	struct ks_error err;
	struct llm_env e;
	struct ks_llm_mutator_stats ls;
	struct ks_archive *ar;
	char *choices, *log, *dump = NULL, *recorded;
	size_t dump_size = 0;
	FILE *out;

	/* the Anthropic protocol this time: the key goes in x-api-key */
	llm_up_with(&e, KS_LLM_ANTHROPIC, "[{\"edit_params\": \"auto\"}]", 2, 1);
	/* one token of budget: the first answers spend it; the built-in mutator finishes the space */
	choices = run_with(f, "budget", 9, 500, 0, e.llm, &t, 0, &sum, &err, &log);
	ls = llm_stats(&e);
	assert_string_equal(sum.stop_reason, "exhausted");
	assert_true(ls.requests + ls.failed <= 2);
	assert_true(sum.evaluated >= 32);
	assert_contains(log, "\"event\":\"llm_unavailable\"");
	assert_contains(log, "token budget");

	/* the key is nowhere in what the run wrote: log, records, sources, prompts, state */
	ar = open_archive(f, "budget");
	out = open_memstream(&dump, &dump_size);
	if (ks_archive_export(ar, out, 0, &err) < 0)
		fail_msg("%s", err.msg);
	fclose(out);
	ks_archive_close(ar);
	assert_null(strstr(log, KEY));
	assert_null(strstr(dump, KEY));
	assert_contains(dump, "\"mutation\":\"llm\"");
	recorded = read_text(e.fake.record);
	assert_non_null(recorded);
	assert_null(strstr(recorded, KEY)); /* the fake redacts; the key went only in the header */
	assert_contains(recorded, "<redacted:");
	free(recorded);
	free(dump);
	free(choices);
	free(log);
	llm_down(&e);
}

static void test_llm_that_never_gives_code_is_not_asked_at_full_speed(void **state)
{
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER, .eval_us = 20000 };
	struct ks_search_summary sum;
	struct ks_error err;
	struct llm_env e;
	struct ks_llm_mutator_stats ls;
	char *choices;

	llm_up(&e, "[{\"no_code\": true}]", 2, 0);
	/* the seeds' 32 combinations take ~0.3 s; the fake answers in about a millisecond */
	choices = run_with(f, "nocode", 5, 32, 0, e.llm, &t, 0, &sum, &err, NULL);
	ls = llm_stats(&e);
	assert_string_equal(sum.stop_reason, "budget");
	assert_int_equal(ls.children, 0);
	assert_true(ls.answer_errors >= 3);
	/* two conversations of three turns each, then new requests wait (1 s, 2 s, ...) */
	if (ls.requests > 12)
		fail_msg("%llu requests in %.2f s: unusable answers must slow the asking down",
			 (unsigned long long)ls.requests, sum.wall_s);
	free(choices);
	llm_down(&e);
}

static void hung(int sig)
{
	(void)sig;
	fputs("the search did not end: it waits for ever on an LLM that never sends a usable kernel\n",
	      stderr);
	_exit(1);
}

/*
 * The built-in space used up, a budget larger than it, no time limit, and
 * a model that never sends code: the search must end ("exhausted") after
 * the mutator's default number of barren replies, and say why.
 */
static void test_llm_that_never_gives_code_does_not_hold_up_an_exhausted_search(void **state)
{
	static const char *const plain[] = { NULL };
	const struct endpoint defaults = { plain, 0, 0, 0, NULL, -1 };
	struct fixture *f = *state;
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct ks_search_summary sum;
	struct ks_error err;
	struct llm_env e;
	struct ks_llm_mutator_stats ls;
	char *choices, *log, *said = NULL;
	size_t said_size = 0;
	FILE *out;

	llm_up_endpoint(&e, KS_LLM_OPENAI, "[{\"no_code\": true}]", 2, 0, &defaults);
	signal(SIGALRM, hung);
	alarm(150);
	choices = run_with(f, "giveup", 5, 500, 0, e.llm, &t, 0, &sum, &err, &log);
	alarm(0);
	signal(SIGALRM, SIG_DFL);
	ls = llm_stats(&e);
	assert_string_equal(sum.stop_reason, "exhausted");
	assert_int_equal(sum.evaluated, 32); /* the seeds' space, nothing from the LLM */
	assert_int_equal(ls.children, 0);
	assert_int_equal(ls.gave_up, 12);
	assert_true(ls.answer_errors >= 12);
	assert_contains(log, "\"event\":\"llm_gave_up\",\"replies\":12");
	out = open_memstream(&said, &said_size);
	e.llm[0]->summary(e.llm[0]->ctx, out);
	fclose(out);
	assert_contains(said, "the search ended because its last 12 replies brought nothing usable");
	assert_contains(said, "ksearch archive prompts");
	free(said);
	free(choices);
	free(log);
	llm_down(&e);
}

/*
 * The search against each kind of endpoint the fake can be: reasoning models
 * that refuse parameters, older servers, models that think in the content or
 * in a field (with decoy kernels in the thinking), a gateway that wants its
 * header, a local server without a key.  Each must bring verified LLM
 * kernels, and no decoy may ever reach the archive.
 */
static void test_llm_search_works_against_each_kind_of_endpoint(void **state)
{
	static const char *const reasoning_model[] = { "--mode", "openai-reasoning", NULL };
	static const char *const older_server[] = { "--mode", "legacy-max-tokens", NULL };
	static const char *const think[] = { "--mode", "think", NULL };
	static const char *const think_no_open[] = { "--mode", "think-no-open", NULL };
	static const char *const reasoning_content[] = { "--mode", "reasoning-content", NULL };
	static const char *const reasoning[] = { "--mode", "reasoning", NULL };
	static const char *const gateway[] = { "--require-header", "X-Gateway-Key: gw-secret-42", NULL };
	static const char *const local[] = { NULL };
	static const struct {
		const char *name;
		struct endpoint ep;
		enum ks_llm_provider provider;
		const char *adapted; /* in the notice, when the client must adapt */
	} cases[] = {
		{ "reasoning model",
		  { reasoning_model, 0, 0.8, 0, NULL, 0 },
		  KS_LLM_OPENAI,
		  "refused temperature 0.8" },
		{ "older server",
		  { older_server, 0, 0, 0, NULL, 0 },
		  KS_LLM_OPENAI,
		  "refused 'max_completion_tokens'" },
		{ "think tags", { think, 0, 0, 0, NULL, 0 }, KS_LLM_OPENAI, NULL },
		{ "think, opened by the template",
		  { think_no_open, 0, 0, 0, NULL, 0 },
		  KS_LLM_ANTHROPIC,
		  NULL },
		{ "reasoning_content", { reasoning_content, 0, 0, 0, NULL, 0 }, KS_LLM_OPENAI, NULL },
		{ "reasoning", { reasoning, 0, 0, 0, NULL, 0 }, KS_LLM_OPENAI, NULL },
		{ "gateway", { gateway, 0, 0, 0, "X-Gateway-Key: gw-secret-42", 0 }, KS_LLM_OPENAI, NULL },
		{ "local server, no key", { local, 1, 0, 0, NULL, 0 }, KS_LLM_OPENAI, NULL },
	};
	struct fixture *f = *state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER, .eval_us = 10000 };
		struct ks_search_summary sum;
		struct ks_error err;
		struct llm_env e;
		struct ks_llm_mutator_stats ls;
		json_t *records, *r;
		char archive[32], *choices, *log;
		size_t k, reasoned = 0;

		snprintf(archive, sizeof(archive), "endpoint%zu", i);
		llm_up_endpoint(&e, cases[i].provider, "[{\"edit_params\": \"auto\"}]", 2, 0, &cases[i].ep);
		choices = run_with(f, archive, 4, 50, 0, e.llm, &t, 0, &sum, &err, &log);
		ls = llm_stats(&e);
		if (!ls.ok || ls.failed)
			fail_msg("%s: %llu LLM kernels verified, %llu requests failed; log:\n%s",
				 cases[i].name, (unsigned long long)ls.ok, (unsigned long long)ls.failed,
				 log);
		if (cases[i].adapted) {
			assert_contains(log, "\"event\":\"llm_adapted\"");
			assert_contains(log, cases[i].adapted);
		} else {
			assert_null(strstr(log, "llm_adapted"));
		}
		assert_null(strstr(log, "DECOY_FROM_THINKING"));
		{
			/* everything the archive holds: records, sources, the LLM's families */
			struct ks_archive *ar = open_archive(f, archive);
			char *dump = NULL;
			size_t dump_size = 0;
			FILE *out = open_memstream(&dump, &dump_size);

			if (ks_archive_export(ar, out, 0, &err) < 0)
				fail_msg("%s", err.msg);
			fclose(out);
			ks_archive_close(ar);
			assert_contains(dump, "\"mutation\":\"llm\"");
			if (strstr(dump, "DECOY_FROM_THINKING"))
				fail_msg("%s: a draft from the reasoning reached the archive", cases[i].name);
			free(dump);
		}
		records = all_records(f, archive);
		json_array_foreach(records, k, r)
		{
			const json_t *llm = json_object_get(r, "llm");
			char *dump = json_dumps(r, 0);

			if (strstr(dump, "DECOY_FROM_THINKING"))
				fail_msg("%s: a draft from the reasoning reached the archive: %s",
					 cases[i].name, dump);
			free(dump);
			reasoned += llm && json_integer_value(json_object_get(llm, "reasoning_tokens")) > 0;
		}
		/* reasoning tokens are kept with the child where the endpoint reasons */
		if (strcmp(cases[i].name, "older server") && strcmp(cases[i].name, "gateway") &&
		    strcmp(cases[i].name, "local server, no key"))
			assert_true(reasoned > 0);
		else
			assert_int_equal(reasoned, 0);
		json_decref(records);
		free(choices);
		free(log);
		llm_down(&e);
	}
}

static void test_llm_answers_cut_off_are_their_own_failure(void **state)
{
	static const char *const length[] = { "--mode", "length", NULL };
	static const char *const reasoning_model[] = { "--mode", "openai-reasoning", NULL };
	/*
	 * The mutator gives up after 6 barren replies, not the 1000 of the other tests: the budget
	 * (32) is the seeds' 32 combinations, and were the space to run out before it, the search
	 * would otherwise wait on an LLM that only ever cuts off, its requests backing off up to a
	 * minute each: the one wait in this test that the budget does not bound. A fresh-clone CI
	 * run (sanitizer build, both cores busy) once saw the test pass meson's 300 s.
	 */
	const struct endpoint cut = { length, 0, 0, 0, NULL, 6 },
			      thinks_too_long = { reasoning_model, 0, 0, 200, NULL, 6 };
	struct fixture *f = *state;
	/* the seeds' 32 combinations take ~0.5 s; no LLM kernel comes, so the budget is theirs */
	struct toy t = { .lock = PTHREAD_MUTEX_INITIALIZER, .eval_us = 30000 },
		   t2 = { .lock = PTHREAD_MUTEX_INITIALIZER, .eval_us = 30000 };
	struct ks_search_summary sum;
	struct ks_error err;
	struct llm_env e;
	struct ks_llm_mutator_stats ls;
	json_t *reqs, *r, *prompts, *usage;
	char *choices, *log;
	size_t i, repairs = 0;
	struct ks_archive *ar;
	void *data = NULL;
	size_t size = 0;

	/* the answer itself ran long: a repair turn asks for short edits */
	llm_up_endpoint(&e, KS_LLM_OPENAI, "[{\"edit_params\": \"auto\"}]", 1, 0, &cut);
	choices = run_with(f, "cut", 4, 32, 0, e.llm, &t, 0, &sum, &err, &log);
	ls = llm_stats(&e);
	assert_int_equal(ls.children, 0);
	assert_true(ls.cut_off >= 2);
	assert_true(ls.answer_errors >= ls.cut_off);
	assert_contains(log, "cut off at 32768 tokens: raise --max-tokens");
	assert_contains(log, "\"cut_off\":true");
	reqs = fake_records(&e.fake, ls.requests);
	json_array_foreach(reqs, i, r)
	{
		json_t *msgs = json_object_get(json_object_get(r, "body"), "messages");
		const char *followup = json_string_value(json_object_get(json_array_get(msgs, 3), "content"));

		if (followup) {
			assert_contains(followup, "Verdict: cut_off");
			assert_contains(followup, "cut off at 32768 tokens");
			repairs++;
		}
	}
	assert_true(repairs > 0);
	prompts = all_prompts(f, "cut");
	assert_true(stat_sum(prompts, "cut_off") >= 2);
	ar = open_archive(f, "cut");
	assert_int_equal(ks_archive_state_get(ar, "llm/usage", &data, &size, &err), 0);
	usage = json_loadb(data, size, 0, NULL);
	assert_true(json_integer_value(json_object_get(usage, "cut_off")) >= 2);
	json_decref(usage);
	free(data);
	ks_archive_close(ar);
	json_decref(prompts);
	json_decref(reqs);
	free(choices);
	free(log);
	llm_down(&e);

	/* the budget went to reasoning: asking again cannot help, so no repair turn */
	llm_up_endpoint(&e, KS_LLM_OPENAI, "[{\"edit_params\": \"auto\"}]", 1, 0, &thinks_too_long);
	choices = run_with(f, "cut2", 4, 32, 0, e.llm, &t2, 0, &sum, &err, &log);
	ls = llm_stats(&e);
	assert_true(ls.cut_off >= 1);
	assert_int_equal(ls.repairs, 0);
	assert_contains(log, "cut off at 200 tokens: raise --max-tokens (it was still reasoning)");
	free(choices);
	free(log);
	llm_down(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_seed_same_choices),
		cmocka_unit_test(test_resume_continues_the_same_sequence),
		cmocka_unit_test(test_a_search_resumes_with_fewer_jobs_and_lanes_than_it_stopped_with),
		cmocka_unit_test(test_no_duplicates_and_failures_cost_one_evaluation),
		cmocka_unit_test(test_the_same_binary_is_evaluated_once),
		cmocka_unit_test(test_a_free_lane_takes_the_build_of_the_least_busy_gpus),

		cmocka_unit_test(test_target_stops_and_internal_failure_is_reported),
		cmocka_unit_test(test_fixed_seed_proposals_are_pinned),
		cmocka_unit_test(test_a_mutator_is_a_table_and_one_line),
		cmocka_unit_test(test_knob_children_are_new_sources_at_their_parents_params),
		cmocka_unit_test(test_the_mutators_of_a_run_come_from_the_table),
		cmocka_unit_test(test_default_jobs_follow_the_gpus_and_the_cpus),
		cmocka_unit_test(test_searches_respect_constraints_and_exhaust_the_allowed_space),
		cmocka_unit_test(test_map_elites_climbs_from_the_bests),
		cmocka_unit_test(test_a_mix_of_evaluators_is_said),

		cmocka_unit_test(test_llm_children_verify_and_strategies_learn),
		cmocka_unit_test(test_llm_faults_are_survived_and_recorded),
		cmocka_unit_test(test_llm_budget_spent_the_search_goes_on_and_the_key_is_never_written),
		cmocka_unit_test(test_evidence_counts_the_time_it_held_the_gpu_where_it_ran),
		cmocka_unit_test(test_llm_that_never_gives_code_is_not_asked_at_full_speed),
		cmocka_unit_test(test_llm_that_never_gives_code_does_not_hold_up_an_exhausted_search),
		cmocka_unit_test(test_llm_search_works_against_each_kind_of_endpoint),
		cmocka_unit_test(test_llm_answers_cut_off_are_their_own_failure),
		cmocka_unit_test(test_new_elites_are_profiled_within_the_share),
		cmocka_unit_test(test_a_resumed_search_profiles_the_elites_left_unprofiled),
		cmocka_unit_test(test_a_search_out_of_time_starts_no_profile),
		cmocka_unit_test(test_new_bests_are_sanitizer_checked_within_the_share),
		cmocka_unit_test(test_a_failed_check_demotes_the_best_and_the_search_goes_on),
		cmocka_unit_test(test_lucky_bests_are_confirmed_and_lose_their_place),
		cmocka_unit_test(test_last_confirmations_end_with_the_time_s_grace),
		cmocka_unit_test(test_an_unavailable_sanitizer_is_said_once_and_the_search_goes_on),
		cmocka_unit_test(test_a_resumed_search_checks_the_unchecked_best),

		cmocka_unit_test(test_no_permission_is_said_once_and_the_search_goes_on),
		cmocka_unit_test(test_profiles_failing_in_a_row_stop_profiling),
		cmocka_unit_test(test_a_seed_that_fails_to_bind_fails_the_load_and_holds_nothing),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
