"""An inclusive scan over a length known only when it runs: ``sequential_scan``.

``associative_scan(combine_fn, xs, dim)`` (Mamba's selective scan, when compiling) is
``out[0] = x[0]``, ``out[i] = combine_fn(out[i-1], x[i])`` along ``dim``. Capture unrolls it
one ``combine_fn`` per position while the length is a constant; once the length is a
symbol (a recompile on a new length) there is no number of steps to unroll, and the scan
becomes one graph node calling :func:`sequential_scan` with the user's ``combine_fn``:
the graph stays right for every length. This function is what the node runs in PyTorch
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

Mirrors: torch/_higher_order_ops/associative_scan.py (``associative_scan``,
``generic_associative_scan``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor


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


__all__ = ["sequential_scan"]
