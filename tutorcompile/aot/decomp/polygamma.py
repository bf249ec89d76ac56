"""Polygamma of every order as pointwise prims: trigamma, and the Hurwitz zeta behind the rest.

``polygamma(n, x)`` is the ``n``-th derivative of ``digamma``. Order 0 is ``digamma`` itself
(``math.py``); for ``n >= 1`` it is a sum over the poles of the gamma function,

    polygamma(n, x) = (-1)^(n+1) n! zeta(n+1, x),     zeta(s, q) = sum_k (q + k)^-s

(the Hurwitz zeta function). PyTorch evaluates it in two ways, and so do we:

* **order 1** (``trigamma``): for ``x < 1/2`` the reflection ``pi^2 / sin^2(pi x)`` moves the
  argument to ``1 - x``; then six terms of the sum and the asymptotic series at ``x + 6``;
* **order n >= 2**: the Cephes ``zeta`` -- sum the first terms until the argument passes 9,
  then the Euler-Maclaurin tail, whose coefficients are Bernoulli numbers. Cephes sums as
  many terms as a negative argument needs to climb past 9 (a data-dependent loop); a kernel
  cannot loop on data, so for ``x < 0`` we reflect instead: differentiating
  ``digamma(1 - x) - digamma(x) = pi cot(pi x)`` ``n`` times gives

      polygamma(n, x) = (-1)^n polygamma(n, 1 - x) - pi^(n+1) cot^(n)(pi x),

  where the ``n``-th derivative of ``cot`` is a polynomial in ``cot`` itself (from
  ``cot' = -(1 + cot^2)``), built here when the graph is traced, since ``n`` is a number.
  ``cot(pi x)`` is taken at ``x``'s fractional part (an exact reduction).

The poles (``x`` = 0, -1, -2, ...) give ``inf`` of the sign PyTorch's ``zeta`` gives. Every
branch that ``where`` discards is fed a safe argument, so its gradient holds no NaN; the
gradient itself comes from the prims (the derivative of the series is the series of the
derivative, to float32 accuracy).

Mirrors: aten/src/ATen/native/Math.h (``calc_trigamma``, ``zeta``, ``calc_polygamma``) and
Cephes' ``zeta.c``.
"""

from __future__ import annotations

import math

import torch

from ...ops import ops
from .helpers import _reduced, _trunc
from .math import digamma
from .registry import _float, _is_t, register_decomposition

_SHIFT = 10
# Euler-Maclaurin: B_2j / (2j)! for j = 1..7 (Cephes' zeta.c divides by (2j)! / B_2j).
_BERNOULLI_OVER_FACTORIAL = tuple(b / math.factorial(2 * j) for j, b in enumerate(
    (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6), start=1))


def _pi(dtype):
    return torch.tensor(math.pi, dtype=dtype).item()


def trigamma(x):
    """``polygamma(1, x)`` as ATen's ``calc_trigamma``: reflection below 1/2 (with
    ``sin(pi x)`` taken as it is, so that at the poles the value is as large as eager's),
    six terms of the sum, then the asymptotic series."""
    reflect = ops.lt(x, 0.5)
    # pi in the input's precision, the product rounded to it, as eager multiplies
    pi_x = ops.convert_element_type(ops.mul(ops.where(reflect, x, 0.25), _pi(x.dtype)), x.dtype)
    sin_pi_x = ops.sin(pi_x)
    result = ops.where(reflect, ops.neg(ops.div(math.pi ** 2, ops.mul(sin_pi_x, sin_pi_x))),
                       0.0)
    z = ops.where(reflect, ops.sub(1.0, x), x)
    for _ in range(6):
        result = ops.add(result, ops.div(1.0, ops.mul(z, z)))
        z = ops.add(z, 1.0)
    ixx = ops.div(1.0, ops.mul(z, z))
    series = ops.mul(ixx, ops.sub(1 / 6, ops.mul(ixx, ops.sub(1 / 30, ops.mul(ixx, 1 / 42)))))
    result = ops.add(result, ops.div(ops.add(ops.add(1.0, ops.div(0.5, z)), series), z))
    return ops.where(reflect, ops.neg(result), result)


def hurwitz_zeta(s: int, q):
    """``zeta(s, q)`` for a whole ``s >= 2`` and ``q > 0``: the first ``_SHIFT`` terms of the
    sum when ``q`` is small, then Euler-Maclaurin at ``y`` (``q`` or ``q + _SHIFT``):
    ``y^(1-s)/(s-1) + y^-s/2 + sum_j B_2j/(2j)! s(s+1)...(s+2j-2) y^(-s-2j+1)``."""
    small = ops.lt(q, _SHIFT)
    y = ops.where(small, ops.add(q, float(_SHIFT)), q)
    head = None
    for k in range(_SHIFT):
        term = ops.pow(ops.add(q, float(k)), float(-s))
        head = term if head is None else ops.add(head, term)
    y_s = ops.pow(y, float(-s))
    inv_y = ops.div(1.0, y)
    tail = ops.add(ops.div(ops.mul(y_s, y), float(s - 1)), ops.mul(y_s, 0.5))
    rising = ops.mul(inv_y, float(s))              # s(s+1)...(s+2j-2) / y^(2j-1)
    for j, coefficient in enumerate(_BERNOULLI_OVER_FACTORIAL, start=1):
        tail = ops.add(tail, ops.mul(ops.mul(y_s, rising), coefficient))
        rising = ops.mul(rising, ops.mul(ops.mul(inv_y, inv_y),
                                         float((s + 2 * j - 1) * (s + 2 * j))))
    return ops.add(tail, ops.where(small, head, 0.0))


def _cot_derivative(n: int) -> list[float]:
    """Coefficients (lowest power first) of the polynomial ``P`` with
    ``d^n/dy^n cot(y) = P(cot y)``: ``P_0(c) = c``, ``P_{k+1}(c) = -(1 + c^2) P_k'(c)``."""
    p = [0.0, 1.0]
    for _ in range(n):
        dp = [i * p[i] for i in range(1, len(p))] or [0.0]
        nxt = [0.0] * (len(dp) + 2)
        for i, c in enumerate(dp):
            nxt[i] -= c
            nxt[i + 2] -= c
        p = nxt
    return p


def polygamma_positive_order(n: int, x):
    """``polygamma(n, x)`` for a whole ``n >= 2`` (see the module docstring)."""
    negative = ops.lt(x, 0)
    pole = ops.logical_or(ops.eq(x, 0), ops.logical_and(negative, ops.eq(x, _trunc(x))))
    z = ops.where(negative, ops.sub(1.0, x), ops.where(pole, 1.0, x))
    scale = (1.0 if n % 2 else -1.0) * math.factorial(n)
    body = ops.mul(hurwitz_zeta(n + 1, z), scale)
    r = ops.where(ops.logical_and(negative, ops.ne(x, _trunc(x))), _reduced(x), 0.25)
    # cot(pi r) = sin(pi (1/2 - |r|)) / sin(pi r): 1/2 - |r| is exact, so the cosine is
    # exactly 0 at the half-integers (cos(pi / 2) in float32 is 4e-8, and the polynomial
    # multiplies that error by up to pi^(n+1))
    cot = ops.div(ops.sin(ops.mul(ops.sub(0.5, ops.abs(r)), math.pi)),
                  ops.sin(ops.mul(r, math.pi)))
    poly = None
    for c in reversed(_cot_derivative(n)):     # Horner, highest power first
        poly = c if poly is None else ops.add(ops.mul(poly, cot), c)
    reflected = ops.sub(ops.mul(body, -1.0 if n % 2 else 1.0),
                        ops.mul(poly, math.pi ** (n + 1)))
    out = ops.where(negative, reflected, body)
    return ops.where(pole, math.inf * scale, out)


@register_decomposition(torch.polygamma, torch.special.polygamma)
def polygamma(n, a):
    if not isinstance(n, int) or isinstance(n, bool) or n < 0 or not _is_t(a):
        raise NotImplementedError("an order that is not a whole number, or a Python number")
    a = _float(a)
    if not a.dtype.is_floating_point:
        raise NotImplementedError("a complex input")
    if n == 0:
        return digamma(a)
    if n == 1:
        return trigamma(a)
    return polygamma_positive_order(n, a)


@register_decomposition("method:polygamma")
def _polygamma_method(a, n):
    """``x.polygamma(n)``: the method takes the order second."""
    return polygamma(n, a)
