"""The loop-level IR: what each value of a prim graph *is*, as a function over indices.

A prim graph says "``exp`` of ``add``"; a kernel needs to know, for each output element,
which input elements to load and how to combine them. This module states that in a form
both code generators can read:

* :class:`Pointwise` -- ``ranges`` (the output shape) and ``inner_fn(index) -> value``;
* :class:`Reduction` -- the shape being reduced (``src_shape``), the ``reduced_dims``, a
  ``reduction_type`` (``sum`` or ``max``) and ``inner_fn(full_index) -> value to reduce``;
* :class:`View` -- no data of its own: a ``reindex`` function maps its indices to the indices
  of its base, so a transpose or a broadcast becomes index arithmetic, never a copy;
* buffers: :class:`InputBuffer` (a graph input), :class:`ComputedBuffer` (holds a Pointwise or
  Reduction), :class:`ExternKernel` (a call into PyTorch: matmul, convolution, and every op the
  compiler does not generate code for).

``inner_fn`` is written against the *virtualized* ops: arithmetic calls ``ops.add``,
``ops.exp``... (the prims of ``tutorcompile.ops``), and memory is read with :func:`load` and
:func:`constant` from this module. Which handler is installed decides what happens: the
:class:`ReferenceHandler` below computes with torch tensors (our check that lowering is right),
the C++ and Triton kernel writers print code. That is Inductor's ``V.ops`` idea: one
definition of a value, many interpretations.

Sizes are ints, or :class:`~tutorcompile.fx.symbolic_shapes.SymInt` s when the graph was
built for symbolic sizes (``s0``: a batch size that changes between calls); index
expressions then contain the size symbols too (``x0 * s1``), which the kernels take as
arguments. Indices are sympy expressions over loop variables. :class:`FloorDiv` and
:class:`ModularIndexing` are the two integer operations a reshape needs. An index may also
come from *data*: :func:`indirect_indexing` turns a loaded integer (a row of an embedding
table, the position ``gather`` reads) into a symbol that the next load's index uses -- an
*indirect load*. Every handler checks such an index against the size it indexes: the
reference handler raises, the kernels report the bad index instead of reading outside the
buffer.

Mirrors: torch/_inductor/ir.py (Pointwise, Reduction, View, ComputedBuffer, ExternKernel,
FixedLayout), torch/_inductor/utils.py / sizevars.py (index expressions) and
``ops.indirect_indexing`` (torch/_inductor/ops_handler.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import sympy
import torch

from ..fx.symbolic_shapes import SymInt, hint_int
from ..ops import OpsHandler, current_handler, ops, set_handler
from ..ops.table import contiguous_strides


class FusionError(Exception):
    """These buffers cannot share one kernel; the message says why (for the fusion report).
    Raised by the IR (a matmul template's body exists only in its own kernel; loops that do
    not line up, ``KernelPlan.from_nodes``) and by the legality check the scheduler runs
    before code generation (``fusion_legality``). The kernel writers of ``codegen/`` raise it
    only as an internal error: for a fusion the scheduler should have refused."""


# ---------------------------------------------------------------------------------------
# Index expressions
# ---------------------------------------------------------------------------------------


class FloorDiv(sympy.Function):
    """``base // divisor`` for non-negative integers (C's ``/`` and Python's ``//`` agree).

    Whole multiples come out of the floor: ``FloorDiv(64*r0 + x0%64, 64)`` is ``r0``, and
    ``FloorDiv(64*r0 + x0%64, 2048)`` is ``FloorDiv(r0, 32)`` (see :func:`_peel`), so a
    reshape's index after a scatter or a split reduction reads memory in order."""
    is_integer = True
    nargs = 2

    @classmethod
    def eval(cls, base, divisor):
        if divisor == 1:
            return base
        if base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(int(base) // int(divisor))
        if isinstance(base, ModularIndexing) and divisor.is_Integer and \
                base.args[2].is_Integer and base.args[2] % divisor == 0:
            # a digit's high part is a digit: (x % 64) // 16 = (x // 16) % 4 -- the form a
            # split loop's x = 16*xa + xb then peels to xa % 4 (a cat's columns of heads)
            e, a, m = base.args
            return ModularIndexing(e, a * divisor, m // divisor)
        peeled = _peel(base, divisor)
        if peeled is not None:
            quotient, g = peeled
            return FloorDiv(quotient, divisor // g)
        return None


class ModularIndexing(sympy.Function):
    """``(base // divisor) % modulus``: one digit of a mixed-radix number (reshape's index).

    Simplified as :class:`FloorDiv` is: multiples of ``divisor * modulus`` vanish beside a
    bounded rest, a floor that peels away leaves ``quotient % modulus``, and a digit of a
    digit is one digit."""
    is_integer = True
    nargs = 3

    @classmethod
    def eval(cls, base, divisor, modulus):
        if modulus == 1 or base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer and modulus.is_Integer:
            return sympy.Integer((int(base) // int(divisor)) % int(modulus))
        if not divisor.is_Integer or not modulus.is_Integer or divisor * modulus <= 0:
            return None   # (a zero divisor only indexes an empty loop, which never runs)
        if isinstance(base, ModularIndexing) and base.args[1] == 1 and \
                base.args[2] % (divisor * modulus) == 0:   # (x % 64 // 16) % 4 = x // 16 % 4
            return ModularIndexing(base.args[0], divisor, modulus)
        terms = sympy.Add.make_args(base)
        kept = [t for t in terms if t.as_coeff_Mul()[0] % (divisor * modulus) != 0]
        bound = _bound(kept)
        # only when what is kept is bounded: ``(64*x0 + r0) % 64`` stays whole, the digit
        # simplify_index joins with its ``FloorDiv(64*x0 + r0, 64)`` back into the flat index
        if len(kept) < len(terms) and bound is not None and bound < math.inf:
            return ModularIndexing(sympy.Add(*kept), divisor, modulus)
        peeled = _peel(base, divisor)
        if peeled is not None:
            quotient, g = peeled
            return ModularIndexing(quotient, divisor // g, modulus)
        return None


def _bound(terms) -> int | float | None:
    """The largest value the sum of ``terms`` can take, when every term is a non-negative
    integer (a constant, an index symbol, a floor or a digit, times a positive integer):
    ``inf`` when some term is unbounded; None when a term might be negative."""
    total: int | float = 0
    for term in terms:
        coeff, atom = term.as_coeff_Mul()
        if not coeff.is_Integer or coeff < 0:
            return None
        if atom == 1:
            total += int(coeff)
        elif isinstance(atom, ModularIndexing) and atom.args[2].is_Integer:
            total += int(coeff) * (int(atom.args[2]) - 1)
        elif isinstance(atom, FloorDiv) or (atom.is_Symbol and atom.is_nonnegative):
            total = math.inf
        else:
            return None
    return total


def _peel(base, divisor) -> tuple[sympy.Expr, int] | None:
    """``base = g*quotient + rest`` with ``g`` dividing ``divisor`` and ``0 <= rest < g``,
    for the largest such ``g`` > 1: then ``base // divisor == quotient // (divisor / g)``
    (the rest never carries into the quotient). None when no ``g`` works."""
    if not divisor.is_Integer or divisor <= 1:
        return None
    d, terms = int(divisor), sympy.Add.make_args(base)
    coeffs = [t.as_coeff_Mul()[0] for t in terms]
    if not all(c.is_Integer for c in coeffs):
        return None
    for g in sorted({math.gcd(d, int(c)) for c in coeffs} - {1}, reverse=True):
        whole = [t for t, c in zip(terms, coeffs) if int(c) % g == 0]
        rest = [t for t, c in zip(terms, coeffs) if int(c) % g != 0]
        bound = _bound(rest)
        if whole and bound is not None and bound < g:
            return sympy.Add(*whole) / g, g
    return None


def index_symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, nonnegative=True)


def as_size(size: Any) -> int | SymInt:
    """A size as the IR keeps it: an int, or a :class:`SymInt` (symbolic, e.g. ``s0``)."""
    return size if isinstance(size, SymInt) else int(size)


def size_expr(size: Any) -> sympy.Expr:
    """A size (int or SymInt) as a sympy expression, for printing and comparing."""
    return sympy.sympify(size)


def same_sizes(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Are two shapes the same for every value of their symbols? Decided on the expressions
    (``s0`` is not ``5``, even when the example's ``s0`` is 5), so it guards nothing: where
    a rule or a fusion would need sizes to be equal it takes its general path instead
    (Inductor's ``statically_known_equals``)."""
    return len(a) == len(b) and all(size_expr(x) == size_expr(y) for x, y in zip(a, b))


def flatten_index(index: Sequence[Any], shape: Sequence[int]) -> sympy.Expr:
    """The row-major position of ``index`` in ``shape``."""
    return sympy.Add(*[sympy.Integer(0)] + [sympy.sympify(i) * s
                                             for i, s in zip(index, contiguous_strides(shape))
                                             ])


def unflatten_index(flat: Any, shape: Sequence[int]) -> list[sympy.Expr]:
    """The inverse of :func:`flatten_index`: the digits of ``flat`` in the radices ``shape``,
    assuming ``0 <= flat < numel`` (so the first digit needs no modulus). Sizes are told
    apart by their expressions (guarding nothing): a symbolic size that is 1 at the example
    still gets its digit, which is 0 whenever it is 1."""
    flat = sympy.sympify(flat)
    strides = contiguous_strides(shape)
    out = []
    for k, (size, stride) in enumerate(zip(shape, strides)):
        if size_expr(size) == 1:
            out.append(sympy.Integer(0))
        elif k == 0 or all(size_expr(s) == 1 for s in shape[:k]):
            out.append(FloorDiv(flat, stride))
        else:
            out.append(ModularIndexing(flat, stride, size))
    return out


def reshape_groups(in_shape: Sequence[Any], out_shape: Sequence[Any]
                   ) -> list[tuple[list[int], list[int]]] | None:
    """A reshape as groups of consecutive dims whose sizes multiply to the same number
    on both sides (``(8, 32, 32) -> (8, 16, 2, 16, 2)`` is ``[0] -> [0]``, ``[1] -> [1, 2]``,
    ``[2] -> [3, 4]``; ``(s0, 16, 64) -> (16*s0, 64)`` is ``[0, 1] -> [0]``, ``[2] -> [1]``);
    trailing size-1 dims belong to no group. A group closes when its two products are the
    same expression (for every value of the symbols); which side grows meanwhile is chosen
    by the example's sizes, which decides nothing a result depends on. None for an empty
    shape, or when no such groups exist (the caller flattens the whole index)."""
    if any(size_expr(s) == 0 for s in (*in_shape, *out_shape)):
        return None
    groups, i, j = [], 0, 0
    while i < len(in_shape) and j < len(out_shape):
        ins, outs = [i], [j]
        pi, pj = size_expr(in_shape[i]), size_expr(out_shape[j])
        hi, hj = hint_int(in_shape[i]), hint_int(out_shape[j])
        i, j = i + 1, j + 1
        while sympy.expand(pi - pj) != 0:
            if hi <= hj and i < len(in_shape):
                ins.append(i)
                pi, hi = pi * size_expr(in_shape[i]), hi * hint_int(in_shape[i])
                i += 1
            elif j < len(out_shape):
                outs.append(j)
                pj, hj = pj * size_expr(out_shape[j]), hj * hint_int(out_shape[j])
                j += 1
            else:
                return None
        groups.append((ins, outs))
    if any(size_expr(s) != 1 for s in (*in_shape[i:], *out_shape[j:])):
        return None
    return groups


def reshape_index(index: Sequence[Any], out_shape: Sequence[Any], in_shape: Sequence[Any]
                  ) -> list:
    """The index into ``in_shape`` of the element at ``index`` of the same elements seen as
    ``out_shape`` (row-major, as ``reshape``): size-1 dims come and go freely; groups of
    dims (:func:`reshape_groups`) map one to one, so a split dim's index is its parts'
    row-major position (``h = 2*ho + i``, no floor division) and a merged dim's digits come
    from its one index; otherwise the whole index is flattened and unflattened."""
    in_kept = [k for k, s in enumerate(in_shape) if size_expr(s) != 1]
    out_kept = [k for k, s in enumerate(out_shape) if size_expr(s) != 1]
    if same_sizes([in_shape[k] for k in in_kept], [out_shape[k] for k in out_kept]):
        new = [sympy.Integer(0)] * len(in_shape)
        for i, o in zip(in_kept, out_kept):
            new[i] = index[o]
        return new
    groups = reshape_groups(in_shape, out_shape)
    if groups is None:
        return unflatten_index(flatten_index(index, out_shape), in_shape)
    new = [sympy.Integer(0)] * len(in_shape)
    for ins, outs in groups:
        flat = flatten_index([index[o] for o in outs], [out_shape[o] for o in outs])
        for k, v in zip(ins, unflatten_index(flat, [in_shape[k] for k in ins])):
            new[k] = v
    return new


def _factor(term: sympy.Expr, cls: type) -> tuple[sympy.Expr, Any]:
    """``term`` as ``coeff * atom`` with ``atom`` an instance of ``cls`` (the coefficient
    may hold size symbols: ``32*s1*FloorDiv(x0, s1)``); ``(term, None)`` if there is none."""
    factors = sympy.Mul.make_args(term)
    atom = next((f for f in factors if isinstance(f, cls)), None)
    if atom is None:
        return term, None
    return sympy.Mul(*[f for f in factors if f is not atom]), atom


def simplify_index(expr: Any) -> sympy.Expr:
    """Undo flatten-of-unflatten: ``c*b*FloorDiv(e, a*b) + c*ModularIndexing(e, a, b)`` is
    ``c*FloorDiv(e, a)`` (the two digits join back into one), and likewise
    ``c*b*ModularIndexing(e, a*b, m) + c*ModularIndexing(e, a, b)`` is
    ``c*ModularIndexing(e, a, b*m)``, applied until nothing changes. A reshape of a reshape
    then indexes memory with ``r0``, not ``13*(r0/13) + r0%13``; a loop split into runs of
    49 (``x0b`` below 49) with ``x0b``, not ``7*((x0b/7)%7) + x0b%7``."""
    expr = sympy.expand(sympy.sympify(expr))
    changed = True
    while changed and isinstance(expr, sympy.Add):
        changed = False
        terms = list(expr.args)
        for i, t in enumerate(terms):
            c_mod, mod = _factor(t, ModularIndexing)
            if mod is None:
                continue
            e, a, b = mod.args
            for j, u in enumerate(terms):
                if j == i:
                    continue
                c_div, div = _factor(u, FloorDiv)
                c_up, up = _factor(u, ModularIndexing)
                if div is not None and div.args[0] == e and \
                        div.args[1] == a * b and sympy.expand(c_div - c_mod * b) == 0:
                    joined = FloorDiv(e, a)
                elif up is not None and up.args[0] == e and up.args[1] == a * b and \
                        sympy.expand(c_up - c_mod * b) == 0:
                    joined = ModularIndexing(e, a, b * up.args[2])
                else:
                    continue
                rest = [x for k, x in enumerate(terms) if k not in (i, j)]
                expr = sympy.Add(*rest, c_mod * joined)
                changed = True
                break
            if changed:
                break
        expr = sympy.expand(expr)
    return expr


# ---------------------------------------------------------------------------------------
# The operations an inner function may use besides the prims
# ---------------------------------------------------------------------------------------

class LoopHandler(Protocol):
    """What a handler of inner functions provides besides ``call`` (the prims): the four
    operations below, which only loops have (code generators, the read recorders)."""

    def load(self, buffer: Buffer, index: list) -> Any: ...
    def constant(self, value: Any, dtype: torch.dtype) -> Any: ...
    def indirect_indexing(self, value: Any, size: Any) -> Any: ...
    def index_expr(self, expr: Any, dtype: torch.dtype) -> Any: ...


def _loop_handler() -> LoopHandler:
    return cast(LoopHandler, current_handler())


def load(buffer: Buffer, index: Sequence[Any]) -> Any:
    """Read ``buffer`` at the n-d ``index`` under the current handler."""
    return _loop_handler().load(buffer, list(index))


def constant(value: Any, dtype: torch.dtype) -> Any:
    """A number as a value of ``dtype`` under the current handler."""
    return _loop_handler().constant(value, dtype)


def indirect_indexing(value: Any, size: int | SymInt, wrap_negative: bool = False
                      ) -> sympy.Symbol:
    """An integer *value* (from a load) as an index symbol over ``range(size)``, for use in
    another load's index: ``table[index[i]]`` is ``load(table, [indirect_indexing(
    load(index, [i]), n)])``. With ``wrap_negative`` a negative value counts from the end
    (``take``, Python indexing); every value outside ``[0, size)`` after that is an error
    the handler reports (an ``IndexError``), never a read outside the buffer."""
    size = as_size(size)   # a symbolic size stays one: the kernel checks against ``s2``
    if wrap_negative:
        bound = index_expr(size.expr, torch.int64) if isinstance(size, SymInt) else \
            constant(size, torch.int64)
        value = ops.where(ops.lt(value, constant(0, torch.int64)), ops.add(value, bound), value)
    return _loop_handler().indirect_indexing(value, size)


def index_expr(expr: Any, dtype: torch.dtype) -> Any:
    """An index expression (``i0 * 2 + 1``) as a value of ``dtype``: what ``iota`` (and so
    argmax, one-hot masks, triangular masks) computes from the loop indices."""
    return _loop_handler().index_expr(expr, dtype)


# ---------------------------------------------------------------------------------------
# Layouts and nodes
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FixedLayout:
    """Where a buffer's elements live: ``offset + sum(index[k] * stride[k])``."""
    size: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    offset: int = 0

    @classmethod
    def contiguous(cls, size: Sequence[int], dtype: torch.dtype, device: Any) -> FixedLayout:
        dims: tuple[Any, ...] = tuple(as_size(s) for s in size)   # ints or SymInts
        return cls(dims, contiguous_strides(dims), dtype, torch.device(device))

    def offset_of(self, index: Sequence[Any]) -> sympy.Expr:
        terms = [sympy.sympify(i) * s for i, s in zip(index, self.stride) if s != 0]
        return sympy.Add(sympy.Integer(self.offset), *terms)

    @property
    def numel(self) -> int:
        return math.prod(self.size)

    @property
    def nbytes(self) -> int:
        """Bytes at the example's sizes (a symbolic size counts its hint): for fusion
        scores and reports, which decide nothing a result depends on."""
        return hint_int(self.numel) * torch.empty((), dtype=self.dtype).element_size()


class IRNode:
    """Anything a lowering can return: it has a size, a dtype, and a loader."""
    origins: list  # the prim-graph nodes this value came from

    def get_size(self) -> tuple[int, ...]:
        raise NotImplementedError

    def get_dtype(self) -> torch.dtype:
        raise NotImplementedError

    def get_device(self) -> torch.device:
        raise NotImplementedError

    def make_loader(self) -> Callable[[Sequence[Any]], Any]:
        raise NotImplementedError


@dataclass
class Loops:
    """A computation over a loop nest (the body of a ComputedBuffer)."""
    ranges: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    inner_fn: Callable


@dataclass
class Pointwise(Loops):
    """``out[index] = inner_fn(index)`` for every ``index`` in ``ranges``."""


@dataclass
class Reduction(Loops):
    """``out[kept] = reduce(inner_fn(full) for the full indices that share kept)``.

    ``src_shape`` is the shape iterated, ``reduced_dims`` the dimensions folded away; the
    output (``ranges``) keeps the others, and the reduced ones as 1s when ``keepdim``.
    """
    src_shape: tuple[int, ...] = ()
    reduced_dims: tuple[int, ...] = ()
    reduction_type: str = "sum"
    keepdim: bool = False

    @property
    def kept_shape(self) -> tuple[int, ...]:
        return tuple(s for d, s in enumerate(self.src_shape) if d not in self.reduced_dims)

    @property
    def reduced_shape(self) -> tuple[int, ...]:
        return tuple(self.src_shape[d] for d in self.reduced_dims)


REDUCTION_INIT = {"sum": 0, "max": float("-inf")}


def reduction_init(reduction_type: str, dtype: torch.dtype) -> Any:
    if reduction_type == "max" and not dtype.is_floating_point:
        return torch.iinfo(dtype).min if dtype != torch.bool else False
    value = REDUCTION_INIT[reduction_type]
    return value if dtype.is_floating_point else int(value)


class Buffer(IRNode):
    """A named piece of memory with a layout; kernels load and store it."""

    def __init__(self, name: str, layout: FixedLayout, origins: list | None = None):
        self.name = name
        self.layout = layout
        self.origins = list(origins or [])

    @property
    def is_reduction(self) -> bool:
        return False   # (a ComputedBuffer over a Reduction is one)

    def reads(self) -> list[str]:
        """Names of the buffers this one is computed from (none for an input)."""
        return []

    def get_size(self):
        return self.layout.size

    def get_dtype(self):
        return self.layout.dtype

    def get_device(self):
        return self.layout.device

    def make_loader(self):
        return lambda index: load(self, index)

    def __repr__(self) -> str:
        dtype = str(self.layout.dtype).replace("torch.", "")
        return f"{type(self).__name__}({self.name}: {dtype}{list(self.layout.size)})"


class InputBuffer(Buffer):
    """A graph input: its layout is the example input's (strides included)."""


class ComputedBuffer(Buffer):
    """A buffer whose contents a generated kernel computes from ``data``."""

    def __init__(self, name: str, layout: FixedLayout, data: Loops, origins=None):
        super().__init__(name, layout, origins)
        self.data = data
        # its readers load it from memory, never compute it again in their own loops: a
        # sort compares each element with the others, and a value computed twice -- once
        # in a vectorised loop (libmvec's sin), once outside it (glibc's) -- may differ in
        # its last bits, which breaks the order (a graph node's meta["realize"])
        self.realized = False

    @property
    def is_reduction(self) -> bool:
        return isinstance(self.data, Reduction)

    @property
    def reduction(self) -> Reduction:
        """``data`` of a reduction buffer (``is_reduction``)."""
        if not isinstance(self.data, Reduction):
            raise TypeError(f"{self.name} computes a pointwise value, not a reduction")
        return self.data

    def reads(self) -> list[str]:
        """Names of the buffers the inner function loads (found by running it once)."""
        return _ReadRecorder.reads_of(self)


class ExternKernel(Buffer):
    """A call into PyTorch: ``kernel(*args, **kwargs)`` whose args may hold IR values."""

    def __init__(self, name: str, layout: FixedLayout, kernel: Callable, args: tuple,
                 kwargs: dict, origins=None, reason: str = ""):
        super().__init__(name, layout, origins)
        self.kernel = kernel
        self.args = args
        self.kwargs = kwargs
        self.reason = reason
        self.multi_output = False   # True: the call returns a tuple (read through getitem)

    def inputs(self) -> list[IRNode]:
        found: list[IRNode] = []

        def visit(a):
            if isinstance(a, IRNode):
                found.append(a)
            elif isinstance(a, (list, tuple)):
                for x in a:
                    visit(x)
            elif isinstance(a, dict):
                for x in a.values():
                    visit(x)
        visit(self.args)
        visit(self.kwargs)
        return found

    def reads(self) -> list[str]:
        return sorted({base_buffer(v).name for v in self.inputs()})


class View(IRNode):
    """A view of ``base``: index ``i`` of the view is index ``reindex(i)`` of the base.

    ``node`` (the prim-graph view node) lets the wrapper rebuild the view with PyTorch when a
    PyTorch call (an extern kernel, or the caller) needs it as a tensor.
    """

    def __init__(self, base: IRNode, size: Sequence[int], reindex: Callable, node: Any,
                 origins=None):
        self.base = base
        self.size = tuple(as_size(s) for s in size)
        self.reindex = reindex
        self.node = node
        self.origins = list(origins or [])

    def get_size(self):
        return self.size

    def get_dtype(self):
        return self.base.get_dtype()

    def get_device(self):
        return self.base.get_device()

    def make_loader(self):
        inner = self.base.make_loader()
        return lambda index: inner(self.reindex(list(index)))

    def __repr__(self) -> str:
        return f"View({self.node.name if self.node is not None else '?'} of {self.base!r})"


def base_buffer(value: IRNode) -> Buffer:
    while isinstance(value, View):
        value = value.base
    return cast(Buffer, value)


def view_strides(view: View, base: Buffer) -> tuple | None:
    """The sizes, strides and storage offset of ``view`` (a chain of views of ``base``) as
    ints (SymInts where sizes are symbolic), from the index arithmetic the kernels use: the
    offset of view index ``(i0, i1, ...)`` in ``base``'s memory is ``offset + i0*stride0 +
    i1*stride1 + ...`` exactly when the chain is a strided view. None when it is not (a
    division or a remainder of an index: a reshape that regroups elements, as ``(B, H)``
    of a transposed ``(B, T, H, D)`` merged into one batch dimension)."""
    index = [sympy.Symbol(f"i{k}", integer=True, nonnegative=True)
             for k in range(len(view.get_size()))]
    at, node = list(index), cast(IRNode, view)
    while isinstance(node, View):
        at = node.reindex(at)
        node = node.base
    sizes = {i: n if isinstance(n, int) else None for i, n in zip(index, view.get_size())}
    offset = sympy.expand(_within_ranges(simplify_index(base.layout.offset_of(at)), sizes))
    if any(isinstance(e, (FloorDiv, ModularIndexing, sympy.Mod, sympy.floor))
           for e in sympy.preorder_traversal(offset)):
        return None
    poly = sympy.Poly(offset, *index) if index else None
    if poly is not None and poly.total_degree() > 1:
        return None
    env = next((v.shape_env for v in (*base.layout.size, *base.layout.stride,
                                      *view.get_size()) if isinstance(v, SymInt)), None)

    def size(expr):
        expr = sympy.expand(expr)
        if expr.is_Integer:
            return int(expr)
        if env is None:
            raise ValueError(expr)
        return SymInt(expr, env)
    try:
        strides = tuple(size(offset.coeff(i)) for i in index)
        return tuple(view.get_size()), strides, size(offset.xreplace({i: 0 for i in index}))
    except ValueError:      # an expression in no size symbol: not a layout we can name
        return None


def _within_ranges(expr: Any, sizes: dict) -> Any:
    """``expr`` with each floor and digit of a linear index (``FloorDiv(64*i0 + 16*i1 +
    i2, 64)`` of a reshape) worked out from the ranges of the index symbols (``i1 < 4``,
    ``i2 < 16``: ``i0``), innermost first. ``sizes`` maps each symbol to its size, None
    when symbolic (a term in it must then be a whole multiple: it has no bound)."""
    if not getattr(expr, "args", ()):
        return expr
    expr = expr.func(*[_within_ranges(a, sizes) for a in expr.args])
    if not isinstance(expr, (FloorDiv, ModularIndexing)):
        return expr
    quotient = _whole_part(expr.args[0], expr.args[1], sizes)
    if quotient is None or isinstance(expr, FloorDiv):
        return expr if quotient is None else quotient
    modulus = expr.args[2]
    rest = _whole_part(quotient, modulus, sizes, remainder=True)
    return expr if rest is None else rest


def _whole_part(base: Any, divisor: Any, sizes: dict, remainder: bool = False) -> Any:
    """``base // divisor`` (or ``base % divisor``) for ``base`` linear in the index symbols,
    when the terms that are not whole multiples of ``divisor`` add up to ``[0, divisor)``
    over the symbols' ranges; else None."""
    if not (divisor.is_Integer and divisor > 0):
        return None
    base = sympy.expand(base)
    whole, rest, low, high = [], [], 0, 0
    for term in sympy.Add.make_args(base):
        coeff, factor = term.as_coeff_Mul()
        if coeff.is_Integer and int(coeff) % int(divisor) == 0:
            whole.append(term)
            continue
        if not coeff.is_Integer or (factor != 1 and not (factor in sizes and
                                                         sizes[factor] is not None)):
            return None
        extent = int(coeff) * ((sizes[factor] - 1) if factor != 1 else 1)
        low, high = low + min(0, extent), high + max(0, extent)
        rest.append(term)
    if low < 0 or high >= divisor:
        return None
    if remainder:
        return sympy.Add(*rest)
    return sympy.expand(sympy.Add(*whole) / divisor)



# ---------------------------------------------------------------------------------------
# Handlers: who needs to know what an inner function does
# ---------------------------------------------------------------------------------------

@dataclass
class _Meta:
    """Shape-less stand-in for a value, so the prims' dtype rules can run on it."""
    dtype: torch.dtype
    shape: tuple = ()
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))


class _ReadRecorder(OpsHandler):
    """Runs an inner function only to see which buffers it loads."""

    def __init__(self):
        self.names: list[str] = []
        self.calls = 0

    def load(self, buffer, index):
        if buffer.name not in self.names:
            self.names.append(buffer.name)
        return _Meta(buffer.get_dtype())

    def constant(self, value, dtype):
        return _Meta(dtype)

    def index_expr(self, expr, dtype):
        return _Meta(dtype)

    def indirect_indexing(self, value, size):
        return index_symbol("indirect")

    def call(self, prim, args, kwargs):
        self.calls += 1
        _, dtype = prim.meta(*args, **kwargs)
        return _Meta(dtype)

    @classmethod
    def record(cls, buffer: ComputedBuffer) -> _ReadRecorder:
        rec = cls()
        data = buffer.data
        shape = data.src_shape if isinstance(data, Reduction) else data.ranges
        index = [index_symbol(f"i{k}") for k in range(len(shape))]
        with set_handler(rec):
            data.inner_fn(index)
        return rec

    @classmethod
    def reads_of(cls, buffer: ComputedBuffer) -> list[str]:
        return cls.record(buffer).names


class _OpCounter(_ReadRecorder):
    """Counts the operations of an inner function, expanding the loads of ``inside`` (the
    pointwise buffers of one kernel, computed where they are read) as a kernel does: once
    per buffer and index."""

    def __init__(self, inside: dict[str, ComputedBuffer]):
        super().__init__()
        self.inside = inside
        self.seen: dict[tuple, Any] = {}

    def load(self, buffer, index):
        inner = self.inside.get(buffer.name)
        if inner is None or inner.is_reduction:
            return super().load(buffer, index)
        key = (buffer.name, tuple(index))
        if key not in self.seen:
            self.seen[key] = inner.data.inner_fn(index)
        return self.seen[key]


def op_count(buffer: ComputedBuffer, inside: dict[str, ComputedBuffer] | None = None) -> int:
    """How many operations (prim calls) computing one element of ``buffer`` takes, not
    counting loads, constants and index arithmetic; with ``inside``, the operations of the
    buffers it loads from ``inside`` too (computed in the same kernel, at its indices)."""
    rec = _OpCounter(inside or {})
    index = [index_symbol(f"i{k}") for k in range(len(buffer.data.ranges))]
    with set_handler(rec):
        buffer.data.inner_fn(index)
    return rec.calls


class ReferenceHandler(OpsHandler):
    """Evaluate inner functions with torch: index symbols become broadcastable integer
    tensors, loads gather from the buffers' storage, prims run their references.

    This is the loop IR's own interpreter -- slow-ish but obviously right, and what the tests
    compare lowering against before any code generator is involved. The index values and
    constants it makes are made on ``device`` (the buffer's), beside the storage they meet.
    """

    def __init__(self, storage: dict[str, torch.Tensor], env: dict[sympy.Symbol, torch.Tensor],
                 device: torch.device | str = "cpu"):
        self.storage = storage
        self.env = env
        self.device = torch.device(device)

    def index_value(self, expr: Any) -> torch.Tensor:
        expr = sympy.sympify(expr)
        if expr.is_Integer:
            return torch.tensor(int(expr), device=self.device)
        if expr.is_Symbol:
            return self.env[expr]
        args = [self.index_value(a) for a in expr.args]
        if isinstance(expr, sympy.Add):
            out = args[0]
            for a in args[1:]:
                out = out + a
            return out
        if isinstance(expr, sympy.Mul):
            out = args[0]
            for a in args[1:]:
                out = out * a
            return out
        if isinstance(expr, FloorDiv):
            return torch.div(args[0], args[1], rounding_mode="floor")
        if isinstance(expr, ModularIndexing):
            return torch.remainder(torch.div(args[0], args[1], rounding_mode="floor"), args[2])
        raise NotImplementedError(f"index expression {expr}")

    def load(self, buffer, index):
        flat = self.storage[buffer.name]
        offset = self.index_value(buffer.layout.offset_of(index))
        return flat[offset]

    def constant(self, value, dtype):
        return torch.tensor(value, dtype=dtype, device=self.device)

    def index_expr(self, expr, dtype):
        return self.index_value(expr).to(dtype)

    def indirect_indexing(self, value, size):
        value, size = torch.as_tensor(value, device=self.device), hint_int(size)
        bad = (value < 0) | (value >= size)
        if bool(bad.any()):
            raise IndexError(f"index {int(value[bad].flatten()[0])} is out of bounds for a "
                             f"dimension of size {size}")
        symbol = index_symbol(f"indirect{len(self.env)}")
        self.env[symbol] = value.long()
        return symbol

    def call(self, prim, args, kwargs):
        return prim.reference(*args, **kwargs)


def evaluate_buffer(buffer: ComputedBuffer, storage: dict[str, torch.Tensor]) -> torch.Tensor:
    """Compute ``buffer`` with the :class:`ReferenceHandler` (``storage`` maps the names of
    the buffers it reads to their flat storage), on the buffer's device."""
    data = buffer.data
    device = buffer.get_device()
    shape = data.src_shape if isinstance(data, Reduction) else data.ranges
    syms = [index_symbol(f"i{k}") for k in range(len(shape))]
    env = {}
    for k, (sym, size) in enumerate(zip(syms, shape)):
        view = [1] * len(shape)
        view[k] = size
        env[sym] = torch.arange(size, device=device).reshape(view)
    with set_handler(ReferenceHandler(storage, env, device)):
        value = data.inner_fn(syms)
    value = torch.as_tensor(value, device=device).to(data.dtype).expand(tuple(shape))
    if isinstance(data, Reduction):
        dims = data.reduced_dims
        if not dims:
            out = value
        elif data.reduction_type == "sum":
            out = value.sum(dims, keepdim=True, dtype=data.dtype)
        else:
            out = value.amax(dims, keepdim=True)
        value = out.reshape(data.ranges)
    return value.contiguous()


class TemplateBuffer(ComputedBuffer):
    """A matrix product that a generated Triton *template* computes: ``a @ b`` (batch
    dimensions broadcast, as the ``matmul`` prim's), plus ``bias`` when it is an ``addmm``.

    ``mode="max-autotune"`` makes one when a template config beat the PyTorch call (or a
    test forced it): then pointwise consumers of the product can be fused into the
    template as its *epilogue* (:meth:`~.scheduler.Scheduler.can_fuse`), computed on the
    float32 accumulator tile before anything is stored. ``config`` is the winning
    ``(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)``.

    Its loop body is no pointwise function: nothing inlines it (a kernel that reads it
    reads its stored result); only the template writer computes it.

    Mirrors: torch/_inductor/ir.py (``TritonTemplateBuffer``)."""

    def __init__(self, name: str, layout: FixedLayout, a: IRNode, b: IRNode,
                 bias: IRNode | None, config: tuple, origins=None):
        data = Pointwise(layout.size, layout.dtype, layout.device, self._no_inner_fn)
        super().__init__(name, layout, data, origins)
        self.a, self.b, self.bias = a, b, bias
        self.config = config
        self.autotune_note = ""   # the timings that chose it (a comment under its kernel)

    def _no_inner_fn(self, index):
        raise FusionError(f"{self.name} is a matmul template; only its own kernel computes it")

    def inputs(self) -> list[IRNode]:
        return [self.a, self.b] + ([self.bias] if self.bias is not None else [])

    def reads(self) -> list[str]:
        return sorted({base_buffer(v).name for v in self.inputs()})


class _LoadRecorder(_ReadRecorder):
    """:class:`_ReadRecorder` that also keeps each load's index."""

    def __init__(self):
        super().__init__()
        self.loads: list[tuple[str, tuple]] = []

    def load(self, buffer, index):
        self.loads.append((buffer.name, tuple(index)))
        return super().load(buffer, index)


def loads_of(buffer: ComputedBuffer) -> list[tuple[str, tuple]]:
    """Every load of ``buffer``'s inner function as ``(buffer name, index)``, the index in
    the loop's own symbols ``i0, i1, ...`` (:func:`index_symbol`): which element of each
    input one step of the loop reads."""
    return cast(_LoadRecorder, _LoadRecorder.record(buffer)).loads
