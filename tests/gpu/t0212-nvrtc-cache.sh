#!/usr/bin/env bash
# NVRTC's own cache (12.9 and later; kept in the CUDA driver's compute cache, so
# only where a driver loads) answers a compile it has seen with the cubin and
# an empty log: without ptxas's resource report, which ksearch reads for every
# candidate.  The second `ksearch doctor` on a GPU machine reported NVRTC as
# broken (twenty-seventh session).  Here, with a compute cache of its own:
# doctor twice, then test_nvrtc (two equal compiles in one process), must both
# pass.
#
# Needs a GPU (exit 77 = skipped otherwise).  Env: KSEARCH, KS_SOURCE_ROOT;
# KS_TEST_BIN: the folder of the unit tests (default: build/tests).
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "SKIP: no NVIDIA GPU (nvidia-smi lists none), so no driver and no NVRTC cache"
	exit 77
fi
. "$(dirname "$0")/../cli/lib.sh"
bin=${KS_TEST_BIN:-$KS_SOURCE_ROOT/build/tests}
export CUDA_CACHE_PATH="$TMP/compute-cache"
unset CUDA_CACHE_DISABLE
mkdir -p "$CUDA_CACHE_PATH"

for i in 1 2; do
	"$KSEARCH" doctor >"$TMP/out" 2>"$TMP/err"
	grep -E "^ *(ok|FAIL) +nvrtc" "$TMP/out"
	checks=$((checks + 1))
	grep -qE "^ *ok +nvrtc" "$TMP/out" || fail "doctor, run $i: NVRTC not ok: $(grep -A1 nvrtc "$TMP/out")"
done
[ -n "$(find "$CUDA_CACHE_PATH" -type f 2>/dev/null | head -n 1)" ] &&
	echo "the compute cache holds $(find "$CUDA_CACHE_PATH" -type f | wc -l) files: NVRTC's cache was in use"
run 0 "$bin/test_nvrtc"
done_ok
