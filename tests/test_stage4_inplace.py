"""Stage 4: in-place activations train like eager.

torchvision and timm build their activations with ``inplace=True``; Dynamo writes
``nn.Hardswish(inplace=True)`` as ``F.hardswish(x, True)`` (the flag positional). The
functionalization pass must turn every such call -- and ``Tensor.relu_`` / ``torch.relu_``
style calls -- into its out-of-place form before autograd sees the graph, or an extern's
backward replays the in-place op on a leaf ("a leaf Variable that requires grad is being used
in an in-place operation"). Every ``torch.nn`` module that takes ``inplace`` is tried, in
training, under aot_eager and inductor, against eager's output and gradients.
"""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tutorcompile as tc
from tutorcompile.aot import functionalize
from tutorcompile.aot.tracing import trace_with_inputs
from tutorcompile.environment import probe

pytestmark = pytest.mark.stage4

RANDOM = (nn.RReLU, nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout,
          nn.FeatureAlphaDropout)
"""Modules that draw random numbers in training: compared in eval mode here."""


def _inplace_modules() -> list[type[nn.Module]]:
    found = []
    for name in dir(nn):
        cls = getattr(nn, name)
        if isinstance(cls, type) and issubclass(cls, nn.Module) \
                and "inplace" in inspect.signature(cls.__init__).parameters:
            found.append(cls)
    return found


INPLACE_MODULES = _inplace_modules()
BACKENDS = ["aot_eager", pytest.param("inductor", marks=pytest.mark.skipif(
    not probe().has_cxx, reason="no C++ compiler"))]


def _make(cls: type[nn.Module]) -> nn.Module:
    return cls(0.1, 2.0, inplace=True) if cls is nn.Threshold else cls(inplace=True)


def _check(model: nn.Module, x: torch.Tensor, backend: str) -> None:
    expected = model(x)
    expected.square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    try:
        out = tc.compile(model, backend=backend, fullgraph=True)(x)
        out.square().sum().backward()
    finally:
        tc.reset()
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    for p, g in zip(model.parameters(), grads):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-5)


def test_every_inplace_activation_is_covered():
    names = {c.__name__ for c in INPLACE_MODULES}
    assert {"Hardswish", "Hardsigmoid", "ReLU6", "ELU", "SELU", "CELU", "Hardtanh", "ReLU",
            "LeakyReLU", "SiLU", "Mish", "Threshold", "RReLU"} <= names, names


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", INPLACE_MODULES, ids=lambda c: c.__name__)
def test_inplace_module_trains_like_eager(cls, backend):
    torch.manual_seed(0)
    dims = {nn.Dropout1d: 1, nn.Dropout3d: 3}.get(cls, 2)   # what each layer accepts
    conv = getattr(nn, f"Conv{dims}d")
    model = nn.Sequential(conv(3, 4, 3), _make(cls), conv(4, 2, 1), _make(cls))
    if issubclass(cls, RANDOM):
        model.eval()
    _check(model, torch.randn(2, 3, *[5] * dims), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mobilenet_block_repro(backend):
    """The smallest repro of mobilenet_v3's failure: two in-place activations in a row."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Hardswish(inplace=True),
                          nn.Hardsigmoid(inplace=True))
    _check(model, torch.randn(2, 3, 6, 6), backend)


class InPlaceCalls(nn.Module):
    """In-place spellings in user code: methods, torch.* and F.*_ functions, the flag."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        h = self.conv(x)
        h.add_(1.0)
        h.mul_(0.5)
        h.relu_()
        h = torch.sigmoid_(h * 2)
        h = F.elu_(h - 0.5)
        h = F.hardtanh(h * 1.5, -0.3, 0.4, True)   # (in place on elu_'s output: eager fails)
        return F.leaky_relu_(h * 3, 0.2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_calls_train_like_eager(backend):
    torch.manual_seed(0)
    _check(InPlaceCalls(), torch.randn(2, 3, 5, 5), backend)


def test_the_functional_graph_has_no_inplace_call():
    x = torch.randn(2, 3, 5, 5)
    conv = nn.Conv2d(3, 4, 3)

    def fn(t):
        h = F.hardswish(conv(t), True)
        h = F.elu(h * 2, 1.0, True)
        return torch.relu_(h * 3)
    traced, _ = trace_with_inputs(fn, [x])
    assert any(n.kwargs.get("inplace") for n in traced.graph.nodes)
    calls = [n for n in functionalize(traced.graph).graph.nodes if n.op == "call_function"]
    assert {F.hardswish, F.elu} <= {n.target for n in calls}
    assert not any(any(a is True for a in n.args) or n.kwargs.get("inplace")
                   or torch.relu_ is n.target
                   for n in calls), [n.format_node() for n in calls]


@torch.no_grad()
def _foreach_step(params, grads, states):
    # a foreach optimizer's step inside a traced no_grad block: every list is written in
    # place, the parameters through the ``detach`` the block puts in front of them
    torch._foreach_lerp_(states, grads, weight=0.1)
    denoms = torch._foreach_sqrt(torch._foreach_abs(states))
    torch._foreach_add_(denoms, 1e-3)
    torch._foreach_addcdiv_(params, states, denoms, value=-0.01)
    torch._foreach_add_(params, grads, alpha=-0.001)
    torch._foreach_zero_(grads)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_in_place_foreach_ops_write_every_list_back(backend):
    def make():
        torch.manual_seed(0)
        return ([torch.randn(3, requires_grad=True), torch.randn(2, 2, requires_grad=True)],
                [torch.randn(3), torch.randn(2, 2)], [torch.zeros(3), torch.zeros(2, 2)])

    expected, got = make(), make()
    _foreach_step(*expected)
    tc.reset()
    tc.compile(_foreach_step, backend=backend, fullgraph=True)(*got)
    for want, have in zip(expected, got):
        for a, b in zip(want, have):
            torch.testing.assert_close(b, a)


def _init_in_place(x, buf):
    y = x * 2
    torch.nn.init.constant_(y, 1.5)   # a Python function of torch that writes its argument
    torch.nn.init.zeros_(buf)          # ... an input's
    return y + x + buf


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_function_that_writes_its_first_argument_is_called_on_a_copy(backend):
    x, mine, theirs = torch.randn(3), torch.ones(3), torch.ones(3)
    expected = _init_in_place(x, theirs)
    tc.reset()
    torch.testing.assert_close(tc.compile(_init_in_place, backend=backend)(x, mine), expected)
    torch.testing.assert_close(mine, theirs)


# --- a write autograd records, into an input: the input gets a grad_fn, as in eager -------
def _write_into_plain_tensor(out, h):
    out[0] = h[1] * 2             # out has no grad; the value written does
    out.add_(h.sum())
    return out.sum()


def _masked_write_after_a_break(x, w):
    h = x * w
    out = torch.zeros_like(h)
    out[h > 0] = h[h > 0]         # boolean-mask indexing breaks the graph before the write
    return out


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_recorded_write_into_an_input_carries_its_gradient(backend):
    for fn, make in ((_write_into_plain_tensor, lambda: [torch.zeros(3),
                                                         torch.randn(3, requires_grad=True)]),
                     (_masked_write_after_a_break, lambda: [torch.randn(6),
                                                            torch.randn(6, requires_grad=True)])):
        torch.manual_seed(0)
        want_args = make()
        got_args = [t.detach().clone().requires_grad_(t.requires_grad) for t in want_args]
        want = fn(*want_args)
        got = tc.compile(fn, backend=backend)(*got_args)
        torch.testing.assert_close(got, want)
        want.sum().backward()
        got.sum().backward()
        torch.testing.assert_close(got_args[1].grad, want_args[1].grad)
        assert got_args[0].requires_grad == want_args[0].requires_grad


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_side_effect_write_stays_out_of_autograd(backend):
    # batch norm's running statistics depend on x, but autograd never records their update;
    # a parameter written under no_grad stays a leaf
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))

    def step(x):
        y = model(x)
        with torch.no_grad():
            model[0].bias.add_(1.0)
        return y.square().mean()

    step_compiled = tc.compile(step, backend=backend)
    step_compiled(torch.randn(8, 4)).backward()
    bn = model[1]
    assert bn.running_mean.grad_fn is None and bn.running_var.grad_fn is None
    assert model[0].bias.is_leaf and model[0].bias.grad is not None


# --- writing into what a compiled graph returned ------------------------------------------
# A view of one of the graph's intermediates comes out of the ``autograd.Function`` as an
# ordinary result (``_views_to_detach``): the caller may write into it, as in eager (nflows
# scales slices of one projection with ``/=``). Views of inputs, and outputs that overlap one
# another, stay views.
def _slices_of_one_projection(x, w):
    p = x @ w
    return p[..., :2], p[..., 2:4], p[..., 4:]


def _written_by_augmented_assignment(a, b, c):
    a /= 2.0
    b *= c.sum()
    return a, b, c


def _a_transposed_reshaped_view(x, w):
    return (x @ w).t(), (x * 2).reshape(-1)


def _written_by_setitem_and_methods(t, flat):
    t[0] = 0.0
    flat.clamp_(min=-1.0)
    t.add_(1.0)
    return t, flat


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("produce, consume, make", [
    (_slices_of_one_projection, _written_by_augmented_assignment,
     lambda: [torch.randn(3, 4, requires_grad=True), torch.randn(4, 7, requires_grad=True)]),
    (_a_transposed_reshaped_view, _written_by_setitem_and_methods,
     lambda: [torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)]),
])
def test_views_a_graph_returns_can_be_written_by_the_caller(produce, consume, make, backend):
    torch.manual_seed(0)
    want_args = make()
    got_args = [t.detach().clone().requires_grad_() for t in want_args]
    want = consume(*produce(*want_args))
    tc.reset()
    got = consume(*tc.compile(produce, backend=backend)(*got_args))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
    sum((o * torch.linspace(0, 1, o.numel()).view(o.shape)).sum() for o in want).backward()
    sum((o * torch.linspace(0, 1, o.numel()).view(o.shape)).sum() for o in got).backward()
    for g, w in zip(got_args, want_args, strict=True):
        torch.testing.assert_close(g.grad, w.grad)


def _scale_slices_after_a_break(x, w):
    p = x @ w
    a, b = p[:, :2], p[:, 2:]
    if (a > 0).any():             # a tensor's truth value: the graph ends here
        a /= 2.0
    b -= a.mean()
    return a, b


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_write_after_a_break_into_slices_the_graph_returned(backend):
    torch.manual_seed(0)
    want_args = [torch.randn(3, 4, requires_grad=True), torch.randn(4, 6, requires_grad=True)]
    got_args = [t.detach().clone().requires_grad_() for t in want_args]
    want = _scale_slices_after_a_break(*want_args)
    tc.reset()
    got = tc.compile(_scale_slices_after_a_break, backend=backend)(*got_args)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
    sum(o.square().sum() for o in want).backward()
    sum(o.square().sum() for o in got).backward()
    for g, w in zip(got_args, want_args, strict=True):
        torch.testing.assert_close(g.grad, w.grad)


def _a_result_and_views_of_it(x):
    p = x * 2
    return p, p[:, :2], p.t()


def _written_through_the_views(p, v, t):
    v.mul_(3.0)                   # shows in p and in t, and in their gradients
    t[0] += 1.0
    return p, v, t


def _overlapping_views(x):
    p = x * 2
    return p[:, :3], p[:, 1:]


def _a_view_of_an_input(x, w):
    return x[:, 1:], x * w


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_views_of_a_result_it_also_returns_are_remade_from_it(backend):
    want_x = torch.randn(3, 4, requires_grad=True)
    got_x = want_x.detach().clone().requires_grad_()
    want = _written_through_the_views(*_a_result_and_views_of_it(want_x))
    tc.reset()
    got = _written_through_the_views(
        *tc.compile(_a_result_and_views_of_it, backend=backend)(got_x))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
    assert got[1]._base is got[0] and got[2]._base is got[0]
    sum((o * torch.linspace(0, 1, o.numel()).view(o.shape)).sum() for o in want).backward()
    sum((o * torch.linspace(0, 1, o.numel()).view(o.shape)).sum() for o in got).backward()
    torch.testing.assert_close(got_x.grad, want_x.grad)


def _reshaped_argument_then_slices(params, x):
    params = params.reshape(params.shape[0], 2, -1)     # a view of the argument
    widths, heights = params[..., :3], params[..., 3:]
    if (x > 0).any():             # a tensor's truth value: the graph ends here
        widths /= 2.0             # writes the argument, through two views
        heights += x.sum()
    return (widths.softmax(-1) * x[:, :1, None]).sum() + heights.square().mean(), params


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_view_of_an_argument_written_after_a_break_writes_the_argument(backend):
    torch.manual_seed(0)
    w = torch.randn(6, 12, requires_grad=True)
    x = torch.randn(4, 6)
    want_w, got_w = w.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    want = _reshaped_argument_then_slices(x @ want_w, x)
    tc.reset()
    got = tc.compile(_reshaped_argument_then_slices, backend=backend)(x @ got_w, x)
    for g, e in zip(got, want, strict=True):
        torch.testing.assert_close(g, e)
    (want[0] + want[1].sum()).backward()
    (got[0] + got[1].sum()).backward()
    torch.testing.assert_close(got_w.grad, want_w.grad)


def test_overlapping_views_whose_base_is_not_returned_stay_views():
    # writing one must show in the other: autograd's rule for views a Function returns
    # applies, and the write is refused rather than computed wrongly
    tc.reset()
    a, _ = tc.compile(_overlapping_views, backend="aot_eager")(
        torch.randn(3, 4, requires_grad=True))
    assert a._is_view()
    with pytest.raises(RuntimeError, match="view"):
        a.mul_(2)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_view_of_an_input_is_a_view_of_it_the_caller_may_write(backend):
    torch.manual_seed(0)
    want_x = torch.randn(3, 4, requires_grad=True)
    got_x = want_x.detach().clone().requires_grad_()
    w = torch.randn(3, 4)
    tc.reset()
    compiled = tc.compile(_a_view_of_an_input, backend=backend)
    outs = []
    for fn, x in ((_a_view_of_an_input, want_x), (compiled, got_x)):
        base = x * 1.0                    # a non-leaf: writable through a view
        view, y = fn(base, w)
        assert view._base is base
        view.mul_(y[:, :3])
        outs.append((base, y))
        (base.sum() + y.square().sum()).backward()
    torch.testing.assert_close(outs[1][0], outs[0][0])
    torch.testing.assert_close(got_x.grad, want_x.grad)


def test_views_remade_from_their_base_follow_symbolic_sizes():
    # one compilation for every batch size: the view is remade with this call's geometry
    tc.reset()
    compiled = tc.compile(_a_result_and_views_of_it, backend="aot_eager")
    for rows in (3, 5, 8):
        want_x = torch.randn(rows, 4, requires_grad=True)
        got_x = want_x.detach().clone()
        tc.mark_dynamic(got_x, 0)
        got_x.requires_grad_()
        want = _written_through_the_views(*_a_result_and_views_of_it(want_x))
        got = _written_through_the_views(*compiled(got_x))
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w)
        sum((o * o.detach()).sum() for o in want).backward()
        sum((o * o.detach()).sum() for o in got).backward()
        torch.testing.assert_close(got_x.grad, want_x.grad)


def _write_a_copy(x):
    v = x.max(0).values          # the copy below is v itself once clone is an identity
    w = v.clone()
    w[v > 0] = 0.0               # a graph break: the write runs in eager on the output
    return v + 1, w, x.clone()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("grad", [False, True])
def test_copies_returned_by_a_graph_are_new_tensors(backend, grad):
    """A clone is an identity in a functional graph, so a graph returned ``v`` and its copy
    ``w`` (or an input and its copy) as one tensor: writing ``w`` in place silently wrote
    ``v`` (inductor, inference), or in training the tensor the backward had saved. Found by
    the random-program fuzzer (seed 1021)."""
    if backend == "inductor" and not probe().has_cxx:
        pytest.skip("no C++ compiler")
    tc.reset()
    x = torch.randn(5)           # (v is 0-d: the masked write breaks the graph)
    x_eager, x_compiled = (x.clone().requires_grad_(grad) for _ in range(2))
    want = _write_a_copy(x_eager)
    got = tc.compile(_write_a_copy, backend=backend)(x_compiled)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    assert got[2] is not x_compiled
    if grad:
        sum(o.sum() for o in want).backward()
        sum(o.sum() for o in got).backward()
        torch.testing.assert_close(x_compiled.grad, x_eager.grad)


def _copies_and_contiguous(x, h):
    return x.t().clone(), x.reshape(-1).clone(), (h * 2).transpose(0, 1).contiguous(), \
        x.t().contiguous(), x.contiguous()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("grad", [False, True])
def test_a_copy_of_a_view_of_an_input_is_a_new_contiguous_tensor(backend, grad):
    """``clone`` and ``contiguous`` decompose to the value they copy, so the graph returned
    ``x.t().clone()`` as a view of ``x`` (a write into it wrote into the caller's ``x``) and
    ``h.transpose(0, 1).contiguous()`` as a transposed view (the caller's ``.view(-1)``
    raised). Such an output is now copied in the graph; ``x.contiguous()`` of a contiguous
    ``x`` is ``x`` itself, in eager too."""
    if backend == "inductor" and not probe().has_cxx:
        pytest.skip("no C++ compiler")
    tc.reset()
    x, h = torch.randn(4, 6, requires_grad=grad), torch.randn(4, 6)
    got = tc.compile(_copies_and_contiguous, backend=backend)(x, h)
    want = _copies_and_contiguous(x, h)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
        assert g.is_contiguous() or not w.is_contiguous()   # (a clone keeps a view's
        # strides in eager: x.t().clone() is transposed; ours is contiguous, as reshape wants)
        assert (g.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()) == \
            (w.untyped_storage().data_ptr() == x.untyped_storage().data_ptr())
    assert got[2].view(-1).shape == (24,)
    before = x.detach().clone()
    with torch.no_grad():
        got[0].add_(1)
        got[1].add_(1)
    assert torch.equal(x.detach(), before)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_view_of_an_input_in_another_dtype_keeps_its_dtype(backend):
    """A view of an input the Function returns is remade with ``as_strided`` on the input
    (fbe3375), which keeps the input's dtype: ``view_as_complex(x)`` came back float32
    (found by the OpInfo sweep). A view of another dtype stays the Function's output."""
    if backend == "inductor" and not probe().has_cxx:
        pytest.skip("no C++ compiler")
    tc.reset()
    x = torch.randn(3, 4, 2, requires_grad=True)
    got = tc.compile(torch.view_as_complex, backend=backend)(x)
    want = torch.view_as_complex(x)
    assert got.dtype == want.dtype == torch.complex64
    torch.testing.assert_close(got, want)
    (g,) = torch.autograd.grad(got.abs().sum(), x)
    torch.testing.assert_close(g, torch.autograd.grad(want.abs().sum(), x)[0])
