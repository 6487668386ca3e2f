/*
 * op.c - loading and checking operators/<name>/op.json.
 */
#include "ksearch/op/op.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ksearch/base/json.h"
#include "ksearch/base/util.h"

static const char *const dtype_names[] = {
	[KS_DTYPE_BFLOAT16] = "bfloat16", [KS_DTYPE_FLOAT16] = "float16", [KS_DTYPE_FLOAT32] = "float32",
	[KS_DTYPE_INT32] = "int32",	  [KS_DTYPE_INT64] = "int64",
};

static const size_t dtype_sizes[] = {
	[KS_DTYPE_BFLOAT16] = 2, [KS_DTYPE_FLOAT16] = 2, [KS_DTYPE_FLOAT32] = 4,
	[KS_DTYPE_INT32] = 4,	 [KS_DTYPE_INT64] = 8,
};

static const char *const descriptor_names[] = {
	[KS_DESC_SMEM_BYTES] = "smem_bytes",
	[KS_DESC_OCCUPANCY] = "occupancy",
	[KS_DESC_LAUNCHES] = "launches",
	[KS_DESC_REGISTERS] = "registers",
	[KS_DESC_TENSOR_CORES] = "tensor_cores",
	[KS_DESC_ASYNC_COPY] = "async_copy",
	[KS_DESC_LOAD_WIDTH] = "load_width",
	[KS_DESC_DRAM_FRACTION] = "dram_fraction",
	[KS_DESC_ACHIEVED_OCCUPANCY] = "achieved_occupancy",
};

static const char *const generator_names[] = {
	[KS_GEN_NORMAL] = "normal",
	[KS_GEN_UNIFORM] = "uniform",
	[KS_GEN_CONST] = "const",
	[KS_GEN_INDPTR] = "indptr",
	[KS_GEN_PAGE_PERMUTATION] = "page_permutation",
};

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

const char *ks_dtype_name(enum ks_dtype dtype)
{
	return dtype_names[dtype];
}

size_t ks_dtype_size(enum ks_dtype dtype)
{
	return dtype_sizes[dtype];
}

int ks_dtype_parse(const char *text, enum ks_dtype *out, struct ks_error *err)
{
	for (size_t i = 0; i < ARRAY_SIZE(dtype_names); i++) {
		if (!strcmp(text, dtype_names[i])) {
			*out = (enum ks_dtype)i;
			return 0;
		}
	}
	return ks_fail(err, "unknown dtype '%s' (expected one of bfloat16, float16, float32, int32, int64)",
		       text);
}

const char *ks_descriptor_name(enum ks_descriptor desc)
{
	return descriptor_names[desc];
}

int ks_descriptor_parse(const char *text, enum ks_descriptor *out, struct ks_error *err)
{
	for (size_t i = 0; i < ARRAY_SIZE(descriptor_names); i++) {
		if (!strcmp(text, descriptor_names[i])) {
			*out = (enum ks_descriptor)i;
			return 0;
		}
	}
	return ks_fail(err,
		       "unknown descriptor '%s' (expected one of smem_bytes, occupancy, launches, "
		       "registers, tensor_cores, async_copy, load_width, dram_fraction, "
		       "achieved_occupancy)",
		       text);
}

int ks_descriptor_is_measured(enum ks_descriptor desc)
{
	return desc == KS_DESC_DRAM_FRACTION || desc == KS_DESC_ACHIEVED_OCCUPANCY;
}

const char *ks_descriptor_stand_in(enum ks_descriptor desc)
{
	switch (desc) {
	case KS_DESC_DRAM_FRACTION:
		return "the speed-of-light fraction";
	case KS_DESC_ACHIEVED_OCCUPANCY:
		return "the theoretical occupancy";
	default:
		return NULL;
	}
}

const char *ks_generator_kind_name(enum ks_generator_kind kind)
{
	return generator_names[kind];
}

/* ---- small JSON accessors that say which field is wrong ---- */

static int get_string(const json_t *obj, const char *key, const char *where, int required, char **out,
		      struct ks_error *err)
{
	json_t *v = json_object_get(obj, key);

	*out = NULL;
	if (!v) {
		if (required)
			return ks_fail(err, "%s%s: missing (expected a string)", where, key);
		return 0;
	}
	if (!json_is_string(v))
		return ks_fail(err, "%s%s: expected a string, got %s", where, key, ks_json_type_word(v));
	*out = ks_strdup(json_string_value(v));
	return 0;
}

/* A number (integer or real) as a double. */
static int get_number(const json_t *obj, const char *key, const char *where, double fallback, double *out,
		      struct ks_error *err)
{
	json_t *v = json_object_get(obj, key);

	if (!v) {
		*out = fallback;
		return 0;
	}
	if (!json_is_number(v))
		return ks_fail(err, "%s%s: expected a number, got %s", where, key, ks_json_type_word(v));
	*out = json_number_value(v);
	return 0;
}

/* An integer value or an expression string, kept as expression text. */
static int get_expr(const json_t *obj, const char *key, const char *where, int required, char **out,
		    struct ks_error *err)
{
	json_t *v = json_object_get(obj, key);

	*out = NULL;
	if (!v) {
		if (required)
			return ks_fail(err, "%s%s: missing (expected an expression)", where, key);
		return 0;
	}
	if (json_is_integer(v)) {
		*out = ks_asprintf("%lld", (long long)json_integer_value(v));
		return 0;
	}
	if (!json_is_string(v))
		return ks_fail(err, "%s%s: expected an expression string, got %s", where, key,
			       ks_json_type_word(v));
	*out = ks_strdup(json_string_value(v));
	return 0;
}

/* Every name in expr must be an axis of op. */
struct name_check {
	const struct ks_op *op;
	const char *bad;
	char bad_buf[64];
};

static void check_axis_name(const char *name, void *ctx)
{
	struct name_check *nc = ctx;

	if (!nc->bad && ks_op_axis_index(nc->op, name) < 0) {
		snprintf(nc->bad_buf, sizeof(nc->bad_buf), "%s", name);
		nc->bad = nc->bad_buf;
	}
}

static int check_axis_expr(const struct ks_op *op, const char *expr, const char *where, struct ks_error *err)
{
	struct name_check nc = { .op = op };

	if (ks_expr_names(expr, check_axis_name, &nc, err) < 0) {
		ks_error_prefix(err, "%s", where);
		return -1;
	}
	if (nc.bad) {
		struct ks_strbuf known;
		int ret;

		ks_strbuf_init(&known);
		for (size_t i = 0; i < op->n_axes; i++)
			ks_strbuf_addf(&known, "%s%s", i ? ", " : "", op->axes[i].name);
		ret = ks_fail(err, "%s: in \"%s\": unknown axis '%s' (axes: %s)", where, expr, nc.bad,
			      known.buf);
		ks_strbuf_release(&known);
		return ret;
	}
	return 0;
}

/* ---- parts of op.json ---- */

static int parse_axes(struct ks_op *op, const json_t *axes, struct ks_error *err)
{
	const char *name;
	json_t *spec;

	if (!json_is_object(axes) || json_object_size(axes) == 0)
		return ks_fail(err, "axes: expected a non-empty object of axis name -> {\"type\": ...}");
	op->axes = ks_calloc(json_object_size(axes), sizeof(*op->axes));
	json_object_foreach((json_t *)axes, name, spec)
	{
		struct ks_axis *axis = &op->axes[op->n_axes];
		char where[128];
		char *type = NULL;

		snprintf(where, sizeof(where), "axes.%s.", name);
		if (!ks_is_identifier(name))
			return ks_fail(err, "axes: '%s' is not a valid axis name (letters, digits, _)", name);
		if (!json_is_object(spec))
			return ks_fail(err, "axes.%s: expected an object, got %s", name,
				       ks_json_type_word(spec));
		axis->name = ks_strdup(name);
		op->n_axes++;
		if (get_string(spec, "type", where, 1, &type, err) < 0)
			return -1;
		if (!strcmp(type, "const")) {
			json_t *v = json_object_get(spec, "value");

			axis->is_const = 1;
			if (!json_is_integer(v)) {
				free(type);
				return ks_fail(err, "axes.%s.value: a const axis needs an integer value",
					       name);
			}
			axis->value = json_integer_value(v);
			if (axis->value < 0 || axis->value > INT32_MAX) {
				free(type);
				return ks_fail(err, "axes.%s.value: %lld does not fit a 32-bit int >= 0",
					       name, (long long)axis->value);
			}
		} else if (strcmp(type, "var")) {
			int ret = ks_fail(err, "axes.%s.type: expected \"const\" or \"var\", got \"%s\"",
					  name, type);
			free(type);
			return ret;
		}
		free(type);
		if (get_string(spec, "description", where, 0, &axis->description, err) < 0)
			return -1;
	}
	return 0;
}

static int parse_tensors(struct ks_op *op, const json_t *obj, const char *what, struct ks_tensor **out,
			 size_t *count, struct ks_error *err)
{
	const char *name;
	json_t *spec;

	if (!json_is_object(obj) || json_object_size(obj) == 0)
		return ks_fail(err, "%s: expected a non-empty object of name -> {\"shape\", \"dtype\"}",
			       what);
	*out = ks_calloc(json_object_size(obj), sizeof(**out));
	json_object_foreach((json_t *)obj, name, spec)
	{
		struct ks_tensor *t = &(*out)[*count];
		char where[160];
		char *dtype = NULL;
		json_t *shape;
		int ret;

		snprintf(where, sizeof(where), "%s.%s.", what, name);
		if (!ks_is_identifier(name))
			return ks_fail(err, "%s: '%s' is not a valid tensor name (letters, digits, _)", what,
				       name);
		if (ks_op_axis_index(op, name) >= 0 || ks_op_input_index(op, name) >= 0 ||
		    ks_op_output_index(op, name) >= 0)
			return ks_fail(err, "%s.%s: the name is already used by an axis or another tensor",
				       what, name);
		if (!json_is_object(spec))
			return ks_fail(err, "%s.%s: expected an object, got %s", what, name,
				       ks_json_type_word(spec));
		t->name = ks_strdup(name);
		(*count)++;
		if (get_string(spec, "dtype", where, 1, &dtype, err) < 0)
			return -1;
		ret = ks_dtype_parse(dtype, &t->dtype, err);
		free(dtype);
		if (ret < 0) {
			ks_error_prefix(err, "%s.%s.dtype", what, name);
			return -1;
		}
		shape = json_object_get(spec, "shape");
		if (!shape || json_is_null(shape)) {
			t->is_scalar = 1;
		} else if (json_is_array(shape)) {
			t->rank = json_array_size(shape);
			t->shape = ks_calloc(t->rank ? t->rank : 1, sizeof(*t->shape));
			for (size_t i = 0; i < t->rank; i++) {
				json_t *dim = json_array_get(shape, i);

				if (!json_is_string(dim))
					return ks_fail(err, "%s.%s.shape[%zu]: expected an axis name, got %s",
						       what, name, i, ks_json_type_word(dim));
				if (ks_op_axis_index(op, json_string_value(dim)) < 0)
					return ks_fail(err, "%s.%s.shape[%zu]: unknown axis '%s'", what, name,
						       i, json_string_value(dim));
				t->shape[i] = ks_strdup(json_string_value(dim));
			}
		} else {
			return ks_fail(err, "%s.%s.shape: expected a list of axis names or null, got %s",
				       what, name, ks_json_type_word(shape));
		}
		if (get_string(spec, "description", where, 0, &t->description, err) < 0)
			return -1;
	}
	return 0;
}

static int parse_generator(const struct ks_op *op, const struct ks_tensor *input, const json_t *spec,
			   const char *where, struct ks_generator *gen, struct ks_error *err)
{
	char *kind = NULL;
	char field[200];
	size_t i;

	memset(gen, 0, sizeof(*gen));
	if (!json_is_object(spec))
		return ks_fail(err, "%s: expected a generator object {\"kind\": ...}, got %s", where,
			       ks_json_type_word(spec));
	snprintf(field, sizeof(field), "%s.", where);
	if (get_string(spec, "kind", field, 1, &kind, err) < 0)
		return -1;
	for (i = 0; i < ARRAY_SIZE(generator_names); i++)
		if (!strcmp(kind, generator_names[i]))
			break;
	if (i == ARRAY_SIZE(generator_names)) {
		int ret = ks_fail(err,
				  "%s.kind: unknown generator '%s' (expected one of normal, uniform, "
				  "const, indptr, page_permutation)",
				  where, kind);
		free(kind);
		return ret;
	}
	free(kind);
	gen->kind = (enum ks_generator_kind)i;

	switch (gen->kind) {
	case KS_GEN_NORMAL:
		if (get_number(spec, "mean", field, 0.0, &gen->a, err) < 0 ||
		    get_number(spec, "std", field, 1.0, &gen->b, err) < 0)
			return -1;
		if (gen->b < 0)
			return ks_fail(err, "%s.std: must be >= 0, got %g", where, gen->b);
		break;
	case KS_GEN_UNIFORM:
		if (get_number(spec, "low", field, 0.0, &gen->a, err) < 0 ||
		    get_number(spec, "high", field, 1.0, &gen->b, err) < 0)
			return -1;
		if (!(gen->a < gen->b))
			return ks_fail(err, "%s: low (%g) must be below high (%g)", where, gen->a, gen->b);
		break;
	case KS_GEN_CONST:
		if (!json_object_get(spec, "value"))
			return ks_fail(err, "%s.value: missing (a const generator needs a value)", where);
		if (get_number(spec, "value", field, 0.0, &gen->a, err) < 0)
			return -1;
		break;
	case KS_GEN_INDPTR: {
		json_t *lengths = json_object_get(spec, "lengths");
		double min, start;

		if (input->dtype != KS_DTYPE_INT32 || input->rank != 1)
			return ks_fail(err, "%s: an indptr generator needs a 1-D int32 input", where);
		if (get_expr(spec, "total", field, 1, &gen->expr, err) < 0)
			return -1;
		if (check_axis_expr(op, gen->expr, field, err) < 0)
			return -1;
		if (get_number(spec, "min", field, 1.0, &min, err) < 0)
			return -1;
		if (min < 0 || min != (double)(int64_t)min)
			return ks_fail(err, "%s.min: expected an integer >= 0, got %g", where, min);
		gen->min = (int64_t)min;
		/* the first value: entries [0, start) of the indexed array belong to no request */
		if (get_number(spec, "start", field, 0.0, &start, err) < 0)
			return -1;
		if (start < 0 || start > INT32_MAX || start != (double)(int64_t)start)
			return ks_fail(err, "%s.start: expected an integer in [0, 2^31), got %g", where,
				       start);
		gen->start = (int64_t)start;
		if (lengths) {
			if (!json_is_array(lengths) || json_array_size(lengths) == 0)
				return ks_fail(err, "%s.lengths: expected a non-empty list of integers",
					       where);
			gen->n_lengths = json_array_size(lengths);
			gen->lengths = ks_calloc(gen->n_lengths, sizeof(*gen->lengths));
			for (size_t k = 0; k < gen->n_lengths; k++) {
				json_t *len = json_array_get(lengths, k);

				if (!json_is_integer(len) || json_integer_value(len) < 0)
					return ks_fail(err, "%s.lengths[%zu]: expected an integer >= 0",
						       where, k);
				gen->lengths[k] = json_integer_value(len);
			}
		}
		break;
	}
	case KS_GEN_PAGE_PERMUTATION:
		if (input->dtype != KS_DTYPE_INT32 || input->rank != 1)
			return ks_fail(err, "%s: a page_permutation generator needs a 1-D int32 input",
				       where);
		if (get_expr(spec, "pool", field, 1, &gen->expr, err) < 0)
			return -1;
		if (check_axis_expr(op, gen->expr, field, err) < 0)
			return -1;
		break;
	}
	if ((gen->kind == KS_GEN_NORMAL || gen->kind == KS_GEN_UNIFORM) &&
	    (input->dtype == KS_DTYPE_INT32 || input->dtype == KS_DTYPE_INT64))
		return ks_fail(err, "%s: a %s generator makes floating-point values, but %s is %s", where,
			       generator_names[gen->kind], input->name, ks_dtype_name(input->dtype));
	return 0;
}

static void generator_release(struct ks_generator *gen)
{
	free(gen->expr);
	free(gen->lengths);
	memset(gen, 0, sizeof(*gen));
}

static void generator_copy(struct ks_generator *dst, const struct ks_generator *src)
{
	*dst = *src;
	dst->expr = src->expr ? ks_strdup(src->expr) : NULL;
	dst->lengths = NULL;
	if (src->n_lengths) {
		dst->lengths = ks_calloc(src->n_lengths, sizeof(*dst->lengths));
		memcpy(dst->lengths, src->lengths, src->n_lengths * sizeof(*dst->lengths));
	}
}

/* Check what can only be checked with the workload's axis values. */
static int check_workload_generators(const struct ks_op *op, const struct ks_workload *w, const char *where,
				     struct ks_error *err)
{
	for (size_t i = 0; i < op->n_inputs; i++) {
		const struct ks_tensor *t = &op->inputs[i];
		const struct ks_generator *gen = &w->generators[i];
		int64_t numel, value;

		if (ks_tensor_numel(t, w, &numel, err) < 0)
			goto fail;
		if (gen->kind == KS_GEN_INDPTR) {
			int64_t requests = numel - 1, sum = 0;

			if (ks_expr_eval(gen->expr, &w->axes, &value, err) < 0)
				goto fail;
			if (requests < 1)
				return ks_fail(err, "%s: input %s: an indptr needs at least 2 elements",
					       where, t->name);
			if (gen->start > value)
				return ks_fail(
					err, "%s: input %s: start %lld is past the total \"%s\" = %lld",
					where, t->name, (long long)gen->start, gen->expr, (long long)value);
			value -= gen->start; /* the requests' tokens */
			if (gen->lengths) {
				if ((int64_t)gen->n_lengths != requests)
					return ks_fail(err,
						       "%s: input %s: %zu lengths given for %lld requests",
						       where, t->name, gen->n_lengths, (long long)requests);
				for (size_t k = 0; k < gen->n_lengths; k++)
					sum += gen->lengths[k];
				if (sum != value)
					return ks_fail(
						err,
						"%s: input %s: lengths sum to %lld, but total \"%s\" less "
						"start is %lld",
						where, t->name, (long long)sum, gen->expr, (long long)value);
			} else if (requests * gen->min > value) {
				return ks_fail(
					err,
					"%s: input %s: %lld requests of at least %lld cannot sum to %lld",
					where, t->name, (long long)requests, (long long)gen->min,
					(long long)value);
			}
		} else if (gen->kind == KS_GEN_PAGE_PERMUTATION) {
			if (ks_expr_eval(gen->expr, &w->axes, &value, err) < 0)
				goto fail;
			if (value < numel)
				return ks_fail(err,
					       "%s: input %s: pool \"%s\" = %lld is smaller than the %lld "
					       "indices drawn from it",
					       where, t->name, gen->expr, (long long)value, (long long)numel);
		}
	}
	return 0;
fail:
	ks_error_prefix(err, "%s", where);
	return -1;
}

static int parse_workloads(struct ks_op *op, const json_t *list, const char *what, const json_t *derived,
			   struct ks_workload **out, size_t *count, struct ks_error *err)
{
	if (!json_is_array(list) || json_array_size(list) == 0)
		return ks_fail(err, "ksearch.%s: expected a non-empty list of {\"id\", \"axes\"}", what);
	*out = ks_calloc(json_array_size(list), sizeof(**out));
	for (size_t i = 0; i < json_array_size(list); i++) {
		const json_t *spec = json_array_get(list, i);
		struct ks_workload *w = &(*out)[*count];
		char where[160];
		const char *name;
		json_t *value, *axes, *gens;

		snprintf(where, sizeof(where), "ksearch.%s[%zu]", what, i);
		if (!json_is_object(spec))
			return ks_fail(err, "%s: expected an object, got %s", where, ks_json_type_word(spec));
		ks_env_init(&w->axes);
		w->generators = ks_calloc(op->n_inputs, sizeof(*w->generators));
		(*count)++;
		{
			char field[170];

			snprintf(field, sizeof(field), "%s.", where);
			if (get_string(spec, "id", field, 1, &w->id, err) < 0)
				return -1;
		}
		if (!*w->id || strchr(w->id, ' '))
			return ks_fail(err, "%s.id: \"%s\" is not a usable id (non-empty, no spaces)", where,
				       w->id);
		for (size_t k = 0; k < *count - 1; k++)
			if (!strcmp((*out)[k].id, w->id))
				return ks_fail(err, "%s.id: \"%s\" is used twice", where, w->id);
		snprintf(where, sizeof(where), "ksearch.%s \"%s\"", what, w->id);

		for (size_t a = 0; a < op->n_axes; a++)
			if (op->axes[a].is_const &&
			    ks_env_set(&w->axes, op->axes[a].name, op->axes[a].value, err) < 0)
				return -1;
		axes = json_object_get(spec, "axes");
		if (!json_is_object(axes))
			return ks_fail(err, "%s.axes: expected an object of var axis -> integer", where);
		json_object_foreach(axes, name, value)
		{
			int a = ks_op_axis_index(op, name);

			if (a < 0)
				return ks_fail(err, "%s.axes.%s: unknown axis", where, name);
			if (op->axes[a].is_const)
				return ks_fail(
					err,
					"%s.axes.%s: the axis is const (%lld); only var axes take values",
					where, name, (long long)op->axes[a].value);
			if (!json_is_integer(value) || json_integer_value(value) < 0 ||
			    json_integer_value(value) > INT32_MAX)
				return ks_fail(err, "%s.axes.%s: expected an integer in [0, 2^31)", where,
					       name);
			if (ks_env_set(&w->axes, name, json_integer_value(value), err) < 0)
				return -1;
		}
		json_object_foreach((json_t *)derived, name, value)
		{
			int64_t v;

			if (ks_env_get(&w->axes, name, &v))
				continue; /* the workload said it explicitly */
			if (ks_expr_eval(json_string_value(value), &w->axes, &v, err) < 0) {
				ks_error_prefix(err, "%s: ksearch.derived_axes.%s", where, name);
				return -1;
			}
			if (v < 0 || v > INT32_MAX)
				return ks_fail(err,
					       "%s: derived axis %s = %lld does not fit a 32-bit int >= 0",
					       where, name, (long long)v);
			if (ks_env_set(&w->axes, name, v, err) < 0)
				return -1;
		}
		for (size_t a = 0; a < op->n_axes; a++) {
			int64_t v;

			if (!ks_env_get(&w->axes, op->axes[a].name, &v))
				return ks_fail(err,
					       "%s: var axis '%s' has no value (give it in axes or in "
					       "ksearch.derived_axes)",
					       where, op->axes[a].name);
		}

		for (size_t k = 0; k < op->n_inputs; k++)
			generator_copy(&w->generators[k], &op->inputs[k].generator);
		gens = json_object_get(spec, "generators");
		if (gens) {
			if (!json_is_object(gens))
				return ks_fail(err, "%s.generators: expected an object of input -> generator",
					       where);
			json_object_foreach(gens, name, value)
			{
				int k = ks_op_input_index(op, name);
				char field[220];

				if (k < 0)
					return ks_fail(err, "%s.generators.%s: not an input of the op", where,
						       name);
				snprintf(field, sizeof(field), "%s.generators.%s", where, name);
				generator_release(&w->generators[k]);
				if (parse_generator(op, &op->inputs[k], value, field, &w->generators[k],
						    err) < 0)
					return -1;
			}
		}
		if (check_workload_generators(op, w, where, err) < 0)
			return -1;
	}
	return 0;
}

static int parse_grid(struct ks_op *op, const json_t *grid, struct ks_error *err)
{
	if (!json_is_array(grid) || json_array_size(grid) == 0)
		return ks_fail(err, "ksearch.grid: expected a non-empty list of {\"descriptor\", \"edges\"}");
	op->grid = ks_calloc(json_array_size(grid), sizeof(*op->grid));
	for (size_t i = 0; i < json_array_size(grid); i++) {
		const json_t *spec = json_array_get(grid, i);
		struct ks_grid_axis *g = &op->grid[op->n_grid];
		json_t *desc, *edges;

		if (!json_is_object(spec))
			return ks_fail(err, "ksearch.grid[%zu]: expected an object", i);
		op->n_grid++;
		desc = json_object_get(spec, "descriptor");
		if (!json_is_string(desc))
			return ks_fail(err, "ksearch.grid[%zu].descriptor: expected a descriptor name", i);
		if (ks_descriptor_parse(json_string_value(desc), &g->descriptor, err) < 0) {
			ks_error_prefix(err, "ksearch.grid[%zu].descriptor", i);
			return -1;
		}
		for (size_t k = 0; k < i; k++)
			if (op->grid[k].descriptor == g->descriptor)
				return ks_fail(err, "ksearch.grid[%zu]: descriptor %s appears twice", i,
					       json_string_value(desc));
		edges = json_object_get(spec, "edges");
		if (!json_is_array(edges) || json_array_size(edges) < 2)
			return ks_fail(err,
				       "ksearch.grid[%zu].edges: expected at least two ascending numbers", i);
		g->n_edges = json_array_size(edges);
		g->edges = ks_calloc(g->n_edges, sizeof(*g->edges));
		for (size_t k = 0; k < g->n_edges; k++) {
			json_t *e = json_array_get(edges, k);

			if (!json_is_number(e))
				return ks_fail(err, "ksearch.grid[%zu].edges[%zu]: expected a number", i, k);
			g->edges[k] = json_number_value(e);
			if (k && !(g->edges[k] > g->edges[k - 1]))
				return ks_fail(
					err, "ksearch.grid[%zu].edges: not ascending at [%zu] (%g after %g)",
					i, k, g->edges[k], g->edges[k - 1]);
		}
	}
	return 0;
}

/*
 * Which inputs get new values for every timed call: the ones named in
 * ksearch.fresh_per_call, or without it every input whose values come from
 * a normal or uniform generator.  Structure (indptr, page permutations) and
 * constants never change between timed calls.
 */
static int parse_fresh(struct ks_op *op, const json_t *list, struct ks_error *err)
{
	size_t i, n_fresh = 0;
	json_t *item;

	for (size_t k = 0; k < op->n_inputs; k++) {
		enum ks_generator_kind kind = op->inputs[k].generator.kind;

		op->inputs[k].fresh_per_call = !list && (kind == KS_GEN_NORMAL || kind == KS_GEN_UNIFORM);
	}
	if (!list)
		return 0;
	if (!json_is_array(list))
		return ks_fail(err, "ksearch.fresh_per_call: expected a list of input names");
	json_array_foreach(list, i, item)
	{
		const char *name = json_string_value(item);
		int k = name ? ks_op_input_index(op, name) : -1;
		enum ks_generator_kind kind;

		if (k < 0)
			return ks_fail(err, "ksearch.fresh_per_call[%zu]: %s is not an input of the op", i,
				       name ? name : "(not a string)");
		kind = op->inputs[k].generator.kind;
		if (kind != KS_GEN_NORMAL && kind != KS_GEN_UNIFORM)
			return ks_fail(err,
				       "ksearch.fresh_per_call[%zu]: %s is made by the generator %s; only "
				       "inputs with "
				       "normal or uniform values can be new for each call",
				       i, name, ks_generator_kind_name(kind));
		op->inputs[k].fresh_per_call = 1;
		n_fresh++;
	}
	if (!n_fresh)
		return ks_fail(err, "ksearch.fresh_per_call: name at least one input (or leave it out: then "
				    "every normal or uniform input is new for each call)");
	return 0;
}

static int parse_tolerances(struct ks_op *op, const json_t *tol, struct ks_error *err)

{
	const char *name;
	json_t *spec;

	if (!json_is_object(tol))
		return ks_fail(err,
			       "ksearch.tolerances: expected an object of output -> {\"atol\", \"rtol\"}");
	json_object_foreach((json_t *)tol, name, spec)
	{
		int k = ks_op_output_index(op, name);
		char where[160];

		if (k < 0)
			return ks_fail(err, "ksearch.tolerances.%s: not an output of the op", name);
		snprintf(where, sizeof(where), "ksearch.tolerances.%s.", name);
		if (!json_is_object(spec))
			return ks_fail(err, "ksearch.tolerances.%s: expected {\"atol\": x, \"rtol\": y}",
				       name);
		if (!json_object_get(spec, "atol") || !json_object_get(spec, "rtol"))
			return ks_fail(err, "ksearch.tolerances.%s: needs both atol and rtol", name);
		if (get_number(spec, "atol", where, 0, &op->outputs[k].atol, err) < 0 ||
		    get_number(spec, "rtol", where, 0, &op->outputs[k].rtol, err) < 0)
			return -1;
		if (op->outputs[k].atol < 0 || op->outputs[k].rtol < 0)
			return ks_fail(err, "ksearch.tolerances.%s: tolerances must be >= 0", name);
	}
	for (size_t k = 0; k < op->n_outputs; k++)
		if (!json_object_get(tol, op->outputs[k].name))
			return ks_fail(err, "ksearch.tolerances: output %s has no tolerance",
				       op->outputs[k].name);
	return 0;
}

static int find_seeds(struct ks_op *op, struct ks_error *err)
{
	char *dir = ks_path_join(op->dir, "seeds");
	struct dirent *ent;
	DIR *d = opendir(dir);
	size_t alloc = 0;
	int ret = 0;

	if (!d) {
		if (errno != ENOENT)
			ret = ks_fail(err, "%s: %s", dir, strerror(errno));
		free(dir);
		return ret;
	}
	while ((ent = readdir(d))) {
		size_t len = strlen(ent->d_name);

		if (len < 4 || strcmp(ent->d_name + len - 3, ".cu"))
			continue;
		KS_ALLOC_GROW(op->seed_paths, op->n_seeds + 1, alloc);
		op->seed_paths[op->n_seeds++] = ks_path_join(dir, ent->d_name);
	}
	closedir(d);
	free(dir);
	KS_QSORT(op->seed_paths, op->n_seeds, ks_strcmp_ptr);
	return 0;
}

int ks_op_load(const char *dir, struct ks_op *op, struct ks_error *err)
{
	char *path = ks_path_join(dir, "op.json");
	json_error_t jerr;
	json_t *root = NULL, *ext, *derived, *v, *item;
	const char *name;
	int ret = -1;

	memset(op, 0, sizeof(*op));
	op->dir = ks_strdup(dir);
	op->key = ks_strdup(ks_basename(dir));
	root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		if (jerr.line < 0)
			ks_fail(err, "%s: %s", path, jerr.text);
		else
			ks_fail(err, "%s:%d:%d: malformed JSON: %s", path, jerr.line, jerr.column, jerr.text);
		goto cleanup;
	}
	if (!json_is_object(root)) {
		ks_fail(err, "top level: expected an object, got %s", ks_json_type_word(root));
		goto fail;
	}
	if (get_string(root, "name", "", 1, &op->name, err) < 0 ||
	    get_string(root, "op_type", "", 0, &op->op_type, err) < 0 ||
	    get_string(root, "description", "", 0, &op->description, err) < 0)
		goto fail;
	if (parse_axes(op, json_object_get(root, "axes"), err) < 0 ||
	    parse_tensors(op, json_object_get(root, "inputs"), "inputs", &op->inputs, &op->n_inputs, err) <
		    0 ||
	    parse_tensors(op, json_object_get(root, "outputs"), "outputs", &op->outputs, &op->n_outputs,
			  err) < 0)
		goto fail;

	ext = json_object_get(root, "ksearch");
	if (!json_is_object(ext)) {
		ks_fail(err, "ksearch: missing; ksearch's fields (generators, workloads, check_workloads, "
			     "tolerances, min_bytes, flops, grid) go in a top-level \"ksearch\" object");
		goto fail;
	}
	v = json_object_get(ext, "todo");
	if (json_array_size(v)) {
		struct ks_strbuf todo;
		size_t i;

		ks_strbuf_init(&todo);
		json_array_foreach(v, i, item) ks_strbuf_addf(
			&todo, "%s%s", i ? ", " : "", json_is_string(item) ? json_string_value(item) : "?");
		ks_fail(err,
			"unfinished: %zu TODO%s in ksearch.todo: %s (fill them in op.json and reference.cu, "
			"then delete ksearch.todo; the README says how)",
			json_array_size(v), json_array_size(v) == 1 ? "" : "s", todo.buf);
		ks_strbuf_release(&todo);
		goto fail;
	}
	if (get_string(ext, "summary", "ksearch.", 0, &op->summary, err) < 0)
		goto fail;
	derived = json_object_get(ext, "derived_axes");
	if (derived) {
		if (!json_is_object(derived)) {
			ks_fail(err, "ksearch.derived_axes: expected an object of axis -> expression");
			goto fail;
		}
		json_object_foreach(derived, name, v)
		{
			char where[160];
			int a = ks_op_axis_index(op, name);

			if (a < 0 || op->axes[a].is_const) {
				ks_fail(err, "ksearch.derived_axes.%s: not a var axis of the op", name);
				goto fail;
			}
			if (!json_is_string(v)) {
				ks_fail(err, "ksearch.derived_axes.%s: expected an expression string", name);
				goto fail;
			}
			snprintf(where, sizeof(where), "ksearch.derived_axes.%s", name);
			if (check_axis_expr(op, json_string_value(v), where, err) < 0)
				goto fail;
		}
	}

	v = json_object_get(ext, "generators");
	if (!json_is_object(v)) {
		ks_fail(err, "ksearch.generators: expected an object of input -> generator");
		goto fail;
	}
	json_object_foreach(v, name, item)
	{
		if (ks_op_input_index(op, name) < 0) {
			ks_fail(err, "ksearch.generators.%s: not an input of the op", name);
			goto fail;
		}
	}
	for (size_t i = 0; i < op->n_inputs; i++) {
		json_t *spec = json_object_get(v, op->inputs[i].name);
		char where[160];

		if (!spec) {
			ks_fail(err, "ksearch.generators: input %s has no generator", op->inputs[i].name);
			goto fail;
		}
		snprintf(where, sizeof(where), "ksearch.generators.%s", op->inputs[i].name);
		if (parse_generator(op, &op->inputs[i], spec, where, &op->inputs[i].generator, err) < 0)
			goto fail;
		if (op->inputs[i].is_scalar && op->inputs[i].generator.kind != KS_GEN_CONST &&
		    op->inputs[i].generator.kind != KS_GEN_NORMAL &&
		    op->inputs[i].generator.kind != KS_GEN_UNIFORM) {
			ks_fail(err, "%s: a scalar input takes const, normal or uniform", where);
			goto fail;
		}
	}
	if (parse_fresh(op, json_object_get(ext, "fresh_per_call"), err) < 0 ||
	    parse_tolerances(op, json_object_get(ext, "tolerances"), err) < 0 ||
	    get_expr(ext, "min_bytes", "ksearch.", 1, &op->min_bytes, err) < 0 ||
	    check_axis_expr(op, op->min_bytes, "ksearch.min_bytes", err) < 0 ||
	    get_expr(ext, "flops", "ksearch.", 1, &op->flops, err) < 0 ||
	    check_axis_expr(op, op->flops, "ksearch.flops", err) < 0 ||
	    parse_grid(op, json_object_get(ext, "grid"), err) < 0)
		goto fail;
	if (!derived)
		derived = json_object();
	else
		json_incref(derived);
	ret = parse_workloads(op, json_object_get(ext, "workloads"), "workloads", derived, &op->workloads,
			      &op->n_workloads, err);
	if (!ret)
		ret = parse_workloads(op, json_object_get(ext, "check_workloads"), "check_workloads", derived,
				      &op->check_workloads, &op->n_check_workloads, err);
	json_decref(derived);
	if (ret < 0)
		goto fail;
	for (size_t i = 0; i < op->n_workloads; i++) {
		int64_t bytes, flops;

		if (ks_expr_eval(op->min_bytes, &op->workloads[i].axes, &bytes, err) < 0 ||
		    ks_expr_eval(op->flops, &op->workloads[i].axes, &flops, err) < 0) {
			ks_error_prefix(err, "workload \"%s\"", op->workloads[i].id);
			goto fail;
		}
		if (bytes <= 0) {
			ks_fail(err, "ksearch.min_bytes: %lld bytes for workload \"%s\"; it must be positive",
				(long long)bytes, op->workloads[i].id);
			goto fail;
		}
	}
	for (size_t i = 0; i < op->n_check_workloads; i++) {
		if (ks_op_workload(op, op->check_workloads[i].id) != &op->check_workloads[i]) {
			ks_fail(err, "ksearch.check_workloads: id \"%s\" is also a benchmark workload's",
				op->check_workloads[i].id);
			goto fail;
		}
	}

	ret = -1;
	op->reference_path = ks_path_join(dir, "reference.cu");
	if (access(op->reference_path, R_OK)) {
		ks_fail(err, "%s: %s (every operator needs a reference kernel)", op->reference_path,
			strerror(errno));
		goto cleanup;
	}
	if (find_seeds(op, err) < 0)
		goto cleanup;
	ret = 0;
	goto cleanup;
fail:
	ret = -1;
	ks_error_prefix(err, "%s", path);
cleanup:
	json_decref(root);
	free(path);
	if (ret < 0)
		ks_op_release(op);
	return ret;
}

static void workloads_release(struct ks_workload *list, size_t count, size_t n_inputs)
{
	for (size_t i = 0; i < count; i++) {
		free(list[i].id);
		ks_env_release(&list[i].axes);
		if (list[i].generators)
			for (size_t k = 0; k < n_inputs; k++)
				generator_release(&list[i].generators[k]);
		free(list[i].generators);
	}
	free(list);
}

static void tensors_release(struct ks_tensor *list, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		free(list[i].name);
		for (size_t k = 0; k < list[i].rank; k++)
			free(list[i].shape[k]);
		free(list[i].shape);
		free(list[i].description);
		generator_release(&list[i].generator);
	}
	free(list);
}

void ks_op_release(struct ks_op *op)
{
	if (!op)
		return;
	free(op->dir);
	free(op->key);
	free(op->name);
	free(op->op_type);
	free(op->description);
	free(op->summary);
	for (size_t i = 0; i < op->n_axes; i++) {
		free(op->axes[i].name);
		free(op->axes[i].description);
	}
	free(op->axes);
	workloads_release(op->workloads, op->n_workloads, op->n_inputs);
	workloads_release(op->check_workloads, op->n_check_workloads, op->n_inputs);
	tensors_release(op->inputs, op->n_inputs);
	tensors_release(op->outputs, op->n_outputs);
	free(op->min_bytes);
	free(op->flops);
	for (size_t i = 0; i < op->n_grid; i++)
		free(op->grid[i].edges);
	free(op->grid);
	free(op->reference_path);
	for (size_t i = 0; i < op->n_seeds; i++)
		free(op->seed_paths[i]);
	free(op->seed_paths);
	memset(op, 0, sizeof(*op));
}

int ks_op_axis_index(const struct ks_op *op, const char *name)
{
	for (size_t i = 0; i < op->n_axes; i++)
		if (op->axes[i].name && !strcmp(op->axes[i].name, name))
			return (int)i;
	return -1;
}

int ks_op_input_index(const struct ks_op *op, const char *name)
{
	for (size_t i = 0; i < op->n_inputs; i++)
		if (op->inputs[i].name && !strcmp(op->inputs[i].name, name))
			return (int)i;
	return -1;
}

int ks_op_output_index(const struct ks_op *op, const char *name)
{
	for (size_t i = 0; i < op->n_outputs; i++)
		if (op->outputs[i].name && !strcmp(op->outputs[i].name, name))
			return (int)i;
	return -1;
}

int ks_tensor_numel(const struct ks_tensor *t, const struct ks_workload *w, int64_t *numel,
		    struct ks_error *err)
{
	int64_t n = 1;

	for (size_t i = 0; i < t->rank; i++) {
		int64_t dim;

		if (!ks_env_get(&w->axes, t->shape[i], &dim))
			return ks_fail(err, "tensor %s: axis %s has no value in workload %s", t->name,
				       t->shape[i], w->id);
		if (__builtin_mul_overflow(n, dim, &n))
			return ks_fail(err, "tensor %s: element count overflows in workload %s", t->name,
				       w->id);
	}
	*numel = n;
	return 0;
}

const struct ks_workload *ks_op_workload(const struct ks_op *op, const char *id)
{
	for (size_t i = 0; i < op->n_workloads; i++)
		if (!strcmp(op->workloads[i].id, id))
			return &op->workloads[i];
	for (size_t i = 0; i < op->n_check_workloads; i++)
		if (!strcmp(op->check_workloads[i].id, id))
			return &op->check_workloads[i];
	return NULL;
}

/* ---- finding operators ---- */

static int is_op_dir(const char *dir)
{
	char *path = ks_path_join(dir, "op.json");
	int ok = access(path, R_OK) == 0;

	free(path);
	return ok;
}

/* The folders searched for operators, most specific first. */
static size_t search_roots(char **roots, size_t max)
{
	const char *env = getenv("KSEARCH_OPERATORS");
	char *exe_dir = ks_exe_dir();
	size_t n = 0;

	if (env && *env && n < max)
		roots[n++] = ks_strdup(env);
	if (n < max)
		roots[n++] = ks_strdup("operators");
	if (exe_dir) {
		if (n < max)
			roots[n++] = ks_asprintf("%s/../operators", exe_dir);
		if (n < max)
			roots[n++] = ks_asprintf("%s/../share/ksearch/operators", exe_dir);
		free(exe_dir);
	}
	return n;
}

int ks_op_dirs(char ***dirs, size_t *count, struct ks_error *err)
{
	const char *env = getenv("KSEARCH_OPERATORS");
	char *roots[4];
	size_t n_roots, alloc = 0;
	DIR *named;

	*dirs = NULL;
	*count = 0;
	/* a folder the user named must be there: silently looking elsewhere would hide the mistake */
	if (env && *env) {
		if (!(named = opendir(env)))
			return ks_fail(
				err,
				"KSEARCH_OPERATORS names '%s', which cannot be read (%s); point it at a "
				"folder of operator folders, or unset it to use ./operators and the "
				"operators beside the ksearch binary",
				env, strerror(errno));
		closedir(named);
	}
	n_roots = search_roots(roots, 4);
	for (size_t r = 0; r < n_roots; r++) {
		DIR *d = opendir(roots[r]);
		struct dirent *ent;

		if (!d)
			continue;
		while ((ent = readdir(d))) {
			char *dir;
			int seen = 0;

			if (ent->d_name[0] == '.')
				continue;
			for (size_t k = 0; k < *count; k++)
				if (!strcmp(ks_basename((*dirs)[k]), ent->d_name))
					seen = 1;
			if (seen)
				continue;
			dir = ks_path_join(roots[r], ent->d_name);
			if (!is_op_dir(dir)) {
				free(dir);
				continue;
			}
			KS_ALLOC_GROW(*dirs, *count + 1, alloc);
			(*dirs)[(*count)++] = dir;
		}
		closedir(d);
	}
	for (size_t r = 0; r < n_roots; r++)
		free(roots[r]);
	KS_QSORT(*dirs, *count, ks_strcmp_basename_ptr);
	return 0;
}

void ks_op_dirs_free(char **dirs, size_t count)
{
	for (size_t i = 0; i < count; i++)
		free(dirs[i]);
	free(dirs);
}

int ks_op_find(const char *key, struct ks_op *op, struct ks_error *err)
{
	char **dirs;
	size_t count;
	struct ks_strbuf known;
	const char *suggestion = NULL;
	int ret;

	memset(op, 0, sizeof(*op));
	if (strchr(key, '/'))
		return ks_op_load(key, op, err);
	if (ks_op_dirs(&dirs, &count, err) < 0)
		return -1;
	for (size_t i = 0; i < count; i++) {
		if (!strcmp(ks_basename(dirs[i]), key)) {
			ret = ks_op_load(dirs[i], op, err);
			ks_op_dirs_free(dirs, count);
			return ret;
		}
	}
	ks_strbuf_init(&known);
	for (size_t i = 0; i < count; i++) {
		const char *name = ks_basename(dirs[i]);

		ks_strbuf_addf(&known, "%s%s", i ? ", " : "", name);
		if (!suggestion && ks_is_close(key, name))
			suggestion = name;
	}
	if (!count)
		ret = ks_fail(err,
			      "unknown operator '%s': no operators found (looked in $KSEARCH_OPERATORS, "
			      "./operators and the folder beside the ksearch binary)",
			      key);
	else if (suggestion)
		ret = ks_fail(err, "unknown operator '%s'; did you mean '%s'? (known: %s; see `ksearch ops`)",
			      key, suggestion, known.buf);
	else
		ret = ks_fail(err, "unknown operator '%s' (known: %s; see `ksearch ops`)", key, known.buf);
	ks_strbuf_release(&known);
	ks_op_dirs_free(dirs, count);
	return ret;
}
