"""Find a small program inside a graph, and swap it for another.

A *pattern* is written as ordinary Python and traced like any model::

    def pattern(x):
        return x * torch.sigmoid(x)

    def replacement(x):
        return torch.nn.functional.silu(x)

    gm = replace_pattern(gm, pattern, replacement)

:func:`match_pattern` walks the graph looking for places where the pattern's nodes line up
with the graph's nodes: same ``op`` and ``target``, same constants, and inputs that match
recursively, starting from the pattern's returned node (the *anchor*) and working upwards.
The pattern's inputs (placeholders) are wildcards: each binds one value of the graph, and a
placeholder used twice (``x`` in ``x * sigmoid(x)``) must bind the same value both times.

Two rules keep a rewrite correct:

* **No escapes.** A matched node other than the anchor may be read only by other matched
  nodes. If ``sigmoid(x)`` is also used elsewhere, removing it would break that use, so the
  place does not match.
* **No overlaps.** Matches are taken in graph order; a match that shares a computed node with
  one already taken is skipped.

:func:`replace_pattern` returns a new GraphModule (the input is not edited); the
replacement's nodes take the anchor's source line, and the graph is stamped
``replace_pattern``. Matching is exact: ``torch.relu`` and ``F.relu`` are different targets,
and ``a + b`` does not match ``b + a``.

Mirrors: torch/fx/subgraph_rewriter.py and torch/fx/passes/utils/matcher_utils.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..graph import Graph
from ..graph_module import GraphModule
from ..node import Node, map_arg
from ..tracer import symbolic_trace


@dataclass
class Match:
    """One place where the pattern occurs.

    ``anchor``: the graph node computing the pattern's result. ``nodes_map``: pattern node →
    graph node for every computed pattern node. ``placeholder_bindings``: for each pattern
    input, in order, the graph value (a node or a constant) it stands for.
    """
    anchor: Node
    nodes_map: dict[Node, Node] = field(default_factory=dict)
    placeholder_bindings: list[Any] = field(default_factory=list)

    @property
    def nodes(self) -> list[Node]:
        """The graph nodes this match would remove (the anchor last)."""
        return list(self.nodes_map.values())


def _as_graph(pattern: Callable[..., Any] | Graph | GraphModule) -> Graph:
    if isinstance(pattern, Graph):
        return pattern
    if isinstance(pattern, GraphModule):
        return pattern.graph
    return symbolic_trace(pattern).graph


def _pattern_anchor(pattern: Graph) -> Node:
    out = pattern.output_node.args[0]
    if not isinstance(out, Node) or out.op == "placeholder":
        raise ValueError("a pattern must return exactly one computed value (a single node); "
                         f"this one returns {out!r}")
    return out


class _Matcher:
    """Tries to line up a pattern with the graph below one anchor node."""

    def __init__(self, pattern: Graph):
        self.pattern = pattern
        self.anchor = _pattern_anchor(pattern)
        self.placeholders = pattern.placeholders

    def match_at(self, node: Node) -> Match | None:
        self.nodes_map: dict[Node, Node] = {}
        self.bindings: dict[Node, Any] = {}
        if not self._match_node(self.anchor, node):
            return None
        for p in self.placeholders:
            if p not in self.bindings:
                raise ValueError(f"pattern input {p.name!r} is never used, so it cannot be "
                                 "matched; remove it from the pattern's parameters")
        # No escapes: computed nodes other than the anchor are read only inside the match.
        inside = set(self.nodes_map.values())
        for pn, gn in self.nodes_map.items():
            if pn is self.anchor:
                continue
            if any(user not in inside for user in gn.users):
                return None
        # keep graph order, anchor last
        order = {n: i for i, n in enumerate(node.graph.nodes)}
        ordered = dict(sorted(self.nodes_map.items(), key=lambda kv: order[kv[1]]))
        return Match(node, ordered, [self.bindings[p] for p in self.placeholders])

    def _match_node(self, pn: Node, gn: Any) -> bool:
        if pn.op == "placeholder":
            if pn in self.bindings:
                return _same_value(self.bindings[pn], gn)
            self.bindings[pn] = gn
            return True
        if not isinstance(gn, Node):
            return False
        if pn in self.nodes_map:
            return self.nodes_map[pn] is gn
        if gn in self.nodes_map.values():
            return False  # one graph node cannot play two pattern nodes
        if pn.op != gn.op or not _same_target(pn, gn):
            return False
        if len(pn.args) != len(gn.args) or set(pn.kwargs) != set(gn.kwargs):
            return False
        self.nodes_map[pn] = gn
        pairs = list(zip(pn.args, gn.args)) + [(pn.kwargs[k], gn.kwargs[k]) for k in pn.kwargs]
        if all(self._match_arg(pa, ga) for pa, ga in pairs):
            return True
        del self.nodes_map[pn]
        return False

    def _match_arg(self, pa: Any, ga: Any) -> bool:
        if isinstance(pa, Node):
            return self._match_node(pa, ga)
        if isinstance(pa, (tuple, list)):
            return (type(pa) is type(ga) and len(pa) == len(ga)
                    and all(self._match_arg(x, y) for x, y in zip(pa, ga)))
        if isinstance(pa, dict):
            return (isinstance(ga, dict) and set(pa) == set(ga)
                    and all(self._match_arg(pa[k], ga[k]) for k in pa))
        if isinstance(pa, slice):
            return isinstance(ga, slice) and all(
                self._match_arg(getattr(pa, f), getattr(ga, f)) for f in ("start", "stop", "step"))
        return _same_value(pa, ga)


def _same_target(pn: Node, gn: Node) -> bool:
    return pn.target is gn.target or pn.target == gn.target


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, Node) or isinstance(b, Node):
        return a is b
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return a is b
    return type(a) is type(b) and a == b


def match_pattern(gm: GraphModule | Graph, pattern: Callable[..., Any] | Graph | GraphModule
                  ) -> list[Match]:
    """All non-overlapping, non-escaping places where ``pattern`` occurs, in graph order."""
    graph = gm.graph if isinstance(gm, GraphModule) else gm
    matcher = _Matcher(_as_graph(pattern))
    matches: list[Match] = []
    taken: set[Node] = set()
    for node in graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        m = matcher.match_at(node)
        if m is None or taken.intersection(m.nodes):
            continue
        taken.update(m.nodes)
        matches.append(m)
    return matches


def replace_pattern(gm: GraphModule, pattern: Callable[..., Any] | Graph | GraphModule,
                    replacement: Callable[..., Any] | Graph | GraphModule) -> GraphModule:
    """A new GraphModule where every match of ``pattern`` computes ``replacement`` instead.

    ``pattern`` and ``replacement`` are functions with the same parameters (matched by
    position), traced with ``symbolic_trace``. The number of rewrites is recorded on the
    result as ``result.replacements`` (ask :func:`match_pattern` to see them beforehand).
    """
    pattern_graph = _as_graph(pattern)
    replacement_gm = replacement if isinstance(replacement, GraphModule) else None
    replacement_graph = _as_graph(replacement)
    if replacement_gm is None and not isinstance(replacement, Graph):
        replacement_gm = symbolic_trace(replacement)
        replacement_graph = replacement_gm.graph
    n_in = len(pattern_graph.placeholders)
    if len(replacement_graph.placeholders) != n_in:
        raise ValueError(f"pattern takes {n_in} inputs but replacement takes "
                         f"{len(replacement_graph.placeholders)}; they must match")

    graph = gm.graph.copy()
    attrs = _attributes(gm, graph)
    # constants the replacement reads (get_attr) are copied under fresh names
    rename: dict[str, str] = {}
    for node in replacement_graph.nodes:
        if node.op in ("get_attr", "call_module") and node.target not in rename:
            i = 0
            while f"_replacement_{node.target.replace('.', '_')}_{i}" in attrs:
                i += 1
            new_name = f"_replacement_{node.target.replace('.', '_')}_{i}"
            rename[node.target] = new_name
            attrs[new_name] = _fetch(replacement_gm, node.target)

    matches = match_pattern(graph, pattern_graph)
    replaced: dict[Node, Any] = {}  # anchors already rewritten → their new value

    def current(v: Any) -> Any:
        while isinstance(v, Node) and v in replaced:
            v = replaced[v]
        return v

    for m in matches:
        bindings = [current(bound) for bound in m.placeholder_bindings]
        replaced[m.anchor] = _rewrite(graph, m, bindings, replacement_graph, rename)
    graph.stamp("replace_pattern")
    graph.lint()
    result = GraphModule(_used_attributes(attrs, graph), graph, type(gm).__name__)
    result.training = gm.training
    result.replacements = len(matches)  # type: ignore[assignment]
    return result


def _rewrite(graph: Graph, m: Match, bindings: list[Any], replacement: Graph,
             rename: dict[str, str]) -> Any:
    """Insert ``replacement`` before ``m.anchor``, reroute the anchor's users, erase ``m``."""
    val_map: dict[Node, Any] = dict(zip(replacement.placeholders, bindings))
    new_value: Any = None
    with graph.inserting_before(m.anchor):
        for node in replacement.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "output":
                new_value = map_arg(node.args[0], val_map.__getitem__)
                break
            new = graph.node_copy(node, val_map.__getitem__)
            if new.op in ("get_attr", "call_module"):
                new.target = rename[new.target]
            new.meta = {"source": m.anchor.meta.get("source"), "replaced": m.anchor.name}
            val_map[node] = new
    anchor = m.anchor
    if isinstance(new_value, Node):
        anchor.replace_all_uses_with(new_value)
    else:  # the replacement returns one of its inputs' constants
        def swap(n: Node) -> Any:
            return new_value if n is anchor else n
        for user in list(anchor.users):
            user.args = map_arg(user.args, swap)
            user.kwargs = map_arg(user.kwargs, swap)
    for old in reversed(m.nodes):
        graph.erase_node(old)
    return new_value


def _attributes(gm: torch.nn.Module, graph: Graph) -> dict[str, Any]:
    return {n.target: _fetch(gm, n.target) for n in graph.nodes
            if n.op in ("get_attr", "call_module")}


def _used_attributes(attrs: dict[str, Any], graph: Graph) -> dict[str, Any]:
    used = {n.target for n in graph.nodes if n.op in ("get_attr", "call_module")}
    return {k: v for k, v in attrs.items() if k in used}


def _fetch(root: Any, path: str) -> Any:
    obj = root
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj
