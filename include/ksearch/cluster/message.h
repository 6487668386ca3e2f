/*
 * message.h - what ranks of one MPI job say to each other (docs/design.md,
 * "Many hosts (MPI)"): rank 0 hands candidates to the other ranks, they
 * answer with results.  This is the codec only, with no MPI in it, so
 * that it can be tested (and fuzzed) alone.
 *
 * A message is "KSD1" and one JSON object, nothing else:
 *
 *   hello  rank > 0 -> 0   {"gpus", "jobs", "model", "evaluator"}: what the rank runs
 *   job    0 -> rank       {"job", "family", "path", "source", "params", "deadline_ms", "evaluate"}
 *   built  rank -> 0       {"job", "held", "result"}: the build's result; held: the build
 *                          waits on the rank for eval or drop, else the result is final
 *   eval   0 -> rank       {"job", "deadline_ms"}: time the held build on one of the rank's GPUs
 *   drop   0 -> rank       {"job"}: a twin, not to be timed (free the held build)
 *   result rank -> 0       {"job", "result"}: the final result
 *   failed rank -> 0       {"job", "error"}: ksearch itself failed on the job (the search stops)
 *   alive  rank -> 0       {}: sent every second, so that a silent rank is found
 *   stop   0 -> rank       {}: finish what is in flight, answer it, then bye
 *   bye    rank -> 0       {}: the rank is done
 *   evidence 0 -> rank     {"job", "kind", "family", "path", "source", "params",
 *                          "deadline_ms"}: profile (kind "profile") or check with the
 *                          sanitizer (kind "sanitize") the candidate on one of the rank's GPUs
 *   outcome  rank -> 0     {"job", "outcome"}: the profile's or the check's outcome, an
 *                          object rank 0 reads with ks_profile_outcome_from_json() or
 *                          ks_sanitize_outcome_from_json() (or failed, when ksearch
 *                          itself failed)
 *
 * A job with "evaluate": true is built and timed without waiting for eval
 * (a job handed back from a dead rank, which had already been built).
 * The result is ks_result's own JSON (result.h), read back with
 * ks_result_from_json(): one serialiser.  Sizes are bounded before
 * anything is allocated (KS_CLUSTER_MAX_MESSAGE, the params, the source), and
 * anything malformed is an error naming what was wrong, never a crash.
 */
#ifndef KSEARCH_CLUSTER_MESSAGE_H
#define KSEARCH_CLUSTER_MESSAGE_H

#include <stddef.h>
#include <jansson.h>
#include <stdint.h>

#include "ksearch/base/error.h"
#include "ksearch/evaluate/result.h"
#include "ksearch/op/candidate.h"

/* The largest message read: a frame's JSON limit (frame.h). */
#define KS_CLUSTER_MAX_MESSAGE (64u << 20)

enum ks_cluster_type {
	KS_CLUSTER_HELLO,
	KS_CLUSTER_JOB,
	KS_CLUSTER_BUILT,
	KS_CLUSTER_EVAL,
	KS_CLUSTER_DROP,
	KS_CLUSTER_RESULT,
	KS_CLUSTER_FAILED,
	KS_CLUSTER_ALIVE,
	KS_CLUSTER_STOP,
	KS_CLUSTER_BYE,
	KS_CLUSTER_EVIDENCE,
	KS_CLUSTER_OUTCOME,
	KS_CLUSTER_TYPE_COUNT
};

/* What an evidence message asks for. */
enum ks_cluster_evidence { KS_CLUSTER_PROFILE = 1, KS_CLUSTER_SANITIZE };

const char *ks_cluster_type_name(enum ks_cluster_type type);

/*
 * One message, decoded.  Which fields mean something depends on type
 * (the table above); the rest are zero.  Strings and the result are the
 * struct's own: ks_cluster_msg_release() frees them.
 */
struct ks_cluster_msg {
	enum ks_cluster_type type;
	uint64_t job;
	/* job, evidence */
	char *family, *path, *source;
	int64_t params[KS_CANDIDATE_MAX_PARAMS];
	size_t n_params;
	int64_t deadline_ms; /* job, eval: how long the rank may take, from when it reads it */
	int evaluate;
	enum ks_cluster_evidence kind; /* evidence */
	json_t *outcome;	       /* outcome: the message's own reference */
	/* built, result */
	int held;
	struct ks_result result; /* initialised by ks_cluster_msg_init() */
	/* failed */
	char *error;
	/* hello */
	int gpus, jobs, evaluator;
	char *model;
};

void ks_cluster_msg_init(struct ks_cluster_msg *msg, enum ks_cluster_type type);
void ks_cluster_msg_release(struct ks_cluster_msg *msg);

/* msg as bytes to send: *buf is the caller's (free), *len its length. */
void ks_cluster_msg_encode(const struct ks_cluster_msg *msg, char **buf, size_t *len);

/*
 * Read len bytes (borrowed) into *msg (initialised here; release it
 * either way).  Returns -1 when they are not a well-formed message,
 * err saying what was wrong: the magic, the JSON (with its position), a
 * field missing or of the wrong kind, a bound passed.
 */
int ks_cluster_msg_decode(const char *buf, size_t len, struct ks_cluster_msg *msg, struct ks_error *err);

#endif
