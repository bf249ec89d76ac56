"""Which tensors share memory: the one storage test every stage asks.

Two tensors *alias* when they are views of one storage (``x`` and ``x.view(6)``, ``x[0]``
and ``x[1]``, ``x`` and ``x.detach()``): a write through one is seen through the other.
Capture asks it of fake tensors (``FakeTensorMode`` gives views of one tensor one fake
storage), AOT and the guards ask it of real ones; the answer is the same test:

* :func:`storage_key` -- a key equal for tensors of one storage, None for a non-tensor
  (or a tensor without storage);
* :func:`same_storage` -- do two tensors share one;
* :func:`storage_pattern` -- for a list of tensors, which share a storage with an earlier
  one and where they start in it: the fact Dynamo guards (a graph traced for ``f(x, y)``
  with ``x`` and ``y`` apart is not reused for ``f(x, x.view(6))``) and AOT compiles for.

Mirrors: ``StorageWeakRef`` (torch/multiprocessing/reductions.py) as Dynamo and
AOTAutograd use it (torch/_functorch/_aot_autograd/input_output_analysis.py), and the
``NO_TENSOR_ALIASING`` / ``STORAGE_OVERLAPPING`` guards of torch/_dynamo/guards.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

# ``t.untyped_storage()._cdata`` without making the storage object: one C call (not in
# torch's type stubs)
_storage_id: Callable[[torch.Tensor], int] = vars(torch._C)["_storage_id"]


def storage_key(value: Any) -> int | None:
    """The identity of ``value``'s storage (its ``StorageImpl``): equal for two tensors that
    share memory, views included; None for anything else."""
    if not isinstance(value, torch.Tensor):
        return None
    try:
        return _storage_id(value)
    except (NotImplementedError, RuntimeError, TypeError):   # (a tensor without storage)
        return None


def same_storage(a: Any, b: Any) -> bool:
    """Do ``a`` and ``b`` share one storage (a write through one shows through the other)?"""
    key = storage_key(a)
    return key is not None and key == storage_key(b)


def no_two_share(tensors: Sequence[torch.Tensor]) -> bool:
    """No two of ``tensors`` share a storage: the common case, asked on every call of a
    graph that writes an input (one C call per tensor, one set)."""
    try:
        return len(set(map(_storage_id, tensors))) == len(tensors)
    except (NotImplementedError, RuntimeError, TypeError):   # (a tensor without storage
        keys = [k for k in map(storage_key, tensors) if k is not None]   # aliases none)
        return len(set(keys)) == len(keys)


def storage_pattern(*tensors: Any) -> tuple:
    """How ``tensors`` share storage, as a value to compare: for each, the position of the
    first tensor with its storage and its offset from that one's start (in elements).
    ``(x, y)`` apart gives ``((0, 0), (1, 0))``; ``(x, x.view(6))`` gives
    ``((0, 0), (0, 0))``; ``(x[0], x[1])`` of a 2x3 ``x`` gives ``((0, 0), (0, 3))``. A
    non-tensor is its own position."""
    first: dict[int, int] = {}
    pattern = []
    for i, t in enumerate(tensors):
        key = storage_key(t)
        if key is None:
            pattern.append((i, 0))
            continue
        j = first.setdefault(key, i)
        pattern.append((j, t.storage_offset() - tensors[j].storage_offset()) if j != i
                       else (i, 0))
    return tuple(pattern)


def alias_groups(pattern: tuple) -> list[list[int]]:
    """The positions that share a storage, group by group (groups of two or more), from a
    :func:`storage_pattern`."""
    groups: dict[int, list[int]] = {}
    for i, (j, _) in enumerate(pattern):
        groups.setdefault(j, []).append(i)
    return [g for g in groups.values() if len(g) > 1]
