#!/usr/bin/env bash
# tools/pipeline-replay.py (no GPU): a run's compile and evaluation times replayed through the
# search's pipeline rule at other depths.  Two proposals of 1 s to compile and 1 s to time:
# at depth 1 with one compile process all is serial (2 s of 4 on the lane, 50%); at depth 2
# with two, both compile at once and the lane works 2 s of 3 (66.7%).  A compile error costs
# its compile only.  Bad input is named.
. "$(dirname "$0")/lib.sh"

python3 -c '
import json, sys
ok = lambda i: {"id": i, "verdict": "ok", "timing": {"compile_s": 1.0, "wall_s": 1.0}}
json.dump([ok(2), ok(1)], open(sys.argv[1], "w"))
json.dump([ok(1), {"id": 2, "verdict": "compile_error", "timing": {"compile_s": 1.0}}, ok(3)],
          open(sys.argv[2], "w"))
' "$TMP/two.json" "$TMP/error.json" || fail "could not write the records"

run 0 python3 tools/pipeline-replay.py "$TMP/two.json" --depth 1 --jobs 1
out_has "2 proposals (2 evaluated), 1 compile processes, 1 lane(s)"
grep -Eq '^ +1 +50\.0% +1,800 +4\.0$' "$TMP/out" || fail "depth 1, one compile process: not 50% busy over 4 s"
run 0 python3 tools/pipeline-replay.py "$TMP/two.json" --depth 2 --jobs 2
grep -Eq '^ +2 +66\.7% +2,400 +3\.0$' "$TMP/out" || fail "depth 2, two compile processes: not 66.7% over 3 s"
# depth 2, two processes: #1 and #2 (an error) compile at once, #3 after; the lane times #1
# then #3 (1-2 s, 3-4 s): 2 s of 4
run 0 python3 tools/pipeline-replay.py "$TMP/error.json" --depth 2 --jobs 2
out_has "3 proposals (2 evaluated)"
grep -Eq '^ +2 +50\.0% +1,800 +4\.0$' "$TMP/out" || fail "a compile error: not 2 s of 4 on the lane"

echo '{"not": "records"}' >"$TMP/bad.json"
run 1 python3 tools/pipeline-replay.py "$TMP/bad.json"
err_has "bad.json: not a list of records"
echo '[{"id": 1, "verdict": "ok"}]' >"$TMP/none.json"
run 1 python3 tools/pipeline-replay.py "$TMP/none.json"
err_has "none.json: no record with a compile time"
run 1 python3 tools/pipeline-replay.py "$TMP/two.json" --jobs 0
err_has "--jobs, --lanes and --depth must be at least 1"
done_ok
