/*
 * export.h - a candidate as plain CUDA that needs nothing from ksearch
 * (what `ksearch export-best` writes).
 *
 * ks_export_write() fills a folder with
 *   <name>.cu    the candidate's source with its params fixed as #defines,
 *                then a host launcher: <name>_launch() runs the launch plan
 *                of the ksearch block with the CUDA runtime API (device
 *                pointers, sizes, a caller's workspace, a stream), and
 *                <name>_workspace_bytes() says how much workspace it needs;
 *   <name>.h     their C prototypes, with the arguments, shapes, workspace
 *                and stream semantics explained;
 *   <name>.json  what was measured where (GPU, arch, timings per workload,
 *                fitness, speed-of-light fraction, descriptors, lineage),
 *                the params and the op definition;
 *   README.md    how to build and call it.
 * The .cu compiles with `nvcc -c -std=c++17 -arch=<arch>` as it is.
 *
 * The launcher's contract, which the generated comments repeat:
 *  - arguments: the op's inputs in op.json order (tensors as const device
 *    pointers, scalars by value in their dtype), its outputs (device
 *    pointers), one int per var axis, the workspace and its size, the
 *    stream;
 *  - it evaluates every grid, block, shared-memory and scratch expression
 *    in int64_t as ksearch does (cdiv, min, max; a divisor that depends on
 *    a size is checked), checks the CUDA launch limits, and launches the
 *    kernels in order on the stream without synchronising;
 *  - it allocates nothing: scratch buffers live in the caller's workspace,
 *    each at a 256-byte aligned offset;
 *  - it returns the first error (cudaErrorInvalidValue for a missing or
 *    short workspace, cudaErrorInvalidConfiguration for sizes that give a
 *    launch outside the CUDA limits, else what the runtime reports).
 *
 * Nothing here touches a GPU: exporting works on any machine.
 */
#ifndef KSEARCH_EXPORT_H
#define KSEARCH_EXPORT_H

#include <jansson.h>
#include <stdint.h>

#include "ksearch/archive/record.h"
#include "ksearch/op/candidate.h"
#include "ksearch/base/error.h"
#include "ksearch/base/util.h"
#include "ksearch/op/op.h"

/* Alignment of each scratch buffer inside the workspace, in bytes. */
#define KS_EXPORT_ALIGN 256

/* The version of the <name>.json format. */
#define KS_EXPORT_VERSION 1

/*
 * The params of an archive record ({"NAME": value, ...}) as an array of
 * cand->n_params values in declaration order.  Fails, naming the param,
 * when the record lacks a param of the source, has one the source does not
 * declare, or holds a value that is not an integer among the param's
 * values.  params may be NULL when the source declares none.
 */
int ks_export_params(const struct ks_candidate *cand, const json_t *params, int64_t *values,
		     struct ks_error *err);

/*
 * An export held in memory before it is written: its files, each a name
 * relative to the export's folder ("x.cu", or "csrc/x.cu" in a subfolder)
 * and its text.  The list owns everything (ks_export_files_release()).
 */
struct ks_export_file {
	char *name;
	char *text; /* NUL-terminated, len bytes before the NUL */
	size_t len;
};

struct ks_export_files {
	struct ks_export_file *files;
	size_t nr, alloc;
};

void ks_export_files_init(struct ks_export_files *f);
void ks_export_files_release(struct ks_export_files *f);
/* Add a copy of text as name; a file of that name already there is replaced. */
void ks_export_files_add(struct ks_export_files *f, const char *name, const char *text, size_t len);
/* The file called name, or NULL; borrowed until the list changes. */
const struct ks_export_file *ks_export_files_get(const struct ks_export_files *f, const char *name);
/*
 * Write every file into dir (created with its parents, and the files'
 * subfolders), each through a temporary name and a rename.
 */
int ks_export_files_write(const struct ks_export_files *f, const char *dir, struct ks_error *err);

/*
 * Where an exported candidate came from: its chain of first parents from
 * the seed, oldest first, the candidate last (the records borrowed).
 * missing, when not 0, is the id of the parent of steps[0] that the
 * archive lacks (an elites-only import): the chain ends there.
 */
struct ks_export_lineage {
	const struct ks_record *const *steps;
	size_t n_steps;
	uint64_t missing;
};

/*
 * The seed family rec descends from, when it is another (a knob or LLM
 * child is a family of its own: "knob-66" from "gqa_space_cluster"); NULL
 * when rec is of its seed's family, or the chain does not reach a seed.
 */
const char *ks_export_origin(const struct ks_record *rec, const struct ks_export_lineage *lineage);

/*
 * The kernels an export carries: the cubin ksearch's build (build.h) made
 * of the candidate for the record's arch.  The export's launcher loads it
 * through the CUDA driver; no compiler of the program that builds the
 * export sees the candidate's text (export.c, add_driver(), says why).
 */
struct ks_export_image {
	const unsigned char *cubin;
	size_t size;
	/* the build's fingerprint is the record's "binary": 1 yes, 0 no (another NVRTC), -1 none recorded */
	int same_as_timed;
};

/*
 * ks_export_write() without the writing: the files it would write are added
 * to out (nothing is added on failure of the checks before the text is
 * made).
 */
int ks_export_render(const struct ks_op *op, const struct ks_candidate *cand, const int64_t *params,
		     const json_t *record, const struct ks_export_lineage *lineage,
		     const struct ks_export_image *image, const char *name, struct ks_export_files *out,
		     struct ks_error *err);

/*
 * Write the files above into out_dir (created, with its parents, when
 * missing; files already there are replaced).
 *
 * cand must be bound to op (ks_candidate_bind); params holds one value per
 * param.  The plan must resolve on every workload of the op, or nothing is
 * written.  record is the archive record as stored (borrowed): its "id",
 * "gpu", "arch", "driver", "toolkit", "nvrtc", "workloads", "fitness",
 * "sol_fraction", "descriptors", "kernels", "family", "path", "created"
 * are copied as they are when present, and what the files say besides is
 * read from it as a struct ks_record (record.h), the nvcc target included
 * ("arch", sm_90a when absent).  lineage (borrowed, may be NULL: none) is
 * written as the record's "lineage", a step {id, mutation, fitness} per
 * record ("verdict" too where not ok) after {id, missing: true} for a
 * missing parent, and as README's table.  name, a C identifier, prefixes
 * every file and function.  Each file is written to a temporary name and
 * renamed, so a failure leaves no half-written file.
 */
int ks_export_write(const struct ks_op *op, const struct ks_candidate *cand, const int64_t *params,
		    const json_t *record, const struct ks_export_lineage *lineage,
		    const struct ks_export_image *image, const char *out_dir, const char *name,
		    struct ks_error *err);

/* One kernel of a dispatch: the fastest on a benchmark workload. */
struct ks_export_variant {
	const struct ks_workload *workload; /* the benchmark workload it won */
	const struct ks_candidate *cand;    /* bound to the op */
	const int64_t *params;
	const json_t *record;	     /* its archive record as stored (borrowed): what the export copies */
	const struct ks_record *rec; /* the same, read (borrowed) */
	const struct ks_export_lineage *lineage; /* its chain from the seed; NULL: none */
	const struct ks_export_image *image;	 /* its kernels as compiled */
	double median_us;			 /* its time on that workload */
};

/*
 * A per-shape dispatch (export-best --dispatch): each variant k is
 * exported as by ks_export_write() under the name <name>_v<k>, and
 * <name>.cu / <name>.h / <name>.json / README.md add <name>_launch(),
 * <name>_workspace_bytes() and <name>_variant() with the same arguments,
 * which pick for each call the variant of the benchmark workload nearest
 * to the call's sizes: the smallest sum, over the op's var axes, of the
 * squared difference of log2(size).  The header states the rule and the
 * table.  1 to 64 variants, one per benchmark workload; a kernel that is
 * the best of several workloads (the same record id) is exported once.

 */
int ks_export_dispatch(const struct ks_op *op, const struct ks_export_variant *variants, size_t n_variants,
		       const char *out_dir, const char *name, struct ks_error *err);
/* ks_export_dispatch() without the writing: its files are added to out. */
int ks_export_render_dispatch(const struct ks_op *op, const struct ks_export_variant *variants,
			      size_t n_variants, const char *name, struct ks_export_files *out,
			      struct ks_error *err);

/*
 * The formats below wrap a rendered export: plain holds the files of
 * ks_export_render() or ks_export_render_dispatch() made under name, whose
 * NAME_launch() and NAME_workspace_bytes() they call.
 */

/* The plain export's .cu, .h and .json files copied into out (not its README). */
int ks_export_cuda_sources(const struct ks_export_files *plain, struct ks_export_files *out);

/*
 * NAME_binding.cpp: NAME_run(inputs..., outputs...) taking torch tensors
 * (scalars as double or int64_t), which checks every tensor's device,
 * dtype, rank, contiguity and dimensions against the op's axes, reads the
 * var axes from the shapes, allocates the workspace with torch's allocator
 * and calls NAME_launch() on the current stream; a PYBIND11_MODULE
 * exposing it as run(); with torch_library, also the operator
 * torch.ops.NAME.run (under #ifdef KSEARCH_TORCH_LIBRARY).  Fails when a var
 * axis is in no tensor's shape or the op has no tensor.
 */
int ks_export_torch_binding(const struct ks_op *op, const char *name, int torch_library, struct ks_strbuf *sb,
			    struct ks_error *err);

/* The first tensor (inputs, then outputs, in op order) and dimension whose shape names axis; -1 if none. */
int ks_export_axis_source(const struct ks_op *op, size_t axis, size_t *tensor, size_t *dim);

/* "sm_90a" as TORCH_CUDA_ARCH_LIST spells it, "9.0a" (the caller frees). */
char *ks_export_torch_arch(const char *arch);

/*
 * export-best --format torch: a Python package in out: setup.py,
 * NAME/__init__.py (run(inputs) -> outputs, run_out(inputs, outputs), the
 * operator torch.ops.NAME.run with a fake implementation for
 * torch.compile), NAME/csrc/ (the plain sources, the binding) and
 * README.md.  record (borrowed) gives the arch, GPU and id.  Fails when an
 * output is a scalar or has a var axis no input names.
 */
int ks_export_torch(const struct ks_op *op, const struct ks_export_files *plain, const char *name,
		    const struct ks_record *record, struct ks_export_files *out, struct ks_error *err);

/*
 * export-best --format flashinfer-bench: a FlashInfer-Bench trace set in
 * out (TraceSet.from_path() reads the folder): definitions/TYPE/DEF.json,
 * solutions/TYPE/DEF/SOLUTION.json (language cuda, binding torch,
 * destination-passing, entry point NAME_binding.cpp::run, the sources
 * embedded), workloads/TYPE/DEF.jsonl (the benchmark workloads),
 * traces/TYPE/DEF.jsonl (one PASSED Trace per benchmark workload, from
 * records[w], the record whose kernel runs workload w: its timings, GPU,
 * created, driver, toolkit and nvrtc), blob/ (inputs that cannot be
 * random) and README.md.  records[0] gives the arch and the GPU of the
 * Solution.  description is the Solution's.
 */
int ks_export_flashinfer_bench(const struct ks_op *op, const struct ks_export_files *plain, const char *name,
			       const char *solution, const struct ks_record *const *records,
			       const char *description, struct ks_export_files *out, struct ks_error *err);

#endif
