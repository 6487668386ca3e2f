#!/usr/bin/env bash
# Every kind of bad input to `ksearch compile` gets an error naming the problem.
. "$(dirname "$0")/lib.sh"

good="$TMP/good.cu"
cat >"$good" <<'CU'
/* ksearch
{ "params": {"THREADS": [128, 256]},
  "launch": [ {"kernel": "rms", "grid": ["num_rows"], "block": ["THREADS"],
               "args": ["x", "weight", "eps", "y", "num_rows"]} ] }
*/
#include <cuda_bf16.h>
extern "C" __global__ void rms(const __nv_bfloat16 *x, const __nv_bfloat16 *w, float eps,
                               __nv_bfloat16 *y, int rows)
{
	int r = blockIdx.x;
	if (r < rows && threadIdx.x == 0) y[r] = x[r];
}
CU
# the op's names, so the test follows the shipped rmsnorm definition
python3 - "$good" <<'PY' || fail "cannot adapt the test kernel to operators/rmsnorm"
import json, sys
op = json.load(open("operators/rmsnorm/op.json"))
ins, outs = list(op["inputs"]), list(op["outputs"])
rows = [a for a, s in op["axes"].items() if s["type"] == "var"][0]
src = open(sys.argv[1]).read()
args = json.dumps(ins + outs + [rows])
src = src.replace('["x", "weight", "eps", "y", "num_rows"]', args).replace('["num_rows"]', json.dumps([rows]))
open(sys.argv[1], "w").write(src)
PY
run 0 "$KSEARCH" compile "$good" --op rmsnorm

variant() { # variant NAME FROM TO: a copy of good.cu with FROM replaced by TO
	python3 -c 'import sys; s=open(sys.argv[1]).read(); assert sys.argv[3] in s, sys.argv[3]; open(sys.argv[2],"w").write(s.replace(sys.argv[3], sys.argv[4], 1))' \
		"$good" "$TMP/$1.cu" "$2" "$3" || fatal "test setup: '$2' not in good.cu"
	echo "$TMP/$1.cu"
}

f=$(variant json '"launch": [' '"launch": [,')
run 3 "$KSEARCH" compile "$f" --op rmsnorm
out_has "verdict:     contract_error"
out_has "json.cu:3:"
out_has "malformed JSON in the ksearch block"

f=$(variant axis '"grid": [' '"grid": ["num_rowz", ')
run 3 "$KSEARCH" compile "$f" --op rmsnorm
out_has "unknown name 'num_rowz'"

f=$(variant div '"block": ["THREADS"]' '"block": ["THREADS/(THREADS-THREADS)"]')
run 3 "$KSEARCH" compile "$f" --op rmsnorm
out_has "contract_error"
out_has "division by zero"

f=$(variant big '"block": ["THREADS"]' '"block": ["9223372036854775807*THREADS"]')
run 3 "$KSEARCH" compile "$f" --op rmsnorm
out_has "overflow"

f=$(variant kernel '"kernel": "rms"' '"kernel": "rms_fast"')
run 3 "$KSEARCH" compile "$f" --op rmsnorm
out_has "contract_error"
out_has "names kernel 'rms_fast', but the source defines no such"

f=$(variant arg '"args": [' '"args": ["bogus", ')
run 3 "$KSEARCH" compile "$f" --op rmsnorm
out_has "unknown argument 'bogus'"

run 2 "$KSEARCH" compile "$good" --op rmsnorm --param THREADS=100
err_has "100 is not among THREADS's values [128, 256]"
run 2 "$KSEARCH" compile "$good" --op rmsnorm --param BLOCKS=1
err_has "no param 'BLOCKS'"

f=$(variant global 'if (r < rows' 'calls++;
	if (r < rows')
python3 -c 'import sys; p=sys.argv[1]; s=open(p).read(); open(p,"w").write(s.replace("extern \"C\"", "__device__ int calls;\nextern \"C\"", 1))' "$f"
run 3 "$KSEARCH" compile "$f" --op rmsnorm
out_has "refused"
out_has "mutable global 'calls'"

f=$(variant nvrtc 'y[r] = x[r];' 'y[r] = x[r] + undefined_name;')
run 3 "$KSEARCH" compile "$f" --op rmsnorm
out_has "compile_error"
out_has "nvrtc.cu(11): error"
out_has "undefined_name"

run 1 "$KSEARCH" compile "$TMP/missing.cu" --op rmsnorm
err_has "missing.cu: No such file or directory"
run 1 "$KSEARCH" compile "$good" --op nope
err_has "unknown operator 'nope'"
run 2 "$KSEARCH" compile "$good"
err_has "--op NAME is required"
run 2 "$KSEARCH" compile "$good" --op rmsnorm --arch sm_12
err_has "--arch sm_12: unknown architecture 'sm_12' (known: sm_70"
run 2 "$KSEARCH" compile "$good" --op rmsnorm --arch foo
err_has "(see \`ksearch compile --help\`)"

# what is not a candidate file at all is exit 1, whatever it is (issue 14: a folder was 3)
run 1 "$KSEARCH" compile "$TMP" --op rmsnorm
err_has "$TMP: is a folder, not a file"
# unbounded input is refused at the limit, without reading on or running out of memory: the file
# is there, its bytes cannot be a candidate, so that is the candidate's contract_error (issue 23)
for dev in /dev/zero /dev/urandom; do
	run 3 timeout 20 "$KSEARCH" compile "$dev" --op rmsnorm
	out_has "$dev: larger than the limit of 1 MiB (KS_CANDIDATE_MAX_BYTES"
done
head -c 1048577 /dev/zero | tr '\0' ' ' >"$TMP/big.cu"
run 3 "$KSEARCH" compile "$TMP/big.cu" --op rmsnorm
out_has "big.cu: larger than the limit of 1 MiB"
printf 'a\0b' >"$TMP/nul.cu"
run 3 "$KSEARCH" compile "$TMP/nul.cu" --op rmsnorm
out_has "nul.cu:1: byte offset 1: a NUL byte"

# --json prints JSON on every outcome (issue 14): verdicts as reports, failures as an error object
json_is() { # json_is PYTHON: the last run's stdout parses as JSON j, and PYTHON's asserts hold
	checks=$((checks + 1))
	python3 -c "import json, sys; j = json.load(open(sys.argv[1])); $1" "$TMP/out" \
		|| fail "stdout is not the JSON expected ($1)"
}
: >"$TMP/empty.cu"
run 3 "$KSEARCH" compile "$TMP/empty.cu" --op rmsnorm --json
json_is 'assert j["verdict"] == "contract_error" and "no `/* ksearch" in j["evidence"] and j["file"].endswith("empty.cu"), j'
for v in json axis arg div; do
	run 3 "$KSEARCH" compile "$TMP/$v.cu" --op rmsnorm --json
	json_is 'assert j["verdict"] == "contract_error" and j["evidence"], j'
done
run 3 "$KSEARCH" compile "$TMP/json.cu" --op rmsnorm --json --all-params
json_is 'assert isinstance(j, list) and j[0]["verdict"] == "contract_error", j'
run 3 "$KSEARCH" compile "$TMP/nvrtc.cu" --op rmsnorm --json
json_is 'assert j["verdict"] == "compile_error" and "undefined_name" in j["evidence"], j'
run 1 "$KSEARCH" compile "$TMP/missing.cu" --op rmsnorm --json
json_is 'assert j["exit_code"] == 1 and "No such file" in j["error"] and j["command"] == "compile", j'
run 3 "$KSEARCH" compile /dev/zero --op rmsnorm --json
json_is 'assert j["verdict"] == "contract_error" and "1 MiB" in j["evidence"], j'
run 1 "$KSEARCH" compile "$good" --op nope --json
json_is 'assert j["exit_code"] == 1 and "unknown operator" in j["error"], j'
run 2 "$KSEARCH" compile "$good" --op rmsnorm --json --arch foo
json_is 'assert j["exit_code"] == 2 and "--arch foo" in j["error"], j'
run 2 "$KSEARCH" compile "$good" --op rmsnorm --json --bogus
json_is 'assert j["exit_code"] == 2 and "unknown option" in j["error"], j'
run 2 "$KSEARCH" compile "$good" --op rmsnorm --json --param THREADS=100
json_is 'assert j["exit_code"] == 2 and "THREADS" in j["error"], j'
run 2 "$KSEARCH" compile --json
json_is 'assert j["exit_code"] == 2, j'
# after "--", --json is a file name, not the flag
run 1 "$KSEARCH" compile --op rmsnorm -- --json
[ ! -s "$TMP/out" ] || fail "a file named --json turned JSON on"

# a missing CUDA toolkit: NVRTC cannot find the headers
run 1 env CUDA_PATH=/nonexistent/cuda "$KSEARCH" compile "$good" --op rmsnorm
err_has "/nonexistent/cuda"
done_ok
