/* ksearch
{ "params": {"CHUNK": [128, 64, 256, 512], "CTAS": [132, 66, 100, 120], "STAGES": [5, 4, 3], "NC": [2, 1],
             "KB": [9, 3, 6, 18], "PVB": [2, 1, 4], "MERGE": [2, 0, 1], "HINT": [0, 1], "PART": [0, 1]},
  "constraints": ["(36 / NC) % KB == 0", "(8 / NC) % PVB == 0", "18496 + STAGES*37392 + NC*10944 <= 232448"],
  "scratch": {"part_o": ["float32", "(min(CTAS, cdiv(num_kv_indices, CHUNK)) + batch_size)*num_qo_heads*head_dim_ckv/(1 + PART)"],
              "part_lse": ["float32", "(min(CTAS, cdiv(num_kv_indices, CHUNK)) + batch_size)*num_qo_heads"],
              "done": ["int32", "batch_size*(MERGE == 2)", "zeroed"]},
  "launch": [
    {"kernel": "mla_ws_partial", "grid": ["min(CTAS, cdiv(num_kv_indices, CHUNK))"], "block": ["NC*128 + 32"],
     "smem": "18496 + STAGES*37392 + NC*10944",
     "args": ["q_nope", "q_pe", "ckv_cache", "kpe_cache", "kv_indptr", "kv_indices", "sm_scale",
              "part_o", "part_lse", "done", "output", "lse", "batch_size", "num_pages", "num_kv_indices"]},
    {"kernel": "mla_ws_merge", "grid": ["batch_size*num_qo_heads*(MERGE != 2) + (MERGE == 2)"], "block": ["128"], "pdl": true,
     "args": ["kv_indptr", "part_o", "part_lse", "output", "lse", "batch_size", "num_kv_indices"]} ] }
*/
/*
 * Family "mla_ws" (Hopper, sm_90a): warp-specialised, persistent MLA decode in the shape
 * FlashMLA uses for memory-bound decode, adapted to page size 1 (a token's ckv row, 1 KiB,
 * and its kpe row, 128 B, are contiguous; the rows are scattered through kv_indices).
 *
 * Roles (block = NC*128 + 32 threads):
 *   warps 0 .. 4*NC-1  NC consumer warpgroups (math only: wgmma, softmax, write-out);
 *   warp 4*NC          the producer: it only moves data. Lane t reads the page index of
 *                      token t of a 32-token ring stage with plain coalesced loads, two
 *                      stages ahead of the stage it fills; per stage it waits the stage's
 *                      "empty" mbarrier, arms its "full" mbarrier with expect_tx(32*1152)
 *                      and issues 2 bulk copies per token (cp.async.bulk ckv 1024 B, kpe
 *                      128 B) into a row padded to 1168 B (ldmatrix rows in distinct banks).
 *   Consumers wait "full" (parity = use count & 1), read the rows with ldmatrix only, and
 *   every consumer thread arrives on "empty" when done with the tile (count NC*128).
 *   No __syncthreads after the prologue: consumers sync with named barriers (bar.sync
 *   1 = all consumers, 2+g = warpgroup g), the producer never joins one.
 *
 * Math (the transposed formulation of mla_wgmma, which the no-swizzle bulk copies allow:
 * a copied token row cannot be a wgmma shared-memory operand, so K and V go through
 * ldmatrix into A registers and the kernel-written Q and P are the B operands):
 *   S^T [64 tok x 16 heads] = K [64 x 576] . Q^T       wgmma m64n16k16, A = K (ldmatrix)
 *   O^T [512 x 16 heads]   += V^T [512 x 64] . P^T     A = V^T (ldmatrix.trans), B = P
 * A tile is 64 tokens = two 32-token ring stages (any two ring slots: each warp and each
 * PV k-step picks its slot, so the ring need not be a multiple of the tile).
 *
 * What the two consumer warpgroups do (NC = 2), and why this split rather than
 * FlashMLA's ping-pong: both work on the SAME tile; warpgroup g computes the scores over
 * its half of K's 576 dims (18 of the 36 k-steps, its half of Q in shared memory) and
 * owns output dims [256g, 256g+256) of the PV. The partial scores meet in shared memory
 * (one all-consumer barrier per tile, double-buffered by step parity so no second one is
 * needed), and each warpgroup then runs the (cheap) softmax of all 16 heads itself,
 * bit-identically, into its own P buffer (one warpgroup barrier), so the two never wait
 * on each other for P. FlashMLA splits O because 64 query rows x 512 dims do not fit one
 * warpgroup's registers; here O^T is 16 x 512 (64 registers a thread for all of it), so
 * that reason is absent, and ping-pong (each warpgroup its own tiles) would keep two
 * 64-token tiles resident: with 1168-byte rows only 5 stages of 32 tokens fit beside Q,
 * leaving one stage in flight, where the split keeps one tile resident and 3 stages
 * (110 KiB) in flight. The overlap FlashMLA gets from ping-pong comes here from the
 * producer warp: it streams continuously while the consumers compute, stall on a Q load
 * or write out a request, decoupled from them by the whole ring. NC = 1: one warpgroup
 * does all 36 k-steps and all 8 PV m-tiles (no cross-warpgroup barrier).
 *
 * Registers: no setmaxnreg. It needs whole warpgroups, and the producer is one warp:
 * __launch_bounds__(NC*128 + 32, 1) already gives every thread up to 224 registers
 * (NC = 2; 255 for NC = 1), more than the consumers use.
 *
 * Work split (persistent, flat ranges, as gqa_space_pages): G = min(CTAS, cdiv(N, CHUNK))
 * CTAs (one per SM: the ring takes most of shared memory) split the flat token array
 * [0, N) into equal ranges of chunk = cdiv(N, G), ignoring request boundaries: any split
 * of the lengths gives one even wave. A CTA walks the requests its range meets: tile by
 * tile, segment by segment (a tile two requests share is computed once per request,
 * masked; Q reloaded at a request start); the softmax state (m, l, O) is flushed and
 * reset when a request ends inside the range, and at the range's end. Request b's tokens
 * [s, e) meet CTAs c_first = s/chunk .. c_last = (e-1)/chunk; met by one CTA it is written
 * in place (bf16 output, lse), else CTA c leaves a normalised partial (o/l, lse) at slot
 * c + b ((G + B) slots; c + b never collides). Empty requests get output 0 and lse -inf
 * from the CTA whose range holds their position. Tokens past the range copy the range's
 * first row (finite data, p = 0); a page index outside [0, num_pages) reads that row too.
 *
 * Params:
 *   CHUNK  - fewest tokens per CTA (short workloads: fewer, longer CTAs, fewer partials)
 *   CTAS   - most CTAs (132: one per SM of an H100/H200, one even wave)
 *   STAGES - 32-token ring stages (3: one in flight beside the tile computed; 5: three)
 *   NC     - consumer warpgroups: 2 (split over K's dims and V's dims) or 1
 *   KB     - score k-steps per wgmma batch (A fragments held at once)
 *   PVB    - PV m-tiles (64 dims) per wgmma batch
 *   MERGE  - 2: one launch: the last warpgroup to leave a partial of a request (a zeroed
 *               counter per request, one count per warpgroup) records it, and its CTA
 *               merges it after its main loop; the second launch only waits (PDL).
 *            0: a merge launch (a CTA of 4 warps per (request, head), the warps split
 *               the slots), PDL-triggered after the main loop; 1: the same, triggered
 *               at the partial kernel's start.
 *   HINT   - bulk copies with an L2 evict_first policy (the KV cache is read once)
 *   PART   - partials in fp32 (0) or bf16 (1)
 * Shared memory: 18432 (Q, core-matrix layout) + STAGES*37376 (ring) + NC*(8704 (partial
 * scores, 2 parities) + 2048 (P) + 64 (corr) + 128 (m, l)) + 16*STAGES (mbarriers) + 64
 * = 18496 + STAGES*37392 + NC*10944 bytes.
 */
#include <cuda_bf16.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "mla_ws needs sm_90 or newer, built as sm_90a (wgmma.mma_async, cp.async.bulk, mbarrier transaction counts)"
#endif
/* nvcc -arch=sm_90a also compiles a plain compute_90 PTX, which has no wgmma: there the
   wgmma helpers trap (that PTX never runs on an sm_90a device, which takes the SASS) */
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MLA_NO_WGMMA 1
#endif

#ifndef CHUNK
#define CHUNK 128
#endif
#ifndef CTAS
#define CTAS 132
#endif
#ifndef STAGES
#define STAGES 5
#endif
#ifndef NC
#define NC 2
#endif
#ifndef KB
#define KB 9
#endif
#ifndef PVB
#define PVB 2
#endif
#ifndef MERGE
#define MERGE 2
#endif
#ifndef HINT
#define HINT 0
#endif
#ifndef PART
#define PART 0
#endif

#define NUM_QO_HEADS 16
#define DIM_CKV 512
#define DIM_KPE 64
#define DIM_QK (DIM_CKV + DIM_KPE) /* 576 */
#define ROW_PIECES (DIM_QK / 8)     /* 72 16-byte pieces per token row */
#define ROW_BYTES 1168              /* 1152 + 16: rows start 73 pieces apart */
#define TOKEN_BYTES (DIM_QK * 2)    /* 1152 copied per token */
#define TILE 64                     /* tokens per consumer tile (one m64 score wgmma) */
#define SLOT 32                     /* tokens per ring stage (a warp of the producer) */
#define CWARPS (4 * NC)
#define CTHREADS (128 * NC)
#define THREADS (CTHREADS + 32)
#define FULL_MASK 0xffffffffu
#define NEG_BIG (-1.0e30f) /* "no token yet": finite, so exp2(NEG_BIG - NEG_BIG) = 1, never NaN */
#define LOG2E 1.4426950408889634f

typedef unsigned long long u64;

constexpr int KSTEPS = DIM_QK / 16;       /* 36 */
constexpr int KPG = KSTEPS / NC;          /* score k-steps per warpgroup */
constexpr int MTG = (DIM_CKV / 64) / NC;  /* PV m-tiles per warpgroup */
constexpr int PPG = ROW_PIECES / NC;      /* Q pieces a warpgroup loads */
constexpr int HPW = NUM_QO_HEADS / 4;     /* softmax heads per warp (each warpgroup does all 16) */
constexpr int Q_SBO = ROW_PIECES * 128;   /* 9216: next 8 heads of Q */
constexpr int P_SBO = (TILE / 8) * 128;   /* 1024: next 8 heads of P */
constexpr int S_STRIDE = TILE + 4;        /* floats per score row: fragment stores hit 32 banks */
constexpr int Q_BYTES = NUM_QO_HEADS * DIM_QK * 2;        /* 18432 */
constexpr int STAGE_BYTES = SLOT * ROW_BYTES;             /* 37376 */
constexpr int RING_BYTES = STAGES * STAGE_BYTES;
constexpr int SS_WG_BYTES = NUM_QO_HEADS * S_STRIDE * 4;  /* 4352: one warpgroup's partial scores */
constexpr int SS_BYTES = 2 * NC * SS_WG_BYTES;            /* [parity][warpgroup] */
constexpr int P_BYTES = NUM_QO_HEADS * TILE * 2;          /* 2048 per warpgroup */
constexpr int CORR_BYTES = NUM_QO_HEADS * 4;              /* 64 per warpgroup */
constexpr int ML_BYTES = NUM_QO_HEADS * 2 * 4;            /* 128 per warpgroup */
constexpr int OFF_RING = Q_BYTES;
constexpr int OFF_SS = OFF_RING + RING_BYTES;
constexpr int OFF_P = OFF_SS + SS_BYTES;
constexpr int OFF_CORR = OFF_P + NC * P_BYTES;
constexpr int OFF_ML = OFF_CORR + NC * CORR_BYTES;
constexpr int OFF_BAR = OFF_ML + NC * ML_BYTES;           /* full[STAGES], empty[STAGES] */
constexpr int OFF_MISC = OFF_BAR + 16 * STAGES;           /* [0]: merge count, [1..3]: requests */
constexpr int SMEM_BYTES = OFF_MISC + 64;

static_assert(NC == 1 || NC == 2, "NC is 1 or 2 consumer warpgroups");
static_assert(KPG % KB == 0 && MTG % PVB == 0, "batches divide the work");
static_assert(STAGES * SLOT >= 2 * TILE - SLOT && STAGES >= 3, "a tile resident and at least one stage in flight");
static_assert(MERGE >= 0 && MERGE <= 2 && (HINT == 0 || HINT == 1) && (PART == 0 || PART == 1), "param values");
static_assert(CHUNK >= 1 && CTAS >= 1, "CHUNK and CTAS are positive");
static_assert(SMEM_BYTES == 18496 + STAGES * 37392 + NC * 10944, "keep the smem expression in the header in sync");
static_assert(SMEM_BYTES <= 232448, "fits the opt-in shared memory");
static_assert(OFF_P % 16 == 0 && OFF_RING % 16 == 0 && OFF_BAR % 8 == 0 && ROW_BYTES % 16 == 0, "alignment");

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

__device__ __forceinline__ unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

/* programmatic dependent launch */
__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

/* named barrier over `count` threads (whole warps); never barrier 0 (__syncthreads) */
__device__ __forceinline__ void named_bar(int id, int count)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
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

/* no-swizzle K-major descriptor: start, LBO (next 8 along K) = 128 B, SBO (next 8 along N) */
__device__ __forceinline__ u64 wgmma_desc(unsigned addr, unsigned sbo)
{
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(128 >> 4) << 16) | ((u64)(sbo >> 4) << 32);
}

#ifdef MLA_NO_WGMMA
__device__ __forceinline__ void wgmma_fence() { asm volatile("trap;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {}
__device__ __forceinline__ void wgmma_wait0() {}
__device__ __forceinline__ void wgmma_m64n16(float (&)[8], const unsigned (&)[4], u64, int) {}
#else
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

/* d (+)= a . B, m64n16k16, A from registers, B from shared memory (K-major) */
__device__ __forceinline__ void wgmma_m64n16(float (&d)[8], const unsigned (&a)[4], u64 desc, int accumulate)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, "
                 "{%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate)
                 : "memory");
}
#endif

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

/* release: this thread's earlier reads of the stage happen before the producer refills it */
__device__ __forceinline__ void mbar_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/* acquire: returns once the phase of the given parity has completed */
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity)
{
    asm volatile("{\n.reg .pred P1;\n"
                 "LAB_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
                 "@P1 bra.uni DONE;\n"
                 "bra.uni LAB_WAIT;\n"
                 "DONE:\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

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

/* the partial grid, the same in both kernels and the launch expressions */
__device__ __forceinline__ int grid_ctas(int n) { return min(CTAS, (n + CHUNK - 1) / CHUNK); }

/* kv_indptr[b] clamped to [0, n] (b in [0, batch_size]) */
__device__ __forceinline__ int bound(const int *__restrict__ kv_indptr, int b, int n)
{
    return min(max(__ldg(kv_indptr + b), 0), n);
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

/* 4 consecutive partial values from L2 (written by other CTAs of this grid, or the grid before) */
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

/* One warp's share of the merge of the partial slots s0 .. s0+n-1 of request b, query head
   `head`: the slots w0, w0 + wstep, ... (lane: dims 128*j + 4*lane .. +3, j < 4), four slots'
   rows loaded before any is used. mx: the largest lse over all n slots (the same in every
   warp); acc, L: sum_s 2^(lse_s - mx) o_s and sum_s 2^(lse_s - mx) over this warp's slots. */
__device__ __forceinline__ void merge_part(const float *part_o, const float *part_lse, int head, int s0, int n, int w0,
                                           int wstep, int lane, float &mx, float4 (&acc)[4], float &L)
{
    mx = neg_inf();
    for (int s = lane; s < n; s += 32)
        mx = fmaxf(mx, __ldcg(part_lse + (size_t)(s0 + s) * NUM_QO_HEADS + head));
#pragma unroll
    for (int off = 16; off >= 1; off /= 2)
        mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, off));
    L = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; j++)
        acc[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int sb = w0; sb < n; sb += 4 * wstep) { /* warp-uniform */
        float w[4];
        float4 p[4][4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int s = sb + k * wstep;
            const float ls = s < n ? __ldcg(part_lse + (size_t)(s0 + s) * NUM_QO_HEADS + head) : neg_inf();
            w[k] = (ls == neg_inf()) ? 0.0f : exp2f(ls - mx);
            const size_t row = ((size_t)(s0 + (s < n ? s : sb)) * NUM_QO_HEADS + head) * DIM_CKV;
#pragma unroll
            for (int j = 0; j < 4; j++)
                p[k][j] = load_part4(part_o, row + 128 * j + 4 * lane);
        }
#pragma unroll
        for (int k = 0; k < 4; k++) {
            L += w[k];
            if (w[k] == 0.0f)
                continue; /* past the end, or an empty partial: never multiply its data */
#pragma unroll
            for (int j = 0; j < 4; j++) {
                acc[j].x = fmaf(w[k], p[k][j].x, acc[j].x);
                acc[j].y = fmaf(w[k], p[k][j].y, acc[j].y);
                acc[j].z = fmaf(w[k], p[k][j].z, acc[j].z);
                acc[j].w = fmaf(w[k], p[k][j].w, acc[j].w);
            }
        }
    }
}

/* One warp merges the n >= 2 partial slots of request b, head `head`, and writes the
   output row and lse: lse = log2(sum_s 2^lse_s), out = sum_s 2^(lse_s - lse) o_s. */
__device__ __forceinline__ void merge_head(const float *part_o, const float *part_lse, __nv_bfloat16 *output,
                                           float *lse, int b, int head, int s0, int n, int lane)
{
    float mx, L;
    float4 acc[4];
    merge_part(part_o, part_lse, head, s0, n, 0, 1, lane, mx, acc, L);
    const float inv = (L > 0.0f) ? 1.0f / L : 0.0f;
    const size_t row = (size_t)b * NUM_QO_HEADS + head;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        __nv_bfloat162 *out = reinterpret_cast<__nv_bfloat162 *>(output + row * DIM_CKV + 128 * j + 4 * lane);
        out[0] = __floats2bfloat162_rn(acc[j].x * inv, acc[j].y * inv);
        out[1] = __floats2bfloat162_rn(acc[j].z * inv, acc[j].w * inv);
    }
    if (lane == 0)
        lse[row] = (L > 0.0f) ? mx + log2f(L) : neg_inf();
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
mla_ws_partial(const __nv_bfloat16 *__restrict__ q_nope, const __nv_bfloat16 *__restrict__ q_pe,
               const __nv_bfloat16 *__restrict__ ckv_cache, const __nv_bfloat16 *__restrict__ kpe_cache,
               const int *__restrict__ kv_indptr, const int *__restrict__ kv_indices, float sm_scale,
               float *__restrict__ part_o, float *__restrict__ part_lse, int *__restrict__ done,
               __nv_bfloat16 *__restrict__ output, float *__restrict__ lse, int batch_size, int num_pages,
               int num_kv_indices)
{
    extern __shared__ __align__(128) unsigned char smem_raw[];
    unsigned char *const s_q = smem_raw;                                   /* Q, core-matrix layout */
    float *const s_s = reinterpret_cast<float *>(smem_raw + OFF_SS);      /* [2][NC][16][S_STRIDE] */
    int *const s_misc = reinterpret_cast<int *>(smem_raw + OFF_MISC);
    const unsigned ring = smem_addr(smem_raw + OFF_RING);                 /* [STAGES][SLOT][ROW_BYTES] */
    const unsigned full_bar = smem_addr(smem_raw + OFF_BAR);              /* [STAGES] */
    const unsigned empty_bar = full_bar + 8 * STAGES;                     /* [STAGES] */

#if MERGE != 0
    pdl_launch_dependents(); /* the second launch may be scheduled now (it waits for this grid) */
#endif
    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int B = batch_size;
    const int N = max(num_kv_indices, 0);
    const int G = grid_ctas(N);
    const int cta = blockIdx.x;
    if (B <= 0 || N <= 0 || cta >= G)
        return; /* block-uniform */
    const int chunk = (N + G - 1) / G;
    const int R0 = (int)min((long long)cta * chunk, (long long)N);
    const int R1 = min(R0 + chunk, N);
    const int n_tiles = (R1 - R0 + TILE - 1) / TILE;

    if (tid == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(full_bar + 8 * s, 1);               /* the producer's arrive.expect_tx */
            mbar_init(empty_bar + 8 * s, CTHREADS);       /* every consumer thread */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        s_misc[0] = 0;
    }

    /* the first request that ends past R0 (ends are non-decreasing), and the empty
       requests this CTA owns (output 0, lse -inf) */
    int cnt = 0;
    for (int base = 0; base < B; base += THREADS) {
        const int bb = base + tid;
        bool pred = false;
        if (bb < B) {
            const int sb = bound(kv_indptr, bb, N);
            const int eb = bound(kv_indptr, bb + 1, N);
            pred = eb <= R0;
            if (eb <= sb && min(sb / chunk, G - 1) == cta) {
                uint4 *o4 = reinterpret_cast<uint4 *>(output + (size_t)bb * NUM_QO_HEADS * DIM_CKV);
                for (int i = 0; i < NUM_QO_HEADS * DIM_CKV / 8; i++)
                    o4[i] = make_uint4(0u, 0u, 0u, 0u);
                for (int h = 0; h < NUM_QO_HEADS; h++)
                    lse[(size_t)bb * NUM_QO_HEADS + h] = neg_inf();
            }
        }
        cnt += __syncthreads_count(pred);
    }
    __syncthreads(); /* the mbarriers' init is visible to every role */
    if (R0 >= R1)
        return; /* block-uniform: a CTA past the end only writes empty requests */

    /* ======================= producer warp: data movement only ======================= */
    if (warp == CWARPS) {
        u64 policy = 0;
#if HINT
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
#endif
        int fb = __ldg(kv_indices + R0); /* R0 < R1 <= N: a real token of the range */
        if ((unsigned)fb >= (unsigned)num_pages)
            fb = 0;
        const int n_slots = 2 * n_tiles;
        /* page of token lane of stage k (the range's first row past the range, or for a bad index) */
        auto page_of = [&](int k) {
            int pg = fb;
            const int t = R0 + k * SLOT + lane;
            if (k < n_slots && t < R1) {
                pg = __ldg(kv_indices + t);
                if ((unsigned)pg >= (unsigned)num_pages)
                    pg = fb;
            }
            return pg;
        };
        int pg_next = page_of(0), pg_next2 = page_of(1);
        for (int k = 0; k < n_slots; k++) {
            const int pg = pg_next;
            pg_next = pg_next2;
            pg_next2 = page_of(k + 2); /* two stages ahead: its latency hides behind the waits */
            const int s = k % STAGES;
            if (k >= STAGES) /* the consumers released this stage's previous use, k - STAGES */
                mbar_wait(empty_bar + 8 * s, (unsigned)(((k / STAGES) + 1) & 1));
            if (lane == 0)
                mbar_arrive_expect_tx(full_bar + 8 * s, SLOT * TOKEN_BYTES);
            __syncwarp(); /* the byte count is armed before any copy can complete */
            const unsigned dst = ring + (unsigned)(s * STAGE_BYTES + lane * ROW_BYTES);
            bulk_copy(dst, ckv_cache + (size_t)pg * DIM_CKV, DIM_CKV * 2, full_bar + 8 * s, policy);
            bulk_copy(dst + DIM_CKV * 2, kpe_cache + (size_t)pg * DIM_KPE, DIM_KPE * 2, full_bar + 8 * s, policy);
        }
        return; /* the copies complete on the mbarriers the consumers wait on */
    }

    /* ======================= consumer warpgroups ======================= */
    const int g = warp >> 2;  /* warpgroup */
    const int wq = warp & 3;  /* warp in it: rows 16*wq.. of every m64 tile */
    const int wtid = tid & 127;
    const int r = lane >> 2;  /* fragment row */
    const int c = lane & 3;   /* fragment column pair */
    const float qk_scale = sm_scale * LOG2E;
    const int ALL_BAR = NC == 2 ? 1 : 2; /* all consumers (NC = 1: warpgroup 0's barrier) */
    const int WG_BAR = 2 + g;
    unsigned char *const s_p = smem_raw + OFF_P + g * P_BYTES;             /* P^T, core-matrix layout */
    float *const s_corr = reinterpret_cast<float *>(smem_raw + OFF_CORR + g * CORR_BYTES); /* [16] */
    float *const s_ml = reinterpret_cast<float *>(smem_raw + OFF_ML + g * ML_BYTES);       /* [16][2] */
    const unsigned q_base = smem_addr(s_q) + (unsigned)(g * KPG * 256);
    const unsigned p_base = smem_addr(s_p);
    /* A (K rows) for the score: row 16*(wq&1) + (lane & 15) of stage wq>>1, piece + lane/16 */
    const unsigned ka_off = (unsigned)((16 * (wq & 1) + (lane & 15)) * ROW_BYTES + (lane >> 4) * 16 + g * KPG * 32);
    /* A (V^T, .trans) for PV: token (lane & 7) + 8*((lane >> 4) & 1), dim piece 2*wq + ((lane >> 3) & 1) */
    const unsigned va_off = (unsigned)(((lane & 7) + 8 * ((lane >> 4) & 1)) * ROW_BYTES + (2 * wq + ((lane >> 3) & 1)) * 16);

    /* Q of request qb, this warpgroup's pieces: piece p (8 dims) of head h at (h/8)*Q_SBO + p*128 + (h%8)*16 */
    auto load_q = [&](int qb) {
        for (int i = wtid; i < NUM_QO_HEADS * PPG; i += 128) {
            const int h = i / PPG, p = g * PPG + i % PPG;
            const uint4 v = p < 64 ? __ldg(reinterpret_cast<const uint4 *>(q_nope + ((size_t)qb * NUM_QO_HEADS + h) * DIM_CKV) + p)
                                   : __ldg(reinterpret_cast<const uint4 *>(q_pe + ((size_t)qb * NUM_QO_HEADS + h) * DIM_KPE) + (p - 64));
            *reinterpret_cast<uint4 *>(s_q + (h >> 3) * Q_SBO + p * 128 + (h & 7) * 16) = v;
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); /* Q, written by st.shared, read by wgmma */
        named_bar(WG_BAR, 128);
    };

    int cb = cnt; /* current request; B when none is left */
    int cs = 0, ce = 0;
    if (cb < B) {
        cs = bound(kv_indptr, cb, N);
        ce = bound(kv_indptr, cb + 1, N);
        if (cs < R1)
            load_q(cb);
    }

    float m_run[HPW], l_run[HPW]; /* heads wq + 4*i: the same in every lane of the warp */
    float o[MTG][8];              /* m-tile g*MTG + i: dims 64*mt + 16*wq + r (+8), heads 8*jn + 2c (+1) */
    auto reset = [&]() {
#pragma unroll
        for (int i = 0; i < HPW; i++) {
            m_run[i] = NEG_BIG;
            l_run[i] = 0.0f;
        }
#pragma unroll
        for (int i = 0; i < MTG; i++)
#pragma unroll
            for (int e = 0; e < 8; e++)
                o[i][e] = 0.0f;
    };
    reset();
    bool have = false; /* the state holds tokens of cb */
    int par = 0;       /* parity of the partial-score buffer */

    /* tokens [lo, hi) of the tile at token a (stages at st0, st1), all of request cb */
    auto process = [&](unsigned st0, unsigned st1, int a, int lo, int hi) {
        /* 1. S^T over this warpgroup's k-steps */
        float s[8];
#pragma unroll
        for (int e = 0; e < 8; e++)
            s[e] = 0.0f;
        const unsigned kbase = ((wq >> 1) ? st1 : st0) + ka_off;
#pragma unroll
        for (int k0 = 0; k0 < KPG; k0 += KB) {
            unsigned af[KB][4];
#pragma unroll
            for (int k = 0; k < KB; k++)
                ldmatrix_x4(af[k], kbase + (unsigned)((k0 + k) * 32));
            wgmma_fence();
#pragma unroll
            for (int k = 0; k < KB; k++)
                wgmma_m64n16(s, af[k], wgmma_desc(q_base + (unsigned)((k0 + k) * 256), Q_SBO), 1);
            wgmma_commit();
            wgmma_wait0();
        }
        {
            float *const sp = s_s + (par * NC + g) * NUM_QO_HEADS * S_STRIDE;
            const int t0 = 16 * wq + r;
#pragma unroll
            for (int jn = 0; jn < 2; jn++) {
                const int h = 8 * jn + 2 * c;
                sp[h * S_STRIDE + t0] = s[4 * jn];
                sp[(h + 1) * S_STRIDE + t0] = s[4 * jn + 1];
                sp[h * S_STRIDE + t0 + 8] = s[4 * jn + 2];
                sp[(h + 1) * S_STRIDE + t0 + 8] = s[4 * jn + 3];
            }
        }
        /* every warpgroup's partial scores are in; every consumer is past the reads of the
           buffer of the other parity (the softmax of the step before) */
        named_bar(ALL_BAR, CTHREADS);

        /* 2. online softmax, all 16 heads in each warpgroup: warp owns heads wq + 4*i,
              lane owns tokens lane, lane + 32 */
        const float *const sq = s_s + par * NC * NUM_QO_HEADS * S_STRIDE;
#pragma unroll
        for (int i = 0; i < HPW; i++) {
            const int h = wq + 4 * i;
            float sv[2];
            float mx = neg_inf();
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int t = lane + 32 * e;
                sv[e] = neg_inf();
                if (a + t >= lo && a + t < hi) {
                    float v = 0.0f;
#pragma unroll
                    for (int k = 0; k < NC; k++)
                        v += sq[(k * NUM_QO_HEADS + h) * S_STRIDE + t];
                    sv[e] = v * qk_scale;
                }
                mx = fmaxf(mx, sv[e]);
            }
#pragma unroll
            for (int off = 16; off >= 1; off /= 2)
                mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, off));
            const float m_new = fmaxf(m_run[i], mx); /* >= 1 valid token: finite */
            const float corr = exp2f(m_run[i] - m_new);
            float sum = 0.0f;
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int t = lane + 32 * e;
                const float p = exp2f(sv[e] - m_new); /* masked: exp2(-inf) = 0 */
                sum += p;
                *reinterpret_cast<__nv_bfloat16 *>(s_p + (h >> 3) * P_SBO + (t >> 3) * 128 + (h & 7) * 16 + (t & 7) * 2) =
                    __float2bfloat16(p);
            }
#pragma unroll
            for (int off = 16; off >= 1; off /= 2)
                sum += __shfl_xor_sync(FULL_MASK, sum, off);
            l_run[i] = l_run[i] * corr + sum;
            m_run[i] = m_new;
            if (lane == 0)
                s_corr[h] = corr;
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); /* P, read by wgmma */
        named_bar(WG_BAR, 128);

        /* 3. O^T = O^T * corr + V^T . P^T over this warpgroup's m-tiles */
        {
            float cr[4];
            cr[0] = s_corr[2 * c];
            cr[1] = s_corr[2 * c + 1];
            cr[2] = s_corr[8 + 2 * c];
            cr[3] = s_corr[9 + 2 * c];
#pragma unroll
            for (int i = 0; i < MTG; i++)
#pragma unroll
                for (int jn = 0; jn < 2; jn++) {
                    o[i][4 * jn] *= cr[2 * jn];
                    o[i][4 * jn + 1] *= cr[2 * jn + 1];
                    o[i][4 * jn + 2] *= cr[2 * jn];
                    o[i][4 * jn + 3] *= cr[2 * jn + 1];
                }
#pragma unroll
            for (int i0 = 0; i0 < MTG; i0 += PVB) {
                unsigned af[PVB][TILE / 16][4];
#pragma unroll
                for (int i = 0; i < PVB; i++)
#pragma unroll
                    for (int ks = 0; ks < TILE / 16; ks++)
                        ldmatrix_x4_trans(af[i][ks], ((ks >> 1) ? st1 : st0) + va_off + (unsigned)((ks & 1) * 16 * ROW_BYTES) +
                                                         (unsigned)((g * MTG + i0 + i) * 128));
                wgmma_fence();
#pragma unroll
                for (int i = 0; i < PVB; i++)
#pragma unroll
                    for (int ks = 0; ks < TILE / 16; ks++)
                        wgmma_m64n16(o[i0 + i], af[i][ks], wgmma_desc(p_base + (unsigned)(ks * 256), P_SBO), 1);
                wgmma_commit();
                wgmma_wait0();
            }
        }
        par ^= 1;
    };

    /* write the state of request cb (its tokens in this range) out, and reset it */
    auto flush = [&]() {
        if (lane == 0) {
#pragma unroll
            for (int i = 0; i < HPW; i++) {
                s_ml[2 * (wq + 4 * i)] = m_run[i];
                s_ml[2 * (wq + 4 * i) + 1] = l_run[i];
            }
        }
        named_bar(WG_BAR, 128);
        const int c_first = cs / chunk, c_last = min((ce - 1) / chunk, G - 1);
        const int n_parts = c_last - c_first + 1;
        const bool direct = n_parts == 1;
        const size_t prow = (size_t)(cta + cb) * NUM_QO_HEADS; /* this CTA's partial slot of cb */
        float inv[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int h = 8 * (e >> 1) + 2 * c + (e & 1);
            const float L = s_ml[2 * h + 1];
            inv[e] = L > 0.0f ? 1.0f / L : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < MTG; i++)
#pragma unroll
            for (int e = 0; e < 8; e++) {
                const int jn = e >> 2;
                const int h = 8 * jn + 2 * c + (e & 1);
                const int d = 64 * (g * MTG + i) + 16 * wq + r + 8 * ((e >> 1) & 1);
                const float x = o[i][e] * inv[2 * jn + (e & 1)];
                if (direct)
                    output[((size_t)cb * NUM_QO_HEADS + h) * DIM_CKV + d] = __float2bfloat16(x);
                else
                    store_part(part_o, (prow + h) * DIM_CKV + d, x);
            }
        if (g == 0 && wq == 0 && lane < NUM_QO_HEADS) {
            const float L = s_ml[2 * lane + 1];
            const float ls = L > 0.0f ? s_ml[2 * lane] + log2f(L) : neg_inf();
            if (direct)
                lse[(size_t)cb * NUM_QO_HEADS + lane] = ls;
            else
                part_lse[prow + lane] = ls;
        }
#if MERGE == 2
        if (!direct) { /* warpgroup-uniform */
            __threadfence();          /* this thread's partial stores before the count */
            named_bar(WG_BAR, 128);   /* ... of every thread of the warpgroup */
            if (wtid == 0 && atomicAdd(done + cb, 1) == n_parts * NC - 1) { /* the last of all */
                __threadfence();
                const int k = atomicAdd(s_misc, 1);
                if (k < 3)
                    s_misc[1 + k] = cb;
            }
        }
#endif
        reset();
        have = false;
    };

    /* move to the next request that has tokens; its Q when it starts inside the range */
    auto advance = [&]() {
        cb++;
        while (cb < B && bound(kv_indptr, cb + 1, N) <= bound(kv_indptr, cb, N))
            cb++; /* empty requests: written by their owner CTA */
        if (cb < B) {
            cs = bound(kv_indptr, cb, N);
            ce = bound(kv_indptr, cb + 1, N);
            if (cs < R1)
                load_q(cb);
        }
    };

    for (int v = 0; v < n_tiles; v++) {
        const int k0 = 2 * v, k1 = 2 * v + 1; /* the tile's two ring stages, in fill order */
        mbar_wait(full_bar + 8 * (k0 % STAGES), (unsigned)((k0 / STAGES) & 1));
        mbar_wait(full_bar + 8 * (k1 % STAGES), (unsigned)((k1 / STAGES) & 1));
        const unsigned st0 = ring + (unsigned)((k0 % STAGES) * STAGE_BYTES);
        const unsigned st1 = ring + (unsigned)((k1 % STAGES) * STAGE_BYTES);
        const int a = R0 + v * TILE;
        const int e = min(a + TILE, R1);
        for (;;) { /* consumer-uniform */
            if (cb >= B)
                break;
            const int lo = max(a, cs), hi = min(e, ce);
            if (lo < hi) {
                process(st0, st1, a, lo, hi);
                have = true;
            }
            if (ce > e)
                break; /* the request goes on past this tile */
            if (have)
                flush();
            advance();
        }
        /* this thread is done with the tile's rows (ldmatrix; every wgmma waited for) */
        mbar_arrive(empty_bar + 8 * (k0 % STAGES));
        mbar_arrive(empty_bar + 8 * (k1 % STAGES));
    }
    if (have && cb < B)
        flush(); /* the request goes on in the next CTA */

#if MERGE == 0
    pdl_launch_dependents();
#endif
#if MERGE == 2
    /* this CTA left the last partial of up to two requests (its first and last): merge them */
    named_bar(ALL_BAR, CTHREADS);
    const int n_merge = min(s_misc[0], 3);
    __threadfence();
    for (int k = 0; k < n_merge; k++) {
        const int b = s_misc[1 + k];
        const int sb = bound(kv_indptr, b, N), eb = bound(kv_indptr, b + 1, N);
        const int c_first = sb / chunk, c_last = min((eb - 1) / chunk, G - 1);
        for (int head = warp; head < NUM_QO_HEADS; head += CWARPS)
            merge_head(part_o, part_lse, output, lse, b, head, c_first + b, c_last - c_first + 1, lane);
    }
#endif
}

/* MERGE 0/1: one CTA of 4 warps per (request, head); warp w takes the request's partial
   slots w, w + 4, ... (four at a time), the warps' sums meet in shared memory. Launched with
   PDL: kv_indptr is read before waiting for the partial grid, the partials after. Requests
   of one partial were written by the partial kernel, empty ones too. MERGE 2: one CTA that
   only waits. */
extern "C" __global__ void __launch_bounds__(128)
mla_ws_merge(const int *__restrict__ kv_indptr, const float *__restrict__ part_o, const float *__restrict__ part_lse,
             __nv_bfloat16 *__restrict__ output, float *__restrict__ lse, int batch_size, int num_kv_indices)
{
#if MERGE == 2
    pdl_wait();
    (void)kv_indptr, (void)part_o, (void)part_lse, (void)output, (void)lse, (void)batch_size, (void)num_kv_indices;
#else
    __shared__ float4 s_acc[4][DIM_CKV / 4];
    __shared__ float s_l[4];
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int b = blockIdx.x / NUM_QO_HEADS;
    const int head = blockIdx.x % NUM_QO_HEADS;
    const int N = max(num_kv_indices, 0);
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
    pdl_wait(); /* the partial grid has finished and its stores are visible */
    if (n <= 1)
        return; /* block-uniform: empty, or written by the partial kernel */
    float mx, L;
    float4 acc[4];
    merge_part(part_o, part_lse, head, s0, n, warp, 4, lane, mx, acc, L);
#pragma unroll
    for (int j = 0; j < 4; j++)
        s_acc[warp][32 * j + lane] = acc[j]; /* dims 128*j + 4*lane .. +3 */
    if (lane == 0)
        s_l[warp] = L; /* the same in every lane */
    __syncthreads();
    const float Lt = s_l[0] + s_l[1] + s_l[2] + s_l[3];
    const float inv = (Lt > 0.0f) ? 1.0f / Lt : 0.0f;
    const int t = threadIdx.x; /* dims 4*t .. 4*t+3 */
    float4 x = s_acc[0][t];
#pragma unroll
    for (int w = 1; w < 4; w++) {
        const float4 y = s_acc[w][t];
        x.x += y.x;
        x.y += y.y;
        x.z += y.z;
        x.w += y.w;
    }
    const size_t row = (size_t)b * NUM_QO_HEADS + head;
    __nv_bfloat162 *out = reinterpret_cast<__nv_bfloat162 *>(output + row * DIM_CKV + 4 * t);
    out[0] = __floats2bfloat162_rn(x.x * inv, x.y * inv);
    out[1] = __floats2bfloat162_rn(x.z * inv, x.w * inv);
    if (t == 0)
        lse[row] = (Lt > 0.0f) ? mx + log2f(Lt) : neg_inf();
#endif
}
