// gqa-trace.cu - where the time of a one-launch gqa decode goes, CTA by CTA: the globaltimer
// stamps that tools/gqa-trace.py puts into a copy of gqa_space_cluster.cu, read back after one
// run with the L2 flushed, printed as percentiles over the active CTAs, in microseconds from the
// first CTA's start: the request's range known, its first page indices in, Q in, first tile in,
// the warp's tiles done, all warps done, their states in shared memory, the partial stored or
// pushed to the head's owner, the owner's wait for the other splits' bytes, exit. Beside them,
// by events (256 MiB memset before each run, median of 50): the kernel; the kernel after
// the same launch on copies of its inputs (its code warm, its data not); the kernel after one
// 16-byte read of an unused page in each 64-page window of the K and V pools (their address
// translations warm, the pages it reads not); an empty kernel of the same grid, block, cluster
// and shared memory, and an empty plain kernel of one CTA: what the kernel's own work adds to a
// launch. Traces 2-3 and 4-5 are taken after the same two warm-ups. Shapes: b1_kv546 and a
// random b16_kv8636 split, pages drawn at random from a pool of 2N + 1024. For a batch of one
// it also runs the path that does not trust the guessed range (num_kv_indices passed one larger
// than kv_indptr[1]) and checks that its output is the same, bit for bit.
// Build and run from the repository's root (params of the seed as -D flags):
//   python3 tools/gqa-trace.py operators/gqa/seeds/gqa_space_cluster.cu /tmp/gqa_tr.cu
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -DSEED='"/tmp/gqa_tr.cu"'
//        -DSPLITS=6 -DCHUNK=16 -DMERGE=0 -DLOAD=0 -DHINT=0 -DL2PF=1 -DWARPS=6 -DSTAGES=2
//        -DIDXPF=2 -o gqa-trace tools/gqa-trace.cu                    (one command line)
//   ./gqa-trace                 # DUMP=1: every CTA of b1's first trace, by exit time
// The stamps cost the kernel a few registers and stores: compare event times between builds of
// this tool, not with ksearch's. At most 4096 CTAs are traced. GQA_FLUSH=read: the 256 MiB
// are read instead of written before each run (the L2 then holds clean lines, not dirty ones).
#include SEED
#include "l2-flush.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <random>
#include <cmath>
#include <cuda_runtime.h>
#include "cuda-check.h"

#if PUSH /* the push merge's slots past the ring (gqa_space_cluster from the fifteenth session on) */
#define LAUNCH_SMEM SMEM_TOTAL
#else
#define LAUNCH_SMEM SMEM_BYTES
#endif

__global__ void CLUSTER_DIMS empty_like() {}
__global__ void empty_plain() {}

/* one 16-byte load from each listed page of k and v: their address translations (and those
   lines) warm, the timed run's pages not */
__global__ void touch_pages(const uint4 *k, const uint4 *v, const int *pages, int n, uint4 *sink)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const uint4 a = __ldcg(k + (size_t)pages[i] * 64), b = __ldcg(v + (size_t)pages[i] * 64);
        if ((a.x ^ b.y) == 0x12345678u) /* never in practice; keeps the loads */
            *sink = a;
    }
}

static void stats(const char *name, std::vector<double> v)
{
    if (v.empty()) { printf("  %-24s (none)\n", name); return; }
    std::sort(v.begin(), v.end());
    printf("  %-24s n=%4zu min %6.2f p10 %6.2f med %6.2f p90 %6.2f max %6.2f\n", name, v.size(), v[0], v[v.size() / 10],
           v[v.size() / 2], v[v.size() * 9 / 10], v.back());
}


int main()
{
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
    printf("%s; SPLITS=%d CHUNK=%d MERGE=%d LOAD=%d HINT=%d L2PF=%d WARPS=%d STAGES=%d IDXPF=%d\n", prop.name, SPLITS, CHUNK, MERGE,
           LOAD, HINT, L2PF, WARPS, STAGES, IDXPF);
    const size_t flush_bytes = 256u << 20; void *flush; CK(cudaMalloc(&flush, flush_bytes));
    CK(cudaMemset(flush, 0, flush_bytes));
    const bool flush_read = l2_flush_by_read("GQA_FLUSH");
    uint4 *sink; CK(cudaMalloc(&sink, 16));
    auto flush_l2 = [&](int v) { CK(l2_flush(flush, flush_bytes, v, flush_read, sink)); };
    printf("L2 flush: 256 MiB %s\n", flush_read ? "read (clean lines)" : "memset (dirty lines)");
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    CK(cudaFuncSetAttribute(gqa_cluster_decode, cudaFuncAttributeMaxDynamicSharedMemorySize, LAUNCH_SMEM));
    CK(cudaFuncSetAttribute(empty_like, cudaFuncAttributeMaxDynamicSharedMemorySize, LAUNCH_SMEM));
    if (MERGE == 0 && SPLITS > 8) { /* a cluster of more than 8 CTAs */
        CK(cudaFuncSetAttribute(gqa_cluster_decode, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        CK(cudaFuncSetAttribute(empty_like, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    }
    std::mt19937 g(7);
    struct { int batch, n; } shapes[] = {{1, 546}, {16, 8636}};
    for (auto sh : shapes) {
        const int B = sh.batch, N = sh.n, pool = 2 * N + 1024;
        std::vector<int> ptr(B + 1, 0);
        { /* a random composition of N into B lengths >= 1 */
            std::vector<int> cut(N - 1); for (int i = 0; i < N - 1; i++) cut[i] = i + 1;
            std::shuffle(cut.begin(), cut.end(), g); cut.resize(B - 1); std::sort(cut.begin(), cut.end());
            for (int i = 0; i < B - 1; i++) ptr[i + 1] = cut[i];
            ptr[B] = N;
        }
        std::vector<int> perm(pool); for (int i = 0; i < pool; i++) perm[i] = i;
        std::shuffle(perm.begin(), perm.end(), g);
        std::vector<__nv_bfloat16> hq((size_t)B * 32 * 128), hkv((size_t)pool * 4 * 128);
        std::normal_distribution<float> nd(0.f, 1.f);
        for (auto &x : hq) x = __float2bfloat16(nd(g));
        for (auto &x : hkv) x = __float2bfloat16(nd(g));
        __nv_bfloat16 *q, *k, *v, *out; float *lse, *po, *pl; int *indptr, *indices, *done;
        CK(cudaMalloc(&q, hq.size() * 2)); CK(cudaMalloc(&k, hkv.size() * 2)); CK(cudaMalloc(&v, hkv.size() * 2));
        CK(cudaMemcpy(q, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(k, hkv.data(), hkv.size() * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(v, hkv.data(), hkv.size() * 2, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&out, (size_t)B * 32 * 128 * 2)); CK(cudaMalloc(&lse, (size_t)B * 32 * 4));
        CK(cudaMalloc(&po, (size_t)B * 32 * SPLITS * 128 * 4)); CK(cudaMalloc(&pl, (size_t)B * 32 * SPLITS * 4));
        CK(cudaMalloc(&done, (size_t)B * 4 * 4));
        CK(cudaMalloc(&indptr, (B + 1) * 4)); CK(cudaMalloc(&indices, (size_t)(N + 16) * 4)); /* + 16: the unguessed run's N + 1 */
        CK(cudaMemcpy(indptr, ptr.data(), (B + 1) * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(indices, perm.data(), (size_t)(N + 16) * 4, cudaMemcpyHostToDevice));
        const dim3 grid(B * 4, SPLITS);
        const int ctas = B * 4 * SPLITS;
        auto run = [&](int n_given) {
            if (MERGE == 1) CK(cudaMemsetAsync(done, 0, (size_t)B * 4 * 4));
            gqa_cluster_decode<<<grid, THREADS, LAUNCH_SMEM>>>(q, k, v, indptr, indices, 0.08838834764831845f, po, pl, done, out, lse, B,
                                                             pool, n_given);
        };
        /* the same launch on copies of the inputs: after it the kernel's code is in the L2 (and
           the SMs' instruction caches), the timed run's data is not */
        __nv_bfloat16 *q2, *k2, *v2; int *indptr2, *indices2;
        CK(cudaMalloc(&q2, hq.size() * 2)); CK(cudaMalloc(&k2, hkv.size() * 2)); CK(cudaMalloc(&v2, hkv.size() * 2));
        CK(cudaMemcpy(q2, q, hq.size() * 2, cudaMemcpyDeviceToDevice));
        CK(cudaMemcpy(k2, k, hkv.size() * 2, cudaMemcpyDeviceToDevice));
        CK(cudaMemcpy(v2, v, hkv.size() * 2, cudaMemcpyDeviceToDevice));
        CK(cudaMalloc(&indptr2, (B + 1) * 4)); CK(cudaMalloc(&indices2, (size_t)(N + 16) * 4));
        CK(cudaMemcpy(indptr2, indptr, (B + 1) * 4, cudaMemcpyDeviceToDevice));
        CK(cudaMemcpy(indices2, indices, (size_t)(N + 16) * 4, cudaMemcpyDeviceToDevice));
        auto run_copy = [&] {
            if (MERGE == 1) CK(cudaMemsetAsync(done, 0, (size_t)B * 4 * 4));
            gqa_cluster_decode<<<grid, THREADS, LAUNCH_SMEM>>>(q2, k2, v2, indptr2, indices2, 0.08838834764831845f, po, pl, done, out,
                                                             lse, B, pool, N);
        };
        /* a page of the pool the timed run does not read, in each 64-page window that has one */
        std::vector<int> unused;
        {
            std::vector<char> used(pool, 0), seen(pool / 64 + 1, 0);
            for (int i = 0; i < N; i++) used[perm[i]] = 1;
            for (int pg = 0; pg < pool; pg++)
                if (!used[pg] && !seen[pg / 64]) { seen[pg / 64] = 1; unused.push_back(pg); }
        }
        int *unused_d; uint4 *sink;
        CK(cudaMalloc(&unused_d, unused.size() * 4)); CK(cudaMalloc(&sink, 16));
        CK(cudaMemcpy(unused_d, unused.data(), unused.size() * 4, cudaMemcpyHostToDevice));
        auto touch = [&] {
            touch_pages<<<1, 128>>>(reinterpret_cast<const uint4 *>(k), reinterpret_cast<const uint4 *>(v), unused_d, (int)unused.size(),
                                    sink);
        };
        /* warm: 0 nothing, 1 the kernel run on copies of the inputs, 2 the pools' other pages touched */
        auto timed = [&](const char *name, auto launch, int warm = 0) {
            std::vector<float> ts;
            for (int i = 0; i < 53; i++) {
                flush_l2(i & 0xff);
                if (warm == 1) run_copy();
                if (warm == 2) touch();
                CK(cudaEventRecord(e0)); launch(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
                float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i >= 3) ts.push_back(ms * 1000.f);
            }
            CK(cudaGetLastError());
            std::sort(ts.begin(), ts.end());
            printf("b%d N=%d grid %dx%d: %-34s med %6.2f (p10 %6.2f p90 %6.2f) us\n", B, N, B * 4, SPLITS, name, ts[ts.size() / 2],
                   ts[ts.size() / 10], ts[ts.size() * 9 / 10]);
        };
        for (int round = 0; round < 2; round++) {
            timed("kernel", [&] { run(N); });
            if (B == 1) timed("kernel, range not guessed", [&] { run(N + 1); });
            timed("kernel, its code run just before", [&] { run(N); }, 1);
            timed("kernel, other pages of the pools read", [&] { run(N); }, 2);
            timed("empty kernel, same launch shape", [&] { empty_like<<<grid, THREADS, LAUNCH_SMEM>>>(); });
            timed("empty kernel, one CTA", [&] { empty_plain<<<1, 32>>>(); });
        }
        { /* the output against a reference computed here in double */
            run(N); CK(cudaDeviceSynchronize());
            std::vector<__nv_bfloat16> o((size_t)B * 32 * 128); std::vector<float> l((size_t)B * 32);
            CK(cudaMemcpy(o.data(), out, o.size() * 2, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(l.data(), lse, l.size() * 4, cudaMemcpyDeviceToHost));
            double worst_o = 0, worst_l = 0;
            for (int bb = 0; bb < B; bb++)
                for (int h = 0; h < 32; h++) {
                    const int n = ptr[bb + 1] - ptr[bb];
                    std::vector<double> sc(n), acc(128, 0.0);
                    double mx = -1e300, sum = 0;
                    for (int t = 0; t < n; t++) {
                        const __nv_bfloat16 *kr = &hkv[((size_t)perm[ptr[bb] + t] * 4 + h / 8) * 128];
                        double d = 0;
                        for (int i = 0; i < 128; i++) d += (double)__bfloat162float(hq[((size_t)bb * 32 + h) * 128 + i]) * __bfloat162float(kr[i]);
                        sc[t] = d * 0.08838834764831845; mx = std::max(mx, sc[t]);
                    }
                    for (int t = 0; t < n; t++) {
                        const double w = exp(sc[t] - mx); sum += w;
                        const __nv_bfloat16 *vr = &hkv[((size_t)perm[ptr[bb] + t] * 4 + h / 8) * 128];
                        for (int i = 0; i < 128; i++) acc[i] += w * __bfloat162float(vr[i]);
                    }
                    for (int i = 0; i < 128; i++)
                        worst_o = std::max(worst_o, fabs(acc[i] / sum - __bfloat162float(o[((size_t)bb * 32 + h) * 128 + i])));
                    worst_l = std::max(worst_l, fabs((mx + log(sum)) / log(2.0) - l[(size_t)bb * 32 + h]));
                }
            printf("b%d: output against the reference: max |error| %.2e (o), %.2e (lse)\n", B, worst_o, worst_l);
            if (worst_o > 2e-2 || worst_l > 1e-2) return 1;
        }
        if (B == 1) { /* the unguessed path gives the same bits */
            std::vector<unsigned short> a((size_t)32 * 128), b2((size_t)32 * 128);
            std::vector<float> la(32), lb(32);
            run(N); CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(a.data(), out, a.size() * 2, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(la.data(), lse, 128, cudaMemcpyDeviceToHost));
            CK(cudaMemset(out, 0, a.size() * 2));
            run(N + 1); CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(b2.data(), out, b2.size() * 2, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(lb.data(), lse, 128, cudaMemcpyDeviceToHost));
            const bool same = a == b2 && memcmp(la.data(), lb.data(), 128) == 0;
            printf("b1: guessed and unguessed range give %s output\n", same ? "the same" : "DIFFERENT");
            if (!same) return 1;
        }
        for (int rep = 0; rep < 6; rep++) {
            std::vector<unsigned long long> z(4096 * 24, 0);
            flush_l2(1);
            if (rep == 2 || rep == 3) run_copy(); /* traces 2 and 3: the code warm, the data not */
            if (rep >= 4) touch();                /* traces 4 and 5: the pools' other pages read */
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpyToSymbol(g_tr, z.data(), z.size() * 8));
            run(N); CK(cudaDeviceSynchronize());
            CK(cudaMemcpyFromSymbol(z.data(), g_tr, z.size() * 8));
            unsigned long long t0 = ~0ull;
            for (int c = 0; c < ctas && c < 4096; c++) if (z[c * 24]) t0 = std::min(t0, z[c * 24]);
            auto rel = [&](unsigned long long t) { return (double)(t - t0) / 1000.0; };
            printf(" trace %d (us from the first CTA's start; CTAs with tiles)%s:\n", rep,
                   rep >= 4 ? ", other pages of the pools read just before" : rep >= 2 ? ", its code run just before" : "");
            const char *names[] = {"start", "range known", "tile 0 in", "warp 0 tiles done", "all warps done", "states in smem",
                                   "partial stored/pushed", "partials in, to merge", "exit", "", "", "", "first indices in", "Q in",
                                   "  1st item's max", "  1st item's sums"};
            for (int s : {0, 1, 12, 13, 2, 3, 4, 5, 14, 15, 6, 7, 8}) {
                std::vector<double> vv;
                for (int c = 0; c < ctas && c < 4096; c++) if (z[c * 24 + 2] && z[c * 24 + s]) vv.push_back(rel(z[c * 24 + s]));
                stats(names[s], vv);
            }
            std::vector<double> mhz;
            for (int c = 0; c < ctas && c < 4096; c++)
                if (z[c * 24 + 8] > z[c * 24] && z[c * 24 + 17] > z[c * 24 + 16])
                    mhz.push_back((double)(z[c * 24 + 17] - z[c * 24 + 16]) / (double)(z[c * 24 + 8] - z[c * 24]) * 1000.0);
            stats("SM clock (MHz)", mhz);
            if (rep == 0 && getenv("DUMP") && B == 1) {
                printf("  cta  sm tiles  start  range   idx     Q   tile0  tiles  allw  smem  part   in   exit\n");
                for (int c = 0; c < ctas; c++) {
                    const unsigned long long *r = &z[c * 24];
                    printf("  %3d %3llu %5llu", c, r[9], r[10]);
                    for (int s : {0, 1, 12, 13, 2, 3, 4, 5, 6, 7, 8}) printf(" %6.2f", r[s] ? rel(r[s]) : -1.0);
                    printf("\n");
                }
            }
        }
        cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(out); cudaFree(lse); cudaFree(po); cudaFree(pl); cudaFree(done);
        cudaFree(indptr); cudaFree(indices);
        cudaFree(q2); cudaFree(k2); cudaFree(v2); cudaFree(indptr2); cudaFree(indices2); cudaFree(unused_d); cudaFree(sink);
    }
    return 0;
}
