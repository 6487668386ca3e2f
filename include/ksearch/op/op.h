/*
 * op.h - operator definitions (operators/<name>/op.json).
 *
 * An operator is data: ks_op_load() reads a folder's op.json (the
 * FlashInfer-Bench Definition fields plus ksearch's own under "ksearch",
 * see operators/README.md), checks it completely, and resolves every
 * workload's axes (const axes, the workload's var axes, then derived
 * axes) so that later stages never meet an unknown or missing axis.
 *
 * Everything in struct ks_op is owned by it and freed by ks_op_release().
 * Errors name the file, and for JSON syntax the line and column, and for
 * content the field ("inputs.q.dtype: unknown dtype 'bf16' (expected one
 * of bfloat16, float16, float32, int32, int64)").
 */
#ifndef KSEARCH_OP_H
#define KSEARCH_OP_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/base/error.h"
#include "ksearch/op/expr.h"

enum ks_dtype {
	KS_DTYPE_BFLOAT16,
	KS_DTYPE_FLOAT16,
	KS_DTYPE_FLOAT32,
	KS_DTYPE_INT32,
	KS_DTYPE_INT64,
};

const char *ks_dtype_name(enum ks_dtype dtype);
size_t ks_dtype_size(enum ks_dtype dtype);
/* Fails with the list of known dtypes. */
int ks_dtype_parse(const char *text, enum ks_dtype *out, struct ks_error *err);

struct ks_axis {
	char *name;
	int is_const;
	int64_t value; /* const axes only */
	char *description;
};

enum ks_generator_kind {
	KS_GEN_NORMAL,		 /* a = mean, b = std */
	KS_GEN_UNIFORM,		 /* a = low, b = high */
	KS_GEN_CONST,		 /* a = value */
	KS_GEN_INDPTR,		 /* expr = total, min, start, lengths */
	KS_GEN_PAGE_PERMUTATION, /* expr = pool */
};

struct ks_generator {
	enum ks_generator_kind kind;
	double a, b;
	char *expr;
	int64_t min;
	int64_t start;	  /* indptr: its first value (the requests' tokens sum to total - start) */
	int64_t *lengths; /* indptr with explicit lengths, else NULL */
	size_t n_lengths;
};

const char *ks_generator_kind_name(enum ks_generator_kind kind);

struct ks_tensor {
	char *name;
	enum ks_dtype dtype;
	char **shape; /* axis names; NULL with rank 0 for a scalar */
	size_t rank;
	int is_scalar;
	char *description;
	struct ks_generator generator; /* inputs */
	int fresh_per_call;	       /* inputs: new values for every timed call (ksearch.fresh_per_call) */
	double atol, rtol;	       /* outputs */
};

struct ks_workload {
	char *id;
	struct ks_env axes;		 /* every axis of the op, resolved */
	struct ks_generator *generators; /* one per input, overrides applied */
};

/*
 * The MAP-Elites descriptors (operators/README.md says what each means).
 * The static ones are known from the build (and the driver's occupancy
 * once evaluated).  The measured ones come from the profiler (profile.h):
 * until a candidate is profiled it carries a stand-in, named by
 * ks_descriptor_stand_in(), and is placed by it; profiling replaces the
 * value in the record and moves the candidate to its measured cell
 * (ks_archive_set_profile()).
 */
enum ks_descriptor {
	KS_DESC_SMEM_BYTES,
	KS_DESC_OCCUPANCY,
	KS_DESC_LAUNCHES,
	KS_DESC_REGISTERS,
	KS_DESC_TENSOR_CORES,
	KS_DESC_ASYNC_COPY,
	KS_DESC_LOAD_WIDTH,
	/* measured */
	KS_DESC_DRAM_FRACTION,	    /* DRAM throughput / peak, 0..1; stand-in: the speed-of-light fraction */
	KS_DESC_ACHIEVED_OCCUPANCY, /* achieved occupancy, 0..1; stand-in: the theoretical occupancy */
	KS_DESC_COUNT
};

const char *ks_descriptor_name(enum ks_descriptor desc);
int ks_descriptor_parse(const char *text, enum ks_descriptor *out, struct ks_error *err);
/* 1 for the descriptors only the profiler measures (dram_fraction, achieved_occupancy). */
int ks_descriptor_is_measured(enum ks_descriptor desc);
/*
 * What a measured descriptor holds until the candidate is profiled, in
 * words ("the speed-of-light fraction", "the theoretical occupancy");
 * NULL for a static descriptor.
 */
const char *ks_descriptor_stand_in(enum ks_descriptor desc);

struct ks_grid_axis {
	enum ks_descriptor descriptor;
	double *edges; /* ascending; bins are [edges[i], edges[i+1]) */
	size_t n_edges;
};

struct ks_op {
	char *dir;  /* the operator's folder */
	char *key;  /* the folder's name: what --op takes */
	char *name; /* FlashInfer-Bench definition name */
	char *op_type;
	char *description;
	char *summary;
	struct ks_axis *axes;
	size_t n_axes;
	struct ks_tensor *inputs;
	size_t n_inputs;
	struct ks_tensor *outputs;
	size_t n_outputs;
	struct ks_workload *workloads; /* benchmark */
	size_t n_workloads;
	struct ks_workload *check_workloads; /* correctness */
	size_t n_check_workloads;
	char *min_bytes; /* expression */
	char *flops;	 /* expression */
	struct ks_grid_axis *grid;
	size_t n_grid;
	char *reference_path; /* <dir>/reference.cu */
	char **seed_paths;    /* <dir>/seeds/ *.cu, sorted */
	size_t n_seeds;
};

/* Load and check the operator in folder dir. */
int ks_op_load(const char *dir, struct ks_op *op, struct ks_error *err);

/*
 * Find an operator by its folder name in the search path: $KSEARCH_OPERATORS,
 * ./operators, then the operators shipped with ksearch.  Unknown names fail
 * with the known ones listed (and a suggestion when one is close).
 */
int ks_op_find(const char *key, struct ks_op *op, struct ks_error *err);

/*
 * The folders of every operator in the search path (first found wins for
 * a name), sorted by name; free with ks_op_dirs_free().
 */
int ks_op_dirs(char ***dirs, size_t *count, struct ks_error *err);
void ks_op_dirs_free(char **dirs, size_t count);

void ks_op_release(struct ks_op *op);

/* Index of the axis / input / output called name, or -1. */
int ks_op_axis_index(const struct ks_op *op, const char *name);
int ks_op_input_index(const struct ks_op *op, const char *name);
int ks_op_output_index(const struct ks_op *op, const char *name);

/* Number of elements of a tensor in a workload (1 for a scalar). */
int ks_tensor_numel(const struct ks_tensor *t, const struct ks_workload *w, int64_t *numel,
		    struct ks_error *err);

/* A workload by id among benchmark and check workloads, or NULL. */
const struct ks_workload *ks_op_workload(const struct ks_op *op, const char *id);

#endif
