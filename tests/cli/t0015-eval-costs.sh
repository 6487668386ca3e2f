#!/usr/bin/env bash
# tools/eval-costs.py (where an evaluation's time went, run against run; tools/bench-mpi.sh
# prints it): over the records of docs/example's gqa archive and a run made of one family's,
# each run's medians, and per family the runs share; a file that is not `archive ls --json`
# is named.
. "$(dirname "$0")/lib.sh"

run 0 "$KSEARCH" archive import docs/example/gqa-h200.json --archive "$TMP/a"
run 0 "$KSEARCH" archive ls --op gqa --archive "$TMP/a" --sort id --json
cp "$TMP/out" "$TMP/whole.json"
python3 -c '
import json, sys
records = json.load(open(sys.argv[1]))
json.dump([r for r in records if r["family"] == "gqa_space_pages"], open(sys.argv[2], "w"))
' "$TMP/whole.json" "$TMP/pages.json" || fail "could not write one family's records"
run 0 python3 tools/eval-costs.py "$TMP/whole.json" "$TMP/pages.json"
out_has "run (median s)"
out_has "wall avg"
# docs/example's records predate wait_s, warmup_s, prechecks_s and announce_s: "-"; they have
# the verified runs' time (vrun, overhead.verify_s)
grep -Eq '^whole +256( +[0-9]+\.[0-9]{3}){6} +- +[0-9]+\.[0-9]{3}( +-){3}( +[0-9]+\.[0-9]{3}){2}$' "$TMP/out" ||
	fail "no row of 256 records and 9 figures (the loop's parts but vrun: -) for 'whole'"
grep -Eq '^pages +59( +[0-9]+\.[0-9]{3}){6} +- +[0-9]+\.[0-9]{3}( +-){3}( +[0-9]+\.[0-9]{3}){2}$' "$TMP/out" ||
	fail "no row of 59 records for 'pages'"
out_has "family gqa_space_pages:"
out_lacks "family gqa_space_cluster:" # not in every run
# within one family both runs hold the same records: the same figures
rows=$(sed -n '/^family gqa_space_pages:/,$p' "$TMP/out" | sed 's/^ *[a-z]* *//' | sort -u | wc -l)
[ "$rows" = 2 ] || fail "the family's rows differ between two runs of the same records"

# a record's loop parts are their medians
python3 -c '
import json, sys
records = json.load(open(sys.argv[1]))
for r in records:
    r["overhead"].update(wait_s=0.125, verify_s=0.1875, warmup_s=0.25, prechecks_s=0.5, announce_s=0.0625)
json.dump(records, open(sys.argv[2], "w"))
' "$TMP/pages.json" "$TMP/waited.json" || fail "could not write records with wait_s"
run 0 python3 tools/eval-costs.py "$TMP/waited.json"
grep -Eq '^waited +59( +[0-9]+\.[0-9]{3}){6} +0\.125 +0\.188 +0\.250 +0\.500 +0\.062( +[0-9]+\.[0-9]{3}){2}$' "$TMP/out" ||
	fail "no wait 0.125, vrun 0.188, warmup 0.250, prechk 0.500, msgs 0.062 for 'waited'"

# records that say where they were timed: a row per GPU, named by rank and GPU
python3 -c '
import json, sys
records = json.load(open(sys.argv[1]))
for i, r in enumerate(records):
    r["where"] = {"host": "h", "gpu": i % 2, "rank": 1 + i % 3}
json.dump(records, open(sys.argv[2], "w"))
' "$TMP/pages.json" "$TMP/placed.json" || fail "could not write records with where"
run 0 python3 tools/eval-costs.py "$TMP/placed.json"
out_has "placed by GPU:"
grep -Eq '^  rank 1 gpu 0 +10( +[0-9.-]+)+$' "$TMP/out" || fail "no row of 10 records for rank 1 gpu 0"
[ "$(grep -c '^  rank [123] gpu [01] ' "$TMP/out")" = 6 ] || fail "not 6 rows, one per (rank, GPU)"

echo '{"not": "records"}' >"$TMP/bad.json"
run 1 python3 tools/eval-costs.py "$TMP/bad.json"
err_has "bad.json: not a list of records"
echo 'garbage' >"$TMP/garbage.json"
run 1 python3 tools/eval-costs.py "$TMP/garbage.json"
err_has "garbage.json: Expecting value"
run 2 python3 tools/eval-costs.py
done_ok
