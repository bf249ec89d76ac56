"""Context-manager trackers: grad mode (``torch.no_grad()`` ...) and autocast regions
(``torch.autocast(...)``).

Mirrors: torch/_dynamo/variables/ctx_manager.py.
"""
from __future__ import annotations

import torch

from ..exc import Unsupported
from .base import BoundMethodVariable, VariableTracker
from .containers import ConstantVariable


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
        if name in ("__enter__", "__exit__", "clone"):
            return BoundMethodVariable(self, name)
        raise Unsupported(f"{self.cls.__name__}.{name}")

    def call_method(self, tx, name, args, kwargs):
        if name == "__enter__":
            tx.grad_stack.append(self.enabled)
        elif name == "__exit__":
            tx.grad_stack.pop()
        elif name == "clone":
            return GradModeVariable(self.cls, self.enabled)
        else:
            raise Unsupported(f"{self.cls.__name__}.{name}")
        return ConstantVariable(None)

    def reconstruct(self, rc):  # (made, not entered: the context manager that would be)
        return torch.enable_grad() if self.enabled else torch.no_grad()

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
        if name in ("__enter__", "__exit__"):
            return BoundMethodVariable(self, name)
        raise Unsupported(f"{self.cls.__name__}.{name}")

    def call_method(self, tx, name, args, kwargs):
        if name == "__enter__":
            tx.autocast_stack.append(self.state)
            return self
        if name == "__exit__":
            tx.autocast_stack.pop()
            return ConstantVariable(None)
        raise Unsupported(f"{self.cls.__name__}.{name}")

    def reconstruct(self, rc):   # (a region made but not yet entered when the graph ends)
        device, dtype, enabled, cache_enabled = self.state
        return torch.autocast(device, dtype=dtype, enabled=enabled,
                              cache_enabled=cache_enabled)

    def __repr__(self):
        device, dtype, enabled, _ = self.state
        return f"AutocastVariable({device!r}, {dtype}, enabled={enabled})"


__all__ = ['AutocastVariable', 'GradModeVariable']
