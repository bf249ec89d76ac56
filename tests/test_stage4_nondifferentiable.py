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
