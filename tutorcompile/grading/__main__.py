"""Command line: ``python -m tutorcompile.grading verify-exercises [DIR]``.

``verify-exercises`` runs every exercise notebook as shipped and checks that *each* task's
check cells fail -- a blank exercise must never earn a point.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .notebook import check_cells
from .runner import run_nbval


def verify_exercises(folder: Path) -> int:
    notebooks = sorted(folder.glob("*.ipynb"))
    if not notebooks:
        print(f"no exercise notebooks in {folder}/ yet: nothing to verify")
        return 0
    problems = 0
    for nb in notebooks:
        checks = check_cells(nb)
        if not checks:
            print(f"FAIL {nb.name}: has no check cells (metadata tutorcompile.role == 'check')")
            problems += 1
            continue
        results = run_nbval(nb)
        passing = [c for c in checks if results.get(c.code_index) is None
                   or results[c.code_index].passed]
        tasks = sorted({c.task for c in checks})
        if passing:
            cells = ", ".join(f"cell {c.code_index} (task {c.task})" for c in passing)
            print(f"FAIL {nb.name}: check cells pass on the unfilled stubs: {cells}")
            problems += 1
        else:
            print(f"ok   {nb.name}: all {len(checks)} check cells of {len(tasks)} tasks fail "
                  "as shipped")
    print(f"{len(notebooks) - problems} passed, {problems} failed")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tutorcompile.grading")
    sub = parser.add_subparsers(dest="command", required=True)
    verify = sub.add_parser("verify-exercises",
                            help="check that exercise notebooks as shipped fail every task")
    verify.add_argument("folder", nargs="?", default="exercises", type=Path)
    args = parser.parse_args(argv)
    if args.command == "verify-exercises":
        return verify_exercises(args.folder)
    return 2


if __name__ == "__main__":
    sys.exit(main())
