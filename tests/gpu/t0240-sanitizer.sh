#!/usr/bin/env bash
# compute-sanitizer catches what the guard bands cannot: every candidate in
# tests/gpu/hostile/ with a "// sanitizer: failed TOOL" line (writes outside a
# buffer undone before the run ends, a shared-memory race whose result never
# shows; t0200 checks that the evaluator says ok to each) must come out of
# `ksearch sanitize` failed (exit 5) with TOOL's error first; correct kernels
# that use shared memory (zz_good.cu, the row_block seed, and the
# warp-specialised gqa_ws, mla_ws and mla_mma_ws seeds, whose rings sync by mbarriers only;
# mla_mma_ws without the L2 hint and with its score's k-steps in one part (KSPL 1), at its start
# (KSPL 2), and with Q's fragments in registers under either split, the hint and 4-load merge
# round trips)
# must come out clean with both tools run.  Then the archive path: `ksearch sanitize --id` stores
# the check, a failed one demotes its record, and export-best refuses it.
#
# Needs a GPU and compute-sanitizer (exit 77 = skipped otherwise, saying why).
# Env: KSEARCH, KS_SOURCE_ROOT, optional KS_GPU_LOG_DIR (the sanitizer's raw
# output of each candidate is kept there).
if ! command -v nvidia-smi >/dev/null 2>&1; then
	echo "SKIP: no nvidia-smi on PATH, so no NVIDIA GPU to run kernels on"
	exit 77
fi
if ! gpus=$(nvidia-smi -L 2>&1) || [ -z "$gpus" ]; then
	echo "SKIP: 'nvidia-smi -L' lists no GPU: ${gpus:-no output}"
	exit 77
fi
. "$(dirname "$0")/../cli/lib.sh"
echo "$gpus" | head -n 1
LOGS=${KS_GPU_LOG_DIR:-$TMP/logs}
mkdir -p "$LOGS"

# sanitize EXPECTED_EXIT FILE LABEL: ksearch sanitize --op rmsnorm FILE --json, timed
sanitize() {
	local start=$(date +%s)
	run "$1" "$KSEARCH" sanitize --op rmsnorm "$2" --json --raw "$LOGS/sanitizer-$3.raw"
	echo "  $3: exit $1 after $(($(date +%s) - start)) s: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("status"), d.get("tools"), d.get("errors"), d.get("first", ""), "%.1f s" % d.get("seconds", 0))' "$TMP/out" 2>/dev/null)"
}

# clean first: when the sanitizer cannot run here, say so and skip
start=$(date +%s)
"$KSEARCH" sanitize --op rmsnorm tests/gpu/hostile/zz_good.cu --json --raw "$LOGS/sanitizer-zz_good.raw" >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ "$rc" = 3 ]; then
	echo "SKIP: no usable compute-sanitizer here: $(cat "$TMP/err")"
	exit 77
fi
[ "$rc" = 0 ] || fail "zz_good.cu: ksearch sanitize exited $rc, expected 0 (clean)"
echo "  zz_good: clean after $(($(date +%s) - start)) s"
python3 - "$TMP/out" <<'PY' || fail "zz_good.cu: expected a clean check by memcheck and racecheck on every workload"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "clean", d
assert d["tools"] == ["memcheck", "racecheck"], d["tools"]
assert d["errors"] == 0 and d["smem_bytes"] > 0, d
assert len(d["workloads"]) == 9, d["workloads"]  # rmsnorm: 5 check + 4 benchmark workloads
assert d["version"].startswith("compute-sanitizer "), d["version"]
PY
sanitize 0 operators/rmsnorm/seeds/row_block.cu row_block
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["status"] == "clean", d' "$TMP/out" ||
	fail "the row_block seed: expected clean"
# the warp-specialised seeds sync their rings with mbarriers only (no __syncthreads): racecheck
# once reported gqa_ws's refill of a 2-stage ring as a race (one arrival per warp on "empty",
# after a __syncwarp), which demoted every gqa_ws best the search found
for args in "gqa operators/gqa/seeds/gqa_ws.cu" "gqa operators/gqa/seeds/gqa_ws.cu --param STAGES=2 --param CTAS=132 --param HINT=1 --param PART=1" \
	"mla_decode operators/mla_decode/seeds/mla_ws.cu" \
	"mla_decode operators/mla_decode/seeds/mla_mma_ws.cu --param TILE=32 --param WARPS=4 --param STAGES=2 --param MINB=2 --param CTAS=264 --param SPLIT=1 --param SEGP=64 --param PART=1 --param HINT=0 --param KSPL=1" \
	"mla_decode operators/mla_decode/seeds/mla_mma_ws.cu --param CHUNK=64 --param CTAS=132 --param TILE=32 --param STAGES=3 --param WARPS=8 --param MINB=1 --param PART=0 --param SPLIT=1 --param SEGP=96 --param QREG=1 --param MDEPTH=4 --param KSPL=1" \
	"mla_decode operators/mla_decode/seeds/mla_mma_ws.cu --param CHUNK=64 --param CTAS=132 --param TILE=32 --param STAGES=3 --param WARPS=8 --param MINB=1 --param QREG=1" \
	"mla_decode operators/mla_decode/seeds/mla_mma_ws.cu"; do
	set -- $args
	label=$(basename "$2" .cu)-$#
	start=$(date +%s)
	run 0 "$KSEARCH" sanitize --op "$@" --json --raw "$LOGS/sanitizer-$label.raw"
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["status"] == "clean" and "racecheck" in d["tools"], d' "$TMP/out" ||
		fail "$args: expected clean under memcheck and racecheck"
	echo "  $label: clean after $(($(date +%s) - start)) s"
done

n=0
for f in tests/gpu/hostile/*.cu; do
	want=$(sed -n 's|^// sanitizer: *failed *\([a-z]*\).*|\1|p' "$f")
	[ -n "$want" ] || continue
	n=$((n + 1))
	name=$(basename "$f" .cu)
	sanitize 5 "$f" "$name"
	python3 - "$TMP/out" "$want" <<'PY' || fail "$name: expected failed with a $want error first"
import json, sys
d, want = json.load(open(sys.argv[1])), sys.argv[2]
assert d["status"] == "failed", d
assert d["errors"] >= 1 and d["first_tool"] == want, d
first = d["first"]
assert (first.startswith("Invalid __global__") if want == "memcheck" else "Race reported" in first), first
PY
done
[ "$n" -ge 4 ] || fail "expected at least 4 candidates with a '// sanitizer: failed' line, found $n"

# the archive path: the rmsnorm fixture's records on this GPU, plus #100, the undone write past
# the output, as the best by fitness and on every workload; its check fails and demotes it
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | head -n 1)
python3 - tests/fixtures/export-rmsnorm.json tests/gpu/hostile/undone_write_past_output.cu "$gpu_name" "$TMP/doc.json" <<'PY' ||
import hashlib, json, sys
doc, src_path, gpu, out = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4]
source = open(src_path).read()
h = hashlib.sha256(source.encode()).hexdigest()
doc["gpu"] = gpu
best = max((r for r in doc["candidates"] if r["verdict"] == "ok"), key=lambda r: r["fitness"])
bad = json.loads(json.dumps(best))
bad.update(id=100, family="undone_write_past_output", path=src_path, params={}, source_hash=h,
           fitness=best["fitness"] * 2, parents=[])
for w in bad["workloads"]:
    w["median_us"] /= 2
for r in doc["candidates"] + [bad]:
    r["gpu"] = gpu
doc["candidates"].append(bad)
doc["sources"][h] = source
json.dump(doc, open(out, "w"))
PY
	fail "could not write the archive document"
A="$TMP/ar"
run 0 "$KSEARCH" archive import "$TMP/doc.json" --archive "$A"
run 0 "$KSEARCH" export-best --op rmsnorm --archive "$A" -o "$TMP/before"
out_has "exported candidate #100"
err_has "was never checked by the sanitizer"
run 5 "$KSEARCH" sanitize --op rmsnorm --archive "$A" --id 100
out_has "FAILED"
out_has "demoted"
run 0 "$KSEARCH" archive verify --op rmsnorm --archive "$A"
run 0 "$KSEARCH" archive show 100 --op rmsnorm --archive "$A" --no-source
out_has "demoted: no elite, no best"
run 3 "$KSEARCH" export-best --op rmsnorm --archive "$A" --id 100 -o "$TMP/bad"
err_has "candidate #100"
err_has "failed its sanitizer check: memcheck reported"
run 0 "$KSEARCH" export-best --op rmsnorm --archive "$A" -o "$TMP/after"
out_lacks "exported candidate #100"
run 0 "$KSEARCH" export-best --op rmsnorm --archive "$A" --dispatch -o "$TMP/dispatch"
out_lacks "#100 "

# the search's path: a short evolve checks its new bests on its lanes, within --sanitize-share
# (0.5 here, so that a short run pays for checks), and stores each check in its record
E="$TMP/evolve"
start=$(date +%s)
run 0 "$KSEARCH" evolve --op rmsnorm --budget 80 --archive "$E" --profile-share 0 --sanitize-share 0.5 \
	--log "$TMP/evolve.jsonl"
echo "  evolve: $(($(date +%s) - start)) s; $(grep '^sanitizer:' "$TMP/out" | tr '\n' ' ')"
out_has "new bests are checked in at most 50% of the GPU time"
out_has " checked, 0 failed"
python3 - "$TMP/evolve.jsonl" <<'PY' || fail "evolve: expected sanitizer events, every check clean"
import json, sys
events = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
checks = [e for e in events if e["event"] == "sanitizer"]
assert checks, "no sanitizer event in the log"
assert all(e["status"] == "clean" for e in checks), checks
assert not [e for e in events if e["event"] in ("sanitizer_off", "sanitizer_failed")], "the sanitizer stopped or failed"
print("  evolve: %d checks, %.1f s each on average" % (len(checks), sum(e["seconds"] for e in checks) / len(checks)))
PY
# the best a run ends with may still wait for its check (the queue is not saved; the next run takes it)
run 0 "$KSEARCH" export-best --op rmsnorm --archive "$E" -o "$TMP/evolve-best"
best=$(sed -n 's/.*exported candidate #\([0-9]*\).*/\1/p' "$TMP/out" | head -n 1)
[ -n "$best" ] || fail "export-best named no candidate"
run 0 "$KSEARCH" archive show "$best" --op rmsnorm --archive "$E" --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=(d.get("sanitizer") or {}).get("status", "not checked"); print("  evolve best #%s: sanitizer %s" % (d.get("id"), s)); assert s in ("clean", "not checked"), s' "$TMP/out" ||
	fail "evolve: the best #$best failed its check and is still the best"
echo "ok: $n hostile candidates failed as expected; clean ones clean; #100 demoted and refused; evolve checked its bests"
done_ok
