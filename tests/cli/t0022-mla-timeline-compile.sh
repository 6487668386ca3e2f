#!/usr/bin/env bash
# tools/mla-timeline.cu (a seed's partial launch timed alone and with its merge; BENCHMARKS.md,
# thirteenth session) includes mla_decode's mla_mma_ws seed and launches its kernels with the
# seed's own constants (SMEM_BYTES, THREADS, MERGE_CTAS, MTHREADS): it must build, with nvcc's
# warnings as errors, against the seed as it is, at its start and with fp32 partials. It runs
# on a GPU only; without nvcc the test reports 77.
. "$(dirname "$0")/lib.sh"

if ! [ -x "$nvcc" ]; then
	skip_part "no nvcc (looked in $cuda/bin and on PATH; set NVCC): mla-timeline.cu is not compiled"
	done_ok
fi

seed=operators/mla_decode/seeds/mla_mma_ws.cu
start="-DCHUNK=32 -DCTAS=264 -DTILE=32 -DSTAGES=2 -DWARPS=4 -DMINB=2 -DSPLIT=1 -DSEGP=64 -DPRODW=2"
for part in 1 0; do
	# shellcheck disable=SC2086 # $start: one flag a word
	run 0 "$nvcc" -O2 -std=c++17 -arch=sm_90a -cudart static -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
		-I "$KS_SOURCE_ROOT" "-DSEED=\"$seed\"" $start -DPART=$part -o "$TMP/mla-timeline-$part" tools/mla-timeline.cu
	[ -x "$TMP/mla-timeline-$part" ] || fail "no binary for PART=$part"
	checks=$((checks + 1))
done
done_ok
