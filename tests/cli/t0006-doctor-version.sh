#!/usr/bin/env bash
# `ksearch version` and `ksearch doctor`, with and without a GPU.
. "$(dirname "$0")/lib.sh"

run 0 "$KSEARCH" version
out_has "ksearch 0."
out_has "nvrtc   1"
out_has "lmdb"
# the MPI the binary runs on, or that it has none (issue 27)
if ldd "$KSEARCH" 2>/dev/null | grep -q libmpi; then
	checks=$((checks + 1))
	grep -Eq "^mpi     (Open MPI|MPICH)" "$TMP/out" || fail "version names no MPI library though the binary links one"
else
	out_has "mpi     none: built without MPI"
fi

if nvidia-smi -L >/dev/null 2>&1; then
	run 0 "$KSEARCH" doctor
	out_has "ok    driver"
	out_has "ok    gpu 0"
	out_has "compute capability"
	run 0 "$KSEARCH" version
	out_has "libcuda.so.1 found"
else
	run 3 "$KSEARCH" doctor
	out_has "ok    toolkit"
	out_has "ok    nvrtc"
	out_has "FAIL  driver"
	out_has "fix: install the NVIDIA driver"
	out_has "ok    operators  gqa"
	run 0 "$KSEARCH" version
	out_has "driver  not found"
fi
# --json for both (issue 14), on every outcome
run 0 "$KSEARCH" version --json
python3 - "$TMP/out" <<'PY' || fail "version --json"
import json, sys
v = json.load(open(sys.argv[1]))
assert v["ksearch"].startswith("0.") and v["nvrtc"].split(".")[0].isdigit(), v
assert "lmdb" in v["libs"]["lmdb"].lower() and v["libs"]["jansson"], v
assert v["driver"] or "libcuda" in v["driver_error"], v
assert "mpi" in v and (v["mpi"] is None or v["mpi"].startswith(("Open MPI", "MPICH"))), v
PY
run 2 "$KSEARCH" version extra --json
python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["exit_code"] == 2, j' "$TMP/out" || fail "version --json usage error"
code=3
nvidia-smi -L >/dev/null 2>&1 && code=0
run $code "$KSEARCH" doctor --json
python3 - "$TMP/out" $code <<'PY' || fail "doctor --json"
import json, sys
d, code = json.load(open(sys.argv[1])), int(sys.argv[2])
checks = {c["check"]: c for c in d["checks"]}
assert checks["toolkit"]["ok"] and checks["nvrtc"]["ok"] and checks["operators"]["ok"], d
assert d["exit_code"] == code and d["problems"] == (0 if code == 0 else 1), d
if code:
    assert not checks["driver"]["ok"] and checks["driver"]["fix"], d
PY
run 1 env CUDA_PATH=/nonexistent/cuda "$KSEARCH" doctor --json --archive /proc/ksearch-none/x
python3 - "$TMP/out" <<'PY' || fail "doctor --json with problems"
import json, sys
d = json.load(open(sys.argv[1]))
bad = {c["check"]: c for c in d["checks"] if not c["ok"]}
assert "toolkit" in bad and "archive" in bad and "CUDA_PATH" in bad["toolkit"]["fix"], d
assert d["exit_code"] == 1 and d["problems"] >= 2, d
PY
run 1 env CUDA_PATH=/nonexistent/cuda "$KSEARCH" doctor
out_has "FAIL  toolkit"
out_has "set CUDA_PATH"
run 1 "$KSEARCH" doctor --archive /proc/version
out_has "not a writable folder"
# a folder that does not exist is fine only when it can be made (issue 14); the check leaves nothing
nogpu=3
nvidia-smi -L >/dev/null 2>&1 && nogpu=0
run $nogpu "$KSEARCH" doctor --archive "$TMP/new/archive"
out_has "ok    archive    $TMP/new/archive (will be created on the first search)"
[ -z "$(ls -A "$TMP" | grep -v -e '^out$' -e '^err$')" ] || fail "doctor left something in $TMP: $(ls -A "$TMP")"
run 1 "$KSEARCH" doctor --archive /proc/ksearch-none/archive
out_has "FAIL  archive    /proc/ksearch-none/archive does not exist and cannot be created in /proc"
out_lacks "will be created"
run 1 "$KSEARCH" doctor --archive /proc/version/archive
out_has "FAIL  archive    /proc/version/archive: Not a directory"
# LLM settings refused before any request: the fix names what is wrong, not the flags given (issue 14)
run 4 "$KSEARCH" doctor --llm-url notaurl --llm-model m
out_has "FAIL  llm        --llm-url 'notaurl': expected an http:// or https:// URL"
out_has "fix: give --llm-url the endpoint's base URL, up to the API version"
out_lacks "--llm-model"
run 4 env -u KSEARCH_LLM_MODEL "$KSEARCH" doctor --llm-url http://127.0.0.1:9/v1
out_has "fix: give --llm-model NAME (or set KSEARCH_LLM_MODEL)"
out_lacks "fix: give --llm-url"
done_ok
