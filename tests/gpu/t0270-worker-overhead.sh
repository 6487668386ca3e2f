#!/usr/bin/env bash
# What a GPU worker does beside the timed runs stays small: over a short gqa
# search, the driver allocates device memory in the worker's first evaluation
# and hardly at all after it (buffers are kept from one evaluation to the next,
# src/evaluate/devpool.c), and the worker tells the coordinator its deadline
# once a step, not once a timed run.  Both had cost evaluations 0.4 s or more
# on a host busy with other workers and compilers (BENCHMARKS.md, "Why
# evaluations slowed beside other workers").
#
# Needs a GPU (exit 77 = skipped otherwise).  Env: KSEARCH, KS_SOURCE_ROOT.
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "SKIP: no NVIDIA GPU to run kernels on"
	exit 77
fi
. "$(dirname "$0")/../cli/lib.sh"

A="$TMP/archive"
run 0 "$KSEARCH" evolve --op gqa --budget 10 --gpus 0 --profile-share 0 --sanitize-share 0 --archive "$A"
run 0 "$KSEARCH" archive ls --op gqa --archive "$A" --sort id --json
cp "$TMP/out" "$TMP/records.json"
python3 - "$TMP/records.json" <<'PY' || fail "the worker's overhead (above)"
import json, statistics, sys
records = [r for r in json.load(open(sys.argv[1]))
           if r.get("verdict") in ("ok", "wrong") and isinstance(r.get("overhead"), dict)]
if len(records) < 5:
    sys.exit(f"only {len(records)} evaluated records with their overhead (expected 10)")
for r in records:
    for key in ("allocations", "announcements", "runs"):
        if not isinstance(r["overhead"].get(key), int):
            sys.exit(f"record {r.get('id')}: overhead.{key} missing")
# records come in the order candidates were proposed, not evaluated: the
# fresh worker's first evaluation is the one that allocated most
allocs = [r["overhead"]["allocations"] for r in records]
first, typical = max(allocs), statistics.median(allocs)
print(f"device allocations per evaluation, by record: {allocs}")
if first < 20:
    sys.exit(f"no evaluation made more than {first} allocations: not a fresh worker?")
if typical > first / 4:
    sys.exit(f"evaluations still allocate (median {typical} against {first} in the first): "
             "the worker's buffers are not kept between evaluations")
runs = sum(r["overhead"]["runs"] for r in records)
msgs = sum(r["overhead"]["announcements"] for r in records)
print(f"{msgs} deadline messages for {runs} timed runs")
if msgs >= 0.6 * runs:
    sys.exit("a deadline message for most timed runs (expected one per step)")
PY
done_ok
