"""The grader itself: a blank exercise never passes, a correct one always does, and nothing a
submission does (tampering, printing, hanging, crashing, breaking the file) changes that; the
INSTRUCTORS.md workflow with renamed submissions and hidden checks; a class graded in
parallel, in shards, resumably. (Cheats: test_grading_integrity.py.)"""

import json
import subprocess
import sys

import nbformat
import pytest

from tutorcompile.grading import compare_pair, grade_notebook, split_regions
from tutorcompile.grading.__main__ import main

pytestmark = pytest.mark.foundation

STUB = "    # YOUR CODE HERE\n    raise NotImplementedError('{task}')"
TASKS = {  # task: (function head, correct body, check)
    "t1": ("def double(x):", "    return 2 * x", "assert double(3) == 6, 'double(3)'"),
    "t2": ("def square(x):", "    return x * x", "assert square(4) == 16, 'square(4)'"),
}


def make_notebook(bodies: dict, checks: dict | None = None, extra_cells=()):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["tutorcompile"] = {"exercise": "ex"}
    cells = [nbformat.v4.new_markdown_cell("# Exercise")]
    for task, (head, _, check) in TASKS.items():
        cells.append(nbformat.v4.new_code_cell(
            f"{head}\n    ### BEGIN SOLUTION\n{bodies[task]}\n    ### END SOLUTION",
            metadata={"tutorcompile": {"role": "task", "task": task}}))
        cells.append(nbformat.v4.new_code_cell(
            (checks or {}).get(task, check) + f"\nprint('{task} passed')",
            metadata={"tutorcompile": {"role": "check", "task": task, "points": 2}}))
    cells += list(extra_cells)
    nb.cells = cells
    return nb


def exercise():
    return make_notebook({t: STUB.format(task=t) for t in TASKS})


def solution():
    return make_notebook({t: body for t, (_, body, _) in TASKS.items()})


@pytest.fixture
def classroom(tmp_path):
    """exercises/ex.ipynb as handed out, and a folder for submissions."""
    (tmp_path / "exercises").mkdir()
    (tmp_path / "subs").mkdir()
    nbformat.write(exercise(), str(tmp_path / "exercises" / "ex.ipynb"))
    return tmp_path


def submit(classroom, nb, name="ex.ipynb"):
    path = classroom / "subs" / name
    if isinstance(nb, str):
        path.write_text(nb)
    else:
        nbformat.write(nb, str(path))
    return path


def grade(classroom, nb, **kwargs):
    return grade_notebook(submit(classroom, nb), classroom / "exercises" / "ex.ipynb",
                          **kwargs)


def test_correct_submission_gets_full_marks(classroom):
    g = grade(classroom, solution())
    assert (g.earned, g.possible) == (4, 4) and g.tampered == [] and g.error is None


def test_blank_submission_gets_zero(classroom):
    g = grade(classroom, exercise())
    assert (g.earned, g.possible) == (0, 4)
    assert all("NameError" not in c.message for c in g.checks)
    assert g.tasks()["t1"]["message"].startswith("NotImplementedError")


def test_partially_correct_submission(classroom):
    nb = make_notebook({"t1": TASKS["t1"][1], "t2": "    return x + x"})
    g = grade(classroom, nb)
    assert g.earned == 2
    assert g.tasks()["t2"] == {"earned": 0.0, "possible": 2.0, "passed": False,
                               "message": "AssertionError: square(4)"}


def test_syntax_error_fails_only_its_task(classroom):
    nb = make_notebook({"t1": "    return 2 *", "t2": TASKS["t2"][1]})
    g = grade(classroom, nb)
    assert g.tasks()["t1"]["passed"] is False and g.tasks()["t2"]["passed"] is True
    assert any("SyntaxError" in e for e in g.cell_errors)


def test_infinite_loop_hits_the_time_limit_and_later_tasks_still_count(classroom):
    nb = make_notebook({"t1": "    while True:\n        pass", "t2": TASKS["t2"][1]})
    # the loop only runs when the check calls double(); the check cell times out
    g = grade(classroom, nb, cell_timeout=3)
    assert g.tasks()["t1"]["passed"] is False
    assert "Timeout" in g.tasks()["t1"]["message"]
    assert g.tasks()["t2"]["passed"] is True


def test_tampered_check_cell_is_detected_and_the_original_runs(classroom):
    nb = make_notebook({t: STUB.format(task=t) for t in TASKS},
                       checks={"t1": "assert True  # trust me"})
    g = grade(classroom, nb)
    assert g.earned == 0
    assert g.tampered == ["check 1 of task t1 was edited; the original ran"]


def test_deleted_check_cell_comes_back(classroom):
    nb = exercise()
    nb.cells = [c for c in nb.cells
                if c.metadata.get("tutorcompile", {}).get("role") != "check"]
    g = grade(classroom, nb)
    assert g.possible == 4 and g.earned == 0
    assert len(g.tampered) == 2 and "was missing" in g.tampered[0]


def test_printing_differently_changes_nothing(classroom):
    noisy = nbformat.v4.new_code_cell("for i in range(3):\n    print('debugging', i)")
    nb = make_notebook({"t1": "    print('hello')\n    return 2 * x", "t2": TASKS["t2"][1]},
                       extra_cells=[noisy])
    g = grade(classroom, nb)
    assert (g.earned, g.possible) == (4, 4)


def test_malformed_notebook_gets_zero_with_a_reason(classroom):
    g = grade(classroom, '{"cells": [ this is not json')
    assert g.earned == 0 and g.possible == 4
    assert g.error.startswith("ex.ipynb is not a valid notebook")


def test_hidden_checks_are_injected(classroom):
    hidden = classroom / "hidden.py"
    hidden.write_text("# %% check t1 points=3\nassert double(-1) == -2\n"
                      "# %% check t2\nassert square(-3) == 9\n")
    cheat = make_notebook({"t1": "    return 6 if x == 3 else 0", "t2": TASKS["t2"][1]})
    g = grade(classroom, cheat, hidden=hidden)
    assert g.possible == 2 + 3 + 2 + 1
    assert g.tasks()["t1"] == {"earned": 2.0, "possible": 5.0, "passed": False,
                               "message": "AssertionError"}
    assert sum(c.hidden for c in g.checks) == 2


def test_command_line_grades_a_class_folder_and_is_repeatable(classroom):
    submit(classroom, solution(), "alice.ipynb")
    submit(classroom, exercise(), "bob.ipynb")
    reports = []
    for run in range(2):
        out = classroom / f"report{run}.json"
        result = subprocess.run(
            [sys.executable, "-m", "tutorcompile.grading", "grade", str(classroom / "subs"),
             "--reference", str(classroom / "exercises" / "ex.ipynb"), "--json", str(out),
             "--csv", str(classroom / "report.csv")],
            capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr
        reports.append(json.loads(out.read_text()))
    assert reports[0] == reports[1]
    assert [(r["notebook"], r["earned"]) for r in reports[0]] == [("alice.ipynb", 4.0),
                                                                  ("bob.ipynb", 0.0)]
    assert "total: 4/8 points over 2 notebooks" in result.stdout
    csv_lines = (classroom / "report.csv").read_text().splitlines()
    assert csv_lines[0] == "notebook,task,earned,possible,passed,message"
    assert len(csv_lines) == 1 + 4


@pytest.fixture
def grading(capsys, monkeypatch):
    """``python -m tutorcompile.grading ARGS`` run in this process (a new interpreter would
    spend seconds importing torch); returns the exit code, stdout and stderr."""
    def run(*args, cwd=None):
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)
    return run


def test_instructors_flow_with_renamed_submissions_runs_the_hidden_checks(classroom, grading):
    """INSTRUCTORS.md, literally: submissions named by student, hidden/<exercise id>.py."""
    (classroom / "hidden").mkdir()
    (classroom / "hidden" / "ex.py").write_text("# %% check t1 points=3\n"
                                                "assert double(-1) == -2\n")
    submit(classroom, solution(), "alice.ipynb")
    submit(classroom, make_notebook({"t1": "    return 6 if x == 3 else 0",
                                     "t2": TASKS["t2"][1]}), "bob.ipynb")
    out = classroom / "report.json"
    result = grading("grade", classroom / "subs", "--reference", classroom / "exercises",
                     "--hidden", classroom / "hidden", "--json", out)
    assert result.returncode == 0, result.stdout + result.stderr
    alice, bob = json.loads(out.read_text())
    assert (alice["earned"], alice["possible"]) == (7, 7)
    assert (bob["earned"], bob["possible"]) == (4, 7)       # the hidden check caught bob
    assert alice["hidden_checks"] == "ex.py: 1 checks (t1)"
    assert "hidden checks: ex.py: 1 checks (t1); 0 of 1 passed" in result.stdout

    (classroom / "hidden" / "ex02_typo.py").write_text("# %% check t1\nassert False\n")
    stray = grading("grade", classroom / "subs", "--reference", classroom / "exercises",
                    "--hidden", classroom / "hidden")
    assert stray.returncode == 2 and "ex02_typo.py match no exercise" in stray.stderr
    (classroom / "hidden" / "ex02_typo.py").unlink()
    (classroom / "hidden" / "ex.py").unlink()
    missing = grading("grade", classroom / "subs", "--reference", classroom / "exercises",
                      "--hidden", classroom / "hidden")
    assert missing.returncode == 2 and "ex.py" in missing.stderr and "missing" in missing.stderr


def test_learner_self_grades_with_one_command(classroom, grading):
    """No flags: the shipped exercise is found by the id in the notebook's metadata."""
    mine = submit(classroom, make_notebook({"t1": TASKS["t1"][1], "t2": "    return 0"},
                                           checks={"t2": "assert True"}), "my_copy.ipynb")
    result = grading("grade", mine, cwd=classroom)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "t1     2/2  passed" in result.stdout
    assert "t2     0/2  FAILED  AssertionError: square(4)" in result.stdout  # original check
    assert "total: 2/4 points over 1 notebook\n" in result.stdout


def test_a_class_with_crashes_hangs_memory_hogs_and_broken_files(classroom, grading):
    """Honest ones full, bad ones zero with the reason, nothing else affected; sharded runs
    merge into the unsharded report; a rerun resumes from the saved results."""
    for name in ("alice", "bob", "carol"):
        submit(classroom, solution(), f"{name}.ipynb")
    bad = {"crash": "    import faulthandler\n    faulthandler._sigsegv()",
           "hang": "    import signal\n    signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                   "    while True:\n        pass",
           "hog": "    big = bytearray(6 * 2**30)\n    return 2 * x"}
    for name, body in bad.items():
        submit(classroom, make_notebook({"t1": body, "t2": TASKS["t2"][1]}), f"{name}.ipynb")
    submit(classroom, '{"cells": [ this is not json', "broken.ipynb")
    common = ["--reference", classroom / "exercises", "--jobs", 2, "--cell-timeout", 2,
              "--memory-limit", "2G", "--results", classroom / "results"]
    full = classroom / "full.json"
    result = grading("grade", classroom / "subs", *common, "--json", full)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {r["notebook"]: r for r in json.loads(full.read_text())}
    for name in ("alice", "bob", "carol"):
        assert rows[f"{name}.ipynb"]["earned"] == 4
    assert "killed by SIGSEGV" in rows["crash.ipynb"]["error"]
    assert rows["crash.ipynb"]["earned"] == 0
    assert "did not stop when interrupted: the kernel was killed" in rows["hang.ipynb"]["error"]
    hog = rows["hog.ipynb"]
    assert hog["tasks"]["t1"]["earned"] == 0 and hog["tasks"]["t2"]["earned"] == 2
    assert "memory limit (2 GiB) hit: MemoryError" in hog["tasks"]["t1"]["message"]
    assert rows["broken.ipynb"]["error"].startswith("broken.ipynb is not a valid notebook")

    shards = [classroom / f"shard{k}.json" for k in (1, 2)]
    for k, shard in enumerate(shards, 1):
        again = grading("grade", classroom / "subs", *common, "--shard", f"{k}/2",
                        "--json", shard)
        assert again.returncode == 0 and "(from an earlier run)" in again.stderr
    merged = classroom / "merged.json"
    assert grading("merge", *shards, "--json", merged).returncode == 0
    assert merged.read_text() == full.read_text()


def test_expect_flag_for_ci(classroom, grading):
    path = submit(classroom, exercise(), "bob.ipynb")
    assert grading("grade", path, "--expect", "zero").returncode == 0
    assert grading("grade", path, "--expect", "full").returncode == 1


# --- exercise/solution pairs (no kernels needed) ----------------------------------------
def test_regions_split_and_pairs_compare():
    outside, regions = split_regions("def f():\n    ### BEGIN SOLUTION\n    return 1\n"
                                     "    ### END SOLUTION\n")
    assert regions == ["    return 1\n"] and len(outside) == 2
    assert compare_pair(exercise(), solution()) == []


def test_pair_drift_is_reported():
    sol = solution()
    sol.cells[2].source = sol.cells[2].source.replace("double(3) == 6", "double(3) > 0")
    assert compare_pair(exercise(), sol) == ["cell 2: differs outside the solution regions"]
    leaked = solution()
    assert any("does not raise NotImplementedError" in p for p in compare_pair(leaked, leaked))
    with pytest.raises(ValueError, match="never closed"):
        split_regions("### BEGIN SOLUTION\nx = 1\n")
