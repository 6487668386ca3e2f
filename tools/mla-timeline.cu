// mla-timeline.cu - where the time of a split-KV MLA decode goes: the partial launch alone,
// the partial launch and its merge launch (PDL, as ksearch launches them), the two without
// PDL, and the merge alone on partials already in L2. Timed the way ksearch times a
// candidate: CUDA events around the launches, a 256 MiB memset before every run, median.
//
// It includes a seed of operators/mla_decode whose kernels are named and called as
// mla_mma_ws.cu's (mla_mma_ws_partial, mla_mma_ws_merge), with its params as -D flags (one
// command line, from the repository's root):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I. -o mla-timeline
//        -DSEED='"operators/mla_decode/seeds/mla_mma_ws.cu"' -DCHUNK=128 -DCTAS=264 -DTILE=32
//        -DSTAGES=2 -DWARPS=4 -DMINB=2 -DPART=1 -DSPLIT=1 -DSEGP=96 -DPRODW=2 tools/mla-timeline.cu
//   ./mla-timeline
// The seed as it was before the thirteenth session (a merge CTA of MW warps per row) builds too,
// with -DMW=4; tests/cli/t0022 builds it against the seed as it is.
// Workloads: mla_decode's three batched benchmark shapes, (16, 32000), (64, 64000) and
// (128, 256000), each on an even split and on a skewed one whose longest request holds the
// share ksearch's evaluator gives it (0.608 of 16 requests, 0.300 of 64, 0.2 of 128), the
// rest split at random; pages drawn from a pool of 2N + 1024, as op.json's generator does; the
// inputs random, or constants under CONST_INPUTS=1 (tools/fill-random.h; constants until the
// thirtieth session).
// MLA_FLUSH=read: the 256 MiB are read instead of written before every run, so the L2 holds
// clean lines, not the memset's dirty ones (which a kernel's reads must write back first).
#include SEED
#include "mla-host.h"
#include "split-lengths.h"
#include "l2-flush.h"

__global__ void empty_kernel(int *p) { if (p && threadIdx.x == 1023) p[0] = 0; }


int main()
{
    int dev = 0; cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, dev));
#ifdef MW
    printf("merge: MW=%d\n", MW);
#else
    printf("merge: %d CTAs of %d threads\n", MERGE_CTAS, MTHREADS);
#endif
    printf("%s, %d SMs; params CHUNK=%d CTAS=%d TILE=%d STAGES=%d WARPS=%d MINB=%d PART=%d SPLIT=%d SEGP=%d PRODW=%d\n",
           prop.name, prop.multiProcessorCount, CHUNK, CTAS, TILE, STAGES, WARPS, MINB, PART, SPLIT, SEGP, PRODW);
    const size_t flush_bytes = 256u << 20; void *flush; CK(cudaMalloc(&flush, flush_bytes));
    CK(cudaMemset(flush, 0, flush_bytes));
    const bool flush_read = l2_flush_by_read("MLA_FLUSH");
    uint4 *sink; CK(cudaMalloc(&sink, 16));
    printf("L2 flush before each run: 256 MiB %s\n", flush_read ? "read (clean lines)" : "memset (dirty lines)");
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    auto timeit = [&](auto launch, int reps, bool flush_l2) {
        std::vector<float> ts;
        for (int i = 0; i < reps + 3; i++) {
            if (flush_l2)
                CK(l2_flush(flush, flush_bytes, i & 0xff, flush_read, sink));
            CK(cudaEventRecord(e0)); launch(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
            float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i >= 3) ts.push_back(ms * 1000.f);
        }
        std::sort(ts.begin(), ts.end()); return ts[ts.size() / 2];
    };
    int *dummy; CK(cudaMalloc(&dummy, 4));
    printf("empty kernel: %.2f us\n", timeit([&] { empty_kernel<<<1, 32>>>(dummy); }, 30, true));
    struct { int batch, n; double skew; } shapes[] = {{16, 32000, 0.608}, {64, 64000, 0.300}, {128, 256000, 0.2}};
    std::mt19937 g(7);
    for (auto sh : shapes) {
        MlaProblem p(sh.batch, sh.n);
        const int B = p.B, N = p.N;
        auto partial = [&] { p.partial(); };
        auto merge = [&](bool pdl) { p.merge(pdl); };
        for (int split = 0; split < 2; split++) {
            std::vector<int> len = lengths(B, N, split ? sh.skew : 0.0, g);
            p.set_lengths(len);
            p.scatter_pages(g);
            const int longest = *std::max_element(len.begin(), len.end());
            const float t_p = timeit([&] { partial(); }, 30, true);
            const float t_pm = timeit([&] { partial(); merge(true); }, 30, true);
            const float t_pm_serial = timeit([&] { partial(); merge(false); }, 30, true);
            const float t_m = timeit([&] { merge(false); }, 30, false); /* partials in L2 */
            CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
            printf("b%-3d N=%-6d %-6s longest %6d chunk %4d grid %4d: partial %7.2f  +merge(pdl) %7.2f  +merge(serial) %7.2f  merge alone(L2) %6.2f  tail %6.2f us\n",
                   B, N, split ? "skewed" : "even", longest, p.chunk, p.grid, t_p, t_pm, t_pm_serial, t_m, t_pm - t_p);
        }
    }
    return 0;
}
