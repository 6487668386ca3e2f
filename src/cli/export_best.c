/*
 * export_best.c - `ksearch export-best`: the best kernel of an archive (or
 * the one chosen by id or grid cell) as plain CUDA that needs nothing from
 * ksearch.  The files are written by ks_export_write() (export.h); this
 * layer picks the record, checks it against its source, and follows its
 * lineage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive_cli.h"
#include "cli.h"
#include "ksearch/archive/archive.h"
#include "ksearch/compile/build.h"
#include "ksearch/op/candidate.h"
#include "ksearch/export/export.h"
#include "ksearch/op/op.h"
#include "ksearch/base/util.h"

/* Filled cells named in the message for an empty one. */
#define MAX_CELLS_LISTED 12

static const char *const cmd = "export-best";

static const struct ks_help help = {
	.usage = "ksearch export-best --op NAME [--archive DIR] [--gpu MODEL] [--id ID | --cell I,J,... | "
		 "--dispatch]\n"
		 "                           [-o DIR] [--name NAME] [--format cuda|flashinfer-bench|torch]\n"
		 "                           [--solution NAME]",
	.description = "Write the best kernel of an operator's archive as plain CUDA that needs nothing\n"
		       "from ksearch: NAME.cu (the kernels compiled by NVRTC for the GPU they were\n"
		       "timed on, as the search built them, and a host launcher NAME_launch() that\n"
		       "takes device pointers, sizes, a workspace and a stream, and\n"
		       "NAME_workspace_bytes()), NAME.h (the C interface, with the arguments, shapes,\n"
		       "workspace and stream semantics), NAME.json (the GPU, arch, timings per\n"
		       "workload, fitness, speed-of-light fraction, descriptors, params and lineage),\n"
		       "NAME_source.txt (the candidate's source, to read) and README.md.  NAME.cu\n"
		       "compiles with `nvcc -c -std=c++17` as it is (CUDA 12 or newer) and loads its\n"
		       "kernels through the CUDA driver; the launcher allocates nothing.  No compiler\n"
		       "of your program sees the candidate's text: host code in it, hidden from NVRTC,\n"
		       "never runs.\n"
		       "\n"
		       "The best is the ok candidate with the highest fitness.  --id exports another\n"
		       "ok candidate, --cell the elite of a grid cell: one bin index per grid axis, in\n"
		       "the order of the op's grid (the cell column of `ksearch archive ls`), or the\n"
		       "cell number `ksearch archive show` prints.\n"
		       "\n"
		       "--dispatch exports the fastest kernel of each benchmark workload (as\n"
		       "`ksearch archive stats` lists them), each as NAME_v<k>.cu/.h/.json, and\n"
		       "NAME.cu/.h with NAME_launch(), NAME_workspace_bytes() and NAME_variant(): the\n"
		       "same arguments, and for each call the kernel of the benchmark workload nearest\n"
		       "to its sizes (by log2 of each var axis; NAME.h states the rule and the table).\n"
		       "\n"
		       "--format flashinfer-bench writes a FlashInfer-Bench trace set instead (what\n"
		       "flashinfer_bench.TraceSet.from_path() and `flashinfer-bench run --local DIR`\n"
		       "read): the op's Definition, the kernel as a Solution (its CUDA sources and a\n"
		       "torch binding embedded, entry point NAME_binding.cpp::run, destination-passing,\n"
		       "the GPU and arch as target hardware), the benchmark workloads, and the\n"
		       "search's measurements as one Trace per workload (latency, reference latency,\n"
		       "speedup, GPU, driver).  --solution names the Solution (default NAME_ID, or\n"
		       "NAME_dispatch).  --format torch writes a Python package: `pip install\n"
		       "--no-build-isolation DIR` builds a PyTorch extension, and NAME.run(inputs)\n"
		       "returns the outputs (the op torch.ops.NAME.run, which torch.compile and CUDA\n"
		       "graphs capture).  Both work with --dispatch.\n"
		       "\n"
		       "A candidate whose sanitizer check failed (`ksearch sanitize`: it writes or\n"
		       "reads outside its buffers, or races in shared memory) is refused, naming the\n"
		       "first error, unless --ignore-sanitizer; one that was never checked is\n"
		       "exported with a warning, since the evaluator cannot see a write outside a\n"
		       "buffer that the kernel undoes before it ends.",
	.examples =
		"  ksearch export-best --op gqa\n"
		"  ksearch export-best --op gqa --cell 1,2,0 -o kernels/gqa --name gqa_decode\n"
		"  ksearch export-best --op rmsnorm --archive /data/archive --gpu 'NVIDIA H100' --id 812\n"
		"  ksearch export-best --op gqa --dispatch -o kernels/gqa --name gqa_decode\n"
		"  ksearch export-best --op gqa --format flashinfer-bench -o fib-traces\n"
		"  ksearch export-best --op rmsnorm --format torch -o rmsnorm_pkg && pip install "
		"--no-build-isolation rmsnorm_pkg\n",

	.exit_codes = "  3  the candidate (or a kernel of the dispatch) failed its sanitizer check",
};

/* Exit codes of this command (also in the help). */
enum { EXIT_SANITIZER_FAILED = 3 };

/*
 * The record's sanitizer check: a failed one refuses the export (0 with
 * ignore, after a warning), one never made warns.  Returns 0, or
 * EXIT_SANITIZER_FAILED after the error.
 */
static int sanitizer_gate(const struct ks_record *rec, const char *op, const char *label, int ignore)
{
	const json_t *check = rec->sanitizer;
	unsigned long long id = (unsigned long long)rec->id;

	if (!check) {
		fprintf(stderr,
			"ksearch %s: warning: %s was never checked by the sanitizer: a write outside its "
			"buffers that it undoes before it ends would pass unseen (`ksearch sanitize --op %s "
			"--id %llu` checks it)\n",
			cmd, label, op, id);
		return 0;
	}
	if (!rec->sanitizer_failed)
		return 0;
	if (ignore) {
		fprintf(stderr,
			"ksearch %s: warning: %s failed its sanitizer check (%s: %s); exported anyway "
			"(--ignore-sanitizer)\n",
			cmd, label, ks_record_str(check, "first_tool", "?"),
			ks_record_str(check, "first", "?"));
		return 0;
	}
	ks_cli_error(
		cmd,
		"%s failed its sanitizer check: %s reported %lld error%s, the first: %s.  It accesses "
		"memory outside its buffers (or races in shared memory) and is not exported; "
		"`ksearch sanitize --op %s --id %llu` checks it again, --ignore-sanitizer exports it anyway",
		label, ks_record_str(check, "first_tool", "the sanitizer"),
		(long long)json_integer_value(json_object_get(check, "errors")),
		json_integer_value(json_object_get(check, "errors")) == 1 ? "" : "s",
		ks_record_str(check, "first", "?"), op, id);
	return EXIT_SANITIZER_FAILED;
}

/*
 * The kernels the export carries: rec's candidate built again for rec's
 * arch (NVRTC, in a child, as the search built it), and whether the build
 * is the one the search timed (its fingerprint is the record's "binary").
 * 0, or -1 after the error.
 */
static int build_image(const struct ks_op *op, const struct ks_candidate *cand, const int64_t *params,
		       const struct ks_record *rec, const char *label, struct ks_build *build,
		       struct ks_export_image *image)
{
	const char *arch = *rec->result.arch ? rec->result.arch : "sm_90a";
	struct ks_error err;
	char hex[65];

	if (ks_build(cand, op, params, arch, KS_BUILD_ISOLATED, build, &err) < 0) {
		ks_cli_error(cmd, "%s: building its kernels for %s: %s", label, arch, err.msg);
		return -1;
	}
	if (build->verdict != KS_VERDICT_OK || !build->compiled.cubin || !build->compiled.cubin_size) {
		ks_cli_error(cmd, "%s: NVRTC here does not build it for %s as the search did: %s", label,
			     arch, build->verdict != KS_VERDICT_OK ? err.msg : "no cubin");
		return -1;
	}
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", build->binary[i]);
	image->cubin = build->compiled.cubin;
	image->size = build->compiled.cubin_size;
	image->same_as_timed = !*rec->result.binary ? -1 : !strcmp(hex, rec->result.binary);
	if (!image->same_as_timed)
		fprintf(stderr,
			"ksearch %s: warning: %s built here is not the binary the search timed (another "
			"NVRTC%s%s?): its times are the other binary's\n",
			cmd, label, rec->nvrtc && *rec->nvrtc ? " than " : "", rec->nvrtc ? rec->nvrtc : "");
	return 0;
}

/* "ksearch_" + op key, with what is not an identifier character made '_'. */
static char *default_name(const char *op)
{
	char *name = ks_asprintf("ksearch_%s", op);

	for (char *p = name; *p; p++)
		if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9')))
			*p = '_';
	return name;
}

/* A Solution's name becomes a file name: letters, digits, '_', '-', '.', not starting with '.'. */
static int valid_solution_name(const char *s)
{
	if (!*s || *s == '.')
		return 0;
	for (; *s; s++)
		if (!(*s == '_' || *s == '-' || *s == '.' || (*s >= 'a' && *s <= 'z') ||
		      (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')))
			return 0;
	return 1;
}

static void describe_grid(struct ks_archive *ar, struct ks_strbuf *sb)
{
	size_t n_axes;
	const struct ks_grid_axis *axes = ks_archive_grid(ar, &n_axes);

	for (size_t i = 0; i < n_axes; i++)
		ks_strbuf_addf(sb, "%s%s: %zu bins", i ? ", " : "", ks_descriptor_name(axes[i].descriptor),
			       axes[i].n_edges - 1);
}

static void describe_cell(struct ks_archive *ar, uint64_t cell, struct ks_strbuf *sb)
{
	size_t n_axes, coords[KS_DESC_COUNT];
	const struct ks_grid_axis *axes = ks_archive_grid(ar, &n_axes);

	ks_archive_cell_coords(ar, cell, coords);
	for (size_t i = 0; i < n_axes; i++)
		ks_strbuf_addf(sb, "%s%zu", i ? "," : "", coords[i]);
	ks_strbuf_adds(sb, " (");
	for (size_t i = 0; i < n_axes; i++)
		ks_strbuf_addf(sb, "%s%s [%g, %g)", i ? ", " : "", ks_descriptor_name(axes[i].descriptor),
			       axes[i].edges[coords[i]], axes[i].edges[coords[i] + 1]);
	ks_strbuf_adds(sb, ")");
}

/*
 * --cell: "I,J,..." (a bin per axis) or one number (the cell's index) when
 * the grid has several axes.  Prints a usage error and returns -1 when it
 * names no cell of this grid.
 */
static int parse_cell(struct ks_archive *ar, const char *text, uint64_t *cell)
{
	size_t n_axes, n = 0;
	const struct ks_grid_axis *axes = ks_archive_grid(ar, &n_axes);
	unsigned long long v[KS_DESC_COUNT + 1];
	const char *p = text;
	struct ks_strbuf grid;

	ks_strbuf_init(&grid);
	describe_grid(ar, &grid);
	for (;;) {
		char *end;

		if (*p < '0' || *p > '9' || n > KS_DESC_COUNT)
			goto bad;
		errno = 0;
		v[n++] = strtoull(p, &end, 10);
		if (errno)
			goto bad;
		p = end;
		if (!*p)
			break;
		if (*p++ != ',')
			goto bad;
	}
	if (n == 1 && n_axes > 1) {
		if (v[0] >= ks_archive_cells(ar)) {
			ks_cli_usage(cmd, "--cell %s: the grid has %llu cells, numbered from 0 (%s)", text,
				     (unsigned long long)ks_archive_cells(ar), grid.buf);
			goto fail;
		}
		*cell = v[0];
		ks_strbuf_release(&grid);
		return 0;
	}
	if (n != n_axes) {
		ks_cli_usage(cmd,
			     "--cell %s: the grid has %zu axes (%s); give one bin index per axis, "
			     "separated by commas",
			     text, n_axes, grid.buf);
		goto fail;
	}
	*cell = 0;
	for (size_t i = 0; i < n_axes; i++) {
		size_t bins = axes[i].n_edges - 1;

		if (v[i] >= bins) {
			ks_cli_usage(cmd,
				     "--cell %s: bin %llu of axis %s does not exist (it has bins 0 to %zu)",
				     text, v[i], ks_descriptor_name(axes[i].descriptor), bins - 1);
			goto fail;
		}
		*cell = *cell * bins + v[i];
	}
	ks_strbuf_release(&grid);
	return 0;
bad:
	ks_cli_usage(cmd, "--cell '%s': expected one bin index per grid axis, e.g. --cell 1,2,0 (%s)", text,
		     grid.buf);
fail:
	ks_strbuf_release(&grid);
	return -1;
}

/* The id of the elite of cell (--cell text), or 0 after printing why there is none. */
static uint64_t cell_elite(struct ks_archive *ar, uint64_t cell, const char *text)
{
	struct ks_archive_elite *elites = NULL;
	struct ks_strbuf sb, filled;
	struct ks_error err;
	uint64_t id = 0;
	size_t n = 0;

	if (ks_archive_elites(ar, &elites, &n, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		if (elites[i].cell == cell)
			id = elites[i].id;
	if (!id) {
		ks_strbuf_init(&sb);
		ks_strbuf_init(&filled);
		describe_cell(ar, cell, &sb);
		for (size_t i = 0; i < n && i < MAX_CELLS_LISTED; i++) {
			size_t n_axes, coords[KS_DESC_COUNT];

			ks_archive_grid(ar, &n_axes);
			ks_archive_cell_coords(ar, elites[i].cell, coords);
			ks_strbuf_adds(&filled, i ? "; " : "");
			for (size_t a = 0; a < n_axes; a++)
				ks_strbuf_addf(&filled, "%s%zu", a ? "," : "", coords[a]);
			ks_strbuf_addf(&filled, " (#%llu, fitness %.3f)", (unsigned long long)elites[i].id,
				       elites[i].fitness);
		}
		if (n > MAX_CELLS_LISTED)
			ks_strbuf_addf(&filled, "; and %zu more", n - MAX_CELLS_LISTED);
		ks_cli_error(cmd, "--cell %s: cell %s of %s is empty; %s%s", text, sb.buf,
			     ks_archive_path(ar), n ? "the filled cells are: " : "no cell is filled yet",
			     filled.buf);
		ks_strbuf_release(&sb);
		ks_strbuf_release(&filled);
	}
	free(elites);
	return id;
}

/*
 * The record and source the options choose (--id given_id, else --cell
 * cell_text, else the best).  Prints the error and returns -2 for a
 * --cell that is not one, -1 when there is no such candidate.
 */
static int pick_record(struct ks_archive *ar, uint64_t given_id, const char *cell_text, json_t **record,
		       char **source)
{
	struct ks_error err;
	uint64_t id;

	*record = NULL;
	*source = NULL;
	if (given_id)
		return ks_archive_cli_get(cmd, ar, given_id, record, source);
	if (cell_text) {
		uint64_t cell;

		if (parse_cell(ar, cell_text, &cell) < 0)
			return -2;
		if (!(id = cell_elite(ar, cell, cell_text)))
			return -1;
		return ks_archive_cli_get(cmd, ar, id, record, source);
	}
	if (ks_archive_best(ar, record, source, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		return -1;
	}
	if (!*record) {
		struct ks_archive_metrics m;

		if (ks_archive_metrics(ar, &m, &err) == 0 && m.candidates)
			ks_cli_error(cmd,
				     "%s has no ok candidate yet (%llu evaluated, none verified ok); "
				     "`ksearch archive ls` shows their verdicts",
				     ks_archive_path(ar), (unsigned long long)m.candidates);
		else
			ks_cli_error(cmd, "%s is empty: nothing to export yet (`ksearch evolve` fills it)",
				     ks_archive_path(ar));
		return -1;
	}
	return 0;
}

enum export_format { FORMAT_CUDA, FORMAT_FLASHINFER_BENCH, FORMAT_TORCH };
static const char *const formats[] = { "cuda", "flashinfer-bench", "torch", NULL };

/* What a format needs beside the rendered files. */
struct format_args {
	int format;
	const char *name;
	const char *solution; /* flashinfer-bench: the Solution's name */
	/* one per benchmark workload: the record whose kernel runs it */
	const struct ks_record *const *records;
	const char *description;
	const char *out_dir;
};

/* Wrap plain (the rendered CUDA export) in the format and write it.  0, or -1 after the error. */
static int write_format(const struct ks_op *op, const struct ks_export_files *plain,
			const struct format_args *fa)
{
	struct ks_export_files out;
	struct ks_error err;
	int rc = 0;

	ks_export_files_init(&out);
	if (fa->format == FORMAT_TORCH)
		rc = ks_export_torch(op, plain, fa->name, fa->records[0], &out, &err);
	else if (fa->format == FORMAT_FLASHINFER_BENCH)
		rc = ks_export_flashinfer_bench(op, plain, fa->name, fa->solution, fa->records,
						fa->description, &out, &err);
	if (!rc)
		rc = ks_export_files_write(fa->format == FORMAT_CUDA ? plain : &out, fa->out_dir, &err);
	if (rc)
		ks_cli_error(cmd, "%s", err.msg);
	ks_export_files_release(&out);
	return rc;
}

/* What --format flashinfer-bench or torch wrote, and what to do with it. */
static void print_format(const struct ks_op *op, const struct format_args *fa)
{
	if (fa->format == FORMAT_FLASHINFER_BENCH) {
		const char *built_for = fa->records[0]->result.arch;
		char *arch = ks_export_torch_arch(*built_for ? built_for : "sm_90a");

		printf("  %s/solutions/.../%s.json   the Solution (sources embedded, entry point "
		       "%s_binding.cpp::run)\n"
		       "  %s/traces/  %s/workloads/  %s/definitions/   its measurements, workloads "
		       "and the Definition %s\n\n"
		       "run it with FlashInfer-Bench:\n  TORCH_CUDA_ARCH_LIST=%s flashinfer-bench run "
		       "--local %s\n",
		       fa->out_dir, fa->solution, fa->name, fa->out_dir, fa->out_dir, fa->out_dir, op->name,
		       arch, fa->out_dir);
		free(arch);
	} else if (fa->format == FORMAT_TORCH) {
		printf("  %s/setup.py  %s/%s/__init__.py  %s/%s/csrc/   a PyTorch extension package\n\n"
		       "install it with:\n  pip install --no-build-isolation %s\n"
		       "then: import %s; %s.run(...)   (see %s/README.md)\n",
		       fa->out_dir, fa->out_dir, fa->name, fa->out_dir, fa->name, fa->out_dir, fa->name,
		       fa->name, fa->out_dir);
	}
}

static void print_result(const struct ks_op *op, const struct ks_candidate *cand, const int64_t *params,
			 const struct ks_record *rec, const char *origin, const struct format_args *fa)
{
	const char *out_dir = fa->out_dir, *name = fa->name,
		   *arch = *rec->result.arch ? rec->result.arch : "sm_90a";
	char buf[512];

	ks_params_format(cand, params, buf, sizeof(buf));
	printf("exported candidate #%llu (%s%s%s; %s) to %s/\n", (unsigned long long)rec->id,
	       *rec->family ? rec->family : "unknown family", origin ? " from " : "", origin ? origin : "",
	       cand->n_params ? buf : "no params", out_dir);
	printf("  measured on %s (%s): fitness %.3f", *rec->gpu ? rec->gpu : "an unrecorded GPU", arch,
	       rec->result.fitness);
	if (rec->has & KS_RECORD_SOL_FRACTION)
		printf(", %.1f%% of speed of light", 100 * rec->result.sol_fraction);
	printf("\n\n");
	if (fa->format != FORMAT_CUDA) {
		print_format(op, fa);
		return;
	}
	printf("  %s/%s.cu    the kernels with their params fixed, and the launcher %s_launch()\n", out_dir,
	       name, name);
	printf("  %s/%s.h     the C interface: arguments, shapes, workspace, stream\n", out_dir, name);
	printf("  %s/%s.json  what was measured where, and the lineage\n", out_dir, name);
	printf("  %s/README.md\n\n", out_dir);
	printf("build it with:\n  nvcc -c -std=c++17 -arch=%s %s/%s.cu -o %s.o\n", arch, out_dir, name, name);
}

/* One kernel of a dispatch as the archive holds it: the pieces a variant points into. */
struct dispatch_part {
	json_t *record;	      /* as stored: what the export copies */
	struct ks_record rec; /* the same, read */
	int have_rec;
	struct ks_archive_cli_lineage lineage; /* from its seed */
	char *source;
	struct ks_candidate cand;
	int64_t *params;
	int have_cand;
	struct ks_build build; /* its kernels, compiled (the first part of a record builds them) */
	struct ks_export_image image;
};

/*
 * --dispatch: the best of each benchmark workload (the archive keeps them),
 * exported as one launcher that picks per call.  Returns an exit code.
 */
static int export_dispatch(struct ks_archive *ar, const struct ks_op *op, struct format_args *fa,
			   int ignore_sanitizer)
{
	const char *out_dir = fa->out_dir, *name = fa->name;
	const struct ks_record **records = ks_calloc(op->n_workloads + 1, sizeof(*records));
	struct ks_export_files files;
	struct dispatch_part *parts = ks_calloc(op->n_workloads + 1, sizeof(*parts));
	struct ks_export_variant *variants = ks_calloc(op->n_workloads + 1, sizeof(*variants));
	json_t *bests = NULL;
	struct ks_error err;
	int ret = KS_EXIT_FAILED, rc;

	ks_export_files_init(&files);
	if (ks_archive_workload_bests(ar, &bests, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	for (size_t w = 0; w < op->n_workloads; w++) {
		const json_t *best = json_object_get(bests, op->workloads[w].id);
		struct dispatch_part *p = &parts[w];
		uint64_t id = (uint64_t)json_integer_value(json_object_get(best, "id"));
		char label[96];

		if (!id) {
			ks_cli_error(
				cmd,
				"workload %s has no ok candidate yet: a dispatch needs a kernel for every "
				"benchmark workload (let the search run longer, or export one kernel without "
				"--dispatch)",
				op->workloads[w].id);
			goto cleanup;
		}
		snprintf(label, sizeof(label), "candidate #%llu", (unsigned long long)id);
		if (ks_archive_cli_get(cmd, ar, id, &p->record, &p->source) < 0)
			goto cleanup;
		ks_record_init(&p->rec);
		p->have_rec = 1;
		if (ks_record_parse(p->record, &p->rec, &err) < 0) {
			ks_cli_error(cmd, "%s", err.msg);
			goto cleanup;
		}
		if ((rc = sanitizer_gate(&p->rec, op->key, label, ignore_sanitizer))) {
			ret = rc;
			goto cleanup;
		}
		if (!p->source) {
			ks_cli_error(cmd, "%s: the archive holds no source text for it", label);
			goto cleanup;
		}
		if (ks_candidate_parse(label, p->source, &p->cand, &err) < 0) {
			ks_cli_error(cmd, "%s", err.msg);
			goto cleanup;
		}
		p->have_cand = 1;
		if (ks_archive_cli_lineage_build(ar, &p->rec, &p->lineage, &err) < 0) {
			ks_cli_error(cmd, "%s: its lineage: %s", label, err.msg);
			goto cleanup;
		}
		p->params = ks_calloc(p->cand.n_params + 1, sizeof(*p->params));
		if (ks_candidate_bind(&p->cand, op, &err) < 0 ||
		    ks_export_params(&p->cand, p->rec.params, p->params, &err) < 0) {
			ks_cli_error(cmd, "%s: %s (does the archive belong to this version of op %s?)", label,
				     err.msg, op->key);
			goto cleanup;
		}
		{
			size_t first = 0;

			while (first < w && parts[first].rec.id != p->rec.id)
				first++;
			if (first < w)
				p->image =
					parts[first].image; /* the best of several workloads is built once */
			else if (build_image(op, &p->cand, p->params, &p->rec, label, &p->build, &p->image) <
				 0)
				goto cleanup;
		}
		variants[w] = (struct ks_export_variant){
			.workload = &op->workloads[w],
			.cand = &p->cand,
			.params = p->params,
			.record = p->record,
			.rec = &p->rec,
			.lineage = &p->lineage.chain,
			.image = &p->image,
			.median_us = json_number_value(json_object_get(best, "median_us")),
		};
		records[w] = &p->rec;
	}
	if (ks_export_render_dispatch(op, variants, op->n_workloads, name, &files, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	fa->records = records;
	if (write_format(op, &files, fa) < 0)
		goto cleanup;
	if (fa->format == FORMAT_CUDA)
		printf("exported a dispatch over %zu workloads of op %s to %s/%s.{cu,h,json} (and "
		       "%s_v<k>.*):\n",
		       op->n_workloads, op->key, out_dir, name, name);
	else
		printf("exported a dispatch over %zu workloads of op %s to %s/ as %s:\n", op->n_workloads,
		       op->key, out_dir, formats[fa->format]);
	for (size_t w = 0; w < op->n_workloads; w++) {
		const char *origin = ks_export_origin(&parts[w].rec, &parts[w].lineage.chain);
		char params[256];

		ks_params_format(&parts[w].cand, parts[w].params, params, sizeof(params));
		printf("  %-16s #%-8lld %s%s%s (%s), %.2f us\n", op->workloads[w].id,
		       (long long)parts[w].rec.id, *parts[w].rec.family ? parts[w].rec.family : "?",
		       origin ? " from " : "", origin ? origin : "", params, variants[w].median_us);
	}
	printf("dispatch fitness %.3f (each workload on its own best)\n", ks_archive_dispatch_fitness(bests));
	if (fa->format == FORMAT_CUDA)
		printf("build: see %s/README.md\n", out_dir);
	else
		print_format(op, fa);
	ret = KS_EXIT_OK;
cleanup:
	ks_export_files_release(&files);
	free(records);
	for (size_t w = 0; w < op->n_workloads; w++) {
		if (parts[w].have_cand)
			ks_candidate_release(&parts[w].cand);
		json_decref(parts[w].record);
		ks_archive_cli_lineage_release(&parts[w].lineage);
		ks_build_release(&parts[w].build);
		if (parts[w].have_rec)
			ks_record_release(&parts[w].rec);
		free(parts[w].source);
		free(parts[w].params);
	}
	free(parts);
	free(variants);
	json_decref(bests);
	return ret;
}

int cmd_export_best(int argc, char **argv)
{
	struct ks_archive_pick pick = KS_ARCHIVE_PICK_INIT;
	const char *cell_text = NULL, *output = NULL, *name_given = NULL, *solution_given = NULL,
		   *origin = NULL;
	uint64_t given_id = 0;
	int dispatch = 0, ignore_sanitizer = 0, format = FORMAT_CUDA;
	struct ks_option opts[] = {
		KS_OPT_STRING(0, "archive", &pick.root, "DIR",
			      "the archive folder (default: " KS_ARCHIVE_DEFAULT_ROOT ")"),
		KS_OPT_STRING(0, "op", &pick.op, "NAME", "the operator (required)"),
		KS_OPT_STRING(0, "gpu", &pick.gpu, "MODEL",
			      "the GPU model or its folder name; needed when DIR holds archives of the op "
			      "for several"),
		KS_OPT_CALLBACK(0, "id", &given_id, "ID", ks_archive_id_option,
				"export this ok candidate instead of the best"),
		KS_OPT_STRING(0, "cell", &cell_text, "I,J,...",
			      "export the elite of this grid cell instead of the best"),
		KS_OPT_STRING('o', "output", &output, "DIR",
			      "the folder to write (default: export/<op>-<id>)"),
		KS_OPT_STRING(0, "name", &name_given, "NAME",
			      "prefix of the files and functions (default: ksearch_<op>)"),
		KS_OPT_BOOL(0, "dispatch", &dispatch,
			    "export the best kernel of each benchmark workload, with one launcher that picks "
			    "per call"),
		KS_OPT_CHOICE(
			0, "format", &format, "FORMAT", formats,
			"cuda (the default: .cu, .h, .json, README), flashinfer-bench (a trace set with "
			"the Solution and its Traces) or torch (a Python package)"),
		KS_OPT_STRING(0, "solution", &solution_given, "NAME",
			      "--format flashinfer-bench: the Solution's name (default: NAME_ID)"),
		KS_OPT_BOOL(
			0, "ignore-sanitizer", &ignore_sanitizer,
			"export even a candidate whose sanitizer check failed (a report you judged false)"),
		KS_OPT_END,
	};
	struct ks_candidate cand;
	struct ks_archive *ar = NULL;
	struct ks_error err;
	struct ks_op op;
	json_t *record = NULL;
	struct ks_record rec;
	struct ks_archive_cli_lineage lineage;
	struct ks_build build;
	struct ks_export_image image = { 0 };
	char *source = NULL, *name = NULL, *out_dir = NULL, *label = NULL, *solution = NULL,
	     *description = NULL;
	struct ks_export_files files;
	struct format_args fa = { 0 };
	const struct ks_record **records = NULL;
	int64_t *params = NULL;
	const char **pos;
	size_t n_pos;
	int rc, ret = KS_EXIT_USAGE, have_op = 0, have_cand = 0;

	memset(&cand, 0, sizeof(cand));
	ks_record_init(&rec);
	memset(&lineage, 0, sizeof(lineage));
	memset(&build, 0, sizeof(build));
	ks_export_files_init(&files);
	rc = ks_opts_parse(cmd, opts, &help, argc, argv, &pos, &n_pos);
	if (rc)
		return rc == 1 ? KS_EXIT_OK : KS_EXIT_USAGE;
	if (n_pos) {
		ks_cli_usage(cmd,
			     "takes no arguments (got '%s'; the candidate is chosen with --id or --cell)",
			     pos[0]);
		goto cleanup;
	}
	if (!pick.op) {
		ks_cli_usage(cmd, "--op NAME is required (`ksearch ops` lists the operators)");
		goto cleanup;
	}
	if (given_id && cell_text) {
		ks_cli_usage(cmd, "--id and --cell both choose the candidate; give one of them");
		goto cleanup;
	}
	if (dispatch && (given_id || cell_text)) {
		ks_cli_usage(cmd, "--dispatch exports the best of each workload; --%s chooses one candidate",
			     given_id ? "id" : "cell");
		goto cleanup;
	}
	if (solution_given && format != FORMAT_FLASHINFER_BENCH) {
		ks_cli_usage(cmd,
			     "--solution names a FlashInfer-Bench Solution; it needs --format "
			     "flashinfer-bench (got --format %s)",
			     formats[format]);
		goto cleanup;
	}
	if (solution_given && !valid_solution_name(solution_given)) {
		ks_cli_usage(cmd,
			     "--solution '%s': expected letters, digits, '_', '-' and '.' (it names a file), "
			     "not starting with '.'",
			     solution_given);
		goto cleanup;
	}
	name = name_given ? ks_strdup(name_given) : default_name(pick.op);
	if (!ks_is_identifier(name)) {
		ks_cli_usage(cmd,
			     "--name '%s': expected a C identifier (it prefixes the files and functions)",
			     name);
		goto cleanup;
	}
	ret = KS_EXIT_FAILED;
	if (ks_op_find(pick.op, &op, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	have_op = 1;
	if (ks_archive_cli_open(cmd, &pick, &ar))
		goto cleanup;
	fa.format = format;
	fa.name = name;
	if (dispatch) {
		out_dir = output ? ks_strdup(output)
				 : ks_asprintf("export/%s-dispatch%s%s", op.key, format ? "-" : "",
					       format ? formats[format] : "");
		solution = solution_given ? ks_strdup(solution_given) : ks_asprintf("%s_dispatch", name);
		description = ks_asprintf("ksearch's per-shape dispatch for op %s: the fastest kernel of "
					  "each benchmark workload, picked per call by the nearest workload "
					  "(log2 of each var axis)",
					  op.key);
		fa.out_dir = out_dir;
		fa.solution = solution;
		fa.description = description;
		ret = export_dispatch(ar, &op, &fa, ignore_sanitizer);
		goto cleanup;
	}
	rc = pick_record(ar, given_id, cell_text, &record, &source);

	if (rc < 0) {
		if (rc == -2)
			ret = KS_EXIT_USAGE;
		goto cleanup;
	}
	/* the record as stored goes into the export's JSON; what is read of it, from rec */
	if (ks_record_parse(record, &rec, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	label = ks_asprintf("candidate #%llu (%s)", (unsigned long long)rec.id,
			    *rec.path ? rec.path : "no path recorded");
	if (!ks_record_ok(&rec)) {
		ks_cli_error(cmd, "%s has verdict '%s'; only candidates verified ok are exported", label,
			     ks_verdict_name(rec.result.verdict));
		goto cleanup;
	}
	if ((rc = sanitizer_gate(&rec, op.key, label, ignore_sanitizer))) {
		ret = rc;
		goto cleanup;
	}
	if (!source) {
		ks_cli_error(cmd, "%s: the archive holds no source text for it", label);
		goto cleanup;
	}
	if (ks_candidate_parse(label, source, &cand, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	have_cand = 1;
	if (ks_candidate_bind(&cand, &op, &err) < 0) {
		ks_cli_error(cmd, "%s (does the archive belong to this version of op %s?)", err.msg, op.key);
		goto cleanup;
	}
	params = ks_calloc(cand.n_params + 1, sizeof(*params));
	if (ks_export_params(&cand, rec.params, params, &err) < 0) {
		ks_cli_error(cmd, "%s: the record does not match its source: %s", label, err.msg);
		goto cleanup;
	}
	if (ks_archive_cli_lineage_build(ar, &rec, &lineage, &err) < 0) {
		ks_cli_error(cmd, "%s: following its parents: %s", label, err.msg);
		goto cleanup;
	}
	out_dir = output ? ks_strdup(output)
			 : ks_asprintf("export/%s-%llu%s%s", op.key, (unsigned long long)rec.id,
				       format ? "-" : "", format ? formats[format] : "");
	if (build_image(&op, &cand, params, &rec, label, &build, &image) < 0)
		goto cleanup;
	if (ks_export_render(&op, &cand, params, record, &lineage.chain, &image, name, &files, &err) < 0) {
		ks_cli_error(cmd, "%s", err.msg);
		goto cleanup;
	}
	records = ks_calloc(op.n_workloads + 1, sizeof(*records));
	for (size_t w = 0; w < op.n_workloads; w++)
		records[w] = &rec;
	origin = ks_export_origin(&rec, &lineage.chain);
	{
		char buf[512];

		ks_params_format(&cand, params, buf, sizeof(buf));
		solution = solution_given ? ks_strdup(solution_given)
					  : ks_asprintf("%s_%llu", name, (unsigned long long)rec.id);
		description = ks_asprintf(
			"ksearch candidate #%llu of op %s: family %s%s%s, %s; fitness %.3f on %s",
			(unsigned long long)rec.id, op.key, *rec.family ? rec.family : "unknown",
			origin ? " from " : "", origin ? origin : "", cand.n_params ? buf : "no params",
			rec.result.fitness, *rec.gpu ? rec.gpu : "an unrecorded GPU");
	}
	fa.out_dir = out_dir;
	fa.solution = solution;
	fa.description = description;
	fa.records = records;
	if (write_format(&op, &files, &fa) < 0)
		goto cleanup;
	print_result(&op, &cand, params, &rec, origin, &fa);
	ret = KS_EXIT_OK;
cleanup:
	if (have_cand)
		ks_candidate_release(&cand);
	if (have_op)
		ks_op_release(&op);
	ks_archive_close(ar);
	json_decref(record);
	ks_archive_cli_lineage_release(&lineage);
	ks_build_release(&build);
	ks_record_release(&rec);
	free(source);
	free(params);
	free(label);
	free(name);
	free(out_dir);
	free(solution);
	free(description);
	free(records);
	ks_export_files_release(&files);
	free(pos);
	ks_opts_release(opts);
	return ret;
}
