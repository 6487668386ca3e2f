#!/usr/bin/env bash
# bench-seeds.sh - every param combination of every seed family of an op,
# checked and timed by ksearch check; prints each family's best params with
# its per-workload times, and writes the full JSON to $OUT_DIR.
#   tools/bench-seeds.sh [OP] [TIME_CAP_MS]
set -uo pipefail
cd "$(dirname "$0")/.."
op=${1:-gqa}
cap=${2:-100}
out=${OUT_DIR:-${OUT:-/tmp}}
ks=${KSEARCH:-build/ksearch}
for seed in operators/"$op"/seeds/*.cu; do
	name=$(basename "$seed" .cu)
	"$ks" check "$seed" --op "$op" --all-params --json --time-cap "$cap" >"$out/seeds-$op-$name.json" \
		2>"$out/seeds-$op-$name.err"
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
