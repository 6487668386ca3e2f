#!/usr/bin/env bash
# fetch-wheels.sh - download, on a machine with network, the wheels the GPU
# tests of the exports need (tests/gpu/t0260-flashinfer-bench.sh, t0265-torch-export.sh): the
# flashinfer-bench package and what it imports besides torch (and ninja,
# setuptools, wheel to build extensions), for the
# Python versions a GPU machine may have.  Carry the folder to the GPU
# machine; the tests install from it with no network (pip --no-index --target).
#   tools/fetch-wheels.sh [DIR]     (default: build-wheels, which git ignores)
# torch is not fetched (the GPU machine has its own), nor flashinfer-python
# and apache-tvm-ffi: flashinfer-bench imports them only for its FlashInfer
# integration and its TVM-FFI builder, which the tests do not use.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-wheels}
mkdir -p "$dir"
pip=(python3 -m pip download --disable-pip-version-check --no-deps -d "$dir")
# pure Python; setuptools and wheel build the torch export with pip
"${pip[@]}" 'flashinfer-bench==0.1.2' 'pydantic>=2.0,<3' annotated-types typing-extensions \
	typing-inspection docstring-parser filelock setuptools wheel
# pydantic-core as the pydantic above pins it, for each CPython a GPU machine may run
core=$(python3 - "$dir" <<'PY'
import glob, re, sys, zipfile
for w in glob.glob(sys.argv[1] + "/pydantic-2*.whl"):
    meta = zipfile.ZipFile(w).read([n for n in zipfile.ZipFile(w).namelist() if n.endswith("METADATA")][0]).decode()
    m = re.search(r"^Requires-Dist: pydantic-core==([0-9.]+)", meta, re.M)
    print(m.group(1))
PY
)
for py in 3.10 3.11 3.12 3.13; do
	"${pip[@]}" --only-binary=:all: --python-version "$py" --platform manylinux2014_x86_64 \
		--platform manylinux_2_17_x86_64 "pydantic-core==$core"
done
# safetensors is abi3: one wheel serves every CPython >= 3.8
"${pip[@]}" --only-binary=:all: --python-version 3.10 --platform manylinux2014_x86_64 \
	--platform manylinux_2_17_x86_64 safetensors
# ninja: torch.utils.cpp_extension.load() needs it (FlashInfer-Bench builds Solutions with it)
"${pip[@]}" --only-binary=:all: --python-version 3.10 --platform manylinux2014_x86_64 \
	--platform manylinux_2_17_x86_64 ninja
du -sh "$dir"
ls "$dir"
