"""Symbolic tracing: run ``forward`` once on Proxies and keep the graph they record.

``symbolic_trace(model)`` turns an ``nn.Module`` (or a plain function) into a
:class:`~tutorcompile.fx.GraphModule` without running it on data:

1. every input of ``forward`` becomes a ``placeholder`` node and a :class:`Proxy` for it;
2. ``forward`` is called with the proxies. Operators, Tensor methods and torch functions on
   proxies append nodes (see ``proxy.py``);
3. while it runs, two of ``nn.Module``'s methods are patched:

   * ``__call__``: a submodule call either becomes one ``call_module`` node (a *leaf*: the
     standard ``torch.nn`` layers by default, see :meth:`Tracer.is_leaf_module`) or is
     traced through, so the ops inside a user's own block are inlined;
   * ``__getattr__``: reading a parameter (``self.weight``) yields a ``get_attr`` proxy.
     Buffers and other tensors become ``get_attr`` nodes where they are used; a tensor that
     is not an attribute of the model is stored on the result as ``_tensor_constant0``;

4. whatever ``forward`` returns (a proxy, or tuples/lists/dicts of them) becomes ``output``.

Every node remembers the user's line in ``node.meta["source"]`` (``"model.py:12 in forward:
y = self.fc(x)"``), found by walking the stack to the first frame outside tutorcompile and
torch (inputs point at the ``def`` line). ``concrete_args`` fixes an input to a value
(``None``, a flag, a tensor): the trace follows that value, and the graph checks at run time
that it is given the same value.

Mirrors: torch/fx/_symbolic_trace.py (``Tracer``, ``symbolic_trace``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

import torch

from .graph import Graph
from .graph_module import GraphModule
from .node import Node, snake_case
from .proxy import Attribute, Proxy, TraceError, _display_filename, user_source


def check_concrete_arg(value: Any, expected: Any, name: str) -> None:
    """The run-time check a graph traced with ``concrete_args`` makes on that input."""
    if expected is None or isinstance(expected, torch.Tensor):
        ok = value is expected
    else:
        ok = type(value) is type(expected) and value == expected
    if not ok:
        raise ValueError(f"input {name!r} was fixed to {expected!r} by concrete_args when "
                         f"this graph was traced, but got {value!r}; trace again with the "
                         "new value (or without concrete_args for it)")


class Tracer:
    """Records a module's ``forward`` (or a function) as a :class:`Graph`.

    ``leaf_modules``: extra module classes (or qualified submodule names, ``"encoder.attn"``)
    to keep as single ``call_module`` nodes instead of tracing through them. Subclass and
    override :meth:`is_leaf_module` for any other rule.
    """

    def __init__(self, leaf_modules: Iterable[type | str] = ()):
        leaf_modules = tuple(leaf_modules)
        self.leaf_types = tuple(m for m in leaf_modules if isinstance(m, type))
        self.leaf_names = {m for m in leaf_modules if isinstance(m, str)}
        self.graph: Graph   # both set by trace()
        self.root: torch.nn.Module

    # --- policy -------------------------------------------------------------------------
    def is_leaf_module(self, m: torch.nn.Module, module_qualified_name: str) -> bool:
        """Keep ``m`` as one ``call_module`` node? Default: the layers of ``torch.nn``."""
        if isinstance(m, self.leaf_types) or module_qualified_name in self.leaf_names:
            return True
        standard = type(m).__module__.startswith(("torch.nn.", "torch.ao.nn."))
        return standard and not isinstance(m, torch.nn.Sequential)

    # --- the trace ----------------------------------------------------------------------
    def trace(self, root: torch.nn.Module | Callable[..., Any],
              concrete_args: dict[str, Any] | None = None) -> Graph:
        """Trace ``root`` (a module's ``forward``, or a function) into a new Graph."""
        if isinstance(root, torch.nn.Module):
            self.root, fn = root, root.forward
        elif callable(root):
            self.root, fn = torch.nn.Module(), root
        else:
            raise TypeError(f"symbolic_trace needs an nn.Module or a function, got {root!r}")
        self.graph = Graph(provenance="symbolic_trace")
        self.constants: dict[str, Any] = {}
        self._module_paths: dict[int, str] = {}
        for name, m in self.root.named_modules(remove_duplicate=False):
            self._module_paths.setdefault(id(m), name)
        self._tensor_paths: dict[int, str] = {}
        for name, t in [*self.root.named_parameters(remove_duplicate=False),
                        *self.root.named_buffers(remove_duplicate=False)]:
            self._tensor_paths.setdefault(id(t), name)
        self._param_proxies: dict[int, Proxy] = {}

        args, kwargs = self._create_inputs(fn, dict(concrete_args or {}))
        with _patched_modules(self):
            result = fn(*args, **kwargs)
        self.graph.output(self.create_arg(result))
        self.graph.output_node.meta["source"] = None
        self.graph.lint()
        return self.graph

    def _create_inputs(self, fn: Callable[..., Any], concrete: dict[str, Any]
                       ) -> tuple[list[Any], dict[str, Any]]:
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError) as e:
            raise TraceError(f"cannot read the signature of {fn!r} to create its inputs: {e}",
                             "signature") from e
        unknown = set(concrete) - set(params)
        if unknown:
            raise TypeError(f"concrete_args names {sorted(unknown)}, which "
                            f"{getattr(fn, '__qualname__', fn)} does not take; its "
                            f"parameters are {list(params)}")
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        where = _def_source(fn)  # inputs point at the `def` line
        for name, p in params.items():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TraceError(f"symbolic_trace cannot create inputs for `*{name}` / "
                                 f"`**{name}`: how many values it holds is unknown. Give the "
                                 "function fixed parameters, or use tutorcompile.compile "
                                 "(Dynamo, stage 3), which sees the real arguments.",
                                 f"*{name}")
            if name in concrete:
                value = concrete[name]
                node = self.graph.placeholder(name, value)
                check = self.graph.call_function(check_concrete_arg, (node, value, name),
                                                 name=f"check_{name}")
                check.meta["impure"] = True  # dead-code elimination must keep the check
                check.meta["source"] = node.meta["source"] = where
            else:
                default = p.default
                node = self.graph.placeholder(name, default)
                node.meta["source"] = where
                value = Proxy(node, self)
            if p.kind == p.KEYWORD_ONLY:
                kwargs[name] = value
            else:
                args.append(value)
        return args, kwargs

    # --- recording ----------------------------------------------------------------------
    def create_proxy(self, op: str, target: Any, args: tuple, kwargs: dict,
                     name: str | None = None) -> Proxy:
        """Add a node for ``target(*args, **kwargs)`` and return a Proxy for its result."""
        node = self.create_node(op, target, self.create_arg(args), self.create_arg(kwargs),
                                name)
        return Proxy(node, self)

    def create_node(self, op: str, target: Any, args: tuple, kwargs: dict,
                    name: str | None = None) -> Node:
        node = self.graph.create_node(op, target, args, kwargs, name)
        node.meta["source"] = user_source()
        return node

    def create_arg(self, a: Any) -> Any:
        """The graph's version of an argument: proxies → nodes, tensors → ``get_attr``."""
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, tuple):
            items = [self.create_arg(x) for x in a]
            return type(a)(*items) if hasattr(a, "_fields") else tuple(items)
        if isinstance(a, list):
            return [self.create_arg(x) for x in a]
        if isinstance(a, dict):
            return {k: self.create_arg(v) for k, v in a.items()}
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop),
                         self.create_arg(a.step))
        if isinstance(a, torch.Tensor):
            path = self._tensor_paths.get(id(a))
            if path is None:
                path = self._add_constant(a, "_tensor_constant")
            return self.create_node("get_attr", path, (), {})
        if isinstance(a, torch.nn.Module):
            raise TraceError(f"a module ({type(a).__name__}) is passed as an argument; "
                             "symbolic_trace can only record calls of modules", "module arg",
                             user_source())
        # Literals (numbers, dtypes, devices, sizes) print as themselves in generated code;
        # functions and other Python objects are bound there as named globals.
        return a

    def _add_constant(self, value: Any, hint: str) -> str:
        for name, v in self.constants.items():
            if v is value:
                return name
        i = 0
        while f"{hint}{i}" in self.constants or hasattr(self.root, f"{hint}{i}"):
            i += 1
        name = f"{hint}{i}"
        self.constants[name] = value
        return name

    # --- hooks called from the patched nn.Module ----------------------------------------
    def path_of_module(self, m: torch.nn.Module) -> str | None:
        """The qualified name of ``m`` inside the root (None if it is not a submodule)."""
        return self._module_paths.get(id(m))

    def call_module(self, m: torch.nn.Module, forward: Callable[..., Any], args: tuple,
                    kwargs: dict) -> Any:
        """A submodule call: one ``call_module`` node for a leaf, else trace through it."""
        path = self.path_of_module(m)
        if path is not None and path != "" and self.is_leaf_module(m, path):
            return self.create_proxy("call_module", path, args, kwargs)
        if path is None and self.is_leaf_module(m, ""):
            # A leaf module that is not an attribute of the root (a global, say): keep it
            # on the result under a fresh name, so the graph stays runnable.
            path = self._add_constant(m, f"_{snake_case(type(m).__name__)}_")
            self._module_paths[id(m)] = path
            return self.create_proxy("call_module", path, args, kwargs)
        return forward(*args, **kwargs)

    def getattr(self, attr: str, value: Any) -> Any:
        """``module.attr`` was read during tracing; parameters become ``get_attr`` proxies."""
        if isinstance(value, torch.nn.Parameter):
            path = self._tensor_paths.get(id(value))
            if path is not None:
                if id(value) not in self._param_proxies:
                    node = self.create_node("get_attr", path, (), {})
                    self._param_proxies[id(value)] = Proxy(node, self)
                return self._param_proxies[id(value)]
        return value


class _patched_modules:
    """While tracing, route ``nn.Module.__call__`` and ``__getattr__`` through the tracer."""

    def __init__(self, tracer: Tracer):
        self.tracer = tracer

    def __enter__(self) -> None:
        tracer = self.tracer
        self.orig_call = orig_call = torch.nn.Module.__call__
        self.orig_getattr = orig_getattr = torch.nn.Module.__getattr__

        def module_call(mod: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            def forward(*a: Any, **k: Any) -> Any:
                return orig_call(mod, *a, **k)
            return tracer.call_module(mod, forward, args, kwargs)

        def module_getattr(mod: torch.nn.Module, attr: str) -> Any:
            return tracer.getattr(attr, orig_getattr(mod, attr))

        torch.nn.Module.__call__ = module_call  # type: ignore[method-assign]
        torch.nn.Module.__getattr__ = module_getattr  # type: ignore[method-assign]

    def __exit__(self, *exc: Any) -> None:
        torch.nn.Module.__call__ = self.orig_call  # type: ignore[method-assign]
        torch.nn.Module.__getattr__ = self.orig_getattr  # type: ignore[method-assign]


def symbolic_trace(root: torch.nn.Module | Callable[..., Any],
                   concrete_args: dict[str, Any] | None = None,
                   leaf_modules: Iterable[type | str] = ()) -> GraphModule:
    """Trace ``root`` into a :class:`GraphModule` that computes the same thing.

    ``root`` is an ``nn.Module`` (its ``forward`` is traced) or a function (traced into a
    GraphModule with an empty root). ``concrete_args`` maps parameter names to fixed values;
    ``leaf_modules`` adds module classes or qualified names to keep as ``call_module`` nodes.

    >>> gm = symbolic_trace(torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU()))
    >>> print(gm.code)   # doctest: +SKIP
    """
    tracer = Tracer(leaf_modules)
    graph = tracer.trace(root, concrete_args)
    attrs: dict[str, Any] = {}
    for node in graph.nodes:
        if node.op in ("get_attr", "call_module"):
            if node.target in tracer.constants:
                attrs[node.target] = tracer.constants[node.target]
            else:
                attrs[node.target] = _fetch(tracer.root, node.target)
    if isinstance(root, torch.nn.Module):
        name = type(root).__name__
    else:
        name = getattr(root, "__name__", "")
        name = name if name.isidentifier() else "GraphModule"
    gm = GraphModule(attrs, graph, class_name=name)
    gm.training = tracer.root.training
    return gm


def _def_source(fn: Callable[..., Any]) -> str | None:
    """``"model.py:7 in forward: def forward(self, x):"`` for a function, if it has code."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        return None
    import linecache
    line = linecache.getline(code.co_filename, code.co_firstlineno).strip()
    where = f"{_display_filename(code.co_filename)}:{code.co_firstlineno} in {code.co_name}"
    return f"{where}: {line}" if line else where


def _fetch(root: torch.nn.Module, path: str) -> Any:
    obj: Any = root
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


__all__ = ["Attribute", "Proxy", "TraceError", "Tracer", "check_concrete_arg",
           "symbolic_trace"]
