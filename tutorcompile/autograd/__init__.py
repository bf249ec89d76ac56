"""tutorcompile.autograd -- stage 1: reverse-mode autodiff, from one number to tensors.

::

    Value                  micrograd-style scalar autodiff (the warm-up, value.py);
                           value_graph draws it
    Tensor, tensor         a torch.Tensor plus a tape; operators and methods record prims
    backward, no_grad      the reverse sweep (VJP rules from tutorcompile.ops); grad mode
    topological_order      the order the sweep reverses
    apply                  run one prim on Tensors and record it (what every op goes through)
    torch_autograd_graph   PyTorch's grad_fn graph as a tutorcompile.fx Graph (to draw;
                           graphs.py, with the two below)
    tape_graph             our tape as a runnable forward Graph of prims
    tape_backward_graph    our tape drawn like torch_autograd_graph, to compare

Mirrors: torch/autograd and torch/csrc/autograd.
"""

from .graphs import (
    BackwardFunction,
    tape_backward_graph,
    tape_graph,
    torch_autograd_graph,
    value_graph,
)
from .tensor import (
    TapeNode,
    Tensor,
    apply,
    backward,
    cat,
    is_grad_enabled,
    no_grad,
    tensor,
    topological_order,
    where,
)
from .value import Value

__all__ = [
    "BackwardFunction", "TapeNode", "Tensor", "Value", "apply", "backward", "cat",
    "is_grad_enabled", "no_grad", "tape_backward_graph", "tape_graph", "tensor",
    "topological_order", "torch_autograd_graph", "value_graph", "where",
]
