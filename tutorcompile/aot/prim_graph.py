"""From a torch-level graph to a graph of prims: run the decompositions over every node.

:func:`decompose` interprets a (functional) torch-level graph under the graph-building ops
handler. Each call with a rule in the decomposition table records that rule's prims; Python
arithmetic on shapes is evaluated on the spot (on symbolic sizes it stays symbolic, see
``fx/symbolic_shapes.py``; a torch function given one specialises it); anything else stays
an **extern** node that calls the torch function itself -- its output shape found by running
it on ``meta`` tensors, or, on symbolic sizes (which meta kernels cannot take), by tracing
its decomposition on stand-ins and keeping only the result's sizes -- and AOTAutograd asks
PyTorch for its gradient at run time. A ``sequential_scan`` extern also gets its
``combine_fn`` as prims (:func:`capture_combine_fn`): code generation spells those, and never
traces Python.
:class:`DecompositionReport` says which calls were decomposed and which stayed extern, and
why.

Mirrors: torch/_functorch/aot_autograd.py tracing under a decomposition table
(``make_fx(..., decomposition_table=...)``), and Inductor's fallback kernels for ops without a
lowering.
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from ..fx import Graph, GraphModule, Node, TensorMeta
from ..fx.node import map_aggregate, tree_leaves
from ..fx.passes.dce_cse import is_random
from ..fx.symbolic_shapes import ShapeEnv, SymInt, as_shape, hint_int
from ..ops import GraphHandler, GraphValue, make_meta, ops, set_handler
from ..ops.scan import CombineBody, CombineFn, sequential_scan
from ..ops.table import contiguous_strides
from .decomp import (
    DECOMPOSITIONS,
    detached,
    leading_results,
    permute,
    random_state,
    t,
    transpose,
    with_random_state,
)
from .decomp.registry import current_graph_handler, extern_call, target_name
from .functionalize import functionalize
from .tracing import trace_with_inputs

# =======================================================================================

@dataclass
class DecompositionReport:
    """Which calls of a graph became prims, and which stayed extern (and why)."""
    decomposed: Counter = field(default_factory=Counter)
    extern: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = ["decomposed to prims: " + (", ".join(
            f"{k} x{v}" if v > 1 else k for k, v in sorted(self.decomposed.items())) or "-")]
        if self.extern:
            lines.append("extern (PyTorch runs them, and their backward):")
            lines += [f"  {k}: {why}" for k, why in sorted(self.extern.items())]
        else:
            lines.append("extern: none")
        return "\n".join(lines)


def decompose(graph: Graph, input_metas: list[Any], *, decompositions: dict | None = None,
              input_names: list[str] | None = None,
              attrs: dict[str, Any] | None = None) -> tuple[Graph, DecompositionReport]:
    """Run ``graph`` (torch-level, functional) under the graph handler: a graph of prims.

    ``input_metas`` gives each placeholder's shape/dtype (tensors, TensorMetas, or Python
    values for non-tensor inputs, which are specialised into the graph). Calls with a rule in
    ``decompositions`` (default :data:`DECOMPOSITIONS`) are decomposed; the rest become
    extern nodes. Non-tensor arithmetic (``x.shape[0] * 2``) is evaluated while tracing;
    a TensorMeta whose sizes are SymInts makes it symbolic, computed by the graph.
    """
    table = DECOMPOSITIONS if decompositions is None else decompositions
    report = DecompositionReport()
    handler = GraphHandler(Graph.derived_from(graph, "decompose"))
    env: dict[Node, Any] = {}
    placeholders = graph.placeholders
    if len(placeholders) != len(input_metas):
        raise ValueError(f"the graph has {len(placeholders)} inputs, got {len(input_metas)} "
                         "example inputs")
    names = input_names or [p.name for p in placeholders]
    result: Any = None
    with set_handler(handler):
        for node in graph.nodes:
            if node.op == "placeholder":
                like = input_metas[placeholders.index(node)]
                is_tensor = isinstance(like, (torch.Tensor, TensorMeta))
                env[node] = handler.placeholder(names[placeholders.index(node)], like) \
                    if is_tensor else like
                continue
            if node.op == "get_attr":
                if attrs is None or node.target not in attrs:
                    raise ValueError(f"get_attr {node.target!r}: lift parameters and buffers "
                                     "to graph inputs first (aot_module does)")
                env[node] = attrs[node.target]
                continue
            if node.op == "output":
                result = map_aggregate(node.args[0],
                                       lambda a: env[a] if isinstance(a, Node) else a)
                continue
            if node.op == "call_module":
                raise ValueError(f"call_module {node.target!r}: inline modules first "
                                 "(tutorcompile.aot.functionalize.inline_modules)")
            args = map_aggregate(node.args, lambda a: env[a] if isinstance(a, Node) else a)
            kwargs = map_aggregate(node.kwargs, lambda a: env[a] if isinstance(a, Node) else a)
            with handler.graph.nodes_from(node):
                env[node] = _no_gradient_from_integers(
                    (args, kwargs), _call(node, args, kwargs, table, report))
            _note_eager_layout(env[node], node)
    if result is None:
        result = ()
    out = handler.output(result)
    return out, report


def _note_eager_layout(value: Any, node: Node) -> None:
    """Remember on ``value``'s prim node the strides eager gave ``node``'s result (capture
    recorded them): prims' own metas say contiguous after a transpose and an add, but a
    sampler run on ``empty_like`` of that result (dropout's mask) fills it in memory order,
    so drawing what eager draws needs eager's layout (see ``dropout`` in ``decomp/rng.py``)."""
    meta = node.meta.get("tensor_meta")
    if isinstance(value, GraphValue) and isinstance(meta, TensorMeta):
        value.node.meta.setdefault("eager_stride", meta.stride)


def _call(node: Node, args: tuple, kwargs: dict, table: dict, report: DecompositionReport
          ) -> Any:
    target = node.target
    if node.op == "call_method":
        key = f"method:{target}"
        fn: Any = getattr(torch.Tensor, target, None)
        receiver = args[0] if args else None
        if not any(isinstance(a, GraphValue) for a in tree_leaves((args, kwargs))) and not (
                isinstance(receiver, torch.Tensor) and is_random(node)):
            # a method of a Python value (int, Size) or a deterministic method of a constant
            # tensor on constants: computed now. One that reads a graph value (BLOOM's
            # alibi.baddbmm(batch1=query, ...) on an alibi folded from constants) is a call
            # of the graph. A random one (``torch.empty(n).bernoulli_(p)``, as torchvision's
            # stochastic depth draws its mask) must draw on every call.
            return getattr(receiver, target)(*args[1:], **kwargs)
    else:
        key, fn = target, target
    if target is operator.getitem and isinstance(args[0], (tuple, list)):
        # an output of a multi-output call (or a Python container): picked out here, not by
        # the decomposition table -- a table without getitem must not turn the pick into an
        # extern, whose backward would not reach the call that made the value
        return args[0][args[1]]
    if target is leading_results and isinstance(args[0], (tuple, list)):
        return tuple(args[0][:args[1]])    # (the same: a functional rewrite's own results)
    has_values = any(isinstance(v, GraphValue) for v in tree_leaves((args, kwargs)))
    name = target_name(node)
    if target is getattr:
        obj, attr = args[0], args[1]
        if isinstance(obj, GraphValue):
            if attr in ("shape",):
                return as_shape(obj.shape)
            if attr in ("dtype", "device", "ndim"):
                return getattr(obj, attr)
            if attr in ("H", "mH") and not obj.dtype.is_complex:  # real: the transposes
                attr = attr.replace("H", "T")
            if attr in ("T", "mT"):
                report.decomposed["Tensor." + attr] += 1
                return (t(obj) if attr == "T" and len(obj.shape) <= 2 else
                        transpose(obj, -2, -1) if attr == "mT" else
                        permute(obj, tuple(reversed(range(len(obj.shape))))))
            if attr in ("real", "imag"):  # views of a complex tensor: PyTorch takes them
                fn = getattr(torch, attr)
                report.extern[f"Tensor.{attr}"] = "no decomposition registered"
                return extern_call(fn, (obj,), {})
            raise NotImplementedError(f"attribute {attr!r} of a tensor in a graph")
        return getattr(obj, attr)
    if node.op == "call_method" and target in ("size", "dim", "numel", "ndimension"):
        v = args[0]
        if target == "size":
            return as_shape(v.shape) if len(args) == 1 else v.shape[args[1]]
        return len(v.shape) if target in ("dim", "ndimension") else math.prod(v.shape)
    if not has_values and not is_random(node):
        # Python arithmetic on shapes, or a deterministic factory (torch.arange): computed
        # now; a tensor becomes a constant of the graph. Arithmetic on symbolic sizes stays
        # symbolic; a torch function given one (a slice's bound too: MPT's constant ALiBi
        # bias cut at ``64 - t``) is decomposed, or else specialises it (with a guard)
        if (getattr(fn, "__module__", None) not in ("_operator", "operator")
                and _has_symbolic_size((args, kwargs))) or (
                fn is operator.getitem and isinstance(args[0], torch.Tensor)
                and _has_symbolic_size(args[1:])):
            if fn is torch.arange:
                positions = _symbolic_arange(*args, **kwargs)
                if positions is not None:
                    report.decomposed[name] += 1
                    return positions
            elif key in table:  # ``torch.ones(b, t)``: a factory node of symbolic size
                try:
                    out = table[key](*args, **kwargs)
                    report.decomposed[name] += 1
                    return out
                except (NotImplementedError, TypeError):
                    pass
            why = f"an argument of {name} ({node.meta.get('source', node.name)})"
            args, kwargs = map_aggregate((args, kwargs), lambda v: v.specialize(why)
                                         if isinstance(v, SymInt) else v)
        return fn(*args, **kwargs)
    if fn is sequential_scan:    # its combine_fn, as prims: stage 5 never traces Python
        args, kwargs = capture_combine_fn(args, kwargs)
    rule = table.get(key)
    why = "no decomposition registered"
    if rule is not None:
        args, kwargs = _flag_by_keyword(fn, args, kwargs)
        try:
            out = rule(*args, **kwargs)
            report.decomposed[name] += 1
            return _stop_gradients(fn, args, kwargs, out)
        except NotImplementedError as e:
            why = f"decomposition does not cover this call ({e})" if str(e) else \
                "decomposition does not cover this call"
        except TypeError as e:  # arguments the rule does not take (out=, a legacy spelling)
            why = f"decomposition does not take these arguments ({e})"
    if fn is None:
        raise NotImplementedError(f"{name}: no such torch function or Tensor method")
    report.extern[name] = why
    meta = _symbolic_result_meta(key, args, kwargs)
    if is_random(node):
        return _random_extern_call(fn, args, kwargs, meta)
    return _stop_gradients(fn, args, kwargs, extern_call(fn, args, kwargs, meta=meta))


def capture_combine_fn(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A ``sequential_scan`` call's arguments with its ``combine_fn`` replaced by a
    :class:`~tutorcompile.ops.scan.CombineFn`: the function, with its graph of prims over
    one-element tensors of the leaves' dtypes, or the reason it has none. Capture's body
    (:class:`~tutorcompile.ops.scan.CombineBody`) is functionalized and decomposed; a plain
    Python function (``aot_function``, or a body capture could not lift) is first traced by
    running it -- the one place a scan's Python runs to be traced. Code generation then
    spells the graph (``inductor/codegen/scan.py``).

    Mirrors: torch/_higher_order_ops/associative_scan.py, whose ``combine_fn`` reaches
    Inductor as a traced subgraph (``materialize_as_graph``)."""
    try:
        bound = inspect.signature(sequential_scan).bind(*args, **kwargs)
    except TypeError:   # (PyTorch's call says what is wrong)
        return args, kwargs
    fn, xs = bound.arguments["combine_fn"], bound.arguments["xs"]
    packed = type(xs) if isinstance(xs, (tuple, list)) else None
    leaves = list(xs) if packed else [xs]
    dtypes = tuple(x.dtype for x in leaves if isinstance(getattr(x, "dtype", None), torch.dtype))
    if isinstance(fn, CombineFn):
        if fn.dtypes == dtypes:
            return args, kwargs
        fn = fn.fn

    def replaced(combine: CombineFn) -> tuple[tuple, dict]:
        if "combine_fn" in kwargs:
            return args, {**kwargs, "combine_fn": combine}
        return (combine, *args[1:]), kwargs
    if len(dtypes) != len(leaves):
        return replaced(CombineFn(fn, (), "the leaves are not all tensors"))
    k = len(leaves)

    def flat(*values: Any) -> tuple:
        pack: Callable = (lambda items: packed(items)) if packed else (lambda items: items[0])
        result = fn(pack(values[:k]), pack(values[k:]))
        return tuple(result) if packed else (result,)
    examples = [torch.ones(1, dtype=d) for d in dtypes * 2]
    prims: Graph | str
    try:
        if isinstance(fn, CombineBody) and isinstance(fn.body, GraphModule):
            # capture's body: its graph, decomposed (no Python runs)
            body = functionalize(fn.body.graph).graph
            attrs = {n.target: operator.attrgetter(n.target)(fn.body) for n in body.nodes
                     if n.op == "get_attr"}
            prims = decompose(body, examples, attrs=attrs)[0]
        else:   # a Python function (aot_function's users): traced by running it
            traced, _ = trace_with_inputs(flat, examples)
            prims = decompose(traced.graph, examples)[0]
    except Exception as e:   # noqa: BLE001 -- any failure keeps PyTorch's loop
        prims = f"combine_fn could not be traced to prims ({type(e).__name__}: {e})"
    return replaced(CombineFn(fn, dtypes, prims))


_FLAGS = ("inplace",)
"""Keyword-style flags that a rule takes by name, however the call spelled them."""


@functools.cache
def _flag_positions(fn: Callable) -> tuple[tuple[int, str], ...]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return ()
    return tuple((i, p.name) for i, p in enumerate(params) if p.name in _FLAGS
                 and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _flag_by_keyword(fn: Callable | None, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``F.hardswish(x, False)`` as ``F.hardswish(x, inplace=False)``: a rule takes its
    flags (``inplace``) by name, but a call may pass them by position -- as Dynamo writes
    ``nn.Hardswish(inplace=True)``, and as functionalization rewrites it. Every activation
    rule refused the positional spelling, so its op (and the op's backward) ran in PyTorch:
    MobileNetV3's training step called PyTorch's autograd for 38 hardswish and hardsigmoid.
    """
    if fn is None:
        return args, kwargs
    try:
        positions = _flag_positions(fn)
    except TypeError:                            # (an unhashable callable)
        return args, kwargs
    for i, name in reversed(positions):
        if i < len(args) and name not in kwargs:
            kwargs = {**kwargs, name: args[i]}
            args = args[:i] + args[i + 1:]
    return args, kwargs


def _stop_gradients(fn: Callable, args: tuple, kwargs: dict, out: Any) -> Any:
    """``out``, a call's results, with those PyTorch gives no gradient detached.

    A decomposition differentiates through every result it computes, but PyTorch declares some
    results of an op non-differentiable (``output_differentiability`` in derivatives.yaml):
    ``native_layer_norm``'s mean and rstd, the batch-norm statistics. A graph that went on to
    use one would get a gradient eager does not have -- a silent wrong answer. Which results
    those are is asked of PyTorch itself, by running ``fn`` on meta tensors that require
    grad; only multi-result calls can have such results beside differentiable ones. (An
    extern's gradient is PyTorch's, so right, but its results would still say they require
    grad.)"""
    if not isinstance(out, (tuple, list)) or sum(isinstance(v, GraphValue) for v in out) < 2:
        return out
    differentiable = _differentiable_results(fn, args, kwargs)
    if differentiable is None or len(differentiable) != len(out):
        return out
    kept = [detached(v) if not ok and isinstance(v, GraphValue) and v.dtype.is_floating_point
            else v for v, ok in zip(out, differentiable)]
    return type(out)(kept)


def _no_gradient_from_integers(inputs: Any, out: Any) -> Any:
    """``out``, a torch-level call's results, detached where the call read no floating or
    complex graph value: ``(x > 0).float()``, ``mask.to(q.dtype)``, ``argmax(x) + 0.5``.

    Autograd decides at the level of the call: a result requires grad when an input
    does, and only floating and complex tensors can. Prims decide it again, one at a time,
    after decomposition, where that rule is wrong: ``sign(x)`` decomposes through
    comparisons, yet eager differentiates it (a zero gradient). So it is applied here, per
    call: a result whose every graph input was integer or bool gets no gradient -- else the
    compiled Function returned it with ``requires_grad=True`` where eager gives ``False``,
    and ``autograd.grad`` of it raised "not used in the graph" instead of eager's "does not
    require grad". A call with no graph input at all (a factory) needs nothing: the joint
    graph already finds nothing to differentiate."""
    leaves = [v for v in tree_leaves(inputs) if isinstance(v, GraphValue)]
    if not leaves or any(v.dtype.is_floating_point or v.dtype.is_complex for v in leaves):
        return out
    return map_aggregate(out, lambda v: detached(v) if isinstance(v, GraphValue) and (
        v.dtype.is_floating_point or v.dtype.is_complex) else v)


def _differentiable_results(fn: Callable, args: tuple, kwargs: dict) -> list[bool] | None:
    """Per result of ``fn(*args, **kwargs)``: whether PyTorch's autograd gives it a gradient
    from some floating input (None when ``fn`` has no meta kernel, or gives no result a
    gradient: no autograd on meta tensors, as far as it tells). All inputs require grad
    at once, or, where ``fn`` refuses that for some (batch norm's running statistics), one
    at a time."""
    values = [v for v in tree_leaves((args, kwargs)) if isinstance(v, GraphValue)
              and (v.dtype.is_floating_point or v.dtype.is_complex)]

    def run(wanted: list[GraphValue]) -> list[bool] | None:
        def stand_in(v: Any) -> Any:
            if isinstance(v, torch.Tensor):   # a constant of the graph
                return v.detach().to("meta")
            if not isinstance(v, GraphValue):
                return v
            t = torch.empty([hint_int(n) for n in v.shape], dtype=v.dtype, device="meta")
            return t.requires_grad_(any(v is w for w in wanted))
        try:
            with torch.enable_grad():
                result = fn(*map_aggregate(args, stand_in), **map_aggregate(kwargs, stand_in))
        except Exception:    # (no meta kernel, an input it cannot differentiate, ...)
            return None
        if not isinstance(result, (tuple, list)):
            return None
        grads = [isinstance(r, torch.Tensor) and r.requires_grad for r in result]
        # none at all: no autograd on meta tensors (a function's own shape-only path, as
        # sequential_scan's) tells nothing
        return grads if any(grads) else None

    together = run(values)
    if together is not None:
        return together
    alone = [r for r in (run([v]) for v in values) if r is not None]
    return [any(col) for col in zip(*alone)] if alone else None


def _has_symbolic_size(value: Any) -> bool:
    """Is a size in ``value`` symbolic: a tensor's, or a number (a slice's bound too)?"""
    if isinstance(value, SymInt):
        return True
    if isinstance(value, GraphValue):
        return any(isinstance(d, SymInt) for d in value.shape)
    if isinstance(value, slice):
        value = (value.start, value.stop, value.step)
    if isinstance(value, dict):
        value = tuple(value.values())
    return isinstance(value, (tuple, list)) and any(map(_has_symbolic_size, value))


def _symbolic_result_meta(key: Any, args: tuple, kwargs: dict) -> Any:
    """The result of a PyTorch call on symbolic sizes (``"aot_eager"`` keeps every op a
    PyTorch call), as its decomposition computes it: the rule is traced on stand-ins of the
    arguments in a scratch graph, which is thrown away -- only the result's metadata is
    kept, sizes symbolic (``(s0, 16)``), and what the rule relied on is guarded. PyTorch's
    meta kernels need ints: without this the call would specialise every size it sees.
    None (the meta kernels decide, specialising) when no argument has a symbolic size, the
    call has no decomposition, or it does not give tensors."""
    rule = DECOMPOSITIONS.get(key)
    if rule is None or not _has_symbolic_size((args, kwargs)):
        return None
    scratch = GraphHandler(Graph("a shape rule (thrown away)"))
    scratch.graph._from = current_graph_handler().graph._from   # (guards cite the node)
    count = iter(range(1 << 30))
    # a size given as a number (a slice's bound) may be read from no stand-in: any symbol
    # can be read from a placeholder of the scratch graph (which never runs)
    sizes = scratch.graph.placeholder("sizes")
    for leaf in tree_leaves((args, kwargs)):
        for v in (leaf.start, leaf.stop, leaf.step) if isinstance(leaf, slice) else (leaf,):
            for symbol in getattr(v, "expr", sympy.Integer(0)).free_symbols:
                scratch.sym_sources.setdefault(symbol, (sizes, 0))

    def stand_in(v: Any) -> Any:
        if isinstance(v, GraphValue):
            return scratch.placeholder(f"arg{next(count)}", v.node.meta["tensor_meta"])
        return v
    try:
        with set_handler(scratch):
            out = rule(*map_aggregate(args, stand_in), **map_aggregate(kwargs, stand_in))
    except Exception:   # (NotImplementedError, TypeError...: the meta kernels decide)
        return None
    if isinstance(out, GraphValue):
        return out.node.meta.get("tensor_meta")
    if isinstance(out, (tuple, list)) and out and all(isinstance(o, GraphValue) for o in out):
        return tuple(o.node.meta.get("tensor_meta") for o in out)
    return None


def _symbolic_arange(*args: Any, dtype: torch.dtype | None = None, device: Any = None,
                     layout: Any = None, requires_grad: bool = False,
                     pin_memory: bool = False) -> Any:
    """``torch.arange`` with a symbolic bound and a whole step: the ``iota`` prim, its
    length a size the graph computes (GPT's positions ``arange(0, t)``, MPT's ALiBi
    ``arange(1 - t, 1, dtype=torch.int32)``, XLNet's ``arange(k, -q, -1.0)``), converted to
    the dtype asked for (a float step makes floats, as ``torch.arange``). None when it is
    not that (a fractional step or bound, a non-default layout): the caller specialises."""
    start, end, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    whole = isinstance(step, float) and step.is_integer()
    if not all(isinstance(v, (int, SymInt)) and not isinstance(v, bool) for v in (start, end)) \
            or not (whole or type(step) is int) or step == 0 \
            or layout not in (None, torch.strided) or requires_grad or pin_memory:
        return None
    dtype = dtype or (torch.get_default_dtype() if whole else torch.int64)
    if dtype.is_complex or dtype == torch.bool:
        return None
    step = int(step)
    length = (end - start + step - (1 if step > 0 else -1)) // step   # ceil((end - start) / step)
    positions = ops.iota(max(length, 0), start, step, dtype=torch.int64,
                         device=torch.device(device or "cpu"))
    return positions if dtype == torch.int64 else ops.convert_element_type(positions, dtype)


def _random_extern_call(fn: Callable, args: tuple, kwargs: dict,
                        meta: TensorMeta | None = None) -> Any:
    """An extern that draws random numbers from tensor inputs (``F.rrelu`` in training):
    the generator's state is saved just before it (a node of its own, in program order),
    so that the backward, which runs the call again for its gradient, draws the same
    numbers (:func:`~tutorcompile.aot.decomp.rng.with_random_state`)."""
    device = next((v.device for v in tree_leaves((args, kwargs)) if isinstance(v, GraphValue)),
                  None)
    if device is None:                     # no graph input: nothing runs it again
        return extern_call(fn, args, kwargs, meta=meta)
    now = random_state(device)
    state = extern_call(random_state, (device,), {},
                        meta=make_meta(now.shape, now.dtype, now.device))
    return extern_call(with_random_state, (fn, state, *args), kwargs, meta=meta)


# ---------------------------------------------------------------------------------------
# Symbolic sizes
# ---------------------------------------------------------------------------------------

def is_symbolic_input(x: Any, dims: frozenset) -> bool:
    """Does this input get symbols for its ``dims``? (Only a contiguous tensor: its strides
    then follow from its sizes.)"""
    return bool(dims) and isinstance(x, torch.Tensor) and x.is_contiguous()


def symbolic_input_metas(inputs: list, dynamic_dims: list, shape_env: ShapeEnv) -> list:
    """The inputs as TensorMetas whose dynamic sizes are the symbols ``s0``, ``s1``..."""
    metas = []
    for i, (x, dims) in enumerate(zip(inputs, dynamic_dims)):
        if not is_symbolic_input(x, dims):
            metas.append(x)
            continue
        shape = as_shape(shape_env.create_symbol(s, (i, d)) if d in dims else s
                         for d, s in enumerate(x.shape))
        metas.append(TensorMeta(shape, x.dtype, x.device, contiguous_strides(shape),
                                x.requires_grad))
    return metas


def symbolic_sizes(graph: Graph, inputs: list, dynamic_dims: list,
                   sizes: list[tuple[Node, int | None]]) -> tuple[list, ShapeEnv] | None:
    """The sizes ``sizes`` names -- ``(tensor node, dim)`` for a size of a tensor, ``(node,
    None)`` for an int the graph computes -- of a torch-level ``graph`` still being
    captured, as ints or :class:`SymInt` expressions over the dynamic dims of its inputs;
    None when the symbolic run cannot follow the graph. The shape environment comes with
    them: its guards are what showing it relied on (a slice ``mask[:t]`` of a 32-row buffer
    is ``t`` rows only while ``t <= 32``).

    Dynamo asks this when Python code decides something from a size the graph computed
    (``q_len > 1`` where ``q_len = q.shape[2]``): the graph so far is decomposed with
    symbolic input sizes, as AOT would, and the size read from the symbolic shapes, so the
    decision can be guarded in terms of the inputs' sizes."""
    copy = Graph.derived_from(graph, "symbolic_sizes")
    val_map: dict[Node, Any] = {}
    copy.graph_copy(graph, val_map)
    copy.output(tuple(val_map[n] for n, _ in sizes))
    shape_env = ShapeEnv()
    try:
        functional = functionalize(copy)
        prim_graph, _ = decompose(functional.graph,
                                  symbolic_input_metas(inputs, dynamic_dims, shape_env))
    except Exception:  # anything the symbolic run cannot follow gives no answer
        return None
    values = []
    for out, (_, dim) in zip(prim_graph.output_node.args[0], sizes):
        if dim is None:
            value = out
        else:
            shape = getattr(out.meta.get("tensor_meta"), "shape", ())
            value = shape[dim] if -len(shape) <= dim < len(shape) else None
        if isinstance(value, Node):  # an int computed from sizes: its SymInt
            value = value.meta.get("sym")
        if not isinstance(value, (int, SymInt)) or isinstance(value, bool):
            return None
        values.append(value)
    return values, shape_env
