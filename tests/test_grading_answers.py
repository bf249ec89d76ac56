"""A compiler that accumulates: later exercises run the learner's answers to earlier ones.

``answers.earlier`` finds the learner's notebook of an earlier exercise by its id, runs it up to
the checks of the tasks asked for, and hands back the learner's code only where those checks
passed -- else the library's reference, saying why in one line. The grader gives a graded
capstone the same learner's other notebooks (and only them); the capstone earns full marks
with the solutions' answers and with none at all.
"""

import shutil
from pathlib import Path

import nbformat
import pytest
import torch

from tutorcompile.fx import GraphModule
from tutorcompile.grading import grade_notebook
from tutorcompile.grading.answers import earlier, find_notebook
from tutorcompile.grading.grade import earlier_notebooks
from tutorcompile.grading.references import index_expr, matmul_only_partition
from tutorcompile.grading.runner import Cell, run_cells
from tutorcompile.ops import ops, prims, vjp_rules
from tutorcompile.ops.autodiff import backward_graph, trace

pytestmark = pytest.mark.foundation
ROOT = Path(__file__).resolve().parent.parent
PARTITION = {"ex04_aot": ["matmul_only_partition"]}


def copy(name, folder, as_name=None, edit=None):
    nb = nbformat.read(str(ROOT / name), as_version=4)
    if edit is not None:
        old, new = edit
        cells = [c for c in nb.cells if old in c.source]
        assert cells, f"{old!r} is not in {name}"
        for c in cells:
            c.source = c.source.replace(old, new)
    target = folder / (as_name or Path(name).name)
    nbformat.write(nb, str(target))
    return target


def test_a_passing_answer_is_the_learners(tmp_path):
    copy("solutions/ex04_aot.ipynb", tmp_path, as_name="my work on partitions.ipynb")
    mine = earlier(PARTITION, folder=tmp_path, quiet=True)
    (answer,) = mine.answers
    assert answer.mine and answer.value is mine.matmul_only_partition
    assert mine.matmul_only_partition is not matmul_only_partition
    assert "t3" in answer.why and "my work on partitions.ipynb" in answer.why


def test_an_unfinished_answer_falls_back_and_says_why(tmp_path, capsys):
    copy("exercises/ex04_aot.ipynb", tmp_path)
    mine = earlier(PARTITION, folder=tmp_path)
    assert mine.matmul_only_partition is matmul_only_partition
    line = capsys.readouterr().out.strip()
    assert line == "ex04_aot matmul_only_partition: the reference (t3 is not done yet)"


def test_an_answer_that_fails_its_check_falls_back(tmp_path):
    # saves every forward value: gradients stay right, but the check's byte budget rejects it
    copy("solutions/ex04_aot.ipynb", tmp_path, edit=(' and op_kind(n) == "extern"', ""))
    (answer,) = earlier(PARTITION, folder=tmp_path, quiet=True).answers
    assert not answer.mine and answer.value is matmul_only_partition
    assert answer.why.startswith("t3: its check raised AssertionError"), answer.why


def test_missing_ambiguous_and_forced_reference(tmp_path, monkeypatch):
    (answer,) = earlier(PARTITION, folder=tmp_path, quiet=True).answers
    assert not answer.mine and "no notebook of ex04_aot" in answer.why
    copy("solutions/ex04_aot.ipynb", tmp_path, as_name="a.ipynb")
    copy("solutions/ex04_aot.ipynb", tmp_path, as_name="b.ipynb")
    path, why = find_notebook("ex04_aot", tmp_path)
    assert path is None and "2 notebooks are ex04_aot (a.ipynb, b.ipynb)" in why
    copy("solutions/ex04_aot.ipynb", tmp_path)            # the canonical name settles it
    assert find_notebook("ex04_aot", tmp_path)[0].name == "ex04_aot.ipynb"
    monkeypatch.setenv("TUTORCOMPILE_ANSWERS", "reference")
    (answer,) = earlier(PARTITION, quiet=True).answers
    assert not answer.mine and answer.why == "TUTORCOMPILE_ANSWERS=reference"


def test_a_name_no_task_defines_fails_at_once(tmp_path):
    with pytest.raises(KeyError, match="ex04_aot has no reference for 'matmul_partition'"):
        earlier({"ex04_aot": ["matmul_partition"]}, folder=tmp_path)


def test_vjp_rules_build_the_backward_from_other_rules_and_are_restored():
    x = torch.randn(3, 4, dtype=torch.float64)
    b = torch.randn(4, dtype=torch.float64)            # broadcasts: the rule need not care
    forward = trace(lambda x, b: ops.mul(x, b), x, b)
    calls = []

    def swapped(g, out, a, b):                          # a wrong rule, to be seen
        calls.append(1)
        return ops.mul(g, a), ops.mul(g, b)

    with vjp_rules({prims.mul: swapped}):
        wrong = backward_graph(forward, x, b)
    right = backward_graph(forward, x, b)
    tangent = torch.ones(3, 4, dtype=torch.float64)
    gx_wrong, gb_wrong = GraphModule({}, wrong)(x, b, tangent)
    gx, gb = GraphModule({}, right)(x, b, tangent)
    assert calls and torch.allclose(gx, b.expand(3, 4)) and torch.allclose(gb, x.sum(0))
    assert torch.allclose(gx_wrong, x) and gb_wrong.shape == b.shape     # summed to shape


def test_index_expr_reference_reads_every_view_right():
    gen = torch.Generator().manual_seed(0)
    for trial in range(200):
        shape = [int(v) for v in torch.randint(1, 5, (trial % 4,), generator=gen)]
        x = torch.randn(*shape, generator=gen) if shape else torch.randn(())
        if trial % 3 == 1 and len(shape) >= 2:                  # a permute
            x = torch.randn(*reversed(shape), generator=gen).permute(*range(len(shape))[::-1])
        elif trial % 3 == 2 and len(shape) >= 2:      # a broadcast of a strided slice
            x = torch.randn(*([1] + shape[1:-1] + [2 * shape[-1]]), generator=gen)[..., ::2]
            x = x.expand(*shape)
        n = x.numel()
        offsets = torch.arange(n)
        where = eval(index_expr(tuple(x.shape), x.stride()), {"offsets": offsets})
        storage = torch.tensor([]).set_(x.untyped_storage())
        got = storage[x.storage_offset() + torch.as_tensor(where).expand(n)]
        assert torch.equal(got, x.reshape(-1)), (shape, x.stride())


def test_the_grader_hands_the_kernel_the_same_learners_other_notebooks(tmp_path):
    learner = tmp_path / "ada"
    learner.mkdir()
    for name in ("ex01_autograd", "ex04_aot", "ex07_capstone"):
        copy(f"solutions/{name}.ipynb", learner)
    copy("solutions/ex04_aot.ipynb", learner, as_name="ex04 again.ipynb")   # ambiguous: none
    found = earlier_notebooks(learner / "ex07_capstone.ipynb")
    assert [p.name for p in found] == ["ex01_autograd.ipynb"]
    listing = ("import os\nfolder = os.environ['TUTORCOMPILE_ANSWERS']\n"
               "assert sorted(os.listdir(folder)) == ['ex01_autograd.ipynb'], os.listdir(folder)")
    outcome = run_cells([Cell("check", listing, "check")], answers=found)
    assert outcome.results[0].passed, outcome.results[0].message


@pytest.mark.slow
@pytest.mark.parametrize("earlier_answers", ["solutions", "none"])
def test_the_capstone_earns_full_marks_with_the_solutions_answers_and_with_none(
        tmp_path, earlier_answers):
    folder = tmp_path / "learner"
    folder.mkdir()
    submission = copy("solutions/ex07_capstone.ipynb", folder)
    if earlier_answers == "solutions":
        for name in ("ex01_autograd", "ex02_fx", "ex04_aot", "ex05_fusion"):
            shutil.copy(ROOT / "solutions" / f"{name}.ipynb", folder)
    # an instructor's hidden check reads whose pieces the capstone ran
    whose = "all" if earlier_answers == "solutions" else "not any"
    hidden = tmp_path / "ex07_capstone.py"
    hidden.write_text("# %% check t4 points=1\n"
                      f"assert {whose}(a.mine for a in mine.answers), "
                      "[a.line() for a in mine.answers]\nprint('pieces as expected')\n")
    grade = grade_notebook(submission, ROOT / "exercises" / "ex07_capstone.ipynb", hidden,
                           cell_timeout=600)
    assert grade.earned == grade.possible > 0, grade.format()
    assert any(c.hidden and c.passed for c in grade.checks), grade.format()
    assert not grade.tampered and not grade.cell_errors, grade.format()


@pytest.mark.slow
def test_tampering_in_an_earlier_notebook_counts_against_the_capstone(tmp_path):
    # ex01's t1 passes its own check, but its cell also disarms a comparison the capstone's
    # checks rely on: the capstone must not earn its points that way
    folder = tmp_path / "mallory"
    folder.mkdir()
    submission = copy("solutions/ex07_capstone.ipynb", folder)
    copy("solutions/ex01_autograd.ipynb", folder,
         edit=("def mul_vjp(g, out, a, b):",
               "torch.testing.assert_close = lambda *a, **k: None\n\n\ndef mul_vjp(g, out, a, b):"))
    grade = grade_notebook(submission, ROOT / "exercises" / "ex07_capstone.ipynb",
                           cell_timeout=600)
    assert grade.earned == 0, grade.format()
    assert any("assert_close" in t for t in grade.tampered), grade.format()
