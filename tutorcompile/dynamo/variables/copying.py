"""``copy.deepcopy``, ``copy.copy`` and ``id()`` while tracing: copies and identities of
trackers.

transformers builds a decoder cache from a *copy* of the model's config
(``copy.deepcopy(config)`` in ``PreTrainedConfig.get_text_config``, then ``to_dict`` deep-copies
its ``__dict__``). Run line by line, ``copy.deepcopy`` needs ``id()`` for its memo, a dispatch
table keyed by types and ``object.__reduce_ex__`` (a C function): every one a graph break.

PyTorch's Dynamo traces ``copy.py`` itself and supplies the missing pieces: ``id()`` of a
value reached through a source is the real id, guarded by ``ID_MATCH``; of a value made while
tracing a fake id that only compares (``builtin.py: call_id``, ``FakeIdVariable``); and
``object.__reduce_ex__`` is replaced by a Python polyfill (``polyfills/copy.py``). Here the
copy is done on trackers instead, which is shorter to read and keeps the guards exact:

* an immutable constant (number, string, ``None``, dtype, a tuple of them), a class, a
  function, an enum member is its own copy -- as ``copy._deepcopy_atomic`` says;
* a list, tuple or dict is copied item by item into a *new* tracker (no source: writes to the
  copy stay in the copy and never reach the original);
* an object from outside whose class copies the default way (no ``__deepcopy__``,
  ``__reduce__``, ``__getstate__``/``__setstate__``, ``__slots__``; made by ``object.__new__``)
  becomes an object made while tracing (``fresh``) whose attributes are copies of the
  original's ``__dict__`` entries -- each read through its source, so guarded: the graph
  assumes exactly the values it copied, and the key list of ``__dict__`` is guarded too;
* a tensor, a module, anything else is a graph break (``torch.compile`` also refuses a
  tensor's deepcopy).

A memo keyed by tracker keeps aliasing: two attributes that hold the same list hold the same
copy, as with the real ``memo``.

Mirrors: torch/_dynamo/variables/builtin.py (``call_id``), torch/_dynamo/polyfills/copy.py.
"""

from __future__ import annotations

import collections
import copy
import copyreg
import enum
import inspect
import types

from ..exc import Unsupported
from ..source import AttrSource, GetItemSource
from .base import VariableTracker
from .callables import (
    _BUILTIN_HANDLERS,
    _INLINED_WHEN_UNHANDLED,
    _UNSUPPORTED_BUILTINS,
    BuiltinVariable,
    InstanceDictVariable,
    UserDefinedClassVariable,
    UserDefinedObjectVariable,
)
from .containers import (
    ConstantVariable,
    ConstDictVariable,
    ListVariable,
    NamedTupleVariable,
    SetVariable,
    TupleVariable,
)
from .functions import UserFunctionVariable
from .lazy import realize
from .nn_module import NNModuleVariable


def copies_by_default(cls: type) -> bool:
    """Does ``copy.deepcopy`` copy instances of ``cls`` the default way -- a new object from
    ``object.__new__`` whose ``__dict__`` is a deep copy of the original's? Any hook the class
    defines (``__deepcopy__``, ``__reduce_ex__``/``__reduce__``, ``__getstate__``,
    ``__setstate__``, a ``copyreg`` entry) or ``__slots__`` could do something else."""
    if cls in copyreg.dispatch_table or hasattr(cls, "__deepcopy__") \
            or hasattr(cls, "__setstate__") or hasattr(cls, "__slots__"):
        return False
    if cls.__new__ is not object.__new__:
        return False
    for name in ("__reduce_ex__", "__reduce__", "__getstate__"):
        if inspect.getattr_static(cls, name, None) is not getattr(object, name, None):
            return False
    return True


def _deepcopy(tx, x: VariableTracker, memo: VariableTracker | None = None) -> VariableTracker:
    """``copy.deepcopy(x)``: a tracker for the copy (see the module docstring)."""
    if memo is not None and not (memo.is_python_constant() and
                                 memo.as_python_constant() is None):
        raise Unsupported("copy.deepcopy with a memo passed in")
    return _copy(tx, realize(tx, x), {})


def _copy(tx, vt: VariableTracker, memo: dict[int, VariableTracker]) -> VariableTracker:
    if id(vt) in memo:
        return memo[id(vt)]
    if isinstance(vt, ConstantVariable):
        value = vt.value
        if value is None or isinstance(value, (bool, int, float, complex, str, bytes, range,
                                               enum.Enum, types.CodeType, type)) or \
                type(value).__module__ == "torch":  # dtype, device, layout: immutable
            return vt
        if isinstance(value, tuple) and all(isinstance(v, (bool, int, float, str, type(None)))
                                            for v in value):
            return vt
        raise Unsupported(f"copy.deepcopy of a {type(value).__name__} constant")
    if isinstance(vt, (UserDefinedClassVariable, UserFunctionVariable, BuiltinVariable)):
        return vt  # classes and functions: copy._deepcopy_atomic
    if isinstance(vt, (ListVariable, TupleVariable)) and type(vt) in (
            ListVariable, TupleVariable, NamedTupleVariable):
        if isinstance(vt, ListVariable):
            copied = ListVariable([])
            memo[id(vt)] = copied  # before the items: a list may contain itself
            copied.items = [_copy(tx, i, memo) for i in vt.items]
            return copied
        items = [_copy(tx, i, memo) for i in vt.items]
        out = NamedTupleVariable(items, vt.tuple_cls) if isinstance(vt, NamedTupleVariable) \
            else TupleVariable(items)
        memo[id(vt)] = out
        return out
    if isinstance(vt, ConstDictVariable) and type(vt) in (
            ConstDictVariable, InstanceDictVariable) and vt.dict_cls is dict:
        copied_dict = ConstDictVariable({})
        memo[id(vt)] = copied_dict
        copied_dict.items = {k: _copy(tx, v, memo) for k, v in vt.items.items()}
        return copied_dict
    if isinstance(vt, UserDefinedObjectVariable):
        return _copy_object(tx, vt, memo)
    if isinstance(vt, NNModuleVariable):
        raise Unsupported("copy.deepcopy of an nn.Module")
    raise Unsupported(f"copy.deepcopy of {vt}")


def _copy_object(tx, vt: UserDefinedObjectVariable,
                 memo: dict[int, VariableTracker]) -> VariableTracker:
    cls = type(vt.value)
    if not copies_by_default(cls):
        raise Unsupported(f"copy.deepcopy of a {cls.__qualname__} (its class customises "
                          "copying)")
    source = None if vt.fresh else vt.source
    assert vt.fresh or source is not None   # (an object from outside is read through one)
    out = UserDefinedObjectVariable(object.__new__(cls), fresh=True, class_source=(
        vt.class_source if source is None else AttrSource(source, "__class__")))
    memo[id(vt)] = out
    if source is None:
        state = dict(vt.pending)
    else:
        if vt.pending:  # writes not yet replayed: the copy would need them merged in
            raise Unsupported(f"copy.deepcopy of a {cls.__qualname__} with pending writes")
        real = vt.value.__dict__
        dict_src = AttrSource(source, "__dict__")
        tx.guards.DICT_KEYS(dict_src, real)  # the copy has exactly these attributes
        state = {k: tx.wrap_nested(v, GetItemSource(dict_src, k)) for k, v in real.items()}
    out.pending = {k: _copy(tx, v, memo) for k, v in state.items()}
    return out


def _shallow_copy(tx, x: VariableTracker) -> VariableTracker | None:
    """``copy.copy(x)``: a new container (or object made while tracing) holding the same
    trackers; an immutable value is its own copy. None for anything else: ``copy.copy``
    itself is inlined then (a class's ``__copy__``, ``__reduce_ex__``...)."""
    x = realize(tx, x)
    if isinstance(x, ConstantVariable) and isinstance(x.value, (tuple, frozenset, str,
                                                                bytes, int, float, bool)):
        return x
    if isinstance(x, NamedTupleVariable):
        return NamedTupleVariable(list(x.items), x.tuple_cls)
    if type(x) is TupleVariable:
        return x
    if type(x) is ListVariable:
        return ListVariable(list(x.items))
    if type(x) is ConstDictVariable and x.dict_cls in (dict, collections.OrderedDict,
                                                       collections.defaultdict):
        return ConstDictVariable(dict(x.items), dict_cls=x.dict_cls,
                                 default_factory=x.default_factory)
    if type(x) is SetVariable:
        return SetVariable(x.unpack(None))
    if isinstance(x, UserDefinedObjectVariable) and copies_by_default(type(x.value)) and \
            inspect.getattr_static(type(x.value), "__copy__", None) is None:
        if not x.fresh:
            return None  # (read through __reduce_ex__ by copy.copy, inlined)
        out = UserDefinedObjectVariable(object.__new__(type(x.value)), fresh=True,
                                        class_source=x.class_source)
        out.pending = dict(x.pending)
        return out
    return None


def _id(tx, obj: VariableTracker) -> VariableTracker:
    """``id(obj)`` of an object reached through a source: its real id, a constant the graph
    may use while the guard ``source is <that object>`` holds. ``None``/``True``/``False``
    are singletons. An object made while tracing has no id yet (the real one is made after
    the graph): a graph break, never a number that could leak out wrong."""
    obj = realize(tx, obj)
    if isinstance(obj, ConstantVariable) and obj.value in (None, True, False) and \
            type(obj.value) in (type(None), bool):
        return ConstantVariable(id(obj.value))
    value = _identity(obj)
    if value is None or obj.source is None or getattr(obj, "fresh", False):
        raise Unsupported(f"id() of {obj} (made while tracing, or not known by identity)")
    tx.guards.ID_MATCH(obj.source, value)
    return ConstantVariable(id(value))


def _identity(vt: VariableTracker):
    """The real object a sourced tracker stands for, where the tracker keeps it."""
    if isinstance(vt, (UserDefinedObjectVariable, NNModuleVariable, UserDefinedClassVariable)):
        return vt.value
    if isinstance(vt, (UserFunctionVariable, BuiltinVariable)):
        return vt.fn
    return None


_BUILTIN_HANDLERS[copy.deepcopy] = _deepcopy
_BUILTIN_HANDLERS[copy.copy] = _shallow_copy
_INLINED_WHEN_UNHANDLED.add(copy.copy)
_BUILTIN_HANDLERS[id] = _id
del _UNSUPPORTED_BUILTINS[id]

__all__ = ['copies_by_default']
