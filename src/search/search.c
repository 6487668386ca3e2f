/*
 * search.c - the MAP-Elites loop: proposals, the build/evaluate pipeline,
 * in-order insertion, stops, progress and resume (see search.h).
 */
#include "ksearch/search/search.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ksearch/base/util.h"
#include "search_internal.h"

double ks_search_now(void)
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
			return ks_fail(err, "%s: %zu params; the search handles at most %d",
				       op->seed_paths[i], f->cand.n_params, MAX_PARAMS);
		}
		f->name = ks_strndup(base, len > 3 ? len - 3 : len);
		(*n)++;
	}
	if (!*n)
		return ks_fail(err, "operator %s has no seeds (%s/seeds/*.cu): nothing to start from",
			       op->key, op->dir);
	return 0;
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

/* Add a family (the search owns LLM families); returns its index. */
size_t ks_search_add_family(struct search *s, struct ks_family *family, int ok)
{
	if (s->n_fams == s->cap_fams) {
		s->cap_fams = s->cap_fams ? 2 * s->cap_fams : 16;
		s->fams = ks_realloc(s->fams, s->cap_fams * sizeof(*s->fams));
		s->fam_ok = ks_realloc(s->fam_ok, s->cap_fams);
		s->fam_tuned = ks_realloc(s->fam_tuned, s->cap_fams);
	}
	s->fams[s->n_fams] = family;
	s->fam_ok[s->n_fams] = (unsigned char)ok;
	s->fam_tuned[s->n_fams] = 0;
	return s->n_fams++;
}

json_t *ks_search_params_json(const struct ks_family *f, const int64_t *params)
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
		t0 = ks_search_now();
		if (job->fam->broken) {
			/* an LLM's source whose ksearch block cannot be used: nothing to build */
			job->built = NULL;
			job->record = json_pack("{s:s, s:s}", "verdict", "contract_error", "evidence",
						job->fam->broken);
			rc = 0;
		} else {
			rc = s->backend->build(s->backend->ctx, job->fam, job->params, &job->built,
					       &job->record, &job->err);
		}
		job->compile_s = ks_search_now() - t0;
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
		t0 = ks_search_now();
		rc = s->backend->evaluate(s->backend->ctx, lane->index, job->fam, job->params, job->built,
					  &job->record, &job->err);
		job->built = NULL;
		job->eval_s = ks_search_now() - t0;
		pthread_mutex_lock(&s->lock);
		s->gpu_busy_s += job->eval_s;
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

/*
 * The family of an archived candidate, or -1 (a source no family has,
 * e.g. a seed that has since changed).  A miss is cached too: families
 * that appear later are never the family of an older candidate.
 */
int ks_search_family_of(struct search *s, uint64_t id)
{
	json_t *record = NULL;
	char *source = NULL;
	struct ks_error err;
	int fam = -1;

	for (size_t i = 0; i < s->n_fam_cache; i++)
		if (s->fam_cache[i].id == id)
			return s->fam_cache[i].fam;
	if (ks_archive_get(s->ar, id, &record, &source, &err) == 0 && record && source) {
		for (size_t f = 0; f < s->n_fams; f++) {
			int64_t params[MAX_PARAMS];

			if (!s->fams[f]->broken && !strcmp(source, s->fams[f]->cand.source) &&
			    params_from_json(s->fams[f], json_object_get(record, "params"), params) == 0) {
				fam = (int)f;
				if (!strcmp(json_string_value(json_object_get(record, "verdict")) ?: "",
					    "ok"))
					s->fam_ok[f] = 1;
				break;
			}
		}
	}
	json_decref(record);
	free(source);
	remember_family(s, id, fam);
	return fam;
}

static int params_of(struct search *s, uint64_t id, size_t fam, int64_t *params)
{
	json_t *record = NULL;
	struct ks_error err;
	int ret = -1;

	if (ks_archive_get(s->ar, id, &record, NULL, &err) == 0 && record)
		ret = params_from_json(s->fams[fam], json_object_get(record, "params"), params);
	json_decref(record);
	return ret;
}

/* Was (family, params) evaluated already, or is it in flight? */
int ks_search_already_seen(struct search *s, size_t fam, const int64_t *params)
{
	const struct ks_family *f = s->fams[fam];
	json_t *pj;
	uint64_t id = 0;
	struct ks_error err;

	for (uint64_t seq = s->next_insert; seq < s->next_seq; seq++) {
		const struct job *job = s->ring[seq % s->depth];

		if (job && job->family == fam &&
		    !memcmp(job->params, params, f->cand.n_params * sizeof(*params)))
			return 1;
	}
	pj = ks_search_params_json(f, params);
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

static size_t pick_weighted(struct ks_pcg32 *rng, const struct pick *pk)
{
	double total = 0, r;

	for (size_t i = 0; i < pk->n; i++)
		if (pk->fam[i] >= 0)
			total += pk->elites[i].fitness + 1e-3;
	r = ks_pcg32_double(rng) * total;
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

static size_t pick_uniform(struct ks_pcg32 *rng, const struct pick *pk)
{
	uint32_t k = ks_pcg32_bounded(rng, (uint32_t)pk->usable);

	for (size_t i = 0; i < pk->n; i++)
		if (pk->fam[i] >= 0 && k-- == 0)
			return i;
	return 0;
}

void ks_search_pick_load(struct search *s, struct pick *pk)
{
	struct ks_error err;

	memset(pk, 0, sizeof(*pk));
	if (ks_archive_elites(s->ar, &pk->elites, &pk->n, &err) < 0)
		pk->n = 0;
	pk->fam = ks_calloc(pk->n ? pk->n : 1, sizeof(*pk->fam));
	for (size_t i = 0; i < pk->n; i++) {
		pk->fam[i] = ks_search_family_of(s, pk->elites[i].id);
		pk->usable += pk->fam[i] >= 0;
	}
}

void ks_search_pick_release(struct pick *pk)
{
	free(pk->elites);
	free(pk->fam);
	memset(pk, 0, sizeof(*pk));
}

/* A parent elite by the configured mix; returns its index in pk (pk->usable > 0). */
size_t ks_search_pick_parent(struct search *s, struct ks_pcg32 *rng, const struct pick *pk)
{
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
			if (pk->elites[i].cell == cell && pk->fam[i] >= 0)
				return i;
	}
	return pick_weighted(rng, pk);
}

/* ---- queues of waiting proposals (LLM children, tuner variants) ---- */

void ks_pending_push(struct pending_queue *q, const struct pending *p)
{
	if (q->count == q->cap) {
		struct pending *items = ks_calloc(q->cap ? 2 * q->cap : 16, sizeof(*items));

		for (size_t i = 0; i < q->count; i++)
			items[i] = q->items[(q->head + i) % q->cap];
		free(q->items);
		q->items = items;
		q->head = 0;
		q->cap = q->cap ? 2 * q->cap : 16;
	}
	q->items[(q->head + q->count++) % q->cap] = *p;
}

int ks_pending_pop(struct pending_queue *q, struct pending *p)
{
	if (!q->count)
		return 0;
	*p = q->items[q->head];
	q->head = (q->head + 1) % q->cap;
	q->count--;
	return 1;
}

void ks_pending_release(struct pending_queue *q)
{
	struct pending p;

	while (ks_pending_pop(q, &p))
		json_decref(p.llm);
	free(q->items);
	memset(q, 0, sizeof(*q));
}

/* The first waiting proposal not evaluated yet, into job; 0 when none. */
static int take_pending(struct search *s, struct pending_queue *q, struct job *job)
{
	struct pending p;

	while (ks_pending_pop(q, &p)) {
		if (ks_search_already_seen(s, p.family, p.params)) {
			/* a twin of this kernel got there first: its conversation ends here */
			if (p.task)
				ks_search_llm_drop(s, p.task);
			json_decref(p.llm);
			continue;
		}
		job->family = p.family;
		memcpy(job->params, p.params, sizeof(job->params));
		job->parents[0] = p.parent;
		job->n_parents = p.parent ? 1 : 0;
		job->strategy = p.strategy;
		job->task = p.task;
		job->llm = p.llm;
		snprintf(job->mutation, sizeof(job->mutation), "%s", p.mutation);
		return 1;
	}
	return 0;
}

/*
 * Make the next proposal into job: a seed, an LLM child, a tuner variant
 * of an LLM kernel, a mutation of an elite, a crossover of two, or (when
 * those keep landing on evaluated points) an unevaluated combination of a
 * random family.  Returns 0, or 1 when nothing is left to propose.
 */
static int propose(struct search *s, struct job *job)
{
	struct pick pk;
	int ret = 1;

	memset(job->params, 0, sizeof(job->params));
	job->n_parents = 0;
	while (s->seeds_done < s->n_seeds) {
		size_t fam = s->seeds_done++;

		ks_params_first(&s->fams[fam]->cand, job->params);
		if (ks_search_already_seen(s, fam, job->params))
			continue;
		job->family = fam;
		snprintf(job->mutation, sizeof(job->mutation), "seed");
		return 0;
	}
	if (take_pending(s, &s->children, job) || take_pending(s, &s->tunes, job))
		return 0;
	ks_search_pick_load(s, &pk);
	for (int attempt = 0; pk.usable && attempt < 40; attempt++) {
		size_t a = ks_search_pick_parent(s, &s->rng, &pk);
		size_t fam = (size_t)pk.fam[a];
		const struct ks_family *f = s->fams[fam];

		if (params_of(s, pk.elites[a].id, fam, job->params) < 0)
			continue;
		job->family = fam;
		job->parents[0] = pk.elites[a].id;
		job->n_parents = 1;
		job->strategy = f->strategy;
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
					if (!ks_search_already_seen(s, fam, job->params)) {
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
		if (!ks_search_already_seen(s, fam, job->params)) {
			ret = 0;
			goto cleanup;
		}
	}
	/* the neighbourhoods are used up: any combination not evaluated yet, of a family that works */
	job->strategy = 0;
	for (size_t tries = 0, first = ks_pcg32_bounded(&s->rng, (uint32_t)s->n_fams); tries < s->n_fams;
	     tries++) {
		size_t fam = (first + tries) % s->n_fams;
		const struct ks_family *f = s->fams[fam];
		size_t count = ks_params_count(&f->cand), start;

		if (fam >= s->n_seeds && !s->fam_ok[fam])
			continue;
		if (count == SIZE_MAX || count > 1000000)
			count = 1000000;
		start = ks_pcg32_bounded(&s->rng, (uint32_t)count);
		for (size_t k = 0; k < count; k++) {
			ks_params_nth(&f->cand, (start + k) % count, job->params);
			if (!ks_search_already_seen(s, fam, job->params)) {
				job->family = fam;
				job->n_parents = 0;
				job->strategy = f->strategy;
				snprintf(job->mutation, sizeof(job->mutation), "random");
				ret = 0;
				goto cleanup;
			}
		}
	}
cleanup:
	ks_search_pick_release(&pk);
	return ret;
}

/* ---- persistence of proposals ---- */

static json_t *job_json(const struct search *s, const struct job *job)
{
	json_t *parents = json_array();

	for (int i = 0; i < job->n_parents; i++)
		json_array_append_new(parents, json_integer((json_int_t)job->parents[i]));
	return json_pack("{s:I, s:s, s:o, s:o, s:s, s:[s,s]}", "seq", (json_int_t)job->seq, "family",
			 s->fams[job->family]->name, "params", ks_search_params_json(job->fam, job->params),
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
	if (job->strategy)
		json_object_set_new(obj, "strategy", json_integer((json_int_t)job->strategy));
	if (job->llm)
		json_object_set_new(obj, "llm", json_incref(job->llm));
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
	if (!obj ||
	    json_unpack(obj, "{s:s, s:o, s:o, s:s, s:s, s:I}", "family", &family, "params", &params,
			"parents", &parents, "mutation", &mutation, "rng", &rng, "seeds_done", &seeds_done)) {
		json_decref(obj);
		return ks_fail(err, "archive: saved proposal %llu is malformed", (unsigned long long)seq);
	}
	memset(job, 0, sizeof(*job));
	job->seq = seq;
	job->family = SIZE_MAX;
	for (size_t f = 0; f < s->n_fams; f++)
		if (!strcmp(s->fams[f]->name, family))
			job->family = f;
	if (job->family != SIZE_MAX)
		job->fam = s->fams[job->family];
	if (job->family == SIZE_MAX || params_from_json(job->fam, params, job->params) < 0) {
		json_decref(obj);
		return ks_fail(
			err,
			"archive: saved proposal %llu is for family '%s', which the seeds no longer have "
			"in that form; start a new archive with --fresh",
			(unsigned long long)seq, family);
	}
	for (size_t i = 0; i < json_array_size(parents) && i < 2; i++)
		job->parents[job->n_parents++] = (uint64_t)json_integer_value(json_array_get(parents, i));
	snprintf(job->mutation, sizeof(job->mutation), "%s", mutation);
	job->strategy = (uint64_t)json_integer_value(json_object_get(obj, "strategy"));
	if (json_is_object(json_object_get(obj, "llm")))
		job->llm = json_incref(json_object_get(obj, "llm"));
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
	double elapsed = ks_search_now() - s->t_start;
	const struct ks_search_summary *sum = s->summary;
	char fails[256] = "", llm[160] = "";
	size_t used = 0;

	if (s->llm)
		ks_search_llm_status(s, llm, sizeof(llm));
	if (!cfg->out || ks_archive_metrics(s->ar, &m, &err) < 0)
		return;
	for (int v = 1; v < KS_VERDICT_COUNT; v++)
		if (sum->by_verdict[v])
			used += (size_t)snprintf(fails + used, sizeof(fails) - used, " %s %llu",
						 ks_verdict_name((enum ks_verdict)v),
						 (unsigned long long)sum->by_verdict[v]);
	fprintf(cfg->out,
		"%s%s[%6.0fs] evals %llu (%.0f/min)  best %.3fx (id %llu)  coverage %llu/%llu  "
		"QD %.2f  failures:%s%s%s",
		cfg->status_tty && !final ? "\r\033[K" : "", cfg->status_tty ? "" : "ksearch evolve ",
		elapsed, (unsigned long long)sum->evaluated,
		elapsed > 0 ? 60.0 * (double)sum->evaluated / elapsed : 0.0, m.best_fitness,
		(unsigned long long)m.best_id, (unsigned long long)m.cells_filled,
		(unsigned long long)m.cells, m.qd_score, used ? fails : " none", llm,
		cfg->status_tty && !final ? "" : "\n");
	fflush(cfg->out);
	s->last_status = ks_search_now();
}

void ks_search_log(struct search *s, json_t *event)
{
	if (s->cfg->log) {
		char *text;

		json_object_set_new(event, "t", json_real(ks_search_now() - s->t_start));
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
	const struct ks_family *f = job->fam;
	struct ks_archive_insert_result res;
	json_t *record = job->record ? job->record : json_object(), *parents = json_array(), *timing;
	enum ks_verdict verdict = KS_VERDICT_CRASH;
	int ret;

	for (int i = 0; i < job->n_parents; i++)
		json_array_append_new(parents, json_integer((json_int_t)job->parents[i]));
	json_object_set_new(record, "family", json_string(f->name));
	json_object_set_new(record, "path", json_string(f->cand.path));
	json_object_set_new(record, "params", ks_search_params_json(f, job->params));
	json_object_set_new(record, "parents", parents);
	json_object_set_new(record, "mutation", json_string(job->mutation));
	json_object_set_new(record, "seq", json_integer((json_int_t)job->seq));
	if (job->strategy)
		json_object_set_new(record, "prompt_id", json_integer((json_int_t)job->strategy));
	if (job->llm)
		json_object_set_new(record, "llm", json_incref(job->llm));
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
		remember_family(s, res.id, (int)job->family);
		if (res.outcome == KS_ARCHIVE_NEW_CELL || res.outcome == KS_ARCHIVE_IMPROVED) {
			s->recent[s->n_recent < RECENT ? s->n_recent++ : s->improvements % RECENT] =
				(uint64_t)res.cell;
			s->improvements++;
		}
		s->summary->evaluated++;
		s->summary->by_verdict[verdict]++;
		s->summary->compile_s += job->compile_s;
		s->summary->eval_s += job->eval_s;
		ks_search_log(s,
			      json_pack("{s:s, s:I, s:I, s:s, s:O, s:s, s:s, s:f, s:f, s:s, s:I}", "event",
					"result", "seq", (json_int_t)job->seq, "id", (json_int_t)res.id,
					"family", f->name, "params", json_object_get(record, "params"),
					"mutation", job->mutation, "verdict", ks_verdict_name(verdict),
					"fitness", json_number_value(json_object_get(record, "fitness")),
					"sol_fraction",
					json_number_value(json_object_get(record, "sol_fraction")), "outcome",
					ks_archive_outcome_name(res.outcome), "cell", (json_int_t)res.cell));
		if (verdict == KS_VERDICT_OK)
			s->fam_ok[job->family] = 1;
		if (s->llm)
			ret = ks_search_llm_result(s, job, record, &res, err);
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
	if (cfg->time_limit_s > 0 && ks_search_now() - s->t_start >= cfg->time_limit_s) {
		*reason = "time";
		return 1;
	}
	if (cfg->target_fitness > 0 && ks_archive_metrics(s->ar, &m, &err) == 0 &&
	    m.best_fitness >= cfg->target_fitness) {
		*reason = "target";
		return 1;
	}
	if (s->exhausted && !(s->llm && ks_search_llm_may_produce(s))) {
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
	job->fam = s->fams[job->family];
	if (save_proposal(s, job, err) < 0) {
		json_decref(job->llm);
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

static void job_free(struct job *job)
{
	json_decref(job->record);
	json_decref(job->llm);
	free(job);
}

/* The next result in proposal order, taken from the ring when it is done; NULL if not yet. */
static struct job *take_done(struct search *s)
{
	struct job *job = NULL;

	pthread_mutex_lock(&s->lock);
	if (s->next_insert < s->dispatch_end) {
		job = s->ring[s->next_insert % s->depth];
		if (job && job->seq == s->next_insert && job->stage == JOB_DONE)
			s->ring[s->next_insert % s->depth] = NULL;
		else
			job = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	return job;
}

/* Wait for a result (or, with an LLM, an answer) for up to a moment. */
static int wait_a_moment(struct search *s, int stopping, struct ks_error *err)
{
	struct timespec until;
	struct job *next;

	if (s->llm && ks_llm_pending(s->llm->client))
		return ks_search_llm_step(s, 50, stopping, err);
	pthread_mutex_lock(&s->lock);
	next = s->next_insert < s->dispatch_end ? s->ring[s->next_insert % s->depth] : NULL;
	if (!next || next->seq != s->next_insert || next->stage != JOB_DONE) {
		clock_gettime(CLOCK_REALTIME, &until);
		if (s->llm) {
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
		struct job *job = ks_calloc(1, sizeof(*job));
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
		if (ks_search_already_seen(s, job->family, job->params)) {
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
	return 0;
}

int ks_search_run(struct ks_archive *ar, const struct ks_op *op, const struct ks_family *families,
		  size_t n_families, const struct ks_backend *backend, const struct ks_search_config *cfg,
		  struct ks_search_summary *summary, struct ks_error *err)
{
	struct search s = {
		.ar = ar, .op = op, .backend = backend, .cfg = cfg, .summary = summary, .llm = cfg->llm
	};
	pthread_t *builders = NULL;
	struct lane *lanes = NULL;
	int jobs = cfg->jobs > 0 ? cfg->jobs : 1, ret = -1, stopping = 0, threads = 0;
	const char *reason = NULL;
	struct ks_archive_metrics m0;
	uint64_t inserted = 0;

	memset(summary, 0, sizeof(*summary));
	s.depth = (size_t)jobs + 2 * (size_t)backend->lanes;
	s.ring = ks_calloc(s.depth, sizeof(*s.ring));
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	s.t_start = s.last_status = ks_search_now();
	ks_pcg32_seed(&s.rng, cfg->seed, 0x6b736561726368ull);
	for (size_t i = 0; i < n_families; i++)
		ks_search_add_family(&s, (struct ks_family *)&families[i], 1);
	s.n_seeds = n_families;

	if (ks_archive_metrics(ar, &m0, err) < 0 || load_counter(&s, "search/inserted", &inserted, err) < 0 ||
	    ks_search_load_families(&s, err) < 0 || (s.llm && ks_search_llm_start(&s, err) < 0))
		goto cleanup;
	summary->resumed_from = m0.candidates;
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
			json_decref(pending.llm);
			s.next_seq++;
		}
		if (s.next_seq > 0) {
			struct job last;

			/* the RNG and seed progress as they were after the last saved proposal */
			if (load_proposal(&s, s.next_seq - 1, &last, &found, err) < 0)
				goto cleanup;
			json_decref(last.llm);
			summary->resumed = 1;
		}
	}
	ks_search_log(&s, json_pack("{s:s, s:s, s:I, s:I, s:I, s:i, s:i, s:b}", "event", "start", "op",
				    op->key, "seed", (json_int_t)cfg->seed, "resumed_from",
				    (json_int_t)m0.candidates, "next_seq", (json_int_t)s.next_seq, "jobs",
				    jobs, "lanes", backend->lanes, "llm", s.llm != NULL));

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
			    ((cfg->status_tty && ks_search_now() - s.last_status >= 1) ||
			     (!cfg->status_tty && ks_search_now() - s.last_status >= cfg->status_every_s)))
				status_line(&s, 0);
		}
		if (s.llm && ks_search_llm_step(&s, 0, stopping, err) < 0)
			goto shutdown;
		if (top_up(&s, &reason, err) < 0)
			goto shutdown;
		if (job)
			continue;
		if (s.next_insert == s.dispatch_end) {
			/* nothing in flight: done, unless the built-in mutator waits for the LLM's next
			 * kernel */
			if (!s.exhausted || stopping || s.next_seq > s.dispatch_end ||
			    stop_requested(&s, &reason))
				break;
		}
		if (wait_a_moment(&s, stopping, err) < 0)
			goto shutdown;
		if (cfg->out && cfg->status_tty && ks_search_now() - s.last_status >= 1)
			status_line(&s, 0);
		if (cfg->stop && *cfg->stop && !stopping) {
			stopping = 1;
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
	pthread_mutex_lock(&s.lock);
	s.shutdown = 1;
	pthread_cond_broadcast(&s.cond);
	pthread_mutex_unlock(&s.lock);
	for (int i = 0; threads && i < jobs; i++)
		pthread_join(builders[i], NULL);
	for (int i = 0; threads && i < backend->lanes; i++)
		pthread_join(lanes[i].thread, NULL);
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
	summary->wall_s = ks_search_now() - s.t_start;
	summary->gpu_busy_s = s.gpu_busy_s;
	summary->llm_families = s.n_fams - s.n_seeds;
	if (cfg->out && ret == 0) {
		if (cfg->status_tty)
			fputc('\n', cfg->out);
		status_line(&s, 1);
	}
	ks_search_log(&s, json_pack("{s:s, s:s?, s:I, s:f}", "event", "stop", "reason", summary->stop_reason,
				    "evaluated", (json_int_t)summary->evaluated, "wall_s", summary->wall_s));
cleanup:
	if (s.llm)
		ks_search_llm_stop(&s);
	for (size_t i = s.n_seeds; i < s.n_fams; i++) {
		ks_family_release(s.fams[i]);
		free(s.fams[i]);
	}
	free(s.fams);
	free(s.fam_ok);
	free(s.fam_tuned);
	free(builders);
	free(lanes);
	free(s.ring);
	free(s.build_q.items);
	free(s.eval_q.items);
	free(s.fam_cache);
	pthread_mutex_destroy(&s.lock);
	pthread_cond_destroy(&s.cond);
	return ret;
}
