#!/usr/bin/env python3
"""Run an exported FlashInfer-Bench trace set with flashinfer-bench itself (t0260).

    fib_run.py DIR [--correctness-only]

Loads DIR with TraceSet.from_path(), runs every Solution on the workloads of
DIR with flashinfer_bench.Benchmark (its builder compiles the sources with
torch.utils.cpp_extension, its evaluator checks the outputs against the
Definition's Python reference and times the calls), and compares each
workload's latency with the one the export's trace carries (ksearch's).
Passes when every workload is PASSED and each latency agrees.  FlashInfer-Bench
times a whole Python call (the binding, torch's allocation of the outputs, the
launch), so its latency is the kernel's plus a host overhead that measured 11
to 28 us on an H200 (BENCHMARKS.md): it agrees when it is no less than 0.8x
ksearch's (a wrapper cannot make the kernel faster) and no more than 1.25x
ksearch's plus 30 us.  With
--correctness-only (an archive measured on another GPU), only PASSED counts.
"""
import sys

from flashinfer_bench import Benchmark, BenchmarkConfig
from flashinfer_bench.data import TraceSet


def main():
    ts = TraceSet.from_path(sys.argv[1])
    timed = "--correctness-only" not in sys.argv[2:]
    theirs = {(t.solution, t.workload.uuid): t for ts_list in ts.traces.values() for t in ts_list}
    bench = Benchmark(ts, BenchmarkConfig(warmup_runs=10, iterations=50, num_trials=1, timeout_seconds=1200))
    try:
        result = bench.run_all(dump_traces=False)
    finally:
        bench.close()
    ran = [t for v in result.traces.values() for t in v]
    bad = 0
    print(f"{'workload':28} {'status':10} {'fib us':>9} {'ksearch us':>11} {'ratio':>6} {'fib speedup':>11}")
    for t in ran:
        ev, mine = t.evaluation, theirs.get((t.solution, t.workload.uuid))
        if ev.status.value != "PASSED" or mine is None:
            print(f"{t.workload.uuid:28} {ev.status.value:10} (log: {ev.log[-2000:]})")
            bad += 1
            continue
        fib = ev.performance.latency_ms * 1000
        ks = mine.evaluation.performance.latency_ms * 1000
        agree = (0.8 * ks <= fib <= 1.25 * ks + 30.0) or not timed
        bad += not agree
        print(f"{t.workload.uuid:28} {ev.status.value:10} {fib:9.2f} {ks:11.2f} {fib / ks:6.2f} "
              f"{ev.performance.speedup_factor:11.2f}{'' if agree else '   DISAGREES'}")
    expected = sum(len(v) for v in ts.workloads.values()) * sum(len(v) for v in ts.solutions.values())
    if len(ran) != expected:
        print(f"ran {len(ran)} of {expected} solution-workload pairs")
        bad += 1
    if bad:
        print(f"{bad} problem(s)")
    else:
        print("all passed and agree" if timed else "all passed (correctness only)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
