"""Tracing with example inputs: run the function once and record every torch call.

:func:`tutorcompile.fx.symbolic_trace` records a function without running it, so Python that
needs a real number (``math.sqrt(k.size(-1))``, ``if x.shape[0] > 1``) stops it. AOTAutograd
compiles for the shapes it is called with anyway, so it can do what PyTorch's AOTAutograd
does: *run* the function on (copies of) the example inputs and record the calls as they
happen. Shapes are concrete, Python control flow just runs, and what is recorded is the
torch-level program for these shapes -- the same kind of graph Dynamo captures.

The recording uses a ``TorchFunctionMode``: every ``torch.*``, ``F.*`` and Tensor method or
operator call passes through ``__torch_function__`` before it runs. Calls made *inside* a
recorded call (``F.gelu``'s own implementation) are not recorded: the mode is off while the
call runs, so the graph keeps the user's level of abstraction. Parameters and buffers become
inputs; other tensors the function closes over become constants.

Under ``torch.autocast`` (around the traced call or inside it) the casts autocast makes
are recorded as ``.to(dtype)`` nodes before each call, as Dynamo records them
(:mod:`tutorcompile.amp`): the graph computes in eager's dtypes with no autocast state.

The example inputs are cloned and the run happens under ``no_grad`` with the RNG state
restored afterwards, so tracing neither mutates the caller's tensors nor shifts random
numbers.

Mirrors: torch/fx/experimental/proxy_tensor.py (``make_fx``, tracing by running), at the
torch-function level instead of aten.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.overrides import TorchFunctionMode

from ..amp import autocast_casts, autocast_on, replace_tensors, tensors_in
from ..errors import TutorcompileError
from ..fx import Graph, GraphModule, Node
from ..fx.aliasing import same_storage
from ..fx.node import map_aggregate


class _Recorder(TorchFunctionMode):
    def __init__(self, graph: Graph, env: dict[int, Node], keep: list, attrs: dict):
        super().__init__()
        self.graph, self.env, self.keep, self.attrs = graph, env, keep, attrs
        self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True)

    def as_arg(self, a: Any) -> Any:
        if isinstance(a, torch.Tensor):
            node = self.env.get(id(a))
            if node is None:  # a tensor from outside: a constant of the graph
                name = f"_tensor_constant{len(self.attrs)}"
                self.attrs[name] = a
                node = self.graph.get_attr(name)
                self.env[id(a)] = node
                self.keep.append(a)
            return node
        if isinstance(a, torch.Size):
            return tuple(a)
        return a

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if autocast_on() and name not in ("__get__", "__set__"):
            args, kwargs = self.autocast_inputs(func, name, args, kwargs)
        out = func(*args, **kwargs)
        if name == "__set__":
            return out
        if name == "__setitem__":
            node = self.graph.call_function(operator.setitem,
                                            map_aggregate(tuple(args), self.as_arg))
            self.keep.append(args)
            return out
        if not _has_tensor(out):
            return out  # sizes, dtypes, Python numbers: concrete, nothing to record
        node = self._node(func, name, args, kwargs)
        self.keep.append(out)
        if isinstance(out, torch.Tensor) and args and isinstance(args[0], torch.Tensor) \
                and out is not args[0] and same_storage(out, args[0]):
            node.meta["aliases_input"] = True  # a view: functionalize must know
        if isinstance(out, torch.Tensor):
            # an op returning its own input (x.add_(1), x.contiguous(), x.to(x.dtype)): later
            # reads keep naming the input's node, so functionalize sees them as one tensor
            if id(out) not in self.env:
                self.env[id(out)] = node
        elif isinstance(out, (tuple, list)):
            for i, v in enumerate(out):
                if isinstance(v, torch.Tensor):
                    item = self.graph.call_function(operator.getitem, (node, i))
                    item.meta["aliases_input"] = False  # topk's values: a tensor of its own
                    self.env[id(v)] = item
        return out

    def autocast_inputs(self, func, name: str, args: tuple, kwargs: dict
                        ) -> tuple[tuple, dict]:
        """Under ``torch.autocast``: the call's arguments with the casts autocast makes
        recorded as ``.to(dtype)`` nodes (found on fake copies, see
        :mod:`tutorcompile.amp`), so the graph computes in eager's dtypes without autocast.
        (The call itself then runs under autocast on inputs of the dtypes autocast wants:
        nothing more is cast.)"""
        tensors = tensors_in(args, kwargs)
        if not tensors:
            return args, kwargs

        def run(values: list):
            new_args, new_kwargs = replace_tensors(args, kwargs, values)
            return func(*new_args, **new_kwargs)

        mutates = name.endswith("_") and not name.endswith("__") or "out" in kwargs
        try:
            with self.fake_mode:
                fakes = [self.fake_mode.from_tensor(t) for t in tensors]
                casts = autocast_casts(run, fakes, mutates)
        except Exception as e:  # noqa: BLE001 -- an op fake tensors cannot run
            raise TutorcompileError(f"{name} under torch.autocast: the casts autocast makes "
                                    f"could not be found on fake tensors ({e})") from None
        if casts is None:
            raise TutorcompileError(f"{name} under torch.autocast: autocast does more than "
                                    "cast its inputs, which the traced graph cannot say as "
                                    "casts")
        if not casts:
            return args, kwargs
        values = list(tensors)
        for i, dtype in casts.items():
            node = self.graph.call_method("to", (self.as_arg(tensors[i]),), {"dtype": dtype})
            values[i] = tensors[i].to(dtype)
            self.env[id(values[i])] = node
            self.keep.append(values[i])
        return replace_tensors(args, kwargs, values)

    def _node(self, func, name: str, args, kwargs) -> Node:
        a = map_aggregate(tuple(args), self.as_arg)
        k = map_aggregate(dict(kwargs), self.as_arg)
        owner = getattr(func, "__self__", None)
        if name == "__get__" and owner is not None:  # a property such as x.T
            return self.graph.call_function(getattr, (a[0], owner.__name__))
        method = _tensor_method_name(func)
        if method is not None:
            return self.graph.call_method(method, a, k)
        return self.graph.call_function(func, a, k)


_METHOD_NAMES: dict[int, str] = {}


def _tensor_method_name(func: Any) -> str | None:
    """``"add"`` for ``Tensor.add``, ``"__rsub__"`` for ``Tensor.__rsub__``, else None."""
    if not _METHOD_NAMES:
        for cls in (torch._C.TensorBase, torch.Tensor):  # Tensor's own entries win
            for key, value in vars(cls).items():
                _METHOD_NAMES[id(value)] = key
    name = _METHOD_NAMES.get(id(func))
    if name is None and getattr(func, "__objclass__", None) is torch._C.TensorBase:
        name = func.__name__
    return name


def _has_tensor(v: Any) -> bool:
    if isinstance(v, torch.Tensor):
        return True
    if isinstance(v, (tuple, list)) and not isinstance(v, torch.Size):
        return any(_has_tensor(x) for x in v)
    return False


def _parameter_names(fn: Callable, n: int) -> list[str]:
    """The function's own parameter names where they can be read, else ``arg0``, ``arg1``..."""
    target = fn.forward if isinstance(fn, torch.nn.Module) else fn
    try:
        params = [p for p in inspect.signature(target).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params[:n]]
    if len(names) != n or not all(x.isidentifier() for x in names):
        names = [f"arg{i}" for i in range(n)]
    return names


def trace_with_inputs(fn: Callable, args: list, params: dict[str, torch.Tensor] | None = None
                      ) -> tuple[GraphModule, list[str]]:
    """Record ``fn(*args)`` (or ``functional_call(module, params, args)``) as a GraphModule.

    Returns the module and the names of its inputs: one per positional argument, then one
    per entry of ``params`` (named ``p_<path>``).
    """
    graph = Graph(provenance="trace_with_inputs")
    env: dict[int, Node] = {}
    keep: list = []
    attrs: dict[str, Any] = {}
    names = []
    clones = []
    arg_names = _parameter_names(fn, len(args))
    for i, a in enumerate(args):
        node = graph.placeholder(arg_names[i])
        names.append(node.name)
        c = a.detach().clone() if isinstance(a, torch.Tensor) else a
        if isinstance(c, torch.Tensor):
            env[id(c)] = node
        clones.append(c)
    param_clones = {}
    for path, t in (params or {}).items():
        node = graph.placeholder("p_" + path.replace(".", "_"))
        names.append(node.name)
        c = t.detach().clone()
        env[id(c)] = node
        param_clones[path] = c
    keep += clones + list(param_clones.values())
    rng = torch.get_rng_state()
    try:
        with torch.no_grad(), _Recorder(graph, env, keep, attrs):
            if isinstance(fn, torch.nn.Module):
                out = torch.func.functional_call(fn, param_clones, tuple(clones))
            else:
                out = fn(*clones)
    finally:
        torch.set_rng_state(rng)
    recorder = _Recorder(graph, env, keep, attrs)
    if isinstance(out, (tuple, list)):
        result = type(out)(recorder.as_arg(o) for o in out)
    else:
        result = recorder.as_arg(out)
    graph.output(result)
    graph.lint()
    name = type(fn).__name__ if isinstance(fn, torch.nn.Module) else \
        getattr(fn, "__name__", "GraphModule")
    return GraphModule(attrs, graph, name if name.isidentifier() else "GraphModule"), names
