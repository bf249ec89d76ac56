"""Grading submissions: points per task from check cells run under nbval.

A grade must be trustworthy, so the grader does not trust the submission's own checks:

* with a **reference** (the exercise notebook as handed out), every check cell is replaced by
  the reference's version, and any edit the learner made to a check cell is reported as
  tampering -- the original check is what runs;
* **hidden checks** from the instructor (see ``notebook.read_hidden_checks``) are injected
  after each task's last cell, so they run against the learner's code but never appear in the
  student copy;
* a check earns its points iff its cell runs without raising; a cell that hangs fails after
  the per-cell time limit, and later cells still run;
* a malformed notebook, or one that cannot run at all, gets zero and a readable reason.

Outputs are not compared (nbval's lax mode), so what a learner prints never changes a grade.
"""

from __future__ import annotations

import copy
import csv
import json
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from .notebook import HiddenCheck, read_hidden_checks, read_notebook, roles_of
from .runner import NotebookRunError, run_nbval


@dataclass
class CheckResult:
    task: str
    points: float
    passed: bool
    message: str = ""
    hidden: bool = False


@dataclass
class NotebookGrade:
    notebook: str
    checks: list[CheckResult] = field(default_factory=list)
    error: str | None = None
    tampered: list[str] = field(default_factory=list)
    cell_errors: list[str] = field(default_factory=list)

    @property
    def possible(self) -> float:
        return sum(c.points for c in self.checks)

    @property
    def earned(self) -> float:
        return sum(c.points for c in self.checks if c.passed)

    def tasks(self) -> dict[str, dict]:
        """Per task: earned, possible, passed (all its checks passed), first failure."""
        table: dict[str, dict] = {}
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
        lines += [f"  tampered: {t}" for t in self.tampered]
        lines += [f"  note: {e}" for e in self.cell_errors]
        return "\n".join(lines)


def _reference_checks(reference: nbformat.NotebookNode) -> dict[str, list]:
    checks: dict[str, list] = {}
    for cell in reference.cells:
        meta = cell.metadata.get("tutorcompile", {})
        if cell.cell_type == "code" and meta.get("role") == "check":
            checks.setdefault(meta.get("task"), []).append(cell)
    return checks


def _task_of(cell) -> str | None:
    return cell.metadata.get("tutorcompile", {}).get("task")


def prepare(submission: nbformat.NotebookNode, reference: nbformat.NotebookNode | None,
            hidden: list[HiddenCheck]) -> tuple[nbformat.NotebookNode, list[str]]:
    """The notebook that is actually run: original check cells, hidden checks injected."""
    nb = copy.deepcopy(submission)
    tampered: list[str] = []
    if reference is not None:
        originals = _reference_checks(reference)
        seen: dict[str, int] = {}
        cells = []
        for cell in nb.cells:
            meta = cell.metadata.get("tutorcompile", {})
            if cell.cell_type != "code" or meta.get("role") != "check":
                cells.append(cell)
                continue
            task = meta.get("task")
            k = seen[task] = seen.get(task, -1) + 1
            if task not in originals or k >= len(originals[task]):
                tampered.append(f"an extra check cell for task {task} was removed")
                continue
            original = originals[task][k]
            if cell.source.strip() != original.source.strip() or meta != \
                    original.metadata.get("tutorcompile"):
                tampered.append(f"check {k + 1} of task {task} was edited; the original ran")
            cells.append(copy.deepcopy(original))
        for task, checks in originals.items():  # deleted checks come back
            for k in range(seen.get(task, -1) + 1, len(checks)):
                tampered.append(f"check {k + 1} of task {task} was missing; the original ran")
                at = max((i for i, c in enumerate(cells) if _task_of(c) == task),
                         default=len(cells) - 1)
                cells.insert(at + 1, copy.deepcopy(checks[k]))
        nb.cells = cells
    for check in hidden:
        at = max((i for i, c in enumerate(nb.cells) if _task_of(c) == check.task),
                 default=len(nb.cells) - 1)
        nb.cells.insert(at + 1, nbformat.v4.new_code_cell(
            check.source, metadata={"tutorcompile": {"role": "check", "task": check.task,
                                                     "points": check.points,
                                                     "hidden": True}}))
    for cell in nb.cells:  # graded fresh: stored outputs play no part
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb, tampered


def grade_notebook(path: str | Path, reference: str | Path | None = None,
                   hidden: str | Path | None = None, cell_timeout: int = 120) -> NotebookGrade:
    """Grade one submission (see the module docstring for the rules)."""
    path = Path(path)
    grade = NotebookGrade(path.name)
    ref_nb = read_notebook(reference) if reference else None
    hidden_checks = read_hidden_checks(hidden) if hidden else []
    try:
        submission = read_notebook(path)
    except ValueError as e:
        grade.error = str(e)
        source = ref_nb.cells if ref_nb is not None else []
        grade.checks = [CheckResult(_task_of(c), float(c.metadata["tutorcompile"]
                                                         .get("points", 0)), False, "not run")
                        for c in source
                        if c.metadata.get("tutorcompile", {}).get("role") == "check"]
        grade.checks += [CheckResult(h.task, h.points, False, "not run", True)
                         for h in hidden_checks]
        return grade

    graded, grade.tampered = prepare(submission, ref_nb, hidden_checks)
    roles = roles_of(graded)
    with tempfile.TemporaryDirectory() as tmp:
        run_path = Path(tmp) / path.name
        nbformat.write(graded, str(run_path))
        try:
            results = run_nbval(run_path, cell_timeout=cell_timeout,
                                run_timeout=cell_timeout * (len(roles) + 2) + 60)
        except NotebookRunError as e:
            grade.error, results = str(e), {}

    for role in roles:
        result = results.get(role.code_index)
        if role.role == "check":
            cell = graded.cells[role.cell_index]
            grade.checks.append(CheckResult(
                role.task, role.points, bool(result and result.passed),
                (result.message if result else "not run"),
                bool(cell.metadata["tutorcompile"].get("hidden"))))
        elif result is not None and not result.passed:
            what = f"task {role.task} cell" if role.role == "task" else "cell"
            grade.cell_errors.append(f"{what} {role.code_index} failed: {result.message}")
    return grade


def find_reference(submission: Path, reference: Path | None) -> Path | None:
    """``reference`` may be a notebook or a folder holding one of the submission's name."""
    if reference is None:
        return None
    if reference.is_dir():
        candidate = reference / submission.name
        return candidate if candidate.exists() else None
    return reference


def write_reports(grades: list[NotebookGrade], csv_path: Path | None,
                  json_path: Path | None) -> None:
    if csv_path:
        with open(csv_path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["notebook", "task", "earned", "possible", "passed", "message"])
            for g in grades:
                for task, row in g.tasks().items():
                    writer.writerow([g.notebook, task, row["earned"], row["possible"],
                                     row["passed"], row["message"]])
                if g.error:
                    writer.writerow([g.notebook, "", 0, g.possible, False, g.error])
    if json_path:
        payload = [{"notebook": g.notebook, "earned": g.earned, "possible": g.possible,
                    "error": g.error, "tampered": g.tampered, "tasks": g.tasks(),
                    "checks": [asdict(c) for c in g.checks]} for g in grades]
        json_path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
