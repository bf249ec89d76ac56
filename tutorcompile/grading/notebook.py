"""Exercise notebooks as data: cell roles, solution regions, pairs, and hidden checks.

* :func:`cell_roles` reads the ``tutorcompile`` metadata of every code cell.
* :func:`split_regions` cuts a task cell into the code around its
  ``### BEGIN SOLUTION`` / ``### END SOLUTION`` regions and the regions themselves;
  :func:`compare_pair` uses it to check that a solution notebook is its exercise with only
  the regions filled in -- so the two can never drift apart.
* :func:`exercise_id` is the id an exercise notebook carries in its metadata
  (``tutorcompile.exercise``, e.g. ``"ex01_autograd"``): submissions are matched to their
  exercise and hidden checks by it, never by file name (learners rename files).
* :func:`read_hidden_checks` reads an instructor's hidden checks: a Python file with cells
  ``# %% check t1 points=2`` that are injected into submissions at grading time only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import nbformat

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


@dataclass(frozen=True)
class CellRole:
    code_index: int      # index among code cells
    cell_index: int      # index among all cells
    role: str            # "task", "check" or "" for ordinary cells
    task: str | None
    points: float


def read_notebook(path: str | Path) -> nbformat.NotebookNode:
    """Read and validate a notebook; raises ValueError with a readable reason if malformed."""
    import nbformat  # here, not at import time: see __main__.py on its start-up cost

    try:
        nb = nbformat.read(str(path), as_version=4)
        nbformat.validate(nb)
    except Exception as e:  # JSON errors, schema errors, unreadable files
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"{Path(path).name} is not a valid notebook: {reason}") from None
    return nb


def exercise_id(nb: nbformat.NotebookNode) -> str | None:
    """The exercise a notebook is (``metadata.tutorcompile.exercise``), whatever its file name."""
    value = nb.metadata.get("tutorcompile", {}).get("exercise")
    return value if isinstance(value, str) and value else None


def roles_of(nb: nbformat.NotebookNode) -> list[CellRole]:
    roles, code_index = [], 0
    for cell_index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("tutorcompile", {})
        roles.append(CellRole(code_index, cell_index, meta.get("role", ""), meta.get("task"),
                              float(meta.get("points", 0))))
        code_index += 1
    return roles


def cell_roles(path: str | Path) -> list[CellRole]:
    """The role of every code cell, in order."""
    return roles_of(read_notebook(path))


def check_cells(path: str | Path) -> list[CellRole]:
    return [r for r in cell_roles(path) if r.role == "check"]


def split_regions(source: str) -> tuple[list[str], list[str]]:
    """(code outside regions, region contents): ``outside`` has one more item than ``regions``.

    Raises ValueError on an unclosed or nested region.
    """
    outside, regions, current, inside = [], [], [], False
    for line in source.splitlines(keepends=True):
        marker = line.strip()
        if marker == BEGIN:
            if inside:
                raise ValueError("nested '### BEGIN SOLUTION'")
            current.append(line)
            outside.append("".join(current))
            current, inside = [], True
        elif marker == END:
            if not inside:
                raise ValueError("'### END SOLUTION' without a BEGIN")
            regions.append("".join(current))
            current, inside = [line], False
        else:
            current.append(line)
    if inside:
        raise ValueError("'### BEGIN SOLUTION' is never closed")
    outside.append("".join(current))
    return outside, regions


def compare_pair(exercise: nbformat.NotebookNode, solution: nbformat.NotebookNode
                 ) -> list[str]:
    """Differences that make ``solution`` more than ``exercise`` with its regions filled in."""
    problems = []
    if exercise.metadata.get("tutorcompile") != solution.metadata.get("tutorcompile"):
        problems.append("notebook metadata tutorcompile (the exercise id) differs")
    if exercise_id(exercise) is None:
        problems.append("the exercise has no id (notebook metadata tutorcompile.exercise)")
    if len(exercise.cells) != len(solution.cells):
        return problems + [f"the exercise has {len(exercise.cells)} cells, the solution "
                f"{len(solution.cells)}"]
    for i, (ex, sol) in enumerate(zip(exercise.cells, solution.cells)):
        where = f"cell {i}"
        if ex.cell_type != sol.cell_type:
            problems.append(f"{where}: {ex.cell_type} in the exercise, {sol.cell_type} in the "
                            "solution")
            continue
        if ex.metadata.get("tutorcompile") != sol.metadata.get("tutorcompile"):
            problems.append(f"{where}: tutorcompile metadata (role/task/points) differs")
        try:
            ex_out, ex_regions = split_regions(ex.source)
            sol_out, sol_regions = split_regions(sol.source)
        except ValueError as e:
            problems.append(f"{where}: {e}")
            continue
        if ex_out != sol_out:
            problems.append(f"{where}: differs outside the solution regions")
        for region in ex_regions:
            if "raise NotImplementedError" not in region:
                problems.append(f"{where}: an exercise region does not raise "
                                "NotImplementedError (is the solution left in?)")
        if ex_regions and ex.metadata.get("tutorcompile", {}).get("role") != "task":
            problems.append(f"{where}: has solution regions but is not a task cell")
    return problems


@dataclass(frozen=True)
class HiddenCheck:
    task: str
    points: float
    source: str


_HIDDEN_HEADER = re.compile(r"^# %% check (\S+)(?: points=([0-9.]+))?\s*$")


def read_hidden_checks(path: str | Path) -> list[HiddenCheck]:
    """Cells of a hidden-checks file: ``# %% check <task> points=<n>`` then the code."""
    checks: list[HiddenCheck] = []
    header = None
    body: list[str] = []
    for line in Path(path).read_text().splitlines(keepends=True):
        match = _HIDDEN_HEADER.match(line.rstrip("\n"))
        if match:
            if header:
                checks.append(HiddenCheck(header[0], header[1], "".join(body).strip()))
            header, body = (match.group(1), float(match.group(2) or 1)), []
        elif header:
            body.append(line)
    if header:
        checks.append(HiddenCheck(header[0], header[1], "".join(body).strip()))
    return checks
