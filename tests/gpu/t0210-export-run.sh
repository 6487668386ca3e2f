#!/usr/bin/env bash
# An exported kernel runs without ksearch.  For gqa, mla_decode and rmsnorm, every ok
# candidate of the export fixtures is exported (`ksearch export-best --id`),
# compiled with nvcc together with tests/gpu/export_harness.cu, which knows
# only the exported header and the op's reference.cu, and run on the op's
# check workloads: its outputs must match the reference kernel's within the
# op's tolerances (NaN-poisoned outputs and workspace, two input sets), its
# inputs must stay as they were, and a missing or short workspace must be
# refused.
#
# Needs a GPU and nvcc (exit 77 = skipped otherwise).  Env: KSEARCH,
# KS_SOURCE_ROOT; optional NVCC, CUDA_PATH, KS_EXPORT_OPS="gqa" (only these).
if ! command -v nvidia-smi >/dev/null 2>&1; then
	echo "SKIP: no nvidia-smi on PATH, so no NVIDIA GPU to run kernels on"
	exit 77
fi
if ! gpus=$(nvidia-smi -L 2>&1) || [ -z "$gpus" ]; then
	echo "SKIP: 'nvidia-smi -L' lists no GPU: ${gpus:-no output}"
	exit 77
fi
nvcc=${NVCC:-$(command -v nvcc || echo "${CUDA_PATH:-/usr/local/cuda}/bin/nvcc")}
if ! [ -x "$nvcc" ]; then
	echo "SKIP: no nvcc (looked on PATH and in \${CUDA_PATH:-/usr/local/cuda}/bin; set NVCC) to build the exports"
	exit 77
fi
. "$(dirname "$0")/../cli/lib.sh"
echo "$gpus" | head -n 1

# the fixtures' kernels travel as sm_90a cubins (the arch their records name), which only a GPU of
# compute capability 9.0 runs (t0211 checks the error another one gets)
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
case "$cap" in
	90) arch=sm_90a ;;
	[0-9]*)
		echo "SKIP: the fixtures' exports carry sm_90a cubins; this GPU's compute capability is $cap"
		exit 77
		;;
	*) fail "cannot read the GPU's compute capability (nvidia-smi said '$cap')" ;;
esac
echo "building for $arch"

A="$TMP/ar"
n_runs=0
for op in ${KS_EXPORT_OPS:-gqa mla_decode rmsnorm}; do
	run 0 "$KSEARCH" archive import "tests/fixtures/export-$op.json" --archive "$A"
	run 0 "$KSEARCH" ops --op "$op" --json
	# the check workloads, with the generator overrides the harness follows, and the tolerances
	python3 - "$TMP/out" "$op" >"$TMP/$op.workloads" <<'PY' || fail "$op: cannot write the harness's workload file"
import json, sys
ops, op = json.load(open(sys.argv[1])), sys.argv[2]
axes = {w["id"]: w["axes"] for w in ops[0]["check_workloads"]}
spec = json.load(open(f"operators/{op}/op.json"))["ksearch"]
for name, t in spec["tolerances"].items():
    print("tol", name, t["atol"], t["rtol"])
for w in spec["check_workloads"]:
    a, gen = axes[w["id"]], w.get("generators", {})
    if op in ("gqa", "mla_decode"):
        lengths = gen.get("kv_indptr", {}).get("lengths", [])
        print(w["id"], a["batch_size"], a["num_kv_indices"], a["num_pages"], *lengths)
    else:
        x = dict(spec["generators"]["x"], **gen.get("x", {}))
        if x["kind"] == "const":
            print(w["id"], a["num_rows"], x["value"], 0)
        else:
            print(w["id"], a["num_rows"], x.get("mean", 0), x.get("std", 1))
PY
	ids=$(python3 -c 'import json, sys
print(" ".join(str(c["id"]) for c in json.load(open(sys.argv[1]))["candidates"] if c["verdict"] == "ok"))' \
		"tests/fixtures/export-$op.json") || fail "cannot read tests/fixtures/export-$op.json"
	for id in $ids; do
		dir="$TMP/$op-$id"
		run 0 "$KSEARCH" export-best --op "$op" --archive "$A" --id "$id" -o "$dir" --name ks_export
		echo "$op #$id: $(head -n 1 "$TMP/out")"
		define=KS_OP_$(echo "$op" | tr '[:lower:]' '[:upper:]')
		run 0 "$nvcc" -std=c++17 -arch="$arch" -D"$define" -I"operators/$op" -I"$dir" \
			tests/gpu/export_harness.cu "$dir/ks_export.cu" -o "$dir/harness"
		run 0 "$dir/harness" "$TMP/$op.workloads"
		out_has "all ok"
		tail -n 1 "$TMP/out"
		n_runs=$((n_runs + 1))
	done
done
# A dispatch (export-best --dispatch) runs the same way: the harness knows only ks_export.h, whose
# ks_export_launch() picks the kernel per call.  In this archive #7 is made the best of b1_kv546
# and #6 stays the best of the others, so the check workloads reach both kernels (b1_kv1 and
# b1_kv7 are nearest b1_kv546).  And a launch marked "pdl" runs with programmatic dependent launch,
# and a kernel compiled with a cluster of 16 CTAs (not portable: allowed by the launcher) runs.
if [ -z "${KS_EXPORT_OPS:-}" ] || echo " $KS_EXPORT_OPS " | grep -q " gqa "; then
	python3 - "$TMP" <<'PY' || fail "test setup: cannot write the dispatch and pdl fixtures"
import hashlib, json, sys
doc = json.load(open("tests/fixtures/export-gqa.json"))
for c in doc["candidates"]:
    if c["id"] == 7:
        for w in c["workloads"]:
            if w["id"] == "b1_kv546":
                w["median_us"] = 10.0
json.dump(doc, open(f"{sys.argv[1]}/dispatch.json", "w"))
old = [c for c in doc["candidates"] if c["id"] == 6][0]["source_hash"]
src = doc["sources"].pop(old).replace('{"kernel": "gqa_split_merge"', '{"kernel": "gqa_split_merge", "pdl": true', 1)
new = hashlib.sha256(src.encode()).hexdigest()
doc["sources"][new] = src
for c in doc["candidates"]:
    if c["source_hash"] == old:
        c["source_hash"] = new
json.dump(doc, open(f"{sys.argv[1]}/pdl.json", "w"))
# gqa_space_cluster with a cluster of 16 CTAs, more than the portable 8: the launcher allows it
doc = json.load(open("tests/fixtures/export-gqa.json"))
src = open("operators/gqa/seeds/gqa_space_cluster.cu").read()
h = hashlib.sha256(src.encode()).hexdigest()
c = doc["candidates"][0]
c.update(id=1, family="gqa_space_cluster", path="operators/gqa/seeds/gqa_space_cluster.cu", source_hash=h,
         params={"SPLITS": 16, "CHUNK": 16, "MERGE": 0, "LOAD": 0, "HINT": 1, "L2PF": 1, "WARPS": 4, "STAGES": 2, "IDXPF": 4})
doc["candidates"], doc["sources"] = [c], {h: src}
json.dump(doc, open(f"{sys.argv[1]}/cluster16.json", "w"))
# gqa_space_pages with per-request counters in a "zeroed" scratch (MERGE 2): the launcher must zero
# them in the caller's poisoned workspace before every call, as ksearch does
doc = json.load(open("tests/fixtures/export-gqa.json"))
src = open("operators/gqa/seeds/gqa_space_pages.cu").read()
h = hashlib.sha256(src.encode()).hexdigest()
c = doc["candidates"][0]
c.update(id=1, family="gqa_space_pages", path="operators/gqa/seeds/gqa_space_pages.cu", source_hash=h,
         params={"CHUNK": 32, "CTAS": 264, "MERGE": 2, "LOAD": 0, "HINT": 1, "TILE": 16, "STAGES": 2, "WPH": 1,
                 "PART": 0, "L2PF": 0, "PREQ": 1})
doc["candidates"], doc["sources"] = [c], {h: src}
json.dump(doc, open(f"{sys.argv[1]}/zeroed.json", "w"))
PY
	run 0 "$KSEARCH" archive import "$TMP/dispatch.json" --archive "$TMP/dar"
	run 0 "$KSEARCH" export-best --op gqa --archive "$TMP/dar" --dispatch -o "$TMP/disp" --name ks_export
	run 0 "$nvcc" -std=c++17 -arch="$arch" -DKS_OP_GQA -Ioperators/gqa -I"$TMP/disp" tests/gpu/export_harness.cu \
		"$TMP/disp/ks_export.cu" "$TMP/disp/ks_export_v0.cu" "$TMP/disp/ks_export_v1.cu" -o "$TMP/disp/harness"
	run 0 "$TMP/disp/harness" "$TMP/gqa.workloads"
	out_has "all ok"
	echo "gqa dispatch: $(tail -n 1 "$TMP/out")"
	run 0 "$KSEARCH" archive import "$TMP/pdl.json" --archive "$TMP/par"
	run 0 "$KSEARCH" export-best --op gqa --archive "$TMP/par" --id 6 -o "$TMP/pdl" --name ks_export
	run 0 "$nvcc" -std=c++17 -arch="$arch" -DKS_OP_GQA -Ioperators/gqa -I"$TMP/pdl" tests/gpu/export_harness.cu \
		"$TMP/pdl/ks_export.cu" -o "$TMP/pdl/harness"
	run 0 "$TMP/pdl/harness" "$TMP/gqa.workloads"
	out_has "all ok"
	echo "gqa with a pdl launch: $(tail -n 1 "$TMP/out")"
	run 0 "$KSEARCH" archive import "$TMP/cluster16.json" --archive "$TMP/c16ar"
	run 0 "$KSEARCH" export-best --op gqa --archive "$TMP/c16ar" --id 1 -o "$TMP/c16" --name ks_export
	grep -qF "CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED" "$TMP/c16/ks_export.cu" ||
		fail "the launcher does not allow gqa_cluster_decode its cluster"
	run 0 "$nvcc" -std=c++17 -arch="$arch" -DKS_OP_GQA -Ioperators/gqa -I"$TMP/c16" tests/gpu/export_harness.cu \
		"$TMP/c16/ks_export.cu" -o "$TMP/c16/harness"
	run 0 "$TMP/c16/harness" "$TMP/gqa.workloads"
	out_has "all ok"
	echo "gqa with a cluster of 16 CTAs: $(tail -n 1 "$TMP/out")"
	run 0 "$KSEARCH" archive import "$TMP/zeroed.json" --archive "$TMP/zar"
	run 0 "$KSEARCH" export-best --op gqa --archive "$TMP/zar" --id 1 -o "$TMP/zeroed" --name ks_export
	grep -q "cudaMemsetAsync" "$TMP/zeroed/ks_export.cu" || fail "the launcher does not zero the \"zeroed\" scratch"
	run 0 "$nvcc" -std=c++17 -arch="$arch" -DKS_OP_GQA -Ioperators/gqa -I"$TMP/zeroed" tests/gpu/export_harness.cu \
		"$TMP/zeroed/ks_export.cu" -o "$TMP/zeroed/harness"
	run 0 "$TMP/zeroed/harness" "$TMP/gqa.workloads"
	out_has "all ok"
	echo "gqa with zeroed counters: $(tail -n 1 "$TMP/out")"
	n_runs=$((n_runs + 4))
fi
# mla_decode's per-workload bests (#6-#9 of its fixture, mla_mma with SPLIT, SEGP and MW) as one
# dispatch: four kernels, each with its own params baked in, behind one launcher
if [ -z "${KS_EXPORT_OPS:-}" ] || echo " $KS_EXPORT_OPS " | grep -q " mla_decode "; then
	run 0 "$KSEARCH" archive import tests/fixtures/export-mla_decode.json --archive "$TMP/mdar"
	run 0 "$KSEARCH" export-best --op mla_decode --archive "$TMP/mdar" --dispatch -o "$TMP/mdisp" --name ks_export
	out_has "dispatch over 4 workloads"
	run 0 "$nvcc" -std=c++17 -arch="$arch" -DKS_OP_MLA_DECODE -Ioperators/mla_decode -I"$TMP/mdisp" \
		tests/gpu/export_harness.cu "$TMP"/mdisp/ks_export.cu "$TMP"/mdisp/ks_export_v*.cu -o "$TMP/mdisp/harness"
	run 0 "$TMP/mdisp/harness" "$TMP/mla_decode.workloads"
	out_has "all ok"
	echo "mla_decode dispatch: $(tail -n 1 "$TMP/out")"
	n_runs=$((n_runs + 1))
fi
[ "$n_runs" -gt 0 ] || fail "no candidate was exported and run"
done_ok
