#!/usr/bin/env bash
# The sanitizer's verdict without a GPU: `ksearch sanitize` refuses bad usage
# and says when there is no compute-sanitizer; a record whose check failed
# (imported with it) is demoted: not the best, not a per-workload best,
# `archive show` says so, and `export-best` refuses it by name with the first
# error (unless --ignore-sanitizer) and warns about a winner never checked.
# Env: KSEARCH, KS_SOURCE_ROOT.
. "$(dirname "$0")/lib.sh"

# usage
run 2 "$KSEARCH" sanitize operators/rmsnorm/reference.cu
err_has "--op NAME is required"
run 2 "$KSEARCH" sanitize --op rmsnorm
err_has "expected one candidate: --id ID, --best, or one FILE.cu"
run 2 "$KSEARCH" sanitize --op rmsnorm --best --id 3
err_has "expected one candidate"
run 2 "$KSEARCH" sanitize --op rmsnorm --param X=1 --best
err_has "--param goes with a FILE"
# a FILE's params are checked before the sanitizer is looked for (-p is --param, as in check)
run 2 "$KSEARCH" sanitize --op gqa operators/gqa/seeds/split_kv.cu -p WARPS=5
err_has "5 is not among WARPS's values"
run 2 "$KSEARCH" sanitize --op rmsnorm operators/rmsnorm/reference.cu --workload nope
err_has "--workload nope: rmsnorm has no such workload"
# no sanitizer: exit 3, naming what was looked for and how to point at it
KSEARCH_COMPUTE_SANITIZER=/nonexistent/compute-sanitizer run 3 "$KSEARCH" sanitize --op rmsnorm operators/rmsnorm/reference.cu
err_has "/nonexistent/compute-sanitizer not found"
err_has "KSEARCH_COMPUTE_SANITIZER"
KSEARCH_COMPUTE_SANITIZER=/nonexistent/cs run 3 "$KSEARCH" sanitize --op rmsnorm operators/rmsnorm/reference.cu --json
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['exit_code'] == 3 and 'not found' in d['error']" "$TMP/out" ||
	fail "sanitize --json without a sanitizer: expected {command, exit_code 3, error}"

# an archive where #6 (the best by fitness, and the fastest on every workload) failed its check
# and #5 (the next) was checked clean
python3 - tests/fixtures/export-gqa.json "$TMP/checked.json" <<'PY' || fail "could not write the fixture"
import json, sys
doc = json.load(open(sys.argv[1]))
for r in doc["candidates"]:
    if r["id"] == 6:
        r["sanitizer"] = {"status": "failed", "tools": ["memcheck"], "workloads": ["b1_kv1"], "errors": 2,
                          "first": "Invalid __global__ write of size 4 bytes", "first_tool": "memcheck",
                          "smem_bytes": 0, "version": "compute-sanitizer 2025.3.0", "seconds": 3.5,
                          "checked": "2026-11-25T10:00:00Z"}
    if r["id"] == 5:
        r["sanitizer"] = {"status": "clean", "tools": ["memcheck", "racecheck"], "workloads": ["b1_kv1", "b1_kv546"],
                          "errors": 0, "smem_bytes": 1024, "version": "compute-sanitizer 2025.3.0",
                          "seconds": 6.25, "checked": "2026-11-25T10:00:00Z"}
json.dump(doc, open(sys.argv[2], "w"))
PY
A="$TMP/ar"
run 0 "$KSEARCH" archive import "$TMP/checked.json" --archive "$A"
run 0 "$KSEARCH" archive verify --archive "$A" --op gqa
run 0 "$KSEARCH" archive show 6 --archive "$A" --op gqa --no-source
out_has "FAILED: 2 errors, the first (memcheck): Invalid __global__ write of size 4 bytes"
out_has "demoted: no elite, no best"
run 0 "$KSEARCH" archive show 5 --archive "$A" --op gqa --no-source
out_has "clean (memcheck, racecheck on 2 workloads, compute-sanitizer 2025.3.0, 6.2 s)"
run 0 "$KSEARCH" archive show 7 --archive "$A" --op gqa --no-source
out_has "not checked (\`ksearch sanitize --op gqa --id 7\`)"

# the best is #5 now, checked clean: no warning
run 0 "$KSEARCH" export-best --op gqa --archive "$A" -o "$TMP/best"
out_has "exported candidate #5"
! grep -q "sanitizer" "$TMP/err" || fail "export-best warned about a clean winner"
# #6 by id: refused, naming it and its first error, exit 3
run 3 "$KSEARCH" export-best --op gqa --archive "$A" --id 6 -o "$TMP/six"
err_has "candidate #6"
err_has "failed its sanitizer check: memcheck reported 2 errors, the first: Invalid __global__ write of size 4 bytes"
err_has "--ignore-sanitizer"
[ -e "$TMP/six" ] && fail "a refused export wrote $TMP/six"
run 0 "$KSEARCH" export-best --op gqa --archive "$A" --id 6 -o "$TMP/six" --ignore-sanitizer
err_has "warning: candidate #6"
err_has "exported anyway (--ignore-sanitizer)"
# #7 was never checked: exported, with a warning that says how to check it
run 0 "$KSEARCH" export-best --op gqa --archive "$A" --id 7 -o "$TMP/seven"
err_has "warning: candidate #7"
err_has "was never checked by the sanitizer"
err_has "ksearch sanitize --op gqa --id 7"
# a dispatch is made of #5 on every workload (#6 is no workload's best any more)
run 0 "$KSEARCH" export-best --op gqa --archive "$A" --dispatch -o "$TMP/dispatch"
out_lacks "#6 "
out_has "#5 "
! grep -q "never checked" "$TMP/err" || fail "a dispatch of clean kernels warned"

# in an archive without checks, the winner and every kernel of a dispatch warn
B="$TMP/plain"
run 0 "$KSEARCH" archive import tests/fixtures/export-gqa.json --archive "$B"
run 0 "$KSEARCH" export-best --op gqa --archive "$B" -o "$TMP/plain-best"
err_has "warning: candidate #6"
run 0 "$KSEARCH" export-best --op gqa --archive "$B" --dispatch -o "$TMP/plain-dispatch"
err_has "was never checked by the sanitizer"

# a knob child is named with the seed it came from (without a GPU the error names it; on a
# GPU, /bin/true as the sanitizer fails and the error names it too)
knob_fixture "$TMP/knob.json" || fail "cannot write the knob fixture"
run 0 "$KSEARCH" archive import "$TMP/knob.json" --archive "$TMP/knob"
KSEARCH_COMPUTE_SANITIZER=/bin/true "$KSEARCH" sanitize --op gqa --id 6 --archive "$TMP/knob" \
	>"$TMP/out" 2>"$TMP/err"
[ $? != 0 ] || fail "checking with /bin/true as the sanitizer succeeded"
err_has "#6 (knob-3, from split_kv)"
done_ok
