"""The machinery of the op table: what a prim *is*, and the shape/dtype rules it uses.

A :class:`Prim` is one primitive operation of the course's compiler, declared once with
everything every stage needs to know about it:

* ``reference``  -- its meaning, as a PyTorch implementation (the eager handler runs it);
* ``meta``       -- a shape/dtype rule: from the *shapes and dtypes* of the inputs, the shape
  and dtype of the output, without touching data (the graph-building handler needs it to
  give VJP rules something to inspect, and later stages to plan memory);
* ``kind``       -- ``pointwise`` (elementwise on broadcast inputs), ``reduction``, ``view``
  (no arithmetic, only where elements go: reshape, permute, slice, cat, gathers),
  ``factory`` (tensors from nothing) or ``extern`` (always a PyTorch call: matmul,
  convolution, scatters); fusion treats each kind differently;
* ``vjp``        -- its vector-Jacobian product, written against the virtualized ``ops``;
* ``triton`` / ``cpp`` -- for pointwise prims, how to spell it in a kernel: format strings
  with ``{0}``, ``{1}``, ... for the operands, like TorchInductor's ``TritonOverrides`` and
  ``CppOverrides`` tables.

Calling a prim does not run anything by itself: it hands the call to the *current ops
handler* (``virtualized.py``), which runs the reference on tensors, records a graph node, or
writes kernel code. That is what lets one rule serve three purposes.

The rules in the second half of this file (broadcasting, type promotion, dimension lists)
are the same ones PyTorch applies; they are written out because the graph handler must
compute shapes without PyTorch running the op.

Mirrors: torch/_prims/__init__.py (``_make_prim``) and torch/_prims_common/__init__.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..fx.symbolic_shapes import SymInt

KINDS = ("pointwise", "reduction", "view", "factory", "extern")

# Every prim, by name, in declaration order (filled by ``prims.py``).
PRIMS: dict[str, Prim] = {}


def _no_handlers(prim: Prim, args: tuple, kwargs: dict) -> Any:
    raise RuntimeError(f"prims.{prim.name} was called before ops/virtualized.py installed "
                       "the ops handlers")


# How a call of a prim is run: handed to the current ops handler. The handlers live in the
# layer above this table, which installs the dispatch when it is imported (virtualized.py).
dispatch: Callable[[Prim, tuple, dict], Any] = _no_handlers


class Prim:
    """One entry of the op table; calling it dispatches to the current ops handler."""

    def __init__(self, name: str, kind: str, reference: Callable, meta: Callable,
                 vjp: Callable | None = None, triton: str | None = None,
                 cpp: str | None = None, doc: str = ""):
        if kind not in KINDS:
            raise ValueError(f"prim {name!r}: kind must be one of {KINDS}, got {kind!r}")
        if kind == "pointwise" and (triton is None or cpp is None):
            raise ValueError(f"pointwise prim {name!r} needs a Triton and a C++ spelling")
        self.name = name
        self.kind = kind
        self.reference = reference
        self.meta = meta
        self.vjp = vjp
        self.triton = triton
        self.cpp = cpp
        self.__doc__ = doc or f"The {name} primitive ({kind})."
        # Graph code prints prims as ``prims.<name>`` (see register_module_alias in prims.py).
        self.__name__ = name
        self.__qualname__ = name
        self.__module__ = "tutorcompile.ops.prims"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return dispatch(self, args, kwargs)

    @property
    def is_pointwise(self) -> bool:
        return self.kind == "pointwise"

    def __repr__(self) -> str:
        return f"prims.{self.name}"

    def __reduce__(self):  # pickling / deepcopy keep the single table entry
        return (_lookup, (self.name,))


def _lookup(name: str) -> Prim:
    return PRIMS[name]


# ---------------------------------------------------------------------------------------
# Values the rules look at: anything with .shape and .dtype (a torch.Tensor, a TensorMeta,
# a graph value, an autograd Tensor) counts as a tensor; everything else is a constant.
# ---------------------------------------------------------------------------------------

def is_tensor_like(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (int, float, bool))


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size if isinstance(size, SymInt) else max(int(size), 1)  # a symbol is >= 2
    return tuple(reversed(strides))


def slice_indices(index: slice, size: Any) -> tuple[Any, Any, int]:
    """``index.indices(size)`` for a positive step; written out (the same clamping) when a
    bound or the size is symbolic, since ``slice.indices`` needs ints."""
    if all(v is None or isinstance(v, int) for v in (size, index.start, index.stop)):
        return index.indices(size)
    step = 1 if index.step is None else index.step
    start, end = index.start, index.stop
    start = 0 if start is None else start + size if start < 0 else start
    end = size if end is None else end + size if end < 0 else end
    return min(max(start, 0), size), min(max(end, 0), size), step


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """NumPy broadcasting: align on the right; a size of 1 stretches to match the other."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        for i, size in enumerate(shape):
            j = ndim - len(shape) + i
            # a literal 1 first, then an equal size: neither decides anything about a
            # symbolic size (``t // 4 - 1`` is 1 at t = 9, but must not be guarded to be)
            if type(out[j]) is int and out[j] == 1:
                out[j] = size
            elif type(size) is int and size == 1 or size == out[j]:
                continue
            elif out[j] == 1:
                out[j] = size
            elif size != 1:
                raise ValueError(f"shapes {[tuple(s) for s in shapes]} cannot be broadcast: "
                                 f"size {size} does not match {out[j]} in dimension {j}")
    return tuple(out)


def _category(dtype: torch.dtype) -> int:
    if dtype == torch.bool:
        return 0
    if dtype.is_floating_point:
        return 2
    if dtype.is_complex:
        return 3
    return 1


def _scalar_category(x: Any) -> int:
    if isinstance(x, bool):
        return 0
    if isinstance(x, (int, SymInt)):  # a symbolic size is an int
        return 1
    if isinstance(x, float):
        return 2
    return 3


def promote_types(*args: Any) -> torch.dtype:
    """The result dtype of a pointwise op on ``args`` (tensors and Python numbers).

    PyTorch ranks operands in three tiers -- tensors with dimensions, zero-dimensional
    tensors, Python numbers -- and a lower tier only matters when it is of a higher *kind*
    (bool < integer < floating < complex) than the tiers above it: ``int_tensor * 0.5`` is
    float, but ``float32_tensor * 2.0`` and ``float32_tensor + float64_scalar_tensor`` stay
    float32. Python numbers count as the default dtype of their kind.
    """
    tensors = [a for a in args if is_tensor_like(a)]
    if not tensors:
        raise TypeError("a pointwise prim needs at least one tensor argument")

    def fold(dtypes: list[torch.dtype]) -> torch.dtype | None:
        result = None
        for d in dtypes:
            result = d if result is None else torch.promote_types(result, d)
        return result

    dim = fold([t.dtype for t in tensors if len(t.shape) > 0])
    zero = fold([t.dtype for t in tensors if len(t.shape) == 0])
    numbers = fold([_NUMBER_DTYPES[_scalar_category(a)]() for a in args
                    if not is_tensor_like(a) and a is not None])
    result = _combine(dim, _combine(zero, numbers))
    assert result is not None   # there is a tensor
    return result


_NUMBER_DTYPES = {0: lambda: torch.bool, 1: lambda: torch.int64,
                  2: torch.get_default_dtype,
                  3: lambda: torch.complex128 if torch.get_default_dtype() == torch.float64
                  else torch.complex64}


def _combine(higher: torch.dtype | None, lower: torch.dtype | None) -> torch.dtype | None:
    """A higher tier wins unless the lower one is of a higher kind (then they promote)."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if _category(higher) >= _category(lower) and higher != torch.bool:
        return higher
    return torch.promote_types(higher, lower)


def to_float(dtype: torch.dtype) -> torch.dtype:
    """Integer and bool inputs of ``exp``, ``sqrt``, ``/``... give the default float dtype."""
    return dtype if dtype.is_floating_point or dtype.is_complex else torch.get_default_dtype()


def normalize_dim(dim: int, ndim: int) -> int:
    """Wrap a negative dimension; raise a clear error when it is out of range."""
    lo, hi = -max(ndim, 1), max(ndim, 1) - 1
    if not lo <= dim <= hi:
        raise IndexError(f"dimension {dim} is out of range for a {ndim}-d tensor "
                         f"(expected {lo}..{hi})")
    return dim % max(ndim, 1)


def normalize_dims(dims: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """``None`` means every dimension; the result is sorted, wrapped and without repeats."""
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = (dims,)
    if ndim == 0:
        return ()
    return tuple(sorted({normalize_dim(d, ndim) for d in dims}))


def reduced_shape(shape: Sequence[int], dims: tuple[int, ...], keepdim: bool
                  ) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


# ---------------------------------------------------------------------------------------
# Shape/dtype rules shared by many prims. Each takes the prim's arguments (tensor-likes
# and constants) and returns (shape, dtype).
# ---------------------------------------------------------------------------------------

def _shapes(args: Sequence[Any]) -> list[tuple[int, ...]]:
    return [tuple(a.shape) for a in args if is_tensor_like(a)]


def binary_meta(a: Any, b: Any) -> tuple[tuple[int, ...], torch.dtype]:
    """add, sub, mul, maximum, ...: broadcast the shapes, promote the dtypes."""
    return broadcast_shapes(*_shapes((a, b))), promote_types(a, b)


def true_divide_meta(a: Any, b: Any) -> tuple[tuple[int, ...], torch.dtype]:
    shape, dtype = binary_meta(a, b)
    return shape, to_float(dtype)


def comparison_meta(a: Any, b: Any) -> tuple[tuple[int, ...], torch.dtype]:
    return broadcast_shapes(*_shapes((a, b))), torch.bool


def same_meta(a: Any) -> tuple[tuple[int, ...], torch.dtype]:
    """neg, abs, relu: same shape, same dtype."""
    return tuple(a.shape), a.dtype


def float_meta(a: Any) -> tuple[tuple[int, ...], torch.dtype]:
    """exp, log, sin, ...: same shape; integer inputs become floating point."""
    return tuple(a.shape), to_float(a.dtype)


def where_meta(cond: Any, a: Any, b: Any) -> tuple[tuple[int, ...], torch.dtype]:
    if not is_tensor_like(cond) or cond.dtype != torch.bool:
        raise TypeError("where: the condition must be a bool tensor")
    shapes = _shapes((cond, a, b))
    if is_tensor_like(a) or is_tensor_like(b):
        dtype = promote_types(a, b)
    else:  # two Python numbers: the default dtype of their kind
        dtype = promote_types(torch.empty((), dtype=torch.bool, device="meta"), a, b)
    return broadcast_shapes(*shapes), dtype


def reduction_meta(a: Any, dims: Any = None, keepdim: bool = False,
                   integer_to_int64: bool = False, need_float: str | None = None
                   ) -> tuple[tuple[int, ...], torch.dtype]:
    dims = normalize_dims(dims, a.ndim if hasattr(a, "ndim") else len(a.shape))
    dtype = a.dtype
    if need_float and not (dtype.is_floating_point or dtype.is_complex):
        raise TypeError(f"{need_float}: needs a floating point input, got {dtype} "
                        "(cast it with convert_element_type first)")
    if integer_to_int64 and _category(dtype) < 2:
        dtype = torch.int64
    return reduced_shape(tuple(a.shape), dims, keepdim), dtype
