/*
 * evolve_cluster.h - evolve's part in an MPI job (docs/design.md, "Many
 * hosts (MPI)"): rank 0 searches with a backend whose lanes are every
 * rank's GPUs, its own included; every other rank serves it.  Outside an
 * MPI job (or in one of one rank) none of this does anything.
 */
#ifndef KSEARCH_CLI_EVOLVE_CLUSTER_H
#define KSEARCH_CLI_EVOLVE_CLUSTER_H

#include <stddef.h>

#include "ksearch/base/error.h"
#include "ksearch/cluster/role.h"
#include "ksearch/evaluate/backend.h"
#include "ksearch/op/op.h"

struct ks_cluster_comm;
struct ks_cluster_remote;

struct evolve_cluster {
	struct ks_cluster_role role;
	struct ks_cluster_comm *comm;	  /* NULL until evolve_cluster_start() */
	struct ks_cluster_remote *remote; /* rank 0's, NULL until evolve_cluster_backend() */
};

/* The MPI library this binary runs on ("Open MPI v4.1.4", "MPICH Version: 4.2.0"); "" without MPI. */
void evolve_cluster_library(char *buf, size_t size);

/* Who this process is, from the launcher's environment; loads no MPI. */
void evolve_cluster_detect(struct evolve_cluster *ec);
/* 1 when this process is one rank of several. */
int evolve_cluster_active(const struct evolve_cluster *ec);

/*
 * This rank's GPUs out of the host's: with all, the share of the host's
 * `*n` GPUs (gpus[]) that falls to this local rank (every local_size-th
 * one, from local_rank; one shared GPU when the ranks outnumber them);
 * without (the default of one GPU), GPU local_rank of them.  Rewrites
 * gpus and *n in place.
 */
void evolve_cluster_share(const struct evolve_cluster *ec, int *gpus, size_t *n, int all);

/* MPI_Init, after the GPU workers have started (fork before MPI); fails in a build without MPI. */
int evolve_cluster_start(struct evolve_cluster *ec, struct ks_error *err);

/* A rank > 0: serve rank 0 with this host's backend until it says stop. */
int evolve_cluster_serve(struct evolve_cluster *ec, const struct ks_op *op, const struct ks_backend *local,
			 int jobs, const char *model, struct ks_error *err);

/*
 * Rank 0: wait for every rank's hello and give the backend to search
 * with (lanes over every rank's GPUs, local's first; *gpus of them) and
 * the compile threads it should run (*jobs: in, rank 0's own; out, every
 * rank's).
 */
int evolve_cluster_backend(struct evolve_cluster *ec, const struct ks_backend *local, const char *model,
			   int *jobs, const struct ks_backend **backend, int *gpus, struct ks_error *err);
/* Rank 0: the ranks given up as dead so far; why the first was. */
int evolve_cluster_dead(struct evolve_cluster *ec, char *why, size_t size);

/* Stop the other ranks (rank 0), then MPI_Finalize; status: the exit status the process will have. */
void evolve_cluster_finish(struct evolve_cluster *ec, int status);

#endif
