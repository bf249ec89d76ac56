"""Stage 1: graphs -- VJP rules run under the graph handler, random programs end to end, and
the autograd graphs of PyTorch and of our tape as tutorcompile.fx Graphs.

Random expression graphs: hypothesis writes a small program over the prim table (unary,
binary with broadcasting, reductions with keepdim, views); it runs three ways -- torch
autograd on the references, our tape autograd, and trace + backward_graph as GraphModules --
and values and gradients must agree (float64, rtol/atol 1e-7).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tutorcompile.autograd as ag
from tutorcompile.fx import GraphModule, TensorMeta
from tutorcompile.ops import (
    GraphHandler,
    GraphValue,
    backward_graph,
    grad_of,
    ops,
    prims,
    set_handler,
    trace,
)
from tutorcompile.viz import draw

pytestmark = pytest.mark.stage1

F64 = torch.float64
TOL = dict(rtol=1e-7, atol=1e-7)


def _torch_grads(fn, inputs, grad_out=None):
    leaves = [x.detach().clone().requires_grad_() for x in inputs]
    out = fn(*leaves)
    grads = torch.autograd.grad(out, leaves, grad_out if grad_out is not None
                                else torch.ones_like(out), allow_unused=True)
    return out.detach(), grads


# --- the graph handler ---------------------------------------------------------------------

def test_graph_values_know_shape_and_dtype():
    handler = GraphHandler()
    x = handler.placeholder("x", torch.empty(4, 1, 3))
    y = handler.placeholder("y", (torch.Size([5, 3]), torch.float32))
    with set_handler(handler):
        z = ops.sum(ops.mul(x, y), (2,), keepdim=False)
        w = ops.convert_element_type(z > 0.0, torch.float64)
        v = w + 1
    assert isinstance(z, GraphValue) and tuple(z.shape) == (4, 5) and z.dtype == torch.float32
    assert v.dtype == torch.float64 and v.ndim == 2
    meta = z.node.meta["tensor_meta"]
    assert isinstance(meta, TensorMeta) and meta.stride == (5, 1)
    with pytest.raises(RuntimeError, match="no data"):
        bool(z)
    with pytest.raises(ValueError, match="cannot be broadcast"), set_handler(handler):
        ops.add(x, handler.placeholder("bad", torch.empty(2)))


def test_graph_values_record_even_outside_their_handler():
    handler = GraphHandler()
    x = handler.placeholder("x", torch.empty(3))
    y = prims.exp(x) * 2.0          # no set_handler: the eager handler defers to the value
    assert isinstance(y, GraphValue) and y.node.graph is handler.graph
    graph = handler.output(y)
    x = torch.randn(3)
    torch.testing.assert_close(GraphModule({}, graph)(x), x.exp() * 2.0)


def test_eager_handler_can_check_shape_rules():
    from tutorcompile.ops import EagerHandler
    from tutorcompile.ops.prims import register
    bad = register("bad_rule_for_test", "pointwise", torch.exp, lambda a: ((1,), a.dtype),
                   triton="tl.exp({0})", cpp="std::exp({0})")
    try:
        with set_handler(EagerHandler(check_meta=True)):
            prims.exp(torch.ones(2, 2))
            with pytest.raises(AssertionError, match="shape rule says"):
                bad(torch.ones(2, 2))
    finally:
        from tutorcompile.ops import PRIMS
        PRIMS.pop("bad_rule_for_test")
        delattr(prims, "bad_rule_for_test")


def test_backward_graph_gives_torch_gradients():
    def f(x, w, b):
        h = ops.tanh(ops.add(ops.matmul(x, w), b))
        return ops.sum(ops.mul(h, ops.sigmoid(ops.slice(x, 1, 0, 2))))
    x, w, b = (torch.randn(s, dtype=F64) for s in [(4, 3), (3, 2), (2,)])
    fwd = trace(f, x, w, b)
    fwd.lint()
    bwd = backward_graph(fwd)
    bwd.lint()
    gm = GraphModule({}, bwd)
    assert [p.name for p in bwd.placeholders] == ["x", "w", "b", "tangent"]
    assert all(n.op in ("placeholder", "call_function", "output") for n in bwd.nodes)
    assert all(isinstance(n.target, type(prims.add)) for n in bwd.nodes
               if n.op == "call_function")
    assert "prims.matmul(" in gm.code and "backward_graph" in gm.code
    grads = gm(x, w, b, torch.tensor(1.0, dtype=F64))

    def reference(x, w, b):
        return (torch.tanh(x @ w + b) * torch.sigmoid(x[:, 0:2])).sum()
    _, expected = _torch_grads(reference, [x, w, b])
    for ours, theirs in zip(grads, expected):
        torch.testing.assert_close(ours, theirs, **TOL)


def test_backward_graph_of_unused_input_and_multiple_outputs():
    def f(x, y, unused):
        return ops.exp(x), ops.mul(x, y)
    x, y, u = (torch.randn(3, dtype=F64) for _ in range(3))
    bwd = backward_graph(trace(f, x, y, u))
    assert [p.name for p in bwd.placeholders] == ["x", "y", "unused", "tangent", "tangent_1"]
    t0, t1 = torch.randn(3, dtype=F64), torch.randn(3, dtype=F64)
    gx, gy, gu = GraphModule({}, bwd)(x, y, u, t0, t1)
    assert gu is None
    torch.testing.assert_close(gx, t0 * x.exp() + t1 * y, **TOL)
    torch.testing.assert_close(gy, t1 * x, **TOL)


def test_backward_graph_from_example_inputs_fills_meta():
    g = trace(lambda x: ops.sum(ops.sin(x)), torch.randn(3, dtype=F64))
    for node in g.nodes:
        node.meta.clear()
    x = torch.randn(3, dtype=F64)
    with pytest.raises(ValueError, match="example inputs"):
        backward_graph(g)
    (gx,) = GraphModule({}, backward_graph(g, x))(x, torch.tensor(1.0, dtype=F64))
    torch.testing.assert_close(gx, x.cos(), **TOL)


def test_grad_of_broadcasting_is_summed_once():
    x, b = torch.randn(2, 3, 4, dtype=F64), torch.randn(3, 1, dtype=F64)
    gx, gb = grad_of(lambda x, b: ops.mul(ops.add(x, b), b), x, b)
    _, (tx, tb) = _torch_grads(lambda x, b: (x + b) * b, [x, b])
    torch.testing.assert_close(gx, tx, **TOL)
    torch.testing.assert_close(gb, tb, **TOL)
    assert gb.shape == b.shape


# --- random programs ------------------------------------------------------------------------

UNARY = ["tanh", "sigmoid", "sin", "cos", "neg", "relu", "abs", "erf", "exp_tanh", "sqrt_sq"]
BINARY = ["add", "sub", "mul", "maximum", "minimum", "div_safe", "where_gt"]
REDUCE = ["sum", "mean", "amax", "var"]
VIEW = ["transpose_back", "reshape_flat", "slice_cat"]


def _apply(step, values):
    """One program step, written with prims so it runs on tensors, Tensors and GraphValues."""
    kind, name, i, j, dim = step
    a, b = values[i % len(values)], values[j % len(values)]
    if kind == "unary":
        if name == "exp_tanh":
            return prims.exp(prims.tanh(a))
        if name == "sqrt_sq":
            return prims.sqrt(prims.add(prims.mul(a, a), 1.0))
        return getattr(prims, name)(a)
    if kind == "binary":
        if name == "div_safe":
            return prims.div(a, prims.add(prims.mul(b, b), 1.0))
        if name == "where_gt":
            return prims.where(prims.gt(a, b), a, prims.mul(b, 0.5))
        return getattr(prims, name)(a, b)
    ndim = len(a.shape)
    if kind == "reduce":
        if ndim == 0:
            return prims.sigmoid(a)
        d = dim % ndim
        if name == "var" and a.shape[d] < 2:
            return prims.mean(a, (d,), keepdim=True)
        return getattr(prims, name)(a, (d,), keepdim=True)
    if ndim < 2:
        return prims.cos(a)
    if name == "transpose_back":  # permute there and back: a view that must cancel
        order = list(range(ndim))
        order[0], order[-1] = order[-1], order[0]
        return prims.permute(prims.relu(prims.permute(a, tuple(order))), tuple(order))
    if name == "reshape_flat":
        return prims.reshape(prims.mul(prims.reshape(a, (-1,)), 2.0), tuple(a.shape))
    d = dim % ndim
    n = a.shape[d]
    if n < 2:
        return prims.tanh(a)
    return prims.cat([prims.slice(a, d, n // 2, n), prims.slice(a, d, 0, n // 2)], d)


step_strategy = st.one_of(
    st.tuples(st.just("unary"), st.sampled_from(UNARY), st.integers(0, 9), st.integers(0, 9),
              st.integers(0, 3)),
    st.tuples(st.just("binary"), st.sampled_from(BINARY), st.integers(0, 9),
              st.integers(0, 9), st.integers(0, 3)),
    st.tuples(st.just("reduce"), st.sampled_from(REDUCE), st.integers(0, 9),
              st.integers(0, 9), st.integers(0, 3)),
    st.tuples(st.just("view"), st.sampled_from(VIEW), st.integers(0, 9), st.integers(0, 9),
              st.integers(0, 3)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(full=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       masks=st.lists(st.lists(st.booleans(), min_size=3, max_size=3), min_size=1, max_size=3),
       steps=st.lists(step_strategy, min_size=1, max_size=8),
       seed=st.integers(0, 2**16))
def test_random_programs_agree_with_torch(full, masks, steps, seed):
    gen = torch.Generator().manual_seed(seed)
    # inputs broadcast against each other: each is `full` with some dims set to 1
    shapes = [tuple(1 if m else s for s, m in zip(full, mask)) for mask in masks]
    inputs = [torch.randn(s, dtype=F64, generator=gen) for s in shapes]

    def program(*xs):
        values = list(xs)
        for step in steps:
            values.append(_apply(step, values))
        return values[-1]

    expected = program(*inputs)
    grad_out = torch.randn(expected.shape, dtype=F64, generator=gen)
    _, expected_grads = _torch_grads(program, inputs, grad_out)

    # our tape
    leaves = [ag.tensor(x, requires_grad=True) for x in inputs]
    out = program(*leaves)
    torch.testing.assert_close(out.data, expected, **TOL)
    out.backward(grad_out)
    for i, (leaf, g) in enumerate(zip(leaves, expected_grads)):
        if g is None:
            assert leaf.grad is None or not leaf.grad.abs().sum()
        else:
            torch.testing.assert_close(leaf.grad, g, **TOL, msg=lambda m, i=i: f"input {i}: {m}")

    # graphs built by the VJP rules under the graph handler
    fwd = trace(program, *inputs)
    torch.testing.assert_close(GraphModule({}, fwd)(*inputs), expected, **TOL)
    grads = GraphModule({}, backward_graph(fwd))(*inputs, grad_out)
    for ours, theirs in zip(grads, expected_grads):
        if theirs is None:
            assert ours is None or not ours.abs().sum()
        else:
            torch.testing.assert_close(ours, theirs, **TOL)


# --- autograd graphs: PyTorch's and ours ----------------------------------------------------

def test_torch_autograd_graph_structure():
    x = torch.randn(4, 3, requires_grad=True)
    w = torch.randn(3, 2, requires_grad=True)
    y = (x @ w).tanh().sum()
    graph = torch_graph = ag.torch_autograd_graph(y, names={"x": x, "w": w})
    graph.lint()
    calls = [n for n in graph.nodes if n.op == "call_function"]
    assert [n.format_target() for n in calls] == ["SumBackward0", "TanhBackward0",
                                                   "MmBackward0", "AccumulateGrad",
                                                   "AccumulateGrad"]
    assert {n.name for n in calls[-2:]} == {"x", "w"}
    by_name = {n.name: n for n in graph.nodes}
    assert tuple(by_name["x"].meta["tensor_meta"].shape) == (4, 3)
    saved = {k: tuple(v.meta["tensor_meta"].shape) for k, v in calls[1].meta["saved"].items()}
    assert saved == {"result": (4, 2)}
    mm_saved = {k: tuple(v.meta["tensor_meta"].shape) for k, v in calls[2].meta["saved"].items()}
    assert mm_saved == {"self": (4, 3), "mat2": (3, 2)}
    assert graph.placeholders[0].name == "grad_output"
    assert "AccumulateGrad" in draw(torch_graph).text()
    with pytest.raises(RuntimeError, match="does not run"):
        calls[0].target()


def test_torch_autograd_graph_reused_leaf_has_two_incoming_edges():
    x = torch.randn(3, requires_grad=True)
    y = (x * x.exp()).sum()
    graph = ag.torch_autograd_graph(y, names={"x": x})
    leaf = next(n for n in graph.nodes if n.name == "x")
    assert len(leaf.all_input_nodes) == 2
    with pytest.raises(ValueError, match="no grad_fn"):
        ag.torch_autograd_graph(x)


def test_tape_graph_runs_and_differentiates():
    x = ag.tensor(torch.randn(4, 3, dtype=F64), requires_grad=True)
    w = ag.tensor(torch.randn(3, 2, dtype=F64), requires_grad=True)
    c = ag.tensor(torch.randn(2, dtype=F64))
    y = ((x @ w).tanh() * c).sum()
    graph = ag.tape_graph(y, names={"x": x, "w": w, "c": c})
    graph.lint()
    assert [p.name for p in graph.placeholders] == ["x", "w", "c"]
    gm = GraphModule({}, graph)
    torch.testing.assert_close(gm(x.data, w.data, c.data), y.data)
    y.backward()
    gx, gw, gc = GraphModule({}, backward_graph(graph))(x.data, w.data, c.data,
                                                        torch.tensor(1.0, dtype=F64))
    torch.testing.assert_close(gx, x.grad, **TOL)
    torch.testing.assert_close(gw, w.grad, **TOL)


def test_tape_backward_graph_mirrors_torch():
    x = ag.tensor(torch.randn(4, 3), requires_grad=True)
    w = ag.tensor(torch.randn(3, 2), requires_grad=True)
    y = (x @ w).tanh().sum()
    graph = ag.tape_backward_graph(y, names={"x": x, "w": w})
    graph.lint()
    calls = [n.format_target() for n in graph.nodes if n.op == "call_function"]
    assert calls[:3] == ["SumBackward", "TanhBackward", "MatmulBackward"]
    assert sorted(calls[3:]) == ["AccumulateGrad", "AccumulateGrad"]
    assert {n.name for n in graph.output_node.args[0]} == {"x", "w"}


def test_backward_graph_on_every_device(device):
    x = torch.randn(3, 4, dtype=F64, device=device)
    b = torch.randn(4, dtype=F64, device=device)

    def f(x, b):
        y = ops.slice(ops.add(x, b), 0, 1, 3)
        return ops.sum(ops.mul(ops.cat([y, ops.exp(y)], 0), 2.0))
    gx, gb = grad_of(f, x, b)
    _, (tx, tb) = _torch_grads(
        lambda x, b: (torch.cat([(x + b)[1:3], (x + b)[1:3].exp()]) * 2.0).sum(), [x, b])
    assert gx.device.type == device
    torch.testing.assert_close(gx, tx, **TOL)
    torch.testing.assert_close(gb, tb, **TOL)


def test_prim_graphs_convert_to_torch_fx():
    from tutorcompile.fx import to_torch_fx
    x = torch.randn(3, 4)
    gm = to_torch_fx(GraphModule({}, trace(lambda x: ops.sum(ops.tanh(x), (1,)), x)))
    assert "tutorcompile_ops_prims_tanh(x)" in gm.code  # torch.fx names it by its import path
    torch.testing.assert_close(gm(x), torch.tanh(x).sum(1))
