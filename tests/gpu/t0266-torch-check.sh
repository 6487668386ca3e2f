#!/usr/bin/env bash
# tools/torch-check.py on a GPU, its NVRTC and driver calls made through ctypes
# (tools/cuda_ctypes.py): seeds of gqa and rmsnorm match op.json's Python reference
# (default params, --all-params, --time with reference.cu beside them; gqa_ws has
# dynamic shared memory above 48 KiB, which must be opted into, and "pdl" launches); a
# finished reference.cu matches the FlashInfer-Bench Definition it came from (--definition),
# gqa's own and one made by `ksearch op new --from-definition`; and what must fail does, with
# exit 1 and the reason: seeds with their outputs scaled, a Definition whose reference is
# wrong, a compile error, a kernel the cubin does not have, an illegal address.
#
# Needs a GPU, python3 with a CUDA torch, the driver and NVRTC (the toolkit's, or torch's
# nvidia-cuda-nvrtc wheel); no wheels and no network.  Skips (77) without a GPU or torch.
# Env: KSEARCH, KS_SOURCE_ROOT.
. "$(dirname "$0")/../cli/lib.sh"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "SKIP: no NVIDIA GPU (nvidia-smi -L)"
	exit 77
fi
if ! python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	echo "SKIP: python3 has no torch that sees a GPU"
	exit 77
fi

# tc EXIT ARGS...: torch-check with a fixed seed, its output to the log
tc() {
	local rc=$1
	shift
	run "$rc" python3 tools/torch-check.py --seed 1 "$@"
	echo "--- torch-check $* (exit $rc expected)"
	cat "$TMP/out"
	[ -s "$TMP/err" ] && sed 's/^/stderr: /' "$TMP/err"
	return 0
}

# (a) seeds, default params: every check workload, two input sets each
for f in gqa/seeds/split_kv gqa/seeds/gqa_ws gqa/seeds/head_group_mma rmsnorm/seeds/row_block \
	rmsnorm/seeds/rmsnorm_space; do
	tc 0 "operators/${f%%/*}" "operators/$f.cu"
	out_has "registers"
	out_has "1 passed, 0 failed"
	out_lacks "FAIL"
done
grep -q '"pdl": true' operators/gqa/seeds/gqa_ws.cu || fail "gqa_ws no longer has a pdl launch; pick another seed"
# every param combination of a small seed
tc 0 operators/rmsnorm operators/rmsnorm/seeds/row_warp.cu --all-params
out_lacks "FAIL"
grep -Eq '^[1-9][0-9]* passed, 0 failed' "$TMP/out" || fail "row_warp --all-params did not pass every combination"
# timed, with reference.cu timed beside it (and the timed runs' outputs checked)
tc 0 operators/rmsnorm operators/rmsnorm/seeds/row_block.cu --time --workload c17_tiny --workload r64 \
	--reps 5 --warmup 1
out_has "c17_tiny"
out_has "reference.cu"
out_has "GB/s"
out_has "1 passed, 0 failed"
tc 0 operators/gqa operators/gqa/seeds/split_kv.cu --time --workload b1_kv546 --reps 5 --warmup 1
out_has "reference.cu"
out_has "1 passed, 0 failed"

# (b) a finished reference.cu against the Definition it came from (op.json less ksearch's block,
# as FlashInfer-Bench has it): gqa's own, then one made by `ksearch op new --from-definition`
defs() {
	python3 - "$@" <<'PY' || fatal "cannot write the Definitions"
import json, sys
for op, out in zip(sys.argv[1::2], sys.argv[2::2]):
    d = json.load(open(f"operators/{op}/op.json")); del d["ksearch"]
    json.dump(d, open(out, "w"), indent=1)
PY
}
defs gqa "$TMP/gqa.json" rmsnorm "$TMP/rmsnorm.json"
# every combination: REF_WARPS 4 is the timed reference, 32 the oracle candidates are verified against
tc 0 operators/gqa operators/gqa/reference.cu --definition "$TMP/gqa.json" --all-params
out_has "2 passed, 0 failed"
out_lacks "FAIL"

O="$TMP/ops"
run 0 "$KSEARCH" op new rms2 --from-definition "$TMP/rmsnorm.json" --operators "$O"
python3 - "$O/rms2/op.json" <<'PY' || fatal "cannot fill the TODOs"
import json, sys
op, ks = json.load(open(sys.argv[1])), json.load(open("operators/rmsnorm/op.json"))["ksearch"]
for k in ("generators", "workloads", "check_workloads", "tolerances", "min_bytes", "flops"):
    op["ksearch"][k] = ks[k]
del op["ksearch"]["todo"]
json.dump(op, open(sys.argv[1], "w"), indent=1)
PY
cp operators/rmsnorm/reference.cu "$O/rms2/reference.cu"
tc 0 "$O/rms2" "$O/rms2/reference.cu" --definition "$TMP/rmsnorm.json"
out_has "1 passed, 0 failed"
out_lacks "FAIL"

# the Definition's reference is the one checked against: a wrong one fails the right kernel
python3 - "$TMP/rmsnorm.json" "$TMP/rmsnorm-wrong.json" <<'PY' || fatal "cannot write the wrong Definition"
import json, sys
d = json.load(open(sys.argv[1]))
d["reference"] += "\n\n_run = run\n\ndef run(*args):\n    return _run(*args) * 1.5\n"
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
tc 1 "$O/rms2" "$O/rms2/reference.cu" --definition "$TMP/rmsnorm-wrong.json"
out_has "elements off"
out_has "0 passed, 1 failed"

# (c) seeds that passed in (a), their outputs scaled by 1.5 (rmsnorm's every store, gqa's merge):
# a mismatch, exit 1
sed 's/__float2bfloat16_rn(f)/__float2bfloat16_rn(1.5f * f)/' operators/rmsnorm/seeds/row_block.cu >"$TMP/row_block_x1.5.cu"
sed 's|? 1.0f / L : 0.0f;$|? 1.5f / L : 0.0f;|' operators/gqa/seeds/split_kv.cu >"$TMP/split_kv_x1.5.cu"
cmp -s operators/rmsnorm/seeds/row_block.cu "$TMP/row_block_x1.5.cu" && fatal "the sed did not scale row_block's output"
cmp -s operators/gqa/seeds/split_kv.cu "$TMP/split_kv_x1.5.cu" && fatal "the sed did not scale split_kv's output"
tc 1 operators/rmsnorm "$TMP/row_block_x1.5.cu"
out_has "FAIL  y: "
out_has "elements off"
out_has "0 passed, 1 failed"
tc 1 operators/gqa "$TMP/split_kv_x1.5.cu"
out_has "FAIL  output: "
out_has "elements off"
out_has "0 passed, 1 failed"

# a compile error (NVRTC's log), a kernel the module lacks (the driver's error, named), a fault
tc 1 operators/rmsnorm tests/gpu/hostile/compile_error.cu
out_has "COMPILE ERROR: nvrtcCompileProgram failed: NVRTC_ERROR_COMPILATION"
out_has "inv_rsm"
tc 1 operators/rmsnorm tests/gpu/hostile/missing_kernel.cu
out_has "cuModuleGetFunction (rmsnorm_v2) failed: CUDA_ERROR_NOT_FOUND"
tc 1 operators/rmsnorm tests/gpu/hostile/illegal_address.cu
out_has "CRASH"
done_ok
