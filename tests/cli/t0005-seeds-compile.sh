#!/usr/bin/env bash
# Every seed and reference of every shipped operator compiles, for sm_90a and
# sm_80, at its default params and at a deterministic sample of its allowed
# params: 24 combinations spread over the space (both extreme values of every
# param included; a family of at most 24 allowed combinations is compiled
# whole), each `ok` and free of spills. The design-space families have tens of
# thousands of combinations, far too many to compile in CI; the sample and the
# check that every param value occurs in some allowed combination are in
# tests/cli/seed_sample.py. Families that refuse pre-Hopper targets (an
# `#error "... needs sm_90 ..."`) must fail for sm_80 with that error.
. "$(dirname "$0")/lib.sh"

run 0 python3 "$(dirname "$0")/seed_sample.py" "$KSEARCH" 24
cat "$TMP/out"
n=$(sed -n 's/^compiled \([0-9]*\) combinations$/\1/p' "$TMP/out")
[ "${n:-0}" -gt 100 ] || fail "only ${n:-0} combinations compiled"
done_ok
