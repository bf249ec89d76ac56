"""Function trackers: Python functions and methods, closures made while tracing, and
``functools.partial`` objects. Calls to them are *inlined* (traced through).

Mirrors: torch/_dynamo/variables/functions.py.
"""
from __future__ import annotations

import functools
import types

from ..exc import Unsupported
from ..source import AttrSource, Source
from .base import LATE_BOUND, VariableTracker, is_constant_value
from .containers import ConstantVariable, ConstDictVariable, TupleVariable


def _assumed_constant(fn, args: list, kwargs: dict) -> VariableTracker:
    """A function marked ``assume_constant_result`` (by ``torch._dynamo`` or ours: the same
    attribute; transformers marks its ``is_torch_available()``-style probes so) is called now,
    for real, and its result is a constant of the graph -- unguarded, as the mark promises."""
    if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
        raise Unsupported(f"{fn.__qualname__} (assume_constant_result) on values that are not "
                          "Python constants")
    value = fn(*[a.as_python_constant() for a in args],
               **{k: v.as_python_constant() for k, v in kwargs.items()})
    if not is_constant_value(value):
        raise Unsupported(f"{fn.__qualname__} (assume_constant_result) returned a "
                          f"{type(value).__name__}, not a Python constant")
    return ConstantVariable(value)


class UserFunctionVariable(VariableTracker):
    def __init__(self, fn: types.FunctionType, source: Source | None = None):
        self.fn, self.source = fn, source

    def python_type(self):
        return types.FunctionType

    def call_function(self, tx, args, kwargs):
        if getattr(self.fn, "_dynamo_marked_constant", False):
            return _assumed_constant(self.fn, args, kwargs)
        return tx.inline_user_function(self.fn, args, kwargs, fn_source=self.source)

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            return ConstantVariable(getattr(self.fn, name))
        if name == "__class__":
            return tx.wrap_nested(types.FunctionType, None)
        if name in ("__code__", "__defaults__", "__kwdefaults__", "__wrapped__", "__dict__"):
            # fixed by the function's identity (ID_MATCH) or reached through its source
            source = AttrSource(self.source, name) if self.source is not None else None
            return tx.wrap_nested(getattr(self.fn, name), source)
        raise Unsupported(f"attribute {name} of function {self.fn.__qualname__}")

    def reconstruct(self, rc):
        return self.fn

    def __repr__(self):
        return f"UserFunctionVariable({self.fn.__qualname__})"


class UserMethodVariable(VariableTracker):
    """``obj.method``; ``fn_source`` reaches the function (``L['self'].__class__.forward``) so
    that its defaults and closure cells are guarded through it, like a function's."""

    def __init__(self, fn: types.FunctionType, obj: VariableTracker,
                 fn_source: Source | None = None):
        self.fn, self.obj, self.fn_source = fn, obj, fn_source

    def call_function(self, tx, args, kwargs):
        return tx.inline_user_function(self.fn, [self.obj, *args], kwargs,
                                       fn_source=self.fn_source)

    def children(self):
        return [self.obj]

    def reconstruct(self, rc):
        return types.MethodType(self.fn, rc(self.obj))


class NestedUserFunctionVariable(VariableTracker):
    """A function object created by MAKE_FUNCTION during tracing (a closure or lambda)."""

    def __init__(self, code, f_globals, defaults, kwdefaults, closure, qualname):
        self.code, self.f_globals = code, f_globals
        self.defaults, self.kwdefaults, self.closure = defaults, kwdefaults, closure
        self.qualname = qualname

    def python_type(self):
        return types.FunctionType

    def call_function(self, tx, args, kwargs):
        return tx.inline_nested_function(self, args, kwargs)

    def children(self):
        return [v for v in (self.defaults, self.kwdefaults, self.closure) if v is not None]

    def reconstruct(self, rc):
        closure = tuple(rc(c) for c in self.closure.items) if self.closure else None
        defaults = rc(self.defaults) if self.defaults is not None else None
        fn = types.FunctionType(self.code, self.f_globals, self.code.co_name, defaults,
                                closure)
        fn.__kwdefaults__ = rc(self.kwdefaults) if self.kwdefaults is not None else None
        fn.__qualname__ = self.qualname
        return fn


class PartialVariable(VariableTracker):
    """``functools.partial(fn, *args, **kwargs)`` made while tracing."""

    def __init__(self, fn: VariableTracker, args: list, kwargs: dict):
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def python_type(self):
        return functools.partial

    def call_function(self, tx, args, kwargs):
        return tx.call(self.fn, [*self.args, *args], {**self.kwargs, **kwargs})

    def var_getattr(self, tx, name):
        if name == "func":
            return self.fn
        if name == "args":
            return TupleVariable(self.args)
        if name == "keywords":
            return ConstDictVariable(self.kwargs)
        raise Unsupported(f"partial.{name}")

    def children(self):
        return [self.fn, *self.args, *self.kwargs.values()]

    def reconstruct(self, rc):
        return functools.partial(rc(self.fn), *[rc(a) for a in self.args],
                                 **{k: rc(v) for k, v in self.kwargs.items()})


LATE_BOUND["UserMethodVariable"] = UserMethodVariable


__all__ = [
    'NestedUserFunctionVariable', 'PartialVariable', 'UserFunctionVariable', 'UserMethodVariable',
]
