"""Autograd graphs as ``tutorcompile.fx`` Graphs: PyTorch's own, and our tape's.

When PyTorch computes ``y = (x * w).sum()`` with ``requires_grad`` inputs, it builds a
backward graph as it goes: ``y.grad_fn`` is a ``SumBackward0`` node whose
``next_functions`` lead to ``MulBackward0``, then to ``AccumulateGrad`` nodes that write
``x.grad`` and ``w.grad``. Each node holds the tensors its derivative needs (``_saved_self``,
``_saved_other``, ...). :func:`torch_autograd_graph` walks that structure and returns it as a
Graph, so ``tutorcompile.viz.draw`` can show it:

* ``grad_output`` (a placeholder) is the gradient flowing into the result;
* each backward node is a ``call_function`` node (``MulBackward0``) reading the gradients of
  the nodes that feed it, and its saved tensors -- drawn as ``get_attr`` nodes with shapes;
* each ``AccumulateGrad`` node is named after its leaf and carries the leaf's shape; the
  output is the tuple of them (the leaf gradients).

:func:`value_graph` shows the scalar warm-up's graph the same way, and
:func:`tape_backward_graph` draws *our* tape (``tutorcompile.autograd.Tensor``) the same way,
so the two can be compared; :func:`tape_graph` exports the tape as a forward graph of prims
that runs as a ``GraphModule``.

These backward graphs are pictures (their call targets refuse to run); the runnable backward
graph of a prim graph comes from ``tutorcompile.ops.backward_graph``.

Mirrors: torch/csrc/autograd/function.h (``next_edges``), torchviz's ``make_dot``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import torch

from ..fx import Graph, Node, TensorMeta
from ..fx.node import map_aggregate
from .tensor import Tensor
from .value import Value, postorder


class BackwardFunction:
    """The call target of a drawn backward node: it has a name, and refuses to be run."""

    _instances: dict[str, BackwardFunction] = {}
    __name__: str
    __qualname__: str

    def __new__(cls, name: str) -> BackwardFunction:
        if name not in cls._instances:
            obj = super().__new__(cls)
            obj.__name__ = obj.__qualname__ = name
            cls._instances[name] = obj
        return cls._instances[name]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{self.__name__} is a node of a drawn autograd graph; it does not "
                           "run (use tutorcompile.ops.backward_graph for a runnable one)")

    def __repr__(self) -> str:
        return self.__name__


def value_graph(output: Value) -> Graph:
    """The forward graph of a scalar :class:`Value` computation, as a runnable Graph.

    Labelled leaves (``Value(2.0, label="a")``) become inputs; unlabelled leaves (numbers
    mixed into the computation) become constants. ``GraphModule({}, graph)(2.0, ...)``
    recomputes the result from new inputs: the recorded graph *is* a program.
    """
    graph = Graph("value_graph")
    env: dict[int, Any] = {}
    for v in output.topological_order():
        if not v._prev:
            if v.label:
                node = graph.placeholder(v.label)
                node.meta["value"] = v.data
                env[id(v)] = node
            else:
                env[id(v)] = v.data
            continue
        args = tuple(env[id(p)] for p in v._prev)
        if v._op.startswith("**"):
            args += (float(v._op[2:]),)
        node = graph.call_function(_VALUE_OPS[v._op.split("*")[0] if v._op.startswith("**")
                                              else v._op], args, name=v.label or None)
        node.meta["value"] = v.data
        env[id(v)] = node
    graph.output(env[id(output)])
    return graph


def _relu(x: float) -> float:
    return max(x, 0.0)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


_relu.__name__, _sigmoid.__name__ = "relu", "sigmoid"
_VALUE_OPS: dict[str, Callable[..., Any]] = {
    "+": operator.add, "*": operator.mul, "": operator.pow, "exp": math.exp, "log": math.log,
    "tanh": math.tanh, "relu": _relu, "sigmoid": _sigmoid}


def _names_by_id(names: dict[str, Any] | None) -> dict[int, str]:
    return {id(t): name for name, t in (names or {}).items()}


def torch_autograd_graph(output: torch.Tensor, names: dict[str, torch.Tensor] | None = None
                         ) -> Graph:
    """PyTorch's backward graph of ``output`` (walking ``grad_fn.next_functions``).

    ``names`` maps a name to each leaf tensor you want labelled (``{"x": x, "w": w}``);
    other leaves are called ``leaf``, ``leaf_1``, ...
    """
    if output.grad_fn is None:
        raise ValueError("the tensor has no grad_fn: it is a leaf, or no input required grad")
    leaf_names = _names_by_id(names)

    # Kahn's algorithm over the backward DAG: a node is emitted after every node that sends
    # it a gradient, the order in which PyTorch's engine can run them.
    pending: dict[Any, int] = {}
    stack, seen = [output.grad_fn], {output.grad_fn}
    while stack:
        fn = stack.pop()
        for nxt, _ in fn.next_functions:
            if nxt is None:
                continue
            pending[nxt] = pending.get(nxt, 0) + 1
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)

    graph = Graph("torch_autograd_graph")
    grad_output = graph.placeholder("grad_output")
    grad_output.meta["tensor_meta"] = TensorMeta.of(output.detach())
    incoming: dict[Any, list[Node]] = {output.grad_fn: [grad_output]}
    ready: list[Any] = [output.grad_fn]   # autograd's Node objects
    leaves = []
    while ready:
        fn = ready.pop(0)
        name = type(fn).__name__
        saved = _saved_tensor_nodes(graph, fn)
        if name == "AccumulateGrad":
            node = graph.call_function(BackwardFunction(name), tuple(incoming[fn]),
                                       name=leaf_names.get(id(fn.variable), "leaf"))
            node.meta["tensor_meta"] = TensorMeta.of(fn.variable.detach())
            leaves.append(node)
        else:
            node = graph.call_function(BackwardFunction(name), tuple(incoming[fn]) + saved)
        node.meta["saved"] = {n.target.split(".", 1)[1]: n for n in saved}
        for nxt, _ in fn.next_functions:
            if nxt is None:
                continue
            incoming.setdefault(nxt, []).append(node)
            pending[nxt] -= 1
            if pending[nxt] == 0:
                ready.append(nxt)
    graph.output(tuple(leaves))
    return graph


def _saved_tensor_nodes(graph: Graph, fn: Any) -> tuple[Node, ...]:
    """One get_attr node per tensor the backward node saved (read before it is freed)."""
    nodes = []
    for attr in sorted(a for a in dir(fn) if a.startswith("_saved_")):
        try:
            value = getattr(fn, attr)
        except RuntimeError:  # freed by an earlier backward()
            continue
        if isinstance(value, torch.Tensor):
            short = attr[len("_saved_"):]
            node = graph.get_attr(f"{type(fn).__name__}.{short}", name=f"saved_{short}")
            node.meta["tensor_meta"] = TensorMeta.of(value.detach())
            nodes.append(node)
    return tuple(nodes)


def _tape_order(output: Tensor) -> list[Tensor]:
    """Every Tensor reachable through the tape (requiring grad or not), inputs first."""
    return postorder(output, lambda t: t.grad_fn.inputs if t.grad_fn is not None else ())


def tape_graph(output: Tensor, names: dict[str, Tensor] | None = None) -> Graph:
    """Our tape as a forward graph of prims: leaves become inputs, in first-use order.

    The graph runs as ``GraphModule({}, graph)(*leaf_values)``; :meth:`Graph.placeholders`
    says which leaf each input is.
    """
    leaf_names = _names_by_id(names)
    graph = Graph("tape_graph")
    env: dict[int, Node] = {}
    for t in _tape_order(output):
        if t.grad_fn is None:
            node = graph.placeholder(leaf_names.get(id(t), f"x{len(graph.placeholders)}"))
        else:
            fn = t.grad_fn

            def as_arg(v: Any) -> Any:
                return env[id(v)] if isinstance(v, Tensor) else v
            node = graph.call_function(fn.prim, map_aggregate(fn.args, as_arg),
                                       map_aggregate(fn.kwargs, as_arg))
        node.meta["tensor_meta"] = TensorMeta.of(t.data)
        env[id(t)] = node
    graph.output(env[id(output)])
    return graph


def tape_backward_graph(output: Tensor, names: dict[str, Tensor] | None = None) -> Graph:
    """Our tape drawn like :func:`torch_autograd_graph`: ``MulBackward`` nodes, what they
    keep (the result ``out`` and tensor arguments ``arg0``, ``arg1``...), AccumulateGrad."""
    if output.grad_fn is None:
        raise ValueError("the tensor has no grad_fn: it is a leaf, or no input required grad")
    leaf_names = _names_by_id(names)
    order = [t for t in _tape_order(output) if t.requires_grad]
    consumers: dict[int, int] = {}
    for t in order:
        if t.grad_fn is not None:
            for i in {id(x) for x in t.grad_fn.inputs if x.requires_grad}:
                consumers[i] = consumers.get(i, 0) + 1

    graph = Graph("tape_backward_graph")
    grad_output = graph.placeholder("grad_output")
    grad_output.meta["tensor_meta"] = TensorMeta.of(output.data)
    incoming: dict[int, list[Node]] = {id(output): [grad_output]}
    leaves = []
    for t in reversed(order):  # reverse topological: the order backward() runs in
        if t.grad_fn is None:
            node = graph.call_function(BackwardFunction("AccumulateGrad"),
                                       tuple(incoming[id(t)]),
                                       name=leaf_names.get(id(t), "leaf"))
            node.meta["tensor_meta"] = TensorMeta.of(t.data)
            leaves.append(node)
            continue
        fn = t.grad_fn
        saved = []
        if fn.saved is not None:
            tensors = [v for v in fn.args if isinstance(v, Tensor)]
            for i, v in enumerate(tensors):
                s = graph.get_attr(f"{fn.name}.arg{i}", name=f"saved_arg{i}")
                s.meta["tensor_meta"] = TensorMeta.of(v.data)
                saved.append(s)
            s = graph.get_attr(f"{fn.name}.out", name="saved_out")
            s.meta["tensor_meta"] = TensorMeta.of(fn.saved[2])
            saved.append(s)
        node = graph.call_function(BackwardFunction(fn.name), tuple(incoming[id(t)]) +
                                   tuple(saved))
        seen_inputs = set()
        for x in fn.inputs:
            if x.requires_grad and id(x) not in seen_inputs:
                seen_inputs.add(id(x))
                incoming.setdefault(id(x), []).append(node)
    graph.output(tuple(leaves))
    return graph
