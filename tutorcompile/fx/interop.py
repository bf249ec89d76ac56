"""Converting between our graphs and torch.fx's.

The two IRs share their node kinds, so conversion is a node-for-node copy. That makes the
real ``torch.fx`` an oracle for every stage (trace with both and compare), and lets our
graphs flow into PyTorch's own tools (``torch.compile`` backends, Inductor) and back.

torch.fx wraps lists in ``immutable_list`` and dicts in ``immutable_dict``; coming back they
become plain lists and dicts again.

Mirrors: nothing in PyTorch -- this is the bridge the course uses to check itself.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
import torch.fx

from .graph import Graph
from .graph_module import GraphModule
from .node import Node, map_aggregate


def _plain(a: Any) -> Any:
    """torch.fx's immutable containers → plain tuples/lists/dicts (recursively)."""
    if isinstance(a, list):
        return [_plain(x) for x in a]
    if isinstance(a, tuple) and not hasattr(a, "_fields"):
        return tuple(_plain(x) for x in a)
    if isinstance(a, dict):
        return {k: _plain(v) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(_plain(a.start), _plain(a.stop), _plain(a.step))
    return a


def to_torch_fx(gm: GraphModule) -> torch.fx.GraphModule:
    """The same program as a ``torch.fx.GraphModule`` (parameters and submodules shared)."""
    graph = torch.fx.Graph()
    env: dict[Node, torch.fx.Node] = {}

    def convert(a: Any) -> Any:
        return map_aggregate(a, lambda x: env[x] if isinstance(x, Node) else x)

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            default = node.args[0] if node.args else inspect.Signature.empty
            new = graph.placeholder(node.target, default_value=default)
        elif node.op == "output":
            new = graph.output(convert(node.args[0]))
        else:
            new = graph.create_node(node.op, node.target, convert(node.args),
                                    convert(node.kwargs), name=node.name)
        new.meta.update(node.meta)
        env[node] = new
    graph.lint()
    return torch.fx.GraphModule(gm, graph, type(gm).__name__)


def from_torch_fx(fx_gm: torch.fx.GraphModule, provenance: str = "from_torch_fx"
                  ) -> GraphModule:
    """Our ``GraphModule`` for a ``torch.fx.GraphModule`` (parameters and submodules shared)."""
    graph = Graph(provenance=provenance)
    env: dict[torch.fx.Node, Node] = {}

    def convert(a: Any) -> Any:
        return _plain(torch.fx.node.map_arg(a, env.__getitem__))  # type: ignore[arg-type]

    for node in fx_gm.graph.nodes:
        if node.op == "placeholder":
            if node.args:
                new = graph.placeholder(node.target, node.args[0])
            else:
                new = graph.placeholder(node.target)
        elif node.op == "output":
            new = graph.output(convert(node.args[0]))
        else:
            new = graph.create_node(node.op, node.target, convert(node.args),
                                    convert(node.kwargs), name=node.name)
        new.meta.update(node.meta)
        env[node] = new
    return GraphModule(fx_gm, graph, type(fx_gm).__name__)
