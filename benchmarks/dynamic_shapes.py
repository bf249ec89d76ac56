"""Symbolic sizes: are kernels compiled once for every batch size as fast as kernels compiled
for one size?

    python benchmarks/dynamic_shapes.py                 # MLP, CNN, GPT; infer + train
    python benchmarks/dynamic_shapes.py --models mlp --batches 2,16 --modes infer
    python benchmarks/dynamic_shapes.py --models gpt --lengths 8,24,64   # lengths vary too
    python benchmarks/dynamic_shapes.py --models mamba --lengths 16,64   # transformers' Mamba

For every case (model × inference/training × batch), measured side by side in one run:
``static`` -- ``tc.compile(model, dynamic=False)``, compiled for that very batch size (sizes
are constants in the C++ kernels); ``symbolic`` -- ``tc.compile(model)`` after two calls of
other sizes have made the batch dimension dynamic (one compilation serves every size: the
kernels take ``s0`` as an argument, the wrapper computes buffer sizes). ``sym/static`` is the
ratio of medians (> 1: the symbolic kernels are slower); the issue's bar is 1.10. The
``compiles`` column counts AOT compilations of the symbolic model's graphs over the whole
run (2: the first static call and the symbolic one).

Timing: ``torch.set_num_threads(--threads)`` (1 by default, see FACTS.md), medians of many
calls (:func:`tutorcompile.bench.measure`), the two variants alternated per case, the best
of ``--rounds`` medians each. Read ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import tutorcompile as tc  # noqa: E402
from tutorcompile import models  # noqa: E402
from tutorcompile.bench import format_ms, measure  # noqa: E402
from tutorcompile.dynamo import backends  # noqa: E402
from tutorcompile.dynamo import config as dynamo_config  # noqa: E402


class HFModel(torch.nn.Module):
    """A tiny random-config ``transformers`` model as this benchmark calls one: token ids
    in, the last hidden state out, the mean square of it as the loss."""

    def __init__(self, name: str):
        super().__init__()
        self.inner = models.hf_model(name)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.inner(ids).last_hidden_state

    @staticmethod
    def loss(out: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return out.pow(2).mean()


MODELS = {
    "mlp": lambda: models.MLP((784, 256, 256, 10)),
    "cnn": lambda: models.AlexNet(),
    "gpt": lambda: models.GPT(models.GPTConfig(block_size=64)),
    # its selective scan: one sequential_scan node over a symbolic length, unrolled (and
    # fused) in the static compilation
    "mamba": lambda: HFModel("mamba"),
}
SEQUENCE_MODELS = ("gpt", "mamba")


def _batch(model, b: int, t: int | None) -> tuple:
    """Inputs and targets of batch ``b`` (and, for a sequence model, length ``t``)."""
    if isinstance(model, HFModel):
        ids = models.hf_input_ids(b, t or 32)
        return ids, ids
    if t is None:
        return model.example_inputs(b)[0], model.targets(b)
    return (torch.randint(0, model.cfg.vocab_size, (b, t)),
            torch.randint(0, model.cfg.vocab_size, (b, t)))


def _counting():
    made = []

    def inductor(gm, example_inputs):
        made.append(backends.inductor(gm, example_inputs, options={"codegen": "cpp"}))
        return made[-1]
    return inductor, made


_recording: list | None = None


def _record_graph_calls() -> None:
    """Make every compiled graph (a ``_Variant``'s wrapper) note its inputs while
    ``_recording`` is a list, so that the graphs a call ran can be timed alone. (Both
    variants pay the same few hundred nanoseconds per graph call for it.)"""
    import importlib
    compile_fx = importlib.import_module("tutorcompile.inductor.compile_fx")
    init = compile_fx._Variant.__init__

    def recording_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        run = self.run

        def run_and_record(*inputs):
            if _recording is not None:
                _recording.append((run, inputs))
            return run(*inputs)
        self.run = run_and_record
    compile_fx._Variant.__init__ = recording_init


def _graph_calls(run, x, y) -> list:
    """The compiled graphs the call ``run(x, y)`` ran, each with the inputs it got."""
    global _recording
    _recording = []
    try:
        run(x, y)
        return _recording
    finally:
        _recording = None


def _graph_time(calls: list, name: str):
    """Median milliseconds of running every recorded graph once."""
    def run_graphs():
        for fn, inputs in calls:
            fn(*inputs)
    return measure(run_graphs, name=name)


def _runner(model, train: bool):
    if not train:
        def infer(x, y):
            with torch.no_grad():
                return model(x)
        return infer
    params = list(model.parameters())

    def step(x, y):
        for p in params:
            p.grad = None
        model.loss(model(x), y).backward()
    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--batches", default="2,8,32")
    parser.add_argument("--modes", default="infer,train")
    parser.add_argument("--lengths", default=None,
                        help="sequence lengths of the GPT and Mamba (default: fixed, the "
                             "GPT's block size and 32)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3, help="best of this many medians")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    _record_graph_calls()
    # the static baseline compiles once per size, on purpose: more than Dynamo's limit of 8
    dynamo_config.recompile_limit = 64
    batches = [int(b) for b in args.batches.split(",")]
    print(f"{'':19} {'compiled graphs (kernels + wrapper)':^36}  {'whole call':^36}")
    print(f"{'model':5} {'mode':5} {'size':>7} {'static':>10} {'symbolic':>10} "
          f"{'sym/static':>10}   {'static':>10} {'symbolic':>10} {'sym/static':>10} "
          f"{'compiles':>8}")
    for name in args.models.split(","):
        for mode in args.modes.split(","):
            torch.manual_seed(0)
            model = MODELS[name]()
            static_model = copy.deepcopy(model)
            train = mode == "train"
            model.train(train)
            static_model.train(train)
            counting, made = _counting()
            symbolic = tc.compile(model, backend=counting)
            static = tc.compile(static_model, dynamic=False, backend="inductor",
                                options={"codegen": "cpp"})
            run_symbolic, run_static = _runner(symbolic, train), _runner(static, train)
            lengths = [int(t) for t in args.lengths.split(",")] \
                if args.lengths and name in SEQUENCE_MODELS else [None]
            for b, t in ((3, 9), (5, 17)):   # a size change: the dimensions become dynamic
                run_symbolic(*_batch(model, b, None if lengths == [None] else t))
            for b, t in [(b, t) for b in batches for t in lengths]:
                x, y = _batch(model, b, t)
                size = f"{b}" if t is None else f"{b}x{t}"
                run_static(x, y)   # (compiles for this size)
                static_graphs = _graph_calls(run_static, x, y)
                symbolic_graphs = _graph_calls(run_symbolic, x, y)
                # alternated, best of --rounds medians: other processes on a shared
                # machine slow one variant's run now and the other's later
                gst, gsy, st, sy = (min(ms, key=lambda m: m.median_ms) for ms in zip(*[
                    (_graph_time(static_graphs, "static"),
                     _graph_time(symbolic_graphs, "symbolic"),
                     measure(run_static, x, y, name="static"),
                     measure(run_symbolic, x, y, name="symbolic"))
                    for _ in range(args.rounds)]))
                compiles = sum(m.compiled.num_compiles for m in made)
                print(f"{name:5} {mode:5} {size:>7} {format_ms(gst.median_ms):>10} "
                      f"{format_ms(gsy.median_ms):>10} {gsy.median_ms / gst.median_ms:10.2f}   "
                      f"{format_ms(st.median_ms):>10} {format_ms(sy.median_ms):>10} "
                      f"{sy.median_ms / st.median_ms:10.2f} {compiles:8d}", flush=True)


if __name__ == "__main__":
    main()
