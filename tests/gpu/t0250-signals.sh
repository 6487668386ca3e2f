#!/usr/bin/env bash
# A search ends cleanly on SIGINT, SIGTERM and SIGHUP (a closed terminal, issue 26): the
# candidates in flight are finished, the summary says "stopped (signal)", the archive
# verifies, and the same command resumes it.  The search runs in a session of its own
# (setsid), as under a terminal that then closes.
#
# Needs a GPU (exit 77 = skipped otherwise).  Env: KSEARCH, KS_SOURCE_ROOT.
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "SKIP: no NVIDIA GPU to run kernels on"
	exit 77
fi
. "$(dirname "$0")/../cli/lib.sh"

for sig in INT TERM HUP; do
	A="$TMP/archive-$sig"
	setsid "$KSEARCH" evolve --op rmsnorm --budget 100000 --profile-share 0 --archive "$A" \
		>"$TMP/evolve-$sig.out" 2>&1 &
	pid=$!
	# wait for a few evaluations, then signal the search alone
	for _ in $(seq 1 240); do
		n=$("$KSEARCH" archive ls --op rmsnorm --archive "$A" 2>/dev/null | tail -n +2 | wc -l)
		[ "$n" -ge 8 ] && break
		sleep 0.5
	done
	kill -"$sig" "$pid"
	rc=124
	for _ in $(seq 1 120); do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid"
			rc=$?
			break
		fi
		sleep 0.5
	done
	checks=$((checks + 1))
	if [ "$rc" = 124 ]; then
		kill -KILL "$pid"
		fail "SIG$sig: the search did not stop within 60 s: $(tail -3 "$TMP/evolve-$sig.out")"
	fi
	[ "$rc" = 0 ] || fail "SIG$sig: evolve exited $rc: $(tail -5 "$TMP/evolve-$sig.out")"
	grep -q "stopped (signal)" "$TMP/evolve-$sig.out" ||
		fail "SIG$sig: no 'stopped (signal)': $(tail -5 "$TMP/evolve-$sig.out")"
	run 0 "$KSEARCH" archive verify --op rmsnorm --archive "$A"
	before=$("$KSEARCH" archive ls --op rmsnorm --archive "$A" | tail -n +2 | wc -l)
	run 0 "$KSEARCH" evolve --op rmsnorm --budget 3 --profile-share 0 --archive "$A"
	after=$("$KSEARCH" archive ls --op rmsnorm --archive "$A" | tail -n +2 | wc -l)
	[ "$after" -gt "$before" ] || fail "SIG$sig: resuming added nothing ($before then $after records)"
	echo "SIG$sig: stopped cleanly after $before records; resumed to $after"
done
done_ok
