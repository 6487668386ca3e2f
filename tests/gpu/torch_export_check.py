#!/usr/bin/env python3
"""Check an `export-best --format torch` package against the op's PyTorch reference (t0265).

    torch_export_check.py PACKAGE OP_DIR

PACKAGE is the package's import name (built: on PYTHONPATH).  For every check and
benchmark workload of OP_DIR/op.json and for random shapes, PACKAGE.run(inputs) must
match op.json's `reference` within the op's tolerances (no NaN); then the same under
torch.compile(fullgraph=True) and replayed from a captured CUDA graph with new inputs
copied in; a wrong dtype must raise naming the tensor.  Prints "all ok" at the end.
"""
import importlib
import itertools
import json
import os
import random
import sys

import torch

DT = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32,
      "int32": torch.int32, "int64": torch.int64}


def ev(expr, env):
    return int(eval(str(expr), {"__builtins__": {}, "min": min, "max": max,
                                "cdiv": lambda a, b: -(-a // b)}, dict(env)))


def make_inputs(op, axes, gens, rng):
    env = {k: v["value"] for k, v in op["axes"].items() if v["type"] == "const"}
    env.update(axes)
    for k, e in op["ksearch"].get("derived_axes", {}).items():
        env[k] = ev(e, env)
    out = []
    for name, t in op["inputs"].items():
        g = dict(op["ksearch"]["generators"][name], **gens.get(name, {}))
        shape = None if t["shape"] is None else [env[a] for a in t["shape"]]
        dt = DT[t["dtype"]]
        if shape is None:
            out.append(float(g.get("value", g.get("mean", 0))) if t["dtype"].startswith("float")
                       else int(g.get("value", 0)))
        elif g["kind"] == "normal":
            out.append((torch.randn(shape, device="cuda") * g.get("std", 1) + g.get("mean", 0)).to(dt))
        elif g["kind"] == "uniform":
            lo, hi = g.get("low", 0), g.get("high", 1)
            out.append((torch.rand(shape, device="cuda") * (hi - lo) + lo).to(dt))
        elif g["kind"] == "const":
            out.append(torch.full(shape, g["value"], dtype=dt, device="cuda"))
        elif g["kind"] == "indptr":
            b, lo, start = shape[0] - 1, g.get("min", 1), g.get("start", 0)
            total = ev(g["total"], env) - start  # the requests' tokens: indptr[0] = start
            lengths = g.get("lengths")
            if lengths is None:
                cuts = sorted(rng.randint(0, total - b * lo) for _ in range(b - 1))
                lengths = [lo + c2 - c1 for c1, c2 in zip([0] + cuts, cuts + [total - b * lo])]
            out.append(torch.tensor(list(itertools.accumulate([start] + lengths)), dtype=dt, device="cuda"))
        else:  # page_permutation
            out.append(torch.randperm(ev(g["pool"], env))[:shape[0]].to(device="cuda", dtype=dt))
    return out


def compare(op, got, ref, what):
    got = got if isinstance(got, tuple) else (got,)
    ref = ref if isinstance(ref, (tuple, list)) else (ref,)
    for (name, _), g, r in zip(op["outputs"].items(), got, ref):
        tol = op["ksearch"]["tolerances"][name]
        g, r = g.float(), r.float()
        bad = ~((g - r).abs() <= tol["atol"] + tol["rtol"] * r.abs())
        if g.shape != r.shape or bool(bad.any()):
            raise SystemExit(f"{what}: output {name} differs from the reference: "
                             f"{int(bad.sum()) if g.shape == r.shape else g.shape} (shape {tuple(r.shape)})")


def random_axes(op, rng):
    """A random shape for the ops the test knows; the var axes a workload gives."""
    names = [k for k, v in op["axes"].items() if v["type"] == "var"]
    if "num_rows" in names:
        return {"num_rows": rng.randint(1, 3000)}, {}
    if "batch_size" in names:  # paged decode: lengths, the indices they sum to, a pool larger
        b = rng.randint(1, 80)
        lengths = [rng.randint(1, 1500) for _ in range(b)]
        total = sum(lengths)
        return ({"batch_size": b, "num_kv_indices": total, "num_pages": total + rng.randint(0, 5000)},
                {"kv_indptr": {"lengths": lengths}})
    return None, None


def main():
    pkg, op_dir = sys.argv[1], sys.argv[2]
    mod = importlib.import_module(pkg)
    op = json.load(open(os.path.join(op_dir, "op.json")))
    ns = {}
    exec(op["reference"], ns)
    ref_fn = ns["run"]
    rng = random.Random(1)
    cases = [(f"workload {w['id']}", w["axes"], w.get("generators", {}))
             for w in op["ksearch"]["check_workloads"] + op["ksearch"]["workloads"]]
    for k in range(8):
        axes, gens = random_axes(op, rng)
        if axes:
            cases.append((f"random shape {axes}", axes, gens))
    for what, axes, gens in cases:
        inputs = make_inputs(op, axes, gens, rng)
        compare(op, mod.run(*inputs), ref_fn(*[x.clone() if torch.is_tensor(x) else x for x in inputs]), what)
        print(f"ok  {what}")
    # torch.compile: the op and its fake implementation, one graph
    compiled = torch.compile(lambda *a: mod.run(*a), fullgraph=True)
    for what, axes, gens in cases[:3] + cases[-2:]:
        inputs = make_inputs(op, axes, gens, rng)
        compare(op, compiled(*inputs), ref_fn(*inputs), "torch.compile, " + what)
    print("ok  torch.compile(fullgraph=True)")
    # CUDA graphs: captured once, replayed on new inputs copied into the captured ones
    what, axes, gens = cases[-1]
    inputs = make_inputs(op, axes, gens, rng)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        mod.run(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = mod.run(*inputs)
    for trial in range(3):
        fresh = make_inputs(op, axes, gens, random.Random(100 + trial))
        for a, b in zip(inputs, fresh):
            if torch.is_tensor(a):
                a.copy_(b)
        graph.replay()
        torch.cuda.synchronize()
        compare(op, out, ref_fn(*inputs), f"CUDA graph replay {trial}")
    print("ok  CUDA graph capture and replay")
    # a wrong call is refused, naming the tensor
    first = next(n for n, t in op["inputs"].items() if t["shape"])
    bad = make_inputs(op, cases[0][1], cases[0][2], rng)
    i = list(op["inputs"]).index(first)
    bad[i] = bad[i].to(torch.float32 if bad[i].dtype != torch.float32 else torch.float16)
    try:
        mod.run(*bad)
        raise SystemExit("a tensor of the wrong dtype was accepted")
    except RuntimeError as e:
        if f"{first}: expected dtype" not in str(e):
            raise SystemExit(f"the wrong dtype's error does not name {first}: {e}")
    print("ok  a wrong dtype is refused, naming the tensor")
    print("all ok")


if __name__ == "__main__":
    main()
