#!/usr/bin/env python3
"""Time PyTorch's attention next to a ksearch candidate, on gqa's or mla_decode's workloads.

For each benchmark workload of operators/gqa (B requests, N KV tokens):
  - PyTorch on the paged layout: the op.json reference (a gather of the
    pages, then attention per request) -- the naive baseline;
  - torch.nn.functional.scaled_dot_product_attention on a dense layout with
    the same token count (B requests of N/B tokens each, K/V [B, 4, N/B, 128],
    enable_gqa), with the cuDNN and the flash backends;
  - optionally the candidate, through `ksearch check --json`, in the same run;
and prints them side by side with the HBM floor (min_bytes over the
measured copy bandwidth).  Times are medians of CUDA-event timings with the
L2 flushed before each repetition.

With --op mla_decode: the op.json reference on the paged layout with the
workload's own request lengths, and SDPA on the dense layout (q [B, 16, 1,
576], one shared K [B, 1, N/B, 576] and V [B, 1, N/B, 512], enable_gqa) with
the backends that take a value dim other than the key's (efficient, math).

usage: tools/compare-torch.py [--op gqa|mla_decode] [--ksearch build/ksearch]
                              [--candidate FILE.cu --param K=V ...] [--reps 50] [--json OUT.json]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def eval_axes(op, workload):
    """Axis values of a workload: const axes, the workload's own, then derived."""
    env = {k: v["value"] for k, v in op["axes"].items() if v["type"] == "const"}
    env.update(workload["axes"])
    for name, expr in op["ksearch"].get("derived_axes", {}).items():
        if name not in env:
            env[name] = eval(expr, {"__builtins__": {}}, dict(env))  # trusted: our own op.json
    return env


def time_cuda(torch, fn, reps, flush):
    """Median and (p10, p90) of fn's time in microseconds, L2 flushed before each call."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(reps):
        flush.zero_()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000.0)
    times.sort()
    q = lambda f: times[min(len(times) - 1, int(f * (len(times) - 1) + 0.5))]
    return statistics.median(times), q(0.1), q(0.9)


def copy_bandwidth(torch):
    """Bytes read + written per second of a large device copy, GB/s."""
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for _ in range(10):
        start.record()
        b.copy_(a)
        stop.record()
        stop.synchronize()
        ms.append(start.elapsed_time(stop))
    return 2 * a.numel() / (statistics.median(ms) / 1e3) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ksearch", default=os.path.join(ROOT, "build", "ksearch"))
    ap.add_argument("--op", default="gqa", choices=["gqa", "mla_decode"], help="the operator (default gqa)")
    ap.add_argument("--candidate", help="a candidate of the op to time with ksearch check in the same run")
    ap.add_argument("--param", action="append", default=[], help="K=V for the candidate")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--json", help="write the table as JSON here")
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    op = json.load(open(os.path.join(ROOT, "operators", args.op, "op.json")))
    scope = {}
    exec(op["reference"], scope)  # defines run(...) with the op's inputs in order
    reference = scope["run"]
    gbps = copy_bandwidth(torch)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(1)

    candidate = {}
    if args.candidate:
        cmd = [args.ksearch, "check", args.candidate, "--op", args.op, "--json"]
        for p in args.param:
            cmd += ["--param", p]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode not in (0,):
            print(out.stdout[-2000:], out.stderr[-2000:], file=sys.stderr)
            sys.exit(f"ksearch check failed with exit code {out.returncode}")
        result = json.loads(out.stdout)
        candidate = {w["id"]: w["median_us"] for w in result.get("workloads", [])}

    rows = []
    for wl in op["ksearch"]["workloads"]:
        if args.op == "mla_decode":
            rows.append(mla_row(torch, F, SDPBackend, sdpa_kernel, op, wl, reference, gbps, flush, gen, args,
                                candidate))
            continue
        ax = eval_axes(op, wl)
        B, N, HQ, HKV, D = ax["batch_size"], ax["num_kv_indices"], ax["num_qo_heads"], ax["num_kv_heads"], ax["head_dim"]
        env = dict(ax)
        floor_us = eval(op["ksearch"]["min_bytes"], {"__builtins__": {}}, env) / (gbps * 1e3)
        scale = 1.0 / math.sqrt(D)
        # paged layout, as the op defines it
        pages = ax["num_pages"]
        q = torch.randn(B, HQ, D, dtype=torch.bfloat16, device="cuda", generator=gen)
        kc = torch.randn(pages, 1, HKV, D, dtype=torch.bfloat16, device="cuda", generator=gen)
        vc = torch.randn_like(kc)
        lens = [N // B + (1 if i < N % B else 0) for i in range(B)]
        indptr = torch.tensor([0] + list(itertools_accumulate(lens)), dtype=torch.int32, device="cuda")
        indices = torch.randperm(pages, device="cuda", generator=gen)[:N].to(torch.int32)
        t_ref = time_cuda(torch, lambda: reference(q, kc, vc, indptr, indices, scale), max(5, args.reps // 10), flush)
        # dense layout with the same token count
        L = max(1, N // B)
        qd = q.view(B, HQ, 1, D)
        kd = torch.randn(B, HKV, L, D, dtype=torch.bfloat16, device="cuda", generator=gen)
        vd = torch.randn_like(kd)
        dense = {}
        for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            try:
                with sdpa_kernel([backend]):
                    fn = lambda: F.scaled_dot_product_attention(qd, kd, vd, scale=scale, enable_gqa=True)
                    fn()
                    dense[name] = time_cuda(torch, fn, args.reps, flush)
            except Exception as e:  # a backend may not support this shape or GPU
                dense[name] = None
                print(f"{wl['id']}: {name} backend unavailable: {str(e).splitlines()[0][:120]}", file=sys.stderr)
        rows.append({"id": wl["id"], "B": B, "N": N, "floor_us": floor_us, "torch_paged_us": t_ref[0],
                     "sdpa_cudnn_us": dense["cudnn"][0] if dense["cudnn"] else None,
                     "sdpa_flash_us": dense["flash"][0] if dense["flash"] else None,
                     "candidate_us": candidate.get(wl["id"])})

    print(f"GPU: {torch.cuda.get_device_name()}, copy bandwidth {gbps:.0f} GB/s, torch {torch.__version__}")
    dense_names = ("SDPA effic.", "SDPA math") if args.op == "mla_decode" else ("SDPA cuDNN", "SDPA flash")
    hdr = f"{'workload':14} {'HBM floor':>10} {'torch paged':>12} {dense_names[0]:>11} {dense_names[1]:>11}"
    if candidate:
        hdr += f" {'candidate':>10} {'vs ' + dense_names[0].split()[-1]:>9} {'vs paged':>9} {'SOL':>5}"
    print(hdr)
    fmt = lambda v: f"{v:.2f}" if v else "-"
    for r in rows:
        line = f"{r['id']:14} {r['floor_us']:10.2f} {fmt(r['torch_paged_us']):>12} {fmt(r['sdpa_cudnn_us']):>11} {fmt(r['sdpa_flash_us']):>11}"
        if candidate:
            c = r["candidate_us"]
            ratio = r["sdpa_cudnn_us"] / c if c and r["sdpa_cudnn_us"] else None
            ratio_text = "%.2fx" % ratio if ratio else "-"
            sol_text = "%.0f%%" % (100 * r["floor_us"] / c) if c else "-"
            paged_text = "%.1fx" % (r["torch_paged_us"] / c) if c and r["torch_paged_us"] else "-"
            line += f" {fmt(c):>10} {ratio_text:>9} {paged_text:>9} {sol_text:>5}"
        print(line)
    if args.json:
        json.dump({"gpu": torch.cuda.get_device_name(), "copy_gbps": gbps, "op": args.op,
                   "dense_columns": {"sdpa_cudnn_us": dense_names[0], "sdpa_flash_us": dense_names[1]}, "rows": rows},
                  open(args.json, "w"), indent=2)


def mla_row(torch, F, SDPBackend, sdpa_kernel, op, wl, reference, gbps, flush, gen, args, candidate):
    """One mla_decode workload: the op.json reference on the paged layout, SDPA on a dense one."""
    ax = eval_axes(op, wl)
    B, N, H = ax["batch_size"], ax["num_kv_indices"], ax["num_qo_heads"]
    DC, DP, pages = ax["head_dim_ckv"], ax["head_dim_kpe"], ax["num_pages"]
    floor_us = eval(op["ksearch"]["min_bytes"], {"__builtins__": {}}, dict(ax)) / (gbps * 1e3)
    scale = float(op["ksearch"]["generators"]["sm_scale"]["value"])
    lens = wl.get("generators", {}).get("kv_indptr", {}).get("lengths") or [N // B + (1 if i < N % B else 0) for i in range(B)]
    q_nope = torch.randn(B, H, DC, dtype=torch.bfloat16, device="cuda", generator=gen)
    q_pe = torch.randn(B, H, DP, dtype=torch.bfloat16, device="cuda", generator=gen)
    ckv = torch.randn(pages, 1, DC, dtype=torch.bfloat16, device="cuda", generator=gen)
    kpe = torch.randn(pages, 1, DP, dtype=torch.bfloat16, device="cuda", generator=gen)
    indptr = torch.tensor([0] + list(itertools_accumulate(lens)), dtype=torch.int32, device="cuda")
    indices = torch.randperm(pages, device="cuda", generator=gen)[:N].to(torch.int32)
    t_ref = time_cuda(torch, lambda: reference(q_nope, q_pe, ckv, kpe, indptr, indices, scale),
                      max(5, args.reps // 10), flush)
    L = max(1, N // B)
    qd = torch.cat([q_nope, q_pe], dim=-1).view(B, H, 1, DC + DP)
    kd = torch.randn(B, 1, L, DC + DP, dtype=torch.bfloat16, device="cuda", generator=gen)
    vd = kd[..., :DC]
    dense = {}
    for name, backend in (("effic", SDPBackend.EFFICIENT_ATTENTION), ("math", SDPBackend.MATH)):
        try:
            with sdpa_kernel([backend]):
                fn = lambda: F.scaled_dot_product_attention(qd, kd, vd, scale=scale, enable_gqa=True)
                fn()
                dense[name] = time_cuda(torch, fn, args.reps, flush)
        except Exception as e:  # a backend may not support this shape or GPU
            dense[name] = None
            print(f"{wl['id']}: {name} backend unavailable: {str(e).splitlines()[0][:120]}", file=sys.stderr)
    return {"id": wl["id"], "B": B, "N": N, "floor_us": floor_us, "torch_paged_us": t_ref[0],
            "sdpa_cudnn_us": dense["effic"][0] if dense["effic"] else None,
            "sdpa_flash_us": dense["math"][0] if dense["math"] else None,
            "candidate_us": candidate.get(wl["id"])}


def itertools_accumulate(values):
    total = 0
    for v in values:
        total += v
        yield total


if __name__ == "__main__":
    main()
