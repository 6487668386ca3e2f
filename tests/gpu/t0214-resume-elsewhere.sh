#!/usr/bin/env bash
# A search resumed on an archive whose workload bests another GPU timed says so
# (hosts of one GPU model time a kernel differently: a cluster kernel ran 7-12%
# slower on a 2-GPU host than on single-GPU ones), and says nothing when this
# run's GPU timed them or the records do not name a GPU.  The archive is the
# small fixture, imported for this machine's GPU model and gqa's grid, its
# records' "where" set by the test.
#
# Needs a GPU (exit 77 = skipped otherwise).  Env: KSEARCH, KS_SOURCE_ROOT.
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "SKIP: no NVIDIA GPU (nvidia-smi lists none)"
	exit 77
fi
. "$(dirname "$0")/../cli/lib.sh"
model=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0)
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0)
echo "GPU 0: $model, $uuid"

# fixture FILE UUID: the small fixture with #8 (both workloads' best) timed on GPU UUID ("" none),
# and gqa's grid as it is now (a search refuses an archive of another grid)
fixture() {
	python3 - tests/fixtures/archive-small.json "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["grid"] = json.load(open("operators/gqa/op.json"))["ksearch"]["grid"]
for c in d["candidates"]:
    if c["id"] == 8 and sys.argv[3]:
        c["where"] = {"host": "elsewhere", "gpu": 3, "gpu_uuid": sys.argv[3],
                      "cpu_model": "AMD EPYC 9654 96-Core Processor", "host_cpus": 64, "host_gpus": 4}
json.dump(d, open(sys.argv[2], "w"))
PY
}
# resume NAME UUID: import the fixture so, and resume a search of 2 candidates on it
resume() {
	fixture "$TMP/$1.json" "$2"
	run 0 "$KSEARCH" archive import "$TMP/$1.json" --archive "$TMP/$1" --gpu "$model"
	run 0 "$KSEARCH" evolve --op gqa --archive "$TMP/$1" --budget 2 --profile-share 0 --sanitize-share 0
	out_has "resuming $TMP/$1/"
}

resume other GPU-11112222-3333-4444-5555-666677778888
out_has "note: the bests of b1_kv546, b16_kv8636 were not timed on this run's GPU (the first was on GPU 3 (GPU-11112222-3333-4444-5555-666677778888) of host elsewhere: 64 CPUs (AMD EPYC 9654 96-Core Processor), 4 GPUs)."
resume same "$uuid"
out_lacks "note: the best"
resume unnamed ""
out_lacks "note: the best"
# the run's own records name this GPU
run 0 "$KSEARCH" archive ls --archive "$TMP/other" --sort id --json
newest=$(python3 -c 'import json, sys; print(max(r["id"] for r in json.load(open(sys.argv[1]))))' "$TMP/out")
[ "$newest" -gt 10 ] || fail "the search added no record to the fixture's 10"
run 0 "$KSEARCH" archive show "$newest" --archive "$TMP/other" --no-source
out_has "($uuid) of host"
done_ok
