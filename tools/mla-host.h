// mla-host.h - the host side that tools/mla-timeline.cu and tools/mla-trace.cu share: one
// mla_decode problem's buffers on the GPU, its length split with pages scattered over a pool of
// 2N + 1024 (as op.json's generator draws them), and the seed's partial and merge launches as
// ksearch makes them (the merge by programmatic dependent launch, or serially).
// Include it after the seed (SEED): it reads the seed's params and constants (CHUNK, CTAS, TILE,
// SPLIT, SEGP, THREADS, SMEM_BYTES, MERGE_CTAS, MTHREADS; MW for the merge the seeds had before
// the thirteenth session) and calls its kernels mla_mma_ws_partial and mla_mma_ws_merge.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <random>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

#include "cuda-check.h"
#include "fill-random.h"

static int cdiv(long a, long b)
{
	return (int)((a + b - 1) / b);
}

/* the header's chunk expression */
static int host_chunk(int n, int batch)
{
	const long virt = n + (long)SPLIT * SEGP * batch;
	const int per_cta = cdiv(virt, CTAS);
	return std::min(2048, std::max(CHUNK, TILE * cdiv(per_cta, TILE)));
}

struct MlaProblem {
	int B, N, pool, chunk, grid;
	__nv_bfloat16 *qn, *qp, *ckv, *kpe, *out;
	float *lse, *po, *pl;
	int *indptr, *indices;

	/* B requests of N tokens in all: random inputs, or constants under CONST_INPUTS (tools/fill-random.h)
	 */
	MlaProblem(int batch, int n) : B(batch), N(n), pool(2 * n + 1024)
	{
		CK(cudaMalloc(&qn, (size_t)B * 16 * 512 * 2));
		CK(cudaMalloc(&qp, (size_t)B * 16 * 64 * 2));
		CK(cudaMalloc(&ckv, (size_t)pool * 512 * 2));
		CK(cudaMalloc(&kpe, (size_t)pool * 64 * 2));
		fill_input(qn, (size_t)B * 16 * 512, 1u, 0x3c);
		fill_input(qp, (size_t)B * 16 * 64, 2u, 0x3c);
		fill_input(ckv, (size_t)pool * 512, 3u, 0x3b);
		fill_input(kpe, (size_t)pool * 64, 4u, 0x3b);
		CK(cudaMalloc(&out, (size_t)B * 16 * 512 * 2));
		CK(cudaMalloc(&lse, (size_t)B * 16 * 4));
		chunk = host_chunk(N, B);
		const int slots = cdiv(N + (long)SPLIT * SEGP * B, chunk) + B; /* the scratch's partials */
		CK(cudaMalloc(&po, (size_t)slots * 16 * 512 * 4));
		CK(cudaMalloc(&pl, (size_t)slots * 16 * 4));
		CK(cudaMalloc(&indptr, (B + 1) * 4));
		CK(cudaMalloc(&indices, (size_t)N * 4));
		grid = cdiv(N + (long)SPLIT * SEGP * B, chunk) + B * (1 - SPLIT);
		CK(cudaFuncSetAttribute(mla_mma_ws_partial, cudaFuncAttributeMaxDynamicSharedMemorySize,
					SMEM_BYTES));
	}
	~MlaProblem()
	{
		cudaFree(qn);
		cudaFree(qp);
		cudaFree(ckv);
		cudaFree(kpe);
		cudaFree(out);
		cudaFree(lse);
		cudaFree(po);
		cudaFree(pl);
		cudaFree(indptr);
		cudaFree(indices);
	}
	MlaProblem(const MlaProblem &) = delete;
	MlaProblem &operator=(const MlaProblem &) = delete;

	/* kv_indptr from the lengths (they sum to N) */
	void set_lengths(const std::vector<int> &len)
	{
		std::vector<int> ptr(B + 1, 0);
		for (int i = 0; i < B; i++)
			ptr[i + 1] = ptr[i] + len[i];
		CK(cudaMemcpy(indptr, ptr.data(), (B + 1) * 4, cudaMemcpyHostToDevice));
	}
	/* kv_indices: N distinct pages of the pool, in random order */
	void scatter_pages(std::mt19937 &g)
	{
		std::vector<int> perm(pool);
		for (int i = 0; i < pool; i++)
			perm[i] = i;
		std::shuffle(perm.begin(), perm.end(), g);
		CK(cudaMemcpy(indices, perm.data(), (size_t)N * 4, cudaMemcpyHostToDevice));
	}
	void partial() const
	{
		mla_mma_ws_partial<<<grid, THREADS, SMEM_BYTES>>>(
			qn, qp, ckv, kpe, indptr, indices, 0.0721687824f, po, pl, out, lse, B, pool, N);
	}
	/* pdl: the merge may start while the partial grid runs (it waits for it before reading a partial) */
	void merge(bool pdl) const
	{
		cudaLaunchAttribute attr[1];
		attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
		attr[0].val.programmaticStreamSerializationAllowed = 1;
		cudaLaunchConfig_t cfg = {};
#ifdef MW /* a merge of a CTA of MW warps per row (before the thirteenth session) */
		cfg.gridDim = dim3(B * 16);
		cfg.blockDim = dim3(MW * 32);
#else /* a grid of MERGE_CTAS, MTHREADS threads a CTA */
		cfg.gridDim = dim3(MERGE_CTAS);
		cfg.blockDim = dim3(MTHREADS);
#endif
		cfg.dynamicSmemBytes = 0;
		cfg.stream = 0;
		cfg.attrs = pdl ? attr : nullptr;
		cfg.numAttrs = pdl ? 1 : 0;
		CK(cudaLaunchKernelEx(&cfg, mla_mma_ws_merge, (const int *)indptr, (const float *)po,
				      (const float *)pl, out, lse, B, N));
	}
};
