#!/usr/bin/env bash
# ksearch op new NAME --from-definition DEF.json: an operator folder from a FlashInfer-Bench
# Definition, with named TODOs that `ksearch ops` lists until they are done; and every bad input.
. "$(dirname "$0")/lib.sh"

O="$TMP/ops"
def="$TMP/def.json"
# the rmsnorm op's Definition, as FlashInfer-Bench has it (op.json without ksearch's block)
python3 - "$def" <<'PY' || fatal "cannot write the definition"
import json, sys
d = json.load(open("operators/rmsnorm/op.json")); del d["ksearch"]
json.dump(d, open(sys.argv[1], "w"), indent=1)
PY
run 0 "$KSEARCH" op new rms2 --from-definition "$def" --operators "$O"
out_has "made $O/rms2/ from the definition rmsnorm_h4096"
for f in op.json reference.cu README.md; do [ -s "$O/rms2/$f" ] || fail "no $f"; done
[ -d "$O/rms2/seeds" ] || fail "no seeds/"
python3 - "$O/rms2/op.json" "$def" <<'PY' || fail "op.json is not the Definition plus a ksearch block with the TODOs"
import json, sys
op, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ks = op.pop("ksearch")
assert op == d, "the Definition changed"
assert list(op) == list(d), "the Definition's order changed"
assert ks["generators"]["x"] == {"kind": "normal", "mean": 0, "std": 1}, ks["generators"]
assert ks["generators"]["eps"].startswith("TODO: float32 scalar")
assert ks["todo"] == ["ksearch.generators.eps", "ksearch.workloads", "ksearch.check_workloads",
                      "ksearch.tolerances.y", "ksearch.min_bytes", "ksearch.flops", "reference.cu"], ks["todo"]
assert "num_rows*hidden*2 + hidden*2 + 4 + num_rows*hidden*2" in ks["min_bytes"], ks["min_bytes"]
assert ks["summary"].startswith("RMSNorm over the rows"), ks["summary"]
PY
grep -q 'extern "C" __global__ void rms2_reference(const __nv_bfloat16 \*x, const __nv_bfloat16 \*weight, float eps, __nv_bfloat16 \*y, int num_rows, int hidden)' \
	"$O/rms2/reference.cu" || fail "reference.cu lacks the kernel's signature"
grep -q 'inv_rms = torch.rsqrt' "$O/rms2/README.md" || fail "the README lacks the Python reference"
grep -q -- '- `ksearch.generators.eps`' "$O/rms2/README.md" || fail "the README lacks the TODOs"

# ops lists it with what is missing (and fails, 3, as for any operator that does not load)
export KSEARCH_OPERATORS="$O"
run 3 "$KSEARCH" ops
err_has "rms2/op.json: unfinished: 7 TODOs in ksearch.todo: ksearch.generators.eps, ksearch.workloads"
out_has "rmsnorm  (rmsnorm_h4096)"
run 1 "$KSEARCH" ops --op rms2
err_has "unfinished"
run 3 "$KSEARCH" ops --json
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); e = [o for o in d if o["op"] == "rms2"][0]
assert "reference.cu" in e["error"], e' "$TMP/out" || fail "ops --json lacks rms2's error"

# done: the TODOs filled (as the shipped rmsnorm has them) and ksearch.todo gone, it loads
python3 - "$O/rms2/op.json" <<'PY' || fail "cannot fill the TODOs"
import json, sys
op, ks = json.load(open(sys.argv[1])), json.load(open("operators/rmsnorm/op.json"))["ksearch"]
for k in ("generators", "workloads", "check_workloads", "tolerances", "min_bytes", "flops"):
    op["ksearch"][k] = ks[k]
del op["ksearch"]["todo"]
json.dump(op, open(sys.argv[1], "w"), indent=1)
PY
cp operators/rmsnorm/reference.cu "$O/rms2/reference.cu"
run 0 "$KSEARCH" ops --op rms2
out_has "rms2  (rmsnorm_h4096)"
# and tools/torch-check.py reads it (--dry-run: no GPU, no torch)
run 0 python3 tools/torch-check.py "$O/rms2" "$O/rms2/reference.cu" --dry-run
run 0 python3 tools/torch-check.py "$O/rms2" "$O/rms2/reference.cu" --dry-run --definition "$def"
unset KSEARCH_OPERATORS

# torch-check refuses an unfinished op and a Definition that is not the op's
run 0 "$KSEARCH" op new rms3 --from-definition "$def" --operators "$O"
run 2 python3 tools/torch-check.py "$O/rms3" "$O/rms3/reference.cu" --dry-run
err_has "unfinished: ksearch.todo lists"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d["inputs"]["x"]["dtype"] = "float16"
json.dump(d, open(sys.argv[2], "w"))' "$def" "$TMP/other.json"
run 2 python3 tools/torch-check.py "$O/rms2" "$O/rms2/reference.cu" --dry-run --definition "$TMP/other.json"
err_has "input 'x'"

# bad inputs, each named
run 3 "$KSEARCH" op new rms2 --from-definition "$def" --operators "$O"
err_has "$O/rms2 exists already"
run 2 "$KSEARCH" op new --from-definition "$def" --operators "$O"
err_has "NAME is required"
run 2 "$KSEARCH" op new a b --from-definition "$def" --operators "$O"
err_has "takes one NAME"
run 2 "$KSEARCH" op new 9x --from-definition "$def" --operators "$O"
err_has "NAME '9x': expected an identifier"
run 2 "$KSEARCH" op new x --operators "$O"
err_has "--from-definition DEF.json is required"
run 1 "$KSEARCH" op new x --from-definition "$TMP/none.json" --operators "$O"
err_has "none.json"
printf '{"name": "x",\n "axes": {' >"$TMP/bad.json"
run 1 "$KSEARCH" op new x --from-definition "$TMP/bad.json" --operators "$O"
err_has "bad.json:2:"
err_has "malformed JSON"
echo '[1, 2]' >"$TMP/list.json"
run 1 "$KSEARCH" op new x --from-definition "$TMP/list.json" --operators "$O"
err_has "expected a FlashInfer-Bench Definition (a JSON object), got"
# each field broken in turn
broken() { # WHAT PYTHON-EDIT EXPECTED
	python3 -c "import json, sys; d = json.load(open(sys.argv[1])); $2; json.dump(d, open(sys.argv[2], 'w'))" \
		"$def" "$TMP/$1.json" || fatal "cannot write $1.json"
	run 1 "$KSEARCH" op new x --from-definition "$TMP/$1.json" --operators "$O"
	err_has "$3"
}
broken no_reference 'del d["reference"]' "missing field 'reference'"
broken no_inputs 'del d["inputs"]' "missing field 'inputs'"
broken no_run 'd["reference"] = "import torch"' "reference: expected Python source that defines run(...)"
broken bad_axis_type 'd["axes"]["num_rows"]["type"] = "dyn"' "axes.num_rows.type: expected"
broken bad_const 'd["axes"]["hidden"]["value"] = -1' "axes.hidden.value: a const axis needs"
broken fp8 'd["inputs"]["x"]["dtype"] = "float8_e4m3fn"' "inputs.x.dtype: unknown dtype 'float8_e4m3fn'"
broken no_dtype 'del d["outputs"]["y"]["dtype"]' "outputs.y.dtype: missing"
broken unknown_axis 'd["inputs"]["x"]["shape"] = ["rows", "hidden"]' "inputs.x.shape[0]: not an axis"
broken overlap 'd["outputs"]["x"] = d["inputs"]["x"]' "outputs.x: also an input's name"
broken no_outputs 'd["outputs"] = {}' "outputs: expected a non-empty object"
broken bad_name 'd["inputs"]["x-1"] = d["inputs"].pop("x")' "inputs.x-1: a tensor name must be an identifier"
broken has_ksearch 'd["ksearch"] = {}' "has a \"ksearch\" block already"
[ -e "$O/x" ] && fail "a refused definition left a folder"
run 2 "$KSEARCH" op nwe
err_has "unknown subcommand 'nwe'"
run 0 "$KSEARCH" help op
out_has "usage: ksearch op <subcommand>"
run 0 "$KSEARCH" op new --help
out_has "usage: ksearch op new NAME --from-definition DEF.json"
done_ok
