"""Variable trackers for constants and containers: numbers and strings, tuples, lists,
``torch.Size``, named tuples, dicts and their views, slices, iterators, sets, deques.

Constants and containers share a module because they build one another: folding an operation
on constants can give a list or a dict (``"a b".split()``), and a container's method can give a
constant. See ``variables/__init__.py`` for the whole family.

Mirrors: torch/_dynamo/variables/constant.py, lists.py, dicts.py, sets.py, iter.py.
"""

from __future__ import annotations

import builtins
import collections
import collections.abc
import enum
import inspect
import operator
import types
from typing import TYPE_CHECKING, Any

import torch

from .. import trace_rules
from ..exc import TracedException, Unsupported
from ..source import AttrSource, GetItemBySource, GetItemSource, Source, key_expr
from .base import (
    LATE_BOUND,
    BoundMethodVariable,
    VariableTracker,
    is_constant_value,
)

if TYPE_CHECKING:  # pragma: no cover
    pass

class ConstantVariable(VariableTracker):
    def __init__(self, value: Any, source: Source | None = None):
        self.value, self.source = value, source

    def python_type(self):
        return type(self.value)

    def is_python_constant(self):
        return True

    def as_python_constant(self):
        return self.value

    def as_proxy(self):
        return self.value

    def truth(self, tx):
        return bool(self.value)

    def var_getattr(self, tx, name):
        try:
            attr = getattr(self.value, name)
        except AttributeError as e:  # what the traced code may catch, or getattr's default
            raise TracedException(e) from None
        if isinstance(attr, (types.BuiltinMethodType, types.MethodWrapperType)):
            return BoundMethodVariable(self, name)  # "Relu".lower: folded when called
        if isinstance(attr, type):  # (3).__class__, an enum member's class
            return tx.wrap_nested(attr, None)
        if isinstance(attr, types.MethodType) and isinstance(attr.__func__, types.FunctionType):
            # a method written in Python of an immutable object (``signature.bind(*args)``):
            # inlined, so it may take values that are not constants
            return LATE_BOUND["UserMethodVariable"](attr.__func__, self)
        return wrap_constant_result(attr)

    def call_method(self, tx, name, args, kwargs):
        # an iterator argument (``"-".join(reversed(parts))``, a generator) is read whole
        # by the C method, as it would be: its items, if constants, are the argument
        args = [TupleVariable(tx.unpack(a)) if a.is_iterator else a for a in args]
        if all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            method = getattr(self.value, name)
            try:
                value = method(*[a.as_python_constant() for a in args],
                               **{k: v.as_python_constant() for k, v in kwargs.items()})
            except Exception as e:  # ``"ab".index("z")``: the traced code may catch it
                raise TracedException(e) from None
            return wrap_constant_result(value)
        if isinstance(self.value, (int, float)) and name.startswith("__"):
            op = getattr(operator, name.strip("_"), None)
            if op is not None and len(args) == 1:
                return tx.binary_op(op, self, args[0])
        raise Unsupported(f"method {name} of constant {self.value!r} on non-constant args")

    def unpack(self, tx):
        if isinstance(self.value, (tuple, range, str, bytes, frozenset,
                                   types.MappingProxyType, *_MAPPING_VIEWS)):
            return [ConstantVariable(v) for v in self.value]
        raise Unsupported(f"iteration over constant {self.value!r}")

    def reconstruct(self, rc):
        return self.value

    def __repr__(self):
        return f"ConstantVariable({self.value!r})"


class RangeVariable(ConstantVariable):
    """``range(start, n, step)`` up to a symbolic size ``n``: its steps are those of the
    example (``value``, a guard keeps their number), but ``.stop`` is the size ``n`` (a
    :class:`SymIntVariable`), not the example's value of it."""

    def __init__(self, value: range, stop: VariableTracker):
        super().__init__(value)
        self.stop = stop

    def var_getattr(self, tx, name):
        return self.stop if name == "stop" else super().var_getattr(tx, name)

    def reconstruct(self, rc):
        return range(self.value.start, rc(self.stop), self.value.step)

    def __repr__(self):
        return f"RangeVariable({self.value.start}, {self.stop}, {self.value.step})"


# dict classes whose constant value is rebuilt as that class (no state besides the items)
_REBUILT_DICTS = (dict, collections.OrderedDict, collections.Counter)


def wrap_constant_result(value: Any) -> VariableTracker:
    """Wrap the result of folding an operation on constants."""
    if is_constant_value(value):
        return ConstantVariable(value)
    if type(value) is tuple:   # ``Optional[float].__args__``: classes among constants
        return TupleVariable([wrap_constant_result(v) for v in value])
    if isinstance(value, list) and all(is_constant_value(v) for v in value):
        return ListVariable([ConstantVariable(v) for v in value])
    if isinstance(value, set) and all(is_constant_value(v) for v in value):
        return SetVariable([ConstantVariable(v) for v in value])
    if isinstance(value, dict) and all(is_constant_value(v) for v in value.values()):
        # (a Counter or an OrderedDict folded from constants stays one: its own methods
        # and operators -- ``Counter.__add__``, ``most_common`` -- are what the code calls)
        kind = type(value) if type(value) in _REBUILT_DICTS else dict
        return ConstDictVariable({k: ConstantVariable(v) for k, v in value.items()},
                                 dict_cls=kind)
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)) or (
            isinstance(value, type) and value.__module__ == "builtins"):
        return LATE_BOUND["BuiltinVariable"](value)
    if isinstance(value, type):  # ``type(obj)`` folded: a class, known by identity
        return LATE_BOUND["UserDefinedClassVariable"](value)
    if trace_rules.is_pure_instance(value):  # ``np.finfo(np.float32).dtype``
        return ConstantVariable(value)
    if isinstance(value, enum.Enum):   # ``Flag.A | Flag.B``: a member too, immutable
        return ConstantVariable(value)
    if isinstance(value, BaseException):
        # ``e.__context__``, ``e.__cause__`` of a caught exception: a value, as ``e`` is
        return ConstantVariable(value)
    if isinstance(value, _MAPPING_VIEWS) and all(is_constant_value(v) for v in value):
        # a view of a mapping folding read from a constant (``inspect.signature(fn)
        # .parameters.keys()``): nothing can change the mapping, so the view is constant
        return ConstantVariable(value)
    raise Unsupported(f"folding produced a non-constant {type(value).__name__}")


_MAPPING_VIEWS = (collections.abc.KeysView, collections.abc.ValuesView,
                  collections.abc.ItemsView)


# --- containers ---------------------------------------------------------------------------------
class BaseListVariable(VariableTracker):
    python_cls: type   # tuple, list, torch.Size, deque...: what the tracker rebuilds
    mutable = False

    def __init__(self, items: list[VariableTracker], source: Source | None = None):
        self.items, self.source = list(items), source
        self.mutated = False

    def python_type(self):
        return self.python_cls

    def is_python_constant(self):
        return all(i.is_python_constant() for i in self.items)

    def as_python_constant(self):
        return self.python_cls([i.as_python_constant() for i in self.items])

    def as_proxy(self):
        return self.python_cls([i.as_proxy() for i in self.items])

    def example(self):
        return self.python_cls([i.example() for i in self.items])

    def unpack(self, tx):
        return list(self.items)

    def truth(self, tx):
        return bool(self.items)

    def children(self):
        return list(self.items)

    def reconstruct(self, rc):
        if self.source is not None and not getattr(self, "mutated", False):
            return self.source.get(rc.env)
        return self.python_cls(self.rebuild_items(rc))

    def rebuild_items(self, rc) -> list:
        return [rc(i) for i in self.items]

    def search(self, tx, name: str, args: list[VariableTracker]) -> VariableTracker:
        """``index(x[, start[, stop]])`` and ``count(x)`` as CPython runs them on a list,
        tuple or deque: element by element, each compared by identity first and then by
        ``element == x`` (``tx.element_matches``), so tensors and modules are found by
        identity and objects by their own ``__eq__``; ``index`` stops at the first match."""
        kind = self.python_cls.__name__
        if not args:
            raise TracedException(TypeError(f"{kind}.{name}() takes at least 1 argument"))
        item, bounds = args[0], [a.as_python_constant() for a in args[1:]]
        if name == "count":
            return ConstantVariable(sum(tx.element_matches(e, item, f"{kind}.count")
                                        for e in self.items))
        # ``index(x, start)`` searches from start to the end: the bounds are a slice's
        # start and stop (``slice(start)`` alone would be a stop)
        start, stop = (*bounds, None, None)[:2]
        for i in range(len(self.items))[start:stop]:
            if tx.element_matches(self.items[i], item, f"{kind}.index"):
                return ConstantVariable(i)
        shown = repr(item.as_python_constant()) if item.is_python_constant() else "x"
        raise TracedException(ValueError("tuple.index(x): x not in tuple" if kind == "tuple"
                                         else f"{shown} is not in {kind}"))

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        k = key.as_python_constant()
        if isinstance(k, slice):
            return type(self)(self.items[k])
        if isinstance(k, int) and not -len(self.items) <= k < len(self.items):
            raise TracedException(IndexError(f"{self.python_cls.__name__} index out of range"))
        return self.items[k]

    def __repr__(self):
        return f"{type(self).__name__}({self.items!r})"


class TupleVariable(BaseListVariable):
    python_cls: type = tuple

    def call_method(self, tx, name, args, kwargs):
        if name in ("index", "count"):
            return self.search(tx, name, args)
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        raise Unsupported(f"tuple.{name}")


class SizeVariable(TupleVariable):
    """``tensor.shape``: a tuple of ints, some maybe symbolic."""
    python_cls = torch.Size

    def as_proxy(self):
        return tuple(i.as_proxy() for i in self.items)

    def call_method(self, tx, name, args, kwargs):
        if name == "numel":
            result: VariableTracker = ConstantVariable(1)
            for s in self.items:
                result = tx.binary_op(operator.mul, result, s)
            return result
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, rc):
        return torch.Size([rc(i) for i in self.items])


class NamedTupleVariable(TupleVariable):
    """A namedtuple (user records, ``torch.return_types.max``): fields by name too. The
    methods its class defines in Python (a ``typing.NamedTuple`` with an ``add(self)``) are
    inlined with this tracker as ``self``; ``class_source`` is the class it was made from,
    when that class has a source, through which what is read from the class is guarded."""

    def __init__(self, items, tuple_cls: type, source=None, class_source: Source | None = None):
        super().__init__(items, source)
        self.tuple_cls = tuple_cls
        self.class_source = class_source

    def python_type(self):
        return self.tuple_cls

    def as_python_constant(self):
        # an instance of its class, as the traced code sees it (``isinstance(p, Point)``
        # folded on a plain tuple was False): the storage alone, no ``__new__`` run
        values = [i.as_python_constant() for i in self.items]
        if self.tuple_cls.__module__ == "torch.return_types":
            return self.tuple_cls(values)
        return tuple.__new__(self.tuple_cls, values)

    @property
    def fields(self) -> tuple[str, ...]:
        cls = self.tuple_cls
        return tuple(getattr(cls, "_fields", ()) or getattr(cls, "__match_args__", ()))

    def var_getattr(self, tx, name):
        if name in self.fields:
            return self.items[self.fields.index(name)]
        if name in ("_replace", "_asdict", "_make") and hasattr(self.tuple_cls, "_fields"):
            return BoundMethodVariable(self, name)
        static = inspect.getattr_static(self.tuple_cls, name, None)
        if isinstance(static, (types.FunctionType, staticmethod, classmethod, property)) and \
                not _namedtuple_machinery(self.tuple_cls, name):
            return self._class_method(tx, name, static)
        if name not in vars(tuple) and name in dir(self.tuple_cls) and \
                is_constant_value(getattr(self.tuple_cls, name)):
            # a class-level constant (``_fields``, ``_field_defaults`` keys, ``MAX = 4``)
            cls_src = self._class_attr_source(name)
            return tx.wrap_nested(getattr(self.tuple_cls, name), cls_src)
        return super().var_getattr(tx, name)

    def _class_attr_source(self, name: str) -> Source | None:
        cls_src = self.class_source if self.class_source is not None else \
            AttrSource(self.source, "__class__") if self.source is not None \
            else None
        return AttrSource(cls_src, name) if cls_src is not None else None

    def _class_method(self, tx, name: str, static: Any) -> VariableTracker:
        """A method (or static/class method, or property) the class defines in Python: what
        the class gave is what runs, guarded by identity where the class has a source."""
        src = self._class_attr_source(name)
        if src is not None:
            if isinstance(static, (types.FunctionType, property)):
                tx.guards.ID_MATCH(src, static)
            elif isinstance(static, staticmethod):
                tx.guards.ID_MATCH(src, static.__func__)
            else:  # a classmethod read on the class is a new bound method each time
                tx.guards.ID_MATCH(AttrSource(src, "__func__"), static.__func__)
        if isinstance(static, types.FunctionType):
            return LATE_BOUND["UserMethodVariable"](static, self)
        if isinstance(static, staticmethod):
            return tx.wrap_nested(static.__func__, None)
        if isinstance(static, classmethod):
            cls_vt = LATE_BOUND["UserDefinedClassVariable"](self.tuple_cls)
            return LATE_BOUND["UserMethodVariable"](static.__func__, cls_vt)
        if static.fget is None:
            raise TracedException(AttributeError(f"property {name!r} has no getter"))
        return tx.inline_user_function(static.fget, [self], {})

    def call_method(self, tx, name, args, kwargs):
        if name == "_replace" and not args and set(kwargs) <= set(self.fields):
            items = [kwargs.get(f, item) for f, item in zip(self.fields, self.items)]
            return NamedTupleVariable(items, self.tuple_cls, class_source=self.class_source)
        if name == "_asdict" and not args and not kwargs:
            return ConstDictVariable(dict(zip(self.fields, self.items)))
        if name == "_make" and len(args) == 1 and not kwargs:
            items = tx.unpack(args[0])
            if len(items) != len(self.fields):
                raise TracedException(TypeError(
                    f"Expected {len(self.fields)} arguments, got {len(items)}"))
            return NamedTupleVariable(items, self.tuple_cls, class_source=self.class_source)
        return super().call_method(tx, name, args, kwargs)

    def getitem(self, tx, key):
        k = key.as_python_constant()
        return TupleVariable(self.items[k]) if isinstance(k, slice) else self.items[k]

    def reconstruct(self, rc):
        if self.source is not None:
            return self.source.get(rc.env)
        items = [rc(i) for i in self.items]
        if self.tuple_cls.__module__ == "torch.return_types":
            return self.tuple_cls(items)
        if plain_tuple_subclass(self.tuple_cls):   # (its own __new__ may take anything)
            return tuple.__new__(self.tuple_cls, items)
        return self.tuple_cls(*items)


_TUPLE_READS = ("__getitem__", "__iter__", "__len__", "__contains__", "__reversed__",
                "__bool__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
                "__hash__", "__add__", "__radd__", "__mul__", "__rmul__", "index", "count",
                "__init__", "__setattr__", "__getattribute__", "__getattr__")


def plain_tuple_subclass(cls: type) -> bool:
    """A tuple subclass that is a tuple with methods (``class Shape(tuple)`` with a
    property, not a namedtuple): none of its classes overrides how a tuple's items are
    read, compared or combined, nor ``__init__`` or attribute access, and its metaclass is
    ``type`` -- so a tuple tracker of that class (:class:`NamedTupleVariable`, no fields)
    is the object. One that overrides them (e3nn's ``Irreps.__getitem__``) is an object."""
    if not (isinstance(cls, type) and issubclass(cls, tuple)) or cls is tuple or \
            type(cls) is not type or hasattr(cls, "_fields"):
        return False
    own = [k for k in cls.__mro__ if k not in (tuple, object)]
    return not any(name in vars(k) for k in own for name in _TUPLE_READS) and \
        not any(getattr(k, "__slots__", ()) for k in own)


def _namedtuple_machinery(cls: type, name: str) -> bool:
    """Is ``name`` one of the methods ``collections.namedtuple`` itself writes into the class
    (``__new__``, ``_make``, ``__repr__``...), rather than one the user defined?"""
    for klass in cls.__mro__:
        if name in vars(klass):
            fn = vars(klass)[name]
            fn = getattr(fn, "__func__", fn)
            return getattr(fn, "__module__", None) == "collections" or \
                str(getattr(fn, "__globals__", {}).get("__name__", "")).startswith("namedtuple_")
    return False


def _extend_item_by_item(tx, iterable: VariableTracker, add) -> bool:
    """``seq.extend(it)`` of a lazy iterator (a generator, ``map``...): CPython's
    ``list.extend`` and ``deque.extend`` append each item as the iterator makes it, so an
    iterator that reads the sequence sees the items added so far -- ultralytics' C2f
    chains its bottlenecks with ``y.extend(m(y[-1]) for m in self.m)``, each reading the
    one before. True when done so; False for a container, whose items are all there
    before the first is added."""
    if not getattr(iterable, "is_iterator", False):
        return False
    it = tx.get_iter(iterable)
    while True:
        try:
            item = tx.iter_next(it)
        except StopIteration:
            return True
        add(item)


class ListVariable(BaseListVariable):
    python_cls: type = list
    mutable = True
    empty_pop_message = "pop from empty list"

    def call_method(self, tx, name, args, kwargs):
        if name in ("append", "extend", "insert", "pop", "clear", "reverse", "remove",
                    "sort", "__setitem__", "__delitem__"):
            tx.record_mutation(self)
            if name == "append":
                self.items.append(args[0])
            elif name == "extend":
                if not _extend_item_by_item(tx, args[0], self.items.append):
                    self.items.extend(tx.unpack(args[0]))
            elif name == "insert":
                self.items.insert(args[0].as_python_constant(), args[1])
            elif name == "pop":
                if not self.items:
                    raise TracedException(IndexError(self.empty_pop_message))
                return self.items.pop(*[a.as_python_constant() for a in args])
            elif name == "clear":
                self.items.clear()
            elif name == "reverse":
                self.items.reverse()
            elif name == "__setitem__":
                self.setitem(tx, args[0], args[1])
            elif name == "__delitem__":
                del self.items[args[0].as_python_constant()]
            elif name == "remove":   # the first element ``index`` finds, by CPython's test
                kind = self.python_cls.__name__
                for i, element in enumerate(self.items):
                    if tx.element_matches(element, args[0], f"{kind}.remove"):
                        del self.items[i]
                        break
                else:
                    raise TracedException(ValueError(f"{kind}.remove(x): x not in {kind}"))
            elif name == "sort" and not args:
                # ``ts.sort(key=...)``: as ``sorted`` orders them (keys computed by the
                # traced key function, stable), whatever the items are
                self.items = list(tx.call(tx.wrap_nested(builtins.sorted, None), [self],
                                          kwargs).items)
            else:
                if not self.is_python_constant():
                    raise Unsupported(f"list.{name} on non-constant items")
                values = self.as_python_constant()
                getattr(values, name)(*[a.as_python_constant() for a in args],
                                      **{k: v.as_python_constant() for k, v in kwargs.items()})
                self.items = [ConstantVariable(v) for v in values]
            return ConstantVariable(None)
        if name in ("index", "count"):
            return self.search(tx, name, args)
        if name == "copy":
            return ListVariable(self.items)
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        raise Unsupported(f"list.{name}")

    def setitem(self, tx, key, value):
        tx.record_mutation(self)
        k = key.as_python_constant()
        if isinstance(k, slice):
            self.items[k] = tx.unpack(value)
        else:
            self.items[k] = value


_ABSENT = object()
# dict classes whose ``d[k] = d[k]`` changes nothing (no order moved, no hook called)
_PLAIN_SETITEM = (dict, collections.OrderedDict, collections.defaultdict, collections.Counter)


class ConstDictVariable(VariableTracker):
    """A dict with constant keys; ``dict_cls`` keeps ``OrderedDict``/``defaultdict`` apart
    from ``dict`` (the rebuilt value has the same class, and ``default_factory``).

    A dict from outside starts *lazy* (``lazy = (tx, the real dict)``): a read of one key
    (``d[k]``, ``d.get(k)``, ``k in d``) wraps that entry alone and guards only that the key
    is (or is not) there, as Dynamo does -- a registry that other code adds keys to
    (transformers' ``_CAN_RECORD_REGISTRY``) does not invalidate the graph. Anything that
    depends on every key (``items``: iteration, ``len``, a write...) wraps them all and
    guards the full key list."""

    outside: dict | None = None   # the real dict, from outside (kept after realizing)
    # a dict subclass's own attributes set while tracing (frozendict's cached hash); a
    # write replaces the mapping, so a rollback's copy of this tracker keeps the old one
    attrs: Any = types.MappingProxyType({})

    def __init__(self, items: dict[Any, VariableTracker], source: Source | None = None,
                 dict_cls: type = dict, default_factory: VariableTracker | None = None,
                 lazy: tuple[Any, dict] | None = None):
        self.items, self.source = dict(items), source
        self.mutated = False
        self.dict_cls, self.default_factory = dict_cls, default_factory
        self.lazy = lazy
        self.outside = lazy[1] if lazy is not None else None   # the real dict, from outside
        self.attrs = {}
        # tensor keys (``state[p]``) by identity -> the tracker of the tensor: its source
        # names the key in guards, and in the rebuilt dict the tensor of *that* call
        self.key_trackers: dict[int, VariableTracker] = {}

    @property
    def items(self) -> dict[Any, VariableTracker]:
        if self.lazy is not None:
            self._realize_all()
        return self._items

    @items.setter
    def items(self, value: dict[Any, VariableTracker]) -> None:
        self._items = value

    def _realize_all(self) -> None:
        assert self.lazy is not None and self.source is not None   # a dict from outside
        tx, value = self.lazy
        if any(isinstance(k, torch.Tensor) for k in value):
            raise Unsupported("every key of a dict keyed by tensors (an optimizer's state): "
                              "only lookups of one key are captured")
        tx._journal(self)  # an instruction rolled back leaves the dict lazy again
        self.lazy = None
        tx.guards.DICT_KEYS(self.source, value)
        self._items = {k: self._items[k] if k in self._items else
                       tx.wrap_nested(v, GetItemSource(self.source, k))
                       for k, v in value.items()}

    def _key(self, key: VariableTracker, tx: Any = None) -> Any:
        """:func:`dict_key`, remembering the tracker of a key that is not a constant (a
        tensor, an object, a tuple holding one): the rebuilt dict holds what that tracker
        rebuilds. A constant key forgets any tracker remembered under its ``id`` (one of an
        equal tuple already freed, whose address CPython reuses)."""
        k = dict_key(key, tx)
        if isinstance(k, torch.Tensor) or not key.is_python_constant():
            self.key_trackers[id(k)] = key
        else:
            self.key_trackers.pop(id(k), None)
        return k

    def lookup(self, key: VariableTracker, tx: Any = None) -> VariableTracker | None:
        """The entry for ``key``, or None when there is none (guarding only that key)."""
        k = self._key(key, tx)
        if self.lazy is None or k in self._items:
            return self._items.get(k)
        tx, value = self.lazy
        source = self.source
        assert source is not None   # (only a dict from outside is lazy)
        present = k in value
        # a tensor or an object: named by its source, not the object seen now
        entry: Source
        if isinstance(k, torch.Tensor) or not key.is_python_constant():
            if key.source is None:
                raise Unsupported(f"a lookup of {key} (made while tracing, so with no name "
                                  "to guard by) in a dict from outside the compiled region")
            shown, entry = key.source.name(), GetItemBySource(source, key.source)
        else:
            shown, entry = key_expr(k), GetItemSource(source, k)
        tx.guards.add("DICT_CONTAINS", f"{shown} {'in' if present else 'not in'} "
                      f"{source.name()}", source)
        if not present:
            return None
        tx._journal(self)
        self._items[k] = tx.wrap_nested(value[k], entry)
        return self._items[k]

    def python_type(self):
        return self.dict_cls

    def truth(self, tx):
        return bool(self.items)

    def unpack(self, tx):
        return [self.key_trackers.get(id(k)) or ConstantVariable(k) for k in self.items]

    def as_proxy(self):
        return {k: v.as_proxy() for k, v in self.items.items()}

    def example(self):
        return {k: v.example() for k, v in self.items.items()}

    def is_python_constant(self):
        # (not with attributes of its own: the plain dict below would drop them)
        return not self.attrs and all(v.is_python_constant() for v in self.items.values())

    def as_python_constant(self):
        items = {k: v.as_python_constant() for k, v in self.items.items()}
        return self.dict_cls(items) if self.dict_cls in _REBUILT_DICTS else items

    def children(self):
        # (entries never read are the outside dict's)
        return [*self._items.values(), *self.attrs.values()]

    def getitem(self, tx, key):
        found = self.lookup(key, tx)
        if found is None:
            k = self._key(key, tx)
            if self.default_factory is not None:  # defaultdict: d[k] inserts factory()
                value = self.default_factory.call_function(tx, [], {})
                self.setitem(tx, key, value)
                return value
            missing = inspect.getattr_static(self.dict_cls, "__missing__", None)
            if isinstance(missing, types.FunctionType):  # a subclass's rule (Counter: 0)
                return tx.inline_user_function(missing, [self, key], {})
            raise TracedException(KeyError(k))
        return found

    def setitem(self, tx, key, value):
        k = self._key(key, tx)
        if self._items.get(k, _ABSENT) is value and self.dict_cls in _PLAIN_SETITEM:
            # ``d[k] = v`` of the object already there (an optimizer puts each momentum
            # buffer back in its state every step): the dict is as it was, so no write to
            # replay and no guard on all its keys
            return
        tx.record_mutation(self)
        self.items[k] = value

    def var_getattr(self, tx, name):
        """``d.name`` -- for a dict subclass, its attributes as Python finds them: the
        class's methods and properties; an attribute of the instance itself (a config
        object that sets them, ``EasyDict``), read through its source; then the class's
        ``__getattr__`` (``AttrDict``: ``d.lr`` is ``d["lr"]``)."""
        if name in self.attrs:
            return self.attrs[name]
        static = inspect.getattr_static(self.dict_cls, name, None)
        if isinstance(static, types.FunctionType):
            return LATE_BOUND["UserMethodVariable"](static, self)  # a dict subclass's method
        if isinstance(static, property) and isinstance(static.fget, types.FunctionType):
            return tx.inline_user_function(static.fget, [self], {})
        if callable(static):
            return BoundMethodVariable(self, name)
        if self.dict_cls not in (dict, collections.OrderedDict, collections.defaultdict):
            own = getattr(self.outside, "__dict__", None) or {}
            if name in own and self.source is not None:
                return tx.wrap_nested(own[name], AttrSource(self.source, name))
            if static is not None and not hasattr(type(static), "__get__") and \
                    self.source is not None:   # a constant of the class
                return tx.wrap_nested(static, AttrSource(self.source, name))
            hook = inspect.getattr_static(self.dict_cls, "__getattr__", None)
            if isinstance(hook, types.FunctionType):
                return tx.inline_user_function(hook, [self, ConstantVariable(name)], {})
            if hook in (dict.__getitem__, dict.get):  # ``__getattr__ = dict.__getitem__``
                return self.call_method(tx, hook.__name__, [ConstantVariable(name)], {})
        if self.source is None and static is None:
            # made while tracing, with no __getattr__: its attributes are all known
            raise TracedException(AttributeError(
                f"{self.dict_cls.__name__!r} object has no attribute {name!r}"))
        raise Unsupported(f"attribute {name!r} of a {self.dict_cls.__name__}")

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "get":
            found = self.lookup(args[0], tx)
            if found is not None:
                return found
            return args[1] if len(args) > 1 else ConstantVariable(None)
        if name in ("keys", "values", "items"):
            return DictViewVariable(self, name)  # live: sees later changes to the dict
        if name in ("__setitem__", "update", "pop", "setdefault", "clear", "__delitem__",
                    "__init__", "popitem"):
            tx.record_mutation(self)
            if name == "popitem":   # the last entry (an OrderedDict's first, if last=False)
                if not self.items:
                    raise TracedException(KeyError("popitem(): dictionary is empty"))
                last = kwargs.get("last", args[0] if args else ConstantVariable(True))
                k = next(reversed(self.items)) if last.as_python_constant() or \
                    self.dict_cls is dict else next(iter(self.items))
                return TupleVariable([self.key_trackers.get(id(k)) or ConstantVariable(k),
                                      self.items.pop(k)])
            if name == "__setitem__":
                self.items[self._key(args[0], tx)] = args[1]
            elif name in ("update", "__init__") and args and not isinstance(
                    args[0], ConstDictVariable) and callable(
                    getattr(args[0].python_type(), "keys", None)):
                # a mapping that is not a dict (a Mapping class, a ModuleDict): as CPython
                # does, ``keys()`` then ``m[k]`` for each -- never iterating ``m`` itself
                for k in tx.unpack(args[0].call_method(tx, "keys", [], {})):
                    self.items[self._key(k, tx)] = tx.binary_op(operator.getitem, args[0], k)
                self.items.update(kwargs)
            elif name in ("update", "__init__") and args and not isinstance(
                    args[0], ConstDictVariable):  # from (key, value) pairs
                for pair in tx.unpack(args[0]):
                    k, v = tx.unpack(pair)
                    self.items[self._key(k, tx)] = v
                self.items.update(kwargs)
            elif name in ("update", "__init__"):
                other = args[0] if args else ConstDictVariable(kwargs)
                if not isinstance(other, ConstDictVariable):
                    raise Unsupported("dict.update with a non-dict")
                self.items.update(other.items)
                self.key_trackers.update(other.key_trackers)
                self.items.update(kwargs if args else {})
            elif name == "pop":
                k = self._key(args[0], tx)
                if k in self.items:
                    return self.items.pop(k)
                if len(args) > 1:
                    return args[1]
                raise TracedException(KeyError(k))
            elif name == "setdefault":
                k = self._key(args[0], tx)
                return self.items.setdefault(k, args[1] if len(args) > 1
                                             else ConstantVariable(None))
            elif name == "__delitem__":
                del self.items[self._key(args[0], tx)]
            else:
                self.items.clear()
            return ConstantVariable(None)
        if name == "copy":
            copied = ConstDictVariable(self.items, dict_cls=self.dict_cls,
                                       default_factory=self.default_factory)
            copied.key_trackers = dict(self.key_trackers)
            return copied
        if name == "fromkeys":  # ``d.fromkeys(keys)``: the class method, on d's class
            return tx.call(tx.wrap_nested(self.dict_cls.fromkeys, None), args, kwargs)
        if name == "__contains__":
            return ConstantVariable(self.lookup(args[0], tx) is not None)
        if name == "move_to_end" and self.dict_cls is not dict:
            tx.record_mutation(self)
            k = self._key(args[0], tx)
            last = kwargs["last"].as_python_constant() if "last" in kwargs else \
                (args[1].as_python_constant() if len(args) > 1 else True)
            value = self.items.pop(k)
            self.items = {k: value, **self.items} if not last else {**self.items, k: value}
            return ConstantVariable(None)
        raise Unsupported(f"dict.{name}")

    def store_attr(self, tx, name: str, value: VariableTracker, hooked: bool = False) -> None:
        """``d.name = v`` as Python runs it on a dict subclass: the class's own
        ``__setattr__`` first -- one written in Python is inlined (a frozen mapping's raises,
        one that transforms the value is obeyed), ``__setattr__ = dict.__setitem__``
        (``AttrDict``) writes an item -- and only object's generic rule stores an attribute:
        ``self._hash = None`` in a dict subclass's ``__new__``/``__init__``, kept here and set
        on the rebuilt dict. ``hooked``: object's rule called directly (``object.
        __setattr__(self, "_hash", -1)`` in frozendict's ``__new__``, ``super().__setattr__``
        from the class's hook), which bypasses the class's."""
        hook = inspect.getattr_static(self.dict_cls, "__setattr__", object.__setattr__)
        if not hooked and hook is not object.__setattr__:
            if isinstance(hook, types.FunctionType):
                tx.inline_user_function(hook, [self, ConstantVariable(name), value], {})
                return
            if hook is dict.__setitem__:
                self.call_method(tx, "__setitem__", [ConstantVariable(name), value], {})
                return
            raise Unsupported(f"assignment to attribute {name!r} of a "
                              f"{self.dict_cls.__name__}, whose __setattr__ ({hook!r}) is not "
                              "written in Python")
        if self.dict_cls is dict:   # (a plain dict has no __dict__)
            raise TracedException(AttributeError(
                f"'dict' object has no attribute {name!r}"))
        if self.source is not None:
            raise Unsupported(f"assignment to attribute {name!r} of a "
                              f"{self.dict_cls.__name__} from outside the compiled region")
        tx._journal(self)
        self.attrs = {**self.attrs, name: value}

    def rebuild_items(self, rc) -> dict:
        trackers = self.key_trackers
        return {rc(trackers[id(k)]) if id(k) in trackers else k: rc(v)
                for k, v in self.items.items()}

    def reconstruct(self, rc):
        if self.source is not None and not self.mutated:
            return self.source.get(rc.env)
        items = self.rebuild_items(rc)
        if hasattr(self.dict_cls, "default_factory"):  # a defaultdict
            factory = self.default_factory
            made = self.dict_cls(rc(factory) if factory is not None else None, items)
        elif self.attrs and self.dict_cls.__module__ != "collections":
            # a dict subclass's state as tracing left it, without running its class's code
            # again (the way copy and pickle rebuild an object): dict's own storage
            made = dict.__new__(self.dict_cls)
            dict.update(made, items)
        else:
            made = items if self.dict_cls is dict else self.dict_cls(items)
        if self.attrs:
            made.__dict__.update({name: rc(v) for name, v in self.attrs.items()})
        return made

    def __repr__(self):
        return f"ConstDictVariable({self._items!r}{', lazy' if self.lazy else ''})"


def dict_key(key: VariableTracker, tx: Any = None) -> Any:
    """The Python key a tracker stands for: its constant, or -- for a tensor that is a graph
    input, an optimizer's parameter indexing ``self.state`` -- the tensor itself (a tensor
    hashes by identity; guards and the rebuilt dict name it through its source, so a later
    call with other tensors is checked and written with those). A tensor the graph computes
    has no identity to key by until it runs.

    Keys that hash and compare by identity (:func:`identity_member`: a plain object, a
    module, a function) are the objects themselves, and a tuple key is the tuple of its
    items' keys: FrEIA's graph keeps ``outs[node, 0] = tensor``, its nodes plain objects.
    Which entries such keys find depends on which of them are the same object, so an object
    from outside is guarded to be this very one (``ID_MATCH``, through ``tx``; without a
    ``tx`` to guard with, a graph break)."""
    if isinstance(key, LATE_BOUND["TensorVariable"]):
        if key.real is None:
            raise Unsupported("a dict keyed by a tensor the graph computes")
        return key.real
    if key.is_python_constant():
        return key.as_python_constant()
    if isinstance(key, TupleVariable):
        return tuple(dict_key(item, tx) for item in key.items)
    member = identity_member(key)
    if member is None:
        raise Unsupported(f"a dict keyed by {key} (not a constant, nor an object that hashes "
                          "by identity)")
    if key.source is not None:
        if tx is None:
            raise Unsupported(f"a dict keyed by {key}, an object from outside, where its "
                              "identity cannot be guarded")
        tx.guards.ID_MATCH(key.source, member)
    return member


class AttributeDictVariable(ConstDictVariable):
    """``obj.__dict__`` of an object made while tracing: a live, read-only view of its
    attributes (``to_dict`` reads it after ``setattr`` calls; ``register_buffer`` checks
    ``"_buffers" not in self.__dict__``). A subclass says what its items are (``live_items``) and
    what the object is (``what``, for the break's reason). A write through the view would
    bypass the owner's pending writes, so it is a graph break."""

    what = "an object made while tracing"
    _WRITES = frozenset({"__setitem__", "update", "pop", "setdefault", "clear", "__delitem__",
                         "popitem"})

    def __init__(self, owner: VariableTracker):
        self.owner, self.source, self.lazy = owner, None, None
        self.mutated, self.dict_cls, self.default_factory = False, dict, None
        self.key_trackers, self.attrs = {}, {}   # (attribute names: str keys only)

    @property
    def _items(self) -> dict[str, VariableTracker]:
        return self.live_items()

    @_items.setter
    def _items(self, value) -> None:
        raise Unsupported(f"writing to the __dict__ of {self.what}")

    def live_items(self) -> dict[str, VariableTracker]:
        """The object's attributes now, as trackers (each subclass says how)."""
        raise NotImplementedError

    def setitem(self, tx, key, value):
        raise Unsupported(f"writing to the __dict__ of {self.what}")

    def call_method(self, tx, name, args, kwargs):
        if name in self._WRITES:
            raise Unsupported(f"writing to the __dict__ of {self.what}")
        return super().call_method(tx, name, args, kwargs)

    def children(self):
        return [self.owner]

    def reconstruct(self, rc):
        return rc(self.owner).__dict__


class DictViewVariable(VariableTracker):
    """``d.keys()`` / ``d.values()`` / ``d.items()``: a live view of a dict tracker."""

    def __init__(self, dict_vt: ConstDictVariable, kind: str):
        self.dict_vt, self.kind = dict_vt, kind

    def python_type(self):
        return type(getattr({}, self.kind)())

    def unpack(self, tx):
        d = self.dict_vt.items
        if self.kind == "keys":
            return [self.dict_vt.key_trackers.get(id(k)) or ConstantVariable(k) for k in d]
        if self.kind == "values":
            return list(d.values())
        return [TupleVariable([self.dict_vt.key_trackers.get(id(k)) or ConstantVariable(k), v])
                for k, v in d.items()]

    def is_python_constant(self):
        return self.kind == "keys" or self.dict_vt.is_python_constant()

    def as_python_constant(self):
        if self.kind == "keys":
            return dict.fromkeys(self.dict_vt.items).keys()
        return getattr(self.dict_vt.as_python_constant(), self.kind)()

    def truth(self, tx):
        return bool(self.dict_vt.items)

    def call_method(self, tx, name, args, kwargs):
        if name == "__len__":
            return ConstantVariable(len(self.dict_vt.items))
        if name == "__contains__" and self.kind == "keys":
            return ConstantVariable(dict_key(args[0], tx) in self.dict_vt.items)
        if name == "isdisjoint" and self.kind == "keys":
            other = {a.as_python_constant() for a in tx.unpack(args[0])}
            return ConstantVariable(not (set(self.dict_vt.items) & other))
        raise Unsupported(f"dict_{self.kind}.{name}")

    def children(self):
        return [self.dict_vt]

    def reconstruct(self, rc):
        return getattr(rc(self.dict_vt), self.kind)()

    def __repr__(self):
        return f"DictViewVariable({self.kind})"


class SliceVariable(VariableTracker):
    def __init__(self, parts: list[VariableTracker]):
        self.parts = parts

    def is_python_constant(self):
        return all(p.is_python_constant() for p in self.parts)

    def as_python_constant(self):
        return slice(*[p.as_python_constant() for p in self.parts])

    def as_proxy(self):
        return slice(*[p.as_proxy() for p in self.parts])

    def example(self):
        return slice(*[p.example() for p in self.parts])

    def children(self):
        return list(self.parts)

    def reconstruct(self, rc):
        return slice(*[rc(p) for p in self.parts])


class SetVariable(VariableTracker):
    """A ``set``: built while tracing (literals, ``set()``, comprehensions), or from outside
    (``source``: its members guarded; a write to it is replayed on the real set after the
    graph, like a list's). Members are constants, or objects that hash and compare by
    identity (modules, a graph input's tensor, functions, plain objects: ``set(experts)``),
    held as the objects themselves so Python's own set does the work; ``trackers`` maps
    those back to what the trace knows of them."""

    def __init__(self, items: list[VariableTracker], source: Source | None = None,
                 tx: Any = None):
        self.trackers: dict[int, VariableTracker] = {}
        self.values = {self.key(i, tx): None for i in items}  # insertion order
        self.mutated = False
        self.source = source

    def key(self, item: VariableTracker, tx: Any = None) -> Any:
        """The Python member ``item`` stands for (its tracker remembered). A tuple of
        constants -- a static ``x.shape`` too -- is a constant member; a tuple holding a
        list raises CPython's ``unhashable type`` inside the trace. How many members a set
        has depends on which of them are the same object, so an object from outside is
        guarded (through ``tx``) to be this very one: ``{a, b}`` traced for two objects was
        reused, two members long, when ``a is b``. (Without ``tx``: a set's copy, whose
        members were guarded when they were added.)"""
        if item.is_python_constant() and not isinstance(item, (ListVariable,
                                                               ConstDictVariable)):
            value = item.as_python_constant()
            try:
                hash(value)
            except TypeError as e:
                raise TracedException(e) from None
            return value
        member = identity_member(item)
        if member is None:
            raise Unsupported(f"a set holding {item} (not a constant, nor an object that "
                              "hashes by identity)")
        if tx is not None and item.source is not None and \
                not isinstance(member, torch.Tensor):
            tx.guards.ID_MATCH(item.source, member)
        self.trackers[id(member)] = item
        return member

    def member(self, value: Any) -> VariableTracker:
        return self.trackers.get(id(value)) or ConstantVariable(value)

    def rebuild_items(self, rc) -> set:
        return {rc(self.trackers[id(v)]) if id(v) in self.trackers else v
                for v in self.values}

    def python_type(self):
        return set

    def is_python_constant(self):
        return not any(id(v) in self.trackers for v in self.values)

    def as_python_constant(self):
        if not self.is_python_constant():
            raise Unsupported(f"{self} is not a Python constant")
        return set(self.values)

    def children(self):
        return [self.trackers[id(v)] for v in self.values if id(v) in self.trackers]

    def unpack(self, tx):
        return [self.member(v) for v in self.values]

    def truth(self, tx):
        return bool(self.values)

    def contains(self, item: VariableTracker, tx: Any = None) -> bool:
        return self.key(item, tx) in self.values

    def var_getattr(self, tx, name):
        if callable(getattr(set, name, None)):
            return BoundMethodVariable(self, name)
        raise Unsupported(f"set.{name}")

    def call_method(self, tx, name, args, kwargs):
        def operand(a):
            if isinstance(a, SetVariable):
                self.trackers.update(a.trackers)
                return set(a.values)
            if a.is_python_constant():
                return a.as_python_constant()
            return [self.key(i, tx) for i in tx.unpack(a)]
        values = [self.key(a, tx) for a in args] if name in ("add", "discard", "remove") \
            else [operand(a) for a in args]
        if name in ("add", "update", "discard", "remove", "clear", "pop",
                    "difference_update", "intersection_update", "symmetric_difference_update",
                    "__ior__", "__iand__", "__isub__", "__ixor__"):
            tx.record_mutation(self)
            current = set(self.values)
            try:
                result = getattr(current, name)(*values)
            except (KeyError, TypeError) as e:   # ``remove`` of a missing member
                raise TracedException(e) from None
            # keep insertion order for what stays; new members at the end
            self.values = {v: None for v in [*self.values, *current] if v in current}
            return self.member(result) if name == "pop" else (
                self if name.startswith("__i") else ConstantVariable(None))
        result = getattr(set(self.values), name)(*values)
        if isinstance(result, set):
            out = SetVariable([])
            out.trackers = dict(self.trackers)
            out.values = dict.fromkeys(result)
            return out
        return wrap_constant_result(result)

    def reconstruct(self, rc):
        return self.rebuild_items(rc)

    def __repr__(self):
        return f"SetVariable({set(self.values)!r})"


class TensorIdentity:
    """What a set holds for a tensor the graph computes: the tensor hashes and compares by
    identity (``Tensor.__hash__`` is ``id``), and while tracing its one tracker is its
    identity -- as ``is`` decides -- so ``if v in memo`` over a module's buffers made in
    ``forward`` (``nn.Module._named_members``) asks what CPython asks."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"<tensor {self.name}>"


def identity_member(item: VariableTracker) -> Any:
    """The object a set or dict holds for ``item`` when it hashes and compares by identity:
    a tensor (a graph input's itself, a computed one's :class:`TensorIdentity`), a module, a
    function or class, an object of a class that keeps object's ``__hash__`` and ``__eq__``.
    None otherwise."""
    if isinstance(item, LATE_BOUND["TensorVariable"]):
        if item.real is not None or item.source is not None:
            return item.real
        token = item.__dict__.get("identity")
        if token is None:
            token = item.identity = TensorIdentity(getattr(item.node, "name", "?"))
        return token
    value = getattr(item, "value", getattr(item, "fn", None))
    if value is None or isinstance(value, torch.Tensor):
        return None
    cls = type(value)
    if cls.__hash__ is object.__hash__ and cls.__eq__ is object.__eq__ or \
            cls is types.BuiltinFunctionType:   # (hashed and compared in C, by what it wraps)
        return value
    return None


class DequeVariable(ListVariable):
    """``collections.deque`` built while tracing: a list with two open ends. With a
    ``maxlen``, adding to a full deque drops items from the other end, as CPython does
    (``insert`` into a full one raises)."""
    python_cls = collections.deque
    empty_pop_message = "pop from an empty deque"

    def __init__(self, items: list[VariableTracker], source: Source | None = None,
                 maxlen: int | None = None):
        super().__init__(items, source)
        self.maxlen = maxlen
        self._trim(from_left=True)

    def python_type(self):
        return collections.deque

    def as_python_constant(self):
        return collections.deque([i.as_python_constant() for i in self.items], self.maxlen)

    def example(self):
        return collections.deque([i.example() for i in self.items], self.maxlen)

    def var_getattr(self, tx, name):
        if name == "maxlen":
            return ConstantVariable(self.maxlen)
        if callable(getattr(collections.deque, name, None)):
            return BoundMethodVariable(self, name)
        raise TracedException(AttributeError(
            f"'collections.deque' object has no attribute {name!r}"))

    def _trim(self, from_left: bool) -> None:
        """Drop what no longer fits in ``maxlen``: from the left after adding on the right,
        from the right after adding on the left."""
        if self.maxlen is not None and len(self.items) > self.maxlen:
            extra = len(self.items) - self.maxlen
            self.items = self.items[extra:] if from_left else self.items[:self.maxlen]

    def getitem(self, tx, key):
        if isinstance(key.as_python_constant(), slice):
            raise TracedException(TypeError("sequence index must be integer, not 'slice'"))
        return super().getitem(tx, key)

    def call_method(self, tx, name, args, kwargs):
        if not callable(getattr(collections.deque, name, None)):
            raise TracedException(AttributeError(
                f"'collections.deque' object has no attribute {name!r}"))
        if name in ("append", "extend", "appendleft", "extendleft", "popleft", "rotate"):
            tx.record_mutation(self)
            if name in ("append", "extend"):
                if name == "append" or not _extend_item_by_item(
                        tx, args[0], lambda item: (self.items.append(item),
                                                   self._trim(from_left=True))):
                    self.items.extend([args[0]] if name == "append" else tx.unpack(args[0]))
                self._trim(from_left=True)
            elif name in ("appendleft", "extendleft"):
                if name == "appendleft" or not _extend_item_by_item(
                        tx, args[0], lambda item: (self.items.insert(0, item),
                                                   self._trim(from_left=False))):
                    added = [args[0]] if name == "appendleft" else tx.unpack(args[0])
                    self.items[:0] = added[::-1]
                self._trim(from_left=False)
            elif name == "popleft":
                if not self.items:
                    raise TracedException(IndexError(self.empty_pop_message))
                return self.items.pop(0)
            else:
                n = args[0].as_python_constant() if args else 1
                if self.items:
                    n %= len(self.items)
                    self.items = self.items[-n:] + self.items[:-n] if n else self.items
            return ConstantVariable(None)
        if name == "insert" and self.maxlen is not None and len(self.items) >= self.maxlen:
            raise TracedException(IndexError("deque already at its maximum size"))
        if name == "copy":
            return DequeVariable(self.items, maxlen=self.maxlen)
        if name == "pop" and args:
            raise TracedException(TypeError(
                f"deque.pop() takes no arguments ({len(args)} given)"))
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, rc):
        return collections.deque([rc(i) for i in self.items], self.maxlen)


def refill_deque(target: collections.deque, items: list) -> None:
    """Write a deque's new contents into it (a deque has no slice assignment)."""
    target.clear()
    target.extend(items)


class DequeContentsVariable(VariableTracker):
    """The items a deque tracker holds when the graph has run: what ``refill_deque`` writes
    back into a deque from outside (rebuilt late, so it is the final contents)."""

    def __init__(self, deque: DequeVariable):
        self.deque = deque

    def children(self):
        return list(self.deque.items)

    def reconstruct(self, rc):
        return [rc(i) for i in self.deque.items]


__all__ = [
    'BaseListVariable', 'ConstDictVariable', 'ConstantVariable', 'DequeContentsVariable',
    'DequeVariable', 'refill_deque',
    'DictViewVariable', 'ListVariable', 'NamedTupleVariable',
    'RangeVariable', 'SetVariable', 'identity_member', 'plain_tuple_subclass', 'SizeVariable',
    'SliceVariable',
    'TupleVariable', 'wrap_constant_result',
]
