"""Stage 4: joint graphs, the two partitioners, and the runtime on real models.

* The joint graph computes eager's outputs and gradients, is labelled (primals, tangents,
  phases), and is built from the op table's VJP rules (every backward prim node is a prim).
* Both partitioners give eager's gradients; their reports count bytes exactly; min-cut saves
  no more than default and strictly less on memory-bound pointwise chains; it never
  recomputes random or extern ops.
* aot_module trains MLPs, a CNN (conv through the prim, max-pool extern), a transformer
  block and the seed model Linear(10,5)-ReLU-Linear(5,2)-Softmax exactly like eager.
Tolerances: float64 1e-8 for functions, float32 1e-5 (1e-4 for the transformer) for models.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tutorcompile.aot import (
    aot_function,
    aot_module,
    decompose,
    default_partition,
    kernel_min_cut_partition,
    make_joint,
    min_cut_partition,
)
from tutorcompile.aot.partitioners import nbytes, op_kind
from tutorcompile.aot.tracing import trace_with_inputs
from tutorcompile.fx import GraphModule
from tutorcompile.ops import PRIMS, Prim

pytestmark = pytest.mark.stage4
F64 = torch.float64
TOL = dict(rtol=1e-8, atol=1e-8)


def gelu_chain(x, b):
    y = x + b
    return 0.5 * y * (1 + torch.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y ** 3)))


def _joint(fn, *inputs):
    gm, _ = trace_with_inputs(fn, list(inputs))
    prim, _ = decompose(gm.graph, list(inputs))
    return make_joint(prim, [x.requires_grad for x in inputs])


def test_joint_graph_computes_outputs_and_gradients():
    x = torch.randn(4, 6, dtype=F64, requires_grad=True)
    b = torch.randn(6, dtype=F64, requires_grad=True)
    joint = _joint(gelu_chain, x, b)
    g = torch.randn(4, 6, dtype=F64)
    out, gx, gb = GraphModule({}, joint.graph)(x.detach(), b.detach(), g)
    expected = gelu_chain(x, b)
    ex_gx, ex_gb = torch.autograd.grad(expected, (x, b), g)
    torch.testing.assert_close(out, expected.detach(), **TOL)
    torch.testing.assert_close(gx, ex_gx, **TOL)
    torch.testing.assert_close(gb, ex_gb, **TOL)


def test_joint_graph_labels_primals_tangents_and_phases():
    x = torch.randn(3, 5, requires_grad=True)
    w = torch.randn(5, 5)  # no grad: its gradient output is None
    joint = _joint(lambda x, w: torch.tanh(x @ w), x, w)
    roles = [p.meta["partition_role"] for p in joint.graph.placeholders]
    assert roles == ["primal", "primal", "tangent"]
    assert [p.name.split("_")[0] for p in joint.graph.placeholders] == ["primals"] * 2 + \
        ["tangents"]
    phases = {n.meta.get("phase") for n in joint.graph.nodes if n.op == "call_function"}
    assert phases == {"forward", "backward"}
    outs = joint.graph.output_node.args[0]
    assert len(outs) == 1 + 2 and outs[2] is None  # forward output, grad x, grad w = None
    # the backward is made of prims: the op table's VJP rules, not hand-written derivatives
    for n in joint.graph.nodes:
        if n.meta.get("phase") == "backward" and n.op == "call_function":
            assert isinstance(n.target, Prim), n.format_node()
    joint.graph.lint()


def test_linear_on_a_batch_of_sequences_gets_its_weight_gradient_from_one_matmul():
    """``x @ w`` with a 3-d ``x`` and a matrix ``w`` (nn.Linear on (batch, time, features)):
    ``w``'s gradient is one 2-d product of the flattened operands, as eager's ``mm`` -- not a
    batched product per batch element and a sum over them."""
    x = torch.randn(4, 5, 6, dtype=F64, requires_grad=True)
    w = torch.randn(6, 3, dtype=F64, requires_grad=True)
    joint = _joint(lambda x, w: torch.tanh(x @ w), x, w)
    backward = [n for n in joint.graph.nodes
                if n.meta.get("phase") == "backward" and n.op == "call_function"]
    products = [n for n in backward if n.target is PRIMS["matmul"]]
    ranks = sorted(len(n.meta["tensor_meta"].shape) for n in products)
    assert ranks == [2, 3]          # w's gradient: 2-d; x's: batched as x was
    assert not any(n.target is PRIMS["sum"] for n in backward)
    g = torch.randn(4, 5, 3, dtype=F64)
    _, gx, gw = GraphModule({}, joint.graph)(x.detach(), w.detach(), g)
    ex_gx, ex_gw = torch.autograd.grad(torch.tanh(x @ w), (x, w), g)
    torch.testing.assert_close(gx, ex_gx, **TOL)
    torch.testing.assert_close(gw, ex_gw, **TOL)


def test_default_partition_saves_an_input_not_a_view_of_it():
    """A linear layer's backward reads the weight's transpose; the forward handed that view
    over as a saved value of its own (and the backward transposed it back). It now saves
    the weight, and the backward redoes the (free) view -- with the same gradients."""
    x = torch.randn(4, 6, dtype=F64, requires_grad=True)
    w = torch.randn(5, 6, dtype=F64, requires_grad=True)

    def linear_relu(x, w):
        return torch.relu(x @ w.t())
    joint = _joint(linear_relu, x, w)
    part = default_partition(joint)
    saved = [name for name, *_ in part.report.saved]
    assert "primals_w" in saved and not any("permute" in s or s == "t" for s in saved), saved
    g = torch.randn(4, 5, dtype=F64)
    out, *saved_values = GraphModule({}, part.forward.graph)(x.detach(), w.detach())
    gx, gw = GraphModule({}, part.backward.graph)(*saved_values, g)
    ex_gx, ex_gw = torch.autograd.grad(linear_relu(x, w), (x, w), g)
    torch.testing.assert_close(gx, ex_gx, **TOL)
    torch.testing.assert_close(gw, ex_gw, **TOL)


def test_saved_bytes_report_is_exact():
    x = torch.randn(32, 16, requires_grad=True)
    b = torch.randn(16, requires_grad=True)
    joint = _joint(gelu_chain, x, b)
    for policy in (default_partition, min_cut_partition):
        part = policy(joint)
        outputs = part.forward.graph.output_node.args[0]
        saved_nodes = outputs[joint.num_fwd_outputs:]
        assert len(saved_nodes) == len(part.report.saved)
        assert part.report.saved_bytes == sum(nbytes(n) for n in saved_nodes)
        assert part.report.saved_bytes == sum(
            math.prod(s[1]) * 4 for s in part.report.saved)  # float32: 4 bytes each
        bwd_inputs = part.backward.graph.placeholders
        assert len(bwd_inputs) == len(saved_nodes) + len(joint.tangents)


@pytest.mark.parametrize("fn", [
    gelu_chain,
    lambda x, b: torch.sigmoid(x * b).sin().exp() * x,
    lambda x, b: F.layer_norm(torch.softmax(x + b, -1), (x.shape[-1],)),
    lambda x, b: F.silu(F.gelu(x) + b).sum(-1),
], ids=["gelu_chain", "sigmoid_sin_exp", "softmax_layernorm", "silu_gelu_sum"])
def test_min_cut_saves_no_more_than_default_and_gradients_match(fn):
    x = torch.randn(64, 32, dtype=F64, requires_grad=True)
    b = torch.randn(32, dtype=F64, requires_grad=True)
    expected = fn(x, b)
    g = torch.randn_like(expected)
    want = torch.autograd.grad(expected, (x, b), g)
    saved = {}
    for policy in (default_partition, min_cut_partition):
        compiled = aot_function(fn, partition_fn=policy)
        out = compiled(x, b)
        torch.testing.assert_close(out, expected, **TOL)
        got = torch.autograd.grad(out, (x, b), g)
        for a, e in zip(got, want):
            torch.testing.assert_close(a, e, **TOL)
        saved[policy.__name__] = compiled.artifacts.partition_report.saved_bytes
    assert saved["min_cut_partition"] <= saved["default_partition"], saved


def test_min_cut_halves_memory_on_the_gelu_chain():
    x = torch.randn(256, 256, requires_grad=True)
    b = torch.randn(256, requires_grad=True)
    joint = _joint(gelu_chain, x, b)
    default = default_partition(joint).report
    min_cut = min_cut_partition(joint).report
    one = 256 * 256 * 4
    assert default.saved_bytes == 4 * one, str(default)
    assert min_cut.saved_bytes == one, str(min_cut)  # only x + b; the rest is recomputed
    assert len(min_cut.recomputed) > 0 and min_cut.backward_ops > default.backward_ops


def test_min_cut_never_recomputes_matmul_or_random_ops():
    def fn(x, w):
        h = x @ w
        return F.dropout(torch.tanh(h), 0.2) * h.sigmoid()
    x = torch.randn(16, 8, requires_grad=True)
    w = torch.randn(8, 8, requires_grad=True)
    joint = _joint(fn, x, w)
    part = min_cut_partition(joint)
    for node in part.backward.graph.nodes:
        if node.op == "call_function":
            assert op_kind(node) not in ("random",), node.format_node()
            assert not (op_kind(node) == "extern" and node.meta.get("phase") == "forward"), \
                f"recomputed {node.format_node()}"


def test_min_cut_keeps_an_equality_test_in_the_forward():
    """A max's gradient goes where ``x == max(x)``: recomputed in the backward's kernels,
    ``x`` may miss the saved maximum by a rounding (a reciprocal in one kernel, a division
    in the other) and the gradient vanishes or, divided by a count of zero, is NaN. Stage
    5's min-cut runs the comparison in the forward and saves its mask."""
    def fn(x):
        return torch.erf(F.normalize(x, dim=1)).reshape(-1).max(0).values * x
    x = torch.randn(3, 16, requires_grad=True)
    joint = _joint(fn, x)
    # (the textbook min-cut, as ex04 builds it, recomputes the comparison)
    assert any(n.target is PRIMS["eq"] for n in min_cut_partition(joint).backward.graph.nodes)
    part = kernel_min_cut_partition(joint)
    saved = {name: dtype for name, _, dtype, _ in part.report.saved}
    assert "bool" in saved.values(), str(part.report)
    for node in part.backward.graph.nodes:   # (a test against a constant may stay)
        assert node.target is not PRIMS["eq"] or len(node.all_input_nodes) < 2, \
            f"recomputed {node.format_node()}"


def test_kernel_min_cut_saves_what_a_backward_matmul_reads():
    """Recomputing is free only inside a kernel that reads it: a value the backward hands
    to a matmul (a weight gradient reads the layer's input) would be computed by a kernel
    of its own, written and read back. The textbook min-cut saves the smaller ``x`` and
    recomputes the cat; stage 5's saves the cat the forward wrote anyway."""
    def fn(x, w):
        return torch.cat([x, x * 2], dim=1) @ w
    x, w = torch.randn(8, 4, requires_grad=True), torch.randn(8, 3, requires_grad=True)
    joint = _joint(fn, x, w)

    def cats(graph):
        return [n for n in graph.nodes if n.target is PRIMS["cat"]]
    assert cats(min_cut_partition(joint).backward.graph)
    part = kernel_min_cut_partition(joint)
    assert not cats(part.backward.graph), str(part.report)
    assert any(shape == (8, 8) for _, shape, _, _ in part.report.saved), str(part.report)


def test_kernel_min_cut_does_not_recompute_a_long_pointwise_chain():
    """A pointwise chain 300 ops deep is free to recompute by the byte count -- the cut
    would save its input alone and recompute all of it in the backward, each gradient
    term at the end of a chain hundreds of ops long. Stage 5's min-cut saves a value at
    least every 100 ops (51 steps of two)."""
    def fn(x):
        for _ in range(150):
            x = torch.sin(x) * 1.01
        return x
    x = torch.randn(4, 8, requires_grad=True)
    joint = _joint(fn, x)
    assert len(min_cut_partition(joint).report.recomputed) >= 290
    part = kernel_min_cut_partition(joint)
    steps = [0] + sorted(int(name.split("_")[1]) + 1 for name, *_ in part.report.saved
                         if name.startswith("mul_")) + [150]
    assert max(b - a for a, b in zip(steps, steps[1:])) <= 51, str(part.report)


# ---------------------------------------------------------------------------------------
# The runtime on models
# ---------------------------------------------------------------------------------------

class Block(nn.Module):
    """A pre-norm transformer block (attention written out, then an MLP)."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att.masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf")), -1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def seed_model():
    return nn.Sequential(nn.Linear(10, 5), nn.ReLU(), nn.Linear(5, 2), nn.Softmax(dim=-1))


MODELS = {
    "seed": (seed_model, (3, 10), 1e-6),
    "mlp": (lambda: nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16),
                                  nn.Linear(16, 16), nn.SiLU(), nn.BatchNorm1d(16),
                                  nn.Dropout(0.0), nn.Linear(16, 4)), (6, 8), 1e-5),
    "cnn": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                  nn.MaxPool2d(2), nn.Conv2d(4, 4, 3, groups=2), nn.Tanh(),
                                  nn.Flatten(), nn.Linear(4 * 2 * 2, 5)), (2, 3, 8, 8), 1e-5),
    "transformer_block": (Block, (2, 5, 16), 1e-4),
}


@pytest.mark.parametrize("partition", [default_partition, min_cut_partition],
                         ids=["default", "min_cut"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_training_steps_match_eager(name, partition):
    make, shape, tol = MODELS[name]
    torch.manual_seed(0)
    model = make()
    reference = copy.deepcopy(model)
    compiled = aot_module(model, partition_fn=partition)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(2):
        x = torch.randn(*shape)
        target = torch.randn(copy.deepcopy(reference)(x).shape)
        for m, o, run in ((model, opt, compiled), (reference, ref_opt, reference)):
            o.zero_grad()
            loss = F.mse_loss(run(x), target)
            loss.backward()
            o.step()
            if m is model:
                ours = loss.detach()
            else:
                theirs = loss.detach()
        torch.testing.assert_close(ours, theirs, rtol=tol, atol=tol, msg=f"loss, step {step}")
        for (n, p), q in zip(model.named_parameters(), reference.parameters()):
            torch.testing.assert_close(p, q, rtol=tol, atol=tol, msg=f"{n} after step {step}")
    for (n, b), c in zip(model.named_buffers(), reference.buffers()):
        torch.testing.assert_close(b.double(), c.double(), rtol=tol, atol=tol, msg=n)


def test_cnn_decomposes_conv_and_max_pool():
    # max_pool2d is the maximum of its window's strided slices (decomp/nn.py)
    make, shape, _ = MODELS["cnn"]
    compiled = aot_module(make())
    compiled(torch.randn(*shape)).sum().backward()
    report = compiled.artifacts.decomposition_report
    assert "F.conv2d" in report.decomposed and "F.max_pool2d" in report.decomposed, str(report)


def test_multiple_outputs_non_differentiable_outputs_and_none_grads():
    def fn(x, y, idx):
        a = x * y
        return a.sum(), (a > 0), a.exp(), idx * 2
    x = torch.randn(4, 3, dtype=F64, requires_grad=True)
    y = torch.randn(4, 3, dtype=F64)  # no grad
    idx = torch.arange(4)
    compiled = aot_function(fn)
    s, mask, e, idx2 = compiled(x, y, idx)
    assert not mask.requires_grad and not idx2.requires_grad and mask.dtype == torch.bool
    torch.testing.assert_close(idx2, idx * 2)
    # only one output used in the loss: the other's gradient arrives as None -> zeros
    (gx,) = torch.autograd.grad(s, x, retain_graph=True)
    torch.testing.assert_close(gx, y, **TOL)
    (gx,) = torch.autograd.grad(e.sum(), x)
    torch.testing.assert_close(gx, (x * y).exp().detach() * y, **TOL)


def test_no_grad_inputs_build_only_a_forward_graph():
    compiled = aot_function(lambda x: torch.tanh(x) * 2)
    x = torch.randn(5)
    torch.testing.assert_close(compiled(x), torch.tanh(x) * 2)
    assert compiled.artifacts.joint is None and compiled.artifacts.backward is None
    with torch.no_grad():
        assert not compiled(x.requires_grad_()).requires_grad
    assert compiled(x).requires_grad  # a new signature: recompiled with a backward
    assert len(compiled.cache) == 3


def test_compilers_receive_the_forward_and_backward_graphs():
    seen = []

    def compiler(gm, example_inputs):
        seen.append(type(gm).__name__)
        return gm
    compiled = aot_function(gelu_chain, fw_compiler=compiler, bw_compiler=compiler)
    x = torch.randn(4, 4, requires_grad=True)
    compiled(x, torch.randn(4)).sum().backward()
    assert seen == ["ForwardGraph", "BackwardGraph"]


def test_switching_train_eval_retraces():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Dropout(0.5))
    reference = copy.deepcopy(model)
    compiled = aot_module(model)
    x = torch.randn(8, 4)
    compiled(x)
    reference(x)
    model.eval()
    reference.eval()
    torch.testing.assert_close(compiled(x), reference(x))
    assert len(compiled.cache) == 2
