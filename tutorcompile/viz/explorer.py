"""GraphExplorer: step through every graph the compiler stages make from one function.

``GraphExplorer(fn, *example_inputs)`` runs each registered stage provider
(:mod:`tutorcompile.viz.stages`) once and keeps what they made. For the selected graph it
shows four views side by side in tabs -- the drawing (graphviz SVG, or text without
graphviz), the generated code, the node table, and one node's details (op, target, shape,
dtype, the user's source line from ``node.meta["source"]``, and stage-specific meta such as
the partition or kernel it landed in) -- plus the stage's own text panels (Dynamo's guards
and graph breaks, the partition summary).

Two forms of the same information:

* In Jupyter, displaying the explorer shows an ipywidgets view: a stage dropdown, a graph
  dropdown (a stage can make several graphs: one per graph break, forward and backward),
  previous/next buttons that walk along the pipeline graph by graph, and the tabs.
  ``explorer.widget()`` returns that widget; its controls are plain attributes
  (``stage_dropdown``, ``graph_dropdown``, ``next_button``, ``node_dropdown``, ``code_html``,
  ...) so a test or a notebook can drive them.
* In a script: ``explorer.stages`` (the provider outputs), ``select(stage, graph)``, ``step()``,
  ``code()``, ``table()``, ``drawing()``, ``node_details(name)``, ``panels()``, and
  ``save(directory)`` which writes every graph's drawing and code.

Nothing here imports ipywidgets until a widget is asked for, so ``import tutorcompile.viz``
works without Jupyter.

Mirrors: tinygrad's VIZ (every rewrite stage of a kernel, one click each) and depyf's
"see every artifact of torch.compile" -- in the course's own IR.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

from ..fx.printer import format_tabular, tensor_meta_columns
from .drawing import draw
from .partition import drawing_html
from .stages import StageGraph, StageOutput, run_stages

# meta keys every node view already shows, or that hold values too big to print
_SHOWN_META = {"tensor_meta", "source", "example_value", "val", "stack_trace", "torch_name",
               "nn_module_stack", "original_aten", "seq_nr", "from_node", "grapharg",
               "source_fn_stack", "fwd_source_fn_stack"}


def node_details(node) -> dict[str, str]:
    """What a person wants to know about one node, as ordered label -> text pairs."""
    shape, dtype = tensor_meta_columns(node)
    details = {"name": node.name, "op": node.op,
               "target": node.format_target() if node.op != "output" else "output"}
    if shape:
        details["shape"] = shape
        details["dtype"] = dtype
    details["inputs"] = ", ".join(n.name for n in node.all_input_nodes) or "-"
    details["users"] = ", ".join(u.name for u in node.users) or "-"
    source = node.meta.get("source")
    if source:
        details["source"] = str(source)
    for key, value in node.meta.items():
        if key in _SHOWN_META:
            continue
        text = repr(value) if not isinstance(value, str) else value
        details[key] = text if len(text) <= 200 else text[:197] + "..."
    return details


def _pre(text: str) -> str:
    return f"<pre style='margin:0'>{html.escape(text)}</pre>"


def _dl(pairs: dict[str, str]) -> str:
    rows = "".join(f"<tr><th style='text-align:left;padding-right:1em'>{html.escape(k)}</th>"
                   f"<td><code>{html.escape(v)}</code></td></tr>" for k, v in pairs.items())
    return f"<table>{rows}</table>"


class GraphExplorer:
    """Every graph the available stages make from ``fn`` on ``example_inputs``.

    ``stages`` limits which registered stages run (default: all of them, in pipeline order).
    Capture runs the function (side effects such as ``print`` happen), and Dynamo's
    ``explain`` resets tutorcompile's compile caches.
    """

    def __init__(self, fn: Callable, *example_inputs: Any, stages: Sequence[str] | None = None):
        self.fn = fn
        self.example_inputs = example_inputs
        self.stages: dict[str, StageOutput] = run_stages(fn, example_inputs, stages)
        if not self.stages:
            raise ValueError("no stage produced anything for this function")
        self.stage = next(iter(self.stages))
        self.graph_name = self._first_graph(self.stage)
        self._widget = None

    # --- selection ----------------------------------------------------------------------------
    def _first_graph(self, stage: str) -> str | None:
        graphs = self.stages[stage].graphs
        return graphs[0].name if graphs else None

    def views(self) -> list[tuple[str, str]]:
        """Every (stage, graph name) pair, in pipeline order."""
        return [(s, g.name) for s, out in self.stages.items() for g in out.graphs]

    def select(self, stage: str, graph: str | None = None) -> StageGraph | None:
        """Make ``stage`` (and its graph ``graph``, default the first) the current view."""
        if stage not in self.stages:
            raise KeyError(f"no stage {stage!r}; stages here: {', '.join(self.stages)}")
        names = [g.name for g in self.stages[stage].graphs]
        if graph is not None and graph not in names:
            raise KeyError(f"stage {stage!r} has no graph {graph!r}; it has {names}")
        self.stage = stage
        self.graph_name = graph if graph is not None else self._first_graph(stage)
        if self._widget is not None:
            self._sync_widget()
        return self.current()

    def step(self, by: int = 1) -> StageGraph | None:
        """Move ``by`` graphs along the pipeline (across stages), stopping at either end."""
        views = self.views()
        if not views:
            return None
        here = (self.stage, self.graph_name)
        index = views.index(here) if here in views else -1
        stage, graph = views[max(0, min(len(views) - 1, index + by))]
        return self.select(stage, graph)

    def current(self) -> StageGraph | None:
        for g in self.stages[self.stage].graphs:
            if g.name == self.graph_name:
                return g
        return None

    # --- the views, as data -------------------------------------------------------------------
    def code(self) -> str:
        g = self.current()
        return g.code if g is not None else ""

    def table(self) -> str:
        g = self.current()
        return format_tabular(g.graph) if g is not None else ""

    def drawing(self):
        g = self.current()
        if g is None:
            return None
        return draw(g.graph, color_by=g.color_by, title=f"{self.stage}: {g.name}")

    def node_names(self) -> list[str]:
        g = self.current()
        return [n.name for n in g.graph.nodes] if g is not None else []

    def node_details(self, name: str) -> dict[str, str]:
        g = self.current()
        for node in (g.graph.nodes if g is not None else ()):
            if node.name == name:
                return node_details(node)
        raise KeyError(f"no node {name!r} in {self.stage}: {self.graph_name}")

    def panels(self) -> dict[str, str]:
        """The current stage's text panels (guards, graph breaks, partition, error)."""
        out = self.stages[self.stage]
        return ({"about": out.note} if out.note else {}) | dict(out.panels)

    def save(self, directory: str | os.PathLike, fmt: str = "svg") -> list[str]:
        """Write every graph's drawing (``fmt``) and code, and each stage's panels."""
        os.makedirs(directory, exist_ok=True)
        paths = []
        for stage, out in self.stages.items():
            slug = _slug(stage)
            for g in out.graphs:
                base = os.path.join(directory, f"{slug}--{_slug(g.name)}")
                drawing = draw(g.graph, color_by=g.color_by, title=f"{stage}: {g.name}")
                paths.append(drawing.save(f"{base}.{fmt}"))
                with open(f"{base}.py", "w") as f:
                    f.write(g.code + "\n")
                paths.append(f"{base}.py")
            if out.panels or out.note:
                path = os.path.join(directory, f"{slug}.txt")
                with open(path, "w") as f:
                    f.write(_panels_text(out) + "\n")
                paths.append(path)
        return paths

    def __str__(self) -> str:
        lines = [f"GraphExplorer of {getattr(self.fn, '__name__', type(self.fn).__name__)}"]
        for stage, out in self.stages.items():
            names = ", ".join(g.name for g in out.graphs) or "no graphs"
            lines.append(f"  {stage}: {names}" + (f" -- {out.note}" if out.note else ""))
        return "\n".join(lines)

    __repr__ = __str__

    # --- the widget -----------------------------------------------------------------------------
    def widget(self):
        """The ipywidgets view (built once; it follows ``select()`` calls)."""
        if self._widget is not None:
            return self._widget
        import ipywidgets as widgets
        self.header_html = widgets.HTML()
        self.stage_dropdown = widgets.Dropdown(options=list(self.stages), value=self.stage,
                                               description="stage")
        self.graph_dropdown = widgets.Dropdown(description="graph")
        self.previous_button = widgets.Button(description="previous", icon="arrow-left",
                                              tooltip="the graph before this one")
        self.next_button = widgets.Button(description="next", icon="arrow-right",
                                          tooltip="the next graph along the pipeline")
        self.previous_button.on_click(lambda _button: self.step(-1))
        self.next_button.on_click(lambda _button: self.step(1))
        self.drawing_html = widgets.HTML()
        self.code_html = widgets.HTML()
        self.table_html = widgets.HTML()
        self.node_dropdown = widgets.Dropdown(description="node")
        self.node_html = widgets.HTML()
        self.panels_html = widgets.HTML()
        self.tabs = widgets.Tab(children=[
            self.drawing_html, self.code_html, self.table_html,
            widgets.VBox([self.node_dropdown, self.node_html]), self.panels_html])
        self.tabs.titles = ["drawing", "code", "table", "nodes", "stage notes"]
        self._syncing = False
        self.stage_dropdown.observe(self._on_stage, names="value")
        self.graph_dropdown.observe(self._on_graph, names="value")
        self.node_dropdown.observe(self._on_node, names="value")
        self._widget = widgets.VBox([
            self.header_html,
            widgets.HBox([self.stage_dropdown, self.graph_dropdown, self.previous_button,
                          self.next_button]),
            self.tabs])
        self._sync_widget()
        return self._widget

    def _sync_widget(self) -> None:
        """Push the current selection into every widget (one place, so they never disagree)."""
        self._syncing = True
        try:
            out = self.stages[self.stage]
            self.stage_dropdown.value = self.stage
            views = self.views()
            here = (self.stage, self.graph_name)
            self.previous_button.disabled = not views or here == views[0]
            self.next_button.disabled = not views or here == views[-1]
            self.graph_dropdown.options = [g.name for g in out.graphs]
            self.graph_dropdown.value = self.graph_name
            self.header_html.value = (f"<b>{html.escape(self.stage)}</b>: "
                                      f"{html.escape(out.note)}")
            drawing = self.drawing()
            self.drawing_html.value = drawing_html(drawing) if drawing is not None else \
                _pre("this stage made no graph; see 'stage notes'")
            self.code_html.value = _pre(self.code())
            self.table_html.value = _pre(self.table())
            names = self.node_names()
            self.node_dropdown.options = names
            self.node_dropdown.value = _first_computing(self.current()) if names else None
            self._show_node()
            self.panels_html.value = "".join(
                f"<h4>{html.escape(k)}</h4>{_pre(v)}" for k, v in self.panels().items())
        finally:
            self._syncing = False

    def _show_node(self) -> None:
        name = self.node_dropdown.value
        self.node_html.value = _dl(self.node_details(name)) if name else ""

    def _on_stage(self, change) -> None:
        if not self._syncing:
            self.select(change["new"])

    def _on_graph(self, change) -> None:
        if not self._syncing and change["new"] is not None:
            self.select(self.stage, change["new"])

    def _on_node(self, change) -> None:
        if not self._syncing:
            self._show_node()

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = self.widget()._repr_mimebundle_(include=include, exclude=exclude) or {}
        # short and stable: the stage list grows as stages land, and stored notebooks
        # compare this text; print(explorer) lists the stages
        name = getattr(self.fn, "__name__", type(self.fn).__name__)
        bundle["text/plain"] = f"GraphExplorer of {name} (a widget: print() it for text)"
        return bundle


def _first_computing(g: StageGraph | None) -> str | None:
    """The first node that computes something (more interesting than an input)."""
    if g is None:
        return None
    nodes = list(g.graph.nodes)
    for node in nodes:
        if node.op not in ("placeholder", "output"):
            return node.name
    return nodes[0].name if nodes else None


def _panels_text(out: StageOutput) -> str:
    parts = [out.note] if out.note else []
    parts += [f"== {k} ==\n{v}" for k, v in out.panels.items()]
    return "\n\n".join(parts)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()
