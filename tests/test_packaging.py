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


def test_environment_installs_the_package_itself():
    assert "- -e ." in (ROOT / "environment.yml").read_text()


def test_readme_quickstart_commands_exist():
    readme = (ROOT / "README.md").read_text()
    assert "./course lab" in readme and "./course test" in readme
    course = (ROOT / "course").read_text()
    assert "lab)" in course and "test)" in course
    assert "./course test" in (ROOT / ".ci" / "run").read_text()
