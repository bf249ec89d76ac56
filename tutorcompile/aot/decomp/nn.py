"""Decompositions of the neural-network functions: activations, losses, normalisation
layers, pooling and padding (``torch.nn.functional``).

Like ``math.py`` (the math the rules here are built from), these rules are
written against the virtualized ``ops`` and register into the one table of
``registry.py``; each declines (``NotImplementedError``) what it does not cover,
which then stays an extern PyTorch call named in the report. A loss is its pointwise part
plus the reduction; a class-index loss picks the target's class by comparing with the
class positions (``iota``); pooling is the sum of the window's strided slices, or the one
of them max pooling picks, one pointwise kernel.

Mirrors: torch/_decomp/decompositions.py and torch/_refs/nn/functional/__init__.py.
"""

from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F

from ...ops import ops
from ...ops.table import normalize_dim
from .. import config
from .core import batch_norm_functional, log_softmax, safe_softmax, softmax
from .helpers import (
    _floating_only,
    _is_float,
    _reduce,
    detached,
    positions,
)
from .math import pairwise_distance
from .registry import DECOMPOSITIONS, _both, _cast, register_decomposition

# =======================================================================================
# Activations
# =======================================================================================

def _act(*targets):
    """An activation: a floating-point tensor in, ``inplace=`` accepted and ignored (the
    graph is functional; functionalization handles in-place spellings)."""
    def deco(rule):
        def checked(a, *args, **kwargs):
            kwargs.pop("inplace", None)
            return rule(_floating_only(a), *args, **kwargs)
        register_decomposition(*targets)(checked)
        return rule
    return deco


def _softplus(a, beta=1.0, threshold=20.0):
    # Above the threshold the linear branch is taken, but the gradient flows through both
    # sides of a where (the unchosen one times zero): exp of a large input is inf there,
    # and 0 * inf is nan. The soft side reads the input clamped to the threshold instead.
    scaled = ops.mul(a, beta) if beta != 1 else a
    linear = ops.gt(scaled, threshold)
    soft = ops.log(ops.add(ops.exp(ops.where(linear, threshold, scaled)), 1.0))
    if beta != 1:
        soft = ops.div(soft, beta)
    return ops.where(linear, a, soft)


_act(F.softplus)(_softplus)


@_act(F.hardsigmoid)
def hardsigmoid(a):
    return ops.minimum(ops.maximum(ops.add(ops.div(a, 6.0), 0.5), 0.0), 1.0)


@_act(F.hardswish)
def hardswish(a):
    return ops.mul(a, ops.div(ops.minimum(ops.maximum(ops.add(a, 3.0), 0.0), 6.0), 6.0))


@_act(F.hardtanh, *_both("hardtanh"))
def hardtanh(a, min_val=-1.0, max_val=1.0):
    return ops.minimum(ops.maximum(a, min_val), max_val)


@_act(F.relu6)
def relu6(a):
    return ops.minimum(ops.relu(a), 6.0)


def _elu(a, alpha=1.0, scale=1.0, input_scale=1.0):
    neg = ops.mul(ops.sub(ops.exp(ops.mul(a, input_scale)), 1.0), alpha)
    out = ops.where(ops.gt(a, 0), a, neg)
    return out if scale == 1.0 else ops.mul(out, scale)


_act(F.elu)(lambda a, alpha=1.0: _elu(a, alpha))


_act(F.celu, *_both("celu"))(lambda a, alpha=1.0: _elu(a, alpha, 1.0, 1.0 / alpha))


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


_act(F.selu, *_both("selu"))(lambda a: _elu(a, _SELU_ALPHA, _SELU_SCALE))


@_act(F.mish)
def mish(a):
    return ops.mul(a, ops.tanh(_softplus(a)))


@_act(F.softsign)
def softsign(a):
    return ops.div(a, ops.add(ops.abs(a), 1.0))


@_act(F.tanhshrink)
def tanhshrink(a):
    return ops.sub(a, ops.tanh(a))


@_act(F.hardshrink, *_both("hardshrink"))
def hardshrink(a, lambd=0.5):
    return ops.where(ops.gt(ops.abs(a), lambd), a, 0.0)


@_act(F.softshrink)
def softshrink(a, lambd=0.5):
    return ops.where(ops.gt(a, lambd), ops.sub(a, lambd),
                     ops.where(ops.lt(a, -lambd), ops.add(a, lambd), 0.0))


@_act(F.threshold, *_both("threshold"))
def threshold(a, threshold, value):
    return ops.where(ops.gt(a, threshold), a, value)


@_act(F.logsigmoid)
def logsigmoid(a):
    # log(sigmoid(a)) = min(a, 0) - log1p(exp(-|a|)), stable for large |a|
    return ops.sub(ops.minimum(a, 0.0), ops.log(ops.add(ops.exp(ops.neg(ops.abs(a))), 1.0)))


@_act(F.glu)
def glu(a, dim=-1):
    d = normalize_dim(dim, len(a.shape))
    half = a.shape[d] // 2
    if a.shape[d] % 2:
        raise NotImplementedError("glu of an odd size")  # PyTorch raises the error
    first = ops.slice(a, d, 0, half, 1)
    second = ops.slice(a, d, half, 2 * half, 1)
    return ops.mul(first, ops.sigmoid(second))


@register_decomposition(F.prelu, *_both("prelu"))
def prelu(a, weight):
    a = _floating_only(a)
    if len(weight.shape) == 0:
        return ops.where(ops.gt(a, 0), a, ops.mul(weight, a))
    if len(weight.shape) != 1:
        raise NotImplementedError("prelu weight of more than one dimension")
    if weight.shape[0] != 1 and len(a.shape) >= 2:
        weight = ops.reshape(weight, (weight.shape[0],) + (1,) * (len(a.shape) - 2))
    elif weight.shape[0] == 1 and len(a.shape) != 1:
        weight = ops.reshape(weight, ())
    return ops.where(ops.gt(a, 0), a, ops.mul(weight, a))


@register_decomposition(F.softmin)
def softmin(a, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        raise NotImplementedError("softmin without dim")
    return softmax(ops.neg(a if dtype is None else _cast(a, dtype)), dim)


@register_decomposition(F.rrelu)
def rrelu(a, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    if training:
        raise NotImplementedError("rrelu in training draws random slopes")
    return ops.where(ops.ge(_floating_only(a), 0), a, ops.mul(a, (lower + upper) / 2))

# =======================================================================================
# Losses: a pointwise op, then the reduction
# =======================================================================================

def _loss(*targets, positional: int = 0):
    """A loss ``rule(input, target, **options)`` plus the reduction; ``positional`` says how
    many options PyTorch's signature has before ``size_average`` (BCE's ``weight``)."""
    def deco(rule):
        def checked(input, target, *args, size_average=None, reduce=None,  # noqa: A002
                    reduction="mean", **kwargs):
            if len(args) > positional:
                raise NotImplementedError("legacy positional arguments")
            if size_average is not None or reduce is not None:
                raise NotImplementedError("legacy size_average/reduce arguments")
            if not (_is_float(input) and _is_float(target)) or input.dtype != target.dtype:
                raise NotImplementedError("non-float or mixed dtypes")
            if tuple(input.shape) != tuple(target.shape):
                raise NotImplementedError("broadcasting input and target")
            return _reduce(rule(input, target, *args, **kwargs), reduction)
        register_decomposition(*targets)(checked)
        return rule
    return deco


@_loss(F.l1_loss)
def l1_loss(input, target):  # noqa: A002
    return ops.abs(ops.sub(input, target))


@_loss(F.smooth_l1_loss)
def smooth_l1_loss(input, target, beta=1.0):  # noqa: A002
    d = ops.abs(ops.sub(input, target))
    if beta == 0:
        return d
    return ops.where(ops.lt(d, beta), ops.div(ops.mul(ops.mul(d, d), 0.5), beta),
                     ops.sub(d, 0.5 * beta))


@_loss(F.huber_loss)
def huber_loss(input, target, delta=1.0, weight=None):  # noqa: A002
    if weight is not None:
        raise NotImplementedError("weight=")
    d = ops.abs(ops.sub(input, target))
    return ops.where(ops.lt(d, delta), ops.mul(ops.mul(d, d), 0.5),
                     ops.mul(ops.sub(d, 0.5 * delta), delta))


@_loss(F.soft_margin_loss)
def soft_margin_loss(input, target):  # noqa: A002
    return ops.log(ops.add(ops.exp(ops.neg(ops.mul(target, input))), 1.0))


@_loss(F.binary_cross_entropy, positional=1)
def binary_cross_entropy(input, target, weight=None):  # noqa: A002
    # PyTorch clamps the logarithms at -100 so that log(0) stays finite
    log_p = ops.maximum(ops.log(input), -100.0)
    log_q = ops.maximum(ops.log(ops.sub(1.0, input)), -100.0)
    loss = ops.neg(ops.add(ops.mul(target, log_p), ops.mul(ops.sub(1.0, target), log_q)))
    return loss if weight is None else ops.mul(loss, weight)


@_loss(F.binary_cross_entropy_with_logits, positional=1)
def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None):  # noqa: A002
    # (1 - t) x + (1 + (pw - 1) t) * log(1 + exp(-x)), with log(1 + exp(-x)) stable
    log_sig_neg = ops.sub(ops.log(ops.add(ops.exp(ops.neg(ops.abs(input))), 1.0)),
                          ops.minimum(input, 0.0))
    if pos_weight is None:
        loss = ops.add(ops.mul(ops.sub(1.0, target), input), log_sig_neg)
    else:
        coeff = ops.add(ops.mul(ops.sub(pos_weight, 1.0), target), 1.0)
        loss = ops.add(ops.mul(ops.sub(1.0, target), input), ops.mul(coeff, log_sig_neg))
    return loss if weight is None else ops.mul(loss, weight)


def kl_div(input, target, log_target=False):  # noqa: A002
    if log_target:
        return ops.mul(ops.exp(target), ops.sub(target, input))
    return ops.where(ops.gt(target, 0), ops.mul(target, ops.sub(ops.log(target), input)),
                     ops.where(ops.ne(target, target), target, 0.0))


@_loss(F.poisson_nll_loss)
def poisson_nll_loss(input, target, log_input=True, full=False, eps=1e-8):  # noqa: A002
    if log_input:
        loss = ops.sub(ops.exp(input), ops.mul(target, input))
    else:
        loss = ops.sub(input, ops.mul(target, ops.log(ops.add(input, eps))))
    if full:   # Stirling's approximation of log(target!), only where target > 1
        stirling = ops.add(ops.sub(ops.mul(target, ops.log(target)), target),
                           ops.mul(ops.log(ops.mul(target, 2 * math.pi)), 0.5))
        loss = ops.add(loss, ops.where(ops.gt(target, 1), stirling, 0.0))
    return loss


@register_decomposition(F.kl_div)
def _kl_div_reduction(input, target, size_average=None, reduce=None,  # noqa: A002
                      reduction="mean", log_target=False):
    if size_average is not None or reduce is not None or tuple(input.shape) != \
            tuple(target.shape) or not (_is_float(input) and _is_float(target)):
        raise NotImplementedError("legacy arguments, broadcasting or non-float dtypes")
    loss = kl_div(input, target, log_target)
    if reduction == "batchmean":
        return ops.div(ops.sum(loss, None), float(input.shape[0]) if input.shape else 1.0)
    return _reduce(loss, reduction)


@register_decomposition(F.margin_ranking_loss)
def margin_ranking_loss(x1, x2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    if size_average is not None or reduce is not None:
        raise NotImplementedError("legacy arguments")
    loss = ops.relu(ops.add(ops.mul(ops.neg(target), ops.sub(x1, x2)), margin))
    return _reduce(loss, reduction)


@register_decomposition(F.hinge_embedding_loss)
def hinge_embedding_loss(input, target, margin=1.0, size_average=None,  # noqa: A002
                         reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None or not _is_float(target):
        raise NotImplementedError("legacy arguments or an integer target")
    margin_part = ops.where(ops.ne(target, 1), ops.relu(ops.sub(margin, input)), 0.0)
    self_part = ops.where(ops.ne(target, -1), input, 0.0)
    return _reduce(ops.add(margin_part, self_part), reduction)


@register_decomposition(F.one_hot)
def one_hot(target, num_classes=-1):
    if num_classes < 0:
        raise NotImplementedError("num_classes found from the data")
    classes = ops.iota(num_classes, dtype=torch.int64, device=target.device)
    return ops.convert_element_type(ops.eq(ops.unsqueeze(target, -1), classes), torch.int64)


def class_mask(logits, target):
    """``mask[n, c, ...] = (target[n, ...] == c)``: the class-index pick as a comparison."""
    return ops.eq(ops.unsqueeze(target, 1), positions(logits, 1))


@register_decomposition(F.nll_loss)
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100,  # noqa: A002
             reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None or not _is_float(input) \
            or len(input.shape) < 2 or target.dtype.is_floating_point:
        raise NotImplementedError("legacy arguments, 1-d input or probabilities")
    mask = class_mask(input, target)
    picked = ops.sum(ops.where(mask, input, 0.0), (1,))
    keep = ops.ne(target, ignore_index)
    if weight is None:
        w = ops.convert_element_type(keep, input.dtype)
    else:
        w_shape = (1, weight.shape[0]) + (1,) * (len(input.shape) - 2)
        w = ops.where(keep, ops.sum(ops.where(mask, ops.reshape(weight, w_shape), 0.0), (1,)),
                      0.0)
    loss = ops.neg(ops.mul(picked, w))
    if reduction == "mean":
        return ops.div(ops.sum(loss, None), ops.sum(w, None))
    return _reduce(loss, reduction)


@register_decomposition(F.cross_entropy)
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,  # noqa: A002
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """Class-index cross entropy: ``nll_loss(log_softmax(input, 1), target)``; the pick of
    ``target``'s class is a comparison with the class positions, so it stays in a kernel."""
    if size_average is not None or reduce is not None or label_smoothing != 0.0 \
            or target.dtype.is_floating_point or len(input.shape) < 2:
        raise NotImplementedError("cross_entropy with probabilities or smoothing")
    return nll_loss(log_softmax(input, 1), target, weight, ignore_index=ignore_index,
                    reduction=reduction)


@register_decomposition(F.multilabel_soft_margin_loss)
def multilabel_soft_margin_loss(input, target, weight=None, size_average=None,  # noqa: A002
                                reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None or len(input.shape) not in (1, 2) \
            or not (_is_float(input) and _is_float(target)):
        raise NotImplementedError("legacy arguments or other ranks")
    loss = ops.neg(ops.add(ops.mul(target, logsigmoid(input)),
                           ops.mul(ops.sub(1.0, target), logsigmoid(ops.neg(input)))))
    if weight is not None:
        loss = ops.mul(loss, weight)
    return _reduce(ops.mean(loss, (len(input.shape) - 1,)), reduction)


@register_decomposition(F.triplet_margin_loss)
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6,
                        swap=False, size_average=None, reduce=None, reduction="mean"):
    if swap or size_average is not None or reduce is not None or len(anchor.shape) != 2:
        raise NotImplementedError("swap, legacy arguments or other ranks")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    return _reduce(ops.relu(ops.add(ops.sub(d_pos, d_neg), margin)), reduction)


@register_decomposition(F.cosine_embedding_loss)
def cosine_embedding_loss(x1, x2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    if size_average is not None or reduce is not None or len(x1.shape) != 2:
        raise NotImplementedError("legacy arguments or other ranks")
    eps = 1e-12
    prod = ops.sum(ops.mul(x1, x2), (1,))
    mag = ops.sqrt(ops.mul(ops.add(ops.sum(ops.mul(x1, x1), (1,)), eps),
                           ops.add(ops.sum(ops.mul(x2, x2), (1,)), eps)))
    cos = ops.div(prod, mag)
    loss = ops.where(ops.eq(target, 1), ops.sub(1.0, cos),
                     ops.where(ops.eq(target, -1), ops.relu(ops.sub(cos, margin)), 0.0))
    return _reduce(loss, reduction)

# =======================================================================================
# Normalisation layers
# =======================================================================================

def _normalize(x, dims, eps):
    mu = ops.mean(x, dims, keepdim=True)
    centered = ops.sub(x, mu)
    v = ops.mean(ops.mul(centered, centered), dims, keepdim=True)
    return centered, mu, ops.rsqrt(ops.add(v, eps))


@register_decomposition(F.group_norm)
def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    x = _floating_only(x)
    n, c = x.shape[0], x.shape[1]
    rest = tuple(x.shape[2:])
    grouped = ops.reshape(x, (n, num_groups, -1))
    centered, _, rstd = _normalize(grouped, (2,), eps)
    out = ops.reshape(ops.mul(centered, rstd), (n, c) + rest)
    shape = (c,) + (1,) * len(rest)
    if weight is not None:
        out = ops.mul(out, ops.reshape(weight, shape))
    if bias is not None:
        out = ops.add(out, ops.reshape(bias, shape))
    return _cast(out, x.dtype)  # a bfloat16 x with float32 parameters stays bfloat16


@register_decomposition(F.rms_norm)
def rms_norm(x, normalized_shape, weight=None, eps=None):
    x = _floating_only(x)
    dims = tuple(range(len(x.shape) - len(tuple(normalized_shape)), len(x.shape)))
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    out = ops.mul(x, ops.rsqrt(ops.add(ops.mean(ops.mul(x, x), dims, keepdim=True), eps)))
    return out if weight is None else ops.mul(out, weight)


def instance_norm_functional(x, running_mean=None, running_var=None, weight=None, bias=None,
                             use_input_stats=True, momentum=0.1, eps=1e-5):
    """``F.instance_norm`` without mutation: ``(out, new_running_mean, new_running_var)``.

    With running statistics and ``use_input_stats``, PyTorch folds the batch into the
    channels, runs batch norm (updating a copy of the statistics per instance) and averages
    the copies back: the new running mean is ``(1 - momentum) * mean + momentum * (the
    instance means averaged over the batch)``, the variance likewise with each instance's
    unbiased variance. Functionalization (``functionalize.py``) rewrites such a call into
    this one and writes the statistics back, as for ``F.batch_norm``. As a torch function
    it is also the eager reference."""
    if isinstance(x, torch.Tensor):  # eager: PyTorch on copies of the statistics
        rm = None if running_mean is None else running_mean.clone()
        rv = None if running_var is None else running_var.clone()
        out = F.instance_norm(x, rm, rv, weight, bias, use_input_stats, momentum, eps)
        return out, rm, rv
    return _instance_norm(x, running_mean, running_var, weight, bias, use_input_stats,
                          momentum, eps)


def _instance_norm(x, running_mean, running_var, weight, bias, use_input_stats, momentum,
                   eps):
    x = _floating_only(x)
    if len(x.shape) < 3 or 0 in tuple(x.shape):
        raise NotImplementedError("an unbatched or empty input")
    spatial = tuple(range(2, len(x.shape)))
    shape = (x.shape[1],) + (1,) * (len(x.shape) - 2)
    new_mean, new_var = running_mean, running_var
    if use_input_stats:
        centered, mu, rstd = _normalize(x, spatial, eps)
        out = ops.mul(centered, rstd)
        if running_mean is not None:
            n = math.prod(x.shape[d] for d in spatial)
            means = ops.mean(ops.reshape(mu, tuple(x.shape[:2])), (0,))
            var = ops.mean(ops.mul(centered, centered), spatial)
            unbiased = ops.mean(ops.mul(var, n / max(n - 1, 1)), (0,))
            new_mean = ops.add(ops.mul(running_mean, 1 - momentum), ops.mul(means, momentum))
            new_var = ops.add(ops.mul(running_var, 1 - momentum), ops.mul(unbiased, momentum))
    else:
        if running_mean is None or running_var is None:
            raise NotImplementedError("use_input_stats=False without running statistics")
        out = ops.mul(ops.sub(x, ops.reshape(running_mean, shape)),
                      ops.reshape(ops.rsqrt(ops.add(running_var, eps)), shape))
    if weight is not None:
        out = ops.mul(out, ops.reshape(weight, shape))
    if bias is not None:
        out = ops.add(out, ops.reshape(bias, shape))
    return out, new_mean, new_var


@register_decomposition(instance_norm_functional)
def _instance_norm_functional_rule(x, running_mean=None, running_var=None, weight=None,
                                   bias=None, use_input_stats=True, momentum=0.1, eps=1e-5):
    return _instance_norm(x, running_mean, running_var, weight, bias, use_input_stats,
                          momentum, eps)


def batch_norm_with_update_functional(x, weight, bias, running_mean, running_var, momentum,
                                      eps):
    """``aten._batch_norm_with_update`` (what ``F.batch_norm`` in training becomes in
    PyTorch's own graphs) without mutation: its four results -- the output, the batch's
    mean and reciprocal standard deviation per channel, an empty reserve -- then the new
    running mean and variance, which functionalization writes back. As a torch function it
    is also the eager reference."""
    if isinstance(x, torch.Tensor):
        rm, rv = running_mean.clone(), running_var.clone()
        out = torch.ops.aten._batch_norm_with_update(x, weight, bias, rm, rv, momentum, eps)
        return (*out, rm, rv)
    x = _floating_only(x)
    if len(x.shape) < 2 or 0 in tuple(x.shape):
        raise NotImplementedError("an input without a channel dimension, or an empty one")
    out, new_mean, new_var = batch_norm_functional(x, running_mean, running_var, weight, bias,
                                                   True, momentum, eps)
    dims = (0,) + tuple(range(2, len(x.shape)))
    mean = ops.mean(x, dims)
    centered = ops.sub(x, ops.reshape(mean, (x.shape[1],) + (1,) * (len(x.shape) - 2)))
    rstd = ops.rsqrt(ops.add(ops.mean(ops.mul(centered, centered), dims), eps))
    reserve = ops.full((0,), 0, dtype=torch.uint8, device=x.device)
    return out, mean, rstd, reserve, new_mean, new_var


register_decomposition(batch_norm_with_update_functional)(batch_norm_with_update_functional)


def leading_results(results, n: int) -> tuple:
    """The first ``n`` results of a call that returns a tuple: how a functional rewrite that
    returns more (the new statistics) shows the original call's own results."""
    return tuple(results[:n])


register_decomposition(leading_results)(leading_results)


@register_decomposition(F.instance_norm)
def instance_norm(x, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    # Reached with statistics to update only if functionalization left them (it rewrites
    # those calls into instance_norm_functional): then they stay PyTorch's in-place call.
    if use_input_stats and running_mean is not None:
        raise NotImplementedError("instance_norm updating running statistics in place")
    return _instance_norm(x, running_mean, running_var, weight, bias, use_input_stats,
                          momentum, eps)[0]


@register_decomposition(torch.native_layer_norm)
def native_layer_norm(x, normalized_shape, weight, bias, eps):
    x = _floating_only(x)
    dims = tuple(range(len(x.shape) - len(tuple(normalized_shape)), len(x.shape)))
    centered, mu, rstd = _normalize(x, dims, eps)
    out = ops.mul(centered, rstd)
    if weight is not None:
        out = ops.mul(out, weight)
    if bias is not None:
        out = ops.add(out, bias)
    return _cast(out, x.dtype), mu, rstd  # mixed dtypes: out in x's, statistics in float32


@register_decomposition(torch.native_group_norm)
def native_group_norm(x, weight, bias, n, c, hw, group, eps):
    x = _floating_only(x)
    grouped = ops.reshape(x, (n, group, -1))
    centered, mu, rstd = _normalize(grouped, (2,), eps)
    out = ops.reshape(ops.mul(centered, rstd), tuple(x.shape))
    shape = (c,) + (1,) * (len(x.shape) - 2)
    if weight is not None:
        out = ops.mul(out, ops.reshape(weight, shape))
    if bias is not None:
        out = ops.add(out, ops.reshape(bias, shape))
    return (_cast(out, x.dtype), ops.reshape(mu, (n, group)),
            ops.reshape(rstd, (n, group)))

# =======================================================================================
# Pooling and padding: windows as strided slices, padding as blocks of full
# =======================================================================================

def _window_terms(x, n, kernel, stride, dilation):
    """Every offset of the window as a strided slice of ``x`` shaped like the output."""
    spatial = tuple(x.shape[-n:])
    out = tuple((spatial[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1
                for i in range(n))
    if any(o <= 0 for o in out):
        raise NotImplementedError("a window larger than the input")
    lead = len(x.shape) - n
    for offsets in itertools.product(*(range(k) for k in kernel)):
        v = x
        for i, k in enumerate(offsets):
            start = k * dilation[i]
            v = ops.slice(v, lead + i, start, start + (out[i] - 1) * stride[i] + 1, stride[i])
        yield v


def _pool_args(n, kernel_size, stride, padding, dilation, ceil_mode, any_window=False):
    """``(kernel, stride, dilation, padding)``, each a tuple of ``n``. A window of more than
    64 elements is refused (it would be that many terms) unless ``any_window``."""
    def tup(v):
        return (v,) * n if isinstance(v, int) else tuple(v)
    kernel = tup(kernel_size)
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) \
        else tup(stride)
    if len(kernel) != n or len(stride) != n or len(tup(padding)) != n:
        raise NotImplementedError("window sizes of another rank")
    if _prod(kernel) > 64 and not any_window:
        raise NotImplementedError("a large window")
    return kernel, stride, tup(dilation), tup(padding)


def _ceil_extra(x, n, kernel, stride, dilation, pad, ceil_mode):
    """Per spatial dimension, the padding past the end that ``ceil_mode`` adds: the last
    window may start inside the (left-padded) input and run past it; a window that would
    start in the right padding is dropped, as PyTorch's output-size rule says."""
    extras = []
    for k, size in enumerate(x.shape[-n:]):
        span = size + 2 * pad[k] - dilation[k] * (kernel[k] - 1) - 1
        out = -(-span // stride[k]) + 1 if ceil_mode else span // stride[k] + 1
        if ceil_mode and (out - 1) * stride[k] >= size + pad[k]:
            out -= 1
        extras.append(max(0, (out - 1) * stride[k] - span))
    return extras


def constant_pad(x, pads, value):
    """Pad the trailing dimensions of ``x`` (``pads`` = (before, after) per dimension, first
    dimension first) with ``value``: blocks of ``full`` concatenated on each side."""
    for i, (before, after) in enumerate(pads):
        d = len(x.shape) - len(pads) + i
        if before < 0 or after < 0:
            raise NotImplementedError("negative padding")
        parts = []
        for size in (before, after):
            shape = list(x.shape)
            shape[d] = size
            parts.append(ops.full(tuple(shape), value, dtype=x.dtype, device=x.device)
                         if size else None)
        pieces = [p for p in (parts[0], x, parts[1]) if p is not None]
        x = ops.cat(pieces, d) if len(pieces) > 1 else x
    return x


def _prod(xs):
    return math.prod(xs)


def _sum_terms(terms):
    terms = iter(terms)
    total = next(terms)
    for t in terms:
        total = ops.add(total, t)
    return total


def _avg_pool(n):
    def rule(x, kernel_size, stride=None, padding=0, ceil_mode=False,
             count_include_pad=True, divisor_override=None):
        x = _floating_only(x)
        kernel, stride, dilation, pad = _pool_args(n, kernel_size, stride, padding, 1,
                                                   ceil_mode, any_window=True)
        extra = _ceil_extra(x, n, kernel, stride, dilation, pad, ceil_mode)
        if _tiles(x, n, kernel, stride, pad, extra):
            # windows that tile the input (global pooling, squeeze-excite's mean): one
            # reduction over the split view, of any window size
            split, window = _tile_split(x, n, kernel)
            total = ops.sum(split, window)
            return ops.div(total, float(divisor_override or _prod(kernel)))
        if _prod(kernel) > 64:
            raise NotImplementedError("a large window")
        sides = [(p, p + e) for p, e in zip(pad, extra)]
        padded = constant_pad(x, sides, 0.0) if any(pad) or any(extra) else x
        total = _sum_terms(_window_terms(padded, n, kernel, stride, dilation))
        if divisor_override:
            return ops.div(total, float(divisor_override))
        if (count_include_pad or not any(pad)) and not any(extra):
            return ops.div(total, float(_prod(kernel)))
        # the divisor counts the window's elements inside the input (and, with
        # count_include_pad, its padding), never the ceil_mode extra past the end
        ones = ops.full(tuple(x.shape[-n:]), 1.0, dtype=x.dtype, device=x.device)
        counted = constant_pad(ones, [(p, p) for p in pad], 1.0 if count_include_pad
                               else 0.0) if any(pad) else ones
        counted = constant_pad(counted, [(0, e) for e in extra], 0.0) if any(extra) \
            else counted
        count = _sum_terms(_window_terms(counted, n, kernel, stride, dilation))
        return ops.div(total, count)
    return rule


def _max_pool(n):
    def rule(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
             return_indices=False):
        x = _floating_only(x)
        kernel, stride, dilation, pad = _pool_args(n, kernel_size, stride, padding, dilation,
                                                   ceil_mode)
        extra = _ceil_extra(x, n, kernel, stride, dilation, pad, ceil_mode)
        if not return_indices and set(dilation) == {1} and \
                _tiles(x, n, kernel, stride, pad, extra):
            terms = list(_tile_terms(x, n, kernel))
            return _pick_max(terms) if _needs_grad(x) else _window_max(terms)
        valid = None
        padded = x
        if any(pad) or any(extra):
            sides = [(p, p + e) for p, e in zip(pad, extra)]
            real = ops.full(tuple(x.shape[-n:]), True, dtype=torch.bool, device=x.device)
            valid = list(_window_terms(constant_pad(real, sides, False), n, kernel, stride,
                                       dilation))
            padded = constant_pad(x, sides, float("-inf"))
        terms = list(_window_terms(padded, n, kernel, stride, dilation))
        if not return_indices and not _needs_grad(x):
            # no backward: which element is picked does not matter, only its value (the
            # padding is -inf, never above an element of the input)
            return _window_max(terms)
        if not all(isinstance(v, int) for v in x.shape):
            if return_indices:
                raise NotImplementedError("return_indices=True with a symbolic size")
            return _pick_max(terms, valid)
        index = _picked_positions(x, terms, valid, kernel, stride, dilation, pad)
        values = _gather_in_planes(x, index, n)
        return (values, index) if return_indices else values
    return rule


def _needs_grad(x) -> bool:
    """Whether a gradient may flow back to ``x`` (a tensor, or a value of a graph)."""
    return x.requires_grad if isinstance(x, torch.Tensor) else x.meta.requires_grad


def _picked_positions(x, terms, valid, kernel, stride, dilation, pad):
    """PyTorch's max pooling indices: per window, the flat position in the input plane of
    the element it picks (:func:`_window_scan`). The scan carries the picked element's
    offset from the window's first position, a constant per element: term ``i`` (offsets
    ``k``) sits at ``o * stride - pad + k * dilation`` along each dimension ``o`` counts."""
    n = len(kernel)
    lead, spatial = len(x.shape) - n, tuple(x.shape[-n:])
    row = [math.prod(spatial[d + 1:]) for d in range(n)]     # a step along dimension d
    offsets = [sum(k * dilation[d] * row[d] for d, k in enumerate(ks))
               for ks in itertools.product(*(range(k) for k in kernel))]
    _, picked = _window_scan(terms, valid, offsets)
    start = None
    for d in range(n):
        at = ops.mul(ops.sub(ops.mul(positions(terms[0], lead + d), stride[d]), pad[d]), row[d])
        start = at if start is None else ops.add(start, at)
    return ops.expand(ops.add(start, picked), tuple(terms[0].shape))


def _gather_in_planes(x, index, n):
    """``x``'s elements at ``index``, flat positions within each plane of ``x``'s last ``n``
    dimensions: a gather, so the gradient is a scatter-add to those positions (PyTorch's
    max pooling backward), not a sum over every window an element could be in."""
    lead, out = tuple(x.shape[:-n]), tuple(index.shape[-n:])
    picked = DECOMPOSITIONS[torch.gather](
        ops.reshape(x, lead + (math.prod(x.shape[-n:]),)), len(lead),
        ops.reshape(index, lead + (math.prod(out),)))
    return ops.reshape(picked, lead + out)


def _pick_max(terms, valid=None):
    """The window maximum, from the window's elements as tensors shaped like the output: the
    value :func:`_window_scan` picks, a chain of ``where``, so the gradient goes to the
    element PyTorch's max pooling picks. ``valid`` marks, per element, the windows where it
    is input and not padding."""
    return _window_scan(terms, valid)[0]


def _tiles(x, n, kernel, stride, pad, extra) -> bool:
    """Whether the windows tile the input: stride = kernel, no padding, no ceil_mode extra,
    and sizes known (a symbolic length keeps the strided slices: splitting it would ask
    whether the windows cover it, ``t % 4 == 0``, and guard on the answer)."""
    return stride == kernel and not any(pad) and not any(extra) and \
        all(isinstance(s, int) for s in x.shape[-n:])


def _tile_split(x, n, kernel):
    """Windows that tile the input as a view: each spatial dim ``D`` splits into
    ``(D // k, k)`` (the rows and columns no window reaches cut first). Returns the view and
    its ``k`` dims."""
    lead, spatial = tuple(x.shape[:-n]), tuple(x.shape[-n:])
    out = tuple(s // k for s, k in zip(spatial, kernel))
    for i, (o, k) in enumerate(zip(out, kernel)):
        if o * k != spatial[i]:
            x = ops.slice(x, len(lead) + i, 0, o * k, 1)
    split = ops.reshape(x, lead + tuple(v for o, k in zip(out, kernel) for v in (o, k)))
    return split, tuple(len(lead) + 2 * i + 1 for i in range(n))


def _tile_terms(x, n, kernel):
    """The elements of windows that tile the input (AlexNet's and VGG's ``2x2, stride 2``
    max pooling), each shaped like the output: a slice of width 1 of every ``k`` dim of
    :func:`_tile_split`'s view. Its gradient, a ``slice_scatter``, then writes a constant
    position in the split view (``k == i``), where a strided slice's gradient writes every
    other element and must divide its index to find the source (a gather, which g++ does
    not vectorise on every CPU)."""
    split, window = _tile_split(x, n, kernel)
    out = tuple(x.shape[-n + i] // k for i, k in enumerate(kernel))
    for offsets in itertools.product(*(range(k) for k in kernel)):
        v = split
        for d, k in zip(window, offsets):
            v = ops.slice(v, d, k, k + 1, 1)
        yield ops.reshape(v, tuple(x.shape[:-n]) + out)


def _window_max(terms):
    """The window's maximum, NaN if any element is (``maximum`` propagates NaN, as max
    pooling does)."""
    best = terms[0]
    for t in terms[1:]:
        best = ops.maximum(best, t)
    return best


def _window_scan(terms, valid=None, labels=None):
    """The element of each window max pooling picks -- where its gradient goes -- and its
    label (``labels[i]`` for term ``i``), by one scan of the window in order, as PyTorch's
    ``cpu_max_pool`` does: the first (valid) element, then each later one that is larger or
    NaN (``if ((val > maxval) || std::isnan(val))``), so the *first* maximum or the *last*
    NaN. The scan is a chain of ``where``: one loop, each element read once.
    (``maximum``'s own gradient would split a tie -- equal values, as in an image of whole
    numbers or a clamp's output -- between them.) ``valid`` marks, per element, the windows
    where it is input and not padding."""
    best, label, seen = terms[0], labels[0] if labels else None, valid[0] if valid else None
    for i, t in enumerate(terms[1:], 1):
        take = ops.logical_or(ops.gt(t, best), ops.ne(t, t))
        if valid is not None:
            first = ops.logical_and(valid[i], ops.eq(seen, False))
            take = ops.logical_or(first, ops.logical_and(valid[i], take))
            seen = ops.logical_or(seen, valid[i])
        best = ops.where(take, t, best)
        if labels:
            label = ops.where(take, labels[i], label)
    return best, label


register_decomposition(F.avg_pool1d)(_avg_pool(1))


register_decomposition(F.avg_pool2d)(_avg_pool(2))


register_decomposition(F.avg_pool3d)(_avg_pool(3))


register_decomposition(F.max_pool1d)(_max_pool(1))


register_decomposition(F.max_pool2d)(_max_pool(2))


register_decomposition(F.max_pool3d)(_max_pool(3))


for _n in (1, 2, 3):  # what F.max_pool<n>d(..., return_indices=True) dispatches to
    register_decomposition(getattr(F, f"max_pool{_n}d_with_indices"))(
        (lambda n: lambda x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
         return_indices=True: _max_pool(n)(x, kernel_size, stride, padding, dilation,
                                           ceil_mode, True))(_n))


def _adaptive_windows(x, out, largest):
    """Adaptive pooling whose windows differ in size: one dimension at a time (the windows
    are boxes), output ``i`` reduces the inputs ``j`` with ``floor(i*n/o) <= j <
    ceil((i+1)*n/o)``, a mask computed from ``iota`` -- one masked reduction per dimension."""
    for k, o in enumerate(out):
        d = len(x.shape) - len(out) + k
        n = x.shape[d]
        xu = ops.unsqueeze(x, d)                   # [..., 1 (i), n (j), ...]
        i = ops.reshape(ops.iota(o, device=x.device),
                        (1,) * d + (o, 1) + (1,) * (len(x.shape) - d - 1))
        j = positions(xu, d + 1)
        inside = ops.logical_and(ops.lt(ops.mul(i, n), ops.mul(ops.add(j, 1), o)),
                                 ops.gt(ops.mul(ops.add(i, 1), n), ops.mul(j, o)))
        if largest:
            x = ops.amax(ops.where(inside, xu, float("-inf")), (d + 1,))
        else:
            total = ops.sum(ops.where(inside, xu, 0.0), (d + 1,))
            count = ops.sum(ops.convert_element_type(inside, x.dtype), (d + 1,))
            x = ops.div(total, count)
    return x


def _adaptive_max_with_indices(x, out):
    """Adaptive max pooling and PyTorch's indices (the flat position in the input plane):
    every output masks the input positions in its window (a box, from ``iota``), the max is
    a masked ``amax``, the index the first position holding it -- or the last NaN, which
    wins as in PyTorch's ``val > maxval || isnan(val)`` -- and the values are a gather at
    the indices, so the gradient goes where PyTorch sends it."""
    x = _floating_only(x)
    n = len(out)
    lead, spatial = tuple(x.shape[:-n]), tuple(x.shape[-n:])
    planes = math.prod(spatial)
    if math.prod(out) * planes > config.adaptive_indices_limit or 0 in tuple(x.shape):
        raise NotImplementedError("return_indices=True on a large or empty input")
    rank = len(lead) + 2 * n
    xe = ops.reshape(x, lead + (1,) * n + spatial)

    def along(length, axis):
        shape = [1] * rank
        shape[axis] = length
        return ops.reshape(ops.iota(length, dtype=torch.int64, device=x.device), tuple(shape))
    mask = flat = None
    for k, (o, size) in enumerate(zip(out, spatial)):
        i, j = along(o, len(lead) + k), along(size, len(lead) + n + k)
        inside = ops.logical_and(ops.lt(ops.mul(i, size), ops.mul(ops.add(j, 1), o)),
                                 ops.gt(ops.mul(ops.add(i, 1), size), ops.mul(j, o)))
        mask = inside if mask is None else ops.logical_and(mask, inside)
        term = ops.mul(j, math.prod(spatial[k + 1:]))
        flat = term if flat is None else ops.add(flat, term)
    window = tuple(range(len(lead) + n, rank))
    best = ops.amax(ops.where(mask, xe, float("-inf")), window, keepdim=True)
    hit = ops.logical_and(mask, ops.eq(xe, best))
    first = ops.neg(ops.amax(ops.neg(ops.where(hit, flat, planes)), window))
    last_nan = ops.amax(ops.where(ops.logical_and(mask, ops.ne(xe, xe)), flat, -1), window)
    index = ops.where(ops.ge(last_nan, 0), last_nan, first)
    return _gather_in_planes(x, index, n), index


def _adaptive(n, pool):
    def rule(x, output_size, *rest):
        out = (output_size,) * n if isinstance(output_size, int) else tuple(output_size)
        spatial = tuple(x.shape[-n:])
        out = tuple(s if o is None else o for o, s in zip(out, spatial))
        if any(o == 0 or s == 0 for o, s in zip(out, spatial)):
            raise NotImplementedError("an empty input or output")
        if rest and any(rest):
            if pool is not _max_pool:
                raise NotImplementedError("unexpected arguments")
            return _adaptive_max_with_indices(x, out)
        if any(s % o for o, s in zip(out, spatial)):
            if 0 in tuple(x.shape):  # (an empty batch: a generated kernel over no elements)
                raise NotImplementedError("an empty tensor")
            return _adaptive_windows(_floating_only(x), out, pool is _max_pool)
        kernel = tuple(s // o for o, s in zip(out, spatial))
        return pool(n)(x, kernel, kernel)
    return rule


for _n, _avg, _max in ((1, F.adaptive_avg_pool1d, F.adaptive_max_pool1d),
                       (2, F.adaptive_avg_pool2d, F.adaptive_max_pool2d),
                       (3, F.adaptive_avg_pool3d, F.adaptive_max_pool3d)):
    register_decomposition(_avg)(_adaptive(_n, _avg_pool))
    register_decomposition(_max)(_adaptive(_n, _max_pool))
    # what F.adaptive_max_pool<n>d(..., return_indices=True) dispatches to
    register_decomposition(getattr(F, f"adaptive_max_pool{_n}d_with_indices"))(
        (lambda n: lambda x, output_size, return_indices=True: _adaptive(n, _max_pool)(
            x, output_size, True))(_n))


def _edge_pad(a, d, before, after, mode):
    """Pad (or, negative, crop) dimension ``d`` from the tensor's own values: ``cat`` of
    slices -- the edge repeated (replicate), mirrored (reflect) or wrapped (circular)."""
    n = a.shape[d]
    if max(before, after) > 64 or (mode == "reflect" and max(before, after) >= n) \
            or (mode == "circular" and max(before, after) > n):
        raise NotImplementedError(f"{mode} padding wider than the rule covers")

    def at(i):
        return ops.slice(a, d, i, i + 1, 1)

    def side(p, left):
        if mode == "replicate":
            return [at(0 if left else n - 1)] * p
        if mode == "circular":
            return [ops.slice(a, d, n - p, n, 1) if left else ops.slice(a, d, 0, p, 1)]
        return [at(p - k) for k in range(p)] if left else [at(n - 2 - k) for k in range(p)]
    middle = ops.slice(a, d, max(-before, 0), n - max(-after, 0), 1)
    parts = (side(before, True) if before > 0 else []) + [middle] + \
        (side(after, False) if after > 0 else [])
    return ops.cat(parts, d) if len(parts) > 1 else middle


_EDGE_PADS = ("replicate", "reflect", "circular")


@register_decomposition(F.pad, *_both("constant_pad_nd"))
def pad(a, pad, mode="constant", value=None):
    if mode not in ("constant", *_EDGE_PADS) or len(pad) % 2 \
            or len(pad) // 2 > len(a.shape):
        raise NotImplementedError(f"{mode} padding")
    pairs = [(pad[2 * k], pad[2 * k + 1]) for k in range(len(pad) // 2)][::-1]
    if mode != "constant":
        first = len(a.shape) - len(pairs)
        for k, (before, after) in enumerate(pairs):
            a = _edge_pad(a, first + k, before, after, mode)
        return a
    if any(p < 0 for pair in pairs for p in pair):
        raise NotImplementedError("negative padding (cropping)")
    return constant_pad(a, pairs, 0.0 if value is None else value)


# =======================================================================================
# Resampling: F.interpolate one spatial dimension at a time. Each output position reads
# input positions computed from its own index (``iota``) -- as PyTorch's upsample kernels
# compute them, in the input's float type -- through ``index_select``, which the inductor
# generates as an indirect load; linear and cubic modes weight two or four such reads.
# =======================================================================================

_CUBIC_A = -0.75   # PyTorch's (and OpenCV's) bicubic convolution constant


def _source_positions(x, d, out, mode, align_corners, scale_factor):
    """The float source position of each output index along ``d`` (PyTorch's
    ``area_pixel_compute_source_index``; nearest modes: the floor taken later)."""
    n = x.shape[d]
    if align_corners:
        scale = (n - 1) / (out - 1) if out > 1 else 0.0
    else:
        scale = 1.0 / scale_factor if scale_factor else n / out
    dst = ops.convert_element_type(ops.iota(out, dtype=torch.int64, device=x.device), x.dtype)
    if mode == "nearest":
        return ops.mul(dst, scale)
    if mode == "nearest-exact":
        return ops.mul(ops.add(dst, 0.5), scale)
    if align_corners:
        return ops.mul(dst, scale)
    src = ops.sub(ops.mul(ops.add(dst, 0.5), scale), 0.5)
    return src if mode == "cubic" else ops.maximum(src, 0.0)


def _along(values, x, d):
    """A 1-d tensor of one value per output position, shaped to broadcast along ``d``."""
    shape = [1] * len(x.shape)
    shape[d] = values.shape[0]
    return ops.reshape(values, tuple(shape))


def _take(x, d, index, n):
    """``x`` read along ``d`` at ``index`` clamped into ``[0, n)``."""
    index = ops.minimum(ops.maximum(index, 0), n - 1)
    return ops.index_select(x, d, index)


def _cubic_weights(t):
    a = _CUBIC_A

    def near(s):    # |s| <= 1
        return ops.add(ops.mul(ops.mul(ops.sub(ops.mul(s, a + 2), a + 3), s), s), 1.0)

    def far(s):     # 1 < |s| < 2
        return ops.sub(ops.mul(ops.add(ops.mul(ops.sub(ops.mul(s, a), 5 * a), s), 8 * a), s),
                       4 * a)
    rest = ops.sub(1.0, t)
    return [far(ops.add(t, 1.0)), near(t), near(rest), far(ops.add(rest, 1.0))]


def _resample(x, d, out, mode, align_corners, scale_factor):
    n = x.shape[d]
    if mode in ("nearest", "nearest-exact"):
        if out == n:
            return x
        src = ops.convert_element_type(
            ops.floor(_source_positions(x, d, out, mode, False, scale_factor)), torch.int64)
        return _take(x, d, src, n)
    real = _source_positions(x, d, out, mode, align_corners, scale_factor)
    low = ops.convert_element_type(ops.floor(real), torch.int64)
    t = ops.sub(real, ops.convert_element_type(low, x.dtype))
    if mode == "linear":
        if out == n:
            return x
        w1 = _along(ops.minimum(ops.maximum(t, 0.0), 1.0), x, d)
        w0 = ops.sub(1.0, w1)
        return ops.add(ops.mul(w0, _take(x, d, low, n)),
                       ops.mul(w1, _take(x, d, ops.add(low, 1), n)))
    total = None
    for k, w in enumerate(_cubic_weights(t)):
        term = ops.mul(_along(w, x, d), _take(x, d, ops.add(low, k - 1), n))
        total = term if total is None else ops.add(total, term)
    return total


_LINEAR_MODES = {"linear": 1, "bilinear": 2, "trilinear": 3, "bicubic": 2}


@register_decomposition(F.interpolate)
def interpolate(x, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    spatial = len(x.shape) - 2
    if mode == "area" and size is not None and 1 <= spatial <= 3:   # adaptive average
        pool = (F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d)
        return DECOMPOSITIONS[pool[spatial - 1]](x, size)
    if antialias or spatial < 1 or not _is_float(x) or 0 in tuple(x.shape) \
            or mode not in ("nearest", "nearest-exact", *_LINEAR_MODES) \
            or (mode in _LINEAR_MODES and _LINEAR_MODES[mode] != spatial):
        raise NotImplementedError(f"interpolate mode {mode!r} here (area, antialias, "
                                  "integer or empty inputs run in PyTorch)")
    if (size is None) == (scale_factor is None):
        raise NotImplementedError("exactly one of size and scale_factor")
    scales = [None] * spatial
    if size is not None:
        sizes = list(size) if isinstance(size, (list, tuple)) else [size] * spatial
    else:
        factors = list(scale_factor) if isinstance(scale_factor, (list, tuple)) \
            else [scale_factor] * spatial
        sizes = [math.floor(float(x.shape[2 + k]) * factors[k]) for k in range(spatial)]
        if not recompute_scale_factor:
            scales = [float(f) for f in factors]
    if len(sizes) != spatial:
        raise NotImplementedError("a size per spatial dimension")
    kind = mode if mode.startswith("nearest") else \
        ("cubic" if mode == "bicubic" else "linear")
    for k in range(spatial):
        x = _resample(x, 2 + k, int(sizes[k]), kind, bool(align_corners), scales[k])
    return x


@register_decomposition(F.upsample_nearest)
def upsample_nearest(x, size=None, scale_factor=None):
    return interpolate(x, size, scale_factor, mode="nearest")


@register_decomposition(F.upsample_bilinear)
def upsample_bilinear(x, size=None, scale_factor=None):
    return interpolate(x, size, scale_factor, mode="bilinear", align_corners=True)


@register_decomposition(F.upsample)
def upsample(x, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(x, size, scale_factor, mode, align_corners)


# =======================================================================================
# ATen's own pieces of softmax and dropout (what a traced backward or a decomposed
# ``torch.ops.aten`` call leaves in a graph), local response normalisation, bilinear
# =======================================================================================

@register_decomposition(torch.ops.aten._softmax_backward_data,
                        torch.ops.aten._softmax_backward_data.default)
def softmax_backward_data(grad_output, output, dim, input_dtype):
    """The gradient of ``y = softmax(x)``: ``y * (g - sum(g * y))`` along ``dim``."""
    d = normalize_dim(dim, len(output.shape))
    gy = ops.mul(grad_output, output)
    out = ops.sub(gy, ops.mul(output, ops.sum(gy, (d,), keepdim=True)))
    return _cast(out, input_dtype)


@register_decomposition(torch.ops.aten._safe_softmax.default)
def _safe_softmax(a, dim, dtype=None):
    if dtype is not None:
        a = _cast(a, dtype)
    a = _floating_only(a)
    if len(a.shape) == 0:
        raise NotImplementedError("a 0-d tensor")
    return safe_softmax(a, dim)


@register_decomposition(torch.ops.aten.native_dropout_backward.default)
def native_dropout_backward(grad_output, mask, scale):
    return ops.mul(ops.mul(grad_output, ops.convert_element_type(mask, grad_output.dtype)),
                   scale)


@register_decomposition(F.local_response_norm)
def local_response_norm(x, size, alpha=1e-4, beta=0.75, k=1.0):
    """``x / (k + alpha * mean of x^2 over `size` neighbouring channels)^beta``; the window
    is zero-padded (size // 2 before, (size - 1) // 2 after), as PyTorch's avg_pool is."""
    x = _floating_only(x)
    if len(x.shape) < 3 or 0 in tuple(x.shape):
        raise NotImplementedError("fewer than 3 dimensions, or empty")
    c = x.shape[1]
    sq = ops.mul(x, x)
    trailing = len(x.shape) - 2
    padded = constant_pad(sq, [(size // 2, (size - 1) // 2)] + [(0, 0)] * trailing, 0.0)
    window = _sum_terms([ops.slice(padded, 1, s, s + c, 1) for s in range(size)])
    div = ops.add(ops.mul(ops.div(window, float(size)), alpha), k)
    return ops.div(x, ops.pow(div, beta))


@register_decomposition(F.bilinear)
def bilinear(x1, x2, weight, bias=None):
    """``y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o]``: one matmul of ``x1``
    with the weight laid out as ``(i, o * j)``, then a multiply-and-sum with ``x2``."""
    if not all(_is_float(t) for t in (x1, x2, weight)) or len(weight.shape) != 3 \
            or len(x1.shape) < 1 or tuple(x1.shape[:-1]) != tuple(x2.shape[:-1]):
        raise NotImplementedError("bilinear with these shapes or dtypes")
    o, i, j = weight.shape
    lead = tuple(x1.shape[:-1])
    n = math.prod(lead)
    w = ops.reshape(ops.permute(weight, (1, 0, 2)), (i, o * j))
    t = ops.reshape(ops.matmul(ops.reshape(x1, (n, i)), w), (n, o, j))
    y = ops.sum(ops.mul(t, ops.reshape(x2, (n, 1, j))), (2,))
    if bias is not None:
        y = ops.add(y, bias)
    return ops.reshape(y, lead + (o,))


@register_decomposition(F.unfold)
def unfold(x, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: every window offset is a strided slice of the zero-padded input (as in
    pooling), stacked after the channels: ``(N, C * kh * kw, L)``."""
    x = _floating_only(x)
    if len(x.shape) not in (3, 4) or 0 in tuple(x.shape):
        raise NotImplementedError("not a (batched) 2-d image")
    batched = len(x.shape) == 4
    if not batched:
        x = ops.unsqueeze(x, 0)
    kernel, stride, dilation, pad = _pool_args(2, kernel_size, stride, padding, dilation,
                                               False)
    x = constant_pad(x, [(p, p) for p in pad], 0.0)
    terms = [ops.unsqueeze(t, 2) for t in _window_terms(x, 2, kernel, stride, dilation)]
    cols = ops.cat(terms, 2)                                   # (N, C, kh*kw, oh, ow)
    n, c, k, oh, ow = cols.shape
    out = ops.reshape(cols, (n, c * k, oh * ow))
    return out if batched else ops.squeeze(out, (0,))


@register_decomposition("method:unfold", torch.unfold_copy)
def unfold_windows(a, dimension, size, step):
    """``Tensor.unfold``: windows of ``size`` every ``step`` along ``dimension``, as a new
    last dimension -- one gather (``index_select``) at positions computed from ``iota``."""
    if not _is_float(a) or len(a.shape) == 0 or step < 1:
        raise NotImplementedError("a 0-d or non-float tensor")
    d = normalize_dim(dimension, len(a.shape))
    count = (a.shape[d] - size) // step + 1
    if count <= 0 or size <= 0:
        raise NotImplementedError("no whole window")
    starts = ops.reshape(ops.mul(ops.iota(count, dtype=torch.int64, device=a.device), step),
                         (count, 1))
    offsets = ops.reshape(ops.iota(size, dtype=torch.int64, device=a.device), (1, size))
    index = ops.reshape(ops.add(starts, offsets), (count * size,))
    picked = ops.index_select(a, d, index)
    shape = tuple(a.shape[:d]) + (count, size) + tuple(a.shape[d + 1:])
    windows = ops.reshape(picked, shape)
    order = tuple(i for i in range(len(shape)) if i != d + 1) + (d + 1,)
    return ops.permute(windows, order)


# =======================================================================================
# Margin losses over classes: every class compared with the target's (a class mask)
# =======================================================================================

def _as_batch(x, target):
    """(N, C) scores and N targets from a batch, one sample (C,) or a 0-d score."""
    if len(x.shape) > 2 or target.dtype != torch.int64 or 0 in tuple(x.shape):
        raise NotImplementedError("more than 2 dimensions, an empty input or float targets")
    unbatched = len(x.shape) < 2
    c = x.shape[-1] if x.shape else 1
    return ops.reshape(x, (-1, c)), unbatched, c


def _positive_part(z):
    """max(z, 0) with gradient only where z > 0 (PyTorch's ``if (z > 0)``; ``maximum``
    would split a tie)."""
    return ops.where(ops.gt(z, 0), z, 0.0)


def _margin_reduce(loss, unbatched, reduction):
    if unbatched and reduction == "none":
        return ops.reshape(loss, ())
    return _reduce(loss, reduction)


@register_decomposition(F.multi_margin_loss)
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None,  # noqa: A002
                      size_average=None, reduce=None, reduction="mean"):
    """``sum_{i != y} max(0, margin - x[y] + x[i])^p / C`` (times ``weight[y]``)."""
    if size_average is not None or reduce is not None or p not in (1, 2):
        raise NotImplementedError("legacy arguments or p other than 1 and 2")
    x, unbatched, c = _as_batch(_floating_only(input), target)
    mask = class_mask(x, ops.reshape(target, (-1,)))
    picked = ops.sum(ops.where(mask, x, 0.0), (1,), keepdim=True)
    h = _positive_part(ops.add(ops.sub(margin, picked), x))
    if p == 2:
        h = ops.mul(h, h)
    if weight is not None:
        h = ops.mul(h, ops.sum(ops.where(mask, ops.reshape(weight, (1, c)), 0.0), (1,),
                               keepdim=True))
    loss = ops.div(ops.sum(ops.where(mask, 0.0, h), (1,)), float(c))
    return _margin_reduce(loss, unbatched, reduction)


@register_decomposition(F.multilabel_margin_loss)
def multilabel_margin_loss(input, target, size_average=None, reduce=None,  # noqa: A002
                           reduction="mean"):
    """``sum_{j in targets} sum_{i not in targets} max(0, 1 - (x[j] - x[i])) / C``; the
    targets are ``target``'s entries before its first negative one (each counted as often
    as it is listed, as PyTorch's loop does)."""
    if size_average is not None or reduce is not None:
        raise NotImplementedError("legacy arguments")
    x, unbatched, c = _as_batch(_floating_only(input), target)
    if c > 1024 or tuple(target.shape) != tuple(input.shape):
        raise NotImplementedError("more than 1024 classes, or a target of another shape")
    t = ops.reshape(target, (-1, c))
    k = positions(t, 1)
    first_negative = ops.neg(ops.amax(ops.neg(ops.where(ops.lt(t, 0), k, c)), (1,),
                                      keepdim=True))
    listed = ops.logical_and(ops.unsqueeze(ops.lt(k, first_negative), 2),   # (N, k, j)
                             ops.eq(ops.unsqueeze(t, 2), ops.unsqueeze(positions(t, 1), 1)))
    count = ops.sum(ops.convert_element_type(listed, x.dtype), (1,))   # (N, C): per class
    other = ops.convert_element_type(ops.eq(count, 0), x.dtype)
    pair = _positive_part(ops.add(ops.sub(1.0, ops.unsqueeze(x, 2)), ops.unsqueeze(x, 1)))
    weights = ops.mul(ops.unsqueeze(count, 2), ops.unsqueeze(other, 1))   # (N, j, i)
    loss = ops.div(ops.sum(ops.mul(pair, weights), (1, 2)), float(c))
    return _margin_reduce(loss, unbatched, reduction)


@register_decomposition(torch._chunk_cat)
def chunk_cat(tensors, dim, num_chunks):
    """Each tensor zero-padded along ``dim`` to a multiple of ``num_chunks``, viewed as
    ``(..., num_chunks, -1)`` and concatenated along the last (torch/_decomp's rule)."""
    pieces = []
    for t in tensors:
        d = normalize_dim(dim, len(t.shape))
        size = t.shape[d]
        extra = -(-size // num_chunks) * num_chunks - size
        if extra:
            t = constant_pad(t, [(0, extra)] + [(0, 0)] * (len(t.shape) - d - 1), 0.0)
        pieces.append(ops.reshape(t, tuple(t.shape[:d]) + (num_chunks, -1)))
    return ops.cat(pieces, normalize_dim(dim, len(tensors[0].shape)) + 1)


@register_decomposition(torch.native_batch_norm, torch._native_batch_norm_legit)
def native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """ATen's batch norm, ``(out, save_mean, save_invstd)``: in evaluation (the running
    statistics normalise; nothing is saved: empty tensors, as PyTorch returns) or in training
    without running statistics (the batch's are saved). Training *with* running statistics
    updates them in place, which only ``F.batch_norm`` is functionalized for: that call stays
    PyTorch's."""
    x = _floating_only(x)
    if len(x.shape) < 2 or 0 in tuple(x.shape):
        raise NotImplementedError("fewer than 2 dimensions, or empty")
    if training and (running_mean is not None or running_var is not None):
        raise NotImplementedError("training with running statistics (an in-place update)")
    if not training and (running_mean is None or running_var is None):
        raise NotImplementedError("evaluation without running statistics")
    out = DECOMPOSITIONS[F.batch_norm](x, running_mean, running_var, weight, bias, training,
                                       momentum, eps)
    if not training:
        empty = ops.full((0,), 0.0, dtype=x.dtype, device=x.device)
        return out, empty, empty
    dims = (0,) + tuple(range(2, len(x.shape)))
    mean = ops.mean(x, dims)
    centered = ops.sub(x, ops.reshape(mean, (x.shape[1],) + (1,) * (len(x.shape) - 2)))
    invstd = ops.rsqrt(ops.add(ops.mean(ops.mul(centered, centered), dims), eps))
    return out, mean, invstd


def _spatial(v, k: int) -> tuple[int, ...]:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * k


def max_unpool(x, indices, k: int, kernel_size, stride, padding, output_size):
    """The inverse of max pooling: a zero image with every pooled value written back at
    its recorded position (flat within its plane). Positions may repeat (overlapping
    windows record the same maximum twice); PyTorch writes in order, so the last write
    wins, and its backward reads ``grad[index]`` for every write. Both come from one dense
    comparison of every output position with every recorded index (per plane): ``S``, the
    sum of the values written to a position, carries the gradient (each write gets its
    position's), and the value is the last writer's: ``out = S + detach(last - S)``. A
    scatter-add of ones counts the writes (and rejects an index outside the plane, as
    PyTorch does)."""
    x = _floating_only(x)
    if len(x.shape) != k + 2 or tuple(indices.shape) != tuple(x.shape) or 0 in tuple(x.shape):
        raise NotImplementedError("an unbatched or empty input")
    kernel, pad = _spatial(kernel_size, k), _spatial(padding, k)
    step = kernel if stride is None else _spatial(stride, k)
    if output_size is not None:
        sizes = tuple(int(v) for v in tuple(output_size)[-k:])
    else:
        sizes = tuple((i - 1) * s - 2 * p + kk
                      for i, s, p, kk in zip(x.shape[2:], step, pad, kernel))
    planes, m, n_out = x.shape[0] * x.shape[1], math.prod(x.shape[2:]), math.prod(sizes)
    if planes * m * n_out > config.dense_scatter_limit:
        raise NotImplementedError("a comparison too large (max_unpool compares densely)")
    values = ops.reshape(x, (planes, 1, m))
    index = ops.reshape(indices, (planes, 1, m))
    where_to = ops.eq(index, ops.reshape(ops.iota(n_out, dtype=torch.int64, device=x.device),
                                         (1, n_out, 1)))
    written = ops.sum(ops.where(where_to, values, 0.0), (2,))
    order = ops.reshape(ops.iota(m, dtype=torch.int64, device=x.device), (1, 1, m))
    last = ops.amax(ops.where(where_to, order, -1), (2,), keepdim=True)
    last_value = ops.sum(ops.where(ops.eq(order, last), values, 0.0), (2,))
    # the count of writes per position, from a scatter-add that rejects a bad index
    flat = ops.reshape(indices, (planes, m))
    valid = ops.logical_and(ops.ge(flat, 0), ops.lt(flat, n_out))
    plane = ops.reshape(ops.iota(planes, dtype=torch.int64, device=x.device), (planes, 1))
    offsets = ops.reshape(ops.where(valid, ops.add(flat, ops.mul(plane, n_out)), -1), (-1,))
    count = ops.index_add(ops.full((planes * n_out,), 0.0, dtype=x.dtype, device=x.device), 0,
                          offsets, ops.full((planes * m,), 1.0, dtype=x.dtype,
                                            device=x.device))
    out = ops.add(written, detached(ops.sub(last_value, written)))
    out = ops.where(ops.gt(ops.reshape(count, (planes, n_out)), 0.0), out, 0.0)
    return ops.reshape(out, tuple(x.shape[:2]) + sizes)


for _k, _fn in ((1, F.max_unpool1d), (2, F.max_unpool2d), (3, F.max_unpool3d)):
    register_decomposition(_fn)(
        (lambda k: lambda input, indices, kernel_size, stride=None, padding=0,
         output_size=None: max_unpool(input, indices, k, kernel_size, stride, padding,
                                      output_size))(_k))


@register_decomposition(F.embedding_bag)
def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,  # noqa: A002
                  scale_grad_by_freq=False, mode="mean", sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Embedding rows gathered (``index_select``, whose gradient is an ``index_add`` into the
    table) and reduced per bag: bag ``b`` holds the indices from ``offsets[b]`` up to the
    next offset (or the fixed rows of a 2-d ``input``). Membership is a dense mask, bag
    against position (``start <= j < end``, ``padding_idx`` left out), so the sum, mean or
    max is one reduction; an empty bag gives zeros, as PyTorch. ``per_sample_weights``
    scale the rows (``sum`` only, as PyTorch requires)."""
    weight = _floating_only(weight)
    if max_norm is not None or scale_grad_by_freq or sparse or mode not in (
            "sum", "mean", "max") or (per_sample_weights is not None and mode != "sum"):
        raise NotImplementedError("max_norm, scale_grad_by_freq, sparse or a weighted mean")
    if len(input.shape) == 2:
        if offsets is not None:
            raise NotImplementedError("offsets with a 2-d input")
        n_bags, length = input.shape
        flat = ops.reshape(input, (n_bags * length,))
        starts = ops.mul(ops.iota(n_bags, dtype=torch.int64, device=weight.device), length)
        ends = ops.add(starts, length)
    elif len(input.shape) == 1 and offsets is not None and len(offsets.shape) == 1:
        flat, n = input, input.shape[0]
        n_bags = offsets.shape[0] - 1 if include_last_offset else offsets.shape[0]
        starts = ops.slice(offsets, 0, 0, n_bags, 1)
        ends = ops.cat([ops.slice(offsets, 0, 1, offsets.shape[0], 1),
                        ops.full((1,), n, dtype=offsets.dtype, device=weight.device)], 0)
        ends = ops.slice(ends, 0, 0, n_bags, 1)
    else:
        raise NotImplementedError("a 1-d input without offsets")
    total = flat.shape[0]
    if 0 in (total, n_bags) or n_bags * total * weight.shape[1] > config.dense_scatter_limit:
        raise NotImplementedError("empty bags or a comparison too large")
    rows = ops.index_select(weight, 0, flat)
    if per_sample_weights is not None:
        rows = ops.mul(rows, ops.unsqueeze(ops.reshape(per_sample_weights, (total,)), 1))
    j = ops.reshape(ops.iota(total, dtype=torch.int64, device=weight.device), (1, total))
    member = ops.logical_and(ops.ge(j, ops.reshape(starts, (n_bags, 1))),
                             ops.lt(j, ops.reshape(ends, (n_bags, 1))))
    if padding_idx is not None:
        member = ops.logical_and(member, ops.ne(ops.reshape(flat, (1, total)),
                                                padding_idx % weight.shape[0]))
    member = ops.unsqueeze(member, 2)
    rows = ops.unsqueeze(rows, 0)
    count = ops.sum(ops.convert_element_type(member, weight.dtype), (1,))
    if mode == "max":
        out = ops.amax(ops.where(member, rows, -math.inf), (1,))
        return ops.where(ops.gt(count, 0.0), out, 0.0)
    out = ops.sum(ops.where(member, rows, 0.0), (1,))
    return out if mode == "sum" else ops.div(out, ops.maximum(count, 1.0))
