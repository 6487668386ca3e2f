/*
 * search.c - the MAP-Elites loop: the seeds, asking the mutators
 * (mutator.h), the build/evaluate pipeline, in-order insertion, stops,
 * progress and resume (see search.h); and the host side of mutator.h:
 * the families, parents, and what a mutator may ask.
 *
 * Threads: everything here is touched by the calling thread only, except
 * the pipeline fields marked "under lock" and the jobs in the queues.  The
 * compile and lane threads see a job's family through job->fam, never
 * through s->fams, which mutators grow.
 */
#include "ksearch/search/search.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ksearch/archive/record.h"
#include "ksearch/base/map.h"
#include "ksearch/base/sha256.h"
#include "ksearch/base/util.h"
#include "ksearch/search/mutator.h"
#include "search_evidence.h"

#define RECENT 8

/* PARKED: proposed and saved, but left for the next run (see stop handling) */
enum job_stage { JOB_BUILD, JOB_EVAL, JOB_DONE, JOB_PARKED };

struct job {
	uint64_t seq;
	struct ks_proposal p;
	const struct ks_family *fam; /* s->fams[p.family].fam, for the threads */
	enum job_stage stage;
	void *built;
	struct ks_result result; /* build() fills it, evaluate() completes it */
	double compile_s, eval_s;
	double evaluated_t;    /* when its evaluation ended (seconds into the run) */
	long binary;	       /* its entry in s->binaries; -1: none (not built ok) */
	int duplicate;	       /* its binary is another job's: recorded with that one's result */
	uint64_t duplicate_of; /* that one's record */

	int failed;
	int skip; /* resumed proposal whose result the archive holds already */
	struct ks_error err;
};

struct queue {
	struct job **items;
	size_t head, count, cap;
};

struct search;

/* What mutators hold: a handle on the search. */
struct ks_mutator_host {
	struct search *s;
};

/* The search's kinds of hardware evidence, indexes into search.evidence. */
enum { SANITIZER, CONFIRM, PROFILES, N_EVIDENCE };

struct family_slot {
	struct ks_family *fam; /* the seeds borrowed, the added ones owned */
	int ok;		       /* a candidate of the family verified */
};

struct search {
	struct ks_mutator_host host;
	/*
	 * The first archive read of the host API that failed: its answer was
	 * "nothing there", and propose() stops the search with this error.
	 */
	int host_failed;
	struct ks_error host_err;
	struct ks_archive *ar;
	const struct ks_op *op;
	const struct ks_backend *backend;
	const struct ks_search_config *cfg;
	struct ks_search_summary *summary;
	struct ks_pcg32 rng;
	size_t depth;
	/* families: the seeds, then the mutators' */
	struct family_slot *fams;
	size_t n_fams, alloc_fams, n_seeds;
	/* pipeline, under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct queue build_q, eval_q;
	struct job **ring; /* depth slots, by seq % depth */
	int shutdown;
	/*
	 * the build threads' end: after shutdown they still build the run's last
	 * confirmations (confirm_last_bests()), until this is set
	 */
	int builders_done;
	int winding_down; /* out of time, or stopped by a signal or the target: no new profile or check */
	double gpu_busy_s;
	/* proposals */
	uint64_t next_seq, next_insert;
	uint64_t dispatch_end; /* every seq below it is dispatched (or skipped) */
	uint64_t proposed_this_run;
	size_t seeds_done;
	int exhausted; /* no mutator has anything left */
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
	size_t mutators_started;
	/* hardware evidence, taken by the lanes in this order (search_evidence.h) */
	struct ks_evidence_queue evidence[N_EVIDENCE];
	/*
	 * Every binary built (build.h's fingerprint) and who holds its result:
	 * the record's id once inserted, before that the job evaluating it.
	 * Under lock; binaries of earlier runs come from the archive's state.
	 */
	struct binary {
		uint64_t id;	 /* its record; 0: not inserted yet */
		struct job *job; /* the job that evaluates it, while id is 0 */
	} * binaries;
	size_t n_binaries, alloc_binaries;
	/* fingerprint (KS_SHA256_LEN bytes) -> index into binaries; its i-th entry is binaries[i]'s */
	struct ks_map binary_index;
};

void ks_mutator_free(const struct ks_mutator *m)
{
	if (m && m->free)
		m->free(m->ctx);
}

/* ---- families ---- */

int ks_families_load(const struct ks_op *op, struct ks_family **families, size_t *n, struct ks_error *err)
{
	*families = ks_calloc(op->n_seeds ? op->n_seeds : 1, sizeof(**families));
	*n = 0;
	for (size_t i = 0; i < op->n_seeds; i++) {
		struct ks_family *f = &(*families)[*n];
		const char *base = ks_basename(op->seed_paths[i]);
		size_t len = strlen(base);

		/* a failed load leaves f->cand empty; a loaded one is ours until (*n)++ */
		if (ks_candidate_load(op->seed_paths[i], &f->cand, err) < 0)
			goto fail;
		if (ks_candidate_bind(&f->cand, op, err) < 0) {
			ks_candidate_release(&f->cand);
			goto fail;
		}
		if (f->cand.n_params > KS_MAX_PARAMS) {
			ks_fail(err, "%s: %zu params; the search handles at most %d", op->seed_paths[i],
				f->cand.n_params, KS_MAX_PARAMS);
			ks_candidate_release(&f->cand);
			goto fail;
		}
		f->name = ks_strndup(base, len > 3 ? len - 3 : len);
		(*n)++;
	}
	if (*n)
		return 0;
	ks_fail(err, "operator %s has no seeds (%s/seeds/*.cu): nothing to start from", op->key, op->dir);
fail:
	ks_families_free(*families, *n);
	*families = NULL;
	*n = 0;
	return -1;
}

void ks_family_release(struct ks_family *family)
{
	free(family->name);
	free(family->broken);
	ks_candidate_release(&family->cand);
}

void ks_families_free(struct ks_family *families, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ks_family_release(&families[i]);
	free(families);
}

/* Add a family (owned when it is not a seed); returns its index. */
static size_t add_family(struct search *s, struct ks_family *family, int ok)
{
	KS_ALLOC_GROW(s->fams, s->n_fams + 1, s->alloc_fams);
	s->fams[s->n_fams] = (struct family_slot){ family, ok };
	return s->n_fams++;
}

static json_t *params_json(const struct ks_family *f, const int64_t *params)
{
	json_t *obj = json_object();

	for (size_t i = 0; i < f->cand.n_params; i++)
		json_object_set_new(obj, f->cand.params[i].name, json_integer(params[i]));
	return obj;
}

/* Params of a record, in the family's order; -1 when they do not fit the family. */
static int params_from_json(const struct ks_family *f, const json_t *obj, int64_t *params)
{
	if (json_object_size(obj) != f->cand.n_params)
		return -1;
	for (size_t i = 0; i < f->cand.n_params; i++) {
		json_t *v = json_object_get(obj, f->cand.params[i].name);

		if (!json_is_integer(v))
			return -1;
		params[i] = json_integer_value(v);
	}
	return 0;
}

/* A family for source; an unusable ksearch block makes a broken one (its candidates are contract errors). */
static struct ks_family *family_new(struct search *s, const char *name, const char *source, uint64_t strategy)
{
	struct ks_family *f = ks_calloc(1, sizeof(*f));
	struct ks_error why;

	f->name = ks_strdup(name);
	f->strategy = strategy;
	ks_error_clear(&why);
	if (ks_candidate_parse(name, source, &f->cand, &why) < 0 ||
	    ks_candidate_bind(&f->cand, s->op, &why) < 0 ||
	    (f->cand.n_params > KS_MAX_PARAMS &&
	     ks_fail(&why, "%s: %zu params; the search handles at most %d", name, f->cand.n_params,
		     KS_MAX_PARAMS))) {
		ks_candidate_release(&f->cand);
		memset(&f->cand, 0, sizeof(f->cand));
		f->cand.path = ks_strdup(name);
		f->cand.source = ks_strdup(source);
		f->broken = ks_strdup(why.msg[0] ? why.msg : "the ksearch block cannot be used");
	}
	return f;
}

/* The families mutators added in earlier runs (archive state "search/family/N"): a resumed search needs them.
 */
static int load_families(struct search *s, struct ks_error *err)
{
	for (size_t i = 0;; i++) {
		char key[64];
		void *data = NULL;
		size_t size = 0;
		json_t *obj;
		const char *name, *source;
		json_int_t strategy = 0;

		snprintf(key, sizeof(key), "search/family/%08zu", i);
		if (ks_archive_state_get(s->ar, key, &data, &size, err) < 0)
			return -1;
		if (!data)
			return 0;
		obj = json_loadb(data, size, 0, NULL);
		free(data);
		if (!obj || json_unpack(obj, "{s:s, s:s, s?:I}", "name", &name, "source", &source, "strategy",
					&strategy)) {
			json_decref(obj);
			return ks_fail(err, "archive: saved family %zu is malformed (state %s)", i, key);
		}
		add_family(s, family_new(s, name, source, (uint64_t)strategy), 0);
		json_decref(obj);
	}
}

int ks_mutator_host_add_family(struct ks_mutator_host *h, const char *prefix, const char *source,
			       uint64_t strategy, uint64_t parent, size_t *index, int *is_new,
			       struct ks_error *err)
{
	struct search *s = h->s;
	size_t added = s->n_fams - s->n_seeds;
	char name[64], key[64];
	json_t *obj;
	char *text;
	int ret;

	*is_new = 0;
	for (size_t i = 0; i < s->n_fams; i++)
		if (!strcmp(s->fams[i].fam->cand.source, source)) {
			*index = i;
			return 0;
		}
	snprintf(name, sizeof(name), "%.40s-%zu", prefix, added + 1);
	snprintf(key, sizeof(key), "search/family/%08zu", added);
	obj = json_pack("{s:s, s:s, s:I, s:I}", "name", name, "source", source, "strategy",
			(json_int_t)strategy, "parent", (json_int_t)parent);
	if (!obj)
		return ks_fail(err, "the answer's source is not UTF-8 text");
	text = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	ret = ks_archive_state_put(s->ar, key, text, strlen(text), err);
	free(text);
	if (ret < 0)
		return -1;
	*index = add_family(s, family_new(s, name, source, strategy), 0);
	*is_new = 1;
	return 0;
}

size_t ks_mutator_host_n_families(struct ks_mutator_host *h)
{
	return h->s->n_fams;
}

const struct ks_family *ks_mutator_host_family(struct ks_mutator_host *h, size_t index)
{
	return h->s->fams[index].fam;
}

int ks_mutator_host_family_ok(struct ks_mutator_host *h, size_t index)
{
	return index < h->s->n_seeds || h->s->fams[index].ok;
}

/* ---- jobs ---- */

static struct job *job_new(void)
{
	struct job *job = ks_calloc(1, sizeof(*job));

	ks_result_init(&job->result);
	job->binary = -1;
	return job;
}

/* ---- binaries (under s->lock, or before the threads start) ---- */

/* The entry of key: found (*added 0) or a new one with id 0 and no job (*added 1). */
static size_t binary_entry(struct search *s, const unsigned char *key, int *added)
{
	uint64_t *index = ks_map_put(&s->binary_index, key, KS_SHA256_LEN, added);

	if (*added) {
		KS_ALLOC_GROW(s->binaries, s->n_binaries + 1, s->alloc_binaries);
		memset(&s->binaries[s->n_binaries], 0, sizeof(s->binaries[0]));
		*index = s->n_binaries++;
	}
	return (size_t)*index;
}

#define BINARY_STATE "search/binary/"

static int load_binary(const char *key, const void *data, size_t size, void *ctx)
{
	struct search *s = ctx;
	unsigned char bytes[KS_SHA256_LEN];
	int added;

	/* an entry that does not read is skipped: at worst its binary is evaluated again */
	if (size == 8 && !ks_unhex_sha256(key + strlen(BINARY_STATE), bytes)) {
		uint64_t id = 0;

		for (size_t i = 0; i < 8; i++)
			id = id << 8 | ((const unsigned char *)data)[i];
		size_t at = binary_entry(s, bytes, &added); /* it may move s->binaries */

		s->binaries[at].id = id;
	}
	return 0;
}

/*
 * A build that passed: is its binary new (it goes on to a lane) or one the
 * search has seen (it is recorded with that one's result)?  Under lock.
 */
static int binary_seen(struct search *s, struct job *job)
{
	unsigned char key[KS_SHA256_LEN];
	int added;

	if (ks_unhex_sha256(job->result.binary, key) < 0)
		return 0; /* a backend without fingerprints: every build is evaluated */
	job->binary = (long)binary_entry(s, key, &added);
	if (added) {
		s->binaries[job->binary].job = job;
		return 0;
	}
	job->duplicate = 1;
	return 1;
}

static void job_free(struct job *job)
{
	ks_result_release(&job->result);
	json_decref(job->p.llm);
	free(job);
}

/* ---- queues (under s->lock) ---- */

static void queue_push(struct queue *q, struct job *job)
{
	if (q->count == q->cap) {
		struct job **items = ks_calloc(q->cap ? 2 * q->cap : 16, sizeof(*items));

		for (size_t i = 0; i < q->count; i++)
			items[i] = q->items[(q->head + i) % q->cap];
		free(q->items);
		q->items = items;
		q->head = 0;
		q->cap = q->cap ? 2 * q->cap : 16;
	}
	q->items[(q->head + q->count++) % q->cap] = job;
}

static struct job *queue_pop(struct queue *q)
{
	struct job *job;

	if (!q->count)
		return NULL;
	job = q->items[q->head];
	q->head = (q->head + 1) % q->cap;
	q->count--;
	return job;
}

/* Take the item at index i (from the head) out of q, the others keeping their order. */
static struct job *queue_remove(struct queue *q, size_t i)
{
	struct job *job = q->items[(q->head + i) % q->cap];

	for (; i > 0; i--)
		q->items[(q->head + i) % q->cap] = q->items[(q->head + i - 1) % q->cap];
	q->head = (q->head + 1) % q->cap;
	q->count--;
	return job;
}

/*
 * Under lock: the build a free lane times next, the oldest, or with the
 * backend's backlog the one whose GPUs wait on the fewest evaluations
 * (the oldest among equals).  Which lane times which build changes no
 * result: they are inserted in proposal order.
 */
static struct job *eval_take(struct search *s)
{
	struct queue *q = &s->eval_q;
	size_t best = 0;
	double best_load = 0;

	if (!q->count)
		return NULL;
	for (size_t i = 0; s->backend->backlog && i < q->count; i++) {
		const struct job *job = q->items[(q->head + i) % q->cap];
		double load = job->built ? s->backend->backlog(s->backend->ctx, job->built) : 0;

		if (i == 0 || load < best_load) {
			best = i;
			best_load = load;
		}
	}
	return queue_remove(q, best);
}

/* ---- threads ---- */

/* Under lock: does a job of hardware evidence wait for a build (a confirmation's: search_evidence.h)? */
static int evidence_unbuilt(const struct search *s)
{
	for (int i = 0; i < N_EVIDENCE; i++)
		if (!s->evidence[i].off && s->evidence[i].n_unbuilt)
			return 1;
	return 0;
}

/* A build thread: evidence job ej of queue q built ahead, so that its lane does not compile. */
static void build_evidence(struct search *s, struct ks_evidence_queue *q, struct ks_evidence_job *ej)
{
	struct ks_result res;
	struct ks_error err;
	void *built = NULL;

	ks_result_init(&res);
	if (s->backend->build(s->backend->ctx, ej->fam, ej->params, &built, &res, &err) < 0)
		built = NULL; /* the lane builds it again and says what failed */
	ks_result_release(&res);
	ej->built = built;
	ks_evidence_queue_built(q, ej);
}

static void *build_thread(void *arg)
{
	struct search *s = arg;

	for (;;) {
		struct job *job;
		struct ks_evidence_job *ej = NULL;
		struct ks_evidence_queue *eq = NULL;
		void *duplicate = NULL;
		double t0;
		int rc;

		pthread_mutex_lock(&s->lock);
		/* once the search shuts down, only a confirmation is built (the run's last ones) */
		while (!s->builders_done && !evidence_unbuilt(s) && (s->shutdown || !s->build_q.count))
			pthread_cond_wait(&s->cond, &s->lock);
		if (s->builders_done) {
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
		/* a confirmation first: few, and a lane runs none before it is built */
		for (int i = 0; !ej && i < N_EVIDENCE; i++)
			ej = ks_evidence_queue_take_unbuilt(eq = &s->evidence[i]);
		job = ej || s->shutdown ? NULL : queue_pop(&s->build_q);
		pthread_mutex_unlock(&s->lock);
		if (ej) {
			build_evidence(s, eq, ej);
			continue;
		}
		if (!job)
			continue; /* not reached: the wait ends with a job to take, or with builders_done */
		t0 = ks_now_s();
		if (job->fam->broken) {
			/* an LLM's source whose ksearch block cannot be used: nothing to build */
			job->built = NULL;
			ks_result_fail(&job->result, KS_VERDICT_CONTRACT_ERROR, "%s", job->fam->broken);
			rc = 0;
		} else {
			rc = s->backend->build(s->backend->ctx, job->fam, job->p.params, &job->built,
					       &job->result, &job->err);
		}
		job->compile_s = ks_now_s() - t0;
		pthread_mutex_lock(&s->lock);
		if (rc < 0) {
			job->failed = 1;
			job->stage = JOB_DONE;
		} else if (job->built && binary_seen(s, job)) {
			/* the same binary as another job's: that one's evaluation is this one's */
			duplicate = job->built;
			job->built = NULL;
			job->stage = JOB_DONE;
		} else if (job->built) {
			job->stage = JOB_EVAL;
			queue_push(&s->eval_q, job);
		} else {
			job->stage = JOB_DONE;
		}
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		if (duplicate && s->backend->discard)
			s->backend->discard(s->backend->ctx, duplicate);
	}
}

struct lane {
	struct search *s;
	int index;
	pthread_t thread;
};

/* Under lock: the GPU time spent on everything but q's jobs (what q's share is of, with them). */
static double gpu_besides(const struct search *s, const struct ks_evidence_queue *q)
{
	double t = s->gpu_busy_s;

	for (int i = 0; i < N_EVIDENCE; i++)
		if (&s->evidence[i] != q)
			t += s->evidence[i].budget.spent_s;
	return t;
}

/* Under lock: may a lane start a check or a profile now? */
static int evidence_ready(struct search *s)
{
	if (s->winding_down)
		return 0;
	for (int i = 0; i < N_EVIDENCE; i++)
		if (ks_evidence_queue_ready(&s->evidence[i], gpu_besides(s, &s->evidence[i])))
			return 1;
	return 0;
}

static void *lane_thread(void *arg)
{
	struct lane *lane = arg;
	struct search *s = lane->s;

	for (;;) {
		struct job *job;
		double t0;
		int rc;

		struct ks_evidence_job *ej = NULL;
		struct ks_evidence_queue *eq = NULL;

		pthread_mutex_lock(&s->lock);
		while (!s->shutdown && !s->eval_q.count && !evidence_ready(s))
			pthread_cond_wait(&s->cond, &s->lock);
		/* between two evaluations the GPU is this lane's: a check or a profile goes first */
		for (int i = 0; !s->shutdown && !s->winding_down && !ej && i < N_EVIDENCE; i++)
			ej = ks_evidence_queue_take(eq = &s->evidence[i], gpu_besides(s, &s->evidence[i]));
		job = ej ? NULL : eval_take(s);
		pthread_mutex_unlock(&s->lock);
		if (ej) {
			ks_evidence_queue_run(eq, lane->index, ej);
			continue;
		}
		if (!job)
			return NULL;
		t0 = ks_now_s();
		rc = s->backend->evaluate(s->backend->ctx, lane->index, job->fam, job->p.params, job->built,
					  &job->result, &job->err);
		job->built = NULL;
		job->eval_s = ks_now_s() - t0;
		job->evaluated_t = ks_now_s() - s->t_start;
		pthread_mutex_lock(&s->lock);
		/*
		 * the GPU's time is the evaluator's (its worker, from the job sent to the answer), which
		 * a rank of an MPI job reports too; the lane's own view adds a round trip and the wait for
		 * that rank's GPU
		 */
		s->gpu_busy_s += job->result.timing.wall_s > 0 ? job->result.timing.wall_s : job->eval_s;
		job->failed = rc < 0;
		job->stage = JOB_DONE;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
	}
}

/* ---- parents ---- */

static void remember_family(struct search *s, uint64_t id, int fam)
{
	KS_ALLOC_GROW(s->fam_cache, s->n_fam_cache + 1, s->alloc_fam_cache);
	s->fam_cache[s->n_fam_cache++] = (struct fam_cache_entry){ id, fam };
}

/* An archive read of the host API failed (err): keep the first for propose(). */
static void host_failed(struct search *s, const struct ks_error *err, const char *what)
{
	if (s->host_failed)
		return;
	s->host_failed = 1;
	s->host_err = *err;
	ks_error_prefix(&s->host_err, "%s", what);
}

/*
 * The family of an archived candidate, or -1 (a source no family has,
 * e.g. a seed that has since changed).  A miss is cached too: families
 * that appear later are never the family of an older candidate.
 */
static int family_of(struct search *s, uint64_t id)
{
	struct ks_record rec;
	char *source = NULL;
	struct ks_error err;
	int fam = -1;

	for (size_t i = 0; i < s->n_fam_cache; i++)
		if (s->fam_cache[i].id == id)
			return s->fam_cache[i].fam;
	ks_record_init(&rec);
	if (ks_archive_get_record(s->ar, id, &rec, &source, &err) < 0) {
		host_failed(s, &err, "reading a parent's record");
		return -1; /* not cached: the record may be there */
	}
	if (rec.id && source) {
		for (size_t f = 0; f < s->n_fams; f++) {
			const struct ks_family *family = s->fams[f].fam;
			int64_t params[KS_MAX_PARAMS];

			if (!family->broken && !strcmp(source, family->cand.source) &&
			    params_from_json(family, rec.params, params) == 0) {
				fam = (int)f;
				if (ks_record_ok(&rec))
					s->fams[f].ok = 1;
				break;
			}
		}
	}
	ks_record_release(&rec);
	free(source);
	remember_family(s, id, fam);
	return fam;
}

int ks_mutator_host_family_of(struct ks_mutator_host *h, uint64_t id)
{
	return family_of(h->s, id);
}

int ks_mutator_host_params_of(struct ks_mutator_host *h, uint64_t id, size_t fam, int64_t *params)
{
	struct ks_record rec;
	struct ks_error err;
	int ret = -1;

	ks_record_init(&rec);
	if (ks_archive_get_record(h->s->ar, id, &rec, NULL, &err) < 0)
		host_failed(h->s, &err, "reading a parent's params");
	else if (rec.id)
		ret = params_from_json(h->s->fams[fam].fam, rec.params, params);
	ks_record_release(&rec);
	return ret;
}

/* Was (family, params) evaluated already, or is it in flight? */
static int already_seen(struct search *s, size_t fam, const int64_t *params)
{
	const struct ks_family *f = s->fams[fam].fam;
	json_t *pj;
	uint64_t id = 0;
	struct ks_error err;

	for (uint64_t seq = s->next_insert; seq < s->next_seq; seq++) {
		const struct job *job = s->ring[seq % s->depth];

		if (job && job->p.family == fam &&
		    !memcmp(job->p.params, params, f->cand.n_params * sizeof(*params)))
			return 1;
	}
	pj = params_json(f, params);
	if (ks_archive_lookup_candidate(s->ar, f->cand.source, pj, &id, &err) < 0) {
		host_failed(s, &err, "looking up a candidate");
		id = 1; /* seen: propose nothing from a lookup that failed */
	}
	json_decref(pj);
	return id != 0;
}

int ks_mutator_host_seen(struct ks_mutator_host *h, size_t family, const int64_t *params)
{
	return already_seen(h->s, family, params);
}

static size_t pick_weighted(struct ks_pcg32 *rng, const struct ks_parents *pk)
{
	double total = 0, r;

	for (size_t i = 0; i < pk->n; i++)
		if (pk->family[i] >= 0)
			total += pk->elites[i].fitness + 1e-3;
	r = ks_pcg32_double(rng) * total;
	for (size_t i = 0; i < pk->n; i++) {
		if (pk->family[i] < 0)
			continue;
		r -= pk->elites[i].fitness + 1e-3;
		if (r <= 0)
			return i;
	}
	for (size_t i = pk->n; i-- > 0;)
		if (pk->family[i] >= 0)
			return i;
	return 0;
}

static size_t pick_uniform(struct ks_pcg32 *rng, const struct ks_parents *pk)
{
	uint32_t k = ks_pcg32_bounded(rng, (uint32_t)pk->usable);

	for (size_t i = 0; i < pk->n; i++)
		if (pk->family[i] >= 0 && k-- == 0)
			return i;
	return 0;
}

void ks_mutator_host_parents(struct ks_mutator_host *h, struct ks_parents *pk)
{
	struct ks_error err;

	memset(pk, 0, sizeof(*pk));
	if (ks_archive_elites(h->s->ar, &pk->elites, &pk->n, &err) < 0) {
		host_failed(h->s, &err, "reading the elites");
		pk->n = 0;
	}
	pk->family = ks_calloc(pk->n ? pk->n : 1, sizeof(*pk->family));
	for (size_t i = 0; i < pk->n; i++) {
		pk->family[i] = family_of(h->s, pk->elites[i].id);
		pk->usable += pk->family[i] >= 0;
	}
}

void ks_parents_release(struct ks_parents *pk)
{
	free(pk->elites);
	free(pk->family);
	memset(pk, 0, sizeof(*pk));
}

size_t ks_mutator_host_pick_parent(struct ks_mutator_host *h, struct ks_pcg32 *rng,
				   const struct ks_parents *pk)
{
	struct search *s = h->s;
	const struct ks_search_config *cfg = s->cfg;
	double sum = cfg->explore + cfg->exploit + cfg->recent;
	double r = ks_pcg32_double(rng) * (sum > 0 ? sum : 1);

	if (r < cfg->explore || sum <= 0)
		return pick_uniform(rng, pk);
	if (r < cfg->explore + cfg->exploit || !s->n_recent)
		return pick_weighted(rng, pk);
	{
		uint64_t cell = s->recent[ks_pcg32_bounded(rng, (uint32_t)s->n_recent)];

		for (size_t i = 0; i < pk->n; i++)
			if (pk->elites[i].cell == cell && pk->family[i] >= 0)
				return i;
	}
	return pick_weighted(rng, pk);
}

/* ---- the rest of what a mutator may ask ---- */

struct ks_archive *ks_mutator_host_archive(struct ks_mutator_host *h)
{
	return h->s->ar;
}

const struct ks_op *ks_mutator_host_op(struct ks_mutator_host *h)
{
	return h->s->op;
}

double ks_mutator_host_climb(struct ks_mutator_host *h)
{
	double climb = h->s->cfg->climb;

	return climb > 0 ? (climb < 1 ? climb : 1) : 0;
}

uint64_t ks_mutator_host_seed(struct ks_mutator_host *h)
{

	return h->s->cfg->seed;
}

struct ks_pcg32 *ks_mutator_host_rng(struct ks_mutator_host *h)
{
	return &h->s->rng;
}

size_t ks_mutator_host_depth(struct ks_mutator_host *h)
{
	return h->s->depth;
}

void ks_mutator_host_wake(struct ks_mutator_host *h)
{
	h->s->exhausted = 0;
}

static void search_log(struct search *s, json_t *event)
{
	if (s->cfg->log) {
		char *text;

		/* NULL: a json_pack() whose format and arguments disagree (a bug, said rather than lost) */
		if (!event)
			event = json_pack("{s:s}", "event", "log_error");
		json_object_set_new(event, "t", json_real(ks_now_s() - s->t_start));
		text = json_dumps(event, JSON_COMPACT);
		fprintf(s->cfg->log, "%s\n", text ? text : "{\"event\":\"log_error\"}");
		fflush(s->cfg->log);
		free(text);
	}
	json_decref(event);
}

void ks_mutator_host_log(struct ks_mutator_host *h, json_t *event)
{
	search_log(h->s, event);
}

void ks_mutator_host_say(struct ks_mutator_host *h, const char *fmt, ...)
{
	const struct ks_search_config *cfg = h->s->cfg;
	va_list ap;

	if (!cfg->out)
		return;
	/* over the status line a terminal shows */
	fputs(cfg->status_tty ? "\r\033[K" : "", cfg->out);
	va_start(ap, fmt);
	vfprintf(cfg->out, fmt, ap);
	va_end(ap);
	fputc('\n', cfg->out);
	fflush(cfg->out);
}

/*
 * Records of another evaluator generation (result.h) in the archive: the
 * oldest generation that ever wrote to it is its state "search/evaluator"
 * (an archive from before the key held generation 1 if it holds records).
 * A mix is said at every start, as it stays true, with a log event.
 */
static int evaluator_check(struct search *s, uint64_t candidates, struct ks_error *err)
{
	int now = s->backend->evaluator, oldest = 0;
	void *data = NULL;
	size_t size = 0;
	char text[16];

	if (now <= 0)
		return 0;
	if (ks_archive_state_get(s->ar, "search/evaluator", &data, &size, err) < 0)
		return -1;
	if (data) {
		snprintf(text, sizeof(text), "%.*s", (int)(size < sizeof(text) - 1 ? size : sizeof(text) - 1),
			 (const char *)data);
		oldest = atoi(text);
		free(data);
	} else if (candidates > 0) {
		oldest = 1;
	}
	if (oldest > 0 && oldest != now) {
		if (s->cfg->out)
			ks_mutator_host_say(
				&s->host,
				"note: this archive holds records of evaluator %d and this ksearch is "
				"evaluator %d%s; their times and fitness may not compare (`ksearch "
				"evolve --fresh` starts a new archive and keeps the old one).",
				oldest, now,
				oldest < 5 && now >= 5
					? " (evaluator 5's skewed split gives its longest request a fixed "
					  "share of the tokens, the p90 of one random draw's)"
				: oldest < 4 && now >= 4
					? " (evaluator 4 rates each workload with request lengths by its "
					  "slowest length split, where 3 took the median of three)"
				: oldest < 3 && now >= 3
					? " (evaluator 3 times each workload with request lengths on three "
					  "secret length splits and the reference on canonical ones, so "
					  "fitness moved)"
				: oldest < 2 && now >= 2
					? " (evaluator 2 runs every kernel in the largest shared-memory "
					  "carveout, so kernels that rely on L1 run slower than they were "
					  "timed before)"
					: "");
		search_log(s, json_pack("{s:s, s:i, s:i}", "event", "evaluator_mix", "oldest", oldest, "now",
					now));
	}
	if (oldest > 0 && oldest <= now)
		return 0;
	snprintf(text, sizeof(text), "%d", oldest > 0 && oldest < now ? oldest : now);

	return ks_archive_state_put(s->ar, "search/evaluator", text, strlen(text), err);
}

static int by_id(const void *a, const void *b)
{
	uint64_t x = ((const struct ks_archive_elite *)a)->id, y = ((const struct ks_archive_elite *)b)->id;

	return (x > y) - (x < y);
}

/* Is kind i off for the run (no tool, share 0, or stopped)? */
static int evidence_off(struct search *s, int i)
{
	int off;

	pthread_mutex_lock(&s->lock);
	off = s->evidence[i].off;
	pthread_mutex_unlock(&s->lock);
	return off;
}

/* Queue rec (an ok one of a known family) for kind i, unless it has its evidence (kind's) already. */
static void queue_unless(struct search *s, int i, const struct ks_record *rec)
{
	int64_t params[KS_MAX_PARAMS];
	const json_t *evidence = i == PROFILES	? rec->profile
				 : i == CONFIRM ? rec->confirmation
						: rec->sanitizer;
	int fam;

	if (rec->id && ks_record_ok(rec) && !evidence && (fam = family_of(s, rec->id)) >= 0 &&
	    params_from_json(s->fams[fam].fam, rec->params, params) == 0)
		ks_evidence_queue_add(&s->evidence[i], s->fams[fam].fam, params, rec->id);
}

/*
 * The grid's elites that have no profile yet (an earlier run stopped with
 * them waiting, or ran without profiling) wait for one as this run's new
 * elites do: queued oldest first, so the newest are taken first and the
 * oldest dropped when the queue is full.
 */
static int queue_unprofiled(struct search *s, struct ks_error *err)
{
	struct ks_archive_elite *elites = NULL;
	struct ks_record rec;
	size_t n = 0;

	if (evidence_off(s, PROFILES))
		return 0;
	if (ks_archive_elites(s->ar, &elites, &n, err) < 0)
		return -1;
	KS_QSORT(elites, n, by_id);
	ks_record_init(&rec);
	for (size_t i = 0; i < n; i++) {
		if (ks_archive_get_record(s->ar, elites[i].id, &rec, NULL, err) < 0) {
			free(elites);
			return -1;
		}
		queue_unless(s, PROFILES, &rec);
	}
	ks_record_release(&rec);
	free(elites);
	return 0;
}

/*
 * The best and the workloads' bests that have no sanitizer check (an
 * earlier run stopped with them waiting or ran without checks, or a
 * failed check just made them the bests) wait for one; the best is taken
 * first.
 */
static int queue_unsanitized(struct search *s, struct ks_error *err)
{
	json_t *bests = NULL, *entry;
	struct ks_record best, rec;
	const char *workload;
	int ret = -1;

	if (evidence_off(s, SANITIZER))
		return 0;
	ks_record_init(&best);
	ks_record_init(&rec);
	if (ks_archive_workload_bests(s->ar, &bests, err) < 0 ||
	    ks_archive_best_record(s->ar, &best, NULL, err) < 0)
		goto cleanup;
	json_object_foreach(bests, workload, entry)
	{
		uint64_t id = (uint64_t)json_integer_value(json_object_get(entry, "id"));

		if (best.id && id == best.id)
			continue;
		if (ks_archive_get_record(s->ar, id, &rec, NULL, err) < 0)
			goto cleanup;
		queue_unless(s, SANITIZER, &rec);
	}
	queue_unless(s, SANITIZER, &best);
	ret = 0;
cleanup:
	ks_record_release(&best);
	ks_record_release(&rec);
	json_decref(bests);
	return ret;
}

/*
 * Is id, timed as res says, the best of a workload it was timed on
 * several length splits of?  Only there a second draw can tell luck from
 * speed (search_confirm.c): a workload of one request (or one shape) is the
 * same workload on every draw.
 */
static int best_of_a_split_workload(const json_t *bests, uint64_t id, const struct ks_result *res)
{
	for (size_t i = 0; i < res->n_workloads; i++) {
		const json_t *entry = json_object_get(bests, res->workloads[i].id);

		if (res->workloads[i].n_splits > 1 && entry &&
		    (uint64_t)json_integer_value(json_object_get(entry, "id")) == id)
			return 1;
	}
	return 0;
}

/* Record ids, each once. */
struct id_set {
	uint64_t *ids;
	size_t n, alloc;
};

static int id_set_has(const struct id_set *set, uint64_t id)
{
	for (size_t i = 0; i < set->n; i++)
		if (set->ids[i] == id)
			return 1;
	return 0;
}

/*
 * The workloads' bests that were never confirmed (timed again on fresh
 * splits: search_confirm.c), because an earlier run stopped with them
 * waiting or a confirmation just made them the bests, wait for one; or,
 * with set, are gathered there (each record once) and not queued.
 */
static int unconfirmed_bests(struct search *s, struct id_set *set, struct ks_error *err)
{
	json_t *bests = NULL, *entry;
	struct ks_record rec;
	const char *workload;
	int ret = -1;

	if (evidence_off(s, CONFIRM))
		return 0;
	ks_record_init(&rec);
	if (ks_archive_workload_bests(s->ar, &bests, err) < 0)
		goto cleanup;
	json_object_foreach(bests, workload, entry)
	{
		uint64_t id = (uint64_t)json_integer_value(json_object_get(entry, "id"));

		if (ks_archive_get_record(s->ar, id, &rec, NULL, err) < 0)
			goto cleanup;
		if (!best_of_a_split_workload(bests, id, &rec.result))
			continue;
		if (!set) {
			queue_unless(s, CONFIRM, &rec);
		} else if (ks_record_ok(&rec) && !rec.confirmation && !id_set_has(set, id)) {
			KS_ALLOC_GROW(set->ids, set->n + 1, set->alloc);
			set->ids[set->n++] = id;
		}
	}
	ret = 0;
cleanup:
	ks_record_release(&rec);
	json_decref(bests);
	return ret;
}

/*
 * Is record id (ok, just inserted, timed as res says) the archive's best
 * (*best), or a workload's best now (*workload_best: 1, or 2 when of one it
 * was timed on several splits of)?
 */
static int best_of(struct search *s, uint64_t id, const struct ks_result *res, int *best, int *workload_best,
		   struct ks_error *err)
{
	struct ks_archive_metrics m;
	json_t *bests = NULL, *entry;
	const char *workload;

	*best = *workload_best = 0;
	if (ks_archive_metrics(s->ar, &m, err) < 0)
		return -1;
	*best = m.best_id == id;
	if (ks_archive_workload_bests(s->ar, &bests, err) < 0)
		return -1;
	json_object_foreach(bests, workload, entry)
	{
		if ((uint64_t)json_integer_value(json_object_get(entry, "id")) == id)
			*workload_best = 1;
	}
	if (*workload_best && best_of_a_split_workload(bests, id, res))
		*workload_best = 2;
	json_decref(bests);
	return 0;
}

/* ---- proposals ---- */

/* The mutator that proposes with this mutation name, or NULL (seeds). */
static const struct ks_mutator *owner_of(const struct search *s, const char *mutation)
{
	for (size_t i = 0; i < s->cfg->n_mutators; i++) {
		const struct ks_mutator *m = s->cfg->mutators[i];

		for (size_t k = 0; m->mutations && m->mutations[k]; k++)
			if (!strcmp(m->mutations[k], mutation))
				return m;
	}
	return NULL;
}

/*
 * Make the next proposal into job: a seed, else what the first mutator
 * that has something proposes.  Returns 0, 1 when nothing is left to
 * propose, -1 when a mutator failed.
 */
static int propose_next_of(struct search *s, struct job *job, struct ks_error *err)
{
	memset(&job->p, 0, sizeof(job->p));
	while (s->seeds_done < s->n_seeds) {
		size_t fam = s->seeds_done++;

		ks_params_first(&s->fams[fam].fam->cand, job->p.params);
		if (already_seen(s, fam, job->p.params))
			continue;
		job->p.family = fam;
		snprintf(job->p.mutation, sizeof(job->p.mutation), "seed");
		return 0;
	}
	for (size_t i = 0; i < s->cfg->n_mutators; i++) {
		const struct ks_mutator *m = s->cfg->mutators[i];
		int rc;

		memset(&job->p, 0, sizeof(job->p));
		rc = m->propose(m->ctx, &s->host, &job->p, err);
		if (rc == 0 && (job->p.family >= s->n_fams || owner_of(s, job->p.mutation) != m)) {
			json_decref(job->p.llm);
			job->p.llm = NULL;
			rc = ks_fail(err, "proposed family %zu of %zu with mutation '%s', not one of its own",
				     job->p.family, s->n_fams, job->p.mutation);
		}
		if (rc <= 0) {
			if (rc < 0)
				ks_error_prefix(err, "the %s mutator", m->name);
			return rc;
		}
	}
	return 1;
}

/*
 * propose_next_of(), and -1 when an archive read of the host API failed
 * on the way (the mutators were answered "nothing there", host_failed()).
 */
static int propose(struct search *s, struct job *job, struct ks_error *err)
{
	int rc = propose_next_of(s, job, err);

	if (!s->host_failed)
		return rc;
	if (rc == 0) {
		json_decref(job->p.llm);
		job->p.llm = NULL;
	}
	*err = s->host_err;
	return -1;
}

/* ---- persistence of proposals ---- */

static json_t *job_json(const struct search *s, const struct job *job)
{
	json_t *parents = json_array();

	for (int i = 0; i < job->p.n_parents; i++)
		json_array_append_new(parents, json_integer((json_int_t)job->p.parents[i]));
	return json_pack("{s:I, s:s, s:o, s:o, s:s, s:[s,s]}", "seq", (json_int_t)job->seq, "family",
			 s->fams[job->p.family].fam->name, "params", params_json(job->fam, job->p.params),
			 "parents", parents, "mutation", job->p.mutation, "rng", "", "");
}

/* A saved proposal's key in the archive's state: "search/proposal/" and its seq in 20 digits. */
enum { PROPOSAL_KEY = 40 };

static void proposal_key(char key[PROPOSAL_KEY], uint64_t seq)
{
	snprintf(key, PROPOSAL_KEY, "search/proposal/%020llu", (unsigned long long)seq);
}

static int save_proposal(struct search *s, const struct job *job, struct ks_error *err)
{
	char key[PROPOSAL_KEY], state[80];
	json_t *obj = job_json(s, job);
	char *text;
	int ret;

	snprintf(state, sizeof(state), "%016llx%016llx", (unsigned long long)s->rng.state,
		 (unsigned long long)s->rng.inc);
	json_object_set_new(obj, "rng", json_string(state));
	json_object_set_new(obj, "seeds_done", json_integer((json_int_t)s->seeds_done));
	if (job->p.strategy)
		json_object_set_new(obj, "strategy", json_integer((json_int_t)job->p.strategy));
	if (job->p.llm)
		json_object_set_new(obj, "llm", json_incref(job->p.llm));
	/* the parent-selection memory too, so a resumed search chooses alike */
	{
		json_t *recent = json_array();

		for (size_t i = 0; i < s->n_recent; i++)
			json_array_append_new(recent, json_integer((json_int_t)s->recent[i]));
		json_object_set_new(obj, "recent", recent);
		json_object_set_new(obj, "improvements", json_integer((json_int_t)s->improvements));
	}
	text = json_dumps(obj, JSON_COMPACT);
	proposal_key(key, job->seq);
	ret = ks_archive_state_put(s->ar, key, text, strlen(text), err);
	free(text);
	json_decref(obj);
	return ret;
}

static int load_proposal(struct search *s, uint64_t seq, struct job *job, int *found, struct ks_error *err)
{
	char key[PROPOSAL_KEY];
	void *data = NULL;
	size_t size = 0;
	json_t *obj;
	const char *family, *mutation, *rng;
	json_t *params, *parents;
	json_int_t seeds_done = 0;

	*found = 0;
	proposal_key(key, seq);
	if (ks_archive_state_get(s->ar, key, &data, &size, err) < 0)
		return -1;
	if (!data)
		return 0;
	obj = json_loadb(data, size, 0, NULL);
	free(data);
	if (!obj ||
	    json_unpack(obj, "{s:s, s:o, s:o, s:s, s:s, s:I}", "family", &family, "params", &params,
			"parents", &parents, "mutation", &mutation, "rng", &rng, "seeds_done", &seeds_done)) {
		json_decref(obj);
		return ks_fail(err, "archive: saved proposal %llu is malformed", (unsigned long long)seq);
	}
	memset(job, 0, sizeof(*job));
	job->binary = -1;
	job->seq = seq;

	job->p.family = SIZE_MAX;
	for (size_t f = 0; f < s->n_fams; f++)
		if (!strcmp(s->fams[f].fam->name, family))
			job->p.family = f;
	if (job->p.family != SIZE_MAX)
		job->fam = s->fams[job->p.family].fam;
	if (job->p.family == SIZE_MAX || params_from_json(job->fam, params, job->p.params) < 0) {
		json_decref(obj);
		return ks_fail(
			err,
			"archive: saved proposal %llu is for family '%s', which the seeds no longer have "
			"in that form; start a new archive with --fresh",
			(unsigned long long)seq, family);
	}
	for (size_t i = 0; i < json_array_size(parents) && i < 2; i++)
		job->p.parents[job->p.n_parents++] = (uint64_t)json_integer_value(json_array_get(parents, i));
	snprintf(job->p.mutation, sizeof(job->p.mutation), "%s", mutation);
	job->p.strategy = (uint64_t)json_integer_value(json_object_get(obj, "strategy"));
	if (json_is_object(json_object_get(obj, "llm")))
		job->p.llm = json_incref(json_object_get(obj, "llm"));
	if (strlen(rng) == 32) {
		char half[17];

		memcpy(half, rng, 16);
		half[16] = '\0';
		s->rng.state = strtoull(half, NULL, 16);
		s->rng.inc = strtoull(rng + 16, NULL, 16);
	}
	s->seeds_done = (size_t)seeds_done;
	{
		json_t *recent = json_object_get(obj, "recent");

		s->n_recent = 0;
		for (size_t i = 0; i < json_array_size(recent) && i < RECENT; i++)
			s->recent[s->n_recent++] = (uint64_t)json_integer_value(json_array_get(recent, i));
		s->improvements = (uint64_t)json_integer_value(json_object_get(obj, "improvements"));
	}
	json_decref(obj);
	*found = 1;
	return 0;
}

static int save_counter(struct search *s, const char *key, uint64_t value, struct ks_error *err)
{
	char text[32];

	snprintf(text, sizeof(text), "%llu", (unsigned long long)value);
	return ks_archive_state_put(s->ar, key, text, strlen(text), err);
}

static int load_counter(struct search *s, const char *key, uint64_t *value, struct ks_error *err)
{
	void *data = NULL;
	size_t size = 0;
	char text[32];

	*value = 0;
	if (ks_archive_state_get(s->ar, key, &data, &size, err) < 0)
		return -1;
	if (data && size < sizeof(text)) {
		memcpy(text, data, size);
		text[size] = '\0';
		*value = strtoull(text, NULL, 10);
	}
	free(data);
	return 0;
}

/* ---- progress ---- */

static void status_line(struct search *s, int final)
{
	const struct ks_search_config *cfg = s->cfg;
	struct ks_archive_metrics m;
	struct ks_error err;
	double elapsed = ks_now_s() - s->t_start;
	const struct ks_search_summary *sum = s->summary;
	char fails[256] = "", extra[320] = "", dups[48] = "";
	size_t used = 0, extra_used = 0;

	if (sum->sanitizer.stored)
		extra_used = (size_t)snprintf(extra, sizeof(extra), "  sanitizer %llu checked, %llu failed",
					      (unsigned long long)sum->sanitizer.stored,
					      (unsigned long long)sum->sanitizer.changed);

	for (size_t i = 0; i < cfg->n_mutators; i++) {
		const struct ks_mutator *mu = cfg->mutators[i];

		if (mu->status && extra_used < sizeof(extra) - 1) {
			mu->status(mu->ctx, extra + extra_used, sizeof(extra) - extra_used);
			extra_used += strlen(extra + extra_used);
		}
	}
	if (!cfg->out || ks_archive_metrics(s->ar, &m, &err) < 0)
		return;
	if (sum->duplicates)
		snprintf(dups, sizeof(dups), " + %llu duplicates", (unsigned long long)sum->duplicates);

	for (int v = 1; v < KS_VERDICT_COUNT; v++)
		if (sum->by_verdict[v])
			used += (size_t)snprintf(fails + used, sizeof(fails) - used, " %s %llu",
						 ks_verdict_name((enum ks_verdict)v),
						 (unsigned long long)sum->by_verdict[v]);
	fprintf(cfg->out,
		"%s%s[%6.0fs] evals %llu (%.0f/min)%s  best %.3fx (id %llu)  coverage %llu/%llu  "
		"QD %.2f  failures:%s%s%s",
		cfg->status_tty && !final ? "\r\033[K" : "", cfg->status_tty ? "" : "ksearch evolve ",
		elapsed, (unsigned long long)sum->evaluated,
		elapsed > 0 ? 60.0 * (double)sum->evaluated / elapsed : 0.0, dups, m.best_fitness,
		(unsigned long long)m.best_id, (unsigned long long)m.cells_filled,
		(unsigned long long)m.cells, m.qd_score, used ? fails : " none", extra,
		cfg->status_tty && !final ? "" : "\n");
	fflush(cfg->out);
	s->last_status = ks_now_s();
}

/* ---- inserting results ---- */

/*
 * The record: where the candidate came from, then the result as its one
 * serialiser writes it (result.h), with the pipeline's own timings.
 */
static json_t *record_of(struct job *job)
{
	const struct ks_family *f = job->fam;
	uint64_t parents[sizeof(job->p.parents) / sizeof(job->p.parents[0])];
	struct ks_record rec;
	json_t *record;

	for (int i = 0; i < job->p.n_parents; i++)
		parents[i] = job->p.parents[i];
	/* the record's serialiser reads rec, whose fields are borrowed here: it is never released */
	ks_record_init(&rec);
	rec.family = (char *)f->name;
	rec.path = (char *)f->cand.path;
	rec.params = params_json(f, job->p.params);
	rec.parents = parents;
	rec.n_parents = (size_t)job->p.n_parents;
	rec.mutation = (char *)job->p.mutation;
	rec.seq = (int64_t)job->seq;
	rec.has = KS_RECORD_SEQ | (job->p.strategy ? KS_RECORD_PROMPT_ID : 0);
	rec.prompt_id = job->p.strategy;
	rec.llm = job->p.llm;
	rec.duplicate_of = job->duplicate ? job->duplicate_of : 0;
	job->result.timing.compile_s = job->compile_s;
	job->result.timing.eval_s = job->eval_s;
	rec.result = job->result;
	record = ks_record_to_json(&rec);
	json_decref(rec.params);
	return record;
}

/* A duplicate's result: the record of the first job with its binary, as measured then. */
static int take_original_result(struct search *s, struct job *job, struct ks_error *err)
{
	struct ks_record orig;

	pthread_mutex_lock(&s->lock);
	job->duplicate_of = s->binaries[job->binary].id;
	pthread_mutex_unlock(&s->lock);
	ks_record_init(&orig);
	if (ks_archive_get_record(s->ar, job->duplicate_of, &orig, NULL, err) < 0) {
		ks_error_prefix(err, "the record of #%llu, whose binary proposal %llu shares",
				(unsigned long long)job->duplicate_of, (unsigned long long)job->seq);
		return -1;
	}
	if (!orig.id)
		return ks_fail(
			err, "the record of #%llu, whose binary proposal %llu shares, is not in the archive",
			(unsigned long long)job->duplicate_of, (unsigned long long)job->seq);
	/* its result, taken whole (the record is dropped after) */
	ks_result_release(&job->result);
	job->result = orig.result;
	ks_result_init(&orig.result);
	ks_record_release(&orig);
	memset(&job->result.timing, 0, sizeof(job->result.timing)); /* this one took no GPU time */
	job->eval_s = 0;
	return 0;
}

/* The first record of a binary: later duplicates, in this run or the next, take its result. */
static int remember_binary(struct search *s, struct job *job, uint64_t id, struct ks_error *err)
{
	char key[sizeof(BINARY_STATE) + KS_SHA256_HEX_LEN];
	unsigned char value[8];
	struct binary *b;
	size_t len;

	pthread_mutex_lock(&s->lock);
	b = &s->binaries[job->binary];
	b->id = id;
	b->job = NULL;
	snprintf(key, sizeof(key), "%s", BINARY_STATE);
	ks_hex(ks_map_key(&s->binary_index, (size_t)job->binary, &len), KS_SHA256_LEN,
	       key + strlen(BINARY_STATE));
	pthread_mutex_unlock(&s->lock);
	for (int i = 0; i < 8; i++)
		value[i] = (unsigned char)(id >> (56 - 8 * i));
	return ks_archive_state_put(s->ar, key, value, sizeof(value), err);
}

/*
 * A duplicate shares its original's sanitizer check; any other new best
 * waits for one.  A new best of a workload with length splits, a duplicate
 * too, waits to be timed again (search_confirm.c).
 */
static int check_if_best(struct search *s, const struct job *job, uint64_t id, struct ks_error *err)
{
	int best, workload_best;

	if (job->duplicate && ks_evidence_sanitize_inherit(s->ar, job->duplicate_of, id, err) < 0)
		return -1;
	if (job->result.verdict != KS_VERDICT_OK || (evidence_off(s, SANITIZER) && evidence_off(s, CONFIRM)))
		return 0;
	if (best_of(s, id, &job->result, &best, &workload_best, err) < 0)
		return -1;
	if ((best || workload_best) && !job->duplicate && !evidence_off(s, SANITIZER))
		ks_evidence_queue_add(&s->evidence[SANITIZER], job->fam, job->p.params, id);
	if (workload_best == 2 && !evidence_off(s, CONFIRM))
		ks_evidence_queue_add(&s->evidence[CONFIRM], job->fam, job->p.params, id);
	return 0;
}

static int insert_result(struct search *s, struct job *job, struct ks_error *err)
{
	const struct ks_family *f = job->fam;
	const struct ks_result *result = &job->result;
	struct ks_archive_insert_result res;
	json_t *record;
	int ret;

	if (job->duplicate && take_original_result(s, job, err) < 0)
		return -1;
	record = record_of(job);
	ret = ks_archive_insert(s->ar, record, f->cand.source, &res, err);
	if (ret == 0 && job->binary >= 0 && !job->duplicate)
		ret = remember_binary(s, job, res.id, err);
	if (ret == 0) {
		remember_family(s, res.id, (int)job->p.family);
		if (res.outcome == KS_ARCHIVE_NEW_CELL || res.outcome == KS_ARCHIVE_IMPROVED) {
			s->recent[s->n_recent < RECENT ? s->n_recent++ : s->improvements % RECENT] =
				(uint64_t)res.cell;
			s->improvements++;
			ks_evidence_queue_add(&s->evidence[PROFILES], f, job->p.params, res.id);
		}
		ret = check_if_best(s, job, res.id, err);
	}
	if (ret == 0) {
		if (job->duplicate)
			s->summary->duplicates++;
		else
			s->summary->evaluated++;
		s->summary->by_verdict[result->verdict]++;
		s->summary->compile_s += job->compile_s;
		s->summary->eval_s += job->eval_s;
		search_log(
			s,
			json_pack(
				"{s:s, s:I, s:I, s:s, s:O, s:s, s:s, s:f, s:f, s:s, s:I, s:f, s:f, s:f, s:f}",
				"event", "result", "seq", (json_int_t)job->seq, "id", (json_int_t)res.id,
				"family", f->name, "params", json_object_get(record, "params"), "mutation",
				job->p.mutation, "verdict", ks_verdict_name(result->verdict), "fitness",
				result->fitness, "sol_fraction", result->sol_fraction, "outcome",
				ks_archive_outcome_name(res.outcome), "cell", (json_int_t)res.cell,
				"compile_s", job->compile_s, "eval_s", job->eval_s, "worker_s",
				result->timing.wall_s, "evaluated_t", job->evaluated_t));
		if (result->verdict == KS_VERDICT_OK)
			s->fams[job->p.family].ok = 1;
		/* the mutator that proposed it is told */
		{
			const struct ks_mutator *m = owner_of(s, job->p.mutation);

			if (m && m->told && (ret = m->told(m->ctx, &s->host, &job->p, result, &res, err)) < 0)
				ks_error_prefix(err, "the %s mutator", m->name);
		}
	}
	json_decref(record);
	ks_result_release(&job->result);
	return ret;
}

/* ---- the loop ---- */

/* Whether a mutator with nothing now may still bring proposals (so an exhausted search waits). */
static int may_produce(struct search *s)
{
	for (size_t i = 0; i < s->cfg->n_mutators; i++) {
		const struct ks_mutator *m = s->cfg->mutators[i];

		if (m->may_produce && m->may_produce(m->ctx, &s->host))
			return 1;
	}
	return 0;
}

static int stop_requested(struct search *s, const char **reason)
{
	const struct ks_search_config *cfg = s->cfg;
	struct ks_archive_metrics m;
	struct ks_error err;

	if (cfg->stop && *cfg->stop) {
		*reason = "signal";
		return 1;
	}
	if (cfg->budget && s->proposed_this_run >= cfg->budget) {
		*reason = "budget";
		return 1;
	}
	if (cfg->time_limit_s > 0 && ks_now_s() - s->t_start >= cfg->time_limit_s) {
		*reason = "time";
		return 1;
	}
	if (cfg->target_fitness > 0 && ks_archive_metrics(s->ar, &m, &err) == 0 &&
	    m.best_fitness >= cfg->target_fitness) {
		*reason = "target";
		return 1;
	}
	if (s->exhausted && !may_produce(s)) {
		*reason = "exhausted";
		return 1;
	}
	return 0;
}

static void dispatch(struct search *s, struct job *job)
{
	pthread_mutex_lock(&s->lock);
	s->ring[job->seq % s->depth] = job;
	job->stage = JOB_BUILD;
	queue_push(&s->build_q, job);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/*
 * Make and save proposal next_seq, and dispatch it, or park it when the
 * search is stopping.  Parked proposals are what the next run starts
 * with: proposal i is always made after result i - depth was inserted,
 * and a run that stops keeps that promise for the proposals it leaves
 * behind, so a resumed search makes the same choices as one that never
 * stopped.  Returns 1 when nothing is left to propose.
 */
static int propose_next(struct search *s, int stopping, struct ks_error *err)
{
	struct job *job = job_new();
	int rc;

	job->seq = s->next_seq;
	if ((rc = propose(s, job, err))) {
		job_free(job);
		if (rc < 0)
			return -1;
		s->exhausted = 1;
		return 1;
	}
	job->fam = s->fams[job->p.family].fam;
	if (save_proposal(s, job, err) < 0) {
		job_free(job);
		return -1;
	}
	s->next_seq++;
	if (stopping || s->dispatch_end != job->seq) {
		job->stage = JOB_PARKED;
		s->ring[job->seq % s->depth] = job;
		return 0;
	}
	s->proposed_this_run++;
	s->dispatch_end = job->seq + 1;
	dispatch(s, job);
	return 0;
}

/*
 * The search is stopping for good: the candidates in flight are finished,
 * and no lane starts a profile or check meanwhile, each of which would hold
 * its GPU for seconds past the time the user gave (one running goes on; a
 * signal cancels it).  Not for a budget, whose proposals are all made while
 * the run has barely begun.
 */
static void wind_down(struct search *s, const char *reason)
{
	if (strcmp(reason, "time") && strcmp(reason, "signal") && strcmp(reason, "target"))
		return;
	pthread_mutex_lock(&s->lock);
	s->winding_down = 1;
	pthread_mutex_unlock(&s->lock);
}

/* Keep depth proposals ahead of the insertions. */
static int top_up(struct search *s, const char **reason, struct ks_error *err)
{
	while (s->next_seq - s->next_insert < s->depth && !s->exhausted) {
		int stopping = stop_requested(s, reason);

		if (stopping)
			wind_down(s, *reason);

		if (stopping && !strcmp(*reason, "exhausted"))
			break;
		if (propose_next(s, stopping, err) < 0)
			return -1;
	}
	return 0;
}

/* The next result in proposal order, taken from the ring when it is done; NULL if not yet. */
/*
 * Whether a job that is done may be inserted (under lock).  A duplicate
 * waits for its binary's result.  When that is being measured by a later
 * job, the earlier one (this) takes the measurement and becomes the
 * original; the later one will be the duplicate.  Either way the first
 * of a binary's jobs in proposal order holds its result, whatever order
 * the builds finished in.
 */
static int duplicate_ready(struct search *s, struct job *job)
{
	struct binary *b;
	struct job *orig;

	if (!job->duplicate)
		return 1;
	b = &s->binaries[job->binary];
	if (b->id)
		return 1;
	orig = b->job;
	if (orig->stage != JOB_DONE)
		return 0;
	if (orig->failed) {
		job->failed = 1;
		job->err = orig->err;
		return 1;
	}
	{
		double compile_s = job->result.timing.compile_s;

		ks_result_release(&job->result);
		job->result = orig->result;
		job->result.timing.compile_s = compile_s;
		ks_result_init(&orig->result);
	}
	job->eval_s = orig->eval_s;
	orig->eval_s = 0;
	job->duplicate = 0;
	orig->duplicate = 1;
	b->job = job;
	return 1;
}

static struct job *take_done(struct search *s)
{

	struct job *job = NULL;

	pthread_mutex_lock(&s->lock);
	if (s->next_insert < s->dispatch_end) {
		job = s->ring[s->next_insert % s->depth];
		if (job && job->seq == s->next_insert && job->stage == JOB_DONE && duplicate_ready(s, job))
			s->ring[s->next_insert % s->depth] = NULL;
		else
			job = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	return job;
}

/* Let every mutator with work of its own do it, waiting up to timeout_ms in the first. */
static int step_mutators(struct search *s, int timeout_ms, int stopping, struct ks_error *err)
{
	for (size_t i = 0; i < s->cfg->n_mutators; i++) {
		const struct ks_mutator *m = s->cfg->mutators[i];

		if (m->step && m->step(m->ctx, &s->host, timeout_ms, stopping, err) < 0) {
			ks_error_prefix(err, "the %s mutator", m->name);
			return -1;
		}
	}
	return 0;
}

/* Wait for a result (or a mutator's outside work, an LLM's answer) for up to a moment. */
static int wait_a_moment(struct search *s, int stopping, struct ks_error *err)
{
	struct timespec until;
	struct job *next;
	int polled = 0;

	for (size_t i = 0; i < s->cfg->n_mutators; i++) {
		const struct ks_mutator *m = s->cfg->mutators[i];

		if (m->step && m->busy && m->busy(m->ctx)) {
			if (m->step(m->ctx, &s->host, 50, stopping, err) < 0) {
				ks_error_prefix(err, "the %s mutator", m->name);
				return -1;
			}
			return 0;
		}
		polled |= m->step != NULL;
	}
	pthread_mutex_lock(&s->lock);
	next = s->next_insert < s->dispatch_end ? s->ring[s->next_insert % s->depth] : NULL;
	if (!next || next->seq != s->next_insert || next->stage != JOB_DONE) {
		clock_gettime(CLOCK_REALTIME, &until);
		if (polled) {
			until.tv_nsec += 100 * 1000 * 1000;
			if (until.tv_nsec >= 1000000000) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000;
			}
		} else {
			until.tv_sec += 1;
		}
		pthread_cond_timedwait(&s->cond, &s->lock, &until);
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* Re-dispatch the proposals a stopped run saved but never inserted. */
static int resume_saved(struct search *s, struct ks_error *err)
{
	const struct ks_search_config *cfg = s->cfg;

	for (uint64_t seq = s->next_insert; seq < s->next_seq; seq++) {
		struct job *job = job_new();
		int found;
		struct ks_pcg32 keep = s->rng;
		size_t keep_seeds = s->seeds_done, keep_n_recent = s->n_recent;
		uint64_t keep_recent[RECENT], keep_improvements = s->improvements;

		memcpy(keep_recent, s->recent, sizeof(keep_recent));
		if (load_proposal(s, seq, job, &found, err) < 0) {
			job_free(job);
			return -1;
		}
		s->rng = keep;
		s->seeds_done = keep_seeds;
		s->n_recent = keep_n_recent;
		s->improvements = keep_improvements;
		memcpy(s->recent, keep_recent, sizeof(keep_recent));
		if (cfg->budget && s->proposed_this_run >= cfg->budget) {
			job->stage = JOB_PARKED;
			s->ring[seq % s->depth] = job;
			continue;
		}
		if (already_seen(s, job->p.family, job->p.params)) {
			/* inserted just before the kill, before its counter was saved */
			job->skip = 1;
			job->stage = JOB_DONE;
			s->ring[seq % s->depth] = job;
		} else {
			s->proposed_this_run++;
			dispatch(s, job);
		}
		s->dispatch_end = seq + 1;
	}
	if (s->host_failed) {
		*err = s->host_err;
		return -1;
	}
	return 0;
}

/*
 * Store the checks, confirmations and profiles that came back.  A failed
 * check that demoted a best, or a confirmation that took a best's place,
 * makes others the bests: they wait for a check and a confirmation too.
 */
static int apply_evidence(struct search *s, struct ks_error *err)
{
	uint64_t demoted = s->summary->sanitizer.changed, replaced = s->summary->confirm.changed;

	for (int i = 0; i < N_EVIDENCE; i++)
		if (ks_evidence_queue_apply(&s->evidence[i], err) < 0)
			return -1;
	if (s->summary->sanitizer.changed != demoted || s->summary->confirm.changed != replaced)
		return queue_unsanitized(s, err) < 0 ? -1 : unconfirmed_bests(s, NULL, err);
	return 0;
}

/*
 * When a run stops, its workloads' bests are confirmed before it returns:
 * the per-workload bests it leaves (what export-best --dispatch takes) are
 * then times that held on two draws.  One evaluation each, on lane 0 (the
 * lanes have stopped), of a build the build threads made (they stop after
 * this: on the lane the GPU waited through each compile, 0.55-1.05 s of a
 * gqa confirmation against 0.14-0.19 s for the timing); a best that loses
 * its place makes another the best, which is confirmed in turn, at most
 * eight rounds for each workload the archive holds a best of (an archive of
 * an older grid holds more than the op has; a 2m20s gqa search on an H200,
 * capped at four, ran 19 in 19 s).  A run with a time limit starts none
 * past the limit and its grace (ks_search_confirm_grace_s(): a 9m10s
 * mla_decode search ran 21 of them in 35 s past its limit, and a user's
 * --time is a promise); the bests left wait for the next run on the
 * archive, which confirms them, and the summary counts them.  Only the
 * bests are confirmed: a record queued while it was one and replaced since
 * is dropped (an mla_decode run spent 1.8 s each on such records, past its
 * time).  Not after a signal: that stop is at once.
 */
static int confirm_last_bests(struct search *s, size_t workloads, struct ks_error *err)
{
	struct ks_evidence_queue *q = &s->evidence[CONFIRM];
	const struct ks_search_config *cfg = s->cfg;
	double grace = cfg->confirm_grace_s > 0 ? cfg->confirm_grace_s
						: ks_search_confirm_grace_s(cfg->time_limit_s);
	struct id_set left = { 0 };
	json_t *bests = NULL;
	size_t rounds;
	int ret = -1;

	if (ks_archive_workload_bests(s->ar, &bests, err) < 0)
		return -1;
	if (json_object_size(bests) > workloads)
		workloads = json_object_size(bests);
	json_decref(bests);
	rounds = 8 * workloads;
	for (size_t round = 0; round < rounds; round++) {
		struct ks_evidence_job *job;

		left.n = 0;
		if (unconfirmed_bests(s, &left, err) < 0)
			goto done;
		if (!left.n ||
		    (cfg->time_limit_s > 0 && ks_now_s() - s->t_start >= cfg->time_limit_s + grace))
			break;
		/* the bests alone: a record queued while it was one and replaced since waits for nothing */
		ks_evidence_queue_retain(q, left.ids, left.n);
		if (unconfirmed_bests(s, NULL, err) < 0)
			goto done;
		if (!(job = ks_evidence_queue_take_now(q)))
			break;
		if (!id_set_has(&left, job->id)) {
			/* its build was under way when it stopped being a best */
			ks_evidence_queue_drop(q, job);
			continue;
		}
		ks_evidence_queue_run(q, 0, job);
		if (apply_evidence(s, err) < 0)
			goto done;
		left.n = 0;
		if (round + 1 == rounds && unconfirmed_bests(s, &left, err) < 0)
			goto done;
	}
	s->summary->unconfirmed = left.n;
	ret = 0;
done:
	free(left.ids);
	return ret;
}

double ks_search_confirm_grace_s(double time_limit_s)
{
	double grace = 0.05 * time_limit_s;

	return grace < 10 ? 10 : grace > 60 ? 60 : grace;
}

/*
 * A stopped run leaves up to its depth of proposals saved but not inserted,
 * and its depth follows its compile jobs and lanes (an MPI run's lanes are
 * every rank's).  A resumed run with fewer keeps them all in its ring: two
 * of them in one slot would leave the insertion waiting for ever.
 */
static int fit_saved_proposals(struct search *s, uint64_t from, struct ks_error *err)
{
	uint64_t n = 0;

	for (;; n++) {
		char key[PROPOSAL_KEY];
		void *data = NULL;
		size_t size = 0;

		proposal_key(key, from + n);
		if (ks_archive_state_get(s->ar, key, &data, &size, err) < 0)
			return -1;
		if (!data)
			break;
		free(data);
	}
	if (n > s->depth) {
		free(s->ring);
		s->depth = (size_t)n;
		s->ring = ks_calloc(s->depth, sizeof(*s->ring));
	}
	return 0;
}

int ks_search_default_jobs(long cpus, size_t lanes)
{
	long per_lanes, spare;

	if (lanes < 1)
		lanes = 1;
	if (lanes > 256)
		lanes = 256;
	per_lanes = 8 * (long)lanes;
	spare = cpus - (long)lanes - 1;
	if (spare > per_lanes)
		spare = per_lanes;
	return spare < 1 ? 1 : spare > 256 ? 256 : (int)spare;
}

int ks_search_run(struct ks_archive *ar, const struct ks_op *op, const struct ks_family *families,
		  size_t n_families, const struct ks_backend *backend, const struct ks_search_config *cfg,
		  struct ks_search_summary *summary, struct ks_error *err)
{
	struct search s = { .ar = ar, .op = op, .backend = backend, .cfg = cfg, .summary = summary };
	pthread_t *builders = NULL;
	struct lane *lanes = NULL;
	int jobs = cfg->jobs > 0 ? cfg->jobs : 1, ret = -1, stopping = 0, threads = 0, last_confirmations;
	const char *reason = NULL;
	struct ks_archive_metrics m0;
	uint64_t inserted = 0;

	memset(summary, 0, sizeof(*summary));
	s.host.s = &s;
	s.depth = (size_t)jobs + 2 * (size_t)backend->lanes +
		  (backend->depth_extra > 0 ? (size_t)backend->depth_extra : 0);
	s.ring = ks_calloc(s.depth, sizeof(*s.ring));
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	s.t_start = s.last_status = ks_now_s();
	ks_pcg32_seed(&s.rng, cfg->seed, 0x6b736561726368ull);
	for (size_t i = 0; i < n_families; i++)
		add_family(&s, (struct ks_family *)&families[i], 1);
	s.n_seeds = n_families;
	{
		struct ks_evidence_env env = { .backend = backend,
					       .cfg = cfg,
					       .ar = ar,
					       .lock = &s.lock,
					       .cond = &s.cond,
					       .t_start = s.t_start };

		ks_evidence_queue_init(&s.evidence[SANITIZER], &ks_evidence_sanitize, &env,
				       cfg->sanitize_share, cfg->sanitize_guess_s, &summary->sanitizer);
		ks_evidence_queue_init(&s.evidence[CONFIRM], &ks_evidence_confirm, &env, cfg->confirm_share,
				       cfg->confirm_guess_s, &summary->confirm);
		ks_evidence_queue_init(&s.evidence[PROFILES], &ks_evidence_profile, &env, cfg->profile_share,
				       cfg->profile_guess_s, &summary->profiles);
	}

	if (ks_archive_metrics(ar, &m0, err) < 0 || load_counter(&s, "search/inserted", &inserted, err) < 0 ||
	    load_families(&s, err) < 0 || ks_archive_state_each(ar, BINARY_STATE, load_binary, &s, err) < 0 ||
	    fit_saved_proposals(&s, inserted, err) < 0)
		goto cleanup;
	/* a mutator whose start fails is stopped too: it may hold part of its state */
	while (s.mutators_started < cfg->n_mutators) {
		const struct ks_mutator *m = cfg->mutators[s.mutators_started++];

		if (m->start && m->start(m->ctx, &s.host, err) < 0) {
			ks_error_prefix(err, "the %s mutator", m->name);
			goto cleanup;
		}
	}
	summary->resumed_from = m0.candidates;
	if (evaluator_check(&s, m0.candidates, err) < 0 || queue_unprofiled(&s, err) < 0 ||
	    queue_unsanitized(&s, err) < 0 || unconfirmed_bests(&s, NULL, err) < 0)
		goto cleanup;

	s.next_insert = s.next_seq = s.dispatch_end = inserted;
	/* resume: find the proposals that were saved but never inserted */
	{
		struct job pending;
		int found;

		for (;;) {
			if (load_proposal(&s, s.next_seq, &pending, &found, err) < 0)
				goto cleanup;
			if (!found)
				break;
			json_decref(pending.p.llm);
			s.next_seq++;
		}
		if (s.next_seq > 0) {
			struct job last;

			/* the RNG and seed progress as they were after the last saved proposal */
			if (load_proposal(&s, s.next_seq - 1, &last, &found, err) < 0)
				goto cleanup;
			json_decref(last.p.llm);
			summary->resumed = 1;
		}
	}
	search_log(&s,
		   json_pack("{s:s, s:s, s:I, s:I, s:I, s:i, s:i, s:I, s:b}", "event", "start", "op", op->key,
			     "seed", (json_int_t)cfg->seed, "resumed_from", (json_int_t)m0.candidates,
			     "next_seq", (json_int_t)s.next_seq, "jobs", jobs, "lanes", backend->lanes,
			     "depth", (json_int_t)s.depth, "llm", owner_of(&s, "llm") != NULL));

	builders = ks_calloc((size_t)jobs, sizeof(*builders));
	lanes = ks_calloc((size_t)backend->lanes, sizeof(*lanes));
	for (int i = 0; i < jobs; i++)
		pthread_create(&builders[i], NULL, build_thread, &s);
	for (int i = 0; i < backend->lanes; i++) {
		lanes[i] = (struct lane){ .s = &s, .index = i };
		pthread_create(&lanes[i].thread, NULL, lane_thread, &lanes[i]);
	}
	threads = 1;

	if (resume_saved(&s, err) < 0)
		goto shutdown;
	if (s.dispatch_end == s.next_seq && top_up(&s, &reason, err) < 0)
		goto shutdown;

	for (;;) {
		struct job *job = take_done(&s);

		if (job) {
			if (job->failed) {
				*err = job->err;
				job_free(job);
				goto shutdown;
			}
			if ((!job->skip && insert_result(&s, job, err) < 0) ||
			    save_counter(&s, "search/inserted", job->seq + 1, err) < 0) {
				job_free(job);
				goto shutdown;
			}
			job_free(job);
			s.next_insert++;
			if (cfg->out &&
			    ((cfg->status_tty && ks_now_s() - s.last_status >= 1) ||
			     (!cfg->status_tty && ks_now_s() - s.last_status >= cfg->status_every_s)))
				status_line(&s, 0);
		}
		if (step_mutators(&s, 0, stopping, err) < 0)
			goto shutdown;
		if (apply_evidence(&s, err) < 0)
			goto shutdown;
		if (top_up(&s, &reason, err) < 0)
			goto shutdown;
		if (job)
			continue;
		if (s.next_insert == s.dispatch_end) {
			/* nothing in flight: done, unless a mutator may still bring something */
			if (!s.exhausted || stopping || s.next_seq > s.dispatch_end ||
			    stop_requested(&s, &reason))
				break;
		}
		if (wait_a_moment(&s, stopping, err) < 0)
			goto shutdown;
		if (cfg->out && cfg->status_tty && ks_now_s() - s.last_status >= 1)
			status_line(&s, 0);
		if (cfg->stop && *cfg->stop && !stopping) {
			stopping = 1;
			wind_down(&s, "signal");
			if (cfg->out)
				fprintf(cfg->out,
					"%sstopping: finishing %llu candidates in flight "
					"(press Ctrl-C again to quit at once)\n",
					cfg->status_tty ? "\n" : "",
					(unsigned long long)(s.dispatch_end - s.next_insert));
		}
	}
	if (!reason && !stop_requested(&s, &reason))
		reason = "exhausted";
	summary->stop_reason = reason;
	ret = 0;
shutdown:
	/* the lanes stop; the build threads stay for the last confirmations, if the run ended well */
	last_confirmations = ret == 0 && !(cfg->stop && *cfg->stop);
	pthread_mutex_lock(&s.lock);
	s.shutdown = 1;
	s.builders_done = !last_confirmations;
	pthread_cond_broadcast(&s.cond);
	pthread_mutex_unlock(&s.lock);
	for (int i = 0; threads && i < backend->lanes; i++)
		pthread_join(lanes[i].thread, NULL);
	/* profiles that finished while the search wound down are stored too */
	if (ret == 0 && apply_evidence(&s, err) < 0)
		ret = -1;
	if (ret == 0 && last_confirmations && confirm_last_bests(&s, op->n_workloads, err) < 0)
		ret = -1;
	pthread_mutex_lock(&s.lock);
	s.builders_done = 1;
	pthread_cond_broadcast(&s.cond);
	pthread_mutex_unlock(&s.lock);
	for (int i = 0; threads && i < jobs; i++)
		pthread_join(builders[i], NULL);
	for (int i = 0; i < N_EVIDENCE; i++)
		ks_evidence_queue_finish(&s.evidence[i], gpu_besides(&s, &s.evidence[i]));
	/* anything still queued after a failure: release it */
	for (size_t i = 0; i < s.depth; i++) {
		struct job *job = s.ring[i];

		if (!job)
			continue;
		if (job->built && backend->discard)
			backend->discard(backend->ctx, job->built);
		job_free(job);
		s.ring[i] = NULL;
	}
	summary->wall_s = ks_now_s() - s.t_start;
	summary->gpu_busy_s = s.gpu_busy_s;
	summary->added_families = s.n_fams - s.n_seeds;
	if (cfg->out && ret == 0) {
		if (cfg->status_tty)
			fputc('\n', cfg->out);
		status_line(&s, 1);
	}
	search_log(&s, json_pack("{s:s, s:s?, s:I, s:f, s:I}", "event", "stop", "reason",
				 summary->stop_reason, "evaluated", (json_int_t)summary->evaluated, "wall_s",
				 summary->wall_s, "unconfirmed", (json_int_t)summary->unconfirmed));
cleanup:
	for (size_t i = s.mutators_started; i-- > 0;) {
		const struct ks_mutator *m = cfg->mutators[i];

		if (m->stop)
			m->stop(m->ctx, &s.host);
	}
	for (size_t i = s.n_seeds; i < s.n_fams; i++) {
		ks_family_release(s.fams[i].fam);
		free(s.fams[i].fam);
	}
	free(s.fams);
	free(builders);
	free(lanes);
	free(s.ring);
	free(s.build_q.items);
	free(s.eval_q.items);
	free(s.fam_cache);
	free(s.binaries);
	ks_map_release(&s.binary_index);
	pthread_mutex_destroy(&s.lock);
	pthread_cond_destroy(&s.cond);
	return ret;
}
