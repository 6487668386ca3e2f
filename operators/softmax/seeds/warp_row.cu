/* ksearch
{ "params": {"ROWS_PER_BLOCK": [1, 2, 4, 8], "VEC": [2, 4, 8], "CACHE": [1, 4, 16]},
  "launch": [
    {"kernel": "softmax_warp_row", "grid": ["cdiv(num_rows, ROWS_PER_BLOCK)"],
     "block": ["ROWS_PER_BLOCK*32"], "args": ["x", "y", "num_rows", "row_len"]} ] }
*/
// Softmax, one warp per row, ROWS_PER_BLOCK rows per block: made for short
// and medium rows (up to 32*VEC*CACHE elements stay in registers, so x is
// read once), no shared memory and no __syncthreads; the (max, sum) pair is
// merged with five rounds of shuffles.  Longer rows stay correct: the part
// past the register cache is re-read.  Any row length and offset work: a
// scalar head until x is VEC*2-byte aligned, VEC-wide body, scalar tail.
#include <cuda_bf16.h>

#if !defined(ROWS_PER_BLOCK) || !defined(VEC) || !defined(CACHE)
#error "ROWS_PER_BLOCK, VEC and CACHE must be defined"
#endif
#if ROWS_PER_BLOCK < 1 || ROWS_PER_BLOCK > 32
#error "ROWS_PER_BLOCK must be in 1..32"
#endif
#if VEC != 2 && VEC != 4 && VEC != 8
#error "VEC must be 2, 4 or 8"
#endif
#if CACHE < 1
#error "CACHE must be >= 1"
#endif

#define THREADS (ROWS_PER_BLOCK * 32)
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

static __device__ __forceinline__ void write_pack(raw_t *dst, const Pack &p, float ml, float inv)
{
	Pack o;
#pragma unroll
	for (int j = 0; j < VEC; ++j)
		o.u[j] = to_bf(ex2(fmaf(bf(p.u[j]), L2E, -ml)) * inv);
	*dst = o.raw;
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
softmax_warp_row(const __nv_bfloat16 *__restrict__ x, __nv_bfloat16 *__restrict__ y,
		 int num_rows, int row_len)
{
	const int lane = threadIdx.x & 31;
	const long long row = (long long)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
	if (row >= num_rows || row_len <= 0)
		return; /* uniform over the warp; no block-level synchronisation below */
	const unsigned short *xr = reinterpret_cast<const unsigned short *>(x) + row * row_len;
	unsigned short *yr = reinterpret_cast<unsigned short *>(y) + row * row_len;

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

	Pack cache[CACHE];
#pragma unroll
	for (int c = 0; c < CACHE; ++c) {
		const int k = c * 32 + lane;
		if (k < nv)
			cache[c].raw = xb[k];
	}
	float m = NEG_INF, s = 0.0f;
	for (int i = lane; i < head; i += 32)
		add_scalar(m, s, bf(xr[i]));
	for (int i = tail + lane; i < row_len; i += 32)
		add_scalar(m, s, bf(xr[i]));
#pragma unroll
	for (int c = 0; c < CACHE; ++c)
		if (c * 32 + lane < nv)
			add_pack(m, s, cache[c]);
	/* ksearch:unroll */
	for (int k = CACHE * 32 + lane; k < nv; k += 32) {
		Pack p;
		p.raw = xb[k];
		add_pack(m, s, p);
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) {
		const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
		const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
		combine(m, s, m2, s2);
	}
	const float ml = m * L2E, inv = 1.0f / s;

	for (int i = lane; i < head; i += 32)
		yr[i] = to_bf(ex2(fmaf(bf(xr[i]), L2E, -ml)) * inv);
	for (int i = tail + lane; i < row_len; i += 32)
		yr[i] = to_bf(ex2(fmaf(bf(xr[i]), L2E, -ml)) * inv);
#pragma unroll
	for (int c = 0; c < CACHE; ++c) {
		const int k = c * 32 + lane;
		if (k < nv)
			write_pack(yb + k, cache[c], ml, inv);
	}
	/* ksearch:unroll */
	for (int k = CACHE * 32 + lane; k < nv; k += 32) {
		Pack p;
		p.raw = xb[k];
		write_pack(yb + k, p, ml, inv);
	}
}
