"""Stage 3: functions passed to torch -- vmap, grad, cond, checkpoint, functional_call -- in
one graph.

A corpus of small programs written for these tests, each in a spelling training code uses
(per-sample gradients with ``vmap(grad(...))`` over ``functional_call``, ensembles, a
``cond`` on a tensor, checkpointed blocks). Each must be one graph with no break
(``fullgraph=True``), under every backend, and give eager's values and gradients. Then what a
body must not do (write outside itself, return a non-tensor) is a break that says so and
stays right, and a checkpointed region is recomputed, not saved, by both partitioners.
"""

import functools

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._higher_order_ops.while_loop import while_loop
from torch.func import functional_call, grad, grad_and_value, hessian, jacfwd, jacrev, vmap
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention
from torch.utils.checkpoint import checkpoint

import tutorcompile as tc
from tests.capture_cases import check_one_graph
from tutorcompile.aot.aot_autograd import aot_graph
from tutorcompile.aot.partitioners import default_partition, min_cut_partition
from tutorcompile.dynamo.exc import GraphBreakError

pytestmark = pytest.mark.stage3

BACKENDS = ["eager", "aot_eager", "inductor"]


def _mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))


# --- vmap ----------------------------------------------------------------------------------
def vmap_of_a_lambda(x):
    return vmap(lambda r: (r * r).sum())(x) + 1


def vmap_in_dims_with_none(x, w):
    return vmap(lambda r, m: r @ m, in_dims=(0, None))(x, w).relu()


def vmap_out_dims_and_tuple_result(x):
    a, b = vmap(lambda r: (r.sin(), r.sum()), in_dims=1, out_dims=(1, 0))(x)
    return a.sum(0) + b


def nested_vmap_closing_over_a_tensor(x, w):
    return vmap(vmap(lambda a: (a * w).tanh()))(x.view(2, 3, 4)).sum(-1)


def vmap_of_a_module(x, model):
    return vmap(model)(x.view(3, 2, 4)).square()


def ensemble_with_stacked_parameters(x, model, params, buffers):
    def run(p, b, inp):
        return functional_call(model, (p, b), (inp,))
    return vmap(run, in_dims=(0, 0, None))(params, buffers, x).mean(0)


def _ensemble():
    models = [_mlp(s) for s in range(3)]
    params, buffers = torch.func.stack_module_state(models)
    return [torch.randn(2, 4), _mlp(), params, buffers]


# --- grad, jacobians ---------------------------------------------------------------------
def grad_of_a_function(x):
    return grad(lambda r: r.sin().sum())(x) * 2


def grad_with_argnums_and_aux(x, y):
    def loss(a, b):
        out = (a * b).pow(2).sum()
        return out, {"scale": a.abs().mean()}
    (ga, gb), aux = grad(loss, argnums=(0, 1), has_aux=True)(x, y)
    return ga + gb * aux["scale"]


def grad_and_value_of_a_module_loss(x, model):
    params = dict(model.named_parameters())

    def loss(p, inp):
        return functional_call(model, p, (inp,)).pow(2).mean()
    grads, value = grad_and_value(loss)(params, x)
    return value + sum(g.sum() for g in grads.values())


def per_sample_gradients(x, model):
    params = {k: v.detach() for k, v in model.named_parameters()}
    target = torch.arange(x.shape[0]) % 3

    def sample_loss(p, inp, t):
        out = functional_call(model, p, (inp.unsqueeze(0),))
        return F.cross_entropy(out, t.unsqueeze(0))
    grads = vmap(grad(sample_loss), in_dims=(None, 0, 0))(params, x, target)
    return grads["0.weight"].norm(dim=(1, 2)) * x.sum(1)


def jacobians_and_hessian(x):
    f = lambda r: (r.sin() * r).sum()  # noqa: E731 -- the spelling under test
    g = lambda r: r.exp() * 2  # noqa: E731
    return jacrev(g)(x).sum(0) + jacfwd(g)(x).sum(1) + hessian(f)(x).diagonal()


# --- cond --------------------------------------------------------------------------------
def cond_on_a_tensor(x):
    return torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,)) + 1


def cond_with_closures_and_tuples(x, w):
    def yes(t):
        return (t @ w).relu(), t.sum(0)

    def no(t):
        return (t - w.sum()).abs(), t.mean(0) * w.mean()
    a, b = torch.cond(x.mean() > 0.5, yes, no, (x,))
    return a.sum(1) + b.sum()


def cond_calling_a_module(x, model):
    return torch.cond(x.max() > 10, model, lambda t: model(t) * 2, (x,))


def cond_on_a_python_bool(x):
    return torch.cond(x.shape[0] > 2, lambda t: t + 1, lambda t: t - 1, (x,))


# --- checkpoint ----------------------------------------------------------------------------
def checkpoint_a_module(x, model):
    return checkpoint(model, x, use_reentrant=False).sum(1)


def checkpoint_a_function_with_kwargs(x, w):
    def block(a, scale=1.0):
        return F.gelu(a @ w) * scale
    return checkpoint(block, x, use_reentrant=False, scale=3.0) + x.sum()


def nested_checkpoints(x, model):
    def outer(a):
        return checkpoint(model, a.tanh(), use_reentrant=False).exp()
    return checkpoint(outer, x, use_reentrant=False)


# --- functional_call ---------------------------------------------------------------------
def functional_call_with_other_weights(x, model):
    params = {k: v * 2 for k, v in model.named_parameters()}
    return functional_call(model, params, (x,)).cos()


def functional_call_of_some_parameters_and_a_buffer(x, bn):
    stats = {"1.running_mean": torch.full((4,), 0.5), "0.bias": x.mean(0)}
    return functional_call(bn, stats, x) + bn(x)


def _linear_bn():
    return [torch.randn(3, 4), nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).eval()]


def functional_call_of_tied_weights(x, model):
    new = {"0.weight": model[0].weight * x.mean()}
    tokens = torch.tensor([0, 3, 4])
    tied = functional_call(model, new, (tokens,))
    untied = functional_call(model, new, (tokens,), tie_weights=False)
    return tied.sum(0) + untied.sum(0)


def _tied():
    emb = nn.Embedding(5, 4)
    head = nn.Linear(4, 5, bias=False)
    head.weight = emb.weight
    return [torch.randn(3), nn.Sequential(emb, head)]



# --- while_loop: the number of steps is the data's ------------------------------------------
def while_loop_until_a_tensor_test(x, w):
    def cond(i, a):
        return (i < 5) & (a.abs().sum() < 50)

    def body(i, a):
        return i + 1, torch.tanh(a @ w) * 3
    i, a = while_loop(cond, body, (torch.tensor(0), x))
    return a * i


def while_loop_with_nested_carries(x):
    limit = 4
    count, (a, b) = while_loop(lambda c, pair: c < limit,
                               lambda c, pair: (c + 1, (pair[0] * 1.5, pair[1] + pair[0])),
                               (torch.tensor(0), (x, torch.zeros_like(x))))
    return b + count


def checkpoint_sequential_segments(x, model):
    return torch.utils.checkpoint.checkpoint_sequential(model, 2, x, use_reentrant=False).relu()

CASES = {
    "checkpoint_sequential_segments": (checkpoint_sequential_segments, lambda: [
        torch.randn(3, 4), nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4),
                                         nn.Tanh())]),
    "vmap_of_a_lambda": (vmap_of_a_lambda, lambda: [torch.randn(5, 3)]),
    "vmap_in_dims_with_none": (vmap_in_dims_with_none,
                               lambda: [torch.randn(5, 3), torch.randn(3, 2)]),
    "vmap_out_dims_and_tuple_result": (vmap_out_dims_and_tuple_result,
                                       lambda: [torch.randn(3, 5)]),
    "nested_vmap_closing_over_a_tensor": (nested_vmap_closing_over_a_tensor,
                                          lambda: [torch.randn(6, 4), torch.randn(4)]),
    "vmap_of_a_module": (vmap_of_a_module, lambda: [torch.randn(6, 4), _mlp()]),
    "ensemble_with_stacked_parameters": (ensemble_with_stacked_parameters, _ensemble),
    "grad_of_a_function": (grad_of_a_function, lambda: [torch.randn(5)]),
    "grad_with_argnums_and_aux": (grad_with_argnums_and_aux,
                                  lambda: [torch.randn(3), torch.randn(3)]),
    "grad_and_value_of_a_module_loss": (grad_and_value_of_a_module_loss,
                                        lambda: [torch.randn(2, 4), _mlp()]),
    "per_sample_gradients": (per_sample_gradients, lambda: [torch.randn(5, 4), _mlp()]),
    "jacobians_and_hessian": (jacobians_and_hessian, lambda: [torch.randn(4)]),
    "cond_on_a_tensor": (cond_on_a_tensor, lambda: [torch.randn(4, 3)]),
    "cond_with_closures_and_tuples": (cond_with_closures_and_tuples,
                                      lambda: [torch.rand(3, 3), torch.randn(3, 3)]),
    "cond_calling_a_module": (cond_calling_a_module, lambda: [torch.randn(2, 4), _mlp()]),
    "cond_on_a_python_bool": (cond_on_a_python_bool, lambda: [torch.randn(3, 2)]),
    "checkpoint_a_module": (checkpoint_a_module, lambda: [torch.randn(2, 4), _mlp()]),
    "checkpoint_a_function_with_kwargs": (checkpoint_a_function_with_kwargs,
                                          lambda: [torch.randn(3, 4), torch.randn(4, 4)]),
    "nested_checkpoints": (nested_checkpoints, lambda: [torch.randn(2, 4), _mlp()]),
    "functional_call_with_other_weights": (functional_call_with_other_weights,
                                           lambda: [torch.randn(2, 4), _mlp()]),
    "functional_call_of_some_parameters_and_a_buffer": (
        functional_call_of_some_parameters_and_a_buffer, _linear_bn),
    "functional_call_of_tied_weights": (functional_call_of_tied_weights, _tied),
    "while_loop_until_a_tensor_test": (while_loop_until_a_tensor_test,
                                       lambda: [torch.randn(2, 3), torch.randn(3, 3)]),
    "while_loop_with_nested_carries": (while_loop_with_nested_carries,
                                       lambda: [torch.randn(4)]),
}


def _make(make):
    torch.manual_seed(0)
    return make()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(CASES))
def test_one_graph_with_eager_values_and_gradients(name, backend):
    # (vmap, jacobians and hessians reassociate sums: float32 rounding)
    check_one_graph(*CASES[name], backend, rtol=1e-4, atol=1e-5)


# --- what a body must not do: a break that says why, and still eager's answer --------------
def writes_a_list_from_outside(x, seen):
    def body(r):
        seen.append(1)
        return r.sin()
    return vmap(body)(x)


def writes_an_input_in_place(x, w):
    def body(r):
        w.add_(1)
        return r * w
    return vmap(body)(x)


def returns_a_number(x):
    return grad(lambda r: (r.sum(), 3), has_aux=True)(x)[0]


def writes_only_its_own_tensor(x):
    def body(r):
        acc = torch.zeros_like(r)
        acc.add_(r)
        return acc * 2
    return vmap(body)(x)


@pytest.mark.parametrize("fn, make, reason", [
    (writes_a_list_from_outside, lambda: [torch.randn(3, 2), []], "writes to an object"),
    (writes_an_input_in_place, lambda: [torch.randn(3, 2), torch.zeros(2)], "in place"),
], ids=["list_append", "in_place_write"])
def test_a_body_that_reaches_outside_is_a_break_that_says_why(fn, make, reason):
    explained = tc.explain(fn)(*_make(make))
    assert explained.graph_break_count >= 1
    assert any(reason in r.reason for r in explained.break_reasons), explained.break_reasons
    assert "test_stage3_higher_order.py" in explained.break_reasons[0].filename
    args, ref_args = _make(make), _make(make)
    out, want = tc.compile(fn)(*args), fn(*ref_args)
    torch.testing.assert_close(out, want)
    if torch.is_tensor(args[1] if len(args) > 1 else None):
        torch.testing.assert_close(args[1], ref_args[1])   # the write happened once
    with pytest.raises(GraphBreakError, match=reason):
        tc.compile(fn, fullgraph=True)(*_make(make))


def test_a_body_returning_a_number_raises_what_eager_raises():
    x = torch.randn(3)
    with pytest.raises(RuntimeError, match="Expected tensors"):
        returns_a_number(x)
    with pytest.raises(RuntimeError, match="Expected tensors"):
        tc.compile(returns_a_number)(x)


def test_a_body_may_write_a_tensor_it_made():
    x = torch.randn(3, 2)
    explained = tc.explain(writes_only_its_own_tensor)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    torch.testing.assert_close(tc.compile(writes_only_its_own_tensor)(x), x * 2)


def test_cond_takes_the_branch_of_each_call_and_guards_nothing_about_it():
    compiled = tc.compile(cond_on_a_tensor, backend="inductor", fullgraph=True)
    for sign in (1, -1, 1):
        x = torch.rand(4, 3) * sign
        torch.testing.assert_close(compiled(x), cond_on_a_tensor(x))
    assert tc.explain(cond_on_a_tensor)(torch.rand(4, 3)).graph_count == 1


def test_branches_that_disagree_on_shapes_fail_as_in_eager_and_say_why():
    def bad(x):
        return torch.cond(x.sum() > 0, lambda t: t.sum(0), lambda t: t * 2, (x,))
    x = torch.randn(2, 3)
    with pytest.raises(Exception):  # noqa: B017 -- whichever torch.cond raises in eager
        bad(x)
    with pytest.raises(GraphBreakError, match="differs between the branches"):
        tc.compile(bad, fullgraph=True)(x)


def test_a_closed_over_tensor_is_read_on_every_call():
    w = torch.randn(3)
    compiled = tc.compile(lambda x: vmap(lambda r: r * w)(x), fullgraph=True)
    x = torch.randn(2, 3)
    torch.testing.assert_close(compiled(x), x * w)
    w.mul_(5)   # the same tensor, new values: no recompile, the new values
    torch.testing.assert_close(compiled(x), x * w)


# --- checkpoint: the region is recomputed in the backward, whatever the policy ----------
@pytest.mark.parametrize("policy", [default_partition, min_cut_partition])
def test_a_checkpointed_region_is_recomputed_not_saved(policy):
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16), nn.Tanh())

    def f(x, ck):
        y = checkpoint(block, x, use_reentrant=False) if ck else block(x)
        return (y * y).sum()
    reports = {}
    for ck in (False, True):
        compiled = []

        def backend(gm, inputs, compiled=compiled):
            compiled.append(aot_graph(gm, partition_fn=policy))
            return compiled[-1]
        x = torch.randn(8, 16, requires_grad=True)
        tc.compile(lambda x, ck=ck: f(x, ck), backend=backend)(x).backward()
        want = torch.autograd.grad(f(x, ck), x)[0]
        torch.testing.assert_close(x.grad, want)
        reports[ck] = compiled[0].artifacts.partition_report
        tc.reset()
    primal_bytes = 8 * 16 * 4 + sum(p.numel() * 4 for p in block.parameters())
    assert reports[True].saved_bytes <= primal_bytes < reports[False].saved_bytes, reports
    assert len(reports[True].recomputed) > len(reports[False].recomputed)


def test_random_draws_in_a_checkpointed_region_are_saved_not_redrawn():
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
    x = torch.randn(4, 8, requires_grad=True)
    compiled = tc.compile(lambda x: checkpoint(block, x, use_reentrant=False),
                          backend="aot_eager", fullgraph=True)
    out = compiled(x)
    out.sum().backward()
    mask = (out != 0).float()   # the gradient flows through exactly the kept units
    want = (mask * 2.0) @ block[0].weight
    torch.testing.assert_close(x.grad, want)


def _save_matmuls(ctx, op, *args, **kwargs):
    from torch.utils.checkpoint import CheckpointPolicy
    return CheckpointPolicy.MUST_SAVE if op in (torch.ops.aten.addmm.default,
                                                torch.ops.aten.mm.default) \
        else CheckpointPolicy.PREFER_RECOMPUTE


@pytest.mark.parametrize("spelling", ["function", "list"])
def test_a_selective_checkpoint_policy_saves_what_it_names(spelling):
    """``context_fn=partial(create_selective_checkpoint_contexts, policy)``: the policy,
    asked about each ATen op as eager asks it, keeps the matmuls saved; the rest of the
    region is recomputed. One graph, right gradients, and a partition between no
    checkpoint and a plain one."""
    from torch.utils.checkpoint import create_selective_checkpoint_contexts
    policy = _save_matmuls if spelling == "function" else \
        [torch.ops.aten.addmm.default, torch.ops.aten.mm.default]
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16), nn.Tanh())
    contexts = functools.partial(create_selective_checkpoint_contexts, policy)

    def f(x, how):
        y = block(x) if how == "none" else \
            checkpoint(block, x, use_reentrant=False) if how == "plain" else \
            checkpoint(block, x, use_reentrant=False, context_fn=contexts)
        return (y * y).sum()
    reports = {}
    for how in ("none", "plain", "selective"):
        compiled = []

        def backend(gm, inputs, compiled=compiled):
            compiled.append(aot_graph(gm, partition_fn=default_partition))
            return compiled[-1]
        x = torch.randn(8, 16, requires_grad=True)
        explained = tc.explain(lambda x, how=how: f(x, how))(x)
        assert (explained.graph_count, explained.break_reasons) == (1, [])
        tc.reset()
        tc.compile(lambda x, how=how: f(x, how), backend=backend)(x).backward()
        want = torch.autograd.grad(f(x, how), x)[0]
        torch.testing.assert_close(x.grad, want)
        reports[how] = compiled[0].artifacts.partition_report
        tc.reset()
    saved = {how: r.saved_bytes for how, r in reports.items()}
    assert saved["plain"] < saved["selective"] < saved["none"], saved
    recomputed = {how: len(r.recomputed) for how, r in reports.items()}
    assert recomputed["none"] < recomputed["selective"] < recomputed["plain"], recomputed


def test_another_context_fn_is_a_break():
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    def fn(x):
        return checkpoint(torch.sin, x, use_reentrant=False,
                          context_fn=lambda: create_selective_checkpoint_contexts(_save_matmuls))
    explained = tc.explain(fn)(torch.randn(3, requires_grad=True))
    assert any("context_fn" in r.reason for r in explained.break_reasons)


def test_functional_call_with_a_name_the_module_lacks_is_a_break():
    model = _mlp()

    def fn(x):
        return functional_call(model, {"nope": x}, (x,))
    explained = tc.explain(fn)(torch.randn(2, 4))
    assert any("does not have" in r.reason for r in explained.break_reasons)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_reentrant_checkpoint_with_an_input_that_requires_grad(backend):
    model = _mlp()
    x = torch.randn(2, 4, requires_grad=True)

    def fn(x):
        return checkpoint(model, x, use_reentrant=True).sum()
    fn(x).backward()   # (reentrant checkpoint refuses autograd.grad: backward() it is)
    want = [x.grad] + [p.grad for p in model.parameters()]
    x.grad = None
    model.zero_grad()
    tc.compile(fn, backend=backend, fullgraph=True)(x).backward()
    for g, w in zip([x.grad] + [p.grad for p in model.parameters()], want):
        torch.testing.assert_close(g, w)


def test_a_reentrant_checkpoint_with_no_input_that_requires_grad_is_a_break():
    model = _mlp()
    explained = tc.explain(lambda x: checkpoint(model, x, use_reentrant=True))(
        torch.randn(2, 4))
    assert any("no input that requires grad" in r.reason for r in explained.break_reasons)


# --- flex_attention: score_mod and mask_mod traced into the graph -------------------------
# (PyTorch has no flex_attention backward on CPU: the inputs here do not require grad)
def _qkv(heads=4, kv_heads=4, length=16, dim=8):
    return (torch.randn(2, heads, length, dim), torch.randn(2, kv_heads, length, dim),
            torch.randn(2, kv_heads, length, dim))


def flex_relative_position(q, k, v):
    return flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + (i - j) * 0.1)


def flex_alibi_and_softcap(q, k, v, slopes):
    def mod(score, b, h, q_idx, kv_idx):
        return 10 * torch.tanh((score + slopes[h] * (kv_idx - q_idx)) / 10)
    return flex_attention(q, k, v, score_mod=mod, scale=0.25)


def flex_bias_table(q, k, v, bias):
    return flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + bias[b, h, i, j])


def flex_block_mask(q, k, v, block_mask):
    return flex_attention(q, k, v, block_mask=block_mask)


def flex_gqa_with_lse(q, k, v):
    out, aux = flex_attention(q, k, v, enable_gqa=True, return_aux=AuxRequest(lse=True))
    return out, aux.lse


def flex_rows_with_nothing_left(q, k, v):
    # rows 0-3 mask out every key: eager gives zeros there (and an lse of -inf)
    return flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: torch.where(
        i > 3, s, -float("inf")), return_lse=True)


def _document_causal_mask():
    docs = torch.tensor([0] * 5 + [1] * 7 + [2] * 4)

    def mask(b, h, q_idx, kv_idx):
        return (docs[q_idx] == docs[kv_idx]) & (q_idx >= kv_idx)
    return create_block_mask(mask, 2, None, 16, 16, device="cpu")


def flex_block_mask_made_inside(q, k, v, docs):
    def same_document_causal(b, h, q_idx, kv_idx):
        return (docs[q_idx] == docs[kv_idx]) & (q_idx >= kv_idx)
    block_mask = create_block_mask(same_document_causal, 2, None, 16, 16)
    return flex_attention(q, k, v, block_mask=block_mask)


FLEX_CASES = {
    "block_mask_made_inside": (flex_block_mask_made_inside, lambda: [
        *_qkv(), torch.tensor([0] * 5 + [1] * 7 + [2] * 4)]),
    "relative_position": (flex_relative_position, _qkv),
    "alibi_and_softcap": (flex_alibi_and_softcap, lambda: [*_qkv(), torch.rand(4)]),
    "bias_table": (flex_bias_table, lambda: [*_qkv(), torch.randn(2, 4, 16, 16)]),
    "document_causal_block_mask": (flex_block_mask,
                                   lambda: [*_qkv(), _document_causal_mask()]),
    "gqa_with_lse": (flex_gqa_with_lse, lambda: _qkv(heads=4, kv_heads=2)),
    "rows_with_nothing_left": (flex_rows_with_nothing_left, _qkv),
    "float64": (flex_relative_position, lambda: [t.double() for t in _qkv()]),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(FLEX_CASES))
def test_flex_attention_is_one_graph_with_eager_values(name, backend):
    check_one_graph(*FLEX_CASES[name], backend, gradients=False, rtol=1e-4, atol=1e-5)


def test_flex_attention_with_inputs_that_require_grad_raises_what_eager_raises():
    q, k, v = (t.requires_grad_() for t in _qkv())
    with pytest.raises(NotImplementedError, match="does not support backward on CPU"):
        flex_relative_position(q, k, v)
    with pytest.raises(NotImplementedError, match="does not support backward on CPU"):
        tc.compile(flex_relative_position)(q, k, v)
