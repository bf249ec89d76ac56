"""The partition view: which values the forward saves for the backward, and what they cost.

AOTAutograd traces forward and backward into one *joint* graph and then cuts it in two. Every
value that crosses the cut is *saved*: it stays alive in memory from the forward pass until
the backward pass needs it. A partitioner chooses the cut: the default one saves whatever the
backward reads; the min-cut one saves fewer bytes and *recomputes* cheap pointwise values in
the backward instead. This module makes that choice visible:

* :class:`PartitionView` -- built from a forward and a backward graph (any source: ours from
  stage 4, or PyTorch's). It lists the saved tensors with shape, dtype and bytes, counts the
  backward nodes that only recompute forward values (they read no tangent), and colours the
  graphs by ``node.meta["partition"]``. ``summary()`` / ``rows()`` / ``save(dir)`` for
  scripts, ``widget()`` (or just displaying it) in Jupyter.
* :func:`tutorcompile_partition` -- the same for tutorcompile's AOTAutograd (stage 4); the
  view keeps stage 4's own ``PartitionReport`` in ``view.report`` to compare with.
* :func:`compare_partitions` -- one view per partitioner and a table of saved bytes and op
  counts; its widget switches between the views.
* :func:`torch_partition` -- PyTorch's own AOTAutograd (``functorch.compile.aot_function``)
  run on a function with the ``"default"`` or ``"min_cut"`` partitioner; its joint, forward
  and backward graphs come back as tutorcompile GraphModules, annotated and ready to view.
  It is the oracle stage 4 is checked against.

Colours (``meta["partition"]``): joint graph -- ``forward`` / ``saved`` / ``backward`` /
``recomputed`` (computed in both halves); forward graph -- ``forward`` / ``saved``; backward
graph -- ``saved`` (inputs saved by the forward), ``tangent``, ``backward``, ``recomputed``.

Mirrors: torch/_functorch/partitioners.py (``default_partition``,
``min_cut_rematerialization_partition``) -- the view, not the algorithms.
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .. import aot
from ..aot.partitioners import is_tangent, nbytes
from ..fx import TensorMeta, from_torch_fx
from ..fx.printer import tensor_meta_columns
from .drawing import draw, graphviz_available


@dataclass
class SavedTensor:
    """One value the forward keeps alive for the backward."""
    name: str  # its name in the backward graph
    shape: tuple
    dtype: str
    nbytes: int


def format_bytes(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _default_is_tangent(node) -> bool:
    return node.name.startswith("tangent")


class PartitionView:
    """A forward/backward pair seen through what crosses between them.

    ``backward``'s placeholders are the saved values followed by the tangents (the order both
    PyTorch and tutorcompile use); ``is_tangent`` tells them apart (default: the name starts
    with ``tangent``). ``num_user_outputs`` is how many of the forward's outputs the user sees
    (the rest are the saved values); by default, the outputs that are not saved.
    """

    def __init__(self, forward: Any, backward: Any, joint: Any = None,
                 num_user_outputs: int | None = None, title: str = "partition",
                 is_tangent: Callable | None = None):
        self.forward, self.backward, self.joint = forward, backward, joint
        self.title = title
        self.report: Any = None  # the producing stage's own report, when it has one
        is_tangent = is_tangent or _default_is_tangent
        bw_inputs = [n for n in backward.graph.nodes if n.op == "placeholder"]
        self.tangents = [n.name for n in bw_inputs if is_tangent(n)]
        saved_nodes = [n for n in bw_inputs if not is_tangent(n)]
        self.saved = [SavedTensor(n.name, *_shape_dtype(n), nbytes(n)) for n in saved_nodes]
        for n in bw_inputs:
            n.meta["partition"] = "tangent" if is_tangent(n) else "saved"
        self.recomputed = self._mark_backward(backward, {n for n in bw_inputs if is_tangent(n)})
        self._mark_forward(forward, len(saved_nodes), num_user_outputs)
        if joint is not None:
            self._mark_joint(joint)

    # --- annotation ---------------------------------------------------------------------------
    @staticmethod
    def _mark_backward(backward, tangents: set) -> list[str]:
        """Nodes that read no tangent (directly or not) only recompute forward values."""
        needs_tangent = set(tangents)
        recomputed = []
        for node in backward.graph.nodes:
            if node.op in ("placeholder", "output"):
                continue
            if any(a in needs_tangent for a in node.all_input_nodes):
                needs_tangent.add(node)
                node.meta["partition"] = "backward"
            else:
                node.meta["partition"] = "recomputed"
                recomputed.append(node.name)
        return recomputed

    @staticmethod
    def _mark_forward(forward, num_saved: int, num_user_outputs: int | None) -> None:
        out = forward.graph.output_node
        values = out.args[0] if isinstance(out.args[0], (tuple, list)) else (out.args[0],)
        first_saved = num_user_outputs if num_user_outputs is not None \
            else len(values) - num_saved
        saved = {v for v in values[first_saved:] if hasattr(v, "meta")}
        for node in forward.graph.nodes:
            if node.op != "output":
                node.meta["partition"] = "saved" if node in saved else "forward"

    def _mark_joint(self, joint) -> None:
        def computed(gm):
            return {n.meta.get("torch_name", n.name) for n in gm.graph.nodes
                    if n.op not in ("placeholder", "output")}
        fw, bw = computed(self.forward), computed(self.backward)
        saved = {n.meta.get("torch_name", n.name) for n in self.backward.graph.nodes
                 if n.meta.get("partition") == "saved"}
        for node in joint.graph.nodes:
            if node.op == "output":
                continue
            name = node.meta.get("torch_name", node.name)
            if name in saved:
                node.meta["partition"] = "saved"
            elif node.op == "placeholder":
                node.meta["partition"] = "backward" if "tangent" in name else "forward"
            elif name in fw and name in bw:
                node.meta["partition"] = "recomputed"
            elif name in fw:
                node.meta["partition"] = "forward"
            elif name in bw:
                node.meta["partition"] = "backward"

    # --- data -----------------------------------------------------------------------------------
    @property
    def saved_bytes(self) -> int:
        return sum(s.nbytes for s in self.saved)

    @staticmethod
    def _op_count(gm) -> int:
        return sum(n.op not in ("placeholder", "output") for n in gm.graph.nodes)

    @property
    def forward_ops(self) -> int:
        return self._op_count(self.forward)

    @property
    def backward_ops(self) -> int:
        return self._op_count(self.backward)

    def rows(self) -> list[dict[str, Any]]:
        """One dict per saved value: name, shape, dtype, bytes."""
        return [{"name": s.name, "shape": s.shape, "dtype": s.dtype, "bytes": s.nbytes}
                for s in self.saved]

    def summary(self) -> str:
        lines = [f"{self.title}: saves {len(self.saved)} value"
                 f"{'s' * (len(self.saved) != 1)}, {format_bytes(self.saved_bytes)}; "
                 f"forward {self.forward_ops} ops, backward {self.backward_ops} ops "
                 f"({len(self.recomputed)} recomputed)"]
        for s in self.saved:
            lines.append(f"  saved {s.name:<12} {s.dtype}{list(s.shape)}  "
                         f"{format_bytes(s.nbytes)}")
        if self.recomputed:
            lines.append("  recomputed in backward: " + ", ".join(self.recomputed))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return self.summary()

    def graphs(self) -> dict[str, Any]:
        named = {"forward": self.forward, "backward": self.backward}
        if self.joint is not None:
            named = {"joint": self.joint, **named}
        return named

    def draw(self, which: str = "backward"):
        """The drawing of ``"forward"``, ``"backward"`` or ``"joint"``, coloured by partition."""
        return draw(self.graphs()[which], color_by="partition", title=f"{self.title}: {which}")

    def save(self, directory: str | os.PathLike, fmt: str = "svg") -> list[str]:
        """Write each graph's drawing and ``summary.txt`` into ``directory``; returns paths."""
        os.makedirs(directory, exist_ok=True)
        paths = [self.draw(which).save(os.path.join(directory, f"{which}.{fmt}"))
                 for which in self.graphs()]
        summary = os.path.join(directory, "summary.txt")
        with open(summary, "w") as f:
            f.write(self.summary() + "\n")
        return paths + [summary]

    # --- widget ---------------------------------------------------------------------------------
    def summary_html(self) -> str:
        head = ("<tr><th style='text-align:left'>saved</th><th>shape</th><th>dtype</th>"
                "<th style='text-align:right'>bytes</th></tr>")
        body = "".join(
            f"<tr><td>{html.escape(s.name)}</td><td>{list(s.shape)}</td><td>{s.dtype}</td>"
            f"<td style='text-align:right'>{format_bytes(s.nbytes)}</td></tr>"
            for s in self.saved)
        total = (f"<tr><td><b>total</b></td><td></td><td></td><td style='text-align:right'>"
                 f"<b>{format_bytes(self.saved_bytes)}</b></td></tr>")
        recomputed = ", ".join(self.recomputed) or "nothing"
        return (f"<b>{html.escape(self.title)}</b>: forward {self.forward_ops} ops, backward "
                f"{self.backward_ops} ops; recomputed in backward: {html.escape(recomputed)}"
                f"<table>{head}{body}{total}</table>")

    def widget(self):
        import ipywidgets as widgets
        names = list(self.graphs())
        tabs = widgets.Tab(children=[widgets.HTML(drawing_html(self.draw(w))) for w in names])
        tabs.titles = names
        return widgets.VBox([widgets.HTML(self.summary_html()), tabs])

    def _repr_mimebundle_(self, include=None, exclude=None):
        return self.widget()._repr_mimebundle_(include=include, exclude=exclude)


def drawing_html(drawing) -> str:
    """A drawing as HTML for an ``ipywidgets.HTML``: inline SVG, or its text in ``<pre>``."""
    if graphviz_available() is None:
        return f"<div style='overflow:auto;max-height:640px'>{drawing.svg()}</div>"
    return f"<pre>{html.escape(drawing.text())}</pre>"


def _shape_dtype(node) -> tuple[tuple, str]:
    tm = node.meta.get("tensor_meta")
    if not hasattr(tm, "shape"):
        return (), "-"
    return tuple(tm.shape), tensor_meta_columns(node)[1]


# --- PyTorch's AOTAutograd as a source of graphs ----------------------------------------------
PARTITIONERS = ("default", "min_cut")


def torch_partition(fn: Callable, *example_inputs: Any, partitioner: str = "default"
                    ) -> PartitionView:
    """Run PyTorch's AOTAutograd on ``fn`` and view its joint, forward and backward graphs.

    ``partitioner``: ``"default"`` (save what the backward reads) or ``"min_cut"``
    (``min_cut_rematerialization_partition``: save fewer bytes, recompute pointwise ops).
    The inputs are copied, so their ``.grad`` is left untouched.
    """
    from functorch.compile import (
        aot_function,
        aot_module,
        default_partition,
        make_boxed_func,
        min_cut_rematerialization_partition,
    )
    if partitioner not in PARTITIONERS:
        raise ValueError(f"partitioner must be one of {PARTITIONERS}, got {partitioner!r}")
    cut = default_partition if partitioner == "default" else \
        min_cut_rematerialization_partition
    captured: dict[str, Any] = {}

    def partition_fn(joint, joint_inputs, **kwargs):
        captured["joint"] = joint
        captured["num_fwd_outputs"] = kwargs.get("num_fwd_outputs")
        return cut(joint, joint_inputs, **kwargs)

    def compiler(which):
        def compile_graph(gm, example_inputs):
            captured[which] = gm
            return make_boxed_func(gm.forward)
        return compile_graph

    inputs = [a.detach().clone().requires_grad_(a.requires_grad)
              if isinstance(a, torch.Tensor) else a for a in example_inputs]
    torch_aot = aot_module if isinstance(fn, torch.nn.Module) else aot_function
    compiled = torch_aot(fn, fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                   partition_fn=partition_fn)
    out = compiled(*inputs)
    outs = [t for t in _tensors(out) if t.requires_grad]
    wrt = [a for a in inputs if isinstance(a, torch.Tensor) and a.requires_grad]
    if isinstance(fn, torch.nn.Module):
        wrt += [p for p in fn.parameters() if p.requires_grad]
    if not outs or not wrt:
        raise ValueError("no output requires grad, so AOTAutograd made no backward graph")
    torch.autograd.grad(outs, wrt, [torch.ones_like(t) for t in outs], allow_unused=True)
    graphs = {}
    for which in ("joint", "forward", "backward"):
        fx_gm = captured[which]
        for node in fx_gm.graph.nodes:
            node.meta["torch_name"] = node.name
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                node.meta["tensor_meta"] = TensorMeta.of(val)
        graphs[which] = from_torch_fx(fx_gm, provenance=f"torch AOTAutograd ({partitioner})")
    return PartitionView(graphs["forward"], graphs["backward"], graphs["joint"],
                         num_user_outputs=captured.get("num_fwd_outputs"),
                         title=f"PyTorch AOTAutograd, {partitioner} partitioner")


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def tutorcompile_aot(fn: Callable, *example_inputs: Any, partitioner: str = "default") -> Any:
    """Run tutorcompile's own AOTAutograd (stage 4) on copies of the inputs, once.

    Returns its ``AOTCompiled``: ``.artifacts`` holds the prim graph, the joint graph and the
    partition; ``.params`` the module parameters/buffers the graphs take as trailing inputs.
    """
    if partitioner not in PARTITIONERS:
        raise ValueError(f"partitioner must be one of {PARTITIONERS}, got {partitioner!r}")
    policy = aot.default_partition if partitioner == "default" else aot.min_cut_partition
    compiled = aot.aot_module(fn, partition_fn=policy) if isinstance(fn, torch.nn.Module) \
        else aot.aot_function(fn, partition_fn=policy)
    inputs = [_copy_with_marks(a) if isinstance(a, torch.Tensor) else a
              for a in example_inputs]
    compiled(*inputs)
    return compiled


def _copy_with_marks(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` that keeps ``requires_grad`` and its ``tc.mark_dynamic`` marks."""
    copy = t.detach().clone().requires_grad_(t.requires_grad)
    for mark in ("_dynamo_dynamic_indices", "_dynamo_static_indices"):
        if hasattr(t, mark):
            setattr(copy, mark, set(getattr(t, mark)))
    return copy


def tutorcompile_aot_artifacts(fn: Callable, *example_inputs: Any,
                               partitioner: str = "default") -> Any:
    """The ``CompiledArtifacts`` of :func:`tutorcompile_aot`."""
    return tutorcompile_aot(fn, *example_inputs, partitioner=partitioner).artifacts


def tutorcompile_partition(fn: Callable, *example_inputs: Any, partitioner: str = "default"
                           ) -> PartitionView:
    """The :class:`PartitionView` of tutorcompile's AOTAutograd (stage 4) on ``fn``.

    The view's ``report`` is stage 4's own ``PartitionReport``, to compare with.
    """
    art = tutorcompile_aot_artifacts(fn, *example_inputs, partitioner=partitioner)
    if art.partition is None:
        raise ValueError("no input requires grad, so there is no backward to partition")
    view = PartitionView(art.partition.forward, art.partition.backward,
                         num_user_outputs=art.joint.num_fwd_outputs,
                         title=f"tutorcompile AOTAutograd, {partitioner} partitioner",
                         is_tangent=is_tangent)
    view.report = art.partition.report
    return view


SOURCES = {"torch": torch_partition, "tutorcompile": tutorcompile_partition}


def partition_view(fn: Callable, *example_inputs: Any, partitioner: str = "default",
                   source: str | Callable = "tutorcompile") -> PartitionView:
    """The :class:`PartitionView` of ``fn`` on these inputs.

    ``source``: ``"tutorcompile"`` (stage 4's AOTAutograd), ``"torch"`` (PyTorch's, the
    oracle) or any ``source(fn, *inputs, partitioner=...) -> PartitionView``.
    """
    make = SOURCES[source] if isinstance(source, str) else source
    return make(fn, *example_inputs, partitioner=partitioner)


class PartitionComparison:
    """The same function cut by several partitioners, side by side (default vs min-cut)."""

    def __init__(self, views: dict[str, PartitionView]):
        self.views = views

    def rows(self) -> list[dict[str, Any]]:
        return [{"partitioner": name, "saved": len(v.saved), "saved_bytes": v.saved_bytes,
                 "forward_ops": v.forward_ops, "backward_ops": v.backward_ops,
                 "recomputed": len(v.recomputed)} for name, v in self.views.items()]

    def table(self) -> str:
        header = ["partitioner", "saved", "bytes", "forward ops", "backward ops", "recomputed"]
        lines = [[r["partitioner"], str(r["saved"]), format_bytes(r["saved_bytes"]),
                  str(r["forward_ops"]), str(r["backward_ops"]), str(r["recomputed"])]
                 for r in self.rows()]
        widths = [max(len(x[i]) for x in [header] + lines) for i in range(len(header))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(x, widths)).rstrip()
                         for x in [header] + lines)

    __str__ = table

    def __repr__(self) -> str:
        return self.table()

    def widget(self):
        """The comparison table, and one partition's view chosen from a dropdown."""
        import ipywidgets as widgets
        names = list(self.views)
        self.table_html = widgets.HTML(f"<pre>{html.escape(self.table())}</pre>")
        self.partitioner_dropdown = widgets.Dropdown(options=names, value=names[0],
                                                     description="partitioner")
        self.view_box = widgets.VBox([self.views[names[0]].widget()])
        self.partitioner_dropdown.observe(
            lambda change: setattr(self.view_box, "children",
                                   (self.views[change["new"]].widget(),)), names="value")
        return widgets.VBox([self.table_html, self.partitioner_dropdown, self.view_box])

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = self.widget()._repr_mimebundle_(include=include, exclude=exclude) or {}
        bundle["text/plain"] = self.table()
        return bundle


def compare_partitions(fn: Callable, *example_inputs: Any,
                       partitioners: tuple[str, ...] = PARTITIONERS,
                       source: str | Callable = "tutorcompile") -> PartitionComparison:
    """:func:`partition_view` once per partitioner, gathered for comparison."""
    return PartitionComparison({p: partition_view(fn, *example_inputs, partitioner=p,
                                                  source=source) for p in partitioners})


__all__ = ["PARTITIONERS", "PartitionComparison", "PartitionView", "SavedTensor",
           "compare_partitions", "format_bytes", "partition_view", "torch_partition",
           "tutorcompile_partition"]
