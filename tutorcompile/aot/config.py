"""Stage 4's knobs: ``tutorcompile.aot.config``, the limits past which a decomposition
declines and the op stays a PyTorch call.

::

    from tutorcompile.aot import config
    with config.patch(sort_length_limit=4096):   # decompose longer sorts, for one block
        ...
    print(config.describe())                     # every knob, its value and why

Each limit guards a decomposition whose work grows faster than the op's own: a dense
comparison of every target with every source is deterministic and fuses (no atomics, no
scatter kernel), but it pays only while it is small. Knobs are read while a graph is
traced; what is already compiled keeps what it was compiled with. Setting one is checked at
once (``tutorcompile/_config.py``).
"""

from __future__ import annotations

import contextlib
from typing import Any

from .. import _config

dense_scatter_limit: int = 1 << 22
"""The most elements a dense comparison (every target against every source) may have: a
scatter, ``index_put`` with accumulation, max unpooling or an embedding bag written as one
reduction over all pairs."""

sort_length_limit: int = 1024
"""The longest dimension a counting sort handles (it compares every pair: n * n work)."""

list_index_limit: int = 64
"""The longest Python list used as an index (it becomes a tensor of ``full`` constants)."""

adaptive_indices_limit: int = 1 << 20
"""The most (output positions) x (input positions) per plane for adaptive max pooling with
indices, which compares every output's window mask with every input position."""


def patch(**changes: Any) -> contextlib.AbstractContextManager:
    """``with config.patch(sort_length_limit=4096): ...``: knobs set for a block."""
    return _config.patch(__name__, **changes)


def describe() -> str:
    """Each knob, its value and why it has it."""
    return _config.describe(__name__)


_config.install(__name__)
