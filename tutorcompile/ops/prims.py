"""The prim table: every primitive op of the compiler, one declaration each.

Each ``register(...)`` below is the *whole* definition of an op: its PyTorch reference, its
shape/dtype rule, its kind, its derivative, and (for pointwise ops) how to spell it in
Triton and C++. Adding an op to the compiler means adding one entry here; the eager handler,
the graph builder, the tape autograd, AOT's joint graphs and the kernel generators all read
this table instead of keeping their own lists.

Derivatives are vector-Jacobian products: ``vjp(g, out, *args, **kwargs)`` receives the
gradient ``g`` of the output, the output ``out`` itself (handy for ``exp``, ``tanh``,
``sigmoid``, whose derivatives are cheapest in terms of the result) and the op's arguments;
it returns one gradient per positional argument, in order (``None`` for arguments that are
constants or not differentiable, a list for a list argument such as ``cat``'s); trailing
constant arguments (dims, shapes) may be left out. A rule may return a
gradient *bigger* than its input when the forward broadcast it: ``autodiff.vjp`` sums every
gradient back to its input's shape, so broadcasting is handled once, not in every rule.

Rules are written against the virtualized ``ops`` namespace, never against ``torch``, so the
same rule computes numbers (eager handler), records a backward graph (graph handler), or one
day emits code.

Generated graph code prints these as ``prims.add(x, y)``.

Mirrors: torch/_prims/__init__.py (the prim set), torch/_refs (references),
tools/autograd/derivatives.yaml (the derivative rules), and TorchInductor's
``TritonOverrides`` / ``CppOverrides`` (the spellings).
"""

from __future__ import annotations

import builtins
import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from ..fx.codegen import register_module_alias
from .table import (
    PRIMS,
    Prim,
    binary_meta,
    broadcast_shapes,
    comparison_meta,
    float_meta,
    is_tensor_like,
    normalize_dim,
    normalize_dims,
    promote_types,
    reduction_meta,
    same_meta,
    slice_indices,
    true_divide_meta,
    where_meta,
)
from .virtualized import ops

_module = sys.modules[__name__]
# Prims are module attributes (``prims.sum``, ``prims.slice``, ``prims.abs``), so they shadow
# the builtins of the same names in this file: code here says ``builtins.sum`` when it means it.


if TYPE_CHECKING:   # prims.<name> is set by register(): each is a Prim
    def __getattr__(name: str) -> Prim: ...


def register(name: str, kind: str, reference, meta, vjp=None, triton: str | None = None,
             cpp: str | None = None, doc: str = "") -> Prim:
    """Declare a prim: add it to the table and make it ``prims.<name>``."""
    if name in PRIMS:
        raise ValueError(f"prim {name!r} is declared twice")
    prim = Prim(name, kind, reference, meta, vjp, triton, cpp, doc)
    PRIMS[name] = prim
    setattr(_module, name, prim)
    return prim


# Small helpers the VJP rules share (all written with ops.*, so they work under any handler).

def zeros_like(x: Any) -> Any:
    return ops.full(tuple(x.shape), 0.0, dtype=x.dtype, device=x.device)


def transpose_last(x: Any) -> Any:
    """Swap the last two dimensions (``x.mT``)."""
    order = list(range(len(x.shape)))
    order[-1], order[-2] = order[-2], order[-1]
    return ops.permute(x, tuple(order))


def keepdim_shape(shape: Sequence[int], dims: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


def unreduce(g: Any, a: Any, dims: Any, keepdim: bool) -> Any:
    """Put the reduced dimensions back as size 1 so ``g`` broadcasts against ``a``."""
    dims = normalize_dims(dims, len(a.shape))
    if keepdim or not dims:
        return g
    return ops.reshape(g, keepdim_shape(a.shape, dims))


def _numel(shape: Sequence[int], dims: tuple[int, ...]) -> int:
    return math.prod(shape[d] for d in dims)


def _is_float(x: Any) -> bool:
    return is_tensor_like(x) and (x.dtype.is_floating_point or x.dtype.is_complex)


# =======================================================================================
# Pointwise: elementwise on broadcast inputs. Spellings: Triton | C++.
# (libdevice functions such as tanh fail under the Triton CPU interpreter, so tanh is
# spelled through sigmoid: tanh(x) = 2 sigmoid(2x) - 1.)
# =======================================================================================

def _with_scalars(fn):
    """Let either operand be a Python number (``torch.gt(0.5, t)`` and ``torch.maximum(t, 0.5)``
    refuse one): it becomes a 0-d tensor of the dtype the op computes in, so neither the
    result dtype nor the number's precision changes."""
    def reference(a, b):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            return fn(a, b)
        dtype = promote_types(a, b)  # the number in the dtype the op computes in
        if not isinstance(a, torch.Tensor):
            a = torch.as_tensor(a, dtype=dtype, device=b.device)
        if not isinstance(b, torch.Tensor):
            b = torch.as_tensor(b, dtype=dtype, device=a.device)
        return fn(a, b)
    reference.__name__ = fn.__name__
    return reference


register("add", "pointwise", _with_scalars(torch.add), binary_meta,
         vjp=lambda g, out, a, b: (g, g),
         triton="({0} + {1})", cpp="({0} + {1})")
register("sub", "pointwise", _with_scalars(torch.sub), binary_meta,
         vjp=lambda g, out, a, b: (g, ops.neg(g)),
         triton="({0} - {1})", cpp="({0} - {1})")
register("mul", "pointwise", _with_scalars(torch.mul), binary_meta,
         vjp=lambda g, out, a, b: (ops.mul(g, b), ops.mul(g, a)),
         triton="({0} * {1})", cpp="({0} * {1})")
register("div", "pointwise", _with_scalars(torch.div), true_divide_meta,
         vjp=lambda g, out, a, b: (ops.div(g, b), ops.neg(ops.div(ops.mul(g, out), b))),
         triton="({0} / {1})", cpp="({0} / {1})")
register("neg", "pointwise", torch.neg, same_meta,
         vjp=lambda g, out, a: (ops.neg(g),),
         triton="(-{0})", cpp="(-{0})")


def _pow_vjp(g, out, a, b):
    grad_a = ops.mul(ops.mul(g, b), ops.pow(a, ops.sub(b, 1) if is_tensor_like(b) else b - 1))
    if not _is_float(b):
        return grad_a, None
    # d/db a**b = a**b log(a); PyTorch defines it as 0 where a == 0 (and b >= 0).
    grad_b = ops.where(ops.eq(a, 0), 0.0, ops.mul(ops.mul(g, out), ops.log(a)))
    return grad_a, grad_b


# Triton has no pow the interpreter can run (libdevice's is an extern call), so a ** b is
# exp2(log2(a) * b) -- NaN for a < 0, where an integer b has an answer: |a| ** b with b's
# parity as the sign (x ** 3 in GPT-2's tanh GELU). `_B` makes b a tensor of the operands'
# shape, so the rounding functions accept a number written into the kernel too; no `&` either,
# which a number's comparison (a Python bool) would turn into a float.
_B = "(tl.zeros_like({0} + {1}) + {1})"   # a number or a tensor base alike
_POW_TRITON = (f"tl.where({_B} == 0, 1.0, tl.where({{0}} < 0, tl.where(tl.math.floor({_B}) "
               f"== {_B}, (1.0 - 2.0 * ({_B} - 2.0 * tl.math.floor({_B} * 0.5))) "
               f"* tl.exp2(tl.log2(-{{0}}) * {_B}), float('nan')), "
               f"tl.exp2(tl.log2({{0}}) * {_B})))")
register("pow", "pointwise", torch.pow, binary_meta, vjp=_pow_vjp,
         triton=_POW_TRITON, cpp="std::pow({0}, {1})",
         doc="a ** b; a negative a with an integer b too (its sign from b's parity).")
register("exp", "pointwise", torch.exp, float_meta,
         vjp=lambda g, out, a: (ops.mul(g, out),),
         triton="tl.exp({0})", cpp="simd_exp({0})")
register("log", "pointwise", torch.log, float_meta,
         vjp=lambda g, out, a: (ops.div(g, a),),
         triton="tl.log({0})", cpp="std::log({0})")
register("sqrt", "pointwise", torch.sqrt, float_meta,
         vjp=lambda g, out, a: (ops.div(g, ops.mul(out, 2.0)),),
         triton="tl.sqrt({0})", cpp="std::sqrt({0})")
register("rsqrt", "pointwise", torch.rsqrt, float_meta,
         # d/da a^(-1/2) = -1/2 a^(-3/2) = -1/2 out^3
         vjp=lambda g, out, a: (ops.mul(ops.mul(g, -0.5), ops.mul(out, ops.mul(out, out))),),
         triton="tl.math.rsqrt({0})", cpp="(1 / std::sqrt({0}))")


def _abs_vjp(g, out, a):
    # sign(a) * g, with 0 at a == 0 as in PyTorch
    return (ops.where(ops.gt(a, 0), g, ops.where(ops.lt(a, 0), ops.neg(g), 0.0)),)


def _abs_meta(a):
    """abs keeps the dtype, except that the modulus of a complex number is real."""
    return tuple(a.shape), a.dtype.to_real() if a.dtype.is_complex else a.dtype


register("abs", "pointwise", torch.abs, _abs_meta, vjp=_abs_vjp,
         triton="tl.abs({0})", cpp="std::abs({0})")
register("sin", "pointwise", torch.sin, float_meta,
         vjp=lambda g, out, a: (ops.mul(g, ops.cos(a)),),
         triton="tl.sin({0})", cpp="std::sin({0})")
register("cos", "pointwise", torch.cos, float_meta,
         vjp=lambda g, out, a: (ops.neg(ops.mul(g, ops.sin(a))),),
         triton="tl.cos({0})", cpp="std::cos({0})")
register("tanh", "pointwise", torch.tanh, float_meta,
         vjp=lambda g, out, a: (ops.mul(g, ops.sub(1.0, ops.mul(out, out))),),
         triton="(2 * tl.sigmoid(2 * {0}) - 1)", cpp="std::tanh({0})")
register("sigmoid", "pointwise", torch.sigmoid, float_meta,
         vjp=lambda g, out, a: (ops.mul(g, ops.mul(out, ops.sub(1.0, out))),),
         triton="tl.sigmoid({0})", cpp="(1 / (1 + simd_exp(-{0})))")
# NaN: relu(NaN) is NaN and its gradient passes (PyTorch's threshold_backward zeroes only
# where the output is <= 0); std::max(NaN, 0) keeps its first argument, Triton's maximum
# drops a NaN on a GPU unless told to propagate it. (decay_t: the operand may be an lvalue,
# a tiled reduction's accumulator ``acc0[xi]``, whose decltype is a reference.)
register("relu", "pointwise", torch.relu, same_meta,
         vjp=lambda g, out, a: (ops.where(ops.le(out, 0), 0.0, g),),
         triton="tl.maximum({0}, 0, propagate_nan=tl.PropagateNan.ALL)",
         cpp="std::max({0}, std::decay_t<decltype({0})>(0))")
register("erf", "pointwise", torch.erf, float_meta,
         vjp=lambda g, out, a: (ops.mul(g, ops.mul(ops.exp(ops.neg(ops.mul(a, a))),
                                                   2.0 / math.sqrt(math.pi))),),
         triton="tl.math.erf({0})", cpp="std::erf({0})")


register("floor", "pointwise", torch.floor, same_meta,
         vjp=lambda g, out, a: (zeros_like(a),),
         triton="tl.math.floor({0})", cpp="std::floor({0})",
         doc="Round down; piecewise constant, so its gradient is zero.")
register("ceil", "pointwise", torch.ceil, same_meta,
         vjp=lambda g, out, a: (zeros_like(a),),
         triton="tl.math.ceil({0})", cpp="std::ceil({0})",
         doc="Round up; piecewise constant, so its gradient is zero.")


def _minmax_vjp(pick_a):
    """maximum/minimum: the gradient goes to the chosen input; ties split it in half. As
    PyTorch writes it, an input gets nothing only where it strictly lost, so with a NaN
    (no comparison holds) both inputs get the whole gradient."""
    def vjp(g, out, a, b):
        share = ops.where(ops.eq(a, b), ops.mul(g, 0.5), g)
        ga = ops.where(pick_a(b, a), 0.0, share)
        gb = ops.where(pick_a(a, b), 0.0, share)
        return (ga if is_tensor_like(a) else None), (gb if is_tensor_like(b) else None)
    return vjp


register("maximum", "pointwise", _with_scalars(torch.maximum), binary_meta,
         vjp=_minmax_vjp(lambda x, y: ops.gt(x, y)),
         triton="tl.maximum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
         cpp="tc_maximum({0}, {1})")
register("minimum", "pointwise", _with_scalars(torch.minimum), binary_meta,
         vjp=_minmax_vjp(lambda x, y: ops.lt(x, y)),
         triton="tl.minimum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
         cpp="tc_minimum({0}, {1})")
register("where", "pointwise", torch.where, where_meta,
         vjp=lambda g, out, c, a, b: (None, ops.where(c, g, 0.0), ops.where(c, 0.0, g)),
         triton="tl.where({0}, {1}, {2})", cpp="({0} ? {1} : {2})")

_no_grad2 = lambda g, out, a, b: (None, None)  # comparisons: piecewise constant
for _name, _sym in (("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"),
                    ("ge", ">=")):
    register(_name, "pointwise", _with_scalars(getattr(torch, _name)), comparison_meta,
             vjp=_no_grad2,
             triton=f"({{0}} {_sym} {{1}})", cpp=f"({{0}} {_sym} {{1}})")


for _name, _tsym, _csym in (("logical_and", "&", "&&"), ("logical_or", "|", "||"),
                            ("logical_xor", "^", "!=")):
    register(_name, "pointwise", _with_scalars(getattr(torch, _name)), comparison_meta,
             vjp=_no_grad2, triton=f"({{0}} {_tsym} {{1}})", cpp=f"({{0}} {_csym} {{1}})",
             doc=f"``torch.{_name}`` of two bool tensors (decompositions compare other "
                 "dtypes with zero first).")


def _cast_meta(a, dtype):
    return tuple(a.shape), dtype


def _cast_vjp(g, out, a, dtype):
    return (ops.convert_element_type(g, a.dtype) if _is_float(a) else None,)


register("convert_element_type", "pointwise", lambda a, dtype: a.to(dtype), _cast_meta,
         vjp=_cast_vjp, triton="{0}.to({dtype})", cpp="static_cast<{dtype}>({0})",
         doc="Cast to ``dtype`` (``x.to(dtype)``).")


# =======================================================================================
# Reductions over ``dims`` (None: all). An empty dims tuple reduces nothing.
# =======================================================================================

def _sum_ref(a, dims=None, keepdim=False):
    dims = normalize_dims(dims, a.ndim)
    if not dims:
        return a.to(reduction_meta(a, dims, keepdim, integer_to_int64=True)[1])
    return torch.sum(a, dims, keepdim=keepdim)


def _amax_ref(a, dims=None, keepdim=False):
    dims = normalize_dims(dims, a.ndim)
    return torch.amax(a, dims, keepdim=keepdim) if dims else a.clone()


def _mean_ref(a, dims=None, keepdim=False):
    dims = normalize_dims(dims, a.ndim)
    return torch.mean(a, dims, keepdim=keepdim) if dims else a.clone()


def _var_ref(a, dims=None, correction=1, keepdim=False):
    dims = _var_dims(dims, a.ndim)
    return torch.var(a, dims, correction=correction, keepdim=keepdim)


def _var_dims(dims, ndim):
    dims = normalize_dims(dims, ndim)
    if not dims and ndim:
        raise ValueError("var: needs at least one dimension to reduce (dims=None means all)")
    return dims


def _amax_vjp(g, out, a, dims=None, keepdim=False):
    # The gradient goes to the elements equal to the max, shared evenly among ties.
    out_k, g_k = unreduce(out, a, dims, keepdim), unreduce(g, a, dims, keepdim)
    mask = ops.convert_element_type(ops.eq(a, out_k), g.dtype)
    count = ops.sum(mask, normalize_dims(dims, len(a.shape)), keepdim=True)
    return (ops.mul(ops.div(g_k, count), mask),)


def _count(n: Any) -> Any:
    """An element count as a divisor: a float, or a symbolic size the graph computes."""
    return float(n) if isinstance(n, int) else n


def _var_vjp(g, out, a, dims=None, correction=1, keepdim=False):
    dims = normalize_dims(dims, len(a.shape))
    n = _numel(a.shape, dims)
    centered = ops.sub(a, ops.mean(a, dims, keepdim=True))
    scale = 2.0 / (n - correction) if n > correction else float("inf")
    return (ops.mul(ops.mul(unreduce(g, a, dims, keepdim), centered), scale),)


register("sum", "reduction", _sum_ref,
         lambda a, dims=None, keepdim=False: reduction_meta(a, dims, keepdim, True),
         vjp=lambda g, out, a, dims=None, keepdim=False: (unreduce(g, a, dims, keepdim),))
register("amax", "reduction", _amax_ref,
         lambda a, dims=None, keepdim=False: reduction_meta(a, dims, keepdim),
         vjp=_amax_vjp)
register("mean", "reduction", _mean_ref,
         lambda a, dims=None, keepdim=False: reduction_meta(a, dims, keepdim,
                                                            need_float="mean"),
         vjp=lambda g, out, a, dims=None, keepdim=False: (
             ops.div(unreduce(g, a, dims, keepdim),
                     _count(_numel(a.shape, normalize_dims(dims, len(a.shape))))),))
register("var", "reduction", _var_ref,
         lambda a, dims=None, correction=1, keepdim=False: reduction_meta(
             a, _var_dims(dims, len(a.shape)), keepdim, need_float="var"),
         vjp=_var_vjp, doc="Variance with Bessel's ``correction`` (1: unbiased).")


# =======================================================================================
# Views and data movement: no arithmetic, only where elements go.
# =======================================================================================

def _reshape_meta(a, shape):
    shape = tuple(shape)
    numel = math.prod(a.shape)
    if shape.count(-1) > 1:
        raise ValueError(f"reshape: only one dimension can be -1, got {shape}")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or numel % known:
            raise ValueError(f"reshape: cannot infer -1 in {shape} for {numel} elements")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    if math.prod(shape) != numel:
        raise ValueError(f"reshape: shape {shape} has {math.prod(shape)} elements, the input "
                         f"{tuple(a.shape)} has {numel}")
    return shape, a.dtype


def _permute_meta(a, dims):
    ndim = len(a.shape)
    dims = tuple(normalize_dim(d, ndim) for d in dims)
    if sorted(dims) != list(range(ndim)):
        raise ValueError(f"permute: {dims} is not a permutation of the {ndim} dimensions")
    return tuple(a.shape[d] for d in dims), a.dtype


def _permute_vjp(g, out, a, dims):
    ndim = len(a.shape)
    inverse = [0] * ndim
    for i, d in enumerate(dims):
        inverse[normalize_dim(d, ndim)] = i
    return (ops.permute(g, tuple(inverse)),)


def _expand_meta(a, shape):
    shape = tuple(shape)
    if len(shape) < len(a.shape):
        raise ValueError(f"expand: target {shape} has fewer dimensions than {tuple(a.shape)}")
    lead = len(shape) - len(a.shape)
    out = list(shape)
    for i, size in enumerate(a.shape):
        want = shape[lead + i]
        if want == -1:
            out[lead + i] = size
        elif type(size) is int and size == 1:   # (a literal 1 stretches to anything)
            continue
        elif size != want and size != 1:   # (a size kept as it is decides nothing)
            raise ValueError(f"expand: cannot expand size {size} to {want} in dimension "
                             f"{lead + i}")
    if any(s < 0 for s in out):
        raise ValueError(f"expand: -1 is not allowed for new leading dimensions in {shape}")
    return tuple(out), a.dtype


def _squeeze_meta(a, dims=None):
    dims = normalize_dims(dims, len(a.shape))
    return tuple(s for i, s in enumerate(a.shape) if not (i in dims and s == 1)), a.dtype


def _unsqueeze_meta(a, dim):
    ndim = len(a.shape) + 1
    dim = normalize_dim(dim, ndim)
    shape = list(a.shape)
    shape.insert(dim, 1)
    return tuple(shape), a.dtype


def _slice_meta(a, dim, start=None, end=None, step=1):
    dim = normalize_dim(dim, len(a.shape))
    if step < 1:
        raise ValueError(f"slice: step must be positive, got {step}")
    shape = list(a.shape)
    shape[dim] = slice_length(shape[dim], start, end, step)
    return tuple(shape), a.dtype


def slice_length(size: Any, start: Any, end: Any, step: int) -> Any:
    """How many elements ``[start:end:step]`` takes from ``size`` (symbolic sizes too)."""
    if all(v is None or isinstance(v, int) for v in (size, start, end)):
        return len(range(*builtins.slice(start, end, step).indices(size)))
    start, end, step = slice_indices(builtins.slice(start, end, step), size)
    return max(0, (end - start + step - 1) // step)


def _slice_ref(a, dim, start=None, end=None, step=1):
    dim = normalize_dim(dim, a.ndim)
    return a[(builtins.slice(None),) * dim + (builtins.slice(start, end, step),)]


def _slice_scatter_meta(base, src, dim, start=None, end=None, step=1):
    expected, _ = _slice_meta(base, dim, start, end, step)
    if tuple(src.shape) != expected:
        raise ValueError(f"slice_scatter: src has shape {tuple(src.shape)}, the slice has "
                         f"{expected}")
    return tuple(base.shape), base.dtype


def _slice_scatter_ref(base, src, dim, start=None, end=None, step=1):
    if base.is_complex() or src.is_complex():
        # written as a copy into a slice of a clone: PyTorch's autograd has no complex
        # formula for slice_scatter, and a complex prim's gradient is PyTorch's autograd
        # of this reference (``aot/joint.py``'s ``extern_backward``; neuralop's FNO writes
        # its low Fourier modes into a complex buffer so)
        out = base.clone()
        _slice_ref(out, dim, start, end, step).copy_(src)
        return out
    return torch.slice_scatter(base, src, normalize_dim(dim, base.ndim), start, end, step)


def _index_select_meta(a, dim, index):
    if len(index.shape) != 1 or index.dtype not in (torch.int64, torch.int32):
        raise TypeError("index_select: index must be a 1-d integer tensor")
    dim = normalize_dim(dim, len(a.shape))
    shape = list(a.shape)
    if shape:
        shape[dim] = index.shape[0]
    return tuple(shape), a.dtype


def _index_add_meta(base, dim, index, src):
    expected, _ = _index_select_meta(base, dim, index)
    if tuple(src.shape) != expected:
        raise ValueError(f"index_add: src has shape {tuple(src.shape)}, expected {expected}")
    return tuple(base.shape), promote_types(base, src)


def _skipped_by_cat(t, ndim: int) -> bool:
    """``torch.cat`` skips a 1-d empty tensor beside tensors of higher rank (legacy rule:
    transformers' key/value caches start as ``torch.tensor([])``)."""
    return ndim != 1 and tuple(t.shape) == (0,)


def _cat_meta(tensors, dim=0):
    if not tensors:
        raise ValueError("cat: needs at least one tensor")
    ndim = builtins.max(len(t.shape) for t in tensors)
    kept = [t for t in tensors if not _skipped_by_cat(t, ndim)]
    first = tuple(kept[0].shape)
    dim = normalize_dim(dim, len(first))
    for t in kept[1:]:
        s = tuple(t.shape)
        if len(s) != len(first) or any(x != y for i, (x, y) in enumerate(zip(s, first))
                                       if i != dim):
            raise ValueError(f"cat: shapes {[tuple(t.shape) for t in tensors]} differ outside "
                             f"dimension {dim}")
    shape = list(first)
    shape[dim] = builtins.sum(t.shape[dim] for t in kept)
    return tuple(shape), promote_types(*tensors)


def _cat_vjp(g, out, tensors, dim=0):
    ndim = len(out.shape)
    dim = normalize_dim(dim, ndim)
    grads, offset = [], 0
    for t in tensors:
        if _skipped_by_cat(t, ndim):
            grads.append(ops.full((0,), 0.0, dtype=g.dtype, device=g.device))
            continue
        size = t.shape[dim]
        grads.append(ops.slice(g, dim, offset, offset + size, 1))
        offset += size
    return (grads,)


register("reshape", "view", torch.reshape, _reshape_meta,
         vjp=lambda g, out, a, shape: (ops.reshape(g, tuple(a.shape)),))
register("permute", "view", torch.permute, _permute_meta, vjp=_permute_vjp)
register("expand", "view", lambda a, shape: a.expand(tuple(shape)), _expand_meta,
         # the gradient of a broadcast is a sum; autodiff.vjp's sum_to_shape does it
         vjp=lambda g, out, a, shape: (g,))
register("squeeze", "view",
         lambda a, dims=None: torch.squeeze(a, normalize_dims(dims, a.ndim)), _squeeze_meta,
         vjp=lambda g, out, a, dims=None: (ops.reshape(g, tuple(a.shape)),))
register("unsqueeze", "view", torch.unsqueeze, _unsqueeze_meta,
         vjp=lambda g, out, a, dim: (ops.reshape(g, tuple(a.shape)),))
register("slice", "view", _slice_ref, _slice_meta,
         vjp=lambda g, out, a, dim, start=None, end=None, step=1: (
             ops.slice_scatter(zeros_like(a), g, dim, start, end, step),),
         doc="``a[..., start:end:step, ...]`` along ``dim``.")
register("slice_scatter", "view", _slice_scatter_ref, _slice_scatter_meta,
         vjp=lambda g, out, base, src, dim, start=None, end=None, step=1: (
             ops.slice_scatter(g, zeros_like(src), dim, start, end, step),
             ops.slice(g, dim, start, end, step)),
         doc="A copy of ``base`` with the slice replaced by ``src`` (slice's gradient).")
register("index_select", "view", torch.index_select, _index_select_meta,
         vjp=lambda g, out, a, dim, index: (ops.index_add(zeros_like(a), dim, index, g),
                                            None))
register("index_add", "extern", torch.index_add, _index_add_meta,
         vjp=lambda g, out, base, dim, index, src: (g, None, None,
                                                  ops.index_select(g, dim, index)),
         doc="A copy of ``base`` with ``src`` rows added at ``index`` (index_select's "
             "gradient). A scatter with repeated indices: extern, PyTorch runs it.")
register("cat", "view", torch.cat, _cat_meta, vjp=_cat_vjp)


# =======================================================================================
# Factories: tensors made from nothing (the zeros that gradients of slices start from).
# =======================================================================================

def _full_ref(shape, fill_value, dtype=None, device=None):
    return torch.full(tuple(shape), fill_value, dtype=dtype, device=device)


def _full_meta(shape, fill_value, dtype=None, device=None):
    if dtype is None:
        dtype = promote_types(torch.empty((), dtype=torch.bool, device="meta"), fill_value)
    return tuple(shape), dtype


register("full", "factory", _full_ref, _full_meta,
         vjp=lambda g, out, shape, fill_value, dtype=None, device=None: (None, None))


def _iota_ref(length, start=0, step=1, dtype=torch.int64, device=None):
    return torch.arange(start, start + step * length, step, dtype=dtype, device=device)


register("iota", "factory", _iota_ref,
         lambda length, start=0, step=1, dtype=torch.int64, device=None: ((length,), dtype),
         vjp=lambda g, out, length, start=0, step=1, dtype=None, device=None: (None,),
         doc="``start, start + step, ...`` (``length`` values): the positions that argmax, "
             "one-hot masks and triangular masks compare against. A kernel computes it from "
             "the loop index instead of reading memory.")


# =======================================================================================
# Extern ops: always run by PyTorch (a library call), even in generated code.
# =======================================================================================

def _matmul_meta(a, b):
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise ValueError("matmul: the prim takes tensors of 2 or more dimensions; unsqueeze "
                         f"1-d operands first (got {tuple(a.shape)} @ {tuple(b.shape)})")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: inner sizes differ: {tuple(a.shape)} @ {tuple(b.shape)}")
    batch = broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    return batch + (a.shape[-2], b.shape[-1]), promote_types(a, b)


def _matmul_vjp(g, out, a, b):
    """``a @ b``'s gradients: ``g @ bᵀ`` and ``aᵀ @ g``, batched as the product was.

    One case is folded: a batched ``a`` times a matrix ``b`` (``nn.Linear`` on a
    ``(batch, time, features)`` input). ``b``'s gradient is the sum over the batch of
    ``aᵢᵀ @ gᵢ``, which is one matrix product of the flattened operands,
    ``(B·M, K)ᵀ @ (B·M, N)`` -- one BLAS call with a long inner dimension, where the batched
    form makes ``B`` small products of ``(K, N)`` each and then a kernel that sums them
    (``B`` times the memory, and a pass over it). ``at::matmul`` folds the same way in its
    forward, which is why eager's backward of a linear layer is two ``mm`` calls.

    Mirrors: aten/src/ATen/native/LinearAlgebra.cpp (``_matmul_impl``, ``should_fold``)."""
    grad_a = ops.matmul(g, transpose_last(b))
    if len(a.shape) > 2 and len(b.shape) == 2:
        rows = math.prod(a.shape[:-1])
        flat_a = ops.reshape(a, (rows, a.shape[-1]))
        flat_g = ops.reshape(g, (rows, g.shape[-1]))
        return grad_a, ops.matmul(transpose_last(flat_a), flat_g)
    return grad_a, ops.matmul(transpose_last(a), g)


register("matmul", "extern", torch.matmul, _matmul_meta, vjp=_matmul_vjp,
         doc="Batched matrix product; batch dimensions broadcast.")


def _tuple(v: int | Sequence[int], n: int) -> tuple[int, ...]:
    return (v,) * n if isinstance(v, int) else tuple(v)


def _conv_args(x, stride, padding, dilation):
    n = len(x.shape) - 2
    return n, _tuple(stride, n), _tuple(padding, n), _tuple(dilation, n)


def _conv_ref(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    n, stride, padding, dilation = _conv_args(x, stride, padding, dilation)
    return torch.convolution(x, weight, bias, stride, padding, dilation, False, (0,) * n,
                             groups)


def _conv_meta(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    n, stride, padding, dilation = _conv_args(x, stride, padding, dilation)
    if len(weight.shape) != n + 2 or x.shape[1] != weight.shape[1] * groups:
        raise ValueError(f"convolution: input {tuple(x.shape)} and weight "
                         f"{tuple(weight.shape)} do not match (groups={groups})")
    spatial = tuple((x.shape[2 + i] + 2 * padding[i] - dilation[i] * (weight.shape[2 + i] - 1)
                     - 1) // stride[i] + 1 for i in range(n))
    return (x.shape[0], weight.shape[0]) + spatial, promote_types(x, weight)


def _conv_vjp(g, out, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    grad_x = ops.convolution_backward_input(g, weight, tuple(x.shape), stride, padding,
                                            dilation, groups)
    grad_w = ops.convolution_backward_weight(g, x, tuple(weight.shape), stride, padding,
                                             dilation, groups)
    grad_b = None
    if bias is not None:
        grad_b = ops.sum(g, (0,) + tuple(range(2, len(out.shape))))
    return grad_x, grad_w, grad_b


def _conv_backward(g, x, weight, stride, padding, dilation, groups, mask):
    n, stride, padding, dilation = _conv_args(x, stride, padding, dilation)
    return torch.ops.aten.convolution_backward(g, x, weight, None, stride, padding, dilation,
                                               False, [0] * n, groups, mask)


def _conv_input_ref(g, weight, input_shape, stride=1, padding=0, dilation=1, groups=1):
    x = g.new_zeros(()).expand(tuple(input_shape))  # only its shape is read
    return _conv_backward(g, x, weight, stride, padding, dilation, groups,
                          [True, False, False])[0]


def _conv_weight_ref(g, x, weight_shape, stride=1, padding=0, dilation=1, groups=1):
    w = g.new_zeros(()).expand(tuple(weight_shape))
    return _conv_backward(g, x, w, stride, padding, dilation, groups, [False, True, False])[1]


register("convolution", "extern", _conv_ref, _conv_meta, vjp=_conv_vjp,
         doc="N-d convolution (1-d, 2-d, 3-d), ``torch.convolution`` without transposition.")
register("convolution_backward_input", "extern", _conv_input_ref,
         lambda g, weight, input_shape, *rest: (tuple(input_shape), g.dtype),
         doc="The gradient of a convolution with respect to its input (no VJP of its own).")
register("convolution_backward_weight", "extern", _conv_weight_ref,
         lambda g, x, weight_shape, *rest: (tuple(weight_shape), g.dtype),
         doc="The gradient of a convolution with respect to its weight (no VJP of its own).")

register_module_alias(_module, "prims")

# Not the prims themselves: a star import would shadow the builtins sum, abs, pow and slice.
__all__ = ["PRIMS", "Prim", "register"]
