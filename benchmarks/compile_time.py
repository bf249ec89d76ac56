"""Compile time: the course GPT's first training step at 2/4/8/16 layers, and a U-Net whose
capture breaks into 39 graphs, first inference and first training step; cold, side by side
with torch.compile.

    python benchmarks/compile_time.py                       # GPT: 2,4,8,16 layers, both compilers
    python benchmarks/compile_time.py --layers 2,4 --no-torch-compile
    python benchmarks/compile_time.py --model unet          # the 39-graph U-Net, both compilers
    python benchmarks/compile_time.py --profile 16          # cProfile of tutorcompile's call
    python benchmarks/compile_time.py --model unet --profile train

What is timed is a *first call*. GPT: a training step -- forward, the model's loss, backward
-- for :class:`tutorcompile.models.GPT` (vocab 128, width 64, 4 heads, block 32) at batch 8.
U-Net: :class:`ManyGraphUNet` (a small conditional U-Net: ResNet blocks with a timestep
embedding, transformer blocks with cross-attention on a context, two down- and two
up-sampling stages with skip connections; 2.7 M parameters) on a 2x4x16x16 latent, once in
inference (``torch.no_grad``) and once as a training step (forward, MSE loss, backward).
After each of its 38 blocks the forward calls a monitoring function marked
``torch.compiler.disable``, a graph break under both compilers: each makes 39 graphs
(counted and printed: tutorcompile's ``explain``, Dynamo's ``unique_graphs``). The forward
is written out block by block because Dynamo does not resume a frame inside a ``for`` loop
after a break (it would run the whole forward uncompiled and compile each block once).

For tutorcompile a first call runs capture, AOT (decompose, functionalize, joint graph,
partition), lowering, scheduling, codegen and the C++ builds of each graph, then the call
itself; for ``torch.compile`` (Inductor) the same stages of the real compiler.

Every measurement runs in its own Python process with empty caches: a fresh
``TUTORCOMPILE_CACHE_DIR`` (tutorcompile's kernel disk cache), ``TORCHINDUCTOR_CACHE_DIR``
and ``TRITON_CACHE_DIR`` in a new temporary folder, so nothing is warm: not the disk caches,
not imports of the compiler's own modules, not the in-memory caches of the previous case.
Import time (torch, the model) is outside the timer, as are building the model and its
inputs.

Printed per case: first-call seconds for both compilers, their ratio, (GPT) the growth over
the same compiler's 4-layer case, (U-Net) the graph counts, and tutorcompile's per-phase
breakdown from :func:`tutorcompile._logging.compile_times` (``TUTORCOMPILE_LOGS=
compile_times`` prints the same table): the compiler's spine in order
(``_logging.PHASES``: capture; aot and its passes; inductor and its passes; build, waiting
for the C++ compiler), and ``other`` = the first call minus those phases (running the
model itself, Python around it). The first call's loss (or output)
is checked against eager's.

The issues' goals: GPT at 16 layers compiles no slower than torch.compile's 16 layers and
at most 3x tutorcompile's own 4 layers; the 39-graph U-Net compiles no slower than
torch.compile, for inference and training. Numbers depend on the machine and on what else
runs on it; read ratios measured in one run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

COMPILERS = ("tutorcompile", "torch.compile")
UNET_CASES = {"infer": "inference", "train": "training step"}


def run_isolated(argv: list[str], timeout: float, keep_caches: bool = False) -> dict:
    """Run ``python <this script> --worker ...`` in a fresh process, with empty compiler
    caches unless ``keep_caches`` (then with this process's cache folders); returns the JSON
    dict it prints last (or ``{"error": ...}``)."""
    with tempfile.TemporaryDirectory(prefix="tc_compile_time_") as tmp:
        env = dict(os.environ,
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        if not keep_caches:
            env.update(TUTORCOMPILE_CACHE_DIR=os.path.join(tmp, "tutorcompile"),
                       TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"),
                       TRITON_CACHE_DIR=os.path.join(tmp, "triton"))
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


# ---------------------------------------------------------------------------------------
# A model whose capture breaks into 39 graphs
# ---------------------------------------------------------------------------------------

ACTIVATION_STATS: list[torch.Tensor] = []


@torch.compiler.disable
def record_activation(h: torch.Tensor) -> torch.Tensor:
    """A monitoring hook kept out of the compiler (it returns ``h``): one graph break
    wherever it is called, under tutorcompile and torch.compile alike. (Its list is out of
    the compilers' sight: a list the forward held and passed in would become an input of
    every graph after it, one more each time.)"""
    ACTIVATION_STATS.append(h.detach().abs().mean())
    return h


class ResnetBlock(nn.Module):
    """GroupNorm, SiLU, 3x3 conv; plus the timestep embedding; again; plus the shortcut."""

    def __init__(self, cin: int, cout: int, temb: int):
        super().__init__()
        self.norm1 = nn.GroupNorm(8, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.time_emb_proj = nn.Linear(temb, cout)
        self.norm2 = nn.GroupNorm(8, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.shortcut = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time_emb_proj(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return self.shortcut(x) + h


class Attention(nn.Module):
    def __init__(self, dim: int, context_dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(context_dim, dim, bias=False)
        self.to_v = nn.Linear(context_dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q, k, v = (t.reshape(b, -1, self.heads, c // self.heads).transpose(1, 2)
                   for t in (self.to_q(x), self.to_k(context), self.to_v(context)))
        out = F.scaled_dot_product_attention(q, k, v)
        return self.to_out(out.transpose(1, 2).reshape(b, n, c))


class TransformerBlock(nn.Module):
    """A spatial transformer: self-attention, cross-attention on the context, a GEGLU
    feed-forward, between 1x1 projections in and out of the feature map."""

    def __init__(self, c: int, context_dim: int, heads: int = 4):
        super().__init__()
        self.norm = nn.GroupNorm(8, c)
        self.proj_in = nn.Conv2d(c, c, 1)
        self.norm1, self.attn1 = nn.LayerNorm(c), Attention(c, c, heads)
        self.norm2, self.attn2 = nn.LayerNorm(c), Attention(c, context_dim, heads)
        self.norm3 = nn.LayerNorm(c)
        self.ff_in, self.ff_out = nn.Linear(c, 8 * c), nn.Linear(4 * c, c)
        self.proj_out = nn.Conv2d(c, c, 1)

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        b, c, height, width = x.shape
        h = self.proj_in(self.norm(x)).flatten(2).transpose(1, 2)
        n1 = self.norm1(h)
        h = h + self.attn1(n1, n1)
        h = h + self.attn2(self.norm2(h), context)
        a, gate = self.ff_in(self.norm3(h)).chunk(2, dim=-1)
        h = h + self.ff_out(a * F.gelu(gate))
        return x + self.proj_out(h.transpose(1, 2).reshape(b, c, height, width))


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class ManyGraphUNet(nn.Module):
    """A small conditional U-Net (Stable Diffusion's layout at toy size) that records an
    activation statistic after every block: 38 graph breaks, 39 graphs. Several graphs
    are the same computation on other weights (a block repeated at one resolution)."""

    def __init__(self, channels: tuple[int, int, int] = (32, 64, 64), context_dim: int = 64,
                 in_channels: int = 4):
        super().__init__()
        c0, c1, c2 = channels
        temb = 4 * c0
        self.c0 = c0
        self.time_mlp = nn.Sequential(nn.Linear(c0, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.conv_in = nn.Conv2d(in_channels, c0, 3, padding=1)

        def res(cin: int, cout: int) -> ResnetBlock:
            return ResnetBlock(cin, cout, temb)

        def attn(c: int) -> TransformerBlock:
            return TransformerBlock(c, context_dim)

        def down(c: int) -> nn.Conv2d:
            return nn.Conv2d(c, c, 3, stride=2, padding=1)

        self.down = nn.ModuleList([
            res(c0, c0), attn(c0), res(c0, c0), attn(c0), down(c0),
            res(c0, c1), attn(c1), res(c1, c1), attn(c1), down(c1),
            res(c1, c2), attn(c2), res(c2, c2), attn(c2)])
        self.mid = nn.ModuleList([res(c2, c2), attn(c2), res(c2, c2)])
        self.up = nn.ModuleList([
            res(c2 + c2, c2), attn(c2), res(c2 + c2, c2), attn(c2), res(c2 + c1, c2), attn(c2),
            nn.Conv2d(c2, c2, 3, padding=1),
            res(c2 + c1, c1), attn(c1), res(c1 + c1, c1), attn(c1), res(c1 + c0, c1), attn(c1),
            nn.Conv2d(c1, c1, 3, padding=1),
            res(c1 + c0, c0), attn(c0), res(c0 + c0, c0), attn(c0), res(c0 + c0, c0), attn(c0)])
        self.norm_out = nn.GroupNorm(8, c0)
        self.conv_out = nn.Conv2d(c0, in_channels, 3, padding=1)

    def forward(self, sample: torch.Tensor, timestep: torch.Tensor, context: torch.Tensor
                ) -> torch.Tensor:
        d, m, u, rec = self.down, self.mid, self.up, record_activation
        temb = self.time_mlp(timestep_embedding(timestep, self.c0))
        h = s0 = rec(self.conv_in(sample))
        h = rec(d[0](h, temb))
        h = s1 = rec(d[1](h, context))
        h = rec(d[2](h, temb))
        h = s2 = rec(d[3](h, context))
        h = s3 = rec(d[4](h))
        h = rec(d[5](h, temb))
        h = s4 = rec(d[6](h, context))
        h = rec(d[7](h, temb))
        h = s5 = rec(d[8](h, context))
        h = s6 = rec(d[9](h))
        h = rec(d[10](h, temb))
        h = s7 = rec(d[11](h, context))
        h = rec(d[12](h, temb))
        h = s8 = rec(d[13](h, context))
        h = rec(m[0](h, temb))
        h = rec(m[1](h, context))
        h = rec(m[2](h, temb))
        h = rec(u[0](torch.cat([h, s8], 1), temb))
        h = rec(u[1](h, context))
        h = rec(u[2](torch.cat([h, s7], 1), temb))
        h = rec(u[3](h, context))
        h = rec(u[4](torch.cat([h, s6], 1), temb))
        h = rec(u[5](h, context))
        h = rec(u[6](F.interpolate(h, scale_factor=2.0, mode="nearest")))
        h = rec(u[7](torch.cat([h, s5], 1), temb))
        h = rec(u[8](h, context))
        h = rec(u[9](torch.cat([h, s4], 1), temb))
        h = rec(u[10](h, context))
        h = rec(u[11](torch.cat([h, s3], 1), temb))
        h = rec(u[12](h, context))
        h = rec(u[13](F.interpolate(h, scale_factor=2.0, mode="nearest")))
        h = rec(u[14](torch.cat([h, s2], 1), temb))
        h = rec(u[15](h, context))
        h = rec(u[16](torch.cat([h, s1], 1), temb))
        h = rec(u[17](h, context))
        h = rec(u[18](torch.cat([h, s0], 1), temb))
        h = rec(u[19](h, context))
        return self.conv_out(F.silu(self.norm_out(h)))

    @staticmethod
    def example_inputs(batch: int = 2) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A 4x16x16 latent, a timestep per sample, an 8-token context of width 64."""
        return (torch.randn(batch, 4, 16, 16), torch.randint(0, 1000, (batch,)),
                torch.randn(batch, 8, 64))


def first_call(compiler: str, model: nn.Module, step: Callable[[Callable], Any],
               profile: bool = False) -> tuple[float, Any, dict]:
    """Compile ``model`` with ``compiler`` and time ``step(compiled_model)``, its first call
    (profiled by cProfile onto stderr if asked): seconds, what ``step`` returned, and
    tutorcompile's per-phase split."""
    import tutorcompile as tc
    from tutorcompile import _logging

    compiled = tc.compile(model) if compiler == "tutorcompile" else torch.compile(model)
    _logging.reset_compile_times()
    profiler = None
    if profile:
        import cProfile
        profiler = cProfile.Profile()
        profiler.enable()
    start = time.perf_counter()
    result = step(compiled)
    seconds = time.perf_counter() - start
    if profiler:
        profiler.disable()
        import pstats
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(60)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(40)
    phases = _logging.compile_times(as_dict=True) if compiler == "tutorcompile" else {}
    return seconds, result, phases


def gpt_first_step(layers: int, compiler: str, batch: int, threads: int,
                   profile: bool = False) -> dict:
    """In this (fresh) process: seconds of the first compiled training step of a GPT with
    ``layers`` blocks, the per-phase split (tutorcompile) and the loss beside eager's."""
    from tutorcompile import models

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = models.GPT(models.GPTConfig(n_layer=layers))
    x, y = model.example_inputs(batch)[0], model.targets(batch)
    expected = model.loss(model(x), y).item()

    def train_step(compiled: Callable) -> torch.Tensor:
        loss = model.loss(compiled(x), y)
        loss.backward()
        return loss
    seconds, loss, phases = first_call(compiler, model, train_step, profile)
    row = {"layers": layers, "compiler": compiler, "seconds": seconds,
           "loss": loss.item(), "eager_loss": expected}
    if phases:
        row["phases"] = phases
    return row


def unet_first_call(case: str, compiler: str, threads: int, profile: bool = False) -> dict:
    """In this (fresh) process: seconds of :class:`ManyGraphUNet`'s first compiled
    inference (``case="infer"``) or training step (``"train"``, MSE loss), its difference
    from eager (output; loss and gradients), the per-phase split and the graph count."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = ManyGraphUNet()
    inputs = model.example_inputs()
    target = torch.randn_like(inputs[0])
    training = case == "train"

    def run(fn: Callable) -> torch.Tensor:
        if not training:
            with torch.no_grad():
                return fn(*inputs)
        loss = F.mse_loss(fn(*inputs), target)
        loss.backward()
        return loss
    expected = run(model)
    eager_grads = [p.grad.clone() for p in model.parameters()] if training else []
    model.zero_grad(set_to_none=True)
    seconds, result, phases = first_call(compiler, model, run, profile)
    row = {"case": case, "compiler": compiler, "seconds": seconds,
           "max_diff": (result - expected).abs().max().item()}
    if training:
        row["max_diff"] = max([row["max_diff"]] + [(p.grad - g).abs().max().item() for p, g
                                                   in zip(model.parameters(), eager_grads)])
    if phases:
        row["phases"] = phases
    if compiler == "tutorcompile":
        import tutorcompile as tc
        with torch.set_grad_enabled(training):
            row["graphs"] = tc.explain(model)(*inputs).graph_count
    else:
        row["graphs"] = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    return row


def _table(header: list[str], lines: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header] + lines) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.rjust(w) if i else c.ljust(w)  # noqa: E731
                              for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in lines])


def _phase_names() -> tuple[str, ...]:
    """tutorcompile's compile phases, in spine order (imported when the tables are printed,
    after the workers ran)."""
    from tutorcompile._logging import PHASES
    return PHASES


def _phase_cells(row: dict) -> list[str]:
    """tutorcompile's phases and the rest of the first call, in seconds."""
    phases = row.get("phases", {})
    cells = [f"{phases[p]:.2f}" if p in phases else "—" for p in _phase_names()]
    cells.append(f"{row['seconds'] - sum(phases.values()):.2f}" if phases else "—")
    return cells


def _seconds(row: dict) -> str:
    return f"{row['seconds']:.1f} s" if "seconds" in row else row.get("error", "—")[:40]


def _ratio(a: dict, b: dict) -> str:
    return f"{a['seconds'] / b['seconds']:.2f}" if "seconds" in a and "seconds" in b else "—"


def print_gpt_rows(rows: list[dict], layers: list[int]) -> None:
    by = {(r["layers"], r["compiler"]): r for r in rows}
    base = {c: by.get((4, c), {}) for c in COMPILERS}
    header = ["layers", "tutorcompile", "torch.compile", "tc / torch", "tc / tc 4L",
              "torch / torch 4L", *_phase_names(), "other"]
    lines = []
    for n in layers:
        ours, theirs = by.get((n, "tutorcompile"), {}), by.get((n, "torch.compile"), {})
        lines.append([str(n), _seconds(ours), _seconds(theirs), _ratio(ours, theirs),
                      _ratio(ours, base["tutorcompile"]), _ratio(theirs, base["torch.compile"]),
                      *_phase_cells(ours)])
    print(_table(header, lines))
    print("(seconds: first training step, cold caches, each case in a fresh process; "
          "phases: tutorcompile's compile_times, other = the rest of the first call)")


def print_unet_rows(rows: list[dict]) -> None:
    by = {(r["case"], r["compiler"]): r for r in rows}
    header = ["first call", "tutorcompile", "torch.compile", "tc / torch", "graphs tc",
              "graphs torch", *_phase_names(), "other"]
    lines = []
    for case, label in UNET_CASES.items():
        ours, theirs = by.get((case, "tutorcompile"), {}), by.get((case, "torch.compile"), {})
        lines.append([label, _seconds(ours), _seconds(theirs), _ratio(ours, theirs),
                      str(ours.get("graphs", "—")), str(theirs.get("graphs", "—")),
                      *_phase_cells(ours)])
    print(_table(header, lines))
    print("(seconds: first call, cold caches, each case in a fresh process; phases: "
          "tutorcompile's compile_times, other = the rest of the first call)")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("gpt", "unet"), default="gpt",
                        help="the course GPT at several depths, or the 39-graph U-Net")
    parser.add_argument("--layers", default="2,4,8,16", help="GPT: comma-separated depths")
    parser.add_argument("--batch", type=int, default=8, help="GPT: batch size")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per case")
    parser.add_argument("--no-torch-compile", action="store_true",
                        help="skip torch.compile (its cold compiles take tens of seconds)")
    parser.add_argument("--profile", metavar="CASE",
                        help="cProfile tutorcompile's first call, in this process: a GPT "
                             "depth, or the U-Net's 'infer' or 'train'")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--worker", nargs=2, metavar=("CASE", "COMPILER"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    def measure(case: str, compiler: str, profile: bool = False) -> dict:
        if args.model == "gpt":
            return gpt_first_step(int(case), compiler, args.batch, args.threads, profile)
        return unet_first_call(case, compiler, args.threads, profile)

    if args.worker:
        print(json.dumps(measure(*args.worker)))
        return []
    if args.profile:
        row = measure(args.profile, "tutorcompile", profile=True)
        print(json.dumps(row))
        return [row]
    cases = [str(int(n)) for n in args.layers.split(",")] if args.model == "gpt" \
        else list(UNET_CASES)
    compilers = COMPILERS[:1] if args.no_torch_compile else COMPILERS
    rows = []
    for case in cases:
        for compiler in compilers:
            row = run_isolated([__file__, "--worker", case, compiler, "--model", args.model,
                                "--batch", str(args.batch), "--threads", str(args.threads)],
                               args.timeout)
            row.setdefault("compiler", compiler)
            row.setdefault("layers" if args.model == "gpt" else "case",
                           int(case) if args.model == "gpt" else case)
            check(row)
            print(f"  {compiler} {args.model} {case}: " +
                  (f"{row['seconds']:.1f} s" if "seconds" in row else row["error"]),
                  file=sys.stderr)
            rows.append(row)
    if args.model == "gpt":
        print(f"\nCourse GPT, first training step (batch {args.batch}, {args.threads} "
              "thread(s)), cold caches:")
        print_gpt_rows(rows, [int(c) for c in cases])
    else:
        print(f"\nU-Net whose capture breaks after every block ({args.threads} thread(s)), "
              "cold caches:")
        print_unet_rows(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


def check(row: dict) -> None:
    """Turn a first call whose result is not eager's into an error row."""
    if "loss" in row and abs(row["loss"] - row["eager_loss"]) > 1e-3:
        row["error"] = f"loss {row['loss']:.5f} != eager {row['eager_loss']:.5f}"
    if "max_diff" in row and row["max_diff"] > 1e-3:
        row["error"] = f"differs from eager by {row['max_diff']:.2e}"
    if "error" in row:
        row.pop("seconds", None)


if __name__ == "__main__":
    main()
