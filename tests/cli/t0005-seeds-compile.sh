#!/usr/bin/env bash
# Every seed and reference of every shipped operator compiles, for sm_90a and
# sm_80, at its default params and at a small deterministic sample of its
# allowed params (4 each: the quick check of every run, sanitizers included);
# each `ok` and free of spills, and every param value occurs in some allowed
# combination. t0009-seeds-compile-wide (suite 'slow') compiles 24 of each.
# The sample and the checks are in tests/cli/seed_sample.py. Families that
# refuse pre-Hopper targets (an `#error "... needs sm_90 ..."`) must fail for
# sm_80 with that error.
. "$(dirname "$0")/lib.sh"

run 0 python3 "$(dirname "$0")/seed_sample.py" "$KSEARCH" 4
cat "$TMP/out"
n=$(sed -n 's/^compiled \([0-9]*\) combinations$/\1/p' "$TMP/out")
[ "${n:-0}" -gt 40 ] || fail "only ${n:-0} combinations compiled"
done_ok
