#!/usr/bin/env bash
# tools/gpu-time.py (where a search's GPU time went; tools/bench-mpi.sh prints it per run):
# over a made-up log and records of two GPUs, the shares add up, evidence is the profile and
# sanitizer events' seconds, and each GPU's gaps are counted (with --detail, listed, each with
# the check it holds); the evaluations an hour from 0 s on; bad input is named.
. "$(dirname "$0")/lib.sh"

# GPU 0 (rank 0) evaluates 0-1, 1-2, then 5-6 (a 3 s gap); GPU 1 (rank 1) 0-2 and 2-4 (no gap).
# A profile held 2.5 s (ending at 4.5 s: inside GPU 0's gap) and a check 1 s (no end given);
# the search ran 10 s on 2 GPUs: 20 GPU-seconds.
python3 -c '
import json, sys
spans = [(1, 0, 0, 1), (2, 0, 1, 2), (3, 0, 5, 6), (4, 1, 0, 2), (5, 1, 2, 4)]
with open(sys.argv[1], "w") as log:
    log.write(json.dumps({"event": "start", "op": "gqa"}) + "\n")
    for i, rank, a, b in spans:
        log.write(json.dumps({"event": "result", "id": i, "evaluated_t": b, "worker_s": b - a}) + "\n")
    log.write(json.dumps({"event": "result", "id": 6, "verdict": "compile_error"}) + "\n")
    log.write(json.dumps({"event": "profile", "id": 1, "seconds": 2.5, "t": 4.5}) + "\n")
    log.write(json.dumps({"event": "sanitizer", "id": 2, "seconds": 1.0}) + "\n")
    log.write(json.dumps({"event": "stop", "reason": "time", "wall_s": 10.0}) + "\n")
records = [{"id": i, "verdict": "ok", "timing": {"wall_s": b - a}, "where": {"host": "h", "gpu": 0, "rank": rank}}
           for i, rank, a, b in spans]
records.append({"id": 6, "verdict": "compile_error", "timing": {"wall_s": 0}})
json.dump(records, open(sys.argv[2], "w"))
' "$TMP/run.jsonl" "$TMP/run.json" || fail "could not write the log and records"

run 0 python3 tools/gpu-time.py --gpus 2 "$TMP/run.jsonl" "$TMP/run.json"
grep -Eq '^GPU time +20\.0 s +100\.0%$' "$TMP/out" || fail "not 20 GPU-seconds"
grep -Eq '^  evaluating +7\.0 s +35\.0%$' "$TMP/out" || fail "not 7 s evaluating (1 + 1 + 1 + 2 + 2)"
grep -Eq '^  profiles and checks +3\.5 s +17\.5%$' "$TMP/out" || fail "not 3.5 s of profiles and checks"
grep -Eq '^  idle +9\.5 s +47\.5%$' "$TMP/out" || fail "not 9.5 s idle"
grep -Eq '^  rank 0 gpu 0 +3 +3\.0 s +1 +3\.0 s$' "$TMP/out" || fail "rank 0's GPU: not 3 evaluations, one 3 s gap"
grep -Eq '^  rank 1 gpu 0 +2 +4\.0 s +0 +0\.0 s$' "$TMP/out" || fail "rank 1's GPU: not 2 evaluations, no gap"
grep -Eq '^evaluations per hour: 1,800 from 0 s$' "$TMP/out" || fail "not 5 evaluations in 10 s, 1,800 an hour"
run 0 python3 tools/gpu-time.py --gpus 2 --detail "$TMP/run.jsonl" "$TMP/run.json"
out_has "rank 0 gpu 0: 1 gaps with a check, 0.5 s beside the checks; 0 without, 0.0 s"
out_has "    at     2.0 s:  3.00 s, a check of 2.50 s in it"
out_has "rank 1 gpu 0: 0 gaps with a check, 0.0 s beside the checks; 0 without, 0.0 s"
run 0 python3 tools/gpu-time.py --gpus 2 --gap 5 "$TMP/run.jsonl" "$TMP/run.json"
grep -Eq '^  rank 0 gpu 0 +3 +3\.0 s +0 +0\.0 s$' "$TMP/out" || fail "--gap 5 still counts a 3 s gap"

# a log without its stop event, a file that is not a log, records that are not records
grep -v '"stop"' "$TMP/run.jsonl" >"$TMP/unfinished.jsonl"
run 1 python3 tools/gpu-time.py --gpus 2 "$TMP/unfinished.jsonl" "$TMP/run.json"
err_has "unfinished.jsonl: no stop event"
echo 'garbage' >"$TMP/garbage.jsonl"
run 1 python3 tools/gpu-time.py --gpus 2 "$TMP/garbage.jsonl" "$TMP/run.json"
err_has "garbage.jsonl:1: not a JSON event"
echo '{"not": "records"}' >"$TMP/bad.json"
run 1 python3 tools/gpu-time.py --gpus 2 "$TMP/run.jsonl" "$TMP/bad.json"
err_has "bad.json: not a list of records"
run 1 python3 tools/gpu-time.py --gpus 0 "$TMP/run.jsonl" "$TMP/run.json"
err_has "--gpus must be at least 1"
done_ok
