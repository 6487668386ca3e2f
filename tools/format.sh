#!/usr/bin/env bash
# format.sh - apply .clang-format to ksearch's C (src, include, tests, tools),
# or with --check list the files that differ and fail.  Debian's clang-format
# (14) is the reference version; CI runs the check as the test "format".
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null 2>&1; then
	echo "format.sh: clang-format is not installed (apt-get install clang-format)" >&2
	exit 2
fi
mapfile -t files < <(git ls-files 'src/*.[ch]' 'include/*.h' 'tests/*.[ch]' 'tools/*.[ch]' 2>/dev/null ||
	find src include tests tools -name '*.[ch]')
if [ "${1:-}" = --check ]; then
	bad=0
	for f in "${files[@]}"; do
		if ! clang-format "$f" | cmp -s - "$f"; then
			echo "not formatted: $f (run tools/format.sh)"
			bad=1
		fi
	done
	[ $bad = 0 ] && echo "format: ${#files[@]} files match .clang-format"
	exit $bad
fi
clang-format -i "${files[@]}"
