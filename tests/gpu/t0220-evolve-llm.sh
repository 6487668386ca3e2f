#!/usr/bin/env bash
# The LLM mutator on a GPU: `ksearch evolve --op gqa` against tools/fake-llm
# on the same machine, with the script in tests/gpu/llm/ (param edits,
# a canned kernel (a seed with another param list), an unusable kernel, and injected faults: 429 with
# Retry-After, 500, a malformed and a truncated body, no code, an edit that
# does not apply, a slow answer).  The archive must end with verified
# candidates of mutation "llm", strategy statistics that moved, every
# fault survived and recorded in the event log, and the key nowhere.
#
# Needs a GPU and python3 (exit 77 = skipped otherwise).  Env: KSEARCH,
# KS_SOURCE_ROOT; optional KS_LLM_BUDGET (evaluations, default 120),
# KS_GPU_LOG_DIR (the run's output, log, archive listing and prompts are
# copied there).
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "SKIP: no NVIDIA GPU (nvidia-smi lists none)"
	exit 77
fi
command -v python3 >/dev/null || { echo "SKIP: python3 is needed for tools/fake-llm"; exit 77; }
. "$(dirname "$0")/../cli/lib.sh"

key=sk-gpu-llm-test-4d2f8a61c9
# the canned kernel the script answers with once: mma_tiles with another param list
mkdir -p "$TMP/kernels"
sed '2s/.*/{ "params": {"SPLITS": [16, 8, 32], "WARPS": [4, 2], "STAGES": [2, 3]},/' \
	operators/gqa/seeds/mma_tiles.cu >"$TMP/kernels/mma_tiles_wide.cu"
grep -q '"SPLITS": \[16, 8, 32\]' "$TMP/kernels/mma_tiles_wide.cu" || fail "mma_tiles.cu no longer has its params on line 2"
python3 tools/fake-llm --port 0 --port-file "$TMP/port" --script tests/gpu/llm/script.json --kernels "$TMP/kernels" \
	--record "$TMP/requests.jsonl" >"$TMP/fake.out" 2>&1 &
fake=$!
trap 'kill $fake 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 200); do [ -s "$TMP/port" ] && break; sleep 0.05; done
[ -s "$TMP/port" ] || fail "fake-llm did not start: $(cat "$TMP/fake.out")"
url="http://127.0.0.1:$(cat "$TMP/port")/v1"
keep() { [ -n "${KS_GPU_LOG_DIR:-}" ] && mkdir -p "$KS_GPU_LOG_DIR" && cp "$@" "$KS_GPU_LOG_DIR/" 2>/dev/null; true; }

start=$(date +%s)
run 0 env KSEARCH_API_KEY=$key "$KSEARCH" evolve --op gqa --archive "$TMP/ar" --budget "${KS_LLM_BUDGET:-120}" \
	--llm-url "$url" --llm-model fake --llm-concurrency 2 --llm-rewrite-every 6 --log "$TMP/run.jsonl"
cp "$TMP/out" "$TMP/evolve.out"
keep "$TMP/evolve.out" "$TMP/run.jsonl" "$TMP/requests.jsonl"
echo "evolve took $(($(date +%s) - start)) s"
out_has "LLM: fake at $url (openai)"
out_has "stopped (budget)"
out_has "LLM use in this run:"
grep -E "^(stopped|LLM|archive|best|time)" "$TMP/evolve.out"

run 0 "$KSEARCH" archive stats --archive "$TMP/ar"
out_has "LLM         "
out_has "completion tokens"
run 0 "$KSEARCH" archive ls --archive "$TMP/ar" --json --limit 100000
cp "$TMP/out" "$TMP/ls.json"
run 0 "$KSEARCH" archive prompts --archive "$TMP/ar" --json --all
cp "$TMP/out" "$TMP/prompts.json"
run 0 "$KSEARCH" archive prompts --archive "$TMP/ar" --all
cp "$TMP/out" "$TMP/prompts.txt"
keep "$TMP/ls.json" "$TMP/prompts.json" "$TMP/prompts.txt"
cat "$TMP/prompts.txt"

python3 - "$TMP/ls.json" "$TMP/prompts.json" "$TMP/run.jsonl" <<'PY' || fail "the archive does not show the LLM at work"
import collections, json, sys
records = json.load(open(sys.argv[1]))
prompts = json.load(open(sys.argv[2]))
events = [json.loads(l) for l in open(sys.argv[3]) if l.strip()]
by = collections.Counter((r.get("mutation"), r.get("verdict")) for r in records)
print("records by (mutation, verdict):", dict(sorted(by.items())))
llm_ok = [r for r in records if r.get("mutation") in ("llm", "repair") and r.get("verdict") == "ok"]
assert llm_ok, "no verified candidate of mutation llm"
for r in llm_ok:
    assert r.get("prompt_id"), "an LLM candidate without its prompt"
    assert r["llm"]["prompt_tokens"] > 0 and r["llm"]["model"] == "fake"
assert any(r.get("mutation") == "tune" for r in records), "no tuner variant of an LLM kernel"
assert any(r.get("mutation") in ("llm", "repair") and r.get("verdict") == "contract_error" for r in records), \
    "the unusable kernel was not recorded as a contract error"
best = max((r for r in llm_ok), key=lambda r: r["fitness"])
print("best LLM candidate: id %d family %s fitness %.3f" % (best["id"], best["family"], best["fitness"]))
stats = collections.Counter()
for p in prompts:
    for k, v in p["stats"].items():
        if isinstance(v, int):
            stats[k] += v
print("strategy statistics summed:", dict(stats))
assert stats["uses"] > 0 and stats["children"] > 0 and stats["ok"] > 0 and stats["answer_errors"] > 0
kinds = collections.Counter(e["event"] for e in events)
print("events:", dict(sorted(kinds.items())))
for k in ("llm_request", "llm_answer", "llm_child", "llm_error", "answer_error", "repair"):
    assert kinds[k] > 0, "no %s event" % k
PY
checks=$((checks + 1))
# 429 and 500 are retried (the request succeeds later); the malformed and truncated bodies are failures
grep -q '"status": 429' "$TMP/requests.jsonl" || fail "the fake never sent its 429"
grep -q '"status": 500' "$TMP/requests.jsonl" || fail "the fake never sent its 500"

for f in "$TMP/evolve.out" "$TMP/run.jsonl" "$TMP/ls.json" "$TMP/prompts.json"; do
	! grep -qF "$key" "$f" || fail "the API key is in $f"
done
run 0 "$KSEARCH" archive export --archive "$TMP/ar"
out_lacks "$key"
! grep -rqF "$key" "$TMP/ar" || fail "the API key is in the archive's files"
done_ok
