"""Symbolic sizes: a shape environment, sizes as sympy symbols, guards from what was relied on.

A graph compiled for ``x`` of shape ``(8, 10)`` is right for ``(8, 10)`` only, unless the
compiler never looks at the 8. Here the 8 becomes the symbol ``s0`` (its *hint* is 8, the
example's value) and every size computed from it is a :class:`SymInt` holding a sympy
expression: ``x.view(-1)`` has ``10*s0`` elements, a ``cat`` of two has ``2*s0`` rows.
Arithmetic stays symbolic; a *decision* does not: when code asks ``if n > 3``, ``int(n)``,
``range(n)`` or ``n == 1`` (broadcasting), the answer is computed from the hints and the
fact it relied on is recorded as a **guard** (``s0 > 3``; ``s0 == 3`` when a size is made
concrete, *specialised*, with the reason and the line that asked). A compiled artifact is
reused for new sizes only while every guard holds, so relying on a size can cost a
recompile but never a silently wrong answer.

Sizes 0 and 1 are never symbols (*0/1 specialisation*, as in PyTorch): broadcasting and
empty tensors behave differently there, so every symbol is known to be at least 2 and
guards that follow from that (``s0 != 1``, ``s0 >= 1``) are dropped.

Key pieces: :class:`ShapeEnv` (``create_symbol``, ``evaluate_expr``, ``guards``,
``format_guards``, ``check_guards``), :class:`SymInt`, :class:`SymShape` (a tuple of sizes
with ``numel()``, standing in for ``torch.Size``), :func:`is_symbolic`, :func:`hint_int`.

Mirrors: torch/fx/experimental/symbolic_shapes.py (``ShapeEnv``, ``create_symbol``,
``evaluate_expr``, ``produce_guards``) and torch/__init__.py's ``SymInt``. It lives in
``fx`` because every stage below Dynamo (the op table's shape rules, AOT, Inductor) reads it.
"""

from __future__ import annotations

import math
import operator
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy
import torch
from sympy.printing.pycode import PythonCodePrinter


class _SizePrinter(PythonCodePrinter):
    """Sizes as Python over ints: ``floor(a/b)`` is ``a // b`` (no float division)."""

    def _print_floor(self, expr):
        num, den = sympy.fraction(sympy.together(expr.args[0]))
        return f"(({self._print(num)}) // ({self._print(den)}))"


def pycode(expr: Any) -> str:
    return _SizePrinter().doprint(expr)


@dataclass(frozen=True)
class Guard:
    """One fact a compiled artifact relies on: ``expr`` (a sympy relation) and why."""
    expr: Any
    reason: str

    def __str__(self) -> str:
        return f"{pycode(self.expr)}  # {self.reason}"

    @property
    def specializes(self) -> bool:
        """Does it pin a symbol to one value (``s0 == 3``, ``2*s0 + 1 == 7``)? An equation
        through a rounding (``ceil(s0 / 4) == 2``: the number of chunks of a size, which
        many sizes give) only narrows the range."""
        if not isinstance(self.expr, sympy.Eq) or not any(a.is_Number for a in self.expr.args):
            return False
        side = next(a for a in self.expr.args if not a.is_Number)
        return not side.has(sympy.floor, sympy.ceiling, sympy.Mod)


class ShapeEnv:
    """The symbols of one compilation: their hints, where they come from, and the guards.

    ``create_symbol(hint, source)`` makes ``s0``, ``s1``... (a size of 0 or 1 comes back as
    that int). ``source`` names where the size is read at run time, as ``(input index,
    dim)``; :meth:`check_guards` reads the sizes there and tests every guard.
    """

    def __init__(self):
        self.var_to_val: dict[sympy.Symbol, int] = {}
        self.var_to_source: dict[sympy.Symbol, tuple[int, int]] = {}
        self.guards: list[Guard] = []
        self._seen: set = set()
        self._check = None

    # --- symbols -----------------------------------------------------------------------
    def create_symbol(self, hint: int, source: tuple[int, int]) -> SymInt | int:
        if hint in (0, 1):
            return hint  # 0/1 specialisation
        s = sympy.Symbol(f"s{len(self.var_to_val)}", integer=True, positive=True)
        self.var_to_val[s] = hint
        self.var_to_source[s] = source
        return SymInt(s, self)

    def size_hint(self, expr: Any) -> int:
        return int(sympy.sympify(expr).xreplace(self.var_to_val))

    # --- decisions -----------------------------------------------------------------------
    def evaluate_expr(self, expr: Any, reason: str) -> Any:
        """The value of ``expr`` (a relation or a size) at the hints; unless it holds for
        every size the symbols may take (each is >= 2), record a guard that it still does."""
        expr = sympy.sympify(expr)
        value = expr.xreplace(self.var_to_val)
        if expr.is_Relational or isinstance(expr, sympy.logic.boolalg.BooleanAtom):
            result: bool | int = bool(value)
            fact = expr if result else sympy.Not(expr)
        else:
            result = int(value)
            fact = sympy.Eq(expr, result)
        if fact is not sympy.true and not self._statically_true(fact):
            self._add_guard(fact, reason)
        return result

    def _statically_true(self, fact: Any) -> bool:
        # ``a % b`` is ``a - b * (a // b)``: written so, sympy sees that CANINE's characters
        # regrouped, ``4 * (t // 4) + t % 4``, are ``t`` characters again
        fact = fact.replace(sympy.Mod, lambda a, b: a - b * sympy.floor(a / b))
        lifted = {s: sympy.Symbol(f"_{s.name}", integer=True, nonnegative=True) + 2
                  for s in fact.free_symbols}
        return fact.xreplace(lifted) is sympy.true

    def _add_guard(self, fact: Any, reason: str) -> None:
        try:
            fact = sympy.simplify(fact)
        except (ZeroDivisionError, TypeError, ValueError):
            pass  # (sympy gives up on some nested roundings: the fact as it stands is right)
        if fact in self._seen:
            return
        self._seen.add(fact)
        self.guards.append(Guard(fact, reason))
        self._check = None

    # --- guards at run time ------------------------------------------------------------
    def format_guards(self) -> str:
        """The guards, one per line, as Python over the symbols (with where each is read)."""
        where = ", ".join(f"{s} = input{i}.size({d})" for s, (i, d) in
                          self.var_to_source.items())
        lines = [f"symbols: {where or '-'}"]
        lines += [f"  {g}" for g in self.guards]
        return "\n".join(lines)

    def check_guards(self, inputs: list) -> bool:
        """Do the guards hold for these inputs' sizes?"""
        if self._check is None:
            names = [str(s) for s in self.var_to_source]
            body = " and ".join(f"({pycode(g.expr)})" for g in self.guards) or "True"
            self._check = eval(f"lambda {', '.join(names) or '*_'}: {body}",
                               {"math": math})
        return self._check(*(inputs[i].shape[d] for i, d in self.var_to_source.values()))

    def failed_guard(self, inputs: list) -> Guard | None:
        """The first guard these inputs' sizes break (for the recompile log)."""
        values = {s: inputs[i].shape[d] for s, (i, d) in self.var_to_source.items()}
        return next((g for g in self.guards if not bool(g.expr.xreplace(values))), None)


def _no_node() -> Any:
    return None


# The graph node being traced when a size was relied on, for messages. This layer knows no
# graphs being built: the ops layer above it installs the lookup (``ops/virtualized.py``).
tracing_node: Callable[[], Any] = _no_node


def _caller() -> str:
    """The first frame outside the shape machinery (the line that relied on a size), and
    the user's line of the graph node being traced, when there is one."""
    frame: types.FrameType | None = sys._getframe(2)
    here = __file__.rsplit(".", 1)[0]
    while frame is not None and (frame.f_code.co_filename.startswith(here)
                                 or "sympy" in frame.f_code.co_filename):
        frame = frame.f_back
    where = "?" if frame is None else \
        f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno} in {frame.f_code.co_name}"
    node = tracing_node()
    if node is not None:
        where += f", tracing {node.meta.get('source') or node.name}"
    return where


def _expr(x: Any) -> Any:
    return x.expr if isinstance(x, SymInt) else sympy.Integer(x) if isinstance(x, int) else x


def _wrap(expr: Any, env: ShapeEnv) -> SymInt | int:
    return int(expr) if expr.is_Integer else SymInt(expr, env)


def _floordiv(a: Any, b: Any) -> Any:
    q = sympy.cancel(a / b)
    return q if q.is_integer else sympy.floor(q)


class SymInt:
    """A size that is an expression over the shape environment's symbols.

    Arithmetic with ints and other SymInts gives SymInts; comparisons, ``bool``, ``int``
    and ``__index__`` decide on the hints and install the guard they relied on."""

    __slots__ = ("expr", "shape_env")

    def __init__(self, expr: Any, shape_env: ShapeEnv):
        self.expr = expr
        self.shape_env = shape_env

    @property
    def hint(self) -> int:
        return self.shape_env.size_hint(self.expr)

    def _binary(self, other: Any, fn, reflected: bool = False) -> Any:
        if not isinstance(other, (SymInt, int)) or isinstance(other, bool):
            if isinstance(other, float):  # float arithmetic: a number, not a size
                return fn(other, self.hint) if reflected else fn(self.hint, other)
            return NotImplemented
        a, b = (_expr(other), self.expr) if reflected else (self.expr, _expr(other))
        return _wrap(sympy.expand(fn(a, b)), self.shape_env)

    def __add__(self, o): return self._binary(o, operator.add)
    def __radd__(self, o): return self._binary(o, operator.add, True)
    def __sub__(self, o): return self._binary(o, operator.sub)
    def __rsub__(self, o): return self._binary(o, operator.sub, True)
    def __mul__(self, o): return self._binary(o, operator.mul)
    def __rmul__(self, o): return self._binary(o, operator.mul, True)
    def __floordiv__(self, o): return self._binary(o, _floordiv)
    def __rfloordiv__(self, o): return self._binary(o, _floordiv, True)
    def __mod__(self, o): return self._binary(o, sympy.Mod)
    def __rmod__(self, o): return self._binary(o, sympy.Mod, True)
    def __neg__(self): return _wrap(-self.expr, self.shape_env)
    def __pos__(self): return self

    def __truediv__(self, o):
        return self._decide(self.expr, "a size divided as a float") / o

    def __rtruediv__(self, o):
        return o / self._decide(self.expr, "a size divided as a float")

    def _compare(self, other: Any, rel) -> Any:
        if not isinstance(other, (SymInt, int)):
            if isinstance(other, float):
                return rel(self._decide(self.expr, "a size compared with a float"), other)
            return NotImplemented
        expr = rel(self.expr, _expr(other))
        return self.shape_env.evaluate_expr(expr, f"compared at {_caller()}")

    def __eq__(self, o): return self._compare(o, sympy.Eq)
    def __ne__(self, o): return self._compare(o, sympy.Ne)
    def __lt__(self, o): return self._compare(o, sympy.Lt)
    def __le__(self, o): return self._compare(o, sympy.Le)
    def __gt__(self, o): return self._compare(o, sympy.Gt)
    def __ge__(self, o): return self._compare(o, sympy.Ge)

    def __hash__(self):
        return hash(self.expr)

    def _sympy_(self):
        """In an index expression (``x0 * s1``) a size is its sympy expression: no guard."""
        return self.expr

    def _decide(self, expr: Any, what: str) -> int:
        return self.shape_env.evaluate_expr(expr, f"{what}: specialised at {_caller()}")

    def specialize(self, why: str) -> int:
        """This size as an int, guarded by ``expr == hint``; ``why`` is the reason."""
        return self.shape_env.evaluate_expr(self.expr, f"specialised: {why}")

    def __bool__(self):
        return bool(self._decide(sympy.Ne(self.expr, 0), "truth value of a size"))

    def __int__(self):
        return self._decide(self.expr, "int() of a size")

    def __index__(self):
        return self._decide(self.expr, "a size used as an index or count")

    def __float__(self):
        return float(self._decide(self.expr, "float() of a size"))

    def __repr__(self) -> str:
        return str(self.expr)


class SymShape(tuple):
    """A shape holding :class:`SymInt` sizes: a tuple with ``torch.Size``'s ``numel()``."""

    def numel(self) -> Any:
        return math.prod(self)

    def __repr__(self) -> str:
        return f"SymShape({list(self)})"


def is_symbolic(x: Any) -> bool:
    return isinstance(x, SymInt)


def hint_int(x: Any) -> int:
    """A size's value at the example inputs, deciding nothing (no guard)."""
    return x.hint if isinstance(x, SymInt) else int(x)


def as_shape(sizes: Any) -> Any:
    """``torch.Size(sizes)``, or a :class:`SymShape` when a size is symbolic."""
    sizes = tuple(sizes)
    if any(isinstance(s, SymInt) for s in sizes):
        return SymShape(sizes)
    return torch.Size(sizes)


# ---------------------------------------------------------------------------------------
# Sizes in graphs: a symbolic size used by a graph is computed by the graph
# ---------------------------------------------------------------------------------------

def sym_size(t: Any, dim: int) -> int:
    """``t.size(dim)``: how a graph reads a symbol from one of its inputs."""
    return t.size(dim)


def materialize(size: SymInt, graph: Any, sources: dict, made: dict) -> Any:
    """The node of ``graph`` computing ``size``: ``sym_size(input, dim)`` for a symbol
    (``sources`` says where each is read), ``operator`` calls for arithmetic over them.
    ``made`` caches one node per expression. Each node's ``meta["sym"]`` is the SymInt."""
    env = size.shape_env

    def build(expr: Any) -> Any:
        if expr.is_Integer:
            return int(expr)
        if expr in made:
            return made[expr]
        if expr.is_Symbol:
            if expr not in sources:
                raise NotImplementedError(f"the size {expr} is not read from any input of "
                                          "this graph")
            node = graph.call_function(sym_size, sources[expr], name=str(expr))  # s0 = ...
        elif expr.is_Add or expr.is_Mul:
            fn = operator.add if expr.is_Add else operator.mul
            terms = sorted(expr.args, key=lambda a: a.is_Number)  # constants last
            node, partial = build(terms[0]), terms[0]
            for term in terms[1:-1]:   # each partial sum/product is a size of its own too
                partial = fn(partial, term)
                node = made.get(partial) or graph.call_function(fn, (node, build(term)))
                node.meta["sym"] = SymInt(partial, env)
                made[partial] = node
            node = graph.call_function(fn, (node, build(terms[-1])))
        elif isinstance(expr, sympy.floor):
            num, den = sympy.fraction(sympy.together(expr.args[0]))
            node = graph.call_function(operator.floordiv, (build(num), build(den)))
        elif isinstance(expr, sympy.Mod):
            node = graph.call_function(operator.mod, (build(expr.args[0]), build(expr.args[1])))
        elif expr.is_Pow and expr.exp.is_Integer and expr.exp > 0:
            node = graph.call_function(operator.pow, (build(expr.base), int(expr.exp)))
        else:
            raise NotImplementedError(f"cannot compute the size {expr} in a graph")
        node.meta["sym"] = SymInt(expr, env)
        made[expr] = node
        return node

    return build(size.expr)
