/* ksearch
{ "params": {"REF_WARPS": [4, 32]},
  "launch": [
    {"kernel": "gqa_decode_reference", "grid": ["batch_size*num_qo_heads"], "block": ["32*REF_WARPS"],
     "args": ["q", "k_cache", "v_cache", "kv_indptr", "kv_indices", "sm_scale",
              "output", "lse", "batch_size"]} ] }
*/
/*
 * Reference GQA paged decode, written to be obviously correct rather than fast.
 *
 * One block of REF_WARPS warps per (request b, query head h). Query head h reads
 * KV head h / 8. Each warp takes every REF_WARPS-th token of the request; a lane
 * holds 4 of the
 * 128 dimensions. Per token the warp computes the logit s = sm_scale * q.k in fp32
 * (shuffle reduction), and keeps a natural-base online softmax: running max m,
 * running sum l = sum exp(s - m), running acc = sum exp(s - m) * v. The warps'
 * states are merged in shared memory at the end.
 *
 * REF_WARPS is the only param: the first value (4) is the kernel the evaluator
 * times, the baseline of fitness; the last (32) is the same code with 8 times the
 * tokens in flight, which verifies the candidates' outputs (operators/README.md,
 * "The reference").
 *   output[b,h,:] = acc / l      (bf16)
 *   lse[b,h]      = (m + ln l) / ln 2   (base 2)
 * An empty request (never generated here) gives output 0 and lse -inf, like the
 * FlashInfer-Bench reference.
 */
#include <cuda_bf16.h>

#define NUM_QO_HEADS 32
#define NUM_KV_HEADS 4
#define HEAD_DIM 128
#define GROUP (NUM_QO_HEADS / NUM_KV_HEADS)

/* -inf without <math.h> (NVRTC has no INFINITY macro) */
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

extern "C" __global__ void __launch_bounds__(32 * REF_WARPS)
gqa_decode_reference(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k_cache,
                     const __nv_bfloat16 *__restrict__ v_cache, const int *__restrict__ kv_indptr,
                     const int *__restrict__ kv_indices, float sm_scale,
                     __nv_bfloat16 *__restrict__ output, float *__restrict__ lse, int batch_size)
{
    const int b = blockIdx.x / NUM_QO_HEADS;
    const int h = blockIdx.x % NUM_QO_HEADS;
    const int kvh = h / GROUP;
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (b >= batch_size)
        return;

    const int start = kv_indptr[b];
    const int end = kv_indptr[b + 1];

    float qv[4];
    for (int i = 0; i < 4; i++)
        qv[i] = __bfloat162float(q[((size_t)b * NUM_QO_HEADS + h) * HEAD_DIM + lane * 4 + i]);

    float m = neg_inf(), l = 0.0f;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int t = start + warp; t < end; t += REF_WARPS) {
        const size_t row = ((size_t)kv_indices[t] * NUM_KV_HEADS + kvh) * HEAD_DIM + lane * 4;
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

    /* thread d < HEAD_DIM owns dimension d of the output */
    const int d = threadIdx.x;
    if (d >= HEAD_DIM)
        return;
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
