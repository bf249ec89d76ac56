"""Functionalization: a graph with in-place updates -> a pure graph plus copy-backs.

Later stages want *pure* graphs: every node makes a new value and nothing changes a value
already made, so nodes can be reordered, recomputed, fused or saved for backward freely.
User code mutates (``x.add_(1)``, ``y[0] = 3``, ``F.relu(h, inplace=True)``, BatchNorm's
running statistics), so this pass rewrites the graph:

* an in-place op becomes its out-of-place twin, and every later read of the mutated tensor
  reads the new value instead (``x.add_(1)`` -> ``x_1 = x.add(1)``; later ``x`` -> ``x_1``);
* ``x[idx] = v`` becomes ``setitem_functional(x, idx, v)``, a copy of ``x`` with the slice
  replaced (it decomposes to ``slice_scatter`` prims);
* a view of a mutated tensor is *regenerated* from the new value when it is read again (the
  view saw the mutation in eager mode, so it must here too); mutating a view writes the
  change back into its base through the view's inverse (``reshape`` back, inverse
  ``permute``, ``setitem_functional`` for slices). Views without an inverse (``expand``)
  are refused with an error that says so;
* if a graph *input* was mutated, its final value becomes an extra graph output and the
  runtime copies it into the caller's tensor after the graph ran -- the user still sees the
  mutation, the graph stays pure.

Two helpers prepare module graphs: :func:`inline_modules` turns ``call_module`` nodes of the
standard layers into functional calls (``F.linear(x, weight, bias)``, training-mode
``F.batch_norm`` plus the ``num_batches_tracked`` update), and :func:`lift_attributes` turns
``get_attr`` parameters and buffers into graph inputs, as AOTAutograd does.

Mirrors: torch/_subclasses/functional_tensor.py and torch/_functorch/_aot_autograd/
functional_utils.py (functionalization, input-mutation epilogue), and
torch/_functorch/aot_autograd.py's lifting of parameters to inputs.
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..errors import TutorcompileError
from ..fx import Graph, GraphModule, Node
from ..fx.node import map_arg
from ..fx.passes.dce_cse import operator_schemas, written_arguments
from ..ops import ops
from ..ops.prims import slice_length
from .decomp import (
    RANDOM_FILLS,
    basic_index,
    batch_norm_functional,
    batch_norm_with_update_functional,
    instance_norm_functional,
    leading_results,
    random_fill_like,
    register_decomposition,
)
from .decomp.registry import _is_t
from .synthetic_base import as_strided_scatter


class FunctionalizationError(TutorcompileError):
    """A mutation this pass cannot express as pure ops (the message says which and why)."""


# =======================================================================================
# Functional twins of mutations
# =======================================================================================

def setitem_functional(base: torch.Tensor, index: Any, value: Any) -> torch.Tensor:
    """``out = base.clone(); out[index] = value; return out`` -- ``x[index] = value`` without
    mutation (also the eager reference of its decomposition)."""
    out = base.clone()
    out[index] = value
    return out


def operator_functional(op: Any, slots: tuple, *args: Any, **kwargs: Any) -> tuple:
    """``op(*args, **kwargs)`` for an operator whose schema writes some of its arguments
    (``slots``: their positions, or keyword names), run on copies of those: its own results,
    then the copies' new values -- a pure function (a custom op's ``mutates_args``,
    ``torch.ops.aten.add_``)."""
    copied, kwargs = list(args), dict(kwargs)
    for slot in slots:
        if isinstance(slot, int):
            copied[slot] = copied[slot].clone()
        else:
            kwargs[slot] = kwargs[slot].clone()
    out = op(*copied, **kwargs)
    results = () if out is None else tuple(out) if isinstance(out, (tuple, list)) else (out,)
    return (*results, *(copied[s] if isinstance(s, int) else kwargs[s] for s in slots))


def copy_functional(dst: torch.Tensor, src: Any) -> torch.Tensor:
    """What ``dst.copy_(src)`` leaves in ``dst``: ``src`` cast to dst's dtype and broadcast."""
    if not isinstance(src, torch.Tensor):
        return torch.full_like(dst, src)
    return src.to(dst.dtype).expand(dst.shape).clone()


@register_decomposition(copy_functional)
def _copy_rule(dst, src):
    if not _is_t(src):
        return ops.full(tuple(dst.shape), src, dtype=dst.dtype, device=dst.device)
    if src.dtype != dst.dtype:
        src = ops.convert_element_type(src, dst.dtype)
    return src if tuple(src.shape) == tuple(dst.shape) else ops.expand(src, tuple(dst.shape))


@register_decomposition(setitem_functional)
def _setitem_rule(base, index, value):
    """``x[index] = v`` as nested ``slice_scatter`` prims (basic indexing only)."""
    steps = basic_index(base, index)
    ndim = len(base.shape)
    per_dim: list[tuple | None] = [None] * ndim  # None: the whole dimension
    # basic_index numbers dims of the evolving result (a select removes its dim, so
    # ``[:, 0, 0]`` is two selects of dim 1): replay the steps on the list of the
    # result's dims, each the source dim it comes from (None: a new dim of size 1)
    result_dims: list[int | None] = list(range(ndim))
    for step in steps:
        if step[0] == "new":
            result_dims.insert(step[1], None)
        elif step[0] == "select":
            per_dim[result_dims.pop(step[1])] = (step[2], step[2] + 1, 1, True)
        else:
            per_dim[result_dims[step[1]]] = (*step[2:], False)
    indexed_shape = [1 if d is None else
                     slice_length(base.shape[d], *per_dim[d][:3]) if per_dim[d] is not None
                     else base.shape[d] for d in result_dims]  # (symbolic too)
    if not _is_t(value):
        value = ops.full(tuple(indexed_shape), value, dtype=base.dtype, device=base.device)
    if value.dtype != base.dtype:
        value = ops.convert_element_type(value, base.dtype)
    if tuple(value.shape) != tuple(indexed_shape):
        value = ops.expand(value, tuple(indexed_shape))
    full_shape = tuple(1 if p is not None and p[3] else
                       (slice_length(base.shape[d], *p[:3]) if p is not None else
                        base.shape[d])
                       for d, p in enumerate(per_dim))
    value = ops.reshape(value, full_shape)

    def scatter(b, d):
        if d == ndim or all(p is None for p in per_dim[d:]):
            return value
        p = per_dim[d]
        if p is None:
            return scatter(b, d + 1) if d + 1 < ndim else value
        sub = ops.slice(b, d, p[0], p[1], p[2])
        return ops.slice_scatter(b, scatter(sub, d + 1), d, p[0], p[1], p[2])
    return scatter(base, 0)


def zero_functional(x):
    """``x.zero_()`` as a value: zeros that still depend on ``x`` for autograd, so that the
    gradient flowing back through it is zero, as eager's (not missing)."""
    return torch.where(torch.ones_like(x, dtype=torch.bool), 0, x)


@register_decomposition(zero_functional)
def _zero_rule(x):
    """As prims: zeros by a ``where`` on ``x`` (one kernel), keeping the zero gradient."""
    keep = ops.full(tuple(x.shape), True, dtype=torch.bool, device=x.device)
    return ops.where(keep, ops.full((), 0, dtype=x.dtype, device=x.device), x)


def resize_functional(x, *size):
    """``x.resize_(size)`` to at most as many elements: the first ones, in the new shape
    (growing it would expose uninitialised memory, which a graph cannot reproduce)."""
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) \
        else tuple(size)
    if math.prod(shape) > x.numel():
        raise FunctionalizationError("resize_ to more elements than the tensor holds exposes "
                                     "uninitialised memory; it cannot be functionalized")
    return x.reshape(-1)[:math.prod(shape)].reshape(shape)


def write_through_detach(parent: torch.Tensor, child: torch.Tensor) -> torch.Tensor:
    """``parent`` after ``parent.detach()`` was written with ``child``'s values: those
    values, and to autograd still ``parent`` (in eager a leaf updated under ``no_grad``
    keeps receiving its gradient). ``parent - parent.detach()`` is exactly zero with an
    identity gradient wherever ``parent`` is finite. With grad mode off no autograd graph is
    built, and the values are all there is."""
    if not parent.requires_grad:
        return child.detach()
    if not torch.is_grad_enabled():
        return child.detach()   # (no autograd graph is built: an optimizer's step)
    identity = torch.where(torch.isfinite(parent), parent - parent.detach(),
                           torch.zeros_like(parent))
    return child.detach() + identity


# In-place methods whose out-of-place twin is the same name without the underscore.
_SPECIAL_INPLACE = {"copy_": copy_functional,
                    "zero_": zero_functional,
                    "fill_": lambda x, v: torch.full_like(x, v),
                    "resize_": resize_functional}
# ``t op= u`` on a tensor writes into t for every operator Tensor has an ``__i*__`` for
# (``__ipow__`` is pow_, ``__ifloordiv__`` floor_divide_, ...); ``@=`` has none, so
# ``operator.imatmul`` makes a new tensor and is no write
_INPLACE_OPERATORS = {operator.iadd: operator.add, operator.isub: operator.sub,
                      operator.imul: operator.mul, operator.itruediv: operator.truediv,
                      operator.ipow: operator.pow, operator.ifloordiv: operator.floordiv,
                      operator.imod: operator.mod, operator.iand: operator.and_,
                      operator.ior: operator.or_, operator.ixor: operator.xor,
                      operator.ilshift: operator.lshift, operator.irshift: operator.rshift}

# View ops: (how to recognise the node) -> inverse(parent, new_child) as graph nodes.
_VIEW_METHODS = {"view", "reshape", "view_as", "reshape_as", "flatten", "transpose", "permute",
                 "t", "unsqueeze", "squeeze", "narrow", "select", "expand", "expand_as",
                 "contiguous", "__getitem__", "detach"}
# (``detach`` aliases its input: ``w.add_(1)`` in a no_grad block, or ``buf.data.lerp_(x)``,
# writes into the very tensor)
_VIEW_FUNCTIONS = {torch.reshape, torch.transpose, torch.permute, torch.t, torch.unsqueeze,
                   torch.squeeze, torch.flatten, torch.narrow, torch.select, torch.detach}


def _is_view(node: Node) -> bool:
    aliases = node.meta.get("aliases_input")
    if aliases is not None:  # the tracer saw whether the result shares the input's memory
        return aliases
    if node.op == "call_method":
        return node.target in _VIEW_METHODS
    if node.op == "call_function":
        if node.target is operator.getitem:
            # indexing a tensor views it; one result of a multi-output call (topk's values,
            # in ``values, indices = torch.topk(...)``) is a tensor of its own
            base = node.args[0]
            return not (isinstance(base, Node)
                        and isinstance(base.meta.get("example_value"), (tuple, list)))
        if node.target is getattr:
            return node.args[1] in ("T", "mT")
        return node.target in _VIEW_FUNCTIONS
    return False


@functools.cache
def _inplace_position(fn: Any) -> int | None:
    """Where ``fn`` takes its ``inplace`` flag positionally (``F.elu(x, alpha, inplace)``)."""
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):   # builtins without a signature, non-callables
        return None
    return names.index("inplace") if "inplace" in names else None


def _in_place_twins() -> dict[Any, Any]:
    """``torch.relu_`` -> ``torch.relu``, ``F.elu_`` -> ``F.elu``, ...: functions named like
    their out-of-place twin plus ``_`` that mutate their first argument's *values* (not
    ``as_strided_`` / ``detach_``, which change what the tensor is)."""
    twins = {}
    for module in (torch, F):
        for name in dir(module):
            if name.endswith("_") and not name.startswith("_") and hasattr(module, name[:-1]) \
                    and name not in ("as_strided_", "detach_"):
                fn, twin = getattr(module, name), getattr(module, name[:-1])
                if callable(fn) and callable(twin) and not isinstance(fn, type):
                    twins[fn] = twin
    return twins


_OUT_OF_PLACE_FUNCTIONS = _in_place_twins()
_OUT_OF_PLACE_FUNCTIONS[torch.zero_] = zero_functional  # no ``torch.zero`` to pair with


def _holds_tensor(a: Any) -> bool:
    """Is ``a`` a graph value that is a tensor (not a Python number or a size)?"""
    if not isinstance(a, Node):
        return False
    if a.op == "placeholder":
        return True
    example = a.meta.get("example_value")
    if example is not None:
        return isinstance(example, torch.Tensor)
    return a.meta.get("tensor_meta") is not None


def _is_mutation(node: Node) -> tuple[int, Any] | None:
    """``(index of the mutated argument, how to build the functional node)`` or None.

    How: ``(op, target, kwargs)`` -- ``kwargs`` None keeps the node's own -- with a fourth
    item, new positional arguments, when those change too."""
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if node.op == "call_method" and isinstance(name, str) and name.endswith("_") \
            and not name.endswith("__"):
        if name in _SPECIAL_INPLACE:
            return 0, ("call_function", _SPECIAL_INPLACE[name], None)
        if name in RANDOM_FILLS or (name == "bernoulli_" and not any(
                _holds_tensor(a) for a in (*node.args[1:], *node.kwargs.values()))):
            # x.uniform_(a, b), x.bernoulli_(0.5): the same draws into a new tensor, which
            # depends on x's shape only (so no gradient flows back into a draw)
            return 0, ("call_function", random_fill_like, None,
                       (node.args[0], name, *node.args[1:]))
        base_name = name[:-1]
        if not hasattr(torch.Tensor, base_name):
            raise FunctionalizationError(f"in-place method {name!r} has no out-of-place twin "
                                         f"Tensor.{base_name}; it cannot be functionalized")
        return 0, ("call_method", base_name, None)
    if node.op != "call_function":
        return None
    if node.target in _INPLACE_OPERATORS:
        if not _holds_tensor(node.args[0]):
            return None  # ``n = 0; n += t`` rebinds a Python number: nothing is mutated
        return 0, ("call_function", _INPLACE_OPERATORS[node.target], None)
    if node.target is operator.setitem:
        return 0, ("call_function", setitem_functional, None)
    if node.kwargs.get("inplace") is True:
        return 0, ("call_function", node.target, {**node.kwargs, "inplace": False})
    position = _inplace_position(node.target)
    if position is not None and len(node.args) > position and node.args[position] is True:
        # ``F.hardswish(x, True)``: how Dynamo writes ``nn.Hardswish(inplace=True)``
        args = node.args[:position] + (False,) + node.args[position + 1:]
        return 0, ("call_function", node.target, None, args)
    twin = _OUT_OF_PLACE_FUNCTIONS.get(node.target)
    if twin is not None:                     # torch.relu_(x), F.elu_(x), torch.sigmoid_(x)
        return 0, ("call_function", twin, None)
    if node.kwargs.get("out") is not None:
        raise FunctionalizationError(f"{node.name}: out= arguments are not supported; "
                                     "assign the result instead")
    return None


# =======================================================================================
# The pass
# =======================================================================================

@dataclass
class FunctionalGraph:
    """A pure graph; its outputs are the user's outputs then the new values of the inputs
    listed in ``mutated_inputs`` (placeholder indices), to be copied back in that order."""
    graph: Graph
    mutated_inputs: list[int] = field(default_factory=list)
    num_user_outputs: int = 0
    output_spec: Any = None  # "single", "tuple", "list" (how to rebuild the user's result)
    # per mutated input: was it written by an in-place op autograd records in eager
    # (``out[0] = h * 2``, ``x.add_(y)``: ``out`` gets a grad_fn) -- not by a side effect
    # of an op (batch norm's running statistics), which autograd never sees
    recorded_mutations: list[bool] = field(default_factory=list)


# ``operator.and_`` is ``&``: the underscore only keeps the name off a keyword
_KEYWORD_OPERATORS = {operator.and_, operator.or_, operator.not_}


def _foreach_twin(node: Node) -> Any:
    """The out-of-place twin of an in-place foreach op (``torch._foreach_add_`` ->
    ``torch._foreach_add``), which writes the tensors of its first list argument; None for
    any other node. One without a twin cannot be functionalized: an error, never a write
    lost."""
    name = getattr(node.target, "__name__", "") if node.op == "call_function" else ""
    if not (name.startswith("_foreach_") and name.endswith("_")) or \
            getattr(node.target, "__module__", "") not in ("torch", "torch._C._VariableFunctions"):
        return None
    if name == "_foreach_zero_":
        return _foreach_zero
    twin = getattr(torch, name[:-1], None)
    if twin is None:
        raise FunctionalizationError(f"{node.name}: {name} has no out-of-place twin "
                                     f"torch.{name[:-1]}; it cannot be functionalized")
    return twin


def _view_parent_index(view: Node) -> int:
    """Which argument of ``view`` it is a view of: the first, but for a NumPy call
    (``numpy_call(fn, array, ...)``), whose node says."""
    numpy_view = view.meta.get("numpy_view")
    return numpy_view[0] if numpy_view is not None else 0


def numpy_view_scatter(parent: torch.Tensor, child: torch.Tensor, size: tuple,
                       stride: tuple, offset: int) -> torch.Tensor:
    """``parent`` with the elements a NumPy view of it addressed (``size``, ``stride`` and
    ``offset`` in a contiguous ``parent``'s memory) replaced by ``child``'s."""
    out = parent.contiguous().clone()
    out.as_strided(size, stride, offset).copy_(child)
    return out


def call_on_copy(fn: Any, tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``fn(tensor, ...)`` for a function that writes its first argument, made functional:
    it writes a copy, which is returned."""
    out = tensor.clone()
    fn(out, *args, **kwargs)
    return out


def _foreach_zero(tensors: list) -> list:
    """``torch._foreach_zero_``'s values, out of place."""
    return [torch.zeros_like(t) for t in tensors]


def _detached(node: Any) -> bool:
    """Is ``node`` a ``detach`` of another value -- what capture writes through for an
    in-place op inside a ``torch.no_grad()`` block, a write autograd does not record?"""
    return isinstance(node, Node) and (
        node.op == "call_method" and node.target == "detach"
        or node.op == "call_function" and node.target in (torch.detach, torch.Tensor.detach))


class _Ref:
    """A tensor as functionalization sees it: a base storage plus a chain of view nodes."""

    __slots__ = ("base", "chain")

    def __init__(self, base: Node, chain: tuple[Node, ...] = ()):
        self.base, self.chain = base, chain


def functionalize(graph: Graph) -> FunctionalGraph:
    """Rewrite mutations in ``graph`` (torch-level) as pure ops; see the module docstring."""
    new = Graph.derived_from(graph, "functionalize")
    latest: dict[Node, Node] = {}       # base (old node) -> its current value (new node)
    version: dict[Node, int] = {}
    view_cache: dict[tuple, Node] = {}  # (old view node, base version) -> new node
    refs: dict[Node, Any] = {}          # old node -> _Ref or a plain value mapping
    recorded: set[Node] = set()         # bases written by in-place ops autograd records

    def materialize(ref: _Ref) -> Node:
        value = latest[ref.base]
        for view in ref.chain:
            key = (view, version[ref.base])
            if key not in view_cache:
                parent = value
                of = view.args[_view_parent_index(view)]
                view_cache[key] = new.node_copy(
                    view, lambda a, parent=parent, of=of:  # type: ignore[misc]
                    parent if a is of else current(a))
            value = view_cache[key]
        return value

    def current(a: Node) -> Node:
        ref = refs[a]
        return materialize(ref) if isinstance(ref, _Ref) else ref

    def write_back(ref: _Ref, value: Node, where: Node) -> None:
        """``ref`` now holds ``value``: push it through the view chain into the base."""
        for i in range(len(ref.chain) - 1, -1, -1):
            view = ref.chain[i]
            parent = materialize(_Ref(ref.base, ref.chain[:i]))
            numpy_view = view.meta.get("numpy_view")
            if numpy_view is not None:   # ``a.T`` of a NumPy array: its elements of parent
                if numpy_view[1] is None:
                    raise FunctionalizationError(f"{where.name}: writes through a NumPy view "
                                                 "of an array that is not contiguous")
                value = new.call_function(numpy_view_scatter, (parent, value, *numpy_view[1]))
                continue
            # the view's other arguments in the new graph (``k[idx, idx]``: idx a tensor)
            args = (parent, *map_arg(tuple(view.args[1:]), current))
            value = _inverse_view(new, view, args, value, where)
        latest[ref.base] = value
        version[ref.base] += 1

    for node in graph.nodes:
        if node.op == "placeholder" or node.op == "get_attr":
            copy = new.node_copy(node, current)
            refs[node] = _Ref(node)
            latest[node], version[node] = copy, 0
            continue
        if node.op == "output":
            break
        out = node.kwargs.get("out") if node.op in ("call_function", "call_method") else None
        if isinstance(out, Node) and isinstance(refs.get(out), _Ref):
            # ``torch.maximum(a, b, out=m)`` (Adam's amsgrad): the call without ``out``, its
            # value written into ``m`` -- when it has m's shape and dtype (out= would resize
            # or cast m otherwise)
            mine, theirs = node.meta.get("tensor_meta"), out.meta.get("tensor_meta")
            if mine is None or theirs is None or (mine.shape, mine.dtype) != (
                    theirs.shape, theirs.dtype):
                raise FunctionalizationError(f"{node.name}: an out= argument whose shape or "
                                             "dtype differs from the result's")
            value = new.create_node(node.op, node.target, map_arg(node.args, current),
                                    map_arg({k: v for k, v in node.kwargs.items()
                                             if k != "out"}, current), name=node.name)
            value.meta = dict(node.meta)
            write_back(refs[out], value, node)
            refs[node] = refs[out]   # the call returns ``out``
            continue
        twin = _foreach_twin(node)
        if twin is not None:
            # ``torch._foreach_addcdiv_(params, exp_avgs, denoms, value=-lr)`` (a foreach
            # optimizer's step, the lists often ``detach``-ed parameters): the out-of-place
            # foreach op, each of its results written back into its list's tensor
            targets = node.args[0]
            if not all(isinstance(t, Node) and isinstance(refs.get(t), _Ref)
                       for t in targets):
                raise FunctionalizationError(f"{node.name}: {node.target.__name__} writes a "
                                             "list holding values that are not tensors of "
                                             "this graph")
            value = new.call_function(twin, map_arg(tuple(node.args), current),
                                      map_arg(dict(node.kwargs), current), name=node.name)
            for j, target in enumerate(targets):
                write_back(refs[target], new.call_function(operator.getitem, (value, j)), node)
                if not _detached(target):
                    recorded.add(refs[target].base)
            refs[node] = None   # (the in-place foreach op returns nothing)
            continue
        mutation = _is_mutation(node)
        if mutation is not None:
            index, (op, target, kwargs, *new_args) = mutation
            target_node = node.args[index]
            if not isinstance(target_node, Node) or not isinstance(refs[target_node], _Ref):
                raise FunctionalizationError(f"{node.name}: mutates something that is not a "
                                             "tensor of this graph")
            ref = refs[target_node]
            args = map_arg(new_args[0] if new_args else node.args, current)
            value = new.create_node(op, target, args,
                                    map_arg(kwargs if kwargs is not None else node.kwargs,
                                            current), name=node.name)
            value.meta = dict(node.meta)
            write_back(ref, value, node)
            if not _detached(target_node):   # (capture detaches what no_grad code writes)
                recorded.add(ref.base)
            refs[node] = ref  # an in-place op returns its (mutated) input
            continue
        if node.op == "call_function" and node.target in _BN_WITH_UPDATE:
            # aten._batch_norm_with_update(x, w, b, running_mean, running_var, momentum, eps)
            call = new.call_function(batch_norm_with_update_functional,
                                     tuple(map_arg(tuple(node.args), current)),
                                     map_arg(dict(node.kwargs), current), name=node.name)
            call.meta = dict(node.meta)
            for i, stat in ((4, node.args[3]), (5, node.args[4])):
                write_back(refs[stat], new.call_function(operator.getitem, (call, i)), node)
            refs[node] = _Ref(node)   # its own four results: the first four of the call
            latest[node] = new.call_function(leading_results, (call, 4))
            version[node] = 0
            continue
        if node.op == "call_function" and node.target in _STATISTICS_UPDATES \
                and _bn_training(node) and _arg(node, 1, "running_mean") is not None:
            out = _functional_batch_norm(new, node, refs, current, write_back)
            refs[node] = _Ref(node)
            latest[node], version[node] = out, 0
            continue
        # any other operator whose schema writes an argument (the ones above have rules of
        # their own)
        written = written_arguments(node.target) if node.op == "call_function" else None
        if written:
            own = _functional_operator_call(new, node, written, refs, current, write_back)
            if isinstance(own, Node):   # the operator's own result(s): a new value
                refs[node] = _Ref(node)
                latest[node], version[node] = own, 0
            else:   # nothing (a custom op returning None), or the argument it wrote
                refs[node] = own
            continue
        numpy_view = node.meta.get("numpy_view")
        if numpy_view is not None and isinstance(refs.get(node.args[numpy_view[0]]), _Ref):
            # a NumPy call whose result shares its array's memory (``a.T``): a view, so
            # writes to the array show through it and writes through it reach the array
            parent = refs[node.args[numpy_view[0]]]
            refs[node] = _Ref(parent.base, parent.chain + (node,))
            materialize(refs[node])
            continue
        if _is_view(node) and isinstance(node.args[0], Node) \
                and isinstance(refs.get(node.args[0]), _Ref):
            parent = refs[node.args[0]]
            refs[node] = _Ref(parent.base, parent.chain + (node,))
            materialize(refs[node])  # emit it here, in program order
            continue
        name = getattr(node.target, "__name__", "") if node.op == "call_function" else ""
        if name.endswith("_") and not name.endswith("__") and node.args and \
                node.target not in _KEYWORD_OPERATORS and \
                isinstance(node.args[0], Node) and isinstance(refs.get(node.args[0]), _Ref):
            # named as PyTorch names what writes its first argument (``nn.init.constant_``),
            # with no rule above: called on a copy, the copy is the argument's new value (a
            # copy of the node itself would write a value nothing reads back)
            value = new.call_function(call_on_copy, (node.target, *map_arg(
                tuple(node.args), current)), map_arg(dict(node.kwargs), current),
                name=node.name)
            value.meta = dict(node.meta)
            write_back(refs[node.args[0]], value, node)
            refs[node] = refs[node.args[0]]   # (it returns the tensor it wrote)
            continue
        copy = new.node_copy(node, current)
        refs[node] = _Ref(node)
        latest[node], version[node] = copy, 0

    result = graph.output_node.args[0]
    if isinstance(result, (tuple, list)):
        spec = "list" if isinstance(result, list) else "tuple"
        user = [current(a) if isinstance(a, Node) else a for a in result]
    else:
        spec = "single"
        user = [current(result) if isinstance(result, Node) else result]
    placeholders = graph.placeholders + [n for n in graph.nodes if n.op == "get_attr"]
    mutated = []
    for i, p in enumerate(graph.placeholders):
        if version[p] > 0:
            mutated.append(i)
    if any(version[n] > 0 for n in placeholders[len(graph.placeholders):]):
        raise FunctionalizationError("a get_attr tensor is mutated; lift parameters and buffers "
                                     "to inputs first (lift_attributes)")
    new.output(tuple(user) + tuple(latest[graph.placeholders[i]] for i in mutated))
    new.lint()
    return FunctionalGraph(new, mutated, len(user), spec,
                           [graph.placeholders[i] in recorded for i in mutated])


def _functional_operator_call(new: Graph, node: Node, written: list, refs: dict, current,
                              write_back) -> Any:
    """``node`` calls an operator that writes the arguments its schema marks ``(a!)``:
    emit :func:`operator_functional` and write the new values back. Returns what the node's
    own value is now: a node of its results, the ``_Ref`` of the argument it returns (an
    aten in-place overload returns the tensor it wrote), or None."""
    slots = []
    for position, name in written:
        if 0 <= position < len(node.args):
            slots.append(position)
        elif name in node.kwargs:
            slots.append(name)
        else:
            raise FunctionalizationError(f"{node.name}: {node.target} writes its argument "
                                         f"{name!r}, which the call does not pass")
    targets = [node.args[s] if isinstance(s, int) else node.kwargs[s] for s in slots]
    if not all(isinstance(t, Node) and isinstance(refs.get(t), _Ref) for t in targets):
        raise FunctionalizationError(f"{node.name}: {node.target} writes an argument that "
                                     "is not a tensor of this graph (a list of tensors?)")
    call = new.call_function(operator_functional,
                             (node.target, tuple(slots), *map_arg(tuple(node.args), current)),
                             map_arg(dict(node.kwargs), current), name=node.name)
    call.meta = {k: v for k, v in node.meta.items() if k not in ("example_value",
                                                                 "tensor_meta")}
    example = node.meta.get("example_value")
    count = 0 if example is None else len(example) if isinstance(example, (tuple, list)) \
        else 1
    for j, target in enumerate(targets):
        write_back(refs[target], new.call_function(operator.getitem, (call, count + j)), node)
    if count == 0:
        return None
    returns = operator_schemas(node.target)[0].returns
    if count == 1 and returns and returns[0].alias_info is not None:
        return refs[targets[0]]          # ``aten.add_.Tensor(x, y)`` is x, as written
    if count == 1:
        return new.call_function(operator.getitem, (call, 0))
    return new.call_function(leading_results, (call, count))


def _inverse_view(new: Graph, view: Node, args: tuple, child: Node, where: Node) -> Node:
    """A new value for ``parent`` (``args[0]``) given that ``view(*args)`` now holds
    ``child``; ``args`` are the view's arguments as nodes of ``new``."""
    target = view.target
    name = target if view.op == "call_method" else getattr(target, "__name__", str(target))
    parent = args[0]
    if (view.op == "call_function" and target is operator.getitem) or name == "__getitem__":
        return new.call_function(setitem_functional, (parent, args[1], child))
    if name in ("view", "reshape", "view_as", "reshape_as", "flatten", "unsqueeze", "squeeze",
                "contiguous"):
        return new.call_method("reshape_as", (child, parent))
    if name == "detach":
        return new.call_function(write_through_detach, (parent, child))
    if name == "transpose":
        return new.call_method("transpose", (child, args[1], args[2]))
    if name == "t":
        return new.call_method("t", (child,))
    if name == "permute":
        dims = args[1] if len(args) == 2 and isinstance(args[1], (tuple, list)) else args[1:]
        inverse = [0] * len(dims)
        for i, d in enumerate(dims):
            inverse[d % len(dims)] = i
        return new.call_method("permute", (child, tuple(inverse)))
    if target is getattr and args[1] == "T":
        return new.call_function(getattr, (child, "T"))
    if target is getattr and args[1] == "mT":
        return new.call_function(getattr, (child, "mT"))
    if name == "as_strided":  # an aliased input, a view of its synthetic base
        return new.call_function(as_strided_scatter, (parent, child, *args[1:]))
    if name == "diagonal":   # ``sim.diagonal().fill_(0)``: the diagonal written back
        rest = [_arg_of(view, args, i, n, d) for i, n, d in ((1, "offset", 0), (2, "dim1", 0),
                                                              (3, "dim2", 1))]
        return new.call_function(torch.diagonal_scatter, (parent, child, *rest))
    if name in ("narrow", "select"):
        dim = _dim(args[1], view.args[0])  # (x.narrow(-1, ...): counted from the end)
        if dim is not None:
            if name == "narrow":
                start, length = args[2], args[3]
                where_ = slice(start, start + length) if isinstance(start, int) and \
                    start >= 0 else None
            else:
                where_ = args[2]
            if where_ is not None:
                return new.call_function(setitem_functional,
                                         (parent, (slice(None),) * dim + (where_,), child))
    raise FunctionalizationError(
        f"{where.name}: mutating a tensor through the view {view.name} "
        f"({view.format_target()}) is not supported: that view has no inverse here (an "
        "expand, say, aliases one element many times). Mutate the base tensor, or use "
        "out-of-place ops.")


def _arg_of(view: Node, args: tuple, i: int, name: str, default: Any) -> Any:
    """The view's argument at position ``i`` or by ``name`` (``args``: its positional
    arguments as nodes of the new graph), else ``default``."""
    return args[i] if len(args) > i else view.kwargs.get(name, default)


def _dim(dim: Any, base: Any) -> int | None:
    """``dim`` counted from the front, given the viewed tensor's rank; None if unknown."""
    if not isinstance(dim, int):
        return None
    if dim >= 0:
        return dim
    example = base.meta.get("example_value") if isinstance(base, Node) else None
    meta = base.meta.get("tensor_meta") if isinstance(base, Node) else None
    shape = getattr(example, "shape", None) or getattr(meta, "shape", None)
    return dim + len(shape) if shape is not None else None


def _arg(node: Node, i: int, name: str) -> Any:
    return node.args[i] if len(node.args) > i else node.kwargs.get(name)


_BN_NAMES = ("input", "running_mean", "running_var", "weight", "bias", "training", "momentum",
             "eps")
# The calls that update running statistics in place, with the same eight arguments (the
# sixth, batch norm's ``training``, is instance norm's ``use_input_stats``): their
# functional twin and the sixth argument's default.
_STATISTICS_UPDATES = {F.batch_norm: (batch_norm_functional, False),
                       F.instance_norm: (instance_norm_functional, True)}
_BN_WITH_UPDATE = (torch.ops.aten._batch_norm_with_update,
                   torch.ops.aten._batch_norm_with_update.default)


def _bn_training(node: Node) -> bool:
    default = _STATISTICS_UPDATES[node.target][1]
    value = _arg(node, 5, "use_input_stats" if node.target is F.instance_norm else "training")
    return bool(default if value is None else value)


def _functional_batch_norm(new: Graph, node: Node, refs, current, write_back) -> Node:
    functional, training = _STATISTICS_UPDATES[node.target]
    names = _BN_NAMES if node.target is F.batch_norm else \
        _BN_NAMES[:5] + ("use_input_stats",) + _BN_NAMES[6:]
    values = [_arg(node, i, n) for i, n in enumerate(names)]
    defaults = (None, None, None, None, None, training, 0.1, 1e-5)
    values = [d if v is None and i >= 3 else v for i, (v, d) in enumerate(zip(values, defaults))]
    call = new.call_function(functional, tuple(map_arg(tuple(values), current)),
                             name=node.name)
    call.meta = dict(node.meta)
    out = new.call_function(operator.getitem, (call, 0))
    for i, stat in ((1, values[1]), (2, values[2])):
        item = new.call_function(operator.getitem, (call, i))
        write_back(refs[stat], item, node)
    return out


# =======================================================================================
# Module graphs: standard layers as functional calls; parameters as inputs
# =======================================================================================

def _module_call(graph: Graph, name: str, a: tuple, kwargs: dict, mod: nn.Module, attr) -> Any:
    """The functional form of calling the standard layer ``mod`` on ``a``, as graph nodes."""
    x = a[0] if a else None
    if isinstance(mod, nn.Linear):
        return graph.call_function(F.linear, (x, attr("weight"), attr("bias")))
    if isinstance(mod, (nn.Conv1d, nn.Conv2d, nn.Conv3d)) and mod.padding_mode == "zeros":
        fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[len(mod.kernel_size)]
        return graph.call_function(fn, (x, attr("weight"), attr("bias"), mod.stride,
                                        mod.padding, mod.dilation, mod.groups))
    simple: dict[type, Callable] = {nn.ReLU: F.relu, nn.SiLU: F.silu, nn.Sigmoid: torch.sigmoid,
                                    nn.Tanh: torch.tanh}
    for cls, activation in simple.items():
        if type(mod) is cls:
            return graph.call_function(activation, (x,))
    if isinstance(mod, nn.GELU):
        return graph.call_function(F.gelu, (x,), {"approximate": mod.approximate})
    if isinstance(mod, nn.LeakyReLU):
        return graph.call_function(F.leaky_relu, (x, mod.negative_slope))
    if isinstance(mod, nn.Softmax):
        return graph.call_function(F.softmax, (x, mod.dim))
    if isinstance(mod, nn.LogSoftmax):
        return graph.call_function(F.log_softmax, (x, mod.dim))
    if isinstance(mod, nn.Identity):
        return x
    if isinstance(mod, nn.Flatten):
        return graph.call_function(torch.flatten, (x, mod.start_dim, mod.end_dim))
    if isinstance(mod, nn.Dropout):
        return graph.call_function(F.dropout, (x, mod.p, mod.training))
    if isinstance(mod, nn.LayerNorm):
        return graph.call_function(F.layer_norm, (x, tuple(mod.normalized_shape),
                                                  attr("weight"), attr("bias"), mod.eps))
    if isinstance(mod, nn.Embedding):
        return graph.call_function(F.embedding, (x, attr("weight")))
    if isinstance(mod, nn.modules.batchnorm._BatchNorm):
        if mod.momentum is None:
            raise FunctionalizationError(f"{name}: BatchNorm with momentum=None "
                                         "(cumulative average) is not supported")
        training = mod.training or mod.running_mean is None
        if mod.training and mod.track_running_stats and mod.num_batches_tracked is not None:
            graph.call_method("add_", (attr("num_batches_tracked"), 1))
        stats = (attr("running_mean"), attr("running_var")) if (
            not mod.training or mod.track_running_stats) else (None, None)
        return graph.call_function(F.batch_norm, (x, *stats, attr("weight"), attr("bias"),
                                                  training, mod.momentum, mod.eps))
    if isinstance(mod, nn.MaxPool2d):
        return graph.call_function(F.max_pool2d, (x, mod.kernel_size, mod.stride, mod.padding,
                                                  mod.dilation, mod.ceil_mode))
    if isinstance(mod, nn.AvgPool2d):
        return graph.call_function(F.avg_pool2d, (x, mod.kernel_size, mod.stride, mod.padding))
    if isinstance(mod, nn.AdaptiveAvgPool2d):
        return graph.call_function(F.adaptive_avg_pool2d, (x, mod.output_size))
    if isinstance(mod, nn.MSELoss):
        return graph.call_function(F.mse_loss, tuple(a), {"reduction": mod.reduction})
    if isinstance(mod, nn.CrossEntropyLoss):
        return graph.call_function(F.cross_entropy, tuple(a), {"reduction": mod.reduction})
    if not any(True for _ in mod.parameters()) and not any(True for _ in mod.buffers()):
        # a parameterless layer we do not know: call it as it is (an extern op)
        return graph.call_function(mod, tuple(a), dict(kwargs))
    raise NotImplementedError(f"{name}: module {type(mod).__name__} has parameters and no "
                              "functional form here; trace through it (it is not a leaf) or "
                              "add it to tutorcompile.aot.functionalize._module_call")


def inline_modules(gm: GraphModule) -> GraphModule:
    """``call_module`` nodes of standard layers -> functional calls with ``get_attr`` inputs."""
    graph = gm.graph
    if not any(n.op == "call_module" for n in graph.nodes):
        return gm
    new = Graph.derived_from(graph, "inline_modules")
    env: dict[Node, Any] = {}
    attrs: dict[str, Any] = {}
    for name, value in [*gm.named_parameters(), *gm.named_buffers()]:
        attrs[name] = value
    for node in graph.nodes:
        if node.op == "call_module":
            mod = gm.get_submodule(node.target)
            def attr(name, prefix=node.target, mod=mod):
                if getattr(mod, name, None) is None:
                    return None
                path = f"{prefix}.{name}"
                attrs[path] = getattr(mod, name)
                return new.get_attr(path)
            env[node] = _module_call(new, node.name, map_arg(node.args, env.__getitem__),
                                     map_arg(node.kwargs, env.__getitem__), mod, attr)
        else:
            env[node] = new.node_copy(node, env.__getitem__)
            if node.op == "get_attr":
                attrs[node.target] = _fetch(gm, node.target)
    return GraphModule(attrs, new, type(gm).__name__)


def _fetch(root: Any, path: str) -> Any:
    for part in path.split("."):
        root = getattr(root, part)
    return root


def lift_attributes(gm: GraphModule) -> tuple[Graph, list[str], list[Any]]:
    """``get_attr`` tensors -> leading graph inputs. Returns (graph, their paths, values)."""
    graph = gm.graph
    new = Graph.derived_from(graph, "lift_attributes")
    env: dict[Any, Any] = {}   # nodes, and ("attr", path) for each attribute lifted
    paths: list[str] = []
    values: list[Any] = []
    for node in graph.nodes:
        if node.op == "get_attr":
            value = _fetch(gm, node.target)
            if isinstance(value, torch.Tensor):
                if node.target not in paths:
                    paths.append(node.target)
                    values.append(value)
                    p = new.placeholder("p_" + node.target.replace(".", "_"))
                    env[("attr", node.target)] = p
                env[node] = env[("attr", node.target)]
                continue
        env[node] = new.node_copy(node, env.__getitem__)
    return new, paths, values
