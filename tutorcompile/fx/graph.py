"""The graph: an ordered list of nodes that reads as a straight-line Python program.

Every stage of the course produces or consumes a :class:`Graph`: the tracer (stage 2) and
Dynamo (stage 3) capture one, AOTAutograd (stage 4) builds a joint forward/backward one and
cuts it in two, the fusion compiler (stage 5) lowers one to kernels. So the graph is kept small
enough to read in one sitting:

* ``create_node`` and its shorthands (``placeholder``, ``call_function``, ...) add nodes at the
  insertion point (before ``output`` by default, or where ``inserting_before/after`` say).
* ``erase_node`` removes an unused node; ``Node.replace_all_uses_with`` rewires users.
* ``lint`` checks the invariants every pass relies on and says which one broke.
* ``provenance`` records which passes built the graph; printed code starts with it.
* ``nodes_from(node)``: a pass that replaces one node by several (a decomposition, a
  gradient) builds them inside it, so each new node keeps the user's line
  (``meta["source"]``) and names the node it came from (``meta["from_node"]``).
* ``python_code`` turns the graph into the source of a ``forward`` function (see codegen.py).

Mirrors: torch/fx/graph.py.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import TutorcompileError
from . import codegen
from .node import Namespace, Node, map_arg, target_to_name
from .printer import format_tabular


class GraphLintError(TutorcompileError):
    """A graph broke one of the IR's invariants; the message names the node and the rule."""


class Graph:
    """A program of :class:`Node` s in execution order, ending with one ``output`` node."""

    def __init__(self, provenance: str | None = None):
        self._nodes: list[Node] = []
        self._namespace = Namespace()
        self._insert_before: Node | None = None
        self._insert_after: Node | None = None
        self._from: Node | None = None  # see nodes_from
        self.provenance: list[str] = [provenance] if provenance else []
        self.owning_module: Any = None  # the GraphModule this graph belongs to, if any

    # --- reading --------------------------------------------------------------------------
    @property
    def nodes(self) -> tuple[Node, ...]:
        """The nodes in order. A snapshot: erasing or inserting while iterating is safe."""
        return tuple(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def find_nodes(self, *, op: str | None = None, target: Any = None) -> list[Node]:
        """Nodes with the given ``op`` and/or ``target``."""
        return [n for n in self._nodes
                if (op is None or n.op == op) and (target is None or n.target == target)]

    @property
    def placeholders(self) -> list[Node]:
        return self.find_nodes(op="placeholder")

    @property
    def output_node(self) -> Node:
        for node in reversed(self._nodes):
            if node.op == "output":
                return node
        raise GraphLintError("graph has no output node; call graph.output(...) last")

    def _neighbour(self, node: Node, step: int) -> Node | None:
        i = self._index(node) + step
        return self._nodes[i] if 0 <= i < len(self._nodes) else None

    def _index(self, node: Node) -> int:
        for i, n in enumerate(self._nodes):
            if n is node:
                return i
        raise ValueError(f"node {node.name!r} is not in this graph")

    # --- building -------------------------------------------------------------------------
    def create_node(self, op: str, target: Any, args: tuple = (), kwargs: dict | None = None,
                    name: str | None = None) -> Node:
        """Add a node at the insertion point and return it."""
        if op == "call_function" and not callable(target):
            raise TypeError(f"call_function target must be callable, got {target!r}")
        if op in ("call_method", "call_module", "get_attr", "placeholder") \
                and not isinstance(target, str):
            raise TypeError(f"{op} target must be a string, got {target!r}")
        for a in _iter_nodes((args, kwargs or {})):
            if a.graph is not self:
                raise ValueError(f"argument {a.name!r} belongs to another graph; copy it "
                                 "into this graph first (Graph.node_copy)")
            if a._erased:
                raise ValueError(f"argument {a.name!r} was erased from the graph")
        node = Node(self, self._namespace.create_name(name or target_to_name(op, target)),
                    op, target, tuple(args), dict(kwargs or {}))
        if self._from is not None:
            node.meta["source"] = self._from.meta.get("source")
            node.meta["from_node"] = self._from.meta.get("from_node", self._from.name)
            if self._from.meta.get("recompute"):  # a checkpointed op's parts are too
                node.meta["recompute"] = True
        self._insert(node)
        return node

    def _insert(self, node: Node) -> None:
        if self._insert_before is not None:
            self._nodes.insert(self._index(self._insert_before), node)
        elif self._insert_after is not None:
            self._nodes.insert(self._index(self._insert_after) + 1, node)
            self._insert_after = node  # consecutive inserts keep their order
        elif node.op == "placeholder":
            # inputs stay together at the top, in the order they were added
            last = max((i for i, n in enumerate(self._nodes) if n.op == "placeholder"),
                       default=-1)
            self._nodes.insert(last + 1, node)
        elif node.op != "output" and self._nodes and self._nodes[-1].op == "output":
            self._nodes.insert(len(self._nodes) - 1, node)
        else:
            self._nodes.append(node)

    @contextlib.contextmanager
    def inserting_before(self, node: Node):
        """New nodes go right before ``node`` while the context is open."""
        saved = self._insert_before, self._insert_after
        self._insert_before, self._insert_after = node, None
        try:
            yield
        finally:
            self._insert_before, self._insert_after = saved

    @contextlib.contextmanager
    def nodes_from(self, node: Node | None):
        """Nodes created while the context is open come from ``node`` (of any graph): they
        get its user line, ``meta["source"]``, and ``meta["from_node"]``, the name of the
        node first captured (kept through a chain of passes).

        Mirrors: ``torch.fx.traceback.preserve_node_meta`` / ``set_current_meta``."""
        saved, self._from = self._from, node
        try:
            yield
        finally:
            self._from = saved

    @contextlib.contextmanager
    def inserting_after(self, node: Node):
        """New nodes go right after ``node`` (in the order created) while the context is open."""
        saved = self._insert_before, self._insert_after
        self._insert_before, self._insert_after = None, node
        try:
            yield
        finally:
            self._insert_before, self._insert_after = saved

    def placeholder(self, name: str, default: Any = inspect.Parameter.empty) -> Node:
        """A graph input. ``default`` makes it optional in the generated ``forward``."""
        if any(n.target == name for n in self.placeholders):
            raise ValueError(f"an input named {name!r} already exists in this graph")
        args = () if default is inspect.Parameter.empty else (default,)
        # The node's name is the forward's parameter name; a name Python reserves
        # (``input``, ``lambda``) gets a suffix, and ``target`` keeps the original.
        return self.create_node("placeholder", name, args, name=name.lstrip("*"))

    def get_attr(self, qualified_name: str, name: str | None = None) -> Node:
        return self.create_node("get_attr", qualified_name, name=name)

    def call_function(self, target: Callable, args: tuple = (), kwargs: dict | None = None,
                      name: str | None = None) -> Node:
        return self.create_node("call_function", target, args, kwargs, name)

    def call_method(self, method: str, args: tuple = (), kwargs: dict | None = None,
                    name: str | None = None) -> Node:
        return self.create_node("call_method", method, args, kwargs, name)

    def call_module(self, module_path: str, args: tuple = (), kwargs: dict | None = None,
                    name: str | None = None) -> Node:
        return self.create_node("call_module", module_path, args, kwargs, name)

    def output(self, result: Any) -> Node:
        """The graph's return value; may be a node or a tuple/list/dict of nodes."""
        return self.create_node("output", "output", (result,), name="output")

    def node_copy(self, node: Node, arg_transform: Callable[[Node], Any]) -> Node:
        """Copy ``node`` (from any graph) into this one, mapping its inputs with ``arg_transform``.

        The copy keeps the name when it is free, and a copy of ``meta``.
        """
        if node.op == "placeholder":
            default = node.args[0] if node.args else inspect.Parameter.empty
            new = self.placeholder(node.target, default)
        else:
            new = self.create_node(node.op, node.target, map_arg(node.args, arg_transform),
                                   map_arg(node.kwargs, arg_transform), name=node.name)
        new.meta = dict(node.meta)
        return new

    def graph_copy(self, other: Graph, val_map: dict[Node, Any],
                   return_output_node: bool = False) -> Any:
        """Append a copy of ``other``'s nodes (placeholders mapped through ``val_map``).

        Returns the copied output value (the output node's argument) so callers can emit
        their own ``output`` -- or the output node itself if ``return_output_node``.
        """
        for node in other._nodes:
            if node in val_map:
                continue
            if node.op == "output":
                result = map_arg(node.args[0], lambda n: val_map[n])
                if not return_output_node:
                    return result
                output = self.output(result)
                output.meta = dict(node.meta)
                return output
            val_map[node] = self.node_copy(node, lambda n: val_map[n])
        return None

    @classmethod
    def derived_from(cls, graph: Graph, pass_name: str | None) -> Graph:
        """An empty graph that a pass named ``pass_name`` builds from ``graph``: it inherits
        ``graph``'s history (``provenance``) and adds the pass. Every pass that builds a new
        graph starts here, so the printed code names the whole chain."""
        new = cls()
        new.provenance = [*graph.provenance, *([pass_name] if pass_name else [])]
        return new

    def copy(self, provenance: str | None = None) -> Graph:
        """A deep copy of the graph (nodes are new; targets and constants are shared)."""
        new = Graph.derived_from(self, provenance)
        new.graph_copy(self, {}, return_output_node=True)
        return new

    def stamp(self, pass_name: str) -> Graph:
        """Record that ``pass_name`` produced this graph (shown in the printed code)."""
        self.provenance.append(pass_name)
        return self

    # --- editing --------------------------------------------------------------------------
    def erase_node(self, node: Node) -> None:
        """Remove a node that nothing reads any more."""
        if node.users:
            raise RuntimeError(f"cannot erase node {node.name!r}: it is still used by "
                               f"{', '.join(u.name for u in node.users)}")
        self._nodes.pop(self._index(node))
        node._update_args_kwargs((), {})
        node._erased = True

    def sort_topologically(self) -> None:
        """Reorder the nodes so that each comes after its inputs, moving as few as it can:
        in the present order, a node read before it is defined moves up, with whatever it
        reads in turn, to just before its first reader. For a pass that puts a node where
        one of its operands is not yet computed."""
        placed: set[Node] = set()
        order: list[Node] = []
        for node in self._nodes:
            stack = [node]
            while stack:   # depth first, inputs before their reader
                top = stack[-1]
                if top in placed:
                    stack.pop()
                    continue
                waiting = [a for a in top.all_input_nodes if a not in placed]
                if waiting:   # (a graph has no cycles: its nodes read nodes made before)
                    stack.extend(reversed(waiting))
                    continue
                placed.add(top)
                order.append(stack.pop())
        self._nodes = order

    # --- checking -------------------------------------------------------------------------
    def lint(self, root: Any = None) -> None:
        """Check the invariants every pass relies on; raise :class:`GraphLintError` if broken.

        * nodes belong to this graph, have unique names, and are not erased;
        * every input of a node is defined earlier (the graph is topologically ordered);
        * ``users`` agrees with who actually reads each node;
        * placeholders come first, and there is exactly one ``output``, last;
        * targets have the right type for their op (and exist on ``root``, if given).
        """
        seen: dict[str, Node] = {}
        defined: set[Node] = set()
        outputs = [n for n in self._nodes if n.op == "output"]
        if len(outputs) != 1:
            raise GraphLintError(f"graph must have exactly one output node, found {len(outputs)}")
        if self._nodes[-1].op != "output":
            raise GraphLintError(f"output must be the last node, but {self._nodes[-1].name!r} "
                                 "comes after it")
        past_inputs = False
        for node in self._nodes:
            def where(node: Node = node) -> str:   # (formatted only for an error)
                return f"node {node.name!r} ({node.format_node()})"
            if node.graph is not self:
                raise GraphLintError(f"{where()} belongs to another graph")
            if node._erased:
                raise GraphLintError(f"{where()} was erased but is still in the node list")
            if node.name in seen:
                raise GraphLintError(f"two nodes are named {node.name!r}")
            seen[node.name] = node
            if node.op == "placeholder":
                if past_inputs:
                    raise GraphLintError(f"{where()}: placeholders must come before other nodes")
            else:
                past_inputs = True
            for a in node.all_input_nodes:
                if a.graph is not self:
                    raise GraphLintError(f"{where()} reads {a.name!r}, which belongs to another "
                                         "graph")
                if a not in defined:
                    raise GraphLintError(f"{where()} reads {a.name!r} before it is defined "
                                         "(graph is not in topological order)")
                if node not in a.users:
                    raise GraphLintError(f"{where()} reads {a.name!r} but is missing from its "
                                         "users")
            for user in node.users:
                if node not in user._input_nodes:
                    raise GraphLintError(f"{where()} lists {user.name!r} as a user, but "
                                         f"{user.name!r} does not read it")
                if user._erased:
                    raise GraphLintError(f"{where()} lists {user.name!r} as a user, but that "
                                         "node was erased")
                if user.graph is not self:
                    raise GraphLintError(f"{where()} lists {user.name!r} as a user, but that "
                                         "node is not in this graph")
            self._lint_target(node, where, root)
            defined.add(node)

    @staticmethod
    def _lint_target(node: Node, where: Callable[[], str], root: Any) -> None:
        if node.op == "call_function" and not callable(node.target):
            raise GraphLintError(f"{where()}: call_function target is not callable")
        if node.op in ("call_method", "call_module", "get_attr", "placeholder") \
                and not isinstance(node.target, str):
            raise GraphLintError(f"{where()}: {node.op} target must be a string")
        if root is not None and node.op in ("call_module", "get_attr"):
            obj = root
            for part in node.target.split("."):
                if not hasattr(obj, part):
                    raise GraphLintError(f"{where()}: the module has no attribute "
                                         f"{node.target!r}")
                obj = getattr(obj, part)
            if node.op == "call_module" and not callable(obj):
                raise GraphLintError(f"{where()}: {node.target!r} is not a module")

    # --- printing -------------------------------------------------------------------------
    def python_code(self, root_module: str = "self"):
        """The source of a ``forward`` function computing this graph (see ``codegen``)."""
        return codegen.python_code(self, root_module)

    def provenance_header(self) -> str:
        """``# Constructed by cse (history: symbolic_trace → dce → cse)``."""
        if not self.provenance:
            return "# Constructed by hand"
        line = f"# Constructed by {self.provenance[-1]}"
        if len(self.provenance) > 1:
            line += f" (history: {' → '.join(self.provenance)})"
        return line

    def print_tabular(self) -> None:
        """Print one row per node: opcode, name, target, args, kwargs (and shapes if known)."""
        print(format_tabular(self))

    def __str__(self) -> str:
        lines = [self.provenance_header(), "graph():"]
        lines += [f"    {node.format_node()}" for node in self._nodes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<tutorcompile.fx.Graph: {len(self._nodes)} nodes>"


def _iter_nodes(a: Any) -> list[Node]:
    found: list[Node] = []
    map_arg(a, found.append)
    return found
