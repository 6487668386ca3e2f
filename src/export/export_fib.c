/*
 * export_fib.c - an export as a FlashInfer-Bench trace set (export-best
 * --format flashinfer-bench): the op's Definition, the winner as a Solution
 * (its CUDA sources and a torch binding embedded), one workload per
 * benchmark workload, and the search's measurements of it as Traces, laid
 * out as flashinfer_bench.TraceSet.from_path() reads a folder.
 *
 * Inputs FlashInfer-Bench cannot draw at random (an indptr, a page table, a
 * constant tensor) go to a safetensors file per workload, as its own
 * dataset stores them: indptr lengths split evenly (or as op.json lists
 * them), pages a fixed permutation of the pool.
 */
#include "ksearch/export/export.h"
#include "ksearch/archive/record.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ksearch/base/hash.h"
#include "ksearch/base/pcg.h"
#include "ksearch/base/util.h"

#ifndef KS_VERSION
#define KS_VERSION "unknown"
#endif

/* A workload's pool of pages is at most this many, or its blob would be too large to write. */
#define MAX_BLOB_ELEMENTS (64 * 1024 * 1024)

static const char *safetensors_dtype(enum ks_dtype dtype)
{
	switch (dtype) {
	case KS_DTYPE_BFLOAT16:
		return "BF16";
	case KS_DTYPE_FLOAT16:
		return "F16";
	case KS_DTYPE_FLOAT32:
		return "F32";
	case KS_DTYPE_INT32:
		return "I32";
	case KS_DTYPE_INT64:
		return "I64";
	}
	return "U8";
}

/* Whether FlashInfer-Bench's random inputs (randn, or a number) can stand for this generator. */
static int is_random(const struct ks_tensor *t, const struct ks_generator *g)
{
	if (g->kind == KS_GEN_NORMAL || g->kind == KS_GEN_UNIFORM)
		return t->dtype != KS_DTYPE_INT32 && t->dtype != KS_DTYPE_INT64;
	return 0;
}

static void put_le(unsigned char *p, uint64_t v, size_t bytes)
{
	for (size_t i = 0; i < bytes; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* One element of value v in dtype, little-endian. */
static int put_value(unsigned char *p, enum ks_dtype dtype, double v)
{
	float f = (float)v;
	uint32_t bits;

	switch (dtype) {
	case KS_DTYPE_INT32:
		put_le(p, (uint64_t)(uint32_t)(int32_t)v, 4);
		return 0;
	case KS_DTYPE_INT64:
		put_le(p, (uint64_t)(int64_t)v, 8);
		return 0;
	case KS_DTYPE_FLOAT32:
		memcpy(&bits, &f, 4);
		put_le(p, bits, 4);
		return 0;
	case KS_DTYPE_BFLOAT16:
		memcpy(&bits, &f, 4);
		bits += 0x7fff + ((bits >> 16) & 1); /* round to nearest even */
		put_le(p, bits >> 16, 2);
		return 0;
	case KS_DTYPE_FLOAT16:
		if (v == 0) {
			put_le(p, 0, 2);
			return 0;
		}
		return -1;
	}
	return -1;
}

/* The values of a tensor input that FlashInfer-Bench cannot draw: into data (numel elements). */
static int make_values(const struct ks_op *op, const struct ks_workload *w, size_t input, int64_t numel,
		       unsigned char *data, struct ks_error *err)
{
	const struct ks_tensor *t = &op->inputs[input];
	const struct ks_generator *g = &w->generators[input];
	size_t es = ks_dtype_size(t->dtype);

	if (g->kind == KS_GEN_CONST) {
		for (int64_t i = 0; i < numel; i++)
			if (put_value(data + (size_t)i * es, t->dtype, g->a) < 0)
				return ks_fail(err,
					       "workload %s: input '%s': a float16 constant other than 0",
					       w->id, t->name);
		return 0;
	}
	if (g->kind == KS_GEN_INDPTR) {
		int64_t total, b = numel - 1, acc = g->start;

		if (g->lengths) {
			for (int64_t i = 0; i <= b; i++) {
				put_value(data + (size_t)i * es, t->dtype, (double)acc);
				if (i < b && (size_t)i < g->n_lengths)
					acc += g->lengths[i];
			}
			return 0;
		}
		if (ks_expr_eval(g->expr, &w->axes, &total, err) < 0) {
			ks_error_prefix(err, "workload %s: input '%s': total", w->id, t->name);
			return -1;
		}
		/* the even split of total - start: equal lengths, the remainder one each to the first */
		total -= g->start;
		for (int64_t i = 0; i <= b; i++) {
			put_value(data + (size_t)i * es, t->dtype, (double)acc);
			if (b > 0)
				acc += total / b + (i < total % b);
		}
		return 0;
	}
	if (g->kind == KS_GEN_PAGE_PERMUTATION) {
		int64_t pool;
		uint32_t *perm;
		struct ks_pcg32 rng;

		if (ks_expr_eval(g->expr, &w->axes, &pool, err) < 0) {
			ks_error_prefix(err, "workload %s: input '%s': pool", w->id, t->name);
			return -1;
		}
		if (pool < numel || pool > MAX_BLOB_ELEMENTS)
			return ks_fail(err, "workload %s: input '%s': a pool of %lld pages for %lld indices",
				       w->id, t->name, (long long)pool, (long long)numel);
		perm = ks_calloc((size_t)pool + 1, sizeof(*perm));
		for (int64_t i = 0; i < pool; i++)
			perm[i] = (uint32_t)i;
		/* a fixed draw, so that the same export gives the same file */
		ks_pcg32_seed(&rng, ks_fnv1a(w->id, strlen(w->id)), 54);
		for (int64_t i = 0; i < numel; i++) {
			int64_t j = i + (int64_t)ks_pcg32_bounded(&rng, (uint32_t)(pool - i));
			uint32_t tmp = perm[i];

			perm[i] = perm[j];
			perm[j] = tmp;
			put_value(data + (size_t)i * es, t->dtype, (double)perm[i]);
		}
		free(perm);
		return 0;
	}
	return ks_fail(err,
		       "workload %s: input '%s': an integer tensor drawn at random (%s) has no meaning "
		       "FlashInfer-Bench's random integers would keep",
		       w->id, t->name, ks_generator_kind_name(g->kind));
}

/*
 * The workload as FlashInfer-Bench describes it: {axes, inputs, uuid}.  A
 * blob (safetensors) is added to out when an input needs one.
 */
static json_t *workload_json(const struct ks_op *op, const struct ks_workload *w, const char *dir,
			     struct ks_export_files *out, struct ks_error *err)
{
	json_t *axes = json_object(), *inputs = json_object(), *header = json_object(), *doc = NULL;
	char *uuid = ks_asprintf("ksearch-%s-%s", op->key, w->id), *blob = NULL, *header_text = NULL;
	struct ks_strbuf data;
	size_t offset = 0;

	ks_strbuf_init(&data);
	for (size_t a = 0; a < op->n_axes; a++) {
		int64_t v;

		if (!op->axes[a].is_const && ks_env_get(&w->axes, op->axes[a].name, &v))
			json_object_set_new(axes, op->axes[a].name, json_integer(v));
	}
	blob = ks_asprintf("blob/workloads/%s/%s.safetensors", dir, uuid);
	for (size_t i = 0; i < op->n_inputs; i++) {
		const struct ks_tensor *t = &op->inputs[i];
		const struct ks_generator *g = &w->generators[i];
		int64_t numel;
		unsigned char *values;

		if (t->is_scalar) {
			if (g->kind == KS_GEN_CONST)
				json_object_set_new(
					inputs, t->name,
					json_pack("{s:s, s:o}", "type", "scalar", "value",
						  t->dtype == KS_DTYPE_INT32 || t->dtype == KS_DTYPE_INT64
							  ? json_integer((json_int_t)g->a)
							  : json_real(g->a)));
			else
				json_object_set_new(inputs, t->name, json_pack("{s:s}", "type", "random"));
			continue;
		}
		if (is_random(t, g)) {
			json_object_set_new(inputs, t->name, json_pack("{s:s}", "type", "random"));
			continue;
		}
		if (ks_tensor_numel(t, w, &numel, err) < 0)
			goto fail;
		if (numel < 0 || numel > MAX_BLOB_ELEMENTS) {
			ks_fail(err, "workload %s: input '%s' has %lld elements, too many for a blob", w->id,
				t->name, (long long)numel);
			goto fail;
		}
		values = ks_calloc((size_t)numel + 1, ks_dtype_size(t->dtype));
		if (make_values(op, w, i, numel, values, err) < 0) {
			free(values);
			goto fail;
		}
		{
			json_t *shape = json_array();

			for (size_t d = 0; d < t->rank; d++) {
				int64_t v = 0;

				ks_env_get(&w->axes, t->shape[d], &v);
				json_array_append_new(shape, json_integer(v));
			}
			json_object_set_new(
				header, t->name,
				json_pack("{s:s, s:o, s:[I, I]}", "dtype", safetensors_dtype(t->dtype),
					  "shape", shape, "data_offsets", (json_int_t)offset,
					  (json_int_t)(offset + (size_t)numel * ks_dtype_size(t->dtype))));
		}
		ks_strbuf_add(&data, (const char *)values, (size_t)numel * ks_dtype_size(t->dtype));
		offset += (size_t)numel * ks_dtype_size(t->dtype);
		free(values);
		json_object_set_new(inputs, t->name,
				    json_pack("{s:s, s:s, s:s}", "type", "safetensors", "path", blob,
					      "tensor_key", t->name));
	}
	if (json_object_size(header)) {
		struct ks_strbuf file;
		size_t len;
		unsigned char n[8];

		json_object_set_new(
			header, "__metadata__",
			json_pack("{s:s, s:s}", "made_by", "ksearch " KS_VERSION, "workload", w->id));
		header_text = json_dumps(header, JSON_COMPACT | JSON_SORT_KEYS);
		len = strlen(header_text);
		ks_strbuf_init(&file);
		/* the header is padded with spaces to 8 bytes, as safetensors writes it */
		put_le(n, (uint64_t)((len + 7) / 8 * 8), 8);
		ks_strbuf_add(&file, (const char *)n, 8);
		ks_strbuf_adds(&file, header_text);
		while ((file.len - 8) % 8)
			ks_strbuf_adds(&file, " ");
		ks_strbuf_add(&file, data.buf ? data.buf : "", data.len);
		ks_export_files_add(out, blob, file.buf, file.len);
		ks_strbuf_release(&file);
	}
	doc = json_pack("{s:o, s:o, s:s}", "axes", axes, "inputs", inputs, "uuid", uuid);
	axes = inputs = NULL;
fail:
	json_decref(axes);
	json_decref(inputs);
	json_decref(header);
	free(header_text);
	free(blob);
	free(uuid);
	ks_strbuf_release(&data);
	return doc;
}

/* The Trace of one benchmark workload: what the search measured of the kernel that runs it. */
static json_t *trace_json(const struct ks_op *op, const char *solution, const json_t *workload,
			  const struct ks_workload *w, const struct ks_record *rec)
{
	static const struct ks_result_workload none;
	const struct ks_result_workload *m = &none; /* not timed on w */
	json_t *libs = json_object(), *tolerances = json_object(), *eval;
	const struct {
		const char *name, *version;
	} versions[] = { { "driver", rec->driver }, { "toolkit", rec->toolkit }, { "nvrtc", rec->nvrtc } };
	size_t i;
	char *log;

	for (i = 0; i < rec->result.n_workloads; i++)
		if (!strcmp(rec->result.workloads[i].id, w->id))
			m = &rec->result.workloads[i];
	/* what the record says measured it (an empty version says nothing) */
	json_object_set_new(libs, "ksearch", json_string(KS_VERSION));
	for (i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		if (*versions[i].version)
			json_object_set_new(libs, versions[i].name, json_string(versions[i].version));
	for (i = 0; i < op->n_outputs; i++)
		json_object_set_new(
			tolerances, op->outputs[i].name,
			json_pack("{s:f, s:f}", "atol", op->outputs[i].atol, "rtol", op->outputs[i].rtol));
	log = ks_asprintf(
		"measured by ksearch (candidate #%lld, workload %s): %s %lld timed runs, each on fresh "
		"inputs with the L2 flushed, half of them verified; the reference is the op's "
		"reference.cu, timed the same way",
		(long long)rec->id, w->id,
		!m->n_splits		     ? "the median of"
		: rec->result.evaluator >= 4 ? "the slowest of three length splits' medians, over"
					     : "the median of three length splits' medians, over",
		(long long)m->reps);
	eval = json_pack(
		"{s:s, s:{s:s, s:o}, s:s, s:s, s:{s:{s:s, s:o}}}", "status", "PASSED", "environment",
		"hardware", *rec->gpu ? rec->gpu : "unknown GPU", "libs", libs, "timestamp",
		*rec->created ? rec->created : "unknown", "log", log, "correctness", "extra", "ksearch",
		"verified within the tolerances against reference.cu on every check workload and on the "
		"timed runs it verified; the largest errors are not recorded",
		"tolerances", tolerances);
	json_object_set_new(eval, "performance",
			    json_pack("{s:f, s:f, s:f}", "latency_ms", m->median_us / 1000,
				      "reference_latency_ms", m->ref_median_us / 1000, "speedup_factor",
				      m->speedup));
	free(log);
	return json_pack("{s:s, s:O, s:s, s:o}", "definition", op->name, "workload", workload, "solution",
			 solution, "evaluation", eval);
}

/* op.json without ksearch's block: the Definition. */
static json_t *load_definition(const struct ks_op *op, struct ks_error *err)
{
	char *path = ks_path_join(op->dir, "op.json");
	json_error_t jerr;
	json_t *def = json_load_file(path, 0, &jerr);

	if (!def)
		ks_fail(err, "%s:%d: %s", path, jerr.line, jerr.text);
	else
		json_object_del(def, "ksearch");
	free(path);
	return def;
}

/* Add a JSON document as a file: indented, or one line (JSONL) when line. */
static void add_json(struct ks_export_files *out, const char *name, const json_t *doc)
{
	char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
	struct ks_strbuf sb;

	ks_strbuf_init(&sb);
	ks_strbuf_adds(&sb, text);
	ks_strbuf_adds(&sb, "\n");
	ks_export_files_add(out, name, sb.buf, sb.len);
	ks_strbuf_release(&sb);
	free(text);
}

static void add_lines(struct ks_strbuf *sb, const json_t *doc)
{
	char *text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));

	ks_strbuf_adds(sb, text);
	ks_strbuf_adds(sb, "\n");
	free(text);
}

int ks_export_flashinfer_bench(const struct ks_op *op, const struct ks_export_files *plain, const char *name,
			       const char *solution, const struct ks_record *const *records,
			       const char *description, struct ks_export_files *out, struct ks_error *err)
{
	const char *arch = *records[0]->result.arch ? records[0]->result.arch : "sm_90a",
		   *gpu = records[0]->gpu;
	const char *type = op->op_type ? op->op_type : "ksearch";
	json_t *def = NULL, *sol = NULL, *sources = json_array();
	struct ks_export_files code;
	struct ks_strbuf binding, workloads, traces, readme;
	char *dir = ks_asprintf("%s/%s", type, op->name), *path = NULL, *arch_list = NULL;
	int ret = -1;

	ks_export_files_init(&code);
	ks_strbuf_init(&binding);
	ks_strbuf_init(&workloads);
	ks_strbuf_init(&traces);
	ks_strbuf_init(&readme);
	if (!ks_is_identifier(op->name) || !ks_is_identifier(type)) {
		ks_fail(err, "op %s: definition name '%s' and op_type '%s' must be identifiers to name files",
			op->key, op->name, type);
		goto cleanup;
	}
	if (!(def = load_definition(op, err)))
		goto cleanup;
	if (ks_export_torch_binding(op, name, 0, &binding, err) < 0)
		goto cleanup;
	ks_export_cuda_sources(plain, &code);
	path = ks_asprintf("%s_binding.cpp", name);
	ks_export_files_add(&code, path, binding.buf, binding.len);
	for (size_t i = 0; i < code.nr; i++)
		json_array_append_new(sources, json_pack("{s:s, s:s}", "path", code.files[i].name, "content",
							 code.files[i].text));
	free(path);
	path = ks_asprintf("%s_binding.cpp::run", name);
	sol = json_pack("{s:s, s:s, s:s, s:{s:s, s:[s, s], s:s, s:[], s:b, s:s}, s:O, s:s}", "name", solution,
			"definition", op->name, "author", "ksearch " KS_VERSION, "spec", "language", "cuda",
			"target_hardware", *gpu ? gpu : "cuda", arch, "entry_point", path, "dependencies",
			"destination_passing_style", 1, "binding", "torch", "sources", sources, "description",
			description);
	for (size_t w = 0; w < op->n_workloads; w++) {
		json_t *wl = workload_json(op, &op->workloads[w], dir, out, err), *wtrace, *trace;

		if (!wl) {
			ks_error_prefix(err, "op %s", op->key);
			goto cleanup;
		}
		wtrace = json_pack("{s:s, s:O}", "definition", op->name, "workload", wl);
		add_lines(&workloads, wtrace);
		trace = trace_json(op, solution, wl, &op->workloads[w], records[w]);
		add_lines(&traces, trace);
		json_decref(wtrace);
		json_decref(trace);
		json_decref(wl);
	}
	free(path);
	path = ks_asprintf("definitions/%s/%s.json", type, op->name);
	add_json(out, path, def);
	free(path);
	path = ks_asprintf("solutions/%s/%s/%s.json", type, op->name, solution);
	add_json(out, path, sol);
	free(path);
	path = ks_asprintf("workloads/%s/%s.jsonl", type, op->name);
	ks_export_files_add(out, path, workloads.buf, workloads.len);
	free(path);
	path = ks_asprintf("traces/%s/%s.jsonl", type, op->name);
	ks_export_files_add(out, path, traces.buf, traces.len);
	arch_list = ks_export_torch_arch(arch);
	ks_strbuf_addf(
		&readme,
		"# %s: a FlashInfer-Bench trace set\n\n"
		"Made by ksearch %s for the definition `%s` (ksearch op `%s`): the Solution\n"
		"`%s` (%s), built for %s and measured on %s.\n\n"
		"| path | what |\n| --- | --- |\n"
		"| `definitions/%s/%s.json` | the Definition (op.json without ksearch's block) |\n"
		"| `solutions/%s/%s/%s.json` | the Solution: CUDA sources, `%s_binding.cpp::run` "
		"(torch binding, destination-passing) |\n"
		"| `workloads/%s/%s.jsonl` | the benchmark workloads of the search |\n"
		"| `traces/%s/%s.jsonl` | what the search measured on each (latency, reference latency, "
		"speedup) |\n"
		"| `blob/` | inputs FlashInfer-Bench cannot draw at random (indptr, page tables) |\n\n"
		"Run it with FlashInfer-Bench (the kernels need the architecture they were built for):\n\n"
		"```sh\n"
		"export TORCH_CUDA_ARCH_LIST=%s\n"
		"flashinfer-bench run --local .\n"
		"```\n\n"
		"Serve with it: with `flashinfer-bench` installed beside SGLang or vLLM,\n"
		"`FIB_ENABLE_APPLY=1 FIB_DATASET_PATH=$PWD` makes `flashinfer_bench.apply` route the\n"
		"definition's calls to the best Solution of this folder's traces.\n",
		solution, KS_VERSION, op->name, op->key, solution, description, arch,
		*gpu ? gpu : "an unrecorded GPU", type, op->name, type, op->name, solution, name, type,
		op->name, type, op->name, arch_list);
	ks_export_files_add(out, "README.md", readme.buf, readme.len);
	ret = 0;
cleanup:
	ks_export_files_release(&code);
	json_decref(def);
	json_decref(sol);
	json_decref(sources);
	ks_strbuf_release(&binding);
	ks_strbuf_release(&workloads);
	ks_strbuf_release(&traces);
	ks_strbuf_release(&readme);
	free(dir);
	free(path);
	free(arch_list);
	return ret;
}
