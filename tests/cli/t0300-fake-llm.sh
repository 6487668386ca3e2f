#!/usr/bin/env bash
# tools/fake-llm: both protocols, request checks, scripted answers and faults, the
# recording (auth redacted), edit_params against a real seed, and a clean SIGTERM stop.
. "$(dirname "$0")/lib.sh"

FAKE=tools/fake-llm
[ -x "$FAKE" ] || fail "$FAKE is not executable"

# start_fake NAME ARGS...: start the server in the background, wait for its port file;
# sets PID and PORT
start_fake() {
	local name=$1; shift
	rm -f "$TMP/$name.port"
	"$FAKE" --port 0 --port-file "$TMP/$name.port" "$@" >"$TMP/$name.stdout" 2>"$TMP/$name.stderr" &
	PID=$!
	for _ in $(seq 100); do
		[ -s "$TMP/$name.port" ] && break
		kill -0 "$PID" 2>/dev/null || fail "fake-llm $name exited at start: $(cat "$TMP/$name.stderr")"
		sleep 0.05
	done
	[ -s "$TMP/$name.port" ] || fail "fake-llm $name wrote no port file"
	PORT=$(cat "$TMP/$name.port")
	checks=$((checks + 1))
}

# stop_fake NAME: SIGTERM, then it must exit 0 within 5 s
stop_fake() {
	kill -TERM "$PID"
	for _ in $(seq 100); do
		kill -0 "$PID" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$PID" 2>/dev/null; then
		kill -KILL "$PID"
		fail "fake-llm $1 did not stop on SIGTERM"
	fi
	wait "$PID"
	local rc=$?
	[ "$rc" = 0 ] || fail "fake-llm $1 exited $rc after SIGTERM"
	checks=$((checks + 1))
}

# a bad script is refused at start with the step named
echo '[{"reply": "x"}, {"reply": "y", "bogus": 1}]' > "$TMP/bad.json"
run 2 "$FAKE" --script "$TMP/bad.json"
err_has "step 1: unknown key 'bogus'"
echo '[{"kernel": "nope.cu"}]' > "$TMP/bad.json"
run 2 "$FAKE" --script "$TMP/bad.json"
err_has "kernel file"
echo '[{"reply": "x", "status": 500}]' > "$TMP/bad.json"
run 2 "$FAKE" --script "$TMP/bad.json"
err_has "step 0:"

mkdir -p "$TMP/kernels"
printf '/* ksearch {"params": {"X": [1]}, "launch": []} */\nextern "C" __global__ void k() {}\n' > "$TMP/kernels/k.cu"
cat > "$TMP/script.json" <<'EOF'
[
  {"edit_params": {"SPLITS": 4, "WARPS": 8}},
  {"reply": "hello from the script"},
  {"edit": {"search": "#define SPLITS 8", "replace": "#define SPLITS 16"}},
  {"kernel": "k.cu"},
  {"status": 429, "retry_after": 1},
  {"status": 500},
  {"status": 529, "retry_after": "Wed, 21 Oct 2015 07:28:00 GMT"},
  {"sleep": 1, "reply": "slow-a"},
  {"sleep": 1, "reply": "slow-b"},
  {"truncated": true},
  {"truncated": "connection", "reply": "cut"},
  {"malformed": true},
  {"no_code": true},
  {"status": 401, "echo_key": true},
  {"reply": "counted", "usage": {"prompt_tokens": 7, "completion_tokens": 3}, "finish": "length"},
  {"edit_params": "auto"}
]
EOF

start_fake main --require-key --script "$TMP/script.json" --kernels "$TMP/kernels" --record "$TMP/rec.jsonl"
grep -qx "fake-llm listening on http://127.0.0.1:$PORT" "$TMP/main.stdout" ||
	fail "no listening line: $(cat "$TMP/main.stdout")"

run 0 python3 - "$PORT" operators/gqa/seeds/split_kv.cu "$TMP/kernels/k.cu" <<'PY'
import http.client, json, re, sys, threading, time, urllib.error, urllib.request

port, seed_path, kernel_path = sys.argv[1], sys.argv[2], sys.argv[3]
base = "http://127.0.0.1:%s" % port
KEY = "sk-test-secret-0123"
seed = open(seed_path).read()

def call(path, body=None, auth=True, proto="openai", method=None, raw=None):
    headers = {"Content-Type": "application/json"}
    if proto == "anthropic":
        headers["anthropic-version"] = "2023-06-01"
        if auth:
            headers["x-api-key"] = KEY
    elif auth:
        headers["Authorization"] = "Bearer " + KEY
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()

def oa(user, model="fake-model", **kw):
    b = {"model": model, "messages": [{"role": "system", "content": "You write CUDA."},
                                      {"role": "user", "content": user}],
         "temperature": 0.7, "max_tokens": 4096}
    b.update(kw)
    return b

def an(user, model="fake-model", **kw):
    b = {"model": model, "system": "You write CUDA.", "messages": [{"role": "user", "content": user}],
         "max_tokens": 4096, "temperature": 0.5}
    b.update(kw)
    return b

def oa_ok(st, h, body):
    assert st == 200, (st, body)
    j = json.loads(body)
    assert j["object"] == "chat.completion" and j["id"].startswith("chatcmpl-"), j
    assert isinstance(j["created"], int) and j["model"] == "fake-model", j
    c = j["choices"][0]
    assert c["index"] == 0 and c["message"]["role"] == "assistant" and c["finish_reason"] in ("stop", "length"), j
    u = j["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] and u["prompt_tokens"] > 0, u
    return c["message"]["content"], j

def an_ok(st, h, body):
    assert st == 200, (st, body)
    j = json.loads(body)
    assert j["type"] == "message" and j["role"] == "assistant" and j["id"].startswith("msg_"), j
    assert j["model"] == "fake-model" and j["content"][0]["type"] == "text", j
    assert j["stop_reason"] in ("end_turn", "max_tokens"), j
    assert set(j["usage"]) >= {"input_tokens", "output_tokens"}, j
    return j["content"][0]["text"], j

def oa_err(st, h, body, status):
    assert st == status, (st, body)
    e = json.loads(body)["error"]
    assert isinstance(e["message"], str) and "type" in e and "code" in e, e
    assert KEY not in body.decode(), body
    return e

def an_err(st, h, body, status):
    assert st == status, (st, body)
    j = json.loads(body)
    assert j["type"] == "error" and isinstance(j["error"]["message"], str) and j["error"]["type"], j
    assert KEY not in body.decode(), body
    return j["error"]

def apply_edits(text, parent):
    blocks = re.findall(r"<<<<<<< SEARCH\n(.*?)\n=======\n(.*?)>>>>>>> REPLACE", text, re.S)
    assert blocks, text
    for s, r in blocks:
        assert parent.count(s) == 1, ("SEARCH not unique", s)
        parent = parent.replace(s, r.rstrip("\n"))
    return parent, len(blocks)

def params(src):
    a = src.index("/* ksearch") + len("/* ksearch")
    return json.loads(src[a:src.index("*/", a)])["params"]

# -- checks that consume no step ------------------------------------------------
e = oa_err(*call("/v1/chat/completions", oa("hi"), auth=False), 401)
assert "API key" in e["message"], e
e = an_err(*call("/v1/messages", an("hi"), auth=False, proto="anthropic"), 401)
assert e["type"] == "authentication_error", e
e = oa_err(*call("/v1/chat/completions", oa("hi", model="missing-model")), 404)
assert e["code"] == "model_not_found" and "missing-model" in e["message"], e
e = an_err(*call("/v1/messages", an("hi", model="missing-model"), proto="anthropic"), 404)
assert e["type"] == "not_found_error", e
b = an("hi"); del b["max_tokens"]
e = an_err(*call("/v1/messages", b, proto="anthropic"), 400)
assert "max_tokens" in e["message"], e
e = an_err(*call("/v1/messages", an("hi", messages=[{"role": "system", "content": "x"}]), proto="anthropic"), 400)
assert "system" in e["message"], e
e = oa_err(*call("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]}), 400)
assert "model" in e["message"], e
e = oa_err(*call("/v1/chat/completions", oa("hi", messages=[])), 400)
e = oa_err(*call("/v1/chat/completions", oa("hi", messages=[{"role": "user"}])), 400)
assert e["param"] == "messages[0].content", e
e = oa_err(*call("/v1/chat/completions", raw=b"{not json"), 400)
e = oa_err(*call("/v1/nothing", oa("hi")), 404)
st, h, body = call("/v1/models")
assert st == 200 and json.loads(body)["object"] == "list", body
st, h, body = call("/v1/models", proto="anthropic")
assert st == 200 and json.loads(body)["data"][0]["type"] == "model", body

# -- step 0: edit_params on the gqa split_kv seed (OpenAI, content as text parts) --
user = [{"type": "text", "text": "Improve this kernel.\n\n```cuda\n" + seed + "```\n"},
        {"type": "text", "text": "Answer with SEARCH/REPLACE edits."}]
text, j = oa_ok(*call("/v1/chat/completions", oa(user)))
assert "```" not in text, text
child, n = apply_edits(text, seed)
assert n == 1, text   # SPLITS and WARPS share a line: one edit
p, p0 = params(child), params(seed)
assert p["SPLITS"] == [4, 1, 2, 8, 16, 32] and p["WARPS"] == [8, 4], p
assert p["UNROLL"] == p0["UNROLL"] and p["HSPLIT"] == p0["HSPLIT"], p
assert child.splitlines()[2:] == seed.splitlines()[2:], "lines outside the params changed"
assert j["usage"]["prompt_tokens"] == max(1, len("You write CUDA.\n" + user[0]["text"] + "\n" + user[1]["text"]) // 4), j

# -- step 1: a literal reply (Anthropic, no /v1, content as blocks) --------------
text, j = an_ok(*call("/messages", an([{"type": "text", "text": "hi"}]), proto="anthropic"))
assert text == "hello from the script" and j["stop_reason"] == "end_turn", j

# -- step 2: an edit as given ----------------------------------------------------
text, _ = oa_ok(*call("/chat/completions", oa("x")))
child, n = apply_edits(text, seed)
assert "#define SPLITS 16" in child and "#define SPLITS 8\n" not in child, text

# -- step 3: a whole kernel in a cuda fence ---------------------------------------
text, _ = an_ok(*call("/v1/messages", an("x"), proto="anthropic"))
m = re.search(r"```cuda\n(.*?)```", text, re.S)
assert m and m.group(1) == open(kernel_path).read(), text

# -- steps 4-6: error statuses with Retry-After ----------------------------------
st, h, body = call("/v1/chat/completions", oa("x"))
e = oa_err(st, h, body, 429)
assert h.get("Retry-After") == "1" and e["code"] == "rate_limit_exceeded", (h, e)
st, h, body = call("/v1/messages", an("x"), proto="anthropic")
e = an_err(st, h, body, 500)
assert e["type"] == "api_error" and "Retry-After" not in h, (h, e)
st, h, body = call("/v1/messages", an("x"), proto="anthropic")
e = an_err(st, h, body, 529)
assert e["type"] == "overloaded_error" and h.get("Retry-After") == "Wed, 21 Oct 2015 07:28:00 GMT", (h, e)

# -- steps 7-8: two slow answers in flight together, each step taken once ---------
got = []
def slow():
    got.append(oa_ok(*call("/v1/chat/completions", oa("x")))[0])
t0 = time.time()
ts = [threading.Thread(target=slow) for _ in range(2)]
for t in ts: t.start()
for t in ts: t.join()
took = time.time() - t0
assert sorted(got) == ["slow-a", "slow-b"], got
assert 1.0 <= took < 1.9, took  # one after the other would take 2 s

# -- step 9: truncated body (valid HTTP, half the JSON) ---------------------------
st, h, body = call("/v1/chat/completions", oa("x"))
assert st == 200 and body.startswith(b'{"id": "chatcmpl-') and int(h["Content-Length"]) == len(body), (h, body)
try:
    json.loads(body); raise SystemExit("truncated body parsed as JSON")
except ValueError:
    pass

# -- step 10: connection cut mid-body ----------------------------------------------
try:
    call("/v1/chat/completions", oa("x"))
    raise SystemExit("the cut connection gave a whole answer")
except http.client.IncompleteRead:
    pass

# -- step 11: malformed ------------------------------------------------------------
st, h, body = call("/v1/messages", an("x"), proto="anthropic")
assert st == 200, st
try:
    json.loads(body); raise SystemExit("malformed body parsed as JSON")
except ValueError:
    pass

# -- step 12: no code --------------------------------------------------------------
text, _ = oa_ok(*call("/v1/chat/completions", oa("x")))
assert "```" not in text and "SEARCH" not in text and len(text) > 20, text

# -- step 13: a server that echoes the key -------------------------------------------
st, h, body = call("/v1/chat/completions", oa("x"))
assert st == 401 and KEY in json.loads(body)["error"]["message"], body

# -- step 14: fixed usage, finish length --------------------------------------------
text, j = an_ok(*call("/v1/messages", an("x"), proto="anthropic"))
assert j["usage"] == {"input_tokens": 7, "output_tokens": 3} and j["stop_reason"] == "max_tokens", j

# -- step 15 (last, repeats): edit_params auto, through a repair turn -----------------
msgs = [{"role": "user", "content": "old parent, ignored"},
        {"role": "assistant", "content": "an answer"},
        {"role": "user", "content": "Fix it.\n```cuda\n" + seed + "```"}]
seen = []
for i in range(3):
    text, _ = oa_ok(*call("/v1/chat/completions", oa("x", messages=msgs)))
    child, n = apply_edits(text, seed)
    assert n == 1, text
    p = params(child)
    diff = [k for k in p if p[k] != p0[k]]
    assert len(diff) == 1, (text, diff)
    k = diff[0]
    first = p0[k][0]
    assert p[k][0] == min(v for v in p0[k] if v > first) and sorted(p[k]) == sorted(p0[k]), (k, p[k])
    seen.append(k)
assert len(set(seen)) == 3, seen
# a step-consuming request with no parent: a polite failure, no edits
text, _ = oa_ok(*call("/v1/chat/completions", oa("no code here")))
assert text.startswith("fake-llm could not edit the params:") and "SEARCH" not in text, text
print("client checks ok")
PY
out_has "client checks ok"

stop_fake main

# the recording: one line per request, auth present but redacted, the key nowhere
run 0 python3 - "$TMP/rec.jsonl" <<'PY'
import json, sys
raw = open(sys.argv[1]).read()
assert "sk-test-secret-0123" not in raw, "the key is in the recording"
recs = [json.loads(l) for l in raw.splitlines()]
assert len(recs) == 13 + 16 + 3, len(recs)  # 13 refused or models, 16 steps, 3 repeats
for r in recs:
    assert {"seq", "time", "path", "headers", "body", "status"} <= set(r), r
assert sorted(r["seq"] for r in recs) == list(range(1, len(recs) + 1)), "seq is not 1..n"
recs.sort(key=lambda r: r["seq"])  # lines are written as answers go out, seq is arrival order
first = recs[0]
assert first["status"] == 401 and "authorization" not in first["headers"], first
ok = [r for r in recs if r["status"] == 200 and r["path"].endswith("completions")]
assert ok and all(r["headers"]["authorization"] == "<redacted:%d chars>" % len("Bearer sk-test-secret-0123")
                  for r in ok), ok[0]["headers"]
an = [r for r in recs if r["path"].endswith("messages") and "x-api-key" in r["headers"]]
assert an and all(r["headers"]["x-api-key"] == "<redacted:19 chars>" for r in an), an[0]["headers"]
assert any(r["body"] == "{not json" for r in recs), "raw body not recorded"
steps = [r["step"] for r in recs if r["step"] is not None]
assert sorted(steps) == list(range(16)) + [15] * 3, steps
assert recs[2]["body"]["model"] == "missing-model" and recs[2]["status"] == 404
print("record ok")
PY
out_has "record ok"

# default script (no --script): edit_params auto, one param to its neighbour; like a local
# server, the default fake wants no key (no auth header at all is fine, a malformed one is not)
start_fake default
run 0 python3 - "$PORT" operators/rmsnorm/seeds/row_block.cu <<'PY'
import json, sys, urllib.error, urllib.request
seed = open(sys.argv[2]).read()
body = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "```cu\n" + seed + "\n```"}]}
def post(path, headers):
    req = urllib.request.Request("http://127.0.0.1:%s/v1/%s" % (sys.argv[1], path), data=json.dumps(body).encode(),
                                 headers=headers)
    try:
        return 200, json.load(urllib.request.urlopen(req, timeout=10))
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
st, j = post("messages", {"anthropic-version": "2023-06-01"})
assert st == 200, j
text = j["content"][0]["text"]
assert '"THREADS": [256, 128, 512, 1024]' in text.split("=======")[1], text
st, j = post("chat/completions", {"Content-Type": "application/json"})
assert st == 200 and j["choices"][0]["message"]["content"], j
st, j = post("chat/completions", {"Authorization": "Basic xyz"})
assert st == 401, (st, j)
print(text)
PY
out_has "Set the first value of THREADS to 256"
stop_fake default

# the strict modes: each behaves like one kind of real service
cat > "$TMP/modes.py" <<'PY'
import json, sys, urllib.error, urllib.request
port, mode, seed_path = sys.argv[1], sys.argv[2], sys.argv[3]
# "gateway": the server wants the header X-Gateway-Key, sent unless a check says otherwise
GATEWAY = {"X-Gateway-Key": "gw-secret-123"} if sys.argv[4:] == ["gateway"] else {}
seed = open(seed_path).read()
USER = "Improve this kernel.\n\n```cuda\n" + seed + "```\n"

def post(body, proto="openai", headers=None):
    h = {"Content-Type": "application/json"}
    if proto == "anthropic":
        h["anthropic-version"] = "2023-06-01"
    h.update(GATEWAY if headers is None else headers)
    path = "messages" if proto == "anthropic" else "chat/completions"
    req = urllib.request.Request("http://127.0.0.1:%s/v1/%s" % (port, path), data=json.dumps(body).encode(), headers=h)
    try:
        return 200, json.load(urllib.request.urlopen(req, timeout=10))
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)

def oa(**kw):
    b = {"model": "m", "messages": [{"role": "user", "content": USER}]}
    b.update(kw)
    return b

def an(**kw):
    b = {"model": "m", "max_tokens": 4096, "messages": [{"role": "user", "content": USER}]}
    b.update(kw)
    return b

def edits_apply(text):
    assert "<<<<<<< SEARCH" in text and "DECOY_FROM_THINKING" not in text, text

if mode == "openai-reasoning":
    st, j = post(oa(max_tokens=100))
    e = j["error"]
    assert st == 400 and e == {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                          "Use 'max_completion_tokens' instead.", "type": "invalid_request_error",
                               "param": "max_tokens", "code": "unsupported_parameter"}, j
    st, j = post(oa(max_completion_tokens=4000, temperature=0.8))
    e = j["error"]
    assert st == 400 and e["param"] == "temperature" and e["code"] == "unsupported_value", j
    assert e["message"] == ("Unsupported value: 'temperature' does not support 0.8 with this model. "
                            "Only the default (1) value is supported."), e
    st, j = post(oa(max_completion_tokens=4000, temperature=1))
    assert st == 200, j
    u = j["usage"]
    assert u["completion_tokens_details"]["reasoning_tokens"] == 300, u
    assert u["completion_tokens"] == 300 + len(j["choices"][0]["message"]["content"]) // 4, u
    assert u["prompt_tokens_details"]["cached_tokens"] == (u["prompt_tokens"] // 2 // 128) * 128, u
    edits_apply(j["choices"][0]["message"]["content"])
    # reasoning spends the budget first: nothing is left for the answer
    st, j = post(oa(max_completion_tokens=200))
    c = j["choices"][0]
    assert st == 200 and c["message"]["content"] == "" and c["finish_reason"] == "length", j
    assert j["usage"]["completion_tokens"] == 200, j
elif mode == "legacy-max-tokens":
    st, j = post(oa(max_completion_tokens=4000))
    assert st == 400 and j["param"] is None and j["code"] == 400 and "max_completion_tokens" in j["message"], j
    assert "Extra inputs are not permitted" in j["message"], j
    st, j = post(oa(max_tokens=4000, temperature=0.8))
    assert st == 200, j
elif mode in ("think", "think-no-open"):
    st, j = post(oa(max_tokens=4000))
    text = j["choices"][0]["message"]["content"]
    head, sep, answer = text.partition("\n</think>\n\n")
    assert sep and head.startswith("<think>\n") == (mode == "think"), text
    assert "DECOY_FROM_THINKING" in head and "```cuda" in head and "<<<<<<< SEARCH" in head, head
    edits_apply(answer)
    st, j = post(an(), proto="anthropic")
    assert st == 200 and "</think>" in j["content"][0]["text"], j
elif mode in ("reasoning-content", "reasoning"):
    st, j = post(oa(max_tokens=4000))
    m = j["choices"][0]["message"]
    field = "reasoning_content" if mode == "reasoning-content" else "reasoning"
    assert "DECOY_FROM_THINKING" in m[field] and "<<<<<<< SEARCH" in m[field], m
    assert set(m) & {"reasoning_content", "reasoning"} == {field}, m
    edits_apply(m["content"])
elif mode == "length":
    st, j = post(oa(max_tokens=3000))
    c = j["choices"][0]
    assert c["finish_reason"] == "length" and j["usage"]["completion_tokens"] == 3000, j
    st, j = post(an(), proto="anthropic")
    assert j["stop_reason"] == "max_tokens" and j["usage"]["output_tokens"] == 4096, j
elif mode == "plain":
    # Anthropic thinking: the documented rules, then thinking blocks before the text
    st, j = post(an(thinking={"type": "enabled", "budget_tokens": 4096}), proto="anthropic")
    assert st == 400 and "max_tokens" in j["error"]["message"], j
    st, j = post(an(thinking={"type": "enabled", "budget_tokens": 500}), proto="anthropic")
    assert st == 400 and "1024" in j["error"]["message"], j
    st, j = post(an(thinking={"type": "enabled", "budget_tokens": 2048}, temperature=0.5), proto="anthropic")
    assert st == 400 and "temperature" in j["error"]["message"], j
    st, j = post(an(thinking={"type": "enabled", "budget_tokens": 2048}), proto="anthropic")
    assert st == 200 and [b["type"] for b in j["content"]] == ["thinking", "redacted_thinking", "text"], j
    assert "DECOY_FROM_THINKING" in j["content"][0]["thinking"], j
    edits_apply(j["content"][2]["text"])
    # any mode honours the output limit
    st, j = post(oa(max_tokens=5))
    assert j["choices"][0]["finish_reason"] == "length" and len(j["choices"][0]["message"]["content"]) == 20, j
    # a gateway that wants its own header
    assert GATEWAY, "run plain mode against a gateway"
    st, j = post(oa(max_tokens=4000), headers={})
    assert st == 401 and "X-Gateway-Key" in j["error"]["message"], j
    st, j = post(oa(max_tokens=4000), headers={"X-Gateway-Key": "wrong"})
    assert st == 401, j
    st, j = post(oa(max_tokens=4000), headers={"X-Gateway-Key": "gw-secret-123"})
    assert st == 200, j
print("mode %s ok" % mode)
PY
for mode in openai-reasoning legacy-max-tokens think think-no-open reasoning-content reasoning length; do
	start_fake "$mode" --mode "$mode"
	run 0 python3 "$TMP/modes.py" "$PORT" "$mode" operators/gqa/seeds/split_kv.cu
	out_has "mode $mode ok"
	stop_fake "$mode"
done
start_fake gateway --require-header 'X-Gateway-Key: gw-secret-123' --record "$TMP/gateway.jsonl"
run 0 python3 "$TMP/modes.py" "$PORT" plain operators/gqa/seeds/split_kv.cu gateway
out_has "mode plain ok"
stop_fake gateway
grep -q "gw-secret-123" "$TMP/gateway.jsonl" && fail "the gateway header's value was recorded"
checks=$((checks + 1))
done_ok
