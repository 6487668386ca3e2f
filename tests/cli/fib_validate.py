#!/usr/bin/env python3
"""Check a folder written by `ksearch export-best --format flashinfer-bench`.

    fib_validate.py DIR [WHEELS_SITE]

Reads DIR as flashinfer_bench.TraceSet.from_path() does when the package can
be imported (WHEELS_SITE: a folder it was installed into with pip --target);
torch is not needed for the data models, so a stand-in is put in its place
when it is missing.  Without the package, the same fields are checked by
hand.  Prints one line per definition, solution, workload and trace count;
exits 1 naming the first problem.
"""
import glob
import json
import os
import sys
import types


def stub_torch():
    """Enough of torch and safetensors.torch for flashinfer_bench.data to import."""
    class Any:
        def __getattr__(self, k):
            return Any()

        def __call__(self, *a, **k):
            return Any()
    def attr(k):
        if k.startswith("__"):
            raise AttributeError(k)
        return Any()
    torch = types.ModuleType("torch")
    torch.__getattr__ = attr
    torch.__file__ = __file__
    torch.__version__ = "0-stub"
    sys.modules["torch"] = torch
    st = types.ModuleType("safetensors")
    stt = types.ModuleType("safetensors.torch")
    st.torch = stt
    sys.modules.setdefault("safetensors", st)
    sys.modules["safetensors.torch"] = stt


def by_package(root):
    from flashinfer_bench.data import TraceSet
    ts = TraceSet.from_path(root)
    sols = [s for v in ts.solutions.values() for s in v]
    for d, sol_list in ts.solutions.items():
        for s in sol_list:
            assert s.get_entry_source() is not None, "entry source missing"
            assert s.spec.binding.value == "torch" and s.spec.destination_passing_style
    for d, traces in ts.traces.items():
        for t in traces:
            assert t.is_successful() and t.evaluation.performance.latency_ms > 0, t
    print("flashinfer_bench", "definitions", sorted(ts.definitions))
    print("solutions", sorted(s.name for s in sols))
    print("workloads", sum(len(v) for v in ts.workloads.values()))
    print("traces", sum(len(v) for v in ts.traces.values()))


def by_hand(root):
    defs = [json.load(open(p)) for p in glob.glob(f"{root}/definitions/**/*.json", recursive=True)]
    sols = [json.load(open(p)) for p in glob.glob(f"{root}/solutions/**/*.json", recursive=True)]
    wls = [json.loads(l) for p in glob.glob(f"{root}/workloads/**/*.jsonl", recursive=True) for l in open(p)]
    trs = [json.loads(l) for p in glob.glob(f"{root}/traces/**/*.jsonl", recursive=True) for l in open(p)]
    for d in defs:
        assert {"name", "op_type", "axes", "inputs", "outputs", "reference"} <= set(d) and "ksearch" not in d
    for s in sols:
        spec = s["spec"]
        assert spec["language"] == "cuda" and spec["binding"] == "torch" and spec["target_hardware"]
        entry = spec["entry_point"].split("::")
        assert len(entry) == 2 and entry[0] in [f["path"] for f in s["sources"]], spec["entry_point"]
        assert s["definition"] in [d["name"] for d in defs]
    for t in wls + trs:
        w = t["workload"]
        assert set(w) == {"axes", "inputs", "uuid"}, w
        for name, spec in w["inputs"].items():
            if spec["type"] == "safetensors":
                assert os.path.exists(os.path.join(root, spec["path"])), spec
    for t in trs:
        e = t["evaluation"]
        assert e["status"] == "PASSED" and e["performance"]["latency_ms"] > 0 and e["environment"]["hardware"]
    print("by hand", "definitions", sorted(d["name"] for d in defs))
    print("solutions", sorted(s["name"] for s in sols))
    print("workloads", len(wls))
    print("traces", len(trs))


def main():
    root = sys.argv[1]
    if len(sys.argv) > 2 and sys.argv[2]:
        sys.path.insert(0, sys.argv[2])
    try:
        import torch  # noqa: F401
    except ImportError:
        stub_torch()
    try:
        import flashinfer_bench  # noqa: F401
        have = True
    except ImportError:
        have = False
    try:
        by_package(root) if have else by_hand(root)
    except Exception as e:
        print(f"fib_validate: {type(e).__name__}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
