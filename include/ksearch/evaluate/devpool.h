/*
 * devpool.h - device memory a GPU worker keeps between evaluations.
 *
 * An evaluation allocates and frees some four hundred buffers (inputs,
 * outputs and scratch of every workload and length split, with their guard
 * bands).  cuMemAlloc and cuMemFree go through the driver's kernel module,
 * whose locks every process on the host shares: with four workers on one
 * host, one evaluation in seven spent 0.4 s waiting on them (BENCHMARKS.md,
 * "Why evaluations slowed beside other workers").  The pool keeps what is
 * freed and hands it back to the next request of the same size, so that a
 * worker allocates once per size and holds its memory from one evaluation
 * to the next.
 *
 * What a pooled buffer held is not cleared: every user of one writes it
 * before it reads it (inputs are generated, outputs and scratch poisoned,
 * guard bands filled), as it had to with fresh memory, whose contents are
 * no cleaner.
 *
 *	struct ks_devpool pool;
 *	ks_devpool_init(&pool, cu, limit_bytes);
 *	rc = ks_devpool_get(&pool, bytes, &ptr);
 *	...
 *	ks_devpool_put(&pool, ptr, bytes);	(bytes as asked of get)
 *	ks_devpool_release(&pool);		(frees everything kept)
 *
 * Holds at most limit_bytes: beyond it the oldest kept buffers are freed.
 * When the driver has no memory for a request, everything kept is freed
 * and the request tried again.  Not thread-safe: one per worker.
 */
#ifndef KSEARCH_DEVPOOL_H
#define KSEARCH_DEVPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/evaluate/cuda.h"

struct ks_devpool_entry {
	CUdeviceptr ptr;
	size_t bytes;
};

struct ks_devpool {
	const struct ks_cuda *cu;      /* mem_alloc and mem_free */
	struct ks_devpool_entry *kept; /* oldest first */
	size_t n, alloc;
	size_t held_bytes, limit_bytes;
	uint64_t hits, misses; /* requests served from the pool, and by the driver */
};

void ks_devpool_init(struct ks_devpool *pool, const struct ks_cuda *cu, size_t limit_bytes);

/* A buffer of exactly bytes: one kept, else the driver's (after a drain when it is out of memory). */
CUresult ks_devpool_get(struct ks_devpool *pool, size_t bytes, CUdeviceptr *ptr);

/* Keep ptr (from ks_devpool_get(pool, bytes)) for the next request of its size. */
void ks_devpool_put(struct ks_devpool *pool, CUdeviceptr ptr, size_t bytes);

/* Free everything kept (the pool stays usable). */
void ks_devpool_drain(struct ks_devpool *pool);

/* Free everything kept, and the pool's own memory. */
void ks_devpool_release(struct ks_devpool *pool);

#endif
