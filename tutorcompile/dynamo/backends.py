"""Backends: what happens to each captured graph (the ``torch.compile`` backend contract).

A backend is any callable ``(GraphModule, example_inputs) -> callable``; the callable is
run with the graph's inputs and must return the graph's outputs (a tuple). Named ones:

* ``"eager"`` -- run the captured GraphModule as it is (generated Python calling torch);
  the way to check capture alone.
* ``"aot_eager"`` -- our AOTAutograd (stage 4) without decompositions: functionalized,
  joint and partitioned graphs whose every op is PyTorch's, forward and backward -- eager's
  results to the last bit, so a difference is a bug of capture or AOT.
* ``"aot_eager_decomp_partition"`` -- plus the decompositions to prims and the min-cut
  partitioner: the graphs inductor compiles, run as they are (float32 rounding now differs
  from eager's kernels).
* ``"inductor"`` (the default) -- our AOTAutograd and our fusion compiler (stage 5): fused
  C++/OpenMP kernels on CPU, Triton on a GPU.
* ``"torch_inductor"`` -- convert to ``torch.fx`` (:func:`tutorcompile.fx.to_torch_fx`) and
  hand the graph to PyTorch's real Inductor: our Dynamo, their compiler.

Mirrors: torch/_dynamo/backends/registry.py.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from typing import Any

from ..fx import to_torch_fx

_REGISTRY: dict[str, Callable] = {}

# Backends that live on the floors above Dynamo (AOT, inductor), named by where they are
# defined and imported at their first lookup: Dynamo imports nothing above it, and
# ``import tutorcompile.dynamo`` stays light. PyTorch's registry finds its own backends the
# same way (by module) and other packages' through entry points (see torch_backend.py).
_LAZY: dict[str, str] = {
    "aot_eager": "tutorcompile.aot:aot_eager",
    "aot_eager_decomp_partition": "tutorcompile.aot:aot_eager_decomp_partition",
    "inductor": "tutorcompile.inductor.compile_fx:inductor",
}


def register_backend(name: str):
    """Decorator: make a backend available by name."""
    def deco(fn: Callable) -> Callable:
        _REGISTRY[name] = fn
        return fn
    return deco


@register_backend("eager")
def eager(gm, example_inputs: list[Any]) -> Callable:
    return gm


@register_backend("torch_inductor")
def torch_inductor(gm, example_inputs: list[Any]) -> Callable:
    from torch._inductor.compile_fx import compile_fx  # (PyTorch's Inductor: heavy, lazy)

    return compile_fx(to_torch_fx(gm), example_inputs)  # type: ignore[return-value]


def list_backends() -> list[str]:
    """The names backends are registered under (``torch._dynamo.list_backends``'s twin)."""
    return sorted({*_REGISTRY, *_LAZY})


def lookup_backend(backend: str | Callable) -> tuple[Callable, str]:
    if callable(backend):
        return backend, getattr(backend, "__name__", "custom")
    if backend not in _REGISTRY and backend in _LAZY:
        module, attr = _LAZY[backend].split(":")
        _REGISTRY[backend] = getattr(importlib.import_module(module), attr)
    if backend not in _REGISTRY:
        raise ValueError(f"unknown backend {backend!r}; choose one of "
                         f"{', '.join(list_backends())} or pass a callable "
                         "(GraphModule, example_inputs) -> callable")
    return _REGISTRY[backend], backend


def __getattr__(name: str) -> Callable:
    """``backends.inductor`` and the other backends of ``_LAZY``, as module attributes too."""
    if name in _LAZY:
        return lookup_backend(name)[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_options(backend: str, options: dict, valid: frozenset[str]) -> None:
    """Fail at once on an option ``backend`` does not know, naming the close match.

    Mirrors: ``_TorchCompileInductorWrapper.apply_options`` in torch/__init__.py."""
    for key in options:
        if key not in valid:
            close = difflib.get_close_matches(key, valid, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown option {key!r} for backend {backend!r}{hint} "
                             f"(options: {', '.join(sorted(valid))})")
