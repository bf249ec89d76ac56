"""Stage 2: symbolic tracing, checked against eager PyTorch and against torch.fx.

"Same program" means: after dropping the nodes that check ``concrete_args`` (torch.fx asserts
with ``_assert_is_none``/``torch._assert``, we call ``check_concrete_arg``), our graph and
``from_torch_fx(torch.fx.symbolic_trace(m))`` have the same nodes in the same order -- same
op, same target, same arguments with node references compared by position -- and all three
(eager, ours, torch.fx's) give the same outputs on random inputs (rtol=1e-5, atol=1e-6).
"""

from __future__ import annotations

import operator

import pytest
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from tutorcompile.fx import GraphModule, Node, from_torch_fx, map_arg, symbolic_trace
from tutorcompile.fx.tracer import Tracer, check_concrete_arg

pytestmark = pytest.mark.stage2

TOL = dict(rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------
# The models: each entry is (name, make_model, make_inputs, concrete_args)
# ---------------------------------------------------------------------------------------

class ResidualBlock(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + x)


class Attention(nn.Module):
    """Hand-written multi-head self-attention: views, transposes, matmuls, softmax."""

    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(b, t, self.heads, self.head_dim).transpose(1, 2)
        v = v.view(b, t, self.heads, self.head_dim).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (self.head_dim ** -0.5)
        att = torch.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, d)
        return self.proj(y)


class WithBuffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.linspace(-1, 1, 6))
        self.scale = nn.Parameter(torch.full((6,), 0.5))

    def forward(self, x):
        return (x + self.offset) * self.scale - self.scale


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        return torch.tanh(self.lin(x)) + x


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = Inner()
        self.b = nn.Sequential(Inner(), nn.ReLU())

    def forward(self, x):
        return self.b(self.a(x))


class TupleDictOut(nn.Module):
    def forward(self, x, y):
        return (x + y, [x * y]), {"diff": x - y, "max": torch.maximum(x, y)}


class OptionalInput(nn.Module):
    def forward(self, x, mask=None):
        if mask is not None:
            x = x.masked_fill(mask, 0.0)
        return x * 2


class Slicing(nn.Module):
    def forward(self, x):
        return x[:, 1:3] + x[..., 0:1] + x[None, 0, :2].sum() + x[-1, 2:4]


class ShapeUser(nn.Module):
    def forward(self, x):
        n, c = x.shape[0], x.size(1)
        flat = x.view(x.size(0), -1)
        return flat.reshape(n, c, -1).sum(-1) / x.shape[-1]


class CatStack(nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y], dim=1), torch.stack((x, y), 0).mean(0)


class Functional(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm_weight = nn.Parameter(torch.ones(6))

    def forward(self, x):
        h = F.layer_norm(x, (6,), self.norm_weight)
        h = F.gelu(h) + F.silu(h)
        return F.dropout(F.softmax(h, dim=-1), p=0.5, training=False)


class MethodChain(nn.Module):
    def forward(self, x):
        return x.relu().sum(-1).unsqueeze(0).mean().neg().exp()


class Operators(nn.Module):
    def forward(self, x, y):
        mask = (x > 0) & ~(y < 0.5) | (x == y)
        z = torch.where(mask, x ** 2, 2 ** y) // 1.5 % 3
        return -z + abs(x) - (1 - y) / (y + 2) + (x @ y.T).sum() + x.T.sum()


class FunctionalLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3, 6))
        self.bias = nn.Parameter(torch.randn(3))

    def forward(self, x):
        return F.linear(x, self.weight, self.bias) + self.weight.sum()


class LSTMUnpack(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 5, batch_first=True)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return out[:, -1] + h[0] + c[0]


def fn_with_kwargs(x, y, *, alpha=0.5, beta=2):
    return torch.relu(x) * alpha + y.clamp(min=0.0) ** beta


def _cnn():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(4 * 3 * 3, 5))


MODELS = [
    ("mlp", lambda: nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)),
     lambda: (torch.randn(4, 6),), None),
    ("cnn_bn", _cnn, lambda: (torch.randn(2, 3, 8, 8),), None),
    ("residual", ResidualBlock, lambda: (torch.randn(2, 4, 5, 5),), None),
    ("attention", Attention, lambda: (torch.randn(2, 5, 16),), None),
    ("seed", lambda: nn.Sequential(nn.Linear(10, 5), nn.ReLU(), nn.Linear(5, 2),
                                   nn.Softmax(dim=-1)), lambda: (torch.randn(3, 10),), None),
    ("fn_kwargs", lambda: fn_with_kwargs, lambda: (torch.randn(4, 6), torch.randn(4, 6)),
     None),
    ("buffers", WithBuffers, lambda: (torch.randn(3, 6),), None),
    ("nested", Outer, lambda: (torch.randn(3, 6),), None),
    ("tuple_dict_out", TupleDictOut, lambda: (torch.randn(3, 6), torch.randn(3, 6)), None),
    ("concrete_args", OptionalInput, lambda: (torch.randn(3, 6),), {"mask": None}),
    ("slicing", Slicing, lambda: (torch.randn(4, 6),), None),
    ("shape_size", ShapeUser, lambda: (torch.randn(2, 3, 4),), None),
    ("cat_stack", CatStack, lambda: (torch.randn(3, 6), torch.randn(3, 6)), None),
    ("functional", Functional, lambda: (torch.randn(3, 6),), None),
    ("method_chain", MethodChain, lambda: (torch.randn(3, 6),), None),
    ("operators", Operators, lambda: (torch.randn(3, 6), torch.rand(3, 6)), None),
    ("functional_linear", FunctionalLinear, lambda: (torch.randn(4, 6),), None),
    ("lstm_unpack", LSTMUnpack, lambda: (torch.randn(2, 3, 6),), None),
]


# ---------------------------------------------------------------------------------------
# Comparing programs
# ---------------------------------------------------------------------------------------

_CHECKS = {check_concrete_arg, torch.fx._symbolic_trace._assert_is_none, torch._assert}


def _kept_nodes(gm) -> list:
    """Nodes without the concrete_args checks (and values only those checks read)."""
    dropped: set = set()
    for node in reversed(list(gm.graph.nodes)):
        if node.op == "call_function" and node.target in _CHECKS:
            dropped.add(node)
        elif node.op not in ("placeholder", "output") and node.users \
                and all(u in dropped for u in node.users):
            dropped.add(node)
    return [n for n in gm.graph.nodes if n not in dropped]


def program(gm) -> list[tuple]:
    """(op, target, args, kwargs) rows with node references replaced by their position."""
    nodes = _kept_nodes(gm)
    index = {n: i for i, n in enumerate(nodes)}
    rows = []
    for n in nodes:
        target = "input" if n.op == "placeholder" else n.target
        ref = lambda m: ("%", index[m])  # noqa: E731
        args = () if n.op == "placeholder" else map_arg(n.args, ref)
        rows.append((n.op, target, args, map_arg(n.kwargs, ref)))
    return rows


def op_targets(gm) -> list[tuple]:
    return [(op, t) for op, t, _, _ in program(gm)]


def _flat(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    if isinstance(out, dict):
        return [t for k in sorted(out) for t in _flat(out[k])]
    raise TypeError(type(out))


def _assert_same_outputs(a, b):
    fa, fb = _flat(a), _flat(b)
    assert len(fa) == len(fb)
    for x, y in zip(fa, fb):
        torch.testing.assert_close(x, y, **TOL)


@pytest.mark.parametrize("name,make,inputs,concrete", MODELS, ids=[m[0] for m in MODELS])
def test_same_program_as_torch_fx(name, make, inputs, concrete):
    model = make()
    if isinstance(model, nn.Module):
        model.eval()
    ours = symbolic_trace(model, concrete_args=concrete)
    theirs = torch.fx.symbolic_trace(model, concrete_args=concrete)
    assert isinstance(ours, GraphModule)
    assert ours.graph.provenance == ["symbolic_trace"]
    ours.graph.lint(ours)
    # same (op, target) sequence against torch.fx's own graph ...
    assert op_targets(ours) == op_targets(theirs), f"{name}: op/target sequences differ"
    # ... and node by node (arguments too) against its conversion into our IR
    converted = from_torch_fx(theirs)
    assert program(ours) == program(converted), f"{name}: node arguments differ"
    # the same values
    args = inputs()
    with torch.no_grad():
        expected = model(*args)
        _assert_same_outputs(ours(*args), expected)
        _assert_same_outputs(theirs(*args), expected)


def test_model_count_covers_the_brief():
    assert len(MODELS) >= 15


# ---------------------------------------------------------------------------------------
# Where torch.fx and we differ on purpose
# ---------------------------------------------------------------------------------------

class BufferOnTheLeft(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.arange(4.0))

    def forward(self, x):
        return self.b + x


def test_real_tensor_on_the_left_of_an_operator_is_a_method_call():
    # `self.b + x` runs Tensor.__add__(b, proxy) first; PyTorch hands the call to
    # Proxy.__torch_function__ as `Tensor.add`, so the `+` is already gone: both tracers
    # record the method call `b.add(x)`, where `x + self.b` gives `operator.add`.
    m = BufferOnTheLeft()
    ours, theirs = symbolic_trace(m), torch.fx.symbolic_trace(m)
    assert op_targets(ours) == op_targets(theirs)
    assert ("call_method", "add") in op_targets(ours)
    x = torch.randn(4)
    torch.testing.assert_close(ours(x), m(x))
    assert "b.add(x)" in ours.code


def test_concrete_args_check_at_run_time():
    gm = symbolic_trace(OptionalInput(), concrete_args={"mask": None})
    x = torch.randn(2, 3)
    torch.testing.assert_close(gm(x), x * 2)
    with pytest.raises(ValueError, match="fixed to None by concrete_args"):
        gm(x, torch.zeros(2, 3, dtype=torch.bool))
    # the other specialisation traces the other branch
    mask = torch.tensor([[True, False, True], [False, False, True]])
    gm2 = symbolic_trace(OptionalInput(), concrete_args={"mask": mask})
    assert "masked_fill" in gm2.code
    torch.testing.assert_close(gm2(x, mask), x.masked_fill(mask, 0.0) * 2)


def test_concrete_flag_specialises_python_control_flow():
    def f(x, relu=True):
        return torch.relu(x) if relu else torch.tanh(x)
    on = symbolic_trace(f, concrete_args={"relu": True})
    off = symbolic_trace(f, concrete_args={"relu": False})
    assert "torch.relu" in on.code and "torch.tanh" not in on.code
    assert "torch.tanh" in off.code
    x = torch.randn(5)
    torch.testing.assert_close(off(x, False), torch.tanh(x))
    with pytest.raises(ValueError, match="relu"):
        on(x, False)
    with pytest.raises(TypeError, match="does not take"):
        symbolic_trace(f, concrete_args={"nope": 1})


# ---------------------------------------------------------------------------------------
# Leaf modules, parameters, constants, functions
# ---------------------------------------------------------------------------------------

def test_leaf_modules_default_and_configurable():
    model = Outer()
    default = symbolic_trace(model)
    assert {n.target for n in default.graph.find_nodes(op="call_module")} == \
        {"a.lin", "b.0.lin", "b.1"}
    as_leaf = symbolic_trace(model, leaf_modules=[Inner])
    assert [n.target for n in as_leaf.graph.find_nodes(op="call_module")] == \
        ["a", "b.0", "b.1"]
    by_name = symbolic_trace(model, leaf_modules=["a"])
    assert [n.target for n in by_name.graph.find_nodes(op="call_module")][0] == "a"

    class InlineEverything(Tracer):
        def is_leaf_module(self, m, name):
            return False
    graph = InlineEverything().trace(model)
    assert not graph.find_nodes(op="call_module")
    assert {n.target for n in graph.find_nodes(op="get_attr")} >= {"a.lin.weight",
                                                                  "a.lin.bias"}
    gm = GraphModule(model, graph)
    x = torch.randn(2, 6)
    torch.testing.assert_close(gm(x), model(x), **TOL)


def test_parameters_are_one_get_attr_each_and_shared():
    model = FunctionalLinear()
    gm = symbolic_trace(model)
    assert [n.target for n in gm.graph.find_nodes(op="get_attr")] == ["weight", "bias"]
    assert gm.weight is model.weight  # shared, not copied


def test_function_closing_over_tensor_and_module():
    table = torch.randn(6)
    lin = nn.Linear(6, 2)

    def f(x):
        return lin(x * table)
    gm = symbolic_trace(f)
    assert type(gm).__name__ == "f"
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "get_attr", "call_function",
                                              "call_module", "output"]
    x = torch.randn(3, 6)
    torch.testing.assert_close(gm(x), f(x))
    assert gm._tensor_constant0 is table


def test_lambda_and_empty_root():
    gm = symbolic_trace(lambda x, y: torch.add(x, y, alpha=2))
    assert list(gm.named_parameters()) == []
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(gm(x, y), x + 2 * y)
    assert "alpha=2" in gm.code


def test_setitem_and_kwargs_only_inputs():
    def f(x, *, scale=3.0):
        y = x.clone()
        y[0] = scale
        return y
    gm = symbolic_trace(f)
    assert any(n.target is operator.setitem for n in gm.graph.nodes)
    x = torch.randn(3)
    torch.testing.assert_close(gm(x), f(x))
    torch.testing.assert_close(gm(x, scale=5.0), f(x, scale=5.0))


def test_every_node_records_the_user_source_line():
    model = Attention()
    gm = symbolic_trace(model)
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        source = node.meta["source"]
        assert source.startswith("test_stage2_tracer.py:"), source
        assert " in forward: " in source
    (x,) = gm.graph.placeholders
    assert x.meta["source"].endswith("in forward: def forward(self, x):")
    by_name = {n.name: n.meta["source"] for n in gm.graph.nodes}
    assert by_name["softmax"].endswith("att = torch.softmax(att, dim=-1)")
    assert by_name["qkv"].endswith("q, k, v = self.qkv(x).chunk(3, dim=-1)")


def test_retracing_a_graph_module_gives_the_same_program():
    model = ResidualBlock().eval()
    once = symbolic_trace(model)
    twice = symbolic_trace(once)
    assert op_targets(twice) == op_targets(once)
    x = torch.randn(1, 4, 5, 5)
    torch.testing.assert_close(twice(x), model(x), **TOL)


def test_node_type_is_ours():
    gm = symbolic_trace(lambda x: x + 1)
    assert all(isinstance(n, Node) for n in gm.graph.nodes)


# ---------------------------------------------------------------------------------------
# Random programs: hypothesis builds chains of operators, methods and torch functions
# ---------------------------------------------------------------------------------------

_STEPS = {
    "add": lambda h, x: h + x, "rsub": lambda h, x: 1.5 - h, "mul": lambda h, x: h * x,
    "div": lambda h, x: h / (x.abs() + 1), "neg": lambda h, x: -h,
    "relu": lambda h, x: torch.relu(h), "tanh_method": lambda h, x: h.tanh(),
    "gelu": lambda h, x: F.gelu(h), "matmul": lambda h, x: h @ x.T,
    "transpose": lambda h, x: h.transpose(0, 1), "center": lambda h, x: h - h.mean(-1, True),
    "roll_by_slices": lambda h, x: torch.cat([h[:, 1:], h[:, :1]], dim=1),
    "stack_mean": lambda h, x: torch.stack((h, x)).mean(0), "flip": lambda h, x: h.flip(-1),
    "where": lambda h, x: torch.where(h > 0, h, h * 0.1), "pow": lambda h, x: h ** 2,
}


@settings(max_examples=25, deadline=None)
@given(steps=st.lists(st.sampled_from(sorted(_STEPS)), min_size=1, max_size=6))
def test_random_programs_match_torch_fx(steps):
    # every step keeps the [3, 3] shape, so any sequence is a valid program
    fn = _unrolled(steps)
    ours, theirs = symbolic_trace(fn), torch.fx.symbolic_trace(fn)
    assert op_targets(ours) == op_targets(theirs)
    assert program(ours) == program(from_torch_fx(theirs))
    x = torch.randn(3, 3)
    torch.testing.assert_close(ours(x), fn(x), **TOL)


def _unrolled(steps):
    def fn(x):
        h = x
        for step in steps:
            h = _STEPS[step](h, x)
        return h
    return fn
