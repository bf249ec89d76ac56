"""Variable trackers for user-defined classes and objects, and for Python builtins.

User classes and objects are read attribute by attribute (and guarded); writes wait in
``pending``. Python builtins are handled one by one (``len``, ``isinstance``, ``range``, ...),
and the rest become graph breaks. The two live together because they call each other: the
builtin handlers inspect user objects, and user classes construct through builtins
(``dict(...)``, ``object.__init__``).

Mirrors: torch/_dynamo/variables/user_defined.py, builtin.py.
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import dataclasses
import enum
import functools
import importlib.metadata
import importlib.util
import inspect
import logging
import operator
import sys
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch

from .. import polyfills, trace_rules
from ..exc import TracedException, Unsupported
from ..source import (
    AttrSource,
    DictStorageSource,
    GetItemSource,
    ObjectSource,
    SequenceStorageSource,
    Source,
    WeakRefCallSource,
)
from .base import LATE_BOUND, BoundMethodVariable, VariableTracker, is_constant_value
from .containers import (
    AttributeDictVariable,
    BaseListVariable,
    ConstantVariable,
    ConstDictVariable,
    DequeVariable,
    ListVariable,
    NamedTupleVariable,
    RangeVariable,
    SetVariable,
    SizeVariable,
    SliceVariable,
    TupleVariable,
    plain_tuple_subclass,
    wrap_constant_result,
)
from .ctx_manager import (
    GradModeVariable,
    KeptGradModeVariable,
    RegionMethodVariable,
    _autocast,
    is_region_class,
)
from .functions import (
    CachedFunctionVariable,
    NestedUserFunctionVariable,
    UserFunctionVariable,
    UserMethodVariable,
    partial_of,
)
from .iter import (
    EnumerateVariable,
    FilterVariable,
    IteratorVariable,
    ListIteratorVariable,
    MapVariable,
    ZipVariable,
)
from .lazy import realize
from .misc import DELETED, PythonModuleVariable
from .nn_module import NNModuleVariable
from .tensor import SymIntVariable, TensorMethodVariable, TensorVariable
from .torch import _INLINED_TORCH_MODULES, TorchFunctionVariable, in_torch

# --- user-defined classes and objects ----------------------------------------------------------


class SuperVariable(VariableTracker):
    """``super()`` / ``super(cls, obj)``: attribute lookup starts after ``cls`` in the MRO."""

    def __init__(self, cls: type, obj: VariableTracker):
        self.cls, self.obj = cls, obj

    def var_getattr(self, tx, name):
        obj = self.obj
        owner = obj.value if isinstance(obj, UserDefinedClassVariable) else None
        mro = (owner or _python_type(obj)).__mro__
        if owner is not None and self.cls not in mro:  # in a metaclass's method
            mro = type(owner).__mro__
        for klass in mro[mro.index(self.cls) + 1:]:
            if name not in klass.__dict__:
                continue
            attr = klass.__dict__[name]
            if klass is tuple and name == "__new__":   # a tuple subclass's own __new__
                return BuiltinVariable(tuple.__new__)
            if klass is type and name == "__call__" and owner is not None:
                # a metaclass's ``super().__call__(*args)``: the instance made as type does
                return _TypeCall(obj)
            if isinstance(attr, staticmethod):
                return tx.wrap_nested(attr.__func__, None)
            if isinstance(attr, classmethod):
                cls_vt = obj if owner is not None else UserDefinedClassVariable(
                    _python_type(obj))
                if attr is _FUNCTION_APPLY:  # an override of ``apply`` calling its base
                    return _autograd_function_apply(cls_vt.value)
                return UserMethodVariable(attr.__func__, cls_vt)
            if attr is torch.nn.Module.__call__ and isinstance(obj, NNModuleVariable):
                return _ModuleCall(obj)  # ``super().__call__(...)`` of a module
            if attr is torch.nn.Module.__init__ and isinstance(obj, NNModuleVariable) and \
                    obj.fresh:
                return BuiltinVariable(_object_init)  # (done when the object was made)
            if isinstance(attr, types.FunctionType):
                return UserMethodVariable(attr, obj)
            if klass is object and name == "__init__":
                return BuiltinVariable(_object_init)
            if klass is object and name == "__new__":
                return BuiltinVariable(object.__new__)   # a ``__new__`` that defers to object
            if klass is object and name in _OBJECT_SLOTS and isinstance(
                    obj, UserDefinedObjectVariable):
                return _ObjectSlotVariable(obj, name)  # a custom hook's ``super()`` call
            if klass is object and name == "__setattr__" and isinstance(obj, ConstDictVariable):
                return _BoundContainerMethod(self, name)   # ... in a dict subclass's hook
            if klass in (dict, collections.OrderedDict) and name in _DICT_READS and \
                    isinstance(obj, UserDefinedObjectVariable) and obj.source is not None \
                    and isinstance(obj.value, dict):
                # a dict subclass's override reading its own storage (ACT2FN's
                # ``super().__getitem__``): the stored items, read and guarded through
                # ``dict.items`` -- never through the override itself
                storage = tx.wrap_nested(dict(dict.items(obj.value)),
                                         DictStorageSource(obj.source))
                return BoundMethodVariable(storage, name)
            if klass in (tuple, list) and isinstance(obj, UserDefinedObjectVariable) and \
                    obj.source is not None and isinstance(obj.value, klass) and \
                    name in ("__getitem__", "__len__", "__iter__", "__contains__", "index",
                             "count"):
                # a tuple or list subclass's override reading its own storage (e3nn's
                # ``Irreps.__getitem__``): the stored items, read and guarded through
                # ``tuple.__getitem__(obj, slice(None))`` -- never through the override
                storage = tx.wrap_nested(klass.__getitem__(obj.value, slice(None)),
                                         SequenceStorageSource(obj.source, klass.__name__))
                return BoundMethodVariable(storage, name)
            if callable(attr) and (klass is dict and isinstance(obj, ConstDictVariable) or
                                   klass in (list, tuple) and isinstance(obj, BaseListVariable)):
                # the container's own method on a tracker of that container (a dict subclass
                # whose override calls ``super().get``)
                return _BoundContainerMethod(self, name)
            break
        raise Unsupported(f"super().{name} (found in a C class, or not found)")

    def children(self):
        return [self.obj]

    def reconstruct(self, rc):
        return super(self.cls, rc(self.obj))  # noqa: UP008 (a super object, rebuilt)


class _TypeCall(VariableTracker):
    """``type.__call__`` bound to a class: builds an instance, skipping the metaclass's
    own ``__call__`` (which is where it was reached from)."""

    def __init__(self, cls_vt: UserDefinedClassVariable):
        self.cls_vt = cls_vt

    def call_function(self, tx, args, kwargs):
        return self.cls_vt.construct(tx, args, kwargs)


class _ModuleCall(VariableTracker):
    """``nn.Module.__call__`` reached past a class's own override (``super().__call__``)."""

    def __init__(self, module: NNModuleVariable):
        self.module = module

    def call_function(self, tx, args, kwargs):
        return self.module.call_forward(tx, args, kwargs)

    def children(self):
        return [self.module]

    def reconstruct(self, rc):
        return functools.partial(torch.nn.Module.__call__, rc(self.module))


def _object_init(*args, **kwargs):
    """``object.__init__``: nothing to do."""


_OBJECT_SLOTS = ("__getattribute__", "__setattr__", "__delattr__")
_DICT_READS = ("__getitem__", "get", "__contains__")
_ABSENT = object()


class _ObjectSlotVariable(VariableTracker):
    """``super().__getattribute__`` / ``__setattr__`` / ``__delattr__`` reaching ``object``
    from a class's own attribute hook (transformers' configs map names through
    ``attribute_map`` so): the generic rule, applied to the tracker."""

    def __init__(self, obj: UserDefinedObjectVariable, name: str):
        self.obj, self.name = obj, name

    def call_function(self, tx, args, kwargs):
        if kwargs or not args or not args[0].is_python_constant():
            raise Unsupported(f"object.{self.name} with a non-constant name")
        attr = args[0].as_python_constant()
        if self.name == "__getattribute__":
            return self.obj.generic_getattr(tx, attr)
        if self.name == "__setattr__":
            self.obj.generic_setattr(tx, attr, args[1], hooked=True)
        else:
            self.obj.delete_attr(tx, attr, hooked=True)
        return ConstantVariable(None)

    def children(self):
        return [self.obj]


def _python_hook(cls: type, name: str) -> types.FunctionType | None:
    """The class's own attribute hook (``__getattribute__``, ``__setattr__``...) when it is
    written in Python, else None (``object``'s)."""
    hook = inspect.getattr_static(cls, name, None)
    return hook if isinstance(hook, types.FunctionType) else None


class _BoundContainerMethod(VariableTracker):
    """``super().get`` where ``get`` is the builtin container's own method."""

    def __init__(self, sup: SuperVariable, name: str):
        self.sup, self.name = sup, name

    def call_function(self, tx, args, kwargs):
        obj = self.sup.obj
        if self.name == "__setattr__" and isinstance(obj, ConstDictVariable):
            return _dict_generic_setattr(obj, tx, args, kwargs)  # (from the class's hook)
        return type(obj).call_method(obj, tx, self.name, args, kwargs)

    def children(self):
        return [self.sup]

    def reconstruct(self, rc):
        return getattr(rc(self.sup), self.name)


def _dict_generic_setattr(obj, tx, args: list, kwargs: dict) -> VariableTracker:
    """``object.__setattr__(d, name, v)`` / ``super().__setattr__(name, v)`` on a dict
    subclass: object's own rule, not the class's hook (frozendict's ``__new__`` sets
    ``_hash`` so, its ``__setattr__`` raising)."""
    if kwargs or len(args) != 2 or not args[0].is_python_constant():
        raise Unsupported("object.__setattr__ on a dict subclass with a non-constant name")
    obj.store_attr(tx, args[0].as_python_constant(), args[1], hooked=True)
    return ConstantVariable(None)


def _marker_exception_class(cls: type) -> bool:
    """An exception class whose own classes (those not builtin) define no function: it is
    its builtin base's construction, ``str`` and ``args`` under another name."""
    if not issubclass(cls, BaseException):
        return False
    return all(k.__module__ == "builtins" or not any(
        isinstance(v, (types.FunctionType, staticmethod, classmethod, property))
        for v in vars(k).values()) for k in cls.__mro__)


def _is_sequence(vt: VariableTracker) -> bool:
    """What ``operator.concat`` accepts: a value whose type has ``__getitem__``, not a
    mapping's (CPython's ``PySequence_Check``)."""
    kind = _python_type(vt)
    return hasattr(kind, "__getitem__") and not issubclass(kind, dict)


def _python_type(vt: VariableTracker) -> type:
    if isinstance(vt, (UserDefinedObjectVariable, NNModuleVariable)):
        return type(vt.value)
    return vt.python_type()


class UserDefinedClassVariable(VariableTracker):
    """A class. Writes to its attributes (class-level settings: ``cls._global_value = v``
    in a classmethod) wait in ``pending``, read back by the rest of the trace, and are
    replayed on the class after the graph -- through its source, so only for a class that
    has one (one tracker per class: see ``VariableBuilder.wrap``)."""
    fresh = False

    def __init__(self, cls: type, source: Source | None = None):
        self.value, self.source = cls, source
        self.pending: dict[str, Any] = {}   # a tracker, or DELETED

    def is_python_constant(self):
        return True  # a class is known by identity (guarded where it was read)

    def as_python_constant(self):
        return self.value

    def python_type(self):
        return type(self.value)

    def as_proxy(self):
        return self.value

    def example(self):
        return self.value

    def var_getattr(self, tx, name):
        if name in self.pending:
            if self.pending[name] is DELETED:
                raise TracedException(AttributeError(
                    f"type object {self.value.__name__!r} has no attribute {name!r}"))
            return self.pending[name]
        if name == "apply" and issubclass(self.value, torch.autograd.Function) and \
                inspect.getattr_static(self.value, "apply") is _FUNCTION_APPLY:
            return _autograd_function_apply(self.value)
        try:
            attr = inspect.getattr_static(self.value, name)
        except AttributeError as e:
            if self.source is not None:
                guard_hasattr(tx, self, name)
            raise TracedException(e) from None
        if isinstance(attr, staticmethod):
            return tx.wrap_nested(attr.__func__, None)
        if isinstance(attr, classmethod):
            return UserMethodVariable(attr.__func__, self)
        if name in ("__enter__", "__exit__") and is_region_class(self.value):
            return RegionMethodVariable(self.value, name)   # ``type(cm).__enter__(cm)``
        source = AttrSource(self.source, name) if self.source is not None else None
        return tx.wrap_nested(getattr(self.value, name), source)

    def call_function(self, tx, args, kwargs):
        meta_call = _metaclass_call(self.value)
        if meta_call is not None:
            # ``dist.Normal(loc, scale)`` of pyro (DistributionMeta): the metaclass's own
            # ``__call__``, inlined; its ``super().__call__`` reaches :meth:`construct`
            return tx.inline_user_function(meta_call, [self, *args], kwargs)
        return self.construct(tx, args, kwargs)

    def construct(self, tx, args, kwargs):
        """``cls(*args)`` as ``type.__call__`` makes it."""
        cls = self.value
        if cls in (torch.no_grad, torch.enable_grad) and not args and not kwargs:
            return GradModeVariable(cls)
        if cls is torch.inference_mode:
            return _inference_mode(tx, args, kwargs)
        if cls is torch.set_grad_enabled:
            return _set_grad_enabled(tx, args, kwargs)
        if cls is types.MethodType and len(args) == 2 and not kwargs:
            return _method_type(tx, *args)
        if cls is weakref.ReferenceType and len(args) == 1 and not kwargs:
            return WeakRefVariable(tx, args[0])
        if isinstance(cls, enum.EnumMeta) and len(args) == 1 and not kwargs and \
                args[0].is_python_constant():
            try:  # ``Mode("a")``: a lookup among the members, fixed with the class
                return ConstantVariable(cls(args[0].as_python_constant()))
            except ValueError as e:
                raise TracedException(e) from None
        numpy = sys.modules.get("numpy")
        if numpy is not None and issubclass(cls, numpy.generic) and not kwargs and \
                len(args) <= 1:  # ``np.int64(n)``: an immutable scalar, a constant
            value = args[0].specialize(tx) if args and isinstance(args[0], SymIntVariable) \
                else args[0].as_python_constant() if args else None
            return ConstantVariable(cls(value) if args else cls())
        if issubclass(cls, torch.autocast):   # torch.amp / torch.cpu.amp / torch.cuda.amp
            return _autocast(tx, cls, args, kwargs)
        if cls is torch.device and all(
                a.is_python_constant() for a in [*args, *kwargs.values()]):
            return ConstantVariable(torch.device(*[a.as_python_constant() for a in args],
                                                 **{k: v.as_python_constant()
                                                    for k, v in kwargs.items()}))
        if cls is torch.Size:
            return SizeVariable(tx.unpack(args[0]) if args else [])
        if cls is torch.Tensor or isinstance(cls, _LEGACY_TENSOR_TYPE):
            return _legacy_tensor(tx, cls, args, kwargs)
        if cls is torch.autograd.profiler.record_function:
            # a profiler range (every optimizer step opens one): a graph runs as one unit,
            # so the range is not recorded inside it -- as PyTorch's Dynamo treats profiler
            # context managers, a nullcontext
            return tx.call(tx.wrap_nested(contextlib.nullcontext, None), [], {})
        if trace_rules.is_pure_class(cls) and all(
                a.is_python_constant() and trace_rules.immutable_constant(
                    a.as_python_constant()) for a in [*args, *kwargs.values()]):
            # ``torch.finfo(dtype)``, ``np.iinfo(np.int16)``, ``np.dtype("float")``: an
            # immutable description computed from constants alone, a constant itself
            try:
                return ConstantVariable(cls(*[a.as_python_constant() for a in args],
                                            **{k: v.as_python_constant()
                                               for k, v in kwargs.items()}))
            except Exception as e:  # ``np.finfo(int)``: what CPython raises
                raise TracedException(e) from None
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module):
            if _user_module_class(cls) or cls is torch.nn.Sequential:
                return _new_user_module(tx, cls, args, kwargs)
            return _new_stateless_module(tx, cls, args, kwargs)
        if dataclasses.is_dataclass(cls) and not _plain_python_class(cls) and not any(
                isinstance(v, UserDefinedObjectVariable) and v.fresh for v in args):
            # a dataclass that is also a dict (transformers' ModelOutput): read from its
            # constructor's arguments; a plain one is built like any class (below), its
            # generated __init__ and __post_init__ inlined, its fields writable
            return DataclassVariable(cls, args, kwargs)
        if _plain_python_class(cls):
            # ``Cls(...)``: a placeholder instance (object.__new__, no side effect) whose
            # __init__ is inlined; its attributes live in the tracker until rebuilt
            obj = UserDefinedObjectVariable(object.__new__(cls), fresh=True,
                                            class_source=self.source)
            init = inspect.getattr_static(cls, "__init__")
            if isinstance(init, types.FunctionType):
                tx.inline_user_function(init, [obj, *args], kwargs)
            elif args or kwargs:
                raise Unsupported(f"{cls.__qualname__}() takes no arguments")
            return obj
        if issubclass(cls, tuple) and hasattr(cls, "_fields"):
            return _new_namedtuple(tx, self, args, kwargs)
        if plain_tuple_subclass(cls):
            # ``Shape((4, 5))``: tuple.__new__ makes it from an iterable; a ``__new__``
            # written in Python is inlined (its ``super().__new__(cls, items)`` is tuple's)
            if cls.__new__ is tuple.__new__:
                if kwargs or len(args) > 1:
                    raise TracedException(TypeError(
                        f"{cls.__name__} expected at most 1 argument, got {len(args)}"))
                return _tuple_new(tx, self, *args)
            if isinstance(cls.__new__, types.FunctionType):
                src = AttrSource(self.source, "__new__") if self.source is not None else None
                if src is not None:
                    tx.guards.ID_MATCH(src, cls.__new__)
                made = tx.inline_user_function(cls.__new__, [self, *args], kwargs,
                                               fn_source=src)
                if made.python_type() is not cls:
                    raise Unsupported(f"{cls.__qualname__}.__new__ returned a "
                                      f"{made.python_type().__name__}")
                return made
        if cls in (collections.OrderedDict, collections.defaultdict):
            factory = None
            if cls is collections.defaultdict:
                factory, args = (args[0] if args else ConstantVariable(None)), args[1:]
                if factory.is_python_constant() and factory.as_python_constant() is None:
                    factory = None
            d = _dict(tx, *args, **kwargs)
            return ConstDictVariable(d.items, dict_cls=cls, default_factory=factory)
        if issubclass(cls, dict) and reads_like_dict(cls) and isinstance(
                inspect.getattr_static(cls, "__new__"), staticmethod) and isinstance(
                cls.__new__, types.FunctionType):
            # a dict subclass with a ``__new__`` of its own (frozendict: ``dict.__new__``,
            # ``dict.__init__``, a cached hash set to None): both inlined, as Python calls them
            made = tx.inline_user_function(cls.__new__, [self, *args], kwargs)
            if isinstance(made, ConstDictVariable) and made.dict_cls is cls:
                init = inspect.getattr_static(cls, "__init__")
                if isinstance(init, types.FunctionType):
                    tx.inline_user_function(init, [made, *args], kwargs)
                elif init is dict.__init__:
                    _dict_init(tx, made, *args, **kwargs)
                else:
                    raise Unsupported(f"constructing an instance of {cls.__qualname__} (its "
                                      "__init__ is not written in Python)")
            return made
        if issubclass(cls, dict) and reads_like_dict(cls) and cls.__new__ is dict.__new__:
            # ``Registry(...)`` of a dict subclass that adds methods (transformers' configs
            # and registries, ``collections.Counter``): a dict that keeps its class, filled
            # by dict's own __init__, or by the class's, inlined
            init = inspect.getattr_static(cls, "__init__")
            if init in (dict.__init__, collections.OrderedDict.__init__):
                return ConstDictVariable(_dict(tx, *args, **kwargs).items, dict_cls=cls)
            if isinstance(init, types.FunctionType):
                made = ConstDictVariable({}, dict_cls=cls)
                tx.inline_user_function(init, [made, *args], kwargs)
                return made
        if _marker_exception_class(cls) and all(
                a.is_python_constant() for a in [*args, *kwargs.values()]):
            # ``raise ConfigError("...")`` of a library's own exception class that only
            # names a kind (``class FrozenInstanceError(AttributeError): pass``): made now,
            # as a builtin exception is -- its construction runs none of the user's code
            try:
                return ConstantVariable(cls(*[a.as_python_constant() for a in args],
                                            **{k: v.as_python_constant()
                                               for k, v in kwargs.items()}))
            except Exception as e:
                raise TracedException(e) from None
        raise Unsupported(f"constructing an instance of {cls.__qualname__}")

    def unpack(self, tx):
        if isinstance(self.value, enum.EnumMeta):  # ``list(Mode)``: its members
            return [ConstantVariable(member) for member in self.value]
        return super().unpack(tx)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        if self.source is None or isinstance(self.source, ObjectSource) or \
                type(self.value) is not type:
            raise Unsupported(f"assignment to {self.value.__qualname__}.{name}: a class "
                              "without a source (or with a metaclass) to replay it on")
        if hasattr(type(inspect.getattr_static(self.value, name, None)), "__set__") and \
                not isinstance(inspect.getattr_static(self.value, name, None),
                               types.FunctionType):
            raise Unsupported(f"assignment to {self.value.__qualname__}.{name} (a descriptor)")
        tx.record_side_effect(self)
        self.pending[name] = value

    def children(self):
        return [v for v in self.pending.values() if isinstance(v, VariableTracker)]

    def reconstruct(self, rc):
        return self.value

    def __repr__(self):
        return f"UserDefinedClassVariable({self.value.__qualname__})"


_LEGACY_TENSOR_TYPE = type(torch.FloatTensor)
"""The metaclass of ``torch.FloatTensor``, ``torch.LongTensor``...: legacy tensor types."""


def _legacy_tensor(tx, cls: Any, args: list, kwargs: dict) -> VariableTracker:
    """PyTorch's legacy constructors, ``torch.Tensor(data)`` and ``torch.FloatTensor(...)``:
    a sequence of numbers is ``torch.tensor`` of it in the class's dtype (``torch.Tensor``'s
    is the default dtype, read -- and guarded -- as the call runs: ``torch.Tensor([4])`` is
    a float tensor where ``torch.tensor([4])`` is an integer one), sizes make an empty
    tensor of that shape, nothing an empty one. A tensor argument (an alias) is a break."""
    if cls is torch.Tensor:
        dtype = TorchFunctionVariable(torch.get_default_dtype).call_function(tx, [], {})
    else:
        dtype = ConstantVariable(cls.dtype)
    device = kwargs.pop("device", None)
    if kwargs:
        raise Unsupported(f"torch.{cls.__name__}() with keyword arguments {sorted(kwargs)}")
    extra = {"dtype": dtype, **({"device": device} if device is not None else {})}
    if len(args) == 1 and isinstance(args[0], BaseListVariable) and \
            not isinstance(args[0], SizeVariable):
        return TorchFunctionVariable(torch.tensor).call_function(tx, [args[0]], extra)
    if all(isinstance(a, SymIntVariable) or a.is_python_constant() and
           type(a.as_python_constant()) is int for a in args) or \
            len(args) == 1 and isinstance(args[0], SizeVariable):
        sizes = list(args) if not args or not isinstance(args[0], SizeVariable) else \
            tx.unpack(args[0])
        return TorchFunctionVariable(torch.empty).call_function(
            tx, [TupleVariable(sizes) if sizes else ConstantVariable(0)], extra)
    raise Unsupported(f"torch.{cls.__name__}() of {', '.join(type(a).__name__ for a in args)}"
                      " (the legacy constructor: only a sequence of numbers, or sizes)")


def _inference_mode(tx, args: list, kwargs: dict) -> VariableTracker:
    """``with torch.inference_mode():`` inside the function: for the values it computes, a
    region without autograd, as ``torch.no_grad()`` is, and ``is_inference_mode_enabled()``
    true inside. What differs is a flag: eager makes *inference tensors* there, the graph
    makes ordinary ones, which eager would refuse to save for backward later -- so where
    eager raises, the compiled function runs. (PyTorch's Dynamo instead calls the
    inference-mode switches from the graph.) ``inference_mode(False)`` is a break."""
    mode = args[0] if args else kwargs.get("mode", ConstantVariable(True))
    if len(args) > 1 or set(kwargs) - {"mode"} or not mode.is_python_constant():
        raise Unsupported("torch.inference_mode with arguments that are not one constant mode")
    if not mode.as_python_constant():
        raise Unsupported("torch.inference_mode(False) inside the compiled function")
    return GradModeVariable(torch.inference_mode, enabled=False)


def _set_grad_enabled(tx, args: list, kwargs: dict) -> VariableTracker:
    """``with torch.set_grad_enabled(mode):`` -- a grad-mode region like ``torch.no_grad()``.
    The object sets the mode as it is made; entered at once (the next instruction is the
    with-block's), that is the region. Called on its own as a statement (its object
    dropped: the next instruction is ``POP_TOP``) it changes the mode for whatever runs
    next, in the graph and after it (``Optimizer.step``'s ``_use_grad`` turns gradients
    off, steps, and turns them back on this way): :meth:`InstructionTranslator.set_grad_mode`.
    Kept in any other way (a variable, an argument: ``ExitStack.enter_context``) it sets the
    mode as it is made, as a statement would, and is a :class:`KeptGradModeVariable`."""
    mode = (args[0] if args else kwargs.get("mode"))
    if mode is None or not mode.is_python_constant():
        raise Unsupported("torch.set_grad_enabled with a mode that is not a constant")
    mode = bool(mode.as_python_constant())
    frame = tx.frames[-1]
    following = frame.instructions[frame.ip].opname
    if following == "POP_TOP":
        tx.set_grad_mode(mode)
        return ConstantVariable(None)
    if following != "BEFORE_WITH":   # kept: the mode is set now, its exit puts it back
        prev = tx.grad_enabled
        tx.set_grad_mode(mode)
        return KeptGradModeVariable(mode, prev)
    return GradModeVariable(torch.set_grad_enabled, mode)


def _method_type(tx, fn: VariableTracker, obj: VariableTracker) -> VariableTracker:
    """``types.MethodType(fn, obj)``: ``fn`` bound to ``obj``, called with it first
    (``contextlib.ExitStack`` keeps ``MethodType(type(cm).__exit__, cm)`` for its exit;
    libraries bind functions to instances so). A function written in Python, or the
    ``__enter__``/``__exit__`` of a region class; anything else is a break."""
    if isinstance(fn, UserFunctionVariable):
        return UserMethodVariable(fn.fn, obj, fn_source=fn.source)
    if isinstance(fn, NestedUserFunctionVariable):
        return BoundFunctionVariable(fn, obj)
    if isinstance(fn, RegionMethodVariable):
        return fn.bind(obj)
    raise Unsupported(f"types.MethodType of {fn}")


class BoundFunctionVariable(VariableTracker):
    """``types.MethodType(f, obj)`` of a function made while tracing."""

    def __init__(self, fn: VariableTracker, obj: VariableTracker):
        self.fn, self.obj = fn, obj

    def python_type(self):
        return types.MethodType

    def call_function(self, tx, args, kwargs):
        return tx.call(self.fn, [self.obj, *args], kwargs)

    def var_getattr(self, tx, name):
        if name == "__func__":
            return self.fn
        if name == "__self__":
            return self.obj
        return tx.load_attr(self.fn, name)   # (a method reads other attributes so)

    def children(self):
        return [self.fn, self.obj]

    def reconstruct(self, rc):
        return types.MethodType(rc(self.fn), rc(self.obj))


class WeakRefVariable(VariableTracker):
    """``weakref.ref(obj)`` made while tracing (a module keeping ``weakref.ref(self)`` for
    its hooks): calling it gives ``obj`` -- alive, as the traced code holds it. Rebuilt as
    a real reference to the rebuilt object, which is dead after the call if nothing else
    keeps it, as in eager. A callback is not modelled (a break)."""

    def __init__(self, tx, obj: VariableTracker):
        kind = obj.python_type()
        if kind.__weakrefoffset__ == 0:   # int, tuple, a class with __slots__ and no slot
            raise TracedException(TypeError(
                f"cannot create weak reference to {kind.__name__!r} object"))
        self.obj = obj

    def python_type(self):
        return weakref.ReferenceType

    def call_function(self, tx, args, kwargs):
        if args or kwargs:
            raise TracedException(TypeError("weakref.ref() takes no arguments"))
        return self.obj

    def children(self):
        return [self.obj]

    def reconstruct(self, rc):
        return weakref.ref(rc(self.obj))


def _user_module_class(cls: type) -> bool:
    """A module class whose own ``__init__`` is written outside torch, on top of
    ``nn.Module`` alone (no torch.nn layer, whose ``__init__`` makes parameters, below it),
    with Module's ``__new__`` and ``__setattr__`` and a plain metaclass."""
    if not _builds_like_type(cls) or cls.__setattr__ is not torch.nn.Module.__setattr__:
        return False
    builders = [k for k in cls.__mro__ if "__init__" in vars(k) or "__new__" in vars(k)]
    return any(not in_torch(k.__module__) for k in builders if k is not object) and all(
        k in (object, torch.nn.Module) or not in_torch(k.__module__) for k in builders) and \
        "__new__" not in {n for k in builders if k not in (object,) for n in vars(k)}


def _new_user_module(tx, cls: type, args: list, kwargs: dict) -> VariableTracker:
    """``Wrap(self.func)(x)``: a module of the user's own class built inside ``forward``
    (torchdiffeq wraps the function it integrates so; e3nn builds ``SphericalHarmonics``).
    The object is made as ``nn.Module.__init__`` makes it (empty tables, no user code run)
    and the class's ``__init__`` is inlined on it: its attribute writes stay in the
    tracker, read by the ``forward`` that is inlined next, and a new module is built from
    them after the graph if it escapes. A parameter made there is a break (its draw, or the
    tensor, would be made once, not per call)."""
    module: torch.nn.Module = object.__new__(cls)
    torch.nn.Module.__init__(module)
    made = NNModuleVariable(module, None, fresh=True)
    init = inspect.getattr_static(cls, "__init__")
    if isinstance(init, types.FunctionType):
        tx.inline_user_function(init, [made, *args], kwargs)
    return made


def _new_stateless_module(tx, cls: type, args: list, kwargs: dict) -> VariableTracker:
    """``nn.MaxPool1d(kernel_size=k)(x)``, ``ACT2FN["silu"]`` (transformers'
    ``SiLUActivation()``) inside ``forward``: a module whose ``__init__`` is torch.nn's own,
    built from Python constants and holding no parameters, buffers or submodules, is built
    now, for real -- that ``__init__`` only stores the arguments -- and called like any
    module (``forward`` inlined). Every call of the compiled code would build the same one;
    if it escapes the graph it is built again from the same arguments. A module with state
    (``nn.Linear`` draws its initial weights), or with an ``__init__`` (or ``__new__``, or
    metaclass) of its own that could do anything, is a graph break.
    (PyTorch's Dynamo traces ``__init__`` of any module class instead.)"""
    builders = [k for k in cls.__mro__ if "__init__" in vars(k) or "__new__" in vars(k)]
    if type(cls) is not type or not all(k is object or k.__module__.startswith(
            "torch.nn.modules.") for k in builders):
        raise Unsupported(f"constructing an instance of {cls.__qualname__} (its __init__ is "
                          "not torch.nn's)")
    if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
        raise Unsupported(f"constructing {cls.__qualname__} from values that are not Python "
                          "constants")
    with torch.random.fork_rng(devices=[]):  # a draw would be undone, and refused below
        module = cls(*[a.as_python_constant() for a in args],
                     **{k: v.as_python_constant() for k, v in kwargs.items()})
    if module._parameters or module._buffers or module._modules:
        raise Unsupported(f"constructing {cls.__qualname__} inside the compiled region (it "
                          "has parameters, buffers or submodules)")
    return NNModuleVariable(module, None, constructed=(cls, list(args), dict(kwargs)))


def _python_descriptor_method(static: Any, name: str) -> types.FunctionType | None:
    """``type(static).__get__``/``__set__``/``__delete__`` when ``static`` (a class attribute)
    is an instance of a descriptor class that writes that method in Python; None for
    functions, properties and the C descriptors handled on their own."""
    if static is None or isinstance(static, (types.FunctionType, property, staticmethod,
                                             classmethod, type)):
        return None
    method = inspect.getattr_static(type(static), name, None)
    return method if isinstance(method, types.FunctionType) else None


def _is_slot(cls: type, name: str) -> bool:
    """Is ``name`` a ``__slots__`` member of ``cls`` (a plain storage descriptor)?"""
    return isinstance(inspect.getattr_static(cls, name, None), types.MemberDescriptorType)


def _slots_only(cls: type) -> bool:
    """Instances keep their attributes in ``__slots__`` only, all declared in Python
    (a ``dataclass(slots=True)``: torch's pytree ``TreeSpec``)."""
    return all("__slots__" in vars(k) for k in cls.__mro__[:-1])


def _metaclass_call(cls: Any) -> types.FunctionType | None:
    """The ``__call__`` a library's metaclass writes in Python (pyro's DistributionMeta
    coerces its arguments there), or None: calling the class is then ``type.__call__``."""
    meta = type(cls)
    if not isinstance(cls, type) or meta.__module__ in sys.stdlib_module_names or \
            in_torch(meta.__module__):
        return None
    call = inspect.getattr_static(meta, "__call__")
    return call if isinstance(call, types.FunctionType) else None


def _builds_like_type(cls: type) -> bool:
    """Whether calling ``cls`` makes its instance as ``type.__call__`` does: a metaclass
    (ABCMeta, a library's own) with no ``__call__``, or one in Python that is inlined
    first and reaches ``type.__call__`` through ``super()``."""
    return isinstance(cls, type) and (
        inspect.getattr_static(type(cls), "__call__") is type.__call__ or
        _metaclass_call(cls) is not None)


def reads_like_dict(cls: type) -> bool:
    """A dict subclass whose reads are dict's own (its items are its contents): tracked as a
    dict that keeps its class; methods it adds in Python are inlined."""
    return all(inspect.getattr_static(cls, m) in (getattr(dict, m), getattr(
        collections.OrderedDict, m)) for m in (
        "__getitem__", "__contains__", "__iter__", "__len__", "keys", "values", "items")) \
        or cls.__module__ == "collections"


def _plain_python_class(cls: type) -> bool:
    """A class whose instances we can build while tracing: defined in Python, made by
    ``object.__new__``, attributes in ``__dict__``, any ``__setattr__`` written in Python,
    not torch (but for the parts of torch traced like user code)."""
    if not _builds_like_type(cls):
        return False
    if cls.__module__ == "builtins" or in_torch(cls.__module__) and \
            not cls.__module__.startswith(_INLINED_TORCH_MODULES):
        return False
    if issubclass(cls, (torch.nn.Module, torch.Tensor, BaseException, tuple, list, dict)):
        return False
    if cls.__new__ is not object.__new__ or not (
            hasattr(object.__new__(cls), "__dict__") or _slots_only(cls)):
        return False
    setattr_hook = inspect.getattr_static(cls, "__setattr__")
    if setattr_hook is not object.__setattr__ and not isinstance(setattr_hook,
                                                                  types.FunctionType):
        return False  # (one written in Python -- a frozen dataclass's -- is inlined)
    init = inspect.getattr_static(cls, "__init__")
    return init is object.__init__ or isinstance(init, types.FunctionType)


class UserDefinedObjectVariable(VariableTracker):
    """Any other object. One from outside has a source: attributes are read through it (and
    guarded). Attribute writes wait in ``pending`` and are replayed on the real object after
    the graph ran (Dynamo's side effects). A *fresh* object (``Cls(...)`` while tracing) is a
    placeholder instance plus its attributes; after the graph a new instance is built."""

    def __init__(self, value: Any, source: Source | None = None, fresh: bool = False,
                 class_source: Source | None = None):
        self.value, self.source = value, source
        self.pending: dict[str, Any] = {}   # a tracker, or DELETED
        self.fresh = fresh
        # a fresh copy of an object from outside (``copy.deepcopy``) reads its class's
        # attributes through the original's ``__class__``: guarded, and writable
        self.class_source = class_source
        self._slots: frozenset[str] | None = None  # of ``pending``, once reconstructed

    def python_type(self):
        return type(self.value)

    def truth(self, tx):
        """``if obj:`` as Python decides it: the class's ``__bool__``, else its ``__len__``,
        else True. One written in Python is inlined; one in C (``numpy.bool_``, a 0-d
        ``ndarray``) reads the object's data, so it is a graph break -- never "True
        because it is an object", which took ``if np.False_:`` (Reformer's padding test,
        ``n % np.lcm(4, 4) != 0``) down the wrong side."""
        cls = type(self.value)
        for name in ("__bool__", "__len__"):
            method = inspect.getattr_static(cls, name, None)
            if method is None:
                continue
            if isinstance(method, types.FunctionType):
                return tx.truth(tx.inline_user_function(method, [self], {}))
            raise Unsupported(f"the truth value of a {cls.__name__} ({cls.__name__}.{name} is "
                              "not written in Python)")
        return True

    def var_getattr(self, tx, name):
        hook = _python_hook(type(self.value), "__getattribute__")
        if hook is not None:
            if self.fresh:  # the class's own rule, run on the tracker (object's rule below)
                return tx.inline_user_function(hook, [self, ConstantVariable(name)], {})
            if self.pending:
                raise Unsupported(f"reading {name!r} of a {type(self.value).__name__} with a "
                                  "__getattribute__ hook and pending writes")
            if self.source is not None and not isinstance(
                    inspect.getattr_static(self.value, name, None), types.FunctionType):
                # a data attribute, read for real (the hook may rename it) and re-read so by
                # the guard; a method stays bound to this very tracker (below)
                return tx.wrap_nested(getattr(self.value, name), AttrSource(self.source, name))
        return self.generic_getattr(tx, name)

    def generic_getattr(self, tx, name):
        """``object.__getattribute__``: the instance's attributes, then its class's."""
        if name == "__dict__":
            if not hasattr(self.value, "__dict__"):   # a class with __slots__
                raise TracedException(AttributeError(
                    f"{type(self.value).__name__!r} object has no attribute '__dict__'"))
            return self._instance_dict(tx)
        if self.fresh and name not in self.pending and _is_slot(type(self.value), name):
            raise TracedException(AttributeError(   # a slot never assigned
                f"{type(self.value).__name__!r} object has no attribute {name!r}"))
        if self.pending.get(name) is DELETED:
            if self.fresh and not hasattr(type(self.value), name):
                raise TracedException(AttributeError(
                    f"{type(self.value).__name__!r} object has no attribute {name!r}"))
            raise Unsupported(f"reading attribute {name!r} after deleting it")
        if name in self.pending:
            return self.pending[name]
        if name in getattr(self.value, "__dict__", {}) and not self.fresh:
            # an instance attribute (a function stored on the instance is not bound)
            return tx.wrap_nested(self.value.__dict__[name], AttrSource(self.source, name)
                                  if self.source is not None else None)
        static = inspect.getattr_static(self.value, name, None)
        if not self.fresh and self.source is not None and isinstance(
                static, (types.FunctionType, staticmethod, classmethod, property)):
            # what the class gave is what runs: guarded, as neither the class's attribute
            # (``A.go = other``) nor the instance's (``a.go = fn`` shadows it) may change
            cls_attr = AttrSource(AttrSource(self.source, "__class__"), name)
            if isinstance(static, (types.FunctionType, property)):
                tx.guards.ID_MATCH(cls_attr, static)   # (read on the class: the same object)
            elif isinstance(static, staticmethod):
                tx.guards.ID_MATCH(cls_attr, static.__func__)
            else:   # a classmethod, read on the class: a new bound method each time
                tx.guards.ID_MATCH(AttrSource(cls_attr, "__func__"), static.__func__)
            if hasattr(self.value, "__dict__") and not isinstance(static, property):
                tx.guards.NOT_IN_DICT(self.source, name)
        if isinstance(static, types.FunctionType):
            return UserMethodVariable(static, self)
        if isinstance(static, staticmethod):
            return tx.wrap_nested(static.__func__, None)
        if isinstance(static, classmethod):
            return UserMethodVariable(static.__func__,
                                      UserDefinedClassVariable(type(self.value)))
        if isinstance(static, property) and static.fget is not None:
            return tx.inline_user_function(static.fget, [self], {})
        if isinstance(static, functools.cached_property) and \
                isinstance(static.func, types.FunctionType) and static.attrname == name:
            # computed once and kept in the instance's __dict__ (not found there yet: read
            # above, guarded), as cached_property.__get__ does -- without its lock
            if not self.fresh:
                tx.guards.NOT_IN_DICT(self.source, name)
            value = tx.inline_user_function(static.func, [self], {})
            self._check_writable(name)
            tx.record_side_effect(self)
            self.pending[name] = value
            return value
        getter = _python_descriptor_method(static, "__get__")
        if getter is not None:
            # a descriptor class written in Python (``Positive()`` on the class): its
            # ``__get__`` inlined, so it reads what an inlined ``__set__`` wrote
            desc, cls_vt = self._descriptor(tx, name)
            return tx.inline_user_function(getter, [desc, self, cls_vt], {})
        if self.fresh:
            # found in the class's MRO, never through its metaclass: ``obj.__class__`` is
            # the class (``type(cls).__class__`` would be ``type``)
            if name == "__class__":
                return UserDefinedClassVariable(type(self.value), self.class_source)
            if inspect.getattr_static(self.value, name, _ABSENT) is _ABSENT:
                getattr_hook = inspect.getattr_static(type(self.value), "__getattr__", None)
                if isinstance(getattr_hook, types.FunctionType):
                    return tx.inline_user_function(getattr_hook, [self, ConstantVariable(
                        name)], {})
                raise TracedException(AttributeError(  # all of its attributes are known
                    f"{type(self.value).__name__!r} object has no attribute {name!r}"))
            if isinstance(static, (types.WrapperDescriptorType, types.MethodDescriptorType)):
                # a C slot a builtin base gives (``object.__delattr__``, ``__eq__``), read as
                # a value (torchsde reads every name ``dir`` gives to look for a marker)
                return SlotMethodVariable(self, static)
            if hasattr(type(static), "__get__"):  # a descriptor of a kind not handled above
                raise Unsupported(f"attribute {name!r} of a {type(self.value).__name__} made "
                                  f"while tracing (a {type(static).__name__})")
            if self.class_source is not None:
                return tx.wrap_nested(getattr(type(self.value), name),
                                      AttrSource(self.class_source, name))
            return _class_attribute(tx, type(self.value), name)
        if self.source is None:
            raise Unsupported(f"attribute {name} of an object created while tracing")
        try:
            value = getattr(self.value, name)
        except AttributeError as e:  # ``try: obj.callback except AttributeError``: guarded
            guard_hasattr(tx, self, name)
            raise TracedException(e) from None
        return tx.wrap_nested(value, AttrSource(self.source, name))

    def _descriptor(self, tx, name: str) -> tuple[VariableTracker, VariableTracker]:
        """The descriptor object the class holds for ``name`` (reached through the class's
        ``__mro__`` and that class's ``__dict__``, so guarded like any input) and the class."""
        cls = type(self.value)
        cls_source = self.class_source if self.fresh else AttrSource(self.source, "__class__") \
            if self.source is not None else None
        if cls_source is None:
            raise Unsupported(f"the descriptor {cls.__name__}.{name} of an object whose class "
                              "has no source")
        i = next(i for i, k in enumerate(cls.__mro__) if name in vars(k))
        owner = GetItemSource(AttrSource(cls_source, "__mro__"), i) if i else cls_source
        desc = tx.wrap_nested(vars(cls.__mro__[i])[name],
                              GetItemSource(AttrSource(owner, "__dict__"), name))
        return desc, tx.wrap_nested(cls, cls_source)

    def guard_hasattr(self, tx, name: str) -> None:
        """Code branched on whether the attribute exists: guard it (sourced objects)."""
        if name not in self.pending:
            guard_hasattr(tx, self, name)

    def has_attr(self, name: str) -> bool:
        cls = type(self.value)
        if name in self.pending:
            return self.pending[name] is not DELETED or hasattr(cls, name)
        if not self.fresh:
            return hasattr(self.value, name)
        if name in ("__dict__", "__weakref__") or _is_slot(cls, name):
            # what the instance has, not the class: a class with ``__slots__`` gives its
            # instances no ``__dict__``, and a slot not yet assigned raises AttributeError
            return name in ("__dict__", "__weakref__") and hasattr(self.value, name)
        return hasattr(cls, name)

    def attr_is_computed(self, name: str) -> bool:
        """Whether ``hasattr`` on this object made while tracing must run code to answer:
        a property's getter (which may raise AttributeError) or the class's ``__getattr__``
        for a name the class does not have."""
        if not self.fresh or name in self.pending:
            return False
        static = inspect.getattr_static(type(self.value), name, _ABSENT)
        return isinstance(static, property) or static is _ABSENT and isinstance(
            inspect.getattr_static(type(self.value), "__getattr__", None), types.FunctionType)

    def _instance_dict(self, tx) -> VariableTracker:
        """``obj.__dict__``: for an object made while tracing, a live read-only view of its
        attributes; for one from outside, the real dict through its source (while no write
        to the object waits: the real dict would not show it yet)."""
        if self.fresh:
            return InstanceDictVariable(self)
        if self.source is None or self.pending:
            raise Unsupported(f"__dict__ of a {type(self.value).__name__} with pending writes")
        return tx.wrap_nested(self.value.__dict__, AttrSource(self.source, "__dict__"))

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        hook = _python_hook(type(self.value), "__setattr__")
        if hook is not None and self.fresh:
            tx.inline_user_function(hook, [self, ConstantVariable(name), value], {})
            return
        self.generic_setattr(tx, name, value)

    def generic_setattr(self, tx, name: str, value: VariableTracker,
                        hooked: bool = False) -> None:
        """``object.__setattr__``: a pending write to the instance's ``__dict__``
        (``hooked``: called from the class's own ``__setattr__``). A property of the
        class is a data descriptor, which wins: its setter (written in Python) is inlined,
        and its writes are what is recorded."""
        prop = inspect.getattr_static(type(self.value), name, None)
        if isinstance(prop, property):
            if prop.fset is None:
                raise TracedException(AttributeError(
                    f"property {name!r} of {type(self.value).__name__!r} object has no setter"))
            if not isinstance(prop.fset, types.FunctionType):
                raise Unsupported(f"the setter of {type(self.value).__name__}.{name} is not "
                                  "written in Python")
            tx.inline_user_function(prop.fset, [self, value], {})
            return
        setter = _python_descriptor_method(prop, "__set__")
        if setter is not None:   # a data descriptor written in Python: its __set__, inlined
            tx.inline_user_function(setter, [self._descriptor(tx, name)[0], self, value], {})
            return
        self._check_writable(name, hooked)
        if self.source is not None and AttrSource(self.source, "__dict__").name() in \
                tx.builder.wrapped:  # that tracker of the real dict would miss this write
            raise Unsupported(f"assignment to attribute {name!r} after reading __dict__")
        tx.record_side_effect(self)
        self.pending[name] = value

    def delete_attr(self, tx, name: str, hooked: bool = False) -> None:
        """``del obj.name``: a pending deletion, replayed after the graph (an object made
        while tracing just drops the attribute)."""
        hook = _python_hook(type(self.value), "__delattr__")
        if hook is not None and self.fresh and not hooked:
            tx.inline_user_function(hook, [self, ConstantVariable(name)], {})
            return
        static = inspect.getattr_static(type(self.value), name, None)
        if isinstance(static, property) and (hook is None or hooked):
            # a property wins over the instance dict: its deleter, inlined
            if static.fdel is None:
                raise TracedException(AttributeError(
                    f"property {name!r} of {type(self.value).__name__!r} object has no "
                    "deleter"))
            if not isinstance(static.fdel, types.FunctionType):
                raise Unsupported(f"the deleter of {type(self.value).__name__}.{name} is not "
                                  "written in Python")
            tx.inline_user_function(static.fdel, [self], {})
            return
        deleter = _python_descriptor_method(static, "__delete__")
        if deleter is not None and (hook is None or hooked):
            tx.inline_user_function(deleter, [self._descriptor(tx, name)[0], self], {})
            return
        self._check_writable(name, hooked, "__delattr__")
        self.guard_hasattr(tx, name)
        current = self.pending.get(name)
        if current is DELETED or current is None and (
                self.fresh or name not in getattr(self.value, "__dict__", {})):
            raise TracedException(AttributeError(  # CPython raises it here too
                f"{type(self.value).__name__!r} object has no attribute {name!r}"))
        tx.record_side_effect(self)
        if self.fresh:
            del self.pending[name]
        else:
            self.pending[name] = DELETED

    def _check_writable(self, name: str, hooked: bool = False,
                        op: str = "__setattr__") -> None:
        """Writes we can replay: plain instance ``__dict__`` entries (``hooked``: the write
        is ``object.__setattr__`` called by the class's own hook, already traced)."""
        cls = type(self.value)
        # an object from outside gets the write replayed by setattr/delattr after the graph
        # (both hooks would run); one made while tracing is rebuilt from its __dict__, so
        # only the hook of this very operation matters (a Python one was inlined: hooked)
        hooks = ("__setattr__", "__delattr__") if not self.fresh else \
            (op,) if not hooked else ()
        if any(inspect.getattr_static(cls, h, None) is not getattr(object, h) for h in hooks):
            raise Unsupported(f"assignment to attribute {name!r} of a {cls.__name__} (a "
                              "custom __setattr__/__delattr__)")
        if _is_slot(cls, name):
            return  # a __slots__ member: object.__setattr__ stores it, after the graph
        if not hasattr(self.value, "__dict__") or hasattr(inspect.getattr_static(
                cls, name, None), "__set__"):
            raise Unsupported(f"assignment to attribute {name!r} of a {cls.__name__} (a "
                              "descriptor or __slots__)")

    def call_function(self, tx, args, kwargs):
        if isinstance(self.value, functools._lru_cache_wrapper):
            # an lru_cache'd function: inline the function it wraps (as Dynamo does); the
            # cache is only an optimisation of a pure function
            wrapped = self.value.__wrapped__
            src = AttrSource(self.source, "__wrapped__") if self.source is not None else None
            return tx.wrap_nested(wrapped, src).call_function(tx, args, kwargs)
        if isinstance(self.value, types.MethodType):
            # a callable object bound as a method (transformers sets an lru_cache'd
            # ``warning_once`` on logging.Logger): a Logger's only reports, so it is made
            # after the graph (its own once-only cache decides); any other is its function
            # called with the instance first
            owner, src = self.value.__self__, self.source
            if isinstance(owner, logging.Logger) and src is not None:
                return tx.defer_call(self, args, kwargs)
            sub = (lambda a: AttrSource(src, a)) if src is not None else (lambda a: None)
            return tx.wrap_nested(self.value.__func__, sub("__func__")).call_function(
                tx, [tx.wrap_nested(owner, sub("__self__")), *args], kwargs)
        call = inspect.getattr_static(type(self.value), "__call__", None)
        if isinstance(call, types.FunctionType):
            return tx.inline_user_function(call, [self, *args], kwargs)
        rebuilt = polyfills.as_python(self.value)
        if rebuilt is not None:  # ``operator.itemgetter(1)`` made outside: its reads
            if self.source is not None:
                tx.guards.ID_MATCH(self.source, self.value)
            return tx.wrap_nested(rebuilt, None).call_function(tx, args, kwargs)
        if type(self.value) is weakref.ReferenceType and self.source is not None and \
                not args and not kwargs:
            # ``ref()``: the referent, read (and guarded) through the reference
            return tx.wrap_nested(self.value(), WeakRefCallSource(self.source))
        numpy = sys.modules.get("numpy")
        if numpy is not None and isinstance(self.value, numpy.ufunc):
            if self.source is not None:  # the type is guarded; the fold needs this very ufunc
                tx.guards.ID_MATCH(self.source, self.value)
            return _fold_numpy_ufunc(tx, self.value, args, kwargs)
        raise Unsupported(f"calling a {type(self.value).__name__} object")

    def children(self):
        return list(self.pending.values())

    def reconstruct(self, rc):
        if not self.fresh:
            return self.value
        obj = object.__new__(type(self.value))
        rc.memo[id(self)] = obj  # before the attributes: they may refer back to it
        slots = self._slots
        if slots is None:  # found once: a cache hit rebuilds the object on every call
            slots = self._slots = frozenset(n for n in self.pending if _is_slot(type(obj), n))
        for name, value in self.pending.items():
            if name in slots:
                object.__setattr__(obj, name, rc(value))
            else:
                obj.__dict__[name] = rc(value)
        return obj

    def __repr__(self):
        return f"UserDefinedObjectVariable({type(self.value).__name__})"


class InstanceDictVariable(AttributeDictVariable):
    """``obj.__dict__`` of a user object made while tracing: its pending attributes."""

    owner: UserDefinedObjectVariable

    def live_items(self) -> dict[str, VariableTracker]:
        return self.owner.pending


class SlotMethodVariable(VariableTracker):
    """A C slot of a builtin base (``object.__delattr__``) bound to an object made while
    tracing. Its attributes are the slot's (``__name__``; a missing one is an
    AttributeError, as ``getattr(method, marker, False)`` expects); a call runs the
    operation on the object's tracker for ``__getattribute__``, ``__setattr__`` and a bare
    ``__init__``, and is a break for the rest."""

    def __init__(self, obj: VariableTracker, slot: Any):
        self.obj, self.slot = obj, slot

    def python_type(self):
        return types.MethodWrapperType if isinstance(
            self.slot, types.WrapperDescriptorType) else types.BuiltinMethodType

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__doc__"):
            return ConstantVariable(getattr(self.slot, name))
        if name == "__self__":
            return self.obj
        if hasattr(self.slot.__get__(self.obj.value), name):
            raise Unsupported(f"attribute {name!r} of {self.slot.__qualname__} bound to an "
                              "object made while tracing")
        raise TracedException(AttributeError(
            f"{type(self.slot.__get__(self.obj.value)).__name__!r} object has no attribute "
            f"{name!r}"))

    def call_function(self, tx, args, kwargs):
        name = self.slot.__name__
        if name == "__getattribute__" and len(args) == 1 and not kwargs:
            return tx.load_attr(self.obj, args[0].as_python_constant())
        if name == "__setattr__" and len(args) == 2 and not kwargs:
            tx.store_attr(self.obj, args[0].as_python_constant(), args[1])
            return ConstantVariable(None)
        if self.slot is object.__init__ and not args and not kwargs:
            return ConstantVariable(None)
        raise Unsupported(f"calling {self.slot.__qualname__} of an object made while tracing")

    def __repr__(self):
        return f"SlotMethodVariable({self.slot.__qualname__})"


def _class_attribute(tx, cls: type, name: str) -> VariableTracker:
    """A class attribute read through an instance made while tracing (no source to guard it
    by, nor to replay a write through: a mutable container is a break, not a lost write)."""
    value = getattr(cls, name)
    if isinstance(value, (list, dict, set, bytearray)) or not (
            is_constant_value(value) or callable(value)
            or isinstance(value, (enum.Enum, types.ModuleType, property))):
        raise Unsupported(f"the mutable class attribute {cls.__qualname__}.{name} read "
                          "through an object made while tracing")
    return tx.wrap_nested(value, None)


_FUNCTION_APPLY = torch.autograd.Function.__dict__["apply"]


def _autograd_function_apply(cls: type[torch.autograd.Function]) -> VariableTracker:
    """``MyFunction.apply``: one opaque call in the graph. Its forward runs in PyTorch, and
    PyTorch's autograd calls the class's own ``backward`` -- AOT differentiates an opaque call
    by running it under autograd (as it does every extern), so a custom gradient (a
    straight-through estimator, BLOOM's GeLU) is never replaced by the derivative of the
    forward's ops. A forward that marks its inputs dirty mutates them: that would hide a
    write from functionalization, so it is a graph break. (PyTorch's Dynamo traces forward
    and backward into subgraphs of one higher-order op instead.)"""
    try:
        source = inspect.getsource(cls.forward)
    except (OSError, TypeError):
        source = ""
    if "mark_dirty" in source:
        raise Unsupported(f"{cls.__qualname__}.apply marks inputs dirty (an in-place autograd "
                          "Function)")
    # the base class's apply bound to ``cls`` (``cls.apply`` may be an override that called
    # it: ``super().apply(...)``)
    return _FunctionApplyVariable(_FUNCTION_APPLY.__get__(None, cls))


class _FunctionApplyVariable(TorchFunctionVariable):
    """``MyFunction.apply(x, blocks, kwargs)``: a module among the arguments (reformer's
    reversible layers pass their blocks) is passed as the object itself, an argument of the
    opaque call fixed by the identity guard its source already has -- its parameters are
    read when the call runs, and the Function's own backward gives them their gradients,
    as in eager. So is any other object from outside (gpytorch's linear operators pass a
    representation tree), under an identity guard of its own: its attributes too are read
    when the call runs. One with attribute writes the graph has not made yet, or one made
    while tracing, has no such object to pass: a break."""

    def call_function(self, tx, args, kwargs):
        def fixed(a):
            if isinstance(a, NNModuleVariable) and a.source is not None and not a.fresh:
                return ConstantVariable(a.value)
            if isinstance(a, UserDefinedObjectVariable) and a.source is not None and \
                    not a.fresh and not a.pending:
                tx.guards.ID_MATCH(a.source, a.value, f"{type(a.value).__name__} instance")
                return ConstantVariable(a.value)
            return a
        return super().call_function(tx, [fixed(a) for a in args],
                                     {k: fixed(v) for k, v in kwargs.items()})


class DataclassVariable(VariableTracker):
    """An instance of a dataclass made while tracing (``ModelOutput(last_hidden_state=h)``):
    fields are read from the constructor's arguments; the real object is constructed after
    the graph, with the values the graph computed. Writes to it are a graph break."""

    def __init__(self, cls: type, args: list, kwargs: dict):
        self.cls, self.args, self.kwargs = cls, list(args), dict(kwargs)
        fields = [f for f in dataclasses.fields(cls) if f.init]
        if len(args) > len(fields):
            raise Unsupported(f"{cls.__qualname__}() given too many arguments")
        self.values: dict[str, VariableTracker] = dict(zip([f.name for f in fields], args))
        for f in fields[len(args):]:
            if f.name in kwargs:
                self.values[f.name] = kwargs[f.name]
            elif f.default is not dataclasses.MISSING and is_constant_value(f.default):
                self.values[f.name] = ConstantVariable(f.default)
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise Unsupported(f"{cls.__qualname__}() missing argument {f.name!r}")
        post_init = getattr(cls, "__post_init__", None)
        self.post_init = post_init is not None and not _is_model_output(cls)

    def python_type(self):
        return self.cls

    def var_getattr(self, tx, name):
        if self.post_init:
            raise Unsupported(f"{self.cls.__qualname__} has a __post_init__: its fields may "
                              "differ from the constructor's arguments")
        if name in self.values:
            return self.values[name]
        static = inspect.getattr_static(self.cls, name, None)
        if isinstance(static, property) and static.fget is not None:
            return tx.inline_user_function(static.fget, [self], {})
        if isinstance(static, types.FunctionType):
            return UserMethodVariable(static, self)
        if name not in self.cls.__dataclass_fields__ and hasattr(self.cls, name):
            return _class_attribute(tx, self.cls, name)
        raise Unsupported(f"attribute {name!r} of a {self.cls.__qualname__} made while tracing")

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        """``outputs[0]`` / ``outputs["last_hidden_state"]`` on a transformers ModelOutput:
        its keys are the fields that are not None, in field order, and an int or slice
        indexes the tuple of their values (``ModelOutput.to_tuple``)."""
        if not _is_model_output(self.cls) or not key.is_python_constant():
            raise Unsupported(f"indexing {self}")
        present = {name: v for name, v in self.values.items()
                   if not (v.is_python_constant() and v.as_python_constant() is None)}
        first = next(iter(self.values.values()), None)
        if len(present) == 1 and not isinstance(first, TensorVariable):
            # ModelOutput.__post_init__ reads a lone non-tensor first field as key/value pairs
            raise Unsupported(f"indexing a {self.cls.__qualname__} whose only field is not a "
                              "tensor")
        k = key.as_python_constant()
        try:
            if isinstance(k, str):
                return present[k]
            items = list(present.values())[k]
        except (KeyError, IndexError, TypeError) as e:  # what the real object raises
            raise TracedException(e) from None
        return TupleVariable(items) if isinstance(k, slice) else items

    def children(self):
        return [*self.args, *self.kwargs.values()]

    def reconstruct(self, rc):
        return self.cls(*[rc(a) for a in self.args], **{k: rc(v) for k, v in
                                                         self.kwargs.items()})

    def __repr__(self):
        return f"DataclassVariable({self.cls.__qualname__})"


def _is_model_output(cls: type) -> bool:
    """A model-output record: a dataclass that is also an ordered dict of its fields that
    are not None, readable as a tuple (``to_tuple``) -- transformers' ``ModelOutput``,
    diffusers' ``BaseOutput`` and the libraries that copy them. Their ``__post_init__``
    only mirrors the fields into the dict's keys, which :class:`DataclassVariable` models."""
    return issubclass(cls, collections.OrderedDict) and dataclasses.is_dataclass(cls) and \
        callable(getattr(cls, "to_tuple", None))


# --- builtins -------------------------------------------------------------------------------
class BuiltinVariable(VariableTracker):
    """A Python builtin (``len``, ``range``, ``isinstance``, ``print``, ``operator.add``...)."""

    def __init__(self, fn: Callable, source: Source | None = None):
        self.fn, self.source = fn, source

    def python_type(self):
        return type(self.fn)

    def is_python_constant(self):
        return True  # builtin functions and classes cannot change

    def as_python_constant(self):
        return self.fn

    def reconstruct(self, rc):
        return self.fn

    def __repr__(self):
        return f"BuiltinVariable({getattr(self.fn, '__name__', self.fn)})"

    def var_getattr(self, tx, name):
        if isinstance(self.fn, type):
            # an attribute of a builtin class (``str.isalnum``, ``int.from_bytes``,
            # ``dict.fromkeys``, ``str.__name__``): classes of C are fixed, so it is the
            # value itself -- a method is a C callable, folded or unbound when called
            try:
                value = getattr(self.fn, name)
            except AttributeError as e:
                raise TracedException(e) from None
            return tx.wrap_nested(value, None)
        if name in ("__name__", "__qualname__", "__module__") and hasattr(self.fn, name):
            return ConstantVariable(getattr(self.fn, name))  # ``typ.__name__``: fixed
        if self.fn is torch._dynamo.comptime.comptime:
            # its static methods (``comptime.force_static(n)``), traced: each calls comptime
            return tx.wrap_nested(getattr(type(self.fn), name), None)
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs):
        fn = self.fn
        handler = _BUILTIN_HANDLERS.get(fn) or _class_method_handler(fn)
        if handler is not None:
            result = handler(tx, *args, **kwargs)
            if result is not None:
                return result
            if fn in _INLINED_WHEN_UNHANDLED:  # e.g. asdict of an object from outside
                return tx.inline_user_function(fn, args, kwargs)
        if getattr(fn, "__module__", None) == "math" and len(args) == 1 and not kwargs \
                and isinstance(args[0], SymIntVariable):
            return tx._symint_op(fn, args[0], None)
        if fn in _OPERATOR_ALIASES and len(args) == 2 and not kwargs:
            if fn in (operator.concat, operator.iconcat) and not _is_sequence(args[0]):
                kind = _python_type(args[0]).__name__
                raise TracedException(TypeError(f"'{kind}' object can't be concatenated"))
            return tx.binary_op(_OPERATOR_ALIASES[fn], args[0], args[1])
        if fn in _OPERATOR_BINARY and len(args) == 2 and not kwargs:
            return tx.binary_op(fn, args[0], args[1])
        if fn in _OPERATOR_UNARY and len(args) == 1 and not kwargs:
            return tx.unary_op(fn, args[0])
        if isinstance(fn, type) and issubclass(fn, Exception) and all(
                a.is_python_constant() for a in [*args, *kwargs.values()]):
            return ConstantVariable(fn(*[a.as_python_constant() for a in args]))  # to raise
        if fn in _UNSUPPORTED_BUILTINS:
            raise Unsupported(_UNSUPPORTED_BUILTINS[fn])
        if fn in trace_rules.REPORTING:  # ``warnings.warn(...)``: made after the graph
            return tx.defer_call(self, args, kwargs)
        if all(a.is_python_constant() for a in [*args, *kwargs.values()]) \
                and trace_rules.is_pure(fn):
            try:
                value = fn(*[a.as_python_constant() for a in args],
                           **{k: v.as_python_constant() for k, v in kwargs.items()})
            except Exception as e:  # ``int("x")``: what CPython raises, the traced code
                raise TracedException(e) from None  # may catch (else it is a break)
            return wrap_constant_result(value)
        unbound = _call_unbound_method(tx, fn, args, kwargs)
        if unbound is not None:
            return unbound
        if getattr(fn, "__name__", None) == "__subclasses__" and isinstance(
                owner := getattr(fn, "__self__", None), type) and not args and not kwargs:
            return _subclasses(tx, self, owner)
        name = trace_rules.builtin_name(fn)
        if trace_rules.is_pure(fn):
            raise Unsupported(f"{name} on values that are not Python constants")
        raise Unsupported(f"call to a C function we cannot trace: {name} (not known to be "
                          "pure, so not run while tracing)")


def _subclasses(tx, method: BuiltinVariable, cls: type) -> VariableTracker:
    """``Base.__subclasses__()`` (a registry that finds its plugins so: einops' backends):
    the classes defined so far, guarded by identity -- defining another one fails the
    guard and captures again."""
    subclasses = method.fn()
    if method.source is not None:
        ids = [id(c) for c in subclasses]
        tx.guards.add("SUBCLASSES", f"[id(c) for c in {method.source.name()}()] == {ids!r}",
                      method.source, f"subclasses of {cls.__name__}")
    return ListVariable([tx.wrap_nested(c, None) for c in subclasses])


def _call_unbound_method(tx, fn, args: list, kwargs: dict) -> VariableTracker | None:
    """``list.append(out, x)``, ``dict.get(d, k)``, ``str.strip(s)``, ``object.__setattr__(
    self, "a", v)``: a method of a builtin class called with its object first is that
    object's method -- the tracker's own rule for it (the class's, not an override a
    subclass wrote: ``dict.__getitem__(d, k)`` reads the storage). None when ``fn`` is no
    such method or the object is of another kind."""
    cls = getattr(fn, "__objclass__", None)
    if not isinstance(cls, type) or not args:
        return None
    obj, rest, name = args[0], list(args[1:]), fn.__name__
    if cls is object and isinstance(obj, UserDefinedObjectVariable) and name in _OBJECT_SLOTS:
        return _ObjectSlotVariable(obj, name).call_function(tx, rest, kwargs)
    if cls is object and name == "__setattr__" and isinstance(obj, ConstDictVariable):
        return _dict_generic_setattr(obj, tx, rest, kwargs)
    if cls is object and name == "__init__":
        return ConstantVariable(None)
    try:
        kind = _python_type(obj)
    except Unsupported:
        return None
    if not (isinstance(kind, type) and issubclass(kind, cls)) or cls is object:
        return None
    if isinstance(obj, (ConstantVariable, BaseListVariable, ConstDictVariable, SetVariable,
                        SymIntVariable)):
        return obj.call_method(tx, name, rest, kwargs)
    return None


def _fold_numpy_ufunc(tx, fn, args, kwargs) -> VariableTracker:
    """``np.sqrt(self.d_model_size)`` on Python numbers (CTRL scales its embeddings so): a
    ufunc is pure, so on constants its result is a constant of the graph. A size that may
    change is specialised first (a guard keeps it); a tensor or array argument is a graph
    break -- this Dynamo does not trace NumPy (PyTorch's does, through ``torch._numpy``)."""
    def constant(v):
        if isinstance(v, SymIntVariable):
            return v.specialize(tx)
        if v.is_python_constant() and isinstance(v.as_python_constant(), (int, float)):
            return v.as_python_constant()
        raise Unsupported(f"numpy.{fn.__name__} on a {v.python_type().__name__}: NumPy is "
                          "not traced, only folded on Python numbers")
    value = fn(*map(constant, args), **{k: constant(v) for k, v in kwargs.items()})
    return wrap_constant_result(value)


_OPERATOR_BINARY = {operator.add, operator.sub, operator.mul, operator.truediv,
                    operator.floordiv, operator.mod, operator.pow, operator.matmul,
                    operator.and_, operator.or_, operator.xor, operator.lshift,
                    operator.rshift, operator.lt, operator.le, operator.eq, operator.ne,
                    operator.gt, operator.ge, operator.getitem, operator.is_, operator.is_not,
                    operator.contains,
                    # every augmented assignment, as ``a op= b`` runs it (BINARY_OP)
                    operator.iadd, operator.isub, operator.imul, operator.itruediv,
                    operator.ifloordiv, operator.imod, operator.ipow, operator.imatmul,
                    operator.iand, operator.ior, operator.ixor, operator.ilshift,
                    operator.irshift}
# spellings of a binary operator: ``pow(a, b)`` is ``a ** b``; ``operator.concat(a, b)`` is
# ``a + b`` and ``operator.iconcat(a, b)`` is ``a += b``, for sequences only
_OPERATOR_ALIASES = {pow: operator.pow, operator.concat: operator.add,
                     operator.iconcat: operator.iadd}
_OPERATOR_UNARY = {operator.neg, operator.pos, operator.invert, operator.not_, abs}
_UNSUPPORTED_BUILTINS = {
    print: "print() has a side effect outside the graph",
    input: "input() reads from the terminal",
    open: "open() touches the file system",
    id: "id() depends on object identity",
    # (as in PyTorch's Dynamo, a break: the statement runs for real, the rest is traced)
    builtins.__build_class__: "a class statement inside the compiled function (a new "
                              "class on every call)",
}


def _seq(tx, v: VariableTracker) -> list[VariableTracker]:
    return tx.unpack(v)


def _len(tx, obj):
    if isinstance(obj, (BaseListVariable, ConstDictVariable)):
        return ConstantVariable(len(obj.items))
    if isinstance(obj, TensorVariable):
        return obj.size_var(tx, 0)
    if isinstance(obj, NNModuleVariable) and obj.fresh:
        # a module built while tracing (``nn.Sequential(a, b)``): its real tables are
        # empty -- its submodules live in the tracker -- so its class's ``__len__`` is
        # inlined on the tracker (the real object's length would be 0)
        method = inspect.getattr_static(type(obj.value), "__len__", None)
        if not isinstance(method, types.FunctionType):
            raise Unsupported(f"len() of a {type(obj.value).__name__} built while tracing")
        return tx.inline_user_function(method, [obj], {})
    if isinstance(obj, NNModuleVariable):
        return ConstantVariable(len(obj.value))
    if obj.is_python_constant():
        return ConstantVariable(len(obj.as_python_constant()))
    dunder = tx.call_dunder(obj, "__len__", [])
    if dunder is not None:
        return dunder
    return ConstantVariable(len(_seq(tx, obj)))


def _isinstance(tx, obj, cls):
    # a typing alias (typing.Mapping) or an ABC is a module-level constant: use the object
    c = cls.value if isinstance(cls, UserDefinedObjectVariable) else cls.as_python_constant()
    if isinstance(obj, LATE_BOUND["NumpyNdarrayVariable"]):   # ndarray, or NumPy's scalar
        return ConstantVariable(issubclass(obj.python_type(), c))
    if isinstance(obj, TensorVariable):
        return ConstantVariable(issubclass(type(obj.fake), c) if not isinstance(c, tuple)
                                else any(issubclass(torch.Tensor, x) for x in c)
                                or isinstance(obj.fake, c))
    if isinstance(obj, (NNModuleVariable, UserDefinedObjectVariable)):
        return ConstantVariable(isinstance(obj.value, c))
    if isinstance(obj, SymIntVariable):
        return ConstantVariable(issubclass(int, c) if not isinstance(c, tuple) else
                                any(issubclass(int, x) for x in c))
    try:
        return ConstantVariable(isinstance(obj.as_python_constant(), c)
                                if obj.is_python_constant() else
                                issubclass(obj.python_type(), c))
    except Unsupported:
        raise
    except Exception as e:
        raise Unsupported(f"isinstance on {obj}: {e}") from None


def _range(tx, *args):
    """``range(...)``; ``range(start, n, step)`` up to a symbolic size ``n`` with int
    ``start`` and ``step`` (CANINE's chunks of local attention, ``range(0, seq_len, 128)``)
    guards only its number of steps (``len(range(0, s, 128)) == 1``: every length up to
    128), not the size: the steps themselves are ints that do not depend on it. Reading
    ``.stop`` gives the size back. Any other symbolic bound is specialised (guarded)."""
    if len(args) >= 2 and isinstance(args[1], SymIntVariable) and not any(
            isinstance(a, SymIntVariable) for a in args[:1] + args[2:]):
        stop = tx.output.size_expression(args[1])
        if stop is not None:
            steps = range(*[a.value if isinstance(a, SymIntVariable) else a.as_python_constant()
                            for a in args])
            bounds = [stop if a is args[1] else tx.guards.literal(a.as_python_constant())
                      for a in args]
            tx.guards.SHAPE_ENV(f"len(range({', '.join(bounds)})) == {len(steps)}",
                                "the number of steps of a range up to a size")
            return RangeVariable(steps, args[1])
    values = [a.specialize(tx) if isinstance(a, SymIntVariable) else a.as_python_constant()
              for a in args]
    return ConstantVariable(range(*values))


def _enumerate(tx, seq, start=None):
    first = _int_constant(tx, start, "enumerate start") if start is not None else 0
    return EnumerateVariable(tx.get_iter(seq), first)


def _zip(tx, *seqs, strict=None):
    check = bool(strict.as_python_constant()) if strict is not None else False
    return ZipVariable([tx.get_iter(s) for s in seqs], check)


def _int_constant(tx, v: VariableTracker, what: str) -> int:
    if isinstance(v, SymIntVariable):
        return v.specialize(tx)
    if not v.is_python_constant():
        raise Unsupported(f"{what} is not a Python constant")
    return v.as_python_constant()


def _tuple(tx, seq=None):
    return TupleVariable(_seq(tx, seq) if seq is not None else [])


def _list(tx, seq=None):
    return ListVariable(_seq(tx, seq) if seq is not None else [])


def _dict(tx, arg=None, **kwargs):
    items = {}
    if arg is not None:
        if isinstance(arg, ConstDictVariable):
            items.update(arg.items)
        elif not isinstance(arg, (BaseListVariable, IteratorVariable)) and callable(
                getattr(arg.python_type(), "keys", None)):
            # a mapping (a ModuleDict, a ParameterDict, a Mapping class): as CPython's
            # dict(), ``keys()`` then ``m[k]`` for each
            for k in _seq(tx, arg.call_method(tx, "keys", [], {})):
                items[k.as_python_constant()] = tx.binary_op(operator.getitem, arg, k)
        else:
            for pair in _seq(tx, arg):
                k, v = _seq(tx, pair)
                items[k.as_python_constant()] = v
    items.update(kwargs)
    return ConstDictVariable(items)


def _reversed(tx, seq):
    return ListIteratorVariable(list(reversed(_seq(tx, seq))))


def _sort_key(tx, key: VariableTracker | None, item: VariableTracker, inner: bool = False):
    """The Python value ``key(item)`` sorts by (the item itself without a key). Inside a
    tuple, a value that is not a constant is kept as :class:`_Unordered`: Python compares
    tuples element by element and stops at the first that differs, so ``sorted(d.items())``
    never compares the values (gpytorch sorts its kernels so) -- and where it would, the
    comparison is the break."""
    k = tx.call(key, [item], {}) if key is not None else item
    if isinstance(k, SymIntVariable):
        return k.specialize(tx)
    if isinstance(k, BaseListVariable):
        return tuple(_sort_key(tx, None, i, inner=True) for i in k.items)
    if not k.is_python_constant():
        if inner:
            return _Unordered(k)
        raise Unsupported(f"ordering by {k} (not a Python constant)")
    return k.as_python_constant()


class _Unordered:
    """An element of a sort key that is not a Python constant: comparing it is a break."""

    def __init__(self, variable: VariableTracker):
        self.variable = variable

    def _compare(self, other):
        raise Unsupported(f"ordering by {self.variable} (not a Python constant)")
    __eq__ = __lt__ = __gt__ = __le__ = __ge__ = _compare   # (and so unhashable)


def _sorted(tx, seq, key=None, reverse=None):
    items = _seq(tx, seq)
    keys = [_sort_key(tx, key, i) for i in items]
    rev = reverse.as_python_constant() if reverse is not None else False
    order = sorted(range(len(items)), key=keys.__getitem__, reverse=rev)  # stable, as sorted
    return ListVariable([items[i] for i in order])


def _replace(tx, obj, **changes):
    if not isinstance(obj, DataclassVariable):
        return None
    return DataclassVariable(obj.cls, [], {**obj.values, **changes})


def _dataclass_type(obj: VariableTracker) -> type | None:
    cls = obj.cls if isinstance(obj, DataclassVariable) else \
        obj.value if isinstance(obj, UserDefinedClassVariable) else \
        type(obj.value) if isinstance(obj, UserDefinedObjectVariable) else None
    return cls if cls is not None and dataclasses.is_dataclass(cls) else None


def _fields(tx, obj):
    """``dataclasses.fields``: the class's Field objects (fixed once the class is made)."""
    cls = _dataclass_type(obj)
    if cls is None:
        return None
    return TupleVariable([ConstantVariable(f) for f in dataclasses.fields(cls)])


def _asdict(tx, obj, **kwargs):
    """``dataclasses.asdict`` of a dataclass made while tracing: a dict of its fields,
    recursing into dataclasses, lists, tuples and dicts as asdict does."""
    if kwargs or not _made_dataclass(obj):
        return None

    def inner(v):
        if _made_dataclass(v):
            return ConstDictVariable({f.name: inner(v.var_getattr(tx, f.name))
                                      for f in dataclasses.fields(_dataclass_type(v))})
        if isinstance(v, ConstantVariable) and is_constant_value(v.value):
            return v  # asdict deep-copies: an immutable constant is its own copy
        if type(v) in (ListVariable, TupleVariable):
            return type(v)([inner(i) for i in v.items])
        if isinstance(v, ConstDictVariable) and v.dict_cls is dict:
            return ConstDictVariable({k: inner(i) for k, i in v.items.items()})
        raise Unsupported(f"dataclasses.asdict deep-copies {v}: not traced")
    return inner(obj)


def _made_dataclass(obj: VariableTracker) -> bool:
    """An instance of a dataclass made while tracing (its fields are trackers)."""
    return isinstance(obj, DataclassVariable) or isinstance(
        obj, UserDefinedObjectVariable) and obj.fresh and dataclasses.is_dataclass(obj.value)


def _fromkeys(cls: type) -> Callable:
    """``cls.fromkeys(keys, value)`` of ``dict`` or a subclass (``OrderedDict``,
    ``defaultdict``, the user's), as CPython's ``dict.fromkeys`` runs it: ``cls()`` made,
    then each key set to the one ``value`` -- through the class's own ``__setitem__`` where
    it has one written in Python."""
    def handler(tx, seq, value=None):
        made = tx.call(tx.wrap_nested(cls, None), [], {})
        v = value if value is not None else ConstantVariable(None)
        for key in _seq(tx, seq):
            tx.store_subscr(made, key, v)
        return made
    return handler


def _class_method_handler(fn: Any) -> Callable | None:
    """The tracing rule for a C class method reached through a subclass (the C method is
    bound anew to each class: ``defaultdict.fromkeys`` is not ``dict.fromkeys``)."""
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, type) and issubclass(owner, dict) and \
            getattr(fn, "__name__", None) == "fromkeys" and isinstance(
                inspect.getattr_static(owner, "fromkeys"), types.ClassMethodDescriptorType):
        return _fromkeys(owner)
    return None


def _namedtuple(tx, typename, field_names, *, rename=None, defaults=None, module=None):
    """``collections.namedtuple("Point", ["x", "y"])`` inside the traced code: a function of
    its arguments (it writes the class's source and ``eval``s it), so on constants it is
    made now, for real, and is a constant class of the graph -- each call of the compiled
    code then makes instances of that one class, where eager makes a new, equal class per
    call. The class's ``__module__`` is the caller's, as namedtuple reads it from the
    calling frame. Mutable defaults would be shared across calls, so they must be
    immutable constants."""
    given = {"rename": rename, "defaults": defaults, "module": module}
    consts = {}
    for name, vt in [("typename", typename), ("field_names", field_names), *given.items()]:
        if vt is None:
            continue
        if isinstance(vt, BaseListVariable) and vt.is_python_constant():
            value = tuple(vt.as_python_constant())
        elif vt.is_python_constant():
            value = vt.as_python_constant()
        else:
            raise Unsupported(f"collections.namedtuple with a {name} that is not a constant")
        if not trace_rules.immutable_constant(value):
            raise Unsupported(f"collections.namedtuple with a mutable {name}")
        consts[name] = value
    if consts.get("module") is None:
        consts["module"] = tx.frames[-1].globals.get("__name__", "__main__")
    try:
        cls = collections.namedtuple(consts.pop("typename"), consts.pop("field_names"),
                                     **consts)
    except (TypeError, ValueError) as e:  # a bad field name: what CPython raises
        raise TracedException(e) from None
    return UserDefinedClassVariable(cls)


def _new_namedtuple(tx, cls_vt: UserDefinedClassVariable, args: list,
                    kwargs: dict) -> VariableTracker:
    """``Point(x, y=2)``: the arguments bound as the class's ``__new__`` binds them, the
    defaults it holds filling the rest (read through the class's source, so guarded, when
    it has one). A subclass's own ``__new__`` written in Python is inlined (its
    ``super().__new__`` reaches namedtuple's, which calls ``tuple.__new__``: see
    :func:`_tuple_new`); an ``__init__`` of its own, or a metaclass, is a break."""
    cls: Any = cls_vt.value   # (a namedtuple class: its own ``__init__`` is looked up)
    base = next(k for k in cls.__mro__ if "_fields" in vars(k))
    new = cls.__new__
    if cls.__init__ is not object.__init__ or type(cls) is not type or \
            not isinstance(new, types.FunctionType):
        raise Unsupported(f"constructing {cls.__qualname__}: a namedtuple subclass with its "
                          "own __init__ (or a metaclass)")
    src: Source | None
    if new is not base.__new__:
        src = AttrSource(cls_vt.source, "__new__") if cls_vt.source is not None else None
        if src is not None:
            tx.guards.ID_MATCH(src, new)
        return tx.inline_user_function(new, [cls_vt, *args], kwargs, fn_source=src)
    try:
        bound = inspect.signature(new).bind(cls, *args, **kwargs)
    except TypeError as e:  # a missing or unexpected field: what CPython raises
        raise TracedException(e) from None
    params = list(inspect.signature(new).parameters)[1:]
    defaults = new.__defaults__ or ()
    first_default = len(params) - len(defaults)
    items = []
    for i, name in enumerate(params):
        if name in bound.arguments:
            items.append(bound.arguments[name])
            continue
        default = defaults[i - first_default]
        if cls_vt.source is not None:
            src = GetItemSource(AttrSource(AttrSource(cls_vt.source, "__new__"),
                                           "__defaults__"), i - first_default)
            items.append(tx.wrap_nested(default, src))
        elif trace_rules.immutable_constant(default):
            items.append(ConstantVariable(default))
        else:
            raise Unsupported(f"the default of {cls.__qualname__}.{name} (not a constant)")
    return NamedTupleVariable(items, cls, class_source=cls_vt.source)


def _tuple_new(tx, cls, iterable=None):
    """``tuple.__new__(cls, items)`` -- what namedtuple's generated ``__new__`` and
    ``_make`` call -- for ``tuple`` or a namedtuple class: a tuple tracker of that class."""
    if not isinstance(cls, (UserDefinedClassVariable, BuiltinVariable)):
        return None
    kind = cls.as_python_constant()
    items = [] if iterable is None else _seq(tx, iterable)
    if kind is tuple:
        return TupleVariable(items)
    if isinstance(kind, type) and issubclass(kind, tuple) and (
            hasattr(kind, "_fields") or plain_tuple_subclass(kind)) and type(kind) is type:
        return NamedTupleVariable(items, kind, class_source=cls.source)
    return None


def _map(tx, fn, *seqs):
    if not seqs:
        raise TracedException(TypeError("map() must have at least two arguments."))
    return MapVariable(fn, [tx.get_iter(q) for q in seqs])


def _filter(tx, fn, seq):
    return FilterVariable(fn, tx.get_iter(seq))


def _reduce(tx, fn, seq, initial=None):
    items = _seq(tx, seq)
    if initial is None:
        if not items:
            raise Unsupported("reduce() of an empty sequence with no initial value")
        initial, items = items[0], items[1:]
    acc = initial
    for item in items:
        acc = tx.call(fn, [acc, item], {})
    return acc


def _lru_cache_wrapper(tx, fn, maxsize, typed, info_type):
    """``functools.lru_cache(f)`` / ``functools.cache(f)`` applied while tracing (the C
    wrapper object inside them): calls go to ``f`` -- the cache only saves recomputing a
    pure function -- and the real wrapper is made after the graph if it escapes."""
    return CachedFunctionVariable(fn, maxsize.as_python_constant(), typed.as_python_constant())


def _partial(tx, fn, *args, **kwargs):
    return partial_of(fn, list(args), kwargs)


def _set(tx, seq=None):
    return SetVariable([] if seq is None else _seq(tx, seq), tx=tx)


def _frozenset(tx, seq=None):
    items = [] if seq is None else _seq(tx, seq)
    if not all(i.is_python_constant() for i in items):
        raise Unsupported("a frozenset of non-constant values")
    return ConstantVariable(frozenset(i.as_python_constant() for i in items))


def _deque(tx, seq=None, maxlen=None):
    bound = None if maxlen is None else _int_constant(tx, maxlen, "deque maxlen") \
        if not (maxlen.is_python_constant() and maxlen.as_python_constant() is None) else None
    if bound is not None and (not isinstance(bound, int) or bound < 0):
        raise TracedException(ValueError("maxlen must be non-negative") if isinstance(
            bound, int) else TypeError("an integer is required"))
    return DequeVariable([] if seq is None else _seq(tx, seq), maxlen=bound)


def _minmax(fn):
    def handler(tx, *args, **kwargs):
        if all(a.is_python_constant() for a in args) and not kwargs:
            return None  # folded by the generic path
        items = _seq(tx, args[0]) if len(args) == 1 else list(args)
        if "key" in kwargs or "default" in kwargs:
            key = kwargs.get("key")
            if key is not None and key.is_python_constant() and key.as_python_constant() \
                    is None:
                key = None
            if not items:
                if "default" not in kwargs:
                    raise Unsupported(f"{fn.__name__}() of an empty sequence")
                return kwargs["default"]
            keys = [_sort_key(tx, key, i) for i in items]
            return items[keys.index(fn(keys))]  # the first of equal keys, as min/max
        if any(isinstance(i, TensorVariable) for i in items):
            return _minmax_tensors(tx, fn, items)
        if all(i.is_python_constant() for i in items):
            return ConstantVariable(fn(i.as_python_constant() for i in items))
        if all(isinstance(i, SymIntVariable) or i.is_python_constant() and isinstance(
                i.as_python_constant(), (int, float)) for i in items):
            # ``max(0, bias.size(1) - q_len)`` (MPT): the winner is chosen by comparisons,
            # each guarded, and stays symbolic -- no size is specialised. A tie gives the
            # same value whichever side wins, so each guard includes it: ``s0 <= 64`` for
            # ``min(s0, 64)`` at s0 = 9 also covers s0 = 64. (PyTorch keeps ``sym_max`` in
            # the graph instead, needing no guard; ``1 - s0 <= 0`` holds for every size
            # these graphs take, so the guard costs no recompile here.)
            def hint(v):
                return v.value if isinstance(v, SymIntVariable) else v.as_python_constant()
            beats = operator.gt if fn is max else operator.lt
            best = items[0]
            for item in items[1:]:
                wins = beats(hint(item), hint(best))
                side = (operator.ge if wins else operator.le) if fn is max else \
                    (operator.le if wins else operator.ge)
                tx.binary_op(side, item, best)     # True at the hints: guarded
                best = item if wins else best      # (the first of equal items, as Python)
            return best
        if not any(isinstance(i, (TensorVariable, SymIntVariable)) for i in items):
            # objects compared by their own ``__gt__``/``__lt__`` (a ``total_ordering``
            # class), as CPython's loop does: an item replaces the best when it beats it
            beats = operator.gt if fn is max else operator.lt
            best = items[0]
            for item in items[1:]:
                if tx.binary_op(beats, item, best).truth(tx):
                    best = item
            return best
        raise Unsupported(f"{fn.__name__}() of {', '.join(map(str, items))}")
    return handler


def _minmax_tensors(tx, fn: Callable, items: list[VariableTracker]) -> VariableTracker:
    """``max(a, 0)``, ``min(1, b)``, ``max(a, b)`` with tensors, as CPython runs them: the
    first item is the best so far, and each next one replaces it when ``item > best``
    (``<`` for min) is true. With a tensor that truth is data-dependent, so each step is
    ``torch.where(item > best, item, best)`` in the graph: the same value for every input --
    ties keep the earlier item, a NaN only where Python's comparison would keep it -- and
    the gradient flows to the item Python would have returned (``torch.maximum`` splits it
    on ties; ``torch.clamp``, which PyTorch's Dynamo uses for ``max(t, number)``, lets a NaN
    through where Python keeps the number). Eager can only compare a tensor of one element
    (``bool`` of more raises), so every tensor must have one, all of one shape, and numbers
    must not change the tensors' dtype: the result then has the shape and dtype of the
    tensor eager returns. Where eager returns the number, the graph gives it as a 0-d tensor
    of that dtype (the one difference a graph cannot avoid; PyTorch's Dynamo does the same).
    """
    beats = operator.gt if fn is max else operator.lt
    tensors = [i for i in items if isinstance(i, TensorVariable)]
    for item in items:
        if not isinstance(item, TensorVariable) and not (item.is_python_constant() and type(
                item.as_python_constant()) in (int, float, bool)):
            raise Unsupported(f"{fn.__name__}() of a tensor and {item}")
    first = tensors[0].fake
    if any(tx.output.is_dynamic_tensor(t) for t in tensors):
        raise Unsupported(f"{fn.__name__}() of a tensor with a dynamic shape")
    if any(t.fake.numel() != 1 for t in tensors):
        raise TracedException(RuntimeError(  # what ``bool(a > b)`` raises in eager
            "Boolean value of Tensor with more than one value is ambiguous"))
    if any(t.fake.shape != first.shape or t.fake.dtype != first.dtype for t in tensors) or \
            any(torch.result_type(first, i.as_python_constant()) != first.dtype
                for i in items if not isinstance(i, TensorVariable)):
        raise Unsupported(f"{fn.__name__}() of tensors of different shapes or dtypes (the "
                          "result's depends on which one wins)")
    best = items[0]
    for item in items[1:]:
        if item is best:
            continue  # ``item > item`` is false: the best stays
        if not isinstance(item, TensorVariable) and not isinstance(best, TensorVariable):
            if beats(item.as_python_constant(), best.as_python_constant()):
                best = item
            continue
        wins = tx.binary_op(beats, item, best)
        best = tx.output.create_node("call_function", torch.where, (wins, item, best), {})
    return best


def _sum(tx, seq, start=None):
    items = _seq(tx, seq)
    total = start if start is not None else ConstantVariable(0)
    for i in items:
        total = tx.binary_op(operator.add, total, i)
    return total


def guard_hasattr(tx, obj: UserDefinedClassVariable | UserDefinedObjectVariable
                  | NNModuleVariable, name: str) -> bool:
    """Whether ``obj.value`` has the attribute, guarded when the object has a source: code
    that branched on it (``getattr(self, "gradient_checkpointing", False)``) is only right
    while the answer stays the same."""
    found = hasattr(obj.value, name)
    if obj.source is not None:
        tx.guards.add("HASATTR", f"{'' if found else 'not '}hasattr({obj.source.name()}, "
                      f"{name!r})", obj.source)
    return found


def _getattr(tx, obj, name, default=None):
    n = name.as_python_constant()
    if default is not None and isinstance(obj, UserDefinedObjectVariable) and \
            not obj.has_attr(n):
        obj.guard_hasattr(tx, n)  # the default is used while the attribute stays absent
        return default
    if default is not None and isinstance(obj, NNModuleVariable) and \
            not guard_hasattr(tx, obj, n):  # transformers: getattr(self, "gradient_...", False)
        return default
    try:
        return tx.load_attr(obj, n)
    except TracedException as e:  # ``getattr(None, "is_compileable", False)``
        if default is None or not isinstance(e.exc, AttributeError):
            raise
        return default


def _hasattr(tx, obj, name):
    n = name.as_python_constant()
    if isinstance(obj, UserDefinedObjectVariable) and not obj.attr_is_computed(n):
        obj.guard_hasattr(tx, n)
        return ConstantVariable(obj.has_attr(n))
    if isinstance(obj, UserDefinedClassVariable):
        return ConstantVariable(hasattr(obj.value, n))  # the class is identity-guarded
    if isinstance(obj, BuiltinVariable):
        return ConstantVariable(hasattr(obj.fn, n))  # a C class or function: fixed
    if isinstance(obj, NestedUserFunctionVariable):
        return ConstantVariable(obj.has_attr(n))
    if isinstance(obj, NNModuleVariable):
        return ConstantVariable(guard_hasattr(tx, obj, n))
    if isinstance(obj, PythonModuleVariable):
        return ConstantVariable(hasattr(obj.value, n))
    if isinstance(obj, TensorVariable):
        return ConstantVariable(hasattr(obj.fake, n))
    if isinstance(obj, ConstDictVariable) and (n in obj.attrs or hasattr(obj.python_type(), n)):
        return ConstantVariable(True)
    if isinstance(obj, ConstDictVariable) and obj.source is None and not hasattr(
            obj.python_type(), "__getattr__"):
        return ConstantVariable(False)  # made while tracing: its attributes are all known
    if obj.is_python_constant():
        return ConstantVariable(hasattr(obj.as_python_constant(), n))
    if isinstance(obj, (BaseListVariable, SetVariable)) or \
            isinstance(obj, ConstDictVariable) and obj.dict_cls is dict:
        # a builtin container (a namedtuple's fields are its class's too): its attributes
        # are its class's
        return ConstantVariable(hasattr(obj.python_type(), n))
    try:  # what hasattr itself does: read it, and see whether AttributeError comes
        tx.load_attr(obj, n)
    except TracedException as e:
        if isinstance(e.exc, AttributeError):
            return ConstantVariable(False)
        raise
    return ConstantVariable(True)


def _str(tx, obj=None):
    if isinstance(obj, UserDefinedClassVariable):
        return ConstantVariable(str(obj.value))  # "<class 'transformers...GPT2Model'>"
    return user_object_text(tx, obj, str) if obj is not None else None


def _repr(tx, obj):
    return user_object_text(tx, obj, repr)


def _recursive_repr_wrappers() -> frozenset:
    """The code of the wrappers that guard a ``__repr__`` against self-reference:
    ``reprlib.recursive_repr``'s, and the copy in ``dataclasses`` (Python 3.11)."""
    import reprlib

    def sample(self):
        return ""
    codes = {reprlib.recursive_repr()(sample).__code__}
    if hasattr(dataclasses, "_recursive_repr"):
        codes.add(dataclasses._recursive_repr(sample).__code__)
    return frozenset(codes)


_RECURSIVE_REPR_WRAPPERS = _recursive_repr_wrappers()


def user_object_text(tx, obj, conversion: Callable) -> VariableTracker | None:
    """``str(obj)`` / ``repr(obj)`` (and ``f"{obj}"``, ``f"{obj!r}"``) of an instance whose
    class writes ``__str__`` or ``__repr__`` in Python: the method is inlined, as CPython
    calls it (``str`` falls back to ``__repr__`` when the class keeps ``object.__str__``).
    A dataclass's generated ``__repr__`` is wrapped by ``reprlib.recursive_repr``, whose
    guard against self-reference reads the thread's id: its ``__wrapped__`` is inlined (a
    structure that holds itself would not end tracing either). ``object.__repr__`` prints
    the object's address, which a graph cannot know for an object it built: None, so the
    caller breaks."""
    if isinstance(obj, BaseListVariable) and obj.python_type() in (list, tuple) and \
            not obj.is_python_constant():
        # ``str([tag, shelf])``: a list's or tuple's text is its items' reprs
        texts = []
        for item in obj.items:
            text = ConstantVariable(repr(item.as_python_constant())) \
                if item.is_python_constant() else user_object_text(tx, item, repr)
            if text is None:
                return None
            texts.append(text.as_python_constant())
        inner = ", ".join(texts) + ("," if obj.python_type() is tuple and len(texts) == 1
                                    else "")
        return ConstantVariable(f"[{inner}]" if obj.python_type() is list else f"({inner})")
    if not isinstance(obj, UserDefinedObjectVariable):
        return None
    cls = type(obj.value)
    names = ("__str__", "__repr__") if conversion is str else ("__repr__",)
    for name in names:
        method = inspect.getattr_static(cls, name, None)
        if name == "__str__" and method is object.__str__:
            continue   # object.__str__ is repr(obj)
        if isinstance(method, types.FunctionType) and \
                method.__code__ in _RECURSIVE_REPR_WRAPPERS:
            wrapped = getattr(method, "__wrapped__", None)
            if isinstance(wrapped, types.FunctionType):
                method = wrapped
        if not isinstance(method, types.FunctionType):
            return None
        text = tx.inline_user_function(method, [obj], {})
        if not (text.is_python_constant() and isinstance(text.as_python_constant(), str)):
            raise TracedException(TypeError(
                f"{name} returned non-string (type {_python_type(text).__name__})"))
        return text
    return None


def _signature(tx, obj, *, follow_wrapped=None, **kwargs):
    """``inspect.signature(fn)``: a fact about a function that cannot change while its
    identity does not (guarded where it was read), so a constant. A decorated function is
    followed through its ``__wrapped__`` chain, as inspect does."""
    if kwargs:
        return None
    follow = follow_wrapped is None or follow_wrapped.as_python_constant()
    for _ in range(100):  # inspect's own bound on __wrapped__ chains is the recursion limit
        if not follow or not isinstance(obj, (UserFunctionVariable,
                                              NestedUserFunctionVariable)):
            break
        try:
            obj = obj.var_getattr(tx, "__wrapped__")
        except TracedException:
            break
    if isinstance(obj, UserFunctionVariable):
        return ConstantVariable(inspect.signature(obj.fn, follow_wrapped=False))
    if isinstance(obj, UserMethodVariable):
        sig = inspect.signature(obj.fn, follow_wrapped=False)
        return ConstantVariable(sig.replace(parameters=list(sig.parameters.values())[1:]))
    if isinstance(obj, NestedUserFunctionVariable):
        return ConstantVariable(inspect.signature(_stand_in(tx, obj), follow_wrapped=False))
    if isinstance(obj, (UserDefinedClassVariable, BuiltinVariable, NNModuleVariable)):
        try:  # a class's, a C function's, a module's: fixed with its (guarded) identity
            return ConstantVariable(inspect.signature(obj.value if not isinstance(
                obj, BuiltinVariable) else obj.fn))
        except (TypeError, ValueError) as e:
            raise TracedException(e) from None
    raise Unsupported(f"inspect.signature of {obj}")


def _stand_in(tx, fn: NestedUserFunctionVariable) -> types.FunctionType:
    """A real function with ``fn``'s code, defaults and annotations (its closure cells
    empty): what ``inspect`` reads to describe it. Defaults must be constants."""
    def constant(vt, what):
        if vt is None:
            return None
        if not vt.is_python_constant():
            raise Unsupported(f"inspect of a function made while tracing whose {what} are "
                              "not constants")
        return vt.as_python_constant()
    cells = tuple(types.CellType() for _ in fn.code.co_freevars) or None
    stand_in = types.FunctionType(fn.code, fn.f_globals, fn.code.co_name,
                                  constant(fn.defaults, "defaults"), cells)
    stand_in.__kwdefaults__ = constant(fn.kwdefaults, "keyword defaults")
    if fn.annotations is not None:
        stand_in.__annotations__ = {k: v.as_python_constant() if v.is_python_constant()
                                    else getattr(v, "value", None)
                                    for k, v in fn.annotations.items.items()}
    return stand_in


def _all_any(fn):
    """``all``/``any``: item by item, stopping at the first item that decides, as CPython
    does (``any(p(m) for m in mods)`` evaluates ``p`` no further)."""
    decisive = fn is any

    def handler(tx, seq):
        it = tx.get_iter(seq)
        while True:
            try:
                item = tx.iter_next(it)
            except StopIteration:
                return ConstantVariable(not decisive)
            if tx.truth(item) is decisive:
                return ConstantVariable(decisive)
    return handler


def _type(tx, obj):
    if isinstance(obj, LATE_BOUND["NumpyNdarrayVariable"]):
        return tx.wrap_nested(obj.python_type(), None)   # ndarray, or NumPy's scalar type
    if isinstance(obj, TensorVariable):
        return UserDefinedClassVariable(type(obj.fake) if type(obj.fake) in (
            torch.Tensor, torch.nn.Parameter) else torch.Tensor)
    if isinstance(obj, UserDefinedObjectVariable):
        # the class reached through the object (or, for one made while tracing, the class
        # it was made from), so that its attributes are guarded and writable
        source = obj.class_source if obj.fresh else AttrSource(obj.source, "__class__") \
            if obj.source is not None else None
        return tx.wrap_nested(type(obj.value), source)
    # any other value from outside: its class through it, so ``type(self).count += 1`` in
    # a dict or list subclass's method has somewhere to be guarded and written back
    return tx.wrap_nested(obj.python_type(), None if obj.source is None
                          else AttrSource(obj.source, "__class__"))


def _super(tx, *args):
    if not args:
        frame = tx.frames[-1]
        cell = frame.locals.get("__class__")
        first = frame.code.co_varnames[0] if frame.code.co_argcount else None
        if cell is None or first is None:
            raise Unsupported("super() without __class__ or a first argument")
        cls = tx.cell_get(cell, "__class__")
        obj = realize(tx, frame.locals[first])
        if type(obj).__name__ in ("CellVariable", "ClosureCellVariable"):
            obj = tx.cell_get(obj, first)
        args = (cls, obj)
    cls, obj = args
    return SuperVariable(cls.as_python_constant(), obj)


def _iter(tx, obj, sentinel=None):
    if sentinel is not None:  # iter(callable, sentinel)
        return tx.inline_user_function(polyfills.iter_until, [obj, sentinel], {})
    return tx.get_iter(obj)


def _next(tx, it, default=None):
    try:
        return tx.iter_next(realize(tx, it))
    except StopIteration:
        if default is None:  # what CPython raises: contextlib's __exit__ catches it
            raise TracedException(StopIteration()) from None
        return default


def _polyfill(fn: Callable) -> Callable:
    """The handler of a C iterator (``itertools.chain``...): its Python version inlined."""
    def handler(tx, *args, **kwargs):
        return tx.inline_user_function(fn, list(args), kwargs)
    return handler


def _bool(tx, obj=None):
    return ConstantVariable(obj.truth(tx) if obj is not None else False)


def _int_float(fn):
    """``int(x)`` / ``float(x)`` of a symbolic size (specialised) or a tensor (a break);
    anything else -- ``int("ff", 16)``, ``int("7", base=8)`` -- folds as a pure builtin."""
    def handler(tx, obj=None, *rest, **kwargs):
        if rest or kwargs:
            return None
        if isinstance(obj, SymIntVariable):
            return ConstantVariable(fn(obj.specialize(tx)))
        if isinstance(obj, TensorVariable):
            known = tx.known_constant(obj)   # ``int(torch.tensor(2))``: a known value
            if known is not None:
                try:
                    return ConstantVariable(fn(known))
                except (TypeError, ValueError, RuntimeError) as e:
                    raise TracedException(e) from None
            raise Unsupported(f"{fn.__name__}(tensor) needs the tensor's data "
                              "(data-dependent)")
        return None
    return handler


def _slice(tx, *parts):
    """``slice(start, stop)`` called by name, as ``BUILD_SLICE`` builds one (einops'
    ``unpack`` slices at sums of sizes: symbolic ones under dynamic shapes)."""
    if not 1 <= len(parts) <= 3 or all(p.is_python_constant() for p in parts):
        return None   # (one of constants is folded, as any pure builtin)
    return SliceVariable(list(parts) if len(parts) > 1 else [ConstantVariable(None), parts[0]])


def _object_new(tx, cls, *args, **kwargs):
    """``object.__new__(cls)`` (torch.distributions' ``expand`` spells it
    ``self.__new__(type(self))``): a blank instance, its ``__init__`` not run, of a class
    whose instances can be built while tracing."""
    if isinstance(cls, UserDefinedClassVariable) and _plain_python_class(cls.value) \
            and not args and not kwargs:
        return UserDefinedObjectVariable(object.__new__(cls.value), fresh=True,
                                         class_source=cls.source)
    if isinstance(cls, UserDefinedClassVariable) and isinstance(cls.value, type) and \
            issubclass(cls.value, torch.nn.Module) and not args and not kwargs and \
            _builds_like_module(cls.value):
        # a module class's own ``__new__`` ending in ``super().__new__(cls)`` (tltorch's
        # factorized tensors pick their subclass so, and neuralop builds them in
        # ``forward``): the module as ``_new_user_module`` makes it, its ``__init__`` then
        # called by the code (``nn.Module.__init__`` was run here, before any attribute)
        module = object.__new__(cls.value)
        torch.nn.Module.__init__(module)
        return NNModuleVariable(module, None, fresh=True)
    return None


def _builds_like_module(cls: type) -> bool:
    """A module class written outside torch on top of ``nn.Module`` alone, with Module's
    ``__setattr__`` (its ``__new__`` and metaclass may be its own: they are traced)."""
    builders = [k for k in cls.__mro__ if "__init__" in vars(k)]
    return cls.__setattr__ is torch.nn.Module.__setattr__ and all(
        k in (object, torch.nn.Module) or not in_torch(k.__module__) for k in builders)


def _dict_new(tx, cls, *args, **kwargs):
    """``dict.__new__(cls)`` in a dict subclass's own ``__new__``: an empty dict of that
    class, made while tracing (``dict.__init__`` fills it)."""
    if isinstance(cls, UserDefinedClassVariable) and issubclass(cls.value, dict) and \
            reads_like_dict(cls.value):
        return ConstDictVariable({}, dict_cls=cls.value)
    raise Unsupported(f"dict.__new__ of {cls}")


def _dict_init(tx, self, *args, **kwargs):
    """``dict.__init__(self, *args, **kwargs)`` on a dict made while tracing: its entries."""
    if not isinstance(self, ConstDictVariable) or self.source is not None:
        raise Unsupported(f"dict.__init__ of {self}")
    made = _dict(tx, *args, **kwargs)
    for key, value in made.items.items():
        self.setitem(tx, made.key_trackers.get(id(key)) or ConstantVariable(key), value)
    return ConstantVariable(None)


def _setattr(tx, obj, name, value):
    """``setattr(obj, "name", v)`` is ``obj.name = v``: the same pending write, or the same
    graph break."""
    tx.store_attr(obj, _attr_name(name), value)
    return ConstantVariable(None)


def _delattr(tx, obj, name):
    """``delattr(obj, "name")`` is ``del obj.name``."""
    tx.delete_attr(obj, _attr_name(name))
    return ConstantVariable(None)


def _attr_name(name: VariableTracker) -> str:
    if not name.is_python_constant():
        raise Unsupported("setattr/delattr with a non-constant name")
    return name.as_python_constant()


def compile_inside(tx, model=None, *args, **kwargs):
    """``torch.compile(fn)`` (or ``tc.compile(fn)``) reached while tracing: a library
    compiling a helper it then calls (``create_block_mask(..., _compile=True)`` returns
    ``torch.compile(create_block_mask)(...)``). Inside a region already being compiled the
    helper is traced like any call, so the wrapper is the function itself, its options
    unused -- as under PyTorch's Dynamo."""
    if model is None:
        raise Unsupported("torch.compile(...) with no function, inside a compiled region")
    return model


def _comptime(tx, *args, **kwargs):
    """``torch._dynamo.comptime(fn)`` (and ``comptime.force_static(n)``...): a hook that runs
    ``fn`` on PyTorch Dynamo's compile-time context -- print its graph, pin a size. It
    computes nothing the program sees; we have no such context, so there is nothing to run
    (a size stays symbolic, guarded where it is relied on, as always)."""
    return ConstantVariable(None)


def _installed_package_probe(fn):
    """``importlib.util.find_spec("mambapy")`` / ``importlib.metadata.version(...)`` -- what
    transformers' ``is_*_available()`` helpers ask -- on a constant name: answered now, for
    real, as PyTorch's Dynamo does (``functions.py``), taking what is installed as fixed for
    the life of the process (it is not guarded). C code underneath, so anything else breaks."""
    def handler(tx, *args, **kwargs):
        if kwargs or not all(a.is_python_constant() for a in args):
            raise Unsupported(f"{fn.__module__}.{fn.__name__} on a value that is not a "
                              "Python constant")
        return ConstantVariable(fn(*[a.as_python_constant() for a in args]))
    return handler


def _callable(tx, obj):
    """``callable(obj)``: whether the object's *type* has ``__call__`` (CPython looks there,
    not in the instance), so a user class with ``__call__``, a partial, a bound method or a
    class are callable and a tensor, a number or a generator are not. A value whose type is
    unknown breaks rather than guessing."""
    if isinstance(obj, (UserFunctionVariable, UserMethodVariable, NestedUserFunctionVariable,
                        TorchFunctionVariable, BuiltinVariable, NNModuleVariable,
                        UserDefinedClassVariable, TensorMethodVariable)):
        return ConstantVariable(True)
    if obj.is_python_constant():
        return ConstantVariable(callable(obj.as_python_constant()))
    # the type's own MRO (``hasattr(cls, "__call__")`` would find the metaclass's)
    return ConstantVariable(any("__call__" in vars(k) for k in _python_type(obj).__mro__))


def _object(tx, *args, **kwargs):
    """``object()``: a new featureless object, a sentinel compared by identity (heapq's
    ``nlargest``, a library's ``missing = object()`` made inside a function). Made while
    tracing, like any instance: one that escapes the graph is a new object on every call."""
    if args or kwargs:
        raise TracedException(TypeError("object() takes no arguments"))
    return UserDefinedObjectVariable(object(), fresh=True)


def _exc_info(tx):
    """``sys.exc_info()`` (``contextlib.ExitStack.__exit__`` reads it): the exception being
    handled. Outside every handler of the traced frames it is the caller's -- none,
    guarded (a call from inside an ``except`` block traces again, and breaks here); inside
    one of theirs, a break (the traced exception is no object to hand out)."""
    if any(f.exc_stack and f.exc_stack[-1] is not None for f in tx.frames):
        raise Unsupported("sys.exc_info() inside an exception handler of the traced code")
    if sys.exc_info()[0] is not None:
        raise Unsupported("sys.exc_info() in a function called while an exception is "
                          "handled")
    tx.guards.add("EXC_INFO", f"{tx.guards.bind(sys.exc_info, 'exc_info')}()[0] is None",
                  comment="no exception is being handled where the function is called")
    return TupleVariable([ConstantVariable(None)] * 3)


def _get_ident(tx):
    """``threading.get_ident()`` (opt_einsum asks it on every contraction: ``get_ident() in
    _SHARING_STACK``): the thread's identity, fixed for the thread that runs the code --
    guarded, so the compiled code called from another thread traces again."""
    ident = threading.get_ident()
    tx.guards.add("THREAD", f"{tx.guards.bind(threading.get_ident, 'get_ident')}() == "
                  f"{ident}", comment="the thread the graph was traced in")
    return ConstantVariable(ident)


def _vars(tx, obj=None):
    """``vars(obj)``: its ``__dict__``, read as attribute reads are (guarded, with the
    writes the traced code made). ``vars()`` of the frame is not modelled."""
    if obj is None:
        raise Unsupported("vars() of the calling frame")
    return obj.var_getattr(tx, "__dict__")


def _dir(tx, obj=None):
    """``dir(obj)`` of an object of a Python class that keeps ``object.__dir__``: the names
    of its class (and the class's bases, as ``dir`` of the class gives them, fixed with the
    class the object's guards name) and of its ``__dict__``, read as attribute reads are
    (guarded, with the writes the traced code made), sorted -- torchsde's abstract-attribute
    check walks ``dir(instance)`` of every solver it makes. ``dir()`` of the frame, and of
    other objects, is not modelled.

    Mirrors: Objects/typeobject.c (object___dir___impl)."""
    if obj is None:
        raise Unsupported("dir() of the calling frame")
    if not isinstance(obj, UserDefinedObjectVariable):
        raise Unsupported(f"dir() of {obj}")
    cls = type(obj.value)
    if inspect.getattr_static(cls, "__dir__", None) is not object.__dir__ or \
            type(cls).__dir__ is not type.__dir__:
        raise Unsupported(f"dir() of a {cls.__qualname__}, whose class defines __dir__")
    own = [k.as_python_constant() for k in tx.unpack(obj.var_getattr(tx, "__dict__"))]
    return ListVariable([ConstantVariable(n) for n in sorted(set(dir(cls)) | set(own))])


_BUILTIN_HANDLERS: dict[Callable, Callable] = {
    len: _len, isinstance: _isinstance, range: _range, enumerate: _enumerate, zip: _zip,
    tuple: _tuple, list: _list, dict: _dict, reversed: _reversed, min: _minmax(min),
    max: _minmax(max), sum: _sum, getattr: _getattr, hasattr: _hasattr, type: _type,
    iter: _iter, next: _next, bool: _bool, int: _int_float(int), float: _int_float(float),
    callable: _callable, super: _super, str: _str, repr: _repr,
    inspect.signature: _signature, vars: _vars, dir: _dir,
    object: _object, sys.exc_info: _exc_info, threading.get_ident: _get_ident,
    all: _all_any(all), any: _all_any(any), sorted: _sorted, map: _map, filter: _filter,
    functools.reduce: _reduce, functools.partial: _partial, set: _set, frozenset: _frozenset,
    functools._lru_cache_wrapper: _lru_cache_wrapper,
    collections.deque: _deque, collections.namedtuple: _namedtuple, tuple.__new__: _tuple_new,
    dataclasses.replace: _replace, dataclasses.fields: _fields, dataclasses.asdict: _asdict,
    _object_init: lambda tx, *a, **k: ConstantVariable(None),
    setattr: _setattr, delattr: _delattr, object.__new__: _object_new, slice: _slice,
    importlib.util.find_spec: _installed_package_probe(importlib.util.find_spec),
    importlib.metadata.version: _installed_package_probe(importlib.metadata.version),
    torch._dynamo.comptime.comptime: _comptime, torch.compile: compile_inside,
    dict.__new__: _dict_new,
    dict.__init__: _dict_init,
}

_BUILTIN_HANDLERS.update({fn: _polyfill(poly) for fn, poly in polyfills.POLYFILLS.items()})

# Python functions with a handler for what was made while tracing, inlined for the rest
_INLINED_WHEN_UNHANDLED = {dataclasses.replace, dataclasses.fields, dataclasses.asdict}


BUILTIN_CALLABLES = {v for v in vars(builtins).values() if callable(v)}
BUILTIN_HANDLERS = _BUILTIN_HANDLERS  # callables, from any module, with a tracing rule
LATE_BOUND["BuiltinVariable"] = BuiltinVariable
LATE_BOUND["UserDefinedClassVariable"] = UserDefinedClassVariable


__all__ = [
    'BUILTIN_CALLABLES', 'BUILTIN_HANDLERS', 'BuiltinVariable', 'DataclassVariable',
    'InstanceDictVariable', 'SuperVariable', 'UserDefinedClassVariable',
    'UserDefinedObjectVariable', 'compile_inside',
]
