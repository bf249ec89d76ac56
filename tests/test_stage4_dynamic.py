"""Symbolic sizes below Dynamo: the shape environment, and AOT compiled once for every size.

* ShapeEnv: sizes 0 and 1 are specialised, others become symbols with their hints;
  arithmetic stays symbolic and simplified; a decision (comparison, ``int``, ``range``)
  answers from the hints and records the guard it relied on, dropping facts every size >= 2
  satisfies; guards print as Python and are checked against new inputs' sizes.
* ``backend="aot_eager"``: a dynamic dimension stays symbolic through decomposition, the
  joint graph and both partitioners (a size the backward needs is saved as an int, as
  PyTorch saves SymInts), so the capstone MLP compiles once for every batch size, forward
  and training, with eager's values and gradients (float32, 1e-5).
* What the trace relied on is guarded: a size that is unpacked along (``unbind``) or handed
  to a torch function (``torch.arange(n)``) is specialised with a guard naming the line,
  and a size that breaks the guard compiles again instead of giving a wrong answer.
"""

from __future__ import annotations

import pytest
import torch

from tutorcompile.fx.symbolic_shapes import ShapeEnv, SymInt, SymShape, as_shape

pytestmark = pytest.mark.stage4

# --- the shape environment ---------------------------------------------------------------

def test_sizes_become_symbols_with_hints_and_zero_one_are_specialised():
    env = ShapeEnv()
    s0 = env.create_symbol(8, (0, 0))
    assert isinstance(s0, SymInt) and str(s0) == "s0" and s0.hint == 8
    assert env.create_symbol(1, (0, 1)) == 1 and env.create_symbol(0, (1, 0)) == 0
    s1 = env.create_symbol(5, (1, 0))
    assert str(s1) == "s1"
    assert str(s0 * 10 + s0) == "11*s0" and (s0 * 10 + s0).hint == 88
    assert (s0 * 6) // s0 == 6 and str((s0 * 6) // 2) == "3*s0"
    assert str(s0 * s1 // s1) == "s0"
    assert env.guards == []  # arithmetic decides nothing
    shape = as_shape((s0, 4))
    assert isinstance(shape, SymShape) and str(shape.numel()) == "4*s0"
    assert isinstance(as_shape((2, 4)), torch.Size)


def test_decisions_record_guards_and_facts_true_for_every_size_are_dropped():
    env = ShapeEnv()
    s0 = env.create_symbol(8, (0, 0))
    assert s0 != 1 and s0 >= 2 and not (s0 == 0)  # always true: sizes are >= 2
    assert env.guards == []
    assert s0 > 3          # true at the hint: guarded
    assert not (s0 < 5)    # false at the hint: its negation is guarded
    assert list(range(s0)) == list(range(8))  # a count: specialised
    text = env.format_guards()
    assert text.splitlines()[0] == "symbols: s0 = input0.size(0)"
    assert "(s0 > 3)  # compared at test_stage4_dynamic.py" in text
    assert "(s0 >= 5)" in text
    assert "(s0 == 8)  # a size used as an index or count: specialised at" in text
    assert env.check_guards([torch.empty(8)])
    assert not env.check_guards([torch.empty(9)])
    assert str(env.failed_guard([torch.empty(9)])).startswith("(s0 == 8)")
