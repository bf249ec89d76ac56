"""The joint graph: forward and backward of a prim graph as ONE graph.

AOTAutograd's central trick is to trace the backward *ahead of time*: replay the forward
graph under the graph-building handler, then walk it in reverse applying each prim's VJP
rule -- the same rules the tape autograd of stage 1 runs eagerly -- still under the graph
handler. The result computes, in one program::

    joint(primals_1, ..., primals_n, tangents_1, ..., tangents_m)
        -> (forward outputs ..., mutated-input values ..., grad of primals_1, ..., primals_n)

Having both halves in one graph is what makes partitioning possible: a partitioner looks at
which forward values the backward reads and decides, per value, to *save* it (memory) or
to *recompute* it in the backward (compute).

Every node carries ``meta["phase"]`` (``"forward"`` or ``"backward"``; draw it with
``tutorcompile.viz.draw(joint.graph, color_by="phase")``) and ``meta["partition_role"]``
(``"primal"``, ``"tangent"``, ``"forward"``, ``"backward"``, ``"output"``). Inputs are
named ``primals_<input>`` and ``tangents_<output>``, after PyTorch's ``primals_i`` and
``tangents_i``.

Extern nodes (torch calls without a decomposition) have no VJP rule in the op table; their
backward is a node calling :func:`extern_backward`, which asks PyTorch for the gradient
(``torch.autograd.grad`` through the same call) when the backward graph runs.

Mirrors: torch/_functorch/_aot_autograd/traced_function_transforms.py
(``create_joint``) and the joint-graph conventions of torch/_functorch/partitioners.py.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field
from typing import Any

import torch

from ..fx import Graph, Node
from ..fx.node import map_aggregate, map_arg
from ..fx.symbolic_shapes import SymInt
from ..ops import GraphHandler, GraphValue, Prim, make_meta, set_handler
from ..ops.autodiff import accumulate_grad, propagate_vjp
from .decomp import with_random_state


@dataclass
class JointGraph:
    """A joint forward+backward graph and how to read its outputs."""
    graph: Graph
    num_fwd_outputs: int          # user outputs + mutated-input values
    num_user_outputs: int
    requires_grad: list[bool]     # per primal
    tangent_outputs: list[int]    # which forward outputs have a tangent input, in order
    # per primal, a bit set of the tangents its gradient can come from (bit k: the k-th):
    # when autograd computed none of them, the input's gradient is None, as in eager
    tangents_reaching: list[int] = field(default_factory=list)

    @functools.cached_property
    def unreached(self) -> tuple[int, ...]:
        """Inputs that require grad but that no output's gradient reaches (a tensor the
        graph reads and drops): passed detached, so that autograd has no edge to follow
        into the graph that made them -- freed already, if its backward ran."""
        return tuple(i for i, (rg, reach) in enumerate(zip(self.requires_grad,
                                                            self.tangents_reaching))
                     if rg and not reach)

    @property
    def primals(self) -> list[Node]:
        return [p for p in self.graph.placeholders if p.meta.get("partition_role") == "primal"]

    @property
    def tangents(self) -> list[Node]:
        return [p for p in self.graph.placeholders if p.meta.get("partition_role") == "tangent"]


def extern_backward(fn: Any, args: Any, kwargs: Any, grad_outputs: Any, *inputs: torch.Tensor,
                    needs_grad: tuple[bool, ...] | None = None) -> tuple:
    """Gradients of ``fn(*args, **kwargs)`` w.r.t. ``inputs``, computed by PyTorch.

    ``args``/``kwargs`` hold the call's constants with ``Slot(i)`` where the i-th tensor of
    ``inputs`` goes. The call is re-run with grad-requiring copies of the inputs that
    ``needs_grad`` names (all floating-point and complex ones when it is None) and
    ``torch.autograd.grad`` gives the vector-Jacobian product: zeros where PyTorch says the
    output does not depend on an input, ``None`` for the inputs that need no gradient. Only
    those inputs require grad in the replay: ``batch_norm``'s running statistics, a loss's
    target and weights, ``pinv``'s tolerance may have no derivative at all.
    """
    if needs_grad is None:
        needs_grad = tuple(is_differentiable(x.dtype) for x in inputs)
    if fn is with_random_state:     # a random call: replay the forward's draws
        kwargs = {**kwargs, "replay": True}
    with torch.enable_grad():
        leaves = [x.detach().requires_grad_(bool(want) and is_differentiable(x.dtype))
                  for x, want in zip(inputs, needs_grad)]

        def fill(a):
            return leaves[a.index] if isinstance(a, Slot) else a
        out = fn(*map_aggregate(args, fill), **map_aggregate(kwargs, fill))
        outs = _tensor_leaves(out)
        grads = _tensor_leaves(grad_outputs) if isinstance(grad_outputs, (tuple, list)) \
            else [grad_outputs]
        pairs = [(o, g if g is not None else torch.zeros_like(o)) for o, g in zip(outs, grads)
                 if isinstance(o, torch.Tensor) and o.requires_grad]
        wanted = [leaf for leaf in leaves if leaf.requires_grad]
        got = torch.autograd.grad([p[0] for p in pairs], wanted, [p[1] for p in pairs],
                                  allow_unused=True) if pairs and wanted else [None] * len(wanted)
    it = iter(got)
    result: list[torch.Tensor | None] = []
    for leaf in leaves:
        if not leaf.requires_grad:
            result.append(None)
            continue
        g = next(it)
        result.append(torch.zeros_like(leaf) if g is None else g)
    return tuple(result)


def is_differentiable(dtype: torch.dtype) -> bool:
    """Floating-point and complex values carry gradients; integers and bools do not."""
    return dtype.is_floating_point or dtype.is_complex


def _tensor_leaves(value: Any) -> list:
    """The outputs of a call in order, nested tuples (a named tuple with a list inside, as
    ``histogramdd`` returns) flattened; what is not a tensor stays, to keep positions."""
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _tensor_leaves(v)]
    return [value]


class Slot:
    """Where the i-th tensor input of an extern call goes in its argument structure."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"Slot({self.index})"

    def __eq__(self, other):
        return isinstance(other, Slot) and other.index == self.index

    def __hash__(self):
        return hash(("slot", self.index))


def _tag(graph: Graph, before: int, phase: str) -> None:
    for node in graph.nodes[before:]:
        if node.op not in ("placeholder", "output"):
            node.meta.setdefault("phase", phase)
            node.meta.setdefault("partition_role", phase)


def _no_gradient(target: Any) -> bool:
    """A torch call whose result PyTorch never differentiates, whatever its inputs:
    ``detach``, and the factories that read only their input's metadata (``zeros_like``,
    ``x.new_zeros``) -- an extern taking one would otherwise be asked for a gradient
    through a tensor PyTorch made without one."""
    name = getattr(target, "__name__", "")
    return target is torch.Tensor.detach or (
        getattr(torch, name, None) is target or getattr(torch.Tensor, name, None) is target
    ) and (name.endswith("_like") or name.startswith("new_"))


def make_joint(graph: Graph, requires_grad: list[bool], num_user_outputs: int | None = None,
               recorded_mutations: list[bool] | None = None) -> JointGraph:
    """The joint graph of ``graph`` (a graph of prims and extern nodes with tensor_meta).

    ``requires_grad[i]`` says whether the i-th input gets a gradient. Forward outputs that
    are floating point or complex and depend on such an input get a tangent input; the rest
    (integer outputs, values not depending on any grad input) do not. The trailing outputs
    past ``num_user_outputs`` are new values of mutated inputs: one gets a tangent only where
    ``recorded_mutations`` says autograd records its write in eager (``out[0] = h * 2``),
    never for a side effect such as batch norm's running statistics.
    """
    placeholders = graph.placeholders
    if len(requires_grad) != len(placeholders):
        raise ValueError(f"requires_grad has {len(requires_grad)} entries for "
                         f"{len(placeholders)} inputs")
    results = graph.output_node.args[0]
    results = list(results) if isinstance(results, (tuple, list)) else [results]
    if num_user_outputs is None:
        num_user_outputs = len(results)

    handler = GraphHandler(Graph.derived_from(graph, "make_joint"))
    joint = handler.graph
    env: dict[Node, Any] = {}
    needs_grad: dict[Node, bool] = {}
    inputs_of: dict[Node, int] = {}    # the placeholders a value depends on, as a bit set
    order: list[Node] = []
    with set_handler(handler):
        for i, p in enumerate(placeholders):
            inputs_of[p] = 1 << i
            value = handler.placeholder(f"primals_{p.name}", p.meta["tensor_meta"])
            value.node.meta.update(phase="forward", partition_role="primal", orig_name=p.name)
            env[p] = value
            needs_grad[p] = bool(requires_grad[i]) and is_differentiable(value.dtype)
        start = len(joint)
        for node in graph.nodes:
            if node.op in ("placeholder", "output"):
                continue
            if "sym" in node.meta:  # a size computed from input sizes: this graph's own
                env[node] = node.meta["sym"]
                continue
            args = map_arg(node.args, env.__getitem__)
            kwargs = map_arg(node.kwargs, env.__getitem__)
            if node.op == "call_function" and isinstance(node.target, Prim):
                with joint.nodes_from(node):
                    env[node] = node.target(*args, **kwargs)
                if node.meta.get("realize") and isinstance(env[node], GraphValue):
                    env[node].node.meta["realize"] = True   # (see aot/decomp/sort.py)
            else:  # an extern call, or a getitem of one: copy it as it is
                copy = joint.node_copy(node, lambda a: env[a].node
                                       if isinstance(env[a], GraphValue) else
                                       handler.sym_node(env[a])
                                       if isinstance(env[a], SymInt) else env[a])
                env[node] = (GraphValue(copy, handler)
                             if not isinstance(copy.meta.get("tensor_meta"), tuple) else copy)
            needs_grad[node] = not _no_gradient(node.target) and any(
                needs_grad.get(a, False) for a in node.all_input_nodes)
            inputs_of[node] = functools.reduce(
                operator.or_, (inputs_of.get(a, 0) for a in node.all_input_nodes), 0)
            order.append(node)
        _tag(joint, start, "forward")

        def value_of(r):
            return env[r] if isinstance(r, Node) else r
        fwd_values = [value_of(r) for r in results]

        grads: dict[Node, Any] = {}
        tangent_outputs = []
        tangent_names: set[str] = set()
        recorded = list(recorded_mutations or [])
        differentiable = [i for i in range(len(results)) if i < num_user_outputs or (
            i - num_user_outputs < len(recorded) and recorded[i - num_user_outputs])]
        for i, r in ((i, results[i]) for i in differentiable):
            if isinstance(r, Node) and needs_grad.get(r) and \
                    is_differentiable(fwd_values[i].dtype):
                # one value can be two outputs (``(c, c.contiguous())``, once contiguous
                # decomposes to nothing): a tangent each, named apart, both summed into it
                name = f"tangents_{r.name}"
                if name in tangent_names:
                    name = f"tangents_{r.name}_{i}"
                tangent_names.add(name)
                t = handler.placeholder(name, fwd_values[i].meta)
                t.node.meta.update(phase="backward", partition_role="tangent")
                tangent_outputs.append(i)
                accumulate_grad(grads, r, t)
        start = len(joint)
        for node in reversed(order):
            if not needs_grad.get(node):
                continue
            if node.op == "call_function" and node.target is operator.getitem \
                    and isinstance(node.args[0], Node) \
                    and isinstance(node.args[0].meta.get("tensor_meta"), tuple):
                continue  # its gradient is collected by the multi-output extern node
            with joint.nodes_from(node):  # a gradient cites the line of its forward op
                if node.meta.get("extern") or not isinstance(node.target, Prim) \
                        or _touches_complex(node):
                    _extern_vjp(handler, node, env, grads, needs_grad)
                else:
                    propagate_vjp(node, env, grads, wants=lambda a: needs_grad.get(a, False))
        _tag(joint, start, "backward")
        input_grads = [grads.get(p) if needs_grad[p] else None for p in placeholders]

    outs = [v.node if isinstance(v, GraphValue) else handler.sym_node(v)
            if isinstance(v, SymInt) else v for v in fwd_values]
    out_node = joint.output(tuple(outs) + tuple(
        g.node if isinstance(g, GraphValue) else None for g in input_grads))
    out_node.meta.update(partition_role="output")
    joint.lint()
    reaching = [0] * len(placeholders)
    for k, i in enumerate(tangent_outputs):
        for j in range(len(placeholders)):
            if inputs_of.get(results[i], 0) >> j & 1:
                reaching[j] |= 1 << k
    return JointGraph(joint, len(results), num_user_outputs, list(requires_grad),
                      tangent_outputs, reaching)


_METADATA_METHODS = ("to", "type_as", "view_as", "reshape_as", "expand_as")
"""Tensor methods whose tensor arguments after ``self`` give only a dtype, device or shape
(``x.to(other)``, ``x.expand_as(other)``): PyTorch gives such an argument no gradient."""


def _read_for_metadata(node: Node) -> set[Node]:
    """The inputs of ``node`` it reads only for their metadata (:data:`_METADATA_METHODS`):
    asked for their gradient, PyTorch would answer zeros where eager leaves None -- and a
    parameter given a zero gradient is stepped by its optimizer (weight decay, momentum)."""
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if name not in _METADATA_METHODS or not node.args or \
            (node.op == "call_function" and getattr(torch.Tensor, name, None) is not node.target):
        return set()
    return {a for a in node.all_input_nodes if a is not node.args[0]}


def _touches_complex(node: Node) -> bool:
    """A prim on complex values: its VJP rule is written for real numbers (the conjugates
    of Wirtinger calculus are missing), so PyTorch differentiates its reference instead."""
    metas = [node.meta.get("tensor_meta")] + [a.meta.get("tensor_meta")
                                               for a in node.all_input_nodes]
    return any(getattr(m, "dtype", torch.float32).is_complex for m in metas)


def _extern_vjp(handler: GraphHandler, node: Node, env: dict, grads: dict,
                needs_grad: dict) -> None:
    """Backward of an extern node: one ``extern_backward`` call, then a getitem per input."""
    meta = node.meta.get("tensor_meta")
    if isinstance(meta, tuple):  # multi-output: gradients sit on its getitem users
        items = {u.args[1]: u for u in node.users if u.target is operator.getitem}
        out_grads = [grads.pop(items[i], None) if i in items else None
                     for i in range(len(meta))]
        if all(g is None for g in out_grads):
            return
        grad_arg = [g.node if g is not None else None for g in out_grads]
    else:
        g = grads.pop(node, None)
        if g is None:
            return
        grad_arg = g.node
    tensors: list[Node] = []

    def slot(a: Node) -> Any:
        if "sym" in a.meta:  # a size, not a tensor: the joint graph computes it
            return handler.sym_node(env[a])
        tensors.append(a)
        return Slot(len(tensors) - 1)
    args = map_arg(node.args, slot)
    kwargs = map_arg(node.kwargs, slot)
    inputs = [env[a].node if isinstance(env[a], GraphValue) else env[a] for a in tensors]
    shape_only = _read_for_metadata(node)
    wants = tuple(bool(needs_grad.get(a)) and a not in shape_only for a in tensors)
    call = handler.graph.call_function(extern_backward,
                                       (node.target, args, kwargs, grad_arg, *inputs),
                                       {"needs_grad": wants})
    call.meta["extern"] = True
    call.meta["tensor_meta"] = tuple(a.meta["tensor_meta"] for a in tensors)
    for i, a in enumerate(tensors):
        if not wants[i] or not is_differentiable(a.meta["tensor_meta"].dtype):
            continue
        item = handler.graph.call_function(operator.getitem, (call, i))
        item.meta["extern"] = True
        tm = a.meta["tensor_meta"]
        item.meta["tensor_meta"] = make_meta(tm.shape, tm.dtype, tm.device)
        accumulate_grad(grads, a, GraphValue(item, handler))
