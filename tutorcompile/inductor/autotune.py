"""``mode="max-autotune"``: try a few variants of each kernel and keep the fastest.

Triton: block sizes, warps per program (and persistent vs looped reductions). C++: with or
without the OpenMP parallel loop, and the tile width of outer-dimension reductions (each
variant is one more compiler run, so autotuning C++ costs seconds per kernel).

A Triton kernel's best ``XBLOCK``/``RBLOCK`` depends on the shape and the device; the heuristics in
``codegen/triton.py`` pick a reasonable one without running anything. Autotuning runs the
kernel on scratch buffers of the right sizes with each candidate (persistent and looped
variants for reductions) and keeps the fastest, measured with ``tutorcompile.bench``.
Under the Triton interpreter timings say little about a GPU, so the candidates are few.

Matrix products are a *choice between algorithms* (:func:`select_matmul`): the PyTorch call
(cuBLAS on a GPU) against the Triton matmul template (``codegen/triton_template.py``) in a
few block-size configs, each timed on the real sizes and checked against PyTorch's answer.
The fastest correct one is kept; a template can then take the pointwise consumers of the
product as its epilogue.

Every candidate timed -- a matmul's algorithms, a kernel's block sizes or C++ variants --
is a row of the compilation's :class:`AutotuneTable` (``CompiledGraph.autotune_table``,
printed in ``output_code``), and the winner's kernel says why it won in a last comment
(``# max-autotune: ...``).

Without ``mode="max-autotune"``, and on the C++ backend, matmul stays the PyTorch call.
Under the interpreter the template always loses on time (milliseconds a program): tests
set ``matmul_choice.force = "template"`` to check the template's values.

One choice is measured in every mode, because it costs milliseconds, not compiler runs: the
memory layout a CPU convolution runs in (:func:`conv_channels_last`, ``config.conv_layout``).
PyTorch's CPU kernels are faster on channels-last tensors for some convolutions and slower
for others, by window, groups, sizes, threads and CPU.

Mirrors: torch/_inductor/runtime/triton_heuristics.py (``CachingAutotuner``) and
torch/_inductor/select_algorithm.py (``AlgorithmSelectorCache``: choices, timings, the
check of each choice's output).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .._caches import on_reset
from ..fx.symbolic_shapes import hint_int
from . import config
from .codegen.common import KernelPlan
from .codegen.cpp import compile_cpp_kernel
from .codegen.triton import (
    TritonKernelCall,
    choose_blocks,
    choose_num_warps,
    generate_triton_kernel,
    interpreted,
    next_power_of_2,
)
from .codegen.triton_template import (
    compile_template_kernel,
    fp32_precision,
    matmul_configs,
    template_shapes,
)
from .ir import FixedLayout, IRNode, TemplateBuffer, View


def candidate_blocks(plan: KernelPlan, persistent: bool) -> list[tuple[int, int, int]]:
    """(XBLOCK, RBLOCK, num_warps): the heuristic's choice first, then a few neighbours
    (powers of two) -- other block sizes with their heuristic warps, and the heuristic's
    blocks with half and twice its warps."""
    x, r = choose_blocks(plan, persistent)
    kind = ("persistent" if persistent else "looped") if plan.is_reduction else "pointwise"

    def warps(xb: int, rb: int) -> int:
        return choose_num_warps(kind, xb, rb, hint_int(plan.rnumel))
    w = warps(x, r)
    cands = {(x, r)}
    for f in (2, 4):
        if x // f >= 1:
            cands.add((x // f, r))
        if x * f <= next_power_of_2(plan.xnumel):
            cands.add((x * f, r))
    if plan.is_reduction and not persistent:
        for rr in (r // 2, r * 2):
            if rr >= 16:
                cands.add((x, rr))
    blocks = sorted(cands, key=lambda c: (c != (x, r), c))
    if interpreted():   # warps change nothing there: spend the few runs on block sizes
        return [(xb, rb, warps(xb, rb)) for xb, rb in blocks[:3]]
    out = [(x, r, w)] + [(x, r, w2) for w2 in (w // 2, w * 2) if 1 <= w2 <= 32]
    out += [(xb, rb, warps(xb, rb)) for xb, rb in blocks[1:]]
    return list(dict.fromkeys(out))[:12]


# Scratch values come from a generator of their own: timing while compiling must not move
# the user's random stream (a model's dropout, compiled at its first call, would draw other
# masks than eager's).
_scratch_generator = torch.Generator()


def _random(size) -> torch.Tensor:
    return torch.randn(size, generator=_scratch_generator)


def _scratch(buffer) -> torch.Tensor:
    layout = buffer.layout
    storage = max(1, sum((s - 1) * st for s, st in zip(layout.size, layout.stride)) + 1)
    base = _random(storage).to(layout.device, layout.dtype) \
        if layout.dtype.is_floating_point else torch.zeros(storage, dtype=layout.dtype,
                                                          device=layout.device)
    return base.as_strided(layout.size, layout.stride)


def _time(call, args, repeat: int = 3) -> float:
    call(*args)  # warm up (compiles on a GPU)
    if args and args[0].is_cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        call(*args)
    if args and args[0].is_cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeat


def autotuned_triton_kernel(plan: KernelPlan, name: str, table: AutotuneTable | None = None):
    """Like ``compile_triton_kernel`` but benchmarks candidate block sizes first (each
    timing a row of ``table``)."""
    variants = [None] if not plan.is_reduction else [True, False]
    best = None
    for persistent in variants:
        if persistent is True and next_power_of_2(plan.rnumel) > 1 << 14:
            continue
        source, ins, outs, persistent = generate_triton_kernel(plan, name, persistent)
        args = [_scratch(b) for b in ins + outs]
        for xblock, rblock, num_warps in candidate_blocks(plan, persistent):
            call = TritonKernelCall(name, source, [b.name for b in ins + outs], plan,
                                    persistent, (xblock, rblock), num_warps=num_warps)
            t = _time(call, args)
            _record(table, name, "triton kernel", f"XBLOCK={xblock} RBLOCK={rblock} "
                    f"num_warps={num_warps}" + (" persistent" if persistent else ""), t)
            if best is None or t < best[0]:
                best = (t, call, ins, outs)
    assert best is not None   # (the non-persistent variant always runs)
    _, call, ins, outs = best
    _choose(table, name, best[0])
    call.source = call.source + (f"\n# max-autotune: XBLOCK={call.xblock}, "
                                 f"RBLOCK={call.rblock}, num_warps={call.num_warps}")
    return call, ins, outs


def autotuned_cpp_kernel(plan: KernelPlan, name: str, table: AutotuneTable | None = None):
    """Like ``compile_cpp_kernel`` but times the parallel/serial and tile-width variants
    (each timing a row of ``table``)."""
    tiles = [config.cpp_tile]
    if plan.is_reduction and len(plan.shape) - 1 not in plan.reduced_dims:
        tiles = [16, 32, 64]
    best = None
    seen_sources = set()
    for parallel in (None, False, True):
        for tile in tiles:
            call, ins, outs = compile_cpp_kernel(plan, name, tile=tile, parallel=parallel)
            if call.source in seen_sources:
                continue
            seen_sources.add(call.source)
            args = [_scratch(b) for b in ins + outs]
            t = _time(call, args)
            _record(table, name, "cpp kernel", f"tile={tile} parallel={parallel}", t)
            if best is None or t < best[0]:
                best = (t, call, ins, outs, tile, parallel)
    assert best is not None
    _, call, ins, outs, tile, parallel = best
    _choose(table, name, best[0])
    call.source = call.source + f"\n// max-autotune: tile={tile}, parallel={parallel}"
    return call, ins, outs


# ---------------------------------------------------------------------------------------
# Matmul: the PyTorch call or a Triton template
# ---------------------------------------------------------------------------------------

@dataclass
class MatmulChoice:
    """``force``: ``None`` (the fastest correct candidate wins), ``"template"`` (the fastest
    template config, even if PyTorch is faster: how tests check templates under the
    interpreter) or ``"extern"``. Timings are taken either way."""
    force: str | None = None


matmul_choice = MatmulChoice()


@dataclass
class AutotuneRow:
    op: str            # the graph node and what it computes: "mm_1 (mm 33x17 @ 17x45)"
    choice: str        # "extern torch.mm" or "triton template"
    config: str        # block sizes of a template; "" for the extern
    time_s: float | None   # None: not timed (it failed, see note)
    chosen: bool = False
    note: str = ""


@dataclass
class AutotuneTable:
    """What ``mode="max-autotune"`` timed and chose: one row per candidate.

    Mirrors: the timing table torch/_inductor/select_algorithm.py prints
    (``AlgorithmSelectorCache.log_results``)."""
    rows: list[AutotuneRow] = field(default_factory=list)

    def __str__(self) -> str:
        if not self.rows:
            return "autotune: nothing was chosen between algorithms"
        lines = ["autotune choices (time per call on the real sizes; * = chosen):"]
        for r in self.rows:
            t = f"{r.time_s * 1e3:9.3f} ms" if r.time_s is not None else "        -   "
            mark = "*" if r.chosen else " "
            lines.append(f"  {mark} {r.op:<34} {r.choice:<18} {r.config:<38} {t}"
                         + (f"  {r.note}" if r.note else ""))
        return "\n".join(lines)


def _record(table: AutotuneTable | None, op: str, choice: str, config: str, t: float) -> None:
    if table is not None:
        table.rows.append(AutotuneRow(op, choice, config, t))


def _choose(table: AutotuneTable | None, op: str, t: float) -> None:
    """Mark the fastest of ``op``'s rows (time ``t``) as chosen."""
    if table is not None:
        next(r for r in table.rows if r.op == op and r.time_s == t).chosen = True


def _scratch_value(value) -> torch.Tensor:
    """A random tensor of an IR value's size (for timing the PyTorch call)."""
    return _random(tuple(value.get_size())).to(value.get_device(), value.get_dtype())


def select_matmul(lowering, node, a, b, bias, extern):
    """``a @ b`` (``+ bias``): time the PyTorch call and template configs, keep the
    fastest correct one (see :class:`MatmulChoice`), record the timings.

    ``extern()`` makes the PyTorch call's buffer; a template wins as a
    :class:`~.ir.TemplateBuffer`. The candidates run on random inputs of the real sizes
    (the template on buffers laid out as the real ones: a transposed weight stays a
    transposed read); a template whose result differs from PyTorch's is rejected.

    The candidates are timed on the bare product: what a template's fused epilogue saves
    (a kernel launch, and writing and reading back the product) is not counted, so the
    choice leans toward PyTorch. (Inductor can time the fused kernels instead:
    ``benchmark_epilogue_fusion`` in torch/_inductor/config.py.)"""
    batch, m, n, k = template_shapes(a, b)
    what = "addmm" if bias is not None else ("bmm" if batch else "mm")
    op = f"{node.name} ({what} {'x'.join(map(str, batch)) + ' x ' if batch else ''}" \
         f"{m}x{k} @ {k}x{n})"
    layout = FixedLayout.contiguous((*batch, m, n), a.get_dtype(), a.get_device())
    name = lowering.new_name()

    args = [_scratch_value(v) for v in ([bias] if bias is not None else []) + [a, b]]
    torch_fn = torch.addmm if bias is not None else torch.matmul
    repeat = 3 if interpreted() else 20   # (a GPU product takes microseconds)
    # (the wrapper calls torch.mm for two matrices, else the prim's own torch.matmul)
    callee = "addmm" if bias is not None else "matmul" if batch else "mm"
    extern_row = AutotuneRow(op, f"extern torch.{callee}", "",
                             _time(torch_fn, args, repeat))
    rows = [extern_row]
    # one float32 rounding per K step at most; TF32 (if PyTorch uses it) and 16-bit floats
    # keep 10 or fewer mantissa bits
    tol = 1e-4 if a.get_dtype() == torch.float32 and fp32_precision() == "ieee" else 2e-2
    for choice in matmul_configs(m, n, k):
        bm, bn, bk, warps, stages = choice
        row = AutotuneRow(op, "triton template",
                          f"BLOCK_M={bm} BLOCK_N={bn} BLOCK_K={bk} warps={warps}", None)
        rows.append(row)
        buf = TemplateBuffer(name, layout, a, b, bias, choice, [node])
        try:
            call, ins, outs = compile_template_kernel([buf], {name}, f"tune_{node.name}")
            scratch = {x.name: _scratch(x) for x in ins + outs}
            row.time_s = _time(call, [scratch[x.name] for x in ins + outs], repeat)
        except Exception as e:   # (Triton's compile and launch errors have no common base)
            row.note = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
            continue
        # the operands as the template read them, for PyTorch's answer on the same values
        operands = [_rebuild(v, scratch)
                    for v in ([bias] if bias is not None else []) + [a, b]]
        checked = all(t is not None for t in operands)
        if not checked:
            row.note = "values not compared (an operand's view is not a PyTorch view)"
        elif not torch.allclose(scratch[name].float(), torch_fn(*operands).float(), rtol=tol,
                                atol=tol):
            row.note = "rejected: differs from PyTorch"
            row.time_s = None
    templates = [r for r in rows[1:] if r.time_s is not None]
    best_template = min(templates, key=lambda r: r.time_s) if templates else None
    force = matmul_choice.force
    forced = f"forced by autotune.matmul_choice.force = {force!r}"
    if force == "template" and best_template is not None:
        best, why = best_template, forced
    elif force == "extern":
        best, why = extern_row, forced
    elif best_template is None:
        best, why = extern_row, "no template config ran and gave PyTorch's answer"
    elif force is None and best_template.time_s < extern_row.time_s:
        best, why = best_template, ""
    else:
        best, why = extern_row, ""
    best.chosen = True
    best.note = best.note or why
    lowering.autotune_table.rows.extend(rows)
    if best is extern_row:
        return extern(f"(max-autotune: {best.choice} chosen over the Triton template"
                      f"{', ' + why if why else ''})")
    config = matmul_configs(m, n, k)[rows.index(best) - 1]
    buf = TemplateBuffer(name, layout, a, b, bias, config, [node])
    buf.autotune_note = (f"{best.config}: {best.time_s * 1e3:.3f} ms; {extern_row.choice}: "
                         f"{extern_row.time_s * 1e3:.3f} ms{' (' + why + ')' if why else ''}")
    return lowering.register(buf)


def _rebuild(value, scratch: dict) -> torch.Tensor | None:
    """The operand ``value`` as a PyTorch tensor over the scratch buffers the template reads
    (a transposed weight: the transpose of its scratch base); None when a view cannot be
    rebuilt as one (then the template's values are not compared)."""
    if not isinstance(value, View):
        return scratch.get(value.name)
    base = _rebuild(value.base, scratch)
    if base is None:
        return None
    try:
        return value.node.target.reference(base, *value.node.args[1:], **value.node.kwargs)
    except Exception:   # (a view whose arguments are not plain sizes)
        return None


# ---------------------------------------------------------------------------------------
# Convolutions: on contiguous tensors or on channels-last copies, measured
# ---------------------------------------------------------------------------------------

# (the call, its arguments' sizes, dtypes and values, threads) -> (contiguous, channels-last)
# seconds: each distinct convolution is timed once per process (the caches: _caches.py)
conv_layout_timings: dict[tuple, tuple[float, float]] = {}
on_reset(conv_layout_timings.clear)


def _describe(value: Any) -> Any:
    if isinstance(value, IRNode):
        return tuple(value.get_size()), value.get_dtype(), value.get_device()
    return tuple(value) if isinstance(value, list) else value


def conv_channels_last(op: str, contiguous: Callable, channels_last: Callable, args: tuple,
                       kwargs: dict, table: AutotuneTable | None = None) -> bool:
    """Should a CPU convolution (or its backward) run on channels-last copies? Under
    ``config.conv_layout = "measure"``: ``contiguous(*args, **kwargs)`` and
    ``channels_last(*args, **kwargs)`` (the same call on copies, its result copied back)
    are timed on random tensors of the real sizes, interleaved, the best of three each,
    and channels-last wins only by ``config.conv_layout_margin``. Both timings are rows of
    ``table`` (``output_code`` prints them)."""
    if config.conv_layout not in ("measure", "contiguous", "channels_last"):
        raise ValueError(f"inductor.config.conv_layout={config.conv_layout!r}: choose "
                         "'measure', 'contiguous' or 'channels_last'")
    if config.conv_layout != "measure":
        return config.conv_layout == "channels_last"
    key = (channels_last.__name__, tuple(_describe(a) for a in args),
           tuple(sorted((k, _describe(v)) for k, v in kwargs.items())), torch.get_num_threads())
    times = conv_layout_timings.get(key)
    if times is None:
        scratch = [_scratch_value(a) if isinstance(a, IRNode) else a for a in args]
        calls = (lambda: contiguous(*scratch, **kwargs), lambda: channels_last(*scratch, **kwargs))
        best = [float("inf")] * 2
        with torch.no_grad():
            for call in calls:
                call()                                        # warm up
            for _ in range(3):
                for i, call in enumerate(calls):
                    start = time.perf_counter()
                    call()
                    best[i] = min(best[i], time.perf_counter() - start)
        times = conv_layout_timings[key] = (best[0], best[1])
    chosen = times[1] <= config.conv_layout_margin * times[0]
    if table is not None:
        for i, choice in enumerate(("contiguous", "channels-last copies")):
            table.rows.append(AutotuneRow(op, choice, "", times[i], chosen=chosen == bool(i)))
    return chosen
