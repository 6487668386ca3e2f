#!/usr/bin/env bash
# bench-floor.sh - a gqa dispatch beside FlashInfer and cuDNN, in one session on one GPU
# (issue 24's measurement; BENCHMARKS.md, "Kernels at the memory floor").
#
# On the CPU machine:
#   ksearch export-best --op gqa --archive DIR --dispatch -o EXPORT
#   nvcc -O2 -std=c++17 -arch=sm_90a -cudart static -I EXPORT -o build-ws/gqa-bench tools/bench-gqa.cu EXPORT/ksearch_gqa*.cu
#   build ../shared/anchors/fi_decode (its README) and copy the binary to build-ws/fi_decode
# On the GPU machine (carry build-ws):
#   bash tools/bench-floor.sh [OUTDIR]
# Writes OUTDIR/bench.txt (ours), fi_tc.txt (FlashInfer's tensor-core decode, the faster of
# its two paths), torch.txt/torch.json (PyTorch SDPA with cuDNN and flash on a dense layout
# of the same token counts) and prints the three summaries.
set -u
cd "$(dirname "$0")/.."
OUTDIR=${1:-${OUT:-/tmp}/floor}
mkdir -p "$OUTDIR"
for f in build-ws/gqa-bench build-ws/fi_decode; do
	[ -x "$f" ] || { echo "bench-floor: $f is missing (see the comment at the top of this script)" >&2; exit 2; }
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUTDIR/gpu.txt"
build-ws/gqa-bench 100 3 >"$OUTDIR/bench.txt" 2>&1 || echo "bench-floor: gqa-bench failed (wrong output or CUDA error): $OUTDIR/bench.txt" >&2
build-ws/fi_decode 100 tc >"$OUTDIR/fi_tc.txt" 2>&1 || echo "bench-floor: fi_decode failed: $OUTDIR/fi_tc.txt" >&2
python3 tools/compare-torch.py --reps 50 --json "$OUTDIR/torch.json" >"$OUTDIR/torch.txt" 2>&1 || echo "bench-floor: compare-torch failed" >&2
tail -n 1 "$OUTDIR/bench.txt"
tail -n 1 "$OUTDIR/fi_tc.txt"
tail -n 7 "$OUTDIR/torch.txt"
