#!/usr/bin/env bash
# gpu-search-report.sh - on a GPU machine: run `ksearch evolve --op gqa`
# into a fresh archive for DURATION, then time the winner next to PyTorch's
# attention (tools/compare-torch.py) in the same session.  Logs in $LOG_DIR.
#   tools/gpu-search-report.sh [DURATION] [ARCHIVE]
set -uo pipefail
cd "$(dirname "$0")/.."
duration=${1:-20m}
archive=${2:-/tmp/ksearch-report-archive}
LOG_DIR=${LOG_DIR:-${OUT:-/tmp}}
ks=${KSEARCH:-build/ksearch}
"$ks" evolve --op gqa --archive "$archive" --fresh --time "$duration" --log "$LOG_DIR/evolve.jsonl" \
	>"$LOG_DIR/evolve.log" 2>&1
echo "evolve exit $?"
tail -16 "$LOG_DIR/evolve.log"
"$ks" archive grid --archive "$archive" --op gqa | tee "$LOG_DIR/grid.txt"
args=$(python3 - "$LOG_DIR/evolve.jsonl" <<'PY'
import json, sys
best = None
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == "result" and e["verdict"] == "ok" and (not best or e["fitness"] > best["fitness"]):
        best = e
print(f"--candidate operators/gqa/seeds/{best['family']}.cu " + " ".join(f"--param {k}={v}" for k, v in best["params"].items()))
PY
)
echo "best: $args"
# shellcheck disable=SC2086
python3 tools/compare-torch.py --ksearch "$ks" $args --json "$LOG_DIR/compare.json"
