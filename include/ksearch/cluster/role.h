/*
 * role.h - is this process one rank of several in an MPI job?
 *
 * Read from what the launcher puts in the environment (mpirun of Open MPI
 * or MPICH, srun), without loading MPI: a process that is not one of
 * several ranks does nothing different at all, and MPI_Init is called
 * only when size > 1 (docs/design.md, "Many hosts (MPI)").
 */
#ifndef KSEARCH_CLUSTER_ROLE_H
#define KSEARCH_CLUSTER_ROLE_H

struct ks_cluster_role {
	int rank;	      /* 0: the coordinator (archive, search, LLM); > 0: serves rank 0 */
	int size;	      /* ranks in the job; 1 when not launched by an MPI launcher */
	int local_rank;	      /* among the ranks on this host (0 when the launcher does not say) */
	int local_size;	      /* ranks on this host (1 when the launcher does not say) */
	const char *launcher; /* "Open MPI", "MPICH (PMI)", "SLURM", or "" (static text) */
};

/*
 * Fill *role from env (the process's environment when NULL; a test passes
 * its own as "NAME=VALUE" strings, NULL-terminated).  A variable that does
 * not hold a number in range counts as absent: size 1, rank 0.
 */
void ks_cluster_role_detect(struct ks_cluster_role *role, char *const *env);

#endif
