"""DDP's optimizer: a graph captured under ``DistributedDataParallel``, split at its buckets.

Why: DDP all-reduces gradients in *buckets* (about ``bucket_cap_mb`` each), each launched as
soon as every gradient in it is ready, so communication overlaps the rest of the backward.
A compiled graph is one autograd node: all of its gradients become ready together, at the
very end of its backward, and every bucket's all-reduce waits for the whole backward.
Splitting the graph where the buckets split, each piece compiled on its own, gives one
backward node per piece: when the last piece's backward finishes, DDP's hooks see its
parameters' gradients and launch their bucket's all-reduce while the earlier pieces'
backward still runs.

How the pieces are chosen (as DDP fills buckets): gradients become ready in the reverse of
the order parameters are used in the forward, so the graph's nodes are walked *backwards*,
adding the bytes of each parameter a node reads for the first time. When a bucket holds its
cap (DDP's ``first_bucket_bytes_cap`` for the first bucket -- the one all-reduced first, of
the parameters used last -- ``bucket_bytes_cap`` after it), the next node starts a new
bucket. A bucket is a contiguous run of nodes, so the pieces are too, each reading the
graph's inputs and earlier pieces' outputs. A bucket of no parameters (ops ahead of the
first parameter) joins the piece after it.

What crosses a boundary is a tensor, or a size (``x.size(0)``, arithmetic on sizes) that
the piece that reads it computes again from a tensor; anything else (a tuple an op returned,
split from its ``getitem``), or a piece that writes in place into an earlier piece's
result, and the graph is not split -- with the reason in the ``ddp`` log.

``tutorcompile.explain`` shows the split (pieces, their parameters and bytes) under its
graph; ``TUTORCOMPILE_LOGS=ddp`` logs it; ``tutorcompile.dynamo.config.optimize_ddp =
False`` turns it off.

Mirrors: torch/_dynamo/backends/distributed.py (``DDPOptimizer``) and the hook in
torch/_dynamo/convert_frame.py that uses it when ``DistributedDataParallel.
_get_active_ddp_module()`` says a DDP forward is running.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .._logging import log_artifact
from ..fx import Graph, GraphModule
from ..fx.node import Node
from ..fx.passes.dce_cse import written_arguments
from . import config
from .output_graph import graph_symbolic_sizes


@dataclass
class Piece:
    """One piece of a split graph: a contiguous run of its nodes and the parameters they
    read first (in forward order)."""
    nodes: list[Node] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    nbytes: int = 0


@dataclass
class DDPSplit:
    """How a graph compiled under DDP was split (``explain`` prints it)."""
    bucket_bytes_cap: int
    first_bucket_bytes_cap: int
    pieces: list[Piece]            # in forward order; the last is all-reduced first
    reason: str = ""               # why the graph stays whole, if it does

    @property
    def piece_count(self) -> int:
        return len(self.pieces) if not self.reason else 1

    def __str__(self) -> str:
        head = (f"DDP buckets of {_bytes(self.bucket_bytes_cap)} (first bucket "
                f"{_bytes(self.first_bucket_bytes_cap)}): ")
        if self.reason:
            return head + f"not split: {self.reason}"
        lines = [head + f"{len(self.pieces)} piece(s), each compiled on its own"]
        for i, piece in enumerate(self.pieces):
            first = " (all-reduced first)" if i == len(self.pieces) - 1 and i else ""
            ops = [n.name for n in piece.nodes]
            if len(ops) > 8:   # (a block of a transformer is some thirty)
                ops = [*ops[:4], "...", *ops[-3:]]
            lines.append(f"  piece {i + 1}: {len(piece.params)} parameter(s), "
                         f"{_bytes(piece.nbytes)}{first}: {', '.join(piece.params) or '-'}"
                         f"\n    {len(piece.nodes)} op(s): {', '.join(ops)}")
        return "\n".join(lines)


def _bytes(n: int) -> str:
    if n < 10 * 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KiB" if n < 10 * 2**20 else f"{n / 2**20:.1f} MiB"


def active_ddp() -> torch.nn.Module | None:
    """The ``DistributedDataParallel`` whose forward is running (its ``_run_ddp_forward``
    sets it around the call of the module it wraps), when ``config.optimize_ddp``."""
    if not config.optimize_ddp or not torch.distributed.is_available():
        return None
    return torch.nn.parallel.DistributedDataParallel._get_active_ddp_module()


def bucket_caps(ddp: Any) -> tuple[int, int]:
    """DDP's bucket cap and first-bucket cap, in bytes (``bucket_cap_mb`` given: both it;
    the default: 25 MiB and ``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``, 1 MiB)."""
    cap = int(ddp.bucket_bytes_cap)
    bucket_config = getattr(ddp, "_bucket_config", None)   # (PyTorch 2.10 and later)
    if bucket_config is not None:
        first = int(bucket_config.first_bucket_bytes_cap)
    else:
        first = int(getattr(torch.distributed, "_DEFAULT_FIRST_BUCKET_BYTES", cap))
    return cap, min(first, cap)


def compile_under_ddp(ddp: Any, gm: GraphModule, example_inputs: list,
                      compile_graph: Callable, where: str = "") -> Callable:
    """``compile_graph(gm, example_inputs)``, as pieces when DDP's buckets split the graph:
    each piece compiled by ``compile_graph`` and the pieces run in order as one callable
    with the graph's inputs and outputs. The split is ``.ddp_split`` of the result."""
    cap, first = bucket_caps(ddp)
    names = {id(p): name for name, p in ddp.module.named_parameters()}
    split = DDPSplit(cap, first, assign_pieces(gm, example_inputs, cap, first, names))
    if len(split.pieces) > 1:
        try:
            compiled = SplitGraph(gm, example_inputs, split, compile_graph)
        except CannotSplit as e:
            split.reason = str(e)
        else:
            log_artifact("ddp", lambda: f"{split}\n{compiled.code()}", where)
            return compiled
    log_artifact("ddp", lambda: str(split), where)
    compiled = compile_graph(gm, example_inputs)
    try:
        compiled.ddp_split = split
    except AttributeError:   # (a callable that takes no attributes: explain cannot show it)
        pass
    return compiled


def assign_pieces(gm: GraphModule, example_inputs: list, cap: int, first_cap: int,
                  names: dict[int, str]) -> list[Piece]:
    """Fill buckets walking the nodes backwards (the order gradients become ready); the
    pieces, in forward order. A parameter is counted once, in the piece of its last use."""
    params: dict[Node, tuple[str, int]] = {}
    for node, value in zip(gm.graph.placeholders, example_inputs, strict=False):
        if (isinstance(value, torch.nn.Parameter) and value.requires_grad
                and not getattr(value, "_ddp_ignored", False)):
            params[node] = (names.get(id(value), node.name),
                            value.numel() * value.element_size())
    buckets = [Piece()]
    counted: set[Node] = set()
    body = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    for node in reversed(body):
        bucket = buckets[0]
        # (a bucket holds a parameter before it is full: with ``bucket_cap_mb=0``, as DDP
        # gives each parameter a bucket, each node reading one is a piece)
        full = bucket.params and bucket.nbytes >= (first_cap if len(buckets) == 1 else cap)
        if full:
            buckets.insert(0, Piece())
            bucket = buckets[0]
        bucket.nodes.insert(0, node)
        used = [a for a in node.all_input_nodes if a in params and a not in counted]
        for arg in reversed(used):   # (listed in the order the node reads them)
            counted.add(arg)
            name, nbytes = params[arg]
            bucket.params.insert(0, name)
            bucket.nbytes += nbytes
    if len(buckets) > 1 and buckets[0].nbytes == 0:   # ops before the first parameter
        preamble = buckets.pop(0)
        buckets[0].nodes[:0] = preamble.nodes
    return buckets


class CannotSplit(Exception):
    """A piece boundary that cannot be cut: the graph is compiled whole."""


# sizes and arithmetic on them: a piece that reads one made by an earlier piece computes it
# again from the tensor (a size is no tensor a backend takes as an input)
_SIZE_ARITHMETIC = frozenset({operator.add, operator.sub, operator.mul, operator.floordiv,
                              operator.truediv, operator.mod, operator.neg, operator.pow,
                              operator.getitem, max, min})


def _is_tensor(node: Node) -> bool:
    return isinstance(node.meta.get("example_value"), torch.Tensor)


class SplitGraph:
    """The pieces of a graph, each compiled on its own, run as the graph: called with the
    graph's inputs, returns its outputs. Each piece reads graph inputs and outputs of
    earlier pieces, by position in one list of values (inputs first, then each piece's
    outputs as it runs)."""

    def __init__(self, gm: GraphModule, example_inputs: list, split: DDPSplit,
                 compile_graph: Callable):
        self.ddp_split = split
        graph = gm.graph
        placeholders = graph.placeholders
        slot: dict[Node, int] = {n: i for i, n in enumerate(placeholders)}
        example: dict[Node, Any] = dict(zip(placeholders, example_inputs, strict=True))
        piece_of = {n: i for i, p in enumerate(split.pieces) for n in p.nodes}
        final = graph.output_node
        self.graph_modules: list[GraphModule] = []
        self.compiled: list[Any] = []   # a compiled callable per piece
        self.plan: list[tuple[Callable, tuple[int, ...]]] = []
        outputs = final.args[0]
        if not isinstance(outputs, (tuple, list)) or not all(
                isinstance(n, Node) for n in outputs):
            raise CannotSplit("the graph's output is not a tuple of its values")
        built = []   # every piece's graph first: a boundary that cannot be cut costs no compile
        for index, piece in enumerate(split.pieces):
            for node in piece.nodes:
                _check_writes(node, index, piece_of)
            sub, reads, writes = _piece_graph(graph, piece, index, piece_of, final)
            if not writes:
                raise CannotSplit(f"piece {index + 1} gives nothing to later pieces or the "
                                  "graph's output")
            built.append((sub, reads, writes))
        _mark_dynamic_crossings(graph, example_inputs, built)
        count = len(placeholders)
        for index, (sub, reads, writes) in enumerate(built):
            piece_gm = GraphModule(gm, sub, class_name=f"DDPPiece{index + 1}")
            inputs = [example[n] if n in example else _example_tensor(n) for n in reads]
            self.graph_modules.append(piece_gm)
            self.compiled.append(compile_graph(piece_gm, inputs))
            self.plan.append((self.compiled[-1], tuple(slot[n] for n in reads)))
            for node in writes:
                slot[node] = count
                count += 1
        self.outputs = tuple(slot[n] for n in outputs)

    def __call__(self, *inputs: Any) -> tuple:
        values = list(inputs)
        for fn, reads in self.plan:
            values.extend(fn(*[values[i] for i in reads]))
        return tuple(values[i] for i in self.outputs)

    def code(self) -> str:
        return "\n".join(gm.code for gm in self.graph_modules)

    @property
    def cache(self) -> dict:
        """Every piece's AOT compilations, by (piece, key) (``explain`` shows the symbolic
        sizes they were compiled for)."""
        return {(i, key): art for i, piece in enumerate(self.compiled)
                if isinstance(getattr(piece, "cache", None), dict)
                for key, art in piece.cache.items()}


def _piece_graph(graph: Graph, piece: Piece, index: int, piece_of: dict[Node, int],
                 final: Node) -> tuple[Graph, list[Node], list[Node]]:
    """The graph of one piece: its inputs (graph inputs and earlier pieces' tensors it
    reads), its nodes, and as outputs its values that later pieces or the graph's output
    read. Sizes made by earlier pieces are computed again here."""
    sub = Graph.derived_from(graph, f"ddp piece {index + 1}")
    env: dict[Node, Node] = {}
    reads: list[Node] = []
    mine = set(piece.nodes)

    def read(node: Node) -> Node:
        if node in env:
            return env[node]
        if piece_of.get(node, -1) > index:   # (pieces are runs of a graph in order)
            raise CannotSplit(f"piece {index + 1} reads {node.name}, made after it")
        if node.op == "placeholder" or _is_tensor(node):
            new = sub.placeholder(node.name)
            new.meta = dict(node.meta)
            reads.append(node)
        elif _recomputable(node):   # a size made earlier: computed again from its tensor
            new = sub.node_copy(node, read)
        else:
            value = node.meta.get("example_value")
            raise CannotSplit(f"piece {index + 1} reads {node.name} "
                              f"({node.format_target()}), a {type(value).__name__} made by "
                              f"piece {piece_of[node] + 1}: not a tensor nor a size")
        env[node] = new
        return new

    for node in piece.nodes:
        if not _is_tensor(node) and _recomputable(node) and not any(
                u is final or u in mine for u in node.users):
            continue   # a size only later pieces read: they compute it
        for arg in node.all_input_nodes:
            if arg not in mine:
                read(arg)
        env[node] = sub.node_copy(node, lambda n: env[n])
    # what it gives: values the graph returns, and tensors later pieces read (a size they
    # read they compute again)
    writes = [n for n in piece.nodes if final in n.users or _is_tensor(n) and any(
        piece_of.get(u, index) > index for u in n.users)]
    sub.output(tuple(env[n] for n in writes))
    # placeholders first, in the order read (``_insert`` keeps them at the top)
    return sub, reads, writes


def _mark_dynamic_crossings(graph: Graph, example_inputs: list, built: list) -> None:
    """With symbolic sizes: which dims of each tensor crossing a boundary are symbols of the
    inputs' dynamic dims (the symbolic run AOT makes), marked ``dynamic_dims`` on the
    placeholder that reads it, so the piece is compiled size-generic as the graph would
    be (left unmarked, the backend compiles it again for each new size: still right)."""
    dims = [p.meta.get("dynamic_dims", frozenset()) for p in graph.placeholders]
    if not any(dims):
        return
    crossing = [(n, sub) for sub, reads, _ in built for n in reads if n.op != "placeholder"]
    asked = [(n, d) for n in dict(crossing) for d in range(n.meta["example_value"].dim())]
    found = graph_symbolic_sizes(graph, example_inputs, dims, asked) if asked else None
    if found is None:
        return
    dynamic: dict[Node, set[int]] = {}
    for (node, dim), size in zip(asked, found[0], strict=True):
        if not isinstance(size, int):
            dynamic.setdefault(node, set()).add(dim)
    for node, sub in crossing:
        placeholder = next(p for p in sub.placeholders if p.target == node.name)
        placeholder.meta["dynamic_dims"] = frozenset(dynamic.get(node, ()))


def _recomputable(node: Node) -> bool:
    if node.op == "call_method" and node.target == "size":
        return True
    return node.op == "call_function" and node.target in _SIZE_ARITHMETIC and all(
        _recomputable(a) for a in node.all_input_nodes if not _is_tensor(a)) and \
        not isinstance(node.meta.get("example_value"), (torch.Tensor, tuple, list))


def _check_writes(node: Node, index: int, piece_of: dict[Node, int]) -> None:
    """A node writing in place into a value an earlier piece made: that piece's compiled
    code may have returned a copy, or saved it for its backward -- not split."""
    written = written_arguments(node.target) if node.op == "call_function" else None
    if node.op == "call_method" and str(node.target).endswith("_") and node.args:
        written = [(0, "self")]
    for position, _ in written or ():
        arg = node.args[position] if position < len(node.args) else None
        if isinstance(arg, Node) and arg.op != "placeholder" and piece_of.get(arg) != index:
            raise CannotSplit(f"{node.name} ({node.format_target()}) writes in place into "
                              f"{arg.name}, made by piece {piece_of[arg] + 1}")


def _example_tensor(node: Node) -> torch.Tensor:
    """A real tensor like the fake one a crossing value was traced with: what a backend
    compiles the piece that reads it for (its shape, strides, dtype, device and
    requires_grad; its values are never read)."""
    fake = node.meta["example_value"]
    try:
        shape, stride = [int(s) for s in fake.shape], [int(s) for s in fake.stride()]
    except (TypeError, RuntimeError) as e:
        raise CannotSplit(f"{node.name} has sizes only known when it runs ({e})") from e
    value = torch.empty_strided(shape, stride, dtype=fake.dtype, device=fake.device)
    if fake.requires_grad:
        value.requires_grad_(True)
    return value

