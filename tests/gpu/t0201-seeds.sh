#!/usr/bin/env bash
# Positive cases: the reference and every shipped seed of every operator
# verify ok on every check workload (and time on the benchmark workloads),
# at each seed's start (the first value of every param its `start` leaves
# out).  With KS_SEEDS_ALL_PARAMS=1, every param combination too, timed on
# the op's smallest benchmark workload only;
# a design-space family of more than 64 allowed combinations gets the
# deterministic sample of tests/cli/seed_sample.py instead (KS_SEEDS_SAMPLE,
# default 24: the default params, both extremes of every param, spread points).
#
# Needs a GPU (exit 77 = skipped otherwise).  Env: KSEARCH, KS_SOURCE_ROOT,
# optional KS_GPU_LOG_DIR (the JSON results are kept there),
# KS_SEEDS_ALL_PARAMS=1, KS_SEEDS_OPS="op1 op2" (only these operators).
if ! command -v nvidia-smi >/dev/null 2>&1; then
	echo "SKIP: no nvidia-smi on PATH, so no NVIDIA GPU to run kernels on"
	exit 77
fi
if ! gpus=$(nvidia-smi -L 2>&1) || [ -z "$gpus" ]; then
	echo "SKIP: 'nvidia-smi -L' lists no GPU: ${gpus:-no output}"
	exit 77
fi
. "$(dirname "$0")/../cli/lib.sh"
echo "$gpus" | head -n 1

log_dir=${KS_GPU_LOG_DIR:-}
[ -z "$log_dir" ] || mkdir -p "$log_dir" || fail "cannot create KS_GPU_LOG_DIR $log_dir"
: >"$TMP/summary"
failed=0

# smallest_workload OP: the benchmark workload with the fewest min_bytes
smallest_workload() {
	python3 - "operators/$1/op.json" <<'PY'
import json, math, re, sys
op = json.load(open(sys.argv[1]))
ks = op["ksearch"]
consts = {a: s["value"] for a, s in op["axes"].items() if s.get("type") == "const"}

def ev(expr, env):
    # ksearch expressions: integer + - * / % ( ) with cdiv, min, max
    py = re.sub(r"(?<![/])/(?![/])", "//", expr)
    return eval(py, {"__builtins__": {}, "cdiv": lambda a, b: -(-a // b), "min": min, "max": max}, env)

def size(w):
    env = dict(consts, **w["axes"])
    try:
        for name, e in ks.get("derived_axes", {}).items():
            env.setdefault(name, ev(e, env))
        return ev(ks["min_bytes"], env)
    except Exception:
        return math.prod(v for v in w["axes"].values())
print(min(ks["workloads"], key=size)["id"])
PY
}

# check_one OP FILE LABEL ARGS...: run `ksearch check`, every result must be ok
check_one() {
	local op=$1 file=$2 label=$3; shift 3
	local json="$TMP/check.json" rc
	"$KSEARCH" check "$file" --op "$op" --json --time-cap 50 "$@" >"$json" 2>"$TMP/err"
	rc=$?
	checks=$((checks + 1))
	if [ -n "$log_dir" ]; then
		cp "$json" "$log_dir/t0201-$op-$(basename "$file" .cu)-$label.json"
	fi
	python3 - "$json" "$file" "$rc" "$label" "$TMP/err" >>"$TMP/summary" <<'PY'
import json, sys
path, file, rc, label, err = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
try:
    data = json.load(open(path))
except ValueError:
    why = " ".join(open(err, errors="replace").read().split())[:160]
    print(f"{file}\t({label} params)\tno result\t-\t-\tksearch exited {rc}: {why}")
    sys.exit(0)
for r in data if isinstance(data, list) else [data]:
    params = ",".join(f"{k}={v}" for k, v in (r.get("params") or {}).items()) or "-"
    o = r.get("overhead") or {}
    print(f"{file}\t{params}\t{r.get('verdict', '?')}\t{r.get('fitness') or 0:.3f}\t"
          f"{100 * (r.get('sol_fraction') or 0):.0f}%\t{' '.join((r.get('evidence') or '').split())[:160]}"
          f"\t{o.get('runs', '')}\t{o.get('announcements', '')}\t{o.get('allocations', '')}")
PY
	if [ "$rc" != 0 ]; then
		echo "NOT OK: ksearch check $file --op $op $* exited $rc" >&2
		sed -n '1,20p' "$TMP/err" >&2
		failed=$((failed + 1))
	fi
}

n_files=0
for opdir in operators/*/; do
	op=$(basename "$opdir")
	[ -f "$opdir/op.json" ] || continue
	if [ -n "${KS_SEEDS_OPS:-}" ] && ! [[ " $KS_SEEDS_OPS " == *" $op "* ]]; then
		continue
	fi
	small=
	if [ "${KS_SEEDS_ALL_PARAMS:-0}" = 1 ]; then
		small=$(smallest_workload "$op") || fail "$op: cannot find its smallest benchmark workload"
		echo "$op: all params timed on $small"
	fi
	for file in "$opdir"reference.cu "$opdir"seeds/*.cu; do
		[ -f "$file" ] || continue
		n_files=$((n_files + 1))
		echo "checking $file --op $op"
		check_one "$op" "$file" first
		if [ -n "$small" ]; then
			sample=$(python3 tests/cli/seed_sample.py --list "$file" "${KS_SEEDS_SAMPLE:-24}" 2>"$TMP/count") ||
				fail "$file: cannot sample its params"
			if [ "$(sed -n 's/ allowed$//p' "$TMP/count")" -le 64 ]; then
				check_one "$op" "$file" all --all-params --workload "$small"
			else
				i=0
				while read -r combo; do
					args=()
					for kv in $combo; do args+=(--param "$kv"); done
					i=$((i + 1))
					check_one "$op" "$file" "sample$i" "${args[@]}" --workload "$small"
				done <<<"$sample"
			fi
		fi
	done
done
[ "$n_files" -gt 0 ] || fail "no operator files found under operators/"

echo
python3 - "$TMP/summary" <<'PY' || failed=$((failed + 1))
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
head = ("file", "params", "verdict", "fitness", "SOL")
w = [max([len(head[i])] + [len(r[i]) for r in rows]) for i in range(5)]
print("  ".join(h.ljust(w[i]) for i, h in enumerate(head)))
for r in rows:
    line = "  ".join(r[i].ljust(w[i]) for i in range(5))
    if r[2] != "ok":
        line += "  <-- " + r[5]
    print(line)
bad = sum(r[2] != "ok" for r in rows)
print(f"{len(rows)} checks, {bad} not ok")
# What the worker did beside the timed runs: it tells the coordinator its
# deadline when a step needs another (a few dozen times an evaluation), not
# once a timed run, each message having woken the coordinator (on a busy host
# it cost the worker its CPU); and the driver allocated device memory once per
# buffer size, the rest coming from the worker's pool (devpool.h).
timed = [r for r in rows if len(r) > 8 and r[6] and r[7] and int(r[6]) > 0]
if timed:
    runs = sum(int(r[6]) for r in timed)
    msgs = sum(int(r[7]) for r in timed)
    allocs = sum(int(r[8]) for r in timed if r[8])
    print(f"overhead: {msgs} deadline messages for {runs} timed runs; {allocs} device allocations")
    if msgs >= 0.6 * runs:
        print("NOT OK: a deadline message for most timed runs (expected one per step)")
        bad += 1
else:
    print("NOT OK: no check reported its overhead (runs, announcements)")
    bad += 1
sys.exit(1 if bad else 0)
PY
[ "$failed" = 0 ] || fail "$failed ksearch check runs were not ok (summary above)"
done_ok
