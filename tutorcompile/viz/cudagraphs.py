"""The CUDA Graph view: what was recorded, how often it replayed, and why calls were skipped.

``cudagraphs_view(compiled)`` finds every :class:`~tutorcompile.cudagraphs.CUDAGraphed`
wrapper inside something compiled with ``mode="reduce-overhead"``: the wrapper itself, the
compiled graphs of a ``tutorcompile.compile``-d function or module (with ``backend="eager"``
or ``"aot_eager"`` each captured graph is wrapped), or -- with ``backend="inductor"`` -- the
forward and backward graphs AOTAutograd compiled for it. Without a GPU the view is short
but still useful: it says why nothing was recorded.

Script form: ``.rows()`` and ``.summary()``; in Jupyter it displays as a table.
"""

from __future__ import annotations

import html
from typing import Any

from ..cudagraphs import CUDAGraphed


def find_cudagraphed(compiled: Any) -> list[CUDAGraphed]:
    """Every CUDAGraphed reachable from ``compiled``, in the order the compiler made them."""
    found: list[CUDAGraphed] = []

    def visit(obj: Any, depth: int = 0) -> None:
        if obj is None or depth > 4:
            return
        if isinstance(obj, CUDAGraphed):
            if not any(obj is f for f in found):
                found.append(obj)
            return
        visit(getattr(obj, "compiled", None), depth + 1)       # inductor's run -> AOTCompiled
        cache = getattr(obj, "cache", None)                      # AOTCompiled: per signature
        if isinstance(cache, dict):
            for artifacts in cache.values():
                visit(getattr(artifacts, "forward", None), depth + 1)
                visit(getattr(artifacts, "backward", None), depth + 1)

    if isinstance(compiled, CUDAGraphed):
        return [compiled]
    from ..dynamo import cache_entries
    original = getattr(compiled, "_orig_mod", compiled)
    for entry in cache_entries(original):
        visit(entry.compiled)
    return found


class CUDAGraphView:
    """The recorded graphs and skip reasons of one compiled callable."""

    def __init__(self, graphs: list[CUDAGraphed]):
        self.graphs = graphs

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for g in self.graphs:
            replays = sum(entry.replays for entry in g.graphs.values())
            rows.append({"name": g.name, "recorded": len(g.graphs), "replays": replays,
                         "skipped": list(g.skips)})
        return rows

    def summary(self) -> str:
        if not self.graphs:
            return ("no CUDA Graph wrappers found: compile with mode='reduce-overhead' and "
                    "call the compiled function first")
        return "\n".join(g.summary() for g in self.graphs)

    def __str__(self) -> str:
        return self.summary()

    def to_html(self) -> str:
        cells = "".join(
            f"<tr><td>{html.escape(r['name'])}</td><td>{r['recorded']}</td>"
            f"<td>{r['replays']}</td><td>{html.escape('; '.join(r['skipped']) or '—')}</td>"
            "</tr>" for r in self.rows())
        return ("<table><tr><th>graph</th><th>recorded</th><th>replays</th>"
                f"<th>skipped because</th></tr>{cells}</table>")

    def widget(self):
        import ipywidgets
        return ipywidgets.HTML(self.to_html() if self.graphs else
                               f"<i>{html.escape(self.summary())}</i>")

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = self.widget()._repr_mimebundle_(include=include, exclude=exclude) or {}
        bundle["text/plain"] = self.summary()
        return bundle


def cudagraphs_view(compiled: Any) -> CUDAGraphView:
    """The CUDA Graph view of a callable compiled with ``mode="reduce-overhead"``."""
    return CUDAGraphView(find_cudagraphed(compiled))
