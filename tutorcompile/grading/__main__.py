"""Command line for learners, instructors and CI (see README.md and INSTRUCTORS.md).

    python -m tutorcompile.grading grade SUBMISSION.ipynb|FOLDER ... [--reference EXERCISES]
            [--hidden DIR] [--jobs N] [--cell-timeout S] [--memory-limit 2G] [--sandbox]
            [--shard K/N] [--results DIR] [--csv F] [--json F] [--expect full|zero]
    python -m tutorcompile.grading merge A.json B.json ... [--csv F] [--json F]
    python -m tutorcompile.grading verify-exercises [exercises]
    python -m tutorcompile.grading verify-pairs [exercises] [solutions]

A learner self-grades with ``grade exercises/ex01_autograd.ipynb``: the shipped exercise is
found by the id in the notebook's metadata and its checks are the ones that run.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# nbformat validates with jsonschema, which imports its optional IRI format checker
# (rfc3987_syntax) when installed -- JupyterLab installs it -- and that builds a grammar on
# import: 1.2 s of every grading run's start, spent before any submission runs, which is what
# kept --jobs 2 from halving a class's time. The notebook schema has no IRI field; this
# process (the command line's own) goes without the checker.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

from .classroom import (  # noqa: E402
    ConfigurationError,
    Exercises,
    Progress,
    grade_class,
    merge_reports,
    shard_of,
    write_reports,
)
from .grade import NotebookGrade, grade_notebook  # noqa: E402
from .notebook import compare_pair, read_notebook  # noqa: E402
from .runner import available_sandbox, parse_size  # noqa: E402


def _notebooks(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        found += sorted(p.glob("*.ipynb")) if p.is_dir() else [p]
    return found


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _summary(grades: list[NotebookGrade], expect: str | None) -> int:
    for g in grades:
        print(g.format())
    earned, possible = sum(g.earned for g in grades), sum(g.possible for g in grades)
    print(f"total: {earned:g}/{possible:g} points over {_plural(len(grades), 'notebook')}")
    isolation = sorted({g.isolation for g in grades if g.isolation})
    if isolation:
        print(f"isolation: {'; '.join(isolation)}")
    flagged = [g.notebook for g in grades if g.tampered]
    if flagged:
        print(f"look at (tampering reported): {', '.join(flagged)}")
    if expect == "full":
        wrong = [g.notebook for g in grades if g.error or g.earned != g.possible
                 or g.possible == 0]
        if wrong:
            print(f"expected full marks, but not for: {', '.join(wrong)}")
            return 1
    if expect == "zero":
        wrong = [g.notebook for g in grades if g.earned != 0 or g.possible == 0]
        if wrong:
            print(f"expected zero points, but not for: {', '.join(wrong)}")
            return 1
    return 0


def grade(args: argparse.Namespace) -> int:
    notebooks = _notebooks(args.submissions)
    if args.shard:
        k, n = args.shard
        notebooks = [nb for nb in notebooks if shard_of(nb, n) == k]
    if not notebooks:
        print("no notebooks to grade")
        return 0 if args.shard else 1
    sandbox = None
    if args.sandbox:
        sandbox = available_sandbox()
        if sandbox is None:
            print("--sandbox: no working sandbox here (install bubblewrap: apt-get install "
                  "bubblewrap)", file=sys.stderr)
            return 2
    try:
        exercises = Exercises.find(args.reference, args.hidden)
        grades = grade_class(notebooks, exercises, jobs=args.jobs,
                             cell_timeout=args.cell_timeout,
                             memory_limit=parse_size(args.memory_limit), sandbox=sandbox,
                             results=args.results,
                             progress=Progress(len(notebooks)) if len(notebooks) > 1 else None)
    except ConfigurationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write_reports(grades, args.csv, args.json)
    return _summary(grades, args.expect)


def merge(args: argparse.Namespace) -> int:
    try:
        grades = merge_reports(args.reports)
    except ConfigurationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write_reports(grades, args.csv, args.json)
    return _summary(grades, None)


def verify_exercises(folder: Path) -> int:
    """Each exercise as shipped must fail *every* check cell (a blank earns nothing)."""
    notebooks = sorted(folder.glob("*.ipynb"))
    if not notebooks:
        print(f"no exercise notebooks in {folder}/ yet: nothing to verify")
        return 0
    problems = 0
    with ThreadPoolExecutor(max_workers=len(os.sched_getaffinity(0))) as pool:
        grades = list(pool.map(lambda nb: grade_notebook(nb, nb), notebooks))
    for nb, g in zip(notebooks, grades):
        passing = [c for c in g.checks if c.passed]
        if not g.checks:
            print(f"FAIL {nb.name}: has no check cells (metadata tutorcompile.role == 'check')")
        elif g.error:
            print(f"FAIL {nb.name}: {g.error}")
        elif passing:
            tasks = ", ".join(sorted({str(c.task) for c in passing}))
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


def _shard(text: str) -> tuple[int, int]:
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard wants K/N, e.g. 1/4, not {text}") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"--shard {text}: K must be between 1 and N")
    return k, n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tutorcompile.grading",
                                     description="grade tutorcompile exercise notebooks")
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade", help="grade submissions (files or folders of notebooks)")
    g.add_argument("submissions", nargs="+", type=Path)
    g.add_argument("--reference", type=Path, default=None,
                   help="the handed-out exercise notebook, or a folder of them (default: "
                        "exercises/ here or in the repository); matched by exercise id")
    g.add_argument("--hidden", type=Path, default=None,
                   help="folder of hidden checks, <exercise id>.py each")
    g.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)),
                   help="submissions graded at a time (default: the machine's cores)")
    g.add_argument("--cell-timeout", type=float, default=120, help="seconds per cell")
    g.add_argument("--memory-limit", default=None,
                   help="data memory per grading kernel, e.g. 2G (RLIMIT_DATA)")
    g.add_argument("--sandbox", action="store_true",
                   help="run each kernel in bubblewrap (read-only system, instructor folders "
                        "hidden, no network)")
    g.add_argument("--shard", type=_shard, default=None, metavar="K/N",
                   help="grade only the K-th of N stable parts (merge the reports after)")
    g.add_argument("--results", type=Path, default=None,
                   help="folder for each submission's grade as it finishes; a rerun reuses "
                        "unchanged ones (resume)")
    g.add_argument("--csv", type=Path, default=None)
    g.add_argument("--json", type=Path, default=None)
    g.add_argument("--expect", choices=["full", "zero"], default=None,
                   help="exit 1 unless every notebook scores full marks / zero (for CI)")
    m = sub.add_parser("merge", help="join the JSON reports of shards into one report")
    m.add_argument("reports", nargs="+", type=Path)
    m.add_argument("--csv", type=Path, default=None)
    m.add_argument("--json", type=Path, default=None)
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
    if args.command == "merge":
        return merge(args)
    if args.command == "verify-exercises":
        return verify_exercises(args.folder)
    return verify_pairs(args.exercises, args.solutions)


if __name__ == "__main__":
    sys.exit(main())
