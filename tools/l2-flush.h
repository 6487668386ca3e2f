// l2-flush.h - the two ways the timing tools flush the L2 before a timed run: a memset of a
// buffer larger than the L2, as ksearch and issue 24 time (the L2 is left full of dirty lines,
// which a kernel's first allocations must write back), or a read of it (clean lines).
// BENCHMARKS.md, "An L2 policy for MLA's rows, what the timing's flush costs".
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdlib>
#include <cstring>

/* reads n 16-byte words; sink is written only if the data says so (never, in practice) */
__global__ void l2_read_flush(const uint4 *p, size_t n, uint4 *sink)
{
	uint4 a = make_uint4(0, 0, 0, 0);
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		const uint4 v = p[i];
		a.x ^= v.x;
		a.y ^= v.y;
		a.z ^= v.z;
		a.w ^= v.w;
	}
	if (a.x == 0x12345678u && a.y == 0x9abcdef0u)
		*sink = a;
}

/* true when the environment variable var is "read" */
static inline bool l2_flush_by_read(const char *var)
{
	const char *v = getenv(var);
	return v && !strcmp(v, "read");
}

/* flush the L2 with bytes of buf: written with value, or read (sink: 16 bytes of device memory) */
static inline cudaError_t l2_flush(void *buf, size_t bytes, int value, bool read, uint4 *sink,
				   cudaStream_t st = 0)
{
	if (!read)
		return cudaMemsetAsync(buf, value, bytes, st);
	l2_read_flush<<<528, 512, 0, st>>>(static_cast<const uint4 *>(buf), bytes / 16, sink);
	return cudaGetLastError();
}
