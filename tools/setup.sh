#!/usr/bin/env bash
# setup.sh - install what is missing on a Debian machine with the CUDA
# toolkit, then build ksearch into build/.  Safe to run again: it installs
# only what is missing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

# what we need -> the Debian package that provides it
need=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_pc() { pkg-config --exists "$1" 2>/dev/null; }
have_cmd cc || need+=(gcc)
have_cmd meson || need+=(meson)
have_cmd ninja || need+=(ninja-build)
have_cmd pkg-config || need+=(pkg-config)
have_cmd python3 || need+=(python3)
have_pc libcurl || need+=(libcurl4-openssl-dev)
have_pc jansson || need+=(libjansson-dev)
[ -f /usr/include/lmdb.h ] || need+=(liblmdb-dev)
have_pc cmocka || need+=(libcmocka-dev)
have_pc libcrypto || need+=(libssl-dev)

if [ ${#need[@]} -gt 0 ]; then
	echo "setup: installing ${need[*]}"
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -q
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${need[@]}"
fi

cuda="${CUDA_PATH:-/usr/local/cuda}"
if [ ! -f "$cuda/include/nvrtc.h" ]; then
	echo "setup: the CUDA toolkit is not at $cuda (no include/nvrtc.h)." >&2
	echo "setup: install the CUDA toolkit (NVIDIA's cuda-toolkit packages), or set CUDA_PATH to where it is." >&2
	exit 1
fi

if [ ! -f build/build.ninja ]; then
	meson setup build
fi
ninja -C build
# the test-only library a GPU machine lacks (it has no -dev packages): carried beside the tests
# as build/carry-libs, which tools/gpu-suite.sh puts on LD_LIBRARY_PATH
cmocka=$(ldd build/tests/test_gpukit 2>/dev/null | awk '/libcmocka/ {print $3}')
if [ -n "$cmocka" ]; then
	mkdir -p build/carry-libs
	cp -L "$cmocka" build/carry-libs/
fi
