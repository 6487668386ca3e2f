#!/usr/bin/env bash
# `ksearch profile` without a GPU: its usage errors, the missing profiler,
# and a stored profile as `archive show` and `report` show it (the fixture with a
# profile added to its best candidate, as `ksearch profile` stores it).
. "$(dirname "$0")/lib.sh"
A="$TMP/archive"

run 0 "$KSEARCH" profile --help
out_has "--best"
out_has "Nsight Compute"
out_has "3  no profiler here"
run 2 "$KSEARCH" profile --id 3
err_has "--op NAME is required"
run 2 "$KSEARCH" profile --op gqa
err_has "expected one candidate: --id ID, --best, or one FILE.cu"
run 2 "$KSEARCH" profile --op gqa --id 3 --best
err_has "expected one candidate"
run 2 "$KSEARCH" profile --op gqa --id 3 operators/gqa/reference.cu
err_has "expected one candidate"
run 2 "$KSEARCH" profile --op gqa --best --param SPLITS=8
err_has "--param goes with a FILE"
# a FILE's params are checked before the profiler is looked for (-p is --param, as in check)
run 2 "$KSEARCH" profile --op gqa operators/gqa/seeds/split_kv.cu -p NOPE=1
err_has "--param NOPE=1: operators/gqa/seeds/split_kv.cu has no param 'NOPE' (its params: SPLITS"
run 2 "$KSEARCH" profile --op gqa operators/gqa/seeds/split_kv.cu -p SPLITS=3
err_has "3 is not among SPLITS's values"
run 2 "$KSEARCH" profile --op mla_decode operators/mla_decode/seeds/mla_mma.cu -p TILE=64
err_has "\"CHUNK % TILE == 0\" does not hold for CHUNK=32"
err_has "the candidate's constraints rule these params out"
run 1 "$KSEARCH" profile --op gqa tests/gpu/hostile/zz_good.cu
err_has "zz_good.cu"
run 2 "$KSEARCH" profile --op gqa operators/gqa/reference.cu --archive "$A"
err_has "--archive and --gpu pick an archive's candidate"
run 2 "$KSEARCH" profile --op gqa operators/gqa/reference.cu --workload b7
err_has "--workload b7: gqa has no such workload"

# no profiler: said, with what to do, exit 3
KSEARCH_NCU=/nonexistent/ncu run 3 "$KSEARCH" profile --op gqa operators/gqa/reference.cu
err_has "/nonexistent/ncu not found: profiling needs Nsight Compute's ncu"

# an archive whose best (#8) was profiled
python3 - tests/fixtures/archive-small.json "$TMP/profiled.json" <<'PY' || fail "cannot write the fixture"
import json, sys
doc = json.load(open(sys.argv[1]))
for c in doc["candidates"]:
    if c["id"] == 8:
        c["profile"] = {"tool": "ncu 2025.3.1.0", "workload": "b64_kv46287", "launches": 2,
                        "duration_us": 61.2, "dram_fraction": 0.62, "achieved_occupancy": 0.23,
                        "l2_hit_rate": 0.41, "sm_throughput": 0.35,
                        "stalls": [{"reason": "long_scoreboard", "share": 0.61},
                                   {"reason": "barrier", "share": 0.12}, {"reason": "wait", "share": 0.08}],
                        "local_load_bytes": 0, "local_store_bytes": 0, "kernels": [],
                        "profiled": "2026-11-24T14:00:00Z", "seconds": 5.8}
        c["descriptors"]["dram_fraction"] = 0.62
        c["descriptors"]["achieved_occupancy"] = 0.23
json.dump(doc, open(sys.argv[2], "w"))
PY
run 0 "$KSEARCH" archive import "$TMP/profiled.json" --archive "$A"
run 0 "$KSEARCH" archive verify --archive "$A"
run 0 "$KSEARCH" archive show 8 --archive "$A" --no-source
out_has "profile     ncu 2025.3.1.0 on b64_kv46287, 2 launches, 61.20 us under the profiler, 2026-11-24T14:00:00Z"
out_has "  DRAM throughput 62% of peak, SM throughput 35% of peak, L2 hit rate 41%"
out_has "  achieved occupancy 0.23"
out_has "  warp stalls: long scoreboard 61%, barrier 12%, wait 8%"
out_has "  local memory (spills): none"
out_has "dram_fraction=0.62"
run 0 "$KSEARCH" archive show 8 --archive "$A" --json
out_has '"tool": "ncu 2025.3.1.0"'
run 0 "$KSEARCH" archive show 1 --archive "$A" --no-source
out_has "profile     not yet (\`ksearch profile --op gqa --id 1\`)"
# an export carries the profile
run 0 "$KSEARCH" archive export --archive "$A"
out_has '"profile":{"tool":"ncu 2025.3.1.0","workload":"b64_kv46287"'

# the report shows the best's counters, and each profiled elite's on hover
run 0 "$KSEARCH" report --archive "$A" -o "$TMP/report.html"
grep -q 'Hardware counters (Nsight Compute, on b64_kv46287)' "$TMP/report.html" ||
	fail "the report does not show the best candidate's profile"
grep -q 'warp stalls: long scoreboard 61%, barrier 12%, wait 8%' "$TMP/report.html" ||
	fail "the report does not show the profile's stalls"
grep -q 'Nsight Compute on b64_kv46287:' "$TMP/report.html" || fail "the grid's hover lacks the profile"
checks=$((checks + 1))

# a knob child is named with the seed it came from (here without a GPU: the error names it;
# on a GPU, /bin/true as the profiler fails and the error names it too)
knob_fixture "$TMP/knob.json" || fail "cannot write the knob fixture"
run 0 "$KSEARCH" archive import "$TMP/knob.json" --archive "$TMP/knob"
KSEARCH_NCU=/bin/true "$KSEARCH" profile --op gqa --id 6 --archive "$TMP/knob" >"$TMP/out" 2>"$TMP/err"
[ $? != 0 ] || fail "profiling with /bin/true as ncu succeeded"
err_has "#6 (knob-3, from split_kv)"
KSEARCH_NCU=/bin/true "$KSEARCH" profile --op gqa --id 5 --archive "$TMP/knob" >"$TMP/out" 2>"$TMP/err"
err_has "#5 (split_kv)"

# profiling a record needs a verified one

run 1 "$KSEARCH" profile --op gqa --id 4 --archive "$A"
err_has "candidate #4 is compile_error: only verified candidates are profiled"
done_ok
