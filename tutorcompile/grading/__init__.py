"""Grading exercise notebooks with nbval -- trustworthy enough for a classroom.

An exercise notebook is a lesson with tasks. Its cells carry metadata under ``tutorcompile``:

* a **task cell** (``{"role": "task", "task": "t1"}``) holds code the learner completes,
  between ``### BEGIN SOLUTION`` and ``### END SOLUTION``; as shipped the region is
  ``raise NotImplementedError(...)``;
* a **check cell** (``{"role": "check", "task": "t1", "points": 2}``) asserts the learner's
  work against PyTorch and prints a short, deterministic line when it passes.

The solution notebook is the same notebook with the regions filled in (``verify-pairs``
checks it). Grading runs a notebook under ``pytest --nbval-lax``: a check cell earns its
points iff it raises nothing. See ``grade.py`` for how tampering, hidden checks, hangs and
malformed notebooks are handled, and INSTRUCTORS.md for the workflow.
"""

from .grade import CheckResult, NotebookGrade, grade_notebook
from .notebook import CellRole, cell_roles, check_cells, compare_pair, split_regions
from .runner import CellResult, run_nbval

__all__ = ["CellResult", "CellRole", "CheckResult", "NotebookGrade", "cell_roles",
           "check_cells", "compare_pair", "grade_notebook", "run_nbval", "split_regions"]
