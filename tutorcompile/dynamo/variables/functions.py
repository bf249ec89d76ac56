"""Function trackers: Python functions and methods, closures made while tracing, and
``functools.partial`` objects. Calls to them are *inlined* (traced through).

Mirrors: torch/_dynamo/variables/functions.py.
"""
from __future__ import annotations

import functools
import types

from ..exc import TracedException, Unsupported
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
        if self.fn.__code__ is _SINGLEDISPATCH_CODE and args:
            return self._call_singledispatch(tx, args, kwargs)
        return tx.inline_user_function(self.fn, args, kwargs, fn_source=self.source)

    def _call_singledispatch(self, tx, args, kwargs):
        """``functools.singledispatch``'s wrapper: the implementation for the first argument's
        class is chosen now (what the wrapper does, without its weak-keyed cache) and
        inlined. Guarded: the registry keeps its length (no class registered since) and the
        entry chosen its function (not registered again)."""
        cls = args[0].python_type()
        impl = self.fn.dispatch(cls)
        if self.source is not None:
            registry, guards = f"{self.source.name()}.registry", tx.guards
            key = next(k for k, v in self.fn.registry.items() if v is impl)
            n = len(self.fn.registry)
            guards.add("SINGLEDISPATCH", f"len({registry}) == {n} and {registry}.get("
                       f"{guards.bind(key, 'key')}) is {guards.bind(impl, 'impl')}",
                       self.source, comment=f"{self.fn.__qualname__}({cls.__name__}) calls "
                       f"{impl.__qualname__}")
        return tx.wrap_nested(impl, None).call_function(tx, args, kwargs)

    def var_getattr(self, tx, name):
        if name in _FIXED_BY_IDENTITY:
            # read off the function whose identity the guards fix (``ID_MATCH``)
            return ConstantVariable(getattr(self.fn, name))
        if name == "__class__":
            return tx.wrap_nested(types.FunctionType, None)
        if name == "__get__":
            return BoundDescriptorGet(self)
        try:
            value = getattr(self.fn, name)
        except AttributeError as e:  # ``getattr(fn, "__wrapped__", None)``
            if self.source is not None:
                tx.guards.add("HASATTR", f"not hasattr({self.source.name()}, {name!r})",
                              self.source)
            raise TracedException(e) from None
        # anything else (``__dict__``, ``__wrapped__``, ``__defaults__``, an attribute a
        # decorator set) is read through the function's source, and guarded there
        source = AttrSource(self.source, name) if self.source is not None else None
        return tx.wrap_nested(value, source)

    def reconstruct(self, rc):
        return self.fn

    def __repr__(self):
        return f"UserFunctionVariable({self.fn.__qualname__})"


# the code of every ``functools.singledispatch`` wrapper (one function, many closures)
_SINGLEDISPATCH_CODE = functools.singledispatch(lambda x: x).__code__  # type: ignore[attr-defined]

# a function's own fields, fixed once its identity is: what a decorator copies onto its
# wrapper (``functools.wraps``) and what reasons and names print
_FIXED_BY_IDENTITY = ("__name__", "__qualname__", "__module__", "__doc__")


class BoundDescriptorGet(VariableTracker):
    """``fn.__get__(obj, cls)``: the function bound to ``obj`` (a method), as a class
    attribute lookup does -- libraries that attach functions to instances write it."""

    def __init__(self, fn: VariableTracker):
        self.fn = fn

    def call_function(self, tx, args, kwargs):
        obj = args[0] if args else kwargs.get("instance")
        if obj is None or obj.is_python_constant() and obj.as_python_constant() is None:
            return self.fn
        if isinstance(self.fn, UserFunctionVariable):
            return UserMethodVariable(self.fn.fn, obj, self.fn.source)
        return LATE_BOUND["PartialVariable"](self.fn, [obj], {})

    def children(self):
        return [self.fn]


class UserMethodVariable(VariableTracker):
    """``obj.method``; ``fn_source`` reaches the function (``L['self'].__class__.forward``) so
    that its defaults and closure cells are guarded through it, like a function's."""

    def __init__(self, fn: types.FunctionType, obj: VariableTracker,
                 fn_source: Source | None = None):
        self.fn, self.obj, self.fn_source = fn, obj, fn_source

    def call_function(self, tx, args, kwargs):
        return tx.inline_user_function(self.fn, [self.obj, *args], kwargs,
                                       fn_source=self.fn_source)

    def var_getattr(self, tx, name):
        # a bound method answers ``__self__`` and ``__func__`` and hands every other name to
        # its function (``getattr(obj.method, "__is_abstract_attribute__", False)``), as
        # CPython's method_getattro does
        if name == "__self__":
            return self.obj
        if name == "__func__":
            return UserFunctionVariable(self.fn, self.fn_source)
        return UserFunctionVariable(self.fn, self.fn_source).var_getattr(tx, name)

    def children(self):
        return [self.obj]

    def reconstruct(self, rc):
        return types.MethodType(self.fn, rc(self.obj))


class NestedUserFunctionVariable(VariableTracker):
    """A function object created by MAKE_FUNCTION during tracing (a closure or lambda).

    A function is an object like any other: decorators read and write its attributes
    (``functools.wraps`` copies ``__module__``, ``__name__``, ``__qualname__``, ``__doc__``
    and ``__dict__`` onto a wrapper and sets ``__wrapped__``). Its own fields that are set
    live in ``fields``; every other attribute lives in ``attrs``, its ``__dict__`` -- a dict
    tracker, so ``wrapper.__dict__.update(...)`` writes the same attributes ``getattr``
    reads. Both are rebuilt onto the real function after the graph."""

    def __init__(self, code, f_globals, defaults, kwdefaults, closure, qualname,
                 annotations=None):
        self.code, self.f_globals = code, f_globals
        self.defaults, self.kwdefaults, self.closure = defaults, kwdefaults, closure
        self.qualname = qualname
        self.annotations = annotations
        self.fields: dict[str, VariableTracker] = {}  # __name__, __doc__... once assigned
        self.attrs = ConstDictVariable({})  # the function's __dict__

    def python_type(self):
        return types.FunctionType

    def call_function(self, tx, args, kwargs):
        return tx.inline_nested_function(self, args, kwargs)

    def field(self, name: str) -> VariableTracker:
        """The value of one of the function's own fields (``__name__``...)."""
        if name in self.fields:
            return self.fields[name]
        if name == "__name__":
            return ConstantVariable(self.code.co_name)
        if name == "__qualname__":
            return ConstantVariable(self.qualname)
        if name == "__module__":
            return ConstantVariable(self.f_globals.get("__name__"))
        if name == "__doc__":
            doc = self.code.co_consts[0] if self.code.co_consts else None
            return ConstantVariable(doc if isinstance(doc, str) else None)
        if name == "__defaults__":
            return self.defaults if self.defaults is not None else ConstantVariable(None)
        if name == "__kwdefaults__":
            return self.kwdefaults if self.kwdefaults is not None else ConstantVariable(None)
        if name == "__annotations__":
            return self.annotations if self.annotations is not None else ConstDictVariable({})
        if name == "__type_params__":
            return TupleVariable([])
        raise KeyError(name)

    def var_getattr(self, tx, name):
        if name in _FUNCTION_FIELDS:
            return self.field(name)
        if name == "__dict__":
            return self.attrs
        if name == "__code__":
            return ConstantVariable(self.code)
        if name == "__closure__":
            return self.closure if self.closure is not None else ConstantVariable(None)
        if name == "__globals__":
            return tx.wrap_nested(self.f_globals, None)
        if name == "__class__":
            return tx.wrap_nested(types.FunctionType, None)
        if name == "__get__":
            return BoundDescriptorGet(self)
        found = self.attrs.lookup(ConstantVariable(name))
        if found is None:
            raise TracedException(AttributeError(
                f"'function' object has no attribute {name!r}"))
        return found

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        tx.record_mutation(self)
        if name in _FUNCTION_FIELDS:
            self.fields[name] = value
        elif name == "__dict__":
            if not isinstance(value, ConstDictVariable):
                raise Unsupported("assigning a non-dict to a function's __dict__")
            self.attrs = value
        elif name in ("__code__", "__closure__", "__globals__"):
            raise Unsupported(f"assigning {name} of a function made while tracing")
        else:
            self.attrs.setitem(tx, ConstantVariable(name), value)

    def has_attr(self, name: str) -> bool:
        return name in _FUNCTION_FIELDS or name in self.attrs.items or name in (
            "__dict__", "__code__", "__closure__", "__globals__", "__class__", "__get__")

    def children(self):
        return [v for v in (self.defaults, self.kwdefaults, self.closure, self.annotations)
                if v is not None] + list(self.fields.values()) + [self.attrs]

    def reconstruct(self, rc):
        closure = tuple(rc(c) for c in self.closure.items) if self.closure else None
        defaults = rc(self.defaults) if self.defaults is not None else None
        fn = types.FunctionType(self.code, self.f_globals, self.code.co_name, defaults,
                                closure)
        rc.memo[id(self)] = fn  # before the attributes: ``inner.__wrapped__`` may be itself
        fn.__kwdefaults__ = rc(self.kwdefaults) if self.kwdefaults is not None else None
        fn.__qualname__ = self.qualname
        if self.annotations is not None:
            fn.__annotations__ = rc(self.annotations)
        for name, value in self.fields.items():
            setattr(fn, name, rc(value))
        fn.__dict__.update(self.attrs.rebuild_items(rc))
        return fn

    def __repr__(self):
        return f"NestedUserFunctionVariable({self.qualname})"


_FUNCTION_FIELDS = ("__name__", "__qualname__", "__module__", "__doc__", "__defaults__",
                    "__kwdefaults__", "__annotations__", "__type_params__")


class CachedFunctionVariable(VariableTracker):
    """``functools.lru_cache``'s wrapper made while tracing: calls go to the function (the
    cache only saves recomputing a pure function); attributes that ``update_wrapper`` and
    ``lru_cache`` set live in ``attrs``, its ``__dict__``, rebuilt onto the real wrapper."""

    def __init__(self, fn: VariableTracker, maxsize: int | None, typed: bool):
        self.fn, self.maxsize, self.typed = fn, maxsize, typed
        self.attrs = ConstDictVariable({})

    def python_type(self):
        return functools._lru_cache_wrapper

    def call_function(self, tx, args, kwargs):
        return tx.call(self.fn, args, kwargs)

    def var_getattr(self, tx, name):
        if name == "__dict__":
            return self.attrs
        found = self.attrs.lookup(ConstantVariable(name))
        if found is not None:
            return found
        if name == "__wrapped__":
            return self.fn
        raise Unsupported(f"attribute {name!r} of an lru_cache wrapper made while tracing")

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        self.attrs.setitem(tx, ConstantVariable(name), value)

    def children(self):
        return [self.fn, self.attrs]

    def reconstruct(self, rc):
        wrapper = functools._lru_cache_wrapper(rc(self.fn), self.maxsize, self.typed,
                                               functools._CacheInfo)
        rc.memo[id(self)] = wrapper
        wrapper.__dict__.update(self.attrs.rebuild_items(rc))
        return wrapper


class PartialVariable(VariableTracker):
    """``functools.partial(fn, *args, **kwargs)`` made while tracing, or one read from the
    program. ``has_dict``: the object has an instance ``__dict__`` (``update_wrapper`` on it,
    say), which stops CPython from flattening a partial of it (:func:`partial_of`)."""

    def __init__(self, fn: VariableTracker, args: list, kwargs: dict, has_dict: bool = False):
        self.fn, self.args, self.kwargs, self.has_dict = fn, args, kwargs, has_dict

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


def partial_of(fn: VariableTracker, args: list, kwargs: dict) -> PartialVariable:
    """``functools.partial(fn, *args, **kwargs)`` as CPython builds it: when ``fn`` is itself
    a plain partial without an instance ``__dict__``, the new one wraps ``fn.func`` with
    ``fn.args + args`` and ``{**fn.keywords, **kwargs}`` -- so ``.func``, ``.args`` and
    ``.keywords`` read what eager reads, not a partial nested in a partial.

    Mirrors: CPython's ``partial_new`` (Modules/_functoolsmodule.c)."""
    if isinstance(fn, PartialVariable) and not fn.has_dict:
        return PartialVariable(fn.fn, [*fn.args, *args], {**fn.kwargs, **kwargs})
    return PartialVariable(fn, list(args), dict(kwargs))


LATE_BOUND["UserMethodVariable"] = UserMethodVariable
LATE_BOUND["PartialVariable"] = PartialVariable


__all__ = [
    'BoundDescriptorGet', 'CachedFunctionVariable', 'NestedUserFunctionVariable', 'PartialVariable',
    'UserFunctionVariable', 'UserMethodVariable', 'partial_of',
]
