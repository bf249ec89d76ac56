"""The compile entry: prim graph + example inputs -> a fast callable, and the torch.compile
backend built on it.

``compile_fx(gm, example_inputs, codegen="cpp" | "triton" | "eager")`` runs the stage. Its
spine, :func:`compile_graph`, names every pass in order: graph passes
(:data:`GRAPH_PASSES`: ``fuse_addmm`` makes a bias add ``torch.addmm``'s epilogue, ...) ->
lowering (``lowering.py``) -> scheduling and fusion (``scheduler.py``) -> one kernel per
fused group, compiled (``codegen/cpp.py`` or ``codegen/triton.py``) -> the wrapper that
calls them (``wrapper.py``), which is the whole per-call path.
The result, a :class:`CompiledGraph`, is called like the graph; it carries what a learner
wants to look at: ``output_code`` (wrapper and kernels, as source), ``fusion_report``,
``kernel_sources`` and the compile time.

Shapes, strides and dtypes are specialised: a call with inputs laid out differently compiles
again (kept per layout, so alternating layouts do not recompile every time) -- except
*symbolic sizes*. A graph AOT built for symbolic sizes (its metadata holds ``SymInt`` s: a
batch size ``s0``) is compiled once, with kernels that take the sizes as arguments and a
wrapper that reads them from its inputs; what lowering and code generation relied on is
recorded as guards in the graph's shape environment, which AOT checks before it reuses the
compilation for new sizes (Triton kernels likewise take the sizes, and the wrapper computes
their grids). A guard that already fails for the inputs being compiled for, a symbol no
input gives, or ``mode="max-autotune"`` (block sizes timed for one size) compiles for the
inputs' own sizes instead, per size, as above.

**Compile time of many graphs.** A graph's C++ kernels are built together, on a pool,
while Python goes on (``codecache.batched_builds``); ``build=`` (:data:`BUILDS`) says
whether ``compile_fx`` waits for them or the first call does. Through the torch.compile
backend a forward's first call waits; a backward's first call runs through PyTorch while
its kernels build (:class:`LazyCompiledGraph`); and a graph that is the same as one
compiled before -- a repeated block with other weights -- reuses that compilation
(``codecache.compiled_graphs``).

Backend choice when none is given: Triton on a CUDA device; else C++ if a compiler exists;
else Triton under its interpreter; else the prim graph runs eagerly. Each step down is
announced on one line.

``inductor_backend(gm, example_inputs)`` has the ``torch.compile`` backend contract (graph in,
callable out). It accepts graphs of prims, and graphs of torch-level calls, which AOT
(stage 4) decomposes into prims first; a call with no decomposition stays a PyTorch extern
call in the wrapper.

Mirrors: torch/_inductor/compile_fx.py (``compile_fx``, ``compile_fx_inner``) and
torch/_inductor/graph.py (``GraphLowering.compile_to_module``).
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

from .._logging import log_artifact, phase
from ..aot import aot_graph, default_partition, kernel_min_cut_partition
from ..aot.aot_autograd import eager_compiler
from ..cudagraphs import CUDAGraphed
from ..dynamo.backends import check_options
from ..environment import probe
from ..errors import FallbackWarning
from ..fastpath import FastPath
from ..fx import Graph, GraphModule, Node, ShapeProp, TensorMeta, exec_generated, from_torch_fx
from ..fx.passes.dce_cse import is_random
from ..fx.symbolic_shapes import ShapeEnv, SymInt, as_shape, hint_int, pycode
from ..ops import PRIMS, prims
from ..ops.table import contiguous_strides, normalize_dims
from . import codecache, config
from .autotune import AutotuneTable, autotuned_cpp_kernel, autotuned_triton_kernel
from .codecache import batched_builds, compiled_graphs, cpp_flags, cxx_compiler, graph_key
from .codegen.cpp import compile_cpp_kernel
from .codegen.triton import compile_triton_kernel, interpreted
from .codegen.triton_template import compile_template_kernel
from .ir import ComputedBuffer, InputBuffer, same_sizes
from .lowering import SymbolicLoweringError, lower_graph
from .scheduler import Scheduler
from .wrapper import WrapperCodegen, written_in_place

CODEGENS = ("cpp", "triton", "eager")

BUILDS = ("wait", "first_call", "deferred")
"""When a compilation's C++ kernels must be built: ``"wait"``, before :func:`compile_fx`
returns; ``"first_call"``, by the first call (they build in the background meanwhile: a
graph about to run); ``"deferred"``, the same, queued after every build of the other two
(a backward whose first call runs through PyTorch: see :class:`LazyCompiledGraph`)."""


def default_codegen(example_inputs: Sequence[Any]) -> str:
    """The best code generator this machine offers for these inputs (see the module
    docstring)."""
    on_cuda = any(isinstance(x, torch.Tensor) and x.is_cuda for x in example_inputs)
    env = probe()
    if on_cuda and env.has_triton:
        return "triton"
    if not on_cuda and env.has_cxx:
        return "cpp"
    if env.has_triton:
        warnings.warn("tutorcompile.inductor: no C++ compiler found (install g++); using "
                      "Triton kernels under the interpreter (slow, but correct)",
                      FallbackWarning, stacklevel=2)
        return "triton"
    warnings.warn("tutorcompile.inductor: no C++ compiler and no Triton (install g++); "
                  "running the prim graph op by op", FallbackWarning, stacklevel=2)
    return "eager"


# ---------------------------------------------------------------------------------------
# The spine of stage 5: every pass, in order
# ---------------------------------------------------------------------------------------

def compile_graph(graph: Graph, inputs: list[Any], codegen: str, *, fusion: bool = True,
                  mode: str | None = None, scheduler_cls: type | None = None,
                  fallback: Callable | None = None, build: str = "wait") -> _Variant:
    """Stage 5's spine: a prim graph, for ``inputs``, to the wrapper that runs it. Each pass
    runs in the compile phase of its name (``_logging.SPINE["inductor"]``, the order
    ``TUTORCOMPILE_LOGS=compile_times`` and ``tutorcompile.debug`` show)::

        graph_passes   GRAPH_PASSES rewrite the prim graph (none with fusion=False)
        lowering       prims -> loop-IR buffers                       (lowering.py)
        scheduling     buffers -> fused groups, one kernel each      (scheduler.py)
                       what may fuse: decided on the IR              (fusion_legality.py)
        codegen        a C++ or Triton kernel per group, building    (codegen/)
        wrapper        the Python that allocates and calls, loaded   (wrapper.py)

    then ``build`` (``build="wait"``: now; else at the first call), and the artifacts
    ``fusion``, ``output_code`` and ``autotuning`` are logged. ``fallback`` runs the inputs
    a wrapper for symbolic sizes turns away."""
    start = time.perf_counter()
    title = f"{type(graph).__name__} ({codegen})"
    with phase("inductor"):
        if codegen == "eager":
            variant = _Variant(codegen, graph)
        else:
            with phase("graph_passes"):
                graph = run_graph_passes(graph) if fusion else graph
            with phase("lowering"):
                lowering = lower_graph(graph, inputs, codegen, mode)
            with phase("scheduling"):
                scheduler = (scheduler_cls or Scheduler)(lowering, codegen).fuse(enabled=fusion)
            # (the C++ builds start together as the block ends, and run in the background)
            with phase("codegen"), batched_builds(priority=BUILDS.index(build)):
                in_place = written_in_place(scheduler)
                kernels = generate_kernels(scheduler, in_place, codegen, mode)
            with phase("wrapper"):
                wrapper = WrapperCodegen(scheduler, kernels, fallback=fallback,
                                         in_place=in_place)
                variant = _Variant(codegen, graph, scheduler, wrapper)
            if build == "wait":
                variant.wait_for_builds()
        _log_variant(variant, title)
    variant.compile_time_s = time.perf_counter() - start
    return variant


def _log_variant(variant: _Variant, title: str) -> None:
    if variant.fusion_report is not None:
        log_artifact("fusion", lambda: str(variant.fusion_report), title)
    log_artifact("output_code", lambda: variant.output_code, title)
    if variant.autotune_table.rows:
        log_artifact("autotuning", lambda: str(variant.autotune_table), title)


def run_graph_passes(graph: Graph) -> Graph:
    """Each of :data:`GRAPH_PASSES` in turn (a pass returns its graph itself when nothing
    matches, else a rewritten copy stamped with its name)."""
    for graph_pass in GRAPH_PASSES:
        graph = graph_pass(graph)
    return graph


def generate_kernels(scheduler: Scheduler, in_place: dict[str, int], codegen: str,
                     mode: str | None) -> dict[str, tuple]:
    """A compiled kernel per fused group that is not a PyTorch call, by group name: a Triton
    matmul template where max-autotune chose one, else the group's plan written in C++ or
    Triton. An output stored into the input it is the new value of (``in_place``) is marked
    aliased in its plan: the kernel sees the same memory under two arguments."""
    compile_kernel = _kernel_compiler(codegen, mode, scheduler.lowering.autotune_table)
    graph_inputs = scheduler.lowering.graph_inputs
    aliased = {name: cast(InputBuffer, graph_inputs[i]).name for name, i in in_place.items()}

    def plan(group):
        plan = scheduler.plan(group.buffers)
        plan.aliased = frozenset(x for b in group.buffers if b.name in aliased
                                 for x in (b.name, aliased[b.name]))
        return plan
    return {group.name: compile_template_kernel(cast(list[ComputedBuffer], group.buffers),
                                                scheduler.stored_names(group.buffers),
                                                group.name)
            if group.is_template else compile_kernel(plan(group), group.name)
            for group in scheduler.groups if not group.is_extern}


class CompiledGraph:
    """A compiled prim graph; call it like the graph. See ``output_code`` and
    ``fusion_report``. Its ``_variants`` (one per input layout) are the third of the
    compiler's caches (``tutorcompile/_caches.py``)."""

    def __init__(self, graph: Graph, example_inputs: Sequence[Any], codegen: str,
                 fusion: bool = True, mode: str | None = None, scheduler_cls: type = Scheduler,
                 build: str = "wait"):
        self.graph = graph
        self.codegen = codegen
        self.fusion = fusion
        self.mode = mode
        self.scheduler_cls = scheduler_cls
        self._variants: dict[tuple, _Variant] = {}
        self.shape_env = graph_shape_env(graph)
        self.symbolic: _Variant | None = None   # the variant for every size, if one was made
        self._current = self._compile(list(example_inputs), build=build)

    @staticmethod
    def _key(inputs: Sequence[Any]) -> tuple:
        return tuple((x.shape, x.stride(), x.dtype, x.device)
                     if isinstance(x, torch.Tensor) else type(x) for x in inputs)

    def _compile(self, inputs: list[Any], symbolic: bool = True, build: str = "first_call"
                 ) -> _Variant:
        variant = None
        if symbolic and self.shape_env is not None and self.codegen in ("cpp", "triton") \
                and self.mode is None:
            variant = self._compile_symbolic(inputs, build)
        if variant is None:
            graph = self.graph if self.shape_env is None else static_graph(self.graph, inputs)
            variant = compile_graph(graph, inputs, self.codegen, fusion=self.fusion,
                                    mode=self.mode, scheduler_cls=self.scheduler_cls,
                                    build=build)
            self._variants[self._key(inputs)] = variant
        return variant

    def _compile_symbolic(self, inputs: list[Any], build: str) -> _Variant | None:
        """The variant for every size, or None when it cannot be made for these inputs."""
        env = self.shape_env
        assert env is not None   # (called for a graph with symbolic sizes)
        before = len(env.guards)
        try:
            variant = compile_graph(self.graph, inputs, self.codegen, fusion=self.fusion,
                                    mode=self.mode, scheduler_cls=self.scheduler_cls,
                                    fallback=self._call_static, build=build)
        except SymbolicLoweringError as e:
            why = str(e)
            log_artifact("recompiles", lambda: f"inductor: symbolic sizes not kept ({why}); "
                         "compiling for each size", type(self.graph).__name__)
            return None
        # what this compilation relied on must hold for the inputs it is compiled for (the
        # shape environment's hints are another call's sizes)
        values = {sym: inputs[i] if d is None else inputs[i].shape[d]
                  for sym, (i, d) in variant.size_sources.items()}
        failed = next((g for g in env.guards[before:]
                       if not bool(g.expr.xreplace(values))), None)
        if failed is not None:
            log_artifact("recompiles", lambda: f"inductor: guard {failed} fails for the "
                         "inputs compiled for; compiling for each size",
                         type(self.graph).__name__)
            return None
        if len(env.guards) > before:
            # AOT may already have matched other sizes to this graph before these guards
            # existed (a backward is compiled at the first backward): check them per call
            variant.run = _guarded(variant.run, env.guards[before:], variant.size_sources,
                                   self._call_static)
        self.symbolic = variant
        return variant

    def __call__(self, *inputs: Any) -> Any:
        if self.symbolic is not None:   # (AOT checked the guards of the shape environment)
            return self.symbolic.run(*inputs)
        return self._call_static(*inputs)

    def _call_static(self, *inputs: Any) -> Any:
        """Run the variant compiled for these inputs' sizes and layout (compiled now if
        new)."""
        key = self._key(inputs)
        variant = self._variants.get(key)
        if variant is None:
            variant = self._compile(list(inputs), symbolic=False)
        self._current = variant
        return variant.run(*inputs)

    @property
    def building(self) -> bool:
        """Would a call wait for the C++ compiler?"""
        return bool(self._current._unbound)

    def wait_for_builds(self) -> None:
        """Wait for the C++ builds of the kernels compiled so far (a call does it anyway)."""
        for variant in (*self._variants.values(), self.symbolic):
            if variant is not None:
                variant.wait_for_builds()

    # what the most recent variant made (the one compiled for the example inputs at first)
    @property
    def output_code(self) -> str:
        return self._current.output_code

    @property
    def wrapper_code(self) -> str:
        return self._current.wrapper_code

    @property
    def fusion_report(self):
        return self._current.fusion_report

    @property
    def kernel_sources(self) -> dict[str, str]:
        return self._current.kernel_sources

    @property
    def autotune_table(self):
        """``mode="max-autotune"``'s choices between algorithms (matmul: PyTorch or a
        Triton template) with their timings: an :class:`~.autotune.AutotuneTable`."""
        return self._current.autotune_table

    @property
    def compile_time_s(self) -> float:
        return self._current.compile_time_s

    @property
    def num_kernels(self) -> int:
        return len(self._current.kernel_sources)

    @property
    def scheduler(self):
        return self._current.scheduler


class _Variant:
    """One specialisation of a CompiledGraph (fixed shapes, strides, dtypes): the wrapper
    :func:`compile_graph` generated, loaded (``run`` is its ``call``), with what a reader
    looks at (``output_code``, ``fusion_report``, ``kernel_sources``). Without a wrapper
    (``codegen="eager"``) it runs the prim graph op by op.

    Until its C++ kernels are built (see :data:`BUILDS`), the wrapper's global for each
    kernel still building is a stand-in: the first call of any of them waits for them all
    (the compile phase ``build``) and binds the kernels themselves, so later calls go
    straight to them."""

    def __init__(self, codegen: str, graph: Graph, scheduler: Scheduler | None = None,
                 wrapper: WrapperCodegen | None = None):
        self.codegen = codegen
        self.kernel_sources: dict[str, str] = {}
        self.fusion_report = None
        self.scheduler = scheduler
        self.size_sources: dict = {}
        self._namespace: dict[str, Any] = {}
        self._unbound: dict[str, Any] = {}   # wrapper global -> a kernel still building
        self.autotune_table = AutotuneTable()
        self.compile_time_s = 0.0   # (compile_graph times the whole spine)
        self.run: Callable[..., Any]
        if scheduler is None or wrapper is None:
            self.run = GraphModule({}, graph)
            self.wrapper_code = self.run.code
            self.output_code = "# codegen='eager': the prim graph runs op by op\n" + \
                self.wrapper_code
            return
        self.autotune_table = scheduler.lowering.autotune_table
        self.size_sources = scheduler.lowering.size_sources
        self.fusion_report = scheduler.report
        self.wrapper_code = wrapper.generate()
        self.kernel_sources = wrapper.kernel_sources
        namespace = self._namespace = dict(wrapper.globals)
        for name, call in wrapper.kernel_globals.items():
            if getattr(call, "building", False):
                self._unbound[name] = call
                namespace[name] = self._bind_on_first_call(name)
            else:
                namespace[name] = call.launcher
        exec_generated(self.wrapper_code, "inductor wrapper", namespace)
        # the wrapper returns the graph's outputs in their structure: it *is* the call
        self.run = namespace["call"]
        sections = [f"# tutorcompile output code (codegen={codegen!r}, "
                    f"{len(self.kernel_sources)} kernels)"]
        if codegen == "cpp" and self.kernel_sources:
            sections[0] += f"\n# C++ built with: {cxx_compiler()[1]} {' '.join(cpp_flags())}"
        for name, src in self.kernel_sources.items():
            sections.append(f"# ---- kernel {name} ----\n{src}")
        if self.autotune_table.rows:
            sections.append("# ---- max-autotune ----\n" + "\n".join(
                f"# {line}" for line in str(self.autotune_table).splitlines()))
        sections.append("# ---- wrapper ----\n" + wrapper.bound_globals() + "\n" +
                        self.wrapper_code)
        self.output_code = "\n\n".join(sections)

    def _bind_on_first_call(self, name: str) -> Callable:
        def first_call(*args: Any) -> Any:
            self.wait_for_builds()
            return self._namespace[name](*args)
        return first_call

    def wait_for_builds(self) -> None:
        """Bind each kernel still building to its launcher, once built (raises if a build
        failed)."""
        if not self._unbound:
            return
        with phase("build"):
            for name, call in list(self._unbound.items()):
                self._namespace[name] = call.launcher
        self._unbound = {}

    def __call__(self, *inputs: Any) -> Any:
        return self.run(*inputs)


def _guarded(run: Callable, guards: list, size_sources: dict, otherwise: Callable
             ) -> Callable:
    """``run`` for inputs whose sizes pass ``guards``, ``otherwise`` for the rest."""
    symbols = list(size_sources)
    check = eval(f"lambda {', '.join(map(str, symbols))}: "
                 + " and ".join(f"({pycode(g.expr)})" for g in guards), {"math": math})
    where = [size_sources[s] for s in symbols]

    def guarded_run(*inputs: Any) -> Any:
        values = [inputs[i] if d is None else inputs[i].shape[d] for i, d in where]
        return run(*inputs) if check(*values) else otherwise(*inputs)
    return guarded_run


def graph_shape_env(graph: Graph) -> ShapeEnv | None:
    """The shape environment of a graph built for symbolic sizes (None: sizes are static)."""
    for node in graph.placeholders:
        meta = node.meta.get("tensor_meta")
        for size in (node.meta.get("sym"), *getattr(meta, "shape", ())):
            if isinstance(size, SymInt):
                return size.shape_env
    return None


def static_graph(graph: Graph, inputs: Sequence[Any]) -> Graph:
    """A copy of a graph for symbolic sizes with the sizes of ``inputs`` in its metadata
    (a size node's ``meta["sym"]`` becomes the int it computes)."""
    graph = graph.copy()

    class SizeProp(ShapeProp):
        def run_node(self, node: Node) -> Any:
            result = super().run_node(node)
            if "sym" in node.meta:
                node.meta["sym"] = result
            return result

    SizeProp(GraphModule({}, graph)).propagate(*inputs)
    return graph


def fuse_addmm(graph: Graph) -> Graph:
    """``add(matmul(a, w), bias)`` -> ``torch.addmm(bias, a, w)``: the bias add becomes the
    matmul's epilogue, done by BLAS while it writes the product, instead of a kernel that
    reads the product back (a 3-d ``a`` is flattened to 2-d around the call, as
    ``nn.Linear`` does). Only when the product has no other reader, the bias is 1-d of the
    product's last size, and the dtypes agree. Returns ``graph`` itself if nothing matches,
    else a rewritten copy (stamped ``fuse_addmm``).

    Mirrors: the ``addmm`` pattern of torch/_inductor/fx_passes/post_grad.py."""
    add, matmul, reshape = PRIMS["add"], PRIMS["matmul"], PRIMS["reshape"]

    def match(node):
        if node.op != "call_function" or node.target is not add or node.kwargs \
                or len(node.args) != 2:
            return None
        for mm, bias in (node.args, node.args[::-1]):
            if not (isinstance(mm, Node) and mm.target is matmul and len(mm.users) == 1
                    and isinstance(bias, Node)):
                continue
            a, w = mm.args[:2]
            metas = [getattr(v, "meta", {}).get("tensor_meta") for v in (node, mm, a, w, bias)]
            if any(m is None or not hasattr(m, "shape") for m in metas):
                continue
            out, _, ma, mw, mb = metas
            if (len(mw.shape) == 2 and len(ma.shape) in (2, 3) and len(mb.shape) == 1
                    and same_sizes((mb.shape[0],), (mw.shape[1],))
                    and same_sizes(out.shape, metas[1].shape)
                    and len({out.dtype, ma.dtype, mw.dtype, mb.dtype}) == 1
                    and out.dtype.is_floating_point):
                return mm, a, w, bias
        return None

    if not any(match(n) for n in graph.nodes):
        return graph
    graph = graph.copy("fuse_addmm")
    for node in list(graph.nodes):
        found = match(node)
        if found is None:
            continue
        mm, a, w, bias = found
        out = node.meta["tensor_meta"]
        a_meta = a.meta["tensor_meta"]
        with graph.inserting_before(node):
            if len(a_meta.shape) == 3:
                flat_shape = (a_meta.shape[0] * a_meta.shape[1], a_meta.shape[2])
                a = graph.call_function(reshape, (a, flat_shape))
                a.meta["tensor_meta"] = _meta(flat_shape, a_meta)
            product = graph.call_function(torch.addmm, (bias, a, w))
            flat_out = (a.meta["tensor_meta"].shape[0], out.shape[-1])
            product.meta["tensor_meta"] = _meta(flat_out, out)
            if len(out.shape) == 3:
                product = graph.call_function(reshape, (product, tuple(out.shape)))
                product.meta["tensor_meta"] = _meta(tuple(out.shape), out)
        product.meta["source"] = node.meta.get("source")
        node.replace_all_uses_with(product)
        graph.erase_node(node)
        graph.erase_node(mm)
    return graph


def batch_matmuls(graph: Graph) -> Graph:
    """A ``matmul`` of batched operands as the BLAS call it is: the batch dimensions merged
    into one, ``(B, H, T, D) @ (B, H, D, T)`` -> ``reshape(matmul((B*H, T, D), (B*H, D,
    T)), (B, H, T, T))`` (the wrapper calls ``torch.bmm``), and a batched ``a`` times a
    matrix as one matrix product, ``(B, T, C) @ (C, N)`` -> ``(B*T, C) @ (C, N)``
    (``torch.mm``). ``torch.matmul`` does the same inside, on every call: expands, reshapes
    and a view around the product, and a copy of each operand whose batch dimensions do not
    merge (attention's heads, split off a ``(B, T, H*D)`` projection and moved before
    ``T``). Here the merge is in the graph, so lowering sees the operand as a 3-d view and
    copies it, where it must, in a kernel of ours (``lowering.py``, ``matrix_operand``):
    once per graph, however many products read it, and in the producer's loop where it
    fuses.

    An operand that is a transpose of the last two dimensions (``k.transpose(-2, -1)``) is
    merged before the transpose, ``permute(reshape(k, (B*H, T, D)), (0, 2, 1))``, so that
    ``k`` and its transpose (the forward's ``q @ kᵀ`` and the backward's ``g @ k``) are one
    3-d view, copied once; BLAS reads either orientation. Only static sizes and batch
    dimensions that match (no broadcasting). Returns ``graph`` itself if nothing matches,
    else a rewritten copy (stamped ``batch_matmuls``).

    Mirrors: the ``bmm``/``mm`` decomposition of ``aten.matmul`` (torch/_decomp), and
    Inductor's lowering of ``bmm`` on views it can reinterpret."""
    matmul, permute, reshape = PRIMS["matmul"], PRIMS["permute"], PRIMS["reshape"]

    def shape_of(v):
        meta = v.meta.get("tensor_meta") if isinstance(v, Node) else None
        shape = getattr(meta, "shape", None)
        return None if shape is None or not all(isinstance(s, int) for s in shape) \
            else tuple(shape)

    def match(node):
        if node.op != "call_function" or node.target is not matmul or node.kwargs or \
                len(node.args) != 2 or shape_of(node) is None:
            return None
        a, b = node.args
        sa, sb = shape_of(a), shape_of(b)
        if sa is None or sb is None or len(sa) < 3 or not (
                len(sb) == 2 or (len(sb) == len(sa) and sa[:-2] == sb[:-2])):
            return None
        if len(sa) == 3 and len(sb) == 3:
            return None          # already what the BLAS call takes
        return a, b, sa, sb

    if not any(match(n) for n in graph.nodes):
        return graph
    graph = graph.copy("batch_matmuls")
    merged: dict[tuple, Node] = {}

    def add(target, args, shape, like, source):
        node = graph.call_function(target, args)
        node.meta["tensor_meta"] = _meta(shape, like)
        node.meta["source"] = source
        return node

    def operand(x: Node, rows: int, source) -> Node:
        """``x`` (``(*batch, m, k)``) as ``(rows, m, k)``, or ``(rows * m, k)`` for
        ``rows=0``; a transposed ``x`` is merged before its transpose."""
        shape, like = shape_of(x), x.meta["tensor_meta"]
        root, dims = x, tuple(range(len(shape)))
        while isinstance(root, Node) and root.op == "call_function" and \
                root.target is permute and not root.kwargs:
            own = tuple(int(d) % len(shape) for d in root.args[1])
            dims = tuple(own[d] for d in dims)
            root = root.args[0]
        transposed = rows and dims[-2] > dims[-1]
        if transposed:
            dims = (*dims[:-2], dims[-1], dims[-2])
        inner = shape[:-2] + ((shape[-1], shape[-2]) if transposed else shape[-2:])
        flat = (rows, *inner[-2:]) if rows else (math.prod(inner[:-1]), inner[-1])
        key = (root, dims, flat)
        if key not in merged:
            # the graph's own permute where it has one: the saved value a training
            # forward hands its backward may be that very view (lowering.py reads it from
            # the operand's copy)
            base = root if dims == tuple(range(len(dims))) else next(
                (u for u in root.users if u in before and u.target is permute and
                 not u.kwargs and tuple(int(d) % len(dims) for d in u.args[1]) == dims),
                None) or add(permute, (root, dims), inner, like, source)
            merged[key] = add(reshape, (base, flat), flat, like, source)
        if not transposed:
            return merged[key]
        return add(permute, (merged[key], (0, 2, 1)), (rows, *shape[-2:]), like, source)

    before: set[Node] = set()          # the nodes above the one rewritten (usable there)
    for node in list(graph.nodes):
        found = match(node)
        before.add(node)
        if found is None:
            continue
        a, b, sa, sb = found
        out, source = node.meta["tensor_meta"], node.meta.get("source")
        with graph.inserting_before(node):
            if len(sb) == 2:                           # a matrix: one matrix product
                product_shape: tuple = (math.prod(sa[:-1]), sb[-1])
                args = (operand(a, 0, source), b)
            else:
                rows = math.prod(sa[:-2])
                product_shape = (rows, sa[-2], sb[-1])
                args = (operand(a, rows, source), operand(b, rows, source))
            product = add(matmul, args, product_shape, out, source)
            result = add(reshape, (product, tuple(out.shape)), tuple(out.shape), out, source)
        node.replace_all_uses_with(result)
        graph.erase_node(node)
    return graph


def _conv_grad_args(node: Node) -> dict | None:
    """The arguments of a convolution gradient prim by name (its reference's parameters:
    ``g``, ``weight`` or ``x``, ``input_shape`` or ``weight_shape``, ``stride``...), defaults
    filled in; None if they do not bind."""
    try:
        bound = inspect.signature(node.target.reference).bind(*node.args, **node.kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return dict(bound.arguments)


_CONV_SETTINGS = ("stride", "padding", "dilation", "groups")


def fuse_convolution_backward(graph: Graph) -> Graph:
    """A convolution's input gradient and weight gradient (two prims, so that either can be
    left out) -> one ``aten.convolution_backward`` call that computes both, as eager's
    autograd does. PyTorch prepares the weight and the gradient for each call (on CPU a
    1x1 convolution's backward copies its weight transposed): called once per gradient, a
    ConvNeXt training step spent 40% more in ``_slow_conv2d_backward`` than eager. Pairs
    match on the same gradient ``g`` and the same stride, padding, dilation and groups.
    Returns ``graph`` itself if no pair is found, else a rewritten copy."""
    names = ("convolution_backward_input", "convolution_backward_weight")
    grad_prims = tuple(PRIMS[n] for n in names if n in PRIMS)
    if len(grad_prims) != 2:
        return graph

    def pairs(g: Graph) -> list[tuple[Node, Node, dict, dict]]:
        weight_grads: dict[tuple, list[tuple[Node, dict]]] = {}
        for node in g.nodes:
            if node.op == "call_function" and node.target is grad_prims[1]:
                args = _conv_grad_args(node)
                if args is not None:
                    key = (args["g"], str([args[k] for k in _CONV_SETTINGS]))
                    weight_grads.setdefault(key, []).append((node, args))
        found = []
        for node in g.nodes:
            if node.op != "call_function" or node.target is not grad_prims[0]:
                continue
            args = _conv_grad_args(node)
            if args is None or not all(isinstance(s, int) for s in args["input_shape"]):
                continue
            candidates = weight_grads.get((args["g"], str([args[k] for k in _CONV_SETTINGS])))
            for i, (other, other_args) in enumerate(candidates or []):
                assert candidates is not None
                x, w = other_args["x"], args["weight"]
                if all(isinstance(v, Node) and hasattr(v.meta.get("tensor_meta"), "shape")
                       for v in (x, w)) \
                        and tuple(x.meta["tensor_meta"].shape) == tuple(args["input_shape"]) \
                        and tuple(w.meta["tensor_meta"].shape) == \
                        tuple(other_args["weight_shape"]):
                    found.append((node, other, args, other_args))
                    del candidates[i]
                    break
        return found

    if not pairs(graph):
        return graph
    graph = graph.copy("fuse_convolution_backward")
    order = {n: i for i, n in enumerate(graph.nodes)}
    replaced: dict[Node, Node] = {}   # a gradient paired already -> its getitem
    for grad_x, grad_w, args, w_args in pairs(graph):
        n = len(args["input_shape"]) - 2
        stride, padding, dilation = (prims._tuple(args[k], n)
                                     for k in ("stride", "padding", "dilation"))
        # (one layer's input gradient is the gradient of the layer before: paired already)
        g, x, weight = (replaced.get(v, v) for v in (args["g"], w_args["x"], args["weight"]))
        # The call goes where the later of the two stood, where its operands exist (an input
        # the backward recomputes comes just before the weight gradient); the sort below
        # moves it up before the input gradient's first reader.
        with graph.inserting_before(max(grad_x, grad_w, key=order.__getitem__)):
            both = graph.call_function(torch.ops.aten.convolution_backward.default, (
                g, x, weight, None, stride, padding, dilation,
                False, (0,) * n, args["groups"], [True, True, False]))
            both.meta["tensor_meta"] = (grad_x.meta["tensor_meta"],
                                        grad_w.meta["tensor_meta"], None)
            both.meta["source"] = grad_x.meta.get("source")
            for k, old in enumerate((grad_x, grad_w)):
                item = graph.call_function(operator.getitem, (both, k))
                item.meta = dict(old.meta)
                old.replace_all_uses_with(item)
                replaced[old] = item
        graph.erase_node(grad_x)
        graph.erase_node(grad_w)
    graph.sort_topologically()
    return graph


def split_reductions(graph: Graph) -> Graph:
    """``sum``/``amax`` over dims that are not a trailing block -> two reductions: first over
    the trailing reduced dims (kept as 1s), then over the rest. A conv's bias gradient,
    ``sum(g, (0, 2, 3))`` of an ``(N, C, H, W)`` gradient, becomes ``sum(g, (2, 3))``: each
    ``(n, c)`` row is ``H*W`` contiguous elements, a loop the compiler vectorises, where one
    flat loop over ``(n, h, w)`` jumps by ``C*H*W`` every ``H*W`` elements and runs scalar
    (much of AlexNet's backward) -- then a small ``sum`` over ``n``.
    Floating-point ``sum`` and any ``amax`` (an exact regrouping; partial sums are in the
    input's dtype, so float16/bfloat16 sums are left alone). Returns ``graph`` itself if
    nothing matches, else a rewritten copy (stamped ``split_reductions``).

    Mirrors: the reduction splitting of torch/_inductor/ir.py (``Reduction.create`` with
    ``ReductionHint``), which does it inside lowering, at the loop level.
    """
    sum_, amax = PRIMS["sum"], PRIMS["amax"]

    def match(node):
        if node.op != "call_function" or node.target not in (sum_, amax):
            return None
        a = node.args[0] if node.args else node.kwargs.get("a")
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dims")
        keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        meta = getattr(a, "meta", {}).get("tensor_meta")
        if not isinstance(a, Node) or meta is None or not hasattr(meta, "shape"):
            return None
        if node.target is sum_ and meta.dtype not in (torch.float32, torch.float64):
            return None
        shape = tuple(meta.shape)
        dims = set(normalize_dims(dims, len(shape)))
        trailing = []
        for d in reversed(range(len(shape))):
            if d not in dims:
                break
            trailing.insert(0, d)
        rest = sorted(dims - set(trailing))
        if not trailing or not rest or math.prod(shape[d] for d in rest) == 1 or \
                hint_int(math.prod(shape[d] for d in trailing)) < config.reduction_split_min_inner:
            return None
        return a, meta, tuple(trailing), tuple(sorted(dims)), bool(keepdim)

    if not any(match(n) for n in graph.nodes):
        return graph
    graph = graph.copy("split_reductions")
    for node in list(graph.nodes):
        found = match(node)
        if found is None:
            continue
        a, meta, trailing, dims, keepdim = found
        with graph.inserting_before(node):
            partial = graph.call_function(node.target, (a, trailing, True))
        shape = tuple(1 if d in trailing else s for d, s in enumerate(meta.shape))
        partial.meta["tensor_meta"] = _meta(shape, node.meta["tensor_meta"])
        partial.meta["source"] = node.meta.get("source")
        # the second reduction also names the trailing dims (now 1s): the result's shape,
        # keepdim or not, is the original one
        node.args, node.kwargs = (partial, dims, keepdim), {}
    return graph


GRAPH_PASSES: tuple[Callable[[Graph], Graph], ...] = (
    fuse_addmm, batch_matmuls, fuse_convolution_backward, split_reductions)
"""The prim graph's rewrites before lowering (the spine's ``graph_passes``), in the order
they run."""


def _meta(shape: tuple, like: TensorMeta) -> TensorMeta:
    """A contiguous tensor of ``shape`` with ``like``'s dtype and device."""
    return TensorMeta(as_shape(shape), like.dtype, like.device, contiguous_strides(shape),
                      like.requires_grad)


def _kernel_compiler(codegen: str, mode: str | None, table=None) -> Callable:
    """``(plan, name) -> (call, ins, outs)`` for a code generator; under max-autotune it times
    variants, each a row of ``table``."""
    if codegen == "cpp":
        if mode == "max-autotune":
            return functools.partial(autotuned_cpp_kernel, table=table)
        return compile_cpp_kernel
    if codegen == "triton":
        if mode == "max-autotune":
            return functools.partial(autotuned_triton_kernel, table=table)
        return compile_triton_kernel
    raise ValueError(f"codegen must be one of {CODEGENS}, got {codegen!r}")


def compile_fx(gm: GraphModule | Graph | torch.fx.GraphModule, example_inputs: Sequence[Any],
               codegen: str | None = None, fusion: bool = True,
               mode: str | None = None, scheduler_cls: type | None = None,
               build: str = "wait", backend: str | None = None) -> CompiledGraph:
    """Compile a graph of prims for ``example_inputs`` (see the module docstring).

    ``codegen``: the code generator, one of :data:`CODEGENS` (default: the best this
    machine runs, :func:`default_codegen`); ``backend=`` is its old name, deprecated (a
    backend is what ``tc.compile(backend=...)`` hands the captured graph to).
    ``fusion=False`` keeps one kernel per op (to measure what fusion buys);
    ``scheduler_cls`` swaps in a :class:`~.scheduler.Scheduler` subclass (your own
    ``can_fuse``); ``mode="max-autotune"`` benchmarks kernel variants (block sizes, C++
    parallel/tiling) and, on Triton, PyTorch's matmul against a Triton matmul template
    (``CompiledGraph.autotune_table`` holds the timings). ``build``: when the C++ kernels
    must be built, one of :data:`BUILDS` (default: before this returns).
    """
    if build not in BUILDS:
        raise ValueError(f"build must be one of {BUILDS}, got {build!r}")
    if backend is not None:
        warnings.warn("tutorcompile.inductor: the option backend= is now codegen= (it picks "
                      "the code generator; a backend is what tc.compile hands graphs to)",
                      DeprecationWarning, stacklevel=2)
        if codegen is not None and codegen != backend:
            raise ValueError(f"codegen={codegen!r} and backend={backend!r} (its old name) "
                             "disagree")
        codegen = backend
    graph = _as_graph(gm)
    example_inputs = list(example_inputs)
    if any("tensor_meta" not in n.meta and "sym" not in n.meta for n in graph.nodes
           if n.op == "call_function"):   # (a size node of a symbolic graph has "sym")
        graph = graph.copy()
        ShapeProp(GraphModule({}, graph)).propagate(*example_inputs)
    if codegen is None:
        codegen = default_codegen(example_inputs)
    if codegen == "cpp" and not probe().has_cxx:
        fallback = "triton" if probe().has_triton else "eager"
        warnings.warn(f"tutorcompile.inductor: no C++ compiler found (install g++); using "
                      f"codegen={fallback!r}", FallbackWarning, stacklevel=2)
        codegen = fallback
    if codegen not in CODEGENS:
        raise ValueError(f"codegen must be one of {CODEGENS}, got {codegen!r}")
    _check_devices(codegen, example_inputs)
    return CompiledGraph(graph, example_inputs, codegen, fusion, mode,
                         scheduler_cls or Scheduler, build)


def _check_devices(codegen: str, inputs: Sequence[Any]) -> None:
    devices = {x.device.type for x in inputs if isinstance(x, torch.Tensor)}
    if codegen == "cpp" and devices - {"cpu"}:
        raise ValueError(f"codegen='cpp' runs on CPU tensors; got tensors on {sorted(devices)} "
                         "(use codegen='triton' for CUDA)")
    if codegen == "triton" and "cpu" in devices:
        if not interpreted():
            raise ValueError("codegen='triton' with CPU tensors needs the Triton interpreter "
                             "(TRITON_INTERPRET=1 before triton is imported); use "
                             "codegen='cpp' for CPU tensors")


def _as_graph(gm: Any) -> Graph:
    if isinstance(gm, Graph):
        return gm
    if isinstance(gm, GraphModule):
        return gm.graph
    if isinstance(gm, torch.fx.GraphModule):
        return from_torch_fx(gm).graph
    raise TypeError(f"compile_fx takes a Graph or GraphModule, got {type(gm).__name__}")


# ---------------------------------------------------------------------------------------
# The torch.compile backend
# ---------------------------------------------------------------------------------------

class LazyCompiledGraph(FastPath):
    """``compile_fx`` now when example inputs are given, else on the first call with that
    call's inputs as the examples.

    AOTAutograd asks for the backward's compiled form before any backward input exists, so
    the stage-4 compiler hooks (``fw_compiler`` / ``bw_compiler``) hand out one of these;
    the forward, which has example inputs, is compiled at once (its compile time is compile
    time, not the first call's), and its C++ kernels build in the background until its
    first call.

    A graph compiled at its first call (a backward) runs that call through PyTorch's ops
    -- the prims' own implementations, as ``aot_eager`` runs them -- while its kernels
    build, unless it draws random numbers (the kernels would draw others): the backward
    of the graph before it compiles meanwhile, so a model of many graphs does not wait
    for the compiler once per graph. Later calls run the kernels (waiting for any still
    building). (torch.compile's opt-in ``TORCHINDUCTOR_FX_COMPILE_MODE=async+subprocess``,
    ``_AsyncFxCompile``, runs a graph eagerly until its compiled form is ready, too.) A
    forward is not run so: its outputs' layouts would be PyTorch's, not its kernels', and
    the graph captured next, or the backward compiled for them, would be specialised to
    layouts the later calls do not have. Nor is a graph computing in 16-bit floats: the
    prims round to bfloat16/float16 after every op, where the kernels (and PyTorch's own
    fused ops) compute in float32 and round once per stored buffer, so its first gradients
    would be several times less accurate than eager's."""

    def __init__(self, gm: Any, example_inputs: Sequence[Any] | None = None, **options: Any):
        self.gm = gm
        self.options = options
        self.compiled: CompiledGraph | None = None
        if example_inputs is not None:
            self.compiled = self._compile(example_inputs, "first_call")

    def __call__(self, *args: Any) -> Any:
        if self.compiled is None:
            graph = _as_graph(self.gm)
            if any(map(is_random, graph.nodes)) or _computes_in_16_bits(graph):
                self.compiled = self._compile(args, "first_call")
            else:
                self.compiled = self._compile(args, "deferred")
                if self.compiled.building:
                    return eager_compiler(GraphModule({}, graph))(*args)
        return self.compiled(*args)

    def _compile(self, inputs: Sequence[Any], build: str) -> CompiledGraph:
        """``compile_fx``, or the compilation of the same graph made before for inputs laid
        out the same (``codecache.compiled_graphs``): its ``output_code`` names the nodes,
        and cites the source lines, of the graph it was first compiled for."""
        graph = _as_graph(self.gm)
        key = None
        if graph_shape_env(graph) is None and all("tensor_meta" in n.meta for n in
                                                  graph.nodes if n.op == "call_function"):
            options = {"codegen": None, "fusion": True, "mode": None, "scheduler_cls": None}
            options.update(self.options)
            key = graph_key(graph, inputs, (*sorted(options.items()), *config.snapshot()))
        compiled = None if key is None else compiled_graphs.get(key)
        if compiled is None:
            compiled = compile_fx(self.gm, inputs, build=build, **self.options)
            if key is not None:
                compiled_graphs[key] = compiled
        else:
            codecache.stats["graph_hits"] += 1
            log_artifact("output_code", lambda: compiled.output_code,
                         f"{type(self.gm).__name__}: the same graph as one compiled before")
        return compiled

    def direct(self) -> Callable:
        """What to call for inputs laid out as the ones compiled for: the wrapper itself,
        with no per-call key of shapes and strides. For a caller that has already matched
        the layout (AOT's cache is keyed on it); ``self`` until compiled."""
        compiled = self.compiled
        if compiled is not None and compiled.symbolic is not None:
            return compiled.symbolic.run
        if compiled is None or len(compiled._variants) != 1 or compiled.shape_env is not None:
            return self    # (a graph for symbolic sizes: each size has its own variant)
        return compiled._current.run


def _computes_in_16_bits(graph: Graph) -> bool:
    """Whether a value of ``graph`` is a float16 or bfloat16 tensor (see LazyCompiledGraph)."""
    return any(getattr(node.meta.get("tensor_meta"), "dtype", None) in (torch.float16,
                                                                      torch.bfloat16)
               for node in graph.nodes)


def inner_compiler(cudagraphs: bool = False, **options: Any) -> Callable:
    """A ``fw_compiler``/``bw_compiler`` for ``tutorcompile.aot``: prim graph -> kernels.
    It takes graphs for symbolic sizes (``supports_symbolic_shapes``): see the module
    docstring.

    ``cudagraphs=True`` (``mode="reduce-overhead"``) records each compiled forward and
    backward graph separately as a CUDA Graph, replayed on later calls.
    """
    def compiler(gm: Any, example_inputs: Any = None) -> Callable:
        compiled = LazyCompiledGraph(gm, example_inputs, **options)
        if cudagraphs:
            return CUDAGraphed(compiled, name=f"inductor {type(gm).__name__}")
        return compiled
    # CUDA Graphs record one set of sizes: those compilations stay static
    compiler.supports_symbolic_shapes = not cudagraphs  # type: ignore[attr-defined]
    return compiler


def inductor_backend(gm: Any, example_inputs: Sequence[Any], **options: Any) -> Callable:
    """A ``torch.compile``-style backend: ``torch.compile(fn, backend=inductor_backend)`` or,
    once registered as ``"inductor"``, ``tutorcompile.compile(fn)``.

    The graph goes through AOTAutograd (stage 4) -- decomposed into prims, forward and
    backward partitioned -- and each prim graph is compiled here: the forward now, for
    ``example_inputs``; the backward at the first backward. Options go to
    :func:`compile_fx` (``codegen=``, ``fusion=``, ``mode=``).
    """
    graph_module = gm
    if isinstance(gm, torch.fx.GraphModule) and not isinstance(gm, GraphModule):
        graph_module = from_torch_fx(gm)
    compiler = inner_compiler(**options)
    compiled = aot_graph(graph_module, fw_compiler=compiler, bw_compiler=compiler,
                         example_inputs=list(example_inputs), partition_fn=partitioner())

    return InductorCompiled(compiled)


PARTITIONERS = {"min_cut": kernel_min_cut_partition, "default": default_partition}


def partitioner() -> Callable:
    """The partition function ``config.partitioner`` names."""
    if config.partitioner not in PARTITIONERS:
        raise ValueError(f"inductor.config.partitioner = {config.partitioner!r}: expected one "
                         f"of {', '.join(map(repr, PARTITIONERS))}")
    return PARTITIONERS[config.partitioner]


class InductorCompiled(FastPath):
    """What :func:`inductor_backend` returns: AOT's compiled graphs (``.compiled``), called
    with the graph's inputs; Dynamo's cache entry asks it for AOT's fast path."""

    def __init__(self, compiled: Any):
        self.compiled = compiled

    def __call__(self, *args: Any) -> Any:
        return self.compiled(*args)

    def direct(self) -> Callable:
        return self.compiled.direct()

    def direct_dynamic(self) -> Callable:
        return self.compiled.direct_dynamic()


__all__ = ["CODEGENS", "GRAPH_PASSES", "CompiledGraph", "LazyCompiledGraph", "compile_fx",
           "compile_graph", "default_codegen", "inductor_backend", "inner_compiler"]


def inductor(gm: Any, example_inputs: Sequence[Any], mode: str = "default",
             options: dict | None = None) -> Callable:
    """The ``"inductor"`` backend of ``tc.compile`` (Dynamo's registry names it): our
    AOTAutograd (stage 4) and fusion compiler (stage 5), fused C++/Triton kernels.

    ``mode="max-autotune"`` tries several kernel configurations; ``"reduce-overhead"``
    records the compiled forward and backward graphs as CUDA Graphs. ``options`` go to
    :func:`compile_fx` (``codegen="cpp"|"triton"``, ``fusion=False``, ...).
    """
    devices = {t.device.type for t in example_inputs if isinstance(t, torch.Tensor)}
    if devices - {"cpu", "cuda"}:
        # meta, mps, ...: no kernel generator of ours targets them; PyTorch runs the graph
        log_artifact("fusion", f"tensors on {', '.join(sorted(devices))}: the C++ and Triton "
                     "code generators target cpu and cuda, so this graph runs in PyTorch",
                     "inductor: graph not compiled")
        return gm
    opts = dict(options or {})
    check_options("inductor", opts, inductor_options())
    if mode == "max-autotune":
        opts.setdefault("mode", "max-autotune")
    if mode == "reduce-overhead":
        opts["cudagraphs"] = True
    return inductor_backend(gm, example_inputs, **opts)


def inductor_options() -> frozenset[str]:
    """What ``options=`` may hold for ``"inductor"``: :func:`compile_fx`'s keyword arguments
    (read from its signature, so the two never drift apart), and ``cudagraphs``."""
    names = [p.name for p in inspect.signature(compile_fx).parameters.values()
             if p.default is not inspect.Parameter.empty]
    return frozenset(names) | {"cudagraphs"}


inductor.valid_options = inductor_options  # type: ignore[attr-defined]   # (read by tc.compile)
