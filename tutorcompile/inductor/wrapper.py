"""The wrapper: a readable Python function that allocates buffers and calls the kernels.

The wrapper is what runs on every call, so it does only the work: it calls PyTorch ops and
the loaded kernels directly (each bound once, at compile time, as a global of the function),
allocates outputs with their final strides, and holds no graph, no op-table dispatch and no
tree walking. Everything that does not change between calls -- sizes, strides, dtypes,
devices, grids, kernel arguments -- is written into its source as literals. Symbolic sizes
(a graph compiled once for every batch size) are the exception: the function first reads
each symbol from its inputs (``s0 = primals_1.size(0)``), then allocates with expressions in
them (``empty_strided((s0, 16), (16, 1), ...)``) and passes them to the kernels that take
them.

It is made in two steps, as in early TorchInductor:

1. **Plan** (:meth:`WrapperCodegen.plan`): one *line object* per thing the function does --
   :class:`AllocateLine`, :class:`ExternCallLine`, :class:`KernelCallLine`,
   :class:`FreeIfNotReusedLine` after a buffer's last reader (from liveness) -- then a
   *memory planning* pass: a freed buffer goes into a pool, and a later allocation of the
   same size, strides and dtype takes it instead of asking the allocator (the
   ``AllocateLine`` becomes a :class:`ReuseLine`, and the free is dropped). On a CPU, a
   large buffer no caller sees (an intermediate, a value saved for the backward) also keeps
   its memory from one call to the next (``buf = keep(slot, ...)``, :class:`KeptBuffers`,
   ``config.keep_buffers``): taken again when nothing holds it any more.
2. **Print** (:meth:`WrapperCodegen.generate`): each line writes itself.

Kernels are generated before the wrapper is planned (``compile_fx.py``); the wrapper only
asks each one how it is called (``call_source``) and names what to bind (``launcher``,
bound when it is ready: a C++ kernel may still be building): a C++ kernel is its ctypes
function, called with ``data_ptr()`` ints; a Triton kernel its launcher for a fixed grid.
Extern kernels are PyTorch calls written out as such
(``buf3 = torch.matmul(buf1, view_permute)``); a view that a PyTorch call or the caller needs
as a tensor is rebuilt with the view's PyTorch implementation. An extern's result is copied
to a contiguous layout only when one of our kernels reads it (kernels index it as
contiguous) and the call does not always make one (``addmm``, ``mm``, ``bmm`` do:
:func:`result_is_contiguous`); PyTorch calls and the caller take it as it comes.

Mirrors: torch/_inductor/codegen/wrapper.py (``PythonWrapperCodegen``, ``AllocateLine``,
``FreeIfNotReusedLine``, ``ReuseLine``, ``MemoryPlanningState``).
"""

from __future__ import annotations

import importlib
import keyword
import sys
from dataclasses import dataclass
from typing import Any, cast

import torch

from ..fx.codegen import literal
from ..fx.node import map_arg, qualified_name, tree_leaves
from ..fx.symbolic_shapes import SymInt, hint_int, pycode
from ..ops import PRIMS, Prim, prims
from . import config, ir
from .codegen.scan import GENERATED_EXTERNS
from .scheduler import Scheduler


def _layout_key(buffer: ir.Buffer) -> tuple:
    layout = buffer.layout   # (sizes as sympy expressions: comparing SymInts would guard)
    return (tuple(map(ir.size_expr, layout.size)), tuple(map(ir.size_expr, layout.stride)),
            layout.dtype, layout.device)


def size_literal(value: Any) -> str | None:
    """Python source of a size or a tuple of sizes with symbols (``(s0, 16)``); None if
    ``value`` is neither."""
    if isinstance(value, SymInt):
        return pycode(value.expr)
    return literal(value, size_literal)


# PyTorch functions whose result is always new memory, never a view of an argument (others
# -- split, getitem, reshape, dropout in eval mode... -- may return one).
FRESH_RESULTS = frozenset([
    torch.addmm, torch.matmul, torch.mm, torch.bmm, torch.softmax, torch.log_softmax,
    torch.nn.functional.softmax, torch.nn.functional.log_softmax, torch.index_select,
    torch.Tensor.masked_fill, torch.cat, torch.nn.functional.embedding,
])


def result_is_contiguous(ext: ir.ExternKernel) -> bool:
    """Does this PyTorch call always return a new row-major tensor, the layout our kernels
    index it with? Then the wrapper needs no ``.contiguous()`` after it (a C call per extern
    per call, if a cheap one). ``addmm``, ``mm`` and ``bmm`` write a fresh contiguous
    result. ``matmul`` does too, except when it may fold a 1-d or 2-d ``a`` into a batched
    ``b`` by transposing (``a @ b == (bᵀ @ aᵀ)ᵀ``, at::matmul's ``should_fold`` with
    ``transpose``): a transposed view then comes back, so that case keeps its copy."""
    if ext.multi_output:
        return False
    if ext.kernel in (torch.addmm, torch.mm, torch.bmm):
        return True
    if ext.kernel is PRIMS["matmul"] and len(ext.args) == 2 and all(
            isinstance(a, ir.IRNode) for a in ext.args):
        rank_a, rank_b = (len(a.get_size()) for a in ext.args)
        return not rank_a <= 2 < rank_b
    return False


def _permute_of_permute(view: ir.View) -> tuple[Any, tuple[int, ...]] | None:
    """A ``permute`` of a ``permute`` as one: ``(base, dims)``. A matmul's VJP transposes
    an operand the forward already transposed (``(xᵀ)ᵀ``): the wrapper then passes ``x``
    itself (``dims`` is the identity), one PyTorch call fewer per view."""
    permute = PRIMS["permute"]
    if view.node is None or view.node.target is not permute:
        return None
    dims: tuple[int, ...] | None = None
    base: ir.IRNode = view
    while isinstance(base, ir.View) and base.node is not None and base.node.target is permute:
        own = tuple(int(d) % len(base.size) for d in base.node.args[1])
        dims = own if dims is None else tuple(own[d] for d in dims)
        base = base.base
    if base is view.base or dims is None:
        return None             # a single permute: written as it is
    return base, dims


def _narrow_args(view: ir.View) -> tuple[int, int, int] | None:
    """``(dim, start, length)`` when a ``slice`` view is a ``torch.narrow`` (step 1, constant
    bounds): one PyTorch call instead of a Python function indexing with a tuple of slices,
    cheaper per view, and attention slices q, k and v out of one tensor per layer
    (benchmarks/MEASUREMENTS.md)."""
    node = view.node
    if node is None or node.target is not PRIMS["slice"] or node.kwargs:
        return None
    given = node.args[2:5]                       # (start, end, step), the rest defaulted
    start, end, step = (*given, *(None, None, 1)[len(given):])  # type: ignore[misc]
    dim = node.args[1]
    sizes = view.base.get_size()
    if step != 1 or not all(isinstance(v, int) for v in (dim, *sizes)) or \
            not all(v is None or isinstance(v, int) for v in (start, end)):
        return None
    dim %= len(sizes)
    start, stop, _ = slice(start, end).indices(sizes[dim])
    return dim, start, max(stop - start, 0)


def _at_hints(value: Any) -> Any:
    """``value`` (arguments of a view) with every SymInt replaced by its hint."""
    if isinstance(value, SymInt):
        return value.hint
    if isinstance(value, (tuple, list)):
        return type(value)(_at_hints(v) for v in value)
    if isinstance(value, dict):
        return {k: _at_hints(v) for k, v in value.items()}
    return value


def _agree(symbolic: tuple, found: tuple) -> bool:
    """Do sizes, strides and offset given as expressions equal PyTorch's at the hints?
    (A stride of a dimension of size 1 is never used, and PyTorch may choose another.)"""
    sizes, strides, offset = symbolic
    hint_sizes, hint_strides, hint_offset = found
    return tuple(map(hint_int, sizes)) == tuple(hint_sizes) and \
        hint_int(offset) == hint_offset and \
        all(hint_int(a) == b for a, b, n in zip(strides, hint_strides, hint_sizes) if n != 1)


# ---------------------------------------------------------------------------------------
# The lines of a wrapper
# ---------------------------------------------------------------------------------------

class WrapperLine:
    """One thing the wrapper does; ``codegen()`` is its source (None: nothing to print)."""

    def codegen(self) -> str | None:
        raise NotImplementedError


class KeptBuffers:
    """The memory of a wrapper's buffers that no caller sees, kept from one call to the next
    (``config.keep_buffers``): ``take(slot, ...)`` hands back the tensor the slot gave out
    last time if nothing else holds it now, else a new one (which the slot keeps).

    "Nothing else" is counted, not assumed: no Python reference but the slot's (a caller
    that kept it, a traceback), no other holder of the tensor itself (autograd's saved
    tensors hold it from C++: ``_use_count``), no view of its memory (``storage
    use count``). So a saved value the backward has not read yet, or a second call running
    while the first still holds its buffers, gets new memory, as without the pool. Only
    static sizes on a CPU are kept (CUDA's caching allocator keeps memory already).

    Mirrors: c10/cuda/CUDACachingAllocator.cpp (freed blocks kept for the next allocation
    of their size) and torch/_inductor/cudagraph_trees.py (which checks the same counts
    before it reuses a graph's memory)."""

    def __init__(self, slots: int):
        self.slots: list[torch.Tensor | None] = [None] * slots

    def take(self, slot: int, size: tuple, stride: tuple, dtype: torch.dtype,
             device: torch.device) -> torch.Tensor:
        kept = self.slots[slot]
        # references: the slot, ``kept`` and getrefcount's argument; storage: the tensor's,
        # and the one untyped_storage() makes to ask
        if kept is not None and sys.getrefcount(kept) == 3 and _use_count(kept) == 1 and \
                _storage_use_count(kept.untyped_storage()._cdata) == 2:
            return kept
        kept = self.slots[slot] = torch.empty_strided(size, stride, dtype=dtype,
                                                      device=device)
        return kept


# (private PyTorch counters, which torch/_inductor/cudagraph_trees.py reads too; without them
# nothing is kept)
_use_count: Any = getattr(torch.Tensor, "_use_count", None)
_storage_use_count: Any = getattr(torch._C, "_storage_Use_Count", None)
CAN_KEEP = _use_count is not None and _storage_use_count is not None

# ``reinterpret(buffer, size, stride, offset)``: a tensor on ``buffer``'s memory with that
# geometry (the offset added to the buffer's, 0 for ours), made in C without autograd's view
# bookkeeping (Inductor's ``reinterpret_tensor``; private to PyTorch, so looked up here)
_dynamo_guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
_reinterpret: Any = getattr(_dynamo_guards, "_reinterpret_tensor", None)


@dataclass
class CommentLine(WrapperLine):
    text: str

    def codegen(self) -> str:
        return f"# {self.text}"


@dataclass
class ExprLine(WrapperLine):
    """A statement written out as it is (a view rebuilt for a PyTorch call)."""
    text: str

    def codegen(self) -> str:
        return self.text


@dataclass
class AllocateLine(WrapperLine):
    """``buf = empty_strided(...)``: fresh memory for a kernel's output; or, with a
    ``slot``, ``buf = keep(slot, ...)``: the memory this line had last call, if free
    (:class:`KeptBuffers`)."""
    buffer: ir.Buffer
    device: str  # the name the device is bound to
    slot: int | None = None

    def codegen(self) -> str:
        layout = self.buffer.layout
        size, stride = size_literal(layout.size), size_literal(layout.stride)
        if self.slot is not None:
            return (f"{self.buffer.name} = keep({self.slot}, {size}, {stride}, "
                    f"{layout.dtype}, {self.device})")
        return (f"{self.buffer.name} = empty_strided({size}, {stride}, dtype={layout.dtype}, "
                f"device={self.device})")


@dataclass
class ReuseLine(WrapperLine):
    """``new = old``: a freed buffer of the same layout, instead of an allocation."""
    new: str
    old: str

    def codegen(self) -> str:
        return f"{self.new} = {self.old}; del {self.old}  # reuse"


@dataclass
class FreeIfNotReusedLine(WrapperLine):
    """``del buf`` after its last reader, unless memory planning handed it on."""
    name: str
    key: tuple | None  # layout key if the pool may hand it on; None: just forget it
    reused: bool = False

    def codegen(self) -> str | None:
        return None if self.reused else f"del {self.name}"


@dataclass
class ExternCallLine(WrapperLine):
    """``buf = torch.fn(args)``: a PyTorch call, made contiguous if a kernel reads it."""
    name: str
    call: str
    contiguous: bool

    def codegen(self) -> str:
        return f"{self.name} = {self.call}{'.contiguous()' if self.contiguous else ''}"


@dataclass
class KernelCallLine(WrapperLine):
    """A call of one of our kernels (its source says how: ``call_source``)."""
    text: str

    def codegen(self) -> str:
        return self.text


@dataclass
class ReturnLine(WrapperLine):
    value: str

    def codegen(self) -> str:
        return f"return {self.value}"


def written_in_place(scheduler: Scheduler) -> dict[str, int]:
    """Outputs that are the new values of graph inputs (``input_updates`` on the output
    node, from AOT: an optimizer's parameters and state, a buffer written with ``add_``),
    each mapped to the position of the input its kernel can store into directly -- no
    allocation in the wrapper and no copy back after the call, as Inductor writes mutated
    inputs. Decided before code generation (a kernel whose output is its input's memory
    must not call them ``__restrict__``), and only where it cannot change what anything
    reads:

    * the value is computed by a pointwise kernel (one loop nest: a kernel with a
      reduction loops in phases, and each phase loads its inputs again), laid out exactly
      as the input;
    * only the value's own computation reads the input, and every buffer of that kernel
      that depends on the input reads it (and the others that do) only at the element the
      loop is at: each element is read before it is written, and by no other step
      (:func:`_elementwise`);
    * no later kernel and no PyTorch call reads the input, and it is not returned, itself
      or as a view (what is returned is its old value: ``x.copy_(y.t())``, then ``y``
      written)."""
    lowering = scheduler.lowering
    updates = lowering.graph.output_node.meta.get("input_updates")
    if not updates or not isinstance(lowering.outputs, (tuple, list)):
        return {}
    groups = scheduler.groups
    group_of = {b.name: i for i, g in enumerate(groups) for b in g.buffers}
    reads = [{r for b in g.buffers for r in scheduler.reads[b.name]} for g in groups]
    # inputs returned as they are or as views: the caller reads their old values after the
    # call (x.copy_(y.t()), then y written)
    returned = {ir.base_buffer(v).name for v in tree_leaves(lowering.outputs)
                if isinstance(v, (ir.InputBuffer, ir.View))}
    found: dict[str, int] = {}
    for out_pos, in_pos in updates.items():
        value, target = lowering.outputs[out_pos], lowering.graph_inputs[in_pos]
        if not (isinstance(value, ir.ComputedBuffer) and isinstance(value.data, ir.Pointwise)
                and target is not None and value.layout == target.layout
                and value.name not in found and target.name not in returned):
            continue
        g = group_of.get(value.name)
        if g is None or groups[g].is_extern or groups[g].is_template or any(
                target.name in names for i, names in enumerate(reads)
                if i > g or groups[i].is_extern):
            continue
        if any(isinstance(b, ir.ComputedBuffer) and b.is_reduction for b in groups[g].buffers):
            continue   # (loops in phases: each phase loads what it needs again)
        if _elementwise(groups[g].buffers, value.name, value.data.ranges, target.name):
            found[value.name] = in_pos
    return found


def _elementwise(buffers: list[ir.Buffer], value: str, ranges: tuple, target: str) -> bool:
    """May the kernel of ``buffers`` store ``value`` into ``target``'s memory?

    * Only ``value``'s own computation (it, and the buffers it reads, at any depth) loads
      ``target``: the kernel loads each element of it while computing ``value``, before
      the store, and every later use of that element is the same load, reused (the code
      generators compute a load once per element). A buffer outside it that loads
      ``target`` could be computed after the store, and read the new value.
    * The buffers that depend on ``target`` (load it, or one that does) all loop over
      ``ranges``, loading ``target`` and each other only at the element the loop is at, so
      no step reads an element another step has written. The others (a step size computed
      once, fused in) read no element of it."""
    loads = {b.name: ir.loads_of(b) for b in buffers if isinstance(b, ir.ComputedBuffer)}
    if len(loads) < len(buffers):
        return False
    ancestors, todo = {value}, [value]
    while todo:
        for name, _ in loads[todo.pop()]:
            if name in loads and name not in ancestors:
                ancestors.add(name)
                todo.append(name)
    if any(n == target for name, found in loads.items() if name not in ancestors
           for n, _ in found):
        return False
    depends = {target}
    grew = True
    while grew:   # (a fixpoint: buffers need not be in the order they read each other)
        grew = False
        for name, found in loads.items():
            if name not in depends and any(n in depends for n, _ in found):
                depends.add(name)
                grew = True
    here = tuple(ir.index_symbol(f"i{k}") for k in range(len(ranges)))
    for b in buffers:
        if b.name not in depends:
            continue
        if not (isinstance(b, ir.ComputedBuffer) and isinstance(b.data, ir.Pointwise)
                and tuple(b.data.ranges) == tuple(ranges)):
            return False
        if any(n in depends and index != here for n, index in loads[b.name]):
            return False
    return True


# ---------------------------------------------------------------------------------------
# Plan, then print
# ---------------------------------------------------------------------------------------

class WrapperCodegen:
    """Build the wrapper of a scheduled graph whose kernels are compiled: ``kernels`` maps
    each kernel group's name to ``(kernel call, input buffers, output buffers)``."""

    def __init__(self, scheduler: Scheduler, kernels: dict[str, tuple], reuse: bool = True,
                 fallback: Any = None, in_place: dict[str, int] | None = None):
        self.scheduler = scheduler
        # kernel outputs stored into graph inputs: buffer name -> input position. Only what
        # the kernels were generated for (compile_fx asks written_in_place before code
        # generation: such a kernel must not call its pointers __restrict__)
        self.in_place = in_place or {}
        self.fallback = fallback   # called instead when an input's strides are not as compiled
        self.lowering = scheduler.lowering
        self.kernels = kernels
        self.reuse = reuse
        self.globals: dict[str, Any] = {"torch": torch, "empty_strided": torch.empty_strided}
        self.kernel_sources = {name: k[0].source for name, k in kernels.items()}
        # and the kernels it calls like PyTorch calls (a scan: codegen/scan.py)
        externs = [cast(ir.ExternKernel, g.buffers[0]) for g in scheduler.groups if g.is_extern]
        generated = [e.kernel for e in externs if isinstance(e.kernel, GENERATED_EXTERNS)]
        self.kernel_sources.update((k.__name__, k.source) for k in generated)
        self.view_names: dict[int, str] = {}
        # global name -> compiled kernel, whose ``launcher`` the code calls: bound by
        # compile_fx once the kernel is built (a C++ build may still be running)
        self.kernel_globals: dict[str, Any] = {}
        self.params = [self.param_name(b, i) for i, b in enumerate(self.lowering.graph_inputs)]
        self.output_views = {id(v) for v in tree_leaves(self.lowering.outputs)
                             if isinstance(v, ir.View)}
        self.lines: list[WrapperLine] = []
        self.reused = 0

    # -- names bound once, at compile time ------------------------------------------------
    def bind(self, preferred: str, value: Any, share: bool = True) -> str:
        """A global name for ``value`` (with ``share``, the same name again for the same
        object; kernels keep their own names even when identical layers share one build)."""
        for name, known in self.globals.items():
            if share and known is value and name != "torch":
                return name
        taken = set(self.params) | set(self.scheduler.by_name) | set(self.globals)
        name, n = preferred, 1
        while name in taken or keyword.iskeyword(name) or not name.isidentifier():
            name, n = f"{preferred}_{n}", n + 1
        self.globals[name] = value
        return name

    def device_name(self, device: torch.device) -> str:
        device = torch.device(device)
        for name, known in self.globals.items():
            if isinstance(known, torch.device) and known == device:
                return name
        return self.bind(device.type + ("" if device.index is None else str(device.index)),
                         device)

    def callee(self, fn: Any) -> str:
        """How the wrapper spells a PyTorch callable: its ``torch.``/``operator.`` path, or a
        global bound to it (a prim's own PyTorch implementation, a helper of stage 4)."""
        if isinstance(fn, Prim):
            fn = fn.reference
        path = qualified_name(fn)
        if path is not None and path.split(".")[0] in ("torch", "operator", "math"):
            root = path.split(".")[0]
            self.globals.setdefault(root, importlib.import_module(root))
            return path
        name = getattr(fn, "__name__", "call").strip("_<>") or "call"
        return self.bind(f"{name}_fn" if name.isidentifier() else "extern_fn", fn)

    def extern_callee(self, ext: ir.ExternKernel) -> str:
        """The PyTorch call of an extern kernel: ``torch.mm`` for a ``matmul`` of two
        matrices and ``torch.bmm`` for two batches of them (the same BLAS call without
        ``matmul``'s sorting out of ranks), else the kernel's own callee."""
        if ext.kernel is PRIMS["matmul"] and len(ext.args) == 2 and not ext.kwargs and all(
                isinstance(a, ir.IRNode) for a in ext.args):
            a, b = (tuple(v.get_size()) for v in ext.args)
            if len(a) == len(b) == 2:
                return "torch.mm"
            if len(a) == len(b) == 3 and ir.same_sizes(a[:1], b[:1]):
                return "torch.bmm"
        if isinstance(ext.kernel, GENERATED_EXTERNS):
            return self.bind(ext.kernel.__name__, ext.kernel)
        return self.callee(ext.kernel)

    def convolution_call(self, ext: ir.ExternKernel, lines: list[WrapperLine]) -> str | None:
        """A convolution prim (or its input or weight gradient) as the PyTorch call it runs,
        its arguments settled at compile time: ``torch.convolution(x, w, b, (1, 1), (1, 1),
        (1, 1), False, (0, 0), 1)`` rather than the prim's Python reference, which turned
        ``stride=1`` into ``(1, 1)`` (and made a stand-in tensor for the gradients' unused
        operand) on every call -- six Python calls per convolution per call. The gradients
        call ``aten.convolution_backward`` with the stand-in made once. Symbolic sizes of
        the tensors change nothing in the call; a symbolic ``shape`` (the input gradient's,
        ``(s0, 64, 8, 8)``) expands a zero made once to it per call (``shape_only.expand``:
        one view; the prim's reference made a zero and its view and rebuilt the arguments:
        AlexNet's symbolic training step ran its 5 convolutions and 9 convolution gradients
        through references). None for anything else symbolic (the reference then runs as
        before)."""
        names = {"convolution": "x weight bias stride padding dilation groups",
                 "convolution_backward_input": "g weight shape stride padding dilation groups",
                 "convolution_backward_weight": "g x shape stride padding dilation groups"}
        kind = next((k for k in names if ext.kernel is PRIMS.get(k)), None)
        if kind is None or ext.multi_output:
            return None
        defaults = {"bias": None, "stride": 1, "padding": 0, "dilation": 1, "groups": 1}
        params = names[kind].split()
        bound = dict(zip(params, ext.args)) | dict(ext.kwargs)
        if set(bound) - set(params) or any(p not in bound and p not in defaults
                                           for p in params):
            return None
        bound = {p: bound.get(p, defaults.get(p)) for p in params}
        tensors = [bound[p] for p in ("x", "weight", "g") if p in bound]
        static = [v for p, v in bound.items() if p not in ("x", "weight", "g", "bias", "shape")]
        if not all(isinstance(t, ir.IRNode) for t in tensors) or any(
                isinstance(v, (ir.IRNode, SymInt)) for v in tree_leaves(static)) or any(
                isinstance(v, ir.IRNode) for v in tree_leaves(bound.get("shape"))):
            return None
        rank = len(bound["shape"]) if "shape" in bound else len(bound["x"].get_size())
        n = rank - 2
        stride, padding, dilation = (prims._tuple(bound[p], n)
                                     for p in ("stride", "padding", "dilation"))
        rest = (f"{literal(stride)}, {literal(padding)}, {literal(dilation)}, False, "
                f"{literal((0,) * n)}, {bound['groups']}")
        if kind == "convolution":
            bias = "None" if bound["bias"] is None else self.value_expr(bound["bias"], lines)
            return (f"torch.convolution({self.value_expr(bound['x'], lines)}, "
                    f"{self.value_expr(bound['weight'], lines)}, {bias}, {rest})")
        g = bound["g"]
        # the operand whose gradient is not asked for is read for its shape only
        shape = tuple(bound["shape"])
        zero = torch.zeros((), dtype=g.get_dtype(), device=g.get_device())
        if any(isinstance(v, SymInt) for v in shape):
            stand_in = f"{self.bind('shape_only', zero)}.expand({size_literal(shape)})"
        else:
            stand_in = self.bind("shape_only", zero.expand(shape))
        operands = ((stand_in, self.value_expr(bound["weight"], lines), "[True, False, False]",
                     0) if kind == "convolution_backward_input" else
                    (self.value_expr(bound["x"], lines), stand_in, "[False, True, False]", 1))
        return (f"torch.ops.aten.convolution_backward.default({self.value_expr(g, lines)}, "
                f"{operands[0]}, {operands[1]}, None, {rest}, {operands[2]})[{operands[3]}]")

    # -- expressions for IR values -------------------------------------------------------
    def strided_view(self, view: ir.View, shortest: int = 2
                     ) -> tuple[str, tuple, tuple, Any] | None:
        """A chain of ``shortest`` or more views of a buffer whose memory we laid out, as the
        one ``torch.as_strided(buffer, size, stride, offset)`` it amounts to: attention's
        ``reshape -> narrow -> reshape -> permute`` of the qkv product is one PyTorch call
        per call instead of four (Inductor's ``reinterpret_tensor``).

        The layout is PyTorch's own answer, found once at compile time: the chain is replayed
        on a meta tensor laid out as the buffer is, and must end in a view of it. With
        symbolic sizes the meta tensor has the hints' sizes, and the view's own index
        arithmetic (:func:`~.ir.view_strides`) gives sizes, strides and offset as
        expressions, used when they agree with PyTorch's at the hints (AlexNet's max-pool
        windows, ``buf1[:, :, 0:31:2, 1:32:2]`` of ``(s0, 16, 32, 32)``: one ``as_strided``
        instead of two slices, twelve views per call; the GPT's q, k and
        v, ``reshape(buf, (s0, 64, 192))`` sliced, reshaped and permuted: one call instead
        of four). A chain that copies somewhere (a ``reshape`` of a transposed tensor) or
        has a base whose layout we do not own (a graph input, a PyTorch call's result that
        may be a view) is written call by call."""
        chain, base = [], cast(ir.IRNode, view)
        while isinstance(base, ir.View):
            if base.node is None or not isinstance(base.node.target, Prim):
                return None
            chain.append(base)
            base = base.base
        owned = isinstance(base, ir.ComputedBuffer) or (
            isinstance(base, ir.ExternKernel) and result_is_contiguous(base))
        if len(chain) < shortest or not owned:
            return None
        buffer = cast(ir.Buffer, base)
        layout = buffer.layout
        if layout.offset != 0:
            return None
        proxy = torch.empty_strided(tuple(map(hint_int, layout.size)),
                                    tuple(map(hint_int, layout.stride)), dtype=layout.dtype,
                                    device="meta")
        value, symbolic = proxy, False
        for v in reversed(chain):
            args = map_arg(v.node.args[1:], self.lowering.env.__getitem__)
            kwargs = map_arg(v.node.kwargs, self.lowering.env.__getitem__)
            leaves = tree_leaves((args, kwargs))
            if any(isinstance(a, (ir.IRNode, torch.Tensor)) for a in leaves):
                return None
            symbolic |= any(isinstance(a, SymInt) for a in leaves)
            value = v.node.target.reference(value, *_at_hints(args), **_at_hints(kwargs))
        size = tuple(view.get_size())
        if value._base is not proxy or tuple(value.shape) != tuple(map(hint_int, size)):
            return None          # a copy somewhere on the way
        found = (tuple(value.shape), value.stride(), value.storage_offset())
        if not symbolic and all(isinstance(v, int)
                                for v in (*layout.size, *layout.stride, *size)):
            return buffer.name, *found
        strides = ir.view_strides(view, buffer)
        if strides is None or not _agree(strides, found):
            return None
        return buffer.name, *strides

    def value_expr(self, value: Any, lines: list[WrapperLine]) -> str:
        if isinstance(value, ir.View):
            key = id(value)
            # A view only PyTorch calls read (no caller sees it) is one reinterpret call,
            # half an as_strided's cost and cheaper than a single permute or narrow; what the
            # caller gets is a real view (autograd's view rules apply to it)
            quick = _reinterpret is not None and key not in self.output_views
            strided = self.strided_view(value, 1 if quick else 2) \
                if key not in self.view_names else None
            if strided is not None:
                name = f"view_{value.node.name}"
                fn = self.bind("reinterpret", _reinterpret) if quick else "torch.as_strided"
                lines.append(ExprLine(f"{name} = {fn}({strided[0]}, "
                                      f"{size_literal(strided[1])}, "
                                      f"{size_literal(strided[2])}, "
                                      f"{size_literal(strided[3])})"))
                self.view_names[key] = name
            composed = _permute_of_permute(value)
            if composed is not None and key not in self.view_names:
                base, dims = composed
                if dims == tuple(range(len(dims))):
                    return self.value_expr(base, lines)
                name = f"view_{value.node.name}"
                lines.append(ExprLine(f"{name} = {self.callee(value.node.target)}("
                                      f"{self.value_expr(base, lines)}, {literal(dims)})"))
                self.view_names[key] = name
            narrow = _narrow_args(value) if key not in self.view_names else None
            if narrow is not None:
                name = f"view_{value.node.name}"
                lines.append(ExprLine(f"{name} = torch.narrow("
                                      f"{self.value_expr(value.base, lines)}, "
                                      f"{', '.join(map(str, narrow))})"))
                self.view_names[key] = name
            if key not in self.view_names:
                base = self.value_expr(value.base, lines)
                name = f"view_{value.node.name}" if value.node is not None else f"view{key}"
                # (a size argument computed in the graph is its SymInt: see GraphLowering)
                args = map_arg(value.node.args[1:], self.lowering.env.__getitem__)
                kwargs = map_arg(value.node.kwargs, self.lowering.env.__getitem__)
                rest = "".join(f", {self.value_expr(a, lines)}" for a in args)
                kw = "".join(f", {k}={self.value_expr(v, lines)}" for k, v in kwargs.items())
                fn = self.callee(value.node.target)
                lines.append(ExprLine(f"{name} = {fn}({base}{rest}{kw})"))
                self.view_names[key] = name
            return self.view_names[key]
        if isinstance(value, ir.Buffer):
            return value.name
        if isinstance(value, SymInt):
            return pycode(value.expr)   # (the symbols are read at the top of the function)
        text = literal(value, lambda v: self.value_expr(v, lines))
        if text is not None:
            return text
        # any other object (a helper object of stage 4, a scan's combine_fn) is passed by
        # name
        fn_name = getattr(value, "__name__", None)
        return self.bind(fn_name if callable(value) and isinstance(fn_name, str) and
                         fn_name.isidentifier() else "const", value)

    # -- step 1: lines from the schedule and liveness -------------------------------------
    def plan(self) -> list[WrapperLine]:
        sched = self.scheduler
        groups = sched.groups
        reads_of = [self.kernels[g.name][1] if not g.is_extern else None for g in groups]
        reads = [[b.name for b in r] if r is not None else sorted(sched.reads[g.buffers[0].name])
                 for g, r in zip(groups, reads_of)]
        last_use = {name: i for i, names in enumerate(reads) for name in names}
        keep = set(sched.output_names) | {b.name for b in self.lowering.graph_inputs if b}
        # A PyTorch call that is not a prim may return a view of its inputs (``split``,
        # ``getitem``...): what it reads must then live as long as its result does.
        for i in reversed(range(len(groups))):
            ext = cast(ir.ExternKernel, groups[i].buffers[0])
            if groups[i].is_extern and self.may_alias(ext):
                end = len(groups) if ext.name in keep else last_use.get(ext.name, i)
                for name in reads[i]:
                    last_use[name] = max(last_use[name], end)
                    if end == len(groups):
                        keep.add(name)
        dies_at: dict[int, list[str]] = {}
        for name, i in last_use.items():
            if name not in keep and name in sched.by_name:
                dies_at.setdefault(i, []).append(name)
        kernel_reads = {name for g, names in zip(groups, reads) if not g.is_extern
                        for name in names}
        in_place = {name: self.params[i] for name, i in self.in_place.items()}
        pooled: set[str] = set()  # buffers whose memory is ours, laid out as recorded
        constants: set[str] = set()  # buffers computed once, here: globals of the wrapper
        lines: list[WrapperLine] = []
        for i, group in enumerate(groups):
            ext = cast(ir.ExternKernel, group.buffers[0])   # (when group.is_extern)
            if group.is_extern and self.reads_only_constants(ext) and ext.name not in keep:
                prim = cast(Prim, ext.kernel)   # (reads_only_constants: a prim)
                value = prim.reference(*ext.args, **ext.kwargs)
                if ext.name in kernel_reads:
                    value = value.contiguous()
                self.globals[ext.name] = value
                constants.add(ext.name)
                lines.append(CommentLine(
                    f"{group.name}: {ext.name} = {prim.name} of a tensor constant, "
                    f"computed once at compile time (graph node "
                    f"{', '.join(o.name for o in ext.origins)})"))
                continue
            if group.is_extern:
                lines.append(CommentLine(f"{group.name}: {ext.reason} (graph node "
                                         f"{', '.join(o.name for o in ext.origins)})"))
                call = self.convolution_call(ext, lines)
                if call is None:
                    args = [self.value_expr(a, lines) for a in ext.args]
                    args += [f"{k}={self.value_expr(v, lines)}" for k, v in ext.kwargs.items()]
                    call = f"{self.extern_callee(ext)}({', '.join(args)})"
                row_major = result_is_contiguous(ext)
                contiguous = not ext.multi_output and ext.name in kernel_reads and not row_major
                lines.append(ExternCallLine(ext.name, call, contiguous))
                if (contiguous and self.owns_memory(ext)) or (row_major and not
                                                              self.may_alias(ext)):
                    pooled.add(ext.name)
            else:
                call, ins, outs = self.kernels[group.name]
                origin: list[str] = []
                for b in group.buffers:
                    origin += [o.name for o in b.origins if o.name not in origin]
                lines.append(CommentLine(f"{group.name}: graph nodes {', '.join(origin)}"))
                for b in outs:
                    if b.name in in_place:
                        lines.append(ExprLine(f"{b.name} = {in_place[b.name]}  # its new "
                                              "values, written in place"))
                        continue
                    lines.append(AllocateLine(b, self.device_name(b.layout.device)))
                    pooled.add(b.name)
                name = self.bind(group.name, call, share=False)
                self.kernel_globals[name] = call
                lines.append(KernelCallLine(call.call_source(name,
                                                             [b.name for b in ins + outs])))
            for name in dies_at.get(i, ()):
                if name in constants:
                    continue
                key = _layout_key(sched.by_name[name]) if name in pooled else None
                lines.append(FreeIfNotReusedLine(name, key))
        leaves: list[WrapperLine] = []
        value = self.value_expr(self.lowering.outputs, leaves)
        self.lines = self.size_lines() + lines + leaves + [ReturnLine(value)]
        kept = self.buffers_to_keep() if config.keep_buffers and CAN_KEEP else set()
        if self.reuse:
            self.plan_memory(kept)
        self.keep_buffers(kept)
        return self.lines

    def size_lines(self) -> list[WrapperLine]:
        """``s0 = x.size(0)``: each symbolic size read from the input that gives it."""
        lines: list[WrapperLine] = []
        for symbol, (position, dim) in sorted(self.lowering.size_sources.items(),
                                              key=lambda item: str(item[0])):
            source = self.params[position] + ("" if dim is None else f".size({dim})")
            if source != str(symbol):
                lines.append(ExprLine(f"{symbol} = {source}"))
        if lines:
            lines.insert(0, CommentLine("symbolic sizes, read from the inputs"))
        if self.lowering.stride_checks:
            fallback = self.bind("compile_for_layout", self.fallback)
            lines.append(CommentLine("kernels index these inputs with the strides compiled for"))
            checks = [f"{self.params[position]}.stride() != {size_literal(strides)}"
                      for position, strides in self.lowering.stride_checks]
            joined = " or\n            ".join(checks)   # (continuation lines of the if)
            lines.append(ExprLine(f"if ({joined}):"))
            lines.append(ExprLine(f"    return {fallback}({', '.join(self.params)})"))
        return lines

    # -- step 2: memory planning ---------------------------------------------------------
    def plan_memory(self, kept: set[str] | None = None) -> None:
        """Allocations take a freed buffer of the same layout when the pool has one.

        Only memory this function allocated (or a contiguous copy a PyTorch prim made) is
        pooled: a PyTorch call that is not a prim may return a view of an input, which must
        never be overwritten. Memory ``kept`` between calls (those allocations' names, see
        :meth:`buffers_to_keep`) goes only to a buffer no caller sees either."""
        kept = kept or set()
        pool: dict[tuple, list[FreeIfNotReusedLine]] = {}
        owner: dict[str, str] = {}   # buffer -> the allocation whose memory it has
        for i, line in enumerate(self.lines):
            if isinstance(line, FreeIfNotReusedLine) and line.key is not None:
                pool.setdefault(line.key, []).append(line)
            elif isinstance(line, AllocateLine):
                name = line.buffer.name
                freed = [f for f in pool.get(_layout_key(line.buffer), ())
                         if name in kept or owner.get(f.name, f.name) not in kept]
                if not freed:
                    continue
                pool[_layout_key(line.buffer)].remove(freed[-1])
                freed[-1].reused = True
                owner[name] = owner.get(freed[-1].name, freed[-1].name)
                self.lines[i] = ReuseLine(name, freed[-1].name)
                self.reused += 1

    def seen_buffers(self) -> set[str]:
        """The buffers whose tensor a caller may get: the graph's outputs, except a training
        forward's saved values (the output node's ``meta["user_outputs"]``, from AOT, counts
        the outputs before them), and what a PyTorch call that may return a view of its
        arguments read to make one of them."""
        outputs = self.lowering.outputs
        n_user = self.lowering.graph.output_node.meta.get("user_outputs")
        if isinstance(outputs, (tuple, list)) and n_user is not None:
            outputs = outputs[:n_user]
        seen = {getattr(ir.base_buffer(v), "name", "") for v in tree_leaves(outputs)
                if isinstance(v, ir.IRNode)}
        for group in reversed(self.scheduler.groups):
            ext = cast(ir.ExternKernel, group.buffers[0])
            if group.is_extern and self.may_alias(ext) and ext.name in seen:
                seen |= set(self.scheduler.reads[ext.name])
        return seen

    def buffers_to_keep(self) -> set[str]:
        """The allocations whose memory is kept between calls (:class:`KeptBuffers`): of a
        static size on a CPU, of at least ``config.keep_buffers_min_bytes``, and of a
        tensor no caller sees (:meth:`seen_buffers`: a caller may keep what it gets, or
        hand it to autograd, which takes a gradient as ``.grad`` without a copy only when
        nothing else holds it)."""
        seen = self.seen_buffers()
        kept = set()
        for line in self.lines:
            if not isinstance(line, AllocateLine) or line.buffer.name in seen:
                continue
            layout = line.buffer.layout
            if torch.device(layout.device).type != "cpu" or not all(
                    isinstance(v, int) for v in (*layout.size, *layout.stride)):
                continue
            span = 1 + sum((n - 1) * st for n, st in zip(layout.size, layout.stride))
            if min(layout.size, default=1) > 0 and \
                    span * layout.dtype.itemsize >= config.keep_buffers_min_bytes:
                kept.add(line.buffer.name)
        return kept

    def keep_buffers(self, kept: set[str]) -> None:
        """Give each allocation in ``kept`` (still one after memory planning) its slot."""
        slots = 0
        for line in self.lines:
            if isinstance(line, AllocateLine) and line.buffer.name in kept:
                line.slot, slots = slots, slots + 1
        if slots:
            self.bind("keep", KeptBuffers(slots).take, share=False)

    # -- print -------------------------------------------------------------------------
    def generate(self) -> str:
        """The wrapper's source: ``def call(<graph inputs>): ...``."""
        self.plan()
        body = [text for line in self.lines if (text := line.codegen()) is not None]
        return "\n".join([f"def call({', '.join(self.params)}):"] +
                         ["    " + text for text in body]) + "\n"

    def bound_globals(self) -> str:
        """Comment lines naming what each non-obvious global of the wrapper is bound to."""
        out = []
        for name, value in self.globals.items():
            if name in ("torch", "operator", "math"):
                continue
            if name in self.kernels:
                what = self.kernels[name][0].launcher_doc
            elif name == "empty_strided":
                what = "torch.empty_strided"
            elif name == "reinterpret":
                what = "torch._C._dynamo.guards._reinterpret_tensor (a view without autograd)"
            elif name == "keep":
                what = "KeptBuffers.take: last call's memory of a buffer no caller sees"
            elif isinstance(value, torch.device):
                what = f"torch.device({str(value)!r})"
            elif isinstance(value, torch.Tensor):
                what = (f"a tensor constant, {str(value.dtype).replace('torch.', '')}"
                        f"{list(value.shape)}")
            else:
                what = f"{getattr(value, '__module__', '')}." \
                       f"{getattr(value, '__qualname__', type(value).__name__)}"
            out.append(f"#   {name} = {what}")
        return "\n".join(["# globals of the wrapper, bound once at compile time:"] + out)

    @staticmethod
    def reads_only_constants(ext: ir.ExternKernel) -> bool:
        """A prim run in PyTorch on tensor constants alone (``torch.reshape(const, (32,))``
        of a folded ``torch.arange``): the same value on every call, so the wrapper computes
        it once, at compile time, and holds it as a global. Prims are deterministic; no
        buffer, graph input or symbolic size reaches it. (Its memory is then never pooled:
        it may be the constant's own, a view.)"""
        if not isinstance(ext.kernel, Prim) or ext.multi_output:
            return False
        leaves = tree_leaves((ext.args, ext.kwargs))
        return any(isinstance(v, torch.Tensor) for v in leaves) and not any(
            isinstance(v, (ir.IRNode, SymInt)) for v in leaves)

    @staticmethod
    def may_alias(ext: ir.ExternKernel) -> bool:
        """Can this PyTorch call's result share memory with its inputs? Prims and the
        calls in ``FRESH_RESULTS`` always allocate; anything else might (a view, or its
        input returned as it is), so we assume it does."""
        if ext.multi_output:
            return True
        return not isinstance(ext.kernel, Prim) and ext.kernel not in FRESH_RESULTS

    @staticmethod
    def owns_memory(buffer: ir.Buffer) -> bool:
        return isinstance(buffer, ir.ComputedBuffer) or (
            isinstance(buffer, ir.ExternKernel) and isinstance(buffer.kernel, Prim))

    @staticmethod
    def param_name(buffer: ir.InputBuffer | None, i: int) -> str:
        if buffer is None:
            return f"_arg{i}"
        name = buffer.name
        return name if name.isidentifier() and not keyword.iskeyword(name) else f"_arg{i}"
