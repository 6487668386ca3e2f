/* ksearch
{ "params": {"SPLITS": [1, 4, 8, 16], "STAGES": [2, 3, 4], "TILE": [16, 32, 64], "WARPS": [4, 8],
             "HSPLIT": [1, 2]},
  "scratch": {"part_o": ["float32", "batch_size*num_qo_heads*SPLITS*head_dim"],
              "part_lse": ["float32", "batch_size*num_qo_heads*SPLITS"]},
  "launch": [
    {"kernel": "gqa_tiles_partial", "grid": ["batch_size*num_kv_heads", "SPLITS"], "block": ["WARPS*32"],
     "smem": "max(STAGES*TILE*512, WARPS*4160)",
     "args": ["q", "k_cache", "v_cache", "kv_indptr", "kv_indices", "sm_scale",
              "part_o", "part_lse", "batch_size"]},
    {"kernel": "gqa_tiles_merge", "grid": ["batch_size*num_kv_heads"], "block": ["256"],
     "args": ["part_o", "part_lse", "output", "lse", "batch_size"]} ] }
*/
/*
 * Family "cp_async_tiles": split-K over the sequence (SPLITS CTAs per (request, KV
 * head), then a merge launch, as in split_kv), but each CTA streams its tokens through
 * a STAGES-deep ring of shared-memory tiles filled with 16-byte
 * cp.async.cg.shared.global (zero-fill past the end of the range), so the loads of the
 * next STAGES-1 tiles are in flight while the current tile is computed, independent of
 * how many registers the math needs. The page indices of the tile after next are
 * loaded into registers one iteration early, so issuing copies never waits on them.
 * A tile holds TILE tokens: K rows then V rows, 256 bytes each (TILE*512 bytes per
 * stage). Warps take contiguous slices of TILE/WARPS tokens of each tile and compute
 * from shared memory with the group_cta lane layout (half-warp per 256-byte row,
 * transposing butterfly, base-2 online softmax with lazy rescale). At the end the
 * ring is reused for the cross-warp merge, which writes fp32 partials (o_s, lse_s).
 *
 * Params:
 *   SPLITS - CTAs per (request, KV head): GPU fill vs. partial traffic.
 *   STAGES - ring depth: more bytes in flight per CTA vs. shared memory per CTA.
 *   TILE   - tokens per stage: bigger tiles amortise the per-tile barrier, but waste
 *            more on a short split's last tile.
 *   WARPS  - warps per CTA (TILE must be a multiple of 2*WARPS).
 *   HSPLIT - 1: 8 heads per lane; 2: 4 heads per lane, both half-warps on one row.
 * Shared memory: max(STAGES*TILE*512, WARPS*4160) bytes (16.3 KiB for the first
 * values; 128 KiB for STAGES=4, TILE=64, which needs the >48 KiB opt-in).
 */
#include <cuda_bf16.h>

#ifndef SPLITS
#define SPLITS 8
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef TILE
#define TILE 32
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef HSPLIT
#define HSPLIT 1
#endif

static_assert(SPLITS >= 1 && SPLITS <= 32, "the merge kernel holds one split per lane");
static_assert(STAGES >= 2, "at least double buffering");
static_assert(TILE % (2 * WARPS) == 0, "TILE must be a multiple of 2*WARPS");

#define NUM_QO_HEADS 32
#define NUM_KV_HEADS 4
#define HEAD_DIM 128
#define GROUP 8
#define FULL_MASK 0xffffffffu
#define NEG_BIG (-1.0e30f) /* "no token yet": finite, so exp2(NEG_BIG - NEG_BIG) = 1, never NaN */
#define LOG2E 1.4426950408889634f

static_assert(HSPLIT == 1 || HSPLIT == 2, "HSPLIT is 1 or 2");
static_assert(WARPS >= 1 && WARPS <= 8, "WARPS in [1, 8]");

constexpr int NH = GROUP / HSPLIT;   /* heads per lane */
constexpr int TPS = 2 / HSPLIT;      /* tokens per warp step */
constexpr int RED = 16 / NH;         /* lanes of a half-warp that end up holding one head's score */

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

/* 8 packed bf16 -> 8 floats (bf16 is the top half of a float). */
__device__ __forceinline__ void bf16x8_to_float(const uint4 &u, float (&f)[8])
{
    f[0] = __uint_as_float(u.x << 16); f[1] = __uint_as_float(u.x & 0xffff0000u);
    f[2] = __uint_as_float(u.y << 16); f[3] = __uint_as_float(u.y & 0xffff0000u);
    f[4] = __uint_as_float(u.z << 16); f[5] = __uint_as_float(u.z & 0xffff0000u);
    f[6] = __uint_as_float(u.w << 16); f[7] = __uint_as_float(u.w & 0xffff0000u);
}

/*
 * part[i] is this lane's partial dot product for head i (over its 8 dims). Returns, in
 * every lane, the full 16-lane sum for head (sub / RED). Shuffles stay inside a half-warp.
 */
__device__ __forceinline__ float reduce_heads(float (&part)[NH], int sub)
{
#pragma unroll
    for (int width = NH / 2, mask = 8; width >= 1; width /= 2, mask /= 2) {
        const bool upper = (sub & mask) != 0;
#pragma unroll
        for (int i = 0; i < width; i++) {
            const float send = upper ? part[i] : part[i + width];
            const float keep = upper ? part[i + width] : part[i];
            part[i] = keep + __shfl_xor_sync(FULL_MASK, send, mask);
        }
    }
    float r = part[0];
#pragma unroll
    for (int mask = RED / 2; mask >= 1; mask /= 2)
        r += __shfl_xor_sync(FULL_MASK, r, mask);
    return r;
}

constexpr int STAGE_ELEMS = 2 * TILE * HEAD_DIM;          /* bf16 elements per stage: K tile, V tile */
constexpr int TOK_PER_WARP = TILE / WARPS;                /* rows of a tile each warp computes */
constexpr int STEPS = TOK_PER_WARP / TPS;                 /* warp steps per tile */
constexpr int UC = STEPS < 4 ? STEPS : 4;                 /* warp steps per softmax chunk */
constexpr int PAIRS_PER_THREAD = TILE * 16 / (WARPS * 32); /* (row, 16-byte chunk) pairs a thread copies */
constexpr int ROW_STEP = WARPS * 32 / 16;                 /* rows between a thread's pairs */
static_assert(STEPS % UC == 0, "steps per tile");
static_assert(TILE * 16 % (WARPS * 32) == 0, "copies per thread");

__device__ __forceinline__ void cp_async16(void *smem_dst, const void *gmem_src, bool valid)
{
    const unsigned dst = (unsigned)__cvta_generic_to_shared(smem_dst);
    const int src_size = valid ? 16 : 0; /* 0: write 16 zero bytes, read nothing */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(src_size)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

extern "C" __global__ void __launch_bounds__(WARPS * 32)
gqa_tiles_partial(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k_cache,
                  const __nv_bfloat16 *__restrict__ v_cache, const int *__restrict__ kv_indptr,
                  const int *__restrict__ kv_indices, float sm_scale, float *__restrict__ part_o,
                  float *__restrict__ part_lse, int batch_size)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __nv_bfloat16 *const ring = reinterpret_cast<__nv_bfloat16 *>(smem_raw);

    const int b = blockIdx.x / NUM_KV_HEADS;
    const int kvh = blockIdx.x % NUM_KV_HEADS;
    const int split = blockIdx.y;
    if (b >= batch_size || split >= SPLITS)
        return;
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int half = lane >> 4;
    const int sub = lane & 15;
    const int hbase = (HSPLIT == 2) ? half * NH : 0;
    const int tslot = (HSPLIT == 1) ? half : 0;
    const int src_base = lane & 16;

    const int start = kv_indptr[b];
    const int len = kv_indptr[b + 1] - start;
    const int t_begin = start + (int)(((long long)len * split) / SPLITS);
    const int t_end = start + (int)(((long long)len * (split + 1)) / SPLITS);
    const int n_tiles = (t_end - t_begin + TILE - 1) / TILE;

    /* copy assignment: thread copies rows crow0 + k*ROW_STEP, 16-byte chunk cchunk, of K and V */
    const int crow0 = threadIdx.x / 16;
    const int cchunk = threadIdx.x % 16;
    int pg[PAIRS_PER_THREAD];

    auto load_pages = [&](int tile) {
#pragma unroll
        for (int k = 0; k < PAIRS_PER_THREAD; k++) {
            const int t = t_begin + tile * TILE + crow0 + k * ROW_STEP;
            pg[k] = (tile < n_tiles && t < t_end) ? __ldg(kv_indices + t) : -1;
        }
    };
    auto issue_tile = [&](int tile) {
        if (tile < n_tiles) {
            __nv_bfloat16 *ks = ring + (tile % STAGES) * STAGE_ELEMS;
            __nv_bfloat16 *vs = ks + TILE * HEAD_DIM;
#pragma unroll
            for (int k = 0; k < PAIRS_PER_THREAD; k++) {
                const int r = crow0 + k * ROW_STEP;
                const bool valid = pg[k] >= 0;
                const size_t off = valid ? ((size_t)pg[k] * NUM_KV_HEADS + kvh) * HEAD_DIM + cchunk * 8 : 0;
                cp_async16(ks + r * HEAD_DIM + cchunk * 8, k_cache + off, valid);
                cp_async16(vs + r * HEAD_DIM + cchunk * 8, v_cache + off, valid);
            }
        }
        cp_async_commit(); /* always commit, so group counting stays uniform */
    };

    /* prologue: tiles 0 .. STAGES-2 in flight, pages of tile STAGES-1 in registers */
#pragma unroll
    for (int st = 0; st < STAGES - 1; st++) {
        load_pages(st);
        issue_tile(st);
    }
    load_pages(STAGES - 1);

    const float qscale = sm_scale * LOG2E;
    float qf[NH][8];
#pragma unroll
    for (int i = 0; i < NH; i++) {
        const size_t off = ((size_t)b * NUM_QO_HEADS + kvh * GROUP + hbase + i) * HEAD_DIM + sub * 8;
        const uint4 raw = __ldg(reinterpret_cast<const uint4 *>(q + off));
        bf16x8_to_float(raw, qf[i]);
#pragma unroll
        for (int j = 0; j < 8; j++)
            qf[i][j] *= qscale;
    }

    float m = NEG_BIG, l = 0.0f;
    float acc[NH][8];
#pragma unroll
    for (int i = 0; i < NH; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
            acc[i][j] = 0.0f;

    for (int tile = 0; tile < n_tiles; tile++) {
        cp_async_wait<STAGES - 2>(); /* this thread's copies of `tile` have landed */
        __syncthreads();             /* everyone's have; and everyone is done with tile-1's stage */
        issue_tile(tile + STAGES - 1);
        load_pages(tile + STAGES);

        const __nv_bfloat16 *ks = ring + (tile % STAGES) * STAGE_ELEMS;
        const __nv_bfloat16 *vs = ks + TILE * HEAD_DIM;
        const int tile_start = t_begin + tile * TILE;
#pragma unroll
        for (int c0 = 0; c0 < STEPS; c0 += UC) {
            float s[UC];
#pragma unroll
            for (int u = 0; u < UC; u++) {
                const int r = warp * TOK_PER_WARP + (c0 + u) * TPS + tslot;
                const uint4 kr = *reinterpret_cast<const uint4 *>(ks + r * HEAD_DIM + sub * 8);
                float kf[8];
                bf16x8_to_float(kr, kf);
                float part[NH];
#pragma unroll
                for (int i = 0; i < NH; i++) {
                    float d = 0.0f;
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        d = fmaf(qf[i][j], kf[j], d);
                    part[i] = d;
                }
                s[u] = reduce_heads(part, sub);
                if (tile_start + r >= t_end)
                    s[u] = neg_inf();
            }
            float cm = s[0];
#pragma unroll
            for (int u = 1; u < UC; u++)
                cm = fmaxf(cm, s[u]);
            if (HSPLIT == 1)
                cm = fmaxf(cm, __shfl_xor_sync(FULL_MASK, cm, 16));
            const float m_new = fmaxf(m, cm);
            if (__any_sync(FULL_MASK, m_new > m)) {
                const float alpha = exp2f(m - m_new);
                l *= alpha;
#pragma unroll
                for (int i = 0; i < NH; i++) {
                    const float a = __shfl_sync(FULL_MASK, alpha, src_base | (i * RED));
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        acc[i][j] *= a;
                }
                m = m_new;
            }
#pragma unroll
            for (int u = 0; u < UC; u++) {
                const int r = warp * TOK_PER_WARP + (c0 + u) * TPS + tslot;
                const float p = exp2f(s[u] - m); /* 0 for a masked (zero-filled) row */
                l += p;
                const uint4 vr = *reinterpret_cast<const uint4 *>(vs + r * HEAD_DIM + sub * 8);
                float vf[8];
                bf16x8_to_float(vr, vf);
#pragma unroll
                for (int i = 0; i < NH; i++) {
                    const float pi = __shfl_sync(FULL_MASK, p, src_base | (i * RED));
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        acc[i][j] = fmaf(pi, vf[j], acc[i][j]);
                }
            }
        }
    }
    cp_async_wait<0>();
    __syncthreads(); /* the ring is free: reuse it for the merge */

    float *const sm_acc = reinterpret_cast<float *>(smem_raw); /* [WARPS][GROUP][HEAD_DIM] */
    float *const sm_ml = sm_acc + WARPS * GROUP * HEAD_DIM;     /* [WARPS][GROUP][2] */
    if (HSPLIT == 1) {
        l += __shfl_xor_sync(FULL_MASK, l, 16);
#pragma unroll
        for (int i = 0; i < NH; i++)
#pragma unroll
            for (int j = 0; j < 8; j++)
                acc[i][j] += __shfl_xor_sync(FULL_MASK, acc[i][j], 16);
    }
    if (HSPLIT == 2 || half == 0) {
        if (sub % RED == 0) {
            sm_ml[(warp * GROUP + hbase + sub / RED) * 2 + 0] = m;
            sm_ml[(warp * GROUP + hbase + sub / RED) * 2 + 1] = l;
        }
#pragma unroll
        for (int i = 0; i < NH; i++) {
            float4 *dst = reinterpret_cast<float4 *>(sm_acc + (warp * GROUP + hbase + i) * HEAD_DIM + sub * 8);
            dst[0] = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
            dst[1] = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
        }
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
        float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int w = 0; w < WARPS; w++) {
            const float sc = exp2f(sm_ml[(w * GROUP + hh) * 2] - mx);
            L += sm_ml[(w * GROUP + hh) * 2 + 1] * sc;
            const float4 a = *reinterpret_cast<const float4 *>(sm_acc + (w * GROUP + hh) * HEAD_DIM + d);
            o.x = fmaf(a.x, sc, o.x);
            o.y = fmaf(a.y, sc, o.y);
            o.z = fmaf(a.z, sc, o.z);
            o.w = fmaf(a.w, sc, o.w);
        }
        const size_t row = ((size_t)b * NUM_QO_HEADS + kvh * GROUP + hh) * SPLITS + split;
        const float inv = (L > 0.0f) ? 1.0f / L : 0.0f; /* empty split: o = 0, lse = -inf */
        *reinterpret_cast<float4 *>(part_o + row * HEAD_DIM + d) =
            make_float4(o.x * inv, o.y * inv, o.z * inv, o.w * inv);
        if (d == 0)
            part_lse[row] = (L > 0.0f) ? mx + log2f(L) : neg_inf();
    }
}
/* One CTA per (request, KV head); warp w merges query head kvh*8 + w, lane owns 4 dims. */
extern "C" __global__ void __launch_bounds__(256)
gqa_tiles_merge(const float *__restrict__ part_o, const float *__restrict__ part_lse,
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
