/*
 * search_profile.h - the search's profiler (search_profile.c), shared
 * with search.c only.  Not installed.
 *
 * New elites wait in a queue (the newest first, at most 16); a lane that
 * is between two evaluations takes one when the budget allows
 * (struct ks_profile_budget: within cfg->profile_share of the GPU time)
 * and runs the backend's profile(); the calling thread stores what came
 * back in the archive and says what needs saying.  Without a profiler, or
 * without permission to read counters, it says so once and profiling ends
 * for the run; so it does after three failed profiles in a row.
 *
 * Locking: the queues and the budget are guarded by the search's lock
 * (env.lock).  Functions say whether they are called with it held; the
 * others take it themselves.
 */
#ifndef KSEARCH_SEARCH_PROFILE_H
#define KSEARCH_SEARCH_PROFILE_H

#include <pthread.h>

#include "ksearch/search/mutator.h"
#include "ksearch/search/search.h"

/* What the profiler needs of its search; all borrowed. */
struct ks_search_profiler_env {
	const struct ks_backend *backend;
	const struct ks_search_config *cfg;
	struct ks_search_summary *summary;
	struct ks_archive *ar;
	pthread_mutex_t *lock; /* the search's */
	pthread_cond_t *cond;  /* broadcast when a profile is queued or comes back */
	double t_start;	       /* the search's start (ks_search_now()), for the log's "t" */
};

/* A new elite waiting for its profile, then the outcome. */
struct ks_profile_job {
	uint64_t id;
	const struct ks_family *fam;
	int64_t params[KS_MAX_PARAMS];
	struct ks_profile_outcome outcome;
	double seconds; /* the lane's time on it */
	int failed;	/* ksearch's own failure, in err */
	struct ks_error err;
};

struct ks_search_profiler {
	struct ks_search_profiler_env env;
	/* under lock */
	struct ks_profile_job **wait, **done;
	size_t n_wait, alloc_wait, n_done, alloc_done;
	int running;
	int off; /* no more profiles this run */
	struct ks_profile_budget budget;
	/* the calling thread's */
	unsigned fail_streak;
};

/* Off from the start when the backend cannot profile or the share is 0. */
void ks_search_profiler_init(struct ks_search_profiler *p, const struct ks_search_profiler_env *env);
/* Free what is left and fill the summary's profiler fields. */
void ks_search_profiler_finish(struct ks_search_profiler *p, double gpu_busy_s);

/* Calling thread: record id (fam at params) just became an elite. */
void ks_search_profiler_elite(struct ks_search_profiler *p, const struct ks_family *fam,
			      const int64_t *params, uint64_t id);
/* Under lock: is a profile ready to start, by the queue and the budget? */
int ks_search_profiler_ready(struct ks_search_profiler *p, double gpu_busy_s);
/* Under lock: the next profile to run, counted as running (NULL: none ready). */
struct ks_profile_job *ks_search_profiler_take(struct ks_search_profiler *p, double gpu_busy_s);
/* A lane, without the lock: run it, and leave the outcome for the calling thread. */
void ks_search_profiler_run(struct ks_search_profiler *p, int lane, struct ks_profile_job *job);
/* Calling thread: store the profiles that came back; -1 when the archive failed. */
int ks_search_profiler_apply(struct ks_search_profiler *p, struct ks_error *err);

#endif
