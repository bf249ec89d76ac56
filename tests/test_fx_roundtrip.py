"""Our IR against torch.fx: import a torch.fx graph, run it, export it back, run that.

Each case is traced by the real ``torch.fx.symbolic_trace``; ``from_torch_fx`` must give a
GraphModule that computes what eager PyTorch computes (through its generated code *and*
through the Interpreter), whose nodes mirror torch.fx's one for one, and ``to_torch_fx``
must give the same program back.
"""

import math
import operator

import pytest
import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

from tutorcompile.fx import GraphModule, Interpreter, ShapeProp, from_torch_fx, to_torch_fx

pytestmark = pytest.mark.foundation


# --- the cases: functions and modules of many shapes ------------------------------------
def pointwise_chain(x, b):
    return F.gelu(x + b) * torch.sigmoid(x + b)


def python_operators(x, y):
    return (x * 2 - y / 3) ** 2 + (-x) @ y.t() % 5


def comparisons(x, y):
    return torch.where(x > y, x, y) + (x <= 0).float() - (x == y).to(x.dtype)


def reductions(x):
    return x.sum(dim=1, keepdim=True) / x.shape[1] - x.amax(-1, keepdim=True) + x.mean()


def views_and_slices(x):
    y = x.view(4, -1).permute(1, 0)[:, 1:3]
    return y.reshape(-1).unsqueeze(0)[..., ::2]


def multiple_outputs(x):
    return x.relu(), {"neg": -x, "pair": (x.exp(), [x.abs(), x.sin()])}


def unused_input(x, unused):
    return x.cos()


def kwargs_and_defaults(x, scale: float = 2.0):
    return torch.clamp(x * scale, min=-1.0, max=1.0).softmax(dim=-1)


def constants_inf(x):
    return x.masked_fill(x > 0.5, float("-inf")).softmax(-1)


def dtype_and_device_args(x):
    return x.to(torch.float64).sum(dtype=torch.float64) + torch.zeros(2, device=x.device)


def math_module(x):
    return x * math.sqrt(2.0) + operator.neg(x)


def cat_stack_split(x, y):
    a, b = torch.chunk(torch.cat([x, y], dim=0), 2, dim=0)
    return torch.stack([a, b], dim=1).flatten(1)


def matmul_family(a, b):
    return torch.bmm(a, b).tanh() + torch.matmul(a, b)


class SeedModel(nn.Module):
    """The seed material's model: Linear(10,5) → ReLU → Linear(5,2) → Softmax."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 5), nn.ReLU(), nn.Linear(5, 2), nn.Softmax(dim=1))

    def forward(self, x):
        return self.net(x)


class MLPWithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)
        self.register_buffer("shift", torch.arange(4.0))
        self.scale = nn.Parameter(torch.tensor(0.5))

    def forward(self, x):
        return self.fc2(F.silu(self.fc1(x))) * self.scale + self.shift


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.conv(x))))
        return self.head(torch.flatten(x, 1))


class ResidualBlock(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return F.relu(x + self.conv2(F.relu(self.conv1(x))))


class AttentionBlock(nn.Module):
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).split(d, dim=-1)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        y = att.softmax(dim=-1) @ v
        return x + self.proj(y.transpose(1, 2).reshape(b, t, d))


class NestedModules(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(6, 6), nn.Tanh()) for _ in range(3)])
        self.out = nn.ModuleDict({"head": nn.Linear(6, 2)})

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return self.out["head"](x)


class NormsAndDropoutEval(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(12)
        self.drop = nn.Dropout(0.5)
        self.emb = nn.Embedding(20, 12)

    def forward(self, idx):
        return self.drop(self.ln(self.emb(idx))).mean(dim=1)


class InputNamedInput(nn.Module):
    """`input` is a Python builtin: the graph must rename the value, not the behaviour."""

    def forward(self, input, lambda_=1.0):
        return input * lambda_ + input.numel()


class AttributeAccess(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(5, 5))

    def forward(self, x):
        return F.linear(x, self.weight.t(), None).size(0) * x + self.weight.sum()


class InPlaceOps(nn.Module):
    def forward(self, x):
        y = x.clone()
        y.add_(1.0)
        y.mul_(2.0)
        return F.relu(y, inplace=True)


def tiny_image():
    return (torch.randn(2, 3, 8, 8),)


CASES = {
    "pointwise_chain": (pointwise_chain, lambda: (torch.randn(4, 8), torch.randn(8))),
    "python_operators": (python_operators, lambda: (torch.randn(3, 3), torch.randn(3, 3))),
    "comparisons": (comparisons, lambda: (torch.randn(5), torch.randn(5))),
    "reductions": (reductions, lambda: (torch.randn(3, 7),)),
    "views_and_slices": (views_and_slices, lambda: (torch.randn(4, 6),)),
    "multiple_outputs": (multiple_outputs, lambda: (torch.randn(3),)),
    "unused_input": (unused_input, lambda: (torch.randn(3), torch.randn(2))),
    "kwargs_and_defaults": (kwargs_and_defaults, lambda: (torch.randn(2, 5),)),
    "constants_inf": (constants_inf, lambda: (torch.rand(3, 4),)),
    "dtype_and_device_args": (dtype_and_device_args, lambda: (torch.randn(4),)),
    "math_module": (math_module, lambda: (torch.randn(4),)),
    "cat_stack_split": (cat_stack_split, lambda: (torch.randn(2, 3), torch.randn(2, 3))),
    "matmul_family": (matmul_family, lambda: (torch.randn(2, 3, 4), torch.randn(2, 4, 5))),
    "seed_model": (SeedModel, lambda: (torch.randn(4, 10),)),
    "mlp_with_buffer": (MLPWithBuffer, lambda: (torch.randn(3, 8),)),
    "small_cnn": (SmallCNN, tiny_image),
    "residual_block": (ResidualBlock, lambda: (torch.randn(2, 4, 5, 5),)),
    "attention_block": (AttentionBlock, lambda: (torch.randn(2, 5, 16),)),
    "nested_modules": (NestedModules, lambda: (torch.randn(3, 6),)),
    "norms_dropout_eval": (NormsAndDropoutEval, lambda: (torch.randint(0, 20, (2, 7)),)),
    "input_named_input": (InputNamedInput, lambda: (torch.randn(3),)),
    "attribute_access": (AttributeAccess, lambda: (torch.randn(5, 5),)),
    "in_place_ops": (InPlaceOps, lambda: (torch.randn(4),)),
}


def build(name):
    target, make_inputs = CASES[name]
    if isinstance(target, type):
        target = target().eval()
    return target, make_inputs()


def assert_same(actual, expected):
    """Nested structures of tensors/numbers compare equal (to float tolerance)."""
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
    elif isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e)
    elif isinstance(expected, dict):
        assert actual.keys() == expected.keys()
        for k in expected:
            assert_same(actual[k], expected[k])
    else:
        assert actual == expected


def test_there_are_enough_cases():
    assert len(CASES) >= 20


@pytest.mark.parametrize("name", sorted(CASES))
def test_from_torch_fx_runs_like_eager(name):
    target, inputs = build(name)
    expected = target(*[i.clone() for i in inputs])
    gm = from_torch_fx(torch.fx.symbolic_trace(target))
    gm.graph.lint(gm)
    assert_same(gm(*[i.clone() for i in inputs]), expected)
    assert_same(Interpreter(gm).run(*[i.clone() for i in inputs]), expected)


@pytest.mark.parametrize("name", sorted(CASES))
def test_nodes_mirror_torch_fx(name):
    target, _ = build(name)
    fx_gm = torch.fx.symbolic_trace(target)
    gm = from_torch_fx(fx_gm)
    theirs = [(n.op, n.target) for n in fx_gm.graph.nodes]
    ours = [(n.op, n.target) for n in gm.graph.nodes]
    assert ours == theirs
    # each node reads the nodes at the same positions as its torch.fx twin
    our_pos = {n: i for i, n in enumerate(gm.graph.nodes)}
    their_pos = {n: i for i, n in enumerate(fx_gm.graph.nodes)}
    for our_node, their_node in zip(gm.graph.nodes, fx_gm.graph.nodes):
        assert [our_pos[a] for a in our_node.all_input_nodes] == \
               [their_pos[a] for a in their_node.all_input_nodes], our_node.name


@pytest.mark.parametrize("name", sorted(CASES))
def test_round_trip_back_to_torch_fx(name):
    target, inputs = build(name)
    expected = target(*[i.clone() for i in inputs])
    back = to_torch_fx(from_torch_fx(torch.fx.symbolic_trace(target)))
    assert isinstance(back, torch.fx.GraphModule)
    back.graph.lint()
    assert_same(back(*[i.clone() for i in inputs]), expected)
    # and a second lap changes nothing
    again = from_torch_fx(back)
    assert [(n.op, n.target) for n in again.graph.nodes] == \
           [(n.op, n.target) for n in back.graph.nodes]


@pytest.mark.parametrize("name", ["seed_model", "small_cnn", "attention_block", "reductions"])
def test_shape_prop_agrees_with_eager_shapes(name):
    target, inputs = build(name)
    gm = from_torch_fx(torch.fx.symbolic_trace(target))
    ShapeProp(gm).propagate(*inputs)
    out_meta = gm.graph.output_node.meta["tensor_meta"]
    expected = target(*inputs)
    assert out_meta.shape == expected.shape and out_meta.dtype == expected.dtype

    class Recorder(Interpreter):
        def run_node(self, node):
            values[node] = result = super().run_node(node)
            return result

    values = {}
    Recorder(gm).run(*inputs)
    tensors = [n for n, v in values.items() if isinstance(v, torch.Tensor)]
    assert tensors
    for node in tensors:
        meta = node.meta["tensor_meta"]
        assert (meta.shape, meta.dtype, meta.stride) == \
               (values[node].shape, values[node].dtype, values[node].stride()), node.name


def test_parameters_are_shared_not_copied():
    model = MLPWithBuffer()
    gm = from_torch_fx(torch.fx.symbolic_trace(model))
    assert gm.fc1.weight is model.fc1.weight
    assert gm.shift is model.shift
    with torch.no_grad():
        model.fc1.weight.add_(1.0)
    x = torch.randn(2, 8)
    torch.testing.assert_close(gm(x), model(x))


def test_gradients_flow_through_generated_code():
    model = AttentionBlock()
    gm = from_torch_fx(torch.fx.symbolic_trace(model))
    x = torch.randn(2, 5, 16, requires_grad=True)
    gm(x).square().sum().backward()
    ours = x.grad.clone(), gm.qkv.weight.grad.clone()
    x.grad = None
    model.zero_grad()
    model(x).square().sum().backward()
    torch.testing.assert_close(ours[0], x.grad)
    torch.testing.assert_close(ours[1], model.qkv.weight.grad)


def test_graph_module_is_a_module():
    gm = from_torch_fx(torch.fx.symbolic_trace(SmallCNN()))
    assert isinstance(gm, nn.Module) and isinstance(gm, GraphModule)
    assert {n for n, _ in gm.named_parameters()} >= {"conv.weight", "head.bias"}
    gm.train()
    assert gm.bn.training
