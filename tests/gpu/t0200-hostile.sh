#!/usr/bin/env bash
# Hostile kernels: every candidate in tests/gpu/hostile/ gets the verdict its
# "// expect:" line names, with evidence that names the problem ("// evidence:"),
# all in ONE `ksearch check` process, so crashes and hangs must cost only their
# own worker; zz_good.cu, checked last, must still come out ok with a fitness.
# A case with "// time-at-least-us: T" takes T us a run by construction: every
# workload's fastest sample must be T or more, or the timer was gamed.
#
# Needs a GPU (exit 77 = skipped otherwise).  Env: KSEARCH (the binary),
# KS_SOURCE_ROOT (the source tree), optional KS_GPU_LOG_DIR (where the JSON
# result and stderr are kept).
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

# Each group in one process: tests/gpu/hostile/*.cu against rmsnorm, sorted so zz_good.cu
# comes last; tests/gpu/hostile/gqa/*.cu against gqa (attacks on inputs rmsnorm lacks).
check_group() { # OP LABEL FILE...
	local op=$1 label=$2
	shift 2
	local files=("$@") start rc
	start=$(date +%s)
	"$KSEARCH" check "${files[@]}" --op "$op" --json --time-cap 50 >"$TMP/out" 2>"$TMP/err"
	rc=$?
	echo "ksearch check --op $op of ${#files[@]} candidates: exit $rc after $(($(date +%s) - start)) s"
	if [ -n "${KS_GPU_LOG_DIR:-}" ]; then
		mkdir -p "$KS_GPU_LOG_DIR" &&
			cp "$TMP/out" "$KS_GPU_LOG_DIR/$label.json" &&
			cp "$TMP/err" "$KS_GPU_LOG_DIR/$label.stderr" &&
			echo "saved $KS_GPU_LOG_DIR/$label.json"
	fi
	case $rc in
	0 | 1 | 2) fail "ksearch check --op $op exited $rc: it must report the hostile verdicts (exit 3 to 6), not fail itself" ;;
	esac
python3 - "$TMP/out" "$rc" "${files[@]}" <<'PY' || fail "some $op candidates did not get their expected verdict (table above)"
import json, os, re, sys

out_path, rc, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
try:
    results = json.load(open(out_path))
except ValueError as e:
    sys.exit(f"ksearch check did not print JSON: {e}")
if isinstance(results, dict) and len(files) == 1:
    results = [results]  # check prints one object, not an array, for one file
if not isinstance(results, list):
    sys.exit("expected a JSON array with one object per file")

EXIT = {"ok": 0, "compile_error": 3, "contract_error": 3, "refused": 3, "wrong": 4,
        "crash": 5, "timeout": 5, "implausible": 6}
by_file = {}
for r in results:
    by_file.setdefault(r.get("file"), []).append(r)

problems, rows, worst = [], [], 0
for path in files:
    name = os.path.basename(path)
    text = open(path).read()
    m = re.search(r"^// expect: *(\S+)", text, re.M)
    if not m:
        problems.append(f"{name}: no '// expect: VERDICT' line")
        continue
    expect = m.group(1)
    needles = re.findall(r"^// evidence: *(.+?) *$", text, re.M)
    wants_printf = re.search(r"^// printf: captured", text, re.M) is not None
    at_least = re.search(r"^// time-at-least-us: *([0-9.]+)", text, re.M)
    worst = max(worst, EXIT.get(expect, 0))
    got = by_file.get(path, [])
    if len(got) != 1:
        problems.append(f"{name}: {len(got)} results in the JSON, expected 1")
        rows.append((name, expect, "(none)", ""))
        continue
    r = got[0]
    verdict, evidence = r.get("verdict", "?"), r.get("evidence") or ""
    rows.append((name, expect, verdict, " ".join(evidence.split())[:100]))
    printed = r.get("printf") or {}
    if wants_printf and not printed.get("bytes"):
        problems.append(f"{name}: its device printf output was not captured as evidence")
    if len(printed.get("head", "")) > 2048:
        problems.append(f"{name}: {len(printed['head'])} bytes of printf kept (the bound is 2048)")
    if verdict != expect:
        problems.append(f"{name}: verdict {verdict}, expected {expect}: {evidence[:300]}")
        continue
    if expect == "ok":
        if evidence:
            problems.append(f"{name}: ok, but with evidence '{evidence[:200]}'")
        fitness = r.get("fitness") or 0
        if not fitness > 0:
            problems.append(f"{name}: ok but fitness {fitness} (expected > 0)")
        if not r.get("workloads"):
            problems.append(f"{name}: ok but no timed workloads")
        for w in r.get("workloads") or []:
            if at_least and not w.get("min_us", 0) >= float(at_least.group(1)):
                problems.append(f"{name}: {w.get('id')} timed at {w.get('min_us')} us at least, "
                                f"under the {at_least.group(1)} us it takes: the timer was gamed")
        continue
    if not evidence.strip():
        problems.append(f"{name}: {verdict} without evidence")
    for needle in needles:
        if needle.lower() not in evidence.lower():
            problems.append(f"{name}: evidence lacks '{needle}': {evidence[:300]}")

extra = sorted(set(by_file) - set(files))
if extra:
    problems.append(f"results for files that were not asked for: {extra}")
if rc != worst:
    problems.append(f"ksearch check exited {rc}; the worst expected verdict means exit {worst}")

w = max(len(r[0]) for r in rows) if rows else 10
print(f"{'file':<{w}}  {'expected':<14} {'got':<14} evidence")
for name, expect, verdict, ev in rows:
    mark = "" if verdict == expect else "   <-- MISMATCH"
    print(f"{name:<{w}}  {expect:<14} {verdict:<14} {ev}{mark}")
good = [r for r in results if os.path.basename(r.get("file", "")) == "zz_good.cu"]
if good and good[0].get("verdict") == "ok":
    g = good[0]
    print(f"zz_good.cu after every hostile case: fitness {g.get('fitness', 0):.3f}, "
          f"speed of light {100 * (g.get('sol_fraction') or 0):.0f}%")
for p in problems:
    print("PROBLEM:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
PY
	checks=$((checks + ${#files[@]}))
}

mapfile -t files < <(printf '%s\n' tests/gpu/hostile/*.cu | LC_ALL=C sort)
[ "${#files[@]}" -ge 30 ] || fail "expected at least 30 cases in tests/gpu/hostile, found ${#files[@]}"
[ "$(basename "${files[-1]}")" = zz_good.cu ] || fail "zz_good.cu must be checked last"
check_group rmsnorm t0200-hostile "${files[@]}"
mapfile -t files < <(printf '%s\n' tests/gpu/hostile/gqa/*.cu | LC_ALL=C sort)
[ "${#files[@]}" -ge 1 ] && [ -f "${files[0]}" ] || fail "expected the gqa cases in tests/gpu/hostile/gqa"
check_group gqa t0200-hostile-gqa "${files[@]}"
done_ok
