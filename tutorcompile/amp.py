"""Mixed precision as explicit casts: what ``torch.autocast`` does to one call, written down.

Under ``torch.autocast("cpu", dtype=torch.bfloat16)`` PyTorch's dispatcher changes the
dtypes a call computes in: its **Autocast** dispatch key sits in front of each ATen op and,
by the op's policy, casts the floating-point arguments first -- to bfloat16 for the ops on
the lower-precision list (``linear``, ``matmul``, ``conv2d``...), to float32 for the ops on
the float32 list (``mse_loss``...), to the widest dtype for the promote list (``cat``,
``stack``) -- and leaves every other op alone. The casts are ordinary ``aten._to_copy``
calls, differentiable like any other.

A compiled graph must compute the same thing with no autocast state at run time: generated
C++ or Triton kernels never meet the dispatcher, and our AOT stage decomposes torch calls by
its own table. So the casts are made explicit when the graph is captured: each torch call
made while autocast is on is run on fake tensors under a ``TorchDispatchMode``, which
sits *below* the Autocast key and so sees the casts it inserted -- ``_to_copy`` calls whose
argument is, by identity, one of the call's own inputs. The graph then gets
``x.to(torch.bfloat16)`` before the call instead of the autocast state around it.

That rewrite is only right when all autocast did was cast the call's inputs. A call with
no policy of its own whose implementation calls ops that have one (``torch.einsum``: autocast
casts the reshaped views it hands ``bmm``) would be silently different, so
:func:`autocast_casts` checks: the call is run again on the cast inputs with autocast off,
and the ATen ops it runs (with their argument and result dtypes) must be exactly the ops it
ran under autocast, less the input casts. When they are not, the answer is None and the
caller breaks the graph there, naming the call.

Autocast's weight cache (a parameter cast once per region) is turned off while probing: a
cached cast has the same values as a fresh one, but would hide the cast from the probe.

Mirrors: what torch/_dynamo/variables/ctx_manager.py (``AutocastModeVariable``) and AOT
tracing through the Autocast key (aten/src/ATen/autocast_mode.cpp) achieve together; real
Dynamo records ``torch.amp._enter_autocast``/``_exit_autocast`` nodes and lets AOTAutograd's
``make_fx`` see the casts in the ATen graph.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .errors import TutorcompileError
from .fx import Graph, GraphModule, Node
from .fx.node import map_arg

AUTOCAST_DEVICES = ("cpu", "cuda")


def autocast_state() -> tuple:
    """The autocast state that decides a graph's dtypes: ``(device, dtype)`` for every device
    autocast is on for, ``()`` when it is off. Guards compare it on every call (a cache
    entry compiled under bfloat16 autocast must never run without it, nor under float16)."""
    if not torch._C._is_any_autocast_enabled():
        return ()
    return tuple((d, torch.get_autocast_dtype(d)) for d in AUTOCAST_DEVICES
                 if torch.is_autocast_enabled(d))


def autocast_on() -> bool:
    """Is ``torch.autocast`` on for any device?"""
    return torch._C._is_any_autocast_enabled()


@contextlib.contextmanager
def regions(entered: list) -> Iterator[None]:
    """Re-enter the autocast regions a traced function is inside (each a
    ``(device, dtype, enabled, cache_enabled)``), innermost last."""
    with contextlib.ExitStack() as stack:
        for device, dtype, enabled, cache_enabled in entered:
            stack.enter_context(torch.autocast(device, dtype=dtype, enabled=enabled,
                                               cache_enabled=cache_enabled))
        yield


class _OpLog(TorchDispatchMode):
    """Every ATen op a call runs, with its argument and result dtypes; and the casts of the
    call's own inputs (by identity) among them."""

    def __init__(self, inputs: list[torch.Tensor]):
        super().__init__()
        self.inputs: dict[int, list[int]] = {}
        for i, t in enumerate(inputs):
            self.inputs.setdefault(id(t), []).append(i)
        self.ops: list[tuple] = []
        self.input_casts: list[tuple[int, torch.dtype]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func is torch.ops.aten._to_copy.default and id(args[0]) in self.inputs \
                and set(kwargs) <= {"dtype"}:
            self.input_casts += [(i, kwargs["dtype"]) for i in self.inputs[id(args[0])]]
        elif _dtypes(out):  # (not a metadata query such as prim.device)
            self.ops.append((func, _dtypes((args, kwargs)), _dtypes(out)))
        return out


def _dtypes(tree: Any) -> tuple:
    return tuple(x.dtype for x in tree_leaves(tree) if isinstance(x, torch.Tensor))


def autocast_casts(run: Callable[[list], Any], inputs: Sequence[torch.Tensor],
                   in_place: bool = False) -> dict[int, torch.dtype] | None:
    """The casts autocast, in the state in force, makes of a call's inputs.

    ``inputs`` are the call's tensor arguments; ``run(values)`` makes the call with
    ``values`` in their places. Returns a map from the index of an input to the dtype
    autocast cast it to (``{}``: autocast changed nothing), or None when the call is not
    "cast the inputs, then the op": with the inputs cast and autocast off it runs other ATen
    ops than autocast did (``einsum`` casts the views it hands ``bmm``, not its inputs), an
    input was cast to two dtypes, or a mutating op would write to a cast copy. The check
    runs for ``{}`` too: no cast of an input does not mean no cast.
    """
    # on copies: a mutating op (``unsqueeze_`` changes metadata, even of a fake tensor)
    # runs here twice more than in the program; one copy per tensor keeps ``x @ x`` one
    copies: dict[int, torch.Tensor] = {}
    with torch.no_grad():
        inputs = [copies[id(t)] if id(t) in copies else copies.setdefault(id(t), t.clone())
                  for t in inputs]
    cache = torch.is_autocast_cache_enabled()
    torch.set_autocast_cache_enabled(False)
    try:
        with _OpLog(inputs) as log:
            run(inputs)
    finally:
        torch.set_autocast_cache_enabled(cache)
    casts: dict[int, torch.dtype] = {}
    for i, dtype in log.input_casts:
        if casts.setdefault(i, dtype) != dtype:
            return None
    if in_place and casts:
        return None
    try:
        with torch._C._DisableAutocast():
            cast = [t.to(casts[i]) if i in casts else t for i, t in enumerate(inputs)]
            with _OpLog([]) as replay:
                run(cast)
    except Exception:  # noqa: BLE001 -- the op refuses its inputs cast: not a cast plan
        return None
    return casts if replay.ops == log.ops else None


def tensors_in(args: tuple, kwargs: dict) -> list:
    """The tensors a call takes, in order: top-level ones and those in a list or tuple."""
    found = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            found.append(a)
        elif isinstance(a, (tuple, list)) and not isinstance(a, torch.Size):
            found += [t for t in a if isinstance(t, torch.Tensor)]
    return found


def replace_tensors(args: tuple, kwargs: dict, values: list) -> tuple[tuple, dict]:
    """``args``/``kwargs`` with their tensors (as :func:`tensors_in` orders them) replaced
    by ``values``, in order."""
    it = iter(values)

    def one(a):
        if isinstance(a, torch.Tensor):
            return next(it)
        if isinstance(a, (tuple, list)) and not isinstance(a, torch.Size) and any(
                isinstance(t, torch.Tensor) for t in a):
            return type(a)(next(it) if isinstance(t, torch.Tensor) else t for t in a)
        return a
    return tuple(one(a) for a in args), {k: one(v) for k, v in kwargs.items()}


def _caller(node: Node) -> Callable:
    """``node``'s call as a function of its arguments (a method: of its tensor too)."""
    if node.op == "call_method":
        return lambda obj, *a, **k: getattr(obj, node.target)(*a, **k)
    return node.target


def make_autocast_explicit(gm: GraphModule, inputs: list) -> GraphModule:
    """A torch-level graph from real Dynamo, compiled under autocast or holding
    ``torch.amp._enter_autocast``/``_exit_autocast`` nodes, rewritten to hold the casts
    instead: each call is run on fake tensors under the autocast state in force at its
    place (the state around the compilation, changed by the enter/exit nodes), the casts
    :func:`autocast_casts` finds become ``.to(dtype)`` nodes before it, and the enter/exit
    nodes go. ``gm`` itself when autocast plays no part. (Our own Dynamo captures the casts
    already and compiles with autocast off, so its graphs come back as they are.)

    Raises :class:`~tutorcompile.errors.TutorcompileError` for a call autocast casts inside
    (see :func:`autocast_casts`), or one that cannot run on fake tensors."""
    enter, leave = torch.amp.autocast_mode._enter_autocast, torch.amp.autocast_mode._exit_autocast
    if not autocast_on() and not any(n.target is enter for n in gm.graph.nodes):
        return gm
    graph = gm.graph.copy("make_autocast_explicit")
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    env: dict[Node, Any] = {}
    open_regions: dict[Node, torch.autocast] = {}
    try:
        with fake_mode:
            for node, x in zip(graph.placeholders, inputs):
                env[node] = fake_mode.from_tensor(x) if isinstance(x, torch.Tensor) else x
            for node in graph.nodes:
                if node.op in ("placeholder", "output"):
                    continue
                if node.target is enter:
                    device, dtype, enabled, cache = node.args
                    open_regions[node] = mgr = torch.autocast(
                        device, dtype=dtype, enabled=enabled, cache_enabled=cache)
                    mgr.__enter__()
                    continue
                if node.target is leave:
                    open_regions.pop(node.args[0]).__exit__(None, None, None)
                    continue
                if autocast_on():
                    _insert_casts(graph, node, env)
                args, kwargs = map_arg((node.args, node.kwargs), env.__getitem__)
                try:
                    env[node] = _caller(node)(*args, **kwargs)
                except Exception as e:  # noqa: BLE001 -- say which node and why
                    raise TutorcompileError(f"{node.format_node()}: cannot run on fake "
                                            f"tensors to find the casts autocast makes "
                                            f"({e})") from None
    finally:  # regions an error left open, innermost first
        for mgr in reversed(list(open_regions.values())):
            mgr.__exit__(None, None, None)
    for node in reversed(graph.nodes):
        if node.target in (enter, leave):
            graph.erase_node(node)
    graph.lint()
    return GraphModule({}, graph, type(gm).__name__)


def _insert_casts(graph: Graph, node: Node, env: dict) -> None:
    """Add before ``node`` the casts autocast, as it is now, makes of its tensor inputs."""
    args, kwargs = map_arg((node.args, node.kwargs), env.__getitem__)
    tensors = tensors_in(args, kwargs)
    if not tensors:
        return
    call = _caller(node)

    def run(values: list) -> Any:
        a, k = replace_tensors(args, kwargs, values)
        return call(*a, **k)
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    casts = autocast_casts(run, tensors, name.endswith("_") and not name.endswith("__")
                           or "out" in kwargs)
    where = node.meta.get("source") or node.format_node()
    if casts is None:
        raise TutorcompileError(f"{name} under torch.autocast ({where}): autocast does more "
                                "than cast its inputs, which the graph cannot say as casts")
    by_value = {id(env[n]): n for n in node.all_input_nodes}
    for i, dtype in casts.items():
        source = by_value.get(id(tensors[i]))
        if source is None:
            raise TutorcompileError(f"{name} under torch.autocast ({where}): autocast casts "
                                    "a tensor that is no input of the graph's node")
        with graph.inserting_before(node):
            cast = graph.call_method("to", (source,), {"dtype": dtype})
        cast.meta["source"] = node.meta.get("source")
        env[cast] = tensors[i].to(dtype)
        node.replace_input_with(source, cast)


__all__ = ["AUTOCAST_DEVICES", "autocast_casts", "autocast_on", "autocast_state",
           "make_autocast_explicit", "regions", "replace_tensors", "tensors_in"]
