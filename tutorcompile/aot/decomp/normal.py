"""The normal distribution's tails as pointwise prims: ``erfcx``, ``log_ndtr``, ``ndtri``.

``erfc(x) = 1 - erf(x)`` is fine near 0 and useless in the tail: at ``x = 4`` it is 1.5e-8,
below float32's resolution of 1. Functions of the tail need it to full *relative* accuracy,
so they are built on the scaled complement ``erfcx(x) = exp(x^2) erfc(x)``, which Cephes
approximates without ever forming the tiny number: ``erfc(x) = exp(-x^2) P(x) / Q(x)``, so
``erfcx(x) = P(x) / Q(x)`` (one rational function on [1, 8), another beyond, and for
``x > 50`` the asymptotic form PyTorch uses). Below 1, ``exp(x^2) (1 - erf(x))`` loses
nothing (``erfc`` is between 0.15 and 2 there), and below -6.1 ``erfcx(x) = 2 exp(x^2)``
to float precision.

* ``log_ndtr(x) = log(Phi(x))``: for ``x < -1``, ``log(erfcx(-x / sqrt 2) / 2) - x^2 / 2``
  (never the log of an underflowed probability); above, ``log1p(-erfc(x / sqrt 2) / 2)``.
* ``ndtri(p)``, the inverse of ``Phi``: Cephes' ``ndtri`` -- a rational function of
  ``p - 1/2`` in the centre, and in each tail a rational function of ``1 / z`` with
  ``z = sqrt(-2 log p)``, the tail's natural variable.

Branches are computed side by side and chosen with ``where``; each is fed an argument from
its own range, so the discarded ones hold no NaN (nor do their gradients). Gradients come
from the prims.

Mirrors: aten/src/ATen/native/Math.h (``calc_erfcx`` -- which evaluates Steven G. Johnson's
Chebyshev fits; we use Cephes' fits of the same function --, ``calc_log_ndtr``,
``calc_ndtri``) and Cephes' ``ndtr.c``/``ndtri.c``.
"""

from __future__ import annotations

import math

import torch

from ...ops import ops
from .helpers import _unary

# Cephes ndtr.c: erfc(x) = exp(-x^2) P(x)/Q(x) on [1, 8), R(x)/S(x) beyond (highest power
# first; Q and S have a leading 1).
_ERFC_P = (2.46196981473530512524E-10, 5.64189564831068821977E-1, 7.46321056442269912687E0,
           4.86371970985681366614E1, 1.96520832956077098242E2, 5.26445194995477358631E2,
           9.34528527171957607540E2, 1.02755188689515710272E3, 5.57535335369399327526E2)
_ERFC_Q = (1.0, 1.32281951154744992508E1, 8.67072140885989742329E1, 3.54937778887819891062E2,
           9.75708501743205489753E2, 1.82390916687909736289E3, 2.24633760818710981792E3,
           1.65666309194161350182E3, 5.57535340817727675546E2)
_ERFC_R = (5.64189583547755073984E-1, 1.27536670759978104416E0, 5.01905042251180477414E0,
           6.16021097993053585195E0, 7.40974269950448939160E0, 2.97886665372100240670E0)
_ERFC_S = (1.0, 2.26052863220117276590E0, 9.39603524938001434673E0, 1.20489539808096656605E1,
           1.70814450747565897222E1, 9.60896809063285878198E0, 3.36907645100081516050E0)
# Cephes ndtri.c: the centre (in (p - 1/2)^2), the tail for z in [2, 8) and beyond (in 1/z)
_NDTRI_P0 = (-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
             1.39312609387279679503E1, -1.23916583867381258016E0)
_NDTRI_Q0 = (1.0, 1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
             -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
             1.59056225126211695515E1, -1.18331621121330003142E0)
_NDTRI_P1 = (4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
             4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
             -1.40256079171354495875E-1, -3.50424626827848203418E-2,
             -8.57456785154685413611E-4)
_NDTRI_Q1 = (1.0, 1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
             1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
             -3.80806407691578277194E-2, -9.33259480895457427372E-4)
_NDTRI_P2 = (3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
             1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
             3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9)
_NDTRI_Q2 = (1.0, 6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
             2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
             2.89247864745380683936E-6, 6.79019408009981274425E-9)
_EXP_MINUS_2 = math.exp(-2.0)
_SQRT_2PI = math.sqrt(2 * math.pi)
_INV_SQRT_PI = 1 / math.sqrt(math.pi)


def _polevl(z, coefficients):
    out = coefficients[0]
    for c in coefficients[1:]:
        out = ops.add(ops.mul(z, out), c)
    return out


def erfcx_tail(x):
    """``erfcx(x)`` for ``x >= 1`` (an argument below 1 gives a finite, unused value)."""
    mid = ops.where(ops.lt(x, 8.0), x, 1.0)
    far = ops.where(ops.lt(x, 8.0), 8.0, ops.minimum(x, 50.0))
    big = ops.minimum(ops.maximum(x, 50.0), 5e7)     # (x^4 would overflow beyond)
    x2 = ops.mul(big, big)
    asymptotic = ops.div(ops.mul(ops.add(ops.mul(x2, ops.add(x2, 4.5)), 2.0), _INV_SQRT_PI),
                         ops.mul(big, ops.add(ops.mul(x2, ops.add(x2, 5.0)), 3.75)))
    asymptotic = ops.where(ops.gt(x, 5e7), ops.div(_INV_SQRT_PI, ops.maximum(x, 5e7)),
                           asymptotic)
    return ops.where(ops.lt(x, 8.0), ops.div(_polevl(mid, _ERFC_P), _polevl(mid, _ERFC_Q)),
                     ops.where(ops.le(x, 50.0),
                               ops.div(_polevl(far, _ERFC_R), _polevl(far, _ERFC_S)),
                               asymptotic))


@_unary(torch.special.erfcx)
def erfcx(x):
    """``exp(x^2) erfc(x)``: the rational tail from 1 up, ``exp(x^2) (1 - erf(x))`` below,
    and below -6.1 (as ATen) ``2 exp(x^2)``, whose gradient is -inf where it overflows (the
    product's would be ``inf * 0``, NaN)."""
    tail, low = ops.ge(x, 1.0), ops.lt(x, -6.1)
    near = ops.where(ops.logical_or(tail, low), 0.0, x)
    direct = ops.mul(ops.exp(ops.mul(near, near)), ops.sub(1.0, ops.erf(near)))
    xl = ops.where(low, x, -6.1)
    direct = ops.where(low, ops.mul(ops.exp(ops.mul(xl, xl)), 2.0), direct)
    return ops.where(tail, erfcx_tail(ops.where(tail, x, 1.0)), direct)


def _erfc(t):
    """``erfc(t)`` to full relative accuracy in the upper tail (``exp(-t^2) erfcx(t)``)."""
    tail = ops.ge(t, 1.0)
    tt = ops.where(tail, t, 1.0)
    return ops.where(tail, ops.mul(ops.exp(ops.neg(ops.mul(tt, tt))), erfcx_tail(tt)),
                     ops.sub(1.0, ops.erf(ops.where(tail, 0.0, t))))


@_unary(torch.special.log_ndtr)
def log_ndtr(x):
    """``log Phi(x)``, as ATen's ``calc_log_ndtr`` splits it at -1."""
    t = ops.mul(x, 1 / math.sqrt(2.0))
    low = ops.lt(x, -1.0)
    tl = ops.where(low, t, -1.0)        # -t >= 1/sqrt(2) there: erfcx's direct branch or tail
    lower = ops.sub(ops.log(ops.mul(erfcx(ops.neg(tl)), 0.5)), ops.mul(tl, tl))
    th = ops.where(low, 0.0, t)
    upper = ops.log(ops.sub(1.0, ops.mul(_erfc(th), 0.5)))
    return ops.where(low, lower, upper)


@_unary(torch.special.ndtri)
def ndtri(p):
    """The ``x`` with ``Phi(x) = p`` (Cephes' ``ndtri``); -inf at 0, inf at 1, NaN outside.
    (Those are constants: the gradient there is 0, where eager's is inf or NaN.)"""
    upper = ops.gt(p, 1.0 - _EXP_MINUS_2)
    y = ops.where(upper, ops.sub(1.0, p), p)           # the tail nearer p, mirrored down
    centre = ops.gt(y, _EXP_MINUS_2)
    w = ops.sub(ops.where(centre, p, 0.5), 0.5)
    w2 = ops.mul(w, w)
    central = ops.mul(ops.add(w, ops.mul(w, ops.div(ops.mul(w2, _polevl(w2, _NDTRI_P0)),
                                                     _polevl(w2, _NDTRI_Q0)))), _SQRT_2PI)
    ys = ops.where(ops.logical_or(centre, ops.le(y, 0.0)), _EXP_MINUS_2, y)
    x = ops.sqrt(ops.mul(ops.log(ys), -2.0))
    x0 = ops.sub(x, ops.div(ops.log(x), x))
    z = ops.div(1.0, x)
    x1 = ops.where(ops.lt(x, 8.0), ops.div(ops.mul(z, _polevl(z, _NDTRI_P1)),
                                           _polevl(z, _NDTRI_Q1)),
                   ops.div(ops.mul(z, _polevl(z, _NDTRI_P2)), _polevl(z, _NDTRI_Q2)))
    tail = ops.sub(x0, x1)                 # the magnitude; below 1/2 the value is negative
    tail = ops.where(upper, tail, ops.neg(tail))
    out = ops.where(centre, central, tail)
    out = ops.where(ops.eq(p, 0.0), -math.inf, ops.where(ops.eq(p, 1.0), math.inf, out))
    return ops.where(ops.logical_or(ops.lt(p, 0.0), ops.gt(p, 1.0)), math.nan, out)
