/*
 * search_profile.c - profiles of new elites, one kind of the search's
 * hardware evidence (search_evidence.h): Nsight Compute's measurements
 * land in the record, and a measured descriptor may move the candidate to
 * another cell (ks_archive_set_profile()).
 */
#include "search_evidence.h"

#include <stdio.h>
#include <string.h>

#include "ksearch/evaluate/profile.h"

#define GUESS_S 5.0 /* a gqa profile took 3 s on an H100 */

static int profile_available(const struct ks_backend *backend)
{
	return backend->profile != NULL;
}

static int profile_run(const struct ks_backend *backend, int lane, struct ks_evidence_job *job,
		       const volatile sig_atomic_t *cancel, struct ks_error *err)
{
	return backend->profile(backend->ctx, lane, job->fam, job->params, cancel, job->outcome, err);
}

static double profile_held_s(const struct ks_evidence_job *job)
{
	return ((const struct ks_profile_outcome *)job->outcome)->held_s;
}

static enum ks_evidence_judgement profile_judge(const struct ks_evidence_job *job, const char **why)
{
	const struct ks_profile_outcome *o = job->outcome;

	*why = o->why;
	if (o->status == KS_PROFILE_OK)
		return KS_EVIDENCE_MADE;
	if (o->status == KS_PROFILE_UNAVAILABLE || o->status == KS_PROFILE_NO_PERMISSION)
		return KS_EVIDENCE_UNAVAILABLE;
	return KS_EVIDENCE_FAILED;
}

static int profile_store(struct ks_evidence_queue *q, const struct ks_evidence_job *job, struct ks_error *err)
{
	const struct ks_profile *prof = &((const struct ks_profile_outcome *)job->outcome)->profile;
	struct ks_archive_profile_result res;
	json_t *profile = ks_profile_to_json(prof);
	int rc = ks_archive_set_profile(q->env.ar, job->id, profile, &res, err);

	json_decref(profile);
	if (rc < 0)
		return -1;
	q->stats->stored++;
	if (res.moved && q->stats->changed < KS_SEARCH_EVIDENCE_IDS)
		q->stats->changed_ids[q->stats->changed] = job->id;
	q->stats->changed += res.moved != 0;
	ks_evidence_log(q, json_pack("{s:s, s:I, s:s, s:f, s:f, s:f, s:b, s:I, s:I, s:s}", "event", "profile",
				     "id", (json_int_t)job->id, "workload", prof->workload, "dram_fraction",
				     prof->dram_fraction, "achieved_occupancy", prof->achieved_occupancy,
				     "seconds", job->seconds, "moved", res.moved, "old_cell",
				     (json_int_t)res.old_cell, "cell", (json_int_t)res.cell, "outcome",
				     ks_archive_outcome_name(res.outcome)));
	return 0;
}

const struct ks_evidence_kind ks_evidence_profile = {
	.tool = "profiler",
	.event = "profile",
	.plural = "profiles",
	.outcome_size = sizeof(struct ks_profile_outcome),
	.first_guess_s = GUESS_S,
	.available = profile_available,
	.run = profile_run,
	.held_s = profile_held_s,
	.judge = profile_judge,
	.store = profile_store,
};
