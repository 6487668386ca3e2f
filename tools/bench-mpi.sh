#!/usr/bin/env bash
# bench-mpi.sh - evaluations per hour of one search over MPI ranks against one
# process on one GPU, on one host, in one session (issue 27; BENCHMARKS.md,
# "One search over many ranks").
#
#   bash tools/bench-mpi.sh [--op OP] [--time SECONDS] [--runs "one 2x2"] [--jobs N] [OUTDIR]
#
# Runs, one after the other, each from a fresh archive with default settings
# for --time seconds (default 150):
#   one      ksearch evolve --gpus 0                       (one GPU, no MPI)
#   4x1      mpirun -np 4 ksearch evolve                   (4 ranks, one GPU each)
#   2x2      mpirun -np 2 ksearch evolve --gpus all        (2 ranks, two GPUs each)
#   1x4      ksearch evolve --gpus all                     (one process, no MPI; only
#            with --runs: issue 24's "GPUs at least 95% busy" on one host)
# (--runs: some of them, in the order given; --jobs: that many compile
# processes a rank instead of ksearch's default), and prints each run's
# evaluations, seconds, evaluations per hour, ratio to the first (`one`) and
# the GPUs' busy share; then where each run's GPU time went (tools/gpu-time.py,
# each GPU's gaps listed in OUTDIR/NAME-gpu-time.txt) and the ratios from 40 s on
# and where an evaluation's time went in each run (tools/eval-costs.py over
# the runs' records in OUTDIR/costs).  Each run's events (--log) are in
# OUTDIR/NAME.jsonl.
# Needs 4 GPUs, a ksearch built with MPI (KSEARCH, default build/ksearch)
# and mpirun on PATH (tools/mpi-wheel.sh).
#
# --summarize runs nothing: it prints the same summary from the runs already
# in OUTDIR (NAME.txt, NAME.jsonl, costs/NAME.json of each of --runs), e.g.
# runs long enough to need a call each on a GPU machine, their files copied
# into one folder afterwards (no GPU needed).
set -u
cd "$(dirname "$0")/.."
op=gqa
seconds=150
runs="one 4x1 2x2"
summarize=0
jobs=()
while [ $# -gt 0 ]; do
	case $1 in
	--op) op=$2; shift 2 ;;
	--time) seconds=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--jobs) jobs=(--jobs "$2"); shift 2 ;;
	--summarize) summarize=1; shift ;;
	-h | --help) sed -n '2,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "bench-mpi: unknown option $1 (see --help)" >&2; exit 2 ;;
	*) break ;;
	esac
done
for name in $runs; do # before any run starts: a typo must not cost a GPU session's minutes
	case $name in one | 4x1 | 2x2 | 1x4) ;; *) echo "bench-mpi: unknown run '$name' (one, 4x1, 2x2, 1x4)" >&2; exit 2 ;; esac
done
OUTDIR=${1:-${OUT:-/tmp}/bench-mpi}
KSEARCH=${KSEARCH:-build/ksearch}
if [ $summarize = 1 ]; then
	for name in $runs; do
		for f in "$OUTDIR/$name.txt" "$OUTDIR/$name.jsonl" "$OUTDIR/costs/$name.json"; do
			[ -f "$f" ] || { echo "bench-mpi: --summarize: no $f (run $name's output)" >&2; exit 2; }
		done
	done
fi
mkdir -p "$OUTDIR"
run() { # NAME LAUNCHER... -- EVOLVE-OPTIONS...
	local name=$1 launcher=()
	shift
	while [ "$1" != -- ]; do launcher+=("$1"); shift; done
	shift
	echo "== $name: ${launcher[*]} evolve --op $op --time ${seconds}s $*" >"$OUTDIR/$name.txt"
	"${launcher[@]}" "$KSEARCH" evolve --op "$op" --time "${seconds}s" --archive "$OUTDIR/archive-$name" \
		--log "$OUTDIR/$name.jsonl" ${jobs[@]+"${jobs[@]}"} "$@" >>"$OUTDIR/$name.txt" 2>&1
	echo "exit $?" >>"$OUTDIR/$name.txt"
	# the records, for where each run's evaluation time went (tools/eval-costs.py)
	mkdir -p "$OUTDIR/costs"
	"$KSEARCH" archive ls --op "$op" --archive "$OUTDIR/archive-$name" --sort id --json \
		>"$OUTDIR/costs/$name.json" 2>>"$OUTDIR/$name.txt"
}
# the runs themselves (not with --summarize): each from a fresh archive, its records kept
measure() {
	n_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
	[ "$n_gpus" -ge 4 ] || { echo "bench-mpi: needs 4 GPUs, this host has $n_gpus" >&2; exit 2; }
	command -v mpirun >/dev/null || { echo "bench-mpi: no mpirun on PATH (tools/mpi-wheel.sh env DIR)" >&2; exit 2; }
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	mpi=(mpirun --oversubscribe --bind-to none)
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee "$OUTDIR/gpu.txt"
	echo "cores: $(nproc)" | tee -a "$OUTDIR/gpu.txt"
	# how the CPUs pair into cores, and the GPUs the driver lists (src/base/cpus.c plans from both)
	lscpu 2>/dev/null | grep -E '^(Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)):' |
		tee -a "$OUTDIR/gpu.txt"
	echo "GPUs the driver lists: $(ls /proc/driver/nvidia/gpus 2>/dev/null | wc -l)" | tee -a "$OUTDIR/gpu.txt"

	for name in $runs; do
		case $name in
		one) run one -- ;;
		4x1) run 4x1 "${mpi[@]}" -np 4 -- ;;
		2x2) run 2x2 "${mpi[@]}" -np 2 -- --gpus all ;;
		1x4) run 1x4 -- --gpus all ;;
		esac
	done
}
[ $summarize = 1 ] || measure

printf "%-5s %12s %8s %10s %7s %6s\n" run evaluations seconds per-hour ratio busy | tee "$OUTDIR/summary.txt"
base=""
for name in $runs; do
	line=$(grep -m1 '^stopped (' "$OUTDIR/$name.txt")
	evals=$(sed -n 's/.* after \([0-9]*\) evaluations in \([0-9]*\) s.*/\1/p' <<<"$line")
	secs=$(sed -n 's/.* after \([0-9]*\) evaluations in \([0-9]*\) s.*/\2/p' <<<"$line")
	busy=$(grep -m1 -o 'GPUs busy [0-9]*%' "$OUTDIR/$name.txt" | grep -o '[0-9]*%')
	if [ -z "$evals" ] || [ -z "$secs" ] || [ "$secs" = 0 ]; then
		echo "$name: no summary line (see $OUTDIR/$name.txt)" | tee -a "$OUTDIR/summary.txt"
		continue
	fi
	rate=$(awk -v e="$evals" -v s="$secs" 'BEGIN { printf "%.0f", 3600 * e / s }')
	[ -z "$base" ] && base=$rate
	ratio=$(awk -v r="$rate" -v b="$base" 'BEGIN { printf "%.2f", r / b }')
	printf "%-5s %12s %8s %10s %7s %6s\n" "$name" "$evals" "$secs" "$rate" "${ratio}x" "${busy:-?}" |
		tee -a "$OUTDIR/summary.txt"
done
# where each run's GPU time went (evaluating, profiles and checks, idle; each GPU's gaps, listed)
late=()
for name in $runs; do
	case $name in one) gpus=1 ;; *) gpus=4 ;; esac
	echo "== $name" | tee -a "$OUTDIR/summary.txt"
	python3 tools/gpu-time.py --gpus "$gpus" --detail "$OUTDIR/$name.jsonl" "$OUTDIR/costs/$name.json" \
		>"$OUTDIR/$name-gpu-time.txt"
	# the summary keeps the totals and each GPU's line; the gaps one by one stay in NAME-gpu-time.txt
	grep -v '^    at ' "$OUTDIR/$name-gpu-time.txt" | tee -a "$OUTDIR/summary.txt"
	late+=("$name $(sed -n 's/.*, \([0-9,]*\) from 40 s$/\1/p' "$OUTDIR/$name-gpu-time.txt" | tr -d ,)")
done
# the same ratios counted from 40 s on: an MPI run ramps up over its first 20-40 s
echo "from 40 s on (evaluations an hour, ratio to the first run):" | tee -a "$OUTDIR/summary.txt"
base=""
for entry in "${late[@]}"; do
	set -- $entry
	[ -n "${2:-}" ] || { echo "  $1: shorter than 40 s" | tee -a "$OUTDIR/summary.txt"; continue; }
	[ -z "$base" ] && base=$2
	awk -v n="$1" -v r="$2" -v b="$base" 'BEGIN { printf "  %-5s %10d %7.2fx\n", n, r, r / b }' |
		tee -a "$OUTDIR/summary.txt"
done
# where an evaluation's time went, run against run and per family every run evaluated
costs=()
for name in $runs; do costs+=("$OUTDIR/costs/$name.json"); done
python3 tools/eval-costs.py "${costs[@]}" |
	tee -a "$OUTDIR/summary.txt"
