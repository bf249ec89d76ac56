"""TUTORCOMPILE_LOGS / set_logs / debug(dir): artifacts shown only when asked for."""

import os
import subprocess
import sys

import pytest

from tutorcompile import _logging as logs

pytestmark = pytest.mark.foundation


@pytest.fixture(autouse=True)
def _clean():
    logs.set_logs()
    yield
    logs.set_logs()


def test_off_by_default_and_lazy(capsys):
    called = []
    logs.log_artifact("guards", lambda: called.append(1) or "x")
    assert called == [] and capsys.readouterr().out == ""


def test_set_logs_prints_with_a_header(capsys):
    logs.set_logs(guards=True)
    logs.log_artifact("guards", lambda: "check_tensor(x, torch.float32, [2, 3])", title="f")
    logs.log_artifact("fusion", "not shown")
    assert capsys.readouterr().out == \
        "[tutorcompile:guards] f\ncheck_tensor(x, torch.float32, [2, 3])\n\n"


def test_unknown_names_are_refused_with_the_list():
    with pytest.raises(ValueError, match="choose from: all, graph_breaks"):
        logs.set_logs(gaurds=True)


def test_debug_dir_numbers_artifacts_in_order(tmp_path):
    with logs.debug(tmp_path / "dump") as folder:
        logs.log_artifact("aot_graphs", "joint graph")
        logs.log_artifact("output_code", "kernel source")
    logs.log_artifact("aot_graphs", "after the block: not written")
    assert sorted(p.name for p in folder.iterdir()) == ["001_aot_graphs.txt",
                                                        "002_output_code.txt"]
    assert (folder / "002_output_code.txt").read_text() == "kernel source\n"


def test_environment_variable_switches_artifacts_on():
    code = ("from tutorcompile import _logging as l; print(sorted(l._enabled))")
    env = dict(os.environ, TUTORCOMPILE_LOGS="graph_breaks,recompiles")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "['graph_breaks', 'recompiles']"
    env["TUTORCOMPILE_LOGS"] = "all"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert "output_code" in out and "cudagraphs" in out
