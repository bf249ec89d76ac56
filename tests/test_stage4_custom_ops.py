"""Operators that write their arguments, as their schemas say: ``torch.library.custom_op``
with ``mutates_args`` and ATen's in-place overloads (``torch.ops.aten.add_.Tensor``).

A custom op that mutates and returns nothing used to be taken for a metadata query (its
result, None, a constant): the call vanished from the graph and the mutation with it -- a
silent wrong answer under every backend. Capture now reads the schema; functionalization
runs the operator on copies of what it writes and writes the new values back (torch's
``auto_functionalized``), so aot_eager and inductor take it too.
"""

import pytest
import torch

import tutorcompile as tc

BACKENDS = ["eager", "aot_eager", "inductor"]


@torch.library.custom_op("tc_test::scale_", mutates_args=("x",))
def scale_(x: torch.Tensor, s: float) -> None:
    x.mul_(s)


@scale_.register_fake
def _(x, s):
    return None


@torch.library.custom_op("tc_test::accumulate", mutates_args=("total",))
def accumulate(a: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
    total.add_(a)
    return a * 2


@accumulate.register_fake
def _(a, total):
    return torch.empty_like(a)


@torch.library.custom_op("tc_test::cube", mutates_args=())
def cube(x: torch.Tensor) -> torch.Tensor:
    return x ** 3


@cube.register_fake
def _(x):
    return torch.empty_like(x)


cube.register_autograd(lambda ctx, g: g * 3 * ctx.saved_tensors[0] ** 2,
                       setup_context=lambda ctx, inputs, output: ctx.save_for_backward(
                           inputs[0]))


def mutate_input(x, y):
    scale_(y, 2.0)             # the caller's y is doubled; nothing is returned
    return y + x


def mutate_intermediate(x, y):
    z = x + 1
    scale_(z, 3.0)
    total = torch.zeros_like(y)
    doubled = accumulate(y, total=total)   # the written argument passed by keyword
    accumulate(x, total)                   # a result nobody reads: the write still happens
    return z * 2 + total + doubled


def aten_in_place(x, y):
    h = x * 1.5
    row = h[0]
    torch.ops.aten.add_.Tensor(row, y[0])   # through a view: h's first row changes
    torch.ops.aten.mul_(y, 3)               # a packet; the caller's y is tripled
    out = torch.ops.aten.relu_.default(h)   # returns the tensor it wrote
    return out + h.sum()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [mutate_input, mutate_intermediate, aten_in_place],
                         ids=lambda f: f.__name__)
def test_writes_happen_in_one_graph_as_in_eager(fn, backend):
    torch.manual_seed(0)
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    y_compiled = y.clone()
    want = fn(x, y)
    tc.reset()
    explanation = tc.explain(fn)(x, y.clone())
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0)
    got = tc.compile(fn, backend=backend, fullgraph=True)(x, y_compiled)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(y_compiled, y)     # the caller's tensor, written the same


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_custom_op_with_its_own_autograd_gives_eagers_gradients(backend):
    def f(x, y):
        buf = torch.zeros_like(x)
        scale_(buf, 0.0)
        return (cube(x) * y).sum() + accumulate(x.detach(), buf).sum() + buf.sum()

    x = torch.randn(5, requires_grad=True)
    y = torch.randn(5)
    want = torch.autograd.grad(f(x, y), x)[0]
    tc.reset()
    got = torch.autograd.grad(tc.compile(f, backend=backend, fullgraph=True)(x, y), x)[0]
    torch.testing.assert_close(got, want)


def test_the_schema_decides_not_the_name():
    from tutorcompile.fx.passes.dce_cse import written_arguments
    assert written_arguments(scale_) == [(0, "x")]
    assert written_arguments(accumulate) == [(1, "total")]
    assert written_arguments(cube) == []
    assert written_arguments(torch.ops.aten.add_.Tensor) == [(0, "self")]
    assert written_arguments(torch.ops.aten.add.Tensor) == []
    assert written_arguments(torch.add) is None        # no schema: the name convention
