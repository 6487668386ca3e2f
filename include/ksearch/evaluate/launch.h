/*
 * launch.h - queueing a candidate's launch sequence, as its contract says.
 *
 * The one place that turns a candidate's launch plan (candidate.h) and a
 * workload's buffers into kernel launches: the zeroing of "zeroed"
 * scratch, then each launch with its arguments packed by kind (device
 * pointers, axes as int, scalars in their dtype) and programmatic
 * dependent launch where the contract asks for it.  The GPU worker
 * (worker.c) times what this queues; the profile runner (profile.h) runs
 * it under the profiler, so both run a kernel exactly the same way.
 *
 * Nothing is synchronised: every call goes on the given stream, and a
 * kernel's own failure shows at the caller's next synchronisation.
 */
#ifndef KSEARCH_LAUNCH_H
#define KSEARCH_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/evaluate/cuda.h"
#include "ksearch/op/candidate.h"
#include "ksearch/op/op.h"

/* At most this many arguments per launch. */
#define KS_LAUNCH_MAX_ARGS 64

/* Where a workload's data lives on the device; all borrowed. */
struct ks_launch_buffers {
	const CUdeviceptr *inputs;  /* per op input (unused for scalar inputs) */
	const double *scalars;	    /* per op input: the value of each scalar input */
	const CUdeviceptr *outputs; /* per op output */
	const CUdeviceptr *scratch; /* per candidate scratch buffer, plan->scratch_bytes[i] long */
};

/* Why a launch sequence could not be queued, and whose fault that is. */
enum ks_launch_failure {
	KS_LAUNCH_OK,
	KS_LAUNCH_CUDA,	       /* the driver refused a call (cuda_rc): the candidate's problem (a crash) */
	KS_LAUNCH_CONTRACT,    /* the plan cannot be launched as written (too many arguments) */
	KS_LAUNCH_UNSUPPORTED, /* the driver lacks what the plan asks for (pdl before CUDA 12) */
	KS_LAUNCH_INTERNAL,    /* ksearch cannot pass an argument of this kind yet */
};

struct ks_launch_error {
	enum ks_launch_failure failure;
	CUresult cuda_rc;
	char what[512]; /* "workload b16: launching decode_split" (CUDA's words are the caller's to add) */
};

/*
 * Queue cand's launch sequence for workload wl on stream: fns holds the
 * kernel of each launch, plan the resolved dimensions.  Returns 0, or -1
 * with why filled.
 */
int ks_launch_sequence(const struct ks_cuda *cu, CUstream stream, const struct ks_op *op,
		       const struct ks_candidate *cand, const CUfunction *fns, const struct ks_plan *plan,
		       const struct ks_workload *wl, const struct ks_launch_buffers *bufs,
		       struct ks_launch_error *why);

#endif
