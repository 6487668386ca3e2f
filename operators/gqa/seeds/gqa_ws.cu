/* ksearch
{ "params": {"CTAS": [66, 132, 198, 264, 396, 528, 1048576], "CHUNK": [16, 32, 64, 128, 256, 512],
             "TILE": [16, 32], "STAGES": [2, 3, 4, 5, 6], "WPH": [1, 2], "MERGE": [0, 1, 2],
             "HINT": [0, 1], "PART": [0, 1], "PREQ": [0, 1], "IDXPF": [1, 2]},
  "constraints": ["STAGES*TILE*2080 + 256 <= 232448", "IDXPF == 1 || STAGES <= 4"],
  "scratch": {"part_o": ["float32", "(min(CTAS, cdiv(num_kv_indices, CHUNK)) + batch_size)*num_qo_heads*head_dim/(1 + PART)"],
              "part_lse": ["float32", "(min(CTAS, cdiv(num_kv_indices, CHUNK)) + batch_size)*num_qo_heads"],
              "done": ["int32", "batch_size*(MERGE == 2)", "zeroed"]},
  "launch": [
    {"kernel": "gqa_ws_partial", "grid": ["min(CTAS, cdiv(num_kv_indices, CHUNK))"], "block": ["(4*WPH + 1)*32"],
     "smem": "STAGES*TILE*2080 + 256",
     "args": ["q", "k_cache", "v_cache", "kv_indptr", "kv_indices", "sm_scale",
              "part_o", "part_lse", "done", "output", "lse", "batch_size", "num_pages", "num_kv_indices"]},
    {"kernel": "gqa_ws_merge", "grid": ["264*(MERGE != 2) + (MERGE == 2)"], "block": ["256"],
     "pdl": true,
     "args": ["kv_indptr", "part_o", "part_lse", "output", "lse", "batch_size", "num_kv_indices"]} ] }
*/
/*
 * Family "gqa_ws": warp-specialised producer/consumer decode over persistent, evenly
 * sized token ranges. Sm_90 only (cp.async.bulk, mbarrier transaction counts,
 * griddepcontrol).
 *
 * Roles. A CTA has 4*WPH consumer warps and one producer warp. The producer only
 * moves data: it reads the page indices of its tiles with plain coalesced loads
 * (IDXPF rounds of STAGES tiles ahead, held in registers), and for every tile issues
 * one 1 KiB bulk copy (cp.async.bulk, the TMA engine) per K page and per V page into
 * a STAGES-deep ring in shared memory, arming the stage's "full" mbarrier with the
 * tile's byte count. Consumers wait on "full", compute, and release the stage on its
 * "empty" mbarrier (one arrival per consumer thread); the producer waits on "empty"
 * before refilling. No __syncthreads in the main loop: a slow warp delays only the
 * refill of the stages it still reads, and the ring runs STAGES tiles ahead of the
 * slowest consumer (STAGES*TILE*2 KiB in flight per CTA: up to 195 KiB).
 * The producer holds no math state, so it runs on few registers; the consumers own
 * the rest (setmaxnreg is not used: at one CTA of at most 288 threads per SM the
 * register file is not what limits; see docs/design.md).
 *
 * Work split (as gqa_space_pages): G = min(CTAS, cdiv(N, CHUNK)) CTAs split the flat
 * token array kv_indices[0, N) into equal ranges of cdiv(N, G) tokens, ignoring
 * request boundaries, so any split of lengths gives one even wave of CTAs (CTAS a
 * multiple of the SM count: a persistent grid). Each consumer warp walks the requests
 * that meet its CTA's range; a request met by one CTA is written directly (bf16
 * output, lse); otherwise CTA c writes a partial (o_s normalised, lse_s) to slot c + b
 * (slots never collide, request b's are contiguous: G + B slots).
 *
 * Merge:
 *   MERGE 0 - a second launch merges (PDL: it starts when the partial kernel passes its
 *             main loop and waits for the grid before reading partials);
 *   MERGE 1 - the same, the second launch allowed to start at the partial kernel's start;
 *   MERGE 2 - one launch: the last warp to count a request's partials done (a zeroed
 *             per-request counter) hands the request to its CTA, which merges it at
 *             the end; the second launch is one CTA that waits and exits.
 *
 * Math (as gqa_space_pages): mma.sync m16n8k16 bf16 -> fp32 with tokens on M,
 *   S^T [16 tok x 8 heads] = K [16 x 128] . Q^T [128 x 8]    (K via ldmatrix)
 *   O^T [dims x 8 heads]  += V^T [dims x 16] . P^T [16 x 8]  (V^T via ldmatrix.trans,
 *                                                            P^T via movmatrix)
 * consumer warp w serves KV head w % 4 and output dims [128/WPH * (w/4), +128/WPH);
 * base-2 online softmax with lazy rescale. Rows are padded to 1040 bytes so ldmatrix
 * is conflict-free. Tokens of a tile past the range copy the tile's first page (the
 * byte count stays fixed) and are masked to p = 0.
 *
 * Params:
 *   CTAS   - most CTAs (132 SMs x 0.5 to 4; 1048576 = none);
 *   CHUNK  - fewest tokens per CTA (partial traffic against GPU fill at small N);
 *   TILE   - tokens per stage (16 or 32: one or two m-tiles per consumer warp);
 *   STAGES - ring depth (tiles in flight);
 *   WPH    - consumer warps per KV head (PV split over dims);
 *   MERGE  - see above;
 *   HINT   - bulk copies with an L2 evict_first policy (the cache is read once);
 *   PART   - partials in fp32 (0) or bf16 (1);
 *   PREQ   - q and bounds of the next request loaded one request ahead;
 *   IDXPF  - index prefetch depth, in rounds of STAGES tiles.
 * Shared memory: STAGES*TILE*2080 (ring) + 256 (mbarriers, merge list).
 */
#include <cuda_bf16.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "gqa_ws needs sm_90 or newer (cp.async.bulk, mbarrier transaction counts, griddepcontrol)"
#endif

#ifndef CTAS
#define CTAS 66
#endif
#ifndef CHUNK
#define CHUNK 16
#endif
#ifndef TILE
#define TILE 16
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef WPH
#define WPH 1
#endif
#ifndef MERGE
#define MERGE 0
#endif
#ifndef HINT
#define HINT 0
#endif
#ifndef PART
#define PART 0
#endif
#ifndef PREQ
#define PREQ 0
#endif
#ifndef IDXPF
#define IDXPF 1
#endif

#define NUM_QO_HEADS 32
#define NUM_KV_HEADS 4
#define HEAD_DIM 128
#define GROUP 8
#define PAGE_ELEMS (NUM_KV_HEADS * HEAD_DIM) /* bf16 per page: 512 */
#define PAGE_BYTES (PAGE_ELEMS * 2)          /* 1024 */
#define ROW_BYTES (PAGE_BYTES + 16)          /* padded shared-memory row */
#define HEAD_BYTES (HEAD_DIM * 2)            /* 256 */
#define FULL_MASK 0xffffffffu
#define NEG_BIG (-1.0e30f) /* "no token yet": finite, so exp2(NEG_BIG - NEG_BIG) = 1, never NaN */
#define LOG2E 1.4426950408889634f
#define CWARPS (NUM_KV_HEADS * WPH) /* consumer warps */
#define WARPS (CWARPS + 1)          /* and the producer */
#define THREADS (WARPS * 32)
#define DT (HEAD_DIM / 16 / WPH) /* 16-dim tiles of the PV product per warp */
#define MT (TILE / 16)           /* m-tiles per tile */
#define LOOK (STAGES * IDXPF)    /* tiles whose indices the producer holds */

static_assert(CHUNK >= 1 && CTAS >= 1, "CHUNK and CTAS are positive");
static_assert(MERGE >= 0 && MERGE <= 2, "MERGE is 0, 1 or 2");
static_assert(HINT == 0 || HINT == 1, "HINT is 0 or 1");
static_assert(TILE == 16 || TILE == 32, "TILE is 16 or 32");
static_assert(STAGES >= 2 && STAGES <= 8, "STAGES in [2, 8]");
static_assert(WPH == 1 || WPH == 2, "WPH is 1 or 2");
static_assert(PART == 0 || PART == 1, "PART is 0 (fp32) or 1 (bf16)");
static_assert(PREQ == 0 || PREQ == 1, "PREQ is 0 or 1");
static_assert(IDXPF == 1 || IDXPF == 2, "IDXPF is 1 or 2");
static_assert(THREADS == (4 * WPH + 1) * 32, "keep the block expression in the header in sync");

constexpr int UNIT_BYTES = 2 * TILE * ROW_BYTES; /* K rows, then V rows */
constexpr int RING_BYTES = STAGES * UNIT_BYTES;
constexpr int FULL_OFF = RING_BYTES;          /* STAGES mbarriers */
constexpr int EMPTY_OFF = FULL_OFF + 8 * 8;   /* STAGES mbarriers */
constexpr int MISC_OFF = EMPTY_OFF + 8 * 8;   /* merge count and list */
constexpr int SMEM_BYTES = RING_BYTES + 256;
static_assert(SMEM_BYTES == STAGES * TILE * 2080 + 256, "keep the smem expression in the header in sync");
static_assert(MISC_OFF + 16 <= SMEM_BYTES, "barriers and the merge list fit");
static_assert(SMEM_BYTES <= 232448, "the constraint in the header keeps this within the opt-in limit");
static_assert(FULL_OFF % 8 == 0 && UNIT_BYTES % 16 == 0 && ROW_BYTES % 16 == 0, "alignment of bars and rows");

typedef unsigned long long u64;

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

__device__ __forceinline__ unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ u64 evict_first_policy()
{
    u64 p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
    return p;
}

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/* wait until the phase of the given parity has completed */
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity)
{
    asm volatile("{\n"
                 ".reg .pred P1;\n"
                 "LAB_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
                 "@P1 bra.uni DONE;\n"
                 "bra.uni LAB_WAIT;\n"
                 "DONE:\n"
                 "}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

/* one bulk copy global -> this CTA's shared memory, completing on mbarrier bar */
__device__ __forceinline__ void bulk_copy(unsigned dst, const void *src, unsigned bytes, unsigned bar, u64 policy)
{
#if HINT
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, "
                 "[%3], %4;\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar), "l"(policy)
                 : "memory");
#else
    (void)policy;
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
#endif
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}

/* d += a . b, m16n8k16, bf16 inputs, fp32 accumulators */
__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* transpose an 8x8 bf16 matrix held in the mma fragment layout across the warp */
__device__ __forceinline__ unsigned movmatrix_trans(unsigned x)
{
    unsigned y;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&v);
}

__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

/* the partial grid and its chunk, the same in both kernels */
__device__ __forceinline__ int grid_ctas(int n) { return min(CTAS, (n + CHUNK - 1) / CHUNK); }

/* kv_indptr[b] clamped to [0, n] (b in [0, batch_size]) */
__device__ __forceinline__ int bound(const int *__restrict__ kv_indptr, int b, int n)
{
    return min(max(__ldg(kv_indptr + b), 0), n);
}

/* Q^T of request b, KV head g as B fragments: qb[kk] = {q[head r][16kk+2c, +1], q[head r][16kk+2c+8, +9]} */
__device__ __forceinline__ void load_q(unsigned (&qb)[HEAD_DIM / 16][2], const __nv_bfloat16 *__restrict__ q, int b,
                                       int g, int r, int c)
{
    const unsigned *qrow =
        reinterpret_cast<const unsigned *>(q + ((size_t)b * NUM_QO_HEADS + g * GROUP + r) * HEAD_DIM);
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
        qb[kk][0] = __ldg(qrow + kk * 8 + c);
        qb[kk][1] = __ldg(qrow + kk * 8 + 4 + c);
    }
}

/* partial stores: fp32, or bf16 in the same (float-typed) buffer */
__device__ __forceinline__ void store_part(float *part_o, size_t i, float v)
{
#if PART
    reinterpret_cast<__nv_bfloat16 *>(part_o)[i] = __float2bfloat16_rn(v);
#else
    part_o[i] = v;
#endif
}

/* 4 consecutive partial values from L2 (written by other CTAs of this grid) */
__device__ __forceinline__ float4 load_part4(const float *part_o, size_t i)
{
#if PART
    const uint2 raw = __ldcg(reinterpret_cast<const uint2 *>(reinterpret_cast<const __nv_bfloat16 *>(part_o) + i));
    const __nv_bfloat162 lo = *reinterpret_cast<const __nv_bfloat162 *>(&raw.x);
    const __nv_bfloat162 hi = *reinterpret_cast<const __nv_bfloat162 *>(&raw.y);
    return make_float4(__low2float(lo), __high2float(lo), __low2float(hi), __high2float(hi));
#else
    return __ldcg(reinterpret_cast<const float4 *>(part_o + i));
#endif
}

/* One warp's sums over the partial slots s0, s0 + stride, ... (n of them) of query head `head`
   (lane: dims 4*lane .. 4*lane+3): the running max m (warp-uniform; -inf for no slot), the sum
   L of 2^(lse_s - m) (reduced over the warp) and this lane's sums of 2^(lse_s - m) o_s. DEPTH
   partials are loaded before any is used, each batch of 32 with its lse (lane s holds slot s's)
   in the same round trip, against a running max: reading every lse first and then 8 partials at
   a time took 1 + cdiv(n, 8) round trips. In the partial kernel (last-CTA merge) DEPTH is 8, for
   its registers; in the merge launch 16. */
template <int DEPTH>
__device__ __forceinline__ void merge_sums(const float *part_o, const float *part_lse, int head, int s0, int stride,
                                           int n, int lane, float &m, float &L, float4 &acc)
{
    static_assert(DEPTH == 8 || DEPTH == 16 || DEPTH == 32, "DEPTH divides a batch of 32 slots");
    m = neg_inf(); /* warp-uniform running max; L: this lane's slots' weights until the end */
    L = 0.0f;
    acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int sbase = 0; sbase < n; sbase += 32) { /* warp-uniform */
        const int s = sbase + lane;
        const float ls = s < n ? __ldcg(part_lse + (size_t)(s0 + s * stride) * NUM_QO_HEADS + head) : neg_inf();
        const int cnt = min(32, n - sbase);
        for (int k = 0; k < cnt; k += DEPTH) {
            float4 p[DEPTH];
#pragma unroll
            for (int j = 0; j < DEPTH; j++)
                p[j] = (k + j < cnt) ? load_part4(part_o, ((size_t)(s0 + (sbase + k + j) * stride) * NUM_QO_HEADS + head) *
                                                              HEAD_DIM + lane * 4)
                                     : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (k == 0) { /* the batch's lse has arrived with its first partials: fold it in */
                float mk = fmaxf(m, ls);
#pragma unroll
                for (int off = 16; off >= 1; off /= 2)
                    mk = fmaxf(mk, __shfl_xor_sync(FULL_MASK, mk, off));
                if (mk != neg_inf()) {
                    const float rescale = exp2f(m - mk); /* 0 while m is -inf */
                    L *= rescale;
                    acc.x *= rescale;
                    acc.y *= rescale;
                    acc.z *= rescale;
                    acc.w *= rescale;
                    m = mk;
                }
            }
            const float w = (ls == neg_inf()) ? 0.0f : exp2f(ls - m); /* slot s's weight, 0 past the end */
            if (k == 0)
                L += w;
#pragma unroll
            for (int j = 0; j < DEPTH; j++) {
                const float ws = __shfl_sync(FULL_MASK, w, (k + j) & 31); /* p[j] = 0 past cnt */
                acc.x = fmaf(ws, p[j].x, acc.x);
                acc.y = fmaf(ws, p[j].y, acc.y);
                acc.z = fmaf(ws, p[j].z, acc.z);
                acc.w = fmaf(ws, p[j].w, acc.w);
            }
        }
    }
#pragma unroll
    for (int off = 16; off >= 1; off /= 2)
        L += __shfl_xor_sync(FULL_MASK, L, off);
}

/* request b's output and lse of query head `head` from one warp's sums */
__device__ __forceinline__ void merge_write(__nv_bfloat16 *output, float *lse, int b, int head, int lane, float m, float L,
                                            float4 acc)
{
    const float inv = (L > 0.0f) ? 1.0f / L : 0.0f;
    const size_t row = (size_t)b * NUM_QO_HEADS + head;
    __nv_bfloat162 *out = reinterpret_cast<__nv_bfloat162 *>(output + row * HEAD_DIM + lane * 4);
    out[0] = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
    out[1] = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
    if (lane == 0)
        lse[row] = (L > 0.0f) ? m + log2f(L) : neg_inf();
}

/* One warp merges the n >= 2 partial slots s0 .. s0+n-1 of request b, query head `head` */
template <int DEPTH>
__device__ __forceinline__ void merge_head(const float *part_o, const float *part_lse, __nv_bfloat16 *output,
                                           float *lse, int b, int head, int s0, int n, int lane)
{
    float m, L;
    float4 acc;
    merge_sums<DEPTH>(part_o, part_lse, head, s0, 1, n, lane, m, L, acc);
    merge_write(output, lse, b, head, lane, m, L, acc);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gqa_ws_partial(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k_cache,
               const __nv_bfloat16 *__restrict__ v_cache, const int *__restrict__ kv_indptr,
               const int *__restrict__ kv_indices, float sm_scale, float *__restrict__ part_o,
               float *__restrict__ part_lse, int *__restrict__ done, __nv_bfloat16 *__restrict__ output,
               float *__restrict__ lse, int batch_size, int num_pages, int num_kv_indices)
{
    extern __shared__ __align__(128) unsigned char smem_raw[];
    int *const s_misc = reinterpret_cast<int *>(smem_raw + MISC_OFF); /* [0]: merge count, [1..3]: requests */
    const unsigned ring = smem_addr(smem_raw);
    const unsigned full = smem_addr(smem_raw + FULL_OFF);
    const unsigned empty = smem_addr(smem_raw + EMPTY_OFF);

#if MERGE != 0
    pdl_launch_dependents(); /* the second launch may start now (it waits for this grid) */
#endif
    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int B = batch_size;
    const int N = max(num_kv_indices, 0);
    const int G = grid_ctas(N);
    const int cta = blockIdx.x;
    if (B <= 0 || N <= 0 || num_pages <= 0 || cta >= G)
        return;
    const int chunk = (N + G - 1) / G;
    const int R0 = (int)min((long long)cta * chunk, (long long)N);
    const int R1 = min(R0 + chunk, N);
    const int n_tiles = (R1 - R0 + TILE - 1) / TILE;
    const bool producer = warp == CWARPS;

    if (tid == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(full + 8 * s, 1);
            mbar_init(empty + 8 * s, CWARPS * 32); /* every consumer thread */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        s_misc[0] = 0;
    }

    /* the producer's lane serves token tr of every tile; its first LOOK tiles' pages,
       loaded before anything else (one round trip, overlapping the request search) */
    const int tr = lane % TILE;
    auto load_idx = [&](int v) {
        const int t0 = R0 + v * TILE; /* the tile's first token: real while v < n_tiles */
        const int t = t0 + tr;
        int p = 0;
        if (v < n_tiles) {
            /* past the range: the tile's first page again (finite data, masked by the consumers).
               Page 0 for every CTA's padding was one L2 slice serving thousands of copies of one
               page: at b16_kv8636 it cost gqa_ws 10 us (BENCHMARKS.md, seventeenth session). */
            p = __ldg(kv_indices + (t < R1 ? t : t0));
            if ((unsigned)p >= (unsigned)num_pages)
                p = 0;
        }
        return p;
    };
    int idx[LOOK];
    if (producer) {
#pragma unroll
        for (int j = 0; j < LOOK; j++)
            idx[j] = load_idx(j);
    }

    /* ---- meanwhile: the request holding R0, and empty requests this CTA owns ---- */
    int cnt = 0;
    for (int base = 0; base < B; base += THREADS) {
        const int bb = base + tid;
        bool pred = false;
        if (bb < B) {
            const int sb = bound(kv_indptr, bb, N);
            const int eb = bound(kv_indptr, bb + 1, N);
            pred = sb <= R0;
            if (eb <= sb && min(sb / chunk, G - 1) == cta) { /* empty request: output 0, lse -inf */
                uint4 *o4 = reinterpret_cast<uint4 *>(output + (size_t)bb * NUM_QO_HEADS * HEAD_DIM);
                for (int i = 0; i < NUM_QO_HEADS * HEAD_DIM / 8; i++)
                    o4[i] = make_uint4(0u, 0u, 0u, 0u);
                for (int h = 0; h < NUM_QO_HEADS; h++)
                    lse[(size_t)bb * NUM_QO_HEADS + h] = neg_inf();
            }
        }
        cnt += __syncthreads_count(pred); /* also publishes the barriers' initialisation */
    }
    if (R0 >= R1)
        return; /* block-uniform */

    if (producer) {
        /* ---- the producer: tile v into stage v % STAGES, once its consumers released it ---- */
        const u64 policy = HINT ? evict_first_policy() : 0ull;
        for (int v0 = 0; v0 < n_tiles; v0 += LOOK) {
#pragma unroll
            for (int j = 0; j < LOOK; j++) {
                const int v = v0 + j;
                if (v >= n_tiles)
                    break; /* warp-uniform */
                const int s = j % STAGES; /* = v % STAGES: LOOK is a multiple of STAGES */
                if (v >= STAGES)
                    mbar_wait(empty + 8 * s, (unsigned)(((v / STAGES) - 1) & 1));
                if (lane == 0)
                    mbar_arrive_expect_tx(full + 8 * s, 2 * TILE * PAGE_BYTES);
                __syncwarp();
                const unsigned dst = ring + (unsigned)(s * UNIT_BYTES);
                const size_t off = (size_t)idx[j] * PAGE_ELEMS;
#if TILE == 16
                bulk_copy(dst + (unsigned)(((lane >> 4) * TILE + tr) * ROW_BYTES), (lane < 16 ? k_cache : v_cache) + off,
                          PAGE_BYTES, full + 8 * s, policy);
#else
                bulk_copy(dst + (unsigned)(tr * ROW_BYTES), k_cache + off, PAGE_BYTES, full + 8 * s, policy);
                bulk_copy(dst + (unsigned)((TILE + tr) * ROW_BYTES), v_cache + off, PAGE_BYTES, full + 8 * s, policy);
#endif
                idx[j] = load_idx(v + LOOK);
            }
        }
    } else {
        /* ---- the consumer: warp (g, dpart), walking the requests of the range ---- */
        const int g = warp % NUM_KV_HEADS;
        const int dpart = warp / NUM_KV_HEADS;
        const int r = lane >> 2; /* fragment row */
        const int c = lane & 3;  /* fragment column pair */
        const float qk_scale = sm_scale * LOG2E;

        int cb = cnt - 1; /* current request: -1 before the first, B after the last */
        int cs, ce;       /* its tokens [cs, ce) */
        if (cb >= 0) {
            cs = bound(kv_indptr, cb, N);
            ce = bound(kv_indptr, cb + 1, N);
        } else {
            cs = 0;
            ce = bound(kv_indptr, 0, N);
        }
        unsigned qb[HEAD_DIM / 16][2]; /* q of cb */
    #if PREQ
        unsigned qn[HEAD_DIM / 16][2]; /* q of cb + 1 (prefetched) */
        int ne = 0;                    /* end of request cb + 1 (prefetched) */
    #endif
        if (cb >= 0)
            load_q(qb, q, cb, g, r, c);
    #if PREQ
        if (cb + 1 < B) {
            load_q(qn, q, cb + 1, g, r, c);
            ne = bound(kv_indptr, cb + 2, N);
        }
    #endif

        float m0 = NEG_BIG, m1 = NEG_BIG; /* running max of heads 2c, 2c+1 (shared by the warp) */
        float l0 = 0.0f, l1 = 0.0f;       /* this thread's part of the running sums */
        float o[DT][4];                   /* O^T fragments: dims 16*(dpart*DT + dt) + r (+8), heads 2c, 2c+1 */
    #pragma unroll
        for (int dt = 0; dt < DT; dt++)
            o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
        bool have = false; /* the state holds tokens of cb */

        /* ldmatrix lane addressing: matrix mi = lane / 8 supplies row lane % 8 */
        const int mi = lane >> 3;
        const int x = lane & 7;
        const unsigned k_lane = (unsigned)((x + (mi & 1) * 8) * ROW_BYTES + g * HEAD_BYTES + (mi >> 1) * 16);
        const unsigned v_lane =
            (unsigned)(TILE * ROW_BYTES + (x + (mi >> 1) * 8) * ROW_BYTES + g * HEAD_BYTES + (mi & 1) * 16 +
                       dpart * DT * 32);

        /* write the state of request cb (tokens [cs, ce)) out and reset it */
        auto flush = [&]() {
    #pragma unroll
            for (int off = 4; off <= 16; off *= 2) {
                l0 += __shfl_xor_sync(FULL_MASK, l0, off);
                l1 += __shfl_xor_sync(FULL_MASK, l1, off);
            }
            const float inv0 = (l0 > 0.0f) ? 1.0f / l0 : 0.0f, inv1 = (l1 > 0.0f) ? 1.0f / l1 : 0.0f;
            const float ls0 = (l0 > 0.0f) ? m0 + log2f(l0) : neg_inf();
            const float ls1 = (l1 > 0.0f) ? m1 + log2f(l1) : neg_inf();
            const int c_first = cs / chunk, c_last = min((ce - 1) / chunk, G - 1);
            const int h0 = g * GROUP + 2 * c; /* query heads h0, h0 + 1 */
            if (c_first == c_last) {          /* the whole request is in this CTA */
                __nv_bfloat16 *out = output + ((size_t)cb * NUM_QO_HEADS + h0) * HEAD_DIM;
    #pragma unroll
                for (int dt = 0; dt < DT; dt++) {
                    const int d = 16 * (dpart * DT + dt) + r;
                    out[d] = __float2bfloat16_rn(o[dt][0] * inv0);
                    out[HEAD_DIM + d] = __float2bfloat16_rn(o[dt][1] * inv1);
                    out[d + 8] = __float2bfloat16_rn(o[dt][2] * inv0);
                    out[HEAD_DIM + d + 8] = __float2bfloat16_rn(o[dt][3] * inv1);
                }
                if (r == 0 && dpart == 0) {
                    lse[(size_t)cb * NUM_QO_HEADS + h0] = ls0;
                    lse[(size_t)cb * NUM_QO_HEADS + h0 + 1] = ls1;
                }
            } else {
                const size_t row0 = (size_t)(cta + cb) * NUM_QO_HEADS + h0;
    #pragma unroll
                for (int dt = 0; dt < DT; dt++) {
                    const int d = 16 * (dpart * DT + dt) + r;
                    store_part(part_o, row0 * HEAD_DIM + d, o[dt][0] * inv0);
                    store_part(part_o, (row0 + 1) * HEAD_DIM + d, o[dt][1] * inv1);
                    store_part(part_o, row0 * HEAD_DIM + d + 8, o[dt][2] * inv0);
                    store_part(part_o, (row0 + 1) * HEAD_DIM + d + 8, o[dt][3] * inv1);
                }
                if (r == 0 && dpart == 0) {
                    part_lse[row0] = ls0;
                    part_lse[row0 + 1] = ls1;
                }
    #if MERGE == 2
                __threadfence(); /* this lane's partial stores before the count */
                __syncwarp();
                if (lane == 0) {
                    const int n_parts = c_last - c_first + 1;
                    if (atomicAdd(done + cb, 1) == n_parts * CWARPS - 1) { /* the last warp of all */
                        const int k = atomicAdd(s_misc, 1);
                        if (k < 3)
                            s_misc[1 + k] = cb;
                    }
                }
    #endif
            }
            m0 = m1 = NEG_BIG;
            l0 = l1 = 0.0f;
    #pragma unroll
            for (int dt = 0; dt < DT; dt++)
                o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
            have = false;
        };

        /* move to the next request that has tokens (PREQ: q and bounds of the one after prefetched) */
        auto advance = [&]() {
            cb++;
            cs = ce;
            if (cb >= B) {
                ce = 0x7fffffff;
                return;
            }
    #if PREQ
            ce = ne;
    #pragma unroll
            for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
                qb[kk][0] = qn[kk][0];
                qb[kk][1] = qn[kk][1];
            }
            if (ce <= cs) { /* empty request(s): written by their owner CTA; skip */
    #else
            ce = bound(kv_indptr, cb + 1, N);
            if (ce <= cs) { /* empty request(s): written by their owner CTA; skip */
    #endif
                while (cb < B && bound(kv_indptr, cb + 1, N) <= cs)
                    cb++;
                if (cb >= B) {
                    ce = 0x7fffffff;
                    return;
                }
                ce = bound(kv_indptr, cb + 1, N);
    #if PREQ
                load_q(qb, q, cb, g, r, c);
    #endif
            }
    #if PREQ
            if (cb + 1 < B) {
                load_q(qn, q, cb + 1, g, r, c);
                ne = bound(kv_indptr, cb + 2, N);
            }
    #else
            load_q(qb, q, cb, g, r, c);
    #endif
        };

        /* the tokens [lo, hi) of m-tile at flat position a, all of request cb, from slot base `us` */
        auto process = [&](unsigned us, int mt, int a, int lo, int hi) {
            const unsigned kt = us + (unsigned)(mt * 16 * ROW_BYTES);
            float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    #pragma unroll
            for (int kk = 0; kk < HEAD_DIM / 16; kk += 2) {
                unsigned a0[4], a1[4];
                ldmatrix_x4(a0, kt + k_lane + (unsigned)(kk * 32));
                ldmatrix_x4(a1, kt + k_lane + (unsigned)((kk + 1) * 32));
                mma_bf16(sa, a0, qb[kk][0], qb[kk][1]);
                mma_bf16(sb, a1, qb[kk + 1][0], qb[kk + 1][1]);
            }
            /* s[0]: token r, head 2c; s[1]: token r, head 2c+1; s[2], s[3]: token r+8 */
            const int t_lo = a + r, t_hi = a + r + 8;
            const bool ok_lo = t_lo >= lo && t_lo < hi, ok_hi = t_hi >= lo && t_hi < hi;
            const float s0 = ok_lo ? (sa[0] + sb[0]) * qk_scale : neg_inf();
            const float s1 = ok_lo ? (sa[1] + sb[1]) * qk_scale : neg_inf();
            const float s2 = ok_hi ? (sa[2] + sb[2]) * qk_scale : neg_inf();
            const float s3 = ok_hi ? (sa[3] + sb[3]) * qk_scale : neg_inf();

            float mx0 = fmaxf(s0, s2), mx1 = fmaxf(s1, s3);
    #pragma unroll
            for (int off = 4; off <= 16; off *= 2) {
                mx0 = fmaxf(mx0, __shfl_xor_sync(FULL_MASK, mx0, off));
                mx1 = fmaxf(mx1, __shfl_xor_sync(FULL_MASK, mx1, off));
            }
            const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1); /* >= 1 valid token: finite */
            if (__any_sync(FULL_MASK, mn0 > m0 || mn1 > m1)) {      /* lazy rescale */
                const float a0 = exp2f(m0 - mn0), a1 = exp2f(m1 - mn1);
                l0 *= a0;
                l1 *= a1;
    #pragma unroll
                for (int dt = 0; dt < DT; dt++) {
                    o[dt][0] *= a0;
                    o[dt][1] *= a1;
                    o[dt][2] *= a0;
                    o[dt][3] *= a1;
                }
                m0 = mn0;
                m1 = mn1;
            }
            const float p0 = exp2f(s0 - m0), p1 = exp2f(s1 - m1), p2 = exp2f(s2 - m0), p3 = exp2f(s3 - m1);
            l0 += p0 + p2;
            l1 += p1 + p3;
            const unsigned pb0 = movmatrix_trans(pack_bf16(p0, p1)); /* P^T, tokens 0-7 */
            const unsigned pb1 = movmatrix_trans(pack_bf16(p2, p3)); /* tokens 8-15 */
            const unsigned vt = us + (unsigned)(mt * 16 * ROW_BYTES) + v_lane;
    #pragma unroll
            for (int dt = 0; dt < DT; dt++) {
                unsigned av[4];
                ldmatrix_x4_trans(av, vt + (unsigned)(dt * 32));
                mma_bf16(o[dt], av, pb0, pb1);
            }
        };

        for (int u = 0; u < n_tiles; u++) {
            const int s = u % STAGES;
            mbar_wait(full + 8 * s, (unsigned)((u / STAGES) & 1)); /* tile u's pages landed */
            const unsigned us = ring + (unsigned)(s * UNIT_BYTES);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                const int a = R0 + u * TILE + mt * 16;
                if (a >= R1)
                    break; /* uniform */
                const int e = min(a + 16, R1);
                for (;;) {
                    if (cb >= 0 && cb < B) {
                        const int lo = max(a, cs), hi = min(e, ce);
                        if (lo < hi) {
                            process(us, mt, a, lo, hi);
                            have = true;
                        }
                    }
                    if (ce > e)
                        break; /* the request goes on past this m-tile */
                    if (have)
                        flush();
                    advance();
                }
            }
            /* every lane releases its own reads of stage s: one arrival per warp after a
               __syncwarp is ordered too, but compute-sanitizer's racecheck does not see it so
               and reported the producer's refill as a race (2 stages, 2026-11-27) */
            mbar_arrive(empty + 8 * s);
        }
        if (have && cb >= 0 && cb < B)
            flush(); /* the request goes on in the next CTA */
    }

#if MERGE == 0
    pdl_launch_dependents();
#endif
#if MERGE == 2
    /* this CTA finished the last partial of up to three requests: merge them */
    __syncthreads();
    const int n_merge = min(s_misc[0], 3);
    __threadfence();
    for (int k = 0; k < n_merge; k++) {
        const int b = s_misc[1 + k];
        const int sb = bound(kv_indptr, b, N), eb = bound(kv_indptr, b + 1, N);
        const int c_first = sb / chunk, c_last = min((eb - 1) / chunk, G - 1);
        for (int head = warp; head < NUM_QO_HEADS; head += WARPS)
            merge_head<8>(part_o, part_lse, output, lse, b, head, c_first + b, c_last - c_first + 1, lane);
    }
#endif
}

/* The merge launch (MERGE 0 and 1), one launch of MERGE_CTAS CTAs of 8 warps whatever the
   batch: each request of n >= 2 partial slots gets G warps per query head, G the fewest powers
   of two (at most 8) that read its slots in one round trip of MERGE_DEPTH partials a warp, so
   that the heads of short requests take one warp and a long request's heads many. 8 warps make
   a CTA's work, a "virtual CTA" of 8/G heads, and request b has 32*G/8 of them. Every CTA
   numbers the virtual CTAs by a scan of the requests' counts (kv_indptr is an input: the scan
   does not wait for the partial grid) and takes those of its index modulo the grid; a head's G
   warps meet in shared memory, halving. The launch it replaced, a warp per head in a CTA per
   (request, KV head), read a long request's slots 16 at a time: at b16 with one request holding
   61% of the tokens, 80-160 slots in 5-10 dependent round trips (mla_decode's seeds measured the
   same shape of merge, BENCHMARKS.md thirteenth session). Requests of one slot were written by
   the partial kernel, and so were empty ones. With MERGE == 2 it is one CTA that only waits. */
#define MERGE_CTAS 264 /* the header's merge grid: two CTAs an SM of an H100 or H200, one wave */
#define MERGE_DEPTH 16 /* partials a warp loads in one round trip */
#define MERGE_WARPS 8  /* a merge CTA's warps: 256 threads */
#define MERGE_LIST 32  /* a pass's virtual CTAs per CTA, at most: 256 requests of at most 32 each, over 264 CTAs */
static_assert(MERGE_LIST * MERGE_CTAS >= MERGE_WARPS * 32 * NUM_QO_HEADS,
              "a pass's virtual CTAs (256 requests, at most 32 each) fit the lists");

/* warps per head for a request of n partial slots: 0 when there is nothing to merge */
__device__ __forceinline__ int merge_warps(int n)
{
    if (n <= 1)
        return 0;
    int g = 1;
    while (g < MERGE_WARPS && g * MERGE_DEPTH < n)
        g *= 2;
    return g;
}

/* exclusive scan of v over the CTA's 256 threads; *total: the sum (s_warp: 8 ints, free on entry and exit) */
__device__ __forceinline__ int block_scan(int v, int *s_warp, int *total)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int x = v;
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
        const int y = __shfl_up_sync(FULL_MASK, x, off);
        if (lane >= off)
            x += y;
    }
    if (lane == 31)
        s_warp[warp] = x;
    __syncthreads();
    *total = 0;
    for (int w = 0; w < MERGE_WARPS; w++) {
        if (w < warp)
            x += s_warp[w];
        *total += s_warp[w];
    }
    __syncthreads();
    return x - v;
}

extern "C" __global__ void __launch_bounds__(256, 2)
gqa_ws_merge(const int *__restrict__ kv_indptr, const float *__restrict__ part_o,
                const float *__restrict__ part_lse, __nv_bfloat16 *__restrict__ output, float *__restrict__ lse,
                int batch_size, int num_kv_indices)
{
#if MERGE == 2
    pdl_wait();
    (void)kv_indptr, (void)part_o, (void)part_lse, (void)output, (void)lse, (void)batch_size, (void)num_kv_indices;
#else
    __shared__ float2 s_ml[MERGE_WARPS];        /* each warp's running max and sum */
    __shared__ float4 s_acc[MERGE_WARPS][32];   /* and its lanes' sums */
    __shared__ int s_warp[MERGE_WARPS];         /* the scan's warp totals */
    __shared__ int s_work[MERGE_LIST][4];       /* this pass's virtual CTAs: request, index, slots, first slot */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int grid = (int)gridDim.x;
    const int N = max(num_kv_indices, 0);
    int done = 0; /* virtual CTAs of the requests before this pass */
    for (int base = 0; base < batch_size; base += MERGE_WARPS * 32) { /* block-uniform */
        const int b = base + tid;
        int n = 0, s0 = 0;
        if (b < batch_size && N > 0) {
            const int G = grid_ctas(N);
            const int chunk = (N + G - 1) / G;
            const int sb = bound(kv_indptr, b, N), eb = bound(kv_indptr, b + 1, N);
            if (eb > sb) {
                const int c_first = sb / chunk, c_last = min((eb - 1) / chunk, G - 1);
                n = c_last - c_first + 1;
                s0 = c_first + b;
            }
        }
        const int v = merge_warps(n) * NUM_QO_HEADS / MERGE_WARPS; /* this request's virtual CTAs */
        int total;
        const int first = block_scan(v, s_warp, &total);
        /* this CTA's virtual CTAs of the pass: done + k0 + k*grid for k < kn, at most MERGE_LIST */
        const int k0 = ((int)blockIdx.x - done % grid + grid) % grid;
        const int kn = min(total > k0 ? (total - k0 + grid - 1) / grid : 0, MERGE_LIST); /* the header's grid: never clamped */
        for (int k = first + v > k0 ? (max(first - k0, 0) + grid - 1) / grid : kn; k < kn && k0 + k * grid < first + v; k++) {
            s_work[k][0] = b;
            s_work[k][1] = k0 + k * grid - first;
            s_work[k][2] = n;
            s_work[k][3] = s0;
        }
        __syncthreads();
        if (kn > 0)
            pdl_wait(); /* the partial grid has finished and its stores are visible (at once after the first) */
        for (int k = 0; k < kn; k++) { /* block-uniform */
            const int wb = s_work[k][0], wj = s_work[k][1], wn = s_work[k][2], ws0 = s_work[k][3];
            const int G = merge_warps(wn);
            const int grp = warp % G;
            const int head = wj * (MERGE_WARPS / G) + warp / G;
            float m, L;
            float4 acc;
            merge_sums<MERGE_DEPTH>(part_o, part_lse, head, ws0 + grp, G, wn > grp ? (wn - grp + G - 1) / G : 0, lane, m, L,
                                    acc);
            if (G > 1) { /* block-uniform: a head's warps meet, halving */
                if (lane == 0)
                    s_ml[warp] = make_float2(m, L);
                s_acc[warp][lane] = acc;
                for (int d = G / 2; d >= 1; d /= 2) {
                    __syncthreads();
                    if (grp < d) {
                        const float2 o = s_ml[warp + d];
                        const float4 q = s_acc[warp + d][lane];
                        const float mt = fmaxf(m, o.x);
                        const float wa = m == neg_inf() ? 0.0f : exp2f(m - mt);
                        const float wb = o.x == neg_inf() ? 0.0f : exp2f(o.x - mt);
                        m = mt;
                        L = L * wa + o.y * wb;
                        acc = make_float4(acc.x * wa + q.x * wb, acc.y * wa + q.y * wb, acc.z * wa + q.z * wb,
                                          acc.w * wa + q.w * wb);
                        if (d > 1) {
                            if (lane == 0)
                                s_ml[warp] = make_float2(m, L);
                            s_acc[warp][lane] = acc;
                        }
                    }
                }
                __syncthreads(); /* shared memory free for the next virtual CTA */
            }
            if (grp == 0)
                merge_write(output, lse, wb, head, lane, m, L, acc);
        }
        done += total;
        __syncthreads(); /* s_work free for the next pass */
    }
#endif
}
