#!/usr/bin/env bash
# sanitize-wrap.sh - meson test's wrapper in the sanitizer suite
# (tools/sanitize.sh): runs one test with every AddressSanitizer,
# LeakSanitizer and UndefinedBehaviorSanitizer report of every process it
# starts (ksearch's __compile and __worker children too) written to a
# folder of its own, and fails the test when any process reported, even
# if the test passed: a CLI test that expects exit 1 would otherwise take
# a sanitizer's exit 1 for the failure it wanted, and a report from a
# child whose death the parent handles would go unseen.
set -u
logs=$(mktemp -d /tmp/ksearch-san-XXXXXX)
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}log_path=$logs/asan"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-}${UBSAN_OPTIONS:+:}log_path=$logs/ubsan"
"$@"
rc=$?
if [ -n "$(ls -A "$logs")" ]; then
	echo "sanitize-wrap.sh: sanitizer reports from '$*' (exit $rc):" >&2
	for f in "$logs"/*; do
		echo "--- $(basename "$f")" >&2
		cat "$f" >&2
	done
	rc=1
fi
rm -rf "$logs"
exit $rc
