"""Higher-order ops: torch functions that take a Python function (``associative_scan``).

A graph node's arguments are tensors and constants, never a function, so a call that passes
``combine_fn`` cannot be one node. PyTorch's Dynamo traces the function into a subgraph and
records one higher-order op that owns it. This teaching Dynamo has no subgraphs; it
*unrolls*: the function is inlined once per step, on trackers, and the steps join the graph.

``associative_scan(combine_fn, xs, dim)`` (Mamba's selective scan, when compiling) is the
inclusive scan ``out[0] = x[0]``, ``out[i] = combine_fn(out[i-1], x[i])`` along ``dim``; with
``combine_mode="generic"`` ``combine_fn`` sees one slice at a time (it is vmapped over the
scan dimension), so each step selects a slice. The graph holds one ``combine_fn`` per
position, so a symbolic length is specialised (guarded: a graph per length, as Mamba's is
under torch.compile too) while the other sizes stay symbolic. Sequential
steps do the arithmetic in the order eager Mamba's own loop does; PyTorch's parallel-prefix
scan regroups it (equal up to rounding).

Mirrors: torch/_dynamo/variables/higher_order_ops.py (``AssociativeScanHigherOrderVariable``).
"""

from __future__ import annotations

import torch
from torch._higher_order_ops.associative_scan import associative_scan

from ..exc import Unsupported
from .callables import _BUILTIN_HANDLERS
from .containers import BaseListVariable, ListVariable, TupleVariable
from .tensor import SymIntVariable, TensorVariable


def _associative_scan(tx, combine_fn, xs, dim, reverse=None, combine_mode=None):
    const = {k: v.as_python_constant() if v is not None else None for k, v in
             (("dim", dim), ("reverse", reverse), ("combine_mode", combine_mode))}
    if const["combine_mode"] not in (None, "generic", "pointwise"):
        raise Unsupported(f"associative_scan(combine_mode={const['combine_mode']!r})")
    packed = isinstance(xs, BaseListVariable)
    leaves = list(xs.items) if packed else [xs]
    if not leaves or not all(isinstance(t, TensorVariable) for t in leaves):
        raise Unsupported("associative_scan over something other than tensors")
    d = const["dim"] % leaves[0].fake.dim()
    length = leaves[0].size_var(tx, d)
    # unrolled one step per position: a symbolic length is specialised (guarded), the
    # other sizes stay symbolic
    n = length.specialize(tx) if isinstance(length, SymIntVariable) else \
        length.as_python_constant()
    if n == 0:
        raise Unsupported("associative_scan over an empty dimension")
    steps = range(n - 1, -1, -1) if const["reverse"] else range(n)

    def pack(items):
        return TupleVariable(items) if packed else items[0]

    def select(i):
        return [tx.output.create_node("call_function", torch.select, (t, d, i), {})
                for t in leaves]
    outs, acc = {}, None
    for i in steps:
        cur = select(i)
        if acc is not None:
            res = tx.call(combine_fn, [pack(acc), pack(cur)], {})
            cur = tx.unpack(res) if packed else [res]
            if len(cur) != len(leaves):
                raise Unsupported("associative_scan's combine_fn changed the number of leaves")
        outs[i] = acc = cur
    stacked = [tx.output.create_node("call_function", torch.stack,
                                     (ListVariable([outs[i][k] for i in range(n)]), d), {})
               for k in range(len(leaves))]
    return pack(stacked)


_BUILTIN_HANDLERS[associative_scan] = _associative_scan

__all__: list[str] = []
