"""Stage 5 under stage 4: whole models trained through AOTAutograd with our kernels.

``aot_module`` decomposes each model into prim graphs (forward and backward) and hands them to
``inner_compiler()`` (``compile_fx`` on first call). Values and parameter gradients must match
eager PyTorch (float32: 1e-4; gradients through attention and batch norm 1e-3 relative).
These graphs hold what the unit tests do not: convolutions and max-pooling (externs),
multi-output calls (``unbind``), embeddings (``index_select``), batch norm, attention.
"""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.kernel_backends import BACKENDS, on
from tutorcompile.inductor import inner_compiler

aot = pytest.importorskip("tutorcompile.aot")
pytestmark = pytest.mark.stage5


class Block(nn.Module):
    """A pre-norm transformer block with hand-written attention."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, self.heads, d // self.heads) \
            .permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, -1)
        x = x + self.out((a @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.fc = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), \
            nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return F.log_softmax(self.fc(x.flatten(1)), -1)


class Embedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.fc = nn.Embedding(50, 16), nn.Linear(32, 4)

    def forward(self, i):
        h = self.emb(i)
        return self.fc(torch.cat([h[:, 0], h[:, 1:].mean(1)], -1)).tanh()


@pytest.mark.parametrize("name", ["block", "cnn", "embedding"])
def test_models_train_like_eager(name):
    model, x = {"block": (Block(), torch.randn(2, 5, 32)),
                "cnn": (CNN(), torch.randn(4, 3, 8, 8)),
                "embedding": (Embedding(), torch.randint(0, 50, (6, 7)))}[name]
    reference = copy.deepcopy(model)
    compiler = inner_compiler()
    compiled = aot.aot_module(model, fw_compiler=compiler, bw_compiler=compiler)
    out, expected = compiled(x), reference(x)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    out.square().sum().backward()
    expected.square().sum().backward()
    for (pname, p), (_, q) in zip(model.named_parameters(), reference.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4,
                                   msg=lambda m, pname=pname: f"{name}.{pname}: {m}")
    fwd = compiled.artifacts.forward.compiled
    assert fwd.num_kernels < fwd.fusion_report.kernels_before   # something fused


def test_each_convolution_backward_is_one_pytorch_call_for_both_gradients():
    """The input and the weight gradient of a convolution (two prims, so that either can be
    left out) are paired into one ``aten.convolution_backward`` call, as eager makes; the
    first convolution's input needs no gradient and keeps its weight-gradient prim alone."""
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, stride=2, groups=2), nn.ReLU(),
                          nn.Conv2d(8, 4, 1))
    reference = copy.deepcopy(model)
    x = torch.randn(2, 3, 9, 9)
    compiler = inner_compiler()
    compiled = aot.aot_module(model, fw_compiler=compiler, bw_compiler=compiler)
    compiled(x).square().sum().backward()
    reference(x).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)
    code = compiled.artifacts.backward.compiled.output_code
    # (on contiguous tensors or channels-last copies, as measured: config.conv_layout)
    calls = code.count("aten.convolution_backward") + \
        code.count("convolution_backward_channels_last_fn(")
    assert code.count("[True, True, False]") == 2, code     # the second and third conv
    assert calls == 3, code   # + the first's weight


def test_batch_norm_training_is_as_close_to_float64_as_eager():
    """A training batch norm compiled to C++ kernels: its output, input gradient and running
    statistics are as close to the float64 result as eager's float32 ones (within 2x). Its
    mean over N, H, W was added in float, value after value: the output carried 12x eager's
    error for inputs far from zero -- in resnet18 that flipped a ReLU whose input was near
    zero, and every gradient upstream of it failed allclose."""
    torch.manual_seed(0)
    x = 3 + 0.1 * torch.randn(4, 8, 32, 32)
    g = torch.randn(4, 8, 32, 32)

    def step(bn, run, dtype):
        xi = x.to(dtype).requires_grad_()
        out = run(xi)
        (grad,) = torch.autograd.grad(out, xi, g.to(dtype))
        return [out.detach(), grad, bn.running_mean, bn.running_var]

    bn64, bn32, ours = nn.BatchNorm2d(8).double(), nn.BatchNorm2d(8), nn.BatchNorm2d(8)
    compiler = inner_compiler()
    compiled = aot.aot_module(ours, fw_compiler=compiler, bw_compiler=compiler)
    exact = step(bn64, bn64, torch.float64)
    eager = step(bn32, bn32, torch.float32)
    ours = step(ours, compiled, torch.float32)
    for name, a, e, r in zip(["output", "input gradient", "running mean", "running var"],
                             ours, eager, exact):
        error = (a.double() - r).abs().mean().item()
        assert error <= 2 * (e.double() - r).abs().mean().item() + 1e-12, name


@pytest.mark.parametrize("codegen", BACKENDS)
def test_max_pooling_without_a_gradient_is_the_window_maximum(codegen):
    """With no gradient to route, max pooling is the maximum of each window, NaN where the
    window holds one (the padding is -inf: never picked over an input element), for
    padding, ceil_mode's extra windows, dilation and windows that tile. (It computed which
    element PyTorch's pooling picks, for the gradient: a score per element, twice the
    work.)"""
    import tutorcompile as tc
    torch.manual_seed(0)
    for kernel, stride, pad, dilation, ceil in [(3, 2, 1, 1, False), (3, 2, 0, 1, True),
                                                (2, 2, 0, 1, False), (3, 1, 1, 2, False),
                                                (5, 3, 2, 1, True)]:
        pool = nn.MaxPool2d(kernel, stride, pad, dilation, ceil_mode=ceil)
        x = torch.randn(2, 3, 9, 9)
        x[0, 0, 1, 1] = float("nan")
        x[0, 1, :3, :3] = float("-inf")
        x[1, 2] = 0.0
        pool, x = on(codegen, pool, x)   # (CUDA for Triton on a GPU machine)
        tc.reset()
        compiled = tc.compile(pool, backend="inductor", options={"codegen": codegen})
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), pool(x), equal_nan=True, rtol=0, atol=0)
