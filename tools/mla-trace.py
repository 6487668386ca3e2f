#!/usr/bin/env python3
"""mla-trace.py SEED OUT.cu - an mla_decode seed with globaltimer stamps, for tools/mla-trace.cu.

Writes a copy of SEED (a seed whose kernels are mla_mma_ws.cu's: mla_mma_ws_partial and
mla_mma_ws_merge) in which thread 0 of every CTA records %globaltimer at the phases of its work:
the partial kernel's start, its kv_indptr scan, its page indices and Q in shared memory, the
first tile's arrival, its first request switch (before and after the next request's Q), the end
of its tiles and its exit, with its token range, tile and segment counts and SM; the merge
kernel's start, scan, wait for the partial grid, first round of partial loads, sums, the groups'
meeting and exit. The stamps go to two __device__ arrays, g_tr[CTA][16] and g_trm[CTA][8], that
tools/mla-trace.cu reads. The seed itself is never changed: the copy is for measurement only
(the stamps cost a few registers and stores).

Each stamp is inserted after a line of the seed's own text; when the seed's text moves, the
script stops and names the line it no longer finds (tests/cli/t0023 runs it on the seed as it is).
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in tools/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed_stamps import Stamper  # noqa: E402

st = Stamper("mla-trace.py")
rep = st.rep

rep('__device__ __forceinline__ float neg_inf()',
 '__device__ unsigned long long g_tr[4096 * 16];\n__device__ unsigned long long g_trm[1024 * 8];\n'
 '__device__ __forceinline__ unsigned long long gtime() { unsigned long long t; asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t)); return t; }\n'
 '#define TR(k) (g_tr[blockIdx.x * 16 + (k)] = gtime())\n#define TRM(k) (g_trm[blockIdx.x * 8 + (k)] = gtime())\n'
 '__device__ __forceinline__ float neg_inf()')
rep('''    pdl_launch_dependents(); /* the merge grid may be scheduled once every CTA of this one runs */
    const int tid = threadIdx.x;''', '''    pdl_launch_dependents(); /* the merge grid may be scheduled once every CTA of this one runs */
    const int tid = threadIdx.x;
    if (tid == 0) TR(0);''')
rep('''        return; /* idle slot */
    const int n_tiles''', '''        return; /* idle slot */
    if (tid == 0) { TR(1); unsigned sm; asm("mov.u32 %0, %smid;" : "=r"(sm)); g_tr[blockIdx.x * 16 + 11] = lo; g_tr[blockIdx.x * 16 + 12] = hi; g_tr[blockIdx.x * 16 + 13] = sm; }
    const int n_tiles''')
rep('''    __syncthreads(); /* s_idx and Q ready */
''', '''    __syncthreads(); /* s_idx and Q ready */
    if (tid == 0) TR(2);
''')
rep('''        return; /* the consumers wait for every stage's copies before they exit */''',
 '''        if (lane == 0 && warp == WARPS) TR(3);
        return; /* the consumers wait for every stage's copies before they exit */''')
rep('''                    mbar_wait(full_bar + 8 * (waited % STAGES), (unsigned)((waited / STAGES) & 1));
                } while (waited < u);''', '''                    mbar_wait(full_bar + 8 * (waited % STAGES), (unsigned)((waited / STAGES) & 1));
                    if (tid == 0 && waited == 0) TR(4);
                } while (waited < u);''')
rep('''            consumer_sync(); /* every warp is done with the last tile's scores (and a new segment's Q is in) */''',
 '''            consumer_sync(); /* every warp is done with the last tile's scores (and a new segment's Q is in) */
            if (tid == 0 && nseg == 1 && just) { TR(6); just = 0; }''')
rep('''    int waited = -1; /* the last tile waited for: a tile two segments share is waited for once */''',
 '''    int waited = -1; /* the last tile waited for: a tile two segments share is waited for once */
    int nseg = 0, just = 0;''')
rep('''        rb++;
        if (!next_segment())
            break;
        load_q(rb);''', '''        rb++;
        if (!next_segment())
            break;
        if (tid == 0 && nseg == 0) TR(5);
        nseg++; just = 1;
        load_q(rb);''')
rep('''    while (waited + 1 < n_tiles) { /* tiles past the last segment: waited for and released all the same */''',
 '''    if (tid == 0) { TR(8); g_tr[blockIdx.x * 16 + 7] = nseg + 1; g_tr[blockIdx.x * 16 + 10] = n_tiles; }
    while (waited + 1 < n_tiles) { /* tiles past the last segment: waited for and released all the same */''')
rep('''        mbar_wait(full_bar + 8 * (waited % STAGES), (unsigned)((waited / STAGES) & 1));
    }
}
''', '''        mbar_wait(full_bar + 8 * (waited % STAGES), (unsigned)((waited / STAGES) & 1));
    }
    if (tid == 0) TR(9);
}
''')
rep('''    const int tid = threadIdx.x;
    const int grid = (int)gridDim.x;
    int done = 0;''', '''    const int tid = threadIdx.x;
    if (tid == 0) TRM(0);
    const int grid = (int)gridDim.x;
    int done = 0;''')
rep('''        if (kn > 0)
            pdl_wait();''', '''        if (tid == 0) TRM(1);
        if (kn > 0)
            pdl_wait();
        if (tid == 0) TRM(2);''')
rep('''        done += total;
        __syncthreads(); /* s_work free for the next pass */
    }
}''', '''        done += total;
        __syncthreads(); /* s_work free for the next pass */
    }
    if (tid == 0) TRM(3);
}''')
rep('''        const float corr = exp2f(m - mx); /* both finite: NEG_BIG at least */''', '''        if (tid == 0 && s == grp) TRM(4);
        const float corr = exp2f(m - mx); /* both finite: NEG_BIG at least */''')
rep('''    if (G > 1) { /* block-uniform: the row's groups meet''', '''    if (tid == 0) TRM(5);
    if (G > 1) { /* block-uniform: the row's groups meet''')
rep('''    if (grp == 0) {
        const float inv = L > 0.0f ? 1.0f / L : 0.0f;''', '''    if (tid == 0) TRM(6);
    if (grp == 0) {
        const float inv = L > 0.0f ? 1.0f / L : 0.0f;''')

st.write()
