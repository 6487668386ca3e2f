/*
 * report.h - an archive as one self-contained HTML page a person can look
 * at (`ksearch report`): the grid, how the search climbed, what won and by
 * how much, where it came from, what failed, what the LLM did.
 *
 * ks_report_gather() reads an archive into a struct ks_report of plain
 * data from one pinned snapshot (archive.h), so it works while a search
 * writes.  What it reads is bounded whatever the archive's size: the
 * elites (one per filled cell), the metrics' history at KS_REPORT_HISTORY
 * points, the verdicts counted in KS_REPORT_SPANS spans of ids from the
 * verdict index, KS_REPORT_SAMPLE candidates spread evenly over the ids,
 * the best KS_REPORT_TOP, the best one's lineage and workloads, the
 * per-workload bests, the strategy prompts and the LLM usage: a few
 * thousand records at a million candidates.
 *
 * ks_report_write_html() writes the page: inline CSS and SVG, no script,
 * nothing fetched from anywhere, hover details as SVG <title>s.  Every
 * chart (an <svg class="chart">) has marks (elements of class "mark"), or
 * is replaced by a note saying why there is nothing to draw.
 *
 * Everything in a struct ks_report is owned by it; ks_report_free()
 * frees it.
 */
#ifndef KSEARCH_REPORT_H
#define KSEARCH_REPORT_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "ksearch/archive/archive.h"
#include "ksearch/base/error.h"
#include "ksearch/op/op.h"
#include "ksearch/op/verdict.h"

#define KS_REPORT_HISTORY 300	     /* points of the metrics' history */
#define KS_REPORT_SPANS 60	     /* spans of ids for the verdicts over time */
#define KS_REPORT_SAMPLE 2000	     /* candidates read, evenly over the ids */
#define KS_REPORT_TOP 20	     /* the best candidates listed */
#define KS_REPORT_LINEAGE 200	     /* ancestors of the best followed back */
#define KS_REPORT_ELITE_DETAILS 5000 /* elites whose records are read (the best ones) */
#define KS_REPORT_MAX_ANCHORS 8	     /* --compare timings per workload */

/* What the page says about one candidate. */
struct ks_report_candidate {
	uint64_t id;
	enum ks_verdict verdict;
	double fitness;	     /* 0 unless ok */
	double sol_fraction; /* < 0 when not recorded */
	double created;	     /* seconds since the epoch; < 0 when not recorded */
	char family[48];
	char mutation[16];
	char *params; /* "SPLITS=8 WARPS=4", "" for none */
	double descriptors[KS_DESC_COUNT];
	unsigned has_descriptor;   /* bit d: descriptors[d] was recorded */
	uint64_t parent;	   /* parents[0], or 0 */
	char *profile;		   /* its hardware counters as lines (profile.h), NULL when not profiled */
	char profile_workload[64]; /* the workload they were measured on */

	int detailed; /* 0: only id and fitness are known (an elite past the detail cap) */
};

/* One filled cell. */
struct ks_report_elite {
	uint64_t cell;
	size_t coords[KS_DESC_COUNT]; /* the bin along each grid axis */
	struct ks_report_candidate c;
};

/*
 * One point of the metrics' history, with the id and time of the candidate
 * that made it (the evals-th record, in id order).  The page draws it at
 * that id, as it draws every candidate and the verdicts: in a search's
 * archive ids are dense and an id is the evaluation's number; in a sample
 * of one (docs/example) the ids still count the search's evaluations.
 */
struct ks_report_point {
	uint64_t id;
	uint64_t evals; /* records in the archive when it was made */
	double best_fitness, coverage, qd_score;
	uint64_t cells_filled;
	double time; /* seconds since the epoch; < 0 when unknown */
};

/* A timing to compare with, from tools/compare-torch.py. */
struct ks_report_anchor {
	char name[48];
	double us;
};

/* One benchmark workload of the best candidate. */
struct ks_report_workload {
	char id[64];
	double best_us, ref_us, floor_us; /* the best candidate's; NAN when not recorded */
	double dispatch_us;		  /* the fastest candidate on this workload, NAN when unknown */
	uint64_t dispatch_id;
	struct ks_report_anchor anchors[KS_REPORT_MAX_ANCHORS];
	size_t n_anchors;
};

struct ks_report_strategy {
	uint64_t id;
	char *name;
	char origin[16];
	int active;
	double reward; /* (improvements + 0.25 ok) / uses, as the search scores it */
	uint64_t uses, children, ok, improvements;
	double best_fitness;
};

/* What the LLM's children in the sample cost (records with an "llm" object). */
struct ks_report_llm_sample {
	uint64_t children, ok;
	uint64_t prompt_tokens, completion_tokens;
	double cost_usd;
};

/* Children by mutation kind, over the sample. */
struct ks_report_mutation {
	char name[16];
	uint64_t count, ok;
};

struct ks_report {
	char *op, *gpu, *path;
	char generated[32]; /* when the snapshot was read, UTC */
	struct ks_grid_axis *axes;
	size_t n_axes;
	struct ks_archive_metrics metrics;
	double first_time; /* the first candidate's creation, < 0 when unknown */

	struct ks_report_elite *elites; /* in cell order */
	size_t n_elites;
	struct ks_report_point *history; /* oldest first */
	size_t n_history;
	struct ks_archive_verdict_span *spans;
	size_t n_spans;
	struct ks_report_candidate *sample; /* in id order */
	size_t n_sample;
	struct ks_report_candidate *top; /* best first */
	size_t n_top;
	struct ks_report_candidate *lineage; /* oldest first, ending with the best */
	size_t n_lineage;
	struct ks_report_workload *workloads; /* the best's, in its order */
	size_t n_workloads;
	double dispatch_fitness; /* 0 when no workload best is kept */
	struct ks_report_mutation *mutations;
	size_t n_mutations;
	struct ks_report_llm_sample llm_sample;

	struct ks_report_strategy *strategies; /* most rewarding first */
	size_t n_strategies;
	int has_llm_usage;
	uint64_t llm_requests, llm_failed, prompt_tokens, completion_tokens;
	double cost_usd;

	char *compare_file; /* --compare, as given; NULL without */
	char *compare_gpu;
	size_t compare_matched; /* workloads the file has timings for */
};

struct ks_report_options {
	/* tools/compare-torch.py's JSON ({"gpu", "copy_gbps", "rows": [{"id", "<name>_us" ...}]}), or NULL */
	const json_t *compare;
	const char *compare_file; /* its name, for the page */
};

/*
 * Read what the page shows from ar (opened read-only or not); the archive
 * is pinned while it reads and unpinned after.  A --compare document that
 * is not compare-torch.py's format fails, naming the field.
 */
int ks_report_gather(struct ks_archive *ar, const struct ks_report_options *opts, struct ks_report **out,
		     struct ks_error *err);

/* Write the page; fails only when out does. */
int ks_report_write_html(const struct ks_report *r, FILE *out, struct ks_error *err);

void ks_report_free(struct ks_report *r);

#endif
