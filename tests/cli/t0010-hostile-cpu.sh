#!/usr/bin/env bash
# Candidates that attack the CPU side (issue 23): nothing in a candidate's
# text may hang, stop or abort `compile`, `check` or a search.  Each class
# in three variants written differently, each run under `timeout` so that a
# regression fails instead of hanging: enumerations past the limits, a long
# mov chain for the taint analysis, many launches, many params, huge
# sources and expressions, bytes that are not UTF-8, NUL bytes; and a
# batch with a bad candidate between two good ones reports all three.
. "$(dirname "$0")/lib.sh"

# gen FILE PYTHON: write a candidate for rmsnorm whose ksearch block is the JSON the Python
# expression `block` (with L, the one launch of kernel k) builds; `head` and `tail` are bytes
# before and after the kernel (after the block)
gen() {
	python3 - "$TMP/$1" "$2" <<'PY'
import json, sys
path, code = sys.argv[1], sys.argv[2]
L = [{"kernel": "k", "grid": ["num_rows"], "block": [32],
      "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]}]
kernel = (b'extern "C" __global__ void k(const float* x, const float* weight, float eps, float* y, '
          b'int num_rows, int hidden) { if (threadIdx.x == 0 && num_rows > 0) y[0] = x[0]; }\n')
env = {"L": L, "json": json, "head": b"", "tail": b"", "block": {"launch": L}, "raw": None}
exec(code, env)
text = env["raw"] if env["raw"] is not None else (
    b"/* ksearch\n" + json.dumps(env["block"]).encode() + b"\n*/\n" + env["head"] + kernel + env["tail"])
open(path, "wb").write(text)
PY
}

# verdict FILE CODE NEEDLE...: `compile` exits CODE within 20 s and says every NEEDLE
verdict() {
	local file=$1 code=$2
	shift 2
	run "$code" timeout 20 "$KSEARCH" compile "$TMP/$file" --op rmsnorm
	for needle in "$@"; do
		out_has "$needle"
	done
}

# --- enumerations: the product of the value lists is bounded where the block is parsed
gen enum1.cu 'block = {"params": {"P%d" % i: list(range(10)) for i in range(20)}, "constraints": ["P0 > 100"], "launch": L}'
verdict enum1.cu 3 "verdict:     contract_error" "KS_CANDIDATE_MAX_COMBINATIONS" "at most 1048576"
gen enum2.cu 'block = {"params": {n: list(range(64)) for n in "ABCDEF"}, "constraints": ["A * B < 0"], "launch": L}'
verdict enum2.cu 3 "more than 1048576 combinations" "up to params.D"
gen enum3.cu 'block = {"params": {"Q%02d" % i: [1, 2] for i in range(32)}, "constraints": ["Q00 / (Q01 - Q01) > 0"], "launch": L}'
verdict enum3.cu 3 "KS_CANDIDATE_MAX_COMBINATIONS"
# within the combinations, the constraints' length times the combinations is bounded too
gen work.cu 'block = {"params": {"P%d" % i: [0, 1] for i in range(20)}, "constraints": [" + ".join("P%d" % i for i in range(20)) + " > 100"] * 4, "launch": L}'
verdict work.cu 3 "KS_CANDIDATE_MAX_CONSTRAINT_WORK"
# at the limits, a candidate none of whose combinations is allowed is judged at once, not hung on
gen enum_limit.cu 'block = {"params": {"P%d" % i: [0, 1] for i in range(20)}, "constraints": ["P0 > 100"], "launch": L}'
verdict enum_limit.cu 3 "verdict:     contract_error" "constraints[0] \"P0 > 100\" does not hold"
run 3 timeout 20 "$KSEARCH" compile "$TMP/enum_limit.cu" --op rmsnorm --all-params --json
# CPU seconds, not wall: a loaded machine (or the sanitizer build beside other work) stretches wall time
cpu=$(python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(int(r.ru_utime + r.ru_stime))' "$KSEARCH" compile "$TMP/enum_limit.cu" --op rmsnorm --all-params --json)
[ "$cpu" -le 8 ] || fail "2^20 combinations took $cpu s of CPU (more than 8)"

# --- the taint analysis over a long chain of movs from a read-only table (was cubic: 800 movs 12 s)
chain() { # chain FILE N STYLE
	python3 - "$@" <<'PY'
import json, sys
path, n, style = sys.argv[1], int(sys.argv[2]), sys.argv[3]
L = [{"kernel": "k", "grid": ["num_rows"], "block": [32],
      "args": ["x", "weight", "eps", "y", "num_rows", "hidden"]}]
if style == "backward":   # each register defined after its use
    steps = ["mov.u64 %%%%ch%d, %%%%ch%d;" % (i, i - 1) for i in range(n, 0, -1)]
elif style == "forward":  # in order, through arithmetic
    steps = ["add.s64 %%%%ch%d, %%%%ch%d, 0;" % (i, i - 1) for i in range(1, n + 1)]
else:                     # alternating cvta and mov, backwards, one asm line each
    steps = [("cvta.const.u64 %%%%ch%d, %%%%ch%d;" if i % 2 else "mov.b64 %%%%ch%d, %%%%ch%d;") % (i, i - 1)
             for i in range(n, 0, -1)]
asm = "\n".join('\t\t"%s\\n\\t"' % s for s in steps)
src = ('__constant__ float table[16];\n'
       'extern "C" __global__ void k(const float* x, const float* weight, float eps, float* y, int num_rows, int hidden) {\n'
       '\tfloat v;\n'
       '\tasm volatile("{\\n\\t.reg .b64 %%ch<' + str(n + 2) + '>;\\n\\t"\n'
       '\t\t"mov.u64 %%ch0, table;\\n\\t"\n' + asm + '\n'
       '\t\t"ld.const.f32 %0, [%%ch' + str(n) + '];\\n\\t}" : "=f"(v));\n'
       '\ty[0] = v;\n}\n')
open(path, "w").write("/* ksearch\n" + json.dumps({"launch": L}) + "\n*/\n" + src)
PY
}
for style in backward forward mixed; do
	chain "$TMP/chain_$style.cu" 20000 "$style"
	start=$(date +%s)
	verdict "chain_$style.cu" 0 "verdict:     ok"
	[ $(($(date +%s) - start)) -le 15 ] || fail "the $style chain took more than 15 s"
done

# --- launches: at most 16 (the worker's), refused as the block is parsed
gen launch1.cu 'block = {"launch": L * 5000}'
verdict launch1.cu 3 "launch: 5000 launches" "KS_CANDIDATE_MAX_LAUNCHES"
gen launch2.cu 'block = {"launch": L * 17}'
verdict launch2.cu 3 "launch: 17 launches; a candidate may make at most 16"
gen launch3.cu 'block = {"launch": [L[0]] + [dict(L[0], pdl=True) for _ in range(499)]}'
verdict launch3.cu 3 "KS_CANDIDATE_MAX_LAUNCHES"
gen args.cu 'block = {"launch": [dict(L[0], args=["x"] * 100000)]}'
verdict args.cu 3 "100000 arguments" "KS_CANDIDATE_MAX_ARGS"

# --- params: at most 32, each with at most 64 values
gen params1.cu 'block = {"params": {"P%d" % i: [1] for i in range(70000)}, "launch": L}'
verdict params1.cu 3 "params: 70000 params" "KS_CANDIDATE_MAX_PARAMS"
gen params2.cu 'block = {"params": {"T%02d" % i: [8] for i in range(33)}, "launch": L}'
verdict params2.cu 3 "33 params; a candidate may have at most 32"
gen params3.cu 'block = {"params": {"TILE": list(range(100000))}, "launch": L}'
verdict params3.cu 3 "params.TILE: 100000 values" "KS_CANDIDATE_MAX_VALUES"

# --- size: the source (1 MiB), one expression (1 KiB)
gen big1.cu 'tail = b"// " + b"x" * (2 << 20) + b"\n"'
verdict big1.cu 3 "larger than the limit of 1 MiB (KS_CANDIDATE_MAX_BYTES"
gen big2.cu 'tail = b"__device__ int f%d() { return 0; }\n" * 1 if False else b"".join(b"__device__ int f%d() { return %d; }\n" % (i, i) for i in range(40000))'
verdict big2.cu 3 "KS_CANDIDATE_MAX_BYTES"
gen big3.cu 'block = {"launch": [dict(L[0], grid=["+".join(["num_rows"] * 50000)])]}'
verdict big3.cu 3 "KS_CANDIDATE_MAX_EXPR_BYTES"

# --- bytes that are not UTF-8: a contract_error naming the line and the byte offset
gen utf1.cu 'head = b"// caf\xe9 au lait\n"'
verdict utf1.cu 3 "utf1.cu:4: byte offset" "byte 0xE9 is not UTF-8"
gen utf2.cu 'head = b"__device__ const char *name = \"\xc0\xaf\";\n\n"'
verdict utf2.cu 3 "utf2.cu:4: byte offset" "byte 0xC0 is not UTF-8"
gen utf3.cu 'block = {"launch": L, "params": {"A": [1]}}; raw = b"/* ksearch\n" + json.dumps(block).encode().replace(b"\"A\"", b"\"A\xed\xa0\x80\"") + b"\n*/\n"'
verdict utf3.cu 3 "utf3.cu:2: byte offset" "byte 0xED is not UTF-8"
run 3 timeout 20 "$KSEARCH" compile "$TMP/utf1.cu" --op rmsnorm --json
python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["verdict"] == "contract_error" and "byte offset" in j["evidence"], j' "$TMP/out" ||
	fail "--json: no contract_error for bytes that are not UTF-8"

# --- NUL bytes
gen nul1.cu 'head = b"// one\0two\n"'
verdict nul1.cu 3 "nul1.cu:4: byte offset" "a NUL byte"
gen nul2.cu 'raw = b"\0/* ksearch {} */\n"'
verdict nul2.cu 3 "nul2.cu:1: byte offset 0: a NUL byte"
gen nul3.cu 'raw = b"/* ksearch\n{\"launch\": [\0]}\n*/\n"'
verdict nul3.cu 3 "nul3.cu:2: byte offset 23: a NUL byte"

# --- a batch: every candidate is reported, the bad ones as contract_error, whatever they are
gen good.cu ''
for bad in nul1 utf2 launch1 enum1; do
	run 1 timeout 60 "$KSEARCH" check "$TMP/good.cu" "$TMP/$bad.cu" "$TMP/good.cu" --op rmsnorm --json
	python3 - "$TMP/out" "$bad" <<'PY' || fail "check good $bad good did not report all three"
import json, sys
j = json.load(open(sys.argv[1]))
assert [e["file"].rsplit("/", 1)[-1] for e in j] == ["good.cu", sys.argv[2] + ".cu", "good.cu"], j
assert j[1]["verdict"] == "contract_error" and j[1]["evidence"], j[1]
assert all(e["verdict"] is None and e["not_run"] for e in (j[0], j[2])), j
PY
done
run 1 timeout 60 "$KSEARCH" check "$TMP/good.cu" "$TMP/utf1.cu" "$TMP/good.cu" --op rmsnorm
[ "$(grep -c '^verdict: contract_error' "$TMP/out")" = 1 ] || fail "the text report lacks the bad one's verdict"
[ "$(grep -c 'compiled ok for' "$TMP/out")" = 2 ] || fail "the text report lacks the good ones"

done_ok
