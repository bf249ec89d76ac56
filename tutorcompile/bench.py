"""Timing that can be trusted: warm-up, device synchronisation, repeats, median and spread.

Three mistakes make most published speed-ups wrong, and this module exists to avoid them:

1. **Timing the compile.** The first call of a compiled function compiles it. ``compare``
   times that call on its own and reports it as *compile time*, never mixed into run time.
2. **Timing the launch, not the work.** CUDA calls return before the GPU finishes. On a GPU
   every sample is bracketed by CUDA events and the device is synchronised; on CPU the clock
   is ``time.perf_counter``.
3. **Trusting one number.** Machines are noisy. Each callable is run until ``min_time`` has
   passed (at least ``repeat`` samples), and the *median* with the 25th–75th percentile
   spread is reported. Short calls are batched so that each sample is long enough to time.
   A measurement whose interquartile range exceeds ``NOISY_SPREAD`` of its median is
   flagged as too noisy to trust, and a speed-up is given as a range (``ratio_range``):
   two runs disagree only when their ranges do not overlap (``ranges_disagree``).

Stable numbers need a quiet machine (nothing else busy: another process competing for a core
adds milliseconds to a sample) and a fixed thread count (``torch.set_num_threads``: the
number of physical cores, or 1 to see per-call overhead); compare ratios measured in one run.

``compare({"eager": f, "tutorcompile": tc.compile(f)}, x)`` measures several callables side by
side in one run, their samples interleaved (``measure_together``), and gives a table, ratios
against a baseline, and a bar chart.

Mirrors: torch/utils/benchmark (Timer, blocked_autorange) and triton.testing.do_bench.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ._logging import compile_times, reset_compile_times

NOISY_SPREAD = 0.10
"""Interquartile range, relative to the median, above which a measurement is too noisy."""


def _uses_cuda(args: tuple) -> bool:
    return any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)


def synchronize(device: str | None) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


@dataclass
class Measurement:
    """Per-call times (milliseconds) of one callable, and its compile time if measured."""
    name: str
    times_ms: list[float]
    compile_s: float | None = None
    calls_per_sample: int = 1

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def p25_ms(self) -> float:
        return _percentile(self.times_ms, 25)

    @property
    def p75_ms(self) -> float:
        return _percentile(self.times_ms, 75)

    @property
    def min_ms(self) -> float:
        return min(self.times_ms)

    @property
    def max_ms(self) -> float:
        return max(self.times_ms)

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median (0.05 = ±2.5 % noise)."""
        return (self.p75_ms - self.p25_ms) / self.median_ms if self.median_ms else 0.0

    @property
    def noisy(self) -> bool:
        """Whether the spread is too large to trust the median (see ``NOISY_SPREAD``)."""
        return self.spread > NOISY_SPREAD

    def __str__(self) -> str:
        text = f"{self.name}: {format_ms(self.median_ms)} median " \
               f"(IQR {format_ms(self.p25_ms)}–{format_ms(self.p75_ms)}, " \
               f"{len(self.times_ms)} samples)"
        if self.compile_s is not None:
            text += f", compile {self.compile_s:.2f} s"
        return text


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def ratio_range(baseline: Measurement, candidate: Measurement) -> tuple[float, float, float]:
    """Speed-up of ``candidate`` over ``baseline``: (low, median, high).

    The median ratio is baseline median / candidate median; the range pairs the quartiles
    crosswise (slowest quarter of the baseline over the fastest of the candidate and the
    reverse), so it is as wide as the two spreads together.
    """
    return (baseline.p25_ms / candidate.p75_ms, baseline.median_ms / candidate.median_ms,
            baseline.p75_ms / candidate.p25_ms)


def ranges_disagree(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """Whether two (low, ..., high) ranges of one quantity do not overlap: a real change,
    or noise larger than either spread shows."""
    return a[-1] < b[0] or b[-1] < a[0]


def format_ms(ms: float) -> str:
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    if ms >= 1:
        return f"{ms:.2f} ms"
    return f"{ms * 1000:.1f} µs"


def measure(fn: Callable, *args: Any, name: str = "fn", warmup: int = 2, repeat: int = 5,
            min_time: float = 0.2, max_time: float = 10.0, device: str | None = None,
            **kwargs: Any) -> Measurement:
    """Time ``fn(*args, **kwargs)`` after ``warmup`` calls.

    Samples are taken until ``min_time`` seconds have passed and at least ``repeat`` samples
    exist (stopping early at ``max_time``). Calls shorter than ~1 ms are batched so each
    sample spans at least that long.
    """
    device = device or ("cuda" if _uses_cuda(args) else "cpu")
    for _ in range(warmup):
        fn(*args, **kwargs)
    synchronize(device)

    # Batch short calls: find how many calls make one sample last ≥ 1 ms.
    calls = 1
    while True:
        elapsed = _time_calls(fn, args, kwargs, calls, device)
        if elapsed >= 1e-3 or calls >= 1 << 16:
            break
        calls *= 2

    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < repeat or time.perf_counter() - start < min_time:
        samples.append(_time_calls(fn, args, kwargs, calls, device) * 1000 / calls)
        if time.perf_counter() - start > max_time and len(samples) >= 3:
            break
    return Measurement(name, samples, calls_per_sample=calls)


def measure_together(fns: dict[str, Callable], *args: Any, warmup: int = 2, repeat: int = 5,
                     min_time: float = 0.2, max_time: float = 10.0, device: str | None = None
                     ) -> dict[str, Measurement]:
    """:func:`measure` for several callables on the same ``args``, in rounds: each round
    takes one sample of every callable, starting one further along each time.

    On a shared machine the speed drifts over seconds (another process, the host of a
    virtual machine). Timed one after the other, a callable measured in a slow spell looks
    slower than one measured before it, and ratios taken that way swing both ways
    (benchmarks/MEASUREMENTS.md). Interleaved, a slow spell lands on every callable alike
    and the ratio of their medians holds. ``min_time`` is per callable."""
    device = device or ("cuda" if _uses_cuda(args) else "cpu")
    calls: dict[str, int] = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn(*args)
        synchronize(device)
        n = 1
        while _time_calls(fn, args, {}, n, device) < 1e-3 and n < 1 << 16:
            n *= 2
        calls[name] = n
    samples: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    start = time.perf_counter()
    rounds = 0
    while rounds < repeat or time.perf_counter() - start < min_time * len(names):
        for name in names[rounds % len(names):] + names[:rounds % len(names)]:
            n = calls[name]
            samples[name].append(_time_calls(fns[name], args, {}, n, device) * 1000 / n)
        rounds += 1
        if time.perf_counter() - start > max_time * len(names) and rounds >= 3:
            break
    return {name: Measurement(name, samples[name], calls_per_sample=calls[name])
            for name in names}


def _time_calls(fn: Callable, args: tuple, kwargs: dict, calls: int, device: str) -> float:
    """Seconds for ``calls`` back-to-back calls, measured on the device's own clock."""
    if device == "cuda":
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(calls):
            fn(*args, **kwargs)
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) / 1000
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(*args, **kwargs)
    return time.perf_counter() - t0


@dataclass
class CallCount:
    """Function calls one call of ``fn`` makes, on average: a count a busy machine cannot
    blur, where the microseconds of per-call overhead drown in its noise."""
    python: float            # Python functions entered (generated code included)
    c: float                 # C functions called from Python (PyTorch ops, ``data_ptr()``...)
    top: list[tuple[str, float]] = field(default_factory=list)   # the most called, per call


def count_calls(fn: Callable, *args: Any, calls: int = 20, top: int = 10) -> CallCount:
    """Count the Python and C function calls of ``calls`` calls of ``fn(*args)`` with a
    ``sys.setprofile`` hook (warm ``fn`` up first: a cold call compiles). Work done inside
    C (a kernel, a PyTorch op's own C++) is one call, whatever it costs; operators
    (``a + b``) and attribute reads are no calls at all."""
    import sys
    from collections import Counter
    seen: Counter = Counter()

    def hook(frame, event, arg):
        if event == "call":
            code = frame.f_code
            seen[("py", f"{code.co_name} ({code.co_filename.rsplit('/', 1)[-1]})")] += 1
        elif event == "c_call":
            seen[("c", getattr(arg, "__qualname__", None) or str(arg))] += 1
    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        for _ in range(calls):
            fn(*args)
    finally:
        sys.setprofile(previous)
    seen[("c", "setprofile")] -= 1             # (the hook's own removal)
    python = sum(n for (kind, _), n in seen.items() if kind == "py")
    c = sum(n for (kind, _), n in seen.items() if kind == "c")
    return CallCount(python / calls, c / calls,
                     [(f"{name} [{kind}]", n / calls) for (kind, name), n in
                      seen.most_common(top) if n > 0])


@dataclass
class Frame:
    """One Python function entered during a call: where, how deep, and the C functions it
    called itself (PyTorch ops, ``data_ptr()``...), by name, in order. A profile hook sees
    no call of a ctypes function, so a generated wrapper's C++ kernels are listed apart:
    the ones its code names (each called once; a wrapper has no loops)."""
    name: str
    where: str               # the module's path from its package, or the generated code's name
    depth: int
    c_calls: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)


@dataclass
class CallPath:
    """Every Python function one call runs, as a tree, and how deep the compiled graph's
    generated wrapper sits in it."""
    name: str
    frames: list[Frame]
    wrapper_depth: int | None  # Python frames from the call down to the wrapper, inclusive

    def __str__(self) -> str:
        return self.format()

    def format(self, limit: int = 60) -> str:
        """The tree, at most ``limit`` frames of it."""
        lines = [f"{self.name}: {len(self.frames)} Python frames, "
                 f"{sum(len(f.c_calls) + len(f.kernels) for f in self.frames)} C calls"]
        if self.wrapper_depth is not None:
            lines[0] += f"; the generated wrapper runs {self.wrapper_depth} frames deep"
        for f in self.frames[:limit]:
            counts: dict[str, int] = {}
            for c in f.c_calls:
                counts[c] = counts.get(c, 0) + 1
            calls = ", ".join([f"C++ kernel {k}" for k in f.kernels] +
                              [c if n == 1 else f"{c} ×{n}" for c, n in counts.items()])
            label = f"{'  ' * f.depth}{f.name}"
            lines.append(f"{label:<32} {f.where:<38} {calls}".rstrip())
        if len(self.frames) > limit:
            lines.append(f"... and {len(self.frames) - limit} more frames")
        return "\n".join(lines)


def _where(code: Any) -> str:
    """``tutorcompile/dynamo/eval_frame.py``, ``torch/nn/modules/module.py`` or the name
    of generated code without its serial number (``<tutorcompile inductor wrapper>``)."""
    path = code.co_filename
    if path.startswith("<"):
        return path.split(" #")[0] + (">" if " #" in path else "")
    parts = path.replace("\\", "/").split("/")
    for package in ("tutorcompile", "torch", "triton"):
        if package in parts:
            return "/".join(parts[len(parts) - parts[::-1].index(package) - 1:])
    return parts[-1]


def call_path(fn: Callable, *args: Any, name: str = "one call", **kwargs: Any) -> CallPath:
    """The Python functions one call of ``fn`` runs -- a tree, each frame with the C
    functions it calls -- recorded with a ``sys.setprofile`` hook (warm ``fn`` up first: a
    cold call compiles). The per-call path of a compiled model, from its ``forward`` to the
    first kernel, read from what actually ran, not from a diagram."""
    import ctypes
    import sys
    frames: list[Frame] = []
    stack: list[Frame] = []
    wrapper_depth: list[int] = []

    def hook(frame, event, arg):
        if event == "call":
            entered = Frame(frame.f_code.co_name, _where(frame.f_code), len(stack))
            if entered.where == "<tutorcompile inductor wrapper>":
                entered.kernels = [n for n in frame.f_code.co_names if isinstance(
                    frame.f_globals.get(n), ctypes._CFuncPtr)]
                wrapper_depth.append(len(stack) + 1)
            frames.append(entered)
            stack.append(entered)
        elif event == "return" and stack:
            stack.pop()
        elif event == "c_call" and stack:
            callee = getattr(arg, "__qualname__", None) or getattr(arg, "__name__", str(arg))
            if callee.startswith(("_", "pybind11")):   # (torch._C's classes: the op's name)
                callee = callee.rsplit(".", 1)[-1]
            stack[-1].c_calls.append(callee)
    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        fn(*args, **kwargs)
    finally:
        sys.setprofile(previous)
    return CallPath(name, frames, wrapper_depth[0] if wrapper_depth else None)


def time_first_call(fn: Callable, *args: Any, device: str | None = None, **kwargs: Any
                    ) -> tuple[float, Any]:
    """(seconds, result) of one call -- for a compiled function, its compile time."""
    device = device or ("cuda" if _uses_cuda(args) else "cpu")
    synchronize(device)
    t0 = time.perf_counter()
    result = fn(*args, **kwargs)
    synchronize(device)
    return time.perf_counter() - t0, result


@dataclass
class Comparison:
    """Several callables measured side by side on the same inputs, in one run."""
    measurements: dict[str, Measurement]
    baseline: str
    meta: dict[str, Any] = field(default_factory=dict)

    def ratio(self, name: str, over: str | None = None) -> float:
        """Speed-up of ``name`` over ``over`` (default: the baseline); > 1 means faster."""
        over = over or self.baseline
        return self.measurements[over].median_ms / self.measurements[name].median_ms

    def rows(self) -> list[dict[str, Any]]:
        return [{"name": m.name, "median_ms": m.median_ms, "p25_ms": m.p25_ms,
                 "p75_ms": m.p75_ms, "speedup": self.ratio(m.name),
                 "compile_s": m.compile_s, "samples": len(m.times_ms)}
                for m in self.measurements.values()]

    def table(self) -> str:
        header = ["", "median", "IQR", f"vs {self.baseline}", "compile"]
        lines = []
        for row, m in zip(self.rows(), self.measurements.values()):
            compile_s = f"{row['compile_s']:.2f} s" if row["compile_s"] is not None else "—"
            lines.append([row["name"], format_ms(row["median_ms"]),
                          f"{format_ms(row['p25_ms'])}–{format_ms(row['p75_ms'])}"
                          + (" !" if m.noisy else ""),
                          f"{row['speedup']:.2f}×", compile_s])
        widths = [max(len(r[i]) for r in [header] + lines) for i in range(len(header))]
        fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
        text = [fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in lines]
        if any(m.noisy for m in self.measurements.values()):
            text.append(f"! spread above {NOISY_SPREAD:.0%} of the median: too noisy to trust "
                        "(a busy machine?); run again on a quiet one")
        return "\n".join(text)

    def __str__(self) -> str:
        return self.table()

    def plot(self, ax=None, title: str | None = None):
        """A bar chart of median time with the IQR as error bars; returns the matplotlib Axes."""
        import matplotlib.pyplot as plt
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 0.6 + 0.5 * len(self.measurements)))
        rows = self.rows()
        names = [r["name"] for r in rows]
        medians = [r["median_ms"] for r in rows]
        errors = [[r["median_ms"] - r["p25_ms"] for r in rows],
                  [r["p75_ms"] - r["median_ms"] for r in rows]]
        bars = ax.barh(names, medians, xerr=errors, color="#4c72b0", capsize=3)
        for bar, row, upper in zip(bars, rows, errors[1]):
            ax.text(bar.get_width() + upper, bar.get_y() + bar.get_height() / 2,
                    f"  {row['speedup']:.2f}×", va="center")
        ax.invert_yaxis()
        ax.set_xlabel("median time per call (ms)")
        ax.set_title(title or f"speed-up vs {self.baseline}")
        ax.margins(x=0.2)
        return ax


def compare(candidates: dict[str, Callable], *args: Any, baseline: str | None = None,
            compiled: set[str] | None = None, progress: bool = False, rtol: float = 1e-3,
            atol: float = 1e-4, verify: set[str] | None = None, **measure_kwargs: Any
            ) -> Comparison:
    """Measure every candidate on the same ``args``; the first is the baseline by default.

    Names in ``compiled`` have their first call timed separately as compile time (by default:
    every candidate except the baseline). Results are checked to agree with the baseline's
    (within ``rtol``/``atol``) before anything is timed -- a fast wrong answer is not a
    speed-up. Gradients summed over many elements may need a looser ``atol``. ``verify``
    names the candidates whose results are checked (default: all); the others are timed only,
    and the comparison's ``meta["unverified"]`` lists them.
    """
    names = list(candidates)
    baseline = baseline or names[0]
    compiled = set(names) - {baseline} if compiled is None else compiled
    iterator = names
    if progress:
        from tqdm.auto import tqdm
        iterator = tqdm(names, desc="compiling and checking", leave=False)
    compile_times: dict[str, float | None] = {}
    reference = candidates[baseline](*args)
    for name in iterator:
        fn = candidates[name]
        compile_times[name] = None
        if name in compiled:
            compile_times[name], out = time_first_call(fn, *args)
        else:
            out = fn(*args)
        if verify is None or name in verify:
            _assert_close(out, reference, name, baseline, rtol, atol)
    results = measure_together(candidates, *args, **measure_kwargs)
    for name, m in results.items():
        m.compile_s = compile_times[name]
    unverified = [] if verify is None else [n for n in names if n not in verify | {baseline}]
    return Comparison(results, baseline, meta={"unverified": unverified})


def _assert_close(actual: Any, expected: Any, name: str, baseline: str, rtol: float,
                  atol: float) -> None:
    if isinstance(expected, torch.Tensor):
        try:
            torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)
        except AssertionError as e:
            raise AssertionError(f"{name} does not compute what {baseline} does: {e}") from None
    elif isinstance(expected, (tuple, list)):
        for a, b in zip(actual, expected):
            _assert_close(a, b, name, baseline, rtol, atol)


@dataclass
class Sweep:
    """Time of one callable across input sizes, and the overhead/bandwidth model it fits."""
    name: str
    sizes: list[int]
    nbytes: list[int]
    measurements: list[Measurement]

    @property
    def medians_us(self) -> list[float]:
        return [m.median_ms * 1000 for m in self.measurements]

    def fit(self) -> tuple[float, float]:
        """Least-squares ``time = overhead + bytes / bandwidth``: (overhead µs, GB/s)."""
        return fit_overhead(self.nbytes, self.medians_us)

    def table(self) -> str:
        lines = [f"{'size':>12}  {'bytes':>12}  {'median':>10}  {'GB/s':>8}"]
        for size, nbytes, us in zip(self.sizes, self.nbytes, self.medians_us):
            lines.append(f"{size:>12,}  {nbytes:>12,}  {format_ms(us / 1000):>10}  "
                         f"{nbytes / us / 1000:>8.2f}")
        return "\n".join(lines)

    def plot(self, ax=None):
        """Log-log time against bytes moved, with the fitted model as a dashed line."""
        import matplotlib.pyplot as plt
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3.5))
        overhead, gbps = self.fit()
        ax.loglog(self.nbytes, self.medians_us, "o-", label=f"{self.name} (measured)")
        model = [overhead + b / (gbps * 1000) for b in self.nbytes]
        ax.loglog(self.nbytes, model, "--", color="gray",
                  label=f"{overhead:.1f} µs + bytes / {gbps:.1f} GB/s")
        ax.set_xlabel("bytes moved per call")
        ax.set_ylabel("time per call (µs)")
        ax.legend()
        return ax


def fit_overhead(nbytes: Sequence[float], times_us: list[float]) -> tuple[float, float]:
    """Fit ``t = overhead + bytes / bandwidth``: (overhead µs, GB/s).

    Times span orders of magnitude (microseconds to milliseconds), so the fit minimises
    *relative* error -- weighted least squares with weights 1/t² -- or the largest sizes
    alone would decide the overhead.
    """
    w = [1 / t ** 2 for t in times_us]
    sw = sum(w)
    swb = sum(wi * b for wi, b in zip(w, nbytes))
    swt = sum(wi * t for wi, t in zip(w, times_us))
    swbb = sum(wi * b * b for wi, b in zip(w, nbytes))
    swbt = sum(wi * b * t for wi, b, t in zip(w, nbytes, times_us))
    slope = (sw * swbt - swb * swt) / (sw * swbb - swb ** 2)   # µs per byte
    overhead = (swt - slope * swb) / sw
    return overhead, 1 / slope / 1000                           # bytes/µs → GB/s


def sweep(fn: Callable, make_inputs: Callable[[int], tuple], sizes: list[int],
          bytes_moved: Callable[[tuple], int] | None = None, name: str = "fn",
          **measure_kwargs: Any) -> Sweep:
    """Time ``fn(*make_inputs(size))`` for each size; bytes default to inputs + output."""
    measurements, nbytes = [], []
    for size in sizes:
        args = make_inputs(size)
        if bytes_moved is None:
            out = fn(*args)
            moved = sum(a.nbytes for a in args if isinstance(a, torch.Tensor)) + \
                (out.nbytes if isinstance(out, torch.Tensor) else 0)
        else:
            moved = bytes_moved(args)
        nbytes.append(moved)
        measurements.append(measure(fn, *args, name=f"{name}[{size}]", **measure_kwargs))
    return Sweep(name, list(sizes), nbytes, measurements)


@dataclass
class Breakdown:
    """Where one compiled call's time goes -- the answer to "why no speed-up?"."""
    name: str
    compile_s: float          # capture + backend, paid on the first call (and recompiles)
    total_us: float           # a whole compiled call, median
    guard_us: float           # choosing a cache entry by its guards
    graph_us: float           # running the compiled graph(s): kernels, extern calls, wrapper
    graphs_per_call: float    # > 1 when graph breaks split the function
    eager_us: float | None = None
    compile_phases: dict[str, float] = field(default_factory=dict)  # seconds, by phase

    @property
    def overhead_us(self) -> float:
        """Python around the graphs: frame set-up, rebuilding locals, code between breaks."""
        return max(0.0, self.total_us - self.guard_us - self.graph_us)

    @property
    def compile_other_s(self) -> float:
        """Compile time outside the named phases (guard building, bookkeeping)."""
        return max(0.0, self.compile_s - sum(self.compile_phases.values()))

    def table(self) -> str:
        rows = [("compile (first call)", f"{self.compile_s:.3f} s")]
        if self.compile_phases:
            rows += [(f"  {phase}", f"{sec:.3f} s") for phase, sec in
                     self.compile_phases.items() if sec > 0]
            rows.append(("  other", f"{self.compile_other_s:.3f} s"))
        rows += [("one compiled call", format_ms(self.total_us / 1000)),
                ("  guard checks", format_ms(self.guard_us / 1000)),
                ("  compiled graph(s)", format_ms(self.graph_us / 1000)
                 + f"  ({self.graphs_per_call:g} per call)"),
                ("  Python around them", format_ms(self.overhead_us / 1000))]
        if self.eager_us is not None:
            rows.append(("eager, for comparison", format_ms(self.eager_us / 1000)))
        width = max(len(r[0]) for r in rows)
        return "\n".join(f"{label.ljust(width)}  {value}" for label, value in rows)

    def verdict(self) -> str:
        """One sentence on what dominates."""
        parts = {"guard checks": self.guard_us, "compiled graphs": self.graph_us,
                 "Python around the graphs": self.overhead_us}
        top = max(parts, key=lambda part: parts[part])
        share = parts[top] / self.total_us if self.total_us else 0.0
        text = f"{top} take {share:.0%} of a call"
        if self.graphs_per_call > 1:
            text += f"; graph breaks split it into {self.graphs_per_call:g} graphs"
        if self.eager_us is not None:
            text += f"; eager takes {self.eager_us / self.total_us:.2f}× the compiled time"
        return text + "."

    def __str__(self) -> str:
        return f"{self.name}\n{self.table()}\n{self.verdict()}"

    def plot(self, ax=None):
        """Stacked bars: the compiled call by part, and eager beside it."""
        import matplotlib.pyplot as plt
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 1.8))
        left = 0.0
        for label, value, colour in (("guards", self.guard_us, "#dd8452"),
                                     ("graphs", self.graph_us, "#4c72b0"),
                                     ("Python", self.overhead_us, "#8c8c8c")):
            ax.barh("compiled", value, left=left, label=label, color=colour)
            left += value
        if self.eager_us is not None:
            ax.barh("eager", self.eager_us, color="#55a868", label="eager")
        ax.set_xlabel("µs per call")
        ax.legend(loc="lower right", fontsize=8)
        ax.set_title(self.name)
        return ax


def breakdown(compiled: Callable, *args: Any, eager: Callable | None = None,
              name: str = "compiled call", **measure_kwargs: Any) -> Breakdown:
    """Split a ``tutorcompile.compile``-d callable's time into compile, guards, graphs, Python.

    The first call is timed for compile time (call ``tutorcompile.reset()`` first to include
    it), split into the compile phases (``_logging.compile_times``) and the rest. A warm
    call's total is the median of uncounted calls; its parts are the shares counted over
    separate calls, applied to that total, so they add up to it.
    """
    # stage 3 takes seconds to load; of this module only breakdown needs it
    from .dynamo.eval_frame import profiling
    reset_compile_times()
    with profiling() as prof:
        compiled(*args)
    compile_s = prof.compile_s
    times = compile_times(as_dict=True)
    assert isinstance(times, dict)
    phases = {p: s for p, s in times.items() if s > 0}
    total = measure(compiled, *args, name=name, **measure_kwargs)
    calls = max(10, min(10_000, int(0.1 / max(total.median_ms / 1000, 1e-7))))
    with profiling() as prof:
        start = time.perf_counter()
        for _ in range(calls):
            compiled(*args)
        profiled_s = time.perf_counter() - start
    # the shares of the profiled calls, applied to the unprofiled median: the parts add up to
    # the whole (counting costs a little, so measured apart they would not)
    scale = total.median_ms / 1000 * calls / profiled_s
    eager_us = measure(eager, *args, **measure_kwargs).median_ms * 1000 if eager else None
    return Breakdown(name, compile_s, total.median_ms * 1000,
                     prof.guard_s * scale / calls * 1e6, prof.graph_s * scale / calls * 1e6,
                     prof.graph_calls / calls, eager_us, phases)


@dataclass
class Report:
    """Several cases (a model, a training step...) each compared side by side: one table,
    one figure with speed-ups and compile times."""
    comparisons: dict[str, Comparison]

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for case, cmp in self.comparisons.items():
            for name, m in cmp.measurements.items():
                rows.append({"case": case, "name": name, "median_ms": m.median_ms,
                             "speedup": cmp.ratio(name), "compile_s": m.compile_s})
        return rows

    def table(self) -> str:
        names = list(dict.fromkeys(r["name"] for r in self.rows()))
        header = ["case"] + [f"{n} (ms)" for n in names] + \
            [f"{n} ×" for n in names[1:]] + [f"{n} compile" for n in names[1:]]
        lines = [header]
        for case, cmp in self.comparisons.items():
            ms = cmp.measurements
            lines.append([case] + [f"{ms[n].median_ms:.3f}" if n in ms else "—" for n in names]
                         + [f"{cmp.ratio(n):.2f}" if n in ms else "—" for n in names[1:]]
                         + [f"{ms[n].compile_s:.1f} s" if n in ms and ms[n].compile_s
                            is not None else "—" for n in names[1:]])
        widths = [max(len(r[i]) for r in lines) for i in range(len(header))]
        fmt = lambda r: "  ".join(c.rjust(w) if i else c.ljust(w)  # noqa: E731
                                  for i, (c, w) in enumerate(zip(r, widths)))
        return "\n".join([fmt(lines[0]), fmt(["-" * w for w in widths])] +
                         [fmt(r) for r in lines[1:]])

    def __str__(self) -> str:
        return self.table()

    def plot(self):
        """Speed-up over the baseline (left) and compile time (right, log scale) per case."""
        import matplotlib.pyplot as plt
        cases = list(self.comparisons)
        names = list(dict.fromkeys(r["name"] for r in self.rows()))[1:]
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.9 + 0.55 * len(cases)))
        height = 0.8 / max(1, len(names))
        for k, name in enumerate(names):
            ys = [i + k * height for i in range(len(cases))]
            cmps = [self.comparisons[c] for c in cases]
            left.barh(ys, [c.ratio(name) if name in c.measurements else 0 for c in cmps],
                      height, label=name)
            right.barh(ys, [c.measurements[name].compile_s or 0
                            if name in c.measurements else 0 for c in cmps], height,
                       label=name)
        for ax in (left, right):
            ax.set_yticks([i + height * (len(names) - 1) / 2 for i in range(len(cases))],
                          cases)
            ax.invert_yaxis()
        baseline = next(iter(self.comparisons.values())).baseline
        left.axvline(1.0, color="gray", linestyle="--", linewidth=1)
        left.set_xlabel(f"speed-up over {baseline} (higher is better)")
        right.set_xscale("log")
        right.set_xlabel("compile time, s (log scale)")
        left.legend(fontsize=8)
        fig.tight_layout()
        return fig
