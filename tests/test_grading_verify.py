"""`python -m tutorcompile.grading verify-exercises`: a blank exercise must fail every task."""

import subprocess

import nbformat
import pytest

from tutorcompile.grading.__main__ import main

pytestmark = pytest.mark.foundation


def notebook(path, task_body, second_check="assert double(2) == 4"):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A tiny exercise"),
        nbformat.v4.new_code_cell(
            "def double(x):\n    ### BEGIN SOLUTION\n" + task_body + "\n    ### END SOLUTION",
            metadata={"tutorcompile": {"role": "task", "task": "t1"}}),
        nbformat.v4.new_code_cell("assert double(3) == 6\nprint('t1 passed')",
                                  metadata={"tutorcompile": {"role": "check", "task": "t1",
                                                             "points": 1}}),
        nbformat.v4.new_code_cell(second_check,
                                  metadata={"tutorcompile": {"role": "check", "task": "t2",
                                                             "points": 1}}),
    ]
    nbformat.write(nb, str(path))


@pytest.fixture
def verify(capsys):
    """``python -m tutorcompile.grading verify-exercises FOLDER``, in this process."""
    def run(folder):
        capsys.readouterr()
        code = main(["verify-exercises", str(folder)])
        return subprocess.CompletedProcess([], code, capsys.readouterr().out, "")
    return run


def test_blank_exercise_is_accepted(tmp_path, verify):
    notebook(tmp_path / "ex.ipynb", "    raise NotImplementedError('t1')")
    result = verify(tmp_path)
    assert result.returncode == 0, result.stdout
    assert "all 2 check cells of 2 tasks fail" in result.stdout


def test_check_that_passes_on_the_stub_is_reported(tmp_path, verify):
    notebook(tmp_path / "ex.ipynb", "    raise NotImplementedError('t1')",
             second_check="assert True  # passes no matter what")
    result = verify(tmp_path)
    assert result.returncode == 1
    assert "check cells pass on the unfilled stubs (tasks t2)" in result.stdout


def test_notebook_without_checks_is_reported(tmp_path, verify):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    nbformat.write(nb, str(tmp_path / "ex.ipynb"))
    result = verify(tmp_path)
    assert result.returncode == 1 and "has no check cells" in result.stdout


def test_empty_folder_is_fine(tmp_path, verify):
    result = verify(tmp_path)
    assert result.returncode == 0 and "nothing to verify" in result.stdout
