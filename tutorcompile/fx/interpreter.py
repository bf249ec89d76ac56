"""Running a graph node by node, and recording what flows through it.

:class:`Interpreter` executes a graph one node at a time instead of through generated code.
That is slower, but every step is a method a subclass can override -- which is how analyses
are written: :class:`ShapeProp` records each value's shape, dtype, device and stride in
``node.meta['tensor_meta']``; later stages subclass it to count bytes or time kernels.

Like eager PyTorch, the interpreter drops each value after its last use, so running a graph
takes no more memory than running the original code.

Mirrors: torch/fx/interpreter.py and torch/fx/passes/shape_prop.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .graph import Graph
from .graph_module import GraphModule
from .node import Node, map_arg


class Interpreter:
    """Run a :class:`GraphModule` (or a bare :class:`Graph` plus its ``root``) node by node.

    Override ``run_node`` to see every node, or one of ``placeholder``, ``get_attr``,
    ``call_function``, ``call_method``, ``call_module``, ``output`` -- each receives the node's
    ``target`` and its arguments with input nodes already replaced by their values.
    """

    def __init__(self, module: GraphModule | torch.nn.Module, graph: Graph | None = None,
                 garbage_collect_values: bool = True):
        self.module = module
        self.graph: Graph = graph if graph is not None else module.graph  # type: ignore[assignment]
        self.garbage_collect_values = garbage_collect_values
        self.env: dict[Node, Any] = {}

    def run(self, *args: Any, initial_env: dict[Node, Any] | None = None) -> Any:
        """Execute the graph on ``args`` and return what its output node returns."""
        self.env = dict(initial_env or {})
        self._args_iter = iter(args)
        last_use: dict[Node, Node] = {}
        for node in self.graph.nodes:
            for a in node.all_input_nodes:
                last_use[a] = node
        to_free: dict[Node, list[Node]] = {}
        for value, user in last_use.items():
            to_free.setdefault(user, []).append(value)

        for node in self.graph.nodes:
            if node in self.env:
                continue  # provided by initial_env
            try:
                self.env[node] = self.run_node(node)
            except Exception as e:
                e.add_note(f"While executing node {node.name!r}: {node.format_node()}")
                raise
            if self.garbage_collect_values:
                for value in to_free.get(node, []):
                    self.env.pop(value, None)
            if node.op == "output":
                return self.env[node]
        raise RuntimeError("graph has no output node")

    def run_node(self, node: Node) -> Any:
        args, kwargs = self.fetch_args_kwargs_from_env(node)
        return getattr(self, node.op)(node.target, args, kwargs)

    def fetch_args_kwargs_from_env(self, node: Node) -> tuple[tuple, dict]:
        return map_arg(node.args, self.env.__getitem__), map_arg(node.kwargs,
                                                                 self.env.__getitem__)

    # --- one method per node kind -------------------------------------------------------
    def placeholder(self, target: str, args: tuple, kwargs: dict) -> Any:
        if target.startswith("*"):
            return list(self._args_iter)
        try:
            return next(self._args_iter)
        except StopIteration:
            if args:
                return args[0]  # the input's default value
            raise TypeError(f"graph input {target!r} was not given a value") from None

    def get_attr(self, target: str, args: tuple, kwargs: dict) -> Any:
        return self.fetch_attr(target)

    def call_function(self, target: Any, args: tuple, kwargs: dict) -> Any:
        return target(*args, **kwargs)

    def call_method(self, target: str, args: tuple, kwargs: dict) -> Any:
        self_obj, *rest = args
        return getattr(self_obj, target)(*rest, **kwargs)

    def call_module(self, target: str, args: tuple, kwargs: dict) -> Any:
        return self.fetch_attr(target)(*args, **kwargs)

    def output(self, target: str, args: tuple, kwargs: dict) -> Any:
        return args[0]

    def fetch_attr(self, target: str) -> Any:
        obj: Any = self.module
        for i, part in enumerate(target.split(".")):
            if not hasattr(obj, part):
                raise AttributeError(f"the module has no attribute "
                                     f"{'.'.join(target.split('.')[:i + 1])!r}")
            obj = getattr(obj, part)
        return obj


@dataclass(frozen=True)
class TensorMeta:
    """What ShapeProp records about a tensor value."""
    shape: torch.Size
    dtype: torch.dtype
    device: torch.device
    stride: tuple[int, ...]
    requires_grad: bool

    @property
    def numel(self) -> int:
        return self.shape.numel()

    @property
    def nbytes(self) -> int:
        return self.shape.numel() * self.dtype.itemsize

    @classmethod
    def of(cls, t: torch.Tensor) -> TensorMeta:
        return cls(t.shape, t.dtype, t.device, tuple(t.stride()), t.requires_grad)


def tensor_meta(value: Any) -> Any:
    """TensorMeta for a tensor, a matching structure for tuples/lists/dicts, None otherwise."""
    if isinstance(value, torch.Tensor):
        return TensorMeta.of(value)
    if isinstance(value, dict):
        metas: Any = {k: tensor_meta(v) for k, v in value.items()}
    elif isinstance(value, (tuple, list)) and not isinstance(value, torch.Size):
        metas = [tensor_meta(v) for v in value]
    else:
        return None
    found = metas.values() if isinstance(metas, dict) else metas
    if all(m is None for m in found):
        return None
    return metas if not isinstance(metas, list) or isinstance(value, list) else tuple(metas)


class ShapeProp(Interpreter):
    """Run the graph on example inputs, recording ``meta['tensor_meta']`` on every node.

    >>> ShapeProp(gm).propagate(torch.randn(4, 8))   # doctest: +SKIP
    >>> gm.graph.print_tabular()                      # now with shape and dtype columns
    """

    def run_node(self, node: Node) -> Any:
        result = super().run_node(node)
        meta = tensor_meta(result)
        if meta is not None:
            node.meta["tensor_meta"] = meta
        return result

    def propagate(self, *args: Any) -> Any:
        return self.run(*args)
