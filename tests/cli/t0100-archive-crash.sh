#!/usr/bin/env bash
# The archive survives kill -9 at any moment: a writer inserts results in a
# loop (printing each id once its transaction committed) and is killed at
# random moments, 30 times; after each kill the archive verifies and holds
# every id the writer printed, and inspection commands run while it writes.
. "$(dirname "$0")/lib.sh"
WRITER=${KS_ARCHIVE_CRASH_WRITER:?KS_ARCHIVE_CRASH_WRITER must name the archive_crash_writer helper}
A="$TMP/archive"
ROUNDS=${KS_CRASH_ROUNDS:-30}

for round in $(seq 1 "$ROUNDS"); do
	"$WRITER" "$A" >"$TMP/ids.$round" 2>"$TMP/writer.err" &
	pid=$!
	if [ "$round" = 1 ]; then
		# verify needs an archive: let the first writer create it
		for _ in $(seq 100); do [ -s "$TMP/ids.1" ] && break; sleep 0.1; done
	else
		# readers never block the writer and see a consistent archive meanwhile
		run 0 "$KSEARCH" archive stats --archive "$A"
		out_has "candidates"
		run 0 "$KSEARCH" archive ls --archive "$A" --limit 5
	fi
	sleep "$(printf '0.%03d' $((RANDOM % 400 + 10)))"
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	if [ -s "$TMP/writer.err" ]; then
		cat "$TMP/writer.err" >"$TMP/err"
		fail "round $round: the writer failed before it was killed"
	fi
	run 0 "$KSEARCH" archive verify --archive "$A"
	out_has "ok: "
	run 0 "$KSEARCH" archive ls --archive "$A" --sort id --json
	python3 - "$TMP/out" "$TMP"/ids.* <<'PY' || fail "round $round: a committed id is missing"
import json, sys
present = [r["id"] for r in json.load(open(sys.argv[1]))]
assert present == list(range(1, len(present) + 1)), "ids are not 1..N"
present = set(present)
for path in sys.argv[2:]:
    text = open(path).read()
    # a line cut by the kill was never complete: only whole lines count
    lines = text.split("\n")[:-1]
    for line in lines:
        assert int(line) in present, f"{path}: id {line} was committed but is missing"
PY
done
total=$(cat "$TMP"/ids.* | wc -l)
[ "$total" -gt "$ROUNDS" ] || fail "the writer committed only $total results in $ROUNDS rounds"
echo "$total committed ids over $ROUNDS kills, all present"
done_ok
