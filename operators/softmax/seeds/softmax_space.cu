/* ksearch
{ "params": {"TPR": [32, 64, 128, 256, 512, 1024], "RPC": [1, 2, 4, 8, 16], "VEC": [2, 4, 8],
             "CACHE": [0, 1, 2, 4, 8, 16], "PASSES": [1, 2], "CL": [1, 2, 4, 8], "EVICT": [0, 1]},
  "constraints": ["RPC*TPR <= 1024", "RPC*TPR*(CACHE*VEC/2 + 56) <= 65536"],
  "launch": [
    {"kernel": "softmax_space", "grid": ["cdiv(num_rows, RPC)*CL"], "block": ["RPC*TPR"],
     "args": ["x", "y", "num_rows", "row_len"]} ] }
*/
// Softmax design space, one launch (sm_90: clusters).
//
// A CTA of RPC*TPR threads handles RPC rows, a team of TPR threads per row (TPR = 32:
// warp per row, shuffles only; larger teams add a shared-memory step). Each row is cut
// into CL slices, one per CTA of a cluster of CL CTAs: every CTA reduces its slice to
// (max, sum of exp), the cluster exchanges those pairs through distributed shared
// memory, and each CTA writes its slice. So a few long rows (16 x 128000) spread over
// 16*CL SMs in a single launch, with no scratch and no second pass over the grid.
//
// Per slice: a scalar head until x is VEC*2-byte aligned (and y equally misaligned,
// else the slice is done in scalars), a body of VEC-wide loads, a scalar tail; any row
// length and offset work. The first CACHE vectors of each thread stay in registers for
// the write pass; the rest of the slice is read again (from L2 for most sizes).
// PASSES = 1: online (max, sum) in one read, rescaling the sum when the max grows;
// PASSES = 2: the max first, then the sum of exp(x - max) (no rescaling, one more
// reduction and, past the register cache, one more read). EVICT = 1: x is read and y
// written with streaming (evict-first) hints. exp is ex2.approx (relative error
// ~2^-22, as the other softmax seeds).
//
// Params: TPR threads per row, RPC rows per CTA, VEC bf16 per access, CACHE vectors per
// thread in registers, PASSES, CL CTAs per row (cluster size), EVICT. No dynamic
// shared memory. The register cache (CACHE*VEC/2 registers) must fit the block's
// register file with ~56 more per thread: RPC*TPR*(CACHE*VEC/2 + 56) <= 65536, which
// keeps every allowed combination free of spills.
#include <cuda_bf16.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "softmax_space needs sm_90 or newer (thread-block clusters)"
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
#ifndef CACHE
#define CACHE 0
#endif
#ifndef PASSES
#define PASSES 1
#endif
#ifndef CL
#define CL 1
#endif
#ifndef EVICT
#define EVICT 0
#endif

#define THREADS (RPC * TPR)
#define TW (TPR / 32) /* warps per team */
#define L2E 1.4426950408889634f
#define NEG_INF __int_as_float(0xff800000u)

static_assert(TPR % 32 == 0 && TPR >= 32 && TPR <= 1024, "TPR: whole warps");
static_assert(RPC >= 1 && THREADS <= 1024, "RPC*TPR <= 1024");
static_assert(VEC == 2 || VEC == 4 || VEC == 8, "VEC is 2, 4 or 8");
static_assert(CACHE >= 0 && CACHE <= 16, "CACHE in [0, 16]");
static_assert(PASSES == 1 || PASSES == 2, "PASSES is 1 or 2");
static_assert(CL == 1 || CL == 2 || CL == 4 || CL == 8, "CL is 1, 2, 4 or 8 (portable cluster)");
static_assert(EVICT == 0 || EVICT == 1, "EVICT is 0 or 1");

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

/* 2^v with one MUFU.EX2 (max relative error ~2^-22; results below 2^-126 flush to 0) */
static __device__ __forceinline__ float ex2(float v)
{
	float r;
	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
	return r;
}

static __device__ __forceinline__ float bf(unsigned short b) { return __uint_as_float((unsigned int)b << 16); }
static __device__ __forceinline__ unsigned short to_bf(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }

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

/* Merge (m2, s2) into (m, s); s is a sum of exp(v - m); (-inf, 0) is the empty pair. */
static __device__ __forceinline__ void combine(float &m, float &s, float m2, float s2)
{
	const float M = fmaxf(m, m2);
	if (M == NEG_INF)
		return;
	s = s * ex2((m - M) * L2E) + s2 * ex2((m2 - M) * L2E);
	m = M;
}

static __device__ __forceinline__ void add_scalar(float &m, float &s, float v)
{
	if (v > m) {
		s = s * ex2((m - v) * L2E) + 1.0f;
		m = v;
	} else {
		s += ex2((v - m) * L2E);
	}
}

static __device__ __forceinline__ void add_pack(float &m, float &s, const Pack &p)
{
	float cm = bf(p.u[0]);
#pragma unroll
	for (int j = 1; j < VEC; ++j)
		cm = fmaxf(cm, bf(p.u[j]));
	if (cm > m) {
		s *= ex2((m - cm) * L2E);
		m = cm;
	}
	const float ml = m * L2E;
#pragma unroll
	for (int j = 0; j < VEC; ++j)
		s += ex2(fmaf(bf(p.u[j]), L2E, -ml));
}

static __device__ __forceinline__ float pack_max(const Pack &p, float m)
{
#pragma unroll
	for (int j = 0; j < VEC; ++j)
		m = fmaxf(m, bf(p.u[j]));
	return m;
}

static __device__ __forceinline__ float pack_sum(const Pack &p, float ml)
{
	float s = 0.0f;
#pragma unroll
	for (int j = 0; j < VEC; ++j)
		s += ex2(fmaf(bf(p.u[j]), L2E, -ml));
	return s;
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
	unsigned a = (unsigned)__cvta_generic_to_shared(p), r;
	asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
	float v;
	asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(r) : "memory");
	return v;
}
#endif

extern "C" __global__ void CLUSTER_DIMS __launch_bounds__(THREADS, 1)
softmax_space(const __nv_bfloat16 *__restrict__ x, __nv_bfloat16 *__restrict__ y, int num_rows, int row_len)
{
	__shared__ float red_m[RPC][TW], red_s[RPC][TW]; /* warp results of each team */
	__shared__ float cl_m[2][RPC], cl_s[2][RPC];     /* slice results, read by the cluster */

	const int tid = threadIdx.x;
	const int team = tid / TPR, t = tid % TPR, lane = tid & 31, wt = t / 32;
	const int part = CL > 1 ? (int)(blockIdx.x % CL) : 0; /* == the cluster rank (cluster spans x) */
	const int row = (int)(blockIdx.x / CL) * RPC + team;
	const bool valid = row < num_rows && row_len > 0;
	const int len = max(row_len, 0);

	/* this CTA's slice [s0, s0 + n) of the row */
	const int sl = (len + CL - 1) / CL;
	const int s0 = min(part * sl, len);
	const int n = valid ? min(sl, len - s0) : 0;
	const unsigned short *xp = reinterpret_cast<const unsigned short *>(x) + (size_t)(valid ? row : 0) * len + s0;
	unsigned short *yp = reinterpret_cast<unsigned short *>(y) + (size_t)(valid ? row : 0) * len + s0;

	/* head [0, head) scalar, body nv vectors from head, tail [tail, n) scalar */
	const unsigned int bytes = sizeof(raw_t);
	const unsigned int mx = (unsigned int)((unsigned long long)xp & (bytes - 1));
	const unsigned int my = (unsigned int)((unsigned long long)yp & (bytes - 1));
	const int head = min(mx == my ? (int)(((bytes - mx) & (bytes - 1)) >> 1) : n, n);
	const int nv = (n - head) / VEC;
	const int tail = head + nv * VEC;
	const raw_t *xb = reinterpret_cast<const raw_t *>(xp + head);
	raw_t *yb = reinterpret_cast<raw_t *>(yp + head);

	Pack cache[CACHE > 0 ? CACHE : 1];
#pragma unroll
	for (int c = 0; c < CACHE; ++c)
		if (c * TPR + t < nv)
			cache[c].raw = load_x(xb + c * TPR + t);

	/* team reduction (then cluster) of (m, s); every thread of the CTA calls it alike */
	int cl_use = 0;
	auto reduce = [&](float &m, float &s) {
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) {
			const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
			const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
			combine(m, s, m2, s2);
		}
		if (TW > 1) {
			if (lane == 0) {
				red_m[team][wt] = m;
				red_s[team][wt] = s;
			}
			__syncthreads();
			m = NEG_INF;
			s = 0.0f;
#pragma unroll
			for (int w = 0; w < TW; w++)
				combine(m, s, red_m[team][w], red_s[team][w]);
			__syncthreads(); /* red_* free again */
		}
#if CL > 1
		if (t == 0) {
			cl_m[cl_use][team] = m;
			cl_s[cl_use][team] = s;
		}
		cluster_sync();
		m = NEG_INF;
		s = 0.0f;
#pragma unroll
		for (int p = 0; p < CL; p++)
			combine(m, s, dsmem_ld(&cl_m[cl_use][team], p), dsmem_ld(&cl_s[cl_use][team], p));
#endif
		cl_use++;
	};

	float m = NEG_INF, s = 0.0f;
#if PASSES == 1
	for (int i = t; i < head; i += TPR)
		add_scalar(m, s, bf(xp[i]));
	for (int i = tail + t; i < n; i += TPR)
		add_scalar(m, s, bf(xp[i]));
#pragma unroll
	for (int c = 0; c < CACHE; ++c)
		if (c * TPR + t < nv)
			add_pack(m, s, cache[c]);
	for (int k = CACHE * TPR + t; k < nv; k += TPR) {
		Pack p;
		p.raw = load_x(xb + k);
		add_pack(m, s, p);
	}
	reduce(m, s);
#else
	for (int i = t; i < head; i += TPR)
		m = fmaxf(m, bf(xp[i]));
	for (int i = tail + t; i < n; i += TPR)
		m = fmaxf(m, bf(xp[i]));
#pragma unroll
	for (int c = 0; c < CACHE; ++c)
		if (c * TPR + t < nv)
			m = pack_max(cache[c], m);
	for (int k = CACHE * TPR + t; k < nv; k += TPR) {
		Pack p;
		p.raw = load_x(xb + k);
		m = pack_max(p, m);
	}
	{
		float s_unused = m == NEG_INF ? 0.0f : 1.0f; /* a (max, 1) pair: combine keeps the max */
		reduce(m, s_unused);
	}
	{
		const float ml = m * L2E; /* m = -inf only for an empty row, which writes nothing */
		for (int i = t; i < head; i += TPR)
			s += ex2(fmaf(bf(xp[i]), L2E, -ml));
		for (int i = tail + t; i < n; i += TPR)
			s += ex2(fmaf(bf(xp[i]), L2E, -ml));
#pragma unroll
		for (int c = 0; c < CACHE; ++c)
			if (c * TPR + t < nv)
				s += pack_sum(cache[c], ml);
		for (int k = CACHE * TPR + t; k < nv; k += TPR) {
			Pack p;
			p.raw = load_x(xb + k);
			s += pack_sum(p, ml);
		}
		float m_same = (s > 0.0f) ? m : NEG_INF; /* sums all relative to the same max */
		reduce(m_same, s);
	}
#endif
	const float ml = m * L2E, inv = 1.0f / s;

	for (int i = t; i < head; i += TPR)
		yp[i] = to_bf(ex2(fmaf(bf(xp[i]), L2E, -ml)) * inv);
	for (int i = tail + t; i < n; i += TPR)
		yp[i] = to_bf(ex2(fmaf(bf(xp[i]), L2E, -ml)) * inv);
#pragma unroll
	for (int c = 0; c < CACHE; ++c) {
		const int k = c * TPR + t;
		if (k < nv) {
			Pack o;
#pragma unroll
			for (int j = 0; j < VEC; ++j)
				o.u[j] = to_bf(ex2(fmaf(bf(cache[c].u[j]), L2E, -ml)) * inv);
			store_y(yb + k, o.raw);
		}
	}
	for (int k = CACHE * TPR + t; k < nv; k += TPR) {
		Pack p, o;
		p.raw = load_x(xb + k);
#pragma unroll
		for (int j = 0; j < VEC; ++j)
			o.u[j] = to_bf(ex2(fmaf(bf(p.u[j]), L2E, -ml)) * inv);
		store_y(yb + k, o.raw);
	}
#if CL > 1
	cluster_sync(); /* no CTA leaves while another may read its slice results */
#endif
}
