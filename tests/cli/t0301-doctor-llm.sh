#!/usr/bin/env bash
# `ksearch doctor --llm-url ... --llm-model ...` against tools/fake-llm:
# the answer time and tokens when it works; the error and its fix when not;
# the key never printed.
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || { echo "SKIP: python3 is needed for tools/fake-llm"; exit 77; }
cat >"$TMP/script.json" <<'JSON'
[{"reply": "OK"}, {"reply": "OK"}, {"status": 429, "retry_after": 1}, {"malformed": true}]
JSON
python3 tools/fake-llm --require-key --port 0 --port-file "$TMP/port" --script "$TMP/script.json" \
	--record "$TMP/record.jsonl" >"$TMP/fake.out" 2>&1 &
fake=$!
trap 'kill $fake 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.05; done
url="http://127.0.0.1:$(cat "$TMP/port")/v1"
key=sk-doctor-test-7f3a9c
# exit codes here: 0 with a GPU, 3 without one (the LLM check itself passed)
expect_gpu_code() { if nvidia-smi -L >/dev/null 2>&1; then echo "$1"; else echo 3; fi; }

run "$(expect_gpu_code 0)" env KSEARCH_API_KEY=$key "$KSEARCH" doctor --llm-url "$url" --llm-model fake
out_has "ok    llm        fake at $url (openai) answered in"
out_has "prompt +"
out_lacks "$key"

run "$(expect_gpu_code 0)" env KSEARCH_API_KEY=$key "$KSEARCH" doctor --llm-url "$url" --llm-model fake --llm-provider anthropic
out_has "(anthropic) answered in"

run 4 env KSEARCH_API_KEY=$key "$KSEARCH" doctor --llm-url "$url" --llm-model fake
out_has "FAIL  llm"
out_has "HTTP 429"
out_has "rate-limiting"
out_lacks "$key"

run 4 env KSEARCH_API_KEY=$key "$KSEARCH" doctor --llm-url "$url" --llm-model fake
out_has "FAIL  llm"
out_has "check --llm-provider"

run 4 env KSEARCH_API_KEY= OPENAI_API_KEY= "$KSEARCH" doctor --llm-url "$url" --llm-model fake
out_has "set KSEARCH_API_KEY or OPENAI_API_KEY"

run 4 env KSEARCH_API_KEY=$key "$KSEARCH" doctor --llm-url "$url" --llm-model missing-model
out_has "check --llm-model"

run 4 env KSEARCH_API_KEY=$key "$KSEARCH" doctor --llm-url "http://127.0.0.1:9/v1" --llm-model fake
out_has "is the server running"

run 4 "$KSEARCH" doctor --llm-url "$url"
out_has "FAIL  llm"
out_has "--llm-model"

! grep -q "$key" "$TMP/record.jsonl" || fail "the key was recorded by the endpoint"
grep -q "redacted" "$TMP/record.jsonl" || fail "no auth header reached the endpoint"
done_ok
