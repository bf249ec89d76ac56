"""``mark_dynamic(t, dim)`` / ``mark_static(t, dim)``: say up front which sizes may change.

Automatic dynamic shapes (see ``eval_frame.py``) compile the first call for its exact sizes
and make a dimension symbolic only after it changed once. A caller who knows better says so
on the tensor: a dimension marked dynamic is symbolic from the first compile (a size of 0 or
1 at that call is still specialised, as everywhere), a dimension marked static never becomes
symbolic, not even with ``dynamic=True``. The marks are the attributes PyTorch's own
``torch._dynamo.mark_dynamic`` / ``mark_static`` set, so a tensor marked either way means
the same to both compilers.

``assume_constant_result(fn)`` says ``fn``'s answer never changes (an installed-package probe):
capture calls it, for real, and puts the result into the graph as a constant, unguarded.

Mirrors: torch/_dynamo/decorators.py (``mark_dynamic``, ``mark_static``,
``assume_constant_result``).
"""

from __future__ import annotations

import torch


def _mark(t: torch.Tensor, dim: int | list[int] | tuple[int, ...], attr: str) -> None:
    dims = [dim] if isinstance(dim, int) else list(dim)
    marked = getattr(t, attr, None) or set()
    marked.update(d % t.dim() for d in dims)
    setattr(t, attr, marked)


def mark_dynamic(t: torch.Tensor, dim: int | list[int] | tuple[int, ...]) -> None:
    """Compile for any size of ``t``'s dimension(s) ``dim`` from the first call."""
    _mark(t, dim, "_dynamo_dynamic_indices")


def mark_static(t: torch.Tensor, dim: int | list[int] | tuple[int, ...]) -> None:
    """Never make ``t``'s dimension(s) ``dim`` symbolic: a new size compiles again."""
    _mark(t, dim, "_dynamo_static_indices")


def marked_dims(t: torch.Tensor) -> tuple[set[int], set[int]]:
    """The dimensions marked dynamic and those marked static."""
    return (set(getattr(t, "_dynamo_dynamic_indices", ()) or ()),
            set(getattr(t, "_dynamo_static_indices", ()) or ()))


def assume_constant_result(fn):
    """Mark ``fn``: capture calls it and uses its result as a constant, without a guard (the
    attribute is PyTorch's, so a function marked for either compiler is marked for both)."""
    fn._dynamo_marked_constant = True
    return fn
