/*
 * bench-gqa.cu - time an exported gqa kernel (`ksearch export-best --op gqa
 * [--dispatch] -o DIR`) outside ksearch, on the inputs FlashInfer's anchor
 * harness (../shared/anchors/fi_decode) uses, so the two compare side by side.
 *
 * Build (CPU machine), then run on the GPU:
 *   nvcc -O2 -std=c++17 -arch=sm_90a -cudart static -I DIR -o gqa-bench tools/bench-gqa.cu DIR/ksearch_gqa*.cu
 *   ./gqa-bench [reps=100] [seeds=3]
 *
 * Workloads: gqa's five benchmark shapes (B, N). For each, seeds 1.. give a
 * random composition of N into B lengths >= 1 and a random permutation of a
 * 2N+1024-page pool (the first N pages used), from std::mt19937_64 seeded
 * with splitmix64((seed << 40) ^ (B << 20) ^ N): the anchor harness's stream,
 * so seed s is the very same split and page order it times. Data: N(0,1) bf16.
 * Timing: 20 warm-ups; then per repetition a 512 MiB memset (flushes the L2),
 * CUDA events around the launch only; median (and p10, p90) of the
 * repetitions. Every seed's output is checked against a naive fp32 kernel
 * (output within 1e-2 + 1e-2 |ref|, lse in base 2 within 1e-3 + 1e-3 |ref|).
 * Prints one JSON line per (workload, seed) and a summary line: per workload
 * the median of the seed medians and the HBM floor (the op's min_bytes over
 * the measured device-to-device copy bandwidth).
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "ksearch_gqa.h"

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "gqa-bench: %s failed: %s (line %d)\n", #x, cudaGetErrorString(e_), \
                    __LINE__);                                                                  \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static const int QO = 32, KVH = 4, D = 128, GRP = QO / KVH;

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

/* one block of 128 threads (a dim each) per (request, query head); scores in shared memory */
__global__ void reference(const __nv_bfloat16 *q, const __nv_bfloat16 *k, const __nv_bfloat16 *v, const int *indptr,
                          const int *indices, float scale, float *out, float *lse, float *scores, int n_total)
{
    const int b = blockIdx.x / QO, h = blockIdx.x % QO, g = h / GRP, d = threadIdx.x;
    const int s = indptr[b], e = indptr[b + 1];
    float *sc = scores + (size_t)h * n_total;
    __shared__ float red[128];
    float mx = -INFINITY;
    for (int t = s + d; t < e; t += 128) {
        const __nv_bfloat16 *kr = k + ((size_t)indices[t] * KVH + g) * D;
        const __nv_bfloat16 *qr = q + ((size_t)b * QO + h) * D;
        float acc = 0.0f;
        for (int i = 0; i < D; i++)
            acc += __bfloat162float(qr[i]) * __bfloat162float(kr[i]);
        sc[t] = acc * scale;
        mx = fmaxf(mx, sc[t]);
    }
    red[d] = mx;
    __syncthreads();
    for (int o = 64; o > 0; o /= 2) {
        if (d < o)
            red[d] = fmaxf(red[d], red[d + o]);
        __syncthreads();
    }
    mx = red[0];
    __syncthreads();
    float sum = 0.0f;
    for (int t = s + d; t < e; t += 128)
        sum += expf(sc[t] - mx);
    red[d] = sum;
    __syncthreads();
    for (int o = 64; o > 0; o /= 2) {
        if (d < o)
            red[d] += red[d + o];
        __syncthreads();
    }
    sum = red[0];
    float acc = 0.0f;
    for (int t = s; t < e; t++)
        acc += expf(sc[t] - mx) * __bfloat162float(v[((size_t)indices[t] * KVH + g) * D + d]);
    out[((size_t)b * QO + h) * D + d] = e > s ? acc / sum : 0.0f;
    if (d == 0)
        lse[(size_t)b * QO + h] = e > s ? (mx + logf(sum)) / logf(2.0f) : -INFINITY;
}

static double quantile(std::vector<double> v, double f)
{
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, (size_t)(f * (v.size() - 1) + 0.5))];
}

int main(int argc, char **argv)
{
    const int reps = argc > 1 ? atoi(argv[1]) : 100;
    const int n_seeds = argc > 2 ? atoi(argv[2]) : 3;
    const int warmup = 20;
    const float scale = 0.08838834764831845f;
    struct {
        int B, N;
    } const wls[] = {{1, 546}, {16, 8636}, {16, 23079}, {64, 28815}, {64, 46287}};
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));

    const size_t flush_bytes = 512ull << 20;
    void *flush;
    CK(cudaMalloc(&flush, flush_bytes));
    /* copy bandwidth: 1 GiB device to device, (read + write) over the time, median of 10 */
    double copy_bw;
    {
        const size_t n = 1ull << 30;
        void *a, *b;
        CK(cudaMalloc(&a, n));
        CK(cudaMalloc(&b, n));
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
        CK(cudaFree(a));
        CK(cudaFree(b));
    }

    std::vector<double> summary_run, summary_floor;
    std::vector<std::vector<double>> summary_seeds;
    bool all_ok = true;
    for (size_t wi = 0; wi < sizeof(wls) / sizeof(wls[0]); wi++) {
        const int B = wls[wi].B, N = wls[wi].N, P = 2 * N + 1024;
        const double bytes = 2.0 * B * QO * D + 2.0 * 2 * N * KVH * D + 4.0 * (B + 1) + 4.0 * N + 2.0 * B * QO * D +
                             4.0 * B * QO;
        std::vector<double> seed_medians;
        for (int seed = 1; seed <= n_seeds; seed++) {
            std::mt19937_64 rng(splitmix64(((uint64_t)seed << 40) ^ ((uint64_t)B << 20) ^ (uint64_t)N));
            std::vector<int> lens(B), cand(N - 1);
            std::iota(cand.begin(), cand.end(), 1);
            for (int i = 0; i < B - 1; i++)
                std::swap(cand[i], cand[i + (size_t)(rng() % (uint64_t)(N - 1 - i))]);
            std::vector<int> cuts(cand.begin(), cand.begin() + (B - 1));
            std::sort(cuts.begin(), cuts.end());
            int prev = 0;
            for (int i = 0; i < B - 1; i++) {
                lens[i] = cuts[i] - prev;
                prev = cuts[i];
            }
            lens[B - 1] = N - prev;
            std::vector<int> indptr(B + 1, 0);
            for (int i = 0; i < B; i++)
                indptr[i + 1] = indptr[i] + lens[i];
            std::vector<int> perm(P);
            std::iota(perm.begin(), perm.end(), 0);
            for (int i = P - 1; i > 0; i--)
                std::swap(perm[i], perm[(size_t)(rng() % (uint64_t)(i + 1))]);

            const size_t qn = (size_t)B * QO * D, kvn = (size_t)P * KVH * D;
            __nv_bfloat16 *q, *k, *v, *o;
            float *lse, *ro, *rl, *sc;
            int *dptr, *didx;
            CK(cudaMalloc(&q, qn * 2));
            CK(cudaMalloc(&k, kvn * 2));
            CK(cudaMalloc(&v, kvn * 2));
            CK(cudaMalloc(&o, qn * 2));
            CK(cudaMalloc(&lse, (size_t)B * QO * 4));
            CK(cudaMalloc(&ro, qn * 4));
            CK(cudaMalloc(&rl, (size_t)B * QO * 4));
            CK(cudaMalloc(&sc, (size_t)QO * N * 4));
            CK(cudaMalloc(&dptr, (B + 1) * 4));
            CK(cudaMalloc(&didx, (size_t)N * 4));
            CK(cudaMemcpy(dptr, indptr.data(), (B + 1) * 4, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(didx, perm.data(), (size_t)N * 4, cudaMemcpyHostToDevice));
            const uint64_t ds = splitmix64((uint64_t)seed * 7919 + wi);
            fill_normal<<<1024, 256, 0, st>>>(q, qn, splitmix64(ds + 1));
            fill_normal<<<4096, 256, 0, st>>>(k, kvn, splitmix64(ds + 2));
            fill_normal<<<4096, 256, 0, st>>>(v, kvn, splitmix64(ds + 3));
            const size_t ws_bytes = ksearch_gqa_workspace_bytes(B, P, B + 1, N);
            void *ws = nullptr;
            if (ws_bytes)
                CK(cudaMalloc(&ws, ws_bytes));
            auto launch = [&]() {
                CK(ksearch_gqa_launch(q, k, v, dptr, didx, scale, o, lse, B, P, B + 1, N, ws, ws_bytes, st));
            };

            /* correctness first: poisoned outputs, one call, against the naive kernel */
            CK(cudaMemsetAsync(o, 0xFF, qn * 2, st));
            CK(cudaMemsetAsync(lse, 0xFF, (size_t)B * QO * 4, st));
            launch();
            reference<<<B * QO, 128, 0, st>>>(q, k, v, dptr, didx, scale, ro, rl, sc, N);
            CK(cudaStreamSynchronize(st));
            std::vector<__nv_bfloat16> ho(qn);
            std::vector<float> hro(qn), hl((size_t)B * QO), hrl((size_t)B * QO);
            CK(cudaMemcpy(ho.data(), o, qn * 2, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(hro.data(), ro, qn * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(hl.data(), lse, hl.size() * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(hrl.data(), rl, hrl.size() * 4, cudaMemcpyDeviceToHost));
            size_t bad = 0;
            double err = 0.0;
            for (size_t i = 0; i < qn; i++) {
                const double a = __bfloat162float(ho[i]), r = hro[i], d = fabs(a - r);
                err = std::max(err, d);
                if (!(d <= 1e-2 + 1e-2 * fabs(r)))
                    bad++;
            }
            for (size_t i = 0; i < hl.size(); i++)
                if (!(fabs(hl[i] - hrl[i]) <= 1e-3 + 1e-3 * fabs(hrl[i])))
                    bad++;
            all_ok = all_ok && bad == 0;

            cudaEvent_t e0[1024], e1[1024];
            const int n = std::min(reps, 1024);
            for (int i = 0; i < n; i++) {
                CK(cudaEventCreate(&e0[i]));
                CK(cudaEventCreate(&e1[i]));
            }
            for (int i = 0; i < warmup; i++) {
                CK(cudaMemsetAsync(flush, i & 0xFF, flush_bytes, st));
                launch();
            }
            for (int i = 0; i < n; i++) {
                CK(cudaMemsetAsync(flush, i & 0xFF, flush_bytes, st));
                CK(cudaEventRecord(e0[i], st));
                launch();
                CK(cudaEventRecord(e1[i], st));
            }
            CK(cudaStreamSynchronize(st));
            std::vector<double> t(n);
            for (int i = 0; i < n; i++) {
                float ms;
                CK(cudaEventElapsedTime(&ms, e0[i], e1[i]));
                t[i] = ms * 1000.0;
                CK(cudaEventDestroy(e0[i]));
                CK(cudaEventDestroy(e1[i]));
            }
            const double med = quantile(t, 0.5);
            seed_medians.push_back(med);
            printf("{\"kind\":\"run\",\"path\":\"ksearch\",\"B\":%d,\"N\":%d,\"seed\":%d,\"variant\":%d,"
                   "\"max_len\":%d,\"reps\":%d,\"run_us_median\":%.3f,\"run_us_p10\":%.3f,\"run_us_p90\":%.3f,"
                   "\"out_max_abs_err\":%.6g,\"bad\":%zu,\"correct\":%s,\"floor_us\":%.3f}\n",
                   B, N, seed, ksearch_gqa_variant(B, P, B + 1, N), *std::max_element(lens.begin(), lens.end()), n,
                   med, quantile(t, 0.1), quantile(t, 0.9), err, bad, bad ? "false" : "true",
                   bytes / copy_bw * 1e6);
            fflush(stdout);
            for (void *p : {(void *)q, (void *)k, (void *)v, (void *)o, (void *)lse, (void *)ro, (void *)rl,
                            (void *)sc, (void *)dptr, (void *)didx, ws})
                if (p)
                    CK(cudaFree(p));
        }
        summary_seeds.push_back(seed_medians);
        summary_run.push_back(quantile(seed_medians, 0.5));
        summary_floor.push_back(bytes / copy_bw * 1e6);
    }
    printf("{\"kind\":\"summary\",\"path\":\"ksearch\",\"device\":\"%s\",\"sms\":%d,\"copy_bw_GBps\":%.1f,"
           "\"reps\":%d,\"warmup\":%d,\"all_correct\":%s,\"workloads\":[",
           prop.name, prop.multiProcessorCount, copy_bw / 1e9, reps, warmup, all_ok ? "true" : "false");
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
