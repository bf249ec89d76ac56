"""Stage 3's knobs: ``tutorcompile.dynamo.config``.

::

    from tutorcompile.dynamo import config
    config.optimize_ddp = False                  # one graph per frame, even under DDP
    with config.patch(recompile_limit=64):       # a knob set for a block
        ...
    print(config.describe())                     # every knob, its value and why

A knob is read when a frame is compiled (a graph already compiled keeps what it was
compiled with; ``tutorcompile.reset()`` forgets it). Setting one is checked at once: a name
that is not a knob (a typo names the close match) or a value of the wrong type raises
there, not later in a compile (``tutorcompile/_config.py``).

Mirrors: torch/_dynamo/config.py (``optimize_ddp``, ``recompile_limit``).
"""

from __future__ import annotations

import contextlib
from typing import Any

from .. import _config

optimize_ddp: bool = True
"""Split a graph compiled under ``DistributedDataParallel`` at its gradient buckets'
boundaries, each piece compiled on its own, so that a bucket's all-reduce starts while earlier
pieces' backward still runs (``dynamo/distributed.py``). False: one graph per frame; DDP
all-reduces its buckets only after the whole compiled backward."""

recompile_limit: int = 8
"""Compiled entries one code object may hold (one per guard failure that recompiled it). A
function that keeps failing its guards -- a Python number that changes every call, a new
shape each time -- would otherwise compile forever; past the limit it runs uncompiled and
a ``RecompileLimitWarning`` says so."""

max_inline_depth: int = 48
"""Nested calls the capture inlines (user functions calling user functions). Deeper than
this is a graph break that says so: recursion whose end the capture cannot see (it stops
on a tensor's value) would otherwise inline until Python's own stack overflows."""


def patch(**changes: Any) -> contextlib.AbstractContextManager:
    """``with config.patch(optimize_ddp=False): ...``: knobs set for a block."""
    return _config.patch(__name__, **changes)


def describe() -> str:
    """Each knob, its value and what it does."""
    return _config.describe(__name__)


_config.install(__name__)
