"""tutorcompile: learn how torch.compile works by building it.

The pipeline (see the course notebooks, one stage each)::

    fn / nn.Module --dynamo--> Graph --aot--> forward/backward Graphs --inductor--> kernels

Public surface: ``compile(fn_or_module, backend=..., fullgraph=..., dynamic=...)``,
``explain(fn)(*args)`` and ``reset()`` (stage 3, Dynamo); ``tutorcompile.fx`` (the graph
IR), ``tutorcompile.viz`` (drawings and widgets), ``tutorcompile.bench`` (timing),
``doctor()`` (what will run where on this machine;
``environment.probe()`` as data), ``set_logs(...)`` / ``debug(dir)`` (every stage's
artifacts, also through ``TUTORCOMPILE_LOGS``).

Submodules load on first use (PEP 562), so the parts that need no torch -- the bytecode
machinery of the Dynamo stage -- import on interpreters where torch is not installed.
"""

import importlib
import os as _os

from ._version import __version__

try:
    import torch as _torch
except ImportError:  # only the torch-free parts (tutorcompile.dynamo's VM) are usable
    _torch = None  # type: ignore[assignment]

# Without a GPU, Triton kernels run under Triton's CPU interpreter. The variable must be set
# before any @triton.jit function is defined, so importing tutorcompile first is enough.
if _torch is not None and not _torch.cuda.is_available():
    _os.environ.setdefault("TRITON_INTERPRET", "1")

_SUBMODULES = {"fx", "viz", "environment", "grading", "bench", "ops", "autograd", "cudagraphs",
               "dynamo", "aot", "inductor", "torch_backend", "errors"}
_FROM_SUBMODULE = {"doctor": "environment", "set_logs": "_logging", "debug": "_logging",
                   "compile": "dynamo", "explain": "dynamo", "reset": "dynamo",
                   "mark_dynamic": "dynamo", "mark_static": "dynamo",
                   "TutorcompileError": "errors", "FallbackWarning": "errors"}


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _FROM_SUBMODULE:
        module = importlib.import_module(f".{_FROM_SUBMODULE[name]}", __name__)
        return getattr(module, name)
    raise AttributeError(f"module 'tutorcompile' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _SUBMODULES | set(_FROM_SUBMODULE))


__all__ = ["FallbackWarning", "TutorcompileError", "__version__", "aot", "autograd", "bench",
           "compile", "cudagraphs", "debug", "doctor", "dynamo", "errors", "explain", "fx",
           "inductor", "mark_dynamic", "mark_static", "ops", "reset", "set_logs", "viz"]
