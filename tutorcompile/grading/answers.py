"""The learner's own compiler: answers carried from earlier exercises into later ones.

The course's title is a promise -- *learn how torch.compile works by building it* -- so a
later exercise builds on what the learner wrote before: the capstone's backend runs the
learner's VJP rules (ex01), CSE pass (ex02), partitioner (ex04) and index arithmetic (ex05).

:func:`earlier` finds the learner's notebook of an earlier exercise by its exercise id (never
by file name: learners rename files), runs its code cells in a namespace of their own -- the
given cells, the task cells and the task's own check cells, in order, up to the last check of
a task that is asked for -- and hands back the names asked for. A name is the learner's only
if the task cell that defines it ran and every check cell of that task passed; otherwise (no
notebook, the task not done, its check failing) the **reference implementation** from the
library is used instead, and one line says which and why, so a learner is never stuck behind
an earlier exercise and always knows whose code runs.

Where the notebooks are looked for: the folder given, else ``$TUTORCOMPILE_ANSWERS``, else the
current folder (Jupyter runs a notebook in its own folder, so ``exercises/``).
``TUTORCOMPILE_ANSWERS=reference`` uses the references throughout. The grader copies a
learner's other notebooks into the grading kernel's scratch folder and points the variable
there (``grade.py``), so a graded capstone uses the same answers the learner saw.

The learner's cells are compiled with file names that start ``<ipython-input-``, the prefix
IPython gives cell code: the grading kernel's audit hook treats such code as the submission's
own, with the same limits as the learner's cells (``worker.py``).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

ENV = "TUTORCOMPILE_ANSWERS"

# (exercise, name) -> "module:attribute" of the library's reference implementation, with the
# same contract as the task that defines the name.
REFERENCES: dict[tuple[str, str], str] = {
    ("ex01_autograd", "mul_vjp"): "tutorcompile.grading.references:mul_vjp",
    ("ex01_autograd", "sigmoid_vjp"): "tutorcompile.grading.references:sigmoid_vjp",
    ("ex02_fx", "cse_backend"): "tutorcompile.grading.references:cse_backend",
    ("ex04_aot", "matmul_only_partition"):
        "tutorcompile.grading.references:matmul_only_partition",
    ("ex05_fusion", "index_expr"): "tutorcompile.grading.references:index_expr",
}


@dataclass
class Answer:
    """Where one name came from: ``mine`` is True for the learner's own code."""
    exercise: str
    name: str
    value: object
    mine: bool
    why: str            # "t3's check passed" / "t3 raised NotImplementedError: ..."

    def line(self) -> str:
        whose = "yours" if self.mine else "the reference"
        return f"{self.exercise} {self.name}: {whose} ({self.why})"


def _read(path: Path) -> dict | None:
    """A notebook as plain JSON (None if it is not one). Not nbformat: its schema validation
    imports modules that install import hooks, which the grading kernel would take for
    tampering by the submission; the grader has validated the notebooks already."""
    try:
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
        cells = [dict(c, source="".join(c.get("source", ""))) for c in nb["cells"]]
        return {"metadata": nb.get("metadata", {}), "cells": cells}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def _exercise_id(nb: dict | None) -> str | None:
    meta = nb["metadata"].get("tutorcompile", {}) if nb else {}
    return meta.get("exercise") if isinstance(meta, dict) else None


def _role(cell: dict) -> dict:
    meta = cell.get("metadata", {}).get("tutorcompile", {})
    return meta if isinstance(meta, dict) else {}


def find_notebook(exercise: str, folder: Path) -> tuple[Path | None, str]:
    """The one notebook in ``folder`` that is ``exercise`` (by its metadata), or None and why."""
    if not folder.is_dir():
        return None, f"no folder {folder}"
    found = []
    for path in sorted(folder.glob("*.ipynb")):
        if _exercise_id(_read(path)) == exercise:
            found.append(path)
    if not found:
        return None, f"no notebook of {exercise} in {folder}"
    if len(found) > 1:
        canonical = [p for p in found if p.stem == exercise]
        if len(canonical) != 1:
            names = ", ".join(p.name for p in found)
            return None, f"{len(found)} notebooks are {exercise} ({names}): which is yours?"
        found = canonical
    return found[0], ""


def _defined_names(source: str) -> set[str]:
    """Top-level names a cell binds with def, class or an assignment."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _cell_code(source: str) -> str:
    """Cell source as Python: IPython's transforms turn magics into calls when IPython is
    there (it is, in Jupyter and in the grading kernel; the library does not need it)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:                                      # pragma: no cover
        return source
    return TransformerManager().transform_cell(source)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:160]}" if text else type(e).__name__


def run_tasks(path: Path, names: list[str]) -> dict[str, tuple[object | None, str]]:
    """Run ``path``'s code cells up to the last check of the tasks defining ``names``;
    per name, (its value if its task passed else None, why)."""
    nb = _read(path)
    exercise = _exercise_id(nb) or path.stem
    cells = [c for c in nb["cells"] if c.get("cell_type") == "code"] if nb else []
    task_of: dict[str, str | None] = {}
    for cell in cells:
        if _role(cell).get("role") == "task":
            for name in _defined_names(cell["source"]):
                task_of.setdefault(name, _role(cell).get("task"))
    wanted = {task_of[n] for n in names if n in task_of}
    last = max((i for i, c in enumerate(cells) if _role(c).get("task") in wanted), default=-1)
    namespace: dict = {"__name__": f"__{exercise}__", "__builtins__": __builtins__}
    failed: dict[str | None, str] = {}   # task -> the first failure of its task or checks
    ran: set[str | None] = set()
    sink = io.StringIO()
    for index, cell in enumerate(cells[:last + 1]):
        meta = _role(cell)
        task = meta.get("task")
        if meta.get("role") == "demo":
            continue                            # timings and plots: nothing a task needs
        try:
            # the prefix IPython gives cell code: the grading kernel treats it as learner code
            code = compile(_cell_code(cell["source"]), f"<ipython-input-{exercise}-{index}>",
                           "exec")
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                    _quiet_display():
                exec(code, namespace)
            if task in wanted:
                ran.add(task)
        except Exception as e:  # noqa: BLE001 -- a learner's cell may raise anything
            if task in wanted and task not in failed:
                role = "its check" if meta.get("role") == "check" else "the task cell"
                failed[task] = (f"{task} is not done yet" if isinstance(e, NotImplementedError)
                                else f"{task}: {role} raised {_first_line(e)}")
    result: dict[str, tuple[object | None, str]] = {}
    for name in names:
        task = task_of.get(name)
        if task is None:
            result[name] = (None, f"no task in {path.name} defines {name}")
        elif task in failed:
            result[name] = (None, failed[task])
        elif task not in ran or name not in namespace:
            result[name] = (None, f"{task} did not define {name}")
        else:
            result[name] = (namespace[name], f"{path.name} {task}, its checks passed")
    return result


@contextlib.contextmanager
def _quiet_display():
    """Rich output (``display(...)``, plots) of the earlier notebook's cells goes nowhere."""
    try:
        from IPython.utils.capture import capture_output
    except ImportError:                                      # pragma: no cover
        yield
        return
    with capture_output(display=True):
        yield


def reference(exercise: str, name: str) -> object:
    """The library's implementation of ``name`` with the contract of ``exercise``'s task."""
    try:
        module, attr = REFERENCES[(exercise, name)].split(":")
    except KeyError:
        raise KeyError(f"{exercise} has no reference for {name!r}; known: "
                       f"{sorted(n for e, n in REFERENCES if e == exercise)}") from None
    return getattr(importlib.import_module(module), attr)


def earlier(wanted: dict[str, list[str]], folder: str | Path | None = None,
            quiet: bool = False) -> SimpleNamespace:
    """The learner's answers to earlier exercises, by name, each falling back to the reference.

    ``wanted`` maps an exercise id to the names to take from it, e.g.
    ``{"ex04_aot": ["matmul_only_partition"]}``. Returns a namespace of those names, with
    ``answers`` (a list of :class:`Answer`) saying where each came from; prints one line per
    name unless ``quiet``.
    """
    for exercise, names in wanted.items():     # a typo fails at once, not after running cells
        for name in names:
            reference(exercise, name)
    where = folder if folder is not None else os.environ.get(ENV) or os.getcwd()
    answers = []
    for exercise, names in wanted.items():
        results: dict[str, tuple[object | None, str]]
        if str(where) == "reference":
            results = {n: (None, f"{ENV}=reference") for n in names}
        else:
            path, why = find_notebook(exercise, Path(where))
            results = run_tasks(path, list(names)) if path else {n: (None, why) for n in names}
        for name in names:
            value, why = results[name]
            mine = value is not None
            answers.append(Answer(exercise, name, value if mine else reference(exercise, name),
                                  mine, why))
    if not quiet:
        for a in answers:
            print(a.line())
    return SimpleNamespace(**{a.name: a.value for a in answers}, answers=answers)
