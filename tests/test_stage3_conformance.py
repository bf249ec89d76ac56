"""Runs the conformance suite (tests/dynamo_conformance, stdlib unittest) under pytest, so the
default interpreter's run covers it: the torch-free VM tests (CI also runs them on 3.12/3.13)
and the corpus through tutorcompile.compile(fullgraph=True), which needs torch."""

import os
import sys
import unittest

import pytest

# the suite imports itself as ``tests.dynamo_conformance`` (the unittest command's -t .)
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

pytestmark = pytest.mark.stage3


def _suite_tests():
    loader = unittest.TestLoader()
    from tests.dynamo_conformance import test_fullgraph_conformance, test_vm_conformance
    suite = unittest.TestSuite([loader.loadTestsFromModule(test_vm_conformance),
                                loader.loadTestsFromModule(test_fullgraph_conformance)])
    out = []

    def flatten(s):
        for t in s:
            if isinstance(t, unittest.TestSuite):
                flatten(t)
            else:
                out.append(t)
    flatten(suite)
    return out


@pytest.mark.parametrize("case", _suite_tests(), ids=lambda t: t.id().split(".", 3)[-1])
def test_vm_conformance(case):
    result = unittest.TestResult()
    case.run(result)
    problems = result.failures + result.errors
    assert not problems, "\n".join(text for _, text in problems)
    assert result.testsRun == 1
