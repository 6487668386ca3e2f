/* ksearch
{ "params": {"CHUNK": [32, 64, 128, 256, 512, 1024], "CTAS": [132, 200, 264, 396, 528, 1048576], "TILE": [16, 32, 64], "STAGES": [2, 3, 4, 6],
             "WARPS": [4, 8], "MINB": [1, 2], "PART": [0, 1], "SPLIT": [0, 1], "SEGP": [0, 32, 64, 96],
             "QREG": [0, 1], "HINT": [0, 1], "MDEPTH": [4, 8], "KSPL": [1, 2]},
  "start": {"CTAS": 264, "TILE": 32, "WARPS": 4, "MINB": 2, "PART": 1, "SPLIT": 1, "SEGP": 64, "HINT": 1, "MDEPTH": 8, "KSPL": 2},
  "constraints": ["CHUNK % TILE == 0", "MINB == 1 || WARPS*TILE <= 128", "SPLIT == 1 || SEGP == 0", "QREG == 0 || (MINB == 1 && WARPS*4 >= TILE)",
                  "KSPL == 1 || WARPS*4 <= TILE",
                  "MINB*(27904 + STAGES*(TILE*1168 + 16) + KSPL*(max(TILE, WARPS*8)*64 + 512*max(1, WARPS*8/TILE))) <= 233472"],
  "scratch": {"part_o": ["float32", "(cdiv((num_kv_indices + SPLIT*SEGP*batch_size), min(2048, max(CHUNK, TILE*cdiv(cdiv((num_kv_indices + SPLIT*SEGP*batch_size), CTAS), TILE)))) + batch_size)*num_qo_heads*head_dim_ckv/(1 + PART)"],
              "part_lse": ["float32", "(cdiv((num_kv_indices + SPLIT*SEGP*batch_size), min(2048, max(CHUNK, TILE*cdiv(cdiv((num_kv_indices + SPLIT*SEGP*batch_size), CTAS), TILE)))) + batch_size)*num_qo_heads"]},
  "launch": [
    {"kernel": "mla_mma_ws_partial", "grid": ["cdiv((num_kv_indices + SPLIT*SEGP*batch_size), min(2048, max(CHUNK, TILE*cdiv(cdiv((num_kv_indices + SPLIT*SEGP*batch_size), CTAS), TILE)))) + batch_size*(1 - SPLIT)"], "block": ["WARPS*32 + 64"],
     "smem": "18688 + STAGES*TILE*1168 + KSPL*(max(TILE, WARPS*8)*64 + 512*max(1, WARPS*8/TILE)) + 8192 + 16*STAGES",
     "args": ["q_nope", "q_pe", "ckv_cache", "kpe_cache", "kv_indptr", "kv_indices", "sm_scale",
              "part_o", "part_lse", "output", "lse", "batch_size", "num_pages", "num_kv_indices"]},
    {"kernel": "mla_mma_ws_merge", "grid": ["264"], "block": ["512"], "pdl": true,
     "args": ["kv_indptr", "part_o", "part_lse", "output", "lse", "batch_size", "num_kv_indices"]} ] }
*/
/*
 * Family "mla_mma_ws": mla_mma (its work split, score, softmax on the fragments and PV,
 * unchanged) with its loads given to warps of their own. One or two producer warps fill a
 * STAGES-deep ring with one cp.async.bulk per row part (a token's 1 KiB ckv row and 128-byte
 * kpe row), each stage completing on a "full" mbarrier (transaction bytes), and refills a
 * stage once every consumer thread has arrived on its "empty" mbarrier; the consumers'
 * barriers are named barriers among themselves. Against mla_mma, whose CTA issues 16-byte
 * cp.async for the next tile at each tile's barrier, the copies no longer wait for the math
 * and the ring can be deeper at the same occupancy: a bare read of mla_decode's rows took
 * 118 us at b128 as mla_mma's loads make it and 88 us as one producer warp's bulk copies
 * into a 3-stage ring (tools/gather-bench.cu mla; BENCHMARKS.md, seventh session).
 * Rows of no token (past the chunk, or a page index out of range) are zeroed by the
 * producer with st.shared (fenced to the async proxy before the next copy into them).
 * Consumers that finish their segments early still wait for and release every tile the
 * producer loads, so it never waits for a release that cannot come.
 *
 * What bounds it (Nsight Compute at b128, the start's params, eighth session): the copies
 * alone (the consumers only wait and release) took 96 us with one producer warp, the math
 * alone (no copies) 65 us, both 97. One warp issuing a tile's 64 copies is the bound, so
 * PRODW 2 gives the ckv copies and the kpe copies a warp each: 90 us copies alone, and the
 * whole kernel 108 us against 114 in `ksearch check`. Two warps splitting the rows instead
 * did the same; kpe by 16-byte cp.async instead of bulk copies did less (110).
 *
 * The rest is mla_mma's (below); params as mla_mma's, with STAGES up to 6 and fewer values
 * of CHUNK, CTAS and SEGP (the constraints' work bound). The search starts at the
 * measured best at b128 (108 us on an H200 against mla_mma's 124): TILE 32, 4 consumer
 * warps, 2 producer warps, 2 stages, 2 CTAs an SM, 264 CTAs of equal token ranges.
 *
 * Work split, with chunk = min(2048, max(CHUNK, TILE*cdiv(cdiv(V, CTAS), TILE))) tokens, where
 * V = N (SPLIT 0) or N + SEGP*batch_size (SPLIT 1, virtual tokens below):
 *   SPLIT 0 (per request): request b owns the chunk slots [f(b), f(b) + cdiv(len_b, chunk)),
 *     f(b) = floor(kv_indptr[b] / chunk) + b, which never overlap and all lie below
 *     cdiv(N, chunk) + batch_size (the grid); every CTA works on one request, and a
 *     request's last chunk is short, so CTAs differ in length.
 *   SPLIT 1 (equal ranges): CTA g takes the tokens [g*chunk, (g+1)*chunk) of the whole
 *     batch, whatever requests they belong to (grid cdiv(V, chunk)): every CTA the same
 *     length, so CTAS = the CTAs that fit at once makes one even wave. It walks the
 *     requests its range meets, one segment each (Q reloaded, softmax state reset); a
 *     tile that two requests share is computed once per request, masked. The segment of
 *     request b in CTA g leaves its partial at g + b: unique, since a request's CTAs are
 *     consecutive and the next request starts in the CTA where it ended or later.
 *     Virtual tokens: a CTA that meets a request boundary does more (the shared tile
 *     twice, a Q load, a second write-out), so each request's start counts SEGP tokens:
 *     token t of request b sits at t + SEGP*(b+1), CTA g takes the tokens at
 *     [g*chunk, (g+1)*chunk) of that line (contiguous, since it grows with t), and a CTA
 *     that meets a boundary streams up to SEGP fewer tokens. SEGP 0: equal token ranges.
 * A CTA finds its (first) request with one coalesced read of kv_indptr and
 * __syncthreads_count; idle slots exit at once. A request met by one CTA only is written in
 * place; longer ones leave (o_s / l_s, lse_s) per segment, fp32 or bf16 (PART), which the
 * merge launch (PDL: it starts while this grid runs) combines. Requests of no token get
 * output 0 and lse -inf.
 *
 * Per CTA: Q (16 heads x 576 dims: q_nope then q_pe) in shared memory; the chunk's page
 * indices in shared memory; a STAGES-deep ring of TILE-token tiles, each token a row of
 * ckv (1024 B) then kpe (128 B), padded to 1168 B so that ldmatrix rows fall in distinct
 * banks, filled with 16-byte cp.async.cg (zero-fill for tokens past the chunk). Per tile:
 *   1. S [16 heads x TILE] = Q . K^T: warp w takes NPW n-tiles (8 tokens each) from
 *      (w % (NT/NPW))*NPW and the k-steps of part w / (NT/NPW) of the 36 (KS parts; see
 *      KSPL); A = Q by ldmatrix, B = K rows by ldmatrix (a token row is a column of K^T).
 *      Partial sums to shared memory.
 *   2. Online softmax in base 2, in every warp: a lane reads the scores of its A-fragment
 *      elements of P (heads r, r+8; 4 tokens of each 16) and makes them P (bf16) in
 *      registers; the row max is reduced over the lane quad, the running max m is the same
 *      in every warp (the same scores, the same operations), and each lane keeps its
 *      columns' share of the sum l, reduced once at the finish. So one barrier per tile
 *      separates the score from the PV, and P never passes through shared memory: against
 *      warps owning heads and P in shared memory (one barrier more, five-step shuffle
 *      trees), a tile of 16 tokens with 4 warps and 3 CTAs an SM ran b128 in 129 us
 *      instead of 148 on an H200 (BENCHMARKS.md, "mla_mma's softmax on the fragments").
 *   3. O [16 x 512] += P . V: warp w owns dims [w*512/WARPS, (w+1)*512/WARPS); A = P from
 *      registers, B = V = the ckv part of the rows by ldmatrix.trans. No warp ever merges
 *      with another: every output element has one owner.
 *
 * Params:
 *   CHUNK  - fewest tokens per CTA; CTAS - slots wanted (the chunk grows to cdiv(N, CTAS)
 *            tokens when that is more; 1048576: a fixed chunk): GPU fill and balance vs.
 *            partial traffic and the merge
 *   TILE   - tokens per ring stage (16, 32, 64)
 *   STAGES - ring depth: STAGES-1 tiles in flight while one is computed
 *   WARPS  - 4 or 8 (the score splits the k-steps, the PV splits the output dims)
 *   MINB   - CTAs per SM asked of ptxas (__launch_bounds__), and allowed by shared memory:
 *            several CTAs overlap one's barriers with another's loads and math
 *   PART   - partials in fp32 (0) or bf16 (1)
 *   SPLIT  - per-request chunks (0) or equal token ranges across requests (1)
 *   SEGP   - SPLIT 1: the tokens a request boundary costs a CTA (virtual tokens)
 *   (PRODW, the producer warps, is 2: one for the ckv parts, one for the kpe parts. One warp for
 *   both was the bound at b128 and no search's best after the eighth session; the value was
 *   dropped in the twenty-second session to make room for KSPL under the constraints' work bound.)
 *   HINT   - 1: the ring's bulk copies carry an L2 evict_first policy (each row is read once). A
 *            launch that follows other work finds the L2 full of dirty lines (after the timing's
 *            memset: all of it); rows allocated normally evict those and wait for their write-back,
 *            rows marked evict_first mostly replace each other. After a memset the partial launch
 *            took b64 35.9 us to 32.7 and b128 93.1 to 90.9 at the searches' bests; after a read of
 *            the flush buffer instead (clean lines) b16 and b64 did not move and b128 gained 3%
 *            (tools/mla-timeline.cu MLA_FLUSH=read, H200, twentieth session). The search starts
 *            with it.
 *   MDEPTH - partials a merge thread loads in one round trip (see the merge below)
 *   QREG   - 1: a consumer warp holds its A fragments of Q (its KPW <= 18 k-steps, 72 registers)
 *            in registers, loaded from shared memory once a segment, so that a tile's score
 *            reads only K from shared memory; one CTA an SM only (the registers). Without it the
 *            warps read Q's 18 KB WARPS/KS times a tile (74 KB with 4 or 8 warps and 32 tokens:
 *            half of a tile's shared-memory reads). At 8 warps and 32-token tiles it took b64 40.3-40.5 us to
 *            39.7-40.2 and b128 (one CTA an SM) 111.2-111.6 to 107.8-108.4 (tools/mla-timeline.cu,
 *            H200, nineteenth session).
 *   KSPL   - 2: the score's k-steps split in twice as many parts, each warp taking twice the
 *            n-tiles (NPW) with each A fragment of Q loaded once for all of them (k-steps outer),
 *            so that a tile's reads of Q from shared memory halve (37 KB instead of 74 with 4
 *            warps and 32 tokens), for twice the partial sums (KS) in shared memory. At the
 *            searches' b128 best (4 warps, 2 CTAs an SM) the partial launch took 89.63-89.92 us
 *            with 1 and 89.31-89.70 with 2 (b16 21.50-21.54 and 21.12-21.18; tools/mla-timeline.cu,
 *            three rounds), and the twenty-first session's export with its b128 kernel at 2 ran
 *            b128 in 94.05-94.32 us against 94.34-94.56, lower in each of five rounds
 *            (tools/bench-mla.cu, H200, twenty-second session). With Q in registers (QREG) it
 *            only adds K reads: at 8 warps b128's partial launch took 101.4-101.7 us against
 *            98.4-98.9 (two rounds, another H200). The search starts at 2.
 */
#include <cuda_bf16.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "mla_mma_ws needs sm_90 or newer (griddepcontrol, cp.async.bulk and mbarrier transaction counts; its constraints allow up to 227 KiB of shared memory per block)"
#endif

#ifndef CHUNK
#define CHUNK 64
#endif
#ifndef TILE
#define TILE 16
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef WARPS
#define WARPS 4
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
#ifndef SPLIT
#define SPLIT 0
#endif
#ifndef SEGP
#define SEGP 0
#endif
#ifndef PRODW
#define PRODW 2 /* not a param since the twenty-second session (see "Params" above) */
#endif
#ifndef HINT
#define HINT 0
#endif
#ifndef QREG
#define QREG 0
#endif
#ifndef MDEPTH
#define MDEPTH 8
#endif
#ifndef KSPL
#define KSPL 1
#endif
#define IDX_MAX 2048 /* most tokens per chunk: their page indices are in shared memory */
#define IDX_BATCH 8   /* page indices a thread loads before it stores them */
#define PREFETCH_REQS 8 /* later requests whose Q a CTA prefetches to L2 at its start */
#define CHUNK_TILE TILE

#define NUM_QO_HEADS 16
#define DIM_CKV 512
#define DIM_KPE 64
#define DIM_QK (DIM_CKV + DIM_KPE) /* 576 */
#define ROW_PIECES (DIM_QK / 8)     /* 16-byte pieces of a token row: 72 (64 ckv + 8 kpe) */
#define Q_LINES_NOPE (NUM_QO_HEADS * DIM_CKV * 2 / 128) /* 128-byte lines of a request's q_nope: 128 */
#define Q_LINES (Q_LINES_NOPE + NUM_QO_HEADS * DIM_KPE * 2 / 128) /* and of its q_pe: 144 in all */
#define ROW_BYTES 1168              /* 1152 + 16 of padding: rows start 73 pieces apart */
#define CTHREADS (WARPS * 32)     /* consumer threads */
#define THREADS (CTHREADS + 32 * PRODW) /* and the producer warps */
#define FULL_MASK 0xffffffffu
#define NEG_BIG (-1.0e30f) /* "no token yet": finite, so exp2(NEG_BIG - NEG_BIG) = 1, never NaN */
#define LOG2E 1.4426950408889634f

constexpr int KSTEPS = DIM_QK / 16;                            /* 36 */
constexpr int NT = TILE / 8;                                   /* n-tiles of the score */
constexpr int NPW = KSPL * (NT > WARPS ? NT / WARPS : 1);      /* n-tiles per warp */
constexpr int KS = KSPL * (WARPS > NT ? WARPS / NT : 1);       /* parts of the k-steps */
constexpr int KPW = KSTEPS / KS;                               /* k-steps per part */
constexpr int CHAINS = WARPS == 4 ? 4 : 2;                      /* accumulator chains of the score */
constexpr int KSPL_UNROLL = QREG ? KPW : 3; /* KSPL 2's score loop; QREG: every index of qf a constant (or qf is in local memory) */
constexpr int DPW = DIM_CKV / WARPS;                           /* output dims per warp */
constexpr int OT = DPW / 8;                                    /* PV n-tiles per warp */
constexpr int Q_BYTES = NUM_QO_HEADS * ROW_BYTES;              /* 18688 */
constexpr int RING_BYTES = STAGES * TILE * ROW_BYTES;
constexpr int S_STRIDE = TILE + 8; /* floats per score row: the float2 stores of 16 lanes hit 32 banks */
constexpr int S_BYTES = KS * NUM_QO_HEADS * S_STRIDE * 4;
constexpr int SMEM_BYTES = Q_BYTES + RING_BYTES + S_BYTES + 8192 + 16 * STAGES;

static_assert(TILE == 16 || TILE == 32 || TILE == 64, "TILE is 16, 32 or 64 tokens");
static_assert(WARPS == 4 || WARPS == 8, "WARPS is 4 or 8");
static_assert(CHUNK % TILE == 0, "a chunk is a whole number of tiles");
static_assert(STAGES >= 2, "at least double buffering");
static_assert(SPLIT == 0 || SPLIT == 1, "SPLIT is 0 or 1");
static_assert(PRODW == 2, "two producer warps: one for the ckv parts, one for the kpe parts");
static_assert(MDEPTH == 4 || MDEPTH == 8, "MDEPTH is 4 or 8 partials a merge thread loads in one round trip");
static_assert(QREG == 0 || (QREG == 1 && KPW <= 18 && MINB == 1), "QREG holds at most 18 k-steps of Q (72 registers), at one CTA an SM");
static_assert(KSTEPS % KS == 0 && NT % NPW == 0 && NPW * WARPS >= NT, "the score split covers the tile");
static_assert(S_BYTES == KSPL * (TILE > WARPS * 8 ? TILE : WARPS * 8) * 64 + 512 * KS, "keep the smem expression in sync");
static_assert(SMEM_BYTES == 18688 + STAGES * TILE * 1168 + KSPL * (TILE > WARPS * 8 ? TILE : WARPS * 8) * 64 + 512 * KS + 8192 + 16 * STAGES,
              "keep the smem expression in the header in sync");

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

/* programmatic dependent launch: the merge launch may start while the partial grid runs,
   and waits for it before it reads a partial */
__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

__device__ __forceinline__ unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

/* release: this thread's reads of the stage happen before the producer refills it */
__device__ __forceinline__ void mbar_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/* acquire: returns once the phase of the given parity has completed */
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity)
{
    asm volatile("{\n.reg .pred P1;\n"
                 "LAB_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
                 "@P1 bra.uni DONE;\n"
                 "bra.uni LAB_WAIT;\n"
                 "DONE:\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

/* HINT 1: with an L2 evict_first policy (the rows are read once: see HINT above) */
__device__ __forceinline__ void bulk_copy(unsigned dst, const void *src, unsigned bytes, unsigned bar, unsigned long long policy)
{
#if HINT
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar), "l"(policy)
                 : "memory");
#else
    (void)policy;
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
#endif
}

/* the consumer warps' own barrier (the producer never waits at it) */
__device__ __forceinline__ void consumer_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(CTHREADS) : "memory"); }

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}

__device__ __forceinline__ void ldmatrix_x2(unsigned &r0, unsigned &r1, unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr) : "memory");
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

/* Tokens per chunk slot: CHUNK at least, more when that makes over CTAS slots, a whole number of
   tiles, at most IDX_MAX (the page indices of a chunk sit in shared memory). Every launch
   expression of the header computes the same. First slot of request b: floor(indptr / chunk) + b,
   strictly increasing in b. */
__device__ __forceinline__ int chunk_tokens(int num_kv_indices, int batch_size)
{
    const int virt = num_kv_indices + SPLIT * SEGP * batch_size; /* see "virtual tokens" above */
    const int per_cta = (virt + CTAS - 1) / CTAS;
    return min(IDX_MAX, max(CHUNK, CHUNK_TILE * ((per_cta + CHUNK_TILE - 1) / CHUNK_TILE)));
}

__device__ __forceinline__ int slot_begin(int indptr_b, int b, int chunk) { return indptr_b / chunk + b; }

/* Where request b's partials are, [*first, *first + return): the partial and merge kernels
   both ask this. One partial means the partial kernel wrote the request in place. */
__device__ __forceinline__ int request_parts(int start, int end, int b, int chunk, int *first)
{
    if (end <= start)
        return 0;
    if (SPLIT) { /* the CTAs whose virtual ranges hold the request's tokens */
        *first = (start + SEGP * (b + 1)) / chunk + b;
        return (end - 1 + SEGP * (b + 1)) / chunk - (start + SEGP * (b + 1)) / chunk + 1;
    }
    *first = slot_begin(start, b, chunk);
    return (end - start + chunk - 1) / chunk;
}

extern "C" __global__ void __launch_bounds__(THREADS, MINB)
mla_mma_ws_partial(const __nv_bfloat16 *__restrict__ q_nope, const __nv_bfloat16 *__restrict__ q_pe,
                const __nv_bfloat16 *__restrict__ ckv_cache, const __nv_bfloat16 *__restrict__ kpe_cache,
                const int *__restrict__ kv_indptr, const int *__restrict__ kv_indices, float sm_scale,
                float *__restrict__ part_o, float *__restrict__ part_lse, __nv_bfloat16 *__restrict__ output,
                float *__restrict__ lse, int batch_size, int num_pages, int num_kv_indices)
{
    extern __shared__ __align__(128) unsigned char smem_raw[];
    unsigned char *const s_q = smem_raw;                                                  /* [16][ROW_BYTES] */
    unsigned char *const s_ring = s_q + Q_BYTES;                                          /* [STAGES][TILE][ROW_BYTES] */
    float *const s_s = reinterpret_cast<float *>(s_ring + RING_BYTES);                    /* [KS][16][S_STRIDE] */
    int *const s_idx = reinterpret_cast<int *>(s_ring + RING_BYTES + S_BYTES);            /* [IDX_MAX] */
    const unsigned full_bar = smem_addr(s_idx + IDX_MAX);                                 /* [STAGES] mbarriers */
    const unsigned empty_bar = full_bar + 8 * STAGES;                                     /* [STAGES] mbarriers */

    pdl_launch_dependents(); /* the merge grid may be scheduled once every CTA of this one runs */
    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int slot = blockIdx.x;
    const int chunk = chunk_tokens(num_kv_indices, batch_size);
    if (tid == 0) { /* before the scan, whose barriers order it before any use */
        for (int st = 0; st < STAGES; st++) {
            mbar_init(full_bar + 8 * st, PRODW);  /* each producer warp's arrive, with its bytes */
            mbar_init(empty_bar + 8 * st, CTHREADS); /* one arrive per consumer thread */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }

    /* ---- this CTA's tokens [lo, hi) and the first request they meet (block-uniform) ---- */
    int lo, hi, cnt = 0, last = 0; /* last: the request of this CTA's last token */
    if (SPLIT) {
        /* virtual range [x, y): the first requests that end past x and past y */
        const int x = slot * chunk, y = x + chunk;
        int cnt_y = 0;
        for (int base = 0; base < batch_size; base += THREADS) {
            const int bb = base + tid;
            const int ve = bb < batch_size ? __ldg(kv_indptr + bb + 1) + SEGP * (bb + 1) : 0x7fffffff;
            cnt += __syncthreads_count(ve <= x);
            cnt_y += __syncthreads_count(ve <= y);
        }
        const int end_all = __ldg(kv_indptr + batch_size);
        lo = cnt < batch_size ? max(__ldg(kv_indptr + cnt), x - SEGP * (cnt + 1)) : end_all;
        hi = cnt_y < batch_size ? max(__ldg(kv_indptr + cnt_y), y - SEGP * (cnt_y + 1)) : end_all;
        hi = min(hi, num_kv_indices);
        last = min(cnt_y, batch_size - 1);
    } else {
        /* the request that owns this slot: b = #{b < B : f(b) <= slot} - 1 */
        for (int base = 0; base < batch_size; base += THREADS) {
            const int bb = base + tid;
            const bool pred = bb < batch_size && slot_begin(__ldg(kv_indptr + bb), bb, chunk) <= slot;
            cnt += __syncthreads_count(pred);
        }
        cnt -= 1;
        if (cnt < 0)
            return; /* only if kv_indptr[0] > 0: slots below request 0's */
        const int start = __ldg(kv_indptr + cnt);
        const int j = slot - slot_begin(start, cnt, chunk);
        lo = start + j * chunk;
        hi = min(lo + chunk, __ldg(kv_indptr + cnt + 1)); /* empty for an idle slot */
    }
    /* request rb's segment in [lo, hi), as token offsets from lo: [seg_a, seg_z) */
    int rb = cnt, seg_a = 0, seg_z = 0;
    auto next_segment = [&]() { /* from rb on, the next request with tokens in [lo, hi) */
        for (; rb < batch_size; rb++) {
            const int s0 = __ldg(kv_indptr + rb), e0 = __ldg(kv_indptr + rb + 1);
            if (s0 >= hi)
                break;
            seg_a = max(s0, lo) - lo;
            seg_z = min(e0, hi) - lo;
            if (seg_a < seg_z)
                return true;
        }
        return false;
    };
    if (hi <= lo || !next_segment())
        return; /* idle slot */
    const int n_tiles = (hi - lo + TILE - 1) / TILE;

    /* ---- the Q rows of the later requests this CTA meets, to L2 now: a segment switch then
       waits for L2, not for HBM behind the whole grid's stream (evict_last, so the stream does not
       push them out before). Without it a switch held the consumers 2-5 us at b64 and b128
       (globaltimer trace, H200, fourteenth session). At most PREFETCH_REQS requests ahead. ---- */
    for (int i = tid; i < min(last - cnt, PREFETCH_REQS) * Q_LINES; i += THREADS) {
        const int qb = cnt + 1 + i / Q_LINES, ln = i % Q_LINES;
        const char *p = ln < Q_LINES_NOPE ? reinterpret_cast<const char *>(q_nope + (size_t)qb * NUM_QO_HEADS * DIM_CKV) + ln * 128
                                          : reinterpret_cast<const char *>(q_pe + (size_t)qb * NUM_QO_HEADS * DIM_KPE) + (ln - Q_LINES_NOPE) * 128;
        asm volatile("prefetch.global.L2::evict_last [%0];\n" ::"l"(p));
    }

    const unsigned ring = smem_addr(s_ring);
    /* warp WARPS copies the ckv parts, warp WARPS + 1 the kpe parts (see "What bounds it" above) */
    const bool do_ckv = warp == WARPS, do_kpe = warp == WARPS + 1;
    unsigned long long policy = 0;
#if HINT
    if (warp >= WARPS)
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
#endif
    /* the producer's tile u into stage u % STAGES, rows lane, lane + 32, their pages pg[k] (-1: no
       token, the row zeroed) */
    auto issue_tile = [&](int u, const int (&pg)[(TILE + 31) / 32]) {
        const int st = u % STAGES;
        const int p_lo = do_ckv ? 0 : DIM_CKV / 8, p_hi = do_kpe ? ROW_PIECES : DIM_CKV / 8;
        const unsigned row_bytes = (do_ckv ? DIM_CKV * 2 : 0) + (do_kpe ? DIM_KPE * 2 : 0);
        int nvalid = 0;
#pragma unroll
        for (int k = 0; k < (TILE + 31) / 32; k++) {
            const int tr = lane + 32 * k;
            const bool valid = tr < TILE && pg[k] >= 0;
            nvalid += __popc(__ballot_sync(FULL_MASK, valid));
            if (tr < TILE && !valid)
                for (int p = p_lo; p < p_hi; p++)
                    *reinterpret_cast<uint4 *>(s_ring + (st * TILE + tr) * ROW_BYTES + p * 16) = make_uint4(0, 0, 0, 0);
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); /* zeroed rows before later copies into them */
        __syncwarp();
        if (lane == 0) /* releases the zeroed rows with the stage */
            mbar_arrive_expect_tx(full_bar + 8 * st, (unsigned)nvalid * row_bytes);
        __syncwarp(); /* the byte count is armed before any copy can complete */
#pragma unroll
        for (int k = 0; k < (TILE + 31) / 32; k++) {
            const int tr = lane + 32 * k;
            if (tr < TILE) {
                const unsigned dst = ring + (unsigned)((st * TILE + tr) * ROW_BYTES);
                if (pg[k] >= 0 && do_ckv)
                    bulk_copy(dst, ckv_cache + (size_t)pg[k] * DIM_CKV, DIM_CKV * 2, full_bar + 8 * st, policy);
                if (pg[k] >= 0 && do_kpe)
                    bulk_copy(dst + DIM_CKV * 2, kpe_cache + (size_t)pg[k] * DIM_KPE, DIM_KPE * 2, full_bar + 8 * st, policy);
            }
        }
    };
    if (warp >= WARPS) {
        /* ---- the producers start at once: the first STAGES tiles' page indices straight from
           global memory and their copies issued, while the consumers load s_idx and Q. Behind
           those loads and a barrier, the partial launch took 0.5-1.1 us longer at b16-b128
           (tools/mla-timeline.cu, H200, eighteenth session). Prefetching the first tiles' index
           lines to L2 beside the scan, on a guess of the CTA's range, gained nothing more. ---- */
        int pre[STAGES][(TILE + 31) / 32];
#pragma unroll
        for (int u = 0; u < STAGES; u++)
#pragma unroll
            for (int k = 0; k < (TILE + 31) / 32; k++) {
                const int t = u * TILE + lane + 32 * k;
                const int pg = lane + 32 * k < TILE && t < hi - lo ? __ldg(kv_indices + lo + t) : -1;
                pre[u][k] = (unsigned)pg < (unsigned)num_pages ? pg : -1;
            }
#pragma unroll
        for (int u = 0; u < STAGES; u++)
            if (u < n_tiles)
                issue_tile(u, pre[u]);
    } else {
        /* ---- page indices (-1 past the end or out of range) to shared memory, each thread's
           loads all in flight before its first store: one round trip. A load-then-store loop
           made up to six at b128, and the CTA's start took 2.5-4.8 us after the scan (trace). ---- */
        for (int k0 = 0; k0 < chunk; k0 += IDX_BATCH * CTHREADS) {
            int pg[IDX_BATCH];
#pragma unroll
            for (int j = 0; j < IDX_BATCH; j++) {
                const int k = k0 + j * CTHREADS + tid;
                pg[j] = k < hi - lo ? __ldg(kv_indices + lo + k) : -1;
            }
#pragma unroll
            for (int j = 0; j < IDX_BATCH; j++) {
                const int k = k0 + j * CTHREADS + tid;
                if (k < chunk)
                    s_idx[k] = ((unsigned)pg[j] < (unsigned)num_pages) ? pg[j] : -1;
            }
        }
    }
    auto load_q = [&](int qb) { /* consumer threads */
        constexpr int PER = (NUM_QO_HEADS * ROW_PIECES + CTHREADS - 1) / CTHREADS; /* pieces a thread */
        uint4 v[PER];
#pragma unroll
        for (int j = 0; j < PER; j++) {
            const int i = tid + j * CTHREADS, h = i / ROW_PIECES, p = i % ROW_PIECES;
            if (i < NUM_QO_HEADS * ROW_PIECES)
                v[j] = p < 64 ? __ldg(reinterpret_cast<const uint4 *>(q_nope + ((size_t)qb * NUM_QO_HEADS + h) * DIM_CKV) + p)
                              : __ldg(reinterpret_cast<const uint4 *>(q_pe + ((size_t)qb * NUM_QO_HEADS + h) * DIM_KPE) + (p - 64));
        }
#pragma unroll
        for (int j = 0; j < PER; j++) {
            const int i = tid + j * CTHREADS, h = i / ROW_PIECES, p = i % ROW_PIECES;
            if (i < NUM_QO_HEADS * ROW_PIECES)
                *reinterpret_cast<uint4 *>(s_q + h * ROW_BYTES + p * 16) = v[j];
        }
    };
    if (tid < CTHREADS)
        load_q(rb);
    __syncthreads(); /* s_idx and Q ready */

    if (warp >= WARPS) { /* ---- the producers, from tile STAGES on ---- */
        for (int u = STAGES; u < n_tiles; u++) {
            /* every consumer warp is done with tile u - STAGES */
            mbar_wait(empty_bar + 8 * (u % STAGES), (unsigned)(((u / STAGES) - 1) & 1));
            int pg[(TILE + 31) / 32];
#pragma unroll
            for (int k = 0; k < (TILE + 31) / 32; k++)
                pg[k] = lane + 32 * k < TILE ? s_idx[u * TILE + lane + 32 * k] : -1;
            issue_tile(u, pg);
        }
        return; /* the consumers wait for every stage's copies before they exit */
    }
    /* ---- the consumers: warps 0..WARPS-1 ---- */
    /* this thread is done with tile t: every lane releases its own reads (one arrival per warp
       after a __syncwarp is ordered too, but compute-sanitizer's racecheck does not see it so;
       gqa_ws found it) */
    auto release = [&](int t) { mbar_arrive(empty_bar + 8 * (t % STAGES)); };

    const float qk_scale = sm_scale * LOG2E;
    const int r = lane >> 2; /* fragment row */
    const int c = lane & 3;  /* fragment column pair */

    /* score split of this warp */
    const int s_nt0 = (warp % (NT / NPW)) * NPW; /* first n-tile */
    const int s_ks = warp / (NT / NPW);          /* part of the k-steps (< KS) */
    /* ldmatrix addressing: A (Q) rows lane & 15, piece +lane/16; B (K rows) rows lane & 7, piece +(lane/8)&1 */
    const unsigned q_addr = smem_addr(s_q) + (unsigned)((lane & 15) * ROW_BYTES + (lane >> 4) * 16);
    const unsigned kb_off = (unsigned)((lane & 7) * ROW_BYTES + ((lane >> 3) & 1) * 16);
    /* PV: A (P) from registers; B (V rows, .trans) tokens (lane&7) + 8*((lane>>3)&1), piece + lane/16 */
    const unsigned v_off = (unsigned)(((lane & 7) + 8 * ((lane >> 3) & 1)) * ROW_BYTES + (lane >> 4) * 16 + warp * DPW * 2);

    int waited = -1; /* the last tile waited for: a tile two segments share is waited for once */
    unsigned qf[QREG ? KPW : 1][4]; /* QREG: this warp's A fragments of Q, loaded once a segment */
    for (;;) {
        float m_row[2] = {NEG_BIG, NEG_BIG}, l_row[2] = {0.0f, 0.0f}; /* softmax state of heads r, r+8 */
        float o[OT][4]; /* heads r, r+8; dims warp*DPW + 8*t + 2c, +1 */
#pragma unroll
        for (int t = 0; t < OT; t++)
            o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;

        for (int u = seg_a / TILE; u * TILE < seg_z; u++) {
            if (u > waited) {
                do { /* tiles no request owns (before kv_indptr[0]) are waited for too */
                    if (waited >= 0)
                        release(waited);
                    waited++;
                    mbar_wait(full_bar + 8 * (waited % STAGES), (unsigned)((waited / STAGES) & 1));
                } while (waited < u);
            }
            consumer_sync(); /* every warp is done with the last tile's scores (and a new segment's Q is in) */
            const unsigned tile = ring + (unsigned)((u % STAGES) * TILE * ROW_BYTES);
            if constexpr (QREG) {
                if (u == seg_a / TILE) /* the segment's first tile: its Q to registers */
#pragma unroll
                    for (int k = 0; k < KPW; k++)
                        ldmatrix_x4(qf[k], q_addr + (unsigned)((s_ks * KPW + k) * 32));
            }
            /* 1. partial scores */
            if constexpr (KSPL > 1) { /* k-steps outer: each A fragment of Q serves the warp's NPW n-tiles */
                constexpr int CH = NPW >= 4 ? 1 : 4 / NPW; /* chains a n-tile: 4 in all */
                float ac[NPW][CH][4] = {};
                const unsigned kb = tile + (unsigned)(s_nt0 * 8 * ROW_BYTES) + kb_off + (unsigned)(s_ks * KPW * 32);
                const unsigned qa = q_addr + (unsigned)(s_ks * KPW * 32);
#pragma unroll KSPL_UNROLL
                for (int k = 0; k < KPW; k += CH) {
#pragma unroll
                    for (int i = 0; i < CH; i++) {
                        if (k + i < KPW) {
                            unsigned a[4];
                            if constexpr (QREG) {
#pragma unroll
                                for (int e = 0; e < 4; e++)
                                    a[e] = qf[k + i][e];
                            } else {
                                ldmatrix_x4(a, qa + (unsigned)((k + i) * 32));
                            }
#pragma unroll
                            for (int n = 0; n < NPW; n++) {
                                unsigned b0, b1;
                                ldmatrix_x2(b0, b1, kb + (unsigned)(n * 8 * ROW_BYTES + (k + i) * 32));
                                mma_bf16(ac[n][i], a, b0, b1);
                            }
                        }
                    }
                }
                float *const sp = s_s + s_ks * NUM_QO_HEADS * S_STRIDE;
#pragma unroll
                for (int n = 0; n < NPW; n++) {
                    float acc[4];
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        acc[e] = ac[n][0][e];
#pragma unroll
                        for (int i = 1; i < CH; i++)
                            acc[e] += ac[n][i][e];
                    }
                    const int nt = s_nt0 + n;
                    *reinterpret_cast<float2 *>(sp + r * S_STRIDE + nt * 8 + 2 * c) = make_float2(acc[0], acc[1]);
                    *reinterpret_cast<float2 *>(sp + (r + 8) * S_STRIDE + nt * 8 + 2 * c) = make_float2(acc[2], acc[3]);
                }
            } else
#pragma unroll
            for (int n = 0; n < NPW; n++) {
                const int nt = s_nt0 + n;
                /* CHAINS accumulator chains (k-steps mod CHAINS) divide the mma dependency
                   latency: four with 4 consumer warps (b128 1.2% faster than two), two with 8,
                   whose 96 registers a thread at 2 CTAs an SM have no room for more */
                float ac[CHAINS][4] = {};
                const unsigned kb = tile + (unsigned)(nt * 8 * ROW_BYTES) + kb_off + (unsigned)(s_ks * KPW * 32);
                const unsigned qa = q_addr + (unsigned)(s_ks * KPW * 32);
                if constexpr (QREG) { /* Q from registers: a tile's shared-memory reads are K's only */
#pragma unroll
                    for (int k = 0; k < KPW; k += CHAINS) {
#pragma unroll
                        for (int i = 0; i < CHAINS; i++) {
                            if (k + i < KPW) {
                                unsigned b0, b1;
                                ldmatrix_x2(b0, b1, kb + (unsigned)((k + i) * 32));
                                mma_bf16(ac[i], qf[k + i], b0, b1);
                            }
                        }
                    }
                } else {
#pragma unroll 3
                    for (int k = 0; k < KPW; k += CHAINS) {
#pragma unroll
                        for (int i = 0; i < CHAINS; i++) {
                            if (k + i < KPW) {
                                unsigned a[4], b0, b1;
                                ldmatrix_x4(a, qa + (unsigned)((k + i) * 32));
                                ldmatrix_x2(b0, b1, kb + (unsigned)((k + i) * 32));
                                mma_bf16(ac[i], a, b0, b1);
                            }
                        }
                    }
                }
                float acc[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    acc[e] = ac[0][e] + ac[1][e];
                    if (CHAINS == 4)
                        acc[e] += ac[2 % CHAINS][e] + ac[3 % CHAINS][e];
                }
                float *const sp = s_s + s_ks * NUM_QO_HEADS * S_STRIDE;
                *reinterpret_cast<float2 *>(sp + r * S_STRIDE + nt * 8 + 2 * c) = make_float2(acc[0], acc[1]);
                *reinterpret_cast<float2 *>(sp + (r + 8) * S_STRIDE + nt * 8 + 2 * c) = make_float2(acc[2], acc[3]);
            }
            consumer_sync();

            /* 2. online softmax on the fragments: every warp computes P for all 16 heads and the
               tile's tokens itself, straight into the A fragments of its PV (rows r and r+8,
               columns 2c, 2c+1, 2c+8, 2c+9 of each 16-token step), so nothing passes through
               shared memory and no warp waits for another between the score and the PV; the
               row max is reduced over the lane quad, the row sum only at the finish */
            unsigned pa[TILE / 16][4];
            {
                float sv[2][TILE / 16][4]; /* [row r, r+8][16-token step][columns 2c, 2c+1, 2c+8, 2c+9] */
                float mx[2] = {neg_inf(), neg_inf()};
#pragma unroll
                for (int hh = 0; hh < 2; hh++)
#pragma unroll
                    for (int kt = 0; kt < TILE / 16; kt++)
#pragma unroll
                        for (int half = 0; half < 2; half++) {
                            const int t = kt * 16 + 2 * c + 8 * half;
                            float2 v = make_float2(0.0f, 0.0f);
#pragma unroll
                            for (int k = 0; k < KS; k++) {
                                const float2 w = *reinterpret_cast<const float2 *>(s_s + (k * NUM_QO_HEADS + r + 8 * hh) * S_STRIDE + t);
                                v.x += w.x;
                                v.y += w.y;
                            }
                            const int g = u * TILE + t; /* token offset from lo */
                            sv[hh][kt][2 * half] = (g >= seg_a && g < seg_z) ? v.x * qk_scale : neg_inf();
                            sv[hh][kt][2 * half + 1] = (g + 1 >= seg_a && g + 1 < seg_z) ? v.y * qk_scale : neg_inf();
                            mx[hh] = fmaxf(mx[hh], fmaxf(sv[hh][kt][2 * half], sv[hh][kt][2 * half + 1]));
                        }
#pragma unroll
                for (int hh = 0; hh < 2; hh++) {
                    mx[hh] = fmaxf(mx[hh], __shfl_xor_sync(FULL_MASK, mx[hh], 1));
                    mx[hh] = fmaxf(mx[hh], __shfl_xor_sync(FULL_MASK, mx[hh], 2));
                    const float m_new = fmaxf(m_row[hh], mx[hh]);
                    const float corr = exp2f(m_row[hh] - m_new);
                    m_row[hh] = m_new;
                    float sum = 0.0f;
#pragma unroll
                    for (int kt = 0; kt < TILE / 16; kt++)
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            sv[hh][kt][e] = exp2f(sv[hh][kt][e] - m_new); /* masked: exp2(-inf) = 0 */
                            sum += sv[hh][kt][e];
                        }
                    l_row[hh] = l_row[hh] * corr + sum; /* this lane's columns only */
#pragma unroll
                    for (int t = 0; t < OT; t++) {
                        o[t][2 * hh] *= corr;
                        o[t][2 * hh + 1] *= corr;
                    }
                }
#pragma unroll
                for (int kt = 0; kt < TILE / 16; kt++) {
                    const __nv_bfloat162 p0 = __floats2bfloat162_rn(sv[0][kt][0], sv[0][kt][1]);
                    const __nv_bfloat162 p1 = __floats2bfloat162_rn(sv[1][kt][0], sv[1][kt][1]);
                    const __nv_bfloat162 p2 = __floats2bfloat162_rn(sv[0][kt][2], sv[0][kt][3]);
                    const __nv_bfloat162 p3 = __floats2bfloat162_rn(sv[1][kt][2], sv[1][kt][3]);
                    pa[kt][0] = *reinterpret_cast<const unsigned *>(&p0);
                    pa[kt][1] = *reinterpret_cast<const unsigned *>(&p1);
                    pa[kt][2] = *reinterpret_cast<const unsigned *>(&p2);
                    pa[kt][3] = *reinterpret_cast<const unsigned *>(&p3);
                }
            }

            /* 3. O += P . V over this warp's dims */
#pragma unroll
            for (int kt = 0; kt < TILE / 16; kt++) {
                const unsigned vb = tile + v_off + (unsigned)(kt * 16 * ROW_BYTES);
#pragma unroll
                for (int t = 0; t < OT; t += 2) {
                    unsigned bv[4];
                    ldmatrix_x4_trans(bv, vb + (unsigned)(t * 16));
                    mma_bf16(o[t], pa[kt], bv[0], bv[1]);
                    mma_bf16(o[t + 1], pa[kt], bv[2], bv[3]);
                }
            }
        }
        /* ---- finish: each warp has m and its lanes' part of l for rows r and r+8; it writes its dims ---- */
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            l_row[hh] += __shfl_xor_sync(FULL_MASK, l_row[hh], 1);
            l_row[hh] += __shfl_xor_sync(FULL_MASK, l_row[hh], 2);
        }
        int part_first = 0;
        const int n_parts = request_parts(__ldg(kv_indptr + rb), __ldg(kv_indptr + rb + 1), rb, chunk, &part_first);
        const bool direct = n_parts == 1;
        const int part = SPLIT ? slot + rb : slot; /* this segment's partial */
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int h = r + 8 * hh;
            const float L = l_row[hh];
            const float inv = L > 0.0f ? 1.0f / L : 0.0f;
            const float ls = L > 0.0f ? m_row[hh] + log2f(L) : neg_inf();
#pragma unroll
            for (int t = 0; t < OT; t++) {
                const int d = warp * DPW + 8 * t + 2 * c;
                const float x0 = o[t][2 * hh] * inv, x1 = o[t][2 * hh + 1] * inv;
                if (direct) {
                    *reinterpret_cast<__nv_bfloat162 *>(output + ((size_t)rb * NUM_QO_HEADS + h) * DIM_CKV + d) =
                        __floats2bfloat162_rn(x0, x1);
                } else if (PART) {
                    *reinterpret_cast<__nv_bfloat162 *>(reinterpret_cast<__nv_bfloat16 *>(part_o) +
                                                        ((size_t)part * NUM_QO_HEADS + h) * DIM_CKV + d) =
                        __floats2bfloat162_rn(x0, x1);
                } else {
                    *reinterpret_cast<float2 *>(part_o + ((size_t)part * NUM_QO_HEADS + h) * DIM_CKV + d) =
                        make_float2(x0, x1);
                }
            }
            if (warp == 0 && c == 0) {
                if (direct)
                    lse[(size_t)rb * NUM_QO_HEADS + h] = ls;
                else
                    part_lse[(size_t)part * NUM_QO_HEADS + h] = ls;
            }
        }
        rb++;
        if (!next_segment())
            break;
        load_q(rb); /* every warp is past its last read of Q (the score, two barriers ago) */
    }
    while (waited + 1 < n_tiles) { /* tiles past the last segment: waited for and released all the same */
        if (waited >= 0)
            release(waited);
        waited++;
        mbar_wait(full_bar + 8 * (waited % STAGES), (unsigned)((waited / STAGES) & 1));
    }
}

/* The merge, one launch of MERGE_CTAS CTAs whatever the batch: each request of n > 1 partials
   (or none) gets G thread groups per (request, head) row, G the fewest powers of two that read
   its partials in one round trip of MERGE_DEPTH loads a thread (at most MGROUPS), so that the
   rows of short requests take one group and a long request's rows many. A group is a thread
   per 16-byte column of the row's partial values (MCOLS columns: 64 of 8 bf16, or 128 of 4
   fp32); MGROUPS groups make a CTA's work, a "virtual CTA" of MGROUPS/G rows, and request b
   has 16*G/MGROUPS of them. Every CTA numbers the virtual CTAs by a scan of the requests'
   counts (kv_indptr is an input: the scan does not wait for the partial grid) and takes those
   of its index modulo the grid. Each thread loads a partial's lse in the same round trip as
   its values and rescales its sums to a running max; a row's groups meet in shared memory,
   halving.
   64 registers a thread, so the grid is one wave, and a long request does not hold up the
   short ones. The merge this replaced, a CTA of MW warps per row (2,048 CTAs of 128 threads
   at b128: two waves), read every lse first and then a long request's partials MW*4 at a
   time; after the partial launch it took 7.0-8.7 us at b128, where this one takes 4.2-5.5,
   and 14-15 us at b16 with one request holding 61% of the tokens, where this one takes
   6.6-8.2 (tools/mla-timeline.cu, H200, thirteenth session). A fixed number of groups per
   row served only one of those two.
   A round trip is MDEPTH loads a thread, none past the request's partials (they had repeated the
   first). 4 makes more groups a row than 8 for requests of 5 or more partials, and weighs 4
   partials, not 8, for one of 2 or 3: the twentieth session's export took b128 95.5-96.0 us and
   b64 35.8-36.4 with 4, against 96.1-96.6 and 36.7-37.2 with 8, and b16 (about 8 partials) 0.2-0.8
   us and b1 (64) 0.3-0.8 us longer (tools/bench-mla.cu, H200, twenty-first session).
   Requests of one partial were finished by the partial kernel; requests of no token get
   output 0 and lse -inf. */
#define MERGE_DEPTH MDEPTH /* partials a thread loads in one round trip */
#define MERGE_CTAS 264  /* the merge grid: two CTAs an SM of an H100 or H200 (the header's grid) */
#define MTHREADS 512
#define MERGE_LIST 32   /* a pass's virtual CTAs per CTA, at most: 512 requests of at most 16 each, over 264 CTAs */
constexpr int MVAL = PART ? 8 : 4;           /* partial values per 16-byte column */
constexpr int MCOLS = DIM_CKV / MVAL;        /* columns of a row: 64 or 128 */
constexpr int MGROUPS = MTHREADS / MCOLS;    /* thread groups of a CTA: 8 or 4 */
static_assert(NUM_QO_HEADS % MGROUPS == 0, "a virtual CTA's rows are heads of one request");
static_assert(MERGE_LIST * MERGE_CTAS >= MTHREADS * NUM_QO_HEADS, "a pass's virtual CTAs fit the lists");

/* groups per row for a request of n partials: 0 when the partial kernel wrote it in place */
__device__ __forceinline__ int merge_groups(int n)
{
    if (n == 1)
        return 0;
    int g = 1;
    while (g < MGROUPS && g * MERGE_DEPTH < n)
        g *= 2;
    return g;
}

/* virtual CTA j of request b (its n partials from s0, G groups a row): rows j*MGROUPS/G .. of the request */
__device__ __forceinline__ void merge_rows(int b, int j, int n, int s0, int G, const float *__restrict__ part_o,
                                           const float *__restrict__ part_lse, __nv_bfloat16 *__restrict__ output,
                                           float *__restrict__ lse, float2 *s_ml, float4 (*s_acc)[MVAL / 4])
{
    const int tid = threadIdx.x;
    const int col = tid % MCOLS, grp = (tid / MCOLS) % G;
    const int head = j * (MGROUPS / G) + tid / (MCOLS * G);
    const size_t row = (size_t)b * NUM_QO_HEADS + head;

    float m = NEG_BIG, L = 0.0f, acc[MVAL];
#pragma unroll
    for (int e = 0; e < MVAL; e++)
        acc[e] = 0.0f;
    for (int s = grp; s < n; s += G * MERGE_DEPTH) {
        float ls[MERGE_DEPTH];
        uint4 raw[MERGE_DEPTH];
#pragma unroll
        for (int k = 0; k < MERGE_DEPTH; k++) {
            const int sk = s + G * k;
            const size_t prow = (size_t)(s0 + sk) * NUM_QO_HEADS + head;
            ls[k] = neg_inf();
            raw[k] = make_uint4(0, 0, 0, 0);
            if (sk < n) { /* no load past the request's partials */
                ls[k] = __ldg(part_lse + prow);
                raw[k] = PART ? __ldg(reinterpret_cast<const uint4 *>(reinterpret_cast<const __nv_bfloat16 *>(part_o) + prow * DIM_CKV) + col)
                              : __ldg(reinterpret_cast<const uint4 *>(part_o + prow * DIM_CKV) + col);
            }
        }
        float mx = m;
#pragma unroll
        for (int k = 0; k < MERGE_DEPTH; k++)
            mx = fmaxf(mx, ls[k]);
        const float corr = exp2f(m - mx); /* both finite: NEG_BIG at least */
        m = mx;
        L *= corr;
#pragma unroll
        for (int e = 0; e < MVAL; e++)
            acc[e] *= corr;
#pragma unroll
        for (int k = 0; k < MERGE_DEPTH; k++) {
            const float w = exp2f(ls[k] - m); /* lse -inf (past the request's partials, or an empty one): 0 */
            L += w;
            float x[MVAL];
            if (PART) {
                const __nv_bfloat162 *h2 = reinterpret_cast<const __nv_bfloat162 *>(&raw[k]);
#pragma unroll
                for (int e = 0; e < MVAL / 2; e++) {
                    const float2 f = __bfloat1622float2(h2[e]);
                    x[2 * e] = f.x;
                    x[2 * e + 1] = f.y;
                }
            } else {
                const float *f = reinterpret_cast<const float *>(&raw[k]);
#pragma unroll
                for (int e = 0; e < MVAL; e++)
                    x[e] = f[e];
            }
#pragma unroll
            for (int e = 0; e < MVAL; e++)
                acc[e] = w > 0.0f ? fmaf(w, x[e], acc[e]) : acc[e]; /* a zero weight never meets a NaN */
        }
    }
    if (G > 1) { /* block-uniform: the row's groups meet, halving in log2(G) steps, each thread
                    combining its (m, L, sums) with the group d above it: 16-byte shared loads */
        s_ml[tid] = make_float2(m, L);
#pragma unroll
        for (int e = 0; e < MVAL / 4; e++)
            s_acc[tid][e] = make_float4(acc[4 * e], acc[4 * e + 1], acc[4 * e + 2], acc[4 * e + 3]);
        for (int d = G / 2; d >= 1; d /= 2) {
            __syncthreads();
            if (grp < d) {
                const float2 o = s_ml[tid + d * MCOLS];
                const float mt = fmaxf(m, o.x);
                const float wa = exp2f(m - mt), wb = exp2f(o.x - mt); /* both finite: NEG_BIG at least */
                m = mt;
                L = L * wa + o.y * wb;
#pragma unroll
                for (int e = 0; e < MVAL / 4; e++) {
                    const float4 q = s_acc[tid + d * MCOLS][e];
                    acc[4 * e] = acc[4 * e] * wa + q.x * wb;
                    acc[4 * e + 1] = acc[4 * e + 1] * wa + q.y * wb;
                    acc[4 * e + 2] = acc[4 * e + 2] * wa + q.z * wb;
                    acc[4 * e + 3] = acc[4 * e + 3] * wa + q.w * wb;
                }
                if (d > 1) {
                    s_ml[tid] = make_float2(m, L);
#pragma unroll
                    for (int e = 0; e < MVAL / 4; e++)
                        s_acc[tid][e] = make_float4(acc[4 * e], acc[4 * e + 1], acc[4 * e + 2], acc[4 * e + 3]);
                }
            }
        }
        __syncthreads(); /* shared memory free for the next virtual CTA */
    }
    if (grp == 0) {
        const float inv = L > 0.0f ? 1.0f / L : 0.0f;
        __nv_bfloat162 *out = reinterpret_cast<__nv_bfloat162 *>(output + row * DIM_CKV + col * MVAL);
#pragma unroll
        for (int e = 0; e < MVAL / 2; e++)
            out[e] = __floats2bfloat162_rn(acc[2 * e] * inv, acc[2 * e + 1] * inv);
        if (col == 0)
            lse[row] = L > 0.0f ? m + log2f(L) : neg_inf();
    }
}

/* exclusive scan of v over the CTA; *total: the sum (s_warp: MTHREADS/32 ints, free on entry and exit) */
__device__ __forceinline__ int block_scan(int v, int *s_warp, int *total)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int x = v;
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
        const int y = __shfl_up_sync(FULL_MASK, x, off);
        if (lane >= off)
            x += y;
    }
    if (lane == 31)
        s_warp[warp] = x;
    __syncthreads();
    *total = 0;
    for (int w = 0; w < MTHREADS / 32; w++) {
        if (w < warp)
            x += s_warp[w];
        *total += s_warp[w];
    }
    __syncthreads();
    return x - v;
}

extern "C" __global__ void __launch_bounds__(MTHREADS, 2)
mla_mma_ws_merge(const int *__restrict__ kv_indptr, const float *__restrict__ part_o,
              const float *__restrict__ part_lse, __nv_bfloat16 *__restrict__ output, float *__restrict__ lse,
              int batch_size, int num_kv_indices)
{
    __shared__ float2 s_ml[MTHREADS];              /* each thread's running max and sum */
    __shared__ float4 s_acc[MTHREADS][MVAL / 4];   /* and its sums of the values */
    __shared__ int s_warp[MTHREADS / 32];   /* the scan's warp totals */
    __shared__ int s_work[MERGE_LIST][5];   /* this pass's virtual CTAs: request, index, partials, first, groups */
    const int tid = threadIdx.x;
    const int grid = (int)gridDim.x;
    int done = 0; /* virtual CTAs of the requests before this pass */
    for (int base = 0; base < batch_size; base += MTHREADS) { /* block-uniform */
        const int b = base + tid;
        int n = 1, s0 = 0;
        if (b < batch_size) { /* (chunk and n_slots computed here, not held in registers over the passes) */
            const int chunk = chunk_tokens(num_kv_indices, batch_size);
            const int n_slots = (num_kv_indices + SPLIT * SEGP * batch_size + chunk - 1) / chunk + batch_size; /* the partials the scratch holds */
            n = request_parts(__ldg(kv_indptr + b), __ldg(kv_indptr + b + 1), b, chunk, &s0);
            if (n > 1 && (s0 < 0 || s0 + n > n_slots))
                n = 0; /* inconsistent kv_indptr: never read past the scratch */
        }
        /* no spreading of few rows over more groups: with b16's 32 virtual CTAs spread over the
           grid (fewer partials a thread, the groups meeting in shared memory) the tail grew by
           1-2 us on an H200 */
        const int G = merge_groups(n);
        int total;
        const int first = block_scan(G * NUM_QO_HEADS / MGROUPS, s_warp, &total);
        const int v = G * NUM_QO_HEADS / MGROUPS; /* this request's virtual CTAs */
        /* this CTA's virtual CTAs of the pass: done + k0 + k*grid for k < kn, at most MERGE_LIST */
        const int k0 = ((int)blockIdx.x - done % grid + grid) % grid;
        const int kn = min(total > k0 ? (total - k0 + grid - 1) / grid : 0, MERGE_LIST); /* the header's grid: never clamped */
        for (int k = first + v > k0 ? (max(first - k0, 0) + grid - 1) / grid : kn; k < kn && k0 + k * grid < first + v; k++) {
            s_work[k][0] = b;
            s_work[k][1] = k0 + k * grid - first;
            s_work[k][2] = n;
            s_work[k][3] = s0;
            s_work[k][4] = G;
        }
        __syncthreads();
        if (kn > 0)
            pdl_wait(); /* the partial grid has finished and its stores are visible (at once after the first) */
        for (int k = 0; k < kn; k++) /* block-uniform */
            merge_rows(s_work[k][0], s_work[k][1], s_work[k][2], s_work[k][3], s_work[k][4], part_o, part_lse, output, lse,
                       s_ml, s_acc);
        done += total;
        __syncthreads(); /* s_work free for the next pass */
    }
}
