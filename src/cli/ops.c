/*
 * ops.c - `ksearch ops`: the operators found, their workloads and seeds.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ksearch/op/op.h"
#include "ksearch/base/util.h"

enum { EXIT_BROKEN_OP = 3 };

static const struct ks_help help = {
	.usage = "ksearch ops [--op NAME] [--json]",
	.description = "List the operators ksearch can search: each with its definition name, a\n"
		       "one-line summary, its benchmark workloads (timed), its check workloads\n"
		       "(correctness only) and its seed kernels.  Operators are folders holding an\n"
		       "op.json; they are found in $KSEARCH_OPERATORS, ./operators, and beside the\n"
		       "ksearch binary.  An operator whose op.json is broken is listed with the error\n"
		       "(--json: {\"op\", \"folder\", \"error\"}).",
	.examples = "  ksearch ops\n"
		    "  ksearch ops --op gqa --json\n",
	.exit_codes = "  3  at least one operator failed to load (its error is printed)\n",
};

/* The var axes of a workload, "batch_size=16 num_kv_indices=8636 ...". */
static void format_axes(const struct ks_op *op, const struct ks_workload *w, struct ks_strbuf *sb)
{
	for (size_t a = 0; a < op->n_axes; a++) {
		int64_t v;

		if (op->axes[a].is_const || !ks_env_get(&w->axes, op->axes[a].name, &v))
			continue;
		ks_strbuf_addf(sb, "%s%s=%lld", sb->len ? " " : "", op->axes[a].name, (long long)v);
	}
}

static void print_workloads(const struct ks_op *op, const char *title, const struct ks_workload *list,
			    size_t count)
{
	printf("  %s:\n", title);
	for (size_t i = 0; i < count; i++) {
		struct ks_strbuf sb;

		ks_strbuf_init(&sb);
		format_axes(op, &list[i], &sb);
		printf("    %-16s %s\n", list[i].id, sb.buf);
		ks_strbuf_release(&sb);
	}
}

static void print_op(const struct ks_op *op)
{
	printf("%s  (%s)\n", op->key, op->name);
	printf("  %s\n", op->summary ? op->summary : (op->description ? op->description : ""));
	print_workloads(op, "benchmark workloads", op->workloads, op->n_workloads);
	print_workloads(op, "check workloads", op->check_workloads, op->n_check_workloads);
	printf("  seeds:");
	for (size_t i = 0; i < op->n_seeds; i++)
		printf(" %s", ks_basename(op->seed_paths[i]));
	printf("%s\n  folder: %s\n\n", op->n_seeds ? "" : " none", op->dir);
}

static json_t *workloads_json(const struct ks_op *op, const struct ks_workload *list, size_t count)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < count; i++) {
		json_t *axes = json_object();

		for (size_t a = 0; a < op->n_axes; a++) {
			int64_t v;

			if (ks_env_get(&list[i].axes, op->axes[a].name, &v))
				json_object_set_new(axes, op->axes[a].name, json_integer(v));
		}
		json_array_append_new(arr, json_pack("{s:s, s:o}", "id", list[i].id, "axes", axes));
	}
	return arr;
}

static json_t *op_json(const struct ks_op *op)
{
	json_t *seeds = json_array();

	for (size_t i = 0; i < op->n_seeds; i++)
		json_array_append_new(seeds, json_string(op->seed_paths[i]));
	return json_pack("{s:s, s:s, s:s?, s:s, s:o, s:o, s:o}", "op", op->key, "name", op->name, "summary",
			 op->summary, "folder", op->dir, "workloads",
			 workloads_json(op, op->workloads, op->n_workloads), "check_workloads",
			 workloads_json(op, op->check_workloads, op->n_check_workloads), "seeds", seeds);
}

int cmd_ops(int argc, char **argv)
{
	const char *op_name = NULL;
	int json = 0;
	struct ks_option opts[] = {
		KS_OPT_STRING(0, "op", &op_name, "NAME", "show only this operator"),
		KS_OPT_BOOL(0, "json", &json, "print JSON instead of text"),
		KS_OPT_END,
	};
	const char **positional;
	size_t n_positional, count = 0;
	char **dirs = NULL;
	struct ks_error err;
	json_t *all = NULL;
	int rc, ret = KS_EXIT_OK;

	rc = ks_opts_parse("ops", opts, &help, argc, argv, &positional, &n_positional);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	if (n_positional) {
		rc = ks_cli_usage("ops", "takes no arguments (did you mean --op %s?)", positional[0]);
		free(positional);
		ks_opts_release(opts);
		return rc;
	}
	free(positional);
	if (json)
		all = json_array();
	if (op_name) {
		struct ks_op op;

		if (ks_op_find(op_name, &op, &err) < 0) {
			ks_cli_error("ops", "%s", err.msg);
			ret = KS_EXIT_FAILED;
			goto cleanup;
		}
		if (all)
			json_array_append_new(all, op_json(&op));
		else
			print_op(&op);
		ks_op_release(&op);
		goto cleanup;
	}
	if (ks_op_dirs(&dirs, &count, &err) < 0) {
		ks_cli_error("ops", "%s", err.msg);
		ret = KS_EXIT_FAILED;
		goto cleanup;
	}
	if (!count) {
		ks_cli_error("ops", "no operators found (looked in $KSEARCH_OPERATORS, ./operators and "
				    "beside the binary)");
		ret = KS_EXIT_FAILED;
		goto cleanup;
	}
	for (size_t i = 0; i < count; i++) {
		struct ks_op op;

		if (ks_op_load(dirs[i], &op, &err) < 0) {
			ks_cli_error("ops", "%s", err.msg);
			if (all)
				json_array_append_new(all,
						      json_pack("{s:s, s:s, s:s}", "op", ks_basename(dirs[i]),
								"folder", dirs[i], "error", err.msg));
			ret = EXIT_BROKEN_OP;
			continue;
		}
		if (all)
			json_array_append_new(all, op_json(&op));
		else
			print_op(&op);
		ks_op_release(&op);
	}
cleanup:
	if (all) {
		ks_cli_json_print(all, JSON_INDENT(2));
		json_decref(all);
	}
	ks_op_dirs_free(dirs, count);
	ks_opts_release(opts);
	return ret;
}
