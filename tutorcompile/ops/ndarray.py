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
    every ndarray of the result given back as its tensor."""
    args, kwargs = tree_map(_to_ndarray, (args, kwargs))
    return tree_map(_to_tensor, fn(*args, **kwargs))


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
    return found if callable(found) else None


__all__ = ["draws_from_numpys_generator", "ndarray_attribute", "ndarray_method", "numpy_call",
           "torch_numpy_function"]
