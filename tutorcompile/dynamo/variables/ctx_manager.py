"""Context-manager trackers: grad mode (``torch.no_grad()`` ...) and autocast regions
(``torch.autocast(...)``).

Mirrors: torch/_dynamo/variables/ctx_manager.py.
"""
from __future__ import annotations

import inspect
from typing import Any

import torch

from ..exc import Unsupported
from .base import BoundMethodVariable, VariableTracker
from .containers import ConstantVariable
from .functions import NestedUserFunctionVariable, UserFunctionVariable, UserMethodVariable


class GradModeVariable(VariableTracker):
    """``torch.no_grad()`` / ``torch.enable_grad()`` / ``torch.set_grad_enabled(mode)`` used
    as a context manager (or as the decorator ``@torch.no_grad()``, which enters one):
    inside, captured ops are cut from autograd (their tensor arguments are detached in the
    graph), as eager would run them."""

    def __init__(self, cls: type, enabled: bool | None = None):
        self.cls = cls
        self.enabled = cls is torch.enable_grad if enabled is None else enabled

    def python_type(self):
        return self.cls

    def var_getattr(self, tx, name):
        if name == "__exit__":
            return RegionExitVariable(self)
        if name in ("__enter__", "clone"):
            return BoundMethodVariable(self, name)
        raise Unsupported(f"{self.cls.__name__}.{name}")

    def real_manager(self) -> Any:
        """The real context manager for this region (not entered)."""
        if self.cls is torch.inference_mode:
            return torch.inference_mode()
        return torch.enable_grad() if self.enabled else torch.no_grad()

    def call_method(self, tx, name, args, kwargs):
        if name == "__enter__":
            tx.grad_stack.append(self.enabled)
            if self.cls is torch.inference_mode:   # (torch.is_inference_mode_enabled())
                tx.inference_regions += 1
        elif name == "__exit__":
            tx.grad_stack.pop()
            if self.cls is torch.inference_mode:
                tx.inference_regions -= 1
        elif name == "clone":
            return GradModeVariable(self.cls, self.enabled)
        else:
            raise Unsupported(f"{self.cls.__name__}.{name}")
        return ConstantVariable(None)

    def call_function(self, tx, args, kwargs):
        return RegionWrappedFunctionVariable.decorate(self, args, kwargs)

    def reconstruct(self, rc):  # (made, not entered: the context manager that would be)
        return self.real_manager()

    def __repr__(self):
        return f"GradModeVariable({self.cls.__name__})"


def _autocast(tx, cls: type, args: list, kwargs: dict) -> VariableTracker:
    """``torch.autocast(...)`` (or ``torch.amp.autocast``, ``torch.cpu.amp.autocast``...)
    with constant arguments: the real object is made, so its checks and defaults are
    PyTorch's own (an unsupported dtype, or ``"cuda"`` without a GPU, turns it off with
    PyTorch's warning), and its state becomes an :class:`AutocastVariable`."""
    if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
        raise Unsupported("torch.autocast with arguments that are not constants")
    return AutocastVariable.from_object(cls(*[a.as_python_constant() for a in args],
                                            **{k: v.as_python_constant()
                                               for k, v in kwargs.items()}))


class AutocastVariable(VariableTracker):
    """A ``torch.autocast`` region inside the traced function. Entering it pushes its state
    on ``tx.autocast_stack``; every op captured inside is run on fake tensors under that
    state, and the casts autocast makes are written into the graph as ``.to(dtype)`` nodes
    (see :mod:`tutorcompile.amp`). The graph itself holds no autocast state: enter and exit
    leave no node, as the casts already say everything they did.

    (Real Dynamo's ``AutocastModeVariable`` records ``torch.amp._enter_autocast`` and
    ``_exit_autocast`` nodes instead, and AOTAutograd's ATen-level trace replays them so the
    Autocast dispatch key inserts the casts. Our AOT stage decomposes torch-level calls by
    its own table and never passes them through that key, so the casts are found here.)"""

    def __init__(self, cls: type, state: tuple):
        self.cls = cls
        self.state = state   # (device, dtype, enabled, cache_enabled)

    @classmethod
    def from_object(cls, mgr: torch.autocast) -> AutocastVariable:
        """The region a real ``torch.autocast`` object describes."""
        return cls(type(mgr), (mgr.device, mgr.fast_dtype, mgr._enabled, mgr._cache_enabled))

    def python_type(self):
        return self.cls

    def var_getattr(self, tx, name):
        if name == "__exit__":
            return RegionExitVariable(self)
        if name == "__enter__":
            return BoundMethodVariable(self, name)
        raise Unsupported(f"{self.cls.__name__}.{name}")

    def real_manager(self) -> Any:
        """The real ``torch.autocast`` for this region (not entered)."""
        device, dtype, enabled, cache_enabled = self.state
        return torch.autocast(device, dtype=dtype, enabled=enabled,
                              cache_enabled=cache_enabled)

    def call_method(self, tx, name, args, kwargs):
        if name == "__enter__":
            tx.autocast_stack.append(self.state)
            return self
        if name == "__exit__":
            tx.autocast_stack.pop()
            return ConstantVariable(None)
        raise Unsupported(f"{self.cls.__name__}.{name}")

    def call_function(self, tx, args, kwargs):
        return RegionWrappedFunctionVariable.decorate(self, args, kwargs)

    def reconstruct(self, rc):   # (a region made but not yet entered when the graph ends)
        return self.real_manager()

    def __repr__(self):
        device, dtype, enabled, _ = self.state
        return f"AutocastVariable({device!r}, {dtype}, enabled={enabled})"


class RegionWrappedFunctionVariable(VariableTracker):
    """A function decorated, inside the traced code, with a grad-mode or autocast region
    (``@torch.no_grad()`` on a helper defined in the function): what the decorator returns
    (torch's ``decorate_context``) runs the function inside the region on each call, so a
    call here enters the region, inlines the function and leaves it -- also when the
    function raises, as the with-block in that wrapper would. A generator function (whose
    wrapper re-enters the region around each step) is not modelled: a break."""

    def __init__(self, region: GradModeVariable | AutocastVariable, fn: VariableTracker):
        self.region, self.fn = region, fn

    @classmethod
    def decorate(cls, region, args: list, kwargs: dict) -> RegionWrappedFunctionVariable:
        """``region(fn)``: the decorator applied (a function written in Python only)."""
        if len(args) != 1 or kwargs:
            raise Unsupported(f"calling {region} with {len(args)} arguments")
        fn = args[0]
        code = fn.code if isinstance(fn, NestedUserFunctionVariable) else \
            fn.fn.__code__ if isinstance(fn, (UserFunctionVariable, UserMethodVariable)) \
            else None
        if code is None:
            raise Unsupported(f"{region} used as a decorator on {fn} (only functions written "
                              "in Python are traced)")
        if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE |
                            inspect.CO_ASYNC_GENERATOR):
            raise Unsupported(f"{region} used as a decorator on a generator function")
        return cls(region, fn)

    def call_function(self, tx, args, kwargs):
        self.region.call_method(tx, "__enter__", [], {})
        try:
            return tx.call(self.fn, args, kwargs)
        finally:
            self.region.call_method(tx, "__exit__", [], {})

    def var_getattr(self, tx, name):
        # ``functools.wraps`` gave the wrapper the function's name and docs
        if name == "__wrapped__":
            return self.fn
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            return tx.load_attr(self.fn, name)
        raise Unsupported(f"attribute {name!r} of a function decorated with {self.region}")

    def children(self):
        return [self.region, self.fn]

    def reconstruct(self, rc):
        return self.region.real_manager()(rc(self.fn))

    def __repr__(self):
        return f"RegionWrappedFunctionVariable({self.region}, {self.fn})"


class RegionMethodVariable(VariableTracker):
    """``type(cm).__enter__`` / ``type(cm).__exit__`` read from a grad-mode or autocast class
    and called with the region as its first argument -- how ``contextlib.ExitStack``
    enters a context manager (``_cm_type.__enter__(cm)``, keeping ``MethodType(_exit,
    cm)`` for later): the region's own ``__enter__``/``__exit__``, as the with-statement
    runs them. Called with anything else (a real manager made outside): a break."""

    def __init__(self, cls: type, name: str):
        self.cls, self.name = cls, name

    def call_function(self, tx, args, kwargs):
        region = args[0] if args else None
        if not isinstance(region, (GradModeVariable, AutocastVariable, KeptGradModeVariable)) \
                or not issubclass(
                region.python_type(), self.cls):
            raise Unsupported(f"{self.cls.__name__}.{self.name} called on {region}")
        return region.call_method(tx, self.name, list(args[1:]), kwargs)

    def bind(self, region: VariableTracker) -> VariableTracker:
        """``types.MethodType(cls.__exit__, region)``."""
        return BoundMethodVariable(region, self.name)

    def reconstruct(self, rc):
        return getattr(self.cls, self.name)

    def __repr__(self):
        return f"RegionMethodVariable({self.cls.__name__}.{self.name})"


def is_region_class(cls: Any) -> bool:
    """A class whose objects made while tracing are regions (:class:`GradModeVariable`,
    :class:`AutocastVariable`)."""
    return cls in (torch.no_grad, torch.enable_grad, torch.set_grad_enabled,
                   torch.inference_mode) or \
        isinstance(cls, type) and issubclass(cls, torch.autocast)


class KeptGradModeVariable(VariableTracker):
    """``torch.set_grad_enabled(mode)`` whose object is kept rather than entered at once
    by a with-statement (``stack.enter_context(torch.set_grad_enabled(False))``). As in
    PyTorch, making it sets the mode (:meth:`InstructionTranslator.set_grad_mode`: for the
    ops traced next, and after the graph when it outlives it), remembering the mode it
    found; ``__enter__`` sets it again; ``__exit__`` puts the remembered mode back."""

    def __init__(self, mode: bool, prev: bool):
        self.mode, self.prev = mode, prev

    def python_type(self):
        return torch.set_grad_enabled

    def var_getattr(self, tx, name):
        if name in ("__enter__", "__exit__", "clone"):
            return BoundMethodVariable(self, name)
        raise Unsupported(f"set_grad_enabled.{name}")

    def call_method(self, tx, name, args, kwargs):
        if name in ("__enter__", "__exit__"):
            tx.set_grad_mode(self.mode if name == "__enter__" else self.prev)
        elif name == "clone":
            return KeptGradModeVariable(self.mode, self.prev)
        else:
            raise Unsupported(f"set_grad_enabled.{name}")
        return ConstantVariable(None)

    def reconstruct(self, rc):
        # the object as PyTorch left it: its mode already set (after the graph, by the
        # compiled code), ``prev`` for its ``__exit__``
        made = torch.set_grad_enabled.__new__(torch.set_grad_enabled)
        made.prev, made.mode = self.prev, self.mode
        return made

    def __repr__(self):
        return f"KeptGradModeVariable({self.mode}, prev={self.prev})"


class RegionExitVariable(VariableTracker):
    """The ``__exit__`` that a with-block's BEFORE_WITH leaves on the stack for a grad-mode
    or autocast region traced here. Called, the region ends. At a graph break inside the
    block it is rebuilt as the real context manager's ``__exit__``, the manager *entered
    then*: the breaking instruction and the rest of the block run inside the region for
    real, and the frame's own exit call leaves it -- the frame resumes where Python would,
    in the block, instead of running uncompiled to its end."""

    def __init__(self, region: GradModeVariable | AutocastVariable):
        self.region = region

    def call_function(self, tx, args, kwargs):
        return self.region.call_method(tx, "__exit__", args, kwargs)

    def children(self):
        return [self.region]

    def reconstruct(self, rc):
        manager = self.region.real_manager()
        manager.__enter__()
        return manager.__exit__

    def __repr__(self):
        return f"RegionExitVariable({self.region})"


class RealRegionExitVariable(VariableTracker):
    """The ``__exit__`` of a grad-mode or autocast region entered for real (by the frame,
    before this capture began: a graph break inside the block), met on the rebuilt stack.
    Leaving it changes the global state that the graph itself runs in, so the call is a
    graph break: the real ``__exit__`` runs, and capture resumes after the block."""

    def __init__(self, exit_fn: Any, source: Any):
        self.exit_fn, self.source = exit_fn, source

    def call_function(self, tx, args, kwargs):
        raise Unsupported(f"leaving the {type(self.exit_fn.__self__).__name__} region the "
                          "frame entered before this graph (after a break inside the block)")

    def reconstruct(self, rc):
        return self.source.get(rc.env)


def is_real_region_exit(value: Any) -> bool:
    """A bound ``__exit__`` of a real torch grad-mode or autocast context manager."""
    owner = getattr(value, "__self__", None)
    return getattr(value, "__name__", None) == "__exit__" and isinstance(
        owner, (torch.no_grad, torch.enable_grad, torch.set_grad_enabled, torch.autocast))


__all__ = ['AutocastVariable', 'GradModeVariable', 'KeptGradModeVariable',
           'RealRegionExitVariable', 'RegionExitVariable', 'RegionMethodVariable',
           'RegionWrappedFunctionVariable', 'is_real_region_exit', 'is_region_class']
