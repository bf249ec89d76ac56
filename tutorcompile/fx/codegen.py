"""Turning a graph into readable Python source.

The generated ``forward`` is what a learner reads most, so it is written the way a person
would write it: ``x + y`` rather than ``operator.add(x, y)``, ``x[:, 0]`` rather than
``operator.getitem(x, (slice(None, None, None), 0))``, ``torch.nn.functional.relu`` by its
public name. Each value is released (``x = None``) after its last use, the same liveness
that keeps eager PyTorch's peak memory low.

Anything that has no importable name (a user's function, a tensor constant) is bound as a
named global of the generated code, listed in :attr:`PythonCode.globals`.

Mirrors: torch/fx/graph.py (``CodeGen``).
"""

from __future__ import annotations

import keyword
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .node import Namespace, Node, _format_target, qualified_name

if TYPE_CHECKING:  # pragma: no cover
    from .graph import Graph

BINARY_OPS = {
    operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
    operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@",
    operator.and_: "&", operator.or_: "|", operator.xor: "^", operator.lshift: "<<",
    operator.rshift: ">>", operator.lt: "<", operator.le: "<=", operator.eq: "==",
    operator.ne: "!=", operator.gt: ">", operator.ge: ">=",
}
UNARY_OPS = {operator.neg: "-", operator.pos: "+", operator.invert: "~", operator.not_: "not "}


# Modules whose functions generated code calls by a short alias (``prims.add(x, y)``),
# registered by the modules themselves, e.g. ``register_module_alias(prims_module, "prims")``.
_MODULE_ALIASES: dict[str, tuple[Any, str]] = {}


def register_module_alias(module: Any, alias: str) -> None:
    """Print calls of ``module``'s functions as ``alias.name(...)`` in generated code."""
    _MODULE_ALIASES[module.__name__] = (module, alias)


def _aliased(fn: Any) -> tuple[str, Any] | None:
    entry = _MODULE_ALIASES.get(getattr(fn, "__module__", None) or "")
    name = getattr(fn, "__name__", None)
    if entry is not None and isinstance(name, str) and getattr(entry[0], name, None) is fn:
        return f"{entry[1]}.{name}", entry
    return None


@dataclass
class PythonCode:
    """Source of a ``forward`` function plus the globals it needs to run."""
    src: str
    globals: dict[str, Any] = field(default_factory=dict)


class CodeWriter:
    def __init__(self, graph: Graph, root_module: str):
        self.graph = graph
        self.root = root_module
        self.globals: dict[str, Any] = {"torch": _torch(), "operator": operator, "math": math}
        # Globals must not collide with local value names, or a line like
        # `double = double(x)` would read the local before it is assigned.
        self.names = Namespace()
        for n in graph.nodes:
            self.names.reserve(n.name)
        self.bound: dict[int, str] = {}

    # --- expressions --------------------------------------------------------------------
    def bind_global(self, obj: Any, hint: str) -> str:
        if id(obj) not in self.bound:
            name = self.names.create_name(hint)
            self.globals[name] = obj
            self.bound[id(obj)] = name
        return self.bound[id(obj)]

    def callable_expr(self, fn: Any) -> str:
        path = qualified_name(fn)
        if path is not None:
            return path
        aliased = _aliased(fn)
        if aliased is not None:
            expr, (module, alias) = aliased
            self.globals[alias] = module
            self.names.reserve(alias)
            return expr
        return self.bind_global(fn, getattr(fn, "__name__", "fn"))

    def arg(self, a: Any) -> str:
        if isinstance(a, Node):
            return a.name
        text = literal(a, self.arg)
        if text is not None:
            return text
        qualified = qualified_name(a) if callable(a) else None
        if qualified is not None:
            return qualified
        hint = "_tensor_constant" if isinstance(a, _torch().Tensor) else "_const"
        return self.bind_global(a, hint)

    def index(self, a: Any, top: bool = True) -> str:
        """An index as written inside ``[]``: slices as ``a:b``, the outer tuple without
        parentheses. A tuple inside it keeps them: ``x[:, (0, 2)]`` picks two channels
        (advanced indexing), ``x[:, 0, 2]`` indexes two dimensions."""
        if isinstance(a, slice):
            parts = ["" if v is None else self.arg(v) for v in (a.start, a.stop, a.step)]
            return f"{parts[0]}:{parts[1]}" + (f":{parts[2]}" if a.step is not None else "")
        if isinstance(a, tuple) and not hasattr(a, "_fields") and top:
            if not a:
                return "()"
            inner = ", ".join(self.index(x, top=False) for x in a)
            return inner + ("," if len(a) == 1 else "")
        if a is ...:
            return "..."
        return self.arg(a)

    def call_args(self, args: tuple, kwargs: dict) -> str:
        parts = [self.arg(a) for a in args]
        parts += [f"{k}={self.arg(v)}" for k, v in kwargs.items()]
        return ", ".join(parts)

    def attr_path(self, base: str, path: str) -> str:
        expr = base
        for part in path.split("."):
            if part.isidentifier() and not keyword.iskeyword(part):
                expr += f".{part}"
            else:
                expr = f"getattr({expr}, {part!r})"
        return expr

    # --- statements ---------------------------------------------------------------------
    def expression(self, node: Node) -> str:
        args, kwargs, target = node.args, node.kwargs, node.target
        if node.op == "call_function":
            if target in BINARY_OPS and len(args) == 2 and not kwargs:
                return f"{self.operand(args[0])} {BINARY_OPS[target]} {self.operand(args[1])}"
            if target in UNARY_OPS and len(args) == 1 and not kwargs:
                return f"{UNARY_OPS[target]}{self.operand(args[0])}"
            if target is operator.getitem and len(args) == 2 and not kwargs:
                return f"{self.operand(args[0])}[{self.index(args[1])}]"
            if target is getattr and len(args) == 2 and not kwargs \
                    and isinstance(args[1], str) and args[1].isidentifier():
                return f"{self.operand(args[0])}.{args[1]}"
            return f"{self.callable_expr(target)}({self.call_args(args, kwargs)})"
        if node.op == "call_method":
            return f"{self.operand(args[0])}.{target}({self.call_args(args[1:], kwargs)})"
        if node.op == "call_module":
            return f"{self.attr_path(self.root, target)}({self.call_args(args, kwargs)})"
        if node.op == "get_attr":
            return self.attr_path(self.root, target)
        raise ValueError(f"no expression for {node.op} node {node.name!r}")

    def operand(self, a: Any) -> str:
        """An argument used inside an operator expression (constants parenthesised if needed)."""
        text = self.arg(a)
        if not isinstance(a, Node) and isinstance(a, (int, float, complex)) and text[0] == "-":
            return f"({text})"
        return text


def python_code(graph: Graph, root_module: str = "self") -> PythonCode:
    """Generate ``def forward(self, <inputs>): ... return <output>`` for ``graph``."""
    w = CodeWriter(graph, root_module)
    nodes = graph.nodes
    last_use: dict[Node, Node] = {}
    for node in nodes:
        for a in node.all_input_nodes:
            last_use[a] = node
    released_by: dict[Node, list[Node]] = {}
    for value, user in last_use.items():
        released_by.setdefault(user, []).append(value)

    params, body = [root_module], []
    for node in nodes:
        if node.op == "placeholder":
            if node.target.startswith("*"):
                params.append(f"*{node.name}")
            elif node.args:
                params.append(f"{node.name}={w.arg(node.args[0])}")
            else:
                params.append(node.name)
            if node not in last_use:
                body.append(f"{node.name} = None  # unused input")
            continue
        if node.op == "output":
            body.append(f"return {w.arg(node.args[0])}")
            continue
        line = f"{node.name} = {w.expression(node)}"
        dead = [v.name for v in released_by.get(node, []) if v.op != "get_attr"]
        if not node.users:
            dead.append(node.name)  # computed for its effect (e.g. an in-place op) only
        if dead:
            line += f";  {' = '.join(dead)} = None"
        body.append(line)

    src = f"def forward({', '.join(params)}):\n"
    src += "".join(f"    {line}\n" for line in body or ["pass"])
    return PythonCode(src, w.globals)


def _every(texts: list[str | None]) -> list[str] | None:
    """``texts`` when each one could be spelled, else None."""
    return None if any(t is None for t in texts) else [t for t in texts if t is not None]


def literal(value: Any, inner: Callable[[Any], str | None] | None = None) -> str | None:
    """Python source that rebuilds ``value`` if it is a constant written as a literal (None,
    numbers, strings, dtypes, devices, slices, ``torch.Size`` and tuples/lists/dicts of
    them); else None. ``inner`` spells the items of a container (default: ``literal``
    itself), so a code generator can put its own names (graph nodes, buffers) inside."""
    torch = _torch()
    inner = inner or literal
    if isinstance(value, torch.Size):
        return f"torch.Size({list(value)!r})"
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        items = _every([inner(v) for v in value])
        if items is None:
            return None
        if isinstance(value, list):
            return "[" + ", ".join(items) + "]"
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if isinstance(value, dict) and all(isinstance(k, (str, int)) for k in value):
        items = _every([inner(v) for v in value.values()])
        if items is None:
            return None
        return "{" + ", ".join(f"{k!r}: {i}" for k, i in zip(value, items)) + "}"
    if isinstance(value, slice):
        parts = _every([inner(v) for v in (value.start, value.stop, value.step)])
        return None if parts is None else f"slice({', '.join(parts)})"
    if isinstance(value, float) and not math.isfinite(value):
        return f"float('{value}')"
    if value is None or value is ... or type(value) in (bool, int, float, complex, str, bytes):
        return repr(value)  # a subclass's repr may not rebuild it: np.float64(1.5), Color.RED
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
        return str(value)
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    return None


def describe_target(node: Node) -> str:
    """The target as shown in tables and drawings."""
    return _format_target(node.target) if node.op == "call_function" else str(node.target)


def _torch():
    import torch
    return torch
