"""What a graph node runs for NumPy code on tensors: ``torch._numpy``, NumPy written in torch ops.

``a = x.numpy(); np.mean(a, 1)`` cannot be a graph of NumPy calls -- NumPy computes outside
torch, on memory a graph does not own. PyTorch ships ``torch._numpy``, the NumPy API
implemented with torch operations on an ``ndarray`` that wraps a tensor; PyTorch's Dynamo
traces NumPy code on tensors into it, and so does capture here
(``dynamo/variables/ndarray.py``): in the graph an ndarray is the tensor it wraps, and each
NumPy call is one node calling :func:`numpy_call` with the ``torch._numpy`` function that
stands for it. The node wraps its tensor arguments as ``torch._numpy`` ndarrays, calls, and
unwraps the ndarrays it gets back -- on fake tensors while capturing (that is how a result's
shape and dtype are known), on real ones when the graph runs. NumPy's rules hold, as
``torch._numpy`` implements them: its dtypes (``np.mean`` of integers is float64), its
broadcasting, its ``axis=`` keywords.

Mirrors: torch/_dynamo/utils.py (``numpy_to_tensor_wrapper``, ``numpy_method_wrapper``,
``numpy_operator_wrapper``).
"""

from __future__ import annotations

import functools
import operator
import sys
from collections.abc import Callable
from typing import Any

import numpy
import torch
import torch._numpy as tnp
from torch.utils._pytree import tree_map


def _to_ndarray(value: Any) -> Any:
    """A tensor as an ndarray of ``torch._numpy``, and a NumPy dtype (``np.float64``,
    ``np.dtype("float32")``) as its dtype there."""
    if isinstance(value, torch.Tensor):
        return tnp.ndarray(value)
    if isinstance(value, numpy.dtype) or isinstance(value, type) and issubclass(
            value, numpy.generic):
        return tnp.dtype(numpy.dtype(value).name)
    return value


def _to_tensor(value: Any) -> Any:
    return value.tensor if isinstance(value, tnp.ndarray) else value


def numpy_call(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with every tensor taken as a ``torch._numpy`` ndarray, and
    every ndarray of the result given back as its tensor. A ufunc (or an operator between
    arrays) runs on the dtypes of the loop NumPy would pick (:func:`_numpy_loop`)."""
    args, kwargs = tree_map(_to_ndarray, (args, kwargs))
    ufunc = _as_numpy_ufunc(fn)
    loop = _numpy_loop(ufunc, args, kwargs) if ufunc is not None else None
    if loop is None:
        return tree_map(_to_tensor, fn(*args, **kwargs))
    args = tuple(_cast(a, dt) if isinstance(a, tnp.ndarray) else a
                 for a, dt in zip(args, loop[:len(args)], strict=True))
    result = fn(*args, **kwargs)
    outputs = loop[len(args):]
    if isinstance(result, tuple) and len(result) == len(outputs):
        result = tuple(_cast(r, dt) for r, dt in zip(result, outputs, strict=True))
    elif isinstance(result, tnp.ndarray) and len(outputs) == 1:
        result = _cast(result, outputs[0])
    return tree_map(_to_tensor, result)


# the operators between arrays, as the NumPy ufuncs that ndarray's dunders call
_OPERATOR_UFUNCS = {
    operator.add: numpy.add, operator.sub: numpy.subtract, operator.mul: numpy.multiply,
    operator.truediv: numpy.true_divide, operator.floordiv: numpy.floor_divide,
    operator.mod: numpy.remainder, operator.pow: numpy.power, operator.lt: numpy.less,
    operator.le: numpy.less_equal, operator.gt: numpy.greater, operator.ge: numpy.greater_equal,
    operator.eq: numpy.equal, operator.ne: numpy.not_equal, operator.and_: numpy.bitwise_and,
    operator.or_: numpy.bitwise_or, operator.xor: numpy.bitwise_xor}


def _as_numpy_ufunc(fn: Any) -> numpy.ufunc | None:
    """The NumPy ufunc that ``fn`` (an operator, or a ``torch._numpy`` ufunc) stands for."""
    ufunc = _OPERATOR_UFUNCS.get(fn)
    if ufunc is None and str(getattr(fn, "__module__", "")).startswith("torch._numpy"):
        ufunc = getattr(numpy, getattr(fn, "__name__", ""), None)
    return ufunc if isinstance(ufunc, numpy.ufunc) else None


def _numpy_loop(ufunc: numpy.ufunc, args: tuple, kwargs: dict) -> tuple | None:
    """The dtypes (inputs, then outputs) of the loop NumPy runs ``ufunc`` with on these
    arguments -- or None where keywords choose (``dtype=``, ``out=``) or it picks none.
    ``torch._numpy`` promotes as torch does in places: ``/`` of integer arrays gave
    float32 (torch's default dtype), where NumPy's loop is float64 (``np.arange(n) / n``);
    so do ``arctan2``, ``copysign``, ``ldexp``; ``np.fabs`` of integers stayed integers.
    Python numbers take part as NumPy 2 takes them: weakly (NEP 50)."""
    if kwargs or len(args) != ufunc.nin:
        return None
    spec: list[Any] = []
    for a in args:
        if isinstance(a, tnp.ndarray):
            spec.append(numpy.dtype(a.dtype.name))
        elif type(a) is bool or isinstance(a, torch.SymBool):
            spec.append(numpy.dtype(bool))
        elif type(a) in (int, float, complex):
            spec.append(type(a))
        elif isinstance(a, (torch.SymInt, torch.SymFloat)):
            spec.append(int if isinstance(a, torch.SymInt) else float)
        else:
            return None
    return _resolve(ufunc, tuple(spec))


@functools.cache
def _resolve(ufunc: numpy.ufunc, spec: tuple) -> tuple | None:
    try:
        # (numpy < 2 has the method but not its type stub)
        return tuple(ufunc.resolve_dtypes(  # type: ignore[attr-defined,unused-ignore]
            (*spec, *[None] * ufunc.nout)))
    except (TypeError, ValueError):   # no loop (a str array...): torch._numpy says what
        return None


def _cast(array: Any, dtype: numpy.dtype) -> Any:
    if not isinstance(array, tnp.ndarray) or numpy.dtype(array.dtype.name) == dtype:
        return array
    return array.astype(dtype.name)


def getitem_value(a: Any, index: Any) -> Any:
    """``a[i]`` where NumPy gives a scalar: a copy, not a view of ``a`` (writing ``a``
    afterwards leaves it as it was, as NumPy's scalar is)."""
    result = a[index]
    return result.copy() if isinstance(result, tnp.ndarray) else result


def ndarray_method(name: str) -> Callable:
    """``lambda a, *args: a.<name>(*args)`` for :func:`numpy_call` (one per name, so equal
    graphs compare equal)."""
    if name not in _METHODS:
        def method(a: Any, *args: Any, **kwargs: Any) -> Any:
            return getattr(a, name)(*args, **kwargs)
        method.__name__ = method.__qualname__ = f"ndarray.{name}"
        _METHODS[name] = method
    return _METHODS[name]


def ndarray_attribute(name: str) -> Callable:
    """``lambda a: a.<name>`` (``T``, ``real``...) for :func:`numpy_call`."""
    if name not in _ATTRIBUTES:
        def attribute(a: Any) -> Any:
            return getattr(a, name)
        attribute.__name__ = attribute.__qualname__ = f"ndarray.{name}"
        _ATTRIBUTES[name] = attribute
    return _ATTRIBUTES[name]


_METHODS: dict[str, Callable] = {}
_ATTRIBUTES: dict[str, Callable] = {}


def draws_from_numpys_generator(fn: Any) -> bool:
    """Is ``fn`` one of ``np.random``'s functions (``rand``, ``randint``, ``default_rng``...)?
    They draw from NumPy's generator, state the graph does not carry; torch._numpy's twins
    draw from torch's, other numbers than eager's (PyTorch's Dynamo traces them so unless
    ``config.use_numpy_random_stream``, where they are a break as here). Its classes
    (``Generator``, ``SeedSequence``) are constructions, which break as such."""
    module = getattr(fn, "__module__", None)
    return not isinstance(fn, type) and isinstance(module, str) and (
        module == "numpy.random" or module.startswith("numpy.random."))


def torch_numpy_function(fn: Any) -> Callable | None:
    """The ``torch._numpy`` function standing for the NumPy function ``fn`` (``np.mean``,
    ``np.linalg.norm``, ``np.fft.fftshift``), or None when there is none."""
    if isinstance(fn, type):   # ``np.float64``, ``np.ndarray``: types, not functions
        return None
    module = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__name__", None)
    if not module.startswith("numpy") or name is None:
        return None
    # NumPy's very function, not one that claims its module: tensorly dispatches
    # ``tl.einsum`` to its backend through a wrapper that ``functools.wraps(np.einsum)``
    # copied ``__module__ = "numpy"`` onto (run as NumPy, it returned an ndarray)
    if getattr(sys.modules.get(module), name, None) is not fn:
        return None
    if draws_from_numpys_generator(fn):
        return None
    where: Any = tnp
    for part in module.split(".")[1:]:
        if part.startswith("_"):   # numpy._core.fromnumeric...: the top-level name
            break
        where = getattr(where, part, None)
        if where is None:
            return None
    found = getattr(where, name, None)
    if isinstance(fn, numpy.ufunc) and callable(found) and found.__name__ != name:
        return _ufunc_alias(name, found)   # ``np.fabs``: ``absolute`` in torch._numpy
    return found if callable(found) else None


def _ufunc_alias(name: str, impl: Callable) -> Callable:
    """``torch._numpy``'s function for the ufunc ``name`` where it is another ufunc's
    (``fabs`` is ``absolute`` there), under NumPy's name: the node runs ``name``'s loop
    (``np.fabs`` of integers is float64, ``np.absolute``'s stays integer). One per name,
    so equal graphs compare equal."""
    if name not in _ALIASES:
        def alias(*args: Any, **kwargs: Any) -> Any:
            return impl(*args, **kwargs)
        alias.__name__ = alias.__qualname__ = name
        alias.__module__ = "torch._numpy._ufuncs"
        _ALIASES[name] = alias
    return _ALIASES[name]


_ALIASES: dict[str, Callable] = {}


__all__ = ["draws_from_numpys_generator", "getitem_value", "ndarray_attribute", "ndarray_method",
           "numpy_call", "torch_numpy_function"]
