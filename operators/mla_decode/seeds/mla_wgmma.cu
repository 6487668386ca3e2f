/* ksearch
{ "params": {"CHUNK": [64, 128, 256, 512, 1024, 2048], "CTAS": [66, 100, 132, 200, 264, 396, 528, 1056, 1048576], "TILE": [64, 32], "STAGES": [2, 3, 4],
             "WG": [1, 2], "KB": [2, 3, 4, 6, 9], "PVB": [1, 2], "MINB": [1, 2], "HINT": [0, 1], "PART": [0, 1]},
  "constraints": ["(36 / WG) % KB == 0", "(8 / WG) % PVB == 0", "CHUNK % TILE == 0",
                  "MINB*(28896 + STAGES*TILE*1168 + WG*4096 + 1024) <= 233472", "MINB*WG <= 2"],
  "scratch": {"part_o": ["float32", "(cdiv(num_kv_indices, min(2048, max(CHUNK, TILE*cdiv(cdiv(num_kv_indices, CTAS), TILE)))) + batch_size)*num_qo_heads*head_dim_ckv/(1 + PART)"],
              "part_lse": ["float32", "(cdiv(num_kv_indices, min(2048, max(CHUNK, TILE*cdiv(cdiv(num_kv_indices, CTAS), TILE)))) + batch_size)*num_qo_heads"]},
  "launch": [
    {"kernel": "mla_wgmma_partial", "grid": ["cdiv(num_kv_indices, min(2048, max(CHUNK, TILE*cdiv(cdiv(num_kv_indices, CTAS), TILE)))) + batch_size"], "block": ["WG*128"],
     "smem": "28896 + STAGES*TILE*1168 + WG*4096",
     "args": ["q_nope", "q_pe", "ckv_cache", "kpe_cache", "kv_indptr", "kv_indices", "sm_scale",
              "part_o", "part_lse", "output", "lse", "batch_size", "num_pages", "num_kv_indices"]},
    {"kernel": "mla_wgmma_merge", "grid": ["batch_size*num_qo_heads"], "block": ["128"], "pdl": true,
     "args": ["kv_indptr", "part_o", "part_lse", "output", "lse", "batch_size", "num_kv_indices"]} ] }
*/
/*
 * Family "mla_wgmma" (Hopper, sm_90a): token rows arrive by bulk copies (the TMA engine,
 * cp.async.bulk global -> shared, completing on an mbarrier), and both products run on
 * warpgroup MMAs (wgmma.mma_async m64n16k16, bf16 in, fp32 accumulate) with the tokens
 * (scores) or the output dims (PV) on M and the 16 heads on N, so no row is padding:
 *   S^T [64 tokens x 16 heads] = K [64 x 576] . Q^T       A = K rows (ldmatrix -> registers),
 *                                                         B = Q in shared memory (descriptor)
 *   O^T [512 dims x 16 heads] += V^T [512 x 64] . P^T     A = V^T (ldmatrix.trans -> registers),
 *                                                         B = P in shared memory (descriptor)
 * The B operands are written by this kernel in the no-swizzle K-major layout of 8x8 core
 * matrices (128 contiguous bytes each; neighbours along K 128 bytes apart, along N
 * 8*(K/8)*16 bytes apart), so no swizzle has to match a copy engine.
 *
 * Work split, partials and merge: as mla_mma (flattened token-balanced chunk slots of
 * min(2048, max(CHUNK, TILE*cdiv(cdiv(N, CTAS), TILE))) tokens; a request of one chunk is
 * written in place, longer ones leave partials that a PDL launch merges).
 *
 * Per CTA: WG warpgroups. A tile is TILE tokens (64: one m64 tile of the score; 32: rows
 * 32-63 repeat rows 0-31 and are masked, half the score work wasted, half the ring); each
 * token a row of ckv (1024 B, one bulk copy) then kpe (128 B, another), padded to 1168 B
 * so ldmatrix rows fall in distinct banks. STAGES ring stages: STAGES-1 tiles are copied
 * while one is computed.
 * Warp 0 issues a tile's copies: lane 0 arms the stage's mbarrier with the byte count,
 * then each lane copies two tokens' rows. Tokens past the chunk copy the chunk's first
 * row instead (finite data, masked to p = 0).
 * Per tile: warpgroup g computes the scores over its 36/WG k-steps (KB k-steps per
 * wgmma batch), partial sums to shared memory; warp w runs the base-2 online softmax of
 * heads w, w + 4*WG, ... and writes P (bf16, core-matrix layout) and the rescale
 * factors; warpgroup g then owns output dims [g*512/WG, (g+1)*512/WG) (PVB 64-dim
 * m-tiles per wgmma batch).
 *
 * Params:
 *   CHUNK - fewest tokens per CTA (a multiple of TILE); CTAS - slots wanted: the chunk
 *           grows to cdiv(N, CTAS) tokens when that is more
 *   TILE  - tokens per ring stage (64, or 32 with half of each score wgmma wasted)
 *   STAGES- ring depth
 *   MINB  - CTAs per SM asked of ptxas (__launch_bounds__), allowed by shared memory
 *   WG    - warpgroups per CTA (1 or 2)
 *   KB    - score k-steps per wgmma batch (A fragments held in registers at once)
 *   PVB   - PV m-tiles per wgmma batch
 *   HINT  - bulk copies with an L2 evict_first policy (the KV cache is read once)
 *   PART  - partials in fp32 (0) or bf16 (1)
 * Shared memory: 18432 (Q) + STAGES*TILE*1168 (ring) + WG*4096 (scores) + 2048 (P) + 224
 * (stats, mbarriers) + 8192 (page indices) = 28896 + STAGES*TILE*1168 + WG*4096.
 */
#include <cuda_bf16.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "mla_wgmma needs sm_90 or newer, built as sm_90a (wgmma.mma_async, cp.async.bulk, mbarrier transaction counts)"
#endif
/* nvcc -arch=sm_90a also compiles a plain compute_90 PTX, which has no wgmma: there the
   wgmma helpers trap (that PTX never runs on an sm_90a device, which takes the SASS) */
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MLA_NO_WGMMA 1
#endif

#ifndef CHUNK
#define CHUNK 64
#endif
#ifndef WG
#define WG 1
#endif
#ifndef KB
#define KB 2
#endif
#ifndef TILE
#define TILE 64
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef MINB
#define MINB 1
#endif
#ifndef PVB
#define PVB 1
#endif
#ifndef HINT
#define HINT 0
#endif
#ifndef PART
#define PART 0
#endif
#ifndef CTAS
#define CTAS 132
#endif
#define IDX_MAX 2048 /* most tokens per chunk: their page indices are in shared memory */
#define CHUNK_TILE TILE

#define NUM_QO_HEADS 16
#define DIM_CKV 512
#define DIM_KPE 64
#define DIM_QK (DIM_CKV + DIM_KPE) /* 576 */
#define ROW_PIECES (DIM_QK / 8)     /* 72 */
#define ROW_BYTES 1168
#define WARPS (4 * WG)
#define THREADS (WARPS * 32)
#define FULL_MASK 0xffffffffu
#define NEG_BIG (-1.0e30f)
#define LOG2E 1.4426950408889634f

constexpr int KSTEPS = DIM_QK / 16;        /* 36 */
constexpr int KPG = KSTEPS / WG;           /* score k-steps per warpgroup */
constexpr int HPW = NUM_QO_HEADS / WARPS;  /* softmax heads per warp */
constexpr int MTG = (DIM_CKV / 64) / WG;   /* PV m-tiles per warpgroup */
constexpr int MROWS = 64;                  /* rows of a score wgmma (tokens; repeated when TILE = 32) */
constexpr int Q_SBO = (DIM_QK / 8) * 128;  /* 9216: next 8 heads of Q */
constexpr int P_SBO = (MROWS / 8) * 128;   /* 1024: next 8 heads of P */
constexpr int Q_BYTES = NUM_QO_HEADS * DIM_QK * 2;          /* 18432 */
constexpr int RING_BYTES = STAGES * TILE * ROW_BYTES;       /* 149504 */
constexpr int S_BYTES = WG * NUM_QO_HEADS * MROWS * 4;      /* WG*4096 */
constexpr int P_BYTES = NUM_QO_HEADS * MROWS * 2;           /* 2048 */
constexpr int STAT_BYTES = 192 + 32;                        /* corr, m/l, up to 4 mbarriers */
constexpr int SMEM_BYTES = Q_BYTES + RING_BYTES + S_BYTES + P_BYTES + STAT_BYTES + 8192;

static_assert(WG == 1 || WG == 2, "WG is 1 or 2");
static_assert(KPG % KB == 0 && MTG % PVB == 0, "batches divide the work");
static_assert(TILE == 64 || TILE == 32, "TILE is 64 or 32");
static_assert(STAGES >= 2 && STAGES <= 4, "2 to 4 ring stages (4 mbarriers)");
static_assert(CHUNK % TILE == 0, "a chunk is a whole number of tiles");
static_assert(SMEM_BYTES == 28896 + STAGES * TILE * 1168 + WG * 4096, "keep the smem expression in the header in sync");
static_assert(SMEM_BYTES <= 232448, "fits the opt-in shared memory");

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

/* programmatic dependent launch: the merge launch may start while the partial grid runs,
   and waits for it before it reads a partial */
__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

__device__ __forceinline__ unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

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
__device__ __forceinline__ unsigned long long wgmma_desc(unsigned addr, unsigned sbo)
{
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(128 >> 4) << 16) |
           ((unsigned long long)(sbo >> 4) << 32);
}

#ifdef MLA_NO_WGMMA
__device__ __forceinline__ void wgmma_fence() { asm volatile("trap;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {}
__device__ __forceinline__ void wgmma_wait0() {}
__device__ __forceinline__ void wgmma_m64n16(float (&)[8], const unsigned (&)[4], unsigned long long, int) {}
#else
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

/* d (+)= a . B, m64n16k16, A from registers, B from shared memory (K-major) */
__device__ __forceinline__ void wgmma_m64n16(float (&d)[8], const unsigned (&a)[4], unsigned long long desc, int accumulate)
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

__device__ __forceinline__ void bulk_copy(unsigned dst, const void *src, unsigned bytes, unsigned bar,
                                          unsigned long long policy)
{
    if (HINT)
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(dst),
                     "l"(src), "r"(bytes), "r"(bar), "l"(policy)
                     : "memory");
    else
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
                     "l"(src), "r"(bytes), "r"(bar)
                     : "memory");
}

/* Tokens per chunk slot: CHUNK at least, more when that makes over CTAS slots, a whole number of
   tiles, at most IDX_MAX (the page indices of a chunk sit in shared memory). Every launch
   expression of the header computes the same. First slot of request b: floor(indptr / chunk) + b,
   strictly increasing in b. */
__device__ __forceinline__ int chunk_tokens(int num_kv_indices)
{
    const int per_cta = (num_kv_indices + CTAS - 1) / CTAS;
    return min(IDX_MAX, max(CHUNK, CHUNK_TILE * ((per_cta + CHUNK_TILE - 1) / CHUNK_TILE)));
}

__device__ __forceinline__ int slot_begin(int indptr_b, int b, int chunk) { return indptr_b / chunk + b; }

extern "C" __global__ void __launch_bounds__(THREADS, MINB)
mla_wgmma_partial(const __nv_bfloat16 *__restrict__ q_nope, const __nv_bfloat16 *__restrict__ q_pe,
                  const __nv_bfloat16 *__restrict__ ckv_cache, const __nv_bfloat16 *__restrict__ kpe_cache,
                  const int *__restrict__ kv_indptr, const int *__restrict__ kv_indices, float sm_scale,
                  float *__restrict__ part_o, float *__restrict__ part_lse, __nv_bfloat16 *__restrict__ output,
                  float *__restrict__ lse, int batch_size, int num_pages, int num_kv_indices)
{
    extern __shared__ __align__(128) unsigned char smem_raw[];
    unsigned char *const s_q = smem_raw;                                        /* Q, core-matrix layout */
    unsigned char *const s_ring = s_q + Q_BYTES;                                /* [STAGES][TILE][ROW_BYTES] */
    float *const s_s = reinterpret_cast<float *>(s_ring + RING_BYTES);          /* [WG][16][64] */
    unsigned char *const s_p = s_ring + RING_BYTES + S_BYTES;                   /* P, core-matrix layout */
    float *const s_corr = reinterpret_cast<float *>(s_p + P_BYTES);            /* [16] */
    float *const s_ml = s_corr + NUM_QO_HEADS;                                  /* [16][2] */
    unsigned long long *const s_bar = reinterpret_cast<unsigned long long *>(s_p + P_BYTES + 192); /* [STAGES] */
    int *const s_idx = reinterpret_cast<int *>(s_p + P_BYTES + STAT_BYTES);    /* [IDX_MAX] */

    pdl_launch_dependents(); /* the merge grid may be scheduled once every CTA of this one runs */
    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int wg = warp >> 2; /* warpgroup */
    const int wq = warp & 3;  /* warp within it: rows 16*wq.. of every m64 tile */
    const int slot = blockIdx.x;
    const int chunk = chunk_tokens(num_kv_indices);

    int cnt = 0;
    for (int base = 0; base < batch_size; base += THREADS) {
        const int bb = base + tid;
        const bool pred = bb < batch_size && slot_begin(__ldg(kv_indptr + bb), bb, chunk) <= slot;
        cnt += __syncthreads_count(pred);
    }
    const int b = cnt - 1;
    if (b < 0)
        return;
    const int start = __ldg(kv_indptr + b);
    const int len = __ldg(kv_indptr + b + 1) - start;
    const int n_chunks = len > 0 ? (len + chunk - 1) / chunk : 0;
    const int j = slot - slot_begin(start, b, chunk);
    if (j >= n_chunks)
        return;
    const int t_begin = start + j * chunk;
    const int clen = min(chunk, len - j * chunk);
    const int n_tiles = (clen + TILE - 1) / TILE;
    const bool direct = n_chunks == 1;

    for (int k = tid; k < chunk; k += THREADS) {
        int pg = -1;
        if (k < clen && t_begin + k < num_kv_indices)
            pg = __ldg(kv_indices + t_begin + k);
        s_idx[k] = ((unsigned)pg < (unsigned)num_pages) ? pg : -1;
    }
    /* Q: piece p (8 dims) of head h at (h/8)*Q_SBO + p*128 + (h%8)*16 */
    for (int i = tid; i < NUM_QO_HEADS * ROW_PIECES; i += THREADS) {
        const int h = i / ROW_PIECES, p = i % ROW_PIECES;
        const uint4 v = p < 64 ? __ldg(reinterpret_cast<const uint4 *>(q_nope + ((size_t)b * NUM_QO_HEADS + h) * DIM_CKV) + p)
                               : __ldg(reinterpret_cast<const uint4 *>(q_pe + ((size_t)b * NUM_QO_HEADS + h) * DIM_KPE) + (p - 64));
        *reinterpret_cast<uint4 *>(s_q + (h >> 3) * Q_SBO + p * 128 + (h & 7) * 16) = v;
    }
    const unsigned bar0 = smem_addr(s_bar);
    if (tid == 0) {
        for (int st = 0; st < STAGES; st++)
            mbar_init(bar0 + 8 * st, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); /* Q, written by st.shared, read by wgmma */
    __syncthreads();

    unsigned long long policy = 0;
    if (HINT)
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
    const int fallback = s_idx[0] >= 0 ? s_idx[0] : 0; /* a real row for tokens past the chunk */
    const unsigned ring = smem_addr(s_ring);
    auto issue_tile = [&](int u) {
        if (warp == 0 && u < n_tiles) {
            const unsigned bar = bar0 + 8 * (u % STAGES);
            if (lane == 0)
                mbar_arrive_expect_tx(bar, TILE * (DIM_QK * 2));
            __syncwarp();
            for (int t = lane; t < TILE; t += 32) {
                int pg = u * TILE + t < clen ? s_idx[u * TILE + t] : -1;
                if (pg < 0)
                    pg = fallback;
                const unsigned dst = ring + (unsigned)(((u % STAGES) * TILE + t) * ROW_BYTES);
                bulk_copy(dst, ckv_cache + (size_t)pg * DIM_CKV, DIM_CKV * 2, bar, policy);
                bulk_copy(dst + DIM_CKV * 2, kpe_cache + (size_t)pg * DIM_KPE, DIM_KPE * 2, bar, policy);
            }
        }
    };
    for (int u = 0; u < STAGES; u++)
        issue_tile(u);

    const float qk_scale = sm_scale * LOG2E;
    const int r = lane >> 2;
    const int c = lane & 3;
    /* A (K rows) for the score: row 16*wq + (lane & 15), piece + lane/16 */
    const unsigned ka_off = (unsigned)(((16 * wq + (lane & 15)) % TILE) * ROW_BYTES + (lane >> 4) * 16);
    /* A (V^T, .trans) for PV: token (lane & 7) + 8*((lane >> 4) & 1), dim piece 2*wq + ((lane >> 3) & 1) */
    const unsigned va_off = (unsigned)(((lane & 7) + 8 * ((lane >> 4) & 1)) * ROW_BYTES + (2 * wq + ((lane >> 3) & 1)) * 16);
    const unsigned q_base = smem_addr(s_q) + (unsigned)(wg * KPG * 256);
    const unsigned p_base = smem_addr(s_p);

    float m_run[HPW], l_run[HPW];
#pragma unroll
    for (int i = 0; i < HPW; i++) {
        m_run[i] = NEG_BIG;
        l_run[i] = 0.0f;
    }
    float o[MTG][8]; /* m-tile wg*MTG + i: dims 64*mt + 16*wq + r (+8), heads 8*jn + 2c (+1) */
#pragma unroll
    for (int i = 0; i < MTG; i++)
#pragma unroll
        for (int e = 0; e < 8; e++)
            o[i][e] = 0.0f;

    for (int u = 0; u < n_tiles; u++) {
        mbar_wait(bar0 + 8 * (u % STAGES), (unsigned)((u / STAGES) & 1));
        const unsigned tile = ring + (unsigned)((u % STAGES) * TILE * ROW_BYTES);

        /* 1. S^T over this warpgroup's k-steps */
        float s[8];
#pragma unroll
        for (int e = 0; e < 8; e++)
            s[e] = 0.0f;
#pragma unroll
        for (int k0 = 0; k0 < KPG; k0 += KB) {
            unsigned a[KB][4];
#pragma unroll
            for (int k = 0; k < KB; k++)
                ldmatrix_x4(a[k], tile + ka_off + (unsigned)((wg * KPG + k0 + k) * 32));
            wgmma_fence();
#pragma unroll
            for (int k = 0; k < KB; k++)
                wgmma_m64n16(s, a[k], wgmma_desc(q_base + (unsigned)((k0 + k) * 256), Q_SBO), 1);
            wgmma_commit();
            wgmma_wait0();
        }
        {
            float *const sp = s_s + wg * NUM_QO_HEADS * MROWS;
            const int t0 = 16 * wq + r;
#pragma unroll
            for (int jn = 0; jn < 2; jn++) {
                const int h = 8 * jn + 2 * c;
                sp[h * MROWS + t0] = s[4 * jn];
                sp[(h + 1) * MROWS + t0] = s[4 * jn + 1];
                sp[h * MROWS + t0 + 8] = s[4 * jn + 2];
                sp[(h + 1) * MROWS + t0 + 8] = s[4 * jn + 3];
            }
        }
        __syncthreads(); /* scores complete; every warp is done with tile u-1 */
        if (u > 0)
            issue_tile(u + STAGES - 1); /* refills the slot of tile u-1 (the prologue issued up to STAGES-1) */

        /* 2. online softmax: warp owns heads warp + WARPS*i, lane owns tokens lane, lane + 32 */
#pragma unroll
        for (int i = 0; i < HPW; i++) {
            const int h = warp + WARPS * i;
            float sv[2];
            float mx = neg_inf();
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int t = lane + 32 * e;
                sv[e] = neg_inf();
                if (t < TILE && u * TILE + t < clen) {
                    float v = 0.0f;
#pragma unroll
                    for (int k = 0; k < WG; k++)
                        v += s_s[(k * NUM_QO_HEADS + h) * MROWS + t];
                    sv[e] = v * qk_scale;
                }
                mx = fmaxf(mx, sv[e]);
            }
#pragma unroll
            for (int off = 16; off >= 1; off /= 2)
                mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, off));
            const float m_new = fmaxf(m_run[i], mx);
            const float corr = exp2f(m_run[i] - m_new);
            float sum = 0.0f;
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int t = lane + 32 * e;
                const float p = exp2f(sv[e] - m_new);
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
        __syncthreads();

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
                unsigned a[PVB][TILE / 16][4];
#pragma unroll
                for (int i = 0; i < PVB; i++)
#pragma unroll
                    for (int ks = 0; ks < TILE / 16; ks++)
                        ldmatrix_x4_trans(a[i][ks], tile + va_off + (unsigned)(ks * 16 * ROW_BYTES) +
                                                        (unsigned)((wg * MTG + i0 + i) * 128));
                wgmma_fence();
#pragma unroll
                for (int i = 0; i < PVB; i++)
#pragma unroll
                    for (int ks = 0; ks < TILE / 16; ks++)
                        wgmma_m64n16(o[i0 + i], a[i][ks], wgmma_desc(p_base + (unsigned)(ks * 256), P_SBO), 1);
                wgmma_commit();
                wgmma_wait0();
            }
        }
    }

#pragma unroll
    for (int i = 0; i < HPW; i++)
        if (lane == 0) {
            s_ml[2 * (warp + WARPS * i)] = m_run[i];
            s_ml[2 * (warp + WARPS * i) + 1] = l_run[i];
        }
    __syncthreads();
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
            const int d = 64 * (wg * MTG + i) + 16 * wq + r + 8 * ((e >> 1) & 1);
            const float x = o[i][e] * inv[2 * jn + (e & 1)];
            if (direct)
                output[((size_t)b * NUM_QO_HEADS + h) * DIM_CKV + d] = __float2bfloat16(x);
            else if (PART)
                reinterpret_cast<__nv_bfloat16 *>(part_o)[((size_t)slot * NUM_QO_HEADS + h) * DIM_CKV + d] =
                    __float2bfloat16(x);
            else
                part_o[((size_t)slot * NUM_QO_HEADS + h) * DIM_CKV + d] = x;
        }
    if (tid < NUM_QO_HEADS) {
        const float L = s_ml[2 * tid + 1];
        const float ls = L > 0.0f ? s_ml[2 * tid] + log2f(L) : neg_inf();
        if (direct)
            lse[(size_t)b * NUM_QO_HEADS + tid] = ls;
        else
            part_lse[(size_t)slot * NUM_QO_HEADS + tid] = ls;
    }
}

/* One CTA of 4 warps per (request, head): warp w takes the request's chunk slots w, w+4, ...
   (four slots per step, so a lane has 8 to 16 loads in flight rather than one), lane owns dims
   8*lane.. and 256 + 8*lane..; the 4 warps' sums meet in shared memory. Requests of one chunk
   were finished by the partial kernel; requests of no token get output 0 and lse -inf. */
extern "C" __global__ void __launch_bounds__(128)
mla_wgmma_merge(const int *__restrict__ kv_indptr, const float *__restrict__ part_o,
              const float *__restrict__ part_lse, __nv_bfloat16 *__restrict__ output, float *__restrict__ lse,
              int batch_size, int num_kv_indices)
{
    __shared__ float s_acc[4][DIM_CKV];
    __shared__ float s_l[4];
    const int row = blockIdx.x; /* b*16 + head */
    if (row >= batch_size * NUM_QO_HEADS)
        return;
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int b = row / NUM_QO_HEADS;
    const int head = row % NUM_QO_HEADS;

    const int chunk = chunk_tokens(num_kv_indices);
    const int start = __ldg(kv_indptr + b);
    const int len = __ldg(kv_indptr + b + 1) - start;
    int n = len > 0 ? (len + chunk - 1) / chunk : 0;
    if (n == 1)
        return; /* written by mla_wgmma_partial */
    const int s0 = slot_begin(start, b, chunk);
    const int n_slots = (num_kv_indices + chunk - 1) / chunk + batch_size; /* the partial grid */
    if (n > 0 && (s0 < 0 || s0 + n > n_slots))
        n = 0; /* inconsistent kv_indptr: never read past the scratch */
    pdl_wait(); /* the partial grid has finished and its stores are visible */

    float mx = neg_inf();
    for (int s = lane; s < n; s += 32)
        mx = fmaxf(mx, __ldg(part_lse + (size_t)(s0 + s) * NUM_QO_HEADS + head));
#pragma unroll
    for (int off = 16; off >= 1; off /= 2)
        mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, off));

    float L = 0.0f;
    float acc[16];
#pragma unroll
    for (int i = 0; i < 16; i++)
        acc[i] = 0.0f;
    for (int s = warp; s < n; s += 4 * 4) { /* warp-uniform */
        float ws[4];
        uint4 raw[4][4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int sk = s + 4 * k;
            const float ls = sk < n ? __ldg(part_lse + (size_t)(s0 + sk) * NUM_QO_HEADS + head) : neg_inf();
            ws[k] = (ls == neg_inf()) ? 0.0f : exp2f(ls - mx);
            const size_t prow = ((size_t)(s0 + (sk < n ? sk : s)) * NUM_QO_HEADS + head) * DIM_CKV;
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int d = half * 256 + lane * 8;
                if (PART) {
                    raw[k][2 * half] = __ldg(reinterpret_cast<const uint4 *>(reinterpret_cast<const __nv_bfloat16 *>(part_o) + prow + d));
                } else {
                    raw[k][2 * half] = __ldg(reinterpret_cast<const uint4 *>(part_o + prow + d));
                    raw[k][2 * half + 1] = __ldg(reinterpret_cast<const uint4 *>(part_o + prow + d + 4));
                }
            }
        }
#pragma unroll
        for (int k = 0; k < 4; k++) {
            L += ws[k];
            if (ws[k] == 0.0f)
                continue;
#pragma unroll
            for (int half = 0; half < 2; half++) {
                float x[8];
                if (PART) {
                    const __nv_bfloat162 *h2 = reinterpret_cast<const __nv_bfloat162 *>(&raw[k][2 * half]);
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const float2 f = __bfloat1622float2(h2[e]);
                        x[2 * e] = f.x;
                        x[2 * e + 1] = f.y;
                    }
                } else {
                    const float *f0 = reinterpret_cast<const float *>(&raw[k][2 * half]);
                    const float *f1 = reinterpret_cast<const float *>(&raw[k][2 * half + 1]);
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        x[e] = f0[e];
                        x[4 + e] = f1[e];
                    }
                }
#pragma unroll
                for (int e = 0; e < 8; e++)
                    acc[half * 8 + e] = fmaf(ws[k], x[e], acc[half * 8 + e]);
            }
        }
    }
#pragma unroll
    for (int half = 0; half < 2; half++)
#pragma unroll
        for (int e = 0; e < 8; e++)
            s_acc[warp][half * 256 + lane * 8 + e] = acc[half * 8 + e];
    if (lane == 0)
        s_l[warp] = L; /* the same in every lane */
    __syncthreads();

    const float Lt = s_l[0] + s_l[1] + s_l[2] + s_l[3];
    const float inv = (Lt > 0.0f) ? 1.0f / Lt : 0.0f;
    for (int d = threadIdx.x * 4; d < DIM_CKV; d += 128 * 4) {
        float o[4];
#pragma unroll
        for (int e = 0; e < 4; e++)
            o[e] = (s_acc[0][d + e] + s_acc[1][d + e] + s_acc[2][d + e] + s_acc[3][d + e]) * inv;
        __nv_bfloat162 *out = reinterpret_cast<__nv_bfloat162 *>(output + (size_t)row * DIM_CKV + d);
        out[0] = __floats2bfloat162_rn(o[0], o[1]);
        out[1] = __floats2bfloat162_rn(o[2], o[3]);
    }
    if (threadIdx.x == 0)
        lse[row] = (Lt > 0.0f) ? mx + log2f(Lt) : neg_inf();
}
