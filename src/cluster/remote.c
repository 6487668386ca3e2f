/*
 * remote.c - rank 0's backend: candidates built and timed on the other
 * ranks, and on rank 0's own GPUs (cluster.h).  The search's threads queue
 * messages and wait; one pump thread talks MPI, matches answers to jobs and
 * finds dead ranks.  A job placed on rank 0 is built and timed by the
 * search thread that waits on it, through the local backend, with no
 * message at all.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ksearch/base/frame.h"
#include "ksearch/base/util.h"
#include "ksearch/cluster/cluster.h"

enum stage { BUILDING, HELD, EVALUATING, DONE, FAILED };

/* A candidate handed to a rank; the search's *built while it is held there. */
struct rjob {
	uint64_t id;
	int rank;
	enum stage stage;
	int rebuild; /* built again after its rank died: the first build's result stands */
	const struct ks_family *fam;
	int64_t params[KS_CANDIDATE_MAX_PARAMS];
	size_t n_params;
	int64_t deadline_ms; /* when its rank must have answered */
	int64_t sent_ms;     /* when it was placed on its rank, for the rank's build time */
	struct ks_result res;
	char *error;
	void *local_built; /* rank 0's own build, held for evaluate() */
	int local_busy;	   /* a search thread runs its step on rank 0's backend now */
	/* a profile or sanitizer check on another rank (0: a candidate to build and time) */
	enum ks_cluster_evidence kind;
	void *outcome; /* the caller's ks_profile_outcome or ks_sanitize_outcome; NULL once it gave up */
};

struct rank_state {
	int gpus, jobs;
	int hello, bye, dead;
	int64_t last_heard;
	int outstanding; /* jobs sent and not yet done, held builds and evidence included */
	int draining;	 /* profiles or checks waiting for this rank to hold no candidate */
	/*
	 * While its one profile or check runs: when the rank takes candidates
	 * again (0: once it ends), so that their builds are done as it ends
	 * (take_evidence_rank()).
	 */
	int64_t reopen_ms;
	double build_ms; /* how long a build placed here takes to come back (moving average) */
};

/* The last KS_CLUSTER_EVIDENCE_KEEP durations of a kind of evidence on a drained rank, in ms. */
#define KS_CLUSTER_EVIDENCE_KEEP 8
struct evidence_times {
	int64_t ms[KS_CLUSTER_EVIDENCE_KEEP];
	int n, next;
};

/* A message to send; a job's contents are read from its rjob when it is sent. */
struct outgoing {
	int rank;
	enum ks_cluster_type type;
	uint64_t job;
	int evaluate;
};

struct ks_cluster_remote {
	struct ks_cluster_comm *c;
	struct ks_cluster_remote_options opts;
	struct rank_state *ranks;
	int size;
	char model[256];
	int evaluator, jobs, gpus;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t pump;
	struct rjob **live;
	size_t n_live, alloc_live;
	struct outgoing *out;
	size_t n_out, alloc_out;
	uint64_t next_id;
	int stopping;
	int64_t stop_deadline;
	int failed; /* MPI itself failed: every call fails with fail_err */
	struct ks_error fail_err;
	int n_dead;
	char dead_why[512];
	int *lane_busy;	    /* rank 0's own lanes (opts.local) */
	int next_evidence;  /* the rank the next profile or check goes to, in turn */
	int local_evidence; /* profiles and checks on rank 0's own lanes, running or waiting for one */
	struct evidence_times took[KS_CLUSTER_SANITIZE + 1]; /* by kind */
	struct ks_backend backend;
};

/* ---- under lock ---- */

static void queue_out(struct ks_cluster_remote *r, int rank, enum ks_cluster_type type, uint64_t job,
		      int evaluate)
{
	KS_ALLOC_GROW(r->out, r->n_out + 1, r->alloc_out);
	r->out[r->n_out++] = (struct outgoing){ rank, type, job, evaluate };
}

static struct rjob *find_job(struct ks_cluster_remote *r, uint64_t id)
{
	for (size_t i = 0; i < r->n_live; i++)
		if (r->live[i]->id == id)
			return r->live[i];
	return NULL;
}

static void forget_job(struct ks_cluster_remote *r, struct rjob *job)
{
	for (size_t i = 0; i < r->n_live; i++)
		if (r->live[i] == job) {
			r->live[i] = r->live[--r->n_live];
			break;
		}
	if (job->local_built && r->opts.local->discard)
		r->opts.local->discard(r->opts.local->ctx, job->local_built);
	ks_result_release(&job->res);
	free(job->error);
	free(job);
}

/* Whether rank i takes jobs: alive, with GPUs, and rank 0 only with lanes of its own. */
static int takes_jobs(const struct ks_cluster_remote *r, int i)
{
	return (i > 0 || r->opts.local) && !r->ranks[i].dead && r->ranks[i].gpus;
}

/*
 * Whether rank i is closed to new candidates for a profile or check: from
 * the moment one waits for it until it ends, or until its reopen time.
 */
static int closed(const struct ks_cluster_remote *r, int i)
{
	const struct rank_state *rs = &r->ranks[i];

	return rs->draining > 0 && !(rs->reopen_ms && ks_now_ms() >= rs->reopen_ms);
}

/* Whether a rank other than i takes jobs and is not closed for a profile or check. */
static int another_takes_jobs(const struct ks_cluster_remote *r, int i)
{
	for (int k = 0; k < r->size; k++)
		if (k != i && takes_jobs(r, k) && !closed(r, k))
			return 1;
	return 0;
}

/* A build placed on rank took ms to come back: the rank's moving average. */
static void note_build(struct ks_cluster_remote *r, int rank, int64_t ms)
{
	struct rank_state *rs = &r->ranks[rank];

	rs->build_ms = rs->build_ms > 0 ? 0.8 * rs->build_ms + 0.2 * (double)ms : (double)ms;
}

/*
 * The live rank with the most room for one more job (its jobs and GPUs),
 * or -1; not one draining for a profile or check (take_evidence_rank())
 * while another can take it.
 */
static int choose_rank(struct ks_cluster_remote *r)
{
	int best = -1, best_draining = 0;
	double best_load = 0;

	for (int i = 0; i < r->size; i++) {
		int draining = closed(r, i);
		double load;

		if (!takes_jobs(r, i))
			continue;
		load = (double)r->ranks[i].outstanding / (double)(r->ranks[i].jobs + 2 * r->ranks[i].gpus);
		if (best < 0 || draining < best_draining || (draining == best_draining && load < best_load)) {
			best = i;
			best_load = load;
			best_draining = draining;
		}
	}
	return best;
}

static int64_t job_deadline(const struct ks_cluster_remote *r, int evaluate)
{
	return ks_now_ms() + r->opts.build_ms + (evaluate ? r->opts.eval_ms : 0) + r->opts.dead_after_ms;
}

/* Send job to a live rank; a job no rank can take fails. */
static void dispatch(struct ks_cluster_remote *r, struct rjob *job, int evaluate)
{
	int rank = choose_rank(r);

	if (rank < 0) {
		job->stage = FAILED;
		free(job->error);
		job->error = ks_asprintf("every other rank has died; the first: %s", r->dead_why);
		return;
	}
	job->rank = rank;
	job->deadline_ms = job_deadline(r, evaluate);
	job->sent_ms = ks_now_ms();
	r->ranks[rank].outstanding++;
	if (rank > 0)
		queue_out(r, rank, KS_CLUSTER_JOB, job->id, evaluate);
	/* rank 0: the search thread waiting on the job runs it (run_local()) */
}

/* rank is gone: what it held goes to another rank. */
static void declare_dead(struct ks_cluster_remote *r, int rank, const char *why)
{
	if (r->ranks[rank].dead)
		return;
	r->ranks[rank].dead = 1;
	r->ranks[rank].outstanding = 0;
	if (!r->n_dead++)
		snprintf(r->dead_why, sizeof(r->dead_why), "rank %d: %s", rank, why);
	for (size_t i = 0; i < r->n_live; i++) {
		struct rjob *job = r->live[i];

		if (job->rank != rank || job->stage == DONE || job->stage == FAILED)
			continue;
		if (job->kind) {
			/* a profile or check: its caller says so, and the search goes on */
			free(job->error);
			job->error = ks_asprintf(
				"rank %d died during the %s: %s", rank,
				job->kind == KS_CLUSTER_PROFILE ? "profile" : "sanitizer check", why);
			job->stage = FAILED;
			continue;
		}
		if (job->stage == HELD) {
			/* its build is lost with the rank: build it again where it will be timed */
			job->stage = BUILDING;
			job->rebuild = 1;
		}
		dispatch(r, job, job->stage == EVALUATING);
	}
	pthread_cond_broadcast(&r->cond);
}

/* An outcome message's object into the caller's outcome: DONE, or FAILED naming what was wrong. */
static void read_outcome(struct ks_cluster_remote *r, int from, struct rjob *job, const json_t *outcome)
{
	struct ks_error err;
	int rc;

	(void)r;
	if (!job->outcome) {
		job->stage = DONE; /* its caller stopped waiting: nobody reads it */
		return;
	}
	rc = job->kind == KS_CLUSTER_PROFILE ? ks_profile_outcome_from_json(outcome, job->outcome, &err)
					     : ks_sanitize_outcome_from_json(outcome, job->outcome, &err);
	if (rc < 0) {
		free(job->error);
		job->error = ks_asprintf("rank %d sent a malformed outcome: %s", from, err.msg);
		job->stage = FAILED;
		return;
	}
	job->stage = DONE;
}

static void handle(struct ks_cluster_remote *r, int from, struct ks_cluster_msg *msg)
{
	struct rjob *job;

	if (from < 1 || from >= r->size || r->ranks[from].dead)
		return; /* a rank given up may still talk: nothing it says is used */
	r->ranks[from].last_heard = ks_now_ms();
	switch (msg->type) {
	case KS_CLUSTER_BUILT:
	case KS_CLUSTER_RESULT:
	case KS_CLUSTER_FAILED:
		job = find_job(r, msg->job);
		if (!job || job->rank != from || (job->kind && msg->type != KS_CLUSTER_FAILED) ||
		    (msg->type == KS_CLUSTER_BUILT && job->stage != BUILDING) ||
		    (msg->type == KS_CLUSTER_RESULT && job->stage != EVALUATING) ||
		    (job->stage != BUILDING && job->stage != EVALUATING)) {
			declare_dead(r, from, "it answered a job it was not given");
			return;
		}
		if (msg->type == KS_CLUSTER_BUILT && !job->rebuild)
			note_build(r, from, ks_now_ms() - job->sent_ms);
		if (msg->type == KS_CLUSTER_FAILED) {
			job->error = ks_asprintf("rank %d: %s", from, msg->error);
			job->stage = FAILED;
		} else if (msg->type == KS_CLUSTER_BUILT && job->rebuild && msg->held) {
			job->stage = HELD; /* the search has the first build's result already */
		} else {
			ks_result_release(&job->res);
			job->res = msg->result;
			ks_result_init(&msg->result);
			job->stage = msg->type == KS_CLUSTER_BUILT && msg->held ? HELD : DONE;
		}
		if (job->stage == DONE || job->stage == FAILED)
			r->ranks[from].outstanding--;
		pthread_cond_broadcast(&r->cond);
		break;
	case KS_CLUSTER_OUTCOME:
		job = find_job(r, msg->job);
		if (!job || job->rank != from || !job->kind || job->stage != EVALUATING) {
			declare_dead(r, from, "it answered a profile or check it was not asked for");
			return;
		}
		read_outcome(r, from, job, msg->outcome);
		r->ranks[from].outstanding--;
		pthread_cond_broadcast(&r->cond);
		break;
	case KS_CLUSTER_BYE:
		r->ranks[from].bye = 1;
		break;
	default:
		break; /* alive: heard is all it says */
	}
}

/* Give up ranks that went silent with work, or let a job pass its deadline. */
static void find_dead(struct ks_cluster_remote *r)
{
	int64_t now = ks_now_ms();

	for (int i = 1; i < r->size; i++)
		if (!r->ranks[i].dead && r->ranks[i].outstanding &&
		    now - r->ranks[i].last_heard > r->opts.dead_after_ms) {
			char why[128];

			snprintf(why, sizeof(why), "it said nothing for %.1f s",
				 (double)(now - r->ranks[i].last_heard) / 1e3);
			declare_dead(r, i, why);
		}
	for (size_t i = 0; i < r->n_live; i++) {
		struct rjob *job = r->live[i];

		if ((job->stage == BUILDING || job->stage == EVALUATING) && now > job->deadline_ms &&
		    job->rank > 0 && !r->ranks[job->rank].dead) {
			char why[128];

			snprintf(why, sizeof(why), "job %llu passed its deadline",
				 (unsigned long long)job->id);
			declare_dead(r, job->rank, why);
		}
	}
}

static void pump_failed(struct ks_cluster_remote *r, const struct ks_error *err)
{
	if (!r->failed) {
		r->failed = 1;
		r->fail_err = *err;
	}
	pthread_cond_broadcast(&r->cond);
}

/* ---- the pump ---- */

static int send_out(struct ks_cluster_remote *r, const struct outgoing *o, struct ks_error *err)
{
	struct ks_cluster_msg msg;
	int with_job = o->type == KS_CLUSTER_JOB || o->type == KS_CLUSTER_EVIDENCE;
	struct rjob *job = with_job ? find_job(r, o->job) : NULL;
	int ret;

	if (r->ranks[o->rank].dead || (with_job && (!job || job->rank != o->rank)))
		return 0; /* sent elsewhere since */
	ks_cluster_msg_init(&msg, o->type);
	msg.job = o->job;
	msg.evaluate = o->evaluate;
	msg.deadline_ms = o->type == KS_CLUSTER_EVAL ? r->opts.eval_ms : r->opts.build_ms;
	if (o->type == KS_CLUSTER_EVIDENCE) {
		msg.kind = job->kind;
		msg.deadline_ms += r->opts.eval_ms;
	}
	if (job) {
		/* borrowed for the call: the message is encoded before it returns */
		msg.family = job->fam->name;
		msg.path = job->fam->cand.path;
		msg.source = job->fam->cand.source;
		memcpy(msg.params, job->params, sizeof(job->params));
		msg.n_params = job->n_params;
		if (o->evaluate)
			msg.deadline_ms += r->opts.eval_ms;
	}
	ret = ks_cluster_comm_send(r->c, o->rank, &msg, err);
	msg.family = msg.path = msg.source = NULL;
	ks_cluster_msg_release(&msg);
	return ret;
}

static void *pump_thread(void *arg)
{
	struct ks_cluster_remote *r = arg;
	struct ks_error err;
	int64_t last_alive = 0;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		if (ks_now_ms() - last_alive >= 1000) {
			/* a serving rank that stops hearing this gives up (ks_cluster_serve()) */
			for (int i = 1; i < r->size; i++)
				if (!r->ranks[i].dead && !r->ranks[i].bye)
					queue_out(r, i, KS_CLUSTER_ALIVE, 0, 0);
			last_alive = ks_now_ms();
		}
		struct ks_cluster_msg msg;
		int from, got = 0, rc;

		for (size_t i = 0; i < r->n_out && !r->failed; i++)
			if (send_out(r, &r->out[i], &err) < 0)
				pump_failed(r, &err);
		got = r->n_out > 0;
		r->n_out = 0;
		while (!r->failed && (rc = ks_cluster_comm_poll(r->c, &from, &msg, &err)) != 0) {
			got = 1;
			if (rc > 0)
				handle(r, from, &msg);
			else if (from > 0 && from < r->size)
				declare_dead(r, from, err.msg);
			else
				pump_failed(r, &err);
			ks_cluster_msg_release(&msg);
		}
		find_dead(r);
		if (r->stopping) {
			int waiting = 0;

			for (int i = 1; i < r->size; i++)
				waiting += !r->ranks[i].dead && !r->ranks[i].bye;
			if (!waiting || ks_now_ms() > r->stop_deadline)
				break;
		}
		if (!got) {
			pthread_mutex_unlock(&r->lock);
			usleep(500);
			pthread_mutex_lock(&r->lock);
		}
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* ---- the backend ---- */

/* ---- rank 0's own GPUs (opts.local): under lock, released while the backend works ---- */

static int take_lane(struct ks_cluster_remote *r)
{
	for (;;) {
		for (int i = 0; i < r->opts.local->lanes; i++)
			if (!r->lane_busy[i]) {
				r->lane_busy[i] = 1;
				return i;
			}
		pthread_cond_wait(&r->cond, &r->lock);
	}
}

static void give_lane(struct ks_cluster_remote *r, int lane)
{
	r->lane_busy[lane] = 0;
	pthread_cond_broadcast(&r->cond);
}

/* Wait for a broadcast, or 100 ms: a stopping search cancels without one. */
static void wait_a_while(struct ks_cluster_remote *r)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += 100 * 1000 * 1000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&r->cond, &r->lock, &until);
}

/*
 * Run the step job waits for on rank 0's backend: build it (BUILDING), and
 * when it came from a dead rank to be timed (EVALUATING), time the build
 * on a free local lane, completing the build's result as the backend does.
 * A build held here is timed by remote_evaluate(), into the search's own
 * result.
 */
static void run_local(struct ks_cluster_remote *r, struct rjob *job)
{
	const struct ks_backend *local = r->opts.local;
	int evaluate = job->stage == EVALUATING, lane, rc;
	struct ks_result res;
	struct ks_error err;
	void *built = NULL;

	job->local_busy = 1;
	ks_result_init(&res);
	pthread_mutex_unlock(&r->lock);
	rc = local->build(local->ctx, job->fam, job->params, &built, &res, &err);
	pthread_mutex_lock(&r->lock);
	if (rc < 0)
		goto failed;
	if (!evaluate && !job->rebuild)
		note_build(r, 0, ks_now_ms() - job->sent_ms);
	if (built && evaluate) {
		lane = take_lane(r);
		pthread_mutex_unlock(&r->lock);
		rc = local->evaluate(local->ctx, lane, job->fam, job->params, built, &res, &err);
		pthread_mutex_lock(&r->lock);
		give_lane(r, lane);
		if (rc < 0)
			goto failed;
		built = NULL;
	}
	if (built && job->rebuild) {
		ks_result_release(&res); /* the search has the first build's result already */
	} else {
		ks_result_release(&job->res);
		job->res = res;
	}
	/* a final result, or a build held for evaluate() */
	job->local_built = built;
	job->stage = built ? HELD : DONE;
	goto done;
failed:
	ks_result_release(&res);
	free(job->error);
	job->error = ks_asprintf("rank 0: %s", err.msg);
	job->stage = FAILED;
done:
	if (job->stage == DONE || job->stage == FAILED)
		r->ranks[0].outstanding--;
	job->local_busy = 0;
	pthread_cond_broadcast(&r->cond);
}

/* Time job's build held on rank 0 on a free local lane, completing res (the search's). */
static int evaluate_local(struct ks_cluster_remote *r, struct rjob *job, struct ks_result *res,
			  struct ks_error *err)
{
	const struct ks_backend *local = r->opts.local;
	void *built = job->local_built;
	int lane, rc;

	job->local_built = NULL;
	job->local_busy = 1;
	lane = take_lane(r);
	pthread_mutex_unlock(&r->lock);
	rc = local->evaluate(local->ctx, lane, job->fam, job->params, built, res, err);
	pthread_mutex_lock(&r->lock);
	if (res->where.gpu >= 0)
		res->where.rank = 0;
	give_lane(r, lane);
	r->ranks[0].outstanding--;
	job->local_busy = 0;
	job->stage = DONE;
	pthread_cond_broadcast(&r->cond);
	return rc;
}

/*
 * Wait until job leaves stage, running it on rank 0's GPUs when it is
 * placed there; -1 with err when it failed or MPI did.
 */
static int wait_stage(struct ks_cluster_remote *r, struct rjob *job, enum stage stage, struct ks_error *err)
{
	while (job->stage == stage && !r->failed) {
		if (job->rank == 0 && r->opts.local && !job->local_busy) {
			run_local(r, job);
			continue;
		}
		pthread_cond_wait(&r->cond, &r->lock);
	}
	if (job->stage == FAILED)
		return ks_fail(err, "%s", job->error);
	if (r->failed && job->stage == stage) {
		*err = r->fail_err;
		return -1;
	}
	return 0;
}

static int remote_build(void *ctx, const struct ks_family *fam, const int64_t *params, void **built,
			struct ks_result *res, struct ks_error *err)
{
	struct ks_cluster_remote *r = ctx;
	struct rjob *job = ks_calloc(1, sizeof(*job));
	int ret = -1;

	*built = NULL;
	job->fam = fam;
	job->n_params = fam->cand.n_params;
	memcpy(job->params, params, job->n_params * sizeof(*params));
	ks_result_init(&job->res);
	job->stage = BUILDING;
	pthread_mutex_lock(&r->lock);
	job->id = ++r->next_id;
	KS_ALLOC_GROW(r->live, r->n_live + 1, r->alloc_live);
	r->live[r->n_live++] = job;
	dispatch(r, job, 0);
	if (wait_stage(r, job, BUILDING, err) < 0) {
		forget_job(r, job);
		goto cleanup;
	}
	ks_result_release(res);
	*res = job->res;
	if (job->stage == HELD) {
		/* the search keeps the build's result; the job waits, held on its rank, for evaluate() */
		ks_result_init(&job->res);
		*built = job;
	} else {
		ks_result_init(&job->res);
		forget_job(r, job);
	}
	ret = 0;
cleanup:
	pthread_mutex_unlock(&r->lock);
	return ret;
}

static int remote_evaluate(void *ctx, int lane, const struct ks_family *fam, const int64_t *params,
			   void *built, struct ks_result *res, struct ks_error *err)
{
	struct ks_cluster_remote *r = ctx;
	struct rjob *job = built;
	int ret = -1;

	(void)lane; /* timed on the rank that holds the build, on whichever of its GPUs is free */
	(void)fam;
	(void)params;
	pthread_mutex_lock(&r->lock);
	if (wait_stage(r, job, BUILDING, err) < 0)
		goto cleanup;
	if (job->stage == HELD && job->rank == 0) {
		ret = evaluate_local(r, job, res, err);
		goto cleanup;
	}
	if (job->stage == HELD) {
		job->stage = EVALUATING;
		job->deadline_ms = job_deadline(r, 1);
		if (job->rank > 0)
			queue_out(r, job->rank, KS_CLUSTER_EVAL, job->id, 0);
	}
	if (wait_stage(r, job, EVALUATING, err) < 0)
		goto cleanup;
	ks_result_release(res);
	*res = job->res;
	ks_result_init(&job->res);
	if (res->where.gpu >= 0)
		res->where.rank = job->rank; /* the rank that answered, whatever it says of itself */
	ret = 0;
cleanup:
	forget_job(r, job);
	pthread_mutex_unlock(&r->lock);
	return ret;
}

/*
 * The candidates timed on, or waiting for, each GPU of the rank that holds
 * built (evaluations sent, rank 0's own in its lanes, and the profiles and
 * checks that will hold one of its GPUs).  Builds are placed on ranks as
 * they start, and finish in any order: a lane that took the oldest build
 * would often wait on a rank with a queue while another's GPU idled.
 */
static double remote_backlog(void *ctx, const void *built)
{
	struct ks_cluster_remote *r = ctx;
	const struct rjob *job = built;
	int waiting = 0, gpus;

	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < r->n_live; i++) {
		const struct rjob *o = r->live[i];

		if (o->rank != job->rank || o->stage == DONE || o->stage == FAILED)
			continue;
		waiting += o->kind || o->stage == EVALUATING || (o->stage == HELD && o->local_busy);
	}
	if (job->rank == 0)
		waiting += r->local_evidence; /* rank 0's own run here, with no rjob */
	gpus = r->ranks[job->rank].gpus;
	pthread_mutex_unlock(&r->lock);
	return (double)waiting / (gpus > 0 ? gpus : 1);
}

static void remote_discard(void *ctx, void *built)
{
	struct ks_cluster_remote *r = ctx;
	struct rjob *job = built;
	struct ks_error err;

	pthread_mutex_lock(&r->lock);
	while (job->local_busy)
		pthread_cond_wait(&r->cond, &r->lock);
	if (job->rank == 0 && job->stage == BUILDING) {
		/* handed to rank 0 from a dead rank and not built yet: nothing to build now */
		r->ranks[0].outstanding--;
	} else {
		wait_stage(r, job, BUILDING, &err);
		if (job->stage == HELD && !r->ranks[job->rank].dead) {
			if (job->rank > 0)
				queue_out(r, job->rank, KS_CLUSTER_DROP, job->id, 0);
			r->ranks[job->rank].outstanding--;
		}
	}
	pthread_cond_broadcast(&r->cond); /* the rank may hold none now: take_evidence_rank() */
	forget_job(r, job);		  /* and a build held on rank 0 is discarded there */
	pthread_mutex_unlock(&r->lock);
}

static int cmp_ms(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int64_t evidence_median_ms(const struct evidence_times *t)
{
	int64_t sorted[KS_CLUSTER_EVIDENCE_KEEP];

	memcpy(sorted, t->ms, (size_t)t->n * sizeof(*sorted));
	qsort(sorted, (size_t)t->n, sizeof(*sorted), cmp_ms);
	return sorted[t->n / 2];
}

/*
 * Profiles and sanitizer checks go to the ranks in turn, each on one of
 * the chosen rank's GPUs.  A check holds that GPU for seconds, and the
 * search inserts results in proposal order: on a rank of one GPU,
 * candidates waiting behind it would hold up every rank's results behind
 * them (measured with every check on rank 0: 4 ranks of one GPU ran at 2.4
 * times one GPU, rank 0's GPU checking and profiling for 68 s of 116).  So
 * while one waits for such a rank, no new candidate goes there
 * (choose_rank()), and it starts when the rank holds none, when no other
 * rank could take them, after KS_CLUSTER_DRAIN_MS, or when the search
 * cancels it.  A rank of several GPUs goes on timing candidates on the
 * others and is not drained: draining it idled all of them for as long as
 * one checked (2 ranks of two GPUs: 82% busy, BENCHMARKS.md).
 *
 * A drained rank would then idle from the end of the check until a new
 * candidate is built there (about 1.5 s a check on 4 ranks of one GPU).
 * So once its kind has run on drained ranks before, the rank reopens
 * (closed()) when, by the median of the last of them, the check has about
 * as long left to run as a build takes on that rank: their builds end as
 * it does, and their timings follow at once.  Until then nothing waits
 * behind it; an estimate too short holds their results (and so every later
 * one's) for the rest of the check, one too long costs the idle of before.
 * Taking only 2 of them per GPU cost the GPU the next build's wait after
 * those two (0.85-1.5 s after most checks on 4 ranks of one GPU), and
 * bounded little: one held result holds the insertions as much as ten.
 *
 * Under lock; the rank, or -1 when no rank takes jobs; *drained says
 * whether its draining count was raised (give it back with evidence_done()),
 * and *alone whether the rank holds nothing else: the check's time is then
 * its own, and counts for the estimate.
 */
static int take_evidence_rank(struct ks_cluster_remote *r, enum ks_cluster_evidence kind,
			      const volatile sig_atomic_t *cancel, int *drained, int *alone)
{
	int64_t until = ks_now_ms() + KS_CLUSTER_DRAIN_MS;
	int rank = -1;

	*drained = *alone = 0;

	for (int k = 0; k < r->size && rank < 0; k++) {
		int i = (r->next_evidence + k) % r->size;

		if (takes_jobs(r, i))
			rank = i;
	}
	if (rank < 0)
		return -1;
	r->next_evidence = (rank + 1) % r->size;
	if (r->ranks[rank].gpus > 1)
		return rank;
	r->ranks[rank].draining++;
	r->ranks[rank].reopen_ms = 0;
	*drained = 1;
	while (r->ranks[rank].outstanding > 0 && !r->ranks[rank].dead && another_takes_jobs(r, rank) &&
	       !r->failed && !(cancel && *cancel) && ks_now_ms() < until)
		wait_a_while(r);
	/* drained (not given up on after KS_CLUSTER_DRAIN_MS), and no other check waits: it starts now */
	*alone = r->ranks[rank].draining == 1 && r->ranks[rank].outstanding == 0;
	if (*alone && r->took[kind].n > 0) {
		int64_t left = evidence_median_ms(&r->took[kind]) - (int64_t)r->ranks[rank].build_ms;

		r->ranks[rank].reopen_ms = ks_now_ms() + (left > 0 ? left : 0);
	}
	return rank;
}

/*
 * A profile or check that held its drained rank for ms ended; ok: it ran
 * alone there, to its end (not cancelled, its rank not lost), so its time
 * counts for the estimate.
 */
static void evidence_done(struct ks_cluster_remote *r, int rank, enum ks_cluster_evidence kind, int ok,
			  int64_t ms)
{
	struct evidence_times *t = &r->took[kind];

	if (ok) {
		t->ms[t->next] = ms;
		t->next = (t->next + 1) % KS_CLUSTER_EVIDENCE_KEEP;
		t->n += t->n < KS_CLUSTER_EVIDENCE_KEEP;
	}
	if (--r->ranks[rank].draining == 0)
		r->ranks[rank].reopen_ms = 0;
}

/* The caller's outcome when it was cancelled before the answer came. */
static void cancelled(enum ks_cluster_evidence kind, void *outcome)
{
	if (kind == KS_CLUSTER_PROFILE) {
		struct ks_profile_outcome *o = outcome;

		o->status = KS_PROFILE_FAILED;
		snprintf(o->why, sizeof(o->why), "stopped before it finished");
	} else {
		struct ks_sanitize_outcome *o = outcome;

		o->status = KS_SANITIZE_INCOMPLETE;
		snprintf(o->why, sizeof(o->why), "stopped before it finished");
	}
}

/*
 * Profile or check on rank 0's own lane.  Under lock, released while it
 * runs.  It counts in rank 0's backlog (remote_backlog()), as a check sent
 * to another rank does there: without it a free lane took rank 0's builds
 * as if that GPU were free, and waited for it, while other ranks' builds
 * waited for lanes (2 ranks of two GPUs: every GPU idle 0.5-2.4 s near the
 * end of most checks on rank 0, none after those on rank 1).
 */
static int evidence_here(struct ks_cluster_remote *r, enum ks_cluster_evidence kind,
			 const struct ks_family *fam, const int64_t *params,
			 const volatile sig_atomic_t *cancel, void *outcome, struct ks_error *err)
{
	const struct ks_backend *local = r->opts.local;
	int lane, rc;

	r->local_evidence++;
	lane = take_lane(r);
	pthread_mutex_unlock(&r->lock);
	rc = kind == KS_CLUSTER_PROFILE
		     ? local->profile(local->ctx, lane, fam, params, cancel, outcome, err)
		     : local->sanitize(local->ctx, lane, fam, params, cancel, outcome, err);
	pthread_mutex_lock(&r->lock);
	r->local_evidence--;
	give_lane(r, lane);
	return rc;
}

/* Profile or check on rank's GPUs, through MPI.  Under lock. */
static int evidence_there(struct ks_cluster_remote *r, int rank, enum ks_cluster_evidence kind,
			  const struct ks_family *fam, const int64_t *params,
			  const volatile sig_atomic_t *cancel, void *outcome, struct ks_error *err)
{
	struct rjob *job = ks_calloc(1, sizeof(*job));
	int ret = 0;

	job->fam = fam;
	job->n_params = fam->cand.n_params;
	memcpy(job->params, params, job->n_params * sizeof(*params));
	ks_result_init(&job->res);
	job->kind = kind;
	job->outcome = outcome;
	job->id = ++r->next_id;
	job->rank = rank;
	job->stage = EVALUATING;
	job->deadline_ms = job_deadline(r, 1);
	KS_ALLOC_GROW(r->live, r->n_live + 1, r->alloc_live);
	r->live[r->n_live++] = job;
	r->ranks[rank].outstanding++;
	queue_out(r, rank, KS_CLUSTER_EVIDENCE, job->id, 0);
	while (job->stage == EVALUATING && !r->failed && !(cancel && *cancel))
		wait_a_while(r);
	if (job->stage == EVALUATING) {
		/* cancelled, or MPI failed: the answer, if it comes, is dropped (read_outcome()) */
		job->outcome = NULL;
		if (r->failed) {
			*err = r->fail_err;
			return -1;
		}
		cancelled(kind, outcome);
		return 0;
	}
	if (job->stage == FAILED)
		ret = ks_fail(err, "%s", job->error);
	forget_job(r, job);
	return ret;
}

static int remote_evidence(struct ks_cluster_remote *r, enum ks_cluster_evidence kind,
			   const struct ks_family *fam, const int64_t *params,
			   const volatile sig_atomic_t *cancel, void *outcome, struct ks_error *err)
{
	int rank, rc, drained, alone;
	int64_t started;

	pthread_mutex_lock(&r->lock);
	rank = take_evidence_rank(r, kind, cancel, &drained, &alone);
	if (rank < 0) {
		pthread_mutex_unlock(&r->lock);
		return ks_fail(err, "every rank has died; the first: %s", r->dead_why);
	}
	started = ks_now_ms();
	rc = rank == 0 ? evidence_here(r, kind, fam, params, cancel, outcome, err)
		       : evidence_there(r, rank, kind, fam, params, cancel, outcome, err);
	if (drained)
		evidence_done(r, rank, kind, alone && rc == 0 && !(cancel && *cancel) && !r->ranks[rank].dead,
			      ks_now_ms() - started);
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	return rc;
}

static int remote_profile(void *ctx, int lane, const struct ks_family *fam, const int64_t *params,
			  const volatile sig_atomic_t *cancel, struct ks_profile_outcome *out,
			  struct ks_error *err)
{
	(void)lane; /* on the rank whose turn it is, on one of its GPUs */
	return remote_evidence(ctx, KS_CLUSTER_PROFILE, fam, params, cancel, out, err);
}

static int remote_sanitize(void *ctx, int lane, const struct ks_family *fam, const int64_t *params,
			   const volatile sig_atomic_t *cancel, struct ks_sanitize_outcome *out,
			   struct ks_error *err)
{
	(void)lane;
	return remote_evidence(ctx, KS_CLUSTER_SANITIZE, fam, params, cancel, out, err);
}

int ks_cluster_remote_open(struct ks_cluster_remote **out, struct ks_cluster_comm *c,
			   const struct ks_cluster_remote_options *opts, struct ks_error *err)
{
	struct ks_cluster_remote *r = ks_calloc(1, sizeof(*r));
	int64_t deadline;
	int lanes = 0, missing;

	*out = NULL;
	r->c = c;
	r->opts = *opts;
	if (!r->opts.hello_ms)
		r->opts.hello_ms = 60000;
	if (!r->opts.dead_after_ms)
		r->opts.dead_after_ms = 30000;
	if (!r->opts.build_ms)
		r->opts.build_ms = 600000;
	if (!r->opts.eval_ms)
		r->opts.eval_ms = 600000;
	if (r->opts.lanes_per_gpu < 1)
		r->opts.lanes_per_gpu = KS_CLUSTER_LANES_PER_GPU;
	r->size = ks_cluster_comm_size(c);
	r->ranks = ks_calloc((size_t)r->size, sizeof(*r->ranks));
	if (r->size < 2) {
		ks_fail(err, "an MPI job of one rank has no other rank to serve it (run it without mpirun)");
		goto fail;
	}
	if (opts->local) {
		/* rank 0's own GPUs: the first "rank" to place jobs on, never dead */
		snprintf(r->model, sizeof(r->model), "%s", opts->local_model ? opts->local_model : "");
		r->evaluator = opts->local->evaluator;
		r->ranks[0] = (struct rank_state){ .gpus = opts->local->lanes,
						   .jobs = opts->local_jobs,
						   .hello = 1 };
		lanes = opts->local->lanes;
		r->jobs = opts->local_jobs;
		r->lane_busy = ks_calloc((size_t)opts->local->lanes, sizeof(*r->lane_busy));
	}
	deadline = ks_now_ms() + r->opts.hello_ms;
	do {
		struct ks_cluster_msg msg;
		int from, rc = ks_cluster_comm_poll(c, &from, &msg, err);

		if (rc < 0) {
			ks_cluster_msg_release(&msg);
			goto fail;
		}
		if (rc > 0 && msg.type == KS_CLUSTER_HELLO && !r->ranks[from].hello) {
			if (!r->model[0] && !opts->local) {
				snprintf(r->model, sizeof(r->model), "%s", msg.model);
				r->evaluator = msg.evaluator;
			}
			if (strcmp(r->model, msg.model) || r->evaluator != msg.evaluator || !msg.gpus) {
				ks_fail(err,
					"rank %d has %d GPUs (%s, evaluator %d) but %s has %s, "
					"evaluator %d: "
					"one search times kernels on one GPU model, and every rank needs a "
					"GPU",
					from, msg.gpus, msg.model, msg.evaluator,
					opts->local ? "rank 0" : "another", r->model, r->evaluator);
				ks_cluster_msg_release(&msg);
				goto fail;
			}
			r->ranks[from] = (struct rank_state){
				.gpus = msg.gpus, .jobs = msg.jobs, .hello = 1, .last_heard = ks_now_ms()
			};
			lanes += msg.gpus;
			r->jobs += msg.jobs;
		}
		ks_cluster_msg_release(&msg);
		missing = 0;
		for (int i = 1; i < r->size; i++)
			missing += !r->ranks[i].hello;
		if (missing && rc == 0)
			usleep(1000);
	} while (missing && ks_now_ms() < deadline);
	if (missing) {
		ks_fail(err, "%d of %d ranks did not say hello within %.0f s", missing, r->size - 1,
			(double)r->opts.hello_ms / 1e3);
		goto fail;
	}
	r->gpus = lanes;
	/*
	 * A candidate here takes longer from proposal to answer than on one
	 * host: compiles beside every other rank's, the rank's queue, the round
	 * trips.  Results wait for insertion in proposal order behind the
	 * slowest, so the search keeps twice the lanes more in flight (measured:
	 * 2 ranks of two GPUs with 56 in flight left results waiting a median
	 * of 1 s to be inserted, and their GPUs 90% busy).
	 */
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	r->backend =
		(struct ks_backend){ .ctx = r,
				     .lanes = lanes * r->opts.lanes_per_gpu,
				     .depth_extra = 2 * lanes * r->opts.lanes_per_gpu,
				     .evaluator = r->evaluator,
				     .build = remote_build,
				     .evaluate = remote_evaluate,
				     .discard = remote_discard,
				     .backlog = remote_backlog,
				     .profile = opts->local && opts->local->profile ? remote_profile : NULL,
				     .sanitize =
					     opts->local && opts->local->sanitize ? remote_sanitize : NULL };
	pthread_create(&r->pump, NULL, pump_thread, r);
	*out = r;
	return 0;
fail:
	free(r->lane_busy);
	free(r->ranks);
	free(r);
	return -1;
}

const struct ks_backend *ks_cluster_remote_backend(struct ks_cluster_remote *r)
{
	return &r->backend;
}

int ks_cluster_remote_jobs(const struct ks_cluster_remote *r)
{
	return r->jobs;
}

int ks_cluster_remote_gpus(const struct ks_cluster_remote *r)
{
	return r->gpus;
}

const char *ks_cluster_remote_model(const struct ks_cluster_remote *r)
{
	return r->model;
}

int ks_cluster_remote_dead(struct ks_cluster_remote *r, char *why, size_t size)
{
	int n;

	pthread_mutex_lock(&r->lock);
	n = r->n_dead;
	snprintf(why, size, "%s", r->dead_why);
	pthread_mutex_unlock(&r->lock);
	return n;
}

void ks_cluster_remote_close(struct ks_cluster_remote *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	for (int i = 1; i < r->size; i++)
		if (!r->ranks[i].dead)
			queue_out(r, i, KS_CLUSTER_STOP, 0, 0);
	r->stopping = 1;
	r->stop_deadline = ks_now_ms() + r->opts.hello_ms;
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->pump, NULL);
	while (r->n_live)
		forget_job(r, r->live[0]);
	free(r->live);
	free(r->lane_busy);
	free(r->out);
	free(r->ranks);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	free(r);
}
