"""Reading the roles (task / check) that exercise notebooks give their cells."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import nbformat

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


@dataclass(frozen=True)
class CellRole:
    code_index: int      # index among code cells: nbval's "Cell N"
    cell_index: int      # index among all cells
    role: str            # "task", "check" or "" for ordinary cells
    task: str | None
    points: float


def cell_roles(path: str | Path) -> list[CellRole]:
    """The role of every code cell, in order."""
    nb = nbformat.read(str(path), as_version=4)
    roles, code_index = [], 0
    for cell_index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("tutorcompile", {})
        roles.append(CellRole(code_index, cell_index, meta.get("role", ""), meta.get("task"),
                              float(meta.get("points", 0))))
        code_index += 1
    return roles


def check_cells(path: str | Path) -> list[CellRole]:
    return [r for r in cell_roles(path) if r.role == "check"]
