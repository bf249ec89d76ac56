"""Seeing every stage's artifacts: ``TUTORCOMPILE_LOGS`` and ``tutorcompile.debug(dir)``.

Each stage reports what it produced through one call::

    log_artifact("guards", lambda: guards.format())

and the reader chooses what to see, like ``TORCH_LOGS``::

    TUTORCOMPILE_LOGS=graph_breaks,guards,recompiles python train.py
    tutorcompile.set_logs(aot_graphs=True, output_code=True)        # the same from Python
    with tutorcompile.debug("debug_out"):                            # every artifact to files
        fast(x)

Artifacts are produced lazily (the lambda runs only if someone is looking), so logging
costs nothing when it is off. Files written by ``debug`` are numbered in the order the
compiler produced them and named by stage: ``003_aot_graphs.txt``.

The compile phases are the compiler's spine (:data:`SPINE`): each stage's spine function
(README, "The spine") runs its passes in that order, each inside ``phase(<its name>)``.
``TUTORCOMPILE_LOGS=compile_times`` prints where compile time went, pass by pass in that
order, each time a compilation finishes (cumulative since the start or
:func:`reset_compile_times`); :func:`compile_times` returns the same table. Phases nest: a
phase's time excludes the phases run inside it (a stage's own row is what its passes leave).
A file written by ``debug`` while a phase runs opens with the spine path that made it
(``# spine: capture > aot > decompose``), and :func:`add_phase_listener` lets a tool
(``tutorcompile.explain``) see each pass as it starts.

Mirrors: torch/_logging (``TORCH_LOGS``, ``trace_structured``), torch/_dynamo/config's
``debug_dir`` and torch/_dynamo/utils.py (``compile_times``, ``dynamo_timed``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ARTIFACTS = {
    "graph_breaks": "stage 3: each graph break, its reason and the user's source line",
    "guards": "stage 3: the guards of each compiled entry, as Python",
    "recompiles": "stage 3: which guard failed and why a frame was compiled again",
    "graph_code": "stage 3: each captured graph as code",
    "ddp": "stage 3: how a graph captured under DistributedDataParallel was split at its "
           "gradient buckets (pieces, parameters, bytes), or why it was not",
    "aot_graphs": "stage 4: joint, forward and backward graphs",
    "partition": "stage 4: what the partitioner saved and recomputed",
    "fusion": "stage 5: fusion decisions, and the reason for each fusion not taken",
    "output_code": "stage 5: generated kernels and the wrapper that runs them",
    "autotuning": "stage 5: what mode='max-autotune' timed (kernel variants; matmul: "
                  "PyTorch's call or a Triton template) and what it chose",
    "cudagraphs": "stage 6: recorded graphs and the reason for each skip",
    "compile_times": "every stage: seconds spent compiling, per pass of the spine "
                     "(capture; aot and its passes; inductor and its passes; C++/Triton "
                     "build)",
}

_enabled: set[str] = set()
_debug_dirs: list[tuple[Path, list[int]]] = []


def _parse(spec: str) -> set[str]:
    names = {s.strip().lstrip("+") for s in spec.split(",") if s.strip()}
    if "all" in names:
        return set(ARTIFACTS)
    unknown = names - set(ARTIFACTS)
    if unknown:
        raise ValueError(f"unknown TUTORCOMPILE_LOGS artifact(s) {sorted(unknown)}; "
                         f"choose from: all, {', '.join(ARTIFACTS)}")
    return names


def set_logs(**artifacts: bool) -> None:
    """Turn artifacts on or off: ``set_logs(guards=True, graph_breaks=True)``; no arguments
    turns everything off. ``set_logs(all=True)`` turns everything on."""
    if not artifacts:
        _enabled.clear()
        return
    for name, on in artifacts.items():
        names = set(ARTIFACTS) if name == "all" else _parse(name)
        (_enabled.update if on else _enabled.difference_update)(names)


def enabled(name: str) -> bool:
    """Is anyone looking at this artifact (printed, or dumped by ``debug``)?"""
    if name not in ARTIFACTS:
        raise ValueError(f"unknown artifact {name!r}")
    return name in _enabled or bool(_debug_dirs)


def log_artifact(name: str, content: Callable[[], str] | str, title: str = "") -> None:
    """Report one artifact of a stage; ``content`` is only evaluated if it will be shown."""
    if not enabled(name):
        return
    text = content() if callable(content) else content
    header = f"[tutorcompile:{name}]" + (f" {title}" if title else "")
    if name in _enabled:
        print(f"{header}\n{text.rstrip()}\n", file=sys.stderr if _to_stderr() else sys.stdout)
    for folder, counter in _debug_dirs:
        counter[0] += 1
        path = folder / f"{counter[0]:03d}_{name}.txt"
        spine = f"# spine: {' > '.join(_open)}\n" if _open else ""
        path.write_text(spine + (f"# {title}\n" if title else "") + text.rstrip() + "\n")


def _to_stderr() -> bool:
    return os.environ.get("TUTORCOMPILE_LOGS_TO", "stdout") == "stderr"


@contextlib.contextmanager
def debug(folder: str | os.PathLike) -> Iterator[Path]:
    """Write every artifact produced inside the block to numbered files in ``folder``."""
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    entry = (path, [len(list(path.glob("*.txt")))])
    _debug_dirs.append(entry)
    try:
        yield path
    finally:
        _debug_dirs.remove(entry)


SPINE: dict[str, tuple[str, ...]] = {
    "capture": (),
    "aot": ("functionalize", "decompose", "joint", "partition"),
    "inductor": ("graph_passes", "lowering", "scheduling", "codegen", "wrapper"),
    "build": (),
}
"""The compiler's spine: each stage boundary (stage 3 ``capture``, stage 4 ``aot``, stage 5
``inductor``) and its passes, in the order they run. Each name is the compile phase its step
runs in, opened by the stage's spine function (``dynamo/eval_frame.py:compile_entry``,
``aot/aot_autograd.py:AOTCompiled.compile_graph``, ``inductor/compile_fx.py:compile_graph``);
``build`` is the wait for the C++ compiler / Triton (at the end of compilation or at the
first call). The backend a stage calls runs inside it: ``aot`` inside ``capture``, a
forward's ``inductor`` inside ``aot`` (a backward's at its first call)."""

PHASES = tuple(name for stage, passes in SPINE.items() for name in (stage, *passes))
"""The compile phases, in spine order (see :data:`SPINE`)."""

_STAGE_OF = {name: stage for stage, passes in SPINE.items() for name in passes}

_phase_seconds: dict[str, float] = {}
_phase_counts: dict[str, int] = {}
_phase_stack: list[list[float]] = []   # per open phase: seconds spent in phases inside it
_open: list[str] = []                  # the open phases' names, outermost first
_phase_listeners: list[Callable[[tuple[str, ...]], None]] = []


def add_phase_listener(listener: Callable[[tuple[str, ...]], None]) -> Callable[[], None]:
    """Call ``listener(path)`` as each phase starts (``path``: the open phases' names,
    outermost first, ending with the new one). Returns the function that removes it."""
    _phase_listeners.append(listener)
    return lambda: _phase_listeners.remove(listener)


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Count the time spent in the block as compile phase ``name`` (one of :data:`PHASES`).

    Time in a phase opened inside the block counts for that phase only. When the outermost
    phase ends, the ``compile_times`` artifact reports the table so far."""
    if name not in PHASES:
        raise ValueError(f"unknown compile phase {name!r}; choose from {PHASES}")
    start = time.perf_counter()
    _phase_stack.append([0.0])
    _open.append(name)
    for listener in _phase_listeners:
        listener(tuple(_open))
    try:
        yield
    finally:
        _open.pop()
        inner = _phase_stack.pop()[0]
        elapsed = time.perf_counter() - start
        _phase_seconds[name] = _phase_seconds.get(name, 0.0) + elapsed - inner
        _phase_counts[name] = _phase_counts.get(name, 0) + 1
        if _phase_stack:
            _phase_stack[-1][0] += elapsed
        else:
            log_artifact("compile_times", lambda: str(compile_times()), "cumulative")


def seconds_compiling() -> float:
    """Seconds spent in any compile phase since the start (or :func:`reset_compile_times`)."""
    return sum(_phase_seconds.values())


def compile_times(as_dict: bool = False) -> str | dict[str, float]:
    """Seconds spent per compile phase since the start (or :func:`reset_compile_times`)."""
    if as_dict:
        return {p: _phase_seconds.get(p, 0.0) for p in PHASES}
    total = sum(_phase_seconds.values())
    lines = [f"{'phase (spine order)':<20}{'seconds':>9}{'share':>8}{'runs':>6}"]
    for p in PHASES:
        sec = _phase_seconds.get(p, 0.0)
        share = f"{100 * sec / total:.0f}%" if total else "-"
        name = f"  {p}" if p in _STAGE_OF else p   # a pass, under its stage
        lines.append(f"{name:<20}{sec:>9.3f}{share:>8}{_phase_counts.get(p, 0):>6}")
    lines.append(f"{'total':<20}{total:>9.3f}")
    return "\n".join(lines)


def reset_compile_times() -> None:
    _phase_seconds.clear()
    _phase_counts.clear()


if os.environ.get("TUTORCOMPILE_LOGS"):
    _enabled.update(_parse(os.environ["TUTORCOMPILE_LOGS"]))
