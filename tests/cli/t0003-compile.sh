#!/usr/bin/env bash
# `ksearch compile` prints the resource report and descriptors.
. "$(dirname "$0")/lib.sh"

seed=$(ls operators/gqa/seeds/*.cu | head -n 1)
run 0 "$KSEARCH" compile "$seed" --op gqa --arch sm_90a
for word in kernel regs smem.st smem.dyn stack "spill st/ld" threads occupancy tensor async load \
	descriptors: "cell:" "verdict:     ok" sm_90a; do
	out_has "$word"
done

# the JSON form carries the same report
run 0 "$KSEARCH" compile "$seed" --op gqa --arch sm_80 --json
python3 - "$TMP/out" <<'PY' || fail "compile --json is not the expected JSON"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["verdict"] == "ok" and r["arch"] == "sm_80", r
assert r["kernels"] and all(k["registers"] > 0 for k in r["kernels"]), r["kernels"]
for k in r["kernels"]:
    assert 0 < k["occupancy"] <= 1 and k["threads"] >= 32, k
    assert k["tensor_cores"] in ("none", "mma", "wgmma") and k["async_copy"] in ("none", "cp.async", "tma")
d = r["descriptors"]
assert d["launches"] == len(r["kernels"]) and d["registers"] == max(k["registers"] for k in r["kernels"])
assert set(r["cell"]) and all(isinstance(v, int) for v in r["cell"].values())
PY

# the cp.async seed shows its async copies and 16-byte loads
run 0 "$KSEARCH" compile operators/gqa/seeds/cp_async_tiles.cu --op gqa --arch sm_90a --json
python3 - "$TMP/out" <<'PY' || fail "cp_async_tiles descriptors"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["descriptors"]["async_copy"] == 1, r["descriptors"]
assert r["descriptors"]["load_width"] == 16, r["descriptors"]
PY

# --param picks values; the dynamic shared memory follows them
run 0 "$KSEARCH" compile operators/gqa/seeds/cp_async_tiles.cu --op gqa --arch sm_90a --json
small=$(python3 -c 'import json,sys; print(max(k["dynamic_smem"] for k in json.load(open(sys.argv[1]))["kernels"]))' "$TMP/out")
big_params=$(python3 - <<'PY'
import json, re
src = open("operators/gqa/seeds/cp_async_tiles.cu").read()
block = json.loads(re.search(r"/\*\s*ksearch(.*?)\*/", src, re.S).group(1))
print(" ".join(f"--param {k}={v[-1]}" for k, v in block["params"].items() if k in ("STAGES", "TILE")))
PY
)
# shellcheck disable=SC2086
run 0 "$KSEARCH" compile operators/gqa/seeds/cp_async_tiles.cu --op gqa --arch sm_90a --json $big_params
big=$(python3 -c 'import json,sys; print(max(k["dynamic_smem"] for k in json.load(open(sys.argv[1]))["kernels"]))' "$TMP/out")
[ "$big" -gt "$small" ] || fail "dynamic smem did not grow with STAGES/TILE ($small -> $big)"

# --all-params prints one row per combination
run 0 "$KSEARCH" compile operators/rmsnorm/seeds/row_warp.cu --op rmsnorm --all-params
out_has "param combinations"
rows=$(grep -c " ok " "$TMP/out")
[ "$rows" -ge 2 ] || fail "expected a row per combination, got $rows"
done_ok
