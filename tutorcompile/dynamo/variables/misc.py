"""Small trackers: closure cells, module globals written by the frame, ``DELETED``, Python
modules and ``os.environ``.

Mirrors: torch/_dynamo/variables/misc.py.
"""

from __future__ import annotations

import types
from typing import Any

from ..exc import Unsupported
from ..source import AttrSource, ObjectSource, Source
from .base import BoundMethodVariable, VariableTracker, is_constant_value
from .containers import ConstantVariable


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
    """A real cell from outside: a free variable of the compiled function, or a cell
    variable of the frame resumed after a graph break. A write (``nonlocal``) waits in
    ``pending["cell_contents"]`` and is replayed on the cell after the graph, in order with
    the other side effects (like an attribute write: ``setattr(cell, "cell_contents", v)``).
    """
    fresh = False

    def __init__(self, cell: types.CellType, source: Source | None):
        self.cell, self.source = cell, source
        self.pending: dict[str, Any] = {}

    def children(self):
        return [v for v in self.pending.values() if isinstance(v, VariableTracker)]


class DeferredCallVariable(VariableTracker):
    """A call that only reports (``warnings.warn``, ``logger.warning``): it computes nothing
    the graph needs, so instead of a break it is made after the graph, in order with the
    other side effects, with the values the graph computed (PyTorch's Dynamo drops or
    breaks on these). What it reports is the same; where it says it was called from is the
    compiled code's replay, not the user's line."""
    fresh = False

    def __init__(self, fn: VariableTracker, args: list, kwargs: dict):
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def children(self):
        return [self.fn, *self.args, *self.kwargs.values()]

    def rebuild_items(self, rc):
        return rc(self.fn), [rc(a) for a in self.args], {k: rc(v) for k, v in
                                                          self.kwargs.items()}

    def reconstruct(self, rc):
        return None

    def __repr__(self):
        return f"DeferredCallVariable({self.fn})"


class PythonModuleVariable(VariableTracker):
    """A Python module (``torch``, ``math``, a user's helper module).

    What a trusted module (torch's, ``math``...) holds is taken as fixed, read without a
    guard -- but for its *settings*: everything under ``torch.backends`` (``cudnn.enabled``,
    ``cuda.matmul.allow_tf32``) is global state a program may change between calls, and so
    is any plain object such a module holds (``torch.backends.cuda.matmul``, whose
    attributes are read from the C library's flags). Those get a source -- through the
    module itself when it has none -- so the value read is guarded."""

    def __init__(self, module: types.ModuleType, source: Source | None = None):
        self.value, self.source = module, source

    def var_getattr(self, tx, name):
        value = getattr(self.value, name)
        module = self.value.__name__
        trusted = module.split(".")[0] in ("torch", "math", "operator", "builtins",
                                           "functools")
        source = None if trusted or self.source is None else AttrSource(self.source, name)
        if trusted and isinstance(value, type):  # (its attributes need a source)
            source = ObjectSource(value)
        elif trusted and (module == "torch.backends" or module.startswith("torch.backends.")
                          or not _fixed_member(value)):
            source = AttrSource(self.source if self.source is not None else
                                ObjectSource(self.value), name)
        return tx.wrap_nested(value, source)

    def reconstruct(self, rc):
        return self.value


def _fixed_member(value: Any) -> bool:
    """Code, a submodule, or a constant: what a trusted module's attribute may be taken to be
    for good."""
    return isinstance(value, (types.ModuleType, type)) or callable(value) or \
        is_constant_value(value)


class EnvironVariable(VariableTracker):
    """``os.environ``: reads of one variable fold to its value, guarded through the source
    (``G_os['environ'].get('X') is None``); writes are a graph break."""

    def __init__(self, value: Any, source: Source | None):
        self.value, self.source = value, source

    def python_type(self):
        return type(self.value)

    def var_getattr(self, tx, name):
        if name in ("get", "__getitem__", "__contains__"):
            return BoundMethodVariable(self, name)
        raise Unsupported(f"os.environ.{name}")

    def read(self, tx, key: str) -> Any:
        value = self.value.get(key)
        if self.source is not None:
            expr = f"{self.source.name()}.get({key!r})"
            tx.guards.add("ENV", f"{expr} is None" if value is None else f"{expr} == "
                          f"{value!r}", self.source, "environment variable")
        return value

    def call_method(self, tx, name, args, kwargs):
        key = args[0].as_python_constant()
        if not isinstance(key, str):
            raise Unsupported("os.environ with a non-str key")
        value = self.read(tx, key)
        if name == "__contains__":
            return ConstantVariable(value is not None)
        if value is None:
            if name == "get":
                return args[1] if len(args) > 1 else ConstantVariable(None)
            raise Unsupported(f"KeyError {key!r} (os.environ) while tracing")
        return ConstantVariable(value)

    def reconstruct(self, rc):
        return self.value


__all__ = [
    'CellVariable', 'ClosureCellVariable', 'DELETED', 'DeferredCallVariable', 'EnvironVariable',
    'GlobalsVariable',
    'PythonModuleVariable',
]
