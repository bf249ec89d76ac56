"""AOTAutograd's runtime: compile forward and backward ahead of time, plug into autograd.

:func:`aot_function` turns ``fn`` into a callable that, on its first call with given input
shapes, runs the whole stage::

    trace_with_inputs fn       -> torch-level graph        (or a graph from Dynamo)
    inline_modules / lift      -> parameters and buffers as inputs
    functionalize              -> pure graph + list of mutated inputs
    decompose                  -> prims and extern calls      (decompositions.py)
    make_joint                 -> forward + backward in one graph (joint.py)
    partition_fn               -> forward graph, backward graph, saved values
    fw_compiler / bw_compiler  -> callables (stage 5 plugs its code generators in here)

and on every call runs the compiled forward inside a ``torch.autograd.Function`` whose
``backward`` runs the compiled backward on the saved values. So the result composes with
eager autograd: ``loss.backward()`` works, gradients land in ``.grad``, inputs that do not
require grad get none, outputs that need no gradient are marked non-differentiable, missing
output gradients become zeros. Mutated inputs (``x.add_(1)``, BatchNorm's running stats) are
copied back after the forward ran.

When no input requires grad (or grad mode is off) only the forward graph is built and run.

The ``"aot_eager"`` backend (:func:`aot_eager`) runs this with compilers that simply call
the graphs -- the way to check AOT alone, as ``backend="aot_eager"`` does in torch.compile.
:func:`aot_eager_backend` is the same thing with the ``torch.compile`` backend contract, so
real Dynamo can drive our AOTAutograd.

Mirrors: torch/_functorch/aot_autograd.py (``aot_function``, ``aot_module``,
``aot_module_simplified``) and torch/_functorch/_aot_autograd/runtime_wrappers.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .._logging import log_artifact
from ..fx import Graph, GraphModule
from .functionalize import FunctionalGraph, functionalize, inline_modules, lift_attributes
from .joint import JointGraph, is_differentiable, make_joint
from .partitioners import Partition, PartitionReport, default_partition
from .prim_graph import DecompositionReport, decompose
from .tracing import trace_with_inputs


def _identity_compiler(gm: GraphModule, example_inputs: list) -> Callable:
    return gm


@dataclass
class CompiledArtifacts:
    """Everything one compilation produced, for inspection (``compiled.artifacts``)."""
    functional: FunctionalGraph
    prim_graph: Graph
    decomposition_report: DecompositionReport
    joint: JointGraph | None
    partition: Partition | None
    forward: Callable
    backward: Callable | None
    mutated_tensor_positions: tuple = ()  # mutated inputs, counted among tensor inputs only

    @property
    def partition_report(self) -> PartitionReport | None:
        return None if self.partition is None else self.partition.report


def _key(inputs: list) -> tuple:
    return tuple((tuple(x.shape), x.dtype, x.device.type, bool(x.requires_grad))
                 if isinstance(x, torch.Tensor) else ("const", repr(x)) for x in inputs)


class AOTCompiled:
    """The callable :func:`aot_graph` returns: compiles per input signature, then runs."""

    def __init__(self, gm: GraphModule | None, fw_compiler: Callable,
                 bw_compiler: Callable | None, partition_fn: Callable,
                 decompositions: dict | None, params: list | None = None,
                 fn: Callable | None = None, named_params: Callable | None = None):
        self.gm = gm  # a captured graph, or None: trace ``fn`` per input signature
        self.fn = fn
        self.named_params = named_params
        self.fw_compiler = fw_compiler
        self.bw_compiler = bw_compiler or fw_compiler
        self.partition_fn = partition_fn
        self.decompositions = decompositions
        self.params = params or []
        self.cache: dict[tuple, CompiledArtifacts] = {}
        self.artifacts: CompiledArtifacts | None = None

    def compile(self, inputs: list, num_args: int) -> CompiledArtifacts:
        gm = self.gm
        if gm is None:
            params = dict(self.named_params()) if self.named_params else None
            gm, _ = trace_with_inputs(self.fn, inputs[:num_args], params)
            gm, _ = _prepare(gm)
        self.graph_module = gm
        functional = functionalize(gm.graph)
        prim_graph, report = decompose(functional.graph, inputs,
                                       decompositions=self.decompositions)
        log_artifact("aot_graphs", lambda: f"{GraphModule({}, prim_graph).code}\n{report}",
                     "decomposed to prims")
        grad_on = torch.is_grad_enabled()
        requires_grad = [grad_on and x.requires_grad and is_differentiable(x.dtype)
                         for x in inputs if isinstance(x, torch.Tensor)]
        if not any(requires_grad):
            fw = GraphModule({}, prim_graph, "InferenceGraph")
            fw = self.fw_compiler(fw, inputs)
            return CompiledArtifacts(functional, prim_graph, report, None, None, fw, None)
        joint = make_joint(prim_graph, requires_grad, functional.num_user_outputs)
        partition = self.partition_fn(joint)
        log_artifact("aot_graphs", lambda: GraphModule({}, joint.graph).code, "joint graph")
        log_artifact("aot_graphs", lambda: f"{partition.forward.code}\n{partition.backward.code}",
                     "forward and backward graphs")
        log_artifact("partition", lambda: str(partition.report),
                     getattr(self.partition_fn, "__name__", "partition"))
        fw = self.fw_compiler(partition.forward, inputs)
        bw = self.bw_compiler(partition.backward, None)
        tensor_position = {i: k for k, i in enumerate(
            i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor))}
        mutated = tuple(tensor_position[i] for i in functional.mutated_inputs)
        return CompiledArtifacts(functional, prim_graph, report, joint, partition, fw, bw,
                                 mutated)

    def __call__(self, *args: Any) -> Any:
        params = [t for _, t in self.named_params()] if self.named_params else self.params
        inputs = list(args) + list(params)
        training = self.fn.training if isinstance(self.fn, torch.nn.Module) else None
        key = _key(inputs) + (torch.is_grad_enabled(), training)
        art = self.cache.get(key)
        if art is None:
            art = self.cache[key] = self.compile(inputs, len(args))
        self.artifacts = art
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        if art.joint is None:
            outs = list(art.forward(*tensors))
        else:
            outs = list(_AOTFunction.apply(art, *tensors))
        functional = art.functional
        n_user = functional.num_user_outputs
        with torch.no_grad():  # the input-mutation epilogue
            for index, value in zip(functional.mutated_inputs, outs[n_user:]):
                inputs[index].copy_(value)
        user = outs[:n_user]
        if functional.output_spec == "single":
            return user[0]
        return user if functional.output_spec == "list" else tuple(user)


class _AOTFunction(torch.autograd.Function):
    """Forward: the compiled forward graph. Backward: the compiled backward graph."""

    @staticmethod
    def forward(ctx, art: CompiledArtifacts, *inputs: torch.Tensor):
        joint = art.joint
        n_fwd = joint.num_fwd_outputs
        outs = list(art.forward(*inputs))
        fwd, saved = outs[:n_fwd], outs[n_fwd:]
        ctx.art = art
        # An input the epilogue will overwrite must not be saved as it is: keep its old value.
        mutated = {id(inputs[i]) for i in art.mutated_tensor_positions}
        saved = [s.clone() if id(s) in mutated else s for s in saved]
        ctx.save_for_backward(*[s for s in saved if isinstance(s, torch.Tensor)])
        ctx.others = [None if isinstance(s, torch.Tensor) else s for s in saved]
        tangent = set(joint.tangent_outputs)
        ctx.out_meta = [(o.shape, o.dtype, o.device) if isinstance(o, torch.Tensor) else None
                        for o in fwd]
        no_grad = [o for i, o in enumerate(fwd)
                   if isinstance(o, torch.Tensor) and i not in tangent]
        # outputs returned twice or inputs returned as they are must be new tensors
        seen: set[int] = {id(x) for x in inputs}
        result = []
        for o in fwd:
            if isinstance(o, torch.Tensor) and id(o) in seen:
                o = o.clone()
            if isinstance(o, torch.Tensor):
                seen.add(id(o))
            result.append(o)
        no_grad = [result[i] for i, o in enumerate(fwd)
                   if isinstance(o, torch.Tensor) and i not in tangent]
        if no_grad:
            ctx.mark_non_differentiable(*no_grad)
        return tuple(result)

    @staticmethod
    def backward(ctx, *grad_outputs):
        art = ctx.art
        joint = art.joint
        it = iter(ctx.saved_tensors)
        saved = [next(it) if s is None else s for s in ctx.others]
        tangents = []
        for i in joint.tangent_outputs:
            g = grad_outputs[i]
            if g is None:
                shape, dtype, device = ctx.out_meta[i]
                g = torch.zeros(shape, dtype=dtype, device=device)
            # (a sparse gradient has no memory format to ask for)
            tangents.append(g.contiguous() if g.layout == torch.strided else g)
        grads = list(art.backward(*saved, *tangents))
        return (None, *[g if rg else None for g, rg in zip(grads, joint.requires_grad)])


# ---------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------

def _prepare(gm: GraphModule) -> tuple[GraphModule, list]:
    gm = inline_modules(gm)
    if not any(n.op == "get_attr" for n in gm.graph.nodes):
        return gm, []
    graph, _, values = lift_attributes(gm)
    return GraphModule({}, graph, type(gm).__name__), values


def aot_graph(gm: GraphModule, fw_compiler: Callable = _identity_compiler,
              bw_compiler: Callable | None = None, partition_fn: Callable = default_partition,
              decompositions: dict | None = None) -> AOTCompiled:
    """AOTAutograd for an already captured torch-level graph (``gm`` from our tracer or
    Dynamo). Parameters and buffers referenced by ``get_attr`` become trailing inputs, fed
    from ``gm`` on every call."""
    prepared, params = _prepare(gm)
    return AOTCompiled(prepared, fw_compiler, bw_compiler, partition_fn, decompositions,
                       params=params)


def aot_function(fn: Callable, fw_compiler: Callable = _identity_compiler,
                 bw_compiler: Callable | None = None,
                 partition_fn: Callable = default_partition,
                 decompositions: dict | None = None) -> AOTCompiled:
    """Compile ``fn`` (tensors in, tensors out) forward and backward ahead of time.

    ``fn`` is traced by running it on the first call's inputs (see ``tracing.py``), once
    per input signature (shapes, dtypes, requires_grad, grad mode).

    ``fw_compiler(gm, example_inputs)`` and ``bw_compiler`` turn the forward and backward
    GraphModules into callables (default: run them as they are). ``partition_fn`` takes a
    :class:`~tutorcompile.aot.joint.JointGraph` and returns a ``Partition``
    (:func:`default_partition` or :func:`min_cut_partition`). ``decompositions`` replaces
    the default table :data:`~tutorcompile.aot.decompositions.DECOMPOSITIONS`.
    """
    return AOTCompiled(None, fw_compiler, bw_compiler, partition_fn, decompositions, fn=fn)


def aot_module(module: torch.nn.Module, fw_compiler: Callable = _identity_compiler,
               bw_compiler: Callable | None = None,
               partition_fn: Callable = default_partition,
               decompositions: dict | None = None) -> AOTCompiled:
    """:func:`aot_function` for an ``nn.Module``: its parameters and buffers are inputs of
    the graphs (they receive ``.grad``; buffers updated in training mode are written back).

    The module is traced per input signature *and* ``training`` mode: after ``.eval()``
    the next call traces again (dropout off, batch norm on running statistics).
    """
    def named_params():
        return [*module.named_parameters(), *module.named_buffers()]
    return AOTCompiled(None, fw_compiler, bw_compiler, partition_fn, decompositions,
                       fn=module, named_params=named_params)


def aot_eager(gm: GraphModule, example_inputs: list, partition_fn: Callable = default_partition
              ) -> AOTCompiled:
    """The ``"aot_eager"`` backend for ``tutorcompile.compile``: AOT, then run the graphs."""
    return aot_graph(gm, partition_fn=partition_fn)


def aot_eager_backend(fx_gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """A ``torch.compile`` backend: real Dynamo's graph, our AOTAutograd.

    ``torch.compile(model, backend=aot_eager_backend)``: the ``torch.fx`` graph becomes ours
    with ``from_torch_fx``, then :func:`aot_graph` compiles it. Returns the graph's outputs
    as Dynamo expects (a tuple when the graph returns one).
    """
    from ..fx import from_torch_fx
    gm = from_torch_fx(fx_gm, provenance="from_torch_fx (Dynamo graph)")
    return aot_graph(gm)
