#!/usr/bin/env bash
# gqa_space_cluster's one-launch cluster merge (MERGE 0, SPLITS > 1: each split pushes the heads
# it does not own into the owner's shared memory, BENCHMARKS.md, fifteenth session) and its
# guessed range for a batch of one verify on every check workload (one to 33 requests, a request
# of one token, uneven lengths) at points that cover its shapes: every cluster size from 2 to 8
# (head ownership even and uneven: 8 % SPLITS), clusters of 10, 12 and 16 CTAs (not portable:
# the evaluator allows them; splits 8 and up own no head), one to eight warps, all three loads,
# and the counter merge (MERGE 1) beside it. t0201 checks the seed at its start only (SPLITS 10).
#
# Needs a GPU (exit 77 = skipped otherwise).  Env: KSEARCH, KS_SOURCE_ROOT, optional KS_GPU_LOG_DIR.
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "SKIP: no NVIDIA GPU to run kernels on"
	exit 77
fi
. "$(dirname "$0")/../cli/lib.sh"

seed=operators/gqa/seeds/gqa_space_cluster.cu
points=(
	"SPLITS=6 CHUNK=16 WARPS=6 STAGES=2 LOAD=0 L2PF=1 IDXPF=2"
	"SPLITS=8 CHUNK=16 WARPS=8 STAGES=2 LOAD=2 HINT=1"
	"SPLITS=2 CHUNK=64 WARPS=1 STAGES=4 LOAD=1"
	"SPLITS=3 CHUNK=32 WARPS=4 STAGES=3 LOAD=0 IDXPF=4"
	"SPLITS=7 CHUNK=16 WARPS=3 STAGES=2 LOAD=0"
	"SPLITS=5 CHUNK=128 WARPS=2 STAGES=6 LOAD=1 HINT=1"
	"SPLITS=4 CHUNK=16 WARPS=6 STAGES=2 LOAD=0 MERGE=1"
	"SPLITS=10 CHUNK=16 WARPS=4 STAGES=2 LOAD=0 HINT=1 L2PF=1 IDXPF=4"
	"SPLITS=16 CHUNK=16 WARPS=2 STAGES=3 LOAD=2"
	"SPLITS=12 CHUNK=32 WARPS=3 STAGES=2 LOAD=1"
)
for p in "${points[@]}"; do
	args=()
	for kv in $p; do args+=(--param "$kv"); done
	# what a point leaves out takes the first value, not the start's (HINT=1 L2PF=1 IDXPF=4)
	for d in MERGE=0 HINT=0 L2PF=0 IDXPF=1; do
		case " $p" in *" ${d%=*}="*) ;; *) args+=(--param "$d") ;; esac
	done
	run 0 "$KSEARCH" check "$seed" --op gqa --json --time-cap 50 --workload b1_kv546 "${args[@]}"
	[ -n "${KS_GPU_LOG_DIR:-}" ] && cp "$TMP/out" "$KS_GPU_LOG_DIR/t0207-$(echo "$p" | tr ' =' '_-').json"
	checks=$((checks + 1))
	python3 - "$TMP/out" "$p" <<'PY' || fail "$p: not ok (above)"
import json, sys
r = json.load(open(sys.argv[1]))
r = r[0] if isinstance(r, list) else r
print(f"{sys.argv[2]}: {r.get('verdict')}, b1_kv546 {r['workloads'][0]['median_us']:.2f} us" if r.get("workloads") else r)
assert r.get("verdict") == "ok", r.get("evidence")
PY
done
done_ok
