/*
 * profile.c - `ksearch profile`: profiler counters of one candidate (an
 * archive's record, stored back into it, or a file) on one workload.  The
 * work is profile.h's; this layer picks the candidate, checks that the
 * GPU is the one its archive was timed on, prints and stores.
 */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive_cli.h"
#include "cli.h"
#include "ksearch/archive/archive.h"
#include "ksearch/base/util.h"
#include "ksearch/evaluate/cuda.h"
#include "ksearch/evaluate/profile.h"
#include "ksearch/op/op.h"

static const char *const cmd = "profile";

/* Exit codes of this command (also in the help). */
enum { EXIT_NO_PROFILER = 3, EXIT_NOT_PROFILED = 4 };

static const struct ks_help help = {
	.usage = "ksearch profile --op NAME (--id ID | --best) [--archive DIR] [--gpu MODEL] [options]\n"
		 "       ksearch profile --op NAME FILE.cu [--param K=V ...] [options]",
	.description =
		"Measure a candidate with Nsight Compute (ncu) on one benchmark workload: DRAM and SM\n"
		"throughput as fractions of the GPU's peak, achieved occupancy, the L2 hit rate, the three\n"
		"warp stall reasons that cost most, and local-memory (spill) traffic.  The candidate runs\n"
		"in a process of its own under the profiler, once to warm up and once measured; nothing\n"
		"of this touches a timing.\n"
		"\n"
		"With --id (or --best), the candidate is a verified record of the operator's archive,\n"
		"profiled on the GPU model the archive holds timings of, and the profile is stored in the\n"
		"record: `ksearch archive show` prints it, the LLM mutator tells the LLM about it, and\n"
		"a grid with a measured axis (dram_fraction, achieved_occupancy) places the candidate by\n"
		"it.  `ksearch evolve` profiles new elites by itself.  With a FILE, the profile is\n"
		"printed only.\n"
		"\n"
		"The workload is the benchmark workload with the most bytes to move, unless --workload\n"
		"names another.  ncu is found as $KSEARCH_NCU, on PATH, or in /usr/local/cuda/bin; it\n"
		"needs permission to read the GPU's counters (root, or the nvidia module's\n"
		"NVreg_RestrictProfilingToAdminUsers=0).",
	.examples = "  ksearch profile --op gqa --best\n"
		    "  ksearch profile --op gqa --id 42 --workload b16_kv8636\n"
		    "  ksearch profile --op gqa operators/gqa/reference.cu --json\n",
	.exit_codes = "  3  no profiler here (ncu missing or unusable), or no permission to read counters\n"
		      "  4  the candidate could not be profiled (it crashed or hung under the profiler)",
};

static void print_profile(const char *what, const json_t *profile, const char *gpu)
{
	char *text = ks_profile_text(profile, "  ");
	const json_t *kernels = json_object_get(profile, "kernels"), *k;
	size_t i;

	printf("profile of %s on %s, %s (%s, %.1f s):\n%s", what,
	       json_string_value(json_object_get(profile, "workload")) ?: "?", gpu,
	       json_string_value(json_object_get(profile, "tool")) ?: "ncu",
	       json_number_value(json_object_get(profile, "seconds")), text ? text : "");
	if (json_array_size(kernels) > 1) {
		printf("  launches:");
		json_array_foreach(kernels, i, k)
			printf("%s %s %.1f us (DRAM %.0f%%, occupancy %.2f)", i ? ";" : "",
			       json_string_value(json_object_get(k, "name")) ?: "?",
			       json_number_value(json_object_get(k, "duration_us")),
			       100 * json_number_value(json_object_get(k, "dram_fraction")),
			       json_number_value(json_object_get(k, "achieved_occupancy")));
		printf("\n");
	}
	free(text);
}

/* Store the profile in the record and say what it changed in the grid. */
static int store(const struct ks_archive_pick *pick, const char *op_key, const char *gpu, uint64_t id,
		 const json_t *profile, FILE *out)
{
	struct ks_archive_options options = { 0 };
	struct ks_archive_profile_result res;
	struct ks_archive *ar = NULL;
	struct ks_error err;
	int ret = KS_EXIT_FAILED;

	if (ks_archive_open(&ar, pick->root, op_key, gpu, &options, &err) < 0 ||
	    ks_archive_set_profile(ar, id, profile, &res, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	fprintf(out, "stored in %s, record #%llu", ks_archive_path(ar), (unsigned long long)id);
	if (!res.moved) {
		fprintf(out, "; its cell is unchanged\n");
	} else {
		fprintf(out, "; its measured descriptors move it from cell %lld to %lld: %s",
			(long long)res.old_cell, (long long)res.cell, ks_archive_outcome_name(res.outcome));
		if (res.outcome == KS_ARCHIVE_OUTSIDE_GRID)
			fprintf(out, " (%s)", res.why);
		if (res.left_elite && res.successor_id)
			fprintf(out, "; #%llu is now the elite of cell %lld",
				(unsigned long long)res.successor_id, (long long)res.old_cell);
		else if (res.left_elite)
			fprintf(out, "; cell %lld is empty now", (long long)res.old_cell);
		fprintf(out, "\n");
	}
	ret = 0;
cleanup:
	ks_archive_close(ar);
	return ret;
}

int cmd_profile(int argc, char **argv)
{
	struct ks_archive_pick pick = KS_ARCHIVE_PICK_INIT;
	struct ks_opt_list params = { 0 };
	struct ks_profile_request req = { 0 };
	struct ks_profile_outcome outcome;
	struct ks_gpu_info info;
	struct ks_archive_target target = { 0 };
	struct ks_error err;
	uint64_t id = 0;
	int best = 0, json = 0, device = 0, ret = KS_EXIT_FAILED, rc;
	double timeout_s = 120;
	const char *workload = NULL, *raw = NULL, **pos = NULL;
	char *ncu = NULL;
	size_t n_pos = 0;
	json_t *profile = NULL;
	struct ks_option opts[] = {
		KS_ARCHIVE_COMMON_OPTS(&pick),
		KS_OPT_CALLBACK(0, "id", &id, "ID", ks_archive_id_option,
				"the archive's candidate to profile"),
		KS_OPT_BOOL(0, "best", &best, "the archive's best candidate"),
		KS_OPT_LIST('p', "param", &params, "K=V", "with FILE: a param value (repeatable)"),
		KS_OPT_STRING(0, "workload", &workload, "ID", "the benchmark workload to profile on"),
		KS_OPT_INT(0, "device", &device, "N", 0, 1024, "a GPU number (0, 1, ...)",
			   "the GPU to profile on (default 0)"),
		KS_OPT_DURATION(0, "timeout", &timeout_s, "DURATION", "a duration such as 90s or 5m",
				"give up on a profile after this long (default 2m)"),
		KS_OPT_STRING(0, "raw", &raw, "FILE", "also write ncu's output (its CSV) to FILE"),
		KS_OPT_BOOL(0, "json", &json, "print the profile as JSON"),
		KS_OPT_END,
	};

	rc = ks_opts_parse(cmd, opts, &help, argc, argv, &pos, &n_pos);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	{
		struct ks_archive_target_args ta = { &pick,
						     ks_opts_given(opts, &pick.root),
						     ks_opts_given(opts, &id),
						     best,
						     id,
						     pos,
						     n_pos,
						     &params,
						     workload };

		if ((ret = ks_archive_cli_target_pick(cmd, "profiled", &ta, &target)))
			goto cleanup;
		ret = KS_EXIT_FAILED;
	}
	req.params = target.params;
	req.n_params = target.n_params;
	req.path = target.path;
	if (!(ncu = ks_profile_find_ncu(NULL))) {
		ks_cli_error(cmd,
			     "%s not found: profiling needs Nsight Compute's ncu (on PATH, or name it with "
			     "KSEARCH_NCU)",
			     getenv("KSEARCH_NCU") ? getenv("KSEARCH_NCU") : "ncu");
		ret = EXIT_NO_PROFILER;
		goto cleanup;
	}
	if (ks_cuda_device_info(device, &info, &err) < 0) {
		ks_cli_error(
			cmd,
			"%s\n(profiling runs %s on an NVIDIA GPU; `ksearch doctor` says what is missing)",
			err.msg, target.what);
		ret = EXIT_NO_PROFILER;
		goto cleanup;
	}
	if (target.gpu && strcmp(target.gpu, info.name)) {
		ks_cli_error(
			cmd,
			"the archive holds timings on %s, but GPU %d is a %s: profile a candidate on the GPU "
			"model it was timed on (--device N)",
			target.gpu, device, info.name);
		goto cleanup;
	}
	req.op = &target.op;
	req.source = target.source;
	req.workload = workload;
	req.gpu = device;
	req.timeout_ms = (int)(timeout_s * 1000 > 1e9 ? 1e9 : timeout_s * 1000);
	req.raw_path = raw;
	req.ncu = ncu;
	if (ks_profile_run(&req, &outcome, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	if (outcome.status != KS_PROFILE_OK) {
		ks_cli_error(cmd, "%s: %s", target.what, outcome.why);
		ret = outcome.status == KS_PROFILE_FAILED ? EXIT_NOT_PROFILED : EXIT_NO_PROFILER;
		goto cleanup;
	}
	profile = ks_profile_to_json(&outcome.profile);
	if (json) {
		json_dumpf(profile, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
		printf("\n");
	} else {
		print_profile(target.what, profile, info.name);
	}
	/* with --json, stdout holds the JSON alone */
	if (!n_pos &&
	    (ret = store(&pick, target.op_key, target.gpu, target.id, profile, json ? stderr : stdout)))
		goto cleanup;
	ret = KS_EXIT_OK;
cleanup:
	json_decref(profile);
	ks_archive_cli_target_release(&target);
	free(ncu);
	free(pos);
	ks_opts_release(opts);
	return ret;
}
