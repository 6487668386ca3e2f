#!/usr/bin/env bash
# Hardware evidence on the GPU: a short gqa search, then Nsight Compute on
# its winner and on the reference kernel, both at B=64 (b64_kv46287, the
# workload with the most bytes to move).  The winner moves data: DRAM
# throughput above 30% of the peak; the reference, a naive kernel, far less
# (under half the winner's, and under 10%).  The winner's profile lands in
# its record (`archive show`, `--json`) and in the prompt the LLM would get
# with it as the parent.  The search itself profiles new elites (with half
# the GPU time allowed here).  A kernel that crashes or hangs under the
# profiler fails its profile (exit 4), and nothing of it survives.
#
# Needs a GPU and ncu (exit 77 = skipped otherwise).  Env: KSEARCH,
# KS_SOURCE_ROOT, KS_RENDER_PROMPT (tests/gpu/render_prompt, built beside
# the tests); optional KS_GPU_LOG_DIR (ncu's CSV and the outputs are kept
# there), KSEARCH_NCU.
if ! command -v nvidia-smi >/dev/null 2>&1; then
	echo "SKIP: no nvidia-smi on PATH, so no NVIDIA GPU to run kernels on"
	exit 77
fi
if ! gpus=$(nvidia-smi -L 2>&1) || [ -z "$gpus" ]; then
	echo "SKIP: 'nvidia-smi -L' lists no GPU: ${gpus:-no output}"
	exit 77
fi
ncu=${KSEARCH_NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
if ! [ -x "$ncu" ]; then
	echo "SKIP: no ncu (Nsight Compute) on PATH or in /usr/local/cuda/bin; set KSEARCH_NCU"
	exit 77
fi
. "$(dirname "$0")/../cli/lib.sh"
echo "$gpus" | head -n 1
RENDER=${KS_RENDER_PROMPT:?KS_RENDER_PROMPT must name tests/gpu/render_prompt}
log_dir=${KS_GPU_LOG_DIR:-$TMP/logs}
mkdir -p "$log_dir" || fail "cannot create $log_dir"
A="$TMP/archive"
keep() { cp "$TMP/out" "$log_dir/t0230-$1.out"; cp "$TMP/err" "$log_dir/t0230-$1.err"; }

# a short search; profiles take at most half the GPU time here, so one may run in it
run 0 "$KSEARCH" evolve --op gqa --budget 40 --archive "$A" --seed 3 --profile-share 0.5 --log "$log_dir/t0230-evolve.jsonl"
keep evolve
out_has "profiler: "
grep -qE "^profiler: [1-9][0-9]* new elites? profiled" "$TMP/out" || fail "the search profiled no new elite"

# the winner, stored
run 0 "$KSEARCH" profile --op gqa --best --archive "$A" --raw "$log_dir/t0230-ncu-best.csv"
keep profile-best
out_has "on b64_kv46287"
out_has "stored in "
best=$(sed -n 's/^profile of #\([0-9]*\) .*/\1/p' "$TMP/out")
[ -n "$best" ] || fail "profile did not name the candidate"
run 0 "$KSEARCH" archive show "$best" --archive "$A" --json
keep show-best-json
best_dram=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); p=r["profile"]
assert r["descriptors"]["dram_fraction"] == p["dram_fraction"], "descriptor not replaced"
assert 0 < p["achieved_occupancy"] <= 1 and 0 <= p["l2_hit_rate"] <= 1 and 0 < p["sm_throughput"] <= 1, p
assert len(p["stalls"]) == 3 and sum(s["share"] for s in p["stalls"]) <= 1.0001, p["stalls"]
print(p["dram_fraction"])' "$TMP/out") || fail "the winner's record lacks a sound profile"
echo "winner #$best: DRAM $best_dram of peak"
python3 -c "import sys; sys.exit(0 if float('$best_dram') > 0.30 else 1)" ||
	fail "the winner's DRAM throughput is $best_dram of peak, expected above 0.30"
run 0 "$KSEARCH" archive show "$best" --archive "$A" --no-source
keep show-best
out_has "profile     ncu"
out_has "warp stalls: "

# the reference, not stored
run 0 "$KSEARCH" profile --op gqa operators/gqa/reference.cu --json --raw "$log_dir/t0230-ncu-reference.csv"
keep profile-reference
ref_dram=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["dram_fraction"])' "$TMP/out") ||
	fail "profile --json printed no profile"
echo "reference: DRAM $ref_dram of peak"
python3 -c "import sys; sys.exit(0 if float('$ref_dram') < 0.10 and float('$ref_dram') < float('$best_dram') / 2 else 1)" ||
	fail "the reference's DRAM throughput is $ref_dram of peak, expected far less than the winner's $best_dram"

# the prompt the LLM would get with the winner as its parent
gpu_slug=$(ls "$A/gqa")
run 0 "$RENDER" "$A" gqa "$gpu_slug" "$best"
keep prompt
out_has "Nsight Compute on workload b64_kv46287"
out_has "- DRAM throughput $(python3 -c "print('%.0f' % (100 * float('$best_dram')))")% of peak"
out_has "- warp stalls: "
run 0 "$KSEARCH" archive verify --archive "$A"

# hostile kernels under the profiler cost their own processes only, with a reason
run 4 "$KSEARCH" profile --op rmsnorm tests/gpu/hostile/illegal_address.cu
keep illegal-address
err_has "tests/gpu/hostile/illegal_address.cu: "
run 4 "$KSEARCH" profile --op rmsnorm tests/gpu/hostile/infinite_loop.cu --timeout 15s
keep infinite-loop
err_has "tests/gpu/hostile/infinite_loop.cu: the candidate did not finish within 14 s under the profiler"
# this candidate's runner only: searches beside the test (one GPU each) run runners of their own
! pgrep -f "__profile_run .*infinite_loop[.]cu" >/dev/null || fail "a profile runner outlived its deadline"
done_ok
