"""Building blocks that several rule modules share: small pieces of math, and checks.

A rule module may import the registry, this module, and the rule modules below it (see
``decomp/__init__.py``), never another module's private names: what more than one module
needs lives here. Each piece is written against the virtualized ``ops``, like the rules.

Key pieces: ``_unary`` (register a rule that takes floats, integers promoted),
``_floating_only`` (decline anything but a floating-point tensor), ``_trunc``/``_round``
(rounding as prims: also the rules of ``torch.trunc``/``torch.round``), ``rounding_div``
(``torch.div(..., rounding_mode=...)``), ``positions`` (``0..n-1`` along a dim, from
``iota``), ``detached`` (a value the gradient does not flow through), ``_reduce`` (a
loss's ``reduction=`` argument).

Mirrors: torch/_prims_common/__init__.py and the private helpers of
torch/_decomp/decompositions.py (``_maybe_convert_to_dtype``, ``apply_loss_reduction``).
"""

from __future__ import annotations

import torch

from ...ops import GraphValue, make_meta, ops
from .registry import _float, _is_t, extern_call, register_decomposition


def _unary(*targets):
    """Register a rule on float tensors (integers become the default float dtype)."""
    def deco(rule):
        def float_rule(a, *args, **kwargs):
            if not _is_t(a):
                raise NotImplementedError("a Python number")
            return rule(_float(a), *args, **kwargs)
        register_decomposition(*targets)(float_rule)
        return rule
    return deco


def _is_float(a) -> bool:
    """Is ``a`` a floating-point tensor?"""
    return _is_t(a) and a.dtype.is_floating_point


def _floating_only(a):
    """``a`` itself, or decline the call (``NotImplementedError``: it stays extern)."""
    if not _is_float(a):
        raise NotImplementedError("integer or complex input")
    return a


def _trunc(a):
    """Round toward zero."""
    return ops.where(ops.lt(a, 0), ops.ceil(a), ops.floor(a))


def _round(a, *, decimals=0):
    """Round half to even, as ``torch.round`` (to ``decimals`` places)."""
    if decimals > 0:
        scale = 10.0 ** decimals
        return ops.div(_round(ops.mul(a, scale)), scale)
    if decimals < 0:
        scale = 10.0 ** -decimals
        return ops.mul(_round(ops.div(a, scale)), scale)
    # half to even, as torch.round: floor(a + 0.5), one less where that made an odd number
    # from an exact half
    r = ops.floor(ops.add(a, 0.5))
    half = ops.eq(ops.sub(r, a), 0.5)
    odd = ops.ne(ops.sub(r, ops.mul(ops.floor(ops.mul(r, 0.5)), 2.0)), 0.0)
    return ops.where(ops.logical_and(half, odd), ops.sub(r, 1.0), r)


def _reduced(x):
    """``x - round(x)``: exact in floating point, keeps ``sin(pi x)`` accurate near integers."""
    return ops.sub(x, ops.floor(ops.add(x, 0.5)))


def rounding_div(a, b, rounding_mode):
    """``torch.div(a, b, rounding_mode=...)`` on floats: the quotient, then trunc or floor."""
    if not (_is_float(a) and (_is_float(b) or isinstance(b, float))):
        raise NotImplementedError("div with rounding_mode on integers")  # stays extern
    q = ops.div(a, b)
    if rounding_mode == "trunc":
        return _trunc(q)
    if rounding_mode == "floor":
        return ops.floor(q)
    raise ValueError(f"div: rounding_mode must be 'trunc' or 'floor', got {rounding_mode!r}")


def positions(a, dim):
    """``0, 1, ..., n-1`` along ``dim`` of ``a``, shaped to broadcast against it."""
    n = a.shape[dim]
    shape = [1] * len(a.shape)
    shape[dim] = n
    return ops.reshape(ops.iota(n, dtype=torch.int64, device=a.device), tuple(shape))


def detached(x):
    """``x`` as a value the gradient does not flow through (``detach`` in a graph)."""
    if not isinstance(x, GraphValue):
        return x
    return extern_call(torch.Tensor.detach, (x,), {}, meta=make_meta(x.shape, x.dtype,
                                                                       x.device))


def _reduce(loss, reduction):
    """A loss's ``reduction=``: ``"mean"``, ``"sum"`` or ``"none"``."""
    if reduction == "mean":
        return ops.mean(loss, None)
    if reduction == "sum":
        return ops.sum(loss, None)
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


