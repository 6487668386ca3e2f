#!/usr/bin/env bash
# An export carries its kernels as the cubin of the arch the search timed them on, so a device
# of another arch cannot run them: the launcher must say so (cudaErrorNoKernelImageForDevice,
# named in NAME.h), not run something else.  rmsnorm's fixture best, its record's arch made sm_80
# (whose code an sm_90 GPU does not run), exported, built with tests/gpu/export_harness.cu and
# run: the first call fails with that error (on its first run on an H200 the launcher said
# cudaErrorInvalidDeviceFunction: the driver loads the cubin, then finds no kernel in it for the
# GPU).  The same best exported with the fixture's own arch runs (t0210 checks its outputs).
#
# Needs a GPU of compute capability 9.x and nvcc (exit 77 = skipped otherwise).  Env: KSEARCH,
# KS_SOURCE_ROOT; optional NVCC, CUDA_PATH.
if ! command -v nvidia-smi >/dev/null 2>&1; then
	echo "SKIP: no nvidia-smi on PATH, so no NVIDIA GPU to run kernels on"
	exit 77
fi
if ! gpus=$(nvidia-smi -L 2>&1) || [ -z "$gpus" ]; then
	echo "SKIP: 'nvidia-smi -L' lists no GPU: ${gpus:-no output}"
	exit 77
fi
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' ')
case "$cap" in
	9.*) ;;
	*)
		echo "SKIP: the GPU's compute capability is '$cap'; the fixture's kernels are built for 9.0"
		exit 77
		;;
esac
nvcc=${NVCC:-$(command -v nvcc || echo "${CUDA_PATH:-/usr/local/cuda}/bin/nvcc")}
if ! [ -x "$nvcc" ]; then
	echo "SKIP: no nvcc (looked on PATH and in \${CUDA_PATH:-/usr/local/cuda}/bin; set NVCC) to build the exports"
	exit 77
fi
. "$(dirname "$0")/../cli/lib.sh"
echo "$gpus" | head -n 1

# the harness's workload file: the tolerances and one check workload
python3 - >"$TMP/workloads" <<'PY' || fail "cannot write the harness's workload file"
import json
spec = json.load(open("operators/rmsnorm/op.json"))["ksearch"]
for name, t in spec["tolerances"].items():
    print("tol", name, t["atol"], t["rtol"])
print("r64", 64, 0, 1)
PY
sed 's/"arch": "sm_90a"/"arch": "sm_80"/' tests/fixtures/export-rmsnorm.json >"$TMP/sm80.json"
for arch in sm_80 sm_90a; do
	fixture=tests/fixtures/export-rmsnorm.json
	[ "$arch" = sm_80 ] && fixture="$TMP/sm80.json"
	run 0 "$KSEARCH" archive import "$fixture" --archive "$TMP/ar-$arch"
	run 0 "$KSEARCH" export-best --op rmsnorm --archive "$TMP/ar-$arch" -o "$TMP/$arch" --name ks_export
	grep -q "NVRTC compiled them for $arch" "$TMP/$arch/ks_export.cu" || fail "the export's cubin is not for $arch"
	tr '\n' ' ' <"$TMP/$arch/ks_export.h" | sed 's/ *\* */ /g' |
		grep -q "cudaErrorNoKernelImageForDevice when the device does not run $arch code" ||
		fail "ks_export.h does not name the error of another arch"
	checks=$((checks + 2))
	run 0 "$nvcc" -std=c++17 -arch=sm_90a -DKS_OP_RMSNORM -Ioperators/rmsnorm -I"$TMP/$arch" \
		tests/gpu/export_harness.cu "$TMP/$arch/ks_export.cu" -o "$TMP/$arch/harness"
done
run 1 "$TMP/sm_80/harness" "$TMP/workloads"
err_has "no kernel image is available for execution on the device"
run 0 "$TMP/sm_90a/harness" "$TMP/workloads"
out_has "all ok"
done_ok
