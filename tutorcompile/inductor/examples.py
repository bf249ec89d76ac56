"""Example programs written against the virtualized ``ops``, with their PyTorch equivalents.

The stage's tests, ``benchmarks/run.py`` and notebook 05 use the same ones: softmax,
layernorm, RMSNorm, the pointwise chain ``gelu(x + b) * sigmoid(x + b)``, an MLP, and
:func:`all_pointwise` (every pointwise prim once). Trace one with
``tutorcompile.ops.trace(softmax, x)`` to get a prim graph for :func:`compile_fx`.
"""

import math

import torch

from tutorcompile.ops import PRIMS, ops

UNARY = ["neg", "exp", "log", "sqrt", "rsqrt", "abs", "sin", "cos", "tanh", "sigmoid", "relu",
         "erf", "floor", "ceil"]
POSITIVE_ONLY = {"log", "sqrt", "rsqrt"}
BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le",
          "gt", "ge"]
LOGICAL = ["logical_and", "logical_or", "logical_xor"]  # on bools


def all_pointwise(x, p, y, c):
    """Every pointwise prim once: x (noncontiguous allowed, zeros and negatives), p > 0, y
    broadcasts, c bool."""
    outs = []
    for name in UNARY:
        outs.append(getattr(ops, name)(p if name in POSITIVE_ONLY else x))
    for name in BINARY:
        a = p if name == "pow" else x
        outs.append(getattr(ops, name)(a, y))
    outs.append(ops.pow(x, 5.0))      # a negative base, an odd exponent (2 and 3 are products)
    outs.append(ops.pow(x, ops.floor(ops.mul(y, 3.0))))   # tensor ones, 0 ** 0 and 0 ** -k
    outs.append(ops.pow(-2.0, ops.floor(ops.mul(y, 3.0))))  # a number base, negative
    for name in LOGICAL:
        outs.append(getattr(ops, name)(c, ops.gt(x, 0)))
    outs.append(ops.add(x, 2.5))
    outs.append(ops.mul(3, x))
    outs.append(ops.maximum(x, 0.1))
    outs.append(ops.where(c, x, y))
    outs.append(ops.where(c, 1.0, x))
    outs.append(ops.convert_element_type(ops.mul(x, 10.0), torch.int32))
    outs.append(ops.div(ops.convert_element_type(ops.mul(x, 10.0), torch.int32), 3))
    return tuple(outs)


def pointwise_names():
    covered = set(UNARY) | set(BINARY) | set(LOGICAL) | {"where", "convert_element_type"}
    missing = {n for n, p in PRIMS.items() if p.kind == "pointwise"} - covered
    return covered, missing


def pointwise_inputs():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(13, 7, generator=g).t()          # (7, 13), not contiguous
    x = torch.where(x.abs() < 0.3, torch.zeros(()), x)  # exact ties for comparisons
    p = torch.rand(7, 13, generator=g) + 0.5
    y = torch.randn(13, generator=g)
    y[::4] = 0.0
    c = torch.rand(7, 13, generator=g) > 0.5
    return x, p, y, c


def softmax(x):
    m = ops.amax(x, (1,), keepdim=True)
    e = ops.exp(ops.sub(x, m))
    return ops.div(e, ops.sum(e, (1,), keepdim=True))


def layernorm(x, w, b):
    m = ops.mean(x, (-1,), keepdim=True)
    v = ops.var(x, (-1,), correction=0, keepdim=True)
    return ops.add(ops.mul(ops.mul(ops.sub(x, m), ops.rsqrt(ops.add(v, 1e-5))), w), b)


def rmsnorm(x, w):
    ms = ops.mean(ops.mul(x, x), (-1,), keepdim=True)
    return ops.mul(ops.mul(x, ops.rsqrt(ops.add(ms, 1e-6))), w)


def gelu(v):
    return ops.mul(ops.mul(v, 0.5), ops.add(ops.erf(ops.mul(v, 1 / math.sqrt(2))), 1.0))


def chain(x, b):
    """gelu(x + b) * sigmoid(x + b)"""
    v = ops.add(x, b)
    return ops.mul(gelu(v), ops.sigmoid(v))


def mlp(x, w1, b1, w2):
    return ops.matmul(gelu(ops.add(ops.matmul(x, w1), b1)), w2)


TORCH = {
    "softmax": lambda x: torch.softmax(x, -1),
    "layernorm": lambda x, w, b: torch.nn.functional.layer_norm(x, x.shape[-1:], w, b, 1e-5),
    "rmsnorm": lambda x, w: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w,
    "chain": lambda x, b: torch.nn.functional.gelu(x + b) * torch.sigmoid(x + b),
    "mlp": lambda x, w1, b1, w2: torch.nn.functional.gelu(x @ w1 + b1) @ w2,
}
