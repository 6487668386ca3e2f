/* ksearch
{ "params": {"THREADS": [128, 256, 512, 1024], "VEC": [2, 4, 8], "CACHE": [0, 2, 8]},
  "launch": [
    {"kernel": "softmax_block_row", "grid": ["num_rows"], "block": ["THREADS"],
     "args": ["x", "y", "num_rows", "row_len"]} ] }
*/
// Softmax, one block per row, online (max, sum) in a single read.
//
// The row is split into a scalar head (until x is aligned to VEC*2 bytes), a
// body of VEC-wide loads and a scalar tail, so any row length and any row
// offset work.  Each thread folds its elements into a running (max, sum of
// exp(x - max)) pair; the pairs are merged with warp shuffles and once across
// warps through shared memory.  The first CACHE vectors of each thread stay in
// registers for the write pass (CACHE = 0: the write pass re-reads x, which is
// usually still in L2); the rest of a long row is re-read.
#include <cuda_bf16.h>

#if !defined(THREADS) || !defined(VEC) || !defined(CACHE)
#error "THREADS, VEC and CACHE must be defined"
#endif
#if THREADS % 32 != 0 || THREADS > 1024
#error "THREADS must be a multiple of 32, at most 1024"
#endif
#if VEC != 2 && VEC != 4 && VEC != 8
#error "VEC must be 2, 4 or 8"
#endif
#if CACHE < 0
#error "CACHE must be >= 0"
#endif

#define WARPS (THREADS / 32)
#define MIN_BLOCKS (1024 / THREADS) /* ask ptxas for >= 50% occupancy, no more (<= 64 registers) */
#define L2E 1.4426950408889634f
#define NEG_INF __int_as_float(0xff800000u)

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

/* Merge (m2, s2) into (m, s); s is a sum of exp(v - m). */
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

static __device__ __forceinline__ void write_pack(unsigned short *dst, const Pack &p, float ml, float inv)
{
	Pack o;
#pragma unroll
	for (int j = 0; j < VEC; ++j)
		o.u[j] = to_bf(ex2(fmaf(bf(p.u[j]), L2E, -ml)) * inv);
	*reinterpret_cast<raw_t *>(dst) = o.raw;
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_block_row(const __nv_bfloat16 *__restrict__ x, __nv_bfloat16 *__restrict__ y,
		  int num_rows, int row_len)
{
	__shared__ float red_m[WARPS], red_s[WARPS];
	const int row = blockIdx.x;
	if (row >= num_rows || row_len <= 0)
		return; /* uniform over the block */
	const int tid = threadIdx.x, lane = tid & 31;
	const unsigned short *xr = reinterpret_cast<const unsigned short *>(x) + (long long)row * row_len;
	unsigned short *yr = reinterpret_cast<unsigned short *>(y) + (long long)row * row_len;

	/* head [0, head) scalar, body nv vectors from head, tail [tail, row_len) scalar */
	const unsigned int bytes = sizeof(raw_t);
	const unsigned int mx = (unsigned int)((unsigned long long)xr & (bytes - 1));
	const unsigned int my = (unsigned int)((unsigned long long)yr & (bytes - 1));
	int head = mx == my ? (int)(((bytes - mx) & (bytes - 1)) >> 1) : row_len;
	if (head > row_len)
		head = row_len;
	const int nv = (row_len - head) / VEC;
	const int tail = head + nv * VEC;
	const raw_t *xb = reinterpret_cast<const raw_t *>(xr + head);
	raw_t *yb = reinterpret_cast<raw_t *>(yr + head);

	Pack cache[CACHE > 0 ? CACHE : 1];
#pragma unroll
	for (int c = 0; c < CACHE; ++c) {
		const int k = c * THREADS + tid;
		if (k < nv)
			cache[c].raw = xb[k];
	}
	float m = NEG_INF, s = 0.0f;
	for (int i = tid; i < head; i += THREADS)
		add_scalar(m, s, bf(xr[i]));
	for (int i = tail + tid; i < row_len; i += THREADS)
		add_scalar(m, s, bf(xr[i]));
#pragma unroll
	for (int c = 0; c < CACHE; ++c)
		if (c * THREADS + tid < nv)
			add_pack(m, s, cache[c]);
	/* ksearch:unroll */
	for (int k = CACHE * THREADS + tid; k < nv; k += THREADS) {
		Pack p;
		p.raw = xb[k];
		add_pack(m, s, p);
	}

	/* (m, s) over the block */
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) {
		const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
		const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
		combine(m, s, m2, s2);
	}
	if (WARPS > 1) {
		if (lane == 0) {
			red_m[tid >> 5] = m;
			red_s[tid >> 5] = s;
		}
		__syncthreads();
		m = lane < WARPS ? red_m[lane] : NEG_INF;
		s = lane < WARPS ? red_s[lane] : 0.0f;
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) {
			const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
			const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
			combine(m, s, m2, s2);
		}
	}
	const float ml = m * L2E, inv = 1.0f / s;

	for (int i = tid; i < head; i += THREADS)
		yr[i] = to_bf(ex2(fmaf(bf(xr[i]), L2E, -ml)) * inv);
	for (int i = tail + tid; i < row_len; i += THREADS)
		yr[i] = to_bf(ex2(fmaf(bf(xr[i]), L2E, -ml)) * inv);
#pragma unroll
	for (int c = 0; c < CACHE; ++c) {
		const int k = c * THREADS + tid;
		if (k < nv)
			write_pack(reinterpret_cast<unsigned short *>(yb + k), cache[c], ml, inv);
	}
	/* ksearch:unroll */
	for (int k = CACHE * THREADS + tid; k < nv; k += THREADS) {
		Pack p;
		p.raw = xb[k];
		write_pack(reinterpret_cast<unsigned short *>(yb + k), p, ml, inv);
	}
}
