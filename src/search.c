/*
 * search.c - the MAP-Elites loop: proposals, the build/evaluate pipeline,
 * in-order insertion, stops, progress and resume (see search.h).
 */
#include "ksearch/search.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ksearch/pcg.h"
#include "ksearch/util.h"

#define MAX_PARAMS 32
#define RECENT 8

/* PARKED: proposed and saved, but left for the next run (see stop handling) */
enum job_stage { JOB_BUILD, JOB_EVAL, JOB_DONE, JOB_PARKED };

struct job {
	uint64_t seq;
	size_t family;
	int64_t params[MAX_PARAMS];
	uint64_t parents[2];
	int n_parents;
	char mutation[16];
	enum job_stage stage;
	void *built;
	json_t *record;
	double compile_s, eval_s;
	int failed;
	int skip;       /* resumed proposal whose result the archive holds already */
	struct ks_error err;
};

struct queue {
	struct job **items;
	size_t head, count, cap;
};

struct search {
	struct ks_archive *ar;
	const struct ks_op *op;
	const struct ks_family *families;
	size_t n_families;
	const struct ks_backend *backend;
	const struct ks_search_config *cfg;
	struct ks_search_summary *summary;
	struct ks_pcg32 rng;
	size_t depth;
	/* pipeline, under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct queue build_q, eval_q;
	struct job **ring;   /* depth slots, by seq % depth */
	int shutdown;
	double gpu_busy_s;
	/* proposals */
	uint64_t next_seq, next_insert;
	uint64_t dispatch_end;  /* every seq below it is dispatched (or skipped) */
	uint64_t proposed_this_run;
	size_t seeds_done;
	int exhausted;
	/* elite id -> family cache */
	uint64_t *fam_ids;
	int *fam_of;
	size_t n_fam_cache, cap_fam_cache;
	uint64_t recent[RECENT];
	size_t n_recent;
	/* progress */
	double t_start, last_status;
	uint64_t improvements;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
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

		if (ks_candidate_load(op->seed_paths[i], &f->cand, err) < 0 ||
		    ks_candidate_bind(&f->cand, op, err) < 0) {
			ks_families_free(*families, *n);
			*families = NULL;
			return -1;
		}
		if (f->cand.n_params > MAX_PARAMS) {
			ks_candidate_release(&f->cand);
			ks_families_free(*families, *n);
			*families = NULL;
			return ks_fail(err, "%s: %zu params; the search handles at most %d", op->seed_paths[i],
				       f->cand.n_params, MAX_PARAMS);
		}
		f->name = ks_strndup(base, len > 3 ? len - 3 : len);
		(*n)++;
	}
	if (!*n)
		return ks_fail(err, "operator %s has no seeds (%s/seeds/*.cu): nothing to start from", op->key, op->dir);
	return 0;
}

void ks_families_free(struct ks_family *families, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(families[i].name);
		ks_candidate_release(&families[i].cand);
	}
	free(families);
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

/* ---- threads ---- */

static void *build_thread(void *arg)
{
	struct search *s = arg;

	for (;;) {
		struct job *job;
		double t0;
		int rc;

		pthread_mutex_lock(&s->lock);
		while (!s->shutdown && !s->build_q.count)
			pthread_cond_wait(&s->cond, &s->lock);
		job = queue_pop(&s->build_q);
		pthread_mutex_unlock(&s->lock);
		if (!job)
			return NULL;
		t0 = now_s();
		rc = s->backend->build(s->backend->ctx, &s->families[job->family], job->params, &job->built,
				       &job->record, &job->err);
		job->compile_s = now_s() - t0;
		pthread_mutex_lock(&s->lock);
		if (rc < 0) {
			job->failed = 1;
			job->stage = JOB_DONE;
		} else if (job->built) {
			job->stage = JOB_EVAL;
			queue_push(&s->eval_q, job);
		} else {
			job->stage = JOB_DONE;
		}
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
	}
}

struct lane {
	struct search *s;
	int index;
	pthread_t thread;
};

static void *lane_thread(void *arg)
{
	struct lane *lane = arg;
	struct search *s = lane->s;

	for (;;) {
		struct job *job;
		double t0;
		int rc;

		pthread_mutex_lock(&s->lock);
		while (!s->shutdown && !s->eval_q.count)
			pthread_cond_wait(&s->cond, &s->lock);
		job = queue_pop(&s->eval_q);
		pthread_mutex_unlock(&s->lock);
		if (!job)
			return NULL;
		t0 = now_s();
		rc = s->backend->evaluate(s->backend->ctx, lane->index, &s->families[job->family], job->params,
					  job->built, &job->record, &job->err);
		job->built = NULL;
		job->eval_s = now_s() - t0;
		pthread_mutex_lock(&s->lock);
		s->gpu_busy_s += job->eval_s;
		job->failed = rc < 0;
		job->stage = JOB_DONE;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
	}
}

/* ---- parents ---- */

/* The family of an archived candidate, or -1 (a source no longer among the seeds). */
static int family_of(struct search *s, uint64_t id)
{
	json_t *record = NULL;
	char *source = NULL;
	struct ks_error err;
	int fam = -1;

	for (size_t i = 0; i < s->n_fam_cache; i++)
		if (s->fam_ids[i] == id)
			return s->fam_of[i];
	if (ks_archive_get(s->ar, id, &record, &source, &err) == 0 && record && source) {
		for (size_t f = 0; f < s->n_families; f++) {
			int64_t params[MAX_PARAMS];

			if (!strcmp(source, s->families[f].cand.source) &&
			    params_from_json(&s->families[f], json_object_get(record, "params"), params) == 0) {
				fam = (int)f;
				break;
			}
		}
	}
	json_decref(record);
	free(source);
	if (s->n_fam_cache == s->cap_fam_cache) {
		s->cap_fam_cache = s->cap_fam_cache ? 2 * s->cap_fam_cache : 64;
		s->fam_ids = ks_realloc(s->fam_ids, s->cap_fam_cache * sizeof(*s->fam_ids));
		s->fam_of = ks_realloc(s->fam_of, s->cap_fam_cache * sizeof(*s->fam_of));
	}
	s->fam_ids[s->n_fam_cache] = id;
	s->fam_of[s->n_fam_cache++] = fam;
	return fam;
}

static void remember_family(struct search *s, uint64_t id, size_t fam)
{
	if (s->n_fam_cache == s->cap_fam_cache) {
		s->cap_fam_cache = s->cap_fam_cache ? 2 * s->cap_fam_cache : 64;
		s->fam_ids = ks_realloc(s->fam_ids, s->cap_fam_cache * sizeof(*s->fam_ids));
		s->fam_of = ks_realloc(s->fam_of, s->cap_fam_cache * sizeof(*s->fam_of));
	}
	s->fam_ids[s->n_fam_cache] = id;
	s->fam_of[s->n_fam_cache++] = (int)fam;
}

static int params_of(struct search *s, uint64_t id, size_t fam, int64_t *params)
{
	json_t *record = NULL;
	struct ks_error err;
	int ret = -1;

	if (ks_archive_get(s->ar, id, &record, NULL, &err) == 0 && record)
		ret = params_from_json(&s->families[fam], json_object_get(record, "params"), params);
	json_decref(record);
	return ret;
}

/* Was (family, params) evaluated already, or is it in flight? */
static int already_seen(struct search *s, size_t fam, const int64_t *params)
{
	const struct ks_family *f = &s->families[fam];
	json_t *pj;
	uint64_t id = 0;
	struct ks_error err;

	for (uint64_t seq = s->next_insert; seq < s->next_seq; seq++) {
		const struct job *job = s->ring[seq % s->depth];

		if (job && job->family == fam && !memcmp(job->params, params, f->cand.n_params * sizeof(*params)))
			return 1;
	}
	pj = params_json(f, params);
	if (ks_archive_lookup_candidate(s->ar, f->cand.source, pj, &id, &err) < 0)
		id = 0;
	json_decref(pj);
	return id != 0;
}

static size_t value_index(const struct ks_param *p, int64_t value)
{
	for (size_t i = 0; i < p->n_values; i++)
		if (p->values[i] == value)
			return i;
	return 0;
}

/* Move one param to a neighbouring value of its list. */
static int nudge(struct search *s, const struct ks_family *f, int64_t *params)
{
	size_t movable[MAX_PARAMS], n = 0, k;
	const struct ks_param *p;
	size_t at;

	for (size_t i = 0; i < f->cand.n_params; i++)
		if (f->cand.params[i].n_values > 1)
			movable[n++] = i;
	if (!n)
		return -1;
	k = movable[ks_pcg32_bounded(&s->rng, (uint32_t)n)];
	p = &f->cand.params[k];
	at = value_index(p, params[k]);
	if (at == 0)
		at = 1;
	else if (at == p->n_values - 1)
		at--;
	else
		at = ks_pcg32_bounded(&s->rng, 2) ? at + 1 : at - 1;
	params[k] = p->values[at];
	return 0;
}

struct pick {
	struct ks_archive_elite *elites;
	size_t n;
	int *fam;
};

static size_t pick_weighted(struct search *s, const struct pick *pk)
{
	double total = 0, r;

	for (size_t i = 0; i < pk->n; i++)
		if (pk->fam[i] >= 0)
			total += pk->elites[i].fitness + 1e-3;
	r = ks_pcg32_double(&s->rng) * total;
	for (size_t i = 0; i < pk->n; i++) {
		if (pk->fam[i] < 0)
			continue;
		r -= pk->elites[i].fitness + 1e-3;
		if (r <= 0)
			return i;
	}
	for (size_t i = pk->n; i-- > 0;)
		if (pk->fam[i] >= 0)
			return i;
	return 0;
}

static size_t pick_uniform(struct search *s, const struct pick *pk, size_t usable)
{
	uint32_t k = ks_pcg32_bounded(&s->rng, (uint32_t)usable);

	for (size_t i = 0; i < pk->n; i++)
		if (pk->fam[i] >= 0 && k-- == 0)
			return i;
	return 0;
}

/* A parent elite by the configured mix; returns its index in pk. */
static size_t pick_parent(struct search *s, const struct pick *pk, size_t usable)
{
	const struct ks_search_config *cfg = s->cfg;
	double sum = cfg->explore + cfg->exploit + cfg->recent;
	double r = ks_pcg32_double(&s->rng) * (sum > 0 ? sum : 1);

	if (r < cfg->explore || sum <= 0)
		return pick_uniform(s, pk, usable);
	if (r < cfg->explore + cfg->exploit || !s->n_recent)
		return pick_weighted(s, pk);
	{
		uint64_t cell = s->recent[ks_pcg32_bounded(&s->rng, (uint32_t)s->n_recent)];

		for (size_t i = 0; i < pk->n; i++)
			if (pk->elites[i].cell == cell && pk->fam[i] >= 0)
				return i;
	}
	return pick_weighted(s, pk);
}

/*
 * Make the next proposal into job: a seed, a mutation of an elite, a
 * crossover of two, or (when those keep landing on evaluated points) an
 * unevaluated combination of a random family.  Returns 0, or 1 when the
 * whole space has been evaluated.
 */
static int propose(struct search *s, struct job *job)
{
	struct pick pk = { 0 };
	struct ks_error err;
	size_t usable = 0;
	int ret = 1;

	memset(job->params, 0, sizeof(job->params));
	job->n_parents = 0;
	while (s->seeds_done < s->n_families) {
		size_t fam = s->seeds_done++;

		ks_params_first(&s->families[fam].cand, job->params);
		if (already_seen(s, fam, job->params))
			continue;
		job->family = fam;
		snprintf(job->mutation, sizeof(job->mutation), "seed");
		return 0;
	}
	if (ks_archive_elites(s->ar, &pk.elites, &pk.n, &err) < 0)
		pk.n = 0;
	pk.fam = ks_calloc(pk.n ? pk.n : 1, sizeof(*pk.fam));
	for (size_t i = 0; i < pk.n; i++) {
		pk.fam[i] = family_of(s, pk.elites[i].id);
		usable += pk.fam[i] >= 0;
	}
	for (int attempt = 0; usable && attempt < 40; attempt++) {
		size_t a = pick_parent(s, &pk, usable);
		size_t fam = (size_t)pk.fam[a];
		const struct ks_family *f = &s->families[fam];

		if (params_of(s, pk.elites[a].id, fam, job->params) < 0)
			continue;
		job->family = fam;
		job->parents[0] = pk.elites[a].id;
		job->n_parents = 1;
		snprintf(job->mutation, sizeof(job->mutation), "param");
		if (ks_pcg32_double(&s->rng) < 0.2) {
			size_t mates[256], n_mates = 0;

			for (size_t i = 0; i < pk.n && n_mates < 256; i++)
				if (i != a && pk.fam[i] == (int)fam)
					mates[n_mates++] = i;
			if (n_mates) {
				size_t b = mates[ks_pcg32_bounded(&s->rng, (uint32_t)n_mates)];
				int64_t other[MAX_PARAMS];

				if (params_of(s, pk.elites[b].id, fam, other) == 0) {
					for (size_t i = 0; i < f->cand.n_params; i++)
						if (ks_pcg32_bounded(&s->rng, 2))
							job->params[i] = other[i];
					job->parents[1] = pk.elites[b].id;
					job->n_parents = 2;
					snprintf(job->mutation, sizeof(job->mutation), "crossover");
					if (!already_seen(s, fam, job->params)) {
						ret = 0;
						goto cleanup;
					}
				}
			}
		}
		if (nudge(s, f, job->params) < 0)
			continue;
		if (ks_pcg32_double(&s->rng) < 0.3)
			nudge(s, f, job->params);
		if (!already_seen(s, fam, job->params)) {
			ret = 0;
			goto cleanup;
		}
	}
	/* the neighbourhoods are used up: any combination not evaluated yet */
	for (size_t tries = 0, first = ks_pcg32_bounded(&s->rng, (uint32_t)s->n_families);
	     tries < s->n_families; tries++) {
		size_t fam = (first + tries) % s->n_families;
		const struct ks_family *f = &s->families[fam];
		size_t count = ks_params_count(&f->cand), start;

		if (count == SIZE_MAX || count > 1000000)
			count = 1000000;
		start = ks_pcg32_bounded(&s->rng, (uint32_t)count);
		for (size_t k = 0; k < count; k++) {
			ks_params_nth(&f->cand, (start + k) % count, job->params);
			if (!already_seen(s, fam, job->params)) {
				job->family = fam;
				job->n_parents = 0;
				snprintf(job->mutation, sizeof(job->mutation), "random");
				ret = 0;
				goto cleanup;
			}
		}
	}
cleanup:
	free(pk.elites);
	free(pk.fam);
	return ret;
}

/* ---- persistence of proposals ---- */

static json_t *job_json(const struct search *s, const struct job *job)
{
	json_t *parents = json_array();

	for (int i = 0; i < job->n_parents; i++)
		json_array_append_new(parents, json_integer((json_int_t)job->parents[i]));
	return json_pack("{s:I, s:s, s:o, s:o, s:s, s:[s,s]}", "seq", (json_int_t)job->seq, "family",
			 s->families[job->family].name, "params", params_json(&s->families[job->family], job->params),
			 "parents", parents, "mutation", job->mutation, "rng", "", "");
}

static int save_proposal(struct search *s, const struct job *job, struct ks_error *err)
{
	char key[64], state[80];
	json_t *obj = job_json(s, job);
	char *text;
	int ret;

	snprintf(state, sizeof(state), "%016llx%016llx", (unsigned long long)s->rng.state,
		 (unsigned long long)s->rng.inc);
	json_object_set_new(obj, "rng", json_string(state));
	json_object_set_new(obj, "seeds_done", json_integer((json_int_t)s->seeds_done));
	/* the parent-selection memory too, so a resumed search chooses alike */
	{
		json_t *recent = json_array();

		for (size_t i = 0; i < s->n_recent; i++)
			json_array_append_new(recent, json_integer((json_int_t)s->recent[i]));
		json_object_set_new(obj, "recent", recent);
		json_object_set_new(obj, "improvements", json_integer((json_int_t)s->improvements));
	}
	text = json_dumps(obj, JSON_COMPACT);
	snprintf(key, sizeof(key), "search/proposal/%020llu", (unsigned long long)job->seq);
	ret = ks_archive_state_put(s->ar, key, text, strlen(text), err);
	free(text);
	json_decref(obj);
	return ret;
}

static int load_proposal(struct search *s, uint64_t seq, struct job *job, int *found, struct ks_error *err)
{
	char key[64];
	void *data = NULL;
	size_t size = 0;
	json_t *obj;
	const char *family, *mutation, *rng;
	json_t *params, *parents;
	json_int_t seeds_done = 0;

	*found = 0;
	snprintf(key, sizeof(key), "search/proposal/%020llu", (unsigned long long)seq);
	if (ks_archive_state_get(s->ar, key, &data, &size, err) < 0)
		return -1;
	if (!data)
		return 0;
	obj = json_loadb(data, size, 0, NULL);
	free(data);
	if (!obj || json_unpack(obj, "{s:s, s:o, s:o, s:s, s:s, s:I}", "family", &family, "params", &params,
				"parents", &parents, "mutation", &mutation, "rng", &rng, "seeds_done", &seeds_done)) {
		json_decref(obj);
		return ks_fail(err, "archive: saved proposal %llu is malformed", (unsigned long long)seq);
	}
	memset(job, 0, sizeof(*job));
	job->seq = seq;
	job->family = SIZE_MAX;
	for (size_t f = 0; f < s->n_families; f++)
		if (!strcmp(s->families[f].name, family))
			job->family = f;
	if (job->family == SIZE_MAX || params_from_json(&s->families[job->family], params, job->params) < 0) {
		json_decref(obj);
		return ks_fail(err, "archive: saved proposal %llu is for family '%s', which the seeds no longer have "
			       "in that form; start a new archive with --fresh", (unsigned long long)seq, family);
	}
	for (size_t i = 0; i < json_array_size(parents) && i < 2; i++)
		job->parents[job->n_parents++] = (uint64_t)json_integer_value(json_array_get(parents, i));
	snprintf(job->mutation, sizeof(job->mutation), "%s", mutation);
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
	double elapsed = now_s() - s->t_start;
	const struct ks_search_summary *sum = s->summary;
	char fails[256] = "";
	size_t used = 0;

	if (!cfg->out || ks_archive_metrics(s->ar, &m, &err) < 0)
		return;
	for (int v = 1; v < KS_VERDICT_COUNT; v++)
		if (sum->by_verdict[v])
			used += (size_t)snprintf(fails + used, sizeof(fails) - used, " %s %llu",
						 ks_verdict_name((enum ks_verdict)v),
						 (unsigned long long)sum->by_verdict[v]);
	fprintf(cfg->out, "%s%s[%6.0fs] evals %llu (%.0f/min)  best %.3fx (id %llu)  coverage %llu/%llu  "
		"QD %.2f  failures:%s%s",
		cfg->status_tty && !final ? "\r\033[K" : "", cfg->status_tty ? "" : "ksearch evolve ", elapsed,
		(unsigned long long)sum->evaluated, elapsed > 0 ? 60.0 * (double)sum->evaluated / elapsed : 0.0,
		m.best_fitness, (unsigned long long)m.best_id, (unsigned long long)m.cells_filled,
		(unsigned long long)m.cells, m.qd_score, used ? fails : " none",
		cfg->status_tty && !final ? "" : "\n");
	fflush(cfg->out);
	s->last_status = now_s();
}

static void log_event(struct search *s, json_t *event)
{
	if (s->cfg->log) {
		char *text;

		json_object_set_new(event, "t", json_real(now_s() - s->t_start));
		text = json_dumps(event, JSON_COMPACT);
		fprintf(s->cfg->log, "%s\n", text);
		fflush(s->cfg->log);
		free(text);
	}
	json_decref(event);
}

/* ---- inserting results ---- */

static int insert_result(struct search *s, struct job *job, struct ks_error *err)
{
	const struct ks_family *f = &s->families[job->family];
	struct ks_archive_insert_result res;
	json_t *record = job->record ? job->record : json_object(), *parents = json_array(), *timing;
	enum ks_verdict verdict = KS_VERDICT_CRASH;
	int ret;

	for (int i = 0; i < job->n_parents; i++)
		json_array_append_new(parents, json_integer((json_int_t)job->parents[i]));
	json_object_set_new(record, "family", json_string(f->name));
	json_object_set_new(record, "path", json_string(f->cand.path));
	json_object_set_new(record, "params", params_json(f, job->params));
	json_object_set_new(record, "parents", parents);
	json_object_set_new(record, "mutation", json_string(job->mutation));
	json_object_set_new(record, "seq", json_integer((json_int_t)job->seq));
	timing = json_object_get(record, "timing");
	if (!json_is_object(timing)) {
		timing = json_object();
		json_object_set_new(record, "timing", timing);
	}
	json_object_set_new(timing, "compile_s", json_real(job->compile_s));
	json_object_set_new(timing, "eval_s", json_real(job->eval_s));
	ks_verdict_parse(json_string_value(json_object_get(record, "verdict")) ?: "crash", &verdict);
	ret = ks_archive_insert(s->ar, record, f->cand.source, &res, err);
	if (ret == 0) {
		remember_family(s, res.id, job->family);
		if (res.outcome == KS_ARCHIVE_NEW_CELL || res.outcome == KS_ARCHIVE_IMPROVED) {
			s->recent[s->n_recent < RECENT ? s->n_recent++ : s->improvements % RECENT] = (uint64_t)res.cell;
			s->improvements++;
		}
		s->summary->evaluated++;
		s->summary->by_verdict[verdict]++;
		s->summary->compile_s += job->compile_s;
		s->summary->eval_s += job->eval_s;
		log_event(s, json_pack("{s:s, s:I, s:I, s:s, s:O, s:s, s:s, s:f, s:f, s:s, s:I}", "event", "result",
				       "seq", (json_int_t)job->seq, "id", (json_int_t)res.id, "family", f->name,
				       "params", json_object_get(record, "params"), "mutation", job->mutation,
				       "verdict", ks_verdict_name(verdict),
				       "fitness", json_number_value(json_object_get(record, "fitness")),
				       "sol_fraction", json_number_value(json_object_get(record, "sol_fraction")),
				       "outcome", ks_archive_outcome_name(res.outcome), "cell", (json_int_t)res.cell));
	}
	json_decref(record);
	job->record = NULL;
	return ret;
}

/* ---- the loop ---- */

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
	if (cfg->time_limit_s > 0 && now_s() - s->t_start >= cfg->time_limit_s) {
		*reason = "time";
		return 1;
	}
	if (cfg->target_fitness > 0 && ks_archive_metrics(s->ar, &m, &err) == 0 &&
	    m.best_fitness >= cfg->target_fitness) {
		*reason = "target";
		return 1;
	}
	if (s->exhausted) {
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
	struct job *job = ks_calloc(1, sizeof(*job));

	job->seq = s->next_seq;
	if (propose(s, job)) {
		free(job);
		s->exhausted = 1;
		return 1;
	}
	if (save_proposal(s, job, err) < 0) {
		free(job);
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

/* Keep depth proposals ahead of the insertions. */
static int top_up(struct search *s, const char **reason, struct ks_error *err)
{
	while (s->next_seq - s->next_insert < s->depth && !s->exhausted) {
		int stopping = stop_requested(s, reason);

		if (stopping && !strcmp(*reason, "exhausted"))
			break;
		if (propose_next(s, stopping, err) < 0)
			return -1;
	}
	return 0;
}

int ks_search_run(struct ks_archive *ar, const struct ks_op *op, const struct ks_family *families,
		  size_t n_families, const struct ks_backend *backend, const struct ks_search_config *cfg,
		  struct ks_search_summary *summary, struct ks_error *err)
{
	struct search s = { .ar = ar, .op = op, .families = families, .n_families = n_families,
			    .backend = backend, .cfg = cfg, .summary = summary };
	pthread_t *builders = NULL;
	struct lane *lanes = NULL;
	int jobs = cfg->jobs > 0 ? cfg->jobs : 1, ret = -1, stopping = 0;
	const char *reason = NULL;
	struct ks_archive_metrics m0;
	uint64_t inserted = 0;

	memset(summary, 0, sizeof(*summary));
	s.depth = (size_t)jobs + 2 * (size_t)backend->lanes;
	s.ring = ks_calloc(s.depth, sizeof(*s.ring));
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	s.t_start = s.last_status = now_s();
	ks_pcg32_seed(&s.rng, cfg->seed, 0x6b736561726368ull);

	if (ks_archive_metrics(ar, &m0, err) < 0 || load_counter(&s, "search/inserted", &inserted, err) < 0)
		goto cleanup;
	summary->resumed_from = m0.candidates;
	s.next_insert = s.next_seq = s.dispatch_end = inserted;
	/* resume: re-dispatch the proposals that were saved but never inserted */
	{
		struct job pending;
		int found;

		for (;;) {
			if (load_proposal(&s, s.next_seq, &pending, &found, err) < 0)
				goto cleanup;
			if (!found)
				break;
			s.next_seq++;
		}
		if (s.next_seq > 0) {
			struct job last;

			/* the RNG and seed progress as they were after the last saved proposal */
			if (load_proposal(&s, s.next_seq - 1, &last, &found, err) < 0)
				goto cleanup;
			summary->resumed = 1;
		}
	}
	log_event(&s, json_pack("{s:s, s:s, s:I, s:I, s:I, s:i, s:i}", "event", "start", "op", op->key, "seed",
				(json_int_t)cfg->seed, "resumed_from", (json_int_t)m0.candidates, "next_seq",
				(json_int_t)s.next_seq, "jobs", jobs, "lanes", backend->lanes));

	builders = ks_calloc((size_t)jobs, sizeof(*builders));
	lanes = ks_calloc((size_t)backend->lanes, sizeof(*lanes));
	for (int i = 0; i < jobs; i++)
		pthread_create(&builders[i], NULL, build_thread, &s);
	for (int i = 0; i < backend->lanes; i++) {
		lanes[i] = (struct lane){ .s = &s, .index = i };
		pthread_create(&lanes[i].thread, NULL, lane_thread, &lanes[i]);
	}

	for (uint64_t seq = s.next_insert; seq < s.next_seq; seq++) {
		struct job *job = ks_calloc(1, sizeof(*job));
		int found;
		struct ks_pcg32 keep = s.rng;
		size_t keep_seeds = s.seeds_done, keep_n_recent = s.n_recent;
		uint64_t keep_recent[RECENT], keep_improvements = s.improvements;

		memcpy(keep_recent, s.recent, sizeof(keep_recent));

		if (load_proposal(&s, seq, job, &found, err) < 0) {
			free(job);
			goto shutdown;
		}
		s.rng = keep;
		s.seeds_done = keep_seeds;
		s.n_recent = keep_n_recent;
		s.improvements = keep_improvements;
		memcpy(s.recent, keep_recent, sizeof(keep_recent));
		if (cfg->budget && s.proposed_this_run >= cfg->budget) {
			job->stage = JOB_PARKED;
			s.ring[seq % s.depth] = job;
			continue;
		}
		if (already_seen(&s, job->family, job->params)) {
			/* inserted just before the kill, before its counter was saved */
			job->skip = 1;
			job->stage = JOB_DONE;
			s.ring[seq % s.depth] = job;
		} else {
			s.proposed_this_run++;
			dispatch(&s, job);
		}
		s.dispatch_end = seq + 1;
	}
	if (s.dispatch_end == s.next_seq && top_up(&s, &reason, err) < 0)
		goto shutdown;

	while (s.next_insert < s.dispatch_end) {
		struct job *job;

		pthread_mutex_lock(&s.lock);
		for (;;) {
			job = s.ring[s.next_insert % s.depth];
			if (job && job->seq == s.next_insert && job->stage == JOB_DONE)
				break;
			{
				struct timespec until;

				clock_gettime(CLOCK_REALTIME, &until);
				until.tv_sec += 1;
				pthread_cond_timedwait(&s.cond, &s.lock, &until);
			}
			pthread_mutex_unlock(&s.lock);
			if (cfg->out && cfg->status_tty && now_s() - s.last_status >= 1)
				status_line(&s, 0);
			if (cfg->stop && *cfg->stop && !stopping) {
				stopping = 1;
				if (cfg->out)
					fprintf(cfg->out, "%sstopping: finishing %llu candidates in flight "
						"(press Ctrl-C again to quit at once)\n", cfg->status_tty ? "\n" : "",
						(unsigned long long)(s.next_seq - s.next_insert));
			}
			pthread_mutex_lock(&s.lock);
		}
		s.ring[s.next_insert % s.depth] = NULL;
		pthread_mutex_unlock(&s.lock);
		if (job->failed) {
			*err = job->err;
			free(job);
			goto shutdown;
		}
		if ((!job->skip && insert_result(&s, job, err) < 0) ||
		    save_counter(&s, "search/inserted", job->seq + 1, err) < 0) {
			free(job);
			goto shutdown;
		}
		free(job);
		s.next_insert++;
		if (cfg->out && ((cfg->status_tty && now_s() - s.last_status >= 1) ||
				 (!cfg->status_tty && now_s() - s.last_status >= cfg->status_every_s)))
			status_line(&s, 0);
		if (top_up(&s, &reason, err) < 0)
			goto shutdown;
	}
	if (!reason && !stop_requested(&s, &reason))
		reason = "exhausted";
	summary->stop_reason = reason;
	ret = 0;
shutdown:
	pthread_mutex_lock(&s.lock);
	s.shutdown = 1;
	pthread_cond_broadcast(&s.cond);
	pthread_mutex_unlock(&s.lock);
	for (int i = 0; i < jobs; i++)
		pthread_join(builders[i], NULL);
	for (int i = 0; i < backend->lanes; i++)
		pthread_join(lanes[i].thread, NULL);
	/* anything still queued after a failure: release it */
	for (size_t i = 0; i < s.depth; i++) {
		struct job *job = s.ring[i];

		if (!job)
			continue;
		if (job->built && backend->discard)
			backend->discard(backend->ctx, job->built);
		json_decref(job->record);
		free(job);
	}
	summary->wall_s = now_s() - s.t_start;
	summary->gpu_busy_s = s.gpu_busy_s;
	if (cfg->out && ret == 0) {
		if (cfg->status_tty)
			fputc('\n', cfg->out);
		status_line(&s, 1);
	}
	log_event(&s, json_pack("{s:s, s:s?, s:I, s:f}", "event", "stop", "reason", summary->stop_reason,
				"evaluated", (json_int_t)summary->evaluated, "wall_s", summary->wall_s));
cleanup:
	free(builders);
	free(lanes);
	free(s.ring);
	free(s.build_q.items);
	free(s.eval_q.items);
	free(s.fam_ids);
	free(s.fam_of);
	pthread_mutex_destroy(&s.lock);
	pthread_cond_destroy(&s.cond);
	return ret;
}
