#!/usr/bin/env python3
"""Cut a small example out of a full archive export (`ksearch archive export`).

usage: sample-archive.py FULL.json ELITES.json OUT.json [--every N]

FULL.json is `ksearch archive export`, ELITES.json `ksearch archive export --elites`
of the same archive.

Keeps every grid elite, every per-workload best, the lineage of each of them,
and every Nth other candidate (default 40, by id), with the sources they use
and all prompts; the records are unchanged (ids kept), so `archive import`
gives an archive whose grid, bests and lineage are the search's own and whose
progress curves are a sample of it. docs/example/ was made this way from an
H200 search (BENCHMARKS.md says which).
"""
import json
import sys


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    src, elites, dst = sys.argv[1], sys.argv[2], sys.argv[3]
    every = int(sys.argv[sys.argv.index("--every") + 1]) if "--every" in sys.argv else 40
    full = json.load(open(src))
    by_id = {c["id"]: c for c in full["candidates"]}
    keep = set()
    # the elites, as the archive files them
    keep |= {c["id"] for c in json.load(open(elites))["candidates"]}
    # the best of each workload
    best = {}
    for c in full["candidates"]:
        for w in c.get("workloads", []) if c.get("verdict") == "ok" else []:
            if w["id"] not in best or w["median_us"] < best[w["id"]][0]:
                best[w["id"]] = (w["median_us"], c["id"])
    keep |= {i for _, i in best.values()}
    # their lineages
    for i in list(keep):
        while i in by_id and by_id[i].get("parents"):
            i = by_id[i]["parents"][0]
            keep.add(i)
    keep |= {c["id"] for c in full["candidates"] if c["id"] % every == 0}
    out = dict(full)
    out["candidates"] = [c for c in full["candidates"] if c["id"] in keep]
    hashes = {c.get("source_hash") for c in out["candidates"]}
    out["sources"] = {h: s for h, s in full["sources"].items() if h in hashes}
    with open(dst, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"{len(out['candidates'])} of {len(full['candidates'])} candidates, {len(out['sources'])} sources")


if __name__ == "__main__":
    main()
