"""Products and running extremes in log2(n) steps: prod, cumprod, cummax, cummin.

Our reductions are ``sum`` and ``amax``; a product is neither, and ``exp(sum(log|x|))``
would not do: its gradient at a zero is ``0 * inf``. Instead these are written with the
multiply and compare prims and a logarithmic number of steps, each a pointwise op on
slices (views), so values and gradients come from the ``mul``/``where`` rules exactly:

* a **tree product** (``prod``): multiply the first half by the second half, and again,
  ``ceil(log2 n)`` times -- the gradient of each factor is the product of all the others,
  zeros included (what PyTorch's ``prod_backward`` computes with special cases);
* an **inclusive scan** (Hillis and Steele, 1986): after step ``k`` every position holds the
  combination of the ``2^k`` elements ending at it, ``x[i] = x[i - 2^k] (+) x[i]``, the
  shifted operand padded with the identity. ``cumprod`` scans with ``mul``; ``cummax`` and
  ``cummin`` scan (value, index) pairs with PyTorch's rule -- the later element wins a tie,
  a NaN wins and stays -- and then ``gather`` the values at the indices, so the gradient
  goes to the index PyTorch reports.

Mirrors: torch/_refs/__init__.py (``prod``), torch/_inductor/lowering.py (``cumprod``,
``cummax`` as ``ir.Scan`` -- the same combine functions, there run as a loop).
"""

from __future__ import annotations

import math

import torch

from ...ops import ops
from ...ops.table import normalize_dim
from .helpers import _floating_only, positions
from .registry import DECOMPOSITIONS, _both, _cast, _is_t, register_decomposition


def _pad_before(x, d, k, value):
    """``x`` shifted ``k`` places along ``d``: ``k`` copies of ``value``, then ``x``'s first
    ``n - k``."""
    shape = list(x.shape)
    shape[d] = k
    fill = ops.full(tuple(shape), value, dtype=x.dtype, device=x.device)
    return ops.cat([fill, ops.slice(x, d, 0, x.shape[d] - k, 1)], d)


def _scan(values, d, combine, identities):
    """Inclusive scan of the tuple ``values`` along ``d``: ``combine(earlier, later)``."""
    n, k = values[0].shape[d], 1
    while k < n:
        earlier = tuple(_pad_before(v, d, k, e) for v, e in zip(values, identities))
        values = combine(earlier, values)
        k *= 2
    return values


def _scan_dim(a, dim):
    if not isinstance(dim, int):
        raise NotImplementedError("a named dimension")
    if len(a.shape) == 0:
        return None
    d = normalize_dim(dim, len(a.shape))
    if not isinstance(a.shape[d], int) or a.shape[d] == 0:
        raise NotImplementedError("an empty or symbolic dimension")
    return d


@register_decomposition(*_both("cumprod"))
def cumprod(a, dim, *, dtype=None):
    a = _floating_only(a if dtype is None else _cast(a, dtype))
    d = _scan_dim(a, dim)
    if d is None:
        return ops.mul(a, 1.0)
    return _scan((a,), d, lambda e, x: (ops.mul(e[0], x[0]),), (1.0,))[0]


def _running_extreme(a, dim, largest):
    a = _floating_only(a)
    d = _scan_dim(a, dim)
    if d is None:
        return ops.mul(a, 1.0), ops.full((), 0, dtype=torch.int64, device=a.device)
    index = ops.expand(positions(a, d), tuple(a.shape))

    def combine(earlier, later):
        (ev, ei), (lv, li) = earlier, later
        beats = ops.ge(lv, ev) if largest else ops.le(lv, ev)
        later_wins = ops.logical_or(ops.ne(lv, lv), ops.logical_and(ops.eq(ev, ev), beats))
        return ops.where(later_wins, lv, ev), ops.where(later_wins, li, ei)
    worst = -math.inf if largest else math.inf
    _, index = _scan((a, index), d, combine, (worst, 0))
    return DECOMPOSITIONS[torch.gather](a, d, index), index


@register_decomposition(*_both("cummax"))
def cummax(a, dim):
    return _running_extreme(a, dim, largest=True)


@register_decomposition(*_both("cummin"))
def cummin(a, dim):
    return _running_extreme(a, dim, largest=False)


def _tree_product(x, d):
    """The product along ``d`` (kept, size 1): halves multiplied until one is left."""
    while x.shape[d] > 1:
        n = x.shape[d]
        if n % 2:
            shape = list(x.shape)
            shape[d] = 1
            x = ops.cat([x, ops.full(tuple(shape), 1.0, dtype=x.dtype, device=x.device)], d)
            n += 1
        x = ops.mul(ops.slice(x, d, 0, n // 2, 1), ops.slice(x, d, n // 2, n, 1))
    return x


@register_decomposition(*_both("prod"))
def prod(a, dim=None, keepdim=False, *, dtype=None):
    if not _is_t(a):
        raise NotImplementedError("not a tensor")
    a = _floating_only(a if dtype is None else _cast(a, dtype))
    if 0 in tuple(a.shape) or not all(isinstance(s, int) for s in a.shape):
        raise NotImplementedError("an empty or symbolically sized tensor")
    if dim is None:
        return ops.reshape(_tree_product(ops.reshape(a, (-1,)), 0), ())
    if _scan_dim(a, dim) is None:
        return ops.mul(a, 1.0)
    return product(a, (dim,), keepdim)


def product(a, dims, keepdim):
    """The product over ``dims`` of a floating-point tensor (not empty, not 0-d)."""
    dims = tuple(sorted({normalize_dim(d, len(a.shape)) for d in dims}))
    for d in dims:
        a = _tree_product(a, d)
    return a if keepdim or not dims else ops.squeeze(a, dims)
