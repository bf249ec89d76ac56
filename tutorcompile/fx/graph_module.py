"""GraphModule: a graph you can call, print and hand to torch.

A :class:`GraphModule` is an ``nn.Module`` whose ``forward`` is *generated* from its graph:
the graph is turned into Python source (``codegen.py``), the source is compiled with
``exec``, and the result becomes the module's ``forward``. Printing the module shows that
exact source, with a header naming the pass that produced it. The source is also registered
with ``linecache``, so a traceback through a generated ``forward`` shows the real line.

Parameters, buffers and submodules the graph refers to (``get_attr`` / ``call_module``
targets) are copied from the ``root`` module at their qualified paths, so the GraphModule
stands on its own.

Mirrors: torch/fx/graph_module.py.
"""

from __future__ import annotations

import copy
import itertools
import linecache
from typing import Any

import torch

from .graph import Graph

_counter = itertools.count()


def exec_generated(source: str, what: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """Run generated ``source`` in ``namespace`` (returned) under a file name of its own
    (``<tutorcompile what #N>``) registered with ``linecache``: a traceback through generated
    code -- a forward, a wrapper, a guard function -- shows the generated line, and
    ``inspect.getsource`` finds it. Every stage that generates Python goes through here.

    Mirrors: the ``linecache`` entry torch.fx's ``_exec_with_source`` makes."""
    filename = f"<tutorcompile {what} #{next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 (our own code)
    return namespace


class GraphModule(torch.nn.Module):
    """An ``nn.Module`` generated from a :class:`Graph`.

    ``root`` is an ``nn.Module`` or a dict ``{qualified_name: module_or_tensor}`` providing
    what the graph's ``get_attr`` and ``call_module`` nodes refer to.
    """

    def __init__(self, root: torch.nn.Module | dict[str, Any], graph: Graph,
                 class_name: str = "GraphModule"):
        super().__init__()
        self.__class__ = type(class_name, (GraphModule,), {})  # a readable repr per instance
        self._graph = graph   # set again (and compiled) by the graph setter below
        for node in graph.nodes:
            if node.op in ("get_attr", "call_module"):
                if isinstance(root, dict):
                    if node.target not in root:
                        raise KeyError(f"node {node.name!r} refers to {node.target!r}, "
                                       "which the root dict does not provide")
                    value = root[node.target]
                else:
                    value = _fetch(root, node.target)
                _assign(self, node.target, value)
        if isinstance(root, torch.nn.Module):
            self.training = root.training
        self.graph = graph

    @property
    def graph(self) -> Graph:
        return self._graph

    @graph.setter
    def graph(self, graph: Graph) -> None:
        self._graph = graph
        graph.owning_module = self
        self.recompile()

    def recompile(self) -> str:
        """Regenerate ``forward`` from the graph (call after editing the graph in place)."""
        code = self._graph.python_code("self")
        self._code = code.src
        full = self._graph.provenance_header() + "\n" + code.src
        namespace = exec_generated(full, f"fx generated {type(self).__name__}",
                                   dict(code.globals))
        type(self).forward = namespace["forward"]
        return self._code

    @property
    def code(self) -> str:
        """The generated ``forward`` source, headed by its provenance line."""
        return f"{self._graph.provenance_header()}\n{self._code}"

    def print_readable(self) -> str:
        """Print (and return) the generated source."""
        print(self.code)
        return self.code

    def __repr__(self) -> str:  # nn.Module's repr lists children; the code says more
        return self.code

    def __deepcopy__(self, memo: dict) -> GraphModule:
        # Parameters, buffers and submodules are copied; the graph is copied node by node.
        state = {k: v for k, v in self.__dict__.items() if k != "_graph"}
        root = torch.nn.Module()
        root.__dict__.update(copy.deepcopy(state, memo))
        return GraphModule(root, self._graph.copy(), type(self).__name__)


def _fetch(root: torch.nn.Module, path: str) -> Any:
    obj: Any = root
    for part in path.split("."):
        if not hasattr(obj, part):
            raise AttributeError(f"{type(root).__name__} has no attribute {path!r}")
        obj = getattr(obj, part)
    return obj


def _assign(module: torch.nn.Module, path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for part in parents:
        if not hasattr(module, part):
            module.add_module(part, torch.nn.Module())
        module = getattr(module, part)
    if isinstance(value, torch.nn.Module):
        module.add_module(leaf, value)
    elif isinstance(value, torch.nn.Parameter):
        module.register_parameter(leaf, value)
    elif isinstance(value, torch.Tensor):
        module.register_buffer(leaf, value)
    else:
        setattr(module, leaf, value)
