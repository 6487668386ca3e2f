#!/usr/bin/env python3
"""gpu-time.py - where a search's GPU time went: evaluating, profiling and
checking, or idle; and per GPU, the gaps between its evaluations.

    ksearch evolve ... --log NAME.jsonl
    ksearch archive ls --op OP --archive DIR --sort id --json > NAME.json
    python3 tools/gpu-time.py --gpus N NAME.jsonl NAME.json

N is the number of GPUs the search ran on (all ranks together).  The GPU
seconds are N times the search's wall time (the log's `stop` event).  Of
them: evaluating, the sum of the workers' wall time (each record's
timing.wall_s, for the records the log's `result` events name);
profiles and checks, the seconds of the log's profile and sanitizer events
(what each held its GPU, `held_s`, from commit d73fcef on; before it, over
MPI, the wait of rank 0's lane); and the rest, idle.  Then per GPU (the
records' `where`: "rank R gpu G" over MPI), its evaluations, the time it
evaluated, and its gaps longer than --gap seconds (default 0.5) between
the end of one evaluation and the start of the next, from the log's
`evaluated_t` and `worker_s`: a profile, a check or the drain of a rank
before one shows as such a gap, and so does a GPU waiting for a build.
Then the evaluations an hour counted from the results evaluated from 0, 20
and 40 s on (an MPI run ramps up over its first 20-40 s).  With --detail,
each GPU's gaps one by one: those a profile or check explains (it ran
within the gap, for at least half of the check: the log's events give its
seconds and when it ended, not its GPU), with the time beside it (the drain
before it, the wait for a build after it), and the others (the GPU waited
for a build, or for the insertions to move on).
tools/bench-mpi.sh prints it for each of its runs, with --detail.
"""
import argparse
import collections
import json
import sys

# the log's events of evidence made on a lane between evaluations (profiles, checks, confirmations)
EVIDENCE_EVENTS = ("profile", "sanitizer", "confirmation", "profile_failed", "sanitizer_failed", "confirmation_failed")


def fail(msg):
    sys.exit(f"gpu-time: {msg}")


def read_log(path):
    events = []
    try:
        with open(path, errors="replace") as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    events.append(json.loads(line))
                except ValueError:
                    fail(f"{path}:{n}: not a JSON event (a `--log` file of ksearch evolve)")
    except OSError as e:
        fail(f"{path}: {e}")
    return events


def read_records(path):
    try:
        with open(path) as f:
            records = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    if not isinstance(records, list):
        fail(f"{path}: not a list of records (`ksearch archive ls --json`)")
    return {r["id"]: r for r in records if isinstance(r, dict) and isinstance(r.get("id"), int)}


def place(record):
    where = record.get("where") if isinstance(record.get("where"), dict) else {}
    gpu = where.get("gpu", "?")
    return f"rank {where['rank']} gpu {gpu}" if "rank" in where else f"gpu {gpu}"


def main():
    ap = argparse.ArgumentParser(description="where a search's GPU time went")
    ap.add_argument("--gpus", type=int, required=True, help="GPUs the search ran on, all ranks together")
    ap.add_argument("--gap", type=float, default=0.5, help="count gaps longer than this, seconds")
    ap.add_argument("--detail", action="store_true", help="list each GPU's gaps, with or without a check in them")
    ap.add_argument("log", help="the search's --log file")
    ap.add_argument("records", help="`ksearch archive ls --json` of its archive")
    args = ap.parse_args()
    if args.gpus < 1:
        fail("--gpus must be at least 1")
    events = read_log(args.log)
    records = read_records(args.records)
    stops = [e for e in events if e.get("event") == "stop" and isinstance(e.get("wall_s"), (int, float))]
    if not stops:
        fail(f"{args.log}: no stop event: the search did not finish, or this is not its log")
    wall = stops[-1]["wall_s"]
    total = args.gpus * wall
    evaluating = 0.0
    spans = collections.defaultdict(list)
    ends = []
    for e in events:
        if e.get("event") != "result" or e.get("id") not in records:
            continue
        r = records[e["id"]]
        t = r.get("timing") if isinstance(r.get("timing"), dict) else {}
        if r.get("verdict") not in ("ok", "wrong") or not t.get("wall_s"):
            continue
        evaluating += t["wall_s"]
        end, worker = e.get("evaluated_t"), e.get("worker_s")
        if isinstance(end, (int, float)) and isinstance(worker, (int, float)):
            spans[place(r)].append((end - worker, end))
            ends.append(end)
    checks = [(e["t"] - e["seconds"], e["t"]) for e in events
              if e.get("event") in EVIDENCE_EVENTS
              and isinstance(e.get("seconds"), (int, float)) and isinstance(e.get("t"), (int, float))]
    evidence = sum(e.get("seconds", 0) for e in events
                   if e.get("event") in EVIDENCE_EVENTS
                   and isinstance(e.get("seconds"), (int, float)))
    idle = total - evaluating - evidence

    def row(label, x):
        part = f" {100 * x / total:5.1f}%" if total > 0 else ""
        print(f"{label:<22} {x:9.1f} s{part}")

    row("GPU time", total)
    print(f"  ({args.gpus} GPUs x {wall:.1f} s of the search)")
    row("  evaluating", evaluating)
    row("  profiles and checks", evidence)
    row("  idle", idle)
    if ends:
        rates = []
        for start in (0, 20, 40):
            n = sum(1 for t in ends if t >= start)
            if wall > start:
                rates.append(f"{3600 * n / (wall - start):,.0f} from {start} s")
        print("evaluations per hour: " + ", ".join(rates))
    if not spans:
        return
    print(f"{'per GPU':<18} {'evaluations':>11} {'evaluating':>11} {'gaps > %gs' % args.gap:>11} {'in them':>9}")
    for name in sorted(spans):
        iv = sorted(spans[name])
        gaps = [iv[i][0] - iv[i - 1][1] for i in range(1, len(iv)) if iv[i][0] - iv[i - 1][1] > args.gap]
        busy = sum(b - a for a, b in iv)
        print(f"  {name:<16} {len(iv):>11} {busy:>9.1f} s {len(gaps):>11} {sum(gaps):>7.1f} s")
    if args.detail:
        for name in sorted(spans):
            detail(name, sorted(spans[name]), checks, args.gap)


def detail(name, iv, checks, gap_s):
    """One GPU's gaps longer than gap_s, each with the check that explains it, if one does."""
    lines, with_check, beside, other = [], 0, 0.0, 0.0
    for prev, nxt in zip(iv, iv[1:]):
        a, b = prev[1], nxt[0]
        if b - a <= gap_s:
            continue
        # checks on other GPUs may overlap it too: a GPU runs one at a time (the log's times are
        # rank 0's, so two in a row on one GPU may seem to overlap by a little), the best fits first
        inside = []
        for s, e in sorted(checks, key=lambda c: -(min(b, c[1]) - max(a, c[0]))):
            if min(b, e) - max(a, s) >= 0.5 * (e - s) and \
                    all(e <= s2 + 0.5 or s >= e2 - 0.5 for s2, e2 in inside):
                inside.append((s, e))
        held = sum(min(b, e) - max(a, s) for s, e in inside)
        if inside:
            with_check += 1
            beside += (b - a) - held
            lines.append(f"    at {a:7.1f} s: {b - a:5.2f} s, a check of {held:.2f} s in it")
        else:
            other += b - a
            lines.append(f"    at {a:7.1f} s: {b - a:5.2f} s, no check")
    print(f"{name}: {with_check} gaps with a check, {beside:.1f} s beside the checks; "
          f"{len(lines) - with_check} without, {other:.1f} s")
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
