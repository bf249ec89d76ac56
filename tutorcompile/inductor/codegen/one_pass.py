"""One-pass statistics in looped Triton reductions: online softmax and Welford.

A reduction kernel whose rows are too long for one block (a *looped* reduction, see
``codegen/triton.py``) reads its row from memory once per phase. Written the way the
program says it, a softmax reads each row three times and a layer norm four::

    softmax:    m = max(x)            pass 1        layer norm:  s = sum(x)              pass 1
                s = sum(exp(x - m))   pass 2                     q = sum((x - s/n)**2)    pass 2
                exp(x - m) / s        pass 3                     (x - s/n) * rsqrt(...)   pass 3

(the lowering builds ``mean`` and ``var`` from sums, and ``layernorm`` sums ``x`` twice: once
for its mean and once inside ``var``). A reduction kernel is limited by memory, so passes
are time. Two rewrites fold the statistics into one pass each, and leave the output pass:

* **Online softmax** (Milakov & Gimelshein, "Online normalizer calculation for softmax",
  2018). Keep a running max ``m`` and a running sum ``s`` of ``exp(x - m)``; when a larger
  value raises the max to ``m'``, the terms summed so far were shifted by the old max and
  are rescaled: ``s' = s * exp(m - m') + exp(x - m')``. Each of the ``RBLOCK`` lanes keeps its
  own ``(m, s)``; at the end the lanes are merged with the row's max ``M``:
  ``sum(s_lane * exp(m_lane - M))``. Found in a kernel as a max reduction followed by a sum
  of ``exp(x - max)`` over the same ``x``.
* **Welford** (B. P. Welford, 1962; the pairwise merge from Chan, Golub and LeVeque, 1979).
  The naive one-pass variance ``sum(x*x) - sum(x)**2 / n`` subtracts two huge, nearly equal
  numbers: rows of ``1e4 + noise`` lose every digit of the noise in float32. Welford keeps a
  running mean and ``M2``, the sum of squared deviations *from the running mean*, which stay
  small: ``delta = x - mean; mean += delta / n; M2 += delta * (x - mean)``. Each lane keeps
  ``(count, mean, M2)``; the lanes merge exactly with the row's mean ``mu``:
  ``M2 = sum(M2_lane + count_lane * (mean_lane - mu)**2)``. The values are shifted by the
  row's first one before all this, so the lanes' means are small numbers: a lane mean of
  ``1e4 + noise`` held in float32 is off by ~5e-4, and the merge would carry that into the
  variance (measured: 800x the two-pass error; shifted, the same). Found in a kernel as a sum of
  ``x`` followed by a sum of ``(x - c)**2`` where ``c`` is computed from that sum (the
  program's mean, whatever rounding it applied): ``sum((x - c)**2) = M2 + n * (mu - c)**2``
  holds for any ``c``, so the kernel returns exactly what the program asked for. The plain
  sum of ``x`` is kept beside it, so the sum itself is bit-for-bit what it was.

And one more pass is free: a reduction identical to one the kernel already computed (same
kind, same expression) reuses its value -- the ``sum(x)`` that ``var`` repeats.

A persistent reduction (the row held in registers) reads memory once whatever it computes,
so these rewrites apply to looped reductions only. Patterns are recognised on an expression
tree of each reduction's inner function (:class:`ExpressionProbe`, an ops handler that
records instead of printing); anything it cannot follow is left as the program wrote it.

Mirrors: torch/_inductor/codegen/triton.py (``welford_reduce`` in ``TritonKernel.reduction``)
and torch/_inductor/runtime/triton_helpers.py (``welford_reduce``, ``welford_combine``,
``online_softmax_combine``); Inductor finds softmax in a graph pass
(``prepare_softmax_online``) where this finds it in the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...ops import PRIMS, OpsHandler, set_handler
from .. import ir
from .common import KernelPlan


class _NotFollowed(Exception):
    """The probe met something it does not model: no one-pass rewrite for this kernel."""


class ExpressionProbe(OpsHandler):
    """Runs an inner function and returns its value as a tree of tuples, equal when the
    computations are the same.

    ``("call", prim_name, args, kwargs)``, ``("load", buffer_name, offset)``,
    ``("constant", value, dtype)``, ``("number", type, value)`` (a Python number argument:
    ``True`` and ``1`` differ), ``("index", expr, dtype)``, and ``("reduction", name)`` for a
    reduction of the same kernel (named by its first identical copy, ``same``). Pointwise
    buffers of the kernel are inlined, as the kernel writer inlines them."""

    def __init__(self, plan: KernelPlan, same: dict[str, str]):
        self.plan = plan
        self.same = same

    def call(self, prim, args, kwargs):
        args = tuple(a if isinstance(a, tuple) else ("number", type(a), a) for a in args)
        return ("call", prim.name, args, tuple(sorted(kwargs.items())))

    def load(self, buffer, index):
        if buffer.name in self.plan.names:
            if buffer.is_reduction:
                return ("reduction", self.same.get(buffer.name, buffer.name))
            return buffer.data.inner_fn(index)
        return ("load", buffer.name, str(ir.simplify_index(buffer.layout.offset_of(index))))

    def constant(self, value, dtype):
        return ("constant", value, dtype)

    def index_expr(self, expr, dtype):
        return ("index", str(ir.simplify_index(expr)), dtype)

    def indirect_indexing(self, value, size):
        raise _NotFollowed("indirect indexing")


@dataclass
class OnePassPlan:
    """What a looped kernel computes together: ``pairs`` maps the first reduction of a pair
    to ``(kind, second)`` (kind ``"online_softmax"`` or ``"welford"``); ``same`` maps a
    reduction to an identical one computed before it; ``centre`` holds, for a Welford pair's
    second reduction, the tree of the ``c`` in its ``sum((x - c)**2)``."""
    pairs: dict[str, tuple[str, str]] = field(default_factory=dict)
    same: dict[str, str] = field(default_factory=dict)
    centre: dict[str, Any] = field(default_factory=dict)


def _leaves(tree: Any):
    if isinstance(tree, tuple) and tree and tree[0] == "call":
        for arg in tree[2]:
            yield from _leaves(arg)
    else:
        yield tree


def find_one_pass(plan: KernelPlan, index: list) -> OnePassPlan:
    """Find the reductions of ``plan`` that can share a pass (see the module docstring);
    ``index`` is the full loop index the kernel evaluates inner functions at."""
    found = OnePassPlan()
    reductions = [n for n in plan.nodes if n.is_reduction]
    trees: dict[str, Any] = {}
    try:
        for node in reductions:
            with set_handler(ExpressionProbe(plan, found.same)):
                tree = node.data.inner_fn(index)
            key = (node.reduction.reduction_type, node.data.dtype, tree)
            earlier = next((n for n, k in trees.items() if k == key), None)
            if earlier is not None:
                found.same[node.name] = earlier
            else:
                trees[node.name] = key
    except _NotFollowed:
        return OnePassPlan()
    paired: set[str] = set()
    distinct = [n for n in reductions if n.name in trees]
    for i, first in enumerate(distinct):
        kind, dtype, x = trees[first.name]
        if first.name in paired or not dtype.is_floating_point:
            continue
        me = ("reduction", first.name)
        for second in distinct[i + 1:]:
            kind2, dtype2, tree = trees[second.name]
            if second.name in paired or kind2 != "sum" or dtype2 != dtype:
                continue
            if kind == "max" and tree == ("call", "exp", (("call", "sub", (x, me), ()),), ()):
                found.pairs[first.name] = ("online_softmax", second.name)
            elif kind == "sum" and (centre := _centre_of_squares(tree, x, me)) is not None:
                found.pairs[first.name] = ("welford", second.name)
                found.centre[second.name] = centre
            else:
                continue
            paired |= {first.name, second.name}
            break
    return found


def _centre_of_squares(tree: Any, x: Any, reduction: tuple) -> Any:
    """``c`` when ``tree`` is ``(x - c) * (x - c)`` with ``c`` computed from ``reduction``
    and constants only (one value per row), else None."""
    if not (isinstance(tree, tuple) and tree[:2] == ("call", "mul") and not tree[3]):
        return None
    a, b = tree[2]
    if a != b or not (isinstance(a, tuple) and a[:2] == ("call", "sub") and not a[3]):
        return None
    value, centre = a[2]
    if value != x:
        return None
    leaves = list(_leaves(centre))
    if reduction not in leaves or any(leaf[0] not in ("reduction", "constant", "number")
                                      for leaf in leaves):
        return None
    return centre


def replay(tree: Any, values: dict[str, Any]) -> Any:
    """Compute a recorded tree (calls, numbers, reductions) under the current handler,
    a reduction's value taken from ``values``."""
    if tree[0] == "number":
        return tree[2]
    if tree[0] == "reduction":
        return values[tree[1]]
    if tree[0] == "constant":
        return ir.constant(tree[1], tree[2])
    _, name, args, kwargs = tree
    return PRIMS[name](*(replay(a, values) for a in args), **dict(kwargs))


__all__ = ["ExpressionProbe", "OnePassPlan", "find_one_pass", "replay"]
