"""Stage 4: functionalization -- in-place ops and input mutations become pure graphs.

Each function mutates something; the compiled version must (1) return what eager returns,
(2) leave the caller's inputs exactly as eager leaves them, (3) have a graph without any
in-place op, and (4) give eager's gradients where they exist. Mutations through views are
either handled correctly or refused with FunctionalizationError. float64, tolerance 1e-10.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tutorcompile.aot import FunctionalizationError, aot_function, functionalize
from tutorcompile.aot.tracing import trace_with_inputs
from tutorcompile.fx.passes.dce_cse import is_impure

pytestmark = pytest.mark.stage4
F64 = torch.float64
TOL = dict(rtol=1e-10, atol=1e-10)


def mutate_input(x, y):
    x.add_(y)
    x.mul_(2)
    return x.sum(1)


def mutate_intermediate(x):
    h = x * 2
    h.mul_(3)
    h[0] = 5.0
    h[:, 1:3] = x[:, :2]
    h.sub_(1)
    return h


def inplace_kwarg(x):
    h = x - 0.5
    F.relu(h, inplace=True)
    return h * 3


def view_sees_mutation(x):
    h = x + 1
    v = h.view(-1)[:4]       # a view taken before the mutation ...
    h.mul_(10)
    return v * 1             # ... reads the mutated values


def mutate_through_view(x):
    h = x.clone()
    h.t()[0].add_(100.0)     # write into a column through a transposed row view
    h[1:, :2].mul_(-1)
    return h


def copy_and_fill(x, y):
    h = torch.zeros_like(x)
    h.copy_(y)
    h[0].fill_(7.0)
    x.zero_()
    return h + 1


def operators_iadd(x, y):
    h = x * 1
    h += y
    h *= y
    return h


def update_one_result_of_topk(x, y):
    values, indices = torch.topk(x, 2, dim=-1)  # Mixtral's router: not a view of a tuple
    values /= values.sum(dim=-1, keepdim=True)
    return values * indices + y[:, :2]


FUNCTIONS = [mutate_input, mutate_intermediate, inplace_kwarg, view_sees_mutation,
             mutate_through_view, copy_and_fill, operators_iadd, update_one_result_of_topk]


def _inputs(fn):
    torch.manual_seed(1)
    n = fn.__code__.co_argcount
    return [torch.randn(4, 5, dtype=F64) for _ in range(n)]


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_values_and_input_mutations_match_eager(fn):
    inputs = _inputs(fn)
    ours = [x.clone() for x in inputs]
    theirs = [x.clone() for x in inputs]
    out = aot_function(fn)(*ours)
    torch.testing.assert_close(out, fn(*theirs), **TOL)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, **TOL, msg=f"{fn.__name__}: input after the call")


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_functional_graph_has_no_mutation(fn):
    gm, _ = trace_with_inputs(fn, _inputs(fn))
    result = functionalize(gm.graph)
    for node in result.graph.nodes:
        if node.op in ("call_function", "call_method"):
            assert not is_impure(node), f"{node.format_node()} is still a mutation"
    mutated = {i for i, x in enumerate(_inputs(fn))}
    expect = {"mutate_input": {0}, "copy_and_fill": {0}}.get(fn.__name__, set())
    assert set(result.mutated_inputs) == expect and expect <= mutated


@pytest.mark.parametrize("fn", [mutate_intermediate, inplace_kwarg, mutate_through_view,
                                copy_and_fill, operators_iadd, update_one_result_of_topk],
                         ids=lambda f: f.__name__)
def test_gradients_through_mutated_intermediates(fn):
    inputs = [x.requires_grad_() for x in _inputs(fn)]
    if fn is copy_and_fill:  # x.zero_() on a leaf that requires grad is an eager error
        inputs[0].requires_grad_(False)
    ours = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
    theirs = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
    out = aot_function(fn)(*ours)
    expected = fn(*theirs)
    g = torch.randn_like(expected)
    wanted = [i for i, x in enumerate(inputs) if x.requires_grad]
    got = torch.autograd.grad(out, [ours[i] for i in wanted], g)
    want = torch.autograd.grad(expected, [theirs[i] for i in wanted], g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **TOL)


def test_mutated_input_is_an_extra_output_copied_back_after():
    gm, _ = trace_with_inputs(mutate_input, _inputs(mutate_input))
    result = functionalize(gm.graph)
    assert result.mutated_inputs == [0] and result.num_user_outputs == 1
    outputs = result.graph.output_node.args[0]
    assert len(outputs) == 2  # the user's output, then x's new value
    x, y = _inputs(mutate_input)
    compiled = aot_function(mutate_input)
    x0 = x.clone()
    compiled(x, y)
    torch.testing.assert_close(x, (x0 + y) * 2, **TOL)


def test_mutation_through_a_view_without_inverse_is_refused_clearly():
    def fn(x):
        h = x.clone()
        h.unfold(0, 2, 1).add_(1)  # unfold: windows overlap, no inverse for the pass
        return h
    with pytest.raises(FunctionalizationError, match="no inverse"):
        aot_function(fn)(torch.randn(4, 5))


def test_mutation_through_a_diagonal_is_written_back():
    def fn(x):
        h = x * 2
        h.diagonal().add_(1)            # ``sim.fill_diagonal_(0)``'s view: scattered back
        h.diagonal(1, 0, 1).mul_(3)
        return h
    x = torch.randn(4, 5, dtype=F64, requires_grad=True)
    got, want = aot_function(fn)(x), fn(x)
    torch.testing.assert_close(got, want, **TOL)
    torch.testing.assert_close(torch.autograd.grad(got.sum(), x),
                               torch.autograd.grad(want.sum(), x), **TOL)


def test_unknown_view_is_regenerated_after_its_base_changes():
    def fn(x):
        h = x * 1
        d = h.diagonal()
        h.add_(1)
        return d * 2
    x = torch.randn(4, 4, dtype=F64)
    torch.testing.assert_close(aot_function(fn)(x), fn(x), **TOL)


def test_out_argument_is_refused():
    def fn(x):
        out = torch.empty(4)
        torch.add(x, 1, out=out)
        return out
    with pytest.raises(FunctionalizationError, match="out="):
        aot_function(fn)(torch.randn(4))


def test_batchnorm_running_stats_are_written_back():
    bn = torch.nn.BatchNorm1d(5).double()
    ref = torch.nn.BatchNorm1d(5).double()
    from tutorcompile.aot import aot_module
    compiled = aot_module(bn)
    for _ in range(3):
        x = torch.randn(8, 5, dtype=F64)
        torch.testing.assert_close(compiled(x), ref(x), **TOL)
    torch.testing.assert_close(bn.running_mean, ref.running_mean, **TOL)
    torch.testing.assert_close(bn.running_var, ref.running_var, **TOL)
    assert int(bn.num_batches_tracked) == 3


def test_input_mutated_after_being_read_for_the_backward():
    """The backward needs x's value from *before* the mutation the epilogue writes back."""
    def fn(x, w):
        y = (x * w).sum(0)
        x.mul_(2)
        return y
    x = torch.randn(3, 4, dtype=F64)
    w = torch.randn(3, 4, dtype=F64, requires_grad=True)
    x_eager, w_eager = x.clone(), w.detach().clone().requires_grad_()
    out = aot_function(fn)(x, w)
    expected = fn(x_eager, w_eager)
    torch.testing.assert_close(out, expected, **TOL)
    torch.testing.assert_close(x, x_eager, **TOL)
    # (eager itself refuses this backward: x was modified in place after mul saved it;
    # the gradient is the value x had when it was read)
    torch.testing.assert_close(torch.autograd.grad(out.sum(), w)[0], x_eager / 2, **TOL)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_captured_update_of_one_result_of_a_multi_output_op(backend):
    # Dynamo's graph carries example values: topk's node holds a tuple, not a tensor to view
    import tutorcompile as tc

    x, y = _inputs(update_one_result_of_topk)
    compiled = tc.compile(update_one_result_of_topk, backend=backend, fullgraph=True)
    torch.testing.assert_close(compiled(x, y), update_one_result_of_topk(x, y), **TOL)


# ``y[index] = v`` with the index patterns whose steps share a dimension number (each int
# removes its dim, so the next index names the same number): Longformer writes
# ``scores[:, 0, 0, :] = ...``. A scalar once went to y[:, 0, :, :] (silently wrong);
# a tensor of the right shape failed to expand.
SETITEM_INDEXES = [(slice(None), 0, 0, slice(None)), (1, 2), (0, slice(1, 3)),
                   (slice(None), -1, slice(None, None, 2), 3), (Ellipsis, 0, 1),
                   (0, None, slice(1, None)), (1, Ellipsis, 2)]


@pytest.mark.parametrize("index", SETITEM_INDEXES, ids=str)
@pytest.mark.parametrize("tensor_value", [False, True], ids=["scalar", "tensor"])
def test_setitem_with_consecutive_int_indices(index, tensor_value):
    x = torch.randn(2, 3, 4, 5, dtype=F64, requires_grad=True)
    v = torch.randn_like(x[index]).requires_grad_() if tensor_value else 7.0

    def fn(x, v):
        y = x * 2
        y[index] = v * 3
        return y.sin()
    ours = [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) else a
            for a in (x, v)]
    out, want = aot_function(fn)(*ours), fn(x, v)
    torch.testing.assert_close(out, want, **TOL)
    leaves = [a for a in (x, v) if isinstance(a, torch.Tensor)]
    our_leaves = [a for a in ours if isinstance(a, torch.Tensor)]
    for g, w in zip(torch.autograd.grad(out.sum(), our_leaves),
                    torch.autograd.grad(want.sum(), leaves)):
        torch.testing.assert_close(g, w, **TOL)


def _update_through_tensor_indices(x):
    k = torch.zeros(9, 9)
    idx = torch.arange(9)         # an index made in the graph (kornia's median blur kernel)
    k[idx, idx] += 1.0
    k[idx[:3]] *= x.sum()
    return x @ k


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_an_update_through_an_index_tensor_made_in_the_graph(backend):
    """``k[idx, idx] += 1``: writing back through the indexing view named the old graph's
    ``idx`` in the new one ("belongs to another graph"). The view's arguments are now the
    new graph's values."""
    import tutorcompile as tc
    x = torch.randn(2, 9, requires_grad=True)
    try:
        out = tc.compile(_update_through_tensor_indices, backend=backend, fullgraph=True)(x)
    finally:
        tc.reset()
    want = _update_through_tensor_indices(x)
    torch.testing.assert_close(out, want, **TOL)
    torch.testing.assert_close(torch.autograd.grad(out.sum(), x)[0],
                               torch.autograd.grad(want.sum(), x)[0], **TOL)
