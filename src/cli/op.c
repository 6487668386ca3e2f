/*
 * op.c - `ksearch op new NAME --from-definition DEF.json`: a new operator
 * folder from a FlashInfer-Bench Definition.  The Definition becomes the
 * top of op.json as it is; ksearch's block is filled where the Definition
 * says enough (float inputs drawn as FlashInfer-Bench draws them, a grid)
 * and holds a named TODO where it does not, each listed in ksearch.todo,
 * which keeps the operator from loading (`ksearch ops` names them) until
 * it is filled in and deleted.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "ksearch/base/fs.h"
#include "ksearch/base/json.h"
#include "ksearch/base/util.h"
#include "ksearch/op/op.h"

static const char *const cmd = "op new";

static const struct ks_help new_help = {
	.usage = "ksearch op new NAME --from-definition DEF.json [--operators DIR]",
	.description =
		"Make the operator folder DIR/NAME (DIR: ./operators) from a FlashInfer-Bench\n"
		"Definition: op.json (the Definition as it is, then ksearch's block), a reference.cu\n"
		"skeleton with the kernel's signature and launch, seeds/, and a README.md that keeps\n"
		"the Definition's Python reference.  What the Definition does not say is a named\n"
		"TODO in op.json, listed in ksearch.todo: generators of integer inputs (indptr, page\n"
		"tables) and of scalars, the benchmark and check workloads, the tolerances, min_bytes\n"
		"and flops.  Float tensors are drawn from normal(0, 1), as FlashInfer-Bench draws\n"
		"them, and the grid is occupancy x load width.  Until ksearch.todo is gone the\n"
		"operator does not load: `ksearch ops` lists it with what is missing.  When the\n"
		"reference kernel is written, tools/torch-check.py DIR/NAME DIR/NAME/reference.cu\n"
		"checks it against the Definition's Python reference on a GPU.",
	.examples = "  ksearch op new rmsnorm_h2048 --from-definition rmsnorm_h2048.json\n"
		    "  ksearch op new gqa_h16 --from-definition defs/gqa_paged_decode_h16.json --operators "
		    "my_ops\n",
	.exit_codes = "  3  the folder NAME exists already",
};

enum { EXIT_EXISTS = 3 };

static const char *const float_types[] = { "bfloat16", "float16", "float32", NULL };

static int is_float_type(const char *dtype)
{
	for (size_t i = 0; float_types[i]; i++)
		if (!strcmp(dtype, float_types[i]))
			return 1;
	return 0;
}

/* Check the Definition as FlashInfer-Bench and ksearch both need it; fail naming the field. */
static int check_definition(const json_t *def, const char *path, struct ks_error *err)
{
	static const char *const required[] = { "name", "op_type", "axes", "inputs", "outputs", "reference" };
	const char *key;
	json_t *v, *io[2];

	if (!json_is_object(def))
		return ks_fail(err, "%s: expected a FlashInfer-Bench Definition (a JSON object), got %s",
			       path, ks_json_type_word(def));
	for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
		if (!json_object_get(def, required[i]))
			return ks_fail(err,
				       "%s: missing field '%s' (a Definition has name, op_type, axes, "
				       "inputs, outputs and reference)",
				       path, required[i]);
	if (!json_is_string(json_object_get(def, "name")) ||
	    !json_string_length(json_object_get(def, "name")))
		return ks_fail(err, "%s: name: expected a non-empty string", path);
	if (!json_is_string(json_object_get(def, "op_type")))
		return ks_fail(err, "%s: op_type: expected a string", path);
	if (!json_is_string(json_object_get(def, "reference")) ||
	    !strstr(json_string_value(json_object_get(def, "reference")), "def run("))
		return ks_fail(err, "%s: reference: expected Python source that defines run(...)", path);
	if (!json_is_object(json_object_get(def, "axes")))
		return ks_fail(err, "%s: axes: expected an object of axis name -> {\"type\": ...}", path);
	json_object_foreach(json_object_get(def, "axes"), key, v)
	{
		const char *type = json_string_value(json_object_get(v, "type"));

		if (!ks_is_identifier(key))
			return ks_fail(err, "%s: axes.%s: an axis name must be an identifier", path, key);
		if (!type || (strcmp(type, "const") && strcmp(type, "var")))
			return ks_fail(err, "%s: axes.%s.type: expected \"const\" or \"var\"", path, key);
		if (!strcmp(type, "const") && (!json_is_integer(json_object_get(v, "value")) ||
					       json_integer_value(json_object_get(v, "value")) < 0 ||
					       json_integer_value(json_object_get(v, "value")) > 2147483647))
			return ks_fail(err,
				       "%s: axes.%s.value: a const axis needs an integer value in [0, 2^31)",
				       path, key);
	}
	io[0] = json_object_get(def, "inputs");
	io[1] = json_object_get(def, "outputs");
	for (int k = 0; k < 2; k++) {
		const char *what = k ? "outputs" : "inputs";

		if (!json_is_object(io[k]) || !json_object_size(io[k]))
			return ks_fail(err,
				       "%s: %s: expected a non-empty object of tensor name -> {shape, dtype}",
				       path, what);
		json_object_foreach(io[k], key, v)
		{
			const json_t *shape = json_object_get(v, "shape");
			const char *dtype = json_string_value(json_object_get(v, "dtype"));
			enum ks_dtype parsed;
			struct ks_error derr;
			size_t i;
			json_t *axis;

			if (!ks_is_identifier(key))
				return ks_fail(err, "%s: %s.%s: a tensor name must be an identifier", path,
					       what, key);
			if (k && json_object_get(io[0], key))
				return ks_fail(err, "%s: outputs.%s: also an input's name", path, key);
			if (!dtype)
				return ks_fail(err, "%s: %s.%s.dtype: missing", path, what, key);
			if (ks_dtype_parse(dtype, &parsed, &derr) < 0)
				return ks_fail(err,
					       "%s: %s.%s.dtype: %s (ksearch does not search ops of this "
					       "type yet)",
					       path, what, key, derr.msg);
			if (!shape || json_is_null(shape))
				continue;
			if (!json_is_array(shape))
				return ks_fail(err, "%s: %s.%s.shape: expected a list of axis names or null",
					       path, what, key);
			json_array_foreach(shape, i, axis)
			{
				if (!json_is_string(axis) ||
				    !json_object_get(json_object_get(def, "axes"), json_string_value(axis)))
					return ks_fail(err,
						       "%s: %s.%s.shape[%zu]: not an axis of the definition",
						       path, what, key, i);
			}
		}
	}
	return 0;
}

/* "num_rows*hidden*2 + hidden*2 + ...": every tensor read or written whole. */
static void whole_bytes(const json_t *def, struct ks_strbuf *sb)
{
	const char *groups[] = { "inputs", "outputs" }, *key;
	json_t *v;

	for (int k = 0; k < 2; k++)
		json_object_foreach(json_object_get(def, groups[k]), key, v)
		{
			const json_t *shape = json_object_get(v, "shape");
			enum ks_dtype dtype;
			struct ks_error derr;
			size_t i;
			json_t *axis;

			ks_dtype_parse(json_string_value(json_object_get(v, "dtype")), &dtype, &derr);
			ks_strbuf_adds(sb, sb->len ? " + " : "");
			json_array_foreach(shape, i, axis) ks_strbuf_addf(sb, "%s*", json_string_value(axis));
			ks_strbuf_addf(sb, "%zu", ks_dtype_size(dtype));
		}
}

/* The ksearch block: filled where the Definition says enough, a TODO (listed in todo) elsewhere. */
static json_t *ksearch_block(const json_t *def)
{
	json_t *ks = json_object(), *gens = json_object(), *tols = json_object(), *todo = json_array(), *v;
	const char *description = json_string_value(json_object_get(def, "description")), *key;
	struct ks_strbuf sb;
	char *text;

	ks_strbuf_init(&sb);
	if (description && *description) {
		const char *stop = strstr(description, ". ");
		size_t n = stop ? (size_t)(stop - description) : strlen(description);

		ks_strbuf_add(&sb, description, n > 100 ? 100 : n);
		json_object_set_new(ks, "summary", json_string(sb.buf));
	} else {
		json_object_set_new(ks, "summary", json_string("TODO: one line for `ksearch ops`"));
		json_array_append_new(todo, json_string("ksearch.summary"));
	}
	json_object_set_new(ks, "derived_axes", json_object());
	json_object_foreach(json_object_get(def, "inputs"), key, v)
	{
		const char *dtype = json_string_value(json_object_get(v, "dtype"));
		int scalar = !json_is_array(json_object_get(v, "shape"));

		if (is_float_type(dtype) && !scalar) {
			json_object_set_new(
				gens, key,
				json_pack("{s:s, s:i, s:i}", "kind", "normal", "mean", 0, "std", 1));
			continue;
		}
		text = ks_asprintf(
			"TODO: %s %s: the Definition does not say how its values are made: %s", dtype,
			scalar ? "scalar" : "tensor",
			scalar ? "{\"kind\": \"const\", \"value\": ...} for a fixed value, or normal/uniform"
			       : "{\"kind\": \"indptr\", \"total\": \"<axis>\"} for offsets, {\"kind\": "
				 "\"page_permutation\", \"pool\": \"<axis>\"} for page indices, or const");
		json_object_set_new(gens, key, json_string(text));
		free(text);
		json_array_append_new(todo, json_sprintf("ksearch.generators.%s", key));
	}
	json_object_set_new(ks, "generators", gens);
	json_object_set_new(
		ks, "workloads",
		json_string("TODO: the benchmark workloads, [{\"id\": \"...\", \"axes\": {<each var "
			    "axis>: N}}], the shapes the kernel must be fast on"));
	json_object_set_new(ks, "check_workloads",
			    json_string("TODO: the correctness workloads, same form: odd sizes, size 1, "
					"non-multiples of tiles"));
	json_array_append_new(todo, json_string("ksearch.workloads"));
	json_array_append_new(todo, json_string("ksearch.check_workloads"));
	json_object_foreach(json_object_get(def, "outputs"), key, v)
	{
		text = ks_asprintf(
			"TODO: {\"atol\": ..., \"rtol\": ...} for %s (FlashInfer-Bench checks with "
			"atol = rtol = 0.01)",
			json_string_value(json_object_get(v, "dtype")));
		json_object_set_new(tols, key, json_string(text));
		free(text);
		json_array_append_new(todo, json_sprintf("ksearch.tolerances.%s", key));
	}
	json_object_set_new(ks, "tolerances", tols);
	ks_strbuf_release(&sb);
	ks_strbuf_init(&sb);
	whole_bytes(def, &sb);
	text = ks_asprintf("TODO: the fewest bytes any kernel must move; every tensor whole is \"%s\" "
			   "(too many where a kernel reads only part of an input, a page pool say: "
			   "the speed-of-light floor would refuse honest kernels)",
			   sb.buf);
	json_object_set_new(ks, "min_bytes", json_string(text));
	free(text);
	json_object_set_new(ks, "flops",
			    json_string("TODO: floating-point operations, an expression of the axes"));
	json_array_append_new(todo, json_string("ksearch.min_bytes"));
	json_array_append_new(todo, json_string("ksearch.flops"));
	json_array_append_new(todo, json_string("reference.cu"));
	json_object_set_new(ks, "grid",
			    json_pack("[{s:s, s:[f, f, f, f, f]}, {s:s, s:[i, i, i, i, i]}]", "descriptor",
				      "occupancy", "edges", 0.0, 0.25, 0.5, 0.75, 1.01, "descriptor",
				      "load_width", "edges", 0, 4, 8, 16, 17));
	json_object_set_new(ks, "todo", todo);
	ks_strbuf_release(&sb);
	return ks;
}

static void reference_skeleton(const json_t *def, const char *name, struct ks_strbuf *sb)
{
	const char *groups[] = { "inputs", "outputs" }, *key;
	struct ks_strbuf args, params;
	json_t *v;
	int bf16 = 0, fp16 = 0;

	ks_strbuf_init(&args);
	ks_strbuf_init(&params);
	for (int k = 0; k < 2; k++)
		json_object_foreach(json_object_get(def, groups[k]), key, v)
		{
			const char *dtype = json_string_value(json_object_get(v, "dtype"));
			const char *ctype = !strcmp(dtype, "bfloat16")	? "__nv_bfloat16"
					    : !strcmp(dtype, "float16") ? "__half"
					    : !strcmp(dtype, "float32") ? "float"
					    : !strcmp(dtype, "int32")	? "int"
									: "long long";

			bf16 |= !strcmp(dtype, "bfloat16");
			fp16 |= !strcmp(dtype, "float16");
			ks_strbuf_addf(&args, "%s\"%s\"", args.len ? ", " : "", key);
			if (!json_is_array(json_object_get(v, "shape")))
				ks_strbuf_addf(&params, "%s%s %s", params.len ? ", " : "", ctype, key);
			else
				ks_strbuf_addf(&params, "%s%s%s *%s", params.len ? ", " : "",
					       k ? "" : "const ", ctype, key);
		}
	json_object_foreach(json_object_get(def, "axes"), key, v)
	{
		ks_strbuf_addf(&args, ", \"%s\"", key);
		ks_strbuf_addf(&params, ", int %s", key);
	}
	ks_strbuf_addf(sb,
		       "/* ksearch\n"
		       "{ \"launch\": [\n"
		       "    {\"kernel\": \"%s_reference\", \"grid\": [\"1\"], \"block\": [\"256\"],\n"
		       "     \"args\": [%s]} ] }\n"
		       "*/\n"
		       "// TODO: the reference kernel of %s: simple and trusted, fp32 accumulation\n"
		       "// (operators/README.md).  It defines correctness and is the timing baseline.  Set\n"
		       "// the grid and block above, drop the axes it does not need from args and the\n"
		       "// signature, then check it against the Definition's Python reference on a GPU:\n"
		       "//     tools/torch-check.py operators/%s operators/%s/reference.cu\n",
		       name, args.buf, json_string_value(json_object_get(def, "name")), name, name);
	if (bf16)
		ks_strbuf_adds(sb, "#include <cuda_bf16.h>\n");
	if (fp16)
		ks_strbuf_adds(sb, "#include <cuda_fp16.h>\n");
	ks_strbuf_addf(sb,
		       "\nextern \"C\" __global__ void %s_reference(%s)\n"
		       "{\n"
		       "\t// TODO\n"
		       "}\n",
		       name, params.buf);
	ks_strbuf_release(&args);
	ks_strbuf_release(&params);
}

static void readme(const json_t *def, const json_t *ks, const char *name, const char *def_path,
		   struct ks_strbuf *sb)
{
	const char *description = json_string_value(json_object_get(def, "description"));
	size_t i;
	json_t *t;

	ks_strbuf_addf(sb, "# %s\n\n%s%s", name, description ? description : "", description ? "\n\n" : "");
	ks_strbuf_addf(sb,
		       "Made by `ksearch op new` from the FlashInfer-Bench Definition `%s` (%s).\n"
		       "The top of `op.json` is that Definition; `ksearch` is ksearch's block.\n\n"
		       "## To do\n\n"
		       "The operator does not load until each of these is filled in and `ksearch.todo`\n"
		       "is deleted from `op.json` (`ksearch ops` lists what is left):\n\n",
		       json_string_value(json_object_get(def, "name")), def_path);
	json_array_foreach(json_object_get(ks, "todo"), i, t)
		ks_strbuf_addf(sb, "- `%s`\n", json_string_value(t));
	ks_strbuf_addf(sb,
		       "\nThen `ksearch ops --op %s` loads it, `tools/torch-check.py operators/%s\n"
		       "operators/%s/reference.cu` checks the reference kernel against the Python one\n"
		       "below (on a GPU), and seeds go in `seeds/`.\n\n"
		       "## The Definition's reference (Python)\n\n```python\n%s```\n",
		       name, name, name, json_string_value(json_object_get(def, "reference")));
}

static int write_text(const char *dir, const char *file, const struct ks_strbuf *sb, struct ks_error *err)
{
	char *path = ks_path_join(dir, file);
	int ret = ks_write_file_atomic(path, sb->buf, sb->len, err);

	free(path);
	return ret;
}

static int op_new(int argc, char **argv)
{
	const char *def_path = NULL, *operators = "operators";
	struct ks_option opts[] = {
		KS_OPT_STRING(0, "from-definition", &def_path, "DEF.json",
			      "the FlashInfer-Bench Definition (required)"),
		KS_OPT_STRING(0, "operators", &operators, "DIR",
			      "the folder to make NAME in (default: ./operators)"),
		KS_OPT_END,
	};
	const char **pos = NULL;
	size_t n_pos;
	struct ks_error err;
	json_error_t jerr;
	json_t *def = NULL, *op = NULL, *ks = NULL;
	struct ks_strbuf sb;
	char *dir = NULL, *text = NULL, *seeds = NULL;
	struct stat st;
	int rc, ret = KS_EXIT_USAGE;

	rc = ks_opts_parse(cmd, opts, &new_help, argc, argv, &pos, &n_pos);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	ks_strbuf_init(&sb);
	if (!n_pos) {
		ks_cli_usage(cmd, "NAME is required: ksearch op new NAME --from-definition DEF.json");
		goto cleanup;
	}
	if (n_pos > 1) {
		ks_cli_usage(cmd, "takes one NAME (got %zu arguments: '%s' ...)", n_pos, pos[1]);
		goto cleanup;
	}
	if (!ks_is_identifier(pos[0])) {
		ks_cli_usage(cmd,
			     "NAME '%s': expected an identifier (letters, digits and '_'); it names the "
			     "folder and what --op takes",
			     pos[0]);
		goto cleanup;
	}
	if (!def_path) {
		ks_cli_usage(cmd, "--from-definition DEF.json is required");
		goto cleanup;
	}
	ret = KS_EXIT_FAILED;
	dir = ks_path_join(operators, pos[0]);
	if (stat(dir, &st) == 0) {
		ks_cli_error(cmd, "%s exists already; choose another NAME or remove it", dir);
		ret = EXIT_EXISTS;
		goto cleanup;
	}
	def = json_load_file(def_path, JSON_REJECT_DUPLICATES, &jerr);
	if (!def) {
		if (jerr.line < 0)
			ks_cli_error(cmd, "%s: %s", def_path, jerr.text);
		else
			ks_cli_error(cmd, "%s:%d:%d: malformed JSON: %s", def_path, jerr.line, jerr.column,
				     jerr.text);
		goto cleanup;
	}
	if (check_definition(def, def_path, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	if (json_object_get(def, "ksearch")) {
		ks_cli_error(cmd,
			     "%s has a \"ksearch\" block already: it is an op.json, not a bare Definition",
			     def_path);
		goto cleanup;
	}
	op = json_deep_copy(def);
	ks = ksearch_block(def);
	json_object_set(op, "ksearch", ks);
	seeds = ks_path_join(dir, "seeds");
	if (ks_mkdir_p(seeds, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	text = json_dumps(op, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	ks_strbuf_adds(&sb, text);
	ks_strbuf_adds(&sb, "\n");
	if (write_text(dir, "op.json", &sb, &err) < 0)
		goto write_failed;
	ks_strbuf_release(&sb);
	ks_strbuf_init(&sb);
	reference_skeleton(def, pos[0], &sb);
	if (write_text(dir, "reference.cu", &sb, &err) < 0)
		goto write_failed;
	ks_strbuf_release(&sb);
	ks_strbuf_init(&sb);
	readme(def, ks, pos[0], def_path, &sb);
	if (write_text(dir, "README.md", &sb, &err) < 0)
		goto write_failed;
	printf("made %s/ from the definition %s (%s):\n"
	       "  op.json        the Definition, and ksearch's block with %zu TODOs (ksearch.todo)\n"
	       "  reference.cu   a skeleton: the kernel's signature and launch\n"
	       "  README.md      the TODOs and the Definition's Python reference\n"
	       "  seeds/\n\n"
	       "`ksearch ops` lists what is missing until ksearch.todo is gone.\n",
	       dir, json_string_value(json_object_get(def, "name")), def_path,
	       json_array_size(json_object_get(ks, "todo")));
	ret = KS_EXIT_OK;
	goto cleanup;
write_failed:
	ks_cli_error(cmd, "%s", err.msg);
cleanup:
	json_decref(def);
	json_decref(op);
	json_decref(ks);
	ks_strbuf_release(&sb);
	free(text);
	free(dir);
	free(seeds);
	free(pos);
	ks_opts_release(opts);
	return ret;
}

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} subcommands[] = {
	{ "new", op_new, "a new operator folder from a FlashInfer-Bench Definition" },
};

static void print_op_help(FILE *out)
{
	fprintf(out, "usage: ksearch op <subcommand> [options]\n\n"
		     "Make and change operator folders (operators/README.md has the format).\n\n"
		     "subcommands:\n");
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		fprintf(out, "  %-5s %s\n", subcommands[i].name, subcommands[i].summary);
	fprintf(out, "\nexamples:\n"
		     "  ksearch op new rmsnorm_h2048 --from-definition rmsnorm_h2048.json\n"
		     "  ksearch op new --help                          options of one subcommand\n\n"
		     "exit codes: 0 ok, 1 the command failed, 2 usage error; `new` 3 when the folder\n"
		     "exists already.\n");
}

int cmd_op(int argc, char **argv)
{
	if (argc < 2) {
		print_op_help(stderr);
		return KS_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		print_op_help(stdout);
		return KS_EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		if (!strcmp(argv[1], subcommands[i].name))
			return subcommands[i].fn(argc - 1, argv + 1);
	return ks_cli_usage("op", "unknown subcommand '%s' (new)", argv[1]);
}
