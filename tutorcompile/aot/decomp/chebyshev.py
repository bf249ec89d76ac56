"""Chebyshev polynomials of the four kinds, T, U, V, W, as pointwise prims.

PyTorch evaluates ``T_n(x)`` (and ``U``, ``V``, ``W``) by the three-term recurrence
``P_{k+1} = 2x P_k - P_{k-1}`` -- a loop of ``n`` steps, where ``n`` is a tensor: data. A
kernel has no loops over data, but these polynomials have closed forms in an angle:

* ``|x| <= 1``, ``x = cos(theta)``: ``T_n = cos(n theta)``, ``U_n = sin((n+1) theta) /
  sin(theta)``, ``V_n = cos((n+1/2) theta) / cos(theta/2)``, ``W_n = sin((n+1/2) theta) /
  sin(theta/2)`` (PyTorch itself uses these for ``n > 6`` or ``n > 8``);
* ``x > 1``, ``x = cosh(t)``: the same with ``cosh``/``sinh`` -- the recurrence's growth;
* ``x < -1``: ``T_n(-y) = (-1)^n T_n(y)``, ``U`` likewise, and ``V`` and ``W`` swap:
  ``V_n(-y) = (-1)^n W_n(y)``.

``n`` is truncated to a whole number (PyTorch casts it to int64); a negative ``n`` gives 0;
``|x| = 1`` gives PyTorch's exact values (``T_n(-1) = (-1)^n``, ``U_n(1) = n + 1`` ...);
degrees 0, 1, 2 are the polynomials written out. Where the recurrence overflows, PyTorch's
loop goes on with ``inf`` and two steps later computes ``inf - inf``: its answer is NaN once
``P_{n-2}`` is infinite, and so is ours. PyTorch defines no gradient for these.

Mirrors: aten/src/ATen/native/Math.h (``chebyshev_polynomial_t_forward`` & co.).
"""

from __future__ import annotations

import math

import torch

from ...ops import ops
from .helpers import _trunc
from .registry import DECOMPOSITIONS, _is_t, register_decomposition

_LOG2 = math.log(2.0)


_TRIG = {"t": ("cos", 0.0, None, None), "u": ("sin", 1.0, "sin", 1.0),
         "v": ("cos", 0.5, "cos", 0.5), "w": ("sin", 0.5, "sin", 0.5)}
"""``P_m = f((m + a) angle) / g(b angle)``: (f, a, g, b) per kind."""


def _trig_form(kind: str, theta, m):
    f, a, g, b = _TRIG[kind]
    num = getattr(ops, f)(ops.mul(theta, ops.add(m, a) if a else m))
    return num if g is None else ops.div(num, getattr(ops, g)(ops.mul(theta, b)))


def _hyperbolic_form(kind: str, t, m):
    """The same with ``cosh``/``sinh``, each written ``exp(k t - log 2) (1 +- exp(-2 k t))``
    and the ratio taken in logarithms: ``sinh(59 t)`` may overflow where ``U_58 =
    sinh(59 t) / sinh(t)`` does not."""
    f, a, g, b = _TRIG[kind]

    def parts(fn, k):
        tail = ops.exp(ops.mul(k, -2.0))
        return ops.sub(k, _LOG2), ops.add(1.0, tail) if fn == "cos" else ops.sub(1.0, tail)
    log_num, num = parts(f, ops.mul(t, ops.add(m, a) if a else m))
    if g is None:
        return ops.mul(ops.exp(log_num), num)
    log_den, den = parts(g, ops.mul(t, b))
    return ops.mul(ops.exp(ops.sub(log_num, log_den)), ops.div(num, den))


def _closed_form(kind: str, x, m):
    """``P_m(x)`` for every finite ``x`` (``m`` a whole number >= 0, a float tensor)."""
    ax = ops.abs(x)
    inside = ops.lt(ax, 1.0)
    trig = _trig_form(kind, _acos(ops.where(inside, x, 0.0)), m)   # (safe arguments)
    # |x| > 1: t = acosh(|x|) = log(|x| + sqrt((|x| - 1)(|x| + 1)))
    y = ops.where(inside, 2.0, ax)
    t = ops.log(ops.add(y, ops.sqrt(ops.mul(ops.sub(y, 1.0), ops.add(y, 1.0)))))
    swapped = {"t": "t", "u": "u", "v": "w", "w": "v"}[kind]
    plus = _hyperbolic_form(kind, t, m)
    minus = _hyperbolic_form(swapped, t, m)
    minus = ops.where(_odd(m), ops.neg(minus), minus)
    return ops.where(inside, trig, ops.where(ops.lt(x, 0), minus, plus))


def _odd(m):
    return ops.ne(ops.sub(m, ops.mul(ops.floor(ops.mul(m, 0.5)), 2.0)), 0.0)


def _acos(x):
    """``acos(x)`` for ``|x| < 1`` (the math module's ``acos`` rule, as prims)."""
    return DECOMPOSITIONS[torch.acos](x)


def _at_one(kind: str, x, m):
    """The exact value at ``x = 1`` and at ``x = -1``, as PyTorch returns it."""
    sign = ops.where(_odd(m), -1.0, 1.0)
    at_plus = {"t": 1.0, "u": ops.add(m, 1.0), "v": 1.0,
               "w": ops.add(ops.mul(m, 2.0), 1.0)}[kind]
    at_minus = {"t": sign, "u": ops.mul(sign, ops.add(m, 1.0)),
                "v": ops.mul(sign, ops.add(ops.mul(m, 2.0), 1.0)), "w": sign}[kind]
    return ops.where(ops.gt(x, 0), at_plus, at_minus)


def _chebyshev(kind: str):
    def rule(x, n):
        if not _is_t(x) or not x.dtype.is_floating_point:
            raise NotImplementedError("a Python number or an integer x")
        if _is_t(n) and n.dtype.is_complex or isinstance(n, complex):
            raise NotImplementedError("a complex degree")
        m = _trunc(ops.convert_element_type(n, x.dtype)) if _is_t(n) else float(math.trunc(n))
        if not _is_t(m):
            m = ops.full((), m, dtype=x.dtype, device=x.device)
        mm = ops.maximum(m, 0.0)      # (a negative degree: 0 below; keep the forms finite)
        value = _closed_form(kind, x, mm)
        before = _closed_form(kind, x, ops.maximum(ops.sub(mm, 2.0), 0.0))
        infinite = ops.logical_or(ops.eq(ops.abs(before), math.inf), ops.ne(before, before))
        value = ops.where(ops.logical_and(infinite, ops.gt(ops.abs(x), 1.0)), math.nan, value)
        # degrees 0, 1, 2 directly, as PyTorch (the forms are NaN at an infinite x)
        first = {"t": x, "u": ops.mul(x, 2.0), "v": ops.sub(ops.mul(x, 2.0), 1.0),
                 "w": ops.add(ops.mul(x, 2.0), 1.0)}[kind]
        second = ops.sub(ops.mul(ops.mul(x, 2.0), first), 1.0)
        value = ops.where(ops.eq(mm, 0.0), 1.0, ops.where(ops.eq(mm, 1.0), first, ops.where(
            ops.eq(mm, 2.0), second, value)))
        value = ops.where(ops.eq(ops.abs(x), 1.0), _at_one(kind, x, mm), value)
        return ops.where(ops.lt(m, 0), 0.0, value)
    rule.__name__ = f"chebyshev_polynomial_{kind}"
    rule.__doc__ = f"``{kind.upper()}_n(x)`` from its closed form (see the module docstring)."
    return rule


for _kind in "tuvw":
    register_decomposition(getattr(torch.special, f"chebyshev_polynomial_{_kind}"))(
        _chebyshev(_kind))
