"""The compiler's spine: README's list of spine functions, the phases they open and the
debug output that follows them cannot drift apart.

* README "The spine" names functions that exist, in the order a real ``tc.compile(model)(x)``
  (then ``.backward()``) first calls them.
* Each stage's spine function opens the phases of ``_logging.SPINE`` in order (read from
  its source), and a real compile opens them nested as ``SPINE`` says.
* ``tc.debug`` files and ``tc.explain`` name the passes by the same names."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest
import torch

import tutorcompile as tc
from tutorcompile import _logging
from tutorcompile.aot import aot_autograd
from tutorcompile.dynamo import eval_frame
from tutorcompile.environment import probe

# (the package exports a function of the module's name)
compile_fx = importlib.import_module("tutorcompile.inductor.compile_fx")

pytestmark = [pytest.mark.foundation, pytest.mark.usefixtures("fresh_compiler")]

ROOT = Path(__file__).resolve().parent.parent


def _readme_spine() -> list[tuple[str, str]]:
    """(module path, qualified name) of each numbered line of README's "The spine"."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### The spine", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\d+\. `([\w/]+\.py):([\w.]+)`", section, re.M)


def _resolve(path: str, qualname: str):
    obj = importlib.import_module(path.removesuffix(".py").replace("/", "."))
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def test_readme_names_spine_functions_that_exist():
    spine = _readme_spine()
    assert len(spine) >= 5, spine
    for path, qualname in spine:
        assert (ROOT / path).is_file(), path
        assert inspect.isfunction(_resolve(path, qualname)), (path, qualname)


def _model() -> tuple[torch.nn.Module, torch.Tensor]:
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    return model, torch.randn(3, 4)


def test_readme_spine_is_the_order_a_compile_runs():
    """The README's functions, first called in the README's order by one training step."""
    spine = _readme_spine()
    codes = {_resolve(p, q).__code__: f"{p}:{q}" for p, q in spine}
    called: list[str] = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in codes and codes[frame.f_code] not in called:
            called.append(codes[frame.f_code])

    model, x = _model()
    compiled = tc.compile(model)
    sys.setprofile(profile)
    try:
        out = compiled(x)
    finally:
        sys.setprofile(None)
    out.sum().backward()
    assert called == [f"{p}:{q}" for p, q in spine]


def _phases_opened(fn) -> list[str]:
    return re.findall(r'\bphase\("(\w+)"\)', inspect.getsource(fn))


def test_each_spine_function_opens_its_stage_passes_in_order():
    assert _phases_opened(aot_autograd.AOTCompiled.compile_graph) == list(
        _logging.SPINE["aot"])
    assert _phases_opened(compile_fx.compile_graph) == ["inductor", *_logging.SPINE["inductor"]]
    # stage 3's spine runs inside the phase its caller opens
    run_frame = inspect.getsource(eval_frame.run_frame)
    assert re.search(r'phase\("capture"\):\n\s+entry = compile_entry\(', run_frame)
    assert _logging.PHASES == tuple(name for stage, passes in _logging.SPINE.items()
                                    for name in (stage, *passes))
    names = [f.__name__ for f in compile_fx.GRAPH_PASSES]
    assert names == ["fuse_addmm", "batch_matmuls", "fuse_convolution_backward",
                     "split_reductions"]


def test_a_compile_opens_the_phases_nested_as_the_spine_says():
    paths: list[tuple[str, ...]] = []
    remove = _logging.add_phase_listener(paths.append)
    try:
        model, x = _model()
        tc.compile(model)(x).sum().backward()
    finally:
        remove()
    stage_of = {p: stage for stage, passes in _logging.SPINE.items() for p in passes}
    for path in paths:
        if path[-1] in stage_of:       # a pass runs right inside its stage
            assert len(path) >= 2 and path[-2] == stage_of[path[-1]], path
    first_seen = list(dict.fromkeys(path[-1] for path in paths))
    assert first_seen == [p for p in _logging.PHASES if p in first_seen], first_seen
    if probe().has_cxx or probe().has_triton:   # (else codegen="eager": no kernels)
        assert set(_logging.PHASES) - {"build"} <= set(first_seen), first_seen
    # the forward is compiled inside capture and AOT; the backward, at its first call,
    # by stage 5 alone
    assert ("capture", "aot", "inductor") in paths and ("inductor",) in paths, paths


def _step(x):
    return (x.sin() * 2).sum()


def test_debug_files_and_explain_name_the_passes(tmp_path):
    x = torch.randn(5, requires_grad=True)
    with tc.debug(tmp_path) as folder:
        tc.compile(_step, backend="aot_eager")(x)
    first_lines = {p.name: p.read_text().splitlines()[0] for p in folder.glob("*.txt")}
    graph_code = next(line for name, line in first_lines.items() if "graph_code" in name)
    assert graph_code == "# spine: capture"
    assert "# spine: capture > aot > decompose" in first_lines.values()
    assert "# spine: capture > aot > partition" in first_lines.values()

    tc.reset()
    out = tc.explain(_step, backend="aot_eager")(x)
    names = [path[-1] for path in out.passes]
    assert names == ["capture", "aot", *_logging.SPINE["aot"]]
    assert "Compile passes (the spine, in the order they ran):\n  capture\n    aot\n" \
        "      functionalize\n      decompose" in str(out)
    tc.reset()
    assert "Compile passes" not in str(tc.explain(_step)(x))   # "eager": capture alone
