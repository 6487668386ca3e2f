/*
 * cpus.h - a core of its own for each GPU worker on a host, which the
 * compile processes leave alone.
 *
 * A GPU worker spins on the CPU while its GPU runs and compares outputs on
 * the host between runs; a compile process on the same core, or on the
 * core's other hardware thread, stretches both (BENCHMARKS.md, "Issue 27:
 * a core for each GPU worker").  Every process on a host (each MPI rank,
 * each worker) derives the same plan from the same inputs: the CPUs it may
 * run on, how they pair into cores (sysfs), and how many GPUs the host has
 * (KS_NVIDIA_GPUS_DIR); the host's GPU g, in PCI order, gets the
 * g-th core from the end.  So ranks that share a host agree without
 * talking, and a GPU's worker keeps its core whichever rank started it.
 */
#ifndef KSEARCH_CPUS_H
#define KSEARCH_CPUS_H

#include <sched.h>
#include <stddef.h>

/* Where the NVIDIA driver lists the host's GPUs, a folder each, named by PCI address. */
#define KS_NVIDIA_GPUS_DIR "/proc/driver/nvidia/gpus"

/* Hosts with more GPUs than this get no plan. */
#define KS_CPU_PLAN_MAX_GPUS 64
/* A plan only where the compile processes keep at least this many cores for each one reserved. */
#define KS_CPU_PLAN_CORES_PER_GPU 2

struct ks_cpu_plan {
	int allowed_cpus; /* the CPUs the process may use */
	int n_reserved;	  /* the host's GPUs, one core each; 0: no plan, nothing is pinned */
	int rest_cpus;	  /* CPUs in rest */
	cpu_set_t rest;	  /* the allowed CPUs outside every reserved core: the compile processes' */
	cpu_set_t reserved[KS_CPU_PLAN_MAX_GPUS]; /* GPU g's core (its hardware threads) */
};

/*
 * The plan for allowed CPUs, the topology under sysfs_cpu_dir (normally
 * /sys/devices/system/cpu: cpuN/topology/thread_siblings_list; a CPU
 * without one is a core of its own) and host_gpus GPUs.  No plan
 * (n_reserved 0) when host_gpus is 0 or too large, or when reserving
 * would leave fewer than KS_CPU_PLAN_CORES_PER_GPU cores a GPU.
 */
void ks_cpu_plan_make(const cpu_set_t *allowed, const char *sysfs_cpu_dir, int host_gpus,
		      struct ks_cpu_plan *plan);

/*
 * This host's plan, made once from the process's affinity, sysfs and
 * KS_NVIDIA_GPUS_DIR; no plan when KSEARCH_PIN_WORKERS is 0.
 */
const struct ks_cpu_plan *ks_cpu_plan_host(void);

/*
 * The CPUs one process of local_ranks on a host may count on: when it may
 * use fewer than the online CPUs, a launcher (srun, mpirun --bind-to,
 * taskset, a cgroup's cpuset) gave it that share already; otherwise the
 * ranks of the host share the online CPUs evenly.  At least 1.
 */
long ks_cpu_share(long online, long allowed, int local_ranks);

/* The GPUs listed in gpus_dir (normally KS_NVIDIA_GPUS_DIR); 0 if none. */
int ks_cpu_host_gpus(const char *gpus_dir);

/*
 * The host index of the GPU at PCI domain:bus:device in gpus_dir's sorted
 * listing (folders named 0000:18:00.0), or -1 if it is not there.
 */
int ks_cpu_host_gpu_index(const char *gpus_dir, int domain, int bus, int device);

/*
 * Pin every thread of this process to the host's GPU g's core.  1 if
 * pinned (the CPUs, as "62-63", in cpus), 0 if the plan has no core for
 * g (cpus ""), -1 if the system refused (errno).
 */
int ks_cpu_pin_process(const struct ks_cpu_plan *plan, int g, char *cpus, size_t size);

/*
 * The kind of host a measurement was made on, as a result's "where" names
 * it (evaluate/result.h): GPU latencies differ between hosts of one GPU
 * model (a cluster kernel ran 7-12% slower on a 2-GPU host than on
 * single-GPU ones; BENCHMARKS.md, "Issue 24 on one H200"), and host names
 * ("vm") often say nothing.
 */
struct ks_host_kind {
	char cpu_model[64]; /* "AMD EPYC 9654 96-Core Processor"; "" unknown */
	int cpus;	    /* online CPUs; 0 unknown */
	int gpus;	    /* the GPUs the driver lists on the host, whatever this process sees */
};

/* From cpuinfo (normally /proc/cpuinfo: its first "model name"), online_cpus and gpus_dir. */
void ks_cpu_host_kind_read(const char *cpuinfo, long online_cpus, const char *gpus_dir,
			   struct ks_host_kind *out);

/* This host's kind, read once. */
const struct ks_host_kind *ks_cpu_host_kind(void);

/* A set as a CPU list ("0-3,8"), in at most size bytes. */
void ks_cpu_set_format(const cpu_set_t *set, char *out, size_t size);

#endif
