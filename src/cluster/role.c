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

void ks_cluster_role_detect(struct ks_cluster_role *role, char *const *env)
{
	/* the launchers' names for (size, rank), the most specific first */
	static const struct {
		const char *size, *rank, *launcher;
	} vars[] = {
		{ "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "Open MPI" },
		{ "PMI_SIZE", "PMI_RANK", "MPICH (PMI)" },
		/* the step's, not the allocation's: a batch script run by hand is not several ranks */
		{ "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM" },
	};

	if (!env)
		env = environ;
	*role = (struct ks_cluster_role){ .rank = 0, .size = 1, .launcher = "" };
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		long size = env_number(env, vars[i].size, 1, 1 << 20);
		long rank = size > 0 ? env_number(env, vars[i].rank, 0, size - 1) : -1;

		if (size < 1 || rank < 0)
			continue;
		*role = (struct ks_cluster_role){ .rank = (int)rank,
						  .size = (int)size,
						  .launcher = vars[i].launcher };
		return;
	}
}
