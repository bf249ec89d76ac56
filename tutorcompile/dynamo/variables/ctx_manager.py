"""Context-manager trackers: grad mode (``torch.no_grad()`` ...), autocast and
``contextlib.nullcontext``.

Mirrors: torch/_dynamo/variables/ctx_manager.py.
"""
from __future__ import annotations

import inspect

import torch

from ..exc import Unsupported
from .base import BoundMethodVariable, VariableTracker
from .containers import ConstantVariable


class GradModeVariable(VariableTracker):
    """``torch.no_grad()`` / ``torch.enable_grad()`` used as a context manager (or as the
    decorator ``@torch.no_grad()``, which enters one): inside, captured ops are cut from
    autograd (their tensor arguments are detached in the graph), as eager would run them."""

    def __init__(self, cls: type):
        self.cls = cls
        self.enabled = cls is torch.enable_grad

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
            return GradModeVariable(self.cls)
        else:
            raise Unsupported(f"{self.cls.__name__}.{name}")
        return ConstantVariable(None)

    def reconstruct(self, rc):
        return self.cls()

    def __repr__(self):
        return f"GradModeVariable({self.cls.__name__})"


def _autocast(tx, args: list, kwargs: dict) -> VariableTracker:
    """``torch.autocast(device, enabled=False)`` where autocast is off already (transformers'
    rotary embeddings): nothing changes inside, guarded on autocast staying off. Turning
    mixed precision on inside a graph is not modelled: a break."""
    if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
        raise Unsupported("torch.autocast with arguments that are not constants")
    bound = inspect.signature(torch.autocast.__init__).bind(
        None, *[a.as_python_constant() for a in args],
        **{k: v.as_python_constant() for k, v in kwargs.items()})
    bound.apply_defaults()
    device, enabled = bound.arguments["device_type"], bound.arguments["enabled"]
    if enabled or not isinstance(device, str) or torch.is_autocast_enabled(device):
        raise Unsupported("torch.autocast that enables or changes mixed precision inside the "
                          "graph (not modelled)")
    tx.guards.add("AUTOCAST", f"torch.is_autocast_enabled({device!r}) == False",
                  comment="global state")
    return NullContextVariable(torch.autocast)


class NullContextVariable(VariableTracker):
    """A context manager that changes nothing the graph sees (``autocast(enabled=False)``
    with autocast already off): entering and leaving it are no-ops."""

    def __init__(self, cls: type):
        self.cls = cls

    def python_type(self):
        return self.cls

    def var_getattr(self, tx, name):
        if name in ("__enter__", "__exit__"):
            return BoundMethodVariable(self, name)
        raise Unsupported(f"{self.cls.__name__}.{name}")

    def call_method(self, tx, name, args, kwargs):
        if name == "__enter__":
            return self
        if name == "__exit__":
            return ConstantVariable(None)
        raise Unsupported(f"{self.cls.__name__}.{name}")

    def __repr__(self):
        return f"NullContextVariable({self.cls.__name__})"


__all__ = ['GradModeVariable', 'NullContextVariable']
