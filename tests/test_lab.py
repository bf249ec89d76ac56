"""The course lab's contents manager: solutions/ readable, never changed; the rest as usual."""

import asyncio
import json

import pytest

pytestmark = pytest.mark.foundation
pytest.importorskip("jupyter_server")

from tornado import web  # noqa: E402

from tutorcompile.lab import CourseContentsManager, is_read_only  # noqa: E402

NOTEBOOK = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


@pytest.fixture
def manager(tmp_path):
    for folder in ("solutions", "exercises"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "ex01.ipynb").write_text(json.dumps(NOTEBOOK))
    return CourseContentsManager(root_dir=str(tmp_path))


def run(coroutine):
    return asyncio.run(coroutine)


def test_only_the_solutions_folder_is_read_only():
    assert is_read_only("solutions") and is_read_only("/solutions/ex01.ipynb")
    assert is_read_only("./solutions/sub/x.py")
    assert not is_read_only("exercises/ex01.ipynb") and not is_read_only("")
    assert not is_read_only("notebooks/solutions.ipynb")


def test_solutions_open_unwritable_and_exercises_writable(manager):
    solution = run(manager.get("solutions/ex01.ipynb"))
    assert solution["type"] == "notebook" and solution["writable"] is False
    assert run(manager.get("exercises/ex01.ipynb"))["writable"] is True


def test_saving_renaming_deleting_a_solution_is_refused(manager, tmp_path):
    model = {"type": "notebook", "content": NOTEBOOK}
    before = (tmp_path / "solutions" / "ex01.ipynb").read_text()
    for attempt in (lambda: manager.save(model, "solutions/ex01.ipynb"),
                    lambda: manager.save(model, "solutions/new.ipynb"),
                    lambda: manager.rename_file("solutions/ex01.ipynb", "solutions/x.ipynb"),
                    lambda: manager.rename_file("exercises/ex01.ipynb", "solutions/x.ipynb"),
                    lambda: manager.delete_file("solutions/ex01.ipynb")):
        with pytest.raises(web.HTTPError, match="read-only in the course lab") as info:
            run(attempt())
        assert info.value.status_code == 403
    assert (tmp_path / "solutions" / "ex01.ipynb").read_text() == before
    assert sorted(p.name for p in (tmp_path / "solutions").iterdir()) == ["ex01.ipynb"]
    # Save As into exercises/ -- what JupyterLab offers instead -- works
    run(manager.save(model, "exercises/my_copy.ipynb"))
    assert (tmp_path / "exercises" / "my_copy.ipynb").exists()


def test_the_editable_install_metadata_is_not_listed(manager, tmp_path):
    (tmp_path / "tutorcompile.egg-info").mkdir()
    names = {item["name"] for item in run(manager.get(""))["content"]}
    assert names == {"solutions", "exercises"}
