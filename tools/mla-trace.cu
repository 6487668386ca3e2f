// mla-trace.cu - where the time of an mla_decode split-KV launch goes, CTA by CTA: the
// globaltimer stamps that tools/mla-trace.py puts into a copy of a seed (whose kernels are
// mla_mma_ws.cu's), read back after one partial + merge run (PDL, as ksearch launches them)
// with the L2 flushed, printed as percentiles over the CTAs, in microseconds from the first
// partial CTA's start: its kv_indptr scan, page indices and Q in shared memory, first tile in,
// first request switch and the next Q in, tiles done, exit; the merge CTAs' start, scan, wait
// for the partial grid, first loads, sums, groups met, exit. It also times the partial launch
// alone and with the merge by events (256 MiB memset before each, median of 30), as
// tools/mla-timeline.cu does. Workloads: op.json's b16 and b64 length lists and a random b128
// split, pages drawn at random from a pool of 2N + 1024.
// Build and run from the repository's root (params of the seed as -D flags):
//   python3 tools/mla-trace.py operators/mla_decode/seeds/mla_mma_ws.cu /tmp/mla_tr.cu
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I. -DSEED='"/tmp/mla_tr.cu"'
//        -DCHUNK=64 -DCTAS=264 -DTILE=32 -DSTAGES=2 -DWARPS=4 -DMINB=2 -DPART=1 -DSPLIT=1
//        -DSEGP=96 -DPRODW=2 -o mla-trace tools/mla-trace.cu           (one command line)
//   ./mla-trace                 # DUMP=1: every CTA of b64's first trace, by exit time
//                               # SKEW=0.6: request 0 holds that share of each shape's tokens
// TRACES=N takes N traces a shape (2 by default); SMDUMP=1 prints every traced CTA's SM and end
// in the form tools/trace-sm.py reads ("cta C sm S done D").
// The stamps cost the kernels a few registers and stores: compare event times between builds
// of this tool, not with mla-timeline's. At most 4096 partial and 1024 merge CTAs are traced.
#include SEED
#include "mla-host.h"

static const int L16[] = {4166, 15, 1652, 214, 5324, 22, 2624, 1419, 2414, 10666, 339, 511, 1527, 408, 378, 321};
static const int L64[] = {1784, 1899, 1461, 232, 2367, 655, 241, 556, 498, 76, 761, 409, 771, 2435, 949, 475, 1822, 4878, 617, 2653, 18, 139, 173, 2544, 1073, 1162, 309, 625, 1995, 97, 113, 45, 579, 1679, 740, 469, 637, 180, 2705, 399, 245, 340, 1593, 350, 2150, 374, 532, 70, 2176, 1454, 588, 112, 620, 431, 1675, 2405, 1235, 309, 38, 2051, 2643, 157, 633, 599};
static void stats(const char *name, std::vector<double> v)
{
    if (v.empty()) { printf("  %-22s (none)\n", name); return; }
    std::sort(v.begin(), v.end());
    printf("  %-22s n=%4zu min %7.2f p10 %7.2f med %7.2f p90 %7.2f max %7.2f\n", name, v.size(), v[0], v[v.size() / 10], v[v.size() / 2],
           v[v.size() * 9 / 10], v.back());
}
int main()
{
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
    printf("%s; CHUNK=%d CTAS=%d TILE=%d STAGES=%d WARPS=%d MINB=%d PART=%d SPLIT=%d SEGP=%d PRODW=%d\n", prop.name, CHUNK, CTAS, TILE,
           STAGES, WARPS, MINB, PART, SPLIT, SEGP, PRODW);
    const size_t flush_bytes = 256u << 20; void *flush; CK(cudaMalloc(&flush, flush_bytes));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    struct { int batch, n; const int *len; } shapes[] = {{16, 32000, L16}, {64, 64000, L64}, {128, 256000, nullptr}};
    std::mt19937 g(7);
    for (auto sh : shapes) {
        MlaProblem p(sh.batch, sh.n);
        const int B = p.B, N = p.N, grid = p.grid;
        if (grid > 4096 || MERGE_CTAS > 1024) {
            printf("b%d: a grid of %d CTAs (merge %d): more than the 4096 (1024) traced\n", B, grid, MERGE_CTAS);
            return 1;
        }
        auto run = [&](bool merge) {
            p.partial();
            if (merge)
                p.merge(true);
        };
        std::vector<int> len(B);
        if (sh.len) {
            for (int i = 0; i < B; i++) len[i] = sh.len[i];
        } else { /* a random split: weights 0.5 + an exponential draw, none below a third of the mean */
            std::exponential_distribution<double> ex(1.0); double s = 0; std::vector<double> w(B);
            for (auto &x : w) { x = 0.5 + ex(g); s += x; }
            int used = 0;
            for (int i = 0; i < B; i++) { len[i] = std::max(1, (int)(w[i] / s * N)); used += len[i]; }
            len[0] += N - used;
        }
        p.set_lengths(len);
        p.scatter_pages(g);
        if (getenv("SKEW")) { /* one request holds SKEW of the tokens */
            const double sk = atof(getenv("SKEW"));
            if (!(sk > 0.0 && sk < 1.0)) {
                printf("SKEW=%s: a share of the tokens, above 0 and below 1\n", getenv("SKEW"));
                return 2;
            }
            const int rest = N - (int)(sk * N);
            for (int i = 0; i < B; i++) len[i] = i == 0 ? (int)(sk * N) : rest / (B - 1) + (i == 1 ? rest % (B - 1) : 0);
            p.set_lengths(len);
            printf("skewed: request 0 holds %d tokens\n", len[0]);
        }
        for (int merge = 0; merge < 2; merge++) {
            std::vector<float> ts;
            for (int i = 0; i < 33; i++) {
                CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes));
                CK(cudaEventRecord(e0)); run(merge); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
                float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i >= 3) ts.push_back(ms * 1000.f);
            }
            std::sort(ts.begin(), ts.end());
            printf("b%d N=%d chunk %d grid %d: %s events med %.2f (min %.2f max %.2f) us\n", B, N, p.chunk, grid, merge ? "partial+merge" : "partial",
                   ts[ts.size() / 2], ts[0], ts.back());
        }
        const int traces = getenv("TRACES") ? std::max(1, atoi(getenv("TRACES"))) : 2;
        if (getenv("SMDUMP")) /* the header tools/trace-sm.py reads */
            printf("b%d_kv%d %s (mla-trace)\n", B, N, getenv("SKEW") ? "skewed" : "split");
        for (int rep = 0; rep < traces; rep++) {
            std::vector<unsigned long long> z(4096 * 16, 0), zm(1024 * 8, 0);
            CK(cudaMemcpyToSymbol(g_tr, z.data(), z.size() * 8)); CK(cudaMemcpyToSymbol(g_trm, zm.data(), zm.size() * 8));
            CK(cudaMemsetAsync(flush, 1, flush_bytes)); CK(cudaDeviceSynchronize());
            run(true); CK(cudaDeviceSynchronize());
            CK(cudaMemcpyFromSymbol(z.data(), g_tr, z.size() * 8)); CK(cudaMemcpyFromSymbol(zm.data(), g_trm, zm.size() * 8));
            unsigned long long t0 = ~0ull;
            for (int c = 0; c < grid; c++) if (z[c * 16]) t0 = std::min(t0, z[c * 16]);
            auto rel = [&](unsigned long long t) { return (double)(t - t0) / 1000.0; };
            printf(" trace %d (us from the first partial CTA's start):\n", rep);
            const char *names[] = {"start", "scan done", "idx+Q in", "producer done", "tile 0 in", "1st switch", "Q after switch", "", "tiles done", "end"};
            for (int k = 0; k < 10; k++) {
                if (k == 7) continue;
                std::vector<double> v;
                for (int c = 0; c < grid; c++) if (z[c * 16 + k] && z[c * 16]) v.push_back(rel(z[c * 16 + k]));
                stats(names[k], v);
            }
            std::vector<double> dq, dur, segs, tiles, pertile;
            for (int c = 0; c < grid; c++) {
                if (z[c * 16 + 5] && z[c * 16 + 6]) dq.push_back((z[c * 16 + 6] - z[c * 16 + 5]) / 1000.0);
                if (z[c * 16 + 9]) { dur.push_back((z[c * 16 + 9] - z[c * 16]) / 1000.0); segs.push_back((double)z[c * 16 + 7]); tiles.push_back((double)z[c * 16 + 10]);
                                     pertile.push_back((z[c * 16 + 8] - z[c * 16 + 4]) / 1000.0 / std::max(1.0, (double)z[c * 16 + 10] - 1)); }
            }
            stats("Q switch stall", dq); stats("CTA duration", dur); stats("segments", segs); stats("tiles", tiles); stats("us per tile", pertile);
            if (getenv("SMDUMP")) /* every CTA's SM and end, for tools/trace-sm.py */
                for (int c = 0; c < grid; c++)
                    if (z[c * 16 + 9] && z[c * 16])
                        printf("  cta %d sm %llu done %.2f\n", c, z[c * 16 + 13], rel(z[c * 16 + 9]));
            if (rep == 0 && getenv("DUMP")) {
                std::vector<int> ord; for (int c = 0; c < grid; c++) if (z[c * 16 + 9]) ord.push_back(c);
                std::sort(ord.begin(), ord.end(), [&](int a, int b) { return z[a * 16 + 9] < z[b * 16 + 9]; });
                printf("  per CTA, by end: cta sm lo hi tiles segs tile0 switch qback tilesdone end\n");
                for (size_t i = 0; i < ord.size(); i++) {
                    const int c = ord[i]; const unsigned long long *r = &z[c * 16];
                    printf("  %4d %3llu %6llu %6llu %2llu %llu %7.2f %7.2f %7.2f %7.2f %7.2f\n", c, r[13], r[11], r[12], r[10], r[7], rel(r[4]),
                           r[5] ? rel(r[5]) : -1.0, r[6] ? rel(r[6]) : -1.0, rel(r[8]), rel(r[9]));
                }
            }
            const char *mn[] = {"merge start", "merge scanned", "merge waited", "merge end", "merge 1st loads in", "merge sums done", "merge groups met"};
            for (int k = 0; k < 7; k++) {
                std::vector<double> v;
                for (int c = 0; c < MERGE_CTAS; c++) if (zm[c * 8 + k]) v.push_back(rel(zm[c * 8 + k]));
                stats(mn[k], v);
            }
        }
    }
    return 0;
}
