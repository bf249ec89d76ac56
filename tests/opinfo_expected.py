"""The OpInfo sweep's expected failures, per backend: ``op name -> (parts, reason)``.

``parts`` says what fails (``"forward"``: the compiled call raises; ``"backward"``: its
gradient raises); the reason names the root cause and, where the fix belongs to another part
of the compiler, where. The list only shrinks: ``tests/test_opinfo_sweep.py`` fails for an op
on it that now passes (strict, like ``xfail(strict=True)``) and for an op not on it that
fails. A silently wrong answer is never listed: it fails the sweep outright.
"""

_SPARSE_CSR = ("the TENSOR_MATCH guard asks a sparse CSR input for its strides; Dynamo should "
               "break the graph there, as torch.compile does (Dynamo side)")
_HISTOGRAMDD = ("histogramdd returns a named tuple holding a list of tensors; extern nodes "
                "take a tensor or a flat tuple of tensors")
_SPARSE_RESULT = ("the inductor wrapper calls .contiguous() on every single-output extern "
                  "result, and a sparse tensor has no memory format (inductor/wrapper.py)")

EXPECTED_FAILURES: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {
    "aot_eager": {
        "histogramdd": (("forward",), _HISTOGRAMDD),
        "sparse.mm.reduce": (("forward",), _SPARSE_CSR),
        "sparse.sampled_addmm": (("forward",), _SPARSE_CSR),
    },
    "inductor": {
        "histogramdd": (("forward",), _HISTOGRAMDD),
        "sparse.mm.reduce": (("forward",), _SPARSE_CSR),
        "sparse.sampled_addmm": (("forward",), _SPARSE_CSR),
        "to_sparse": (("forward",), _SPARSE_RESULT),
    },
}
