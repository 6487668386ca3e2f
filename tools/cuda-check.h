// cuda-check.h - CK(call): a CUDA runtime call that must succeed; on an error the standalone
// GPU tools (tools/mla-timeline.cu, tools/mla-trace.cu, tools/gqa-trace.cu) print the call and
// the error and exit 1.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(x)                                                                                                \
	do {                                                                                                 \
		cudaError_t e_ = (x);                                                                        \
		if (e_ != cudaSuccess) {                                                                     \
			printf("%s: %s\n", #x, cudaGetErrorString(e_));                                      \
			exit(1);                                                                             \
		}                                                                                            \
	} while (0)
