/*
 * cpus.c - a core of its own for each GPU worker (cpus.h says why).
 */
#include "ksearch/base/cpus.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>
#include <unistd.h>

#include "ksearch/base/util.h"

#define SYSFS_CPU_DIR "/sys/devices/system/cpu"

/* "0-3,8,10-11" into set (cleared first); -1 on anything else. */
static int parse_list(const char *text, cpu_set_t *set)
{
	const char *p = text;

	CPU_ZERO(set);
	while (*p && *p != '\n') {
		char *end;
		long lo = strtol(p, &end, 10), hi = lo;

		if (end == p || lo < 0 || lo >= CPU_SETSIZE)
			return -1;
		p = end;
		if (*p == '-') {
			hi = strtol(p + 1, &end, 10);
			if (end == p + 1 || hi < lo || hi >= CPU_SETSIZE)
				return -1;
			p = end;
		}
		for (long c = lo; c <= hi; c++)
			CPU_SET((int)c, set);
		if (*p == ',')
			p++;
		else if (*p && *p != '\n')
			return -1;
	}
	return CPU_COUNT(set) ? 0 : -1;
}

/* cpu's hardware threads among allowed: its sysfs siblings, else cpu alone. */
static void core_of(int cpu, const cpu_set_t *allowed, const char *sysfs_cpu_dir, cpu_set_t *core)
{
	char path[4096], text[1024];
	cpu_set_t siblings;
	FILE *f;
	int ok = 0;

	snprintf(path, sizeof(path), "%s/cpu%d/topology/thread_siblings_list", sysfs_cpu_dir, cpu);
	if ((f = fopen(path, "r"))) {
		ok = fgets(text, sizeof(text), f) && !parse_list(text, &siblings) &&
		     CPU_ISSET(cpu, &siblings);
		fclose(f);
	}
	CPU_ZERO(core);
	if (!ok) {
		CPU_SET(cpu, core);
		return;
	}
	CPU_AND(core, &siblings, allowed);
}

void ks_cpu_plan_make(const cpu_set_t *allowed, const char *sysfs_cpu_dir, int host_gpus,
		      struct ks_cpu_plan *plan)
{
	cpu_set_t taken, *cores;
	int n_cores = 0;

	memset(plan, 0, sizeof(*plan));
	plan->rest = *allowed;
	plan->allowed_cpus = plan->rest_cpus = CPU_COUNT(allowed);
	if (host_gpus < 1 || host_gpus > KS_CPU_PLAN_MAX_GPUS)
		return;
	/* the cores in the order of their first CPU */
	cores = ks_calloc(CPU_SETSIZE, sizeof(*cores));
	CPU_ZERO(&taken);
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, allowed) || CPU_ISSET(c, &taken))
			continue;
		core_of(c, allowed, sysfs_cpu_dir, &cores[n_cores]);
		/* a sibling list that disagrees with an earlier one takes no CPU twice */
		for (int t = 0; t < CPU_SETSIZE; t++)
			if (CPU_ISSET(t, &taken))
				CPU_CLR(t, &cores[n_cores]);
		CPU_OR(&taken, &taken, &cores[n_cores]);
		n_cores++;
	}
	if (n_cores - host_gpus >= KS_CPU_PLAN_CORES_PER_GPU * host_gpus) {
		plan->n_reserved = host_gpus;
		for (int g = 0; g < host_gpus; g++) {
			plan->reserved[g] = cores[n_cores - 1 - g];
			for (int c = 0; c < CPU_SETSIZE; c++)
				if (CPU_ISSET(c, &plan->reserved[g]))
					CPU_CLR(c, &plan->rest);
		}
		plan->rest_cpus = CPU_COUNT(&plan->rest);
	}
	free(cores);
}

long ks_cpu_share(long online, long allowed, int local_ranks)
{
	long share;

	if (allowed > 0 && (online < 1 || allowed < online))
		share = allowed;
	else
		share = online / (local_ranks > 1 ? local_ranks : 1);
	return share < 1 ? 1 : share;
}

int ks_cpu_host_gpus(const char *gpus_dir)
{
	DIR *d = opendir(gpus_dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static int by_name(const void *a, const void *b)
{
	return strcasecmp(*(char *const *)a, *(char *const *)b);
}

int ks_cpu_host_gpu_index(const char *gpus_dir, int domain, int bus, int device)
{
	char want[32], **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	int index = -1;
	DIR *d;

	snprintf(want, sizeof(want), "%04x:%02x:%02x.", (unsigned)domain, (unsigned)bus, (unsigned)device);
	if (!(d = opendir(gpus_dir)))
		return -1;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			names = ks_realloc(names, cap * sizeof(*names));
		}
		names[n++] = ks_strdup(e->d_name);
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 0; i < n; i++)
		if (index < 0 && !strncasecmp(names[i], want, strlen(want)))
			index = (int)i;
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return index;
}

static struct ks_cpu_plan host_plan;
static pthread_once_t host_plan_once = PTHREAD_ONCE_INIT;

static void make_host_plan(void)
{
	const char *pin = getenv("KSEARCH_PIN_WORKERS");
	cpu_set_t allowed;

	if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0) {
		CPU_ZERO(&allowed);
		for (long c = 0, n = sysconf(_SC_NPROCESSORS_ONLN); c < n && c < CPU_SETSIZE; c++)
			CPU_SET((int)c, &allowed);
	}
	ks_cpu_plan_make(&allowed, SYSFS_CPU_DIR,
			 pin && !strcmp(pin, "0") ? 0 : ks_cpu_host_gpus(KS_NVIDIA_GPUS_DIR), &host_plan);
}

const struct ks_cpu_plan *ks_cpu_plan_host(void)
{
	pthread_once(&host_plan_once, make_host_plan);
	return &host_plan;
}

void ks_cpu_host_kind_read(const char *cpuinfo, long online_cpus, const char *gpus_dir,
			   struct ks_host_kind *out)
{
	char line[512];
	FILE *f = fopen(cpuinfo, "r");

	memset(out, 0, sizeof(*out));
	while (f && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':'), *v, *end;

		if (strncmp(line, "model name", 10) || !colon)
			continue;
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		end = v + strlen(v);
		while (end > v && (end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		snprintf(out->cpu_model, sizeof(out->cpu_model), "%s", v);
		break;
	}
	if (f)
		fclose(f);
	out->cpus = online_cpus > 0 && online_cpus < 1 << 20 ? (int)online_cpus : 0;
	out->gpus = ks_cpu_host_gpus(gpus_dir);
}

static struct ks_host_kind host_kind;
static pthread_once_t host_kind_once = PTHREAD_ONCE_INIT;

static void read_host_kind(void)
{
	ks_cpu_host_kind_read("/proc/cpuinfo", sysconf(_SC_NPROCESSORS_ONLN), KS_NVIDIA_GPUS_DIR, &host_kind);
}

const struct ks_host_kind *ks_cpu_host_kind(void)
{
	pthread_once(&host_kind_once, read_host_kind);
	return &host_kind;
}

void ks_cpu_set_format(const cpu_set_t *set, char *out, size_t size)
{
	size_t len = 0;

	if (size)
		out[0] = '\0';
	for (int c = 0; c < CPU_SETSIZE && len + 1 < size; c++) {
		int hi = c;
		int n;

		if (!CPU_ISSET(c, set))
			continue;
		while (hi + 1 < CPU_SETSIZE && CPU_ISSET(hi + 1, set))
			hi++;
		n = hi == c ? snprintf(out + len, size - len, "%s%d", len ? "," : "", c)
			    : snprintf(out + len, size - len, "%s%d-%d", len ? "," : "", c, hi);
		if (n < 0 || (size_t)n >= size - len) {
			out[len] = '\0';
			return;
		}
		len += (size_t)n;
		c = hi;
	}
}

int ks_cpu_pin_process(const struct ks_cpu_plan *plan, int g, char *cpus, size_t size)
{
	struct dirent *e;
	int ret = 1;
	DIR *d;

	if (size)
		cpus[0] = '\0';
	if (g < 0 || g >= plan->n_reserved)
		return 0;
	/* the process's threads so far (the driver's among them); later ones inherit */
	if (!(d = opendir("/proc/self/task")))
		return sched_setaffinity(0, sizeof(plan->reserved[g]), &plan->reserved[g]) < 0 ? -1 : 1;
	while ((e = readdir(d))) {
		pid_t tid = (pid_t)strtol(e->d_name, NULL, 10);

		if (tid > 0 && sched_setaffinity(tid, sizeof(plan->reserved[g]), &plan->reserved[g]) < 0 &&
		    errno != ESRCH)
			ret = -1;
	}
	closedir(d);
	if (ret == 1)
		ks_cpu_set_format(&plan->reserved[g], cpus, size);
	return ret;
}
