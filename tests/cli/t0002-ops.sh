#!/usr/bin/env bash
# `ksearch ops` lists the shipped operators with workloads and seeds.
. "$(dirname "$0")/lib.sh"

run 0 "$KSEARCH" ops
out_has "gqa  (gqa_paged_decode_h32_kv4_d128_ps1)"
out_has "rmsnorm"
out_has "softmax"
out_has "mla_decode  (mla_paged_decode_h16_ckv512_kpe64_ps1)"
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

# mla_decode: FlashInfer-Bench's MLA decode definition, the issue's four benchmark shapes with
# uneven lengths written out, odd check workloads, three seed families
run 0 "$KSEARCH" ops --op mla_decode --json
python3 - "$TMP/out" operators/mla_decode/op.json <<'PY' || fail "ops --op mla_decode is not the expected operator"
import json, sys
ops, op = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert len(ops) == 1 and ops[0]["op"] == "mla_decode" and ops[0]["name"] == "mla_paged_decode_h16_ckv512_kpe64_ps1", ops
assert list(op["inputs"]) == ["q_nope", "q_pe", "ckv_cache", "kpe_cache", "kv_indptr", "kv_indices", "sm_scale"]
assert list(op["outputs"]) == ["output", "lse"] and op["outputs"]["lse"]["dtype"] == "float32"
assert {k: v["value"] for k, v in op["axes"].items() if v["type"] == "const"} == \
    {"num_qo_heads": 16, "head_dim_ckv": 512, "head_dim_kpe": 64, "page_size": 1}
w = {x["id"]: x["axes"] for x in ops[0]["workloads"]}
pairs = sorted((a["batch_size"], a["num_kv_indices"]) for a in w.values())
assert pairs == [(1, 4096), (16, 32000), (64, 64000), (128, 256000)], pairs
for x in op["ksearch"]["workloads"] + op["ksearch"]["check_workloads"]:
    lengths = x.get("generators", {}).get("kv_indptr", {}).get("lengths")
    B, N = x["axes"]["batch_size"], x["axes"]["num_kv_indices"]
    if lengths is not None:
        assert len(lengths) == B and sum(lengths) == N and min(lengths) >= 1, x["id"]
    elif x in op["ksearch"]["workloads"]:
        assert B == 1, x["id"] + ": a benchmark workload's lengths are written out"
big = [x for x in op["ksearch"]["workloads"] if x["axes"]["batch_size"] > 1]
assert all(max(l) > 2 * min(l) for l in (x["generators"]["kv_indptr"]["lengths"] for x in big)), "uneven"
checks = {(a["batch_size"], a["num_kv_indices"]) for a in (x["axes"] for x in ops[0]["check_workloads"])}
assert (1, 1) in checks and any(b > 128 for b, _ in checks), checks
assert sorted(s.split("/")[-1] for s in ops[0]["seeds"]) == ["mla_fma.cu", "mla_mma.cu", "mla_mma_ws.cu", "mla_wgmma.cu", "mla_ws.cu"], ops[0]["seeds"]
PY

run 1 "$KSEARCH" ops --op gqb
err_has "unknown operator 'gqb'; did you mean 'gqa'?"
run 1 "$KSEARCH" ops --op GQA
err_has "unknown operator 'GQA'; did you mean 'gqa'?"
run 1 "$KSEARCH" compile tests/gpu/hostile/zz_good.cu --op Rmsnorm
err_has "did you mean 'rmsnorm'?"
# a folder the user named that is not there is said, not skipped (issue 26)
run 1 env KSEARCH_OPERATORS="$TMP/no-such-folder" "$KSEARCH" ops
err_has "KSEARCH_OPERATORS names '$TMP/no-such-folder', which cannot be read (No such file or directory)"
run 1 env KSEARCH_OPERATORS="$TMP/no-such-folder" "$KSEARCH" compile tests/gpu/hostile/zz_good.cu --op rmsnorm
err_has "unset it to use ./operators"

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
