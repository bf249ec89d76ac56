"""Stage 3: a branch on a tensor whose one side only raises (argument validation) is traced
as a checked assumption -- one graph -- and a call that fails the check runs uncompiled, so
it raises exactly what eager raises."""

import pytest
import torch

import tutorcompile as tc
from tests.capture_cases import (
    CALLS,
    an_or_whose_second_operand_writes,
    checks_either_direction,
    checks_then_computes,
    writes_its_own_tensor_then_checks,
)
from tutorcompile.dynamo import eval_frame

pytestmark = [pytest.mark.stage3, pytest.mark.usefixtures("fresh_compiler")]

BACKENDS = ["eager", "aot_eager", "inductor"]
D = torch.distributions


def normal_log_prob(loc, scale, x):
    # every torch.distributions constructor validates its arguments (validate_args is on
    # by default -- asked for here, as eager flex_attention turns the default off for the
    # rest of the process): ``if not torch._is_all_true(valid): raise ValueError(...)``
    return D.Normal(loc, scale, validate_args=True).log_prob(x).sum()


def _raised(fn, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 -- the exception itself is what is compared
        return type(e), str(e)
    return None


CASES = {
    "normal_log_prob": (normal_log_prob,
                        lambda: (torch.randn(3), torch.rand(3) + 0.1, torch.randn(3)),
                        lambda: (torch.randn(3), -torch.rand(3), torch.randn(3))),
    "checks_then_computes": (checks_then_computes, lambda: (torch.randn(4),),
                             lambda: (torch.full((4,), -10.0),)),
    "writes_its_own_tensor_then_checks": (writes_its_own_tensor_then_checks,
                                          lambda: (torch.randn(4),),
                                          lambda: (torch.full((4,), 1000.0),)),
    "checks_either_direction": (checks_either_direction,
                                lambda: (torch.randn(3), torch.linspace(1.0, 0.0, 4)),
                                lambda: (torch.randn(3), torch.tensor([0.0, 2.0, 1.0, 3.0]))),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(CASES))
def test_a_validation_branch_is_one_graph_and_a_failed_check_raises_what_eager_raises(
        name, backend):
    fn, good, bad = CASES[name]
    assert len(tc.explain(fn)(*good()).graphs) == 1
    tc.reset()
    compiled = tc.compile(fn, backend=backend, fullgraph=True)
    args = [a.requires_grad_() for a in good()]
    got, expected = compiled(*args), fn(*args)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(torch.autograd.grad(got.sum(), args),
                               torch.autograd.grad(expected.sum(), args))
    wrong = [a.requires_grad_() for a in bad()]   # (the same guards as args)
    failure = _raised(fn, *wrong)
    assert failure is not None and _raised(compiled, *wrong) == failure
    torch.testing.assert_close(compiled(*args), expected)   # the graph still serves
    entries = [e for (code, _), c in eval_frame._CACHES.items() if code is fn.__code__
               for es in c.entries.values() for e in es]
    assert len(entries) == 1   # a failed check is no recompile (of this frame: a helper
    # that checks, rerun uncompiled, compiles a graph of its own)


def caught_inside(x):
    try:
        if (x < 0).any():
            raise ValueError("negative")
        y = x.sqrt()
    except ValueError:
        y = -x
    return y + 1


def test_a_check_whose_raise_is_caught_runs_the_handler_as_eager_does():
    compiled = tc.compile(caught_inside, backend="eager")
    for x in (torch.rand(3), -torch.rand(3), torch.rand(3)):
        torch.testing.assert_close(compiled(x), caught_inside(x))


def writes_then_checks(x, buf):
    buf.add_(1)   # running the graph and then the frame again would add twice
    if (x < 0).any():
        raise ValueError("negative")
    return x + buf


def draws_then_checks(x):
    noise = torch.rand_like(x)   # a rerun would draw again: another result
    if (x < 0).any():
        raise ValueError("negative")
    return x + noise


BN = torch.nn.BatchNorm1d(3)


def normalizes_then_checks(x):
    h = BN(x)   # in training: writes BN's running statistics, as an in-place op would
    if (x < 0).any():
        raise ValueError("negative")
    return h


def writes_a_view_then_checks(x, buf):
    buf.detach()[1:].mul_(2)   # a view of an input: the same storage, written twice
    if (x < 0).any():
        raise ValueError("negative")
    return x + buf


def test_a_graph_that_writes_or_draws_keeps_the_branch_a_break():
    x, buf = torch.rand(3), torch.zeros(3)
    (reason,) = tc.explain(writes_then_checks)(x, buf).break_reasons
    assert "writes a tensor in place or draws random numbers" in reason.reason  # (says why)
    assert len(tc.explain(writes_a_view_then_checks)(x, buf).break_reasons) == 1
    assert len(tc.explain(draws_then_checks)(x).break_reasons) == 1
    assert len(tc.explain(normalizes_then_checks)(torch.rand(4, 3)).break_reasons) == 1
    BN.eval()   # no statistics written: the check is assumed, one graph
    assert len(tc.explain(normalizes_then_checks)(torch.rand(4, 3)).break_reasons) == 0
    BN.train()
    tc.reset()
    compiled = tc.compile(writes_then_checks, backend="eager")
    mine, theirs = torch.zeros(3), torch.zeros(3)
    with pytest.raises(ValueError, match="negative"):
        compiled(-x, mine)
    with pytest.raises(ValueError, match="negative"):
        writes_then_checks(-x, theirs)
    assert torch.equal(mine, theirs)   # added once


def test_only_a_side_that_does_nothing_but_raise_is_assumed_away():
    def raises_on_one_side(x):
        if x.sum() > 0:
            x = x + 1
        else:
            raise ValueError("x")
        return x * 2

    def writes_then_raises(x):
        if x.sum() > 0:
            x = x + 1
        else:
            SEEN.append("negative")   # work before the raise: not a plain check
            raise ValueError("x")
        return x * 2

    def no_raise(x):
        if x.sum() > 0:
            x = x + 1
        return x * 2

    assert len(tc.explain(raises_on_one_side)(torch.ones(2)).break_reasons) == 0
    assert len(tc.explain(writes_then_raises)(torch.ones(2)).break_reasons) == 1
    assert len(tc.explain(no_raise)(torch.ones(2)).break_reasons) == 1


SEEN: list = []


def test_an_or_whose_later_operand_writes_runs_as_eager():
    """``assert a or f(x)`` where ``f`` appends to a list: the append happens in eager only
    when ``a`` is false, so the capture does not take it as done; the frame runs
    uncompiled, with eager's values and eager's appends."""
    compiled = tc.compile(an_or_whose_second_operand_writes, backend="eager")
    CALLS.clear()
    torch.testing.assert_close(compiled(torch.ones(3)), torch.ones(3) * 2)
    assert CALLS == []
    torch.testing.assert_close(compiled(-torch.ones(3)), -torch.ones(3) * 2)
    assert CALLS == [1]
    with pytest.raises(AssertionError, match="out of range"):
        compiled(torch.tensor([-1.0, 1000.0, 1.0]))
