"""Sorting by counting: sort, argsort, topk, kthvalue, median and quantile as prims.

A GPU sort is a network of compare-and-swap steps (Triton's ``tl.sort``, the bitonic sort
Inductor emits); our prims have no loop to hold one. But a sort can also be *counted*: the
position an element lands at is its **rank**, the number of elements that sort before it,

    rank[i] = #{j : x[j] < x[i]}  +  #{j < i : x[j] == x[i]}      (ties keep their order)

one comparison of every pair reduced with ``sum`` -- a single generated reduction kernel.
Reading it back is a second count: the element at sorted position ``k`` is the one whose
rank is ``k``, so ``indices[k] = sum_i i * (rank[i] == k)``; the values are then a
``gather`` of the input at those indices, so the gradient is ``gather``'s (a scatter-add of
the output gradient back to where each value came from) -- exactly PyTorch's sort backward.
Order statistics (``kthvalue``, ``median``, ``quantile``) need only one position per row:
the index of the element whose rank is that position.

NaN sorts after every number (PyTorch's order); equal elements keep their input order, which
is one of the orders PyTorch allows (its CPU sort is not stable unless asked; a tie's index
is unspecified). The work is quadratic in the length of the sorted dimension, so a rule
declines a dimension longer than ``config.sort_length_limit``, which then stays a PyTorch call.

Mirrors: torch/_refs/__init__.py (``topk``/``sort`` have no refs: Inductor lowers sort with
``ir.Sort``) and torch/_decomp/decompositions.py (``quantile`` via ``sort`` + ``gather``).
"""

from __future__ import annotations

import torch

from ...ops import GraphValue, ops
from ...ops.table import normalize_dim
from .. import config
from .helpers import _floating_only, positions
from .registry import DECOMPOSITIONS, _both, _is_t, register_decomposition


def realized(a):
    """``a``, marked to be kept in memory for its readers (``ComputedBuffer.realized``):
    every rank compares an element with all the others, as two reads of ``a`` at two
    positions, so both must be the same bits. Computed again inside each reader's loops,
    a ``sin(x)`` may come from a vector math routine in one place and a scalar one in the
    other and differ in its last bit -- and a rank then counts an element as before itself,
    so two elements get one rank (``argsort(sin(x))`` of 8 elements did, in C++)."""
    if isinstance(a, GraphValue):
        a.node.meta["realize"] = True
    return a


def _sort_dim(a, dim):
    a = _floating_only(a)
    if len(a.shape) == 0:
        raise NotImplementedError("a 0-d tensor")
    d = normalize_dim(dim, len(a.shape))
    n = a.shape[d]
    if not isinstance(n, int) or n == 0 or n > config.sort_length_limit:
        raise NotImplementedError(f"a sort over {n} elements (counting compares every pair; "
                                  f"at most {config.sort_length_limit})")
    return a, d, n


def _before(x, y, descending):
    """Does ``x`` sort strictly before ``y``? NaN is the largest value (last ascending,
    first descending)."""
    if descending:
        x, y = y, x
    return ops.logical_or(ops.lt(x, y), ops.logical_and(ops.ne(y, y), ops.eq(x, x)))


def _same(x, y):
    return ops.logical_or(ops.eq(x, y), ops.logical_and(ops.ne(x, x), ops.ne(y, y)))


def ranks(a, d, descending=False):
    """Where each element of ``a`` lands when ``a`` is sorted along ``d`` (int64)."""
    a = realized(a)
    x_i = ops.unsqueeze(a, d + 1)                    # [..., n (i), 1 (j), ...]
    x_j = ops.unsqueeze(a, d)                        # [..., 1 (i), n (j), ...]
    j, i = positions(x_j, d + 1), positions(x_i, d)
    earlier = ops.logical_or(_before(x_j, x_i, descending),
                             ops.logical_and(_same(x_j, x_i), ops.lt(j, i)))
    return ops.sum(ops.convert_element_type(earlier, torch.int64), (d + 1,))


def _index_of_rank(rank, d, wanted):
    """The index ``i`` along ``d`` with ``rank[i] == wanted``, for every entry of ``wanted``
    (its size along ``d`` is how many positions are asked for; ranks are a permutation, so
    exactly one ``i`` matches)."""
    r_i = ops.unsqueeze(rank, d)                     # [..., 1 (k), n (i), ...]
    k = ops.unsqueeze(wanted, d + 1)                 # [..., m (k), 1 (i), ...]
    i = positions(r_i, d + 1)
    return ops.sum(ops.where(ops.eq(r_i, k), i, 0), (d + 1,))


def _gather(a, d, index):
    return DECOMPOSITIONS[torch.gather](a, d, index)


def _first_positions(a, d, count):
    """``0, 1, ..., count-1`` along ``d``, the other dimensions as in ``a``."""
    shape = list(a.shape)
    shape[d] = count
    return ops.expand(ops.reshape(ops.iota(count, dtype=torch.int64, device=a.device),
                                  tuple(count if k == d else 1 for k in range(len(shape)))),
                      tuple(shape))


def sort_indices(a, d, n, descending=False, count=None):
    """The indices of the first ``count`` (default all) elements of ``a`` sorted along
    ``d``."""
    return _index_of_rank(ranks(a, d, descending), d,
                          _first_positions(a, d, n if count is None else count))


@register_decomposition(*_both("sort"))
def sort(a, dim=-1, descending=False, stable=False):
    if not _is_t(a):
        raise NotImplementedError("not a tensor")
    if len(a.shape) == 0:
        a = _floating_only(a)
        return a, ops.full((), 0, dtype=torch.int64, device=a.device)
    a, d, n = _sort_dim(a, dim)
    indices = sort_indices(a, d, n, descending)
    return _gather(a, d, indices), indices


@register_decomposition(*_both("argsort"))
def argsort(a, dim=-1, descending=False, stable=False):
    return sort(a, dim, descending, stable)[1]


@register_decomposition(*_both("msort"))
def msort(a):
    return sort(a, 0)[0]


@register_decomposition(*_both("topk"))
def topk(a, k, dim=-1, largest=True, sorted=True):  # noqa: A002 - PyTorch's name
    if not sorted:
        raise NotImplementedError("sorted=False (PyTorch's order is then its own)")
    a, d, n = _sort_dim(a, dim)
    if not isinstance(k, int) or not 0 < k <= n:
        raise NotImplementedError(f"k={k} of {n}")
    indices = sort_indices(a, d, n, descending=largest, count=k)
    return _gather(a, d, indices), indices


def _order_statistic(a, d, position, keepdim):
    """The value at sorted position ``position`` (a tensor with size 1 along ``d``) and its
    index."""
    index = _index_of_rank(ranks(a, d), d, position)
    value = _gather(a, d, index)
    if not keepdim:
        value, index = ops.squeeze(value, (d,)), ops.squeeze(index, (d,))
    return value, index


def _position(a, d, k):
    shape = tuple(1 if i == d else s for i, s in enumerate(a.shape))
    return ops.full(shape, k, dtype=torch.int64, device=a.device)


@register_decomposition(*_both("kthvalue"))
def kthvalue(a, k, dim=-1, keepdim=False):
    if len(a.shape) == 0:
        raise NotImplementedError("a 0-d tensor")
    a, d, n = _sort_dim(a, dim)
    if not isinstance(k, int) or not 1 <= k <= n:
        raise NotImplementedError(f"k={k} of {n}")
    return _order_statistic(a, d, _position(a, d, k - 1), keepdim)


def _nan_count(a, d):
    return ops.sum(ops.convert_element_type(ops.ne(a, a), torch.int64), (d,), keepdim=True)


def _median(a, dim, keepdim, ignore_nan):
    if dim is None:
        a, dim, whole = ops.reshape(_floating_only(a), (-1,)), 0, True
    else:
        whole = False
    if len(a.shape) == 0:
        raise NotImplementedError("a 0-d tensor")
    a, d, n = _sort_dim(a, dim)
    nans = _nan_count(a, d)
    if ignore_nan:   # the lower median of the numbers (all NaN: position 0, a NaN)
        position = ops.maximum(ops.div(ops.sub(ops.sub(n, nans), 1), 2), 0)
        position = ops.convert_element_type(ops.floor(position), torch.int64)
    else:            # the lower median, or the first NaN (sorted right after the numbers)
        position = ops.where(ops.gt(nans, 0), ops.sub(n, nans), _position(a, d, (n - 1) // 2))
    value, index = _order_statistic(a, d, position, keepdim)
    return ops.reshape(value, ()) if whole else (value, index)


@register_decomposition(*_both("median"))
def median(a, dim=None, keepdim=False):
    return _median(a, dim, keepdim, ignore_nan=False)


@register_decomposition(*_both("nanmedian"))
def nanmedian(a, dim=None, keepdim=False):
    return _median(a, dim, keepdim, ignore_nan=True)


def _quantile(a, q, dim, keepdim, interpolation, ignore_nan):
    """PyTorch's algorithm (aten/src/ATen/native/Sorting.cpp ``quantile_compute``): sort,
    then read (and interpolate) at ``q * (count - 1)``, in the input's dtype."""
    a = _floating_only(a)
    scalar_q = not _is_t(q)
    if scalar_q:
        if not 0 <= q <= 1:
            raise NotImplementedError("q outside [0, 1] (PyTorch raises)")
        q = ops.full((1,), q, dtype=a.dtype, device=a.device)
    elif len(q.shape) > 1 or q.dtype != a.dtype:
        raise NotImplementedError("q of more than one dimension or another dtype")
    elif len(q.shape) == 0:
        q, scalar_q = ops.reshape(q, (1,)), True
    if interpolation not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise NotImplementedError(f"interpolation={interpolation!r}")
    if dim is None:
        x, d, out_shape = ops.reshape(a, (-1,)), 0, ((1,) * len(a.shape) if keepdim else ())
    else:
        d = normalize_dim(dim, max(len(a.shape), 1))
        x = a if len(a.shape) else ops.reshape(a, (1,))
        out_shape = tuple(1 if i == d else s for i, s in enumerate(a.shape)) if keepdim \
            else tuple(s for i, s in enumerate(a.shape) if i != d)
    x, d, n = _sort_dim(x, d)
    x = ops.permute(x, tuple(i for i in range(len(x.shape)) if i != d) + (d,))  # d last
    last = len(x.shape) - 1
    ordered = _gather(x, last, sort_indices(x, last, n))               # [..., n]
    nq = q.shape[0]
    count = ops.sub(n, _nan_count(x, last)) if ignore_nan else None
    # ranks = q * (count - 1), [..., nq]
    qs = ops.reshape(q, (1,) * last + (nq,))
    if ignore_nan:
        ranks_ = ops.mul(qs, ops.convert_element_type(ops.sub(count, 1), a.dtype))
        ranks_ = ops.where(ops.eq(count, 0), 0.0, ranks_)   # all NaN: read the (NaN) first
    else:
        ranks_ = ops.mul(qs, float(n - 1))
        any_nan = ops.gt(_nan_count(x, last), 0)
        ranks_ = ops.where(any_nan, float(n - 1), ranks_)   # a NaN: read it (it is last)
    shape = tuple(x.shape[:last]) + (nq,)
    ranks_ = ops.expand(ranks_, shape)
    if interpolation == "lower":
        ranks_ = ops.floor(ranks_)
    elif interpolation == "higher":
        ranks_ = ops.ceil(ranks_)
    elif interpolation == "nearest":
        ranks_ = DECOMPOSITIONS[torch.round](ranks_)
    below = ops.convert_element_type(ranks_, torch.int64)
    values_below = _gather(ordered, last, below)
    if interpolation in ("linear", "midpoint"):
        above = ops.convert_element_type(ops.ceil(ranks_), torch.int64)
        values_above = _gather(ordered, last, above)
        weight = ops.sub(ranks_, ops.convert_element_type(below, a.dtype)) \
            if interpolation == "linear" else 0.5
        result = DECOMPOSITIONS[torch.lerp](values_below, values_above, weight) \
            if interpolation == "linear" else \
            ops.add(values_below, ops.mul(ops.sub(values_above, values_below), 0.5))
    else:
        result = values_below
    # [..., nq] -> [nq, *out_shape] (PyTorch puts q's dimension first)
    result = ops.permute(result, (last,) + tuple(range(last)))
    result = ops.reshape(result, (nq,) + tuple(out_shape))
    return ops.reshape(result, tuple(out_shape)) if scalar_q else result


@register_decomposition(*_both("quantile"))
def quantile(a, q, dim=None, keepdim=False, *, interpolation="linear"):
    return _quantile(a, q, dim, keepdim, interpolation, ignore_nan=False)


@register_decomposition(*_both("nanquantile"))
def nanquantile(a, q, dim=None, keepdim=False, *, interpolation="linear"):
    return _quantile(a, q, dim, keepdim, interpolation, ignore_nan=True)
