#!/usr/bin/env bash
# `ksearch doctor --llm-url ... --llm-model ...` against tools/fake-llm: the answer
# time and tokens when it works, and what a user must know before a long run (the
# budget and its field, parameters the endpoint refused, reasoning, cut-offs, the
# key); the error and its fix when not; the key and header values never printed.
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || { echo "SKIP: python3 is needed for tools/fake-llm"; exit 77; }
fakes=()
trap 'for p in "${fakes[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$TMP"' EXIT

# start_fake NAME ARGS...: a fake-llm in the background; sets URL (and REC, its recording)
start_fake() {
	local name=$1; shift
	REC="$TMP/$name.jsonl"
	python3 tools/fake-llm --port 0 --port-file "$TMP/$name.port" --record "$REC" "$@" \
		>"$TMP/$name.out" 2>&1 &
	fakes+=($!)
	for _ in $(seq 100); do [ -s "$TMP/$name.port" ] && break; sleep 0.05; done
	[ -s "$TMP/$name.port" ] || fail "fake-llm $name did not start: $(cat "$TMP/$name.out")"
	URL="http://127.0.0.1:$(cat "$TMP/$name.port")/v1"
}
# exit codes here: 0 with a GPU, 3 without one (the LLM check itself passed)
expect_gpu_code() { if nvidia-smi -L >/dev/null 2>&1; then echo "$1"; else echo 3; fi; }
nokey() { env -u KSEARCH_API_KEY -u OPENAI_API_KEY -u ANTHROPIC_API_KEY "$@"; }
key=sk-doctor-test-7f3a9c

# the README's demo, as written but for the port: a local server, no key anywhere
start_fake demo
run "$(expect_gpu_code 0)" nokey "$KSEARCH" doctor --llm-url "$URL" --llm-model fake
out_has "ok    llm        fake at $URL (openai) answered in"
out_has "no API key (KSEARCH_API_KEY or OPENAI_API_KEY unset): requests carry no credentials"
out_has "up to 32768 tokens an answer (sent as max_completion_tokens), the model's default temperature, 15 min per request"
out_has "reasoning  none seen"
out_has "not cut off (stop reason stop), so a run's answers come whole up to the budget above"
# the model's words are quoted as its reply to the check's question, not as ksearch's verdict
# (issue 26: fake-llm's reply "could not edit the params" read like a failure of the check)
out_has 'reply      "fake-llm could not edit the params: '
out_has "its words to the check's one-word question (a run asks for kernels and reads each answer for one)"
grep '^        answer ' "$TMP/out" | grep -q 'could not' && fail "the answer line quotes the model's words"
! grep -qi '"authorization"' "$REC" || fail "credentials were sent without a key"
checks=$((checks + 1))

# a hosted API that wants a key: the scripted answers and faults
cat >"$TMP/script.json" <<'JSON'
[{"reply": "OK,\nthat is\tall"}, {"reply": "OK"}, {"status": 429, "retry_after": 1}, {"malformed": true}]
JSON
start_fake hosted --require-key --script "$TMP/script.json"
run "$(expect_gpu_code 0)" env KSEARCH_API_KEY=$key "$KSEARCH" doctor --llm-url "$URL" --llm-model fake
out_has "ok    llm        fake at $URL (openai) answered in"
out_has 'reply      "OK, that is all": its words'
out_has "prompt +"
out_has "key from the environment (KSEARCH_API_KEY or OPENAI_API_KEY)"
out_lacks "$key"
run "$(expect_gpu_code 0)" env KSEARCH_API_KEY=$key "$KSEARCH" doctor --llm-url "$URL" --llm-model fake --llm-provider anthropic
out_has "(anthropic) answered in"
out_has "(sent as max_tokens)"
run 4 env KSEARCH_API_KEY=$key "$KSEARCH" doctor --llm-url "$URL" --llm-model fake
out_has "FAIL  llm"
out_has "HTTP 429"
out_has "rate-limiting"
out_lacks "$key"
run 4 env KSEARCH_API_KEY=$key "$KSEARCH" doctor --llm-url "$URL" --llm-model fake
out_has "FAIL  llm"
out_has "check --llm-provider"
run 4 nokey "$KSEARCH" doctor --llm-url "$URL" --llm-model fake
out_has "HTTP 401"
out_has "no API key was sent"
out_has "set KSEARCH_API_KEY or OPENAI_API_KEY to a valid key"
run 4 env KSEARCH_API_KEY=$key "$KSEARCH" doctor --llm-url "$URL" --llm-model missing-model
out_has "check --llm-model"
run 4 env KSEARCH_API_KEY=$key "$KSEARCH" doctor --llm-url "http://127.0.0.1:9/v1" --llm-model fake
out_has "is the server running"
run 4 "$KSEARCH" doctor --llm-url "$URL"
out_has "FAIL  llm"
out_has "--llm-model"
! grep -q "$key" "$REC" || fail "the key was recorded by the endpoint"
grep -q "redacted" "$REC" || fail "no auth header reached the endpoint"
checks=$((checks + 2))

# an OpenAI reasoning model: the temperature is refused, dropped, and doctor says so
start_fake reasoning --mode openai-reasoning
run "$(expect_gpu_code 0)" nokey "$KSEARCH" doctor --llm-url "$URL" --llm-model gpt-5 --temperature 0.8
out_has "adapted    the endpoint refused temperature 0.8 (HTTP 400: Unsupported value: 'temperature' does not support 0.8 with this model."
out_has "requests carry no temperature from now on"
out_has "the model's default temperature"
out_has "reasoning  300 tokens, as the endpoint reports them"
# reasoning spends the budget first: a budget too small is cut off, and that is a problem
run 4 nokey "$KSEARCH" doctor --llm-url "$URL" --llm-model gpt-5 --max-tokens 200
out_has "FAIL  llm        the answer to a one-word question was cut off at 200 tokens (stop reason length, while still reasoning)"
out_has "fix: raise --max-tokens"

# an older server that knows max_tokens only
start_fake legacy --mode legacy-max-tokens
run "$(expect_gpu_code 0)" nokey "$KSEARCH" doctor --llm-url "$URL" --llm-model old
out_has "adapted    the endpoint refused 'max_completion_tokens'"
out_has "goes in 'max_tokens' from now on"
out_has "(sent as max_tokens)"

# open models that think: in the text, or in a field
start_fake think --mode think
run "$(expect_gpu_code 0)" nokey "$KSEARCH" doctor --llm-url "$URL" --llm-model qwen3
out_has "in <think> blocks of the answer text, removed before the answer is read"
out_has "(estimated from its length)"
out_lacks "DECOY_FROM_THINKING"
start_fake rc --mode reasoning-content
run "$(expect_gpu_code 0)" nokey "$KSEARCH" doctor --llm-url "$URL" --llm-model r1
out_has "in the \"reasoning_content\" field, never read as the answer"
# Anthropic thinking, asked for with --llm-extra
run "$(expect_gpu_code 0)" nokey "$KSEARCH" doctor --llm-url "$URL" --llm-model claude --llm-provider anthropic \
	--max-tokens 20000 --llm-extra '{"thinking": {"type": "enabled", "budget_tokens": 10000}}'
out_has "in thinking blocks, never read as the answer"
out_has "extra fields thinking"

# every answer cut off
start_fake length --mode length
run 4 nokey "$KSEARCH" doctor --llm-url "$URL" --llm-model m
out_has "cut off at 32768 tokens (stop reason length)"

# a gateway that wants its own header; the value never printed
secret=gw-doctor-secret-8812
start_fake gateway --require-header "X-Gateway-Key: $secret"
run 4 nokey "$KSEARCH" doctor --llm-url "$URL" --llm-model m
out_has "requires the header 'X-Gateway-Key'"
out_has "--llm-header"
run "$(expect_gpu_code 0)" nokey "$KSEARCH" doctor --llm-url "$URL" --llm-model m \
	--llm-header "X-Gateway-Key: $secret" --llm-header 'X-Title: ksearch' \
	--llm-extra '{"provider": {"order": ["a"]}}'
out_has "ok    llm"
out_has "extra fields provider, headers X-Gateway-Key, X-Title (values not shown)"
out_lacks "$secret"
# the same from the environment, which keeps the value out of the process list
run "$(expect_gpu_code 0)" nokey env KSEARCH_LLM_HEADERS="X-Gateway-Key: $secret" "$KSEARCH" doctor \
	--llm-url "$URL" --llm-model m
out_has "headers X-Gateway-Key (values not shown)"
out_lacks "$secret"
python3 - "$REC" <<'PY' || fail "the gateway's recording"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
ok = [r for r in recs if r["status"] == 200]
assert len(ok) == 2 and ok[0]["body"]["provider"] == {"order": ["a"]}, ok
assert ok[0]["headers"]["x-title"] == "ksearch", ok[0]["headers"]
PY
checks=$((checks + 1))
done_ok
