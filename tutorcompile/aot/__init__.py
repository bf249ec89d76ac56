"""tutorcompile.aot -- stage 4: AOTAutograd.

::

    trace_with_inputs   run a function once, record its torch calls (shapes concrete;
                        tracing.py)
    decompose           torch-level graph -> prims (+ extern calls), with the rules of
                        DECOMPOSITIONS; DecompositionReport says what stayed extern
                        (prim_graph.py runs the rules; the package decomp/ holds them:
                        registry.py owns the table, core.py, math.py, nn.py... fill it)
    functionalize       in-place ops and input mutations -> pure graph + copy-backs
    plan_synthetic_bases   inputs that share a storage, one of them written -> one input
                        per storage, the aliased inputs views of it in the graph
                        (synthetic_base.py; storage_layout keys the compilation)
    make_joint          forward + backward in one graph, from the op table's VJP rules
                        (joint.py)
    default_partition   save what the backward reads
    min_cut_partition   save the fewest bytes, recompute cheap ops (networkx min cut)
    kernel_min_cut_partition   ... and equality tests see the forward's bits (stage 5's)
    partition_from_saved   forward/backward graphs for any chosen saved set
    aot_function / aot_module / aot_graph   compile fwd+bwd ahead of time, run them in a
                        torch.autograd.Function
    aot_eager           the "aot_eager" backend of tutorcompile.compile: no decompositions,
                        eager's kernels forward and backward (bitwise eager)
    aot_eager_decomp_partition   the next rung: prims and the min-cut partitioner
    aot_eager_backend   our decomposed AOT as a torch.compile backend (real Dynamo, our AOT)
    torch_partition_fn  our partitioners as partition_fn of PyTorch's own AOTAutograd
    compare             ours and PyTorch's partitioners side by side (saved bytes)
    config              the limits past which a decomposition declines, each with why

Mirrors: torch/_functorch/aot_autograd.py, partitioners.py, torch/_decomp.
"""

from .aot_autograd import (
    AOTCompiled,
    CompiledArtifacts,
    aot_eager,
    aot_eager_backend,
    aot_eager_decomp_partition,
    aot_function,
    aot_graph,
    aot_module,
)
from .decomp import DECOMPOSITIONS, dropout_reference, extern_call, register_decomposition
from .functionalize import (
    FunctionalGraph,
    FunctionalizationError,
    functionalize,
    inline_modules,
    lift_attributes,
)
from .joint import JointGraph, make_joint
from .partitioners import (
    Partition,
    PartitionReport,
    default_partition,
    kernel_min_cut_partition,
    min_cut_partition,
    partition_from_saved,
    torch_partition_fn,
)
from .prim_graph import DecompositionReport, decompose
from .tracing import trace_with_inputs

__all__ = [
    "AOTCompiled", "CompiledArtifacts", "DECOMPOSITIONS", "DecompositionReport",
    "FunctionalGraph", "FunctionalizationError", "JointGraph", "Partition", "PartitionReport",
    "aot_eager", "aot_eager_backend", "aot_eager_decomp_partition", "aot_function", "aot_graph",
    "aot_module", "decompose",
    "default_partition", "dropout_reference", "extern_call", "functionalize", "inline_modules",
    "kernel_min_cut_partition", "lift_attributes", "make_joint", "min_cut_partition",
    "partition_from_saved", "register_decomposition",
    "torch_partition_fn", "trace_with_inputs",
]
