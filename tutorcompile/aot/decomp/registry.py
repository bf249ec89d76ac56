"""The decomposition table, how a rule is registered in it, and the tools rules are written with.

A decomposition rule says how one torch call (``F.gelu``, ``x.softmax(-1)``) is built from
prims, written against the virtualized ``ops`` namespace. This module owns the one table
every rule module fills, :data:`DECOMPOSITIONS` (target -> rule; a target is a function
such as ``torch.tanh`` or a method name such as ``"method:softmax"``), and the decorator
that fills it, :func:`register_decomposition`. It imports no rule: the rule modules import
it, and ``decomp/__init__.py`` imports them all, so the table is full once the package is.

Besides the table, the small tools every rule module uses:

* argument helpers: ``_both`` (the ``torch.<name>`` and ``Tensor.<name>`` spellings of one
  op), ``_is_t`` (a tensor or a graph value, not a Python number), ``_float`` (integers
  to the default float dtype), ``_cast``, ``_dims`` (a ``dim`` argument normalised);
* :func:`extern_call`, which records one call PyTorch itself runs (an extern node: a
  sampler, a ``detach``, a call no rule covers), its output shape found on ``meta``
  tensors -- symbolically when sizes are symbolic (:func:`_symbolic_extern_result`);
  ``target_name`` (how reports name a call: ``F.gelu``, ``Tensor.view``).

Mirrors: torch/_decomp/__init__.py (``global_decomposition_table``,
``register_decomposition``), and Inductor's fallback kernels (``make_fallback``) for
``extern_call``.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

import sympy
import torch
import torch.nn.functional as F
from torch._dispatch.python import enable_python_dispatcher

from ...fx import Node, TensorMeta
from ...fx.node import map_aggregate, tree_leaves
from ...fx.symbolic_shapes import SymInt, as_shape
from ...ops import GraphHandler, GraphValue, current_handler, make_meta, ops
from ...ops.table import normalize_dims

# target -> rule. Functions are keyed by themselves; Tensor methods by "method:<name>".
DECOMPOSITIONS: dict[Any, Callable] = {}


def register_decomposition(*targets: Any) -> Callable:
    """Decorator: ``rule`` decomposes every target listed (functions or ``"method:name"``)."""
    def deco(rule: Callable) -> Callable:
        for target in targets:
            DECOMPOSITIONS[target] = rule
        return rule
    return deco


def _both(name: str, *extra: Any) -> tuple:
    """``torch.<name>``, ``Tensor.<name>`` as a method, and any extra spellings."""
    found = [f"method:{name}"]
    if hasattr(torch, name):
        found.append(getattr(torch, name))
    return (*found, *extra)


def _is_t(x: Any) -> bool:
    return isinstance(x, GraphValue) or isinstance(x, torch.Tensor) or (
        hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (int, float, bool)))


def _float(x: Any) -> Any:
    """Integer tensors become the default float dtype (what ``torch.exp(int_tensor)`` does)."""
    if _is_t(x) and not (x.dtype.is_floating_point or x.dtype.is_complex):
        return ops.convert_element_type(x, torch.get_default_dtype())
    return x


def _cast(a, dtype):
    return a if a.dtype == dtype else ops.convert_element_type(a, dtype)


def _dims(a, dim):
    return None if dim is None else normalize_dims(dim, len(a.shape))


# =======================================================================================
# Extern calls: a call PyTorch runs, recorded as one node
# =======================================================================================

def target_name(node_or_target: Any) -> str:
    """How reports and messages name a call: ``F.gelu``, ``torch.tanh``, ``Tensor.view``."""
    target = getattr(node_or_target, "target", node_or_target)
    if isinstance(node_or_target, Node) and node_or_target.op == "call_method":
        return f"Tensor.{target}"
    if isinstance(target, str):
        return target.replace("method:", "Tensor.")
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", None) or repr(target)
    if getattr(F, name, None) is target:
        return f"F.{name}"
    if getattr(torch, name, None) is target:
        return f"torch.{name}"
    if getattr(torch.Tensor, name, None) is target:
        return f"Tensor.{name}"
    if module.startswith("torch.nn.functional"):
        return f"F.{name}"
    if module in ("torch", "torch._C._VariableFunctions") or "_VariableFunctions" in repr(target):
        return f"torch.{name}"
    if module in ("_operator", "operator"):
        return f"operator.{name}"
    return f"{module.split('.')[-1]}.{name}" if module else name


def _meta_tensor(v: Any) -> Any:
    if isinstance(v, GraphValue):
        return torch.empty(tuple(v.shape), dtype=v.dtype, device="meta")
    return v


def _zeros_tensor(v: Any) -> Any:
    if isinstance(v, GraphValue):
        return torch.zeros(tuple(v.shape), dtype=v.dtype, device=v.device)
    return v


def _on_meta(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """``fn`` on meta tensors of the arguments' shapes. A composite op whose C++ kernel reads
    its input's values to check them (``torch.istft``'s window envelope) has no meta run of
    its own; with the Python dispatcher on it runs its Python decomposition
    (``torch._refs.istft``), which computes the same shapes without the check -- zeros would
    fail that check instead.

    Mirrors: torch/_dynamo/output_graph.py (Dynamo traces under enable_python_dispatcher)."""
    with torch.no_grad():
        try:
            return fn(*map_aggregate(args, _meta_tensor), **map_aggregate(kwargs, _meta_tensor))
        except Exception as e:
            with enable_python_dispatcher():
                try:
                    return fn(*map_aggregate(args, _meta_tensor),
                              **map_aggregate(kwargs, _meta_tensor))
                except Exception:  # noqa: BLE001 -- the first failure says what went wrong
                    raise e from None


def extern_call(fn: Callable, args: tuple, kwargs: dict, meta: TensorMeta | None = None) -> Any:
    """Record a call of the torch function ``fn`` as one node (an extern op).

    The output's shape and dtype come from running ``fn`` on ``meta`` tensors (or on zeros
    when ``fn`` has no meta implementation); with symbolic sizes, in those sizes where
    :func:`_symbolic_extern_result` can tell. A tuple result becomes ``getitem`` nodes.
    """
    handler = current_graph_handler()
    def as_node(v: Any) -> Any:   # (a symbolic size: the node computing it)
        if isinstance(v, slice):
            return slice(*map(as_node, (v.start, v.stop, v.step)))
        return v.node if isinstance(v, GraphValue) else \
            handler.sym_node(v) if isinstance(v, SymInt) else v
    if meta is None:   # (given: random ops must not run while tracing)
        meta = _symbolic_extern_result(fn, args, kwargs)
    if meta is not None:  # the result is known
        node = handler.graph.call_function(fn, map_aggregate(args, as_node),
                                           map_aggregate(kwargs, as_node))
        node.meta["extern"] = True
        node.meta["tensor_meta"] = meta
        if isinstance(meta, tuple):
            return _getitems(handler, node, meta)
        return GraphValue(node, handler)
    rng = torch.get_rng_state()  # finding the shape must not draw the program's random numbers
    try:
        sample = _on_meta(fn, args, kwargs)
        on_meta = True
    except Exception:  # no meta kernel: run it on zeros of the right shapes
        with torch.no_grad():
            sample = fn(*map_aggregate(args, _zeros_tensor),
                        **map_aggregate(kwargs, _zeros_tensor))
        on_meta = False
    finally:
        torch.set_rng_state(rng)
    if isinstance(sample, (bool, int, float)):
        # an int/bool result (``Tensor.is_contiguous()``, ``torch.numel``): computed from
        # metadata alone it is a constant of this graph, like a shape; one that needed the
        # data (no meta kernel) cannot be known while tracing
        if on_meta:
            return sample
        raise NotImplementedError(f"{target_name(fn)} returns a {type(sample).__name__} that "
                                  "depends on tensor data; it cannot be part of the graph")
    device = next((v.device for v in tree_leaves((args, kwargs))
                   if isinstance(v, GraphValue)), None)
    node = handler.graph.call_function(fn, map_aggregate(args, as_node),
                                       map_aggregate(kwargs, as_node))
    node.meta["extern"] = True

    def meta_of(t: torch.Tensor) -> TensorMeta:
        dev = device if on_meta and device is not None else (t.device if not on_meta else "cpu")
        if t.device.type != "meta":
            dev = t.device
        return make_meta(t.shape, t.dtype, dev)

    if isinstance(sample, torch.Tensor):
        node.meta["tensor_meta"] = meta_of(sample)
        return GraphValue(node, handler)
    if isinstance(sample, (tuple, list)) and all(isinstance(s, torch.Tensor) or s is None
                                                 for s in sample):
        # (a None among them stays None: ``multi_head_attention_forward`` without weights)
        node.meta["tensor_meta"] = tuple(meta_of(s) if s is not None else None
                                         for s in sample)
        return _getitems(handler, node, node.meta["tensor_meta"])
    raise NotImplementedError(f"{target_name(fn)} returns {type(sample).__name__}, not tensors; "
                              "only tensor results can be extern nodes")


_STEPS = (7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47)   # each symbol moves by its own


def _symbolic_extern_result(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """The result meta of an extern call with symbolic sizes, in those sizes -- or None.

    PyTorch's meta kernels take ints, so an extern's result shape is found by running ``fn``
    on meta tensors at two points: the sizes' hints, and every symbol moved to another
    value (by a step of its own: 7, 11, 13...). A result dimension that equals, at both
    points, a dimension or int argument of the call (``s0``, ``2*s1``: whatever expression
    it holds) *is* that expression -- if exactly one expression fits; one that is the same
    number at both is a constant. A third run, every symbol at 2, must agree with what
    the first two found. When every dimension is explained so, the result is
    symbolic and nothing is guarded: ``perm // top_k`` of a sorted index tensor
    (Mixtral's experts), an ``autograd.Function`` that keeps its input's shape (BLOOM's
    GELU). Anything else (a result whose size is a product no argument holds) answers
    None, and the caller runs ``fn`` at the hints, pinning the sizes it read (a guard
    each) as before.

    Mirrors, loosely: PyTorch runs meta kernels on SymInts (``FakeTensor`` with a
    ``ShapeEnv``); ours evaluate on ints, so the symbolic answer is read off two samples."""
    leaves = [v for v in tree_leaves((args, kwargs)) if isinstance(v, (GraphValue, SymInt))]
    exprs: list[Any] = []
    for v in leaves:
        exprs += [d for d in (v.shape if isinstance(v, GraphValue) else [v])
                  if isinstance(d, SymInt)]
    if not exprs:
        return None
    shape_env = exprs[0].shape_env
    symbols = sorted(set().union(*(sympy.sympify(e.expr).free_symbols for e in exprs)),
                     key=str)
    moved = {s: shape_env.var_to_val[s] + step for s, step in zip(symbols, _STEPS)}
    if len(moved) < len(symbols):
        return None
    # the hints, every symbol moved up, and every symbol at 2 (the least a dynamic size is):
    # the first two find each dimension's expression, the third checks it -- a dimension
    # that is a clamp of a size (``min(s0, 8)``: 8 at both the hint 16 and 23) is caught
    points = [dict(shape_env.var_to_val), {**shape_env.var_to_val, **moved},
              {**shape_env.var_to_val, **{s: 2 for s in symbols}}]

    def at(value: Any, point: dict) -> Any:
        if isinstance(value, SymInt):
            return int(sympy.sympify(value.expr).xreplace(point))
        if isinstance(value, GraphValue):
            return torch.empty([at(d, point) for d in value.shape], dtype=value.dtype,
                               device="meta")
        if isinstance(value, slice):
            return slice(*(at(p, point) for p in (value.start, value.stop, value.step)))
        return value
    samples = []
    rng = torch.get_rng_state()
    try:
        for point in points:
            with torch.no_grad():
                here = functools.partial(at, point=point)
                samples.append(fn(*map_aggregate(args, here), **map_aggregate(kwargs, here)))
    except Exception:   # no meta kernel (or it needs data): the caller's way
        return None
    finally:
        torch.set_rng_state(rng)
    device = next((v.device for v in leaves if isinstance(v, GraphValue)), "cpu")

    def meta_of(first: Any, second: Any, third: Any) -> TensorMeta | None:
        if not all(isinstance(t, torch.Tensor) for t in (first, second, third)):
            return None
        if not first.dim() == second.dim() == third.dim() or \
                not first.dtype == second.dtype == third.dtype:
            return None
        shape = []
        for a, b, c in zip(first.shape, second.shape, third.shape):
            if a == b == c:
                shape.append(int(a))
                continue
            found = {sympy.sympify(e.expr): e for e in exprs
                     if at(e, points[0]) == a and at(e, points[1]) == b}
            if len(found) != 1:   # none, or two that agree at both points: cannot tell
                return None
            (expr,) = found.values()
            if at(expr, points[2]) != c:
                return None
            shape.append(expr)
        return make_meta(as_shape(shape), first.dtype, device)
    first, second, third = samples
    if isinstance(first, torch.Tensor):
        return meta_of(first, second, third)
    if all(isinstance(t, (tuple, list)) for t in samples) and \
            len(first) == len(second) == len(third) and first:
        metas = tuple(meta_of(a, b, c) for a, b, c in zip(first, second, third))
        return None if any(m is None for m in metas) else metas
    return None


def _getitems(handler: GraphHandler, node: Node, metas: tuple) -> tuple:
    """The outputs of a multi-output extern call, one ``getitem`` node each."""
    outs: list[GraphValue | None] = []
    for i, meta in enumerate(metas):
        if meta is None:  # an output that is not a tensor
            outs.append(None)
            continue
        item = handler.graph.call_function(operator.getitem, (node, i))
        item.meta["tensor_meta"] = meta
        item.meta["extern"] = True
        outs.append(GraphValue(item, handler))
    return tuple(outs)


def current_graph_handler() -> GraphHandler:
    """The graph handler that ops are recorded by now (an error under any other)."""
    handler = current_handler()
    if not isinstance(handler, GraphHandler):
        raise RuntimeError("extern_call records graph nodes: run it under a GraphHandler")
    return handler
