"""``nn.Module`` trackers: ``__call__`` inlines ``forward``; parameters and buffers become graph
inputs (like ``inline_inbuilt_nn_modules``).

Mirrors: torch/_dynamo/variables/nn_module.py.
"""
from __future__ import annotations

import collections
import functools
import inspect
import types
from typing import cast

import torch

from ..exc import TracedException, Unsupported
from ..source import AttrSource, GetItemSource, ObjectSource, Source
from .base import BoundMethodVariable, VariableTracker
from .containers import (
    AttributeDictVariable,
    ConstantVariable,
    ConstDictVariable,
    ListVariable,
    SetVariable,
    TupleVariable,
)
from .functions import UserMethodVariable
from .iter import ListIteratorVariable
from .tensor import TensorVariable


class FreshModuleDictVariable(AttributeDictVariable):
    """``self.__dict__`` of a module built while tracing: the stand-in's tables and the
    attributes written since, read as attribute reads are, so the tables are the trackers
    the rest of the trace shares."""

    what = "a module built while tracing"
    owner: NNModuleVariable

    def __init__(self, tx, owner: NNModuleVariable):
        super().__init__(owner)
        self.tx = tx

    def live_items(self) -> dict[str, VariableTracker]:
        names = [*self.owner.value.__dict__, *self.owner.pending]
        return {n: self.owner.var_getattr(self.tx, n) for n in dict.fromkeys(names)}


class NNModuleVariable(VariableTracker):
    """An nn.Module: calls inline ``forward``; parameters/buffers become graph inputs."""

    fresh = False  # from outside: its writes are replayed after the graph

    def __init__(self, module: torch.nn.Module, source: Source | None,
                 constructed: tuple[type, list, dict] | None = None, fresh: bool = False):
        self.value, self.source = module, source
        self.pending: dict[str, VariableTracker] = {}  # attributes written while tracing
        # a stateless torch.nn module built while tracing (no source): its class and the
        # trackers of its constructor's arguments, to build it again after the graph
        self.constructed = constructed
        # a module of a user's class built while tracing: ``value`` is a stand-in (Module's
        # empty tables), its attributes live in ``pending``, and it is built anew after the
        # graph from them (``reconstruct``)
        self.fresh = fresh

    def truth(self, tx):
        """``if self.layers:`` as Python decides it: the class's ``__bool__``, else its
        ``__len__`` (an empty ``ModuleList``, ``Sequential`` or ``ModuleDict`` is false),
        else True. A module from outside is measured as ``len()`` measures it; one built
        while tracing keeps its submodules in the tracker, so its Python method is inlined.
        """
        cls = type(self.value)
        for name in ("__bool__", "__len__"):
            method = inspect.getattr_static(cls, name, None)
            if method is None:
                continue
            if name == "__len__" and not self.fresh:
                return len(self.value) != 0
            if isinstance(method, types.FunctionType):
                return tx.truth(tx.inline_user_function(method, [self], {}))
            raise Unsupported(f"the truth value of a {cls.__name__} ({cls.__name__}.{name} is "
                              "not written in Python)")
        return True

    def python_type(self):
        return type(self.value)

    def var_getattr(self, tx, name):
        if name in self.pending:  # written earlier in the frame
            return self.pending[name]
        m = self.value
        if self.fresh and name == "__dict__":   # (``"_buffers" not in self.__dict__``)
            return FreshModuleDictVariable(tx, self)
        if self.fresh:
            # being built: a submodule, parameter or buffer registered in its tables
            # (``add_module``, ``register_buffer``) is found there, as Module.__getattr__
            # finds it; a table (or any container the stand-in holds) is read once into a
            # tracker that later reads and writes share -- a fresh copy per read would lose
            # the writes (``for m in self._modules.values()`` saw no submodule)
            for table in ("_parameters", "_buffers", "_modules"):
                held = self.pending.get(table)
                if isinstance(held, ConstDictVariable) and name in held.items:
                    return held.items[name]
            held = m.__dict__.get(name)
            if isinstance(held, (dict, set, list)):   # (the stand-in's own: no one else's)
                self.pending[name] = SetVariable([ConstantVariable(v) for v in held]) \
                    if isinstance(held, set) else tx.wrap_nested(held, None)
                return self.pending[name]
        for table in ("_parameters", "_buffers", "_modules"):
            if name in m.__dict__.get(table, {}):
                swapped = _reparametrized(tx, m, name)
                if swapped is not None and table != "_modules":  # in a functional_call
                    return swapped
                # PyTorch's spelling: L['self']._modules['fc']._parameters['weight']
                src = GetItemSource(AttrSource(self.source, table), name)
                return tx.wrap_nested(m.__dict__[table][name], src)
        src = AttrSource(self.source, name) if self.source is not None else None
        if name in m.__dict__ and not hasattr(
                type(inspect.getattr_static(type(m), name, None)), "__set__"):
            # an instance attribute (a class property would win): a function there is not bound
            return tx.wrap_nested(m.__dict__[name], src)
        static = inspect.getattr_static(m, name, None)
        if name in (*_TREE_WALKS, "to") and static is getattr(torch.nn.Module, name) and \
                self.source is not None:
            return BoundMethodVariable(self, name)  # answered from the module tree below
        if isinstance(static, types.FunctionType):
            return UserMethodVariable(static, self, _class_attr(self.source, m, name))
        if isinstance(static, staticmethod):
            return tx.wrap_nested(static.__func__, None)
        if isinstance(static, property):
            return tx.inline_user_function(static.fget, [self], {})
        try:
            value = getattr(m, name)
        except AttributeError as e:  # ``try: m.callback except AttributeError``: the traced
            if self.source is not None:   # code's own exception, to its handler -- while the
                tx.guards.add("HASATTR", f"not hasattr({self.source.name()}, {name!r})",
                              self.source)   # attribute stays missing
            raise TracedException(e) from None
        return tx.wrap_nested(value, src)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """``self.shift_size = 0`` (Swin shrinks its window to small inputs): a plain
        attribute written now, read back by the rest of the trace and set on the module after
        the graph ran, as PyTorch's Dynamo replays it. A tensor the graph computed is
        replayed the same way, as one more output of the graph: a buffer rebound to it
        (CTRL's ``self.pos_encoding = self.pos_encoding.to(dtype)``) stays a buffer
        (``nn.Module.__setattr__``), a plain attribute (RecurrentGemma's
        ``self.recurrent_states``, a cache of the last call's state) stays plain, and the
        next call reads either through its source, guarded like any input. A parameter or
        submodule write is a graph break."""
        m = self.value
        if self.fresh:  # being built: any attribute (a submodule from outside too)
            tx.record_side_effect(self)
            if isinstance(value, NNModuleVariable):
                # a submodule goes in ``_modules``, as Module.__setattr__ puts it: the
                # module's own ``children()``, ``self._modules`` loops, see it there
                modules = self.var_getattr(tx, "_modules")
                if not isinstance(modules, ConstDictVariable):
                    raise Unsupported(f"a submodule of {type(m).__name__} built while "
                                      "tracing, whose _modules is not a dict")
                modules.setitem(tx, ConstantVariable(name), value)
                self.pending.pop(name, None)
                return
            self.pending[name] = value
            return
        if self.constructed is not None:
            raise Unsupported(f"assignment to {type(m).__name__}.{name} of a module built "
                              "while tracing")
        if isinstance(value, NNModuleVariable) and value.constructed is None and \
                m.__dict__.get("_modules", {}).get(name) is value.value:
            return  # ``self.classifier = self.classifier.to(dtype)``, a no-op ``to``: the same
        buffer = name in m.__dict__.get("_buffers", {})
        if any(name in m.__dict__.get(t, {}) for t in ("_parameters", "_modules")) \
                or isinstance(value, NNModuleVariable) \
                or buffer and not isinstance(value, TensorVariable):
            raise Unsupported(f"assignment to {type(m).__name__}.{name}: a parameter or "
                              "submodule (or a buffer set to a non-tensor)")
        if type(m).__setattr__ is not torch.nn.Module.__setattr__:
            raise Unsupported(f"assignment to {type(m).__name__}.{name} (a custom __setattr__)")
        tx.record_side_effect(self)
        self.pending[name] = value

    def call_function(self, tx, args, kwargs):
        call = own_call(type(self.value))
        if call is not None:
            # a class that overrides __call__ (gpytorch's kernels fill in arguments, then
            # ``super().__call__``): its own rule, inlined; Module's reaches call_forward
            return tx.inline_user_function(call, [self, *args], kwargs)
        return self.call_forward(tx, args, kwargs)

    def call_forward(self, tx, args, kwargs):
        """``nn.Module.__call__``: ``forward`` inlined, and its forward pre-hooks and forward
        hooks (global ones first) around it, as ``Module._call_impl`` calls them; a
        backward hook is a break."""
        m = self.value
        glob = torch.nn.modules.module
        if m._backward_hooks or m._backward_pre_hooks or glob._global_backward_hooks or \
                glob._global_backward_pre_hooks:
            raise Unsupported(f"module {type(m).__name__} has backward hooks")
        hooked = bool(m._forward_hooks or m._forward_pre_hooks or glob._global_forward_hooks
                      or glob._global_forward_pre_hooks)
        if hooked and self.source is None:
            raise Unsupported(f"hooks of a module built while tracing ({type(m).__name__})")
        if self.source is not None:   # and a hook registered later runs (a recompile)
            if hooked:
                tx.guards.SAME_HOOKS(self.source, m)
            else:
                tx.guards.NO_HOOKS(self.source)
        if not hooked:
            return self._forward(tx, args, kwargs)
        args = TupleVariable(list(args))
        kwargs = ConstDictVariable(dict(kwargs))
        for key, hook in self._hooks(tx, "_forward_pre_hooks"):
            if key in m._forward_pre_hooks_with_kwargs:
                result = tx.call(hook, [self, args, kwargs], {})
                if not result.is_python_constant() or result.as_python_constant() is not None:
                    pair = tx.unpack(result)
                    if len(pair) != 2:
                        raise Unsupported("a forward pre-hook returned something other than "
                                          "(args, kwargs)")
                    args, kwargs = TupleVariable(tx.unpack(pair[0])), pair[1]
            else:
                result = tx.call(hook, [self, args], {})
                if not result.is_python_constant() or result.as_python_constant() is not None:
                    args = result if isinstance(result, TupleVariable) else \
                        TupleVariable([result])
        if not isinstance(kwargs, ConstDictVariable):
            raise Unsupported("a forward pre-hook's kwargs are not a dict")
        out = self._forward(tx, list(args.items), dict(kwargs.items))
        for key, hook in self._hooks(tx, "_forward_hooks"):
            if key in m._forward_hooks_with_kwargs or \
                    key in glob._global_forward_hooks_with_kwargs:
                result = tx.call(hook, [self, args, kwargs, out], {})
            else:
                result = tx.call(hook, [self, args, out], {})
            if not result.is_python_constant() or result.as_python_constant() is not None:
                out = result
        return out

    def _hooks(self, tx, name: str) -> list[tuple[int, VariableTracker]]:
        """The global then the module's hooks of kind ``name``, each read through its
        source (``L['self']._modules['wte']._forward_hooks[3]``)."""
        glob = torch.nn.modules.module
        assert self.source is not None   # (a module built while tracing with hooks: a break)
        return [(key, tx.wrap_nested(hook, GetItemSource(AttrSource(base, table), key)))
                for base, table, hooks in (
                    (ObjectSource(glob), "_global" + name, getattr(glob, "_global" + name)),
                    (self.source, name, getattr(self.value, name)))
                for key, hook in hooks.items()]

    def _forward(self, tx, args, kwargs):
        """``forward`` itself, inlined."""
        m = self.value
        forward = inspect.getattr_static(m, "forward")
        if not isinstance(forward, types.FunctionType):
            raise Unsupported(f"{type(m).__name__}.forward is not a Python function")
        if "forward" in m.__dict__:   # ``m.forward = fn``: called as it is, without self
            return tx.inline_user_function(forward, list(args), kwargs,
                                           fn_source=AttrSource(self.source, "forward"))
        if self.source is not None:
            # the class's forward, inlined: the module keeps its class (``m.__class__ = ...``
            # swaps it) and gets no forward of its own (``m.forward = fn``, as accelerate's
            # hooks do)
            tx.guards.TYPE_MATCH(self.source, m)
            tx.guards.NOT_IN_DICT(self.source, "forward")
        return tx.inline_user_function(forward, [self, *args], kwargs,
                                       fn_source=_class_attr(self.source, m, "forward"))

    def unpack(self, tx):
        m = self.value
        if self.fresh:
            # a Sequential built while tracing: its submodules, in the order it registered
            modules = self.pending.get("_modules")
            if isinstance(m, torch.nn.Sequential) and isinstance(modules, ConstDictVariable):
                return list(modules.items.values())
            raise Unsupported(f"iterating over a {type(m).__name__} built while tracing")
        if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList)):
            return [tx.wrap_nested(sub, _child(self.source, name))
                    for name, sub in m._modules.items()]
        if isinstance(m, torch.nn.ModuleDict):
            return [ConstantVariable(k) for k in m._modules]
        if isinstance(m, (torch.nn.ParameterList, torch.nn.ParameterDict)):
            entries = self._parameter_entries(tx)
            if isinstance(m, torch.nn.ParameterDict):
                return [ConstantVariable(k) for k in entries]
            return list(entries.values())
        raise Unsupported(f"iterating over {type(m).__name__}")

    def _parameter_entries(self, tx) -> dict[str, VariableTracker]:
        """A ParameterList's or ParameterDict's entries, in order, each read through its
        source (``_parameters['0']``), the key list guarded. (Both keep their entries as
        the module's own attributes: the list under ``'0'``, ``'1'``...)"""
        m = self.value
        if self.source is not None:
            tx.guards.DICT_KEYS(AttrSource(self.source, "_parameters"), m._parameters)
        keys = [str(i) for i in range(len(m))] if isinstance(m, torch.nn.ParameterList) \
            else list(cast(torch.nn.ParameterDict, m).keys())
        return {k: self.var_getattr(tx, k) for k in keys}

    def call_method(self, tx, name, args, kwargs):
        m = self.value
        if self.fresh and name in ("__len__", "__getitem__", "__contains__", "items", "keys",
                                   "values", *_TREE_WALKS, "to"):
            # (the rules below read the module's real tables; a module built while tracing
            # keeps its own in trackers: its class's Python method runs on them, inlined)
            method = inspect.getattr_static(type(m), name, None)
            if name in ("__len__", "__getitem__", "__iter__") and isinstance(
                    method, types.FunctionType):
                return tx.inline_user_function(method, [self, *args], kwargs)
            raise Unsupported(f"{type(m).__name__}.{name} of a module built while tracing")
        if name in ("__len__",):
            return ConstantVariable(len(m))
        if name == "__getitem__" and isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList,
                                                    torch.nn.ModuleDict)):
            key = args[0].as_python_constant()
            if isinstance(key, slice):
                if isinstance(m, torch.nn.ModuleDict):
                    raise Unsupported("slicing a ModuleDict")
                # the sliced modules, each reached through its own source (a list of them
                # iterates like the slice; only Sequential's call would differ)
                names = list(m._modules)[key]
                if type(m) is torch.nn.Sequential:
                    # ``self.blocks[1:](x)``: a new Sequential of the same submodules under
                    # their names, built as ``Sequential.__getitem__`` builds it (from an
                    # OrderedDict), while tracing -- a fresh module whose forward is inlined
                    chosen = ConstDictVariable(
                        {n: tx.wrap_nested(m._modules[n], _child(self.source, n))
                         for n in names}, dict_cls=collections.OrderedDict)
                    return tx.call(tx.wrap_nested(torch.nn.Sequential, None), [chosen], {})
                if isinstance(m, torch.nn.Sequential):
                    raise Unsupported(f"slicing a {type(m).__name__} (a Sequential subclass "
                                      "builds its slice with its own __init__)")
                return ListVariable([tx.wrap_nested(m._modules[n], _child(self.source, n))
                                     for n in names])
            if isinstance(m, torch.nn.ModuleDict):
                return tx.wrap_nested(m[key], _child(self.source, key))
            names = list(m._modules)
            return tx.wrap_nested(m[key], _child(self.source, names[key]))
        if name == "__contains__" and isinstance(m, (torch.nn.ModuleDict,
                                                     torch.nn.ParameterDict)):
            table = "_modules" if isinstance(m, torch.nn.ModuleDict) else "_parameters"
            if self.source is not None:
                tx.guards.DICT_KEYS(AttrSource(self.source, table), m.__dict__[table])
            return ConstantVariable(args[0].as_python_constant() in m.__dict__[table])
        if name == "__getitem__" and isinstance(m, (torch.nn.ParameterList,
                                                    torch.nn.ParameterDict)):
            key = args[0].as_python_constant()
            entries = self._parameter_entries(tx)
            if isinstance(m, torch.nn.ParameterDict):
                if key not in entries:
                    raise TracedException(KeyError(key))
                return entries[key]
            items = list(entries.values())
            try:
                return ListVariable(items[key]) if isinstance(key, slice) else items[key]
            except (IndexError, TypeError) as e:
                raise TracedException(e) from None
        if name in ("items", "keys", "values") and isinstance(m, torch.nn.ParameterDict):
            entries = self._parameter_entries(tx)
            return TupleVariable(
                [ConstantVariable(k) for k in entries] if name == "keys" else
                list(entries.values()) if name == "values" else
                [TupleVariable([ConstantVariable(k), v]) for k, v in entries.items()])
        if name in ("items", "keys", "values") and isinstance(m, torch.nn.ModuleDict):
            entries = [(k, tx.wrap_nested(v, _child(self.source, k)))
                       for k, v in m._modules.items()]
            if name == "keys":
                return TupleVariable([ConstantVariable(k) for k, _ in entries])
            if name == "values":
                return TupleVariable([v for _, v in entries])
            return TupleVariable([TupleVariable([ConstantVariable(k), v]) for k, v in entries])
        if name in _TREE_WALKS:
            if self.source is not None and not args and not kwargs:
                return self._walk_tree(tx, name, args, kwargs)
            walk = inspect.getattr_static(type(m), name, None)
            if isinstance(walk, types.FunctionType):
                # ``module.named_modules(memo, prefix)`` (nn.Module's own recursion, inside
                # the walk of a module built while tracing), ``named_parameters(prefix=)``:
                # the method's Python, which reads the tables as any attribute read
                return tx.inline_user_function(walk, [self, *args], kwargs)
            return self._walk_tree(tx, name, args, kwargs)
        if name == "to":
            return self._to(tx, args, kwargs)
        return super().call_method(tx, name, args, kwargs)

    def _to(self, tx, args: list, kwargs: dict) -> VariableTracker:
        """``module.to(dtype)`` / ``.to(device)`` whose tensors already are so: ``self``, as
        ``nn.Module.to`` returns (SwitchTransformers' router does
        ``self.classifier = self.classifier.to(self.dtype)`` in every forward). Each
        parameter and buffer is read through its source, so its dtype and device are
        guarded; a ``to`` that would convert one is a graph break (it rebinds ``.data``)."""
        if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            raise Unsupported("module.to() with a tensor argument")
        device, dtype, _, _ = torch._C._nn._parse_to(
            *[a.as_python_constant() for a in args],
            **{k: v.as_python_constant() for k, v in kwargs.items()})
        for kind in ("parameters", "buffers"):
            for vt in self._walk_tree(tx, kind, [], {}).items:
                t = vt.example()
                if (dtype is not None and (t.is_floating_point() or t.is_complex())
                        and t.dtype != dtype) or (device is not None and t.device != device):
                    raise Unsupported(f"module.to() that converts its tensors ({t.dtype} on "
                                      f"{t.device} to {dtype} on {device})")
        return self

    def _walk_tree(self, tx, name: str, args: list, kwargs: dict) -> ListIteratorVariable:
        """``self.parameters()`` (transformers' ``self.dtype``: the first floating-point
        parameter's dtype), ``named_modules()``, ``buffers()``...: the items in PyTorch's
        order, each wrapped through its own source (``_modules['a']._parameters['w']``),
        with the tree they come from guarded -- the key lists of every module's
        ``_modules``, ``_parameters`` and ``_buffers`` -- and a tensor met twice guarded as
        the same tensor, so dropping the repeat (``remove_duplicate``) stays right."""
        if self.source is None or args or kwargs:
            raise Unsupported(f"module.{name}() with arguments, or of a module built while "
                              "tracing")
        m, kind = self.value, name.removeprefix("named_")
        modules = list(m.named_modules(remove_duplicate=False))
        sources = {"": self.source}
        for path, sub in modules:  # parents come before their children
            src = sources[path]
            for table in ("_modules", "_parameters", "_buffers"):
                tx.guards.DICT_KEYS(AttrSource(src, table), sub.__dict__[table])
            for child in sub._modules:
                sources[f"{path}.{child}" if path else child] = _child(src, child)
        if kind in ("modules", "children"):
            pairs = [(path, sub) for path, sub in modules if kind == "modules" or
                     (path and "." not in path)]
            items = [(p, tx.wrap_nested(sub, sources[p])) for p, sub in pairs]
        else:
            table = "_parameters" if kind == "parameters" else "_buffers"
            items = [(f"{path}.{k}" if path else k, _reparametrized(tx, sub, k) or
                      tx.wrap_nested(t, GetItemSource(AttrSource(sources[path], table), k)))
                     for path, sub in modules for k, t in sub.__dict__[table].items()
                     if t is not None]
        seen, unique = set(), []
        for path, vt in items:  # the first of each object, as PyTorch's remove_duplicate
            if id(vt) not in seen:
                seen.add(id(vt))
                unique.append((path, vt))
        return ListIteratorVariable([TupleVariable([ConstantVariable(p), vt])
                                     if name.startswith("named_") else vt
                                     for p, vt in unique])

    def reconstruct(self, rc):
        if self.constructed is not None:
            cls, args, kwargs = self.constructed
            return cls(*[rc(a) for a in args], **{k: rc(v) for k, v in kwargs.items()})
        if self.fresh:
            module = object.__new__(type(self.value))
            torch.nn.Module.__init__(module)
            rc.memo[id(self)] = module  # before the attributes: they may refer back to it
            for name, value in self.pending.items():
                setattr(module, name, rc(value))  # Module's __setattr__ sorts them
            return module
        return self.value

    def children(self):
        if self.constructed is None:
            return list(self.pending.values())
        return [*self.constructed[1], *self.constructed[2].values()]

    def __repr__(self):
        return f"NNModuleVariable({type(self.value).__name__})"


@functools.cache
def own_call(cls: type) -> types.FunctionType | None:
    """A module class's own ``__call__``, written outside torch (gpytorch's kernels), or
    None: Module's (or torch's own, such as ``fx.GraphModule``'s, which runs ``forward``)."""
    call = inspect.getattr_static(cls, "__call__")
    if call is torch.nn.Module.__call__ or not isinstance(call, types.FunctionType) or \
            (call.__module__ or "").startswith("torch."):
        return None
    return call


_TREE_WALKS = ("parameters", "named_parameters", "buffers", "named_buffers", "children",
               "named_children", "modules", "named_modules")


def _reparametrized(tx, m: torch.nn.Module, name: str) -> VariableTracker | None:
    """What parameter or buffer ``name`` of ``m`` reads as inside a traced
    ``functional_call`` (the innermost that replaces it), or None."""
    for replaced in reversed(tx.reparametrized):
        vt = replaced.get((id(m), name))
        if vt is not None:
            return vt
    return None


def _class_attr(source: Source | None, m: torch.nn.Module, name: str) -> Source | None:
    """The source of a function the module's class defines: ``L['self'].__class__.forward``
    (a decorator's closure -- transformers wraps ``forward`` in ``use_experts_implementation``
    -- is read through it). None for a function stored on the instance itself."""
    if source is None or name in vars(m):
        return None
    return AttrSource(AttrSource(source, "__class__"), name)


def _child(source: Source, name: str) -> Source:
    return GetItemSource(AttrSource(source, "_modules"), name)


__all__ = ['NNModuleVariable', 'own_call']
