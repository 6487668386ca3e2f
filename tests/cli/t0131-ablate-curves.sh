#!/usr/bin/env bash
# tools/ablate-search.sh --extend on archives already at their budgets (no
# evolve run, so no GPU): the curves CSV, the summary's medians, cells and
# QD-scores, and the SVG plot; tools/plot-curves.py's errors.
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 is needed for the ablation's tables"; exit 77; }
AB="$TMP/ab"
for run in map-elites-s1 map-elites-s2 random-s1 random-s2; do
	run 0 "$KSEARCH" archive import tests/fixtures/archive-small.json --archive "$AB/archives/$run"
done

KSEARCH="$KSEARCH" run 0 bash tools/ablate-search.sh --extend --budgets "10 5" --seeds "1 2" \
	--searches "map-elites random" --out "$AB"
out_has "| 5 | map-elites | 1.80, 1.80 | 1.80 | 2, 2 | 2, 2 |"
out_has "| 10 | random | 2.60, 2.60 | 2.60 | 3, 3 | 6, 6 |"
out_has "plot: $AB/curves.svg"
out_lacks "exit"  # nothing was run: every archive was at its budget
checks=$((checks + 1))
python3 - "$AB" <<'PY' 2>"$TMP/err" || fail "the ablation's files"
import csv, sys, xml.dom.minidom
ab = sys.argv[1]
rows = list(csv.DictReader(open(f"{ab}/curves.csv")))
assert list(rows[0]) == ["op", "search", "budget", "seed", "evals", "best", "cells_filled", "qd_score"], rows[0]
runs = {(r["search"], r["budget"], r["seed"]) for r in rows}
assert len(runs) == 8, runs
for key in runs:  # each curve climbs and ends at its budget
    curve = [r for r in rows if (r["search"], r["budget"], r["seed"]) == key]
    bests = [float(r["best"]) for r in curve]
    assert bests == sorted(bests), (key, bests)
    assert max(int(r["evals"]) for r in curve) == int(key[1]), key
svg = xml.dom.minidom.parse(f"{ab}/curves.svg")
titles = sorted(p.getElementsByTagName("title")[0].firstChild.data for p in svg.getElementsByTagName("path"))
assert titles == sorted(f"{s}, seed {n}" for s in ("map-elites", "random") for n in "12" for _ in "ab"), titles
texts = [t.firstChild.data for t in svg.getElementsByTagName("text")]
assert "gqa: budget 5 evaluations" in texts and "gqa: budget 10 evaluations" in texts, texts
PY

# --until: with no time left, no run starts (so no GPU is needed here); the run is named for
# the next invocation, and the budget it has not reached gets no curve
KSEARCH="$KSEARCH" run 0 bash tools/ablate-search.sh --extend --budgets "5 20" --seeds 1 \
	--searches random --out "$AB" --until 0
out_has "time limit (--until 0): random seed 1 has 10 evaluations left to 20; run again to take it up"
out_has "| 5 | random | 1.80 | 1.80 | 2 | 2 |"
out_lacks "| 20 |"
run 2 bash tools/ablate-search.sh --until 60
err_has "--until needs --extend"

# the plotter's errors name the problem
printf 'op,search,budget,seed,evals,best\n' >"$TMP/empty.csv"
run 1 python3 tools/plot-curves.py "$TMP/empty.csv" "$TMP/x.svg"
err_has "no curves"
printf 'op,search,budget,seed,evals,best\ngqa,random,5,1,three,1.0\n' >"$TMP/bad.csv"
run 1 python3 tools/plot-curves.py "$TMP/bad.csv" "$TMP/x.svg"
err_has "a row without a number"
done_ok
