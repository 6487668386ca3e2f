/*
 * test_cluster_mpi.c - the MPI transport between ranks (src/cluster), run by
 * tests/cluster/t0400-cluster-mpi.sh under `mpirun --oversubscribe -np 3`.
 *
 * Rank 0 drives the remote backend as the search does (build from
 * several compile threads, then evaluate or discard); ranks 1 and 2 serve
 * it with a toy backend defined here, never in the product: it "builds"
 * param v in 20 ms and "times" it in 30 ms with fitness 1.5 v, says which
 * rank did each, and gives v % 5 == 4 a compile_error.
 *
 *   roundtrip  every job's result comes back right, from both ranks, built
 *              and timed on the same rank
 *   local      as roundtrip, with rank 0's own lanes (the toy, in rank 0's
 *              process) beside the ranks': all three build and time jobs
 *   wide       as local, with rank 1 serving two GPUs (lanes): profiles on
 *              ranks 0 and 2 (one GPU each) find their rank drained, and no
 *              candidate is timed there while they run, but once the first
 *              has shown how long one takes, builds start there near the
 *              end of one; rank 1 goes on timing candidates beside its
 *              profiles
 *   wide0      as local, with rank 0's own lanes two GPUs: a build held on
 *              rank 0 while rank 0 profiles counts the profile among what
 *              waits for its GPUs (the backlog by which a free lane picks
 *              a build), as a profile on another rank does
 *   kill       rank 2 is killed (SIGKILL) in its third build: it is found
 *              dead and its jobs are done by rank 1 or by rank 0's own lane
 *   kill0      rank 0 is killed once the ranks serve it: with nobody to stop
 *              them, they give up after rank 0's silence, saying why
 *   garbage    rank 2 sends bytes that are not a message: rank 0 says so
 *   one        no MPI: the same jobs on the toy backend in this process
 *              (run alone and under `mpirun -np 1`, the output is the same)
 *   search     ks_search_run() with the remote backend over ranks 1 and 2
 *              and rank 0's own lane (a toy whose results are functions of
 *              family and params, twins included) makes the same choices,
 *              with the same results, as the same search with the toy
 *              in-process on as many lanes and compile threads
 *
 * Prints one line per check ("ok ..." or "FAIL ..."), exits 1 on a failure.
 */
#include <mpi.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ksearch/base/frame.h"
#include "ksearch/base/util.h"
#include "ksearch/cluster/cluster.h"
#include "ksearch/cluster/role.h"
#include "ksearch/evaluate/profile.h"
#include "ksearch/search/mutator.h"
#include "ksearch/search/search.h"

#define N_JOBS 40
#define N_JOBS_WIDE 160 /* wide, wide0: enough to keep every rank busy through the profiles */

static int my_rank;
static const char *scenario;
static int failures;
static int builds;
/*
 * This process's toy candidates being built, held or timed; while a toy
 * profile runs, the builds and the timings that started.
 */
static int here_now, profiling, built_while_profiling, timed_while_profiling;
/* this process's toy timings running now */
static int timing_now;
/* wide0: builds held on rank 0 while it profiled, and those whose backlog left the profile out */
static int held_while_profiling, backlog_short;

/* Whether this process serves two GPUs: rank 1 in "wide", rank 0's own lanes in "wide0". */
static int two_gpus_here(void)
{
	return (!strcmp(scenario, "wide") && my_rank == 1) || (!strcmp(scenario, "wide0") && my_rank == 0);
}

static void check(int ok, const char *fmt, const char *detail)
{
	printf("%s ", ok ? "ok" : "FAIL");
	printf(fmt, detail);
	printf("\n");
	fflush(stdout);
	failures += !ok;
}

/* ---- the toy backend ---- */

static int toy_build(void *ctx, const struct ks_family *fam, const int64_t *params, void **built,
		     struct ks_result *res, struct ks_error *err)
{
	int64_t v = params[0];

	(void)ctx;
	(void)fam;
	(void)err;
	*built = NULL;
	__atomic_add_fetch(&here_now, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&profiling, __ATOMIC_SEQ_CST))
		__atomic_add_fetch(&built_while_profiling, 1, __ATOMIC_SEQ_CST);
	usleep(20000);
	/* its third build, whichever job that is: a rank dies with jobs in flight */
	if (!strcmp(scenario, "kill") && my_rank == 2 &&
	    __atomic_add_fetch(&builds, 1, __ATOMIC_SEQ_CST) == 3)
		raise(SIGKILL);
	if (v % 5 == 4) {
		ks_result_fail(res, KS_VERDICT_COMPILE_ERROR, "toy: %lld does not compile (rank %d)",
			       (long long)v, my_rank);
		__atomic_sub_fetch(&here_now, 1, __ATOMIC_SEQ_CST);
		return 0;
	}
	res->verdict = KS_VERDICT_OK;
	res->has |= KS_RESULT_BUILT;
	ks_result_set_evidence(res, "toy: built on rank %d", my_rank);
	snprintf(res->binary, sizeof(res->binary), "%064llx", (unsigned long long)v);
	*built = ks_calloc(1, sizeof(int));
	*(int *)*built = my_rank;
	return 0;
}

static int toy_evaluate(void *ctx, int lane, const struct ks_family *fam, const int64_t *params, void *built,
			struct ks_result *res, struct ks_error *err)
{
	int built_on = *(int *)built;

	(void)ctx;
	(void)fam;
	(void)err;
	free(built);
	if (__atomic_load_n(&profiling, __ATOMIC_SEQ_CST))
		__atomic_add_fetch(&timed_while_profiling, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&timing_now, 1, __ATOMIC_SEQ_CST);
	usleep(30000);
	__atomic_sub_fetch(&timing_now, 1, __ATOMIC_SEQ_CST);
	__atomic_sub_fetch(&here_now, 1, __ATOMIC_SEQ_CST);
	res->has |= KS_RESULT_EVALUATED;
	res->fitness = 1.5 * (double)params[0];
	ks_result_set_evidence(res, "toy: built on rank %d, timed on rank %d", built_on, my_rank);
	res->where.gpu = lane; /* the rank is rank 0's to write, from the rank that answered */
	snprintf(res->where.host, sizeof(res->where.host), "toy host %d", my_rank);
	return 0;
}

static void toy_discard(void *ctx, void *built)
{
	(void)ctx;
	free(built);
	__atomic_sub_fetch(&here_now, 1, __ATOMIC_SEQ_CST);
}

/*
 * A profile, which holds a GPU for a while, on whichever rank's turn it is:
 * on a rank of one GPU it should find none of that rank's candidates built,
 * held or being timed (their results would wait for it, and every rank's
 * behind them), and none should be timed there while it runs, though builds
 * may start near its end; a rank of two GPUs (two_gpus_here()) goes on with
 * its candidates on the other, so there it lasts until one starts (at most
 * 2 s), and 60 ms more, for builds started beside it to come back.  It says what it found in why: "rank R,
 * beside N candidates, T timed and B built during it".
 */
static int toy_profile(void *ctx, int lane, const struct ks_family *fam, const int64_t *params,
		       const volatile sig_atomic_t *cancel, struct ks_profile_outcome *out,
		       struct ks_error *err)
{
	int beside = __atomic_load_n(&here_now, __ATOMIC_SEQ_CST), timed, built;

	(void)ctx;
	(void)lane;
	(void)fam;
	(void)params;
	(void)cancel;
	(void)err;
	__atomic_store_n(&built_while_profiling, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&timed_while_profiling, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&profiling, 1, __ATOMIC_SEQ_CST);
	usleep(100000);
	for (int ms = 0;
	     two_gpus_here() && ms < 2000 && !__atomic_load_n(&timed_while_profiling, __ATOMIC_SEQ_CST) &&
	     !__atomic_load_n(&built_while_profiling, __ATOMIC_SEQ_CST);
	     ms++)
		usleep(1000);
	if (two_gpus_here())
		usleep(60000);
	__atomic_store_n(&profiling, 0, __ATOMIC_SEQ_CST);
	timed = __atomic_load_n(&timed_while_profiling, __ATOMIC_SEQ_CST);
	built = __atomic_load_n(&built_while_profiling, __ATOMIC_SEQ_CST);
	memset(out, 0, sizeof(*out));
	out->status = KS_PROFILE_OK;
	snprintf(out->profile.tool, sizeof(out->profile.tool), "toy");
	snprintf(out->why, sizeof(out->why), "rank %d, beside %d candidates, %d timed and %d built during it",
		 my_rank, beside, timed, built);
	return 0;
}

static const struct ks_backend toy = { .lanes = 1,
				       .evaluator = 3,
				       .build = toy_build,
				       .evaluate = toy_evaluate,
				       .discard = toy_discard,
				       .profile = toy_profile };

/* ---- the search's toy: results are functions of (family, params), as in test_search.c ---- */

static uint64_t search_hash(const struct ks_family *f, const int64_t *params)
{
	uint64_t h = 1469598103934665603ull;

	for (const char *c = f->name; *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ull;
	for (size_t i = 0; i < f->cand.n_params; i++)
		h = (h ^ (uint64_t)params[i]) * 1099511628211ull;
	return h;
}

static int search_build(void *ctx, const struct ks_family *f, const int64_t *params, void **built,
			struct ks_result *res, struct ks_error *err)
{
	uint64_t h = search_hash(f, params);

	(void)ctx;
	(void)err;
	*built = NULL;
	if (h % 11 == 0) {
		ks_result_fail(res, KS_VERDICT_COMPILE_ERROR, "toy: h %% 11");
		return 0;
	}
	/* family a's B changes nothing in the binary: twins, timed once */
	res->has |= KS_RESULT_BUILT; /* what the serialiser writes a fingerprint for */
	snprintf(res->binary, sizeof(res->binary), "%02x%02x%060d", (unsigned)f->name[0], (unsigned)params[0],
		 0);
	*built = ks_calloc(1, 1);
	return 0;
}

/* What the toy's binary is made of (search_build()'s fingerprint): the family's initial and A. */
static uint64_t binary_hash(const struct ks_family *f, const int64_t *params)
{
	return ((uint64_t)(unsigned char)f->name[0] * 1099511628211ull ^ (uint64_t)params[0]) *
	       6364136223846793005ull;
}

/*
 * Timing is a function of the binary, as on a GPU: which of two twins is
 * timed (the one whose build finished first) must not change the result.
 */
static int search_evaluate(void *ctx, int lane, const struct ks_family *f, const int64_t *params, void *built,
			   struct ks_result *res, struct ks_error *err)
{
	uint64_t h = binary_hash(f, params) >> 17;
	double fitness = 0.5 + (double)(h % 1000) / 250.0;

	(void)ctx;
	(void)lane;
	(void)err;
	free(built);
	/* vary the order results come back in; insertion order must not care */
	usleep((useconds_t)(search_hash(f, params) % 7) * 1000);
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
	return 0;
}

static const struct ks_backend search_toy = {
	.lanes = 1, .build = search_build, .evaluate = search_evaluate, .discard = toy_discard
};

/* Run a search with backend into dir/name; its choices and results, one line each in insertion order. */
static char *search_choices(const struct ks_op *op, const struct ks_family *fams, size_t n_fams,
			    const struct ks_backend *backend, int jobs, const char *dir, const char *name)
{
	const struct ks_mutator *mutators[] = { &ks_mutator_param };
	struct ks_search_config cfg = { .seed = 5,
					.budget = 60,
					.jobs = jobs,
					.explore = 0.3,
					.exploit = 0.5,
					.recent = 0.2,
					.climb = 0.5,
					.mutators = mutators,
					.n_mutators = 1 };
	struct ks_archive_options opts = { .flags = KS_ARCHIVE_CREATE | KS_ARCHIVE_NOSYNC,
					   .grid = op->grid,
					   .n_grid = op->n_grid };
	struct ks_search_summary sum = { 0 };
	struct ks_archive *ar;
	struct ks_error err;
	char *log_text = NULL, *line, *save = NULL, root[4200];
	size_t log_size = 0, len = 0;
	char *choices = ks_calloc(1, 1);

	snprintf(root, sizeof(root), "%s/%s", dir, name);
	cfg.log = open_memstream(&log_text, &log_size);
	if (ks_archive_open(&ar, root, "toy", "toy GPU", &opts, &err) < 0 ||
	    ks_search_run(ar, op, fams, n_fams, backend, &cfg, &sum, &err) < 0) {
		printf("FAIL the %s search: %s\n", name, err.msg);
		failures++;
	}
	ks_archive_close(ar);
	fclose(cfg.log);
	for (line = strtok_r(log_text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_t *ev = json_loads(line, 0, NULL);
		char *params, *add;

		if (ev && !strcmp(json_string_value(json_object_get(ev, "event")), "result")) {
			params = json_dumps(json_object_get(ev, "params"), JSON_COMPACT | JSON_SORT_KEYS);
			add = ks_asprintf("%lld %s %s %s %s %.6f %s\n",
					  (long long)json_integer_value(json_object_get(ev, "seq")),
					  json_string_value(json_object_get(ev, "family")), params,
					  json_string_value(json_object_get(ev, "mutation")),
					  json_string_value(json_object_get(ev, "verdict")),
					  json_number_value(json_object_get(ev, "fitness")),
					  json_string_value(json_object_get(ev, "outcome")));
			choices = realloc(choices, len + strlen(add) + 1);
			memcpy(choices + len, add, strlen(add) + 1);
			len += strlen(add);
			free(params);
			free(add);
		}
		json_decref(ev);
	}
	free(log_text);
	line = ks_asprintf("%sduplicates %llu\n", choices, (unsigned long long)sum.duplicates);
	free(choices);
	return line;
}

static void search_over_ranks(struct ks_cluster_comm *c, const struct ks_op *op)
{
	struct ks_cluster_remote_options opts = { .hello_ms = 20000,
						  .dead_after_ms = 10000,
						  .local = &search_toy,
						  .local_jobs = 2,
						  .local_model = "toy GPU" };
	struct ks_family *fams = NULL;
	struct ks_cluster_remote *r = NULL;
	struct ks_backend local = search_toy;
	struct ks_error err;
	char dir[] = "/tmp/ks-cluster-XXXXXX", *remote = NULL, *alone = NULL, *cmd;
	size_t n_fams = 0;
	int lines = 0;

	if (!mkdtemp(dir) || ks_families_load(op, &fams, &n_fams, &err) < 0 ||
	    ks_cluster_remote_open(&r, c, &opts, &err) < 0) {
		printf("FAIL setting up the search: %s\n", err.msg);
		failures++;
		goto cleanup;
	}
	remote = search_choices(op, fams, n_fams, ks_cluster_remote_backend(r), ks_cluster_remote_jobs(r),
				dir, "remote");
	local.lanes = ks_cluster_remote_backend(r)->lanes;
	local.depth_extra = ks_cluster_remote_backend(r)->depth_extra; /* the same depth, the same choices */
	alone = search_choices(op, fams, n_fams, &local, ks_cluster_remote_jobs(r), dir, "alone");
	for (const char *p = remote; *p; p++)
		lines += *p == '\n';
	/* the toy's space is 32 combinations: the search ends exhausted before its budget */
	check(lines > 30 && !strstr(remote, "duplicates 0\n"),
	      "the search over ranks ran, twins among its records%s", "");
	check(!strcmp(remote, alone), "the same choices and results as the search in one process%s", "");
	if (strcmp(remote, alone))
		printf("--- over ranks:\n%s--- in one process:\n%s", remote, alone);
cleanup:
	ks_cluster_remote_close(r);
	ks_families_free(fams, n_fams);
	free(remote);
	free(alone);
	cmd = ks_asprintf("rm -rf '%s'", dir);
	if (system(cmd) != 0)
		printf("FAIL removing %s\n", dir);
	free(cmd);
}

/* ---- rank 0: drive a backend as the search's threads do ---- */

struct run {
	const struct ks_backend *backend;
	const struct ks_family *fam;
	pthread_mutex_t lock;
	int next, n_jobs;
	struct ks_result results[N_JOBS_WIDE];
	int failed[N_JOBS_WIDE];
};

/*
 * wide0: a build held on rank 0 while rank 0 profiles must count the
 * profile among what waits for rank 0's two GPUs, beside the timings
 * running there: a backlog of at least (1 + running) / 2.  Counted only
 * when the profile ran before and after the call.
 */
static void observe_backlog(const struct ks_backend *backend, void *built, const char *evidence)
{
	int rank = -1, before, after, running_before, running_after;
	double backlog;

	if (sscanf(evidence, "toy: built on rank %d", &rank) != 1 || rank != 0)
		return;
	before = __atomic_load_n(&profiling, __ATOMIC_SEQ_CST);
	running_before = __atomic_load_n(&timing_now, __ATOMIC_SEQ_CST);
	backlog = backend->backlog(backend->ctx, built);
	running_after = __atomic_load_n(&timing_now, __ATOMIC_SEQ_CST);
	after = __atomic_load_n(&profiling, __ATOMIC_SEQ_CST);
	if (!before || !after)
		return;
	__atomic_add_fetch(&held_while_profiling, 1, __ATOMIC_SEQ_CST);
	if (2 * backlog < 1 + (running_before < running_after ? running_before : running_after))
		__atomic_add_fetch(&backlog_short, 1, __ATOMIC_SEQ_CST);
}

static void *driver(void *arg)
{
	struct run *run = arg;

	for (;;) {
		int64_t params[KS_CANDIDATE_MAX_PARAMS] = { 0 };
		void *built = NULL;
		struct ks_error err;
		int i, rc;

		pthread_mutex_lock(&run->lock);
		i = run->next++;
		pthread_mutex_unlock(&run->lock);
		if (i >= run->n_jobs)
			return NULL;
		params[0] = i;
		rc = run->backend->build(run->backend->ctx, run->fam, params, &built, &run->results[i], &err);
		if (rc == 0 && built && !strcmp(scenario, "wide0"))
			observe_backlog(run->backend, built, run->results[i].evidence);
		if (rc < 0 || (built && run->backend->evaluate(run->backend->ctx, 0, run->fam, params, built,
							       &run->results[i], &err) < 0)) {
			printf("job %d failed: %s\n", i, err.msg);
			run->failed[i] = 1;
		}
	}
}

/* Run the jobs; check every result (and that it names the rank that timed it); the ranks that timed them as a
 * bit set. */
static unsigned run_jobs(const struct ks_backend *backend, const struct ks_family *fam, int threads)
{
	struct run run = { .backend = backend,
			   .fam = fam,
			   .n_jobs = strcmp(scenario, "wide") && strcmp(scenario, "wide0") ? N_JOBS
											   : N_JOBS_WIDE };
	pthread_t tids[16];
	unsigned timed_on = 0;
	int wrong = 0;
	char what[256] = "";

	pthread_mutex_init(&run.lock, NULL);
	for (int i = 0; i < run.n_jobs; i++)
		ks_result_init(&run.results[i]);
	for (int i = 0; i < threads; i++)
		pthread_create(&tids[i], NULL, driver, &run);
	for (int i = 0; i < threads; i++)
		pthread_join(tids[i], NULL);
	for (int i = 0; i < run.n_jobs; i++) {
		const struct ks_result *res = &run.results[i];
		int built_on = -1, timed = -1;

		if (i % 5 == 4) {
			wrong += run.failed[i] || res->verdict != KS_VERDICT_COMPILE_ERROR;
		} else if (run.failed[i] || res->verdict != KS_VERDICT_OK || res->fitness != 1.5 * i ||
			   sscanf(res->evidence, "toy: built on rank %d, timed on rank %d", &built_on,
				  &timed) != 2 ||
			   built_on != timed || res->where.rank != (strcmp(scenario, "one") ? timed : -1)) {
			if (!wrong)
				snprintf(what, sizeof(what),
					 "job %d: verdict %s fitness %g evidence '%s', rank %d", i,
					 ks_verdict_name(res->verdict), res->fitness, res->evidence,
					 res->where.rank);
			wrong++;
		} else {
			timed_on |= 1u << timed;
		}
		ks_result_release(&run.results[i]);
	}
	check(!wrong, "every result is right, built and timed on one rank%s", what);
	pthread_mutex_destroy(&run.lock);
	return timed_on;
}

/* Six profiles through the remote backend while the jobs run, each asked while rank 0 holds one. */
#define N_PROFILES 6

struct profiler {
	const struct ks_backend *backend;
	const struct ks_family *fam;
	int failed;
	char why[N_PROFILES][KS_ERROR_MAX];
};

static void *profiler(void *arg)
{
	struct profiler *p = arg;

	for (int i = 0; i < N_PROFILES; i++) {
		int64_t params[KS_CANDIDATE_MAX_PARAMS] = { 0 };
		struct ks_profile_outcome *out = ks_calloc(1, sizeof(*out));
		struct ks_error err;

		/* while rank 0 holds one of the jobs (for at most 2 s): jobs are in flight */
		for (int ms = 0; ms < 2000 && !__atomic_load_n(&here_now, __ATOMIC_SEQ_CST); ms++)
			usleep(1000);
		if (p->backend->profile(p->backend->ctx, 0, p->fam, params, NULL, out, &err) < 0 ||
		    out->status != KS_PROFILE_OK || strcmp(out->profile.tool, "toy"))
			p->failed++;
		snprintf(p->why[i], sizeof(p->why[i]), "%s", out->why);
		free(out);
	}
	return NULL;
}

/*
 * The profiles went to every rank in turn; each on a rank of one GPU found
 * it holding no candidate and saw none timed there while it ran; in "wide",
 * where the jobs outlast the profiles, at least one such profile after the
 * first saw builds start there before it ended (the rank reopened near its
 * end); each on rank 1 of "wide" (two GPUs) saw a candidate start beside it.
 */
static void check_profiles(const struct profiler *p)
{
	int wide = !strcmp(scenario, "wide"), wide0 = !strcmp(scenario, "wide0");
	unsigned ranks = 0;
	int wrong = 0, beside_wide = 0, reopened = 0;
	char what[600] = "";

	for (int i = 0; i < N_PROFILES; i++) {
		int rank, beside, timed, built, two_gpus;

		if (sscanf(p->why[i], "rank %d, beside %d candidates, %d timed and %d built during it", &rank,
			   &beside, &timed, &built) != 4) {
			rank = -1;
			beside = timed = built = 0;
		}
		two_gpus = (wide && rank == 1) || (wide0 && rank == 0);
		if (rank < 0 || (!two_gpus && (beside || timed)) || (two_gpus && !timed && !built)) {
			if (!wrong++)
				snprintf(what, sizeof(what), ": '%s'", p->why[i]);
			continue;
		}
		beside_wide += two_gpus;
		reopened += !two_gpus && built > 0;
		ranks |= 1u << rank;
	}
	check(p->failed == 0, "six profiles through the remote backend came back%s", "");
	check(ranks == 7, "they ran on ranks 0, 1 and 2, in turn%s", "");
	if (wide) {
		check(!wrong && beside_wide == 2,
		      "on ranks of one GPU each found none of its rank's candidates, and none was timed "
		      "there while it ran; on rank 1 (two GPUs) candidates went on beside both%s",
		      what);
		check(reopened > 0, "a rank of one GPU took builds again before its profile ended%s", "");
	} else if (wide0) {
		check(!wrong && beside_wide == 2,
		      "on ranks of one GPU each found none of its rank's candidates, and none was timed "
		      "there while it ran; on rank 0 (two GPUs of its own) candidates went on beside both%s",
		      what);
	} else {
		check(!wrong,
		      "each found its rank holding no candidate, and none was timed there while it ran%s",
		      what);
	}
}

static int load_family(struct ks_op *op, struct ks_family *fam)
{
	struct ks_error err;

	if (ks_op_find("rmsnorm", op, &err) < 0 ||
	    ks_candidate_load(op->seed_paths[0], &fam->cand, &err) < 0 ||
	    ks_candidate_bind(&fam->cand, op, &err) < 0) {
		printf("FAIL loading rmsnorm's first seed: %s\n", err.msg);
		return -1;
	}
	fam->name = "toy";
	return 0;
}

static int rank0(struct ks_cluster_comm *c, const struct ks_family *fam)
{
	struct ks_cluster_remote_options opts = { .hello_ms = 20000, .dead_after_ms = 2000 };
	int wide = !strcmp(scenario, "wide"), wide0 = !strcmp(scenario, "wide0");
	int with_local = !strcmp(scenario, "local") || !strcmp(scenario, "kill") || wide || wide0;
	struct ks_backend two = toy;
	struct ks_cluster_remote *r;
	struct ks_error err;
	char why[512];
	unsigned ranks;
	int dead;

	two.lanes = 2;
	if (with_local) {
		opts.local = wide0 ? &two : &toy;
		opts.local_jobs = 2;
		opts.local_model = "toy GPU";
	}
	if (ks_cluster_remote_open(&r, c, &opts, &err) < 0) {
		int stop_rank = 1;
		struct ks_cluster_msg stop;

		check(strstr(err.msg, "rank 2 sent a malformed message: not a ksearch message") != NULL,
		      "rank 0 rejects the malformed message: %s", err.msg);
		/* rank 1 still serves: tell it to stop so that the job ends */
		ks_cluster_msg_init(&stop, KS_CLUSTER_STOP);
		ks_cluster_comm_send(c, stop_rank, &stop, &err);
		return 0;
	}
	check(!strcmp(scenario, "roundtrip") || with_local, "the remote backend opened (%s)",
	      ks_cluster_remote_model(r));
	if (wide)
		check(ks_cluster_remote_gpus(r) == 4 && ks_cluster_remote_jobs(r) == 6 &&
			      ks_cluster_remote_backend(r)->lanes == 4 * KS_CLUSTER_LANES_PER_GPU,
		      "four GPUs, rank 1's two among them, and their lanes%s", "");
	else if (wide0)
		check(ks_cluster_remote_gpus(r) == 4 && ks_cluster_remote_jobs(r) == 6 &&
			      ks_cluster_remote_backend(r)->lanes == 4 * KS_CLUSTER_LANES_PER_GPU,
		      "four GPUs, rank 0's own two among them, and their lanes%s", "");
	else if (with_local)
		check(ks_cluster_remote_gpus(r) == 3 && ks_cluster_remote_jobs(r) == 6 &&
			      ks_cluster_remote_backend(r)->lanes == 3 * KS_CLUSTER_LANES_PER_GPU,
		      "three GPUs, one per rank, rank 0's own included, their lanes, and every rank's "
		      "compile "
		      "threads%s",
		      "");
	else
		check(ks_cluster_remote_gpus(r) == 2 &&
			      ks_cluster_remote_backend(r)->lanes == 2 * KS_CLUSTER_LANES_PER_GPU,
		      "two GPUs, one per serving rank, and their lanes%s", "");
	if (!strcmp(scenario, "local") || wide || wide0) {
		struct profiler p = { .backend = ks_cluster_remote_backend(r), .fam = fam };
		pthread_t tid;

		pthread_create(&tid, NULL, profiler, &p);
		ranks = run_jobs(ks_cluster_remote_backend(r), fam, ks_cluster_remote_jobs(r) + 2);
		pthread_join(tid, NULL);
		check_profiles(&p);
		if (wide0) {
			char seen[64];

			snprintf(seen, sizeof(seen), " (%d held, %d short)", held_while_profiling,
				 backlog_short);
			check(held_while_profiling > 0 && !backlog_short,
			      "builds held on rank 0 while it profiled counted the profile among what waits "
			      "for its GPUs%s",
			      seen);
		}
	} else {
		ranks = run_jobs(ks_cluster_remote_backend(r), fam, ks_cluster_remote_jobs(r) + 2);
	}
	dead = ks_cluster_remote_dead(r, why, sizeof(why));
	if (!strcmp(scenario, "roundtrip")) {
		check(ranks == 6, "ranks 1 and 2 both timed jobs%s", "");
		check(dead == 0, "no rank died%s", why);
	} else if (!strcmp(scenario, "local") || wide || wide0) {
		check(ranks == 7, "ranks 0, 1 and 2 all timed jobs%s", "");
		check(dead == 0, "no rank died%s", why);
	} else {
		check((ranks & 3) == 3, "ranks 0 and 1 timed jobs%s", "");
		check(dead == 1 && !strncmp(why, "rank 2: ", 8), "rank 2 was found dead: %s", why);
	}
	ks_cluster_remote_close(r);
	return 0;
}

int main(int argc, char **argv)
{
	struct ks_cluster_role role;
	struct ks_cluster_comm *c = NULL;
	struct ks_family fam = { 0 };
	struct ks_op op;
	struct ks_error err;
	struct ks_cluster_serve_options serve_opts = { .jobs = 2, .model = "toy GPU" };
	int initialised = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	scenario = argc > 1 ? argv[1] : "roundtrip";
	if (!strcmp(scenario, "search")) {
		if (ks_op_load("tests/cluster/fixtures/toy", &op, &err) < 0) {
			printf("FAIL loading the toy operator: %s\n", err.msg);
			return 1;
		}
	} else if (load_family(&op, &fam) < 0) {
		return 1;
	}
	ks_cluster_role_detect(&role, NULL);
	if (role.size == 1) {
		/* what every ksearch run outside an MPI job does: no MPI at all */
		MPI_Initialized(&initialised);
		check(!initialised, "one rank: MPI not initialised%s", "");
		run_jobs(&toy, &fam, 4);
		goto done;
	}
	if (ks_cluster_comm_open(&c, &argc, &argv, &err) < 0) {
		printf("FAIL %s\n", err.msg);
		return 1;
	}
	my_rank = ks_cluster_comm_rank(c);
	if (my_rank == 0 && !strcmp(scenario, "search")) {
		search_over_ranks(c, &op);
	} else if (!strcmp(scenario, "search")) {
		if (ks_cluster_serve(c, &op, &search_toy, &serve_opts, NULL, &err) < 0) {
			printf("FAIL rank %d: %s\n", my_rank, err.msg);
			failures++;
		}
	} else if (my_rank == 0 && !strcmp(scenario, "kill0")) {
		struct ks_cluster_remote_options opts = { .hello_ms = 20000 };
		struct ks_cluster_remote *r;

		if (ks_cluster_remote_open(&r, c, &opts, &err) == 0) {
			usleep(500000);
			raise(SIGKILL);
		}
		printf("FAIL rank 0: %s\n", err.msg);
		failures++;
	} else if (!strcmp(scenario, "kill0")) {
		serve_opts.silent_ms = 3000;
		check(ks_cluster_serve(c, &op, &toy, &serve_opts, NULL, &err) < 0 &&
			      strstr(err.msg, "rank 0 said nothing for") != NULL,
		      "a serving rank gives up when rank 0 is gone: %s", err.msg);
	} else if (my_rank == 0) {
		rank0(c, &fam);
	} else if (!strcmp(scenario, "garbage") && my_rank == 2) {
		ks_cluster_comm_send_bytes(c, 0, "KSF1 hello", 10, &err);
	} else {
		/* wide: rank 1 serves two GPUs */
		struct ks_backend two = toy;

		two.lanes = 2;
		if (ks_cluster_serve(c, &op, !strcmp(scenario, "wide") && my_rank == 1 ? &two : &toy,
				     &serve_opts, NULL, &err) < 0) {
			printf("FAIL rank %d: %s\n", my_rank, err.msg);
			failures++;
		}
	}
	ks_cluster_comm_close(c, ks_now_ms() + 5000, failures ? 1 : 0);
done:
	ks_candidate_release(&fam.cand);
	ks_op_release(&op);
	return failures ? 1 : 0;
}
