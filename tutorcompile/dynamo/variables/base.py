"""Variable trackers: the base class, and what every tracker shares.

See ``variables/__init__.py`` for the whole family. Every tracker can ``reconstruct`` the real
value it stands for after the graph ran (``Reconstructor`` memoises, so aliasing survives).
``LATE_BOUND`` lets a tracker build one defined in a module that imports its own.

Mirrors: torch/_dynamo/variables/base.py.
"""

from __future__ import annotations

import inspect
import re
import sys
import types
from typing import TYPE_CHECKING, Any

import torch

from ..exc import Unsupported
from ..source import Source

if TYPE_CHECKING:  # pragma: no cover
    from ..symbolic_convert import InstructionTranslator

CONSTANT_TYPES = (bool, int, float, complex, str, bytes, type(None), type(Ellipsis),
                  re.Pattern, re.Match,
                  torch.dtype, torch.device, torch.layout, torch.memory_format, range, slice,
                  types.CodeType, frozenset, torch.finfo, torch.iinfo, inspect.Signature,
                  inspect.Parameter, types.MappingProxyType,
                  types.UnionType)   # ``tuple | list``: immutable, made of classes


def is_constant_value(v: Any) -> bool:
    if isinstance(v, tuple):
        return all(is_constant_value(x) for x in v)
    return isinstance(v, CONSTANT_TYPES) or v is NotImplemented or _numpy_scalar(v) or \
        _pybind_enum(v) or type(v).__module__ == "typing"   # ``Optional[Tensor]``: fixed


def _pybind_enum(v: Any) -> bool:
    """A member of an enum defined in C++ through pybind11 (``SDPBackend.MATH``): an
    immutable singleton, compared by value, so a constant (as Python's ``enum`` members)."""
    cls = type(v)
    return "__entries" in cls.__dict__ and "__members__" in cls.__dict__


def _numpy_scalar(v: Any) -> bool:
    """A NumPy scalar (``np.int64(3)``, ``np.float32``, ``np.bool_``): immutable like an
    int, so a constant (monai sizes its windows with them)."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(v, numpy.generic) and not isinstance(
        v, numpy.object_)


class VariableTracker:
    """Base class. ``source`` is set when the value came from outside the traced code."""
    source: Source | None = None
    is_iterator = False  # advanced item by item (``variables/iter.py``)

    def python_type(self) -> type:
        raise Unsupported(f"type of {self}")

    def is_python_constant(self) -> bool:
        return False

    def as_python_constant(self) -> Any:
        raise Unsupported(f"{self} is not a Python constant")

    def as_proxy(self) -> Any:
        """The graph argument for this value (a node, or a Python constant)."""
        raise Unsupported(f"{self} cannot be a graph argument")

    def example(self) -> Any:
        """The example value used to run ops on fake tensors while tracing."""
        return self.as_python_constant()

    def var_getattr(self, tx: InstructionTranslator, name: str) -> VariableTracker:
        try:
            cls = self.python_type()
        except Unsupported:
            cls = None
        if cls in (list, tuple, dict, torch.Size) and callable(getattr(cls, name, None)):
            return BoundMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of {self}")

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        raise Unsupported(f"call to {self}")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def unpack(self, tx) -> list[VariableTracker]:
        raise Unsupported(f"iteration over {self}")

    def truth(self, tx) -> bool:
        return True

    def reconstruct(self, rc: Reconstructor) -> Any:
        if self.source is not None:
            return self.source.get(rc.env)
        raise Unsupported(f"cannot rebuild {self} after the graph")

    def children(self) -> list[VariableTracker]:
        return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Reconstructor:
    """Rebuilds real values from trackers after a graph ran (memoised: aliasing survives)."""

    def __init__(self, env: dict[str, Any], outputs: dict[Any, Any]):
        self.env = env  # L, G, B, S of the frame *before* it is rebuilt
        self.outputs = outputs  # graph node -> value the graph computed
        self.memo: dict[int, Any] = {}

    def __call__(self, vt: Any) -> Any:
        if not isinstance(vt, VariableTracker):
            return vt  # NULL and other raw stack markers
        key = id(vt)
        if key not in self.memo:
            # A value from outside is fetched again through its source: the object of
            # *this* call, not the one seen while tracing (guards made them equivalent).
            # Trackers with a source are never mutated (that is a graph break).
            if vt.source is not None:
                self.memo[key] = vt.source.get(self.env)
            else:
                self.memo[key] = vt.reconstruct(self)
        return self.memo[key]


# --- constants ------------------------------------------------------------------------------
# Trackers defined in modules that import this one (``functions``, ``callables``), registered
# there when they are imported -- the package ``__init__`` imports them all. Late binding keeps
# the module graph acyclic where a constant or a dict must build one of them.
# (Typed as any class: where a name is read, the class is the one registered under it.)
LATE_BOUND: dict[str, type[Any]] = {}


class BoundMethodVariable(VariableTracker):
    """``obj.method`` of a container tracker before the call (``out.append``)."""

    def __init__(self, obj: VariableTracker, name: str):
        self.obj, self.name = obj, name

    def call_function(self, tx, args, kwargs):
        return self.obj.call_method(tx, self.name, args, kwargs)

    def children(self):
        return [self.obj]

    def reconstruct(self, rc):
        return getattr(rc(self.obj), self.name)


__all__ = ['BoundMethodVariable', 'CONSTANT_TYPES', 'Reconstructor', 'VariableTracker',
           'is_constant_value']
