"""Run PyTorch's OpInfo database through ``tc.compile`` and compare with eager.

Every entry of ``torch.testing._internal.common_methods_invocations.op_db`` that supports
float32 on CPU is called on a few of its own sample inputs, compiled with
``tc.compile(fn, backend=...)``, forward and backward, and compared with eager PyTorch --
the idea of PyTorch's own OpInfo tests and of tinygrad's ``helper_test_op``.

One op gives one :class:`OpResult` per backend:

* ``forward``: ``"ok"``, ``"error"`` (the compiler raised: a clear failure) or ``"wrong"``
  (values differ from eager with no error: a silent wrong answer);
* ``backward``: the same for the gradients of every floating-point input, or ``"n/a"``
  (the op has no gradient in eager). A gradient that is missing or zero where eager's is not
  counts as ``"wrong"``, and so does a result with a gradient that eager declares
  non-differentiable (a graph using it would pass that gradient on);
* ``kernels``: the number of generated kernels the forward graph compiled to (``inductor``),
  and ``extern``: the torch calls that stayed PyTorch calls, with the reason AOT gave.

``python tests/opinfo_sweep.py [inductor|aot_eager ...]`` sweeps every op and prints the
summary (forward right / kernels / gradients right / silently wrong); the test file
``tests/test_opinfo_sweep.py`` runs the same sweep, one test per op and backend, against the
expected failures of ``tests/opinfo_expected.py``.

Mirrors: torch/testing/_internal/opinfo (``OpInfo.sample_inputs``) and
test/inductor/test_torchinductor_opinfo.py.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

MAX_SAMPLES = int(os.environ.get("TUTORCOMPILE_OPINFO_SAMPLES", "2"))
BACKENDS = ("aot_eager", "inductor")
# Kernels are C++ on CPU: they compile in well under a second, where Triton's interpreter
# runs every program instance in Python. (Triton spellings are checked in test_stage5.)
BACKEND_OPTIONS = {"inductor": {"codegen": "cpp"}}
# Ops whose result is uninitialised memory: only shapes, dtypes and strides can match.
UNINITIALISED = {"empty", "empty_like", "empty_permuted", "empty_strided", "new_empty",
                 "new_empty_strided"}
FORWARD_TOL = {"rtol": 1e-4, "atol": 1e-4}
GRAD_TOL = {"rtol": 1e-3, "atol": 1e-3}


def op_name(op: Any) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def sweep_ops() -> list[Any]:
    """The OpInfo entries with float32 on CPU, in op_db's order."""
    from torch.testing._internal.common_methods_invocations import op_db
    return [op for op in op_db if torch.float32 in op.supported_dtypes("cpu")]


@dataclass
class OpResult:
    name: str
    backend: str
    forward: str = "ok"
    backward: str = "n/a"
    kernels: int = 0
    extern: dict[str, str] = field(default_factory=dict)
    message: str = ""

    @property
    def silently_wrong(self) -> bool:
        return "wrong" in (self.forward, self.backward)

    def failures(self) -> set[str]:
        """What an expected-failure entry for this op lists: ``forward``/``backward``."""
        return {part for part in ("forward", "backward")
                if getattr(self, part) in ("error", "wrong")}


class _Recorder:
    """Counts the kernels and extern calls of the graphs compiled while it is active."""

    def __init__(self):
        self.kernels = 0
        self.extern: dict[str, str] = {}
        self.active = False


_RECORDER = _Recorder()


def _install_recorder() -> None:
    """Wrap the two places a forward graph is finished: AOT's decomposition report and the
    inductor's compiled variants (idempotent)."""
    import tutorcompile.inductor.compile_fx  # noqa: F401 - loads the module read below
    from tutorcompile.aot import aot_autograd
    compile_fx = sys.modules["tutorcompile.inductor.compile_fx"]
    if getattr(aot_autograd, "_opinfo_recorder", False):
        return
    decompose = aot_autograd.decompose

    def recording_decompose(*args, **kwargs):
        graph, report = decompose(*args, **kwargs)
        if _RECORDER.active:
            _RECORDER.extern.update(report.extern)
        return graph, report
    aot_autograd.decompose = recording_decompose
    variant_init = compile_fx._Variant.__init__

    def recording_init(self, *args, **kwargs):
        variant_init(self, *args, **kwargs)
        if _RECORDER.active:
            _RECORDER.kernels += len(self.kernel_sources)
    compile_fx._Variant.__init__ = recording_init
    aot_autograd._opinfo_recorder = True


def _tensors(sample: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def _call_with(op: Any, sample: Any) -> Callable:
    """``fn(*tensors)`` that calls the op on the sample with its tensors as arguments (so
    that the compiler sees them as graph inputs, not as constants)."""
    structure = (sample.input, sample.args, sample.kwargs)
    ids = {id(t): i for i, t in enumerate(_tensors(sample))}

    def fn(*tensors):
        inp, args, kwargs = tree_map(
            lambda x: tensors[ids[id(x)]] if isinstance(x, torch.Tensor) else x, structure)
        return op.op(inp, *args, **kwargs)
    return fn


def _fresh(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in tensors]


def _outputs(out: Any) -> list[Any]:
    leaves, _ = tree_flatten(out)
    return leaves


def _compare(expected: Any, got: Any, tol: dict, values: bool = True) -> None:
    if not values:
        if isinstance(expected, torch.Tensor) and (
                not isinstance(got, torch.Tensor)
                or (got.shape, got.dtype) != (expected.shape, expected.dtype)):
            raise AssertionError(f"expected a {expected.dtype} tensor of shape "
                                 f"{tuple(expected.shape)}, got {got!r:.80}")
    elif isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            raise AssertionError(f"expected a tensor, got {type(got).__name__}")
        if expected.layout != torch.strided:
            expected, got = expected.to_dense(), got.to_dense()
        torch.testing.assert_close(got.detach(), expected.detach(), equal_nan=True, **tol)
    elif isinstance(expected, float) and isinstance(got, float):
        torch.testing.assert_close(got, expected, equal_nan=True, **tol)
    elif expected != got:
        raise AssertionError(f"expected {expected!r}, got {got!r}")


def _differentiable(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.requires_grad and t.grad_fn is not None


def _grads(outs: list[Any], inputs: list[torch.Tensor], cotangents: list[Any]) -> list[Any]:
    pairs = [(o, c) for o, c in zip(outs, cotangents) if c is not None]
    wanted = [t for t in inputs if t.requires_grad]
    return list(torch.autograd.grad([o for o, _ in pairs], wanted, [c for _, c in pairs],
                                    allow_unused=True))


def run_op(op: Any, backend: str, max_samples: int = MAX_SAMPLES) -> OpResult:
    """Compile ``op`` on up to ``max_samples`` samples; compare forward and backward."""
    import tutorcompile as tc
    _install_recorder()
    result = OpResult(op_name(op), backend, backward="pending" if op.supports_autograd
                      else "n/a")
    samples = list(itertools.islice(
        op.sample_inputs("cpu", torch.float32, requires_grad=op.supports_autograd),
        max_samples))
    for sample in samples:
        fn = _call_with(op, sample)
        inputs = _tensors(sample)
        # eager first: a sample eager itself rejects says nothing about the compiler
        try:
            torch.manual_seed(0)
            eager_in = _fresh(inputs)
            expected = sample.output_process_fn_grad(fn(*eager_in))
        except Exception:
            continue
        tc.reset()
        compiled = tc.compile(fn, backend=backend,
                              options=BACKEND_OPTIONS.get(backend) or None)
        got_in = _fresh(inputs)
        _RECORDER.active, _RECORDER.kernels, _RECORDER.extern = True, 0, {}
        try:
            torch.manual_seed(0)
            got = sample.output_process_fn_grad(compiled(*got_in))
        except Exception as e:
            result.forward, result.message = "error", f"{type(e).__name__}: {e}"[:300]
            result.backward = "not run" if op.supports_autograd else "n/a"
            return result
        finally:
            _RECORDER.active = False
            result.kernels = max(result.kernels, _RECORDER.kernels)
            result.extern.update(_RECORDER.extern)
        exp_outs, got_outs = _outputs(expected), _outputs(got)
        try:
            if len(exp_outs) != len(got_outs):
                raise AssertionError(f"{len(got_outs)} outputs, eager gives {len(exp_outs)}")
            for e, g in zip(exp_outs, got_outs):
                _compare(e, g, FORWARD_TOL, values=op.name not in UNINITIALISED)
        except AssertionError as e:
            result.forward, result.message = "wrong", str(e)[:300]
            result.backward = "not run" if op.supports_autograd else "n/a"
            return result
        if not op.supports_autograd or not any(t.requires_grad for t in inputs):
            continue
        _check_backward(result, exp_outs, got_outs, eager_in, got_in)
        if result.backward not in ("ok", "pending"):
            return result
    if result.backward == "pending":  # no sample had a gradient to compare
        result.backward = "n/a"
    return result


def _check_backward(result: OpResult, exp_outs: list, got_outs: list,
                    eager_in: list[torch.Tensor], got_in: list[torch.Tensor]) -> None:
    torch.manual_seed(1)
    cotangents = [torch.randn_like(o) if _differentiable(o) else None for o in exp_outs]
    if all(c is None for c in cotangents):
        return
    try:
        expected = _grads(exp_outs, eager_in, cotangents)
    except Exception:
        return  # eager has no gradient here either
    missing = [i for i, (e, g) in enumerate(zip(exp_outs, got_outs))
               if cotangents[i] is not None and not _differentiable(g)]
    if missing:
        result.backward = "wrong"
        result.message = f"output {missing[0]} has no gradient (eager's has one)"
        return
    # the reverse: a result PyTorch declares non-differentiable (native_layer_norm's mean)
    # that has a gradient would pass one into any loss computed from it
    extra = [i for i, (e, g) in enumerate(zip(exp_outs, got_outs))
             if isinstance(e, torch.Tensor) and not _differentiable(e) and _differentiable(g)]
    if extra:
        result.backward = "wrong"
        result.message = f"output {extra[0]} has a gradient (eager's has none)"
        return
    try:
        got = _grads(got_outs, got_in, cotangents)
    except Exception as e:
        result.backward, result.message = "error", f"{type(e).__name__}: {e}"[:300]
        return
    for i, (e, g) in enumerate(zip(expected, got)):
        if e is None:
            continue
        try:
            _compare(e, torch.zeros_like(e) if g is None else g, GRAD_TOL)
        except AssertionError as err:
            result.backward, result.message = "wrong", f"gradient of input {i}: {err}"[:300]
            return
    result.backward = "ok"


@dataclass
class Summary:
    backend: str
    ops: int = 0
    forward_ok: int = 0
    kernels: int = 0
    all_prims: int = 0
    grad_ops: int = 0
    grad_ok: int = 0
    silently_wrong: list[str] = field(default_factory=list)

    def add(self, r: OpResult) -> None:
        self.ops += 1
        self.forward_ok += r.forward == "ok"
        self.kernels += r.forward == "ok" and r.kernels > 0
        self.all_prims += r.forward == "ok" and not r.extern
        self.grad_ops += r.backward != "n/a"
        self.grad_ok += r.backward == "ok"
        if r.silently_wrong:
            self.silently_wrong.append(r.name)

    def __str__(self) -> str:
        return (f"{self.backend}: forward right {self.forward_ok}/{self.ops}, "
                f"generated kernels {self.kernels}, all-prim graphs {self.all_prims}, "
                f"gradients right {self.grad_ok}/{self.grad_ops}, silently wrong "
                f"{len(self.silently_wrong)}" + (f" ({', '.join(self.silently_wrong)})"
                                                if self.silently_wrong else ""))


def summary_lines(reports: list[Any]) -> list[str]:
    """The per-backend summary of a pytest run, from the ``opinfo`` property each test of
    ``test_opinfo_sweep.py`` records (pytest-xdist brings them back from its workers)."""
    import json
    summaries: dict[str, Summary] = {}
    for report in reports:
        for key, value in getattr(report, "user_properties", ()):
            if key != "opinfo" or getattr(report, "when", "call") != "call":
                continue
            d = json.loads(value)
            r = OpResult(d["name"], d["backend"], d["forward"], d["backward"], d["kernels"],
                         dict.fromkeys(d.get("extern", ()), ""))
            summaries.setdefault(r.backend, Summary(r.backend)).add(r)
    total = len(sweep_ops()) if summaries else 0
    # a run stopped early (-x) or selected (-k) counts only the ops that ran: say so, so
    # that its figures are never read as the whole sweep's
    return [str(s) + (f" [partial run: {s.ops} of {total} ops]" if s.ops < total else "")
            for _, s in sorted(summaries.items())]


def main(argv: list[str]) -> None:
    import warnings
    warnings.filterwarnings("ignore")
    backends = argv or list(BACKENDS)
    only = os.environ.get("TUTORCOMPILE_OPINFO_ONLY")
    ops = [op for op in sweep_ops() if not only or op_name(op) in only.split(",")]
    for backend in backends:
        summary = Summary(backend)
        for op in ops:
            r = run_op(op, backend)
            summary.add(r)
            print(f"{backend} {r.name}: forward={r.forward} backward={r.backward} "
                  f"kernels={r.kernels} extern={sorted(r.extern)} {r.message}".replace(
                      "\n", " "), flush=True)
        print(summary, flush=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tutorcompile.environment import make_torchvision_importable
    make_torchvision_importable()
    main(sys.argv[1:])
