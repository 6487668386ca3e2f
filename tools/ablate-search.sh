#!/usr/bin/env bash
# ablate-search.sh - does the search matter?  Runs `ksearch evolve` with each
# built-in search (map-elites, the default; random, uniform over the allowed
# space; greedy, a neighbourhood climber with restarts) at equal evaluation
# budgets, with several seeds each, on a GPU, and writes the best fitness
# against evaluations of every run as CSV, a table of the final and median
# bests, cells filled and QD-scores, and a plot (SVG, tools/plot-curves.py).
#
#   tools/ablate-search.sh [--op gqa] [--budgets "500 2000"] [--seeds "1 2 3"]
#                          [--searches "map-elites random greedy"] [--out DIR] [--extend]
#                          [--until SECONDS] [-- EVOLVE-ARGS...]
#
# map-elites is the default search as evolve runs it (--climb 0.5); the old
# default, plain MAP-Elites, is `-- --climb 0` (with another --out, and
# --searches map-elites).
#
# Every run starts from a fresh archive under DIR/archives (nothing is
# shared between runs), so the curves compare the searches alone.  With
# --extend, each search and seed has one archive, kept between invocations
# and brought to each budget in turn: a resumed search makes the choices an
# unbroken one would, so the run at 500 is the first 500 evaluations of the
# run at 2,000, the whole ablation costs the largest budget only, and an
# invocation cut off (a time limit) is taken up where it stopped by the
# next.  --until (with --extend) ends the invocation cleanly within SECONDS:
# each run gets evolve's --time for what is left, a run stopped so is taken up
# by the next invocation, and no run is started with under 30 s to go (for
# machines that hold a command for a limited time; a search killed from
# outside finishes its candidates in flight after the killer returned, so a
# copy of its archive taken then can be torn).  Env: KSEARCH (default
# build/ksearch).
set -uo pipefail
cd "$(dirname "$0")/.."
ksearch=${KSEARCH:-build/ksearch}
op=gqa budgets="500 2000" seeds="1 2 3" searches="map-elites random greedy" out=ablation
extra=() extend=0 until=""
while [ $# -gt 0 ]; do
	case $1 in
	--op) op=$2; shift 2 ;;
	--budgets) budgets=$2; shift 2 ;;
	--seeds) seeds=$2; shift 2 ;;
	--searches) searches=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--extend) extend=1; shift ;;
	--until) until=$2; shift 2 ;;
	--) shift; extra=("$@"); break ;;
	-h | --help) sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	*) echo "ablate-search.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
done
if [ -n "$until" ]; then
	[[ "$until" =~ ^[0-9]+$ ]] || { echo "ablate-search.sh: --until takes a number of seconds, not '$until'" >&2; exit 2; }
	[ "$extend" = 1 ] || { echo "ablate-search.sh: --until needs --extend (a run cut short is taken up by the next invocation)" >&2; exit 2; }
	deadline=$(($(date +%s) + until))
fi
[ -x "$ksearch" ] || { echo "ablate-search.sh: no ksearch binary at $ksearch (build it, or set KSEARCH)" >&2; exit 2; }
mkdir -p "$out/archives" || exit 1
csv="$out/curves.csv"
budgets=$(printf '%s\n' $budgets | sort -n | tr '\n' ' ')
# the runs: fresh archives per budget, or (--extend) one per search and seed brought to each budget
for budget in $budgets; do
	for search in $searches; do
		for seed in $seeds; do
			name=$search-b$budget-s$seed ar="$out/archives/$name" left=$budget
			if [ "$extend" = 1 ]; then
				name=$search-s$seed ar="$out/archives/$name"
				have=$("$ksearch" archive stats --json --archive "$ar" --op "$op" 2>/dev/null |
					python3 -c 'import json, sys; print(json.load(sys.stdin)["candidates"])' 2>/dev/null)
				left=$((budget - ${have:-0}))
			else
				rm -rf "$ar"
			fi
			[ "$left" -gt 0 ] || continue
			time_flag=()
			if [ -n "$until" ]; then
				secs=$((deadline - $(date +%s) - 20))
				if [ "$secs" -lt 30 ]; then
					echo "time limit (--until $until): $search seed $seed has $left evaluations left to $budget; run again to take it up"
					break 3
				fi
				time_flag=(--time "${secs}s")
			fi
			start=$(date +%s)
			"$ksearch" evolve --op "$op" --search "$search" --seed "$seed" --budget "$left" \
				--archive "$ar" "${time_flag[@]}" "${extra[@]}" >>"$out/$name.log" 2>&1
			rc=$?
			echo "$search seed $seed to $budget: exit $rc after $(($(date +%s) - start)) s: $(grep '^best:' "$out/$name.log" | tail -1)"
		done
	done
done
# the curves, from the archives: for each budget, the evaluations up to it
echo "op,search,budget,seed,evals,best,cells_filled,qd_score" >"$csv"
for budget in $budgets; do
	for search in $searches; do
		for seed in $seeds; do
			ar="$out/archives/$search-b$budget-s$seed"
			[ "$extend" = 1 ] && ar="$out/archives/$search-s$seed"
			"$ksearch" archive stats --json --archive "$ar" --op "$op" >"$out/stats.json" 2>/dev/null || continue
			python3 - "$out/stats.json" "$op" "$search" "$budget" "$seed" >>"$csv" <<'PY'
import json, sys
stats, op, search, budget, seed = json.load(open(sys.argv[1])), *sys.argv[2:]
if stats["candidates"] < int(budget):
    sys.exit(0)  # not there yet (an --extend run cut off): no curve for this budget
best, cells, qd = 0.0, 0, 0.0
for point in stats["history"]:
    if point["evals"] > int(budget):
        break
    best, cells, qd = max(best, point["best"]), point["cells_filled"], point["qd_score"]
    print(f"{op},{search},{budget},{seed},{point['evals']},{best},{cells},{qd:.2f}")
print(f"{op},{search},{budget},{seed},{budget},{best},{cells},{qd:.2f}")
PY
		done
	done
done
python3 - "$csv" "$out" <<'PY'
import collections, csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
final, ends = collections.defaultdict(list), collections.defaultdict(list)
for budget in sorted({r["budget"] for r in rows}, key=int):
    for search in dict.fromkeys(r["search"] for r in rows):
        for seed in dict.fromkeys(r["seed"] for r in rows):
            run = [r for r in rows if (r["budget"], r["search"], r["seed"]) == (budget, search, seed)]
            if run:
                final[(budget, search)].append(max(float(r["best"]) for r in run))
                ends[(budget, search)].append(run[-1])
with open(f"{sys.argv[2]}/summary.md", "w") as md:
    md.write("| budget | search | best fitness per seed | median | cells filled | QD-score |\n"
             "| --- | --- | --- | --- | --- | --- |\n")
    for (budget, search), bests in final.items():
        cells = ", ".join(r["cells_filled"] for r in ends[(budget, search)])
        qd = ", ".join(f'{float(r["qd_score"]):.0f}' for r in ends[(budget, search)])
        md.write(f"| {budget} | {search} | {', '.join(f'{b:.2f}' for b in bests)} | "
                 f"{statistics.median(bests):.2f} | {cells} | {qd} |\n")
print(open(f"{sys.argv[2]}/summary.md").read())
PY
python3 tools/plot-curves.py "$csv" "$out/curves.svg"
