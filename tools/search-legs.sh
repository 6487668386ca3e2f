#!/usr/bin/env bash
# search-legs.sh - searches side by side, one GPU each, in legs short enough for one call to a
# GPU machine (issue 24's "a 15-minute search against a long one"; BENCHMARKS.md). A leg runs
# every RUN for --time and leaves the archives for the next leg to resume.
#
#   bash tools/search-legs.sh [--time T] [--leg N] [--dir DIR] [--from TGZ] [--dry-run] RUN...
#
# RUN is LABEL:OP:SEED[:GPU], e.g. mla15:mla_decode:1 (GPU: the RUN's position, 0 first).
# Each RUN is `ksearch evolve --op OP --seed SEED --time T --archive DIR/LABEL` with default
# settings, pinned to its GPU by CUDA_VISIBLE_DEVICES; it resumes DIR/LABEL when a leg before
# left it there. --from TGZ unpacks an earlier leg's archives.tgz into DIR first (a fresh
# machine: carry the file), or its parts TGZ.part-aa, TGZ.part-ab ... when TGZ is not there. After the leg: `ksearch archive stats` of each RUN, and in OUTDIR
# ($OUT, else /tmp/search-legs) archives.tgz (every RUN's archive, for the next leg or
# export-best; over 15 MiB, parts archives.tgz.part-aa ... of 12 MiB) and logs-legN.tgz (LABEL-events-legN.jsonl, LABEL-evolve-legN.txt,
# LABEL-stats-legN.txt). The legs of a 15-minute search: 8m50s and 6m10s. A leg runs past its
# --time by the candidates in flight and its last confirmations, none started after 5% of --time
# more (26.5 s at 8m50s), so an 8m50s leg ends within about 9m20s of a 10-minute device call. (A
# 9m10s mla_decode leg overran its call by more than 50 s before that bound: twenty-fourth session.)
# --dry-run prints the commands and runs nothing. KSEARCH: default build/ksearch.
set -u
cd "$(dirname "$0")/.." || exit 1
time_arg=8m50s
leg=1
dir=/tmp/search-legs
from=
dry=0
while [ $# -gt 0 ]; do
	case $1 in
	--time) time_arg=${2:?--time needs a duration}; shift 2 ;;
	--leg) leg=${2:?--leg needs a number}; shift 2 ;;
	--dir) dir=${2:?--dir needs a folder}; shift 2 ;;
	--from) from=${2:?--from needs a tarball}; shift 2 ;;
	--dry-run) dry=1; shift ;;
	-h | --help) sed -n '2,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "search-legs: unknown option $1 (see --help)" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { echo "search-legs: no RUN (LABEL:OP:SEED[:GPU]; see --help)" >&2; exit 2; }
case $leg in *[!0-9]* | '') echo "search-legs: --leg $leg: expected a number" >&2; exit 2 ;; esac
KSEARCH=${KSEARCH:-build/ksearch}
OUTDIR=${OUT:-/tmp/search-legs}
labels=() ops=() seeds=() gpus=()
for r in "$@"; do # every RUN is checked before any starts: a typo must not cost a GPU call
	IFS=: read -r label op seed gpu extra <<<"$r"
	gpu=${gpu:-${#labels[@]}}
	if [ -n "${extra:-}" ] || [ -z "$label" ] || [ -z "$op" ] || [[ ! $seed =~ ^[0-9]+$ ]] || [[ ! $gpu =~ ^[0-9]+$ ]] ||
		[[ ! $label =~ ^[A-Za-z0-9_-]+$ ]]; then
		echo "search-legs: '$r': expected LABEL:OP:SEED[:GPU] (LABEL letters, digits, _ and -; SEED and GPU numbers)" >&2
		exit 2
	fi
	for l in "${labels[@]}"; do
		[ "$l" != "$label" ] || { echo "search-legs: label '$label' given twice" >&2; exit 2; }
	done
	labels+=("$label") ops+=("$op") seeds+=("$seed") gpus+=("$gpu")
done
if [ $dry = 1 ]; then
	if [ -n "$from" ] && [ ! -f "$from" ] && [ -f "$from.part-aa" ]; then
		echo "cat $from.part-* | tar xzf - -C $dir"
	elif [ -n "$from" ]; then
		echo "tar xzf $from -C $dir"
	fi
	for i in "${!labels[@]}"; do
		echo "CUDA_VISIBLE_DEVICES=${gpus[$i]} $KSEARCH evolve --op ${ops[$i]} --seed ${seeds[$i]} --time $time_arg" \
			"--archive $dir/${labels[$i]} --log $OUTDIR/${labels[$i]}-events-leg$leg.jsonl"
	done
	exit 0
fi
mkdir -p "$dir" "$OUTDIR/logs-leg$leg" || exit 1
if [ -n "$from" ] && [ ! -f "$from" ] && [ -f "$from.part-aa" ]; then
	cat "$from".part-* | tar xzf - -C "$dir" || { echo "search-legs: cannot unpack $from.part-* into $dir" >&2; exit 1; }
elif [ -n "$from" ]; then
	tar xzf "$from" -C "$dir" || { echo "search-legs: cannot unpack $from into $dir" >&2; exit 1; }
fi
logs=$OUTDIR/logs-leg$leg
nvidia-smi --query-gpu=index,name,driver_version --format=csv >"$logs/gpus.txt" 2>&1
for i in "${!labels[@]}"; do
	l=${labels[$i]}
	echo "leg $leg: $l: ${ops[$i]}, seed ${seeds[$i]}, GPU ${gpus[$i]}, $time_arg$([ -d "$dir/$l" ] && echo ", resuming $dir/$l")"
	(CUDA_VISIBLE_DEVICES=${gpus[$i]} "$KSEARCH" evolve --op "${ops[$i]}" --seed "${seeds[$i]}" --time "$time_arg" \
		--archive "$dir/$l" --log "$logs/$l-events-leg$leg.jsonl" >"$logs/$l-evolve-leg$leg.txt" 2>&1
	 echo "evolve exit $?" >>"$logs/$l-evolve-leg$leg.txt") &
done
wait
for i in "${!labels[@]}"; do
	l=${labels[$i]}
	"$KSEARCH" archive stats --archive "$dir/$l" --op "${ops[$i]}" >"$logs/$l-stats-leg$leg.txt" 2>&1
	echo "== $l: $(grep -h 'stopped\|evolve exit' "$logs/$l-evolve-leg$leg.txt" | tr '\n' ' ')"
	sed -n '/best per workload/,/dispatch/p' "$logs/$l-stats-leg$leg.txt"
done
tar czf "$OUTDIR/archives.tgz" -C "$dir" "${labels[@]}" || exit 1
# a file over 16 MiB does not come back from a device call: parts of 12 MiB do (--from joins them)
if [ "$(stat -c %s "$OUTDIR/archives.tgz")" -gt $((15 * 1024 * 1024)) ]; then
	split -b 12m "$OUTDIR/archives.tgz" "$OUTDIR/archives.tgz.part-" && rm "$OUTDIR/archives.tgz" || exit 1
fi
tar czf "$OUTDIR/logs-leg$leg.tgz" -C "$OUTDIR" "logs-leg$leg" && rm -rf "$logs"
