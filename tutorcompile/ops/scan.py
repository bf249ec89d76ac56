"""An inclusive scan over a length known only when it runs: ``sequential_scan``.

``associative_scan(combine_fn, xs, dim)`` (Mamba's selective scan, when compiling) is
``out[0] = x[0]``, ``out[i] = combine_fn(out[i-1], x[i])`` along ``dim``. Capture unrolls it
one ``combine_fn`` per position while the length is a constant; once the length is a
symbol (a recompile on a new length) there is no number of steps to unroll, and the scan
becomes one graph node calling :func:`sequential_scan` with ``combine_fn`` speculated into a
body (:class:`CombineBody`, called as the function is): the graph stays right for every
length. This function is what the node runs in PyTorch
(eager and the aot backends; stage 5 writes a kernel instead when ``combine_fn`` is
pointwise, ``inductor/codegen/scan.py``); as an extern op its gradient is PyTorch's,
through the same loop.

The steps go in eager Mamba's order, one position after another, so the values round as
its own loop does. PyTorch's ``associative_scan`` regroups them into a parallel prefix
(equal up to rounding), which on a CPU ran several times slower than this loop on Mamba's
scan (benchmarks/MEASUREMENTS.md).

Under fake or meta tensors (capture, and the shape inference of an extern) there is no
loop to run: the result has the inputs' shapes, in the dtypes one ``combine_fn`` step
makes -- so a symbolic length stays a symbol instead of being unrolled.

Code generation never traces Python: stage 4, when it decomposes the graph
(``aot/prim_graph.py``), decomposes the body's graph into prims over one-element tensors of
the leaves' dtypes (a plain Python ``combine_fn``, as ``aot_function``'s users hand it, is
traced there by running it) and puts a :class:`CombineFn` in the node in its place -- the
function (what the loop calls) with that graph of prims, or the reason there is none. Stage 5
only spells the graph it is given.

Mirrors: torch/_higher_order_ops/associative_scan.py (``associative_scan``,
``generic_associative_scan``; its ``combine_fn`` reaches the graph as a traced
``GraphModule``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor

from ..fx import Graph


class CombineBody:
    """``combine_fn`` as capture speculated it: a body of its own (a
    :class:`~tutorcompile.fx.GraphModule` over the left leaves, then the right ones, each a
    slice of the scan), called as ``combine_fn`` is -- ``combine(left, right)``, a tuple of
    leaves or one tensor each -- so :func:`sequential_scan` runs it eagerly. Stage 4
    decomposes its graph into prims without running Python."""

    def __init__(self, body: Callable, name: str):
        self.body = body
        self.__name__ = self.__qualname__ = name

    def __call__(self, left: Any, right: Any) -> Any:
        def leaves(x: Any) -> list:
            return list(x) if isinstance(x, (tuple, list)) else [x]
        return self.body(*leaves(left), *leaves(right))

    def __repr__(self) -> str:
        return f"<combine_fn {self.__name__}, captured as a body>"


class CombineFn:
    """A scan's ``combine_fn`` as stage 4 leaves it in the graph: called, it is the function
    itself (so :func:`sequential_scan` and PyTorch's gradient of it run as before); ``prims``
    is its graph of prims over one-element tensors of ``dtypes`` (inputs: the left leaves,
    then the right ones; outputs: one per leaf), or why it has none (a call that stayed a
    PyTorch call, Python that could not be traced). Equal for one function and dtypes."""

    def __init__(self, fn: Callable, dtypes: tuple[torch.dtype, ...], prims: Graph | str):
        self.fn, self.dtypes, self.prims = fn, tuple(dtypes), prims
        self.__name__ = getattr(fn, "__name__", "combine_fn")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)

    def __call__(self, left: Any, right: Any) -> Any:
        return self.fn(left, right)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CombineFn) and (other.fn, other.dtypes) == \
            (self.fn, self.dtypes)

    def __hash__(self) -> int:
        return hash((self.fn, self.dtypes))

    def __repr__(self) -> str:
        what = f"{len(self.prims.nodes)} nodes of prims" if isinstance(self.prims, Graph) \
            else f"no prims: {self.prims}"
        return f"<combine_fn {self.__qualname__} ({what})>"


def sequential_scan(combine_fn: Callable, xs: Any, dim: int, reverse: bool = False,
                    combine_mode: str = "generic") -> Any:
    """The inclusive scan of ``xs`` (a tensor, or a tuple/list of tensors of one shape)
    along ``dim`` with ``combine_fn(accumulated, current)``, first position to last (last to
    first with ``reverse``); the result has ``xs``'s structure. ``combine_mode`` is
    ``associative_scan``'s: either way ``combine_fn`` sees one slice per step."""
    packed = isinstance(xs, (tuple, list))
    leaves = list(xs) if packed else [xs]

    def pack(items: list) -> Any:
        return type(xs)(items) if packed else items[0]

    def unpack(value: Any) -> list:
        return list(value) if packed else [value]
    if any(isinstance(x, FakeTensor) or x.is_meta for x in leaves):
        # (slices of one shape: shape inference may try leaves of unequal sizes, see
        # aot/decomp/registry.py, _symbolic_extern_result)
        like = leaves[0].select(dim, 0)
        first = pack([like.new_empty(like.shape, dtype=x.dtype) for x in leaves])
        dtypes = [r.dtype for r in unpack(combine_fn(first, first))]
        return pack([x.new_empty(x.shape, dtype=d) for x, d in zip(leaves, dtypes)])
    n = leaves[0].shape[dim]
    if n == 0:
        return pack([x.clone() for x in leaves])
    # one contiguous slice per step: the scan dimension first (elementwise ops on strided
    # slices cost about a fifth more)
    slices = [x.movedim(dim, 0).contiguous().unbind(0) for x in leaves]
    steps = range(n - 1, -1, -1) if reverse else range(n)
    outs: list[list[torch.Tensor]] = [[] for _ in leaves]
    acc = None
    for i in steps:
        current = pack([s[i] for s in slices])
        acc = current if acc is None else combine_fn(acc, current)
        for out, value in zip(outs, unpack(acc)):
            out.append(value)
    if reverse:
        outs = [out[::-1] for out in outs]
    return pack([torch.stack(out, dim) for out in outs])


__all__ = ["CombineBody", "CombineFn", "sequential_scan"]
