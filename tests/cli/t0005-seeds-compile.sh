#!/usr/bin/env bash
# Every seed and reference of every shipped operator compiles, for sm_90a and
# sm_80, at exactly 4 of its allowed param combinations (the default, then the
# ones that bring the most param values not yet compiled, each param's
# smallest and largest first; a family with fewer is compiled whole): 123
# compiles in all, the quick check of every run, sanitizers included.  Each
# is `ok` and free of spills, and every param value occurs in some allowed
# combination.  t0009-seeds-compile-wide (suite 'slow') compiles 24 of each.
# The sample and the checks are in tests/cli/seed_sample.py. Families that
# refuse pre-Hopper targets (an `#error "... needs sm_90 ..."`) must fail for
# sm_80 with that error.
. "$(dirname "$0")/lib.sh"

run 0 python3 "$(dirname "$0")/seed_sample.py" "$KSEARCH" 4
cat "$TMP/out"
n=$(sed -n 's/^compiled \([0-9]*\) combinations$/\1/p' "$TMP/out")
# 4 a family at most (issue 26: the sample of "4" compiled 276, each param's extremes on top)
[ "${n:-0}" -gt 40 ] && [ "${n:-0}" -le 150 ] || fail "${n:-0} combinations compiled, expected 41 to 150"
# each file's line: "PATH: N allowed, K compiled", K = min(N, 4)
python3 - "$TMP/out" <<'PY' || fail "a family's sample is not min(allowed, 4) combinations"
import re, sys
rows = re.findall(r"^(\S+): (\d+) allowed, (\d+) compiled", open(sys.argv[1]).read(), re.M)
assert len(rows) >= 20, rows
bad = [r for r in rows if int(r[2]) != min(int(r[1]), 4)]
assert not bad, bad
PY
done_ok
