"""Stage 5: how Triton reductions are launched and how many passes over a row they make.

Warps per program come from the block (``choose_num_warps``, a table checked here; under the
interpreter they change nothing, so the tests check the choice and that launches pass it).
Looped reductions (rows longer than the persistent limit, forced small here by lowering
the limit) compute a row's statistics in one pass where the program allows it: softmax's
max and sum of exponentials together (online softmax), a mean and a sum of squared
deviations together (Welford). Values are checked against eager -- against float64 where
eager's own float32 error matters -- with rows of large offset and small spread, where a
naive one-pass sum of squares loses every digit.
"""

import pytest
import torch

from tests.kernel_backends import on
from tutorcompile.environment import probe
from tutorcompile.inductor import autotune, examples
from tutorcompile.inductor.codegen import triton as triton_codegen
from tutorcompile.inductor.compile_fx import compile_fx
from tutorcompile.ops import trace

pytestmark = [pytest.mark.stage5,
              pytest.mark.skipif(not probe().has_triton, reason="no triton"),
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]  # masked lanes, interpreter


@pytest.mark.parametrize("kind, xblock, rblock, rnumel, warps", [
    ("pointwise", 64, 1, 1, 1),          # a small block: one warp
    ("pointwise", 128, 1, 1, 4),         # from 128 elements at least 4 warps
    ("pointwise", 1024, 1, 1, 4),        # 256 elements a warp
    ("pointwise", 4096, 1, 1, 8),        # at most 8
    ("persistent", 1, 64, 64, 2),        # at least 2
    ("persistent", 1, 1024, 1024, 8),    # 128 elements a warp ...
    ("persistent", 1, 4096, 4096, 8),    # ... at most 8: the row lives in registers
    ("looped", 4, 1024, 4096, 16),       # a looped block may use 16
    ("looped", 1, 1024, 4096, 8),
    ("looped", 8, 1024, 65536, 32),      # rows over 8192: up to 32
])
def test_num_warps_follow_the_block(kind, xblock, rblock, rnumel, warps):
    assert triton_codegen.choose_num_warps(kind, xblock, rblock, rnumel) == warps


def _plan(fn, *inputs):
    """The kernel plan of the one kernel ``fn`` compiles to, and the compiled graph."""
    inputs = on("triton", *inputs)
    compiled = compile_fx(trace(fn, *inputs), inputs, backend="triton")
    (group,) = [g for g in compiled.scheduler.groups if not g.is_extern]
    return compiled.scheduler.plan(group.buffers), compiled


def test_launches_pass_num_warps_and_num_stages():
    plan, compiled = _plan(examples.softmax, torch.randn(6, 100))
    call, _, _ = triton_codegen.compile_triton_kernel(plan, "k")
    assert f"num_warps={call.num_warps}, num_stages=1" in compiled.wrapper_code
    launched = {}

    class Launcher:   # stands in for the jitted function: records how it is launched
        def __getitem__(self, grid):
            return lambda *args, **kwargs: launched.update(kwargs)
    call.fn = Launcher()
    call(*[torch.empty(0)] * len(call.arg_names))
    assert launched["num_warps"] == call.num_warps == triton_codegen.choose_num_warps(
        "persistent", call.xblock, call.rblock, 100)
    assert launched["num_stages"] == 1


def test_max_autotune_tries_warps_on_a_gpu(monkeypatch):
    plan, _ = _plan(examples.softmax, torch.randn(64, 4096))
    monkeypatch.setattr(autotune, "interpreted", lambda: False)
    monkeypatch.setattr(triton_codegen, "interpreted", lambda: False)
    cands = autotune.candidate_blocks(plan, persistent=False)
    assert cands[0] == (4, 1024, 16)     # the heuristic's choice first
    assert (4, 1024, 8) in cands and (4, 1024, 32) in cands
    assert (2, 1024, 16) in cands        # other blocks, with their own warps
