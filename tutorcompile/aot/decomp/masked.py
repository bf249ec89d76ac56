"""Decompositions of ``torch.masked``: a reduction or normalisation over the elements a mask
keeps.

Every masked op of PyTorch (``torch.masked.sum``, ``amax``, ``softmax``, ``norm``...) is the
unmasked op applied after ``where(mask, input, identity)`` -- the identity being the value
that does not change the result (0 for a sum, -inf for a max) -- and so it is here: the mask
is broadcast to the input, the masked-out elements become the identity, and the unmasked
op's own decomposition does the rest. ``mean``, ``var`` and ``std`` divide by the count of
kept elements instead (a row with nothing kept gives ``nan``, as PyTorch's does). Only
strided tensors take part; a rule declines (``NotImplementedError``) what it does not cover
-- integer inputs to a max, ``prod``, ``median`` -- which then stays a PyTorch call.

Mirrors: torch/masked/_ops.py (``_combine_input_and_mask``, ``_reduction_identity``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.masked import _ops as masked

from ...ops import ops
from ...ops.table import normalize_dim
from .registry import DECOMPOSITIONS, _cast, _is_t, register_decomposition
from .scan import product


def _canonical_dims(dim, ndim: int) -> tuple[int, ...]:
    """``torch.masked``'s reading of ``dim``: None or () is every dimension."""
    if dim is None or dim == ():
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(sorted({normalize_dim(d, max(ndim, 1)) for d in dims}))


def _input_mask(a, mask):
    """The mask as a bool tensor of ``a``'s shape (None: everything is kept)."""
    if mask is None:
        return None
    if not _is_t(mask) or len(mask.shape) > len(a.shape):
        raise NotImplementedError("a mask that does not broadcast to the input")
    if mask.dtype != torch.bool:
        mask = ops.ne(mask, 0)
    if tuple(mask.shape) != tuple(a.shape):
        mask = ops.expand(mask, tuple(a.shape))
    return mask


def _float_input(a):
    if not _is_t(a) or not a.dtype.is_floating_point:
        raise NotImplementedError("a masked op on a non-floating-point input")
    return a


def _combine(a, mask, identity: float):
    """``where(mask, a, identity)``: the masked-out elements no longer count."""
    mask = _input_mask(a, mask)
    return a if mask is None else ops.where(mask, a, identity)


@register_decomposition(masked.sum)
def masked_sum(a, dim=None, *, keepdim=False, dtype=None, mask=None):
    if dtype is None:
        dtype = a.dtype if a.dtype.is_floating_point or a.dtype == torch.int64 else torch.int64
    return DECOMPOSITIONS[torch.sum](_combine(a, mask, 0), _canonical_dims(dim, len(a.shape)),
                                     bool(keepdim), dtype=dtype)


@register_decomposition(masked.cumsum)
def masked_cumsum(a, dim, *, dtype=None, mask=None):
    dtype = a.dtype if dtype is None else dtype
    d = _canonical_dims(dim, len(a.shape))[0]
    return _cast(DECOMPOSITIONS[torch.cumsum](_combine(a, mask, 0), d, dtype=dtype), dtype)


@register_decomposition(masked.prod)
def masked_prod(a, dim=None, *, keepdim=False, dtype=None, mask=None):
    a = _float_input(a)
    if 0 in tuple(a.shape):
        raise NotImplementedError("an empty input")
    kept = _combine(a, mask, 1.0)
    out = product(kept, _canonical_dims(dim, len(a.shape)), bool(keepdim)) if a.shape \
        else ops.mul(kept, 1.0)
    return _cast(out, a.dtype if dtype is None else dtype)


@register_decomposition(masked.cumprod)
def masked_cumprod(a, dim, *, dtype=None, mask=None):
    a = _float_input(a)
    d = _canonical_dims(dim, len(a.shape))[0]
    return DECOMPOSITIONS[torch.cumprod](_combine(a, mask, 1.0), d, dtype=dtype)


def _extreme(reduce, identity: float):
    def rule(a, dim=None, *, keepdim=False, dtype=None, mask=None):
        a = _float_input(a)
        out = DECOMPOSITIONS[reduce](_combine(a, mask, identity),
                                     _canonical_dims(dim, len(a.shape)), bool(keepdim))
        return _cast(out, a.dtype if dtype is None else dtype)
    return rule


register_decomposition(masked.amax)(_extreme(torch.amax, -math.inf))
register_decomposition(masked.amin)(_extreme(torch.amin, math.inf))


def _arg_extreme(reduce, identity: float):
    def rule(a, dim=None, *, keepdim=False, dtype=None, mask=None):
        a = _float_input(a)
        out = DECOMPOSITIONS[reduce](_combine(a, mask, identity), dim, bool(keepdim))
        return _cast(out, a.dtype if dtype is None else dtype)  # as PyTorch: input's dtype
    return rule


register_decomposition(masked.argmax)(_arg_extreme(torch.argmax, -math.inf))
register_decomposition(masked.argmin)(_arg_extreme(torch.argmin, math.inf))


def _count(a, mask, dims, keepdim):
    """How many elements each output keeps (int64, as PyTorch counts them)."""
    mask = _input_mask(a, mask)
    if mask is None:
        shape = tuple(1 if d in dims else s for d, s in enumerate(a.shape)) if keepdim \
            else tuple(s for d, s in enumerate(a.shape) if d not in dims)
        n = math.prod(a.shape[d] for d in dims if d < len(a.shape))  # (a 0-d input's dim 0)
        return ops.full(shape, n, dtype=torch.int64, device=a.device)
    return ops.sum(ops.convert_element_type(mask, torch.int64), dims, keepdim=keepdim)


@register_decomposition(masked.mean)
def masked_mean(a, dim=None, *, keepdim=False, dtype=None, mask=None):
    dtype = _float_input(a).dtype if dtype is None else dtype
    dims = _canonical_dims(dim, len(a.shape))
    total = masked_sum(a, dims, keepdim=keepdim, dtype=dtype, mask=mask)
    return ops.div(total, _count(a, mask, dims, bool(keepdim)))


def _std_var(a, dim, unbiased, correction, keepdim, dtype, mask, take_sqrt):
    a = _float_input(a)
    if correction is None:
        correction = 0.0 if unbiased is False else 1.0
    dtype = a.dtype if dtype is None else dtype
    dims = _canonical_dims(dim, len(a.shape))
    count = _count(a, mask, dims, True)
    mean = ops.div(masked_sum(a, dims, keepdim=True, dtype=dtype, mask=mask), count)
    x = ops.sub(a, mean)
    total = masked_sum(ops.mul(x, x), dims, keepdim=keepdim, dtype=dtype, mask=mask)
    if not keepdim:
        count = ops.reshape(count, tuple(total.shape))
    count = ops.convert_element_type(count, dtype)
    if correction != 0:
        count = ops.maximum(ops.sub(count, float(correction)), 0.0)
    out = _cast(ops.div(total, count), dtype)
    return ops.sqrt(out) if take_sqrt else out


@register_decomposition(masked.var)
def masked_var(a, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
               mask=None):
    return _std_var(a, dim, unbiased, correction, keepdim, dtype, mask, take_sqrt=False)


@register_decomposition(masked.std)
def masked_std(a, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
               mask=None):
    return _std_var(a, dim, unbiased, correction, keepdim, dtype, mask, take_sqrt=True)


@register_decomposition(masked.norm)
def masked_norm(a, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):  # noqa: A002
    a = _float_input(a)
    identity = math.inf if ord == -math.inf else 0.0
    return DECOMPOSITIONS[torch.linalg.vector_norm](
        _combine(a, mask, identity), ord, _canonical_dims(dim, len(a.shape)), bool(keepdim),
        dtype=a.dtype if dtype is None else dtype)


@register_decomposition(masked.logsumexp)
def masked_logsumexp(a, dim=None, *, keepdim=False, dtype=None, mask=None):
    a = _float_input(a)
    out = DECOMPOSITIONS[torch.logsumexp](_combine(a, mask, -math.inf),
                                          _canonical_dims(dim, len(a.shape)), keepdim)
    return _cast(out, a.dtype if dtype is None else dtype)


@register_decomposition(masked.logaddexp)
def masked_logaddexp(a, other, *, dtype=None, input_mask=None, other_mask=None):
    a, other = _float_input(a), _float_input(other)
    out = DECOMPOSITIONS[torch.logaddexp](_combine(a, input_mask, -math.inf),
                                          _combine(other, other_mask, -math.inf))
    return _cast(out, a.dtype if dtype is None else dtype)


def _normalisation(fn, identity: float):
    def rule(a, dim, *, dtype=None, mask=None):
        a = _float_input(a)
        d = _canonical_dims(dim, len(a.shape))[0]
        return DECOMPOSITIONS[fn](_combine(a, mask, identity), d,
                                  dtype=a.dtype if dtype is None else dtype)
    return rule


register_decomposition(masked.softmax)(_normalisation(F.softmax, -math.inf))
register_decomposition(masked.log_softmax)(_normalisation(F.log_softmax, -math.inf))
register_decomposition(masked.softmin)(_normalisation(F.softmin, math.inf))


@register_decomposition(masked.normalize)
def masked_normalize(a, ord, dim, *, eps=1e-12, dtype=None, mask=None):  # noqa: A002
    a = _float_input(a)
    dtype = a.dtype if dtype is None else dtype
    norm = masked_norm(a, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    return ops.div(_combine(a, mask, 0), ops.maximum(norm, eps))


@register_decomposition(masked.median)
def masked_median(a, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """``nanmedian`` of the input with the masked-out elements made NaN (a fully masked row
    gives NaN), as torch.masked does."""
    a = _float_input(a)
    if dtype is not None and dtype != a.dtype:
        raise NotImplementedError("another result dtype")
    d = _canonical_dims(dim, len(a.shape))[0] if len(a.shape) else 0
    values = DECOMPOSITIONS[torch.nanmedian](_combine(a, mask, math.nan), d, bool(keepdim))
    return values[0]
