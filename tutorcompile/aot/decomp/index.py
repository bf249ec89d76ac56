"""Advanced indexing and the scatters whose positions never collide, as prims.

``x[i, j]`` with index tensors reads ``x`` at computed positions: with the indexed
dimensions flattened into one, the position is ``i * stride_i + j * stride_j`` -- a gather
(``index_select``) from the flattened tensor, whose gradient is an ``index_add`` (a
scatter-add, repeated positions adding up, as in PyTorch's ``index_put(accumulate=True)``).
The accumulating puts are that same ``index_add`` run forwards. Writes whose positions are
distinct by construction -- a diagonal (a strided slice of the flattened matrix), the masked
positions of ``masked_scatter`` (numbered by a prefix count of the mask) -- are a
``slice_scatter`` or a ``where``, with exact gradients. Writes that may collide without
accumulating (``index_put``, ``scatter`` without a reduction, ``index_copy``) keep
PyTorch's call: which of two colliding writes wins is its own business.

Mirrors: torch/_decomp/decompositions.py (``_unsafe_masked_index``, ``masked_scatter``,
``diagonal_scatter``) and torch/_inductor/lowering.py (``index``, ``index_put``).
"""

from __future__ import annotations

import math
import operator

import torch

from ...ops import ops
from ...ops.table import broadcast_shapes, normalize_dim
from .. import config
from .core import getitem
from .helpers import _floating_only
from .registry import DECOMPOSITIONS, _both, _is_t, register_decomposition


def _leading_index_offsets(x, indices):
    """For index tensors ``indices`` of ``x``'s first ``len(indices)`` dimensions: the flat
    position of every indexed row (shape: the indices broadcast), and the size of a row.
    A position outside its dimension gives offset -1, which the gather rejects."""
    if not indices or len(indices) > len(x.shape) or not all(
            _is_t(i) and i.dtype in (torch.int64, torch.int32) for i in indices):
        raise NotImplementedError("indices that are not integer tensors of leading dims")
    shape = broadcast_shapes(*(tuple(i.shape) for i in indices))
    sizes = tuple(x.shape[:len(indices)])
    flat, inside, stride = None, None, 1
    for k in range(len(indices) - 1, -1, -1):
        i = ops.expand(indices[k], shape) if tuple(indices[k].shape) != shape else indices[k]
        i = ops.where(ops.lt(i, 0), ops.add(i, sizes[k]), i)
        ok = ops.logical_and(ops.ge(i, 0), ops.lt(i, sizes[k]))
        term = ops.mul(i, stride) if stride != 1 else i
        flat = term if flat is None else ops.add(flat, term)
        inside = ok if inside is None else ops.logical_and(inside, ok)
        stride *= sizes[k]
    return ops.where(inside, flat, -1), shape


def _rows(x, count):
    """``x`` with its first ``count`` dimensions flattened into one."""
    return ops.reshape(x, (math.prod(x.shape[:count]),) + tuple(x.shape[count:]))


def index_leading(x, indices):
    """``x[indices[0], indices[1], ...]`` (index tensors of the leading dimensions)."""
    offsets, shape = _leading_index_offsets(x, indices)
    if 0 in shape:
        raise NotImplementedError("an empty index")
    picked = ops.index_select(_rows(x, len(indices)), 0, ops.reshape(offsets, (-1,)))
    return ops.reshape(picked, tuple(shape) + tuple(x.shape[len(indices):]))


def _list_index(index, device):
    """A Python list of ints as an int64 index tensor (a cat of ``full`` constants)."""
    if not (isinstance(index, list) and 0 < len(index) <= config.list_index_limit
            and all(type(v) is int for v in index)):
        return None
    return ops.cat([ops.full((1,), v, dtype=torch.int64, device=device) for v in index], 0)


def _getitem(a, index):
    as_tensor = _list_index(index, a.device)
    if as_tensor is not None and len(a.shape) >= 1:
        return index_leading(a, [as_tensor])
    if isinstance(index, tuple) and index and _is_t(index[0]) and all(
            _is_t(i) for i in index) and all(i.dtype != torch.bool for i in index):
        return index_leading(a, list(index))
    if _is_t(index) and index.dtype in (torch.int64, torch.int32) and len(a.shape) >= 1:
        return index_leading(a, [index])
    return getitem(a, index)


# (the basic-indexing rule of core.py, ``getitem``, extended to index tensors of
# several dimensions and to lists; it replaces that rule in the table)
register_decomposition(operator.getitem, "method:__getitem__", torch.Tensor.__getitem__)(
    _getitem)


def _index_list(indices):
    """``indices`` as a list of tensors of the leading dimensions (no None gaps)."""
    indices = list(indices)
    while indices and indices[-1] is None:
        indices.pop()
    if not indices or any(i is None or i.dtype == torch.bool for i in indices):
        raise NotImplementedError("None or boolean indices")
    return indices


@register_decomposition(torch.ops.aten._unsafe_index.Tensor, torch.ops.aten.index.Tensor)
def index(x, indices):
    return index_leading(x, _index_list(indices))


def _clamped(x, indices):
    return [ops.minimum(ops.maximum(i, -x.shape[k]), x.shape[k] - 1)
            for k, i in enumerate(indices)]


@register_decomposition(torch._unsafe_masked_index)
def unsafe_masked_index(x, mask, indices, fill):
    """``x[indices]`` where ``mask`` holds, ``fill`` elsewhere (indices under a false mask
    may be out of range: they are clamped first, as PyTorch's decomposition does)."""
    indices = _index_list(indices)
    if 0 in tuple(x.shape):
        raise NotImplementedError("an empty input")
    return ops.where(mask, index_leading(x, _clamped(x, indices)), fill)


def _accumulate(x, indices, values):
    """``x.index_put(indices, values, accumulate=True)``: an index_add of the values at the
    flat positions (repeated positions add up)."""
    offsets, shape = _leading_index_offsets(x, indices)
    rows = _rows(x, len(indices))
    full = tuple(shape) + tuple(rows.shape[1:])
    if tuple(values.shape) != full:
        values = ops.expand(values, full)
    out = ops.index_add(rows, 0, ops.reshape(offsets, (-1,)),
                        ops.reshape(values, (-1,) + tuple(rows.shape[1:])))
    return ops.reshape(out, tuple(x.shape))


@register_decomposition(*_both("index_put"))
def index_put(x, indices, values, accumulate=False):
    if not accumulate:
        raise NotImplementedError("accumulate=False (colliding writes: PyTorch picks one)")
    if not _is_t(values) or values.dtype != x.dtype:
        raise NotImplementedError("values of another dtype")
    return _accumulate(x, _index_list(indices), values)


@register_decomposition(torch._unsafe_masked_index_put_accumulate)
def unsafe_masked_index_put_accumulate(x, mask, indices, values):
    indices = _index_list(indices)
    if 0 in tuple(x.shape):
        raise NotImplementedError("an empty input")
    return _accumulate(x, _clamped(x, indices), ops.where(mask, values, 0.0))


@register_decomposition(*_both("put"))
def put(a, index, source, accumulate=False):
    if not accumulate:
        raise NotImplementedError("accumulate=False (colliding writes: PyTorch picks one)")
    if len(index.shape) != len(source.shape) or source.dtype != a.dtype:
        raise NotImplementedError("index and source of different shapes or dtypes")
    flat = ops.reshape(a, (-1,))
    out = _accumulate(flat, [ops.reshape(index, (-1,))], ops.reshape(source, (-1,)))
    return ops.reshape(out, tuple(a.shape))


@register_decomposition(*_both("diagonal_scatter"))
def diagonal_scatter(a, src, offset=0, dim1=0, dim2=1):
    """The diagonal of a matrix is a strided slice of its flattened form (start ``offset``
    or ``-offset * C``, step ``C + 1``): a slice_scatter there, with the two dimensions moved
    last and flattened."""
    if len(a.shape) < 2:
        raise NotImplementedError("fewer than 2 dimensions")
    d1, d2 = normalize_dim(dim1, len(a.shape)), normalize_dim(dim2, len(a.shape))
    rest = tuple(d for d in range(len(a.shape)) if d not in (d1, d2))
    order = rest + (d1, d2)
    moved = ops.permute(a, order)
    rows, cols = a.shape[d1], a.shape[d2]
    length = max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))
    if length == 0 or tuple(src.shape) != tuple(a.shape[d] for d in rest) + (length,):
        raise NotImplementedError("an empty diagonal or a source of another shape")
    start = offset if offset >= 0 else -offset * cols
    flat = ops.reshape(moved, tuple(moved.shape[:-2]) + (rows * cols,))
    last = len(flat.shape) - 1
    out = ops.slice_scatter(flat, src, last, start, start + (length - 1) * (cols + 1) + 1,
                            cols + 1)
    out = ops.reshape(out, tuple(moved.shape))
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    return ops.permute(out, tuple(inverse))


@register_decomposition(*_both("masked_scatter"))
def masked_scatter(a, mask, source):
    """The k-th true position of ``mask`` (row-major) takes ``source``'s k-th element: k is a
    prefix count of the mask, the values one gather from the flattened source."""
    a = _floating_only(a)
    if not _is_t(mask) or mask.dtype != torch.bool or source.dtype != a.dtype:
        raise NotImplementedError("a non-bool mask or a source of another dtype")
    shape = broadcast_shapes(tuple(a.shape), tuple(mask.shape))
    if shape != tuple(a.shape) or 0 in shape or not shape:
        raise NotImplementedError("a mask that broadcasts the input, or an empty/0-d input")
    m = ops.reshape(ops.expand(mask, shape) if tuple(mask.shape) != shape else mask, (-1,))
    counts = DECOMPOSITIONS[torch.cumsum](ops.convert_element_type(m, torch.float32), 0)
    k = ops.sub(ops.convert_element_type(counts, torch.int64), 1)
    k = ops.where(m, k, 0)
    values = ops.index_select(ops.reshape(source, (-1,)), 0, k)
    return ops.where(ops.reshape(m, shape), ops.reshape(values, shape), a)
