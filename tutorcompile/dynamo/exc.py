"""Why capture stopped: the graph-break signal and the error ``fullgraph=True`` raises.

:class:`Unsupported` is raised *inside* symbolic execution when an instruction cannot be put
in a graph (``print``, ``.item()``, a branch on a tensor, ...). It derives from
``BaseException`` on purpose: user code being traced may contain ``try/except Exception``,
and that must not swallow our signal. The translator catches it at the top frame and turns
it into a graph break at the instruction being executed there.

Mirrors: torch/_dynamo/exc.py.
"""

from __future__ import annotations

from ..errors import TutorcompileError


class Unsupported(BaseException):  # noqa: N818 (PyTorch's name)
    """Symbolic execution cannot continue here; ``reason`` says why (a graph break)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        # set by the translator as the signal leaves an instruction: where it was raised
        # (filename, line, source text), and whether the traced code itself raised there
        self.location: tuple[str, int | None, str] | None = None
        self.raised = False


class TracedException(Exception):  # noqa: N818 (it carries one)
    """An exception the traced code raised (``exc``: a ``raise`` statement, or a Python
    operation on constants such as ``10 // 0`` or ``{}[k]``), propagating to its handler in
    the traced frames; one that leaves the compiled frame is a graph break, so the real run
    raises it."""

    def __init__(self, exc: BaseException):
        super().__init__(exc)
        self.exc = exc


class AssumptionFailed(Exception):  # noqa: N818 (a signal, like Unsupported)
    """A compiled graph's checked assumption did not hold on this call (a validation branch
    that raises was taken): the frame runs uncompiled instead, so the program raises what
    it raises. See ``InstructionTranslator.assume_branch``."""


class GraphBreakError(TutorcompileError):
    """Raised instead of breaking the graph when ``fullgraph=True``."""

    def __init__(self, reason: str, filename: str, lineno: int | None, source_line: str):
        self.reason, self.filename, self.lineno, self.source_line = \
            reason, filename, lineno, source_line
        super().__init__(
            f"fullgraph=True, but the function cannot be captured as one graph:\n"
            f"  graph break: {reason}\n"
            f"  at {filename.rsplit('/', 1)[-1]}:{lineno}\n"
            f"      {source_line}")


class RecompileLimitWarning(UserWarning):
    """A frame hit the recompile limit and now runs uncompiled."""
