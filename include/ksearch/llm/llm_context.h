/*
 * llm_context.h - what the LLM mutator tells the LLM, and reading what
 * it says back about strategies.
 *
 * Turns the operator, the GPU's profile and archive records into the
 * values of the prompts/ templates (prompts/README.md lists them) and
 * renders them.  Pure functions of their inputs: no archive, no network,
 * so every prompt the search sends can be rendered and checked in tests.
 *
 * Records are the archive's JSON objects (borrowed); every string handed
 * back is the caller's to free.
 */
#ifndef KSEARCH_LLM_CONTEXT_H
#define KSEARCH_LLM_CONTEXT_H

#include <jansson.h>

#include "ksearch/archive/record.h"
#include "ksearch/base/error.h"
#include "ksearch/evaluate/gpukit.h"
#include "ksearch/op/op.h"

/*
 * The prompts folder: $KSEARCH_PROMPTS, else ./prompts, else the one
 * shipped beside the binary (../prompts, ../share/ksearch/prompts).
 * The first that holds system.md wins; none is an error listing them.
 */
int ks_prompts_dir_find(char **dir, struct ks_error *err);

/* prompts/system.md for op on gpu. */
int ks_llm_system_prompt(const char *prompts_dir, const struct ks_op *op, const struct ks_device_profile *gpu,
			 char **out, struct ks_error *err);

/* What a request is about: the parent and its surroundings. */
struct ks_llm_mutate_input {
	const char *target;		/* the task, one or two sentences */
	const char *strategy;		/* the strategy text */
	const struct ks_record *parent; /* its record */
	const char *parent_source;
	const struct ks_record *elites; /* n_elites records of other cells */
	size_t n_elites;
	const char *recent_attempts; /* lines, or NULL for "(none)" */
};

/* prompts/mutate.md. */
int ks_llm_mutate_prompt(const char *prompts_dir, const struct ks_llm_mutate_input *in, char **out,
			 struct ks_error *err);

/* prompts/repair.md for a child that failed with verdict ("answer_error" for an unusable answer). */
int ks_llm_repair_prompt(const char *prompts_dir, int attempt, int max_attempts, const char *verdict,
			 const char *evidence, const char *params, const char *child_source, char **out,
			 struct ks_error *err);

/*
 * prompts/rewrite.md: rewrite strategy (its stored object) in the way
 * operation names (ks_strategy_rewrite_names), given its best child.
 */
int ks_llm_rewrite_prompt(const char *prompts_dir, const char *operation, const json_t *strategy,
			  const struct ks_record *best_child, const char *best_source, char **out,
			  struct ks_error *err);

/*
 * The new strategy in a rewrite answer: the text between a line
 * "<strategy>" and a line "</strategy>" (the last such pair), trimmed.
 * Fails when there is none, when it is empty, or over 16 KiB.
 */
int ks_llm_strategy_extract(const char *answer, char **text, struct ks_error *err);

/* "SPLITS=8 WARPS=4" from a params object. */
char *ks_llm_params_text(const json_t *params);

/*
 * "smem_bytes=17408 occupancy=0.25 ..." from a record's descriptors; a
 * measured descriptor of a record not profiled yet says what stands in.
 */
char *ks_llm_descriptors_text(const struct ks_record *rec);

/*
 * The record's profile in a few plain lines ("Nsight Compute on workload
 * W, ncu V:" then "- DRAM throughput 48% of peak, ...", "- achieved
 * occupancy 0.23", "- warp stalls: long scoreboard 61%, barrier 12%,
 * ...", "- local memory (spills): none"), or "(not profiled yet)".
 */
char *ks_llm_profile_text(const struct ks_record *rec);

#endif
