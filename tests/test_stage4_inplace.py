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
