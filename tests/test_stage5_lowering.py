"""Stage 5: prims lower to loop IR, checked with the IR's own reference interpreter.

No code generator is involved here: ``evaluate_lowering`` runs every buffer's inner function
with torch tensors as indices, so a wrong index map or a wrong dtype shows up as a wrong
value against the prim graph run eagerly (the oracle, itself checked against PyTorch in
stage 1).
"""

import pytest
import sympy
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kernel_backends import on
from tutorcompile.fx import GraphModule
from tutorcompile.inductor import examples, ir
from tutorcompile.inductor.lowering import (
    BackwardOf,
    evaluate_lowering,
    lower_graph,
    lowering_key,
    lowerings,
    register_lowering,
)
from tutorcompile.ops import PRIMS, ops, trace

pytestmark = pytest.mark.stage5


def check(fn, *inputs, rtol=1e-5, atol=1e-5):
    graph = trace(fn, *inputs)
    lowering = lower_graph(graph, inputs)
    got = evaluate_lowering(lowering, *inputs)
    expected = GraphModule({}, graph)(*inputs)
    torch.testing.assert_close(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    return lowering


def test_every_prim_has_a_lowering_or_is_extern():
    for prim in PRIMS.values():
        assert prim in lowerings, f"{prim.name} has no lowering"


def _twice(x):
    return x * 2


def _graph_of_one_call(target, x):
    from tutorcompile.fx import Graph, ShapeProp
    graph = Graph()
    a = graph.placeholder("x")
    graph.output(graph.call_function(target, (a,)))
    ShapeProp(GraphModule({}, graph)).run(x)
    return graph


def test_register_lowering_keys_any_call_target_not_only_prims():
    """A plain function in the graph runs in PyTorch until a rule is registered for it; then
    it lowers like a prim (here to one pointwise buffer), with no branch in lower_call."""
    x = torch.randn(4, 3)
    graph = _graph_of_one_call(_twice, x)
    before = lower_graph(graph, (x,))
    assert isinstance(before.buffers[0], ir.ExternKernel)
    assert any("_twice is not a prim; it runs in PyTorch" in f for f in before.fallbacks)

    @register_lowering(_twice)
    def lower_twice(lowering, node, a):
        load = a.make_loader()
        return lowering.pointwise(node, tuple(a.get_size()), a.get_dtype(),
                                  lambda i: ops.mul(load(i), ir.constant(2.0, a.get_dtype())))
    try:
        after = lower_graph(graph, (x,))
        assert [type(b) for b in after.buffers] == [ir.ComputedBuffer] and not after.fallbacks
        torch.testing.assert_close(evaluate_lowering(after, x), x * 2)
    finally:
        del lowerings[_twice]


def test_a_gradient_of_an_extern_call_is_keyed_by_what_it_differentiates():
    from tutorcompile.aot.joint import extern_backward
    from tutorcompile.fx import Graph
    from tutorcompile.ops.scan import sequential_scan
    graph = Graph()
    a = graph.placeholder("a")
    node = graph.call_function(extern_backward, (sequential_scan, (), {}, a))
    assert lowering_key(node) == BackwardOf(sequential_scan)
    assert lowerings[BackwardOf(sequential_scan)] is not lowerings[sequential_scan]
    unhashable = graph.call_function(extern_backward, ([1], (), {}, a))
    assert lowering_key(unhashable) is None   # no rule can be keyed by it: PyTorch runs it


def test_all_pointwise_prims_lower_correctly():
    lowering = check(examples.all_pointwise, *examples.pointwise_inputs())
    assert all(isinstance(b, ir.ComputedBuffer) for b in lowering.buffers)


@pytest.mark.parametrize("name", ["softmax", "layernorm", "rmsnorm", "chain"])
def test_examples_lower_and_match_torch(name):
    x = torch.randn(5, 37)
    args = {"softmax": (x,), "layernorm": (x, torch.randn(37), torch.randn(37)),
            "rmsnorm": (x, torch.randn(37)), "chain": (x, torch.randn(37))}[name]
    graph = trace(getattr(examples, name), *args)
    got = evaluate_lowering(lower_graph(graph, args), *args)
    torch.testing.assert_close(got, examples.TORCH[name](*args), rtol=1e-5, atol=1e-5)


def test_views_are_index_arithmetic_not_buffers():
    def fn(x):
        t = ops.permute(x, (2, 0, 1))                     # (5, 3, 4)
        r = ops.reshape(t, (15, 4))
        s = ops.slice(r, 0, 1, None, 2)                    # rows 1, 3, ..., 13
        u = ops.unsqueeze(ops.squeeze(ops.reshape(s, (1, 7, 4)), (0,)), 2)
        e = ops.expand(u, (7, 4, 3))
        return ops.exp(e)
    x = torch.randn(3, 4, 5)
    lowering = check(fn, x)
    assert len(lowering.buffers) == 1, lowering.buffers   # only exp computes


def test_non_contiguous_and_offset_inputs():
    base = torch.randn(9, 12)
    x = base[1:, ::2].t()                                  # strides (2, 12), offset 1
    assert not x.is_contiguous() and x.storage_offset() == 12
    lowering = check(lambda x: ops.sum(ops.exp(x), (0,)), x)
    assert lowering.graph_inputs[0].layout.stride == tuple(x.stride())


@pytest.mark.parametrize("dims,keepdim", [((0,), False), ((1,), True), ((0, 2), False),
                                          (None, False), ((), False)])
def test_reductions(dims, keepdim):
    x = torch.randn(3, 5, 7)

    def fn(x):
        return (ops.sum(x, dims, keepdim=keepdim), ops.amax(x, dims, keepdim=keepdim),
                ops.mean(x, dims, keepdim=keepdim))
    check(fn, x)


def test_var_and_integer_sum():
    x = torch.randn(4, 9)
    check(lambda x: ops.var(x, (1,), correction=1), x)
    check(lambda x: ops.sum(ops.gt(x, 0), None), x)
    check(lambda i: ops.sum(i, (0,)), torch.randint(-5, 5, (6, 3), dtype=torch.int32))


def test_type_promotion_int_and_float():
    i = torch.randint(-4, 9, (5, 6), dtype=torch.int64)
    f = torch.randn(6)
    check(lambda i, f: (ops.add(i, f), ops.div(i, 4), ops.mul(i, 3), ops.lt(i, 2.5)), i, f)


def test_extern_calls_run_in_pytorch():
    x, w = torch.randn(4, 6), torch.randn(6, 3)
    lowering = check(lambda x, w: ops.relu(ops.matmul(ops.permute(x, (1, 0)), x)), x, w)
    assert isinstance(lowering.buffers[0], ir.ExternKernel)
    assert "matmul" in lowering.fallbacks[0]
    check(lambda x: ops.cat([x, ops.exp(x)], 0), x)


def test_index_simplification_joins_digits():
    i = ir.index_symbol("i")
    for shape in [(3, 4, 5), (2, 7), (6,)]:
        flat = ir.flatten_index(ir.unflatten_index(i, shape), shape)
        assert ir.simplify_index(flat) == i, (shape, flat)
    x0, r0 = ir.index_symbol("x0"), ir.index_symbol("r0")   # a reduction's row and column
    flat = ir.flatten_index(ir.unflatten_index(64 * x0 + r0, (8, 64)), (8, 64))
    assert ir.simplify_index(flat) == 64 * x0 + r0, flat


def test_whole_multiples_come_out_of_a_floor():
    """The index of a split reduction read through a reshape: ``x0 % 64`` never carries
    into ``64 * r0``, so the floors and digits collapse to plain loop indices."""
    r0, x0 = ir.index_symbol("r0"), ir.index_symbol("x0")
    e = 64 * r0 + ir.ModularIndexing(x0, 1, 64)
    assert ir.FloorDiv(e, 64) == r0
    assert ir.FloorDiv(e, 2048) == ir.FloorDiv(r0, 32)
    assert ir.ModularIndexing(e, 64, 32) == ir.ModularIndexing(r0, 1, 32)
    assert ir.ModularIndexing(e, 16, 4) == ir.ModularIndexing(x0, 16, 4)
    assert ir.ModularIndexing(e, 1, 16) == ir.ModularIndexing(x0, 1, 16)
    # a digit's high part is a digit, and a loop split at 16 then reads 16 in a row: the
    # columns of heads a cat of q, k and v's gradients reads, ``(x % 64) // 16``
    assert ir.FloorDiv(ir.ModularIndexing(x0, 1, 64), 16) == ir.ModularIndexing(x0, 16, 4)
    a, b = ir.index_symbol("x0a"), ir.ModularIndexing(ir.index_symbol("xib"), 1, 16)
    assert ir.FloorDiv(ir.ModularIndexing(16 * a + b, 1, 64), 16) == \
        ir.ModularIndexing(a, 1, 4)
    assert ir.FloorDiv(64 * r0 + x0, 64) != r0   # x0 may carry: nothing to peel
    assert ir.FloorDiv(e + 1, 64) != r0          # nor may 63 + 1


SIZES = {"a": 7, "b": 12, "c": 64}
"""Each index symbol's range in the property test below."""

_leaves = st.one_of(st.sampled_from(sorted(SIZES)).map(lambda n: ("sym", n)),
                    st.integers(0, 70).map(lambda v: ("const", v)),
                    st.sampled_from(sorted(SIZES)).map(lambda n: ("flip", n)))
_exprs = st.recursive(_leaves, lambda inner: st.one_of(
    st.tuples(st.just("lin"), st.sampled_from([1, 2, 4, 8, 16, 64, 96]), inner, inner),
    st.tuples(st.just("floor"), inner, st.sampled_from([2, 4, 8, 16, 64, 2048])),
    st.tuples(st.just("digit"), inner, st.sampled_from([1, 2, 4, 16, 64]),
              st.sampled_from([2, 4, 8, 32, 64]))), max_leaves=8)


def _build(tree, values):
    """The tree as an IR expression (simplified as it is built) and as a Python integer."""
    kind = tree[0]
    if kind == "sym":
        return ir.index_symbol(tree[1]), values[tree[1]]
    if kind == "const":
        return sympy.Integer(tree[1]), tree[1]
    if kind == "flip":   # size - 1 - i: a negative coefficient, never a negative value
        n = SIZES[tree[1]]
        return n - 1 - ir.index_symbol(tree[1]), n - 1 - values[tree[1]]
    if kind == "lin":
        (e1, v1), (e2, v2) = _build(tree[2], values), _build(tree[3], values)
        return tree[1] * e1 + e2, tree[1] * v1 + v2
    e, v = _build(tree[1], values)
    if kind == "floor":
        return ir.FloorDiv(e, tree[2]), v // tree[2]
    return ir.ModularIndexing(e, tree[2], tree[3]), (v // tree[2]) % tree[3]


@settings(max_examples=300, deadline=None)
@given(tree=_exprs, values=st.fixed_dictionaries(
    {n: st.integers(0, size - 1) for n, size in SIZES.items()}))
def test_index_simplification_keeps_every_value(tree, values):
    """Whatever the rules fold while an index expression is built, substituting the loop
    indices afterwards gives what Python's ``//`` and ``%`` give on the unsimplified one."""
    expr, expected = _build(tree, values)
    got = expr.subs({ir.index_symbol(n): v for n, v in values.items()})
    assert got == expected, (tree, values, expr)


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_iota_is_computed_from_the_loop_index(backend):
    """argmax and a triangular mask from ``iota``: generated kernels, no tensor constants."""
    from tutorcompile.inductor import compile_fx

    def f(x):
        n, m = x.shape
        cols = ops.reshape(ops.iota(m, dtype=torch.int64, device=x.device), (1, m))
        rows = ops.reshape(ops.iota(n, start=1, step=2, dtype=torch.int64, device=x.device),
                           (n, 1))
        best = ops.amax(x, (1,), keepdim=True)
        first = ops.neg(ops.amax(ops.neg(ops.where(ops.eq(x, best), cols, m)), (1,)))
        return first, ops.where(ops.le(cols, rows), x, 0.0)
    (x,) = on(backend, torch.randn(5, 7))
    compiled = compile_fx(trace(f, x), [x], codegen=backend)
    first, lower = compiled(x)
    assert compiled.num_kernels >= 1 and "runs in PyTorch" not in compiled.wrapper_code
    torch.testing.assert_close(first, x.argmax(1))
    mask = torch.arange(7, device=x.device) <= torch.arange(1, 10, 2, device=x.device)[:, None]
    torch.testing.assert_close(lower, x * mask)


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_tensor_constants_become_buffers_kernels_load(backend):
    """A tensor folded into the graph as a constant -- the empty key/value cache a decoder
    concatenates onto, a fixed ``arange`` -- is a buffer made once at compile time, and the
    ops reading it are generated kernels, not PyTorch calls per call. A 0-d constant stays
    a PyTorch call (a number to type promotion, not a tensor of the same rank)."""
    from tutorcompile.inductor import compile_fx
    (x,) = on(backend, torch.randn(3, 4))
    empty = torch.empty(3, 0, device=x.device)
    table = torch.arange(1.0, 5.0, device=x.device)
    half = torch.tensor(0.5, device=x.device)

    def f(x):
        keys = ops.cat([empty, x], 1)
        return ops.mul(keys, table), ops.add(ops.exp(keys), half)
    compiled = compile_fx(trace(f, x), [x], codegen=backend)
    scaled, shifted = compiled(x)
    torch.testing.assert_close(scaled, x * table)
    torch.testing.assert_close(shifted, x.exp() + 0.5)
    code = compiled.wrapper_code
    assert code.count("reads a tensor constant") == 1, code
    assert "add reads a tensor constant" in code, code
    assert code.count("computed once at compile time") == 2, code
