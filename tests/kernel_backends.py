"""The two kernel writers as pytest parameters, and where their inputs live: shared by the
stage-5 tests that run one case through both."""

import pytest
import torch

from tutorcompile.environment import probe

BACKENDS = [pytest.param("cpp", marks=pytest.mark.skipif(not probe().has_cxx,
                                                         reason="no C++ compiler")),
            pytest.param("triton", marks=pytest.mark.skipif(not probe().has_triton,
                                                            reason="no triton"))]


def on(backend, *tensors):
    """Triton runs CUDA tensors on a GPU machine and CPU tensors under the interpreter.

    Modules move too (``nn.Module.cuda()`` moves its parameters in place and returns it)."""
    if backend == "triton" and torch.cuda.is_available():
        return tuple(t.cuda() for t in tensors)
    return tensors
