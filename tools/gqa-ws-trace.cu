// gqa-ws-trace.cu - where the time of gqa_ws's partial launch goes, CTA by CTA: the stamps that
// tools/gqa-ws-trace.py puts into a copy of gqa_ws.cu, read back after one run with the L2
// flushed (a 256 MiB memset, as ksearch times), printed as percentiles over the CTAs in
// microseconds from the first CTA's start: the walk done, the producer's first copy issued, Q
// and the first tile in (consumer warp 0), the last copy issued, the consumers done; with each
// CTA's request switches, the time its consumers waited for a full stage and its producer for a
// free one, and the CTAs grouped by their switches. Beside them, by events (median of 30): the
// partial launch alone. Shapes: gqa's four benchmark shapes of 16 and 64 requests, each on
// three splits: even, skewed (the longest request holds the share ksearch's evaluator gives
// it, the rest exponential: tools/split-lengths.h) and a random composition (cuts drawn at
// random, as tools/bench-gqa.cu and the anchors split); pages drawn at random from a pool of
// 2N + 1024, Q, K and V random. SHAPE=b16_kv23079 (or any shape's name) runs one shape; TRACES=N
// takes N traces a split (2 by default); DUMP=1 also prints every CTA's SM and end ("cta C sm S
// done D"), for a per-SM look at the spread; CONST_INPUTS=1 fills Q, K and V with constants
// instead of random values (tools/fill-random.h).
// Build and run from the repository's root (params of the seed as -D flags):
//   python3 tools/gqa-ws-trace.py operators/gqa/seeds/gqa_ws.cu /tmp/gqa_ws_tr.cu
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Itools -DSEED='"/tmp/gqa_ws_tr.cu"'
//        -DCTAS=1048576 -DCHUNK=128 -DTILE=16 -DSTAGES=3 -DWPH=1 -DMERGE=1 -DHINT=1 -DPART=0
//        -DPREQ=0 -DIDXPF=1 -o gqa-ws-trace tools/gqa-ws-trace.cu        (one command line)
//   ./gqa-ws-trace
// At most 4096 CTAs are traced.
#include SEED
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <random>
#include <cuda_runtime.h>
#include "cuda-check.h"
#include "split-lengths.h"
#include "fill-random.h"

static void stats(const char *name, std::vector<double> v)
{
    if (v.empty()) { printf("  %-30s (none)\n", name); return; }
    std::sort(v.begin(), v.end());
    printf("  %-30s n=%4zu min %6.2f p10 %6.2f med %6.2f p90 %6.2f max %6.2f\n", name, v.size(), v[0], v[v.size() / 10],
           v[v.size() / 2], v[v.size() * 9 / 10], v.back());
}

/* B lengths >= 1 summing to n: cuts drawn at random (tools/bench-gqa.cu's composition) */
static std::vector<int> composition(int B, int n, std::mt19937 &g)
{
    std::vector<int> cut(n - 1);
    for (int i = 0; i < n - 1; i++) cut[i] = i + 1;
    std::shuffle(cut.begin(), cut.end(), g);
    cut.resize(B - 1);
    std::sort(cut.begin(), cut.end());
    std::vector<int> len(B);
    int prev = 0;
    for (int i = 0; i < B - 1; i++) { len[i] = cut[i] - prev; prev = cut[i]; }
    len[B - 1] = n - prev;
    return len;
}

int main()
{
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
    printf("%s, %d SMs; CTAS=%d CHUNK=%d TILE=%d STAGES=%d WPH=%d MERGE=%d HINT=%d PART=%d PREQ=%d IDXPF=%d\n",
           prop.name, prop.multiProcessorCount, CTAS, CHUNK, TILE, STAGES, WPH, MERGE, HINT, PART, PREQ, IDXPF);
    const size_t flush_bytes = 256u << 20; void *flush; CK(cudaMalloc(&flush, flush_bytes));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    CK(cudaFuncSetAttribute(gqa_ws_partial, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES));
    struct { const char *name; int batch, n; double skew; } shapes[] = {
        {"b16_kv8636", 16, 8636, 0.608}, {"b16_kv23079", 16, 23079, 0.608},
        {"b64_kv28815", 64, 28815, 0.300}, {"b64_kv46287", 64, 46287, 0.300}};
    const char *only = getenv("SHAPE");
    const int traces = getenv("TRACES") ? std::max(1, atoi(getenv("TRACES"))) : 2;
    const bool dump = getenv("DUMP") != nullptr;
    printf("inputs: %s\n", const_inputs() ? "constants (CONST_INPUTS)" : "random");
    std::mt19937 g(7);
    for (auto sh : shapes) {
        if (only && strcmp(only, sh.name)) continue;
        const int B = sh.batch, N = sh.n, pool = 2 * N + 1024;
        const int G = std::min(CTAS, (N + CHUNK - 1) / CHUNK);
        const int traced = std::min(G, 4096);
        __nv_bfloat16 *q, *k, *v, *out; float *lse, *po, *pl; int *indptr, *indices, *done;
        CK(cudaMalloc(&q, (size_t)B * 32 * 128 * 2)); fill_input(q, (size_t)B * 32 * 128, 1u, 0x3c);
        CK(cudaMalloc(&k, (size_t)pool * 1024)); fill_input(k, (size_t)pool * 512, 2u, 0x3b);
        CK(cudaMalloc(&v, (size_t)pool * 1024)); fill_input(v, (size_t)pool * 512, 3u, 0x3b);
        CK(cudaMalloc(&out, (size_t)B * 32 * 128 * 2)); CK(cudaMalloc(&lse, (size_t)B * 32 * 4));
        CK(cudaMalloc(&po, (size_t)(G + B) * 32 * 128 * 4)); CK(cudaMalloc(&pl, (size_t)(G + B) * 32 * 4));
        CK(cudaMalloc(&indptr, (B + 1) * 4)); CK(cudaMalloc(&indices, (size_t)N * 4)); CK(cudaMalloc(&done, B * 4));
        CK(cudaMemset(done, 0, B * 4));
        auto partial = [&] {
            gqa_ws_partial<<<G, THREADS, SMEM_BYTES>>>(q, k, v, indptr, indices, 0.08838834764831845f, po, pl, done, out,
                                                       lse, B, pool, N);
        };
        for (int split = 0; split < 3; split++) {
            std::vector<int> len = split == 2 ? composition(B, N, g) : lengths(B, N, split ? sh.skew : 0.0, g);
            std::vector<int> ptr(B + 1, 0);
            for (int i = 0; i < B; i++) ptr[i + 1] = ptr[i] + len[i];
            CK(cudaMemcpy(indptr, ptr.data(), (B + 1) * 4, cudaMemcpyHostToDevice));
            std::vector<int> perm(pool);
            for (int i = 0; i < pool; i++) perm[i] = i;
            std::shuffle(perm.begin(), perm.end(), g);
            CK(cudaMemcpy(indices, perm.data(), (size_t)N * 4, cudaMemcpyHostToDevice));
            const char *split_name[] = {"even", "skewed", "random"};
            const int shortest = *std::min_element(len.begin(), len.end());
            std::vector<float> ts;
            for (int i = 0; i < 33; i++) {
                CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes));
                CK(cudaEventRecord(e0)); partial(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
                float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i >= 3) ts.push_back(ms * 1000.f);
            }
            CK(cudaGetLastError());
            std::sort(ts.begin(), ts.end());
            printf("%s %s (longest %d, shortest %d tokens; %d CTAs of %d tokens): partial launch med %.2f (p10 %.2f p90 %.2f) us\n",
                   sh.name, split_name[split], *std::max_element(len.begin(), len.end()), shortest, G, (N + G - 1) / G,
                   ts[ts.size() / 2], ts[ts.size() / 10], ts[ts.size() * 9 / 10]);
            for (int rep = 0; rep < traces; rep++) {
                std::vector<unsigned long long> z((size_t)4096 * TR_SLOTS, 0);
                CK(cudaMemcpyToSymbol(g_tr, z.data(), z.size() * 8));
                CK(cudaMemsetAsync(flush, 1, flush_bytes));
                CK(cudaEventRecord(e0)); partial(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
                float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
                CK(cudaMemcpyFromSymbol(z.data(), g_tr, z.size() * 8));
                const unsigned long long *r0 = z.data();
                unsigned long long t0 = ~0ull;
                for (int c = 0; c < traced; c++) if (r0[c * TR_SLOTS]) t0 = std::min(t0, r0[c * TR_SLOTS]);
                auto rel = [&](unsigned long long t) { return (double)(t - t0) / 1000.0; };
                /* the SM clock from thread 0's cycles over its globaltimer span, for the waits */
                std::vector<double> ghz;
                for (int c = 0; c < traced; c++) {
                    const unsigned long long *r = r0 + (size_t)c * TR_SLOTS;
                    if (r[8] > r[0] + 1000 && r[15] > r[40]) ghz.push_back((double)(r[15] - r[40]) / (double)(r[8] - r[0]));
                }
                std::sort(ghz.begin(), ghz.end());
                const double clk = ghz.empty() ? 1.755 : ghz[ghz.size() / 2];
                printf(" trace %d (event time %.2f us; SM clock %.0f MHz; us from the first CTA's start):\n", rep, ms * 1000.f,
                       clk * 1000.0);
                std::vector<double> st[8], cdone, wfull, wempty, sw;
                struct cta_row { double done; int c; };
                std::vector<cta_row> rows;
                for (int c = 0; c < traced; c++) {
                    const unsigned long long *r = r0 + (size_t)c * TR_SLOTS;
                    if (!r[0]) continue;
                    const int stamps[] = {0, 1, 2, 5, 4, 3, 8};
                    for (int i = 0; i < 7; i++) if (r[stamps[i]]) st[i].push_back(rel(r[stamps[i]]));
                    double dmax = 0, wsum = 0; int nw = 0, smax = 0;
                    for (int w = 0; w < CWARPS && w < 8; w++)
                        if (r[16 + w]) {
                            dmax = std::max(dmax, rel(r[16 + w]));
                            wsum += (double)r[24 + w] / clk / 1000.0;
                            smax = std::max(smax, (int)r[32 + w]);
                            nw++;
                        }
                    if (!nw) continue;
                    cdone.push_back(dmax);
                    wfull.push_back(wsum / nw);
                    wempty.push_back((double)r[13] / clk / 1000.0);
                    sw.push_back(smax);
                    rows.push_back({dmax, c});
                }
                const char *names[] = {"start", "walk done", "first copy issued", "Q in (warp 0)", "first tile in (warp 0)",
                                       "last copy issued", "thread 0's end"};
                for (int i = 0; i < 7; i++) stats(names[i], st[i]);
                stats("consumers done", cdone);
                stats("consumers' wait, full stage", wfull);
                stats("producer's wait, free stage", wempty);
                stats("request switches", sw);
                /* the CTAs by their switches: do the ones that switch end last? */
                for (int s = 0; s <= 4; s++) {
                    std::vector<double> d;
                    for (size_t i = 0; i < rows.size(); i++)
                        if (s < 4 ? sw[i] == s : sw[i] >= 4) d.push_back(rows[i].done);
                    if (d.empty()) continue;
                    char nm[48]; snprintf(nm, sizeof nm, "  done, CTAs of %s%d switches", s < 4 ? "" : ">= ", s);
                    stats(nm, d);
                }
                if (dump)
                    for (const cta_row &row : rows)
                        printf("  cta %d sm %llu done %.2f\n", row.c, r0[(size_t)row.c * TR_SLOTS + 9], row.done);
                std::sort(rows.begin(), rows.end(), [](const cta_row &a, const cta_row &b) { return a.done > b.done; });
                printf("  the last CTAs done:  cta  sm tiles reqs sw  start  walk  copy0  Q     tile0 lastcp  done  wfull wempty\n");
                for (size_t i = 0; i < rows.size() && i < 6; i++) {
                    const int c = rows[i].c;
                    const unsigned long long *r = r0 + (size_t)c * TR_SLOTS;
                    double wsum = 0; int nw = 0, smax = 0;
                    for (int w = 0; w < CWARPS && w < 8; w++)
                        if (r[16 + w]) { wsum += (double)r[24 + w] / clk / 1000.0; smax = std::max(smax, (int)r[32 + w]); nw++; }
                    printf("                      %4d %3llu %5llu %4llu %2d", c, r[9], r[10], r[14], smax);
                    for (int s : {0, 1, 2, 5, 4, 3}) printf(" %6.2f", r[s] ? rel(r[s]) : -1.0);
                    printf(" %6.2f %5.2f %5.2f\n", rows[i].done, nw ? wsum / nw : 0.0, (double)r[13] / clk / 1000.0);
                }
            }
        }
        cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(out); cudaFree(lse); cudaFree(po); cudaFree(pl);
        cudaFree(indptr); cudaFree(indices); cudaFree(done);
    }
    return 0;
}
