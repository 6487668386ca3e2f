/*
 * serve.c - a rank > 0: build and time rank 0's candidates with this
 * host's backend (cluster.h), and profile or check them with the sanitizer
 * when rank 0 asks.  Compile threads and one thread per lane take work from
 * queues; the caller's thread alone talks MPI.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ksearch/base/frame.h"
#include "ksearch/base/util.h"
#include "ksearch/cluster/cluster.h"
#include "ksearch/evaluate/profile.h"
#include "ksearch/evaluate/sanitize.h"

#define ALIVE_EVERY_MS 1000

struct sjob {
	uint64_t id;
	const struct ks_family *fam;
	int64_t params[KS_CANDIDATE_MAX_PARAMS];
	int evaluate;		       /* time it when built, without waiting for eval */
	enum ks_cluster_evidence kind; /* not a candidate to build: profile or check it (0: build) */
	void *built;
	struct ks_result res;
	struct sjob *next;
};

struct fifo {
	struct sjob *head, *tail;
};

/* A family as rank 0 sent it, parsed once and kept for the rank's life. */
struct sfamily {
	struct ks_family fam;
	char *error; /* why its source is not a candidate; NULL when it is */
};

struct server {
	struct ks_cluster_comm *c;
	const struct ks_op *op;
	const struct ks_backend *local;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct fifo build_q, eval_q, held;
	/* encoded answers for rank 0, in the order they were made */
	char **out;
	size_t *out_len, n_out, alloc_out, alloc_out_len;
	int in_flight;		    /* jobs received and not yet answered, held builds included */
	unsigned long built, timed; /* candidates this rank built and timed (ks_cluster_serve()'s counts) */
	unsigned long profiled, checked; /* outcomes it answered */
	int shutdown;
	volatile sig_atomic_t cancel; /* rank 0 said stop: a profile or check running ends at once */
	int failed;
	struct ks_error fail_err;

	struct sfamily **families;
	size_t n_families, alloc_families;
};

static void push(struct fifo *q, struct sjob *job)
{
	job->next = NULL;
	if (q->tail)
		q->tail->next = job;
	else
		q->head = job;
	q->tail = job;
}

static struct sjob *pop(struct fifo *q)
{
	struct sjob *job = q->head;

	if (job) {
		q->head = job->next;
		if (!q->head)
			q->tail = NULL;
	}
	return job;
}

/* Take job id out of q, or NULL. */
static struct sjob *take(struct fifo *q, uint64_t id)
{
	struct sjob *prev = NULL;

	for (struct sjob *job = q->head; job; prev = job, job = job->next) {
		if (job->id != id)
			continue;
		if (prev)
			prev->next = job->next;
		else
			q->head = job->next;
		if (q->tail == job)
			q->tail = prev;
		return job;
	}
	return NULL;
}

static void job_free(struct sjob *job)
{
	ks_result_release(&job->res);
	free(job);
}

/* Under lock: queue msg for rank 0. */
static void answer(struct server *s, const struct ks_cluster_msg *msg)
{
	KS_ALLOC_GROW(s->out, s->n_out + 1, s->alloc_out);
	KS_ALLOC_GROW(s->out_len, s->n_out + 1, s->alloc_out_len);
	ks_cluster_msg_encode(msg, &s->out[s->n_out], &s->out_len[s->n_out]);
	s->n_out++;
}

/* Under lock: job is answered with res (type built or result) or err (failed). */
static void answer_job(struct server *s, const struct sjob *job, enum ks_cluster_type type, int held,
		       const struct ks_error *err)
{
	struct ks_cluster_msg msg;

	ks_cluster_msg_init(&msg, err ? KS_CLUSTER_FAILED : type);
	msg.job = job->id;
	msg.held = held;
	if (err)
		msg.error = ks_strdup(err->msg);
	else
		msg.result = job->res; /* borrowed for the encoding, given back below */
	answer(s, &msg);
	if (!err)
		ks_result_init(&msg.result);
	ks_cluster_msg_release(&msg);
}

static void *compile_thread(void *arg)
{
	struct server *s = arg;

	for (;;) {
		struct sjob *job;
		struct ks_error err;
		int rc;

		pthread_mutex_lock(&s->lock);
		while (!s->shutdown && !s->build_q.head)
			pthread_cond_wait(&s->cond, &s->lock);
		job = pop(&s->build_q);
		pthread_mutex_unlock(&s->lock);
		if (!job)
			return NULL;
		ks_error_clear(&err);
		rc = s->local->build(s->local->ctx, job->fam, job->params, &job->built, &job->res, &err);
		pthread_mutex_lock(&s->lock);
		s->built += rc == 0;
		if (rc < 0) {
			answer_job(s, job, KS_CLUSTER_FAILED, 0, &err);
			s->in_flight--;
			job_free(job);
		} else if (job->built && job->evaluate) {
			push(&s->eval_q, job);
		} else if (job->built) {
			answer_job(s, job, KS_CLUSTER_BUILT, 1, NULL);
			push(&s->held, job);
		} else {
			answer_job(s, job, job->evaluate ? KS_CLUSTER_RESULT : KS_CLUSTER_BUILT, 0, NULL);
			s->in_flight--;
			job_free(job);
		}
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
	}
}

struct lane {
	struct server *s;
	int index;
	pthread_t thread;
};

/*
 * Profile job's candidate, or check it with the sanitizer, on lane; answer
 * rank 0 with the outcome, or failed when ksearch itself failed.  Without
 * the lock.
 */
static void run_evidence(struct server *s, int lane, struct sjob *job)
{
	const struct ks_backend *local = s->local;
	struct ks_cluster_msg msg;
	struct ks_error err;
	int rc = 0;

	ks_error_clear(&err);
	ks_cluster_msg_init(&msg, KS_CLUSTER_OUTCOME);
	msg.job = job->id;
	if (job->kind == KS_CLUSTER_PROFILE) {
		struct ks_profile_outcome *out = ks_calloc(1, sizeof(*out));

		if (local->profile) {
			rc = local->profile(local->ctx, lane, job->fam, job->params, &s->cancel, out, &err);
		} else {
			out->status = KS_PROFILE_UNAVAILABLE;
			snprintf(out->why, sizeof(out->why), "this rank's evaluator cannot profile");
		}
		if (rc == 0)
			msg.outcome = ks_profile_outcome_to_json(out);
		free(out);
	} else {
		struct ks_sanitize_outcome *out = ks_calloc(1, sizeof(*out));

		if (local->sanitize) {
			rc = local->sanitize(local->ctx, lane, job->fam, job->params, &s->cancel, out, &err);
		} else {
			out->status = KS_SANITIZE_UNAVAILABLE;
			snprintf(out->why, sizeof(out->why),
				 "this rank's evaluator cannot run the sanitizer");
		}
		if (rc == 0)
			msg.outcome = ks_sanitize_outcome_to_json(out);
		free(out);
	}
	if (rc == 0 && !msg.outcome)
		rc = ks_fail(&err,
			     "this rank's %s outcome could not be written as JSON (a count past its limit, "
			     "a number that is not finite, or text that is not UTF-8)",
			     job->kind == KS_CLUSTER_PROFILE ? "profile" : "sanitizer");
	pthread_mutex_lock(&s->lock);
	if (rc < 0) {
		answer_job(s, job, KS_CLUSTER_FAILED, 0, &err);
	} else {
		answer(s, &msg);
		*(job->kind == KS_CLUSTER_PROFILE ? &s->profiled : &s->checked) += 1;
	}
	s->in_flight--;
	job_free(job);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	ks_cluster_msg_release(&msg);
}

static void *lane_thread(void *arg)
{
	struct lane *lane = arg;
	struct server *s = lane->s;

	for (;;) {
		struct sjob *job;
		struct ks_error err;
		int rc;

		pthread_mutex_lock(&s->lock);
		while (!s->shutdown && !s->eval_q.head)
			pthread_cond_wait(&s->cond, &s->lock);
		job = pop(&s->eval_q);
		pthread_mutex_unlock(&s->lock);
		if (!job)
			return NULL;
		if (job->kind) {
			run_evidence(s, lane->index, job);
			continue;
		}
		ks_error_clear(&err);
		rc = s->local->evaluate(s->local->ctx, lane->index, job->fam, job->params, job->built,
					&job->res, &err);
		job->built = NULL;
		pthread_mutex_lock(&s->lock);
		s->timed += rc == 0;
		answer_job(s, job, KS_CLUSTER_RESULT, 0, rc < 0 ? &err : NULL);
		s->in_flight--;
		job_free(job);
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
	}
}

/* The family rank 0 calls name with this source, parsed the first time it is seen. */
static struct sfamily *family(struct server *s, const struct ks_cluster_msg *msg)
{
	struct sfamily *f;
	struct ks_error err;

	for (size_t i = 0; i < s->n_families; i++) {
		f = s->families[i];
		if (!strcmp(f->fam.name, msg->family) && !strcmp(f->fam.cand.source, msg->source))
			return f;
	}
	f = ks_calloc(1, sizeof(*f));
	f->fam.name = ks_strdup(msg->family);
	if (ks_candidate_parse(msg->path, msg->source, &f->fam.cand, &err) < 0 ||
	    ks_candidate_bind(&f->fam.cand, s->op, &err) < 0)
		f->error = ks_strdup(err.msg);
	if (!f->fam.cand.source) {
		/* a source that did not parse still names the family in answers */
		f->fam.cand.source = ks_strdup(msg->source);
		f->fam.cand.path = ks_strdup(msg->path);
	}
	KS_ALLOC_GROW(s->families, s->n_families + 1, s->alloc_families);
	s->families[s->n_families++] = f;
	return f;
}

/* Under lock: what rank 0 said.  -1 when it said what the protocol has no place for. */
static int handle(struct server *s, struct ks_cluster_msg *msg, int *stopping, struct ks_error *err)
{
	struct sjob *job;
	struct sfamily *f;

	switch (msg->type) {
	case KS_CLUSTER_JOB:
		f = family(s, msg);
		job = ks_calloc(1, sizeof(*job));
		job->id = msg->job;
		job->fam = &f->fam;
		job->evaluate = msg->evaluate;
		ks_result_init(&job->res);
		if (f->error || msg->n_params != f->fam.cand.n_params) {
			ks_result_fail(&job->res, KS_VERDICT_CONTRACT_ERROR, "%s",
				       f->error ? f->error
						: "rank 0 sent a job with the wrong number of params");
			answer_job(s, job, job->evaluate ? KS_CLUSTER_RESULT : KS_CLUSTER_BUILT, 0, NULL);
			job_free(job);
			return 0;
		}
		memcpy(job->params, msg->params, msg->n_params * sizeof(*msg->params));
		s->in_flight++;
		push(&s->build_q, job);
		break;
	case KS_CLUSTER_EVIDENCE:
		/* on a GPU lane, in turn with the candidates to time (rank 0 sends none meanwhile) */
		f = family(s, msg);
		job = ks_calloc(1, sizeof(*job));
		job->id = msg->job;
		job->fam = &f->fam;
		job->kind = msg->kind;
		ks_result_init(&job->res);
		if (f->error || msg->n_params != f->fam.cand.n_params) {
			struct ks_error why;

			ks_fail(&why, "rank 0 asked for %s of a candidate this rank cannot use: %s",
				msg->kind == KS_CLUSTER_PROFILE ? "a profile" : "a sanitizer check",
				f->error ? f->error : "the wrong number of params");
			answer_job(s, job, KS_CLUSTER_FAILED, 0, &why);
			job_free(job);
			return 0;
		}
		memcpy(job->params, msg->params, msg->n_params * sizeof(*msg->params));
		s->in_flight++;
		push(&s->eval_q, job);
		break;
	case KS_CLUSTER_EVAL:
		job = take(&s->held, msg->job);
		if (!job)
			return ks_fail(err, "rank 0 asked to time job %llu, which this rank does not hold",
				       (unsigned long long)msg->job);
		push(&s->eval_q, job);
		break;
	case KS_CLUSTER_DROP:
		job = take(&s->held, msg->job);
		if (!job)
			return ks_fail(err, "rank 0 dropped job %llu, which this rank does not hold",
				       (unsigned long long)msg->job);
		if (s->local->discard)
			s->local->discard(s->local->ctx, job->built);
		s->in_flight--;
		job_free(job);
		break;
	case KS_CLUSTER_STOP:
		*stopping = 1;
		s->cancel = 1; /* rank 0's search has stopped: nobody waits for a profile */
		break;
	case KS_CLUSTER_ALIVE:
		break; /* heard is all it says */
	default:
		return ks_fail(err, "rank 0 sent a '%s' message, which only other ranks send",
			       ks_cluster_type_name(msg->type));
	}
	pthread_cond_broadcast(&s->cond);
	return 0;
}

static void say(struct server *s, enum ks_cluster_type type, int gpus, int jobs, const char *model)
{
	struct ks_cluster_msg msg;

	ks_cluster_msg_init(&msg, type);
	msg.gpus = gpus;
	msg.jobs = jobs;
	msg.evaluator = s->local->evaluator;
	msg.model = ks_strdup(model ? model : "");
	pthread_mutex_lock(&s->lock);
	answer(s, &msg);
	pthread_mutex_unlock(&s->lock);
	ks_cluster_msg_release(&msg);
}

/* Send what the threads answered; -1 when MPI failed. */
static int flush(struct server *s, struct ks_error *err)
{
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_out; i++) {
		if (!ret && ks_cluster_comm_send_bytes(s->c, 0, s->out[i], s->out_len[i], err) < 0)
			ret = -1;
		free(s->out[i]);
	}
	s->n_out = 0;
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int ks_cluster_serve(struct ks_cluster_comm *c, const struct ks_op *op, const struct ks_backend *local,
		     const struct ks_cluster_serve_options *opts, struct ks_cluster_serve_counts *counts,
		     struct ks_error *err)
{
	int jobs = opts->jobs;
	const char *model = opts->model;
	int64_t silent_ms = opts->silent_ms > 0 ? opts->silent_ms : KS_CLUSTER_SILENT_MS;
	struct server s = { .c = c, .op = op, .local = local };
	pthread_t *compilers = ks_calloc((size_t)jobs, sizeof(*compilers));
	struct lane *lanes = ks_calloc((size_t)local->lanes, sizeof(*lanes));
	int64_t last_alive = ks_now_ms(), last_heard = ks_now_ms();
	int stopping = 0, ret = -1;

	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	for (int i = 0; i < jobs; i++)
		pthread_create(&compilers[i], NULL, compile_thread, &s);
	for (int i = 0; i < local->lanes; i++) {
		lanes[i] = (struct lane){ .s = &s, .index = i };
		pthread_create(&lanes[i].thread, NULL, lane_thread, &lanes[i]);
	}
	say(&s, KS_CLUSTER_HELLO, local->lanes, jobs, model);
	for (;;) {
		struct ks_cluster_msg msg;
		int from, rc, idle;

		if (flush(&s, err) < 0)
			goto cleanup;
		rc = ks_cluster_comm_poll(c, &from, &msg, err);
		if (rc < 0) {
			ks_cluster_msg_release(&msg);
			goto cleanup;
		}
		if (rc > 0) {
			last_heard = from == 0 ? ks_now_ms() : last_heard;
			pthread_mutex_lock(&s.lock);
			rc = from == 0 ? handle(&s, &msg, &stopping, err)
				       : ks_fail(err, "rank %d sent this rank a message: only rank 0 may",
						 from);
			pthread_mutex_unlock(&s.lock);
			ks_cluster_msg_release(&msg);
			if (rc < 0)
				goto cleanup;
			continue;
		}
		if (ks_now_ms() - last_alive >= ALIVE_EVERY_MS) {
			say(&s, KS_CLUSTER_ALIVE, 0, 0, NULL);
			last_alive = ks_now_ms();
		}
		if (ks_now_ms() - last_heard > silent_ms) {
			/* rank 0 says alive every second: its search is gone, and nobody would stop this rank
			 */
			ks_fail(err,
				"rank 0 said nothing for %.0f s: the search is gone, and this rank stops",
				(double)(ks_now_ms() - last_heard) / 1e3);
			goto cleanup;
		}
		pthread_mutex_lock(&s.lock);
		if (stopping) {
			/* rank 0 will neither time nor drop what is held now */
			for (struct sjob *job; (job = pop(&s.held));) {
				if (local->discard)
					local->discard(local->ctx, job->built);
				s.in_flight--;
				job_free(job);
			}
		}
		idle = !s.n_out;
		if (stopping && !s.in_flight && idle) {
			pthread_mutex_unlock(&s.lock);
			break;
		}
		pthread_mutex_unlock(&s.lock);
		if (idle)
			usleep(500);
	}
	say(&s, KS_CLUSTER_BYE, 0, 0, NULL);
	ret = flush(&s, err);
cleanup:
	pthread_mutex_lock(&s.lock);
	s.shutdown = 1;
	pthread_cond_broadcast(&s.cond);
	pthread_mutex_unlock(&s.lock);
	for (int i = 0; i < jobs; i++)
		pthread_join(compilers[i], NULL);
	for (int i = 0; i < local->lanes; i++)
		pthread_join(lanes[i].thread, NULL);
	for (int i = 0; i < 3; i++)
		for (struct sjob *job; (job = pop(i == 0 ? &s.build_q : i == 1 ? &s.eval_q : &s.held));) {
			if (job->built && local->discard)
				local->discard(local->ctx, job->built);
			job_free(job);
		}
	for (size_t i = 0; i < s.n_out; i++)
		free(s.out[i]);
	free(s.out);
	free(s.out_len);
	for (size_t i = 0; i < s.n_families; i++) {
		free(s.families[i]->fam.name);
		ks_candidate_release(&s.families[i]->fam.cand);
		free(s.families[i]->error);
		free(s.families[i]);
	}
	free(s.families);
	free(compilers);
	free(lanes);
	if (counts)
		*counts = (struct ks_cluster_serve_counts){
			.built = s.built, .timed = s.timed, .profiled = s.profiled, .checked = s.checked
		};
	pthread_mutex_destroy(&s.lock);
	pthread_cond_destroy(&s.cond);
	return ret;
}
