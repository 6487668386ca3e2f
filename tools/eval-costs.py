#!/usr/bin/env python3
"""eval-costs.py - where an evaluation's time goes, run against run.

    ksearch archive ls --op OP --archive DIR --sort id --json > NAME.json   (per run)
    python3 tools/eval-costs.py NAME.json [NAME2.json ...]

For each run (a file of `archive ls --json` records, named by its file), the
median seconds per candidate of the build (compile_s) and of the GPU worker's
steps: inputs, prepare, checks and verify (host and GPU work around the
checks), time (timing the benchmark workloads) and within it: wait (the
worker blocked on the end of each timed run, its launches and the GPU),
vrun (the timed runs verified at random: the reference run and the comparison),
warmup (the candidate's warm-up runs), prechk (the input checks before each
verification) and msgs (progress messages to the coordinator), "-" in
records from before they were measured; and the evaluator's wall clock
(wall, from the job sent to the answer), and the mean of wall.  Then the same medians over
the families every run evaluated, per family, so that a run that reached
slower kernels is told apart from one whose evaluations were slower (a busy
host); and, for a run whose records say where they were timed (`where`) on
more than one GPU, the same per GPU ("rank R gpu G" over MPI).  Only evaluated
candidates (verdict ok or wrong) count.
"""
import json
import os
import statistics
import sys

STEPS = [("compile", "timing", "compile_s"), ("inputs", "overhead", "inputs_s"),
         ("prepare", "overhead", "prepare_s"), ("checks", "overhead", "checks_s"),
         ("verify", "timing", "verify_s"), ("time", "timing", "time_s"), ("wait", "overhead", "wait_s"),
         ("vrun", "overhead", "verify_s"),
         ("warmup", "overhead", "warmup_s"), ("prechk", "overhead", "prechecks_s"),
         ("msgs", "overhead", "announce_s"), ("wall", "timing", "wall_s")]


def load(path):
    try:
        with open(path) as f:
            records = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"eval-costs: {path}: {e}")
    if not isinstance(records, list):
        sys.exit(f"eval-costs: {path}: not a list of records (`ksearch archive ls --json`)")
    return [r for r in records if isinstance(r, dict) and r.get("verdict") in ("ok", "wrong")
            and isinstance(r.get("timing"), dict) and r["timing"].get("wall_s")]


def medians(records):
    """The median of each step, then the mean of wall (what throughput pays)."""
    out = []
    for _, group, key in STEPS:
        values = [r[group][key] for r in records if isinstance(r.get(group), dict)
                  and isinstance(r[group].get(key), (int, float))]
        out.append(statistics.median(values) if values else None)
    walls = [r["timing"]["wall_s"] for r in records]
    out.append(statistics.fmean(walls) if walls else None)
    return out


def place(record):
    """Where a record was timed, as "rank R gpu G" (over MPI) or "gpu G"; None if it does not say."""
    where = record.get("where")
    if not isinstance(where, dict) or not isinstance(where.get("gpu"), int):
        return None
    rank = where.get("rank")
    return (f"rank {rank} " if isinstance(rank, int) else "") + f"gpu {where['gpu']}"


def row(name, n, values):
    cells = "".join(f"{v:9.3f}" if v is not None else f"{'-':>9}" for v in values)
    return f"{name:<28}{n:>6}{cells}"


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    runs = [(os.path.splitext(os.path.basename(p))[0], load(p)) for p in argv[1:]]
    header = f"{'run (median s)':<28}{'n':>6}" + "".join(f"{s[0]:>9}" for s in STEPS) + f"{'wall avg':>9}"
    print(header)
    for name, records in runs:
        print(row(name, len(records), medians(records)))
    for name, records in runs:
        places = sorted({place(r) for r in records} - {None})
        if len(places) > 1:  # where each GPU's evaluations went, when records say (`where`)
            print(f"{name} by GPU:")
            for p in places:
                mine = [r for r in records if place(r) == p]
                print(row("  " + p, len(mine), medians(mine)))
    shared = set.intersection(*[{r.get("family") for r in records} for _, records in runs])
    for family in sorted(f for f in shared if f):
        print(f"family {family}:")
        for name, records in runs:
            mine = [r for r in records if r.get("family") == family]
            print(row("  " + name, len(mine), medians(mine)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except BrokenPipeError:  # | head
        sys.exit(0)
