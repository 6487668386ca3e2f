/* ksearch
{ "params": {"SPLITS": [16, 8, 32], "WARPS": [4, 2], "STAGES": [2, 3]},
  "scratch": {"part_o": ["float32", "batch_size*num_qo_heads*SPLITS*head_dim"],
              "part_lse": ["float32", "batch_size*num_qo_heads*SPLITS"]},
  "launch": [
    {"kernel": "gqa_mma_partial", "grid": ["batch_size*num_kv_heads", "SPLITS"], "block": ["WARPS*32"],
     "smem": "WARPS*STAGES*8704",
     "args": ["q", "k_cache", "v_cache", "kv_indptr", "kv_indices", "sm_scale",
              "part_o", "part_lse", "batch_size"]},
    {"kernel": "gqa_mma_merge", "grid": ["batch_size*num_kv_heads"], "block": ["256"],
     "args": ["part_o", "part_lse", "output", "lse", "batch_size"]} ] }
*/
/*
 * Family "mma_tiles": tensor cores (mma.sync m16n8k16, bf16 in, fp32 accumulate) with
 * the tokens, not the 8 query heads, on the M side, so nothing is padded:
 *   S^T [16 tokens x 8 heads]  = K_tile [16 x 128] . Q^T [128 x 8]   (8 mma, k = dims)
 *   O^T [128 dims x 8 heads]  += V_tile^T [128 x 16] . P^T [16 x 8]   (8 mma, k = tokens)
 * Q^T stays in registers as B fragments for the whole kernel (exact bf16; the scale
 * sm_scale*log2(e) is applied to the fp32 scores). K comes from shared memory through
 * ldmatrix, V^T through ldmatrix.trans; P^T is the S^T accumulator fragment turned into
 * bf16 and transposed in registers with movmatrix. A thread's accumulators cover heads
 * 2*(lane%4) and 2*(lane%4)+1 in both S^T and O^T, so the online-softmax rescale needs
 * no shuffle. Softmax is base 2, fp32, with a lazy rescale (only when a max grows).
 *
 * Memory: every warp streams its own 16-token tiles (tiles warp, warp+WARPS, ... of the
 * CTA's split) through a private STAGES-deep ring filled with 16-byte
 * cp.async.cg.shared.global (zero-fill past the end), so warps never wait for each
 * other until the final merge. Rows are padded to 272 bytes so ldmatrix is conflict-free.
 * Split-K over the sequence as in split_kv: SPLITS CTAs per (request, KV head) write
 * fp32 partials (o_s, lse_s); a second launch merges them.
 *
 * Params:
 *   SPLITS - CTAs per (request, KV head): GPU fill at small batch vs. partial traffic.
 *   WARPS  - warps per CTA, each with its own ring: more tiles in flight per CTA, more
 *            shared memory per CTA (8704 bytes per warp per stage).
 *   STAGES - ring depth per warp: tiles in flight while one is computed.
 * Shared memory: WARPS*STAGES*8704 bytes (17 KiB for the first values; up to 136 KiB,
 * which needs the >48 KiB opt-in).
 */
#include <cuda_bf16.h>

#ifndef SPLITS
#define SPLITS 8
#endif
#ifndef WARPS
#define WARPS 2
#endif
#ifndef STAGES
#define STAGES 2
#endif

#define NUM_QO_HEADS 32
#define NUM_KV_HEADS 4
#define HEAD_DIM 128
#define GROUP 8
#define FULL_MASK 0xffffffffu
#define NEG_BIG (-1.0e30f) /* "no token yet": finite, so exp2(NEG_BIG - NEG_BIG) = 1, never NaN */
#define LOG2E 1.4426950408889634f
#define TOK 16                      /* tokens per warp tile (the mma M) */
#define ROW_STRIDE (HEAD_DIM + 8)   /* bf16 per shared-memory row: 272 bytes, conflict-free ldmatrix */
#define ACC_STRIDE (HEAD_DIM + 4)   /* floats per row of the merge buffer */

static_assert(SPLITS >= 1 && SPLITS <= 32, "the merge kernel holds one split per lane");
static_assert(STAGES >= 2, "at least double buffering");
static_assert(WARPS >= 1 && WARPS <= 8, "WARPS in [1, 8]");

constexpr int STAGE_ELEMS = 2 * TOK * ROW_STRIDE;   /* K tile then V tile */
static_assert(STAGE_ELEMS * 2 == 8704, "keep the smem expression in the header in sync");
static_assert(WARPS * STAGES * STAGE_ELEMS * 2 >= WARPS * (GROUP * ACC_STRIDE + GROUP * 2) * 4,
              "the merge reuses the ring");

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

extern "C" __global__ void __launch_bounds__(WARPS * 32)
gqa_mma_partial(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k_cache,
                const __nv_bfloat16 *__restrict__ v_cache, const int *__restrict__ kv_indptr,
                const int *__restrict__ kv_indices, float sm_scale, float *__restrict__ part_o,
                float *__restrict__ part_lse, int batch_size)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];

    const int b = blockIdx.x / NUM_KV_HEADS;
    const int kvh = blockIdx.x % NUM_KV_HEADS;
    const int split = blockIdx.y;
    if (b >= batch_size || split >= SPLITS)
        return;
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int r = lane >> 2; /* fragment row */
    const int c = lane & 3;  /* fragment column pair */

    const int start = kv_indptr[b];
    const int len = kv_indptr[b + 1] - start;
    const int t_begin = start + (int)(((long long)len * split) / SPLITS);
    const int t_end = start + (int)(((long long)len * (split + 1)) / SPLITS);
    const int n_tiles = (t_end - t_begin + TOK - 1) / TOK;
    const int my_tiles = (n_tiles - warp + WARPS - 1) / WARPS; /* tiles warp, warp+WARPS, ... */

    __nv_bfloat16 *const ring = reinterpret_cast<__nv_bfloat16 *>(smem_raw) + warp * STAGES * STAGE_ELEMS;
    const unsigned ring_addr = smem_addr(ring);

    /* page index of token (lane & 15) of this warp's k-th tile, -1 past the end */
    auto load_idx = [&](int k) -> int {
        const int t = t_begin + (warp + k * WARPS) * TOK + (lane & 15);
        return (k < my_tiles && t < t_end) ? __ldg(kv_indices + t) : -1;
    };
    /* lanes 0-15 copy the 16 chunks of even rows, lanes 16-31 of odd rows */
    auto issue_tile = [&](int k, int idx) {
        if (k < my_tiles) { /* warp-uniform */
            const unsigned ks = ring_addr + (unsigned)((k % STAGES) * STAGE_ELEMS * 2);
            const unsigned vs = ks + TOK * ROW_STRIDE * 2;
#pragma unroll
            for (int i = 0; i < TOK / 2; i++) {
                const int row = 2 * i + (lane >> 4);
                const int pg = __shfl_sync(FULL_MASK, idx, row);
                const bool valid = pg >= 0;
                const size_t off = valid ? ((size_t)pg * NUM_KV_HEADS + kvh) * HEAD_DIM + (lane & 15) * 8 : 0;
                const unsigned dst = (unsigned)((row * ROW_STRIDE + (lane & 15) * 8) * 2);
                cp_async16(ks + dst, k_cache + off, valid);
                cp_async16(vs + dst, v_cache + off, valid);
            }
        }
        cp_async_commit(); /* always commit, so group counting stays uniform */
    };

#pragma unroll
    for (int k = 0; k < STAGES - 1; k++)
        issue_tile(k, load_idx(k));
    int next_idx = load_idx(STAGES - 1);

    /* Q^T as B fragments: qb[kk] = {q[head r][16kk + 2c, +1], q[head r][16kk + 2c + 8, +9]} */
    unsigned qb[HEAD_DIM / 16][2];
    {
        const unsigned *qrow = reinterpret_cast<const unsigned *>(
            q + ((size_t)b * NUM_QO_HEADS + kvh * GROUP + r) * HEAD_DIM);
#pragma unroll
        for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
            qb[kk][0] = __ldg(qrow + kk * 8 + c);
            qb[kk][1] = __ldg(qrow + kk * 8 + 4 + c);
        }
    }
    const float qk_scale = sm_scale * LOG2E;

    float m0 = NEG_BIG, m1 = NEG_BIG; /* running max of heads 2c, 2c+1 (shared by the warp) */
    float l0 = 0.0f, l1 = 0.0f;       /* this thread's part of the running sums */
    float o[HEAD_DIM / 16][4];        /* O^T fragments: dims 16mt + r (+8), heads 2c, 2c+1 */
#pragma unroll
    for (int mt = 0; mt < HEAD_DIM / 16; mt++)
        o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.0f;

    /* ldmatrix lane addressing: matrix mi = lane/8, row lane%8 */
    const int mi = lane >> 3;
    const unsigned k_lane_off = (unsigned)((((lane & 7) + (mi & 1) * 8) * ROW_STRIDE + (mi >> 1) * 8) * 2);
    const unsigned v_lane_off = (unsigned)((((lane & 7) + (mi >> 1) * 8) * ROW_STRIDE + (mi & 1) * 8) * 2);

    for (int k = 0; k < my_tiles; k++) {
        cp_async_wait<STAGES - 2>(); /* this lane's copies of tile k have landed */
        __syncwarp();                /* all lanes' have; all lanes are done with tile k-1 */
        issue_tile(k + STAGES - 1, next_idx);
        next_idx = load_idx(k + STAGES);

        const unsigned ks = ring_addr + (unsigned)((k % STAGES) * STAGE_ELEMS * 2);
        const unsigned vs = ks + TOK * ROW_STRIDE * 2;
        const int t0 = t_begin + (warp + k * WARPS) * TOK;

        /* S^T = K . Q^T, two accumulator chains */
        float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int kk = 0; kk < HEAD_DIM / 16; kk += 2) {
            unsigned a0[4], a1[4];
            ldmatrix_x4(a0, ks + k_lane_off + kk * 32);
            ldmatrix_x4(a1, ks + k_lane_off + (kk + 1) * 32);
            mma_bf16(sa, a0, qb[kk][0], qb[kk][1]);
            mma_bf16(sb, a1, qb[kk + 1][0], qb[kk + 1][1]);
        }
        /* s[0]: token r, head 2c; s[1]: token r, head 2c+1; s[2], s[3]: token r+8 */
        const bool ok_lo = t0 + r < t_end, ok_hi = t0 + r + 8 < t_end;
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
        const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
        if (__any_sync(FULL_MASK, mn0 > m0 || mn1 > m1)) { /* lazy rescale */
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
        const float p0 = exp2f(s0 - m0), p1 = exp2f(s1 - m1), p2 = exp2f(s2 - m0), p3 = exp2f(s3 - m1);
        l0 += p0 + p2;
        l1 += p1 + p3;
        /* P^T fragments: transpose [token][head] blocks into B = [k = token][n = head] */
        const unsigned pb0 = movmatrix_trans(pack_bf16(p0, p1)); /* tokens 0-7 */
        const unsigned pb1 = movmatrix_trans(pack_bf16(p2, p3)); /* tokens 8-15 */

        /* O^T += V^T . P^T */
#pragma unroll
        for (int mt = 0; mt < HEAD_DIM / 16; mt++) {
            unsigned av[4];
            ldmatrix_x4_trans(av, vs + v_lane_off + mt * 32);
            mma_bf16(o[mt], av, pb0, pb1);
        }
    }
    cp_async_wait<0>();

    /* finish this warp: sums over the 8 rows of the fragment */
#pragma unroll
    for (int off = 4; off <= 16; off *= 2) {
        l0 += __shfl_xor_sync(FULL_MASK, l0, off);
        l1 += __shfl_xor_sync(FULL_MASK, l1, off);
    }
    __syncthreads(); /* every warp is done with its ring: reuse the memory for the merge */
    float *const sm_acc = reinterpret_cast<float *>(smem_raw);          /* [WARPS][GROUP][ACC_STRIDE] */
    float *const sm_ml = sm_acc + WARPS * GROUP * ACC_STRIDE;           /* [WARPS][GROUP][2] */
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

    for (int g = threadIdx.x; g < GROUP * HEAD_DIM / 4; g += WARPS * 32) {
        const int hh = g / (HEAD_DIM / 4);
        const int d = (g % (HEAD_DIM / 4)) * 4;
        float mx = NEG_BIG;
#pragma unroll
        for (int w = 0; w < WARPS; w++)
            mx = fmaxf(mx, sm_ml[(w * GROUP + hh) * 2]);
        float L = 0.0f;
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int w = 0; w < WARPS; w++) {
            const float sc = exp2f(sm_ml[(w * GROUP + hh) * 2] - mx); /* 0 for a warp that saw no token */
            L += sm_ml[(w * GROUP + hh) * 2 + 1] * sc;
            const float4 a = *reinterpret_cast<const float4 *>(sm_acc + (w * GROUP + hh) * ACC_STRIDE + d);
            acc.x = fmaf(a.x, sc, acc.x);
            acc.y = fmaf(a.y, sc, acc.y);
            acc.z = fmaf(a.z, sc, acc.z);
            acc.w = fmaf(a.w, sc, acc.w);
        }
        const size_t row = ((size_t)b * NUM_QO_HEADS + kvh * GROUP + hh) * SPLITS + split;
        const float inv = (L > 0.0f) ? 1.0f / L : 0.0f; /* empty split: o = 0, lse = -inf */
        *reinterpret_cast<float4 *>(part_o + row * HEAD_DIM + d) =
            make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
        if (d == 0)
            part_lse[row] = (L > 0.0f) ? mx + log2f(L) : neg_inf();
    }
}

/* One CTA per (request, KV head); warp w merges query head kvh*8 + w, lane owns 4 dims. */
extern "C" __global__ void __launch_bounds__(256)
gqa_mma_merge(const float *__restrict__ part_o, const float *__restrict__ part_lse,
                __nv_bfloat16 *__restrict__ output, float *__restrict__ lse, int batch_size)
{
    const int row = blockIdx.x * GROUP + (threadIdx.x >> 5); /* b*32 + query head */
    if (row >= batch_size * NUM_QO_HEADS)
        return;
    const int lane = threadIdx.x & 31;

    const float ls = (lane < SPLITS) ? part_lse[(size_t)row * SPLITS + lane] : neg_inf();
    float mx = ls;
#pragma unroll
    for (int off = 16; off >= 1; off /= 2)
        mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, off));
    const float w = (ls == neg_inf()) ? 0.0f : exp2f(ls - mx);
    float L = w;
#pragma unroll
    for (int off = 16; off >= 1; off /= 2)
        L += __shfl_xor_sync(FULL_MASK, L, off);

    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int s = 0; s < SPLITS; s++) {
        const float ws = __shfl_sync(FULL_MASK, w, s);
        if (ws != 0.0f) { /* warp-uniform; skips empty splits */
            const float4 p = __ldg(reinterpret_cast<const float4 *>(part_o + ((size_t)row * SPLITS + s) * HEAD_DIM) + lane);
            o.x = fmaf(ws, p.x, o.x);
            o.y = fmaf(ws, p.y, o.y);
            o.z = fmaf(ws, p.z, o.z);
            o.w = fmaf(ws, p.w, o.w);
        }
    }
    const float inv = (L > 0.0f) ? 1.0f / L : 0.0f;
    __nv_bfloat162 *out = reinterpret_cast<__nv_bfloat162 *>(output + (size_t)row * HEAD_DIM + lane * 4);
    out[0] = __floats2bfloat162_rn(o.x * inv, o.y * inv);
    out[1] = __floats2bfloat162_rn(o.z * inv, o.w * inv);
    if (lane == 0)
        lse[row] = (L > 0.0f) ? mx + log2f(L) : neg_inf();
}
