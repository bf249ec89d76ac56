"""Stage 5: prims lower to loop IR, checked with the IR's own reference interpreter.

No code generator is involved here: ``evaluate_lowering`` runs every buffer's inner function
with torch tensors as indices, so a wrong index map or a wrong dtype shows up as a wrong
value against the prim graph run eagerly (the oracle, itself checked against PyTorch in
stage 1).
"""

import pytest
import torch

from tutorcompile.fx import GraphModule
from tutorcompile.inductor import examples, ir
from tutorcompile.inductor.lowering import evaluate_lowering, lower_graph, lowerings
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
    x = torch.randn(5, 7)
    compiled = compile_fx(trace(f, x), [x], backend=backend)
    first, lower = compiled(x)
    assert compiled.num_kernels >= 1 and "runs in PyTorch" not in compiled.wrapper_code
    torch.testing.assert_close(first, x.argmax(1))
    torch.testing.assert_close(lower, x * (torch.arange(7) <= torch.arange(1, 10, 2)[:, None]))
