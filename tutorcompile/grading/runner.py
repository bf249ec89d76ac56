"""Running a notebook under nbval (lax mode) and reading back each code cell's result.

nbval runs every code cell as one pytest item named ``Cell N`` (N counts code cells only) and
fails it if it raises. After a cell times out, nbval interrupts the kernel and still runs the
later cells, marking them "expected to fail": one that fails then shows as *skipped* in the
JUnit report, and counts as failed here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CellResult:
    code_index: int
    passed: bool
    message: str = ""

    @property
    def timed_out(self) -> bool:
        return "Timeout of" in self.message


class NotebookRunError(RuntimeError):
    """The notebook could not be run at all (not a notebook, kernel died, run hung)."""


def _first_line(message: str) -> str:
    """The interesting line of an nbval failure message, without terminal colours."""
    import re
    text = re.sub(r"\x1b\[[0-9;]*m|#x1B\[[0-9;]*m", "", message)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in lines:
        if "Timeout of" in line:
            return line
    exception = re.compile(r"^[A-Za-z_.]*(Error|Exception|Interrupt|Exit)(:.*)?$")
    for line in reversed(lines):  # the raise line, e.g. "AssertionError: grad of x is wrong"
        if exception.match(line):
            return line.rstrip(":")
    return lines[-1] if lines else "failed"


def run_nbval(path: str | Path, cell_timeout: int = 600, run_timeout: float | None = None
              ) -> dict[int, CellResult]:
    """Run ``pytest --nbval-lax`` on one notebook; results keyed by code-cell index."""
    path = Path(path).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--nbval-lax",
               "--nbval-current-env", f"--nbval-cell-timeout={cell_timeout}",
               "-o", "testpaths=", "-o", "addopts=", f"--junitxml={report}", str(path)]
        env = dict(os.environ, PYTHONHASHSEED="0")
        try:
            subprocess.run(cmd, cwd=path.parent, capture_output=True, text=True, env=env,
                           timeout=run_timeout)
        except subprocess.TimeoutExpired:
            raise NotebookRunError(f"{path.name}: the whole run took longer than "
                                   f"{run_timeout:.0f} s and was stopped") from None
        if not report.exists():
            raise NotebookRunError(f"nbval produced no report for {path.name}")
        results = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            name = case.get("name", "")
            if not name.startswith("Cell "):
                continue
            index = int(name.split()[1])
            bad = next((e for e in case if e.tag in ("failure", "error", "skipped")), None)
            message = _first_line((bad.get("message") or "") + "\n" + (bad.text or "")) \
                if bad is not None else ""
            results[index] = CellResult(index, bad is None, message)
        if not results:
            errors = ET.parse(report).getroot().iter("error")
            detail = next((e.get("message", "") for e in errors), "")
            raise NotebookRunError(f"{path.name} could not be run: {detail or 'no cells ran'}")
        return results
