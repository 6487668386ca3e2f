#!/usr/bin/env bash
# tools/bench-mpi.sh --summarize (no GPU): the summary of runs already made, from their
# output (NAME.txt, NAME.jsonl, costs/NAME.json): evaluations an hour and the ratio to the
# first run, then from 40 s on; a missing run's files are named, and nothing is run.
. "$(dirname "$0")/lib.sh"
D="$TMP/bench"
mkdir -p "$D/costs"

# one: 100 evaluations, one every second for 100 s on one GPU.  4x1: 4 GPUs, 360
# evaluations in 100 s, 100 of them in the first 40 s (the ramp) and 260 after.
python3 - "$D" <<'PY' || fail "cannot write the runs"
import json, sys
d = sys.argv[1]
def write(name, ends, gpus, busy):
    with open(f"{d}/{name}.jsonl", "w") as log:
        log.write(json.dumps({"event": "start", "op": "gqa"}) + "\n")
        for i, t in enumerate(ends, 1):
            log.write(json.dumps({"event": "result", "id": i, "evaluated_t": t, "worker_s": 0.5}) + "\n")
        log.write(json.dumps({"event": "stop", "reason": "time", "wall_s": 100.0}) + "\n")
    records = [{"id": i, "verdict": "ok", "family": "split_kv",
                "timing": {"wall_s": 0.5, "compile_s": 1.0, "time_s": 0.4},
                "where": {"host": "h", "gpu": i % gpus, **({"rank": i % gpus} if gpus > 1 else {})}}
               for i in range(1, len(ends) + 1)]
    json.dump(records, open(f"{d}/costs/{name}.json", "w"))
    with open(f"{d}/{name}.txt", "w") as f:
        f.write(f"stopped (time) after {len(ends)} evaluations in 100 s\n")
        f.write(f"time: compile 1 s, GPU evaluation 1 s, GPUs busy {busy}% of the wall time\n")
write("one", [i + 1.0 for i in range(100)], 1, 90)
write("4x1", [40.0 * i / 100 for i in range(100)] + [40 + 60.0 * i / 260 for i in range(260)], 4, 95)
PY

run 0 bash tools/bench-mpi.sh --summarize --runs "one 4x1" "$D"
grep -Eq '^one +100 +100 +3600 +1\.00x +90%$' "$TMP/out" || fail "one: not 3600 an hour, 90% busy"
grep -Eq '^4x1 +360 +100 +12960 +3\.60x +95%$' "$TMP/out" || fail "4x1: not 12960 an hour, 3.60x"
out_has "from 40 s on (evaluations an hour, ratio to the first run):"
grep -Eq '^  one +3660 +1\.00x$' "$TMP/out" || fail "one from 40 s: not 61 in 60 s"
grep -Eq '^  4x1 +15600 +4\.26x$' "$TMP/out" || fail "4x1 from 40 s: not 260 in 60 s"
[ -f "$D/4x1-gpu-time.txt" ] || fail "no 4x1-gpu-time.txt"
[ ! -e "$D/archive-one" ] || fail "--summarize ran a search"

run 2 bash tools/bench-mpi.sh --summarize --runs "one 2x2" "$D"
err_has "bench-mpi: --summarize: no $D/2x2.txt (run 2x2's output)"
run 2 bash tools/bench-mpi.sh --summarize --runs "one 3x3" "$D"
err_has "bench-mpi: unknown run '3x3'"
run 0 bash tools/bench-mpi.sh --help
out_has "--summarize runs nothing"
done_ok
