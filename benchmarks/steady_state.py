"""Real models in steady state: eager vs tutorcompile vs torch.compile, per call, side by side.

    python benchmarks/steady_state.py                       # 10 vision + 10 transformer models,
                                                            # infer + train, 1 and all threads
    python benchmarks/steady_state.py --suites vision --modes train --threads 1
    python benchmarks/steady_state.py --models resnet18,gpt2 --no-torch-compile
    python benchmarks/steady_state.py --quick               # 2 small models, 1 thread, short
                                                            # timing, no torch.compile (CI)
    python benchmarks/steady_state.py --plot speed.png      # + a chart of both ratios
    python benchmarks/steady_state.py --device cuda

``compile_time.py`` and ``vision_models.py`` time the *first* call and check the answers;
this script times every call after it, which is what a user who compiled for speed gets. The
models are nobody here's:

* **vision**: torchvision and timm classification models, random init (nothing is
  downloaded), batch 2 of 3×64×64 images, ``num_classes=10``; a training step is forward,
  cross-entropy against fixed labels, backward;
* **transformer**: :func:`tutorcompile.models.hf_model`'s tiny random-config
  ``transformers`` models (2 layers, hidden size 64), input ids 2×16; a training step is
  forward, the mean of the last hidden state times a fixed random tensor, backward.

Each case (model × inference/training × thread count) runs in a fresh process with
``torch.set_num_threads`` set before anything compiles (torch.compile's C++ kernels fix
their OpenMP thread count when they are generated). In it: eager, ``tc.compile(model)``
(backend ``inductor``) and ``torch.compile(model)`` (Inductor) are compiled, checked against
eager, and timed with :func:`tutorcompile.bench.measure_together`: medians of many calls,
the three candidates' samples interleaved, so a slow spell of the shared machine lands on
all of them alike. Gradients are set to None before each step, as ``optimizer.zero_grad()``
does. Read ratios (eager time / compiled time; > 1 is faster), not absolute times.

The check before timing: inference outputs within rtol = atol = 1e-3 of eager's; a training
step's loss within 1e-3 (relative) and every gradient within 1e-2 of eager's in norm
(``|g - g_eager| / |g_eager|``), or else, by PyTorch's own rule, no further from a float64
run than eager's float32 is (one ReLU input within rounding of zero flips an element of a
float32 gradient under any compiler, see ``vision_models.py``), or, where the gradient jumps
at this very input, within 1e-2 of eager's own float32 step with its inputs moved by one
rounding (``yes≈``). Models that draw random numbers in training (dropout, stochastic depth)
are not checked in training: eager itself gives another loss on the next step.
``vision_models.py`` and ``real_models.py`` check those models' training properly, in float64
too. A case whose check fails is timed all the same and marked ``WRONG``.

Compile caches (ours and Inductor's) live in one temporary folder for the whole run, so a
model compiled again at another thread count may reuse kernels: compile seconds are printed
for orientation, ``compile_time.py`` measures them cold.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import vision_models  # noqa: E402
from compile_time import _table, run_isolated  # noqa: E402

# name -> (library, constructor name, extra keyword arguments), as vision_models.MODELS
VISION = {
    "resnet18": ("torchvision", "resnet18", {}),
    "mobilenet_v3_small": ("torchvision", "mobilenet_v3_small", {}),
    "efficientnet_b0": ("torchvision", "efficientnet_b0", {}),
    "squeezenet1_1": ("torchvision", "squeezenet1_1", {}),
    "alexnet": ("torchvision", "alexnet", {}),
    "shufflenet_v2_x0_5": ("torchvision", "shufflenet_v2_x0_5", {}),
    "regnet_y_400mf": ("torchvision", "regnet_y_400mf", {}),
    "vit_tiny": ("timm", "vit_tiny_patch16_224", {"img_size": 64}),
    "convnext_atto": ("timm", "convnext_atto", {}),
    "resnet10t": ("timm", "resnet10t", {}),
}
TRANSFORMER = ("gpt2", "bert", "llama", "mistral", "distilbert", "opt", "t5", "albert",
               "gpt_neox", "qwen2")
SUITES = {"vision": tuple(VISION), "transformer": TRANSFORMER}
QUICK = {"vision": ("squeezenet1_1",), "transformer": ("distilbert",)}
CANDIDATES = ("eager", "tutorcompile", "torch.compile")


def suite_of(name: str) -> str:
    return "vision" if name in VISION else "transformer"


def build(name: str, device: str = "cpu"):
    """(model, inputs, loss function of the output) for ``name`` on ``device``; the model in
    train mode."""
    import torch
    import torch.nn.functional as F

    from tutorcompile.models import hf_input_ids, hf_model
    torch.manual_seed(0)
    if name in VISION:
        labels = torch.tensor([3, 7], device=device)
        return (vision_models.make(*VISION[name]).train().to(device),
                (torch.randn(2, 3, 64, 64).to(device),),
                lambda out: F.cross_entropy(out, labels))
    # a fixed random projection of the last hidden state: ``pow(2).mean()`` of a layer
    # norm's output is a constant (its gradient rounding noise, 1e-9)
    projection = {}

    def loss(out):
        h = out.last_hidden_state
        if "w" not in projection:
            projection["w"] = torch.randn(h.shape, generator=torch.Generator().manual_seed(2)
                                          ).to(h.device, h.dtype)
        return (h * projection["w"]).mean()
    return hf_model(name).train().to(device), (hf_input_ids().to(device),), loss


def _output(out):
    return out if not hasattr(out, "last_hidden_state") else out.last_hidden_state


def _train_step(model, fn, loss_fn):
    params = [p for p in model.parameters() if p.requires_grad]

    def step(*inputs):
        for p in params:
            p.grad = None
        loss = loss_fn(fn(*inputs))
        loss.backward()
        return loss
    return step, params


def _check_train(model, steps: dict, params, inputs, loss_fn) -> dict[str, str]:
    """'yes', 'yes≈', 'WRONG (...)' or '—' per compiled candidate.

    A step is right when its loss and every gradient are within 1e-2 of eager's in norm,
    or else by PyTorch's own rule with a float64 run as the referee
    (``torch._dynamo.utils.same``, as its ``benchmarks/dynamo --accuracy`` runs use): its
    error against float64 at most about eager float32's own. In a deep network with batch
    norm over two images float32 rounding moves gradients by percents (a ReLU input within
    rounding of zero flips), under any compiler. And where the gradient jumps at this very
    input (a max-pool window whose largest two values are within rounding of each other),
    eager's float32 may land on float64's side of the jump by luck: a step that fails the rule
    is right ('yes≈') when it is, as above, eager's own float32 step with the inputs moved by
    one rounding (``eager_neighbours``).

    A model that draws random numbers (dropout) is checked under the same seed as eager:
    a candidate that draws eager's numbers (tutorcompile does, on a CPU) is checked as
    above, within 1e-2; one that draws others (torch.compile's in-kernel generator) cannot
    be compared step for step: '—'."""
    import copy

    import torch
    from torch._dynamo.utils import same

    def run(step, seed, args=inputs):
        # a parameter the loss does not reach (a pooler) has no gradient: zeros, to compare
        torch.manual_seed(seed)
        loss = step(*args).detach()
        return loss, [torch.zeros_like(p) if p.grad is None else p.grad.clone()
                      for p in params]

    state = {k: v.clone() for k, v in model.state_dict().items()}

    def restore():                       # batch-norm running statistics move every step
        with torch.no_grad():
            for k, v in model.state_dict().items():
                v.copy_(state[k])
    expected = run(steps["eager"], 0)
    restore()
    draws = not torch.equal(run(steps["eager"], 1)[0], expected[0])
    names = [n for n, p in model.named_parameters() if p.requires_grad]

    def mismatch(loss, grads, reference) -> str | None:
        """What of a step is off from a reference step: its loss by 1e-3 (relative), or a
        gradient by 1e-2 in norm."""
        if not torch.allclose(loss, reference[0], rtol=1e-3, atol=1e-6):
            return f"loss {loss.item():.6g} != {reference[0].item():.6g}"
        # (a gradient that is zero in exact arithmetic -- the key bias under softmax --
        # is rounding noise of about 1e-12: measured against 1e-5 of the largest instead)
        floor = 1e-5 * max((e.norm() for e in reference[1]), default=torch.tensor(1.0))
        for p_name, g, e in zip(names, grads, reference[1]):
            err = ((g - e).norm() / torch.maximum(e.norm(), floor).clamp_min(1e-12)).item()
            if err > 1e-2:
                return f"grad of {p_name} off by {err:.2g} in norm"
        return None
    referee = []

    def float64_run():
        if not referee:
            wide = copy.deepcopy(model).double()
            wide.load_state_dict({k: v.double() if v.is_floating_point() else v
                                  for k, v in state.items()})
            step, wide_params = _train_step(wide, wide, loss_fn)
            torch.manual_seed(0)
            loss = step(*(x.double() if x.is_floating_point() else x for x in inputs))
            referee.append([loss.detach(), [torch.zeros_like(p) if p.grad is None else
                                            p.grad for p in wide_params]])
        return referee[0]

    neighbours = []

    def eager_neighbours():
        """Eager's float32 steps with the inputs moved by one rounding (relative noise of
        2**-24, eight draws): where the gradient jumps at this input, they land on both sides."""
        if not neighbours:
            noise = torch.Generator().manual_seed(0)
            for _ in range(8):
                moved = [x * (1 + 2**-24 * torch.randn(x.shape, generator=noise,
                                                        dtype=x.dtype).to(x.device))
                         if x.is_floating_point() else x for x in inputs]
                restore()
                neighbours.append(run(steps["eager"], 0, moved))
        return neighbours

    verdicts = {}
    for name, step in steps.items():
        if name == "eager":
            continue
        restore()
        loss, grads = run(step, 0)
        problem = mismatch(loss, grads, expected)
        if problem and draws:       # (a float64 referee would draw in float64: no referee)
            verdicts[name] = "—"
            continue
        if problem and same(
                [expected[0], expected[1]], [loss, grads], fp64_ref=float64_run(), tol=1e-3,
                log_error=lambda *a, **k: None):
            problem = None                           # as close to float64 as eager is
        elif problem and any(mismatch(loss, grads, n) is None for n in eager_neighbours()):
            verdicts[name] = "yes≈"                  # eager's own step, a rounding away
            continue
        verdicts[name] = "yes" if problem is None else f"WRONG ({problem})"
    restore()
    return verdicts


def _verdicts(right: dict[str, str]) -> str:
    """One word when every candidate got the same verdict, else each candidate's."""
    if len(set(right.values())) == 1:
        return next(iter(right.values()))
    short = {"tutorcompile": "tc", "torch.compile": "torch"}
    return ", ".join(f"{short.get(k, k)} {v}" for k, v in right.items())


def case(name: str, mode: str, threads: int, device: str, torch_compile: bool,
         timing: dict) -> dict:
    """In this (fresh) process: compile, check and time ``name`` in ``mode`` at ``threads``."""
    import torch

    import tutorcompile as tc
    from tutorcompile.bench import measure_together, time_first_call
    torch.set_num_threads(threads)
    model, inputs, loss_fn = build(name, device)
    train = mode == "train"
    if not train:
        model.eval()
    compiled = {"eager": model, "tutorcompile": tc.compile(model)}
    if torch_compile:
        compiled["torch.compile"] = torch.compile(model)
    row = {"model": name, "suite": suite_of(name), "mode": mode, "threads": threads,
           "device": device}
    with torch.set_grad_enabled(train):
        if train:
            steps, params = {}, None
            for label, m in compiled.items():
                steps[label], params = _train_step(model, m, loss_fn)
        else:
            steps = {label: m for label, m in compiled.items()}
        for label in compiled:
            if label != "eager":
                row[f"{label} compile_s"], _ = time_first_call(steps[label], *inputs)
        if train:
            row["right"] = _check_train(model, steps, params, inputs, loss_fn)
        else:
            expected = _output(model(*inputs))
            row["right"] = {}
            for label in compiled:
                if label != "eager":
                    got = _output(steps[label](*inputs))
                    ok = torch.allclose(got, expected, rtol=1e-3, atol=1e-3)
                    row["right"][label] = "yes" if ok else (
                        f"WRONG (max |diff| {(got - expected).abs().max().item():.3g})")
        for label, m in measure_together(steps, *inputs, device=device, **timing).items():
            row[f"{label} ms"] = m.median_ms
            row[f"{label} noisy"] = m.noisy
    return row


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def print_rows(rows: list[dict]) -> None:
    header = ["model", "mode", "thr", "eager", "tutorcompile", "torch.compile", "tc ×",
              "torch ×", "tc compile", "torch compile", "right"]
    lines = []
    from tutorcompile.bench import format_ms
    for r in rows:
        if "error" in r:
            lines.append([r["model"], r["mode"], str(r["threads"]), r["error"][:80]]
                         + [""] * 7)
            continue
        e, ours, theirs = (r.get(f"{k} ms") for k in CANDIDATES)
        noisy = " !" if any(r.get(f"{k} noisy") for k in CANDIDATES) else ""
        wrong = [f"{k}: {v}" for k, v in r["right"].items() if v.startswith("WRONG")]
        lines.append([
            r["model"], r["mode"], str(r["threads"]), format_ms(e), format_ms(ours),
            format_ms(theirs) if theirs else "—", f"{e / ours:.2f}",
            f"{e / theirs:.2f}" if theirs else "—",
            f"{r['tutorcompile compile_s']:.1f} s",
            f"{r['torch.compile compile_s']:.1f} s" if theirs else "—",
            "; ".join(wrong) if wrong else _verdicts(r["right"]) + noisy])
    print(_table(header, lines))
    print("(× = eager time / compiled time, > 1 is faster; right: the check before timing, "
          "— where the model draws random numbers in training and the candidates other "
          "numbers than eager's; yes≈ eager's own step with its inputs moved by one rounding: "
          "the gradient jumps at this input; ! a spread above "
          "10% of the median)")
    print("\ngeomean speed-up over eager:")
    summary = []
    keys = sorted({(r["suite"], r["mode"], r["threads"]) for r in rows if "error" not in r},
                  key=lambda k: (k[0] != "vision", k[1] != "infer", k[2]))
    for suite, mode, threads in keys:
        group = [r for r in rows if "error" not in r and
                 (r["suite"], r["mode"], r["threads"]) == (suite, mode, threads)]
        ours = geomean([r["eager ms"] / r["tutorcompile ms"] for r in group])
        theirs = [r["eager ms"] / r["torch.compile ms"] for r in group
                  if "torch.compile ms" in r]
        slowest = min(group, key=lambda r: r["eager ms"] / r["tutorcompile ms"])
        summary.append([suite, mode, str(threads), str(len(group)), f"{ours:.2f}",
                        f"{geomean(theirs):.2f}" if theirs else "—",
                        f"{slowest['model']} "
                        f"{slowest['eager ms'] / slowest['tutorcompile ms']:.2f}"])
    print(_table(["suite", "mode", "threads", "models", "tutorcompile", "torch.compile",
                  "slowest (tc ×)"], summary))


def plot(rows: list[dict], path: str) -> None:
    """Horizontal bars of both speed-ups over eager, one panel per (mode, threads)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [r for r in rows if "error" not in r]
    panels = sorted({(r["mode"], r["threads"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 0.3 * len(rows) / max(
        1, len(panels)) + 1.5), sharey=True, squeeze=False)
    for ax, (mode, threads) in zip(axes[0], panels):
        group = [r for r in rows if (r["mode"], r["threads"]) == (mode, threads)]
        names = [r["model"] for r in group]
        ys = range(len(group))
        ours = [r["eager ms"] / r["tutorcompile ms"] for r in group]
        theirs = [r["eager ms"] / r["torch.compile ms"] if "torch.compile ms" in r else 0
                  for r in group]
        ax.barh([y - 0.2 for y in ys], ours, height=0.4, label="tutorcompile")
        ax.barh([y + 0.2 for y in ys], theirs, height=0.4, label="torch.compile")
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_yticks(list(ys), names)
        ax.invert_yaxis()
        ax.set_xlabel("speed-up over eager")
        ax.set_title(f"{mode}, {threads} thread(s)")
    axes[0][0].legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"plot written to {path}")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="two small models, 1 thread, short timing, no torch.compile")
    parser.add_argument("--suites", default="vision,transformer", help="comma-separated")
    parser.add_argument("--models", help="comma-separated (default: every model of --suites)")
    parser.add_argument("--modes", default="infer,train", help="infer, train or both")
    parser.add_argument("--threads", default=None,
                        help=f"comma-separated thread counts (default 1,{os.cpu_count()})")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--no-torch-compile", action="store_true",
                        help="skip torch.compile (its compiles take tens of seconds a model)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per case")
    parser.add_argument("--json", help="also write the rows to this file (after every case, "
                        "so a run cut short keeps what it measured)")
    parser.add_argument("--repeat", type=int, help="rounds of samples per case (default 15)")
    parser.add_argument("--min-time", type=float,
                        help="seconds of samples per candidate and case (default 1.0)")
    parser.add_argument("--plot", help="also draw both speed-ups into this image file")
    parser.add_argument("--worker", nargs=3, metavar=("MODEL", "MODE", "THREADS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    torch_compile = not (args.no_torch_compile or args.quick)
    timing = ({"warmup": 2, "repeat": 3, "min_time": 0.05, "max_time": 1.0} if args.quick
              else {"warmup": 3, "repeat": 15, "min_time": 1.0, "max_time": 10.0})
    timing.update({k: v for k, v in (("repeat", args.repeat), ("min_time", args.min_time))
                   if v is not None})
    if args.worker:
        name, mode, threads = args.worker
        print(json.dumps(case(name, mode, int(threads), args.device, torch_compile, timing)))
        return []
    suites = args.suites.split(",")
    names = (args.models.split(",") if args.models else
             [n for s in suites for n in (QUICK if args.quick else SUITES)[s]])
    unknown = [n for n in names if n not in VISION and n not in TRANSFORMER]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: "
                     f"{', '.join([*VISION, *TRANSFORMER])}")
    threads = [int(t) for t in (args.threads or ("1" if args.quick else
                                                 f"1,{os.cpu_count()}")).split(",")]
    passthrough = ["--device", args.device] + (["--quick"] if args.quick else []) + (
        ["--no-torch-compile"] if not torch_compile else []) + [
        f"--{k.replace('_', '-')}={timing[k]}" for k in ("repeat", "min_time")
        if getattr(args, k) is not None]
    rows = []
    with tempfile.TemporaryDirectory(prefix="tc_steady_") as caches:
        # one cache folder for the whole run: a case at another thread count reuses kernels
        os.environ.update(TUTORCOMPILE_CACHE_DIR=os.path.join(caches, "tutorcompile"),
                          TORCHINDUCTOR_CACHE_DIR=os.path.join(caches, "inductor"),
                          TRITON_CACHE_DIR=os.path.join(caches, "triton"))
        for n_threads in threads:
            for name in names:
                for mode in args.modes.split(","):
                    t0 = time.perf_counter()
                    row = run_isolated([__file__, "--worker", name, mode, str(n_threads),
                                        *passthrough], args.timeout, keep_caches=True)
                    row.update(model=name, suite=suite_of(name), mode=mode,
                               threads=n_threads)
                    rows.append(row)
                    ratio = (f"tc {row['eager ms'] / row['tutorcompile ms']:.2f}×" +
                             (f", torch {row['eager ms'] / row['torch.compile ms']:.2f}×"
                              if "torch.compile ms" in row else "")
                             if "error" not in row else row["error"])
                    print(f"  {name} {mode} {n_threads} thread(s): {ratio} "
                          f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
                    if args.json:
                        Path(args.json).write_text(json.dumps(rows, indent=1))
    print(f"\nSteady state on {args.device}, medians of interleaved samples:")
    print_rows(rows)
    if args.plot:
        plot(rows, args.plot)
    return rows


if __name__ == "__main__":
    main()
