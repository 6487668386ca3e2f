# wheels.sh - sourced by the GPU tests of the exports: skip (77) without a GPU or a torch that
# sees it, then install flashinfer-bench and its light dependencies, ninja, setuptools and
# wheel from ${KS_WHEELS:-build-wheels} (tools/fetch-wheels.sh made it on a machine with
# network; the GPU machine needs none) into $TMP/site, first on PYTHONPATH and PATH.
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "SKIP: no NVIDIA GPU (nvidia-smi -L)"
	exit 77
fi
if ! python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	echo "SKIP: python3 has no torch that sees a GPU"
	exit 77
fi
wheels=${KS_WHEELS:-build-wheels}
if ! ls "$wheels"/flashinfer_bench-*.whl >/dev/null 2>&1; then
	echo "SKIP: no wheels in $wheels (run tools/fetch-wheels.sh where there is network, carry $wheels)"
	exit 77
fi
python3 -m pip install -q --disable-pip-version-check --no-index --find-links "$wheels" --no-deps \
	--target "$TMP/site" flashinfer-bench pydantic pydantic-core annotated-types typing-extensions \
	typing-inspection docstring-parser filelock safetensors ninja setuptools wheel >"$TMP/pip.log" 2>&1 ||
	fatal "pip could not install from $wheels: $(tail -5 "$TMP/pip.log")"
export PYTHONPATH="$TMP/site${PYTHONPATH:+:$PYTHONPATH}" PATH="$TMP/site/bin:$PATH"
export FIB_CACHE_PATH="$TMP/fib-cache" TORCH_EXTENSIONS_DIR="$TMP/torch-ext"
# the kernels' architecture as TORCH_CUDA_ARCH_LIST spells it: 9.0 -> 9.0a.  The fixtures' exports
# carry sm_90a cubins (the arch their records name), which only a GPU of compute capability 9.0 runs.
cap=$(python3 -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())')
if [ "$cap" != 9.0 ]; then
	echo "SKIP: the fixtures' exports carry sm_90a cubins; this GPU's compute capability is $cap"
	exit 77
fi
export TORCH_CUDA_ARCH_LIST=9.0a
arch="sm_$(echo "$TORCH_CUDA_ARCH_LIST" | tr -d .)"
python3 -c 'import torch, flashinfer_bench; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(), "flashinfer_bench", flashinfer_bench.__version__)' ||
	fatal "flashinfer_bench does not import"
echo "building for $arch (TORCH_CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST)"
