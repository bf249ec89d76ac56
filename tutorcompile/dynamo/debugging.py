"""``explain(fn)(*args)``: what capture did -- graphs, breaks and why, guards, recompiles.

::

    >>> out = tutorcompile.explain(f)(x)       # doctest: +SKIP
    >>> print(out)                             # graph count, break reasons with lines, ...
    >>> out.graphs[0].code, out.guards[0]      # each graph, and the guards it runs under

Calling the same explainer again (with other inputs) adds to the same report, so a shape or
dtype change shows up as a recompile with the guard that failed.

With a backend that compiles (``backend="inductor"``, ``"aot_eager"``), the report also lists
the compiler's passes as they ran (``out.passes``), nested and named as the spine names them
(``tutorcompile._logging.SPINE``): ``capture``, then ``aot`` and its passes inside it, then
``inductor`` and its passes, each graph in turn.

Mirrors: torch/_dynamo/eval_frame.py (``explain``) and torch/_dynamo/backends/debugging.py
(``ExplainOutput``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._logging import add_phase_listener
from . import eval_frame


@dataclass
class BreakReason:
    reason: str
    filename: str
    lineno: int | None
    source_line: str
    frame: str = ""

    def __str__(self) -> str:
        short = self.filename.rsplit("/", 1)[-1]
        return f"{self.reason}\n    at {short}:{self.lineno} in {self.frame}: {self.source_line}"


@dataclass
class ExplainOutput:
    graphs: list = field(default_factory=list)
    break_reasons: list[BreakReason] = field(default_factory=list)
    guards: list[list[str]] = field(default_factory=list)  # one list per graph
    ops_per_graph: list[list[str]] = field(default_factory=list)
    recompile_log: list[str] = field(default_factory=list)
    skipped_frames: list[str] = field(default_factory=list)
    # per graph compiled for symbolic sizes (backend "aot_eager"): its symbols and guards
    symbolic_guards: list[str] = field(default_factory=list)
    compiled_segments: int = 0  # cache entries, including ones whose graph was empty
    # per graph: how DistributedDataParallel's buckets split it (a ``DDPSplit``), or None
    # for a graph not compiled under DDP
    ddp_splits: list = field(default_factory=list)
    # each compile phase as it started, by its path in the spine: ("capture", "aot", "joint")
    passes: list[tuple[str, ...]] = field(default_factory=list)

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def graph_break_count(self) -> int:
        return len(self.break_reasons)

    @property
    def op_count(self) -> int:
        return sum(len(ops) for ops in self.ops_per_graph)

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}",
                 f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}"]
        if self.break_reasons:
            lines.append("Break Reasons:")
            for i, br in enumerate(self.break_reasons, 1):
                lines.append(f"  Break Reason {i}: {br}")
        if self.skipped_frames:
            lines.append("Skipped frames (each runs uncompiled from where it broke; the "
                         "functions it calls are compiled as frames of their own):")
            lines += [f"  {s}" for s in self.skipped_frames]
        lines.append("Ops per Graph:")
        for i, ops in enumerate(self.ops_per_graph, 1):
            lines.append(f"  Graph {i}: {', '.join(ops)}")
        if any(split is not None for split in self.ddp_splits):
            lines.append("DDP splits (graphs compiled under DistributedDataParallel):")
            for i, split in enumerate(self.ddp_splits, 1):
                if split is not None:
                    lines.append(f"  Graph {i}: " + str(split).replace("\n", "\n    "))
        lines.append("Guards per Graph:")
        for i, guards in enumerate(self.guards, 1):
            lines.append(f"  Graph {i}:")
            lines += [f"    {g}" for g in guards]
        if self.symbolic_guards:
            lines.append("Symbolic sizes below Dynamo (AOT):")
            lines += ["  " + line for text in self.symbolic_guards
                      for line in text.splitlines()]
        if self.recompile_log:
            lines.append("Recompiles:")
            lines += [f"  {r}" for r in self.recompile_log]
        if any(path != ("capture",) for path in self.passes):   # (not capture alone)
            lines.append("Compile passes (the spine, in the order they ran):")
            lines += ["  " * len(path) + path[-1] for path in self.passes]
        return "\n".join(lines)


def _op_name(node) -> str:
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    return node.format_target()


def _compilations(compiled: Any) -> list:
    """The distinct AOT compilations behind a backend's result (none for other backends)."""
    cache = getattr(compiled, "cache", None)
    return list({id(a): a for a in cache.values()}.values()) if isinstance(cache, dict) else []


def explain(fn: Callable, *, backend: str | Callable = "eager",
            dynamic: bool | None = None) -> Callable[..., ExplainOutput]:
    """Returns ``run(*args, **kwargs) -> ExplainOutput``; every call adds to one report."""
    eval_frame.reset()
    out = ExplainOutput()
    entries: list = []
    compiled = eval_frame.compile(fn, backend=backend, dynamic=dynamic)

    def listener(kind: str, frame, result, entry) -> None:
        if result.kind == "break":
            filename, lineno, text = result.location
            out.break_reasons.append(BreakReason(result.reason, filename, lineno, text,
                                                 frame.code.co_name))
        if kind == "skip":
            where = ""
            if result.location is not None:
                filename, lineno, text = result.location
                where = f"\n    at {filename.rsplit('/', 1)[-1]}:{lineno}: {text}"
            out.skipped_frames.append(f"{frame.code.co_name}: {result.reason}{where}")
            return
        out.compiled_segments += 1
        if entry is not None and entry.graph_module is not None:
            gm = entry.graph_module
            out.graphs.append(gm)
            out.ops_per_graph.append([_op_name(n) for n in gm.graph.nodes
                                      if n.op not in ("placeholder", "output")])
            out.guards.append([str(g) for g in entry.check.guards])
            out.ddp_splits.append(getattr(entry.compiled, "ddp_split", None))
            entries.append(entry)

    def run(*args: Any, **kwargs: Any) -> ExplainOutput:
        start = len(eval_frame.RECOMPILE_LOG)
        eval_frame._LISTENERS.append(listener)
        remove_phase_listener = add_phase_listener(out.passes.append)
        try:
            compiled(*args, **kwargs)
        finally:
            eval_frame._LISTENERS.remove(listener)
            remove_phase_listener()
        out.recompile_log += eval_frame.RECOMPILE_LOG[start:]
        out.symbolic_guards = [art.shape_env.format_guards()
                               for entry in entries if entry.compiled is not None
                               for art in _compilations(entry.compiled)
                               if art.shape_env is not None]
        return out

    return run
