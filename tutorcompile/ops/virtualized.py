"""Virtualized ops: write a rule once against ``ops.*``, run it under different handlers.

A VJP rule such as ``ops.mul(g, ops.cos(a))`` does not say *what* ``ops.mul`` does. The
*handler* installed at the time decides:

* :class:`EagerHandler` (the default) runs each prim's PyTorch reference on real tensors --
  the tape autograd uses it to compute gradients as numbers;
* :class:`GraphHandler` records each call as a ``call_function`` node of a
  :class:`tutorcompile.fx.Graph` and returns a :class:`GraphValue`, which knows its shape and
  dtype from the prim's shape rule (so rules can still ask ``a.shape``) -- the same rules then
  *build* a backward graph, which is how AOTAutograd (stage 4) makes joint graphs;
* :class:`KernelSpellingHandler` turns pointwise calls into a Triton or C++ expression string
  from the table's spellings. It is the seed of the code generators of stage 5, which
  subclass the handler idea to emit whole kernels.

Handlers are installed with ``with set_handler(h): ...`` and nest like a stack. Calling a prim
(``prims.add(x, y)``, or the same object as ``ops.add``) always goes to the innermost one.

Mirrors: torch/_inductor/virtualized.py (``V.ops``, ``V.set_ops_handler``) and
torch/_inductor/ops_handler.py.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..fx import Graph, Node, TensorMeta, symbolic_shapes
from ..fx.node import map_aggregate, tree_leaves
from ..fx.symbolic_shapes import SymInt, as_shape, materialize
from . import table
from .table import PRIMS, Prim, contiguous_strides, is_tensor_like


class OpsHandler:
    """What every handler provides: ``call(prim, args, kwargs)`` for one prim call."""

    def call(self, prim: Prim, args: tuple, kwargs: dict) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not handle {prim.name}")


class EagerHandler(OpsHandler):
    """Run the PyTorch reference of each prim on real tensors.

    Values of other kinds take part through a ``__tc_prim__`` class hook:
    ``tutorcompile.autograd.Tensor`` uses it to record its tape, and a :class:`GraphValue`
    used outside its handler's ``with`` block still records into its own graph.

    ``check_meta=True`` also compares every result with the prim's shape/dtype rule and
    raises on a mismatch -- a debugging aid for writing new table entries.
    """

    def __init__(self, check_meta: bool = False):
        self.check_meta = check_meta

    def call(self, prim: Prim, args: tuple, kwargs: dict) -> Any:
        for value in tree_leaves((args, kwargs)):
            hook = getattr(type(value), "__tc_prim__", None)
            if hook is not None:
                return hook(prim, args, kwargs)
        result = prim.reference(*args, **kwargs)
        if self.check_meta:
            shape, dtype = prim.meta(*args, **kwargs)
            if tuple(shape) != tuple(result.shape) or dtype != result.dtype:
                raise AssertionError(
                    f"prims.{prim.name}: the shape rule says {str(dtype)}{list(shape)}, the "
                    f"reference returned {str(result.dtype)}{list(result.shape)}")
        return result


_handlers: list[OpsHandler] = [EagerHandler()]


def current_handler() -> OpsHandler:
    """The innermost installed handler (the eager one when none is)."""
    return _handlers[-1]


def _tracing_node() -> Node | None:
    """The node the graph handler is tracing a rule for, if one is (shape messages name it)."""
    return getattr(getattr(current_handler(), "graph", None), "_from", None)


symbolic_shapes.tracing_node = _tracing_node


def _dispatch(prim: Prim, args: tuple, kwargs: dict) -> Any:
    """A prim's call, run by the innermost installed handler (``Prim.__call__``)."""
    return _handlers[-1].call(prim, args, kwargs)


table.dispatch = _dispatch


@contextlib.contextmanager
def set_handler(handler: OpsHandler) -> Iterator[OpsHandler]:
    """Install ``handler`` for the duration of the ``with`` block."""
    _handlers.append(handler)
    try:
        yield handler
    finally:
        _handlers.pop()


class _OpsNamespace:
    """``ops.<name>`` is the prim ``<name>``; it dispatches to the current handler."""

    def __getattr__(self, name: str) -> Prim:
        try:
            return PRIMS[name]
        except KeyError:
            raise AttributeError(f"ops has no prim {name!r}; the prims are: "
                                 f"{', '.join(PRIMS)}") from None

    def __dir__(self) -> list[str]:
        return list(PRIMS)

    def __repr__(self) -> str:
        return f"<ops: {len(PRIMS)} prims, handler {type(current_handler()).__name__}>"


ops = _OpsNamespace()


# ---------------------------------------------------------------------------------------
# Building graphs
# ---------------------------------------------------------------------------------------

class GraphValue:
    """A value being recorded into a graph: a node plus the shape/dtype the rules computed.

    It answers ``.shape``, ``.dtype``, ``.device`` and ``.ndim`` like a tensor, and supports
    the arithmetic operators (each records a prim), but it has no data: asking for its truth
    value raises, because a recorded graph cannot branch on values it has not computed.
    """

    __slots__ = ("node", "handler")

    def __init__(self, node: Node, handler: GraphHandler):
        self.node = node
        self.handler = handler

    @property
    def meta(self) -> TensorMeta:
        return self.node.meta["tensor_meta"]

    @property
    def shape(self) -> torch.Size:
        return self.meta.shape

    @property
    def dtype(self) -> torch.dtype:
        return self.meta.dtype

    @property
    def device(self) -> torch.device:
        return self.meta.device

    @property
    def ndim(self) -> int:
        return len(self.meta.shape)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def _op(self, name: str, *args: Any) -> GraphValue:
        return self.handler.call(PRIMS[name], args, {})

    @classmethod
    def __tc_prim__(cls, prim: Prim, args: tuple, kwargs: dict) -> GraphValue:
        """A prim called on a GraphValue under the eager handler records into its graph."""
        owner = next(v for v in tree_leaves((args, kwargs)) if isinstance(v, GraphValue))
        return owner.handler.call(prim, args, kwargs)

    def __add__(self, other): return self._op("add", self, other)
    def __radd__(self, other): return self._op("add", other, self)
    def __sub__(self, other): return self._op("sub", self, other)
    def __rsub__(self, other): return self._op("sub", other, self)
    def __mul__(self, other): return self._op("mul", self, other)
    def __rmul__(self, other): return self._op("mul", other, self)
    def __truediv__(self, other): return self._op("div", self, other)
    def __rtruediv__(self, other): return self._op("div", other, self)
    def __pow__(self, other): return self._op("pow", self, other)
    def __neg__(self): return self._op("neg", self)
    def __matmul__(self, other): return self._op("matmul", self, other)
    def __lt__(self, other): return self._op("lt", self, other)
    def __le__(self, other): return self._op("le", self, other)
    def __gt__(self, other): return self._op("gt", self, other)
    def __ge__(self, other): return self._op("ge", self, other)

    def __bool__(self):
        raise RuntimeError(f"{self.node.name} is a value in a graph being built; it has no "
                           "data yet, so Python control flow cannot depend on it")

    def __repr__(self) -> str:
        dtype = str(self.dtype).replace("torch.", "")
        return f"GraphValue({self.node.name}: {dtype}{list(self.shape)})"


def make_meta(shape: Any, dtype: torch.dtype, device: Any = "cpu",
              requires_grad: bool = False) -> TensorMeta:
    """A TensorMeta for a contiguous tensor of ``shape`` and ``dtype`` (sizes may be
    :class:`~tutorcompile.fx.symbolic_shapes.SymInt`)."""
    shape = as_shape(shape)
    return TensorMeta(shape, dtype, torch.device(device), contiguous_strides(shape),
                      requires_grad)


class GraphHandler(OpsHandler):
    """Record every prim call as a node of ``self.graph``; values are :class:`GraphValue`.

    Inputs come from :meth:`placeholder`; the result is set with :meth:`output`. Python
    numbers stay constants in the node's arguments; a real ``torch.Tensor`` passed in becomes
    a constant of the generated code. A symbolic size (a ``SymInt``) in an argument becomes
    nodes that compute it from the inputs' sizes when the graph runs (:meth:`sym_node`).
    """

    def __init__(self, graph: Graph | None = None, provenance: str = "GraphHandler"):
        self.graph = graph if graph is not None else Graph(provenance)
        self.sym_sources: dict[Any, tuple[Node, int]] = {}  # symbol -> (input, dim)
        self.sym_nodes: dict[Any, Node] = {}               # expression -> node computing it

    def placeholder(self, name: str, like: Any) -> GraphValue:
        """A graph input shaped like ``like`` (a tensor, a TensorMeta, or (shape, dtype))."""
        node = self.graph.placeholder(name)
        if isinstance(like, tuple) and len(like) == 2 and isinstance(like[1], torch.dtype):
            node.meta["tensor_meta"] = make_meta(like[0], like[1])
        elif isinstance(like, TensorMeta):
            node.meta["tensor_meta"] = like
        else:
            node.meta["tensor_meta"] = make_meta(like.shape, like.dtype, like.device,
                                                 bool(getattr(like, "requires_grad", False)))
        for dim, size in enumerate(node.meta["tensor_meta"].shape):
            if isinstance(size, SymInt) and size.expr.is_Symbol:
                self.sym_sources.setdefault(size.expr, (node, dim))
        return GraphValue(node, self)

    def sym_node(self, size: SymInt) -> Node | int:
        """The node computing ``size`` from the inputs' sizes (made once per expression)."""
        return materialize(size, self.graph, self.sym_sources, self.sym_nodes)

    def call(self, prim: Prim, args: tuple, kwargs: dict) -> GraphValue:
        def as_meta(v: Any) -> Any:
            return v.meta if isinstance(v, GraphValue) else v

        def as_arg(v: Any) -> Any:
            if isinstance(v, GraphValue):
                if v.node.graph is not self.graph:
                    raise ValueError(f"{v!r} belongs to another graph")
                return v.node
            if isinstance(v, SymInt):
                return self.sym_node(v)
            return v

        shape, dtype = prim.meta(*map_aggregate(args, as_meta),
                                 **map_aggregate(kwargs, as_meta))
        device = kwargs.get("device") or next(
            (v.device for v in tree_leaves(args) if is_tensor_like(v)), torch.device("cpu"))
        node = self.graph.call_function(prim, map_aggregate(args, as_arg),
                                        map_aggregate(kwargs, as_arg))
        # (requires_grad: whether a gradient may flow back through it -- a rule may build
        # its forward differently when none will, as max pooling does)
        node.meta["tensor_meta"] = make_meta(shape, dtype, device, any(
            v.meta.requires_grad for v in tree_leaves(args) if isinstance(v, GraphValue)))
        return GraphValue(node, self)

    def output(self, result: Any) -> Graph:
        """Finish the graph with ``result`` (a value or a tuple/list of values, or None)."""
        self.graph.output(map_aggregate(
            result, lambda v: v.node if isinstance(v, GraphValue) else
            self.sym_node(v) if isinstance(v, SymInt) else v))
        return self.graph


# ---------------------------------------------------------------------------------------
# Spelling kernels: the place where stage 5's code generators plug in
# ---------------------------------------------------------------------------------------

TRITON_DTYPES = {torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16",
                 torch.float32: "tl.float32", torch.float64: "tl.float64",
                 torch.int8: "tl.int8", torch.int16: "tl.int16", torch.int32: "tl.int32",
                 torch.int64: "tl.int64", torch.uint8: "tl.uint8", torch.bool: "tl.int1"}
CPP_DTYPES = {torch.float16: "at::Half", torch.bfloat16: "at::BFloat16",
              torch.float32: "float", torch.float64: "double", torch.int8: "int8_t",
              torch.int16: "int16_t", torch.int32: "int32_t", torch.int64: "int64_t",
              torch.uint8: "uint8_t", torch.bool: "bool"}


class KernelSpellingHandler(OpsHandler):
    """Pointwise prims become expression strings: ``ops.exp(ops.add("x", "y"))`` gives
    ``"tl.exp((x + y))"`` under ``KernelSpellingHandler("triton")``.

    Operands are strings (names of loaded values) or Python numbers. Stage 5's kernel
    writers build on this: they add loads, stores, index expressions and reductions.
    """

    def __init__(self, language: str = "triton"):
        if language not in ("triton", "cpp"):
            raise ValueError(f"language must be 'triton' or 'cpp', got {language!r}")
        self.language = language

    def literal(self, value: Any) -> str:
        if isinstance(value, bool):
            return ("True" if value else "False") if self.language == "triton" else \
                ("true" if value else "false")
        if isinstance(value, float):
            if math.isinf(value):
                sign = "-" if value < 0 else ""
                return (f"{sign}float('inf')" if self.language == "triton"
                        else f"{sign}std::numeric_limits<float>::infinity()")
            if math.isnan(value):
                return ("float('nan')" if self.language == "triton"
                        else "std::numeric_limits<float>::quiet_NaN()")
            return repr(value)
        return str(value)

    def call(self, prim: Prim, args: tuple, kwargs: dict) -> str:
        spelling = getattr(prim, self.language)
        if not prim.is_pointwise or spelling is None:
            raise NotImplementedError(f"{prim.name} is a {prim.kind} prim; only pointwise prims "
                                      "have kernel spellings (reductions and views are "
                                      "written by the stage 5 code generators)")
        table = TRITON_DTYPES if self.language == "triton" else CPP_DTYPES
        return spell(spelling, args, kwargs,
                     lambda a: a if isinstance(a, str) else self.literal(a), table.__getitem__)


def spell(spelling: str, args: tuple, kwargs: dict, operand: Callable[[Any], str],
          dtype_name: Callable[[torch.dtype], str]) -> str:
    """A pointwise prim's kernel expression: its ``spelling`` template (``"({0} + {1})"``,
    ``"{0}.to({dtype})"``) filled with the operands in order, arguments then keyword
    values, each written by ``operand``; a dtype argument fills ``{dtype}``. The one path
    from a prim call to kernel text, shared by :class:`KernelSpellingHandler` and stage 5's
    kernel writers."""
    named, operands = {}, []
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.dtype):  # convert_element_type(x, torch.float16)
            named["dtype"] = dtype_name(a)
        else:
            operands.append(operand(a))
    return spelling.format(*operands, **named)


