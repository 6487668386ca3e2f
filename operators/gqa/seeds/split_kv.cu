/* ksearch
{ "params": {"SPLITS": [1, 2, 4, 8, 16, 32], "WARPS": [4, 8], "UNROLL": [1, 2, 4], "HSPLIT": [1, 2]},
  "scratch": {"part_o": ["float32", "batch_size*num_qo_heads*SPLITS*head_dim"],
              "part_lse": ["float32", "batch_size*num_qo_heads*SPLITS"]},
  "launch": [
    {"kernel": "gqa_split_partial", "grid": ["batch_size*num_kv_heads", "SPLITS"], "block": ["WARPS*32"],
     "args": ["q", "k_cache", "v_cache", "kv_indptr", "kv_indices", "sm_scale",
              "part_o", "part_lse", "batch_size"]},
    {"kernel": "gqa_split_merge", "grid": ["batch_size*num_kv_heads"], "block": ["256"],
     "args": ["part_o", "part_lse", "output", "lse", "batch_size"]} ] }
*/
/*
 * Family "split_kv" (flash-decoding): the group_cta kernel with the sequence split
 * too. Launch 1 runs SPLITS CTAs per (request, KV head); CTA `split` takes tokens
 * [len*split/SPLITS, len*(split+1)/SPLITS) of its request and writes, for each of the
 * 8 query heads, the normalised partial output o_s (fp32) and its base-2 log-sum-exp
 * lse_s to scratch (a split with no token writes o_s = 0, lse_s = -inf). Launch 2
 * merges: lse = log2(sum_s 2^lse_s), output = sum_s 2^(lse_s - lse) * o_s. Every
 * request has >= 1 token, so the final lse is finite.
 *
 * Inside a CTA: the same lane layout and online softmax as group_cta (a 16-lane
 * half-warp reads a 256-byte K/V row with 16-byte loads; transposing butterfly for
 * the 8 dot products; lazy rescale; cross-warp merge in shared memory).
 *
 * Params:
 *   SPLITS - CTAs per (request, KV head): more fills the GPU at small batch (B=1
 *            has only 4 pairs) but writes/reads more partials and makes short
 *            requests' CTAs nearly empty.
 *   WARPS  - warps per CTA (loads in flight vs. merge cost and CTAs per SM).
 *   UNROLL - K/V rows in flight per lane per loop trip (latency hiding vs. registers).
 *   HSPLIT - 1: 8 heads per lane; 2: 4 heads per lane (fewer registers, more loads).
 */
#include <cuda_bf16.h>

#ifndef SPLITS
#define SPLITS 8
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef UNROLL
#define UNROLL 2
#endif
#ifndef HSPLIT
#define HSPLIT 1
#endif

static_assert(SPLITS >= 1 && SPLITS <= 32, "the merge kernel holds one split per lane");

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
constexpr int CHUNK = UNROLL * TPS;  /* tokens per warp per loop trip */

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

/*
 * One warp's share of tokens [t_begin, t_end) of KV head kvh: tokens
 * t_begin + warp*CHUNK + k*WARPS*CHUNK + [0, CHUNK). Updates the online-softmax state
 * (m: running max of the lane's head, shared by the warp; l: the lane's half-warp's
 * running sum; acc: unnormalised output for NH heads x 8 dims).
 */
__device__ __forceinline__ void attend_tokens(const float (&qf)[NH][8], const __nv_bfloat16 *__restrict__ k_cache,
                                              const __nv_bfloat16 *__restrict__ v_cache,
                                              const int *__restrict__ kv_indices, int kvh, int t_begin, int t_end,
                                              int warp, int lane, float &m, float &l, float (&acc)[NH][8])
{
    const int sub = lane & 15;
    const int tslot = (HSPLIT == 1) ? (lane >> 4) : 0;
    const int src_base = lane & 16;
    const int stride = WARPS * CHUNK;

    int base = t_begin + warp * CHUNK;
    int page[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const int t = base + u * TPS + tslot;
        page[u] = (t < t_end) ? __ldg(kv_indices + t) : 0;
    }
    /* ksearch:unroll */
    for (; base < t_end; base += stride) {
        uint4 kr[UNROLL], vr[UNROLL];
        bool valid[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int t = base + u * TPS + tslot;
            valid[u] = t < t_end;
            kr[u] = make_uint4(0u, 0u, 0u, 0u);
            vr[u] = make_uint4(0u, 0u, 0u, 0u);
            if (valid[u]) {
                const size_t off = ((size_t)page[u] * NUM_KV_HEADS + kvh) * HEAD_DIM + sub * 8;
                kr[u] = __ldg(reinterpret_cast<const uint4 *>(k_cache + off));
                vr[u] = __ldg(reinterpret_cast<const uint4 *>(v_cache + off));
            }
        }
        /* page indices of the next trip, in flight during this trip's math */
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int t = base + stride + u * TPS + tslot;
            page[u] = (t < t_end) ? __ldg(kv_indices + t) : 0;
        }

        float s[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            float kf[8];
            bf16x8_to_float(kr[u], kf);
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
            if (!valid[u])
                s[u] = neg_inf();
        }

        float cm = s[0];
#pragma unroll
        for (int u = 1; u < UNROLL; u++)
            cm = fmaxf(cm, s[u]);
        if (HSPLIT == 1)
            cm = fmaxf(cm, __shfl_xor_sync(FULL_MASK, cm, 16));
        const float m_new = fmaxf(m, cm);
        if (__any_sync(FULL_MASK, m_new > m)) { /* lazy rescale: rare once the max has settled */
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
        for (int u = 0; u < UNROLL; u++) {
            const float p = exp2f(s[u] - m); /* 0 for a masked token */
            l += p;
            float vf[8];
            bf16x8_to_float(vr[u], vf);
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

extern "C" __global__ void __launch_bounds__(WARPS * 32)
gqa_split_partial(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k_cache,
                  const __nv_bfloat16 *__restrict__ v_cache, const int *__restrict__ kv_indptr,
                  const int *__restrict__ kv_indices, float sm_scale, float *__restrict__ part_o,
                  float *__restrict__ part_lse, int batch_size)
{
    __shared__ float sm_ml[WARPS][GROUP][2];
    __shared__ __align__(16) float sm_acc[WARPS][GROUP][HEAD_DIM];

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

    const int start = kv_indptr[b];
    const int len = kv_indptr[b + 1] - start;
    const int t_begin = start + (int)(((long long)len * split) / SPLITS);
    const int t_end = start + (int)(((long long)len * (split + 1)) / SPLITS);

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

    attend_tokens(qf, k_cache, v_cache, kv_indices, kvh, t_begin, t_end, warp, lane, m, l, acc);

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
            sm_ml[warp][hbase + sub / RED][0] = m;
            sm_ml[warp][hbase + sub / RED][1] = l;
        }
#pragma unroll
        for (int i = 0; i < NH; i++) {
            float4 *dst = reinterpret_cast<float4 *>(&sm_acc[warp][hbase + i][sub * 8]);
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
            mx = fmaxf(mx, sm_ml[w][hh][0]);
        float L = 0.0f;
        float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int w = 0; w < WARPS; w++) {
            const float sc = exp2f(sm_ml[w][hh][0] - mx);
            L += sm_ml[w][hh][1] * sc;
            const float4 a = *reinterpret_cast<const float4 *>(&sm_acc[w][hh][d]);
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
gqa_split_merge(const float *__restrict__ part_o, const float *__restrict__ part_lse,
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
