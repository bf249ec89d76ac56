"""Grading submissions: points per task from check cells, decided where the submission cannot
reach.

A grade must be trustworthy, so the grader trusts nothing in the submission but its code:

* the **reference** (the exercise as handed out, found by the exercise id in the notebook's
  metadata, ``tutorcompile.exercise``) supplies every check cell and every "given" code cell
  (setup, helpers); a learner's edit to either is reported as tampering and the original runs.
  Learner cells -- the task cells and any cells the learner added -- run as written;
* **hidden checks** from the instructor (``<hidden dir>/<exercise id>.py``, see
  ``notebook.read_hidden_checks``) run right after each task's own checks; the learner never
  sees them, and the report says which ran;
* everything runs in a grading kernel of its own (``runner.py`` / ``worker.py``): a check earns
  its points only if it ran to its end and the interpreter was intact before and after it
  (comparison functions, hooks, transformers, builtins, ...); what the submission tampered
  with is reported by name;
* a cell that hangs fails after the per-cell time limit and later cells still run; a kernel
  that dies, or a notebook that is malformed, gets zero for what did not run and a readable
  reason.

Outputs are never compared, so what a learner prints never changes a grade.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .notebook import HiddenCheck, exercise_id, read_hidden_checks, read_notebook
from .runner import Cell, run_cells

if TYPE_CHECKING:  # pragma: no cover
    import nbformat


@dataclass
class CheckResult:
    task: str | None   # (None: a check cell that names no task)
    points: float
    passed: bool
    message: str = ""
    hidden: bool = False


@dataclass
class NotebookGrade:
    notebook: str
    exercise: str | None = None
    checks: list[CheckResult] = field(default_factory=list)
    error: str | None = None
    tampered: list[str] = field(default_factory=list)
    cell_errors: list[str] = field(default_factory=list)
    hidden_checks: str | None = None     # "hidden/ex01_autograd.py: 2 checks (t1, t2)"
    isolation: str = ""

    @property
    def possible(self) -> float:
        return sum(c.points for c in self.checks)

    @property
    def earned(self) -> float:
        return sum(c.points for c in self.checks if c.passed)

    def tasks(self) -> dict[str | None, dict]:
        """Per task: earned, possible, passed (all its checks passed), first failure."""
        table: dict[str | None, dict] = {}
        for c in self.checks:
            row = table.setdefault(c.task, {"earned": 0.0, "possible": 0.0, "passed": True,
                                            "message": ""})
            row["possible"] += c.points
            if c.passed:
                row["earned"] += c.points
            else:
                row["passed"] = False
                row["message"] = row["message"] or c.message
        return table

    def format(self) -> str:
        lines = [f"{self.notebook}: {self.earned:g}/{self.possible:g} points"]
        if self.error:
            lines.append(f"  ERROR  {self.error}")
        for task, row in self.tasks().items():
            status = "passed" if row["passed"] else "FAILED"
            detail = f"  {row['message']}" if row["message"] else ""
            lines.append(f"  {task:<6} {row['earned']:g}/{row['possible']:g}  {status}{detail}")
        if self.hidden_checks:
            ran = [c for c in self.checks if c.hidden]
            passed = sum(c.passed for c in ran)
            lines.append(f"  hidden checks: {self.hidden_checks}; {passed} of {len(ran)} passed")
        lines += [f"  tampered: {t}" for t in self.tampered]
        lines += [f"  note: {e}" for e in self.cell_errors]
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"notebook": self.notebook, "exercise": self.exercise, "earned": self.earned,
                "possible": self.possible, "error": self.error, "tampered": self.tampered,
                "notes": self.cell_errors, "hidden_checks": self.hidden_checks,
                "isolation": self.isolation, "tasks": self.tasks(),
                "checks": [asdict(c) for c in self.checks]}

    @classmethod
    def from_json(cls, data: dict) -> NotebookGrade:
        return cls(data["notebook"], data.get("exercise"),
                   [CheckResult(**c) for c in data["checks"]], data.get("error"),
                   list(data.get("tampered", [])), list(data.get("notes", [])),
                   data.get("hidden_checks"), data.get("isolation", ""))


def _meta(cell) -> dict:
    return cell.metadata.get("tutorcompile", {}) if cell.cell_type == "code" else {}


@dataclass
class _Planned:
    cell: Cell
    task: str | None = None
    points: float = 0.0
    hidden: bool = False
    is_check: bool = False


def plan(submission: nbformat.NotebookNode, reference: nbformat.NotebookNode,
         hidden: list[HiddenCheck]) -> tuple[list[_Planned], list[str]]:
    """The cells that actually run, in order, and what the learner changed that we undid.

    The submission's order is the skeleton (learners may add cells anywhere); its check and
    given cells are replaced by the reference's, matched by task (checks) and cell id or source
    (given cells); reference cells the learner deleted come back where the reference has them.
    """
    tampered: list[str] = []
    ref_cells = [c for c in reference.cells if c.cell_type == "code"]
    ref_pos = {id(c): i for i, c in enumerate(ref_cells)}
    checks: dict[str | None, list] = {}   # by task (None: a check cell without one)
    for c in ref_cells:
        if _meta(c).get("role") == "check":
            checks.setdefault(_meta(c).get("task"), []).append(c)
    given = [c for c in ref_cells if not _meta(c).get("role")]
    by_id = {c.get("id"): c for c in given if c.get("id")}
    used: set[int] = set()
    seen: dict[str | None, int] = {}
    out: list[tuple[float, _Planned]] = []     # (position in the reference, planned cell)
    position = -1.0
    code_index = -1
    for cell in submission.cells:
        if cell.cell_type != "code":
            continue
        code_index += 1
        meta = _meta(cell)
        role = meta.get("role")
        if role == "demo":
            continue                       # timings and plots: for the notebook, not a grade
        if role == "check":
            task = meta.get("task")
            k = seen[task] = seen.get(task, -1) + 1
            if task not in checks or k >= len(checks[task]):
                tampered.append(f"an extra check cell for task {task} was removed")
                continue
            original = checks[task][k]
            if cell.source.strip() != original.source.strip() or meta != _meta(original):
                tampered.append(f"check {k + 1} of task {task} was edited; the original ran")
            used.add(id(original))
            position = ref_pos[id(original)]
            out.append((position, _check(original, f"check {k + 1} of task {task}")))
            continue
        if not role:
            original = by_id.get(cell.get("id"))
            if original is None or id(original) in used:
                original = next((g for g in given if id(g) not in used
                                 and g.source.strip() == cell.source.strip()), None)
            if original is not None:
                if cell.source.strip() != original.source.strip():
                    tampered.append(f"given cell {ref_pos[id(original)]} was edited; the "
                                    "original ran")
                used.add(id(original))
                position = ref_pos[id(original)]
                out.append((position, _Planned(Cell("given", original.source,
                                                    f"given cell {position}"))))
                continue
        label = f"cell {code_index}" + (f" (task {meta.get('task')})" if role == "task" else "")
        position += 1e-3
        out.append((position, _Planned(Cell("learner", cell.source, label), meta.get("task"))))
    for c in ref_cells:  # what the learner deleted comes back, in the reference's place
        if id(c) in used or _meta(c).get("role") in ("task", "demo"):
            continue
        meta = _meta(c)
        if meta.get("role") == "check":
            task = meta["task"]
            k = checks[task].index(c)
            tampered.append(f"check {k + 1} of task {task} was missing; the original ran")
            item = _check(c, f"check {k + 1} of task {task}")
        else:
            tampered.append(f"given cell {ref_pos[id(c)]} was missing; the original ran")
            item = _Planned(Cell("given", c.source, f"given cell {ref_pos[id(c)]}"))
        at = next((i for i, (p, _) in enumerate(out) if p > ref_pos[id(c)]), len(out))
        out.insert(at, (ref_pos[id(c)], item))
    planned = [p for _, p in out]
    for n, check in enumerate(hidden):
        at = max((i for i, p in enumerate(planned) if p.task == check.task), default=-1)
        planned.insert(at + 1, _Planned(
            Cell("check", check.source, f"hidden check {n + 1} of task {check.task}"),
            check.task, check.points, True, True))
    return planned, tampered


def _check(cell, label: str) -> _Planned:
    meta = _meta(cell)
    return _Planned(Cell("check", cell.source, label), meta.get("task"),
                    float(meta.get("points", 0)), False, True)


def grade_notebook(path: str | Path, reference: str | Path | None = None,
                   hidden: str | Path | None = None, cell_timeout: float = 120,
                   memory_limit: int | None = None, sandbox: str | None = None,
                   forbidden: Sequence[Path] = (), answers: Sequence[Path] | None = None
                   ) -> NotebookGrade:
    """Grade one submission (see the module docstring for the rules).

    Without ``reference`` the submission is its own reference (for checking the shipped
    exercises themselves): its check cells are trusted, which the report says.
    ``answers`` are the learner's notebooks of earlier exercises that a later one builds on
    (``answers.py``); by default, :func:`earlier_notebooks` of the submission's folder.
    """
    path = Path(path)
    grade = NotebookGrade(path.name)
    ref_nb = read_notebook(reference) if reference else None
    hidden_checks = read_hidden_checks(hidden) if hidden else []
    if hidden:
        tasks = sorted({h.task for h in hidden_checks})
        grade.hidden_checks = f"{Path(hidden).name}: {len(hidden_checks)} checks " \
                              f"({', '.join(tasks)})"
    try:
        submission = read_notebook(path)
    except ValueError as e:
        grade.error = str(e)
        source = ref_nb.cells if ref_nb is not None else []
        grade.checks = [CheckResult(_meta(c)["task"], float(_meta(c).get("points", 0)),
                                    False, "not run")
                        for c in source if _meta(c).get("role") == "check"]
        grade.checks += [CheckResult(h.task, h.points, False, "not run", True)
                         for h in hidden_checks]
        grade.exercise = exercise_id(ref_nb) if ref_nb is not None else None
        return grade
    grade.exercise = exercise_id(submission)
    if ref_nb is None:
        ref_nb = copy.deepcopy(submission)
        grade.cell_errors.append("no reference exercise: the submission's own checks ran")
    elif grade.exercise and exercise_id(ref_nb) and grade.exercise != exercise_id(ref_nb):
        grade.tampered.append(f"the notebook says it is exercise {grade.exercise}; it was "
                              f"graded as {exercise_id(ref_nb)}")
    grade.exercise = exercise_id(ref_nb) or grade.exercise
    planned, undone = plan(submission, ref_nb, hidden_checks)
    grade.tampered += undone
    if answers is None:
        answers = earlier_notebooks(path)
    outcome = run_cells([p.cell for p in planned], cell_timeout, memory_limit, sandbox,
                        list(forbidden), answers)
    grade.error, grade.isolation = outcome.error, outcome.isolation
    if outcome.forged:
        grade.tampered.append(f"wrote {outcome.forged} forged result line(s) to the grader")
    problems: dict[str, str] = {}
    for index, p in enumerate(planned):
        result = outcome.results.get(index)
        if result is not None:
            grade.tampered += [f"{p.cell.label}: {w} (denied)" for w in result.denied]
            for w in result.problems:
                problems.setdefault(w, p.cell.label)
            if result.restored:
                grade.tampered.append(f"before {p.cell.label}: {', '.join(result.restored)} "
                                      "rebound by the submission; the exercise's value was "
                                      "restored")
        if p.is_check:
            grade.checks.append(CheckResult(p.task, p.points, bool(result and result.passed),
                                            result.message if result else "not run",
                                            p.hidden))
        elif result is not None and not result.passed:
            grade.cell_errors.append(f"{p.cell.label} failed: {result.message}")
    grade.tampered += [f"{w} (found at {label}; checks from then on earn nothing)"
                       for w, label in problems.items()]
    grade.tampered = list(dict.fromkeys(grade.tampered))
    return grade


def earlier_notebooks(submission: Path) -> list[Path]:
    """The notebooks beside ``submission`` that are the same learner's other exercises: one per
    exercise id, other than the submission's own. A folder holding several notebooks of one
    exercise (a whole class's, say) gives none of that exercise: whose would it be?"""
    by_id: dict[str, list[Path]] = {}
    for other in sorted(Path(submission).parent.glob("*.ipynb")):
        ident = _exercise_of(other)
        if ident:
            by_id.setdefault(ident, []).append(other)
    own = _exercise_of(Path(submission))
    return [paths[0] for ident, paths in by_id.items() if len(paths) == 1 and ident != own]


def _exercise_of(path: Path) -> str | None:
    """The exercise id of the notebook at ``path`` (None if unreadable), read once per version
    of the file: a class folder is scanned once for every submission in it."""
    try:
        return _exercise_of_version(str(path), path.stat().st_mtime_ns)
    except OSError:
        return None


@functools.lru_cache(maxsize=4096)
def _exercise_of_version(path: str, mtime_ns: int) -> str | None:
    try:
        return exercise_id(read_notebook(path))
    except ValueError:
        return None
