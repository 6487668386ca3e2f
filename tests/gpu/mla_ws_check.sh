#!/usr/bin/env bash
# GPU check of the mla_ws family (operators/mla_decode/seeds/mla_ws.cu): `ksearch check`
# at its default params and 11 other combinations that together take every value of
# every param, each verified on all 8 check workloads and timed on the 4 benchmark
# workloads. One line per combination: verdict, median us per benchmark workload, and
# the evidence of a failure. Not registered in any suite yet.
#
# Run from the repository root with the build present (an H100 or H200):
#   tests/gpu/mla_ws_check.sh            [KSEARCH=build/ksearch] [KS_TIME_CAP=60 ms per workload]
# Exit status: 0 when every combination is ok, 1 otherwise.
set -u
KSEARCH=${KSEARCH:-build/ksearch}
CAP=${KS_TIME_CAP:-60}
FILE=operators/mla_decode/seeds/mla_ws.cu
TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L | head -n 1

combos=(
	""
	"NC=1"
	"MERGE=0 PART=1"
	"MERGE=1 HINT=1"
	"STAGES=3 KB=3 PVB=1"
	"STAGES=4 KB=18 PVB=4"
	"NC=1 STAGES=4 KB=18 PVB=4 MERGE=0"
	"CHUNK=64 CTAS=66 KB=6"
	"CHUNK=512 CTAS=100 MERGE=1 PART=1"
	"CHUNK=256 CTAS=120 NC=1 STAGES=3 KB=3 PVB=1 HINT=1"
	"NC=1 KB=6 PVB=1 PART=1"
	"CHUNK=64 MERGE=0"
)
start=$SECONDS
bad=0
printf '%-52s %-8s %9s %9s %9s %9s  %s\n' params verdict b1 b16 b64 b128 evidence
for combo in "${combos[@]}"; do
	args=()
	for kv in $combo; do args+=(--param "$kv"); done
	"$KSEARCH" check "$FILE" --op mla_decode --json --time-cap "$CAP" "${args[@]}" >"$TMPD/r.json" 2>"$TMPD/err"
	rc=$?
	python3 - "$TMPD/r.json" "$TMPD/err" "$rc" "${combo:-defaults}" <<'PY' || bad=$((bad + 1))
import json, sys
path, err, rc, label = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
try:
    data = json.load(open(path))
except ValueError:
    why = " ".join(open(err, errors="replace").read().split())[:200]
    print(f"{label:<52} {'noresult':<8} exit {rc}: {why}")
    sys.exit(1)
r = data[0] if isinstance(data, list) else data
t = {w["id"].split("_")[0]: w["median_us"] for w in r.get("workloads") or []}
cols = " ".join(f"{t[k]:9.2f}" if k in t else f"{'-':>9}" for k in ("b1", "b16", "b64", "b128"))
ev = " ".join((r.get("evidence") or "").split())[:200]
print(f"{label:<52} {str(r.get('verdict') or 'not-run'):<8} {cols}  {ev}")
sys.exit(0 if r.get("verdict") == "ok" and rc == 0 else 1)
PY
done
echo "$((${#combos[@]} - bad)) of ${#combos[@]} combinations ok, $((SECONDS - start)) s"
[ "$bad" = 0 ]
