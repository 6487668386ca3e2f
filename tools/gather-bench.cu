// gather-bench.cu - the two ceilings behind the gqa design spaces, measured the way
// ksearch times a candidate (CUDA events around the launch sequence, a 256 MiB memset
// before every run so the L2 holds nothing of the inputs, median of 20 runs):
//   1. fixed cost: an empty kernel, two dependent empty kernels, a memset node and an
//      empty kernel (what a merge launch or a zeroed counter costs at small batch);
//   2. a bare gather of paged K/V, with kv_indices shaped like those of b64_kv28815 and
//      b64_kv46287 (pages drawn without replacement from a pool of 2N+1024, as
//      op.json's generator does), each token's 1 KiB K page and 1 KiB V page copied by
//      16-byte cp.async into a shared-memory ring (TILE tokens per stage, STAGES
//      stages), nothing computed; equal token ranges per CTA, for several grid sizes.
//   3. (2026-11-27) the same gather by other means: a producer warp issuing one 1 KiB
//      cp.async.bulk (TMA) per page into a deep mbarrier ring, and plain 16-byte register
//      loads with many pages in flight per thread; each over three index orders: random
//      (as above), the same pages sorted by address (a sparse stream), and dense (pages
//      0..N-1); and a streaming read of the same bytes. Separates what the random page
//      order costs from what the gather method costs.
//   4. (2026-11-27, `./gather-bench mla`) mla_decode's rows: per token a 1 KiB ckv row and a
//      128-byte kpe row, from a pool of 2N+1024 pages, for b64_kv64000 and b128_kv256000:
//      16-byte cp.async into a ring laid out as mla_mma's (1168-byte rows), one bulk copy
//      per row part by a producer warp, plain 16-byte loads, and a streaming read.
//   5. (twentieth session, `./gather-bench hint`) gqa's B = 64 pages read by plain loads and a
//      streaming read, each without and with an L2 evict_first policy on the loads, after the
//      memset (the L2 full of dirty lines, as ksearch times) and after a read of the flush
//      buffer instead (clean lines): what the dirty lines' write-back costs a read.
// Build and run on a machine with an sm_90 GPU:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o gather-bench tools/gather-bench.cu
//   6. (twenty-first session, `./gather-bench mlahint`) mla_decode's rows (b64 and b128 token
//      counts) by a streaming read, plain loads and bulk copies, each without and with the L2
//      evict_first policy, after either flush: the read under mla_decode's b128 target.
//   7. (twenty-third session, `./gather-bench inflight`) b64_kv46287's pages by plain evict_first
//      loads after the memset, each grid and pages-a-warp (U) alone, with the bytes the grid can
//      hold in flight an SM (resident CTAs x 8 warps x U x 2 KiB): how the read's time follows
//      the bytes in flight, against what a kernel that also holds its math state in registers
//      can keep in flight (gqa_reg, BENCHMARKS.md twenty-third session).
//   8. (twenty-seventh session, `./gather-bench mlastage`) mla_decode's rows into a ring as
//      mla_mma_ws lays it out, filled by producer warps through their registers (plain loads,
//      then stores, then an arrival on the stage's barrier), at 1 and 2 CTAs an SM, beside
//      plain loads with no ring and one producer warp's bulk copies at the same residency.
//   9. (twenty-seventh session, `./gather-bench reads`) each gqa workload's token count of pages
//      (546 to 46287) by plain evict_first loads after the memset, the best of grids and pages a
//      warp: the bare read a workload's kernel is measured against.
//   ./gather-bench [quick | mla | hint | mlahint | inflight | mlastage | reads]
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <random>
#include <string>
#include <cuda_runtime.h>
#include "l2-flush.h"
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void empty_kernel(int *p) { if (p && threadIdx.x == 1023) p[0] = 0; }

__device__ __forceinline__ void cp16(unsigned dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
template <int N> __device__ __forceinline__ void cpwait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// each CTA streams tokens [c*chunk, ...): per token PAGE bytes of K and of V, TILE tokens per stage
template <int PAGE, int TILE, int STAGES, int THREADS>
__global__ void __launch_bounds__(THREADS) gather(const int *idx, const char *k, const char *v, int n, int chunk, float *out) {
    extern __shared__ __align__(128) unsigned char sm[];
    const int r0 = blockIdx.x * chunk, r1 = min(r0 + chunk, n);
    const int ntiles = (r1 - r0 + TILE - 1) / TILE;
    const unsigned base = (unsigned)__cvta_generic_to_shared(sm);
    constexpr int UNIT = 2 * TILE * PAGE, PIECES = 2 * TILE * PAGE / 16;
    auto issue = [&](int t) {
        if (t < ntiles) {
            for (int i = threadIdx.x; i < PIECES; i += THREADS) {
                const int row = i / (PAGE / 16), piece = i % (PAGE / 16), tr = row % TILE;
                const int tok = r0 + t * TILE + tr;
                if (tok < r1) {
                    const long long pg = idx[tok];
                    cp16(base + (t % STAGES) * UNIT + i * 16, (row < TILE ? k : v) + pg * PAGE + piece * 16);
                }
            }
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    for (int t = 0; t < STAGES - 1; t++) issue(t);
    float acc = 0.f;
    for (int t = 0; t < ntiles; t++) {
        cpwait<STAGES - 2>();
        __syncthreads();
        issue(t + STAGES - 1);
        acc += reinterpret_cast<float *>(sm + (t % STAGES) * UNIT)[threadIdx.x];
    }
    cpwait<0>();
    if (acc == 12345.f) out[blockIdx.x] = acc;
}


__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    asm volatile("{\n.reg .pred P1;\nW:\nmbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n@P1 bra.uni D;\nbra.uni W;\nD:\n}\n" ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void bulk(unsigned dst, const void *src, unsigned bytes, unsigned bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
// the same with an L2 cache policy (mla_decode's HINT)
__device__ __forceinline__ void bulk_pol(unsigned dst, const void *src, unsigned bytes, unsigned bar, unsigned long long pol) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(dst), "l"(src), "r"(bytes), "r"(bar), "l"(pol) : "memory");
}

// warp 0 produces (one 1 KiB bulk copy per K page and per V page, TILE tokens a stage),
// warp 1 consumes (waits "full", touches the stage, arrives "empty")
template <int TILE, int STAGES>
__global__ void __launch_bounds__(64) gather_bulk(const int *idx, const char *k, const char *v, int n, int chunk, float *out) {
    extern __shared__ __align__(128) unsigned char sm[];
    constexpr int UNIT = 2 * TILE * 1024;
    const unsigned base = (unsigned)__cvta_generic_to_shared(sm);
    const unsigned full = base + STAGES * UNIT, empty = full + STAGES * 8;
    const int r0 = blockIdx.x * chunk, r1 = min(r0 + chunk, n);
    const int ntiles = r1 > r0 ? (r1 - r0 + TILE - 1) / TILE : 0;
    const int lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) { mbar_init(full + 8 * s, 1); mbar_init(empty + 8 * s, 1); }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x < 32) {
        for (int t = 0; t < ntiles; t++) {
            const int s = t % STAGES;
            if (t >= STAGES) mbar_wait(empty + 8 * s, ((t / STAGES) - 1) & 1);
            const int got = min(TILE, r1 - (r0 + t * TILE));
            if (lane == 0) mbar_expect(full + 8 * s, got * 2048);
            __syncwarp();
            for (int i = lane; i < got; i += 32) {
                const long long pg = idx[r0 + t * TILE + i];
                bulk(base + s * UNIT + i * 1024, k + pg * 1024, 1024, full + 8 * s);
                bulk(base + s * UNIT + (TILE + i) * 1024, v + pg * 1024, 1024, full + 8 * s);
            }
        }
    } else {
        float acc = 0.f;
        for (int t = 0; t < ntiles; t++) {
            const int s = t % STAGES;
            mbar_wait(full + 8 * s, (t / STAGES) & 1);
            acc += reinterpret_cast<float *>(sm + s * UNIT)[lane];
            __syncwarp();
            if (lane == 0) mbar_arrive(empty + 8 * s);
        }
        if (acc == 12345.f) out[blockIdx.x] = acc;
    }
}

// plain loads: each warp takes U tokens at a time, every lane holding 2 16-byte pieces of
// each token's K page and 2 of its V page in registers (4U loads in flight per lane)
// 16-byte read-only load, with an L2 evict_first policy when hint
__device__ __forceinline__ uint4 ld16(const uint4 *p, bool hint, unsigned long long pol) {
    if (!hint) return __ldg(p);
    uint4 r;
    asm volatile("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "l"(pol));
    return r;
}
__device__ __forceinline__ unsigned long long evict_first_pol() {
    unsigned long long p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
    return p;
}

// plain 16-byte register loads, U pages a warp in flight, and a streaming read of a contiguous
// buffer; hint: the loads carry an L2 evict_first policy
template <int U>
__global__ void __launch_bounds__(256) gather_ld(const int *idx, const char *k, const char *v, int n, int chunk, float *out, bool hint) {
    const int r0 = blockIdx.x * chunk, r1 = min(r0 + chunk, n);
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, nw = blockDim.x / 32;
    const unsigned long long pol = evict_first_pol();
    unsigned acc = 0;
    for (int t0 = r0 + warp * U; t0 < r1; t0 += nw * U) {
        uint4 r[U][4];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int tok = t0 + u;
            if (tok < r1) {
                const long long pg = idx[tok];
                const uint4 *kp = reinterpret_cast<const uint4 *>(k + pg * 1024), *vp = reinterpret_cast<const uint4 *>(v + pg * 1024);
                r[u][0] = ld16(kp + lane, hint, pol); r[u][1] = ld16(kp + 32 + lane, hint, pol);
                r[u][2] = ld16(vp + lane, hint, pol); r[u][3] = ld16(vp + 32 + lane, hint, pol);
            } else {
                r[u][0] = r[u][1] = r[u][2] = r[u][3] = make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++)
            for (int j = 0; j < 4; j++) acc ^= r[u][j].x ^ r[u][j].y ^ r[u][j].z ^ r[u][j].w;
    }
    if (acc == 0x12345u) out[blockIdx.x] = (float)acc;
}
__global__ void __launch_bounds__(512) stream_read(const uint4 *p, long long n16, float *out, bool hint) {
    const unsigned long long pol = evict_first_pol();
    unsigned acc = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n16; i += (long long)gridDim.x * blockDim.x) {
        const uint4 x = ld16(p + i, hint, pol); acc ^= x.x ^ x.y ^ x.z ^ x.w;
    }
    if (acc == 0x12345u) out[blockIdx.x] = (float)acc;
}

// ---- mla_decode rows: ckv (1024 B) and kpe (128 B) per token ----

// 16-byte cp.async into a ring of TILE rows of 1168 bytes a stage, as mla_mma fills it
template <int TILE, int STAGES, int THREADS>
__global__ void __launch_bounds__(THREADS) mla_cp(const int *idx, const char *ckv, const char *kpe, int n, int chunk, float *out, bool) {
    extern __shared__ __align__(128) unsigned char sm[];
    const int r0 = blockIdx.x * chunk, r1 = min(r0 + chunk, n);
    const int ntiles = r1 > r0 ? (r1 - r0 + TILE - 1) / TILE : 0;
    const unsigned base = (unsigned)__cvta_generic_to_shared(sm);
    auto issue = [&](int t) {
        if (t < ntiles) {
            for (int i = threadIdx.x; i < TILE * 72; i += THREADS) {
                const int tr = i / 72, p = i % 72, tok = r0 + t * TILE + tr;
                if (tok < r1) {
                    const long long pg = idx[tok];
                    cp16(base + ((t % STAGES) * TILE + tr) * 1168 + p * 16, p < 64 ? ckv + pg * 1024 + p * 16 : kpe + pg * 128 + (p - 64) * 16);
                }
            }
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    for (int t = 0; t < STAGES - 1; t++) issue(t);
    float acc = 0.f;
    for (int t = 0; t < ntiles; t++) {
        cpwait<STAGES - 2>();
        __syncthreads();
        issue(t + STAGES - 1);
        acc += reinterpret_cast<float *>(sm + (t % STAGES) * TILE * 1168)[threadIdx.x];
    }
    cpwait<0>();
    if (acc == 12345.f) out[blockIdx.x] = acc;
}

// warp 0 produces (two bulk copies per token: 1024 B and 128 B), warp 1 consumes
template <int TILE, int STAGES>
__global__ void __launch_bounds__(64) mla_bulk(const int *idx, const char *ckv, const char *kpe, int n, int chunk, float *out, bool hint) {
    extern __shared__ __align__(128) unsigned char sm[];
    constexpr int UNIT = TILE * 1152;
    const unsigned base = (unsigned)__cvta_generic_to_shared(sm);
    const unsigned full = base + STAGES * UNIT, empty = full + STAGES * 8;
    const int r0 = blockIdx.x * chunk, r1 = min(r0 + chunk, n);
    const int ntiles = r1 > r0 ? (r1 - r0 + TILE - 1) / TILE : 0;
    const int lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) { mbar_init(full + 8 * s, 1); mbar_init(empty + 8 * s, 1); }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x < 32) {
        for (int t = 0; t < ntiles; t++) {
            const int s = t % STAGES;
            if (t >= STAGES) mbar_wait(empty + 8 * s, ((t / STAGES) - 1) & 1);
            const int got = min(TILE, r1 - (r0 + t * TILE));
            if (lane == 0) mbar_expect(full + 8 * s, got * 1152);
            __syncwarp();
            for (int i = lane; i < got; i += 32) {
                const long long pg = idx[r0 + t * TILE + i];
                if (hint) {
                    const unsigned long long pol = evict_first_pol();
                    bulk_pol(base + s * UNIT + i * 1152, ckv + pg * 1024, 1024, full + 8 * s, pol);
                    bulk_pol(base + s * UNIT + i * 1152 + 1024, kpe + pg * 128, 128, full + 8 * s, pol);
                } else {
                    bulk(base + s * UNIT + i * 1152, ckv + pg * 1024, 1024, full + 8 * s);
                    bulk(base + s * UNIT + i * 1152 + 1024, kpe + pg * 128, 128, full + 8 * s);
                }
            }
        }
    } else {
        float acc = 0.f;
        for (int t = 0; t < ntiles; t++) {
            const int s = t % STAGES;
            mbar_wait(full + 8 * s, (t / STAGES) & 1);
            acc += reinterpret_cast<float *>(sm + s * UNIT)[lane];
            __syncwarp();
            if (lane == 0) mbar_arrive(empty + 8 * s);
        }
        if (acc == 12345.f) out[blockIdx.x] = acc;
    }
}

// a warp's share of token tok's row (zeros past r1): lane l holds ckv pieces l and 32 + l,
// lanes 0-7 also a kpe piece
__device__ __forceinline__ void mla_row_load(uint4 (&r)[3], const int *idx, const char *ckv, const char *kpe, int tok, int r1,
                                             int lane, bool hint, unsigned long long pol) {
    r[0] = r[1] = r[2] = make_uint4(0, 0, 0, 0);
    if (tok < r1) {
        const long long pg = idx[tok];
        const uint4 *cp = reinterpret_cast<const uint4 *>(ckv + pg * 1024);
        r[0] = ld16(cp + lane, hint, pol);
        r[1] = ld16(cp + 32 + lane, hint, pol);
        if (lane < 8) r[2] = ld16(reinterpret_cast<const uint4 *>(kpe + pg * 128) + lane, hint, pol);
    }
}

// plain loads: a warp takes U tokens at a time; lane l holds ckv pieces l and 32+l of each,
// lanes 0-7 also a kpe piece
template <int U>
__global__ void __launch_bounds__(256) mla_ld(const int *idx, const char *ckv, const char *kpe, int n, int chunk, float *out, bool hint) {
    const unsigned long long pol = evict_first_pol();
    const int r0 = blockIdx.x * chunk, r1 = min(r0 + chunk, n);
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, nw = blockDim.x / 32;
    unsigned acc = 0;
    for (int t0 = r0 + warp * U; t0 < r1; t0 += nw * U) {
        uint4 r[U][3];
#pragma unroll
        for (int u = 0; u < U; u++) {
            mla_row_load(r[u], idx, ckv, kpe, t0 + u, r1, lane, hint, pol);
        }
#pragma unroll
        for (int u = 0; u < U; u++)
            for (int j = 0; j < 3; j++) acc ^= r[u][j].x ^ r[u][j].y ^ r[u][j].z ^ r[u][j].w;
    }
    if (acc == 0x12345u) out[blockIdx.x] = (float)acc;
}


// (twenty-seventh session) a warp-specialised ring filled through registers: PW producer warps
// load U rows at a time by plain 16-byte loads (lane l: ckv pieces l and 32 + l, lanes 0-7 a kpe
// piece; evict_first), store them into the stage (1168-byte rows, as mla_mma_ws lays them out)
// and every producer lane arrives on the stage's "full" barrier; one consumer warp waits for each
// stage and releases it at once (mla_mma_ws's copies alone, with another loader). The dynamic
// shared memory the launch asks for sets the CTAs an SM.
template <int PW, int U, int TILE, int STAGES>
__global__ void __launch_bounds__(32 * (PW + 1)) mla_stage(const int *idx, const char *ckv, const char *kpe, int n, int chunk, float *out, bool) {
    extern __shared__ __align__(128) unsigned char sm[];
    static_assert(TILE % (PW * U) == 0, "a tile is whole batches of the producer warps' rows");
    const unsigned base = (unsigned)__cvta_generic_to_shared(sm);
    const unsigned full = base + STAGES * TILE * 1168, empty = full + STAGES * 8;
    const int r0 = blockIdx.x * chunk, r1 = min(r0 + chunk, n);
    const int ntiles = r1 > r0 ? (r1 - r0 + TILE - 1) / TILE : 0;
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) { mbar_init(full + 8 * s, 32 * PW); mbar_init(empty + 8 * s, 1); }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (warp < PW) {
        const unsigned long long pol = evict_first_pol();
        for (int t = 0; t < ntiles; t++) {
            const int s = t % STAGES;
            if (t >= STAGES) mbar_wait(empty + 8 * s, ((t / STAGES) - 1) & 1);
#pragma unroll 1
            for (int b = 0; b < TILE / (PW * U); b++) {
                uint4 r[U][3];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    mla_row_load(r[u], idx, ckv, kpe, r0 + t * TILE + (b * U + u) * PW + warp, r1, lane, true, pol);
                }
#pragma unroll
                for (int u = 0; u < U; u++) {
                    unsigned char *row = sm + (s * TILE + (b * U + u) * PW + warp) * 1168;
                    reinterpret_cast<uint4 *>(row)[lane] = r[u][0];
                    reinterpret_cast<uint4 *>(row)[32 + lane] = r[u][1];
                    if (lane < 8) reinterpret_cast<uint4 *>(row + 1024)[lane] = r[u][2];
                }
            }
            mbar_arrive(full + 8 * s);
        }
    } else {
        float acc = 0.f;
        for (int t = 0; t < ntiles; t++) {
            const int s = t % STAGES;
            mbar_wait(full + 8 * s, (t / STAGES) & 1);
            acc += reinterpret_cast<float *>(sm + s * TILE * 1168)[lane];
            __syncwarp();
            if (lane == 0) mbar_arrive(empty + 8 * s);
        }
        if (acc == 12345.f) out[blockIdx.x] = acc;
    }
}

// n distinct pages of a pool, in random order (as op.json's generator draws them), on the device
static int *random_pages(int n, int pool) {
    std::vector<int> perm(pool);
    for (int i = 0; i < pool; i++) perm[i] = i;
    std::mt19937 g(1);
    std::shuffle(perm.begin(), perm.end(), g);
    int *idx; CK(cudaMalloc(&idx, n * 4));
    CK(cudaMemcpy(idx, perm.data(), n * 4, cudaMemcpyHostToDevice));
    return idx;
}

template <typename Timeit>
static void run_mla(Timeit timeit, int sms, float empty_us, float *out) {
    for (int n : {64000, 256000}) {
        const int pool = 2 * n + 1024;
        const double bytes = 1152.0 * n;
        char *ckv, *kpe; CK(cudaMalloc(&ckv, (size_t)pool * 1024)); CK(cudaMalloc(&kpe, (size_t)pool * 128));
        int *idx = random_pages(n, pool);
        {
            char *s; CK(cudaMalloc(&s, (size_t)bytes));
            float best = 1e9f;
            for (int g : {sms * 2, sms * 4, sms * 8}) {
                best = std::min(best, timeit([&] { stream_read<<<g, 512>>>(reinterpret_cast<const uint4 *>(s), (long long)bytes / 16, out, false); }, 20));
                CK(cudaGetLastError());
            }
            printf("mla n=%d stream read of the same bytes (%.1f MB): %.2f us  %.2f TB/s (%.2f without the empty kernel)\n", n, bytes / 1e6, best, bytes / best / 1e6, bytes / (best - empty_us) / 1e6);
            CK(cudaFree(s));
        }
        float best = 1e9f; char bestname[96] = "";
        auto run = [&](auto kern, int threads, int smem, int ctas, const char *name) {
            if (smem > 48 * 1024) CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
            const int chunk = (n + ctas - 1) / ctas;
            float us = timeit([&] { kern<<<ctas, threads, smem>>>(idx, ckv, kpe, n, chunk, out, false); }, 20);
            CK(cudaGetLastError());
            printf("mla n=%d %-26s ctas=%4d smem=%6d: %7.2f us  %.2f TB/s\n", n, name, ctas, smem, us, bytes / us / 1e6);
            if (us < best) { best = us; snprintf(bestname, sizeof bestname, "%s ctas=%d", name, ctas); }
        };
        for (int ctas : {sms, 2 * sms, 3 * sms, 4 * sms, 8 * sms}) {
            if (ctas <= 3 * sms) {
                run(mla_cp<32, 2, 256>, 256, 2 * 32 * 1168, ctas, "cp.async T32 S2 256t");
                run(mla_cp<16, 2, 128>, 128, 2 * 16 * 1168, ctas, "cp.async T16 S2 128t");
            }
            if (ctas <= sms) run(mla_cp<32, 4, 256>, 256, 4 * 32 * 1168, ctas, "cp.async T32 S4 256t");
            if (ctas <= 2 * sms) {
                run(mla_bulk<16, 6>, 64, 6 * 16 * 1152 + 256, ctas, "bulk T16 S6");
                run(mla_bulk<32, 3>, 64, 3 * 32 * 1152 + 256, ctas, "bulk T32 S3");
            }
            if (ctas >= 2 * sms) run(mla_bulk<16, 3>, 64, 3 * 16 * 1152 + 256, ctas, "bulk T16 S3");
            run(mla_ld<2>, 256, 0, ctas, "ld U2 256t");
            run(mla_ld<4>, 256, 0, ctas, "ld U4 256t");
            run(mla_ld<8>, 256, 0, ctas, "ld U8 256t");
        }
        printf("mla n=%d BEST %s: %.2f us  %.2f TB/s (%.2f without the empty kernel)\n", n, bestname, best, bytes / best / 1e6, bytes / (best - empty_us) / 1e6);
        CK(cudaFree(idx)); CK(cudaFree(ckv)); CK(cudaFree(kpe));
    }
}

int main(int argc, char **argv) {
    int dev = 0; cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, dev));
    const int sms = pr.multiProcessorCount;
    printf("%s, %d SMs\n", pr.name, sms);
    const size_t flush_bytes = 256u << 20; char *flush; CK(cudaMalloc(&flush, flush_bytes));
    CK(cudaMemset(flush, 0, flush_bytes));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    bool flush_read = false; /* "hint" mode: the flush buffer read instead of written */
    uint4 *sink; CK(cudaMalloc(&sink, 16));
    auto timeit = [&](auto launch, int reps) {
        std::vector<float> ts;
        for (int i = 0; i < reps + 3; i++) {
            CK(l2_flush(flush, flush_bytes, i & 0xff, flush_read, sink));
            CK(cudaEventRecord(e0)); launch(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
            float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i >= 3) ts.push_back(ms * 1000.f);
        }
        std::sort(ts.begin(), ts.end()); return ts[ts.size() / 2];
    };
    int *dummy; CK(cudaMalloc(&dummy, 4));
    const float empty_us = timeit([&] { empty_kernel<<<1, 32>>>(dummy); }, 30);
    printf("empty kernel 1 CTA: %.2f us\n", empty_us);
    printf("empty kernel x2:    %.2f us\n", timeit([&] { empty_kernel<<<1, 32>>>(dummy); empty_kernel<<<1, 32>>>(dummy); }, 30));
    printf("memset 256B + empty: %.2f us\n", timeit([&] { cudaMemsetAsync(dummy, 0, 4); empty_kernel<<<1, 32>>>(dummy); }, 30));
    const bool quick = argc > 1 && argv[1][0] == 'q';
    float *out; CK(cudaMalloc(&out, 1 << 20));
    if (argc > 1 && std::string(argv[1]) == "mla") {
        run_mla(timeit, sms, empty_us, out);
        return 0;
    }
    if (argc > 1 && std::string(argv[1]) == "mlahint") { /* mla_decode's rows with and without the policy */
        for (int fr = 0; fr < 2; fr++) {
            flush_read = fr == 1;
            for (int n : {64000, 256000}) {
                const int pool = 2 * n + 1024;
                const double bytes = 1152.0 * n;
                char *ckv, *kpe, *s; CK(cudaMalloc(&ckv, (size_t)pool * 1024)); CK(cudaMalloc(&kpe, (size_t)pool * 128)); CK(cudaMalloc(&s, (size_t)bytes));
                int *idx = random_pages(n, pool);
                CK(cudaFuncSetAttribute(mla_bulk<16, 6>, cudaFuncAttributeMaxDynamicSharedMemorySize, 6 * 16 * 1152 + 256));
                CK(cudaFuncSetAttribute(mla_bulk<32, 3>, cudaFuncAttributeMaxDynamicSharedMemorySize, 3 * 32 * 1152 + 256));
                for (int h = 0; h < 2; h++) {
                    float best_s = 1e9f, best_l = 1e9f, best_b = 1e9f;
                    for (int ctas : {sms, 2 * sms, 4 * sms, 8 * sms}) {
                        const int chunk = (n + ctas - 1) / ctas;
                        best_s = std::min(best_s, timeit([&] { stream_read<<<ctas, 512>>>(reinterpret_cast<const uint4 *>(s), (long long)bytes / 16, out, h); }, 20));
                        best_l = std::min(best_l, timeit([&] { mla_ld<4><<<ctas, 256>>>(idx, ckv, kpe, n, chunk, out, h); }, 20));
                        best_l = std::min(best_l, timeit([&] { mla_ld<8><<<ctas, 256>>>(idx, ckv, kpe, n, chunk, out, h); }, 20));
                        if (ctas <= 2 * sms) {
                            best_b = std::min(best_b, timeit([&] { mla_bulk<16, 6><<<ctas, 64, 6 * 16 * 1152 + 256>>>(idx, ckv, kpe, n, chunk, out, h); }, 20));
                            best_b = std::min(best_b, timeit([&] { mla_bulk<32, 3><<<ctas, 64, 3 * 32 * 1152 + 256>>>(idx, ckv, kpe, n, chunk, out, h); }, 20));
                        }
                    }
                    CK(cudaGetLastError());
                    printf("mlahint n=%d flush %-6s %-11s: stream read %6.2f us (%.2f TB/s), rows by plain loads %6.2f us (%.2f TB/s), by bulk copies %6.2f us (%.2f TB/s)\n", n,
                           flush_read ? "read" : "memset", h ? "evict_first" : "plain", best_s, bytes / best_s / 1e6, best_l, bytes / best_l / 1e6, best_b, bytes / best_b / 1e6);
                }
                CK(cudaFree(idx)); CK(cudaFree(ckv)); CK(cudaFree(kpe)); CK(cudaFree(s));
            }
        }
        return 0;
    }
    if (argc > 1 && std::string(argv[1]) == "mlastage") { /* mla_decode's rows into a ring through producers' registers */
        const int per_sm_bytes = 227 * 1024;
        for (int n : {64000, 256000}) {
            const int pool = 2 * n + 1024;
            const double bytes = 1152.0 * n;
            char *ckv, *kpe; CK(cudaMalloc(&ckv, (size_t)pool * 1024)); CK(cudaMalloc(&kpe, (size_t)pool * 128));
            int *idx = random_pages(n, pool);
            /* one: a kernel at `res` CTAs an SM (its shared memory asks for 1/res of the SM's), grid res x SMs */
            auto one = [&](auto kern, int threads, int res, const char *name) {
                const int smem = per_sm_bytes / res - 1024;
                CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
                const int ctas = res * sms, chunk = (n + ctas - 1) / ctas;
                const float us = timeit([&] { kern<<<ctas, threads, smem>>>(idx, ckv, kpe, n, chunk, out, true); }, 20);
                CK(cudaGetLastError());
                printf("mlastage n=%d %-34s %d CTAs an SM: %7.2f us  %.2f TB/s\n", n, name, res, us, bytes / us / 1e6);
            };
            for (int res : {1, 2}) {
                one(mla_ld<4>, 256, res, "plain loads U4, 8 warps (no ring)");
                one(mla_ld<4>, 128, res, "plain loads U4, 4 warps (no ring)");
                one(mla_ld<2>, 128, res, "plain loads U2, 4 warps (no ring)");
                one(mla_bulk<32, 3>, 64, res, "bulk T32 S3, 1 producer warp");
                one(mla_stage<2, 4, 32, 2>, 96, res, "stage PW2 U4 T32 S2");
                one(mla_stage<4, 2, 32, 2>, 160, res, "stage PW4 U2 T32 S2");
                one(mla_stage<4, 4, 32, 2>, 160, res, "stage PW4 U4 T32 S2");
                one(mla_stage<4, 4, 32, 3>, 160, res, "stage PW4 U4 T32 S3");
                one(mla_stage<4, 8, 32, 2>, 160, res, "stage PW4 U8 T32 S2");
                one(mla_stage<8, 2, 32, 2>, 288, res, "stage PW8 U2 T32 S2");
                one(mla_stage<8, 4, 32, 2>, 288, res, "stage PW8 U4 T32 S2");
                one(mla_stage<4, 4, 16, 4>, 160, res, "stage PW4 U4 T16 S4");
            }
            CK(cudaFree(idx)); CK(cudaFree(ckv)); CK(cudaFree(kpe));
        }
        return 0;
    }
    if (argc > 1 && std::string(argv[1]) == "reads") { /* each gqa workload's pages, read bare */
        for (int n : {546, 8636, 23079, 28815, 46287}) {
            const int pool = 2 * n + 1024;
            const double bytes = 2.0 * n * 1024;
            char *k, *v; CK(cudaMalloc(&k, (size_t)pool * 1024)); CK(cudaMalloc(&v, (size_t)pool * 1024));
            int *idx = random_pages(n, pool);
            float best = 1e9f; int best_ctas = 0;
            for (int ctas : {sms / 4, sms / 2, sms, 2 * sms, 4 * sms, 8 * sms}) {
                const int chunk = (n + ctas - 1) / ctas;
                if (chunk < 1) continue;
                for (int u = 0; u < 3; u++) {
                    const float us = u == 0 ? timeit([&] { gather_ld<2><<<ctas, 256>>>(idx, k, v, n, chunk, out, true); }, 20)
                                   : u == 1 ? timeit([&] { gather_ld<4><<<ctas, 256>>>(idx, k, v, n, chunk, out, true); }, 20)
                                            : timeit([&] { gather_ld<8><<<ctas, 256>>>(idx, k, v, n, chunk, out, true); }, 20);
                    CK(cudaGetLastError());
                    if (us < best) { best = us; best_ctas = ctas; }
                }
            }
            printf("reads n=%d (%.1f MB): random pages by plain evict_first loads, best grid %d CTAs: %.2f us (%.2f TB/s)\n", n, bytes / 1e6,
                   best_ctas, best, bytes / best / 1e6);
            CK(cudaFree(idx)); CK(cudaFree(k)); CK(cudaFree(v));
        }
        return 0;
    }
    if (argc > 1 && std::string(argv[1]) == "inflight") {
        const int n = 46287, pool = 2 * n + 1024;
        const double bytes = 2.0 * n * 1024;
        char *k, *v; CK(cudaMalloc(&k, (size_t)pool * 1024)); CK(cudaMalloc(&v, (size_t)pool * 1024));
        int *idx = random_pages(n, pool);
        auto one = [&](auto kern, int u, int ctas) {
            int per_sm = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, 256, 0));
            const int resident = std::min(per_sm, (ctas + sms - 1) / sms);
            const int chunk = (n + ctas - 1) / ctas;
            const float us = timeit([&] { kern<<<ctas, 256>>>(idx, k, v, n, chunk, out, true); }, 20);
            CK(cudaGetLastError());
            printf("inflight n=%d U=%d ctas=%4d: %d CTAs an SM resident, %3d KiB an SM in flight at most: %6.2f us (%.2f TB/s)\n", n, u,
                   ctas, resident, resident * 8 * u * 2, us, bytes / us / 1e6);
        };
        for (int ctas : {sms, 2 * sms, 4 * sms, 8 * sms}) {
            one(gather_ld<1>, 1, ctas);
            one(gather_ld<2>, 2, ctas);
            one(gather_ld<4>, 4, ctas);
            one(gather_ld<8>, 8, ctas);
        }
        return 0;
    }
    if (argc > 1 && std::string(argv[1]) == "hint") {
        for (int fr = 0; fr < 2; fr++) {
            flush_read = fr == 1;
            for (int n : {28815, 46287}) {
                const int pool = 2 * n + 1024;
                const double bytes = 2.0 * n * 1024;
                char *k, *v, *s; CK(cudaMalloc(&k, (size_t)pool * 1024)); CK(cudaMalloc(&v, (size_t)pool * 1024)); CK(cudaMalloc(&s, (size_t)bytes));
                int *idx = random_pages(n, pool);
                for (int h = 0; h < 2; h++) {
                    float best_s = 1e9f, best_g = 1e9f;
                    for (int ctas : {2 * sms, 4 * sms, 8 * sms}) {
                        best_s = std::min(best_s, timeit([&] { stream_read<<<ctas, 512>>>(reinterpret_cast<const uint4 *>(s), (long long)bytes / 16, out, h); }, 20));
                        const int chunk = (n + ctas - 1) / ctas;
                        best_g = std::min(best_g, timeit([&] { gather_ld<4><<<ctas, 256>>>(idx, k, v, n, chunk, out, h); }, 20));
                        best_g = std::min(best_g, timeit([&] { gather_ld<8><<<ctas, 256>>>(idx, k, v, n, chunk, out, h); }, 20));
                    }
                    CK(cudaGetLastError());
                    printf("hint n=%d flush %-6s loads %-11s: stream read %6.2f us (%.2f TB/s), random pages by plain loads %6.2f us (%.2f TB/s)\n", n,
                           flush_read ? "read" : "memset", h ? "evict_first" : "plain", best_s, bytes / best_s / 1e6, best_g, bytes / best_g / 1e6);
                }
                CK(cudaFree(idx)); CK(cudaFree(k)); CK(cudaFree(v)); CK(cudaFree(s));
            }
        }
        return 0;
    }
    for (int n : {28815, 46287}) {
        const int pool = 2 * n + 1024;
        const double bytes = 2.0 * n * 1024;
        char *k, *v; CK(cudaMalloc(&k, (size_t)pool * 1024)); CK(cudaMalloc(&v, (size_t)pool * 1024));
        int *idx; CK(cudaMalloc(&idx, n * 4));
        {
            char *s; CK(cudaMalloc(&s, (size_t)bytes));
            const long long n16 = (long long)bytes / 16;
            for (int g : {sms * 2, sms * 4, sms * 8}) {
                float us = timeit([&] { stream_read<<<g, 512>>>(reinterpret_cast<const uint4 *>(s), n16, out, false); }, 20);
                CK(cudaGetLastError());
                printf("n=%d stream read of the same bytes, %d CTAs: %.2f us  %.2f TB/s (%.2f without the empty kernel)\n", n, g, us, bytes / us / 1e6, bytes / (us - empty_us) / 1e6);
            }
            CK(cudaFree(s));
        }
        for (const char *order : {"random", "sorted", "dense"}) {
            std::vector<int> perm(pool); for (int i = 0; i < pool; i++) perm[i] = i;
            if (order[0] != 'd') { std::mt19937 g(1); std::shuffle(perm.begin(), perm.end(), g); }
            perm.resize(n);
            if (order[0] == 's') std::sort(perm.begin(), perm.end());
            CK(cudaMemcpy(idx, perm.data(), n * 4, cudaMemcpyHostToDevice));
            float best = 1e9f; char bestname[96] = "";
            auto run = [&](auto kern, int threads, int smem, int ctas, const char *name, auto... extra) {
                if (smem > 48 * 1024) CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
                const int chunk = (n + ctas - 1) / ctas;
                float us = timeit([&] { kern<<<ctas, threads, smem>>>(idx, k, v, n, chunk, out, extra...); }, 20);
                CK(cudaGetLastError());
                printf("n=%d %-6s %-24s ctas=%4d smem=%6d: %7.2f us  %.2f TB/s\n", n, order, name, ctas, smem, us, bytes / us / 1e6);
                if (us < best) { best = us; snprintf(bestname, sizeof bestname, "%s ctas=%d", name, ctas); }
            };
            for (int ctas : {sms, 2 * sms, 3 * sms, 4 * sms, 8 * sms}) {
                if (!quick) {
                    run(gather<1024, 16, 4, 128>, 128, 4 * 2 * 16 * 1024, ctas, "cp.async T16 S4");
                    run(gather<1024, 32, 3, 256>, 256, 3 * 2 * 32 * 1024, ctas, "cp.async T32 S3");
                }
                if (ctas <= 2 * sms) {
                    run(gather_bulk<16, 6>, 64, 6 * 32768 + 256, ctas, "bulk T16 S6");
                    run(gather_bulk<8, 12>, 64, 12 * 16384 + 256, ctas, "bulk T8 S12");
                    run(gather_bulk<32, 3>, 64, 3 * 65536 + 256, ctas, "bulk T32 S3");
                }
                if (ctas >= 2 * sms) {
                    run(gather_bulk<16, 3>, 64, 3 * 32768 + 256, ctas, "bulk T16 S3");
                    run(gather_bulk<8, 6>, 64, 6 * 16384 + 256, ctas, "bulk T8 S6");
                }
                run(gather_ld<2>, 256, 0, ctas, "ld U2 256t", false);
                run(gather_ld<4>, 256, 0, ctas, "ld U4 256t", false);
                run(gather_ld<8>, 256, 0, ctas, "ld U8 256t", false);
            }
            printf("n=%d %-6s BEST %s: %.2f us  %.2f TB/s (%.2f without the empty kernel)\n", n, order, bestname, best, bytes / best / 1e6, bytes / (best - empty_us) / 1e6);
        }
        CK(cudaFree(idx)); CK(cudaFree(k)); CK(cudaFree(v));
    }
    {
        size_t nb = 1u << 30; char *a, *b; CK(cudaMalloc(&a, nb)); CK(cudaMalloc(&b, nb));
        float us = timeit([&] { cudaMemcpyAsync(b, a, nb, cudaMemcpyDeviceToDevice); }, 5);
        printf("copy 1 GiB: %.1f us, %.2f TB/s (r+w)\n", us, 2.0 * nb / us / 1e6);
    }
    return 0;
}
