"""``torch.einsum`` as permutes, sums, broadcast products and batched matmuls.

An equation such as ``"bij,bjk->bik"`` names every dimension by a letter. Operands are
combined two at a time, left to right, the way ATen's ``sumproduct_pair`` does it:

* a letter that appears in one operand only, and is not wanted later (in the output or a
  later operand), is summed out of that operand first;
* the letters of a pair fall into four groups: in both and wanted later (**batch**), in both
  and not (**contracted**), in the left only, in the right only. With contracted letters,
  the left operand is permuted to (batch, left, contracted) and flattened into a matrix
  per batch, the right one to (batch, contracted, right), and one ``matmul`` (the library
  call) contracts them; without, the pair is a broadcast product (a pointwise kernel);
* the result is permuted into the output's order.

Repeated letters inside one operand (diagonals) and ``...`` stay PyTorch's call.

Mirrors: aten/src/ATen/native/Linear.cpp (``einsum``, ``sumproduct_pair``) and
torch/_refs/__init__.py.
"""

from __future__ import annotations

import math

import torch

from ...ops import ops
from .registry import _is_t, register_decomposition


def _parse(equation: str, n: int) -> tuple[list[str], str]:
    equation = equation.replace(" ", "")
    if "." in equation:
        raise NotImplementedError("an ellipsis")
    lhs, _, rhs = equation.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != n or not all(t.isalpha() for t in inputs) or not rhs.isalpha() and rhs:
        raise NotImplementedError("an equation that does not match its operands")
    if not _:   # implicit output: the letters seen once, in alphabetical order
        letters = "".join(inputs)
        rhs = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    if any(len(set(t)) != len(t) for t in inputs) or len(set(rhs)) != len(rhs):
        raise NotImplementedError("a letter repeated within an operand (a diagonal)")
    return inputs, rhs


def _sum_out(x, letters: str, keep: set[str]):
    dims = tuple(i for i, c in enumerate(letters) if c not in keep)
    if not dims:
        return x, letters
    return ops.sum(x, dims), "".join(c for c in letters if c in keep)


def _permute(x, letters: str, order: str):
    if letters == order:
        return x
    return ops.permute(x, tuple(letters.index(c) for c in order))


def _pair(a, la: str, b, lb: str, wanted: set[str], size: dict[str, int]):
    """``a`` (letters ``la``) times ``b`` (``lb``), keeping the ``wanted`` letters."""
    batch = "".join(c for c in la if c in lb and c in wanted)
    contracted = "".join(c for c in la if c in lb and c not in wanted)
    left = "".join(c for c in la if c not in lb)
    right = "".join(c for c in lb if c not in la)
    if not contracted:
        out_letters = batch + left + right
        shape_a = tuple(size[c] if c in la else 1 for c in out_letters)
        shape_b = tuple(size[c] if c in lb else 1 for c in out_letters)
        pa = ops.reshape(_permute(a, la, batch + left), shape_a)
        pb = ops.reshape(_permute(b, lb, batch + right), shape_b)
        return ops.mul(pa, pb), out_letters

    def flat(s):
        return math.prod(size[c] for c in s)
    ma = ops.reshape(_permute(a, la, batch + left + contracted),
                     (flat(batch), flat(left), flat(contracted)))
    mb = ops.reshape(_permute(b, lb, batch + contracted + right),
                     (flat(batch), flat(contracted), flat(right)))
    out = ops.matmul(ma, mb)
    out_letters = batch + left + right
    return ops.reshape(out, tuple(size[c] for c in out_letters)), out_letters


@register_decomposition(torch.einsum)
def einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str) or not operands or not all(
            _is_t(t) and t.dtype.is_floating_point for t in operands):
        raise NotImplementedError("operands that are not floating-point tensors")
    inputs, rhs = _parse(equation, len(operands))
    size: dict[str, int] = {}
    for letters, t in zip(inputs, operands):
        if len(letters) != len(t.shape):
            raise NotImplementedError("an operand with another number of dimensions")
        for c, s in zip(letters, t.shape):
            if size.setdefault(c, s) != s:
                raise NotImplementedError("a letter of two sizes (broadcasting)")
    if set(rhs) - set(size):
        raise NotImplementedError("an output letter no operand has")
    acc, la = None, ""
    for k, (letters, t) in enumerate(zip(inputs, operands)):
        later = set(rhs).union(*inputs[k + 1:])
        t, letters = _sum_out(t, letters, later | set(la))
        if acc is None:
            acc, la = t, letters
            acc, la = _sum_out(acc, la, later)
            continue
        acc, la = _pair(acc, la, t, letters, later, size)
    acc, la = _sum_out(acc, la, set(rhs))
    out = _permute(acc, la, rhs)
    return ops.mul(out, 1.0) if out is operands[0] else out
