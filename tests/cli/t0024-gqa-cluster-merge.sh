#!/usr/bin/env bash
# gqa_space_cluster's one-launch merge (MERGE 0, SPLITS > 1) is the push it documents, without a
# GPU (BENCHMARKS.md, fifteenth session): each split pushes the heads it does not own into the
# owner's shared memory with st.async and waits on its own mbarrier (acquire at cluster scope),
# no CTA reads another's memory, and the only cluster barrier is split into one arrive and the
# waits; ksearch gives it its slots past the ring ((SPLITS + 7)*528 + 16 bytes of shared memory) and
# the constraint rules out a ring and slots over 227 KiB. SPLITS 1 has none of it. Then
# tools/gqa-trace.py (globaltimer stamps in a copy of the seed, each at a line of the seed's own
# text) stamps the seed as it is, names the line it lost when the text moves and writes nothing,
# and tools/gqa-trace.cu builds with nvcc's warnings as errors. Without nvcc the PTX and the
# build are skipped (77 when nothing else ran).
. "$(dirname "$0")/lib.sh"

seed=operators/gqa/seeds/gqa_space_cluster.cu
# smem PARAMS...: the dynamic shared memory ksearch gives the kernel at these params
smem() {
	local args=() kv
	for kv in "$@"; do args+=(--param "$kv"); done
	run 0 "$KSEARCH" compile "$seed" --op gqa --arch sm_90a --json "${args[@]}"
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["verdict"] == "ok", r["evidence"]; print(r["kernels"][0]["dynamic_smem"])' "$TMP/out"
}
checks=$((checks + 1))
got=$(smem SPLITS=6 WARPS=6 STAGES=2 MERGE=0)
[ "$got" = $((6 * 2 * 8712 + 13 * 528 + 16)) ] || fail "MERGE 0 SPLITS 6 WARPS 6 STAGES 2: $got bytes of shared memory"
checks=$((checks + 1))
got=$(smem SPLITS=6 WARPS=6 STAGES=2 MERGE=1)
[ "$got" = $((6 * 2 * 8712)) ] || fail "MERGE 1: $got bytes of shared memory, no slots expected"
# 8 warps of 4 stages (272 KiB of ring) are refused by the constraint, which counts the slots
run 2 "$KSEARCH" compile "$seed" --op gqa --param SPLITS=8 --param WARPS=8 --param STAGES=4 --param MERGE=0
err_has '(SPLITS + 7)*528 + 16) <= 232448'
# clusters of up to 16 CTAs (over 8 not portable: the evaluator and the export allow them), no more
checks=$((checks + 1))
got=$(smem SPLITS=16 WARPS=4 STAGES=2 MERGE=0)
[ "$got" = $((4 * 2 * 8712 + 23 * 528 + 16)) ] || fail "MERGE 0 SPLITS 16 WARPS 4 STAGES 2: $got bytes of shared memory"
run 2 "$KSEARCH" compile "$seed" --op gqa --param SPLITS=20 --param WARPS=4 --param STAGES=2 --param MERGE=0
err_has 'MERGE == 1 || SPLITS <= 16'

if ! [ -x "$nvcc" ]; then
	skip_part "no nvcc (looked in $cuda/bin and on PATH; set NVCC): no PTX read, gqa-trace.cu not compiled"
fi
if [ -x "$nvcc" ]; then
	run 0 "$nvcc" -std=c++17 -arch=sm_90a -ptx -DSPLITS=6 -DWARPS=6 -DMERGE=0 -o "$TMP/push.ptx" "$seed"
	run 0 "$nvcc" -std=c++17 -arch=sm_90a -ptx -DSPLITS=1 -DWARPS=6 -DMERGE=0 -o "$TMP/one.ptx" "$seed"
	count() { grep -cE -- "$2" "$TMP/$1.ptx"; }
	checks=$((checks + 1))
	[ "$(count push 'st\.async\.shared::cluster\.mbarrier::complete_tx::bytes')" -ge 2 ] || fail "the push merge has no st.async"
	checks=$((checks + 1))
	[ "$(count push 'ld\.shared::cluster')" = 0 ] || fail "the push merge reads another CTA's shared memory"
	checks=$((checks + 1))
	[ "$(count push 'barrier\.cluster\.arrive')" = 1 ] || fail "expected one cluster arrive, at the start"
	checks=$((checks + 1))
	[ "$(count push 'mbarrier\.try_wait\.parity\.acquire\.cluster')" = 1 ] || fail "the owner's wait is not an acquire at cluster scope"
	checks=$((checks + 1))
	[ "$(count one 'st\.async|barrier\.cluster|mapa')" = 0 ] || fail "SPLITS 1 has cluster code"
fi

run 0 python3 tools/gqa-trace.py "$seed" "$TMP/gqa_tr.cu"
for stamp in 'TR(0)' 'TR(1)' 'TR(2)' 'TR(3)' 'TR(4)' 'TR(5)' 'TR(6)' 'TR(7)' 'TR(8)' 'TR(12)' 'TR(13)' 'TR(14)' 'TR(15)'; do
	grep -qF "$stamp" "$TMP/gqa_tr.cu" || fail "the traced copy lacks the stamp $stamp"
done
checks=$((checks + 1))
sed 's|the CTA.s partial (normalised o, lse) per (head, 4 dims)|the partial|' "$seed" >"$TMP/moved.cu"
run 1 python3 tools/gqa-trace.py "$TMP/moved.cu" "$TMP/moved_tr.cu"
err_has "per (head, 4 dims) */' occurs 0 times where one was expected"
[ -e "$TMP/moved_tr.cu" ] && fail "a copy was written although a stamp's line was missing"
checks=$((checks + 1))

[ -x "$nvcc" ] || done_ok
run 0 "$nvcc" -O2 -std=c++17 -arch=sm_90a -cudart static -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
	"-DSEED=\"$TMP/gqa_tr.cu\"" -DSPLITS=6 -DCHUNK=16 -DMERGE=0 -DLOAD=0 -DHINT=0 -DL2PF=1 -DWARPS=6 -DSTAGES=2 -DIDXPF=2 \
	-o "$TMP/gqa-trace" tools/gqa-trace.cu
[ -x "$TMP/gqa-trace" ] || fail "no gqa-trace binary"
checks=$((checks + 1))
done_ok
