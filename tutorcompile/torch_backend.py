"""``torch.compile(model, backend="tutorcompile")``: real Dynamo in front of our compiler.

PyTorch finds backends by name in its registry, which it fills from the
``torch_dynamo_backends`` entry points of installed packages -- tutorcompile declares one in
``pyproject.toml``, so after ``pip install`` the name works with no import at all. For an
environment where the package is not installed (a source checkout on ``sys.path``),
:func:`register` adds it explicitly.

The backend receives a ``torch.fx.GraphModule`` from real Dynamo, converts it to our IR
(:func:`tutorcompile.fx.from_torch_fx`) and hands it to our best available backend:
``"inductor"`` (AOTAutograd + fusion + code generation) when stage 5 is installed,
else ``"aot_eager"``.

Mirrors: torch/_dynamo/backends/registry.py (``register_backend``, entry points).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .dynamo.backends import list_backends, lookup_backend
from .fx import from_torch_fx

NAME = "tutorcompile"


def best_backend() -> str:
    """The most complete pipeline this installation has."""
    return "inductor" if "inductor" in list_backends() else "aot_eager"


def tutorcompile_backend(gm: torch.fx.GraphModule, example_inputs: list[Any],
                         **kwargs: Any) -> Callable:
    """A torch.compile backend: torch.fx graph in, our compiled callable out."""
    backend, _ = lookup_backend(best_backend())
    return backend(from_torch_fx(gm, provenance="torch._dynamo"), example_inputs)


def register() -> str:
    """Make ``torch.compile(..., backend="tutorcompile")`` work in this process."""
    from torch._dynamo.backends.registry import _BACKENDS, register_backend
    if NAME not in _BACKENDS:
        register_backend(name=NAME)(tutorcompile_backend)
    return NAME
