"""bench: compile time kept apart, results checked before timing, statistics right."""

import json
import time
from dataclasses import asdict

import pytest
import torch

from tutorcompile.bench import (
    Comparison,
    Measurement,
    Report,
    breakdown,
    compare,
    fit_overhead,
    measure,
    measure_together,
    ranges_disagree,
    ratio_range,
    sweep,
)

pytestmark = pytest.mark.foundation


def test_measure_together_interleaves_samples_in_rotating_order():
    """One sample of each callable per round, the first one rotating: a slow spell of the
    machine falls on all of them, not on whichever happened to be timed then."""
    log = []

    def slow(tag):   # ~2 ms: one call per sample
        def f():
            log.append(tag)
            time.sleep(0.002)
        return f

    result = measure_together({"a": slow("a"), "b": slow("b"), "c": slow("c")},
                              warmup=0, repeat=6, min_time=0.0)
    assert {name: len(m.times_ms) for name, m in result.items()} == {"a": 6, "b": 6, "c": 6}
    assert all(m.calls_per_sample == 1 for m in result.values())
    sampled = log[3:]   # after each one's batch-size probe
    rounds = [sampled[i:i + 3] for i in range(0, len(sampled), 3)]
    assert rounds == [list("abc"), list("bca"), list("cab")] * 2
    assert all(m.median_ms > 1.5 for m in result.values())


def test_statistics_of_a_measurement():
    m = Measurement("f", [1.0, 2.0, 3.0, 4.0, 100.0])
    assert m.median_ms == 3.0 and m.p25_ms == 2.0 and m.p75_ms == 4.0
    assert m.spread == pytest.approx(2 / 3)
    assert "3.00 ms median" in str(m)


def test_a_wide_spread_is_flagged_as_noisy():
    steady = Measurement("steady", [10.0, 10.1, 10.2, 10.3, 10.4])
    busy = Measurement("busy", [10.0, 12.0, 15.0, 20.0, 30.0])
    assert steady.min_ms == 10.0 and steady.max_ms == 10.4
    assert not steady.noisy and busy.noisy
    table = Comparison({"steady": steady, "busy": busy}, "steady").table().splitlines()
    assert not table[2].endswith("!") and "!" in table[3]
    assert table[-1].startswith("! spread above 10% of the median")
    quiet = Comparison({"steady": steady}, "steady").table()
    assert "!" not in quiet


def test_ratio_ranges_pair_quartiles_and_disagree_only_without_overlap():
    eager = Measurement("eager", [8.0, 9.0, 10.0, 11.0, 12.0])       # quartiles 9, 10, 11
    fast = Measurement("fast", [1.8, 1.9, 2.0, 2.1, 2.2])            # 1.9, 2.0, 2.1
    low, mid, high = ratio_range(eager, fast)
    assert (low, mid, high) == pytest.approx((9 / 2.1, 5.0, 11 / 1.9))
    assert not ranges_disagree((low, mid, high), (5.5, 6.0, 6.5))    # overlaps up to 5.79
    assert ranges_disagree((low, mid, high), (0.3, 0.37, 0.4))        # 0.37x after 5x
    assert ranges_disagree((0.3, 0.4), (low, high))


def test_measure_batches_short_calls_and_reports_per_call_time():
    x = torch.ones(8)
    m = measure(torch.neg, x, repeat=3, min_time=0.01)
    assert m.calls_per_sample > 1          # one neg() is far shorter than a millisecond
    assert 0 < m.median_ms < 1
    assert len(m.times_ms) >= 3


def test_measure_sees_a_slow_function_as_slow():
    m = measure(lambda: time.sleep(0.005), repeat=3, min_time=0.0, warmup=1)
    assert m.calls_per_sample == 1 and m.median_ms >= 5


def test_compare_keeps_compile_time_apart():
    calls = []

    def lazily_compiled(x):
        if not calls:
            time.sleep(0.05)  # the "compile", paid once
        calls.append(1)
        return x * 2

    cmp = compare({"eager": lambda x: x + x, "compiled": lazily_compiled}, torch.ones(4),
                  repeat=3, min_time=0.01)
    assert cmp.measurements["eager"].compile_s is None
    assert cmp.measurements["compiled"].compile_s >= 0.05
    assert cmp.measurements["compiled"].median_ms < 5   # run time does not include it
    assert cmp.ratio("eager") == 1.0
    assert cmp.table().splitlines()[0].split() == ["median", "IQR", "vs", "eager", "compile"]


def test_compare_refuses_wrong_answers():
    with pytest.raises(AssertionError, match="wrong does not compute what eager does"):
        compare({"eager": lambda x: x + 1, "wrong": lambda x: x + 2}, torch.ones(3),
                repeat=1, min_time=0)


def test_plot_draws_one_bar_per_candidate():
    import matplotlib
    matplotlib.use("Agg", force=False)
    cmp = Comparison({"a": Measurement("a", [2.0]), "b": Measurement("b", [1.0])}, "a")
    ax = cmp.plot()
    assert len(ax.patches) == 2
    assert [t.get_text().strip() for t in ax.texts] == ["1.00×", "2.00×"]


def test_fit_overhead_recovers_a_known_model():
    nbytes = [8, 8_000, 800_000, 8_000_000]
    times = [3.0 + b / 5_000 for b in nbytes]           # 3 µs + bytes at 5 GB/s
    overhead, gbps = fit_overhead(nbytes, times)
    assert overhead == pytest.approx(3.0) and gbps == pytest.approx(5.0)


def test_sweep_counts_bytes_and_times_each_size():
    s = sweep(torch.neg, lambda n: (torch.ones(n),), [16, 4096], name="neg", repeat=3,
              min_time=0.01)
    assert s.nbytes == [2 * 16 * 4, 2 * 4096 * 4]
    assert len(s.measurements) == 2 and all(t > 0 for t in s.medians_us)
    assert s.table().splitlines()[0].split() == ["size", "bytes", "median", "GB/s"]


def test_breakdown_splits_a_compiled_call():
    import tutorcompile as tc
    tc.reset()

    def with_break(x):
        y = torch.relu(x) * 2
        scale = y.sum().item()          # a Python float from a tensor: graph break
        return y.sin() * scale

    x = torch.randn(64)
    b = breakdown(tc.compile(with_break, backend="eager"), x, eager=with_break,
                  name="with_break", repeat=3, min_time=0.01)
    assert b.compile_s > 0 and b.total_us > 0 and b.eager_us > 0
    assert b.guard_us > 0 and b.graph_us > 0
    assert b.graphs_per_call == 2
    assert "graph breaks split it into 2 graphs" in b.verdict()
    assert b.table().splitlines()[0].startswith("compile (first call)")
    # the parts add up to the whole: the warm call's exactly, the cold call's phases never
    # count more than the compile time (no phase counted twice or outside it)
    assert b.guard_us + b.graph_us + b.overhead_us == pytest.approx(b.total_us)
    assert b.compile_phases and sum(b.compile_phases.values()) <= b.compile_s


def test_breakdown_of_a_cold_inductor_compile_names_its_phases(tmp_path, monkeypatch):
    import tutorcompile as tc
    monkeypatch.setenv("TUTORCOMPILE_CACHE_DIR", str(tmp_path))    # cold: kernels are built
    tc.reset()
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU())
    x = torch.randn(4, 16, requires_grad=True)
    b = breakdown(tc.compile(model), x, repeat=3, min_time=0.01)
    assert {"capture", "aot", "lowering", "codegen"} <= set(b.compile_phases)
    assert sum(b.compile_phases.values()) <= b.compile_s
    assert b.guard_us + b.graph_us + b.overhead_us == pytest.approx(b.total_us)
    assert "  other" in b.table()


def test_report_tabulates_cases_and_plots_both_panels():
    import matplotlib
    matplotlib.use("Agg", force=False)

    def cmp(eager, ours, compile_s):
        return Comparison({"eager": Measurement("eager", [eager]),
                           "ours": Measurement("ours", [ours], compile_s=compile_s)}, "eager")

    report = Report({"mlp": cmp(2.0, 1.0, 0.5), "gpt": cmp(3.0, 6.0, 2.0)})
    lines = report.table().splitlines()
    assert lines[0].split() == ["case", "eager", "(ms)", "ours", "(ms)", "ours", "×", "ours",
                                "compile"]
    assert lines[2].split() == ["mlp", "2.000", "1.000", "2.00", "0.5", "s"]
    assert lines[3].split() == ["gpt", "3.000", "6.000", "0.50", "2.0", "s"]
    fig = report.plot()
    assert len(fig.axes) == 2 and len(fig.axes[0].patches) == 2


def _benchmarks_run(script: str = "run"):
    """benchmarks/<script>.py, a script, imported as a module (its dataclasses need
    sys.modules)."""
    import importlib.util
    import sys
    from pathlib import Path
    folder = Path(__file__).resolve().parents[1] / "benchmarks"
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))     # (its imports of the scripts beside it)
    spec = importlib.util.spec_from_file_location(f"benchmarks_{script}",
                                                  folder / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_benchmark_table_shows_spreads_and_flags_noise_and_moved_ratios():
    run = _benchmarks_run()

    def result(eager, tc):
        r = run.Result("rmsnorm", "RMSNorm", "1024x1024")
        r.record("eager", Measurement("eager", eager))
        r.record("tc", Measurement("tc", tc))
        return r

    steady = result([10.0, 10.1, 10.2, 10.3, 10.4], [2.0, 2.01, 2.02, 2.03, 2.04])
    assert steady.flags == [] and steady.ratio("tc") == pytest.approx(10.2 / 2.02)
    text = run.table([steady])
    assert "10.20 (2%)" in text and "5.05x (4.98-5.12)" in text
    # the same case measured on a busy machine: noisy, and its ratio moved beyond both ranges
    busy = result([10.0, 10.2, 10.4, 10.6, 30.0], [20.0, 25.0, 28.0, 40.0, 90.0])
    previous = {"size": 1024, "results": [json.loads(json.dumps(asdict(steady)))]}
    run.flag_changes([busy], previous, 1024)
    assert busy.flags[0] == "noisy: tc spread 54%"
    assert busy.flags[1].startswith("tc x eager differs from the previous run: 0.37x now")
    assert "28.00 (54%) !" in run.table([busy])
    # another size, or a rerun that agrees within its spread, is not flagged
    again = result([10.0, 10.1, 10.2, 10.3, 10.4], [1.9, 1.95, 2.0, 2.05, 2.1])
    run.flag_changes([again], previous, 4096)
    run.flag_changes([again], previous, 1024)
    assert again.flags == []
    assert run.flags_text([again]).startswith("no flags")


def test_count_calls_counts_python_and_c_functions_per_call():
    from tutorcompile.bench import count_calls
    x = torch.randn(3)

    def helper(t):
        return torch.relu(t)

    def f(t):
        return helper(t).sin() + torch.cos(t)       # (the + is an operator: no call)
    counted = count_calls(f, x, calls=4)
    assert (counted.python, counted.c) == (2, 3)
    assert dict(counted.top)["_VariableFunctionsClass.relu [c]"] == 1


def test_steady_state_benchmark_checks_then_times_a_real_model(capsys):
    """benchmarks/steady_state.py's ``--quick`` case, in this process: a transformers model
    compiled, checked against eager (inference and a training step), and timed side by side
    -- a smoke test of the script, no timing asserted."""
    pytest.importorskip("transformers")
    steady = _benchmarks_run("steady_state")
    timing = {"warmup": 1, "repeat": 2, "min_time": 0.0, "max_time": 0.5}
    rows = [steady.case("distilbert", mode, 1, "cpu", False, timing)
            for mode in ("infer", "train")]
    assert rows[0]["right"] == {"tutorcompile": "yes"}
    # dropout is on in training: under eager's seed the compiled step draws eager's masks
    assert rows[1]["right"] == {"tutorcompile": "yes"}
    for row in rows:
        assert row["eager ms"] > 0 and row["tutorcompile ms"] > 0
    steady.print_rows(rows)
    out = capsys.readouterr().out
    assert "distilbert" in out and "transformer  train" in out


def test_steady_state_training_check_accepts_eager_a_rounding_away_and_nothing_else():
    """At a tie of a max the gradient jumps: a step whose rounding breaks the tie the other
    way than eager's (and float64's) is eager's own step with the input moved by one rounding,
    'yes≈'; the same step with its gradients 10% off is not."""
    steady = _benchmarks_run("steady_state")

    class Tie(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(2))

        def forward(self, x):
            return torch.max(self.w * x, dim=-1).values     # (its gradient: the first max)

    model, x = Tie(), torch.ones(1, 2)
    loss_fn = torch.Tensor.sum
    eager, params = steady._train_step(model, model, loss_fn)
    nudge = torch.tensor([1.0, 1.0 + 2**-23])

    def other_side(inputs):
        loss = loss_fn(model(inputs * nudge))
        for p in params:
            p.grad = None
        loss.backward()
        return loss

    def scaled(inputs):
        loss = other_side(inputs)
        model.w.grad *= 1.1
        return loss
    right = steady._check_train(model, {"eager": eager, "same": eager, "other side": other_side,
                                        "scaled": scaled}, params, (x,), loss_fn)
    assert model.w.grad is not None and torch.equal(model.w.detach(), torch.ones(2))
    assert right["same"] == "yes" and right["other side"] == "yes≈", right
    assert right["scaled"].startswith("WRONG (grad of w off by"), right


def test_call_path_shows_the_frames_from_forward_to_the_wrapper():
    """The per-call path of a compiled module, read from what ran: the module call, the cache
    hit and its generated guard function, then the generated wrapper, with the C calls each
    frame makes; in training the autograd.Function's forward stands between them."""
    import tutorcompile as tc
    from tutorcompile.bench import call_path
    from tutorcompile.models import MLP

    model, x = MLP((16, 32, 4)), torch.randn(8, 16)
    compiled = tc.compile(model)
    with torch.no_grad():
        compiled(x)
        compiled(x)
        path = call_path(compiled, x, name="inference")
    names = [f.name for f in path.frames]
    assert names[names.index("forward"):] == ["forward", "_run_plain", "_fast_cache_hit",
                                              "___check_and_fetch", "call"], names
    wrapper = path.frames[-1]
    assert wrapper.where == "<tutorcompile inductor wrapper>"
    assert path.wrapper_depth == wrapper.depth + 1
    assert "addmm" in wrapper.c_calls and wrapper.kernels   # (ReLU, softmax: C++ kernels)
    text = str(path)
    assert text.startswith(f"inference: {len(names)} Python frames") and \
        "tutorcompile/dynamo/eval_frame.py" in text and "addmm ×2" in text

    for _ in range(2):
        compiled(x).sum().backward()
    training = call_path(compiled, x)
    assert training.wrapper_depth > path.wrapper_depth   # (through the autograd.Function)
    assert "tutorcompile/aot/aot_autograd.py" in {f.where for f in training.frames}
