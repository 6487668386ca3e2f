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
// Build and run on a machine with an sm_90 GPU:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o gather-bench tools/gather-bench.cu
//   ./gather-bench
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <random>
#include <cuda_runtime.h>
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

int main() {
    int dev = 0; cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, dev));
    printf("%s, %d SMs\n", pr.name, pr.multiProcessorCount);
    const size_t flush_bytes = 256u << 20; char *flush; CK(cudaMalloc(&flush, flush_bytes));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    auto timeit = [&](auto launch, int reps) {
        std::vector<float> ts;
        for (int i = 0; i < reps + 3; i++) {
            CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes));
            CK(cudaEventRecord(e0)); launch(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
            float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i >= 3) ts.push_back(ms * 1000.f);
        }
        std::sort(ts.begin(), ts.end()); return ts[ts.size() / 2];
    };
    int *dummy; CK(cudaMalloc(&dummy, 4));
    printf("empty kernel 1 CTA: %.2f us\n", timeit([&] { empty_kernel<<<1, 32>>>(dummy); }, 30));
    printf("empty kernel x2:    %.2f us\n", timeit([&] { empty_kernel<<<1, 32>>>(dummy); empty_kernel<<<1, 32>>>(dummy); }, 30));
    printf("memset 256B + empty: %.2f us\n", timeit([&] { cudaMemsetAsync(dummy, 0, 4); empty_kernel<<<1, 32>>>(dummy); }, 30));
    for (int n : {28815, 46287}) {
        const int pool = 2 * n + 1024;
        std::vector<int> perm(pool); for (int i = 0; i < pool; i++) perm[i] = i;
        std::mt19937 g(1); std::shuffle(perm.begin(), perm.end(), g); perm.resize(n);
        int *idx; CK(cudaMalloc(&idx, n * 4)); CK(cudaMemcpy(idx, perm.data(), n * 4, cudaMemcpyHostToDevice));
        char *k, *v; CK(cudaMalloc(&k, (size_t)pool * 1024)); CK(cudaMalloc(&v, (size_t)pool * 1024));
        float *out; CK(cudaMalloc(&out, 1 << 20));
        const double bytes = 2.0 * n * 1024;
        auto run = [&](auto kern, int tile, int stages, int threads, int ctas, const char *name) {
            const int smem = stages * 2 * tile * 1024;
            CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
            const int chunk = (n + ctas - 1) / ctas;
            float us = timeit([&] { kern<<<ctas, threads, smem>>>(idx, k, v, n, chunk, out); }, 20);
            CK(cudaGetLastError());
            printf("n=%d %-28s ctas=%4d smem=%6d: %7.2f us  %.2f TB/s\n", n, name, ctas, smem, us, bytes / us / 1e6);
        };
        for (int ctas : {132, 264, 396, 528}) {
            run(gather<1024, 16, 2, 128>, 16, 2, 128, ctas, "T16 S2 128t");
            run(gather<1024, 16, 4, 128>, 16, 4, 128, ctas, "T16 S4 128t");
            run(gather<1024, 16, 6, 256>, 16, 6, 256, ctas, "T16 S6 256t");
            run(gather<1024, 32, 3, 256>, 32, 3, 256, ctas, "T32 S3 256t");
            run(gather<1024, 8, 8, 128>, 8, 8, 128, ctas, "T8 S8 128t");
        }
        CK(cudaFree(idx)); CK(cudaFree(k)); CK(cudaFree(v)); CK(cudaFree(out));
    }
    // streaming copy reference
    {
        size_t nb = 1u << 30; char *a, *b; CK(cudaMalloc(&a, nb)); CK(cudaMalloc(&b, nb));
        float us = timeit([&] { cudaMemcpyAsync(b, a, nb, cudaMemcpyDeviceToDevice); }, 5);
        printf("copy 1 GiB: %.1f us, %.2f TB/s (r+w)\n", us, 2.0 * nb / us / 1e6);
    }
    return 0;
}
