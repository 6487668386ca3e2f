/*
 * test_cpus.c - the plan that gives each GPU worker a core of its own:
 * whole cores (both hardware threads) from the end of the allowed CPUs,
 * one for each of the host's GPUs in PCI order, none when too few cores
 * would be left; the compile processes' CPUs are the rest.  Topologies
 * come from a fake sysfs folder, the GPUs from a fake driver listing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ksearch/base/cpus.h"
#include "ksearch/base/util.h"
#include "testlib.h"

static const char *path_in(const char *dir, const char *name)
{
	static char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

/* A sysfs cpu folder of n CPUs whose CPU c pairs with c + n/2 (as x86 hosts number them), or siblings text.
 */
static char *fake_sysfs(int n, const char *override_cpu0)
{
	char *dir = test_tmpdir();

	for (int c = 0; c < n; c++) {
		char name[128], text[64];
		int a = c < n / 2 ? c : c - n / 2;

		snprintf(name, sizeof(name), "cpu%d", c);
		mkdir(path_in(dir, name), 0777);
		snprintf(name, sizeof(name), "cpu%d/topology", c);
		mkdir(path_in(dir, name), 0777);
		snprintf(name, sizeof(name), "cpu%d/topology/thread_siblings_list", c);
		snprintf(text, sizeof(text), "%d,%d\n", a, a + n / 2);
		test_write(dir, name, c == 0 && override_cpu0 ? override_cpu0 : text);
	}
	return dir;
}

static void set_range(cpu_set_t *set, int lo, int hi)
{
	for (int c = lo; c <= hi; c++)
		CPU_SET(c, set);
}

static char *format(const cpu_set_t *set)
{
	static char text[256];

	ks_cpu_set_format(set, text, sizeof(text));
	return text;
}

static void test_whole_cores_from_the_end_one_a_gpu(void **state)
{
	char *sys = fake_sysfs(64, NULL);
	struct ks_cpu_plan *plan = ks_calloc(1, sizeof(*plan));
	cpu_set_t allowed;

	(void)state;
	CPU_ZERO(&allowed);
	set_range(&allowed, 0, 63);
	ks_cpu_plan_make(&allowed, sys, 4, plan);
	assert_int_equal(plan->n_reserved, 4);
	/* cores are ordered by their first CPU: the last is {31, 63} */
	assert_string_equal(format(&plan->reserved[0]), "31,63");
	assert_string_equal(format(&plan->reserved[1]), "30,62");
	assert_string_equal(format(&plan->reserved[3]), "28,60");
	assert_string_equal(format(&plan->rest), "0-27,32-59");
	assert_int_equal(plan->rest_cpus, 56);
	assert_int_equal(plan->allowed_cpus, 64);
	/* the same inputs, the same plan: what ranks on one host rely on */
	{
		struct ks_cpu_plan *again = ks_calloc(1, sizeof(*again));

		ks_cpu_plan_make(&allowed, sys, 4, again);
		assert_memory_equal(plan, again, sizeof(*plan));
		free(again);
	}
	free(plan);
	test_rmtree(sys);
}

static void test_only_allowed_cpus_and_none_when_too_few_cores(void **state)
{
	char *sys = fake_sysfs(16, NULL);
	struct ks_cpu_plan *plan = ks_calloc(1, sizeof(*plan));
	cpu_set_t allowed;

	(void)state;
	/* a launcher gave this process CPUs 0-5 and their siblings 8-13: 6 cores */
	CPU_ZERO(&allowed);
	set_range(&allowed, 0, 5);
	set_range(&allowed, 8, 13);
	ks_cpu_plan_make(&allowed, sys, 2, plan);
	assert_int_equal(plan->n_reserved, 2);
	assert_string_equal(format(&plan->reserved[0]), "5,13");
	assert_string_equal(format(&plan->reserved[1]), "4,12");
	assert_string_equal(format(&plan->rest), "0-3,8-11");
	/* only one thread of a core allowed: that thread is the core */
	CPU_CLR(13, &allowed);
	ks_cpu_plan_make(&allowed, sys, 1, plan);
	assert_string_equal(format(&plan->reserved[0]), "5");
	/* 3 GPUs on 6 cores would leave 3, under two a GPU: no plan, the rest is everything */
	CPU_SET(13, &allowed);
	ks_cpu_plan_make(&allowed, sys, 3, plan);
	assert_int_equal(plan->n_reserved, 0);
	assert_memory_equal(&plan->rest, &allowed, sizeof(allowed));
	assert_int_equal(plan->rest_cpus, 12);
	/* no GPUs (no driver listing), or a count past the table: no plan */
	ks_cpu_plan_make(&allowed, sys, 0, plan);
	assert_int_equal(plan->n_reserved, 0);
	ks_cpu_plan_make(&allowed, sys, KS_CPU_PLAN_MAX_GPUS + 1, plan);
	assert_int_equal(plan->n_reserved, 0);
	free(plan);
	test_rmtree(sys);
}

static void test_missing_or_bad_topology_is_a_core_a_cpu(void **state)
{
	char *sys = fake_sysfs(8, "0-x\n");
	char *none = test_tmpdir();
	struct ks_cpu_plan *plan = ks_calloc(1, sizeof(*plan));
	cpu_set_t allowed;

	(void)state;
	CPU_ZERO(&allowed);
	set_range(&allowed, 0, 7);
	/* CPU 0's list does not parse: it is a core alone, and CPU 4 (listed as 0,4) one too */
	ks_cpu_plan_make(&allowed, sys, 1, plan);
	assert_int_equal(plan->n_reserved, 1);
	assert_string_equal(format(&plan->reserved[0]), "4");
	assert_string_equal(format(&plan->rest), "0-3,5-7");
	/* no sysfs at all: each CPU its own core */
	ks_cpu_plan_make(&allowed, none, 2, plan);
	assert_int_equal(plan->n_reserved, 2);
	assert_string_equal(format(&plan->reserved[0]), "7");
	assert_string_equal(format(&plan->reserved[1]), "6");
	assert_string_equal(format(&plan->rest), "0-5");
	free(plan);
	test_rmtree(none);
	test_rmtree(sys);
}

static void test_host_gpus_in_pci_order(void **state)
{
	char *dir = test_tmpdir();

	(void)state;
	assert_int_equal(ks_cpu_host_gpus(dir), 0);
	assert_int_equal(ks_cpu_host_gpu_index(dir, 0, 0x18, 0), -1);
	mkdir(path_in(dir, "0000:C8:00.0"), 0777);
	mkdir(path_in(dir, "0000:18:00.0"), 0777);
	mkdir(path_in(dir, "0000:3a:00.0"), 0777);
	assert_int_equal(ks_cpu_host_gpus(dir), 3);
	assert_int_equal(ks_cpu_host_gpu_index(dir, 0, 0x18, 0), 0);
	assert_int_equal(ks_cpu_host_gpu_index(dir, 0, 0x3a, 0), 1);
	assert_int_equal(ks_cpu_host_gpu_index(dir, 0, 0xc8, 0), 2); /* case does not matter */
	assert_int_equal(ks_cpu_host_gpu_index(dir, 1, 0x18, 0), -1);
	assert_int_equal(ks_cpu_host_gpu_index(dir, 0, 0x18, 1), -1);
	assert_int_equal(ks_cpu_host_gpus("/nonexistent/ksearch"), 0);
	test_rmtree(dir);
}

/* What a result's "where" says of the host: the CPU's model, its CPUs, its GPUs. */
static void test_host_kind(void **state)
{
	char *dir = test_tmpdir(), *gpus = test_tmpdir(), *cpuinfo = ks_strdup(path_in(dir, "cpuinfo"));
	struct ks_host_kind kind;
	FILE *f;

	(void)state;
	mkdir(path_in(gpus, "0000:18:00.0"), 0777);
	mkdir(path_in(gpus, "0000:3a:00.0"), 0777);
	f = fopen(cpuinfo, "w");
	assert_non_null(f);
	fputs("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 17\n"
	      "model name\t: AMD EPYC 9654 96-Core Processor  \nflags\t\t: fpu\n\n"
	      "processor\t: 1\nmodel name\t: something else\n",
	      f);
	fclose(f);
	ks_cpu_host_kind_read(cpuinfo, 16, gpus, &kind);
	assert_string_equal(kind.cpu_model, "AMD EPYC 9654 96-Core Processor"); /* the first, trimmed */
	assert_int_equal(kind.cpus, 16);
	assert_int_equal(kind.gpus, 2);
	/* an Arm host's cpuinfo names no model; nothing readable says nothing */
	f = fopen(cpuinfo, "w");
	assert_non_null(f);
	fputs("processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n", f);
	fclose(f);
	ks_cpu_host_kind_read(cpuinfo, -1, "/nonexistent/ksearch", &kind);
	assert_string_equal(kind.cpu_model, "");
	assert_true(kind.cpus == 0 && kind.gpus == 0);
	ks_cpu_host_kind_read("/nonexistent/ksearch/cpuinfo", 4, gpus, &kind);
	assert_true(!*kind.cpu_model && kind.cpus == 4 && kind.gpus == 2);
	/* this host's, once: whatever it is, the same each time */
	assert_ptr_equal(ks_cpu_host_kind(), ks_cpu_host_kind());
	assert_true(ks_cpu_host_kind()->cpus >= 1);
	free(cpuinfo);
	test_rmtree(gpus);
	test_rmtree(dir);
}

static void test_share_of_the_cpus(void **state)
{
	(void)state;
	/* one process, all of the host's CPUs */
	assert_int_equal(ks_cpu_share(64, 64, 1), 64);
	/* 4 ranks on a host, none bound (mpirun --bind-to none): a quarter each */
	assert_int_equal(ks_cpu_share(64, 64, 4), 16);
	/* bound by the launcher (srun --cpus-per-task 16, a cpuset): the share is given, not divided again */
	assert_int_equal(ks_cpu_share(64, 16, 4), 16);
	/* mpirun's default binding, one core a rank: one, and evolve says so */
	assert_int_equal(ks_cpu_share(64, 1, 4), 1);
	/* never below one, whatever the inputs */
	assert_int_equal(ks_cpu_share(2, 2, 8), 1);
	assert_int_equal(ks_cpu_share(0, 0, 1), 1);
	assert_int_equal(ks_cpu_share(-1, 8, 1), 8);
}

static void test_format(void **state)
{
	cpu_set_t set;
	char small[6];

	(void)state;
	CPU_ZERO(&set);
	assert_string_equal(format(&set), "");
	set_range(&set, 0, 3);
	CPU_SET(8, &set);
	set_range(&set, 10, 11);
	assert_string_equal(format(&set), "0-3,8,10-11");
	/* too small: whole entries only, never a cut number */
	ks_cpu_set_format(&set, small, sizeof(small));
	assert_string_equal(small, "0-3,8");
}

static void test_pin_this_process(void **state)
{
	struct ks_cpu_plan *plan = ks_calloc(1, sizeof(*plan));
	cpu_set_t before, after;
	char cpus[64];
	int first = -1;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof(before), &before), 0);
	for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
		if (CPU_ISSET(c, &before))
			first = c;
	/* no core for this GPU: nothing moves */
	assert_int_equal(ks_cpu_pin_process(plan, 0, cpus, sizeof(cpus)), 0);
	assert_string_equal(cpus, "");
	plan->n_reserved = 1;
	CPU_SET(first, &plan->reserved[0]);
	assert_int_equal(ks_cpu_pin_process(plan, 1, cpus, sizeof(cpus)), 0);
	assert_int_equal(ks_cpu_pin_process(plan, -1, cpus, sizeof(cpus)), 0);
	assert_int_equal(ks_cpu_pin_process(plan, 0, cpus, sizeof(cpus)), 1);
	assert_int_equal(sched_getaffinity(0, sizeof(after), &after), 0);
	assert_int_equal(CPU_COUNT(&after), 1);
	assert_true(CPU_ISSET(first, &after));
	assert_int_equal(atoi(cpus), first);
	assert_int_equal(sched_setaffinity(0, sizeof(before), &before), 0);
	free(plan);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_cores_from_the_end_one_a_gpu),
		cmocka_unit_test(test_only_allowed_cpus_and_none_when_too_few_cores),
		cmocka_unit_test(test_missing_or_bad_topology_is_a_core_a_cpu),
		cmocka_unit_test(test_host_gpus_in_pci_order),
		cmocka_unit_test(test_host_kind),
		cmocka_unit_test(test_share_of_the_cpus),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_pin_this_process),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
