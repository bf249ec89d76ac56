"""Reference implementations of the exercise pieces later exercises build on.

When a learner's earlier answer is missing or failing, :func:`~.answers.earlier` uses these
instead (and says so). Each has the contract of the task that defines its name, and is the
library's own machinery where the library has it: the op table's VJP rules, the ``cse`` pass
and ``partition_from_saved``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..aot.partitioners import is_primal, op_kind, partition_from_saved
from ..fx.interop import from_torch_fx, to_torch_fx
from ..fx.passes.dce_cse import cse
from ..ops import prims

# ex01_autograd t1 and t3: the op table's own rules (notebook 01 shows them)
mul_vjp = prims.mul.vjp
sigmoid_vjp = prims.sigmoid.vjp


def cse_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
                ) -> torch.fx.GraphModule:
    """ex02_fx t5: common-subexpression elimination on Dynamo's graph."""
    ours = from_torch_fx(gm)
    return to_torch_fx(type(ours)(ours, cse(ours.graph)))


def matmul_only_partition(joint: Any) -> Any:
    """ex04_aot t3: save the primals and the forward's extern results; recompute the rest."""
    saved = [n for n in joint.graph.nodes
             if is_primal(n) or (n.meta.get("phase") == "forward" and op_kind(n) == "extern")]
    return partition_from_saved(joint, saved, "matmul_only")


def index_expr(shape: Sequence[int], strides: Sequence[int]) -> str:
    """ex05_fusion t4: the element offset, in a tensor with ``strides`` viewed as ``shape``, of
    the element at flat row-major position ``offsets`` (a Triton variable) of ``shape``.

    Dimensions that step through memory as one (a contiguous run, or broadcast dimensions
    side by side) are merged first, so a contiguous tensor is just ``offsets``."""
    merged: list[list[int]] = []                      # [size, stride], outermost first
    for size, stride in zip(shape, strides):
        if size == 1:
            continue
        if merged and merged[-1][1] == stride * size:
            merged[-1] = [merged[-1][0] * size, stride]
        else:
            merged.append([size, stride])
    terms, inner = [], 1
    for position, (size, stride) in enumerate(reversed(merged)):
        if stride != 0:
            index = "offsets" if inner == 1 else f"(offsets // {inner})"
            if position != len(merged) - 1:           # the outermost needs no modulo
                index = f"({index} % {size})"
            terms.append(index if stride == 1 else f"{index} * {stride}")
        inner *= size
    if not terms:
        return "offsets * 0"          # a block, as a load of a block needs
    return terms[0] if len(terms) == 1 else "(" + " + ".join(reversed(terms)) + ")"

