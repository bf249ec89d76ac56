"""Command line for instructors and CI (see INSTRUCTORS.md).

    python -m tutorcompile.grading grade SUBMISSION.ipynb|FOLDER ... [--reference exercises]
                                   [--hidden DIR] [--cell-timeout S] [--csv F] [--json F]
                                   [--expect full|zero]
    python -m tutorcompile.grading verify-exercises [exercises]
    python -m tutorcompile.grading verify-pairs [exercises] [solutions]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .grade import find_reference, grade_notebook, write_reports
from .notebook import compare_pair, read_notebook


def _notebooks(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        found += sorted(p.glob("*.ipynb")) if p.is_dir() else [p]
    return found


def grade(args: argparse.Namespace) -> int:
    notebooks = _notebooks(args.submissions)
    if not notebooks:
        print("no notebooks to grade")
        return 1
    grades = []
    for nb in notebooks:
        hidden = args.hidden / f"{nb.stem}.py" if args.hidden else None
        g = grade_notebook(nb, find_reference(nb, args.reference),
                           hidden if hidden and hidden.exists() else None, args.cell_timeout)
        print(g.format(), flush=True)
        grades.append(g)
    write_reports(grades, args.csv, args.json)
    earned, possible = sum(g.earned for g in grades), sum(g.possible for g in grades)
    print(f"total: {earned:g}/{possible:g} points over {len(grades)} notebooks")
    if args.expect == "full":
        wrong = [g.notebook for g in grades if g.error or g.earned != g.possible
                 or g.possible == 0]
        if wrong:
            print(f"expected full marks, but not for: {', '.join(wrong)}")
            return 1
    if args.expect == "zero":
        wrong = [g.notebook for g in grades if g.earned != 0 or g.possible == 0]
        if wrong:
            print(f"expected zero points, but not for: {', '.join(wrong)}")
            return 1
    return 0


def verify_exercises(folder: Path) -> int:
    """Each exercise as shipped must fail *every* check cell (a blank earns nothing)."""
    notebooks = sorted(folder.glob("*.ipynb"))
    if not notebooks:
        print(f"no exercise notebooks in {folder}/ yet: nothing to verify")
        return 0
    problems = 0
    for nb in notebooks:
        g = grade_notebook(nb)
        passing = [c for c in g.checks if c.passed]
        if not g.checks:
            print(f"FAIL {nb.name}: has no check cells (metadata tutorcompile.role == 'check')")
        elif g.error:
            print(f"FAIL {nb.name}: {g.error}")
        elif passing:
            tasks = ", ".join(sorted({c.task for c in passing}))
            print(f"FAIL {nb.name}: check cells pass on the unfilled stubs (tasks {tasks})")
        else:
            print(f"ok   {nb.name}: all {len(g.checks)} check cells of {len(g.tasks())} tasks "
                  "fail as shipped")
            continue
        problems += 1
    print(f"{len(notebooks) - problems} passed, {problems} failed")
    return 1 if problems else 0


def verify_pairs(exercises: Path, solutions: Path) -> int:
    """Each solution must be its exercise with only the solution regions filled in."""
    names = sorted({p.name for p in exercises.glob("*.ipynb")} |
                   {p.name for p in solutions.glob("*.ipynb")})
    problems = 0
    for name in names:
        ex, sol = exercises / name, solutions / name
        if not ex.exists() or not sol.exists():
            missing = ex if not ex.exists() else sol
            print(f"FAIL {name}: {missing} does not exist")
            problems += 1
            continue
        diffs = compare_pair(read_notebook(ex), read_notebook(sol))
        if diffs:
            print(f"FAIL {name}: " + "; ".join(diffs))
            problems += 1
        else:
            print(f"ok   {name}: the solution differs only inside solution regions")
    if not names:
        print("no exercise/solution pairs yet: nothing to verify")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tutorcompile.grading",
                                     description="grade tutorcompile exercise notebooks")
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade", help="grade submissions (files or folders of notebooks)")
    g.add_argument("submissions", nargs="+", type=Path)
    g.add_argument("--reference", type=Path, default=None,
                   help="the handed-out exercise notebook, or a folder of them: its check "
                        "cells replace the submission's")
    g.add_argument("--hidden", type=Path, default=None,
                   help="folder of hidden checks, <notebook name>.py each")
    g.add_argument("--cell-timeout", type=int, default=120, help="seconds per cell")
    g.add_argument("--csv", type=Path, default=None)
    g.add_argument("--json", type=Path, default=None)
    g.add_argument("--expect", choices=["full", "zero"], default=None,
                   help="exit 1 unless every notebook scores full marks / zero (for CI)")
    v = sub.add_parser("verify-exercises",
                       help="check that exercise notebooks as shipped fail every task")
    v.add_argument("folder", nargs="?", default="exercises", type=Path)
    p = sub.add_parser("verify-pairs",
                       help="check that each solution is its exercise with regions filled in")
    p.add_argument("exercises", nargs="?", default="exercises", type=Path)
    p.add_argument("solutions", nargs="?", default="solutions", type=Path)
    args = parser.parse_args(argv)
    if args.command == "grade":
        return grade(args)
    if args.command == "verify-exercises":
        return verify_exercises(args.folder)
    return verify_pairs(args.exercises, args.solutions)


if __name__ == "__main__":
    sys.exit(main())
