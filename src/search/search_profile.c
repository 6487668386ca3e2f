/*
 * search_profile.c - hardware evidence for new elites: profiles run on
 * the lanes between evaluations, within a share of the GPU time, and are
 * stored in the archive by the calling thread (see search_profile.h).
 *
 * A profile never changes a timing: it runs after the candidate's
 * evaluation, in processes of its own, on a lane that is between two
 * evaluations, so nothing else runs on that GPU meanwhile.
 */
#include "search_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/util.h"

/* New elites waiting beyond this many: the oldest are dropped (newer elites replaced them, likely). */
#define QUEUE_MAX 16
/* Failures of this many profiles in a row end profiling for the run. */
#define FAIL_STREAK 3
#define DEFAULT_GUESS_S 5.0 /* a gqa profile took 3 s on an H100 */

void ks_profile_budget_init(struct ks_profile_budget *b, double share, double first_guess_s)
{
	memset(b, 0, sizeof(*b));
	b->share = share;
	b->expected_s = first_guess_s;
}

int ks_profile_budget_allows(const struct ks_profile_budget *b, int running)
{
	double next = b->expected_s * (running + 1);

	if (b->share <= 0)
		return 0;
	return b->profile_s + next <= b->share * (b->eval_s + b->profile_s + next);
}

void ks_profile_budget_spent(struct ks_profile_budget *b, double seconds)
{
	b->profile_s += seconds;
	b->profiles++;
	b->expected_s = b->profile_s / (double)b->profiles;
}

double ks_profile_budget_used(const struct ks_profile_budget *b)
{
	double total = b->eval_s + b->profile_s;

	return total > 0 ? b->profile_s / total : 0;
}

void ks_search_profiler_init(struct ks_search_profiler *p, const struct ks_search_profiler_env *env)
{
	const struct ks_search_config *cfg = env->cfg;

	memset(p, 0, sizeof(*p));
	p->env = *env;
	ks_profile_budget_init(&p->budget, cfg->profile_share,
			       cfg->profile_guess_s > 0 ? cfg->profile_guess_s : DEFAULT_GUESS_S);
	p->off = !env->backend->profile || cfg->profile_share <= 0;
}

static void log_event(struct ks_search_profiler *p, json_t *event)
{
	FILE *log = p->env.cfg->log;

	if (log) {
		char *text;

		json_object_set_new(event, "t", json_real(ks_search_now() - p->env.t_start));
		text = json_dumps(event, JSON_COMPACT);
		fprintf(log, "%s\n", text);
		fflush(log);
		free(text);
	}
	json_decref(event);
}

void ks_search_profiler_elite(struct ks_search_profiler *p, const struct ks_family *fam,
			      const int64_t *params, uint64_t id)
{
	struct ks_profile_job *job;

	pthread_mutex_lock(p->env.lock);
	if (p->off) {
		pthread_mutex_unlock(p->env.lock);
		return;
	}
	job = ks_calloc(1, sizeof(*job));
	job->id = id;
	job->fam = fam;
	memcpy(job->params, params, sizeof(job->params));
	if (p->n_wait == QUEUE_MAX) {
		free(p->wait[0]);
		memmove(p->wait, p->wait + 1, (p->n_wait - 1) * sizeof(*p->wait));
		p->n_wait--;
	}
	KS_ALLOC_GROW(p->wait, p->n_wait + 1, p->alloc_wait);
	p->wait[p->n_wait++] = job;
	pthread_cond_broadcast(p->env.cond);
	pthread_mutex_unlock(p->env.lock);
}

int ks_search_profiler_ready(struct ks_search_profiler *p, double gpu_busy_s)
{
	if (p->off || !p->n_wait)
		return 0;
	p->budget.eval_s = gpu_busy_s;
	return ks_profile_budget_allows(&p->budget, p->running);
}

struct ks_profile_job *ks_search_profiler_take(struct ks_search_profiler *p, double gpu_busy_s)
{
	if (!ks_search_profiler_ready(p, gpu_busy_s))
		return NULL;
	p->running++;
	return p->wait[--p->n_wait];
}

void ks_search_profiler_run(struct ks_search_profiler *p, int lane, struct ks_profile_job *job)
{
	const struct ks_backend *backend = p->env.backend;
	double t0 = ks_search_now();

	ks_error_clear(&job->err);
	job->failed = backend->profile(backend->ctx, lane, job->fam, job->params, p->env.cfg->stop,
				       &job->outcome, &job->err) < 0;
	job->seconds = ks_search_now() - t0;
	pthread_mutex_lock(p->env.lock);
	p->running--;
	/* no profiler here: no lane starts another (the calling thread says why) */
	if (!job->failed && (job->outcome.status == KS_PROFILE_UNAVAILABLE ||
			     job->outcome.status == KS_PROFILE_NO_PERMISSION))
		p->off = 1;
	ks_profile_budget_spent(&p->budget, job->seconds);
	KS_ALLOC_GROW(p->done, p->n_done + 1, p->alloc_done);
	p->done[p->n_done++] = job;
	pthread_cond_broadcast(p->env.cond);
	pthread_mutex_unlock(p->env.lock);
}

/* No more profiles this run: say why, once (over the status line a terminal shows). */
static void stop_profiling(struct ks_search_profiler *p, const char *why)
{
	const struct ks_search_config *cfg = p->env.cfg;
	struct ks_search_summary *sum = p->env.summary;
	size_t n;

	pthread_mutex_lock(p->env.lock);
	p->off = 1;
	for (size_t i = 0; i < p->n_wait; i++)
		free(p->wait[i]);
	p->n_wait = 0;
	pthread_mutex_unlock(p->env.lock);
	if (sum->profiler_off[0])
		return;
	snprintf(sum->profiler_off, sizeof(sum->profiler_off), "%s", why);
	n = strlen(sum->profiler_off);
	if (n && sum->profiler_off[n - 1] == '.')
		sum->profiler_off[n - 1] = '\0';
	if (cfg->out) {
		fprintf(cfg->out, "%sprofiler: %s; the search goes on without profiles\n",
			cfg->status_tty ? "\r\033[K" : "", sum->profiler_off);
		fflush(cfg->out);
	}
	log_event(p, json_pack("{s:s, s:s}", "event", "profiler_off", "why", sum->profiler_off));
}

static int store(struct ks_search_profiler *p, const struct ks_profile_job *job, struct ks_error *err)
{
	const struct ks_profile *prof = &job->outcome.profile;
	struct ks_archive_profile_result res;
	json_t *profile = ks_profile_to_json(prof);
	int rc = ks_archive_set_profile(p->env.ar, job->id, profile, &res, err);

	json_decref(profile);
	if (rc < 0)
		return -1;
	p->env.summary->profiled++;
	p->env.summary->profile_moved += res.moved != 0;
	log_event(p, json_pack("{s:s, s:I, s:s, s:f, s:f, s:f, s:b, s:I, s:I, s:s}", "event", "profile", "id",
			       (json_int_t)job->id, "workload", prof->workload, "dram_fraction",
			       prof->dram_fraction, "achieved_occupancy", prof->achieved_occupancy, "seconds",
			       job->seconds, "moved", res.moved, "old_cell", (json_int_t)res.old_cell, "cell",
			       (json_int_t)res.cell, "outcome", ks_archive_outcome_name(res.outcome)));
	return 0;
}

/* A profile that failed for its candidate: logged; too many in a row end profiling. */
static void failed(struct ks_search_profiler *p, const struct ks_profile_job *job, const char *why)
{
	p->env.summary->profile_failed++;
	log_event(p,
		  json_pack("{s:s, s:I, s:s, s:s, s:f}", "event", "profile_failed", "id", (json_int_t)job->id,
			    "status", job->failed ? "internal" : ks_profile_status_name(job->outcome.status),
			    "why", why, "seconds", job->seconds));
	if (++p->fail_streak >= FAIL_STREAK) {
		char msg[1024];

		snprintf(msg, sizeof(msg), "%d profiles in a row failed (the last: #%llu, %.900s)",
			 FAIL_STREAK, (unsigned long long)job->id, why);
		stop_profiling(p, msg);
	}
}

int ks_search_profiler_apply(struct ks_search_profiler *p, struct ks_error *err)
{
	const volatile sig_atomic_t *stop = p->env.cfg->stop;
	struct ks_profile_job **done;
	size_t n;
	int ret = 0;

	pthread_mutex_lock(p->env.lock);
	done = p->done;
	n = p->n_done;
	p->done = NULL;
	p->n_done = p->alloc_done = 0;
	pthread_mutex_unlock(p->env.lock);
	for (size_t i = 0; i < n; i++) {
		struct ks_profile_job *job = done[i];
		const char *why = job->failed ? job->err.msg : job->outcome.why;
		enum ks_profile_status status = job->outcome.status;

		if (ret < 0) {
			/* the archive failed: the search stops, and what is left goes */
		} else if (!job->failed && status == KS_PROFILE_OK) {
			p->fail_streak = 0;
			ret = store(p, job, err);
		} else if (!job->failed &&
			   (status == KS_PROFILE_UNAVAILABLE || status == KS_PROFILE_NO_PERMISSION)) {
			stop_profiling(p, why);
		} else if (!(stop && *stop)) {
			/* (a profile cut short by Ctrl-C is not the candidate's failure) */
			failed(p, job, why);
		}
		free(job);
	}
	free(done);
	return ret;
}

void ks_search_profiler_finish(struct ks_search_profiler *p, double gpu_busy_s)
{
	struct ks_search_summary *sum = p->env.summary;

	pthread_mutex_lock(p->env.lock);
	p->budget.eval_s = gpu_busy_s;
	sum->profile_s = p->budget.profile_s;
	sum->profile_share = ks_profile_budget_used(&p->budget);
	for (size_t i = 0; i < p->n_wait; i++)
		free(p->wait[i]);
	for (size_t i = 0; i < p->n_done; i++)
		free(p->done[i]);
	free(p->wait);
	free(p->done);
	p->wait = p->done = NULL;
	p->n_wait = p->n_done = 0;
	pthread_mutex_unlock(p->env.lock);
}
