#!/usr/bin/env bash
# evolve and check: usage errors everywhere; a clear refusal without a GPU.
. "$(dirname "$0")/lib.sh"

run 2 "$KSEARCH" evolve
err_has "--op NAME is required"
run 2 "$KSEARCH" evolve --op gqa --budget 0
err_has "--budget 0: expected a number of evaluations > 0"
# numbers are checked against their type and range, naming the flag (issue 14)
run 2 "$KSEARCH" evolve --op gqa --budget 99999999999999999999
err_has "--budget 99999999999999999999: out of range (expected a number of evaluations > 0)"
run 2 "$KSEARCH" evolve --op gqa --seed -1
err_has "--seed -1: expected a non-negative integer"
run 2 "$KSEARCH" evolve --op gqa --seed 18446744073709551616
err_has "--seed 18446744073709551616: out of range"
run 2 "$KSEARCH" evolve --op gqa --jobs 300
err_has "--jobs 300: expected 1 to 256 compile processes"
run 2 "$KSEARCH" evolve --op gqa --knob-share 1.5
err_has "--knob-share 1.5: expected a share from 0 to 1"
run 2 "$KSEARCH" evolve --op gqa --budget 5 --budget 6
err_has "option '--budget' given twice"
run 2 "$KSEARCH" evolve --op gqa --time-cap 2x
err_has "--time-cap 2x: expected milliseconds"
run 2 "$KSEARCH" evolve --op gqa --explore -1
err_has "--explore -1: expected a number >= 0"
run 2 "$KSEARCH" check operators/gqa/seeds/split_kv.cu --op gqa --gpu -1
err_has "--gpu -1: expected a GPU number"
run 2 "$KSEARCH" evolve --op gqa --time 8x
err_has "--time 8x: expected a duration such as 8h"
run 2 "$KSEARCH" evolve --op gqa --target -1
err_has "--target -1"
run 2 "$KSEARCH" evolve --op gqa --gpus 0,x
err_has "--gpus 0,x"
run 2 "$KSEARCH" evolve --op gqa --explore 0 --exploit 0 --recent 0
err_has "cannot all be 0"
run 2 "$KSEARCH" evolve --op gqa --buget 3
err_has "did you mean '--budget'?"
run 1 "$KSEARCH" evolve --op gqz
err_has "did you mean 'gqa'"
run 2 "$KSEARCH" check operators/gqa/seeds/split_kv.cu --op gqa --workload nope
err_has "--workload nope: not a benchmark workload of gqa"
run 2 "$KSEARCH" check operators/gqa/seeds/split_kv.cu --op gqa --workload b1_kv1
err_has "check workloads always all run"
run 2 "$KSEARCH" check operators/gqa/seeds/split_kv.cu --op gqa --param SPLITS=3
err_has "3 is not among SPLITS's values"

# the LLM settings: checked before any GPU work, the key never echoed
run 2 env -u KSEARCH_LLM_URL -u KSEARCH_LLM_MODEL "$KSEARCH" evolve --op gqa --temperature 0.5
err_has "--temperature needs an LLM endpoint: give --llm-url and --llm-model"
run 2 "$KSEARCH" evolve --op gqa --llm-url http://127.0.0.1:9/v1 --llm-model m --temperature 3
err_has "--temperature 3: expected a temperature from 0 to 2"
run 2 env -u KSEARCH_LLM_MODEL "$KSEARCH" evolve --op gqa --llm-url http://127.0.0.1:9/v1
err_has "no LLM model: give --llm-model or set KSEARCH_LLM_MODEL"
run 2 "$KSEARCH" evolve --op gqa --llm-url http://127.0.0.1:9/v1 --llm-model unpriced-model --llm-budget-usd 5
err_has "--llm-budget-usd needs the price of model 'unpriced-model'"
run 2 "$KSEARCH" evolve --op gqa --llm-url http://127.0.0.1:9/v1 --llm-model m --llm-provider openia
err_has "openai"
run 2 "$KSEARCH" evolve --op gqa --llm-url http://127.0.0.1:9/v1 --llm-model m --llm-concurrency 0
err_has "--llm-concurrency 0: expected 1 to 64 requests"
run 2 env KSEARCH_API_KEY=sk-secret-usage-key "$KSEARCH" evolve --op gqa --llm-url ftp://x --llm-model m
[ -z "$(grep -F sk-secret-usage-key "$TMP/out" "$TMP/err")" ] || fail "the key was printed"
run 0 "$KSEARCH" evolve --help
out_has "--llm-url URL"
out_has "KSEARCH_API_KEY"
out_has "ksearch archive prompts"
# the knob mutator and the default compile processes are taught there
out_has "--knob-share F"
out_has "/* ksearch:unroll */"
out_has "8 per GPU"

if ! nvidia-smi -L >/dev/null 2>&1; then
	run 3 "$KSEARCH" evolve --op gqa --archive "$TMP/ar"
	err_has "no NVIDIA driver"
	err_has "ksearch doctor"
	[ ! -e "$TMP/ar" ] || fail "evolve created an archive without a GPU"
	# no GPU is exit 3 however the GPUs are named (issue 14: --gpus all was a usage error)
	for gpus in all 0 0,1; do
		run 3 "$KSEARCH" evolve --op gqa --archive "$TMP/ar" --gpus "$gpus"
		err_has "no NVIDIA driver"
	done
	run 1 "$KSEARCH" check operators/gqa/seeds/split_kv.cu --op gqa
	err_has "needs an NVIDIA GPU"
	# a file that is not there is named before anything about the GPU (issue 14)
	run 1 "$KSEARCH" check /nonexistent.cu --op gqa
	err_has "/nonexistent.cu: No such file or directory"
	! grep -q driver "$TMP/err" || fail "check spoke of the driver before the missing file"
	run 1 "$KSEARCH" check "$TMP" --op gqa
	err_has "is a folder, not a file"
	# static verdicts without a GPU; what compiled ok is said to be unchecked, and the run fails
	printf '/* ksearch\n{ "launch": [ ] }\n*/\n' >"$TMP/nolaunch.cu"
	run 1 "$KSEARCH" check "$TMP/nolaunch.cu" operators/gqa/seeds/split_kv.cu --op gqa
	out_has "verdict: contract_error"
	out_has "compiled ok for sm_90a; not verified or timed"
	err_has "1 candidate compiled ok for sm_90a but could not be verified or timed"
	run 3 "$KSEARCH" check "$TMP/nolaunch.cu" --op gqa
	out_has "verdict: contract_error"
	run 1 "$KSEARCH" check operators/gqa/seeds/split_kv.cu --op gqa --json
	python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["verdict"] is None and "driver" in r["not_run"] and r["descriptors"], r' "$TMP/out" \
		|| fail "check --json without a GPU"
	run 1 "$KSEARCH" check /nonexistent.cu --op gqa --json
	python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["exit_code"] == 1 and "nonexistent" in r["error"], r' "$TMP/out" \
		|| fail "check --json on a missing file"
fi
done_ok
