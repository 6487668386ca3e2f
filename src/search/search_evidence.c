/*
 * search_evidence.c - the queue of hardware evidence (profiles, sanitizer
 * checks): jobs run on the lanes between evaluations, within a share of
 * the GPU time, and are stored in the archive by the calling thread (see
 * search_evidence.h).
 *
 * A job never changes a timing: it runs after the candidate's evaluation,
 * in processes of its own, on a lane that is between two evaluations, so
 * nothing else runs on that GPU meanwhile.
 */
#include "search_evidence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/util.h"

/* Candidates waiting beyond this many: the oldest are dropped (newer ones replaced them, likely). */
#define QUEUE_MAX 16
/* Failures of this many jobs in a row end the kind for the run. */
#define FAIL_STREAK 3

void ks_evidence_budget_init(struct ks_evidence_budget *b, double share, double first_guess_s)
{
	memset(b, 0, sizeof(*b));
	b->share = share;
	b->expected_s = first_guess_s;
}

int ks_evidence_budget_allows(const struct ks_evidence_budget *b, int running)
{
	double next = b->expected_s * (running + 1);

	if (b->share <= 0)
		return 0;
	return b->spent_s + next <= b->share * (b->eval_s + b->spent_s + next);
}

void ks_evidence_budget_spent(struct ks_evidence_budget *b, double seconds)
{
	b->spent_s += seconds;
	b->runs++;
	b->expected_s = b->spent_s / (double)b->runs;
}

double ks_evidence_budget_used(const struct ks_evidence_budget *b)
{
	double total = b->eval_s + b->spent_s;

	return total > 0 ? b->spent_s / total : 0;
}

void ks_evidence_queue_init(struct ks_evidence_queue *q, const struct ks_evidence_kind *kind,
			    const struct ks_evidence_env *env, double share, double guess_s,
			    struct ks_search_evidence *stats)
{
	memset(q, 0, sizeof(*q));
	q->kind = kind;
	q->env = *env;
	q->stats = stats;
	ks_evidence_budget_init(&q->budget, share, guess_s > 0 ? guess_s : kind->first_guess_s);
	q->off = !kind->available(env->backend) || share <= 0;
}

void ks_evidence_log(struct ks_evidence_queue *q, json_t *event)
{
	FILE *log = q->env.cfg->log;

	if (log) {
		char *text;

		json_object_set_new(event, "t", json_real(ks_now_s() - q->env.t_start));
		text = json_dumps(event, JSON_COMPACT);
		fprintf(log, "%s\n", text);
		fflush(log);
		free(text);
	}
	json_decref(event);
}

/*
 * Under lock (or once the threads have stopped).  A build made ahead is
 * discarded here: the backends' discard takes only their own lock.
 */
static void job_free(struct ks_evidence_queue *q, struct ks_evidence_job *job)
{
	if (job) {
		if (job->built && q->env.backend->discard)
			q->env.backend->discard(q->env.backend->ctx, job->built);
		free(job->outcome);
		free(job);
	}
}

/* Under lock: is record id waiting, or being built, already? */
static int has_job(const struct ks_evidence_queue *q, uint64_t id)
{
	for (size_t i = 0; i < q->n_wait; i++)
		if (q->wait[i]->id == id)
			return 1;
	for (size_t i = 0; i < q->n_unbuilt; i++)
		if (q->unbuilt[i]->id == id)
			return 1;
	for (size_t i = 0; i < q->n_building; i++)
		if (q->building[i]->id == id)
			return 1;
	return 0;
}

/* Under lock: job to the end of list (the newest), the oldest dropped beyond QUEUE_MAX. */
static void push_newest(struct ks_evidence_queue *q, struct ks_evidence_job ***list, size_t *n, size_t *alloc,
			struct ks_evidence_job *job)
{
	if (*n == QUEUE_MAX) {
		job_free(q, (*list)[0]);
		memmove(*list, *list + 1, (*n - 1) * sizeof(**list));
		(*n)--;
	}
	KS_ALLOC_GROW(*list, *n + 1, *alloc);
	(*list)[(*n)++] = job;
}

/* Under lock: free every job of list. */
static void free_all(struct ks_evidence_queue *q, struct ks_evidence_job **list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		job_free(q, list[i]);
}

void ks_evidence_queue_add(struct ks_evidence_queue *q, const struct ks_family *fam, const int64_t *params,
			   uint64_t id)
{
	struct ks_evidence_job *job;

	pthread_mutex_lock(q->env.lock);
	if (q->off || has_job(q, id)) {
		pthread_mutex_unlock(q->env.lock);
		return;
	}
	job = ks_calloc(1, sizeof(*job));
	job->id = id;
	job->fam = fam;
	job->outcome = ks_calloc(1, q->kind->outcome_size);
	memcpy(job->params, params, sizeof(job->params));
	if (q->kind->prebuild)
		push_newest(q, &q->unbuilt, &q->n_unbuilt, &q->alloc_unbuilt, job);
	else
		push_newest(q, &q->wait, &q->n_wait, &q->alloc_wait, job);
	pthread_cond_broadcast(q->env.cond);
	pthread_mutex_unlock(q->env.lock);
}

int ks_evidence_queue_ready(struct ks_evidence_queue *q, double gpu_s)
{
	if (q->off || !q->n_wait)
		return 0;
	q->budget.eval_s = gpu_s;
	return ks_evidence_budget_allows(&q->budget, q->running);
}

struct ks_evidence_job *ks_evidence_queue_take(struct ks_evidence_queue *q, double gpu_s)
{
	if (!ks_evidence_queue_ready(q, gpu_s))
		return NULL;
	q->running++;
	return q->wait[--q->n_wait];
}

struct ks_evidence_job *ks_evidence_queue_take_unbuilt(struct ks_evidence_queue *q)
{
	struct ks_evidence_job *job;

	if (q->off || !q->n_unbuilt)
		return NULL;
	job = q->unbuilt[--q->n_unbuilt];
	KS_ALLOC_GROW(q->building, q->n_building + 1, q->alloc_building);
	q->building[q->n_building++] = job;
	return job;
}

void ks_evidence_queue_built(struct ks_evidence_queue *q, struct ks_evidence_job *job)
{
	pthread_mutex_lock(q->env.lock);
	for (size_t i = 0; i < q->n_building; i++)
		if (q->building[i] == job) {
			q->building[i] = q->building[--q->n_building];
			break;
		}
	if (q->off)
		job_free(q, job); /* the kind ended for the run while it was built */
	else
		push_newest(q, &q->wait, &q->n_wait, &q->alloc_wait, job);
	pthread_cond_broadcast(q->env.cond);
	pthread_mutex_unlock(q->env.lock);
}

struct ks_evidence_job *ks_evidence_queue_take_now(struct ks_evidence_queue *q)
{
	struct ks_evidence_job *job = NULL;

	pthread_mutex_lock(q->env.lock);
	while (!q->off && !q->n_wait && (q->n_unbuilt || q->n_building))
		pthread_cond_wait(q->env.cond, q->env.lock); /* a build thread gives it back */
	if (!q->off && q->n_wait) {
		q->running++;
		job = q->wait[--q->n_wait];
	}
	pthread_mutex_unlock(q->env.lock);
	return job;
}

void ks_evidence_queue_drop(struct ks_evidence_queue *q, struct ks_evidence_job *job)
{
	pthread_mutex_lock(q->env.lock);
	q->running--;
	job_free(q, job);
	pthread_mutex_unlock(q->env.lock);
}

/* Under lock: keep the jobs of list whose record is one of ids[0..n), in order; free the others. */
static void retain_list(struct ks_evidence_queue *q, struct ks_evidence_job **list, size_t *n_list,
			const uint64_t *ids, size_t n)
{
	size_t kept = 0;

	for (size_t i = 0; i < *n_list; i++) {
		size_t j = 0;

		while (j < n && ids[j] != list[i]->id)
			j++;
		if (j < n)
			list[kept++] = list[i];
		else
			job_free(q, list[i]);
	}
	*n_list = kept;
}

void ks_evidence_queue_retain(struct ks_evidence_queue *q, const uint64_t *ids, size_t n)
{
	pthread_mutex_lock(q->env.lock);
	retain_list(q, q->wait, &q->n_wait, ids, n);
	retain_list(q, q->unbuilt, &q->n_unbuilt, ids, n);
	pthread_mutex_unlock(q->env.lock);
}

void ks_evidence_queue_run(struct ks_evidence_queue *q, int lane, struct ks_evidence_job *job)
{
	const char *why;
	double t0 = ks_now_s(), held;

	ks_error_clear(&job->err);
	job->failed = q->kind->run(q->env.backend, lane, job, q->env.cfg->stop, &job->err) < 0;
	job->seconds = ks_now_s() - t0;
	held = job->failed ? 0 : q->kind->held_s(job);
	if (held > 0 && held < job->seconds)
		job->seconds = held;
	pthread_mutex_lock(q->env.lock);
	q->running--;
	/* no tool here: no lane starts another (the calling thread says why) */
	if (!job->failed && q->kind->judge(job, &why) == KS_EVIDENCE_UNAVAILABLE)
		q->off = 1;
	ks_evidence_budget_spent(&q->budget, job->seconds);
	KS_ALLOC_GROW(q->done, q->n_done + 1, q->alloc_done);
	q->done[q->n_done++] = job;
	pthread_cond_broadcast(q->env.cond);
	pthread_mutex_unlock(q->env.lock);
}

/* No more jobs this run: say why, once (over the status line a terminal shows). */
static void stop_queue(struct ks_evidence_queue *q, const char *why)
{
	const struct ks_search_config *cfg = q->env.cfg;
	char *off = q->stats->off;
	char event[64];
	size_t n;

	pthread_mutex_lock(q->env.lock);
	q->off = 1;
	free_all(q, q->wait, q->n_wait);
	free_all(q, q->unbuilt, q->n_unbuilt);
	q->n_wait = q->n_unbuilt = 0; /* a job a build thread holds is freed when it comes back */
	pthread_mutex_unlock(q->env.lock);
	if (off[0])
		return;
	snprintf(off, sizeof(q->stats->off), "%s", why);
	n = strlen(off);
	if (n && off[n - 1] == '.')
		off[n - 1] = '\0';
	if (cfg->out) {
		fprintf(cfg->out, "%s%s: %s; the search goes on without %s\n",
			cfg->status_tty ? "\r\033[K" : "", q->kind->tool, off, q->kind->plural);
		fflush(cfg->out);
	}
	snprintf(event, sizeof(event), "%s_off", q->kind->tool);
	ks_evidence_log(q, json_pack("{s:s, s:s}", "event", event, "why", off));
}

/* A job that failed for its candidate: logged; too many in a row end the kind for the run. */
static void failed(struct ks_evidence_queue *q, const struct ks_evidence_job *job, const char *why)
{
	char event[64];

	q->stats->failed++;
	snprintf(event, sizeof(event), "%s_failed", q->kind->event);
	ks_evidence_log(q, json_pack("{s:s, s:I, s:s, s:s, s:f}", "event", event, "id", (json_int_t)job->id,
				     "status", job->failed ? "internal" : "failed", "why", why, "seconds",
				     job->seconds));
	if (++q->fail_streak >= FAIL_STREAK) {
		char msg[1024];

		snprintf(msg, sizeof(msg), "%d %s in a row failed (the last: #%llu, %.900s)", FAIL_STREAK,
			 q->kind->plural, (unsigned long long)job->id, why);
		stop_queue(q, msg);
	}
}

int ks_evidence_queue_apply(struct ks_evidence_queue *q, struct ks_error *err)
{
	const volatile sig_atomic_t *stop = q->env.cfg->stop;
	struct ks_evidence_job **done;
	size_t n;
	int ret = 0;

	pthread_mutex_lock(q->env.lock);
	done = q->done;
	n = q->n_done;
	q->done = NULL;
	q->n_done = q->alloc_done = 0;
	pthread_mutex_unlock(q->env.lock);
	for (size_t i = 0; i < n; i++) {
		struct ks_evidence_job *job = done[i];
		const char *why = job->err.msg;
		enum ks_evidence_judgement judgement =
			job->failed ? KS_EVIDENCE_FAILED : q->kind->judge(job, &why);

		if (ret < 0) {
			/* the archive failed: the search stops, and what is left goes */
		} else if (judgement == KS_EVIDENCE_MADE) {
			q->fail_streak = 0;
			ret = q->kind->store(q, job, err);
		} else if (judgement == KS_EVIDENCE_UNAVAILABLE) {
			stop_queue(q, why);
		} else if (!(stop && *stop)) {
			/* (a job cut short by Ctrl-C is not the candidate's failure) */
			failed(q, job, why);
		}
		job_free(q, job);
	}
	free(done);
	return ret;
}

void ks_evidence_queue_finish(struct ks_evidence_queue *q, double gpu_s)
{
	pthread_mutex_lock(q->env.lock);
	q->budget.eval_s = gpu_s;
	q->stats->seconds = q->budget.spent_s;
	q->stats->share = ks_evidence_budget_used(&q->budget);
	/* the build threads have stopped (after the run's last confirmations): no job is held by one */
	free_all(q, q->wait, q->n_wait);
	free_all(q, q->done, q->n_done);
	free_all(q, q->unbuilt, q->n_unbuilt);
	free(q->wait);
	free(q->done);
	free(q->unbuilt);
	free(q->building);
	q->wait = q->done = q->unbuilt = q->building = NULL;
	q->n_wait = q->n_done = q->n_unbuilt = q->n_building = 0;
	pthread_mutex_unlock(q->env.lock);
}
