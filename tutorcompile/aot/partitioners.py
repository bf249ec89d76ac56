"""Partitioners: cut a joint graph into a forward graph and a backward graph.

Between the two halves flows the *saved* set: values the forward computes and hands to the
backward (what ``ctx.save_for_backward`` holds in eager PyTorch). Everything the backward
needs is either saved or recomputed from what is saved. Two policies:

* :func:`default_partition` -- what eager autograd does: the forward computes exactly the
  ancestors of its outputs, and every forward value the backward reads is saved.
* :func:`min_cut_partition` -- pick the *cheapest* set of values to save, in bytes, allowing
  the backward to recompute cheap ops (pointwise, views) from it. It is a minimum s-t cut:
  each candidate node ``n`` becomes an edge ``n_in -> n_out`` whose capacity is the bytes it
  would cost to save (a little more the further it sits from the backward); data edges are
  infinite; inputs and ops that must not be recomputed (random, matmul/conv and other
  extern calls, reductions that shrink their input more than 4x) hang off the *source*,
  what the backward computes off the *sink*. Any cut separates the backward from the inputs,
  so it names a valid saved set; the minimum one saves the fewest bytes. On a memory-bound
  chain (``tanh-GELU(x + b)``) it saves ``x + b`` instead of four intermediates and
  recomputes the rest in the (fused, later) backward: half the activation memory.

Both work on our joint graphs (:class:`tutorcompile.aot.joint.JointGraph`) and on PyTorch's:
:func:`torch_partition_fn` wraps either as the ``partition_fn`` of PyTorch's own
``aot_function`` (it receives a ``torch.fx`` joint graph of aten ops, converts it with
``from_torch_fx``, and returns ``torch.fx`` modules with PyTorch's calling convention).

Mirrors: torch/_functorch/partitioners.py (``default_partition``,
``min_cut_rematerialization_partition``, ``solve_min_cut``,
``_extract_graph_with_inputs_outputs``).
"""

from __future__ import annotations

import heapq
import math
import operator
from dataclasses import dataclass, field
from typing import Any

import torch

from ..fx import Graph, GraphModule, Node, from_torch_fx, to_torch_fx
from ..fx.passes.dce_cse import is_random
from ..fx.symbolic_shapes import hint_int
from ..ops import Prim
from .joint import JointGraph


@dataclass
class PartitionReport:
    """What a partitioner decided: the saved values, their bytes, what gets recomputed."""
    partitioner: str
    saved: list[tuple[str, tuple, str, int]] = field(default_factory=list)  # name, shape, dtype, B
    recomputed: list[str] = field(default_factory=list)
    forward_ops: int = 0
    backward_ops: int = 0

    @property
    def saved_bytes(self) -> int:
        return sum(s[3] for s in self.saved)

    def __str__(self) -> str:
        lines = [f"{self.partitioner}: saves {len(self.saved)} values, "
                 f"{self.saved_bytes:,} bytes; forward {self.forward_ops} ops, "
                 f"backward {self.backward_ops} ops"]
        for name, shape, dtype, nbytes in self.saved:
            lines.append(f"  saved {name:<16} {dtype}{list(shape)}  {nbytes:,} B")
        if self.recomputed:
            lines.append("  recomputed in backward: " + ", ".join(self.recomputed))
        return "\n".join(lines)


@dataclass
class Partition:
    forward: GraphModule
    backward: GraphModule
    report: PartitionReport
    saved: list[Node]  # nodes of the joint graph, in the order forward returns them


# ---------------------------------------------------------------------------------------
# Reading a joint graph (ours or PyTorch's)
# ---------------------------------------------------------------------------------------

def is_primal(node: Node) -> bool:
    return node.op == "placeholder" and (node.meta.get("partition_role") == "primal"
                                         or node.name.startswith("primals"))


def is_tangent(node: Node) -> bool:
    return node.op == "placeholder" and (node.meta.get("partition_role") == "tangent"
                                         or node.name.startswith("tangents"))


def _meta_of(node: Node) -> Any:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return val
    tm = node.meta.get("tensor_meta")
    if tm is not None and hasattr(tm, "shape") and hasattr(tm, "dtype"):
        return tm
    return None


def nbytes(node: Node) -> int:
    """Bytes of the tensor a node makes (0 for non-tensors and tuples)."""
    meta = _meta_of(node)
    if meta is None:
        return 0
    return math.prod(hint_int(s) for s in meta.shape) * meta.dtype.itemsize


def _shape_dtype(node: Node) -> tuple[tuple, str]:
    meta = _meta_of(node)
    if meta is None:
        return (), "?"
    return tuple(meta.shape), str(meta.dtype).replace("torch.", "")


_VIEW_ATEN = {"view", "reshape", "_unsafe_view", "permute", "transpose", "t", "expand",
              "squeeze", "unsqueeze", "slice", "select", "alias", "as_strided", "unfold",
              "split", "split_with_sizes", "detach"}
_REDUCTION_ATEN = {"sum", "mean", "amax", "amin", "var", "std", "prod", "max", "min",
                   "argmax", "argmin", "logsumexp", "var_mean", "any", "all"}


def op_kind(node: Node) -> str:
    """``pointwise``, ``view``, ``reduction``, ``factory``, ``random``, ``getitem`` (one
    result of a multi-output op) or ``extern``."""
    if node.op != "call_function":
        return "extern"
    target = node.target
    if isinstance(target, Prim):
        return target.kind
    if is_random(node):
        return "random"
    if target is operator.getitem:  # one result of a multi-output op: saveable
        return "getitem"
    if isinstance(target, torch._ops.OpOverload):  # PyTorch's aten ops
        if torch.Tag.nondeterministic_seeded in target.tags:
            return "random"
        name = target.overloadpacket.__name__
        if name in _VIEW_ATEN:
            return "view"
        if torch.Tag.pointwise in target.tags:
            return "pointwise"
        if name in _REDUCTION_ATEN:
            return "reduction"
        if name in ("full", "zeros", "ones", "empty", "full_like", "zeros_like", "ones_like",
                    "scalar_tensor", "arange", "iota"):
            return "factory"
    return "extern"


def _aliases(node: Node) -> bool:
    """Is ``node`` a view of one tensor (reshape, permute, slice...), free to recompute?
    ``cat``, ``index_select`` and ``slice_scatter`` are of kind ``view`` too -- they move
    data without arithmetic -- but make new tensors from several inputs."""
    return node.op == "call_function" and op_kind(node) == "view" and \
        len(node.all_input_nodes) == 1


def _ancestors(outputs: list[Node], stop: set[Node]) -> set[Node]:
    seen: set[Node] = set()
    stack = [o for o in outputs if isinstance(o, Node)]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in stop:
            continue
        stack.extend(n.all_input_nodes)
    return seen


def _outputs(graph: Graph, num_fwd_outputs: int) -> tuple[list, list]:
    result = graph.output_node.args[0]
    result = list(result) if isinstance(result, (tuple, list)) else [result]
    return result[:num_fwd_outputs], result[num_fwd_outputs:]


def extract_graph(joint: Graph, inputs: list[Node], outputs: list[Any], provenance: str,
                  env: dict | None = None) -> Graph:
    """A new graph computing ``outputs`` from ``inputs`` (nodes of ``joint``), copying only
    the nodes needed, in the joint graph's order."""
    needed = _ancestors(outputs, set(inputs))
    graph = Graph.derived_from(joint, provenance)
    env = {} if env is None else env
    for node in inputs:
        p = graph.placeholder(node.target if node.op == "placeholder" else node.name)
        p.meta = dict(node.meta)
        env[node] = p
    for node in joint.nodes:
        if node in env or node not in needed or node.op == "output":
            continue
        if node.op == "placeholder":
            raise RuntimeError(f"{provenance}: needs the input {node.name!r}, which is not "
                               "available there (the partition is missing a saved value)")
        env[node] = graph.node_copy(node, env.__getitem__)
    graph.output(tuple(env[o] if isinstance(o, Node) else o for o in outputs))
    graph.lint()
    return graph


def partition_from_saved(joint: Any, saved: list[Node], name: str = "custom_partition",
                         *, num_fwd_outputs: int | None = None) -> Partition:
    """Forward and backward graphs for a chosen ``saved`` set (nodes of the joint graph).

    The forward computes its outputs and the saved values from the primals; the backward
    computes the gradients from the saved values and the tangents, recomputing whatever
    else it needs. Raises if the backward would need a primal that is not saved. Every
    partitioner is a policy for choosing ``saved``; this does the rest.
    """
    graph, n_fwd = _as_graph(joint, num_fwd_outputs)
    return _partition(graph, n_fwd, saved, name)


def _partition(joint: Graph, num_fwd_outputs: int, saved: list[Node], name: str
               ) -> Partition:
    fwd_outs, bwd_outs = _outputs(joint, num_fwd_outputs)
    primals = [p for p in joint.placeholders if is_primal(p)]
    tangents = [p for p in joint.placeholders if is_tangent(p)]
    order = {n: i for i, n in enumerate(joint.nodes)}
    saved = sorted(dict.fromkeys(_checkpointed_recomputed(saved)), key=order.__getitem__)
    # saved values the backward does not read after all are dropped
    needed = _ancestors(bwd_outs, set(saved + tangents)) - set(saved + tangents)
    read = {a for n in needed for a in n.all_input_nodes} | \
        {o for o in bwd_outs if isinstance(o, Node)}
    saved = [s for s in saved if s in read]
    bwd_env: dict[Node, Node] = {}
    bwd = extract_graph(joint, saved + tangents, bwd_outs, f"{name} (backward)", bwd_env)
    fwd_env: dict[Node, Node] = {}
    fwd = extract_graph(joint, primals, list(fwd_outs) + saved, f"{name} (forward)", fwd_env)
    # joint nodes computed in both halves (names are the joint graph's)
    recomputed = [n.name for n in joint.nodes if n in bwd_env and n in fwd_env
                  and n.op == "call_function" and n not in saved]
    report = PartitionReport(name, [(s.name, *_shape_dtype(s), nbytes(s)) for s in saved],
                             recomputed,
                             sum(1 for n in fwd.nodes if n.op == "call_function"),
                             sum(1 for n in bwd.nodes if n.op == "call_function"))
    return Partition(GraphModule({}, fwd, "ForwardGraph"), GraphModule({}, bwd, "BackwardGraph"),
                     report, saved)


def _checkpointed_recomputed(saved: list[Node]) -> list[Node]:
    """``saved`` with each value of a checkpointed region (``meta["recompute"]``, from
    ``torch.utils.checkpoint``) replaced by what it is computed from, until the values
    reached are the region's inputs: the backward recomputes the region, whatever policy
    chose ``saved``, as activation checkpointing promises. A random op's draws are saved
    (recomputing would draw again), and so is a value whose input is a tuple made outside
    the region (a tuple cannot be saved)."""
    out: list[Node] = []
    seen: set[Node] = set()
    stack = list(reversed(saved))
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        inputs = node.all_input_nodes
        if node.meta.get("recompute") and node.op == "call_function" and \
                op_kind(node) != "random" and "sym" not in node.meta and all(
                    _meta_of(a) is not None or "sym" in a.meta or a.meta.get("recompute")
                    for a in inputs):
            stack.extend(reversed(inputs))
        else:
            out.append(node)
    return out


def _as_graph(joint: Any, num_fwd_outputs: int | None) -> tuple[Graph, int]:
    """The joint graph and its number of forward outputs, from a :class:`JointGraph` or a
    plain :class:`Graph` with ``num_fwd_outputs=``."""
    if isinstance(joint, JointGraph):
        return joint.graph, joint.num_fwd_outputs
    if isinstance(joint, Graph) and num_fwd_outputs is not None:
        return joint, num_fwd_outputs
    raise TypeError("pass a JointGraph, or (graph, num_fwd_outputs=...)")


# ---------------------------------------------------------------------------------------
# The two policies
# ---------------------------------------------------------------------------------------

def default_partition(joint: Any, *, num_fwd_outputs: int | None = None) -> Partition:
    """Save every forward value the backward reads (eager autograd's choice), but an
    input rather than a view of it."""
    graph, n = _as_graph(joint, num_fwd_outputs)
    fwd_outs, bwd_outs = _outputs(graph, n)
    primals = [p for p in graph.placeholders if is_primal(p)]
    forward = _ancestors(fwd_outs, set(primals))
    # a symbolic size the backward reads is computed in the forward and saved as an int,
    # as PyTorch saves SymInts: the backward need not keep the tensor it was read from
    forward |= {n for n in graph.nodes if "sym" in n.meta
                and not any(is_tangent(a) for a in _ancestors([n], set()))}
    tangents = {p for p in graph.placeholders if is_tangent(p)}
    backward = _ancestors(bwd_outs, forward | tangents) - forward
    saved = [n for n in graph.nodes if n in forward and n.op != "output"
             and any(u in backward for u in n.users)]
    # A view of an input (a weight's transpose, which a matmul's backward reads) is saved
    # as the input itself, the view recomputed in the backward -- views are free, as
    # Inductor's partitioner counts them: one tensor fewer for the forward to hand over,
    # and the backward's transpose of that transpose folds away.
    saved = [_viewed_primal(s) or s for s in saved]
    return _partition(graph, n, saved, "default_partition")


def _viewed_primal(node: Node) -> Node | None:
    """The input ``node`` is a chain of views of, or None."""
    while _aliases(node):
        node = node.all_input_nodes[0]
    return node if is_primal(node) else None


def _banned(node: Node) -> str | None:
    """Why ``node`` must not be recomputed in the backward, or None."""
    kind = op_kind(node)
    if kind == "random":
        return "random: recomputing would draw different numbers"
    if kind == "extern":
        return "extern op (matmul, convolution, library call): too expensive to recompute"
    if kind == "reduction":
        inputs = [a for a in node.all_input_nodes if _meta_of(a) is not None]
        if inputs and nbytes(node) * 4 < max(nbytes(a) for a in inputs):
            return "reduction that shrinks its input more than 4x"
    return None


_EQUALITY = {"eq", "ne"}   # prims and aten ops alike


def _target_name(node: Node) -> str | None:
    """The name of the prim or aten op ``node`` calls (``"cat"``, ``"eq"``), or None."""
    if node.op != "call_function":
        return None
    if isinstance(node.target, Prim):
        return node.target.name
    if isinstance(node.target, torch._ops.OpOverload):
        return node.target.overloadpacket.__name__
    return None


def _compared_for_equality(graph: Graph, backward: set[Node]) -> set[Node]:
    """What must be computed in the forward because the backward tests equality with it: a
    max's gradient goes where ``x == max(x)`` holds, the maximum saved from the forward.
    Recomputed in the backward's kernels -- a division there a multiplication by a
    reciprocal, or operations in another order -- ``x`` may miss the saved maximum by one
    rounding, and then no element gets the gradient (or a count of zero makes it NaN).
    So the comparison itself runs in the forward when it can (its mask is saved: a byte
    per element), and where it needs a tangent, the forward values it compares (through
    views, to the value that owns the memory) are computed in the forward and saved.

    Only a test between two computed values is at risk. Against an input or a constant
    (``maximum(x, 0)``'s gradient tests ``x == 0``) one side has the same bits everywhere,
    and the other is read by the test where it is computed, as ``x > 0`` is in ReLU's."""
    compared: set[Node] = set()
    for node in graph.nodes:
        if _target_name(node) not in _EQUALITY:
            continue
        operands = []
        for arg in node.all_input_nodes:
            while _aliases(arg):
                arg = arg.all_input_nodes[0]
            if not is_primal(arg) and op_kind(arg) != "factory":
                operands.append(arg)
        if len(operands) < 2:
            continue
        if node not in backward:
            compared.add(node)
            continue
        compared.update(arg for arg in operands if arg not in backward)
    return compared


def min_cut_partition(joint: Any, *, num_fwd_outputs: int | None = None,
                      max_dist: int = 100, exact_comparisons: bool = False,
                      fusion_aware: bool = False) -> Partition:
    """Save the fewest bytes, recomputing cheap ops in the backward (see module docstring).

    ``exact_comparisons``: the backward's equality tests see the forward's own bits
    (:func:`_compared_for_equality`) -- what generated kernels need, which may round a
    recomputed value differently from the forward (:func:`kernel_min_cut_partition`).
    ``fusion_aware``: recomputing is free only where it fuses (:func:`_fusion_bans`), and
    saving a value the forward would not otherwise write costs twice its bytes."""
    import networkx as nx

    graph, n_fwd = _as_graph(joint, num_fwd_outputs)
    fwd_outs, bwd_outs = _outputs(graph, n_fwd)
    primals = [p for p in graph.placeholders if is_primal(p)]
    tangents = [p for p in graph.placeholders if is_tangent(p)]
    required_fw = _ancestors(fwd_outs, set(primals))
    # Nodes that depend on a tangent can only run in the backward.
    tangent_closure: set[Node] = set(tangents)
    for node in graph.nodes:
        if any(a in tangent_closure for a in node.all_input_nodes):
            tangent_closure.add(node)
    required_bw = tangent_closure | {o for o in bwd_outs if isinstance(o, Node)}
    compared = _compared_for_equality(graph, tangent_closure) if exact_comparisons else set()
    fusion_banned = _fusion_bans(graph, required_fw) if fusion_aware else {}

    # Distance (in ops) from each node to the nearest backward node: saving values far from
    # their use keeps them alive longer, so they cost a little more.
    dist: dict[Node, int] = {}
    for node in reversed(graph.nodes):
        if node in required_bw:
            dist[node] = 0
        else:
            ds = [dist[u] + 1 for u in node.users if u in dist]
            dist[node] = min(ds) if ds else 10 ** 6

    flow = nx.DiGraph()
    for node in graph.nodes:
        if node.op == "output":
            continue
        if node in required_bw:
            if node in tangent_closure:
                flow.add_edge(node.name + "_in", "sink", capacity=math.inf)
                continue
            # a backward output computed from primals only: must be available to the backward
            flow.add_edge(node.name + "_out", "sink", capacity=math.inf)
        if is_primal(node):
            flow.add_edge("source", node.name + "_in", capacity=math.inf)
        elif (node in required_fw and _banned(node) or node in compared
              or node in fusion_banned) and not _aliases(node):
            flow.add_edge("source", node.name + "_in", capacity=math.inf)
        weight: float
        if "sym" in node.meta:
            weight = 0  # a symbolic size: an int, free to save (PyTorch saves SymInts)
        elif _meta_of(node) is None:
            weight = math.inf  # a tuple or a number: cannot be saved, only recomputed
        elif _aliases(node):
            weight = math.inf  # save the base instead, recompute the view
        else:
            weight = nbytes(node) * 1.1 ** max(min(dist[node], max_dist), 1)
            if fusion_aware and not _materialized(node):
                weight *= 2   # saving it adds a write the fused forward would not make
        flow.add_edge(node.name + "_in", node.name + "_out", capacity=weight)
        for user in node.users:
            if user.op != "output":
                flow.add_edge(node.name + "_out", user.name + "_in", capacity=math.inf)
    if "sink" not in flow or "source" not in flow:
        return default_partition(graph, num_fwd_outputs=n_fwd)  # nothing to trade
    _, (reachable, _) = nx.minimum_cut(flow, "source", "sink")
    by_name = {n.name: n for n in graph.nodes}
    saved = [by_name[name[:-3]] for name in reachable if name.endswith("_in")
             and name[:-3] + "_out" not in reachable and name[:-3] in by_name]
    return _partition(graph, n_fwd, saved, "min_cut_partition")


def kernel_min_cut_partition(joint: Any, *, num_fwd_outputs: int | None = None,
                             max_dist: int = 100) -> Partition:
    """:func:`min_cut_partition` for graphs that become generated kernels (stage 5, and
    ``aot_eager_decomp_partition``, which runs the graphs stage 5 compiles): an equality test
    in the backward never compares a value recomputed there with one the forward computed,
    and only what fuses into the backward's kernels is recomputed (:func:`_fusion_bans`)."""
    return min_cut_partition(joint, num_fwd_outputs=num_fwd_outputs, max_dist=max_dist,
                             exact_comparisons=True, fusion_aware=True)


# ---------------------------------------------------------------------------------------
# Recomputing is free only where it fuses
# ---------------------------------------------------------------------------------------

_KERNEL_KINDS = {"pointwise", "view", "reduction", "factory"}   # what a generated kernel computes


def _kind(node: Node) -> str:
    """:func:`op_kind`, one result of a multi-output op counted as that op."""
    while op_kind(node) == "getitem" and node.args and isinstance(node.args[0], Node):
        node = node.args[0]
    return op_kind(node)


def _fusible(producer: Node, user: Node) -> bool:
    """May ``user`` be computed in the kernel that computes ``producer``? Both are ops a
    generated kernel computes; or ``user`` is a cat, which its inputs' kernels write into."""
    if _target_name(user) == "cat":
        return True
    return _kind(producer) in _KERNEL_KINDS and _kind(user) in _KERNEL_KINDS


def _materialized(node: Node) -> bool:
    """Is ``node`` written to memory anyway: an input, or read by an op it cannot fuse
    with (a matmul, a convolution, a library call)?"""
    return node.op == "placeholder" or not all(_fusible(node, u) for u in node.users)


def _fusion_bans(graph: Graph, required_fw: set[Node]) -> dict[Node, str]:
    """Forward values the min-cut must not recompute in the backward, each with why.

    The cut counts recomputation as free, which it is only when the recomputed op runs
    inside a backward kernel that reads it. Three cases where it is not:

    * **materialized in the backward**: a value the backward hands to a matmul or a
      convolution (a weight gradient reads the layer's input) would be computed by a
      kernel of its own, written and read back: dearer than saving it;
    * **used far apart**: a value read by a fused op nearby and again past an op that
      cannot fuse (a residual stream, read by a layer and by the add after it) -- both
      readers recomputed would not share a kernel;
    * **long fusible chains**: a pointwise chain running 100 ops deep through the forward
      (a residual stream through every layer) would be recomputed from its start.

    Mirrors: torch/_functorch/partitioners.py (``solve_min_cut``'s ``ban_recompute_*``
    heuristics, ``is_materialized_backwards``, ``is_fusible``)."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    bans: dict[Node, str] = {}

    def ban(node: Node, why: str) -> None:
        if node.op == "call_function" and not _aliases(node):
            bans.setdefault(node, why)

    for node in required_fw:
        if node.op != "call_function" or _aliases(node):
            continue
        through, seen = [node], {node}
        while through:                       # its readers, looking through views
            cur = through.pop()
            for user in cur.users:
                if user not in required_fw and user.op != "output" and not _fusible(cur, user):
                    ban(node, f"read by {user.name} in the backward, which cannot fuse")
                if _aliases(user) and user not in seen:
                    seen.add(user)
                    through.append(user)

    for node in required_fw:
        users = sorted((u for u in node.users if u in required_fw), key=order.__getitem__)
        if len(users) < 2:
            continue
        last = order[users[-1]]
        first_unfusible = last
        frontier = [(order[u], u) for u in users]   # fused readers nearby, in order
        heapq.heapify(frontier)
        seen = set(users)
        while frontier:
            at, cur = heapq.heappop(frontier)
            if at >= first_unfusible:
                break
            for user in cur.users:
                if user in required_fw and order[user] <= last and user not in seen:
                    seen.add(user)
                    if _fusible(cur, user):
                        heapq.heappush(frontier, (order[user], user))
                    else:
                        first_unfusible = min(first_unfusible, order[user])
        for user in users:
            if order[user] > first_unfusible and _fusible(node, user):
                ban(user, f"reads {node.name} after an op that cannot fuse")

    visited: set[Node] = set()
    for start in graph.nodes:
        if start not in required_fw or start in visited:
            continue
        chain = [(order[start], start)]
        while chain:
            at, cur = heapq.heappop(chain)
            if cur in visited:
                continue
            visited.add(cur)
            if at > order[start] + 100 and not chain:
                ban(cur, f"ends a chain of fusible ops 100 deep from {start.name}")
                break
            for u in cur.users:
                if u in required_fw and _fusible(cur, u) and u not in bans and \
                        u not in visited:
                    heapq.heappush(chain, (order[u], u))
    return bans


# ---------------------------------------------------------------------------------------
# Inside PyTorch's AOTAutograd
# ---------------------------------------------------------------------------------------

def torch_partition_fn(policy=min_cut_partition, reports: list | None = None):
    """Our ``policy`` as a ``partition_fn`` for ``torch._functorch.aot_autograd``.

    PyTorch calls ``partition_fn(joint_module, joint_inputs, *, num_fwd_outputs, **kw)`` with
    a ``torch.fx`` joint graph of aten ops and expects ``(fw_module, bw_module)`` as
    ``torch.fx.GraphModule`` s: forward returns ``(*outputs, *saved)``, backward takes
    ``(*saved, *tangents)``. Reports are appended to ``reports`` if given.
    """
    def partition_fn(joint_module, _joint_inputs, *, num_fwd_outputs, **kwargs):
        ours = from_torch_fx(joint_module, provenance="from_torch_fx (PyTorch joint graph)")
        part = policy(ours.graph, num_fwd_outputs=num_fwd_outputs)
        if reports is not None:
            reports.append(part.report)
        return to_torch_fx(part.forward), to_torch_fx(part.backward)
    partition_fn.__name__ = f"tutorcompile_{policy.__name__}"
    return partition_fn
