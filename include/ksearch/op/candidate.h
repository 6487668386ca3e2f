/*
 * candidate.h - the candidate format (the kernel contract).
 *
 * A candidate is one CUDA C++ file whose top comment block,
 *     /-* ksearch { "params": ..., "scratch": ..., "launch": [...] } *-/
 * says how to launch it (operators/README.md has the format).  This module
 * parses that block, binds it to an operator (every launch argument must
 * name an op tensor, scalar, axis or scratch buffer; every expression may
 * use only axes and params), and resolves a launch plan for one workload
 * and one choice of params: concrete grid, block, shared memory and
 * scratch sizes, with every limit of the hardware model checked.
 *
 * The NVRTC-side checks (kernels exist, no mutable globals) live in
 * build.h, which needs a compile result.  Everything in these structs is
 * owned by them and freed by the matching _release().
 */
#ifndef KSEARCH_CANDIDATE_H
#define KSEARCH_CANDIDATE_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/base/error.h"
#include "ksearch/op/expr.h"
#include "ksearch/op/op.h"

struct ks_param {
	char *name;
	int64_t *values;
	size_t n_values;
	size_t start; /* index of its value in the block's "start" (0 without one) */
};

struct ks_scratch {
	char *name;
	enum ks_dtype dtype;
	char *size; /* element-count expression */
	int zeroed; /* ["dtype", "size", "zeroed"]: all zero bytes on entry to every call */
};

enum ks_arg_kind {
	KS_ARG_INPUT,	/* op input tensor: device pointer */
	KS_ARG_OUTPUT,	/* op output tensor: device pointer */
	KS_ARG_SCALAR,	/* op input with null shape: by value, in its dtype */
	KS_ARG_AXIS,	/* an axis: by value, as int */
	KS_ARG_SCRATCH, /* scratch buffer: device pointer */
};

struct ks_arg {
	char *name;
	enum ks_arg_kind kind;
	int index; /* into op inputs/outputs/axes or candidate scratch */
};

struct ks_launch {
	char *kernel;
	char *grid[3];
	size_t grid_rank;
	char *block[3];
	size_t block_rank;
	char *smem; /* dynamic shared memory bytes; "0" when absent */
	struct ks_arg *args;
	size_t n_args;
	int pdl; /* "pdl": true: may start before the previous launch ends (programmatic dependent launch) */
};

struct ks_candidate {
	char *path;
	char *source;
	int block_line; /* line of the ksearch block's JSON, 1-based */
	struct ks_param *params;
	size_t n_params;
	char **constraints; /* conditions over the params a combination must meet to be tried */
	size_t n_constraints;
	struct ks_expr **constraint_exprs; /* the constraints parsed (NULL: parse them when evaluated) */

	struct ks_scratch *scratch;
	size_t n_scratch;
	struct ks_launch *launches;
	size_t n_launches;
	int bound; /* ks_candidate_bind() succeeded */
};

/*
 * The limits of a candidate, each checked as the block is parsed (a
 * contract_error naming the limit), so that nothing a candidate says can
 * make the coordinator work without bound: every enumeration of the
 * params, every expression and every per-launch check is bounded by
 * these.  operators/README.md states them; every seed is well inside.
 *
 * The largest candidate file read: kernels are a few to a few hundred KiB
 * of text (an LLM's answer is capped at 1 MiB too, answer.h).
 */
#define KS_CANDIDATE_MAX_BYTES ((size_t)1 << 20)
#define KS_CANDIDATE_MAX_PARAMS 32	      /* the search's KS_MAX_PARAMS */
#define KS_CANDIDATE_MAX_VALUES 64	      /* per param */
#define KS_CANDIDATE_MAX_COMBINATIONS 1048576 /* the product of the value-list lengths, 2^20 */
#define KS_CANDIDATE_MAX_CONSTRAINTS 32
/*
 * Enumerating the combinations tests each against every constraint: the
 * combinations times (32 + the constraints' total length in bytes) may be
 * at most this (2^27; the widest seed needs 7e7), which keeps a full
 * enumeration to about a second.
 */
#define KS_CANDIDATE_MAX_CONSTRAINT_WORK ((uint64_t)1 << 27)
#define KS_CANDIDATE_MAX_EXPR_BYTES 1024 /* one expression (a size, a dimension, a constraint) */
#define KS_CANDIDATE_MAX_LAUNCHES 16	 /* as many as the worker runs */
#define KS_CANDIDATE_MAX_ARGS 64	 /* per launch */
#define KS_CANDIDATE_MAX_SCRATCH 16	 /* as many buffers as the worker allocates */

/*
 * Read a candidate file's text (caller frees).  Returns -1, naming the
 * file, when it cannot be read or is a folder: there is no candidate to
 * judge.  Returns 1 with *source NULL when the file is there but its
 * bytes cannot be a candidate: larger than KS_CANDIDATE_MAX_BYTES (not
 * read past the limit), a NUL byte (its line and byte offset named):
 * that candidate's contract_error, like a failure in ks_candidate_parse()
 * or _bind().
 */
int ks_candidate_read(const char *path, char **source, struct ks_error *err);
/*
 * Parse the ksearch block of source; path is used in messages.  The
 * source must be printable UTF-8 (a byte that is not names its line and
 * byte offset) within the limits above.
 */
int ks_candidate_parse(const char *path, const char *source, struct ks_candidate *cand, struct ks_error *err);
/* ks_candidate_read() and ks_candidate_parse() (-1 for either's failure). */
int ks_candidate_load(const char *path, struct ks_candidate *cand, struct ks_error *err);
/* Resolve argument names and check expression names against op. */
int ks_candidate_bind(struct ks_candidate *cand, const struct ks_op *op, struct ks_error *err);
void ks_candidate_release(struct ks_candidate *cand);

/*
 * Params: a choice is an array of n_params values, one per param in
 * declaration order.
 */
/*
 * The default params: the block's "start" (each param it names at that
 * value, the others at their first; a parsed start always meets the
 * constraints), else the first value of every param, or if that
 * combination breaks a constraint, the first combination in
 * ks_params_nth() order that meets them all (the plain first values if
 * none does).
 */
void ks_params_first(const struct ks_candidate *cand, int64_t *values);
/* Apply "NAME=VALUE" assignments on top of values; unknown names and values outside the list fail. */
int ks_params_assign(const struct ks_candidate *cand, const char *const *assignments, size_t n,
		     int64_t *values, struct ks_error *err);
/* Number of combinations (saturates at SIZE_MAX), whether they meet the constraints or not. */
size_t ks_params_count(const struct ks_candidate *cand);
/* Number of combinations that meet every constraint (at most KS_CANDIDATE_MAX_COMBINATIONS are tested). */
size_t ks_params_count_allowed(const struct ks_candidate *cand);
/*
 * 1 when values meet every constraint; else 0, with why (may be NULL)
 * naming the first that fails: 'constraints[1] "CHUNK % TILE == 0" does
 * not hold for CHUNK=48 TILE=32'.  A constraint that cannot be evaluated
 * (division by zero) does not hold.
 */
int ks_params_allowed(const struct ks_candidate *cand, const int64_t *values, char *why, size_t size);
/* The index-th combination, first param varying slowest. */
void ks_params_nth(const struct ks_candidate *cand, size_t index, int64_t *values);
/* "TILE=64 SPLITS=8" into buf. */
void ks_params_format(const struct ks_candidate *cand, const int64_t *values, char *buf, size_t size);

struct ks_launch_dims {
	int64_t grid[3];
	int64_t block[3];
	int64_t threads; /* block[0]*block[1]*block[2] */
	int64_t smem;	 /* dynamic shared memory, bytes */
};

struct ks_plan {
	struct ks_launch_dims *launches; /* n_launches */
	int64_t *scratch_bytes;		 /* n_scratch */
	size_t n_launches;
	size_t n_scratch;
};

/*
 * Evaluate every expression for workload w and params values, and check
 * the CUDA launch limits (grid x < 2^31, y and z <= 65535; block x, y <= 1024,
 * z <= 64, at most 1024 threads; shared memory and scratch >= 0).
 * Errors name the launch, the field and the workload.
 */
int ks_plan_resolve(const struct ks_candidate *cand, const struct ks_op *op, const struct ks_workload *w,
		    const int64_t *params, struct ks_plan *plan, struct ks_error *err);
void ks_plan_release(struct ks_plan *plan);

/* env = workload axes + params (caller inits and releases env). */
int ks_plan_env(const struct ks_candidate *cand, const struct ks_workload *w, const int64_t *params,
		struct ks_env *env, struct ks_error *err);

#endif
