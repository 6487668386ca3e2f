// gqa-ws-timeline.cu - where the time of gqa_ws (a persistent flat-split gqa decode and its merge
// launch) goes: an empty kernel of the partial launch's grid, block and shared memory; the
// partial launch alone; the partial and merge launches (PDL, as ksearch launches them); the two
// without PDL; and the merge alone on partials already in L2. Timed the way ksearch times a
// candidate: CUDA events around the launches, a 256 MiB memset before every run, median of 30.
//
// It includes operators/gqa/seeds/gqa_ws.cu (or a copy of it) with its params as -D flags (one
// command line, from the repository's root):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I. -Itools -o gqa-ws-timeline
//        -DSEED='"operators/gqa/seeds/gqa_ws.cu"' -DCTAS=132 -DCHUNK=64 -DTILE=16 -DSTAGES=4
//        -DWPH=1 -DMERGE=0 -DHINT=1 -DPART=0 -DPREQ=1 -DIDXPF=2 tools/gqa-ws-timeline.cu
//   ./gqa-ws-timeline
// Workloads: gqa's four benchmark shapes of 16 and 64 requests, each on an even split and on a
// skewed one whose longest request holds the share ksearch's evaluator gives it (0.608 of 16
// requests, 0.300 of 64), the rest split at random; pages drawn from a pool of 2N + 1024
// (op.json's generator); Q, K and V random, or constants under CONST_INPUTS=1 (tools/fill-random.h;
// constants until the thirtieth session). tests/cli/t0025 builds it against the seed as it is.
#include SEED
#include <cstdio>
#include <vector>
#include <algorithm>
#include <random>
#include <cuda_runtime.h>
#include "cuda-check.h"
#include "split-lengths.h"
#include "fill-random.h"

#if MERGE == 2
#error "gqa-ws-timeline times the merge launch: build it with MERGE 0 or 1"
#endif

__global__ void __launch_bounds__(THREADS, 1) empty_like(int *p) { if (p && threadIdx.x == 1023) p[0] = 0; }

int main()
{
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
    printf("%s, %d SMs; CTAS=%d CHUNK=%d TILE=%d STAGES=%d WPH=%d MERGE=%d HINT=%d PART=%d PREQ=%d IDXPF=%d\n",
           prop.name, prop.multiProcessorCount, CTAS, CHUNK, TILE, STAGES, WPH, MERGE, HINT, PART, PREQ, IDXPF);
    const size_t flush_bytes = 256u << 20; void *flush; CK(cudaMalloc(&flush, flush_bytes));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    auto timeit = [&](auto launch, bool flush_l2) {
        std::vector<float> ts;
        for (int i = 0; i < 33; i++) {
            if (flush_l2) CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes));
            CK(cudaEventRecord(e0)); launch(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
            float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i >= 3) ts.push_back(ms * 1000.f);
        }
        std::sort(ts.begin(), ts.end()); return ts[ts.size() / 2];
    };
    CK(cudaFuncSetAttribute(gqa_ws_partial, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES));
    CK(cudaFuncSetAttribute(empty_like, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES));
    struct { int batch, n; double skew; } shapes[] = {{16, 8636, 0.608}, {16, 23079, 0.608}, {64, 28815, 0.300}, {64, 46287, 0.300}};
    std::mt19937 g(7);
    for (auto sh : shapes) {
        const int B = sh.batch, N = sh.n, pool = 2 * N + 1024;
        const int G = std::min(CTAS, (N + CHUNK - 1) / CHUNK);
        __nv_bfloat16 *q, *k, *v, *out; float *lse, *po, *pl; int *indptr, *indices, *done;
        CK(cudaMalloc(&q, (size_t)B * 32 * 128 * 2)); fill_input(q, (size_t)B * 32 * 128, 1u, 0x3c);
        CK(cudaMalloc(&k, (size_t)pool * 1024)); fill_input(k, (size_t)pool * 512, 2u, 0x3b);
        CK(cudaMalloc(&v, (size_t)pool * 1024)); fill_input(v, (size_t)pool * 512, 3u, 0x3b);
        CK(cudaMalloc(&out, (size_t)B * 32 * 128 * 2)); CK(cudaMalloc(&lse, (size_t)B * 32 * 4));
        CK(cudaMalloc(&po, (size_t)(G + B) * 32 * 128 * 4)); CK(cudaMalloc(&pl, (size_t)(G + B) * 32 * 4));
        CK(cudaMalloc(&indptr, (B + 1) * 4)); CK(cudaMalloc(&indices, (size_t)N * 4)); CK(cudaMalloc(&done, B * 4));
        auto partial = [&] {
            gqa_ws_partial<<<G, THREADS, SMEM_BYTES>>>(q, k, v, indptr, indices, 0.08838834764831845f, po, pl, done, out,
                                                       lse, B, pool, N);
        };
        auto merge = [&](bool pdl) {
            cudaLaunchAttribute attr[1];
            attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            attr[0].val.programmaticStreamSerializationAllowed = 1;
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = dim3(MERGE_CTAS); cfg.blockDim = dim3(256); cfg.stream = 0;
            cfg.attrs = pdl ? attr : nullptr; cfg.numAttrs = pdl ? 1 : 0;
            CK(cudaLaunchKernelEx(&cfg, gqa_ws_merge, (const int *)indptr, (const float *)po, (const float *)pl, out, lse,
                                  B, N));
        };
        const float t_empty = timeit([&] { empty_like<<<G, THREADS, SMEM_BYTES>>>(done); }, true);
        for (int split = 0; split < 2; split++) {
            std::vector<int> len = lengths(B, N, split ? sh.skew : 0.0, g);
            std::vector<int> ptr(B + 1, 0);
            for (int i = 0; i < B; i++) ptr[i + 1] = ptr[i] + len[i];
            CK(cudaMemcpy(indptr, ptr.data(), (B + 1) * 4, cudaMemcpyHostToDevice));
            std::vector<int> perm(pool);
            for (int i = 0; i < pool; i++) perm[i] = i;
            std::shuffle(perm.begin(), perm.end(), g);
            CK(cudaMemcpy(indices, perm.data(), (size_t)N * 4, cudaMemcpyHostToDevice));
            const float t_p = timeit([&] { partial(); }, true);
            const float t_pm = timeit([&] { partial(); merge(true); }, true);
            const float t_ps = timeit([&] { partial(); merge(false); }, true);
            const float t_m = timeit([&] { merge(false); }, false);
            CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
            printf("b%-3d N=%-6d %-6s longest %5d grid %3d: empty %5.2f  partial %6.2f  +merge(pdl) %6.2f  "
                   "+merge(serial) %6.2f  merge alone(L2) %5.2f  tail %5.2f us\n",
                   B, N, split ? "skewed" : "even", *std::max_element(len.begin(), len.end()), G, t_empty, t_p, t_pm, t_ps,
                   t_m, t_pm - t_p);
        }
        cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(out); cudaFree(lse); cudaFree(po); cudaFree(pl);
        cudaFree(indptr); cudaFree(indices); cudaFree(done);
    }
    return 0;
}
