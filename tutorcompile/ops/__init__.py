"""tutorcompile.ops -- the one op table, and the virtualized ``ops`` that rules are written in.

::

    prims            the table: prims.add, prims.exp, prims.sum, prims.matmul, ... (PRIMS by name)
    Prim             one entry: reference, meta (shape/dtype rule), kind, vjp, triton, cpp
    ops              ops.<name> is the prim <name>; calls go to the current handler
    set_handler      install a handler for a ``with`` block; current_handler() reads it
    EagerHandler     run the PyTorch references (the default)
    GraphHandler     record calls as nodes of a tutorcompile.fx.Graph (values: GraphValue)
    KernelSpellingHandler   pointwise calls -> Triton / C++ expression strings
    sum_to_shape, vjp        gradients of broadcasting, and of one prim call (autodiff.py)
    vjp_rules                other VJP rules for some prims, in a ``with`` block
    trace, backward_graph, grad_of   graphs of prims, and their gradients as graphs
    scan.sequential_scan     the scan a graph calls when its length is symbolic (run by PyTorch)
    higher_order, ndarray    what a graph node runs for a higher-order op (a traced body)
                             and for NumPy code on tensors (torch._numpy)
    foreach.per_tensor_calls   a torch._foreach_* call as one call per tensor

Mirrors: torch/_prims, torch/_inductor/virtualized.py, tools/autograd/derivatives.yaml.
"""

from . import prims
from .autodiff import backward_graph, grad_of, sum_to_shape, trace, vjp, vjp_rules
from .table import KINDS, PRIMS, Prim, broadcast_shapes, promote_types
from .virtualized import (
    EagerHandler,
    GraphHandler,
    GraphValue,
    KernelSpellingHandler,
    OpsHandler,
    current_handler,
    make_meta,
    ops,
    set_handler,
)

__all__ = [
    "KINDS", "PRIMS", "EagerHandler", "GraphHandler", "GraphValue", "KernelSpellingHandler",
    "OpsHandler", "Prim", "backward_graph", "broadcast_shapes", "current_handler", "grad_of",
    "make_meta", "ops", "prims", "promote_types", "set_handler", "sum_to_shape", "trace", "vjp",
    "vjp_rules",
]
