/*
 * report.c - `ksearch report`: an archive as one HTML page (report.h),
 * written whole to a temporary file and renamed, so that a browser
 * reloading it never sees half a page.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_cli.h"
#include "cli.h"
#include "ksearch/base/fs.h"
#include "ksearch/report/report.h"

static const char *const cmd = "report";

static const struct ks_help help = {
	.usage = "ksearch report --op NAME [--archive DIR] [--gpu MODEL] [-o report.html] [--compare "
		 "FILE.json]",
	.description = "Write an archive as one self-contained HTML page (inline SVG, no script, nothing\n"
		       "fetched): the grid as a heatmap for each pair of its descriptors, with each\n"
		       "elite's details on hover; the best fitness, QD-score and coverage against\n"
		       "evaluations and against time; the best kernel per workload against the\n"
		       "reference and the HBM floor (and the PyTorch timings of --compare, the JSON\n"
		       "tools/compare-torch.py --json writes); the best one's lineage; the verdicts over\n"
		       "time; where candidates come from; the LLM's strategies by reward, its tokens\n"
		       "and cost.\n"
		       "\n"
		       "It reads one snapshot of the archive, so it can be made while a search runs,\n"
		       "and reads a bounded part of it (the kept metrics, the indexes, a few thousand\n"
		       "records), so it takes about a second and a few hundred KB at a million\n"
		       "candidates.  --op may be left out when DIR holds one archive; -o - writes to\n"
		       "stdout.",
	.examples =
		"  ksearch report --op gqa\n"
		"  ksearch report --op gqa --archive /data/archive -o gqa-h200.html\n"
		"  ksearch report --op gqa --compare compare.json    # from tools/compare-torch.py --json\n",
	.exit_codes = NULL,
};

static int load_compare(const char *path, json_t **doc)
{
	json_error_t jerr;

	*doc = json_load_file(path, 0, &jerr);
	if (*doc)
		return 0;
	if (jerr.line > 0)
		ks_cli_error(cmd, "--compare %s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
	else
		ks_cli_error(cmd, "--compare %s: %s", path, jerr.text);
	return -1;
}

/* Write the page to path (through a temporary file beside it), or to stdout for "-". */
static int write_page(const struct ks_report *r, const char *path, long *bytes)
{
	struct ks_error err;
	char *page = NULL;
	size_t size = 0;
	FILE *f;
	int ret = -1;

	struct stat st;

	if (!strcmp(path, "-")) {
		if (ks_report_write_html(r, stdout, &err) < 0) {
			ks_cli_error(cmd, "%s", err.msg);
			return -1;
		}
		*bytes = -1;
		return 0;
	}
	/* /dev/null, a pipe: written as it is, there is nothing to rename */
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		if (S_ISDIR(st.st_mode)) {
			ks_cli_error(cmd, "-o %s: is a folder; give the page's file name (-o %s/report.html)",
				     path, path);
			return -1;
		}
		if (!(f = fopen(path, "w"))) {
			ks_cli_error(cmd, "-o %s: %s", path, strerror(errno));
			return -1;
		}
		ret = ks_report_write_html(r, f, &err);
		*bytes = ret < 0 ? -1 : ftell(f);
		if (fclose(f) != 0 && ret == 0) {
			ks_fail(&err, "%s", strerror(errno));
			ret = -1;
		}
		if (ret < 0)
			ks_cli_error(cmd, "-o %s: %s", path, err.msg);
		return ret;
	}
	/* the page whole in memory, then written beside path and renamed: a reader never sees a part */
	if (!(f = open_memstream(&page, &size))) {
		ks_cli_error(cmd, "-o %s: %s", path, strerror(errno));
		return -1;
	}
	ret = ks_report_write_html(r, f, &err);
	if (fclose(f) != 0 && ret == 0) {
		ks_fail(&err, "%s", strerror(errno));
		ret = -1;
	}
	if (ret == 0)
		ret = ks_write_file_atomic(path, page, size, &err);
	if (ret < 0)
		ks_cli_error(cmd, "-o %s: %s", path, err.msg);
	else
		*bytes = (long)size;
	free(page);
	return ret;
}

int cmd_report(int argc, char **argv)
{
	struct ks_archive_pick pick = KS_ARCHIVE_PICK_INIT;
	const char *output = "report.html", *compare_path = NULL;
	struct ks_option opts[] = {
		KS_ARCHIVE_COMMON_OPTS(&pick),
		KS_OPT_STRING('o', "output", &output, "FILE",
			      "the page to write (default: report.html; - for stdout)"),
		KS_OPT_STRING(0, "compare", &compare_path, "FILE.json",
			      "timings to compare with, from tools/compare-torch.py --json"),
		KS_OPT_END,
	};
	struct ks_report_options ropts = { 0 };
	struct ks_archive *ar = NULL;
	struct ks_report *report = NULL;
	struct ks_error err;
	json_t *compare = NULL;
	const char **pos;
	size_t n_pos;
	long bytes;
	int rc, ret = KS_EXIT_USAGE;

	rc = ks_opts_parse(cmd, opts, &help, argc, argv, &pos, &n_pos);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	if (n_pos) {
		ks_cli_usage(cmd,
			     "takes no arguments (got '%s'; the archive is chosen with --archive and --op)",
			     pos[0]);
		goto cleanup;
	}
	ret = KS_EXIT_FAILED;
	if (compare_path && load_compare(compare_path, &compare) < 0)
		goto cleanup;
	ropts.compare = compare;
	ropts.compare_file = compare_path;
	if (ks_archive_cli_open(cmd, &pick, &ar))
		goto cleanup;
	if (ks_report_gather(ar, &ropts, &report, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	if (write_page(report, output, &bytes) < 0)
		goto cleanup;
	if (bytes >= 0) {
		const struct ks_archive_metrics *m = &report->metrics;
		char kept[64] = "";

		/* a sample of a search (an export of its elites): ids count what the search evaluated */
		if (m->next_id > m->candidates + 1)
			snprintf(kept, sizeof(kept), " kept of %llu evaluated",
				 (unsigned long long)m->next_id - 1);
		printf("wrote %s (%.0f KB): %s on %s, %llu candidates%s, best %.3f (#%llu)\n", output,
		       bytes / 1024.0, report->op, report->gpu, (unsigned long long)m->candidates, kept,
		       m->best_fitness, (unsigned long long)m->best_id);
	}
	ret = KS_EXIT_OK;
cleanup:
	ks_report_free(report);
	ks_archive_close(ar);
	json_decref(compare);
	free(pos);
	ks_opts_release(opts);
	return ret;
}
