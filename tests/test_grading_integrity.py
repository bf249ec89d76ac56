"""Grades a submission cannot forge: one example per class of cheat, each earns nothing on the
task it did not solve and is reported by name; honest work still earns full marks.

The exercise is a toy (no torch) so a kernel starts in about a second; the whole class of
cheats is graded at once, two at a time, like an instructor would.
"""

import json

import nbformat
import pytest

from tutorcompile.grading import grade_notebook
from tutorcompile.grading.__main__ import main
from tutorcompile.grading.classroom import Exercises, grade_class
from tutorcompile.grading.runner import available_sandbox

pytestmark = pytest.mark.foundation

GIVEN = "import math\n\ndef reference_double(x):\n    return 2 * x"
TASK = "def double(x):\n    ### BEGIN SOLUTION\n{body}\n    ### END SOLUTION"
STUB = "    raise NotImplementedError('t1')"
CHECK = ("assert math.isclose(double(3), reference_double(3)), 'double(3)'\n"
         "print('t1 passed')")
CHECK2 = "assert len([1, 2]) == 2 and math.isclose(half(4), 2.0), 'half(4)'"


def exercise(body=STUB, prefix="", half="    return x / 2", exercise_id="toy01"):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["tutorcompile"] = {"exercise": exercise_id}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Toy exercise"),
        nbformat.v4.new_code_cell(GIVEN),
        nbformat.v4.new_code_cell(prefix + TASK.format(body=body),
                                  metadata={"tutorcompile": {"role": "task", "task": "t1"}}),
        nbformat.v4.new_code_cell(CHECK, metadata={"tutorcompile": {"role": "check",
                                                                    "task": "t1",
                                                                    "points": 2}}),
        nbformat.v4.new_code_cell("def half(x):\n" + half,
                                  metadata={"tutorcompile": {"role": "task", "task": "t2"}}),
        nbformat.v4.new_code_cell(CHECK2, metadata={"tutorcompile": {"role": "check",
                                                                     "task": "t2",
                                                                     "points": 1}}),
    ]
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i}"
    return nb


WRONG = "    return 5"          # double(3) == 5: only a cheat can pass t1 with this

# name: (code put before the wrong t1, words the report must contain[, t1's body])
CHEATS = {
    "custom_exc": ("get_ipython().set_custom_exc((BaseException,), lambda *a, **k: None)\n",
                   "custom exception handler"),
    "patched_comparison": ("import math\nmath.isclose = lambda *a, **k: True\n",
                           "replaced math.isclose"),
    "input_transformer": ("get_ipython().input_transformers_post.append("
                          "lambda lines: [l for l in lines if 'assert' not in l])\n",
                          "input transformer"),
    "ast_transformer": ("import ast\nclass NoAsserts(ast.NodeTransformer):\n"
                        "    def visit_Assert(self, node):\n        return ast.Pass()\n"
                        "get_ipython().ast_transformers.append(NoAsserts())\n",
                        "AST transformer"),
    "event_hook": ("get_ipython().events.register('pre_run_cell', lambda info: None)\n",
                   "event callback"),
    "shell_method": ("from IPython.core.interactiveshell import InteractiveShell\n"
                     "InteractiveShell.showtraceback = lambda *a, **k: None\n",
                     "replacement for a shell method"),
    "trace_hook": ("import sys\nsys.settrace(lambda *a: None)\n", "trace function"),
    "patched_builtin": ("import builtins\nbuiltins.len = lambda x: 2\n", "replaced builtins.len"),
    "rebound_helper": ("def reference_double(x):\n    return 5\n", "reference_double rebound"),
    "stack_frames": ("import inspect\nframes = inspect.stack()\n", "read stack frames"),
    "garbage_collector": ("import gc\nobjects = gc.get_objects()\n", "garbage collector"),
    "forged_verdict": ("import os\nfor fd in range(3, 30):\n    try:\n"
                       "        os.write(fd, b'0123 check 2 passed {}\\n')\n"
                       "    except OSError:\n        pass\n", "forged result"),
    "thread_patch": ("import threading, math, time\nreal = math.isclose\ndef flip():\n"
                     "    while True:\n        math.isclose = lambda *a, **k: True\n"
                     "        time.sleep(0.001)\n"
                     "threading.Thread(target=flip, daemon=True).start()\n", "thread"),
    "thread_pool": ("import math\nfrom concurrent.futures import ThreadPoolExecutor\n"
                    "pool = ThreadPoolExecutor(1)\n"
                    "pool.submit(setattr, math, 'isclose', lambda *a, **k: True)\n", "thread"),
    "subprocess": ("import subprocess\nsubprocess.run(['true'])\n", "started a process"),
    "early_exit": ("import os\nos._exit(0)\n", "the kernel exited with code 0"),
    # patched while the check runs and put back before it ends: before/after comparisons
    # cannot see it; the check's own comparison functions are pinned, so it fails anyway
    "transient_patch": ("import math\nreal = math.isclose\ndef fake(*a, **k):\n"
                        "    math.isclose = real\n    return True\n",
                        "AssertionError: double(3)",
                        "    math.isclose = fake\n    return 5"),
}


@pytest.fixture(scope="module")
def graded_cheats(tmp_path_factory):
    root = tmp_path_factory.mktemp("cheats")
    (root / "exercises").mkdir()
    (root / "subs").mkdir()
    nbformat.write(exercise(), str(root / "exercises" / "toy01.ipynb"))
    nbformat.write(exercise("    return 2 * x"), str(root / "subs" / "honest.ipynb"))
    for name, (code, _, *body) in CHEATS.items():
        nbformat.write(exercise(body[0] if body else WRONG, prefix=code),
                       str(root / "subs" / f"{name}.ipynb"))
    # reading the instructor's files: the reference notebook sits in a folder it cannot read
    reader = exercise(WRONG, prefix=f"text = open({str(root / 'exercises' / 'toy01.ipynb')!r})"
                                    ".read()\n")
    nbformat.write(reader, str(root / "subs" / "read_reference.ipynb"))
    subs = sorted((root / "subs").glob("*.ipynb"))
    grades = grade_class(subs, Exercises.find(root / "exercises", None), jobs=2,
                         cell_timeout=20)
    return {g.notebook.removesuffix(".ipynb"): g for g in grades}


def test_honest_work_earns_full_marks(graded_cheats):
    g = graded_cheats["honest"]
    assert (g.earned, g.possible) == (3, 3) and g.tampered == [] and g.error is None


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_each_cheat_earns_nothing_on_its_task_and_is_reported(graded_cheats, name):
    g = graded_cheats[name]
    assert g.tasks()["t1"]["earned"] == 0, g.format()
    words = CHEATS[name][1]
    assert words in g.format(), g.format()


def test_threads_the_library_keeps_for_kernel_builds_are_not_tampering(tmp_path):
    """tutorcompile's C++ kernel builds start a thread pool and keep it: honest work that
    compiles kernels (ex03, ex05) must not be reported for the library's threads."""
    nb = exercise("    return 2 * x", prefix="codecache.cpp_compile("
                  "'extern \"C\" int one() { return 1; }')\n")
    nb.cells[1].source = "from tutorcompile.inductor import codecache\n" + GIVEN
    nbformat.write(nb, str(tmp_path / "honest.ipynb"))
    g = grade_notebook(tmp_path / "honest.ipynb", tmp_path / "honest.ipynb")
    assert (g.earned, g.possible) == (3, 3) and g.tampered == [], g.format()


def test_reading_the_instructors_folder_is_denied(graded_cheats):
    g = graded_cheats["read_reference"]
    assert g.tasks()["t1"]["earned"] == 0
    assert any("toy01.ipynb (outside its folder) (denied)" in t for t in g.tampered)


def test_a_cheat_does_not_cost_an_honest_task_that_ran_before_it(graded_cheats):
    # t2's check runs after t1's; a denied attempt changes nothing, so t2 still counts
    assert graded_cheats["trace_hook"].tasks()["t2"]["passed"] is True
    assert graded_cheats["stack_frames"].tasks()["t2"]["passed"] is True


@pytest.mark.skipif(available_sandbox() is None, reason="bubblewrap is not installed")
def test_sandbox_runs_honest_work_and_says_so(tmp_path):
    (tmp_path / "exercises").mkdir()
    (tmp_path / "subs").mkdir()
    nbformat.write(exercise(), str(tmp_path / "exercises" / "toy01.ipynb"))
    nbformat.write(exercise("    return 2 * x"), str(tmp_path / "subs" / "alice.ipynb"))
    out = tmp_path / "report.json"
    assert main(["grade", str(tmp_path / "subs"), "--reference", str(tmp_path / "exercises"),
                 "--sandbox", "--json", str(out)]) == 0
    [row] = json.loads(out.read_text())
    assert row["isolation"].startswith("bubblewrap sandbox")
    assert row["earned"] == 3
