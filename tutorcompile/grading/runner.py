"""Running a notebook under nbval (lax mode) and reading back each code cell's result."""

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


def run_nbval(path: str | Path, cell_timeout: int = 600) -> dict[int, CellResult]:
    """Run ``pytest --nbval-lax`` on one notebook; results keyed by code-cell index."""
    path = Path(path).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--nbval-lax",
               "--nbval-current-env", f"--nbval-cell-timeout={cell_timeout}",
               "-o", "testpaths=", "-o", "addopts=", f"--junitxml={report}", str(path)]
        env = dict(os.environ, PYTHONHASHSEED="0")
        subprocess.run(cmd, cwd=path.parent, capture_output=True, text=True, env=env)
        if not report.exists():
            raise RuntimeError(f"nbval produced no report for {path.name}: is it a notebook?")
        results = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            name = case.get("name", "")
            if not name.startswith("Cell "):
                continue
            index = int(name.split()[1])
            failure = case.find("failure")
            if failure is None:
                failure = case.find("error")
            message = (failure.get("message") or "") if failure is not None else ""
            results[index] = CellResult(index, failure is None, message)
        return results
