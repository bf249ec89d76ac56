"""pyproject.toml and environment.yml must describe the same dependencies."""

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.foundation
tomllib = pytest.importorskip("tomllib")  # Python ≥ 3.11
ROOT = Path(__file__).resolve().parent.parent

# conda-forge spells some packages differently; conda-only extras are listed on their own.
CONDA_TO_PIP = {"pytorch": "torch", "python-graphviz": "graphviz"}
CONDA_ONLY = {"python", "pip", "graphviz-binary", "cxx-compiler"}


def pip_names():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["dev"]
    return {re.split(r"[<>=!;\[ ]", d, maxsplit=1)[0].lower() for d in deps}


def conda_names():
    names, in_deps = set(), False
    for line in (ROOT / "environment.yml").read_text().splitlines():
        if line.startswith("dependencies:"):
            in_deps = True
            continue
        item = re.match(r"^  - ([A-Za-z0-9_.-]+)", line)
        if in_deps and item:
            name = item.group(1).lower()
            if name == "graphviz":  # the binary; python-graphviz is the Python package
                name = "graphviz-binary"
            names.add(CONDA_TO_PIP.get(name, name))
    return names


def test_dependency_lists_agree():
    pip, conda = pip_names(), conda_names()
    assert pip - conda == set(), "in pyproject.toml but not environment.yml"
    assert conda - pip - CONDA_ONLY == set(), "in environment.yml but not pyproject.toml"


def test_the_version_is_pyprojects():
    from tutorcompile._version import __version__
    assert __version__ == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_environment_installs_the_package_itself():
    assert "- -e ." in (ROOT / "environment.yml").read_text()


def test_readme_quickstart_commands_exist():
    readme = (ROOT / "README.md").read_text()
    assert "./course lab" in readme and "./course test" in readme
    course = (ROOT / "course").read_text()
    assert "lab)" in course and "test)" in course
    assert "./course test" in (ROOT / ".ci" / "run").read_text()


def test_course_help_names_every_command_and_what_reaches_jupyterlab():
    import subprocess
    shown = subprocess.run(["bash", str(ROOT / "course"), "help"], capture_output=True,
                           text=True, check=True).stdout
    for command in ("lab", "grade", "test", "notebooks", "setup", "doctor"):
        assert f"./course {command}" in shown, command
    assert "ARGS go to" in shown and "--allow-root" in shown
    assert "TUTORCOMPILE_APT" in shown and "CI=true" in shown


def test_course_grade_reaches_the_grader():
    import os
    import subprocess
    import sys
    env = dict(os.environ, TUTORCOMPILE_VENV=sys.prefix, TUTORCOMPILE_SKIP_SETUP="1",
               TUTORCOMPILE_APT="no", PYTHONPATH=str(ROOT))
    shown = subprocess.run(["bash", str(ROOT / "course"), "grade", "--help"], env=env,
                           capture_output=True, text=True, check=True).stdout
    assert shown.startswith("usage: python -m tutorcompile.grading grade")


def test_every_type_checking_import_names_something_that_exists():
    """Imports under ``if TYPE_CHECKING:`` never run, so a wrong one (a module one package
    level off) fails no test and misleads a reader and a type checker: each is resolved
    here."""
    import ast
    import importlib
    root = ROOT
    wrong = []
    for path in sorted((root / "tutorcompile").rglob("*.py")):
        package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.If) and getattr(node.test, "id", None) ==
                    "TYPE_CHECKING"):
                continue
            for imp in node.body:
                if not isinstance(imp, ast.ImportFrom):
                    continue
                name = "." * imp.level + (imp.module or "")
                try:
                    module = importlib.import_module(name, package)
                    for alias in imp.names:
                        getattr(module, alias.name)
                except (ImportError, AttributeError) as e:
                    wrong.append(f"{path.relative_to(root)}: from {name} import ...: {e}")
    assert not wrong, "\n".join(wrong)
