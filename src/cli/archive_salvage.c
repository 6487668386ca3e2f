/*
 * archive_salvage.c - `ksearch archive salvage SRC DST`: every readable
 * record, source and strategy prompt of a damaged archive copied into a
 * new one, and what was lost, by id.  The damaged archive is only read
 * (archive_salvage.c in src/archive/ does the reading, in child
 * processes that a damaged page may crash).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "archive_cli.h"

static const struct ks_help salvage_help = {
	.usage = "ksearch archive salvage SRC DST [--op NAME] [--gpu MODEL]",
	.description = "Copy everything that can still be read of the archive in folder SRC into a\n"
		       "new archive in folder DST: every record whose record and source text read\n"
		       "whole, with its id, and the strategy prompts.  Then the new archive is\n"
		       "built as an import builds one: its grid, elites, per-workload bests and\n"
		       "metrics are computed from the records saved, and `archive verify` passes\n"
		       "on it.  Prints how many records were saved and which were lost, by id,\n"
		       "with why.  SRC is only read, whatever its state: a damaged page that makes\n"
		       "a read fail, fault or hang costs the records under it, not the rest.\n"
		       "\n"
		       "When `archive verify`, `ls` or `report` fail on a damaged data.mdb (a\n"
		       "disk error, a copy torn while a search wrote), salvage it, check the new\n"
		       "archive, and point the search at it (`evolve --archive DST` goes on there:\n"
		       "its choices start anew, since the search's own state is not copied, but\n"
		       "nothing the archive holds is evaluated again).\n"
		       "DST must not hold an archive for the operator and GPU already.",
	.examples = "  ksearch archive salvage archive /data/rescued\n"
		    "  ksearch archive salvage /mnt/old-disk/archive rescued --op gqa --gpu 'NVIDIA H200'\n"
		    "  ksearch archive verify --archive /data/rescued && ksearch evolve --op gqa --archive "
		    "/data/rescued\n",
	.exit_codes = "  3  the new archive was written, but records or prompts were lost (listed)\n",
};

/* "3, 17-19, 40" for the lost ids, at most max runs, then "...". */
static void lost_ids(const struct ks_archive_salvage *s, struct ks_strbuf *sb, size_t max)
{
	size_t runs = 0;

	for (size_t i = 0; i < s->n_lost; i++) {
		size_t j = i;

		while (j + 1 < s->n_lost && s->lost[j + 1].id == s->lost[j].id + 1)
			j++;
		if (runs++ == max) {
			ks_strbuf_adds(sb, ", ...");
			return;
		}
		ks_strbuf_addf(sb, "%s%llu", i ? ", " : "", (unsigned long long)s->lost[i].id);
		if (j > i)
			ks_strbuf_addf(sb, "-%llu", (unsigned long long)s->lost[j].id);
		i = j;
	}
}

int ks_archive_cmd_salvage(int argc, char **argv)
{
	struct ks_archive_pick src = KS_ARCHIVE_PICK_INIT, dst = KS_ARCHIVE_PICK_INIT;
	struct ks_option opts[] = {
		KS_OPT_STRING(0, "op", &src.op, "NAME", "the operator; needed when SRC holds several"),
		KS_OPT_STRING(
			0, "gpu", &src.gpu, "MODEL",
			"the GPU model or its folder name; needed when SRC holds several for the operator"),
		KS_OPT_END
	};
	const char *cmd = "archive salvage";
	struct ks_archive_salvage s = { 0 };
	struct ks_archive_new_dirs dirs = { 0 };
	struct ks_archive_import_result result;
	struct ks_archive *ar = NULL;
	struct ks_strbuf ids;
	struct ks_error err;
	char *op = NULL, *gpu = NULL;
	const char **pos = NULL;
	uint64_t hidden = 0;
	size_t n_pos;
	int rc, ret = KS_EXIT_FAILED;

	ks_strbuf_init(&ids);
	rc = ks_opts_parse(cmd, opts, &salvage_help, argc, argv, &pos, &n_pos);
	if (rc) {
		ret = rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
		goto cleanup;
	}
	if (n_pos != 2) {
		ret = ks_cli_usage(cmd,
				   "expected two folders, SRC (the damaged archive) and DST (a new one)");
		goto cleanup;
	}
	src.root = pos[0];
	dst.root = pos[1];
	if (ks_archive_cli_resolve(cmd, &src, &op, &gpu))
		goto cleanup;
	{
		char *into = ks_archive_dir(dst.root, op, gpu), *data = ks_path_join(into, "data.mdb");
		struct stat st;
		int exists = stat(data, &st) == 0;

		if (exists)
			ks_cli_error(
				cmd,
				"%s holds an archive already: salvage writes a new one (name an empty or "
				"new folder as DST)",
				into);
		free(into);
		free(data);
		if (exists)
			goto cleanup;
	}
	fprintf(stderr, "reading %s/%s/%s record by record ...\n", src.root, op, gpu);
	if (ks_archive_salvage_read(src.root, op, gpu, &s, &err) < 0) {
		ks_cli_error(cmd, "%s: nothing can be saved from it", err.msg);
		goto cleanup;
	}
	if (ks_archive_cli_import_open(cmd, &dst, s.doc, &ar, &dirs))
		goto cleanup;
	if (ks_archive_import(ar, s.doc, &result, &err) < 0) {
		ks_cli_error(cmd, "writing the new archive: %s", err.msg);
		goto cleanup;
	}
	for (size_t i = 0; i < s.n_lost; i++)
		printf("lost: #%llu: %s\n", (unsigned long long)s.lost[i].id, s.lost[i].why);
	if (s.prompts_lost[0])
		printf("lost: strategy prompts after the %llu read: %s\n", (unsigned long long)s.prompts,
		       s.prompts_lost);
	if (s.counted > s.records + s.n_lost) {
		printf("lost: %llu more records that the archive counts were not found (a damaged page hides "
		       "their ids)\n",
		       (unsigned long long)(s.counted - s.records - s.n_lost));
		hidden = s.counted - s.records - s.n_lost;
	}
	printf("saved %llu of %llu records", (unsigned long long)s.records,
	       (unsigned long long)(s.records + s.n_lost + hidden));
	if (s.prompts)
		printf(" and %llu strategy prompt%s", (unsigned long long)s.prompts,
		       s.prompts == 1 ? "" : "s");
	printf(" into %s (ids kept)\n", ks_archive_path(ar));
	if (s.n_lost) {
		lost_ids(&s, &ids, 20);
		printf("lost %zu record%s: %s\n", s.n_lost, s.n_lost == 1 ? "" : "s", ids.buf);
	}
	ret = s.n_lost || hidden || s.prompts_lost[0] ? 3 : KS_EXIT_OK;
cleanup:
	ks_archive_close(ar);
	if (ret != KS_EXIT_OK && ret != 3)
		ks_archive_cli_new_dirs_undo(&dirs);
	ks_archive_cli_new_dirs_release(&dirs);
	ks_archive_salvage_release(&s);
	ks_strbuf_release(&ids);
	free(op);
	free(gpu);
	free(pos);
	ks_opts_release(opts);
	return ret;
}
