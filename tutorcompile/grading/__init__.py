"""Grading exercise notebooks -- trustworthy enough for a classroom.

An exercise notebook is a lesson with tasks. Its cells carry metadata under ``tutorcompile``:

* a **task cell** (``{"role": "task", "task": "t1"}``) holds code the learner completes,
  between ``### BEGIN SOLUTION`` and ``### END SOLUTION``; as shipped the region is
  ``raise NotImplementedError(...)``;
* a **check cell** (``{"role": "check", "task": "t1", "points": 2}``) asserts the learner's
  work against PyTorch and prints a short, deterministic line when it passes.
* a **demo cell** (``{"role": "demo"}``) shows the learner's work off -- timings, plots --
  and never runs while grading (it decides nothing, and may take a while).

The solution notebook is the same notebook with the regions filled in (``verify-pairs``
checks it). Each exercise notebook carries its id in its metadata
(``{"tutorcompile": {"exercise": "ex01_autograd"}}``), which is how a renamed submission finds
its exercise and hidden checks.

Grading runs a submission in a kernel of its own (``runner.py``, ``worker.py``): a check earns
its points only if it ran to its end with the interpreter intact. See ``grade.py`` for the
rules, ``classroom.py`` for grading a class in parallel, sharding and merging, and
INSTRUCTORS.md for the workflow and the threat model.
"""

from .grade import CheckResult, NotebookGrade, grade_notebook
from .notebook import CellRole, cell_roles, check_cells, compare_pair, exercise_id, split_regions
from .runner import Cell, CellResult, run_cells

__all__ = ["Cell", "CellResult", "CellRole", "CheckResult", "NotebookGrade", "cell_roles",
           "check_cells", "compare_pair", "exercise_id", "grade_notebook", "run_cells",
           "split_regions"]
