/*
 * profile.h - hardware evidence: profiler counters of one candidate on one
 * workload, measured by Nsight Compute (ncu) in a process of their own.
 *
 * ks_profile_run() runs `ncu ... ksearch __profile_run ...`: the runner
 * (ks_profile_runner_main) compiles the candidate, makes the workload's
 * inputs from the op's generators, runs the launch sequence once to warm
 * up and once inside the profiler's window (cuProfilerStart/Stop, so that
 * ncu measures the candidate's launches and nothing of ksearch's own), and
 * exits.  Candidates are hostile: the runner is a child of ncu, itself a
 * child of ours in a process group that is killed at the deadline; a
 * crash or a hang there costs that process group only, never a timing
 * and never the coordinator.  The counters come back as ncu's CSV, parsed
 * here.
 *
 * What is collected, per launch and then weighted by the launches'
 * durations: DRAM throughput, SM throughput and achieved occupancy as
 * fractions of the GPU's peak, the L2 hit rate, the warp stall reasons
 * (the three largest, as shares of all stall cycles) and local-memory
 * (spill) traffic.  ncu runs with --clock-control none: the numbers
 * describe the kernel at the clocks it was timed at, and a profiler
 * killed at its deadline cannot leave the GPU's clocks locked for the
 * timings that follow.
 *
 * Everything here is plain data: struct ks_profile owns no memory.
 */
#ifndef KSEARCH_PROFILE_H
#define KSEARCH_PROFILE_H

#include <jansson.h>
#include <signal.h>
#include <stddef.h>

#include "ksearch/base/error.h"
#include "ksearch/op/op.h"

#define KS_PROFILE_STALLS 3	  /* stall reasons kept */
#define KS_PROFILE_MAX_KERNELS 16 /* launches kept one by one */

enum ks_profile_status {
	KS_PROFILE_OK,
	KS_PROFILE_FAILED,	/* this candidate: it crashed or hung under the profiler, nothing measured */
	KS_PROFILE_UNAVAILABLE, /* no profiler here: ncu missing, or it cannot work on this machine */
	KS_PROFILE_NO_PERMISSION, /* ncu may not read the GPU's counters (ERR_NVGPUCTRPERM) */
};

const char *ks_profile_status_name(enum ks_profile_status status);

struct ks_profile_kernel {
	char name[128];
	double duration_us;
	double dram_fraction, achieved_occupancy, l2_hit_rate, sm_throughput; /* 0..1 */
	double local_load_bytes, local_store_bytes;
};

struct ks_profile_stall {
	char reason[48]; /* ncu's name: "long_scoreboard" */
	double share;	 /* of all stall cycles, 0..1 */
};

struct ks_profile {
	char tool[64];	   /* "ncu 2025.3.1.0" */
	char workload[64]; /* the benchmark workload profiled */
	size_t launches;   /* launches measured */
	double duration_us;
	/* over the launches, weighted by duration */
	double dram_fraction, achieved_occupancy, l2_hit_rate, sm_throughput;
	double local_load_bytes, local_store_bytes; /* summed */
	struct ks_profile_stall stalls[KS_PROFILE_STALLS];
	size_t n_stalls;
	struct ks_profile_kernel kernels[KS_PROFILE_MAX_KERNELS];
	size_t n_kernels;
	double seconds; /* what profiling took, wall clock, the profiler's start included */
};

/* The metrics ksearch asks ncu for (its --metrics value). */
extern const char ks_profile_ncu_metrics[];

/*
 * Parse ncu's CSV (--csv --page details --print-units base: one row per
 * kernel and metric) into out; lines that are not CSV rows (ncu's
 * "==PROF==" messages) are skipped.  Fails when no launch was measured or
 * a value is not a number, naming the row.
 */
int ks_profile_parse_ncu_csv(const char *text, struct ks_profile *out, struct ks_error *err);

/* The record's "profile" object (archive/README.md has its fields); a new reference. */
json_t *ks_profile_to_json(const struct ks_profile *p);

/*
 * A few plain lines from a record's "profile" object, for people and the
 * LLM: "DRAM throughput 62% of peak, SM throughput 35% of peak, L2 hit
 * rate 41%", "achieved occupancy 0.23", "warp stalls: long scoreboard
 * 61%, barrier 12%, wait 8%", "local memory (spills): none", each line
 * starting with prefix.  Caller frees; NULL when profile is not an object.
 */
char *ks_profile_text(const json_t *profile, const char *prefix);

/* The benchmark workload profiled unless another is asked for: the one with the most min_bytes. */
const struct ks_workload *ks_profile_default_workload(const struct ks_op *op);

/* The profiler to run: given, else $KSEARCH_NCU, ncu on PATH, /usr/local/cuda/bin/ncu. Caller frees; NULL:
 * none. */
char *ks_profile_find_ncu(const char *given);

struct ks_profile_request {
	const struct ks_op *op;
	const char *source;	   /* the candidate's text */
	const char *path;	   /* its name in messages */
	const char *const *params; /* "NAME=VALUE" each */
	size_t n_params;
	const char *workload; /* a benchmark workload id; NULL: ks_profile_default_workload() */
	int gpu;
	int timeout_ms;			     /* the whole profile, the profiler's start included; 0: 120 s */
	const char *ncu;		     /* the profiler: NULL for ks_profile_find_ncu()'s choice */
	const char *raw_path;		     /* when set, ncu's output (its CSV) is copied to this file */
	const volatile sig_atomic_t *cancel; /* may be NULL; set: kill the profiler and return FAILED */
};

struct ks_profile_outcome {
	enum ks_profile_status status;
	char why[KS_ERROR_MAX]; /* not ok: what happened, and for the last two statuses what to do */
	struct ks_profile profile;
	double held_s; /* how long it held its GPU, timed where it ran: what the search's budget counts */
};

/*
 * The outcome as it travels between the ranks of a job: {"status", "why",
 * "profile": ks_profile_to_json()'s object}, every field, read back equal
 * (doubles are written with 17 digits).  A new reference; NULL when the
 * outcome cannot be read back whole: a status without a name, more stalls
 * or kernels than the struct holds, a number that is not finite, text
 * that is not UTF-8.
 */
json_t *ks_profile_outcome_to_json(const struct ks_profile_outcome *o);

/*
 * Read what ks_profile_outcome_to_json() wrote into *out.  Refuses (-1,
 * *out zeroed, err naming the field: "profile.kernels[2].name: 130 bytes,
 * more than the 127 it may have") anything the struct cannot hold as
 * sent: an unknown status, a missing field or one of the wrong type, text
 * too long for its array, more stalls or kernels than kept, a number that
 * is not finite, a negative count, duration or byte count.  Keys it does
 * not know ("profiled") are ignored.
 */
int ks_profile_outcome_from_json(const json_t *obj, struct ks_profile_outcome *out, struct ks_error *err);

/*
 * Profile one candidate.  Returns 0 with out->status saying how it went,
 * or -1 when ksearch itself failed (no temporary folder).
 */
int ks_profile_run(const struct ks_profile_request *req, struct ks_profile_outcome *out,
		   struct ks_error *err);

/*
 * What `ksearch __profile_run` was given (src/cli/internal.c fills it).
 * For the profiler: one workload, run once to warm up and once inside
 * cuProfilerStart/Stop.  With plain (the sanitizer's run, sanitize.h):
 * each workload once, in order, with no profiler window, every buffer
 * allocated at its exact size and freed before the next workload, and
 * stderr as well as stdout sent to /dev/null (the sanitizer's output is
 * read, and nothing of the candidate's may pass for it).
 */
struct ks_profile_runner_args {
	const char *op_dir;
	const char *source_file;
	const char *path; /* the candidate's name in messages */
	const char *const *params;
	size_t n_params;
	const char *const *workloads;
	size_t n_workloads;
	int plain;
	int gpu;
	/*
	 * {"ok": true, "device", "arch", "workloads": [...], "launches",
	 * "smem_bytes": the most shared memory (static + dynamic) a launch
	 * uses} or {"ok": false, "error": "...", "workload": "..."}
	 */
	const char *result_file;
	int deadline_s; /* the runner ends itself after this long */
};

/* The runner's main: the process ncu (or compute-sanitizer) runs.  Returns the exit code. */
int ks_profile_runner_main(const struct ks_profile_runner_args *args);

#endif
