#!/usr/bin/env bash
# tools/launch-cost.cu (what an exported launcher costs the host per call; BENCHMARKS.md, "What
# the exported launcher costs the host") must build against rmsnorm's export, with nvcc's
# warnings as errors.  It runs on a GPU only; without nvcc the test reports 77.
. "$(dirname "$0")/lib.sh"

if ! [ -x "$nvcc" ]; then
	skip_part "no nvcc (looked in $cuda/bin and on PATH; set NVCC): launch-cost is not compiled"
	done_ok
fi
run 0 "$KSEARCH" archive import tests/fixtures/export-rmsnorm.json --archive "$TMP/ar"
run 0 "$KSEARCH" export-best --op rmsnorm --archive "$TMP/ar" -o "$TMP/x" --name rms
run 0 "$nvcc" -O2 -std=c++17 -arch=sm_90a -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
	-I "$TMP/x" -o "$TMP/launch-cost" tools/launch-cost.cu "$TMP/x/rms.cu"
[ -x "$TMP/launch-cost" ] || fail "no launch-cost binary"
checks=$((checks + 1))
done_ok
