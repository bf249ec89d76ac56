"""Reverse-mode differentiation from the table's VJP rules, under any ops handler.

Three pieces, shared by the tape autograd (stage 1) and AOTAutograd's joint graphs (stage 4):

* :func:`sum_to_shape` -- the gradient of broadcasting. If ``a`` of shape ``(3, 1)`` was
  stretched to ``(2, 3, 4)`` by an op, each element of ``a`` was used 2 * 4 times, so its
  gradient is the incoming gradient *summed* over the stretched dimensions.
* :func:`vjp` -- apply one prim's VJP rule and fit every gradient to its input: summed to the
  input's shape (so no rule has to think about broadcasting) and cast to its dtype.
  :func:`vjp_rules` swaps in other rules for some prims while it is active (the capstone
  builds its joint graphs with the learner's own rules from exercise 01).
* :func:`trace` and :func:`backward_graph` -- run Python code written against ``ops`` under
  the graph-building handler to get a forward graph of prims; then replay that graph and run
  the VJP rules in reverse order, again under the graph handler, to get a graph that computes
  the gradients. Run it as a ``GraphModule`` and it gives PyTorch's gradients.

Mirrors: torch/csrc/autograd/engine.cpp (the reverse sweep), torch/_refs/__init__.py
(``sum_to_size``) and torch/_functorch/aot_autograd.py (tracing a backward as a graph).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from ..fx import Graph, GraphModule, Node, ShapeProp, dce
from ..fx.node import map_aggregate, map_arg
from .table import Prim, is_tensor_like
from .virtualized import GraphHandler, GraphValue, ops, set_handler


def sum_to_shape(grad: Any, shape: Sequence[int]) -> Any:
    """Sum ``grad`` over the dimensions that broadcasting added or stretched to get ``shape``.

    Sizes are compared so as to decide nothing about a symbolic size that need not be
    decided: the same size (``s0`` and ``s0``) was not stretched; a literal 1 is summed over
    whatever the gradient's size (a sum over a size that is 1 too is a copy) -- asking
    ``t % 4 == 1`` instead would pin the graph to t % 4 being 1 (t = 9, the example) or not."""
    shape, gshape = tuple(shape), tuple(grad.shape)
    if len(gshape) == len(shape) and all(map(_same_size, gshape, shape)):
        return grad
    lead = len(gshape) - len(shape)
    if lead < 0:  # a gradient smaller than its input: it broadcasts up
        return ops.expand(grad, shape)
    dims = tuple(range(lead)) + tuple(
        lead + i for i, s in enumerate(shape)
        if (not _same_size(gshape[lead + i], 1) if _same_size(s, 1) else
            gshape[lead + i] != s and s == 1))
    if dims:
        grad = ops.sum(grad, dims, keepdim=True)
    if lead:
        grad = ops.reshape(grad, tuple(grad.shape)[lead:])
    if not all(map(_same_size, grad.shape, shape)):
        grad = ops.expand(grad, shape)
    return grad


def _same_size(a: Any, b: Any) -> bool:
    """The same int or the same symbolic expression (deciding nothing, guarding nothing)."""
    return getattr(a, "expr", a) == getattr(b, "expr", b)   # (sympy's == is structural)


def _fit(grad: Any, arg: Any) -> Any:
    if grad is None:
        return None
    if isinstance(arg, (list, tuple)):
        return [_fit(g, a) for g, a in zip(grad, arg)]
    if not is_tensor_like(arg) or not arg.dtype.is_floating_point:
        return None
    grad = sum_to_shape(grad, arg.shape)
    if grad.dtype != arg.dtype:
        grad = ops.convert_element_type(grad, arg.dtype)
    return grad


_RULES: dict[Prim, Callable] = {}   # what vjp_rules swapped in, by prim


@contextlib.contextmanager
def vjp_rules(rules: dict[Prim, Callable]) -> Iterator[None]:
    """While active, :func:`vjp` uses ``rules[prim]`` instead of the table's rule for each prim
    in ``rules`` (same contract: ``rule(g, out, *args, **kwargs)`` -> one gradient per
    positional argument). Gradients are still fitted to their inputs' shapes and dtypes."""
    saved = dict(_RULES)
    _RULES.update(rules)
    try:
        yield
    finally:
        _RULES.clear()
        _RULES.update(saved)


def vjp(prim: Prim, grad: Any, out: Any, args: Sequence[Any], kwargs: dict | None = None
        ) -> tuple[Any, ...]:
    """Gradients of ``prim(*args, **kwargs)`` for each positional argument.

    ``grad`` is the gradient of the output ``out``. The rule runs under the current handler;
    every gradient is summed to its argument's shape and cast to its dtype; arguments that
    are constants, integer tensors or not differentiable get ``None``.
    """
    rule = _RULES.get(prim, prim.vjp)
    if rule is None:
        raise NotImplementedError(f"prim {prim.name!r} has no VJP rule, so gradients cannot "
                                  "flow through it (add vjp=... to its table entry)")
    grads = rule(grad, out, *args, **(kwargs or {}))
    if len(grads) > len(args):
        raise RuntimeError(f"the VJP rule of {prim.name} returned {len(grads)} gradients for "
                           f"{len(args)} arguments")
    grads = tuple(grads) + (None,) * (len(args) - len(grads))  # trailing constants
    return tuple(_fit(g, a) for g, a in zip(grads, args))


# ---------------------------------------------------------------------------------------
# Graphs: forward by tracing code written against ops, backward by replaying VJP rules
# ---------------------------------------------------------------------------------------

def trace(fn: Callable, *example_inputs: Any, names: Sequence[str] | None = None) -> Graph:
    """Run ``fn`` under the graph handler and return the graph of prims it called.

    Tensor inputs become placeholders (named after ``fn``'s parameters); other inputs are
    passed through as constants. ``fn`` must call prims (``ops.*`` / ``prims.*``).
    """
    if names is None:
        try:
            names = list(inspect.signature(fn).parameters)[:len(example_inputs)]
        except (TypeError, ValueError):
            names = []
        if len(names) != len(example_inputs) or any(n.startswith("*") for n in names):
            names = [f"x{i}" for i in range(len(example_inputs))]
    handler = GraphHandler(provenance="trace")
    values = [handler.placeholder(name, x) if is_tensor_like(x) else x
              for name, x in zip(names, example_inputs)]
    with set_handler(handler):
        result = fn(*values)
    return handler.output(result)


def backward_graph(forward: Graph | GraphModule, *example_inputs: Any) -> Graph:
    """A graph computing the gradients of ``forward``'s inputs, built from the VJP rules.

    Its inputs are ``forward``'s inputs followed by one ``tangent`` per output (the gradient
    flowing into that output); it returns one gradient per input (``None`` where an input does
    not affect the outputs or is not floating point). The forward is recomputed inside, so the
    graph stands alone; AOTAutograd (stage 4) cuts such a graph into a forward that saves
    values and a backward that reads them.

    ``forward`` must consist of prim calls. If its nodes carry no ``tensor_meta``, pass
    example inputs and ShapeProp fills it in (on a copy).
    """
    graph = forward if isinstance(forward, Graph) else forward.graph
    if example_inputs:
        graph = graph.copy()
        ShapeProp(GraphModule({}, graph)).propagate(*example_inputs)
    handler = GraphHandler(provenance="backward_graph")
    env: dict[Node, Any] = {}
    calls: list[Node] = []
    result: Any = None
    with set_handler(handler):
        for node in graph.nodes:
            if node.op == "placeholder":
                if "tensor_meta" not in node.meta:
                    raise ValueError(f"input {node.name!r} has no tensor_meta; pass example "
                                     "inputs to backward_graph")
                env[node] = handler.placeholder(node.name, node.meta["tensor_meta"])
            elif node.op == "call_function" and isinstance(node.target, Prim):
                env[node] = node.target(*map_arg(node.args, env.__getitem__),
                                        **map_arg(node.kwargs, env.__getitem__))
                calls.append(node)
            elif node.op == "output":
                result = node.args[0]
            else:
                raise ValueError(f"backward_graph needs a graph of prims; node {node.name!r} "
                                 f"is {node.op} {node.format_target()}")

        outputs = [n for n in _flat_nodes(result)]
        grads: dict[Node, GraphValue] = {}
        for i, out in enumerate(outputs):
            name = "tangent" if i == 0 else f"tangent_{i}"
            tangent = handler.placeholder(name, env[out].meta)
            accumulate_grad(grads, out, tangent)

        for node in reversed(calls):
            propagate_vjp(node, env, grads)

        input_grads = tuple(grads.get(p) for p in graph.placeholders)
    # The recomputed forward output is usually unread by the gradients: drop what is dead.
    return dce(handler.output(input_grads))


def propagate_vjp(node: Node, env: dict[Node, Any], grads: dict[Node, Any],
                  wants: Callable[[Node], bool] = lambda node: True) -> None:
    """One step of a reverse sweep: apply ``node``'s VJP rule to the gradient flowing into it,
    and add each input's share to that input's gradient (for inputs that ``wants``).

    ``env`` maps graph nodes to their values under the current handler; ``grads`` holds the
    gradients gathered so far and loses ``node``'s entry. The backward graphs of stage 1 and
    the joint graphs of stage 4 are both built from this step.
    """
    grad = grads.pop(node, None)
    if grad is None or not env[node].dtype.is_floating_point:
        return
    args = map_arg(node.args, env.__getitem__)
    kwargs = map_arg(node.kwargs, env.__getitem__)
    input_grads = vjp(node.target, grad, env[node], args, kwargs)
    for arg, g in zip(node.args, input_grads):
        if isinstance(arg, (list, tuple)):  # cat's list of inputs gets a list of gradients
            pairs = list(zip(arg, g or [None] * len(arg)))
        else:
            pairs = [(arg, g)]
        for a, gi in pairs:
            if isinstance(a, Node) and gi is not None and wants(a):
                accumulate_grad(grads, a, gi)


def accumulate_grad(grads: dict[Node, Any], node: Node, grad: Any) -> None:
    """A value used twice receives the sum of both gradients."""
    grads[node] = grad if node not in grads else ops.add(grads[node], grad)


def _flat_nodes(result: Any) -> list[Node]:
    found: list[Node] = []
    map_aggregate(result, lambda v: found.append(v) if isinstance(v, Node) else None)
    return found


def grad_of(fn: Callable, *inputs: torch.Tensor, grad_output: torch.Tensor | None = None
            ) -> tuple[Any, ...]:
    """Gradients of ``fn`` (written against ``ops``) at ``inputs``: trace, build the backward
    graph, run it. ``grad_output`` defaults to ones (the gradient of ``out.sum()``)."""
    fwd = trace(fn, *inputs)
    bwd = GraphModule({}, backward_graph(fwd))
    out = GraphModule({}, fwd)(*inputs)
    if grad_output is None:
        grad_output = torch.ones_like(out)
    return bwd(*inputs, grad_output)
