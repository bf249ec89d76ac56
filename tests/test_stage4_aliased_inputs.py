"""Stage 4: graph inputs that share memory, one of them written, compute eager's values.

``f(x, x.view(6))`` with ``a.add_(1); return b * 2``: functionalization alone treats ``a``
and ``b`` as two tensors, so ``b * 2`` read the old values (a silent wrong answer under
aot_eager). Two pieces fix it, and these tests hold both:

* Dynamo guards which tensor inputs of a graph that writes an input share storage
  (``NO_TENSOR_ALIASING`` / ``STORAGE_OVERLAPPING`` in the guard printout): a graph compiled
  for inputs apart is not reused for aliased ones, nor the other way round;
* AOT merges aliased inputs of which one is written into a *synthetic base*
  (``tutorcompile/aot/synthetic_base.py``): one input per storage, the aliased inputs views
  of it made inside the graph, so the write reaches every view as in eager.

A random sweep draws small programs -- two or three inputs made from one base tensor (the
base itself, a reshape, a row, a column slice, a transpose, an overlapping slice, the same
tensor twice, a tensor apart) and in-place adds, muls, ``copy_``, ``t[i] = v``, ``out=`` and
reads in between -- and compares each backend with eager: outputs, the inputs' values after
the call, and (in training) the gradients of the base.
"""

from __future__ import annotations

import contextlib
import linecache
import random

import pytest
import torch
from torch import nn

import tutorcompile as tc
from tutorcompile.aot import aot_function
from tutorcompile.aot.aot_autograd import eager_compiler
from tutorcompile.dynamo import eval_frame
from tutorcompile.environment import probe

pytestmark = [pytest.mark.stage4, pytest.mark.usefixtures("fresh_compiler")]

INDUCTOR = pytest.param("inductor", marks=pytest.mark.skipif(
    not probe().has_cxx, reason="no C++ compiler"))
BACKENDS = ["eager", "aot_eager", "aot_eager_decomp_partition", INDUCTOR]


# ---------------------------------------------------------------------------------------
# Named cases
# ---------------------------------------------------------------------------------------

def add_then_read(a, b):
    a.add_(1)
    return b * 2


def _run(fn, make, backend, train=False, compiled=None):
    """(eager result, compiled result): outputs, the base after the call, the base's
    gradient when ``train``. ``make(base)`` gives the inputs."""
    results = []
    for run in (fn, compiled or tc.compile(fn, backend=backend)):
        leaf = (torch.arange(12.).reshape(3, 4) / 7 + 1).requires_grad_(train)
        base = leaf.clone() if train else leaf
        out = run(*make(base))
        grad = None
        if train:
            (out * torch.linspace(1, 2, out.numel()).view(out.shape)).sum().backward(
                inputs=[leaf], retain_graph=True)
            (base * base).sum().backward(inputs=[leaf])
            grad = leaf.grad
        results.append((out.detach(), base.detach(), grad))
    return results


def _assert_same(results):
    (out, base, grad), (out_c, base_c, grad_c) = results
    torch.testing.assert_close(out_c, out)
    torch.testing.assert_close(base_c, base)
    if grad is not None:
        torch.testing.assert_close(grad_c, grad)


ALIASINGS = {
    "view": lambda x: (x, x.view(12)),
    "row": lambda x: (x, x[1]),
    "rows apart": lambda x: (x[0], x[1]),
    "transpose": lambda x: (x.t(), x),
    "overlapping slices": lambda x: (x[:, 1:], x[:, :3]),
    "same tensor": lambda x: (x, x),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("aliasing", list(ALIASINGS))
@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_write_one_read_the_other(backend, aliasing, train):
    make = ALIASINGS[aliasing]
    if aliasing == "same tensor":
        def fn(a, b):
            a.add_(1)
            return b * 2
    else:
        def fn(a, b):
            a.mul_(2)
            return b.sum() + b[0] * 3
    _assert_same(_run(fn, make, backend, train))


def test_the_reported_case():
    x = torch.arange(6.).reshape(2, 3)
    y = x.clone()
    ref = add_then_read(y, y.view(6))
    out = tc.compile(add_then_read, backend="aot_eager")(x, x.view(6))
    assert torch.equal(out, ref) and torch.equal(x, y)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_distinct_then_aliased_then_distinct(backend, train):
    """One compiled function, called with inputs apart, aliased, apart again: each call is
    eager's, and the second graph is made for the aliasing (a guard failed)."""
    compiled = tc.compile(add_then_read, backend=backend)
    apart = lambda x: (x, x * 0.5 + 1)   # noqa: E731
    aliased = lambda x: (x, x.view(3, 4))   # noqa: E731  (the same sizes as apart)
    for make in (apart, aliased, apart, aliased):
        _assert_same(_run(add_then_read, make, backend, train, compiled=compiled))
    assert any("no_tensor_aliasing" in line for line in eval_frame.RECOMPILE_LOG)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_aliased_then_distinct(backend, train):
    compiled = tc.compile(add_then_read, backend=backend)
    apart = lambda x: (x, x[1] * 0.5 + 1)   # noqa: E731
    for make in (ALIASINGS["row"], apart, ALIASINGS["rows apart"], ALIASINGS["row"]):
        _assert_same(_run(add_then_read, make, backend, train, compiled=compiled))


def test_guards_print_the_aliasing():
    x = torch.arange(6.).reshape(2, 3)
    text = str(tc.explain(add_then_read)(x, x[1]))
    assert "storage_pattern" in text and "(L['a'], L['b']) == ((0, 0), (0, 3))" in text
    assert "share storage: L['a'] and L['b'] (offset 3)" in text
    text = str(tc.explain(add_then_read)(x, torch.ones(3)))
    assert "no_tensor_aliasing" in text and "(L['a'], L['b'])" in text


def test_a_graph_that_writes_nothing_is_not_guarded_on_aliasing():
    def read(a, b):
        return a * b
    x = torch.ones(3)
    text = str(tc.explain(read)(x, torch.ones(3)))
    assert "aliasing" not in text and "storage_pattern" not in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_tensor_written_twice(backend):
    def fn(a, b):
        a.add_(1)
        b.mul_(3)
        return a + b
    _assert_same(_run(fn, lambda x: (x, x), backend, train=True))


class WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(-1, 1, 12).view(3, 4))
        self.register_buffer("steps", torch.zeros(3, 4))

    def forward(self, x, row):
        self.steps.add_(1)
        with torch.no_grad():
            self.weight.mul_(0.5)
        return (x * self.weight).sum(0) + row * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_buffer_and_a_parameter_and_views_of_them_passed_as_arguments(backend):
    for row_of in ("steps", "weight"):
        eager, compiled_model = WithBuffer(), WithBuffer()
        compiled = tc.compile(compiled_model, backend=backend)
        for model, run in ((eager, eager), (compiled_model, compiled)):
            x = torch.ones(3, 4)
            with torch.no_grad() if row_of == "weight" else torch.enable_grad():
                row = getattr(model, row_of)[1]    # (a view of the parameter: its _base)
                model.out = run(x, row)
        torch.testing.assert_close(compiled_model.out, eager.out)
        torch.testing.assert_close(compiled_model.steps, eager.steps)
        torch.testing.assert_close(compiled_model.weight, eager.weight)


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_common_base_runs_the_captured_graph(backend):
    """``x`` and ``x.detach()`` share storage without a common autograd base; with a
    gradient needed there is nothing to merge through: the captured graph runs as it is."""
    def fn(a, b):
        b.add_(1)
        return a * b
    if backend == "eager":
        _assert_same(_run(fn, lambda x: (x, x.detach()), backend, train=True))
    else:
        with pytest.warns(tc.FallbackWarning, match="runs uncompiled"):
            _assert_same(_run(fn, lambda x: (x, x.detach()), backend, train=True))
    _assert_same(_run(fn, lambda x: (x.detach(), x.detach().view(12)[:4].view(1, 4)),
                      backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_views_of_another_dtype(backend):
    def fn(a, b):
        b.add_(1)
        return a * 2
    def make(x):
        return x.detach(), x.detach().view(torch.int32)
    with pytest.warns(tc.FallbackWarning) if backend != "eager" else contextlib.nullcontext():
        (out, base, _), (out_c, base_c, _) = _run(fn, make, backend)
    assert torch.equal(out_c, out) and torch.equal(base_c, base)


def test_aot_function_keys_on_the_aliasing():
    """Without Dynamo's guards, AOT itself tells the calls apart (a compilation that writes
    an input is reused only for inputs that share storage alike)."""
    compiled = aot_function(add_then_read, fw_compiler=eager_compiler)
    for make in (ALIASINGS["view"], lambda x: (x, x.detach().clone().view(12)),
                 ALIASINGS["view"], lambda x: (x[1:], x[1:].reshape(8))):
        _assert_same(_run(add_then_read, make, None, compiled=compiled))
    assert compiled.num_compiles == 3


# ---------------------------------------------------------------------------------------
# Random sweep
# ---------------------------------------------------------------------------------------

VIEWS = [  # (source, needs 2-D) for an input made from the base ``x`` (3 x 4)
    "x", "x.view(12)", "x.reshape(4, 3)", "x[1]", "x[:, 1:3]", "x.t()", "x[1:]",
    "x[:, :3]", "x.view(12)[2:8]", "apart", "same",
]
WRITES = [
    "{t}.add_({r})", "{t}.mul_(1.5)", "{t}.copy_({t} * 0 + {r})", "{t}[0] = {r}",
    "torch.add({t}, {r}, out={t})", "{t}.sub_({t} * 0.25)",
]
READS = ["{t}.sum()", "{t}.mean()", "{t}[0].sum()", "({t} * {t}).sum()"]


def _program(seed: int) -> tuple[str, list[str]]:
    """A random function of 2-3 aliased inputs (source text) and how to make its inputs."""
    rng = random.Random(seed)
    n = rng.choice([2, 2, 3])
    views = []
    for i in range(n):
        v = rng.choice(VIEWS if i else VIEWS[:-2])
        views.append(v if v != "same" else views[rng.randrange(i)])
    names = "abc"[:n]
    lines = []
    for _ in range(rng.choice([2, 3, 4])):
        t, o = rng.choice(names), rng.choice(names)
        read = rng.choice(READS).format(t=o)
        if rng.random() < 0.7:
            lines.append(rng.choice(WRITES).format(t=t, r=read))
        else:
            lines.append(f"s = s + {read}")
    body = "\n".join(f"    {line}" for line in lines)
    reads = " + ".join(f"{rng.choice(READS).format(t=t)} * {k + 1}"
                       for k, t in enumerate(names))
    src = (f"def program_{seed}({', '.join(names)}):\n    s = a.sum() * 0\n{body}\n"
           f"    return (s + {reads}).reshape(1)\n")
    return src, views


def _function(seed: int):
    src, views = _program(seed)
    filename = f"<aliased-inputs program {seed}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    namespace = {"torch": torch}
    exec(compile(src, filename, "exec"), namespace)   # noqa: S102 (our own program text)
    return namespace[f"program_{seed}"], views


def _inputs(views, base):
    apart = (base * 0.5 + 1)       # (a tensor of its own, still from the leaf)
    made = {}
    out = []
    for v in views:
        if v == "apart":
            out.append(apart)
        else:
            if v not in made:
                made[v] = eval(v, {"x": base})   # noqa: S307 (the fixed list above)
            out.append(made[v])
    return out


SEEDS = range(24)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", INDUCTOR])
@pytest.mark.parametrize("seed", SEEDS)
def test_random_programs(seed, backend):
    fn, views = _function(seed)
    for train in (False, True):
        if train and _eager_refuses(fn, views):
            continue    # (``out=`` into a tensor that requires grad: eager raises)
        tc.reset()
        _assert_same(_run(fn, lambda x: _inputs(views, x), backend, train))


def _eager_refuses(fn, views) -> bool:
    try:
        _run(fn, lambda x: _inputs(views, x), None, True, compiled=fn)
    except RuntimeError:
        return True
    return False


@pytest.mark.parametrize("seed", SEEDS[:8])
def test_random_programs_decomposed(seed):
    fn, views = _function(seed)
    train = not _eager_refuses(fn, views)
    _assert_same(_run(fn, lambda x: _inputs(views, x), "aot_eager_decomp_partition", train))


def test_the_sweep_writes_aliased_inputs():
    """The sweep is about aliasing: most programs have inputs that share storage and write
    one of them."""
    aliased = 0
    for seed in SEEDS:
        src, views = _program(seed)
        shared = [v for v in views if v != "apart"]
        aliased += len(shared) >= 2 and ("_(" in src or "] =" in src or "out=" in src)
    assert aliased >= len(SEEDS) * 2 // 3
