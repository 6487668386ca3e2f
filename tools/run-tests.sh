#!/usr/bin/env bash
# run-tests.sh - set up and build (tools/setup.sh), run every test, and end
# with one line "N passed, N failed, N skipped".  Fails when a test fails
# or when no test ran.  GPU tests skip (exit 77) on machines without one.
set -uo pipefail
cd "$(dirname "$0")/.."

# the tests' own needs beyond the build's: clang-format for the format check
if ! command -v clang-format >/dev/null 2>&1; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends clang-format
fi
bash tools/setup.sh || { echo "0 passed, 1 failed (setup or build failed)"; exit 1; }
rm -f build/meson-logs/testlog.json
meson test -C build --print-errorlogs --num-processes "$(nproc)" "$@"
python3 - build/meson-logs/testlog.json <<'PY'
import json, sys
counts = {"passed": 0, "failed": 0, "skipped": 0}
try:
    lines = open(sys.argv[1]).read().splitlines()
except OSError:
    lines = []
for line in lines:
    result = json.loads(line)["result"]
    if result in ("OK", "EXPECTEDFAIL"):
        counts["passed"] += 1
    elif result == "SKIP":
        counts["skipped"] += 1
    else:
        counts["failed"] += 1
print(f'{counts["passed"]} passed, {counts["failed"]} failed, {counts["skipped"]} skipped')
sys.exit(1 if counts["failed"] or not counts["passed"] else 0)
PY
