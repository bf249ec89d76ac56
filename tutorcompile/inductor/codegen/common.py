"""What the C++ and Triton kernel writers share: the kernel plan, CSE, and the ops handler.

A *kernel* is a group of computed buffers the scheduler decided to fuse. Its
:class:`KernelPlan` says how they share one loop nest:

* a pointwise kernel iterates one shape (``xnumel`` elements);
* a reduction kernel iterates ``src_shape`` split into kept dimensions (the ``x`` loop, one
  output element each) and reduced dimensions (the ``r`` loop). Every node of the group is a
  *phase* of the x loop: a ``reduction`` (its own r loop, leaving one value per x), a ``full``
  pointwise node (iterates x and r, e.g. softmax's ``exp(x - max) / sum``), or an ``x``
  pointwise node (one value per x, e.g. layernorm's ``rsqrt(var + eps)``).

A cheap pointwise buffer that nothing outside the kernel reads need not line up at all: it
is an ``inline`` node, never looped over, computed at each index a reader loads it (below).

Inside a kernel, buffers that nothing outside reads are never written to memory: a load of
such a pointwise buffer is replaced by its inner function evaluated at the loaded index
(inlining), and a load of a reduction computed earlier in the kernel is replaced by the
variable that holds it -- allowed only at the row being computed. Whether a group of
buffers can be written so is decided before any code, on the IR
(``inductor/fusion_legality.py``, which walks a plan in the order the writers do); a writer
meeting anything else raises :class:`FusionError` as an internal error: the scheduler
should have refused that fusion.

An *indirect* index (``ir.indirect_indexing``: a loaded integer used as a position) is a
temporary of the kernel; the writer checks it against the size it indexes and hands out a
variable that is always in bounds, so a bad index is reported, never read from memory.

:class:`KernelWriter` is an ops handler (``tutorcompile.ops``): prims become expression
strings from the op table's spellings, ``load``/``constant`` become the language's loads and
literals, and common subexpressions get one temporary (``tmp3``). Symbolic sizes print as
their symbols (``s0``), which become arguments of the kernel (:meth:`KernelWriter.size_args`).

Mirrors: torch/_inductor/codegen/common.py (``Kernel``, ``CSE``, ``OpOverrides``) and
torch/_inductor/codegen/simd.py (tiling into x and r).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import sympy
import torch

from ...fx.symbolic_shapes import is_symbolic
from ...ops import OpsHandler
from ...ops.virtualized import spell
from .. import config, ir
from ..ir import ComputedBuffer, FloorDiv, FusionError, ModularIndexing

_SIZE_SYMBOL = re.compile(r"\bs(\d+)\b")

HALF_DTYPES = (torch.float16, torch.bfloat16)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a kernel computes a value of ``dtype`` in: float32 for the 16-bit floats.

    A half-precision tensor is *stored* in 16 bits but never computed in them: a kernel
    loads it and widens it to float32, does its arithmetic and its reductions in float32,
    and rounds to 16 bits where a value is stored -- or where the program itself converts
    to a 16-bit type (``x.to(torch.bfloat16)``: rounded there, and widened again). Eager's
    CPU kernels do the same per op; a fused kernel skips the rounding between its ops, so
    it is at least as accurate as eager. (Triton has no ``erf`` or ``exp`` of fp16 or bf16
    operands at all: "Expected dtype ['fp32', 'fp64']".)

    Mirrors: Inductor's upcast of fp16/bf16 loads (``upcast_compute_type`` in
    torch/_inductor/codegen/triton.py) and its C++ kernels' ``cvt_lowp_fp_to_fp32``."""
    return torch.float32 if dtype in HALF_DTYPES else dtype


@dataclass
class KernelPlan:
    """How the buffers of one kernel share a loop nest (see the module docstring)."""
    nodes: list[ComputedBuffer]
    stored: set[str]
    shape: tuple[int, ...]            # pointwise: the iterated shape; reduction: src_shape
    reduced_dims: tuple[int, ...] = ()
    # buffer name -> full | x | reduction | inline (computed only where it is read)
    phases: dict[str, str] = field(default_factory=dict)
    # an output stored into a graph input's memory, and that input: the same memory under
    # two arguments, so neither may be declared ``__restrict__`` (wrapper.written_in_place)
    aliased: frozenset[str] = frozenset()

    @property
    def is_reduction(self) -> bool:
        return bool(self.reduced_dims) or any(n.is_reduction for n in self.nodes)

    @property
    def kept_shape(self) -> tuple[int, ...]:
        return tuple(s for d, s in enumerate(self.shape) if d not in self.reduced_dims)

    @property
    def reduced_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[d] for d in self.reduced_dims)

    @property
    def xnumel(self) -> int:
        return math.prod(self.kept_shape) if self.is_reduction else math.prod(self.shape)

    @property
    def rnumel(self) -> int:
        return math.prod(self.reduced_shape) if self.is_reduction else 1

    @property
    def names(self) -> set[str]:
        return {n.name for n in self.nodes}

    @classmethod
    def from_nodes(cls, nodes: Sequence[ComputedBuffer], stored: set[str],
                   reshaped: bool = True) -> KernelPlan:
        """Find a common loop nest for ``nodes`` (in dependency order) or raise FusionError.

        ``reshaped=False`` refuses what only a reshape lines up with a reduction's input (a
        ``full`` node of another shape, see below): the scheduler's first pass, so that
        such a node joins its producers' kernel first (:meth:`.Scheduler.fuse`)."""
        nodes = list(nodes)
        reductions = [n for n in nodes if n.is_reduction]
        if reductions:
            first = reductions[0].reduction
            for r in reductions[1:]:
                d = r.reduction
                if d.reduced_dims != first.reduced_dims or \
                        not ir.same_sizes(d.src_shape, first.src_shape):
                    raise FusionError(
                        f"reductions over different loops: {reductions[0].name} reduces "
                        f"{list(first.src_shape)} over dims {list(first.reduced_dims)}, "
                        f"{r.name} reduces {list(d.src_shape)} over dims "
                        f"{list(d.reduced_dims)}")
            plan = cls(nodes, stored, tuple(first.src_shape), tuple(first.reduced_dims))
            kept = plan.kept_shape
            kept_numel = math.prod(kept)
            for n in nodes:
                size = tuple(n.get_size())
                if n.is_reduction:
                    plan.phases[n.name] = "reduction"
                elif ir.same_sizes(size, plan.shape):
                    plan.phases[n.name] = "full"
                elif ir.same_sizes((math.prod(size),), (kept_numel,)) and \
                        ir.same_sizes(_squeeze(size), _squeeze(kept)):
                    plan.phases[n.name] = "x"
                elif reshaped and ir.same_sizes((math.prod(size),), (math.prod(plan.shape),)):
                    # the same elements as the reduction's input in another shape (a
                    # gradient [b, t, n] whose bias gradient sums it as [b*t, n]): computed
                    # and stored in the reduction's loops, at the index of the element
                    # the loops are at (node_index)
                    plan.phases[n.name] = "full"
                else:
                    plan.phases[n.name] = _inline_phase(
                        n, nodes, stored, math.prod(plan.shape),
                        f"{n.name} has shape {list(size)}, which lines up neither with the "
                        f"reduction's input {list(plan.shape)} nor with its output "
                        f"{list(kept)}")
            return plan
        numels = {n.name: ir.size_expr(math.prod(n.get_size())) for n in nodes}
        main = next((n for n in nodes if n.name in stored), nodes[-1])
        plan = cls(nodes, stored, tuple(main.get_size()))
        for n in nodes:
            plan.phases[n.name] = "full" if numels[n.name] == numels[main.name] else \
                _inline_phase(n, nodes, stored, numels[main.name],
                              f"different iteration sizes: {main.name} has "
                              f"{numels[main.name]} elements, {n.name} has {numels[n.name]}")
        return plan

    @classmethod
    def template(cls, buffers: Sequence[ComputedBuffer], stored: set[str]) -> KernelPlan:
        """The plan of a matmul template (``buffers[0]``) and its epilogue: one element of
        the product per step, every buffer a ``full`` phase of it."""
        plan = cls(list(buffers), set(stored), tuple(buffers[0].get_size()))
        plan.phases = {b.name: "full" for b in buffers}
        return plan

    # -- indices -------------------------------------------------------------------------
    def walk_phases(self, emit_full: Callable[[list[ComputedBuffer]], None],
                    emit_x: Callable[[ComputedBuffer], None],
                    emit_reduction: Callable[[ComputedBuffer, list[ComputedBuffer]], None]
                    ) -> None:
        """Visit a reduction kernel's nodes in order, the way every code generator writes them.

        Stored values of the ``full`` phase (one per element of the reduced region) are
        gathered and handed to ``emit_full`` together, to be written in one pass over the
        reduction dimension; an ``x``-phase node ends such a batch, because what follows
        may read it. Stored ``x``-phase values (one per output row) go to ``emit_x``; every
        reduction goes to ``emit_reduction`` where it stands, with the batch gathered before
        it: nothing in the batch reads the reduction, so the writer stores them in the
        reduction's own loop (a gradient and its bias gradient in one pass over memory), or
        hands them to ``emit_full`` first.
        """
        pending: list[ComputedBuffer] = []

        def flush() -> None:
            if pending:
                emit_full(list(pending))
                pending.clear()

        for node in self.nodes:
            phase, stored = self.phases[node.name], node.name in self.stored
            if phase == "inline":
                continue
            if phase == "full":
                if stored:
                    pending.append(node)
                continue
            if phase == "x":
                flush()
                if stored:
                    emit_x(node)
                continue
            batch = list(pending)
            pending.clear()
            emit_reduction(node, batch)
        flush()

    def full_index(self, xvars: Sequence[Any], rvars: Sequence[Any]) -> list:
        """The index into ``shape`` given per-dimension x and r index expressions."""
        if not self.is_reduction:
            return list(xvars)
        xs, rs = iter(xvars), iter(rvars)
        return [next(rs) if d in self.reduced_dims else next(xs) for d in range(len(self.shape))]

    def node_index(self, node: ComputedBuffer, xvars, rvars) -> list:
        """The index of ``node``'s own output at the current loop position."""
        size = tuple(node.get_size())
        phase = self.phases[node.name]
        if phase == "full":
            own = self.full_index(xvars, rvars)
            ref = self.shape
        else:  # x and reduction phases: one element per x
            own = list(xvars)
            ref = self.kept_shape if self.is_reduction else self.shape
        if ir.same_sizes(size, ref):
            return own
        # the same elements in another shape: the index a reshape from ``size`` to ``ref``
        # reads at (so a reader through such a view asks for the very value computed here)
        return ir.reshape_index(own, ref, size)


def _inline_phase(node: ComputedBuffer, nodes: Sequence[ComputedBuffer], stored: set[str],
                  kernel_numel: Any, why: str) -> str:
    """``"inline"`` for a pointwise ``node`` whose loop nest does not line up with its
    kernel's, when it may be computed at its readers' indices instead of in a loop of its
    own: nothing outside the kernel reads it (it is never stored) and computing it again is
    cheap (``config.inline_op_limit``). The gradient of a strided slice (a ``slice_scatter``
    into a smaller shape, then one into the full one: a pooling window's gradient) then
    takes one pass. Otherwise a FusionError saying ``why`` the loops do not line up."""
    if node.is_reduction or node.name in stored:
        raise FusionError(why)
    numel = ir.size_expr(math.prod(node.get_size()))
    extra = sympy.simplify(sympy.sympify(numel) - sympy.sympify(ir.size_expr(kernel_numel)))
    if not (extra.is_number and extra >= 0):
        cost = ir.op_count(node, {n.name: n for n in nodes})
        if cost > config.inline_op_limit:
            raise FusionError(f"{why}; computing {node.name} again at every index that reads "
                              f"it would take {cost} operations "
                              f"(more than {config.inline_op_limit})")
    return "inline"


def _is_one(size: Any) -> bool:
    """A literal 1, told by its expression: a symbolic size that is 1 at the example is not
    (asking it would guard ``t // 4 - 1 == 1``)."""
    return ir.size_expr(size) == 1


def _squeeze(shape) -> tuple[int, ...]:
    return tuple(s for s in shape if not _is_one(s))


# ---------------------------------------------------------------------------------------
# Printing index expressions
# ---------------------------------------------------------------------------------------

def print_index(expr: Any, language: str) -> str:
    """Print a sympy index expression as C++ or Triton (Python) integer arithmetic."""
    expr = ir.simplify_index(expr)
    div = "//" if language == "triton" else "/"
    if expr.is_Integer:
        return str(int(expr))
    if expr.is_Symbol:
        return expr.name
    if isinstance(expr, sympy.Add):
        terms = sorted(expr.args, key=lambda a: (a.is_Integer, str(a)))
        out = print_index(terms[0], language)
        for t in terms[1:]:
            if t.is_Integer and int(t) < 0:
                out += f" - {-int(t)}"
            else:
                out += f" + {print_index(t, language)}"
        return f"({out})" if len(terms) > 1 else out
    if isinstance(expr, sympy.Mul):
        coeff, rest = expr.as_coeff_Mul()
        body = " * ".join(print_index(a, language) for a in sympy.Mul.make_args(rest))
        if coeff == 1:
            return body
        return f"{int(coeff)} * {body}" if coeff != -1 else f"-{body}"
    if isinstance(expr, FloorDiv):
        a, b = print_index(expr.args[0], language), _operand(expr.args[1], language)
        return f"({a} {div} {b})"
    if isinstance(expr, sympy.floor):   # a symbolic size divided (``s0 // 2``)
        num, den = sympy.fraction(sympy.together(expr.args[0]))
        if language != "triton" and not (num.is_nonnegative and den.is_positive):
            # C++'s ``/`` truncates toward zero, Python's ``//`` floors: they differ for a
            # negative quotient (``-(-s0 // 8)``, a ceiling, would lose a tile)
            a, b = print_index(num, language), _operand(den, language)
            return f"({a} / {b} - (({a} % {b} != 0) && (({a} < 0) != ({b} < 0))))"
        return print_index(FloorDiv(num, den), language)
    if expr.is_Pow and expr.exp.is_Integer and expr.exp > 0:   # a stride ``s1**2``
        return "(" + " * ".join([print_index(expr.base, language)] * int(expr.exp)) + ")"
    if isinstance(expr, sympy.Mod):
        a, m = print_index(expr.args[0], language), _operand(expr.args[1], language)
        return f"({a} % {m})"
    if isinstance(expr, ModularIndexing):
        a, d, m = expr.args
        base = print_index(a, language) if d == 1 else \
            f"({print_index(a, language)} {div} {_operand(d, language)})"
        return f"({base} % {_operand(m, language)})"
    raise NotImplementedError(f"cannot print index expression {expr}")


def _operand(expr: Any, language: str) -> str:
    """A divisor or modulus, parenthesised when it is a product (``x0 / (4 * s1)``: C and
    Python read ``x0 / 4 * s1`` as ``(x0 / 4) * s1``)."""
    text = print_index(expr, language)
    return f"({text})" if isinstance(sympy.sympify(expr), sympy.Mul) else text


# ---------------------------------------------------------------------------------------
# The kernel writer: an ops handler that prints code
# ---------------------------------------------------------------------------------------

class CSEVar:
    """A value inside a kernel: the name of a temporary (or a literal) and its dtype.

    ``deps`` names the loop indices the value varies with (``xindex``/``rindex`` in Triton,
    where they decide a load's mask and a block's shape)."""

    def __init__(self, name: str, dtype: torch.dtype, deps: frozenset[str] = frozenset()):
        self.name = name
        self.dtype = dtype
        self.shape = ()
        self.deps = deps

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__


class KernelWriter(OpsHandler):
    """Base of the C++ and Triton kernel writers.

    Subclasses provide ``language``, ``dtype_name``, ``literal``, ``load_expr``,
    ``wrap_constant``, and write the loop structure around :meth:`compute_phase`.
    """
    language = "cpp"

    def __init__(self, plan: KernelPlan, name: str):
        self.plan = plan
        self.name = name
        self.lines: list[str] = []
        self.indent = 0
        self.scopes: list[dict[Any, CSEVar]] = [{}]  # CSE: expression (or key) -> variable
        self.counter = 0
        self.inputs: dict[str, ir.Buffer] = {}    # buffer name -> buffer, in first-use order
        self.outputs: dict[str, ir.Buffer] = {}
        self.reduction_values: dict[str, tuple[CSEVar, list]] = {}
        # indirect indices: symbol name -> the loop indices its value varies with
        self.indirect: dict[str, frozenset[str]] = {}
        self.index_checks: list[str] = []   # what each bounds check guards, for its error

    # -- emitting ------------------------------------------------------------------------
    def store_at(self, node: ComputedBuffer, xvars: Sequence[Any], rvars: Sequence[Any]
                 ) -> None:
        """Compute ``node`` at the current loop position and store it into its buffer."""
        index = self.plan.node_index(node, xvars, rvars)
        self.store(node, index, node.data.inner_fn(index))

    def writeline(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def push_scope(self) -> None:
        self.scopes.append({})

    def pop_scope(self) -> None:
        self.scopes.pop()

    def newvar(self, dtype: torch.dtype, prefix: str = "tmp") -> CSEVar:
        var = CSEVar(f"{prefix}{self.counter}", dtype)
        self.counter += 1
        return var

    def cse(self, expr: str, dtype: torch.dtype, deps: frozenset[str] = frozenset()
            ) -> CSEVar:
        for scope in reversed(self.scopes):
            if expr in scope:
                return scope[expr]
        var = self.newvar(dtype)
        var.deps = deps
        self.writeline(self.assign(var, expr))
        self.scopes[-1][expr] = var
        return var

    def assign(self, var: CSEVar, expr: str) -> str:
        raise NotImplementedError

    # -- the ops handler -----------------------------------------------------------------
    def call(self, prim, args, kwargs):
        if not prim.is_pointwise:   # (refused by fusion_legality: never reached)
            raise FusionError(f"{prim.name} cannot appear inside a kernel; the scheduler "
                              "should have refused this fusion")
        metas = [ir._Meta(a.dtype) if isinstance(a, CSEVar) else a for a in args]
        _, dtype = prim.meta(*metas, **kwargs)
        deps = frozenset().union(*(a.deps for a in [*args, *kwargs.values()]
                                   if isinstance(a, CSEVar)))
        # a value is computed in float32 when its dtype is a 16-bit float (see
        # compute_dtype); a conversion to one rounds, then widens again
        computed = compute_dtype(dtype)
        text = spell(getattr(prim, self.language), args, kwargs,
                     lambda a: a.name if isinstance(a, CSEVar) else self.operand(a, computed),
                     lambda d: self.dtype_name(compute_dtype(d)))
        var = self.cse(text, computed, deps)
        if dtype in HALF_DTYPES:
            var = self.cse(self.round_to(var, dtype), computed, deps)
        return var

    def constant(self, value, dtype):
        if is_symbolic(value):   # a size as a value (``where(m, x, 4 * (s1 // 4))``)
            return self.index_expr(value.expr, dtype)
        return self.wrap_constant(value, compute_dtype(dtype))

    def operand(self, value: Any, dtype: torch.dtype) -> str:
        """A Python operand of a prim as kernel text: a literal, or for a symbolic size the
        expression over the kernel's size arguments (not its example value, guarded)."""
        if is_symbolic(value):
            return self.index_expr(value.expr, dtype).name
        return self.literal(value, dtype)

    def loaded(self, text: str, dtype: torch.dtype, deps: frozenset[str]) -> CSEVar:
        """The value of a load expression, widened to the dtype it is computed in."""
        if dtype in HALF_DTYPES:
            return self.cse(self.widen(text, dtype), torch.float32, deps)
        return self.cse(text, dtype, deps)

    def index_expr(self, expr, dtype):
        dtype = compute_dtype(dtype)
        expr = ir.simplify_index(expr)
        if expr.is_Integer:
            return self.constant(int(expr), dtype)
        return self.cse(self.index_cast(print_index(expr, self.language), dtype), dtype,
                        self.index_deps(expr))

    def index_deps(self, expr: Any) -> frozenset[str]:
        """The loop indices an index expression varies with, through indirect indices too."""
        deps: set[str] = set()
        for s in getattr(sympy.sympify(expr), "free_symbols", ()):
            deps |= self.indirect.get(s.name, {s.name})
        return frozenset(deps)

    def indirect_indexing(self, value: CSEVar, size: Any) -> sympy.Symbol:
        """Check ``value`` against ``[0, size)`` and name it as an index symbol: the
        language's check (:meth:`check_index`) gives the variable a load may use. A
        symbolic ``size`` is checked against its expression in the size arguments."""
        bound = self.size(size)
        key = f"indirect_indexing({value}, {bound})"   # checked once per scope
        var = next((scope[key] for scope in reversed(self.scopes) if key in scope), None)
        if var is None:
            what = f"index out of bounds: 0 <= {value} < {bound}"
            self.index_checks.append(what)
            var = self.check_index(value, bound, len(self.index_checks), what)
            self.scopes[-1][key] = var
            self.indirect[var.name] = value.deps
        return sympy.Symbol(var.name, integer=True, nonnegative=True)

    def load(self, buffer: ir.Buffer, index):
        name = buffer.name
        if name in self.plan.names:   # a node of this kernel
            computed = cast(ir.ComputedBuffer, buffer)
            if computed.is_reduction:
                return self.reduction_value(computed, index)
            # inline the producer at this index, once per scope: a value read at the same
            # index by several consumers (a polynomial's x in every term) is the same
            # variable, and the producer's own reads are not expanded again as a tree
            key = ("inline", name, tuple(index))
            value = next((scope[key] for scope in reversed(self.scopes) if key in scope),
                         None)
            if value is None:
                value = self.scopes[-1][key] = computed.data.inner_fn(index)
            return value
        self.inputs.setdefault(name, buffer)
        expr = self.offset_of(buffer.layout, index)
        offset = print_index(expr, self.language)
        return self.loaded(self.load_expr(self.arg_name(name), offset, index),
                           buffer.get_dtype(), self.index_deps(expr))

    def offset_of(self, layout: ir.FixedLayout, index) -> Any:
        """The flat element offset of the n-d ``index`` in ``layout`` (a kernel writer may
        simplify it further with what it knows of its loop variables)."""
        return layout.offset_of(index)

    def reduction_value(self, buffer: ComputedBuffer, index) -> CSEVar:
        """The variable holding the reduction ``buffer`` for the row being computed. The
        scheduler checked on the IR that it is read only so (``fusion_legality``); the
        errors below are internal ones, never reached."""
        if buffer.name not in self.reduction_values:
            raise FusionError(f"{buffer.name} (a reduction) is read before it is computed; "
                              "the scheduler should have refused this fusion")
        var, at = self.reduction_values[buffer.name]
        if any(sympy.expand(sympy.sympify(a) - sympy.sympify(b)) != 0
               for a, b in zip(index, at)):
            raise FusionError(f"the reduction {buffer.name} is read at another row than the "
                              "one being computed; the scheduler should have refused this "
                              "fusion")
        return var

    # -- sizes ---------------------------------------------------------------------------
    def size(self, size: Any) -> str:
        """A loop bound or other size in the kernel's language: a number, or an expression
        over the kernel's size arguments (``16 * s0``)."""
        return print_index(ir.size_expr(size), self.language)

    def size_args(self) -> list[str]:
        """The symbolic sizes the kernel's code uses (``s0``, ``s1``...), in order: they
        are arguments of the kernel, which the wrapper reads from its inputs' sizes.
        (Shape symbols are the only names of the form ``s<N>`` a kernel writer prints.)"""
        used = {int(m) for line in self.lines for m in _SIZE_SYMBOL.findall(line)}
        return [f"s{k}" for k in sorted(used)]

    # -- names of kernel arguments -------------------------------------------------------
    def arg_name(self, buffer_name: str) -> str:
        return f"in_ptr_{buffer_name}"

    def out_name(self, buffer_name: str) -> str:
        return f"out_ptr_{buffer_name}"

    def signature_buffers(self) -> list[tuple[str, ir.Buffer, bool]]:
        """(argument name, buffer, is_output) in argument order."""
        args = [(self.arg_name(n), b, False) for n, b in self.inputs.items()]
        args += [(self.out_name(n), b, True) for n, b in self.outputs.items()]
        return args

    # -- what subclasses implement -------------------------------------------------------
    def dtype_name(self, dtype: torch.dtype) -> str:
        raise NotImplementedError

    def literal(self, value: Any, dtype: torch.dtype) -> str:
        raise NotImplementedError

    def wrap_constant(self, value: Any, dtype: torch.dtype) -> CSEVar:
        raise NotImplementedError

    def load_expr(self, arg: str, offset: str, index) -> str:
        raise NotImplementedError

    def index_cast(self, index: str, dtype: torch.dtype) -> str:
        """An integer index expression converted to a value of ``dtype``."""
        raise NotImplementedError

    def widen(self, text: str, dtype: torch.dtype) -> str:
        """A loaded 16-bit float (``dtype``) as a float32 expression."""
        raise NotImplementedError

    def store(self, node: ComputedBuffer, index: Any, value: CSEVar) -> None:
        """Write ``value`` into ``node``'s buffer at ``index`` (the n-d loop index)."""
        raise NotImplementedError

    def narrow(self, value: CSEVar, dtype: torch.dtype) -> str:
        """A float32 value rounded to the 16-bit ``dtype``, as stored."""
        raise NotImplementedError

    def round_to(self, value: CSEVar, dtype: torch.dtype) -> str:
        """A float32 value rounded to the 16-bit ``dtype`` and widened again."""
        return self.widen(self.narrow(value, dtype), dtype)

    def check_index(self, value: CSEVar, size: str, check: int, what: str) -> CSEVar:
        """Emit the bounds check number ``check`` of ``value`` against ``size`` (printed: a
        number or an expression in the size arguments; ``what`` says it in words)
        and return a variable that holds an in-bounds index whatever the data."""
        raise NotImplementedError


def canonical_source(source: str, name: str, arg_names: Sequence[str]) -> str:
    """The kernel as it is built: the same text wherever in the graph the kernel sits.

    What a learner reads names the kernel after its place in the graph
    (``cpp_poi_fused_add_relu_7``), its arguments after the buffers they hold
    (``in_ptr_buf12``) and cites the graph nodes it came from. None of that changes the
    machine code, but all of it changes the text: a transformer's N identical layers would
    build N identical kernels. Here the kernel is called ``kernel``, its arguments
    ``in_ptr0, in_ptr1, ..., out_ptr0, ...`` in argument order, and the comments (provenance)
    are dropped, so the code cache (keyed by this text) builds each distinct kernel once.

    Mirrors: the placeholder kernel name Inductor hashes before naming a kernel
    (``Placeholder.KERNEL_NAME`` in torch/_inductor/codegen/triton.py).
    """
    inputs = [a for a in arg_names if a.startswith("in_ptr")]
    outputs = [a for a in arg_names if a.startswith("out_ptr")]
    rename = {name: "kernel"}
    rename.update({a: f"in_ptr{i}" for i, a in enumerate(inputs)})
    rename.update({a: f"out_ptr{i}" for i, a in enumerate(outputs)})
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(rename, key=len,
                                                                  reverse=True))) + r")\b")
    lines = [line for line in source.splitlines()
             if not line.lstrip().startswith(("//", "# "))]  # comments: provenance
    return pattern.sub(lambda m: rename[m.group(1)], "\n".join(lines))


def origin_sources(nodes: Sequence[ir.Buffer]) -> list[str]:
    """The user's lines a kernel's nodes came from (``meta["source"]``, kept by every pass
    since capture; see ``Graph.nodes_from``), in order, each once."""
    seen: list[str] = []
    for n in nodes:
        for o in n.origins:
            source = o.meta.get("source")
            if source and source not in seen:
                seen.append(source)
    return seen


def origin_names(nodes: Sequence[ir.Buffer]) -> list[str]:
    """The prim-graph node names a kernel came from (for the comment above it)."""
    seen: list[str] = []
    for n in nodes:
        for o in n.origins:
            if o.name not in seen:
                seen.append(o.name)
    return seen


__all__ = ["HALF_DTYPES", "CSEVar", "FusionError", "KernelPlan", "KernelWriter",
           "canonical_source", "compute_dtype", "origin_names", "origin_sources",
           "print_index"]
