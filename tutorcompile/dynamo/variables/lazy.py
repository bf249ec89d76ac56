"""Lazy variables: a frame's value made a tracker only when the traced code first reads it.

Capture starts with every local of the frame (a cell aside) as a :class:`LazyVariable`: the
real value and its source, nothing more. Only when the traced code reads the local
(``LOAD_FAST``, through ``InstructionTranslator.read_local``) does :func:`realize` hand it
to the builder (``builder.py``), which makes the tracker and installs its guards. A local
the code never reads is never guarded, so a new value for it does not cause a recompile.
The one value a resumed frame's stack holds that the next instruction discards stays lazy
for the same reason.

Mirrors: torch/_dynamo/variables/lazy.py (``LazyVariableTracker`` and its ``realize``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..exc import TracedException
from ..source import Source
from .base import VariableTracker
from .containers import ConstantVariable

if TYPE_CHECKING:
    from ..symbolic_convert import InstructionTranslator


class LazyVariable(VariableTracker):
    """A frame value not looked at yet: wrapped (and guarded) only when first read."""

    def __init__(self, value: Any, source: Source):
        self.value, self.source = value, source

    def __repr__(self):
        return f"LazyVariable({self.source.name()})"


def realize(tx: InstructionTranslator, v: Any) -> Any:
    """The tracker a value of a frame's stack or locals stands for: a lazy variable
    wrapped (and guarded) now; the traced code's own exception (``except E as e``) as a value;
    anything else as it is."""
    if isinstance(v, LazyVariable):
        return tx.wrap_nested(v.value, v.source)
    if isinstance(v, TracedException):  # ``except E as e``: e is the exception, a value
        return ConstantVariable(v.exc)
    return v
