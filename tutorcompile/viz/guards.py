"""The guard inspector: change an input, and see which guard fails and what Dynamo does next.

A captured graph is reused only while its guards hold. The quickest way to understand guards
is to break one on purpose: compile with one input, call with a changed one (another shape,
dtype, ``requires_grad``, a different Python constant) and look. :func:`inspect_guards` does
exactly that with ``tutorcompile.dynamo``:

1. capture ``fn`` on ``before`` (through ``explain``, so every graph and guard is recorded);
2. evaluate *each* guard of the first graph, one by one, against the frame ``after`` would
   start with -- which ones still pass, which fail, and (for tensor guards) which property
   changed, in the words of Dynamo's own ``explain_tensor_mismatch``;
3. call with ``after`` for real and keep Dynamo's recompile log ("guard failed: ...",
   "marking dims [0] as dynamic").

The result, a :class:`GuardReport`, prints as text in a script; in Jupyter it shows as a table
with the failing guard highlighted. :class:`GuardInspector` adds a dropdown over several named
changes ("batch 8", "float64", ...), so a learner can flip between them.

Mirrors: torch/_dynamo/guards.py's failure reporting (``get_guard_fail_reason``) and
``TORCH_LOGS=recompiles``.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .stages import _dynamo_explain, _module_or_fn


@dataclass
class GuardCheck:
    """One guard of the first captured graph, evaluated on the changed inputs."""
    kind: str
    expr: str
    comment: str
    passed: bool
    reason: str = ""  # why it failed (which tensor property changed), "" when it passed

    def __str__(self) -> str:
        mark = "ok  " if self.passed else "FAIL"
        text = f"{mark} {self.expr}"
        if self.comment:
            text += f"  # {self.comment}"
        if self.reason:
            text += f"\n       -> {self.reason}"
        return text


@dataclass
class GuardReport:
    """What changed between two calls, seen through the first graph's guards."""
    name: str
    checks: list[GuardCheck]
    first_failure: str | None  # Dynamo's own one-line reason (CheckFunction.failure)
    recompile_log: list[str] = field(default_factory=list)
    graph_count: int = 0
    error: str = ""  # the changed call raised (e.g. a shape the function cannot take)

    @property
    def failing(self) -> list[GuardCheck]:
        return [c for c in self.checks if not c.passed]

    @property
    def reused(self) -> bool:
        """True when every guard passes: the changed call reuses the captured graph."""
        return not self.failing

    def text(self) -> str:
        verdict = ("all guards pass: the captured graph is reused" if self.reused else
                   f"{len(self.failing)} of {len(self.checks)} guards fail: Dynamo recompiles")
        lines = [f"guards of {self.name} (first graph), checked on the changed inputs: "
                 f"{verdict}"]
        lines += [f"  {c}" for c in self.checks]
        if self.first_failure:
            lines.append(f"Dynamo: {self.first_failure}")
        if self.recompile_log:
            lines.append("recompile log:")
            lines += [f"  {r}" for r in self.recompile_log]
        if self.error:
            lines.append(f"the changed call raised: {self.error}")
        return "\n".join(lines)

    __str__ = text

    def __repr__(self) -> str:
        return self.text()

    def html(self) -> str:
        rows = []
        for c in self.checks:
            colour = "#e6f4e6" if c.passed else "#fbdada"
            mark = "&#10003;" if c.passed else "&#10007;"
            why = f"<br/><i>{html.escape(c.reason)}</i>" if c.reason else ""
            comment = f" <span style='color:#666'># {html.escape(c.comment)}</span>" \
                if c.comment else ""
            rows.append(f"<tr style='background:{colour}'><td>{mark}</td>"
                        f"<td>{html.escape(c.kind)}</td><td><code>{html.escape(c.expr)}</code>"
                        f"{comment}{why}</td></tr>")
        verdict = ("<b>all guards pass</b>: the captured graph is reused" if self.reused else
                   f"<b>{len(self.failing)} guard(s) fail</b>: Dynamo recompiles")
        log = "".join(f"<li><code>{html.escape(r)}</code></li>" for r in self.recompile_log)
        parts = [f"<div>{verdict}</div>", f"<table class='tc-guards'>{''.join(rows)}</table>"]
        if log:
            parts.append(f"<div>recompile log:<ul>{log}</ul></div>")
        if self.error:
            parts.append(f"<div style='color:#b00'>the changed call raised: "
                         f"{html.escape(self.error)}</div>")
        return "".join(parts)

    def _repr_html_(self) -> str:
        return self.html()


def _as_args(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def inspect_guards(fn: Callable, before: Any, after: Any) -> GuardReport:
    """Capture ``fn(*before)``, then check its first graph's guards against ``fn(*after)``.

    ``before`` / ``after`` are the argument tuples (a single tensor is taken as one argument).
    ``fn`` may be a plain function, an ``nn.Module`` or a ``tutorcompile.compile``-d one.
    Needs stage 3 (``tutorcompile.dynamo``).
    """
    from ..dynamo import eval_frame, guards
    from ..dynamo.vm import VM
    explain = _dynamo_explain()
    if explain is None:
        raise RuntimeError("the guard inspector needs tutorcompile.dynamo (stage 3), which is "
                           "not importable here")
    fn = _module_or_fn(fn)
    before, after = _as_args(before), _as_args(after)
    run = explain(fn)
    report = run(*before)
    entries = [e for e in eval_frame.cache_entries(fn) if e.start_ip == 0]
    if not entries:
        raise RuntimeError(f"Dynamo compiled nothing for {fn!r}: there are no guards to check")
    check = entries[0].check
    if isinstance(fn, torch.nn.Module):
        frame = VM().make_frame(type(fn).forward, [fn, *after])
    else:
        frame = VM().make_frame(fn, list(after))
    env = (frame.locals, frame.globals, frame.builtins, frame.stack)
    scope = dict(check.env, L=frame.locals, G=frame.globals, B=frame.builtins, S=frame.stack)
    checks = []
    for g in check.guards:
        try:
            passed = bool(eval(g.expr, scope))  # noqa: S307 -- Dynamo's own guard text
            reason = ""
        except Exception as e:  # noqa: BLE001 -- a source that no longer resolves fails
            passed, reason = False, f"raised {type(e).__name__}: {e}"
        why: str | None = reason
        if not passed and not reason and g.kind == "TENSOR_MATCH" and g.tensor_args \
                and g.source is not None:
            try:
                why = guards.explain_tensor_mismatch(g.source.get(scope), *g.tensor_args)
            except Exception:  # noqa: BLE001 -- the reason is extra information
                why = ""
        checks.append(GuardCheck(g.kind, g.expr, g.comment, passed, why or ""))
    first_failure = check.failure(*env)
    logged = len(report.recompile_log)
    error = ""
    try:
        report = run(*after)
    except Exception as e:  # noqa: BLE001 -- reported, not hidden
        error = f"{type(e).__name__}: {e}"
    name = getattr(fn, "__name__", type(fn).__name__)
    return GuardReport(name, checks, first_failure, list(report.recompile_log[logged:]),
                       report.graph_count, error)


class GuardInspector:
    """A widget over :func:`inspect_guards`: pick a change, see which guard fails.

    ``changes`` maps a label to the changed arguments (``{"batch 8": (torch.randn(8, 3),),
    "float64": (x.double(),)}``). Each report is computed once, when first shown.
    """

    def __init__(self, fn: Callable, before: Any, changes: dict[str, Any] | Sequence[Any]):
        self.fn = fn
        self.before = before
        self.changes = dict(changes) if isinstance(changes, dict) else {"changed": changes}
        if not self.changes:
            raise ValueError("give at least one changed input")
        self.reports: dict[str, GuardReport] = {}
        self.selected = next(iter(self.changes))
        self._widget = None

    def report(self, label: str | None = None) -> GuardReport:
        label = label or self.selected
        if label not in self.reports:
            self.reports[label] = inspect_guards(self.fn, self.before, self.changes[label])
        return self.reports[label]

    def __str__(self) -> str:
        return "\n\n".join(f"== {label} ==\n{self.report(label)}" for label in self.changes)

    __repr__ = __str__

    def widget(self):
        if self._widget is not None:
            return self._widget
        import ipywidgets as widgets
        self.change_dropdown = widgets.Dropdown(options=list(self.changes), value=self.selected,
                                                description="change")
        self.report_html = widgets.HTML(self.report().html())
        self.change_dropdown.observe(self._on_change, names="value")
        self._widget = widgets.VBox([self.change_dropdown, self.report_html])
        return self._widget

    def _on_change(self, change) -> None:
        self.selected = change["new"]
        self.report_html.value = self.report().html()

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = self.widget()._repr_mimebundle_(include=include, exclude=exclude) or {}
        bundle["text/plain"] = self.report().text()
        return bundle
