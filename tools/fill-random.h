// fill-random.h - inputs for the timing tools (tools/gqa-ws-trace.cu, tools/gqa-ws-timeline.cu,
// tools/mla-host.h): bf16 values in [-2, 2) from a hash of the index, filled on the GPU (no host
// round trip for pools of millions of rows), or one constant, as the tools filled them until the
// thirtieth session. With constants every score of a row is the same, so the online softmax never
// rescales; BENCHMARKS.md (thirtieth session) measures what that changes.
#pragma once
#include <cstdlib>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

#include "cuda-check.h"

__global__ void fill_random_bf16(__nv_bfloat16 *p, size_t n, unsigned salt)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		unsigned h = (unsigned)i * 2654435761u ^ salt;
		h ^= h >> 15;
		h *= 2246822519u;
		h ^= h >> 13;
		p[i] = __float2bfloat16(((h & 0xffffu) / 65536.0f - 0.5f) * 4.0f);
	}
}

/* true when the environment asks for constant inputs (CONST_INPUTS set) */
static inline bool const_inputs()
{
	return getenv("CONST_INPUTS") != nullptr;
}

/* n bf16 values at p: random (salted), or the byte `byte` repeated when CONST_INPUTS is set */
static inline void fill_input(__nv_bfloat16 *p, size_t n, unsigned salt, int byte)
{
	if (const_inputs()) {
		CK(cudaMemset(p, byte, n * 2));
		return;
	}
	fill_random_bf16<<<1024, 256>>>(p, n, salt);
	CK(cudaGetLastError());
}
