# lib.sh - helpers for the CLI tests (sourced).  A test script runs checks
# in order; a check that fails says why (and shows the last command's
# output, once) and the script goes on, so one run shows every failure.
# done_ok ends the script: exit 1 naming the count when any check failed,
# 77 (skipped) when a part could not run (skip_part), else 0.  `fatal`
# stops at once, for a failure that leaves nothing sensible to check.
set -u
KSEARCH=${KSEARCH:?KSEARCH must name the ksearch binary}
cd "${KS_SOURCE_ROOT:?}" || exit 1
TMP=$(mktemp -d /tmp/ksearch-cli-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
checks=0
runs=0
# where failures are counted; a test of the checks themselves points it elsewhere in a subshell
failures_file="$TMP/failures"
skipped=""
shown=-1 # the run whose output a failure already showed

# fail WHY: count a failed check, say why, and show the last run's output (once per run).
# The count is kept in a file, so that a failure inside a subshell or a pipe counts too.
fail() {
	echo "$*" >>"$failures_file"
	echo "FAIL: $*" >&2
	[ "$shown" = "$runs" ] && return 1
	shown=$runs
	echo "--- stdout:" >&2; cat "$TMP/out" >&2 2>/dev/null
	echo "--- stderr:" >&2; cat "$TMP/err" >&2 2>/dev/null
	return 1
}

# fatal WHY: fail and stop here (a setup step whose failure leaves nothing to check)
fatal() {
	fail "$@"
	echo "FAILED: stopped after $checks checks; $(failures) failed" >&2
	exit 1
}

# skip_part WHY: a part of the test cannot run here; the test ends skipped (77), not passed
skip_part() {
	echo "SKIP (part): $*"
	skipped="${skipped:+$skipped; }$*"
}

# the CUDA toolkit's nvcc: $NVCC, else the build's toolkit ($CUDA_PATH or /usr/local/cuda, first:
# an nvcc from another CUDA on PATH may not know its headers), else PATH; $nvcc is not executable
# when there is none (a test that needs it says so with skip_part)
cuda=${CUDA_PATH:-/usr/local/cuda}
nvcc=${NVCC:-$cuda/bin/nvcc}
[ -x "$nvcc" ] || nvcc=$(command -v nvcc || echo "$nvcc")

# run EXPECTED_EXIT CMD...: run a command, keep its output in $TMP/out and $TMP/err
run() {
	local expected=$1; shift
	"$@" >"$TMP/out" 2>"$TMP/err"
	local rc=$?
	runs=$((runs + 1))
	checks=$((checks + 1))
	[ "$rc" = "$expected" ] || fail "'$*' exited $rc, expected $expected"
}

# out_has TEXT / err_has TEXT: fixed-string search in the last run's output
out_has() { checks=$((checks + 1)); grep -qF -- "$1" "$TMP/out" || fail "stdout lacks '$1'"; }
err_has() { checks=$((checks + 1)); grep -qF -- "$1" "$TMP/err" || fail "stderr lacks '$1'"; }
out_lacks() { checks=$((checks + 1)); ! grep -qF -- "$1" "$TMP/out" || fail "stdout has '$1'"; }

failures() { if [ -f "$failures_file" ]; then wc -l <"$failures_file"; else echo 0; fi; }

done_ok() {
	local n
	n=$(failures)
	if [ "$n" -gt 0 ]; then
		echo "FAILED: $n failed check(s) of $checks" >&2
		exit 1
	fi
	if [ -n "$skipped" ]; then
		echo "SKIP: $checks checks passed, but not every part ran: $skipped"
		exit 77
	fi
	echo "ok: $checks checks"
	exit 0
}

# knob_fixture OUT.json: tests/fixtures/export-gqa.json with #6 made a knob child (a family of
# its own, knob-3) of split_kv's #5, as the knob mutator files one
knob_fixture() {
	python3 - "$1" <<'PY'
import json, sys
doc = json.load(open("tests/fixtures/export-gqa.json"))
for c in doc["candidates"]:
    if c["id"] == 6:
        c["family"] = c["path"] = "knob-3"
        c["mutation"] = "knob"
json.dump(doc, open(sys.argv[1], "w"))
PY
}
