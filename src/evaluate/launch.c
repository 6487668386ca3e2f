/*
 * launch.c - a candidate's launch sequence on a stream (see launch.h).
 */
#include "ksearch/evaluate/launch.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int fail(struct ks_launch_error *why, enum ks_launch_failure failure, CUresult rc, const char *fmt,
		...) __attribute__((format(printf, 4, 5)));

static int fail(struct ks_launch_error *why, enum ks_launch_failure failure, CUresult rc, const char *fmt,
		...)
{
	va_list ap;

	why->failure = failure;
	why->cuda_rc = rc;
	va_start(ap, fmt);
	vsnprintf(why->what, sizeof(why->what), fmt, ap);
	va_end(ap);
	return -1;
}

int ks_launch_sequence(const struct ks_cuda *cu, CUstream stream, const struct ks_op *op,
		       const struct ks_candidate *cand, const CUfunction *fns, const struct ks_plan *plan,
		       const struct ks_workload *wl, const struct ks_launch_buffers *bufs,
		       struct ks_launch_error *why)
{
	why->failure = KS_LAUNCH_OK;
	why->cuda_rc = CUDA_SUCCESS;
	why->what[0] = '\0';
	for (size_t i = 0; i < plan->n_scratch; i++) {
		CUresult rc;

		if (!cand->scratch[i].zeroed || !plan->scratch_bytes[i])
			continue;
		rc = cu->memset_d8_async(bufs->scratch[i], 0, (size_t)plan->scratch_bytes[i], stream);
		if (rc != CUDA_SUCCESS)
			return fail(why, KS_LAUNCH_CUDA, rc, "workload %s: zeroing scratch '%s'", wl->id,
				    cand->scratch[i].name);
	}
	for (size_t l = 0; l < cand->n_launches; l++) {
		const struct ks_launch *launch = &cand->launches[l];
		const struct ks_launch_dims *d = &plan->launches[l];
		union {
			CUdeviceptr ptr;
			float f32;
			double f64;
			int32_t i32;
			int64_t i64;
			uint16_t u16;
		} slots[KS_LAUNCH_MAX_ARGS];
		void *args[KS_LAUNCH_MAX_ARGS];
		CUresult rc;

		if (launch->n_args > KS_LAUNCH_MAX_ARGS)
			return fail(why, KS_LAUNCH_CONTRACT, CUDA_SUCCESS,
				    "launch[%zu] has %zu arguments (at most %d)", l, launch->n_args,
				    KS_LAUNCH_MAX_ARGS);
		for (size_t a = 0; a < launch->n_args; a++) {
			const struct ks_arg *arg = &launch->args[a];

			memset(&slots[a], 0, sizeof(slots[a]));
			switch (arg->kind) {
			case KS_ARG_INPUT:
				slots[a].ptr = bufs->inputs[arg->index];
				break;
			case KS_ARG_OUTPUT:
				slots[a].ptr = bufs->outputs[arg->index];
				break;
			case KS_ARG_SCRATCH:
				slots[a].ptr = bufs->scratch[arg->index];
				break;
			case KS_ARG_AXIS: {
				int64_t v = 0;

				ks_env_get(&wl->axes, op->axes[arg->index].name, &v);
				slots[a].i32 = (int32_t)v;
				break;
			}
			case KS_ARG_SCALAR: {
				double v = bufs->scalars[arg->index];

				switch (op->inputs[arg->index].dtype) {
				case KS_DTYPE_FLOAT32:
					slots[a].f32 = (float)v;
					break;
				case KS_DTYPE_INT32:
					slots[a].i32 = (int32_t)v;
					break;
				case KS_DTYPE_INT64:
					slots[a].i64 = (int64_t)v;
					break;
				case KS_DTYPE_BFLOAT16: {
					float f = (float)v;
					uint32_t bits;

					memcpy(&bits, &f, 4);
					slots[a].u16 = (uint16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
					break;
				}
				case KS_DTYPE_FLOAT16:
					return fail(why, KS_LAUNCH_INTERNAL, CUDA_SUCCESS,
						    "float16 scalar inputs are not supported yet");
				}
				break;
			}
			}
			args[a] = &slots[a];
		}
		if (launch->pdl) {
			/*
			 * Programmatic dependent launch: this kernel may start while the
			 * one before it finishes (it waits with griddepcontrol.wait).
			 * Never the first launch (the parser refuses it), so nothing
			 * outside the sequence can overlap it.
			 */
			CUlaunchAttribute attr = {
				.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
			};
			CUlaunchConfig config = { .gridDimX = (unsigned)d->grid[0],
						  .gridDimY = (unsigned)d->grid[1],
						  .gridDimZ = (unsigned)d->grid[2],
						  .blockDimX = (unsigned)d->block[0],
						  .blockDimY = (unsigned)d->block[1],
						  .blockDimZ = (unsigned)d->block[2],
						  .sharedMemBytes = (unsigned)d->smem,
						  .hStream = stream,
						  .attrs = &attr,
						  .numAttrs = 1 };

			attr.value.programmaticStreamSerializationAllowed = 1;
			if (!cu->launch_kernel_ex)
				return fail(why, KS_LAUNCH_UNSUPPORTED, CUDA_SUCCESS,
					    "launch[%zu] asks for programmatic dependent launch (\"pdl\"), "
					    "which this driver does not offer (cuLaunchKernelEx: CUDA 12 or "
					    "newer)",
					    l);
			rc = cu->launch_kernel_ex(&config, fns[l], args, NULL);
		} else {
			rc = cu->launch_kernel(fns[l], (unsigned)d->grid[0], (unsigned)d->grid[1],
					       (unsigned)d->grid[2], (unsigned)d->block[0],
					       (unsigned)d->block[1], (unsigned)d->block[2],
					       (unsigned)d->smem, stream, args, NULL);
		}
		if (rc != CUDA_SUCCESS)
			return fail(why, KS_LAUNCH_CUDA, rc, "workload %s: launching %s", wl->id,
				    launch->kernel);
	}
	return 0;
}
