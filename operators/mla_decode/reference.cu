/* ksearch
{ "params": {"REF_WARPS": [4, 16]},
  "launch": [
    {"kernel": "mla_decode_reference", "grid": ["batch_size*num_qo_heads"], "block": ["32*REF_WARPS"],
     "args": ["q_nope", "q_pe", "ckv_cache", "kpe_cache", "kv_indptr", "kv_indices", "sm_scale",
              "output", "lse", "batch_size"]} ] }
*/
/*
 * Reference MLA paged decode, written to be obviously correct rather than fast.
 *
 * One block of REF_WARPS warps per (request b, query head h). A token's key is its
 * ckv row (512 dims) followed by its kpe row (64 dims); its value is the ckv row.
 * Each warp takes every REF_WARPS-th token of the request; lane l holds key dims
 * l + 32*i, i < 18 (the first 16 of them ckv, the last 2 kpe), and value dims
 * l + 32*i, i < 16. Per token
 * the warp computes s = sm_scale * (q_nope.ckv + q_pe.kpe) in fp32 (shuffle
 * reduction) and keeps a natural-base online softmax: running max m, running sum
 * l = sum exp(s - m), running acc = sum exp(s - m) * ckv. The warps' states are
 * merged in shared memory at the end.
 *
 * REF_WARPS is the only param: the first value (4) is the kernel the evaluator
 * times, the baseline of fitness; the last (16, its shared merge buffer within
 * 48 KiB) is the same code with 4 times the tokens in flight, which verifies the
 * candidates' outputs (operators/README.md, "The reference").
 *   output[b,h,:] = acc / l          (bf16)
 *   lse[b,h]      = (m + ln l) / ln 2  (base 2)
 * An empty request (never generated here) gives output 0 and lse -inf, like the
 * FlashInfer-Bench reference.
 */
#include <cuda_bf16.h>

#define NUM_QO_HEADS 16
#define DIM_CKV 512
#define DIM_KPE 64
#define CKV_PER_LANE (DIM_CKV / 32) /* 16 */
#define KPE_PER_LANE (DIM_KPE / 32) /* 2 */

/* -inf without <math.h> (NVRTC has no INFINITY macro) */
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

extern "C" __global__ void __launch_bounds__(32 * REF_WARPS)
mla_decode_reference(const __nv_bfloat16 *__restrict__ q_nope, const __nv_bfloat16 *__restrict__ q_pe,
                     const __nv_bfloat16 *__restrict__ ckv_cache, const __nv_bfloat16 *__restrict__ kpe_cache,
                     const int *__restrict__ kv_indptr, const int *__restrict__ kv_indices, float sm_scale,
                     __nv_bfloat16 *__restrict__ output, float *__restrict__ lse, int batch_size)
{
    const int b = blockIdx.x / NUM_QO_HEADS;
    const int h = blockIdx.x % NUM_QO_HEADS;
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (b >= batch_size)
        return;

    const int start = kv_indptr[b];
    const int end = kv_indptr[b + 1];
    const size_t qrow = (size_t)b * NUM_QO_HEADS + h;

    float qn[CKV_PER_LANE], qp[KPE_PER_LANE];
    for (int i = 0; i < CKV_PER_LANE; i++)
        qn[i] = __bfloat162float(q_nope[qrow * DIM_CKV + lane + 32 * i]);
    for (int i = 0; i < KPE_PER_LANE; i++)
        qp[i] = __bfloat162float(q_pe[qrow * DIM_KPE + lane + 32 * i]);

    float m = neg_inf(), l = 0.0f;
    float acc[CKV_PER_LANE];
    for (int i = 0; i < CKV_PER_LANE; i++)
        acc[i] = 0.0f;
    for (int t = start + warp; t < end; t += REF_WARPS) {
        const size_t page = (size_t)kv_indices[t];
        float ckv[CKV_PER_LANE];
        float dot = 0.0f;
        for (int i = 0; i < CKV_PER_LANE; i++) {
            ckv[i] = __bfloat162float(ckv_cache[page * DIM_CKV + lane + 32 * i]);
            dot += qn[i] * ckv[i];
        }
        for (int i = 0; i < KPE_PER_LANE; i++)
            dot += qp[i] * __bfloat162float(kpe_cache[page * DIM_KPE + lane + 32 * i]);
        for (int off = 16; off > 0; off /= 2)
            dot += __shfl_xor_sync(0xffffffffu, dot, off);
        const float s = dot * sm_scale;
        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new); /* m = -inf on the first token: corr = 0 */
        const float p = expf(s - m_new);
        l = l * corr + p;
        for (int i = 0; i < CKV_PER_LANE; i++)
            acc[i] = acc[i] * corr + p * ckv[i];
        m = m_new;
    }

    __shared__ float sm_m[REF_WARPS], sm_l[REF_WARPS];
    __shared__ float sm_acc[REF_WARPS][DIM_CKV];
    if (lane == 0) {
        sm_m[warp] = m;
        sm_l[warp] = l;
    }
    for (int i = 0; i < CKV_PER_LANE; i++)
        sm_acc[warp][lane + 32 * i] = acc[i];
    __syncthreads();

    float m_all = neg_inf();
    for (int w = 0; w < REF_WARPS; w++)
        m_all = fmaxf(m_all, sm_m[w]);
    float l_all = 0.0f;
    for (int w = 0; w < REF_WARPS; w++)
        if (sm_l[w] > 0.0f) /* a warp that saw no token has m = -inf, l = 0 */
            l_all += sm_l[w] * expf(sm_m[w] - m_all);
    /* thread t owns dimensions t + 32*REF_WARPS*i of the output */
    for (int d = threadIdx.x; d < DIM_CKV; d += 32 * REF_WARPS) {
        float o = 0.0f;
        for (int w = 0; w < REF_WARPS; w++)
            if (sm_l[w] > 0.0f)
                o += sm_acc[w][d] * expf(sm_m[w] - m_all);
        output[qrow * DIM_CKV + d] = __float2bfloat16(l_all > 0.0f ? o / l_all : 0.0f);
    }
    if (threadIdx.x == 0)
        lse[qrow] = l_all > 0.0f ? (m_all + logf(l_all)) * 1.4426950408889634f : neg_inf();
}
