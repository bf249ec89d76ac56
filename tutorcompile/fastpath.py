"""The fast path: how a compiled callable offers a cheaper entry to a caller that has already
checked its inputs.

A compiled graph checks its inputs on every call (AOT's per-call key of shapes, strides and
grad mode; inductor's layout variants) -- unless its caller already pinned all of that.
Dynamo's cache entry has: its guards hold the same facts. So the compilers' results derive
from :class:`FastPath`, and the caller asks once, when it stores the result, for the entry
that skips the checks its own guards make:

* ``direct()`` -- for inputs exactly like the example inputs compiled for (shapes, strides,
  dtypes, devices, ``requires_grad``) in the grad mode they were compiled in;
* ``direct_dynamic()`` -- for inputs like those except in sizes the caller left free (each
  at least 2, contiguous as in the example): right only where a compilation for symbolic
  sizes covers them.

Each returns the object itself when it has nothing cheaper (several compilations to choose
among, inputs to copy back...). A chain of stages passes the question down: Dynamo's entry
asks the backend's result, which asks AOT, whose forward asks inductor's wrapper.

Mirrors: the trust between PyTorch's stages -- AOTAutograd's runtime wrappers do not
re-check what Dynamo's guards checked (``torch/_functorch/_aot_autograd/runtime_wrappers.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class FastPath:
    """Base of compiled callables with a cheaper entry for callers that checked the inputs
    (see the module docstring). The defaults have none."""

    def direct(self) -> Callable:
        """What to call for inputs exactly like the example inputs (the caller checked)."""
        return self  # type: ignore[return-value]   # (subclasses are callable)

    def direct_dynamic(self) -> Callable:
        """What to call for inputs like the example inputs but in the sizes left free."""
        return self  # type: ignore[return-value]


def fast_path(compiled: Any, dynamic: bool = False) -> Callable:
    """``compiled``'s cheaper entry for a caller that checked its inputs (``dynamic``: all
    but some sizes), or ``compiled`` itself when it offers none."""
    if not isinstance(compiled, FastPath):
        return compiled
    return compiled.direct_dynamic() if dynamic else compiled.direct()
