/*
 * test_gpukit.c - the GPU kit on a real GPU: generators give the requested
 * distributions and are reproducible from their seed, the host-side
 * generators keep their invariants, the checksum sees any change, poison
 * reads as NaN, and the device profile is sane and round-trips through its
 * cache.
 *
 * Exits 77 (skipped) before any test when no driver or no GPU is there.
 * Each test prints what it measured next to what it wants, so a log of a
 * batch run says how close things were, not only whether they passed.
 * KS_TEST_GPU picks the device ordinal (default 0).
 */
#include "../unit/testlib.h"

#include <dirent.h>
#include <math.h>
#include <sys/stat.h>

#include "ksearch/evaluate/compare.h"
#include "ksearch/evaluate/cuda.h"
#include "ksearch/evaluate/gpukit.h"
#include "ksearch/compile/nvrtc.h"
#include "ksearch/base/util.h"

static const struct ks_cuda *cu;
static struct ks_gpukit *kit;
static struct ks_error err;

#define MIB ((size_t)1 << 20)

/* A ks_ call that must succeed; on failure the test stops with its message. */
#define OK(call)                                                                                             \
	do {                                                                                                 \
		err.msg[0] = '\0';                                                                           \
		if ((call))                                                                                  \
			fail_msg("%s failed: %s", #call, err.msg);                                           \
	} while (0)

#define CU_OK(call)                                                                                          \
	do {                                                                                                 \
		CUresult rc_ = (call);                                                                       \
		if (rc_ != CUDA_SUCCESS)                                                                     \
			fail_msg("%s failed: %s", #call, ks_cuda_strerror(rc_));                             \
	} while (0)

static const enum ks_dtype float_dtypes[] = { KS_DTYPE_BFLOAT16, KS_DTYPE_FLOAT16, KS_DTYPE_FLOAT32 };

static CUdeviceptr dev_alloc(size_t bytes)
{
	CUdeviceptr ptr = 0;

	CU_OK(cu->mem_alloc(&ptr, bytes));
	return ptr;
}

static void dev_free(CUdeviceptr ptr)
{
	CU_OK(cu->stream_synchronize(ks_gpukit_stream(kit)));
	CU_OK(cu->mem_free(ptr));
}

/* The kit's stream is non-blocking: wait for it before the copy on the null stream. */
static void download(void *host, CUdeviceptr src, size_t bytes)
{
	CU_OK(cu->stream_synchronize(ks_gpukit_stream(kit)));
	CU_OK(cu->memcpy_dtoh(host, src, bytes));
}

/* cuMemcpyHtoD from pageable memory may return before the DMA lands: wait for it. */
static void upload(CUdeviceptr dst, const void *host, size_t bytes)
{
	CU_OK(cu->memcpy_htod(dst, host, bytes));
	CU_OK(cu->ctx_synchronize());
}

static void set_byte(CUdeviceptr ptr, size_t offset, unsigned char value)
{
	CU_OK(cu->stream_synchronize(ks_gpukit_stream(kit)));
	CU_OK(cu->memset_d8(ptr + offset, value, 1));
	CU_OK(cu->ctx_synchronize());
}

/* Generate numel elements into a fresh device buffer and bring them to the host. */
static void *generate(enum ks_dtype dtype, int64_t numel, const struct ks_generator *gen,
		      const struct ks_env *axes, uint64_t seed)
{
	size_t bytes = (size_t)numel * ks_dtype_size(dtype);
	CUdeviceptr dst = dev_alloc(bytes ? bytes : 1);
	void *host = ks_malloc(bytes);

	OK(ks_gpukit_generate(kit, dst, dtype, numel, gen, axes, seed, &err));
	download(host, dst, bytes);
	dev_free(dst);
	return host;
}

static int open_kit(void **state)
{
	const char *ordinal = getenv("KS_TEST_GPU");
	struct ks_error e;

	(void)state;
	if (ks_gpukit_open(&kit, cu, ordinal ? atoi(ordinal) : 0, &e)) {
		printf("ks_gpukit_open failed: %s\n", e.msg);
		return -1;
	}
	printf("GPU kit open on GPU %s\n", ordinal ? ordinal : "0");
	return 0;
}

static int close_kit(void **state)
{
	(void)state;
	ks_gpukit_close(kit);
	return 0;
}

static void normal_has_the_requested_mean_and_std(void **state)
{
	const struct ks_generator gen = { .kind = KS_GEN_NORMAL, .a = 0.5, .b = 2.0 };
	const int64_t n = 1 << 20;

	(void)state;
	for (size_t d = 0; d < sizeof(float_dtypes) / sizeof(float_dtypes[0]); d++) {
		void *host = generate(float_dtypes[d], n, &gen, NULL, 1234);
		double sum = 0, sum2 = 0, mean, std;
		int64_t within1 = 0, within2 = 0, nonfinite = 0;

		for (int64_t i = 0; i < n; i++) {
			double v = ks_element(float_dtypes[d], host, i);

			if (!isfinite(v)) {
				nonfinite++;
				continue;
			}
			sum += v;
			sum2 += v * v;
			within1 += fabs(v - 0.5) <= 2.0;
			within2 += fabs(v - 0.5) <= 4.0;
		}
		mean = sum / (double)n;
		std = sqrt(sum2 / (double)n - mean * mean);
		/* 1M draws: the standard errors are 0.002 (mean) and 0.0014 (std); bounds ~5x. */
		printf("  normal(0.5, 2) %-8s: mean %.5f (want 0.5 +- 0.01), std %.5f (want 2 +- 0.01), "
		       "within 1 sd %.4f (0.6827 +- 0.005), within 2 sd %.4f (0.9545 +- 0.003), "
		       "non-finite %lld\n",
		       ks_dtype_name(float_dtypes[d]), mean, std, (double)within1 / (double)n,
		       (double)within2 / (double)n, (long long)nonfinite);
		assert_int_equal(nonfinite, 0);
		assert_true(fabs(mean - 0.5) < 0.01);
		assert_true(fabs(std - 2.0) < 0.01);
		assert_true(fabs((double)within1 / (double)n - 0.6827) < 0.005);
		assert_true(fabs((double)within2 / (double)n - 0.9545) < 0.003);
		free(host);
	}
}

static void uniform_stays_in_low_high(void **state)
{
	static const double ranges[][2] = { { -2.0, 3.0 }, { 0.0, 1.0 }, { 0.1, 0.2 } };
	const int64_t n = 1 << 20;

	(void)state;
	for (size_t d = 0; d < sizeof(float_dtypes) / sizeof(float_dtypes[0]); d++) {
		for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++) {
			const struct ks_generator gen = { .kind = KS_GEN_UNIFORM,
							  .a = ranges[r][0],
							  .b = ranges[r][1] };
			double low = ranges[r][0], high = ranges[r][1];
			void *host = generate(float_dtypes[d], n, &gen, NULL, 99);
			double sum = 0, lo = INFINITY, hi = -INFINITY, mean, want = (low + high) / 2;
			double tol = 0.01 * (high - low);

			for (int64_t i = 0; i < n; i++) {
				double v = ks_element(float_dtypes[d], host, i);

				sum += v;
				lo = v < lo ? v : lo;
				hi = v > hi ? v : hi;
			}
			mean = sum / (double)n;
			/* 0.1 and 0.2 are in no float format: the bounds must hold all the same. */
			printf("  uniform[%g, %g) %-8s: min %.9g max %.9g (want >= %g, < %g), "
			       "mean %.5f (want %g +- %g)\n",
			       low, high, ks_dtype_name(float_dtypes[d]), lo, hi, low, high, mean, want, tol);
			assert_true(lo >= low);
			assert_true(hi < high);
			assert_true(hi > high - 0.02 * (high - low));
			assert_true(lo < low + 0.02 * (high - low));
			assert_true(fabs(mean - want) < tol);
			free(host);
		}
	}
}

static void const_is_exact_and_writes_only_numel(void **state)
{
	static const struct {
		enum ks_dtype dtype;
		double value, want;
	} cases[] = {
		{ KS_DTYPE_FLOAT32, 0.1, (double)0.1f },
		{ KS_DTYPE_BFLOAT16, 1.5, 1.5 },
		{ KS_DTYPE_FLOAT16, -0.25, -0.25 },
		{ KS_DTYPE_INT32, -7, -7 },
		{ KS_DTYPE_INT64, 123456789012.0, 123456789012.0 },
	};
	const int64_t n = 1001; /* odd: the kernel makes pairs, the last one half used */

	(void)state;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const struct ks_generator gen = { .kind = KS_GEN_CONST, .a = cases[c].value };
		size_t size = ks_dtype_size(cases[c].dtype);
		CUdeviceptr dst = dev_alloc((size_t)(n + 8) * size);
		unsigned char *host = ks_malloc((size_t)(n + 8) * size);
		int64_t wrong = 0;

		OK(ks_gpukit_poison(kit, dst, (size_t)(n + 8) * size, &err));
		OK(ks_gpukit_generate(kit, dst, cases[c].dtype, n, &gen, NULL, 5, &err));
		download(host, dst, (size_t)(n + 8) * size);
		for (int64_t i = 0; i < n; i++)
			wrong += ks_element(cases[c].dtype, host, i) != cases[c].want;
		printf("  const %g %-8s: %lld of %lld elements differ from %.9g; the %zu bytes after "
		       "them %s\n",
		       cases[c].value, ks_dtype_name(cases[c].dtype), (long long)wrong, (long long)n,
		       cases[c].want, 8 * size,
		       host[n * size] == 0xff && host[(n + 8) * size - 1] == 0xff ? "untouched"
										  : "OVERWRITTEN");
		assert_int_equal(wrong, 0);
		for (size_t b = (size_t)n * size; b < (size_t)(n + 8) * size; b++)
			assert_int_equal(host[b], 0xff);
		free(host);
		dev_free(dst);
	}
}

static double fraction_differing(enum ks_dtype dtype, const void *a, const void *b, int64_t n)
{
	int64_t differ = 0;

	for (int64_t i = 0; i < n; i++)
		differ += ks_element(dtype, a, i) != ks_element(dtype, b, i);
	return (double)differ / (double)n;
}

static void same_seed_same_bytes_other_seed_other_bytes(void **state)
{
	const struct ks_generator normal = { .kind = KS_GEN_NORMAL, .a = 0, .b = 1 };
	const struct ks_generator uniform = { .kind = KS_GEN_UNIFORM, .a = -1, .b = 1 };
	const int64_t n = 1 << 20;

	(void)state;
	for (size_t d = 0; d < sizeof(float_dtypes) / sizeof(float_dtypes[0]); d++) {
		enum ks_dtype dtype = float_dtypes[d];
		size_t bytes = (size_t)n * ks_dtype_size(dtype);
		void *a = generate(dtype, n, &normal, NULL, 7);
		void *b = generate(dtype, n, &normal, NULL, 7);
		void *c = generate(dtype, n, &normal, NULL, 8);
		void *u = generate(dtype, n, &uniform, NULL, 7);
		double other_seed = fraction_differing(dtype, a, c, n);
		double other_kind = fraction_differing(dtype, a, u, n);

		printf("  %-8s: seed 7 twice %s; seed 7 vs 8: %.4f of elements differ; normal vs "
		       "uniform at seed 7: %.4f differ (want > 0.95)\n",
		       ks_dtype_name(dtype), memcmp(a, b, bytes) ? "DIFFERENT" : "identical bytes",
		       other_seed, other_kind);
		assert_memory_equal(a, b, bytes);
		assert_true(other_seed > 0.95);
		assert_true(other_kind > 0.95);
		free(a);
		free(b);
		free(c);
		free(u);
	}
}

static void float_generators_refuse_integer_tensors(void **state)
{
	const struct ks_generator normal = { .kind = KS_GEN_NORMAL, .a = 0, .b = 1 };
	const struct ks_generator half = { .kind = KS_GEN_CONST, .a = 0.5 };
	CUdeviceptr dst = dev_alloc(64);

	(void)state;
	assert_int_equal(ks_gpukit_generate(kit, dst, KS_DTYPE_INT32, 16, &normal, NULL, 1, &err), -1);
	printf("  normal into int32: %s\n", err.msg);
	assert_contains(err.msg, "floating-point");
	assert_int_equal(ks_gpukit_generate(kit, dst, KS_DTYPE_INT64, 4, &half, NULL, 1, &err), -1);
	printf("  const 0.5 into int64: %s\n", err.msg);
	assert_contains(err.msg, "0.5");
	dev_free(dst);
}

static void check_indptr(const int32_t *indptr, int64_t requests, int64_t total, int64_t min)
{
	assert_int_equal(indptr[0], 0);
	assert_int_equal(indptr[requests], total);
	for (int64_t b = 0; b < requests; b++)
		if (indptr[b + 1] - indptr[b] < min)
			fail_msg("request %lld has length %d < min %lld", (long long)b,
				 indptr[b + 1] - indptr[b], (long long)min);
}

static void indptr_random_lengths_sum_to_total_and_respect_min(void **state)
{
	static const struct {
		int64_t requests, total, min;
	} cases[] = {
		{ 64, 28815, 1 }, { 1, 546, 1 }, { 33, 2049, 0 }, { 16, 80, 5 }, { 5, 1237, 200 },
	};
	struct ks_env axes;

	(void)state;
	ks_env_init(&axes);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const struct ks_generator gen = { .kind = KS_GEN_INDPTR,
						  .expr = "num_kv_indices",
						  .min = cases[c].min };
		int64_t requests = cases[c].requests, n = requests + 1;
		int32_t *a, *b, *other;
		int32_t shortest = INT32_MAX, longest = 0;

		OK(ks_env_set(&axes, "num_kv_indices", cases[c].total, &err));
		a = generate(KS_DTYPE_INT32, n, &gen, &axes, 11);
		b = generate(KS_DTYPE_INT32, n, &gen, &axes, 11);
		other = generate(KS_DTYPE_INT32, n, &gen, &axes, 12);
		for (int64_t i = 0; i < requests; i++) {
			int32_t len = a[i + 1] - a[i];

			shortest = len < shortest ? len : shortest;
			longest = len > longest ? len : longest;
		}
		printf("  indptr of %lld requests, total %lld, min %lld: last %d, lengths %d..%d, "
		       "same seed %s, other seed %s\n",
		       (long long)requests, (long long)cases[c].total, (long long)cases[c].min, a[requests],
		       shortest, longest, memcmp(a, b, (size_t)n * 4) ? "DIFFERENT" : "identical",
		       memcmp(a, other, (size_t)n * 4) ? "different" : "IDENTICAL");
		check_indptr(a, requests, cases[c].total, cases[c].min);
		check_indptr(other, requests, cases[c].total, cases[c].min);
		assert_memory_equal(a, b, (size_t)n * 4);
		if (requests > 1 && cases[c].total > requests * cases[c].min) {
			assert_true(shortest < longest); /* random, not an even split */
			assert_memory_not_equal(a, other, (size_t)n * 4);
		}
		free(a);
		free(b);
		free(other);
	}
	ks_env_release(&axes);
}

/*
 * The split kinds the timed workloads are measured on: each sums to the
 * total and respects min; even stays within its band, skewed has a longest
 * request many times the mean, and every kind differs between seeds.
 */
static void indptr_split_kinds_keep_their_shape(void **state)
{
	static const struct {
		int64_t requests, total, min;
	} cases[] = { { 64, 28815, 1 }, { 16, 23079, 1 }, { 16, 80, 5 }, { 1, 546, 1 } };
	struct ks_env axes;

	(void)state;
	ks_env_init(&axes);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct ks_generator gen = { .kind = KS_GEN_INDPTR,
					    .expr = "num_kv_indices",
					    .min = cases[c].min };
		int64_t n = cases[c].requests + 1, requests = cases[c].requests;
		size_t bytes = (size_t)n * 4;
		CUdeviceptr dst = dev_alloc(bytes);

		OK(ks_env_set(&axes, "num_kv_indices", cases[c].total, &err));
		for (int split = 0; split < KS_SPLIT_COUNT; split++) {
			int32_t *a = ks_malloc(bytes), *b = ks_malloc(bytes);
			int longest = 0, shortest = INT32_MAX;
			double mean = (double)cases[c].total / (double)requests;

			OK(ks_gpukit_generate_split(kit, dst, KS_DTYPE_INT32, n, &gen, &axes, 11, split,
						    &err));
			download(a, dst, bytes);
			OK(ks_gpukit_generate_split(kit, dst, KS_DTYPE_INT32, n, &gen, &axes, 12, split,
						    &err));
			download(b, dst, bytes);
			check_indptr(a, requests, cases[c].total, cases[c].min);
			check_indptr(b, requests, cases[c].total, cases[c].min);
			for (int64_t r = 0; r < requests; r++) {
				int len = a[r + 1] - a[r];

				longest = len > longest ? len : longest;
				shortest = len < shortest ? len : shortest;
			}
			printf("  %s split of %lld over %lld requests: lengths %d..%d (mean %.1f)\n",
			       ks_split_name(split), (long long)cases[c].total, (long long)requests, shortest,
			       longest, mean);
			if (requests > 1 && cases[c].total >= 1000) {
				assert_memory_not_equal(a, b, bytes);
				if (split == KS_SPLIT_EVEN)
					assert_true(longest <= 1.15 * mean + 1 &&
						    shortest >= 0.85 * mean - 1);
				/* skewed: the longest request holds a fixed share, the p90 of one
				   draw's (16 requests: 0.61, 64: 0.30), in every draw alike */
				if (split == KS_SPLIT_SKEWED) {
					double want = requests == 16 ? 0.608 : 0.300;
					int longest_b = 0;

					for (int64_t r = 0; r < requests; r++)
						longest_b = b[r + 1] - b[r] > longest_b ? b[r + 1] - b[r]
											: longest_b;
					assert_true(fabs(longest - want * cases[c].total) <=
						    0.01 * cases[c].total);
					assert_true(fabs(longest_b - want * cases[c].total) <=
						    0.01 * cases[c].total);
				}
			}
			free(a);
			free(b);
		}
		dev_free(dst);
	}
	assert_string_equal(ks_split_name(KS_SPLIT_SKEWED), "skewed");
	ks_env_release(&axes);
}

static void indptr_explicit_lengths_are_honoured(void **state)
{
	int64_t lengths[3] = { 1, 67, 333 };
	struct ks_generator gen = {
		.kind = KS_GEN_INDPTR, .expr = "num_kv_indices", .min = 1, .lengths = lengths, .n_lengths = 3
	};
	const int32_t want[4] = { 0, 1, 68, 401 };
	CUdeviceptr dst = dev_alloc(64);
	struct ks_env axes;
	int32_t *got;

	(void)state;
	ks_env_init(&axes);
	OK(ks_env_set(&axes, "num_kv_indices", 401, &err));
	got = generate(KS_DTYPE_INT32, 4, &gen, &axes, 3);
	printf("  lengths [1, 67, 333]: indptr [%d, %d, %d, %d] (want [0, 1, 68, 401])\n", got[0], got[1],
	       got[2], got[3]);
	assert_memory_equal(got, want, sizeof(want));
	free(got);

	OK(ks_env_set(&axes, "num_kv_indices", 400, &err));
	assert_int_equal(ks_gpukit_generate(kit, dst, KS_DTYPE_INT32, 4, &gen, &axes, 3, &err), -1);
	printf("  lengths summing to 401 with total 400: %s\n", err.msg);
	assert_contains(err.msg, "400");
	assert_int_equal(ks_gpukit_generate(kit, dst, KS_DTYPE_INT32, 5, &gen, &axes, 3, &err), -1);
	printf("  3 lengths for 4 requests: %s\n", err.msg);
	assert_contains(err.msg, "3 lengths");

	gen.lengths = NULL;
	gen.n_lengths = 0;
	gen.min = 200;
	assert_int_equal(ks_gpukit_generate(kit, dst, KS_DTYPE_INT32, 4, &gen, &axes, 3, &err), -1);
	printf("  3 requests of at least 200 in 400: %s\n", err.msg);
	assert_contains(err.msg, "cannot sum");
	ks_env_release(&axes);
	dev_free(dst);
}

/* "start": the indptr begins there, the requests share total - start (op.json's b7_start_1000) */
static void indptr_start_offsets_the_requests(void **state)
{
	int64_t lengths[3] = { 1, 67, 333 };
	struct ks_generator gen = { .kind = KS_GEN_INDPTR,
				    .expr = "num_kv_indices",
				    .min = 1,
				    .start = 99,
				    .lengths = lengths,
				    .n_lengths = 3 };
	const int32_t want[4] = { 99, 100, 167, 500 };
	CUdeviceptr dst = dev_alloc(64);
	struct ks_env axes;
	int32_t *got;

	(void)state;
	ks_env_init(&axes);
	OK(ks_env_set(&axes, "num_kv_indices", 500, &err));
	got = generate(KS_DTYPE_INT32, 4, &gen, &axes, 3);
	printf("  start 99, lengths [1, 67, 333]: indptr [%d, %d, %d, %d] (want [99, 100, 167, 500])\n",
	       got[0], got[1], got[2], got[3]);
	assert_memory_equal(got, want, sizeof(want));
	free(got);

	gen.lengths = NULL; /* random lengths, each >= 1, over 5000 - 1000 */
	gen.n_lengths = 0;
	gen.start = 1000;
	OK(ks_env_set(&axes, "num_kv_indices", 5000, &err));
	for (int split = 0; split < KS_SPLIT_COUNT; split++) {
		int32_t *p = ks_calloc(8, sizeof(*p));

		OK(ks_gpukit_generate_split(kit, dst, KS_DTYPE_INT32, 8, &gen, &axes, 11,
					    (enum ks_split)split, &err));
		download(p, dst, 8 * sizeof(*p));
		printf("  start 1000, %s split of 7 requests: [%d, %d, ..., %d]\n",
		       ks_split_name((enum ks_split)split), p[0], p[1], p[7]);
		assert_int_equal(p[0], 1000);
		assert_int_equal(p[7], 5000);
		for (int b = 0; b < 7; b++)
			assert_true(p[b + 1] - p[b] >= 1);
		free(p);
	}
	gen.start = 5001;
	assert_int_equal(ks_gpukit_generate(kit, dst, KS_DTYPE_INT32, 8, &gen, &axes, 3, &err), -1);
	printf("  start past the total: %s\n", err.msg);
	assert_contains(err.msg, "start 5001");
	ks_env_release(&axes);
	dev_free(dst);
}

static void check_pages(const int32_t *pages, int64_t n, int64_t pool, int64_t *descents)
{
	unsigned char *seen = ks_calloc((size_t)pool, 1);

	*descents = 0;
	for (int64_t i = 0; i < n; i++) {
		if (pages[i] < 0 || pages[i] >= pool)
			fail_msg("pages[%lld] = %d is outside [0, %lld)", (long long)i, pages[i],
				 (long long)pool);
		if (seen[pages[i]]++)
			fail_msg("pages[%lld] = %d appears twice", (long long)i, pages[i]);
		*descents += i > 0 && pages[i] < pages[i - 1];
	}
	free(seen);
}

static void page_permutation_is_distinct_and_in_range(void **state)
{
	const struct ks_generator gen = { .kind = KS_GEN_PAGE_PERMUTATION,
					  .expr = "2*num_kv_indices + 1024" };
	const struct ks_generator all = { .kind = KS_GEN_PAGE_PERMUTATION, .expr = "num_kv_indices" };
	const int64_t n = 28815, pool = 2 * n + 1024;
	CUdeviceptr dst = dev_alloc(64);
	struct ks_env axes;
	int32_t *a, *b, *full;
	int64_t descents, full_descents;

	(void)state;
	ks_env_init(&axes);
	OK(ks_env_set(&axes, "num_kv_indices", n, &err));
	a = generate(KS_DTYPE_INT32, n, &gen, &axes, 21);
	b = generate(KS_DTYPE_INT32, n, &gen, &axes, 21);
	check_pages(a, n, pool, &descents);
	full = generate(KS_DTYPE_INT32, n, &all, &axes, 21);
	check_pages(full, n, n, &full_descents);
	printf("  %lld pages of %lld: distinct and in range, %lld descents (random order: ~%lld); "
	       "all %lld of %lld: a permutation with %lld descents; same seed %s\n",
	       (long long)n, (long long)pool, (long long)descents, (long long)n / 2, (long long)n,
	       (long long)n, (long long)full_descents,
	       memcmp(a, b, (size_t)n * 4) ? "DIFFERENT" : "identical");
	assert_memory_equal(a, b, (size_t)n * 4);
	assert_true(descents > n / 3 && descents < 2 * n / 3);
	assert_true(full_descents > n / 3 && full_descents < 2 * n / 3);

	assert_int_equal(ks_gpukit_generate(kit, dst, KS_DTYPE_INT32, n + 1, &all, &axes, 1, &err), -1);
	printf("  %lld pages from a pool of %lld: %s\n", (long long)n + 1, (long long)n, err.msg);
	assert_contains(err.msg, "smaller");
	free(a);
	free(b);
	free(full);
	ks_env_release(&axes);
	dev_free(dst);
}

/*
 * The checksum's definition, restated: a reduction that dropped a warp, a
 * block or the tail would still be stable, but would not match this.
 */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The public key a NULL key stands for. */
static const struct ks_hash_key public_key = { 0, 0x9e3779b97f4a7c15ull };

static uint64_t word_term(uint64_t w, uint64_t i, const struct ks_hash_key *key)
{
	return mix64((w ^ key->k0) + mix64(i ^ key->k1));
}

static uint64_t host_checksum_keyed(const unsigned char *p, size_t n, const struct ks_hash_key *key)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < (n + 7) / 8; i++) {
		uint64_t w = 0;

		for (size_t k = 0; k < 8 && i * 8 + k < n; k++)
			w |= (uint64_t)p[i * 8 + k] << (8 * k);
		sum += word_term(w, i, key);
	}
	return sum + mix64(n ^ 0x13198a2e03707344ull);
}

static uint64_t host_checksum(const unsigned char *p, size_t n)
{
	return host_checksum_keyed(p, n, &public_key);
}

/* mix64's inverse: lets the test forge what an attacker who knew the key could. */
static uint64_t unmix64(uint64_t z)
{
	z = (z ^ (z >> 31) ^ (z >> 62));
	z *= 0x319642b2d24d8ec3ull;
	z = (z ^ (z >> 27) ^ (z >> 54));
	z *= 0x96de1b173f119089ull;
	return z ^ (z >> 30) ^ (z >> 60);
}

static void checksum_is_stable_and_sees_any_change(void **state)
{
	const struct ks_generator gen = { .kind = KS_GEN_UNIFORM, .a = -1, .b = 1 };
	const size_t bytes = 64 * MIB + 5;
	const size_t offsets[] = {
		0, 1, 7, 8, 255, 4096, 1234567, 32 * MIB, 64 * MIB - 1, 64 * MIB, bytes - 1
	};
	CUdeviceptr buf = dev_alloc(bytes + 3);
	unsigned char *host = ks_malloc(bytes + 3);
	uint64_t base, again, changed, restored, swapped, odd;
	int misses = 0;

	(void)state;
	OK(ks_gpukit_generate(kit, buf, KS_DTYPE_FLOAT32, (int64_t)(bytes + 3) / 4, &gen, NULL, 4, &err));
	download(host, buf, bytes + 3);
	OK(ks_gpukit_checksum(kit, buf, bytes, NULL, &base, &err));
	OK(ks_gpukit_checksum(kit, buf, bytes, NULL, &again, &err));
	printf("  %zu bytes: checksum %016llx, again %016llx, host recomputation %016llx\n", bytes,
	       (unsigned long long)base, (unsigned long long)again,
	       (unsigned long long)host_checksum(host, bytes));
	assert_true(base == again);
	assert_true(base == host_checksum(host, bytes));

	for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
		size_t at = offsets[i];

		set_byte(buf, at, (unsigned char)(host[at] ^ 0x01));
		OK(ks_gpukit_checksum(kit, buf, bytes, NULL, &changed, &err));
		set_byte(buf, at, host[at]);
		OK(ks_gpukit_checksum(kit, buf, bytes, NULL, &restored, &err));
		if (changed == base || restored != base) {
			printf("  byte %zu flipped: checksum %s; restored: %s\n", at,
			       changed == base ? "UNCHANGED" : "changed",
			       restored == base ? "back" : "NOT BACK");
			misses++;
		}
	}
	printf("  one bit flipped at %zu offsets (first, last, word edges, mid-buffer): %d missed\n",
	       sizeof(offsets) / sizeof(offsets[0]), misses);
	assert_int_equal(misses, 0);

	/* Order matters: swap the first two words. */
	CU_OK(cu->memcpy_htod(buf, host + 8, 8));
	CU_OK(cu->memcpy_htod(buf + 8, host, 8));
	CU_OK(cu->ctx_synchronize());
	OK(ks_gpukit_checksum(kit, buf, bytes, NULL, &swapped, &err));
	CU_OK(cu->memcpy_htod(buf, host, 16));
	CU_OK(cu->ctx_synchronize());
	printf("  first two words swapped: checksum %s\n", swapped == base ? "UNCHANGED" : "changed");
	assert_true(swapped != base);

	/* Unaligned start and a short length take the byte-wise path. */
	OK(ks_gpukit_checksum(kit, buf + 3, 1001, NULL, &odd, &err));
	printf("  1001 bytes at offset 3: %016llx, host %016llx\n", (unsigned long long)odd,
	       (unsigned long long)host_checksum(host + 3, 1001));
	assert_true(odd == host_checksum(host + 3, 1001));
	OK(ks_gpukit_checksum(kit, buf, 0, NULL, &odd, &err));
	assert_true(odd == host_checksum(host, 0));

	free(host);
	dev_free(buf);
}

/*
 * An attacker who knows the checksum's key can change one word and
 * balance it with another (mix64 is invertible): the public-key sum stays
 * the same.  With a secret key the same forgery shows.
 */
static void keyed_checksum_defeats_a_balanced_forgery(void **state)
{
	const struct ks_hash_key secret = { 0x0123456789abcdefull, 0xfedcba9876543210ull };
	const size_t bytes = 4096;
	CUdeviceptr buf = dev_alloc(bytes);
	unsigned char *host = ks_malloc(bytes);
	uint64_t w0, w1, forged0, forged1, before_public, after_public, before_secret, after_secret;

	(void)state;
	assert_true(unmix64(mix64(12345)) == 12345);
	OK(ks_gpukit_generate(kit, buf, KS_DTYPE_FLOAT32, (int64_t)bytes / 4,
			      &(struct ks_generator){ .kind = KS_GEN_UNIFORM, .a = -1, .b = 1 }, NULL, 9,
			      &err));
	download(host, buf, bytes);
	memcpy(&w0, host, 8);
	memcpy(&w1, host + 8, 8);
	/* change word 0 at will, then solve word 1 so the public-key sum is unchanged */
	forged0 = w0 ^ 0xdeadbeefull;
	forged1 = (unmix64(word_term(w0, 0, &public_key) + word_term(w1, 1, &public_key) -
			   word_term(forged0, 0, &public_key)) -
		   mix64(1 ^ public_key.k1)) ^
		  public_key.k0;
	OK(ks_gpukit_checksum(kit, buf, bytes, NULL, &before_public, &err));
	OK(ks_gpukit_checksum(kit, buf, bytes, &secret, &before_secret, &err));
	assert_true(before_secret == host_checksum_keyed(host, bytes, &secret));
	CU_OK(cu->memcpy_htod(buf, &forged0, 8));
	CU_OK(cu->memcpy_htod(buf + 8, &forged1, 8));
	CU_OK(cu->ctx_synchronize());
	OK(ks_gpukit_checksum(kit, buf, bytes, NULL, &after_public, &err));
	OK(ks_gpukit_checksum(kit, buf, bytes, &secret, &after_secret, &err));
	printf("  two words forged to balance the public-key sum: public %s, secret-key %s\n",
	       after_public == before_public ? "unchanged (fooled)" : "changed",
	       after_secret == before_secret ? "UNCHANGED" : "changed (caught)");
	assert_true(after_public == before_public); /* the forgery works against a known key */
	assert_true(after_secret != before_secret);
	free(host);
	dev_free(buf);
}

/*
 * Guard bands: filled from the pattern at each region's offset, intact,
 * then one byte changed in one region is found, and where; a band
 * rewritten together with the device's copy of the pattern is found once
 * the pattern is uploaded again from the host's copy (as the worker does
 * before every check).
 */
static void guards_find_one_changed_byte(void **state)
{
	enum { PATTERN = 4096 };
	const size_t region_bytes = 4099;
	CUdeviceptr a = dev_alloc(region_bytes), b = dev_alloc(region_bytes + 5),
		    table = dev_alloc(2 * sizeof(struct ks_guard_region)), result = dev_alloc(16),
		    pattern = dev_alloc(PATTERN);
	struct ks_guard_region regions[2] = { { a, region_bytes, 77 }, { b + 5, region_bytes, 78 } };
	unsigned char host_pattern[PATTERN], band[region_bytes];
	uint64_t found[2];
	unsigned char byte;

	(void)state;
	for (size_t i = 0; i < PATTERN; i++)
		host_pattern[i] = (unsigned char)(i * 2654435761u >> 13);
	upload(pattern, host_pattern, PATTERN);
	upload(table, regions, sizeof(regions));
	assert_int_equal(ks_gpukit_guards(kit, table, 2, region_bytes, pattern, 3000, 0, &err), -1);
	assert_contains(err.msg, "power of two");
	OK(ks_gpukit_guards(kit, table, 2, region_bytes, pattern, PATTERN, 0, &err));
	OK(ks_gpukit_guards(kit, table, 2, region_bytes, pattern, PATTERN, result, &err));
	CU_OK(cu->stream_synchronize(ks_gpukit_stream(kit)));
	CU_OK(cu->memcpy_dtoh(found, result, 16));
	assert_true(found[0] == 0);
	assert_true(found[1] == ~0ull);
	/* each band is the pattern from its own offset, wrapping */
	CU_OK(cu->memcpy_dtoh(band, b + 5, region_bytes));
	for (size_t o = 0; o < region_bytes; o++)
		assert_int_equal(band[o], host_pattern[(78 + o) & (PATTERN - 1)]);
	CU_OK(cu->memcpy_dtoh(&byte, b + 5 + 4098, 1));
	byte ^= 0x10;
	upload(b + 5 + 4098, &byte, 1);
	OK(ks_gpukit_guards(kit, table, 2, region_bytes, pattern, PATTERN, result, &err));
	CU_OK(cu->stream_synchronize(ks_gpukit_stream(kit)));
	CU_OK(cu->memcpy_dtoh(found, result, 16));
	printf("  one byte changed in region 1 at 4098: %llu bad, first at region %llu offset %llu\n",
	       (unsigned long long)found[0], (unsigned long long)(found[1] >> 40),
	       (unsigned long long)(found[1] & ((1ull << 40) - 1)));
	assert_true(found[0] == 1);
	assert_true(found[1] == (1ull << 40 | 4098));
	/* the forger's move: the device pattern rewritten to match the changed band ... */
	upload(pattern + ((78 + 4098) & (PATTERN - 1)), &byte, 1);
	/* ... is undone by uploading the host's copy before the check */
	upload(pattern, host_pattern, PATTERN);
	OK(ks_gpukit_guards(kit, table, 2, region_bytes, pattern, PATTERN, result, &err));
	CU_OK(cu->stream_synchronize(ks_gpukit_stream(kit)));
	CU_OK(cu->memcpy_dtoh(found, result, 16));
	printf("  after the host's pattern is uploaded again: %llu bad\n", (unsigned long long)found[0]);
	assert_true(found[0] == 1);
	dev_free(pattern);
	dev_free(a);
	dev_free(b);
	dev_free(table);
	dev_free(result);
}

/* What a kernel leaves in shared memory is gone after a scrub. */
static void scrub_overwrites_what_a_kernel_left_in_shared_memory(void **state)
{
	static const char src[] =
		"extern \"C\" __global__ void leave(unsigned n) {\n"
		"  extern __shared__ unsigned s[]; volatile unsigned *v = s;\n"
		"  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) v[i] = 0x5a5a0000u + i; }\n"
		"extern \"C\" __global__ void look(unsigned n, unsigned *found) {\n"
		"  extern __shared__ unsigned s[]; volatile unsigned *v = s; unsigned c = 0;\n"
		"  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) c += (v[i] & 0xffff0000u) == "
		"0x5a5a0000u;\n"
		"  atomicAdd(found, c); }\n";
	struct ks_compile_request req = { .source = src,
					  .source_name = "scrub-test.cu",
					  .resources_optional = 1 };
	struct ks_compile_result res;
	CUmodule mod;
	CUfunction leave, look;
	CUdeviceptr found_dev = dev_alloc(4);
	unsigned int words = 12 * 1024, before = 0, after = 0, zero = 0;
	void *leave_args[] = { &words }, *look_args[] = { &words, &found_dev };
	int sms = 0;
	char arch[16];
	struct ks_gpu_info info;

	(void)state;
	OK(ks_cuda_device_info(0, &info, &err));
	ks_gpu_arch(&info, arch, sizeof(arch));
	req.arch = arch;
	sms = info.sm_count;
	OK(ks_nvrtc_compile(&req, &res, &err));
	CU_OK(cu->module_load_data(&mod, res.cubin));
	CU_OK(cu->module_get_function(&leave, mod, "leave"));
	CU_OK(cu->module_get_function(&look, mod, "look"));
	/* leave a pattern, look for it in a later launch: without a scrub it is usually still there */
	upload(found_dev, &zero, 4);
	CU_OK(cu->launch_kernel(leave, (unsigned)sms, 1, 1, 256, 1, 1, 4 * words, ks_gpukit_stream(kit),
				leave_args, NULL));
	CU_OK(cu->launch_kernel(look, (unsigned)sms, 1, 1, 256, 1, 1, 4 * words, ks_gpukit_stream(kit),
				look_args, NULL));
	CU_OK(cu->stream_synchronize(ks_gpukit_stream(kit)));
	CU_OK(cu->memcpy_dtoh(&before, found_dev, 4));
	upload(found_dev, &zero, 4);
	CU_OK(cu->launch_kernel(leave, (unsigned)sms, 1, 1, 256, 1, 1, 4 * words, ks_gpukit_stream(kit),
				leave_args, NULL));
	OK(ks_gpukit_scrub_shared(kit, &err));
	CU_OK(cu->launch_kernel(look, (unsigned)sms, 1, 1, 256, 1, 1, 4 * words, ks_gpukit_stream(kit),
				look_args, NULL));
	CU_OK(cu->stream_synchronize(ks_gpukit_stream(kit)));
	CU_OK(cu->memcpy_dtoh(&after, found_dev, 4));
	printf("  words of a earlier launch's shared memory seen by a later one: %u without a scrub, %u "
	       "after\n",
	       before, after);
	assert_true(after == 0);
	/*
	 * Every SM, every time: many small blocks leave the pattern all over
	 * every SM, 300 times, each time scrubbed before blocks placed
	 * elsewhere look for it.  First in the driver's default carveout
	 * (printed only: on an H200 about 1 KB per SM outlives the scrub),
	 * then in the largest, as the worker runs every kernel: nothing.
	 */
	for (int largest = 0; largest < 2; largest++) {
		unsigned int small = 2048, grid = 16u * (unsigned)sms;
		void *small_leave[] = { &small }, *small_look[] = { &small, &found_dev };

		if (largest) {
			CU_OK(cu->func_set_attribute(leave,
						     CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
						     CU_SHAREDMEM_CARVEOUT_MAX_SHARED));
			CU_OK(cu->func_set_attribute(look, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
						     CU_SHAREDMEM_CARVEOUT_MAX_SHARED));
		}
		upload(found_dev, &zero, 4);
		for (int i = 0; i < 300; i++) {
			CU_OK(cu->launch_kernel(leave, grid, 1, 1, 256, 1, 1, 4 * small,
						ks_gpukit_stream(kit), small_leave, NULL));
			OK(ks_gpukit_scrub_shared(kit, &err));
			CU_OK(cu->launch_kernel(look, grid, 1, 1, 256, 1, 1, 4 * small, ks_gpukit_stream(kit),
						small_look, NULL));
		}
		CU_OK(cu->stream_synchronize(ks_gpukit_stream(kit)));
		CU_OK(cu->memcpy_dtoh(&after, found_dev, 4));
		printf("  300 scrubs between many small blocks, %s carveout: %u words seen\n",
		       largest ? "the largest" : "the default", after);
	}
	assert_true(after == 0);

	cu->module_unload(mod);
	ks_compile_result_release(&res);
	dev_free(found_dev);
}

/* The device comparison counts exactly the elements compare.h fails, for every dtype. */
static void device_compare_agrees_with_the_host(void **state)
{
	static const enum ks_dtype dtypes[] = { KS_DTYPE_BFLOAT16, KS_DTYPE_FLOAT16, KS_DTYPE_FLOAT32,
						KS_DTYPE_INT32, KS_DTYPE_INT64 };
	const int64_t n = 100003;

	(void)state;
	for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
		enum ks_dtype dtype = dtypes[d];
		size_t bytes = (size_t)n * ks_dtype_size(dtype);
		CUdeviceptr got = dev_alloc(bytes), ref = dev_alloc(bytes), result = dev_alloc(16);
		unsigned char *hg = ks_malloc(bytes), *hr = ks_malloc(bytes);
		struct ks_generator gen = { .kind = KS_GEN_UNIFORM, .a = -3, .b = 3 };
		struct ks_generator ints = { .kind = KS_GEN_CONST, .a = 7 };
		struct ks_compare_report report;
		uint64_t found[2];
		int is_int = dtype == KS_DTYPE_INT32 || dtype == KS_DTYPE_INT64;

		OK(ks_gpukit_generate(kit, ref, dtype, n, is_int ? &ints : &gen, NULL, 11, &err));
		download(hr, ref, bytes);
		memcpy(hg, hr, bytes);
		/* a few elements off by a lot, one NaN-ish byte pattern, the last element */
		for (int64_t i = 5; i < n; i += 9973)
			hg[(size_t)i * ks_dtype_size(dtype)] ^= 0x40;
		memset(hg + (size_t)(n / 2) * ks_dtype_size(dtype), 0xff, ks_dtype_size(dtype));
		hg[bytes - 1] ^= 0x20;
		upload(got, hg, bytes);
		OK(ks_gpukit_compare(kit, dtype, got, ref, n, 0.001, 0.01, result, &err));
		CU_OK(cu->stream_synchronize(ks_gpukit_stream(kit)));
		CU_OK(cu->memcpy_dtoh(found, result, 16));
		ks_compare(dtype, hg, hr, n, 0.001, 0.01, &report);
		printf("  %s: device %llu failing (first %llu), host %lld (first %lld)\n",
		       ks_dtype_name(dtype), (unsigned long long)found[0], (unsigned long long)found[1],
		       (long long)report.mismatches,
		       report.n_first ? (long long)report.first[0].index : -1LL);
		assert_true(report.mismatches > 0);
		assert_true(found[0] == (uint64_t)report.mismatches);
		assert_true(found[1] == (uint64_t)report.first[0].index);
		/* identical buffers: nothing fails */
		OK(ks_gpukit_compare(kit, dtype, ref, ref, n, 0, 0, result, &err));
		CU_OK(cu->stream_synchronize(ks_gpukit_stream(kit)));
		CU_OK(cu->memcpy_dtoh(found, result, 16));
		assert_true(found[0] == 0 && found[1] == ~0ull);
		free(hg);
		free(hr);
		dev_free(got);
		dev_free(ref);
		dev_free(result);
	}
}

static void poison_reads_as_nan(void **state)
{
	const struct ks_generator gen = { .kind = KS_GEN_CONST, .a = 1 };
	const size_t bytes = 1 << 16;
	CUdeviceptr buf = dev_alloc(bytes);
	unsigned char *host = ks_malloc(bytes);

	(void)state;
	/* Poison after real values, as before each candidate launch. */
	OK(ks_gpukit_generate(kit, buf, KS_DTYPE_FLOAT32, (int64_t)bytes / 4, &gen, NULL, 1, &err));
	OK(ks_gpukit_poison(kit, buf, bytes, &err));
	download(host, buf, bytes);
	for (size_t d = 0; d < sizeof(float_dtypes) / sizeof(float_dtypes[0]); d++) {
		int64_t n = (int64_t)(bytes / ks_dtype_size(float_dtypes[d])), nan = 0;

		for (int64_t i = 0; i < n; i++)
			nan += isnan(ks_element(float_dtypes[d], host, i));
		printf("  poisoned %zu bytes read as %s: %lld of %lld NaN\n", bytes,
		       ks_dtype_name(float_dtypes[d]), (long long)nan, (long long)n);
		assert_int_equal(nan, n);
	}
	free(host);
	dev_free(buf);
}

static void flush_l2_runs_on_the_stream(void **state)
{
	CUevent start, end;
	float ms = 0;

	(void)state;
	CU_OK(cu->event_create(&start, CU_EVENT_DEFAULT));
	CU_OK(cu->event_create(&end, CU_EVENT_DEFAULT));
	OK(ks_gpukit_flush_l2(kit, &err)); /* warm-up */
	CU_OK(cu->event_record(start, ks_gpukit_stream(kit)));
	OK(ks_gpukit_flush_l2(kit, &err));
	CU_OK(cu->event_record(end, ks_gpukit_stream(kit)));
	CU_OK(cu->event_synchronize(end));
	CU_OK(cu->event_elapsed_time(&ms, start, end));
	printf("  one L2 flush: %.3f ms\n", ms);
	assert_true(ms > 0);
	CU_OK(cu->event_destroy(start));
	CU_OK(cu->event_destroy(end));
}

static void scalar_draws_follow_their_generator(void **state)
{
	const struct ks_generator c = { .kind = KS_GEN_CONST, .a = 0.08838834764831845 };
	const struct ks_generator normal = { .kind = KS_GEN_NORMAL, .a = 1, .b = 3 };
	const struct ks_generator uniform = { .kind = KS_GEN_UNIFORM, .a = 2, .b = 5 };
	double sum = 0, sum2 = 0, lo = INFINITY, hi = -INFINITY, mean, std;
	const int n = 100000;

	(void)state;
	assert_true(ks_gpukit_scalar(&c, 1) == 0.08838834764831845);
	assert_true(ks_gpukit_scalar(&normal, 5) == ks_gpukit_scalar(&normal, 5));
	assert_true(ks_gpukit_scalar(&normal, 5) != ks_gpukit_scalar(&normal, 6));
	for (int i = 0; i < n; i++) {
		double v = ks_gpukit_scalar(&normal, (uint64_t)i),
		       u = ks_gpukit_scalar(&uniform, (uint64_t)i);

		sum += v;
		sum2 += v * v;
		lo = u < lo ? u : lo;
		hi = u > hi ? u : hi;
	}
	mean = sum / n;
	std = sqrt(sum2 / n - mean * mean);
	printf("  scalar normal(1, 3) over %d seeds: mean %.4f (1 +- 0.05), std %.4f (3 +- 0.05); "
	       "uniform[2, 5): %.6f..%.6f\n",
	       n, mean, std, lo, hi);
	assert_true(fabs(mean - 1) < 0.05);
	assert_true(fabs(std - 3) < 0.05);
	assert_true(lo >= 2 && hi < 5);
}

static int is_slug(const char *s)
{
	if (!*s || *s == '-' || s[strlen(s) - 1] == '-')
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-'))
			return 0;
	return 1;
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void print_profile(const struct ks_device_profile *p)
{
	printf("  profile: %s (slug %s, %s, cc %d.%d): %d SMs, L2 %d KiB, %zu MiB memory, "
	       "smem %d KiB/block opt-in, %d KiB/SM, %d regs/SM, %d threads/SM\n",
	       p->name, p->slug, p->arch, p->cc_major, p->cc_minor, p->sm_count, p->l2_bytes / 1024,
	       p->total_mem / MIB, p->max_smem_per_block_optin / 1024, p->max_smem_per_sm / 1024,
	       p->regs_per_sm, p->max_threads_per_sm);
	printf("  profile: DRAM %.0f GB/s measured (want 500..10000); peaks fp32 %.1f, bf16 %.1f "
	       "TFLOP/s (%s)\n",
	       p->dram_gbps, p->peak_fp32_tflops, p->peak_bf16_tflops, p->peak_source);
}

static void profile_is_sane_and_its_cache_round_trips(void **state)
{
	struct ks_device_profile first, second, third, uncached;
	char *tmp = test_tmpdir();
	char *cache = ks_path_join(tmp, "cache/devices");
	char *file;
	int cached = -1;

	(void)state;
	OK(ks_gpukit_profile(kit, cache, &first, &cached, &err));
	print_profile(&first);
	assert_int_equal(cached, 0);
	assert_true(is_slug(first.slug));
	assert_int_equal(strncmp(first.arch, "sm_", 3), 0);
	assert_true(first.cc_major >= 7);
	assert_true(first.sm_count > 0 && first.sm_count < 1000);
	assert_true(first.l2_bytes > 0);
	assert_true(first.total_mem >= ((size_t)1 << 30));
	assert_true(first.max_smem_per_block_optin >= 48 * 1024);
	assert_true(first.max_smem_per_sm >= first.max_smem_per_block_optin);
	assert_true(first.regs_per_sm >= 32768);
	assert_true(first.max_threads_per_sm >= 1024);
	assert_true(first.dram_gbps > 500 && first.dram_gbps < 10000);
	assert_true(first.peak_fp32_tflops > 1 && first.peak_fp32_tflops < 1000);
	assert_true(first.peak_bf16_tflops > first.peak_fp32_tflops);
	assert_true(first.peak_source[0] != '\0');
	if (strstr(first.name, "H100") || strstr(first.name, "H200"))
		assert_int_equal(strncmp(first.peak_source, "table:", 6), 0);

	file = ks_asprintf("%s/%s.json", cache, first.slug);
	assert_int_equal(access(file, R_OK), 0);
	assert_int_equal(count_entries(cache), 1); /* no temporary file left behind */

	OK(ks_gpukit_profile(kit, cache, &second, &cached, &err));
	printf("  second call: cached %d, DRAM %.3f GB/s (first %.3f)\n", cached, second.dram_gbps,
	       first.dram_gbps);
	assert_int_equal(cached, 1);
	assert_true(second.dram_gbps == first.dram_gbps);
	assert_string_equal(second.name, first.name);
	assert_string_equal(second.slug, first.slug);
	assert_int_equal(second.sm_count, first.sm_count);
	assert_true(second.peak_bf16_tflops == first.peak_bf16_tflops);

	test_write(cache, strrchr(file, '/') + 1, "{ not json");
	OK(ks_gpukit_profile(kit, cache, &third, &cached, &err));
	printf("  after corrupting the cache: cached %d, DRAM %.0f GB/s re-measured\n", cached,
	       third.dram_gbps);
	assert_int_equal(cached, 0);
	assert_true(fabs(third.dram_gbps - first.dram_gbps) < 0.2 * first.dram_gbps);
	OK(ks_gpukit_profile(kit, cache, &third, &cached, &err));
	assert_int_equal(cached, 1); /* rewritten */

	OK(ks_gpukit_profile(kit, NULL, &uncached, &cached, &err));
	printf("  without a cache folder: cached %d, DRAM %.0f GB/s\n", cached, uncached.dram_gbps);
	assert_int_equal(cached, 0);
	assert_true(uncached.dram_gbps > 500);

	free(file);
	free(cache);
	test_rmtree(tmp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(normal_has_the_requested_mean_and_std),
		cmocka_unit_test(uniform_stays_in_low_high),
		cmocka_unit_test(const_is_exact_and_writes_only_numel),
		cmocka_unit_test(same_seed_same_bytes_other_seed_other_bytes),
		cmocka_unit_test(float_generators_refuse_integer_tensors),
		cmocka_unit_test(indptr_random_lengths_sum_to_total_and_respect_min),
		cmocka_unit_test(indptr_split_kinds_keep_their_shape),
		cmocka_unit_test(indptr_explicit_lengths_are_honoured),
		cmocka_unit_test(indptr_start_offsets_the_requests),
		cmocka_unit_test(page_permutation_is_distinct_and_in_range),
		cmocka_unit_test(checksum_is_stable_and_sees_any_change),
		cmocka_unit_test(keyed_checksum_defeats_a_balanced_forgery),
		cmocka_unit_test(guards_find_one_changed_byte),
		cmocka_unit_test(device_compare_agrees_with_the_host),
		cmocka_unit_test(scrub_overwrites_what_a_kernel_left_in_shared_memory),
		cmocka_unit_test(poison_reads_as_nan),
		cmocka_unit_test(flush_l2_runs_on_the_stream),
		cmocka_unit_test(scalar_draws_follow_their_generator),
		cmocka_unit_test(profile_is_sane_and_its_cache_round_trips),
	};
	struct ks_error e;
	int count = 0;

	/* Plain lines for a batch log, in order with cmocka's own output. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (ks_cuda_load(&cu, &e)) {
		printf("SKIP test_gpukit: %s\n", e.msg);
		return 77;
	}
	if (ks_cuda_device_count(&count, &e)) {
		printf("SKIP test_gpukit: %s\n", e.msg);
		return 77;
	}
	if (count == 0) {
		printf("SKIP test_gpukit: the driver sees no GPU\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, open_kit, close_kit);
}
