"""doctor(): what this machine has, and which backend each stage will use."""

import subprocess
import sys

import pytest
import torch

import tutorcompile as tc
from tutorcompile.environment import probe

pytestmark = pytest.mark.foundation


def test_report_names_every_tool_and_stage():
    text = probe().format()
    for needle in ("torch", "CUDA", "triton", "C++ compiler", "graphviz", "ipywidgets",
                   "Stage by stage", "1 autograd", "3 dynamo", "5 fusion", "6 cudagraphs"):
        assert needle in text, needle
    assert torch.__version__ in text


def test_cpu_only_machine_is_told_what_runs_where():
    env = probe()
    if env.has_cuda:
        pytest.skip("this check is about CPU-only machines")
    stages = dict(env.stages)
    assert "needs a CUDA GPU" in stages["6 cudagraphs"]
    if env.has_cxx:
        assert "C++/OpenMP" in stages["5 fusion"]
    assert "not available" in env.tools["cuda"].detail


def test_missing_tools_come_with_an_install_hint():
    for tool in probe().tools.values():
        if not tool.available:
            assert tool.install_hint, tool.name


def test_doctor_prints_and_command_line_agrees(capsys):
    tc.doctor()
    printed = capsys.readouterr().out
    out = subprocess.run([sys.executable, "-m", "tutorcompile", "doctor"], capture_output=True,
                         text=True, check=True).stdout
    assert printed.splitlines()[0] == out.splitlines()[0]
    assert "Stage by stage" in out
