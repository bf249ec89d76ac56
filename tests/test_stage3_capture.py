"""Stage 3: symbolic capture -- graphs of torch-level calls, source lines, backends."""

import functools
import math

import pytest
import torch
import torch.nn.functional as F

from tutorcompile.dynamo import eval_frame
from tutorcompile.dynamo.debugging import explain
from tutorcompile.dynamo.eval_frame import cache_entries
from tutorcompile.fx import GraphModule, to_torch_fx

# These tests check capture, guards and breaks: the eager backend runs each captured
# graph as it is (tutorcompile.compile's default backend, 'inductor', adds AOT and codegen).
compile_eager = functools.partial(eval_frame.compile, backend="eager")

pytestmark = [pytest.mark.stage3, pytest.mark.usefixtures("fresh_compiler")]


def f_ops(x, y):
    a = torch.relu(x) + y * 2
    b = a.sum(dim=0)
    return F.gelu(b), a.shape[0]


def test_graph_is_torch_level_and_matches_eager():
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    got = compile_eager(f_ops)(x, y)
    want = f_ops(x, y)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1] == 3
    (entry,) = cache_entries(f_ops)
    targets = [n.format_target() for n in entry.graph_module.graph.nodes
               if n.op in ("call_function", "call_method")]
    assert targets == ["torch.relu", "operator.mul", "operator.add", "sum",
                       "torch.nn.functional.gelu"]
    assert "torch.nn.functional.gelu(sum_)" in entry.graph_module.code


def test_nodes_record_the_users_source_line():
    compile_eager(f_ops)(torch.randn(2, 2), torch.randn(2, 2))
    (entry,) = cache_entries(f_ops)
    relu = next(n for n in entry.graph_module.graph.nodes if n.target is torch.relu)
    assert "a = torch.relu(x) + y * 2" in relu.meta["source"]
    assert "test_stage3_capture.py" in relu.meta["source"]
    assert relu.meta["tensor_meta"].shape == (2, 2)


def test_inlined_helper_lines_point_into_the_helper():
    def helper(t):
        return torch.tanh(t)

    def f(x):
        return helper(x) * 2
    compile_eager(f)(torch.randn(3))
    tanh = next(n for n in cache_entries(f)[0].graph_module.graph.nodes
                if n.target is torch.tanh)
    assert "return torch.tanh(t)" in tanh.meta["source"] and "in helper" in tanh.meta["source"]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 2)
        self.scale = 2.0

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x))) * self.scale


def test_module_parameters_become_graph_inputs_with_sources():
    net = Net().eval()
    x = torch.randn(5, 4)
    compiled = compile_eager(net)
    torch.testing.assert_close(compiled(x), net(x))
    (entry,) = cache_entries(net)
    names = [s.name() for s in entry.input_sources]
    assert "L['self']._modules['fc1']._parameters['weight']" in names
    assert sum(n.target is F.linear for n in entry.graph_module.graph.nodes) == 2
    # the compiled module shares parameters with the original
    assert compiled.fc1 is net.fc1
    with torch.no_grad():
        net.fc1.bias.add_(1.0)
    torch.testing.assert_close(compiled(x), net(x))


def test_gradients_flow_through_captured_graph():
    net = Net()
    x = torch.randn(3, 4)
    compile_eager(net)(x).sum().backward()
    got = net.fc1.weight.grad.clone()
    net.zero_grad()
    net(x).sum().backward()
    torch.testing.assert_close(got, net.fc1.weight.grad)


def test_custom_backend_receives_graph_and_example_inputs():
    seen = []

    def backend(gm, example_inputs):
        seen.append((gm, [tuple(t.shape) for t in example_inputs]))
        return gm

    def f(x):
        return x.sin() + 1
    compiled = compile_eager(f, backend=backend)
    torch.testing.assert_close(compiled(torch.ones(2, 3)), f(torch.ones(2, 3)))
    assert len(seen) == 1 and isinstance(seen[0][0], GraphModule)
    assert seen[0][1] == [(2, 3)]


def test_captured_graph_converts_to_torch_fx():
    compile_eager(f_ops)(torch.randn(2, 3), torch.randn(2, 3))
    gm = cache_entries(f_ops)[0].graph_module
    fx_gm = to_torch_fx(gm)
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    torch.testing.assert_close(fx_gm(x, y)[0], gm(x, y)[0])


def test_decorator_forms_and_unknown_backend():
    @eval_frame.compile
    def f(x):
        return x * 3

    @compile_eager(backend="eager", fullgraph=True)
    def g(x):
        return x - 3
    torch.testing.assert_close(f(torch.ones(2)), torch.full((2,), 3.0))
    torch.testing.assert_close(g(torch.ones(2)), torch.full((2,), -2.0))
    with pytest.raises(ValueError, match="unknown backend"):
        compile_eager(f, backend="nope")


def test_python_control_flow_on_constants_is_specialised():
    def f(x, n, mode):
        for _ in range(n):
            x = x * 2
        if mode == "neg":
            x = -x
        return x
    out = explain(f)(torch.ones(2), 3, "neg")
    assert out.graph_count == 1 and out.graph_break_count == 0
    assert out.ops_per_graph[0] == ["operator.mul"] * 3 + ["operator.neg"]


@pytest.mark.slow
def test_torch_inductor_backend_runs_real_inductor():
    def f(x):
        return torch.sin(x) * 2 + 1
    x = torch.randn(8)
    compiled = compile_eager(f, backend="torch_inductor")
    torch.testing.assert_close(compiled(x), f(x))


class TinyAttention(torch.nn.Module):
    def __init__(self, d=16, heads=2, block=8):
        super().__init__()
        self.qkv, self.proj, self.heads = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d), heads
        self.register_buffer("mask", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class TinyGPT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(50, 16), torch.nn.Embedding(8, 16)
        self.ln = torch.nn.LayerNorm(16)
        self.attn = torch.nn.ModuleList([TinyAttention() for _ in range(2)])
        self.head = torch.nn.Linear(16, 50, bias=False)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        x = self.wte(idx) + self.wpe(torch.arange(0, t, dtype=torch.long, device=idx.device))
        for attn in self.attn:
            x = x + attn(self.ln(x))
        logits = self.head(x)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def test_a_small_transformer_is_one_graph_with_matching_values_and_grads():
    model = TinyGPT()
    idx, targets = torch.randint(0, 50, (2, 8)), torch.randint(0, 50, (2, 8))
    out = explain(model)(idx, targets)
    assert (out.graph_count, out.graph_break_count) == (1, 0), str(out)
    compiled = compile_eager(model)
    logits, loss = compiled(idx, targets)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    ref_logits, ref_loss = model(idx, targets)
    ref_loss.backward()
    torch.testing.assert_close(logits, ref_logits)
    for n, p in model.named_parameters():
        torch.testing.assert_close(grads[n], p.grad, msg=lambda m, n=n: f"{n}: {m}")
    # a shorter sequence: automatic dynamic makes T symbolic, still one graph per entry
    for t in (5, 6):
        torch.testing.assert_close(compiled(idx[:, :t])[0], model(idx[:, :t])[0])


_compiled_inner = compile_eager(lambda t: t.sin() * 2)


def calls_a_compiled_function(x, mode="Relu"):
    if mode.lower() == "relu":  # str methods on constants fold while tracing
        x = torch.relu(x)
    return _compiled_inner(x) + 1


def test_compiled_functions_called_from_traced_code_are_traced_through():
    x = torch.randn(3)
    out = explain(calls_a_compiled_function)(x)
    assert (out.graph_count, out.graph_break_count) == (1, 0), str(out)
    torch.testing.assert_close(compile_eager(calls_a_compiled_function)(x),
                               calls_a_compiled_function(x))


def test_user_errors_surface_as_the_real_exception():
    def bad(x):
        return x + torch.ones(5)
    with pytest.raises(RuntimeError, match="must match the size"):
        compile_eager(bad)(torch.ones(3))


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention_is_one_graph_and_matches_eager(batch_first):
    """``nn.MultiheadAttention.forward`` asks ``query.is_nested`` first (SigLIP's pooling
    head); a tensor attribute we did not know was a break there, where Dynamo has none."""
    torch.manual_seed(0)
    m = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    q = torch.randn(2, 3, 8, requires_grad=True)
    kv = torch.randn(2, 5, 8) if batch_first else torch.randn(5, 2, 8)
    if not batch_first:
        q = torch.randn(3, 2, 8, requires_grad=True)
    got = eval_frame.compile(m, backend="aot_eager", fullgraph=True)(q, kv, kv)
    want = m(q, kv, kv)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    torch.testing.assert_close(torch.autograd.grad(got[0].sum(), [q, *m.parameters()]),
                               torch.autograd.grad(want[0].sum(), [q, *m.parameters()]))
