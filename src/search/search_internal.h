/*
 * search_internal.h - what search.c (the loop, the built-in mutator,
 * persistence) and search_llm.c (the LLM mutator) share.  Not installed.
 *
 * Threads: everything here is touched by the calling thread only, except
 * the pipeline fields marked "under lock" and the jobs in the queues.  The
 * compile and lane threads see a job's family through job->fam, never
 * through s->fams, which the LLM mutator grows.
 */
#ifndef KSEARCH_SEARCH_INTERNAL_H
#define KSEARCH_SEARCH_INTERNAL_H

#include <pthread.h>

#include "ksearch/base/pcg.h"
#include "ksearch/search/search.h"
#include "ksearch/llm/strategy.h"

#define MAX_PARAMS 32
#define RECENT 8
#define ATTEMPTS_KEPT 32

/* PARKED: proposed and saved, but left for the next run (see stop handling) */
enum job_stage { JOB_BUILD, JOB_EVAL, JOB_DONE, JOB_PARKED };

struct job {
	uint64_t seq;
	size_t family;
	const struct ks_family *fam; /* s->fams[family], for the threads */
	int64_t params[MAX_PARAMS];
	uint64_t parents[2];
	int n_parents;
	char mutation[16];
	uint64_t strategy; /* prompt id credited with the result; 0: none */
	uint64_t task;	   /* tag of the LLM task waiting for the result; 0: none */
	json_t *llm;	   /* the record's "llm" field, or NULL */
	enum job_stage stage;
	void *built;
	json_t *record;
	double compile_s, eval_s;
	int failed;
	int skip; /* resumed proposal whose result the archive holds already */
	struct ks_error err;
};

struct queue {
	struct job **items;
	size_t head, count, cap;
};

/* A proposal waiting for its turn: an LLM child or a tuner variant. */
struct pending {
	size_t family;
	int64_t params[MAX_PARAMS];
	uint64_t parent;
	uint64_t strategy;
	uint64_t task;
	char mutation[16];
	json_t *llm;
};

struct pending_queue {
	struct pending *items;
	size_t head, count, cap;
};

struct llm_task;

struct search {
	struct ks_archive *ar;
	const struct ks_op *op;
	const struct ks_backend *backend;
	const struct ks_search_config *cfg;
	struct ks_search_summary *summary;
	struct ks_pcg32 rng;
	size_t depth;
	/* families: the seeds (borrowed), then the LLM's (owned) */
	struct ks_family **fams;
	unsigned char *fam_ok; /* a candidate of the family verified */
	unsigned char *fam_tuned;
	size_t n_fams, cap_fams, n_seeds;
	/* pipeline, under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct queue build_q, eval_q;
	struct job **ring; /* depth slots, by seq % depth */
	int shutdown;
	double gpu_busy_s;
	/* proposals */
	uint64_t next_seq, next_insert;
	uint64_t dispatch_end; /* every seq below it is dispatched (or skipped) */
	uint64_t proposed_this_run;
	size_t seeds_done;
	int exhausted; /* the built-in mutator has nothing left */
	/* elite id -> family cache */
	struct fam_cache_entry {
		uint64_t id;
		int fam; /* -1: no family */
	} * fam_cache;
	size_t n_fam_cache, alloc_fam_cache;
	uint64_t recent[RECENT];
	size_t n_recent;
	/* progress */
	double t_start, last_status;
	uint64_t improvements;
	/* the LLM mutator (search_llm.c); llm is NULL without one */
	const struct ks_search_llm *llm;
	struct ks_strategies strategies;
	struct ks_pcg32 llm_rng;
	struct llm_task *tasks;
	uint64_t next_tag;
	size_t asking; /* requests out */
	int rewriting;
	uint64_t since_rewrite; /* LLM children since the last rewrite */
	struct pending_queue children, tunes;
	char attempts[ATTEMPTS_KEPT][200];
	uint64_t attempt_parent[ATTEMPTS_KEPT];
	size_t n_attempts;
	int pause_reported;
	int no_parent;	       /* the last request found no elite to start from */
	unsigned error_streak; /* unusable answers in a row */
	double ask_after;      /* no new request before this time (ks_search_now()) */
	json_t *usage;	       /* totals over the archive's life (state "llm/usage") */
};

double ks_search_now(void);
void ks_search_log(struct search *s, json_t *event);

/* Families */
/* Add the families the LLM wrote (archive state "search/family/N"), as a resumed search needs them. */
int ks_search_load_families(struct search *s, struct ks_error *err);
size_t ks_search_add_family(struct search *s, struct ks_family *family, int ok);
int ks_search_family_of(struct search *s, uint64_t id);
json_t *ks_search_params_json(const struct ks_family *f, const int64_t *params);
int ks_search_already_seen(struct search *s, size_t fam, const int64_t *params);

/* Parents: the elites with their families (fam[i] < 0: not usable). */
struct pick {
	struct ks_archive_elite *elites;
	size_t n;
	int *fam;
	size_t usable;
};
void ks_search_pick_load(struct search *s, struct pick *pk);
void ks_search_pick_release(struct pick *pk);
size_t ks_search_pick_parent(struct search *s, struct ks_pcg32 *rng, const struct pick *pk);

void ks_pending_push(struct pending_queue *q, const struct pending *p);
int ks_pending_pop(struct pending_queue *q, struct pending *p);
void ks_pending_release(struct pending_queue *q);

/* The LLM mutator (search_llm.c) */
int ks_search_llm_start(struct search *s, struct ks_error *err);
void ks_search_llm_stop(struct search *s);
/* Hand back answers (waiting up to timeout_ms for one) and send new requests unless stopping. */
int ks_search_llm_step(struct search *s, int timeout_ms, int stopping, struct ks_error *err);
/* Whether the LLM side may still bring proposals (so an exhausted built-in mutator must wait). */
int ks_search_llm_may_produce(struct search *s);
/* A result of an LLM-made kernel was inserted: statistics, repair, tuning. */
int ks_search_llm_result(struct search *s, const struct job *job, const json_t *record,
			 const struct ks_archive_insert_result *res, struct ks_error *err);
/* The child of task tag will not be evaluated: end its conversation. */
void ks_search_llm_drop(struct search *s, uint64_t tag);
/* " LLM: ..." for the status line, into buf. */
void ks_search_llm_status(struct search *s, char *buf, size_t size);

#endif
