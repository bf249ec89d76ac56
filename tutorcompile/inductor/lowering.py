"""Lowering: a graph of prims becomes buffers of loop IR, one rule per call target.

:class:`GraphLowering` walks the prim graph in order and asks the :data:`lowerings` table what
each call becomes. The table is keyed by the call's target, whatever it is -- a prim, a torch
function or aten overload a graph pass put in, a higher-order op, or ``BackwardOf(fn)`` for
the gradient of an extern call -- so a new kind of call is a new rule, not a branch
(:func:`register_lowering`); a target with no rule runs in PyTorch (:meth:`GraphLowering.
fallback`), and the compile notes say so:

* every pointwise prim (one generic rule, from the op table's ``kind``) becomes a
  :class:`~.ir.Pointwise` whose inner function loads its inputs -- broadcasting is index
  arithmetic (a stretched dimension reads index 0) -- casts them to the dtype the op computes
  in, and calls the prim under whatever handler is installed;
* ``sum``/``amax`` become a :class:`~.ir.Reduction`; ``mean`` and ``var`` are built from
  ``sum`` plus a pointwise division (the scheduler fuses them back into one kernel);
* views (``reshape``, ``permute``, ``expand``, ``squeeze``, ``unsqueeze``, ``slice``) become
  :class:`~.ir.View` -- new indices for old, no copy;
* ``index_select`` (and so embedding, gather, take, flip) is an *indirect load*: the
  position it reads is a value loaded from another tensor (``ir.indirect_indexing``);
  ``index_add`` (scatter_add, the gradient of index_select) is a reduction over the
  indices, ``slice_scatter`` (the gradient of a slice) a ``where`` over positions;
* ``matmul`` and ``convolution`` become :class:`~.ir.ExternKernel` calls into PyTorch, and
  so does any node whose target is not a prim at all (a torch function left in the graph):
  the compiler never refuses a graph, it calls PyTorch and says so. Under
  ``mode="max-autotune"`` with Triton kernels a matrix product (``matmul``, and the
  ``torch.addmm`` that ``fuse_addmm`` makes) is a choice instead: the PyTorch call or a
  Triton matmul template (:class:`~.ir.TemplateBuffer`), timed on the real sizes
  (``autotune.select_matmul``);
* ``sequential_scan`` (a higher-order op) and its gradient become generated scan loops
  (``codegen/scan.py``); ``detach`` is its input (the compiled graph runs without autograd).

Each non-view prim gets its own :class:`~.ir.ComputedBuffer` -- "one kernel per op", the
naive starting point. Deciding which of them share a kernel is the scheduler's job.

**Symbolic sizes.** A graph AOT built for symbolic sizes (``tensor_meta`` shapes holding
:class:`~tutorcompile.fx.symbolic_shapes.SymInt` s, size nodes with ``meta["sym"]``) is
lowered with those sizes: buffers' sizes and strides are SymInts, index expressions contain
the symbols, and a decision a rule makes on a size (``size == 1``) records its guard in the
shape environment. Each symbol must be readable from a graph input -- a tensor's size
(``size_sources``: ``s0`` is ``input 0, dim 0``) or an int input that is the symbol itself --
so that the wrapper can compute every size from its inputs; one that is not raises
:class:`SymbolicLoweringError` (the caller then compiles for the example's sizes).

Mirrors: torch/_inductor/lowering.py (``register_lowering``, ``make_pointwise``) and
torch/_inductor/graph.py (``GraphLowering``).
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import torch

from ..aot.joint import Slot, extern_backward
from ..errors import TutorcompileError
from ..fx import Graph, Node
from ..fx.node import map_aggregate, map_arg, tree_leaves
from ..fx.symbolic_shapes import SymInt
from ..ops import PRIMS, Prim, ops
from ..ops.scan import sequential_scan
from ..ops.table import (
    contiguous_strides,
    normalize_dim,
    normalize_dims,
    promote_types,
    slice_indices,
)
from ..ops.virtualized import CPP_DTYPES, TRITON_DTYPES
from . import config, ir
from .autotune import AutotuneTable, conv_channels_last, select_matmul
from .codegen.scan import compile_scan, compile_scan_backward
from .codegen.triton_template import TEMPLATE_DTYPES
from .ir import (
    ComputedBuffer,
    ExternKernel,
    FixedLayout,
    InputBuffer,
    IRNode,
    Pointwise,
    Reduction,
    View,
    constant,
)

# dtypes a kernel can hold: the spelling tables of ops/virtualized.py (16-bit floats are
# stored in 16 bits and computed in float32: codegen/common.py compute_dtype)
KERNEL_DTYPES = {"cpp": frozenset(CPP_DTYPES), "triton": frozenset(TRITON_DTYPES)}

lowerings: dict[Hashable, Callable] = {}


@dataclass(frozen=True)
class BackwardOf:
    """The table key of the rule for the gradient of an extern call of ``fn``: the node
    stage 4 writes as ``extern_backward(fn, args, kwargs, grad_outputs, *inputs)``."""
    fn: Any


def register_lowering(*targets: Hashable):
    """Decorator: ``rule(lowering, node, *args, **kwargs) -> IR value`` lowers every call of
    these targets -- prims; torch functions and aten overloads a graph pass puts in
    (``torch.addmm``, ``aten.convolution_backward``); higher-order ops
    (``sequential_scan``); ``BackwardOf(fn)`` for the gradient of an extern call of ``fn``.
    A rule that cannot lower one particular call returns ``lowering.fallback(...)``:
    PyTorch runs it, and the compile notes say so."""
    def wrap(fn):
        for target in targets:
            lowerings[target] = fn
        return fn
    return wrap


def lowering_key(node: Node) -> Hashable | None:
    """What :data:`lowerings` is keyed by for ``node``: its target, or ``BackwardOf(fn)``
    for stage 4's ``extern_backward(fn, ...)``; None when the target cannot be a key."""
    target = node.target
    if target is extern_backward and node.args:
        target = BackwardOf(node.args[0])
    try:
        hash(target)
    except TypeError:
        return None
    return target


class LoweringError(TutorcompileError):
    pass


class SymbolicLoweringError(LoweringError):
    """A graph for symbolic sizes that cannot be lowered as such (a symbol no input gives)."""


B = TypeVar("B", bound=ir.Buffer)


class GraphLowering:
    """Lower a prim graph to buffers; ``buffers`` (in order), ``graph_inputs``, ``outputs``."""

    def __init__(self, graph: Graph, example_inputs: Sequence[Any], codegen: str = "cpp",
                 mode: str | None = None):
        self.graph = graph
        self.example_inputs = list(example_inputs)
        self.codegen = codegen
        self.mode = mode
        self.autotune_table = AutotuneTable()   # max-autotune's choices between algorithms
        self.buffers: list[ir.Buffer] = []
        self.graph_inputs: list[InputBuffer | None] = []
        self.env: dict[Node, Any] = {}
        self.outputs: Any = None
        self.fallbacks: list[str] = []  # readable notes: "mm_1: matmul runs in PyTorch"
        # id(view) -> (view, its contiguous copy): matrix-product operands (matrix_operand)
        self.matrix_copies: dict[int, tuple[IRNode, IRNode]] = {}
        # symbolic sizes: symbol -> (input position, dim), dim None for an int input
        self.size_sources: dict[Any, tuple[int, int | None]] = {}
        self.stride_checks: list[tuple[int, tuple[int, ...]]] = []   # (input, strides)

    # -- buffers -----------------------------------------------------------------------
    def new_name(self) -> str:
        return f"buf{len(self.buffers)}"

    def register(self, buffer: B) -> B:
        self.buffers.append(buffer)
        return buffer

    def pointwise(self, node: Node, ranges, dtype, inner_fn) -> ComputedBuffer:
        device = self.device_of(node)
        layout = FixedLayout.contiguous(ranges, dtype, device)
        data = Pointwise(tuple(ranges), dtype, layout.device, inner_fn)
        return self.register(ComputedBuffer(self.new_name(), layout, data, [node]))

    def reduction(self, node: Node, src: IRNode | tuple[int, ...], dims, keepdim,
                  reduction_type, dtype, inner_fn) -> ComputedBuffer:
        """A reduction over ``src`` (a value, or the shape iterated when that is no value's,
        e.g. index_add's rows-by-indices)."""
        src_shape = tuple(src) if isinstance(src, tuple) else tuple(src.get_size())
        dims = tuple(sorted(dims))
        out_shape = tuple(1 if d in dims else s for d, s in enumerate(src_shape)) if keepdim \
            else tuple(s for d, s in enumerate(src_shape) if d not in dims)
        device = self.device_of(node)
        layout = FixedLayout.contiguous(out_shape, dtype, device)
        data = Reduction(out_shape, dtype, layout.device, inner_fn, src_shape, dims,
                         reduction_type, keepdim)
        return self.register(ComputedBuffer(self.new_name(), layout, data, [node]))

    def extern(self, node: Node, kernel: Callable, args, kwargs, reason: str,
               fallback: bool = True) -> ExternKernel:
        """A call of ``kernel`` -- PyTorch's (a *fallback*, listed in ``fallbacks``), or
        one generated here that the wrapper calls like one (a scan kernel)."""
        meta = node.meta.get("tensor_meta")
        multi = isinstance(meta, (tuple, list))
        if meta is None or not (multi or hasattr(meta, "shape")):
            raise LoweringError(f"{node.name}: an extern call needs node.meta['tensor_meta'] "
                                "(run ShapeProp first)")
        if multi:
            # A call returning several tensors (unbind, split...): the buffer holds the
            # tuple; the getitem nodes after it become extern calls of their own.
            layout = FixedLayout((0,), (1,), torch.float32, self.device_of_args(args))
        else:
            layout = FixedLayout.contiguous(meta.shape, meta.dtype, meta.device)
        if fallback:
            self.fallbacks.append(f"{node.name}: {reason}")
        ext = ExternKernel(self.new_name(), layout, kernel, args, kwargs, [node], reason)
        ext.multi_output = multi
        return self.register(ext)

    def device_of_args(self, args) -> torch.device:
        for v in tree_leaves(args):
            if isinstance(v, IRNode):
                return v.get_device()
        return torch.device("cpu")

    def device_of(self, node: Node) -> torch.device:
        meta = node.meta.get("tensor_meta")
        if meta is not None and hasattr(meta, "device"):
            return torch.device(meta.device)
        for v in self.example_inputs:
            if isinstance(v, torch.Tensor):
                return v.device
        return torch.device("cpu")

    # -- the walk ----------------------------------------------------------------------
    def bind_sizes(self, node: Node, position: int) -> None:
        """Note where the wrapper reads each symbol that is one of this input's sizes."""
        meta = node.meta.get("tensor_meta")
        sizes: list[tuple[int | None, Any]] = list(enumerate(getattr(meta, "shape", ())))
        if isinstance(node.meta.get("sym"), SymInt):
            sizes = [(None, node.meta["sym"])]
        for dim, size in sizes:
            if isinstance(size, SymInt) and size.expr.is_Symbol:
                self.size_sources.setdefault(size.expr, (position, dim))

    def symbolic_layout(self, meta: Any, example: torch.Tensor) -> tuple[tuple, tuple]:
        """The sizes and strides of a graph input with symbolic sizes. A contiguous input
        has the contiguous strides of its symbolic sizes; any other (a strided view the
        forward saved for the backward) keeps the example's strides, which the wrapper
        checks on every call (``stride_checks``): a call whose strides differ runs a
        compilation for its own layout instead."""
        size = tuple(meta.shape)
        if example.is_contiguous():
            return size, contiguous_strides(size)
        stride = tuple(_symbolic_stride(v, size[k + 1:]) for k, v in enumerate(example.stride()))
        self.stride_checks.append((len(self.graph_inputs), stride))
        return size, stride

    def check_sizes(self, node: Node) -> None:
        """Every symbol in ``node``'s sizes must be one the wrapper can read."""
        meta = node.meta.get("tensor_meta")
        metas = meta if isinstance(meta, (tuple, list)) else [meta]
        sizes = [s for m in metas for s in (*getattr(m, "shape", ()),
                                            *(getattr(m, "stride", None) or ()))]
        sizes.append(node.meta.get("sym"))
        for size in sizes:
            if isinstance(size, SymInt):
                missing = size.expr.free_symbols - set(self.size_sources)
                if missing:
                    raise SymbolicLoweringError(
                        f"{node.name}: the size {size} uses {sorted(map(str, missing))}, "
                        "which no input of the graph gives")

    def run(self) -> GraphLowering:
        inputs = iter(self.example_inputs)
        for position, node in enumerate(self.graph.placeholders):
            self.bind_sizes(node, position)
        for node in self.graph.nodes:
            if self.size_sources:
                self.check_sizes(node)
            if node.op == "placeholder":
                example = next(inputs)
                if isinstance(example, torch.Tensor):
                    meta = node.meta.get("tensor_meta")
                    size, stride = tuple(example.shape), tuple(example.stride())
                    if self.size_sources and any(isinstance(s, SymInt)
                                                 for s in getattr(meta, "shape", ())):
                        size, stride = self.symbolic_layout(meta, example)
                    layout = FixedLayout(size, stride, example.dtype, example.device)
                    name = node.name
                    if not name.isidentifier() or re.fullmatch(r"buf\d+", name):
                        name = f"arg_{len(self.graph_inputs)}"
                    buf = InputBuffer(name, layout, [node])
                    self.graph_inputs.append(buf)
                    self.env[node] = buf
                else:
                    self.graph_inputs.append(None)
                    self.env[node] = node.meta.get("sym", example) if self.size_sources \
                        else example
            elif node.op == "call_function" and isinstance(node.meta.get("sym"),
                                                           (int, SymInt)):
                self.env[node] = node.meta["sym"]   # a size computed from the inputs'
            elif node.op == "call_function":
                args = map_arg(node.args, self.env.__getitem__)
                kwargs = map_arg(node.kwargs, self.env.__getitem__)
                self.env[node] = self.lower_call(node, args, kwargs)
                if node.meta.get("realize"):
                    realize(self.env[node])
                if node.target in _EQUALITY:
                    for arg in node.all_input_nodes:   # (see _EQUALITY)
                        if getattr(arg.meta.get("tensor_meta"), "dtype", torch.bool
                                   ).is_floating_point:
                            realize(self.env[arg])
            elif node.op == "output":
                self.outputs = map_arg(node.args[0], self.env.__getitem__)
                self.outputs = self.saved_from_copies(node, self.outputs)
            else:
                raise LoweringError(f"{node.name}: cannot lower a {node.op} node; lower a "
                                    "graph of function calls (inline modules first)")
        return self

    def saved_from_copies(self, node: Node, outputs: Any) -> Any:
        """A training forward's saved values (the outputs after the first
        ``meta["user_outputs"]``) that a matrix product's operand copy already holds
        (:func:`matrix_operand`), read from that copy: the backward's products then read
        them as they are (attention's q, k and v are copied once, in the forward), and a
        saved view that does not stride is not copied a second time by PyTorch's
        ``reshape``. What the caller gets is left as it is."""
        n_user = node.meta.get("user_outputs")
        if n_user is None or not self.matrix_copies or not isinstance(outputs, (tuple, list)):
            return outputs
        saved = [_copied(self, v) or v if isinstance(v, View) else v
                 for v in outputs[n_user:]]
        return type(outputs)([*outputs[:n_user], *saved])

    def lower_call(self, node: Node, args: tuple, kwargs: dict) -> Any:
        """The IR value of one call: the rule :data:`lowerings` holds for it, or PyTorch's."""
        target = node.target
        if isinstance(target, Prim):
            unsupported = self.unsupported_dtype(node, args)
            if unsupported is not None:
                # (of every kind: a view or scatter of a complex tensor would otherwise be
                # read by a kernel that has no type for it)
                return self.extern(node, target, args, kwargs,
                                   f"{target.name} on {unsupported} runs in PyTorch (the "
                                   f"{self.codegen} code generator has no {unsupported})")
            if target in lowerings and \
                    any(isinstance(v, torch.Tensor) for v in tree_leaves((args, kwargs))):
                # a tensor folded into the graph as a constant (torch.arange of a fixed
                # size, the empty key/value cache a decoder concatenates onto): made a
                # buffer, the call lowers as any other; else it runs in PyTorch on it
                lifted = self.lift_constants(node, (args, kwargs))
                if lifted is None:
                    return self.extern(node, target, args, kwargs,
                                       f"{target.name} reads a tensor constant; it runs in "
                                       "PyTorch")
                args, kwargs = lifted
        rule = lowerings.get(lowering_key(node))
        if rule is None:
            return self.fallback(node, args, kwargs)
        return rule(self, node, *args, **kwargs)

    def fallback(self, node: Node, args: tuple, kwargs: dict) -> ExternKernel:
        """``node``'s own target called by PyTorch: a call nothing here lowers."""
        target = node.target
        if isinstance(target, Prim):
            return self.extern(node, target, args, kwargs,
                               f"{target.name} has no lowering; it runs in PyTorch")
        name = getattr(target, "__name__", str(target))
        return self.extern(node, target, args, kwargs,
                           f"{name} is not a prim; it runs in PyTorch")

    def scan_kernel(self, bound: inspect.BoundArguments, metas: list, packed: type | None):
        """The scan kernel of a bound ``sequential_scan`` call, or why there is none."""
        if self.codegen not in _LANGUAGE:
            return f"the {self.codegen} code generator writes no kernels"
        dim = normalize_dim(bound.arguments["dim"], len(metas[0].shape))
        return compile_scan(f"{self.codegen}_scan_{len(self.buffers)}", self.codegen,
                            bound.arguments["combine_fn"], metas, packed, dim,
                            bool(bound.arguments["reverse"]))

    def tunes_matmul(self, node: Node, a: Any, b: Any, bias: Any = None) -> bool:
        """Is ``a @ b`` (``+ bias``) a choice between PyTorch and a Triton template? Only
        under ``mode="max-autotune"`` with Triton kernels, for float32/float16/bfloat16
        operands of one dtype with static sizes, and a bias that broadcasts to the
        product's rows and columns. (The template indexes with 32-bit integers and puts the
        batch on the grid's second axis, which CUDA limits to 65535.)"""
        values = [a, b] + ([bias] if bias is not None else [])
        if self.mode != "max-autotune" or self.codegen != "triton" or \
                not all(isinstance(v, IRNode) for v in values):
            return False
        meta = node.meta.get("tensor_meta")
        dtypes = {v.get_dtype() for v in values} | {getattr(meta, "dtype", None)}
        sizes = [tuple(v.get_size()) for v in values]
        if len(dtypes) != 1 or dtypes.pop() not in TEMPLATE_DTYPES or \
                not all(isinstance(s, int) and s > 0 for size in sizes for s in size) or \
                len(sizes[0]) < 2 or len(sizes[1]) < 2 or sizes[0][-1] != sizes[1][-2]:
            return False
        batch = torch.broadcast_shapes(sizes[0][:-2], sizes[1][:-2])
        out_numel = math.prod(batch) * sizes[0][-2] * sizes[1][-1]
        if math.prod(batch) > 65535 or max(out_numel, *map(math.prod, sizes)) >= 2 ** 31:
            return False
        if bias is not None:
            out = (sizes[0][-2], sizes[1][-1])
            if len(sizes[0]) != 2 or len(sizes[1]) != 2 or len(sizes[2]) > 2 or \
                    torch.broadcast_shapes(sizes[2], out) != out:
                return False
        return True

    def lift_constants(self, node: Node, values: Any) -> Any:
        """``values`` with each tensor constant made a buffer that kernels load, or None
        where one cannot be. The buffer is an extern call of a prim on the constant alone,
        which the wrapper computes once, at compile time, and holds as a global (as it does
        for any prim of constants alone): no call per call. Not lifted: a 0-d constant (a
        number to type promotion, not a tensor of the same rank), one on another device
        than the graph's, or of a dtype the code generator lacks."""
        device = self.device_of(node)   # ("cuda" and "cuda:0" are one device here)
        ok = KERNEL_DTYPES[self.codegen]
        constants = [v for v in tree_leaves(values) if isinstance(v, torch.Tensor)]
        if not all(c.dim() > 0 and c.dtype in ok and type(c) is torch.Tensor and
                   c.device.type == device.type and
                   (c.device.index or 0) == (device.index or 0) for c in constants):
            return None
        convert = PRIMS["convert_element_type"]
        lifted: dict[int, IRNode] = {}
        for c in constants:
            if id(c) not in lifted:
                layout = FixedLayout.contiguous(tuple(c.shape), c.dtype, c.device)
                lifted[id(c)] = self.register(ExternKernel(
                    self.new_name(), layout, convert, (c, c.dtype), {}, [node],
                    f"a tensor constant {tuple(c.shape)} read by {node.name}"))
        return map_aggregate(values, lambda v: lifted[id(v)] if isinstance(v, torch.Tensor)
                             else v)

    def unsupported_dtype(self, node: Node, args) -> str | None:
        ok = KERNEL_DTYPES[self.codegen]
        dtypes = [v.get_dtype() for v in tree_leaves(args) if isinstance(v, IRNode)]
        meta = node.meta.get("tensor_meta")
        if meta is not None and hasattr(meta, "dtype"):
            dtypes.append(meta.dtype)
        for d in dtypes:
            if d not in ok:
                return str(d).replace("torch.", "")
        return None


_EQUALITY = (PRIMS["eq"], PRIMS["ne"])
"""Comparisons whose floating operands every reader loads from memory: a max's gradient
goes where ``x == max(x)``, and ``x`` computed again inside the comparison's loops -- a
division there a multiplication by a reciprocal, a vector math routine in one loop and a
scalar one in the other -- may miss the maximum by one rounding, so that no element gets
the gradient (and a count of zero makes it NaN). The partitioner keeps such comparisons in
the forward for the same reason (``aot/partitioners.py``)."""


def realize(value: Any) -> None:
    """Keep the buffer behind ``value`` (through its views) in memory for every reader
    (``ComputedBuffer.realized``); an input or an extern call's result already is."""
    while isinstance(value, View):
        value = value.base
    if isinstance(value, ComputedBuffer):
        value.realized = True


def _symbolic_stride(stride: int, inner: Sequence[Any]) -> Any:
    """A guess at what an example's stride is for every size: a view of a row-major
    tensor (``qkv[..., :32]`` of ``(s0, s1, 96)`` has strides ``(96*s1, 96, 1)``) scales
    with the symbolic sizes inside its dimension. Only a guess: the wrapper checks it."""
    scale = math.prod([s for s in inner if isinstance(s, SymInt)])
    hint = scale.hint if isinstance(scale, SymInt) else 1
    return scale * (stride // hint) if hint > 1 and stride % hint == 0 else stride


def _meta_of(v: Any) -> Any:
    return ir._Meta(v.get_dtype(), tuple(v.get_size())) if isinstance(v, IRNode) else v


def broadcast_loader(value: IRNode, out_shape: Sequence[int]) -> Callable:
    """A loader of ``value`` indexed by the broadcast output's indices (right-aligned; a
    size-1 dimension that was stretched always reads index 0)."""
    size = tuple(value.get_size())
    lead = len(out_shape) - len(size)
    inner = value.make_loader()

    def loader(index):
        return inner([0 if size[k] == 1 and out_shape[lead + k] != 1 else index[lead + k]
                      for k in range(len(size))])
    return loader


# ---------------------------------------------------------------------------------------
# Pointwise: one rule for the whole kind
# ---------------------------------------------------------------------------------------

_COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge"}

_POW_BY_CONSTANT: dict[float, Callable[[Any, torch.dtype], Any]] = {
    2.0: lambda x, dtype: ops.mul(x, x),
    3.0: lambda x, dtype: ops.mul(ops.mul(x, x), x),
    0.5: lambda x, dtype: ops.sqrt(x),
    -0.5: lambda x, dtype: ops.rsqrt(x),
    -1.0: lambda x, dtype: ops.div(constant(1.0, dtype), x),
    -2.0: lambda x, dtype: ops.div(constant(1.0, dtype), ops.mul(x, x)),
}
"""``x ** c`` for these constant exponents as ATen's pow kernels compute it (CPU and CUDA
special-case them: ``pow_tensor_scalar_optimized_kernel``): products, a square root, a
reciprocal. Otherwise the C++ code calls ``std::pow``, a ``powf`` call per element (about
16 ns each): GPT-2's tanh GELU, ``x ** 3``, took 0.26 ms of a 0.97 ms inference step
(benchmarks/MEASUREMENTS.md). Triton's pow is ``exp2(log2)``, less exact than a product."""


def lower_pointwise(lowering: GraphLowering, node: Node, *args, **kwargs) -> ComputedBuffer:
    prim: Prim = node.target
    metas = [_meta_of(a) for a in args]
    out_shape, out_dtype = prim.meta(*metas, **kwargs)
    out_shape = tuple(out_shape)
    # The dtype each operand is computed in: what PyTorch's type promotion would pick.
    compute: list[torch.dtype | None]
    if prim.name in _COMPARISONS:
        compute = [promote_types(*metas)] * len(args)
    elif prim.name == "where":
        compute = [None, out_dtype, out_dtype]
    elif prim.name == "convert_element_type":
        compute = [None] * len(args)
    else:
        compute = [out_dtype] * len(args)
    loaders = [broadcast_loader(a, out_shape) if isinstance(a, IRNode) else None
               for a in args]
    by_constant = None
    if prim.name == "pow" and len(args) == 2 and not kwargs and out_dtype.is_floating_point \
            and isinstance(args[1], (int, float)) and not isinstance(args[1], bool):
        by_constant = _POW_BY_CONSTANT.get(float(args[1]))

    def inner_fn(index):
        operands = []
        for a, load, dtype in zip(args, loaders, compute):
            if load is not None:
                v = load(index)
                if dtype is not None and a.get_dtype() != dtype:
                    v = ops.convert_element_type(v, dtype)
                operands.append(v)
            elif isinstance(a, SymInt):
                # a size (``where < s2``): computed from the kernel's size arguments, never
                # printed as the example's value
                v = _int_value(a)
                operands.append(v if dtype in (None, torch.int64) else
                                ops.convert_element_type(v, dtype))
            elif isinstance(a, (bool, int, float)) and dtype is not None:
                operands.append(constant(a, dtype))
            elif isinstance(a, (bool, int, float)):
                operands.append(constant(a, promote_types(a)))
            else:
                operands.append(a)  # a dtype argument
        if by_constant is not None:
            return by_constant(operands[0], out_dtype)
        return prim(*operands, **kwargs)

    return lowering.pointwise(node, out_shape, out_dtype, inner_fn)


for _prim in PRIMS.values():
    if _prim.kind == "pointwise":
        lowerings[_prim] = lower_pointwise


@register_lowering(PRIMS["full"])
def lower_full(lowering, node, shape, fill_value, dtype=None, device=None):
    _, dtype = PRIMS["full"].meta(shape, fill_value, dtype, device)
    return lowering.pointwise(node, tuple(shape), dtype,
                              lambda index: constant(fill_value, dtype))


@register_lowering(PRIMS["iota"])
def lower_iota(lowering, node, length, start=0, step=1, dtype=torch.int64, device=None):
    return lowering.pointwise(node, (length,), dtype,
                              lambda index: ir.index_expr(start + step * index[0], dtype))


# ---------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------

def _reduce(lowering, node, a, dims, keepdim, reduction_type, dtype):
    load = a.make_loader()

    def inner_fn(index):
        v = load(index)
        return ops.convert_element_type(v, dtype) if a.get_dtype() != dtype else v
    return lowering.reduction(node, a, dims, keepdim, reduction_type, dtype, inner_fn)


def _copy(lowering, node, a, dtype):
    load = a.make_loader()

    def inner_fn(index):
        v = load(index)
        return ops.convert_element_type(v, dtype) if a.get_dtype() != dtype else v
    return lowering.pointwise(node, tuple(a.get_size()), dtype, inner_fn)


@register_lowering(PRIMS["sum"])
def lower_sum(lowering, node, a, dims=None, keepdim=False):
    _, dtype = PRIMS["sum"].meta(_meta_of(a), dims, keepdim)
    dims = normalize_dims(dims, len(a.get_size()))
    if not dims:
        return _copy(lowering, node, a, dtype)
    return _reduce(lowering, node, a, dims, keepdim, "sum", dtype)


@register_lowering(PRIMS["amax"])
def lower_amax(lowering, node, a, dims=None, keepdim=False):
    dims = normalize_dims(dims, len(a.get_size()))
    if not dims:
        return _copy(lowering, node, a, a.get_dtype())
    return _reduce(lowering, node, a, dims, keepdim, "max", a.get_dtype())


def _divide(lowering, node, value: IRNode, divisor: float) -> ComputedBuffer:
    load = value.make_loader()
    dtype = value.get_dtype()
    return lowering.pointwise(node, tuple(value.get_size()), dtype,
                              lambda index: ops.div(load(index), constant(divisor, dtype)))


@register_lowering(PRIMS["mean"])
def lower_mean(lowering, node, a, dims=None, keepdim=False):
    _, dtype = PRIMS["mean"].meta(_meta_of(a), dims, keepdim)
    dims = normalize_dims(dims, len(a.get_size()))
    if not dims:
        return _copy(lowering, node, a, dtype)
    total = _reduce(lowering, node, a, dims, keepdim, "sum", dtype)
    n = math.prod(a.get_size()[d] for d in dims)
    return _divide(lowering, node, total, float(n))


@register_lowering(PRIMS["var"])
def lower_var(lowering, node, a, dims=None, correction=1, keepdim=False):
    _, dtype = PRIMS["var"].meta(_meta_of(a), dims, correction, keepdim)
    shape = tuple(a.get_size())
    dims = normalize_dims(dims, len(shape))
    n = math.prod(shape[d] for d in dims)
    mean = _divide(lowering, node, _reduce(lowering, node, a, dims, True, "sum", dtype),
                   float(n))
    load_a, load_mean = a.make_loader(), broadcast_loader(mean, shape)

    def squared_deviation(index):
        x = load_a(index)
        if a.get_dtype() != dtype:
            x = ops.convert_element_type(x, dtype)
        d = ops.sub(x, load_mean(index))
        return ops.mul(d, d)
    total = lowering.reduction(node, a, dims, keepdim, "sum", dtype, squared_deviation)
    return _divide(lowering, node, total, float(max(n - correction, 0)))


# ---------------------------------------------------------------------------------------
# Views: index arithmetic on the base
# ---------------------------------------------------------------------------------------

def _view(node, base, size, reindex):
    return View(base, size, reindex, node, [node])


@register_lowering(PRIMS["reshape"])
def lower_reshape(lowering, node, a, shape):
    in_shape = tuple(a.get_size())
    out_shape, _ = PRIMS["reshape"].meta(_meta_of(a), shape)
    out_shape = tuple(out_shape)
    if ir.same_sizes(in_shape, out_shape):
        return a
    # Only size-1 dimensions come or go: the other indices carry over one to one; else
    # each group of dims on one side holds exactly the elements of a group on the other (a
    # symbolic size counts as kept even where it is 1 at the example: carried over one to
    # one, its index is right for every value, and ``t % 4 != 1`` need not be guarded)
    def reindex(index):
        return ir.reshape_index(index, out_shape, in_shape)
    return _view(node, a, out_shape, reindex)


@register_lowering(PRIMS["permute"])
def lower_permute(lowering, node, a, dims):
    ndim = len(a.get_size())
    dims = [normalize_dim(d, ndim) for d in dims]
    size = [a.get_size()[d] for d in dims]

    def reindex(index):
        new = [0] * ndim
        for k, d in enumerate(dims):
            new[d] = index[k]
        return new
    return _view(node, a, size, reindex)


@register_lowering(PRIMS["expand"])
def lower_expand(lowering, node, a, shape):
    out_shape, _ = PRIMS["expand"].meta(_meta_of(a), shape)
    in_shape = tuple(a.get_size())
    lead = len(out_shape) - len(in_shape)

    def stretched(k: int) -> bool:
        # decided on the expressions first: a literal 1 reads index 0 whatever it stretches
        # to, the same size reads through; only other symbolic sizes are compared (guarded)
        size, out = ir.size_expr(in_shape[k]), ir.size_expr(out_shape[lead + k])
        if size == 1 or size == out:
            return size == 1
        return in_shape[k] == 1 and out_shape[lead + k] != 1

    def reindex(index):
        return [0 if stretched(k) else index[lead + k] for k in range(len(in_shape))]
    return _view(node, a, out_shape, reindex)


@register_lowering(PRIMS["squeeze"])
def lower_squeeze(lowering, node, a, dims=None):
    out_shape, _ = PRIMS["squeeze"].meta(_meta_of(a), dims)
    in_shape = tuple(a.get_size())
    dims = normalize_dims(dims, len(in_shape))
    kept = [k for k, s in enumerate(in_shape) if not (k in dims and s == 1)]

    def reindex(index):
        new = [0] * len(in_shape)
        for j, k in enumerate(kept):
            new[k] = index[j]
        return new
    return _view(node, a, out_shape, reindex)


@register_lowering(PRIMS["unsqueeze"])
def lower_unsqueeze(lowering, node, a, dim):
    out_shape, _ = PRIMS["unsqueeze"].meta(_meta_of(a), dim)
    dim = normalize_dim(dim, len(out_shape))
    return _view(node, a, out_shape, lambda index: index[:dim] + index[dim + 1:])


@register_lowering(PRIMS["slice"])
def lower_slice(lowering, node, a, dim, start=None, end=None, step=1):
    out_shape, _ = PRIMS["slice"].meta(_meta_of(a), dim, start, end, step)
    dim = normalize_dim(dim, len(out_shape))
    first = slice_indices(slice(start, end, step), a.get_size()[dim])[0]

    def reindex(index):
        new = list(index)
        new[dim] = first + step * index[dim]
        return new
    return _view(node, a, out_shape, reindex)


@register_lowering(PRIMS["cat"])
def lower_cat(lowering, node, tensors, dim=0):
    """``cat`` as one generated kernel: each output element loads from every input at its
    position taken modulo that input's size (always in bounds) and ``where`` keeps the load
    of the input whose range along ``dim`` holds the element."""
    metas = [_meta_of(t) for t in tensors]
    if not all(isinstance(t, IRNode) for t in tensors):
        return lowering.extern(node, node.target, (tensors, dim), {},
                               "cat of values that are not tensors runs in PyTorch")
    out_shape, dtype = PRIMS["cat"].meta(metas, dim)
    d = normalize_dim(dim, len(out_shape))
    pieces, offset = [], 0
    for t in tensors:
        size = tuple(t.get_size())
        if len(size) != len(out_shape) or size[d] == 0:
            continue  # empty: contributes nothing (a legacy 1-d empty tensor included)
        pieces.append((offset, size[d], t.make_loader(), t.get_dtype()))
        offset += size[d]

    def inner_fn(index):
        value = None
        for start, size, load, in_dtype in reversed(pieces):
            k = list(index)
            shift = size * (-(-start // size)) - start  # makes the position non-negative
            k[d] = ir.ModularIndexing(index[d] + shift, 1, size)
            v = load(k)
            if in_dtype != dtype:
                v = ops.convert_element_type(v, dtype)
            if value is None:
                value = v
            else:
                inside = ops.lt(ir.index_expr(index[d], torch.int64),
                                constant(start + size, torch.int64))
                value = ops.where(inside, v, value)
        return value if value is not None else constant(0, dtype)
    return lowering.pointwise(node, tuple(out_shape), dtype, inner_fn)


@register_lowering(PRIMS["index_select"])
def lower_index_select(lowering, node, a, dim, index):
    """``out[..., i, ...] = a[..., index[i], ...]``: an *indirect load* -- the position along
    ``dim`` is a value loaded from ``index`` (:func:`ir.indirect_indexing`, checked against
    the size, as ``torch.index_select`` raises for an index out of range). Embedding, gather,
    take and flip decompose to it, and become kernels that fuse with what is around them."""
    shape = tuple(a.get_size())
    if not shape or 0 in shape or not isinstance(index, IRNode):
        return lowering.extern(node, node.target, (a, dim, index), {},
                               "index_select on a 0-d or empty tensor runs in PyTorch")
    d = normalize_dim(dim, len(shape))
    out_shape = shape[:d] + tuple(index.get_size()) + shape[d + 1:]
    load_a, load_index = a.make_loader(), index.make_loader()

    def inner_fn(idx):
        position = ir.indirect_indexing(load_index([idx[d]]), shape[d])
        return load_a(list(idx[:d]) + [position] + list(idx[d + 1:]))
    return lowering.pointwise(node, out_shape, a.get_dtype(), inner_fn)


def _int_value(v: int | SymInt) -> Any:
    """An int64 value in a kernel: a number, or a symbolic size (``s1 - 1``) the kernel
    computes from its size arguments -- never the example's value."""
    return ir.index_expr(v.expr, torch.int64) if isinstance(v, SymInt) else \
        constant(v, torch.int64)


@register_lowering(PRIMS["slice_scatter"])
def lower_slice_scatter(lowering, node, base, src, dim, start=None, end=None, step=1):
    """``base`` with ``base[start:end:step]`` (along ``dim``) replaced by ``src``: each output
    element picks ``src`` when its position is in the slice, else ``base`` -- the gradient of
    a slice or a split, one pointwise kernel. The position in ``src`` is taken modulo its
    size so the load stays in bounds for the elements that do not use it."""
    shape = tuple(base.get_size())
    d = normalize_dim(dim, len(shape))
    first, stop, _ = slice_indices(slice(start, end, step), shape[d])
    n = _slice_length(first, stop, step)
    dtype = base.get_dtype()
    load_base = base.make_loader()
    if n == 0:
        return _copy(lowering, node, base, dtype)
    load_src = src.make_loader()
    # a multiple of n * step at least ``first``: keeps the modular index non-negative
    shift = step * n * -(-first // (step * n)) - first

    def inner_fn(index):
        k = index[d]
        position = ir.index_expr(k, torch.int64)
        inside = ops.logical_and(ops.ge(position, _int_value(first)),
                                 ops.le(position, _int_value(first + step * (n - 1))))
        if step != 1:
            on_step = ops.eq(ir.index_expr(ir.ModularIndexing(k + shift, 1, step),
                                           torch.int64), constant(0, torch.int64))
            inside = ops.logical_and(inside, on_step)
        at = list(index)
        at[d] = ir.ModularIndexing(k + shift, step, n)
        v = load_src(at)
        if src.get_dtype() != dtype:
            v = ops.convert_element_type(v, dtype)
        return ops.where(inside, v, load_base(index))
    return lowering.pointwise(node, shape, dtype, inner_fn)


def _slice_length(first: Any, stop: Any, step: int) -> Any:
    """``len(range(first, stop, step))`` for clamped bounds, ints or SymInts."""
    if isinstance(first, int) and isinstance(stop, int):
        return len(range(first, stop, step))
    return (stop - first + step - 1) // step if stop > first else 0


@register_lowering(PRIMS["index_add"])
def lower_index_add(lowering, node, base, dim, index, src):
    """``out = base; out[..., index[i], ...] += src[..., i, ...]`` -- a scatter, with
    repeated indices adding up. Written as a gather instead: output row ``j`` sums the
    ``src`` rows whose index is ``j`` (a reduction over the indices), plus ``base``. Each
    index is checked against the rows (``torch.index_add`` raises for a bad one)."""
    shape = tuple(base.get_size())
    _, dtype = PRIMS["index_add"].meta(_meta_of(base), dim, _meta_of(index), _meta_of(src))
    if not shape or not isinstance(index, IRNode):
        return lowering.extern(node, node.target, (base, dim, index, src), {},
                               "index_add into a 0-d tensor runs in PyTorch")
    d = normalize_dim(dim, len(shape))
    n = math.prod(index.get_size())
    if n == 0 or 0 in shape or not isinstance(math.prod(shape) * n, int) or \
            math.prod(shape) * n > config.index_add_dense_limit:   # (symbolic: PyTorch's scatter)
        return lowering.extern(node, node.target, (base, dim, index, src), {},
                               f"index_add of {n} rows into {math.prod(shape)} elements "
                               "runs in PyTorch (a scatter: the generated kernel compares "
                               "every row with every index, which pays only when small)")
    load_index, load_src, ndim = index.make_loader(), src.make_loader(), len(shape)

    def contribution(full):   # full = output index + (i,)
        i = full[ndim]
        row = ir.indirect_indexing(load_index([i]), shape[d])
        hit = ops.eq(ir.index_expr(row, torch.int64), ir.index_expr(full[d], torch.int64))
        v = load_src(list(full[:d]) + [i] + list(full[d + 1:ndim]))
        if src.get_dtype() != dtype:
            v = ops.convert_element_type(v, dtype)
        return ops.where(hit, v, constant(0, dtype))
    added = lowering.reduction(node, shape + (n,), (ndim,), False, "sum", dtype,
                               contribution)
    load_base, load_added = base.make_loader(), added.make_loader()

    def inner_fn(index):
        b = load_base(index)
        if base.get_dtype() != dtype:
            b = ops.convert_element_type(b, dtype)
        return ops.add(b, load_added(index))
    return lowering.pointwise(node, shape, dtype, inner_fn)


def _extern_rule(reason: str):
    def rule(lowering, node, *args, **kwargs):
        return lowering.extern(node, node.target, args, kwargs,
                               f"{node.target.name} {reason}")
    return rule


def _rebased(view: Any, old: Any, new: Any) -> Any:
    """The chain of views from ``old`` up to ``view``, rebuilt on ``new`` (a buffer holding
    ``old``'s elements in the same index space): each view's index arithmetic maps into its
    base's indices, whatever the base is."""
    if view is old:
        return new
    return View(_rebased(view.base, old, new), view.get_size(), view.reindex, view.node,
                view.origins)


def _copied(lowering: GraphLowering, view: Any) -> Any:
    """``view`` read from the copy ``matrix_operand`` made of its elements, if it made one."""
    target = view
    while isinstance(target, View):
        if id(target) in lowering.matrix_copies:
            return _rebased(view, target, lowering.matrix_copies[id(target)][1])
        if target.node is None or target.node.target not in (PRIMS["reshape"],
                                                             PRIMS["permute"]):
            return None
        target = target.base
    return None


def matrix_operand(lowering: GraphLowering, node: Node, x: Any) -> Any:
    """A matrix product's operand (a matrix, or a batch of them as ``batch_matmuls`` in
    compile_fx.py merges it) as BLAS can read it: ``x`` itself when it is a buffer or a
    strided view of one, in either orientation (``torch.bmm`` reads a transpose as it is).

    Otherwise -- a view whose merged batch dimension is not one stride, as attention's
    heads: ``(B, T, H, D)`` moved to ``(B, H, T, D)`` and merged to ``(B*H, T, D)`` -- PyTorch
    would copy it inside the call, on every call and for each product reading it. Instead a
    kernel of ours copies it once (fused into its producer where it can), and every
    product of this graph reading the same elements reads that copy (``matrix_copies``):
    the copy is of the view under the reshapes that merge (or split) dimensions, row-major,
    so the reshapes become strided views of it, and a transposed operand reads it
    transposed. A saved value of a training forward that is one of those views is the copy
    too (``lower_graph``'s outputs: no second copy by PyTorch's ``reshape``). Mirrors:
    Inductor's ``ExternKernel.realize_input`` / ``require_stride1`` for ``bmm``'s inputs."""
    if not isinstance(x, View) or len(x.get_size()) not in (2, 3):
        return x
    copied = _copied(lowering, x)
    if copied is not None:
        return copied
    rank = len(x.get_size())
    swap = (1, 0) if rank == 2 else (0, 2, 1)
    transposed = x.node is not None and x.node.target is PRIMS["permute"] and \
        tuple(int(d) % rank for d in x.node.args[1]) == swap
    inner = x.base if transposed else x
    if not isinstance(inner, View):
        return x
    base = ir.base_buffer(inner)
    if not isinstance(base, ir.Buffer) or getattr(base, "multi_output", False) or \
            ir.view_strides(inner, base) is not None:
        return x
    target = inner                # the elements in row-major order: under the reshapes
    while target.node is not None and target.node.target is PRIMS["reshape"] and \
            isinstance(target.base, View):
        target = target.base
    copy = _copy(lowering, node, target, target.get_dtype())
    lowering.matrix_copies[id(target)] = (target, copy)
    return _rebased(x, target, copy)


@register_lowering(PRIMS["matmul"])
def lower_matmul(lowering, node, a, b):
    """A PyTorch call -- or, under max-autotune, the faster of it and a Triton template."""
    def extern(note: str = ""):
        operands = tuple(matrix_operand(lowering, node, v) for v in (a, b))
        return lowering.extern(node, node.target, operands, {}, "matmul is a library call "
                               f"(BLAS), run by PyTorch{' ' + note if note else ''}")
    if lowering.tunes_matmul(node, a, b):
        return select_matmul(lowering, node, a, b, None, extern)
    return extern()


for _name, _why in (("convolution_backward_input", "is a library call, run by PyTorch"),
                    ("convolution_backward_weight", "is a library call, run by PyTorch")):
    if _name in PRIMS:
        lowerings[PRIMS[_name]] = _extern_rule(_why)


def prefers_channels_last(lowering: GraphLowering, node: Node, x: Any, weight: Any,
                          call: Callable, on_copies: Callable, args: tuple, kwargs: dict
                          ) -> bool:
    """Whether a 2-d convolution on the CPU runs on channels-last copies of its input (and
    gradient): PyTorch's kernels are faster there for some (EfficientNet's 1x1s at one
    thread, ConvNeXt's 7x7 depthwise) and slower for others (a dense 3x3 of ResNet-18; a
    depthwise 3x3 once the copies are paid), so ``autotune.conv_channels_last``
    times ``call`` against ``on_copies`` on the real sizes (``config.conv_layout``). Not
    for symbolic sizes (comparing one would guard on it)."""
    if not all(isinstance(v, IRNode) for v in (x, weight)) or \
            x.get_device().type != "cpu" or len(x.get_size()) != 4 or \
            not all(isinstance(s, int) for s in (*x.get_size(), *weight.get_size())):
        return False
    op = f"{node.name} (conv {'x'.join(map(str, weight.get_size()))})"
    return conv_channels_last(op, call, on_copies, args, kwargs, lowering.autotune_table)


def convolution_channels_last(x, weight, bias=None, stride=1, padding=0, dilation=1,
                              groups=1):
    """The convolution prim on a channels-last copy of ``x`` (see
    :func:`prefers_channels_last`), the result copied back to contiguous (as eager's)."""
    return PRIMS["convolution"].reference(
        x.contiguous(memory_format=torch.channels_last), weight, bias, stride, padding,
        dilation, groups).contiguous()


def convolution_backward_channels_last(grad, x, weight, *args):
    """``aten.convolution_backward`` on channels-last copies of the gradient and the input
    (see :func:`prefers_channels_last`), the gradients copied back to contiguous (a dense
    filter's gradient comes back channels-last too)."""
    return tuple(None if g is None else g.contiguous()
                 for g in torch.ops.aten.convolution_backward.default(
                     grad.contiguous(memory_format=torch.channels_last),
                     x.contiguous(memory_format=torch.channels_last), weight, *args))


@register_lowering(PRIMS["convolution"])
def lower_convolution(lowering, node, x, weight, *args, **kwargs):
    """A PyTorch call, on channels-last copies where PyTorch's CPU kernels are faster."""
    if prefers_channels_last(lowering, node, x, weight, PRIMS["convolution"].reference,
                             convolution_channels_last, (x, weight, *args), kwargs):
        return lowering.extern(node, convolution_channels_last, (x, weight, *args), kwargs,
                               "convolution is a library call, run by PyTorch (on a "
                               "channels-last copy: measured faster)")
    return lowering.extern(node, node.target, (x, weight, *args), kwargs,
                           "convolution is a library call, run by PyTorch")


@register_lowering(torch.ops.aten.convolution_backward.default)
def lower_convolution_backward(lowering, node, *args):
    """Both gradients of a convolution in one PyTorch call (``fuse_convolution_backward``
    in compile_fx.py pairs them): a tuple, read through ``getitem``."""
    reason = "convolution_backward (the input and weight gradients in one call) is a " \
        "library call, run by PyTorch"
    if prefers_channels_last(lowering, node, args[1], args[2], node.target,
                             convolution_backward_channels_last, args, {}):
        return lowering.extern(node, convolution_backward_channels_last, args, {},
                               reason + " (on channels-last copies: measured faster)",
                               fallback=False)
    return lowering.extern(node, node.target, args, {}, reason, fallback=False)


@register_lowering(torch.Tensor.detach, torch.detach)
def lower_detach(lowering, node, *args, **kwargs):
    """The compiled graph runs without autograd: detach is the value itself (as Inductor's
    ``nop`` lowering); a graph output keeps its own detached tensor."""
    if len(args) == 1 and not kwargs and isinstance(args[0], IRNode) and \
            all(user.op != "output" for user in node.users):
        return args[0]
    return lowering.fallback(node, args, kwargs)


@register_lowering(torch.addmm)
def lower_addmm(lowering, node, *args, **kwargs):
    """``fuse_addmm``'s product plus bias: under max-autotune the faster of PyTorch's call
    and a Triton template, else PyTorch's call (its matrices as BLAS reads them:
    :func:`matrix_operand`)."""
    def operands():
        if len(args) != 3:
            return args
        return (args[0], *(matrix_operand(lowering, node, v) for v in args[1:]))
    if len(args) == 3 and not kwargs and lowering.tunes_matmul(node, *args[1:], bias=args[0]):
        return select_matmul(lowering, node, args[1], args[2], args[0], lambda note:
                             lowering.extern(node, node.target, operands(), kwargs, "addmm is "
                                             f"a library call (BLAS), run by PyTorch {note}"))
    return lowering.fallback(node, operands(), kwargs)



@register_lowering(sequential_scan)
def lower_scan(lowering: GraphLowering, node: Node, *args: Any, **kwargs: Any
               ) -> ExternKernel:
    """``sequential_scan`` over a symbolic length (Mamba's selective scan): one
    generated kernel -- C++ or Triton, ``codegen/scan.py`` -- when ``combine_fn`` is
    pointwise, else PyTorch's loop, saying why."""
    def fallback(why: str) -> ExternKernel:
        return lowering.extern(node, node.target, args, kwargs,
                               f"sequential_scan runs in PyTorch: {why}")
    bound = inspect.signature(sequential_scan).bind(*node.args, **node.kwargs)
    bound.apply_defaults()
    xs = bound.arguments["xs"]
    packed = type(xs) if isinstance(xs, (tuple, list)) else None
    leaves = list(xs) if packed else [xs]
    if not all(isinstance(x, Node) and hasattr(x.meta.get("tensor_meta"), "shape")
               for x in leaves):
        return fallback("its inputs are not tensors of the graph")
    scan = lowering.scan_kernel(bound, [x.meta["tensor_meta"] for x in leaves], packed)
    if isinstance(scan, str):
        return fallback(scan)
    ir_xs = args[1] if len(args) > 1 else kwargs["xs"]
    fn_name = getattr(bound.arguments["combine_fn"], "__name__", "combine_fn")
    language = _LANGUAGE[lowering.codegen]
    return lowering.extern(node, scan, (ir_xs,), {}, f"sequential_scan of {fn_name}: a "
                           f"generated {language} loop over the scan dimension "
                           f"({scan.__name__})", fallback=False)


@register_lowering(BackwardOf(sequential_scan))
def lower_scan_backward(lowering: GraphLowering, node: Node, *args: Any, **kwargs: Any
                        ) -> ExternKernel:
    """The gradient of ``sequential_scan`` (stage 4's ``extern_backward`` of it): a
    generated kernel when the forward's would be one and the VJP rules of
    ``combine_fn``'s prims are pointwise too, else PyTorch's autograd through its loop."""
    def fallback(why: str) -> ExternKernel:
        return lowering.extern(node, node.target, args, kwargs, "the gradient of "
                               f"sequential_scan runs in PyTorch: {why}")
    _, call_args, call_kwargs, grad_outputs, *inputs = node.args
    bound = inspect.signature(sequential_scan).bind(*call_args, **call_kwargs)
    bound.apply_defaults()
    xs = bound.arguments["xs"]
    packed = type(xs) if isinstance(xs, (tuple, list)) else None
    slots = list(xs) if packed else [xs]
    ir_grads = args[3]
    if not packed:   # (one tensor scanned: one gradient, not a list)
        grad_outputs, ir_grads = [grad_outputs], [ir_grads]
    if not all(isinstance(x, Slot) for x in slots) or \
            not isinstance(grad_outputs, (tuple, list)) or len(grad_outputs) != len(slots):
        return fallback("its arguments are not one tensor per leaf")
    leaf_inputs = [x.index for x in slots]
    metas = [inputs[i].meta.get("tensor_meta") for i in leaf_inputs]
    if not all(hasattr(m, "shape") for m in metas):
        return fallback("its inputs are not tensors of the graph")
    scan = lowering.scan_kernel(bound, metas, packed)
    if isinstance(scan, str):
        return fallback(scan)
    needs_grad = node.kwargs.get("needs_grad") or [True] * len(inputs)
    grad = compile_scan_backward(scan, bound.arguments["combine_fn"], metas[0].dtype,
                                 bool(bound.arguments["reverse"]), leaf_inputs,
                                 len(inputs), needs_grad,
                                 [g is not None for g in grad_outputs])
    if isinstance(grad, str):
        return fallback(grad)
    return lowering.extern(node, grad, (ir_grads, *args[4:]), {},
                           "the gradient of sequential_scan: the scan again, then a "
                           f"generated {_LANGUAGE[lowering.codegen]} loop back over it "
                           f"({grad.__name__})",
                           fallback=False)


_LANGUAGE = {"cpp": "C++", "triton": "Triton"}   # (of the scan kernels' descriptions)


def lower_graph(graph: Graph, example_inputs: Sequence[Any], codegen: str = "cpp",
                mode: str | None = None) -> GraphLowering:
    """Lower ``graph`` (prim calls with ``tensor_meta``) for ``example_inputs``."""
    return GraphLowering(graph, example_inputs, codegen, mode).run()


def evaluate_lowering(lowering: GraphLowering, *inputs: torch.Tensor) -> Any:
    """Run the lowered buffers one by one with :func:`ir.evaluate_buffer` (extern kernels
    call PyTorch) and return the graph's outputs: the loop IR's reference interpreter."""
    values: dict[str, torch.Tensor] = {}
    storage: dict[str, torch.Tensor] = {}
    for graph_input, x in zip(lowering.graph_inputs, inputs):
        if graph_input is not None:
            values[graph_input.name] = x
            storage[graph_input.name] = x.as_strided((x.untyped_storage().nbytes()
                                              // x.element_size(),), (1,), 0)
    offsets = {n: v.storage_offset() for n, v in values.items()}

    def as_tensor(v):
        if isinstance(v, View):
            base = as_tensor(v.base)
            args = [base] + list(v.node.args[1:])
            return v.node.target.reference(*args, **v.node.kwargs)
        if isinstance(v, ir.Buffer):
            return values[v.name]
        return v

    for buf in lowering.buffers:
        if isinstance(buf, ir.TemplateBuffer):   # (a matmul template: PyTorch's product)
            a, b = as_tensor(buf.a), as_tensor(buf.b)
            out = (torch.matmul(a, b) if buf.bias is None else
                   torch.addmm(as_tensor(buf.bias), a, b)).contiguous()
        elif isinstance(buf, ExternKernel):
            args = map_aggregate(buf.args, as_tensor)
            kwargs = map_aggregate(buf.kwargs, as_tensor)
            fn = buf.kernel.reference if isinstance(buf.kernel, Prim) else buf.kernel
            out = fn(*args, **kwargs).contiguous()
        else:
            view_storage = {}
            for name, flat in storage.items():
                view_storage[name] = flat[offsets.get(name, 0):]
            out = ir.evaluate_buffer(cast(ComputedBuffer, buf), view_storage)
        values[buf.name] = out
        storage[buf.name] = out.reshape(-1)
    return map_aggregate(lowering.outputs, as_tensor)
