/*
 * evolve.c - `ksearch evolve`: the search, run overnight.
 */
#include <errno.h>
#include <float.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "archive_cli.h"
#include "cli.h"
#include "evolve_cluster.h"
#include "llm_options.h"
#include "ksearch/archive/archive.h"
#include "ksearch/base/cpus.h"
#include "ksearch/evaluate/backend.h"
#include "ksearch/evaluate/cuda.h"
#include "ksearch/evaluate/profile.h"
#include "ksearch/evaluate/sanitize.h"
#include "ksearch/llm/llm.h"
#include "ksearch/llm/llm_context.h"
#include "ksearch/op/op.h"
#include "ksearch/base/proc.h"
#include "ksearch/search/mutator.h"
#include "ksearch/search/mutator_llm.h"
#include "ksearch/search/search.h"
#include "ksearch/base/util.h"

#define DEFAULT_BUDGET 100

enum { EXIT_NO_GPU = 3 };

static const char no_gpu_hint[] = "(the search verifies and times kernels on an NVIDIA GPU; `ksearch doctor` "
				  "says what is missing; `ksearch compile` works without one)";

static const struct ks_help help = {
	.usage = "ksearch evolve --op NAME [--budget N] [--time DURATION] [--target FITNESS] [--gpus "
		 "LIST|all] "
		 "[options]",
	.description = "Search for faster kernels of an operator.  The seed kernels go first, with\n"
		       "their first params; then half the proposals (--climb) step from the\n"
		       "best kernel, or from one workload's best, to an untried neighbour (one\n"
		       "param one place along its list), and the others pick a parent from the\n"
		       "MAP-Elites grid (uniformly over filled cells, weighted by fitness, or a\n"
		       "cell that improved lately) and move one or two params or cross two\n"
		       "elites of the same family.  Each child is compiled in parallel processes,\n"
		       "verified and timed on the GPU workers, and filed in the archive.\n"
		       "Some proposals (--knob-share, 10%) turn one compiler knob of an\n"
		       "elite's source instead, of any family, the LLM's too: the minimum\n"
		       "blocks per SM of a kernel's __launch_bounds__ (1 to 4, which caps its\n"
		       "registers), a load's or store's cache hint (__ldg to __ldcs ..., never\n"
		       "to a weaker coherence), an inline-PTX load's L1 eviction hint, or the\n"
		       "unroll count of a loop marked /* ksearch:unroll */.  The new source is a\n"
		       "family of its own (knob-N) at the parent's params, so its params are\n"
		       "searched further.\n"

		       "A candidate that crashes, hangs or is refused costs one evaluation.\n"
		       "Where the host has at least two cores a GPU to spare, each GPU's worker\n"
		       "gets a core of its own (its hardware threads), which the compile\n"
		       "processes leave alone: the last cores of those the process may use, one\n"
		       "for each of the host's GPUs, so ranks on one host agree\n"
		       "(KSEARCH_PIN_WORKERS=0: no such cores).\n"
		       "\n"
		       "On an existing archive the search resumes where it stopped (the same\n"
		       "choices as if it had never stopped).  Ctrl-C (or SIGTERM, or SIGHUP when\n"
		       "its terminal closes) finishes the candidates in flight and stops; a\n"
		       "second Ctrl-C quits at once.  Nothing\n"
		       "committed is ever lost: every result is its own transaction.\n"
		       "\n"
		       "Started by mpirun or srun as several ranks, it is one search over every\n"
		       "rank's GPUs: rank 0 keeps the archive, the others compile and time on\n"
		       "their hosts (--gpus and --jobs per rank; the default GPU and 'all' are\n"
		       "shared between the ranks of a host).  `ksearch version` says whether\n"
		       "this binary has MPI; README, \"Many hosts\", has the commands.\n"
		       "\n"
		       "Without --budget, --time or --target the search stops after 100\n"
		       "evaluations (a few minutes).  Each evaluation is one candidate verified\n"
		       "on every check workload and timed on every benchmark workload.\n"
		       "\n"
		       "With an LLM endpoint (--llm-url and --llm-model, or KSEARCH_LLM_URL and\n"
		       "KSEARCH_LLM_MODEL), the LLM writes new kernels too: it gets a parent from\n"
		       "the grid with its evidence (compile report, times, descriptors), elites of\n"
		       "other cells and a strategy prompt, and answers with SEARCH/REPLACE edits\n"
		       "or a whole file.  A child that fails goes back to it with the evidence\n"
		       "(--llm-repairs turns); one that verifies gets its params tuned\n"
		       "(--llm-tune variants).  Strategy prompts live in the archive with their\n"
		       "statistics, are chosen by a bandit, and the best are rewritten by the LLM\n"
		       "(`ksearch archive prompts` lists them).  The built-in mutator fills\n"
		       "every slot the LLM leaves empty, and carries on alone when the endpoint\n"
		       "fails, pauses or a budget is spent.  The API key comes from the\n"
		       "environment only: KSEARCH_API_KEY, else OPENAI_API_KEY or\n"
		       "ANTHROPIC_API_KEY by provider; without one, requests carry no\n"
		       "credentials, as local servers (vLLM, SGLang, llama.cpp, Ollama) expect.\n"
		       "Prices for --llm-budget-usd come from prompts/prices.json.\n"
		       "\n"
		       "Reasoning models think before they answer: the answer budget\n"
		       "(--max-tokens, default 32768) counts the thinking, and a request may take\n"
		       "minutes (--llm-timeout, default 15m).  No temperature is sent unless\n"
		       "--temperature is given.  When an endpoint refuses a parameter ksearch\n"
		       "chose (a reasoning model refusing a temperature, an older server not\n"
		       "knowing max_completion_tokens), it changes it for the run and says so.\n"
		       "Reasoning (<think> blocks, reasoning fields, thinking blocks) is never\n"
		       "read as the answer.  An answer cut off at the budget is never used; the\n"
		       "summary counts them: raise --max-tokens.  `ksearch doctor --llm-url ...`\n"
		       "shows all this for an endpoint before a long run.\n"
		       "\n"
		       "New elites are profiled with Nsight Compute (ncu) on one workload, between\n"
		       "evaluations and in processes of their own, in at most --profile-share of\n"
		       "the GPU time (10%): DRAM and SM throughput, achieved occupancy, L2 hit\n"
		       "rate, warp stall reasons and spills go into the record (`ksearch archive\n"
		       "show`), the LLM's evidence and, on a grid with a measured axis\n"
		       "(dram_fraction, achieved_occupancy), the candidate's cell.  Without ncu,\n"
		       "or without permission to read the GPU's counters, the search says so once\n"
		       "and goes on; `ksearch profile` profiles any candidate later.\n"
		       "\n"
		       "--llm-extra adds provider fields to every request body (merged into the\n"
		       "JSON; env KSEARCH_LLM_EXTRA); --llm-header adds a header (repeatable; env\n"
		       "KSEARCH_LLM_HEADERS, one per line, keeps secret values out of the process\n"
		       "list).  The key never goes there: it comes from the environment.",
	.examples =
		"  ksearch evolve --op gqa                              a few minutes, 100 candidates\n"
		"  ksearch evolve --op gqa --time 8h --gpus all --log run.jsonl\n"
		"  mpirun -np 4 --bind-to none ksearch evolve --op gqa --time 8h   # 4 ranks, a GPU each\n"
		"  ksearch evolve --op gqa --budget 2000 --seed 7 --archive /data/archive\n"
		"  ksearch evolve --op gqa --fresh                      start over (the old archive is kept "
		"aside)\n"
		"  OPENAI_API_KEY=... ksearch evolve --op gqa --time 8h --llm-url https://api.openai.com/v1 "
		"\\\n"
		"      --llm-model gpt-5 --llm-budget-usd 20\n"
		"  ksearch evolve --op gqa --llm-url http://127.0.0.1:8000/v1 --llm-model Qwen/Qwen3-Coder   "
		"(vLLM, no key)\n"
		"  ksearch evolve --op gqa --llm-url https://api.openai.com/v1 --llm-model gpt-5 \\\n"
		"      --llm-extra '{\"reasoning_effort\": \"high\"}'                 OpenAI reasoning "
		"effort\n"
		"  ksearch evolve --op gqa --llm-provider anthropic --llm-url https://api.anthropic.com/v1 "
		"\\\n"
		"      --llm-model claude-sonnet-4-5 --max-tokens 32000 \\\n"
		"      --llm-extra '{\"thinking\": {\"type\": \"enabled\", \"budget_tokens\": 16000}}'  "
		"Anthropic thinking\n"
		"  ksearch evolve --op gqa --llm-url https://openrouter.ai/api/v1 --llm-model openai/gpt-5 "
		"\\\n"
		"      --llm-extra '{\"provider\": {\"order\": [\"openai\"], \"allow_fallbacks\": false}}' "
		"\\\n"
		"      --llm-header 'X-Title: ksearch'                                  a gateway\n",
	.exit_codes = "  3  no GPU (the search needs one; `ksearch doctor` says what is missing)\n",
};

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	if (stop_flag && sig == SIGINT)
		_exit(130);
	stop_flag = 1;
}

/*
 * --gpus: "all" or a list of GPU numbers.  Only the syntax is checked here
 * (a usage error); which GPUs exist is the driver's to say, and "all"
 * becomes a list in all_gpus(), with the other GPU errors.
 */
static int parse_gpus(const char *text, int **gpus, size_t *n, struct ks_error *err)
{
	char *copy, *tok, *save = NULL;

	*gpus = NULL;
	*n = 0;
	if (!strcmp(text, "all"))
		return 0;
	copy = ks_strdup(text);
	*gpus = ks_calloc(strlen(text) + 1, sizeof(**gpus));
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		long v = strtol(tok, &end, 10);

		if (*end || v < 0 || v > 1024) {
			free(copy);
			return ks_fail(err,
				       "--gpus %s: expected GPU numbers separated by commas (0,1) or 'all'",
				       text);
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

/* --gpus all: every GPU the driver sees; fails (no GPU, exit 3) as starting a worker would. */
static int all_gpus(int **gpus, size_t *n, struct ks_error *err)
{
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

/*
 * Where the GPU workers and the compile processes run (base/cpus.h), when
 * the workers have cores of their own; prefix names the rank.
 */
static void print_cores(const struct ks_gpu_backend *gb, const char *prefix)
{
	const struct ks_cpu_plan *plan = ks_cpu_plan_host();
	char rest[256];
	int any = 0;

	for (size_t i = 0; i < gb->n_gpus; i++) {
		if (!gb->evaluators[i].cpus[0])
			continue;
		printf("%s%sGPU %d's worker on CPUs %s", any ? "; " : "", any ? "" : prefix, gb->gpus[i],
		       gb->evaluators[i].cpus);
		any = 1;
	}
	if (!any)
		return;
	ks_cpu_set_format(&plan->rest, rest, sizeof(rest));
	printf(" (a core each); compile processes on the other %d CPUs (%s; KSEARCH_PIN_WORKERS=0: "
	       "anywhere)\n",
	       plan->rest_cpus, rest);
}

/*
 * A rank > 0 of an MPI job: build and time rank 0's candidates on this
 * host until it says stop.  Signals are rank 0's to act on (the launcher
 * sends them to every rank): here they would lose the jobs in flight.
 */
static int serve_rank(struct evolve_cluster *ec, const struct ks_op *op, const struct ks_gpu_backend *gb,
		      const int *gpus, size_t n_gpus, int jobs)
{
	struct ks_error err;
	char list[256] = "";
	size_t len = 0;
	int rc;

	for (size_t i = 0; i < n_gpus && len + 16 < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d", i ? "," : "", gpus[i]);
	printf("MPI: rank %d of %d serves rank 0 with GPU%s %s (%s) and %d compile processes\n",
	       ec->role.rank, ec->role.size, n_gpus == 1 ? "" : "s", list, ks_gpu_backend_model(gb), jobs);
	snprintf(list, sizeof(list), "MPI: rank %d: ", ec->role.rank);
	print_cores(gb, list);
	fflush(stdout);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	rc = evolve_cluster_serve(ec, op, &gb->backend, jobs, ks_gpu_backend_model(gb), &err);
	if (rc < 0) {
		ks_cli_error("evolve", "rank %d: %s", ec->role.rank, err.msg);
		return KS_EXIT_FAILED;
	}
	return KS_EXIT_OK;
}

static void print_sanitizer_summary(const struct ks_op *op, const struct ks_search_summary *sum,
				    const struct ks_search_config *cfg)
{
	const struct ks_search_evidence *san = &sum->sanitizer;

	if (san->off[0])
		printf("sanitizer: %s%s\n", san->off,
		       san->stored ? "" : "; no best was checked (`ksearch sanitize` says more)");
	if (san->stored || san->failed) {
		printf("sanitizer: %llu new best%s checked, %llu failed", (unsigned long long)san->stored,
		       san->stored == 1 ? "" : "s", (unsigned long long)san->changed);
		for (size_t i = 0; i < san->changed && i < KS_SEARCH_EVIDENCE_IDS; i++)
			printf("%s#%llu", i ? ", " : " (demoted: ", (unsigned long long)san->changed_ids[i]);
		if (san->changed > KS_SEARCH_EVIDENCE_IDS)
			printf(", ...");
		printf("%s, %llu could not be; %.0f s, %.1f%% of the GPU time (at most %.0f%%)\n",
		       san->changed ? ")" : "", (unsigned long long)san->failed, san->seconds,
		       100.0 * san->share, 100.0 * cfg->sanitize_share);
	} else if (!san->off[0] && cfg->sanitize_share > 0 && sum->evaluated)
		printf("sanitizer: no best checked yet: checks take at most %.0f%% of the GPU time, and this "
		       "run's GPU time did not pay for one (`ksearch sanitize --op %s --best` checks it "
		       "now)\n",
		       100.0 * cfg->sanitize_share, op->key);
}

static void print_confirm_summary(const struct ks_search_summary *sum, const struct ks_search_config *cfg)
{
	const struct ks_search_evidence *c = &sum->confirm;

	if (c->off[0])
		printf("confirmation: %s\n", c->off);
	if (sum->unconfirmed) {
		const char *why = cfg->time_limit_s > 0
					  ? "5% of --time more, 10 s to a minute, and eight rounds"
					  : "eight rounds";

		printf("confirmation: %llu workload best%s left unconfirmed when the run ended (its last "
		       "confirmations get %s a workload): %s on one draw's time until a run resumes the "
		       "archive\n",
		       (unsigned long long)sum->unconfirmed, sum->unconfirmed == 1 ? "" : "s", why,
		       sum->unconfirmed == 1 ? "it ranks" : "they rank");
	}
	if (!c->stored && !c->failed)
		return;
	printf("confirmation: %llu new per-workload best%s timed again on fresh length splits, %llu "
	       "lost their place",
	       (unsigned long long)c->stored, c->stored == 1 ? "" : "s", (unsigned long long)c->changed);
	for (size_t i = 0; i < c->changed && i < KS_SEARCH_EVIDENCE_IDS; i++)
		printf("%s#%llu", i ? ", " : " (", (unsigned long long)c->changed_ids[i]);
	if (c->changed > KS_SEARCH_EVIDENCE_IDS)
		printf(", ...");
	printf("%s, %llu could not be; %.0f s, %.1f%% of the GPU time (at most %.0f%%)\n",
	       c->changed ? ")" : "", (unsigned long long)c->failed, c->seconds, 100.0 * c->share,
	       100.0 * cfg->confirm_share);
}

/* with_llm: an LLM mutator was in cfg's list */
/*
 * A resumed archive whose workload bests were timed on GPUs other than this
 * run's (another machine: each leg of tools/search-legs.sh runs on a fresh
 * one): said, since the run compares its candidates with those times as
 * they are, and hosts of one GPU model differ (a cluster kernel ran 7-12%
 * slower on a 2-GPU host than on single-GPU ones).  Records that do not
 * name their GPU (before 2026-11-28) say nothing.
 */
static void note_bests_timed_elsewhere(struct ks_archive *ar, const struct ks_gpu_backend *gb)
{
	struct ks_strbuf ids, where;
	json_t *bests = NULL;
	struct ks_error err;
	const json_t *b;
	const char *wid;
	int n = 0;

	if (ks_archive_workload_bests(ar, &bests, &err) < 0)
		return; /* the search reads them again, and says what fails */
	ks_strbuf_init(&ids);
	ks_strbuf_init(&where);
	json_object_foreach(bests, wid, b)
	{
		const struct ks_result_place *w;
		struct ks_record rec;
		int here = 0;

		ks_record_init(&rec);
		if (ks_archive_get_record(ar, (uint64_t)json_integer_value(json_object_get(b, "id")), &rec,
					  NULL, &err) == 0 &&
		    rec.result.where.gpu >= 0 && *rec.result.where.gpu_uuid) {
			w = &rec.result.where;
			for (size_t i = 0; i < gb->n_gpus; i++)
				here |= !strcmp(w->gpu_uuid, gb->evaluators[i].uuid);
			if (!here) {
				ks_strbuf_addf(&ids, "%s%s", n ? ", " : "", wid);
				if (!n)
					ks_archive_cli_format_where(w, &where);
				n++;
			}
		}
		ks_record_release(&rec);
	}
	if (n)
		printf("note: the best%s of %s %s not timed on this run's GPU%s (%s on %s).  This run "
		       "compares its candidates with those times as they are, and hosts of one GPU model "
		       "time a kernel differently (`ksearch archive stats` lists where each best was "
		       "timed)\n",
		       n == 1 ? "" : "s", ids.buf, n == 1 ? "was" : "were", gb->n_gpus == 1 ? "" : "s",
		       n == 1 ? "it was" : "the first was", where.buf);
	ks_strbuf_release(&ids);
	ks_strbuf_release(&where);
	json_decref(bests);
}

static void print_summary(struct ks_archive *ar, const struct ks_op *op, const char *root,
			  const struct ks_search_summary *sum, const struct ks_search_config *cfg,
			  size_t gpus, int with_llm)
{
	struct ks_archive_metrics m;
	struct ks_error err;
	struct ks_record best;

	printf("\nstopped (%s) after %llu evaluations in %.0f s", sum->stop_reason ? sum->stop_reason : "?",
	       (unsigned long long)sum->evaluated, sum->wall_s);
	if (sum->wall_s > 0 && sum->evaluated)
		printf(" (%.0f per GPU-hour)", 3600.0 * (double)sum->evaluated / sum->wall_s / (double)gpus);
	printf("\n");
	if (sum->duplicates)
		printf("duplicates: %llu candidates built to a binary already evaluated (same cubin, launch "
		       "plan and scratch): recorded with its result, not run again\n",
		       (unsigned long long)sum->duplicates);

	if (sum->evaluated)
		printf("time: compile %.0f s (summed over processes), GPU evaluation %.0f s, GPUs busy "
		       "%.0f%% of the wall time (evaluating, profiling and checking)\n",
		       sum->compile_s, sum->eval_s,
		       100.0 *
			       (sum->gpu_busy_s + sum->profiles.seconds + sum->sanitizer.seconds +
				sum->confirm.seconds) /
			       (sum->wall_s * (double)gpus));

	if (!strcmp(sum->stop_reason ? sum->stop_reason : "", "exhausted"))
		printf(with_llm ? "every param combination of every family has been evaluated, and the LLM "
				  "side can bring nothing more (its budget is spent, no kernel has verified "
				  "to start from, or its last answers brought nothing usable)\n"
				: "every param combination of every seed family has been evaluated: the "
				  "built-in "
				  "mutator "
				  "has nothing left to try (an LLM endpoint, --llm-url, brings new "
				  "kernels)\n");
	/* what each mutator did, in its own words */
	for (size_t i = 0; i < cfg->n_mutators; i++)
		if (cfg->mutators[i]->summary)
			cfg->mutators[i]->summary(cfg->mutators[i]->ctx, stdout);
	if (sum->profiles.off[0])
		printf("profiler: %s%s\n", sum->profiles.off,
		       sum->profiles.stored ? ""
					    : "; no candidate was profiled (`ksearch profile` says more)");
	if (sum->profiles.stored || sum->profiles.failed)
		printf("profiler: %llu new elite%s profiled (%llu moved to another cell), %llu could not be; "
		       "%.0f s, %.1f%% of the GPU time (at most %.0f%%)\n",
		       (unsigned long long)sum->profiles.stored, sum->profiles.stored == 1 ? "" : "s",
		       (unsigned long long)sum->profiles.changed, (unsigned long long)sum->profiles.failed,
		       sum->profiles.seconds, 100.0 * sum->profiles.share, 100.0 * cfg->profile_share);
	else if (!sum->profiles.off[0] && cfg->profile_share > 0 && sum->evaluated)
		printf("profiler: no elite profiled yet: profiles take at most %.0f%% of the GPU time, and "
		       "this run's GPU time did not pay for one (`ksearch profile --op %s --best` profiles "
		       "one now)\n",
		       100.0 * cfg->profile_share, op->key);
	print_sanitizer_summary(op, sum, cfg);
	print_confirm_summary(sum, cfg);
	if (ks_archive_metrics(ar, &m, &err) == 0)
		printf("archive: %llu candidates, %llu/%llu cells filled (%.0f%%), QD-score %.2f\n",
		       (unsigned long long)m.candidates, (unsigned long long)m.cells_filled,
		       (unsigned long long)m.cells, 100.0 * m.coverage, m.qd_score);
	ks_record_init(&best);
	if (ks_archive_best_record(ar, &best, NULL, &err) == 0 && best.id) {
		const struct ks_result *res = &best.result;
		char *params = best.params ? json_dumps(best.params, JSON_COMPACT) : NULL;

		printf("\nbest: id %llu, %s %s: fitness %.3f (geometric-mean speedup over the reference), "
		       "%.0f%% of the speed of light\n",
		       (unsigned long long)best.id, *best.family ? best.family : "?", params ? params : "",
		       res->fitness, 100.0 * res->sol_fraction);
		for (size_t i = 0; i < res->n_workloads; i++) {
			const struct ks_result_workload *w = &res->workloads[i];

			printf("  %-16s %9.2f us  (reference %9.2f us, floor %7.2f us, %3.0f%% SOL)\n", w->id,
			       w->median_us, w->ref_median_us, w->floor_us, 100.0 * w->sol_fraction);
		}
		printf("\n");
		ks_archive_cli_take_home(ar, op->key, root, NULL, best.id);
		free(params);
	}
	ks_record_release(&best);
}

/* The LLM side of a search: its settings, client and prompts. */
struct llm_setup {
	int wanted;
	struct ks_cli_llm given;  /* as given on the command line */
	int off;		  /* --no-llm */
	struct ks_llm_config cfg; /* the numbers are bound to options directly */
	struct ks_llm *client;
	struct ks_llm_mutator_config mutator_cfg; /* the repair, tune, rewrite numbers bound to options too */
	char *prompts_dir;
	char *system_prompt;
};

/* The option rows that need an LLM endpoint carry this group. */
enum { GROUP_LLM = 1 };

/* Defaults, before the options overwrite what they give. */
static void llm_init(struct llm_setup *l)
{
	ks_llm_config_init(&l->cfg);
	l->mutator_cfg = (struct ks_llm_mutator_config){ .max_repairs = 2,
							 .tune_budget = 8,
							 .rewrite_every = 10,
							 .population_cap = 12,
							 .move_share = 0.3 };
}

/*
 * Settings from the options (first) and the environment.  The LLM is
 * wanted when a URL or model is given either way, unless --no-llm.
 */
static int llm_configure(const struct ks_option *opts, struct llm_setup *l)
{
	const char *env_url = getenv("KSEARCH_LLM_URL"), *env_model = getenv("KSEARCH_LLM_MODEL");
	const struct ks_option *needs;
	struct ks_error err;
	char *prices;
	int rc, found = 0;

	if (l->off)
		return 0;
	l->wanted = l->given.url || l->given.model || (env_url && *env_url) || (env_model && *env_model);
	if (!l->wanted) {
		if ((needs = ks_opts_given_in_group(opts, GROUP_LLM)))
			return ks_cli_usage("evolve",
					    "--%s needs an LLM endpoint: give --llm-url and --llm-model "
					    "(or KSEARCH_LLM_URL and KSEARCH_LLM_MODEL)",
					    needs->long_name);
		return 0;
	}
	if ((rc = ks_cli_llm_configure("evolve", opts, &l->given, &l->cfg)))
		return rc;
	if (ks_prompts_dir_find(&l->prompts_dir, &err) < 0) {
		ks_cli_error("evolve", "%s", err.msg);
		return KS_EXIT_FAILED;
	}
	prices = ks_path_join(l->prompts_dir, "prices.json");
	rc = l->cfg.model ? ks_llm_prices_load(prices, l->cfg.model, &l->cfg.price, &found, &err) : 0;
	free(prices);
	if (rc < 0) {
		ks_cli_error("evolve", "%s", err.msg);
		return KS_EXIT_FAILED;
	}
	l->cfg.has_price = found;
	if (ks_llm_config_validate(&l->cfg, &err) < 0)
		return ks_cli_usage("evolve", "%s", err.msg);
	return 0;
}

static void llm_release(struct llm_setup *l)
{
	ks_llm_close(l->client);
	ks_llm_config_release(&l->cfg);
	free(l->prompts_dir);
	free(l->system_prompt);
}

int cmd_evolve(int argc, char **argv)
{
	struct ks_search_config cfg = {
		.seed = 1, .status_every_s = 30, .explore = 0.3, .exploit = 0.5, .recent = 0.2, .climb = 0.5
	};
	struct llm_setup llm = { 0 };
	const char *op_name = NULL, *root = "archive", *gpus_text = NULL, *log_path = NULL,
		   *search_name = "map-elites";
	double knob_share = -1; /* not given */
	int time_cap = 0, fresh = 0;
	struct ks_option opts[] = {
		KS_OPT_STRING(0, "op", &op_name, "NAME", "the operator to search (see `ksearch ops`)"),
		KS_OPT_STRING(0, "archive", &root, "DIR", "archive root (default: archive)"),
		KS_OPT_UINT64(0, "budget", &cfg.budget, "N", 1, "a number of evaluations > 0",
			      "stop after N evaluations in this run"),
		KS_OPT_DURATION(0, "time", &cfg.time_limit_s, "DURATION",
				"a duration such as 8h, 20m, 90s or 1h30m",
				"stop after this long (8h, 20m, 90s, 1h30m); the candidates in flight finish "
				"and the workloads' last bests are confirmed (--confirm-share) after it, "
				"none started past 5% of DURATION more (10 s to 1 min)"),
		KS_OPT_DOUBLE(0, "target", &cfg.target_fitness, "FITNESS", DBL_MIN, DBL_MAX,
			      "a fitness > 0 (a speedup over the reference)",
			      "stop when the best fitness reaches this"),
		KS_OPT_STRING(0, "gpus", &gpus_text, "LIST|all", "GPUs to use, e.g. 0,1 or all (default 0)"),
		KS_OPT_INT(
			'j', "jobs", &cfg.jobs, "N", 1, 256, "1 to 256 compile processes",
			"compile processes (default: 8 per GPU, but at most the CPUs this process may use, "
			"or its rank's share of the host's, minus one per GPU and one for the search; at "
			"least 1)"),
		KS_OPT_UINT64(0, "seed", &cfg.seed, "N", 0, "a non-negative integer",
			      "random seed for a new search (default 1)"),
		KS_OPT_DOUBLE(0, "explore", &cfg.explore, "W", 0, DBL_MAX, "a number >= 0",
			      "weight of uniform parents over filled cells (default 0.3)"),
		KS_OPT_DOUBLE(0, "exploit", &cfg.exploit, "W", 0, DBL_MAX, "a number >= 0",
			      "weight of fitness-weighted parents (default 0.5)"),
		KS_OPT_DOUBLE(0, "recent", &cfg.recent, "W", 0, DBL_MAX, "a number >= 0",
			      "weight of parents from recently improved cells (default 0.2)"),
		KS_OPT_DOUBLE(0, "climb", &cfg.climb, "F", 0, 1, "a share from 0 to 1",
			      "share of map-elites proposals that climb: an unevaluated neighbour of the "
			      "best, or of a workload's best (default 0.5; 0: elites' moves only)"),
		KS_OPT_DOUBLE(0, "knob-share", &knob_share, "F", 0, 1, "a share from 0 to 1",
			      "share of proposals that turn one compiler knob of an elite's source: "
			      "__launch_bounds__ min blocks, load/store cache hints, marked unroll counts "
			      "(default 0.1 with map-elites, 0 with random or greedy; 0: never)"),
		KS_OPT_STRING(
			0, "search", &search_name, "map-elites|random|greedy",
			"how the built-in mutator searches: map-elites (the default: --climb from the bests, "
			"else params of the grid's elites, wider moves for cells that stop improving), "
			"random "
			"(uniform over the allowed space) or greedy (a neighbourhood climber from the best, "
			"with restarts)"),

		KS_OPT_STRING(0, "log", &log_path, "FILE", "append JSON-lines events to FILE"),
		KS_OPT_DOUBLE(0, "profile-share", &cfg.profile_share, "F", 0, 0.5, "a share from 0 to 0.5",
			      "profile new elites with ncu in at most this share of the GPU time "
			      "(default 0.1; 0: never)"),
		KS_OPT_DOUBLE(
			0, "sanitize-share", &cfg.sanitize_share, "F", 0, 0.5, "a share from 0 to 0.5",
			"check every new best and per-workload best with compute-sanitizer (memcheck, "
			"racecheck on shared memory) in at most this share of the GPU time; a best that "
			"fails is demoted (default 0.1; 0: never)"),
		KS_OPT_DOUBLE(0, "confirm-share", &cfg.confirm_share, "F", 0, 0.5, "a share from 0 to 0.5",
			      "time every new per-workload best again, on fresh length splits, in at most "
			      "this share of the GPU time; it then ranks by the slower of its two times, so "
			      "that no best holds its place by a lucky draw (default 0.05; 0: never)"),
		KS_OPT_BOOL(0, "fresh", &fresh,
			    "start a new archive; the old one is moved aside, not deleted"),
		KS_OPT_INT(0, "time-cap", &time_cap, "MS", 1, 3600000, "milliseconds from 1 to 3600000",
			   "timing budget per benchmark workload (default 300)"),
		KS_OPT_STRING(0, "llm-url", &llm.given.url, "URL",
			      "LLM endpoint base, up to the version: https://api.openai.com/v1 "
			      "(env KSEARCH_LLM_URL)"),
		KS_OPT_STRING(0, "llm-model", &llm.given.model, "NAME",
			      "model name as the endpoint knows it (env KSEARCH_LLM_MODEL)"),
		/* the rows from here to the next group need an LLM endpoint */
		KS_OPT_GROUP(GROUP_LLM),
		KS_OPT_STRING(0, "llm-provider", &llm.given.provider, "openai|anthropic",
			      "the protocol (default openai; env KSEARCH_LLM_PROVIDER)"),
		KS_OPT_INT(0, "llm-concurrency", &llm.cfg.concurrency, "N", 1, 64, "1 to 64 requests",
			   "LLM requests in flight at once (default 4)"),
		KS_OPT_DOUBLE(0, "temperature", &llm.cfg.temperature, "T", 0, 2, "a temperature from 0 to 2",
			      "sampling temperature (default: none sent, the model's own)"),
		KS_OPT_INT(0, "max-tokens", &llm.cfg.max_tokens, "N", 1, 1000000,
			   "a number of tokens from 1 to 1000000",
			   "answer budget, reasoning included (default 32768; env KSEARCH_LLM_MAX_TOKENS)"),
		KS_OPT_DURATION(0, "llm-timeout", &llm.given.timeout_s, "DURATION",
				"a duration such as 15m, 900s or 1h",
				"longest wait for one answer (default 15m; env KSEARCH_LLM_TIMEOUT)"),
		KS_OPT_STRING(0, "llm-extra", &llm.given.extra, "JSON",
			      "fields merged into every request body (env KSEARCH_LLM_EXTRA)"),
		KS_OPT_LIST(0, "llm-header", &llm.given.headers, "'NAME: VALUE'",
			    "a header for every request, repeatable (env KSEARCH_LLM_HEADERS)"),
		KS_OPT_UINT64(0, "llm-budget-tokens", &llm.cfg.budget_tokens, "N", 1,
			      "a number of tokens > 0",
			      "stop using the LLM after N prompt + completion tokens"),
		KS_OPT_DOUBLE(0, "llm-budget-usd", &llm.cfg.budget_usd, "USD", 1e-9, 1e9,
			      "a cost in US dollars > 0 (at most 1e9)",
			      "stop using the LLM after this cost (prompts/prices.json)"),
		KS_OPT_INT(0, "llm-repairs", &llm.mutator_cfg.max_repairs, "N", 0, 10, "0 to 10 repair turns",
			   "repair turns for a failed LLM child (default 2)"),
		KS_OPT_INT(0, "llm-tune", &llm.mutator_cfg.tune_budget, "N", 0, 10000, "0 to 10000 variants",
			   "param variants tried per new LLM kernel (default 8)"),
		KS_OPT_INT(0, "llm-rewrite-every", &llm.mutator_cfg.rewrite_every, "N", 0, 1000000,
			   "a number of children from 0 to 1000000",
			   "LLM children between strategy rewrites; 0 never (default 10)"),
		KS_OPT_GROUP(0),
		KS_OPT_BOOL(0, "no-llm", &llm.off,
			    "the built-in mutator only, even with KSEARCH_LLM_URL set"),
		KS_OPT_END,
	};
	struct ks_search_summary sum;
	struct ks_gpu_backend gb = { 0 };
	struct evolve_cluster ec;
	const struct ks_backend *backend = NULL;
	long cpus, online;
	int all_gpus_n = 0; /* the GPUs the search's lanes run on, every rank's */
	struct ks_archive_options aopts = { .flags = KS_ARCHIVE_CREATE };
	struct ks_archive *ar = NULL;
	struct ks_family *families = NULL;
	struct ks_op op = { 0 };
	struct ks_error err;
	const char **positional = NULL;
	size_t n_positional, n_families = 0, n_gpus = 0;
	int *gpus = NULL, rc, ret = KS_EXIT_FAILED, gb_open = 0;
	char moved[4200];
	struct ks_archive_metrics m;
	struct ks_mutator_settings mutator_settings = { 0 };
	const struct ks_mutator **mutators = NULL;
	size_t n_mutators = 0;

	llm_init(&llm);
	cfg.profile_share = 0.1;
	cfg.sanitize_share = 0.1;
	cfg.confirm_share = 0.05;
	cfg.jobs = 0; /* not given: from the CPUs and the GPUs, once those are known */
	rc = ks_opts_parse("evolve", opts, &help, argc, argv, &positional, &n_positional);
	if (rc) {
		ks_llm_config_release(&llm.cfg);
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	}
	if (n_positional) {
		ret = ks_cli_usage("evolve", "unexpected argument '%s' (the operator goes in --op NAME)",
				   positional[0]);
		goto cleanup;
	}
	if (!op_name) {
		ret = ks_cli_usage("evolve", "--op NAME is required (see `ksearch ops`)");
		goto cleanup;
	}
	if (strcmp(search_name, "map-elites") && strcmp(search_name, "random") &&
	    strcmp(search_name, "greedy")) {
		ret = ks_cli_usage("evolve", "--search %s: expected map-elites, random or greedy",
				   search_name);
		goto cleanup;
	}

	if (!cfg.budget && cfg.time_limit_s <= 0 && cfg.target_fitness <= 0)
		cfg.budget = DEFAULT_BUDGET;
	if (cfg.explore + cfg.exploit + cfg.recent <= 0) {
		ret = ks_cli_usage("evolve", "--explore, --exploit and --recent cannot all be 0");
		goto cleanup;
	}
	/* one rank of an MPI job, or not (then nothing below differs) */
	evolve_cluster_detect(&ec);
	if (gpus_text) {
		if (parse_gpus(gpus_text, &gpus, &n_gpus, &err) < 0) {
			ret = ks_cli_usage("evolve", "%s", err.msg);
			goto cleanup;
		}
	} else if (!evolve_cluster_active(&ec)) {
		gpus = ks_calloc(1, sizeof(*gpus));
		n_gpus = 1;
	}
	if ((rc = llm_configure(opts, &llm))) {
		ret = rc;
		goto cleanup;
	}
	if (ks_op_find(op_name, &op, &err) < 0 || ks_families_load(&op, &families, &n_families, &err) < 0) {
		ks_cli_error("evolve", "%s", err.msg);
		goto cleanup;
	}
	if (log_path && !(cfg.log = fopen(log_path, "a"))) {
		ks_cli_error("evolve", "--log %s: %s", log_path, strerror(errno));
		goto cleanup;
	}

	/* the GPU workers start before the archive opens: no child inherits LMDB */
	ks_child_program();
	if (!n_gpus && all_gpus(&gpus, &n_gpus, &err) < 0) {
		ks_cli_error("evolve", "%s\n%s", err.msg, no_gpu_hint);
		ret = EXIT_NO_GPU;
		goto cleanup;
	}
	online = sysconf(_SC_NPROCESSORS_ONLN);
	/* the default (one GPU) and --gpus all are per host: each rank on it takes its share */
	if (evolve_cluster_active(&ec) && (!gpus_text || !strcmp(gpus_text, "all")))
		evolve_cluster_share(&ec, gpus, &n_gpus, gpus_text != NULL);
	cpus = ks_cpu_share(online, ks_cpu_plan_host()->allowed_cpus,
			    evolve_cluster_active(&ec) ? ec.role.local_size : 1);
	if (!cfg.jobs) {
		cfg.jobs = ks_search_default_jobs(cpus, n_gpus);
		if (cfg.jobs < 8 * (int)n_gpus && ks_cpu_plan_host()->allowed_cpus < online)
			printf("ksearch evolve: %s may use %ld of this host's %ld CPUs (its affinity), so %d "
			       "compile "
			       "process%s; under mpirun, --bind-to none lets the ranks share the host's "
			       "CPUs\n",
			       evolve_cluster_active(&ec) ? "this rank" : "this process", cpus, online,
			       cfg.jobs, cfg.jobs == 1 ? "" : "es");
	}
	if (ec.role.rank == 0)
		printf("ksearch evolve: operator %s (%s), %zu seed families, starting %zu GPU worker%s...\n",
		       op.key, op.name, n_families, n_gpus, n_gpus == 1 ? "" : "s");
	fflush(stdout);
	if (ks_gpu_backend_open(&gb, &op, gpus, n_gpus, time_cap, &err) < 0) {
		ks_cli_error("evolve", "%s\n%s", err.msg, no_gpu_hint);
		ret = EXIT_NO_GPU;
		goto cleanup;
	}
	gb_open = 1;
	backend = &gb.backend;
	all_gpus_n = (int)n_gpus;
	if (evolve_cluster_active(&ec)) {
		/* MPI starts after the GPU workers: no process forks with MPI initialised but compilers */
		if (evolve_cluster_start(&ec, &err) < 0) {
			ks_cli_error("evolve", "%s", err.msg);
			goto cleanup;
		}
		if (ec.role.rank > 0) {
			ret = serve_rank(&ec, &op, &gb, gpus, n_gpus, cfg.jobs);
			goto cleanup;
		}
	}
	printf("GPU: %s (%s), %d SMs, DRAM %.0f GB/s measured, peaks %s\n", gb.evaluators[0].profile.name,
	       gb.evaluators[0].profile.arch, gb.evaluators[0].profile.sm_count,
	       gb.evaluators[0].profile.dram_gbps, gb.evaluators[0].profile.peak_source);
	print_cores(&gb, "CPUs: ");
	if (evolve_cluster_active(&ec)) {
		int jobs = cfg.jobs;

		printf("MPI: rank 0 of %d (%s), waiting for every rank's GPUs...\n", ec.role.size,
		       ec.role.launcher);
		fflush(stdout);
		if (evolve_cluster_backend(&ec, &gb.backend, ks_gpu_backend_model(&gb), &jobs, &backend,
					   &all_gpus_n, &err) < 0) {
			ks_cli_error("evolve", "%s", err.msg);
			goto cleanup;
		}
		printf("MPI: %d ranks, %d GPUs in all (%zu here), %d compile processes in all (%d here); "
		       "rank 0 "
		       "keeps the archive and the search\n",
		       ec.role.size, all_gpus_n, n_gpus, jobs, cfg.jobs);
		cfg.jobs = jobs;
	}
	if (cfg.profile_share > 0) {
		char *ncu = ks_profile_find_ncu(NULL);

		if (ncu)
			printf("profiler: %s; new elites are profiled in at most %.0f%% of the GPU time\n",
			       ncu, 100.0 * cfg.profile_share);
		else
			printf("profiler: %s not found (Nsight Compute; on PATH, or name it with "
			       "KSEARCH_NCU); the "
			       "search goes on without profiles\n",
			       getenv("KSEARCH_NCU") ? getenv("KSEARCH_NCU") : "ncu");
		if (!ncu)
			cfg.profile_share = 0;
		free(ncu);
	}
	if (cfg.sanitize_share > 0) {
		char *sanitizer = ks_sanitize_find(NULL);

		if (sanitizer)
			printf("sanitizer: %s; new bests are checked in at most %.0f%% of the GPU time\n",
			       sanitizer, 100.0 * cfg.sanitize_share);
		else
			printf("sanitizer: %s not found (NVIDIA's compute-sanitizer, in the CUDA toolkit; on "
			       "PATH, or name it with KSEARCH_COMPUTE_SANITIZER); the search goes on without "
			       "sanitizer checks\n",
			       getenv("KSEARCH_COMPUTE_SANITIZER") ? getenv("KSEARCH_COMPUTE_SANITIZER")
								   : "compute-sanitizer");
		if (!sanitizer)
			cfg.sanitize_share = 0;
		free(sanitizer);
	}
	if (llm.wanted) {
		if (ks_llm_system_prompt(llm.prompts_dir, &op, &gb.evaluators[0].profile, &llm.system_prompt,
					 &err) < 0 ||
		    ks_llm_open(&llm.client, &llm.cfg, &err) < 0) {
			ks_cli_error("evolve", "%s", err.msg);
			goto cleanup;
		}
		llm.mutator_cfg.client = llm.client;
		llm.mutator_cfg.model = llm.cfg.model;
		llm.mutator_cfg.prompts_dir = llm.prompts_dir;
		llm.mutator_cfg.system_prompt = llm.system_prompt;
		llm.mutator_cfg.concurrency = llm.cfg.concurrency;
		mutator_settings.llm = &llm.mutator_cfg;
		{
			char settings[2048];

			ks_cli_llm_describe(&llm.cfg, llm.client, settings, sizeof(settings));
			printf("LLM: %s at %s (%s), %d in flight, %s", llm.cfg.model, llm.cfg.base_url,
			       ks_llm_provider_name(llm.cfg.provider), llm.cfg.concurrency, settings);
		}
		if (llm.cfg.budget_tokens)
			printf(", budget %llu tokens", (unsigned long long)llm.cfg.budget_tokens);
		if (llm.cfg.budget_usd > 0)
			printf(", budget $%.2f", llm.cfg.budget_usd);
		printf("; prompts from %s\n", llm.prompts_dir);
	}
	if (fresh) {
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
	if (ks_archive_metrics(ar, &m, &err) == 0 && m.candidates) {
		printf("resuming %s: %llu candidates, %llu/%llu cells filled, best %.3fx (id %llu)\n",
		       ks_archive_path(ar), (unsigned long long)m.candidates,
		       (unsigned long long)m.cells_filled, (unsigned long long)m.cells, m.best_fitness,
		       (unsigned long long)m.best_id);
		/* over MPI the other ranks' GPUs time candidates too, and rank 0 knows only its own */
		if (!evolve_cluster_active(&ec))
			note_bests_timed_elsewhere(ar, &gb);
	} else
		printf("new archive %s\n", ks_archive_path(ar));
	printf("stops: %s%s%s; Ctrl-C finishes the candidates in flight and stops\n\n",
	       cfg.budget ? "budget " : "", cfg.time_limit_s > 0 ? "time " : "",
	       cfg.target_fitness > 0 ? "target" : "");
	fflush(stdout);

	/* who proposes after the seeds, in turn: the rows of src/search/mutators.c that take part */
	mutator_settings.search = search_name;
	mutator_settings.knob_share = knob_share;
	ks_mutators_make(&mutator_settings, &mutators, &n_mutators);
	cfg.mutators = mutators;
	cfg.n_mutators = n_mutators;
	cfg.out = stdout;
	cfg.status_tty = isatty(STDOUT_FILENO);
	cfg.stop = &stop_flag;
	/* a closed terminal (SIGHUP) ends a search as Ctrl-C and SIGTERM do; children have groups of their
	 * own */
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	if (ks_search_run(ar, &op, families, n_families, backend, &cfg, &sum, &err) < 0) {
		ks_cli_error("evolve",
			     "%s (every result so far is in the archive; run the same command to resume)",
			     err.msg);
		goto cleanup;
	}
	print_summary(ar, &op, root, &sum, &cfg, (size_t)all_gpus_n, mutator_settings.llm != NULL);
	{
		char why[512];
		int dead = evolve_cluster_dead(&ec, why, sizeof(why));

		if (dead)
			printf("MPI: %d rank%s given up during the search (%s); %s candidates went to other "
			       "ranks\n",
			       dead, dead == 1 ? "" : "s", why, dead == 1 ? "its" : "their");
	}
	if (llm.client) {
		struct ks_llm_usage u;

		ks_llm_usage(llm.client, &u);
		printf("LLM use in this run: %llu requests, %llu prompt", (unsigned long long)u.requests,
		       (unsigned long long)u.prompt_tokens);
		if (u.cached_tokens + u.cache_write_tokens)
			printf(" (%llu cached)",
			       (unsigned long long)(u.cached_tokens + u.cache_write_tokens));
		printf(" + %llu completion tokens", (unsigned long long)u.completion_tokens);
		if (u.reasoning_tokens)
			printf(" (%llu reasoning)", (unsigned long long)u.reasoning_tokens);
		if (u.adaptations)
			printf(", %llu parameter%s changed for the endpoint",
			       (unsigned long long)u.adaptations, u.adaptations == 1 ? "" : "s");
		if (llm.cfg.has_price)
			printf(", $%.4f", u.cost_usd);
		printf("%s (strategies: ksearch archive prompts --op %s --archive %s)\n",
		       u.tokens_exhausted || u.usd_exhausted ? ", budget spent" : "", op.key, root);
	}
	ret = KS_EXIT_OK;
cleanup:
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	ks_archive_close(ar);
	evolve_cluster_finish(&ec, ret);
	if (gb_open)
		ks_gpu_backend_close(&gb);
	if (cfg.log)
		fclose(cfg.log);
	ks_families_free(families, n_families);
	ks_op_release(&op);
	ks_mutators_free(mutators, n_mutators); /* before the LLM client they borrow */
	llm_release(&llm);
	free(gpus);
	free(positional);
	ks_opts_release(opts);
	return ret;
}
