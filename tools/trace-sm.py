#!/usr/bin/env python3
"""trace-sm.py LOG... - is the spread of CTAs' ends a property of the SMs they ran on?

Reads the output of `DUMP=1 TRACES=N tools/gqa-ws-trace` (lines "b64_kv46287 even (...", " trace K
(...", "  cta C sm S done D"). A CTA's lateness is its end minus its trace's median end. For each
split it prints how well two halves of the traces agree on each SM's mean lateness (Pearson's r
between even and odd traces: near 1 when the same SMs are late in every run, near 0 when it is
chance; CTAs land on other SMs from run to run), the same by CTA, the range of the SMs' mean
lateness, and the largest end minus the median in each trace. Then the map of every SM's mean
lateness over all traces of the file, 12 SMs a row, and how well the two SMs of each TPC
(2k, 2k + 1) agree.
"""
import re
import statistics as st
import sys
from collections import defaultdict

HEAD = re.compile(r"(b\d+_kv\d+) (\w+) \(")
CTA = re.compile(r"\s+cta (\d+) sm (\d+) done ([\d.]+)")


def load(path):
    """[(split, {cta: (sm, end)})], one entry a trace"""
    traces, split = [], None
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        sys.exit("trace-sm.py: cannot read %s: %s" % (path, e.strerror))
    for line in lines:
        m = HEAD.match(line)
        if m:
            split = m.group(2)
            continue
        if line.startswith(" trace "):
            traces.append((split, {}))
            continue
        m = CTA.match(line)
        if m and traces:
            traces[-1][1][int(m.group(1))] = (int(m.group(2)), float(m.group(3)))
    traces = [t for t in traces if t[1]]
    if not traces:
        sys.exit("trace-sm.py: %s has no per-CTA lines: run gqa-ws-trace with DUMP=1" % path)
    return traces


def lateness(traces, key):
    """mean lateness by key(cta, sm) over the traces"""
    acc = defaultdict(list)
    for t in traces:
        med = st.median(end for _, end in t.values())
        for c, (sm, end) in t.items():
            acc[key(c, sm)].append(end - med)
    return {k: st.mean(v) for k, v in acc.items()}


def pearson(a, b):
    if len(a) < 3:
        return float("nan")
    ma, mb = st.mean(a), st.mean(b)
    den = (sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5
    return sum((x - ma) * (y - mb) for x, y in zip(a, b)) / den if den else float("nan")


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: trace-sm.py LOG...  (the output of DUMP=1 TRACES=N tools/gqa-ws-trace)")
    for path in sys.argv[1:]:
        traces = load(path)
        print("%s: %d traces" % (path, len(traces)))
        for split in dict.fromkeys(s for s, _ in traces):
            ts = [t for s, t in traces if s == split]
            for name, key in (("SM", lambda c, sm: sm), ("CTA", lambda c, sm: c)):
                a, b = lateness(ts[0::2], key), lateness(ts[1::2], key)
                ks = sorted(set(a) & set(b))
                whole = sorted(lateness(ts, key).values())
                print("  %-6s by %-3s: halves agree r = %5.2f over %d; mean lateness %+.2f .. %+.2f us"
                      % (split, name, pearson([a[k] for k in ks], [b[k] for k in ks]), len(ks), whole[0], whole[-1]))
            spread = [max(e for _, e in t.values()) - st.median(e for _, e in t.values()) for t in ts]
            print("  %-6s last end - median end: %.2f .. %.2f us" % (split, min(spread), max(spread)))
        by_sm = lateness([t for _, t in traces], lambda c, sm: sm)
        n = max(by_sm) + 1
        for i in range(0, n, 12):
            cells = ("%+5.1f" % by_sm[s] if s in by_sm else "    ." for s in range(i, min(i + 12, n)))
            print("  SM %3d-%3d: %s" % (i, min(i + 11, n - 1), " ".join(cells)))
        pairs = [(by_sm[2 * k], by_sm[2 * k + 1]) for k in range(n // 2) if 2 * k in by_sm and 2 * k + 1 in by_sm]
        print("  the two SMs of a TPC agree: r = %.2f over %d TPCs"
              % (pearson([p[0] for p in pairs], [p[1] for p in pairs]), len(pairs)))


if __name__ == "__main__":
    main()
