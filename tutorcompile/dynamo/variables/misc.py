"""Small trackers: closure cells, module globals written by the frame, and ``DELETED``.

Mirrors: torch/_dynamo/variables/misc.py.
"""

from __future__ import annotations

import types
from typing import Any

from ..source import Source
from .base import VariableTracker


class CellVariable(VariableTracker):
    """A closure cell made while tracing (MAKE_CELL)."""
    EMPTY = object()

    def __init__(self, contents: Any = EMPTY):
        self.contents = contents

    def children(self):
        return [] if self.contents is self.EMPTY else [self.contents]

    def reconstruct(self, rc):
        if self.contents is self.EMPTY:
            return types.CellType()
        cell = types.CellType()
        rc.memo[id(self)] = cell  # before the contents: a closure may refer to itself
        cell.cell_contents = rc(self.contents)
        return cell


class _Deleted:
    def __repr__(self):
        return "DELETED"


DELETED = _Deleted()  # a pending write that deletes (``del obj.attr``, ``del GLOBAL``)


class GlobalsVariable(VariableTracker):
    """A module's globals that the traced code assigns to (``global N; N = v``). Like an
    object's attribute writes, the assignments wait in ``pending`` (reads in the frame see
    them) and are replayed into the module's dict after the graph ran, in order with the
    other side effects. ``scope`` names the dict in the guard environment (``G``, ``G_mod``)."""
    fresh = False

    def __init__(self, scope: str):
        self.scope = scope
        self.pending: dict[str, Any] = {}

    def children(self):
        return [v for v in self.pending.values() if isinstance(v, VariableTracker)]

    def reconstruct(self, rc):
        return rc.env[self.scope]

    def __repr__(self):
        return f"GlobalsVariable({self.scope})"


class ClosureCellVariable(VariableTracker):
    """A real cell from outside (a free variable of the compiled function)."""

    def __init__(self, cell: types.CellType, source: Source):
        self.cell, self.source = cell, source


__all__ = ['CellVariable', 'ClosureCellVariable', 'DELETED', 'GlobalsVariable']
