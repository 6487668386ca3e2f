/*
 * cluster.h - one search over the ranks of an MPI job (docs/design.md, "Many
 * hosts (MPI)").  Built only with -Dmpi=enabled (or auto, when Open MPI or
 * MPICH is found through pkg-config); nothing here is reached unless
 * role.h says the process is one of several ranks.
 *
 * Rank 0 runs the search as on one host; its backend is a remote one
 * (ks_cluster_remote): build() hands the candidate (family name, path,
 * source, params) to a rank with room, which compiles it on its own cores
 * and answers the build's result, keeping an ok build; the search
 * dedups twins by the result's fingerprint as ever; evaluate() asks that
 * rank to time it on one of its GPUs, and gets the final result back.  A
 * candidate is built and timed on the same rank: no cubin crosses the
 * network.  Every other rank runs ks_cluster_serve() over its local backend
 * (the real one: ks_gpu_build and ks_gpu_evaluate in its compile
 * processes and GPU workers).
 *
 * Threads: in each process one thread calls MPI (MPI_THREAD_SERIALIZED
 * is all that is asked of the library): on rank 0 a pump thread of the
 * remote backend, on the others ks_cluster_serve()'s caller.  The search's
 * compile and lane threads only queue messages and wait for answers.
 */
#ifndef KSEARCH_CLUSTER_H
#define KSEARCH_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/base/error.h"
#include "ksearch/cluster/message.h"
#include "ksearch/evaluate/backend.h"
#include "ksearch/op/op.h"

/* ---- the transport: MPI_COMM_WORLD, one tag, messages of message.h ---- */

struct ks_cluster_comm;

/*
 * MPI_Init_thread (SERIALIZED) with errors returned, not fatal; *out is
 * the caller's, closed with ks_cluster_comm_close().  Call only when role.h
 * found more than one rank.
 */
int ks_cluster_comm_open(struct ks_cluster_comm **out, int *argc, char ***argv, struct ks_error *err);
int ks_cluster_comm_rank(const struct ks_cluster_comm *c);
int ks_cluster_comm_size(const struct ks_cluster_comm *c);
/* Queue msg (copied) for rank; MPI sends it in the background (ks_cluster_comm_poll() moves it on). */
int ks_cluster_comm_send(struct ks_cluster_comm *c, int rank, const struct ks_cluster_msg *msg,
			 struct ks_error *err);
/* The same with bytes that need not be a message (tests send malformed ones). */
int ks_cluster_comm_send_bytes(struct ks_cluster_comm *c, int rank, const void *bytes, size_t len,
			       struct ks_error *err);
/*
 * Take one message if one has arrived: 1 with *from and *msg (release
 * it), 0 when none has, -1 with *from when what arrived was not a
 * well-formed message (err says what was wrong, naming the rank; it is
 * consumed) or MPI failed (*from -1).
 */
int ks_cluster_comm_poll(struct ks_cluster_comm *c, int *from, struct ks_cluster_msg *msg,
			 struct ks_error *err);
/* the search's lanes per GPU of the ranks (ks_cluster_remote_options.lanes_per_gpu) */
#define KS_CLUSTER_LANES_PER_GPU 3

/* how long a profile or check waits for its rank to finish the candidates it holds */
#define KS_CLUSTER_DRAIN_MS 10000

/* how long MPI_Finalize may take before the process exits without it */
#define KS_CLUSTER_FINALIZE_MS 10000
/*
 * Wait up to deadline_ms (monotonic, ks_now_ms()) for queued sends, then
 * MPI_Finalize; frees c.  status is the exit status the process is about
 * to have: when a rank of the job has died Finalize can wait for ever, so
 * if it has not returned KS_CLUSTER_FINALIZE_MS after the deadline the
 * process exits there, with status.
 */
void ks_cluster_comm_close(struct ks_cluster_comm *c, int64_t deadline_ms, int status);

/* ---- rank 0: the search's backend, whose lanes are the other ranks' GPUs ---- */

struct ks_cluster_remote_options {
	int64_t hello_ms;      /* wait this long for every rank's hello (0: 60 s) */
	int64_t dead_after_ms; /* a rank with work that says nothing this long is dead (0: 30 s) */
	int64_t build_ms;      /* a job's deadline on its rank, to build (0: 10 min) */
	int64_t eval_ms;       /* and to time (0: 10 min) */
	/*
	 * The search's lanes per GPU (0: KS_CLUSTER_LANES_PER_GPU).  A lane
	 * does not pick the rank that times its candidate (the build's rank
	 * does), so with one lane per GPU two lanes often wait on one rank's
	 * GPU while another's idles (4 lanes over 4 ranks cover 2.7 of them on
	 * average); with three per GPU a rank queues the extra evals and its
	 * GPU is fed.
	 */
	int lanes_per_gpu;
	/*
	 * Rank 0's own GPUs, a backend of this process (NULL: only the other
	 * ranks build and time).  A job placed here is built and timed in the
	 * search thread that waits on it.  With it the backend profiles and
	 * checks with the sanitizer too, on every rank in turn (these lanes
	 * among them).  Its GPU model and evaluator are the ones every other
	 * rank must have.
	 */
	const struct ks_backend *local;
	int local_jobs;		 /* compile threads rank 0 runs for it */
	const char *local_model; /* its GPUs' model */
};

struct ks_cluster_remote;

/*
 * Wait for every other rank's hello, check that all run one GPU model and
 * evaluator generation (one archive holds one model's timings), and start
 * the pump thread.  The backend's lanes are the ranks' GPUs, all of them
 * (rank 0's own with opts->local); a candidate is timed on the rank that
 * built it, whichever lane asks.
 */
int ks_cluster_remote_open(struct ks_cluster_remote **out, struct ks_cluster_comm *c,
			   const struct ks_cluster_remote_options *opts, struct ks_error *err);
/* The backend to hand ks_search_run(); valid until ks_cluster_remote_close(). */
const struct ks_backend *ks_cluster_remote_backend(struct ks_cluster_remote *r);
/* The compile threads the search should run: every rank's jobs, so that each stays fed. */
int ks_cluster_remote_jobs(const struct ks_cluster_remote *r);
/* Every rank's GPUs (the backend's lanes are lanes_per_gpu times as many). */
int ks_cluster_remote_gpus(const struct ks_cluster_remote *r);
/* The ranks' GPU model. */
const char *ks_cluster_remote_model(const struct ks_cluster_remote *r);
/* Ranks found dead (silent, or sending what is not a message) so far; why the first was. */
int ks_cluster_remote_dead(struct ks_cluster_remote *r, char *why, size_t size);
/*
 * Tell every live rank to stop (each finishes and answers what it holds),
 * wait for their byes up to the hello deadline, and free r.  The comm
 * stays open.
 */
void ks_cluster_remote_close(struct ks_cluster_remote *r);

/* ---- ranks > 0 ---- */

/* how long a serving rank waits without a word from rank 0 (which says alive every second) */
#define KS_CLUSTER_SILENT_MS 120000

struct ks_cluster_serve_options {
	int jobs;	   /* compile threads */
	const char *model; /* local's GPUs' model */
	int64_t silent_ms; /* give up when rank 0 says nothing this long (0: KS_CLUSTER_SILENT_MS) */
};

struct ks_cluster_serve_counts {
	unsigned long built, timed;	 /* candidates this rank built (a verdict or a build) and timed */
	unsigned long profiled, checked; /* profiles and sanitizer checks it answered with an outcome */
};

/*
 * Serve rank 0 with local (this rank's backend: op's candidates,
 * opts->jobs compile threads, local->lanes GPU lanes, opts->model its GPUs'
 * model) until rank 0 says stop, or says nothing for opts->silent_ms (an
 * error: rank 0 is gone): say hello, then build every job on a compile thread,
 * answer built (keeping an ok build), time it on a free lane when rank 0
 * says eval, answer the result; while one candidate is timed the next
 * ones compile.  Returns 0 after stop, every job in flight answered; -1
 * when ksearch itself failed (err).  counts (may be NULL): what this rank
 * did, either way.
 */
int ks_cluster_serve(struct ks_cluster_comm *c, const struct ks_op *op, const struct ks_backend *local,
		     const struct ks_cluster_serve_options *opts, struct ks_cluster_serve_counts *counts,
		     struct ks_error *err);

#endif
