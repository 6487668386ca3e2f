/*
 * evolve_cluster.c - evolve over the ranks of an MPI job (evolve_cluster.h).
 * The only file of the CLI that knows whether the build has MPI.
 */
#include "evolve_cluster.h"

#include <stdio.h>
#include <string.h>

#include "ksearch/base/util.h"

#ifdef KS_HAVE_MPI
#include <mpi.h>

#include "ksearch/base/frame.h"
#include "ksearch/cluster/cluster.h"
#endif

void evolve_cluster_detect(struct evolve_cluster *ec)
{
	memset(ec, 0, sizeof(*ec));
	ks_cluster_role_detect(&ec->role, NULL);
}

int evolve_cluster_active(const struct evolve_cluster *ec)
{
	return ec->role.size > 1;
}

void evolve_cluster_share(const struct evolve_cluster *ec, int *gpus, size_t *n, int all)
{
	size_t local_size = (size_t)ec->role.local_size, local_rank = (size_t)ec->role.local_rank, kept = 0;

	if (!*n || local_size < 2)
		return;
	if (!all || *n < local_size) {
		gpus[0] = gpus[local_rank % *n];
		*n = 1;
		return;
	}
	for (size_t i = local_rank; i < *n; i += local_size)
		gpus[kept++] = gpus[i];
	*n = kept;
}

#ifdef KS_HAVE_MPI

void evolve_cluster_library(char *buf, size_t size)
{
	char text[MPI_MAX_LIBRARY_VERSION_STRING];
	int len = 0;
	char *nl;

	/* callable before MPI_Init: it names the library this process loaded, not the headers */
	if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) {
		snprintf(buf, size, "linked, but the library does not say its version");
		return;
	}
	text[len < (int)sizeof(text) ? len : (int)sizeof(text) - 1] = 0;
	if ((nl = strchr(text, '\n')))
		*nl = 0;
	if ((nl = strchr(text, ',')) && !strncmp(text, "Open MPI", 8))
		*nl = 0; /* "Open MPI v4.1.4, package: ..., repo rev: ..." */
	snprintf(buf, size, "%s", text);
}

int evolve_cluster_start(struct evolve_cluster *ec, struct ks_error *err)
{
	if (ks_cluster_comm_open(&ec->comm, NULL, NULL, err) < 0)
		return -1;
	if (ks_cluster_comm_rank(ec->comm) != ec->role.rank ||
	    ks_cluster_comm_size(ec->comm) != ec->role.size)
		return ks_fail(err, "MPI says rank %d of %d, the launcher's environment (%s) rank %d of %d",
			       ks_cluster_comm_rank(ec->comm), ks_cluster_comm_size(ec->comm),
			       ec->role.launcher, ec->role.rank, ec->role.size);
	return 0;
}

int evolve_cluster_serve(struct evolve_cluster *ec, const struct ks_op *op, const struct ks_backend *local,
			 int jobs, const char *model, struct ks_error *err)
{
	struct ks_cluster_serve_options opts = { .jobs = jobs, .model = model };
	struct ks_cluster_serve_counts counts = { 0 };
	int rc = ks_cluster_serve(ec->comm, op, local, &opts, &counts, err);

	printf("MPI: rank %d of %d stopped: %lu candidates built, %lu timed here; %lu profiled, %lu "
	       "sanitizer-checked\n",
	       ec->role.rank, ec->role.size, counts.built, counts.timed, counts.profiled, counts.checked);
	fflush(stdout);
	return rc;
}

int evolve_cluster_backend(struct evolve_cluster *ec, const struct ks_backend *local, const char *model,
			   int *jobs, const struct ks_backend **backend, int *gpus, struct ks_error *err)
{
	struct ks_cluster_remote_options opts = { .local = local, .local_jobs = *jobs, .local_model = model };

	if (ks_cluster_remote_open(&ec->remote, ec->comm, &opts, err) < 0)
		return -1;
	*backend = ks_cluster_remote_backend(ec->remote);
	*jobs = ks_cluster_remote_jobs(ec->remote);
	*gpus = ks_cluster_remote_gpus(ec->remote);
	return 0;
}

int evolve_cluster_dead(struct evolve_cluster *ec, char *why, size_t size)
{
	return ec->remote ? ks_cluster_remote_dead(ec->remote, why, size) : 0;
}

void evolve_cluster_finish(struct evolve_cluster *ec, int status)
{
	if (ec->comm && ec->role.rank == 0 && !ec->remote) {
		/* rank 0 failed before its search began: the ranks waiting to serve it stop too */
		struct ks_cluster_msg stop;
		struct ks_error err;

		ks_cluster_msg_init(&stop, KS_CLUSTER_STOP);
		for (int i = 1; i < ec->role.size; i++)
			ks_cluster_comm_send(ec->comm, i, &stop, &err);
		ks_cluster_msg_release(&stop);
	}
	ks_cluster_remote_close(ec->remote);
	ec->remote = NULL;
	ks_cluster_comm_close(ec->comm, ks_now_ms() + 5000, status);
	ec->comm = NULL;
}

#else /* a build without MPI: one rank of several is refused before anything runs */

void evolve_cluster_library(char *buf, size_t size)
{
	if (size)
		buf[0] = 0;
}

int evolve_cluster_start(struct evolve_cluster *ec, struct ks_error *err)
{
	return ks_fail(err,
		       "this is rank %d of %d (%s), but this ksearch was built without MPI: each rank would "
		       "run a search of its own.  Build with MPI (Debian: apt-get install libopenmpi-dev "
		       "openmpi-bin; then meson setup --reconfigure -Dmpi=enabled build), or run one "
		       "ksearch per host without mpirun",
		       ec->role.rank, ec->role.size, ec->role.launcher);
}

int evolve_cluster_serve(struct evolve_cluster *ec, const struct ks_op *op, const struct ks_backend *local,
			 int jobs, const char *model, struct ks_error *err)
{
	(void)ec;
	(void)op;
	(void)local;
	(void)jobs;
	(void)model;
	return ks_fail(err, "this ksearch was built without MPI");
}

int evolve_cluster_backend(struct evolve_cluster *ec, const struct ks_backend *local, const char *model,
			   int *jobs, const struct ks_backend **backend, int *gpus, struct ks_error *err)
{
	(void)ec;
	(void)local;
	(void)model;
	(void)jobs;
	*backend = NULL;
	*gpus = 0;
	return ks_fail(err, "this ksearch was built without MPI");
}

int evolve_cluster_dead(struct evolve_cluster *ec, char *why, size_t size)
{
	(void)ec;
	if (size)
		why[0] = 0;
	return 0;
}

void evolve_cluster_finish(struct evolve_cluster *ec, int status)
{
	(void)ec;
	(void)status;
}

#endif
