"""``torch._foreach_*``: one op over lists of tensors, as one call per tensor.

An optimizer written with ``foreach=True`` (the default of Adam, AdamW, SGD...) updates every
parameter with a handful of ``torch._foreach_mul_(exp_avgs, beta1)``-style calls, each over
the lists of all parameters, gradients and states. Functionalization turns each into its
out-of-place twin (``torch._foreach_mul``); here each becomes the per-tensor op on every
element (``torch.mul(exp_avgs[i], beta1)``), decomposed by that op's own rule. The code
generator then fuses each parameter's whole update -- the steps of every foreach call on
that parameter -- into one kernel, instead of calling PyTorch once per foreach op and
copying every result out of its list.

The lists are zipped (:func:`tutorcompile.ops.foreach.per_tensor_calls`): a list argument
gives its i-th element, anything else (a number, one tensor) is passed to every call as it
is. Two spellings differ from the per-tensor op:
``_foreach_addcdiv(self, t1, t2, scalars)`` takes its per-tensor ``value`` as a list or as
a 1-d tensor of scalars (Adam's step sizes, stacked while compiling), and
``_foreach_maximum(self, scalar)`` is ``clamp_min``.

Mirrors: Inductor's foreach lowerings (torch/_inductor/lowering.py, ``register_foreach_pointwise``),
which likewise lower each element with the pointwise op's own lowering.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...ops.foreach import per_tensor_calls, per_tensor_function
from .registry import DECOMPOSITIONS, extern_call, register_decomposition


def _per_tensor(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """``fn(*args, **kwargs)`` as the graph builds it: by ``fn``'s rule, else run by
    PyTorch (an extern node)."""
    rule = DECOMPOSITIONS.get(fn)
    if rule is not None:
        try:
            return rule(*args, **kwargs)
        except (NotImplementedError, TypeError):
            pass
    return extern_call(fn, args, kwargs)


def _foreach_rule(name: str) -> Callable:
    def rule(*args: Any, **kwargs: Any) -> list:
        return [_per_tensor(fn, per, per_kwargs) for fn, per, per_kwargs in per_tensor_calls(
            name, args, kwargs, select=lambda v, i: DECOMPOSITIONS[torch.select](v, 0, i))]
    rule.__name__ = f"_foreach_{name}"
    return rule


def _register_all() -> list[str]:
    """A rule for every out-of-place foreach op whose per-tensor function exists."""
    names = []
    for attr in dir(torch):
        if not attr.startswith("_foreach_") or attr.endswith("_"):
            continue
        name = attr[len("_foreach_"):]
        if per_tensor_function(name) is not None:
            register_decomposition(getattr(torch, attr))(_foreach_rule(name))
            names.append(attr)
    return names


FOREACH_OPS = _register_all()
"""The foreach ops decomposed here (``torch._foreach_powsum`` has no per-tensor twin)."""
