"""Random PyTorch programs through the whole compiler (``tests/program_fuzzer.py``).

A handful of seeds, each a straight line of 14 PyTorch calls on random shapes, compiled with
the inductor and checked by PyTorch's own accuracy rule: outputs of a first call, a cache
hit with other values and a call with another leading size, and the inputs' gradients. The
seeds below are mostly ones whose programs found bugs (named with each); the fuzzer itself runs
hundreds: ``python -m tests.program_fuzzer --seeds 0:200``.
"""

import pytest

from tests.program_fuzzer import BASIC_KINDS, check, make_program
from tutorcompile.environment import probe

pytestmark = [pytest.mark.stage6,
              pytest.mark.skipif(not probe().has_cxx, reason="no C++ compiler")]

# (seed, statements) -> what the program found; drawn from the first fuzzer's templates
SEEDS = {
    (0, 10): "relu of a tiled reduction's accumulator did not compile (decltype of an lvalue)",
    (42, 14): "a sort of a computed tensor: ranks from two recomputations, an index out of "
              "bounds",
    (43, 14): "the same, silently: argsort(sin(x)) of 8 elements gave a wrong order",
    (7, 14): "a flat max of normalize's erf: the min-cut recomputed the compared values in "
             "the backward, where a reciprocal missed the saved maximum -- NaN gradients",
    (101, 14): "nothing: log_softmax, var over a dim, clamp_ of a clone, expand",
}


@pytest.mark.parametrize("seed,statements", sorted(SEEDS))
def test_random_program_matches_eager(seed, statements):
    program = make_program(seed, statements, BASIC_KINDS)
    result = check(program)
    assert result.ok, "\n".join(result.problems) + "\n" + program.source
    assert result.graphs == 1 and not result.breaks, (result.breaks, program.source)


@pytest.mark.parametrize("seed,statements", [(7, 14), (0, 10)])
def test_random_program_matches_eager_under_the_min_cut_partitioner(seed, statements):
    """The min-cut recomputes in the backward: seed 7's flat max compared a recomputed value
    with the saved maximum and its gradient was NaN (kernel_min_cut_partition, and the
    lowering's _EQUALITY, keep such comparisons exact)."""
    from tutorcompile.inductor import config
    program = make_program(seed, statements, BASIC_KINDS)
    with config.patch(partitioner="min_cut"):
        result = check(program)
    assert result.ok, "\n".join(result.problems) + "\n" + program.source
