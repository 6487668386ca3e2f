#!/usr/bin/env bash
# gqa_space_cluster's LOAD 2 (K/V tiles staged through registers) is what it says, without
# a GPU: at its heaviest register points it compiles `ok` with no spills and no stack, its
# ring is one stage per warp (WARPS*8712 bytes, besides the cluster merge's slots), ksearch
# reads no async copy in its PTX, and the PTX nvcc makes with the same -D values has the plain 16-byte loads (HINT 1: the
# L1::no_allocate, L2 evict_first form) and 16-byte shared stores and no cp.async, where
# LOAD 0's has cp.async.  STAGES 4 (three tiles in registers) and L2PF are ruled out by
# the constraints.  Without nvcc the PTX part is skipped and the test reports 77.
. "$(dirname "$0")/lib.sh"

seed=operators/gqa/seeds/gqa_space_cluster.cu
# params ...: compile at these params (others at the family's start, L2PF 0 as LOAD 2 needs),
# check the report of a LOAD 2 kernel
load2_ok() {
	local args=() kv
	for kv in L2PF=0 "$@"; do args+=(--param "$kv"); done
	run 0 "$KSEARCH" compile "$seed" --op gqa --arch sm_90a --json "${args[@]}"
	checks=$((checks + 1))
	python3 - "$TMP/out" <<'PY' || fail "LOAD 2 at $*: not ok, spills, or not one ring stage per warp"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["verdict"] == "ok", r["evidence"]
k = r["kernels"][0]
assert k["spill_stores"] == 0 and k["spill_loads"] == 0 and k["stack_bytes"] == 0, k
assert k["async_copy"] == "none" and k["widest_load_bytes"] == 16, k
p = r["params"]
push = ((p["SPLITS"] + 7) * 528 + 16) if (p["MERGE"] == 0 and p["SPLITS"] > 1) else 0  # the cluster merge's slots
assert k["dynamic_smem"] == p["WARPS"] * 8712 + push, k
PY
}

load2_ok LOAD=2
# the most registers: two tiles held, deepest index prefetch, the widest DSMEM merge
load2_ok LOAD=2 SPLITS=8 MERGE=0 WARPS=8 STAGES=3 HINT=1 IDXPF=4
load2_ok LOAD=2 SPLITS=32 CHUNK=256 MERGE=1 WARPS=8 STAGES=3 HINT=1 IDXPF=4
load2_ok LOAD=2 SPLITS=4 MERGE=0 WARPS=1 STAGES=3 HINT=0 IDXPF=4

run 2 "$KSEARCH" compile "$seed" --op gqa --param LOAD=2 --param L2PF=0 --param STAGES=4
err_has 'LOAD != 2 || STAGES <= 3'
run 2 "$KSEARCH" compile "$seed" --op gqa --param LOAD=2 --param L2PF=1
err_has 'LOAD == 0 || L2PF == 0'

# ptx NAME -D...: the seed's PTX for sm_90a at these defines, in $TMP/NAME.ptx
ptx() {
	local name=$1
	shift
	run 0 "$nvcc" -std=c++17 -arch=sm_90a -ptx "$@" -o "$TMP/$name.ptx" "$seed"
}
# count NAME PATTERN: how many lines of NAME's PTX match the extended regex PATTERN
count() { grep -cE -- "$2" "$TMP/$1.ptx"; }

if [ -x "$nvcc" ]; then
	ptx load2 -DLOAD=2 -DSTAGES=3 -DWARPS=4 -DSPLITS=4
	ptx load2_hint -DLOAD=2 -DSTAGES=2 -DHINT=1 -DWARPS=4 -DSPLITS=4
	ptx load0 -DLOAD=0 -DSTAGES=3 -DWARPS=4 -DSPLITS=4
	checks=$((checks + 1))
	[ "$(count load2 'cp\.async')" = 0 ] || fail "LOAD 2's PTX has cp.async"
	checks=$((checks + 1))
	[ "$(count load2_hint 'cp\.async')" = 0 ] || fail "LOAD 2 HINT 1's PTX has cp.async"
	# two tiles in the prologue and one per unrolled step (two), 16 loads each
	checks=$((checks + 1))
	[ "$(count load2 'ld\.global\.nc\.v4\.u32')" = 64 ] ||
		fail "LOAD 2 STAGES 3: $(count load2 'ld\.global\.nc\.v4\.u32') ld.global.nc.v4.u32, expected 64"
	checks=$((checks + 1))
	[ "$(count load2 'st\.shared\.v4\.b32')" = 32 ] ||
		fail "LOAD 2 STAGES 3: $(count load2 'st\.shared\.v4\.b32') st.shared.v4.b32, expected 32"
	checks=$((checks + 1))
	[ "$(count load2_hint 'ld\.global\.nc\.L1::no_allocate\.L2::cache_hint\.v4\.u32')" = 32 ] ||
		fail "LOAD 2 HINT 1: expected 32 evict_first no-allocate 16-byte loads"
	checks=$((checks + 1))
	[ "$(count load0 'cp\.async\.cg')" -gt 0 ] || fail "LOAD 0's PTX has no cp.async.cg"
	checks=$((checks + 1))
	[ "$(count load0 'ld\.global\.nc\.v4|ld\.global\.nc\.L1')" = 0 ] || fail "LOAD 0's PTX loads K/V into registers"
else
	skip_part "no nvcc (looked in $cuda/bin and on PATH; set NVCC): the PTX is not read"
fi
done_ok
