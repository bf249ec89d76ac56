"""Sources: where a value the graph depends on came from, as a readable Python expression.

Every input Dynamo reads -- an argument, a global, ``self.fc.weight``, an item of a list
argument -- is tagged with its *source*. A source does two jobs: it says how to fetch the
value again on the next call (graph inputs are fetched through their sources), and it is the
left-hand side of every guard printed for that value (``L['x']``, ``G['scale']``,
``L['self'].fc.weight``).

Guard expressions are evaluated with four names bound: ``L`` (the frame's locals), ``G``
(its globals), ``B`` (builtins) and ``S`` (the value stack, non-empty at resume points);
``K`` holds the objects that have no literal spelling (dict keys such as enum members, and
the fixed objects of :class:`ObjectSource`).

Mirrors: torch/_dynamo/source.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class Source:
    """Base class: ``name()`` is the expression, ``get(env)`` evaluates it."""

    def name(self) -> str:
        raise NotImplementedError

    def get(self, env: dict[str, Any]) -> Any:
        return eval(self.name(), {"__builtins__": {}, "K": KEYS}, env)  # noqa: S307

    def __str__(self) -> str:
        return self.name()


@dataclass(frozen=True)
class LocalSource(Source):
    local_name: str

    def name(self) -> str:
        return f"L[{self.local_name!r}]"

    def get(self, env):
        return env["L"][self.local_name]


@dataclass(frozen=True)
class StackSource(Source):
    index: int

    def name(self) -> str:
        return f"S[{self.index}]"

    def get(self, env):
        return env["S"][self.index]


@dataclass(frozen=True)
class GlobalSource(Source):
    global_name: str
    scope: str = "G"  # "G" for the compiled frame's module; another label for others

    def name(self) -> str:
        return f"{self.scope}[{self.global_name!r}]"

    def get(self, env):
        return env[self.scope][self.global_name]


@dataclass(frozen=True)
class AttrSource(Source):
    base: Source
    attr: str

    def name(self) -> str:
        if self.attr.isidentifier():
            return f"{self.base.name()}.{self.attr}"
        return f"getattr({self.base.name()}, {self.attr!r})"

    def get(self, env):
        return getattr(self.base.get(env), self.attr)


def is_literal(value: Any) -> bool:
    """Is ``repr(value)`` the Python literal for it (so guard source may spell it out)?"""
    t = type(value)
    if value is None or t in (bool, int, str, bytes):
        return True
    if t is float:
        return value == value and value not in (float("inf"), float("-inf"))
    return t is tuple and all(is_literal(v) for v in value)


KEYS: list[Any] = []  # objects with no literal spelling (an enum member): K[i] in guards
_KEY_INDEX: dict[int, int] = {}


def key_expr(key: Any) -> str:
    """How guard source spells the dict key ``key``: a literal, or ``K[i]`` (never a repr of
    an object, which may not even parse: ``<Mode.A: 'a'>``)."""
    if is_literal(key):
        return repr(key)
    if id(key) not in _KEY_INDEX:
        _KEY_INDEX[id(key)] = len(KEYS)
        KEYS.append(key)  # kept alive, so the id stays unique
    return f"K[{_KEY_INDEX[id(key)]}]"


@dataclass(frozen=True, eq=False)
class ObjectSource(Source):
    """A fixed object reached by no expression of the frame: a class of torch that is
    traced into (``torch.distributions.Normal``), read from a module whose attributes are
    trusted not to change. ``K[i]`` is the very object, so reads from it (a class
    attribute) have a source to be guarded through and written back to."""
    value: Any

    def name(self) -> str:
        return key_expr(self.value)

    def get(self, env):
        return self.value


@dataclass(frozen=True)
class GetItemSource(Source):
    base: Source
    key: Any

    def name(self) -> str:
        return f"{self.base.name()}[{key_expr(self.key)}]"

    def get(self, env):
        return self.base.get(env)[self.key]


@dataclass(frozen=True)
class GetItemBySource(Source):
    """``base[key]`` where the key is itself a value of the frame (a tensor keying a dict,
    ``self.state[p]``): named, and fetched, through its own source."""
    base: Source
    key: Source

    def name(self) -> str:
        return f"{self.base.name()}[{self.key.name()}]"

    def get(self, env):
        return self.base.get(env)[self.key.get(env)]


@dataclass(frozen=True)
class DictStorageSource(Source):
    """The items a dict subclass stores, whatever its own ``__getitem__`` does (transformers'
    ``ACT2FN`` builds a new module on every read): ``dict.items`` reads the storage itself
    (``dict.copy`` would not -- an ``OrderedDict`` subclass is copied through its own
    ``__getitem__``)."""
    base: Source

    def name(self) -> str:
        return f"B['dict'](B['dict'].items({self.base.name()}))"

    def get(self, env):
        return dict(dict.items(self.base.get(env)))


@dataclass(frozen=True)
class SequenceStorageSource(Source):
    """The items a tuple or list subclass stores, whatever its own ``__getitem__`` does
    (e3nn's ``Irreps`` wraps slices in itself): ``tuple.__getitem__(obj, slice(None))``
    reads the storage."""
    base: Source
    kind: str   # "tuple" or "list"

    def name(self) -> str:
        return f"B[{self.kind!r}].__getitem__({self.base.name()}, B['slice'](None))"

    def get(self, env):
        kind = tuple if self.kind == "tuple" else list
        return kind.__getitem__(self.base.get(env), slice(None))


@dataclass(frozen=True)
class NumpyTensorSource(Source):
    """``torch.from_numpy(array)``: a NumPy array from outside as the tensor that shares its
    memory (a graph input, as PyTorch's Dynamo makes one)."""
    base: Source

    def name(self) -> str:
        return f"torch.from_numpy({self.base.name()})"

    def get(self, env):
        import torch
        return torch.from_numpy(self.base.get(env))


@dataclass(frozen=True)
class ReduceSource(Source):
    """``it.__reduce__()``: how a C iterator over a range, list or tuple pickles --
    ``(iter, (sequence,), position)``, or ``(iter, ([],))`` once exhausted. Reading it
    changes nothing, so guards may: it is where such an iterator's remaining items are."""
    base: Source

    def name(self) -> str:
        return f"{self.base.name()}.__reduce__()"

    def get(self, env):
        return self.base.get(env).__reduce__()


@dataclass(frozen=True)
class CellContentsSource(Source):
    base: Source

    def name(self) -> str:
        return f"{self.base.name()}.cell_contents"

    def get(self, env):
        return self.base.get(env).cell_contents


@dataclass(frozen=True)
class WeakRefCallSource(Source):
    """``ref()``: what a weak reference points to (None once it is gone). Calling one has
    no side effect; RNN modules keep weak references to their weights and compare them
    with ``is`` on every forward."""
    base: Source

    def name(self) -> str:
        return f"{self.base.name()}()"

    def get(self, env):
        return self.base.get(env)()
