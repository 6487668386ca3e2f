#!/usr/bin/env bash
# The README's way in without a GPU works on the shipped example (a real H200
# search, docs/example/): import, grid, ls, report with its PyTorch anchors,
# export-best and export-best --dispatch (t0110 compiles exports).
# It fails when the example no longer fits the operator it was made for.
. "$(dirname "$0")/lib.sh"
A="$TMP/example"

run 0 "$KSEARCH" archive import docs/example/gqa-h200.json --archive "$A"
out_has "imported 256 candidates"
run 0 "$KSEARCH" archive verify --archive "$A"
run 0 "$KSEARCH" archive grid --archive "$A"
out_has "48 of 120 cells filled"
run 0 "$KSEARCH" archive ls --archive "$A" --limit 5
out_has "gqa_space_cluster"
run 0 "$KSEARCH" archive stats --archive "$A"
out_has "dispatch"
run 0 "$KSEARCH" report --archive "$A" -o "$TMP/report.html" --compare docs/example/torch-h200.json
out_has "best 25.502"
grep -q "SDPA, cuDNN" "$TMP/report.html" || fail "the report lacks the PyTorch anchors"
checks=$((checks + 1))
run 0 "$KSEARCH" export-best --op gqa --archive "$A" -o "$TMP/best"
run 0 "$KSEARCH" export-best --op gqa --archive "$A" --dispatch -o "$TMP/disp"
out_has "dispatch fitness 26.829"
for cu in "$TMP"/best/*.cu "$TMP"/disp/*.cu; do
	[ -s "$cu" ] || fail "no exported source in $TMP/best or $TMP/disp"
done
done_ok
