"""The fusion view: which graph nodes became which kernel, and what fusion saved in bytes.

Stage 5 (``tutorcompile.inductor``) lowers a graph of prims to loops, groups the loops into
kernels and writes each group as one C++ or Triton function. Its scheduler marks every graph
node with the kernel it landed in (``node.meta["kernel"]``); this view draws the prim graph
coloured by that mark, next to the fusion report (kernels before and after fusion, memory
traffic saved, pairs not fused and why) and the generated code.

:func:`fusion_view` runs the pipeline on a function -- capture by tracing, stage 4's
decomposition to prims, stage 5's ``compile_fx`` -- for the forward pass (no grad), and
returns a :class:`FusionView`: ``summary()`` / ``kernels`` / ``output_code`` / ``save(dir)``
in a script, a widget (drawing, report, code) in Jupyter.

Mirrors: torch/_inductor/scheduler.py's fusion decisions as shown by ``TORCH_LOGS=fusion``
and ``TORCH_COMPILE_DEBUG`` (the ``ir_post_fusion.txt`` and ``output_code.py`` artifacts).
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable
from typing import Any

import torch

from ..fx import GraphModule, ShapeProp
from ..inductor.compile_fx import compile_fx
from .drawing import draw
from .partition import _copy_with_marks, drawing_html, tutorcompile_aot


class FusionView:
    """A prim graph whose nodes carry ``meta["kernel"]``, with stage 5's compiled result."""

    def __init__(self, graph_module: GraphModule, compiled: Any, title: str = "fusion"):
        self.graph_module = graph_module
        self.compiled = compiled
        self.title = title

    @property
    def report(self) -> str:
        return str(getattr(self.compiled, "fusion_report", ""))

    @property
    def output_code(self) -> str:
        return str(getattr(self.compiled, "output_code", ""))

    @property
    def kernels(self) -> dict[str, list[str]]:
        """Kernel name -> the graph nodes it computes, in graph order."""
        groups: dict[str, list[str]] = {}
        for node in self.graph_module.graph.nodes:
            kernel = node.meta.get("kernel")
            if kernel is not None:
                groups.setdefault(kernel, []).append(node.name)
        return groups

    def summary(self) -> str:
        lines = [f"{self.title}: {len(self.kernels)} kernel(s)"]
        lines += [f"  {k}: {', '.join(nodes)}" for k, nodes in self.kernels.items()]
        return "\n".join(lines + ["", self.report])

    __str__ = summary

    def __repr__(self) -> str:
        return self.summary()

    def draw(self):
        return draw(self.graph_module, color_by="kernel", title=self.title)

    def save(self, directory: str | os.PathLike, fmt: str = "svg") -> list[str]:
        """Write the drawing, the report and the generated code into ``directory``."""
        os.makedirs(directory, exist_ok=True)
        paths = [self.draw().save(os.path.join(directory, f"kernels.{fmt}"))]
        for name, text in (("fusion_report.txt", self.summary()),
                           ("output_code.txt", self.output_code)):
            path = os.path.join(directory, name)
            with open(path, "w") as f:
                f.write(text + "\n")
            paths.append(path)
        return paths

    def widget(self):
        import ipywidgets as widgets
        pre = "<pre style='margin:0'>{}</pre>"
        tabs = widgets.Tab(children=[widgets.HTML(drawing_html(self.draw())),
                                     widgets.HTML(pre.format(html.escape(self.summary()))),
                                     widgets.HTML(pre.format(html.escape(self.output_code)))])
        tabs.titles = ["kernels", "fusion report", "output code"]
        return tabs

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = self.widget()._repr_mimebundle_(include=include, exclude=exclude) or {}
        bundle["text/plain"] = f"FusionView: {len(self.kernels)} kernel(s)"
        return bundle


def _lifted(aot: Any) -> list:
    """The parameters/buffers stage 4 appends to the graph inputs (as AOTCompiled feeds them),
    then the tensors a traced function closes over (a global module's weights)."""
    named = getattr(aot, "named_params", None)
    params = [t for _, t in named()] if callable(named) else list(
        getattr(aot, "params", None) or [])
    return params + list(getattr(aot.artifacts, "lifted", ()))


def fusion_view(fn: Callable, *example_inputs: Any, codegen: str | None = None,
                fusion: bool = True, backend: str | None = None) -> FusionView:
    """Compile ``fn``'s forward pass (no grad) with stage 5 and view its kernels.

    ``codegen``: ``"cpp"``, ``"triton"`` or ``"eager"`` (default: what this machine runs best;
    ``backend=`` is its old name, deprecated); ``fusion=False`` shows one kernel per op, for
    comparison.
    """
    inputs = [_copy_with_marks(a) if isinstance(a, torch.Tensor) else a
              for a in example_inputs]
    with torch.no_grad():  # the forward pass alone: AOT makes no joint graph
        aot = tutorcompile_aot(fn, *inputs)
        gm = GraphModule({}, aot.artifacts.prim_graph.copy())
        # the prim graph takes the tensor arguments, then the module's lifted attributes
        tensors = [a for a in inputs if isinstance(a, torch.Tensor)] + _lifted(aot)
        expected = len(gm.graph.placeholders)
        if len(tensors) != expected:
            raise RuntimeError(f"the prim graph takes {expected} inputs but {len(tensors)} "
                               "tensors were found for it (tutorcompile.aot changed?)")
        if aot.artifacts.shape_env is None:   # (symbolic sizes keep their metas: s0...)
            ShapeProp(gm).propagate(*tensors)
        compiled = compile_fx(gm, tensors, codegen=codegen, fusion=fusion, backend=backend)
    name = getattr(compiled, "codegen", codegen)
    return FusionView(gm, compiled, title=f"forward pass as {name} kernels")
