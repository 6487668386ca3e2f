#!/usr/bin/env bash
# sanitize.sh - build ksearch with AddressSanitizer (and LeakSanitizer) and
# UndefinedBehaviorSanitizer into build-san/ and run the unit tests, the
# CLI tests and t0400-cluster-mpi (suite cluster) there; any report fails the
# test that caused it, from whichever process (tools/sanitize-wrap.sh).
# Ends with "N passed, N failed, N skipped" unless --no-summary
# (tools/run-tests.sh --sanitize counts both suites in one line).  Extra
# arguments go to `meson test`.
#
# Left out: the GPU suite (it skips without a GPU, and the CUDA driver is
# not built for ASan), the format check (nothing to sanitize), and the
# CLI tests in the suite 'slow': t0009-seeds-compile-wide spends its
# minutes in NVRTC compiling 24 param combinations of every seed, a
# library ASan does not instrument; ksearch's side of it (compile,
# --all-params, the PTX scan, the compile children) runs here in t0003,
# t0004, t0005 and the unit tests.
set -uo pipefail
cd "$(dirname "$0")/.."
summary=1
if [ "${1:-}" = --no-summary ]; then
	summary=0
	shift
fi

# The runtimes are linked statically: with gcc's shared libasan and
# libubsan, UBSan ignores log_path and its reports could not be collected.
if [ ! -f build-san/build.ninja ]; then
	meson setup build-san -Db_sanitize=address,undefined \
		-Dc_link_args="-static-libasan -static-libubsan" >/dev/null || exit 2
fi
ninja -C build-san || exit 2

# halt on the first report; exit 99 so a report is never read as an
# expected failure; check what is cheap to check
export ASAN_OPTIONS="halt_on_error=1:exitcode=99:detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1"
export UBSAN_OPTIONS="halt_on_error=1:exitcode=99:print_stacktrace=1:report_error_type=1"
# meson names the log after the wrapper; it is moved to testlog.json
rm -f build-san/meson-logs/testlog.json build-san/meson-logs/testlog-sanitize-wrap.sh.json
meson test -C build-san --print-errorlogs --num-processes "$(nproc)" --suite unit --suite cli --suite cluster \
	--no-suite slow --wrapper "$PWD/tools/sanitize-wrap.sh" "$@"
mv build-san/meson-logs/testlog-sanitize-wrap.sh.json build-san/meson-logs/testlog.json 2>/dev/null || { echo "sanitize.sh: meson test ran no test" >&2; exit 2; }
if [ $summary = 1 ]; then
	exec python3 tools/test-summary.py build-san/meson-logs/testlog.json
fi
exit 0
