"""C++/OpenMP kernels for the CPU: one ``extern "C"`` function per fused kernel.

The shape of the code, for a pointwise kernel over ``(M, N)``::

    #pragma omp parallel for            // rows split across cores
    for (int64_t x0 = 0; x0 < M; x0++) {
        #pragma omp simd                // the contiguous inner loop: vector instructions
        for (int64_t x1 = 0; x1 < N; x1++) {
            auto tmp0 = in_ptr_x[x1 + N * x0];
            ...
            out_ptr_buf2[x1 + N * x0] = tmp3;
        }
    }

and for a reduction kernel (softmax: x loops over rows, each phase is an r loop over a row)::

    #pragma omp parallel for
    for (int64_t x0 = 0; x0 < M; x0++) {
        float acc0 = -inf;  #pragma omp simd reduction(max:acc0)  for r0 ... // amax
        float acc1 = 0;     #pragma omp simd reduction(+:acc1)    for r0 ... // sum(exp(x-max))
        #pragma omp simd  for r0 ... out[...] = exp(x - acc0) / acc1;         // the epilogue
    }

Only the outputs other kernels (or the caller) read are stored; everything else stays in
registers. Tensors arrive as raw data pointers (``ctypes``); sizes are constants baked into
the source, which is what lets the compiler vectorise freely -- except symbolic sizes (a
batch size that may change between calls, ``s0``): those are ``int64_t`` arguments after the
pointers, read by the wrapper from its inputs' sizes, and loop bounds and index expressions
are written in them (``for (int64_t x0 = 0; x0 < 16 * s0; x0++)``). Whether a loop runs on
several threads is then decided when it runs, by a plain ``if`` between two copies of the
loop nest (:meth:`CppKernel.open_loop`)::

    if (16 * s0 >= 32768) {
        #pragma omp parallel for
        for (int64_t x0 = 0; x0 < 16 * s0; x0++) { ... }
    } else {
        for (int64_t x0 = 0; x0 < 16 * s0; x0++) { ... }   // as a static kernel that small
    }

Other choices that only affect speed (nest the reduction loop? tile?) are made from the sizes
of the example inputs (their *hints*) and guard nothing; choices that affect the result are
comparisons of :class:`~tutorcompile.fx.symbolic_shapes.SymInt` s, which record the guard
they relied on.

Mirrors: torch/_inductor/codegen/cpp.py (``CppKernel``, ``CppOverrides``; Inductor's
``CppVecKernel`` writes explicit vector code where we rely on ``omp simd``).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from typing import Any

import sympy
import torch

from ...fx.symbolic_shapes import hint_int
from ...ops import PRIMS, set_handler
from .. import config, ir
from ..codecache import cpp_compile_async, cpp_flags, cpp_kernel_async
from .common import (
    HALF_DTYPES,
    CSEVar,
    KernelPlan,
    KernelWriter,
    canonical_source,
    compute_dtype,
    origin_names,
    origin_sources,
    print_index,
)

CPP_TYPES = {torch.float32: "float", torch.float64: "double", torch.int8: "int8_t",
             torch.int16: "int16_t", torch.int32: "int32_t", torch.int64: "int64_t",
             torch.uint8: "uint8_t", torch.bool: "bool"}

HALF_CONVERSIONS = {torch.float16: ("tc_half_to_float", "tc_float_to_half"),
                    torch.bfloat16: ("tc_bf16_to_float", "tc_float_to_bf16")}
"""A 16-bit float's pointer is ``uint16_t*``: its bits, converted by these functions of
:data:`CPP_PRELUDE` (to float when loaded, back when stored; see ``compute_dtype``)."""


def storage_type(dtype: torch.dtype) -> str:
    """The C++ element type of a buffer of ``dtype`` (its pointer's type)."""
    return "uint16_t" if dtype in HALF_DTYPES else CPP_TYPES[dtype]


STATUS = "status"
"""A kernel that checks indirect indices returns this: 0, or the number of the (last)
check that failed; :class:`CppKernelCall` turns it into an ``IndexError``."""


class CppKernel(KernelWriter):
    """Writes one C++ kernel for a :class:`KernelPlan`.

    ``tile`` (outputs per tile of an outer-dimension reduction) and ``parallel`` (None: by
    size, or forced on/off) are the choices ``mode="max-autotune"`` tries."""
    language = "cpp"

    def __init__(self, plan: KernelPlan, name: str, tile: int | None = None,
                 parallel: bool | None = None, nest_reduction: bool = False,
                 split_inner: int = 0, short_inner: bool = False):
        super().__init__(plan, name)
        self.tile = config.cpp_tile if tile is None else tile
        self.parallel = parallel
        # reduction_body's r loop: flat (``r0`` over all reduced elements), or nested (see
        # open_r_loops); a flat loop whose index expressions divide ``r0`` asks for nesting
        self.nest_reduction = nest_reduction
        self.watch_r = False
        self.wants_nesting = False
        # pointwise_body's loop over a short last dim: flat (``x0`` over every element), or
        # with the dim before it vectorised and the short one unrolled inside (see
        # pointwise_body); a flat loop that divides ``x0`` in a load or store asks for that
        self.short_inner = short_inner
        self.watch_flat = False
        self.wants_short_inner = False
        self.written: set[str] = set()   # stored by a loop already closed (a full phase)
        # symbolic sizes: the C++ condition for threads, and the parallel loops open now,
        # each as (its indent, where its lines start, the pragma of its serial twin)
        self.parallel_if = ""
        self.twins: list[tuple[int, int, str | None]] = []
        self.stored_at: dict[str, Any] = {}   # buffer -> the offset its store wrote
        # hoisted digits of x0 (``x0_1``) and how to write x0 back in their place
        self.rejoin: dict = {}
        self.digits: set = set()
        self.tile_len = "xlen"   # the count of a tile's loops (open_tile)
        # the vectorised x loop split in two, x = k*a + b (see note_split): k, or 0; the
        # variable to watch for divisions while it is not split, and the divisors seen
        self.split_inner = split_inner
        self.split_watch: sympy.Symbol | None = None
        self.split_divisors: set[int] = set()
        self.split_loop: tuple = ()   # (extent, tile) of the watched loop
        self.unsplit: dict = {}    # ModularIndexing(b, 1, k) -> b, when printing
        # loop indices that differ between the lanes of the vectorised loop
        self.lane_vars: set[str] = set()

    def note_index(self, expr) -> None:
        """Flag a flat reduction loop that would compute a divided index: ``r0 / 32`` in a
        load means the reduced dims do not collapse into one stride-1 run, and the
        vectoriser then gathers element by element."""
        if self.watch_r and not self.wants_nesting:
            r0 = ir.index_symbol("r0")
            self.wants_nesting = any(
                isinstance(e, (ir.FloorDiv, ir.ModularIndexing)) and r0 in e.free_symbols
                for e in sympy.preorder_traversal(ir.simplify_index(expr)))

    def note_split(self, expr) -> None:
        """Record the divisors of the vectorised x loop's variable in an index: a transposed
        view of heads (attention's ``(b, h, t, d) -> (b, t, h*d)``) indexes columns as
        ``512 * ((x1 / 16) % 4) + x1 % 16``, a gather in every lane that g++ leaves scalar
        or gathers slowly. Split the loop at their common divisor ``k`` -- ``x1 = k*x1a +
        x1b``, the vector loop over ``x1b`` -- and the index becomes ``512 * (x1a % 4) +
        x1b``: contiguous runs of ``k`` (GPT's attention-gradient layout; see
        benchmarks/MEASUREMENTS.md).
        :func:`_generate` then writes the kernel again with ``split_inner=k``."""
        if self.split_watch is None:
            return
        # (simplified: a contiguous read of a flat loop is ``x0``, not the digits
        # ``16*((x0 / 16) % 672) + 4*((x0 / 4) % 4) + x0 % 4`` that would ask for 4)
        for e in sympy.preorder_traversal(ir.simplify_index(expr)):
            if isinstance(e, (ir.FloorDiv, ir.ModularIndexing)) and \
                    self.split_watch in e.args[0].free_symbols:
                divisor = e.args[1] if e.args[1] != 1 or isinstance(e, ir.FloorDiv) \
                    else e.args[2]
                if divisor.is_Integer and int(divisor) > 1:
                    self.split_divisors.add(int(divisor))

    def split_factor(self) -> int:
        """The split this kernel asks for (0: none): the divisors' common divisor, when it
        divides the watched loop's extent (and the tile), leaves at least
        ``config.cpp_split_min`` lanes, and is less than the extent."""
        if not self.split_divisors or not isinstance(self.split_loop[0], int):
            return 0
        extent, *multiple_of = self.split_loop
        k = math.gcd(*self.split_divisors)
        if k < config.cpp_split_min or k >= extent or extent % k or any(m % k for m in multiple_of):
            return 0
        return k

    def split_var(self, a: str, b: str) -> Any:
        """``k*a + b`` for the split loop's variables, ``b`` as a digit (``b % k``) so the
        index simplification knows it stays below ``k``; printed as plain ``b``."""
        k = self.split_inner
        digit = ir.ModularIndexing(ir.index_symbol(b), 1, k)
        self.unsplit[digit] = ir.index_symbol(b)
        return k * ir.index_symbol(a) + digit

    def load(self, buffer: ir.Buffer, index):
        expr = self.offset_of(buffer.layout, index)
        if buffer.name in self.written and \
                ir.simplify_index(expr) == ir.simplify_index(self.stored_at[buffer.name]):
            # stored at this very element by an earlier loop over this row: read it back
            # (from L1) rather than compute it again -- a softmax's exp once, not once per
            # phase (GPT's attention softmax in training stores its exp). Any other element
            # (a transposed read) may not be written yet.
            offset = print_index(expr, "cpp")
            return self.loaded(f"{self.out_name(buffer.name)}[{offset}]", buffer.get_dtype(),
                               self.index_deps(expr))
        if buffer.name not in self.plan.names:
            self.note_index(expr)
        return super().load(buffer, index)

    def call(self, prim, args, kwargs):
        """A division by a value that is the same in every lane of the vectorised loop (a
        softmax's row sum, a mean's count of a row) is a multiplication by its reciprocal,
        which g++ then computes once per row: a vector division costs several
        multiplications (a softmax's backward gains most). Within an ulp of the quotient,
        as PyTorch's own vectorised softmax (``_vec_softmax`` multiplies by ``1 / sum``).
        Divisions by constants and by per-lane values stay divisions."""
        divisor = args[1] if len(args) == 2 else None
        if prim is PRIMS["div"] and not kwargs and isinstance(divisor, CSEVar) and \
                divisor.name.isidentifier() and divisor.dtype.is_floating_point and \
                not divisor.deps & self.lane_vars and \
                all(a.dtype.is_floating_point for a in args if isinstance(a, CSEVar)):
            dtype = torch.promote_types(*(a.dtype for a in args if isinstance(a, CSEVar)))
            numerator = args[0].name if isinstance(args[0], CSEVar) else \
                self.literal(args[0], dtype)
            return self.cse(f"({numerator} * ({self.literal(1, dtype)} / {divisor}))", dtype,
                            frozenset().union(*(a.deps for a in args
                                                if isinstance(a, CSEVar))))
        return super().call(prim, args, kwargs)

    def index_expr(self, expr, dtype):
        self.note_index(expr)
        self.note_split(expr)
        if self.unsplit:
            expr = sympy.sympify(expr).xreplace(self.unsplit)
        return super().index_expr(expr, dtype)

    def dtype_name(self, dtype: torch.dtype) -> str:
        return CPP_TYPES[dtype]

    def literal(self, value: Any, dtype: torch.dtype) -> str:
        if isinstance(value, bool) or dtype == torch.bool:
            return "true" if value else "false"
        if dtype.is_floating_point:
            t = CPP_TYPES[dtype]
            value = float(value)
            if math.isinf(value):
                return f"{'-' if value < 0 else ''}std::numeric_limits<{t}>::infinity()"
            if math.isnan(value):
                return f"std::numeric_limits<{t}>::quiet_NaN()"
            return repr(value) + ("f" if dtype == torch.float32 else "")
        return f"static_cast<{CPP_TYPES[dtype]}>({int(value)})"

    def wrap_constant(self, value: Any, dtype: torch.dtype) -> CSEVar:
        return CSEVar(self.literal(value, dtype), dtype)

    def load_expr(self, arg: str, offset: str, index) -> str:
        if any(self.arg_name(n) == arg and b.get_dtype() == torch.bool
               for n, b in self.inputs.items()):
            # read a bool as its byte: g++ does not vectorise a loop that selects on a
            # loaded ``bool`` and calls a vector math function (a masked softmax's exp);
            # the byte load, cast back to bool, vectorises
            return f"static_cast<bool>(reinterpret_cast<const uint8_t*>({arg})[{offset}])"
        return f"{arg}[{offset}]"

    def index_cast(self, index: str, dtype: torch.dtype) -> str:
        return f"static_cast<{CPP_TYPES[dtype]}>({index})"

    def widen(self, text: str, dtype: torch.dtype) -> str:
        return f"{HALF_CONVERSIONS[dtype][0]}({text})"

    def narrow(self, value: CSEVar, dtype: torch.dtype) -> str:
        return f"{HALF_CONVERSIONS[dtype][1]}({value})"

    def assign(self, var: CSEVar, expr: str) -> str:
        return f"auto {var} = {expr};"

    def check_index(self, value: CSEVar, size: str, check: int, what: str) -> CSEVar:
        # A bad index sets the kernel's status (the highest check number that failed: a
        # max-reduction over the threads) and reads element 0 instead; the caller raises.
        var = self.newvar(torch.int64)
        self.writeline(f"auto {var} = static_cast<int64_t>({value});")
        self.writeline(f"if ({var} < 0 || {var} >= {size}) {{ {STATUS} = std::max({STATUS}, "
                       f"{check}); {var} = 0; }}  // {what}")
        return var

    def store(self, node: ir.ComputedBuffer, index, value: CSEVar) -> None:
        self.outputs.setdefault(node.name, node)
        self.stored_at[node.name] = self.offset_of(node.layout, index)
        self.note_index(self.stored_at[node.name])
        offset = print_index(self.stored_at[node.name], "cpp")
        text = str(value)
        if node.get_dtype() in HALF_DTYPES:   # computed in float: rounded as it is stored
            text = self.narrow(value, node.get_dtype())
        self.writeline(f"{self.out_name(node.name)}[{offset}] = {text};")

    # -- loops ---------------------------------------------------------------------------
    def open_loop(self, var: str, size: int, pragma: str | None) -> None:
        """Open ``for (var = 0; var < size; var++)`` under ``#pragma <pragma>``.

        A parallel loop of a kernel with symbolic sizes is written twice (its twin is
        written by :meth:`close_loop`): ``if (<enough work>) { <parallel loop> } else {
        <the same loop on one thread> }``. OpenMP's own ``if`` clause (``#pragma omp
        parallel for if(...)``) decides as well, but costs the small sizes that skip threads
        what a static kernel of that size never pays: the loop still moves into the
        function OpenMP outlines for its threads, where the kernel's pointers arrive
        through a struct without their ``__restrict__`` and g++ vectorises it behind
        run-time overlap checks or not at all, and the team is set up and torn down on every
        call, which costs more than the smallest kernels' work (benchmarks/MEASUREMENTS.md).
        Inductor decides at compile time, from the size hints
        (``decide_parallel_depth`` in torch/_inductor/codegen/cpp.py); deciding per call
        keeps a large batch on several threads when a small one was the hint."""
        twin = pragma is not None and pragma.startswith("omp parallel") and bool(self.parallel_if)
        if pragma is not None and twin:
            self.writeline(f"if ({self.parallel_if})")
            self.writeline("{")
            self.indent += 1
            serial = "omp simd" if pragma.startswith("omp parallel for simd") else None
            self.twins.append((self.indent, len(self.lines), serial))
        if pragma and "simd" in pragma:
            self.lane_vars.add(var)
        if pragma:
            self.writeline(f"#pragma {pragma}")
        self.writeline(f"for (int64_t {var} = 0; {var} < {self.size(size)}; {var}++)")
        self.writeline("{")
        self.indent += 1
        self.push_scope()

    def close_loop(self) -> None:
        self.pop_scope()
        self.indent -= 1
        self.writeline("}")
        if self.twins and self.twins[-1][0] == self.indent:   # its serial twin:
            _, start, serial = self.twins.pop()                 # the same lines, no threads
            loop = self.lines[start + 1:]
            pad = "    " * self.indent
            self.indent -= 1
            self.writeline("}")
            self.writeline("else")
            self.writeline("{")
            if serial:
                self.lines.append(f"{pad}#pragma {serial}")
            self.lines += loop
            self.writeline("}")

    def generate_body(self) -> None:
        plan = self.plan
        numel = plan.xnumel * plan.rnumel
        if self.parallel is None and not isinstance(numel, int):
            # a symbolic size: threads or not is decided when the kernel runs (open_loop),
            # not by the example's size
            big = True
            self.parallel_if = f"{self.size(numel)} >= {config.cpp_parallel_min_elements}"
        else:
            big = numel >= config.cpp_parallel_min_elements if self.parallel is None \
                else self.parallel
        with set_handler(self):
            if not plan.is_reduction:
                self.pointwise_body(big)
            else:
                last = len(plan.shape) - 1
                if hint_int(plan.xnumel) > 1 and last not in plan.reduced_dims:
                    self.tiled_reduction_body(big)   # the contiguous dimension is kept
                else:
                    self.reduction_body(big)

    def pointwise_body(self, big: bool) -> None:
        shape = self.plan.shape
        if not shape:
            self.emit_nodes([], [])
            return
        outer, inner = math.prod(shape[:-1]), shape[-1]
        if self.short_inner:
            # The last dim is short and a flat loop would divide its index (below): the dim
            # before it is the vector loop and the short one runs inside it, unrolled. A
            # max pool's gradient written into its (w/2, 2) split view then reads the pooled
            # gradient at ``x1``, not ``x0 / 2`` -- a gather g++ leaves scalar on CPUs whose
            # gathers are slow (3.5x on AlexNet's 8x16x32x32 scatter, measured on one core).
            self.open_loop("x0", math.prod(shape[:-2]), "omp parallel for" if big else None)
            self.open_loop("x1", shape[-2], "omp simd")
            self.writeline(f"#pragma GCC unroll {inner}")
            self.open_loop("x2", inner, None)
            xvars = ir.unflatten_index(ir.index_symbol("x0"), shape[:-2]) + \
                [ir.index_symbol("x1"), ir.index_symbol("x2")]
            self.emit_nodes(xvars, [])
            for _ in range(3):
                self.close_loop()
        elif hint_int(inner) < 8 or outer == 0:   # (empty: the flat loop runs 0 times)
            # A short last dimension gives the vectoriser nothing to work with: run one
            # flat loop over all elements instead (indices come from div/mod by constants).
            # A per-channel value of an NCHW tensor with a small image (``(x0 / 16) % 672``,
            # a batch norm's or a squeeze-excite's scale at 4x4) asks, through note_split,
            # for the loop split at the image size: the value is then one load per run of
            # 16 contiguous elements, not a gather in every lane.
            numel = math.prod(shape)
            self.watch_flat = len(shape) >= 2 and isinstance(inner, int) and \
                hint_int(shape[-2]) >= config.cpp_split_min
            if self.split_inner:
                self.open_loop("x0a", numel // self.split_inner,
                               "omp parallel for" if big else None)
                self.open_loop("x0b", self.split_inner, "omp simd")
                x0 = self.split_var("x0a", "x0b")
            else:
                self.open_loop("x0", numel, "omp parallel for simd" if big else "omp simd")
                x0 = self.split_watch = ir.index_symbol("x0")
                self.split_loop = (numel,)
            self.emit_nodes(ir.unflatten_index(x0, shape), [])
            self.close_loop()
            if self.split_inner:
                self.close_loop()
        elif not (isinstance(outer, int) and outer == 1):   # (a symbolic count: nested)
            self.open_loop("x0", outer, "omp parallel for" if big else None)
            if self.split_inner:
                self.open_loop("x1a", inner // self.split_inner, None)
                self.open_loop("x1b", self.split_inner, "omp simd")
                last = self.split_var("x1a", "x1b")
            else:
                self.open_loop("x1", inner, "omp simd")
                last = self.split_watch = ir.index_symbol("x1")
                self.split_loop = (inner,)
            xvars = ir.unflatten_index(ir.index_symbol("x0"), shape[:-1]) + [last]
            self.emit_nodes(xvars, [])
            self.close_loop()
            if self.split_inner:
                self.close_loop()
            self.close_loop()
        else:
            self.open_loop("x1", inner, "omp parallel for simd" if big else "omp simd")
            self.emit_nodes([0] * (len(shape) - 1) + [ir.index_symbol("x1")], [])
            self.close_loop()

    def emit_nodes(self, xvars, rvars) -> None:
        for node in self.plan.nodes:
            if node.name in self.plan.stored:
                self.store_at(node, xvars, rvars)

    def reduction_body(self, big: bool) -> None:
        plan = self.plan
        kept, reduced = plan.kept_shape, plan.reduced_shape
        parallel = "omp parallel for" if big and not (isinstance(plan.xnumel, int)
                                                      and plan.xnumel <= 1) else None
        self.open_loop("x0", plan.xnumel, parallel)
        xvars = self.hoist_digits(ir.unflatten_index(ir.index_symbol("x0"), kept), kept)
        if self.nest_reduction:
            rvars = ir.unflatten_index(ir.index_symbol("r0"), reduced[:-1]) + \
                [ir.index_symbol("r1")]
        else:
            rvars = ir.unflatten_index(ir.index_symbol("r0"), reduced)
            self.watch_r = len(reduced) > 1 and hint_int(reduced[-1]) >= config.cpp_nest_min_inner

        def emit_full(nodes: list[ir.ComputedBuffer]) -> None:
            self.open_r_loops("omp simd")
            for node in nodes:
                self.store_at(node, xvars, rvars)
            self.close_r_loops()
            self.written |= {n.name for n in nodes if n.name in plan.stored}

        plan.walk_phases(emit_full, lambda node: self.store_at(node, xvars, rvars),
                         lambda node, stores: self.emit_reduction(node, xvars, rvars, stores))
        self.close_loop()

    def hoist_digits(self, xvars: list, kept: tuple) -> list:
        """The digits of ``x0`` whose radices are symbolic (``x0 % s1``) as constants of the
        x loop: written inside the r loop, a division by a run-time size makes g++ treat
        the loads as gathers and leave the loop scalar (GPT's attention softmax over a
        symbolic length, against the static kernel). An offset that only
        recombines them (a contiguous row: ``4*x0_0*s1*s2 + x0_1*s1*s2 + x0_2*s2``) is
        written ``s2*x0`` again (:meth:`offset_of`); g++ then drops their unused divisions,
        which cost a softmax over short rows much of its time (benchmarks/MEASUREMENTS.md)."""
        x0, out, hoisted = ir.index_symbol("x0"), [], []
        for k, digit in enumerate(xvars):
            expr = sympy.sympify(digit)
            if expr.is_Symbol or not (expr.free_symbols - {x0}):
                out.append(digit)
                continue
            name = f"x0_{k}"
            self.writeline(f"const int64_t {name} = {print_index(expr, 'cpp')};")
            out.append(ir.index_symbol(name))
            hoisted.append(k)
        if hoisted:
            # x0 = sum of digit_k * (product of the kept sizes inside k): solved for the
            # outermost hoisted digit, substituting it turns a recombination back into x0
            weights = [ir.size_expr(math.prod(kept[k + 1:])) for k in range(len(kept))]
            first = hoisted[0]
            rest = sum(sympy.sympify(out[k]) * weights[k] for k in range(len(kept))
                       if k != first)
            self.rejoin = {out[first]: (x0 - rest) / weights[first]}
            self.digits = {out[k] for k in hoisted}
        return out

    def offset_of(self, layout: ir.FixedLayout, index) -> Any:
        expr = layout.offset_of(index)
        self.note_split(expr)
        if self.watch_flat and not self.wants_short_inner:
            x0 = ir.index_symbol("x0")
            self.wants_short_inner = any(
                isinstance(e, (ir.FloorDiv, ir.ModularIndexing)) and x0 in e.args[0].free_symbols
                for e in sympy.preorder_traversal(ir.simplify_index(expr)))
        if self.unsplit:   # (simplified first: the digits of a split loop's variable
            # join back into ``x0b % 9``, which is the loop variable itself)
            expr = ir.simplify_index(expr).xreplace(self.unsplit)
        if self.rejoin:
            joined = sympy.expand(sympy.sympify(expr).xreplace(self.rejoin))
            if not joined.free_symbols & self.digits and joined.is_polynomial():
                return joined
        return expr

    def open_r_loops(self, pragma: str | None) -> None:
        """The loop over the reduced elements: one flat ``r0``; or, nested, ``r0`` over all
        reduced dims but the last and ``r1`` over the last, the one ``pragma`` vectorises
        (its elements are next to each other, where a flat ``r0`` divides to find them)."""
        reduced = self.plan.reduced_shape
        if self.nest_reduction:
            self.open_loop("r0", math.prod(reduced[:-1]), None)
            self.open_loop("r1", reduced[-1], pragma)
        else:
            self.open_loop("r0", self.plan.rnumel, pragma)

    def close_r_loops(self) -> None:
        self.close_loop()
        if self.nest_reduction:
            self.close_loop()

    # -- reductions over a dimension that is not the innermost (e.g. column sums) --------
    def open_tile(self) -> None:
        """The innermost loop of a tiled reduction: ``self.tile`` neighbouring outputs, which
        sit next to each other in memory, so the compiler vectorises across them (split in
        two, ``xi = k*xia + xib``, when :meth:`note_split` asks: :meth:`close_tile` closes
        both)."""
        k = self.split_inner
        self.lane_vars |= {"xi", "xib", "x0"}
        if k:
            self.writeline(f"for (int64_t xia = 0; xia < {self.tile_len} / {k}; xia++)")
            self.writeline("{")
            self.indent += 1
            self.push_scope()
            self.writeline("#pragma omp simd")
            self.writeline(f"for (int64_t xib = 0; xib < {k}; xib++)")
            self.writeline("{")
            self.indent += 1
            self.push_scope()
            self.writeline(f"const int64_t xi = xia * {k} + xib;")
            self.writeline(f"const int64_t x0a = xt * {self.tile // k} + xia;")
            return
        self.writeline("#pragma omp simd")
        self.writeline(f"for (int64_t xi = 0; xi < {self.tile_len}; xi++)")
        self.writeline("{")
        self.indent += 1
        self.push_scope()
        self.writeline(f"const int64_t x0 = xt * {self.tile} + xi;")

    def close_tile(self) -> None:
        self.close_loop()
        if self.split_inner:
            self.close_loop()

    def tiled_reduction_body(self, big: bool) -> None:
        """Reductions whose innermost (contiguous) dimension is *kept*: walking one output's
        reduction would stride through memory. Instead each thread takes a tile of
        ``self.tile`` outputs (``config.cpp_tile``), keeps as many accumulators, and the
        innermost loop runs across the tile."""
        plan = self.plan
        tile = self.tile
        tiles = (plan.xnumel + tile - 1) // tile
        self.open_loop("xt", tiles, "omp parallel for" if big and not (
            isinstance(tiles, int) and tiles <= 1) else None)
        # Symbolic sizes with every tile whole (the outputs a multiple of the tile for every
        # value of the symbols): the tile loops run a constant count, and g++ keeps the
        # tile's partial sums in vector registers across the r loop. A run-time count
        # (``xlen``) keeps them in memory, loaded and stored on every row, slower than the
        # static kernel, where g++ works out that ``xlen`` is 32 from the constants (and
        # unrolls the r loop).
        whole = not isinstance(plan.xnumel * plan.rnumel, int) and \
            sympy.Mod(ir.size_expr(plan.xnumel), tile) == 0
        self.tile_len = str(tile) if whole else "xlen"
        if not whole:
            self.writeline(f"const int64_t xlen = std::min<int64_t>({tile}, "
                           f"{self.size(plan.xnumel)} - xt * {tile});")
        if self.split_inner:
            x0 = self.split_var("x0a", "xib")
        else:
            x0 = self.split_watch = ir.index_symbol("x0")
            self.split_loop = (plan.xnumel, tile)
        xvars = ir.unflatten_index(x0, plan.kept_shape)
        rvars = ir.unflatten_index(ir.index_symbol("r0"), plan.reduced_shape)

        def emit_full(nodes: list[ir.ComputedBuffer]) -> None:
            self.open_loop("r0", plan.rnumel, None)
            self.open_tile()
            for node in nodes:
                self.store_at(node, xvars, rvars)
            self.close_tile()
            self.close_loop()
            self.written |= {n.name for n in nodes if n.name in plan.stored}

        def emit_x(node: ir.ComputedBuffer) -> None:
            self.open_tile()
            self.store_at(node, xvars, rvars)
            self.close_tile()

        def emit_reduction(node: ir.ComputedBuffer, stores: list[ir.ComputedBuffer]) -> None:
            # ``stores`` (full-phase values the reduction does not read) are stored in its
            # loop: a gradient and its bias gradient (a column sum) in one pass
            data = node.reduction
            dtype = compute_dtype(data.dtype)
            t = CPP_TYPES[dtype]
            acc_dtype = self.accumulator(data, one_lane=True)
            acc = self.newvar(dtype, "acc")
            init = self.literal(ir.reduction_init(data.reduction_type, dtype), acc_dtype)
            nan = self.newvar(torch.int32, "nan") if self.tracks_nan(data) else None
            self.writeline(f"{CPP_TYPES[acc_dtype]} {acc}[{tile}];")
            self.writeline(f"for (int64_t xi = 0; xi < {tile}; xi++) {acc}[xi] = {init};")
            if nan is not None:
                self.writeline(f"int {nan}[{tile}] = {{0}};")
            # a long float sum: chunks of cpp_sum_chunk rows add in float (the loop across the
            # tile stays float-wide vectors; double accumulators across it were several times
            # slower) and each chunk's sums go into the double accumulators
            chunked = acc_dtype != dtype
            total = acc
            if chunked:
                rnumel = self.size(plan.rnumel)
                acc = self.newvar(dtype, "part")
                self.writeline(f"for (int64_t r0_chunk = 0; r0_chunk < {rnumel}; "
                               f"r0_chunk += {config.cpp_sum_chunk})")
                self.writeline("{")
                self.indent += 1
                self.push_scope()
                self.writeline(f"{t} {acc}[{tile}];")
                self.writeline(f"for (int64_t xi = 0; xi < {tile}; xi++) {acc}[xi] = "
                               f"{self.literal(0, dtype)};")
                self.writeline(f"for (int64_t r0 = r0_chunk; r0 < std::min<int64_t>("
                               f"r0_chunk + {config.cpp_sum_chunk}, {rnumel}); r0++)")
                self.writeline("{")
                self.indent += 1
                self.push_scope()
            else:
                self.open_loop("r0", plan.rnumel, None)
            self.open_tile()
            for other in stores:
                self.store_at(other, xvars, rvars)
            value = data.inner_fn(plan.full_index(xvars, rvars))
            if data.reduction_type == "sum":
                self.writeline(f"{acc}[xi] = {acc}[xi] + {value};")
            else:
                self.writeline(f"{acc}[xi] = std::max({acc}[xi], static_cast<{t}>({value}));")
                if nan is not None:
                    self.writeline(f"{nan}[xi] |= ({value} != {value});")
            self.close_tile()
            self.close_loop()
            if chunked:
                self.writeline(f"for (int64_t xi = 0; xi < {tile}; xi++) "
                               f"{total}[xi] += {acc}[xi];")
                self.close_loop()
                acc = total
            self.written |= {n.name for n in stores}
            if nan is not None:
                self.writeline(f"for (int64_t xi = 0; xi < {tile}; xi++) if ({nan}[xi]) "
                               f"{acc}[xi] = {self.literal(float('nan'), dtype)};")
            out_index = plan.node_index(node, xvars, rvars)
            value = f"{acc}[xi]" if acc_dtype == dtype else f"static_cast<{t}>({acc}[xi])"
            self.reduction_values[node.name] = (CSEVar(value, dtype, frozenset({"xi"})),
                                                out_index)
            if node.name in plan.stored:
                self.open_tile()
                self.store(node, out_index, self.reduction_values[node.name][0])
                self.close_tile()

        plan.walk_phases(emit_full, emit_x, emit_reduction)
        self.close_loop()

    @staticmethod
    def tracks_nan(data: ir.Reduction) -> bool:
        return data.reduction_type == "max" and data.dtype.is_floating_point

    def accumulator(self, data: ir.Reduction, one_lane: bool) -> torch.dtype:
        """The dtype a reduction adds in: its own, except a long float sum, which adds in
        ``double`` and rounds once at the end.

        A float accumulator rounds at every addition, so its error grows with the number of
        values added into it. In a loop that adds every value into one accumulator
        (``one_lane``: a nested r loop, a tile's ``acc[xi]``) a batch norm's mean over N, H,
        W came out several ulps off where eager's is under one, and its normalised output
        carried many times eager's error -- enough to flip ReLUs whose inputs are near zero
        and move every gradient upstream (the numbers: benchmarks/MEASUREMENTS.md). A nested
        r loop adds in double: as fast there (the loop is scalar either way). A tile's loop
        runs across its outputs in vectors, which double would halve: it adds chunks of
        ``config.cpp_sum_chunk`` rows in float and each chunk's sums in double.
        A flat ``omp simd`` row spreads its values over the vector lanes, but each lane
        still adds n / lanes of them, and its error grows with n. A row longer than
        twice ``config.cpp_sum_chunk`` adds chunks of that many in float lanes and the
        chunks' sums in double (a double per lane would halve the vector width). Eager's CPU batch
        norm adds its statistics in double
        (``batch_norm_cpu_collect_stats_contiguous_impl``: ``at::acc_type<float,
        /*is_cuda=*/false>`` is double); Inductor adds long float sums in chunks
        (``CascadeSumHelper`` in torch/_inductor/codegen/cpp.py)."""
        dtype = compute_dtype(data.dtype)
        if data.reduction_type == "sum" and dtype == torch.float32 and (
                one_lane or hint_int(self.plan.rnumel) > 2 * config.cpp_sum_chunk):
            return torch.float64
        return dtype

    def emit_reduction(self, node: ir.ComputedBuffer, xvars, rvars,
                       stores: Sequence[ir.ComputedBuffer] = ()) -> None:
        """The reduction ``node`` over the current row, storing ``stores`` (``full``-phase
        values that do not read it) in the same loop."""
        data = node.reduction
        dtype = compute_dtype(data.dtype)   # a 16-bit float reduces in float32
        acc_dtype = self.accumulator(data, one_lane=self.nest_reduction)
        acc = self.newvar(dtype, "acc")
        init = self.literal(ir.reduction_init(data.reduction_type, dtype), acc_dtype)
        self.writeline(f"{CPP_TYPES[acc_dtype]} {acc} = {init};")
        op = "+" if data.reduction_type == "sum" else "max"
        # std::max drops NaNs, torch.amax keeps them: count NaNs beside the max (an
        # or-reduction, which vectorises) and apply them after the loop.
        nan = self.newvar(torch.int32, "nan") if self.tracks_nan(data) else None
        simd = f"omp simd reduction({op}:{acc})" if dtype != torch.bool else None
        if nan is not None:
            self.writeline(f"int {nan} = 0;")
            if simd is not None:   # (always: a float max)
                simd += f" reduction(|:{nan})"
        # Nested r loops accumulate without the simd reduction clause: g++ (-fopenmp) then
        # keeps a lane array in memory across the outer loop, several times slower than
        # scalar adds (AlexNet's bias-gradient kernel: benchmarks/MEASUREMENTS.md)
        chunked = acc_dtype != dtype and not self.nest_reduction
        if chunked:   # float lanes over a chunk, the chunk's sum added in double
            total, acc = acc, self.newvar(dtype, "part")
            rnumel = self.size(self.plan.rnumel)
            self.writeline(f"for (int64_t r0_chunk = 0; r0_chunk < {rnumel}; "
                           f"r0_chunk += {config.cpp_sum_chunk})")
            self.writeline("{")
            self.indent += 1
            self.writeline(f"{CPP_TYPES[dtype]} {acc} = {self.literal(0, dtype)};")
            self.writeline(f"#pragma omp simd reduction(+:{acc})")
            self.writeline(f"for (int64_t r0 = r0_chunk; r0 < std::min<int64_t>(r0_chunk + "
                           f"{config.cpp_sum_chunk}, {rnumel}); r0++)")
            self.writeline("{")
            self.indent += 1
            self.push_scope()
        else:
            self.open_r_loops(None if self.nest_reduction else simd)
        for other in stores:
            self.store_at(other, xvars, rvars)
        value = data.inner_fn(self.plan.full_index(xvars, rvars))
        if data.reduction_type == "sum":
            self.writeline(f"{acc} = {acc} + {value};")
        else:
            self.writeline(f"{acc} = std::max({acc}, static_cast<{CPP_TYPES[dtype]}>"
                           f"({value}));")
            if nan is not None:
                self.writeline(f"{nan} |= ({value} != {value});")
        if chunked:
            self.close_loop()
            self.writeline(f"{total} = {total} + {acc};")
            self.indent -= 1
            self.writeline("}")
            acc = total
        else:
            self.close_r_loops()
        self.written |= {n.name for n in stores}
        if nan is not None:
            self.writeline(f"if ({nan}) {acc} = {self.literal(float('nan'), dtype)};")
        if acc_dtype != dtype:  # rounded once, to the reduction's dtype
            acc = self.cse(f"static_cast<{CPP_TYPES[dtype]}>({acc})", dtype)
        out_index = self.plan.node_index(node, xvars, rvars)
        self.reduction_values[node.name] = (acc, out_index)
        if node.name in self.plan.stored:
            self.store(node, out_index, acc)

    def generate(self) -> str:
        self.generate_body()
        body = self.lines
        result = "void"
        if self.index_checks:
            # every loop combines the status of its iterations (threads, vector lanes)
            body = [f"{line} reduction(max:{STATUS})" if line.lstrip().startswith(
                "#pragma omp") else line for line in body]
            body = [f"int {STATUS} = 0;"] + body + [f"return {STATUS};"]
            result = "int"
        params = []
        for arg, buf, is_out in self.signature_buffers():
            const = "" if is_out else "const "
            restrict = "" if buf.name in self.plan.aliased else " __restrict__"
            params.append(f"{const}{storage_type(buf.get_dtype())}*{restrict} {arg}")
        params += [f"const int64_t {s}" for s in self.size_args()]
        nodes = ", ".join(origin_names(self.plan.nodes))
        header = [f"// {self.name}: graph nodes {nodes}",
                  *(f"//   {line}" for line in origin_sources(self.plan.nodes)),
                  f'extern "C" {result} {self.name}(' + ",\n    ".join(params) + ")", "{"]
        return "\n".join(header + ["    " + line for line in body] + ["}"])


CPP_PRELUDE = """// glibc declares its vectorised exp/log/erf/... (libmvec) for '#pragma omp simd'
// loops only under __FAST_MATH__; define it just for <cmath>, so the loops call the
// vector versions while the rest of the code keeps IEEE semantics (infinities, NaNs).
#ifndef __FAST_MATH__
#define __FAST_MATH__ 1
#include <cmath>
#undef __FAST_MATH__
#endif
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

// 16-bit floats arrive as their bits (uint16_t) and are computed in float.
// bfloat16 is the top half of a float: widening shifts it up; narrowing rounds to
// nearest, ties to even, as c10::BFloat16 does, and keeps a NaN a NaN.
static inline float tc_bf16_to_float(uint16_t h) {
    uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint16_t tc_float_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}
// float16 (IEEE binary16): the compiler's _Float16 converts, rounding to nearest even
// (one instruction with F16C, which -march=native enables on x86-64).
static inline float tc_half_to_float(uint16_t h) {
    _Float16 v;
    std::memcpy(&v, &h, sizeof v);
    return static_cast<float>(v);
}
static inline uint16_t tc_float_to_half(float f) {
    _Float16 v = static_cast<_Float16>(f);
    uint16_t h;
    std::memcpy(&h, &v, sizeof h);
    return h;
}
// exp for '#pragma omp simd' loops. glibc's vector expf leaves its fast path for any lane
// whose result is not a normal float (exp(-inf) = 0: every masked element of a causal
// softmax) and redoes the vector with the scalar expf, which made GPT's attention softmax
// much slower than unmasked. This one is branch-free, so a loop of it is a loop of vector
// instructions: x = q*ln2 + s (q = round(x / ln2), |s| <= ln2/2), exp(s) by a degree-7
// polynomial, times 2^q built from the exponent bits (in two halves, so that q down to
// -150 gives denormals and 0). Within 1 ulp over the normal range; -inf -> 0, +inf -> inf,
// NaN -> NaN. Mirrors: SLEEF's xexpf (the Sleef_expf16_u10 that PyTorch's
// Vectorized<float>::exp calls), with the same constants.
inline float simd_pow2i(int32_t q) {
    int32_t bits = (q + 0x7f) << 23;
    float r;
    std::memcpy(&r, &bits, sizeof r);
    return r;
}
inline float simd_exp(float x) {
    float q = std::nearbyint(x * 1.442695040888963407359924681001892137f);
    int32_t qi = static_cast<int32_t>(q);
    float s = std::fma(q, -0.693145751953125f, x);          // ln 2, split in two parts so
    s = std::fma(q, -1.428606765330187045e-06f, s);          // that q * ln2 is exact
    float u = 0.000198527617612853646278381f;
    u = std::fma(u, s, 0.00139304355252534151077271f);
    u = std::fma(u, s, 0.00833336077630519866943359f);
    u = std::fma(u, s, 0.0416664853692054748535156f);
    u = std::fma(u, s, 0.166666671633720397949219f);
    u = std::fma(u, s, 0.5f);
    u = 1.0f + std::fma(s * s, u, s);
    u = u * simd_pow2i(qi >> 1) * simd_pow2i(qi - (qi >> 1));
    u = x < -104.0f ? 0.0f : u;
    return x > 104.0f ? std::numeric_limits<float>::infinity() : u;
}
// any other type: std::exp, with its own result type
template <typename T>
inline auto simd_exp(T x) { return std::exp(x); }

// torch.maximum/minimum: a NaN on either side is the answer. std::max(a, b) is
// (a < b) ? b : a, which keeps a NaN a but drops a NaN b: test b first. (Written as
// ((a != a) | (a > b)) ? a : b, g++ 12 leaves the loop scalar.)
template <typename T>
inline T tc_maximum(T a, T b) { return (b != b) ? b : std::max(a, b); }
template <typename T>
inline T tc_minimum(T a, T b) { return (b != b) ? b : std::min(a, b); }
"""


class CppKernelCall:
    """A compiled C++ kernel: call it with tensors (inputs then outputs) in argument order.

    The library is built from ``build_source`` -- the kernel's canonical text, its function
    called ``kernel`` -- when one is given (``codecache.cpp_kernel_async``: with the other
    kernels of its graph, and once however many graphs have it), else from ``source``
    itself. The build runs in the background; the first call, or :meth:`wait`, waits for
    it (``building`` says whether it would).

    ``index_checks`` lists the kernel's bounds checks of indirect indices, if any: the
    kernel then returns a status, and a call whose status names a failed check raises an
    ``IndexError`` saying which (as PyTorch's own op would have raised).

    ``size_args`` names the symbolic sizes the kernel takes after its pointers (``s0``...):
    the wrapper passes its own variables of those names.
    """

    def __init__(self, name: str, source: str, arg_names: list[str],
                 build_source: str | None = None, index_checks: Sequence[str] = (),
                 size_args: Sequence[str] = ()):
        self.name = name
        self.source = source
        self.arg_names = arg_names
        self.size_args = list(size_args)
        self.index_checks = list(index_checks)
        # a future of the function (a generated kernel), or of (library, path): the
        # function is then the one called ``name``
        self.symbol = name if build_source is None else None
        if build_source is None:
            self._build = cpp_compile_async("\n" + source + "\n", prelude=CPP_PRELUDE)
        else:
            self._build = cpp_kernel_async("\n" + build_source + "\n", prelude=CPP_PRELUDE)
        self.loaded = None    # the library's function, once built
        self.fn = self._first_call

    @property
    def building(self) -> bool:
        """Would a call wait for the compiler?"""
        return self.loaded is None and not self._build.done()

    def wait(self) -> CppKernelCall:
        """Wait for the build and load the function (raises if the build failed)."""
        if self.loaded is None:
            built = self._build.result()
            fn = built if self.symbol is None else getattr(built[0], self.symbol)
            fn.restype = ctypes.c_int if self.index_checks else None
            fn.argtypes = [ctypes.c_void_p] * len(self.arg_names) + \
                [ctypes.c_int64] * len(self.size_args)
            self.loaded = fn
            self.fn = fn if not self.index_checks else self._checked(fn)
        return self

    def _checked(self, fn):
        checks, name = self.index_checks, self.name

        def call(*args: int) -> None:
            status = fn(*args)
            if status:
                raise IndexError(f"{name}: {checks[status - 1]} (an index read from a "
                                 "tensor is out of range)")
        return call

    def _first_call(self, *args: int) -> None:
        self.wait().fn(*args)

    # How the wrapper calls it: the ctypes function itself, bound once as a global, with
    # each tensor's data_ptr() and the symbolic sizes (argtypes were set once in wait():
    # no per-call type setup).
    launcher_doc = "C++ kernel: a ctypes function taking data_ptr() ints (and sizes)"

    @property
    def launcher(self):
        return self.wait().fn

    def call_source(self, name: str, args: list[str]) -> str:
        return f"{name}({', '.join([f'{a}.data_ptr()' for a in args] + self.size_args)})"

    def __call__(self, *args: torch.Tensor | int) -> None:
        """Call with the tensors (inputs, then outputs), then the size arguments."""
        self.fn(*[a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args])


def generate_cpp_kernel(plan: KernelPlan, name: str, **choices
                        ) -> tuple[str, list[ir.Buffer], list[ir.Buffer]]:
    """Source of one kernel, and the buffers it reads and writes (in argument order)."""
    source, _, ins, outs, _, _ = _generate(plan, name, **choices)
    return source, ins, outs


def _generate(plan: KernelPlan, name: str, **choices):
    kernel = CppKernel(plan, name, **choices)
    source = kernel.generate()
    if kernel.wants_nesting:   # a flat reduction loop would divide its index: nest it
        kernel = CppKernel(plan, name, nest_reduction=True, **choices)
        source = kernel.generate()
    if kernel.wants_short_inner:   # a flat pointwise loop would divide its index
        kernel = CppKernel(plan, name, short_inner=True, **choices)
        source = kernel.generate()
    split = kernel.split_factor()
    if split:   # the vector loop's index divides it: split it (CppKernel.note_split)
        kernel = CppKernel(plan, name, nest_reduction=kernel.nest_reduction,
                           split_inner=split, **choices)
        source = kernel.generate()
    canonical = canonical_source(source, name, [a for a, _, _ in kernel.signature_buffers()])
    return source, canonical, list(kernel.inputs.values()), list(kernel.outputs.values()), \
        kernel.index_checks, kernel.size_args()


def compile_cpp_kernel(plan: KernelPlan, name: str, **choices):
    source, canonical, ins, outs, checks, sizes = _generate(plan, name, **choices)
    return CppKernelCall(name, source, [b.name for b in ins + outs], canonical,
                         checks, sizes), ins, outs


__all__ = ["CppKernel", "CppKernelCall", "compile_cpp_kernel", "cpp_flags",
           "generate_cpp_kernel"]
