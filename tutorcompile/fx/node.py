"""Nodes of the graph IR: one operation each, with its inputs and users.

A :class:`Node` is one line of a program in static single assignment form::

    add = torch.add(x, y)

It knows *what* it computes (``op`` and ``target``), *from what* (``args`` and ``kwargs``,
which may nest tuples, lists, dicts and slices with other nodes inside), and *who reads it*
(``users``). ``meta`` is a free-form dict where passes leave facts about the value: its shape
and dtype (``tensor_meta``), the user's source line, the kernel it was fused into, ...

The six node kinds are the same as torch.fx's, so a learner can read the real thing next:

==============  =====================================  ===============================
op              target                                 meaning
==============  =====================================  ===============================
placeholder     the input's name (str)                 a graph input
get_attr        qualified attribute path (str)         a parameter, buffer or constant
call_function   a Python callable                      ``target(*args, **kwargs)``
call_method     a method name (str)                    ``args[0].target(*args[1:])``
call_module     qualified submodule path (str)         ``root.<target>(*args)``
output          ``"output"``                           ``return args[0]``
==============  =====================================  ===============================

Mirrors: torch/fx/node.py.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .graph import Graph

OPCODES = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output")


class Node:
    """One operation in a :class:`~tutorcompile.fx.Graph`.

    Nodes are created through the graph (``graph.call_function(...)`` and friends), never
    directly, so that the graph can keep names unique and ``users`` up to date.
    """

    def __init__(self, graph: Graph, name: str, op: str, target: Any,
                 args: tuple, kwargs: dict):
        if op not in OPCODES:
            raise ValueError(f"unknown node op {op!r}; expected one of {', '.join(OPCODES)}")
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self.users: dict[Node, None] = {}  # an ordered set: dict keys keep insertion order
        self.meta: dict[str, Any] = {}
        self._erased = False
        self._args: tuple = ()
        self._kwargs: dict = {}
        self._input_nodes: dict[Node, None] = {}
        self._update_args_kwargs(tuple(args), dict(kwargs))

    # --- inputs -------------------------------------------------------------------------
    @property
    def args(self) -> tuple:
        return self._args

    @args.setter
    def args(self, new_args: tuple) -> None:
        self._update_args_kwargs(tuple(new_args), self._kwargs)

    @property
    def kwargs(self) -> dict:
        return self._kwargs

    @kwargs.setter
    def kwargs(self, new_kwargs: dict) -> None:
        self._update_args_kwargs(self._args, dict(new_kwargs))

    @property
    def all_input_nodes(self) -> list[Node]:
        """Every node read by this one, in first-use order, without repeats."""
        return list(self._input_nodes)

    def _update_args_kwargs(self, args: tuple, kwargs: dict) -> None:
        for old in self._input_nodes:
            old.users.pop(self, None)
        self._args, self._kwargs = args, kwargs
        self._input_nodes = {}
        map_arg((args, kwargs), lambda n: self._input_nodes.setdefault(n, None))
        for new in self._input_nodes:
            new.users.setdefault(self, None)

    def replace_input_with(self, old: Node, new: Node) -> None:
        """Make this node read ``new`` wherever it read ``old``."""
        def swap(n: Node) -> Node:
            return new if n is old else n
        self._update_args_kwargs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    def replace_all_uses_with(self, replacement: Node,
                              delete_user_cb: Callable[[Node], bool] = lambda user: True
                              ) -> list[Node]:
        """Redirect every user of this node to ``replacement``; returns the users changed.

        ``delete_user_cb`` may veto single users (used when the replacement itself reads
        this node, as in ``y = f(x); x.replace_all_uses_with(y)``).
        """
        changed = [user for user in list(self.users) if delete_user_cb(user)]
        for user in changed:
            user.replace_input_with(self, replacement)
        return changed

    # --- conveniences -------------------------------------------------------------------
    @property
    def next(self) -> Node | None:
        """The node after this one in the graph's order (None for the last)."""
        return self.graph._neighbour(self, +1)

    @property
    def prev(self) -> Node | None:
        """The node before this one in the graph's order (None for the first)."""
        return self.graph._neighbour(self, -1)

    def format_target(self) -> str:
        """The target as a person would write it: ``torch.relu``, ``operator.add``, ``'view'``."""
        return _format_target(self.target) if self.op == "call_function" else str(self.target)

    def format_node(self) -> str:
        """One line in torch.fx's IR notation, e.g. ``%add : [users=1] = call_function[...]``."""
        def fmt(a: Any) -> str:
            return repr(map_arg(a, lambda n: _PercentName(n.name)))
        shape = ""
        tm = self.meta.get("tensor_meta")
        if tm is not None and hasattr(tm, "shape"):
            shape = f" {str(tm.dtype).replace('torch.', '')}{list(tm.shape)}"
        if self.op == "placeholder":
            return f"%{self.name} :{shape} [users={len(self.users)}] = placeholder[{self.target}]"
        if self.op == "output":
            return f"return {fmt(self.args[0])}"
        return (f"%{self.name} :{shape} [users={len(self.users)}] = "
                f"{self.op}[target={self.format_target()}](args = {fmt(self.args)}, "
                f"kwargs = {fmt(self.kwargs)})")

    def __repr__(self) -> str:
        return self.name


class _PercentName:
    """Prints a node reference as ``%name`` inside a formatted argument list."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"%{self.name}"


def map_aggregate(a: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply ``fn`` to every leaf of a nested tuple/list/dict/slice structure."""
    if isinstance(a, tuple):
        mapped = tuple(map_aggregate(x, fn) for x in a)
        if type(a) is tuple:
            return mapped
        # tuple subclasses keep their type: namedtuples (torch.return_types), torch.Size
        return type(a)(*mapped) if hasattr(a, "_fields") else type(a)(mapped)
    if isinstance(a, list):
        return [map_aggregate(x, fn) for x in a]
    if isinstance(a, dict):
        return {k: map_aggregate(v, fn) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(map_aggregate(a.start, fn), map_aggregate(a.stop, fn),
                     map_aggregate(a.step, fn))
    return fn(a)


def tree_leaves(a: Any) -> list[Any]:
    """Every leaf of a nested tuple/list/dict/slice structure, in order.

    Mirrors: ``torch.utils._pytree.tree_leaves``."""
    if isinstance(a, (tuple, list)):
        return [leaf for v in a for leaf in tree_leaves(v)]
    if isinstance(a, dict):
        return [leaf for v in a.values() for leaf in tree_leaves(v)]
    if isinstance(a, slice):
        return tree_leaves((a.start, a.stop, a.step))
    return [a]


def map_arg(a: Any, fn: Callable[[Node], Any]) -> Any:
    """Apply ``fn`` to every :class:`Node` inside a nested argument structure."""
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


# ---------------------------------------------------------------------------------------
# Naming: targets and values get readable, valid, unique Python identifiers
# ---------------------------------------------------------------------------------------

_RESERVED = set(keyword.kwlist) | set(dir(builtins)) | {"self", "torch", "operator"}


def _format_target(target: Any) -> str:
    qualified = qualified_name(target)
    if qualified is not None:
        return qualified
    return str(getattr(target, "__qualname__", None)
               or getattr(target, "__name__", repr(target)))


def qualified_name(target: Any) -> str | None:
    """A dotted path that imports back to ``target`` (``torch.nn.functional.relu``), or None.

    Only paths rooted at ``torch``, ``operator``, ``math`` or ``builtins`` are returned: those
    are the modules generated code imports, and anything else is bound as a named global.
    """
    import importlib
    name = getattr(target, "__name__", None)
    if not isinstance(name, str):
        return None
    candidates = []
    module = getattr(target, "__module__", None)
    if isinstance(module, str):
        candidates.append(f"{module}.{name}")
    # Tensor methods taken off the class (torch.Tensor.add) and torch._C builtins
    # (torch.relu reports module "torch._C._VariableFunctions") are found by name too.
    candidates += [f"torch.{name}", f"torch.nn.functional.{name}", f"torch.Tensor.{name}",
                   f"operator.{name}", f"math.{name}"]
    if isinstance(module, str) and module.startswith("torch._ops."):
        # an operator overload (``aten.convolution_backward.default``, named
        # ``convolution_backward.default`` in module ``torch._ops.aten``)
        candidates.append(f"torch.ops.{module.rsplit('.', 1)[1]}.{name}")
    # Public spellings first: `torch.nn.functional.gelu` reads better than `torch._C._nn.gelu`.
    candidates.sort(key=lambda path: "._" in path)
    for path in candidates:
        path = path.replace("torch._C._VariableFunctions.", "torch.")
        root = path.split(".")[0]
        if root not in ("torch", "operator", "math", "builtins"):
            continue
        obj: Any = None
        try:
            obj = importlib.import_module(root)
            for part in path.split(".")[1:]:
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            continue
        if obj is target:
            return path[len("builtins."):] if root == "builtins" else path
    return None


def snake_case(s: str) -> str:
    """``BatchNorm2d`` → ``batch_norm2d``; used to name the nodes of call_module targets."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", s).lower()


class Namespace:
    """Hands out unique, valid Python identifiers: ``add``, ``add_1``, ``add_2``, ..."""

    def __init__(self):
        self._used: set[str] = set()
        self._counters: dict[str, int] = {}

    def create_name(self, candidate: str) -> str:
        base = re.sub(r"[^0-9a-zA-Z_]+", "_", candidate) or "v"
        if base[0].isdigit():
            base = f"_{base}"
        match = re.fullmatch(r"(.*)_(\d+)", base)
        if match and match.group(1):  # `add_1` from another graph continues the `add` family
            base = match.group(1)
        if base in _RESERVED:
            base = f"{base}_"
        name = base
        while name in self._used:
            self._counters[base] = self._counters.get(base, 0) + 1
            name = f"{base}_{self._counters[base]}"
        self._used.add(name)
        return name

    def reserve(self, name: str) -> None:
        """Mark ``name`` as taken without handing it out."""
        self._used.add(name)

    def __contains__(self, name: str) -> bool:
        return name in self._used


def target_to_name(op: str, target: Any) -> str:
    """The default name for a node's value, from what it computes."""
    if op == "call_function":
        return snake_case(getattr(target, "__name__", None) or "fn")
    if op in ("call_module", "get_attr"):
        return snake_case(str(target).replace(".", "_"))
    return str(target)
