#!/usr/bin/env bash
# `ksearch ops` lists the shipped operators with workloads and seeds.
. "$(dirname "$0")/lib.sh"

run 0 "$KSEARCH" ops
out_has "gqa  (gqa_paged_decode_h32_kv4_d128_ps1)"
out_has "rmsnorm"
out_has "softmax"
out_has "b64_kv46287"
out_has "num_kv_indices=46287"
out_has "b16_kv8636"
out_has "check workloads:"

run 0 "$KSEARCH" ops --op gqa --json
python3 - "$TMP/out" <<'PY' || fail "ops --json is not the expected JSON"
import json, sys
ops = json.load(open(sys.argv[1]))
assert len(ops) == 1 and ops[0]["op"] == "gqa", ops
w = {x["id"]: x["axes"] for x in ops[0]["workloads"]}
pairs = sorted((a["batch_size"], a["num_kv_indices"]) for a in w.values())
assert pairs == [(1, 546), (16, 8636), (16, 23079), (64, 28815), (64, 46287)], pairs
assert all(a["len_indptr"] == a["batch_size"] + 1 for a in w.values())
assert len(ops[0]["seeds"]) >= 3
PY

run 1 "$KSEARCH" ops --op gqb
err_has "unknown operator 'gqb'; did you mean 'gqa'?"

# a broken operator is reported and the others still listed
mkdir -p "$TMP/ops/broken" "$TMP/ops/gqa"
cp -r operators/gqa/. "$TMP/ops/gqa/"
printf '{"name": "x",\n "axes": {"n": {"type": "var"}},,\n}\n' > "$TMP/ops/broken/op.json"
run 3 env KSEARCH_OPERATORS="$TMP/ops" "$KSEARCH" ops
err_has "broken/op.json:2:"
out_has "gqa  (gqa_paged_decode"
# --json lists the broken one too, with its error (issue 14: it was left out)
run 3 env KSEARCH_OPERATORS="$TMP/ops" "$KSEARCH" ops --json
python3 - "$TMP/out" "$TMP/ops/broken" <<'PY' || fail "ops --json does not list the broken operator"
import json, sys
ops = {o["op"]: o for o in json.load(open(sys.argv[1]))}
assert ops["broken"]["folder"] == sys.argv[2] and "op.json:2:" in ops["broken"]["error"], ops["broken"]
assert ops["gqa"]["workloads"] and "error" not in ops["gqa"], ops["gqa"]
PY
done_ok
