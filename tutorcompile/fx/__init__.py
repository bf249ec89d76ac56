"""tutorcompile.fx -- the one graph IR every stage of the course speaks.

::

    Graph          an ordered list of Nodes ending in one ``output``; lint() checks it
                   (graph.py; printer.py its tabular view)
    Node           one operation: op, target, args, kwargs, users, meta (node.py)
    GraphModule    an nn.Module whose forward is generated from a Graph (readable Python:
                   graph_module.py, the source written by codegen.py)
    Interpreter    runs a graph node by node; subclass it to write analyses (interpreter.py)
    ShapeProp      an Interpreter that records shape/dtype/stride in node.meta
    symbolic_trace Tracer, Proxy, TraceError: record a module's forward as a GraphModule
                   (tracer.py, proxy.py)
    passes         dce, cse, ... : plain functions Graph -> Graph that stamp provenance
    to_torch_fx / from_torch_fx    node-for-node bridges to torch.fx (interop.py)
    symbolic_shapes   ShapeEnv, SymInt: sizes as sympy symbols, guards from what was relied on
    aliasing       storage_key / same_storage: the one test of shared memory every stage asks

Mirrors: torch/fx (the design, the node kinds and most names are the same on purpose).
"""

from .codegen import PythonCode, register_module_alias
from .graph import Graph, GraphLintError
from .graph_module import GraphModule, exec_generated
from .interop import from_torch_fx, to_torch_fx
from .interpreter import Interpreter, ShapeProp, TensorMeta, tensor_meta
from .node import Node, map_aggregate, map_arg
from .passes import cse, dce
from .printer import format_tabular
from .proxy import Proxy, TraceError
from .tracer import Tracer, symbolic_trace

__all__ = [
    "Graph", "GraphLintError", "GraphModule", "Interpreter", "Node", "PythonCode", "ShapeProp",
    "TensorMeta", "cse", "dce", "exec_generated", "format_tabular", "from_torch_fx",
    "map_aggregate", "map_arg",
    "register_module_alias",
    "tensor_meta", "to_torch_fx",
    "Proxy", "TraceError", "Tracer", "symbolic_trace",
]
