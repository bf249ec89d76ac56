"""Vision models nobody here wrote: one training step on each rung of the backend ladder vs eager.

    python benchmarks/vision_models.py                          # every model, all three rungs
    python benchmarks/vision_models.py --models resnet18,vit_tiny --backends inductor
    python benchmarks/vision_models.py --torch-compile          # + torch.compile's compile s

torchvision and timm classification models, random init (nothing is downloaded), batch 4 of
3×64×64 images, ``num_classes=10``. For each model and backend, in a fresh process with empty
kernel caches (``TUTORCOMPILE_CACHE_DIR``, ``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR``
in a new temporary folder, as in ``compile_time.py``):

* eager runs one training step (forward, ``out.square().sum()``, backward) from the model's
  initial state; its output, every parameter's gradient and every buffer (batch-norm running
  statistics) are kept, in float32 and in float64;
* the buffers are put back and ``tc.compile(model, backend=..., fullgraph=True)`` runs the
  same step: ``fullgraph=True`` makes any graph break an error, so a row that passes was
  one graph. The compiled first call (capture, AOT, kernels, the step) is timed;
* ``float32 allclose``: output, gradients and buffers within rtol = atol = 1e-3 of eager's,
  with the worst ``|diff| / (atol + rtol |eager|)`` (> 1 fails);
* ``float32 torch same()``: PyTorch's own accuracy check for compiled models
  (``torch._dynamo.utils.same``, as its ``benchmarks/dynamo --accuracy`` runs use), with
  eager's float64 result as the referee: allclose, or a root-mean-square error against
  float64 at most twice eager float32's own;
* ``float64 allclose``: the same step compiled again in float64, against eager float64.

``aot_eager`` leaves every op to PyTorch, so its row is eager's to the last bit (worst 0);
the decomposed rungs (``aot_eager_decomp_partition``, ``inductor``) round differently.
Why three columns: float32 rounding differs between any two ways of computing a network
(a decomposed batch norm, another summation order), and in a deep network with batch norm
over few values a difference of one ulp can flip a ReLU whose input is within rounding of
zero; that element's gradient then differs by its whole value, and elementwise allclose
fails although neither result is more wrong than the other (torch.compile's Inductor fails
it on resnet18 the same way, ``--torch-compile``). Float64 removes the rounding: a real bug
(a wrong mask, a wrong formula) fails there by orders of magnitude.

Rounding is not all alike, so the rows are also read against float64, tensor by tensor: a
compiled step whose float32 error is several times eager's is computing something worse,
even when float64 agrees. That is how our C++ sums were found to lose precision (a batch
norm's mean added value after value in float: its output 9-12x eager's error, resnet18's
ReLU flip under inductor; fixed by adding long sums in double). What still fails is a ReLU
flip (resnet18 under the decomposed rung, regnet under both) or a gradient that eager
itself gets no closer (efficientnet_b0's depthwise-convolution weights: eager's float32 is
up to 6x the tolerance away from float64), and torch.compile fails the same rows: its first
step here (``--threads 1``, 2026-11) gave resnet18 266, efficientnet_b0 19, regnet_y_400mf
1510, shufflenet_v2_x0_5 1.6.

The goal: every model matches eager under both backends, one graph each, none over 300 s to
compile on a 2-core CPU. These models use ``inplace=True`` activations, batch norm in
training, squeeze-and-excitation, depthwise and grouped convolutions, stochastic depth
(EfficientNet, ConvNeXt: random masks drawn in place), layer norm over channels, layer scale
and attention.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compile_time import _table, run_isolated  # noqa: E402

TOL = dict(rtol=1e-3, atol=1e-3)

# name -> (library, constructor name, extra keyword arguments)
MODELS = {
    "resnet18": ("torchvision", "resnet18", {}),
    "mobilenet_v3_small": ("torchvision", "mobilenet_v3_small", {}),
    "efficientnet_b0": ("torchvision", "efficientnet_b0", {}),
    "regnet_y_400mf": ("torchvision", "regnet_y_400mf", {}),
    "shufflenet_v2_x0_5": ("torchvision", "shufflenet_v2_x0_5", {}),
    "convnext_tiny": ("torchvision", "convnext_tiny", {}),
    "vit_tiny": ("timm", "vit_tiny_patch16_224", {"img_size": 64}),
    "deit_tiny": ("timm", "deit_tiny_patch16_224", {"img_size": 64}),
    "mobilevitv2_050": ("timm", "mobilevitv2_050", {}),
}


def build(name: str):
    return make(*MODELS[name])


def make(library: str, ctor: str, kwargs: dict):
    """A torchvision or timm classifier with 10 classes, randomly initialised."""
    from tutorcompile.environment import make_torchvision_importable
    make_torchvision_importable()
    if library == "torchvision":
        import torchvision
        return getattr(torchvision.models, ctor)(num_classes=10, **kwargs)
    import timm
    return timm.create_model(ctor, pretrained=False, num_classes=10, **kwargs)


def _step(model, fn, x):
    import torch
    torch.manual_seed(1)
    out = fn(x)
    out.square().sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out.detach(), grads, {n: b.clone() for n, b in model.named_buffers()}


def _worst(got, expected) -> tuple[float, str]:
    """The largest ``|got - expected| / (atol + rtol |expected|)`` over all tensors (> 1 is
    a mismatch at ``TOL``) and where."""
    worst, where = 0.0, ""
    pairs = [("output", got[0], expected[0])]
    for kind, index in (("grad", 1), ("buffer", 2)):
        if got[index].keys() != expected[index].keys():
            return float("inf"), f"{kind} names differ"
        pairs += [(f"{kind} {n}", got[index][n], v) for n, v in expected[index].items()]
    for label, a, b in pairs:
        if a.shape != b.shape:
            return float("inf"), f"{label}: shape {tuple(a.shape)} != {tuple(b.shape)}"
        if not a.is_floating_point():
            err = float((a != b).any())
        else:
            err = ((a - b).abs() / (TOL["atol"] + TOL["rtol"] * b.abs())).max().item()
        if err > worst:
            worst, where = err, label
    return worst, where


def train_step_case(name: str, backend: str, threads: int, fp64: bool) -> dict:
    """In this (fresh) process: eager vs compiled first training step of model ``name``, in
    float32 (timed) and, with ``fp64``, again in float64 (a fresh compilation)."""
    import torch
    from torch._dynamo.utils import same

    import tutorcompile as tc

    torch.set_num_threads(threads)
    row = {"model": name, "backend": backend}
    reference = None                                 # eager in float64
    for dtype in (torch.float64, torch.float32):
        torch.manual_seed(0)
        model = build(name).to(dtype)
        x = torch.randn(4, 3, 64, 64).to(dtype)
        start = {n: b.clone() for n, b in model.named_buffers()}
        expected = _step(model, model, x)
        if dtype == torch.float64:
            reference = expected
            if not fp64:
                continue
        with torch.no_grad():
            for n, b in model.named_buffers():
                b.copy_(start[n])
        t0 = time.perf_counter()
        if backend == "torch.compile":
            torch._dynamo.reset()
            compiled = torch.compile(model, fullgraph=True)
        else:
            tc.reset()
            compiled = tc.compile(model, backend=backend, fullgraph=True)
        got = _step(model, compiled, x)
        seconds = time.perf_counter() - t0
        worst, where = _worst(got, expected)
        key = "fp32" if dtype == torch.float32 else "fp64"
        row.update({f"{key}_worst": worst, f"{key}_where": where})
        if dtype == torch.float32:
            row["seconds"] = seconds
            row["params"] = sum(p.numel() for p in model.parameters())
            # PyTorch's own accuracy check (benchmarks/dynamo --accuracy): allclose, or an
            # error against the float64 result at most twice eager's (root mean square)
            row["same"] = bool(same(expected, got, fp64_ref=reference, tol=1e-3,
                                    log_error=lambda *a, **k: None))
    return row


def _match(row: dict, key: str) -> str:
    if f"{key}_worst" not in row:
        return "—"
    worst = row[f"{key}_worst"]
    return f"yes ({worst:.2g})" if worst <= 1 else f"NO ({worst:.3g}: {row[f'{key}_where']})"


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated")
    parser.add_argument("--backends", default="aot_eager,aot_eager_decomp_partition,inductor",
                        help="comma-separated")
    parser.add_argument("--torch-compile", action="store_true",
                        help="also time torch.compile's (Inductor) first step, cold")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--no-fp64", action="store_true",
                        help="skip the float64 check (a second compilation per case)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per case")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--worker", nargs=2, metavar=("MODEL", "BACKEND"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(train_step_case(*args.worker, args.threads, not args.no_fp64)))
        return []
    backends = args.backends.split(",") + (["torch.compile"] if args.torch_compile else [])
    rows = []
    for name in args.models.split(","):
        for backend in backends:
            row = run_isolated([__file__, "--worker", name, backend, "--threads",
                                str(args.threads)] + (["--no-fp64"] if args.no_fp64 else []),
                               args.timeout)
            row.setdefault("model", name)
            row.setdefault("backend", backend)
            print(f"  {name} {backend}: " + (
                f"{row['seconds']:.1f} s, float32 {_match(row, 'fp32')} same() {row['same']}, "
                f"float64 {_match(row, 'fp64')}" if "seconds" in row else row["error"]),
                file=sys.stderr)
            rows.append(row)
    by = {(r["model"], r["backend"]): r for r in rows}
    header = ["model", "params", "backend", "compile", "float32 allclose",
              "float32 torch same()", "float64 allclose"]
    lines = []
    for name in args.models.split(","):
        for backend in backends:
            r = by[(name, backend)]
            if "seconds" not in r:
                lines.append([name, "", backend, r["error"][:70], "", "", ""])
                continue
            lines.append([name, f"{r['params'] / 1e6:.1f} M", backend, f"{r['seconds']:.1f} s",
                          _match(r, "fp32"), {True: "yes", False: "NO"}.get(r.get("same"), "—"),
                          _match(r, "fp64")])
    print("\nOne training step, batch 4 × 3×64×64, random init, fullgraph=True, cold caches "
          f"({args.threads} thread(s)):")
    print(_table(header, lines))
    print("(compile: the compiled float32 step's first call; allclose: output, gradients and "
          "buffers within rtol=atol=1e-3 of eager in the same dtype, in brackets the worst "
          "|diff| / (atol + rtol |eager|), > 1 fails; torch same(): PyTorch's accuracy check, "
          "torch._dynamo.utils.same with eager's float64 result as the referee)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
