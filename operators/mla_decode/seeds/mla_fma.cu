/* ksearch
{ "params": {"CHUNK": [32, 64, 128, 256, 512, 1024, 2048], "CTAS": [66, 100, 132, 200, 264, 396, 528, 1056, 1048576], "TILE": [32, 64], "STAGES": [2, 3, 4], "HPW": [1, 2, 4],
             "PART": [0, 1]},
  "constraints": ["CHUNK % TILE == 0", "36864 + STAGES*TILE*1168 + 8192 <= 232448"],
  "scratch": {"part_o": ["float32", "(cdiv(num_kv_indices, min(2048, max(CHUNK, TILE*cdiv(cdiv(num_kv_indices, CTAS), TILE)))) + batch_size)*num_qo_heads*head_dim_ckv/(1 + PART)"],
              "part_lse": ["float32", "(cdiv(num_kv_indices, min(2048, max(CHUNK, TILE*cdiv(cdiv(num_kv_indices, CTAS), TILE)))) + batch_size)*num_qo_heads"]},
  "launch": [
    {"kernel": "mla_fma_partial", "grid": ["cdiv(num_kv_indices, min(2048, max(CHUNK, TILE*cdiv(cdiv(num_kv_indices, CTAS), TILE)))) + batch_size"], "block": ["512/HPW"],
     "smem": "36864 + STAGES*TILE*1168 + 8192",
     "args": ["q_nope", "q_pe", "ckv_cache", "kpe_cache", "kv_indptr", "kv_indices", "sm_scale",
              "part_o", "part_lse", "output", "lse", "batch_size", "num_pages", "num_kv_indices"]},
    {"kernel": "mla_fma_merge", "grid": ["batch_size*num_qo_heads"], "block": ["128"], "pdl": true,
     "args": ["kv_indptr", "part_o", "part_lse", "output", "lse", "batch_size", "num_kv_indices"]} ] }
*/
/*
 * Family "mla_fma": CUDA cores only (fp32 FMA), split-KV over flattened chunk slots with
 * a merge launch, as mla_mma (request b owns slots floor(kv_indptr[b]/chunk) + b onward,
 * chunk = min(2048, max(CHUNK, TILE*cdiv(cdiv(N, CTAS), TILE))); a request of one chunk
 * is written in place, longer ones leave partials, fp32 or bf16, merged by a PDL launch).
 *
 * Per CTA: 16/HPW warps; warp w owns heads w*HPW .. w*HPW + HPW-1 for the whole chunk,
 * so no warp ever merges with another. Q is in shared memory as fp32 (read as broadcasts);
 * token rows (ckv 1024 B, then kpe 128 B, padded to 1168 B so that eight lanes reading
 * eight rows hit distinct banks) stream through a STAGES-deep ring of TILE-token tiles
 * with 16-byte cp.async.cg (zero-fill past the chunk). Per tile and warp:
 *   score:   lane t takes tokens t, t+32 (TILE/32 of them) and computes their HPW dot
 *            products over all 576 dims serially: no shuffle reduction at all;
 *   softmax: base-2 online softmax per head over the tile (warp max and sum);
 *   PV:      lane owns dims 8*lane.. and 256 + 8*lane.. (two 16-byte reads of each row,
 *            the warp reads a row contiguously), p broadcast by shuffle.
 * FMA issue, not DRAM, bounds it: 34.8 kflop per 1152-byte token is about 30 flop/byte.
 *
 * Params:
 *   CHUNK  - fewest tokens per CTA; CTAS - slots wanted (the chunk grows to cdiv(N, CTAS))
 *   TILE   - tokens per ring stage (32 or 64: one or two per lane in the score)
 *   STAGES - ring depth
 *   HPW    - heads per warp (1, 2, 4: 16, 8, 4 warps); accumulators 16*HPW per lane
 *   PART   - partials in fp32 (0) or bf16 (1)
 */
#include <cuda_bf16.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "mla_fma needs sm_90 or newer (griddepcontrol; its constraints allow up to 227 KiB of shared memory per block)"
#endif

#ifndef CHUNK
#define CHUNK 64
#endif
#ifndef TILE
#define TILE 32
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef HPW
#define HPW 1
#endif
#ifndef MINB
#define MINB 1
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
#define WARPS (NUM_QO_HEADS / HPW)
#define THREADS (WARPS * 32)
#define FULL_MASK 0xffffffffu
#define NEG_BIG (-1.0e30f)
#define LOG2E 1.4426950408889634f

constexpr int TPL = TILE / 32;                        /* score tokens per lane */
constexpr int QF_BYTES = NUM_QO_HEADS * DIM_QK * 4;   /* 36864 */
constexpr int RING_BYTES = STAGES * TILE * ROW_BYTES;
constexpr int SMEM_BYTES = QF_BYTES + RING_BYTES + 8192;

static_assert(TILE == 32 || TILE == 64, "TILE is 32 or 64");
static_assert(HPW == 1 || HPW == 2 || HPW == 4, "HPW is 1, 2 or 4");
static_assert(CHUNK % TILE == 0, "a chunk is a whole number of tiles");
static_assert(STAGES >= 2, "at least double buffering");
static_assert(SMEM_BYTES == 36864 + STAGES * TILE * 1168 + 8192, "keep the smem expression in the header in sync");

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

/* programmatic dependent launch: the merge launch may start while the partial grid runs,
   and waits for it before it reads a partial */
__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

__device__ __forceinline__ unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp_async16(unsigned dst, const void *gmem_src, bool valid)
{
    const int src_size = valid ? 16 : 0; /* 0: write 16 zero bytes, read nothing */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(src_size)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }


__device__ __forceinline__ void bf16x8_to_float(const uint4 &v, float (&f)[8])
{
    const __nv_bfloat162 *h2 = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const float2 x = __bfloat1622float2(h2[e]);
        f[2 * e] = x.x;
        f[2 * e + 1] = x.y;
    }
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
mla_fma_partial(const __nv_bfloat16 *__restrict__ q_nope, const __nv_bfloat16 *__restrict__ q_pe,
                const __nv_bfloat16 *__restrict__ ckv_cache, const __nv_bfloat16 *__restrict__ kpe_cache,
                const int *__restrict__ kv_indptr, const int *__restrict__ kv_indices, float sm_scale,
                float *__restrict__ part_o, float *__restrict__ part_lse, __nv_bfloat16 *__restrict__ output,
                float *__restrict__ lse, int batch_size, int num_pages, int num_kv_indices)
{
    extern __shared__ __align__(128) unsigned char smem_raw[];
    float *const s_qf = reinterpret_cast<float *>(smem_raw);        /* [16][576] fp32 */
    unsigned char *const s_ring = smem_raw + QF_BYTES;               /* [STAGES][TILE][ROW_BYTES] */
    int *const s_idx = reinterpret_cast<int *>(s_ring + RING_BYTES); /* [IDX_MAX] */

    pdl_launch_dependents(); /* the merge grid may be scheduled once every CTA of this one runs */
    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
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
    for (int i = tid; i < NUM_QO_HEADS * ROW_PIECES; i += THREADS) {
        const int h = i / ROW_PIECES, p = i % ROW_PIECES;
        const uint4 v = p < 64 ? __ldg(reinterpret_cast<const uint4 *>(q_nope + ((size_t)b * NUM_QO_HEADS + h) * DIM_CKV) + p)
                               : __ldg(reinterpret_cast<const uint4 *>(q_pe + ((size_t)b * NUM_QO_HEADS + h) * DIM_KPE) + (p - 64));
        float f[8];
        bf16x8_to_float(v, f);
        float4 *dst = reinterpret_cast<float4 *>(s_qf + h * DIM_QK + p * 8);
        dst[0] = make_float4(f[0], f[1], f[2], f[3]);
        dst[1] = make_float4(f[4], f[5], f[6], f[7]);
    }
    __syncthreads();

    const unsigned ring = smem_addr(s_ring);
    auto issue_tile = [&](int u) {
        if (u < n_tiles) {
            const unsigned dst0 = ring + (unsigned)((u % STAGES) * TILE * ROW_BYTES);
            for (int i = tid; i < TILE * ROW_PIECES; i += THREADS) {
                const int tr = i / ROW_PIECES, p = i % ROW_PIECES;
                const int pg = s_idx[u * TILE + tr];
                const bool valid = pg >= 0;
                const __nv_bfloat16 *src = p < 64 ? ckv_cache + (valid ? (size_t)pg * DIM_CKV + p * 8 : (size_t)0)
                                                  : kpe_cache + (valid ? (size_t)pg * DIM_KPE + (p - 64) * 8 : (size_t)0);
                cp_async16(dst0 + (unsigned)(tr * ROW_BYTES + p * 16), src, valid);
            }
        }
        cp_async_commit();
    };
#pragma unroll
    for (int u = 0; u < STAGES - 1; u++)
        issue_tile(u);

    const float qk_scale = sm_scale * LOG2E;
    const float *const qw = s_qf + warp * HPW * DIM_QK; /* this warp's heads */
    float m_run[HPW], l_run[HPW], acc[HPW][16];
#pragma unroll
    for (int hh = 0; hh < HPW; hh++) {
        m_run[hh] = NEG_BIG;
        l_run[hh] = 0.0f;
#pragma unroll
        for (int e = 0; e < 16; e++)
            acc[hh][e] = 0.0f;
    }

    for (int u = 0; u < n_tiles; u++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        issue_tile(u + STAGES - 1);
        const unsigned char *const tile = s_ring + (u % STAGES) * TILE * ROW_BYTES;

        /* score: lane's tokens lane + 32*e, all 576 dims */
        float s[TPL][HPW];
#pragma unroll
        for (int e = 0; e < TPL; e++)
#pragma unroll
            for (int hh = 0; hh < HPW; hh++)
                s[e][hh] = 0.0f;
#pragma unroll 2
        for (int p = 0; p < ROW_PIECES; p++) {
#pragma unroll
            for (int e = 0; e < TPL; e++) {
                float k[8];
                bf16x8_to_float(*reinterpret_cast<const uint4 *>(tile + (lane + 32 * e) * ROW_BYTES + p * 16), k);
#pragma unroll
                for (int hh = 0; hh < HPW; hh++) {
                    const float4 q0 = *reinterpret_cast<const float4 *>(qw + hh * DIM_QK + p * 8);
                    const float4 q1 = *reinterpret_cast<const float4 *>(qw + hh * DIM_QK + p * 8 + 4);
                    float v = s[e][hh];
                    v = fmaf(q0.x, k[0], v);
                    v = fmaf(q0.y, k[1], v);
                    v = fmaf(q0.z, k[2], v);
                    v = fmaf(q0.w, k[3], v);
                    v = fmaf(q1.x, k[4], v);
                    v = fmaf(q1.y, k[5], v);
                    v = fmaf(q1.z, k[6], v);
                    v = fmaf(q1.w, k[7], v);
                    s[e][hh] = v;
                }
            }
        }

        /* softmax per head over the tile */
        float pr[TPL][HPW];
#pragma unroll
        for (int hh = 0; hh < HPW; hh++) {
            float mx = neg_inf();
#pragma unroll
            for (int e = 0; e < TPL; e++) {
                const bool valid = u * TILE + lane + 32 * e < clen;
                s[e][hh] = valid ? s[e][hh] * qk_scale : neg_inf();
                mx = fmaxf(mx, s[e][hh]);
            }
#pragma unroll
            for (int off = 16; off >= 1; off /= 2)
                mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, off));
            const float m_new = fmaxf(m_run[hh], mx);
            const float corr = exp2f(m_run[hh] - m_new);
            float sum = 0.0f;
#pragma unroll
            for (int e = 0; e < TPL; e++) {
                pr[e][hh] = exp2f(s[e][hh] - m_new);
                sum += pr[e][hh];
            }
#pragma unroll
            for (int off = 16; off >= 1; off /= 2)
                sum += __shfl_xor_sync(FULL_MASK, sum, off);
            l_run[hh] = l_run[hh] * corr + sum;
            m_run[hh] = m_new;
#pragma unroll
            for (int e = 0; e < 16; e++)
                acc[hh][e] *= corr;
        }

        /* PV: every token of the tile (masked ones: p = 0, zero-filled rows) */
        const int tmax = min(TILE, clen - u * TILE);
#pragma unroll
        for (int e = 0; e < TPL; e++) {
            const int tn = min(32, tmax - 32 * e); /* warp-uniform */
            for (int t = 0; t < tn; t++) {
                const unsigned char *row = tile + (32 * e + t) * ROW_BYTES;
                float v0[8], v1[8];
                bf16x8_to_float(*reinterpret_cast<const uint4 *>(row + lane * 16), v0);
                bf16x8_to_float(*reinterpret_cast<const uint4 *>(row + 512 + lane * 16), v1);
#pragma unroll
                for (int hh = 0; hh < HPW; hh++) {
                    const float p = __shfl_sync(FULL_MASK, pr[e][hh], t);
#pragma unroll
                    for (int x = 0; x < 8; x++) {
                        acc[hh][x] = fmaf(p, v0[x], acc[hh][x]);
                        acc[hh][8 + x] = fmaf(p, v1[x], acc[hh][8 + x]);
                    }
                }
            }
        }
    }
    cp_async_wait<0>();

#pragma unroll
    for (int hh = 0; hh < HPW; hh++) {
        const int h = warp * HPW + hh;
        const float L = l_run[hh];
        const float inv = L > 0.0f ? 1.0f / L : 0.0f;
        const float ls = L > 0.0f ? m_run[hh] + log2f(L) : neg_inf();
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int d = half * 256 + lane * 8;
            float x[8];
#pragma unroll
            for (int e = 0; e < 8; e++)
                x[e] = acc[hh][half * 8 + e] * inv;
            if (direct || PART) {
                uint4 v;
                __nv_bfloat162 *h2 = reinterpret_cast<__nv_bfloat162 *>(&v);
#pragma unroll
                for (int e = 0; e < 4; e++)
                    h2[e] = __floats2bfloat162_rn(x[2 * e], x[2 * e + 1]);
                __nv_bfloat16 *dst = direct ? output + ((size_t)b * NUM_QO_HEADS + h) * DIM_CKV + d
                                            : reinterpret_cast<__nv_bfloat16 *>(part_o) +
                                                  ((size_t)slot * NUM_QO_HEADS + h) * DIM_CKV + d;
                *reinterpret_cast<uint4 *>(dst) = v;
            } else {
                float4 *dst = reinterpret_cast<float4 *>(part_o + ((size_t)slot * NUM_QO_HEADS + h) * DIM_CKV + d);
                dst[0] = make_float4(x[0], x[1], x[2], x[3]);
                dst[1] = make_float4(x[4], x[5], x[6], x[7]);
            }
        }
        if (lane == 0) {
            if (direct)
                lse[(size_t)b * NUM_QO_HEADS + h] = ls;
            else
                part_lse[(size_t)slot * NUM_QO_HEADS + h] = ls;
        }
    }
}

/* One CTA of 4 warps per (request, head): warp w takes the request's chunk slots w, w+4, ...
   (four slots per step, so a lane has 8 to 16 loads in flight rather than one), lane owns dims
   8*lane.. and 256 + 8*lane..; the 4 warps' sums meet in shared memory. Requests of one chunk
   were finished by the partial kernel; requests of no token get output 0 and lse -inf. */
extern "C" __global__ void __launch_bounds__(128)
mla_fma_merge(const int *__restrict__ kv_indptr, const float *__restrict__ part_o,
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
        return; /* written by mla_fma_partial */
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
