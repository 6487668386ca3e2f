#!/usr/bin/env bash
# bench-archive.sh - the archive at scale (issue 4): fill an archive with N
# synthetic candidates, one transaction each (tools/bench-archive.c), then
# time `ksearch archive stats`, `grid` and `ls --limit 20` on it (and a few
# more readers, and `ksearch report`), warm and, when run as root, with the
# page cache dropped.
# Builds nothing: give it the binaries.
#
#   tools/bench-archive.sh KSEARCH BENCH_ARCHIVE [N [DIR [FILL OPTIONS...]]]
#   tools/bench-archive.sh build/ksearch build/bench-archive 1000000 /tmp/bench --nosync
#
# DIR defaults to a fresh folder under /tmp; when it holds a benchmark
# archive already, only the timings run.  The archive is left in place.
# Needs about 4 GB of disk per million candidates.
set -euo pipefail
if [ $# -lt 2 ]; then
	sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
fi
KSEARCH=$1
BENCH=$2
N=${3:-1000000}
DIR=${4:-$(mktemp -d /tmp/ksearch-bench-XXXXXX)}
shift $(($# < 4 ? $# : 4))
RUNS=7

echo "## fill"
if [ -e "$DIR/gqa/bench-gpu/data.mdb" ]; then
	echo "$DIR holds a benchmark archive already: timing it as it is"
else
	"$BENCH" "$DIR" "$N" "$@"
fi
du -sh "$DIR"

ms_now() { date +%s%N; }

# time_cmd LABEL CMD...: run RUNS times; print min / median / max in ms
time_cmd() {
	local label=$1 t0 t1 times=()
	shift
	for _ in $(seq "$RUNS"); do
		t0=$(ms_now)
		"$@" >/dev/null
		t1=$(ms_now)
		times+=($(((t1 - t0) / 1000)))
	done
	printf '%s\n' "${times[@]}" | sort -n | awk -v label="$label" '
		{ t[NR] = $1 }
		END { printf "| %-44s | %8.1f | %8.1f | %8.1f |\n", label, t[1] / 1000, t[int((NR + 1) / 2)] / 1000, t[NR] / 1000 }'
}

# cold_cmd LABEL CMD...: one run after dropping the page cache (root only)
cold_cmd() {
	local label=$1 t0 t1
	shift
	sync
	echo 3 >/proc/sys/vm/drop_caches
	t0=$(ms_now)
	"$@" >/dev/null
	t1=$(ms_now)
	printf '| %-44s | %8.1f |\n' "$label" "$(echo "($t1 - $t0) / 1000000" | bc -l)"
}

A=(--archive "$DIR")
best=$("$KSEARCH" archive stats "${A[@]}" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["best_id"])')
commands=(
	"archive stats|archive stats"
	"archive grid|archive grid --color never"
	"archive ls --limit 20|archive ls --limit 20"
	"archive ls --limit 20 --sort time|archive ls --limit 20 --sort time"
	"archive ls --limit 20 --verdict wrong|archive ls --limit 20 --verdict wrong"
	"archive ls --limit 20 --verdict ok --sort id|archive ls --limit 20 --verdict ok --sort id"
	"archive show BEST|archive show $best"
	"report (the HTML page)|report -o /dev/null"
)

echo
echo "## latency, warm page cache (wall time of the whole process, $RUNS runs)"
echo
echo "| command                                      |  min ms  | median ms |  max ms  |"
echo "|----------------------------------------------|---------:|---------:|---------:|"
for entry in "${commands[@]}"; do
	# shellcheck disable=SC2086
	time_cmd "${entry%%|*}" "$KSEARCH" ${entry#*|} "${A[@]}"
done

if [ -w /proc/sys/vm/drop_caches ]; then
	echo
	echo "## latency, page cache dropped before each command (one run)"
	echo
	echo "| command                                      |  ms      |"
	echo "|----------------------------------------------|---------:|"
	for entry in "${commands[@]}"; do
		# shellcheck disable=SC2086
		cold_cmd "${entry%%|*}" "$KSEARCH" ${entry#*|} "${A[@]}"
	done
fi
echo
echo "archive left in $DIR"
