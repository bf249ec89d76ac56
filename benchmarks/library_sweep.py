"""Held-out conformance: tiny models from PyPI libraries that tutorcompile was never tuned on.

    pip install -e .[sweep]                      # the libraries below (not in the dev group)
    python benchmarks/library_sweep.py           # every model, backends eager + aot_eager
    python benchmarks/library_sweep.py --libraries kornia,monai --backends eager
    python benchmarks/library_sweep.py --models torchtune.llama3,gpytorch.exact_gp -v
    python benchmarks/library_sweep.py --backends eager,aot_eager,inductor   # slow
    python benchmarks/library_sweep.py --no-torch-compile --json sweep.json
    python benchmarks/library_sweep.py --report sweep.json      # the tables again, no run

The other benchmarks (``conformance.py``, ``real_models.py``) run code this project has
looked at while it was being written. This one is the held-out set: ~30 tiny models
(``library_sweep_models.py``) built from random configs, nothing downloaded, from libraries
with different Python styles --
kornia (classical vision, argument checks), MONAI (medical U-Nets), segmentation-models-pytorch
(encoder/decoder registries over timm), torchtune (LLM components built from functions),
open_clip (CLIP), lucidrains' perceiver-pytorch / vector-quantize-pytorch /
denoising-diffusion-pytorch / tab-transformer-pytorch / local-attention (einops, small
helpers, decorators), e3nn (equivariant tensor products generated with torch.fx), gpytorch
(lazy linear operators, settings context managers) and torchdiffeq (ODE solvers: Python
loops, adaptive steps). None of them is in this project's tests.

For every model, in one run:

* capture: graphs, graph breaks and their reasons (first line and the user's file:line),
  for inference (``eval()``, ``no_grad``) and a training forward (``train()``), from
  ``tc.explain`` and ``torch._dynamo.explain``;
* per backend (``eager`` and ``aot_eager``; ``inductor`` on request, it is slow), for
  ``tc.compile`` and ``torch.compile``: whether inference outputs (two calls: compile, then a
  cache hit) and one training step's gradients (forward, a scalar loss, backward; every
  parameter) match eager, and the seconds of the first call (compile + run);
* crashes, as the exception's type and first line.

"Matches eager" is decided the way PyTorch's own benchmarks decide it
(``torch._dynamo.utils.same`` with ``fp64_ref``): a result equal to eager float32 within
``tol`` passes; otherwise the same model and inputs are run in float64 (eager) as the
referee, and the compiled result passes when its RMS error against float64 is at most twice
eager float32's plus ``tol / 10``. Floating-point reassociation therefore does not count as
wrong, a real error does. Integer outputs (indices) must be equal.

Each library runs in its own subprocess and each model under ``signal.alarm(--timeout)``, so a
hang or a crash of the interpreter costs one model, not the sweep. Output: a per-model table,
a summary (tutorcompile against torch.compile) and tutorcompile's most common graph-break
reasons, grouped by the Python idiom behind them, with the models that hit each.

Installing the libraries: ``pip install -e .[sweep]`` (the optional group ``sweep`` of
``pyproject.toml``; keep ``torch`` pinned to the installed build when you do, e.g. with
``-c`` a constraints file holding ``torch==<version>``, or pip may replace a CPU torch by a
CUDA one). torchtune 0.6 needs ``torchao<0.12``. torchvision from PyPI is a CUDA build:
the sweep calls ``tutorcompile.environment.make_torchvision_importable()`` before importing
timm-based libraries. A library that is not installed is reported as skipped.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import math
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402

import tutorcompile as tc  # noqa: E402
from benchmarks.library_sweep_models import (  # noqa: E402
    REGISTRY,
    ModelSpec,
    _short,
    _timm_libraries_importable,
)

BACKENDS = ("eager", "aot_eager", "inductor")
MODES = ("infer", "train")
TOL = 1e-4


# ---------------------------------------------------------------------------------------------
# Running one model: eager float32, eager float64 (the referee), then each compiler.


def _tensors(obj, out=None) -> list[torch.Tensor]:
    """The tensors in a model's output, in a stable order (tuples, lists, dicts, dataclasses,
    objects with tensor attributes such as gpytorch's distributions)."""
    out = [] if out is None else out
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _tensors(x, out)
    elif isinstance(obj, dict):
        for k in obj:
            _tensors(obj[k], out)
    elif hasattr(obj, "__dataclass_fields__"):
        for k in obj.__dataclass_fields__:
            _tensors(getattr(obj, k), out)
    elif hasattr(obj, "mean") and hasattr(obj, "variance"):  # a torch distribution
        _tensors([obj.mean, obj.variance], out)
    return out


def _map_floats(obj, fn):
    if isinstance(obj, torch.Tensor):
        return fn(obj) if obj.is_floating_point() else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_floats(x, fn) for x in obj)
    if isinstance(obj, dict):
        return {k: _map_floats(v, fn) for k, v in obj.items()}
    return obj


def _default_loss(out) -> torch.Tensor:
    floats = [t for t in _tensors(out) if t.is_floating_point() and t.requires_grad]
    return sum(t.pow(2).mean() for t in floats)


class ModelTimeout(BaseException):
    """Raised by the alarm; a BaseException so that a library's ``except Exception`` does
    not swallow it."""


@dataclass
class Built:
    module: torch.nn.Module
    args: tuple
    kwargs: dict


def _seed(n: int) -> None:
    """Every generator a model may draw from: torch's, and NumPy's and Python's (torchcfm's
    optimal-transport plan samples pairs with ``np.random.choice``), so that eager and each
    compiled run draw the same numbers."""
    torch.manual_seed(n)
    random.seed(n)
    try:
        import numpy
    except ImportError:
        return
    numpy.random.seed(n)


def build(spec: ModelSpec, fp64: bool = False) -> Built:
    _seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        made = spec.build()
    module, args, kwargs = (made + ({},))[:3] if len(made) == 2 else made
    for m in module.modules():  # no randomness left to differ between runs
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.p = 0.0
    if fp64:
        module = module.double()
        args, kwargs = _map_floats(args, torch.Tensor.double), _map_floats(kwargs,
                                                                          torch.Tensor.double)
    return Built(module, tuple(args), dict(kwargs))


@contextlib.contextmanager
def _default_dtype(dtype):
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def run_mode(spec: ModelSpec, mode: str, compile_fn=None, fp64: bool = False) -> dict:
    """One inference (two calls) or one training step of a fresh build; ``compile_fn`` maps
    the module to what is called. Returns outputs, gradients and first-call seconds."""
    with _default_dtype(torch.float64 if fp64 else torch.float32):
        b = build(spec, fp64)
        if mode == "infer" and not spec.infer_in_train_mode:
            b.module.eval()
        else:
            b.module.train()
        if mode == "train" and spec.input_grads:
            b.args = _map_floats(b.args, lambda t: t.detach().requires_grad_())
        fn = compile_fn(b.module) if compile_fn is not None else b.module
        if mode == "infer":
            with torch.no_grad():
                _seed(1)
                t0 = time.perf_counter()
                first = fn(*b.args, **b.kwargs)
                seconds = time.perf_counter() - t0
                _seed(1)
                second = fn(*b.args, **b.kwargs)
            return {"outputs": _tensors(first), "again": _tensors(second), "seconds": seconds}
        _seed(1)
        t0 = time.perf_counter()
        out = fn(*b.args, **b.kwargs)
        loss = (spec.loss or _default_loss)(out)
        loss.backward()
        seconds = time.perf_counter() - t0
        grads = {k: (p.grad if p.grad is not None else torch.zeros_like(p)).detach().clone()
                 for k, p in b.module.named_parameters() if p.requires_grad}
        if spec.input_grads:
            for i, a in enumerate(_tensors(b.args)):
                if a.requires_grad:
                    grads[f"input{i}"] = a.grad if a.grad is not None else torch.zeros_like(a)
        return {"outputs": [loss.detach()] + [t.detach() for t in _tensors(out)],
                "grads": grads, "seconds": seconds}


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    wide = torch.complex128 if a.is_complex() or b.is_complex() else torch.float64
    return torch.sqrt(torch.mean(torch.square((a.to(wide) - b.to(wide)).abs()))).item()


def same(res: torch.Tensor, ref: torch.Tensor, fp64: torch.Tensor | None,
         tol: float = TOL) -> bool:
    """torch._dynamo.utils.same's rule for one tensor: close to eager float32, or no further
    from the float64 referee than twice eager float32 is (plus tol / 10)."""
    if res.shape != ref.shape or res.dtype != ref.dtype:
        return False
    if not (ref.is_floating_point() or ref.is_complex()):   # indices: equal
        return torch.equal(res, ref)
    if torch.allclose(res, ref, rtol=tol, atol=tol, equal_nan=True):
        return True
    if fp64 is None or fp64.shape != res.shape:
        return False
    if res.numel() == 0:
        return True
    res_error, ref_error = _rmse(fp64, res), _rmse(fp64, ref)
    if math.isnan(res_error):
        return False
    multiplier = 3.0 if res.numel() <= 10 else 2.0  # as PyTorch's, for tiny tensors
    return res_error <= multiplier * ref_error + tol / 10.0


def compare(got: dict, want: dict, want64: dict | None, mode: str) -> str:
    """'' when ``got`` matches, else what differs first (for the notes)."""
    pairs = [("output", got["outputs"], want["outputs"],
              want64["outputs"] if want64 else None)]
    if mode == "infer":   # against eager's second call: a forward may step state (probe-11)
        pairs.append(("second call", got["again"], want["again"],
                      want64["again"] if want64 else None))
    for what, g, w, w64 in pairs:
        if len(g) != len(w):
            return f"{what}: {len(g)} tensors, eager has {len(w)}"
        for i, (x, y) in enumerate(zip(g, w)):
            z = w64[i] if w64 is not None and i < len(w64) else None
            if not same(x, y, z):
                return f"{what} {i} {tuple(y.shape)} differs"
    if mode == "train":
        for k, w in want["grads"].items():
            g = got["grads"].get(k)
            z = want64["grads"].get(k) if want64 else None
            if g is None or not same(g, w, z):
                return f"gradient of {k} differs"
    return ""


def _first_line(e: BaseException) -> str:
    text = str(e).strip().split("\n")[0]
    return f"{type(e).__name__}: {text}"[:240]


def _compile_fn(compiler: str, backend: str):
    if compiler == "tc":
        return lambda m: tc.compile(m, backend=backend)
    return lambda m: torch.compile(m, backend=backend)


def _reset() -> None:
    tc.reset()
    torch._dynamo.reset()


def explain(spec: ModelSpec, mode: str, compiler: str) -> dict:
    """Graphs, breaks and reasons of one forward, from tc.explain / torch._dynamo.explain."""
    b = build(spec)
    if mode == "infer" and not spec.infer_in_train_mode:
        b.module.eval()
    else:
        b.module.train()
    _reset()
    grad = torch.no_grad() if mode == "infer" else contextlib.nullcontext()
    try:
        with grad:
            _seed(1)
            if compiler == "tc":
                out = tc.explain(b.module)(*b.args, **b.kwargs)
                reasons = [{"reason": r.reason.strip().split("\n")[0][:300],
                            "where": f"{_site(r.filename)}:{r.lineno}",
                            "frame": r.frame, "kind": "break"} for r in out.break_reasons]
                reasons += [{"reason": s.split(": ", 1)[-1].strip().split("\n")[0][:300],
                             "where": "", "frame": s.split(": ", 1)[0], "kind": "skip"}
                            for s in out.skipped_frames]
                return {"graphs": out.graph_count, "breaks": out.graph_break_count,
                        "skipped": len(out.skipped_frames), "reasons": reasons}
            out = torch._dynamo.explain(b.module)(*b.args, **b.kwargs)
            reasons = []
            for r in out.break_reasons:
                frame = r.user_stack[-1] if r.user_stack else None
                reasons.append({"reason": str(r.reason).strip().split("\n")[0][:300],
                                "where": f"{_site(frame.filename)}:{frame.lineno}"
                                if frame else "", "frame": frame.name if frame else "",
                                "kind": "break"})
            return {"graphs": out.graph_count, "breaks": out.graph_break_count,
                    "skipped": 0, "reasons": reasons}
    except Exception as e:
        return {"crash": _first_line(e)}
    finally:
        _reset()


def _site(filename: str) -> str:
    """A file name short enough for a table: from site-packages (or the repository) down."""
    for marker in ("site-packages/", str(ROOT) + "/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename.rsplit("/", 1)[-1]


def measure(spec: ModelSpec, backends: list[str], compilers: list[str]) -> dict:
    """Everything the tables need about one model. Never raises (but ModelTimeout)."""
    record: dict[str, Any] = {"model": spec.name, "library": spec.library, "note": spec.note,
                              "explain": {}, "runs": {}, "eager": {}}
    try:
        b = build(spec)
        record["params"] = sum(p.numel() for p in b.module.parameters())
    except Exception as e:
        record["eager_error"] = f"build: {_first_line(e)}"
        return record
    refs, refs64 = {}, {}
    for mode in MODES:
        try:
            refs[mode] = run_mode(spec, mode)
            record["eager"][mode] = refs[mode]["seconds"]
        except Exception as e:
            record["eager_error"] = f"eager {mode}: {_first_line(e)}"
            traceback.print_exc()
            return record
        try:
            refs64[mode] = run_mode(spec, mode, fp64=True)
        except Exception as e:
            refs64[mode] = None
            record.setdefault("fp64_error", f"{mode}: {_first_line(e)}")
    for compiler in compilers:
        for mode in MODES:
            record["explain"][f"{compiler}/{mode}"] = explain(spec, mode, compiler)
        for backend in backends:
            for mode in MODES:
                key = f"{compiler}/{backend}/{mode}"
                _reset()
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        got = run_mode(spec, mode, _compile_fn(compiler, backend))
                    wrong = compare(got, refs[mode], refs64[mode], mode)
                    record["runs"][key] = {"ok": not wrong, "wrong": wrong,
                                           "seconds": got["seconds"]}
                except Exception as e:
                    record["runs"][key] = {"ok": False, "crash": _first_line(e),
                                           "where": _crash_site(e)}
                finally:
                    _reset()
    return record


def _crash_site(e: BaseException) -> str:
    """Where it raised: the innermost frame of the library's code (site-packages, not torch),
    then the innermost frame of all, as file:line."""
    tb = traceback.extract_tb(e.__traceback__)
    if not tb:
        return ""
    library = [f for f in tb if "site-packages/" in f.filename
               and not _site(f.filename).startswith(("torch/", "tutorcompile/"))]
    sites = [f"{_site(f.filename)}:{f.lineno}" for f in (library[-1:] + tb[-1:])]
    return " < ".join(dict.fromkeys(sites))


# ---------------------------------------------------------------------------------------------
# Worker (one library per subprocess) and the parent that collects and prints.


def worker(args) -> None:
    torch.set_num_threads(args.threads)
    _timm_libraries_importable()  # open_clip, smp and denoising-diffusion import torchvision
    warnings.simplefilter("ignore")
    import logging
    logging.disable(logging.WARNING)  # torch._dynamo's recompile and break chatter
    backends, compilers = args.backends.split(","), _compilers(args)

    def on_alarm(signum, frame):
        raise ModelTimeout(f"over {args.timeout} s")

    signal.signal(signal.SIGALRM, on_alarm)
    with open(args.worker_out, "a") as sink:
        for name in args.models.split(","):
            spec = REGISTRY[name]
            start = time.perf_counter()
            signal.alarm(args.timeout)
            try:
                record = measure(spec, backends, compilers)
            except ModelTimeout as e:
                record = {"model": name, "library": spec.library, "timeout": str(e)}
            except ImportError as e:
                record = {"model": name, "library": spec.library,
                          "skipped": f"not installed: {_first_line(e)}"}
            finally:
                signal.alarm(0)
                _reset()
            record["wall_s"] = time.perf_counter() - start
            sink.write(json.dumps(record) + "\n")
            sink.flush()
            print(f"  {name}: {record['wall_s']:.0f} s", flush=True)  # the parent's stderr


def _compilers(args) -> list[str]:
    return ["tc"] if args.no_torch_compile else ["tc", "torch"]


def run_library(models: list[str], args) -> list[dict]:
    """The models of one library in subprocesses; a worker that dies or hangs past its
    budget costs the model it was on, and a new worker takes the rest."""
    records: list[dict] = []
    todo = list(models)
    while todo:
        with tempfile.NamedTemporaryFile("r", suffix=".jsonl", delete=False) as f:
            path = f.name
        cmd = [sys.executable, __file__, "--worker", "--worker-out", path,
               "--models", ",".join(todo), "--backends", args.backends,
               "--timeout", str(args.timeout), "--threads", str(args.threads)]
        if args.no_torch_compile:
            cmd.append("--no-torch-compile")
        budget = (args.timeout + 30) * len(todo) + 120  # imports (MONAI's take ~15 s)
        status = ""
        try:
            proc = subprocess.run(cmd, timeout=budget, stdout=sys.stderr, stderr=(
                None if args.verbose else subprocess.DEVNULL))
            status = f"worker exited with {proc.returncode}" if proc.returncode else ""
        except subprocess.TimeoutExpired:
            status = f"worker killed after {budget} s"
        done = [json.loads(line) for line in open(path) if line.strip()]
        os.unlink(path)
        records += done
        finished = {r["model"] for r in done}
        todo = [m for m in todo if m not in finished]
        if todo:
            if not status:
                status = "worker stopped early"
            records.append({"model": todo[0], "library": REGISTRY[todo[0]].library,
                            "timeout" if "killed" in status else "died": status})
            todo = todo[1:]
    return records


# ---------------------------------------------------------------------------------------------
# Tables.

# The Python / PyTorch idiom behind a tutorcompile break reason, first match wins. These are
# the groups the report speaks of (written from the reasons this sweep produced); a reason
# that matches none is reported as "other".
IDIOMS = [
    (r"\(inside a |region the frame entered", "break inside a with-block or a context "
     "decorator (torch.no_grad, autocast)"),
    (r"FakeTensorMode|dispatch.mode", "nn.MultiheadAttention's fast-path check "
     "(_is_make_fx_tracing reads the dispatch-mode stack)"),
    (r"TreeSpec|LeafSpec|pytree", "torch.utils._pytree (tree_flatten / tree_unflatten)"),
    (r"tensor\.grad|tensor\.data|requires_grad_|autograd state", "autograd state "
     "(.grad, .data, requires_grad_)"),
    (r"numpy|ndarray|int64|float64|bool\.__bool__|non-constant int", "numpy in forward"),
    (r"data-dependent|depends on tensor data|\.item\(\)|tolist",
     "data-dependent (tensor value to Python)"),
    (r"exception handling|AttributeError|\btry\b", "try/except around getattr (EAFP)"),
    (r"constructing an instance", "a user class instantiated in forward"),
    (r"class attribute", "class attribute read through a new object"),
    (r"UserDefinedObjectVariable\((set|frozenset)\)", "set constants (`x in {...}`, "
     "f-string of a set)"),
    (r"bisect|heapq|itertools|collections", "pure-Python standard library"),
    (r"unbound|str\.\w+|method_descriptor", "unbound str method"),
    (r"generator|iterator|GET_ITER|FOR_ITER|YIELD", "iterator / generator"),
    (r"STORE_DEREF|closure|cell|nonlocal", "closure write"),
    (r"wraps|functools|update_wrapper|partial", "functools"),
    (r"contextmanager|with-block|__enter__|__exit__", "with-block"),
    (r"inspect|signature", "inspect"),
    (r"dynamic|IndexError|symbolic|SymInt", "dynamic shapes"),
    (r"C function we cannot trace|not supported|unsupported|cannot|can't", "unsupported call"),
]


def idiom(reason: str) -> str:
    for pattern, label in IDIOMS:
        if re.search(pattern, reason, re.IGNORECASE):
            return label
    return "other"


def _normalise(reason: str) -> str:
    """A reason without the details that differ between call sites (names, numbers)."""
    return re.sub(r"'[^']*'|\"[^\"]*\"|<[^>]*>|\b\d+\b|0x[0-9a-f]+", "…", reason)[:120]


def _cell_capture(e: dict | None) -> str:
    if not e:
        return "—"
    if "crash" in e:
        return "CRASH"
    skipped = f"+{e['skipped']}s" if e.get("skipped") else ""
    return f"{e['graphs']}/{e['breaks']}{skipped}"


def _cell_run(r: dict | None) -> str:
    if r is None:
        return "—"
    return "ok" if r["ok"] else ("CRASH" if "crash" in r else "WRONG")


def _status(rec: dict) -> str | None:
    for key in ("skipped", "eager_error", "timeout", "died"):
        if key in rec:
            return f"{key}: {rec[key]}"
    return None


def per_model_table(records: list[dict], backends: list[str], compilers: list[str]) -> str:
    names = {"tc": "tc", "torch": "torch"}
    header = ["model", "params"]
    header += [f"graphs/breaks {names[c]} infer, train" for c in compilers]
    header += [f"{names[c]} {b}" for b in backends for c in compilers]
    header += [f"compile s {names[c]} ({backends[-1]} infer, train)" for c in compilers]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for rec in records:
        status = _status(rec)
        if status:
            lines.append(f"| {rec['model']} | " + " | ".join(
                [status[:80]] + [""] * (len(header) - 2)) + " |")
            continue
        row = [rec["model"], f"{rec.get('params', 0) / 1e3:.0f}k"]
        for c in compilers:
            row.append(", ".join(_cell_capture(rec["explain"].get(f"{c}/{m}")) for m in MODES))
        for b in backends:
            for c in compilers:
                row.append(", ".join(_cell_run(rec["runs"].get(f"{c}/{b}/{m}")) for m in MODES))
        for c in compilers:
            secs = [rec["runs"].get(f"{c}/{backends[-1]}/{m}", {}).get("seconds") for m in MODES]
            row.append(", ".join("—" if s is None else f"{s:.1f}" for s in secs))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def summary(records: list[dict], backends: list[str], compilers: list[str]) -> str:
    measured = [r for r in records if _status(r) is None]
    out = {}
    for c in compilers:
        runs = [r["runs"].get(f"{c}/{b}/{m}") for r in measured for b in backends for m in MODES]
        lost = sum(1 for r in records if "timeout" in r or "died" in r) * len(backends) * 2
        right = sum(1 for x in runs if x and x["ok"])
        crashes = sum(1 for x in runs if x and "crash" in x)
        wrong = sum(1 for x in runs if x and not x["ok"] and "crash" not in x)
        caps = [r["explain"].get(f"{c}/{m}") for r in measured for m in MODES]
        one = sum(1 for e in caps if e and "crash" not in e and e["graphs"] == 1
                  and e["breaks"] == 0 and not e["skipped"])
        graphs = [e["graphs"] for e in caps if e and "crash" not in e]
        breaks = [e["breaks"] + e["skipped"] for e in caps if e and "crash" not in e]
        explain_crashes = sum(1 for e in caps if e and "crash" in e)
        n_runs = len(runs) + lost
        col = {
            "runs right (float64 referee)": f"{right}/{n_runs}",
            "runs wrong (no exception)": f"{wrong}/{n_runs}",
            "runs that crash": f"{crashes}/{n_runs}" + (f" (+{lost} lost to timeouts)"
                                                       if lost else ""),
            "forwards captured as one graph, no breaks": f"{one}/{len(caps)}",
            "graphs per forward, median [max]": (f"{statistics.median(graphs):g} "
                                                 f"[{max(graphs)}]" if graphs else "—"),
            "graph breaks per forward, median [max]": (f"{statistics.median(breaks):g} "
                                                       f"[{max(breaks)}]" if breaks else "—"),
            "explain crashed": f"{explain_crashes}/{len(caps)}",
        }
        for b in backends:
            for m in MODES:
                secs = [r["runs"][f"{c}/{b}/{m}"]["seconds"] for r in measured
                        if r["runs"].get(f"{c}/{b}/{m}", {}).get("seconds") is not None]
                label = f"first-call seconds, {b} {m}: median [total]"
                col[label] = (f"{statistics.median(secs):.2f} [{sum(secs):.0f}]"
                              if secs else "—")
        out[c] = col
    rows = list(out[compilers[0]])
    names = {"tc": "tutorcompile", "torch": "torch.compile"}
    lines = [f"| {len(measured)} models, {len(backends)} backend(s) x (inference, training) | "
             + " | ".join(names[c] for c in compilers) + " |",
             "|---|" + "---|" * len(compilers)]
    lines += [f"| {row} | " + " | ".join(out[c][row] for c in compilers) + " |" for row in rows]
    return "\n".join(lines)


def reason_table(records: list[dict], compiler: str = "tc", top: int = 25) -> str:
    """The most common break / skipped-frame reasons, with the idiom and the models."""
    by_reason: dict[str, dict] = {}
    for rec in records:
        for mode in MODES:
            e = rec.get("explain", {}).get(f"{compiler}/{mode}") or {}
            for r in e.get("reasons", []):
                key = _normalise(r["reason"])
                entry = by_reason.setdefault(key, {"models": set(), "sites": collections.Counter(),
                                                   "count": 0, "kind": r["kind"],
                                                   "example": r["reason"]})
                entry["models"].add(rec["model"])
                entry["count"] += 1
                if r["where"] or r["frame"]:
                    entry["sites"][r["where"] or f"frame {r['frame']}"] += 1
    ranked = sorted(by_reason.items(), key=lambda kv: (-len(kv[1]["models"]), -kv[1]["count"]))
    lines = [f"| # | idiom | reason ({compiler}) | models | hits | where (most common) |",
             "|---|---|---|---|---|---|"]
    for i, (_, e) in enumerate(ranked[:top], 1):
        sites = ", ".join(f"{s}" for s, _ in e["sites"].most_common(2))
        models = ", ".join(sorted(e["models"]))
        kind = " (skipped frame)" if e["kind"] == "skip" else ""
        label = idiom(e["example"]) if compiler == "tc" else ""
        lines.append(f"| {i} | {label} | {e['example'][:150]}{kind} | "
                     f"{len(e['models'])}: {models} | {e['count']} | {sites} |")
    if compiler != "tc":
        return "\n".join(lines)
    groups = collections.defaultdict(set)
    for e in by_reason.values():
        groups[idiom(e["example"])] |= e["models"]
    lines.append("")
    lines.append("| idiom | models hitting it |")
    lines.append("|---|---|")
    for label, models in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"| {label} | {len(models)}: {', '.join(sorted(models))} |")
    return "\n".join(lines)


def crash_table(records: list[dict], compiler: str = "tc") -> str:
    """Crashes (runs and explain) grouped by message, with the models and where."""
    by_message: dict[str, dict] = {}
    for rec in records:
        found = [(k, r.get("crash"), r.get("where", "")) for k, r in rec.get("runs", {}).items()]
        found += [(k, e.get("crash"), "") for k, e in rec.get("explain", {}).items()]
        for key, crash, where in found:
            if not crash or not key.startswith(compiler + "/"):
                continue
            entry = by_message.setdefault(_normalise(crash), {"models": set(), "runs": 0,
                                                              "example": crash, "where": where})
            entry["models"].add(rec["model"])
            entry["runs"] += 1
    lines = [f"| crash ({compiler}) | models | runs + explains | where |", "|---|---|---|---|"]
    for e in sorted(by_message.values(), key=lambda e: -len(e["models"])):
        lines.append(f"| {e['example'][:160]} | {', '.join(sorted(e['models']))} | "
                     f"{e['runs']} | {e['where']} |")
    return "\n".join(lines) if by_message else "none"


def notes(records: list[dict], compilers: list[str]) -> str:
    lines = []
    for rec in records:
        if "fp64_error" in rec:
            lines.append(f"- {rec['model']}: no float64 referee ({rec['fp64_error']}); "
                         "compared to float32 eager with rtol = atol = 1e-4")
        for key, r in rec.get("runs", {}).items():
            if not r["ok"]:
                why = r.get("crash") or r.get("wrong")
                where = f" [{r['where']}]" if r.get("where") else ""
                lines.append(f"- {rec['model']} {key}: {why}{where}")
        for key, e in rec.get("explain", {}).items():
            if "crash" in e:
                lines.append(f"- {rec['model']} explain {key}: {e['crash']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--libraries", default="",
                        help="comma-separated PyPI names (or short names), default all: "
                        + ", ".join(sorted({s.library for s in REGISTRY.values()})))
    parser.add_argument("--models", default="", help="comma-separated, of " + ", ".join(REGISTRY))
    parser.add_argument("--group", default="held-out",
                        choices=("held-out", "issue-40", "probe-2", "probe-6", "probe-7", "probe-8",
                                 "probe-9", "probe-10", "probe-11", "all"),
                        help="held-out: libraries never used while writing the capture "
                        "(default); issue-40: those of the sweep behind issue 40; probe-2, "
                        "probe-6: the second and sixth held-out probes, fixed by feature since; "
                        "probe-7 .. probe-11: the seventh to the eleventh")
    parser.add_argument("--backends", default="eager,aot_eager",
                        help=f"comma-separated, of {', '.join(BACKENDS)} (inductor is slow)")
    parser.add_argument("--no-torch-compile", action="store_true")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per model")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--json", default="", help="write every record to this file")
    parser.add_argument("--top", type=int, default=25, help="break reasons to list")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="show the workers' stderr (tracebacks, warnings)")
    parser.add_argument("--report", default="",
                        help="print the tables of an earlier --json file, run nothing")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return []
    if args.report:
        saved = json.loads(Path(args.report).read_text())
        report(saved["meta"], saved["records"], args.top)
        return saved["records"]

    wanted_libs = {x for x in args.libraries.split(",") if x}
    wanted = [x for x in args.models.split(",") if x]
    for name in wanted:
        if name not in REGISTRY:
            parser.error(f"unknown model {name!r}")
    specs = [s for s in REGISTRY.values()
             if (wanted or args.group in ("all", s.group))
             and (not wanted or s.name in wanted)
             and (not wanted_libs or s.library in wanted_libs or _short(s.library) in wanted_libs)]
    by_library: dict[str, list[str]] = collections.defaultdict(list)
    for s in specs:
        by_library[s.library].append(s.name)

    backends, compilers = args.backends.split(","), _compilers(args)
    records = []
    t0 = time.perf_counter()
    for library, models in by_library.items():
        print(f"{library}: {len(models)} model(s)", file=sys.stderr, flush=True)
        records += run_library(models, args)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "tutorcompile"],
                           capture_output=True, text=True).stdout.strip()
    meta = {"title": f"{len(records)} models from {len(by_library)} libraries "
            f"(tutorcompile {head or '?'}{' + uncommitted changes' if dirty else ''} "
            f"from {Path(tc.__file__).parent.parent}, torch {torch.__version__}, CPU, "
            f"{args.threads} thread(s), {time.perf_counter() - t0:.0f} s)",
            "backends": backends, "compilers": compilers}
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "records": records}, indent=1,
                                              default=str))
    report(meta, records, args.top)
    return records


def report(meta: dict, records: list[dict], top: int = 25) -> None:
    backends, compilers = meta["backends"], meta["compilers"]
    print(f"## Library sweep: {meta['title']}")
    print("\n### Per model (graphs/breaks: tc +Ns = N skipped frames; runs: inference, training)\n")
    print(per_model_table(records, backends, compilers))
    print("\n### Summary\n")
    print(summary(records, backends, compilers))
    print("\n### Top tutorcompile graph-break / skipped-frame reasons\n")
    print(reason_table(records, "tc", top))
    if "torch" in compilers:
        print("\n### torch.compile's graph-break reasons (for comparison)\n")
        print(reason_table(records, "torch", 10))
    for c in compilers:
        print(f"\n### Crashes, {'tutorcompile' if c == 'tc' else 'torch.compile'}\n")
        print(crash_table(records, c))
    text = notes(records, compilers)
    if text:
        print("\n### Notes (failures)\n")
        print(text)


if __name__ == "__main__":
    main()
