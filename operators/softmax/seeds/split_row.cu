/* ksearch
{ "params": {"CHUNK": [1024, 2048, 4096, 8192], "THREADS": [128, 256, 512]},
  "scratch": {"part_m": ["float32", "num_rows*cdiv(row_len, CHUNK)"],
              "part_s": ["float32", "num_rows*cdiv(row_len, CHUNK)"]},
  "launch": [
    {"kernel": "softmax_split_stats", "grid": ["num_rows*cdiv(row_len, CHUNK)"], "block": ["THREADS"],
     "args": ["x", "part_m", "part_s", "num_rows", "row_len"]},
    {"kernel": "softmax_split_write", "grid": ["num_rows*cdiv(row_len, CHUNK)"], "block": ["THREADS"],
     "args": ["x", "part_m", "part_s", "y", "num_rows", "row_len"]} ] }
*/
// Softmax of long rows, split over several blocks per row: made for few rows
// of vocabulary size (16 x 128000 would give only 16 blocks with one block
// per row).
//
// Launch 1: block b of a row reduces elements [b*CHUNK, (b+1)*CHUNK) to a
// (max, sum of exp(x - max)) pair in part_m/part_s.  Launch 2: each block
// merges all pairs of its row (cdiv(row_len, CHUNK) of them) and writes its
// chunk, reading x a second time (from L2 when the input is small enough).
// A chunk is held in registers (16-byte loads, all issued up front); any row
// length and offset work (scalar head until aligned, scalar tail).
#include <cuda_bf16.h>

#if !defined(CHUNK) || !defined(THREADS)
#error "CHUNK and THREADS must be defined"
#endif
#if THREADS % 32 != 0 || THREADS > 1024
#error "THREADS must be a multiple of 32, at most 1024"
#endif
#if CHUNK % 8 != 0 || CHUNK < 8
#error "CHUNK must be a positive multiple of 8"
#endif

#define VEC 8
#define WARPS (THREADS / 32)
#define PER_THREAD ((CHUNK / VEC + THREADS - 1) / THREADS) /* 16-byte vectors per thread */
#define MIN_BLOCKS (1024 / THREADS) /* ask ptxas for >= 50% occupancy, no more */
#define L2E 1.4426950408889634f
#define NEG_INF __int_as_float(0xff800000u)

union Pack {
	uint4 raw;
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

/* (m, s) over the block, in every thread; red_* must not be in use. */
static __device__ __forceinline__ void block_combine(float &m, float &s, float *red_m, float *red_s)
{
	const int lane = threadIdx.x & 31;
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) {
		const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
		const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
		combine(m, s, m2, s2);
	}
	if (WARPS == 1)
		return;
	if (lane == 0) {
		red_m[threadIdx.x >> 5] = m;
		red_s[threadIdx.x >> 5] = s;
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

/* A chunk: scalar head [0, head), nv 16-byte vectors from head, scalar tail [tail, n). */
struct Span {
	int head, nv, tail;
};

static __device__ __forceinline__ Span make_span(const unsigned short *xs, const unsigned short *ys, int n)
{
	const unsigned int mx = (unsigned int)((unsigned long long)xs & 15ull);
	const unsigned int my = (unsigned int)((unsigned long long)ys & 15ull);
	Span sp;
	sp.head = mx == my ? (int)(((16u - mx) & 15u) >> 1) : n;
	if (sp.head > n)
		sp.head = n;
	sp.nv = (n - sp.head) / VEC;
	sp.tail = sp.head + sp.nv * VEC;
	return sp;
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_split_stats(const __nv_bfloat16 *__restrict__ x, float *__restrict__ part_m,
		    float *__restrict__ part_s, int num_rows, int row_len)
{
	__shared__ float red_m[WARPS], red_s[WARPS];
	if (row_len <= 0)
		return;
	const int nchunks = (row_len + CHUNK - 1) / CHUNK;
	const long long b = blockIdx.x;
	const long long row = b / nchunks;
	const int chunk = (int)(b - row * nchunks);
	if (row >= num_rows)
		return; /* uniform over the block */
	const int start = chunk * CHUNK;
	const int n = min(CHUNK, row_len - start);
	const unsigned short *xs = reinterpret_cast<const unsigned short *>(x) + row * row_len + start;
	const Span sp = make_span(xs, xs, n);
	const uint4 *xb = reinterpret_cast<const uint4 *>(xs + sp.head);
	const int tid = threadIdx.x;

	Pack v[PER_THREAD];
#pragma unroll
	for (int c = 0; c < PER_THREAD; ++c) {
		const int k = c * THREADS + tid;
		if (k < sp.nv)
			v[c].raw = xb[k];
	}
	float m = NEG_INF, s = 0.0f;
	for (int i = tid; i < sp.head; i += THREADS)
		add_scalar(m, s, bf(xs[i]));
	for (int i = sp.tail + tid; i < n; i += THREADS)
		add_scalar(m, s, bf(xs[i]));
#pragma unroll
	for (int c = 0; c < PER_THREAD; ++c)
		if (c * THREADS + tid < sp.nv)
			add_pack(m, s, v[c]);
	block_combine(m, s, red_m, red_s);
	if (tid == 0) {
		part_m[b] = m;
		part_s[b] = s;
	}
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_split_write(const __nv_bfloat16 *__restrict__ x, const float *__restrict__ part_m,
		    const float *__restrict__ part_s, __nv_bfloat16 *__restrict__ y,
		    int num_rows, int row_len)
{
	__shared__ float red_m[WARPS], red_s[WARPS];
	if (row_len <= 0)
		return;
	const int nchunks = (row_len + CHUNK - 1) / CHUNK;
	const long long b = blockIdx.x;
	const long long row = b / nchunks;
	const int chunk = (int)(b - row * nchunks);
	if (row >= num_rows)
		return; /* uniform over the block */
	const int start = chunk * CHUNK;
	const int n = min(CHUNK, row_len - start);
	const unsigned short *xs = reinterpret_cast<const unsigned short *>(x) + row * row_len + start;
	unsigned short *ys = reinterpret_cast<unsigned short *>(y) + row * row_len + start;
	const Span sp = make_span(xs, ys, n);
	const uint4 *xb = reinterpret_cast<const uint4 *>(xs + sp.head);
	uint4 *yb = reinterpret_cast<uint4 *>(ys + sp.head);
	const int tid = threadIdx.x;

	/* issue the chunk's loads first; merging the row's pairs hides their latency */
	Pack v[PER_THREAD];
#pragma unroll
	for (int c = 0; c < PER_THREAD; ++c) {
		const int k = c * THREADS + tid;
		if (k < sp.nv)
			v[c].raw = xb[k];
	}
	float m = NEG_INF, s = 0.0f;
	const float *pm = part_m + row * nchunks, *ps = part_s + row * nchunks;
	for (int j = tid; j < nchunks; j += THREADS)
		combine(m, s, pm[j], ps[j]);
	block_combine(m, s, red_m, red_s);
	const float ml = m * L2E, inv = 1.0f / s;

	for (int i = tid; i < sp.head; i += THREADS)
		ys[i] = to_bf(ex2(fmaf(bf(xs[i]), L2E, -ml)) * inv);
	for (int i = sp.tail + tid; i < n; i += THREADS)
		ys[i] = to_bf(ex2(fmaf(bf(xs[i]), L2E, -ml)) * inv);
#pragma unroll
	for (int c = 0; c < PER_THREAD; ++c) {
		const int k = c * THREADS + tid;
		if (k < sp.nv) {
			Pack o;
#pragma unroll
			for (int j = 0; j < VEC; ++j)
				o.u[j] = to_bf(ex2(fmaf(bf(v[c].u[j]), L2E, -ml)) * inv);
			yb[k] = o.raw;
		}
	}
}
