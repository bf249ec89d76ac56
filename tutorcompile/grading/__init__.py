"""Grading exercise notebooks with nbval.

An exercise notebook is a lesson with tasks. Its cells carry metadata under ``tutorcompile``:

* a **task cell** (``{"role": "task", "task": "t1"}``) holds code the learner completes,
  between ``### BEGIN SOLUTION`` and ``### END SOLUTION``; as shipped the region is
  ``raise NotImplementedError(...)``;
* a **check cell** (``{"role": "check", "task": "t1", "points": 2}``) asserts the learner's
  work against PyTorch and prints a short, deterministic line when it passes.

The solution notebook is the same notebook with the regions filled in. Grading runs the
notebook under ``pytest --nbval-lax``: a check cell passes iff it raises nothing.
"""

from .notebook import CellRole, cell_roles, check_cells
from .runner import CellResult, run_nbval

__all__ = ["CellResult", "CellRole", "cell_roles", "check_cells", "run_nbval"]
