"""``nn.Module`` trackers: ``__call__`` inlines ``forward``; parameters and buffers become graph
inputs (like ``inline_inbuilt_nn_modules``).

Mirrors: torch/_dynamo/variables/nn_module.py.
"""
from __future__ import annotations

import inspect
import types

import torch

from ..exc import Unsupported
from ..source import AttrSource, GetItemSource, Source
from .base import VariableTracker
from .containers import ConstantVariable, ListVariable, TupleVariable
from .functions import UserMethodVariable


class NNModuleVariable(VariableTracker):
    """An nn.Module: calls inline ``forward``; parameters/buffers become graph inputs."""

    def __init__(self, module: torch.nn.Module, source: Source):
        self.value, self.source = module, source

    def python_type(self):
        return type(self.value)

    def var_getattr(self, tx, name):
        m = self.value
        for table in ("_parameters", "_buffers", "_modules"):
            if name in m.__dict__.get(table, {}):
                # PyTorch's spelling: L['self']._modules['fc']._parameters['weight']
                src = GetItemSource(AttrSource(self.source, table), name)
                return tx.wrap_nested(m.__dict__[table][name], src)
        src = AttrSource(self.source, name)
        if name in m.__dict__ and not hasattr(
                type(inspect.getattr_static(type(m), name, None)), "__set__"):
            # an instance attribute (a class property would win): a function there is not bound
            return tx.wrap_nested(m.__dict__[name], src)
        static = inspect.getattr_static(m, name, None)
        if isinstance(static, types.FunctionType):
            return UserMethodVariable(static, self)
        if isinstance(static, staticmethod):
            return tx.wrap_nested(static.__func__, None)
        if isinstance(static, property):
            return tx.inline_user_function(static.fget, [self], {})
        return tx.wrap_nested(getattr(m, name), src)

    def call_function(self, tx, args, kwargs):
        m = self.value
        if (m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                or torch.nn.modules.module._global_forward_hooks
                or torch.nn.modules.module._global_forward_pre_hooks):
            raise Unsupported(f"module {type(m).__name__} has hooks")
        forward = inspect.getattr_static(m, "forward")
        if not isinstance(forward, types.FunctionType):
            raise Unsupported(f"{type(m).__name__}.forward is not a Python function")
        if "forward" in m.__dict__:   # ``m.forward = fn``: called as it is, without self
            return tx.inline_user_function(forward, list(args), kwargs)
        return tx.inline_user_function(forward, [self, *args], kwargs)

    def unpack(self, tx):
        m = self.value
        if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList)):
            return [tx.wrap_nested(sub, _child(self.source, name))
                    for name, sub in m._modules.items()]
        if isinstance(m, torch.nn.ModuleDict):
            return [ConstantVariable(k) for k in m._modules]
        raise Unsupported(f"iterating over {type(m).__name__}")

    def call_method(self, tx, name, args, kwargs):
        m = self.value
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
                if isinstance(m, torch.nn.Sequential):
                    raise Unsupported("slicing a Sequential (a new module)")
                names = list(m._modules)[key]
                return ListVariable([tx.wrap_nested(m._modules[n], _child(self.source, n))
                                     for n in names])
            if isinstance(m, torch.nn.ModuleDict):
                return tx.wrap_nested(m[key], _child(self.source, key))
            names = list(m._modules)
            return tx.wrap_nested(m[key], _child(self.source, names[key]))
        if name in ("items", "keys", "values") and isinstance(m, torch.nn.ModuleDict):
            entries = [(k, tx.wrap_nested(v, _child(self.source, k)))
                       for k, v in m._modules.items()]
            if name == "keys":
                return TupleVariable([ConstantVariable(k) for k, _ in entries])
            if name == "values":
                return TupleVariable([v for _, v in entries])
            return TupleVariable([TupleVariable([ConstantVariable(k), v]) for k, v in entries])
        if name in ("parameters", "buffers", "children", "modules", "named_parameters"):
            raise Unsupported(f"module.{name}() while tracing")
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, rc):
        return self.value

    def __repr__(self):
        return f"NNModuleVariable({type(self.value).__name__})"


def _child(source: Source, name: str) -> Source:
    return GetItemSource(AttrSource(source, "_modules"), name)


__all__ = ['NNModuleVariable']
