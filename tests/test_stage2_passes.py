"""Stage 2: graph passes on traced graphs -- pattern rewriting, conv+BN folding, FLOP and
byte counting, and the existing ShapeProp/DCE/CSE working on what the tracer produces.

Values are compared with eager PyTorch (rtol=1e-5, atol=1e-6 unless stated; conv-BN folding
changes rounding, so it uses rtol=1e-4, atol=1e-5). FLOPs are compared with hand arithmetic and
with ``torch.utils.flop_counter.FlopCounterMode`` for matmul, linear and conv.
"""

from __future__ import annotations

import operator

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from tutorcompile.fx import ShapeProp, cse, dce, symbolic_trace
from tutorcompile.fx.graph_module import GraphModule
from tutorcompile.fx.passes import (
    count_flops,
    fuse_conv_bn,
    match_pattern,
    replace_pattern,
)

pytestmark = pytest.mark.stage2

TOL = dict(rtol=1e-5, atol=1e-6)


def targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


# ---------------------------------------------------------------------------------------
# replace_pattern
# ---------------------------------------------------------------------------------------

def relu_pattern(x):
    return torch.relu(x)


def gelu_replacement(x):
    return F.gelu(x)


def swish_pattern(x):
    return x * torch.sigmoid(x)


def silu_replacement(x):
    return F.silu(x)


def test_relu_to_gelu_every_match():
    def f(x, y):
        return torch.relu(x) + torch.relu(y) * torch.relu(torch.relu(x + y))
    gm = symbolic_trace(f)
    assert len(match_pattern(gm, relu_pattern)) == 4
    new = replace_pattern(gm, relu_pattern, gelu_replacement)
    assert new.replacements == 4
    assert torch.relu not in targets(new) and targets(new).count(F.gelu) == 4
    assert new.graph.provenance == ["symbolic_trace", "replace_pattern"]
    assert new.code.startswith("# Constructed by replace_pattern")
    new.graph.lint(new)
    x, y = torch.randn(5), torch.randn(5)
    expected = F.gelu(x) + F.gelu(y) * F.gelu(F.gelu(x + y))
    torch.testing.assert_close(new(x, y), expected, **TOL)
    # the input graph is untouched
    assert targets(gm).count(torch.relu) == 4


def test_swish_to_silu_and_escaping_values_do_not_match():
    def f(x, y):
        a = x * torch.sigmoid(x)          # matches
        s = torch.sigmoid(y)
        b = y * s + s                     # sigmoid(y) is used again: must not match
        c = y * torch.sigmoid(x)          # different inputs: must not match
        return a + b + c
    gm = symbolic_trace(f)
    matches = match_pattern(gm, swish_pattern)
    assert len(matches) == 1
    assert [n.name for n in matches[0].nodes] == ["sigmoid", "mul"]
    new = replace_pattern(gm, swish_pattern, silu_replacement)
    assert targets(new).count(F.silu) == 1
    assert targets(new).count(torch.sigmoid) == 2
    x, y = torch.randn(7), torch.randn(7)
    torch.testing.assert_close(new(x, y), f(x, y), **TOL)
    silu = next(n for n in new.graph.nodes if n.target is F.silu)
    assert silu.meta["source"].endswith("a = x * torch.sigmoid(x)          # matches")


def test_overlapping_matches_are_taken_once():
    def double_relu(x):
        return torch.relu(torch.relu(x))

    def single_relu(x):
        return torch.relu(x)

    def f(x):
        return torch.relu(torch.relu(torch.relu(x)))
    gm = symbolic_trace(f)
    matches = match_pattern(gm, double_relu)
    assert len(matches) == 1  # relu_1(relu(x)); relu_2(relu_1) would reuse relu_1
    new = replace_pattern(gm, double_relu, single_relu)
    assert targets(new).count(torch.relu) == 2
    x = torch.randn(6)
    torch.testing.assert_close(new(x), f(x))


def test_chained_matches_read_each_others_replacement():
    gm = symbolic_trace(lambda x: torch.relu(torch.relu(x)) * 2)
    new = replace_pattern(gm, relu_pattern, gelu_replacement)
    assert new.replacements == 2
    x = torch.randn(6)
    torch.testing.assert_close(new(x), F.gelu(F.gelu(x)) * 2)


def test_pattern_constants_must_be_equal_and_inputs_bind_consistently():
    def pattern(x):
        return x * 0.5

    def replacement(x):
        return x / 2

    def f(x, y):
        return x * 0.5 + y * 0.25 + (x + y) * 0.5
    gm = symbolic_trace(f)
    new = replace_pattern(gm, pattern, replacement)
    assert new.replacements == 2
    assert targets(new).count(operator.truediv) == 2
    x, y = torch.randn(4), torch.randn(4)
    torch.testing.assert_close(new(x, y), f(x, y))


def test_pattern_on_a_traced_module_with_call_modules():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = model

        def forward(self, x):
            h = self.net(x)
            return h * torch.sigmoid(h)
    m = M()
    new = replace_pattern(symbolic_trace(m), swish_pattern, silu_replacement)
    assert new.replacements == 1
    x = torch.randn(3, 4)
    torch.testing.assert_close(new(x), F.silu(model(x)), **TOL)


def test_pattern_must_return_one_value():
    gm = symbolic_trace(lambda x: x + 1)
    with pytest.raises(ValueError, match="exactly one"):
        match_pattern(gm, lambda x: x)
    with pytest.raises(ValueError, match="inputs"):
        replace_pattern(gm, lambda x: x + 1, lambda x, y: x + y)


# ---------------------------------------------------------------------------------------
# fuse_conv_bn
# ---------------------------------------------------------------------------------------

def _randomise_bn(model):
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2.0)
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return model


@pytest.mark.parametrize("dim,bias", [(1, True), (2, False), (2, True), (3, True)])
def test_fuse_conv_bn_matches_eager(dim, bias):
    conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dim]
    bn = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}[dim]
    model = nn.Sequential(conv(3, 6, 3, padding=1, bias=bias), bn(6), nn.ReLU(),
                          conv(6, 4, 3, groups=2), bn(4))
    model = _randomise_bn(model).eval()
    gm = symbolic_trace(model)
    fused = fuse_conv_bn(gm)
    assert fused.fused == 2
    kinds = [type(m).__name__ for n in fused.graph.nodes if n.op == "call_module"
             for m in [fused.get_submodule(n.target)]]
    assert kinds == [conv.__name__, "ReLU", conv.__name__]
    assert fused.graph.provenance[-1] == "fuse_conv_bn"
    x = torch.randn(2, 3, *([6] * dim))
    with torch.no_grad():
        torch.testing.assert_close(fused(x), model(x), rtol=1e-4, atol=1e-5)
    # the original model and graph are untouched
    assert isinstance(model[1], bn) and len(list(gm.graph.nodes)) == 7


def test_fuse_conv_bn_refuses_training_and_skips_shared_outputs():
    model = _randomise_bn(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)))
    with pytest.raises(RuntimeError, match="eval"):
        fuse_conv_bn(symbolic_trace(model))

    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)

        def forward(self, x):
            y = self.conv(x)
            return self.bn(y) + y  # y is needed unnormalised too: no fold
    m = _randomise_bn(Shared()).eval()
    fused = fuse_conv_bn(symbolic_trace(m))
    assert fused.fused == 0
    x = torch.randn(1, 3, 5, 5)
    torch.testing.assert_close(fused(x), m(x))


# ---------------------------------------------------------------------------------------
# count_flops
# ---------------------------------------------------------------------------------------

def _torch_flops(model, *inputs):
    with FlopCounterMode(display=False) as counter:
        model(*inputs)
    return counter.get_total_flops()


def test_flops_of_linear_conv_matmul_by_hand_and_by_torch():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.fc = nn.Linear(8 * 4 * 4, 10)

        def forward(self, x, w):
            h = torch.relu(self.conv(x))
            h = self.fc(h.flatten(1))
            return (h @ w).sum()
    net = Net()
    x, w = torch.randn(2, 3, 4, 4), torch.randn(10, 6)
    report = count_flops(symbolic_trace(net), x, w)
    costs = report.by_node
    # conv: 2 * (2*8*4*4 outputs) * (3 input channels * 3*3 kernel)
    assert costs["conv"].flops == 2 * (2 * 8 * 4 * 4) * (3 * 9) == 13824
    assert costs["conv"].kind == "conv"
    # linear: 2 * batch * out * in
    assert costs["fc"].flops == 2 * 2 * 10 * 128
    # matmul: 2 * M * N * K
    assert costs["matmul"].flops == 2 * 2 * 6 * 10
    assert costs["relu"].flops == 2 * 8 * 4 * 4 and costs["relu"].kind == "pointwise"
    assert costs["sum_"].flops == 12 and costs["sum_"].kind == "reduction"
    assert costs["flatten"].flops == 0 and costs["flatten"].bytes_read == 0
    by_kind = report.flops_by_kind()
    torch_total = _torch_flops(net, x, w)
    assert by_kind["conv"] + by_kind["linear"] + by_kind["matmul"] == torch_total
    # bytes: relu reads and writes one float32 tensor of 256 elements
    assert costs["relu"].bytes_read == costs["relu"].bytes_written == 256 * 4
    # fc reads its input, weight and bias
    assert costs["fc"].bytes_read == (2 * 128 + 10 * 128 + 10) * 4
    assert report.total_flops == sum(c.flops for c in report.nodes)
    assert "total" in str(report) and "conv" in str(report)


@settings(max_examples=15, deadline=None)
@given(b=st.integers(1, 3), m=st.integers(1, 6), k=st.integers(1, 6), n=st.integers(1, 6),
       groups=st.sampled_from([1, 2]), ks=st.integers(1, 3))
def test_flops_agree_with_flop_counter_mode(b, m, k, n, groups, ks):
    def f(x, y, img, weight):
        return (torch.bmm(x, y).sum(), F.linear(x, y.transpose(1, 2)[0]).sum(),
                F.conv2d(img, weight, groups=groups).sum())
    x, y = torch.randn(b, m, k), torch.randn(b, k, n)
    img, weight = torch.randn(b, 2 * groups, 5, 5), torch.randn(2 * groups, 2, ks, ks)
    report = count_flops(symbolic_trace(f), x, y, img, weight)
    ours = sum(c.flops for c in report.nodes if c.kind in ("matmul", "linear", "conv"))
    assert ours == _torch_flops(f, x, y, img, weight)
    assert report.by_node["bmm"].flops == 2 * b * m * n * k


def test_flops_of_the_seed_model():
    model = nn.Sequential(nn.Linear(10, 5), nn.ReLU(), nn.Linear(5, 2), nn.Softmax(dim=-1))
    x = torch.randn(4, 10)
    report = count_flops(symbolic_trace(model), x)
    assert [c.kind for c in report.nodes[1:]] == ["linear", "pointwise", "linear", "softmax"]
    assert report.by_node["_0"].flops == 2 * 4 * 5 * 10
    assert report.by_node["_2"].flops == 2 * 4 * 2 * 5
    assert report.flops_by_kind()["linear"] == _torch_flops(model, x)


# ---------------------------------------------------------------------------------------
# The existing passes on traced graphs
# ---------------------------------------------------------------------------------------

def test_shape_prop_dce_cse_on_a_traced_graph():
    def f(x):
        a = torch.sin(x) + torch.sin(x)   # cse merges the two sins
        unused = torch.cos(x)             # noqa: F841  dce drops it
        return a.view(2, -1)
    gm = symbolic_trace(f)
    assert targets(gm).count(torch.sin) == 2 and torch.cos in targets(gm)
    cleaned = GraphModule(gm, dce(cse(gm.graph)))
    assert targets(cleaned).count(torch.sin) == 1 and torch.cos not in targets(cleaned)
    assert cleaned.graph.provenance == ["symbolic_trace", "cse", "dce"]
    x = torch.randn(6)
    torch.testing.assert_close(cleaned(x), f(x))
    ShapeProp(cleaned).propagate(x)
    view = next(n for n in cleaned.graph.nodes if n.target == "view")
    assert tuple(view.meta["tensor_meta"].shape) == (2, 3)


def test_dce_keeps_concrete_arg_checks():
    def f(x, flag=None):
        return x + 1
    gm = symbolic_trace(f, concrete_args={"flag": None})
    kept = GraphModule(gm, dce(gm.graph))
    assert any(n.name == "check_flag" for n in kept.graph.nodes)
    with pytest.raises(ValueError):
        kept(torch.randn(2), 3)


def test_dce_keeps_a_batch_norm_that_updates_running_statistics():
    """``F.batch_norm(..., training=True)`` writes its running statistics although its
    result is a new tensor: unused, it stays; in eval mode (or without statistics) it goes."""
    def fn(x, mean, var):
        F.batch_norm(x, mean, var, training=True)           # kept: writes mean and var
        F.batch_norm(x, mean, var, None, None, False)       # dropped: reads only
        F.batch_norm(x, None, None, training=True)          # dropped: no statistics
        F.instance_norm(x.unsqueeze(-1), mean, var)         # kept: use_input_stats=True
        return x + 1
    gm = symbolic_trace(fn)
    kept = [n.target for n in dce(gm.graph).nodes if n.op == "call_function"]
    assert kept.count(F.batch_norm) == 1 and kept.count(F.instance_norm) == 1, kept
