#!/usr/bin/env bash
# tools/cubin-launch.cu and tools/cubin-launch-kernels.cu (a cubin's kernels loaded and launched
# through the driver's library API with no libcuda at link time: how an export carries
# NVRTC's cubin instead of the candidate's text; docs/design.md, "Threat model") must
# build, with nvcc's warnings as errors, and the launcher must refuse to run without a cubin.
# They run on a GPU only; without nvcc the test reports 77.
. "$(dirname "$0")/lib.sh"

if ! [ -x "$nvcc" ]; then
	skip_part "no nvcc (looked in $cuda/bin and on PATH; set NVCC): cubin-launch is not compiled"
	done_ok
fi
run 0 "$nvcc" -cubin -arch=sm_90a -o "$TMP/k.cubin" tools/cubin-launch-kernels.cu
[ -s "$TMP/k.cubin" ] || fail "no cubin"
run 0 "$nvcc" -O2 -std=c++17 -arch=sm_90a -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
	-o "$TMP/cubin-launch" tools/cubin-launch.cu
# nothing links libcuda: the driver's functions come through the runtime's entry points
if command -v readelf >/dev/null 2>&1; then
	readelf -d "$TMP/cubin-launch" | grep -q 'libcuda\.so' && fail "cubin-launch links libcuda"
	checks=$((checks + 1))
fi
run 2 "$TMP/cubin-launch"
out_has "usage: cubin-launch FILE.cubin"
done_ok
