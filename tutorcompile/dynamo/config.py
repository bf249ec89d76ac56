"""Stage 3's switches: ``tutorcompile.dynamo.config``.

::

    from tutorcompile.dynamo import config
    config.optimize_ddp = False                  # one graph per frame, even under DDP
    with config.patch(optimize_ddp=False):       # the same, for a block
        ...

A switch is read when a frame is compiled (a graph already compiled keeps what it was
compiled with; ``tutorcompile.reset()`` forgets it). Setting one is checked at once: a name
that is not a switch (a typo names the close match) or a value of the wrong type raises
there, not later in a compile.

Mirrors: torch/_dynamo/config.py (the switches) and torch/utils/_config_module.py (the
module whose ``__setattr__`` checks them, and ``patch``).
"""

from __future__ import annotations

import contextlib
import difflib
import sys
import types
from collections.abc import Iterator
from typing import Any

# Split a graph compiled under ``DistributedDataParallel`` at its gradient buckets' boundaries,
# each piece compiled on its own, so that a bucket's all-reduce starts while earlier pieces'
# backward still runs (see tutorcompile/dynamo/distributed.py). False: one graph per frame;
# DDP all-reduces its buckets only after the whole compiled backward.
optimize_ddp: bool = True

# name -> the type its values must have, and what it does (``describe()``)
_SWITCHES: dict[str, tuple[type, str]] = {
    "optimize_ddp": (bool, "split graphs compiled under DistributedDataParallel at gradient "
                           "bucket boundaries, so all-reduce overlaps the backward"),
}


class _ConfigModule(types.ModuleType):
    """This module's class: assignments to it are checked."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_") or name not in _SWITCHES and name in self.__dict__:
            return super().__setattr__(name, value)   # (module internals, monkeypatching)
        if name not in _SWITCHES:
            close = difflib.get_close_matches(name, _SWITCHES, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise AttributeError(f"tutorcompile.dynamo.config has no switch {name!r}{hint} "
                                 f"(switches: {', '.join(sorted(_SWITCHES))})")
        kind, _ = _SWITCHES[name]
        if type(value) is not kind:
            raise TypeError(f"tutorcompile.dynamo.config.{name} must be a {kind.__name__}, "
                            f"got {value!r}")
        super().__setattr__(name, value)


def patch(**changes: Any) -> contextlib.AbstractContextManager:
    """``with config.patch(optimize_ddp=False): ...``: the switches set for the block (and
    checked now), restored after it."""
    module = sys.modules[__name__]
    saved = {name: getattr(module, name, None) for name in changes}
    for name, value in changes.items():   # check every change before making any
        _check(name, value)

    @contextlib.contextmanager
    def block() -> Iterator[None]:
        try:
            for name, value in changes.items():
                setattr(module, name, value)
            yield
        finally:
            for name, value in saved.items():
                setattr(module, name, value)
    return block()


def _check(name: str, value: Any) -> None:
    probe = _ConfigModule("probe")
    _ConfigModule.__setattr__(probe, name, value)


def describe() -> str:
    """Each switch, its value and what it does."""
    module = sys.modules[__name__]
    return "\n".join(f"{name} = {getattr(module, name)!r}: {doc}"
                     for name, (_, doc) in _SWITCHES.items())


sys.modules[__name__].__class__ = _ConfigModule
