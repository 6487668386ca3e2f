/* ksearch
{ "params": {"TPR": [32, 64, 128, 256, 512, 1024], "RPC": [1, 2, 4, 8], "VEC": [2, 4, 8], "CL": [1, 2, 4, 8],
             "LOAD": [0, 1, 2], "ITER": [1, 2, 4], "WCACHE": [0, 1], "EVICT": [0, 1]},
  "constraints": ["RPC*TPR <= 1024", "TPR*VEC*CL <= 4096"],
  "launch": [
    {"kernel": "rmsnorm_space", "grid": ["cdiv(num_rows, RPC*ITER)*CL"], "block": ["RPC*TPR"],
     "smem": "(LOAD > 0)*(1 + (ITER > 1))*RPC*8192/CL + WCACHE*8192/CL",
     "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]} ] }
*/
// RMSNorm design space (sm_90: clusters, cp.async.bulk, mbarrier transaction counts).
//
// A CTA of RPC*TPR threads normalises RPC rows at a time, TPR threads ("a team") per
// row: TPR = 32 is warp-per-row (shuffles only), larger teams add one __syncthreads
// and a shared-memory step. The row is cut into CL slices, one per CTA of a cluster
// of CL CTAs (CL = 1: no cluster): each CTA reduces its slice's sum of squares, the
// cluster exchanges the RPC partial sums through distributed shared memory (one
// cluster barrier per row group) and each CTA writes its slice, so a few rows still
// spread over many SMs. A CTA handles ITER consecutive row groups.
//
// Load paths (LOAD): 0 - VEC-wide loads straight into registers (the slice stays in
// registers between the two uses); 1 - 16-byte cp.async of the group's slices into
// shared memory; 2 - one TMA bulk copy per row slice (8192/CL bytes) completing on an
// mbarrier. With ITER > 1 the staged paths double-buffer: group i+1 is in flight while
// group i is reduced and written. WCACHE = 1 stages the weight slice in shared memory
// once per CTA (else it is read through L1 per use). EVICT = 1 reads x and writes y
// with streaming (evict-first) hints; x is read once and y is not read again.
//
// fp32 math as the reference: sum of squares in fp32, one rounding to bf16 at the
// end. Rows of another hidden size, or misaligned pointers, take a scalar path (same
// team and cluster structure), so every shape stays correct.
//
// Params: TPR threads per row, RPC rows per CTA, VEC bf16 per access (4/8/16 bytes),
// CL CTAs per row (cluster size), LOAD (above), ITER row groups per CTA, WCACHE,
// EVICT. Shared memory (dynamic): staged rows (LOAD > 0), one or two buffers of
// RPC*8192/CL bytes, plus the weight slice (8192/CL bytes) when WCACHE = 1.
#include <cuda_bf16.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "rmsnorm_space needs sm_90 or newer (clusters, cp.async.bulk, mbarrier transaction counts)"
#endif

#ifndef TPR
#define TPR 32
#endif
#ifndef RPC
#define RPC 1
#endif
#ifndef VEC
#define VEC 2
#endif
#ifndef CL
#define CL 1
#endif
#ifndef LOAD
#define LOAD 0
#endif
#ifndef ITER
#define ITER 1
#endif
#ifndef WCACHE
#define WCACHE 0
#endif
#ifndef EVICT
#define EVICT 0
#endif

#define HID 4096                 /* the op's hidden size (a const axis) */
#define HS (HID / CL)            /* elements of a row slice */
#define THREADS (RPC * TPR)
#define TW (TPR / 32)            /* warps per team */
#define NV (HS / (TPR * VEC))    /* vectors per thread per slice (fast path) */
#define NBUF (ITER > 1 ? 2 : 1)
#define SLICE_BYTES (HS * 2)

static_assert(TPR % 32 == 0 && TPR >= 32 && TPR <= 1024, "TPR: whole warps");
static_assert(RPC >= 1 && THREADS <= 1024, "RPC*TPR <= 1024");
static_assert(VEC == 2 || VEC == 4 || VEC == 8, "VEC is 2, 4 or 8");
static_assert(CL == 1 || CL == 2 || CL == 4 || CL == 8, "CL is 1, 2, 4 or 8 (portable cluster)");
static_assert(LOAD >= 0 && LOAD <= 2, "LOAD is 0, 1 or 2");
static_assert(ITER >= 1 && (WCACHE == 0 || WCACHE == 1) && (EVICT == 0 || EVICT == 1), "ITER, WCACHE, EVICT");
static_assert(NV >= 1 && HS % (TPR * VEC) == 0, "TPR*VEC*CL <= 4096: every thread has whole vectors");

constexpr int BUF_BYTES = LOAD > 0 ? NBUF * RPC * SLICE_BYTES : 0;
constexpr int SMEM_BYTES = BUF_BYTES + WCACHE * SLICE_BYTES;
static_assert(SMEM_BYTES == (LOAD > 0) * (1 + (ITER > 1)) * RPC * 8192 / CL + WCACHE * 8192 / CL,
              "keep the smem expression in the header in sync");

#if CL > 1
#define CLUSTER_DIMS __cluster_dims__(CL, 1, 1)
#else
#define CLUSTER_DIMS
#endif

template <int N> struct RawOf;
template <> struct RawOf<2> { typedef unsigned int T; };
template <> struct RawOf<4> { typedef uint2 T; };
template <> struct RawOf<8> { typedef uint4 T; };
typedef RawOf<VEC>::T raw_t;

union Pack {
	raw_t raw;
	unsigned short u[VEC];
};

typedef unsigned long long u64;

static __device__ __forceinline__ float bf(unsigned short b) { return __uint_as_float((unsigned int)b << 16); }
static __device__ __forceinline__ unsigned short to_bf(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
static __device__ __forceinline__ unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

static __device__ __forceinline__ raw_t load_x(const raw_t *p)
{
#if EVICT
	return __ldcs(p);
#else
	return __ldg(p);
#endif
}

static __device__ __forceinline__ void store_y(raw_t *p, raw_t v)
{
#if EVICT
	__stcs(p, v);
#else
	*p = v;
#endif
}

static __device__ __forceinline__ void cp_async16(unsigned dst, const void *src, u64 policy)
{
#if EVICT
	asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "l"(policy)
		     : "memory");
#else
	(void)policy;
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
#endif
}

static __device__ __forceinline__ void bulk_copy(unsigned dst, const void *src, unsigned bytes, unsigned bar, u64 policy)
{
#if EVICT
	asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, "
		     "[%3], %4;\n" ::"r"(dst),
		     "l"(src), "r"(bytes), "r"(bar), "l"(policy)
		     : "memory");
#else
	(void)policy;
	asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
		     "l"(src), "r"(bytes), "r"(bar)
		     : "memory");
#endif
}

static __device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity)
{
	asm volatile("{\n"
		     ".reg .pred P1;\n"
		     "LAB_WAIT:\n"
		     "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
		     "@P1 bra.uni DONE;\n"
		     "bra.uni LAB_WAIT;\n"
		     "DONE:\n"
		     "}\n" ::"r"(bar),
		     "r"(parity)
		     : "memory");
}

static __device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

#if CL > 1
static __device__ __forceinline__ void cluster_sync()
{
	asm volatile("barrier.cluster.arrive.release.aligned;\n"
		     "barrier.cluster.wait.acquire.aligned;\n" ::
			     : "memory");
}

static __device__ __forceinline__ float dsmem_ld(const float *p, int rank)
{
	unsigned a, r;
	a = smem_addr(p);
	asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
	float v;
	asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(r) : "memory");
	return v;
}
#endif

extern "C" __global__ void CLUSTER_DIMS __launch_bounds__(THREADS, 1)
rmsnorm_space(const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ weight, float eps,
	      __nv_bfloat16 *__restrict__ y, int num_rows, int hidden)
{
	extern __shared__ __align__(128) unsigned char smem_raw[];
	__shared__ float red[RPC][TW];         /* warp partial sums of each team */
	__shared__ float clus[2][RPC];         /* slice sums, read by the cluster (two parities) */
	__shared__ __align__(8) unsigned long long bars[2];

	const int tid = threadIdx.x;
	const int team = tid / TPR, t = tid % TPR, lane = tid & 31, wt = t / 32;
	const int part = CL > 1 ? (int)(blockIdx.x % CL) : 0; /* == the cluster rank (cluster spans x) */
	const int group0 = (int)(blockIdx.x / CL) * ITER;    /* first row group of this cluster */
	const unsigned short *xs = reinterpret_cast<const unsigned short *>(x);
	const unsigned short *ws = reinterpret_cast<const unsigned short *>(weight);
	unsigned short *ys = reinterpret_cast<unsigned short *>(y);

	/* fast path: the op's hidden size and 16-byte aligned rows (block-uniform) */
	const bool fast = hidden == HID &&
			  ((reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y) |
			    reinterpret_cast<unsigned long long>(weight)) & 15ull) == 0;
	/* the slice [s0, s1) of a row this CTA owns (any hidden) */
	const int sl = fast ? HS : (max(hidden, 0) + CL - 1) / CL;
	const int s0 = min(part * sl, max(hidden, 0)), s1 = min(s0 + sl, max(hidden, 0));

	u64 policy = 0ull;
#if EVICT && LOAD > 0
	asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
#endif
	unsigned short *const buf = reinterpret_cast<unsigned short *>(smem_raw);               /* [NBUF][RPC][HS] */
	unsigned short *const wsm = reinterpret_cast<unsigned short *>(smem_raw + BUF_BYTES); /* [HS] */
	(void)buf, (void)wsm, (void)policy;

#if LOAD == 2
	if (tid == 0) {
		for (int i = 0; i < NBUF; i++)
			asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(&bars[i])) : "memory");
		asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
	}
#endif
#if WCACHE
	if (fast) {
		for (int i = tid; i < HS / 8; i += THREADS)
			reinterpret_cast<uint4 *>(wsm)[i] = __ldg(reinterpret_cast<const uint4 *>(ws + s0) + i);
	}
#endif
	__syncthreads();

#if LOAD > 0
	/* stage row group i (ITER-relative) into buffer i % NBUF (fast path only) */
	auto stage = [&](int i) {
		if (i >= ITER || !fast)
			return;
		const int rbase = (group0 + i) * RPC;
		unsigned short *bb = buf + (i % NBUF) * RPC * HS;
#if LOAD == 1
		for (int k = tid; k < RPC * (HS / 8); k += THREADS) {
			const int rr = k / (HS / 8), piece = k % (HS / 8);
			if (rbase + rr < num_rows)
				cp_async16(smem_addr(bb + rr * HS + piece * 8), xs + (size_t)(rbase + rr) * HID + s0 + piece * 8,
					   policy);
		}
		asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
		const unsigned bar = smem_addr(&bars[i % NBUF]);
		if (tid == 0) {
			const int nr = max(0, min(RPC, num_rows - rbase));
			asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
				     "r"(nr * SLICE_BYTES)
				     : "memory");
		}
		if (tid < RPC && rbase + tid < num_rows)
			bulk_copy(smem_addr(bb + tid * HS), xs + (size_t)(rbase + tid) * HID + s0, SLICE_BYTES, bar, policy);
#endif
	};
	stage(0);
#endif

	for (int it = 0; it < ITER; it++) {
		const int row = (group0 + it) * RPC + team;
		const bool valid = row < num_rows;
		const unsigned short *xr = xs + (size_t)(valid ? row : 0) * (size_t)max(hidden, 0);
		unsigned short *yr = ys + (size_t)(valid ? row : 0) * (size_t)max(hidden, 0);
		float ss = 0.0f;
		Pack v[NV];

		if (fast) {
#if LOAD == 0
#pragma unroll
			for (int c = 0; c < NV; c++)
				if (valid)
					v[c].raw = load_x(reinterpret_cast<const raw_t *>(xr + s0) + c * TPR + t);
#else
#if LOAD == 1
			asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#else
			if ((group0 + it) * RPC < num_rows)
				mbar_wait(smem_addr(&bars[it % NBUF]), (unsigned)((it / NBUF) & 1));
#endif
			__syncthreads(); /* group it staged; everyone is done with buffer (it+1) % NBUF */
			stage(it + 1);
			const unsigned short *bb = buf + (it % NBUF) * RPC * HS + team * HS;
#pragma unroll
			for (int c = 0; c < NV; c++)
				if (valid)
					v[c].raw = reinterpret_cast<const raw_t *>(bb)[c * TPR + t];
#endif
#pragma unroll
			for (int c = 0; c < NV; c++)
				if (valid) {
#pragma unroll
					for (int j = 0; j < VEC; j++) {
						const float f = bf(v[c].u[j]);
						ss = fmaf(f, f, ss);
					}
				}
		} else if (valid) {
			for (int i = s0 + t; i < s1; i += TPR) {
				const float f = bf(xr[i]);
				ss = fmaf(f, f, ss);
			}
		}

		/* the team's sum, then the cluster's */
		ss = warp_sum(ss);
		if (TW > 1) {
			if (lane == 0)
				red[team][wt] = ss;
			__syncthreads();
			ss = 0.0f;
#pragma unroll
			for (int w = 0; w < TW; w++)
				ss += red[team][w];
		}
#if CL > 1
		if (t == 0)
			clus[it & 1][team] = ss;
		cluster_sync(); /* all slice sums of the group are in place */
		ss = 0.0f;
#pragma unroll
		for (int p = 0; p < CL; p++)
			ss += dsmem_ld(&clus[it & 1][team], p);
#endif
		if (TW > 1)
			__syncthreads(); /* red is free for the next group */
		const float inv = rsqrtf(ss / (float)max(hidden, 1) + eps);

		if (fast) {
			if (valid) {
#pragma unroll
				for (int c = 0; c < NV; c++) {
					const int e = (c * TPR + t) * VEC; /* slice-relative element */
					Pack wv, o;
#if WCACHE
					wv.raw = *reinterpret_cast<const raw_t *>(wsm + e);
#else
					wv.raw = __ldg(reinterpret_cast<const raw_t *>(ws + s0 + e));
#endif
#pragma unroll
					for (int j = 0; j < VEC; j++)
						o.u[j] = to_bf((bf(v[c].u[j]) * inv) * bf(wv.u[j]));
					store_y(reinterpret_cast<raw_t *>(yr + s0 + e), o.raw);
				}
			}
		} else if (valid) {
			for (int i = s0 + t; i < s1; i += TPR)
				yr[i] = to_bf((bf(xr[i]) * inv) * bf(ws[i]));
		}
	}
#if CL > 1
	cluster_sync(); /* no CTA leaves while another may read its slice sums */
#endif
}
