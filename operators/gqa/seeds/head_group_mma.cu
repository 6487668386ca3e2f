/* ksearch
{ "params": {"CHUNK": [32, 64, 128, 256, 512], "TILE": [16, 32], "STAGES": [2, 3, 4]},
  "scratch": {"part_o": ["float32", "(cdiv(num_kv_indices, CHUNK) + batch_size)*num_qo_heads*head_dim"],
              "part_lse": ["float32", "(cdiv(num_kv_indices, CHUNK) + batch_size)*num_qo_heads"]},
  "launch": [
    {"kernel": "gqa_hg_partial", "grid": ["cdiv(num_kv_indices, CHUNK) + batch_size"], "block": ["TILE*8"],
     "smem": "STAGES*TILE*1024 + CHUNK*4",
     "args": ["q", "k_cache", "v_cache", "kv_indptr", "kv_indices", "sm_scale",
              "part_o", "part_lse", "output", "lse", "batch_size", "num_pages", "num_kv_indices"]},
    {"kernel": "gqa_hg_merge", "grid": ["batch_size*num_kv_heads"], "block": ["256"],
     "args": ["kv_indptr", "part_o", "part_lse", "output", "lse", "batch_size", "num_kv_indices"]} ] }
*/
/*
 * Family "head_group_mma": one CTA serves ALL 4 KV heads (all 32 query heads) of one
 * request for a chunk of CHUNK consecutive tokens, so every page is fetched once as a
 * whole: a token's K page (4 heads x 128 dims x bf16 = 1024 contiguous bytes) and its V
 * page are each copied by 64 lanes with 16-byte cp.async.cg (one 1 KiB DRAM run per
 * page, instead of four scattered 256-byte rows read by four CTAs).
 *
 * Work split ("flattened" split-K): request b owns the chunk slots
 *   [f(b), f(b) + cdiv(len_b, CHUNK)),  f(b) = floor(kv_indptr[b] / CHUNK) + b,
 * which never overlap (f(b+1) - f(b) >= cdiv(len_b, CHUNK)) and all lie below
 * cdiv(num_kv_indices, CHUNK) + batch_size (the grid). A CTA finds its request as the
 * number of b with f(b) <= blockIdx.x, minus one (f is strictly increasing), with one
 * coalesced read of kv_indptr and __syncthreads_count; slots past the end of a request
 * exit at once. Every live slot has 1..CHUNK tokens, so no partial is ever empty.
 * A request that fits in one chunk is finished in place (bf16 output and lse written
 * directly); otherwise the CTA writes fp32 partials (o_s, lse_s) to its slot and the
 * merge launch combines the slots of the request.
 *
 * Pipeline: the chunk's page indices go to shared memory first (one read). The ring
 * holds STAGES units; a unit is the K pages or the V pages of one TILE-token tile
 * (units K0, V0, K1, V1, ...), TILE KiB each, so the first params fit in 32 KiB and a
 * V tile streams in while the scores of its tile are computed. One __syncthreads per
 * unit. Invalid tokens (past the chunk) are zero-filled by cp.async (src-size 0).
 * Rows are unpadded 1024-byte pages, 16-byte piece p of token t stored at p ^ (t & 7)
 * (XOR swizzle inside a 128-byte group, i.e. inside one head), so ldmatrix and the
 * cp.async stores are bank-conflict free.
 *
 * Math (as mma_tiles): TILE/4 warps, warp w serves KV head g = w % 4 and the 16-token
 * m-tile w / 4 of every tile: mma.sync m16n8k16 bf16 with fp32 accumulate, tokens on M:
 *   S^T [16 tok x 8 heads] = K [16 x 128] . Q^T [128 x 8]   (8 mma; K via ldmatrix)
 *   O^T [128 x 8]         += V^T [128 x 16] . P^T [16 x 8]   (8 mma; V^T via ldmatrix.trans,
 *                                                            P^T via movmatrix)
 * Q^T stays in registers (bf16, exact); scores are scaled by sm_scale*log2(e) in fp32;
 * base-2 online softmax with lazy rescale. At the end the ring is reused to merge the
 * TILE/16 warps of each head (a warp that saw no valid token has m = -1e30, l = 0 and
 * gets weight 0).
 *
 * Params:
 *   CHUNK  - tokens per CTA (multiple of TILE): GPU fill and balance vs. partial traffic
 *            (16 KiB of fp32 partials per chunk of CHUNK*2 KiB of K/V).
 *   TILE   - tokens per unit, 16 (4 warps) or 32 (8 warps, two m-tiles per head).
 *   STAGES - ring depth in units: STAGES-1 units (TILE KiB each) in flight.
 * Shared memory: STAGES*TILE*1024 + CHUNK*4 bytes (32.1 KiB for the first values; up
 * to 130 KiB, which needs the >48 KiB opt-in).
 */
#include <cuda_bf16.h>

#ifndef CHUNK
#define CHUNK 64
#endif
#ifndef TILE
#define TILE 16
#endif
#ifndef STAGES
#define STAGES 2
#endif

#define NUM_QO_HEADS 32
#define NUM_KV_HEADS 4
#define HEAD_DIM 128
#define GROUP 8
#define PAGE_ELEMS (NUM_KV_HEADS * HEAD_DIM) /* bf16 per page (page_size 1): 512 */
#define PAGE_BYTES (PAGE_ELEMS * 2)          /* 1024 */
#define PAGE_PIECES (PAGE_BYTES / 16)        /* 16-byte pieces per page: 64 */
#define HEAD_BYTES (HEAD_DIM * 2)            /* 256 */
#define FULL_MASK 0xffffffffu
#define NEG_BIG (-1.0e30f) /* "no token yet": finite, so exp2(NEG_BIG - NEG_BIG) = 1, never NaN */
#define LOG2E 1.4426950408889634f
#define MTILES (TILE / 16)                  /* 16-token m-tiles per tile = warps per KV head */
#define WARPS (NUM_KV_HEADS * MTILES)
#define THREADS (WARPS * 32)
#define ACC_STRIDE (HEAD_DIM + 4) /* floats per row of the merge buffer */

static_assert(TILE == 16 || TILE == 32, "TILE is 16 (4 warps) or 32 (8 warps)");
static_assert(THREADS == TILE * 8, "keep the block expression in the header in sync");
static_assert(CHUNK % TILE == 0 && CHUNK >= TILE, "a chunk is a whole number of tiles");
static_assert(STAGES >= 2, "at least double buffering");
static_assert(PAGE_BYTES == 1024 && PAGE_PIECES == 64, "one page = 4 heads x 128 bf16");
static_assert((TILE * PAGE_PIECES) % THREADS == 0 && (TILE * PAGE_PIECES) / THREADS == 8,
              "each thread copies 8 pieces per unit");

constexpr int UNIT_BYTES = TILE * PAGE_BYTES;      /* K (or V) pages of one tile */
constexpr int RING_BYTES = STAGES * UNIT_BYTES;
constexpr int SMEM_BYTES = RING_BYTES + CHUNK * 4; /* ring, then the chunk's page indices */
static_assert(SMEM_BYTES == STAGES * TILE * 1024 + CHUNK * 4, "keep the smem expression in the header in sync");
static_assert(RING_BYTES >= WARPS * (GROUP * ACC_STRIDE + GROUP * 2) * 4, "the final merge reuses the ring");

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

__device__ __forceinline__ unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp_async16(unsigned dst, const void *gmem_src, bool valid)
{
    const int src_size = valid ? 16 : 0; /* 0: write 16 zero bytes, read nothing */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(src_size)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

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

/* first chunk slot of a request: floor(indptr / CHUNK) + b (strictly increasing in b) */
__device__ __forceinline__ int slot_begin(int indptr_b, int b) { return indptr_b / CHUNK + b; }

extern "C" __global__ void __launch_bounds__(THREADS)
gqa_hg_partial(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k_cache,
               const __nv_bfloat16 *__restrict__ v_cache, const int *__restrict__ kv_indptr,
               const int *__restrict__ kv_indices, float sm_scale, float *__restrict__ part_o,
               float *__restrict__ part_lse, __nv_bfloat16 *__restrict__ output, float *__restrict__ lse,
               int batch_size, int num_pages, int num_kv_indices)
{
    extern __shared__ __align__(128) unsigned char smem_raw[];
    int *const s_idx = reinterpret_cast<int *>(smem_raw + RING_BYTES); /* [CHUNK] page indices, -1 = none */

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int slot = blockIdx.x;

    /* ---- which request owns this slot: b = #{b < B : f(b) <= slot} - 1 (block-uniform) ---- */
    int cnt = 0;
    for (int base = 0; base < batch_size; base += THREADS) {
        const int bb = base + tid;
        const bool pred = bb < batch_size && slot_begin(__ldg(kv_indptr + bb), bb) <= slot;
        cnt += __syncthreads_count(pred);
    }
    const int b = cnt - 1;
    if (b < 0)
        return; /* only if kv_indptr[0] > 0: slots below request 0's */
    const int start = __ldg(kv_indptr + b);
    const int len = __ldg(kv_indptr + b + 1) - start;
    const int n_chunks = len > 0 ? (len + CHUNK - 1) / CHUNK : 0;
    const int j = slot - slot_begin(start, b); /* >= 0 */
    if (j >= n_chunks)
        return; /* idle slot between requests / past the last one */
    const int t_begin = start + j * CHUNK;
    const int clen = min(CHUNK, len - j * CHUNK); /* 1..CHUNK tokens */
    const int n_units = 2 * ((clen + TILE - 1) / TILE); /* K, V per tile */
    const bool direct = n_chunks == 1;                  /* the whole request: write the final result */

    const int g = warp & (NUM_KV_HEADS - 1); /* KV head of this warp */
    const int mrow = warp / NUM_KV_HEADS;    /* its 16-token m-tile within a tile */
    const int r = lane >> 2;                 /* fragment row */
    const int c = lane & 3;                  /* fragment column pair */

    /* ---- the chunk's page indices to shared memory (-1 past the end or out of range) ---- */
    for (int k = tid; k < CHUNK; k += THREADS) {
        int pg = -1;
        if (k < clen && t_begin + k < num_kv_indices)
            pg = __ldg(kv_indices + t_begin + k);
        s_idx[k] = ((unsigned)pg < (unsigned)num_pages) ? pg : -1;
    }

    /* Q^T as B fragments: qb[kk] = {q[head r][16kk + 2c, +1], q[head r][16kk + 2c + 8, +9]} */
    unsigned qb[HEAD_DIM / 16][2];
    {
        const unsigned *qrow = reinterpret_cast<const unsigned *>(
            q + ((size_t)b * NUM_QO_HEADS + g * GROUP + r) * HEAD_DIM);
#pragma unroll
        for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
            qb[kk][0] = __ldg(qrow + kk * 8 + c);
            qb[kk][1] = __ldg(qrow + kk * 8 + 4 + c);
        }
    }
    __syncthreads(); /* s_idx ready */

    const unsigned ring = smem_addr(smem_raw);
    /* thread copies piece (tid % 64) of tokens tid/64 + i*(THREADS/64), i = 0..7, of a unit */
    const int cp_piece = tid & (PAGE_PIECES - 1);
    const int cp_row0 = tid / PAGE_PIECES;
    auto issue_unit = [&](int u) {
        if (u < n_units) { /* block-uniform */
            const unsigned dst0 = ring + (unsigned)((u % STAGES) * UNIT_BYTES);
            const __nv_bfloat16 *const src0 = (u & 1) ? v_cache : k_cache;
            const int tok0 = (u >> 1) * TILE;
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int tr = cp_row0 + i * (THREADS / PAGE_PIECES); /* token row in the tile */
                const int pg = s_idx[tok0 + tr];                      /* tok0 + tr < CHUNK */
                const bool valid = pg >= 0;
                const __nv_bfloat16 *src = src0 + (valid ? (size_t)pg * PAGE_ELEMS + cp_piece * 8 : (size_t)0);
                const unsigned dst = dst0 + (unsigned)(tr * PAGE_BYTES + ((cp_piece ^ (tr & 7)) << 4));
                cp_async16(dst, src, valid);
            }
        }
        cp_async_commit(); /* always commit, so group counting stays uniform */
    };

#pragma unroll
    for (int u = 0; u < STAGES - 1; u++)
        issue_unit(u);

    const float qk_scale = sm_scale * LOG2E;
    float m0 = NEG_BIG, m1 = NEG_BIG; /* running max of heads 2c, 2c+1 (shared by the warp) */
    float l0 = 0.0f, l1 = 0.0f;       /* this thread's part of the running sums */
    float o[HEAD_DIM / 16][4];        /* O^T fragments: dims 16mt + r (+8), heads 2c, 2c+1 */
#pragma unroll
    for (int mt = 0; mt < HEAD_DIM / 16; mt++)
        o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.0f;
    unsigned pb0 = 0u, pb1 = 0u; /* P^T fragments of the current tile, from its K unit to its V unit */

    /* ldmatrix lane addressing: matrix mi = lane/8 supplies row lane%8. Token rows are
       multiples of 8 plus lane%8, so the swizzle key (token & 7) is lane & 7; logical piece
       2*kq + lo of the head lives at piece (2*kq) ^ (lo ^ (lane & 7)) (+8 for kq >= 4). */
    const int mi = lane >> 3;
    const int x = lane & 7;
    unsigned koff[4], voff[4];
    {
        /* K (A = K tile, row-major): matrix mi = rows (mi&1)*8.., dims (mi>>1)*8.. */
        const unsigned k_row = (unsigned)((mrow * 16 + x + (mi & 1) * 8) * PAGE_BYTES + g * HEAD_BYTES);
        const int yk = (mi >> 1) ^ x;
        /* V^T (A = V^T via .trans): matrix mi = tokens (mi>>1)*8.., dims (mi&1)*8.. */
        const unsigned v_row = (unsigned)((mrow * 16 + x + (mi >> 1) * 8) * PAGE_BYTES + g * HEAD_BYTES);
        const int yv = (mi & 1) ^ x;
#pragma unroll
        for (int kq = 0; kq < 4; kq++) {
            koff[kq] = k_row + (unsigned)(((2 * kq) ^ yk) << 4);
            voff[kq] = v_row + (unsigned)(((2 * kq) ^ yv) << 4);
        }
    }

    for (int u = 0; u < n_units; u++) {
        cp_async_wait<STAGES - 2>(); /* this thread's copies of unit u have landed */
        __syncthreads();             /* everyone's have; everyone is done with unit u-1 */
        issue_unit(u + STAGES - 1);  /* refills the slot of unit u-1 */

        const unsigned us = ring + (unsigned)((u % STAGES) * UNIT_BYTES);
        if ((u & 1) == 0) {
            /* K unit: S^T = K . Q^T, two accumulator chains */
            float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int kk = 0; kk < HEAD_DIM / 16; kk += 2) {
                unsigned a0[4], a1[4];
                ldmatrix_x4(a0, us + koff[kk & 3] + (unsigned)((kk >> 2) * 128));
                ldmatrix_x4(a1, us + koff[(kk + 1) & 3] + (unsigned)(((kk + 1) >> 2) * 128));
                mma_bf16(sa, a0, qb[kk][0], qb[kk][1]);
                mma_bf16(sb, a1, qb[kk + 1][0], qb[kk + 1][1]);
            }
            /* s[0]: token r, head 2c; s[1]: token r, head 2c+1; s[2], s[3]: token r+8 */
            const int t0 = (u >> 1) * TILE + mrow * 16; /* chunk-relative first token of the m-tile */
            const bool ok_lo = t0 + r < clen, ok_hi = t0 + r + 8 < clen;
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
            const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1); /* -inf tile: unchanged */
            if (__any_sync(FULL_MASK, mn0 > m0 || mn1 > m1)) {      /* lazy rescale */
                const float a0 = exp2f(m0 - mn0), a1 = exp2f(m1 - mn1);
                l0 *= a0;
                l1 *= a1;
#pragma unroll
                for (int mt = 0; mt < HEAD_DIM / 16; mt++) {
                    o[mt][0] *= a0;
                    o[mt][1] *= a1;
                    o[mt][2] *= a0;
                    o[mt][3] *= a1;
                }
                m0 = mn0;
                m1 = mn1;
            }
            /* masked tokens: exp2(-inf - m) = 0 (m is finite: NEG_BIG at worst) */
            const float p0 = exp2f(s0 - m0), p1 = exp2f(s1 - m1), p2 = exp2f(s2 - m0), p3 = exp2f(s3 - m1);
            l0 += p0 + p2;
            l1 += p1 + p3;
            /* P^T fragments: transpose [token][head] blocks into B = [k = token][n = head] */
            pb0 = movmatrix_trans(pack_bf16(p0, p1)); /* tokens 0-7 */
            pb1 = movmatrix_trans(pack_bf16(p2, p3)); /* tokens 8-15 */
        } else {
            /* V unit: O^T += V^T . P^T (zero-filled rows of masked tokens meet p = 0) */
#pragma unroll
            for (int mt = 0; mt < HEAD_DIM / 16; mt++) {
                unsigned av[4];
                ldmatrix_x4_trans(av, us + voff[mt & 3] + (unsigned)((mt >> 2) * 128));
                mma_bf16(o[mt], av, pb0, pb1);
            }
        }
    }
    cp_async_wait<0>(); /* only empty groups can be pending here */

    /* finish this warp: sums over the 8 rows of the fragment */
#pragma unroll
    for (int off = 4; off <= 16; off *= 2) {
        l0 += __shfl_xor_sync(FULL_MASK, l0, off);
        l1 += __shfl_xor_sync(FULL_MASK, l1, off);
    }
    __syncthreads(); /* every warp is done with the ring: reuse it for the merge */
    float *const sm_acc = reinterpret_cast<float *>(smem_raw); /* [WARPS][GROUP][ACC_STRIDE] */
    float *const sm_ml = sm_acc + WARPS * GROUP * ACC_STRIDE;  /* [WARPS][GROUP][2] */
    if (r == 0) {
        sm_ml[(warp * GROUP + 2 * c) * 2 + 0] = m0;
        sm_ml[(warp * GROUP + 2 * c) * 2 + 1] = l0;
        sm_ml[(warp * GROUP + 2 * c + 1) * 2 + 0] = m1;
        sm_ml[(warp * GROUP + 2 * c + 1) * 2 + 1] = l1;
    }
#pragma unroll
    for (int mt = 0; mt < HEAD_DIM / 16; mt++) {
        float *h0 = sm_acc + (warp * GROUP + 2 * c) * ACC_STRIDE + mt * 16 + r;
        float *h1 = h0 + ACC_STRIDE;
        h0[0] = o[mt][0];
        h1[0] = o[mt][1];
        h0[8] = o[mt][2];
        h1[8] = o[mt][3];
    }
    __syncthreads();

    /* query head H = g*8 + hh is held by warps g + 4*m, m < MTILES; thread item = (H, 4 dims) */
    for (int it = tid; it < NUM_QO_HEADS * (HEAD_DIM / 4); it += THREADS) {
        const int H = it / (HEAD_DIM / 4);
        const int d = (it % (HEAD_DIM / 4)) * 4;
        const int gg = H / GROUP, hh = H % GROUP;
        float mx = NEG_BIG;
#pragma unroll
        for (int m = 0; m < MTILES; m++)
            mx = fmaxf(mx, sm_ml[((gg + NUM_KV_HEADS * m) * GROUP + hh) * 2]);
        float L = 0.0f;
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int m = 0; m < MTILES; m++) {
            const int w = gg + NUM_KV_HEADS * m;
            const float sc = exp2f(sm_ml[(w * GROUP + hh) * 2] - mx); /* 0 for a warp that saw no token */
            L += sm_ml[(w * GROUP + hh) * 2 + 1] * sc;
            const float4 a = *reinterpret_cast<const float4 *>(sm_acc + (w * GROUP + hh) * ACC_STRIDE + d);
            acc.x = fmaf(a.x, sc, acc.x);
            acc.y = fmaf(a.y, sc, acc.y);
            acc.z = fmaf(a.z, sc, acc.z);
            acc.w = fmaf(a.w, sc, acc.w);
        }
        const float inv = (L > 0.0f) ? 1.0f / L : 0.0f;
        const float ls = (L > 0.0f) ? mx + log2f(L) : neg_inf();
        if (direct) {
            const size_t row = (size_t)b * NUM_QO_HEADS + H;
            __nv_bfloat162 *out = reinterpret_cast<__nv_bfloat162 *>(output + row * HEAD_DIM + d);
            out[0] = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
            out[1] = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
            if (d == 0)
                lse[row] = ls;
        } else {
            const size_t row = (size_t)slot * NUM_QO_HEADS + H;
            *reinterpret_cast<float4 *>(part_o + row * HEAD_DIM + d) =
                make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
            if (d == 0)
                part_lse[row] = ls;
        }
    }
}

/* One CTA per (request, KV head); warp w merges query head kvh*8 + w over the request's
   chunk slots, lane owns 4 dims. Requests of one chunk were finished by the partial
   kernel; requests of no token get output 0 and lse -inf. */
extern "C" __global__ void __launch_bounds__(256)
gqa_hg_merge(const int *__restrict__ kv_indptr, const float *__restrict__ part_o,
             const float *__restrict__ part_lse, __nv_bfloat16 *__restrict__ output, float *__restrict__ lse,
             int batch_size, int num_kv_indices)
{
    const int row = blockIdx.x * GROUP + (threadIdx.x >> 5); /* b*32 + query head */
    if (row >= batch_size * NUM_QO_HEADS)
        return;
    const int lane = threadIdx.x & 31;
    const int b = row / NUM_QO_HEADS;
    const int head = row % NUM_QO_HEADS;

    const int start = __ldg(kv_indptr + b);
    const int len = __ldg(kv_indptr + b + 1) - start;
    int n = len > 0 ? (len + CHUNK - 1) / CHUNK : 0;
    if (n == 1)
        return; /* written by gqa_hg_partial */
    const int s0 = slot_begin(start, b);
    const int n_slots = (num_kv_indices + CHUNK - 1) / CHUNK + batch_size; /* the partial grid */
    if (n > 0 && (s0 < 0 || s0 + n > n_slots))
        n = 0; /* inconsistent kv_indptr: never read past the scratch */

    float mx = neg_inf();
    for (int s = lane; s < n; s += 32)
        mx = fmaxf(mx, __ldg(part_lse + (size_t)(s0 + s) * NUM_QO_HEADS + head));
#pragma unroll
    for (int off = 16; off >= 1; off /= 2)
        mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, off));

    float L = 0.0f;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int sb = 0; sb < n; sb += 32) { /* warp-uniform */
        const int s = sb + lane;
        const float ls = (s < n) ? __ldg(part_lse + (size_t)(s0 + s) * NUM_QO_HEADS + head) : neg_inf();
        const float w = (ls == neg_inf()) ? 0.0f : exp2f(ls - mx);
        L += w;
        const int cnt = min(32, n - sb);
#pragma unroll 4
        for (int k = 0; k < cnt; k++) {
            const float ws = __shfl_sync(FULL_MASK, w, k);
            if (ws != 0.0f) { /* warp-uniform */
                const float4 p = __ldg(reinterpret_cast<const float4 *>(
                                           part_o + ((size_t)(s0 + sb + k) * NUM_QO_HEADS + head) * HEAD_DIM) +
                                       lane);
                o.x = fmaf(ws, p.x, o.x);
                o.y = fmaf(ws, p.y, o.y);
                o.z = fmaf(ws, p.z, o.z);
                o.w = fmaf(ws, p.w, o.w);
            }
        }
    }
#pragma unroll
    for (int off = 16; off >= 1; off /= 2)
        L += __shfl_xor_sync(FULL_MASK, L, off);

    const float inv = (L > 0.0f) ? 1.0f / L : 0.0f;
    __nv_bfloat162 *out = reinterpret_cast<__nv_bfloat162 *>(output + (size_t)row * HEAD_DIM + lane * 4);
    out[0] = __floats2bfloat162_rn(o.x * inv, o.y * inv);
    out[1] = __floats2bfloat162_rn(o.z * inv, o.w * inv);
    if (lane == 0)
        lse[row] = (L > 0.0f) ? mx + log2f(L) : neg_inf();
}
