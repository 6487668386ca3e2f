/*
 * role.c - the rank and the size of an MPI job, from its launcher's environment.
 */
#include "ksearch/cluster/role.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

static const char *env_get(char *const *env, const char *name)
{
	size_t n = strlen(name);

	for (; env && *env; env++)
		if (!strncmp(*env, name, n) && (*env)[n] == '=')
			return *env + n + 1;
	return NULL;
}

/* name's value as a number in [lo, hi], or -1. */
static long env_number(char *const *env, const char *name, long lo, long hi)
{
	const char *text = env_get(env, name);
	char *end;
	long v;

	if (!text || !*text)
		return -1;
	errno = 0;
	v = strtol(text, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	return v;
}

/*
 * SLURM's tasks per node, as SLURM_STEP_TASKS_PER_NODE writes them
 * ("2(x3),1": 2 on each of the first three nodes, 1 on the fourth): node's
 * count, or -1.
 */
static long slurm_tasks_on(const char *text, long node)
{
	while (text && *text) {
		char *end;
		long count = strtol(text, &end, 10), repeat = 1;

		if (end == text || count < 1)
			return -1;
		if (!strncmp(end, "(x", 2)) {
			repeat = strtol(end + 2, &end, 10);
			if (repeat < 1 || *end != ')')
				return -1;
			end++;
		}
		if (node < repeat)
			return count;
		node -= repeat;
		if (*end != ',')
			return -1;
		text = end + 1;
	}
	return -1;
}

void ks_cluster_role_detect(struct ks_cluster_role *role, char *const *env)
{
	/* the launchers' names for (size, rank) and (local size, local rank), the most specific first */
	static const struct {
		const char *size, *rank, *local_size, *local_rank, *launcher;
	} vars[] = {
		{ "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
		  "OMPI_COMM_WORLD_LOCAL_RANK", "Open MPI" },
		{ "PMI_SIZE", "PMI_RANK", "MPI_LOCALNRANKS", "MPI_LOCALRANKID", "MPICH (PMI)" },
		/* the step's, not the allocation's: a batch script run by hand is not several ranks */
		{ "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", NULL, "SLURM_LOCALID", "SLURM" },
	};

	if (!env)
		env = environ;
	*role = (struct ks_cluster_role){
		.rank = 0, .size = 1, .local_rank = 0, .local_size = 1, .launcher = ""
	};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		long size = env_number(env, vars[i].size, 1, 1 << 20);
		long rank = size > 0 ? env_number(env, vars[i].rank, 0, size - 1) : -1;
		long local_size, local_rank;

		if (size < 1 || rank < 0)
			continue;
		if (vars[i].local_size) {
			local_size = env_number(env, vars[i].local_size, 1, size);
		} else {
			long node = env_number(env, "SLURM_NODEID", 0, size - 1);

			local_size =
				node < 0 ? -1
					 : slurm_tasks_on(env_get(env, "SLURM_STEP_TASKS_PER_NODE"), node);
			if (local_size > size)
				local_size = -1;
		}
		local_rank = local_size > 0 ? env_number(env, vars[i].local_rank, 0, local_size - 1) : -1;
		if (local_rank < 0) {
			/* not told: as if alone on its host */
			local_size = 1;
			local_rank = 0;
		}
		*role = (struct ks_cluster_role){ .rank = (int)rank,
						  .size = (int)size,
						  .local_rank = (int)local_rank,
						  .local_size = (int)local_size,
						  .launcher = vars[i].launcher };
		return;
	}
}
