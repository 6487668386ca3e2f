/*
 * evolve.c - `ksearch evolve`: the search, run overnight.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "ksearch/archive.h"
#include "ksearch/backend.h"
#include "ksearch/cuda.h"
#include "ksearch/op.h"
#include "ksearch/proc.h"
#include "ksearch/search.h"
#include "ksearch/util.h"

#define DEFAULT_BUDGET 100

static const struct ks_help help = {
	.usage = "ksearch evolve --op NAME [--budget N] [--time DURATION] [--target FITNESS] [--gpus LIST|all] [options]",
	.description =
		"Search for faster kernels of an operator.  The seed kernels go first, with\n"
		"their first params; then the loop picks a parent from the MAP-Elites grid\n"
		"(uniformly over filled cells, weighted by fitness, or a cell that improved\n"
		"lately), mutates one or two params to neighbouring values or crosses two\n"
		"elites of the same family, compiles the child in parallel processes,\n"
		"verifies and times it on the GPU workers, and files it in the archive.\n"
		"A candidate that crashes, hangs or is refused costs one evaluation.\n"
		"\n"
		"On an existing archive the search resumes where it stopped (the same\n"
		"choices as if it had never stopped).  Ctrl-C (or SIGTERM) finishes the\n"
		"candidates in flight and stops; a second Ctrl-C quits at once.  Nothing\n"
		"committed is ever lost: every result is its own transaction.\n"
		"\n"
		"Without --budget, --time or --target the search stops after 100\n"
		"evaluations (a few minutes).  Each evaluation is one candidate verified\n"
		"on every check workload and timed on every benchmark workload.",
	.examples =
		"  ksearch evolve --op gqa                              a few minutes, 100 candidates\n"
		"  ksearch evolve --op gqa --time 8h --gpus all --log run.jsonl\n"
		"  ksearch evolve --op gqa --budget 2000 --seed 7 --archive /data/archive\n"
		"  ksearch evolve --op gqa --fresh                      start over (the old archive is kept aside)\n",
	.exit_codes = "  3  no GPU (the search needs one; `ksearch doctor` says what is missing)\n",
};

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	if (stop_flag && sig == SIGINT)
		_exit(130);
	stop_flag = 1;
}

/* "8h", "20m", "90s", "1h30m", "3600" -> seconds; -1 when malformed. */
static double parse_duration(const char *text)
{
	double total = 0;
	const char *p = text;

	if (!*p)
		return -1;
	while (*p) {
		char *end;
		double v = strtod(p, &end);

		if (end == p || v < 0)
			return -1;
		switch (*end) {
		case 'h': total += v * 3600; end++; break;
		case 'm': total += v * 60; end++; break;
		case 's': total += v; end++; break;
		case '\0': total += v; break;
		default: return -1;
		}
		p = end;
	}
	return total;
}

static int parse_gpus(const char *text, int **gpus, size_t *n, struct ks_error *err)
{
	char *copy, *tok, *save = NULL;

	*gpus = NULL;
	*n = 0;
	if (!strcmp(text, "all")) {
		int count;

		if (ks_cuda_device_count(&count, err) < 0)
			return -1;
		if (!count)
			return ks_fail(err, "--gpus all: the driver sees no GPU");
		*gpus = ks_calloc((size_t)count, sizeof(**gpus));
		for (int i = 0; i < count; i++)
			(*gpus)[(*n)++] = i;
		return 0;
	}
	copy = ks_strdup(text);
	*gpus = ks_calloc(strlen(text) + 1, sizeof(**gpus));
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		long v = strtol(tok, &end, 10);

		if (*end || v < 0 || v > 1024) {
			free(copy);
			return ks_fail(err, "--gpus %s: expected GPU numbers separated by commas (0,1) or 'all'", text);
		}
		for (size_t i = 0; i < *n; i++)
			if ((*gpus)[i] == v) {
				free(copy);
				return ks_fail(err, "--gpus %s: GPU %ld listed twice", text, v);
			}
		(*gpus)[(*n)++] = (int)v;
	}
	free(copy);
	if (!*n)
		return ks_fail(err, "--gpus %s: no GPU given", text);
	return 0;
}

static int parse_ratio(const char *name, const struct ks_opt *o, double fallback, double *out)
{
	char *end;

	*out = fallback;
	if (!o->set)
		return 0;
	*out = strtod(o->value, &end);
	if (*end || *out < 0 || !isfinite(*out))
		return ks_cli_usage("evolve", "--%s %s: expected a number >= 0", name, o->value);
	return 0;
}

/* Keep an old archive aside rather than delete it: --fresh never loses work. */
static int set_aside(const char *dir, char *moved, size_t size, struct ks_error *err)
{
	struct stat st;
	char stamp[32];
	time_t now = time(NULL);

	moved[0] = '\0';
	if (stat(dir, &st) < 0)
		return 0;
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime(&now));
	snprintf(moved, size, "%s.old-%s", dir, stamp);
	if (rename(dir, moved) < 0)
		return ks_fail(err, "--fresh: cannot move %s aside to %s: %s", dir, moved, strerror(errno));
	return 0;
}

static void print_summary(struct ks_archive *ar, const struct ks_op *op, const char *root,
			  const struct ks_search_summary *sum, size_t lanes)
{
	struct ks_archive_metrics m;
	struct ks_error err;
	json_t *best = NULL;

	printf("\nstopped (%s) after %llu evaluations in %.0f s", sum->stop_reason ? sum->stop_reason : "?",
	       (unsigned long long)sum->evaluated, sum->wall_s);
	if (sum->wall_s > 0 && sum->evaluated)
		printf(" (%.0f per GPU-hour)", 3600.0 * (double)sum->evaluated / sum->wall_s / (double)lanes);
	printf("\n");
	if (sum->evaluated)
		printf("time: compile %.0f s (summed over processes), GPU evaluation %.0f s, GPUs busy %.0f%% of the wall time\n",
		       sum->compile_s, sum->eval_s, 100.0 * sum->gpu_busy_s / (sum->wall_s * (double)lanes));
	if (!strcmp(sum->stop_reason ? sum->stop_reason : "", "exhausted"))
		printf("every param combination of every seed family has been evaluated: the built-in mutator has "
		       "nothing left to try\n");
	if (ks_archive_metrics(ar, &m, &err) == 0)
		printf("archive: %llu candidates, %llu/%llu cells filled (%.0f%%), QD-score %.2f\n",
		       (unsigned long long)m.candidates, (unsigned long long)m.cells_filled,
		       (unsigned long long)m.cells, 100.0 * m.coverage, m.qd_score);
	if (ks_archive_best(ar, &best, NULL, &err) == 0 && best) {
		json_t *w;
		size_t i;
		char *params = json_dumps(json_object_get(best, "params"), JSON_COMPACT);

		printf("\nbest: id %lld, %s %s: fitness %.3f (geometric-mean speedup over the reference), "
		       "%.0f%% of the speed of light\n",
		       (long long)json_integer_value(json_object_get(best, "id")),
		       json_string_value(json_object_get(best, "family")) ?: "?", params ? params : "",
		       json_number_value(json_object_get(best, "fitness")),
		       100.0 * json_number_value(json_object_get(best, "sol_fraction")));
		json_array_foreach(json_object_get(best, "workloads"), i, w)
			printf("  %-16s %9.2f us  (reference %9.2f us, floor %7.2f us, %3.0f%% SOL)\n",
			       json_string_value(json_object_get(w, "id")),
			       json_number_value(json_object_get(w, "median_us")),
			       json_number_value(json_object_get(w, "ref_median_us")),
			       json_number_value(json_object_get(w, "floor_us")),
			       100.0 * json_number_value(json_object_get(w, "sol_fraction")));
		printf("\ntake it home:  ksearch export-best --op %s --archive %s --id %lld\n", op->key, root,
		       (long long)json_integer_value(json_object_get(best, "id")));
		free(params);
		json_decref(best);
	}
}

int cmd_evolve(int argc, char **argv)
{
	struct ks_opt opts[] = {
		{ "op", 0, KS_OPT_VALUE, "NAME", "the operator to search (see `ksearch ops`)", 0, 0, 0, 0 },
		{ "archive", 0, KS_OPT_VALUE, "DIR", "archive root (default: archive)", 0, 0, 0, 0 },
		{ "budget", 0, KS_OPT_VALUE, "N", "stop after N evaluations in this run", 0, 0, 0, 0 },
		{ "time", 0, KS_OPT_VALUE, "DURATION", "stop after this long (8h, 20m, 90s, 1h30m)", 0, 0, 0, 0 },
		{ "target", 0, KS_OPT_VALUE, "FITNESS", "stop when the best fitness reaches this", 0, 0, 0, 0 },
		{ "gpus", 0, KS_OPT_VALUE, "LIST|all", "GPUs to use, e.g. 0,1 or all (default 0)", 0, 0, 0, 0 },
		{ "jobs", 'j', KS_OPT_VALUE, "N", "compile processes (default: CPUs, at most 8)", 0, 0, 0, 0 },
		{ "seed", 0, KS_OPT_VALUE, "N", "random seed for a new search (default 1)", 0, 0, 0, 0 },
		{ "explore", 0, KS_OPT_VALUE, "W", "weight of uniform parents over filled cells (default 0.3)", 0, 0, 0, 0 },
		{ "exploit", 0, KS_OPT_VALUE, "W", "weight of fitness-weighted parents (default 0.5)", 0, 0, 0, 0 },
		{ "recent", 0, KS_OPT_VALUE, "W", "weight of parents from recently improved cells (default 0.2)", 0, 0, 0, 0 },
		{ "log", 0, KS_OPT_VALUE, "FILE", "append JSON-lines events to FILE", 0, 0, 0, 0 },
		{ "fresh", 0, KS_OPT_FLAG, NULL, "start a new archive; the old one is moved aside, not deleted", 0, 0, 0, 0 },
		{ "time-cap", 0, KS_OPT_VALUE, "MS", "timing budget per benchmark workload (default 300)", 0, 0, 0, 0 },
		{ 0 },
	};
	enum { O_OP, O_ARCHIVE, O_BUDGET, O_TIME, O_TARGET, O_GPUS, O_JOBS, O_SEED, O_EXPLORE, O_EXPLOIT,
	       O_RECENT, O_LOG, O_FRESH, O_TIME_CAP };
	struct ks_search_config cfg = { .seed = 1, .status_every_s = 30 };
	struct ks_search_summary sum;
	struct ks_gpu_backend gb = { 0 };
	struct ks_archive_options aopts = { .flags = KS_ARCHIVE_CREATE };
	struct ks_archive *ar = NULL;
	struct ks_family *families = NULL;
	struct ks_op op = { 0 };
	struct ks_error err;
	const char **positional = NULL;
	size_t n_positional, n_families = 0, n_gpus = 0;
	const char *root;
	int *gpus = NULL, rc, ret = KS_EXIT_FAILED, time_cap = 0, gb_open = 0;
	char moved[4200];
	struct ks_archive_metrics m;

	rc = ks_opts_parse("evolve", opts, &help, argc, argv, &positional, &n_positional);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	root = opts[O_ARCHIVE].set ? opts[O_ARCHIVE].value : "archive";
	if (n_positional) {
		ret = ks_cli_usage("evolve", "unexpected argument '%s' (the operator goes in --op NAME)", positional[0]);
		goto cleanup;
	}
	if (!opts[O_OP].set) {
		ret = ks_cli_usage("evolve", "--op NAME is required (see `ksearch ops`)");
		goto cleanup;
	}
	if (opts[O_BUDGET].set) {
		char *end;
		long long v = strtoll(opts[O_BUDGET].value, &end, 10);

		if (*end || v <= 0) {
			ret = ks_cli_usage("evolve", "--budget %s: expected a number of evaluations > 0", opts[O_BUDGET].value);
			goto cleanup;
		}
		cfg.budget = (uint64_t)v;
	}
	if (opts[O_TIME].set && (cfg.time_limit_s = parse_duration(opts[O_TIME].value)) <= 0) {
		ret = ks_cli_usage("evolve", "--time %s: expected a duration such as 8h, 20m, 90s or 1h30m",
				   opts[O_TIME].value);
		goto cleanup;
	}
	if (opts[O_TARGET].set) {
		char *end;

		cfg.target_fitness = strtod(opts[O_TARGET].value, &end);
		if (*end || cfg.target_fitness <= 0) {
			ret = ks_cli_usage("evolve", "--target %s: expected a fitness > 0 (a speedup over the reference)",
					   opts[O_TARGET].value);
			goto cleanup;
		}
	}
	if (!cfg.budget && cfg.time_limit_s <= 0 && cfg.target_fitness <= 0)
		cfg.budget = DEFAULT_BUDGET;
	cfg.jobs = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (cfg.jobs > 8)
		cfg.jobs = 8;
	if (cfg.jobs < 1)
		cfg.jobs = 1;
	if (opts[O_JOBS].set) {
		char *end;

		cfg.jobs = (int)strtol(opts[O_JOBS].value, &end, 10);
		if (*end || cfg.jobs < 1 || cfg.jobs > 256) {
			ret = ks_cli_usage("evolve", "--jobs %s: expected 1 to 256 compile processes", opts[O_JOBS].value);
			goto cleanup;
		}
	}
	if (opts[O_SEED].set) {
		char *end;

		cfg.seed = strtoull(opts[O_SEED].value, &end, 10);
		if (*end || !*opts[O_SEED].value) {
			ret = ks_cli_usage("evolve", "--seed %s: expected a non-negative integer", opts[O_SEED].value);
			goto cleanup;
		}
	}
	if ((rc = parse_ratio("explore", &opts[O_EXPLORE], 0.3, &cfg.explore)) ||
	    (rc = parse_ratio("exploit", &opts[O_EXPLOIT], 0.5, &cfg.exploit)) ||
	    (rc = parse_ratio("recent", &opts[O_RECENT], 0.2, &cfg.recent))) {
		ret = rc;
		goto cleanup;
	}
	if (cfg.explore + cfg.exploit + cfg.recent <= 0) {
		ret = ks_cli_usage("evolve", "--explore, --exploit and --recent cannot all be 0");
		goto cleanup;
	}
	if (opts[O_TIME_CAP].set && (time_cap = atoi(opts[O_TIME_CAP].value)) <= 0) {
		ret = ks_cli_usage("evolve", "--time-cap %s: expected milliseconds > 0", opts[O_TIME_CAP].value);
		goto cleanup;
	}
	if (opts[O_GPUS].set) {
		if (parse_gpus(opts[O_GPUS].value, &gpus, &n_gpus, &err) < 0) {
			ret = ks_cli_usage("evolve", "%s", err.msg);
			goto cleanup;
		}
	} else {
		gpus = ks_calloc(1, sizeof(*gpus));
		n_gpus = 1;
	}
	if (ks_op_find(opts[O_OP].value, &op, &err) < 0 ||
	    ks_families_load(&op, &families, &n_families, &err) < 0) {
		ks_cli_error("evolve", "%s", err.msg);
		goto cleanup;
	}
	if (opts[O_LOG].set && !(cfg.log = fopen(opts[O_LOG].value, "a"))) {
		ks_cli_error("evolve", "--log %s: %s", opts[O_LOG].value, strerror(errno));
		goto cleanup;
	}

	/* the GPU workers start before the archive opens: no child inherits LMDB */
	ks_child_program();
	printf("ksearch evolve: operator %s (%s), %zu seed families, starting %zu GPU worker%s...\n", op.key,
	       op.name, n_families, n_gpus, n_gpus == 1 ? "" : "s");
	fflush(stdout);
	if (ks_gpu_backend_open(&gb, &op, gpus, n_gpus, time_cap, &err) < 0) {
		ks_cli_error("evolve", "%s\n(the search verifies and times kernels on an NVIDIA GPU; "
			     "`ksearch doctor` says what is missing; `ksearch compile` works without one)", err.msg);
		ret = 3;
		goto cleanup;
	}
	gb_open = 1;
	printf("GPU: %s (%s), %d SMs, DRAM %.0f GB/s measured, peaks %s\n", gb.evaluators[0].profile.name,
	       gb.evaluators[0].profile.arch, gb.evaluators[0].profile.sm_count, gb.evaluators[0].profile.dram_gbps,
	       gb.evaluators[0].profile.peak_source);
	if (opts[O_FRESH].set) {
		char *dir = ks_archive_dir(root, op.key, ks_gpu_backend_model(&gb));

		rc = set_aside(dir, moved, sizeof(moved), &err);
		free(dir);
		if (rc < 0) {
			ks_cli_error("evolve", "%s", err.msg);
			goto cleanup;
		}
		if (moved[0])
			printf("--fresh: the previous archive was moved aside to %s\n", moved);
	}
	aopts.grid = op.grid;
	aopts.n_grid = op.n_grid;
	if (ks_archive_open(&ar, root, op.key, ks_gpu_backend_model(&gb), &aopts, &err) < 0) {
		ks_cli_error("evolve", "%s", err.msg);
		goto cleanup;
	}
	if (ks_archive_metrics(ar, &m, &err) == 0 && m.candidates)
		printf("resuming %s: %llu candidates, %llu/%llu cells filled, best %.3fx (id %llu)\n",
		       ks_archive_path(ar), (unsigned long long)m.candidates, (unsigned long long)m.cells_filled,
		       (unsigned long long)m.cells, m.best_fitness, (unsigned long long)m.best_id);
	else
		printf("new archive %s\n", ks_archive_path(ar));
	printf("stops: %s%s%s; Ctrl-C finishes the candidates in flight and stops\n\n",
	       cfg.budget ? "budget " : "", cfg.time_limit_s > 0 ? "time " : "", cfg.target_fitness > 0 ? "target" : "");
	fflush(stdout);

	cfg.out = stdout;
	cfg.status_tty = isatty(STDOUT_FILENO);
	cfg.stop = &stop_flag;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (ks_search_run(ar, &op, families, n_families, &gb.backend, &cfg, &sum, &err) < 0) {
		ks_cli_error("evolve", "%s (every result so far is in the archive; run the same command to resume)",
			     err.msg);
		goto cleanup;
	}
	print_summary(ar, &op, root, &sum, n_gpus);
	ret = KS_EXIT_OK;
cleanup:
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	ks_archive_close(ar);
	if (gb_open)
		ks_gpu_backend_close(&gb);
	if (cfg.log)
		fclose(cfg.log);
	ks_families_free(families, n_families);
	ks_op_release(&op);
	free(gpus);
	free(positional);
	ks_opts_release(opts);
	return ret;
}
