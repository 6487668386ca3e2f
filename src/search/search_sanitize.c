/*
 * search_sanitize.c - sanitizer checks of new bests, one kind of the
 * search's hardware evidence (search_evidence.h): compute-sanitizer's
 * verdict lands in the record, and a failed check demotes it
 * (ks_archive_set_sanitizer()): it is no longer an elite, the best or a
 * workload's best, so the parents and climbs that follow start from the
 * next best.
 *
 * A candidate that built to the same binary as another is recorded as
 * its duplicate (search.h) and shares its result, so it shares its check
 * too: a check is copied to every duplicate of the record, and a
 * duplicate recorded after the check gets it when it is inserted.
 */
#include "search_evidence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/archive/record.h"
#include "ksearch/base/util.h"
#include "ksearch/evaluate/sanitize.h"

/* memcheck over every workload, then racecheck: 2 s on rmsnorm, 4 s on gqa, on an H100 (BENCHMARKS.md) */
#define GUESS_S 5.0

static int sanitize_available(const struct ks_backend *backend)
{
	return backend->sanitize != NULL;
}

static int sanitize_run(const struct ks_backend *backend, int lane, struct ks_evidence_job *job,
			const volatile sig_atomic_t *cancel, struct ks_error *err)
{
	return backend->sanitize(backend->ctx, lane, job->fam, job->params, cancel, job->outcome, err);
}

static double sanitize_held_s(const struct ks_evidence_job *job)
{
	return ((const struct ks_sanitize_outcome *)job->outcome)->held_s;
}

static enum ks_evidence_judgement sanitize_judge(const struct ks_evidence_job *job, const char **why)
{
	const struct ks_sanitize_outcome *o = job->outcome;

	*why = o->why;
	switch (o->status) {
	case KS_SANITIZE_CLEAN:
	case KS_SANITIZE_FAILED:
		return KS_EVIDENCE_MADE;
	case KS_SANITIZE_UNAVAILABLE:
		return KS_EVIDENCE_UNAVAILABLE;
	case KS_SANITIZE_INCOMPLETE:
		break;
	}
	return KS_EVIDENCE_FAILED;
}

struct twins {
	uint64_t of;
	uint64_t *ids;
	size_t n, alloc;
};

static int collect_twin(const struct ks_record *rec, void *ctx, struct ks_error *err)
{
	struct twins *t = ctx;

	(void)err;
	if (rec->duplicate_of && rec->duplicate_of == t->of) {
		KS_ALLOC_GROW(t->ids, t->n + 1, t->alloc);
		t->ids[t->n++] = rec->id;
	}
	return 0;
}

/* The check of record id, copied to its duplicates; *n_twins: how many. */
static int copy_to_twins(struct ks_archive *ar, uint64_t id, const json_t *sanitizer, size_t *n_twins,
			 struct ks_error *err)
{
	struct ks_archive_query all = { .verdict = -1, .sort = KS_ARCHIVE_SORT_ID };
	struct twins t = { .of = id };
	int ret = ks_archive_foreach_record(ar, &all, collect_twin, &t, err);

	for (size_t i = 0; ret == 0 && i < t.n; i++)
		ret = ks_archive_set_sanitizer(ar, t.ids[i], sanitizer, NULL, err);
	*n_twins = t.n;
	free(t.ids);
	return ret;
}

int ks_evidence_sanitize_inherit(struct ks_archive *ar, uint64_t original, uint64_t id, struct ks_error *err)
{
	struct ks_record rec;
	int ret;

	ks_record_init(&rec);
	ret = ks_archive_get_record(ar, original, &rec, NULL, err);
	if (ret == 0 && rec.sanitizer)
		ret = ks_archive_set_sanitizer(ar, id, rec.sanitizer, NULL, err);
	ks_record_release(&rec);
	return ret;
}

/* A failed check, said over the status line: a demoted best is news. */
static void say_failed(struct ks_evidence_queue *q, const struct ks_evidence_job *job,
		       const json_t *sanitizer, const struct ks_archive_sanitizer_result *res)
{
	const struct ks_search_config *cfg = q->env.cfg;
	char *text = ks_sanitize_text(sanitizer);

	if (!cfg->out)
		goto cleanup;
	fprintf(cfg->out, "%ssanitizer: #%llu %s", cfg->status_tty ? "\r\033[K" : "",
		(unsigned long long)job->id, text ? text : "FAILED");
	if (res->demoted)
		fprintf(cfg->out, "; demoted%s%s", res->was_best ? " from the best" : "",
			res->workloads_lost ? " and from its workloads' bests" : "");
	if (res->was_best && res->best_id)
		fprintf(cfg->out, "; the best is now #%llu", (unsigned long long)res->best_id);
	else if (res->was_best)
		fprintf(cfg->out, "; there is no best now");
	fputc('\n', cfg->out);
	fflush(cfg->out);
cleanup:
	free(text);
}

static int sanitize_store(struct ks_evidence_queue *q, const struct ks_evidence_job *job,
			  struct ks_error *err)
{
	const struct ks_sanitize_outcome *o = job->outcome;
	struct ks_archive_sanitizer_result res;
	struct ks_search_evidence *stats = q->stats;
	json_t *sanitizer = ks_sanitize_to_json(o);
	size_t twins = 0;
	int failed = o->status == KS_SANITIZE_FAILED, ret = -1;

	if (ks_archive_set_sanitizer(q->env.ar, job->id, sanitizer, &res, err) < 0 ||
	    copy_to_twins(q->env.ar, job->id, sanitizer, &twins, err) < 0)
		goto cleanup;
	stats->stored++;
	if (failed) {
		if (stats->changed < KS_SEARCH_EVIDENCE_IDS)
			stats->changed_ids[stats->changed] = job->id;
		stats->changed++;
		say_failed(q, job, sanitizer, &res);
	}
	ks_evidence_log(q, json_pack("{s:s, s:I, s:s, s:I, s:s, s:f, s:b, s:b, s:I, s:I, s:I}", "event",
				     "sanitizer", "id", (json_int_t)job->id, "status",
				     ks_sanitize_status_name(o->status), "errors",
				     (json_int_t)o->check.errors, "first", o->check.first, "seconds",
				     job->seconds, "demoted", res.demoted, "was_best", res.was_best,
				     "best_id", (json_int_t)res.best_id, "workloads_lost",
				     (json_int_t)res.workloads_lost, "twins", (json_int_t)twins));
	ret = 0;
cleanup:
	json_decref(sanitizer);
	return ret;
}

const struct ks_evidence_kind ks_evidence_sanitize = {
	.tool = "sanitizer",
	.event = "sanitizer",
	.plural = "sanitizer checks",
	.outcome_size = sizeof(struct ks_sanitize_outcome),
	.first_guess_s = GUESS_S,
	.available = sanitize_available,
	.run = sanitize_run,
	.held_s = sanitize_held_s,
	.judge = sanitize_judge,
	.store = sanitize_store,
};
