#!/usr/bin/env python3
"""pipeline-replay.py - how busy a search's GPUs would have been at another
pipeline depth, from the compile and evaluation times its records hold.

    ksearch archive ls --op OP --archive DIR --sort id --json > RUN.json
    python3 tools/pipeline-replay.py RUN.json [--depth D ...] [--jobs J] [--lanes L]

The search makes proposal i once result i - depth is inserted, compiles on
--jobs processes in proposal order, times a finished build on the first free
lane (the lowest proposal first), and inserts results in proposal order
(docs/design.md, "The search").  This replays exactly that rule with the
run's own times, in the order its records were proposed (each record's
timing.compile_s, then timing.wall_s on a lane; a record that was not
evaluated, a compile error, costs its compile only), and prints for each
depth the lanes' busy share and the evaluations per lane-hour.

What it leaves out, so that the figures are a bound on what the depth alone
changes, not a forecast of a run: profiles and sanitizer checks, the
search's and the worker's own time between two evaluations, twins (a twin's
build is recorded once), and that compile times depend on how many compile
at once.  Compare depths against each other, and the top figure against the
run's own busy share (tools/gpu-time.py) to see what the depth did not cause.
"""
import argparse
import heapq
import json
import sys


def fail(msg):
    sys.exit(f"pipeline-replay: {msg}")


def read_steps(path):
    """(compile_s, wall_s or None) per record with a compile time, in id order."""
    try:
        with open(path) as f:
            records = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    if not isinstance(records, list):
        fail(f"{path}: not a list of records (`ksearch archive ls --json`)")
    steps = []
    for r in sorted((r for r in records if isinstance(r, dict) and isinstance(r.get("id"), int)),
                    key=lambda r: r["id"]):
        t = r.get("timing") if isinstance(r.get("timing"), dict) else {}
        c, w = t.get("compile_s"), t.get("wall_s")
        if not isinstance(c, (int, float)) or c < 0:
            continue
        evaluated = r.get("verdict") in ("ok", "wrong") and isinstance(w, (int, float)) and w > 0
        steps.append((float(c), float(w) if evaluated else None))
    if not steps:
        fail(f"{path}: no record with a compile time (timing.compile_s)")
    return steps


def replay(steps, depth, jobs, lanes):
    """(busy share of the lanes, evaluations per lane-hour, seconds) of the run at this depth."""
    n = len(steps)
    events = []  # (time, order, kind, seq): kind 0 a compile ends, 1 an evaluation ends
    order = 0
    waiting_compile, built = [], []
    compiling, free_lanes = 0, lanes
    done, next_insert, next_seq = set(), 0, 0
    busy = end = 0.0
    evaluated = 0

    def push(t, kind, seq):
        nonlocal order
        order += 1
        heapq.heappush(events, (t, order, kind, seq))

    def advance(now):
        nonlocal next_seq, compiling, free_lanes, busy, evaluated
        while next_seq - next_insert < depth and next_seq < n:
            waiting_compile.append(next_seq)
            next_seq += 1
        while waiting_compile and compiling < jobs:
            seq = waiting_compile.pop(0)
            compiling += 1
            push(now + steps[seq][0], 0, seq)
        while built and free_lanes:
            seq = heapq.heappop(built)
            free_lanes -= 1
            busy += steps[seq][1]
            evaluated += 1
            push(now + steps[seq][1], 1, seq)

    advance(0.0)
    while events:
        now, _, kind, seq = heapq.heappop(events)
        end = now
        if kind == 0:
            compiling -= 1
            if steps[seq][1] is None:
                done.add(seq)
            else:
                heapq.heappush(built, seq)
        else:
            free_lanes += 1
            done.add(seq)
        while next_insert in done:
            done.discard(next_insert)
            next_insert += 1
        advance(now)
    if end <= 0:
        return 0.0, 0.0, 0.0
    return busy / (lanes * end), 3600.0 * evaluated / end / lanes, end


def main():
    ap = argparse.ArgumentParser(description="a run's times replayed through the pipeline at other depths")
    ap.add_argument("records", help="`ksearch archive ls --json` of the run's archive")
    ap.add_argument("--depth", type=int, action="append", help="a depth to replay (repeatable; default 10 14 18 26)")
    ap.add_argument("--jobs", type=int, default=8, help="compile processes (default 8)")
    ap.add_argument("--lanes", type=int, default=1, help="GPUs (default 1)")
    args = ap.parse_args()
    depths = args.depth or [10, 14, 18, 26]
    if args.jobs < 1 or args.lanes < 1 or min(depths) < 1:
        fail("--jobs, --lanes and --depth must be at least 1")
    steps = read_steps(args.records)
    print(f"{len(steps)} proposals ({sum(1 for s in steps if s[1] is not None)} evaluated), "
          f"{args.jobs} compile processes, {args.lanes} lane(s)")
    print(f"{'depth':>5} {'busy':>7} {'per lane-hour':>14} {'seconds':>9}")
    for d in depths:
        share, rate, secs = replay(steps, d, args.jobs, args.lanes)
        print(f"{d:>5} {100 * share:6.1f}% {rate:>14,.0f} {secs:>9.1f}")


if __name__ == "__main__":
    main()
