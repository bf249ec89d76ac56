"""NumPy code on tensors: ``x.numpy()``, NumPy functions and ndarray methods, as graph nodes.

``a = x.numpy()`` gives a :class:`NumpyNdarrayVariable`: in the graph the array is the tensor
it was made from (``numpy()`` shares memory, the graph is the same node). A NumPy function
called on one (``np.mean(a, 1)``, ``np.linalg.norm``, ``np.fft.fftshift``), one that makes an
array (``np.eye(4)``), an ndarray method or attribute (``a.T``, ``a.reshape(...)``,
``a.max(axis=0)``) and an operator between arrays (``a + a``) each become one node calling
:func:`~tutorcompile.ops.ndarray.numpy_call` with the ``torch._numpy`` function that
implements it in torch ops; their results are arrays again. ``torch.from_numpy(a)`` is the
tensor back. An array the frame keeps or returns is made a real NumPy array after the graph
(``tensor.numpy()`` of the graph's output) -- and a 0-d result of a reduction NumPy's scalar,
where torch._numpy (and torch.compile) give a 0-d array -- so the caller sees what eager NumPy
gives. An array's metadata (``shape``, ``size``, ``strides``, ``dtype``) is read from the fake
tensor, as NumPy reads it from the array.

A NumPy ufunc given numbers only (``np.sqrt(2.0)``) is folded as before; a NumPy scalar
constant enters the graph as the Python number torch takes it for.

Mirrors: torch/_dynamo/variables/tensor.py (``NumpyNdarrayVariable``) and
torch/_dynamo/variables/misc.py (``NumpyVariable``).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy
import torch
import torch._numpy as tnp

from ...fx.aliasing import same_storage
from ...ops.ndarray import getitem_value, ndarray_attribute, ndarray_method, numpy_call
from ..exc import TracedException, Unsupported
from .base import LATE_BOUND, VariableTracker
from .containers import ConstantVariable, ConstDictVariable, ListVariable, TupleVariable
from .tensor import TensorVariable

# attributes NumPy computes from the array's data (new arrays)
_ARRAY_ATTRIBUTES = ("T", "mT", "real", "imag")


class NumpyNdarrayVariable(TensorVariable):
    """A NumPy array made from a tensor: in the graph, that tensor (``tensor``, its
    tracker: a graph input is rebuilt through its source)."""

    def __init__(self, tensor: TensorVariable, scalar: bool = False):
        if isinstance(tensor, NumpyNdarrayVariable):   # (an in-place operator's result)
            tensor = tensor.tensor
        super().__init__(tensor.node, tensor.fake)
        self.tensor: TensorVariable = tensor
        # a 0-d result NumPy gives as a scalar (``a.sum()``, ``np.mean(a)``): torch._numpy
        # gives 0-d arrays everywhere; after the graph it is NumPy's scalar again
        self.scalar = scalar

    def python_type(self):
        # a 0-d result NumPy gives as a scalar is one of NumPy's scalar types (``float32``)
        return _numpy_dtype(self.fake.dtype).type if self.scalar else numpy.ndarray

    def var_getattr(self, tx, name):
        f = self.fake
        if name == "shape":
            return TupleVariable(self.size_vars(tx))
        if name == "ndim":
            return ConstantVariable(f.dim())
        if name in ("size", "itemsize", "nbytes", "strides", "dtype"):
            if tx.output.is_dynamic_tensor(self):
                raise Unsupported(f"ndarray.{name} of a dynamically shaped array")
            itemsize = f.element_size()
            return ConstantVariable({"size": f.numel(), "itemsize": itemsize,
                                     "nbytes": f.numel() * itemsize,
                                     "strides": tuple(s * itemsize for s in f.stride()),
                                     "dtype": _numpy_dtype(f.dtype)}[name])
        if name in _ARRAY_ATTRIBUTES:
            return ndarray_call(tx, ndarray_attribute(name), [self], {})
        if callable(getattr(tnp.ndarray, name, None)):
            return NdarrayMethodVariable(self, name)
        raise Unsupported(f"ndarray attribute {name!r}")

    def call_method(self, tx, name, args, kwargs):
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def unpack(self, tx):
        """``for row in a``, ``r0, r1 = a``: NumPy's rows, arrays (a 1-d array's items are
        NumPy's scalars), not the tensor's rows."""
        if self.fake.dim() == 0:
            raise TracedException(TypeError("iteration over a 0-d array"))
        n = self.size_var(tx, 0)
        if not n.is_python_constant():
            raise Unsupported("iterating over an array with a dynamic first dimension")
        return [ndarray_getitem(tx, self, ConstantVariable(i))
                for i in range(n.as_python_constant())]

    def reconstruct(self, rc):
        array = rc(self.tensor).detach().numpy()
        return array[()] if self.scalar else array

    def children(self):
        return [self.tensor]

    def __repr__(self):
        return "NumpyNdarrayVariable" + super().__repr__().removeprefix("TensorVariable")


class NdarrayMethodVariable(VariableTracker):
    """``a.method`` of an array, before it is called."""

    def __init__(self, array: NumpyNdarrayVariable, name: str):
        self.array, self.name = array, name

    def call_function(self, tx, args, kwargs):
        if self.name in ("item", "tolist", "tobytes", "__bool__", "__int__", "__float__"):
            raise Unsupported(f"ndarray.{self.name}() needs the array's data (data-dependent)")
        return ndarray_call(tx, ndarray_method(self.name), [self.array, *args], kwargs)

    def reconstruct(self, rc):
        return getattr(rc(self.array), self.name)

    def children(self):
        return [self.array]


class NumpyFunctionVariable(VariableTracker):
    """A NumPy function (``np.mean``, ``np.linalg.norm``, ``np.asarray``) with a
    ``torch._numpy`` twin: a graph node making an array -- but a ufunc given numbers only
    (``np.sqrt(2.0)``), which gives a number: that is what it was (``plain``, the tracker it
    would be without a twin, folded)."""

    def __init__(self, twin: Any, plain: VariableTracker):
        self.twin, self.plain = twin, plain
        self.source = plain.source

    def python_type(self):
        return self.plain.python_type()

    def call_function(self, tx, args, kwargs):
        leaves = _leaves([*args, *kwargs.values()])
        if not any(isinstance(a, TensorVariable) for a in leaves):
            fn = getattr(self.plain, "value", None)
            if isinstance(fn, numpy.ufunc):
                return self.plain.call_function(tx, args, kwargs)   # ``np.sqrt(2.0)``
            number = _fold_to_number(fn, args, kwargs)
            if number is not None:
                return number
        # on arrays -- or making one (``np.eye(4)``, ``np.zeros((2, 3))``)
        return ndarray_call(tx, self.twin, list(args), kwargs)

    def var_getattr(self, tx, name):
        return self.plain.var_getattr(tx, name)

    def reconstruct(self, rc):
        return rc(self.plain)

    def children(self):
        return [self.plain]


def _fold_to_number(fn: Any, args: list, kwargs: dict) -> VariableTracker | None:
    """``int(np.prod(shape[-2:]))`` (tensorly's inner products): a NumPy function given
    Python constants only and giving a number is computed now -- NumPy's twins are pure --
    and its number is a constant, as NumPy's scalar would be in the real run; traced into
    the graph it was a 0-d array, and ``int()`` of it a graph break. A result that is an
    array (``np.arange(4)``) stays a node of the graph."""
    if fn is None or not all(v.is_python_constant() for v in [*args, *kwargs.values()]):
        return None
    try:
        value = fn(*[a.as_python_constant() for a in args],
                   **{k: v.as_python_constant() for k, v in kwargs.items()})
    except Exception:   # (the node traced instead fails the same way, or breaks)
        return None
    if isinstance(value, numpy.generic) and not isinstance(value, numpy.void) or \
            type(value) in (bool, int, float, complex):
        return ConstantVariable(value)
    return None


def ndarray_call(tx, fn: Any, args: list, kwargs: dict, scalars: bool | None = None
                 ) -> VariableTracker:
    """One node calling ``numpy_call(fn, *args, **kwargs)``; its tensors come back as
    arrays (a 0-d one NumPy's scalar, unless ``fn`` makes arrays or ``scalars`` says)."""
    result = tx.output.create_node("call_function", numpy_call,
                                   (ConstantVariable(fn), *args), kwargs)
    if isinstance(result, TensorVariable):
        _note_view(result, args)
    if scalars is None:
        scalars = getattr(fn, "__name__", "").removeprefix("ndarray.") not in _MAKE_ARRAYS
    return as_arrays(result, scalars=scalars)


def _note_view(result: TensorVariable, args: list) -> None:
    """A NumPy call whose result shares an argument's memory (``a.T``, ``a.reshape(...)``,
    ``a.transpose(1, 0)``) is a view of it: AOT's functionalization must write back through
    it (``b = a.T; a[0, 0] = 1; return b``), so the node says of which argument, and where
    the view lies in that argument's memory when it is contiguous (else None: a write
    through it is refused, not lost)."""
    out = result.fake
    for i, a in enumerate(args):
        if not isinstance(a, TensorVariable) or not same_storage(out, a.fake):
            continue
        parent = a.fake
        layout = None
        try:
            if parent.is_contiguous():
                layout = (tuple(int(n) for n in out.shape), tuple(int(n) for n in out.stride()),
                          int(out.storage_offset()) - int(parent.storage_offset()))
        except (TypeError, RuntimeError):   # symbolic sizes: no fixed layout
            layout = None
        result.node.meta["numpy_view"] = (i + 1, layout)   # (its place in the node's args)
        return


def ndarray_getitem(tx, array: NumpyNdarrayVariable, index: VariableTracker
                    ) -> VariableTracker:
    """``a[i]``: NumPy's indexing. Its result is NumPy's scalar -- a copy -- only where the
    index is an integer per dimension (``a[0, 1]``, ``a[()]`` of a 0-d array);
    ``a[...]``, ``a[0, ...]`` give a 0-d array, and ``a[1]`` of a matrix a row: views."""
    scalars = None
    if index.is_python_constant():
        value = index.as_python_constant()
        items = value if isinstance(value, tuple) else (value,)
        scalars = all(isinstance(i, int) for i in items) and \
            len(items) == array.fake.dim()   # ``a[1]`` of a matrix: a row, a view
    if scalars:
        return ndarray_call(tx, getitem_value, [array, index], {}, scalars=True)
    # a view of the array's tensor, as torch indexes (NumPy's basic indexing is torch's):
    # a write to the array afterwards shows through it, as through NumPy's view
    view = tx.output.create_node("call_function", operator.getitem, (array, index), {})
    return NumpyNdarrayVariable(view, scalar=scalars is None and view.fake.dim() == 0)


def ndarray_binary_op(tx, fn: Any, a: VariableTracker, b: VariableTracker
                      ) -> VariableTracker:
    """``a + b`` (any operator) with an array on either side: NumPy's rules."""
    return ndarray_call(tx, fn, [a, b], {})


def as_arrays(vt: VariableTracker, scalars: bool = False) -> VariableTracker:
    """``vt`` with every tensor in it an array (a NumPy call returns arrays); with
    ``scalars``, a 0-d one is NumPy's scalar once it leaves the graph."""
    if isinstance(vt, TensorVariable) and not isinstance(vt, NumpyNdarrayVariable):
        return NumpyNdarrayVariable(vt, scalar=scalars and vt.fake.dim() == 0)
    if isinstance(vt, (TupleVariable, ListVariable)) and type(vt) in (TupleVariable, ListVariable):
        return type(vt)([as_arrays(i, scalars) for i in vt.items])
    return vt


# NumPy calls that make an array even of a 0-d one (the rest give a scalar for a 0-d result)
_MAKE_ARRAYS = frozenset({"array", "asarray", "asanyarray", "ascontiguousarray", "copy",
                          "reshape", "atleast_1d", "atleast_2d", "atleast_3d", "empty_like",
                          "zeros_like", "ones_like", "full_like", "zeros", "ones", "full",
                          "empty", "view", "squeeze", "transpose", "T"})


def _leaves(values: list) -> list:
    out = []
    for v in values:
        if type(v) in (TupleVariable, ListVariable):
            out += _leaves(v.items)
        elif isinstance(v, ConstDictVariable):
            out += _leaves(list(v.items.values()))
        else:
            out.append(v)
    return out


def _numpy_dtype(dtype: torch.dtype) -> numpy.dtype:
    try:
        return numpy.dtype(str(dtype).removeprefix("torch."))
    except TypeError:
        raise Unsupported(f"ndarray.dtype of a {dtype} array (NumPy has no such dtype)") from None


BINARY_OPERATORS = frozenset({operator.add, operator.sub, operator.mul, operator.truediv,
                              operator.floordiv, operator.mod, operator.pow, operator.matmul,
                              operator.lt, operator.le, operator.gt, operator.ge, operator.eq,
                              operator.ne, operator.and_, operator.or_, operator.xor})
__all__ = ["BINARY_OPERATORS", "NdarrayMethodVariable", "NumpyFunctionVariable",
           "NumpyNdarrayVariable", "as_arrays", "ndarray_binary_op", "ndarray_call",
           "ndarray_getitem"]


LATE_BOUND["NumpyNdarrayVariable"] = NumpyNdarrayVariable
