#!/usr/bin/env bash
# export-best --format flashinfer-bench and --format torch: what they write, from one kernel and
# from a dispatch, checked against FlashInfer-Bench's own data models when its wheels are in
# build-wheels/ (tools/fetch-wheels.sh; by hand otherwise), and the errors of bad flags.
. "$(dirname "$0")/lib.sh"

A="$TMP/ar"
run 0 "$KSEARCH" archive import tests/fixtures/export-gqa.json --archive "$A"
run 0 "$KSEARCH" archive import tests/fixtures/export-rmsnorm.json --archive "$A"

# FlashInfer-Bench's package, installed from the wheels into a folder of the test's own
site=""
if [ -d build-wheels ] && ls build-wheels/flashinfer_bench-*.whl >/dev/null 2>&1 &&
	python3 -m pip install -q --disable-pip-version-check --no-index --find-links build-wheels --no-deps \
		--target "$TMP/site" flashinfer-bench pydantic pydantic-core annotated-types typing-extensions \
		typing-inspection docstring-parser filelock safetensors >"$TMP/pip.log" 2>&1; then
	site="$TMP/site"
else
	echo "note: no build-wheels/ (tools/fetch-wheels.sh): the trace sets are checked by hand"
fi
validate() { # DIR: the folder loads as a TraceSet with one solution and a trace per workload
	python3 tests/cli/fib_validate.py "$1" "$site" >"$TMP/val" 2>&1 || fail "$1: $(cat "$TMP/val")"
	cat "$TMP/val"
	[ -z "$site" ] || grep -q "^flashinfer_bench" "$TMP/val" || fail "flashinfer_bench was not used"
}

# one kernel, gqa: the Solution, its workloads with blobs for the indptr and the page table
run 0 "$KSEARCH" export-best --op gqa --archive "$A" --format flashinfer-bench -o "$TMP/fib"
out_has "TORCH_CUDA_ARCH_LIST=9.0a flashinfer-bench run --local $TMP/fib"
def=gqa_paged/gqa_paged_decode_h32_kv4_d128_ps1
for f in "definitions/$def.json" "workloads/$def.jsonl" "traces/$def.jsonl" README.md; do
	[ -s "$TMP/fib/$f" ] || fail "no $f"
done
sol=$(ls "$TMP"/fib/solutions/$def/*.json)
[ "$(basename "$sol")" = "ksearch_gqa_6.json" ] || fail "the Solution is $sol, expected ksearch_gqa_6.json (best #6)"
[ "$(ls "$TMP"/fib/blob/workloads/$def/*.safetensors | wc -l)" = 5 ] || fail "expected a blob per workload"
validate "$TMP/fib"
grep -q '"traces 5\|^traces 5' "$TMP/val" || fail "expected 5 traces: $(cat "$TMP/val")"
python3 - "$sol" "$TMP/fib/traces/$def.jsonl" "$TMP/fib/definitions/$def.json" <<'PY' || fail "the Solution or its traces are not what the archive says"
import json, sys
sol, traces, d = json.load(open(sys.argv[1])), [json.loads(l) for l in open(sys.argv[2])], json.load(open(sys.argv[3]))
fx = {c["id"]: c for c in json.load(open("tests/fixtures/export-gqa.json"))["candidates"]}[6]
op = json.load(open("operators/gqa/op.json")); del op["ksearch"]
assert d == op, "the Definition is not op.json without its ksearch block"
assert sol["spec"]["entry_point"] == "ksearch_gqa_binding.cpp::run", sol["spec"]
assert sol["spec"]["target_hardware"] == [fx["gpu"], fx["arch"]], sol["spec"]
paths = [s["path"] for s in sol["sources"]]
assert paths[:2] == ["ksearch_gqa.cu", "ksearch_gqa.h"] and "ksearch_gqa_binding.cpp" in paths, paths
binding = [s for s in sol["sources"] if s["path"] == "ksearch_gqa_binding.cpp"][0]["content"]
assert "PYBIND11_MODULE(TORCH_EXTENSION_NAME" in binding and "TORCH_LIBRARY" not in binding
for t in traces:
    w = {x["id"]: x for x in fx["workloads"]}[t["workload"]["uuid"].split("-", 2)[2]]
    p = t["evaluation"]["performance"]
    assert abs(p["latency_ms"] - w["median_us"] / 1000) < 1e-9 and abs(p["speedup_factor"] - w["speedup"]) < 1e-9, t
    assert t["evaluation"]["environment"]["hardware"] == fx["gpu"] and t["solution"] == sol["name"]
print("solution and traces match record #6")
PY
# the blob holds a valid indptr (sums to num_kv_indices) and distinct page indices below num_pages
python3 - "$TMP/fib" "$def" <<'PY' || fail "a blob is not a valid safetensors file of the workload's structure"
import json, struct, sys
root, d = sys.argv[1], sys.argv[2]
for line in open(f"{root}/workloads/{d}.jsonl"):
    w = json.loads(line)["workload"]
    spec = w["inputs"]["kv_indptr"]
    raw = open(f"{root}/{spec['path']}", "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head, data = json.loads(raw[8:8 + n]), raw[8 + n:]
    def tensor(key):
        a, b = head[key]["data_offsets"]
        return list(struct.unpack(f"<{(b - a) // 4}i", data[a:b]))
    indptr, pages = tensor("kv_indptr"), tensor("kv_indices")
    ax = w["axes"]
    assert len(indptr) == ax["batch_size"] + 1 and indptr[0] == 0 and indptr[-1] == ax["num_kv_indices"], indptr[:4]
    assert all(b >= a + 1 for a, b in zip(indptr, indptr[1:]))
    assert len(pages) == ax["num_kv_indices"] == len(set(pages)) and max(pages) < ax["num_pages"]
print("blobs ok")
PY

# the same export twice is the same text (the page tables are drawn from a fixed seed)
run 0 "$KSEARCH" export-best --op gqa --archive "$A" --format flashinfer-bench -o "$TMP/fib2"
cmp -s "$TMP/fib/workloads/$def.jsonl" "$TMP/fib2/workloads/$def.jsonl" &&
	cmp -s "$TMP"/fib/blob/workloads/$def/ksearch-gqa-b64_kv28815.safetensors \
		"$TMP"/fib2/blob/workloads/$def/ksearch-gqa-b64_kv28815.safetensors ||
	fail "two exports of one kernel differ"

# a dispatch: one Solution, each workload's trace from the kernel that runs it
run 0 "$KSEARCH" export-best --op gqa --archive "$A" --dispatch --format flashinfer-bench -o "$TMP/fibd" \
	--solution gqa-dispatch.v1
out_has "exported a dispatch over 5 workloads of op gqa to $TMP/fibd/ as flashinfer-bench"
[ -s "$TMP/fibd/solutions/$def/gqa-dispatch.v1.json" ] || fail "no Solution gqa-dispatch.v1"
validate "$TMP/fibd"
python3 - "$TMP/fibd/solutions/$def/gqa-dispatch.v1.json" "$TMP/fibd/traces/$def.jsonl" <<'PY' || fail "the dispatch's Solution lacks its kernels"
import json, sys
sol, traces = json.load(open(sys.argv[1])), [json.loads(l) for l in open(sys.argv[2])]
paths = [s["path"] for s in sol["sources"]]
assert "ksearch_gqa_v0.cu" in paths and "ksearch_gqa.cu" in paths, paths
PY

# rmsnorm: every input random or a scalar, so no blob
run 0 "$KSEARCH" export-best --op rmsnorm --archive "$A" --format flashinfer-bench -o "$TMP/fibr"
[ -d "$TMP/fibr/blob" ] && fail "rmsnorm needs no blob"
grep -q '"eps":{"type":"scalar","value":1e-6}' "$TMP/fibr/workloads/rmsnorm/rmsnorm_h4096.jsonl" ||
	fail "eps is not the scalar 1e-6: $(head -c 300 "$TMP/fibr/workloads/rmsnorm/rmsnorm_h4096.jsonl")"
validate "$TMP/fibr"

# --format torch: a package that pip or load() builds
run 0 "$KSEARCH" export-best --op rmsnorm --archive "$A" --format torch -o "$TMP/tp" --name ks_rms
out_has "pip install --no-build-isolation $TMP/tp"
for f in setup.py README.md ks_rms/__init__.py ks_rms/csrc/ks_rms.cu ks_rms/csrc/ks_rms.h ks_rms/csrc/ks_rms_binding.cpp; do
	[ -s "$TMP/tp/$f" ] || fail "no $f"
done
python3 -m py_compile "$TMP/tp/setup.py" "$TMP/tp/ks_rms/__init__.py" || fail "the package's Python does not compile"
grep -q 'TORCH_LIBRARY(ks_rms, m)' "$TMP/tp/ks_rms/csrc/ks_rms_binding.cpp" || fail "no torch.ops.ks_rms"
grep -q 'm.def("run(Tensor x, Tensor weight, float eps, Tensor(a!) y) -> ()")' \
	"$TMP/tp/ks_rms/csrc/ks_rms_binding.cpp" || fail "the operator's schema is not the Definition's"
grep -q '^def run(x, weight, eps):' "$TMP/tp/ks_rms/__init__.py" || fail "run() lacks the Definition's signature"
grep -q 'gencode=arch=compute_90a,code=sm_90a' "$TMP/tp/setup.py" || fail "setup.py does not build for sm_90a"
# the kernels build under the flags torch's extension build adds (the prologue undoes them)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ -x "$nvcc" ]; then
	run 0 "$nvcc" -c -std=c++17 -arch=sm_90a -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ \
		-D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ \
		"$TMP/tp/ks_rms/csrc/ks_rms.cu" -o "$TMP/ks_rms.o"
fi
run 0 "$KSEARCH" export-best --op gqa --archive "$A" --dispatch --format torch -o "$TMP/tpd"
grep -q '"ksearch_gqa_v0.cu"' "$TMP/tpd/setup.py" || fail "the dispatch package does not build its kernels"

# bad flags
run 2 "$KSEARCH" export-best --op gqa --archive "$A" --format onnx
err_has "--format"
err_has "flashinfer-bench"
run 2 "$KSEARCH" export-best --op gqa --archive "$A" --format torch --solution x
err_has "--solution names a FlashInfer-Bench Solution; it needs --format flashinfer-bench (got --format torch)"
run 2 "$KSEARCH" export-best --op gqa --archive "$A" --solution x
err_has "got --format cuda"
run 2 "$KSEARCH" export-best --op gqa --archive "$A" --format flashinfer-bench --solution ../x
err_has "--solution '../x': expected letters"
run 2 "$KSEARCH" export-best --op gqa --archive "$A" --format torch --dispatch --id 6
err_has "--dispatch exports the best of each workload"
run 2 "$KSEARCH" export-best --op gqa --archive "$A" --format torch --name 9lives
err_has "expected a C identifier"
[ -e "$TMP/export" ] && fail "a refused export wrote something"
done_ok
