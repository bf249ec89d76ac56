"""Compile time against depth: the course GPT's first training step, cold, at 2/4/8/16 layers.

    python benchmarks/compile_time.py                       # 2,4,8,16 layers, both compilers
    python benchmarks/compile_time.py --layers 2,4 --no-torch-compile
    python benchmarks/compile_time.py --profile 16          # cProfile of tutorcompile's call

What is timed is a training step's *first call*: forward, the model's loss, backward, for
:class:`tutorcompile.models.GPT` (vocab 128, width 64, 4 heads, block 32) at batch 8. For
tutorcompile that call runs capture, AOT (decompose, functionalize, joint graph, partition),
lowering, scheduling, codegen and the C++ builds of the forward and the backward graph, then
the step itself; for ``torch.compile`` (Inductor) the same stages of the real compiler.

Every measurement runs in its own Python process with empty caches: a fresh
``TUTORCOMPILE_CACHE_DIR`` (tutorcompile's kernel disk cache), ``TORCHINDUCTOR_CACHE_DIR``
and ``TRITON_CACHE_DIR`` in a new temporary folder, so nothing is warm: not the disk caches,
not imports of the compiler's own modules, not the in-memory caches of the previous case.
Import time (torch, the model) is outside the timer, as are building the model and its
inputs.

Printed per case: first-call seconds for both compilers, their ratio, the growth over the
same compiler's 4-layer case, and tutorcompile's per-phase breakdown from
:func:`tutorcompile._logging.compile_times` (``TUTORCOMPILE_LOGS=compile_times`` prints the
same table): capture, aot, lowering, scheduling, codegen, build (waiting for the C++
compiler), and ``other`` = the first call minus those phases (running the step itself,
wrapper planning, Python around it). The first call's loss is checked against eager's.

The issue's goal: 16 layers compile no slower than torch.compile's 16 layers and at most
3× tutorcompile's own 4 layers. Numbers depend on the machine and on what else runs on it;
read ratios measured in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PHASES = ("capture", "aot", "lowering", "scheduling", "codegen", "build")
COMPILERS = ("tutorcompile", "torch.compile")


def run_isolated(argv: list[str], timeout: float) -> dict:
    """Run ``python <this script> --worker ...`` in a fresh process with empty compiler
    caches; returns the JSON dict it prints last (or ``{"error": ...}``)."""
    with tempfile.TemporaryDirectory(prefix="tc_compile_time_") as tmp:
        env = dict(os.environ,
                   TUTORCOMPILE_CACHE_DIR=os.path.join(tmp, "tutorcompile"),
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"),
                   TRITON_CACHE_DIR=os.path.join(tmp, "triton"),
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        env.pop("TUTORCOMPILE_LOGS", None)
        try:
            proc = subprocess.run([sys.executable, *argv], env=env, capture_output=True,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"did not finish in {timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}
    return json.loads(lines[-1])


def gpt_first_step(layers: int, compiler: str, batch: int, threads: int,
                   profile: bool = False) -> dict:
    """In this (fresh) process: seconds of the first compiled training step of a GPT with
    ``layers`` blocks, the per-phase split (tutorcompile) and the loss beside eager's."""
    import torch

    import tutorcompile as tc
    from tutorcompile import _logging, models

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = models.GPT(models.GPTConfig(n_layer=layers))
    x, y = model.example_inputs(batch)[0], model.targets(batch)
    expected = model.loss(model(x), y).item()
    if compiler == "tutorcompile":
        compiled = tc.compile(model)
    else:
        compiled = torch.compile(model)
    _logging.reset_compile_times()
    profiler = None
    if profile:
        import cProfile
        profiler = cProfile.Profile()
        profiler.enable()
    start = time.perf_counter()
    loss = model.loss(compiled(x), y)
    loss.backward()
    seconds = time.perf_counter() - start
    if profiler:
        profiler.disable()
        import pstats
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(60)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(40)
    row = {"layers": layers, "compiler": compiler, "seconds": seconds,
           "loss": loss.item(), "eager_loss": expected}
    if compiler == "tutorcompile":
        row["phases"] = _logging.compile_times(as_dict=True)
    return row


def _table(header: list[str], lines: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header] + lines) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.rjust(w) if i else c.ljust(w)  # noqa: E731
                              for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in lines])


def print_rows(rows: list[dict], layers: list[int]) -> None:
    by = {(r["layers"], r["compiler"]): r for r in rows}
    base = {c: by.get((4, c), {}).get("seconds") for c in COMPILERS}
    header = ["layers", "tutorcompile", "torch.compile", "tc / torch", "tc / tc 4L",
              "torch / torch 4L", *PHASES, "other"]
    lines = []
    for n in layers:
        ours, theirs = by.get((n, "tutorcompile"), {}), by.get((n, "torch.compile"), {})
        s_ours, s_theirs = ours.get("seconds"), theirs.get("seconds")
        phases = ours.get("phases", {})
        cells = [str(n), f"{s_ours:.1f} s" if s_ours else ours.get("error", "—")[:40],
                 f"{s_theirs:.1f} s" if s_theirs else theirs.get("error", "—")[:40],
                 f"{s_ours / s_theirs:.2f}" if s_ours and s_theirs else "—",
                 f"{s_ours / base['tutorcompile']:.2f}" if s_ours and base["tutorcompile"]
                 else "—",
                 f"{s_theirs / base['torch.compile']:.2f}"
                 if s_theirs and base["torch.compile"] else "—"]
        cells += [f"{phases[p]:.2f}" if p in phases else "—" for p in PHASES]
        cells.append(f"{s_ours - sum(phases.values()):.2f}" if phases else "—")
        lines.append(cells)
    print(_table(header, lines))
    print("(seconds: first training step, cold caches, each case in a fresh process; "
          "phases: tutorcompile's compile_times, other = the rest of the first call)")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", default="2,4,8,16", help="comma-separated depths")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per case")
    parser.add_argument("--no-torch-compile", action="store_true",
                        help="skip torch.compile (its cold compiles take tens of seconds)")
    parser.add_argument("--profile", type=int, metavar="LAYERS",
                        help="cProfile tutorcompile's first call at this depth (in process)")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--worker", nargs=2, metavar=("LAYERS", "COMPILER"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(gpt_first_step(int(args.worker[0]), args.worker[1], args.batch,
                                        args.threads)))
        return []
    if args.profile:
        row = gpt_first_step(args.profile, "tutorcompile", args.batch, args.threads,
                             profile=True)
        print(json.dumps(row))
        return [row]
    layers = [int(n) for n in args.layers.split(",")]
    compilers = COMPILERS[:1] if args.no_torch_compile else COMPILERS
    rows = []
    for n in layers:
        for compiler in compilers:
            row = run_isolated([__file__, "--worker", str(n), compiler,
                                "--batch", str(args.batch), "--threads", str(args.threads)],
                               args.timeout)
            row.setdefault("layers", n)
            row.setdefault("compiler", compiler)
            if "loss" in row and abs(row["loss"] - row["eager_loss"]) > 1e-3:
                row["error"] = f"loss {row['loss']:.5f} != eager {row['eager_loss']:.5f}"
                row.pop("seconds")
            print(f"  {compiler} {n} layers: " +
                  (f"{row['seconds']:.1f} s" if "seconds" in row else row["error"]),
                  file=sys.stderr)
            rows.append(row)
    print(f"\nCourse GPT, first training step (batch {args.batch}, {args.threads} thread(s)), "
          "cold caches:")
    print_rows(rows, layers)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
