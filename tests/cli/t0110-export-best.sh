#!/usr/bin/env bash
# `ksearch export-best` writes an archive's best kernel (or one chosen by id
# or grid cell) as plain CUDA: the files are there and say what was measured,
# nvcc compiles the .cu as it is, the header compiles as C, the generated
# size arithmetic agrees with ksearch's, the launcher refuses bad sizes and
# workspaces without touching a GPU, and every way of asking for something
# that is not there gets an error naming it.  No GPU needed.
# Env: KSEARCH, KS_SOURCE_ROOT; CUDA_PATH (the build's toolkit, set by meson);
# optional NVCC.  Without nvcc the checks that need none still run, and the
# test then reports itself skipped (77), not passed.
. "$(dirname "$0")/lib.sh"

have_nvcc=1
if ! [ -x "$nvcc" ]; then
	have_nvcc=0
	skip_part "no nvcc (looked in $cuda/bin and on PATH; set NVCC): the exports are not compiled"
fi

# json_check FILE PYTHON: run PYTHON with j = the parsed FILE; an assert failing fails the test
json_check() {
	checks=$((checks + 1))
	python3 -c "import json, sys; j = json.load(open(sys.argv[1])); $2" "$1" 2>"$TMP/err" \
		|| fail "$1: $2"
}

# compile DIR NAME: nvcc -c the export as it is (for sm_90a, where the fixture was measured)
compile() {
	[ "$have_nvcc" = 1 ] || return 0
	run 0 "$nvcc" -c -std=c++17 -gencode=arch=compute_90a,code=sm_90a "$1/$2.cu" -o "$1/$2.o"
}

A="$TMP/ar"
run 0 "$KSEARCH" archive import tests/fixtures/export-gqa.json --archive "$A"
run 0 "$KSEARCH" archive import tests/fixtures/export-rmsnorm.json --archive "$A"

# archive stats ends with the command that takes the best home; #6 is every workload's fastest
# here, so there is no dispatch to offer
run 0 "$KSEARCH" archive stats --archive "$A" --op gqa
out_has "take it home:  ksearch export-best --op gqa --archive $A --id 6"
out_lacks "--archive $A --dispatch"

# The best gqa kernel: #6, split_kv at params other than the first, descended from #1 through #5.
run 0 "$KSEARCH" export-best --op gqa --archive "$A" -o "$TMP/best"
out_has "exported candidate #6 (split_kv; SPLITS=16 WARPS=8 UNROLL=2 HSPLIT=1)"
out_has "nvcc -c -std=c++17 -arch=sm_90a $TMP/best/ksearch_gqa.cu"
for f in ksearch_gqa.cu ksearch_gqa.h ksearch_gqa.json ksearch_gqa_source.txt README.md; do
	[ -s "$TMP/best/$f" ] || fail "export-best did not write $f"
done
ls "$TMP/best" | grep -q tmp && fail "a temporary file was left in the export folder"
cu="$TMP/best/ksearch_gqa.cu"
for line in '#define SPLITS 16' '#define WARPS 8' '#define UNROLL 2' '#define HSPLIT 1' '#include "ksearch_gqa.h"' \
	'extern "C" cudaError_t ksearch_gqa_launch(' 'extern "C" size_t ksearch_gqa_workspace_bytes(' \
	'const char *const ksx_kernel_names[KSX_KERNELS] = {"gqa_split_partial", "gqa_split_merge"};' \
	'ksx_drv.launch(&ksx_ex0, (CUfunction)ksx_drv.kernels[0], ksx_args0, nullptr);' \
	'ksx_drv.launch(&ksx_ex1, (CUfunction)ksx_drv.kernels[1], ksx_args1, nullptr);' \
	'alignas(64) const unsigned char ksx_cubin[] = {' 'cuLibraryLoadData'; do
	grep -qF -- "$line" "$cu" || fail "$cu lacks '$line'"
done
# The kernels are the cubin NVRTC makes of the candidate; no compiler of the program that builds the
# export sees the candidate's text (host code hidden from NVRTC would run there), which stands in
# NAME_source.txt for reading, unchanged.
python3 - "$cu" "$TMP/best/ksearch_gqa_source.txt" <<'PY' || fail "the candidate's text is not where it should be"
import json, sys
exported, text = open(sys.argv[1]).read(), open(sys.argv[2]).read()
fixture_src = [s for s in json.load(open("tests/fixtures/export-gqa.json"))["sources"].values()
               if "gqa_split_partial" in s][0]
assert fixture_src in text, "not in the source file"
assert "__global__" not in exported and "gqa_split_partial(" not in exported, "in the .cu"
assert "SPLITS=16 WARPS=8 UNROLL=2 HSPLIT=1" in text
PY
# every kernel runs in the shared-memory configuration it was timed in, and is allowed a cluster of
# more than 8 CTAs should it have been compiled with one (ksx_prepare(), before each launch)
[ "$(grep -c "ksx_err = ksx_prepare(ksx_drv, [01], ksx_dev, ksx_launch[12].smem);" "$cu")" = 2 ] ||
	fail "$cu does not prepare each kernel before its launch"
for text in 'CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, CU_SHAREDMEM_CARVEOUT_MAX_SHARED' \
	'CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED' 'smem > 48 * 1024 &&'; do
	grep -qF -- "$text" "$cu" || fail "$cu lacks '$text'"
done

h="$TMP/best/ksearch_gqa.h"
for text in 'size_t ksearch_gqa_workspace_bytes(int batch_size, int num_pages, int len_indptr, int num_kv_indices);' \
	'cudaError_t ksearch_gqa_launch(const __nv_bfloat16 *q' 'const __nv_bfloat16_raw *q' \
	'cudaStream_t stream);' 'part_o, float32[batch_size*num_qo_heads*SPLITS*head_dim]' 'Stream:' 'Workspace:' \
	'len_indptr == batch_size + 1'; do
	grep -qF -- "$text" "$h" || fail "$h lacks '$text'"
done
json_check "$TMP/best/ksearch_gqa.json" '
assert j["format"] == "ksearch-export" and j["version"] == 1, j.get("format")
assert j["id"] == 6 and j["op"] == "gqa" and j["definition"] == "gqa_paged_decode_h32_kv4_d128_ps1"
assert j["params"] == {"SPLITS": 16, "WARPS": 8, "UNROLL": 2, "HSPLIT": 1}, j["params"]
assert list(j["params"]) == ["SPLITS", "WARPS", "UNROLL", "HSPLIT"]
assert j["gpu"] == "NVIDIA H200" and j["arch"] == "sm_90a" and j["driver"] and j["toolkit"]
assert abs(j["fitness"] - 3.1) < 0.01 and 0 < j["sol_fraction"] < 1
assert j["descriptors"]["launches"] == 2
assert [s["id"] for s in j["lineage"]] == [1, 5, 6], j["lineage"]
assert [s["mutation"] for s in j["lineage"]] == ["seed", "param", "param"]
w = {x["id"]: x for x in j["workloads"]}
assert len(w) == 5 and w["b16_kv8636"]["axes"]["batch_size"] == 16, w
assert [b["name"] for b in j["workspace"]["buffers"]] == ["part_o", "part_lse"]
assert j["build"]["command"] == "nvcc -c -std=c++17 -arch=sm_90a ksearch_gqa.cu"
'
grep -qF "nvcc -c -std=c++17 -arch=sm_90a ksearch_gqa.cu" "$TMP/best/README.md" || fail "README.md lacks the build command"
grep -qF "ksearch_gqa_launch(q, k_cache" "$TMP/best/README.md" || fail "README.md lacks the call"
compile "$TMP/best" ksearch_gqa

# Two exports of the same kernels link into one program (each cubin is its file's own).
run 0 "$KSEARCH" export-best --op gqa --archive "$A" --id 5 -o "$TMP/k5" --name gqa_k5
if [ "$have_nvcc" = 1 ]; then
	cat >"$TMP/both.cu" <<'CU'
#include <stdio.h>
#include "ksearch_gqa.h"
#include "gqa_k5.h"
int main(void)
{
	/* SPLITS=16 and SPLITS=8: part_o and part_lse, each 256-byte aligned */
	printf("%zu %zu\n", ksearch_gqa_workspace_bytes(16, 18296, 17, 8636), gqa_k5_workspace_bytes(16, 18296, 17, 8636));
	return 0;
}
CU
	run 0 "$nvcc" -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I"$TMP/best" -I"$TMP/k5" "$TMP/both.cu" \
		"$TMP/best/ksearch_gqa.cu" "$TMP/k5/gqa_k5.cu" -o "$TMP/both"
	run 0 "$TMP/both"
	out_has "4227072 2113536"
fi

# The header is C as well as C++.
cat >"$TMP/use.c" <<'C'
#include "ksearch_gqa.h"
size_t need(int b, int n) { return ksearch_gqa_workspace_bytes(b, 2 * n + 1024, b + 1, n); }
cudaError_t call(const void *q, const void *k, const void *v, const int32_t *indptr, const int32_t *indices,
		 void *out, float *lse, int b, int n, void *ws, size_t ws_bytes, cudaStream_t s)
{
	return ksearch_gqa_launch(q, k, v, indptr, indices, 0.088f, out, lse, b, 2 * n + 1024, b + 1, n, ws,
				  ws_bytes, s);
}
C
run 0 gcc -std=c11 -Wall -Wextra -Werror -c "$TMP/use.c" -I"$TMP/best" -I"$cuda/include" -o "$TMP/use.o"

# Every elite cell of the grid, and an explicit id; default folder and name.
run 0 "$KSEARCH" export-best --op gqa --archive "$A" --cell 1,4,1 -o "$TMP/c141" --name gqa_mma
out_has "exported candidate #7 (mma_tiles; SPLITS=8 WARPS=4 STAGES=4)"
grep -qF "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem" "$TMP/c141/gqa_mma.cu" \
	|| fail "the mma_tiles export (139264 bytes of dynamic shared memory) does not raise the limit"
compile "$TMP/c141" gqa_mma
run 0 "$KSEARCH" export-best --op gqa --archive "$A" --cell 24 -o "$TMP/c24" --name gqa_cell24
out_has "exported candidate #8 (cp_async_tiles"
compile "$TMP/c24" gqa_cell24
run 0 "$KSEARCH" export-best --op gqa --archive "$A" --cell 0,1,0 -o "$TMP/c010" --name gqa_group
out_has "exported candidate #2 (group_cta"
compile "$TMP/c010" gqa_group
run 0 "$KSEARCH" export-best --op gqa --archive "$A" --cell 1,2,1 -o "$TMP/c121" --name gqa_mma_seed
compile "$TMP/c121" gqa_mma_seed
run 0 sh -c 'cd "$1" && KSEARCH_OPERATORS="$2/operators" "$3" export-best --op rmsnorm --archive "$4" --id 4' \
	_ "$TMP" "$PWD" "$KSEARCH" "$A"
out_has "exported candidate #4 (row_warp; ROWS_PER_BLOCK=4)"
[ -s "$TMP/export/rmsnorm-4/ksearch_rmsnorm.cu" ] || fail "no export/rmsnorm-4/ksearch_rmsnorm.cu by default"
grep -qF 'ksx_cdiv(num_rows, ROWS_PER_BLOCK)' "$TMP/export/rmsnorm-4/ksearch_rmsnorm.cu" || fail "cdiv not translated"
grep -qF 'size_t ksearch_rmsnorm_workspace_bytes(int num_rows);' "$TMP/export/rmsnorm-4/ksearch_rmsnorm.h" \
	|| fail "rmsnorm's header lacks the workspace function"
compile "$TMP/export/rmsnorm-4" ksearch_rmsnorm
run 0 "$KSEARCH" export-best --op rmsnorm --archive "$A" -o "$TMP/rms"
out_has "exported candidate #3 (row_block; THREADS=512 VEC=8)"
compile "$TMP/rms" ksearch_rmsnorm
run 0 "$KSEARCH" export-best --op rmsnorm --archive "$A" -o "$TMP/rms"
out_has "exported candidate #3"

# The generated arithmetic: a synthetic candidate with odd expressions, scratch of every
# width, kernel parameters typed unlike the op's dtypes, and a macro named like a launcher
# argument (which cannot reach it: the launcher never sees the candidate's text).  Its workspace
# sizes must equal ksearch's, computed here the same way.
python3 - "$TMP/syn.json" <<'PY' || fatal "test setup: cannot write the synthetic fixture"
import json, sys
doc = json.load(open("tests/fixtures/export-rmsnorm.json"))
src = r'''/* ksearch
{ "params": {"TB": [32, 64], "NEG": [2, -3]},
  "scratch": {"a": ["float32", "cdiv(num_rows, TB) * hidden"],
              "b": ["int32", "-(NEG) * min(num_rows, 7, TB) + max(num_rows % 5, 2)", "zeroed"],
              "c": ["bfloat16", "hidden / (num_rows + 0) + 5000000000 - 4999999999"],
              "d": ["int64", "cdiv(100, num_rows) - -1", "zeroed"]},
  "launch": [
    {"kernel": "fill", "grid": ["cdiv(num_rows, TB)"], "block": ["TB"], "smem": "num_rows * 4",
     "args": ["x", "weight", "eps", "y", "num_rows", "hidden", "a", "b", "c", "d"]} ] }
*/
#include <cuda_bf16.h>
#define stream not_a_stream_here
extern "C" __global__ void fill(const unsigned short *x, const __nv_bfloat16 *w, float eps, __nv_bfloat16 *y,
                                int rows, int hidden, float *a, int *b, unsigned short *c, long long *d)
{
    extern __shared__ float tile[];
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        tile[threadIdx.x] = eps;
        y[r] = w[r % hidden];
        a[r] = tile[threadIdx.x];
        b[0] = c[0] + (int)d[0] + x[0];
    }
}
'''
rec = dict(doc["candidates"][0], id=1, family="synthetic", path="tests/synthetic.cu", params={"TB": 64, "NEG": -3},
           parents=[], kernels=[], source_hash=None)
del rec["source_hash"]
rec["source"] = src
doc["candidates"] = [rec]
doc["sources"] = {}
json.dump(doc, open(sys.argv[1], "w"))
PY
run 0 "$KSEARCH" archive import "$TMP/syn.json" --archive "$TMP/syn"
run 0 "$KSEARCH" export-best --op rmsnorm --archive "$TMP/syn" -o "$TMP/synx" --name syn
syn="$TMP/synx/syn.cu"
grep -q 'not_a_stream_here' "$syn" && fail "$syn holds the candidate's macros"
for text in '#define NEG (-3)' 'ksx_max(' 'ksx_min(num_rows, ksx_min(7, TB))' 'INT64_C(5000000000)' \
	'-(NEG) * ksx_min(' 'if (((int64_t)num_rows + 0) == 0)' 'if (num_rows <= 0)' \
	'ksx_err = cudaMemsetAsync((char *)workspace + ksx_offset[1], 0,' 'ksx_offset[2] - ksx_offset[1], stream);' \
	'ksx_err = cudaMemsetAsync((char *)workspace + ksx_offset[3], 0,' 'ksx_need - ksx_offset[3], stream);'; do
	grep -qF -- "$text" "$syn" || fail "$syn lacks '$text'"
done
# the "zeroed" scratch (b and d) is zeroed before every call, as ksearch times it; a and c are not
[ "$(grep -c 'cudaMemsetAsync' "$syn")" = 2 ] || fail "$syn zeroes other than its two zeroed scratch buffers"
python3 - "$TMP/synx/syn.h" <<'PY' || fail "syn.h does not say which scratch buffers the launcher zeroes"
import re, sys
text = re.sub(r"\s*\n\s*\*\s*", " ", open(sys.argv[1]).read())
said = "zeroed by the launcher (cudaMemsetAsync on the stream) before every call"
assert text.count(said) == 2, text
assert "b, int32[" in text and "d, int64[" in text
PY
if [ "$have_nvcc" = 1 ]; then
	cat >"$TMP/synx/main.cu" <<'CU'
#include <stdio.h>
#include "syn.h"
int main(void)
{
	const int rows[] = {0, 1, 2, 3, 4, 7, 9, 64, 65, 130, 4096, 100000};
	for (unsigned i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		printf("%d %llu\n", rows[i], (unsigned long long)syn_workspace_bytes(rows[i]));
	/* refusals that need no GPU: a size that divides by zero, no workspace, a misaligned one,
	   a launch over CUDA's limits (600M rows ask for 2.4 GB of shared memory) */
	printf("zero %d\n", (int)syn_launch(0, 0, 1e-6f, 0, 0, (void *)256, 1 << 30, 0));
	printf("none %d\n", (int)syn_launch(0, 0, 1e-6f, 0, 5, NULL, 0, 0));
	printf("short %d\n", (int)syn_launch(0, 0, 1e-6f, 0, 5, (void *)256, 256, 0));
	printf("misaligned %d\n", (int)syn_launch(0, 0, 1e-6f, 0, 5, (void *)4097, 1 << 30, 0));
	printf("limits %d\n", (int)syn_launch(0, 0, 1e-6f, 0, 600000000, (void *)256, (size_t)-2, 0));
	printf("codes %d %d\n", (int)cudaErrorInvalidValue, (int)cudaErrorInvalidConfiguration);
	return 0;
}
CU
	run 0 "$nvcc" -std=c++17 -gencode=arch=compute_90a,code=sm_90a "$TMP/synx/main.cu" "$syn" -o "$TMP/synx/main"
	run 0 "$TMP/synx/main"
	python3 - "$TMP/out" <<'PY' || fail "the generated workspace arithmetic disagrees with ksearch's expressions"
import sys
lines = open(sys.argv[1]).read().split("\n")
got = dict(l.split() for l in lines if l and l.split()[0].isdigit())
res = dict(l.split(" ", 1) for l in lines if l and not l.split()[0].isdigit())
cdiv = lambda a, b: -(-a // b)
align = lambda n: (n + 255) // 256 * 256
TB, NEG, hidden = 64, -3, 4096
for rows, bytes_ in got.items():
    rows = int(rows)
    if rows == 0:
        want = 2**64 - 1   # SIZE_MAX: hidden / (num_rows + 0) divides by zero
    else:
        want = (align(cdiv(rows, TB) * hidden * 4) + align((-NEG * min(rows, 7, TB) + max(rows % 5, 2)) * 4)
                + align((hidden // rows + 5000000000 - 4999999999) * 2) + align((cdiv(100, rows) - -1) * 8))
    assert int(bytes_) == want, (rows, bytes_, want)
inval, inconf = map(int, res["codes"].split())
assert int(res["zero"]) == inval and int(res["none"]) == inval, res
assert int(res["short"]) == inval and int(res["misaligned"]) == inval, res
assert int(res["limits"]) == inconf, res
PY
fi

# Errors, each naming the problem.
run 1 "$KSEARCH" export-best --op gqa --archive "$TMP/nothing-here"
err_has "no archive in $TMP/nothing-here"
run 1 "$KSEARCH" export-best --op softmax --archive "$A"
err_has "no archive for operator 'softmax'"
run 1 "$KSEARCH" export-best --op gqa --archive "$A" --gpu "NVIDIA H100"
err_has "no archive for operator 'gqa'"
err_has "NVIDIA H100"
err_has "gqa/nvidia-h200"
# two GPU models for one op: --gpu chooses
sed 's/NVIDIA H200/NVIDIA H100/g' tests/fixtures/export-rmsnorm.json >"$TMP/h100.json"
run 0 "$KSEARCH" archive import "$TMP/h100.json" --archive "$TMP/two"
run 0 "$KSEARCH" archive import tests/fixtures/export-rmsnorm.json --archive "$TMP/two"
run 1 "$KSEARCH" export-best --op rmsnorm --archive "$TMP/two" -o "$TMP/two-out"
err_has "rmsnorm/nvidia-h100"
err_has "--gpu"
run 0 "$KSEARCH" export-best --op rmsnorm --archive "$TMP/two" --gpu "NVIDIA H100" -o "$TMP/two-out"
json_check "$TMP/two-out/ksearch_rmsnorm.json" 'assert j["gpu"] == "NVIDIA H100", j["gpu"]'
run 1 "$KSEARCH" export-best --op nope --archive "$A"
err_has "unknown operator 'nope'"
run 2 "$KSEARCH" export-best --archive "$A"
err_has "--op NAME is required"
run 1 "$KSEARCH" export-best --op gqa --archive "$A" --id 99
err_has "no candidate #99"
run 2 "$KSEARCH" export-best --op gqa --archive "$A" --id x7
err_has "'x7' is not a candidate id"
run 1 "$KSEARCH" export-best --op gqa --archive "$A" --id 9
err_has "has verdict 'wrong'; only candidates verified ok are exported"
run 2 "$KSEARCH" export-best --op gqa --archive "$A" --cell 1,9,0
err_has "bin 9 of axis smem_bytes does not exist"
run 2 "$KSEARCH" export-best --op gqa --archive "$A" --cell 1,2
err_has "the grid has 3 axes"
run 2 "$KSEARCH" export-best --op gqa --archive "$A" --cell 99
err_has "the grid has 45 cells"
run 2 "$KSEARCH" export-best --op gqa --archive "$A" --cell a,b,c
err_has "expected one bin index per grid axis"
run 1 "$KSEARCH" export-best --op gqa --archive "$A" --cell 0,0,0
err_has "cell 0,0,0 (launches [1, 2), smem_bytes [0, 1), tensor_cores [0, 1))"
err_has "is empty; the filled cells are: 0,1,0 (#2"
run 2 "$KSEARCH" export-best --op gqa --archive "$A" --id 6 --cell 1,2,0
err_has "--id and --cell"
run 2 "$KSEARCH" export-best --op gqa --archive "$A" --name 9lives
err_has "--name '9lives': expected a C identifier"
run 2 "$KSEARCH" export-best --op gqa --archive "$A" stray
err_has "takes no arguments"
: >"$TMP/a-file"
run 1 "$KSEARCH" export-best --op gqa --archive "$A" -o "$TMP/a-file"
err_has "exists and is not a folder"

# An archive with nothing ok, an empty one, and records that do not match their source.
python3 - "$TMP" <<'PY' || fatal "test setup: cannot write the broken fixtures"
import copy, json, sys
doc = json.load(open("tests/fixtures/export-gqa.json"))
by_id = {c["id"]: c for c in doc["candidates"]}
def save(name, cands):
    d = dict(doc, candidates=cands)
    json.dump(d, open(f"{sys.argv[1]}/{name}.json", "w"))
wrong = dict(by_id[9], parents=[])
save("wrong", [wrong])
save("empty", [])
missing = copy.deepcopy(by_id[6]); missing.update(id=1, parents=[]); del missing["params"]["HSPLIT"]
extra = copy.deepcopy(by_id[6]); extra.update(id=2, parents=[1], fitness=1.0); extra["params"]["TILE"] = 64
value = copy.deepcopy(by_id[6]); value.update(id=3, parents=[2], fitness=0.5); value["params"]["SPLITS"] = 3
orphan = copy.deepcopy(by_id[6]); orphan.update(id=4, parents=[77], fitness=0.4)
save("mismatch", [missing, extra, value, orphan])
PY
run 0 "$KSEARCH" archive import "$TMP/wrong.json" --archive "$TMP/wrong"
run 1 "$KSEARCH" export-best --op gqa --archive "$TMP/wrong"
err_has "has no ok candidate yet (1 evaluated, none verified ok)"
run 0 "$KSEARCH" archive import "$TMP/empty.json" --archive "$TMP/empty"
run 1 "$KSEARCH" export-best --op gqa --archive "$TMP/empty"
err_has "is empty: nothing to export yet"
run 0 "$KSEARCH" archive import "$TMP/mismatch.json" --archive "$TMP/mm"
run 1 "$KSEARCH" export-best --op gqa --archive "$TMP/mm"
err_has "candidate #1 (operators/gqa/seeds/split_kv.cu): the record does not match its source"
err_has "no value for the source's param 'HSPLIT'"
run 1 "$KSEARCH" export-best --op gqa --archive "$TMP/mm" --id 2
err_has "the record has param 'TILE', which the source does not declare"
run 1 "$KSEARCH" export-best --op gqa --archive "$TMP/mm" --id 3
err_has "params.SPLITS: 3 is not among the values the source declares [1, 2, 4, 8, 16, 32]"
# a parent the archive lacks (an elites-only import) ends the lineage, marked
run 0 "$KSEARCH" export-best --op gqa --archive "$TMP/mm" --id 4 -o "$TMP/orphan"
json_check "$TMP/orphan/ksearch_gqa.json" 'assert j["lineage"] == [{"id": 77, "missing": True}, {"id": 4, "mutation": "param", "fitness": 0.4}], j["lineage"]'

# --dispatch: the best of each benchmark workload, one launcher that picks per call.  In
# this archive #6 is fastest on b1 and b16, and #7 (made fastest on both b64 workloads) there.
# #6 is made a knob child (a family of its own) of split_kv's #5: the export names its seed.
python3 - "$TMP" <<'PY' || fatal "test setup: cannot write the dispatch fixture"
import json, sys
doc = json.load(open("tests/fixtures/export-gqa.json"))
for c in doc["candidates"]:
    if c["id"] == 6:
        c["family"] = c["path"] = "knob-3"
        c["mutation"] = "knob"
        c["evaluator"] = 4
        for w in c["workloads"]:
            t = w["median_us"]
            w["splits"] = [{"kind": "even", "median_us": t * 0.9}, {"kind": "skewed", "median_us": t},
                           {"kind": "uniform", "median_us": t * 0.95}]
    if c["id"] == 7:
        for w in c["workloads"]:
            if w["id"].startswith("b64"):
                w["median_us"] = 300.0
json.dump(doc, open(f"{sys.argv[1]}/dispatch.json", "w"))
PY
run 0 "$KSEARCH" archive import "$TMP/dispatch.json" --archive "$TMP/dar"
run 0 "$KSEARCH" archive stats --archive "$TMP/dar" --op gqa
out_has "best per workload"
out_has "dispatch         fitness 3.927"
out_has "take it home:  ksearch export-best --op gqa --archive $TMP/dar --id "
out_has "               ksearch export-best --op gqa --archive $TMP/dar --dispatch"
out_has "(the fastest kernel of each benchmark workload, 2 kernels behind one launcher: fitness 3.927)"
run 0 "$KSEARCH" archive show 7 --archive "$TMP/dar" --op gqa --no-source
out_has "b64_kv46287               7       300.00     7.07x  <- this one"
out_has "family      mma_tiles  (operators/gqa/seeds/mma_tiles.cu)"
run 0 "$KSEARCH" archive show 6 --archive "$TMP/dar" --op gqa --no-source
out_has "family      knob-3, from split_kv"
out_lacks "family      knob-3, from split_kv  ("
run 0 "$KSEARCH" export-best --op gqa --archive "$TMP/dar" --dispatch -o "$TMP/disp" --name gqa_d
out_has "b64_kv28815      #7        mma_tiles ("
out_has "b1_kv546         #6        knob-3 from split_kv ("
out_has "dispatch fitness 3.927"
for f in gqa_d.cu gqa_d.h gqa_d.json gqa_d_v0.cu gqa_d_v0.h gqa_d_v1.cu gqa_d_v1.h README.md; do
	[ -s "$TMP/disp/$f" ] || fail "export-best --dispatch did not write $f"
done
[ -e "$TMP/disp/gqa_d_v2.cu" ] && fail "a kernel best on several workloads was exported more than once"
json_check "$TMP/disp/gqa_d.json" 'assert [k["variant"] for k in j["kernels"]] == ["gqa_d_v0"] * 3 + ["gqa_d_v1"] * 2, j["kernels"]'
grep -qF "b64_kv46287        ->  gqa_d_v1: #7 mma_tiles (" "$TMP/disp/gqa_d.h" || fail "gqa_d.h does not state the table"
grep -qF "b1_kv546           ->  gqa_d_v0: #6 knob-3 from split_kv (" "$TMP/disp/gqa_d.h" ||
	fail "gqa_d.h does not name the seed a knob child came from"
grep -qF "(family knob-3, from split_kv; params" "$TMP/disp/gqa_d_v0.cu" ||
	fail "gqa_d_v0.cu does not name the seed its kernel came from"
json_check "$TMP/disp/gqa_d_v0.json" 'assert [s["id"] for s in j["lineage"]] == [1, 5, 6], j["lineage"]'
# a single export of it says so too, and what its times are (evaluator 4: the slowest split's)
run 0 "$KSEARCH" export-best --op gqa --archive "$TMP/dar" --id 6 -o "$TMP/knob6"
out_has "exported candidate #6 (knob-3 from split_kv; "
grep -qF "Each time is the slowest of the medians on three length splits" "$TMP/knob6/README.md" ||
	fail "README.md does not say what a time over length splits is"
run 0 "$KSEARCH" export-best --op gqa --archive "$TMP/dar" --id 6 --format flashinfer-bench -o "$TMP/knob6fib"
grep -rqF "the slowest of three length splits' medians, over" "$TMP/knob6fib" ||
	fail "the FlashInfer-Bench traces do not say what a time over length splits is"
grep -rqF "family knob-3 from split_kv" "$TMP/knob6fib" ||
	fail "the FlashInfer-Bench Solution does not name the seed"
checks=$((checks + 5))
if [ "$have_nvcc" = 1 ]; then
	for f in gqa_d_v0 gqa_d_v1 gqa_d; do
		compile "$TMP/disp" "$f"
	done
	# the rule, run on the host: each workload's own sizes, and shapes between them
	cat >"$TMP/disp/rule.cu" <<'CU'
#include <stdio.h>
#include "gqa_d.h"
int main(void)
{
	/* batch_size, num_pages, len_indptr, num_kv_indices */
	printf("%d %d %d %d %d %d\n", gqa_d_variant(1, 2116, 2, 546), gqa_d_variant(16, 18296, 17, 8636),
	       gqa_d_variant(64, 58331, 65, 46287), gqa_d_variant(2, 4000, 3, 1000),
	       gqa_d_variant(128, 200000, 129, 100000), gqa_d_variant(48, 40000, 49, 20000));
	return 0;
}
CU
	run 0 "$nvcc" -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I"$TMP/disp" "$TMP/disp/rule.cu" \
		"$TMP/disp/gqa_d.o" "$TMP/disp/gqa_d_v0.o" "$TMP/disp/gqa_d_v1.o" -o "$TMP/disp/rule"
	run 0 "$TMP/disp/rule"
	out_has "0 0 1 0 1 1"
fi
run 2 "$KSEARCH" export-best --op gqa --archive "$TMP/dar" --dispatch --id 6
err_has "--dispatch exports the best of each workload; --id chooses one candidate"
run 1 "$KSEARCH" export-best --op gqa --archive "$TMP/wrong" --dispatch
err_has "workload b1_kv546 has no ok candidate yet"

# A launch marked "pdl" is launched by the export as it was measured: cuLaunchKernelEx with
# programmatic stream serialization.
python3 - "$TMP" <<'PY' || fatal "test setup: cannot write the pdl fixture"
import hashlib, json, sys
doc = json.load(open("tests/fixtures/export-gqa.json"))
old = [c for c in doc["candidates"] if c["id"] == 6][0]["source_hash"]
src = doc["sources"].pop(old).replace('{"kernel": "gqa_split_merge"', '{"kernel": "gqa_split_merge", "pdl": true', 1)
new = hashlib.sha256(src.encode()).hexdigest()
doc["sources"][new] = src
for c in doc["candidates"]:
    if c["source_hash"] == old:
        c["source_hash"] = new
json.dump(doc, open(f"{sys.argv[1]}/pdl.json", "w"))
PY
run 0 "$KSEARCH" archive import "$TMP/pdl.json" --archive "$TMP/par"
run 0 "$KSEARCH" export-best --op gqa --archive "$TMP/par" -o "$TMP/pdl"
grep -qF 'ksx_pdl1.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;' "$TMP/pdl/ksearch_gqa.cu" ||
	fail "the pdl launch is not launched with programmatic stream serialization"
grep -q 'ksx_pdl0' "$TMP/pdl/ksearch_gqa.cu" && fail "the first launch should stay a plain launch"
compile "$TMP/pdl" ksearch_gqa

# No compiler of the program that builds an export sees the candidate's text: a source whose
# host code NVRTC never saw (a static initializer behind #ifndef __CUDA_ARCH__) is exported, built
# into a shared library and loaded, and the code does not run.  (Until the export carried the
# cubin, nvcc built the text and the initializer ran as the library loaded.)
python3 - "$TMP" <<'PY' || fatal "test setup: cannot write the host payload fixture"
import hashlib, json, sys
doc = json.load(open("tests/fixtures/export-rmsnorm.json"))
old = [c for c in doc["candidates"] if c["id"] == 3][0]["source_hash"]
payload = ('\n#ifndef __CUDA_ARCH__\nextern "C" int system(const char *);\n'
           f'static int ksearch_host_payload = system("touch {sys.argv[1]}/pwned");\n#endif\n')
src = doc["sources"].pop(old).replace("#include <cuda_bf16.h>\n", "#include <cuda_bf16.h>\n" + payload, 1)
assert payload in src
new = hashlib.sha256(src.encode()).hexdigest()
doc["sources"][new] = src
for c in doc["candidates"]:
    if c["source_hash"] == old:
        c["source_hash"] = new
json.dump(doc, open(f"{sys.argv[1]}/payload.json", "w"))
PY
run 0 "$KSEARCH" archive import "$TMP/payload.json" --archive "$TMP/payar"
run 0 "$KSEARCH" export-best --op rmsnorm --archive "$TMP/payar" -o "$TMP/payload"
grep -q "ksearch_host_payload" "$TMP/payload/ksearch_rmsnorm.cu" && fail "the export's .cu holds the candidate's text"
grep -q "ksearch_host_payload" "$TMP/payload/ksearch_rmsnorm_source.txt" || fail "the source file lacks the candidate's text"
if [ "$have_nvcc" = 1 ]; then
	run 0 "$nvcc" -shared -Xcompiler -fPIC -std=c++17 "$TMP/payload/ksearch_rmsnorm.cu" -o "$TMP/payload/lib.so"
	run 0 python3 -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' "$TMP/payload/lib.so"
	[ -e "$TMP/pwned" ] && fail "the candidate's host code ran when its export was loaded"
	checks=$((checks + 1))
fi

# A record's path and family stand in the export's comments: a star and a slash in them (an
# imported file's) cannot end a comment and put the rest in the code.
python3 - "$TMP" <<'PY' || fatal "test setup: cannot write the comment fixture"
import json, sys
doc = json.load(open("tests/fixtures/export-rmsnorm.json"))
for c in doc["candidates"]:
    if c["id"] == 3:
        c["path"] = 'seeds/a*/ static_assert(false, "the path ended a comment"); /*b.cu'
json.dump(doc, open(f"{sys.argv[1]}/comment.json", "w"))
PY
run 0 "$KSEARCH" archive import "$TMP/comment.json" --archive "$TMP/commentar"
run 0 "$KSEARCH" export-best --op rmsnorm --archive "$TMP/commentar" -o "$TMP/comment"
grep -qF 'seeds/a* / static_assert' "$TMP/comment/ksearch_rmsnorm.cu" ||
	fail "the record's path is not in the export's comment, made harmless"
grep -qF 'a*/ static_assert' "$TMP/comment/ksearch_rmsnorm.cu" && fail "the record's path ends a comment in the export"
compile "$TMP/comment" ksearch_rmsnorm

# the archive the README shows without a GPU exports, every ok candidate of it (issue 14: its
# sources used names gqa does not have, so export-best refused them)
run 0 "$KSEARCH" archive import tests/fixtures/archive-small.json --archive "$TMP/small"
run 0 "$KSEARCH" export-best --op gqa --archive "$TMP/small" -o "$TMP/small-best"
out_has "exported candidate #8 (split_kv; SPLITS=16 WARPS=8 UNROLL=2 HSPLIT=1)"
compile "$TMP/small-best" ksearch_gqa
for id in 1 2 3 6 7 10; do
	run 0 "$KSEARCH" export-best --op gqa --archive "$TMP/small" --id "$id" -o "$TMP/small-$id"
done

run 0 "$KSEARCH" export-best --help
out_has "usage: ksearch export-best --op NAME"
done_ok
