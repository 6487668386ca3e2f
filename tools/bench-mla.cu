/*
 * bench-mla.cu - time an exported mla_decode kernel (`ksearch export-best --op
 * mla_decode [--dispatch] -o DIR`) outside ksearch, on the inputs FlashInfer's
 * anchor harness (../shared/anchors/fi_mla) uses, so the two compare side by side.
 *
 * Build (CPU machine), then run on the GPU:
 *   nvcc -O2 -std=c++17 -arch=sm_90a -cudart static -I DIR -o mla-bench tools/bench-mla.cu DIR/ksearch_mla_decode*.cu
 *   ./mla-bench [reps=100] [seeds=3]
 *   ./mla-bench workloads        (host only: each workload's max_len and hash, as `fi_mla workloads` prints them)
 * A --dispatch export and a single kernel build alike; "variant" is null for the latter.
 *
 * Workloads: the anchor's four (B, N), which are the op's benchmark shapes with
 * other splits (op.json writes out one split per shape; the anchor draws three).
 * For each, seeds 1.. give a random composition of N into B lengths >= 1 and a
 * random permutation of a 2N+1024-page pool (the first N pages used), from
 * std::mt19937_64 seeded with splitmix64((seed << 40) ^ (B << 20) ^ N): the
 * anchor harness's stream, so seed s is the very same split and page order it
 * times, and "workload_fnv" (FNV-1a over the lengths, then the pages, as
 * little-endian int32) the very same hash. Data: N(0,1) bf16, q_nope, q_pe,
 * ckv, kpe from splitmix64(splitmix64(seed * 7919 + workload index) + 1..4),
 * the anchor's values bit for bit; page size 1, sm_scale 1/sqrt(128 + 64).
 * Timing: 20 warm-ups; then per repetition a 512 MiB memset (flushes the L2;
 * BENCH_FLUSH=read: the 512 MiB read instead, so the L2 holds clean lines, not
 * the memset's dirty ones), CUDA events around the launch only; median (and p10, p90) of the
 * repetitions, interpolated as the anchor's are. Every seed's output is checked
 * against a naive fp32 kernel (output within 1e-2 + 1e-2 |ref|, lse in base 2,
 * the op's and FlashInfer's, within 1e-3 + 1e-3 |ref|: the op's tolerances).
 * Prints one JSON line per (workload, seed) and a summary line: per workload
 * the median of the seed medians and the HBM floor (the op's min_bytes over
 * the measured device-to-device copy bandwidth). Exit: 0 ok, 1 a CUDA error or
 * a wrong output, 2 usage.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "l2-flush.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "ksearch_mla_decode.h"

/* A --dispatch export's header includes its kernels' headers (NAME_v<k>.h) and
 * declares NAME_variant(); a single kernel's does neither. */
#ifdef KSEARCH_MLA_DECODE_V0_H
#define VARIANT(B, P, N) ksearch_mla_decode_variant(B, P, (B) + 1, N)
#else
#define VARIANT(B, P, N) -1
#endif

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "mla-bench: %s failed: %s (line %d)\n", #x, cudaGetErrorString(e_), \
                    __LINE__);                                                                  \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static const int H = 16, CKV = 512, KPE = 64;

struct workload {
    int B, N;
};
static const workload wls[] = {{1, 4096}, {16, 32000}, {64, 64000}, {128, 256000}};

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

__device__ uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

__global__ void fill_normal(__nv_bfloat16 *p, size_t n, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint64_t h = mix(seed ^ mix(i));
        const float u1 = ((float)(h >> 40) + 0.5f) * (1.0f / 16777216.0f);
        const float u2 = ((float)(h & 0xFFFFFFull) + 0.5f) * (1.0f / 16777216.0f);
        p[i] = __float2bfloat16(sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));
    }
}

/*
 * One block of 512 threads per (request, head), scores in global scratch.
 * Warp w scores every 16th token, its lanes splitting the key's 576 dims (a
 * butterfly sum leaves the same total in every lane); thread d then owns
 * output dim d. Page size 1: token t's key is ckv[indices[t]] then kpe[indices[t]].
 */
__global__ void __launch_bounds__(512) reference(const __nv_bfloat16 *q_nope, const __nv_bfloat16 *q_pe,
                                                 const __nv_bfloat16 *ckv, const __nv_bfloat16 *kpe,
                                                 const int *indptr, const int *indices, float scale, float *out,
                                                 float *lse, float *scores, int n_total)
{
    const int b = blockIdx.x / H, h = blockIdx.x % H, d = threadIdx.x, lane = d % 32, warp = d / 32;
    const int s = indptr[b], e = indptr[b + 1];
    const size_t row = (size_t)b * H + h;
    float *sc = scores + (size_t)h * n_total;
    __shared__ float q[CKV + KPE], red[CKV];
    q[d] = __bfloat162float(q_nope[row * CKV + d]);
    if (d < KPE)
        q[CKV + d] = __bfloat162float(q_pe[row * KPE + d]);
    __syncthreads();
    float mx = -INFINITY;
    for (int t = s + warp; t < e; t += CKV / 32) {
        const size_t page = (size_t)indices[t];
        float acc = 0.0f;
        for (int i = lane; i < CKV; i += 32)
            acc += q[i] * __bfloat162float(ckv[page * CKV + i]);
        for (int i = lane; i < KPE; i += 32)
            acc += q[CKV + i] * __bfloat162float(kpe[page * KPE + i]);
        for (int o = 16; o > 0; o /= 2)
            acc += __shfl_xor_sync(0xFFFFFFFFu, acc, o);
        if (lane == 0)
            sc[t] = acc * scale;
        mx = fmaxf(mx, acc * scale);
    }
    red[d] = mx;
    __syncthreads();
    for (int o = CKV / 2; o > 0; o /= 2) {
        if (d < o)
            red[d] = fmaxf(red[d], red[d + o]);
        __syncthreads();
    }
    mx = red[0];
    __syncthreads();
    float sum = 0.0f;
    for (int t = s + d; t < e; t += CKV)
        sum += expf(sc[t] - mx);
    red[d] = sum;
    __syncthreads();
    for (int o = CKV / 2; o > 0; o /= 2) {
        if (d < o)
            red[d] += red[d + o];
        __syncthreads();
    }
    sum = red[0];
    float acc = 0.0f;
    for (int t = s; t < e; t++)
        acc += expf(sc[t] - mx) * __bfloat162float(ckv[(size_t)indices[t] * CKV + d]);
    out[row * CKV + d] = e > s ? acc / sum : 0.0f;
    if (d == 0)
        lse[row] = e > s ? (mx + logf(sum)) / logf(2.0f) : -INFINITY;
}

/* linear interpolation between the two nearest ranks (the median of an even count is the mean of the middle two) */
static double quantile(std::vector<double> v, double f)
{
    std::sort(v.begin(), v.end());
    const double x = f * (v.size() - 1);
    const size_t lo = (size_t)x, hi = std::min(v.size() - 1, lo + 1);
    return v[lo] + (v[hi] - v[lo]) * (x - lo);
}

/*
 * The anchor's split and page order of (B, N, seed): B - 1 distinct cut points
 * in [1, N - 1] by a partial Fisher-Yates over the candidates, then a full
 * Fisher-Yates of the pool, both drawing from one generator. Fills lens and
 * pages (the first N of the pool's permutation); returns their FNV-1a hash.
 */
static uint64_t make_split(int B, int N, int seed, std::vector<int> &lens, std::vector<int> &pages)
{
    const int P = 2 * N + 1024;
    std::mt19937_64 rng(splitmix64(((uint64_t)seed << 40) ^ ((uint64_t)B << 20) ^ (uint64_t)N));
    std::vector<int> cand(N - 1);
    std::iota(cand.begin(), cand.end(), 1);
    for (int i = 0; i < B - 1; i++)
        std::swap(cand[i], cand[i + (size_t)(rng() % (uint64_t)(N - 1 - i))]);
    std::vector<int> cuts(cand.begin(), cand.begin() + (B - 1));
    std::sort(cuts.begin(), cuts.end());
    lens.assign(B, 0);
    int prev = 0;
    for (int i = 0; i < B - 1; i++) {
        lens[i] = cuts[i] - prev;
        prev = cuts[i];
    }
    lens[B - 1] = N - prev;
    std::vector<int> perm(P);
    std::iota(perm.begin(), perm.end(), 0);
    for (int i = P - 1; i > 0; i--)
        std::swap(perm[i], perm[(size_t)(rng() % (uint64_t)(i + 1))]);
    pages.assign(perm.begin(), perm.begin() + N);
    uint64_t hash = 1469598103934665603ull;
    for (const std::vector<int> *v : {&lens, &pages})
        for (int x : *v)
            for (int byte = 0; byte < 4; byte++) {
                hash ^= ((uint32_t)x >> (8 * byte)) & 0xFF;
                hash *= 1099511628211ull;
            }
    return hash;
}


int main(int argc, char **argv)
{
    const size_t n_wls = sizeof(wls) / sizeof(wls[0]);
    if (argc > 1 && strcmp(argv[1], "workloads") == 0) {
        for (size_t wi = 0; wi < n_wls; wi++)
            for (int seed = 1; seed <= 3; seed++) {
                std::vector<int> lens, pages;
                const uint64_t hash = make_split(wls[wi].B, wls[wi].N, seed, lens, pages);
                printf("{\"kind\":\"workload\",\"B\":%d,\"N\":%d,\"seed\":%d,\"max_len\":%d,"
                       "\"workload_fnv\":\"%016llx\"}\n",
                       wls[wi].B, wls[wi].N, seed, *std::max_element(lens.begin(), lens.end()),
                       (unsigned long long)hash);
            }
        return 0;
    }
    const int reps = argc > 1 ? atoi(argv[1]) : 100;
    const int n_seeds = argc > 2 ? atoi(argv[2]) : 3;
    if (reps < 1 || n_seeds < 1) {
        fprintf(stderr, "usage: mla-bench [reps>=1] [seeds>=1] | mla-bench workloads\n");
        return 2;
    }
    const int warmup = 20;
    const float scale = 0.07216878364870323f;
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));

    const size_t flush_bytes = 512ull << 20;
    void *flush;
    CK(cudaMalloc(&flush, flush_bytes));
    CK(cudaMemset(flush, 0, flush_bytes));
    const bool flush_read = l2_flush_by_read("BENCH_FLUSH");
    uint4 *sink;
    CK(cudaMalloc(&sink, 16));
    auto flush_l2 = [&](int i) { CK(l2_flush(flush, flush_bytes, i & 0xFF, flush_read, sink, st)); };
    /* copy bandwidth: 1 GiB device to device, (read + write) over the time, median of 10 */
    double copy_bw;
    {
        const size_t n = 1ull << 30;
        void *a, *b;
        CK(cudaMalloc(&a, n));
        CK(cudaMalloc(&b, n));
        CK(cudaMemsetAsync(a, 1, n, st));
        CK(cudaMemsetAsync(b, 0, n, st));
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        std::vector<double> t;
        for (int i = 0; i < 13; i++) {
            CK(cudaEventRecord(e0, st));
            CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, st));
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (i >= 3)
                t.push_back(ms);
        }
        copy_bw = 2.0 * n / (quantile(t, 0.5) * 1e-3);
        CK(cudaEventDestroy(e0));
        CK(cudaEventDestroy(e1));
        CK(cudaFree(a));
        CK(cudaFree(b));
    }
    std::vector<cudaEvent_t> e0(reps), e1(reps);
    for (int i = 0; i < reps; i++) {
        CK(cudaEventCreate(&e0[i]));
        CK(cudaEventCreate(&e1[i]));
    }

    std::vector<double> summary_run, summary_floor;
    std::vector<std::vector<double>> summary_seeds;
    bool all_ok = true;
    for (size_t wi = 0; wi < n_wls; wi++) {
        const int B = wls[wi].B, N = wls[wi].N, P = 2 * N + 1024;
        const double bytes = 2.0 * B * H * (CKV + KPE) + 2.0 * N * (CKV + KPE) + 4.0 * (B + 1) + 4.0 * N +
                             2.0 * B * H * CKV + 4.0 * B * H;
        std::vector<double> seed_medians;
        for (int seed = 1; seed <= n_seeds; seed++) {
            std::vector<int> lens, pages;
            const uint64_t hash = make_split(B, N, seed, lens, pages);
            std::vector<int> indptr(B + 1, 0);
            for (int i = 0; i < B; i++)
                indptr[i + 1] = indptr[i] + lens[i];

            const size_t qn = (size_t)B * H * CKV, qpn = (size_t)B * H * KPE;
            const size_t ckvn = (size_t)P * CKV, kpen = (size_t)P * KPE;
            __nv_bfloat16 *q_nope, *q_pe, *ckv, *kpe, *o;
            float *lse, *ro, *rl, *sc;
            int *dptr, *didx;
            CK(cudaMalloc(&q_nope, qn * 2));
            CK(cudaMalloc(&q_pe, qpn * 2));
            CK(cudaMalloc(&ckv, ckvn * 2));
            CK(cudaMalloc(&kpe, kpen * 2));
            CK(cudaMalloc(&o, qn * 2));
            CK(cudaMalloc(&lse, (size_t)B * H * 4));
            CK(cudaMalloc(&ro, qn * 4));
            CK(cudaMalloc(&rl, (size_t)B * H * 4));
            CK(cudaMalloc(&sc, (size_t)H * N * 4));
            CK(cudaMalloc(&dptr, (B + 1) * 4));
            CK(cudaMalloc(&didx, (size_t)N * 4));
            CK(cudaMemcpy(dptr, indptr.data(), (B + 1) * 4, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(didx, pages.data(), (size_t)N * 4, cudaMemcpyHostToDevice));
            const uint64_t ds = splitmix64((uint64_t)seed * 7919 + wi);
            fill_normal<<<1024, 256, 0, st>>>(q_nope, qn, splitmix64(ds + 1));
            fill_normal<<<1024, 256, 0, st>>>(q_pe, qpn, splitmix64(ds + 2));
            fill_normal<<<4096, 256, 0, st>>>(ckv, ckvn, splitmix64(ds + 3));
            fill_normal<<<4096, 256, 0, st>>>(kpe, kpen, splitmix64(ds + 4));
            const size_t ws_bytes = ksearch_mla_decode_workspace_bytes(B, P, B + 1, N);
            void *ws = nullptr;
            if (ws_bytes)
                CK(cudaMalloc(&ws, ws_bytes));
            auto launch = [&]() {
                CK(ksearch_mla_decode_launch(q_nope, q_pe, ckv, kpe, dptr, didx, scale, o, lse, B, P, B + 1, N, ws,
                                             ws_bytes, st));
            };

            /* correctness first: poisoned outputs, one call, against the naive kernel */
            CK(cudaMemsetAsync(o, 0xFF, qn * 2, st));
            CK(cudaMemsetAsync(lse, 0xFF, (size_t)B * H * 4, st));
            launch();
            reference<<<B * H, CKV, 0, st>>>(q_nope, q_pe, ckv, kpe, dptr, didx, scale, ro, rl, sc, N);
            CK(cudaGetLastError());
            CK(cudaStreamSynchronize(st));
            std::vector<__nv_bfloat16> ho(qn);
            std::vector<float> hro(qn), hl((size_t)B * H), hrl((size_t)B * H);
            CK(cudaMemcpy(ho.data(), o, qn * 2, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(hro.data(), ro, qn * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(hl.data(), lse, hl.size() * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(hrl.data(), rl, hrl.size() * 4, cudaMemcpyDeviceToHost));
            size_t bad = 0;
            double err = 0.0, lse_err = 0.0;
            /* a NaN counts as bad and as an infinite error (std::max would drop it) */
            for (size_t i = 0; i < qn; i++) {
                const double a = __bfloat162float(ho[i]), r = hro[i], d = fabs(a - r);
                err = std::max(err, std::isnan(d) ? INFINITY : d);
                if (!(d <= 1e-2 + 1e-2 * fabs(r)))
                    bad++;
            }
            for (size_t i = 0; i < hl.size(); i++) {
                const double d = fabs((double)hl[i] - hrl[i]);
                lse_err = std::max(lse_err, std::isnan(d) ? INFINITY : d);
                if (!(d <= 1e-3 + 1e-3 * fabs(hrl[i])))
                    bad++;
            }
            all_ok = all_ok && bad == 0;

            for (int i = 0; i < warmup; i++) {
                flush_l2(i);
                launch();
            }
            for (int i = 0; i < reps; i++) {
                flush_l2(i);
                CK(cudaEventRecord(e0[i], st));
                launch();
                CK(cudaEventRecord(e1[i], st));
            }
            CK(cudaStreamSynchronize(st));
            std::vector<double> t(reps);
            for (int i = 0; i < reps; i++) {
                float ms;
                CK(cudaEventElapsedTime(&ms, e0[i], e1[i]));
                t[i] = ms * 1000.0;
            }
            const double med = quantile(t, 0.5);
            seed_medians.push_back(med);
            char variant[16] = "null";
            const int k = VARIANT(B, P, N);
            if (k >= 0)
                snprintf(variant, sizeof(variant), "%d", k);
            printf("{\"kind\":\"run\",\"path\":\"ksearch\",\"B\":%d,\"N\":%d,\"seed\":%d,\"variant\":%s,"
                   "\"max_len\":%d,\"workload_fnv\":\"%016llx\",\"reps\":%d,\"run_us_median\":%.3f,"
                   "\"run_us_p10\":%.3f,\"run_us_p90\":%.3f,\"out_max_abs_err\":%.6g,\"lse_max_abs_err\":%.6g,"
                   "\"bad\":%zu,\"correct\":%s,\"floor_us\":%.3f}\n",
                   B, N, seed, variant, *std::max_element(lens.begin(), lens.end()), (unsigned long long)hash,
                   reps, med, quantile(t, 0.1), quantile(t, 0.9), err, lse_err, bad, bad ? "false" : "true",
                   bytes / copy_bw * 1e6);
            fflush(stdout);
            for (void *p : {(void *)q_nope, (void *)q_pe, (void *)ckv, (void *)kpe, (void *)o, (void *)lse,
                            (void *)ro, (void *)rl, (void *)sc, (void *)dptr, (void *)didx, ws})
                if (p)
                    CK(cudaFree(p));
        }
        summary_seeds.push_back(seed_medians);
        summary_run.push_back(quantile(seed_medians, 0.5));
        summary_floor.push_back(bytes / copy_bw * 1e6);
    }
    for (int i = 0; i < reps; i++) {
        CK(cudaEventDestroy(e0[i]));
        CK(cudaEventDestroy(e1[i]));
    }
    printf("{\"kind\":\"summary\",\"path\":\"ksearch\",\"device\":\"%s\",\"sms\":%d,\"copy_bw_GBps\":%.1f,"
           "\"sm_scale\":%.9g,\"reps\":%d,\"warmup\":%d,\"flush\":\"%s\",\"lse_base\":\"log2\",\"all_correct\":%s,\"workloads\":[",
           prop.name, prop.multiProcessorCount, copy_bw / 1e9, (double)scale, reps, warmup, flush_read ? "read" : "memset",
           all_ok ? "true" : "false");
    for (size_t wi = 0; wi < summary_run.size(); wi++) {
        printf("%s{\"B\":%d,\"N\":%d,\"run_us\":%.3f,\"seed_medians_us\":[", wi ? "," : "", wls[wi].B, wls[wi].N,
               summary_run[wi]);
        for (size_t s = 0; s < summary_seeds[wi].size(); s++)
            printf("%s%.3f", s ? "," : "", summary_seeds[wi][s]);
        printf("],\"floor_us\":%.3f,\"floor_over_run\":%.3f}", summary_floor[wi], summary_floor[wi] / summary_run[wi]);
    }
    printf("]}\n");
    return all_ok ? 0 : 1;
}
