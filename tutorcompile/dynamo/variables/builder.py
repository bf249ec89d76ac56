"""VariableBuilder: a value from outside the traced code made a tracker, with its guards.

Whatever the traced code reads from outside itself -- an argument, a global, a module's
attribute, a closure cell, a value on the stack where capture resumes -- is a real Python
value with a *source* (``L['x']``, ``G['cfg'].eps``, ``L['self'].layers[0]``). The builder
makes it a variable tracker and installs the guards that make reusing the graph safe: a
tensor becomes a graph input guarded on its dtype, device and sizes (``TENSOR_MATCH``), a
constant a folded value guarded by equality, a list a list of trackers guarded on its
length, a function or class a tracker guarded on its identity, and so on down one table of
cases (:meth:`VariableBuilder.wrap`, in order: tensors first, any other object last).

Two rules keep the guards few and the trackers consistent:

* one tracker per source: ``wrap_nested`` caches by the source's name, so a value read
  twice is wrapped (and guarded) once; an instruction that breaks the graph rolls the cache
  back (``mark``/``rollback``) with everything else it did;
* one tracker per object: a list, dict, module or object reached through two sources
  (``log`` and ``ctx.log``) is one tracker, guarded to be the same object, so a write through
  one path is what a read through the other sees.

The translator holds one builder for the capture (``tx.builder``) and binds its
``wrap_nested`` as ``tx.wrap_nested``, the call every tracker makes. A value made *while*
tracing has no source (``None``): it is wrapped without guards, and refused where only a
source could find it again (a tensor, a module).

Mirrors: torch/_dynamo/variables/builder.py (``VariableBuilder``; there one builder per
source, here one per capture holding the caches that PyTorch keeps on the output graph).
"""

from __future__ import annotations

import collections
import enum
import functools
import inspect
import os
import sys
import types
from typing import TYPE_CHECKING, Any, cast

import torch

from ...ops.ndarray import draws_from_numpys_generator, torch_numpy_function
from .. import trace_rules
from ..exc import Unsupported
from ..source import AttrSource, GetItemSource, NumpyTensorSource, ReduceSource, Source
from .base import BoundMethodVariable, VariableTracker, is_constant_value
from .callables import (
    BUILTIN_CALLABLES,
    BUILTIN_HANDLERS,
    BuiltinVariable,
    UserDefinedClassVariable,
    UserDefinedObjectVariable,
    reads_like_dict,
)
from .containers import (
    BaseListVariable,
    ConstantVariable,
    ConstDictVariable,
    DequeVariable,
    ListVariable,
    NamedTupleVariable,
    SetVariable,
    SizeVariable,
    TupleVariable,
    plain_tuple_subclass,
)
from .ctx_manager import RealRegionExitVariable, is_real_region_exit
from .functions import PartialVariable, UserFunctionVariable, UserMethodVariable
from .iter import InputIteratorVariable, ListIteratorVariable, ResumeIterator
from .lazy import LazyVariable
from .misc import ClosureCellVariable, EnvironVariable, PythonModuleVariable
from .ndarray import NumpyFunctionVariable, NumpyNdarrayVariable
from .nn_module import NNModuleVariable
from .tensor import TensorMethodVariable, TensorVariable
from .torch import (
    AllowedInGraphFunctionVariable,
    ScriptFunctionVariable,
    TorchFunctionVariable,
    is_torch_callable,
)

if TYPE_CHECKING:
    from ..symbolic_convert import InstructionTranslator

# containers whose trackers model every method (a bound method of one becomes a call on it)
_MODELLED_CONTAINERS = (list, dict, set, collections.deque, collections.OrderedDict,
                        collections.defaultdict)
# the function under ``torch.autograd.Function.apply`` (a classmethod)
_AUTOGRAD_APPLY = vars(torch.autograd.Function)["apply"].__func__
# C iterators whose remaining items ``__reduce__`` tells (the builder's ``_input_iterator``)
_SEQUENCE_ITERATORS: tuple[type, ...] = (type(iter(range(0))), type(iter([])), type(iter(())))


class VariableBuilder:
    """Makes trackers of the values a capture reads from outside, with their guards.

    ``wrap_nested(value, source)`` is the entry point (cached by source); ``wrap`` is the
    table of cases itself. ``source`` is ``None`` for a value made while tracing.
    """

    def __init__(self, tx: InstructionTranslator):
        self.tx = tx
        # trackers by source name, and the names in the order they were wrapped (rollback)
        self.wrapped: dict[str, VariableTracker] = {}
        self._wrapped_order: list[str] = []
        # lists and dicts from outside by id: one tracker per object, whatever the source
        self._containers: dict[int, tuple[Any, VariableTracker, str]] = {}
        self._cells: dict[int, ClosureCellVariable] = {}  # real cells by id
        self._classes: dict[int, UserDefinedClassVariable] = {}  # classes with a source
        self._plain_numpy = False  # wrapping a NumPy function as it is (see wrap)

    def mark(self) -> int:
        """Where the builder stands now: ``rollback`` returns to it."""
        return len(self._wrapped_order)

    def rollback(self, mark: int) -> None:
        """Forget what was wrapped since ``mark`` (an instruction that broke the graph)."""
        for key in self._wrapped_order[mark:]:
            self.wrapped.pop(key, None)
        del self._wrapped_order[mark:]
        self._containers = {i: e for i, e in self._containers.items() if e[2] in self.wrapped}

    def wrap_nested(self, value: Any, source: Source | None) -> VariableTracker:
        """The tracker of ``value`` read through ``source``: one per source (see ``wrap``)."""
        if source is not None:
            key = source.name()
            if key in self.wrapped:
                return self.wrapped[key]
            vt = self.wrap(value, source)
            self.wrapped[key] = vt
            self._wrapped_order.append(key)
            return vt
        return self.wrap(value, None)

    def wrap(self, value: Any, source: Source | None) -> VariableTracker:
        """A new tracker of ``value``, with the guards its source needs: one case per kind
        of value, tried in order."""
        g = self.tx.guards
        if isinstance(value, LazyVariable):
            value = value.value
        if isinstance(value, torch.Tensor):
            if value.layout != torch.strided:
                # no strides to guard, no fake tensor to trace with (torch.compile breaks too)
                raise Unsupported(f"a {str(value.layout).replace('torch.', '')} tensor: sparse "
                                  "layouts are not captured")
            if source is None:
                raise Unsupported("a tensor that is not reachable from the function's inputs, "
                                  "globals or module attributes")
            seen_input = self.tx.output.inputs_by_id.get(id(value))
            if seen_input is not None:
                assert seen_input.source is not None   # (a graph input always has one)
                g.add("ID_MATCH", f"{source.name()} is {seen_input.source.name()}", source,
                      "same tensor")
                return seen_input
            dims = self.tx.dynamic_dims(source, value)
            g.TENSOR_MATCH(source, value, dims)
            return self.tx.output.add_input(value, source, dims)
        numpy = sys.modules.get("numpy")
        if numpy is not None and type(value) is numpy.ndarray and source is not None and \
                value.dtype.kind in "biuf" and value.dtype.isnative:
            # a NumPy array from outside (normflows indexes with ``np.tril_indices`` kept on
            # the module): in the graph, the tensor ``torch.from_numpy`` makes of it -- an
            # input like any tensor, read through its source on every call and guarded the
            # same way; the array's code runs as NumPy code on tensors (variables/ndarray.py)
            array, array_source = torch.from_numpy(value), NumpyTensorSource(source)
            dims = self.tx.dynamic_dims(array_source, array)
            g.TENSOR_MATCH(array_source, array, dims)
            return NumpyNdarrayVariable(self.tx.output.add_input(array, array_source, dims))
        unwrapped = _unwrap_compiled(value, source)
        if unwrapped is not None:  # a compiled function called from traced code: trace the
            return self.wrap_nested(*unwrapped)  # original, as Dynamo does
        if isinstance(value, torch.nn.Module):
            if source is None:
                raise Unsupported("a module created while tracing")
            alias = self._alias(value, source)
            if alias is not None:
                return alias
            g.ID_MATCH(source, value, f"{type(value).__name__} instance")
            if "training" in value.__dict__:
                g.CONSTANT_MATCH(AttrSource(source, "training"), value.training)
            return self._one_per_object(value, NNModuleVariable(value, source), source)
        if isinstance(value, ResumeIterator) and source is not None:
            items_src = AttrSource(source, "items")
            g.SEQUENCE_LENGTH(items_src, value.items)
            return ListIteratorVariable([self.wrap_nested(v, GetItemSource(items_src, i))
                                         for i, v in enumerate(value.items)])
        if type(value) in _SEQUENCE_ITERATORS and source is not None:
            return self._input_iterator(value, source)
        if isinstance(value, types.CodeType):
            return ConstantVariable(value)
        if isinstance(value, os._Environ):
            return EnvironVariable(value, source)
        if value is inspect.signature:
            return BuiltinVariable(value, source)
        if isinstance(value, enum.Enum):
            # an enum member is a constant known by identity: ``MODE is Mode.A`` folds, and
            # the guard is an identity check reached through the source (never its repr)
            if source is not None:
                g.ID_MATCH(source, value, f"{type(value).__name__}.{value.name}")
            return ConstantVariable(value, source)
        if trace_rules.is_structseq(type(value)) and trace_rules.immutable_constant(value):
            # ``sys.version_info``: a named tuple of constants made in C, compared as a
            # tuple (``>= (3, 10)``) and read by name (``.minor``); known by identity
            if source is not None:
                g.ID_MATCH(source, value, type(value).__name__)
            return ConstantVariable(value, source)
        if is_constant_value(value) and not isinstance(value, tuple):
            if source is not None:
                g.CONSTANT_MATCH(source, value)
            return ConstantVariable(value, source)
        if isinstance(value, torch.Size):  # x.size() passed around: a tuple of ints
            if source is not None:
                g.SEQUENCE_LENGTH(source, value)
            return SizeVariable([self.wrap_nested(v, GetItemSource(source, i) if source
                                                  else None) for i, v in enumerate(value)],
                                source)
        if type(value) is collections.deque and source is not None:
            # a deque from outside (a module's history buffer, a global queue): its items
            # guarded as a list's are, its maxlen by value; a write to it is written back
            # after the graph (``record_mutation``)
            seen = self._containers.get(id(value))
            if seen is not None:
                g.add("ID_MATCH", f"{source.name()} is {seen[2]}", source, "same deque")
                return seen[1]
            g.SEQUENCE_LENGTH(source, value)
            g.CONSTANT_MATCH(AttrSource(source, "maxlen"), value.maxlen)
            items = [self.wrap_nested(v, GetItemSource(source, i)) for i, v in enumerate(value)]
            return self._one_per_object(value, DequeVariable(items, source, value.maxlen),
                                        source)
        if source is not None and (type(value) in (list, set) or isinstance(value, dict)):
            # one mutable object reached through two sources (``log`` and ``ctx.log``) is
            # one tracker: two would replay their writes one over the other after the graph
            seen = self._containers.get(id(value))
            if seen is not None:
                g.add("ID_MATCH", f"{source.name()} is {seen[2]}", source,
                      f"same {type(value).__name__}")
                return seen[1]
        plain_tuple = isinstance(value, tuple) and plain_tuple_subclass(type(value)) and \
            not getattr(value, "__dict__", None)
        if plain_tuple and source is not None and hasattr(value, "__dict__"):
            g.add("NO_INSTANCE_ATTRIBUTES", f"not {source.name()}.__dict__", source,
                  f"a {type(value).__name__} holding only its items")
        if type(value) in (tuple, list) or (isinstance(value, tuple) and
                                             hasattr(value, "_fields")) or plain_tuple:
            if source is not None:
                g.SEQUENCE_LENGTH(source, value)
            items = [self.wrap_nested(v, GetItemSource(source, i) if source else None)
                     for i, v in enumerate(value)]
            if isinstance(value, list):
                return self._one_per_object(value, ListVariable(items, source), source)
            if type(value) is tuple:
                return TupleVariable(items, source)
            return NamedTupleVariable(items, type(value), source)
        if type(value) is set and source is not None:
            # a set from outside (kornia's names of accepted modes): its members guarded by
            # value, against a frozen copy (never the live set, which would always match)
            if not all(is_constant_value(v) for v in value):
                raise Unsupported("a set from outside holding values that are not constants")
            g.TYPE_MATCH(source, value)
            g.add("SET_MATCH", f"{source.name()} == {g.bind(frozenset(value), 'set')}",
                  source)
            vt: VariableTracker = SetVariable([ConstantVariable(v) for v in value], source)
            return self._one_per_object(value, vt, source)
        if isinstance(value, dict) and reads_like_dict(type(value)):
            if not all(is_constant_value(k) or _keyed_by_identity(k) or
                       isinstance(k, torch.Tensor) and source is not None for k in value):
                # (a tensor key, an optimizer's ``self.state[p]``: read one key at a time)
                raise Unsupported("a dict with non-constant keys")
            # (not ``getattr(value, "default_factory", None)``: a dict whose ``__getattr__``
            # is its ``__getitem__`` raises KeyError for it)
            factory = value.default_factory if isinstance(value, collections.defaultdict) \
                else None
            factory_vt = None if factory is None else self.wrap_nested(
                factory, AttrSource(source, "default_factory") if source else None)
            if source is not None:  # lazy: entries are wrapped (and guarded) as read
                g.TYPE_MATCH(source, value)
                vt = ConstDictVariable({}, source, type(value), factory_vt,
                                       lazy=(self.tx, value))
            else:
                vt = ConstDictVariable({k: self.wrap_nested(v, None) for k, v in value.items()},
                                       None, type(value), factory_vt)
            return self._one_per_object(value, vt, source)
        if isinstance(value, types.CellType):
            return self.closure_cell(value, source)
        if type(value) is functools.partial:  # ``self.act = partial(F.gelu, approximate=...)``
            if source is None:
                raise Unsupported("a functools.partial object without a source")
            g.TYPE_MATCH(source, value)
            args_src, kw_src = AttrSource(source, "args"), AttrSource(source, "keywords")
            g.SEQUENCE_LENGTH(args_src, value.args)
            g.DICT_KEYS(kw_src, value.keywords)
            partial = PartialVariable(
                self.wrap_nested(value.func, AttrSource(source, "func")),
                [self.wrap_nested(a, GetItemSource(args_src, i))
                 for i, a in enumerate(value.args)],
                {k: self.wrap_nested(v, GetItemSource(kw_src, k))
                 for k, v in value.keywords.items()},
                # its pickled state names the instance dict without creating it (reading
                # ``value.__dict__`` would, and so change what a partial of it is)
                has_dict=value.__reduce__()[2][3] is not None)
            partial.source = source   # (its identity: ``is`` against another partial)
            return partial
        if isinstance(value, types.FunctionType) and value in trace_rules.PURE_FUNCTIONS:
            if source is not None:  # ``re.match``: computed now on constants
                g.ID_MATCH(source, value)
            return BuiltinVariable(value, source)
        if _has_handler(value):  # functools.partial, itertools.chain, deque, ...
            if source is not None:
                g.ID_MATCH(source, value)
            return BuiltinVariable(value, source)
        if callable(value) and draws_from_numpys_generator(value):
            raise Unsupported(f"np.random.{getattr(value, '__name__', '?')}: NumPy's random "
                              "generators are state outside the graph (torch's generator "
                              "would draw other numbers)")
        twin = None if self._plain_numpy else torch_numpy_function(value)
        if twin is not None:    # ``np.mean``: on arrays, its torch._numpy twin in the graph
            self._plain_numpy = True
            try:
                plain = self.wrap(value, source)
            finally:
                self._plain_numpy = False
            return NumpyFunctionVariable(twin, plain)
        if trace_rules.allowed_in_graph(value):  # ``torch.compiler.allow_in_graph(fn)``
            if source is not None:
                g.ID_MATCH(source, value)
            return AllowedInGraphFunctionVariable(value, source)
        if isinstance(value, types.FunctionType) and not is_torch_callable(value):
            if source is not None:
                g.ID_MATCH(source, value)
            return UserFunctionVariable(value, source)
        if source is not None and is_real_region_exit(value):  # resumed inside a region
            return RealRegionExitVariable(value, source)
        if isinstance(value, types.MethodType) and isinstance(value.__func__,
                                                              types.FunctionType):
            self_src = AttrSource(source, "__self__") if source else None
            if value.__func__ is _AUTOGRAD_APPLY:
                # ``pscan = PScan.apply`` kept as a global: the class's opaque apply
                if source is not None:
                    g.ID_MATCH(AttrSource(source, "__func__"), value.__func__)
                return self.wrap_nested(value.__self__, self_src).var_getattr(self.tx, "apply")
            if source is not None:
                g.ID_MATCH(AttrSource(source, "__func__"), value.__func__)
            return UserMethodVariable(value.__func__, self.wrap_nested(value.__self__,
                                                                       self_src))
        owner = getattr(value, "__self__", None)
        if isinstance(owner, torch.Tensor) and isinstance(
                value, (types.BuiltinMethodType, types.MethodWrapperType)):
            # ``t.relu`` as a value (on a rebuilt stack, passed as an argument): the tensor
            # is a graph input reached through the method, never a constant of the graph
            tensor = cast(TensorVariable, self.wrap_nested(   # (a tensor wraps to one)
                owner, AttrSource(source, "__self__") if source else None))
            return TensorMethodVariable(tensor, value.__name__)
        if isinstance(value, types.ModuleType):
            if source is not None:
                g.ID_MATCH(source, value)
            return PythonModuleVariable(value, source)
        original = getattr(value, "_torchdynamo_inline", None)
        if isinstance(value, torch.jit.ScriptFunction) and isinstance(original,
                                                                      types.FunctionType):
            # ``@torch.jit.script``: one node, or the Python it was compiled from
            if source is not None:
                g.ID_MATCH(source, value)
            return ScriptFunctionVariable(value, source, original)
        if is_torch_callable(value):
            if source is not None:
                g.ID_MATCH(source, value)
            return TorchFunctionVariable(value, source)

        if isinstance(value, trace_rules.C_CALLABLE_TYPES) and \
                type(owner) in _MODELLED_CONTAINERS:
            # a method bound to a list or dict (``log.append`` passed around): a call on
            # that container's tracker, which journals the write
            container = self.wrap_nested(owner, AttrSource(source, "__self__")
                                         if source is not None else None)
            return BoundMethodVariable(container, value.__name__)
        if callable(value) and (_hashable_in(value, BUILTIN_CALLABLES) or isinstance(
                value, trace_rules.C_CALLABLE_TYPES)):
            # any other C callable: folded when pure (``str.isalnum``), else a break
            if source is not None:
                g.ID_MATCH(source, value)
            return BuiltinVariable(value, source)
        if isinstance(value, type):
            if source is not None:
                g.ID_MATCH(source, value)
                seen_class = self._classes.get(id(value))
                if seen_class is not None:  # one tracker per class: its pending writes are one
                    return seen_class
                vt = self._classes[id(value)] = UserDefinedClassVariable(value, source)
                return vt
            return UserDefinedClassVariable(value, source)
        if source is None:
            if is_typing_form(value):   # read from one made while tracing (List[int])
                return UserDefinedObjectVariable(value)
            raise Unsupported(f"a {type(value).__name__} object without a source")
        alias = self._alias(value, source)
        if alias is not None:
            return alias
        g.TYPE_MATCH(source, value)
        return self._one_per_object(value, UserDefinedObjectVariable(value, source), source)

    def _input_iterator(self, value: Any, source: Source) -> VariableTracker:
        """A real iterator over a range, list or tuple from outside (a comprehension's
        ``.0`` when its frame is compiled by itself): what is left of it, read and guarded
        through ``__reduce__`` -- ``(iter, (sequence,), position)``, or ``(iter, ([],))``
        once exhausted -- and taken from the real one after the graph."""
        g = self.tx.guards
        seen = self._containers.get(id(value))
        if seen is not None:   # one iterator reached twice (``f(it, it)``): one tracker
            g.add("ID_MATCH", f"{source.name()} is {seen[2]}", source, "same iterator")
            return seen[1]
        g.TYPE_MATCH(source, value)
        state, reduced = value.__reduce__(), ReduceSource(source)
        real = UserDefinedObjectVariable(value, source)
        g.add("ITERATOR_MATCH", f"len({reduced.name()}) == {len(state)}", source,
              "exhausted or not")
        if len(state) < 3:
            return self._one_per_object(value, InputIteratorVariable([], real), source)
        position = state[2]
        g.CONSTANT_MATCH(GetItemSource(reduced, 2), position)
        sequence = self.wrap_nested(state[1][0], GetItemSource(GetItemSource(reduced, 1), 0))
        if isinstance(sequence, ListVariable):   # read live: the list may be written to
            vt = InputIteratorVariable([], real, sequence, position)
        elif isinstance(sequence, BaseListVariable):
            vt = InputIteratorVariable(sequence.items[position:], real)
        else:   # a range: a constant
            vt = InputIteratorVariable(
                [ConstantVariable(v) for v in sequence.as_python_constant()[position:]], real)
        return self._one_per_object(value, vt, source)

    def _alias(self, value: Any, source: Source) -> VariableTracker | None:
        """The tracker of an object already reached through another source (a module that
        is both ``self.layers[1][0].state_container`` and ``self.router[1][0]``): one per
        object, so an attribute written through one path is what a read through the other
        sees, as on the real object -- guarded to be that same object."""
        seen = self._containers.get(id(value))
        if seen is None or seen[0] is not value:
            return None
        self.tx.guards.add("ID_MATCH", f"{source.name()} is {seen[2]}", source,
                           f"same {type(value).__name__}")
        return seen[1]

    def closure_cell(self, cell: types.CellType, source: Source | None) -> VariableTracker:
        """The tracker of a real cell: one per cell, however many closures share it, so a
        write through one (``nonlocal``) is what a read through another sees."""
        seen = self._cells.get(id(cell))
        if seen is None or seen.cell is not cell:
            seen = self._cells[id(cell)] = ClosureCellVariable(cell, source)
        elif seen.source is None and source is not None:
            seen.source = source
        return seen

    def _one_per_object(self, value: Any, vt: VariableTracker,
                        source: Source | None) -> VariableTracker:
        if source is not None:
            self._containers[id(value)] = (value, vt, source.name())
        return vt


def _keyed_by_identity(key: Any) -> bool:
    """A dict key that is a fixed object known by identity -- an enum member, a class, a
    ``typing`` special form (huggingface_hub's validator table is keyed by ``list``,
    ``Union``, ``Literal``): a lookup with such a key folds while tracing like a constant's,
    and its guards spell it ``K[i]``, the very object. (Not any object that hashes by
    identity: a module or a tensor as a key is no constant.) A function is one too: torch's
    pytree registry is keyed by ``namedtuple`` itself. A tuple of such keys and constants is
    one (einx keys its backends by the tuple of the arguments' tensor classes)."""
    if isinstance(key, (enum.Enum, types.FunctionType, types.BuiltinFunctionType)):
        return True
    if type(key) is tuple:
        return all(is_constant_value(k) or _keyed_by_identity(k) for k in key)
    cls = type(key)  # a class's metaclass, for a class key
    if not isinstance(key, type) and cls.__module__ != "typing":
        return False
    return cls.__hash__ is object.__hash__ and cls.__eq__ is object.__eq__


def _has_handler(value: Any) -> bool:
    try:
        return value in BUILTIN_HANDLERS
    except TypeError:  # unhashable
        return False


def _unwrap_compiled(value: Any, source: Source | None) -> tuple[Any, Source | None] | None:
    from ..eval_frame import OptimizedCallable, OptimizedModule
    if isinstance(value, OptimizedCallable):
        return value._orig, AttrSource(source, "_orig") if source is not None else None
    if isinstance(value, OptimizedModule):
        inner = value._modules["_orig_mod"]
        return inner, (GetItemSource(AttrSource(source, "_modules"), "_orig_mod")
                       if source is not None else None)
    return None


def is_typing_form(value: Any) -> bool:
    """A construct of the ``typing`` module (``List``, ``Optional``, ``Union``) or what
    subscribing one or a builtin class gives (``List[int]``, ``list[int]``, ``int | None``)."""
    return type(value).__module__ == "typing" or isinstance(
        value, (types.GenericAlias, types.UnionType))


def _hashable_in(value: Any, table: Any) -> bool:
    """``value in table`` for a table keyed by callables, where a callable object may not
    hash (``functools.cmp_to_key``'s ``KeyWrapper`` is callable and unhashable)."""
    try:
        return value in table
    except TypeError:
        return False
