"""Stage 3: graph breaks -- reasons with source lines, correct resumption, fullgraph, explain."""

import functools

import pytest
import torch
import torch._dynamo

from tutorcompile.dynamo import eval_frame
from tutorcompile.dynamo.debugging import explain
from tutorcompile.dynamo.eval_frame import cache_entries
from tutorcompile.dynamo.exc import GraphBreakError, Unsupported
from tutorcompile.errors import TutorcompileError

# These tests check capture, guards and breaks: the eager backend runs each captured
# graph as it is (tutorcompile.compile's default backend, 'inductor', adds AOT and codegen).
compile_eager = functools.partial(eval_frame.compile, backend="eager")

pytestmark = pytest.mark.stage3

SEEN: list = []


@pytest.fixture(autouse=True)
def _fresh(fresh_compiler):
    SEEN.clear()


def with_print(x):
    y = x.sin()
    print("between graphs")
    return y.cos() + 1


def test_print_breaks_into_two_graphs_and_prints_once(capsys):
    x = torch.randn(3)
    out = explain(with_print)(x)
    assert capsys.readouterr().out == "between graphs\n"
    assert out.graph_count == 2 and out.graph_break_count == 1
    br = out.break_reasons[0]
    assert "print()" in br.reason
    assert br.source_line == 'print("between graphs")'
    assert br.filename.endswith("test_stage3_breaks.py")
    c = compile_eager(with_print)
    torch.testing.assert_close(c(x), with_print(x))
    torch.testing.assert_close(c(x), with_print(x))
    assert capsys.readouterr().out.count("between graphs") == 4
    assert len(cache_entries(with_print)) == 2  # one per segment, reused on the 2nd call


def item_and_tolist(x):
    s = x.sum().item()
    n = len(x.tolist())
    return x * s + n


def test_item_and_tolist_break_and_use_the_real_value():
    x = torch.randn(4)
    out = explain(item_and_tolist)(x)
    reasons = [b.reason for b in out.break_reasons]
    assert any("item()" in r for r in reasons) and any("tolist()" in r for r in reasons)
    torch.testing.assert_close(compile_eager(item_and_tolist)(x), item_and_tolist(x))


def branchy(x):
    y = x * 2
    if y.sum() > 0:
        z = y + 100
    else:
        z = y - 100
    return z * 3


def test_data_dependent_branch_continues_on_the_taken_side_with_own_caches():
    c = compile_eager(branchy)
    pos, neg = torch.ones(3), -torch.ones(3)
    torch.testing.assert_close(c(pos), branchy(pos))
    torch.testing.assert_close(c(neg), branchy(neg))
    torch.testing.assert_close(c(pos), branchy(pos))
    starts = sorted({e.start_ip for e in cache_entries(branchy)})
    assert len(starts) == 3  # function start + one resume point per side of the `if`
    out = explain(branchy)(pos)
    assert "data-dependent" in out.break_reasons[0].reason
    assert out.break_reasons[0].source_line == "if y.sum() > 0:"


def swallowing(x):
    try:
        y = x + 1
        print("inside try")
    except Exception:
        return None
    return y * 2


def test_break_signal_is_not_swallowed_by_user_except_exception(capsys):
    assert issubclass(Unsupported, BaseException) and not issubclass(Unsupported, Exception)
    x = torch.ones(2)
    torch.testing.assert_close(compile_eager(swallowing)(x), swallowing(x))
    assert explain(swallowing)(x).graph_break_count == 1


def calls_c_function(x):
    import zlib
    return x + zlib.crc32(b"a") % 3


def mutates_outside(x):
    SEEN.append(x.shape[0])
    return x * 2


def test_unknown_c_function_breaks_and_outside_mutation_is_replayed_once():
    x = torch.ones(3)
    out = explain(mutates_outside)(x)
    # the append to a global list is a side effect replayed after the graph (no break)
    assert out.graph_break_count == 0
    assert SEEN == [3]
    torch.testing.assert_close(compile_eager(mutates_outside)(x), x * 2)
    assert SEEN == [3, 3]
    torch.testing.assert_close(compile_eager(calls_c_function)(x),
                               calls_c_function(x))


def helper_that_prints(t):
    t = t * 2
    print("helper")
    return t + 1


def outer(x):
    return helper_that_prints(x + 1) - 1


def test_break_inside_a_callee_compiles_the_callee_separately():
    x = torch.randn(3)
    out = explain(outer)(x)
    # outer: x + 1 | helper: t * 2 | helper: t + 1 | outer: - 1, as torch._dynamo (which
    # counts one more break: it also records the print when inlining into outer fails)
    assert out.graph_count == 4 and out.graph_break_count == 2
    torch._dynamo.reset()
    theirs = torch._dynamo.explain(outer)(x)
    torch._dynamo.reset()
    assert theirs.graph_count == out.graph_count
    torch.testing.assert_close(compile_eager(outer)(x), outer(x))
    assert cache_entries(helper_that_prints)


def loop_with_print(x):
    for i in range(3):
        x = x + i
        print(i)
    return x


def test_break_in_a_loop_skips_the_frame_but_stays_correct():
    x = torch.zeros(2)
    out = explain(loop_with_print)(x)
    assert out.graph_count == 0 and out.skipped_frames
    torch.testing.assert_close(compile_eager(loop_with_print)(x), loop_with_print(x))


def test_fullgraph_names_the_reason_and_line():
    with pytest.raises(GraphBreakError) as info:
        compile_eager(with_print, fullgraph=True)(torch.ones(2))
    msg = str(info.value)
    assert "print() has a side effect" in msg
    assert 'print("between graphs")' in msg
    assert info.value.lineno == with_print.__code__.co_firstlineno + 2


def test_fullgraph_passes_for_a_clean_rewrite():
    def rewritten(x):
        y = x.sin()
        z = torch.where(y.sum() > 0, y + 100, y - 100)
        return z.cos() + 1
    x = torch.randn(3)
    out = compile_eager(rewritten, fullgraph=True)(x)
    torch.testing.assert_close(out, rewritten(x))


def test_explain_reports_recompiles_and_guards():
    def f(x):
        return x * 2
    run = explain(f)
    run(torch.ones(2))
    out = run(torch.ones(2, dtype=torch.float64))
    assert out.graph_count == 2
    assert "dtype: expected torch.float32, got torch.float64" in out.recompile_log[0]
    assert any("check_tensor(L['x']" in g for g in out.guards[0])
    text = str(out)
    assert "Graph Count: 2" in text and "Recompiles:" in text


def test_fullgraph_is_not_fooled_by_graphs_cached_for_another_config():
    compile_eager(with_print)(torch.ones(2))  # breaks are fine here
    with pytest.raises(GraphBreakError):
        compile_eager(with_print, fullgraph=True)(torch.ones(2))


def unpacks_a_generator(q, k):
    a, b = (t * 2 for t in (q, k))
    return a - b


def test_objects_on_a_rebuilt_stack_are_this_calls_objects():
    c = compile_eager(unpacks_a_generator)
    for _ in range(3):  # the generator is a new object on every call
        q, k = torch.randn(2), torch.randn(2)
        torch.testing.assert_close(c(q, k), unpacks_a_generator(q, k))


def test_stage3_artifacts_go_through_tutorcompile_logs(capsys):
    import tutorcompile
    tutorcompile.set_logs(graph_breaks=True, guards=True, recompiles=True, graph_code=True)
    try:
        c = compile_eager(with_print)
        c(torch.ones(2))
        c(torch.ones(3))
    finally:
        tutorcompile.set_logs()
    out = capsys.readouterr().out
    assert "[tutorcompile:graph_breaks] with_print" in out
    assert 'print("between graphs")' in out
    assert "[tutorcompile:guards] with_print" in out and "check_tensor(L['x']" in out
    assert "[tutorcompile:graph_code] with_print" in out and "sin = l_x.sin()" in out
    assert "[tutorcompile:recompiles] with_print" in out


def zeros_made_a_leaf(q, w):
    x = q @ w  # MRA's attention without its CUDA kernel: a zero leaf that asks for grad
    return x + torch.zeros_like(x).requires_grad_(), torch.ones_like(x).requires_grad_()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_requires_grad_on_an_intermediate_breaks_and_matches_eager(backend):
    """``requires_grad_()`` changes autograd state, not a value: the functional graph has no
    op for it (AOT once looked up ``Tensor.requires_grad``, a property, as its functional
    form and crashed). It breaks, as in PyTorch's Dynamo, and eager runs it."""
    q, w = torch.randn(3, 4), torch.randn(4, 4, requires_grad=True)
    out = explain(zeros_made_a_leaf)(q, w)
    assert out.graph_break_count == 2
    assert all("requires_grad_" in br.reason for br in out.break_reasons)
    eval_frame.reset()
    got, leaf = eval_frame.compile(zeros_made_a_leaf, backend=backend)(q, w)
    want, want_leaf = zeros_made_a_leaf(q, w)
    torch.testing.assert_close(got, want)
    assert leaf.requires_grad
    (gw,) = torch.autograd.grad(got.sum() + leaf.sum(), [w])
    torch.testing.assert_close(gw, torch.autograd.grad(want.sum(), [w])[0])


def compiling() -> bool:
    # transformers.utils.is_torchdynamo_compiling: no tensor in its arguments, and torch
    # imported inside it, not a global it names
    return __import__("torch").compiler.is_compiling()


def mask_unless_compiling(x, mask=None):
    # LongT5 and SwitchTransformers: no default mask while compiling; eager makes one
    if mask is None and not compiling():
        mask = torch.ones(x.shape[0])
    return x * mask[:, None]


def test_an_exception_the_traced_code_raises_skips_the_frame():
    """Tracing takes the compiling side of the ``if`` and then fails on ``None[:, None]``.
    Breaking just before the failing subscript would run it for real on the traced
    side's None; PyTorch's Dynamo instead runs the whole frame uncompiled, where
    ``compiling()`` is False (a frame without tensors is not captured either)."""
    x = torch.randn(3, 2)
    torch.testing.assert_close(compile_eager(mask_unless_compiling)(x),
                               mask_unless_compiling(x))
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(mask_unless_compiling, backend="eager")(x),
                               mask_unless_compiling(x))


def loop_then_ask(x):
    for i in range(2):
        print(i)  # a break inside a loop: this frame runs uncompiled
    return x if compiling() else x + 1


def test_a_frame_without_tensors_called_from_uncompiled_code_runs_as_plain_python(capsys):
    x = torch.randn(3)
    torch.testing.assert_close(compile_eager(loop_then_ask)(x), x + 1)
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(loop_then_ask, backend="eager")(x), x + 1)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_backward_inside_the_function_is_a_break_and_fills_grad(backend):
    # a training step compiled whole: autograd runs after the graph, through its compiled
    # backward, so every parameter's .grad is written as in eager
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    x = torch.randn(5, 4)

    def step(x):
        loss = model(x).pow(2).mean()
        loss.backward()
        return loss.detach()

    expected = step(x)
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    out = explain(step)(x)
    assert [r.reason.split(" runs ")[0] for r in out.break_reasons] == ["tensor.backward()"]
    model.zero_grad()
    got = eval_frame.compile(step, backend=backend)(x)
    torch.testing.assert_close(got, expected)
    for p, w in zip(model.parameters(), want):
        torch.testing.assert_close(p.grad, w)


def test_autograd_grad_inside_the_function_is_a_break_with_eager_values():
    def penalty(x):
        out = (x @ torch.ones(3, 2)).tanh()
        (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        return (g.norm(dim=1) - 1).pow(2).mean()

    x = torch.randn(4, 3, requires_grad=True)
    out = explain(penalty)(x)
    assert len(out.break_reasons) == 1 and "torch.autograd.grad" in out.break_reasons[0].reason
    torch.testing.assert_close(compile_eager(penalty)(x), penalty(x))


def test_a_class_statement_inside_the_function_runs_and_is_one_break():
    def make(x):
        class Scale:
            factor = 3

        return x * Scale.factor

    x = torch.randn(3)
    out = explain(make)(x)
    assert [r.reason.split(" (")[0] for r in out.break_reasons] == [
        "a class statement inside the compiled function"]
    torch.testing.assert_close(compile_eager(make)(x), x * 3)


def test_a_second_derivative_through_an_aot_graph_is_refused_not_silently_zero():
    # the backward graph runs on saved values with no autograd history: its gradients
    # would be constants to a second backward (a gradient penalty's term would vanish)
    def features(x, w):
        return (x @ w).tanh()

    x, w = torch.randn(4, 3, requires_grad=True), torch.randn(3, 2, requires_grad=True)
    (g,) = torch.autograd.grad(compile_eager(features)(x, w).sum(), x, create_graph=True)
    (want,) = torch.autograd.grad(features(x, w).sum(), x, create_graph=True)
    torch.testing.assert_close(torch.autograd.grad(g.pow(2).sum(), w)[0],
                               torch.autograd.grad(want.pow(2).sum(), w)[0])
    out = eval_frame.compile(features, backend="aot_eager")(x, w)
    with pytest.raises(TutorcompileError, match="second derivative"):
        torch.autograd.grad(out.sum(), x, create_graph=True)
    (plain,) = torch.autograd.grad(out.sum(), x)   # a first derivative is fine
    torch.testing.assert_close(plain, want.detach())


def _in_place_views_of_inputs(x, y):
    x.t_()
    y.unsqueeze_(0)
    return x + 1, y * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_an_in_place_view_of_an_input_is_a_break_and_changes_the_callers_tensor(backend):
    """``x.t_()`` on an argument changes the caller's tensor's shape: the AOT runtime writes
    values back into inputs, not metadata (it raised), so capture breaks there, as
    torch.compile does, and the op runs on the real tensor."""
    a, b = torch.randn(2, 3), torch.randn(4)
    a2, b2 = a.clone(), b.clone()
    want = _in_place_views_of_inputs(a2, b2)
    explained = explain(_in_place_views_of_inputs)(a.clone(), b.clone())
    assert any("t_() on an input" in str(r) for r in explained.break_reasons)
    got = eval_frame.compile(_in_place_views_of_inputs, backend=backend)(a, b)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    assert (a.shape, b.shape) == (a2.shape, b2.shape) == ((3, 2), (1, 4))


def _user_break_helper(t):
    torch._dynamo.graph_break("in the helper")
    return t - 1


def user_graph_breaks(x, acc):
    from torch._dynamo import graph_break
    x = x + 1
    acc.append(len(acc))
    torch._dynamo.graph_break()
    x = _user_break_helper(x * 2)
    graph_break(msg="before the end")
    return x * 3


def test_torch_dynamo_graph_break_is_a_break_with_a_reason():
    # ``torch._dynamo.graph_break()`` is ``pass`` in Python: inlined, it vanished and the
    # function stayed one graph; it is a break the user asked for, in every spelling, as in
    # torch.compile
    out = explain(user_graph_breaks)(torch.ones(2), [])
    reasons = [str(r.reason) for r in out.break_reasons]
    assert out.graph_count >= 3 and len(reasons) >= 3, reasons
    assert all("torch._dynamo.graph_break() called" in r for r in reasons)
    assert any("in the helper" in r for r in reasons)
    assert any("before the end" in r for r in reasons)
    want_acc, got_acc = [], []
    want = user_graph_breaks(torch.ones(2), want_acc)
    torch.testing.assert_close(compile_eager(user_graph_breaks)(torch.ones(2), got_acc), want)
    assert got_acc == want_acc
    with pytest.raises(GraphBreakError, match="graph_break"):
        compile_eager(user_graph_breaks, fullgraph=True)(torch.ones(2), [])
