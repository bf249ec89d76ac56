"""Torch function trackers: ``torch.*`` and ``torch.nn.functional.*`` callables, each call one
graph node, and the compile-time state (``torch.compiler.is_compiling()`` ...) that code asking
about compilation sees while we trace it.

Mirrors: torch/_dynamo/variables/torch.py.
"""
from __future__ import annotations

import contextlib
import inspect
import types
from collections.abc import Callable
from typing import Any

import torch

from ...amp import regions
from .. import trace_rules
from ..exc import Unsupported
from ..source import AttrSource, ObjectSource, Source
from .base import LATE_BOUND, VariableTracker
from .containers import (
    ConstantVariable,
    ListVariable,
    SizeVariable,
    TupleVariable,
    wrap_constant_result,
)
from .tensor import (
    AUTOGRAD_RUNS_OUTSIDE,
    FILL_VALUE_POSITION,
    SymIntVariable,
    TensorVariable,
    addc_with_tensor_value,
    full_with_tensor_value,
)


class TorchFunctionVariable(VariableTracker):
    """A callable from torch: each call becomes one graph node."""

    # queries that read global state (guarded) or metadata, safe to evaluate while tracing
    FOLDABLE = {torch.is_grad_enabled, torch.get_default_dtype, torch.is_tensor,
                torch.is_floating_point, torch.is_complex, torch.numel,
                torch.is_autocast_enabled, torch.cuda.is_available,
                torch.is_inference_mode_enabled}

    def __init__(self, fn: Callable, source: Source | None = None):
        self.fn, self.source = fn, source

    def python_type(self):
        return type(self.fn)

    def as_python_constant(self):
        return self.fn

    def is_python_constant(self):
        return False

    def as_proxy(self):
        return self.fn

    def call_function(self, tx, args, kwargs):
        fn = self.fn
        if fn in _TRACING_STATE:  # "am I being compiled?" -- yes, by us (as under Dynamo)
            return wrap_constant_result(_TRACING_STATE[fn])
        if fn is torch.jit.annotate:
            # TorchScript's type annotation of a value (``torch.jit.annotate(List[Tensor],
            # [])``): in eager it returns the value itself -- so does the traced call
            # (Dynamo's ``handle_jit_annotate``), not a graph node taking a type
            return args[1] if len(args) > 1 else kwargs["the_value"]
        if fn in _GROUPING:
            return tx.inline_user_function(group_tensors_by_device_and_dtype, args, kwargs)
        if fn in (torch.autograd.grad, torch.autograd.backward):
            raise Unsupported(AUTOGRAD_RUNS_OUTSIDE.format(f"torch.autograd.{fn.__name__}"))
        if fn in trace_rules.KERNEL_CHOICE_CONTEXTS or fn in trace_rules.ANNOTATING_CONTEXTS:
            return tx.call(tx.wrap_nested(contextlib.nullcontext, None), [], {})
        if fn is torch.is_tensor and len(args) == 1:  # of anything, not only a tensor
            return ConstantVariable(isinstance(args[0], TensorVariable))
        if fn is torch.is_inference_mode_enabled and tx.inference_regions:
            return ConstantVariable(True)   # inside a traced ``torch.inference_mode()``
        if fn is torch.is_grad_enabled:
            tx.guards.GRAD_MODE()
            return ConstantVariable(tx.grad_enabled)  # inside a traced no_grad block: False
        if fn is torch.is_autocast_enabled:
            # the state inside the traced autocast regions, on top of the global one
            tx.guards.AUTOCAST()
            with regions(tx.autocast_stack):
                return wrap_constant_result(fn(*[a.example() for a in args],
                                               **{k: v.example() for k, v in kwargs.items()}))
        if fn in self.FOLDABLE:
            values = [a.example() for a in args]
            kw_values = {k: v.example() for k, v in kwargs.items()}
            out = fn(*values, **kw_values)
            if fn is not torch.cuda.is_available and not any(
                    isinstance(a, TensorVariable) for a in [*args, *kwargs.values()]):
                tx.guards.CALL_RESULT(fn, values, kw_values, out)   # global state
            return wrap_constant_result(out)
        if fn in (torch.Size,):
            return SizeVariable(tx.unpack(args[0]) if args else [])
        if fn in (torch.device, torch.dtype) or isinstance(fn, type) and not issubclass(
                fn, torch.Tensor):
            values = [a.as_python_constant() for a in args]
            return wrap_constant_result(fn(*values))
        name = getattr(fn, "__name__", "")
        if fn in (torch.from_numpy, torch.as_tensor, torch.asarray) and len(args) == 1 \
                and not kwargs and isinstance(args[0], LATE_BOUND["NumpyNdarrayVariable"]):
            # the array's own tensor (both share memory, in eager too)
            return args[0].tensor
        if fn in (torch.addcdiv, torch.addcmul) and isinstance(kwargs.get("value"),
                                                               TensorVariable):
            return addc_with_tensor_value(tx, name, *args, value=kwargs["value"])
        if fn in FILL_VALUE_POSITION:
            filled = full_with_tensor_value(tx, "call_function", fn, list(args), kwargs)
            if filled is not None:
                return filled
        if fn in (torch.manual_seed, torch.random.manual_seed) and not kwargs and \
                tx.seed_before_graph(fn, args):
            return tx.wrap_nested(torch.default_generator, ObjectSource(torch.default_generator))
        if name.startswith(("set_", "_set_")) or name in (
                "manual_seed", "autocast_increment_nesting", "autocast_decrement_nesting",
                "clear_autocast_cache"):
            # a graph node would run it at another time than the program does (when the
            # graph runs, or never, once AOT traces it away): torch.autocast's own __exit__
            raise Unsupported(f"torch.{name} changes global state")
        made = tx.output.create_node("call_function", fn, tuple(args), kwargs)
        if fn in (torch.tensor, torch.as_tensor) and all(
                a.is_python_constant() for a in [*args, *kwargs.values()]):
            # a table written in the program (``torch.tensor([[1, 2], [3, 4]])``): its value
            # is the same every call, so ``.tolist()`` of it is known (tx.known_constant)
            made.literal = fn(*[a.as_python_constant() for a in args],
                              **{k: v.as_python_constant() for k, v in kwargs.items()})
        return made

    def var_getattr(self, tx, name):
        return tx.wrap_nested(getattr(self.fn, name), None)

    def reconstruct(self, rc):
        return self.fn

    def __repr__(self):
        return f"TorchFunctionVariable({getattr(self.fn, '__name__', self.fn)})"


class AllowedInGraphFunctionVariable(TorchFunctionVariable):
    """A function marked with ``torch.compiler.allow_in_graph``: each call is one graph node
    of the function itself, run on fake tensors to know its outputs (the later stages trace
    through it, as PyTorch's AOTAutograd does). Its contract is PyTorch's: tensors, numbers,
    strings and sequences of them in and out; any other argument (an object, a module, a
    function) has no place in a node, so such a call is a graph break, never a guess. So is
    one that returns anything but a tensor: AOT runs such a node as one opaque call, which
    must give tensors (a tuple of them is not modelled there yet)."""

    def call_function(self, tx, args, kwargs):
        name = getattr(self.fn, "__name__", self.fn)
        for a in [*args, *kwargs.values()]:
            if not _fits_a_node(a):
                raise Unsupported(f"{name} (marked allow_in_graph) called with {a}: only "
                                  "tensors, constants and sequences of them can be a graph "
                                  "node's arguments")
        made = tx.output.create_node("call_function", self.fn, tuple(args), kwargs)
        if not isinstance(made, TensorVariable):
            raise Unsupported(f"{name} (marked allow_in_graph) returns {made}, not a tensor: "
                              "a graph node of it must return one tensor")
        return made

    def __repr__(self):
        return f"AllowedInGraphFunctionVariable({getattr(self.fn, '__name__', self.fn)})"


def _fits_a_node(a: VariableTracker) -> bool:
    if isinstance(a, (TensorVariable, SymIntVariable)):
        return True
    if isinstance(a, (ListVariable, TupleVariable)) and type(a) in (
            ListVariable, TupleVariable, SizeVariable):   # (not a deque, nor a named tuple)
        return all(_fits_a_node(i) for i in a.items)
    return a.is_python_constant() and trace_rules.immutable_constant(a.as_python_constant())


def group_tensors_by_device_and_dtype(tensorlistlist, with_indices=False):
    """``torch._C._group_tensors_by_device_and_dtype`` (foreach optimizers split their
    state lists so): the lists regrouped by the device and dtype of the first list's
    tensors -- metadata only, so traced in Python, each group's lists holding the same
    tensors (or None) as the arguments, with their positions when asked."""
    groups = {}
    for i, first in enumerate(tensorlistlist[0]):
        key = (first.device, first.dtype)
        if key not in groups:
            groups[key] = ([[] for _ in tensorlistlist], [])
        lists, indices = groups[key]
        for out, source in zip(lists, tensorlistlist):
            out.append(source[i])
        if with_indices:
            indices.append(i)
    return groups


_GROUPING = (torch._C._group_tensors_by_device_and_dtype,
             torch.utils._foreach_utils._group_tensors_by_device_and_dtype)


def _tracing_state() -> dict:
    """What code asking about compilation sees while we trace it: compiling, not exporting,
    not TorchScript (so libraries take their compile-friendly paths, as under Dynamo)."""
    state: dict[Any, Any] = {
        torch.compiler.is_compiling: True, torch.compiler.is_dynamo_compiling: True,
        torch.compiler.is_exporting: False, torch.jit.is_tracing: False,
        torch.jit.is_scripting: False, torch._C._get_tracing_state: None,
        # the dispatch modes a user installed: none -- the fake mode tracing runs
        # ops under is ours (nn.MultiheadAttention asks, to avoid its fast path)
        torch.utils._python_dispatch._get_current_dispatch_mode_stack: []}
    dynamo = getattr(torch, "_dynamo", None)  # already imported by torch itself
    if dynamo is not None and hasattr(dynamo, "is_compiling"):
        state[dynamo.is_compiling] = True
    return state


_TRACING_STATE = _tracing_state()


# Python functions of these torch packages are traced into like user code (Dynamo's
# MOD_INLINELIST in torch/_dynamo/trace_rules.py): the lambdas of torch.testing's OpInfo
# database (``lambda x, *a: x.expand(*a)``); a torch.nn module's methods called on their own
# (SqueezeBERT's ``nn.LayerNorm.forward(self, x)`` on its subclass) -- the same ``forward``
# that calling the module inlines; ``torch.distributions`` (a ``Normal`` made in forward: its
# methods are Python over torch ops); ``torch.optim`` (``tc.compile(opt.step)``: the step,
# its ``_use_grad`` wrapper and the functional ``_single_tensor_adam`` are Python over
# tensor and ``_foreach_*`` ops, as are the LR schedulers); ``flex_attention``'s module (its
# checks and ``BlockMask``, a Python class of index tables around the ``mask_mod``); the
# reparametrizations torch.nn.utils puts on a module (``weight_norm``, ``spectral_norm``,
# ``prune``: forward pre-hooks that are objects, whose ``__call__`` computes the weight from
# the module's own tensors and sets it; ``parametrizations``: modules with Python methods
# such as spectral norm's power iteration under ``@torch.no_grad()``).
_INLINED_TORCH_MODULES = ("torch.testing", "torch.nn.modules.", "torch.distributions.",
                         "torch.utils._pytree", "torch.optim.",
                         "torch.nn.attention.flex_attention", "torch.nn.utils.weight_norm",
                         "torch.nn.utils.spectral_norm", "torch.nn.utils.prune",
                         "torch.nn.utils.parametrize", "torch.nn.utils.parametrizations")


def traced_like_user_code(module: str) -> bool:
    """Is ``module`` one of torch's Python packages traced like user code (above)?"""
    return module.startswith(_INLINED_TORCH_MODULES)


def defining_module(fn: types.FunctionType) -> str:
    """The module whose code ``fn`` is: the name in its globals. ``functools.wraps`` copies
    the wrapped function's ``__module__`` onto a wrapper written elsewhere -- the wrapper
    ``torch.compile`` puts around ``flex_attention``'s helper claims to live in
    ``torch.nn.attention.flex_attention``, though its code is torch._dynamo's."""
    return fn.__globals__.get("__name__") or fn.__module__ or ""


def in_torch(module: str | None) -> bool:
    """Is ``module`` torch or one of its submodules? Not ``torchvision``, ``torchaudio``,
    ``torchmetrics``...: those are Python libraries built on torch, traced like user code
    (recording ``torchvision.ops.stochastic_depth`` as one opaque call would hide the random
    draw inside it from AOT, and its backward would draw again)."""
    return isinstance(module, str) and (module == "torch" or module.startswith("torch."))


def is_torch_callable(value: Any) -> bool:
    """True for functions that live in torch (``torch.add``, ``F.relu``, ``Tensor.add``)."""
    if isinstance(value, (type, torch.nn.Module)):
        return False
    module = getattr(value, "__module__", None) or ""
    if isinstance(value, types.FunctionType) and (traced_like_user_code(
            defining_module(value)) or traced_like_user_code(module)):
        return False  # (the second: wrapped by ``@torch.no_grad()``, which keeps its name)
    call = inspect.getattr_static(type(value), "__call__", None)
    if not isinstance(value, types.FunctionType) and isinstance(call, types.FunctionType) \
            and traced_like_user_code(defining_module(call)):
        return False  # an object whose ``__call__`` is such Python (weight_norm's hook)
    if in_torch(module) and not module.startswith("torch._dynamo"):
        return callable(value)
    if isinstance(value, (types.BuiltinFunctionType, types.MethodDescriptorType,
                          types.WrapperDescriptorType)):
        # never take the truth value of ``__self__``: for a method bound to a tensor (or a
        # numpy array) that raises "Boolean value of Tensor ... is ambiguous"
        owner = getattr(value, "__self__", None)
        if owner is None:
            owner = getattr(value, "__objclass__", None)
        if owner is not None and not isinstance(owner, (type, types.ModuleType)):
            owner = type(owner)  # a bound method: the owner's class says where it lives
        owner_mod = getattr(owner, "__module__", None) or getattr(owner, "__name__", None)
        return in_torch(owner_mod)
    return False


class ScriptFunctionVariable(TorchFunctionVariable):
    """A ``@torch.jit.script`` function (geoopt's and torchkbnufft's kernels): one graph
    node, run as TorchScript, when TorchScript's interpreter runs it on fake tensors; when
    it cannot, the Python function it was compiled from (``_torchdynamo_inline``), traced
    like any function -- as PyTorch's Dynamo always traces it."""

    def __init__(self, fn: Callable, source: Source | None, original: Callable):
        super().__init__(fn, source)
        self.original = original

    def call_function(self, tx, args, kwargs):
        try:
            return super().call_function(tx, args, kwargs)
        except Unsupported as e:
            if "failed on fake tensors" not in e.reason:
                raise
        src = AttrSource(self.source, "_torchdynamo_inline") if self.source is not None \
            else None
        return tx.inline_user_function(self.original, list(args), kwargs, fn_source=src)


__all__ = ['ScriptFunctionVariable', 'TorchFunctionVariable', 'defining_module', 'in_torch',
           'is_torch_callable', 'traced_like_user_code']
