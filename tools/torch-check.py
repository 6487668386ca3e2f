#!/usr/bin/env python3
"""Cross-check a ksearch candidate against its operator's PyTorch reference.

Independent of ksearch's C engine: reads OP_DIR/op.json and the candidate's
/* ksearch {...} */ block, generates inputs with torch, runs the op.json
`reference` (Python), compiles the candidate with NVRTC and launches its plan
on torch's stream through the CUDA driver API (both by ctypes, tools/cuda_ctypes.py:
nothing to install beyond torch), and compares, for every check workload and two
fresh input sets.  Launches marked "pdl" run plainly, one after the other.
With --time it also times the benchmark workloads (L2 flushed before every
repetition, three input sets rotating).  --dry-run needs neither torch nor
a GPU: it parses everything and evaluates every launch for every workload.
--compile-only needs NVRTC and --arch, no GPU and no torch: it compiles every
param set to a cubin and looks for each launched kernel in it.
--definition DEF.json checks against that FlashInfer-Bench Definition's
reference instead (its axes, inputs and outputs must be op.json's): a
reference.cu finished after `ksearch op new` against the Definition it came
from.  An op.json that still lists ksearch.todo is refused, naming them.

Exit status: 0 all passed, 1 a candidate failed (contract, compile, launch,
mismatch), 2 usage error (command line, op.json).
"""
import argparse
import ast
import ctypes
import itertools
import json
import os
import random
import re
import statistics
import sys

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MAX = (1 << 31) - 1
DTYPES = ("bfloat16", "float16", "float32", "int32", "int64")
GEN_KINDS = {"normal": {"mean", "std"}, "uniform": {"low", "high"}, "const": {"value"},
             "indptr": {"total", "min", "start", "lengths"}, "page_permutation": {"pool"}}
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class UsageError(Exception):
    """Command line or op.json problem: exit 2."""


class CandidateError(Exception):
    """The candidate breaks the contract (block, expressions, args): exit 1."""


# ---------------------------------------------------------------- expressions
_EXPR_CHARS = re.compile(r"^[A-Za-z0-9_+\-*/%(),\s]*$")
_COND_CHARS = re.compile(r"^[A-Za-z0-9_+\-*/%(),\s<>=!&|]*$")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_])[0-9][A-Za-z0-9_]*")


def _tdiv(a, b):  # C division: truncate toward zero
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def eval_expr(src, env, condition=True):
    """Integer expression over env: + - * / % (C truncation), unary -, cdiv, min, max, and C's
    comparisons, !, && and || (1 or 0), as ksearch's grammar allows in every expression (a launch
    size like "batch_size*(MERGE == 2)" as much as a constraint).  condition=False: arithmetic only."""
    if isinstance(src, int) and not isinstance(src, bool):
        return src
    if not isinstance(src, str) or not src.strip():
        raise ValueError(f"expression must be a non-empty string, got {src!r}")

    def fail(msg):
        raise ValueError(f'in "{src}": {msg}')

    if not (_COND_CHARS if condition else _EXPR_CHARS).match(src):
        fail("only integers, names, + - * / %, parentheses, commas and cdiv/min/max are allowed"
             + (", and comparisons, !, && and ||" if condition else ""))
    for tok in _NUMBER.findall(src):
        if not tok.isdigit():
            fail(f"bad integer literal '{tok}'")
    text = src.strip()
    if condition:  # C's boolean operators in Python's syntax
        text = re.sub(r"!(?!=)", " not ", text.replace("&&", " and ").replace("||", " or "))
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        fail(f"syntax error ({e.msg})")
    cmp_ops = {ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
               ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}

    def chk(v):
        if not INT64_MIN <= v <= INT64_MAX:
            fail("integer overflow (64-bit)")
        return v

    def ev(n):
        if condition and isinstance(n, ast.BoolOp):  # short-circuit, as C
            for v in n.values:
                x = ev(v)
                if isinstance(n.op, ast.And) and not x:
                    return 0
                if isinstance(n.op, ast.Or) and x:
                    return 1
            return 1 if isinstance(n.op, ast.And) else 0
        if condition and isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            return 0 if ev(n.operand) else 1
        if condition and isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in cmp_ops:
            return 1 if cmp_ops[type(n.ops[0])](ev(n.left), ev(n.comparators[0])) else 0
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return chk(n.value)
        if isinstance(n, ast.Name):
            if n.id not in env:
                fail(f"unknown name '{n.id}' (known: {', '.join(sorted(env)) or 'none'})")
            return env[n.id]
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return chk(-ev(n.operand))
        if isinstance(n, ast.BinOp) and type(n.op) in (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Mod):
            a, b = ev(n.left), ev(n.right)
            if isinstance(n.op, ast.Add):
                return chk(a + b)
            if isinstance(n.op, ast.Sub):
                return chk(a - b)
            if isinstance(n.op, ast.Mult):
                return chk(a * b)
            if b == 0:
                fail("division by zero" if isinstance(n.op, ast.Div) else "modulo by zero")
            q = chk(_tdiv(a, b))
            return q if isinstance(n.op, ast.Div) else chk(a - b * q)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.keywords:
            f, args = n.func.id, [ev(a) for a in n.args]
            if f == "cdiv":
                if len(args) != 2:
                    fail("cdiv takes 2 arguments")
                if args[1] <= 0:
                    fail(f"cdiv by {args[1]} (divisor must be > 0)")
                return chk(-((-args[0]) // args[1]))
            if f in ("min", "max"):
                if not args:
                    fail(f"{f} needs at least 1 argument")
                return (min if f == "min" else max)(args)
            fail(f"unknown function '{f}' (known: cdiv, min, max)")
        fail(f"unsupported syntax '{ast.unparse(n)}'")

    return ev(tree.body)


# ---------------------------------------------------------------- op.json and candidate
def load_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(f"{what} {path}: {e}")


def load_op(op_dir):
    op = load_json(os.path.join(op_dir, "op.json"), "op definition")
    ks = op.get("ksearch")
    if isinstance(ks, dict) and ks.get("todo"):
        raise UsageError(f"op.json is unfinished: ksearch.todo lists {', '.join(map(str, ks['todo']))} "
                         "(ksearch op new wrote them; fill them in, then delete ksearch.todo)")
    for key, where in (("axes", op), ("inputs", op), ("outputs", op), ("ksearch", op)):
        if not isinstance(where.get(key), dict):
            raise UsageError(f"op.json: '{key}' must be an object")
    for key in ("generators", "tolerances"):
        if not isinstance(ks.get(key), dict):
            raise UsageError(f"op.json: 'ksearch.{key}' must be an object")
    for key in ("workloads", "check_workloads"):
        if not isinstance(ks.get(key), list) or not ks[key]:
            raise UsageError(f"op.json: 'ksearch.{key}' must be a non-empty list")
    for name, t in list(op["inputs"].items()) + list(op["outputs"].items()):
        if t.get("dtype") not in DTYPES:
            raise UsageError(f"op.json: tensor '{name}' has dtype {t.get('dtype')!r} (known: {', '.join(DTYPES)})")
        for a in t.get("shape") or []:
            if a not in op["axes"] and a not in ks.get("derived_axes", {}):
                raise UsageError(f"op.json: tensor '{name}' uses unknown axis '{a}'")
    for name in op["inputs"]:
        if name not in ks["generators"]:
            raise UsageError(f"op.json: input '{name}' has no generator")
    for name in op["outputs"]:
        if name not in ks["tolerances"]:
            raise UsageError(f"op.json: output '{name}' has no tolerance")
    return op


def use_definition(op, path):
    """Take the reference from a FlashInfer-Bench Definition file, after checking that its
    interface is op.json's: the same axes, inputs and outputs (names, order, dtypes, shapes)."""
    d = load_json(path, "definition")
    for key in ("axes", "inputs", "outputs"):
        mine, theirs = op.get(key, {}), d.get(key) if isinstance(d, dict) else None
        if not isinstance(theirs, dict):
            raise UsageError(f"--definition {path}: '{key}' must be an object")
        if list(mine) != list(theirs):
            raise UsageError(f"--definition {path}: {key} {list(theirs)} are not op.json's {list(mine)}")
        for name in mine:
            a, b = mine[name], theirs[name]
            fields = ("type", "value") if key == "axes" else ("shape", "dtype")
            for f in fields:
                if a.get(f) != b.get(f):
                    what = "axis" if key == "axes" else key[:-1]
                    raise UsageError(f"--definition {path}: {what} '{name}' has {f} {b.get(f)!r}, "
                                     f"op.json {a.get(f)!r}")
    if not isinstance(d.get("reference"), str):
        raise UsageError(f"--definition {path}: no reference")
    op["reference"] = d["reference"]


def parse_candidate(path, op):
    try:
        with open(path) as f:
            src = f.read()
    except OSError as e:
        raise UsageError(f"candidate {path}: {e}")
    # like the engine: skip blank lines and comments up to the first /* ksearch ... */
    pos, text, end = 0, None, 0
    while text is None:
        m = re.compile(r"\s*(//[^\n]*|/\*[ \t]*)").match(src, pos)
        if not m:
            raise CandidateError("no /* ksearch { ... } */ block at the top of the file")
        if m.group(1).startswith("//"):
            pos = m.end()
            continue
        end = src.find("*/", m.end())
        if end < 0:
            raise CandidateError("unterminated comment at the top of the file")
        if src.startswith("ksearch", m.end()):
            text = src[m.end() + len("ksearch"):end]
        pos = end + 2
    try:
        block = json.loads(text)
    except ValueError as e:
        raise CandidateError(f"ksearch block is not valid JSON: {e}")
    if not isinstance(block, dict):
        raise CandidateError("ksearch block must be a JSON object")
    for k in block:
        if k not in ("params", "start", "constraints", "scratch", "launch"):
            raise CandidateError(f"ksearch block: unknown field '{k}' (fields: params, start, constraints, scratch, launch)")
    params = block.get("params", {}) or {}
    constraints = block.get("constraints", []) or []
    if not isinstance(constraints, list) or not all(isinstance(c, str) and c.strip() for c in constraints):
        raise CandidateError("'constraints' must be a list of expressions")
    scratch = block.get("scratch", {}) or {}
    launch = block.get("launch")
    if not isinstance(params, dict) or not isinstance(scratch, dict):
        raise CandidateError("'params' and 'scratch' must be objects")
    axes = set(op["axes"])
    tensors = set(op["inputs"]) | set(op["outputs"])
    for k, vals in params.items():
        if not IDENT.match(k) or k in axes or k in tensors:
            raise CandidateError(f"param '{k}' is not a C identifier or has the name of an axis or tensor")
        if not isinstance(vals, list) or not vals or not all(type(v) is int for v in vals) \
                or len(set(vals)) != len(vals):
            raise CandidateError(f"param '{k}' must be a non-empty list of distinct integers")
    start = block.get("start", {}) or {}
    if not isinstance(start, dict):
        raise CandidateError("'start' must be an object of NAME -> value")
    for k, v in start.items():  # the default params: each list with its start value first, as ksearch begins there
        if k not in params:
            raise CandidateError(f"start.{k}: not a param")
        if v not in params[k]:
            raise CandidateError(f"start.{k}: {v} is not one of its values {params[k]}")
        params[k] = [v] + [x for x in params[k] if x != v]
    for k, v in scratch.items():
        if not IDENT.match(k) or k in tensors or k in axes or k in params:
            raise CandidateError(f"scratch '{k}' is not a C identifier or clashes with a tensor, axis or param")
        if not (isinstance(v, list) and len(v) in (2, 3) and v[0] in DTYPES
                and (len(v) == 2 or v[2] == "zeroed")):
            raise CandidateError(f"scratch '{k}' must be [dtype, element-count expression] or "
                                 "[dtype, element-count expression, \"zeroed\"]")
    if not isinstance(launch, list) or not launch:
        raise CandidateError("'launch' must be a non-empty list")
    for i, l in enumerate(launch):
        if not isinstance(l, dict) or not IDENT.match(str(l.get("kernel", ""))):
            raise CandidateError(f"launch {i}: 'kernel' must be a C identifier")
        for k in l:
            if k not in ("kernel", "grid", "block", "smem", "args", "pdl"):
                raise CandidateError(f"launch {i}: unknown field '{k}' (fields: kernel, grid, block, smem, args, pdl)")
        if not isinstance(l.get("pdl", False), bool):
            raise CandidateError(f"launch {i} ({l['kernel']}): 'pdl' must be true or false")
        for key in ("grid", "block"):
            if not isinstance(l.get(key), list) or not 1 <= len(l[key]) <= 3:
                raise CandidateError(f"launch {i} ({l['kernel']}): '{key}' must be a list of 1 to 3 expressions")
        if not isinstance(l.get("args"), list):
            raise CandidateError(f"launch {i} ({l['kernel']}): 'args' must be a list")
        for a in l["args"]:
            if a not in tensors and a not in axes and a not in scratch:
                raise CandidateError(f"launch {i} ({l['kernel']}): arg '{a}' is not an op tensor, scalar, axis or scratch buffer")
        if not re.search(r"\b%s\s*\(" % re.escape(l["kernel"]), src[pos:]):
            print(f"warning: kernel '{l['kernel']}' not found in the source", file=sys.stderr)
    for c in constraints:
        try:
            eval_expr(c, {k: v[0] for k, v in params.items()}, condition=True)
        except ValueError as e:
            if "division" not in str(e) and "modulo" not in str(e) and "cdiv by" not in str(e):
                raise CandidateError(f"constraint: {e}")
    return src, params, constraints, scratch, launch


def allowed(combo, constraints):
    """Does a param combination meet every constraint? (One that cannot be decided does not.)"""
    try:
        return all(eval_expr(c, combo, condition=True) for c in constraints)
    except ValueError:
        return False


def param_sets(params, constraints, overrides, all_params):
    """The default params (the block's start and the first values, or else the first combination,
    first param varying slowest, that meets the constraints), or (all_params) every allowed
    combination; --param
    pins values. A pinned combination that breaks a constraint is a usage error, as in ksearch."""
    names = list(params)
    for k, v in overrides.items():
        if k not in params:
            raise UsageError(f"--param {k}: the candidate has no such param (has: {', '.join(names) or 'none'})")
        if v not in params[k]:
            print(f"warning: {k}={v} is outside the candidate's list {params[k]}", file=sys.stderr)
    lists = [[overrides[n]] if n in overrides else params[n] for n in names]
    combos = [dict(zip(names, c)) for c in itertools.product(*lists)]
    ok = [c for c in combos if allowed(c, constraints)]
    if not ok:
        raise UsageError("no param combination meets the candidate's constraints"
                         + (" with the --param values given" if overrides else ""))
    return ok if all_params else ok[:1]


def workload_env(op, wl):
    env = {n: int(a["value"]) for n, a in op["axes"].items() if a.get("type") == "const"}
    for k, v in (wl.get("axes") or {}).items():
        if k not in op["axes"]:
            raise UsageError(f"workload {wl.get('id')}: unknown axis '{k}'")
        if op["axes"][k].get("type") == "const" and int(v) != env[k]:
            raise UsageError(f"workload {wl.get('id')}: const axis '{k}' set to {v}")
        env[k] = int(v)
    for k, e in op["ksearch"].get("derived_axes", {}).items():
        if k in (wl.get("axes") or {}):
            continue  # the workload gave it explicitly
        try:
            env[k] = eval_expr(e, env)
        except ValueError as err:
            raise UsageError(f"workload {wl.get('id')}: derived axis '{k}': {err}")
    for k in op["axes"]:
        if k not in env:
            raise UsageError(f"workload {wl.get('id')}: var axis '{k}' has no value")
    for k, v in env.items():
        if not 0 <= v <= INT32_MAX:
            raise UsageError(f"workload {wl.get('id')}: axis '{k}' = {v} is outside [0, 2^31)")
    return env


def shape_of(t, env):
    return None if t.get("shape") is None else tuple(env[a] for a in t["shape"])


def gen_spec(op, wl, name):
    spec = dict(op["ksearch"]["generators"][name])
    over = (wl.get("generators") or {}).get(name)
    if over is not None:
        spec = dict(over)  # an override replaces the generator, as in the engine
    kind = spec.get("kind")
    if kind not in GEN_KINDS:
        raise UsageError(f"workload {wl.get('id')}: input '{name}': unknown generator kind {kind!r}")
    extra = set(spec) - GEN_KINDS[kind] - {"kind"}
    if extra:
        raise UsageError(f"workload {wl.get('id')}: input '{name}': unknown generator fields {sorted(extra)}")
    return spec


def plan_workload(op, wl, params, scratch, launch):
    """Axes, shapes, generator checks, scratch sizes and launch dims for one workload."""
    env = workload_env(op, wl)
    shapes = {n: shape_of(t, env) for n, t in list(op["inputs"].items()) + list(op["outputs"].items())}
    gens = {}
    for n, t in op["inputs"].items():
        g = gens[n] = gen_spec(op, wl, n)
        if g["kind"] in ("indptr", "page_permutation"):
            s = shapes[n]
            if s is None or len(s) != 1 or t["dtype"] not in ("int32", "int64"):
                raise UsageError(f"input '{n}': {g['kind']} needs a 1-D int32/int64 tensor")
            key = "total" if g["kind"] == "indptr" else "pool"
            try:
                g["_" + key] = eval_expr(g[key], env)
            except (KeyError, ValueError) as e:
                raise UsageError(f"workload {wl.get('id')}: input '{n}': {key}: {e}")
            if g["kind"] == "indptr":
                b, lo, lengths, start = s[0] - 1, g.get("min", 1), g.get("lengths"), g.get("start", 0)
                tokens = g["_total"] - start  # indptr[0] = start
                if b < 0 or start < 0 or tokens < 0 or (lengths is not None and (len(lengths) != b or sum(lengths) != tokens)) \
                        or b * lo > tokens or (b == 0 and tokens != 0):
                    raise UsageError(f"workload {wl.get('id')}: input '{n}': indptr lengths cannot sum to {g['_total']}")
            elif s[0] > g["_pool"]:
                raise UsageError(f"workload {wl.get('id')}: input '{n}': {s[0]} pages from a pool of {g['_pool']}")
    penv = dict(env, **params)
    try:
        sizes = {k: eval_expr(v[1], penv) for k, v in scratch.items()}
        steps = []
        for l in launch:
            grid = [eval_expr(e, penv) for e in l["grid"]] + [1] * (3 - len(l["grid"]))
            block = [eval_expr(e, penv) for e in l["block"]] + [1] * (3 - len(l["block"]))
            smem = eval_expr(l.get("smem", "0"), penv)
            steps.append((l, tuple(grid), tuple(block), smem))
    except ValueError as e:
        raise CandidateError(f"workload {wl.get('id')}: {e}")
    for k, n in sizes.items():
        if n < 0:
            raise CandidateError(f"workload {wl.get('id')}: scratch '{k}' has {n} elements")
    for l, grid, block, smem in steps:
        what = f"workload {wl.get('id')}: launch {l['kernel']}"
        if min(grid + block) < 1 or grid[0] > INT32_MAX or max(grid[1:]) > 65535:
            raise CandidateError(f"{what}: bad grid {grid}")
        if block[0] * block[1] * block[2] > 1024 or block[2] > 64:
            raise CandidateError(f"{what}: bad block {block} (at most 1024 threads, z <= 64)")
        if not 0 <= smem <= 256 * 1024:
            raise CandidateError(f"{what}: bad dynamic shared memory {smem}")
    return env, shapes, gens, sizes, steps


# ---------------------------------------------------------------- GPU side (torch + ctypes NVRTC/driver, lazily)
def cuda_ctypes():
    """tools/cuda_ctypes.py, beside this file: NVRTC and the driver API through ctypes."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import cuda_ctypes as cc
    return cc


def nvrtc_options(params, arch):
    return ["-std=c++17", "--gpu-architecture=" + arch] + [f"-D{k}={v}" for k, v in params.items()]


class Gpu:
    def __init__(self):
        import torch
        if not torch.cuda.is_available():
            raise ImportError("torch sees no CUDA GPU")
        cc = cuda_ctypes()
        # torch's primary context, made now, is the one the driver calls find current
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        self.torch, self.cc, self.stream = torch, cc, None
        self.driver = cc.Driver(torch.cuda.current_device())
        self.nvrtc = cc.Nvrtc()
        self.tdt = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32,
                    "int32": torch.int32, "int64": torch.int64}

    def make_input(self, spec, shape, dtype, seed):
        torch, kind, rng = self.torch, spec["kind"], random.Random(seed)
        if shape is None:  # scalar, passed by value
            v = {"normal": lambda: rng.gauss(spec.get("mean", 0), spec.get("std", 1)),
                 "uniform": lambda: rng.uniform(spec.get("low", 0), spec.get("high", 1)),
                 "const": lambda: spec["value"]}[kind]()
            return int(v) if dtype.startswith("int") else float(v)
        dt, g = self.tdt[dtype], torch.Generator(device="cuda").manual_seed(seed)
        if kind in ("normal", "uniform"):
            f = torch.randn if kind == "normal" else torch.rand
            v = f(shape, generator=g, device="cuda", dtype=torch.float32)
            v = v * spec.get("std", 1) + spec.get("mean", 0) if kind == "normal" else \
                v * (spec.get("high", 1) - spec.get("low", 0)) + spec.get("low", 0)
            return (v.floor() if dtype.startswith("int") else v).to(dt)
        if kind == "const":
            return torch.full(shape, spec["value"], dtype=dt, device="cuda")
        if kind == "indptr":
            b, lo, start = shape[0] - 1, spec.get("min", 1), spec.get("start", 0)
            total = spec["_total"] - start  # the requests' tokens: indptr[0] = start
            lengths = spec.get("lengths")
            if lengths is None:  # b parts of the extra (total - b*min), cut at random points
                extra = total - b * lo
                cuts = sorted(rng.randint(0, extra) for _ in range(b - 1)) if b > 0 else []
                lengths = [lo + c2 - c1 for c1, c2 in zip([0] + cuts, cuts + [extra])] if b > 0 else []
            return torch.tensor(list(itertools.accumulate([start] + list(lengths))), dtype=dt, device="cuda")
        perm = torch.randperm(spec["_pool"], generator=torch.Generator().manual_seed(seed))
        return perm[:shape[0]].to(device="cuda", dtype=dt)

    def make_inputs(self, op, shapes, gens, seed):
        rng = random.Random(seed)
        return {n: self.make_input(gens[n], shapes[n], t["dtype"], rng.getrandbits(62))
                for n, t in op["inputs"].items()}

    def poisoned(self, shape, dtype):
        t = self.torch.empty(shape if shape is not None else (), dtype=self.tdt[dtype], device="cuda")
        t.view(-1).view(self.torch.uint8).fill_(0xFF)  # NaN for floats, -1 for ints
        return t

    def reference(self, op, fn, inputs):
        outs = fn(*[v.clone() if hasattr(v, "clone") else v for v in inputs.values()])
        outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
        if len(outs) != len(op["outputs"]):
            raise UsageError(f"reference returned {len(outs)} outputs, op.json declares {len(op['outputs'])}")
        return dict(zip(op["outputs"], outs))

    def compile(self, src, params, arch, launch, path):
        """NVRTC to a cubin, loaded into torch's context: {kernel name: cuda_ctypes.Kernel}."""
        image, _ = self.nvrtc.compile(src, nvrtc_options(params, arch), os.path.basename(path))
        mod = self.driver.load(image)
        return {l["kernel"]: mod.function(l["kernel"]) for l in launch}

    def args(self, l, op, env, bufs):
        """The launch's arguments as the engine passes them: tensors as device pointers, scalar
        inputs by value in their dtype (16-bit floats as their bits), axes as int."""
        ct, torch, out = ctypes, self.torch, []
        for a in l["args"]:
            v, t = bufs.get(a), op["inputs"].get(a) or op["outputs"].get(a)
            if hasattr(v, "data_ptr"):
                out.append(ct.c_uint64(v.data_ptr()))
            elif t is not None:  # scalar input, by value in its dtype
                if t["dtype"] in ("bfloat16", "float16"):
                    bits = torch.tensor([v], dtype=self.tdt[t["dtype"]]).view(torch.int16).item()
                    out.append(ct.c_uint16(bits & 0xFFFF))
                else:
                    out.append({"float32": ct.c_float, "int32": ct.c_int32, "int64": ct.c_int64}[t["dtype"]](v))
            else:
                out.append(ct.c_int32(env[a]))
        return self.cc.KernelArgs(out)

    def plan_args(self, steps, op, env, bufs):
        return [self.args(l, op, env, bufs) for l, _, _, _ in steps]

    def launch(self, kernels, steps, argv, zero=()):
        """The plan's launches in order, on torch's current stream (where the timing events go);
        the "zeroed" scratch buffers in zero are zeroed first, inside the timed sequence, as ksearch does."""
        for t in zero:
            t.zero_()
        if self.stream is None:
            self.stream = self.torch.cuda.current_stream().cuda_stream
        for (l, grid, block, smem), a in zip(steps, argv):
            kernels[l["kernel"]].launch(grid, block, a, smem, self.stream)

    def compare(self, name, got, ref, tol, limit=5):
        torch = self.torch
        g, r = got.detach().double().cpu(), ref.detach().double().cpu()
        if tuple(g.shape) != tuple(r.shape):
            return False, f"{name}: shape {tuple(g.shape)}, reference {tuple(r.shape)}"
        err, allowed = (g - r).abs(), tol["atol"] + tol["rtol"] * r.abs()
        bad = ~torch.isfinite(g) | ~torch.isfinite(r) | (err > allowed)
        fin = torch.isfinite(err)
        maxerr = err[fin].max().item() if fin.any() else 0.0
        sel = fin & (allowed > 0)
        ratio = (err[sel] / allowed[sel]).max().item() if sel.any() else 0.0
        nonfinite = int((~torch.isfinite(g)).sum())
        summary = f"max abs err {maxerr:.3g}, worst err/allowed {ratio:.2f}" + \
            (f", {nonfinite} NaN/Inf" if nonfinite else "")
        if not bad.any():
            return True, f"{name}: {summary}"
        idx = bad.nonzero()[:limit].tolist()
        lines = [f"{name}: {int(bad.sum())} of {g.numel()} elements off, {summary}"]
        lines += [f"    {tuple(i)}: got {g[tuple(i)].item():.6g}, expected {r[tuple(i)].item():.6g}" for i in idx]
        return False, "\n".join(lines)


def alloc_outputs(gpu, op, shapes, scratch, sizes):
    bufs = {n: gpu.poisoned(shapes[n], t["dtype"]) for n, t in op["outputs"].items()}
    bufs.update({k: gpu.poisoned((sizes[k],), scratch[k][0]) for k in scratch})
    return bufs


def zeroed(scratch, bufs):
    """The scratch buffers declared "zeroed": all zero bytes on entry to every call; the rest stay poisoned."""
    return [bufs[k] for k, v in scratch.items() if len(v) == 3]


def check_candidate(gpu, op, ref_fn, src, params, scratch, launch, args, base_seed):
    """Correctness on every check workload with two input sets; returns (ok, compiled kernels)."""
    try:
        kernels = gpu.compile(src, params, args.arch, launch, args.candidate)
    except Exception as e:
        print(f"  COMPILE ERROR: {e}")
        return False, None
    for name, k in kernels.items():
        a = k.attributes
        print(f"  {name}: {a.get('num_regs')} registers, {a.get('shared_size_bytes')} B static smem, "
              f"{a.get('local_size_bytes')} B local")
    ok = True
    for wl in op["ksearch"]["check_workloads"]:
        if args.workload and wl["id"] not in args.workload:
            continue
        env, shapes, gens, sizes, steps = plan_workload(op, wl, params, scratch, launch)
        for trial in range(2):
            seed = random.Random(f"{base_seed}:{wl['id']}:{trial}").getrandbits(62)
            inputs = gpu.make_inputs(op, shapes, gens, seed)
            ref = {k: v.cpu() for k, v in gpu.reference(op, ref_fn, inputs).items()}
            before = {k: v.clone() for k, v in inputs.items() if hasattr(v, "clone")}
            bufs = alloc_outputs(gpu, op, shapes, scratch, sizes)
            bufs.update(inputs)
            try:
                gpu.launch(kernels, steps, gpu.plan_args(steps, op, env, bufs), zeroed(scratch, bufs))
                gpu.torch.cuda.synchronize()
            except Exception as e:  # a launch failure or a fault: the CUDA context is lost
                print(f"  {wl['id']:<18} trial {trial + 1}: CRASH {e}\nFAIL (crash; stopping, the CUDA context is unusable)")
                sys.stdout.flush()
                os._exit(1)
            msgs, wok = [], True
            for n, t in before.items():
                if not gpu.torch.equal(t.view(-1).view(gpu.torch.uint8), inputs[n].view(-1).view(gpu.torch.uint8)):
                    wok, msgs = False, msgs + [f"input '{n}' was modified"]
            for n in op["outputs"]:
                good, msg = gpu.compare(n, bufs[n], ref[n], op["ksearch"]["tolerances"][n])
                wok, msgs = wok and good, msgs + [msg]
            ok = ok and wok
            print(f"  {wl['id']:<18} trial {trial + 1}: {'PASS' if wok else 'FAIL'}  " + "; ".join(msgs))
    return ok, kernels


def time_events(gpu, fn, flush, reps, warmup, nsets=3):
    """fn(i) runs on input set i; the L2 is flushed before every timed run."""
    torch = gpu.torch
    for i in range(warmup):
        fn(i % nsets)
    evs = []
    for i in range(reps):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(i % nsets)
        e.record()
        evs.append((s, e))
    torch.cuda.synchronize()
    ts = [s.elapsed_time(e) * 1e3 for s, e in evs]  # microseconds
    return statistics.median(ts), min(ts), max(ts)


def time_candidate(gpu, op, ref_fn, kernels, refcu, params, scratch, launch, args, base_seed, ref_times):
    """Times every benchmark workload; ref_times caches the references' times across param sets."""
    torch = gpu.torch
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20)
    flush = torch.empty(max(256 << 20, 4 * l2) // 4, dtype=torch.int32, device="cuda")
    ok = True
    for wl in op["ksearch"]["workloads"]:
        if args.workload and wl["id"] not in args.workload:
            continue
        env, shapes, gens, sizes, steps = plan_workload(op, wl, params, scratch, launch)
        sets = [gpu.make_inputs(op, shapes, gens, random.Random(f"{base_seed}:t:{wl['id']}:{i}").getrandbits(62))
                for i in range(3)]
        bufs = alloc_outputs(gpu, op, shapes, scratch, sizes)
        argv = [gpu.plan_args(steps, op, env, dict(bufs, **s)) for s in sets]
        zero = zeroed(scratch, bufs)
        med, lo, hi = time_events(gpu, lambda i: gpu.launch(kernels, steps, argv[i], zero), flush, args.reps,
                                  args.warmup)
        ref = gpu.reference(op, ref_fn, sets[(args.reps - 1) % 3])  # the last timed run, checked again
        checks = [gpu.compare(n, bufs[n], ref[n], op["ksearch"]["tolerances"][n]) for n in op["outputs"]]
        good = all(c[0] for c in checks)
        ok = ok and good
        if wl["id"] not in ref_times:
            tref = time_events(gpu, lambda i: ref_fn(*sets[i].values()), flush, args.reps, args.warmup)[0]
            tcu = None
            if refcu is not None:
                rk, rlaunch, rscratch, rfirst = refcu
                renv, _, _, rsizes, rsteps = plan_workload(op, wl, rfirst, rscratch, rlaunch)
                rbufs = alloc_outputs(gpu, op, shapes, rscratch, rsizes)
                rargv = [gpu.plan_args(rsteps, op, renv, dict(rbufs, **s)) for s in sets]
                rzero = zeroed(rscratch, rbufs)
                tcu = time_events(gpu, lambda i: gpu.launch(rk, rsteps, rargv[i], rzero), flush, args.reps,
                                  args.warmup)[0]
            ref_times[wl["id"]] = (tref, tcu)
        tref, tcu = ref_times[wl["id"]]
        line = f"  {wl['id']:<18} {med:9.2f} us (min {lo:.2f}, max {hi:.2f})  torch ref {tref:9.2f} us"
        if tcu is not None:
            line += f"  reference.cu {tcu:9.2f} us (x{tcu / med:.2f})"
        mb = eval_expr(op["ksearch"]["min_bytes"], env) if "min_bytes" in op["ksearch"] else 0
        line += f"  {mb / (med * 1e3):8.1f} GB/s"
        print(line + ("" if good else "\n    FAIL: outputs of the timed runs are wrong: " +
                      "; ".join(c[1] for c in checks)))
    return ok


# ---------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="exit status: 0 all passed, 1 a candidate failed, 2 usage error")
    ap.add_argument("op_dir", metavar="OP_DIR")
    ap.add_argument("candidate", metavar="CANDIDATE.cu")
    ap.add_argument("--param", action="append", default=[], metavar="K=V", help="set a param (default: its start, else its first value)")
    ap.add_argument("--all-params", action="store_true", help="every combination of the params")
    ap.add_argument("--time", action="store_true", help="also time the benchmark workloads")
    ap.add_argument("--arch", help="NVRTC target, e.g. sm_90a (default: the GPU's, 'a' on sm_90)")
    ap.add_argument("--seed", type=int, help="base seed of the inputs (default: random, printed)")
    ap.add_argument("--workload", action="append", metavar="ID", help="only these workload ids")
    ap.add_argument("--reps", type=int, default=50, help="timed repetitions (default 50)")
    ap.add_argument("--warmup", type=int, default=5, help="warm-up runs (default 5)")
    ap.add_argument("--definition", metavar="DEF.json",
                    help="a FlashInfer-Bench Definition whose Python reference to check against "
                         "(its interface must be op.json's; default: op.json's own reference)")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU, no torch: parse and evaluate every launch for every workload")
    ap.add_argument("--compile-only", action="store_true",
                    help="no GPU, no torch: compile every param set with NVRTC for --arch (required)")
    args = ap.parse_args(argv)
    try:
        if args.reps < 1 or args.warmup < 0:
            raise UsageError("--reps must be >= 1 and --warmup >= 0")
        overrides = {}
        for p in args.param:
            k, sep, v = p.partition("=")
            if not sep or not re.fullmatch(r"-?[0-9]+", v.strip()):
                raise UsageError(f"--param {p}: expected NAME=INTEGER")
            overrides[k.strip()] = int(v)
        op = load_op(args.op_dir)
        if args.definition:
            use_definition(op, args.definition)
        try:
            ref_src = op["reference"]
            ref_code = compile(ref_src, os.path.join(args.op_dir, "op.json:reference"), "exec")
        except (KeyError, SyntaxError, TypeError) as e:
            raise UsageError(f"op.json reference: {e}")
        try:
            src, params, constraints, scratch, launch = parse_candidate(args.candidate, op)
        except CandidateError as e:
            print(f"{args.candidate}: CONTRACT ERROR: {e}")
            return 1
        combos = param_sets(params, constraints, overrides, args.all_params)
        wls = op["ksearch"]["check_workloads"] + op["ksearch"]["workloads"]
        unknown = set(args.workload or []) - {w.get("id") for w in wls}
        if unknown:
            raise UsageError(f"--workload: unknown id(s) {', '.join(sorted(unknown))}")
        if args.dry_run:
            return dry_run(op, args, params, combos, scratch, launch, wls)
        if args.compile_only:
            return compile_only(op, args, src, combos, launch)
        try:
            gpu = Gpu()
        except (ImportError, OSError, RuntimeError) as e:  # RuntimeError: cuda_ctypes.CudaError, torch's
            raise UsageError(f"{e}: torch with a GPU, the NVIDIA driver (libcuda.so.1) and NVRTC are needed "
                             "(or use --dry-run)")
        if args.arch is None:
            major, minor = gpu.torch.cuda.get_device_capability()
            args.arch = f"sm_{major}{minor}" + ("a" if major == 9 else "")
        seed = args.seed if args.seed is not None else random.SystemRandom().getrandbits(31)
        ns = {}
        exec(ref_code, ns)
        ref_fn = ns.get("run")
        if not callable(ref_fn):
            raise UsageError("op.json reference defines no run()")
        refcu = None
        ref_path = os.path.join(args.op_dir, "reference.cu")
        if args.time and os.path.exists(ref_path) and os.path.realpath(ref_path) != os.path.realpath(args.candidate):
            try:
                rsrc, rparams, _, rscratch, rlaunch = parse_candidate(ref_path, op)
                rfirst = {k: v[0] for k, v in rparams.items()}  # the params the evaluator times
                refcu = (gpu.compile(rsrc, rfirst, args.arch, rlaunch, ref_path), rlaunch, rscratch, rfirst)
            except Exception as e:
                raise UsageError(f"{ref_path}: {e}")
        print(f"{op['name']}: {args.candidate}, arch {args.arch}, seed {seed}, "
              f"{gpu.torch.cuda.get_device_name()}")
        failed, ref_times = [], {}
        for params_now in combos:
            print(f"params {' '.join(f'{k}={v}' for k, v in params_now.items()) or '(none)'}")
            try:
                ok, kernels = check_candidate(gpu, op, ref_fn, src, params_now, scratch, launch, args, seed)
                if ok and args.time:
                    ok = time_candidate(gpu, op, ref_fn, kernels, refcu, params_now, scratch, launch, args, seed,
                                        ref_times)
            except CandidateError as e:
                print(f"  CONTRACT ERROR: {e}")
                ok = False
            if not ok:
                failed.append(params_now)
        print(f"{len(combos) - len(failed)} passed, {len(failed)} failed")
        return 1 if failed else 0
    except UsageError as e:
        print(f"torch-check: {e}", file=sys.stderr)
        return 2


def compile_only(op, args, src, combos, launch):
    """The NVRTC half alone: every param set to a cubin for --arch, each launched kernel in it."""
    if not args.arch:
        raise UsageError("--compile-only needs --arch (e.g. sm_90a)")
    try:
        nvrtc = cuda_ctypes().Nvrtc()
    except OSError as e:
        raise UsageError(str(e))
    print(f"{op['name']}: {args.candidate}: {len(combos)} param set(s), arch {args.arch}, "
          f"NVRTC {nvrtc.version[0]}.{nvrtc.version[1]} ({nvrtc.path})")
    bad = 0
    for p in combos:
        label = " ".join(f"{k}={v}" for k, v in p.items()) or "(no params)"
        try:
            image, _ = nvrtc.compile(src, nvrtc_options(p, args.arch), os.path.basename(args.candidate))
        except Exception as e:
            print(f"  {label}: COMPILE ERROR: {e}")
            bad += 1
            continue
        cubin = image.startswith(b"\x7fELF")
        names = sorted({l["kernel"] for l in launch})
        missing = [k for k in names if (k.encode() + b"\0" if cubin else b".entry " + k.encode() + b"(") not in image]
        print(f"  {label}: {len(image)} bytes of {'cubin' if cubin else 'PTX'}"
              + (f", MISSING kernel(s) {', '.join(missing)}" if missing else f", kernels {', '.join(names)}"))
        bad += bool(missing)
    print(f"{len(combos) - bad} passed, {bad} failed")
    return 1 if bad else 0


def dry_run(op, args, params, combos, scratch, launch, wls):
    ks = op["ksearch"]
    names = list(op["inputs"])
    tree = ast.parse(op["reference"])
    runs = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "run"]
    if not runs or len(runs[0].args.args) != len(names):
        raise UsageError(f"op.json reference must define run() with {len(names)} arguments ({', '.join(names)})")
    for g in ks.get("grid", []):
        e = g.get("edges", [])
        if len(e) < 2 or any(b <= a for a, b in zip(e, e[1:])):
            raise UsageError(f"grid descriptor {g.get('descriptor')}: edges must be increasing, at least 2")
    print(f"{op['name']}: {args.candidate}: {len(combos)} param set(s), {len(wls)} workloads (dry run)")
    bad = 0
    for p in combos:
        for wl in wls:
            try:
                env, shapes, gens, sizes, steps = plan_workload(op, wl, p, scratch, launch)
            except CandidateError as e:
                print(f"  {' '.join(f'{k}={v}' for k, v in p.items())}: CONTRACT ERROR: {e}")
                bad += 1
                continue
            try:
                mb = eval_expr(ks.get("min_bytes", "0"), env)
                fl = eval_expr(ks.get("flops", "0"), env)
            except ValueError as e:
                raise UsageError(f"op.json min_bytes/flops: {e}")
            if len(combos) == 1:
                plan = "; ".join(f"{l['kernel']}<<<{g}, {b}, {s}>>>" for l, g, b, s in steps)
                print(f"  {wl['id']:<18} {' '.join(f'{k}={v}' for k, v in env.items())}  "
                      f"min_bytes {mb} flops {fl}  {plan}" + (f"  scratch {sizes}" if sizes else ""))
    print(f"{len(combos) * len(wls) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
