"""Folding BatchNorm into the convolution before it, for inference.

In eval mode a BatchNorm is a fixed per-channel affine map::

    bn(y) = (y - mean) / sqrt(var + eps) * gamma + beta  =  y * s + (beta - mean * s)
    with s = gamma / sqrt(var + eps)

and a convolution is linear in its weight, so ``bn(conv(x))`` is itself a convolution with

    W' = W * s   (scaling each output channel's filter)
    b' = (b - mean) * s + beta

One kernel instead of two, and one fewer pass over the activation: the classic inference
rewrite that every deployment compiler performs.

:func:`fuse_conv_bn` finds ``call_module`` nodes of ``nn.Conv1d/2d/3d`` whose only user is a
``call_module`` ``nn.BatchNorm1d/2d/3d`` with running statistics, builds the folded
convolution (a new module -- the original model is not touched) and removes the BatchNorm
node. It refuses to run on a module in training mode, where BatchNorm normalises by the
batch's own statistics and the fold would be wrong.

Mirrors: torch/fx/experimental/optimization.py (``fuse``) and
torch/nn/utils/fusion.py (``fuse_conv_bn_eval``).
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from ..graph_module import GraphModule
from ..node import Node

_CONVS = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
_BNS = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)


def fold_conv_bn_weights(conv: Any, bn: Any) -> torch.nn.Module:
    """A new convolution computing ``bn(conv(x))`` with ``bn``'s running statistics
    (``conv`` one of ``_CONVS``, ``bn`` one of ``_BNS``)."""
    fused = copy.deepcopy(conv)
    with torch.no_grad():
        scale = bn.running_var.add(bn.eps).rsqrt()
        if bn.weight is not None:
            scale = scale * bn.weight
        bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
        new_bias = (bias - bn.running_mean) * scale
        if bn.bias is not None:
            new_bias = new_bias + bn.bias
        shape = [-1] + [1] * (conv.weight.dim() - 1)  # one scale per output channel
        fused.weight = torch.nn.Parameter(conv.weight * scale.reshape(shape).to(conv.weight),
                                          requires_grad=conv.weight.requires_grad)
        fused.bias = torch.nn.Parameter(new_bias.to(conv.weight),
                                        requires_grad=conv.weight.requires_grad)
    return fused


def _module(gm: torch.nn.Module, node: Node) -> Any:
    obj: Any = gm
    for part in node.target.split("."):
        obj = getattr(obj, part)
    return obj


def fuse_conv_bn(gm: GraphModule) -> GraphModule:
    """A new GraphModule where each eval-mode ``Conv → BatchNorm`` pair is one convolution."""
    if gm.training:
        raise RuntimeError("fuse_conv_bn folds BatchNorm's running statistics, which is only "
                           "correct in inference; call model.eval() before tracing (or "
                           "gm.eval()) and try again")
    graph = gm.graph.copy()
    attrs = {n.target: _module(gm, n) for n in graph.nodes
             if n.op in ("get_attr", "call_module")}
    fused_count = 0
    for bn_node in graph.nodes:
        if bn_node.op != "call_module" or not isinstance(attrs[bn_node.target], _BNS):
            continue
        conv_node = bn_node.args[0] if bn_node.args else None
        if not (isinstance(conv_node, Node) and conv_node.op == "call_module"
                and isinstance(attrs[conv_node.target], _CONVS)):
            continue
        bn, conv = attrs[bn_node.target], attrs[conv_node.target]
        if len(conv_node.users) != 1 or len(bn_node.args) != 1 or bn_node.kwargs:
            continue  # the conv's own output is needed elsewhere: folding would change it
        if bn.training or conv.training or bn.running_mean is None:
            continue  # batch statistics (training mode or track_running_stats=False)
        # The folded conv gets its own name; the original may be called elsewhere unfused.
        name = f"{conv_node.target}_bn_fused".replace(".", "_")
        while name in attrs:
            name += "_"
        attrs[name] = fold_conv_bn_weights(conv, bn)
        with graph.inserting_before(conv_node):
            fused = graph.call_module(name, conv_node.args, conv_node.kwargs)
        fused.meta = dict(conv_node.meta)
        fused.meta["fused_from"] = (conv_node.name, bn_node.name)
        bn_node.replace_all_uses_with(fused)
        graph.erase_node(bn_node)
        graph.erase_node(conv_node)
        fused_count += 1
    graph.stamp("fuse_conv_bn")
    graph.lint()
    used = {n.target for n in graph.nodes if n.op in ("get_attr", "call_module")}
    result = GraphModule({k: v for k, v in attrs.items() if k in used}, graph,
                         type(gm).__name__)
    result.training = False
    result.fused = fused_count  # type: ignore[assignment]
    return result
