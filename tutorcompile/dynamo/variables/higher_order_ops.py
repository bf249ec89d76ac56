"""Higher-order ops: torch functions that take a Python function.

A graph node's arguments are tensors and constants, never a traced function, so a call that
passes a function cannot be one node of traced ops. Each kind gets what its meaning needs:

* **A body of its own** (``torch.func.vmap``/``grad``/``grad_and_value``/``jacrev``/
  ``jacfwd``/``hessian``, ``torch.cond``, ``while_loop``): the function is traced, on
  stand-ins for its operands, into a subgraph -- a :class:`~tutorcompile.fx.GraphModule`,
  the *body* -- and the graph gets one node calling :mod:`tutorcompile.ops.higher_order`
  with it (PyTorch's Dynamo speculates a subgraph the same way). What the body reads from
  the enclosing graph becomes its extra inputs; guards made while tracing it guard the whole
  graph. A body may not write to anything outside it (a list, an attribute, a tensor in
  place): that is a break.
* **Inlined, with a tag** (``torch.utils.checkpoint.checkpoint``): the function's ops join the
  graph and carry ``meta["recompute"]``; the partitioner (``aot/partitioners.py``) saves
  none of them for the backward but recomputes them there, as activation checkpointing does
  -- under a selective policy, none but those the policy saves.
  (Under ``backend="eager"`` there is no partitioner: autograd saves what it always saves --
  the same values and gradients, without the memory saving.)
* **Inlined, with a substitution** (``torch.func.functional_call``): the module's forward is
  inlined while its parameters and buffers read as the tensors passed in.
* **Inlined, as its dense formula** (``flex_attention``): ``score_mod`` and ``mask_mod``
  are called once on broadcasting index tensors, so their ops join the graph and fuse with
  the softmax around them (:func:`flex_attention_dense`).
* **Unrolled, or one node** (``associative_scan``), below.
* **A body on the gradient** (``tensor.register_hook(hook)`` on a tensor the graph
  computes): the hook is traced into a body on a stand-in for the gradient, and a
  :func:`~tutorcompile.ops.higher_order.call_tensor_hook` node -- the identity forward, the
  body backward -- sits right after the tensor, read by every use of it
  (:func:`_register_hook`). PyTorch's Dynamo puts the hook in the graph too, through a
  ``BackwardState`` its compiled autograd reads.

``associative_scan`` is unrolled while the length is a constant: the function is inlined once
per step, on trackers, and the steps join the graph (the code generators then fuse them). Once
the length is a symbol (a recompile on a new length, ``dynamic=True``, ``mark_dynamic``) there
is no number of steps to unroll, so the graph calls
:func:`~tutorcompile.ops.scan.sequential_scan` with the function speculated into a body of
its own, on stand-ins for one slice of each leaf (a :class:`~tutorcompile.ops.scan.
CombineBody`: called like the function, so PyTorch runs the loop of it; stage 4 decomposes
its graph into prims, and code generation never traces Python) -- one graph for every
length. A body that reads values of the enclosing graph leaves the function object itself
in the node. Only a function that computes the same thing on every call may sit in a graph:
a module-level one, or one made while tracing with no closure and no defaults (Mamba's); any
other keeps the unrolled path, which specialises (guards) the length.

``associative_scan(combine_fn, xs, dim)`` (Mamba's selective scan, when compiling) is the
inclusive scan ``out[0] = x[0]``, ``out[i] = combine_fn(out[i-1], x[i])`` along ``dim``; with
``combine_mode="generic"`` ``combine_fn`` sees one slice at a time (it is vmapped over the
scan dimension), so each step selects a slice. Both ways take the steps in the order eager
Mamba's own loop does; PyTorch's parallel-prefix scan regroups them (equal up to rounding).

Mirrors: torch/_dynamo/variables/higher_order_ops.py (``speculate_subgraph``,
``CondHigherOrderVariable``, ``WhileLoopHigherOrderVariable``,
``FunctorchHigherOrderVariable``, ``CheckpointHigherOrderVariable``,
``AssociativeScanHigherOrderVariable``, ``FlexAttentionHigherOrderVariable``),
torch/_dynamo/variables/tensor.py (``method_register_hook``) and
torch/_higher_order_ops/flex_attention.py (``math_attention``, the dense path).
"""

from __future__ import annotations

import inspect
import math
import types
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.utils.stateless
from torch._higher_order_ops.associative_scan import associative_scan
from torch._higher_order_ops.flex_attention import flex_attention as flex_attention_hop
from torch._higher_order_ops.while_loop import while_loop
from torch.nn.attention.flex_attention import create_mask, flex_attention
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.checkpoint import (
    CheckpointPolicy,
    SelectiveCheckpointContext,
    checkpoint,
    checkpoint_sequential,
    create_selective_checkpoint_contexts,
    noop_context_fn,
)

from ...fx import Graph, GraphModule, Node
from ...fx.aliasing import storage_key
from ...fx.node import map_aggregate
from ...fx.passes.dce_cse import is_impure, is_random, written_arguments
from ...ops.higher_order import (
    TRANSFORMS,
    call_cond,
    call_transform,
    call_while_loop,
    run_transform,
)
from ...ops.scan import CombineBody, sequential_scan
from ..exc import Unsupported
from .base import LATE_BOUND, VariableTracker
from .callables import _BUILTIN_HANDLERS
from .containers import (
    BaseListVariable,
    ConstantVariable,
    ConstDictVariable,
    ListVariable,
    TupleVariable,
)
from .functions import (
    NestedUserFunctionVariable,
    PartialVariable,
    UserFunctionVariable,
    UserMethodVariable,
)
from .nn_module import NNModuleVariable
from .tensor import SymIntVariable, TensorVariable
from .torch import TorchFunctionVariable


def _associative_scan(tx, combine_fn, xs, dim, reverse=None, combine_mode=None):
    const = {k: v.as_python_constant() if v is not None else None for k, v in
             (("dim", dim), ("reverse", reverse), ("combine_mode", combine_mode))}
    if const["combine_mode"] not in (None, "generic", "pointwise"):
        raise Unsupported(f"associative_scan(combine_mode={const['combine_mode']!r})")
    packed = isinstance(xs, BaseListVariable)
    leaves = list(xs.items) if packed else [xs]
    if not leaves or not all(isinstance(t, TensorVariable) for t in leaves):
        raise Unsupported("associative_scan over something other than tensors")
    d = const["dim"] % leaves[0].fake.dim()
    length = leaves[0].size_var(tx, d)
    fn = _plain_function(combine_fn)
    if isinstance(length, SymIntVariable) and fn is not None:
        # one node for every length: PyTorch runs the scan, of combine_fn's body
        kwargs = {"dim": d, "reverse": bool(const["reverse"]),
                  "combine_mode": const["combine_mode"] or "pointwise"}
        combine = _combine_body(tx, combine_fn, leaves, d, packed, fn.__name__) or fn
        return tx.output.create_node("call_function", sequential_scan,
                                     (ConstantVariable(combine), xs if packed else leaves[0]),
                                     kwargs)
    # unrolled one step per position: a symbolic length (of a function that cannot be a
    # graph argument) is specialised -- guarded -- and the other sizes stay symbolic
    n = length.specialize(tx) if isinstance(length, SymIntVariable) else \
        length.as_python_constant()
    if n == 0:
        raise Unsupported("associative_scan over an empty dimension")
    steps = range(n - 1, -1, -1) if const["reverse"] else range(n)

    def pack(items):
        return TupleVariable(items) if packed else items[0]

    def select(i):
        return [tx.output.create_node("call_function", torch.select, (t, d, i), {})
                for t in leaves]
    outs, acc = {}, None
    for i in steps:
        cur = select(i)
        if acc is not None:
            res = tx.call(combine_fn, [pack(acc), pack(cur)], {})
            cur = tx.unpack(res) if packed else [res]
            if len(cur) != len(leaves):
                raise Unsupported("associative_scan's combine_fn changed the number of leaves")
        outs[i] = acc = cur
    stacked = [tx.output.create_node("call_function", torch.stack,
                                     (ListVariable([outs[i][k] for i in range(n)]), d), {})
               for k in range(len(leaves))]
    return pack(stacked)


def _combine_body(tx, combine_fn, leaves: list[TensorVariable], dim: int, packed: bool,
                  name: str) -> CombineBody | None:
    """``combine_fn`` speculated into a body of its own, on stand-ins for one slice of each
    leaf (the accumulated ones, then the current ones), as the node's function: stage 4
    decomposes its graph, and code generation never traces Python. None (the function
    itself, run as Python) when the body reads values of the enclosing graph -- a
    ``sequential_scan`` passes its function nothing else."""
    def stand_ins() -> list[TensorVariable]:
        out = []
        for leaf in leaves:
            with tx.output.fake_mode:
                like = leaf.fake.detach()
                shape = [s for i, s in enumerate(like.shape) if i != dim]
                fake = like.new_empty(shape)
            out.append(tx.output.body_input(fake))
        return out
    left, right = stand_ins(), stand_ins()

    def pack(items: list) -> VariableTracker:
        return TupleVariable(items) if packed else items[0]
    body, free = _trace_body(tx, "associative_scan", combine_fn, [pack(left), pack(right)],
                             {}, [*left, *right])
    return None if free else CombineBody(body, name)


def _plain_function(fn) -> Callable | None:
    """``combine_fn`` as a function object that computes the same thing on every call, or
    None: a torch function, a module-level function (its identity is guarded where it was
    read), or one made while tracing with no closure and no defaults -- its code is a
    constant of the traced code and its globals are read when it runs."""
    if isinstance(fn, TorchFunctionVariable):   # torch.add, torch.maximum...
        return fn.fn
    if isinstance(fn, UserFunctionVariable):
        f = fn.fn
        return f if f.__closure__ is None else None
    if isinstance(fn, NestedUserFunctionVariable) and fn.closure is None \
            and fn.defaults is None and fn.kwdefaults is None:
        f = types.FunctionType(fn.code, fn.f_globals, fn.code.co_name)
        f.__qualname__ = fn.qualname
        return f
    return None


# ---------------------------------------------------------------------------------------
# Bodies of their own: torch.func transforms and torch.cond
# ---------------------------------------------------------------------------------------

def _trace_body(tx, name: str, fn: VariableTracker, args: list, kwargs: dict,
                inputs: list[TensorVariable], none_is: TensorVariable | None = None
                ) -> tuple[GraphModule, list[TensorVariable | SymIntVariable]]:
    """Trace ``fn(*args, **kwargs)`` -- ``inputs`` being the stand-ins among ``args`` --
    into a body of its own, cut out of the enclosing graph: the body and the values of
    the enclosing graph it reads (its extra inputs, after ``inputs``). A function that
    returns None returns ``none_is`` where one is given (a hook that changes nothing)."""
    out = tx.output
    mark, effects = len(out.created) - len(inputs), len(tx.side_effect_objects)
    out.bodies_open += 1
    try:
        result = tx.call(fn, args, kwargs)
    finally:
        out.bodies_open -= 1
    if none_is is not None and result.is_python_constant() and \
            result.as_python_constant() is None:
        result = none_is
    if len(tx.side_effect_objects) != effects:
        raise Unsupported(f"the function passed to {name} writes to an object from outside "
                          "it (an attribute, a global, a list)")
    structure = _tensor_structure(result, name)
    body, free = out.cut_subgraph(mark, [t.node for t in inputs], structure, name)
    written = _writes_outside(body.graph)
    if written is not None:
        raise Unsupported(f"the function passed to {name} changes a tensor from outside it "
                          f"in place ({written})")
    if _leaked(tx):
        raise Unsupported(f"the function passed to {name} stores a value it computed "
                          "somewhere that outlives the call")
    return body, [_as_value(n) for n in free]


def _writes_outside(body: Graph) -> str | None:
    """The name of an op of ``body`` that writes a tensor the body did not make (one of
    its inputs, or a view of one -- the fake tensors share their storage), or None. A
    tensor the body made may be written: ``torch.zeros(n).add_(x)``."""
    outside = {_storage(p) for p in body.placeholders} - {None}
    for node in body.nodes:
        if node.op not in ("call_function", "call_method") or not is_impure(node) \
                or is_random(node):
            continue
        name = node.target if isinstance(node.target, str) else \
            getattr(node.target, "__name__", str(node.target))
        written = written_arguments(node.target) if node.op == "call_function" else None
        targets = [node.kwargs.get("out")]
        if written:
            targets += [node.args[i] if i < len(node.args) else node.kwargs.get(a)
                        for i, a in written]
        elif name.endswith("_") or written is None:
            targets.append(node.args[0] if node.args else None)
        for t in targets:
            for leaf in t if isinstance(t, (tuple, list)) else [t]:
                if isinstance(leaf, Node) and _storage(leaf) in outside:
                    return name
    return None


def _storage(node: Node) -> int | None:
    return storage_key(node.meta.get("example_value"))


def _tensor_structure(result: VariableTracker, name: str) -> Any:
    """The nodes of a body's result, in its tuples and lists."""
    if isinstance(result, TensorVariable):
        return result.node
    if type(result) is TupleVariable or type(result) is ListVariable:
        items = [_tensor_structure(i, name) for i in result.items]
        return tuple(items) if isinstance(result, TupleVariable) else items
    if isinstance(result, ConstDictVariable) and result.dict_cls is dict:
        return {k: _tensor_structure(v, name) for k, v in result.items.items()}
    raise Unsupported(f"the function passed to {name} returns {result}: a body returns "
                      "tensors, in tuples, lists and dicts")


def _as_value(node: Node) -> TensorVariable | SymIntVariable:
    example = node.meta["example_value"]
    if isinstance(example, torch.Tensor):
        return TensorVariable(node, example)
    return SymIntVariable(node, example, None)


def _leaked(tx) -> bool:
    """Does a value the enclosing frames can still reach hold a node a body took away?"""
    seen: set[int] = set()

    def holds(vt: Any) -> bool:
        if not isinstance(vt, VariableTracker) or id(vt) in seen:
            return False
        seen.add(id(vt))
        node = getattr(vt, "node", None)
        if isinstance(node, Node) and node._erased:
            return True
        return any(holds(c) for c in vt.children())
    roots = [v for f in tx.frames for v in (*f.locals.values(), *f.stack)]
    return any(holds(v) for v in roots)


def _flatten(vt: VariableTracker, what: str) -> tuple[list[TensorVariable], Callable, Any]:
    """The tensors of a transform's argument -- a tensor, or tuples, lists and dicts of them,
    as ``torch.func`` takes them (a dict of parameters for ``functional_call``) -- in
    ``torch.utils._pytree``'s order, a function building the same structure of other
    trackers, and the structure with ``0`` for each tensor (its pytree spec)."""
    if isinstance(vt, TensorVariable):
        return [vt], lambda leaves: leaves[0], 0
    if type(vt) is TupleVariable or type(vt) is ListVariable:
        parts = [_flatten(i, what) for i in vt.items]
        kind = type(vt)
        skeleton = [p[2] for p in parts]
        return ([leaf for p in parts for leaf in p[0]],
                lambda leaves: kind(_split(leaves, parts)),
                tuple(skeleton) if kind is TupleVariable else skeleton)
    if isinstance(vt, ConstDictVariable) and vt.dict_cls is dict:
        keys = list(vt.items)
        parts = [_flatten(vt.items[k], what) for k in keys]
        return ([leaf for p in parts for leaf in p[0]],
                lambda leaves: ConstDictVariable(dict(zip(keys, _split(leaves, parts)))),
                {k: p[2] for k, p in zip(keys, parts)})
    raise Unsupported(f"{what}: {vt} (tensors, in tuples, lists and dicts, are captured)")


def _unflatten(leaves: list, spec: Any) -> VariableTracker:
    """Trackers in ``spec``'s structure (a pytree spec of tuples, lists and dicts)."""
    if spec.is_leaf():
        return leaves[0]
    items, i = [], 0
    for child in spec.children_specs:
        items.append(_unflatten(leaves[i:i + child.num_leaves], child))
        i += child.num_leaves
    if spec.type is dict:
        return ConstDictVariable(dict(zip(spec.context, items)))
    if spec.type is list:
        return ListVariable(items)
    if spec.type is tuple:
        return TupleVariable(items)
    raise Unsupported(f"a transform's result of type {spec.type.__name__}")


def _split(leaves: list, parts: list) -> list:
    """``leaves`` cut into the parts' lengths, each part rebuilt."""
    out, i = [], 0
    for p in parts:
        n = len(p[0])
        out.append(p[1](leaves[i:i + n]))
        i += n
    return out


def _stand_in(tx, vt: TensorVariable, dim: int | None = None) -> TensorVariable:
    """A body's input standing for ``vt`` (for its slice at ``dim`` under ``vmap``)."""
    with tx.output.fake_mode:
        fake = vt.fake.detach()
        if dim is not None:
            if not -fake.dim() <= dim < fake.dim():
                raise Unsupported(f"vmap over dimension {dim} of a {fake.dim()}-d tensor")
            fake = fake.select(dim, 0)
        elif vt.fake.requires_grad:
            fake = fake.clone().requires_grad_(True)
    return tx.output.body_input(fake)


class FunctionTransformVariable(VariableTracker):
    """``torch.func.vmap(fn, in_dims=...)`` and the other transforms: the transformed
    function, traced into a body when it is called."""

    def __init__(self, transform: str, fn: VariableTracker, options: dict[str, Any]):
        self.transform, self.fn, self.options = transform, fn, options

    def python_type(self):
        return types.FunctionType

    def call_function(self, tx, args, kwargs):
        name = f"torch.func.{self.transform}"
        options = dict(self.options)
        if self.transform == "vmap":
            in_dims = options.pop("in_dims", 0)
            dims = [in_dims] * len(args) if isinstance(in_dims, int) else in_dims
            if not isinstance(dims, (tuple, list)) or len(dims) != len(args) or not all(
                    d is None or isinstance(d, int) for d in dims):
                raise Unsupported(f"{name} with in_dims={in_dims!r} (in_dims nested inside "
                                  "an argument are not captured)")
            positions = [i for i, d in enumerate(dims) if d is not None]
            options["in_dims"] = tuple(dims[i] for i in positions)
        else:
            argnums = options.get("argnums", 0)
            positions = [argnums] if isinstance(argnums, int) else list(argnums)
            if not all(isinstance(i, int) and -len(args) <= i < len(args) for i in positions):
                raise Unsupported(f"{name} with argnums={argnums!r}")
            positions = [i % len(args) for i in positions]
            if "argnums" in options or self.transform != "hessian":
                options["argnums"] = 0 if isinstance(argnums, int) else \
                    tuple(range(len(positions)))
        traced_args, operands, inputs, skeleton = list(args), [], [], []
        for i in positions:
            leaves, rebuild, shape = _flatten(args[i], f"{name}'s argument {i}")
            dim = dims[i] if self.transform == "vmap" else None
            stand = [_stand_in(tx, leaf, dim) for leaf in leaves]
            traced_args[i] = rebuild(stand)
            operands += leaves
            inputs += stand
            skeleton.append(shape)
        body, free = _trace_body(tx, name, self.fn, traced_args, kwargs, inputs)
        spec = tree_flatten(tuple(skeleton))[1]
        try:   # the result's structure, from one run on the fake values
            with tx.output.fake_mode:
                result = run_transform(self.transform, body, options, spec,
                                       *[v.example() for v in (*operands, *free)])
        except Exception as e:  # noqa: BLE001 -- eager raises it again, after the break
            raise Unsupported(f"{name} failed on fake tensors: {type(e).__name__}: "
                              f"{e}") from None
        leaves, out_spec = tree_flatten(result)
        if not all(isinstance(t, torch.Tensor) for t in leaves):
            raise Unsupported(f"{name} returns something other than tensors")
        flat = tx.output.create_node(
            "call_function", call_transform,
            (ConstantVariable(self.transform), ConstantVariable(body),
             ConstantVariable(options), ConstantVariable(spec), *operands, *free), {})
        return _unflatten(flat.items, out_spec)

    def reconstruct(self, rc):
        return TRANSFORMS[self.transform](rc(self.fn), **self.options)

    def children(self):
        return [self.fn]

    def __repr__(self):
        return f"FunctionTransformVariable({self.transform})"


def _transform(name: str) -> Callable:
    def handler(tx, fn, *args, **kwargs):
        spec = inspect.signature(TRANSFORMS[name]).bind(None, *args, **kwargs)
        options = {}
        for key, value in list(spec.arguments.items())[1:]:
            if key == "kwargs":   # jacrev's keyword-only ones
                value = dict(value)
                options.update({k: v.as_python_constant() for k, v in value.items()})
                continue
            if not value.is_python_constant():
                raise Unsupported(f"torch.func.{name} with a non-constant {key}")
            options[key] = value.as_python_constant()
        return FunctionTransformVariable(name, fn, options)
    return handler


def _cond(tx, pred, true_fn, false_fn, operands=None):
    """``torch.cond(pred, true_fn, false_fn, operands)``: both branches traced, each a
    body; a constant predicate (a Python bool, a size test) just calls its branch."""
    ops = [] if operands is None else tx.unpack(operands)
    if pred.is_python_constant():
        return tx.call(true_fn if pred.as_python_constant() else false_fn, ops, {})
    if not isinstance(pred, (TensorVariable, SymIntVariable)):
        raise Unsupported(f"torch.cond with the predicate {pred}")
    leaves, rebuild, _ = _flatten(TupleVariable(ops), "torch.cond's operands")
    bodies, frees = [], []
    for branch in (true_fn, false_fn):
        inputs = [_stand_in(tx, leaf) for leaf in leaves]
        body, free = _trace_body(tx, "torch.cond", branch, rebuild(inputs).items, {}, inputs)
        bodies.append(body)
        frees.append(free)
    flat = tx.output.create_node(
        "call_function", call_cond,
        (pred, ConstantVariable(bodies[0]), ConstantVariable(bodies[1]),
         ConstantVariable(len(leaves)), ConstantVariable(len(frees[0])), *leaves, *frees[0],
         *frees[1]), {})
    return _unflatten(flat.items, tree_flatten(bodies[0].graph.output_node.args[0])[1])


def _while_loop(tx, cond_fn, body_fn, carried_inputs):
    """``while_loop(cond_fn, body_fn, carried)``: both functions traced, each a body, into
    one node that runs the loop (:func:`~tutorcompile.ops.higher_order.call_while_loop`);
    the number of iterations is the data's to decide, so the graph holds no unrolled step."""
    if not isinstance(carried_inputs, (TupleVariable, ListVariable)):
        raise Unsupported(f"while_loop with carried inputs {carried_inputs}")
    leaves, rebuild, skeleton = _flatten(TupleVariable(list(carried_inputs.items)),
                                         "while_loop's carried inputs")
    bodies, frees = [], []
    for name, fn in (("while_loop's cond_fn", cond_fn), ("while_loop's body_fn", body_fn)):
        inputs = [_stand_in(tx, leaf) for leaf in leaves]
        body, free = _trace_body(tx, name, fn, rebuild(inputs).items, {}, inputs)
        bodies.append(body)
        frees.append(free)
    result = bodies[0].graph.output_node.args[0]
    value = result.meta.get("example_value") if isinstance(result, Node) else None
    if not (isinstance(value, torch.Tensor) and value.dtype == torch.bool
            and value.numel() == 1):
        raise Unsupported("while_loop's cond_fn returns something other than a one-element "
                          "bool tensor")
    flat = tx.output.create_node(
        "call_function", call_while_loop,
        (ConstantVariable(bodies[0]), ConstantVariable(bodies[1]),
         ConstantVariable(len(leaves)), ConstantVariable(len(frees[0])), *leaves, *frees[0],
         *frees[1]), {})
    return _unflatten(flat.items, tree_flatten(skeleton)[1])


class TensorHookVariable(VariableTracker):
    """``t.register_hook``, called with the hook: traced into the graph for a tensor the
    graph computes (:func:`_register_hook`), registered after the graph on one from outside
    (:func:`_register_hook_after_graph`)."""

    def __init__(self, tensor: TensorVariable):
        self.tensor = tensor

    def call_function(self, tx, args, kwargs):
        t = self.tensor
        _check_hook_registration(tx, t)
        if t.source is None and t.node.op != "placeholder":
            return _register_hook(tx, t, *args, **kwargs)
        return _register_hook_after_graph(tx, t, *args, **kwargs)

    def children(self):
        return [self.tensor]

    def __repr__(self):
        return f"TensorHookVariable({self.tensor})"


LATE_BOUND["TensorHookVariable"] = TensorHookVariable


def _check_hook_registration(tx, t: TensorVariable) -> None:
    """What both ways of registering refuse, each a break: a tensor that needs no gradient
    (eager raises), a kept handle (``h = t.register_hook(f); h.remove()``: removing the
    hook is autograd state the graph does not hold), a hook registered inside a
    higher-order op's function."""
    if not t.fake.requires_grad:
        raise Unsupported("tensor.register_hook() on a tensor that does not require grad "
                          "(eager raises)")
    frame = tx.frames[-1]
    if frame.instructions[frame.ip].opname != "POP_TOP":
        raise Unsupported("the handle tensor.register_hook() returns is kept: removing the "
                          "hook is autograd state the graph does not hold")
    if tx.output.bodies_open:
        raise Unsupported("tensor.register_hook() inside a higher-order op's function")


def _register_hook(tx, t: TensorVariable, hook: VariableTracker) -> VariableTracker:
    """``t.register_hook(hook)`` inside the traced code, ``t`` a tensor the graph computes:
    the hook is traced into a body, on a stand-in for the gradient, and the graph gets a
    :func:`~tutorcompile.ops.higher_order.call_tensor_hook` node right after ``t`` that
    every use of ``t`` reads (:meth:`OutputGraph.hook_gradient`) -- so the hook changes
    the whole gradient of ``t`` in the backward, as autograd's does, wherever ``t`` is used.

    A hook that writes outside itself (appends to a list, counts calls) is a break, as
    for any body (and what :func:`_check_hook_registration` refuses)."""
    with tx.output.fake_mode:
        grad = tx.output.body_input(t.fake.detach())   # (a gradient needs none itself)
    body, free = _trace_body(tx, "tensor.register_hook", hook, [grad], {}, [grad],
                             none_is=grad)
    tx.output.hook_gradient(t.node, body, [f.node for f in free])
    return ConstantVariable(None)


# hooks made while tracing that the Reconstructor rebuilds after the graph (one from
# outside is fetched through its source)
_REBUILDABLE_HOOKS = (UserFunctionVariable, NestedUserFunctionVariable, PartialVariable,
                      UserMethodVariable)


def _register_hook_after_graph(tx, t: TensorVariable, hook: VariableTracker
                               ) -> VariableTracker:
    """``x.register_hook(hook)`` on a tensor from outside the graph (an argument, a
    parameter): the hook stays on ``x`` after the call, as in eager, so it is not the
    graph's to hold -- the call itself is made after the graph, with the hook rebuilt from
    what the traced code made it of (a lambda's closure cells hold the graph's values).
    Nothing in the call can see the difference: a hook runs only in a backward pass, which
    the graph does not run. PyTorch's Dynamo registers such hooks in its epilogue too.
    Any hook will do, since it is not traced -- one that cannot be rebuilt is a break."""
    if not isinstance(hook, _REBUILDABLE_HOOKS) and hook.source is None:
        raise Unsupported(f"tensor.register_hook() with the hook {hook}, which cannot be "
                          "rebuilt after the graph")
    return tx.defer_call(ConstantVariable(torch.Tensor.register_hook), [t, hook], {})


# ---------------------------------------------------------------------------------------
# Inlined: checkpoint and functional_call
# ---------------------------------------------------------------------------------------

def _checkpoint(tx, function, *args, use_reentrant=None, context_fn=None,
                determinism_check=None, debug=None, early_stop=None,
                preserve_rng_state=None, **kwargs):
    """``checkpoint(function, *args)``: ``function`` inlined, its ops tagged
    ``meta["recompute"]`` -- the partitioner recomputes them in the backward instead of
    saving them (random ops excepted: their draws are saved, as checkpoint's RNG replay
    keeps them equal). With a selective policy (``context_fn=partial(
    create_selective_checkpoint_contexts, policy)``) only the ops the policy lets go are
    tagged (:func:`_saved_by_policy`)."""
    policy = _selective_policy(context_fn)
    reentrant = use_reentrant is None or use_reentrant.as_python_constant()
    if reentrant and not any(isinstance(a, TensorVariable) and a.fake.requires_grad
                             for a in args):
        # the reentrant variant gives the function's parameters no gradient then
        raise Unsupported("checkpoint(use_reentrant=True) with no input that requires "
                          "grad: its parameters would get no gradient, as in eager")
    if reentrant and policy is not None:
        raise Unsupported("checkpoint(use_reentrant=True) with a context_fn (eager raises)")
    mark = len(tx.output.created)
    result = tx.call(function, list(args), kwargs)
    for node in tx.output.created[mark:]:
        if node.op in ("call_function", "call_method") and not (
                policy is not None and _saved_by_policy(tx, node, policy)):
            node.meta["recompute"] = True
    return result


def _selective_policy(context_fn: VariableTracker | None) -> Callable | None:
    """The policy of a selective activation checkpoint: ``policy(ctx, aten_op, *args,
    **kwargs) -> CheckpointPolicy`` (a list of ops to save becomes one), or None for plain
    checkpointing. Any other ``context_fn`` is a break."""
    if context_fn is None or getattr(context_fn, "fn", None) is noop_context_fn:
        return None
    if not (isinstance(context_fn, PartialVariable)   # (the function: a tracker of torch's)
            and getattr(context_fn.fn, "fn", None) is create_selective_checkpoint_contexts):
        raise Unsupported(f"checkpoint with the context_fn {context_fn}")
    given = context_fn.args[0] if context_fn.args else \
        context_fn.kwargs.get("policy_fn_or_list")
    if isinstance(given, UserFunctionVariable):
        return given.fn
    ops = [i.as_python_constant() if i.is_python_constant() else getattr(i, "fn", None)
           for i in given.items] if isinstance(given, BaseListVariable) else [None]
    if all(isinstance(op, (torch._ops.OpOverload, torch._ops.HigherOrderOperator))
           for op in ops):
        return lambda ctx, op, *args, **kwargs: (CheckpointPolicy.MUST_SAVE if op in ops
                                                 else CheckpointPolicy.PREFER_RECOMPUTE)
    raise Unsupported(f"a selective checkpointing policy given as {given}")


class _AtenOps(TorchDispatchMode):
    """The ATen ops a call runs (on fake tensors), with their arguments."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, tuple, dict]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.calls.append((func, args, kwargs))
        return func(*args, **kwargs)


def _saved_by_policy(tx, node: Node, policy: Callable) -> bool:
    """Does the selective checkpointing ``policy`` save what ``node`` computes?

    A policy speaks of ATen ops (``aten.mm.default``); the graph's nodes are torch calls
    (``F.linear``). The node's call is run on its example values under a dispatch mode
    that lists the ATen ops it runs, and the policy is asked about each, as PyTorch's
    ``_CachingTorchDispatchMode`` asks it in eager: the node is saved (not recomputed) when
    the policy saves any of them -- ``F.linear`` is, when it saves ``aten.addmm``."""
    def example(a: Any) -> Any:
        return a.meta.get("example_value") if isinstance(a, Node) else a
    args, kwargs = map_aggregate(node.args, example), map_aggregate(node.kwargs, example)
    fn = getattr(args[0], node.target) if node.op == "call_method" else node.target
    call_args = args[1:] if node.op == "call_method" else args
    recorder = _AtenOps()
    try:
        with tx.output.fake_mode, recorder:
            fn(*call_args, **kwargs)
    except Exception:  # noqa: BLE001 -- a call that does not replay (a query): not saved
        return False
    ctx = SelectiveCheckpointContext(is_recompute=False)
    for op, op_args, op_kwargs in recorder.calls:
        decision = policy(ctx, op, *op_args, **op_kwargs)
        if isinstance(decision, bool):     # (the old spelling: True saves)
            decision = CheckpointPolicy.MUST_SAVE if decision else \
                CheckpointPolicy.PREFER_RECOMPUTE
        if decision in (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE):
            return True
    return False


def _checkpoint_sequential(tx, *args, **kwargs):
    """``checkpoint_sequential(modules, segments, input)``: torch's Python, inlined -- it
    calls :func:`checkpoint` on each segment, which the rule above takes."""
    return tx.inline_user_function(checkpoint_sequential, list(args), kwargs)


def _functional_call(tx, module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                     tie_weights=None, strict=None):
    """``functional_call(module, tensors, args)``: ``module`` called with its parameters
    and buffers reading as ``tensors`` (by name; a tied weight follows its twin unless
    ``tie_weights=False``)."""
    if not isinstance(module, NNModuleVariable) or module.source is None:
        raise Unsupported(f"functional_call of {module}")
    dicts = parameter_and_buffer_dicts
    dicts = [dicts] if isinstance(dicts, ConstDictVariable) else tx.unpack(dicts)
    given: dict[str, VariableTracker] = {}
    for d in dicts:
        if not isinstance(d, ConstDictVariable):
            raise Unsupported(f"functional_call with {d} for its tensors")
        for key, vt in d.items.items():
            if key in given:
                raise Unsupported(f"functional_call given {key!r} twice")
            given[key] = vt
    m = module.value
    owners = {}   # every name a parameter or buffer is reached by -> (module, table, attr)
    for prefix, sub in m.named_modules(remove_duplicate=False):
        for table in ("_parameters", "_buffers"):
            for attr, t in sub.__dict__[table].items():
                if t is not None:
                    owners[f"{prefix}.{attr}" if prefix else attr] = (sub, attr, t)
    unknown = [k for k in given if k not in owners]
    if unknown or strict is not None and strict.as_python_constant() and \
            set(given) != set(owners):
        raise Unsupported(f"functional_call with names the module does not have ({unknown}) "
                          "or, with strict=True, without all of its own")
    tie = tie_weights is None or tie_weights.as_python_constant()
    replaced = {}
    for key, vt in given.items():
        sub, attr, t = owners[key]
        replaced[(id(sub), attr)] = vt
        if tie:
            for other, (sub2, attr2, t2) in owners.items():
                if t2 is t and other not in given:
                    replaced[(id(sub2), attr2)] = vt
    call_args = [] if args is None else \
        [args] if not isinstance(args, (TupleVariable, ListVariable)) else list(args.items)
    call_kwargs = {} if kwargs is None else dict(kwargs.items)
    tx.reparametrized.append(replaced)
    try:
        return module.call_function(tx, call_args, call_kwargs)
    finally:
        tx.reparametrized.pop()


# ---------------------------------------------------------------------------------------
# Inlined, as its dense formula: flex_attention
# ---------------------------------------------------------------------------------------

def _broadcast_indices(nb, nh, nm, nn, device):
    """The batch, head, query and key indices as ``arange``s shaped to broadcast against
    ``(nb, nh, nm, nn)`` scores: ``(nb, 1, 1, 1)``, ``(1, nh, 1, 1)``... -- what a
    ``score_mod``/``mask_mod`` is called on instead of four nested ``vmap``s."""
    return (torch.arange(nb, device=device).view(nb, 1, 1, 1),
            torch.arange(nh, device=device).view(1, nh, 1, 1),
            torch.arange(nm, device=device).view(1, 1, nm, 1),
            torch.arange(nn, device=device).view(1, 1, 1, nn))


def flex_attention_dense(query, key, value, score_mod, block_mask, scale, kernel_options,
                         score_mod_other_buffers=(), mask_mod_other_buffers=()):
    """What ``flex_attention_hop`` computes, written with broadcasting instead of ``vmap``:
    the result ``(out, lse / ln 2, max_scores / ln 2)`` of PyTorch's dense (eager) path.

    ``score_mod(score, b, h, q_idx, kv_idx)`` and ``mask_mod(b, h, q_idx, kv_idx)`` are
    written for one score at a time; PyTorch's eager path vmaps them over the four
    indices. Here they are called once, on index tensors shaped to broadcast against the
    ``(B, H, M, N)`` scores -- ``b`` is ``(B, 1, 1, 1)``, ``kv_idx`` is ``(1, 1, 1, N)`` --
    so their ops join the graph as ordinary pointwise ops and indexing (``bias[h, q_idx]``
    gathers a ``(1, H, M, 1)`` block), which the code generators fuse with the softmax
    around them. A function valid for one score (it returns one value per position) gives
    the same values either way. Like eager, the mask is ``mask_mod`` at every position
    (the block mask's tables only let a kernel skip blocks), a row with nothing left is
    zeros (its ``lse`` is -inf), and scores are computed in float32 (float64 for float64).
    """
    groups = query.size(1) // key.size(1)
    key = key.repeat_interleave(groups, dim=1).expand(query.size(0), -1, -1, -1)
    value = value.repeat_interleave(groups, dim=1).expand(query.size(0), -1, -1, -1)
    precision = torch.float64 if query.dtype == torch.float64 else torch.float32
    scores = (query.to(precision) @ key.to(precision).transpose(-2, -1)) * scale
    nb, nh, nm, nn = scores.shape
    b, h, m, n = _broadcast_indices(nb, nh, nm, nn, scores.device)
    kept = block_mask[-1](b, h, m, n, *mask_mod_other_buffers)
    modified = score_mod(scores, b, h, m, n, *score_mod_other_buffers)
    scores = torch.where(kept, modified, -math.inf).to(precision).expand(nb, nh, nm, nn)
    empty = (scores == -math.inf).all(dim=-1)
    lse = torch.where(empty, -math.inf, scores.logsumexp(dim=-1))
    max_scores = scores.amax(dim=-1)
    out = torch._safe_softmax(scores, dim=-1).to(query.dtype) @ value.to(query.dtype)
    return out, lse / math.log(2), max_scores / math.log(2)


def create_mask_dense(mod_fn, B, H, Q_LEN, KV_LEN, device=None):  # noqa: N803 -- torch's names
    """``create_mask`` (``create_block_mask`` starts with it): the ``(B, H, Q_LEN, KV_LEN)``
    bool mask of a ``mask_mod`` (or of a ``score_mod``: where it is not -inf), the function
    called once on broadcasting index tensors as in :func:`flex_attention_dense` -- PyTorch
    vmaps it four times, under a mode that keeps ``docs[q_idx]`` a gather."""
    if device is None:
        device = torch.accelerator.current_accelerator() or "cpu"
    B, H = B or 1, H or 1
    b, h, m, n = _broadcast_indices(B, H, Q_LEN, KV_LEN, device)
    if len(inspect.signature(mod_fn).parameters) == 5:   # a score_mod
        out = mod_fn(torch.zeros(B, H, Q_LEN, KV_LEN, device=device), b, h, m, n)
        mask = ~torch.isneginf(out)
    else:
        mask = mod_fn(b, h, m, n)
    return mask.expand(B, H, Q_LEN, KV_LEN).contiguous()


def _flex_attention(tx, *args, **kwargs):
    """``flex_attention(q, k, v, score_mod, block_mask, ...)``: PyTorch's own Python traced
    (its checks, the default scale and block mask, the auxiliary outputs); it calls the
    operator ``flex_attention_hop`` once it sees it is being compiled, and that call
    inlines the dense formula above."""
    return tx.inline_user_function(flex_attention, list(args), kwargs)


def _flex_attention_hop(tx, *args, **kwargs):
    return tx.inline_user_function(flex_attention_dense, list(args), kwargs)


def _create_mask(tx, *args, **kwargs):
    return tx.inline_user_function(create_mask_dense, list(args), kwargs)


for _name in TRANSFORMS:
    _BUILTIN_HANDLERS[TRANSFORMS[_name]] = _transform(_name)
_BUILTIN_HANDLERS[torch.cond] = _cond
_BUILTIN_HANDLERS[while_loop] = _while_loop
_BUILTIN_HANDLERS[checkpoint] = _checkpoint
_BUILTIN_HANDLERS[checkpoint_sequential] = _checkpoint_sequential
_BUILTIN_HANDLERS[torch.func.functional_call] = _functional_call
_BUILTIN_HANDLERS[torch.nn.utils.stateless.functional_call] = _functional_call
_BUILTIN_HANDLERS[associative_scan] = _associative_scan
_BUILTIN_HANDLERS[flex_attention] = _flex_attention
_BUILTIN_HANDLERS[flex_attention_hop] = _flex_attention_hop
_BUILTIN_HANDLERS[create_mask] = _create_mask

__all__: list[str] = []
