/*
 * export_torch.c - an export as PyTorch sees it: a C++ binding of the
 * plain launcher (NAME_launch() of export.c) that takes torch tensors, and
 * the Python package around it (export-best --format torch).  The binding is
 * also what the FlashInfer-Bench Solution embeds (export_fib.c).
 *
 * Every var axis is read from the first tensor whose shape names it, every
 * other dimension is checked against the axes, and the launcher's errors
 * become Python exceptions, so a wrong call is refused before a kernel can
 * read out of bounds.
 */
#include "ksearch/export/export.h"
#include "ksearch/archive/record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/base/util.h"

#ifndef KS_VERSION
#define KS_VERSION "unknown"
#endif

/* torch's extension build hides the 16-bit float operators the kernels use: undo it first. */
static const char cuda_prologue[] =
	"/* torch's extension build defines these; the kernels below use what they hide */\n"
	"#undef __CUDA_NO_HALF_OPERATORS__\n"
	"#undef __CUDA_NO_HALF_CONVERSIONS__\n"
	"#undef __CUDA_NO_BFLOAT16_CONVERSIONS__\n"
	"#undef __CUDA_NO_HALF2_OPERATORS__\n"
	"#undef __CUDA_NO_BFLOAT162_OPERATORS__\n\n";

static const char *cxx_type(enum ks_dtype dtype)
{
	switch (dtype) {
	case KS_DTYPE_BFLOAT16:
		return "__nv_bfloat16";
	case KS_DTYPE_FLOAT16:
		return "__half";
	case KS_DTYPE_FLOAT32:
		return "float";
	case KS_DTYPE_INT32:
		return "int32_t";
	case KS_DTYPE_INT64:
		return "int64_t";
	}
	return "void";
}

static const char *aten_type(enum ks_dtype dtype)
{
	switch (dtype) {
	case KS_DTYPE_BFLOAT16:
		return "at::kBFloat16";
	case KS_DTYPE_FLOAT16:
		return "at::kHalf";
	case KS_DTYPE_FLOAT32:
		return "at::kFloat";
	case KS_DTYPE_INT32:
		return "at::kInt";
	case KS_DTYPE_INT64:
		return "at::kLong";
	}
	return "at::kByte";
}

static const char *torch_dtype(enum ks_dtype dtype)
{
	switch (dtype) {
	case KS_DTYPE_BFLOAT16:
		return "torch.bfloat16";
	case KS_DTYPE_FLOAT16:
		return "torch.float16";
	case KS_DTYPE_FLOAT32:
		return "torch.float32";
	case KS_DTYPE_INT32:
		return "torch.int32";
	case KS_DTYPE_INT64:
		return "torch.int64";
	}
	return "torch.uint8";
}

static int is_float(enum ks_dtype dtype)
{
	return dtype != KS_DTYPE_INT32 && dtype != KS_DTYPE_INT64;
}

static const struct ks_tensor *tensor_at(const struct ks_op *op, size_t i)
{
	return i < op->n_inputs ? &op->inputs[i] : &op->outputs[i - op->n_inputs];
}

int ks_export_axis_source(const struct ks_op *op, size_t axis, size_t *tensor, size_t *dim)
{
	for (size_t i = 0; i < op->n_inputs + op->n_outputs; i++) {
		const struct ks_tensor *t = tensor_at(op, i);

		for (size_t d = 0; d < t->rank; d++)
			if (!strcmp(t->shape[d], op->axes[axis].name)) {
				*tensor = i;
				*dim = d;
				return 0;
			}
	}
	return -1;
}

/* Every var axis must be readable from a tensor's shape. */
static int check_axes(const struct ks_op *op, struct ks_error *err)
{
	for (size_t a = 0; a < op->n_axes; a++) {
		size_t t, d;

		if (!op->axes[a].is_const && ks_export_axis_source(op, a, &t, &d) < 0)
			return ks_fail(err,
				       "op %s: var axis '%s' is in no tensor's shape, so a binding cannot "
				       "read it from its arguments",
				       op->key, op->axes[a].name);
	}
	return 0;
}

static void add_binding_args(const struct ks_op *op, struct ks_strbuf *sb)
{
	for (size_t i = 0; i < op->n_inputs + op->n_outputs; i++) {
		const struct ks_tensor *t = tensor_at(op, i);

		if (t->is_scalar)
			ks_strbuf_addf(sb, "%s%s %s", i ? ", " : "",
				       is_float(t->dtype) ? "double" : "int64_t", t->name);
		else
			ks_strbuf_addf(sb, "%sconst torch::Tensor &%s", i ? ", " : "", t->name);
	}
}

int ks_export_torch_binding(const struct ks_op *op, const char *name, int torch_library, struct ks_strbuf *sb,
			    struct ks_error *err)
{
	const struct ks_tensor *first = NULL;
	size_t n_var = 0;

	if (check_axes(op, err) < 0)
		return -1;
	for (size_t i = 0; i < op->n_inputs + op->n_outputs && !first; i++)
		if (!tensor_at(op, i)->is_scalar)
			first = tensor_at(op, i);
	if (!first)
		return ks_fail(err, "op %s has no tensor argument: a binding needs one to know the device",
			       op->key);
	ks_strbuf_addf(sb,
		       "/*\n"
		       " * %s_binding.cpp - %s_launch() (%s.h) for PyTorch tensors, made by ksearch %s.\n"
		       " *\n"
		       " * run(",
		       name, name, name, KS_VERSION);
	for (size_t i = 0; i < op->n_inputs + op->n_outputs; i++)
		ks_strbuf_addf(sb, "%s%s", i ? ", " : "", tensor_at(op, i)->name);
	ks_strbuf_addf(
		sb,
		") takes the inputs of the definition %s\n"
		" * in order, then its outputs, which it fills (destination-passing style).  Tensors must "
		"be\n"
		" * contiguous, on one CUDA device, of the definition's dtype and shape; the sizes\n"
		" * (var axes) are read from the shapes and checked.  The kernels run on the current\n"
		" * stream; the workspace comes from PyTorch's caching allocator, so the call can be\n"
		" * captured in a CUDA graph.\n"
		" */\n"
		"#include <climits>\n\n"
		"#include <ATen/cuda/CUDAContext.h>\n"
		"#include <c10/cuda/CUDAGuard.h>\n"
		"#include <torch/extension.h>\n\n"
		"#include \"%s.h\"\n\n"
		"namespace {\n\n"
		"void ksx_check(const torch::Tensor &t, const char *name, at::ScalarType dtype, int64_t "
		"rank,\n"
		"\t       const torch::Device &device)\n"
		"{\n"
		"\tTORCH_CHECK(t.is_cuda(), name, \": expected a CUDA tensor, got one on \", t.device());\n"
		"\tTORCH_CHECK(t.device() == device, name, \": expected a tensor on \", device, \", got \",\n"
		"\t\t    t.device());\n"
		"\tTORCH_CHECK(t.scalar_type() == dtype, name, \": expected dtype \", dtype, \", got \",\n"
		"\t\t    t.scalar_type());\n"
		"\tTORCH_CHECK(t.dim() == rank, name, \": expected \", rank, \" dimensions, got \", "
		"t.dim());\n"
		"\tTORCH_CHECK(t.is_contiguous(), name, \": expected a contiguous (row-major) tensor\");\n"
		"}\n\n"
		"void ksx_dim(const torch::Tensor &t, const char *name, int64_t d, const char *axis, int64_t "
		"value)\n"
		"{\n"
		"\tTORCH_CHECK(t.size(d) == value, name, \": dimension \", d, \" (\", axis, \") is \", "
		"t.size(d),\n"
		"\t\t    \", expected \", value);\n"
		"}\n\n"
		"} // namespace\n\n"
		"void %s_run(",
		op->name, name, name);
	add_binding_args(op, sb);
	ks_strbuf_addf(sb, ")\n{\n\tconst torch::Device device = %s.device();\n\n", first->name);
	for (size_t i = 0; i < op->n_inputs + op->n_outputs; i++) {
		const struct ks_tensor *t = tensor_at(op, i);

		if (!t->is_scalar)
			ks_strbuf_addf(sb, "\tksx_check(%s, \"%s\", %s, %zu, device);\n", t->name, t->name,
				       aten_type(t->dtype), t->rank);
	}
	ks_strbuf_adds(sb, "\n");
	for (size_t a = 0; a < op->n_axes; a++) {
		size_t ti, d;

		if (op->axes[a].is_const)
			continue;
		ks_export_axis_source(op, a, &ti, &d);
		ks_strbuf_addf(
			sb,
			"\tconst int64_t %s = %s.size(%zu);\n"
			"\tTORCH_CHECK(%s <= INT_MAX, \"%s: \", %s, \" is more than the kernels take\");\n",
			op->axes[a].name, tensor_at(op, ti)->name, d, op->axes[a].name, op->axes[a].name,
			op->axes[a].name);
		n_var++;
	}
	for (size_t i = 0; i < op->n_inputs + op->n_outputs; i++) {
		const struct ks_tensor *t = tensor_at(op, i);

		for (size_t d = 0; d < t->rank; d++) {
			int a = ks_op_axis_index(op, t->shape[d]);

			if (a < 0)
				continue;
			if (op->axes[a].is_const)
				ks_strbuf_addf(sb, "\tksx_dim(%s, \"%s\", %zu, \"%s\", %lld);\n", t->name,
					       t->name, d, t->shape[d], (long long)op->axes[a].value);
			else
				ks_strbuf_addf(sb, "\tksx_dim(%s, \"%s\", %zu, \"%s\", %s);\n", t->name,
					       t->name, d, t->shape[d], t->shape[d]);
		}
	}
	ks_strbuf_addf(sb,
		       "\n\tconst c10::cuda::CUDAGuard guard(device);\n"
		       "\tconst size_t workspace_bytes = %s_workspace_bytes(",
		       name);
	for (size_t a = 0, n = 0; a < op->n_axes; a++)
		if (!op->axes[a].is_const)
			ks_strbuf_addf(sb, "%s(int)%s", n++ ? ", " : "", op->axes[a].name);
	ks_strbuf_addf(sb,
		       ");\n"
		       "\ttorch::Tensor workspace;\n\n"
		       "\tif (workspace_bytes > 0)\n"
		       "\t\tworkspace = torch::empty({(int64_t)workspace_bytes},\n"
		       "\t\t\t\t\t torch::TensorOptions().dtype(torch::kUInt8).device(device));\n"
		       "\tconst cudaError_t err = %s_launch(",
		       name);
	for (size_t i = 0; i < op->n_inputs + op->n_outputs; i++) {
		const struct ks_tensor *t = tensor_at(op, i);
		int is_out = i >= op->n_inputs;

		ks_strbuf_adds(sb, "\n\t\t");
		if (!t->is_scalar)
			ks_strbuf_addf(sb, "static_cast<%s%s *>(%s.data_ptr()),", is_out ? "" : "const ",
				       cxx_type(t->dtype), t->name);
		else if (t->dtype == KS_DTYPE_BFLOAT16)
			ks_strbuf_addf(sb, "__float2bfloat16((float)%s),", t->name);
		else if (t->dtype == KS_DTYPE_FLOAT16)
			ks_strbuf_addf(sb, "__float2half((float)%s),", t->name);
		else
			ks_strbuf_addf(sb, "(%s)%s,", cxx_type(t->dtype), t->name);
	}
	if (n_var) {
		ks_strbuf_adds(sb, "\n\t\t");
		for (size_t a = 0, n = 0; a < op->n_axes; a++)
			if (!op->axes[a].is_const)
				ks_strbuf_addf(sb, "%s(int)%s", n++ ? ", " : "", op->axes[a].name);
		ks_strbuf_adds(sb, ",");
	}
	ks_strbuf_addf(sb,
		       "\n\t\tworkspace_bytes ? workspace.data_ptr() : nullptr, workspace_bytes,\n"
		       "\t\tat::cuda::getCurrentCUDAStream());\n\n"
		       "\tTORCH_CHECK(err == cudaSuccess, \"%s_launch: \", cudaGetErrorString(err));\n"
		       "}\n\n"
		       "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)\n{\n"
		       "\tm.def(\"run\", &%s_run, \"%s in destination-passing style (see the top of "
		       "%s_binding.cpp)\"",
		       name, name, op->name, name);
	for (size_t i = 0; i < op->n_inputs + op->n_outputs; i++)
		ks_strbuf_addf(sb, ",\n\t      pybind11::arg(\"%s\")", tensor_at(op, i)->name);
	ks_strbuf_adds(sb, ");\n}\n");
	if (torch_library) {
		char alias = 'a';

		ks_strbuf_addf(
			sb,
			"\n/* The same function as a PyTorch operator, torch.ops.%s.run, which torch.compile "
			"and\n   CUDA graphs see through (its fake implementation is in __init__.py). */\n"
			"#ifdef KSEARCH_TORCH_LIBRARY\n"
			"TORCH_LIBRARY(%s, m)\n{\n\tm.def(\"run(",
			name, name);
		for (size_t i = 0; i < op->n_inputs + op->n_outputs; i++) {
			const struct ks_tensor *t = tensor_at(op, i);

			if (t->is_scalar)
				ks_strbuf_addf(sb, "%s%s %s", i ? ", " : "",
					       is_float(t->dtype) ? "float" : "int", t->name);
			else if (i >= op->n_inputs && alias <= 'z')
				ks_strbuf_addf(sb, "%sTensor(%c!) %s", i ? ", " : "", alias++, t->name);
			else
				ks_strbuf_addf(sb, "%sTensor %s", i ? ", " : "", t->name);
		}
		ks_strbuf_addf(sb,
			       ") -> ()\");\n}\n\n"
			       "TORCH_LIBRARY_IMPL(%s, CUDA, m)\n{\n\tm.impl(\"run\", &%s_run);\n}\n#endif\n",
			       name, name);
	}
	return 0;
}

/* The plain export's sources under prefix, each .cu with the prologue; the .json too. */
static void add_plain_sources(const struct ks_export_files *plain, const char *prefix,
			      struct ks_export_files *out, struct ks_strbuf *cu_list)
{
	for (size_t i = 0; i < plain->nr; i++) {
		const struct ks_export_file *f = &plain->files[i];
		size_t len = strlen(f->name);
		char *path;

		if (!strcmp(f->name, "README.md"))
			continue;
		path = ks_asprintf("%s%s", prefix, f->name);
		if (len > 3 && !strcmp(f->name + len - 3, ".cu")) {
			struct ks_strbuf text;

			ks_strbuf_init(&text);
			ks_strbuf_adds(&text, cuda_prologue);
			ks_strbuf_add(&text, f->text, f->len);
			ks_export_files_add(out, path, text.buf, text.len);
			ks_strbuf_release(&text);
			if (cu_list)
				ks_strbuf_addf(cu_list, "\"%s\", ", f->name);
		} else {
			ks_export_files_add(out, path, f->text, f->len);
		}
		free(path);
	}
}

/* "sm_90a" -> "-gencode=arch=compute_90a,code=sm_90a" */
static char *gencode(const char *arch)
{
	const char *digits = strncmp(arch, "sm_", 3) ? arch : arch + 3;

	return ks_asprintf("-gencode=arch=compute_%s,code=sm_%s", digits, digits);
}

/* "sm_90a" -> "9.0a" (TORCH_CUDA_ARCH_LIST's spelling) */
char *ks_export_torch_arch(const char *arch)
{
	const char *d = strncmp(arch, "sm_", 3) ? arch : arch + 3;
	size_t n = 0;

	while (d[n] >= '0' && d[n] <= '9')
		n++;
	if (n < 2)
		return ks_strdup(arch);
	return ks_asprintf("%.*s.%c%s", (int)(n - 1), d, d[n - 1], d + n);
}

static void add_py_init(const struct ks_op *op, const char *name, const char *arch, const char *cu_list,
			struct ks_strbuf *sb)
{
	char *gen = gencode(arch);
	size_t n_out = op->n_outputs;

	ks_strbuf_addf(sb,
		       "\"\"\"%s: the definition %s (ksearch op %s) as a PyTorch op, made by ksearch %s.\n\n"
		       "    %s.run(",
		       name, op->name, op->key, KS_VERSION, name);
	for (size_t i = 0; i < op->n_inputs; i++)
		ks_strbuf_addf(sb, "%s%s", i ? ", " : "", op->inputs[i].name);
	ks_strbuf_adds(sb, ") -> ");
	for (size_t i = 0; i < n_out; i++)
		ks_strbuf_addf(sb, "%s%s", i ? ", " : "", op->outputs[i].name);
	ks_strbuf_addf(
		sb,
		"\n    %s.run_out(<inputs>, <outputs>)    fills outputs given (destination-passing)\n\n"
		"The arguments are those of the definition's reference, in its order: CUDA tensors of "
		"its\n"
		"dtypes and shapes (contiguous), scalars as Python numbers.  run() allocates the "
		"outputs\n"
		"and the kernels' workspace; both queue the kernels on the current stream.  The op is\n"
		"torch.ops.%s.run (destination-passing), so torch.compile and CUDA graphs capture it.\n"
		"The kernels were built for %s; the extension is built by `pip install\n"
		"--no-build-isolation .` or, when it is not installed built, on first import with\n"
		"torch.utils.cpp_extension.load() (CUDA toolkit needed).\n\"\"\"\n"
		"import os\n\nimport torch\n\n"
		"ARCH = \"%s\"\n"
		"NVCC_FLAGS = [\"-O3\", \"-std=c++17\", \"%s\"]\n"
		"CXX_FLAGS = [\"-O3\", \"-DKSEARCH_TORCH_LIBRARY\"]\n"
		"SOURCES = [%s\"%s_binding.cpp\"]\n\n\n"
		"def _load():\n"
		"    try:\n"
		"        from . import _C  # built by setup.py\n"
		"        return _C\n"
		"    except ImportError:\n"
		"        from torch.utils.cpp_extension import load\n"
		"        csrc = os.path.join(os.path.dirname(os.path.abspath(__file__)), \"csrc\")\n"
		"        return load(name=\"%s_C\", sources=[os.path.join(csrc, s) for s in SOURCES],\n"
		"                    extra_include_paths=[csrc], extra_cflags=CXX_FLAGS,\n"
		"                    extra_cuda_cflags=NVCC_FLAGS,\n"
		"                    verbose=os.environ.get(\"KSEARCH_VERBOSE_BUILD\") == \"1\")\n\n\n"
		"_C = _load()\n\n",
		name, name, arch, arch, gen, cu_list, name, name);
	/* shapes: var axes from the inputs */
	ks_strbuf_adds(sb, "\ndef _sizes(");
	for (size_t i = 0; i < op->n_inputs; i++)
		ks_strbuf_addf(sb, "%s%s", i ? ", " : "", op->inputs[i].name);
	ks_strbuf_adds(sb, "):\n    return {");
	for (size_t a = 0, n = 0; a < op->n_axes; a++) {
		size_t ti, d;

		if (op->axes[a].is_const) {
			ks_strbuf_addf(sb, "%s\"%s\": %lld", n++ ? ", " : "", op->axes[a].name,
				       (long long)op->axes[a].value);
			continue;
		}
		if (ks_export_axis_source(op, a, &ti, &d) < 0 || ti >= op->n_inputs)
			continue; /* known from an output only: run_out() alone can take it */
		ks_strbuf_addf(sb, "%s\"%s\": %s.shape[%zu]", n++ ? ", " : "", op->axes[a].name,
			       op->inputs[ti].name, d);
	}
	ks_strbuf_adds(sb, "}\n\n\n");
	/* the fake: nothing to return, outputs are mutated */
	ks_strbuf_addf(sb,
		       "_register_fake = getattr(torch.library, \"register_fake\", None) or "
		       "torch.library.impl_abstract\n\n\n"
		       "@_register_fake(\"%s::run\")\n"
		       "def _run_fake(",
		       name);
	for (size_t i = 0; i < op->n_inputs + n_out; i++)
		ks_strbuf_addf(sb, "%s%s", i ? ", " : "", tensor_at(op, i)->name);
	ks_strbuf_adds(sb, "):\n    return None\n\n\ndef run_out(");
	for (size_t i = 0; i < op->n_inputs + n_out; i++)
		ks_strbuf_addf(sb, "%s%s", i ? ", " : "", tensor_at(op, i)->name);
	ks_strbuf_adds(sb, "):\n    \"\"\"Fill the outputs given (destination-passing style).\"\"\"\n"
			   "    torch.ops.");
	ks_strbuf_addf(sb, "%s.run(", name);
	for (size_t i = 0; i < op->n_inputs + n_out; i++)
		ks_strbuf_addf(sb, "%s%s", i ? ", " : "", tensor_at(op, i)->name);
	ks_strbuf_adds(sb, ")\n\n\ndef run(");
	for (size_t i = 0; i < op->n_inputs; i++)
		ks_strbuf_addf(sb, "%s%s", i ? ", " : "", op->inputs[i].name);
	ks_strbuf_addf(sb, "):\n    \"\"\"%s: the outputs, newly allocated.\"\"\"\n    sizes = _sizes(",
		       op->name);
	for (size_t i = 0; i < op->n_inputs; i++)
		ks_strbuf_addf(sb, "%s%s", i ? ", " : "", op->inputs[i].name);
	ks_strbuf_adds(sb, ")\n");
	{
		const struct ks_tensor *first = NULL;

		for (size_t i = 0; i < op->n_inputs && !first; i++)
			if (!op->inputs[i].is_scalar)
				first = &op->inputs[i];
		for (size_t o = 0; o < n_out; o++) {
			const struct ks_tensor *t = &op->outputs[o];

			ks_strbuf_addf(sb, "    %s = torch.empty((", t->name);
			for (size_t d = 0; d < t->rank; d++)
				ks_strbuf_addf(sb, "sizes[\"%s\"]%s", t->shape[d],
					       t->rank == 1	 ? ","
					       : d + 1 < t->rank ? ", "
								 : "");
			ks_strbuf_addf(sb, "), dtype=%s, device=%s.device)\n", torch_dtype(t->dtype),
				       first ? first->name : "\"cuda\"");
		}
	}
	ks_strbuf_addf(sb, "    torch.ops.%s.run(", name);
	for (size_t i = 0; i < op->n_inputs + n_out; i++)
		ks_strbuf_addf(sb, "%s%s", i ? ", " : "", tensor_at(op, i)->name);
	ks_strbuf_adds(sb, ")\n    return ");
	for (size_t o = 0; o < n_out; o++)
		ks_strbuf_addf(sb, "%s%s", o ? ", " : "", op->outputs[o].name);
	ks_strbuf_adds(sb, "\n");
	free(gen);
}

int ks_export_torch(const struct ks_op *op, const struct ks_export_files *plain, const char *name,
		    const struct ks_record *record, struct ks_export_files *out, struct ks_error *err)
{
	const char *arch = *record->result.arch ? record->result.arch : "sm_90a";
	struct ks_strbuf binding, text, cu_list;
	char *path = NULL, *gen = gencode(arch), *arch_list = ks_export_torch_arch(arch);
	int ret = -1;

	ks_strbuf_init(&binding);
	ks_strbuf_init(&text);
	ks_strbuf_init(&cu_list);
	for (size_t i = 0; i < op->n_outputs; i++) {
		size_t t, d;

		for (size_t k = 0; k < op->outputs[i].rank; k++) {
			int a = ks_op_axis_index(op, op->outputs[i].shape[k]);

			if (a >= 0 && !op->axes[a].is_const &&
			    (ks_export_axis_source(op, (size_t)a, &t, &d) < 0 || t >= op->n_inputs)) {
				ks_fail(err,
					"op %s: output '%s' has axis '%s', which no input's shape names: "
					"run() "
					"could not size it",
					op->key, op->outputs[i].name, op->outputs[i].shape[k]);
				goto cleanup;
			}
		}
		if (op->outputs[i].is_scalar) {
			ks_fail(err, "op %s: output '%s' is a scalar; a PyTorch op returns tensors", op->key,
				op->outputs[i].name);
			goto cleanup;
		}
	}
	if (ks_export_torch_binding(op, name, 1, &binding, err) < 0)
		goto cleanup;
	path = ks_asprintf("%s/csrc/", name);
	add_plain_sources(plain, path, out, &cu_list);
	free(path);
	path = ks_asprintf("%s/csrc/%s_binding.cpp", name, name);
	ks_export_files_add(out, path, binding.buf, binding.len);
	add_py_init(op, name, arch, cu_list.buf ? cu_list.buf : "", &text);
	free(path);
	path = ks_asprintf("%s/__init__.py", name);
	ks_export_files_add(out, path, text.buf, text.len);
	ks_strbuf_release(&text);
	ks_strbuf_init(&text);
	ks_strbuf_addf(&text,
		       "# setup.py - builds the PyTorch extension %s._C; made by ksearch %s.\n"
		       "#   pip install --no-build-isolation .     (needs torch and the CUDA toolkit)\n"
		       "import os\n\n"
		       "from setuptools import setup\n"
		       "from torch.utils.cpp_extension import BuildExtension, CUDAExtension\n\n"
		       "csrc = os.path.join(\"%s\", \"csrc\")\n"
		       "sources = [%s\"%s_binding.cpp\"]\n\n"
		       "setup(\n"
		       "    name=\"%s\",\n"
		       "    version=\"1.0.%lld\",\n"
		       "    description=\"%s (ksearch op %s) as a PyTorch op\",\n"
		       "    packages=[\"%s\"],\n"
		       "    package_data={\"%s\": [\"csrc/*\"]},\n"
		       "    ext_modules=[\n"
		       "        CUDAExtension(\n"
		       "            \"%s._C\",\n"
		       "            sources=[os.path.join(csrc, s) for s in sources],\n"
		       "            include_dirs=[os.path.abspath(csrc)],\n"
		       "            extra_compile_args={\"cxx\": [\"-O3\", \"-DKSEARCH_TORCH_LIBRARY\"],\n"
		       "                                \"nvcc\": [\"-O3\", \"-std=c++17\", \"%s\"]},\n"
		       "        )\n"
		       "    ],\n"
		       "    cmdclass={\"build_ext\": BuildExtension},\n"
		       ")\n",
		       name, KS_VERSION, name, cu_list.buf ? cu_list.buf : "", name, name,
		       (long long)record->id, op->name, op->key, name, name, name, gen);
	ks_export_files_add(out, "setup.py", text.buf, text.len);
	ks_strbuf_release(&text);
	ks_strbuf_init(&text);
	ks_strbuf_addf(
		&text,
		"# %s: %s as a PyTorch op\n\n"
		"Made by ksearch %s from candidate #%lld of the `%s` archive (measured on %s, built "
		"for %s).\n\n"
		"```sh\n"
		"pip install --no-build-isolation .        # builds %s._C with nvcc (torch and the "
		"CUDA toolkit needed)\n"
		"python -c 'import %s'                     # or, not installed: PYTHONPATH=. builds it "
		"on first import\n"
		"```\n\n"
		"```python\nimport %s\n\n",
		name, op->name, KS_VERSION, (long long)record->id, op->key,
		*record->gpu ? record->gpu : "an unrecorded GPU", arch, name, name, name);
	for (size_t i = 0; i < op->n_outputs; i++)
		ks_strbuf_addf(&text, "%s%s", i ? ", " : "", op->outputs[i].name);
	ks_strbuf_addf(&text, " = %s.run(", name);
	for (size_t i = 0; i < op->n_inputs; i++)
		ks_strbuf_addf(&text, "%s%s", i ? ", " : "", op->inputs[i].name);
	ks_strbuf_addf(&text,
		       ")      # the definition's signature\n"
		       "%s.run_out(<inputs>, <outputs>)        # fills the outputs given\n"
		       "torch.ops.%s.run(<inputs>, <outputs>)   # the same, as a PyTorch operator\n"
		       "```\n\n"
		       "Inputs are CUDA tensors of the definition's dtypes and shapes, contiguous, on one "
		       "device,\nand scalars as Python numbers; the sizes are read from the shapes and "
		       "checked (a wrong\none raises).  The kernels run on the current stream; `run()` "
		       "allocates the outputs and\nthe workspace with PyTorch's allocator, so "
		       "`torch.compile` (a fake implementation is\nregistered) and CUDA graphs capture it.  "
		       "The sources are in `%s/csrc/` (`%s.h`\nsays what each argument is); for another "
		       "GPU than %s change `-gencode` in `setup.py`\nand `NVCC_FLAGS` in `__init__.py` "
		       "(TORCH_CUDA_ARCH_LIST spelling: %s) and test it there.\n",
		       name, name, name, name, arch, arch_list);
	ks_export_files_add(out, "README.md", text.buf, text.len);
	ret = 0;
cleanup:
	free(path);
	free(gen);
	free(arch_list);
	ks_strbuf_release(&binding);
	ks_strbuf_release(&text);
	ks_strbuf_release(&cu_list);
	return ret;
}

int ks_export_cuda_sources(const struct ks_export_files *plain, struct ks_export_files *out)
{
	add_plain_sources(plain, "", out, NULL);
	return 0;
}
