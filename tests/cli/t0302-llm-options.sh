#!/usr/bin/env bash
# The LLM options evolve and doctor share (--llm-extra, --llm-header, --llm-timeout,
# --max-tokens, --temperature and their environment variables): every bad value is a
# usage error naming the flag or variable, found before any GPU work; the key comes
# from the environment only and shows neither in messages nor in the process list.
. "$(dirname "$0")/lib.sh"

nokey() { env -u KSEARCH_API_KEY -u OPENAI_API_KEY -u ANTHROPIC_API_KEY -u KSEARCH_LLM_EXTRA \
	-u KSEARCH_LLM_HEADERS -u KSEARCH_LLM_MAX_TOKENS -u KSEARCH_LLM_TIMEOUT "$@"; }
ep=(--llm-url http://127.0.0.1:9/v1 --llm-model m)

for cmd in evolve doctor; do
	args=()
	[ "$cmd" = evolve ] && args=(--op gqa)
	run 2 nokey "$KSEARCH" "$cmd" "${args[@]}" "${ep[@]}" --llm-extra '{"reasoning_effort": }'
	err_has "--llm-extra: not valid JSON (line 1, column"
	run 2 nokey "$KSEARCH" "$cmd" "${args[@]}" "${ep[@]}" --llm-extra '["high"]'
	err_has "--llm-extra: expected a JSON object"
	run 2 nokey "$KSEARCH" "$cmd" "${args[@]}" "${ep[@]}" --llm-extra '{"model": "other"}'
	err_has "the field \"model\" is ksearch's to set (--llm-model)"
	run 2 nokey "$KSEARCH" "$cmd" "${args[@]}" "${ep[@]}" --llm-extra '{"temperature": 1}'
	err_has "(--temperature)"
	run 2 nokey "$KSEARCH" "$cmd" "${args[@]}" "${ep[@]}" --llm-header 'X-Title ksearch'
	err_has "--llm-header: expected 'Name: value', and there is no colon"
	run 2 nokey "$KSEARCH" "$cmd" "${args[@]}" "${ep[@]}" --llm-header 'X-Title: a' --llm-header 'x-title: b'
	err_has "the header x-title is given twice"
	run 2 nokey "$KSEARCH" "$cmd" "${args[@]}" "${ep[@]}" --llm-header 'Content-Type: text/plain'
	err_has "the header Content-Type is ksearch's to set"
	run 2 nokey "$KSEARCH" "$cmd" "${args[@]}" "${ep[@]}" --llm-timeout 15x
	err_has "--llm-timeout 15x: expected a duration such as 15m"
	run 2 nokey "$KSEARCH" "$cmd" "${args[@]}" "${ep[@]}" --max-tokens 0
	err_has "--max-tokens 0: expected a number of tokens from 1 to 1000000"
	run 2 nokey env KSEARCH_LLM_EXTRA='{oops' "$KSEARCH" "$cmd" "${args[@]}" "${ep[@]}"
	err_has "KSEARCH_LLM_EXTRA: not valid JSON"
	run 2 nokey env KSEARCH_LLM_HEADERS='no colon' "$KSEARCH" "$cmd" "${args[@]}" "${ep[@]}"
	err_has "KSEARCH_LLM_HEADERS: expected 'Name: value'"
	run 2 nokey env KSEARCH_LLM_MAX_TOKENS=lots "$KSEARCH" "$cmd" "${args[@]}" "${ep[@]}"
	err_has "KSEARCH_LLM_MAX_TOKENS=lots: expected a number of tokens"
	run 2 nokey env KSEARCH_LLM_TIMEOUT=soon "$KSEARCH" "$cmd" "${args[@]}" "${ep[@]}"
	err_has "KSEARCH_LLM_TIMEOUT=soon: expected a duration"
	# the LLM options need an endpoint
	run 2 nokey env -u KSEARCH_LLM_URL -u KSEARCH_LLM_MODEL "$KSEARCH" "$cmd" "${args[@]}" --llm-extra '{}'
	err_has "--llm-extra needs an LLM endpoint"
done

# the key header: the key comes from the environment only (evolve refuses at once;
# doctor reports it as the LLM check's problem)
run 2 nokey "$KSEARCH" evolve --op gqa "${ep[@]}" --llm-header 'Authorization: Bearer sk-on-the-command-line'
err_has "--llm-header Authorization: the API key goes there, and it comes from the environment only"
[ -z "$(grep -F sk-on-the-command-line "$TMP/out" "$TMP/err")" ] || fail "a header value was echoed"
run 2 nokey "$KSEARCH" evolve --op gqa "${ep[@]}" --llm-provider anthropic --llm-header 'x-api-key: k'
err_has "--llm-header x-api-key"
# Anthropic's documented thinking rules, before any request
thinking='{"thinking": {"type": "enabled", "budget_tokens": 16000}}'
run 2 nokey "$KSEARCH" evolve --op gqa "${ep[@]}" --llm-provider anthropic --llm-extra "$thinking" --temperature 0.5
err_has "--temperature 0.5: Anthropic's thinking (--llm-extra) is not compatible with a temperature change"
run 2 nokey "$KSEARCH" evolve --op gqa "${ep[@]}" --llm-provider anthropic --llm-extra "$thinking" --max-tokens 16000
err_has "thinking.budget_tokens 16000 must be less than --max-tokens 16000"

# good settings pass the checks: evolve gets as far as the GPU (exit 3 without one)
if ! nvidia-smi -L >/dev/null 2>&1; then
	run 3 nokey "$KSEARCH" evolve --op gqa "${ep[@]}" --archive "$TMP/ar" --llm-timeout 20m \
		--llm-extra '{"reasoning_effort": "high"}' --llm-header 'X-Title: ksearch' --max-tokens 64000
	err_has "no NVIDIA driver"
fi

# the key and a secret header from the environment: in no message, not in the process list
key=sk-ps-test-3e8b1f02
secret=hdr-ps-secret-55aa
python3 - >"$TMP/slow.port" <<'PY' &
import http.server, socket, sys, time
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        time.sleep(3)
        self.send_response(500); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.handle_request()
PY
slow=$!
for _ in $(seq 100); do [ -s "$TMP/slow.port" ] && break; sleep 0.05; done
env KSEARCH_API_KEY=$key KSEARCH_LLM_HEADERS="X-Gateway-Key: $secret" "$KSEARCH" doctor \
	--llm-url "http://127.0.0.1:$(cat "$TMP/slow.port")/v1" --llm-model m >"$TMP/out" 2>"$TMP/err" &
doctor=$!
sleep 1
ps -ww -eo args >"$TMP/ps"
wait $doctor
wait $slow
grep -q "ksearch doctor" "$TMP/ps" || fail "doctor was not in the process list while it waited"
! grep -qF -e "$key" -e "$secret" "$TMP/ps" || fail "the key or a header value is in the process list"
! grep -qF -e "$key" -e "$secret" "$TMP/out" "$TMP/err" || fail "the key or a header value was printed"
grep -q "HTTP 500" "$TMP/out" || fail "doctor did not report the server's answer: $(cat "$TMP/out")"
checks=$((checks + 4))
done_ok
