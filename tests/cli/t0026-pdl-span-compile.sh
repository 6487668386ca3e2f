#!/usr/bin/env bash
# tools/pdl-span.cu (whether the timed span of a launch sequence waits for a kernel whose
# programmatic dependent launch ends first; BENCHMARKS.md, twenty-eighth session) must build,
# with nvcc's warnings as errors.  It runs on a GPU only; without nvcc the test reports 77.
. "$(dirname "$0")/lib.sh"

if ! [ -x "$nvcc" ]; then
	skip_part "no nvcc (looked in $cuda/bin and on PATH; set NVCC): pdl-span.cu is not compiled"
	done_ok
fi
run 0 "$nvcc" -O2 -std=c++17 -arch=sm_90a -cudart static -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
	-I "$KS_SOURCE_ROOT/tools" -o "$TMP/pdl-span" tools/pdl-span.cu
[ -x "$TMP/pdl-span" ] || fail "no binary"
checks=$((checks + 1))
done_ok
