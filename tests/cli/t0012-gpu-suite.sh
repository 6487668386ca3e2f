#!/usr/bin/env bash
# tools/gpu-suite.sh fails when a part fails: here it runs on a scratch tree
# whose build/ksearch, test_gpukit, nvidia-smi and GPU tests are scripts that
# pass, fail or skip on demand.  Every part runs; the last line names each
# part that failed and the exit is 1; a skipped test (77) is no failure; all
# passing exits 0.
. "$(dirname "$0")/lib.sh"

R="$TMP/root"
mkdir -p "$R/tools" "$R/build/tests" "$R/tests/gpu" "$R/bin" "$TMP/logs"
cp tools/gpu-suite.sh "$R/tools/"
# fake SCRIPT BODY: an executable shell script
fake() { printf '#!/bin/sh\n%s\n' "$2" >"$1" && chmod +x "$1"; }
fake "$R/bin/nvidia-smi" 'echo "GPU 0: a fake"'
# ksearch: `check ... --op gqa` fails when FAIL_CHECK is set; anything else passes
fake "$R/build/ksearch" 'case "$*" in *"--op gqa"*) [ -z "$FAIL_CHECK" ] || exit 4 ;; esac; echo "ksearch $*"'
fake "$R/build/tests/test_gpukit" 'exit 0'
# the hostile suite fails on its reruns (a fresh cache) when FAIL_RERUN is set
fake "$R/tests/gpu/t0200-hostile.sh" '[ -n "$FAIL_RERUN" ] && [ "$KSEARCH_CACHE" != "$FIRST_CACHE" ] && exit 1; exit 0'
fake "$R/tests/gpu/t0201-skips.sh" 'echo "SKIP: not here"; exit 77'
fake "$R/tests/gpu/t0202-maybe.sh" '[ -z "$FAIL_TEST" ] || exit 1; exit 0'

suite() { # suite VAR=VALUE...: run the suite on the scratch tree with those set
	run "$1" env PATH="$R/bin:$PATH" LOG_DIR="$TMP/logs" KSEARCH_CACHE="$TMP/cache" FIRST_CACHE="$TMP/cache" \
		"${@:2}" bash "$R/tools/gpu-suite.sh" all
}

suite 0
out_has "gpu-suite: all 12 parts passed"
out_lacks "failed"

suite 1 FAIL_CHECK=1 FAIL_TEST=1 FAIL_RERUN=1
tail -1 "$TMP/out" | grep -qF "gpu-suite: 4 of 12 parts failed: check of gqa's seeds (exit 4) t0202-maybe (exit 1) t0200-hostile run 2 (exit 1) t0200-hostile run 3 (exit 1)" ||
	fail "the last line does not name the four failed parts: $(tail -1 "$TMP/out")"
out_lacks "t0201-skips (exit"
# a part after a failed one still ran
out_has "ksearch check operators/mla_decode/reference.cu"

suite 1 FAIL_TEST=1
tail -1 "$TMP/out" | grep -qxF "gpu-suite: 1 of 12 parts failed: t0202-maybe (exit 1)" ||
	fail "one failed test: $(tail -1 "$TMP/out")"

# TEST arguments run those GPU tests alone: t0202 here, not t0201 nor t0200 and its reruns
run 1 env PATH="$R/bin:$PATH" LOG_DIR="$TMP/logs" KSEARCH_CACHE="$TMP/cache" FAIL_TEST=1 \
	bash "$R/tools/gpu-suite.sh" tests t0202
tail -1 "$TMP/out" | grep -qxF "gpu-suite: 1 of 3 parts failed: t0202-maybe (exit 1)" ||
	fail "tests t0202: $(tail -1 "$TMP/out")"
out_lacks "t0200-hostile"
out_lacks "t0201-skips"
run 0 env PATH="$R/bin:$PATH" LOG_DIR="$TMP/logs" KSEARCH_CACHE="$TMP/cache" bash "$R/tools/gpu-suite.sh" tests t0200 t0201
out_has "t0200-hostile.sh, run 3"
out_has "gpu-suite: all 6 parts passed"

# smoke runs no tests/gpu script: naming one with it is refused, not silently skipped
run 2 env PATH="$R/bin:$PATH" LOG_DIR="$TMP/logs" KSEARCH_CACHE="$TMP/cache" bash "$R/tools/gpu-suite.sh" smoke t0202
err_has "gpu-suite: smoke runs no tests/gpu script, so t0202 would not run; use 'tests t0202' (those alone) or 'all t0202' (smoke's parts and those)"
out_lacks "gpukit"

# a library the binary lacks ends it at once, saying so
fake "$R/bin/ldd" 'echo "	libcuda.so.1 => not found"'
suite 1
out_has "missing libraries:"
tail -1 "$TMP/out" | grep -qF "failed: build/ksearch's libraries" || fail "missing libraries: $(tail -1 "$TMP/out")"
done_ok
