#!/usr/bin/env python3
"""gqa-ws-trace.py SEED OUT.cu - gqa_ws.cu with globaltimer stamps, for tools/gqa-ws-trace.cu.

Writes a copy of SEED (gqa's gqa_ws seed, kernel gqa_ws_partial) in which every CTA records
where its time goes, into a __device__ array g_tr[CTA][48] that tools/gqa-ws-trace.cu reads:

  0  %globaltimer at the kernel's start (thread 0)      9  the SM
  1  the walk done (kv_indptr read, barrier passed)    10  the CTA's tiles
  2  the producer's first copy issued                  13  cycles the producer waited for a free stage
  3  the producer's last copy issued                   14  requests starting at or before the range
  4  consumer warp 0's first tile in shared memory     15  clock64 at thread 0's end
  5  consumer warp 0's Q in registers                  40  clock64 at the start
  8  thread 0's end
  16 + w  consumer warp w done (its last flush issued)  24 + w  cycles warp w waited for a full stage
  32 + w  requests warp w moved to (request switches)  (w < 8)

Only consumer warps have slots 16-39. The seed itself is never changed: the copy is for
measurement only (the stamps cost a few registers and stores; compare event times between
builds of this tool, not with ksearch's). Each stamp is inserted at a line of the seed's own
text; when the seed's text moves, the script stops and names the line it no longer finds
(tests/cli/t0029 runs it on the seed as it is).
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in tools/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed_stamps import Stamper  # noqa: E402

st = Stamper("gqa-ws-trace.py")
rep = st.rep

rep('__device__ __forceinline__ float neg_inf()',
    '#define TR_SLOTS 48\n'
    '__device__ unsigned long long g_tr[4096 * TR_SLOTS];\n'
    '__device__ __forceinline__ unsigned long long gtime() { unsigned long long t; '
    'asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t)); return t; }\n'
    '#define TRV(k, v) (blockIdx.x < 4096 ? (void)(g_tr[blockIdx.x * TR_SLOTS + (k)] = (unsigned long long)(v)) : (void)0)\n'
    '#define TR(k) TRV(k, gtime())\n'
    '__device__ __forceinline__ float neg_inf()')
rep('''    const bool producer = warp == CWARPS;
''', '''    const bool producer = warp == CWARPS;
    if (tid == 0) { TR(0); TRV(40, clock64()); unsigned sm; asm("mov.u32 %0, %smid;" : "=r"(sm)); TRV(9, sm); TRV(10, n_tiles); }
''')
rep('''    if (R0 >= R1)
        return; /* block-uniform */''', '''    if (tid == 0) { TR(1); TRV(14, cnt); }
    if (R0 >= R1)
        return; /* block-uniform */''')
rep('''        const u64 policy = HINT ? evict_first_policy() : 0ull;''',
    '''        const u64 policy = HINT ? evict_first_policy() : 0ull;
        long long tr_pw = 0;''')
rep('''                if (v >= STAGES)
                    mbar_wait(empty + 8 * s, (unsigned)(((v / STAGES) - 1) & 1));''',
    '''                if (v >= STAGES) {
                    const long long tr_w0 = clock64();
                    mbar_wait(empty + 8 * s, (unsigned)(((v / STAGES) - 1) & 1));
                    tr_pw += clock64() - tr_w0;
                }''')
rep('''                idx[j] = load_idx(v + LOOK);''', '''                if (lane == 0 && v == 0) TR(2);
                if (lane == 0 && v == n_tiles - 1) TR(3);
                idx[j] = load_idx(v + LOOK);''')
rep('''    } else {
        /* ---- the consumer: warp (g, dpart), walking the requests of the range ---- */''',
    '''        if (lane == 0) TRV(13, tr_pw);
    } else {
        /* ---- the consumer: warp (g, dpart), walking the requests of the range ---- */''')
rep('''        if (cb >= 0)
            load_q(qb, q, cb, g, r, c);
''', '''        if (cb >= 0)
            load_q(qb, q, cb, g, r, c);
        if (warp == 0 && cb >= 0) { asm volatile("" ::"r"(qb[0][0]), "r"(qb[HEAD_DIM / 16 - 1][1])); if (lane == 0) TR(5); }
''')
rep('''        bool have = false; /* the state holds tokens of cb */''',
    '''        bool have = false; /* the state holds tokens of cb */
        long long tr_cw = 0;
        int tr_sw = 0;''')
rep('''        auto advance = [&]() {
            cb++;''', '''        auto advance = [&]() {
            tr_sw++;
            cb++;''')
rep('''            mbar_wait(full + 8 * s, (unsigned)((u / STAGES) & 1)); /* tile u's pages landed */''',
    '''            const long long tr_w0 = clock64();
            mbar_wait(full + 8 * s, (unsigned)((u / STAGES) & 1)); /* tile u's pages landed */
            tr_cw += clock64() - tr_w0;
            if (warp == 0 && lane == 0 && u == 0) TR(4);''')
rep('''        if (have && cb >= 0 && cb < B)
            flush(); /* the request goes on in the next CTA */''', '''        if (have && cb >= 0 && cb < B)
            flush(); /* the request goes on in the next CTA */
        if (lane == 0 && warp < 8) { TR(16 + warp); TRV(24 + warp, tr_cw); TRV(32 + warp, tr_sw); }''')
rep('''#if MERGE == 0
    pdl_launch_dependents();
#endif
#if MERGE == 2''', '''    if (tid == 0) { TR(8); TRV(15, clock64()); }
#if MERGE == 0
    pdl_launch_dependents();
#endif
#if MERGE == 2''')

st.write()
