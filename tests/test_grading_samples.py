"""The class report of INSTRUCTORS.md, on the sample submissions an instructor can try.

``samples/ex01_autograd/`` holds two submissions of exercise 01, made from the shipped
exercise and solution: ``alice.ipynb`` solves four tasks, one of them with a mean where the
broadcast gradient needs a sum, and leaves t5-t7 undone; ``bob.ipynb`` solves t1 and t2, then
replaces ``torch.allclose`` in his t3. ``samples/hidden/ex01_autograd.py`` adds a seeded
hidden check to t2. The test runs exactly the command INSTRUCTORS.md shows and checks the
points of every task, the hidden checks and the tampering line of the report.
"""

import json
import subprocess
from pathlib import Path

import pytest

from tutorcompile.grading.__main__ import main

pytestmark = pytest.mark.foundation

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


@pytest.fixture
def grading(capsys):
    """``python -m tutorcompile.grading ARGS`` run in this process."""
    def run(*args):
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)
    return run


def test_class_report_on_the_sample_submissions(grading, tmp_path):
    report = tmp_path / "ex01.json"
    result = grading("grade", SAMPLES / "ex01_autograd", "--reference", ROOT / "exercises",
                     "--hidden", SAMPLES / "hidden", "--jobs", 2, "--json", report,
                     "--csv", tmp_path / "ex01.csv")
    assert result.returncode == 0, result.stdout + result.stderr
    grades = {g["notebook"]: g for g in json.loads(report.read_text())}
    points = {name: {task: (row["earned"], row["possible"]) for task, row in g["tasks"].items()}
              for name, g in grades.items()}
    # t2 is worth 3 points, plus 1 for the hidden check
    assert points == {
        "alice.ipynb": {"t1": (2, 2), "t2": (0, 4), "t3": (2, 2), "t4": (2, 2), "t5": (0, 3),
                        "t6": (0, 2), "t7": (0, 4)},
        "bob.ipynb": {"t1": (2, 2), "t2": (4, 4), "t3": (0, 2), "t4": (0, 2), "t5": (0, 3),
                      "t6": (0, 2), "t7": (0, 4)},
    }, result.stdout
    assert not grades["alice.ipynb"]["tampered"]
    assert grades["bob.ipynb"]["tampered"] == [
        "replaced torch.allclose (found at check 1 of task t3; checks from then on earn "
        "nothing)"]
    text = result.stdout
    assert "  t2     0/4  FAILED  AssertionError: for (3, 1): wrong values" in text
    assert "hidden checks: ex01_autograd.py: 1 checks (t2); 0 of 1 passed" in text
    assert "hidden checks: ex01_autograd.py: 1 checks (t2); 1 of 1 passed" in text
    assert "total: 12/38 points over 2 notebooks" in text
    assert "look at (tampering reported): bob.ipynb" in text
    rows = (tmp_path / "ex01.csv").read_text().splitlines()
    assert rows[0] == "notebook,task,earned,possible,passed,message" and len(rows) == 15
