"""Timing: several implementations of one computation, measured side by side, on demand.

``Timing({"eager": f, "tutorcompile": tc.compile(f), "torch.compile": torch.compile(f)},
make_inputs=lambda n: (torch.randn(n, n),), sizes=[256, 512, 1024])`` shows a size slider, a
Run button, a progress bar, the table and the bar chart of :func:`tutorcompile.bench.compare`.
All timing is ``bench.compare``'s (warm-up, compile time measured apart, median and IQR,
results checked against the baseline before anything is timed); this module only decides
*when* to measure and shows the result.

Measuring is slow, so nothing is measured when the slider moves: only the Run button (or
``run()``) measures, and the chart says which size it belongs to. Every run is kept in
``history`` (size -> Comparison).

In a script, the same object without a widget: ``Timing(...).run(1024)`` returns the
``Comparison``; ``table()``, ``rows()`` and ``save("timing.png")`` give the rest.

Mirrors: triton.testing.perf_report (a benchmark as a table plus a plot) -- interactively.
"""

from __future__ import annotations

import base64
import html
import io
import os
from collections.abc import Callable, Sequence
from typing import Any

from ..bench import Comparison, compare, format_ms


def comparison_html(comparison: Comparison, caption: str = "") -> str:
    """The comparison as an HTML table (median, IQR, speed-up, compile time)."""
    pad = "padding:2px 10px"
    head = "".join(f"<th style='text-align:{a};{pad}'>{h}</th>" for h, a in (
        ("", "left"), ("median", "right"), ("IQR", "right"),
        (f"vs {html.escape(comparison.baseline)}", "right"), ("compile", "right")))
    body = []
    for r in comparison.rows():
        compile_s = f"{r['compile_s']:.2f} s" if r["compile_s"] is not None else "&mdash;"
        cells = [html.escape(r["name"]), format_ms(r["median_ms"]),
                 f"{format_ms(r['p25_ms'])}&ndash;{format_ms(r['p75_ms'])}",
                 f"{r['speedup']:.2f}&times;", compile_s]
        body.append("<tr>" + "".join(
            f"<td style='text-align:{'left' if i == 0 else 'right'};{pad}'>{c}</td>"
            for i, c in enumerate(cells)) + "</tr>")
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table class='tc-timing'>{cap}<tr>{head}</tr>{''.join(body)}</table>"


def comparison_png(comparison: Comparison, title: str | None = None) -> bytes:
    """The bar chart of ``Comparison.plot`` as PNG bytes (no pyplot state left behind)."""
    from matplotlib.figure import Figure
    n = len(comparison.measurements)
    fig = Figure(figsize=(6, 0.9 + 0.5 * n), dpi=100)
    comparison.plot(ax=fig.add_subplot(), title=title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


class Timing:
    """Time ``candidates`` (name -> callable) on the same inputs; the first is the baseline.

    Inputs are ``args`` or, with ``make_inputs(size)``, built for the size chosen on the
    slider (``sizes``: the sizes offered; ``size``: the one selected first). ``baseline``,
    ``compiled`` and any ``bench.measure`` keyword (``min_time``, ``repeat``...) are passed to
    :func:`tutorcompile.bench.compare`.
    """

    def __init__(self, candidates: dict[str, Callable], *args: Any,
                 make_inputs: Callable[[int], Sequence[Any]] | None = None,
                 sizes: Sequence[int] | None = None, size: int | None = None,
                 baseline: str | None = None, compiled: set[str] | None = None,
                 title: str | None = None, **measure_kwargs: Any):
        if not candidates:
            raise ValueError("Timing needs at least one candidate")
        if make_inputs is None and sizes:
            raise ValueError("sizes need make_inputs(size) to build the inputs of each size")
        if make_inputs is not None and not sizes:
            raise ValueError("make_inputs needs sizes=[...], the sizes the slider offers")
        if make_inputs is not None and args:
            raise ValueError("give either the inputs or make_inputs, not both")
        self.candidates = dict(candidates)
        self.args = args
        self.make_inputs = make_inputs
        self.sizes = list(sizes) if sizes else []
        if size is not None and size not in self.sizes:
            raise ValueError(f"size {size} is not one of sizes={self.sizes}")
        self.size = size if size is not None else (self.sizes[0] if self.sizes else None)
        self.baseline = baseline
        self.compiled = compiled
        self.title = title
        self.measure_kwargs = measure_kwargs
        self.history: dict[Any, Comparison] = {}
        self.comparison: Comparison | None = None
        self._widget = None

    # --- measuring --------------------------------------------------------------------------
    def inputs(self, size: int | None = None) -> tuple:
        if self.make_inputs is None:
            return tuple(self.args)
        made = self.make_inputs(self.size if size is None else size)  # type: ignore[arg-type]
        return tuple(made) if isinstance(made, (tuple, list)) else (made,)

    def run(self, size: int | None = None, progress: bool = False) -> Comparison:
        """Measure every candidate (at ``size`` when inputs are made per size)."""
        if size is not None:
            if size not in self.sizes:
                raise ValueError(f"size {size} is not one of sizes={self.sizes}")
            self.size = size
        comparison = compare(self.candidates, *self.inputs(), baseline=self.baseline,
                             compiled=self.compiled, progress=progress, **self.measure_kwargs)
        comparison.meta["size"] = self.size
        self.comparison = comparison
        self.history[self.size] = comparison
        return comparison

    def _need(self) -> Comparison:
        if self.comparison is None:
            raise RuntimeError("nothing measured yet: call run() (or press Run)")
        return self.comparison

    def caption(self) -> str:
        c = self._need()
        where = f" at size {c.meta['size']}" if c.meta.get("size") is not None else ""
        return self.title or f"median time per call{where}, speed-up vs {c.baseline}"

    def table(self) -> str:
        return self._need().table()

    def rows(self) -> list[dict[str, Any]]:
        return self._need().rows()

    def save(self, path: str | os.PathLike) -> str:
        """Save the bar chart (.png) or the table (.txt)."""
        path = os.fspath(path)
        if path.endswith(".txt"):
            with open(path, "w") as f:
                f.write(self.table() + "\n")
        else:
            with open(path, "wb") as f:
                f.write(comparison_png(self._need(), self.caption()))
        return path

    def __str__(self) -> str:
        if self.comparison is None:
            return f"Timing of {', '.join(self.candidates)} (not run yet: call run())"
        return f"{self.caption()}\n{self.table()}"

    __repr__ = __str__

    # --- the widget -----------------------------------------------------------------------------
    def widget(self):
        """Slider (when sizes are given), Run button, progress, table and chart."""
        if self._widget is not None:
            return self._widget
        import ipywidgets as widgets
        self.run_button = widgets.Button(description="Run", button_style="primary",
                                         icon="play", tooltip="measure every candidate")
        self.status = widgets.HTML("press Run to measure " + ", ".join(
            html.escape(n) for n in self.candidates))
        self.table_html = widgets.HTML()
        self.output = widgets.Output()
        controls = [self.run_button, self.status]
        self.size_slider = None
        if self.sizes:
            self.size_slider = widgets.SelectionSlider(options=self.sizes, value=self.size,
                                                       description="size",
                                                       continuous_update=False)
            self.size_slider.observe(self._on_size, names="value")
            controls.insert(0, self.size_slider)
        self.run_button.on_click(lambda _button: self._run_from_widget())
        self._widget = widgets.VBox([widgets.HBox(controls), self.table_html, self.output])
        if self.comparison is not None:
            self._show(self.comparison)
        return self._widget

    def _on_size(self, change) -> None:
        """Moving the slider only selects a size; a stored result is shown, nothing is run."""
        self.size = change["new"]
        if self.size in self.history:
            self._show(self.history[self.size])
            self.status.value = f"size {self.size}: measured earlier (press Run to re-measure)"
        else:
            self.status.value = f"size {self.size}: press Run to measure"

    def _run_from_widget(self) -> None:
        self.run_button.disabled = True
        where = f" at size {self.size}" if self.size is not None else ""
        self.status.value = f"measuring {len(self.candidates)} candidates{where}..."
        try:
            # bench.compare reports per-candidate progress through tqdm; run inside the Output
            # widget, tqdm.auto draws it there as a Jupyter progress bar (the chart replaces it)
            if _in_kernel():
                with self.output:
                    self.output.clear_output()
                    comparison = self.run(progress=True)
            else:
                comparison = self.run()
            self._show(comparison)
            self.status.value = f"measured{where}"
        except Exception as e:  # noqa: BLE001 -- a callback's exception would only reach a log
            self.status.value = (f"<span style='color:#b00'>{html.escape(type(e).__name__)}: "
                                 f"{html.escape(str(e))}</span>")
        finally:
            self.run_button.disabled = False

    def _show(self, comparison: Comparison) -> None:
        self.comparison = comparison
        self.table_html.value = comparison_html(comparison, self.caption())
        png = base64.b64encode(comparison_png(comparison, self.caption())).decode()
        self.output.outputs = ({"output_type": "display_data",
                                "data": {"image/png": png,
                                         "text/plain": f"<bar chart: {self.caption()}>"},
                                "metadata": {}},)

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = self.widget()._repr_mimebundle_(include=include, exclude=exclude) or {}
        bundle["text/plain"] = str(self)
        return bundle


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")
