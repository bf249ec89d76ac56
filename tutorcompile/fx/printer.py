"""The tabular view of a graph: one row per node, like ``torch.fx.Graph.print_tabular``.

Three views of one graph appear throughout the course: this table (what each node *is*),
the generated code (``GraphModule.code``: what the graph *does*), and the drawing
(``tutorcompile.viz.draw``: how values *flow*). The table grows ``shape`` and ``dtype``
columns once a pass such as :class:`~tutorcompile.fx.ShapeProp` has recorded them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .node import Node, map_arg

if TYPE_CHECKING:  # pragma: no cover
    from .graph import Graph


def _short(a: Any) -> str:
    text = repr(map_arg(a, lambda n: _Name(n.name)))
    return text if len(text) <= 60 else text[:57] + "..."


class _Name:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


def tensor_meta_columns(node: Node) -> tuple[str, str]:
    """(shape, dtype) strings for a node whose ``meta['tensor_meta']`` is set, else ("", "")."""
    tm = node.meta.get("tensor_meta")
    if tm is None:
        return "", ""
    if isinstance(tm, (tuple, list)):
        metas = [m for m in tm if hasattr(m, "shape")]
        return (", ".join(str(list(m.shape)) for m in metas),
                ", ".join(str(m.dtype).replace("torch.", "") for m in metas))
    return str(list(tm.shape)), str(tm.dtype).replace("torch.", "")


def format_tabular(graph: Graph) -> str:
    """The table as a string (``Graph.print_tabular`` prints it)."""
    header = ["opcode", "name", "target", "args", "kwargs"]
    with_meta = any("tensor_meta" in n.meta for n in graph.nodes)
    if with_meta:
        header += ["shape", "dtype"]
    rows = []
    for node in graph.nodes:
        target = node.format_target() if node.op != "output" else "output"
        row = [node.op, node.name, target, _short(node.args), _short(node.kwargs)]
        if with_meta:
            row += list(tensor_meta_columns(node))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule] + [line(r) for r in rows])
