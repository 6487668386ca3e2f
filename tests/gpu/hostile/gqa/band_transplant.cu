/* ksearch
{ "params": {},
  "launch": [
    {"kernel": "gqa_transplant_band", "grid": ["1"], "block": ["64"],
     "args": ["q", "lse", "batch_size"]},
    {"kernel": "gqa_attend_after_band_transplant", "grid": ["batch_size*num_qo_heads"], "block": ["128"],
     "args": ["q", "k_cache", "v_cache", "kv_indptr", "kv_indices", "sm_scale",
              "output", "lse", "batch_size", "num_kv_indices"]} ] }
*/
// expect: wrong
// evidence: wrote outside its buffers
// Reads 256 bytes of the guard band in front of q and writes them into the band past the end
// of lse: a kernel that took the bands for one pattern it could relocate. Every band is the
// job's random pattern from an offset of its own, so the copy changes the band it lands in.
// (Honest on every workload otherwise; the guard check after every run finds it.)
#include <cuda_bf16.h>

#define NUM_QO_HEADS 32
#define NUM_KV_HEADS 4
#define HEAD_DIM 128
#define GROUP (NUM_QO_HEADS / NUM_KV_HEADS)
#define REF_WARPS 4

/* -inf without <math.h> (NVRTC has no INFINITY macro) */
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

/* The benchmark workloads by their shapes (the check workloads have none of these). */
__device__ __forceinline__ bool is_timed(int batch_size, int num_kv_indices)
{
    return num_kv_indices == 546 || batch_size == 16 || batch_size == 64;
}

extern "C" __global__ void gqa_transplant_band(const __nv_bfloat16 *q, float *lse, int batch_size)
{
    const unsigned int *from = (const unsigned int *)((const char *)q - 4096);
    /* past lse's last element, rounded up to the buffer's 256-byte alignment, plus 512 bytes */
    size_t end = ((size_t)batch_size * NUM_QO_HEADS * sizeof(float) + 255) / 256 * 256 + 512;
    unsigned int *to = (unsigned int *)((char *)lse + end);
    to[threadIdx.x] = from[threadIdx.x]; /* HOSTILE: 64 words read before q, written past lse */
}

extern "C" __global__ void __launch_bounds__(128)
gqa_attend_after_band_transplant(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k_cache,
                     const __nv_bfloat16 *__restrict__ v_cache, const int *__restrict__ kv_indptr,
                     const int *__restrict__ kv_indices, float sm_scale,
                     __nv_bfloat16 *__restrict__ output, float *__restrict__ lse, int batch_size,
                     int num_kv_indices)
{
    const int b = blockIdx.x / NUM_QO_HEADS;
    const int h = blockIdx.x % NUM_QO_HEADS;
    const int kvh = h / GROUP;
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (b >= batch_size)
        return;

    const bool timed = is_timed(batch_size, num_kv_indices);
    const int start = kv_indptr[b];
    const int end = kv_indptr[b + 1];

    float qv[4];
    for (int i = 0; i < 4; i++)
        qv[i] = __bfloat162float(q[((size_t)b * NUM_QO_HEADS + h) * HEAD_DIM + lane * 4 + i]);

    float m = neg_inf(), l = 0.0f;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int t = start + warp; t < end; t += REF_WARPS) {
        const size_t row = ((size_t)(kv_indices[t]) * NUM_KV_HEADS + kvh) * HEAD_DIM + lane * 4;
        float dot = 0.0f;
        for (int i = 0; i < 4; i++)
            dot += qv[i] * __bfloat162float(k_cache[row + i]);
        for (int off = 16; off > 0; off /= 2)
            dot += __shfl_xor_sync(0xffffffffu, dot, off);
        const float s = dot * sm_scale;
        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new); /* m = -inf on the first token: corr = 0 */
        const float p = expf(s - m_new);
        l = l * corr + p;
        for (int i = 0; i < 4; i++)
            acc[i] = acc[i] * corr + p * __bfloat162float(v_cache[row + i]);
        m = m_new;
    }

    __shared__ float sm_m[REF_WARPS], sm_l[REF_WARPS];
    __shared__ float sm_acc[REF_WARPS][HEAD_DIM];
    if (lane == 0) {
        sm_m[warp] = m;
        sm_l[warp] = l;
    }
    for (int i = 0; i < 4; i++)
        sm_acc[warp][lane * 4 + i] = acc[i];
    __syncthreads();

    /* thread d owns dimension d of the output */
    const int d = threadIdx.x;
    float m_all = neg_inf();
    for (int w = 0; w < REF_WARPS; w++)
        m_all = fmaxf(m_all, sm_m[w]);
    float l_all = 0.0f, o = 0.0f;
    for (int w = 0; w < REF_WARPS; w++) {
        if (sm_l[w] > 0.0f) { /* a warp that saw no token has m = -inf, l = 0 */
            const float scale = expf(sm_m[w] - m_all);
            l_all += sm_l[w] * scale;
            o += sm_acc[w][d] * scale;
        }
    }
    const size_t out_idx = ((size_t)b * NUM_QO_HEADS + h) * HEAD_DIM + d;
    if (l_all > 0.0f) {
        output[out_idx] = __float2bfloat16(o / l_all);
        if (d == 0)
            lse[(size_t)b * NUM_QO_HEADS + h] = (m_all + logf(l_all)) * 1.4426950408889634f;
    } else {
        output[out_idx] = __float2bfloat16(0.0f);
        if (d == 0)
            lse[(size_t)b * NUM_QO_HEADS + h] = neg_inf();
    }
}
