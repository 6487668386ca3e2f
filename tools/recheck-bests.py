#!/usr/bin/env python3
"""recheck-bests.py ARCHIVE OP OUTDIR - time an archive's per-workload bests again.

Each best of `ksearch archive stats` ("best per workload", what `export-best --dispatch`
combines) is written to OUTDIR/ID.cu with its params and timed by `ksearch check` on length
splits drawn afresh (OUTDIR/check-ID.txt); the times are printed per candidate. Against the
archive's recorded times this shows whether the bests hold on other draws (BENCHMARKS.md, "Bests
that held only on a lucky draw"). Run it on the GPU machine; KSEARCH names the binary (default
build/ksearch).
"""
import json, os, subprocess, sys
if len(sys.argv) != 4:
    sys.exit("usage: recheck-bests.py ARCHIVE OP OUTDIR")
arch, op, out = sys.argv[1:4]
ks = os.environ.get("KSEARCH", "build/ksearch")
os.makedirs(out, exist_ok=True)
st = subprocess.run([ks, "archive", "stats", "--archive", arch, "--op", op], capture_output=True, text=True).stdout
ids, on = [], False
for line in st.splitlines():
    if line.startswith("best per workload"):
        on = True
        continue
    if on:
        f = line.split()
        if not f or f[0] in ("workload", "dispatch"):
            if f and f[0] == "dispatch":
                break
            continue
        if f[1].isdigit() and f[1] not in ids:
            ids.append(f[1])
print("bests:", ids, flush=True)
for i in ids:
    rec = json.loads(subprocess.run([ks, "archive", "show", i, "--archive", arch, "--op", op, "--json"],
                                    capture_output=True, text=True).stdout)
    src = os.path.join(out, i + ".cu")
    with open(src, "w") as fh:
        fh.write(rec["source"])
    args = [ks, "check", src, "--op", op]
    for k, v in (rec.get("params") or {}).items():
        args += ["-p", "%s=%s" % (k, v)]
    r = subprocess.run(["timeout", "150"] + args, capture_output=True, text=True)
    with open(os.path.join(out, "check-%s.txt" % i), "w") as fh:
        fh.write(" ".join(args) + "\n" + r.stdout + r.stderr + "exit %d\n" % r.returncode)
    print("== #%s (%s)" % (i, rec.get("family", "?")), flush=True)
    print("\n".join(l for l in r.stdout.splitlines() if l.strip().startswith(("b1", "b16", "b64", "b128", "fitness", "verdict"))), flush=True)
