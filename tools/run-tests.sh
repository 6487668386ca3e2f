#!/usr/bin/env bash
# run-tests.sh - set up and build (tools/setup.sh), run every test, and end
# with one line "N passed, N failed, N skipped".  Fails when a test fails
# or when no test ran.  GPU tests skip (exit 77) on machines without one.
# Arguments go to `meson test` (--suite unit, a test's name ...).
#
# --sanitize (first; .ci/run gives it): then also build with AddressSanitizer
# and UndefinedBehaviorSanitizer into build-san/ and run the unit and CLI
# tests there (tools/sanitize.sh); the last line counts both runs.
set -uo pipefail
cd "$(dirname "$0")/.."
sanitize=0
if [ "${1:-}" = --sanitize ]; then
	sanitize=1
	shift
fi

# the tests' own needs beyond the build's: clang-format for the format check
if ! command -v clang-format >/dev/null 2>&1; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends clang-format
fi
bash tools/setup.sh || exec python3 tools/test-summary.py --failed "setup or build (tools/setup.sh)"
rm -f build/meson-logs/testlog.json
meson test -C build --print-errorlogs --num-processes "$(nproc)" "$@"
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
