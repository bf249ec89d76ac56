"""Benchmarks: eager PyTorch vs torch.compile (Inductor) vs tutorcompile, measured in one run.

    python benchmarks/run.py            # the full suite (Inductor's cold compiles take minutes)
    python benchmarks/run.py --quick    # smaller sizes, Inductor only on two cases
    python benchmarks/run.py --no-inductor --cases chain,softmax

For every case it prints and saves (``benchmarks/results/``: JSON, CSV and a PNG plot):

* run time of eager, of ``torch.compile`` (Inductor), of tutorcompile fused and of tutorcompile
  with fusion turned off (one kernel per op): the median of repeated samples with its spread
  (interquartile range over median), and the ratios against eager with their ranges;
* compile times: tutorcompile *cold* (an empty kernel cache: the C++ compiler runs) and *warm*
  (the kernels come from the disk cache), Inductor's first call (its own caches may make it
  warmer than truly cold; it says so in the output);
* kernel counts before and after fusion, and the bytes the fusion report says are moved;
* flags: ``noisy`` where a time's spread is above ``bench.NOISY_SPREAD`` (10 %), and
  ``differs from previous run`` where a ratio's range does not overlap the range the previous
  run (the results file it is about to overwrite) measured for the same case and size.

Inference cases compile a prim graph (``tutorcompile.ops.trace`` of the functions in
``tutorcompile.inductor.examples``) with ``compile_fx``. Training cases (an MLP and the seed
model Linear(10,5)-ReLU-Linear(5,2)-Softmax) run a forward+backward step through
``tutorcompile.aot.aot_module`` with stage 5 as its forward and backward compiler.

Numbers depend on the machine and on what else runs on it. For stable ones: a quiet machine
(another busy process adds milliseconds to a sample), a fixed thread count (``--threads N``,
N = physical cores; 1 shows per-call overhead), and two runs whose rows agree. Read ratios,
not absolutes.
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
from tutorcompile.bench import (  # noqa: E402
    NOISY_SPREAD,
    Measurement,
    measure,
    ranges_disagree,
    ratio_range,
)
from tutorcompile.inductor import codecache, examples  # noqa: E402
from tutorcompile.inductor.compile_fx import compile_fx, inner_compiler  # noqa: E402
from tutorcompile.ops import trace  # noqa: E402

TIMED = {"eager": "eager", "tc": "tc", "tc_unfused": "tc unfused", "inductor": "inductor"}


@dataclass
class Result:
    """One case. ``*_ms`` are medians; ``timings`` holds each one's quartiles, extremes and
    sample count, ``ratios`` each speed-up over eager as (low, median, high)."""
    key: str
    case: str
    shape: str
    eager_ms: float | None = None
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
    timings: dict[str, dict[str, float]] = field(default_factory=dict)
    ratios: dict[str, list[float]] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)

    def __post_init__(self):
        self._eager: Measurement | None = None   # the baseline of every ratio; not saved

    def record(self, name: str, m: Measurement) -> None:
        """Keep a measurement of ``name`` (a key of TIMED) and its speed-up over eager."""
        setattr(self, f"{name}_ms", m.median_ms)
        self.timings[name] = {"median_ms": m.median_ms, "p25_ms": m.p25_ms, "p75_ms": m.p75_ms,
                              "min_ms": m.min_ms, "max_ms": m.max_ms,
                              "samples": len(m.times_ms), "spread": m.spread}
        if m.noisy:
            self.flags.append(f"noisy: {TIMED[name]} spread {m.spread:.0%}")
        if name == "eager":
            self._eager = m
        else:
            self.ratios[name] = list(ratio_range(self._eager, m))

    def ratio(self, name: str) -> float | None:
        return self.ratios[name][1] if name in self.ratios else None


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

def timed(fn, *args, opts) -> Measurement:
    """Repeated samples of ``fn(*args)`` after warm-up (see ``tutorcompile.bench.measure``)."""
    return measure(fn, *args, repeat=opts.repeat, min_time=opts.min_time)


def time_inductor(fn, args, result: Result, opts):
    torch._dynamo.reset()
    compiled = torch.compile(fn)
    t0 = time.perf_counter()
    compiled(*args)
    result.inductor_first_call_s = time.perf_counter() - t0
    result.record("inductor", timed(compiled, *args, opts=opts))


def run_inference(key, label, shape, args, opts) -> Result:
    fn_torch = examples.TORCH[key]
    result = Result(key, label, shape)
    result.record("eager", timed(fn_torch, *args, opts=opts))
    graph = trace(getattr(examples, key), *args)
    backend = "triton" if args[0].is_cuda else "cpp"
    codecache._loaded.clear()
    t0 = time.perf_counter()
    compiled = compile_fx(graph, args, codegen=backend)
    result.tc_cold_compile_s = time.perf_counter() - t0
    codecache._loaded.clear()   # as a new process would: only the disk cache is warm
    t0 = time.perf_counter()
    compiled = compile_fx(graph, args, codegen=backend)
    result.tc_warm_compile_s = time.perf_counter() - t0
    torch.testing.assert_close(compiled(*args), fn_torch(*args), rtol=1e-3, atol=1e-3)
    result.record("tc", timed(compiled, *args, opts=opts))
    report = compiled.fusion_report
    result.kernels_before, result.kernels_after = report.kernels_before, report.kernels_after
    result.mb_before, result.mb_after = report.bytes_before / 1e6, report.bytes_after / 1e6
    unfused = compile_fx(graph, args, codegen=backend, fusion=False)
    result.record("tc_unfused", timed(unfused, *args, opts=opts))
    if opts.inductor_for(key):
        time_inductor(fn_torch, args, result, opts)
    return result


def run_training(key, label, shape, model, x, opts) -> Result:
    from tutorcompile.aot import aot_module
    result = Result(key, label, shape)
    result.record("eager", timed(step, model, x, opts=opts))
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
    result.record("tc", timed(step, compiled, x, opts=opts))
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
    result.record("tc_unfused", timed(step, unfused, x, opts=opts))
    if opts.inductor_for(key):
        torch._dynamo.reset()
        compiled_model = torch.compile(model)
        t0 = time.perf_counter()
        step(compiled_model, x)
        result.inductor_first_call_s = time.perf_counter() - t0
        result.record("inductor", timed(step, compiled_model, x, opts=opts))
    return result


# ---------------------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------------------

def fmt(v, spec="{:.2f}"):
    return "-" if v is None else spec.format(v)


def fmt_time(result: Result, name: str) -> str:
    """Median ms and, in brackets, the spread (IQR / median); '!' when too noisy."""
    t = result.timings.get(name)
    if t is None:
        return "-"
    return f"{t['median_ms']:.2f} ({t['spread']:.0%}){' !' if t['spread'] > NOISY_SPREAD else ''}"


def fmt_ratio(result: Result, name: str) -> str:
    if name not in result.ratios:
        return "-"
    low, mid, high = result.ratios[name]
    return f"{mid:.2f}x ({low:.2f}-{high:.2f})"


def table(results: list[Result]) -> str:
    """Two tables: run times, then speed-ups with compile times and kernel counts."""
    times = [["case", "shape", "eager ms", "tc ms", "tc unfused ms", "inductor ms"]]
    times += [[r.case, r.shape, *(fmt_time(r, n) for n in TIMED)] for r in results]
    ratios = [["case", "tc x eager", "unfused x eager", "inductor x eager", "tc cold s",
               "tc warm s", "inductor 1st s", "kernels", "MB moved"]]
    ratios += [[r.case, *(fmt_ratio(r, n) for n in ("tc", "tc_unfused", "inductor")),
                fmt(r.tc_cold_compile_s), fmt(r.tc_warm_compile_s),
                fmt(r.inductor_first_call_s, "{:.1f}"), f"{r.kernels_before}->{r.kernels_after}",
                "-" if r.mb_before is None else f"{r.mb_before:.0f}->{r.mb_after:.0f}"]
               for r in results]
    return f"{_grid(times)}\n\n{_grid(ratios)}"


def _grid(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def flag_changes(results: list[Result], previous: dict | None, size: int) -> None:
    """Flag each ratio whose range does not overlap the previous run's for the same case.

    ``previous`` is the results file this run replaces; it counts only for the same size. A
    file written before ranges were kept gives single values, compared the same way.
    """
    if not previous or previous.get("size") != size:
        return
    before = {r.get("key", r.get("case")): r for r in previous.get("results", [])}
    for r in results:
        old = before.get(r.key) or before.get(r.case)
        if old is None:
            continue
        for name, now in r.ratios.items():
            then = (old.get("ratios") or {}).get(name)
            if then is None and old.get(f"{name}_ms") and old.get("eager_ms"):
                then = [old["eager_ms"] / old[f"{name}_ms"]] * 3
            if then is not None and ranges_disagree(now, then):
                r.flags.append(f"{TIMED[name]} x eager differs from the previous run: "
                               f"{now[1]:.2f}x now ({now[0]:.2f}-{now[2]:.2f}), "
                               f"{then[1]:.2f}x then ({then[0]:.2f}-{then[2]:.2f})")


def csv_row(r: Result) -> dict:
    """The scalar fields, then each time's quartiles and each ratio's range, flattened."""
    row = {k: v for k, v in asdict(r).items() if k not in ("timings", "ratios", "flags")}
    for name in TIMED:
        t = r.timings.get(name, {})
        row[f"{name}_p25_ms"], row[f"{name}_p75_ms"] = t.get("p25_ms"), t.get("p75_ms")
    for name in ("tc", "tc_unfused", "inductor"):
        low, _, high = r.ratios.get(name, (None, None, None))
        row[f"{name}_x_eager_low"], row[f"{name}_x_eager_high"] = low, high
    row["flags"] = "; ".join(r.flags)
    return row


def flags_text(results: list[Result]) -> str:
    lines = [f"  {r.case}: {flag}" for r in results for flag in r.flags]
    if not lines:
        return "no flags: every spread is within 10 % and every ratio agrees with the last run"
    return "flags (do not trust these rows without a rerun on a quiet machine):\n" + \
        "\n".join(lines)


def machine_line(args, repeat: int) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    busy = load is not None and load > 0.5 * (os.cpu_count() or 1)
    text = (f"{platform.platform()}, {os.cpu_count()} cores, {torch.get_num_threads()} threads, "
            f"torch {torch.__version__}, device {args.device}")
    if load is not None:
        text += f", load average {load:.1f}" + (" (busy: expect noise)" if busy else "")
    return "\n".join([
        text,
        f"times: median ms of >= {repeat} samples; (n%) = spread, the interquartile range / "
        f"median; '!' = spread above {NOISY_SPREAD:.0%}",
        "ratios: eager time / other time, (low-high) pairs the quartiles crosswise",
        "for stable numbers: a quiet machine (close what else runs), --threads N (N = physical "
        "cores;\n  1 for per-call overhead), and two runs that agree (each run flags the ratios "
        "that moved since the previous one)"])


def plot(results: list[Result], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [r.case for r in results]
    series = {"tutorcompile": [r.ratio("tc") or 0 for r in results],
              "tutorcompile, no fusion": [r.ratio("tc_unfused") or 0 for r in results],
              "torch.compile (Inductor)": [r.ratio("inductor") or 0 for r in results]}
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
        self.repeat = 7 if args.quick else 10
        self.min_time = 0.2 if args.quick else 0.5
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
    out = Path(args.out)
    stem = f"results-{args.device}"
    previous = None
    if (out / f"{stem}.json").exists():
        try:
            previous = json.loads((out / f"{stem}.json").read_text())
        except ValueError:
            print(f"ignoring {out / stem}.json: not JSON")
    flag_changes(results, previous, n)
    print()
    print(machine_line(args, opts.repeat))
    print(table(results))
    print("tc = tutorcompile (C++/OpenMP kernels on CPU, Triton on CUDA). Inductor's first call "
          "includes\nits compile; its on-disk caches may make it faster than a truly cold one.")
    print(flags_text(results))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(
        {"machine": platform.platform(), "cores": os.cpu_count(), "torch": torch.__version__,
         "threads": torch.get_num_threads(), "device": args.device, "size": n,
         "results": [asdict(r) for r in results]}, indent=2))
    rows = [csv_row(r) for r in results]
    with open(out / f"{stem}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plot(results, out / f"{stem}.png")
    print(f"wrote {out / stem}.json, .csv and .png")
    return results


if __name__ == "__main__":
    main()
