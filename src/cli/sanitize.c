/*
 * sanitize.c - `ksearch sanitize`: NVIDIA's compute-sanitizer on one
 * candidate (an archive's record, the check stored back into it, or a
 * file).  The work is sanitize.h's; this layer picks the candidate,
 * checks that the GPU is the one its archive was timed on, prints and
 * stores.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive_cli.h"
#include "cli.h"
#include "ksearch/archive/archive.h"
#include "ksearch/base/util.h"
#include "ksearch/evaluate/cuda.h"
#include "ksearch/evaluate/sanitize.h"
#include "ksearch/op/op.h"

static const char *const cmd = "sanitize";

/* Exit codes of this command (also in the help). */
enum { EXIT_NO_SANITIZER = 3, EXIT_INCOMPLETE = 4, EXIT_ERRORS = 5 };

static const struct ks_help help = {
	.usage = "ksearch sanitize --op NAME (--id ID | --best) [--archive DIR] [--gpu MODEL] [options]\n"
		 "       ksearch sanitize --op NAME FILE.cu [--param K=V ...] [options]",
	.description =
		"Check a candidate with NVIDIA's compute-sanitizer: memcheck sees every access outside a\n"
		"buffer as it happens, also one the kernel undoes before it ends (which the evaluator's\n"
		"guard bands, reading a buffer's surroundings after the run, cannot see); racecheck,\n"
		"run when a launch uses shared memory, sees shared-memory races between threads.  The\n"
		"candidate runs in a process of its own under the sanitizer, once per workload, with\n"
		"every buffer allocated at its exact size; memcheck runs every check and benchmark\n"
		"workload, racecheck the check workloads and the smallest benchmark workload (or both\n"
		"only --workload).\n"
		"\n"
		"With --id (or --best), the candidate is a verified record of the operator's archive,\n"
		"checked on the GPU model the archive holds timings of, and the check is stored in the\n"
		"record: `ksearch archive show` prints it, and a record that failed is demoted (no\n"
		"longer an elite, the best or a per-workload best; `ksearch export-best` refuses it).\n"
		"`ksearch evolve` checks new bests by itself (--sanitize-share).  With a FILE, the check\n"
		"is printed only.\n"
		"\n"
		"compute-sanitizer is found as $KSEARCH_COMPUTE_SANITIZER, on PATH, or in\n"
		"/usr/local/cuda/bin.",
	.examples = "  ksearch sanitize --op gqa --best\n"
		    "  ksearch sanitize --op gqa --id 42\n"
		    "  ksearch sanitize --op rmsnorm my_kernel.cu --param BLOCK=256 --json\n",
	.exit_codes = "  3  no sanitizer here (compute-sanitizer missing, or it cannot run on this GPU)\n"
		      "  4  the check did not finish (a deadline, or the candidate could not be run)\n"
		      "  5  the sanitizer reported errors: the candidate failed",
};

/* Store the check in the record and say what it changed. */
static int store(const struct ks_archive_pick *pick, const char *op_key, const char *gpu, uint64_t id,
		 const json_t *check, FILE *out)
{
	struct ks_archive_options options = { 0 };
	struct ks_archive_sanitizer_result res;
	struct ks_archive *ar = NULL;
	struct ks_error err;
	int ret = KS_EXIT_FAILED;

	if (ks_archive_open(&ar, pick->root, op_key, gpu, &options, &err) < 0 ||
	    ks_archive_set_sanitizer(ar, id, check, &res, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	fprintf(out, "stored in %s, record #%llu", ks_archive_path(ar), (unsigned long long)id);
	if (res.demoted) {
		fprintf(out, "; demoted:");
		if (res.left_elite && res.successor_id)
			fprintf(out, " #%llu is now the elite of cell %lld;",
				(unsigned long long)res.successor_id, (long long)res.cell);
		else if (res.left_elite)
			fprintf(out, " cell %lld is empty now;", (long long)res.cell);
		if (res.was_best)
			fprintf(out, " the best is now #%llu;", (unsigned long long)res.best_id);
		fprintf(out, " it was the best of %zu workload%s\n", res.workloads_lost,
			res.workloads_lost == 1 ? "" : "s");
	} else if (res.promoted) {
		fprintf(out, "; no longer demoted (the best of %zu workload%s)\n", res.workloads_gained,
			res.workloads_gained == 1 ? "" : "s");
	} else {
		fprintf(out, "\n");
	}
	ret = 0;
cleanup:
	ks_archive_close(ar);
	return ret;
}

int cmd_sanitize(int argc, char **argv)
{
	struct ks_archive_pick pick = KS_ARCHIVE_PICK_INIT;
	struct ks_opt_list params = { 0 };
	struct ks_sanitize_request req = { 0 };
	struct ks_sanitize_outcome outcome;
	struct ks_gpu_info info;
	struct ks_archive_target target = { 0 };
	struct ks_error err;
	uint64_t id = 0;
	int best = 0, json = 0, device = 0, ret = KS_EXIT_FAILED, rc;
	double timeout_s = 300;
	const char *workload = NULL, *raw = NULL, **pos = NULL;
	char *tool = NULL;
	size_t n_pos = 0;
	json_t *check = NULL;
	struct ks_option opts[] = {
		KS_ARCHIVE_COMMON_OPTS(&pick),
		KS_OPT_CALLBACK(0, "id", &id, "ID", ks_archive_id_option, "the archive's candidate to check"),
		KS_OPT_BOOL(0, "best", &best, "the archive's best candidate"),
		KS_OPT_LIST('p', "param", &params, "K=V", "with FILE: a param value (repeatable)"),
		KS_OPT_STRING(0, "workload", &workload, "ID", "check on this workload only"),
		KS_OPT_INT(0, "device", &device, "N", 0, 1024, "a GPU number (0, 1, ...)",
			   "the GPU to check on (default 0)"),
		KS_OPT_DURATION(0, "timeout", &timeout_s, "DURATION", "a duration such as 90s or 5m",
				"give up on each tool's run after this long (default 5m)"),
		KS_OPT_STRING(0, "raw", &raw, "FILE", "also write the sanitizer's output to FILE"),
		KS_OPT_BOOL(0, "json", &json, "print the check as JSON"),
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

		if ((ret = ks_archive_cli_target_pick(cmd, "checked", &ta, &target)))
			goto cleanup;
		ret = KS_EXIT_FAILED;
	}
	req.params = target.params;
	req.n_params = target.n_params;
	req.path = target.path;
	if (!(tool = ks_sanitize_find(NULL))) {
		ks_cli_error(cmd,
			     "%s not found: the check needs NVIDIA's compute-sanitizer (on PATH, or name it "
			     "with KSEARCH_COMPUTE_SANITIZER)",
			     getenv("KSEARCH_COMPUTE_SANITIZER") ? getenv("KSEARCH_COMPUTE_SANITIZER")
								 : "compute-sanitizer");
		ret = EXIT_NO_SANITIZER;
		goto cleanup;
	}
	if (ks_cuda_device_info(device, &info, &err) < 0) {
		ks_cli_error(
			cmd,
			"%s\n(the check runs %s on an NVIDIA GPU; `ksearch doctor` says what is missing)",
			err.msg, target.what);
		ret = EXIT_NO_SANITIZER;
		goto cleanup;
	}
	if (target.gpu && strcmp(target.gpu, info.name)) {
		ks_cli_error(
			cmd,
			"the archive holds timings on %s, but GPU %d is a %s: check a candidate on the GPU "
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
	req.sanitizer = tool;
	if (ks_sanitize_run(&req, &outcome, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	if (outcome.status == KS_SANITIZE_UNAVAILABLE || outcome.status == KS_SANITIZE_INCOMPLETE) {
		ks_cli_error(cmd, "%s: %s", target.what, outcome.why);
		ret = outcome.status == KS_SANITIZE_UNAVAILABLE ? EXIT_NO_SANITIZER : EXIT_INCOMPLETE;
		goto cleanup;
	}
	check = ks_sanitize_to_json(&outcome);
	if (json) {
		ks_cli_json_print(check, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
	} else {
		char *text = ks_sanitize_text(check);

		printf("sanitizer check of %s on %s: %s\n", target.what, info.name, text ? text : "?");
		free(text);
	}
	/* with --json, stdout holds the JSON alone */
	if (!n_pos &&
	    (ret = store(&pick, target.op_key, target.gpu, target.id, check, json ? stderr : stdout)))
		goto cleanup;
	ret = outcome.status == KS_SANITIZE_FAILED ? EXIT_ERRORS : KS_EXIT_OK;
cleanup:
	json_decref(check);
	ks_archive_cli_target_release(&target);
	free(tool);
	free(pos);
	ks_opts_release(opts);
	return ret;
}
