"""Stage 3: dynamic shapes -- size-generic graphs with symbolic-size guards."""

import functools
import math

import pytest
import torch

from tutorcompile.dynamo import eval_frame
from tutorcompile.dynamo.debugging import explain as tc_explain
from tutorcompile.dynamo.eval_frame import RECOMPILE_LOG, cache_entries

# These tests check capture, guards and breaks: the eager backend runs each captured
# graph as it is (tutorcompile.compile's default backend, 'inductor', adds AOT and codegen).
compile_eager = functools.partial(eval_frame.compile, backend="eager")

pytestmark = [pytest.mark.stage3, pytest.mark.usefixtures("fresh_compiler")]


def flatten_rows(x):
    n = x.shape[0]
    y = x.view(n, -1) * 2
    if n > 3:
        y = y + 1
    return y.sum(1) / n


def test_dynamic_true_gives_one_graph_for_many_batch_sizes():
    c = compile_eager(flatten_rows, dynamic=True)
    for b in (5, 7, 9, 4):
        x = torch.randn(b, 2, 3)
        torch.testing.assert_close(c(x), flatten_rows(x))
    (entry,) = cache_entries(flatten_rows)
    guards = str(entry.check)
    assert "size=[None, None, None]" in guards
    assert "(L['x'].size()[0] > 3)" in guards
    assert "l_x.size(0)" in entry.graph_module.code


def test_symbolic_branch_guard_recompiles_for_the_other_side():
    c = compile_eager(flatten_rows, dynamic=True)
    for b in (5, 2, 3):
        x = torch.randn(b, 2, 3)
        torch.testing.assert_close(c(x), flatten_rows(x))
    assert len(cache_entries(flatten_rows)) == 2


def test_sizes_zero_and_one_are_specialised():
    c = compile_eager(flatten_rows, dynamic=True)
    c(torch.randn(5, 2, 2))
    x = torch.randn(1, 2, 2)
    torch.testing.assert_close(c(x), flatten_rows(x))
    assert len(cache_entries(flatten_rows)) == 2


def scale_by_batch(x):
    return (x * 2).sum(0) + x.shape[0]


def test_automatic_dynamic_after_a_size_change():
    c = compile_eager(scale_by_batch)
    for b in (2, 3, 4, 5, 6):
        x = torch.randn(b, 3)
        torch.testing.assert_close(c(x), scale_by_batch(x))
    entries = cache_entries(scale_by_batch)
    assert len(entries) == 2  # static first, then one size-generic graph
    assert "size=[None, 3]" in str(entries[1].check)
    assert any("marking L['x'] dims [0] as dynamic" in line for line in RECOMPILE_LOG)


def test_every_resized_input_is_marked_dynamic_at_the_first_change():
    def f(x, w):
        return x * w
    c = compile_eager(f)
    for b in (2, 3, 4, 5):
        x, w = torch.randn(b, 3), torch.randn(b, 3)
        torch.testing.assert_close(c(x, w), f(x, w))
    assert len(cache_entries(f)) == 2  # not a third graph when w's size fails next
    assert any("marking L['w'] dims [0] as dynamic" in line for line in RECOMPILE_LOG)


def test_dynamic_false_always_specialises():
    c = compile_eager(scale_by_batch, dynamic=False)
    for b in (2, 3, 4):
        c(torch.randn(b, 3))
    assert len(cache_entries(scale_by_batch)) == 3


def test_intermediate_sizes_stay_sound_under_dynamic_shapes():
    def f(x):
        y = torch.cat([x, x])  # dim 0 is 2*B: computed in the graph, never baked in
        return y.view(y.shape[0], -1).sum(1)
    c = compile_eager(f, dynamic=True)
    for b in (3, 5):
        x = torch.randn(b, 2)
        torch.testing.assert_close(c(x), f(x))


def heads_then_branch(x):
    q = x.view(x.shape[0], x.shape[1], 2, -1).transpose(1, 2)  # (b, 2, t, d/2)
    t = q.shape[2]   # a size of a tensor made in the graph (transformers' ``q_length``)
    return q.sum(2) * 2 if t > 4 else q.sum(2)


def test_a_decision_on_an_intermediate_size_is_guarded_through_its_inputs():
    c = compile_eager(heads_then_branch, dynamic=True)
    for b, t in [(3, 6), (5, 9), (2, 17)]:
        x = torch.randn(b, t, 8)
        torch.testing.assert_close(c(x), heads_then_branch(x))
    (entry,) = cache_entries(heads_then_branch)
    # the symbolic run of the graph so far says ``t`` is L['x'].size()[1]
    assert "(L['x'].size()[1] > 4)" in str(entry.check)
    x = torch.randn(3, 3, 8)  # the other side of the branch: the guard fails, a recompile
    torch.testing.assert_close(c(x), heads_then_branch(x))
    assert len(cache_entries(heads_then_branch)) == 2
    assert tc_explain(heads_then_branch, dynamic=True)(x).graph_break_count == 0


def test_a_constant_shape_tuple_joins_symbolic_sizes():
    def f(x):
        h = x * 2
        return h.view((-1,) + x.shape[1:2] + (h.size(-1),))  # transformers' output_shape
    c = compile_eager(f, dynamic=True)
    for b in (3, 5):
        x = torch.randn(b, 4, 6)
        torch.testing.assert_close(c(x), f(x))
    assert len(cache_entries(f)) == 1


def attention_scores(q, k):
    scale = 1.0 / math.sqrt(k.size(-1))  # a size of an intermediate, used as a float
    return torch.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1)


def test_math_on_symbolic_sizes_stays_in_the_graph():
    c = compile_eager(attention_scores, dynamic=True)
    for t, d in [(3, 4), (5, 4), (6, 8)]:
        q, k = torch.randn(2, t, d), torch.randn(2, t, d)
        torch.testing.assert_close(c(q, k), attention_scores(q, k))
    (entry,) = cache_entries(attention_scores)
    assert "math.sqrt(" in entry.graph_module.code


def splits_features(x, w):
    q, k, v = (x @ w).split(w.shape[1] // 3, dim=1)  # the feature dim: static
    return q * k + v


def test_a_split_along_a_static_dim_of_a_dynamic_tensor_stays_in_the_graph():
    c = compile_eager(splits_features)  # only x's batch dim changes: it alone is dynamic
    w = torch.randn(4, 6)
    for b in (3, 5, 7):
        x = torch.randn(b, 4)
        torch.testing.assert_close(c(x, w), splits_features(x, w))
    static, dynamic = cache_entries(splits_features)
    assert "size=[None, 4]" in str(dynamic.check)
    assert "split" in dynamic.graph_module.code


def test_a_split_whose_count_follows_a_dynamic_size_is_guarded():
    # with every dim dynamic, w.shape[1] // 3 and the split dim are both w's dynamic size:
    # the count, ceil(s / (s // 3)), is 3 for every width that is a multiple of 3 -- the
    # graph keeps the split and a guard keeps the count
    c = compile_eager(splits_features, dynamic=True)
    for width in (6, 9, 12):
        x, w = torch.randn(3, 4), torch.randn(4, width)
        torch.testing.assert_close(c(x, w), splits_features(x, w))
    (entry,) = cache_entries(splits_features)
    assert "split gives 3 results" in str(entry.check)
    ex = tc_explain(splits_features, dynamic=True)(torch.randn(3, 4), torch.randn(4, 6))
    assert (ex.graph_count, ex.graph_break_count) == (1, 0)


def splits_rows(x):
    a, b = x.split(x.shape[0] // 2, dim=0)  # the batch dim: the count follows the size
    return a * b


def test_a_split_along_a_dynamic_dim_guards_its_count():
    c = compile_eager(splits_rows, dynamic=True)
    for rows in (4, 6, 8):
        x = torch.randn(rows, 2)
        torch.testing.assert_close(c(x), splits_rows(x))
    assert len(cache_entries(splits_rows)) == 1
    # 5 rows split by 2 give 3 pieces: the guard fails, and the recompiled code raises
    # what eager raises (the unpacking of three values into two)
    with pytest.raises(ValueError, match="too many values to unpack"):
        splits_rows(torch.randn(5, 2))
    with pytest.raises(ValueError, match="too many values to unpack"):
        c(torch.randn(5, 2))


def test_mark_dynamic_makes_the_first_graph_size_generic():
    import tutorcompile as tc
    c = compile_eager(scale_by_batch)
    for b in (4, 2, 7):
        x = torch.randn(b, 3)
        tc.mark_dynamic(x, 0)
        torch.testing.assert_close(c(x), scale_by_batch(x))
    (entry,) = cache_entries(scale_by_batch)  # no static first graph, no recompile
    assert "size=[None, 3]" in str(entry.check)
    # PyTorch's own mark means the same
    x = torch.randn(5, 3)
    torch._dynamo.mark_dynamic(x, 0)
    assert c(x) is not None and len(cache_entries(scale_by_batch)) == 1


def test_mark_static_keeps_a_dim_specialised_even_with_dynamic_true():
    import tutorcompile as tc
    c = compile_eager(scale_by_batch, dynamic=True)
    for b in (4, 5):
        x = torch.randn(b, 3)
        tc.mark_static(x, 0)
        torch.testing.assert_close(c(x), scale_by_batch(x))
    entries = cache_entries(scale_by_batch)
    assert len(entries) == 2
    assert "size=[4, None]" in str(entries[0].check)


def alibi_window(x, bias):
    # MPT's attention: ``max(0, position_bias.size(1) - query_length)``, 0 at every length
    start = max(0, bias.size(1) - x.shape[1])
    return x + bias[:, start:, :x.shape[1]].sum(1)


def test_max_of_sizes_is_chosen_by_a_guarded_comparison_not_specialised():
    c = compile_eager(alibi_window, dynamic=True)
    bias = torch.randn(3, 1, 64)
    for t in (8, 9, 17, 64):
        x = torch.randn(3, t)
        torch.testing.assert_close(c(x, bias), alibi_window(x, bias))
    (entry,) = cache_entries(alibi_window)  # before: one graph per length (1 - t == -7)
    assert "(1 - L['x'].size()[1]) <= 0" in str(entry.check)


def first_chunks(x):
    # CANINE's local attention: chunks of 4 from 1, the last one cut at the length
    parts = [x[:, start:min(x.shape[1], start + 4)].sum(1)
             for start in range(1, x.shape[1], 4)]
    return torch.stack(parts, 1)


def test_a_range_up_to_a_size_guards_its_number_of_steps_only():
    c = compile_eager(first_chunks, dynamic=True)
    for t in (6, 8, 9, 7):      # 2 chunks for lengths 6..9
        x = torch.randn(2, t)
        torch.testing.assert_close(c(x), first_chunks(x))
    (entry,) = cache_entries(first_chunks)
    assert "len(range(1, L['x'].size()[1], 4)) == 2" in str(entry.check)
    x = torch.randn(2, 10)  # 3 chunks: the guard fails, a second graph
    torch.testing.assert_close(c(x), first_chunks(x))
    assert len(cache_entries(first_chunks)) == 2


def steps_then_halves(x):
    steps = torch.stack([x[:, i] * i for i in range(x.shape[1])], 1)  # length specialised
    first, second = (steps + x).chunk(2, dim=2)
    return first * second


def test_a_split_after_a_specialised_length_does_not_break():
    """The symbolic run behind a split's count relies on the length the loop already
    pinned (and guarded): that is no reason for a graph break."""
    run = tc_explain(steps_then_halves)   # automatic: batch and length dynamic at (4, 6)
    c = compile_eager(steps_then_halves)
    for b, t in ((3, 5), (4, 6), (2, 6)):
        x = torch.randn(b, t, 4)
        out = run(x)
        torch.testing.assert_close(c(x), steps_then_halves(x))
    assert out.graph_break_count == 0, str(out)
    assert len(cache_entries(steps_then_halves)) == 2


def _break():
    print("a graph break")
    return 0


def slots_of_two_ranks(x):
    # at the first break the stack holds a 5-d tensor whose last dim follows x's width, at
    # the second a 3-d one: a dynamic mark on S[0] at the first (dim 4) is no mark at the
    # second (issue 40: einops' rearrange raised IndexError in dynamic_dims so)
    five = [x.reshape(2, 3, 2, 1, -1), _break()][0]
    three = [x * 2, _break()][0]
    return five.sum() + three.sum()


def test_automatic_dynamic_marks_belong_to_their_resume_point(capsys):
    c = compile_eager(slots_of_two_ranks)
    for n in (4, 5, 6, 7):
        x = torch.randn(2, 3, 2 * n)
        torch.testing.assert_close(c(x), slots_of_two_ranks(x))


def splits_a_dynamic_width(x):
    a, b = x.chunk(2, -1)
    c, d = x.split(x.shape[-1] // 2, dim=-1)
    e = x.unflatten(-1, (2, -1))
    return a * b + c * d + e.sum(-2)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_chunk_split_unflatten_of_an_automatically_dynamic_width(backend):
    c = eval_frame.compile(splits_a_dynamic_width, backend=backend)
    for n in (8, 10, 12, 14):
        x = torch.randn(3, n)
        torch.testing.assert_close(c(x), splits_a_dynamic_width(x))
    ex = tc_explain(splits_a_dynamic_width)
    for n in (8, 10, 12):
        report = ex(torch.randn(3, n))
    assert (report.graph_count, report.graph_break_count) == (2, 0)  # static, then dynamic
