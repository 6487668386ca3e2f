#!/usr/bin/env python3
"""plot-curves.py - best fitness against evaluations, as an SVG, from the CSV
tools/ablate-search.sh writes (op,search,budget,seed,evals,best).

    tools/plot-curves.py CURVES.csv OUT.svg [--from FITNESS]

One panel per budget, one step line per search and seed, a colour per
search.  Python's standard library only, so the ablation always leaves a plot
(no matplotlib on the GPU machine or in CI).  --from sets the y axis' floor
(default: a little under the lowest best after a tenth of the budget, so
the end of the race is readable rather than the seeds' first guesses).
"""
import argparse
import collections
import csv
import html
import math
import sys

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
PANEL_W, PANEL_H, LEFT, TOP, BOTTOM, GAP = 520, 320, 60, 40, 50, 30


def load(path):
    runs = collections.defaultdict(list)  # (budget, search, seed) -> [(evals, best)]
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            try:
                key = (int(row["budget"]), row["search"], row["seed"])
                runs[key].append((int(row["evals"]), float(row["best"])))
            except (KeyError, ValueError) as e:
                sys.exit(f"plot-curves.py: {path}: a row without a number where one belongs ({e}): {row}")
    if not runs:
        sys.exit(f"plot-curves.py: {path}: no curves (an empty ablation?)")
    op = next(csv.DictReader(open(path, newline="")))["op"]
    return op, runs


def nice_ticks(lo, hi):
    step = 10 ** math.floor(math.log10(max(hi - lo, 1e-9)))
    for mult in (1, 2, 5, 10):
        if (hi - lo) / (step * mult) <= 8:
            step *= mult
            break
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("svg")
    ap.add_argument("--from", dest="floor", type=float)
    args = ap.parse_args()
    op, runs = load(args.csv)
    budgets = sorted({k[0] for k in runs})
    searches = list(dict.fromkeys(k[1] for k in runs))
    colour = {s: COLOURS[i % len(COLOURS)] for i, s in enumerate(searches)}
    top = max(b for r in runs.values() for _, b in r)
    floor = args.floor
    if floor is None:
        early = [max((b for e, b in r if e <= k[0] / 10), default=min(b for _, b in r)) for k, r in runs.items()]
        floor = math.floor(min(early) - 0.5)
    ceil = math.ceil(top + 0.25)
    width = LEFT + len(budgets) * (PANEL_W + GAP)
    height = TOP + PANEL_H + BOTTOM + 20 * len(searches)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="sans-serif" font-size="12">', f'<rect width="{width}" height="{height}" fill="white"/>']
    for p, budget in enumerate(budgets):
        x0 = LEFT + p * (PANEL_W + GAP)
        sx = lambda e: x0 + PANEL_W * e / budget
        sy = lambda b: TOP + PANEL_H * (1 - (min(max(b, floor), ceil) - floor) / (ceil - floor))
        out.append(f'<text x="{x0 + PANEL_W / 2}" y="{TOP - 14}" text-anchor="middle" font-size="14">'
                   f'{html.escape(op)}: budget {budget} evaluations</text>')
        for t in nice_ticks(floor, ceil):
            out.append(f'<line x1="{x0}" x2="{x0 + PANEL_W}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" stroke="#ddd"/>'
                       f'<text x="{x0 - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
        for t in nice_ticks(0, budget):
            out.append(f'<line x1="{sx(t):.1f}" x2="{sx(t):.1f}" y1="{TOP}" y2="{TOP + PANEL_H}" stroke="#eee"/>'
                       f'<text x="{sx(t):.1f}" y="{TOP + PANEL_H + 16}" text-anchor="middle">{t:g}</text>')
        out.append(f'<rect x="{x0}" y="{TOP}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#888"/>')
        out.append(f'<text x="{x0 + PANEL_W / 2}" y="{TOP + PANEL_H + 34}" text-anchor="middle">evaluations</text>')
        for (b, search, seed), pts in runs.items():
            if b != budget:
                continue
            pts.sort()
            # a step line: level until the next improvement, then up
            path = [f"M{sx(pts[0][0]):.1f},{sy(pts[0][1]):.1f}"]
            path += [f"H{sx(e):.1f}V{sy(best):.1f}" for (e, best), (_, before) in zip(pts[1:], pts) if best != before]

            path.append(f"H{sx(budget):.1f}")
            out.append(f'<path d="{"".join(path)}" fill="none" stroke="{colour[search]}" '
                       f'stroke-width="1.6" opacity="0.85"><title>{html.escape(search)}, seed {seed}</title></path>')
    out.append(f'<text x="16" y="{TOP + PANEL_H / 2}" transform="rotate(-90 16 {TOP + PANEL_H / 2})" '
               'text-anchor="middle">best fitness (speedup over the reference)</text>')
    for i, s in enumerate(searches):
        y = TOP + PANEL_H + BOTTOM + 14 + 20 * i - 10
        out.append(f'<line x1="{LEFT}" x2="{LEFT + 24}" y1="{y}" y2="{y}" stroke="{colour[s]}" stroke-width="3"/>'
                   f'<text x="{LEFT + 30}" y="{y + 4}">{html.escape(s)}</text>')
    out.append("</svg>")
    with open(args.svg, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"plot: {args.svg}")


if __name__ == "__main__":
    main()
