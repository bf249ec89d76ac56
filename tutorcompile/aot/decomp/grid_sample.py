"""``F.grid_sample``: reading an image at computed positions, as gathers and weights.

A spatial transformer (or an optical-flow warp) samples ``input`` (N, C, H, W) -- or
(N, C, D, H, W) -- at the points of ``grid`` (N, Ho, Wo, 2), each point ``(x, y)`` in
[-1, 1] across the width and the height. The point becomes a pixel position (the corners
of the image are -1 and 1 with ``align_corners``, the corners' *centres* are otherwise),
and then

* ``bilinear``: the ``2^k`` pixels around it (``k`` spatial dimensions), each weighted by
  the product over dimensions of ``1 - |position - pixel|``;
* ``nearest``: the nearest pixel (ties to even, as ``nearbyint``).

Each read is one ``index_select`` of a pixel row (all channels) from the input with its
spatial dimensions flattened, batch included; a pixel outside the image reads zero
(``padding_mode="zeros"``: its weight is masked, its position clamped so the read is in
range), or the position is first clamped into the image (``"border"``). The gradient of the
input is the ``index_add`` of the weighted rows, the gradient of the grid comes from the
weights -- the formulas of PyTorch's own kernels.

Mirrors: aten/src/ATen/native/GridSampler.cpp (``grid_sampler_compute_source_index``,
``grid_sampler_2d_cpu``) and torch/_decomp/decompositions.py (``grid_sampler_2d``).
"""

from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F

from ...ops import ops
from .helpers import _floating_only, _round
from .registry import register_decomposition

_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}


def _source_index(coord, size: int, align_corners: bool, padding: str):
    """The grid coordinate (in [-1, 1]) as a position in pixels along a dimension of
    ``size``; ``border`` clamps it into ``[0, size - 1]``."""
    if align_corners:
        pos = ops.mul(ops.add(coord, 1.0), (size - 1) / 2)
    else:
        pos = ops.div(ops.sub(ops.mul(ops.add(coord, 1.0), float(size)), 1.0), 2.0)
    if padding == "border":   # (the edges count as outside: no gradient there, as ATen)
        pos = ops.where(ops.le(pos, 0.0), 0.0, ops.where(ops.ge(pos, float(size - 1)),
                                                         float(size - 1), pos))
    return pos


def grid_sample_rule(x, grid, mode: str, padding: str, align_corners: bool):
    x, grid = _floating_only(x), _floating_only(grid)
    k = len(x.shape) - 2
    if k not in (2, 3) or mode not in ("bilinear", "nearest") or padding not in (
            "zeros", "border") or grid.dtype != x.dtype or grid.shape[-1] != k:
        raise NotImplementedError("bicubic, reflection padding, or an unusual shape")
    n, c, sizes = x.shape[0], x.shape[1], tuple(x.shape[2:])
    out_spatial = tuple(grid.shape[1:-1])
    if 0 in tuple(x.shape) or 0 in tuple(grid.shape):
        raise NotImplementedError("an empty input or grid")
    # rows of pixels: (N * prod(sizes), C), the batch index folded into the row
    rows = ops.reshape(ops.permute(x, (0,) + tuple(range(2, 2 + k)) + (1,)),
                       (n * math.prod(sizes), c))
    batch_shape = (n,) + (1,) * k
    batch = ops.mul(ops.reshape(ops.iota(n, dtype=torch.int64, device=x.device), batch_shape),
                    math.prod(sizes))
    # grid[..., 0] runs along the last spatial dimension (width), grid[..., k-1] the first
    pos = [_source_index(ops.squeeze(ops.slice(grid, -1, k - 1 - d, k - d, 1), (-1,)),
                         sizes[d], align_corners, padding) for d in range(k)]
    strides = [math.prod(sizes[d + 1:]) for d in range(k)]
    if mode == "nearest":
        corners = [[(_round(p), None)] for p in pos]
    else:
        corners = []
        for p in pos:
            low = ops.floor(p)
            frac = ops.sub(p, low)
            corners.append([(low, ops.sub(1.0, frac)), (ops.add(low, 1.0), frac)])
    out = None
    for choice in itertools.product(*corners):
        flat, inside, weight = batch, None, None
        for d, (idx, w) in enumerate(choice):
            ok = ops.logical_and(ops.ge(idx, 0.0), ops.le(idx, float(sizes[d] - 1)))
            inside = ok if inside is None else ops.logical_and(inside, ok)
            safe = ops.convert_element_type(
                ops.minimum(ops.maximum(idx, 0.0), float(sizes[d] - 1)), torch.int64)
            flat = ops.add(flat, ops.mul(safe, strides[d]))
            if w is not None:
                weight = w if weight is None else ops.mul(weight, w)
        picked = ops.index_select(rows, 0, ops.reshape(flat, (-1,)))
        picked = ops.reshape(picked, (n,) + out_spatial + (c,))
        mask = ops.unsqueeze(inside, -1)
        term = ops.where(mask, picked if weight is None else
                         ops.mul(picked, ops.unsqueeze(weight, -1)), 0.0)
        out = term if out is None else ops.add(out, term)
    return ops.permute(out, (0, k + 1) + tuple(range(1, k + 1)))


@register_decomposition(F.grid_sample)
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros",  # noqa: A002
                align_corners=None):
    return grid_sample_rule(input, grid, mode, padding_mode, bool(align_corners))


@register_decomposition(torch.grid_sampler, torch.grid_sampler_2d, torch.grid_sampler_3d)
def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):  # noqa: A002
    return grid_sample_rule(input, grid, _MODES.get(interpolation_mode),
                            _PADDINGS.get(padding_mode), bool(align_corners))
