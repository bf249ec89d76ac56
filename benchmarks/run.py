"""Benchmarks: eager PyTorch vs torch.compile (Inductor) vs tutorcompile, measured in one run.

    python benchmarks/run.py            # the full suite (Inductor's cold compiles take minutes)
    python benchmarks/run.py --quick    # smaller sizes, Inductor only on two cases
    python benchmarks/run.py --no-inductor --cases chain,softmax

For every case it prints and saves (``benchmarks/results/``: JSON, CSV and a PNG plot):

* run time (fastest sample) of eager, of ``torch.compile`` (Inductor), of tutorcompile fused and of
  tutorcompile with fusion turned off (one kernel per op) -- and the ratios against eager;
* compile times: tutorcompile *cold* (an empty kernel cache: the C++ compiler runs) and *warm*
  (the kernels come from the disk cache), Inductor's first call (its own caches may make it
  warmer than truly cold; it says so in the output);
* kernel counts before and after fusion, and the bytes the fusion report says are moved.

Inference cases compile a prim graph (``tutorcompile.ops.trace`` of the functions in
``tutorcompile.inductor.examples``) with ``compile_fx``. Training cases (an MLP and the seed
model Linear(10,5)-ReLU-Linear(5,2)-Softmax) run a forward+backward step through
``tutorcompile.aot.aot_module`` with stage 5 as its forward and backward compiler.

Numbers depend on the machine and on what else runs on it: read ratios, not absolutes, and
repeat on a quiet machine before believing a small difference.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import tutorcompile  # noqa: E402,F401  (sets TRITON_INTERPRET without a GPU)
from tutorcompile.bench import measure  # noqa: E402
from tutorcompile.inductor import codecache, examples  # noqa: E402
from tutorcompile.inductor.compile_fx import compile_fx, inner_compiler  # noqa: E402
from tutorcompile.ops import trace  # noqa: E402


@dataclass
class Result:
    case: str
    shape: str
    eager_ms: float
    inductor_ms: float | None = None
    tc_ms: float | None = None
    tc_unfused_ms: float | None = None
    tc_cold_compile_s: float | None = None
    tc_warm_compile_s: float | None = None
    inductor_first_call_s: float | None = None
    kernels_before: int | None = None
    kernels_after: int | None = None
    mb_before: float | None = None
    mb_after: float | None = None
    notes: list[str] = field(default_factory=list)

    def ratio(self, ms: float | None) -> float | None:
        return None if ms is None else self.eager_ms / ms


# ---------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------

def inference_cases(n: int, device: str):
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(device)
    h = n // 4
    return {
        "chain": ("gelu(x+b)*sigmoid(x+b)", f"{n}x{n}", (randn(n, n), randn(n))),
        "softmax": ("softmax", f"{n}x{n}", (randn(n, n),)),
        "layernorm": ("layernorm", f"{n}x{n}", (randn(n, n), randn(n), randn(n))),
        "rmsnorm": ("RMSNorm", f"{n}x{n}", (randn(n, n), randn(n))),
        "mlp": ("MLP forward (gelu epilogue)", f"{h}x{h}->{4 * h}->{h}",
                (randn(h, h), randn(h, 4 * h) / h ** 0.5, randn(4 * h),
                 randn(4 * h, h) / (4 * h) ** 0.5)),
    }


def training_cases(n: int, device: str):
    torch.manual_seed(0)
    h = max(n // 8, 16)
    mlp = torch.nn.Sequential(torch.nn.Linear(h, 4 * h), torch.nn.GELU(),
                              torch.nn.Linear(4 * h, h)).to(device)
    seed = torch.nn.Sequential(torch.nn.Linear(10, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2),
                               torch.nn.Softmax(dim=-1)).to(device)
    return {
        "mlp_train": ("MLP training step", f"{4 * h}x{h}, hidden {4 * h}", mlp,
                      torch.randn(4 * h, h, device=device)),
        "seed_train": ("seed model training step", "8x10", seed,
                       torch.randn(8, 10, device=device)),
    }


def step(model, x):
    out = model(x)
    out.sum().backward()
    return out


# ---------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------

def best_ms(fn, *args, repeat: int) -> float:
    """The fastest sample (ms): on a shared machine, other processes only ever *add* time,
    so the minimum is the most repeatable estimate."""
    return min(measure(fn, *args, repeat=repeat).times_ms)


def time_inductor(fn, args, result: Result, repeat: int):
    torch._dynamo.reset()
    compiled = torch.compile(fn)
    t0 = time.perf_counter()
    compiled(*args)
    result.inductor_first_call_s = time.perf_counter() - t0
    result.inductor_ms = best_ms(compiled, *args, repeat=repeat)


def run_inference(key, label, shape, args, opts) -> Result:
    fn_torch = examples.TORCH[key]
    result = Result(label, shape, best_ms(fn_torch, *args, repeat=opts.repeat))
    graph = trace(getattr(examples, key), *args)
    backend = "triton" if args[0].is_cuda else "cpp"
    codecache._loaded.clear()
    t0 = time.perf_counter()
    compiled = compile_fx(graph, args, backend=backend)
    result.tc_cold_compile_s = time.perf_counter() - t0
    codecache._loaded.clear()   # as a new process would: only the disk cache is warm
    t0 = time.perf_counter()
    compiled = compile_fx(graph, args, backend=backend)
    result.tc_warm_compile_s = time.perf_counter() - t0
    torch.testing.assert_close(compiled(*args), fn_torch(*args), rtol=1e-3, atol=1e-3)
    result.tc_ms = best_ms(compiled, *args, repeat=opts.repeat)
    report = compiled.fusion_report
    result.kernels_before, result.kernels_after = report.kernels_before, report.kernels_after
    result.mb_before, result.mb_after = report.bytes_before / 1e6, report.bytes_after / 1e6
    unfused = compile_fx(graph, args, backend=backend, fusion=False)
    result.tc_unfused_ms = best_ms(unfused, *args, repeat=opts.repeat)
    if opts.inductor_for(key):
        time_inductor(fn_torch, args, result, opts.repeat)
    return result


def run_training(key, label, shape, model, x, opts) -> Result:
    from tutorcompile.aot import aot_module
    result = Result(label, shape, best_ms(step, model, x, repeat=opts.repeat))
    codecache._loaded.clear()
    compiler = inner_compiler()
    compiled = aot_module(model, fw_compiler=compiler, bw_compiler=compiler)
    t0 = time.perf_counter()
    step(compiled, x)
    result.tc_cold_compile_s = time.perf_counter() - t0
    codecache._loaded.clear()
    compiled = aot_module(model, fw_compiler=compiler, bw_compiler=compiler)
    t0 = time.perf_counter()
    step(compiled, x)
    result.tc_warm_compile_s = time.perf_counter() - t0
    result.tc_ms = best_ms(step, compiled, x, repeat=opts.repeat)
    art = compiled.artifacts
    before = after = 0
    for part in (art.forward, art.backward):
        inner = getattr(part, "compiled", None)
        if inner is not None and inner.fusion_report is not None:
            before += inner.fusion_report.kernels_before
            after += inner.fusion_report.kernels_after
    result.kernels_before, result.kernels_after = before, after
    unfused_compiler = inner_compiler(fusion=False)
    unfused = aot_module(model, fw_compiler=unfused_compiler, bw_compiler=unfused_compiler)
    result.tc_unfused_ms = best_ms(step, unfused, x, repeat=opts.repeat)
    if opts.inductor_for(key):
        torch._dynamo.reset()
        compiled_model = torch.compile(model)
        t0 = time.perf_counter()
        step(compiled_model, x)
        result.inductor_first_call_s = time.perf_counter() - t0
        result.inductor_ms = best_ms(step, compiled_model, x, repeat=opts.repeat)
    return result


# ---------------------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------------------

def fmt(v, spec="{:.2f}"):
    return "-" if v is None else spec.format(v)


def table(results: list[Result]) -> str:
    head = ["case", "shape", "eager ms", "inductor ms", "tc ms", "tc unfused ms",
            "tc x eager", "inductor x eager", "tc cold s", "tc warm s", "inductor 1st s",
            "kernels", "MB moved"]
    rows = [head]
    for r in results:
        rows.append([r.case, r.shape, fmt(r.eager_ms), fmt(r.inductor_ms), fmt(r.tc_ms),
                     fmt(r.tc_unfused_ms), fmt(r.ratio(r.tc_ms), "{:.2f}x"),
                     fmt(r.ratio(r.inductor_ms), "{:.2f}x"), fmt(r.tc_cold_compile_s),
                     fmt(r.tc_warm_compile_s), fmt(r.inductor_first_call_s, "{:.1f}"),
                     f"{r.kernels_before}->{r.kernels_after}",
                     "-" if r.mb_before is None else f"{r.mb_before:.0f}->{r.mb_after:.0f}"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def plot(results: list[Result], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [r.case for r in results]
    series = {"tutorcompile": [r.ratio(r.tc_ms) or 0 for r in results],
              "tutorcompile, no fusion": [r.ratio(r.tc_unfused_ms) or 0 for r in results],
              "torch.compile (Inductor)": [r.ratio(r.inductor_ms) or 0 for r in results]}
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.27
    for i, (name, values) in enumerate(series.items()):
        ax.bar([j + (i - 1) * width for j in range(len(labels))], values, width, label=name)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("speed-up over eager (higher is better)")
    ax.set_title(f"tutorcompile benchmarks ({platform.machine()}, {os.cpu_count()} cores)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


class Options:
    def __init__(self, args):
        self.repeat = 3 if args.quick else 5
        self.inductor = args.inductor
        if args.no_inductor:
            self.inductor = ""
        elif self.inductor is None:
            self.inductor = "chain,softmax" if args.quick else "all"

    def inductor_for(self, key: str) -> bool:
        return self.inductor == "all" or key in self.inductor.split(",")


def main(argv=None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="1024x1024 instead of 4096x4096; Inductor on chain and softmax")
    parser.add_argument("--size", type=int, default=None, help="n for the n x n cases")
    parser.add_argument("--cases", default="all", help="comma-separated keys: chain, softmax, "
                        "layernorm, rmsnorm, mlp, mlp_train, seed_train")
    parser.add_argument("--inductor", default=None,
                        help="cases to run torch.compile on ('all', or keys)")
    parser.add_argument("--no-inductor", action="store_true", help="skip torch.compile")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads for everyone (eager, Inductor and our "
                        "OpenMP kernels share the runtime)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args(argv)
    opts = Options(args)
    n = args.size or (1024 if args.quick else 4096)
    if args.threads:
        torch.set_num_threads(args.threads)
    from tqdm import tqdm

    # A fresh kernel cache, so "cold" compile really runs the C++ compiler.
    os.environ["TUTORCOMPILE_CACHE_DIR"] = tempfile.mkdtemp(prefix="tutorcompile-bench-")
    cases = {**inference_cases(n, args.device), **training_cases(n, args.device)}
    keys = list(cases) if args.cases == "all" else args.cases.split(",")
    results = []
    for key in tqdm(keys, desc="benchmarks", unit="case"):
        spec = cases[key]
        if key.endswith("_train"):
            results.append(run_training(key, *spec, opts))
        else:
            results.append(run_inference(key, *spec, opts))
    print()
    print(f"{platform.platform()}, {os.cpu_count()} cores, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}, device {args.device}; times: fastest of the samples")
    print(table(results))
    print("tc = tutorcompile (C++/OpenMP kernels on CPU, Triton on CUDA); 'tc x eager' = "
          "eager time / tc time. Inductor's first call includes its compile; its on-disk "
          "caches may make it faster than a truly cold compile.")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"results-{args.device}"
    (out / f"{stem}.json").write_text(json.dumps(
        {"machine": platform.platform(), "cores": os.cpu_count(), "torch": torch.__version__,
         "device": args.device, "size": n, "results": [asdict(r) for r in results]},
        indent=2))
    with open(out / f"{stem}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(results[0])))
        writer.writeheader()
        for r in results:
            writer.writerow(asdict(r))
    plot(results, out / f"{stem}.png")
    print(f"wrote {out / stem}.json, .csv and .png")
    return results


if __name__ == "__main__":
    main()
