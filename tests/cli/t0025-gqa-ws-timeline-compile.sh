#!/usr/bin/env bash
# tools/gqa-ws-timeline.cu (gqa_ws's partial launch timed alone and with its merge launch;
# BENCHMARKS.md, seventeenth session) includes gqa's gqa_ws seed and launches its kernels with
# the seed's own constants (SMEM_BYTES, THREADS): it must build, with nvcc's warnings as errors,
# against the seed as it is, with both merge launches it times (MERGE 0 and 1) and both tile
# sizes. It runs on a GPU only; without nvcc the test reports 77.
. "$(dirname "$0")/lib.sh"

if ! [ -x "$nvcc" ]; then
	skip_part "no nvcc (looked in $cuda/bin and on PATH; set NVCC): gqa-ws-timeline.cu is not compiled"
	done_ok
fi

seed=operators/gqa/seeds/gqa_ws.cu
for point in "MERGE=0 TILE=16 STAGES=4 WPH=1 IDXPF=2" "MERGE=1 TILE=32 STAGES=3 WPH=2 IDXPF=1"; do
	flags="-DCTAS=132 -DCHUNK=64 -DHINT=1 -DPART=0 -DPREQ=1"
	for kv in $point; do flags="$flags -D$kv"; done
	# shellcheck disable=SC2086 # $flags: one flag a word
	run 0 "$nvcc" -O2 -std=c++17 -arch=sm_90a -cudart static -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
		-I "$KS_SOURCE_ROOT" -I "$KS_SOURCE_ROOT/tools" "-DSEED=\"$seed\"" $flags -o "$TMP/gqa-ws-timeline" \
		tools/gqa-ws-timeline.cu
	[ -x "$TMP/gqa-ws-timeline" ] || fail "no binary for $point"
	rm -f "$TMP/gqa-ws-timeline"
	checks=$((checks + 1))
done
# MERGE 2 has no merge launch to time: the tool refuses it by name
run 1 "$nvcc" -O2 -std=c++17 -arch=sm_90a -I "$KS_SOURCE_ROOT" -I "$KS_SOURCE_ROOT/tools" "-DSEED=\"$seed\"" -DMERGE=2 \
	-o "$TMP/gqa-ws-timeline" tools/gqa-ws-timeline.cu
grep -q "build it with MERGE 0 or 1" "$TMP/err" "$TMP/out" || fail "MERGE=2 was not refused by name"
checks=$((checks + 1))
done_ok
