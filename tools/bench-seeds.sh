#!/usr/bin/env bash
# bench-seeds.sh - every param combination of every seed family of an op,
# checked and timed by ksearch check; prints each family's best params with
# its per-workload times, and writes the full JSON to $OUT_DIR. A design-space
# family of more than $BENCH_ALL (default 500) allowed combinations is timed on
# a deterministic sample of $BENCH_SAMPLE (default 100) of them instead
# (tests/cli/seed_sample.py --list), one ksearch check per combination.
#   tools/bench-seeds.sh [OP] [TIME_CAP_MS]
set -uo pipefail
cd "$(dirname "$0")/.."
op=${1:-gqa}
cap=${2:-100}
out=${OUT_DIR:-${OUT:-/tmp}}
ks=${KSEARCH:-build/ksearch}
for seed in operators/"$op"/seeds/*.cu; do
	name=$(basename "$seed" .cu)
	sample=$(python3 tests/cli/seed_sample.py --list "$seed" "${BENCH_SAMPLE:-100}" 2>"$out/seeds-$op-$name.count")
	if [ "$(sed -n 's/ allowed$//p' "$out/seeds-$op-$name.count")" -le "${BENCH_ALL:-500}" ]; then
		"$ks" check "$seed" --op "$op" --all-params --json --time-cap "$cap" >"$out/seeds-$op-$name.json" \
			2>"$out/seeds-$op-$name.err"
	else
		: >"$out/seeds-$op-$name.err"
		while read -r combo; do
			args=()
			for kv in $combo; do args+=(--param "$kv"); done
			"$ks" check "$seed" --op "$op" "${args[@]}" --json --time-cap "$cap" 2>>"$out/seeds-$op-$name.err"
		done <<<"$sample" | python3 -c 'import json, sys
rows = []
dec = json.JSONDecoder()
text = sys.stdin.read()
i = 0
while i < len(text):
    if text[i].isspace():
        i += 1
        continue
    obj, i = dec.raw_decode(text, i)
    rows += obj if isinstance(obj, list) else [obj]
json.dump(rows, sys.stdout)' >"$out/seeds-$op-$name.json"
	fi
	echo "$name: exit $? ($(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$out/seeds-$op-$name.json") combinations)"
done
python3 - "$out" "$op" <<'PY'
import glob, json, os, sys
out, op = sys.argv[1], sys.argv[2]
for path in sorted(glob.glob(os.path.join(out, f"seeds-{op}-*.json"))):
    rows = json.load(open(path))
    ok = [r for r in rows if r.get("verdict") == "ok"]
    bad = [r for r in rows if r.get("verdict") != "ok"]
    family = os.path.basename(path)[len(f"seeds-{op}-"):-5]
    print(f"\n{family}: {len(ok)} ok, {len(bad)} not ok" + (f" ({sorted(set(r['verdict'] for r in bad))})" if bad else ""))
    if not ok:
        continue
    best = max(ok, key=lambda r: r["fitness"])
    print(f"  best {best['params']}: fitness {best['fitness']:.2f}, SOL {100 * best['sol_fraction']:.0f}%")
    for w in best["workloads"]:
        print(f"    {w['id']:14} {w['median_us']:9.2f} us  spread {100 * (w['p90_us'] - w['p10_us']) / w['median_us']:4.1f}%"
              f"  ref {w['ref_median_us']:8.2f} us  floor {w['floor_us']:6.2f} us  SOL {100 * w['sol_fraction']:3.0f}%")
PY
