"""What a graph node runs for a higher-order op: a traced body, handed to PyTorch.

``torch.func.vmap(f)(x)``, ``torch.func.grad(f)(x)`` and ``torch.cond(pred, f, g, ops)`` take a
*function*. Capture (``dynamo/variables/higher_order_ops.py``) traces that function into a
subgraph of its own -- a :class:`~tutorcompile.fx.GraphModule`, the *body* -- and the graph
gets one node calling one of the functions below with the body as a constant argument:

* :func:`call_transform` runs a ``torch.func`` transform (``vmap``, ``grad``, ``jacrev``...)
  of the body, and returns the tensors of its result as a flat tuple (a dict of gradients,
  nested tuples: capture rebuilds them from the leaves, so later stages see plain tensors);
* :func:`call_cond` runs the branch the predicate picks;
* :func:`call_while_loop` runs ``torch.while_loop``'s loop: the body while the condition
  body says so, on the carried values;
* :func:`call_tensor_hook` is the identity on a tensor whose gradient a hook changes
  (``tensor.register_hook(hook)`` in the traced code, the hook traced into a body).

A body takes its operands first and then the values it closes over from the enclosing graph
(``free``), lifted to inputs as PyTorch's Dynamo lifts them: ``body(*operands, *free)``. The
transforms see only the operands -- a closed-over tensor is a constant to ``vmap`` (not
batched) and to ``grad`` (not differentiated), as it is to the user's function in eager.

Stages after capture treat the node as an extern op: it runs in PyTorch, and its gradient is
PyTorch's through the same call (``aot/joint.py``'s ``extern_backward``). Under fake or meta
tensors, where a predicate has no value, :func:`call_cond` runs both branches and checks they
agree on what they return, as ``torch.cond`` requires.

Mirrors: torch/_higher_order_ops/cond.py, torch/_functorch/apis.py (the transforms), and the
``body(*operands, *lifted_freevars)`` convention of torch/_dynamo/variables/higher_order_ops.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._higher_order_ops.while_loop import while_loop_op
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._pytree import TreeSpec, tree_flatten, tree_leaves, tree_unflatten

TRANSFORMS: dict[str, Callable] = {
    "vmap": torch.func.vmap, "grad": torch.func.grad,
    "grad_and_value": torch.func.grad_and_value, "jacrev": torch.func.jacrev,
    "jacfwd": torch.func.jacfwd, "hessian": torch.func.hessian,
}
"""The ``torch.func`` transforms a graph can call, by name (the name is what the graph
prints)."""


def run_transform(transform: str, body: Callable, options: dict, spec: TreeSpec,
                  *tensors: Any) -> Any:
    """``torch.func.<transform>(fn, **options)(*operands)`` where ``fn`` is ``body`` on the
    operands' tensors and the values it closes over. The operands are the first
    ``spec.num_leaves`` tensors, in the structure ``spec`` gives them (a dict of
    parameters stays a dict: ``grad`` returns a dict of gradients); the rest are the
    closed-over values."""
    n = spec.num_leaves
    operands, free = tree_unflatten(list(tensors[:n]), spec), tensors[n:]

    def fn(*ops: Any) -> Any:
        return body(*tree_leaves(ops), *free)
    return TRANSFORMS[transform](fn, **options)(*operands)


def call_transform(transform: str, body: Callable, options: dict, spec: TreeSpec,
                   *tensors: Any) -> tuple:
    """:func:`run_transform`'s result as a flat tuple of tensors (pytree order): what a
    graph node returns -- capture rebuilds the dicts and nested tuples from the leaves."""
    return tuple(tree_leaves(run_transform(transform, body, options, spec, *tensors)))


def call_cond(pred: Any, true_body: Callable, false_body: Callable, n: int, k: int,
              *tensors: Any) -> Any:
    """``true_body(*operands, *its_free)`` if ``pred`` else ``false_body(*operands,
    *its_free)``, as a flat tuple of tensors: ``torch.cond`` with both branches traced.
    ``tensors`` are the ``n`` operands, the ``k`` values the true branch closes over, then
    the false branch's."""
    operands = tensors[:n]
    true_args, false_args = (*operands, *tensors[n:n + k]), (*operands, *tensors[n + k:])
    if isinstance(pred, torch.Tensor) and (isinstance(pred, FakeTensor)
                                           or pred.device.type == "meta"):
        result = _both_branches(true_body(*true_args), false_body(*false_args))
    else:
        result = true_body(*true_args) if bool(pred) else false_body(*false_args)
    return tuple(tree_leaves(result))


def call_while_loop(cond_body: Callable, body: Callable, n: int, k: int,
                    *tensors: Any) -> tuple:
    """``while cond_body(*carried, *its_free): carried = body(*carried, *its_free)``,
    returning the carried tensors as a flat tuple: ``torch._higher_order_ops.while_loop``
    with both functions traced. ``tensors`` are the ``n`` carried values, the ``k`` the
    condition closes over, then the body's. It runs as PyTorch's ``while_loop_op`` (whose
    autograd rule gives the loop its gradient). Under fake or meta tensors, where the
    condition has no value, it runs the body once and checks the body gives back what it
    was given, as ``while_loop`` requires -- every iteration then has the same shapes."""
    carried, cond_free, body_free = tensors[:n], tensors[n:n + k], tensors[n + k:]
    if any(isinstance(t, FakeTensor) or t.device.type == "meta" for t in tensors):
        result = tuple(tree_leaves(body(*carried, *body_free)))
        for i, (before, after) in enumerate(zip(carried, result, strict=True)):
            if before.shape != after.shape or before.dtype != after.dtype:
                raise RuntimeError(f"while_loop: the body changes carried value {i} from "
                                   f"{_describe(before)} to {_describe(after)}")
        return result

    # (each function takes the carried values, then all of the closed-over ones: PyTorch
    # traces them on fake copies of both to give the loop its autograd rule)
    def cond(*args: Any) -> Any:
        return cond_body(*args[:n], *args[n:n + k])

    def step(*args: Any) -> tuple:
        return tuple(tree_leaves(body(*args[:n], *args[n + k:])))
    return tuple(while_loop_op(cond, step, tuple(carried), (*cond_free, *body_free)))


def _both_branches(a: Any, b: Any) -> Any:
    """Shape inference of a ``cond``: what both branches return, which must agree."""
    la, spec_a = tree_flatten(a)
    lb, spec_b = tree_flatten(b)
    if spec_a != spec_b:
        raise RuntimeError(f"torch.cond: the branches return different structures "
                           f"({spec_a} and {spec_b})")
    for i, (x, y) in enumerate(zip(la, lb)):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor) or (
                isinstance(x, torch.Tensor) and (x.shape != y.shape or x.dtype != y.dtype
                                                 or x.device != y.device)):
            raise RuntimeError(f"torch.cond: result {i} differs between the branches "
                               f"({_describe(x)} and {_describe(y)})")
    return a


def _describe(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"{x.dtype} {tuple(x.shape)} on {x.device}"
    return type(x).__name__


def body_input() -> None:
    """The target of a body's input while capture traces it in the enclosing graph; the
    node becomes a placeholder of the body before anything could run it."""
    raise RuntimeError("body_input is a placeholder of a higher-order op's body under "
                       "construction; it never runs")


__all__ = ["TRANSFORMS", "body_input", "call_cond", "call_transform", "call_while_loop",
           "run_transform"]


class _TensorHook(torch.autograd.Function):
    """The identity forward, the hook on the gradient backward."""

    @staticmethod
    def forward(ctx: Any, body: Callable, x: torch.Tensor, *free: torch.Tensor
                ) -> torch.Tensor:
        ctx.body, ctx.free = body, free
        # a tensor of its own: the caller may write it in place (a view of an input would
        # then be a view a custom Function returned, which autograd forbids writing)
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple:
        hooked = ctx.body(grad, *ctx.free)
        return (None, grad if hooked is None else hooked, *(None,) * len(ctx.free))


def call_tensor_hook(body: Callable, x: torch.Tensor, *free: torch.Tensor) -> torch.Tensor:
    """``x``, whose gradient passes through ``body(grad, *free)`` on its way back:
    ``x.register_hook(hook)`` with the hook traced into ``body``. Capture puts the node
    right after ``x`` and makes every use of ``x`` read it, so the hook sees the whole
    gradient of ``x``, as autograd's does. The values the hook closes over get no gradient
    through it: autograd runs hooks outside the graph it differentiates."""
    return _TensorHook.apply(body, x, *free)
