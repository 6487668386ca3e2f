/*
 * devpool.c - device memory a GPU worker keeps between evaluations
 * (devpool.h says why).
 */
#include "ksearch/evaluate/devpool.h"

#include <stdlib.h>
#include <string.h>

#include "ksearch/base/util.h"

void ks_devpool_init(struct ks_devpool *pool, const struct ks_cuda *cu, size_t limit_bytes)
{
	memset(pool, 0, sizeof(*pool));
	pool->cu = cu;
	pool->limit_bytes = limit_bytes;
}

/* Free the i-th kept buffer and close the gap, keeping the order (oldest first). */
static void drop(struct ks_devpool *pool, size_t i)
{
	pool->cu->mem_free(pool->kept[i].ptr);
	pool->held_bytes -= pool->kept[i].bytes;
	memmove(&pool->kept[i], &pool->kept[i + 1], (pool->n - i - 1) * sizeof(*pool->kept));
	pool->n--;
}

CUresult ks_devpool_get(struct ks_devpool *pool, size_t bytes, CUdeviceptr *ptr)
{
	CUresult rc;

	/* the newest of the size: the likeliest still in the caches' and TLBs' favour */
	for (size_t i = pool->n; i-- > 0;) {
		if (pool->kept[i].bytes != bytes)
			continue;
		*ptr = pool->kept[i].ptr;
		pool->held_bytes -= bytes;
		memmove(&pool->kept[i], &pool->kept[i + 1], (pool->n - i - 1) * sizeof(*pool->kept));
		pool->n--;
		pool->hits++;
		return CUDA_SUCCESS;
	}
	pool->misses++;
	rc = pool->cu->mem_alloc(ptr, bytes);
	if (rc == CUDA_ERROR_OUT_OF_MEMORY && pool->n) {
		ks_devpool_drain(pool);
		rc = pool->cu->mem_alloc(ptr, bytes);
	}
	if (rc != CUDA_SUCCESS)
		*ptr = 0;
	return rc;
}

void ks_devpool_put(struct ks_devpool *pool, CUdeviceptr ptr, size_t bytes)
{
	if (!ptr)
		return;
	if (bytes > pool->limit_bytes) {
		pool->cu->mem_free(ptr);
		return;
	}
	while (pool->n && pool->held_bytes + bytes > pool->limit_bytes)
		drop(pool, 0);
	KS_ALLOC_GROW(pool->kept, pool->n + 1, pool->alloc);
	pool->kept[pool->n++] = (struct ks_devpool_entry){ ptr, bytes };
	pool->held_bytes += bytes;
}

void ks_devpool_drain(struct ks_devpool *pool)
{
	for (size_t i = 0; i < pool->n; i++)
		pool->cu->mem_free(pool->kept[i].ptr);
	pool->n = 0;
	pool->held_bytes = 0;
}

void ks_devpool_release(struct ks_devpool *pool)
{
	ks_devpool_drain(pool);
	free(pool->kept);
	pool->kept = NULL;
	pool->alloc = 0;
}
