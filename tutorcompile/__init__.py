"""tutorcompile: learn how torch.compile works by building it.

The pipeline (see the course notebooks, one stage each)::

    fn / nn.Module --dynamo--> Graph --aot--> forward/backward Graphs --inductor--> kernels

Public surface: ``tutorcompile.fx`` (the graph IR), ``tutorcompile.viz`` (drawings and
widgets), ``doctor()`` / ``environment()`` (what will run where on this machine).
"""

import os as _os

import torch as _torch

# Without a GPU, Triton kernels run under Triton's CPU interpreter. The variable must be set
# before any @triton.jit function is defined, so importing tutorcompile first is enough.
if not _torch.cuda.is_available():
    _os.environ.setdefault("TRITON_INTERPRET", "1")

from . import fx, viz  # noqa: E402
from .environment import doctor, environment  # noqa: E402

__version__ = "0.1.0"
__all__ = ["__version__", "doctor", "environment", "fx", "viz"]
