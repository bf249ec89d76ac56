"""More decompositions: the math of tensors -- pointwise functions, reductions, positions.

``core.py`` holds the rules the course walks through; this module holds the long
tail that real models (and PyTorch's OpInfo database, see ``tests/test_opinfo_sweep.py``)
need so that their ops become generated kernels instead of PyTorch calls: trigonometric and
hyperbolic functions, rounding and modulo, comparisons and logical ops, reductions and norms
built from ``sum`` and ``amax``, argmax and triangular masks built on ``iota``, a prefix
sum, and more spellings of the views. The neural-network functions (activations, losses,
normalisation, pooling) are in ``nn.py``. Each rule is written against the
virtualized ``ops`` like the others, and declines (``NotImplementedError``) what it does not
cover, which then stays an extern PyTorch call.

Accuracy: the rules keep float32 math and the sweep checks them against PyTorch to 1e-4
(values) and 1e-3 (gradients). Two are approximations by design: ``atan`` (and ``asin``,
``acos``, ``atan2`` built on it) is a range-reduced polynomial good to about 1 ulp of float32,
and ``fmod``/``remainder``/rounding division go through a float quotient, which can round
differently from PyTorch's exact ``fmod`` when the quotient is within an ulp of an integer.

Mirrors: torch/_decomp/decompositions.py and torch/_refs/__init__.py.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.nn.functional as F

from ...fx.symbolic_shapes import SymInt
from ...ops import ops
from ...ops.table import broadcast_shapes, normalize_dim
from .. import config
from .core import var
from .helpers import (
    _floating_only,
    _is_float,
    _reduced,
    _round,
    _trunc,
    _unary,
    detached,
    positions,
    rounding_div,
)
from .registry import (
    DECOMPOSITIONS,
    _both,
    _cast,
    _dims,
    _float,
    _is_t,
    register_decomposition,
)
from .scan import product

# =======================================================================================
# Trigonometric, hyperbolic, exponential and logarithmic functions
# =======================================================================================

_LN2, _LN10 = math.log(2.0), math.log(10.0)


@_unary(*_both("tan"))
def tan(a):
    return ops.div(ops.sin(a), ops.cos(a))


@_unary(*_both("sinh"))
def sinh(a):
    return ops.mul(ops.sub(ops.exp(a), ops.exp(ops.neg(a))), 0.5)


@_unary(*_both("cosh"))
def cosh(a):
    return ops.mul(ops.add(ops.exp(a), ops.exp(ops.neg(a))), 0.5)


@_unary(*_both("asinh"), *_both("arcsinh"))
def asinh(a):
    # odd function: compute on |a| so large negative inputs do not cancel
    m = ops.abs(a)
    r = ops.log(ops.add(m, ops.sqrt(ops.add(ops.mul(m, m), 1.0))))
    return ops.where(ops.lt(a, 0), ops.neg(r), r)


@_unary(*_both("acosh"), *_both("arccosh"))
def acosh(a):
    return ops.log(ops.add(a, ops.sqrt(ops.sub(ops.mul(a, a), 1.0))))


@_unary(*_both("atanh"), *_both("arctanh"))
def atanh(a):
    return ops.mul(ops.log(ops.div(ops.add(a, 1.0), ops.sub(1.0, a))), 0.5)


@_unary(*_both("log2"))
def log2(a):
    return ops.mul(ops.log(a), 1.0 / _LN2)


@_unary(*_both("log10"))
def log10(a):
    return ops.mul(ops.log(a), 1.0 / _LN10)


@_unary(*_both("erfc"), torch.special.erfc)
def erfc(a):
    return ops.sub(1.0, ops.erf(a))


@_unary(*_both("logit"), torch.special.logit)
def logit(a, eps=None):
    if eps is not None:
        a = ops.minimum(ops.maximum(a, eps), 1.0 - eps)
    return ops.log(ops.div(a, ops.sub(1.0, a)))


@_unary(*_both("rad2deg"))
def rad2deg(a):
    return ops.mul(a, 180.0 / math.pi)


@_unary(*_both("deg2rad"))
def deg2rad(a):
    return ops.mul(a, math.pi / 180.0)


@_unary(torch.special.expit)
def expit(a):
    return ops.sigmoid(a)


@_unary(*_both("sinc"), torch.special.sinc)
def sinc(a):
    x = ops.mul(a, math.pi)
    return ops.where(ops.eq(a, 0), 1.0, ops.div(ops.sin(x), x))


@register_decomposition(*_both("xlogy"), torch.special.xlogy)
def xlogy(a, b):
    if not (_is_t(a) and _is_t(b)):
        raise NotImplementedError("a Python number operand")
    a, b = _float(a), _float(b)
    return ops.where(ops.ne(b, b), b,  # NaN in y wins, even where x == 0
                     ops.where(ops.eq(a, 0), 0.0, ops.mul(a, ops.log(b))))


@register_decomposition(*_both("logaddexp"))
def logaddexp(a, b):
    a, b = _floating_only(a), _floating_only(b)
    m = ops.maximum(a, b)
    m_safe = ops.where(ops.eq(ops.abs(m), float("inf")), 0.0, m)
    return ops.add(ops.log(ops.add(ops.exp(ops.sub(a, m_safe)), ops.exp(ops.sub(b, m_safe)))),
                   m_safe)


@register_decomposition(*_both("hypot"))
def hypot(a, b):
    a, b = _floating_only(a), _floating_only(b)
    return ops.sqrt(ops.add(ops.mul(a, a), ops.mul(b, b)))


# =======================================================================================
# Rounding and sign
# =======================================================================================

def _integer_identity(rule):
    def wrapped(a, *args, **kwargs):
        if _is_t(a) and not a.dtype.is_floating_point and not a.dtype.is_complex:
            if a.dtype == torch.bool:
                raise NotImplementedError("bool input")
            return a
        return rule(_floating_only(a), *args, **kwargs)
    return wrapped


register_decomposition(*_both("floor"))(_integer_identity(lambda a: ops.floor(a)))
register_decomposition(*_both("ceil"))(_integer_identity(lambda a: ops.ceil(a)))
# (``_trunc`` and ``_round`` are in helpers.py: other rule modules round too)
register_decomposition(*_both("trunc"), *_both("fix"))(_integer_identity(_trunc))
register_decomposition(*_both("round"))(_integer_identity(_round))


@register_decomposition(*_both("frac"))
def frac(a):
    a = _floating_only(a)
    return ops.sub(a, _trunc(a))


@register_decomposition(*_both("sign"), *_both("sgn"))
def sign(a):
    if not _is_float(a):
        raise NotImplementedError("integer, bool or complex input")
    # (where between Python numbers gives the default dtype: cast to a's, as eager keeps it)
    return _cast(ops.where(ops.gt(a, 0), 1.0, ops.where(ops.lt(a, 0), -1.0, 0.0)), a.dtype)


@register_decomposition(*_both("heaviside"))
def heaviside(a, values):
    if not (_is_float(a) and _is_t(values)) or values.dtype != a.dtype:
        raise NotImplementedError("mixed dtypes")
    return ops.where(ops.eq(a, 0), values, ops.where(ops.gt(a, 0), 1.0, 0.0))


# =======================================================================================
# Comparisons, tests and logical ops
# =======================================================================================

def _as_bool(a):
    return a if a.dtype == torch.bool else ops.ne(a, 0)


def _logical(prim):
    def rule(a, b):
        if not (_is_t(a) and _is_t(b)) or a.dtype.is_complex or b.dtype.is_complex:
            raise NotImplementedError("a Python number or complex operand")
        return prim(_as_bool(a), _as_bool(b))
    return rule


register_decomposition(*_both("logical_and"))(_logical(ops.logical_and))
register_decomposition(*_both("logical_or"))(_logical(ops.logical_or))
register_decomposition(*_both("logical_xor"))(_logical(ops.logical_xor))


@register_decomposition(*_both("logical_not"))
def logical_not(a):
    if not _is_t(a) or a.dtype.is_complex:
        raise NotImplementedError("complex input")
    return ops.eq(a, False) if a.dtype == torch.bool else ops.eq(a, 0)


@register_decomposition(*_both("isnan"))
def isnan(a):
    return ops.ne(_floating_only(a), a)


@register_decomposition(*_both("isinf"))
def isinf(a):
    return ops.eq(ops.abs(_floating_only(a)), float("inf"))


@register_decomposition(*_both("isposinf"))
def isposinf(a):
    return ops.eq(_floating_only(a), float("inf"))


@register_decomposition(*_both("isneginf"))
def isneginf(a):
    return ops.eq(_floating_only(a), float("-inf"))


@register_decomposition(*_both("isfinite"))
def isfinite(a):
    return ops.lt(ops.abs(_floating_only(a)), float("inf"))  # NaN compares false


@register_decomposition(*_both("nan_to_num"))
def nan_to_num(a, nan=0.0, posinf=None, neginf=None):
    a = _floating_only(a)
    info = torch.finfo(a.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = ops.where(ops.eq(a, float("inf")), posinf, a)
    out = ops.where(ops.eq(a, float("-inf")), neginf, out)
    return ops.where(ops.ne(a, a), nan, out)


@register_decomposition(*_both("clamp_max"))
def clamp_max(a, max):  # noqa: A002 - PyTorch's argument name
    return ops.minimum(a, max)


@register_decomposition(*_both("masked_fill"))
def masked_fill(a, mask, value):
    if _is_t(value) and len(value.shape) != 0:
        raise NotImplementedError("a non-scalar fill value")
    if not _is_t(value) and not a.dtype.is_floating_point and isinstance(value, float):
        raise NotImplementedError("a float fill of an integer tensor")
    out = ops.where(mask, value, a)
    return out if out.dtype == a.dtype else _cast(out, a.dtype)


@register_decomposition(*_both("positive"), *_both("resolve_neg"), *_both("resolve_conj"))
def positive(a):
    if a.dtype.is_complex:
        raise NotImplementedError("complex input")
    return a


# =======================================================================================
# Pointwise arithmetic with several operands
# =======================================================================================

@register_decomposition(*_both("lerp"))
def lerp(a, b, weight):
    a, b = _floating_only(a), _floating_only(b)
    return ops.add(a, ops.mul(weight, ops.sub(b, a)))


@register_decomposition(*_both("addcmul"))
def addcmul(input, tensor1, tensor2, *, value=1):   # (torch's names: callers use keywords)
    prod = ops.mul(tensor1, tensor2)
    return ops.add(input, prod if value == 1 else ops.mul(prod, value))


@register_decomposition(*_both("addcdiv"))
def addcdiv(input, tensor1, tensor2, *, value=1):
    if not (_is_float(tensor1) and _is_float(tensor2)):
        raise NotImplementedError("integer division")
    q = ops.div(tensor1, tensor2)
    return ops.add(input, q if value == 1 else ops.mul(q, value))


@register_decomposition(*_both("outer"), *_both("ger"))
def outer(a, b):
    return ops.mul(ops.unsqueeze(a, 1), ops.unsqueeze(b, 0))


@register_decomposition(*_both("dot"), *_both("inner"), *_both("vdot"))
def dot(a, b):
    if len(a.shape) != 1 or len(b.shape) != 1 or a.dtype.is_complex or a.dtype != b.dtype:
        raise NotImplementedError("dot of other than two real 1-d tensors")
    return ops.sum(ops.mul(a, b), None)


# =======================================================================================
# Reductions built from sum and amax
# =======================================================================================

@register_decomposition(*_both("amin"))
def amin(a, dim=(), keepdim=False):
    return ops.neg(ops.amax(ops.neg(_floating_only(a)), _dims(a, dim) if dim != () else None,
                            keepdim=keepdim))


def _bool_reduce(a, dim, keepdim, want_all):
    if not _is_t(a) or a.dtype.is_complex:
        raise NotImplementedError("complex input")
    truth = ops.convert_element_type(_as_bool(a), torch.float32)
    if want_all:
        truth = ops.sub(1.0, truth)
    dims = _dims(a, dim) if dim is not None else None
    found = ops.gt(ops.amax(truth, dims, keepdim=keepdim), 0.0) if len(a.shape) else \
        ops.gt(truth, 0.0)
    return ops.eq(found, False) if want_all else found


@register_decomposition(*_both("any"))
def any_(a, dim=None, keepdim=False):
    return _bool_reduce(a, dim, keepdim, want_all=False)


@register_decomposition(*_both("all"))
def all_(a, dim=None, keepdim=False):
    return _bool_reduce(a, dim, keepdim, want_all=True)


@register_decomposition(*_both("nansum"))
def nansum(a, dim=None, keepdim=False, *, dtype=None):
    a = _floating_only(a if dtype is None else _cast(a, dtype))
    return ops.sum(ops.where(ops.ne(a, a), 0.0, a), _dims(a, dim), keepdim=keepdim)


@register_decomposition(*_both("var_mean"))
def var_mean(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    v = var(_floating_only(a), dim, unbiased, keepdim, correction=correction)
    return v, ops.mean(a, _dims(a, dim), keepdim=keepdim)


@register_decomposition(*_both("std_mean"))
def std_mean(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    v, m = var_mean(a, dim, unbiased, keepdim, correction=correction)
    return ops.sqrt(v), m


def _vector_norm(a, ord=2, dim=None, keepdim=False, dtype=None):  # noqa: A002
    a = _floating_only(a if dtype is None else _cast(a, dtype))
    if any(s == 0 for s in a.shape) or isinstance(ord, str):
        raise NotImplementedError("the norm of an empty tensor")
    if len(a.shape) == 0:   # |a| (or a != 0): reduce a 1-element view of it
        if dim not in (None, 0, -1, (), (0,), (-1,), [0], [-1]):
            raise NotImplementedError(f"dim={dim} of a 0-d tensor")
        return ops.reshape(_p_norm(ops.reshape(a, (1,)), float(ord), (0,), False), ())
    dims = _dims(a, dim) if dim is not None else None
    return _p_norm(a, float(ord), dims, keepdim)


@register_decomposition(torch.linalg.vector_norm)
def vector_norm(a, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    return _vector_norm(a, ord, dim, keepdim, dtype)


@register_decomposition(F.normalize)
def normalize(a, p=2.0, dim=1, eps=1e-12, out=None):
    if out is not None:
        raise NotImplementedError("out=")
    n = _vector_norm(a, p, dim, True)
    return ops.div(a, ops.maximum(n, eps))


# =======================================================================================
# More pointwise functions: special functions built from exp/log/erf, sign bits, modulo
# =======================================================================================

@_unary(torch.special.ndtr)
def ndtr(a):
    return ops.mul(ops.add(ops.erf(ops.mul(a, 1.0 / math.sqrt(2.0))), 1.0), 0.5)


@_unary(torch.special.entr)
def entr(a):
    return ops.where(ops.gt(a, 0), ops.neg(ops.mul(a, ops.log(a))),
                     ops.where(ops.eq(a, 0), 0.0, ops.where(ops.ne(a, a), a, float("-inf"))))


@register_decomposition(torch.special.xlog1py)
def xlog1py(a, b):
    if not (_is_float(a) and _is_float(b)):
        raise NotImplementedError("a Python number or integer operand")
    return ops.where(ops.ne(b, b), b,
                     ops.where(ops.eq(a, 0), 0.0, ops.mul(a, ops.log(ops.add(b, 1.0)))))


@_unary(*_both("angle"))
def angle(a):
    return ops.where(ops.ne(a, a), a, ops.where(ops.lt(a, 0), math.pi, 0.0))


def _signbit(a):
    # true for -0.0 too (1 / -0.0 is -inf); NaN counts as positive
    return ops.logical_or(ops.lt(a, 0), ops.lt(ops.div(1.0, a), 0))


@register_decomposition(*_both("signbit"))
def signbit(a):
    return _signbit(_floating_only(a))


@register_decomposition(*_both("copysign"))
def copysign(a, b):
    if not _is_t(b):
        raise NotImplementedError("a Python number sign")
    a, b = _float(a), _floating_only(_float(b))
    m = ops.abs(a)
    return ops.where(_signbit(b), ops.neg(m), m)


@register_decomposition(*_both("fmax"))
def fmax(a, b):
    a, b = _floating_only(a), _floating_only(b)
    return ops.where(ops.ne(a, a), b, ops.where(ops.ne(b, b), a, ops.maximum(a, b)))


@register_decomposition(*_both("fmin"))
def fmin(a, b):
    a, b = _floating_only(a), _floating_only(b)
    return ops.where(ops.ne(a, a), b, ops.where(ops.ne(b, b), a, ops.minimum(a, b)))


@register_decomposition(*_both("ldexp"))
def ldexp(a, b):
    if not _is_t(b):
        raise NotImplementedError("a Python number exponent")
    return ops.mul(_floating_only(_float(a)), ops.exp(ops.mul(_float(b), _LN2)))


@register_decomposition(*_both("logaddexp2"))
def logaddexp2(a, b):
    return ops.mul(logaddexp(ops.mul(_floating_only(a), _LN2), ops.mul(_floating_only(b), _LN2)),
                   1.0 / _LN2)


# =======================================================================================
# Matrix-vector products: the library call, then a pointwise kernel for the scaling
# =======================================================================================

def _scaled_sum(bias, prod, beta, alpha):
    if alpha != 1:
        prod = ops.mul(prod, alpha)
    if beta == 0:
        return prod
    return ops.add(bias if beta == 1 else ops.mul(bias, beta), prod)


@register_decomposition(*_both("mv"))
def mv(a, v):
    return ops.squeeze(ops.matmul(a, ops.unsqueeze(v, 1)), (1,))


@register_decomposition(*_both("addmv"))
def addmv(input, mat, vec, *, beta=1, alpha=1):
    return _scaled_sum(input, mv(mat, vec), beta, alpha)


@register_decomposition(*_both("addr"))
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    if not (_is_float(vec1) and _is_float(vec2)):
        raise NotImplementedError("integer or bool operands")
    return _scaled_sum(input, outer(vec1, vec2), beta, alpha)


@register_decomposition(*_both("baddbmm"))
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """(Parameters named as torch's: BLOOM calls ``alibi.baddbmm(batch1=q, batch2=k)``.)"""
    return _scaled_sum(input, ops.matmul(batch1, batch2), beta, alpha)


@register_decomposition(*_both("addbmm"))
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    return _scaled_sum(input, ops.sum(ops.matmul(batch1, batch2), (0,)), beta, alpha)


# =======================================================================================
# Inverse trigonometric functions: Cephes' single-precision arctangent (range reduction to
# |x| <= tan(pi/8), then an odd polynomial), and asin/acos/atan2 from it. Triton's core
# language has no atan, and its libdevice one does not run under the interpreter.
# =======================================================================================

_TAN_3PI_8, _TAN_PI_8 = 2.414213562373095, 0.41421356237309503


def _atan(a):
    m = ops.abs(a)
    big, mid = ops.gt(m, _TAN_3PI_8), ops.gt(m, _TAN_PI_8)
    # feed each branch only inputs it is defined on, so no inf/NaN reaches a gradient
    safe_big = ops.where(big, m, 1.0)
    x = ops.where(big, ops.div(-1.0, safe_big),
                  ops.where(mid, ops.div(ops.sub(m, 1.0), ops.add(m, 1.0)), m))
    offset = ops.where(big, math.pi / 2, ops.where(mid, math.pi / 4, 0.0))
    z = ops.mul(x, x)
    poly = ops.sub(ops.mul(ops.add(ops.mul(ops.sub(ops.mul(z, 8.05374449538e-2),
                                                   1.38776856032e-1), z),
                                   1.99777106478e-1), z), 3.33329491539e-1)
    r = ops.add(ops.add(ops.mul(ops.mul(poly, z), x), x), offset)
    r = ops.where(ops.eq(m, float("inf")), math.pi / 2, r)
    return ops.where(ops.lt(a, 0), ops.neg(r), ops.where(ops.ne(a, a), a, r))


_unary(*_both("atan"), *_both("arctan"))(_atan)


def _asin(a):
    # asin(x) = atan(x / sqrt(1 - x^2)); |x| > 1 gives NaN through the sqrt, as PyTorch
    inside = ops.sub(1.0, ops.mul(a, a))
    edge = ops.eq(inside, 0)
    r = _atan(ops.div(a, ops.sqrt(ops.where(edge, 1.0, inside))))
    return ops.where(edge, ops.mul(a, math.pi / 2), r)


_unary(*_both("asin"), *_both("arcsin"))(_asin)
_unary(*_both("acos"), *_both("arccos"))(lambda a: ops.sub(math.pi / 2, _asin(a)))


@register_decomposition(*_both("atan2"), *_both("arctan2"))
def atan2(y, x):
    if not (_is_float(y) and _is_float(x)):
        raise NotImplementedError("a Python number or integer operand")
    zero_x = ops.eq(x, 0)
    base = _atan(ops.div(y, ops.where(zero_x, 1.0, x)))
    # x < 0: add or subtract pi by the sign of y; x == 0: +-pi/2 (0 when y is 0 too)
    flipped = ops.where(_signbit(y), ops.sub(base, math.pi), ops.add(base, math.pi))
    upright = ops.where(ops.eq(y, 0), ops.where(_signbit(y), -0.0, 0.0),
                        ops.where(ops.lt(y, 0), -math.pi / 2, math.pi / 2))
    return ops.where(zero_x, upright, ops.where(ops.lt(x, 0), flipped, base))


# =======================================================================================
# Small things: max/min spellings, rounding division, closeness, differences, broadcasts
# =======================================================================================

@register_decomposition(*_both("aminmax"))
def aminmax(a, *, dim=None, keepdim=False):
    a = _floating_only(a)
    dims = None if dim is None else (normalize_dim(dim, len(a.shape)),)
    if len(a.shape) == 0:
        raise NotImplementedError("0-d input")
    return (ops.neg(ops.amax(ops.neg(a), dims, keepdim=keepdim)),
            ops.amax(a, dims, keepdim=keepdim))


@register_decomposition(*_both("isclose"))
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = _floating_only(a), _floating_only(b)
    close = ops.logical_or(ops.eq(a, b), ops.le(ops.abs(ops.sub(a, b)),
                                                 ops.add(ops.mul(ops.abs(b), rtol), atol)))
    if equal_nan:
        close = ops.logical_or(close, ops.logical_and(ops.ne(a, a), ops.ne(b, b)))
    return close


@register_decomposition(*_both("diff"))
def diff(a, n=1, dim=-1, prepend=None, append=None):
    if prepend is not None or append is not None or not _is_float(a):
        raise NotImplementedError("prepend/append or a non-float input")
    d = normalize_dim(dim, len(a.shape))
    for _ in range(n):
        size = a.shape[d]
        if size == 0:
            break
        a = ops.sub(ops.slice(a, d, 1, size, 1), ops.slice(a, d, 0, size - 1, 1))
    return a


@register_decomposition(*_both("broadcast_to"))
def broadcast_to(a, shape):
    return ops.expand(a, tuple(shape))


@register_decomposition(*_both("broadcast_tensors"))
def broadcast_tensors(*tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = broadcast_shapes(*(tuple(t.shape) for t in tensors))
    return tuple(ops.expand(t, shape) for t in tensors)


# =======================================================================================
# Division with rounding, and the remainders built on it (floating point only);
# ``rounding_div`` itself is in helpers.py (``torch.div`` in core.py uses it too)
# =======================================================================================

register_decomposition(*_both("floor_divide"))(
    lambda a, b: rounding_div(a, b, "floor"))


@register_decomposition(*_both("fmod"))
def fmod(a, b):
    return ops.sub(a, ops.mul(rounding_div(a, b, "trunc"), b))


@register_decomposition(*_both("remainder"))
def remainder(a, b):
    return ops.sub(a, ops.mul(rounding_div(a, b, "floor"), b))


# =======================================================================================
# Norms, distances, counts
# =======================================================================================

def _p_norm(a, p, dims, keepdim):
    """``(sum |a|^p)^(1/p)``. The root of a zero sum is taken of 1 and replaced by 0, so its
    gradient is 0 (PyTorch's subgradient at zero) instead of ``inf * 0 = NaN``."""
    m = ops.abs(a)
    if p == float("inf"):
        return ops.amax(m, dims, keepdim=keepdim)
    if p == float("-inf"):
        return ops.neg(ops.amax(ops.neg(m), dims, keepdim=keepdim))
    if p == 1:
        return ops.sum(m, dims, keepdim=keepdim)
    if p == 0:
        return ops.sum(ops.convert_element_type(ops.ne(a, 0), a.dtype), dims, keepdim=keepdim)
    if p < 0 or math.isnan(p):
        raise NotImplementedError(f"norm of order {p}")
    total = ops.sum(ops.mul(a, a) if p == 2 else ops.pow(m, p), dims, keepdim=keepdim)
    zero = ops.eq(total, 0)
    safe = ops.where(zero, 1.0, total)
    root = ops.sqrt(safe) if p == 2 else ops.pow(safe, 1.0 / p)
    return ops.where(zero, 0.0, root)


@register_decomposition(torch.linalg.matrix_norm)
def matrix_norm(a, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: A002
    """The Frobenius norm, or the largest (smallest) absolute column (``ord=±1``) or row
    (``±inf``) sum; the spectral and nuclear norms need an SVD and stay extern."""
    a = _floating_only(a if dtype is None else _cast(a, dtype))
    if len(a.shape) < 2 or len(dim) != 2:
        raise NotImplementedError("fewer than 2 dimensions")
    d0, d1 = (normalize_dim(d, len(a.shape)) for d in dim)
    if ord == "fro":
        return _vector_norm(a, 2, (d0, d1), keepdim)
    if ord not in (1, -1, math.inf, -math.inf) or 0 in tuple(a.shape):
        raise NotImplementedError(f"matrix norm {ord!r} (an SVD) or of an empty matrix")
    summed, kept = (d0, d1) if ord in (1, -1) else (d1, d0)
    sums = ops.sum(ops.abs(a), (summed,), keepdim=True)
    best = ops.amax(sums, (kept,), keepdim=True) if ord > 0 else \
        ops.neg(ops.amax(ops.neg(sums), (kept,), keepdim=True))
    return best if keepdim else ops.squeeze(best, (d0, d1))


@register_decomposition(torch.linalg.norm)
def linalg_norm(a, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """A vector norm (1 dimension, or none given and no ``ord``) or a matrix norm (2)."""
    if isinstance(dim, int):
        dim = (dim,)
    if ord is None:
        return _vector_norm(a, 2, dim, keepdim, dtype)
    ndims = len(dim) if dim is not None else len(a.shape)
    if ndims == 1:
        return _vector_norm(a, ord, dim, keepdim, dtype)
    if ndims == 2:
        return matrix_norm(a, ord, dim if dim is not None else (-2, -1), keepdim, dtype=dtype)
    raise NotImplementedError(f"norm {ord!r} over {ndims} dimensions")


@register_decomposition(*_both("norm"))
def norm(a, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    if out is not None:
        raise NotImplementedError("out=")
    a = _floating_only(a if dtype is None else _cast(a, dtype))
    if p == "fro" and (dim is None or len(_dims(a, dim)) <= 2):
        p = 2
    if isinstance(p, str) or len(a.shape) == 0 or any(s == 0 for s in a.shape):
        raise NotImplementedError(f"norm {p!r} or of a 0-d or empty tensor")
    return _p_norm(a, float(p), _dims(a, dim) if dim is not None else None, keepdim)


@register_decomposition(*_both("dist"))
def dist(a, b, p=2):
    d = ops.sub(_floating_only(a), _floating_only(b))
    if len(d.shape) == 0:
        raise NotImplementedError("0-d operands")
    return _p_norm(d, float(p), None, False)


@register_decomposition(F.pairwise_distance)
def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    d = ops.add(ops.sub(_floating_only(x1), _floating_only(x2)), eps)
    if len(d.shape) == 0:
        raise NotImplementedError("0-d operands")
    return _p_norm(d, float(p), (len(d.shape) - 1,), keepdim)


@register_decomposition(F.cosine_similarity)
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    x1, x2 = _floating_only(x1), _floating_only(x2)
    shape = broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    if not shape:
        raise NotImplementedError("0-d operands")
    x1, x2 = ops.expand(x1, shape), ops.expand(x2, shape)
    d = (normalize_dim(dim, len(shape)),)
    n1 = ops.maximum(_p_norm(x1, 2.0, d, True), eps)
    n2 = ops.maximum(_p_norm(x2, 2.0, d, True), eps)
    return ops.sum(ops.mul(ops.div(x1, n1), ops.div(x2, n2)), d)


@register_decomposition(*_both("count_nonzero"))
def count_nonzero(a, dim=None):
    if a.dtype.is_complex:
        raise NotImplementedError("complex input")
    return ops.sum(ops.convert_element_type(ops.ne(a, 0), torch.int64),
                   _dims(a, dim) if dim is not None else None)


@register_decomposition(*_both("nanmean"))
def nanmean(a, dim=None, keepdim=False, *, dtype=None):
    a = _floating_only(a if dtype is None else _cast(a, dtype))
    dims = _dims(a, dim) if dim is not None else None
    keep = ops.eq(a, a)
    total = ops.sum(ops.where(keep, a, 0.0), dims, keepdim=keepdim)
    return ops.div(total, ops.sum(ops.convert_element_type(keep, a.dtype), dims,
                                  keepdim=keepdim))


def _alias_special() -> None:
    """``torch.special.<f>`` is a function of its own for many ``torch.<f>``: same rule."""
    for name in ("expm1", "exp2", "log1p", "round", "erf", "logsumexp", "softmax",
                 "log_softmax", "i0"):
        special, plain = getattr(torch.special, name, None), getattr(torch, name, None)
        if special is not None and plain in DECOMPOSITIONS:
            DECOMPOSITIONS.setdefault(special, DECOMPOSITIONS[plain])


_alias_special()


def _bitwise_on_bools(prim):
    def rule(a, b):
        if not (_is_t(a) and _is_t(b)) or a.dtype != torch.bool or b.dtype != torch.bool:
            raise NotImplementedError("bitwise ops on integers")
        return prim(a, b)
    return rule


# On bool tensors the bitwise operators are the logical ones (masks: ``(x > 0) | m``).
register_decomposition(*_both("bitwise_and"), "method:__and__", operator.and_)(
    _bitwise_on_bools(ops.logical_and))
register_decomposition(*_both("bitwise_or"), "method:__or__", operator.or_)(
    _bitwise_on_bools(ops.logical_or))
register_decomposition(*_both("bitwise_xor"), "method:__xor__", operator.xor)(
    _bitwise_on_bools(ops.logical_xor))


@register_decomposition(*_both("bitwise_not"), "method:__invert__", operator.invert)
def bitwise_not(a):
    if not _is_t(a) or a.dtype != torch.bool:
        raise NotImplementedError("bitwise not of integers")
    return ops.eq(a, False)


# =======================================================================================
# Positions: argmax/argmin, max/min over a dim, triangular masks, all comparing against
# ``iota`` (computed from the loop index; ``positions`` is in helpers.py)
# =======================================================================================

def _arg_extreme(a, dim, keepdim, largest):
    a = _floating_only(a)
    if dim is None:
        a, dim, keepdim_shape = ops.reshape(a, (-1,)), 0, keepdim
        if keepdim_shape:
            raise NotImplementedError("argmax(dim=None, keepdim=True)")
    if len(a.shape) == 0 or a.shape[normalize_dim(dim, len(a.shape))] == 0:
        raise NotImplementedError("a 0-d or empty reduction")
    d = normalize_dim(dim, len(a.shape))
    best = ops.amax(a if largest else ops.neg(a), (d,), keepdim=True)
    hit = ops.logical_or(ops.eq(a if largest else ops.neg(a), best), ops.ne(a, a))
    # the first position that holds the extreme (or a NaN, which wins as in PyTorch)
    cand = ops.where(hit, positions(a, d), a.shape[d])
    return ops.neg(ops.amax(ops.neg(cand), (d,), keepdim=keepdim))


@register_decomposition(*_both("argmax"))
def argmax(a, dim=None, keepdim=False):
    return _arg_extreme(a, dim, keepdim, largest=True)


@register_decomposition(*_both("argmin"))
def argmin(a, dim=None, keepdim=False):
    return _arg_extreme(a, dim, keepdim, largest=False)


def _max_or_min(binary, largest):
    def rule(a, other=None, keepdim=False, *rest, **kwargs):
        if other is None and not rest and not kwargs:
            if len(a.shape) == 0 or any(s == 0 for s in a.shape):
                raise NotImplementedError("a 0-d or empty tensor")
            a = _floating_only(a)
            return ops.amax(a, None) if largest else ops.neg(ops.amax(ops.neg(a), None))
        if _is_t(other) and not rest and not kwargs:
            return binary(a, other)
        dim = kwargs.pop("dim", other)
        keepdim = kwargs.pop("keepdim", keepdim)
        if not isinstance(dim, int) or rest or kwargs or len(a.shape) == 0:
            raise NotImplementedError("max/min with these arguments")
        a = _floating_only(a)
        d = normalize_dim(dim, len(a.shape))
        values = ops.amax(a, (d,), keepdim=keepdim) if largest else \
            ops.neg(ops.amax(ops.neg(a), (d,), keepdim=keepdim))
        return values, _arg_extreme(a, d, keepdim, largest)
    return rule


for _t in _both("max"):
    register_decomposition(_t)(_max_or_min(ops.maximum, True))
for _t in _both("min"):
    register_decomposition(_t)(_max_or_min(ops.minimum, False))


def _triangle(a, diagonal, lower):
    if len(a.shape) < 2:
        raise NotImplementedError("a tensor of fewer than 2 dimensions")
    rows = positions(a, len(a.shape) - 2)
    cols = positions(a, len(a.shape) - 1)
    offset = ops.sub(cols, rows)
    keep = ops.le(offset, diagonal) if lower else ops.ge(offset, diagonal)
    return ops.where(keep, a, False if a.dtype == torch.bool else 0)


register_decomposition(*_both("tril"))(lambda a, diagonal=0: _triangle(a, diagonal, True))
register_decomposition(*_both("triu"))(lambda a, diagonal=0: _triangle(a, diagonal, False))


# =======================================================================================
# A prefix sum as a masked reduction: out[i] = sum of x[j] for j <= i. Quadratic work, but
# one generated kernel whose gradient (a suffix sum) comes out of the same rules.
# =======================================================================================

@register_decomposition(*_both("cumsum"))
def cumsum(a, dim, *, dtype=None):
    if dtype is not None:
        a = _cast(a, dtype)
    a = _floating_only(a)
    if len(a.shape) == 0:
        return a
    d = normalize_dim(dim, len(a.shape))
    n = a.shape[d]
    if n > 1024:
        raise NotImplementedError("a long scan (this rule does quadratic work)")
    source = ops.unsqueeze(a, d)                    # [..., 1 (i), n (j), ...]
    j = positions(source, d + 1)
    i = ops.reshape(ops.iota(n, dtype=torch.int64, device=a.device),
                    (1,) * d + (n, 1) + (1,) * (len(a.shape) - d - 1))
    return ops.sum(ops.where(ops.le(j, i), source, 0.0), (d + 1,))


def _reflected():
    """``Tensor.__radd__`` & co. called as functions (``torch.Tensor.__radd__(x, 2)``)."""
    for name in ("__radd__", "__rmul__", "__rsub__", "__rtruediv__", "__rpow__"):
        rule = DECOMPOSITIONS.get(f"method:{name}")
        if rule is not None:
            DECOMPOSITIONS.setdefault(getattr(torch.Tensor, name), rule)
    DECOMPOSITIONS.setdefault(torch.Tensor.__rdiv__, DECOMPOSITIONS["method:__rtruediv__"])


_reflected()


# =======================================================================================
# Views: more spellings of reshape, permute and slice (no kernel of their own; as prims
# they fuse into the kernels around them instead of running in PyTorch)
# =======================================================================================

@register_decomposition(*_both("ravel"))
def ravel(a):
    return ops.reshape(a, (-1,))


@register_decomposition(*_both("unflatten"))
def unflatten(a, dim, sizes):
    d = normalize_dim(dim, len(a.shape))
    return ops.reshape(a, tuple(a.shape[:d]) + tuple(sizes) + tuple(a.shape[d + 1:]))


@register_decomposition(*_both("movedim"), *_both("moveaxis"))
def movedim(a, source, destination):
    n = len(a.shape)
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    src = [normalize_dim(s, n) for s in src]
    dst = [normalize_dim(d, n) for d in dst]
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(k for k in range(n) if k not in src)
    return ops.permute(a, tuple(o if o is not None else next(rest) for o in order))


def _split_sizes(a, d, split_size_or_sections):
    n = a.shape[d]
    if not isinstance(split_size_or_sections, (list, tuple)):
        return _even_pieces(n, split_size_or_sections)
    return list(split_size_or_sections)


def _even_pieces(n, step) -> list:
    """Sizes of the pieces of ``step`` along a size ``n``, the last one shorter. Symbolic
    sizes stay symbolic: only the number of pieces, ``ceil(n / step)``, is decided (a
    guard many sizes pass, such as ``ceil(s0 / 4) == 2``), not ``n`` itself."""
    if step <= 0:
        raise NotImplementedError("a split size of zero")
    if n == 0:
        return [0]
    count = int((n + step - 1) // step)
    return [step] * (count - 1) + [n - step * (count - 1)]


def _pieces(a, d, sizes):
    out, start = [], 0
    for size in sizes:
        out.append(ops.slice(a, d, start, start + size, 1))
        start += size
    return tuple(out)


@register_decomposition(*_both("split"), *_both("unsafe_split"))
def split(a, split_size_or_sections, dim=0):
    d = normalize_dim(dim, len(a.shape))
    return _pieces(a, d, _split_sizes(a, d, split_size_or_sections))


@register_decomposition(*_both("chunk"), *_both("unsafe_chunk"))
def chunk(a, chunks, dim=0):
    d = normalize_dim(dim, len(a.shape))
    n = a.shape[d]
    return _pieces(a, d, _even_pieces(n, (n + chunks - 1) // chunks if n else 1))


@register_decomposition(*_both("unbind"))
def unbind(a, dim=0):
    d = normalize_dim(dim, len(a.shape))
    return tuple(ops.squeeze(ops.slice(a, d, i, i + 1, 1), (d,)) for i in range(a.shape[d]))


@register_decomposition(torch.atleast_1d)
def atleast_1d(*tensors):
    if len(tensors) != 1 or not _is_t(tensors[0]):
        raise NotImplementedError("several tensors")
    a = tensors[0]
    return ops.reshape(a, (1,)) if len(a.shape) == 0 else a


@register_decomposition(torch.atleast_2d)
def atleast_2d(*tensors):
    if len(tensors) != 1 or not _is_t(tensors[0]):
        raise NotImplementedError("several tensors")
    a = tensors[0]
    return ops.reshape(a, (1,) * (2 - len(a.shape)) + tuple(a.shape)) if len(a.shape) < 2 \
        else a


@register_decomposition(torch.atleast_3d)
def atleast_3d(*tensors):
    if len(tensors) != 1 or not _is_t(tensors[0]):
        raise NotImplementedError("several tensors")
    a = tensors[0]
    shape = tuple(a.shape)
    new = {0: (1, 1, 1), 1: (1,) + shape + (1,), 2: shape + (1,)}.get(len(shape), shape)
    return ops.reshape(a, new) if new != shape else a


def _copy_aliases():
    """``torch.<view>_copy`` computes the view as a new tensor: in a functional graph that
    is the view itself."""
    for name in ("permute", "t", "transpose", "unsqueeze", "squeeze", "expand", "view",
                 "narrow", "unbind", "split", "alias"):
        copy = getattr(torch, f"{name}_copy", None)
        plain = getattr(torch, name, None) if name not in ("view", "expand", "alias") \
            else f"method:{name}" if name != "alias" else None
        rule = DECOMPOSITIONS.get(plain) if plain is not None else (lambda a: a)
        if copy is not None and rule is not None:
            DECOMPOSITIONS.setdefault(copy, rule)


_copy_aliases()


# =======================================================================================
# Indexing with computed positions: gather, take and scatter_add read or accumulate through
# one flat index (``index_select`` / ``index_add`` on the flattened tensor); flip, roll and
# rot90 reorder along a dim; diagonals are strided slices of the flattened matrix.
# =======================================================================================

def _flat_offsets(index, dim, shape):
    """For every element of ``index``: its offset in a contiguous tensor of ``shape``, with
    ``index`` giving the position along ``dim`` and its own position along the others."""
    strides = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        strides[k] = strides[k + 1] * shape[k + 1]
    flat = None
    for k in range(len(shape)):
        term = ops.mul(index if k == dim else positions(index, k), strides[k])
        flat = term if flat is None else ops.add(flat, term)
    # An index outside ``[0, shape[dim])`` may still land inside the flat tensor (in the
    # next row): give it the offset -1, which index_select / index_add reject as PyTorch's
    # gather / scatter_add reject the index itself.
    inside = ops.logical_and(ops.ge(index, 0), ops.lt(index, shape[dim]))
    return ops.reshape(ops.where(inside, flat, -1), (-1,))


def _indexable(a, index, dim):
    if not _is_t(index) or index.dtype != torch.int64 or len(a.shape) == 0 \
            or len(index.shape) != len(a.shape) or 0 in tuple(index.shape):
        raise NotImplementedError("a 0-d, empty or differently ranked index")
    return normalize_dim(dim, len(a.shape))


@register_decomposition(*_both("gather"))
def gather(a, dim, index, *, sparse_grad=False):
    d = _indexable(a, index, dim)
    flat = ops.index_select(ops.reshape(a, (-1,)), 0, _flat_offsets(index, d, a.shape))
    return ops.reshape(flat, tuple(index.shape))


@register_decomposition(*_both("take_along_dim"))
def take_along_dim(a, indices, dim=None):
    if dim is None:   # both flattened: a 1-d result, however ``indices`` is shaped
        return take(a, ops.reshape(indices, (-1,)))
    d = normalize_dim(dim, len(a.shape))
    if len(indices.shape) != len(a.shape) or any(
            i != s for k, (i, s) in enumerate(zip(indices.shape, a.shape)) if k != d):
        raise NotImplementedError("indices that broadcast against the tensor")
    return gather(a, d, indices)


@register_decomposition(*_both("take"))
def take(a, index):
    if not _is_t(index) or index.dtype != torch.int64 or 0 in tuple(a.shape):
        raise NotImplementedError("an empty tensor or a non-int64 index")
    numel = math.prod(a.shape)
    flat = ops.reshape(index, (-1,))
    flat = ops.where(ops.lt(flat, 0), ops.add(flat, numel), flat)
    return ops.reshape(ops.index_select(ops.reshape(a, (-1,)), 0, flat), tuple(index.shape))


@register_decomposition(*_both("scatter_add"))
def scatter_add(a, dim, index, src):
    d = _indexable(a, index, dim)
    if not _is_t(src) or src.dtype != a.dtype:
        raise NotImplementedError("a Python number or another dtype as the source")
    for k, size in enumerate(index.shape):
        if src.shape[k] != size:
            src = ops.slice(src, k, 0, size, 1)
    out = ops.index_add(ops.reshape(a, (-1,)), 0, _flat_offsets(index, d, a.shape),
                        ops.reshape(src, (-1,)))
    return ops.reshape(out, tuple(a.shape))


def _reversed_along(a, d):
    n = a.shape[d]
    return ops.index_select(a, d, ops.iota(n, start=n - 1, step=-1, device=a.device))


@register_decomposition(*_both("flip"))
def flip(a, dims):
    dims = [dims] if isinstance(dims, int) else list(dims)
    if len(a.shape) == 0 or 0 in tuple(a.shape):
        raise NotImplementedError("a 0-d or empty tensor")
    for d in {normalize_dim(d, len(a.shape)) for d in dims}:
        a = _reversed_along(a, d)
    return a


register_decomposition(*_both("fliplr"))(lambda a: flip(a, (1,)))
register_decomposition(*_both("flipud"))(lambda a: flip(a, (0,)))


def _swap(a, d0, d1):
    order = list(range(len(a.shape)))
    order[d0], order[d1] = order[d1], order[d0]
    return ops.permute(a, tuple(order))


@register_decomposition(*_both("rot90"))
def rot90(a, k=1, dims=(0, 1)):
    if len(a.shape) < 2 or 0 in tuple(a.shape):
        raise NotImplementedError("a tensor of fewer than 2 dimensions, or empty")
    d0, d1 = (normalize_dim(d, len(a.shape)) for d in dims)
    k %= 4
    if k == 1:
        return _swap(flip(a, (d1,)), d0, d1)
    if k == 2:
        return flip(a, (d0, d1))
    if k == 3:
        return _swap(flip(a, (d0,)), d0, d1)
    return ops.mul(a, 1) if a.dtype != torch.bool else ops.logical_and(a, True)


@register_decomposition(*_both("roll"))
def roll(a, shifts, dims=None):
    if dims is None or dims == ():
        flat = roll(ops.reshape(a, (-1,)), shifts, 0)
        return ops.reshape(flat, tuple(a.shape))
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if len(shifts) != len(dims):
        raise NotImplementedError("as many shifts as dims")
    for s, d in zip(shifts, dims):
        d = normalize_dim(d, len(a.shape))
        n = a.shape[d]
        s = s % n if n else 0
        if s:
            a = ops.cat([ops.slice(a, d, n - s, n, 1), ops.slice(a, d, 0, n - s, 1)], d)
    return a


@register_decomposition(*_both("diagonal"), torch.diagonal_copy)
def diagonal(a, offset=0, dim1=0, dim2=1):
    n = len(a.shape)
    if n < 2:
        raise NotImplementedError("a tensor of fewer than 2 dimensions")
    d1, d2 = normalize_dim(dim1, n), normalize_dim(dim2, n)
    rest = [k for k in range(n) if k not in (d1, d2)]
    m = ops.permute(a, tuple(rest + [d1, d2]))
    rows, cols = m.shape[-2], m.shape[-1]
    if offset >= 0:
        m, cols = ops.slice(m, n - 1, min(offset, cols), cols, 1), max(cols - offset, 0)
    else:
        m, rows = ops.slice(m, n - 2, min(-offset, rows), rows, 1), max(rows + offset, 0)
    length = min(rows, cols)
    if length == 0:
        raise NotImplementedError("an empty diagonal")
    flat = ops.reshape(m, tuple(m.shape[:-2]) + (rows * cols,))
    return ops.slice(flat, n - 2, 0, (length - 1) * (cols + 1) + 1, cols + 1)


def _linalg_diagonal(a, *, offset=0, dim1=-2, dim2=-1):
    return diagonal(a, offset, dim1, dim2)


register_decomposition(torch.linalg.diagonal)(_linalg_diagonal)


@register_decomposition(*_both("trace"))
def trace(a):
    if len(a.shape) != 2 or not _is_float(a):
        raise NotImplementedError("trace of a non-float or non-matrix tensor")
    return ops.sum(diagonal(a), None)


@register_decomposition(*_both("diag_embed"))
def diag_embed(a, offset=0, dim1=-2, dim2=-1):
    if len(a.shape) == 0 or 0 in tuple(a.shape):
        raise NotImplementedError("a 0-d or empty tensor")
    n = a.shape[-1]
    size = n + abs(offset)
    rows = ops.reshape(ops.iota(size, device=a.device), (size, 1))
    cols = ops.reshape(ops.iota(size, device=a.device), (1, size))
    if abs(offset):
        zeros = ops.full(tuple(a.shape[:-1]) + (abs(offset),), 0, dtype=a.dtype,
                         device=a.device)
        a = ops.cat([a, zeros], len(a.shape) - 1)
    # offset >= 0: row r holds a[r] (at column r + offset); below the diagonal, column c
    along = ops.unsqueeze(a, len(a.shape) if offset >= 0 else len(a.shape) - 1)
    out = ops.where(ops.eq(ops.sub(cols, rows), offset), along,
                    False if a.dtype == torch.bool else 0)
    ndim = len(out.shape)
    d1, d2 = normalize_dim(dim1, ndim), normalize_dim(dim2, ndim)
    return movedim(out, (ndim - 2, ndim - 1), (d1, d2))


@register_decomposition(*_both("diagflat"))
def diagflat(a, offset=0):
    return diag_embed(ops.reshape(a, (-1,)), offset)


@register_decomposition(*_both("diag"))
def diag(a, diagonal_=0):
    if len(a.shape) == 1:
        return diag_embed(a, diagonal_)
    if len(a.shape) == 2:
        return diagonal(a, diagonal_)
    raise NotImplementedError("diag of a tensor of more than 2 dimensions")


# Stacking spellings: cat after making every tensor at least 1-, 2- or 3-d

def _cat_same_dtype(tensors, dim):
    tensors = list(tensors)
    if not tensors or any(not _is_t(t) or t.dtype != tensors[0].dtype for t in tensors):
        raise NotImplementedError("tensors of several dtypes")
    return ops.cat(tensors, dim)


@register_decomposition(*_both("hstack"))
def hstack(tensors):
    ts = [atleast_1d(t) for t in tensors]
    return _cat_same_dtype(ts, 0 if ts and len(ts[0].shape) == 1 else 1)


register_decomposition(*_both("vstack"), *_both("row_stack"))(
    lambda tensors: _cat_same_dtype([atleast_2d(t) for t in tensors], 0))
register_decomposition(*_both("dstack"))(
    lambda tensors: _cat_same_dtype([atleast_3d(t) for t in tensors], 2))


@register_decomposition(*_both("column_stack"))
def column_stack(tensors):
    cols = [ops.reshape(t, (-1, 1)) if len(t.shape) <= 1 else t for t in tensors]
    return _cat_same_dtype(cols, 1)


# Moving pixels between channels and space: reshape, permute, reshape

@register_decomposition(*_both("pixel_shuffle"), F.pixel_shuffle)
def pixel_shuffle(a, upscale_factor):
    r, n = upscale_factor, len(a.shape)
    if n < 3:
        raise NotImplementedError("fewer than 3 dimensions")
    *batch, c, h, w = a.shape
    b = len(batch)
    x = ops.reshape(a, (*batch, c // (r * r), r, r, h, w))
    x = ops.permute(x, (*range(b), b, b + 3, b + 1, b + 4, b + 2))
    return ops.reshape(x, (*batch, c // (r * r), h * r, w * r))


@register_decomposition(*_both("pixel_unshuffle"), F.pixel_unshuffle)
def pixel_unshuffle(a, downscale_factor):
    r, n = downscale_factor, len(a.shape)
    if n < 3:
        raise NotImplementedError("fewer than 3 dimensions")
    *batch, c, h, w = a.shape
    b = len(batch)
    x = ops.reshape(a, (*batch, c, h // r, r, w // r, r))
    x = ops.permute(x, (*range(b), b, b + 2, b + 4, b + 1, b + 3))
    return ops.reshape(x, (*batch, c * r * r, h // r, w // r))


@register_decomposition(*_both("channel_shuffle"), F.channel_shuffle)
def channel_shuffle(a, groups):
    if len(a.shape) < 3:
        raise NotImplementedError("fewer than 3 dimensions")
    n, c, *rest = a.shape
    x = ops.reshape(a, (n, groups, c // groups, *rest))
    return ops.reshape(_swap(x, 1, 2), (n, c, *rest))


# =======================================================================================
# Products spelled with pointwise math and sums: vecdot, cross, kron; float_power in
# float64. (logcumsumexp as a masked reduction like cumsum was tried: its float32 gradient
# drifts past 1e-3 from PyTorch's, so it stays an extern.)
# =======================================================================================

@register_decomposition(torch.linalg.vecdot)
def vecdot(x, y, *, dim=-1):
    if not (_is_float(x) and _is_float(y)) or x.dtype != y.dtype:
        raise NotImplementedError("complex, integer or mixed inputs")
    out = ops.mul(x, y)
    return ops.sum(out, (normalize_dim(dim, len(out.shape)),))


def _cross(a, b, d):
    def at(t, i):
        return ops.slice(t, d, i, i + 1, 1)

    def term(i, j):
        return ops.sub(ops.mul(at(a, i), at(b, j)), ops.mul(at(a, j), at(b, i)))
    a, b = ops.expand(a, _broadcast(a, b)), ops.expand(b, _broadcast(a, b))
    return ops.cat([term(1, 2), term(2, 0), term(0, 1)], d)


def _broadcast(a, b):
    return tuple(torch.broadcast_shapes(tuple(a.shape), tuple(b.shape)))


@register_decomposition(torch.linalg.cross)
def linalg_cross(a, b, *, dim=-1):
    if not (_is_float(a) and _is_float(b)) or a.dtype != b.dtype:
        raise NotImplementedError("complex, integer or mixed inputs")
    shape = _broadcast(a, b)
    d = normalize_dim(dim, len(shape))
    if shape[d] != 3:
        raise NotImplementedError("a dimension that is not of size 3")
    return _cross(a, b, d)


@register_decomposition(*_both("cross"))
def cross(a, b, dim=None):
    if dim is None:  # the first dimension of size 3 (PyTorch's deprecated default)
        shape = _broadcast(a, b)
        dim = next((k for k, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise NotImplementedError("no dimension of size 3")
    return linalg_cross(a, b, dim=dim)


@register_decomposition(*_both("kron"))
def kron(a, b):
    if not (_is_t(a) and _is_t(b)) or a.dtype != b.dtype:
        raise NotImplementedError("mixed dtypes")
    n = max(len(a.shape), len(b.shape))
    sa = (1,) * (n - len(a.shape)) + tuple(a.shape)
    sb = (1,) * (n - len(b.shape)) + tuple(b.shape)
    a2 = ops.reshape(a, tuple(x for s in sa for x in (s, 1)))
    b2 = ops.reshape(b, tuple(x for s in sb for x in (1, s)))
    return ops.reshape(ops.mul(a2, b2), tuple(x * y for x, y in zip(sa, sb)))


@register_decomposition(*_both("float_power"))
def float_power(a, b):
    if (_is_t(a) and a.dtype.is_complex) or (_is_t(b) and b.dtype.is_complex):
        raise NotImplementedError("complex inputs")
    a = _cast(a, torch.float64) if _is_t(a) else float(a)
    b = _cast(b, torch.float64) if _is_t(b) else float(b)
    if not _is_t(a):
        raise NotImplementedError("a Python number as the base")
    return ops.pow(a, b)


# =======================================================================================
# Scatters, searches and small constructions: what the indirect loads of the inductor
# (``index_select``), its index_add and slice_scatter kernels, and ``cat`` make kernels of
# =======================================================================================

@register_decomposition(*_both("slice_scatter"))
def slice_scatter(a, src, dim=0, start=None, end=None, step=1):
    if not (_is_t(src) and src.dtype == a.dtype) or len(a.shape) == 0 or step < 1:
        raise NotImplementedError("a source of another dtype, a 0-d tensor, or a step < 1")
    return ops.slice_scatter(a, src, normalize_dim(dim, len(a.shape)), start, end, step)


@register_decomposition(*_both("select_scatter"))
def select_scatter(a, src, dim, index):
    if not (_is_t(src) and src.dtype == a.dtype) or len(a.shape) == 0:
        raise NotImplementedError("a source of another dtype, or a 0-d tensor")
    d = normalize_dim(dim, len(a.shape))
    i = index % a.shape[d]
    return ops.slice_scatter(a, ops.unsqueeze(src, d), d, i, i + 1, 1)


@register_decomposition(*_both("index_add"))
def index_add(a, dim, index, source, *, alpha=1):
    if not _is_t(index) or len(index.shape) != 1 or source.dtype != a.dtype:
        raise NotImplementedError("a 0-d index, or a source of another dtype")
    if alpha != 1:
        source = ops.mul(source, alpha)
    if len(a.shape) == 0:   # a 0-d tensor indexes like one of shape (1,)
        out = ops.index_add(ops.reshape(a, (1,)), 0, index,
                            ops.reshape(source, (index.shape[0],)))
        return ops.reshape(out, ())
    return ops.index_add(a, normalize_dim(dim, len(a.shape)), index, source)


def _checked_positions(index, n, device):
    """``index`` with negative entries counted from the end, read through index_select so
    that an index outside ``[-n, n)`` raises (as PyTorch's ``index_fill`` does)."""
    index = ops.where(ops.lt(index, 0), ops.add(index, n), index)
    return ops.index_select(ops.iota(n, dtype=torch.int64, device=device), 0, index)


@register_decomposition(*_both("index_fill"))
def index_fill(a, dim, index, value):
    if (_is_t(value) and len(value.shape) != 0) or not _is_t(index) \
            or len(index.shape) != 1 or 0 in tuple(index.shape):
        raise NotImplementedError("a tensor value that is not 0-d, or an empty index")
    if len(a.shape) == 0:   # a 0-d tensor indexes like one of shape (1,)
        return ops.reshape(index_fill(ops.reshape(a, (1,)), 0, index, value), ())
    d = normalize_dim(dim, len(a.shape))
    n = a.shape[d]
    picked = _checked_positions(index, n, a.device)                 # (k,)
    hits = ops.eq(ops.reshape(ops.iota(n, dtype=torch.int64, device=a.device), (n, 1)),
                  ops.reshape(picked, (1, -1)))                       # (n, k)
    filled = ops.gt(ops.sum(ops.convert_element_type(hits, torch.int32), (1,)), 0)
    shape = [1] * len(a.shape)
    shape[d] = n
    return ops.where(ops.reshape(filled, tuple(shape)), value, a)


def _trapezoid_parts(y, x, dx, dim):
    d = normalize_dim(dim, len(y.shape))
    n = y.shape[d]
    if n == 0 or (x is not None and not _is_t(x)):
        raise NotImplementedError("an empty dimension, or a number as x")
    pairs = ops.add(ops.slice(y, d, 0, n - 1, 1), ops.slice(y, d, 1, n, 1))
    if x is None:
        return ops.mul(pairs, (1.0 if dx is None else dx) / 2), d
    if len(x.shape) == 1:
        steps = ops.sub(ops.slice(x, 0, 1, n, 1), ops.slice(x, 0, 0, n - 1, 1))
        shape = [1] * len(y.shape)
        shape[d] = n - 1
        steps = ops.reshape(steps, tuple(shape))
    else:
        xd = normalize_dim(dim, len(x.shape))
        steps = ops.sub(ops.slice(x, xd, 1, n, 1), ops.slice(x, xd, 0, n - 1, 1))
    return ops.mul(ops.mul(steps, pairs), 0.5), d


@register_decomposition(*_both("trapezoid"))
def trapezoid(y, x=None, *, dx=None, dim=-1):
    parts, d = _trapezoid_parts(_floating_only(y), x, dx, dim)
    return ops.sum(parts, (d,))


@register_decomposition(*_both("trapz"))
def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


@register_decomposition(*_both("cumulative_trapezoid"))
def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    parts, d = _trapezoid_parts(_floating_only(y), x, dx, dim)
    return DECOMPOSITIONS[torch.cumsum](parts, d)


def _count_below(sorted_seq, values, right):
    """For each value, how many entries of ``sorted_seq`` (last dim) come before it: those
    ``< value`` (``<=`` when ``right``). Counted as all minus those ``>=`` (``>``) so that a
    NaN value comes after every entry, as PyTorch's binary search puts it."""
    seq = ops.unsqueeze(sorted_seq, len(sorted_seq.shape) - 1)     # (..., 1, M)
    vals = ops.unsqueeze(values, len(values.shape))                 # (..., K, 1)
    after = ops.gt(seq, vals) if right else ops.ge(seq, vals)
    return ops.sub(sorted_seq.shape[-1],
                   ops.sum(ops.convert_element_type(after, torch.int64), (-1,)))


@register_decomposition(*_both("searchsorted"))
def searchsorted(sorted_seq, values, *, out_int32=False, right=False, side=None,
                 sorter=None):
    if sorter is not None or not _is_t(values) or not _is_t(sorted_seq) \
            or not sorted_seq.dtype.is_floating_point or values.dtype != sorted_seq.dtype \
            or (len(sorted_seq.shape) > 1
                and tuple(sorted_seq.shape[:-1]) != tuple(values.shape[:-1])):
        raise NotImplementedError("a sorter, a number, mixed dtypes or mismatched batches")
    right = side == "right" if side is not None else right
    out = _count_below(sorted_seq, values, right)
    return _cast(out, torch.int32) if out_int32 else out


@register_decomposition(*_both("bucketize"))
def bucketize(values, boundaries, *, out_int32=False, right=False):
    if not _is_t(values) or len(boundaries.shape) != 1 \
            or not boundaries.dtype.is_floating_point or values.dtype != boundaries.dtype:
        raise NotImplementedError("a number, or boundaries that are not 1-d floats")
    flat = ops.reshape(values, (-1,))
    out = ops.reshape(_count_below(boundaries, flat, right), tuple(values.shape))
    return _cast(out, torch.int32) if out_int32 else out


@register_decomposition(*_both("isin"))
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    if not (_is_t(elements) and _is_t(test_elements)) \
            or elements.dtype != test_elements.dtype:
        raise NotImplementedError("a number, or mixed dtypes")
    tests = ops.reshape(test_elements, (1, -1))
    flat = ops.reshape(elements, (-1, 1))
    count = ops.sum(ops.convert_element_type(ops.eq(flat, tests), torch.int32), (1,))
    found = ops.eq(count, 0) if invert else ops.gt(count, 0)
    return ops.reshape(found, tuple(elements.shape))


@register_decomposition(*_both("block_diag"))
def block_diag(*tensors):
    if not tensors or not all(_is_t(t) for t in tensors) \
            or len({t.dtype for t in tensors}) != 1:
        raise NotImplementedError("numbers, or mixed dtypes")
    mats = []
    for t in tensors:
        if len(t.shape) == 0:
            t = ops.reshape(t, (1, 1))
        elif len(t.shape) == 1:
            t = ops.reshape(t, (1, t.shape[0]))
        elif len(t.shape) != 2:
            raise NotImplementedError("a tensor of more than 2 dimensions")
        mats.append(t)
    width = 0
    for m in mats:
        width += m.shape[1]
    rows, left = [], 0
    dtype, device = mats[0].dtype, mats[0].device
    for m in mats:
        r, c = m.shape
        parts = [ops.full((r, left), 0, dtype=dtype, device=device), m,
                 ops.full((r, width - left - c), 0, dtype=dtype, device=device)]
        rows.append(ops.cat(parts, 1))
        left += c
    return ops.cat(rows, 0)


@register_decomposition(torch.cartesian_prod)
def cartesian_prod(*tensors):
    if not all(_is_t(t) and len(t.shape) == 1 for t in tensors) \
            or len({t.dtype for t in tensors}) != 1:
        raise NotImplementedError("tensors that are not 1-d, or mixed dtypes")
    if len(tensors) == 1:
        return tensors[0]
    sizes = tuple(t.shape[0] for t in tensors)
    columns = []
    for k, t in enumerate(tensors):
        shape = [1] * len(tensors)
        shape[k] = sizes[k]
        grid = ops.expand(ops.reshape(t, tuple(shape)), sizes)
        columns.append(ops.reshape(grid, (-1, 1)))
    return ops.cat(columns, 1)


@register_decomposition(torch.cdist)
def cdist(x1, x2, p=2.0, compute_mode=None):
    if not (_is_float(x1) and _is_float(x2)) or len(x1.shape) < 2 or x1.dtype != x2.dtype \
            or 0 in tuple(x1.shape) + tuple(x2.shape) or p < 0:
        raise NotImplementedError("empty, integer or mixed inputs, or p < 0")
    diff = ops.sub(ops.unsqueeze(x1, len(x1.shape) - 1), ops.unsqueeze(x2, len(x2.shape) - 2))
    return DECOMPOSITIONS[torch.linalg.vector_norm](diff, p, (-1,))


@register_decomposition("method:__rmod__", torch.Tensor.__rmod__)
def rmod(a, other):
    return remainder(other, a)


@register_decomposition("method:sum_to_size")
def sum_to_size(a, *size):
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) \
        else tuple(size)
    lead = len(a.shape) - len(size)
    dims = tuple(range(lead)) + tuple(lead + k for k, s in enumerate(size)
                                      if a.shape[lead + k] != s and s == 1)
    if not dims:
        return a
    out = ops.sum(a, dims, keepdim=True)
    return ops.reshape(out, size)


@register_decomposition("method:new_full")
def new_full(a, size, fill_value, *, dtype=None, device=None, layout=None,
             pin_memory=False, requires_grad=False):
    if _is_t(fill_value) or (device is not None and torch.device(device) != a.device):
        raise NotImplementedError("a tensor fill value, or another device")
    return ops.full(tuple(size), fill_value, dtype=dtype or a.dtype, device=a.device)


@register_decomposition(*_both("fill"))
def fill(a, value):
    if _is_t(value):
        raise NotImplementedError("a tensor fill value")
    # a where, not a bare full: the result still depends on ``a`` (a zero gradient)
    keep = ops.full(tuple(a.shape), True, dtype=torch.bool, device=a.device)
    return ops.where(keep, _cast(ops.full((), value, dtype=a.dtype, device=a.device),
                                 a.dtype), a)


@register_decomposition(*_both("isreal"))
def isreal(a):
    if not _is_t(a) or a.dtype.is_complex:
        raise NotImplementedError("a complex tensor")
    return ops.full(tuple(a.shape), True, dtype=torch.bool, device=a.device)


def _scatter_sum_and_count(a, scatter, include_self):
    """``scatter(values) -> a-shaped sums`` applied to the source and to ones: the reduced
    total and the number of values each element combines (``include_self`` adds ``a``)."""
    total, hits = scatter(True), scatter(False)
    hit = ops.gt(hits, 0)
    base = a if include_self else ops.where(hit, 0.0, a)
    count = ops.add(hits, 1.0) if include_self else hits
    return ops.add(base, total), count, hit


def _dense_reduce(a, reduce, include_self, hit, candidates, matches):
    """``prod``/``amax``/``amin`` of colliding writes, with no atomic update to lean on: every
    target compares itself with every source (``matches``, broadcast against ``candidates``
    along a last dimension of sources) and reduces the sources that land on it -- a
    reduction kernel, quadratic in size, so only for sizes up to ``config.dense_scatter_limit``.
    ``a`` itself joins the reduction as one more column when ``include_self``, so that ties
    share the gradient evenly among ``a`` and the sources, as PyTorch's backward does."""
    if reduce == "prod":
        red = product(ops.where(matches, candidates, 1.0), (-1,), False)
        red = ops.mul(a, red) if include_self else red
    else:
        sign = 1.0 if reduce == "amax" else -1.0
        values = ops.where(matches, ops.mul(candidates, sign), -math.inf)
        if include_self:
            own = ops.mul(a, sign)
        else:
            # PyTorch's backward shares a tie with ``a`` even when ``a`` is not included
            # (its count of ties does not mask ``a``; only ``a``'s own gradient is masked):
            # ``a`` joins where it equals the sources' extreme, detached, so the sources
            # get eager's share and ``a`` nothing
            own = detached(ops.mul(a, sign))
            own = ops.where(ops.eq(own, ops.amax(values, (-1,))), own, -math.inf)
        values = ops.cat([ops.unsqueeze(own, -1), values], -1)
        red = ops.mul(ops.amax(values, (-1,)), sign)
    return ops.where(hit, red, a)


def _scatter_reduce(a, reduce, include_self, scatter, dense=None):
    """``sum``/``mean`` from two scatter-adds (values and counts); ``prod``/``amax``/``amin``
    from ``dense()`` -> ``(candidates, matches)`` (see :func:`_dense_reduce`), with the
    count's scatter-add still run: it says which targets are hit, and rejects an index out
    of range as PyTorch does."""
    if not _is_float(a) or reduce not in ("sum", "mean", "prod", "amax", "amin") or (
            reduce not in ("sum", "mean") and dense is None):
        raise NotImplementedError(f"reduce={reduce!r} or an integer tensor")
    if reduce in ("prod", "amax", "amin"):
        hit = ops.gt(scatter(False), 0)
        return _dense_reduce(a, reduce, include_self, hit, *dense())
    total, count, hit = _scatter_sum_and_count(a, scatter, include_self)
    if reduce == "sum":
        return total
    kept = ops.gt(count, 0) if include_self else hit
    return ops.where(kept, ops.div(total, ops.maximum(count, 1.0)), a)


@register_decomposition(*_both("scatter_reduce"))
def scatter_reduce(a, dim, index, src, reduce, *, include_self=True):
    d = _indexable(a, index, dim)
    if not _is_t(src) or src.dtype != a.dtype:
        raise NotImplementedError("a Python number or another dtype as the source")
    for k, size in enumerate(index.shape):
        if src.shape[k] != size:
            src = ops.slice(src, k, 0, size, 1)
    offsets = _flat_offsets(index, d, a.shape)
    zeros = ops.full((math.prod(a.shape),), 0.0, dtype=a.dtype, device=a.device)

    def scatter(values):
        v = ops.reshape(src, (-1,)) if values else \
            ops.full((math.prod(index.shape),), 1.0, dtype=a.dtype, device=a.device)
        return ops.reshape(ops.index_add(zeros, 0, offsets, v), tuple(a.shape))

    def dense():
        """Every element of ``a`` (flattened) against every source element's offset."""
        n, m = math.prod(a.shape), math.prod(index.shape)
        if n * m > config.dense_scatter_limit:
            raise NotImplementedError(f"a {n} x {m} comparison (prod/amax/amin of colliding "
                                      "writes are compared densely)")
        targets = ops.reshape(ops.iota(n, dtype=torch.int64, device=a.device), (n, 1))
        matches = ops.reshape(ops.eq(targets, ops.reshape(offsets, (1, m))),
                              tuple(a.shape) + (m,))
        return ops.reshape(src, (m,)), matches
    return _scatter_reduce(a, reduce, include_self, scatter, dense)


@register_decomposition(*_both("index_reduce"))
def index_reduce(a, dim, index, source, reduce, *, include_self=True):
    if not _is_t(index) or len(index.shape) != 1 or source.dtype != a.dtype:
        raise NotImplementedError("a 0-d index, or a source of another dtype")
    if len(a.shape) == 0:   # a 0-d tensor indexes like one of shape (1,)
        out = index_reduce(ops.reshape(a, (1,)), 0, index,
                           ops.reshape(source, (index.shape[0],)), reduce,
                           include_self=include_self)
        return ops.reshape(out, ())
    d = normalize_dim(dim, len(a.shape))
    zeros = ops.full(tuple(a.shape), 0.0, dtype=a.dtype, device=a.device)

    def scatter(values):
        v = source if values else ops.full(tuple(source.shape), 1.0, dtype=a.dtype,
                                           device=a.device)
        return ops.index_add(zeros, d, index, v)

    def dense():
        """Along ``d`` only: position ``p`` of ``a`` against ``index[k]``, for every ``k``;
        the sources moved so that their ``k`` is a last dimension."""
        k = index.shape[0]
        if math.prod(a.shape) * k > config.dense_scatter_limit:
            raise NotImplementedError("a comparison too large (prod/amax/amin of colliding "
                                      "writes are compared densely)")
        shape = [1] * (len(a.shape) + 1)
        shape[d], shape[-1] = a.shape[d], k
        targets = ops.reshape(positions(a, d), tuple(shape[:-1]) + (1,))
        matches = ops.eq(targets, ops.reshape(index, (1,) * len(a.shape) + (k,)))
        order = tuple(i for i in range(len(a.shape)) if i != d) + (d,)
        moved = ops.unsqueeze(ops.permute(source, order), d)   # (..., 1 at d, ..., k)
        return moved, matches
    return _scatter_reduce(a, reduce, include_self, scatter, dense)


@register_decomposition(torch.segment_reduce)
def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
                   unsafe=False, initial=None):
    """Segments of consecutive elements along axis 0, given by their ``lengths`` or by
    ``offsets`` (segment ``s`` is ``data[offsets[s]:offsets[s + 1]]``), reduced: every
    segment is compared with every element (``start <= j < end``, a dense mask) and the
    elements inside it are summed, multiplied or maximised -- :func:`_dense_reduce`'s idea,
    without a scatter. ``initial`` starts every reduction (the whole value of an empty
    segment; without it sum 0, prod 1, max -inf, min inf, mean NaN, as PyTorch). The
    segments are assumed to cover the data (PyTorch checks that unless ``unsafe``). Equal
    maxima inside a segment share its gradient evenly (``amax``'s rule); PyTorch's backward
    shares it so for ``lengths`` without ``initial`` but gives each tie the whole gradient
    for ``offsets`` or with an ``initial``."""
    data = _floating_only(data)
    if indices is not None or axis != 0 or len(data.shape) == 0 or reduce not in (
            "sum", "mean", "max", "min", "prod"):
        raise NotImplementedError("indices, an axis other than 0, or a 0-d input")
    bounds = lengths if lengths is not None else offsets
    if not _is_t(bounds) or len(bounds.shape) != 1 or bounds.dtype not in (torch.int64,
                                                                            torch.int32):
        raise NotImplementedError("lengths/offsets that are not a 1-d integer tensor")
    if lengths is not None:      # the end of segment s: lengths[0] + ... + lengths[s]
        n_seg = lengths.shape[0]
        up_to = ops.le(ops.reshape(ops.iota(n_seg, dtype=torch.int64, device=data.device),
                                   (1, n_seg)),
                       ops.reshape(ops.iota(n_seg, dtype=torch.int64, device=data.device),
                                   (n_seg, 1)))
        end = ops.sum(ops.where(up_to, ops.reshape(lengths, (1, n_seg)), 0), (1,))
        start = ops.sub(end, lengths)
    else:
        n_seg = offsets.shape[0] - 1
        start, end = ops.slice(offsets, 0, 0, n_seg, 1), ops.slice(offsets, 0, 1, n_seg + 1, 1)
    n, rest = data.shape[0], (1,) * (len(data.shape) - 1)
    j = ops.reshape(ops.iota(n, dtype=torch.int64, device=data.device), (1, n) + rest)
    inside = ops.logical_and(ops.ge(j, ops.reshape(start, (n_seg, 1) + rest)),
                             ops.lt(j, ops.reshape(end, (n_seg, 1) + rest)))
    values = ops.unsqueeze(data, 0)
    count = ops.sum(ops.convert_element_type(inside, data.dtype), (1,))
    if reduce in ("sum", "mean"):
        out = ops.sum(ops.where(inside, values, 0.0), (1,))
        out = out if initial is None else ops.add(out, initial)
        if reduce == "mean":
            empty = initial if initial is not None else math.nan
            out = ops.where(ops.gt(count, 0), ops.div(out, ops.maximum(count, 1.0)), empty)
        return out
    if reduce == "prod":
        out = product(ops.where(inside, values, 1.0), (1,), False)
        return out if initial is None else ops.mul(out, initial)
    sign = 1.0 if reduce == "max" else -1.0
    out = ops.mul(ops.amax(ops.where(inside, ops.mul(values, sign), -math.inf), (1,)), sign)
    if initial is not None:
        out = (ops.maximum if reduce == "max" else ops.minimum)(out, initial)
    return out


@register_decomposition(*_both("empty_like"), "method:new_empty", "method:new_empty_strided",
                        torch.Tensor.new_empty, torch.Tensor.new_empty_strided)
def empty_like(a, *size, dtype=None, device=None, layout=None, pin_memory=False,
               requires_grad=False, memory_format=None):
    """Uninitialised memory may hold anything: zeros are one such value (strides are the
    graph's to choose)."""
    if size:   # new_empty(size) / new_empty_strided(size, stride)
        shape = tuple(size[0])
    else:
        shape = tuple(a.shape)
    if device is not None and torch.device(device) != a.device:
        raise NotImplementedError("another device")
    return ops.full(shape, 0, dtype=dtype or a.dtype, device=a.device)


# =======================================================================================
# Special functions: lgamma, digamma (polygamma of order 0; the higher orders are in
# polygamma.py), erfinv, spherical_bessel_j0 (the other Bessel functions are in special.py).
# The argument is shifted up by a fixed number of steps (a recurrence), the asymptotic
# series takes over there, and a reflection formula covers negative arguments -- branch
# free, so each is one pointwise kernel. Branches that ``where`` discards are fed safe
# arguments, so their (zero-weighted) gradients hold no NaN.
# =======================================================================================

_SHIFT = 10


def _sinpi(r):
    """``sin(pi * r)`` for the reduced argument ``r`` in [-1/2, 1/2] (exact reduction)."""
    return ops.sin(ops.mul(r, math.pi))


def _lgamma_positive(z):
    """``log Gamma(z)`` for ``z >= 0``: shift to ``z + 10`` when small, then Stirling."""
    small = ops.lt(z, _SHIFT)
    y = ops.where(small, ops.add(z, _SHIFT), z)
    shift = None
    for k in range(_SHIFT):
        term = ops.log(ops.add(z, float(k)))
        shift = term if shift is None else ops.add(shift, term)
    inv = ops.div(1.0, y)
    inv2 = ops.mul(inv, inv)
    series = ops.mul(inv, ops.add(1 / 12, ops.mul(inv2, ops.add(-1 / 360,
                                                                 ops.mul(inv2, 1 / 1260)))))
    stirling = ops.add(ops.sub(ops.mul(ops.sub(y, 0.5), ops.log(y)), y),
                       ops.add(0.5 * math.log(2 * math.pi), series))
    return ops.sub(stirling, ops.where(small, shift, 0.0))


@_unary(*_both("lgamma"), torch.special.gammaln)
def lgamma(a):
    """``lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x)`` for ``x < 0`` (reflection)."""
    negative = ops.lt(a, 0)
    z = ops.where(negative, ops.sub(1.0, a), a)
    body = _lgamma_positive(z)
    r = ops.where(negative, _reduced(a), 0.5)
    reflected = ops.sub(ops.log(ops.div(math.pi, ops.abs(_sinpi(r)))), body)
    return ops.where(negative, reflected, body)


_PSI_SERIES = (8.33333333333333333333E-2, -2.10927960927960927961E-2,
               7.57575757575757575758E-3, -4.16666666666666666667E-3,
               3.96825396825396825397E-3, -8.33333333333333333333E-3,
               8.33333333333333333333E-2)   # Cephes' psi asymptotic coefficients, as ATen


def _digamma_positive(z):
    small = ops.lt(z, _SHIFT)
    y = ops.where(small, ops.add(z, _SHIFT), z)
    shift = None
    for k in range(_SHIFT):
        term = ops.div(1.0, ops.add(z, float(k)))
        shift = term if shift is None else ops.add(shift, term)
    w = ops.div(1.0, ops.mul(y, y))
    poly = None
    for c in _PSI_SERIES:   # Horner, highest power first
        poly = c if poly is None else ops.add(ops.mul(poly, w), c)
    asymptotic = ops.sub(ops.sub(ops.log(y), ops.div(0.5, y)), ops.mul(w, poly))
    return ops.sub(asymptotic, ops.where(small, shift, 0.0))


@_unary(*_both("digamma"), torch.special.digamma, torch.special.psi)
def digamma(a):
    """``digamma(x) = digamma(1 - x) - pi / tan(pi x)`` for ``x < 0``; ``-inf`` at 0 (as
    ``copysign(inf, -x)``) and NaN at the negative integers, as PyTorch."""
    negative = ops.lt(a, 0)
    z = ops.where(negative, ops.sub(1.0, a), ops.where(ops.eq(a, 0), 1.0, a))
    body = _digamma_positive(z)
    r = ops.where(negative, ops.sub(a, _trunc(a)), 0.25)
    cot = ops.div(math.pi, ops.div(_sinpi(r), ops.cos(ops.mul(r, math.pi))))
    out = ops.where(negative, ops.sub(body, cot), body)
    out = ops.where(ops.logical_and(negative, ops.eq(r, 0)), math.nan, out)
    zero = ops.eq(a, 0)
    at_zero = ops.where(ops.lt(ops.div(1.0, a), 0), math.inf, -math.inf)   # sign of zero
    return ops.where(zero, at_zero, out)


_ERFINV_A = (0.886226899, -1.645349621, 0.914624893, -0.140543331)
_ERFINV_B = (-2.118377725, 1.442710462, -0.329097515, 0.012229801)
_ERFINV_C = (-1.970840454, -1.624906493, 3.429567803, 1.641345311)
_ERFINV_D = (3.543889200, 1.637067800)


def _horner(z, coefficients, leading_one=False):
    out = None
    for c in reversed(coefficients):
        out = c if out is None else ops.add(ops.mul(out, z), c)
    return ops.add(ops.mul(out, z), 1.0) if leading_one else out


@_unary(*_both("erfinv"), torch.special.erfinv)
def erfinv(y):
    """ATen's: a rational first guess (central range or tail), then two Newton steps."""
    y_abs = ops.abs(y)
    central = ops.le(y_abs, 0.7)
    z = ops.mul(y, y)
    guess_central = ops.div(ops.mul(y, _horner(z, _ERFINV_A)),
                            _horner(z, _ERFINV_B, leading_one=True))
    tail_abs = ops.where(ops.lt(y_abs, 1.0), ops.where(central, 0.9, y_abs), 0.9)  # safe
    t = ops.sqrt(ops.neg(ops.log(ops.div(ops.sub(1.0, tail_abs), 2.0))))
    tail = ops.div(_horner(t, _ERFINV_C), _horner(t, _ERFINV_D, leading_one=True))
    guess_tail = ops.where(ops.lt(y, 0), ops.neg(tail), tail)
    x = ops.where(central, guess_central, guess_tail)
    for _ in range(2):
        slope = ops.mul(ops.exp(ops.neg(ops.mul(x, x))), 2.0 / math.sqrt(math.pi))
        x = ops.sub(x, ops.div(ops.sub(ops.erf(x), y), slope))
    edge = ops.where(ops.lt(y, 0), -math.inf, math.inf)
    x = ops.where(ops.eq(y_abs, 1.0), edge, x)
    return ops.where(ops.gt(y_abs, 1.0), math.nan, x)


@_unary(torch.special.spherical_bessel_j0)
def spherical_bessel_j0(x):
    """``sin(x) / x``; its Taylor series below 0.5 (as ATen); 0 at infinity."""
    z = ops.mul(x, x)
    series = None
    for c in (1 / 6227020800, -1 / 39916800, 1 / 362880, -1 / 5040, 1 / 120, -1 / 6, 1.0):
        series = c if series is None else ops.add(ops.mul(series, z), c)
    small = ops.lt(ops.abs(x), 0.5)
    safe = ops.where(small, 1.0, x)
    out = ops.where(small, series, ops.div(ops.sin(safe), safe))
    return ops.where(ops.eq(ops.abs(x), math.inf), 0.0, out)


@register_decomposition(*_both("renorm"))
def renorm(a, p, dim, maxnorm):
    """Each slice along ``dim`` whose p-norm exceeds ``maxnorm`` is scaled down to it (with
    PyTorch's 1e-7 in the denominator)."""
    a = _floating_only(a)
    d = normalize_dim(dim, len(a.shape))
    dims = tuple(k for k in range(len(a.shape)) if k != d)
    if not dims:
        raise NotImplementedError("a 1-d tensor")
    norm = DECOMPOSITIONS[torch.linalg.vector_norm](a, p, dims, True)
    factor = ops.where(ops.gt(norm, maxnorm), ops.div(maxnorm, ops.add(norm, 1e-7)), 1.0)
    return ops.mul(a, factor)


@register_decomposition(torch.linalg.vander)
def vander(x, *, N=None):  # noqa: N803 - PyTorch's name
    """``[1, x, x^2, ..., x^(N-1)]`` along a new last dimension, by repeated multiplication
    (PyTorch's own ``cumprod``, so the values round the same way; ``pow`` would not)."""
    x = _floating_only(x)
    n = x.shape[-1] if N is None and len(x.shape) else N
    if len(x.shape) == 0 or not isinstance(n, int) or n < 2:
        raise NotImplementedError("a 0-d input, or fewer than 2 columns")
    columns = [ops.full(tuple(x.shape), 1.0, dtype=x.dtype, device=x.device), x]
    while len(columns) < n:
        columns.append(ops.mul(columns[-1], x))
    return ops.cat([ops.unsqueeze(c, len(x.shape)) for c in columns], len(x.shape))


def _power_of_two(e, dtype):
    """``2^e`` exactly, for an integer-valued float ``e`` (``pow`` of 2 by an integer is
    exact; two halves, so that ``2^149`` for the smallest subnormal does not overflow)."""
    half = _trunc(ops.mul(e, 0.5))
    two = ops.full((), 2.0, dtype=dtype, device=e.device)
    return ops.pow(two, half), ops.pow(two, ops.sub(e, half))


@register_decomposition(*_both("frexp"))
def frexp(a):
    """``a = mantissa * 2^exponent`` with ``0.5 <= |mantissa| < 1`` (0, inf and NaN keep
    exponent 0). ``log2`` guesses the exponent; one step either way corrects a guess that
    rounding put off by one, so the mantissa is exact; its gradient is ``2^-exponent``."""
    a = _floating_only(a)
    finite = ops.logical_and(DECOMPOSITIONS[torch.isfinite](a), ops.ne(a, 0))
    m = ops.abs(a)
    guess = ops.add(ops.floor(ops.mul(ops.log(ops.where(finite, m, 1.0)), 1.0 / _LN2)), 1.0)
    e = ops.where(finite, guess, 0.0)
    lo, hi = _power_of_two(ops.neg(e), a.dtype)
    mantissa = ops.mul(ops.mul(a, lo), hi)
    big = ops.logical_and(finite, ops.ge(ops.abs(mantissa), 1.0))
    small = ops.logical_and(finite, ops.lt(ops.abs(mantissa), 0.5))
    mantissa = ops.where(big, ops.mul(mantissa, 0.5),
                         ops.where(small, ops.mul(mantissa, 2.0), mantissa))
    e = ops.where(big, ops.add(e, 1.0), ops.where(small, ops.sub(e, 1.0), e))
    return mantissa, ops.convert_element_type(e, torch.int32)


@register_decomposition(torch.gradient)
def gradient(a, *, spacing=1, dim=None, edge_order=1):
    """Finite differences with uniform spacing ``h`` along each dimension: central
    differences ``(f[i+1] - f[i-1]) / 2h`` inside, one-sided ones at the two ends (of first
    order ``(f[1] - f[0]) / h``, or second, ``(-3 f[0] + 4 f[1] - f[2]) / 2h``) -- slices and
    a ``cat``, one kernel per dimension. Coordinates given as tensors (non-uniform spacing)
    stay PyTorch's call."""
    a = _floating_only(a)
    ndim = len(a.shape)
    dims = list(range(ndim)) if dim is None else (
        [dim] if isinstance(dim, int) else list(dim))
    dims = [normalize_dim(d, ndim) for d in dims]
    spacing = 1 if spacing is None else spacing
    steps = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    if len(steps) == 1 and len(dims) > 1:
        steps = steps * len(dims)
    if edge_order not in (1, 2) or len(steps) != len(dims) or not all(
            isinstance(h, (int, float)) and not isinstance(h, bool) for h in steps) or any(
            a.shape[d] < edge_order + 1 for d in dims):
        raise NotImplementedError("coordinates as tensors, or a dimension too short")
    out = []
    for d, h in zip(dims, steps):
        n = a.shape[d]

        def at(lo, hi, d=d):
            return ops.slice(a, d, lo, hi, 1)
        inner = ops.div(ops.sub(at(2, n), at(0, n - 2)), 2.0 * h)
        if edge_order == 1:
            first = ops.div(ops.sub(at(1, 2), at(0, 1)), float(h))
            last = ops.div(ops.sub(at(n - 1, n), at(n - 2, n - 1)), float(h))
        else:
            first = ops.div(ops.add(ops.sub(ops.mul(at(1, 2), 4.0), ops.mul(at(0, 1), 3.0)),
                                    ops.neg(at(2, 3))), 2.0 * h)
            last = ops.div(ops.add(ops.sub(ops.mul(at(n - 1, n), 3.0),
                                           ops.mul(at(n - 2, n - 1), 4.0)), at(n - 3, n - 2)),
                           2.0 * h)
        out.append(ops.cat([first, inner, last], d))
    return tuple(out)


@register_decomposition(*_both("nextafter"))
def nextafter(x, y):
    """The next float after ``x`` toward ``y``, by rounding instead of bit patterns: adding
    ``d`` with ``ulp / 2 < d < ulp`` to ``x`` rounds to the neighbour (to nearest, the only
    mode). ``|x| * 2^-p`` (``p`` the precision: 24 for float32) is in ``[ulp/2, ulp)`` for
    ``|x|`` in a binade -- a hair more, ``|x| (2^-p + 2^(1-2p))``, is strictly inside for
    the step away from zero; toward zero ``|x| 2^-p`` is strictly inside, or exactly the
    (halved) gap below a power of two. Below the smallest normals the gap is the smallest
    subnormal (a step the kernel computes only where the CPU does not flush subnormals to
    zero); infinities step to the largest finite float, ``x == y`` gives ``y``. The gradient
    is eager's: 1 for ``x`` (0 where ``x == y``), 0 for ``y``."""
    if not (_is_t(x) and _is_t(y)) or x.dtype not in (torch.float32, torch.float64) \
            or y.dtype != x.dtype:
        raise NotImplementedError("a Python number, or not float32/float64")
    info = torch.finfo(x.dtype)
    p = {torch.float32: 24, torch.float64: 53}[x.dtype]
    up = ops.gt(y, x)
    away = ops.eq(up, ops.gt(x, 0))                   # away from zero, or toward it
    ax = ops.abs(x)
    sign = ops.where(up, 1.0, -1.0)                   # the direction of the step
    # near the subnormals the step itself would be subnormal and lose its hair: step in
    # a copy scaled up by a power of two (exact), and scale the neighbour back (exact)
    scale = ops.where(ops.lt(ax, info.tiny * 2.0 ** (p + 2)), 2.0 ** (2 * p + 16), 1.0)
    finite = ops.where(ops.eq(ax, math.inf), 0.0, x)
    axs = ops.mul(ax, scale)
    step = ops.where(away, ops.mul(axs, 2.0 ** -p + 2.0 ** (1 - 2 * p)),
                     ops.mul(axs, 2.0 ** -p))
    moved = ops.div(ops.add(ops.mul(finite, scale), ops.mul(sign, step)), scale)
    # below 2 * tiny every gap is the smallest subnormal
    moved = ops.where(ops.lt(ax, info.tiny * 2),
                      ops.add(finite, ops.mul(sign, info.smallest_normal * 2.0 ** (1 - p))),
                      moved)
    out = ops.add(finite, detached(ops.sub(moved, finite)))
    out = ops.where(ops.eq(ax, math.inf), ops.where(ops.gt(x, 0), info.max, -info.max), out)
    out = ops.where(ops.logical_or(ops.ne(x, x), ops.ne(y, y)), math.nan, out)
    return ops.where(ops.eq(x, y), detached(y), out)


@register_decomposition(*_both("histc"))
def histc(a, bins=100, min=0, max=0):  # noqa: A002 - PyTorch's argument names
    """Counts in ``bins`` equal bins over ``[min, max]`` (the data's own range when both are
    0; widened by 1 each way when it is a single point). An element's bin is ATen's
    ``int((x - min) * bins / (max - min))``, rounded in the input's precision at each step
    as ATen computes it; ``x == max`` falls in the last bin; elements outside the range
    (and NaN) are not counted -- they are added to an extra bin that is then cut off, so
    the count is one ``index_add`` of ones."""
    a = _floating_only(a)
    if not isinstance(bins, int) or bins <= 0 or _is_t(min) or _is_t(max) or min > max \
            or 0 in tuple(a.shape):
        raise NotImplementedError("tensor bounds, min > max, or an empty input")
    x = ops.reshape(a, (math.prod(a.shape),))
    dtype = a.dtype

    def rounded(v):
        return ops.convert_element_type(v, dtype)
    if min == max:
        lo, hi = ops.amax(ops.neg(x), (0,), keepdim=True), ops.amax(x, (0,), keepdim=True)
        lo = ops.neg(lo)
        same = ops.eq(lo, hi)
        lo, hi = ops.where(same, ops.sub(lo, 1.0), lo), ops.where(same, ops.add(hi, 1.0), hi)
    else:
        lo = ops.full((1,), min, dtype=dtype, device=a.device)
        hi = ops.full((1,), max, dtype=dtype, device=a.device)
    inside = ops.logical_and(ops.ge(x, lo), ops.le(x, hi))
    pos = rounded(ops.div(rounded(ops.mul(rounded(ops.sub(x, lo)), float(bins))),
                          rounded(ops.sub(hi, lo))))
    pos = ops.convert_element_type(ops.where(inside, pos, float(bins + 1)), torch.int64)
    pos = ops.where(ops.eq(pos, bins), bins - 1, ops.minimum(pos, bins))
    ones = ops.full((x.shape[0],), 1.0, dtype=dtype, device=a.device)
    counts = ops.index_add(ops.full((bins + 1,), 0.0, dtype=dtype, device=a.device), 0, pos,
                           ones)
    return ops.slice(counts, 0, 0, bins, 1)


@register_decomposition("method:repeat")
def repeat(a, *sizes):
    """Tile ``a``: each dimension ``s`` repeated ``r`` times is a new ``(r, s)`` pair of
    dimensions -- ``a`` expanded along ``r`` -- flattened into ``r * s`` (one copy kernel)."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    if len(sizes) < len(a.shape) or not all(
            isinstance(r, (int, SymInt)) and not isinstance(r, bool) and r >= 0 for r in sizes):
        raise NotImplementedError("fewer repeats than dimensions")   # (or not counts)
    shape = (1,) * (len(sizes) - len(a.shape)) + tuple(a.shape)
    paired = ops.reshape(a, tuple(x for s in shape for x in (1, s)))
    expanded = ops.expand(paired, tuple(x for r, s in zip(sizes, shape) for x in (r, s)))
    return ops.reshape(expanded, tuple(r * s for r, s in zip(sizes, shape)))


@register_decomposition(*_both("tile"))
def tile(a, dims):
    dims = tuple(dims)
    return repeat(a, (1,) * (len(a.shape) - len(dims)) + dims)


@register_decomposition(*_both("repeat_interleave"))
def repeat_interleave(a, repeats=None, dim=None, *, output_size=None):
    """Each element ``repeats`` times in a row along ``dim`` (the flattened tensor when
    ``dim`` is None): ``a`` unsqueezed after ``dim``, expanded there to ``repeats``,
    flattened into ``dim`` -- a view and one copy, and a count that may be a symbolic size
    (CANINE repeats its last molecule ``t % 4 + 4`` times). A tensor of counts (one per
    element: the result's length is in the data) stays a PyTorch call."""
    if not isinstance(repeats, (int, SymInt)) or isinstance(repeats, bool) or repeats < 0:
        raise NotImplementedError("repeats given as a tensor")   # (or negative: torch's error)
    if dim is None:
        a, dim = ops.reshape(a, (math.prod(a.shape),)), 0
    d = normalize_dim(dim, len(a.shape))
    shape = tuple(a.shape)
    spread = ops.expand(ops.unsqueeze(a, d + 1), shape[:d + 1] + (repeats,) + shape[d + 1:])
    return ops.reshape(spread, shape[:d] + (shape[d] * repeats,) + shape[d + 1:])


@register_decomposition(*_both("tensordot"))
def tensordot(a, b, dims=2, out=None):
    """Contract ``a``'s dims with ``b``'s: both permuted so the contracted dimensions meet,
    flattened to matrices, one matmul, the free dimensions restored."""
    if out is not None or not (_is_float(a) and _is_float(b)) or a.dtype != b.dtype:
        raise NotImplementedError("out=, or non-float or mixed inputs")
    if isinstance(dims, int):
        da, db = list(range(len(a.shape) - dims, len(a.shape))), list(range(dims))
    else:
        da, db = ([dims[0]] if isinstance(dims[0], int) else list(dims[0]),
                  [dims[1]] if isinstance(dims[1], int) else list(dims[1]))
    da = [normalize_dim(d, len(a.shape)) for d in da]
    db = [normalize_dim(d, len(b.shape)) for d in db]
    if len(da) != len(db) or any(a.shape[i] != b.shape[j] for i, j in zip(da, db)):
        raise NotImplementedError("contracted sizes that differ (PyTorch broadcasts a 1)")
    free_a = [d for d in range(len(a.shape)) if d not in da]
    free_b = [d for d in range(len(b.shape)) if d not in db]
    k = math.prod(a.shape[d] for d in da)
    am = ops.reshape(ops.permute(a, tuple(free_a + da)),
                     (math.prod(a.shape[d] for d in free_a), k))
    bm = ops.reshape(ops.permute(b, tuple(db + free_b)),
                     (k, math.prod(b.shape[d] for d in free_b)))
    return ops.reshape(ops.matmul(am, bm), tuple(a.shape[d] for d in free_a)
                       + tuple(b.shape[d] for d in free_b))


# More spellings of split and matmul (views and the library call: no kernel of their own,
# but no extern either)
@register_decomposition(*_both("split_with_sizes"), torch.split_with_sizes_copy)
def split_with_sizes(a, split_sizes, dim=0):
    return DECOMPOSITIONS[torch.split](a, list(split_sizes), dim)


@register_decomposition(*_both("tensor_split"))
def tensor_split(a, indices_or_sections, dim=0):
    """``sections`` pieces (the first ``n % sections`` one longer), or the pieces between
    the listed indices: slices."""
    if len(a.shape) == 0 or _is_t(indices_or_sections):
        raise NotImplementedError("a 0-d tensor or a tensor of indices")
    d = normalize_dim(dim, len(a.shape))
    n = a.shape[d]
    if isinstance(indices_or_sections, int):
        sections = indices_or_sections
        if sections < 1:
            raise NotImplementedError("fewer than one section (PyTorch raises)")
        bounds = [i * (n // sections) + min(i, n % sections) for i in range(sections + 1)]
    else:
        bounds = [0] + [min(max(i if i >= 0 else i + n, 0), n)
                        for i in indices_or_sections] + [n]
    return tuple(ops.slice(a, d, lo, max(lo, hi), 1) for lo, hi in zip(bounds, bounds[1:]))


def _split_sections(a, sections, dim, name):
    if isinstance(sections, int) and (sections < 1 or a.shape[dim] % sections):
        raise NotImplementedError(f"{name}: {a.shape[dim]} is not divisible by {sections} "
                                  "(PyTorch raises)")
    return tensor_split(a, sections, dim)


@register_decomposition(*_both("hsplit"))
def hsplit(a, sections):
    if len(a.shape) == 0:
        raise NotImplementedError("a 0-d tensor")
    return _split_sections(a, sections, 1 if len(a.shape) > 1 else 0, "hsplit")


@register_decomposition(*_both("vsplit"))
def vsplit(a, sections):
    if len(a.shape) < 2:
        raise NotImplementedError("fewer than 2 dimensions")
    return _split_sections(a, sections, 0, "vsplit")


@register_decomposition(*_both("dsplit"))
def dsplit(a, sections):
    if len(a.shape) < 3:
        raise NotImplementedError("fewer than 3 dimensions")
    return _split_sections(a, sections, 2, "dsplit")


@register_decomposition(torch.ops.aten.slice.Tensor)
def aten_slice(a, dim=0, start=None, end=None, step=1):
    return ops.slice(a, dim, start, end, step)


@register_decomposition("method:__rmatmul__", torch.Tensor.__rmatmul__)
def rmatmul(a, b):
    return DECOMPOSITIONS[torch.matmul](b, a)
