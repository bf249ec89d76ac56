"""Randomness: dropout and the random fills, with their draws made by extern ops.

A compiled model must draw exactly what the eager model draws under the same
``torch.manual_seed``, and its backward must not draw again. So a random op never becomes
prims: its mask (or its fill) is one extern call of PyTorch's own sampler, with no tensor
input, that the graph records once -- the forward multiplies by it, the backward by the
saved copy, and the min-cut partitioner never recomputes it.

Key pieces: ``dropout_mask`` (the one random op of ``F.dropout``, eager's own draws),
``dropout_reference`` (what a compiled dropout computes, eagerly), the rules of the other
dropouts (feature and alpha dropout: masks from the eager function run on ones),
``rand_like``/``randn_like`` as factories, ``random_fill_like``/``random_fill`` (an in-place
random fill, functionalized), and ``random_state``/``with_random_state`` (a random extern
call with tensor inputs replays its draws in the backward).

Mirrors: torch/_decomp/decompositions_for_rng.py and torch/_prims/rng_prims.py (the
generator state saved beside a random op so that a recomputation draws the same numbers).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ...ops import make_meta, ops
from ...ops.table import contiguous_strides
from .registry import extern_call, register_decomposition


def dropout_mask(shape, p, dtype, device, stride=None):
    """Keep each element with probability ``1 - p``: a float mask of 0s and 1s.

    The mask is eager's own: ``F.dropout`` run on ones of the input's shape, dtype, device and
    layout (``stride``, where eager's input was a dense permutation such as a transpose: the
    sampler fills memory in order) draws exactly what ``F.dropout(x, p)`` draws for ``x``
    (the same generator, the same sampler: ``bernoulli_`` on a CPU, the fused kernel on a
    GPU). The mask comes back contiguous. So under the same
    ``torch.manual_seed`` the compiled model drops what the eager model drops, and the
    backward multiplies by this saved mask instead of drawing again.
    :func:`dropout_reference` recomputes the same result eagerly.

    On a CPU, ``F.dropout`` is ATen's ``_dropout_impl``: one ``bernoulli_(1 - p)`` into an
    empty tensor, then a divide and a multiply. The mask is that one draw, taken directly
    (one pass over memory instead of five).
    """
    shape = tuple(shape)
    stride = contiguous_strides(shape) if stride is None else tuple(stride)
    empty = torch.empty_strided(shape, stride, dtype=dtype, device=device)
    if torch.device(device).type == "cpu":
        return empty.bernoulli_(1.0 - p).contiguous()
    return (F.dropout(empty.fill_(1), p, training=True) != 0).to(dtype).contiguous()


def _eager_layout(x) -> tuple[int, ...] | None:
    """The strides eager gave ``x`` when they are a dense permutation other than contiguous
    (``x.transpose(0, 1)`` of a contiguous tensor), else None: the layout ``empty_like(x)``
    keeps, and so the order in which a sampler run on it draws."""
    stride = tuple(x.stride()) if isinstance(x, torch.Tensor) else \
        x.node.meta.get("eager_stride")
    shape = tuple(x.shape)
    if stride is None or not all(isinstance(v, int) for v in (*shape, *stride)) or \
            len(stride) != len(shape) or stride == contiguous_strides(shape):
        return None
    order = sorted(range(len(shape)), key=lambda d: (stride[d], shape[d]))
    step = 1
    for d in order:  # innermost first: each dimension's stride is the product of those inside
        if shape[d] != 1 and stride[d] != step:
            return None
        step *= shape[d]
    return stride


def dropout_reference(x: torch.Tensor, p: float) -> torch.Tensor:
    """What a compiled ``F.dropout(x, p, training=True)`` computes (same RNG draws)."""
    return x * dropout_mask(x.shape, p, x.dtype, x.device, _eager_layout(x)) / (1 - p)


@register_decomposition(F.dropout, "method:dropout", torch.dropout)
def dropout(x, p=0.5, training=True, inplace=False):
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return ops.mul(x, 0.0)
    layout = _eager_layout(x)
    mask = extern_call(dropout_mask, (tuple(x.shape), p, x.dtype, x.device)
                       + ((layout,) if layout is not None else ()), {},
                       meta=make_meta(x.shape, x.dtype, x.device))
    return ops.mul(ops.mul(x, mask), 1.0 / (1.0 - p))


# The other dropouts draw their own way (one number per channel; alpha dropout's affine
# noise). Their masks come from the eager function itself, run on ones: the same generator
# and the same draws as eager, and no tensor input -- so the backward reuses the saved mask
# (an extern of the input would be run again for its gradient, drawing new numbers).

def eager_dropout_mask(fn, shape, p, dtype, device):
    """The keep-mask (0s and 1s) that ``fn(x, p, True)`` draws for an ``x`` like this one."""
    return (fn(torch.ones(tuple(shape), dtype=dtype, device=device), p, True) != 0).to(dtype)


ALPHA = 1.7580993408473766
"""SELU's alpha times its scale: the value alpha dropout drops to (before its affine fix)."""


def eager_alpha_dropout_mask(fn, shape, p, dtype, device):
    """The keep-mask that ``fn(x, p, True)`` (alpha dropout) draws: on ones it gives
    ``a + ALPHA·a·p`` where it keeps and ``ALPHA·a·(p - 1)`` where it drops."""
    a = 1.0 / math.sqrt((ALPHA * ALPHA * p + 1) * (1 - p))
    out = fn(torch.ones(tuple(shape), dtype=dtype, device=device), p, True)
    return (out > ALPHA * a * p).to(dtype)


def _random_mask(mask_fn, fn, x, p):
    return extern_call(mask_fn, (fn, tuple(x.shape), p, x.dtype, x.device), {},
                       meta=make_meta(x.shape, x.dtype, x.device))


def _feature_dropout_rule(fn):
    def rule(x, p=0.5, training=True, inplace=False):
        if not training or p == 0.0:
            return x
        if p == 1.0:
            return ops.mul(x, 0.0)
        mask = _random_mask(eager_dropout_mask, fn, x, p)
        return ops.mul(ops.mul(x, mask), 1.0 / (1.0 - p))
    return rule


def _alpha_dropout_rule(fn):
    def rule(x, p=0.5, training=False, inplace=False):
        """``x·(m·a) + ((m - 1)·ALPHA·a + ALPHA·a·p)``, as ATen's ``_dropout_impl``."""
        if not training or p == 0.0:
            return x
        if p == 1.0:
            return ops.mul(x, 0.0)
        a = 1.0 / math.sqrt((ALPHA * ALPHA * p + 1) * (1 - p))
        mask = _random_mask(eager_alpha_dropout_mask, fn, x, p)
        shift = ops.add(ops.mul(ops.sub(mask, 1.0), ALPHA * a), ALPHA * a * p)
        return ops.add(ops.mul(x, ops.mul(mask, a)), shift)
    return rule


for _fn in (F.dropout1d, F.dropout2d, F.dropout3d, torch.feature_dropout):
    register_decomposition(_fn)(_feature_dropout_rule(_fn))
for _fn in (F.alpha_dropout, F.feature_alpha_dropout, torch.alpha_dropout,
            torch.feature_alpha_dropout):
    register_decomposition(_fn)(_alpha_dropout_rule(_fn))


def _random_like_rule(factory):
    def rule(x, *, dtype=None, layout=None, device=None, pin_memory=None,
             requires_grad=False, memory_format=None):
        """``torch.rand_like(x)`` as ``torch.rand(x.shape)``: the same draws, and no tensor
        input (the backward of an extern of ``x`` would run it again and draw again)."""
        dtype = dtype or x.dtype
        device = device or x.device
        return extern_call(factory, (tuple(x.shape),), {"dtype": dtype, "device": device},
                           meta=make_meta(x.shape, dtype, device))
    return rule


register_decomposition(torch.rand_like)(_random_like_rule(torch.rand))
register_decomposition(torch.randn_like)(_random_like_rule(torch.randn))


def random_state(device) -> torch.Tensor:
    """The state of ``device``'s default generator now (a uint8 tensor), saved so that a
    random call can be run again, drawing the same numbers (see :func:`with_random_state`)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_rng_state(device)
    return torch.get_rng_state()


def with_random_state(fn, state, *args, replay: bool = False, **kwargs):
    """``fn(*args, **kwargs)``, a PyTorch call that draws random numbers and has tensor
    inputs (``F.rrelu`` in training, ``torch.normal(mean, std)``), with the generator state
    ``random_state`` saved just before it.

    In the forward ``state`` is the generator's state anyway: this is the call. The
    backward of an extern runs the call again to ask PyTorch for its gradient
    (``extern_backward``, ``replay=True``): that replay starts from ``state``, so it draws
    what the forward drew, and leaves the generator where it was, as eager's backward
    (which draws nothing) does -- what activation checkpointing's ``preserve_rng_state``
    does in PyTorch."""
    if not replay:
        return fn(*args, **kwargs)
    cuda = next((a.device for a in args if isinstance(a, torch.Tensor) and a.is_cuda), None)
    with torch.random.fork_rng(devices=[cuda] if cuda is not None else []):
        if cuda is not None:
            torch.cuda.set_rng_state(state, cuda)
        else:
            torch.set_rng_state(state)
        return fn(*args, **kwargs)


RANDOM_FILLS = ("uniform_", "normal_", "exponential_", "geometric_", "cauchy_", "log_normal_",
                "random_")
"""In-place methods that overwrite a tensor with random draws (and ``bernoulli_`` with a
probability that is a number)."""


def random_fill_like(x, method: str, *args, **kwargs):
    """What ``x.<method>(*args)`` (an in-place random fill, ``x.uniform_(-1, 1)``) leaves in
    ``x``: the same sampler on a new tensor of ``x``'s shape, dtype and device, so the same
    draws as eager. Functionalization writes the fill as this."""
    return random_fill(tuple(x.shape), x.dtype, x.device, method, *args, **kwargs)


def random_fill(shape, dtype, device, method: str, *args, **kwargs):
    """``torch.empty(shape).<method>(*args)``: the extern a random fill becomes. It has no
    tensor input, so no backward re-runs it (that would draw again)."""
    return getattr(torch.empty(shape, dtype=dtype, device=device), method)(*args, **kwargs)


@register_decomposition(random_fill_like)
def _random_fill_rule(x, method, *args, **kwargs):
    return extern_call(random_fill, (tuple(x.shape), x.dtype, x.device, method, *args), kwargs,
                       meta=make_meta(x.shape, x.dtype, x.device))
