"""Counting work and traffic: FLOPs and bytes for every node of a graph.

Whether a kernel is fast is decided by two numbers: how much arithmetic it does (FLOPs) and
how many bytes it moves to and from memory. Their ratio, *arithmetic intensity*, says which
one limits it: a matmul does ~N FLOPs per byte and is compute-bound; ``relu`` does one FLOP
per 8 bytes (4 read, 4 written) and is memory-bound -- which is why fusing pointwise ops
(stage 5) pays and fusing matmuls rarely does.

:func:`count_flops` runs the graph on example inputs (an :class:`Interpreter`, so the real
shapes are known) and charges each node:

================  ==============================================  ==========================
kind              FLOPs                                           examples
================  ==============================================  ==========================
matmul            2·M·N·K (one multiply + one add per term)       ``@``, mm, bmm, matmul
linear            2·(output elements)·in_features                 nn.Linear, F.linear
conv              2·(output elements)·(C_in/groups)·prod(kernel)  nn.Conv*d, F.conv*d
pointwise         1 per output element                            add, mul, relu, sigmoid
reduction         1 per input element                             sum, mean, amax
softmax           4 per element (max, sub+exp, sum, divide)       softmax, log_softmax
norm              4 per element (eval: scale, shift; train: more) BatchNorm, LayerNorm
view              0 (moves no data)                               view, reshape, getitem
other             0 (not modelled; bytes still counted)           cat, embedding, sdpa
================  ==============================================  ==========================

Biases are not counted for matmul/linear/conv, following ``torch.utils.flop_counter``, so
those rows agree with ``FlopCounterMode`` exactly. Bytes are the sizes of the tensors a node
reads (inputs, and a module's parameters) and writes (outputs), as if each node were its own
kernel -- the unfused cost that fusion then reduces. Views and ``get_attr`` cost nothing here;
their bytes are charged to the node that reads them.

Mirrors: torch/utils/flop_counter.py (the FLOP formulas) -- but per graph node, with bytes.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any

import torch

from ..graph_module import GraphModule
from ..interpreter import Interpreter
from ..node import Node

_MATMUL_NAMES = {"matmul", "mm", "bmm", "__matmul__"}
_LINEAR_NAMES = {"linear"}
_CONV_NAMES = {"conv1d", "conv2d", "conv3d"}
_REDUCTION_NAMES = {"sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std",
                    "norm", "logsumexp", "argmax", "argmin", "all", "any", "count_nonzero"}
_SOFTMAX_NAMES = {"softmax", "log_softmax", "_softmax"}
_NORM_NAMES = {"batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm"}
_VIEW_NAMES = {"view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "permute",
               "transpose", "t", "expand", "expand_as", "view_as", "contiguous", "size",
               "dim", "getitem", "getattr", "narrow", "select", "unbind", "split", "chunk",
               "detach", "movedim", "as_strided", "clone", "to", "type_as", "float"}
_NOT_POINTWISE = {"cat", "stack", "zeros", "ones", "arange", "empty", "full", "randn",
                  "rand", "zeros_like", "ones_like", "empty_like", "full_like", "randn_like",
                  "dropout", "embedding", "gather", "scatter", "index_select", "topk", "sort",
                  "cumsum", "tril", "triu", "pad", "scaled_dot_product_attention",
                  "max_pool1d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"}
_CONV_MODULES = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
_NORM_MODULES = (torch.nn.modules.batchnorm._NormBase, torch.nn.LayerNorm, torch.nn.GroupNorm)
_POINTWISE_MODULES = (torch.nn.ReLU, torch.nn.GELU, torch.nn.SiLU, torch.nn.Sigmoid,
                      torch.nn.Tanh, torch.nn.LeakyReLU, torch.nn.ELU, torch.nn.Hardswish,
                      torch.nn.ReLU6, torch.nn.Mish, torch.nn.Softplus)
_SOFTMAX_MODULES = (torch.nn.Softmax, torch.nn.LogSoftmax)


@dataclass
class NodeCost:
    """The FLOPs and bytes charged to one node."""
    name: str
    kind: str            # matmul, linear, conv, pointwise, reduction, softmax, norm, view, other
    flops: int
    bytes_read: int
    bytes_written: int

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved (0 when nothing moves)."""
        moved = self.bytes_read + self.bytes_written
        return self.flops / moved if moved else 0.0


@dataclass
class FlopReport:
    """Per-node costs in graph order, with totals. ``print(report)`` shows a table."""
    nodes: list[NodeCost] = field(default_factory=list)

    @property
    def by_node(self) -> dict[str, NodeCost]:
        return {c.name: c for c in self.nodes}

    @property
    def total_flops(self) -> int:
        return sum(c.flops for c in self.nodes)

    @property
    def total_bytes_read(self) -> int:
        return sum(c.bytes_read for c in self.nodes)

    @property
    def total_bytes_written(self) -> int:
        return sum(c.bytes_written for c in self.nodes)

    @property
    def total_bytes(self) -> int:
        return self.total_bytes_read + self.total_bytes_written

    def flops_by_kind(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.nodes:
            out[c.kind] = out.get(c.kind, 0) + c.flops
        return out

    def __str__(self) -> str:
        header = ["node", "kind", "FLOPs", "bytes read", "bytes written", "FLOP/byte"]
        rows = [[c.name, c.kind, f"{c.flops:,}", f"{c.bytes_read:,}", f"{c.bytes_written:,}",
                 f"{c.intensity:.2f}"] for c in self.nodes if c.kind != "input"]
        rows.append(["total", "", f"{self.total_flops:,}", f"{self.total_bytes_read:,}",
                     f"{self.total_bytes_written:,}",
                     f"{self.total_flops / max(self.total_bytes, 1):.2f}"])
        widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
        lines = ["  ".join(h.ljust(w) if i < 2 else h.rjust(w)
                           for i, (h, w) in enumerate(zip(r, widths))).rstrip()
                 for r in [header] + rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)


def _nbytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    return 0


def _numel(value: Any) -> int:
    return value.numel() if isinstance(value, torch.Tensor) else 0


def _op_name(node: Node) -> str:
    if node.op == "call_method":
        return str(node.target)
    name = getattr(node.target, "__name__", "") or ""
    return name


def classify(node: Node, module: Any = None) -> str:
    """The kind of work a node does (see the table in this module's docstring)."""
    if node.op in ("placeholder", "output"):
        return "input" if node.op == "placeholder" else "output"
    if node.op == "get_attr":
        return "view"
    if node.op == "call_module":
        if isinstance(module, torch.nn.Linear):
            return "linear"
        if isinstance(module, _CONV_MODULES):
            return "conv"
        if isinstance(module, _NORM_MODULES):
            return "norm"
        if isinstance(module, _SOFTMAX_MODULES):
            return "softmax"
        if isinstance(module, _POINTWISE_MODULES):
            return "pointwise"
        if isinstance(module, (torch.nn.Flatten, torch.nn.Identity, torch.nn.Dropout)):
            return "view"
        return "other"
    if node.target is operator.matmul:
        return "matmul"
    if node.target in (operator.getitem, getattr):
        return "view"
    name = _op_name(node).strip("_")
    if name in _MATMUL_NAMES or name == "matmul":
        return "matmul"
    if name in _LINEAR_NAMES:
        return "linear"
    if name in _CONV_NAMES:
        return "conv"
    if name in _SOFTMAX_NAMES:
        return "softmax"
    if name in _NORM_NAMES:
        return "norm"
    if name in _REDUCTION_NAMES:
        return "reduction"
    if name in _VIEW_NAMES:
        return "view"
    if name in _NOT_POINTWISE:
        return "other"
    return "pointwise"


def _matmul_flops(a: torch.Tensor, out: torch.Tensor) -> int:
    # Every output element is a dot product of length K: K multiplies and K adds.
    return 2 * max(out.numel(), 1) * a.shape[-1]


def _conv_flops(weight: torch.Tensor, out: torch.Tensor) -> int:
    # weight: [C_out, C_in/groups, *kernel]; each output element sums C_in/groups·prod(kernel)
    # products.
    return 2 * out.numel() * weight.shape[1] * math.prod(weight.shape[2:])


class _Counter(Interpreter):
    def __init__(self, gm: GraphModule):
        super().__init__(gm)
        self.report = FlopReport()

    def run_node(self, node: Node) -> Any:
        args, kwargs = self.fetch_args_kwargs_from_env(node)
        result = getattr(self, node.op)(node.target, args, kwargs)
        if node.op == "output":
            return result
        module = self.fetch_attr(node.target) if node.op == "call_module" else None
        kind = classify(node, module)
        flops = self._flops(kind, node, args, kwargs, result, module)
        if kind in ("view", "input"):
            read = written = 0
        else:
            read = _nbytes(list(args)) + _nbytes(list(kwargs.values()))
            if module is not None:
                read += sum(_nbytes(t) for t in module.parameters())
                read += sum(_nbytes(t) for t in module.buffers())
            written = _nbytes(result)
        cost = NodeCost(node.name, kind, int(flops), int(read), int(written))
        node.meta["flops"] = cost
        self.report.nodes.append(cost)
        return result

    @staticmethod
    def _flops(kind: str, node: Node, args: tuple, kwargs: dict, result: Any,
               module: Any) -> int:
        out_numel = _numel(result)
        if kind == "matmul":
            return _matmul_flops(args[0], result)
        if kind == "linear":
            weight = module.weight if module is not None else \
                (args[1] if len(args) > 1 else kwargs["weight"])
            return 2 * out_numel * weight.shape[1]
        if kind == "conv":
            weight = module.weight if module is not None else \
                (args[1] if len(args) > 1 else kwargs["weight"])
            return _conv_flops(weight, result)
        if kind == "pointwise":
            return out_numel
        if kind == "reduction":
            return _numel(args[0]) if args else 0
        if kind in ("softmax", "norm"):
            return 4 * out_numel
        return 0


def count_flops(gm: GraphModule, *example_inputs: Any) -> FlopReport:
    """Run ``gm`` on ``example_inputs`` and return FLOPs and bytes for every node.

    Each node's :class:`NodeCost` is also left in ``node.meta["flops"]``.
    """
    counter = _Counter(gm)
    with torch.no_grad():
        counter.run(*example_inputs)
    return counter.report
