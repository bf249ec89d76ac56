"""Higher-order ops: torch functions that take a Python function (``associative_scan``).

A graph node's arguments are tensors and constants, never a traced function, so a call that
passes ``combine_fn`` cannot be one node of traced ops. PyTorch's Dynamo traces the function
into a subgraph and records one higher-order op that owns it. This teaching Dynamo has no
subgraphs; it does one of two things:

* **Unroll**, while the length is a constant: the function is inlined once per step, on
  trackers, and the steps join the graph (the code generators then fuse them).
* **One node**, once the length is a symbol (a recompile on a new length, ``dynamic=True``,
  ``mark_dynamic``): there is no number of steps to unroll, so the graph calls
  :func:`~tutorcompile.ops.scan.sequential_scan` with the function object itself, and
  PyTorch runs the loop -- one graph for every length. Only a function that computes the
  same thing on every call may sit in a graph: a module-level one, or one made while tracing
  with no closure and no defaults (Mamba's); any other keeps the unrolled path, which
  specialises (guards) the length.

``associative_scan(combine_fn, xs, dim)`` (Mamba's selective scan, when compiling) is the
inclusive scan ``out[0] = x[0]``, ``out[i] = combine_fn(out[i-1], x[i])`` along ``dim``; with
``combine_mode="generic"`` ``combine_fn`` sees one slice at a time (it is vmapped over the
scan dimension), so each step selects a slice. Both ways take the steps in the order eager
Mamba's own loop does; PyTorch's parallel-prefix scan regroups them (equal up to rounding).

Mirrors: torch/_dynamo/variables/higher_order_ops.py (``AssociativeScanHigherOrderVariable``).
"""

from __future__ import annotations

import types

import torch
from torch._higher_order_ops.associative_scan import associative_scan

from ...ops.scan import sequential_scan
from ..exc import Unsupported
from .callables import _BUILTIN_HANDLERS
from .containers import BaseListVariable, ListVariable, TupleVariable
from .functions import NestedUserFunctionVariable, UserFunctionVariable
from .tensor import SymIntVariable, TensorVariable
from .torch import TorchFunctionVariable


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
    fn = _plain_function(combine_fn)
    if isinstance(length, SymIntVariable) and fn is not None:
        # one node for every length: PyTorch runs the scan
        kwargs = {"dim": d, "reverse": bool(const["reverse"]),
                  "combine_mode": const["combine_mode"] or "pointwise"}
        return tx.output.create_node("call_function", sequential_scan,
                                     (fn, xs if packed else leaves[0]), kwargs)
    # unrolled one step per position: a symbolic length (of a function that cannot be a
    # graph argument) is specialised -- guarded -- and the other sizes stay symbolic
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


def _plain_function(fn) -> types.FunctionType | None:
    """``combine_fn`` as a function object that computes the same thing on every call, or
    None: a torch function, a module-level function (its identity is guarded where it was
    read), or one made while tracing with no closure and no defaults -- its code is a
    constant of the traced code and its globals are read when it runs."""
    if isinstance(fn, TorchFunctionVariable):   # torch.add, torch.maximum...
        return fn.fn
    if isinstance(fn, UserFunctionVariable):
        f = fn.fn
        return f if f.__closure__ is None else None
    if isinstance(fn, NestedUserFunctionVariable) and fn.closure is None \
            and fn.defaults is None and fn.kwdefaults is None:
        f = types.FunctionType(fn.code, fn.f_globals, fn.code.co_name)
        f.__qualname__ = fn.qualname
        return f
    return None


_BUILTIN_HANDLERS[associative_scan] = _associative_scan

__all__: list[str] = []
