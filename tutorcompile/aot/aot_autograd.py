"""AOTAutograd's runtime: compile forward and backward ahead of time, plug into autograd.

:func:`aot_function` turns ``fn`` into a callable that, on its first call with given input
shapes, runs the whole stage::

    trace_with_inputs fn       -> torch-level graph        (or a graph from Dynamo)
    inline_modules / lift      -> parameters and buffers as inputs
    functionalize              -> pure graph + list of mutated inputs
    decompose                  -> prims and extern calls      (prim_graph.py, decomp/)
    joint (make_joint)         -> forward + backward in one graph (joint.py)
    partition (partition_fn)   -> forward graph, backward graph, saved values
    fw_compiler / bw_compiler  -> callables (stage 5 plugs its code generators in here)

and on every call runs the compiled forward inside a ``torch.autograd.Function`` whose
``backward`` runs the compiled backward on the saved values. So the result composes with
eager autograd: ``loss.backward()`` works, gradients land in ``.grad``, inputs that do not
require grad get none, outputs that need no gradient are marked non-differentiable, missing
output gradients become zeros. Mutated inputs (``x.add_(1)``, BatchNorm's running stats) are
copied back after the forward ran.

The passes from ``functionalize`` on are the stage's spine, :meth:`AOTCompiled.compile_graph`,
each in the compile phase of its name.

When no input requires grad (or grad mode is off) only the forward graph is built and run.

Under ``torch.autocast`` the traced graph holds the casts autocast made (see
``tracing.py``), so it is compiled once per autocast state (part of the key) and runs with
autocast off, as PyTorch's runtime wrapper runs it.

Per call, only what must be is done: the input signature is looked up, the compiled
forward runs (inside the ``autograd.Function`` when gradients are needed), outputs are handed
back in the user's structure. Which inputs are tensors, which outputs are not
differentiable and how outputs are rebuilt were decided at compile time. Before the backward
graph is compiled, ``transpose_matmul_results`` makes weight gradients come out in their
parameter's layout (so autograd does not copy them).

**Symbolic sizes.** When Dynamo marked dimensions of a graph's inputs dynamic (placeholder
``meta["dynamic_dims"]``) and both compilers run graphs whose sizes are computed from their
inputs' (``supports_symbolic_shapes``, as :func:`eager_compiler` does), those sizes become
symbols of a :class:`~tutorcompile.fx.symbolic_shapes.ShapeEnv` and stay symbolic through
decomposition, the joint graph and the partitioner; a size the backward needs is an int the
forward returns. The compilation is then kept under a key without those sizes and reused
for any size its guards (what the trace relied on) accept: one compile for every batch size.

Two backends of ``tutorcompile.compile`` run the graphs as they are (:func:`eager_compiler`:
prims bound straight to their PyTorch implementations), with torch.compile's names and
meanings:

* ``"aot_eager"`` (:func:`aot_eager`) decomposes nothing: every torch call stays a PyTorch
  call and its backward is PyTorch's. It checks functionalization, the joint graph, the
  partition and the runtime wrapper -- with eager's kernels, so its values and gradients
  are eager's to the last bit and any difference is a bug of those stages.
* ``"aot_eager_decomp_partition"`` (:func:`aot_eager_decomp_partition`) adds the
  decompositions to prims and the min-cut partitioner (:func:`kernel_min_cut_partition`):
  the prims the code generators get, split as inductor splits them under
  ``inductor.config.partitioner = "min_cut"`` (inductor's default, ``"default"``, saves what
  eager saves). A decomposition rounds differently from PyTorch's kernel (a batch norm's
  statistics), so float32 results move by rounding; in a deep network that can flip a ReLU
  whose input is within rounding of zero (resnet18: one pre-activation of -7.6e-6), the rung
  to check in float64 when it disagrees.

:func:`aot_eager_backend` takes the ``torch.compile`` backend contract, so real Dynamo can
drive our AOTAutograd (decomposed, as the second rung).

Mirrors: torch/_functorch/aot_autograd.py (``aot_function``, ``aot_module``,
``aot_module_simplified``) and torch/_functorch/_aot_autograd/runtime_wrappers.py.
"""

from __future__ import annotations

import functools
import operator
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .._logging import log_artifact, phase
from ..amp import autocast_state, make_autocast_explicit
from ..errors import TutorcompileError
from ..fastpath import FastPath, fast_path
from ..fx import Graph, GraphModule, Node, TensorMeta, exec_generated, from_torch_fx
from ..fx.aliasing import storage_key
from ..fx.symbolic_shapes import ShapeEnv, as_shape
from ..ops import PRIMS
from ..ops.table import contiguous_strides
from .functionalize import (
    FunctionalGraph,
    functionalize,
    inline_modules,
    lift_attributes,
    write_through_detach,
)
from .joint import JointGraph, is_differentiable, make_joint
from .partitioners import Partition, PartitionReport, default_partition, kernel_min_cut_partition
from .prim_graph import DecompositionReport, decompose, is_symbolic_input, symbolic_input_metas
from .synthetic_base import SyntheticBases, plan_synthetic_bases, storage_layout
from .tracing import trace_with_inputs


def _identity_compiler(gm: GraphModule, example_inputs: list) -> Callable:
    return gm


# (a GraphModule computes its sizes)
_identity_compiler.supports_symbolic_shapes = True  # type: ignore[attr-defined]


# ``prims.<name>`` in generated code, resolved straight to each prim's PyTorch implementation
PRIM_REFERENCES = types.SimpleNamespace(**{name: p.reference for name, p in PRIMS.items()})


def eager_compiler(gm: GraphModule, example_inputs: list | None = None) -> Callable:
    """The compiler of ``"aot_eager"``: run the graph's own generated code, with ``prims.add``
    bound to ``torch.add`` and so on -- the same calls the op table's eager handler would
    make, without dispatching through the table (or calling an ``nn.Module``) at run time.
    The returned function keeps the graph it runs as ``.graph_module``."""
    code = gm.graph.python_code("self")
    namespace = dict(code.globals, prims=PRIM_REFERENCES)
    exec_generated(code.src, f"aot_eager {type(gm).__name__}", namespace)
    run = functools.partial(namespace["forward"], None)
    run.graph_module = gm  # type: ignore[attr-defined]
    return run


# sizes computed in the graph just run
eager_compiler.supports_symbolic_shapes = True  # type: ignore[attr-defined]


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
    # decided once, for the per-call path
    all_tensors: bool = True         # every input is a tensor (no filtering per call)
    no_grad_outputs: tuple = ()      # forward outputs with no tangent
    saved_all_tensors: bool = True   # every saved value is a tensor
    # what the per-call path calls: a compiled graph's own per-layout function when its
    # compiler offers one (``direct()``): this entry's key (shapes, strides, dtypes) has
    # already picked the layout, so the compiled graph need not key its inputs again
    forward_run: Callable = field(init=False)   # set in __post_init__
    backward_run: Callable | None = None
    # symbolic sizes: the symbols, and the guards this compilation relied on (None: static)
    shape_env: ShapeEnv | None = None
    # tensors a traced function closes over (a global module's weights): trailing inputs of
    # the graphs, passed on every call (they get gradients, as in eager)
    lifted: tuple = ()
    # every dim Dynamo left dynamic is a symbol here (an input that is not contiguous keeps
    # its example's sizes): right for any sizes Dynamo's guards admit, if it has no guards
    symbolic_everywhere: bool = False
    # an inference graph with inputs that require grad: run with grad mode off
    grad_off: bool = False
    # the order of the mutated inputs' copies back (found on the first call: _copy_order)
    copy_order: tuple | None = None
    # inputs that share a storage, one of them written: the graph runs on their synthetic
    # bases (synthetic_base.py); and for any compilation that writes an input, which inputs
    # shared a storage when it was made (it is reused only for calls that share alike)
    synthetic: SyntheticBases | None = None
    storage_layout: tuple | None = None
    # forward outputs that are views: handed out detached, or remade from an input or
    # another output (index, from an input?, base index); the saved
    # values that share their memory, copied (found on the first training call:
    # _views_to_detach)
    detached_views: tuple | None = None
    regenerated_views: tuple = ()
    saved_copies: frozenset = frozenset()

    def __post_init__(self):
        self.forward_run = _direct(self.forward)
        if self.joint is None:
            copies = _outputs_to_copy(self.prim_graph, self.functional.num_user_outputs)
            if copies:
                self.forward_run = functools.partial(_copy_outputs, self.forward_run, copies)
        if self.grad_off:
            self.forward_run = functools.partial(_run_without_grad, self.forward_run)

    def run_backward(self, *args: Any) -> Any:
        """The backward graph, compiled at its first call; later calls go to its direct
        function. Its inputs' layouts follow from this entry's: saved values come from the
        forward, tangents are made contiguous and autograd checks their shapes and dtypes
        against the forward's outputs (a size-1 dim's stride may differ; no index ever
        multiplies it)."""
        if self.backward_run is not None:
            return self.backward_run(*args)
        assert self.backward is not None   # (called by autograd: there is a joint graph)
        out = self.backward(*args)
        self.backward_run = _direct(self.backward)
        return out

    @property
    def partition_report(self) -> PartitionReport | None:
        return None if self.partition is None else self.partition.report


def _key(inputs: list) -> tuple:
    return tuple((x.shape, x.stride(), x.dtype, x.device, x.requires_grad)
                 if isinstance(x, torch.Tensor) else ("const", repr(x)) for x in inputs)


def _generic_key(inputs: list, dynamic_dims: list) -> tuple:
    """:func:`_key` with the dynamic sizes of contiguous inputs left out: the key of a
    compilation for symbolic sizes (their strides follow from the sizes). Sizes 0 and 1
    stay in it: they are never symbols."""
    return tuple(
        (tuple(None if d in dims and s >= 2 else s for d, s in enumerate(x.shape)),
         x.dtype, x.device, x.requires_grad) if is_symbolic_input(x, dims) else k
        for x, dims, k in zip(inputs, dynamic_dims, _key(inputs)))


def _outputs_to_copy(graph: Graph, n_user: int) -> tuple[int, ...]:
    """User outputs of an inference graph that are an input or an earlier output as they
    are: a copy the decompositions made the same value (``y = x.clone()``, ``w = v.clone()``
    are identities in a functional graph). A compiled graph returns such a value as the very
    tensor it is, and the caller, writing one in place (``w[mask] = 0``), silently wrote the
    other; those positions get copies. (Training: ``_AOTFunction.forward`` copies them.)"""
    outputs = graph.output_node.args[0]
    if not isinstance(outputs, (tuple, list)):
        return ()
    seen: set = set()
    copies = []
    for i, out in enumerate(outputs[:n_user]):
        if isinstance(out, Node):
            if out in seen or out.op == "placeholder":
                copies.append(i)
            seen.add(out)
    return tuple(copies)


def _copy_outputs(run: Callable, positions: tuple[int, ...], *inputs: Any) -> Any:
    outs = list(run(*inputs))
    for i in positions:
        if isinstance(outs[i], torch.Tensor):   # (a size returned as it is stays)
            outs[i] = outs[i].clone()
    return tuple(outs)


def _run_without_grad(fn: Callable, *inputs: torch.Tensor) -> Any:
    with torch.no_grad():
        return fn(*inputs)


def _values_of_detached_writes(graph: Graph) -> Graph:
    """``graph`` with each ``write_through_detach(parent, child)`` (a tensor written under
    ``no_grad``, as an optimizer writes a parameter) replaced by ``child``: its values, all
    it is when no gradient flows. The code generator then fuses the update with the write
    instead of calling PyTorch for it."""
    if not any(n.target is write_through_detach for n in graph.nodes):
        return graph
    graph = graph.copy("values_of_detached_writes")   # (the decomposed graph stays as it was)
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is write_through_detach:
            node.replace_all_uses_with(node.args[1])
            graph.erase_node(node)
    return graph


def _direct(compiled: Any) -> Any:
    """The compiler's result's entry for inputs laid out as the examples (AOT's cache is
    keyed on that layout): see :mod:`tutorcompile.fastpath`."""
    return fast_path(compiled)


class AOTCompiled(FastPath):
    """The callable :func:`aot_graph` returns: compiles per input signature, then runs
    (``cache``: the second of the compiler's caches, ``tutorcompile/_caches.py``)."""

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
        self.num_compiles = 0  # compilations made (a new size with symbolic sizes makes none)
        # which dims of each input Dynamo made symbolic (placeholder meta "dynamic_dims"),
        # used when both compilers run graphs whose sizes are computed from the inputs'
        self.dynamic_dims: list = []
        self.symbolic: dict[tuple, list[CompiledArtifacts]] = {}  # generic key -> entries
        if gm is not None and all(getattr(c, "supports_symbolic_shapes", False)
                                  for c in (self.fw_compiler, self.bw_compiler)):
            self.dynamic_dims = [frozenset(p.meta.get("dynamic_dims", ()))
                                 for p in gm.graph.placeholders]
            if not any(self.dynamic_dims):
                self.dynamic_dims = []

    def compile(self, inputs: list, num_args: int) -> CompiledArtifacts:
        lifted: list[torch.Tensor] = []
        gm, dynamic_dims = self.gm, self.dynamic_dims
        if gm is not None:   # a graph from PyTorch's Dynamo: autocast as casts (ours has them)
            gm = make_autocast_explicit(gm, inputs)
        else:
            assert self.fn is not None   # (no graph: a function to trace)
            params = dict(self.named_params()) if self.named_params else None
            gm, _ = trace_with_inputs(self.fn, inputs[:num_args], params)
            gm, lifted = _prepare(gm)
            inputs = [*inputs, *lifted]
            dynamic_dims = self._marked_dynamic(inputs)
        with torch._C._DisableAutocast():  # (the casts autocast makes are in the graph)
            art = self.compile_graph(gm, inputs, dynamic_dims)
        art.lifted = tuple(lifted)
        return art

    def _marked_dynamic(self, inputs: list) -> list:
        """For a traced function: the dims of its tensor arguments marked with
        ``tutorcompile.mark_dynamic`` become symbols (the stage views draw ``s0``); the
        compilation is still cached under the exact sizes."""
        marked = [frozenset(getattr(x, "_dynamo_dynamic_indices", ()) or ())
                  if isinstance(x, torch.Tensor) else frozenset() for x in inputs]
        if not any(marked) or not all(getattr(c, "supports_symbolic_shapes", False)
                                      for c in (self.fw_compiler, self.bw_compiler)):
            return []
        return marked

    def compile_graph(self, gm: GraphModule, inputs: list, dynamic_dims: list
                      ) -> CompiledArtifacts:
        """Stage 4's spine: a torch-level graph to a compiled forward and backward. Each pass
        runs in the compile phase of its name (``_logging.SPINE["aot"]``, the order
        ``TUTORCOMPILE_LOGS=compile_times`` and ``tutorcompile.debug`` show)::

            functionalize   in-place writes -> a pure graph + the inputs it writes
                            (functionalize.py; a written input sharing a storage with
                            another: the graph runs on their synthetic bases)
            decompose       torch calls -> prims and extern calls   (prim_graph.py, decomp/)
            joint           forward + backward in one graph (VJP rules)        (joint.py)
            partition       -> forward graph, backward graph, saved values (partitioners.py)

        then ``fw_compiler`` compiles the forward (stage 5's spine runs here) and
        ``bw_compiler`` the backward (a stage-5 compiler compiles it at the first backward).
        A graph no gradient leaves (inference, an optimizer step) has no partition: its one
        graph goes to ``fw_compiler``."""
        self.graph_module = gm
        self.num_compiles += 1
        with phase("functionalize"):
            functional, bases = functionalize_graph(gm, inputs)
        layout = storage_layout(inputs) if functional.mutated_inputs else None
        if bases is not None and bases.groups:   # (one input per shared storage)
            inputs, dynamic_dims = bases.examples(inputs), []
        with phase("decompose"):
            prim_graph, report, shape_env = decompose_to_prims(
                functional, inputs, dynamic_dims, self.decompositions)
        with phase("joint"):
            joint = joint_graph(functional, prim_graph, inputs)
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        if joint is None or not joint.tangent_outputs:   # no gradient leaves this graph
            graph = inference_graph(functional, prim_graph, inputs, grad_off=joint is not None)
            forward = self.fw_compiler(GraphModule({}, graph, "InferenceGraph"), tensors)
            art = CompiledArtifacts(functional, graph, report, None, None, forward, None,
                                    all_tensors=len(tensors) == len(inputs),
                                    shape_env=shape_env, grad_off=joint is not None)
        else:
            with phase("partition"):
                partition = self.partition_fn(joint)
                _log_partition(joint, partition, self.partition_fn)
            # (the outputs after these are saved for the backward: no caller sees them, so
            # a compiler may keep their memory for the next call, inductor.config.keep_buffers)
            partition.forward.graph.output_node.meta["user_outputs"] = joint.num_fwd_outputs
            forward = self.fw_compiler(partition.forward, tensors)
            backward = self.bw_compiler(transpose_matmul_results(partition.backward), None)
            art = _training_artifacts(functional, prim_graph, report, joint, partition,
                                      forward, backward, inputs, shape_env)
        art.synthetic, art.storage_layout = bases, layout
        return art

    def compile_for(self, example_inputs: list) -> None:
        """Compile now for a captured graph's example inputs (parameters follow them), so
        that compile time is spent when the backend runs and the first call only runs the
        graph. The backward is compiled at the first backward, as in PyTorch."""
        inputs = [*example_inputs, *self.params]
        key = (*_key(inputs), torch.is_grad_enabled(), None, autocast_state())  # as __call__
        if key not in self.cache:
            self._compile_and_cache(key, inputs, len(example_inputs))
        self.artifacts = self.cache[key]

    def _compile_and_cache(self, key: tuple, inputs: list, num_args: int
                           ) -> CompiledArtifacts:
        """Reuse a compilation for symbolic sizes whose guards hold for ``inputs``, or
        compile; either way remember it under this exact ``key``."""
        generic = None
        if self.dynamic_dims:
            generic = (*_generic_key(inputs, self.dynamic_dims), key[-3:])
            for art in self.symbolic.get(generic, ()):
                if art.shape_env is not None and art.shape_env.check_guards(inputs):
                    self.cache[key] = art
                    return art
            for art in self.symbolic.get(generic, ()):
                if art.shape_env is not None:
                    log_artifact("recompiles", functools.partial(_guard_failed, art.shape_env,
                                                                 inputs))
        with phase("aot"):
            art = self.cache[key] = self.compile(inputs, num_args)
        if generic is not None and art.shape_env is not None:
            self.symbolic.setdefault(generic, []).append(art)
            art.symbolic_everywhere = art.shape_env is not None and all(
                is_symbolic_input(x, dims) for x, dims in zip(inputs, self.dynamic_dims)
                if dims)
            env = art.shape_env
            if env is not None:
                log_artifact("guards", lambda: "symbolic sizes of the AOT graphs\n"
                             + env.format_guards())
        return art

    def __call__(self, *args: Any) -> Any:
        # The per-call path: pick the compilation for this input signature, run it. All
        # that can be decided once (which inputs are tensors, how outputs are rebuilt) was.
        if self.named_params is None:
            inputs = [*args, *self.params]
            training = None
        else:
            inputs = [*args, *(t for _, t in self.named_params())]
            training = self.fn.training  # type: ignore[union-attr]   # (an nn.Module)
        amp = autocast_state()
        key = (*_key(inputs), torch.is_grad_enabled(), training, amp)
        art = self.cache.get(key)
        if art is not None and art.storage_layout is not None:
            layout = storage_layout(inputs)   # (a graph that writes an input is compiled
            if layout != art.storage_layout:  # for one way its inputs share storage)
                key = (*key, layout)
                art = self.cache.get(key)
        if art is None:
            art = self._compile_and_cache(key, inputs, len(args))
        self.artifacts = art
        if amp:   # traced under autocast: its casts are in the graphs, which run without it
            with torch._C._DisableAutocast():
                return _run(art, [*inputs, *art.lifted] if art.lifted else inputs)
        return _run(art, [*inputs, *art.lifted] if art.lifted else inputs)

    def direct(self) -> Callable:
        """What to call for inputs exactly like the example inputs compiled for (shapes,
        strides, dtypes, devices, ``requires_grad``) in the grad mode they were compiled in:
        no per-call key. For a caller whose guards already pin all of that -- Dynamo's cache
        entry of a graph without dynamic sizes; real AOTAutograd likewise trusts Dynamo's
        guards and never looks at its inputs again. ``self`` when there is no single
        compilation to go to.

        The common cases call the compiled forward (inference) or the ``autograd.Function``
        (training) with nothing in between: no parameters lifted from ``get_attr``, no
        mutated input to copy back, a tuple of outputs returned as the graph makes it."""
        if self.named_params is not None or len(self.cache) != 1 or next(iter(self.cache))[-1]:
            return self   # (compiled under autocast: __call__ runs it with autocast off)
        (art,) = self.cache.values()
        if art.synthetic is not None:
            return self   # (the bases' offsets are in the graph: the keyed path checks them)
        return self._direct_run(art)

    def direct_dynamic(self) -> Callable:
        """:meth:`direct` for a caller whose guards leave some sizes free (each at least 2,
        contiguous as in the example) and pin everything else: a compilation for symbolic
        sizes in every one of those dims, relying on no guard of its own, is right for all
        of them, so the per-call key (microseconds a call) is not needed.
        ``self`` otherwise: the keyed path checks its guards per new size."""
        if self.named_params is not None or len(self.cache) != 1 or next(iter(self.cache))[-1]:
            return self
        (art,) = self.cache.values()
        if art.synthetic is not None:
            return self
        if not art.symbolic_everywhere or art.shape_env is None or art.shape_env.guards:
            return self
        return self._direct_run(art)

    def _direct_run(self, art: CompiledArtifacts) -> Callable:
        functional = art.functional
        plain = (not self.params and art.all_tensors and not functional.mutated_inputs
                 and functional.output_spec == "tuple")
        if plain and art.joint is not None:
            return functools.partial(_apply, art)   # gives a tuple
        outputs = art.prim_graph.output_node.args[0]
        if plain and isinstance(outputs, tuple) and len(outputs) == functional.num_user_outputs:
            return art.forward_run
        params = self.params
        return lambda *args: _run(art, [*args, *params])


def functionalize_graph(gm: GraphModule, inputs: list
                        ) -> tuple[FunctionalGraph, SyntheticBases | None]:
    """The spine's ``functionalize``: ``gm``'s graph made pure (:func:`functionalize`). When
    it writes an input that shares a storage with another input, the graph is first
    rewritten to take one input per storage (their synthetic bases, returned beside it;
    ``bases.groups`` empty: none were needed after all) and that graph is functionalized."""
    functional = functionalize(gm.graph)
    if not functional.mutated_inputs:
        return functional, None
    planned = plan_synthetic_bases(gm, inputs, functional.mutated_inputs, fallback=gm)
    if planned is None:
        return functional, None
    inner, bases = planned
    if bases.groups:
        functional = functionalize(inner.graph)
        log_artifact("aot_graphs", lambda: inner.code, "synthetic bases")
    return functional, bases


def decompose_to_prims(functional: FunctionalGraph, inputs: list, dynamic_dims: list,
                       decompositions: dict | None
                       ) -> tuple[Graph, DecompositionReport, ShapeEnv | None]:
    """The spine's ``decompose``: the functional graph's torch calls -> prims and extern
    calls (:func:`decompose`), traced on the inputs' metadata -- with a symbol for each
    dynamic size, in a new shape environment (returned; None: static sizes) -- and a copy
    before each output that eager makes a tensor of its own (:func:`fresh_outputs`)."""
    shape_env = ShapeEnv() if dynamic_dims else None
    metas = inputs if shape_env is None else \
        symbolic_input_metas(inputs, dynamic_dims, shape_env)
    prim_graph, report = decompose(functional.graph, metas, decompositions=decompositions)
    prim_graph = fresh_outputs(functional, prim_graph)
    log_artifact("aot_graphs", lambda: f"{GraphModule({}, prim_graph).code}\n{report}",
                 "decomposed to prims")
    return prim_graph, report, shape_env


def joint_graph(functional: FunctionalGraph, prim_graph: Graph, inputs: list
                ) -> JointGraph | None:
    """The spine's ``joint``: forward and backward of the prim graph in one graph
    (:func:`make_joint`), for the tensor inputs that require grad in this grad mode; None
    when none does."""
    grad_on = torch.is_grad_enabled()
    requires_grad = [grad_on and x.requires_grad and is_differentiable(x.dtype)
                     for x in inputs if isinstance(x, torch.Tensor)]
    if not any(requires_grad):
        return None
    return make_joint(prim_graph, requires_grad, functional.num_user_outputs,
                      functional.recorded_mutations)


def inference_graph(functional: FunctionalGraph, prim_graph: Graph, inputs: list,
                    grad_off: bool) -> Graph:
    """The one graph of a compilation no gradient leaves: an inference graph, even where
    inputs require grad -- an optimizer step, an EMA update, a metric under ``no_grad``
    inside the function. With ``grad_off`` (inputs required grad, but the joint found no
    gradient leaving) it runs with grad mode off, so a parameter written under ``no_grad``
    is its new values. Outputs that are new values of inputs are marked
    (``input_updates``): the compiler may store them in place."""
    graph = _values_of_detached_writes(prim_graph) if grad_off else prim_graph
    if functional.mutated_inputs:
        position = {i: k for k, i in enumerate(
            i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor))}
        graph.output_node.meta["input_updates"] = {
            functional.num_user_outputs + m: position[i]
            for m, i in enumerate(functional.mutated_inputs)}
    return graph


def _log_partition(joint: JointGraph, partition: Partition, partition_fn: Callable) -> None:
    log_artifact("aot_graphs", lambda: GraphModule({}, joint.graph).code, "joint graph")
    log_artifact("aot_graphs", lambda: f"{partition.forward.code}\n{partition.backward.code}",
                 "forward and backward graphs")
    log_artifact("partition", lambda: str(partition.report),
                 getattr(partition_fn, "__name__", "partition"))


def _training_artifacts(functional: FunctionalGraph, prim_graph: Graph,
                        report: DecompositionReport, joint: JointGraph, partition: Partition,
                        forward: Callable, backward: Callable, inputs: list,
                        shape_env: ShapeEnv | None) -> CompiledArtifacts:
    """What a training compilation decided once for the per-call path: the written inputs
    among the tensor inputs, the outputs with no gradient, whether every saved value is a
    tensor."""
    tensor_position = {i: k for k, i in enumerate(
        i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor))}
    mutated = tuple(tensor_position[i] for i in functional.mutated_inputs)
    tangent = set(joint.tangent_outputs)
    no_grad = tuple(i for i in range(joint.num_fwd_outputs) if i not in tangent)
    saved_values = partition.forward.graph.output_node.args[0][joint.num_fwd_outputs:]
    return CompiledArtifacts(functional, prim_graph, report, joint, partition, forward,
                             backward, mutated, len(tensor_position) == len(inputs), no_grad,
                             all(_is_tensor_value(v) for v in saved_values),
                             shape_env=shape_env)


def _guard_failed(shape_env: ShapeEnv, inputs: list) -> str:
    return f"AOT graphs for symbolic sizes: guard failed: {shape_env.failed_guard(inputs)}"


def _run(art: CompiledArtifacts, inputs: list) -> Any:
    """Run one compilation on its inputs (graph inputs, then lifted parameters) and give
    back the user's outputs in their structure."""
    if art.synthetic is not None:
        merged = art.synthetic.merge(inputs)
        if merged is None:   # no base to differentiate through: the captured graph, as is
            return art.synthetic.fallback(*inputs)
        inputs = merged
    tensors = inputs if art.all_tensors else [x for x in inputs if isinstance(x, torch.Tensor)]
    if art.joint is None:
        outs = art.forward_run(*tensors)
    else:
        outs = _apply(art, *tensors)
    functional = art.functional
    n_user = functional.num_user_outputs
    if functional.mutated_inputs:
        # the input-mutation epilogue: a new value with a gradient is copied where autograd
        # sees it (``out[0] = h * 2`` into a plain tensor gives ``out`` a grad_fn, as in
        # eager); any other copy is not recorded (a buffer's running mean, a leaf written
        # under no_grad)
        mutated, new = functional.mutated_inputs, outs[n_user:]
        if art.copy_order is None:
            art.copy_order = _copy_order(mutated, inputs, new)
        first, rest = art.copy_order
        targets, values = [], []
        for m in (*first, *rest):
            index, value = mutated[m], new[m]
            if value is inputs[index]:
                continue     # the compiled graph wrote it in place
            if value.requires_grad:
                inputs[index].copy_(value)
            elif m in first:
                with torch.no_grad():
                    inputs[index].copy_(value)
            else:
                targets.append(inputs[index])
                values.append(value)
        if targets:   # (one call for all: an optimizer step writes every parameter)
            with torch.no_grad():
                torch._foreach_copy_(targets, values)
    spec = functional.output_spec
    if spec == "single":
        return outs[0]
    return list(outs[:n_user]) if spec == "list" else tuple(outs[:n_user])


def _copy_order(mutated: Sequence[int], inputs: list, values: list) -> tuple[tuple, tuple]:
    """In what order the epilogue copies new values into mutated inputs: ``(first, rest)``.

    A new value that shares memory with *another* mutated input (``x.copy_(y)`` and then
    ``y.clamp_()``: x's new value is y as it was, or a view of it) is copied first, one by
    one, before that input is overwritten; the rest follow together. Found on the first
    call: which outputs are inputs, or views of them, is fixed by the compiled graph."""
    owner = {storage_key(inputs[i]): i for i in mutated}
    first = tuple(m for m, (i, v) in enumerate(zip(mutated, values)) if v is not inputs[i]
                  and owner.get(storage_key(v), i) != i)
    return first, tuple(m for m in range(len(mutated)) if m not in first)


_SHAPE_DTYPE_DEVICE = operator.attrgetter("shape", "dtype", "device")


class _AOTFunction(torch.autograd.Function):
    """Forward: the compiled forward graph. Backward: the compiled backward graph.

    Output gradients that autograd did not compute arrive as None (``materialize_grads``
    off): when none was computed, the backward gives None for every input and reads none of
    its saved tensors, as PyTorch's own backward functions do. The autograd engine calls a
    node even then -- a tensor made by an earlier call's graph and passed to this one,
    unused, leads the engine back into that graph after its backward freed it. Otherwise
    the missing ones become zeros."""

    @staticmethod
    def forward(ctx, art: CompiledArtifacts, *inputs: torch.Tensor):
        joint = art.joint
        assert joint is not None
        n_fwd = joint.num_fwd_outputs
        outs = art.forward_run(*inputs)
        fwd, saved = outs[:n_fwd], outs[n_fwd:]
        ctx.art = art
        ctx.materialize_grads = False    # (what ctx.set_materialize_grads(False) sets)
        # (C-level calls only: the per-call path runs no Python frame of ours here)
        ctx.tangent_metas = [*map(_SHAPE_DTYPE_DEVICE, map(fwd.__getitem__,
                                                           joint.tangent_outputs))]
        if art.mutated_tensor_positions:
            # An input the epilogue will overwrite must not be saved as it is, nor a view of
            # it (an aliased input, a view of its synthetic base): keep the old values.
            mutated = {storage_key(inputs[i]) for i in art.mutated_tensor_positions} - {None}
            saved = [s.clone() if storage_key(s) in mutated else s for s in saved]
        # outputs returned twice or inputs returned as they are must be new tensors
        input_ids: set[int] = set(map(id, inputs))
        seen = set(input_ids)
        result = []
        returned_twice: set[int] | None = None
        for o in fwd:
            if isinstance(o, torch.Tensor):
                if id(o) in seen:
                    if id(o) not in input_ids:
                        returned_twice = (returned_twice or set()) | {id(o)}
                    o = o.clone()
                seen.add(id(o))
            result.append(o)
        if returned_twice:
            # Two outputs the graph made one value (v6 = v2.clone() is v2 in a functional
            # graph): the caller may write either in place, and the first is the tensor
            # itself, so what the backward reads of it must be a copy of its own.
            saved = [s.clone() if id(s) in returned_twice else s for s in saved]
        if art.detached_views is None:
            art.detached_views, art.regenerated_views, art.saved_copies = \
                _views_to_detach(result, inputs, saved)
        for i in art.detached_views:
            result[i] = result[i].detach()
        if art.saved_copies:   # the caller may write the memory they share with a view
            saved = [s.clone() if k in art.saved_copies else s for k, s in enumerate(saved)]
        if art.saved_all_tensors:
            ctx.save_for_backward(*saved)
            ctx.others = None
        else:
            ctx.save_for_backward(*[s for s in saved if isinstance(s, torch.Tensor)])
            ctx.others = [None if isinstance(s, torch.Tensor) else s for s in saved]
        no_grad = [result[i] for i in art.no_grad_outputs
                   if isinstance(result[i], torch.Tensor)]
        if no_grad:
            ctx.mark_non_differentiable(*no_grad)
        return tuple(result)

    @staticmethod
    def backward(ctx, *grad_outputs):
        if torch.is_grad_enabled():
            # ``torch.autograd.grad(..., create_graph=True)`` (a gradient penalty, a
            # Hessian-vector product): the backward graph runs on saved values that carry
            # no autograd history, so the gradients it gives would be constants to a second
            # backward -- a silently missing term. PyTorch's AOTAutograd refuses too.
            raise TutorcompileError(
                "a second derivative through a graph compiled with AOT (create_graph=True) "
                "is not supported: compile this function with backend='eager', or take the "
                "gradient of an uncompiled function")
        art = ctx.art
        joint = art.joint
        if all(g is None for g in grad_outputs):
            return (None,) * (1 + len(joint.requires_grad))
        if ctx.others is None:
            saved = ctx.saved_tensors
        else:
            it = iter(ctx.saved_tensors)
            saved = [next(it) if s is None else s for s in ctx.others]
        # (a sparse gradient has no memory format to ask for)
        tangents = [torch.zeros(*meta[:1], dtype=meta[1], device=meta[2]) if g is None else
                    g.contiguous() if g.layout == torch.strided else g
                    for g, meta in zip((grad_outputs[i] for i in joint.tangent_outputs),
                                       ctx.tangent_metas)]
        grads = art.run_backward(*saved, *tangents)
        computed = sum(1 << k for k, i in enumerate(joint.tangent_outputs)
                       if grad_outputs[i] is not None)
        return (None, *[g if rg and reach & computed else None for g, rg, reach in
                        zip(grads, joint.requires_grad, joint.tangents_reaching)])


def _views_to_detach(outputs: list, inputs: Sequence, saved: Sequence) -> tuple:
    """How the ``autograd.Function`` hands out forward outputs that are views: ``(detach,
    regenerate, saved_copies)``.

    Autograd forbids writing in place into a view that a custom Function returned ("Output
    0 of _AOTFunction is a view and is being modified inplace"), so ``a, b = f(x)`` with
    ``a = p[..., :4]``, ``b = p[..., 4:]`` compiled, then ``a /= 2`` (nflows scales slices
    of one projection this way), raised where eager runs. Two ways out, by what else sees
    the view's memory:

    * a view of an intermediate that nothing else sees (no other output overlaps it): to
      the caller it is a tensor of its own.
      ``detach`` lists its index: ``detach()`` gives the same memory and version counter
      without the view relation, so the Function's output is an ordinary result that may
      be written.
    * its base is an output too (``return p, p[:, :2]``, or ``p`` still live after a graph
      break), or an input (``x.reshape(b, d, -1)`` of an argument, written by the caller
      after a graph break): ``regenerate`` lists ``(index, from an input?, base index)``,
      and :func:`_apply` remakes the view from that output or input with ``as_strided``
      (the geometry of the Function's output of this call: symbolic sizes change it),
      outside the Function -- a real view again, so a write into it reaches the base and
      its gradient as in eager. (The view's own output then gets no gradient: the base's
      carries it.)

    A value saved for the backward that shares memory with such views (aot_eager's
    backward of ``t()`` or ``p[:, :2]`` saves ``p``) is saved as a copy, ``saved_copies``
    (its positions): the caller's write must not reach the backward, and must not trip the
    version check that eager, which saved no such value, would not. Overlapping views
    whose base is not returned stay as they are: writing them is refused by autograd
    rather than computed wrongly.

    Decided once per compilation, on its first call: which outputs alias what is fixed by
    the compiled graph. Mirrors: torch/_functorch/_aot_autograd/runtime_wrappers.py
    (outputs that alias intermediates are regenerated from their base), in the small."""
    tensors = [(i, o) for i, o in enumerate(outputs) if isinstance(o, torch.Tensor)]
    of_inputs: dict[int, int] = {}
    for k, x in enumerate(inputs):
        key = storage_key(x)
        if key is not None and (key not in of_inputs or not x._is_view()):
            of_inputs[key] = k     # (a view of another input only when no base is one)
    by_storage: dict[int, list[tuple[int, torch.Tensor]]] = {}
    for i, o in tensors:
        key = storage_key(o)
        if key is not None:
            by_storage.setdefault(key, []).append((i, o))
    detach: list[int] = []
    regenerate: list[tuple] = []
    handed_out: set[int] = set()
    for key, group in by_storage.items():
        views = [(i, o) for i, o in group if o._is_view()]
        if not views:
            continue
        bases = [(i, o) for i, o in group if not o._is_view()]
        if key in of_inputs:
            # (as_strided keeps its base's dtype: a view of another dtype, view_as_complex
            # or .view(torch.int32), stays the Function's output, which autograd keeps from
            # being written)
            base = inputs[of_inputs[key]]
            regenerate += [(i, True, of_inputs[key]) for i, o in views
                           if o.dtype == base.dtype]
        elif len(group) == 1 or not _any_overlap([o for _, o in group]):
            detach += [i for i, _ in views]
        elif len(bases) == 1 and all(o._base is bases[0][1] and o.dtype == bases[0][1].dtype
                                     for _, o in views):
            regenerate += [(i, False, bases[0][0]) for i, _ in views]
        else:
            continue
        handed_out.add(key)
    saved_copies = frozenset(k for k, v in enumerate(saved) if storage_key(v) in handed_out)
    return tuple(detach), tuple(regenerate), saved_copies


_MAX_TALLY = 1 << 24


def _self_overlaps(v: torch.Tensor) -> bool:
    """Might two indices of ``v`` name one element (a stride 0, an ``as_strided``)?"""
    dims = sorted((st, n) for n, st in zip(v.shape, v.stride()) if n > 1)
    reach = 0
    for st, n in dims:
        if st <= reach:
            return True
        reach += st * (n - 1)
    return False


def _any_overlap(views: list[torch.Tensor]) -> bool:
    """Do two of ``views`` (of one storage) share an element, or one its own (an
    ``expand``)? Once per compilation: views whose spans of memory are apart do not;
    otherwise each view adds one to the offsets of its elements in a tally over the
    storage's extent -- or, past ``_MAX_TALLY`` elements, they are taken to overlap (kept
    as views: a write is refused, never wrong)."""
    views = [v for v in views if v.numel()]
    spans = sorted((v.storage_offset(), v.storage_offset() + sum(
        (n - 1) * st for n, st in zip(v.shape, v.stride()))) for v in views)
    if all(spans[k][1] < spans[k + 1][0] for k in range(len(spans) - 1)) and \
            all(not v._is_view() or not _self_overlaps(v) for v in views):
        return False
    extent = int(max((end for _, end in spans), default=-1)) + 1
    if extent > _MAX_TALLY:
        return True
    tally = torch.zeros(extent, dtype=torch.int32)
    for v in views:
        offsets = torch.arange(extent).as_strided(v.shape, v.stride(), v.storage_offset())
        tally.index_add_(0, offsets.flatten(), torch.ones(v.numel(), dtype=torch.int32))
    return bool((tally > 1).any())


# ``autograd.Function.apply`` is Python: it binds default arguments for classes with a
# ``setup_context`` and passes every argument through functorch's ``unwrap_dead_wrappers``
# (a dozen Python-level calls per training step), then calls the C++ apply
# (THPFunction_apply). Outside functorch transforms the per-call path calls that directly.
_c_apply = torch._C._FunctionBase.__dict__["apply"].__get__(None, _AOTFunction)
_functorch_active = torch._C._are_functorch_transforms_active


def _apply(art: CompiledArtifacts, *inputs: torch.Tensor) -> tuple:
    """``_AOTFunction.apply(art, *inputs)``, through the C++ apply when no functorch
    transform (``vmap``, ``grad``...) is active; inputs no gradient reaches detached
    (:attr:`JointGraph.unreached`)."""
    assert art.joint is not None
    unreached = art.joint.unreached
    given = inputs
    if unreached:
        inputs = tuple(x.detach() if i in unreached else x for i, x in enumerate(inputs))
    outs = _AOTFunction.apply(art, *inputs) if _functorch_active() else \
        _c_apply(art, *inputs)
    if art.regenerated_views:   # views of an input or output, remade outside the Function
        outs = list(outs)
        for i, from_input, j in art.regenerated_views:
            view = outs[i]
            outs[i] = (given if from_input else outs)[j].as_strided(
                view.shape, view.stride(), view.storage_offset())
        outs = tuple(outs)
    return outs


# ---------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------

_PRIM_VIEWS = frozenset(PRIMS[name] for name in ("reshape", "permute", "expand", "squeeze",
                                                 "unsqueeze", "slice"))


def _eager_aliases_input(node: Any) -> bool:
    """Did eager's result at ``node`` (of the traced, functional graph) share an input's
    memory? An input itself, or a chain of views the tracer saw alias their input."""
    while isinstance(node, Node):
        if node.op == "placeholder":
            return True
        if not node.meta.get("aliases_input") or not node.args:
            return False
        node = node.args[0]
    return False


def _prim_view_of_input(node: Any) -> bool:
    """Is ``node`` (of the prim graph) views of an input, with no computation between?"""
    if not (isinstance(node, Node) and node.target in _PRIM_VIEWS):
        return False   # (an input itself: _outputs_to_copy copies it at run time)
    while isinstance(node, Node) and node.target in _PRIM_VIEWS:
        node = node.args[0]
    return isinstance(node, Node) and node.op == "placeholder"


def fresh_outputs(functional: FunctionalGraph, prim_graph: Graph) -> Graph:
    """``prim_graph`` with a copy before each user output that eager makes a tensor of its
    own but the prims leave a view of an input, or that eager made contiguous and the prims
    leave a view. Decompositions treat ``clone`` and ``contiguous`` as the value they copy
    (inside a graph a copy is the same value), so ``return x.t().clone()`` returned a view
    of ``x`` -- a write into the result wrote into the caller's tensor -- and
    ``return h.transpose(1, 2).contiguous()`` a transposed view, which the caller's
    ``.view(...)`` refused. (The tracer records a ``contiguous`` only where eager copied.)
    The copy is a ``convert_element_type`` to the same dtype: a pointwise op, so the
    compiled graph writes a new, contiguous tensor."""
    f_outs = functional.graph.output_node.args[0]
    p_outs = prim_graph.output_node.args[0]
    if isinstance(f_outs, Node):   # (a single result)
        f_outs = (f_outs,)
    if not isinstance(f_outs, (tuple, list)) or not isinstance(p_outs, (tuple, list)):
        return prim_graph
    convert = PRIMS["convert_element_type"]
    changed = list(p_outs)
    for i in range(min(functional.num_user_outputs, len(f_outs), len(p_outs))):
        f, out = f_outs[i], p_outs[i]
        meta = out.meta.get("tensor_meta") if isinstance(out, Node) else None
        if not isinstance(meta, TensorMeta) or not isinstance(f, Node):
            continue
        wants_contiguous = f.op == "call_method" and f.target == "contiguous" and \
            out.target in _PRIM_VIEWS
        if not (wants_contiguous or
                (_prim_view_of_input(out) and not _eager_aliases_input(f))):
            continue
        with prim_graph.inserting_before(prim_graph.output_node), prim_graph.nodes_from(out):
            copy = prim_graph.call_function(convert, (out, meta.dtype))
        copy.meta["tensor_meta"] = TensorMeta(meta.shape, meta.dtype, meta.device,
                                              contiguous_strides(meta.shape),
                                              meta.requires_grad)
        changed[i] = copy
    if changed != list(p_outs):
        prim_graph.output_node.args = (type(p_outs)(changed),)
    return prim_graph


def transpose_matmul_results(gm: GraphModule) -> GraphModule:
    """``permute(matmul(a, b), <swap the last two dims>)`` -> ``matmul(bᵀ, aᵀ)``.

    The VJP of ``x @ w.t()`` gives the weight's gradient as the transpose of a matmul
    result: a non-contiguous tensor, which autograd's ``AccumulateGrad`` then copies to the
    parameter's layout on every step. Multiplying in the other order gives the same values
    already laid out like the parameter. Returns ``gm`` itself when nothing matches, else a
    new GraphModule (the partition's graph, shown in notebooks, is left as it was)."""
    permute, matmul = PRIMS["permute"], PRIMS["matmul"]

    def matches(node: Node) -> bool:
        if node.op != "call_function" or node.target is not permute:
            return False
        src, perm = node.args[0], tuple(node.args[1])
        if not (isinstance(src, Node) and src.target is matmul and len(src.users) == 1):
            return False
        nd = len(perm)
        metas = [getattr(v, "meta", {}).get("tensor_meta") for v in (src, *src.args[:2])]
        return nd >= 2 and perm == (*range(nd - 2), nd - 1, nd - 2) and all(
            m is not None and hasattr(m, "shape") and len(m.shape) == nd for m in metas)

    if not any(matches(n) for n in gm.graph.nodes):
        return gm
    graph = gm.graph.copy("transpose_matmul_results")
    for node in list(graph.nodes):
        if not matches(node):
            continue
        src, perm = node.args[0], tuple(node.args[1])
        a, b = src.args[:2]
        with graph.inserting_before(node):
            bt = graph.call_function(permute, (b, perm))
            at = graph.call_function(permute, (a, perm))
            product = graph.call_function(matmul, (bt, at))
        for new, like in ((bt, b), (at, a)):
            new.meta["tensor_meta"] = _permuted_meta(like.meta["tensor_meta"], perm)
        out = node.meta["tensor_meta"]
        product.meta["tensor_meta"] = TensorMeta(
            out.shape, out.dtype, out.device, contiguous_strides(out.shape), out.requires_grad)
        node.replace_all_uses_with(product)
        graph.erase_node(node)
        graph.erase_node(src)
    return GraphModule({}, graph, type(gm).__name__)


def _permuted_meta(meta: TensorMeta, perm: tuple) -> TensorMeta:
    return TensorMeta(as_shape(meta.shape[p] for p in perm), meta.dtype, meta.device,
                      tuple(meta.stride[p] for p in perm), meta.requires_grad)


def _is_tensor_value(value: Any) -> bool:
    """Does this output of a forward graph hold a tensor (as its shape propagation says)?"""
    meta = value.meta.get("tensor_meta") if isinstance(value, Node) else None
    return meta is not None and hasattr(meta, "shape")


def _prepare(gm: GraphModule) -> tuple[GraphModule, list]:
    gm = inline_modules(gm)
    if not any(n.op == "get_attr" for n in gm.graph.nodes):
        return gm, []
    graph, _, values = lift_attributes(gm)
    return GraphModule({}, graph, type(gm).__name__), values


def aot_graph(gm: GraphModule, fw_compiler: Callable = _identity_compiler,
              bw_compiler: Callable | None = None, partition_fn: Callable = default_partition,
              decompositions: dict | None = None, example_inputs: list | None = None
              ) -> AOTCompiled:
    """AOTAutograd for an already captured torch-level graph (``gm`` from our tracer or
    Dynamo). Parameters and buffers referenced by ``get_attr`` become trailing inputs, fed
    from ``gm`` on every call. With ``example_inputs`` (a backend's), the forward is compiled
    for them at once (:meth:`AOTCompiled.compile_for`); else on the first call."""
    prepared, params = _prepare(gm)
    compiled = AOTCompiled(prepared, fw_compiler, bw_compiler, partition_fn, decompositions,
                           params=params)
    if example_inputs is not None:
        compiled.compile_for(example_inputs)
    return compiled


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
    the default table :data:`~tutorcompile.aot.decomp.DECOMPOSITIONS`.
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


def aot_eager(gm: GraphModule, example_inputs: list) -> AOTCompiled:
    """The ``"aot_eager"`` backend for ``tutorcompile.compile``: AOT without decompositions,
    then run the graphs -- eager's kernels, forward and backward."""
    return aot_graph(gm, fw_compiler=eager_compiler, bw_compiler=eager_compiler,
                     decompositions={}, example_inputs=example_inputs)


def aot_eager_decomp_partition(gm: GraphModule, example_inputs: list) -> AOTCompiled:
    """The ``"aot_eager_decomp_partition"`` backend: AOT with the decompositions to prims and
    the min-cut partitioner (inductor's under ``config.partitioner = "min_cut"``), then run
    the graphs."""
    return aot_graph(gm, fw_compiler=eager_compiler, bw_compiler=eager_compiler,
                     partition_fn=kernel_min_cut_partition, example_inputs=example_inputs)


def aot_eager_backend(fx_gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """A ``torch.compile`` backend: real Dynamo's graph, our AOTAutograd.

    ``torch.compile(model, backend=aot_eager_backend)``: the ``torch.fx`` graph becomes ours
    with ``from_torch_fx``, then :func:`aot_graph` compiles it. Returns the graph's outputs
    as Dynamo expects (a tuple when the graph returns one).
    """
    gm = from_torch_fx(fx_gm, provenance="from_torch_fx (Dynamo graph)")
    return aot_graph(gm)
