"""Results PyTorch declares non-differentiable stay so after decomposition.

``native_layer_norm`` returns its mean and rstd, the batch norms their batch statistics:
values PyTorch gives no gradient (``output_differentiability`` in derivatives.yaml). A
decomposition computes them from the input like any other value, so a graph that goes on
to use one used to get a gradient through it that eager does not have -- silently wrong
gradients under the decomposing backends, found by a held-out OpInfo sweep.
"""

import pytest
import torch

import tutorcompile as tc

DECOMPOSING = ["aot_eager_decomp_partition", "inductor"]


def _layer_norm(x, w, b):
    return torch.native_layer_norm(x, [x.shape[-1]], w, b, 1e-5)


def _group_norm(x, w, b):
    n, c = x.shape[:2]
    return torch.native_group_norm(x, w, b, n, c, x[0, 0].numel(), 2, 1e-5)


def _batch_norm(x, w, b):
    return torch.native_batch_norm(x, w, b, torch.zeros(x.shape[1]), torch.ones(x.shape[1]),
                                   True, 0.1, 1e-5)


def _batch_norm_with_update(x, w, b):
    c = x.shape[1]
    return torch.ops.aten._batch_norm_with_update(x, w, b, torch.zeros(c), torch.ones(c),
                                                  0.1, 1e-5)[:3]


OPS = {"native_layer_norm": (_layer_norm, (4, 6, 8), 8),
       "native_group_norm": (_group_norm, (2, 4, 5), 4),
       "native_batch_norm": (_batch_norm, (4, 3, 5), 3),
       "_batch_norm_with_update": (_batch_norm_with_update, (4, 3, 5), 3)}


@pytest.mark.parametrize("backend", DECOMPOSING)
@pytest.mark.parametrize("name", OPS)
def test_statistics_a_graph_goes_on_using_get_no_gradient(name, backend):
    op, shape, channels = OPS[name]

    def f(x, w, b):
        out, mean, rstd = op(x, w, b)
        # the statistics feed the loss: eager differentiates only through ``out``
        return (out * 2).sum() + (mean.sum() * out).mean() + rstd.exp().sum()

    torch.manual_seed(0)
    x = torch.randn(shape, requires_grad=True)
    w = torch.randn(channels, requires_grad=True)
    b = torch.randn(channels, requires_grad=True)
    want = torch.autograd.grad(f(x, w, b), (x, w, b))
    tc.reset()
    got = torch.autograd.grad(tc.compile(f, backend=backend, fullgraph=True)(x, w, b),
                              (x, w, b))
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", DECOMPOSING)
def test_returned_statistics_do_not_require_grad_where_eagers_do_not(backend):
    x = torch.randn(4, 6, 8, requires_grad=True)
    w, b = torch.randn(8, requires_grad=True), torch.randn(8, requires_grad=True)
    tc.reset()
    got = tc.compile(_layer_norm, backend=backend)(x, w, b)
    want = _layer_norm(x, w, b)
    assert [t.requires_grad for t in got] == [t.requires_grad for t in want] == \
        [True, False, False]


@pytest.mark.parametrize("backend", DECOMPOSING)
def test_results_that_are_differentiable_keep_their_gradients(backend):
    """var_mean's and aminmax's results are all differentiable: nothing is cut."""
    def f(x):
        var, mean = torch.var_mean(x, dim=1)
        lo, hi = torch.aminmax(x, dim=0)
        return (var * mean).sum() + (lo * hi).sum()

    x = torch.randn(5, 7, requires_grad=True)
    want, = torch.autograd.grad(f(x), x)
    tc.reset()
    got, = torch.autograd.grad(tc.compile(f, backend=backend, fullgraph=True)(x), x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


class _WithPooler(torch.nn.Module):
    """A body and a pooler, as a transformers model returns both: a loss of the first
    output alone leaves the pooler without gradients."""

    def __init__(self):
        super().__init__()
        self.body, self.pooler = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.body(x)
        return h, self.pooler(h[:, 0])


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_inputs_no_computed_gradient_reaches_get_none_as_in_eager(backend):
    """Eager leaves ``.grad`` None where no gradient arrives; a compiled graph gave zeros --
    and an optimizer steps a parameter with a zero gradient (weight decay, momentum) where
    it skips one with None. Three ways in: an output the loss does not use (a pooler), a
    tensor read for its dtype only (``x.to(other)``), and a tensor an earlier call's graph
    made, passed to this one unused (whose graph the engine then re-entered after its
    backward had freed it: "backward through the graph a second time") -- the last as
    monai's DynUNet does it, a list entry overwritten by a child module."""
    torch.manual_seed(0)
    model = _WithPooler()
    compiled = tc.compile(model, backend=backend)
    x = torch.randn(2, 3, 4)
    compiled(x)[0].sum().backward()
    assert model.pooler.weight.grad is None and model.pooler.bias.grad is None
    expected = model.body.weight.grad.clone()
    model.zero_grad(set_to_none=True)
    model(x)[0].sum().backward()
    torch.testing.assert_close(expected, model.body.weight.grad)

    w = torch.nn.Parameter(torch.randn(4, 8))
    other = torch.randn(4, 8, requires_grad=True)
    out = tc.compile(lambda t: (w * 2).to(t), backend=backend)(other)
    assert torch.autograd.grad(out.sum(), [other], allow_unused=True) == (None,)

    state = [torch.zeros(1)]

    def step(x):
        unused = state[0]                  # an input of the graph, made by the last call
        state[0] = x * 2
        return x + 1 + 0 * unused.detach()
    compiled_step = tc.compile(step, backend=backend)
    for _ in range(2):
        x = torch.randn(3, requires_grad=True)
        compiled_step(x).sum().backward()
        torch.testing.assert_close(x.grad, torch.ones(3))
    tc.reset()

    parent = _SharesAList()     # (monai's DynUNet: the list entry a child overwrites)
    compiled_parent = tc.compile(parent, backend=backend)
    for _ in range(3):
        x = torch.randn(2, 4)
        compiled_parent(x).sum().backward()
        got = parent.child.lin.weight.grad.clone()
        parent.zero_grad(set_to_none=True)
        parent(x).sum().backward()
        torch.testing.assert_close(got, parent.child.lin.weight.grad)
        parent.zero_grad(set_to_none=True)
    tc.reset()


class _Child(torch.nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.heads, self.lin = heads, torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        self.heads[0] = y * 2     # overwrites the last call's entry, which it never reads
        return y


class _SharesAList(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = [torch.zeros(1)]
        self.child = _Child(self.heads)

    def forward(self, x):
        return torch.stack([self.child(x), *self.heads], 1)


def _through_integers(x, m):
    """Floating results of calls that read only integer or bool tensors, beside calls that
    eager differentiates although their prims go through comparisons (sign, ``where``)."""
    return ((x > 0).float(), torch.argmax(x, -1).float() + 0.5, m.to(x.dtype) * -1e4,
            torch.cummax(x, 0)[1] + 0.5, torch.sign(x), (x > 0).float() * x,
            torch.where(m, x, 0.0), torch.nn.functional.one_hot(m.long(), 2).float())


@pytest.mark.parametrize("backend", ["aot_eager", *DECOMPOSING])
def test_results_computed_from_integers_do_not_require_grad(backend):
    """Autograd decides per call: a result requires grad only when a floating input does.
    Decomposed to prims, ``(x > 0).float()`` looked like a function of ``x``: the compiled
    Function returned it requiring grad, and ``autograd.grad`` of it said "not used in the
    graph" where eager says "does not require grad"."""
    torch.manual_seed(0)
    x = torch.randn(3, 4, requires_grad=True)
    m = torch.rand(3, 4) > 0.5
    want = _through_integers(x, m)
    tc.reset()
    got = tc.compile(_through_integers, backend=backend, fullgraph=True)(x, m)
    assert [t.requires_grad for t in got] == [t.requires_grad for t in want] == \
        [False, False, False, False, True, True, True, False]
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)
    differentiable = [4, 5, 6]
    grads = [torch.autograd.grad(sum(r[i].sum() for i in differentiable), x)[0]
             for r in (got, want)]
    torch.testing.assert_close(*grads)
    with pytest.raises(RuntimeError, match="does not require grad"):
        torch.autograd.grad(got[0].sum(), x)
