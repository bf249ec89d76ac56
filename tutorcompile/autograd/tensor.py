"""A tape autograd: tensors that remember how they were made, and a backward sweep.

Every operation on a :class:`Tensor` that needs a gradient leaves a :class:`TapeNode` behind:
which prim ran, on which inputs, and what it produced. Together those nodes form a graph
from the leaves (parameters, inputs) to the result. ``backward()`` walks that graph from the
result back to the leaves, in *reverse topological order*, so that a node's gradient is
complete -- all its uses have contributed -- before it is passed on. Each step applies the
prim's VJP rule from the op table (``tutorcompile.ops``), the very rule AOTAutograd uses to
build joint graphs in stage 4.

The semantics follow PyTorch's:

* a value used twice receives the *sum* of both gradients;
* only *leaves* that require grad keep ``.grad`` (accumulated across backward calls); other
  tensors keep theirs only after ``retain_grad()``;
* ``no_grad()`` records nothing; after ``backward()`` the tape is freed, so a second backward
  through it raises unless the first passed ``retain_graph=True``.

Calling a prim on a Tensor (``prims.exp(t)``) or an operator (``t * 2``) records a node: the
eager ops handler hands any call involving a Tensor to :func:`apply` through the
``__tc_prim__`` hook.

Mirrors: torch/csrc/autograd/variable.h, function.h (``Node``, ``next_edges``),
engine.cpp (``compute_dependencies`` and the ready queue), grad_mode.h.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from ..fx.node import map_aggregate, tree_leaves
from ..ops import prims
from ..ops.autodiff import vjp
from ..ops.table import PRIMS, Prim
from ..ops.virtualized import EagerHandler, set_handler
from .value import postorder

_grad_enabled = True


def is_grad_enabled() -> bool:
    return _grad_enabled


@contextlib.contextmanager
def no_grad() -> Iterator[None]:
    """Run operations without recording them (usable as a decorator too)."""
    global _grad_enabled
    saved, _grad_enabled = _grad_enabled, False
    try:
        yield
    finally:
        _grad_enabled = saved


class TapeNode:
    """How one Tensor was computed: ``prim(*args, **kwargs)`` gave ``out``.

    ``inputs`` are the Tensors among the arguments; ``saved`` is what backward needs (the
    arguments' data and the result), dropped when the tape is freed.
    """

    def __init__(self, prim: Prim, args: tuple, kwargs: dict, out: torch.Tensor):
        self.prim = prim
        self.args = args
        self.kwargs = kwargs
        self.inputs: list[Tensor] = [v for v in tree_leaves((args, kwargs))
                                     if isinstance(v, Tensor)]
        self.saved: tuple[Any, Any, torch.Tensor] | None = (
            map_aggregate(args, _unwrap), map_aggregate(kwargs, _unwrap), out)

    @property
    def name(self) -> str:
        """``MulBackward`` for prims.mul: PyTorch's naming, without its version suffix."""
        return "".join(part.title() for part in self.prim.name.split("_")) + "Backward"

    def __repr__(self) -> str:
        return f"<{self.name}>"


class Tensor:
    """A ``torch.Tensor`` (``.data``) plus the autograd bookkeeping of this module."""

    __array_priority__ = 1000  # numpy scalars on the left defer to our operators

    def __init__(self, data: Any, requires_grad: bool = False, *, dtype: torch.dtype | None = None,
                 _node: TapeNode | None = None):
        if isinstance(data, Tensor):
            data = data.data
        data = torch.as_tensor(data, dtype=dtype)
        if requires_grad and not (data.dtype.is_floating_point or data.dtype.is_complex):
            raise RuntimeError(f"only floating point tensors can require gradients, "
                               f"got {data.dtype}")
        self.data: torch.Tensor = data
        self.requires_grad = requires_grad
        self.grad_fn: TapeNode | None = _node
        self._grad: torch.Tensor | None = None
        self._retains_grad = False

    # --- autograd state -----------------------------------------------------------------
    @property
    def is_leaf(self) -> bool:
        """Made by the user (not by an op that recorded a node)."""
        return self.grad_fn is None

    @property
    def grad(self) -> torch.Tensor | None:
        """The gradient: kept for leaves that require grad, or after ``retain_grad()``."""
        return self._grad

    @grad.setter
    def grad(self, value: torch.Tensor | None) -> None:
        self._grad = value

    def retain_grad(self) -> Tensor:
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on a Tensor that does not require grad")
        if not self.is_leaf:
            self._retains_grad = True
        return self

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if not self.is_leaf:
            raise RuntimeError("requires_grad can only be changed on leaf tensors")
        if requires_grad and not self.data.dtype.is_floating_point:
            raise RuntimeError(f"only floating point tensors can require gradients, "
                               f"got {self.data.dtype}")
        self.requires_grad = requires_grad
        return self

    def detach(self) -> Tensor:
        """The same data, cut off from the tape (a new leaf that does not require grad)."""
        return Tensor(self.data)

    def backward(self, gradient: torch.Tensor | None = None, retain_graph: bool = False
                 ) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (see :func:`backward`)."""
        backward(self, gradient, retain_graph)

    @classmethod
    def __tc_prim__(cls, prim: Prim, args: tuple, kwargs: dict) -> Tensor:
        return apply(prim, args, kwargs)

    # --- tensor-like surface ------------------------------------------------------------
    @property
    def shape(self) -> torch.Size:
        return self.data.shape

    @property
    def dtype(self) -> torch.dtype:
        return self.data.dtype

    @property
    def device(self) -> torch.device:
        return self.data.device

    @property
    def ndim(self) -> int:
        return self.data.ndim

    def size(self, dim: int | None = None):
        return self.data.size() if dim is None else self.data.size(dim)

    def numel(self) -> int:
        return self.data.numel()

    def item(self) -> Any:
        return self.data.item()

    def tolist(self) -> Any:
        return self.data.tolist()

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        body = repr(self.data)[len("tensor("):-1]
        if self.grad_fn is not None:
            body += f", grad_fn=<{self.grad_fn.name}>"
        elif self.requires_grad:
            body += ", requires_grad=True"
        return f"Tensor({body})"

    # --- operators: each is one prim --------------------------------------------------------
    def __add__(self, other): return prims.add(self, other)
    def __radd__(self, other): return prims.add(other, self)
    def __sub__(self, other): return prims.sub(self, other)
    def __rsub__(self, other): return prims.sub(other, self)
    def __mul__(self, other): return prims.mul(self, other)
    def __rmul__(self, other): return prims.mul(other, self)
    def __truediv__(self, other): return prims.div(self, other)
    def __rtruediv__(self, other): return prims.div(other, self)
    def __pow__(self, other): return prims.pow(self, other)
    def __rpow__(self, other): return prims.pow(other, self)
    def __neg__(self): return prims.neg(self)
    def __matmul__(self, other): return prims.matmul(self, other)
    def __rmatmul__(self, other): return prims.matmul(other, self)
    def __lt__(self, other): return prims.lt(self, other)
    def __le__(self, other): return prims.le(self, other)
    def __gt__(self, other): return prims.gt(self, other)
    def __ge__(self, other): return prims.ge(self, other)
    def __eq__(self, other): return prims.eq(self, other)  # elementwise, as in PyTorch
    def __ne__(self, other): return prims.ne(self, other)
    # ...so hashing is by identity (the engine keys its dicts by id() for the same reason)
    __hash__ = object.__hash__

    def eq(self, other): return prims.eq(self, other)
    def ne(self, other): return prims.ne(self, other)
    def exp(self): return prims.exp(self)
    def log(self): return prims.log(self)
    def sqrt(self): return prims.sqrt(self)
    def rsqrt(self): return prims.rsqrt(self)
    def abs(self): return prims.abs(self)
    def sin(self): return prims.sin(self)
    def cos(self): return prims.cos(self)
    def tanh(self): return prims.tanh(self)
    def sigmoid(self): return prims.sigmoid(self)
    def relu(self): return prims.relu(self)
    def erf(self): return prims.erf(self)
    def matmul(self, other): return prims.matmul(self, other)
    def maximum(self, other): return prims.maximum(self, other)
    def minimum(self, other): return prims.minimum(self, other)
    def to(self, dtype: torch.dtype): return prims.convert_element_type(self, dtype)
    def float(self): return self.to(torch.float32)
    def double(self): return self.to(torch.float64)

    def sum(self, dim=None, keepdim=False): return prims.sum(self, dim, keepdim=keepdim)
    def mean(self, dim=None, keepdim=False): return prims.mean(self, dim, keepdim=keepdim)
    def amax(self, dim=None, keepdim=False): return prims.amax(self, dim, keepdim=keepdim)

    def var(self, dim=None, correction=1, keepdim=False):
        return prims.var(self, dim, correction=correction, keepdim=keepdim)

    def reshape(self, *shape): return prims.reshape(self, _shape_arg(shape))
    view = reshape
    def permute(self, *dims): return prims.permute(self, _shape_arg(dims))
    def expand(self, *shape): return prims.expand(self, _shape_arg(shape))
    def unsqueeze(self, dim): return prims.unsqueeze(self, dim)
    def squeeze(self, dim=None): return prims.squeeze(self, dim)

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        order = list(range(self.ndim))
        order[dim0], order[dim1] = order[dim1], order[dim0]
        return prims.permute(self, tuple(order))

    @property
    def T(self) -> Tensor:
        return prims.permute(self, tuple(reversed(range(self.ndim))))

    def __getitem__(self, index: Any) -> Tensor:
        """Integers, slices and 1-d integer index tensors (``t[0]``, ``t[:, 1:3]``,
        ``t[idx]``), one per dimension: slice / index_select, then squeeze integer dims."""
        index = index if isinstance(index, tuple) else (index,)
        kinds = (int, slice, Tensor, torch.Tensor)
        if len(index) > self.ndim or not all(isinstance(i, kinds) for i in index):
            raise IndexError("Tensor indexing supports integers, slices and 1-d integer "
                             "tensors, one per dimension")
        out, squeeze = self, []
        for dim, i in enumerate(index):
            if isinstance(i, (Tensor, torch.Tensor)):
                out = prims.index_select(out, dim, _unwrap(i))
            elif isinstance(i, int):
                i = i + self.shape[dim] if i < 0 else i
                if not 0 <= i < self.shape[dim]:
                    raise IndexError(f"index {i} is out of range for dimension {dim} of size "
                                     f"{self.shape[dim]}")
                out = prims.slice(out, dim, i, i + 1, 1)
                squeeze.append(dim)
            elif i != slice(None):
                out = prims.slice(out, dim, i.start, i.stop, i.step or 1)
        return prims.squeeze(out, tuple(squeeze)) if squeeze else out


def _shape_arg(shape: tuple) -> tuple:
    """``t.reshape(2, 3)`` and ``t.reshape((2, 3))`` both mean (2, 3)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
        return tuple(shape[0])
    return tuple(shape)


def _unwrap(value: Any) -> Any:
    return value.data if isinstance(value, Tensor) else value


def apply(prim: Prim | str, args: tuple, kwargs: dict | None = None) -> Tensor:
    """Run ``prim`` on Tensors' data; record a TapeNode if the result needs a gradient."""
    prim = PRIMS[prim] if isinstance(prim, str) else prim
    kwargs = kwargs or {}
    out = prim.reference(*map_aggregate(args, _unwrap), **map_aggregate(kwargs, _unwrap))
    needs_grad = (_grad_enabled and out.dtype.is_floating_point
                  and any(isinstance(v, Tensor) and v.requires_grad
                          for v in tree_leaves((args, kwargs))))
    node = TapeNode(prim, args, kwargs, out) if needs_grad else None
    return Tensor(out, requires_grad=needs_grad, _node=node)


def topological_order(root: Tensor) -> list[Tensor]:
    """Every Tensor ``root`` depends on through the tape, each after all of its inputs."""
    return postorder(root, lambda t: [] if t.grad_fn is None else
                     [i for i in t.grad_fn.inputs if i.requires_grad])


def backward(root: Tensor, gradient: torch.Tensor | None = None, retain_graph: bool = False
             ) -> None:
    """Propagate gradients from ``root`` to the leaves, in reverse topological order.

    ``gradient`` is d(loss)/d(root); it may be omitted when ``root`` has one element (it is
    then 1, as for a scalar loss).
    """
    if not root.requires_grad:
        raise RuntimeError("backward: the tensor does not require grad and has no grad_fn "
                           "(did every input have requires_grad=False, or was it computed "
                           "under no_grad()?)")
    if gradient is None:
        if root.numel() != 1:
            raise RuntimeError(f"backward: grad can be implicitly created only for outputs "
                               f"with one element; pass gradient= for shape "
                               f"{tuple(root.shape)}")
        gradient = torch.ones_like(root.data)
    gradient = _unwrap(gradient)
    if gradient.shape != root.shape:
        raise RuntimeError(f"backward: gradient has shape {tuple(gradient.shape)}, the tensor "
                           f"has {tuple(root.shape)}")

    grads: dict[int, torch.Tensor] = {id(root): gradient}
    with set_handler(EagerHandler()), no_grad():
        for tensor in reversed(topological_order(root)):
            grad = grads.pop(id(tensor), None)
            if grad is None:
                continue
            if tensor.is_leaf or tensor.retains_grad:
                tensor.grad = grad if tensor.grad is None else tensor.grad + grad
            node = tensor.grad_fn
            if node is None:
                continue
            if node.saved is None:
                raise RuntimeError("Trying to backward through the graph a second time: its "
                                   "saved values were freed by the first backward(); pass "
                                   "retain_graph=True to the first call if you need both")
            args, kwargs, out = node.saved
            input_grads = vjp(node.prim, grad, out, args, kwargs)
            for arg, g in zip(node.args, input_grads):
                pairs = zip(arg, g or [None] * len(arg)) if isinstance(arg, (list, tuple)) \
                    else [(arg, g)]
                for a, gi in pairs:
                    if isinstance(a, Tensor) and a.requires_grad and gi is not None:
                        grads[id(a)] = gi if id(a) not in grads else grads[id(a)] + gi
            if not retain_graph:
                node.saved = None


def tensor(data: Any, requires_grad: bool = False, dtype: torch.dtype | None = None) -> Tensor:
    """Make a leaf Tensor from a list, a number or a torch.Tensor (copied)."""
    if isinstance(data, torch.Tensor):
        data = data.detach().clone()
    return Tensor(data, requires_grad=requires_grad, dtype=dtype)


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    return prims.cat(list(tensors), dim)


def where(condition: Any, a: Any, b: Any) -> Tensor:
    return prims.where(condition, a, b)
