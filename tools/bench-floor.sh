#!/usr/bin/env bash
# bench-floor.sh - a gqa dispatch beside FlashInfer and cuDNN, or an mla_decode dispatch beside
# FlashInfer, in one session on one GPU (issue 24's measurement; BENCHMARKS.md, "Kernels at the
# memory floor").
#
# On the CPU machine, for gqa (the default):
#   ksearch export-best --op gqa --archive DIR --dispatch -o EXPORT
#   nvcc -O2 -std=c++17 -arch=sm_90a -cudart static -I EXPORT -o build-ws/gqa-bench tools/bench-gqa.cu EXPORT/ksearch_gqa*.cu
#   build ../shared/anchors/fi_decode (its README) and copy the binary to build-ws/fi_decode
# for mla_decode:
#   ksearch export-best --op mla_decode --archive DIR --dispatch -o EXPORT
#   nvcc -O2 -std=c++17 -arch=sm_90a -cudart static -I EXPORT -o build-ws/mla-bench tools/bench-mla.cu EXPORT/ksearch_mla_decode*.cu
#   build ../shared/anchors/fi_mla (its README) and copy the binary to build-ws/fi_mla
# On the GPU machine (carry build-ws):
#   bash tools/bench-floor.sh [--op gqa|mla_decode] [OUTDIR]
# gqa writes OUTDIR/bench.txt (ours), fi_tc.txt (FlashInfer's tensor-core decode, the faster of
# its two paths), torch.txt/torch.json (PyTorch SDPA with cuDNN and flash on a dense layout
# of the same token counts) and prints the three summaries.
# mla_decode writes OUTDIR/bench.txt (ours) and fi_fa3.txt (FlashInfer's fa3, what its 'auto'
# backend picks on sm_90) and prints the two summaries; there is no cuDNN MLA to compare with.
# OUTDIR defaults to $OUT/floor for gqa and $OUT/floor-mla for mla_decode ($OUT: /tmp if unset).
set -u
cd "$(dirname "$0")/.." || exit 1
op=gqa
OUTDIR=
while [ $# -gt 0 ]; do
	case $1 in
	--op)
		[ $# -ge 2 ] || { echo "bench-floor: --op needs gqa or mla_decode" >&2; exit 2; }
		op=$2
		shift 2
		;;
	--op=*)
		op=${1#--op=}
		shift
		;;
	-*)
		echo "usage: bench-floor.sh [--op gqa|mla_decode] [OUTDIR]" >&2
		exit 2
		;;
	*)
		OUTDIR=$1
		shift
		;;
	esac
done
case $op in
gqa)
	OUTDIR=${OUTDIR:-${OUT:-/tmp}/floor}
	bins="build-ws/gqa-bench build-ws/fi_decode"
	;;
mla_decode)
	OUTDIR=${OUTDIR:-${OUT:-/tmp}/floor-mla}
	bins="build-ws/mla-bench build-ws/fi_mla"
	;;
*)
	echo "bench-floor: unknown op '$op' (gqa or mla_decode)" >&2
	exit 2
	;;
esac
mkdir -p "$OUTDIR"
for f in $bins; do
	[ -x "$f" ] || { echo "bench-floor: $f is missing (see the comment at the top of this script)" >&2; exit 2; }
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUTDIR/gpu.txt"
if [ "$op" = mla_decode ]; then
	build-ws/mla-bench 100 3 >"$OUTDIR/bench.txt" 2>&1 || echo "bench-floor: mla-bench failed (wrong output or CUDA error): $OUTDIR/bench.txt" >&2
	build-ws/fi_mla 100 fa3 >"$OUTDIR/fi_fa3.txt" 2>&1 || echo "bench-floor: fi_mla failed: $OUTDIR/fi_fa3.txt" >&2
	tail -n 1 "$OUTDIR/bench.txt"
	tail -n 1 "$OUTDIR/fi_fa3.txt"
	exit 0
fi
build-ws/gqa-bench 100 3 >"$OUTDIR/bench.txt" 2>&1 || echo "bench-floor: gqa-bench failed (wrong output or CUDA error): $OUTDIR/bench.txt" >&2
build-ws/fi_decode 100 tc >"$OUTDIR/fi_tc.txt" 2>&1 || echo "bench-floor: fi_decode failed: $OUTDIR/fi_tc.txt" >&2
python3 tools/compare-torch.py --reps 50 --json "$OUTDIR/torch.json" >"$OUTDIR/torch.txt" 2>&1 || echo "bench-floor: compare-torch failed" >&2
tail -n 1 "$OUTDIR/bench.txt"
tail -n 1 "$OUTDIR/fi_tc.txt"
tail -n 7 "$OUTDIR/torch.txt"
