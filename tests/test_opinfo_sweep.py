"""Every op of PyTorch's OpInfo database through ``tc.compile``, against eager.

One test per op and backend (``aot_eager``: our AOTAutograd, prim graphs run as they are;
``inductor``: plus generated C++ kernels): float32 on CPU, a few of the op's own samples,
forward values and the gradients of every floating-point input compared with eager PyTorch
(see ``tests/opinfo_sweep.py`` for what is compared and how).

The expected failures (``tests/opinfo_expected.py``) are strict: an op on the list that now
passes fails its test until it is taken off, so the list can only shrink. A silently wrong
answer -- values or gradients that differ from eager with no error -- is never expected.
The terminal summary gives the counts per backend (forward right, generated kernels,
gradients right, silently wrong); ``python tests/opinfo_sweep.py`` prints the same sweep.
"""

from __future__ import annotations

import json
import warnings

import pytest

from tests.opinfo_expected import EXPECTED_FAILURES, KERNEL_OPS
from tests.opinfo_sweep import BACKENDS, op_name, run_op, sweep_ops

pytestmark = pytest.mark.stage4

OPS = sweep_ops()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", OPS, ids=op_name)
def test_opinfo(op, backend, record_property):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_op(op, backend)
    record_property("opinfo", json.dumps({
        "backend": backend, "name": result.name, "forward": result.forward,
        "backward": result.backward, "kernels": result.kernels,
        "extern": sorted(result.extern)}))
    assert not result.silently_wrong, \
        f"{result.name} ({backend}) is silently wrong: {result.message}"
    if backend == "inductor" and result.name in KERNEL_OPS and result.forward == "ok":
        assert result.kernels > 0, (
            f"{result.name} no longer compiles to a generated kernel (extern: "
            f"{sorted(result.extern)}); it is on KERNEL_OPS in tests/opinfo_expected.py")
    expected = EXPECTED_FAILURES[backend].get(result.name)
    failures = result.failures()
    if expected is None:
        assert not failures, f"{result.name} ({backend}) fails {sorted(failures)}: " \
                             f"{result.message}"
    else:
        parts, reason = expected
        assert failures == set(parts), (
            f"{result.name} ({backend}) was expected to fail {sorted(parts)} ({reason}) but "
            f"fails {sorted(failures) or 'nothing'}: update tests/opinfo_expected.py"
            + (f" ({result.message})" if result.message else ""))


def test_expected_failures_name_real_ops():
    names = {op_name(op) for op in OPS}
    assert KERNEL_OPS <= names, sorted(KERNEL_OPS - names)
    for backend, table in EXPECTED_FAILURES.items():
        assert backend in BACKENDS
        assert set(table) <= names, sorted(set(table) - names)
        for parts, reason in table.values():
            assert parts and set(parts) <= {"forward", "backward"} and reason
