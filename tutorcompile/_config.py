'''Checked configuration modules: each stage names its knobs in its own ``config.py``.

A stage's config module declares each knob as an annotated module variable followed by a
docstring that says what it does and why it has its value::

    max_fusion_size: int = 64
    """A kernel holds at most this many buffers (compile time grows with kernel size)."""

and ends with ``install(__name__)`` (plus the two one-line functions ``patch`` and
``describe`` that hand their module's name to the ones here). From then on:

* setting a knob is checked at once: a name that is not a knob (a typo names the close
  match) or a value of the wrong type raises there, not later inside a compile;
* ``config.patch(name=value)`` sets knobs for a ``with`` block (all checked before any is
  set) and restores them after it;
* ``config.describe()`` lists every knob with its value and its docstring.

Code reads a knob as ``config.name`` when it needs it, never copies it at import, so a
change takes effect at the next compile (what is already compiled keeps what it was
compiled with; ``tutorcompile.reset()`` forgets it).

The knobs are found by parsing the module's own source: the docstring under each one is
the single place its reason is written, for readers of the file and for ``describe()``.

Mirrors: torch/utils/_config_module.py (``install_config_module``: a module whose
assignments are checked, ``patch``) and the docstring-per-knob style of torch/_inductor/config.py.
'''

from __future__ import annotations

import ast
import contextlib
import difflib
import inspect
import sys
import textwrap
import types
from collections.abc import Iterator
from typing import Any

_KINDS: dict[str, type] = {"bool": bool, "int": int, "float": float, "str": str}


class ConfigModule(types.ModuleType):
    """The class of a module after :func:`install`: its knobs' assignments are checked."""

    _knobs: dict[str, tuple[type, str]]

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_") or name not in self._knobs and name in self.__dict__:
            return super().__setattr__(name, value)   # (module internals, monkeypatching)
        check(self, name, value)
        super().__setattr__(name, value)


def knobs_of(module: types.ModuleType) -> dict[str, tuple[type, str]]:
    """name -> (type, docstring) of each annotated module variable with a docstring under it,
    read from the module's source."""
    tree = ast.parse(inspect.getsource(module))
    found: dict[str, tuple[type, str]] = {}
    for statement, following in zip(tree.body, tree.body[1:]):
        if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            continue
        name, kind = statement.target.id, ast.unparse(statement.annotation).strip("'\"")
        if kind not in _KINDS:
            raise TypeError(f"{module.__name__}.{name}: a knob is one of "
                            f"{', '.join(_KINDS)}, not {kind}")
        found[name] = (_KINDS[kind], inspect.cleandoc(following.value.value))
    return found


def install(name: str) -> None:
    """Make the module ``name`` a :class:`ConfigModule` (call it last in the module)."""
    module = sys.modules[name]
    knobs = knobs_of(module)
    for knob, (kind, _) in knobs.items():
        _check_kind(module, knob, kind, getattr(module, knob))
    vars(module)["_knobs"] = knobs
    module.__class__ = ConfigModule


def check(module: types.ModuleType, name: str, value: Any) -> None:
    """Raise unless ``name`` is a knob of ``module`` and ``value`` fits its type."""
    knobs = module._knobs
    if name not in knobs:
        close = difflib.get_close_matches(name, knobs, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise AttributeError(f"{module.__name__} has no knob {name!r}{hint} "
                             f"(knobs: {', '.join(sorted(knobs))})")
    _check_kind(module, name, knobs[name][0], value)


def _check_kind(module: types.ModuleType, name: str, kind: type, value: Any) -> None:
    fits = type(value) is kind or (kind is float and type(value) is int)
    if not fits:
        article = "an" if kind.__name__[0] in "aeiou" else "a"
        raise TypeError(f"{module.__name__}.{name} must be {article} {kind.__name__}, "
                        f"got {value!r}")


def patch(name: str, **changes: Any) -> contextlib.AbstractContextManager:
    """The knobs of module ``name`` set for a ``with`` block (each checked now), restored
    after it."""
    module = sys.modules[name]
    for knob, value in changes.items():   # check every change before making any
        check(module, knob, value)

    @contextlib.contextmanager
    def block() -> Iterator[None]:
        saved = {knob: getattr(module, knob) for knob in changes}   # (as the block opens)
        try:
            for knob, value in changes.items():
                setattr(module, knob, value)
            yield
        finally:
            for knob, value in saved.items():
                setattr(module, knob, value)
    return block()


def describe(name: str) -> str:
    """Each knob of module ``name``: its value, and under it its docstring."""
    module = sys.modules[name]
    return "\n".join(f"{knob} = {getattr(module, knob)!r}\n" + textwrap.indent(doc, "    ")
                     for knob, (_, doc) in module._knobs.items())


def snapshot(name: str) -> tuple[tuple[str, Any], ...]:
    """(knob, value) of every knob of module ``name``, for a cache key."""
    module = sys.modules[name]
    return tuple((knob, getattr(module, knob)) for knob in module._knobs)
