"""Stage 4: random numbers follow eager.

The backend ladder (eager -> aot_eager -> aot_eager_decomp_partition -> inductor) finds the
stage that is wrong only if every rung computes the same thing; with dropout in the model
that means the same random numbers. Compiled graphs draw from PyTorch's generator, in
program order, with eager's own samplers (``dropout_mask`` and friends in
``aot/decomp/rng.py``), and the backward multiplies by the saved mask instead of drawing
again. So under ``torch.manual_seed`` the outputs and gradients match eager, and the
generator ends where eager leaves it.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tutorcompile as tc
from tutorcompile.environment import probe

pytestmark = pytest.mark.stage4

BACKENDS = ["aot_eager", "aot_eager_decomp_partition", pytest.param(
    "inductor", marks=pytest.mark.skipif(not probe().has_cxx, reason="no C++ compiler"))]


def assert_same_step(got, expected, tol=1e-5):
    """A step's (output, gradients, the generator's next draws) as eager's: values and
    gradients within ``tol``, the generator exactly where eager left it."""
    torch.testing.assert_close(got[0], expected[0], rtol=tol, atol=tol / 10)
    assert len(got[1]) == len(expected[1])
    for g, e in zip(got[1], expected[1]):
        torch.testing.assert_close(g, e, rtol=tol, atol=tol)
    torch.testing.assert_close(got[2], expected[2], rtol=0, atol=0)


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3)
        self.drop2d = nn.Dropout2d(0.4)
        self.alpha = nn.AlphaDropout(0.2)
        self.feature_alpha = nn.FeatureAlphaDropout(0.3)
        self.fc = nn.Linear(6 * 4 * 4, 16)
        self.drop = nn.Dropout(0.3)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        h = self.drop2d(torch.tanh(self.conv(x)))
        h = self.feature_alpha(self.alpha(h))
        h = self.drop(torch.relu(self.fc(h.flatten(1))))
        h = F.dropout(h, 0.25, training=True)
        h = h + 0.1 * torch.rand_like(h)
        return self.head(h)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_and_rand_like_follow_eager(backend):
    torch.manual_seed(0)
    model = Noisy()
    x = torch.randn(3, 3, 6, 6)

    def step(fn):
        torch.manual_seed(1234)
        out = fn(x)
        out.square().sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        return out, grads, torch.rand(4)   # where the generator ended
    expected = step(model)
    try:
        compiled = tc.compile(model, backend=backend, fullgraph=True)
        step(compiled)                      # compile (tracing must not draw) ...
        got = step(compiled)                # ... and the cached call
    finally:
        tc.reset()
    assert_same_step(got, expected)


class Fills(nn.Module):
    """Masks and noise drawn the way library code draws them: in place into a new tensor
    (torchvision's stochastic depth: ``torch.empty(n, 1).bernoulli_(p)``; timm's DropPath:
    ``x.new_empty(shape).bernoulli_(p)``; ``empty_like(x).uniform_()``)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        h = h * torch.empty(x.shape[0], 1).bernoulli_(0.6).div_(0.6)   # no graph input
        h = h * h.new_empty(h.shape).bernoulli_(0.7)
        noise = (torch.empty_like(h).uniform_(-1, 1) + torch.empty_like(h).normal_(0, 2)
                 + torch.empty_like(h).exponential_())
        return h + 0.1 * noise * h


class StochasticDepthBlocks(nn.Module):
    """Residual blocks with torchvision's ``StochasticDepth`` (EfficientNet, ConvNeXt)."""

    def __init__(self):
        super().__init__()
        from torchvision.ops import StochasticDepth
        self.fc = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.drop = nn.ModuleList([StochasticDepth(0.5, mode) for mode in
                                   ("row", "batch", "row")])

    def forward(self, x):
        for fc, drop in zip(self.fc, self.drop):
            x = x + drop(torch.tanh(fc(x)))
        return x


def _stochastic_depth_blocks():
    pytest.importorskip("torchvision")
    return StochasticDepthBlocks()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make", [Fills, _stochastic_depth_blocks], ids=["fills", "sd"])
def test_in_place_random_fills_draw_every_call_like_eager(make, backend):
    """A random fill of a tensor with no graph input must not be computed once at compile
    time (a frozen mask), and a library function that draws must not be one opaque call
    (its backward would run it again and draw a different mask)."""
    torch.manual_seed(0)
    model = make()
    x = torch.randn(16, 4)

    def step(fn, seed):
        torch.manual_seed(seed)
        out = fn(x)
        out.square().sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        return out, grads, torch.rand(4)
    try:
        compiled = tc.compile(model, backend=backend, fullgraph=True)
        for seed in (1, 2):                 # a different seed, different masks
            expected, got = step(model, seed), step(compiled, seed)
            assert_same_step(got, expected)
    finally:
        tc.reset()


def _rrelu(x, m, s):
    return F.rrelu(x, 0.1, 0.4, training=True) * m


def _normal(x, m, s):
    return torch.normal(m, s) * x + torch.normal(m, s) * m   # two draws: not one merged


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_rrelu, _normal], ids=["rrelu", "normal"])
def test_random_calls_on_tensors_replay_their_draws_in_backward(fn, backend):
    """PyTorch runs these calls (externs) and their backward: the replay for the gradient
    starts from the generator state saved before the forward's call, so it draws the same
    numbers, and leaves the generator where eager's backward leaves it."""
    x = torch.randn(64, requires_grad=True)
    m = torch.randn(64, requires_grad=True)
    s = torch.rand(64, requires_grad=True)

    def step(f, seed):
        torch.manual_seed(seed)
        out = f(x, m, s)
        out.square().sum().backward()
        grads = [t.grad.clone() for t in (x, m, s) if t.grad is not None]
        for t in (x, m, s):
            t.grad = None
        return out, grads, torch.rand(4)
    try:
        compiled = tc.compile(fn, backend=backend, fullgraph=True)
        for seed in (1, 2):
            expected, got = step(fn, seed), step(compiled, seed)
            assert_same_step(got, expected)
    finally:
        tc.reset()


def _seeded_draws(x):
    torch.manual_seed(3)   # before any draw: made before the graph runs, no break
    return x + torch.rand(3) + torch.randn_like(x)


def _draw_then_reseed(x):
    y = x + torch.rand(3)
    torch.manual_seed(3)   # after a draw: the graph cannot split its draws around it
    return y + torch.rand(3)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_manual_seed_before_any_draw_is_one_graph_and_reseeds_every_call(backend):
    x = torch.randn(3)
    out = tc.explain(_seeded_draws)(x)
    assert (len(out.graphs), len(out.break_reasons)) == (1, 0)
    tc.reset()
    compiled = tc.compile(_seeded_draws, backend=backend, fullgraph=True)
    first = compiled(x)
    torch.manual_seed(0)
    torch.testing.assert_close(compiled(x), first)   # reseeded: the same draws
    if backend == "eager":   # the same generator calls as the program, in its order
        torch.testing.assert_close(first, _seeded_draws(x))
        after = torch.rand(2)
        compiled(x)
        torch.testing.assert_close(torch.rand(2), after)
    assert len(tc.explain(_draw_then_reseed)(x).break_reasons) == 1


def _sdpa_by_keyword(m, x):
    return F.scaled_dot_product_attention(x, x.flip(1), x, dropout_p=0.3)


def _sdpa_by_position(m, x):   # attn_mask, dropout_p, is_causal by position
    return F.scaled_dot_product_attention(x, x.flip(1), x, None, 0.3, True)


DROPS_BY_ARGUMENT = {
    # name: (module, how the function calls it); each draws only because an argument says so
    "lstm": (lambda: nn.LSTM(8, 8, num_layers=2, dropout=0.3, batch_first=True),
             lambda m, x: m(x)[0]),
    "gru": (lambda: nn.GRU(8, 8, num_layers=2, dropout=0.3), lambda m, x: m(x)[0]),
    "multihead_attention": (lambda: nn.MultiheadAttention(8, 2, dropout=0.3, batch_first=True),
                            lambda m, x: m(x, x, x)[0]),
    "multihead_attention_sdpa": (
        lambda: nn.MultiheadAttention(8, 2, dropout=0.3, batch_first=True),
        lambda m, x: m(x, x, x, need_weights=False)[0]),
    # batch_first attention hands dropout1 a transposed tensor: eager's mask is drawn in
    # that memory order
    "transformer_encoder_layer": (
        lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.2, batch_first=True),
        lambda m, x: m(x)),
    "sdpa_keyword": (nn.Identity, _sdpa_by_keyword),
    "sdpa_positional": (nn.Identity, _sdpa_by_position),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(DROPS_BY_ARGUMENT))
def test_calls_that_drop_out_by_an_argument_follow_eager(case, backend):
    """RNNs, attention and SDPA draw dropout masks only when an argument asks (``dropout_p``,
    ``dropout`` with ``train``): no random word in their names. They were taken for
    deterministic, so the backward's replay drew new masks -- gradients silently off by up
    to 7 -- and two such calls could have been merged. Now their draws follow eager's."""
    torch.manual_seed(0)
    make, call = DROPS_BY_ARGUMENT[case]
    module = make()
    x = torch.randn(2, 5, 8, requires_grad=True)

    def step(fn, seed):
        torch.manual_seed(seed)
        out = fn(x)
        grads = torch.autograd.grad(out.square().sum(), [x, *module.parameters()])
        return out, grads, torch.rand(4)
    try:
        compiled = tc.compile(lambda x: call(module, x), backend=backend)
        for seed in (1, 2):
            expected, got = step(lambda x: call(module, x), seed), step(compiled, seed)
            assert_same_step(got, expected, tol=1e-4)
    finally:
        tc.reset()


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_rows_masked_entirely_give_zeros_as_eager(backend):
    """Attention's math path softmaxes safely: a query that may see no key gets zeros (and
    zero gradients), where a plain softmax of ``-inf`` gives NaN."""
    q, k, v = (torch.randn(2, 3, 6, 4, requires_grad=True) for _ in range(3))
    mask = torch.ones(6, 6, dtype=torch.bool)
    mask[2] = False

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    try:
        out = tc.compile(f, backend=backend)(q, k, v)
        expected = f(q, k, v)
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
        assert out[:, :, 2].eq(0).all()
        got = torch.autograd.grad(out.sum(), (q, k, v))
        for g, e in zip(got, torch.autograd.grad(expected.sum(), (q, k, v))):
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
    finally:
        tc.reset()
