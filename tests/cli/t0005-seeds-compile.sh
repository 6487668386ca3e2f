#!/usr/bin/env bash
# Every seed and reference of every shipped operator compiles for sm_80 and
# sm_90a (spills are listed, not failed), at a deterministic sample of its param
# combinations: the first, the last, and one between them (the
# combinations in ksearch's order, first param slowest; one its constraints
# rule out is passed over for the next).  Compiled in parallel, one process
# a CPU.  t0009-seeds-compile-all (suite 'slow') compiles every combination.
. "$(dirname "$0")/lib.sh"

python3 - "$KSEARCH" "$TMP" <<'PY' || fail "a seed or reference did not compile cleanly (above)"
import concurrent.futures, itertools, json, os, re, subprocess, sys

ksearch, tmp = sys.argv[1], sys.argv[2]
SAMPLE = 3

def params_of(path):
    """The candidate's params, in declaration order, from its ksearch block."""
    text = open(path).read()
    block = re.match(r"\s*/\*\s*ksearch\s*(.*?)\*/", text, re.S)
    assert block, f"{path}: no ksearch block"
    return list(json.loads(block.group(1)).get("params", {}).items())

def combos(params):
    names = [n for n, _ in params]
    return [dict(zip(names, values)) for values in itertools.product(*(v for _, v in params))]

def compile_one(op, path, arch, combo):
    cmd = [ksearch, "compile", path, "--op", op, "--arch", arch, "--json"]
    for k, v in combo.items():
        cmd += ["--param", f"{k}={v}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr

def check(op, path, arch):
    """Compile the sample; returns (number compiled, problems, notes)."""
    all_combos = combos(params_of(path)) or [{}]
    n = len(all_combos)
    picks = sorted({round(i * (n - 1) / (SAMPLE - 1)) for i in range(SAMPLE)}) if n > 1 else [0]
    done, problems, notes, seen = 0, [], [], set()
    for start in picks:
        for i in list(range(start, n)) + list(range(0, start)):
            if i in seen:
                continue
            seen.add(i)
            rc, out, err = compile_one(op, path, arch, all_combos[i])
            if rc == 2 and "constraints rule these params out" in err:
                continue  # ruled out before compilation: the next one instead
            where = f"{path} {arch} {all_combos[i]}"
            if rc != 0:
                problems.append(f"{where}: exit {rc}: {(out + err)[-600:]}")
            else:
                r = json.loads(out)
                for k in r["kernels"]:
                    if k["spill_stores"] or k["spill_loads"]:
                        notes.append(f"spills: {where}: kernel {k['kernel']}")
            done += 1
            break
    return done, problems, notes

jobs = []
for op in sorted(os.listdir("operators")):
    if not os.path.exists(f"operators/{op}/op.json"):
        continue
    files = [f"operators/{op}/reference.cu"] + sorted(
        f"operators/{op}/seeds/{f}" for f in os.listdir(f"operators/{op}/seeds") if f.endswith(".cu"))
    jobs += [(op, f, arch) for f in files for arch in ("sm_80", "sm_90a")]
total, bad = 0, []
with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
    for (op, f, arch), (done, problems, notes) in zip(jobs, pool.map(lambda j: check(*j), jobs)):
        total += done
        bad += problems
        print(f"{f} {arch}: {done} combinations", flush=True)
        for note in notes:
            print(note, file=sys.stderr)
for p in bad:
    print("FAIL:", p, file=sys.stderr)
print(f"compiled {total} combinations of {len(jobs) // 2} files for 2 architectures")
sys.exit(1 if bad or total < 40 else 0)
PY
checks=$((checks + 1))
done_ok
