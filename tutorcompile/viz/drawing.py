"""Drawing graphs with graphviz, with a text rendering when graphviz is not installed.

``draw(graph)`` works on a :class:`~tutorcompile.fx.Graph`, a ``GraphModule``, or anything
with a ``.graph``. Each box shows the node's name, what it computes, and -- once ShapeProp has
run -- its dtype and shape. ``color_by`` colours boxes by a node attribute: a ``meta`` key
(``"partition"`` for AOT's forward/backward split, ``"kernel"`` for the fusion groups of
stage 5) or any function of the node, with a legend.

The result renders inline in Jupyter (SVG) and saves from a script::

    draw(gm).save("graph.svg")      # also .png, .pdf, and .dot for the source

Without graphviz's ``dot`` program, drawing prints one line saying how to install it and
shows a text rendering instead of failing.
"""

from __future__ import annotations

import html
import os
import shutil
from collections.abc import Callable
from typing import Any

from ..fx.codegen import CodeWriter
from ..fx.graph import Graph
from ..fx.printer import tensor_meta_columns

INSTALL_DOT = ("graphviz's `dot` program is not installed, so graphs are shown as text; "
               "install it with `apt-get install graphviz`, `brew install graphviz` or "
               "`conda install -c conda-forge graphviz`")
INSTALL_PY = ("the `graphviz` Python package is not installed, so graphs are shown as text; "
              "install it with `pip install graphviz`")

# Fill colours by node kind (used when no color_by is given).
OP_COLORS = {"placeholder": "#d9f2d9", "get_attr": "#fff2cc", "call_function": "#dae8fc",
             "call_method": "#e1d5e7", "call_module": "#ffe6cc", "output": "#eeeeee"}
# A categorical palette for color_by (colour-blind friendly, light enough for black text).
PALETTE = ["#a6cee3", "#fdbf6f", "#b2df8a", "#fb9a99", "#cab2d6", "#ffff99", "#8dd3c7",
           "#bebada", "#fccde5", "#d9d9d9", "#ccebc5", "#ffed6f"]

_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(message)


def graphviz_available() -> str | None:
    """None if graphviz can render here, else the one-line reason with how to install it."""
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return INSTALL_PY
    if shutil.which("dot") is None:
        return INSTALL_DOT
    return None


def _as_graph(obj: Any) -> Graph:
    if isinstance(obj, Graph):
        return obj
    graph = getattr(obj, "graph", None)
    if isinstance(graph, Graph):
        return graph
    raise TypeError(f"draw() needs a tutorcompile.fx Graph or GraphModule, got "
                    f"{type(obj).__name__}")


def _color_key(color_by: str | Callable | None) -> Callable | None:
    if color_by is None:
        return None
    if callable(color_by):
        return color_by
    return lambda node: node.meta.get(color_by)


class GraphDrawing:
    """A drawn graph: SVG in Jupyter when graphviz is here, text otherwise; ``save()`` to disk."""

    def __init__(self, graph: Graph, color_by: str | Callable | None = None,
                 title: str | None = None, rankdir: str = "TB"):
        self.graph = graph
        self.title = title
        self.rankdir = rankdir
        self.color_key = _color_key(color_by)
        self.color_label = color_by if isinstance(color_by, str) else "group"
        self.groups = self._groups()

    def _groups(self) -> dict[Any, str]:
        """Distinct color_by values in first-seen order, each with its palette colour."""
        if self.color_key is None:
            return {}
        groups: dict[Any, str] = {}
        for node in self.graph.nodes:
            value = self.color_key(node)
            if value is not None and value not in groups:
                groups[value] = PALETTE[len(groups) % len(PALETTE)]
        return groups

    def fill(self, node) -> str:
        if self.color_key is None:
            return OP_COLORS[node.op]
        return self.groups.get(self.color_key(node), "#ffffff")

    @staticmethod
    def describe(node) -> str:
        if node.op == "placeholder":
            return "input"
        if node.op == "output":
            return "output"
        if node.op == "call_method":
            return f".{node.target}(...)"
        if node.op == "call_module":
            return f"self.{node.target}(...)"
        if node.op == "get_attr":
            return f"self.{node.target}"
        return node.format_target()

    # --- graphviz -----------------------------------------------------------------------
    def to_dot(self):
        """A ``graphviz.Digraph`` of the graph (needs the Python package, not ``dot``)."""
        import graphviz
        dot = graphviz.Digraph(graph_attr={"rankdir": self.rankdir, "fontname": "Helvetica",
                                           "fontsize": "11"},
                               node_attr={"shape": "box", "style": "rounded,filled",
                                          "fontname": "Helvetica", "fontsize": "10"},
                               edge_attr={"color": "#555555", "arrowsize": "0.6"})
        if self.title:
            dot.attr(label=self.title, labelloc="t")
        for node in self.graph.nodes:
            shape, dtype = tensor_meta_columns(node)
            rows = [f"<b>{html.escape(node.name)}</b>", html.escape(self.describe(node))]
            if shape:
                rows.append(f'<font point-size="9">{html.escape(dtype)} {html.escape(shape)}'
                            "</font>")
            if self.color_key is not None and self.color_key(node) is not None:
                rows.append(f'<font point-size="9">{html.escape(self.color_label)}='
                            f"{html.escape(str(self.color_key(node)))}</font>")
            dot.node(node.name, label="<" + "<br/>".join(rows) + ">",
                     fillcolor=self.fill(node),
                     shape="ellipse" if node.op in ("placeholder", "output") else "box")
            for src in node.all_input_nodes:
                dot.edge(src.name, node.name)
        if self.groups:
            with dot.subgraph(name="cluster_legend") as legend:
                legend.attr(label=self.color_label, fontsize="10", style="dashed")
                for value, colour in self.groups.items():
                    legend.node(f"legend_{value}", label=str(value), fillcolor=colour,
                                fontsize="9")
        return dot

    def svg(self) -> str:
        return self.to_dot().pipe(format="svg").decode()

    # --- text ---------------------------------------------------------------------------
    def text(self) -> str:
        """The graph as its code lines, each followed by ``dtype[shape]`` and its group."""
        writer = CodeWriter(self.graph, "self")
        lines = [self.title] if self.title else []
        for node in self.graph.nodes:
            shape, dtype = tensor_meta_columns(node)
            if node.op == "placeholder":
                line = f"{node.name} = input"
            elif node.op == "output":
                line = f"return {writer.arg(node.args[0])}"
            else:
                line = f"{node.name} = {writer.expression(node)}"
            if shape and node.op != "output":
                line += f"   # {dtype}{shape}"
            if self.color_key is not None and self.color_key(node) is not None:
                line += f"   [{self.color_label}={self.color_key(node)}]"
            lines.append(line)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        problem = graphviz_available()
        if problem:
            _warn_once(problem)
            return {"text/plain": self.text()}
        return {"image/svg+xml": self.svg(), "text/plain": self.text()}

    def save(self, path: str | os.PathLike) -> str:
        """Write the drawing; the extension picks the format (.svg .png .pdf .dot .txt).

        Without ``dot``, image formats fall back to a ``.txt`` text rendering beside ``path``
        (the returned path says which file was written).
        """
        path = os.fspath(path)
        stem, ext = os.path.splitext(path)
        fmt = ext.lstrip(".").lower() or "svg"
        if fmt == "txt":
            return _write(path, self.text())
        if fmt in ("dot", "gv"):
            if graphviz_available() == INSTALL_PY:
                raise RuntimeError(INSTALL_PY)
            return _write(path, self.to_dot().source)
        problem = graphviz_available()
        if problem:
            _warn_once(problem)
            return _write(stem + ".txt", self.text())
        with open(path, "wb") as f:
            f.write(self.to_dot().pipe(format=fmt))
        return path


def _write(path: str, text: str) -> str:
    with open(path, "w") as f:
        f.write(text + "\n")
    return path


def draw(graph: Any, color_by: str | Callable | None = None, title: str | None = None,
         path: str | os.PathLike | None = None, rankdir: str = "TB") -> GraphDrawing:
    """Draw a Graph or GraphModule; colour boxes by ``color_by`` (a meta key or a function).

    Returns a :class:`GraphDrawing`, which shows itself in Jupyter; ``path`` also saves it.
    """
    drawing = GraphDrawing(_as_graph(graph), color_by=color_by, title=title, rankdir=rankdir)
    if path is not None:
        drawing.save(path)
    return drawing
