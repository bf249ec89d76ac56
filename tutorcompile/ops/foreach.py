"""``torch._foreach_*`` as one call per tensor: which function, on which arguments.

``torch._foreach_add(xs, t)`` is ``[torch.add(x, t) for x in xs]``: a list argument gives
each call its element, anything else is passed to every call. Two stages need that split:
decomposition (``aot/decomp/foreach.py``: each call becomes the per-tensor op's prims) and
capture (``dynamo/output_graph.py``: the fake kernel of a foreach op refuses a tensor
scalar -- ``_foreach_add(xs, lr)`` asks for ``lr.item()`` -- so the result's shapes come
from the per-tensor calls instead).

Mirrors: the per-tensor fallbacks of torch/_decomp/decompositions.py
(``_foreach_*`` decomposed through ``foreach_map``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

# foreach op -> the per-tensor function, where its name is not the op's name without
# ``_foreach_``
_PER_TENSOR = {"norm": torch.linalg.vector_norm}
_SCALAR_TWIN: dict[str, Callable] = {"maximum": torch.clamp_min, "minimum": torch.clamp_max}


def foreach_name(fn: Any) -> str | None:
    """``"add"`` for ``torch._foreach_add`` (an out-of-place foreach op), else None."""
    name = getattr(fn, "__name__", "")
    if not name.startswith("_foreach_") or name.endswith("_") or \
            getattr(torch, name, None) is not fn:
        return None
    return name[len("_foreach_"):]


def per_tensor_function(name: str) -> Callable | None:
    """The function ``_foreach_<name>`` applies to each tensor (None: it has none, as
    ``_foreach_powsum``)."""
    return _PER_TENSOR.get(name, getattr(torch, name, None))


def _is_tensor(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (int, float, bool))


def per_tensor_calls(name: str, args: tuple, kwargs: dict,
                     select: Callable[[Any, int], Any] = lambda v, i: v[i]
                     ) -> list[tuple[Callable, tuple, dict]]:
    """``_foreach_<name>(*args, **kwargs)`` as one ``(fn, args, kwargs)`` call per tensor.
    ``addcdiv``/``addcmul`` take their per-tensor ``value`` as a list or a 1-d tensor of
    scalars, whose element ``select(values, i)`` picks; ``maximum``/``minimum`` with a
    scalar are ``clamp_min``/``clamp_max``."""
    fn = per_tensor_function(name)
    if fn is None:
        raise NotImplementedError(f"_foreach_{name} has no per-tensor function")
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
    calls = []
    for i in range(n):
        per = tuple(a[i] if isinstance(a, (list, tuple)) else a for a in args)
        per_kwargs = {k: v[i] if isinstance(v, (list, tuple)) else
                      select(v, i) if k == "value" and _is_tensor(v) and len(v.shape) == 1
                      else v for k, v in kwargs.items()}
        target = _SCALAR_TWIN[name] if name in _SCALAR_TWIN and len(per) > 1 and \
            not _is_tensor(per[1]) else fn
        calls.append((target, per, per_kwargs))
    return calls
