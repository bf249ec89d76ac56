"""The optimizer step of the course GPT: eager, ``tc.compile(opt.step)``, torch.compile.

    python benchmarks/optimizer_step.py                  # SGD, Adam, AdamW (both loops)
    python benchmarks/optimizer_step.py --quick          # the small GPT, fewer samples
    python benchmarks/optimizer_step.py --layers 4 --embd 256 --optimizers adam --threads 1

For each optimizer, on its own copy of the GPT (:class:`tutorcompile.models.GPT`) with the
gradients of one training batch in place, it prints:

* capture: graphs and graph breaks of one step (with its state made), from ``tc.explain`` and
  ``torch._dynamo.explain`` -- one graph in both (``_use_grad``'s own
  ``torch._dynamo.graph_break()`` calls cut nothing: torch.compile counts a break only between
  graphs, and ours leaves torch's own calls of it out);
* the first compiled call (compile + run) of each compiler;
* the run time of one step -- the median over interleaved rounds
  (:func:`tutorcompile.bench.measure_together`, so a slow spell of the shared machine lands
  on every contender alike) -- and its ratios against eager and against torch.compile;
* whether, after three steps from the same start (before the timing), each compiled copy's
  parameters equal eager's: what is timed is the same computation.

Both compilers use their default backend (Inductor, and tutorcompile's C++/Triton code
generator). Read ratios, not absolutes; on 2 shared cores use ``--threads 1`` for steady
numbers.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402

import tutorcompile as tc  # noqa: E402
from tutorcompile.bench import measure_together  # noqa: E402
from tutorcompile.models import GPT, GPTConfig  # noqa: E402

OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-3),
    "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=True),
    "adamw_per_param": lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=False),
}


def _setup(kind: str, cfg: GPTConfig):
    """A GPT with the gradients of one batch, and an optimizer whose state is made."""
    torch.manual_seed(0)
    model = GPT(cfg)
    idx = model.example_inputs()[0]
    GPT.loss(model(idx), model.targets()).backward()
    opt = OPTIMIZERS[kind](model.parameters())
    opt.step()
    return model, opt


def _counts(explained) -> str:
    return f"{explained.graph_count}g/{explained.graph_break_count}b"


def run(kind: str, cfg: GPTConfig, quick: bool) -> dict:
    runs = {name: _setup(kind, cfg) for name in ("eager", "tutorcompile", "torch.compile")}
    steps = {"eager": runs["eager"][1].step,
             "tutorcompile": tc.compile(runs["tutorcompile"][1].step),
             "torch.compile": torch.compile(runs["torch.compile"][1].step)}
    first = {}
    for name in ("tutorcompile", "torch.compile"):
        start = time.perf_counter()
        steps[name]()
        first[name] = time.perf_counter() - start
    runs["eager"][1].step()   # every copy has taken the same number of steps
    for _ in range(2):
        for step in steps.values():
            step()
    want = [p.detach() for p in runs["eager"][0].parameters()]
    same = {name: all(torch.allclose(p, w, rtol=1e-4, atol=1e-5) for p, w in zip(
        runs[name][0].parameters(), want)) for name in ("tutorcompile", "torch.compile")}
    times = measure_together(steps, repeat=5 if quick else 15, min_time=0.2 if quick else 1.0)
    model, opt = _setup(kind, cfg)
    ours = _counts(tc.explain(opt.step)())
    torch._dynamo.reset()
    theirs = _counts(torch._dynamo.explain(opt.step)())
    return {"optimizer": kind, "capture tc": ours, "capture torch": theirs,
            "first call tc (s)": first["tutorcompile"],
            "first call torch (s)": first["torch.compile"],
            "eager (ms)": times["eager"].median_ms,
            "tc (ms)": times["tutorcompile"].median_ms,
            "torch (ms)": times["torch.compile"].median_ms,
            "same as eager": f"tc {'yes' if same['tutorcompile'] else 'NO'}, torch "
                             f"{'yes' if same['torch.compile'] else 'NO'}"}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optimizers", default=",".join(OPTIMIZERS))
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--embd", type=int, default=128)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--quick", action="store_true", help="the default small GPT, "
                        "fewer samples (what CI runs)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = GPTConfig(n_layer=args.layers, n_embd=64 if args.quick else args.embd)
    n_params = sum(p.numel() for p in GPT(cfg).parameters())
    print(f"GPT: {cfg.n_layer} layers, width {cfg.n_embd}, {n_params:,} parameters; "
          f"{torch.get_num_threads()} threads")
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind in args.optimizers.split(","):
            row = run(kind, cfg, args.quick)
            rows.append(row)
            tc.reset()
            torch._dynamo.reset()
    header = ["optimizer", "capture tc/torch", "first call tc / torch", "eager", "tc",
              "torch.compile", "eager/tc", "torch/tc", "same as eager"]
    lines = [[r["optimizer"], f"{r['capture tc']} / {r['capture torch']}",
              f"{r['first call tc (s)']:.2f} s / {r['first call torch (s)']:.2f} s",
              f"{r['eager (ms)']:.3f} ms", f"{r['tc (ms)']:.3f} ms", f"{r['torch (ms)']:.3f} ms",
              f"{r['eager (ms)'] / r['tc (ms)']:.2f}x",
              f"{r['torch (ms)'] / r['tc (ms)']:.2f}x", r["same as eager"]] for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *lines)]
    for line in [header, *lines]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)))
    print("(eager/tc, torch/tc: the other's time over tutorcompile's; above 1 tutorcompile is "
          "faster)")
    return rows


if __name__ == "__main__":
    main()
