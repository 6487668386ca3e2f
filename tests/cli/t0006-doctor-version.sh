#!/usr/bin/env bash
# `ksearch version` and `ksearch doctor`, with and without a GPU.
. "$(dirname "$0")/lib.sh"

run 0 "$KSEARCH" version
out_has "ksearch 0."
out_has "nvrtc   1"
out_has "lmdb"

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
done_ok
