"""Stage 4: interchangeable with PyTorch, and gradients of random programs.

* Our partitioners as ``partition_fn`` inside PyTorch's own AOTAutograd (``aot_function``
  and, via a torch.compile backend, ``aot_module_simplified``): PyTorch's joint graph of aten
  ops goes through ``from_torch_fx``, comes back through ``to_torch_fx``, and PyTorch's runtime
  computes eager's gradients with it.
* Real Dynamo driving our AOTAutograd: ``torch.compile(model, backend=aot_eager_backend)``;
  and our Dynamo with the ``"aot_eager"`` backend.
* Hypothesis: random programs of table ops (pointwise, broadcasting, reductions, views)
  compiled by our AOT with both partitioners give eager's values and gradients (float64,
  tolerance 1e-8).
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from tutorcompile.aot import (
    aot_eager_backend,
    aot_function,
    default_partition,
    min_cut_partition,
    torch_partition_fn,
)
from tutorcompile.aot.compare import pytorch_partition

pytestmark = [pytest.mark.stage4, pytest.mark.usefixtures("fresh_torch_dynamo")]
F64 = torch.float64
TOL = dict(rtol=1e-8, atol=1e-8)


def gelu_chain(x, b):
    y = x + b
    return 0.5 * y * (1 + torch.tanh(0.7978845608 * (y + 0.044715 * y ** 3)))


@pytest.mark.parametrize("policy", [default_partition, min_cut_partition],
                         ids=["default", "min_cut"])
def test_our_partitioner_inside_pytorch_aot_function(policy):
    x = torch.randn(64, 64, requires_grad=True)
    b = torch.randn(64, requires_grad=True)
    reports = []
    ours = pytorch_partition(gelu_chain, [x, b], torch_partition_fn(policy, reports))
    assert ours.grads_match, "PyTorch's runtime with our partition gives different gradients"
    assert len(reports) == 1 and reports[0].saved_bytes == ours.saved_bytes
    theirs_default = pytorch_partition(gelu_chain, [x, b], "default")
    assert ours.saved_bytes <= theirs_default.saved_bytes
    if policy is min_cut_partition:
        assert ours.saved_bytes < theirs_default.saved_bytes


def test_our_partitioner_inside_aot_module_simplified():
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified
    reports = []

    def backend(gm, example_inputs):
        return aot_module_simplified(gm, example_inputs,
                                     fw_compiler=lambda g, _: make_boxed_func(g),
                                     partition_fn=torch_partition_fn(min_cut_partition,
                                                                     reports))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    reference = copy.deepcopy(model)
    x = torch.randn(5, 8)
    torch.compile(model, backend=backend)(x).pow(2).sum().backward()
    reference(x).pow(2).sum().backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)
    assert reports and reports[0].saved_bytes > 0


def test_real_dynamo_drives_our_aot():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 5), nn.ReLU(), nn.Linear(5, 2), nn.Softmax(dim=-1))
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend=aot_eager_backend)
    x = torch.randn(3, 10)
    out = compiled(x)
    torch.testing.assert_close(out, reference(x))
    out.pow(2).sum().backward()
    reference(x).pow(2).sum().backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-7)


def test_our_dynamo_with_the_aot_eager_backend():
    import tutorcompile.dynamo as dynamo

    def fn(x, w):
        h = torch.tanh(x @ w) * 1
        h.mul_(2)
        return F.softmax(h, -1).sum(0)
    x = torch.randn(4, 6, dtype=F64)
    w = torch.randn(6, 6, dtype=F64, requires_grad=True)
    w2 = w.detach().clone().requires_grad_()
    out = dynamo.compile(fn, backend="aot_eager")(x, w)
    expected = fn(x, w2)
    torch.testing.assert_close(out, expected, **TOL)
    torch.testing.assert_close(torch.autograd.grad(out.sum(), w)[0],
                               torch.autograd.grad(expected.sum(), w2)[0], **TOL)


# ---------------------------------------------------------------------------------------
# Random programs from the table's ops
# ---------------------------------------------------------------------------------------

UNARY = {
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "sin": torch.sin, "cos": torch.cos,
    "relu": torch.relu, "neg": torch.neg, "abs_plus": lambda t: t.abs() + 0.5,
    "exp_tanh": lambda t: torch.exp(torch.tanh(t)), "gelu": F.gelu, "silu": F.silu,
    "square": lambda t: t * t, "softmax": lambda t: torch.softmax(t, -1),
}
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul,
    "maximum": lambda a, b: torch.maximum(a, b + 0.01),
    "where": lambda a, b: torch.where(a > b, a, b * 2),
    "div": lambda a, b: a / (b.abs() + 1),
}
REDUCE = {
    "sum": lambda t: t.sum(-1, keepdim=True), "mean": lambda t: t.mean(0),
    "amax": lambda t: t.amax(-1, keepdim=True), "var": lambda t: t.var(0, keepdim=True),
}
VIEW = {
    "transpose_back": lambda t: t.t().contiguous().t(),
    "reshape_back": lambda t: t.reshape(-1).reshape(t.shape),
    "slice_pad": lambda t: torch.cat([t[..., :1], t[..., 1:]], -1),
}


@st.composite
def programs(draw):
    steps = []
    for _ in range(draw(st.integers(2, 6))):
        kind = draw(st.sampled_from(["unary", "binary", "reduce", "view"]))
        table = {"unary": UNARY, "binary": BINARY, "reduce": REDUCE, "view": VIEW}[kind]
        name = draw(st.sampled_from(sorted(table)))
        steps.append((kind, name, draw(st.integers(0, 10))))
    return steps


def run_program(steps, x, y):
    values = [x, y]
    for kind, name, pick in steps:
        a = values[pick % len(values)]
        if kind == "unary":
            values.append(UNARY[name](a))
        elif kind == "binary":
            values.append(BINARY[name](a, values[(pick + 1) % len(values)]))
        elif kind == "reduce":
            values.append(REDUCE[name](a) + values[0])  # broadcast back to full size
        else:
            values.append(VIEW[name](a))
    return values[-1] + values[-2] * 0.5


@settings(max_examples=25, deadline=None)
@given(steps=programs(), rows=st.integers(2, 5), cols=st.integers(2, 5))
def test_random_programs_match_eager_gradients(steps, rows, cols):
    torch.manual_seed(0)
    x = torch.randn(rows, cols, dtype=F64, requires_grad=True)
    y = torch.randn(cols, dtype=F64, requires_grad=True)  # broadcasts against x
    expected = run_program(steps, x, y)
    g = torch.randn_like(expected)
    want = torch.autograd.grad(expected, (x, y), g, allow_unused=True)
    for policy in (default_partition, min_cut_partition):
        compiled = aot_function(lambda a, b: run_program(steps, a, b), partition_fn=policy)
        out = compiled(x, y)
        torch.testing.assert_close(out, expected, **TOL)
        got = torch.autograd.grad(out, (x, y), g, allow_unused=True)
        for a, e in zip(got, want):
            if e is None:
                assert a is None or a.abs().max() == 0
            else:
                torch.testing.assert_close(a, e, **TOL)


# Programs drawn straight from the op table: every float pointwise prim with a VJP rule,
# called through ``ops`` (eagerly these run the prims' torch references, which the AOT
# tracer records), guarded into its domain where it has one.
def _table_ops():
    from tutorcompile.ops import PRIMS
    probe = torch.ones(2, dtype=F64)
    unary, binary = [], []
    for name, prim in PRIMS.items():
        if prim.kind != "pointwise" or prim.vjp is None or name == "convert_element_type":
            continue
        n_args = prim.vjp.__code__.co_argcount - 2 if hasattr(prim.vjp, "__code__") else 0
        try:
            dtype = prim.meta(*([probe] * n_args))[1]
        except Exception:
            continue
        if dtype.is_floating_point:
            (unary if n_args == 1 else binary if n_args == 2 else []).append(name)
    return sorted(unary), sorted(binary)


TABLE_UNARY, TABLE_BINARY = _table_ops()
POSITIVE = {"log", "sqrt", "rsqrt", "pow"}  # first operand must be > 0


def _guard(name, a):
    from tutorcompile.ops import ops
    return ops.add(ops.abs(a), 0.5) if name in POSITIVE else a


@st.composite
def table_programs(draw):
    return [(draw(st.sampled_from(TABLE_UNARY + TABLE_BINARY)), draw(st.integers(0, 10)))
            for _ in range(draw(st.integers(2, 6)))]


def run_table_program(steps, x, y):
    from tutorcompile.ops import ops
    values = [x, y]
    for name, pick in steps:
        a = _guard(name, values[pick % len(values)])
        if name in TABLE_UNARY:
            values.append(getattr(ops, name)(a))
        else:
            b = values[(pick + 1) % len(values)]
            if name == "div":
                b = ops.add(ops.abs(b), 0.5)
            if name == "pow":
                b = ops.tanh(b)  # modest exponents
            values.append(getattr(ops, name)(a, b))
    return ops.add(values[-1], values[-2])


def test_table_has_the_ops_we_sample():
    assert {"exp", "tanh", "sigmoid", "sin"} <= set(TABLE_UNARY)
    assert {"add", "mul", "div", "maximum"} <= set(TABLE_BINARY)


@settings(max_examples=20, deadline=None)
@given(steps=table_programs())
def test_random_op_table_programs_match_eager_gradients(steps):
    torch.manual_seed(0)
    x = torch.randn(3, 4, dtype=F64, requires_grad=True)
    y = torch.randn(4, dtype=F64, requires_grad=True)
    expected = run_table_program(steps, x, y)
    g = torch.randn_like(expected)
    want = torch.autograd.grad(expected, (x, y), g, allow_unused=True)
    compiled = aot_function(lambda a, b: run_table_program(steps, a, b),
                            partition_fn=min_cut_partition)
    out = compiled(x, y)
    torch.testing.assert_close(out, expected, **TOL)
    got = torch.autograd.grad(out, (x, y), g, allow_unused=True)
    for a, e in zip(got, want):
        if e is None:
            assert a is None or a.abs().max() == 0
        else:
            torch.testing.assert_close(a, e, **TOL)


HEAD = nn.Linear(4, 3)


def test_aot_function_of_a_function_closing_over_a_module_lifts_its_weights():
    # the tensors the function reads from outside (a global module's weight and bias) become
    # trailing inputs of the graphs: the call gives eager's values and fills their .grad
    def head(x):
        return torch.relu(HEAD(x)).softmax(-1)[:, 0]
    x = torch.randn(8, 4, requires_grad=True)
    compiled = aot_function(head)
    out = compiled(x)
    out.sum().backward()
    got = [x.grad, HEAD.weight.grad, HEAD.bias.grad]
    x.grad = HEAD.weight.grad = HEAD.bias.grad = None
    head(x).sum().backward()
    torch.testing.assert_close(out, head(x))
    for g, want in zip(got, [x.grad, HEAD.weight.grad, HEAD.bias.grad]):
        torch.testing.assert_close(g, want)
    assert len(compiled.artifacts.lifted) == 2
