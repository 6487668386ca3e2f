#!/usr/bin/env bash
# `ksearch archive`: import the small fixture (tests/fixtures/archive-small.json:
# ten gqa candidates with a lineage, failures and an out-of-grid one; the
# sources are the real split_kv and group_cta seeds and two LLM edits of
# split_kv, the timings synthetic), then every subcommand and its errors.
. "$(dirname "$0")/lib.sh"
FIXTURE=tests/fixtures/archive-small.json
A="$TMP/archive"
ka() { "$KSEARCH" archive "$@"; }

run 0 ka import "$FIXTURE" --archive "$A"
out_has "imported 10 candidates into $A/gqa/nvidia-h200 (ids kept), and 1 strategy prompt"
run 0 ka verify --archive "$A"
out_has "ok: $A/gqa/nvidia-h200: 10 candidates, 4 sources, 3 elites"

# help
run 0 ka --help
out_has "lineage"
out_has "ksearch archive grid --x smem_bytes --y launches"
run 0 ka ls --help
out_has "--sort KEY"
out_has "examples:"
run 0 "$KSEARCH" help archive
out_has "subcommands:"
run 2 ka lss
err_has "unknown subcommand 'lss'; did you mean 'ls'?"
run 2 ka

# ls
run 0 ka ls --archive "$A"
head -2 "$TMP/out" | tail -1 | grep -qE '^ +8  ok +2\.600' || fail "ls does not start with the best (#8)"
out_has "1,2,0 *"
out_has "outside"
run 0 ka ls --archive "$A" --limit 3
[ "$(wc -l <"$TMP/out")" = 4 ] || fail "ls --limit 3 printed other than a header and 3 rows"
run 0 ka ls --archive "$A" --verdict wrong
out_has "SPLITS=8 WARPS=8"
[ "$(wc -l <"$TMP/out")" = 2 ] || fail "ls --verdict wrong printed other than one row"
run 0 ka ls --archive "$A" --sort time -n 1
grep -qE '^ +10  ok' "$TMP/out" || fail "ls --sort time does not start with the newest"
run 0 ka ls --archive "$A" --verdict crash
err_has "no candidates with verdict crash"
run 2 ka ls --archive "$A" --verdict okk
err_has "unknown verdict 'okk'; did you mean 'ok'?"
run 2 ka ls --archive "$A" --sort speed
err_has "--sort takes fitness, time or id"
run 2 ka ls --archive "$A" --limit 0
err_has "--limit 0: expected a number >= 1"
run 2 ka ls --archive "$A" --limit -3
err_has "--limit -3: expected a number >= 1"
run 0 ka ls --archive "$A" --sort id --json
python3 - "$TMP/out" <<'PY' || fail "ls --json"
import json, sys
ids = [r["id"] for r in json.load(open(sys.argv[1]))]
assert ids == list(range(1, 11)), ids
PY

# show
run 0 ka show 8 --archive "$A"
out_has "candidate #8  ok  fitness 2.600"
out_has "SPLITS=16 WARPS=8"
out_has "parents     #6 (fitness 2.400)"
out_has "launches [2, 3) smem_bytes [16384, 49153) tensor_cores [0, 1)  (the cell's elite)"
out_has "b16_kv8636"
out_has "__syncthreads();"
run 0 ka show '#6' --archive "$A"
out_has "(elite: #8, fitness 2.600)"
out_has "1800 prompt + 950 completion tokens"
run 0 ka show 5 --archive "$A" --no-source
out_has "412 of 4096 elements differ"
out_lacks "extern \"C\""
run 0 ka show 10 --archive "$A"
out_has "outside the grid: smem_bytes = 300000 is outside the grid's edges [0, 232449)"
# the length splits a workload was timed on, and how far apart (evaluator 3): (50 - 40) / 44.444 = 22.5%
out_has "length splits (the time above is their median; spread"
out_has "b1_kv546         skewed 50.00 us, uniform 44.44 us, even 40.00 us  (spread 23%)"
run 0 ka show 3 --archive "$A" --json
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["id"]==3 and "__global__" in r["source"] and len(r["source_hash"])==64' "$TMP/out" || fail "show --json"
run 1 ka show 999 --archive "$A"
err_has "no candidate #999 in $A/gqa/nvidia-h200 (its ids go from 1 to 10)"
run 2 ka show abc --archive "$A"
err_has "'abc' is not a candidate id"
run 2 ka show --archive "$A"
run 2 ka show -1 --archive "$A"
err_has "'-1' is not a candidate id"

# grid
run 0 ka grid --archive "$A" --color never
out_has "x = launches, y = smem_bytes; folded (best over): tensor_cores"
out_has "3 of 45 cells filled (coverage 6.7%)"
out_has "[16384,49153)"
out_has "2.600#"
out_has "legend:"
out_lacks $'\033'
run 0 ka grid --archive "$A" --x smem_bytes --y tensor_cores --color always
out_has $'\033[48;5;'
out_has "folded (best over): launches"
run 0 ka grid --archive "$A" --x tensor_cores --color never
out_has "x = tensor_cores, y = launches"
run 2 ka grid --archive "$A" --x smem
err_has "unknown descriptor 'smem' for --x; did you mean 'smem_bytes'? (the grid's axes: launches, smem_bytes, tensor_cores)"
run 2 ka grid --archive "$A" --y registers
err_has "descriptor 'registers' (--y) is not an axis of this archive's grid"
run 2 ka grid --archive "$A" --x launches --y launches
run 2 ka grid --archive "$A" --color sometimes

# stats
run 0 ka stats --archive "$A"
out_has "candidates  10  (4 distinct sources"
out_has "compile_error"
out_has "coverage 6.7%"
out_has "QD-score    5.600"
out_has "best        2.600  (#8)"
out_has "best over time"
run 0 ka stats --archive "$A" --json
python3 - "$TMP/out" <<'PY' || fail "stats --json"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["candidates"] == 10 and s["verdicts"]["wrong"] == 1 and s["cells_filled"] == 3, s
assert abs(s["qd_score"] - 5.6) < 1e-9 and s["best_id"] == 8, s
h = s["history"]
assert h[-1]["best"] == 2.6 and all(a["qd_score"] <= b["qd_score"] for a, b in zip(h, h[1:])), h
PY

# where each workload's best was timed: which GPU, on what kind of host (an archive from
# before this was kept says nothing of it)
out_lacks "timed on"
python3 - "$FIXTURE" "$TMP/where.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for c in d["candidates"]:
    if c["id"] == 8:
        c["where"] = {"host": "vm", "gpu": 0, "gpu_uuid": "GPU-df7a642a-adef-00a6-9ffd-a2642a57e642",
                      "cpu_model": "AMD EPYC 9654 96-Core Processor", "host_cpus": 16, "host_gpus": 1}
    if c["id"] == 6:  # faster than #8 at b16, on a 4-GPU host
        c["workloads"][1]["median_us"] = 90.0
        c["where"] = {"host": "vm", "gpu": 2, "gpu_uuid": "GPU-11112222-3333-4444-5555-666677778888",
                      "cpu_model": "Intel(R) Xeon(R) Platinum 8480C", "host_cpus": 64, "host_gpus": 4, "rank": 1}
json.dump(d, open(sys.argv[2], "w"))
PY
run 0 ka import "$TMP/where.json" --archive "$TMP/where"
run 0 ka show 8 --archive "$TMP/where" --no-source
out_has "timed on    GPU 0 (GPU-df7a642a-adef-00a6-9ffd-a2642a57e642) of host vm: 16 CPUs (AMD EPYC 9654 96-Core Processor), 1 GPU"
run 0 ka show 6 --archive "$TMP/where" --no-source
out_has "timed on    GPU 2 (GPU-11112222-3333-4444-5555-666677778888) of host vm (MPI rank 1): 64 CPUs (Intel(R) Xeon(R) Platinum 8480C), 4 GPUs"
run 0 ka show 7 --archive "$TMP/where" --no-source
out_lacks "timed on"
run 0 ka stats --archive "$TMP/where"
out_has "timed on    2 GPUs or hosts: compare their times only roughly"
out_has "GPU 0 (GPU-df7a642a-adef-00a6-9ffd-a2642a57e642) of host vm: 16 CPUs (AMD EPYC 9654 96-Core Processor), 1 GPU: b1_kv546"
out_has "(MPI rank 1): 64 CPUs (Intel(R) Xeon(R) Platinum 8480C), 4 GPUs: b16_kv8636"
run 0 ka stats --archive "$TMP/where" --json
python3 - "$TMP/out" <<'PY' || fail "stats --json: where the bests were timed"
import json, sys
t = {e["workload"]: e for e in json.load(open(sys.argv[1]))["workload_best_timed_on"]}
assert t["b1_kv546"]["id"] == 8 and t["b1_kv546"]["where"]["host_gpus"] == 1, t
assert t["b16_kv8636"]["id"] == 6 and t["b16_kv8636"]["where"]["gpu_uuid"].startswith("GPU-1111"), t
PY
# a record whose "where" is not what it should be is refused, naming the field
python3 - "$TMP/where.json" "$TMP/badwhere.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["candidates"][7]["where"]["host_gpus"] = -2
json.dump(d, open(sys.argv[2], "w"))
PY
run 1 ka import "$TMP/badwhere.json" --archive "$TMP/badwhere"
err_has "where.host_gpus: -2 is not a count of GPUs"
# a workload best whose record does not read (a disk error, a hand edit) is named, and
# stats goes on; verify names the record
cp -r "$TMP/where" "$TMP/unread"
db=$(dirname "$(find "$TMP/unread" -name data.mdb)")
"$KS_ARCHIVE_TAMPER" "$db" 8 '{"id": 8, "verdict": "ok"' || fail "archive_tamper could not replace record #8"
run 0 ka stats --archive "$TMP/unread"
out_has "unknown (#8 does not read: \`ksearch archive verify\`): b1_kv546"
out_has "(MPI rank 1): 64 CPUs (Intel(R) Xeon(R) Platinum 8480C), 4 GPUs: b16_kv8636"
run 0 ka stats --archive "$TMP/unread" --json
python3 - "$TMP/out" <<'PY' || fail "stats --json with a best that does not read"
import json, sys
t = {e["workload"]: e for e in json.load(open(sys.argv[1]))["workload_best_timed_on"]}
assert t["b1_kv546"]["id"] == 8 and t["b1_kv546"]["where"] is None, t
assert t["b16_kv8636"]["where"]["gpu_uuid"].startswith("GPU-1111"), t
PY
run 3 ka verify --archive "$TMP/unread"
out_has "record #8 is not a JSON object"

# --json prints JSON on every outcome, errors included (issue 14)
json_error() { # json_error CODE ARGS...: exit CODE with {"command", "exit_code": CODE, "error"} on stdout
	local code=$1
	shift
	run "$code" ka "$@" --json
	python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["exit_code"] == int(sys.argv[2]) and j["error"] and j["command"].startswith("archive"), j' \
		"$TMP/out" "$code" || fail "archive $* --json: no JSON error"
}
json_error 1 show 999 --archive "$A"
json_error 2 show abc --archive "$A"
json_error 2 ls --verdict okk --archive "$A"
json_error 1 stats --archive "$TMP/nothing"
json_error 1 prompts --show 99 --archive "$A"
json_error 2 ls --archive "$A" --bogus

# lineage
run 0 ka lineage 8 --archive "$A"
out_has "lineage of #8, oldest first (4 steps)"
out_has "SPLITS 1 -> 8"
out_has "source changed"
out_has "+0.200 (x1.08)"
run 0 ka lineage 7 --archive "$A"
out_has "(also from #2)"
run 1 ka lineage 999 --archive "$A"
err_has "no candidate #999"

# diff
run 0 ka diff 3 8 --archive "$A" --color never
out_has "fitness      1.800 -> 2.600  +0.800 (x1.44)"
out_has "SPLITS 8 -> 16, WARPS 4 -> 8, UNROLL 1 -> 2, source changed"
out_has "smem_bytes 0 -> 16384"
out_has "-30.8%"
out_has "@@ -1,5 +1,5 @@"
out_has '-{ "params": {"SPLITS": [1, 2, 4, 8, 16, 32]'
out_has '+{ "params": {"SPLITS": [4, 8, 16, 32]'
out_has "+ * LLM rewrite (strategy use-async-copy)"
run 0 ka diff 1 3 --archive "$A"
out_has "same text"
run 2 ka diff 3 --archive "$A"
err_has "expected two candidate ids"
run 1 ka diff 3 999 --archive "$A"

# export and import round trip
run 0 ka export --archive "$A" -o "$TMP/all.json"
run 0 ka export --archive "$A" --elites
cp "$TMP/out" "$TMP/elites.json"
python3 - "$TMP/all.json" "$TMP/elites.json" <<'PY' || fail "export"
import json, sys
full, elites = (json.load(open(p)) for p in sys.argv[1:])
assert full["format"] == "ksearch-archive" and full["version"] == 1
assert [c["id"] for c in full["candidates"]] == list(range(1, 11))
assert len(full["sources"]) == 4 and [p["id"] for p in full["prompts"]] == [3]
assert [c["id"] for c in elites["candidates"]] == [3, 7, 8] and elites["elites_only"] is True
assert len(elites["sources"]) == 2
PY
run 0 ka import "$TMP/all.json" --archive "$TMP/copy"
run 0 ka export --archive "$TMP/copy" -o "$TMP/again.json"
python3 - "$TMP/all.json" "$TMP/again.json" <<'PY' || fail "export of an imported export differs"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["candidates"] == b["candidates"] and a["sources"] == b["sources"] and a["prompts"] == b["prompts"]
PY
run 0 ka import "$TMP/all.json" --archive "$A"
out_has "imported 0 candidates"
out_has "skipped 10 already there"

# malformed imports change nothing
head -c 3000 "$FIXTURE" >"$TMP/cut.json"
run 1 ka import "$TMP/cut.json" --archive "$A"
err_has "cut.json:"
python3 - "$FIXTURE" "$TMP/bad.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["candidates"][9]["verdict"] = "fantastic"
json.dump(doc, open(sys.argv[2], "w"))
PY
run 1 ka import "$TMP/bad.json" --archive "$A"
err_has "candidates[9] (id 10): verdict: unknown verdict 'fantastic'"
err_has "(the archive is unchanged)"
run 0 ka stats --archive "$A"
out_has "candidates  10 "
run 1 ka import "$TMP/bad.json" --archive "$TMP/fresh"
[ ! -e "$TMP/fresh" ] || fail "a failed import left $(find "$TMP/fresh") behind"
mkdir -p "$TMP/kept/gqa"
run 1 ka import "$TMP/bad.json" --archive "$TMP/kept/deeper"
[ ! -e "$TMP/kept/deeper" ] && [ -d "$TMP/kept/gqa" ] || fail "a failed import did not leave the folders as they were"
run 1 ka import "$TMP/missing.json" --archive "$A"

# choosing among several archives
run 0 ka import "$FIXTURE" --archive "$A" --op softmax
run 1 ka ls --archive "$A"
err_has "holds several archives: gqa/nvidia-h200, softmax/nvidia-h200; choose one with --op NAME"
run 0 ka ls --archive "$A" --op softmax --gpu 'NVIDIA H200' --limit 1
run 0 ka ls --archive "$A" --op gqa --gpu nvidia-h200 --limit 1
run 1 ka ls --archive "$A" --op rmsnorm
err_has "no archive for operator 'rmsnorm'"
run 1 ka stats --archive "$TMP/nothing"
err_has "no archive in $TMP/nothing"

# damaged files get a clear error, not a crash
cp -r "$TMP/copy" "$TMP/broken"
D="$TMP/broken/gqa/nvidia-h200/data.mdb"
head -c 1000000 /dev/urandom | dd of="$D" bs=4096 count=1 conv=notrunc 2>/dev/null
run 1 ka stats --archive "$TMP/broken"
err_has "not an LMDB file, or its header is damaged"
run 1 ka verify --archive "$TMP/broken"
err_has "header is damaged"
truncate -s 5000 "$D"
run 1 ka ls --archive "$TMP/broken"
err_has "is truncated (5000 bytes"
done_ok
