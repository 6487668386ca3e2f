#!/usr/bin/env bash
# A GPU worker has a core of its own that the compile processes leave alone
# (src/base/cpus.c): during a short gqa search, the `__worker` process may run
# only on the CPUs `evolve` names for it, and no `__compile` process may run
# on them; with KSEARCH_PIN_WORKERS=0 the worker runs wherever evolve may and
# nothing is named.  A worker beside compiles on its core's other hardware
# thread lost 11% of its evaluations' speed (BENCHMARKS.md, "Issue 27: a core
# for each GPU worker").
#
# Needs a GPU (exit 77 = skipped otherwise) and a host with at least two
# cores a GPU to spare.  Env: KSEARCH, KS_SOURCE_ROOT.
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "SKIP: no NVIDIA GPU to run kernels on"
	exit 77
fi
. "$(dirname "$0")/../cli/lib.sh"

# evolve in the background; every 0.05 s, each worker's and compile process's allowed CPUs
watch_evolve() { # NAME EVOLVE-ARGS...
	local name=$1 pid
	shift
	"$KSEARCH" evolve --op gqa --gpus 0 --profile-share 0 --sanitize-share 0 --archive "$TMP/a-$name" "$@" \
		>"$TMP/$name.out" 2>&1 &
	pid=$!
	: >"$TMP/$name.procs"
	while kill -0 "$pid" 2>/dev/null; do
		# builtins only: a sweep that forked per process would miss most compiles (under a second each)
		for p in /proc/[0-9]*; do
			mapfile -d "" -t argv 2>/dev/null <"$p/cmdline" || continue
			case "${argv[1]:-} ${argv[2]:-} ${argv[3]:-}" in
			"__worker --gpu "* | "__compile "*) ;;
			*) continue ;;
			esac
			list=""
			while read -r key value; do
				[ "$key" = Cpus_allowed_list: ] && list=$value
			done 2>/dev/null <"$p/status"
			[ -n "$list" ] && echo "${argv[*]}|$list" >>"$TMP/$name.procs"
		done
		sleep 0.05
	done
	wait "$pid"
	echo "exit $?" >>"$TMP/$name.out"
}

watch_evolve pinned --budget 24
grep -q "^exit 0" "$TMP/pinned.out" || fatal "evolve failed: $(tail -5 "$TMP/pinned.out")"
line=$(grep -m1 "^CPUs: GPU 0's worker on CPUs " "$TMP/pinned.out")
if [ -z "$line" ]; then
	cat "$TMP/pinned.out"
	echo "SKIP: evolve gave its worker no core of its own here ($(nproc) CPUs, $(ls /proc/driver/nvidia/gpus 2>/dev/null | wc -l) GPUs listed by the driver)"
	exit 77
fi
echo "$line"
python3 - "$line" "$TMP/pinned.procs" "$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)" <<'PY' ||
import sys

def cpus(text):
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out

line, procs, mine = sys.argv[1], sys.argv[2], cpus(sys.argv[3])
named = cpus(line.split("worker on CPUs ", 1)[1].split(" ", 1)[0])
workers, compiles = [], []
for row in open(procs):
    cmd, _, allowed = row.strip().rpartition("|")
    (workers if "__worker" in cmd else compiles).append(cpus(allowed))
if not workers:
    sys.exit("never saw the __worker process")
if len(compiles) < 5:
    sys.exit(f"saw {len(compiles)} compile processes, too few to tell")
# the worker moves itself once its GPU is open (PCI address): from then on, only there
if named not in workers:
    sys.exit(f"the worker never ran on only {sorted(named)}, as evolve said: {sorted(workers[-1])}")
bad = [w for w in workers[workers.index(named):] if w != named]
if bad:
    sys.exit(f"the worker left its core: it ran on {sorted(bad[0])}, evolve named {sorted(named)}")
overlap = [c for c in compiles if c & named]
if overlap:
    sys.exit(f"{len(overlap)} of {len(compiles)} compile processes may run on the worker's CPUs {sorted(named)}")
rest = cpus(line.split("compile processes on the other ", 1)[1].split("(", 1)[1].split(";", 1)[0])
if not rest or not rest <= mine - named:
    sys.exit(f"evolve names {sorted(rest)} for the compile processes: not evolve's CPUs less the worker's")
if any(c != rest for c in compiles):
    sys.exit(f"a compile process ran on {sorted(next(c for c in compiles if c != rest))}, not on {sorted(rest)}")
print(f"worker on {sorted(named)} (seen {len(workers)} times), {len(compiles)} compile processes "
      f"on the other {len(rest)} CPUs")
PY
	fail "the worker's core (above)"

KSEARCH_PIN_WORKERS=0 watch_evolve free --budget 6
grep -q "^exit 0" "$TMP/free.out" || fail "evolve with KSEARCH_PIN_WORKERS=0 failed: $(tail -5 "$TMP/free.out")"
grep -q "^CPUs: " "$TMP/free.out" && fail "KSEARCH_PIN_WORKERS=0 still named a core: $(grep '^CPUs: ' "$TMP/free.out")"
mine=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
grep "__worker" "$TMP/free.procs" | grep -qv "|$mine\$" && fail "with KSEARCH_PIN_WORKERS=0 the worker was pinned: $(grep -m1 __worker "$TMP/free.procs")"
grep -q "__worker" "$TMP/free.procs" || fail "never saw the __worker process with KSEARCH_PIN_WORKERS=0"
checks=$((checks + 4))
done_ok
