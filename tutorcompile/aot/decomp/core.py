"""The core decompositions: torch-level calls (``F.gelu``, ``x.softmax(-1)``, ``a @ b``) -> prims.

A captured graph speaks PyTorch's whole vocabulary; the rest of the compiler speaks only the
few dozen prims of the op table. Each decomposition below says how one torch call is built
from prims, written ONCE against the virtualized ``ops`` namespace, so it runs under any
handler: under the graph handler it records prim nodes (that is how ``decompose`` in
``aot/prim_graph.py`` turns a torch graph into a prim graph), under the eager handler it
computes numbers (that is how the tests compare it with PyTorch). Gradients come for free:
every prim has a VJP rule, so a decomposed call is differentiable without a derivative rule
of its own.

A rule may decline a call it does not cover (``raise NotImplementedError``, e.g. ``div``
with a rounding mode on integers); the call then stays an extern PyTorch call.

This module holds the rules the course walks through: pointwise arithmetic and
activations, dtype casts, reductions and softmax, views and basic indexing, factories,
matrix products, convolution, attention, layer and batch normalisation, a loss. The long
tail is in the other modules of this package (``math.py``, ``nn.py``, ...); randomness
(dropout) in ``rng.py``.

Key pieces: the rules, registered with ``register_decomposition`` (``registry.py``) in the
one table, ``DECOMPOSITIONS``; ``batch_norm_functional`` (training-mode batch norm with the
running statistics as outputs instead of in-place updates); ``basic_index``/``apply_index``
(``a[index]`` with ints, slices, None and ``...``, as slices and squeezes).

Mirrors: torch/_decomp/decompositions.py and torch/_refs (rules written in smaller ops), and
torch/_functorch/aot_autograd.py's use of a decomposition table while tracing.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from ...fx.symbolic_shapes import SymInt
from ...ops import GraphValue, make_meta, ops
from ...ops.table import normalize_dim, slice_indices
from .helpers import _reduce, rounding_div
from .registry import (
    _both,
    _cast,
    _dims,
    _float,
    _is_t,
    extern_call,
    register_decomposition,
)
from .rng import dropout

# =======================================================================================
# Pointwise
# =======================================================================================

@register_decomposition(*_both("add"), operator.add, operator.iadd, "method:__add__",
                        "method:__radd__")
def add(a, b, *, alpha=1):
    if not _is_t(a) and not _is_t(b):
        return a + alpha * b
    return ops.add(a, b if alpha == 1 else ops.mul(b, alpha))


@register_decomposition(*_both("sub"), operator.sub, operator.isub, "method:__sub__")
def sub(a, b, *, alpha=1):
    if not _is_t(a) and not _is_t(b):
        return a - alpha * b
    return ops.sub(a, b if alpha == 1 else ops.mul(b, alpha))


@register_decomposition("method:__rsub__", *_both("rsub"))
def rsub(a, b, *, alpha=1):
    return sub(b, a, alpha=alpha)


@register_decomposition(*_both("mul"), operator.mul, operator.imul, "method:__mul__",
                        "method:__rmul__", *_both("multiply"))
def mul(a, b):
    return a * b if not _is_t(a) and not _is_t(b) else ops.mul(a, b)


@register_decomposition(*_both("div"), operator.truediv, operator.itruediv, *_both("true_divide"),
                        "method:__truediv__")
def div(a, b, *, rounding_mode=None):
    if rounding_mode is not None:
        return rounding_div(a, b, rounding_mode)
    return a / b if not _is_t(a) and not _is_t(b) else ops.div(a, b)


@register_decomposition("method:__rtruediv__")
def rtruediv(a, b):
    return ops.div(b, a)


@register_decomposition("method:__rpow__", torch.Tensor.__rpow__)
def rpow(a, b):
    """``b ** a``; for a number ``b > 0``: ``exp(a log b)`` (the pow prim wants a tensor
    base)."""
    if _is_t(b):
        return pow_(b, a)
    if b <= 0:
        raise NotImplementedError("number ** tensor needs a positive base")
    return ops.exp(ops.mul(_float(a), math.log(b)))


@register_decomposition(*_both("pow"), operator.pow, "method:__pow__")
def pow_(a, b):
    if not _is_t(a) and not _is_t(b):
        return a ** b
    if not _is_t(a):
        return rpow(b, a)
    if not _is_t(b) and b == 2:
        return ops.mul(a, a)
    return ops.pow(a, b)


@register_decomposition(*_both("neg"), operator.neg, "method:__neg__", *_both("negative"))
def neg(a):
    return -a if not _is_t(a) else ops.neg(a)


def _unary(name: str, rule: Callable, *extra: Any) -> None:
    register_decomposition(*_both(name), *extra)(rule)


_unary("exp", lambda a: ops.exp(_float(a)))
_unary("log", lambda a: ops.log(_float(a)))
_unary("sqrt", lambda a: ops.sqrt(_float(a)))
_unary("rsqrt", lambda a: ops.rsqrt(_float(a)))
_unary("abs", lambda a: ops.abs(a), operator.abs, "method:__abs__")
_unary("sin", lambda a: ops.sin(_float(a)))
_unary("cos", lambda a: ops.cos(_float(a)))
_unary("tanh", lambda a: ops.tanh(_float(a)), F.tanh)
_unary("sigmoid", lambda a: ops.sigmoid(_float(a)), F.sigmoid)
_unary("relu", lambda a, inplace=False: ops.relu(a), F.relu)
_unary("erf", lambda a: ops.erf(_float(a)))
_unary("square", lambda a: ops.mul(a, a))
_unary("reciprocal", lambda a: ops.div(1.0, _float(a)))
_unary("log1p", lambda a: ops.log(ops.add(_float(a), 1.0)))
_unary("expm1", lambda a: ops.sub(ops.exp(_float(a)), 1.0))
_unary("exp2", lambda a: ops.exp(ops.mul(_float(a), math.log(2.0))))


@register_decomposition(*_both("maximum"), *_both("max_elementwise"))
def maximum(a, b):
    return ops.maximum(a, b)


@register_decomposition(*_both("minimum"))
def minimum(a, b):
    return ops.minimum(a, b)


@register_decomposition(*_both("clamp"), *_both("clip"))
def clamp(a, min=None, max=None):  # noqa: A002 - PyTorch's argument names
    if min is not None:
        a = ops.maximum(a, min)
    if max is not None:
        a = ops.minimum(a, max)
    return a


@register_decomposition(*_both("clamp_min"))
def clamp_min(a, min):  # noqa: A002
    return ops.maximum(a, min)


@register_decomposition(*_both("where"))
def where(cond, a, b):
    return ops.where(cond, a, b)


for _name, _op in (("eq", operator.eq), ("ne", operator.ne), ("lt", operator.lt),
                   ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge)):
    register_decomposition(*_both(_name), _op, f"method:__{_name}__")(
        (lambda prim: lambda a, b: prim(a, b) if _is_t(a) or _is_t(b)
         else getattr(operator, prim.name)(a, b))(getattr(ops, _name)))


@register_decomposition(F.leaky_relu)
def leaky_relu(a, negative_slope=0.01, inplace=False):
    return ops.where(ops.gt(a, 0), a, ops.mul(a, negative_slope))


@register_decomposition(F.gelu)
def gelu(a, approximate="none"):
    """GELU: ``x * Phi(x)`` exactly (erf), or the tanh approximation."""
    if approximate == "tanh":
        inner = ops.mul(ops.add(a, ops.mul(ops.mul(ops.mul(a, a), a), 0.044715)),
                        math.sqrt(2.0 / math.pi))
        return ops.mul(ops.mul(a, 0.5), ops.add(ops.tanh(inner), 1.0))
    if approximate != "none":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return ops.mul(ops.mul(a, 0.5), ops.add(ops.erf(ops.mul(a, 1.0 / math.sqrt(2.0))), 1.0))


@register_decomposition(F.silu)
def silu(a, inplace=False):
    return ops.mul(a, ops.sigmoid(a))


# =======================================================================================
# Dtype casts
# =======================================================================================


@register_decomposition("method:to")
def to(a, *args, **kwargs):
    dtype = kwargs.get("dtype")
    for x in args:
        if isinstance(x, torch.dtype):
            dtype = x
        elif _is_t(x):
            dtype = x.dtype
        elif x is not None and not isinstance(x, (str, torch.device, bool)):
            raise NotImplementedError(f"to({x!r})")
    device = kwargs.get("device") or next(
        (x for x in args if isinstance(x, (str, torch.device))), None)
    if device is not None and torch.device(device) != a.device:
        raise NotImplementedError("to(device) moves data between devices")  # extern
    return a if dtype is None else _cast(a, dtype)


def _cast_method(dtype):
    """``t.float()``, ``t.long()``...: a cast (a memory format changes only strides, which a
    functional graph does not fix)."""
    def rule(a, memory_format=torch.preserve_format):
        return _cast(a, dtype)
    return rule


for _name, _dtype in (("float", torch.float32), ("double", torch.float64),
                      ("half", torch.float16), ("bfloat16", torch.bfloat16),
                      ("bool", torch.bool), ("byte", torch.uint8), ("char", torch.int8),
                      ("short", torch.int16), ("int", torch.int32), ("long", torch.int64)):
    register_decomposition(f"method:{_name}")(_cast_method(_dtype))
register_decomposition("method:type_as")(lambda a, other: _cast(a, other.dtype))


# Identities: in a functional graph a copy is the same value.
@register_decomposition("method:contiguous", *_both("clone"), "method:__pos__")
def identity(a, *args, **kwargs):
    return a


# =======================================================================================
# Reductions
# =======================================================================================

@register_decomposition(*_both("sum"))
def sum_(a, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        a = _cast(a, dtype)
    return ops.sum(a, _dims(a, dim), keepdim=keepdim)


@register_decomposition(*_both("mean"))
def mean(a, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        a = _cast(a, dtype)
    return ops.mean(a, _dims(a, dim), keepdim=keepdim)


@register_decomposition(*_both("amax"))
def amax(a, dim=(), keepdim=False):
    return ops.amax(a, _dims(a, dim) if dim != () else None, keepdim=keepdim)


@register_decomposition(*_both("var"))
def var(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):  # var(x, False): the old unbiased positional form
        dim, unbiased = None, dim
    if correction is None:
        correction = 0 if unbiased is False else 1
    return ops.var(a, _dims(a, dim), correction=correction, keepdim=keepdim)


@register_decomposition(*_both("std"))
def std(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return ops.sqrt(var(a, dim, unbiased, keepdim, correction=correction))


@register_decomposition(*_both("logsumexp"))
def logsumexp(a, dim, keepdim=False):
    dims = _dims(a, dim)
    m = ops.amax(a, dims, keepdim=True)
    # an infinite max (a row of -inf, or a +inf) shifts by 0: -inf - -inf would be NaN
    m = ops.where(ops.eq(ops.abs(m), math.inf), 0.0, m)
    out = ops.add(ops.log(ops.sum(ops.exp(ops.sub(a, m)), dims, keepdim=True)), m)
    return out if keepdim else ops.squeeze(out, dims)


def _row_max(a, dim: int):
    """The maximum that softmax subtracts for stability, *detached* when building a graph:
    softmax does not depend on it (``softmax(x - c) == softmax(x)`` for any ``c``), so its
    gradient is zero -- but differentiated through ``amax`` it is computed (an ``eq`` mask
    of the maxima, a count, a sum of terms that cancel) and ``amax``'s input saved for it
    on every training step. PyTorch's own softmax backward uses the output alone. The
    compiled kernel treats ``detach`` as the value itself; under other handlers (eager
    tensors) the plain maximum is returned."""
    m = ops.amax(a, (dim,), keepdim=True)
    if not isinstance(m, GraphValue):
        return m
    return extern_call(torch.Tensor.detach, (m,), {},
                       meta=make_meta(m.shape, m.dtype, m.device))


@register_decomposition(*_both("softmax"), F.softmax)
def softmax(a, dim=None, _stacklevel=3, dtype=None):
    if dtype is not None:
        a = _cast(a, dtype)
    dim = normalize_dim(dim if dim is not None else -1, len(a.shape))
    e = ops.exp(ops.sub(a, _row_max(a, dim)))
    return ops.div(e, ops.sum(e, (dim,), keepdim=True))


def safe_softmax(a, dim: int):
    """Softmax whose rows of only ``-inf`` (a fully masked attention row) give zeros, not
    NaN, as ATen's ``_safe_softmax`` (attention's math path): the shift and the divisor are
    made safe, so no NaN is formed (nor its gradient)."""
    dim = normalize_dim(dim, len(a.shape))
    m = _row_max(a, dim)
    e = ops.exp(ops.sub(a, ops.where(ops.eq(m, -math.inf), 0.0, m)))
    total = ops.sum(e, (dim,), keepdim=True)
    return ops.div(e, ops.where(ops.eq(total, 0), 1.0, total))


@register_decomposition(*_both("log_softmax"), F.log_softmax)
def log_softmax(a, dim=None, _stacklevel=3, dtype=None):
    if dtype is not None:
        a = _cast(a, dtype)
    dim = normalize_dim(dim if dim is not None else -1, len(a.shape))
    shifted = ops.sub(a, _row_max(a, dim))
    return ops.sub(shifted, ops.log(ops.sum(ops.exp(shifted), (dim,), keepdim=True)))


# =======================================================================================
# Views and data movement
# =======================================================================================

def _shape_args(shape) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
        shape = shape[0]
    return tuple(s if isinstance(s, SymInt) else int(s) for s in shape)


@register_decomposition("method:view", "method:reshape", torch.reshape)
def reshape(a, *shape):
    if len(shape) == 1 and isinstance(shape[0], torch.dtype):
        raise NotImplementedError("view(dtype) reinterprets bits")  # extern
    return ops.reshape(a, _shape_args(shape))


@register_decomposition("method:view_as", "method:reshape_as")
def view_as(a, other):
    return ops.reshape(a, tuple(other.shape))


@register_decomposition(*_both("permute"))
def permute(a, *dims):
    return ops.permute(a, _shape_args(dims))


@register_decomposition(*_both("transpose"), *_both("swapaxes"))
def transpose(a, dim0, dim1):
    if not a.shape:   # a 0-d tensor: PyTorch takes dims 0 and -1, and gives it back
        return a
    order = list(range(len(a.shape)))
    d0, d1 = normalize_dim(dim0, len(order)), normalize_dim(dim1, len(order))
    order[d0], order[d1] = order[d1], order[d0]
    return ops.permute(a, tuple(order))


@register_decomposition(*_both("t"))
def t(a):
    return a if len(a.shape) < 2 else transpose(a, 0, 1)


@register_decomposition("method:expand")
def expand(a, *shape):
    return ops.expand(a, _shape_args(shape))


@register_decomposition("method:expand_as")
def expand_as(a, other):
    return ops.expand(a, tuple(other.shape))


@register_decomposition(*_both("unsqueeze"))
def unsqueeze(a, dim):
    return ops.unsqueeze(a, dim)


@register_decomposition(*_both("squeeze"))
def squeeze(a, dim=None):
    return ops.squeeze(a, dim)


@register_decomposition(*_both("flatten"))
def flatten(a, start_dim=0, end_dim=-1):
    n = len(a.shape)
    if n == 0:
        return ops.reshape(a, (1,))
    s, e = normalize_dim(start_dim, n), normalize_dim(end_dim, n)
    shape = tuple(a.shape[:s]) + (math.prod(a.shape[s:e + 1]),) + tuple(a.shape[e + 1:])
    return ops.reshape(a, shape)


@register_decomposition(*_both("cat"), *_both("concat"))
def cat(tensors, dim=0):
    return ops.cat(list(tensors), dim)


@register_decomposition(*_both("stack"))
def stack(tensors, dim=0):
    dim = normalize_dim(dim, len(tensors[0].shape) + 1)
    return ops.cat([ops.unsqueeze(x, dim) for x in tensors], dim)


def basic_index(a, index) -> list[tuple]:
    """Normalise ``a[index]`` (ints, slices, None, ...) to per-dimension steps.

    Each step is ``("slice", dim, start, end, step)``, ``("select", dim, i)`` or
    ``("new", dim)``; dims refer to the tensor as it is *during* the walk. Tensor indices
    raise ``NotImplementedError`` (their callers fall back to extern or index_select).
    """
    if not isinstance(index, tuple):
        index = (index,)
    n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
    if any(i is Ellipsis for i in index):
        pos = index.index(Ellipsis)
        fill = (slice(None),) * (len(a.shape) - n_real)
        index = index[:pos] + fill + index[pos + 1:]
    steps: list[tuple] = []
    dim = src = 0
    for i in index:
        if i is None:
            steps.append(("new", dim))
            dim += 1
        elif isinstance(i, bool) or _is_t(i):
            raise NotImplementedError("advanced (tensor or bool) indexing")
        elif isinstance(i, int):
            size = a.shape[src]
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for dimension {src} with size "
                                 f"{size}")
            steps.append(("select", dim, i % size))
            src += 1
        elif isinstance(i, slice):
            start, end, step = slice_indices(i, a.shape[src]) if i.step is None or \
                i.step > 0 else (None, None, None)
            if step is None:
                raise NotImplementedError("negative slice steps")
            if not (i.start is None and i.stop is None and i.step is None):
                steps.append(("slice", dim, start, end, step))
            dim += 1
            src += 1
        else:
            raise NotImplementedError(f"index {i!r}")
    return steps


def apply_index(a, steps):
    for step in steps:
        if step[0] == "new":
            a = ops.unsqueeze(a, step[1])
        elif step[0] == "select":
            a = ops.squeeze(ops.slice(a, step[1], step[2], step[2] + 1, 1), (step[1],))
        else:
            a = ops.slice(a, *step[1:])
    return a


@register_decomposition(operator.getitem, "method:__getitem__", torch.Tensor.__getitem__)
def getitem(a, index):
    if _is_t(index) and len(index.shape) == 1 and index.dtype in (torch.int64, torch.int32) \
            and len(a.shape) >= 1:
        # Python indexing counts a negative index from the end; index_select does not
        index = ops.where(ops.lt(index, 0), ops.add(index, a.shape[0]), index)
        return ops.index_select(a, 0, index)
    return apply_index(a, basic_index(a, index))


@register_decomposition(*_both("narrow"))
def narrow(a, dim, start, length):
    return ops.slice(a, dim, start, start + length, 1)


@register_decomposition(*_both("select"))
def select(a, dim, index):
    d = normalize_dim(dim, len(a.shape))
    i = index % a.shape[d]
    return ops.squeeze(ops.slice(a, d, i, i + 1, 1), (d,))


@register_decomposition(*_both("index_select"))
def index_select(a, dim, index):
    return ops.index_select(a, dim, index)


@register_decomposition(F.embedding)
def embedding(index, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding options")  # extern
    flat = ops.reshape(index, (math.prod(index.shape),))
    rows = ops.index_select(weight, 0, flat)
    if padding_idx is not None:  # the padding row reads like any other, but gets no gradient
        pad = ops.unsqueeze(ops.eq(flat, padding_idx % weight.shape[0]), -1)
        frozen = extern_call(torch.Tensor.detach, (rows,), {},
                             meta=make_meta(rows.shape, rows.dtype, rows.device))
        rows = ops.where(pad, frozen, rows)
    return ops.reshape(rows, tuple(index.shape) + (weight.shape[1],))


# =======================================================================================
# Factories
# =======================================================================================

def _factory_shape(size) -> tuple:
    return _shape_args(size)


register_decomposition(torch.zeros)(
    lambda *size, dtype=None, device=None, **kw: ops.full(
        _factory_shape(size), 0.0, dtype=dtype or torch.get_default_dtype(), device=device))
register_decomposition(torch.ones)(
    lambda *size, dtype=None, device=None, **kw: ops.full(
        _factory_shape(size), 1.0, dtype=dtype or torch.get_default_dtype(), device=device))
register_decomposition(torch.full)(
    lambda size, fill_value, dtype=None, device=None, **kw: ops.full(
        tuple(size), fill_value, dtype=dtype, device=device))


@register_decomposition(torch.zeros_like, "method:new_zeros")
def zeros_like(a, *size, dtype=None, device=None, **kwargs):
    shape = _shape_args(size) if size else tuple(a.shape)
    return ops.full(shape, 0, dtype=dtype or a.dtype, device=device or a.device)


@register_decomposition(torch.ones_like, "method:new_ones")
def ones_like(a, *size, dtype=None, device=None, **kwargs):
    shape = _shape_args(size) if size else tuple(a.shape)
    return ops.full(shape, 1, dtype=dtype or a.dtype, device=device or a.device)


@register_decomposition(torch.full_like)
def full_like(a, fill_value, dtype=None, device=None, **kwargs):
    return ops.full(tuple(a.shape), fill_value, dtype=dtype or a.dtype,
                    device=device or a.device)


# =======================================================================================
# Matrix products
# =======================================================================================

@register_decomposition(*_both("matmul"), operator.matmul, "method:__matmul__")
def matmul(a, b):
    """``torch.matmul`` for any ranks: 1-d operands get a dimension and lose it again."""
    a1, b1 = len(a.shape) == 1, len(b.shape) == 1
    if a1:
        a = ops.unsqueeze(a, 0)
    if b1:
        b = ops.unsqueeze(b, 1)
    out = ops.matmul(a, b)
    if a1:
        out = ops.squeeze(out, (len(out.shape) - 2,))
    if b1:
        out = ops.squeeze(out, (len(out.shape) - 1,))
    return out


@register_decomposition(*_both("mm"), *_both("bmm"))
def mm(a, b):
    return ops.matmul(a, b)


@register_decomposition(*_both("addmm"))
def addmm(input, mat1, mat2, *, beta=1, alpha=1):   # (torch's names: callers use keywords)
    prod = ops.matmul(mat1, mat2)
    if alpha != 1:
        prod = ops.mul(prod, alpha)
    if beta == 0:
        return prod
    return ops.add(input if beta == 1 else ops.mul(input, beta), prod)


@register_decomposition(F.linear)
def linear(x, weight, bias=None):
    out = matmul(x, transpose(weight, 0, 1) if len(weight.shape) == 2 else weight)
    return out if bias is None else ops.add(out, bias)


def _conv(n: int):
    def rule(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        if isinstance(padding, str):
            raise NotImplementedError("string padding")  # extern
        if len(x.shape) == n + 1:  # an unbatched input: a batch of one, then drop it again
            out = ops.convolution(ops.unsqueeze(x, 0), weight, bias, stride, padding,
                                  dilation, groups)
            return ops.squeeze(out, (0,))
        return ops.convolution(x, weight, bias, stride, padding, dilation, groups)
    return rule


register_decomposition(F.conv1d, torch.conv1d)(_conv(1))
register_decomposition(F.conv2d, torch.conv2d)(_conv(2))
register_decomposition(F.conv3d, torch.conv3d)(_conv(3))


def _repeat_heads(x, heads):
    """``x.repeat_interleave(heads // x.shape[-3], dim=-3)``: key/value heads ``(..., h, S,
    D)`` spread over ``heads`` query heads, query head ``i`` reading head ``i // group``."""
    *batch, h, s, d = x.shape
    if heads % h:
        raise NotImplementedError("query heads not a multiple of key/value heads")
    spread = ops.expand(ops.unsqueeze(x, -3), (*batch, h, heads // h, s, d))
    return ops.reshape(spread, (*batch, heads, s, d))


@register_decomposition(F.scaled_dot_product_attention)
def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """ATen's math path (``_scaled_dot_product_attention_math``), the one a CPU takes whenever
    ``dropout_p > 0``: there the dropout is ``F.dropout`` of the softmax's probabilities, so
    :func:`dropout` below draws the same numbers. A GPU's fused kernels draw their own way:
    with dropout there the call stays an extern (PyTorch's kernel, its own draws)."""
    if dropout_p != 0.0 and torch.device(q.device).type != "cpu":
        raise NotImplementedError("attention dropout off the CPU")  # extern
    if enable_gqa:  # grouped-query attention: each key/value head serves a group of queries
        k, v = _repeat_heads(k, q.shape[-3]), _repeat_heads(v, q.shape[-3])
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = ops.mul(ops.matmul(q, transpose(k, -2, -1)), scale)
    L, S = q.shape[-2], k.shape[-2]
    if is_causal:
        # key j is seen by query i when j <= i (a lower triangle), for any (symbolic) L, S
        rows = ops.unsqueeze(ops.iota(L, device=q.device), -1)
        keep = ops.ge(rows, ops.iota(S, device=q.device))
        scores = ops.where(keep, scores, float("-inf"))
    if attn_mask is not None:
        scores = (ops.where(attn_mask, scores, float("-inf")) if attn_mask.dtype == torch.bool
                  else ops.add(scores, attn_mask))
    probs = softmax(scores, -1) if attn_mask is None else safe_softmax(scores, -1)
    return ops.matmul(dropout(probs, dropout_p), v)


# =======================================================================================
# Normalisation
# =======================================================================================

@register_decomposition(F.layer_norm)
def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    dims = tuple(range(len(x.shape) - len(tuple(normalized_shape)), len(x.shape)))
    mu = ops.mean(x, dims, keepdim=True)
    centered = ops.sub(x, mu)
    v = ops.mean(ops.mul(centered, centered), dims, keepdim=True)
    out = ops.mul(centered, ops.rsqrt(ops.add(v, eps)))
    if weight is not None:
        out = ops.mul(out, weight)
    if bias is not None:
        out = ops.add(out, bias)
    return _cast(out, x.dtype)  # bfloat16 x, float32 weight (autocast): PyTorch gives bf16


def _channel(v, ndim):
    """A per-channel vector shaped (C, 1, 1, ...) to broadcast against (N, C, ...)."""
    return ops.reshape(v, (v.shape[0],) + (1,) * (ndim - 2))


def batch_norm_functional(x, running_mean, running_var, weight=None, bias=None,
                          training=False, momentum=0.1, eps=1e-5):
    """``F.batch_norm`` without mutation: returns ``(out, new_running_mean, new_running_var)``.

    Functionalization rewrites a training-mode ``F.batch_norm`` (which updates the running
    statistics in place) into this, and copies the new statistics back after the graph runs.
    As a torch function it is also the eager reference.
    """
    if isinstance(x, torch.Tensor):  # eager: PyTorch on copies of the statistics
        rm = None if running_mean is None else running_mean.clone()
        rv = None if running_var is None else running_var.clone()
        out = F.batch_norm(x, rm, rv, weight, bias, training, momentum, eps)
        return out, rm, rv
    return _batch_norm_rule(x, running_mean, running_var, weight, bias, training, momentum,
                            eps)


def _batch_norm_rule(x, running_mean, running_var, weight, bias, training, momentum, eps):
    ndim = len(x.shape)
    if ndim < 2 or 0 in tuple(x.shape):
        # (PyTorch's own checks and messages for these: an empty batch, or no channels)
        raise NotImplementedError("an input without a channel dimension, or an empty one")
    dims = (0,) + tuple(range(2, ndim))
    new_mean, new_var = running_mean, running_var
    if training:
        mu = ops.mean(x, dims, keepdim=True)
        centered = ops.sub(x, mu)
        v = ops.mean(ops.mul(centered, centered), dims, keepdim=True)
        out = ops.mul(centered, ops.rsqrt(ops.add(v, eps)))
        if running_mean is not None:
            n = math.prod(x.shape[d] for d in dims)
            batch_mean = ops.reshape(mu, (x.shape[1],))
            unbiased = ops.mul(ops.reshape(v, (x.shape[1],)), n / max(n - 1, 1))
            new_mean = ops.add(ops.mul(running_mean, 1 - momentum), ops.mul(batch_mean, momentum))
            new_var = ops.add(ops.mul(running_var, 1 - momentum), ops.mul(unbiased, momentum))
    else:
        centered = ops.sub(x, _channel(running_mean, ndim))
        out = ops.mul(centered, _channel(ops.rsqrt(ops.add(running_var, eps)), ndim))
    if weight is not None:
        out = ops.mul(out, _channel(weight, ndim))
    if bias is not None:
        out = ops.add(out, _channel(bias, ndim))
    return out, new_mean, new_var


@register_decomposition(batch_norm_functional)
def _bn_functional_rule(x, running_mean, running_var, weight=None, bias=None, training=False,
                        momentum=0.1, eps=1e-5):
    return _batch_norm_rule(x, running_mean, running_var, weight, bias, training, momentum, eps)


@register_decomposition(F.batch_norm)
def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    # Only reached without running statistics to update (functionalization rewrote the rest).
    return _batch_norm_rule(x, running_mean, running_var, weight, bias, training, momentum,
                            eps)[0]


# =======================================================================================
# Losses (the rest, and cross_entropy, are in nn.py)
# =======================================================================================

@register_decomposition(F.mse_loss)
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):  # noqa: A002
    if size_average is not None or reduce is not None or weight is not None:
        raise NotImplementedError("legacy mse_loss arguments")  # extern
    d = ops.sub(input, target)
    return _reduce(ops.mul(d, d), reduction)
