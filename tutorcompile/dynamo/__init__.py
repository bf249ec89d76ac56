"""tutorcompile.dynamo -- stage 3: from Python bytecode to graphs, guards and graph breaks.

::

    bytecode          one normalised instruction set for CPython 3.11 / 3.12 / 3.13
    vm                a bytecode interpreter in Python whose frames are resumable continuations
    variables         variable trackers: what the symbolic interpreter knows about each value;
                      its builder makes them of values from outside, with their guards
    trace_rules       which C callables are pure (folded on constants), which only report
    polyfills         Python versions of C iterators (itertools, operator getters), traced
    symbolic_convert  InstructionTranslator: the VM run on trackers, building a Graph
    output_graph      the graph under construction: inputs with sources, fake-tensor nodes
    source            where each value came from (L['x'].weight), as a readable expression
    guards            GuardBuilder, guards printed as readable Python
    exc               the graph-break signal, and the error fullgraph=True raises
    eval_frame        compile(): the per-(code, resume point) cache, graph breaks, recompiles
    backends          the backend registry: eager, aot_eager, inductor... by name
    distributed       DDP's optimizer: a graph under DistributedDataParallel split at buckets
    debugging         explain(fn)(*args): graphs, breaks, guards, recompile reasons
    decorators        mark_dynamic / mark_static: which sizes may change, said up front;
                      assume_constant_result
    config            the stage's knobs (tutorcompile.dynamo.config), each with why

``bytecode`` and ``vm`` do not import torch: they run (and are tested) on Python builds
without it. Everything else loads on first use (PEP 562).

Mirrors: torch/_dynamo.
"""

import importlib

_SUBMODULES = {"bytecode", "vm", "variables", "symbolic_convert", "guards", "eval_frame",
               "debugging", "backends", "exc", "source", "output_graph", "decorators",
               "trace_rules", "polyfills"}
_EXPORTS = {
    "compile": "eval_frame", "optimize": "eval_frame", "reset": "eval_frame",
    "OptimizedCallable": "eval_frame", "OptimizedModule": "eval_frame",
    "cache_entries": "eval_frame", "explain": "debugging", "ExplainOutput": "debugging",
    "InstructionTranslator": "symbolic_convert", "VM": "vm", "Frame": "vm",
    "normalize": "bytecode", "Unsupported": "exc", "GraphBreakError": "exc",
    "mark_dynamic": "decorators", "mark_static": "decorators",
    "assume_constant_result": "decorators",
}


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'tutorcompile.dynamo' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _SUBMODULES | set(_EXPORTS))


__all__ = sorted(_EXPORTS)
