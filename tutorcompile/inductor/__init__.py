"""tutorcompile.inductor -- stage 5: prims -> loop IR -> fused kernels (C++/OpenMP, Triton).

::

    compile_fx(gm, example_inputs, codegen="cpp" | "triton" | "eager", fusion=True,
               mode=None | "max-autotune")   -> CompiledGraph (.output_code, .fusion_report)
    inductor_backend(gm, example_inputs)     the torch.compile backend contract
                                             (Dynamo graph -> tutorcompile.aot -> kernels)
    lower_graph / GraphLowering, lowerings, register_lowering     prims -> loop IR (lowering.py)
    ir            Pointwise, Reduction, View, ComputedBuffer, ExternKernel, ReferenceHandler
    schedule / Scheduler, FusionReport      can_fuse, score_fusion, why-not-fused (scheduler.py)
    fusion_legality   fusion_refusal: may these buffers be one kernel? decided on the IR,
                      walked in the kernel writers' order, before any code is written
    codegen.cpp, codegen.triton             the two kernel writers; codecache: disk cache
    wrapper       the Python function that allocates buffers and calls the kernels
    codegen.triton_template                 the Triton matmul template (max-autotune), with
                                            fused epilogues; autotune: choices + timing table
    examples      softmax, layernorm, rmsnorm, chain, mlp, all_pointwise (+ torch versions)
    config        the stage's knobs (fusion limits, C++/Triton block sizes), each with why

Mirrors: torch/_inductor (ir.py, lowering.py, scheduler.py, codegen/, codecache.py,
compile_fx.py).
"""

from . import codecache, examples, ir
from .compile_fx import (
    CODEGENS,
    CompiledGraph,
    LazyCompiledGraph,
    compile_fx,
    default_codegen,
    inductor_backend,
    inner_compiler,
)
from .lowering import GraphLowering, evaluate_lowering, lower_graph, lowerings, register_lowering
from .scheduler import FusionReport, Scheduler, schedule

__all__ = [
    "CODEGENS", "CompiledGraph", "FusionReport", "GraphLowering", "LazyCompiledGraph",
    "Scheduler", "codecache", "compile_fx", "default_codegen", "evaluate_lowering", "examples",
    "inductor_backend", "inner_compiler", "ir", "lower_graph", "lowerings",
    "register_lowering", "schedule",
]
