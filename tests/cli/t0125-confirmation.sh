#!/usr/bin/env bash
# Confirmations without a GPU: a record timed again on fresh length splits
# (the search's confirmation, imported with it) ranks among each workload's
# bests by the slower of its two times, and one whose confirmation failed is
# no workload's best; `archive stats`, `archive verify`, `archive show` and
# `export-best --dispatch` all agree, and `evolve --help` names the share.
# Env: KSEARCH, KS_SOURCE_ROOT.
. "$(dirname "$0")/lib.sh"

# #6 is the fastest on every workload; timed again, it took 500 us on b16_kv23079 (#5 took
# 437.5) and held elsewhere. #5's confirmation failed: #7 is then the next on b16_kv23079.
python3 - tests/fixtures/export-gqa.json "$TMP/confirmed.json" <<'PY' || fail "could not write the fixture"
import json, sys
doc = json.load(open(sys.argv[1]))
for r in doc["candidates"]:
    if r["id"] == 6:
        r["confirmation"] = {"status": "ok", "times_us": {"b1_kv546": 19.0, "b16_kv8636": 133.0,
                             "b16_kv23079": 500.0, "b64_kv28815": 430.0, "b64_kv46287": 690.0}}
    if r["id"] == 5:
        r["confirmation"] = {"status": "failed", "failed_as": "wrong", "why": "output[3]: 7 != 1"}
json.dump(doc, open(sys.argv[2], "w"))
PY
A="$TMP/ar"
run 0 "$KSEARCH" archive import "$TMP/confirmed.json" --archive "$A"
run 0 "$KSEARCH" archive verify --archive "$A" --op gqa
run 0 "$KSEARCH" archive stats --archive "$A" --op gqa
# b16_kv23079: #6 at 500 loses to #7 at 477.27 (#5 at 437.5 is out); elsewhere #6 at its slower time
grep -Eq '^b16_kv23079 +7 +477\.27' "$TMP/out" || fail "b16_kv23079's best should be #7 at 477.27 us: $(cat "$TMP/out")"
grep -Eq '^b64_kv46287 +6 +690\.00' "$TMP/out" || fail "b64_kv46287's best should be #6 at its slower 690 us"
grep -Eq '^b1_kv546 +6 +19\.35' "$TMP/out" || fail "b1_kv546's best should be #6 at its slower 19.35 us"
run 0 "$KSEARCH" archive show 6 --archive "$A" --op gqa --no-source
out_has "timed again on fresh length splits:"
out_has "b16_kv23079 500.00 us"
run 0 "$KSEARCH" archive show 5 --archive "$A" --op gqa --no-source
out_has "failed as wrong when timed again (output[3]: 7 != 1): no workload's best"
# the fitness and the best stand: #6
run 0 "$KSEARCH" export-best --op gqa --archive "$A" -o "$TMP/best" --ignore-sanitizer
out_has "exported candidate #6"
# the dispatch takes #7 for b16_kv23079
run 0 "$KSEARCH" export-best --op gqa --archive "$A" --dispatch -o "$TMP/dispatch" --ignore-sanitizer
grep -Eq '^ +b16_kv23079 +#7 ' "$TMP/out" || fail "the dispatch should take #7 for b16_kv23079: $(cat "$TMP/out")"
grep -Eq '^ +b64_kv46287 +#6 .*690\.00 us' "$TMP/out" || fail "the dispatch should take #6 at 690 us for b64_kv46287"
run 0 "$KSEARCH" evolve --help
out_has "--confirm-share F"
out_has "no best holds its place by a lucky draw"
out_has "none started past 5% of DURATION more (10 s to 1 min)"
done_ok
