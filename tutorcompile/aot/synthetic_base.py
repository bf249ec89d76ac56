"""Synthetic bases: graph inputs that share memory, one of them written.

Functionalization treats each graph input as a tensor of its own: ``a.add_(1); return b * 2``
becomes ``a_1 = a + 1; out = b * 2`` plus "copy ``a_1`` into ``a``". That is eager's answer
only while ``a`` and ``b`` are apart. Called as ``f(x, x.view(6))`` eager's ``b * 2`` reads
the written values; the pure graph does not (and the copy-back order decides the rest).

So when inputs that share a storage reach AOT and one of them is written, the graph is
rewritten over one input per storage, the *synthetic base*, and the aliased inputs become
views of it made inside the graph::

    def forward(a, b):                 def forward(base):            # base: (6,), offset 0
        a.add_(1)              ->          a = torch.as_strided(base, (2, 3), (3, 1), 0)
        return b * 2                       b = torch.as_strided(base, (6,), (1,), 0)
                                           a.add_(1)
                                           return b * 2

Now the write into ``a`` is a write through a view of ``base``: functionalization pushes it
into ``base`` (``as_strided_scatter``), regenerates ``b`` from the new value, and copies the
new ``base`` back -- one input, one mutation, eager's values. At run time the base is a 1-D
view of the shared storage from element 0 (:meth:`SyntheticBases.merge`):

* of the aliased inputs' common autograd base (``x`` for ``x`` and ``x.view(6)``, or ``x[0]``
  and ``x[1]``), through ``as_strided``: gradients flow back into it, and the copy of the new
  values into it is recorded by autograd as eager's in-place write would be;
* else, when none of them requires grad (``x`` and ``x.detach()``), a tensor set on the
  storage itself;
* else there is no base to differentiate through: the captured graph runs as it is, op by
  op (eager's values and gradients; ``merge`` gives None), as it does for aliased inputs of
  different dtypes (``x`` and ``x.view(torch.int32)``), with a :class:`FallbackWarning`.

The compiled graphs then depend on where the aliased inputs start in the storage (the
offsets are in the graph): :func:`storage_layout` is part of the compilation's key.

Mirrors: torch/_functorch/_aot_autograd/input_output_analysis.py
(``compute_overlapping_inputs``, ``create_synthetic_base_metadata``) and runtime_wrappers.py
(``merge_view_inputs``, ``AOTSyntheticBaseWrapper``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import FallbackWarning
from ..fx import Graph, GraphModule, Node
from ..fx.aliasing import alias_groups, no_two_share, storage_pattern
from ..fx.node import map_arg


def storage_layout(inputs: list) -> tuple:
    """Which inputs share a storage and where each of those starts in it (absolute storage
    offsets): what a compilation over synthetic bases is specialised to, and what decides
    whether a compilation that writes an input may be reused. ``()`` when none share (the
    common case, asked on every call of such a compilation: one C call per tensor)."""
    if no_two_share([x for x in inputs if isinstance(x, torch.Tensor)]):
        return ()
    pattern = storage_pattern(*inputs)
    grouped = {i for g in alias_groups(pattern) for i in g}
    return tuple((j, inputs[i].storage_offset()) if i in grouped else (i, None)
                 for i, (j, _) in enumerate(pattern))


@dataclass
class SyntheticBases:
    """How a graph's inputs are merged: ``keep`` (positions passed as they are), then one
    base per group in ``groups`` (positions of the aliased inputs, each one a view of it)."""
    keep: list[int]
    groups: list[list[int]]
    extents: list[int]            # per group: elements of the base (0 .. last element used)
    dtypes: list[torch.dtype]
    fallback: Callable            # the captured graph, run op by op when there is no base

    def merge(self, inputs: list) -> list | None:
        """The inner graph's inputs for ``inputs``: the kept ones, then the bases. None when
        a group has no base to differentiate through (see the module docstring)."""
        if not self.groups:
            return None
        bases = []
        for group, extent, dtype in zip(self.groups, self.extents, self.dtypes):
            members = [inputs[i] for i in group]
            roots = {id(m if m._base is None else m._base) for m in members}
            first = members[0]
            root = first if first._base is None else first._base
            if len(roots) == 1 and root.dtype == dtype:
                bases.append(root.as_strided((extent,), (1,), 0))
            elif not any(m.requires_grad for m in members):
                base = torch.empty(0, dtype=dtype, device=first.device)
                bases.append(base.set_(first.untyped_storage(), 0, (extent,), (1,)))
            else:
                return None
        return [inputs[i] for i in self.keep] + bases

    def examples(self, inputs: list) -> list:
        """Inputs to compile the inner graph for: :meth:`merge`'s, or where that finds no
        base, a tensor on the storage with the members' ``requires_grad`` (a call like this
        one runs the fallback; a later one may find a base)."""
        merged = self.merge(inputs)
        if merged is not None:
            return merged
        bases = []
        for group, extent, dtype in zip(self.groups, self.extents, self.dtypes):
            first = inputs[group[0]]
            base = torch.empty(0, dtype=dtype, device=first.device)
            base.set_(first.untyped_storage(), 0, (extent,), (1,))
            bases.append(base.requires_grad_(any(inputs[i].requires_grad for i in group)))
        return [inputs[i] for i in self.keep] + bases


def as_strided_scatter(base: torch.Tensor, child: torch.Tensor, size: tuple, stride: tuple,
                       storage_offset: int) -> torch.Tensor:
    """``base`` with the elements that ``torch.as_strided(base, size, stride, storage_offset)``
    views replaced by ``child``: a write into an aliased input pushed into its synthetic base
    (functionalization's inverse of ``as_strided``).

    ``torch.as_strided_scatter`` gives these values, but its derivative for ``base`` passes
    the gradient of the overwritten elements through as well (PyTorch 2.x: the gradient of
    what was there before is counted twice). Written as a select between ``base`` and the
    scattered ``child``, each element's gradient goes to the one value it came from."""
    written = torch.as_strided_scatter(torch.zeros_like(base, dtype=torch.bool),
                                       torch.ones_like(child, dtype=torch.bool), size, stride,
                                       storage_offset)
    placed = torch.as_strided_scatter(torch.zeros_like(base), child, size, stride,
                                      storage_offset)
    return torch.where(written, placed, base)


def plan_synthetic_bases(gm: GraphModule, inputs: list, mutated: list[int],
                         fallback: Callable) -> tuple[GraphModule, SyntheticBases] | None:
    """The graph over synthetic bases for ``inputs``, when inputs that share a storage include
    one the graph writes (``mutated``: positions, from functionalization); None when there
    are none, or when the aliased inputs differ in dtype (the captured graph then runs as it
    is: see :class:`SyntheticBases`, ``extents`` empty)."""
    pattern = storage_pattern(*inputs)
    written = set(mutated)
    groups = [g for g in alias_groups(pattern) if written.intersection(g)]
    if not groups:
        return None
    fallback = _RunAsCaptured(fallback)
    dtypes = [inputs[g[0]].dtype for g in groups]
    if any(inputs[i].dtype != d for g, d in zip(groups, dtypes) for i in g):
        return gm, SyntheticBases([], [], [], [], fallback)   # (merge: always the fallback)
    extents = [max(_end(inputs[i]) for i in g) for g in groups]
    grouped = {i for g in groups for i in g}
    keep = [i for i in range(len(inputs)) if i not in grouped]

    old = gm.graph
    placeholders = old.placeholders
    graph = Graph.derived_from(old, "synthetic_bases")
    env: dict[Node, Any] = {}
    for i in keep:
        env[placeholders[i]] = graph.node_copy(placeholders[i], lambda n: n)
    bases = []
    for k, (group, extent, dtype) in enumerate(zip(groups, extents, dtypes)):
        base = graph.placeholder(f"synthetic_base_{k}")
        example = torch.empty((extent,), dtype=dtype, device="meta")   # (no memory)
        base.meta.update(example_value=example, source="synthetic base of " + ", ".join(
            placeholders[i].name for i in group))
        bases.append(base)
    for base, group in zip(bases, groups):
        for i in group:
            t, p = inputs[i], placeholders[i]
            view = graph.call_function(torch.as_strided, (base, tuple(t.shape), t.stride(),
                                                          t.storage_offset()))
            view.meta = {k: v for k, v in p.meta.items() if k != "dynamic_dims"}
            view.meta["aliases_input"] = True   # a view: functionalization writes through it
            view.meta["source"] = f"{p.name}, a view of {base.name}"
            env[p] = view
    for node in old.nodes:
        if node.op != "placeholder":
            out = graph.node_copy(node, lambda n: env[n]) if node.op != "output" else \
                graph.output(_map(node.args[0], env))
            env[node] = out
    bases_plan = SyntheticBases(keep, groups, extents, dtypes, fallback)
    return GraphModule(gm, graph, type(gm).__name__), bases_plan


class _RunAsCaptured:
    """The captured graph, run op by op; says so (a :class:`FallbackWarning`) the first time."""

    def __init__(self, graph: Callable):
        self.graph = graph
        self.warned = False

    def __call__(self, *inputs: Any) -> Any:
        if not self.warned:
            self.warned = True
            warnings.warn(
                "graph inputs that share a storage, one of them written, with no common base "
                "to differentiate through (x and x.detach()) or of different dtypes: this "
                "graph runs uncompiled, op by op (eager's values and gradients)",
                FallbackWarning, stacklevel=2)
        return self.graph(*inputs)


def _map(value: Any, env: dict) -> Any:
    return map_arg(value, lambda n: env[n])


def _end(t: torch.Tensor) -> int:
    """One past the last storage element ``t`` reads (in elements of its dtype)."""
    if t.numel() == 0:
        return int(t.storage_offset())
    return int(t.storage_offset() + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))) + 1
