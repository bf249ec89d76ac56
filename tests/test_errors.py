"""One error base for what tutorcompile reports about a program; fallbacks are warnings."""

import importlib
import types

import pytest
import torch

import tutorcompile as tc
from tutorcompile.aot.functionalize import FunctionalizationError
from tutorcompile.dynamo import eval_frame
from tutorcompile.dynamo.exc import GraphBreakError
from tutorcompile.fx import GraphLintError, TraceError
from tutorcompile.inductor.lowering import LoweringError

compile_fx = importlib.import_module("tutorcompile.inductor.compile_fx")  # (not the function)

pytestmark = pytest.mark.foundation


@pytest.mark.parametrize("error", [GraphLintError, TraceError, GraphBreakError,
                                   FunctionalizationError, LoweringError])
def test_every_program_error_shares_one_base_and_stays_a_runtime_error(error):
    assert issubclass(error, tc.TutorcompileError) and issubclass(error, RuntimeError)


def test_a_graph_break_under_fullgraph_is_caught_by_the_base():
    eval_frame.reset()

    def f(x):
        return torch.relu(x) * x.sum().item()

    with pytest.raises(tc.TutorcompileError, match="fullgraph=True"):
        tc.compile(f, backend="eager", fullgraph=True)(torch.randn(3))


def test_a_missing_cxx_compiler_is_a_fallback_warning_not_a_print(monkeypatch, capsys):
    machine = types.SimpleNamespace(has_cxx=False, has_triton=True)
    monkeypatch.setattr(compile_fx, "probe", lambda: machine)
    with pytest.warns(tc.FallbackWarning, match="no C.. compiler found .install g...; using"):
        assert compile_fx.default_codegen([torch.randn(2)]) == "triton"
    machine.has_triton = False
    with pytest.warns(tc.FallbackWarning, match="op by op"):
        assert compile_fx.default_codegen([torch.randn(2)]) == "eager"
    assert capsys.readouterr().out == ""
