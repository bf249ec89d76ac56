"""The OpInfo sweep's expected failures, per backend: ``op name -> (parts, reason)``.

``parts`` says what fails (``"forward"``: the compiled call raises; ``"backward"``: its
gradient raises); the reason names the root cause and, where the fix belongs to another part
of the compiler, where. The list only shrinks: ``tests/test_opinfo_sweep.py`` fails for an op
on it that now passes (strict, like ``xfail(strict=True)``) and for an op not on it that
fails. A silently wrong answer is never listed: it fails the sweep outright.
"""

_HISTOGRAMDD = ("histogramdd returns a named tuple holding a list of tensors; extern nodes "
                "take a tensor or a flat tuple of tensors")

EXPECTED_FAILURES: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {
    "aot_eager": {
        "histogramdd": (("forward",), _HISTOGRAMDD),
    },
    "inductor": {
        "histogramdd": (("forward",), _HISTOGRAMDD),
    },
}
