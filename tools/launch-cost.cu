/*
 * What an exported launcher costs the host: rmsnorm's export (NAME.h/NAME.cu
 * of `ksearch export-best --op rmsnorm --name rms`) launched back to back, and
 * timed as a caller times one call (an event before and after it), for 1 and
 * 64 rows.  It shows the cost of the launcher's own work per call (driver
 * entry points, attributes), which a kernel of a few microseconds cannot hide.
 *
 *   nvcc -std=c++17 -arch=sm_90a -I EXPORT_DIR tools/launch-cost.cu EXPORT_DIR/rms.cu -o launch-cost
 *   ./launch-cost LABEL
 */
#include "rms.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

static int fail(const char *what, cudaError_t err)
{
	fprintf(stderr, "launch-cost: %s: %s\n", what, cudaGetErrorString(err));
	return 1;
}

int main(int argc, char **argv)
{
	const char *label = argc > 1 ? argv[1] : "export";
	const int hidden = 4096, max_rows = 64, calls = 20000, timed = 400;
	__nv_bfloat16 *x, *w, *y;
	cudaStream_t stream;
	cudaEvent_t start, end;
	cudaError_t err;

	if ((err = cudaMalloc(&x, sizeof(*x) * hidden * max_rows)) != cudaSuccess ||
	    (err = cudaMalloc(&w, sizeof(*w) * hidden)) != cudaSuccess ||
	    (err = cudaMalloc(&y, sizeof(*y) * hidden * max_rows)) != cudaSuccess ||
	    (err = cudaMemset(x, 0, sizeof(*x) * hidden * max_rows)) != cudaSuccess ||
	    (err = cudaMemset(w, 0, sizeof(*w) * hidden)) != cudaSuccess ||
	    (err = cudaStreamCreate(&stream)) != cudaSuccess || (err = cudaEventCreate(&start)) != cudaSuccess ||
	    (err = cudaEventCreate(&end)) != cudaSuccess)
		return fail("setup", err);
	for (int rows : {1, 64}) {
		for (int i = 0; i < 100; i++)
			if ((err = rms_launch(x, w, 1e-6f, y, rows, nullptr, 0, stream)) != cudaSuccess)
				return fail("warm-up launch", err);
		if ((err = cudaStreamSynchronize(stream)) != cudaSuccess)
			return fail("warm-up", err);

		/* back to back: the host's cost of one call */
		auto t0 = std::chrono::steady_clock::now();
		for (int i = 0; i < calls; i++)
			rms_launch(x, w, 1e-6f, y, rows, nullptr, 0, stream);
		auto t1 = std::chrono::steady_clock::now();
		if ((err = cudaStreamSynchronize(stream)) != cudaSuccess)
			return fail("back-to-back launches", err);
		auto t2 = std::chrono::steady_clock::now();
		double host_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / calls;
		double all_us = std::chrono::duration<double, std::micro>(t2 - t0).count() / calls;

		/* one call between two events, on an idle GPU, as a benchmark harness times it */
		std::vector<float> ms;
		for (int i = 0; i < timed; i++) {
			cudaEventRecord(start, stream);
			rms_launch(x, w, 1e-6f, y, rows, nullptr, 0, stream);
			cudaEventRecord(end, stream);
			if ((err = cudaEventSynchronize(end)) != cudaSuccess)
				return fail("timed launch", err);
			float t;
			cudaEventElapsedTime(&t, start, end);
			ms.push_back(t);
		}
		std::sort(ms.begin(), ms.end());
		printf("%-14s rows %3d  host per call %6.2f us  back to back %6.2f us  "
		       "one call between events: median %6.2f us, p10 %6.2f, p90 %6.2f\n",
		       label, rows, host_us, all_us, 1e3 * ms[timed / 2], 1e3 * ms[timed / 10],
		       1e3 * ms[timed * 9 / 10]);
	}
	return 0;
}
