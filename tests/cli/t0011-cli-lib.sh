#!/usr/bin/env bash
# tests/cli/lib.sh itself: a failed check is reported and the script goes on
# to the next, done_ok then exits 1 with the count (a failure in a subshell
# counts too); fatal stops at once; a part that cannot run (skip_part) makes
# the test skipped (77), not passed; and all checks passing exits 0.
. "$(dirname "$0")/lib.sh"
lib="$PWD/tests/cli/lib.sh"

# scratch NAME BODY: a test script that sources lib.sh and runs BODY
scratch() {
	printf '#!/usr/bin/env bash\n. "%s"\n%s\n' "$lib" "$2" >"$TMP/$1.sh"
}

scratch two-fail '
run 0 sh -c "echo hello"
out_has "goodbye"
run 3 sh -c "exit 4"
( false || fail "inside a subshell" )
run 0 sh -c "echo still here"
out_has "still here"
echo "reached the end"
done_ok'
run 1 bash "$TMP/two-fail.sh"
err_has "FAIL: stdout lacks 'goodbye'"
err_has "FAIL: 'sh -c exit 4' exited 4, expected 3"
err_has "FAIL: inside a subshell"
err_has "FAILED: 3 failed check(s) of 5"
out_has "reached the end"
out_lacks "ok: "
[ "$(grep -c -- '--- stdout:' "$TMP/err")" = 2 ] || fail "a run's output was shown other than once per failed run"

scratch fatal '
run 0 true
fatal "nothing to check without it"
echo "after fatal"
done_ok'
run 1 bash "$TMP/fatal.sh"
err_has "FAIL: nothing to check without it"
out_lacks "after fatal"

scratch skip '
run 0 true
skip_part "no frobnicator here"
done_ok'
run 77 bash "$TMP/skip.sh"
out_has "SKIP: 1 checks passed, but not every part ran: no frobnicator here"

scratch skip-and-fail '
skip_part "no frobnicator here"
run 0 false
done_ok'
run 1 bash "$TMP/skip-and-fail.sh"

scratch pass '
run 0 sh -c "echo hello"
out_has hello
out_lacks goodbye
done_ok'
run 0 bash "$TMP/pass.sh"
out_has "ok: 3 checks"
done_ok
