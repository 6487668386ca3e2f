/*
 * search_evidence.h - hardware evidence the search gathers on its lanes
 * between two evaluations: profiles of new elites (search_profile.c),
 * sanitizer checks of new bests (search_sanitize.c) and confirmations of
 * new per-workload bests (search_confirm.c).  Shared with
 * search.c only.  Not installed.
 *
 * One queue type serves both; a kind (struct ks_evidence_kind, a table of
 * functions) says how a job runs, how its outcome is judged and how it is
 * stored.  Candidates wait in a queue (the newest first, at most 16); a
 * lane that is between two evaluations takes one when the budget allows
 * (struct ks_evidence_budget: within the kind's share of the GPU time)
 * and runs it; the calling thread stores what came back in the archive
 * and says what needs saying.  When the tool is missing or cannot run
 * here, the queue says so once and ends for the run; so it does after
 * three jobs in a row failed for their candidates.
 *
 * A kind whose job starts with a build of the candidate (a confirmation)
 * has it made ahead by the search's build threads: its jobs wait unbuilt
 * until a build thread takes one (ks_evidence_queue_take_unbuilt()) and
 * gives it back built (ks_evidence_queue_built()), and only then may a
 * lane run it.  On the lane the GPU would have waited through the
 * compile: 0.4-1 s of a gqa confirmation's 0.6-1.3 s, with nvidia-smi at
 * 0% (BENCHMARKS.md, twenty-sixth session); built ahead, one took 0.14-0.19
 * s on its lane (twenty-seventh).  The run's last confirmations too: the
 * build threads stop after them.
 *
 * Locking: the queue and its budget are guarded by the search's lock
 * (env.lock).  Functions say whether they are called with it held; the
 * others take it themselves.
 */
#ifndef KSEARCH_SEARCH_EVIDENCE_H
#define KSEARCH_SEARCH_EVIDENCE_H

#include <jansson.h>
#include <pthread.h>

#include "ksearch/search/mutator.h"
#include "ksearch/search/search.h"

/* What a queue needs of its search; all borrowed. */
struct ks_evidence_env {
	const struct ks_backend *backend;
	const struct ks_search_config *cfg;
	struct ks_archive *ar;
	pthread_mutex_t *lock; /* the search's */
	pthread_cond_t *cond;  /* broadcast when a job is queued or comes back */
	double t_start;	       /* the search's start (ks_now_s()), for the log's "t" */
};

/* A candidate waiting for its evidence, then the outcome. */
struct ks_evidence_job {
	uint64_t id;
	const struct ks_family *fam;
	int64_t params[KS_MAX_PARAMS];
	void *outcome;	/* the kind's outcome struct (outcome_size bytes, zeroed); owned */
	void *built;	/* the build made ahead (a prebuild kind), or NULL; owned until run takes it */
	double seconds; /* the GPU's time on it: the kind's held_s, else the lane's wall time */
	int failed;	/* ksearch's own failure, in err */
	struct ks_error err;
};

/* How the calling thread takes an outcome (ks_evidence_kind.judge). */
enum ks_evidence_judgement {
	KS_EVIDENCE_MADE,	 /* store it (kind.store) */
	KS_EVIDENCE_UNAVAILABLE, /* the tool is missing or cannot run here: no more this run */
	KS_EVIDENCE_FAILED,	 /* it could not be made for this candidate (a crash, a deadline) */
};

struct ks_evidence_queue;

struct ks_evidence_kind {
	const char *tool;     /* "profiler": the start of its messages, the log's "<tool>_off" */
	const char *event;    /* "profile": the log's "<event>" and "<event>_failed" */
	const char *plural;   /* "profiles": "3 profiles in a row failed" */
	size_t outcome_size;  /* of its outcome struct */
	double first_guess_s; /* what a job is expected to take before one was measured */
	int prebuild;	      /* its jobs are built ahead by a build thread (job->built) */
	/* Is there a backend function for it? */
	int (*available)(const struct ks_backend *backend);
	/* A lane: run the job, filling job->outcome; -1 when ksearch itself failed (in err). */
	int (*run)(const struct ks_backend *backend, int lane, struct ks_evidence_job *job,
		   const volatile sig_atomic_t *cancel, struct ks_error *err);
	/*
	 * How long the job held its GPU, timed where it ran (0: not known).
	 * The budget counts it, not the lane's wall time: a lane of an MPI
	 * job also waits for the answer, and for a rank of one GPU to finish
	 * the candidates it holds, while that GPU goes on timing them.
	 */
	double (*held_s)(const struct ks_evidence_job *job);
	/* What the outcome is; *why: the words for one that is not MADE (borrowed from the outcome). */
	enum ks_evidence_judgement (*judge)(const struct ks_evidence_job *job, const char **why);
	/*
	 * Calling thread: store a MADE outcome in the archive, count it in
	 * q->stats and log it (ks_evidence_log()); -1 when the archive failed.
	 */
	int (*store)(struct ks_evidence_queue *q, const struct ks_evidence_job *job, struct ks_error *err);
};

extern const struct ks_evidence_kind ks_evidence_profile;  /* search_profile.c */
extern const struct ks_evidence_kind ks_evidence_sanitize; /* search_sanitize.c */
extern const struct ks_evidence_kind ks_evidence_confirm;  /* search_confirm.c */

struct ks_evidence_queue {
	const struct ks_evidence_kind *kind;
	struct ks_evidence_env env;
	struct ks_search_evidence *stats; /* the summary's part for this kind; the calling thread's */
	/* under lock */
	struct ks_evidence_job **wait, **done;
	size_t n_wait, alloc_wait, n_done, alloc_done;
	/* a prebuild kind's jobs not built yet, and those a build thread holds */
	struct ks_evidence_job **unbuilt, **building;
	size_t n_unbuilt, alloc_unbuilt, n_building, alloc_building;
	int running;
	int off; /* no more jobs this run */
	struct ks_evidence_budget budget;
	/* the calling thread's */
	unsigned fail_streak;
};

/*
 * Off from the start when the backend cannot run the kind or the share is
 * 0; guess_s: what the first job is expected to take (0: the kind's guess).
 */
void ks_evidence_queue_init(struct ks_evidence_queue *q, const struct ks_evidence_kind *kind,
			    const struct ks_evidence_env *env, double share, double guess_s,
			    struct ks_search_evidence *stats);
/* Free what is left and fill stats' seconds and share; gpu_s as for ready(). */
void ks_evidence_queue_finish(struct ks_evidence_queue *q, double gpu_s);

/*
 * Calling thread: record id (fam at params) wants evidence.  Queued once:
 * a record already waiting is not queued again.
 */
void ks_evidence_queue_add(struct ks_evidence_queue *q, const struct ks_family *fam, const int64_t *params,
			   uint64_t id);
/*
 * Under lock: is a job ready to start, by the queue and the budget?
 * gpu_s: the search's GPU time spent on everything else (evaluations and
 * the other kinds' jobs).
 */
int ks_evidence_queue_ready(struct ks_evidence_queue *q, double gpu_s);
/* Under lock: the next job to run, counted as running (NULL: none ready). */
struct ks_evidence_job *ks_evidence_queue_take(struct ks_evidence_queue *q, double gpu_s);
/*
 * Under lock: a prebuild kind's newest job waiting for its build, now the
 * calling build thread's (NULL: none).  The thread builds it, without the
 * lock, into job->built, and gives it back with ks_evidence_queue_built().
 */
struct ks_evidence_job *ks_evidence_queue_take_unbuilt(struct ks_evidence_queue *q);
/*
 * A build thread gives job back, built or not (job->built NULL: the
 * build failed, and the lane builds it again, to say why); it waits for a
 * lane from then on.  Takes the lock.
 */
void ks_evidence_queue_built(struct ks_evidence_queue *q, struct ks_evidence_job *job);
/*
 * The newest job waiting, whatever the budget (a run's last confirmations),
 * or NULL when none is left; takes the lock.  A prebuild kind's job not yet
 * built is waited for: the build threads outlive the lanes for these, so
 * that the lane that times one does not also compile it.
 */
struct ks_evidence_job *ks_evidence_queue_take_now(struct ks_evidence_queue *q);
/* A job taken with ks_evidence_queue_take_now() and not run after all: freed. */
void ks_evidence_queue_drop(struct ks_evidence_queue *q, struct ks_evidence_job *job);
/* Calling thread: drop the jobs waiting whose record is not one of ids[0..n). */
void ks_evidence_queue_retain(struct ks_evidence_queue *q, const uint64_t *ids, size_t n);
/* A lane, without the lock: run it, and leave the outcome for the calling thread. */
void ks_evidence_queue_run(struct ks_evidence_queue *q, int lane, struct ks_evidence_job *job);
/* Calling thread: store the outcomes that came back; -1 when the archive failed. */
int ks_evidence_queue_apply(struct ks_evidence_queue *q, struct ks_error *err);

/*
 * Record id was just inserted as a duplicate of original (search.h): it
 * gets original's sanitizer check, if it has one (a failed one demotes
 * it).  search_sanitize.c.
 */
int ks_evidence_sanitize_inherit(struct ks_archive *ar, uint64_t original, uint64_t id, struct ks_error *err);

/* Write event (stolen) to the search's log with its "t". */
void ks_evidence_log(struct ks_evidence_queue *q, json_t *event);

#endif
