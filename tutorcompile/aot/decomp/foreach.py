"""``torch._foreach_*``: one op over lists of tensors, as one call per tensor.

An optimizer written with ``foreach=True`` (the default of Adam, AdamW, SGD...) updates every
parameter with a handful of ``torch._foreach_mul_(exp_avgs, beta1)``-style calls, each over
the lists of all parameters, gradients and states. Functionalization turns each into its
out-of-place twin (``torch._foreach_mul``); here each becomes the per-tensor op on every
element (``torch.mul(exp_avgs[i], beta1)``), decomposed by that op's own rule. The code
generator then fuses each parameter's whole update -- the steps of every foreach call on
that parameter -- into one kernel, instead of calling PyTorch once per foreach op and
copying every result out of its list.

The lists are zipped: a list argument gives its i-th element, anything else (a number, one
tensor) is passed to every call as it is. Two spellings differ from the per-tensor op:
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

from .registry import DECOMPOSITIONS, _is_t, extern_call, register_decomposition

# foreach op -> the per-tensor function, where its name is not the op's name without
# ``_foreach_``
_PER_TENSOR = {"norm": torch.linalg.vector_norm}
_SCALAR_TWIN: dict[str, Callable] = {"maximum": torch.clamp_min, "minimum": torch.clamp_max}


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


def _foreach_rule(name: str, fn: Callable) -> Callable:
    def rule(*args: Any, **kwargs: Any) -> list:
        if name in ("addcdiv", "addcmul"):   # (self, t1, t2, scalars): per tensor, value=
            if len(args) == 4:
                kwargs = {**kwargs, "value": args[-1]}
                args = args[:3]
            elif "scalars" in kwargs:
                kwargs = {**kwargs, "value": kwargs["scalars"]}
                del kwargs["scalars"]
        n = next((len(a) for a in args if isinstance(a, (list, tuple))), None)
        if n is None:
            raise NotImplementedError(f"_foreach_{name} without a list of tensors")
        results = []
        for i in range(n):
            per = tuple(a[i] if isinstance(a, (list, tuple)) else a for a in args)
            per_kwargs = {k: v[i] if isinstance(v, (list, tuple)) else
                          DECOMPOSITIONS[torch.select](v, 0, i)
                          if k == "value" and _is_t(v) and len(v.shape) == 1 else v
                          for k, v in kwargs.items()}
            target: Callable = _SCALAR_TWIN[name] if name in _SCALAR_TWIN and len(per) > 1 and \
                not _is_t(per[1]) else fn
            results.append(_per_tensor(target, per, per_kwargs))
        return results
    rule.__name__ = f"_foreach_{name}"
    return rule


def _register_all() -> list[str]:
    """A rule for every out-of-place foreach op whose per-tensor function exists."""
    names = []
    for attr in dir(torch):
        if not attr.startswith("_foreach_") or attr.endswith("_"):
            continue
        name = attr[len("_foreach_"):]
        fn = _PER_TENSOR.get(name, getattr(torch, name, None))
        if fn is not None:
            register_decomposition(getattr(torch, attr))(_foreach_rule(name, fn))
            names.append(attr)
    return names


FOREACH_OPS = _register_all()
"""The foreach ops decomposed here (``torch._foreach_powsum`` has no per-tensor twin)."""
