"""The end-to-end model suite: eager vs tutorcompile vs torch.compile on the capstone models.

    python benchmarks/models.py             # GPT, CNN, MLP; infer + train; batch 1, 8, 32
    python benchmarks/models.py --quick     # batch 8 only, fewer samples (CI)
    python benchmarks/models.py --quick --no-torch-compile --models mlp,cnn
    python benchmarks/models.py --overhead  # per-call overhead on a tiny MLP, every backend,
                                            # and what one guard check costs
    python benchmarks/models.py --launch    # what launching one C++ kernel costs
    python benchmarks/models.py --calls     # Python and C function calls per call (counts,
                                            # not timings: what a busy machine cannot blur)

For every case (model × inference/training × batch), measured side by side in one run:
eager ms, tutorcompile ms (``tc.compile``, backend ``inductor``), torch.compile ms (Inductor),
both ratios over eager (> 1 is faster), compile seconds (first call: capture + AOT + kernel
builds; the kernel disk cache may make it warm), and the per-call breakdown of tutorcompile's
forward call (guard checks / compiled graph: AOT runtime, wrapper and kernels / Python around
it) from :func:`tutorcompile.bench.breakdown`.

A training case times one step: forward, the model's loss, backward (gradients are set to
None between steps, as ``optimizer.zero_grad()`` does). The models are
:mod:`tutorcompile.models` (notebook 07's capstone): a small GPT, an AlexNet-style CNN on
32×32 images, an MLP 784→256→256→10.

Timing: ``torch.set_num_threads(--threads)`` (1 by default: on a small shared machine, more
threads measure the other processes, see FACTS.md), medians of many calls, the candidates'
samples interleaved so a slow spell of the machine lands on all of them
(:func:`tutorcompile.bench.measure_together`). Read ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import tutorcompile as tc  # noqa: E402
from tutorcompile import models  # noqa: E402
from tutorcompile.bench import breakdown, count_calls, format_ms, measure, measure_together  # noqa: E402
from tutorcompile.dynamo.eval_frame import cache_entries  # noqa: E402

MODELS = {
    "gpt": lambda: models.GPT(),
    "cnn": lambda: models.AlexNet(),
    "mlp": lambda: models.MLP((784, 256, 256, 10)),
}


def _step(model, loss_fn):
    """One training step of ``model`` (compiled or not): forward, loss, backward."""
    params = [p for p in model.parameters()]

    def step(x, y):
        for p in params:
            p.grad = None
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss
    return step


def _first_call_s(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    if any(isinstance(a, torch.Tensor) and a.is_cuda for a in args):
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def run_case(name: str, train: bool, batch: int, device: str, torch_compile: bool,
             timing: dict) -> dict:
    torch.manual_seed(0)
    model = MODELS[name]().to(device)
    model.train(train)
    if not train:
        model.eval()
    x = model.example_inputs(batch)[0].to(device)
    y = model.targets(batch).to(device)
    tc.reset()
    ours = tc.compile(model)
    candidates = {"eager": model, "tutorcompile": ours}
    if torch_compile:
        torch._dynamo.reset()
        candidates["torch.compile"] = torch.compile(model)
    row = {"case": f"{name} {'train' if train else 'infer'} b{batch}", "device": device}
    with torch.set_grad_enabled(train):
        fns = {k: (_step(m, model.loss) if train else m) for k, m in candidates.items()}
        args = (x, y) if train else (x,)
        for label in ("tutorcompile", "torch.compile"):
            if label in fns:
                row[f"{label} compile_s"] = _first_call_s(fns[label], *args)
        # the same result (dropout is off in the capstone configs but AlexNet's is on in
        # train mode, so compare only in eval mode)
        if not train:
            torch.testing.assert_close(fns["tutorcompile"](x), model(x), rtol=1e-3, atol=1e-3)
        for label, m in measure_together(fns, *args, **timing).items():
            row[f"{label} ms"] = m.median_ms
        b = breakdown(ours, x, name=row["case"], **timing)
        row["guards_us"], row["graph_us"], row["python_us"] = \
            b.guard_us, b.graph_us, b.overhead_us
    return row


def tiny_mlp_overhead(timing: dict, torch_compile: bool) -> list[dict]:
    """Per-call time of a cache hit on a 2-layer MLP at batch 4 (inference), every backend:
    almost all of it is overhead around ~2 µs of arithmetic. Split into the guard check, the
    compiled graph (what the cache entry calls: AOT runtime, wrapper, kernels) and the rest
    (the module call, binding arguments, fetching graph inputs)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 4)).eval()
    x = torch.randn(4, 10)
    rows = []
    with torch.no_grad():
        for backend in ("eager", "aot_eager", "inductor"):
            tc.reset()
            ours = tc.compile(model, backend=backend)
            ours(x)
            fns = {"eager": model, "tutorcompile": ours}
            if torch_compile:
                torch._dynamo.reset()
                fns["torch.compile"] = torch.compile(model, backend=backend)
                fns["torch.compile"](x)
            row = {"backend": backend}
            for label, m in measure_together(fns, x, **timing).items():
                row[f"{label}_us"] = m.median_ms * 1000
            (entry,) = cache_entries(model)
            env = ({"self": model, "input": x}, type(model).forward.__globals__, {}, [])
            assert entry.check(*env)
            row["guards"] = len(entry.check)
            row["guard_us"] = measure(entry.check, *env, name="guards", **timing
                                      ).median_ms * 1000
            row["graph_us"] = measure(entry.call, *entry.fetch_inputs(*env), name="graph",
                                      **timing).median_ms * 1000
            rows.append(row)
    return rows


def call_counts(name: str, train: bool, batch: int, torch_compile: bool) -> dict:
    """Python and C function calls per call (a training step: forward, loss, backward) of
    eager, tutorcompile and torch.compile, counted by :func:`tutorcompile.bench.count_calls`
    after warm-up, and tutorcompile's most frequent calls."""
    torch.manual_seed(0)
    model = MODELS[name]()
    model.train(train)
    x, y = model.example_inputs(batch)[0], model.targets(batch)
    tc.reset()
    candidates = {"eager": model, "tutorcompile": tc.compile(model)}
    if torch_compile:
        torch._dynamo.reset()
        candidates["torch.compile"] = torch.compile(model)
    row = {"case": f"{name} {'train' if train else 'infer'} b{batch}"}
    with torch.set_grad_enabled(train):
        for label, m in candidates.items():
            fn = _step(m, model.loss) if train else m
            args = (x, y) if train else (x,)
            for _ in range(3):
                fn(*args)
            row[label] = count_calls(fn, *args)
    return row


def launch_cost(timing: dict) -> list[tuple[str, float]]:
    """Cost of launching one tiny C++ kernel (a 4-element add) the ways it can be called,
    beside one eager PyTorch op of the same size: what each kernel call adds to a call."""
    from tutorcompile.inductor import compile_fx
    from tutorcompile.ops import ops, trace
    x, b = torch.randn(4), torch.randn(4)
    compiled = compile_fx(trace(lambda x, b: ops.add(x, b), x, b), [x, b], codegen="cpp")
    variant = compiled._current
    (name,) = variant.kernel_sources
    kernel = variant.run.__globals__[name]          # the ctypes function the wrapper calls
    out = torch.empty(4)
    px, pb, po = x.data_ptr(), b.data_ptr(), out.data_ptr()
    rows = [
        ("eager torch.add (4 elements)", lambda: torch.add(x, b)),
        ("kernel: ctypes function, data_ptr ints", lambda: kernel(px, pb, po)),
        ("kernel: + data_ptr() per tensor (wrapper)",
         lambda: kernel(x.data_ptr(), b.data_ptr(), out.data_ptr())),
        ("whole wrapper: allocate + launch", lambda: variant.run(x, b)),
        ("CompiledGraph call (variant lookup + wrapper)", lambda: compiled(x, b)),
    ]
    return [(label, measure(fn, name=label, **timing).median_ms * 1000) for label, fn in rows]


def _table(header: list[str], lines: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header] + lines) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.rjust(w) if i else c.ljust(w)  # noqa: E731
                              for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in lines])


def print_rows(rows: list[dict]) -> None:
    header = ["case", "eager", "tutorcompile", "torch.compile", "tc ×", "torch ×",
              "tc compile", "torch compile", "guards", "graph", "python"]
    lines = []
    for r in rows:
        e, ours, theirs = r["eager ms"], r["tutorcompile ms"], r.get("torch.compile ms")
        lines.append([
            r["case"], format_ms(e), format_ms(ours),
            format_ms(theirs) if theirs else "—", f"{e / ours:.2f}",
            f"{e / theirs:.2f}" if theirs else "—",
            f"{r['tutorcompile compile_s']:.1f} s",
            f"{r['torch.compile compile_s']:.1f} s" if theirs else "—",
            format_ms(r["guards_us"] / 1000), format_ms(r["graph_us"] / 1000),
            format_ms(r["python_us"] / 1000)])
    print(_table(header, lines))
    ours = [r["eager ms"] / r["tutorcompile ms"] for r in rows]
    line = f"geomean speed-up over eager: tutorcompile {_geomean(ours):.2f}×"
    theirs = [r["eager ms"] / r["torch.compile ms"] for r in rows if "torch.compile ms" in r]
    if theirs:
        line += f", torch.compile {_geomean(theirs):.2f}×"
    print(line)
    print("(× = eager time / compiled time; guards / graph / python: one tutorcompile forward "
          "call split by tutorcompile.bench.breakdown)")


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="batch 8 only, fewer samples")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated")
    parser.add_argument("--batches", default=None, help="comma-separated (default 1,8,32)")
    parser.add_argument("--modes", default="infer,train", help="infer, train or both")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "both"])
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--no-torch-compile", action="store_true",
                        help="skip torch.compile (its cold compiles take tens of seconds)")
    parser.add_argument("--overhead", action="store_true",
                        help="only the tiny-MLP per-call overhead table")
    parser.add_argument("--launch", action="store_true",
                        help="only the cost of launching one C++ kernel")
    parser.add_argument("--calls", action="store_true",
                        help="only Python and C function calls per call (batch 8)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    timing = {"min_time": 0.2, "repeat": 5} if args.quick else {"min_time": 1.0, "repeat": 15}
    torch_compile = not args.no_torch_compile
    if args.launch:
        rows = launch_cost(timing)
        print(f"Launch cost of one C++ kernel on CPU ({args.threads} thread(s), medians)")
        print(_table(["how", "µs per call"], [[label, f"{us:.2f}"] for label, us in rows]))
        return rows
    if args.calls:
        rows = [call_counts(name, mode == "train", 8, torch_compile)
                for name in args.models.split(",") for mode in args.modes.split(",")]
        labels = [k for k in ("eager", "tutorcompile", "torch.compile") if k in rows[0]]
        print("Function calls per call (Python functions / C functions), batch 8, CPU")
        print(_table(["case"] + labels,
                     [[r["case"]] + [f"{r[k].python:.0f} / {r[k].c:.0f}" for k in labels]
                      for r in rows]))
        for r in rows:
            print(f"tutorcompile, {r['case']}, most called: " + ", ".join(
                f"{name} {n:.0f}" for name, n in r["tutorcompile"].top[:6]))
        return rows
    if args.overhead:
        rows = tiny_mlp_overhead(timing, torch_compile)
        header = ["backend", "eager µs", "tutorcompile µs", "torch.compile µs", "tc / torch",
                  "guards", "µs / guard", "graph µs", "rest µs"]
        print("Per-call time of a cache hit, 2-layer MLP (10→16→4), batch 4, inference, "
              f"{args.threads} thread(s), medians")
        print(_table(header, [[r["backend"], f"{r['eager_us']:.1f}",
                               f"{r['tutorcompile_us']:.1f}",
                               f"{r['torch.compile_us']:.1f}" if "torch.compile_us" in r
                               else "—",
                               f"{r['tutorcompile_us'] / r['torch.compile_us']:.2f}"
                               if "torch.compile_us" in r else "—",
                               f"{r['guard_us']:.1f} µs ({r['guards']})",
                               f"{r['guard_us'] / r['guards']:.2f}", f"{r['graph_us']:.1f}",
                               f"{r['tutorcompile_us'] - r['guard_us'] - r['graph_us']:.1f}"]
                              for r in rows]))
        print("(graph: what the cache entry calls -- AOT runtime, wrapper, kernels; rest: the "
              "module call, binding arguments, fetching graph inputs)")
        return rows
    batches = [int(b) for b in (args.batches or ("8" if args.quick else "1,8,32")).split(",")]
    devices = ["cpu", "cuda"] if args.device == "both" else [args.device]
    devices = [d for d in devices if d == "cpu" or torch.cuda.is_available()]
    rows = []
    for device in devices:
        for name in args.models.split(","):
            for mode in args.modes.split(","):
                for batch in batches:
                    row = run_case(name, mode == "train", batch, device, torch_compile, timing)
                    print(f"  measured {row['case']} on {device}", file=sys.stderr)
                    rows.append(row)
        print(f"\n{device.upper()} ({args.threads} thread(s)):")
        print_rows([r for r in rows if r["device"] == device])
    return rows


if __name__ == "__main__":
    main()
