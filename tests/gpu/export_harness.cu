/*
 * export_harness.cu - runs a kernel exported by `ksearch export-best` the
 * way a user would: through its header and launcher only, with the CUDA
 * runtime, and checks it against the operator's reference kernel on the
 * check workloads.  Nothing of ksearch is linked.  Covers gqa, mla_decode and rmsnorm.
 *
 * Build (tests/gpu/t0210-export-run.sh does it), with the export named
 * ks_export in EXPORT_DIR:
 *   nvcc -std=c++17 -arch=sm_90a -DKS_OP_GQA -I operators/gqa -I EXPORT_DIR \
 *        tests/gpu/export_harness.cu EXPORT_DIR/ks_export.cu -o harness
 * (-DKS_OP_MLA_DECODE and -I operators/mla_decode for mla_decode, -DKS_OP_RMSNORM
 * and -I operators/rmsnorm for rmsnorm; the -I of the operator's folder is where
 * "reference.cu" comes from.)
 *
 * Run: harness WORKLOADS, a file of lines
 *   tol OUTPUT ATOL RTOL                       one per output of the op
 *   gqa, mla_decode: ID batch_size num_kv_indices num_pages [LENGTH ...]
 *   rmsnorm: ID num_rows X_MEAN X_STD            (X_STD 0: every x is X_MEAN)
 * For each workload and two input sets: the reference runs into its own
 * buffers; the export runs into outputs and a workspace filled with NaN
 * bytes, on its own stream; every output element must satisfy
 * |out - ref| <= atol + rtol * |ref| and be finite where the reference is;
 * the inputs must be unchanged.  A NULL or short workspace must be refused
 * with cudaErrorInvalidValue.  Prints one line per check and "all ok" at
 * the end; exits 1 at the first failure.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "ks_export.h"

#if defined(KS_OP_GQA)
#define REF_WARPS 4		/* the reference's first params: 4 warps, the 128 threads launched below */
#include "reference.cu" /* gqa_decode_reference */
#elif defined(KS_OP_MLA_DECODE)
#define REF_WARPS 4
#include "reference.cu" /* mla_decode_reference */
#elif defined(KS_OP_RMSNORM)
#include "reference.cu" /* rmsnorm_reference */
#else
#error "build with -DKS_OP_GQA, -DKS_OP_MLA_DECODE or -DKS_OP_RMSNORM"
#endif

#define CHECK(call)                                                                                \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "FAIL: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,        \
				cudaGetErrorString(e_));                                           \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* Deterministic inputs: splitmix64, and normal values by Box-Muller. */
struct rng {
	uint64_t state;
	uint64_t next()
	{
		uint64_t z = (state += 0x9e3779b97f4a7c15ull);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		return z ^ (z >> 31);
	}
	double uniform() { return (double)(next() >> 11) * (1.0 / 9007199254740992.0); }
	double normal(double mean, double std)
	{
		double u = uniform(), v = uniform();
		return mean + std * sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
	}
	uint64_t below(uint64_t n) { return next() % n; }
};

struct tolerance {
	char name[64];
	double atol, rtol;
};

static struct tolerance tols[8];
static int n_tols;

static const struct tolerance *tol_of(const char *name)
{
	for (int i = 0; i < n_tols; i++)
		if (!strcmp(tols[i].name, name))
			return &tols[i];
	fprintf(stderr, "FAIL: no tolerance line for output %s\n", name);
	exit(1);
}

/* A device copy of host data; the caller cudaFree()s it. */
static void *upload(const void *host, size_t bytes)
{
	void *dev = NULL;

	CHECK(cudaMalloc(&dev, bytes ? bytes : 16));
	if (bytes)
		CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
	return dev;
}

/* Output buffers filled with NaN bytes, so that an element never written fails. */
static void *poisoned(size_t bytes)
{
	void *dev = NULL;

	CHECK(cudaMalloc(&dev, bytes ? bytes : 16));
	CHECK(cudaMemset(dev, 0xff, bytes ? bytes : 16));
	return dev;
}

static void download(void *host, const void *dev, size_t bytes)
{
	CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
}

/* The input's device copy still holds the bytes it was given. */
static void check_unchanged(const char *what, const char *name, const void *host, const void *dev, size_t bytes)
{
	void *now = malloc(bytes ? bytes : 1);

	download(now, dev, bytes);
	if (memcmp(now, host, bytes)) {
		printf("FAIL %s: the exported kernel wrote into its input %s\n", what, name);
		exit(1);
	}
	free(now);
}

inline float to_float(const __nv_bfloat16 v) { return __bfloat162float(v); }
inline float to_float(const float v) { return v; }

/* Compare n elements of an output with the reference's; prints and exits on a mismatch. */
template <typename T>
static void compare(const char *what, const char *name, const T *got, const T *ref, size_t n)
{
	const struct tolerance *tol = tol_of(name);
	double worst = 0;

	for (size_t i = 0; i < n; i++) {
		double g = to_float(got[i]), r = to_float(ref[i]);
		int same_inf = isinf(g) && isinf(r) && (g > 0) == (r > 0);

		if (same_inf)
			continue;
		if (!isfinite(g) || fabs(g - r) > tol->atol + tol->rtol * fabs(r)) {
			printf("FAIL %s: %s[%zu] = %.6g, the reference has %.6g (atol %g, rtol %g)\n", what, name, i, g,
			       r, tol->atol, tol->rtol);
			exit(1);
		}
		if (fabs(g - r) > worst)
			worst = fabs(g - r);
	}
	printf("  %-8s %zu elements, largest difference %.3g\n", name, n, worst);
}

/* The workspace the export asks for, poisoned; NULL when it needs none. */
static void *workspace_for(size_t bytes)
{
	return bytes ? poisoned(bytes) : NULL;
}

#if defined(KS_OP_GQA)

static const int HQ = 32, HKV = 4, D = 128;

struct workload {
	char id[64];
	int batch, tokens, pages;
	int lengths[64];
	int n_lengths;
};

static int parse_workload(const char *line, struct workload *w)
{
	int used = 0, n;

	memset(w, 0, sizeof(*w));
	if (sscanf(line, "%63s %d %d %d%n", w->id, &w->batch, &w->tokens, &w->pages, &used) != 4)
		return -1;
	line += used;
	while (w->n_lengths < 64 && sscanf(line, "%d%n", &w->lengths[w->n_lengths], &n) == 1) {
		w->n_lengths++;
		line += n;
	}
	return 0;
}

static void run_workload(const struct workload *w, uint64_t seed)
{
	char what[128];
	struct rng rng = { seed };
	const int B = w->batch, N = w->tokens, P = w->pages;
	const size_t nq = (size_t)B * HQ * D, nkv = (size_t)P * HKV * D, nlse = (size_t)B * HQ;
	__nv_bfloat16 *q = (__nv_bfloat16 *)malloc(nq * 2), *k = (__nv_bfloat16 *)malloc(nkv * 2);
	__nv_bfloat16 *v = (__nv_bfloat16 *)malloc(nkv * 2);
	int32_t *indptr = (int32_t *)malloc((B + 1) * 4), *indices = (int32_t *)malloc((size_t)N * 4 + 4);
	int32_t *pool = (int32_t *)malloc((size_t)P * 4);
	__nv_bfloat16 *out = (__nv_bfloat16 *)malloc(nq * 2), *ref_out = (__nv_bfloat16 *)malloc(nq * 2);
	float *lse = (float *)malloc(nlse * 4), *ref_lse = (float *)malloc(nlse * 4);
	const float sm_scale = 0.08838834764831845f;

	snprintf(what, sizeof(what), "%s (seed %llu)", w->id, (unsigned long long)seed);
	for (size_t i = 0; i < nq; i++)
		q[i] = __float2bfloat16((float)rng.normal(0, 1));
	for (size_t i = 0; i < nkv; i++) {
		k[i] = __float2bfloat16((float)rng.normal(0, 1));
		v[i] = __float2bfloat16((float)rng.normal(0, 1));
	}
	/* lengths: given, else 1 each plus the rest of the tokens at random */
	{
		int *len = (int *)calloc(B, sizeof(int));

		for (int b = 0; b < B; b++)
			len[b] = w->n_lengths ? w->lengths[b] : 1;
		for (int t = w->n_lengths ? N : B; t < N; t++)
			len[rng.below(B)]++;
		indptr[0] = 0;
		for (int b = 0; b < B; b++)
			indptr[b + 1] = indptr[b] + len[b];
		free(len);
	}
	/* pages drawn without replacement from the pool, in random order */
	for (int p = 0; p < P; p++)
		pool[p] = p;
	for (int t = 0; t < N; t++) {
		int j = t + (int)rng.below(P - t);
		int32_t tmp = pool[t];

		pool[t] = pool[j];
		pool[j] = tmp;
		indices[t] = pool[t];
	}

	void *d_q = upload(q, nq * 2), *d_k = upload(k, nkv * 2), *d_v = upload(v, nkv * 2);
	void *d_indptr = upload(indptr, (B + 1) * 4), *d_indices = upload(indices, (size_t)N * 4);

	/* the reference, first and into its own buffers */
	void *r_out = poisoned(nq * 2), *r_lse = poisoned(nlse * 4);
	gqa_decode_reference<<<B * HQ, 128>>>((const __nv_bfloat16 *)d_q, (const __nv_bfloat16 *)d_k,
					      (const __nv_bfloat16 *)d_v, (const int *)d_indptr,
					      (const int *)d_indices, sm_scale, (__nv_bfloat16 *)r_out,
					      (float *)r_lse, B);
	CHECK(cudaGetLastError());
	CHECK(cudaDeviceSynchronize());
	download(ref_out, r_out, nq * 2);
	download(ref_lse, r_lse, nlse * 4);
	CHECK(cudaFree(r_out));
	CHECK(cudaFree(r_lse));

	/* the export, as a user calls it */
	const size_t ws_bytes = ks_export_workspace_bytes(B, P, B + 1, N);
	void *ws = workspace_for(ws_bytes);
	void *d_out = poisoned(nq * 2), *d_lse = poisoned(nlse * 4);
	cudaStream_t stream;

	CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	/* the uploads and poisoning ran on the legacy stream, which a non-blocking one does not wait for */
	CHECK(cudaDeviceSynchronize());
	if (ws_bytes) {
		cudaError_t e = ks_export_launch((const __nv_bfloat16 *)d_q, (const __nv_bfloat16 *)d_k,
						 (const __nv_bfloat16 *)d_v, (const int32_t *)d_indptr,
						 (const int32_t *)d_indices, sm_scale, (__nv_bfloat16 *)d_out,
						 (float *)d_lse, B, P, B + 1, N, ws, ws_bytes - 1, stream);
		if (e != cudaErrorInvalidValue) {
			printf("FAIL %s: a workspace one byte short gave %s, not cudaErrorInvalidValue\n", what,
			       cudaGetErrorName(e));
			exit(1);
		}
		e = ks_export_launch((const __nv_bfloat16 *)d_q, (const __nv_bfloat16 *)d_k,
				     (const __nv_bfloat16 *)d_v, (const int32_t *)d_indptr, (const int32_t *)d_indices,
				     sm_scale, (__nv_bfloat16 *)d_out, (float *)d_lse, B, P, B + 1, N, NULL, 0, stream);
		if (e != cudaErrorInvalidValue) {
			printf("FAIL %s: no workspace gave %s, not cudaErrorInvalidValue\n", what, cudaGetErrorName(e));
			exit(1);
		}
	}
	CHECK(ks_export_launch((const __nv_bfloat16 *)d_q, (const __nv_bfloat16 *)d_k, (const __nv_bfloat16 *)d_v,
			       (const int32_t *)d_indptr, (const int32_t *)d_indices, sm_scale, (__nv_bfloat16 *)d_out,
			       (float *)d_lse, B, P, B + 1, N, ws, ws_bytes, stream));
	CHECK(cudaStreamSynchronize(stream));
	CHECK(cudaGetLastError());
	download(out, d_out, nq * 2);
	download(lse, d_lse, nlse * 4);
	printf("%s: batch_size=%d num_kv_indices=%d num_pages=%d, workspace %zu bytes\n", what, B, N, P, ws_bytes);
	compare(what, "output", out, ref_out, nq);
	compare(what, "lse", lse, ref_lse, nlse);
	check_unchanged(what, "q", q, d_q, nq * 2);
	check_unchanged(what, "k_cache", k, d_k, nkv * 2);
	check_unchanged(what, "v_cache", v, d_v, nkv * 2);
	check_unchanged(what, "kv_indptr", indptr, d_indptr, (B + 1) * 4);
	check_unchanged(what, "kv_indices", indices, d_indices, (size_t)N * 4);

	CHECK(cudaStreamDestroy(stream));
	void *bufs[] = { d_q, d_k, d_v, d_indptr, d_indices, d_out, d_lse, ws };
	for (void *b : bufs)
		if (b)
			CHECK(cudaFree(b));
	free(q), free(k), free(v), free(indptr), free(indices), free(pool);
	free(out), free(ref_out), free(lse), free(ref_lse);
}

#elif defined(KS_OP_MLA_DECODE)

static const int HQ = 16, DC = 512, DP = 64;

struct workload {
	char id[64];
	int batch, tokens, pages;
	int lengths[256];
	int n_lengths;
};

static int parse_workload(const char *line, struct workload *w)
{
	int used = 0, n;

	memset(w, 0, sizeof(*w));
	if (sscanf(line, "%63s %d %d %d%n", w->id, &w->batch, &w->tokens, &w->pages, &used) != 4)
		return -1;
	line += used;
	while (w->n_lengths < 256 && sscanf(line, "%d%n", &w->lengths[w->n_lengths], &n) == 1) {
		w->n_lengths++;
		line += n;
	}
	return 0;
}


/* kv_indptr (lengths given, else 1 each plus the rest of the tokens at random) and
   kv_indices (pages drawn without replacement from the pool, in random order) */
static void draw_pages(const struct workload *w, struct rng *rng, int32_t *indptr, int32_t *indices)
{
	const int B = w->batch, N = w->tokens, P = w->pages;
	int *len = (int *)calloc(B, sizeof(int));
	int32_t *pool = (int32_t *)malloc((size_t)P * 4);

	for (int b = 0; b < B; b++)
		len[b] = w->n_lengths ? w->lengths[b] : 1;
	for (int t = w->n_lengths ? N : B; t < N; t++)
		len[rng->below(B)]++;
	indptr[0] = 0;
	for (int b = 0; b < B; b++)
		indptr[b + 1] = indptr[b] + len[b];
	for (int p = 0; p < P; p++)
		pool[p] = p;
	for (int t = 0; t < N; t++) {
		int j = t + (int)rng->below(P - t);
		int32_t tmp = pool[t];

		pool[t] = pool[j];
		pool[j] = tmp;
		indices[t] = pool[t];
	}
	free(len);
	free(pool);
}

static void run_workload(const struct workload *w, uint64_t seed)
{
	char what[128];
	struct rng rng = { seed };
	const int B = w->batch, N = w->tokens, P = w->pages;
	const size_t nqn = (size_t)B * HQ * DC, nqp = (size_t)B * HQ * DP, nlse = (size_t)B * HQ;
	const size_t nckv = (size_t)P * DC, nkpe = (size_t)P * DP;
	__nv_bfloat16 *qn = (__nv_bfloat16 *)malloc(nqn * 2), *qp = (__nv_bfloat16 *)malloc(nqp * 2);
	__nv_bfloat16 *ckv = (__nv_bfloat16 *)malloc(nckv * 2), *kpe = (__nv_bfloat16 *)malloc(nkpe * 2);
	int32_t *indptr = (int32_t *)malloc((B + 1) * 4), *indices = (int32_t *)malloc((size_t)N * 4 + 4);
	__nv_bfloat16 *out = (__nv_bfloat16 *)malloc(nqn * 2), *ref_out = (__nv_bfloat16 *)malloc(nqn * 2);
	float *lse = (float *)malloc(nlse * 4), *ref_lse = (float *)malloc(nlse * 4);
	const float sm_scale = 0.07216878364870323f;

	snprintf(what, sizeof(what), "%s (seed %llu)", w->id, (unsigned long long)seed);
	for (size_t i = 0; i < nqn; i++)
		qn[i] = __float2bfloat16((float)rng.normal(0, 1));
	for (size_t i = 0; i < nqp; i++)
		qp[i] = __float2bfloat16((float)rng.normal(0, 1));
	for (size_t i = 0; i < nckv; i++)
		ckv[i] = __float2bfloat16((float)rng.normal(0, 1));
	for (size_t i = 0; i < nkpe; i++)
		kpe[i] = __float2bfloat16((float)rng.normal(0, 1));
	draw_pages(w, &rng, indptr, indices);

	void *d_qn = upload(qn, nqn * 2), *d_qp = upload(qp, nqp * 2);
	void *d_ckv = upload(ckv, nckv * 2), *d_kpe = upload(kpe, nkpe * 2);
	void *d_indptr = upload(indptr, (B + 1) * 4), *d_indices = upload(indices, (size_t)N * 4);

	/* the reference, first and into its own buffers */
	void *r_out = poisoned(nqn * 2), *r_lse = poisoned(nlse * 4);
	mla_decode_reference<<<B * HQ, 128>>>((const __nv_bfloat16 *)d_qn, (const __nv_bfloat16 *)d_qp,
					      (const __nv_bfloat16 *)d_ckv, (const __nv_bfloat16 *)d_kpe,
					      (const int *)d_indptr, (const int *)d_indices, sm_scale,
					      (__nv_bfloat16 *)r_out, (float *)r_lse, B);
	CHECK(cudaGetLastError());
	CHECK(cudaDeviceSynchronize());
	download(ref_out, r_out, nqn * 2);
	download(ref_lse, r_lse, nlse * 4);
	CHECK(cudaFree(r_out));
	CHECK(cudaFree(r_lse));

	/* the export, as a user calls it */
	const size_t ws_bytes = ks_export_workspace_bytes(B, P, B + 1, N);
	void *ws = workspace_for(ws_bytes);
	void *d_out = poisoned(nqn * 2), *d_lse = poisoned(nlse * 4);
	cudaStream_t stream;

	CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	CHECK(cudaDeviceSynchronize()); /* the uploads and poisoning, on the legacy stream */
	if (ws_bytes) {
		cudaError_t e = ks_export_launch((const __nv_bfloat16 *)d_qn, (const __nv_bfloat16 *)d_qp,
						 (const __nv_bfloat16 *)d_ckv, (const __nv_bfloat16 *)d_kpe,
						 (const int32_t *)d_indptr, (const int32_t *)d_indices, sm_scale,
						 (__nv_bfloat16 *)d_out, (float *)d_lse, B, P, B + 1, N, ws,
						 ws_bytes - 1, stream);
		if (e != cudaErrorInvalidValue) {
			printf("FAIL %s: a workspace one byte short gave %s, not cudaErrorInvalidValue\n", what,
			       cudaGetErrorName(e));
			exit(1);
		}
	}
	CHECK(ks_export_launch((const __nv_bfloat16 *)d_qn, (const __nv_bfloat16 *)d_qp, (const __nv_bfloat16 *)d_ckv,
			       (const __nv_bfloat16 *)d_kpe, (const int32_t *)d_indptr, (const int32_t *)d_indices,
			       sm_scale, (__nv_bfloat16 *)d_out, (float *)d_lse, B, P, B + 1, N, ws, ws_bytes, stream));
	CHECK(cudaStreamSynchronize(stream));
	CHECK(cudaGetLastError());
	download(out, d_out, nqn * 2);
	download(lse, d_lse, nlse * 4);
	printf("%s: batch_size=%d num_kv_indices=%d num_pages=%d, workspace %zu bytes\n", what, B, N, P, ws_bytes);
	compare(what, "output", out, ref_out, nqn);
	compare(what, "lse", lse, ref_lse, nlse);
	check_unchanged(what, "q_nope", qn, d_qn, nqn * 2);
	check_unchanged(what, "q_pe", qp, d_qp, nqp * 2);
	check_unchanged(what, "ckv_cache", ckv, d_ckv, nckv * 2);
	check_unchanged(what, "kpe_cache", kpe, d_kpe, nkpe * 2);
	check_unchanged(what, "kv_indptr", indptr, d_indptr, (B + 1) * 4);
	check_unchanged(what, "kv_indices", indices, d_indices, (size_t)N * 4);

	CHECK(cudaStreamDestroy(stream));
	void *bufs[] = { d_qn, d_qp, d_ckv, d_kpe, d_indptr, d_indices, d_out, d_lse, ws };
	for (void *b : bufs)
		if (b)
			CHECK(cudaFree(b));
	free(qn), free(qp), free(ckv), free(kpe), free(indptr), free(indices);
	free(out), free(ref_out), free(lse), free(ref_lse);
}

#else /* KS_OP_RMSNORM */

static const int HIDDEN = 4096;

struct workload {
	char id[64];
	int rows;
	double x_mean, x_std;
};

static int parse_workload(const char *line, struct workload *w)
{
	memset(w, 0, sizeof(*w));
	return sscanf(line, "%63s %d %lf %lf", w->id, &w->rows, &w->x_mean, &w->x_std) == 4 ? 0 : -1;
}

static void run_workload(const struct workload *w, uint64_t seed)
{
	char what[128];
	struct rng rng = { seed };
	const size_t n = (size_t)w->rows * HIDDEN;
	__nv_bfloat16 *x = (__nv_bfloat16 *)malloc(n * 2), *weight = (__nv_bfloat16 *)malloc(HIDDEN * 2);
	__nv_bfloat16 *y = (__nv_bfloat16 *)malloc(n * 2), *ref_y = (__nv_bfloat16 *)malloc(n * 2);
	const float eps = 1e-6f;

	snprintf(what, sizeof(what), "%s (seed %llu)", w->id, (unsigned long long)seed);
	for (size_t i = 0; i < n; i++)
		x[i] = __float2bfloat16((float)(w->x_std > 0 ? rng.normal(w->x_mean, w->x_std) : w->x_mean));
	for (int i = 0; i < HIDDEN; i++)
		weight[i] = __float2bfloat16((float)rng.normal(1, 0.5));

	void *d_x = upload(x, n * 2), *d_w = upload(weight, HIDDEN * 2);
	void *r_y = poisoned(n * 2);

	rmsnorm_reference<<<w->rows, 256>>>((const __nv_bfloat16 *)d_x, (const __nv_bfloat16 *)d_w, eps,
					    (__nv_bfloat16 *)r_y, w->rows, HIDDEN);
	CHECK(cudaGetLastError());
	CHECK(cudaDeviceSynchronize());
	download(ref_y, r_y, n * 2);
	CHECK(cudaFree(r_y));

	const size_t ws_bytes = ks_export_workspace_bytes(w->rows);
	void *ws = workspace_for(ws_bytes), *d_y = poisoned(n * 2);
	cudaStream_t stream;

	CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	CHECK(cudaDeviceSynchronize()); /* the uploads and poisoning, on the legacy stream */
	if (ws_bytes) {
		cudaError_t e = ks_export_launch((const __nv_bfloat16 *)d_x, (const __nv_bfloat16 *)d_w, eps,
						 (__nv_bfloat16 *)d_y, w->rows, ws, ws_bytes - 1, stream);
		if (e != cudaErrorInvalidValue) {
			printf("FAIL %s: a workspace one byte short gave %s, not cudaErrorInvalidValue\n", what,
			       cudaGetErrorName(e));
			exit(1);
		}
	}
	CHECK(ks_export_launch((const __nv_bfloat16 *)d_x, (const __nv_bfloat16 *)d_w, eps, (__nv_bfloat16 *)d_y,
			       w->rows, ws, ws_bytes, stream));
	CHECK(cudaStreamSynchronize(stream));
	CHECK(cudaGetLastError());
	download(y, d_y, n * 2);
	printf("%s: num_rows=%d, x ~ normal(%g, %g), workspace %zu bytes\n", what, w->rows, w->x_mean, w->x_std,
	       ws_bytes);
	compare(what, "y", y, ref_y, n);
	check_unchanged(what, "x", x, d_x, n * 2);
	check_unchanged(what, "weight", weight, d_w, HIDDEN * 2);

	CHECK(cudaStreamDestroy(stream));
	CHECK(cudaFree(d_x));
	CHECK(cudaFree(d_w));
	CHECK(cudaFree(d_y));
	if (ws)
		CHECK(cudaFree(ws));
	free(x), free(weight), free(y), free(ref_y);
}

#endif

int main(int argc, char **argv)
{
	char line[4096];
	FILE *f;
	int n_workloads = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s WORKLOADS\n", argv[0]);
		return 2;
	}
	f = fopen(argv[1], "r");
	if (!f) {
		perror(argv[1]);
		return 2;
	}
	while (fgets(line, sizeof(line), f)) {
		struct workload w;

		if (!strncmp(line, "tol ", 4)) {
			if (n_tols == 8 || sscanf(line + 4, "%63s %lf %lf", tols[n_tols].name, &tols[n_tols].atol,
						  &tols[n_tols].rtol) != 3) {
				fprintf(stderr, "%s: bad line: %s", argv[1], line);
				return 2;
			}
			n_tols++;
			continue;
		}
		if (line[0] == '\n' || line[0] == '#')
			continue;
		if (parse_workload(line, &w) < 0) {
			fprintf(stderr, "%s: bad workload line: %s", argv[1], line);
			return 2;
		}
		/* two input sets: the export keeps nothing from one call to the next */
		run_workload(&w, 1000 + 2 * (uint64_t)n_workloads);
		run_workload(&w, 1001 + 2 * (uint64_t)n_workloads);
		n_workloads++;
	}
	fclose(f);
	if (!n_workloads) {
		fprintf(stderr, "%s: no workloads\n", argv[1]);
		return 2;
	}
	printf("all ok: %d workloads, 2 input sets each\n", n_workloads);
	return 0;
}
