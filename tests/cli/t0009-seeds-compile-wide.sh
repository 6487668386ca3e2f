#!/usr/bin/env bash
# Every seed and reference of every shipped operator compiles, for sm_90a and
# sm_80, at exactly 24 combinations spread over its allowed params (the
# default, those that bring the most param values not yet compiled, then
# evenly spaced points; a family of at most 24 allowed combinations is compiled
# whole), each `ok` and free of spills. The
# design-space families have tens of thousands of combinations, far too many
# to compile all in CI. A few minutes of NVRTC on 2 cores: in the suite 'slow',
# which .ci/run runs (tools/run-tests.sh --slow); t0005-seeds-compile is its
# quick sample.
. "$(dirname "$0")/lib.sh"

run 0 python3 "$(dirname "$0")/seed_sample.py" "$KSEARCH" 24
cat "$TMP/out"
n=$(sed -n 's/^compiled \([0-9]*\) combinations$/\1/p' "$TMP/out")
[ "${n:-0}" -gt 100 ] || fail "only ${n:-0} combinations compiled"
done_ok
