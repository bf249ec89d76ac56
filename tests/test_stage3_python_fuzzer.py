"""Stage 3: random Python programs (``tests/python_fuzzer.py``) -- fixed seeds, and a small
hand-written program for each class of defect the fuzzer found.

Each seed's program mixes tensor calls with Python control flow, containers, closures,
generators, exceptions, context managers and side effects that escape the function; compiled
with ``backend="eager"`` it must return eager's values and leave every global, the caller's
list and the input tensors as eager does, over four calls (the compile, a cache hit, another
Python int, another leading size).
"""

import collections

import pytest
import torch

import tutorcompile as tc
from tests import python_fuzzer

pytestmark = pytest.mark.stage3

# seeds whose programs met a defect that is now fixed (the hand-written test below that
# names the defect) -> whether the program is one graph
SEEDS = {
    16: True,    # ``acc *= 2`` on the caller's list (in_place_list_operators)
    24: True,    # ``raise ... from e`` read back in the handler (exceptions_chain)
    98: False,   # both, and ``fn.__closure__[0].cell_contents`` (closure_cell)
    54: True,    # ``cell_contents`` broke the graph
}


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_random_python_program_matches_eager(seed):
    program = python_fuzzer.make_program(seed)
    result = python_fuzzer.check(program)
    assert result.ok, "\n".join(result.wrong + result.crashed) + "\n" + program.source
    assert (result.graphs == 1 and not result.breaks) == SEEDS[seed], result.breaks


def _run_both(fn, *make_args):
    """``fn`` eager and compiled (one graph) on equal fresh arguments: results and args."""
    want_args, got_args = make_args[0](), make_args[0]()
    want = fn(*want_args)
    tc.reset()
    got = tc.compile(fn, backend="eager", fullgraph=True)(*got_args)
    assert python_fuzzer.differences(got, want) == []
    assert python_fuzzer.differences(list(got_args), list(want_args)) == []


def _list_operators(x, acc):
    acc *= 2                  # list.__imul__: the caller's list, repeated in place
    alias = acc
    alias += "ab"             # list.__iadd__ takes any iterable: a str, a range, a dict
    alias += range(2)
    alias += {"key": 1}
    alias += (x,)
    local = [x]
    seen = local
    local *= 0
    q = collections.deque([1, 2], maxlen=3)
    q *= 2                    # (a deque keeps its last maxlen items)
    q += [5]
    t = (1, x)
    t *= 2                    # a tuple's ``*=`` makes a new tuple
    acc.append(len(seen))
    acc.extend(q)
    return x + len(acc) + len(t)


def test_in_place_list_operators_write_into_the_list():
    # ``acc *= 2`` folded the constant list into a new one: the caller's list stayed as it
    # was (a silent wrong answer); ``acc += "ab"`` likewise; a tuple's ``*=`` broke the graph
    _run_both(_list_operators, lambda: (torch.ones(2), [1, 2]))


class _Boom(Exception):
    pass


def _raise_boom():
    raise _Boom("inner")


def _exception_chains(x):
    try:   # raise ... from e: __cause__
        try:
            raise ValueError("in")
        except ValueError as e:
            raise _Boom("out") from e
    except _Boom as e:
        x = x + isinstance(e.__cause__, ValueError) + 2 * isinstance(e.__context__, ValueError)
    try:   # raised while handling another (in a called function): __context__
        try:
            {}["key"]
        except KeyError:
            _raise_boom()
    except _Boom as e:
        x = x + 4 * isinstance(e.__context__, KeyError) + 8 * (e.__cause__ is None)
    try:   # raise ... from None: no cause, the context hidden
        try:
            raise ValueError
        except ValueError:
            raise _Boom from None
    except _Boom as e:
        x = x + 16 * e.__suppress_context__ + 32 * (e.__cause__ is None)
    try:   # an error of an operation, raised in a handler
        try:
            raise KeyError("a")
        except KeyError:
            x = x + [][1]
    except IndexError as e:
        x = x + 64 * isinstance(e.__context__, KeyError)
    return x


def test_exceptions_chain_their_cause_and_context():
    # ``raise X from e`` left __cause__ unset and an exception raised in a handler had no
    # __context__, both in the traced code and in the VM that runs a frame after a break:
    # a handler reading them got None (a silent wrong answer)
    _run_both(_exception_chains, lambda: (torch.zeros(2),))
    from tutorcompile.dynamo.vm import VM
    assert VM().run(VM().make_frame(_exception_chains, [0], {})) == _exception_chains(0)


def _make_counter():
    n = 0

    def bump():
        nonlocal n
        n += 1
        return n
    return bump


def _cell_contents(x, counter):
    before = counter.__closure__[0].cell_contents
    counter()
    counter.__closure__[0].cell_contents += 10

    def inner():
        return x
    return x + before + counter() + inner.__closure__[0].cell_contents


def test_a_closure_cell_is_read_and_written_through_cell_contents():
    # ``fn.__closure__[0].cell_contents`` broke the graph ('attribute cell_contents of
    # ClosureCellVariable()'); a write to it is a ``nonlocal`` write, replayed after the graph
    eager_counter, compiled_counter = _make_counter(), _make_counter()
    compiled = tc.compile(_cell_contents, backend="eager", fullgraph=True)
    for _ in range(2):   # the second call: the guard on the cell's new contents
        want = _cell_contents(torch.zeros(2), eager_counter)
        torch.testing.assert_close(compiled(torch.zeros(2), compiled_counter), want)
        assert compiled_counter() == eager_counter()
