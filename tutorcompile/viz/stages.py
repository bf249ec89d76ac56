"""The stage registry: which graphs each compiler stage makes from one function.

Every stage of the course turns a function into graphs worth looking at -- the captured
graph, PyTorch's autograd graph, AOTAutograd's joint and forward/backward graphs, and later
fused kernels. :class:`~tutorcompile.viz.GraphExplorer` does not know any of them by name:
it asks this registry. A *provider* is a function ``(fn, example_inputs) -> StageOutput``
(or a list of ``(name, GraphModule)`` pairs, or ``None`` when the stage does not apply, e.g.
a backward graph for inputs that need no gradient). A later stage adds itself with one
call::

    register_stage("fused kernels", my_provider, order=50)

Providers registered here, in pipeline order:

* ``captured`` (order 10) -- the graphs ``tutorcompile.dynamo`` captures, with their guards
  and graph breaks; without a working Dynamo, one graph from
  ``tutorcompile.fx.symbolic_trace`` (the panel says which one ran, and why).
* ``eager autograd`` (order 20) -- the ``grad_fn`` graph PyTorch records when the function
  runs eagerly (stage 1's ``torch_autograd_graph``); only when an input requires grad.
* ``aot`` (order 30) -- stage 4, ``tutorcompile.aot``: the graph decomposed to prims, the
  joint graph (coloured by forward/backward role) and its default partition.
* ``aot (torch)`` (order 40) -- PyTorch's own AOTAutograd: the joint graph coloured by where
  each node lands, and the forward/backward pair of the default partitioner
  (see :mod:`tutorcompile.viz.partition`); only when an input requires grad.
* ``fused kernels`` (order 50) -- stage 5, ``tutorcompile.inductor``: the forward pass's
  prim graph coloured by the kernel each node landed in, the fusion report and the code
  (see :mod:`tutorcompile.viz.fusion`).

A provider whose stage does not exist is simply never registered (checked without importing
the stage, so ``import tutorcompile.viz`` stays quick); a provider that raises -- a stage
that exists but fails on this function -- shows its error as a panel instead of breaking the
explorer.

Mirrors: nothing in PyTorch directly; the idea is tinygrad's VIZ, which lists every named
rewrite stage of a kernel and shows the graph after each.
"""

from __future__ import annotations

import importlib.util
import inspect
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..aot.partitioners import is_tangent
from ..autograd import torch_autograd_graph
from ..fx import Graph, GraphModule, ShapeProp, symbolic_trace
from .fusion import fusion_view
from .partition import PartitionView, torch_partition, tutorcompile_aot_artifacts


@dataclass
class StageGraph:
    """One graph a stage produced, and how to draw it."""
    name: str
    graph_module: Any  # a tutorcompile.fx GraphModule (or Graph)
    color_by: str | Callable | None = None

    @property
    def graph(self) -> Graph:
        gm = self.graph_module
        return gm if isinstance(gm, Graph) else gm.graph

    @property
    def code(self) -> str:
        """The generated Python (a GraphModule's ``code``; printed from a bare Graph)."""
        code = getattr(self.graph_module, "code", None)
        if isinstance(code, str):
            return code
        graph = self.graph
        return f"{graph.provenance_header()}\n{graph.python_code('self').src}"


@dataclass
class StageOutput:
    """What one stage made: graphs, text panels (guards, breaks, ...) and a one-line note."""
    graphs: list[StageGraph] = field(default_factory=list)
    panels: dict[str, str] = field(default_factory=dict)
    note: str = ""


@dataclass
class _Provider:
    name: str
    fn: Callable
    order: float


_REGISTRY: dict[str, _Provider] = {}


def register_stage(name: str, provider: Callable, order: float | None = None) -> Callable:
    """Add (or replace) the stage ``name``; ``order`` sorts stages along the pipeline.

    ``provider(fn, example_inputs)`` returns a :class:`StageOutput`, a list of
    :class:`StageGraph` or ``(name, GraphModule)`` pairs, a dict ``{name: GraphModule}``, or
    ``None`` when the stage has nothing to show for this function. Returns ``provider`` so it
    can be used as a decorator's body.
    """
    if order is None:
        order = max((p.order for p in _REGISTRY.values()), default=0) + 10
    _REGISTRY[name] = _Provider(name, provider, order)
    return provider


def unregister_stage(name: str) -> None:
    _REGISTRY.pop(name, None)


def registered_stages() -> list[str]:
    """Stage names in pipeline order."""
    return [p.name for p in sorted(_REGISTRY.values(), key=lambda p: p.order)]


def _normalize(result: Any) -> StageOutput | None:
    if result is None or isinstance(result, StageOutput):
        return result
    if isinstance(result, dict):
        result = list(result.items())
    graphs = []
    for item in result:
        if isinstance(item, StageGraph):
            graphs.append(item)
        else:
            name, gm = item
            graphs.append(StageGraph(name, gm))
    return StageOutput(graphs)


def run_stages(fn: Callable, example_inputs: Sequence[Any],
               stages: Sequence[str] | None = None) -> dict[str, StageOutput]:
    """Run every registered provider (or those named) on ``fn``; skip those that return None.

    A provider that raises gives a stage with no graphs and an ``error`` panel holding the
    traceback's last lines, so one broken stage never hides the others. A module's buffers
    are restored afterwards (providers run it in its current mode, several times).
    """
    results: dict[str, StageOutput] = {}
    # every provider runs the function: keep a module's buffers (BatchNorm statistics) as
    # they were, so looking at a model does not change it
    module = _module_or_fn(fn)
    buffers = [(b, b.detach().clone()) for b in module.buffers()] \
        if isinstance(module, torch.nn.Module) else []
    try:
        _run_providers(fn, example_inputs, stages, results)
    finally:
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)
    return results


def _run_providers(fn: Callable, example_inputs: Sequence[Any], stages: Sequence[str] | None,
                   results: dict[str, StageOutput]) -> None:
    for name in registered_stages():
        if stages is not None and name not in stages:
            continue
        try:
            out = _normalize(_REGISTRY[name].fn(fn, tuple(example_inputs)))
        except Exception as e:  # noqa: BLE001 -- shown to the user, not swallowed
            tail = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-3:])
            out = StageOutput(panels={"error": f"{type(e).__name__}: {e}\n\n{tail}"},
                              note=f"the {name} stage failed on this function")
        if out is not None:
            results[name] = out


# --- helpers shared by providers --------------------------------------------------------------
def _module_or_fn(fn: Any) -> Any:
    """The original function/module of a compiled one (tutorcompile or torch.compile)."""
    for attr in ("_orig", "_orig_mod", "_torchdynamo_orig_callable"):
        inner = getattr(fn, attr, None)
        if inner is not None:
            return _module_or_fn(inner)
    return fn


def input_names(fn: Any, example_inputs: Sequence[Any]) -> list[str]:
    """Parameter names of ``fn`` for its positional inputs (``arg0``... when unknown)."""
    target = fn.forward if isinstance(fn, torch.nn.Module) else fn
    try:
        params = [p.name for p in inspect.signature(target).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"arg{i}" for i in range(len(example_inputs))]


def needs_grad(fn: Any, example_inputs: Sequence[Any]) -> bool:
    """True when some input (or a module parameter) requires grad: a backward exists."""
    if any(isinstance(a, torch.Tensor) and a.requires_grad for a in example_inputs):
        return True
    return isinstance(fn, torch.nn.Module) and any(p.requires_grad for p in fn.parameters())


def first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        for v in value:
            t = first_tensor(v)
            if t is not None:
                return t
    if isinstance(value, dict):
        return first_tensor(list(value.values()))
    return None


# --- capture: tutorcompile.dynamo, or symbolic_trace when Dynamo is unavailable ----------------
def _dynamo_explain():
    """``tutorcompile.dynamo``'s explain function, or None when stage 3 is not importable."""
    try:
        from .. import dynamo
        explain = dynamo.explain
    except Exception:  # noqa: BLE001 -- stage 3 missing or broken: fall back to fx
        return None
    if inspect.ismodule(explain):  # a submodule that shares the function's name
        explain = getattr(explain, "explain", None)
    return explain if callable(explain) else None


def capture(fn: Callable, example_inputs: Sequence[Any]) -> StageOutput:
    """The captured graphs of ``fn``: Dynamo's when it works here, else ``symbolic_trace``'s."""
    fn = _module_or_fn(fn)
    explain = _dynamo_explain()
    problem = "tutorcompile.dynamo is not importable"
    if explain is not None:
        try:
            report = explain(fn)(*example_inputs)
        except Exception as e:  # noqa: BLE001 -- say why, then fall back
            problem = f"tutorcompile.dynamo raised {type(e).__name__}: {e}"
        else:
            return _from_explain(report)
    gm = _symbolic_trace(fn, example_inputs)
    return StageOutput([StageGraph("graph", gm)],
                       note=f"captured by tutorcompile.fx.symbolic_trace ({problem})")


def _from_explain(report: Any) -> StageOutput:
    graphs = [StageGraph(f"graph {i + 1}" if len(report.graphs) > 1 else "graph", gm)
              for i, gm in enumerate(report.graphs)]
    panels = {}
    guard_lines = []
    for i, guards in enumerate(report.guards):
        guard_lines.append(f"graph {i + 1}:" if len(report.guards) > 1 else "graph:")
        guard_lines += [f"    {g}" for g in guards]
    panels["guards"] = "\n".join(guard_lines) or "(no guards)"
    breaks = [str(b) for b in report.break_reasons]
    breaks += [f"skipped frame {s}" for s in report.skipped_frames]
    panels["graph breaks"] = "\n\n".join(breaks) or "no graph breaks"
    if report.recompile_log:
        panels["recompiles"] = "\n".join(report.recompile_log)
    count = report.graph_count
    note = (f"captured by tutorcompile.dynamo: {count} graph{'s' * (count != 1)}, "
            f"{report.graph_break_count} graph break{'s' * (report.graph_break_count != 1)}")
    return StageOutput(graphs, panels, note)


def _symbolic_trace(fn: Callable, example_inputs: Sequence[Any]) -> GraphModule:
    gm = symbolic_trace(fn)
    try:
        ShapeProp(gm).propagate(*example_inputs)
    except Exception:  # noqa: BLE001 -- shapes are a bonus; the graph is still worth showing
        pass
    return gm


# --- stage 1: the graph PyTorch's eager autograd records ----------------------------------------
def eager_autograd(fn: Callable, example_inputs: Sequence[Any]) -> StageOutput | None:
    """PyTorch's ``grad_fn`` graph of the first output, leaves named after the inputs."""
    fn = _module_or_fn(fn)
    if not needs_grad(fn, example_inputs):
        return None
    out = first_tensor(fn(*example_inputs))
    if out is None or out.grad_fn is None:
        return None
    names = {name: t for name, t in zip(input_names(fn, example_inputs), example_inputs)
             if isinstance(t, torch.Tensor) and t.requires_grad}
    if isinstance(fn, torch.nn.Module):
        names.update({name.replace(".", "_"): p for name, p in fn.named_parameters()})
    graph = torch_autograd_graph(out, names)
    return StageOutput([StageGraph("grad_fn graph", graph)],
                       note="what torch.autograd records when the function runs eagerly: "
                            "one node per grad_fn, in the order the engine runs them")


# --- stage 4 (PyTorch's AOTAutograd until ours lands) ---------------------------------------
def torch_aot(fn: Callable, example_inputs: Sequence[Any]) -> StageOutput | None:
    fn = _module_or_fn(fn)
    if not needs_grad(fn, example_inputs):
        return None
    part = torch_partition(fn, *example_inputs, partitioner="default")
    graphs = [StageGraph("joint", part.joint, color_by="partition"),
              StageGraph("forward", part.forward, color_by="partition"),
              StageGraph("backward", part.backward, color_by="partition")]
    return StageOutput(graphs, {"partition": part.summary()},
                       note="PyTorch's AOTAutograd (default partitioner): the joint graph, "
                            "then the forward and backward graphs it is cut into")


def tutorcompile_aot_stage(fn: Callable, example_inputs: Sequence[Any]) -> StageOutput | None:
    """Stage 4: the prim graph, the joint graph and its default partition, as ours makes them."""
    fn = _module_or_fn(fn)
    art = tutorcompile_aot_artifacts(fn, *example_inputs, partitioner="default")
    graphs = [StageGraph("decomposed (prims)", art.prim_graph)]
    panels = {"decomposition": str(art.decomposition_report)}
    if art.joint is not None and art.partition is not None:
        view = PartitionView(art.partition.forward, art.partition.backward,
                             num_user_outputs=art.joint.num_fwd_outputs,
                             title="default partition", is_tangent=is_tangent)
        graphs += [StageGraph("joint", art.joint.graph, color_by="partition_role"),
                   StageGraph("forward", view.forward, color_by="partition"),
                   StageGraph("backward", view.backward, color_by="partition")]
        panels["partition"] = str(art.partition.report)
        note = ("tutorcompile.aot: decompose to prims, build the joint graph from the VJP "
                "rules, cut it with the default partitioner")
    else:
        note = ("tutorcompile.aot: the graph decomposed to prims (no input requires grad, so "
                "there is no backward to build)")
    return StageOutput(graphs, panels, note=note)


def inductor_fusion(fn: Callable, example_inputs: Sequence[Any]) -> StageOutput:
    """Stage 5: the forward pass's prim graph coloured by the kernel each node landed in."""
    view = fusion_view(_module_or_fn(fn), *example_inputs)
    return StageOutput([StageGraph("prims by kernel", view.graph_module, color_by="kernel")],
                       {"fusion report": view.summary(), "output code": view.output_code},
                       note=f"tutorcompile.inductor: the {view.title} (no grad)")


def _importable(name: str) -> bool:
    """Whether a module exists, without importing it (importing stage 5 takes seconds)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _register_builtin() -> None:
    register_stage("captured", capture, order=10)
    if _importable("tutorcompile.autograd"):
        register_stage("eager autograd", eager_autograd, order=20)
    if _importable("tutorcompile.aot"):
        register_stage("aot", tutorcompile_aot_stage, order=30)
    if _importable("functorch.compile"):
        register_stage("aot (torch)", torch_aot, order=40)
    if _importable("tutorcompile.inductor.compile_fx"):
        register_stage("fused kernels", inductor_fusion, order=50)


_register_builtin()
