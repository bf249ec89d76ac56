"""OutputGraph: the graph under construction while the translator runs.

It owns the :class:`~tutorcompile.fx.Graph` being built and everything about its inputs:

* graph inputs, each with the *source* it is fetched from on every call
  (``L['x']``, ``L['self']._modules['fc']._parameters['weight']``);
* one node per torch-level call, each run on *fake* tensors (``FakeTensorMode``) to learn the
  result's shape, dtype and device without computing anything, and each tagged with the
  user's source line in ``node.meta['source']``;
* symbolic sizes (``x.size(0)`` nodes) for dynamic dimensions;
* ``rollback``: an instruction that breaks the graph leaves no trace in it.

Mirrors: torch/_dynamo/output_graph.py.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import re
import sys
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import FakeTensorMode

from ..amp import autocast_casts, autocast_on, regions
from ..aot.prim_graph import symbolic_sizes as run_symbolically
from ..fx import Graph, GraphModule
from ..fx.aliasing import same_storage
from ..fx.interpreter import tensor_meta
from ..fx.node import Node, map_aggregate
from ..fx.passes.dce_cse import operator_schemas, written_arguments
from ..fx.symbolic_shapes import pycode
from ..ops.foreach import foreach_name, per_tensor_calls
from ..ops.higher_order import body_input, call_tensor_hook
from .exc import TracedException, Unsupported
from .source import Source
from .variables import (
    ConstantVariable,
    ConstDictVariable,
    ListVariable,
    NamedTupleVariable,
    SizeVariable,
    SymIntVariable,
    TensorVariable,
    TupleVariable,
    VariableTracker,
    is_constant_value,
)

if TYPE_CHECKING:  # pragma: no cover
    from .symbolic_convert import InstructionTranslator


class _ShapeGuard(NamedTuple):
    """A guard a symbolic run relied on, as Python over the inputs' sizes."""
    expr: str
    reason: str
    specializes: bool


def graph_symbolic_sizes(graph: Graph, example_inputs: list, dims: list, sizes: list):
    """:func:`tutorcompile.aot.prim_graph.symbolic_sizes`: the sizes of ``graph``'s nodes as
    expressions over the inputs' dynamic dims, from AOT's symbolic run of its prims. Capture
    asks it here (a graph mid-capture; the pieces of a DDP split) and nowhere else."""
    return run_symbolically(graph, example_inputs, dims, sizes)


def placeholder_name(source: Source) -> str:
    return re.sub(r"[^0-9a-zA-Z]+", "_", source.name()).strip("_").lower() or "arg"


class OutputGraph:
    """The graph being captured, its inputs (with sources) and its fake-tensor mode."""

    def __init__(self, tx: InstructionTranslator):
        self.tx = tx
        self.graph = Graph(provenance="dynamo")
        self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
        self.input_sources: list[Source] = []
        self.input_values: list[torch.Tensor] = []
        self.input_nodes: list[Node] = []
        self.inputs_by_id: dict[int, TensorVariable] = {}
        self.created: list[Node] = []  # every node, in creation order (for rollback)
        self.any_dynamic = False
        self._symints: dict[tuple[Node, int], SymIntVariable] = {}
        self._detached: dict[Node, TensorVariable] = {}
        self.bodies_open = 0   # higher-order ops' functions being traced, one in another
        # tensor.register_hook in the traced code: per tensor, its hook nodes, in order
        self.tensor_hooks: dict[Node, list[Node]] = {}

    # --- inputs ---------------------------------------------------------------------------
    def add_input(self, value: torch.Tensor, source: Source,
                  dynamic_dims: frozenset[int]) -> TensorVariable:
        node = self.graph.placeholder(_unique(self.graph, placeholder_name(source)))
        fake = self.fake_mode.from_tensor(value)
        node.meta.update(example_value=fake, tensor_meta=tensor_meta(fake),
                         source=f"input {source.name()}", dynamic_dims=dynamic_dims)
        self.created.append(node)
        self.input_sources.append(source)
        self.input_values.append(value)
        self.input_nodes.append(node)
        vt = TensorVariable(node, fake, source, dynamic_dims)
        vt.real = value
        self.inputs_by_id[id(value)] = vt
        if dynamic_dims:
            self.any_dynamic = True
        return vt

    def is_dynamic_tensor(self, vt: TensorVariable) -> bool:
        if vt.source is not None and vt.node.op == "placeholder":
            return bool(vt.dynamic_dims)
        return self.any_dynamic

    def size_symint(self, vt: TensorVariable, dim: int) -> SymIntVariable:
        key = (vt.node, dim)
        if key not in self._symints:
            node = self.graph.call_method("size", (vt.node, dim))
            node.meta["source"] = self.tx.current_source_line()
            self.created.append(node)
            expr = (f"{vt.source.name()}.size()[{dim}]"
                    if vt.source is not None and vt.node.op == "placeholder" else None)
            self._symints[key] = SymIntVariable(node, int(vt.fake.shape[dim]), expr)
        return self._symints[key]

    # --- nodes ---------------------------------------------------------------------------
    def create_node(self, op: str, target: Any, args: tuple, kwargs: dict) -> VariableTracker:
        """Add ``target(*args, **kwargs)`` to the graph, run it on fake values, wrap it.

        Under ``torch.autocast`` (around the call, or a region traced in it) the casts
        autocast makes are added first, as ``.to(dtype)`` nodes of the inputs
        (:meth:`autocast_inputs`), and the op runs on the fake values under that state."""
        args = tuple(_as_vt(a) for a in args)
        kwargs = {k: _as_vt(v) for k, v in kwargs.items()}
        entered = self.tx.autocast_stack
        if not entered and not autocast_on():
            return self._create_node(op, target, args, kwargs)
        with regions(entered):
            if autocast_on():
                args, kwargs = self.autocast_inputs(op, target, args, kwargs)
            return self._create_node(op, target, args, kwargs)

    def _known_scalars(self, op: str, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        """The arguments of a call that needs the data of a one-element tensor, with each
        such tensor computed from constants alone (``tx.known_constant``) replaced by its
        number -- or None when there is none. compressai permutes by a tensor of indices it
        builds from literals (``x.permute(*perm)``, ``perm = torch.cat((torch.tensor([1,
        0]), torch.arange(2, x.ndim)))``): its items are the same numbers on every call, so
        the graph holds them as constants. (A call's receiver stays the tensor it is.)"""
        replaced = False

        def number(a: VariableTracker, receiver: bool = False) -> VariableTracker:
            nonlocal replaced
            if type(a) is ListVariable or type(a) is TupleVariable:
                return type(a)([number(i) for i in a.items])
            if not isinstance(a, TensorVariable) or receiver or a.fake.numel() != 1:
                return a
            value = self.tx.known_constant(a)
            if value is None:
                return a
            replaced = True
            return ConstantVariable(value.item())

        new_args = tuple(number(a, op == "call_method" and i == 0) for i, a in enumerate(args))
        new_kwargs = {k: number(v) for k, v in kwargs.items()}
        return (new_args, new_kwargs) if replaced else None

    def autocast_inputs(self, op: str, target: Any, args: tuple, kwargs: dict
                        ) -> tuple[tuple, dict]:
        """The arguments of a call made under autocast, with the casts autocast would make
        added to the graph (``x.to(torch.bfloat16)`` for ``F.linear``'s inputs): the graph
        then computes in eager's dtypes with no autocast state at run time. A call whose
        autocast policy does more than cast its inputs is a graph break."""
        tensors: list[TensorVariable] = []
        for a in (*args, *kwargs.values()):
            if isinstance(a, TensorVariable):
                tensors.append(a)
            elif type(a) in (ListVariable, TupleVariable):   # torch.cat([a, b]): promoted
                tensors += [i for i in a.items if isinstance(i, TensorVariable)]
        if not tensors:
            return args, kwargs

        def rebuild(values: list, as_vt: bool) -> tuple[tuple, dict]:
            it = iter(values)

            def one(a):
                if isinstance(a, TensorVariable):
                    return next(it)
                if type(a) in (ListVariable, TupleVariable) and any(
                        isinstance(i, TensorVariable) for i in a.items):
                    items = [next(it) if isinstance(i, TensorVariable) else
                             i if as_vt else i.example() for i in a.items]
                    return type(a)(items) if as_vt else a.python_type()(items)
                return a if as_vt else a.example()
            return tuple(one(a) for a in args), {k: one(v) for k, v in kwargs.items()}

        def run(values: list) -> Any:
            ex_args, ex_kwargs = rebuild(values, as_vt=False)
            if op == "call_method":
                return getattr(ex_args[0], target)(*ex_args[1:], **ex_kwargs)
            return target(*ex_args, **ex_kwargs)

        what = target if isinstance(target, str) else getattr(target, "__name__", target)
        mutates = what.endswith("_") and not what.endswith("__") or "out" in kwargs
        try:
            with self.fake_mode, _quiet_fake_tensor_log(), \
                    torch.set_grad_enabled(self.tx.grad_enabled):
                casts = autocast_casts(run, [t.example() for t in tensors], mutates)
        except Exception as e:  # noqa: BLE001 -- never a call without the casts it may need
            raise Unsupported(f"{what} under torch.autocast: its casts could not be found on "
                              f"fake tensors ({type(e).__name__}: {e})") from None
        if casts is None:
            raise Unsupported(f"{what} under torch.autocast: autocast does more than cast its "
                              "inputs (casts inside the op, or a write to a cast copy), which "
                              "the graph cannot say as casts")
        if not casts:
            return args, kwargs
        values: list[VariableTracker] = list(tensors)
        for i, dtype in casts.items():
            values[i] = self._create_node("call_method", "to", (tensors[i],),
                                          {"dtype": ConstantVariable(dtype)})
        return rebuild(values, as_vt=True)

    def _create_node(self, op: str, target: Any, args: tuple, kwargs: dict
                     ) -> VariableTracker:
        no_grad = not self.tx.grad_enabled
        given = (args, kwargs)
        if no_grad:  # inside a traced torch.no_grad block: cut the op from autograd
            args = tuple(self.detached(a) for a in args)
            kwargs = {k: self.detached(v) for k, v in kwargs.items()}
        proxy_args = tuple(_python_number(a.as_proxy()) for a in args)
        proxy_kwargs = {k: _python_number(v.as_proxy()) for k, v in kwargs.items()}
        if not no_grad and any(n.meta.get("made_leaf") for n in _nodes_in(proxy_args)
                               + _nodes_in(proxy_kwargs)):
            raise Unsupported("a tensor that requires_grad_() made a leaf under no_grad, "
                              "used with gradients on (autograd state the graph does not "
                              "hold)")
        ex_args = tuple(_python_number(a.example()) for a in args)
        ex_kwargs = {k: _python_number(v.example()) for k, v in kwargs.items()}
        what = target if isinstance(target, str) else getattr(target, "__name__", target)
        try:
            if _foreach_in_place(what, op):
                # ``torch._foreach_addcdiv_(params, ..., step_sizes)`` (Adam's foreach step):
                # writes its first list, returns nothing, changes no shape -- and the fake
                # kernels refuse its tensor of scalars ("expected scalars on CPU, got meta")
                out = None
            else:
                with self.fake_mode, _quiet_fake_tensor_log(), \
                        torch.set_grad_enabled(not no_grad):
                    fn = getattr(ex_args[0], target) if op == "call_method" else target
                    call_args = ex_args[1:] if op == "call_method" else ex_args
                    if target in (operator.getitem, operator.setitem, "__getitem__",
                                  "__setitem__"):
                        call_args = _selects_for_scalar_indices(call_args, op)
                    out = _run_on_fakes(fn, call_args, ex_kwargs)
        except Unsupported:
            raise
        except TypeError as e:
            # the arguments do not fit the function (``torch.stack`` of Python floats): eager
            # raises the same, so the traced code raises it -- a handler may catch it, and
            # else the frame runs uncompiled from its start, where any choice it made on
            # ``torch.compiler.is_compiling()`` is made again as eager makes it
            raise TracedException(e) from None
        except Exception as e:
            kind = type(e).__name__
            if "DataDependent" in kind:
                known = self._known_scalars(op, args, kwargs)
                if known is not None:
                    return self._create_node(op, target, *known)
            if "DynamicOutputShape" in kind or "DataDependent" in kind:
                raise Unsupported(f"{what}: output depends on tensor data ({kind})") from None
            raise Unsupported(f"{what} failed on fake tensors: {kind}: {e}") from None
        if isinstance(out, (tuple, list)) and what in _COUNT_FROM_SIZE and any(
                isinstance(a, TensorVariable) and self.is_dynamic_tensor(a) for a in args) \
                and not self.count_is_static(what, proxy_args, proxy_kwargs, len(out)):
            # ``a, b, c = t.unbind(0)``: unrolled to the example's count, the graph would be
            # silently wrong for another size of a dynamic dimension
            raise Unsupported(f"{what} of a dynamically shaped tensor: the number of results "
                              "depends on a dynamic size")
        if (out is None or is_constant_value(out) and not isinstance(out, (int, float))) \
                and not _acts(what, kwargs, target):
            # a fact about the inputs' metadata (F._none_or_dtype's dtype, a bool), which
            # the tensors' guards already fix: a constant, not a node a later stage must run
            return ConstantVariable(out)
        if (out is None or is_constant_value(out) or _constants(out)) \
                and op == "call_function" and _is_query(what) and not _nodes_in(proxy_args) \
                and not _nodes_in(proxy_kwargs):
            # no graph value among the arguments: a fact about global state
            # (``torch.are_deterministic_algorithms_enabled()``, the optimizers'
            # ``_get_foreach_kernels_supported_devices()``), guarded by asking again
            self.tx.guards.CALL_RESULT(target, ex_args, ex_kwargs, out)
            if isinstance(out, (list, tuple)):
                return (ListVariable if isinstance(out, list) else TupleVariable)(
                    [ConstantVariable(v) for v in out])
            return ConstantVariable(out)
        node = self.graph.create_node(op, target, proxy_args, proxy_kwargs)
        self.created.append(node)
        node.meta["source"] = self.tx.current_source_line()
        node.meta["example_value"] = out
        meta = tensor_meta(out)
        if meta is not None:
            node.meta["tensor_meta"] = meta
        written = _written_result(out, (ex_args, ex_kwargs), given)
        if written is not None:
            return written
        if isinstance(out, torch.Tensor) and ex_args and isinstance(ex_args[0], torch.Tensor):
            # whether the result shares its input's memory (``diagonal``, ``unfold``, a
            # reshape that views -- not one that copies): AOT's functionalization writes
            # back through views, and only through views
            node.meta["aliases_input"] = same_storage(out, ex_args[0])
        return self.wrap_output(node, out)

    def count_is_static(self, what: str, args: tuple, kwargs: dict, count: int) -> bool:
        """Does ``t.split(c, dim)`` (``chunk``, ``unbind``...) give ``count`` results for
        every size the graph will be called with? Symbolic shapes
        (:meth:`symbolic_sizes`) answer: when the size along ``dim`` and the sizes passed
        in do not depend on the dynamic dims (``qkv(x).split(c, dim=2)`` with a dynamic
        batch splits 3 ways for every batch), or when the count is a function of them that
        a guard can keep (``x.chunk(2, -1)`` of a dynamic width ``s`` gives
        ``ceil(s / ceil(s / 2))`` results: 2 for every ``s >= 2``, the guard says so). A
        count that only one size gives (``unbind`` of a dynamic dim) would pin the graph to
        that size: a break is better."""
        if what not in _DIM_POSITION or not args or not isinstance(args[0], Node):
            return False
        position = _DIM_POSITION[what]
        dim = kwargs.get("dim", args[position] if len(args) > position else 0)
        if not isinstance(dim, int):
            return False
        passed = _nodes_in((args[1:], kwargs))
        sizes: list[tuple[Node, int | None]] = [(args[0], dim)] + [(n, None) for n in passed]
        found = self.symbolic_sizes(sizes, f"{what}'s count is static")
        guarded = self.tx.guards.guards
        if found is None or any(guard.specializes and not _already_guarded(guard.expr, guarded)
                                for guard in found[1]):
            return False  # (a graph pinned to one size is worse than the break)
        values, guards = found
        if all(isinstance(v, int) for v in values):
            self._install(guards)
            return True
        exprs = {n: v for n, v in zip(passed, values[1:])}
        count_expr = _count_expression(what, values[0], args[1:position], kwargs, exprs)
        if count_expr is None:
            return False
        self._install(guards)
        if count_expr != str(count):
            self.tx.guards.SHAPE_ENV(f"({count_expr}) == {count}",
                                     f"{what} gives {count} results")
        return True

    def size_expression(self, vt: SymIntVariable) -> str | None:
        """``vt``'s value as Python over the inputs' sizes (``L['x'].size()[1] - 1``) for an
        int the graph computes from an intermediate tensor's size (``q.shape[2]`` of a
        query made by a ``view``), so that a decision on it can be guarded; None when the
        symbolic run cannot follow the graph so far. What the run relied on is guarded."""
        if vt.expr is None:
            found = self.symbolic_sizes([(vt.node, None)], f"the size {vt.node.name}")
            if found is not None:
                (value,), guards = found
                vt.expr = str(value)
                self._install(guards)
        return vt.expr

    def symbolic_sizes(self, sizes: list[tuple[Node, int | None]], why: str):
        """:func:`tutorcompile.aot.prim_graph.symbolic_sizes` of the graph so far, in terms
        of the inputs: each size as a Python expression over the inputs' sizes (``s1 - 1``
        is ``L['idx'].size()[1] - 1``), with what showing it relied on as guards
        (``(guard, why)`` pairs); None when the symbolic run cannot follow the graph."""
        placeholders = self.graph.placeholders
        if any(p not in self.input_nodes for p in placeholders):
            return None
        where = [self.input_nodes.index(p) for p in placeholders]
        dims = [p.meta.get("dynamic_dims", frozenset()) for p in placeholders]
        found = graph_symbolic_sizes(self.graph, [self.input_values[i] for i in where], dims, sizes)
        if found is None:
            return None
        values, shape_env = found
        names = {str(s): f"{self.input_sources[where[i]].name()}.size()[{d}]"
                 for s, (i, d) in shape_env.var_to_source.items()}

        def in_inputs(expr) -> str:
            return re.sub(r"\bs\d+\b", lambda m: names[m.group()], pycode(expr))

        exprs = [in_inputs(getattr(v, "expr", v)) for v in values]
        guards = [_ShapeGuard(in_inputs(g.expr), f"{why}: {g.reason}", g.specializes)
                  for g in shape_env.guards]
        return [v if isinstance(v, int) else e for v, e in zip(values, exprs)], guards

    def _install(self, guards: list[_ShapeGuard]) -> None:
        for guard in guards:
            self.tx.guards.SHAPE_ENV(guard.expr, guard.reason)

    def detached(self, vt: VariableTracker) -> VariableTracker:
        """``vt.detach()`` as a graph node when ``vt`` is a tensor that requires grad."""
        if isinstance(vt, (ListVariable, TupleVariable)) and not isinstance(vt, SizeVariable):
            return type(vt)([self.detached(i) for i in vt.items])
        if not isinstance(vt, TensorVariable) or not vt.fake.requires_grad:
            return vt
        if vt.node not in self._detached:
            node = self.graph.call_method("detach", (vt.node,))
            node.meta.update(source=self.tx.current_source_line(),
                             example_value=vt.fake.detach())
            node.meta["tensor_meta"] = tensor_meta(node.meta["example_value"])
            self.created.append(node)
            self._detached[vt.node] = TensorVariable(node, node.meta["example_value"])
        return self._detached[vt.node]

    def wrap_output(self, node: Node, out: Any) -> VariableTracker:
        if isinstance(out, torch.Tensor):
            return TensorVariable(node, out)
        if isinstance(out, (tuple, list)) and not isinstance(out, torch.Size):
            items = [self._wrap_item(node, i, item) for i, item in enumerate(out)]
            if hasattr(out, "_fields") or type(out).__module__ == "torch.return_types":
                return NamedTupleVariable(items, type(out))
            return TupleVariable(items) if isinstance(out, tuple) else ListVariable(items)
        if type(out) is dict and all(is_constant_value(k) for k in out):
            # a transform's gradients of a dict of parameters: one getitem per key
            return ConstDictVariable({key: self._wrap_item(node, key, item)
                                      for key, item in out.items()})
        if isinstance(out, torch.Size):
            return SizeVariable([ConstantVariable(int(s)) for s in out])
        if isinstance(out, int) and not isinstance(out, bool) and self.any_dynamic:
            return SymIntVariable(node, out, None)
        if out is None or is_constant_value(out):
            return ConstantVariable(out)
        raise Unsupported(f"{node.target} returned a {type(out).__name__}")

    def body_input(self, fake: Any) -> TensorVariable:
        """A stand-in for an input of a higher-order op's body, traced in this graph until
        :meth:`cut_subgraph` makes it a placeholder of the body."""
        node = self.graph.call_function(body_input, ())
        node.meta.update(source=self.tx.current_source_line(), example_value=fake,
                         tensor_meta=tensor_meta(fake))
        self.created.append(node)
        return TensorVariable(node, fake)

    def cut_subgraph(self, mark: int, inputs: list[Node], outputs: Any, name: str
                     ) -> tuple[GraphModule, list[Node]]:
        """Move the computation traced since ``mark`` out of this graph into a body of its
        own: ``body(*inputs, *free)``, returning ``outputs`` (nodes, in tuples and lists).
        ``free`` are the nodes of this graph the body reads -- graph inputs, values computed
        before ``mark``, a body output passed through unchanged -- lifted to inputs of the
        body; the caller passes them to the node that calls it. Graph inputs first read
        inside the body stay inputs of this graph."""
        moved = [n for n in self.created[mark:] if n.op in ("call_function", "call_method")
                 and n not in inputs]
        inside = set(moved)
        body = Graph(provenance=f"dynamo ({name} body)")
        env: dict[Node, Node] = {}
        free: list[Node] = []

        def lift(node: Node) -> Node:
            if node not in env:
                env[node] = body.placeholder(_unique(body, node.name))
                env[node].meta = dict(node.meta)
                free.append(node)
            return env[node]
        for node in inputs:
            env[node] = body.placeholder(_unique(body, node.name))
            env[node].meta = dict(node.meta)
        for node in moved:
            env[node] = body.node_copy(node, lambda a: env[a] if a in inside or a in env
                                       else lift(a))
        result = map_aggregate(outputs, lambda a: (env[a] if a in env else lift(a))
                               if isinstance(a, Node) else a)
        body.output(result)
        body.lint()
        for node in reversed(inputs + moved):
            self.graph.erase_node(node)
        self.created = [n for n in self.created if not n._erased]
        self._forget_erased()
        return GraphModule({}, body, f"{name}_body"), free

    def hook_gradient(self, tensor: Node, body: GraphModule, free: list[Node]) -> None:
        """Add a :func:`call_tensor_hook` node: ``tensor``'s gradient passes through
        ``body(grad, *free)`` (a traced ``tensor.register_hook``). It is made now, at the
        end of the graph, so that a break rolls it back with the instruction that made
        it; :meth:`apply_tensor_hooks` moves it, once the graph is complete, right after
        ``tensor`` and the values ``body`` reads (its *anchor*), where every use of
        ``tensor`` can read it. A use already made before the anchor (``s = t.sum();
        t.register_hook(lambda g: g * s)``) would escape the hook: a break."""
        order = {n: i for i, n in enumerate(self.graph.nodes)}
        hooks = self.tensor_hooks.get(tensor, [])
        anchor = max([tensor, *free, *(a for h in hooks for a in h.args[2:])],
                     key=order.__getitem__)
        if any(order[user] <= order[anchor] and user.target is not call_tensor_hook
               and _holds_tensor(user.meta.get("example_value")) for user in tensor.users):
            raise Unsupported("tensor.register_hook() with a hook that reads a value "
                              "computed from the tensor: that use would escape the hook")
        hook = self.graph.call_function(call_tensor_hook, (body, tensor, *free))
        with self.fake_mode:
            example = tensor.meta["example_value"].clone()
        hook.meta.update(source=self.tx.current_source_line(), example_value=example,
                         tensor_meta=tensor_meta(example))
        self.created.append(hook)
        self.tensor_hooks[tensor] = [*hooks, hook]

    def apply_tensor_hooks(self) -> None:
        """Move each tensor's hooks after their anchor, chained, and make every later use
        of the tensor -- the graph's output too -- read the end of the chain (hooks run in
        the order they were registered, each on what the one before returned; the backward
        meets the chain from its end, so the first hook goes last)."""
        for tensor, hooks in self.tensor_hooks.items():
            hooks = [h for h in hooks if not h._erased]    # (a break rolled some back)
            if not hooks:
                continue
            made = [(h.args[0], h.args[2:], h.meta) for h in hooks]
            for hook in hooks:
                self.graph.erase_node(hook)
            order = {n: i for i, n in enumerate(self.graph.nodes)}
            anchor = max([tensor, *(a for _, free, _ in made for a in free)],
                         key=order.__getitem__)
            later = {n for n in self.graph.nodes if order[n] > order[anchor]}
            value = tensor
            with self.graph.inserting_after(anchor):
                for body, free, meta in reversed(made):
                    value = self.graph.call_function(call_tensor_hook, (body, value, *free))
                    value.meta = dict(meta)
            tensor.replace_all_uses_with(value, later.__contains__)
        self.created = [n for n in self.created if not n._erased]

    def _wrap_item(self, node: Node, key: Any, item: Any) -> VariableTracker:
        """``node[key]`` (one result of a call returning several), as a node and a tracker."""
        getitem = self.graph.call_function(operator.getitem, (node, key))
        getitem.meta.update(source=node.meta.get("source"), example_value=item)
        self.created.append(getitem)
        return self.wrap_output(getitem, item)

    def rollback(self, mark: int) -> None:
        """Remove every node created after ``mark`` (an instruction that broke)."""
        for node in reversed(self.created[mark:]):
            if node.op == "placeholder":
                i = self.input_nodes.index(node)
                del self.input_sources[i], self.input_nodes[i]
                value = self.input_values.pop(i)
                self.inputs_by_id.pop(id(value), None)
            for user in list(node.users):
                if user.graph is self.graph and user not in self.created[mark:]:
                    raise AssertionError("rollback would orphan a node")
            self.graph.erase_node(node)
        del self.created[mark:]
        self._forget_erased()
        self.any_dynamic = any(v.dynamic_dims for v in self.inputs_by_id.values())

    def _forget_erased(self) -> None:
        """Drop the size and detach nodes remembered for reuse that were erased."""
        self._symints = {k: v for k, v in self._symints.items() if not k[0]._erased}
        self._detached = {k: v for k, v in self._detached.items()
                          if not k._erased and not v.node._erased}

    @property
    def op_count(self) -> int:
        return sum(1 for n in self.graph.nodes if n.op not in ("placeholder", "output"))


# ops whose number of results follows a size of their input
_COUNT_FROM_SIZE = {"unbind", "split", "chunk", "tensor_split", "unsafe_split", "unsafe_chunk",
                    "hsplit", "vsplit", "dsplit"}
# where their ``dim`` argument sits (the others are refused on dynamically shaped tensors)
_DIM_POSITION = {"unbind": 1, "split": 2, "chunk": 2, "tensor_split": 2, "unsafe_split": 2,
                 "unsafe_chunk": 2}


def _count_expression(what: str, size: int | str, passed: tuple, kwargs: dict,
                      exprs: dict) -> str | None:
    """How many results ``what`` gives along a dimension of ``size`` (an int or Python over
    the inputs' sizes), as Python; None when that is not known here. ``passed`` are the
    arguments between the tensor and ``dim``; ``exprs`` the expressions of graph nodes
    among them (a split size computed from a size)."""
    def as_expr(value) -> str | None:
        if isinstance(value, bool) or value is None:
            return None
        if isinstance(value, int):
            return str(value)
        return f"({exprs[value]})" if value in exprs else None
    arg = passed[0] if passed else next(
        (kwargs[k] for k in ("chunks", "split_size", "split_size_or_sections", "sections",
                             "indices_or_sections") if k in kwargs), None)
    if what in ("split", "unsafe_split", "tensor_split") and isinstance(arg, (list, tuple)):
        return str(len(arg) + (what == "tensor_split"))  # sizes or indices: a fixed count
    if what == "tensor_split":
        return as_expr(arg)  # that many sections, whatever the size
    n, s = as_expr(arg), f"({size})"
    if n is None:
        return None
    if what in ("split", "unsafe_split"):
        return f"({s} + {n} - 1) // {n}"
    if what in ("chunk", "unsafe_chunk"):
        each = f"(({s} + {n} - 1) // {n})"
        return f"({s} + {each} - 1) // {each}"
    return None  # unbind: one result per element, a count only one size gives


def _acts(what: Any, kwargs: dict, target: Any = None) -> bool:
    """Does a call do something beyond its result: write into a tensor (``t[i] = v``,
    ``add_``, ``out=``) or check one at run time (``torch._assert``)? An operator says so in
    its schema (``Tensor(a!) x``, or nothing returned: a custom op made with
    ``mutates_args``, called as ``torch.ops.ns.op`` or through its ``CustomOpDef``)."""
    if any(not s.returns for s in operator_schemas(target)) or written_arguments(target):
        return True
    name = what if isinstance(what, str) else getattr(what, "__name__", str(what))
    return name in ("setitem", "_assert", "_assert_async") or name.startswith("_check") or \
        name.endswith("_") and not name.endswith("__") or "out" in kwargs


def _written_result(out: Any, examples: tuple, given: tuple) -> VariableTracker | None:
    """The tracker a call returns when it returns a tensor it was given: an in-place op
    (``r = t.add_(1)``) or ``out=`` (``self._u = F.normalize(..., out=self._u)``, spectral
    norm's power iteration) returns that same tensor, as ``r is t`` says in eager. A new
    tracker would be another object: an assignment of it would replace a module's buffer
    by a graph output, and ``is`` would be False. The fake kernel returns the fake it wrote
    (the same object); a write that changed the metadata (``unsqueeze_``) keeps the node."""
    if not isinstance(out, torch.Tensor):
        return None
    (ex_args, ex_kwargs), (args, kwargs) = examples, given
    pairs = list(zip(ex_args, args)) + [(ex_kwargs[k], kwargs[k]) for k in ex_kwargs
                                         if k in kwargs]
    for example, vt in pairs:
        if example is out and isinstance(vt, TensorVariable):
            fake = vt.fake
            if (fake.shape, fake.stride(), fake.dtype) == (out.shape, out.stride(), out.dtype):
                return vt
            return None
    return None


def _python_number(value: Any) -> Any:
    """A NumPy scalar (``np.float32(1.5)``, ``np.sqrt(2.0)``) as the Python number torch
    takes it for (``x * np.float64(2)`` stays float32): later stages see plain numbers."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.generic) and value.ndim == 0:
        return value.item()
    return value


def _foreach_in_place(what: Any, op: str) -> bool:
    return op == "call_function" and isinstance(what, str) and \
        what.startswith("_foreach_") and what.endswith("_")


def _constants(value: Any) -> bool:
    """Is ``value`` a list or tuple (not a named one) of Python constants?"""
    return type(value) in (list, tuple) and all(is_constant_value(v) for v in value)


def _is_query(what: Any) -> bool:
    """Does the name say the call only asks (``is_``, ``are_``, ``get_``, ``has_``...)? A
    guard may call it again on every cache hit, so it must have no effect."""
    name = (what if isinstance(what, str) else getattr(what, "__name__", "")).lstrip("_")
    return name.startswith(("is_", "are_", "get_", "has_"))


def _already_guarded(expr: str, guards: list) -> bool:
    """Is ``expr`` (``(L['x'].size()[1] == 9)``) a guard the graph already has? A length
    that Mamba's scan, unrolled, specialised pins the graph to it already: the symbolic run
    finding it again is no reason to break."""
    return any(expr in (g.expr, f"({g.expr})") for g in guards)


def _nodes_in(value: Any) -> list[Node]:
    if isinstance(value, Node):
        return [value]
    if isinstance(value, (tuple, list)):
        return [n for v in value for n in _nodes_in(v)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _nodes_in(v)]
    return []


def _holds_tensor(value: Any) -> bool:
    """Is ``value`` (a node's example value) a tensor, or a tuple or list holding one?"""
    if isinstance(value, (tuple, list)):
        return any(map(_holds_tensor, value))
    return isinstance(value, torch.Tensor)


def _is_scalar_index(v: Any) -> bool:
    return isinstance(v, torch.Tensor) and v.dim() == 0 and v.dtype not in (
        torch.bool, torch.uint8) and not v.is_floating_point() and not v.is_complex()


def _selects_for_scalar_indices(args: tuple, op: str) -> tuple:
    """``x[i]`` with ``i`` a 0-d integer tensor (``self._t[torch.bucketize(t, self._t)]``,
    torchcde's spline lookup), read or written, is ``x.select(0, i.item())`` in eager:
    PyTorch's indexing turns every 0-d integer tensor of an index into a select before any
    advanced index, so the result drops that dimension and views ``x``. On fake tensors
    ``.item()`` has no value; the result's shape, dtype and aliasing are the same for every
    in-range index, so the fake run selects index 0 instead -- the graph keeps the tensor
    index and computes the real one when it runs, and AOT writes back through it as through
    any index. (A 0-d bool or uint8 tensor is a mask: how many elements it keeps depends on
    its value.)

    Mirrors: torch/csrc/autograd/python_variable_indexing.cpp (applySlicing)."""
    at = 1 if op == "call_function" else 0
    if len(args) <= at:
        return args
    index = args[at]
    if _is_scalar_index(index):
        index = 0
    elif type(index) is tuple and any(_is_scalar_index(v) for v in index):
        index = tuple(0 if _is_scalar_index(v) else v for v in index)
    else:
        return args
    return (*args[:at], index, *args[at + 1:])


def _run_on_fakes(fn, args: tuple, kwargs: dict) -> Any:
    """``fn`` on fake tensors. An op whose C++ kernel is a composite that reads its input's
    values only to check them (``torch.istft`` asks ``.item()`` whether the window's envelope
    is nonzero) fails so on fake tensors; it is run again with the Python dispatcher on, where
    such ops run their Python decomposition (``torch._refs.istft``), which computes the same
    shapes without the value check. A foreach op given a tensor scalar fails so too; its
    per-tensor calls give its results' shapes (:mod:`tutorcompile.ops.foreach`).

    Mirrors: torch/_dynamo/output_graph.py (Dynamo traces under enable_python_dispatcher)."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:
        if "DataDependent" not in type(e).__name__:
            raise
        name = foreach_name(fn)
        if name is not None:
            # ``torch._foreach_add(xs, lr)``: the fake kernel asks a tensor scalar for its
            # value; the per-tensor calls (``torch.add(x, lr)``) give the same shapes
            return [f(*a, **k) for f, a, k in per_tensor_calls(name, args, kwargs)]
        with enable_python_dispatcher():
            try:
                return fn(*args, **kwargs)
            except Exception:  # noqa: BLE001 -- the first failure says what went wrong
                raise e from None


@contextlib.contextmanager
def _quiet_fake_tensor_log():
    """FakeTensorMode logs a traceback when an op fails on fake inputs; for us that is an
    ordinary graph break (the real error surfaces when the instruction runs for real)."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    old = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(old)


def _unique(graph: Graph, name: str) -> str:
    taken = {n.target for n in graph.placeholders}
    candidate, i = name, 1
    while candidate in taken:
        candidate, i = f"{name}_{i}", i + 1
    return candidate


def _as_vt(v: Any) -> VariableTracker:
    if isinstance(v, VariableTracker):
        return v
    return ConstantVariable(v)
