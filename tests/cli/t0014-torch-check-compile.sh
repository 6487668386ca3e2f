#!/usr/bin/env bash
# tools/torch-check.py --compile-only: the NVRTC half of the GPU cross-check (tools/cuda_ctypes.py,
# NVRTC by ctypes), which needs no GPU and no torch: seeds and a reference.cu to cubins with
# every launched kernel in them; NVRTC's log for a compile error; a kernel the cubin lacks; a PTX
# target; and the usage errors.  (tests/gpu/t0266-torch-check.sh runs the rest on a GPU.)
. "$(dirname "$0")/lib.sh"

run 0 python3 tools/torch-check.py operators/gqa operators/gqa/seeds/split_kv.cu --compile-only --arch sm_90a
out_has "SPLITS=1 WARPS=4 UNROLL=1 HSPLIT=1: "
out_has "bytes of cubin, kernels gqa_split_merge, gqa_split_partial"
out_has "1 passed, 0 failed"
run 0 python3 tools/torch-check.py operators/rmsnorm operators/rmsnorm/seeds/row_warp.cu --compile-only --arch sm_80 \
	--all-params
out_has "ROWS_PER_BLOCK=2: "
out_has "4 passed, 0 failed"
# a block's "start" is the default params, as in ksearch (mla_mma_ws begins at its measured best)
run 0 python3 tools/torch-check.py operators/mla_decode operators/mla_decode/seeds/mla_mma_ws.cu --compile-only --arch sm_90a
out_has "CHUNK=32 CTAS=264 TILE=32 STAGES=2 WARPS=4 MINB=2 PART=1 SPLIT=1 SEGP=64 QREG=0 HINT=1 MDEPTH=8 KSPL=2: "
out_has "kernels mla_mma_ws_merge, mla_mma_ws_partial"
run 0 python3 tools/torch-check.py operators/rmsnorm operators/rmsnorm/reference.cu --compile-only --arch compute_90
out_has "bytes of PTX, kernels rmsnorm_reference"

# failures are the candidate's: exit 1, with the reason
run 1 python3 tools/torch-check.py operators/rmsnorm tests/gpu/hostile/compile_error.cu --compile-only --arch sm_90a
out_has "COMPILE ERROR: nvrtcCompileProgram failed: NVRTC_ERROR_COMPILATION"
out_has 'compile_error.cu(51): error: identifier "inv_rsm" is undefined'
out_has "0 passed, 1 failed"
run 1 python3 tools/torch-check.py operators/rmsnorm tests/gpu/hostile/missing_kernel.cu --compile-only --arch sm_90a
out_has "MISSING kernel(s) rmsnorm_v2"
run 1 python3 tools/torch-check.py operators/rmsnorm operators/rmsnorm/reference.cu --compile-only --arch sm_13
out_has "NVRTC_ERROR_INVALID_OPTION"

# usage: --arch is needed (there is no GPU to ask)
run 2 python3 tools/torch-check.py operators/rmsnorm operators/rmsnorm/reference.cu --compile-only
err_has "--compile-only needs --arch"

# the module's own self-check
run 0 python3 tools/cuda_ctypes.py operators/rmsnorm/reference.cu --arch sm_90a --kernel rmsnorm_reference
out_has "kernel rmsnorm_reference: present"
run 1 python3 tools/cuda_ctypes.py operators/rmsnorm/reference.cu --arch sm_90a --kernel rmsnorm_v2
out_has "kernel rmsnorm_v2: missing"
done_ok
