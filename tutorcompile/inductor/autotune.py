"""``mode="max-autotune"``: try a few variants of each kernel and keep the fastest.

Triton: block sizes, warps per program (and persistent vs looped reductions). C++: with or
without the OpenMP parallel loop, and the tile width of outer-dimension reductions (each
variant is one more compiler run, so autotuning C++ costs seconds per kernel).


A Triton kernel's best ``XBLOCK``/``RBLOCK`` depends on the shape and the device; the heuristics in
``codegen/triton.py`` pick a reasonable one without running anything. Autotuning runs the
kernel on scratch buffers of the right sizes with each candidate (persistent and looped
variants for reductions) and keeps the fastest, measured with ``tutorcompile.bench``.
Under the Triton interpreter timings say little about a GPU, so the candidates are few.

Mirrors: torch/_inductor/runtime/triton_heuristics.py (``CachingAutotuner``) and
torch/_inductor/select_algorithm.py.
"""

from __future__ import annotations

import time

import torch

from ..fx.symbolic_shapes import hint_int
from .codegen.common import KernelPlan
from .codegen.triton import (
    TritonKernelCall,
    choose_blocks,
    choose_num_warps,
    generate_triton_kernel,
    interpreted,
    next_power_of_2,
)


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


def _scratch(buffer) -> torch.Tensor:
    layout = buffer.layout
    storage = max(1, sum((s - 1) * st for s, st in zip(layout.size, layout.stride)) + 1)
    base = torch.randn(storage, device=layout.device).to(layout.dtype) \
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


def autotuned_triton_kernel(plan: KernelPlan, name: str):
    """Like ``compile_triton_kernel`` but benchmarks candidate block sizes first."""
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
            if best is None or t < best[0]:
                best = (t, call, ins, outs)
    _, call, ins, outs = best
    call.source = call.source + (f"\n# max-autotune: XBLOCK={call.xblock}, "
                                 f"RBLOCK={call.rblock}, num_warps={call.num_warps}")
    return call, ins, outs


def autotuned_cpp_kernel(plan: KernelPlan, name: str):
    """Like ``compile_cpp_kernel`` but times the parallel/serial and tile-width variants."""
    from .codegen.cpp import TILE, compile_cpp_kernel
    tiles = [TILE]
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
            if best is None or t < best[0]:
                best = (t, call, ins, outs, tile, parallel)
    _, call, ins, outs, tile, parallel = best
    call.source = call.source + f"\n// max-autotune: tile={tile}, parallel={parallel}"
    return call, ins, outs
