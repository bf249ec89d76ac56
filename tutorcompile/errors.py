"""The one base of the errors tutorcompile raises about *your* program.

``except tutorcompile.TutorcompileError`` catches every one of them: a graph that breaks an
invariant (:class:`~tutorcompile.fx.graph.GraphLintError`), code the symbolic tracer cannot
follow (:class:`~tutorcompile.fx.proxy.TraceError`), a graph break under ``fullgraph=True``
(:class:`~tutorcompile.dynamo.exc.GraphBreakError`), an in-place pattern functionalization
cannot rewrite (:class:`~tutorcompile.aot.functionalize.FunctionalizationError`), an op the
fusion compiler cannot lower (:class:`~tutorcompile.inductor.lowering.LoweringError`). Each
is also a ``RuntimeError``, as before. Bad arguments stay ``ValueError`` / ``TypeError``.
A fallback that loses speed but not correctness is a :class:`FallbackWarning`.

Mirrors: ``torch._dynamo.exc.TorchDynamoException``.
"""


class TutorcompileError(RuntimeError):
    """Base of the errors tutorcompile raises about the program it compiles."""


class FallbackWarning(UserWarning):
    """Something runs a slower way than asked, and still gives the right answer: no C++
    compiler, so Triton's interpreter; neither, so the prim graph op by op. Silence it with
    ``warnings.filterwarnings("ignore", category=tutorcompile.FallbackWarning)``."""


__all__ = ["FallbackWarning", "TutorcompileError"]
