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
		"$good" "$TMP/$1.cu" "$2" "$3" || fail "test setup: '$2' not in good.cu"
	echo "$TMP/$1.cu"
}

f=$(variant json '"launch": [' '"launch": [,')
run 3 "$KSEARCH" compile "$f" --op rmsnorm
err_has "json.cu:3:"
err_has "malformed JSON in the ksearch block"

f=$(variant axis '"grid": [' '"grid": ["num_rowz", ')
run 3 "$KSEARCH" compile "$f" --op rmsnorm
err_has "unknown name 'num_rowz'"

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
err_has "unknown argument 'bogus'"

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
run 1 "$KSEARCH" compile "$good" --op rmsnorm --arch sm_12
err_has "sm_12"

# a missing CUDA toolkit: NVRTC cannot find the headers
run 1 env CUDA_PATH=/nonexistent/cuda "$KSEARCH" compile "$good" --op rmsnorm
err_has "/nonexistent/cuda"
done_ok
