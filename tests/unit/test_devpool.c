/*
 * test_devpool.c - the device memory a GPU worker keeps between
 * evaluations, against a driver of our own: a buffer comes back for the
 * next request of its size, never for another size, never twice; the pool
 * keeps no more than its limit (the oldest go first); a driver out of
 * memory gets everything kept back before the request fails; and nothing
 * is freed twice or leaked.
 */
#include "testlib.h"

#include "ksearch/evaluate/devpool.h"

/* The fake driver: live allocations by address, and a memory capacity. */
#define MAX_LIVE 64
static struct {
	CUdeviceptr ptr[MAX_LIVE];
	size_t bytes[MAX_LIVE];
	size_t n, used, capacity;
	CUdeviceptr next;
	int allocs, frees, bad_frees;
} drv;

static CUresult fake_alloc(CUdeviceptr *ptr, size_t bytes)
{
	if (drv.used + bytes > drv.capacity || drv.n == MAX_LIVE)
		return CUDA_ERROR_OUT_OF_MEMORY;
	drv.next += 1 << 20;
	drv.ptr[drv.n] = drv.next;
	drv.bytes[drv.n++] = bytes;
	drv.used += bytes;
	drv.allocs++;
	*ptr = drv.next;
	return CUDA_SUCCESS;
}

static CUresult fake_free(CUdeviceptr ptr)
{
	for (size_t i = 0; i < drv.n; i++) {
		if (drv.ptr[i] != ptr)
			continue;
		drv.used -= drv.bytes[i];
		drv.ptr[i] = drv.ptr[drv.n - 1];
		drv.bytes[i] = drv.bytes[--drv.n];
		drv.frees++;
		return CUDA_SUCCESS;
	}
	drv.bad_frees++;
	return CUDA_ERROR_INVALID_VALUE;
}

static struct ks_cuda fake_cu = { .mem_alloc = fake_alloc, .mem_free = fake_free };

static int setup(void **state)
{
	(void)state;
	memset(&drv, 0, sizeof(drv));
	drv.capacity = 1000;
	return 0;
}

static void test_a_buffer_comes_back_for_its_size_only(void **state)
{
	struct ks_devpool pool;
	CUdeviceptr a, b, c, d;

	(void)state;
	ks_devpool_init(&pool, &fake_cu, 500);
	assert_int_equal(ks_devpool_get(&pool, 100, &a), CUDA_SUCCESS);
	assert_int_equal(ks_devpool_get(&pool, 200, &b), CUDA_SUCCESS);
	ks_devpool_put(&pool, a, 100);
	ks_devpool_put(&pool, b, 200);
	assert_int_equal(pool.held_bytes, 300);
	/* another size: the driver's */
	assert_int_equal(ks_devpool_get(&pool, 150, &c), CUDA_SUCCESS);
	assert_true(c != a && c != b);
	/* the same sizes: the kept ones, once each */
	assert_int_equal(ks_devpool_get(&pool, 200, &d), CUDA_SUCCESS);
	assert_true(d == b);
	assert_int_equal(ks_devpool_get(&pool, 100, &d), CUDA_SUCCESS);
	assert_true(d == a);
	assert_int_equal(ks_devpool_get(&pool, 100, &d), CUDA_SUCCESS);
	assert_true(d != a && d != b && d != c);
	assert_int_equal(pool.hits, 2);
	assert_int_equal(pool.misses, 4);
	assert_int_equal(drv.allocs, 4);
	assert_int_equal(drv.frees, 0);
	assert_int_equal(pool.held_bytes, 0);
	ks_devpool_put(&pool, a, 100);
	ks_devpool_put(&pool, b, 200);
	ks_devpool_put(&pool, c, 150);
	ks_devpool_put(&pool, d, 100);
	ks_devpool_put(&pool, 0, 100); /* nothing: ignored */
	ks_devpool_release(&pool);
	assert_int_equal(drv.n, 0);
	assert_int_equal(drv.frees, 4);
	assert_int_equal(drv.bad_frees, 0);
}

static void test_the_limit_frees_the_oldest(void **state)
{
	struct ks_devpool pool;
	CUdeviceptr p[4], got;

	(void)state;
	ks_devpool_init(&pool, &fake_cu, 250);
	for (int i = 0; i < 4; i++)
		assert_int_equal(ks_devpool_get(&pool, 100, &p[i]), CUDA_SUCCESS);
	for (int i = 0; i < 4; i++)
		ks_devpool_put(&pool, p[i], 100);
	/* two fit under 250: p[0] and p[1] went back to the driver, in that order */
	assert_int_equal(pool.n, 2);
	assert_int_equal(pool.held_bytes, 200);
	assert_int_equal(drv.n, 2);
	assert_int_equal(ks_devpool_get(&pool, 100, &got), CUDA_SUCCESS);
	assert_true(got == p[3]); /* the newest first */
	ks_devpool_put(&pool, got, 100);
	/* larger than the limit: never kept */
	assert_int_equal(ks_devpool_get(&pool, 300, &got), CUDA_SUCCESS);
	ks_devpool_put(&pool, got, 300);
	assert_int_equal(pool.held_bytes, 200);
	assert_int_equal(drv.n, 2);
	ks_devpool_release(&pool);
	assert_int_equal(drv.n, 0);
	assert_int_equal(drv.bad_frees, 0);
}

static void test_out_of_memory_drains_then_retries(void **state)
{
	struct ks_devpool pool;
	CUdeviceptr a, b, c;

	(void)state;
	ks_devpool_init(&pool, &fake_cu, 1000);
	assert_int_equal(ks_devpool_get(&pool, 400, &a), CUDA_SUCCESS);
	assert_int_equal(ks_devpool_get(&pool, 400, &b), CUDA_SUCCESS);
	ks_devpool_put(&pool, a, 400);
	ks_devpool_put(&pool, b, 400);
	/* 800 of 1000 kept: 300 more fits only once the pool lets go */
	assert_int_equal(ks_devpool_get(&pool, 300, &c), CUDA_SUCCESS);
	assert_int_equal(pool.n, 0);
	assert_int_equal(drv.n, 1);
	/* what cannot fit at all fails, with nothing handed out */
	assert_int_equal(ks_devpool_get(&pool, 800, &a), CUDA_ERROR_OUT_OF_MEMORY);
	assert_true(a == 0);
	ks_devpool_put(&pool, c, 300);
	ks_devpool_drain(&pool);
	assert_int_equal(drv.n, 0);
	/* still usable after a drain */
	assert_int_equal(ks_devpool_get(&pool, 300, &c), CUDA_SUCCESS);
	ks_devpool_put(&pool, c, 300);
	ks_devpool_release(&pool);
	assert_int_equal(drv.n, 0);
	assert_int_equal(drv.bad_frees, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_a_buffer_comes_back_for_its_size_only, setup),
		cmocka_unit_test_setup(test_the_limit_frees_the_oldest, setup),
		cmocka_unit_test_setup(test_out_of_memory_drains_then_retries, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
