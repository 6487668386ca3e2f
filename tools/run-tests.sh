#!/usr/bin/env bash
# run-tests.sh - set up and build (tools/setup.sh), run the tests, and end
# with one line "N passed, N failed, N skipped".  Fails when a test fails
# or when no test ran.  GPU tests skip (exit 77) on machines without one.
# Arguments after the options go to `meson test` (--suite unit, a test's
# name ...).  About 3 minutes on 2 cores after the build (3 min 9 s measured
# on the shared 2-core VM under a load near 4; a build from scratch adds
# about 50 s); each test prints a line as it ends.
#
#   --slow      also the suite 'slow' (t0009-seeds-compile-wide: 24 param
#               combinations of every seed through NVRTC, 3 min 6 s alone;
#               about 6 minutes in all)
#   --sanitize  then also build with AddressSanitizer and
#               UndefinedBehaviorSanitizer into build-san/ and run the unit
#               and CLI tests there (tools/sanitize.sh; about 5 more minutes)
#
# .ci/run gives both; the last line counts every run.
set -uo pipefail
cd "$(dirname "$0")/.."
sanitize=0
slow=0
while [ $# -gt 0 ]; do
	case $1 in
	--sanitize) sanitize=1 ;;
	--slow) slow=1 ;;
	*) break ;;
	esac
	shift
done

# the tests' own needs beyond the build's: clang-format for the format check
if ! command -v clang-format >/dev/null 2>&1; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends clang-format
fi
# and Debian's Open MPI for t0400-cluster-mpi (src/cluster under mpirun), before the
# build so that meson's mpi option (auto) finds it; without it t0400 skips
if ! command -v mpirun >/dev/null 2>&1 || ! pkg-config --exists ompi-c 2>/dev/null; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q libopenmpi-dev openmpi-bin
fi
bash tools/setup.sh || exec python3 tools/test-summary.py --failed "setup or build (tools/setup.sh)"
rm -f build/meson-logs/testlog.json
suites=(--no-suite slow)
what="the unit, CLI and lint tests (about 3 minutes on 2 cores)"
if [ $slow = 1 ]; then
	suites=()
	what="every test, the slow ones included (about 6 minutes on 2 cores)"
fi
[ $# -gt 0 ] && what="the tests chosen: $*"
echo "run-tests.sh: $what; a line as each test ends"
meson test -C build --print-errorlogs --num-processes "$(nproc)" "${suites[@]}" "$@"
logs=(build/meson-logs/testlog.json)
if [ $sanitize = 1 ]; then
	echo "run-tests.sh: the sanitizer suite (tools/sanitize.sh)"
	if bash tools/sanitize.sh --no-summary; then
		logs+=(build-san/meson-logs/testlog.json)
	else
		logs+=(--failed "the sanitizer build, or its tests did not run (tools/sanitize.sh)")
	fi
fi
exec python3 tools/test-summary.py "${logs[@]}"
