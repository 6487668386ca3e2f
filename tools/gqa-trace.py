#!/usr/bin/env python3
"""gqa-trace.py SEED OUT.cu - gqa_space_cluster.cu with globaltimer stamps, for tools/gqa-trace.cu.

Writes a copy of SEED (gqa_space_cluster.cu, kernel gqa_cluster_decode) in which thread 0 of
every CTA records %globaltimer at the phases of its work: the kernel's start, the request's
range known (kv_indptr in), its first tile in shared memory, its last tile done, all warps done,
the warps' states combined, the cluster's partials visible (first cluster barrier), the merged
output stored and its exit; with its SM and its warp's tile count. The stamps go to a __device__
array g_tr[CTA][24] that tools/gqa-trace.cu reads. The seed itself is never changed: the copy is
for measurement only (the stamps cost a few registers and stores).

Each stamp is inserted at a line of the seed's own text; when the seed's text moves, the script
stops and names the line it no longer finds (tests/cli/t0023 runs it on the seed as it is).
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in tools/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed_stamps import Stamper  # noqa: E402

st = Stamper("gqa-trace.py")
rep = st.rep


CTA = "(blockIdx.y * gridDim.x + blockIdx.x)"
rep('__device__ __forceinline__ float neg_inf()',
    '__device__ unsigned long long g_tr[4096 * 24];\n'
    '__device__ __forceinline__ unsigned long long gtime() { unsigned long long t; '
    'asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t)); return t; }\n'
    '#define TR(k) (g_tr[' + CTA + ' * 24 + (k)] = gtime())\n'
    '#define TRV(k, v) (g_tr[' + CTA + ' * 24 + (k)] = (v))\n'
    '__device__ __forceinline__ float neg_inf()')
rep('''    const int c = lane & 3;  /* fragment column pair */
''', '''    const int c = lane & 3;  /* fragment column pair */
    if (tid == 0) { TR(0); TRV(16, clock64()); unsigned sm; asm("mov.u32 %0, %smid;" : "=r"(sm)); TRV(9, sm); }
''')
rep('''    const bool active = split < n_act;
''', '''    const bool active = split < n_act;
    if (tid == 0) TR(1);
''')
rep('''#pragma unroll
        for (int k = 0; k < STAGES - 1; k++)
#if LOAD == 2
            issue_tile(k, first_idx[k], held[k]);''', '''        if (tid == 0) { asm volatile("" ::"r"(first_idx[0])); TR(12); }
#pragma unroll
        for (int k = 0; k < STAGES - 1; k++)
#if LOAD == 2
            issue_tile(k, first_idx[k], held[k]);''')
rep('''        const float qk_scale = sm_scale * LOG2E;''', '''        const float qk_scale = sm_scale * LOG2E;
        if (tid == 0) { asm volatile("" ::"r"(qb[0][0]), "r"(qb[HEAD_DIM / 16 - 1][1])); TR(13); }''')
rep('''            __syncwarp(); /* all lanes' pieces of tile k are in the ring */''',
    '''            __syncwarp(); /* all lanes' pieces of tile k are in the ring */
            if (tid == 0 && k == 0) { TR(2); TRV(10, my_tiles); }''')
rep('''            __syncwarp(); /* all lanes' have; all lanes are done with tile k-1 */''',
    '''            __syncwarp(); /* all lanes' have; all lanes are done with tile k-1 */
            if (tid == 0 && k == 0) { TR(2); TRV(10, my_tiles); }''')
rep('''        __syncthreads(); /* every warp is done with its ring: reuse the memory for the merge */''',
    '''        if (tid == 0) TR(3);
        __syncthreads(); /* every warp is done with its ring: reuse the memory for the merge */
        if (tid == 0) TR(4);''')
rep('''        /* the CTA's partial (normalised o, lse) per (head, 4 dims) */''',
    '''        if (tid == 0) TR(5);
        /* the CTA's partial (normalised o, lse) per (head, 4 dims) */''')
rep('''    if (!active)
        cluster_wait(); /* (arrived at the start: no wait in practice) */''', '''    if (tid == 0 && active) TR(6);
    if (!active)
        cluster_wait(); /* (arrived at the start: no wait in practice) */''')
rep('''        mbar_wait_cluster(merge_bar, 0);''', '''        mbar_wait_cluster(merge_bar, 0);
        if (tid == 0) TR(7);''')
rep('''#elif MERGE == 1
    if (n_act > 1) {''', '''    if (tid == 0) { TR(8); TRV(17, clock64()); }
#elif MERGE == 1
    if (n_act > 1) {''')
rep('''                mh[w & 1] = fmaxf(mh[w & 1], sm_ml[(w * GROUP + hh) * 2]);
            const float mx = fmaxf(mh[0], mh[1]);
            float Lh[2] = {0.0f, 0.0f};''', '''                mh[w & 1] = fmaxf(mh[w & 1], sm_ml[(w * GROUP + hh) * 2]);
            const float mx = fmaxf(mh[0], mh[1]);
            if (tid == 0 && it == 0) { asm volatile("" ::"f"(mx)); TR(14); }
            float Lh[2] = {0.0f, 0.0f};''')
rep('''            const float inv = (L > 0.0f) ? __fdividef(1.0f, L) : 0.0f;
            const float4 ov = make_float4(acc.x * inv''', '''            if (tid == 0 && it == 0) { asm volatile("" ::"f"(acc.x), "f"(L)); TR(15); }
            const float inv = (L > 0.0f) ? __fdividef(1.0f, L) : 0.0f;
            const float4 ov = make_float4(acc.x * inv''')

st.write()
