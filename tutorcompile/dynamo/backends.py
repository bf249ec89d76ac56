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
import inspect
from collections.abc import Callable
from typing import Any

from .._logging import log_artifact

_REGISTRY: dict[str, Callable] = {}


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
    from torch._inductor.compile_fx import compile_fx

    from ..fx import to_torch_fx
    fx_gm = to_torch_fx(gm)
    return compile_fx(fx_gm, example_inputs)


def list_backends() -> list[str]:
    """The names backends are registered under (``torch._dynamo.list_backends``'s twin)."""
    return sorted(_REGISTRY)


def lookup_backend(backend: str | Callable) -> tuple[Callable, str]:
    if callable(backend):
        return backend, getattr(backend, "__name__", "custom")
    if backend not in _REGISTRY:
        raise ValueError(f"unknown backend {backend!r}; choose one of "
                         f"{', '.join(sorted(_REGISTRY))} or pass a callable "
                         "(GraphModule, example_inputs) -> callable")
    return _REGISTRY[backend], backend


@register_backend("aot_eager")
def aot_eager(gm, example_inputs: list[Any]) -> Callable:
    """Our AOTAutograd (stage 4), every op left to PyTorch: eager's numbers exactly."""
    from ..aot import aot_eager as _aot_eager
    return _aot_eager(gm, example_inputs)


@register_backend("aot_eager_decomp_partition")
def aot_eager_decomp_partition(gm, example_inputs: list[Any]) -> Callable:
    """Our AOTAutograd with decompositions to prims and the min-cut partitioner."""
    from ..aot import aot_eager_decomp_partition as _decomposed
    return _decomposed(gm, example_inputs)


@register_backend("inductor")
def inductor(gm, example_inputs: list[Any], mode: str = "default",
             options: dict | None = None) -> Callable:
    """Our AOTAutograd (stage 4) and fusion compiler (stage 5): fused C++/Triton kernels.

    ``mode="max-autotune"`` tries several kernel configurations; ``"reduce-overhead"``
    records the compiled forward and backward graphs as CUDA Graphs. ``options`` go to
    ``tutorcompile.inductor.compile_fx`` (``backend="cpp"|"triton"``, ``fusion=False``, ...).
    """
    import torch

    from ..inductor import inductor_backend
    devices = {t.device.type for t in example_inputs if isinstance(t, torch.Tensor)}
    if devices - {"cpu", "cuda"}:
        # meta, mps, ...: no kernel generator of ours targets them; PyTorch runs the graph
        log_artifact("fusion", f"tensors on {', '.join(sorted(devices))}: the C++ and Triton "
                     "code generators target cpu and cuda, so this graph runs in PyTorch",
                     "inductor: graph not compiled")
        return gm
    opts = dict(options or {})
    check_options("inductor", opts, inductor_options())
    if mode == "max-autotune":
        opts.setdefault("mode", "max-autotune")
    if mode == "reduce-overhead":
        opts["cudagraphs"] = True
    return inductor_backend(gm, example_inputs, **opts)


def inductor_options() -> frozenset[str]:
    """What ``options=`` may hold for ``"inductor"``: :func:`~tutorcompile.inductor.compile_fx`
    's keyword arguments (read from its signature, so the two never drift apart), and
    ``cudagraphs``."""
    from ..inductor.compile_fx import compile_fx
    names = [p.name for p in inspect.signature(compile_fx).parameters.values()
             if p.default is not inspect.Parameter.empty]
    return frozenset(names) | {"cudagraphs"}


inductor.valid_options = inductor_options


def check_options(backend: str, options: dict, valid: frozenset[str]) -> None:
    """Fail at once on an option ``backend`` does not know, naming the close match.

    Mirrors: ``_TorchCompileInductorWrapper.apply_options`` in torch/__init__.py."""
    for key in options:
        if key not in valid:
            close = difflib.get_close_matches(key, valid, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown option {key!r} for backend {backend!r}{hint} "
                             f"(options: {', '.join(sorted(valid))})")
