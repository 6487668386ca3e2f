# lib.sh - helpers for the CLI tests (sourced). Each test script runs
# checks in order and exits 1 at the first one that fails, saying why.
set -u
KSEARCH=${KSEARCH:?KSEARCH must name the ksearch binary}
cd "${KS_SOURCE_ROOT:?}" || exit 1
TMP=$(mktemp -d /tmp/ksearch-cli-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
checks=0

fail() {
	echo "FAIL: $*" >&2
	echo "--- stdout:" >&2; cat "$TMP/out" >&2 2>/dev/null
	echo "--- stderr:" >&2; cat "$TMP/err" >&2 2>/dev/null
	exit 1
}

# run EXPECTED_EXIT CMD...: run a command, keep its output in $TMP/out and $TMP/err
run() {
	local expected=$1; shift
	"$@" >"$TMP/out" 2>"$TMP/err"
	local rc=$?
	checks=$((checks + 1))
	[ "$rc" = "$expected" ] || fail "'$*' exited $rc, expected $expected"
}

# out_has TEXT / err_has TEXT: fixed-string search in the last run's output
out_has() { grep -qF -- "$1" "$TMP/out" || fail "stdout lacks '$1'"; }
err_has() { grep -qF -- "$1" "$TMP/err" || fail "stderr lacks '$1'"; }
out_lacks() { ! grep -qF -- "$1" "$TMP/out" || fail "stdout has '$1'"; }

done_ok() { echo "ok: $checks checks"; exit 0; }
