"""Stage 4: ``torch.masked`` reductions and normalisations decompose to prims.

Each masked op is ``where(mask, input, identity)`` followed by the unmasked op (or a
division by the count of kept elements for mean/var/std); compiled with the inductor they
become generated kernels. Values and gradients are compared with eager PyTorch, with a mask
that broadcasts and one row masked out entirely.
"""

import math

import pytest
import torch

import tutorcompile as tc
from tutorcompile.aot.decompositions import DECOMPOSITIONS

pytestmark = pytest.mark.stage4

masked = torch.masked

OPS = {
    "sum": lambda x, m: masked.sum(x, 1, mask=m),
    "amax": lambda x, m: masked.amax(x, (0, 1), keepdim=True, mask=m),
    "amin": lambda x, m: masked.amin(x, 1, mask=m),
    "mean": lambda x, m: masked.mean(x, 1, mask=m),
    "var": lambda x, m: masked.var(x, 1, unbiased=False, mask=m),
    "std": lambda x, m: masked.std(x, 0, mask=m),
    "softmax": lambda x, m: masked.softmax(x, 1, mask=m),
    "log_softmax": lambda x, m: masked.log_softmax(x, 1, mask=m),
    "softmin": lambda x, m: masked.softmin(x, 0, mask=m),
    "logsumexp": lambda x, m: masked.logsumexp(x, 1, mask=m),
    "normalize": lambda x, m: masked.normalize(x, 2.0, 1, mask=m),
    "norm": lambda x, m: masked.norm(x, 2.0, 1, mask=m),
    "cumsum": lambda x, m: masked.cumsum(x, 1, mask=m),
}


@pytest.mark.parametrize("name", OPS)
def test_masked_op_matches_eager(name):
    fn = OPS[name]
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    mask = torch.rand(4, 5) > 0.3
    mask[1] = False   # a row with nothing kept
    mask[2] = True
    tc.reset()
    compiled = tc.compile(fn, backend="inductor")
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    expected, got = fn(xe, mask), compiled(xc, mask)
    torch.testing.assert_close(got, expected, equal_nan=True)
    finite = torch.isfinite(expected)
    cotangent = torch.where(finite, torch.randn_like(expected), 0.0)
    (ge,) = torch.autograd.grad(expected, xe, cotangent)
    (gc,) = torch.autograd.grad(got, xc, cotangent)
    torch.testing.assert_close(gc, ge, equal_nan=True)


def test_masked_rules_are_registered_for_torch_masked():
    for name in ("sum", "amax", "amin", "argmax", "argmin", "mean", "var", "std", "norm",
                 "softmax", "log_softmax", "softmin", "normalize", "logsumexp", "logaddexp",
                 "cumsum"):
        assert getattr(masked, name) in DECOMPOSITIONS, name


def test_masked_mean_of_an_empty_row_is_nan():
    x, mask = torch.randn(2, 3), torch.tensor([[True, False, True], [False] * 3])
    tc.reset()
    got = tc.compile(lambda a, m: masked.mean(a, 1, mask=m), backend="inductor")(x, mask)
    assert math.isnan(got[1].item()) and torch.allclose(got[0], x[0, [0, 2]].mean())
