/*
 * render_prompt.c - the mutate prompt the LLM mutator would send with one
 * archive record as the parent, on stdout: what t0230-profile.sh reads to
 * see that a profile reaches the LLM.  Not installed.
 *
 *	render_prompt ROOT OP GPU ID
 */
#include <stdio.h>
#include <stdlib.h>

#include "ksearch/archive/archive.h"
#include "ksearch/llm/llm_context.h"

int main(int argc, char **argv)
{
	struct ks_archive_options opts = { .flags = KS_ARCHIVE_READONLY };
	struct ks_llm_mutate_input in = { .target = "Improve this kernel.",
					  .strategy = "(no strategy: a test)" };
	struct ks_archive *ar = NULL;
	struct ks_error err;
	struct ks_record record;
	char *source = NULL, *dir = NULL, *out = NULL;
	int ret = 1;

	ks_record_init(&record);
	if (argc != 5) {
		fprintf(stderr, "usage: render_prompt ROOT OP GPU ID\n");
		return 2;
	}
	if (ks_archive_open(&ar, argv[1], argv[2], argv[3], &opts, &err) < 0 ||
	    ks_archive_get_record(ar, strtoull(argv[4], NULL, 10), &record, &source, &err) < 0 ||
	    ks_prompts_dir_find(&dir, &err) < 0)
		goto cleanup;
	if (!record.id) {
		fprintf(stderr, "render_prompt: no candidate #%s\n", argv[4]);
		goto cleanup;
	}
	in.parent = &record;
	in.parent_source = source;
	if (ks_llm_mutate_prompt(dir, &in, &out, &err) < 0)
		goto cleanup;
	fputs(out, stdout);
	ret = 0;
cleanup:
	if (ret && !record.id)
		fprintf(stderr, "render_prompt: %s\n", err.msg);
	free(out);
	free(dir);
	free(source);
	ks_record_release(&record);
	ks_archive_close(ar);
	return ret;
}
