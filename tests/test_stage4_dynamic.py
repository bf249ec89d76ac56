"""Symbolic sizes below Dynamo: the shape environment, and AOT compiled once for every size.

* ShapeEnv: sizes 0 and 1 are specialised, others become symbols with their hints;
  arithmetic stays symbolic and simplified; a decision (comparison, ``int``, ``range``)
  answers from the hints and records the guard it relied on, dropping facts every size >= 2
  satisfies; guards print as Python and are checked against new inputs' sizes.
* ``backend="aot_eager_decomp_partition"`` (prim graphs run as they are): a dynamic
  dimension stays symbolic through decomposition, the joint graph and both partitioners (a
  size the backward needs is saved as an int, as PyTorch saves SymInts), so the capstone MLP
  and CNN compile once for every batch size (after the first, static, call), forward and
  training, with eager's values and gradients (float32, 1e-5).
* ``backend="aot_eager"`` keeps every op a PyTorch call; PyTorch's meta kernels need ints,
  so a call's result sizes come from its decomposition traced on symbolic stand-ins (and
  thrown away): the capstone MLP, CNN and GPT compile twice in all, with eager's values
  and gradients to the last bit.
* What the trace relied on is guarded: a size that is unpacked along (``unbind``) or handed
  to a torch function (``torch.linspace(0, 1, n)``) is specialised with a guard naming the
  line (``torch.arange(n)`` of ints stays symbolic: the ``iota`` prim),
  and a size that breaks the guard compiles again instead of giving a wrong answer.
"""

from __future__ import annotations

import copy
import inspect

import pytest
import torch

from tutorcompile import models
from tutorcompile.aot import aot_graph, default_partition, min_cut_partition
from tutorcompile.aot.aot_autograd import aot_eager, aot_eager_decomp_partition, eager_compiler
from tutorcompile.dynamo import eval_frame
from tutorcompile.fx import symbolic_trace
from tutorcompile.fx.symbolic_shapes import ShapeEnv, SymInt, SymShape, as_shape
from tutorcompile.models import GPT, MLP, AlexNet, GPTConfig
from tutorcompile.ops.table import slice_indices

pytestmark = [pytest.mark.stage4, pytest.mark.usefixtures("fresh_compiler")]


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
    assert [g.specializes for g in env.guards] == [False, False, True]
    assert env.check_guards([torch.empty(8)])
    assert not env.check_guards([torch.empty(9)])
    assert str(env.failed_guard([torch.empty(9)])).startswith("(s0 == 8)")


def test_a_length_regrouped_by_floor_division_and_remainder_is_known_equal():
    env = ShapeEnv()
    t = env.create_symbol(9, (0, 1))
    # CANINE: ``t // 4`` molecules of 4 characters and ``t % 4`` left over are t characters
    assert 4 * (t // 4) + t % 4 == t and t - t % 4 == 4 * (t // 4)
    assert env.guards == []       # (before: a guard per comparison, true for every t)
    assert t % 4 + 8 == 9         # a fact about the remainder itself is guarded
    assert len(env.guards) == 1


# --- the decomposed AOT rung compiles once for every batch size ---------------------

def _counting(backend):
    """A backend that keeps what it returned: how many graphs Dynamo handed down, and how
    many times AOT compiled each (``num_compiles``)."""
    made = []

    def counting(gm, example_inputs):
        made.append(backend(gm, example_inputs))
        return made[-1]
    return counting, made


def _values_and_grads_at(compiled, fn, sizes, place=lambda x: x):
    """``compiled`` against ``fn`` on a ``(b, t)`` input of each size (on the device
    ``place`` puts it): values and gradients."""
    for b, t in sizes:
        x = place(torch.randn(b, t)).requires_grad_()
        y = x.detach().requires_grad_()
        out, want = compiled(x), fn(y)
        torch.testing.assert_close(out, want)
        out.pow(2).sum().backward()
        want.pow(2).sum().backward()
        torch.testing.assert_close(x.grad, y.grad)


def _train_and_compare(model, compiled, batches):
    ref = copy.deepcopy(model)
    for b in batches:
        (x,), y = model.example_inputs(b), model.targets(b)
        model.zero_grad()
        ref.zero_grad()
        out, expected = compiled(x), ref(x)
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
        model.loss(out, y).backward()
        ref.loss(expected, y).backward()
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-5, msg=name)


def test_mlp_trains_with_one_compile_for_batch_sizes_1_to_16():
    torch.manual_seed(0)
    model = MLP((10, 16, 5))
    backend, made = _counting(aot_eager_decomp_partition)
    compiled = eval_frame.compile(model, backend=backend)  # automatic dynamic
    _train_and_compare(model, compiled, range(1, 17))
    # batch 1 is static (and a size of 1 is never a symbol); batch 2 marks the dim dynamic
    assert [c.num_compiles for c in made] == [1, 1]
    assert made[1].artifacts.shape_env.guards == []  # nothing relied on the batch size


def test_mlp_inference_compiles_once_with_dynamic_true():
    torch.manual_seed(0)
    model = MLP((10, 16, 5))
    backend, made = _counting(aot_eager_decomp_partition)
    compiled = eval_frame.compile(model, backend=backend, dynamic=True)
    with torch.no_grad():
        for b in range(2, 10):
            x, = model.example_inputs(b)
            torch.testing.assert_close(compiled(x), model(x))
    assert [c.num_compiles for c in made] == [1]
    art = made[0].artifacts
    assert art.joint is None
    # every dim was made dynamic; the matmul with the weight pinned the feature dim
    assert [str(g.expr) for g in art.shape_env.guards] == ["Eq(s1, 10)"]


def test_saved_sizes_are_graph_outputs_and_inputs_under_both_partitioners():
    torch.manual_seed(0)
    model = MLP((10, 16, 5))
    for partition_fn in (default_partition, min_cut_partition):
        eval_frame.reset()

        def decomposed(gm, example_inputs, partition_fn=partition_fn):
            return aot_graph(gm, eager_compiler, eager_compiler, partition_fn,
                             example_inputs=example_inputs)
        backend, made = _counting(decomposed)
        compiled = eval_frame.compile(model, backend=backend, dynamic=True)
        _train_and_compare(model, compiled, (3, 7, 4))
        assert [c.num_compiles for c in made] == [1]
        partition = made[0].artifacts.partition
        # the backward expands a (1, 5) gradient to the batch size: it gets the size, an
        # int the forward returns, not the input tensor it was read from
        size_outputs = [n for n in partition.forward.graph.output_node.args[0]
                        if "sym" in n.meta]
        assert [str(n.meta["sym"]) for n in size_outputs] == ["s0"]
        assert "s0 = sym_size(primals_l_x, 0)" in partition.forward.code
        assert "sym_size(" not in partition.backward.code
        assert "s0" in [p.name for p in partition.backward.graph.placeholders]


# --- what the trace relied on is guarded --------------------------------------------------

def test_unbind_along_a_symbolic_dim_specialises_and_recompiles_for_another_count():
    def unbind_all(t):
        return t.unbind(0)
    gm = symbolic_trace(unbind_all)
    gm.graph.placeholders[0].meta["dynamic_dims"] = frozenset({0})  # as Dynamo marks it
    compiled = aot_graph(gm, eager_compiler, eager_compiler)
    for b in (3, 4, 3):
        t = torch.randn(b, 2)
        out = compiled(t)
        assert len(out) == b
        for got, want in zip(out, t.unbind(0)):
            torch.testing.assert_close(got, want)
    assert compiled.num_compiles == 2
    guards = str(compiled.artifacts.shape_env.guards[0])
    assert guards.startswith("(s0 == 3)  # a size used as an index or count: specialised")
    assert "in unbind_all: return t.unbind(0)" in guards  # the user's line


def scale_rows(x):
    return x * torch.linspace(0, 1, x.shape[0]).unsqueeze(1)


def test_a_size_given_to_a_torch_function_is_specialised_and_its_guard_fails_for_another():
    backend, made = _counting(aot_eager_decomp_partition)
    compiled = eval_frame.compile(scale_rows, backend=backend, dynamic=True)
    for b in (3, 4, 3, 5):
        x = torch.randn(b, 2)
        torch.testing.assert_close(compiled(x), scale_rows(x))
    assert [c.num_compiles for c in made] == [3]  # sizes 3, 4 and 5; 3 again is a hit
    text = made[0].artifacts.shape_env.format_guards()
    assert "(s0 == 5)  # specialised: an argument of torch.linspace" in text
    assert "return x * torch.linspace(0, 1, x.shape[0]).unsqueeze(1)" in text


def test_dynamic_false_keeps_compiling_per_size():
    backend, made = _counting(aot_eager_decomp_partition)
    compiled = eval_frame.compile(scale_rows, backend=backend, dynamic=False)
    for b in (3, 4):
        compiled(torch.randn(b, 2))
    assert [c.num_compiles for c in made] == [1, 1]
    assert all(c.artifacts.shape_env is None for c in made)


def test_capstone_cnn_trains_with_one_compile_after_the_first_size_change():
    torch.manual_seed(0)
    model = AlexNet(width=4, dropout=0.0)
    backend, made = _counting(aot_eager_decomp_partition)
    compiled = eval_frame.compile(model, backend=backend)
    _train_and_compare(model, compiled, (1, 2, 3, 5))
    assert [c.num_compiles for c in made] == [1, 1]


def sizes_in_the_graph(x, w):
    n = x.shape[0]
    y = (x @ w).view(n, -1)
    return y.sum() / n, y.reshape(-1, 2), torch.cat([x, x]).view(2 * n, -1).mean(0), n * 3


def test_sizes_computed_by_the_graph_train_once_for_every_size():
    backend, made = _counting(aot_eager_decomp_partition)
    compiled = eval_frame.compile(sizes_in_the_graph, backend=backend, dynamic=True)
    w = torch.randn(4, 6, requires_grad=True)
    for b in (3, 5, 8):
        x = torch.randn(b, 4, requires_grad=True)
        out, ref = compiled(x, w), sizes_in_the_graph(x, w)
        assert out[3] == ref[3] == 3 * b  # a size returned by the graph is an int
        for got, want in zip(out[:3], ref[:3]):
            torch.testing.assert_close(got, want)
        grads = torch.autograd.grad(sum(o.sum() for o in out[:3]), (x, w))
        expected = torch.autograd.grad(sum(o.sum() for o in ref[:3]), (x, w))
        for got, want in zip(grads, expected):
            torch.testing.assert_close(got, want)
    assert [c.num_compiles for c in made] == [1]
    guards = [str(g.expr) for g in made[0].artifacts.shape_env.guards]
    # relied on: the matmul's inner sizes agree, and reshape(-1, 2) divides evenly
    assert guards[:2] == ["Eq(s1, s2)", "Eq(Mod(s0*s3, 2), 0)"]


def test_explain_shows_the_symbols_and_guards_below_dynamo():
    from tutorcompile.dynamo.debugging import explain
    run = explain(scale_rows, backend="aot_eager_decomp_partition", dynamic=True)
    run(torch.randn(3, 2))
    text = str(run(torch.randn(5, 2)))
    section = text.split("Symbolic sizes below Dynamo (AOT):\n", 1)[1]
    assert section.splitlines()[0] == "  symbols: s0 = input0.size(0), s1 = input0.size(1)"
    assert "(s0 == 3)  # specialised: an argument of torch.linspace" in section
    assert "(s0 == 5)  # specialised: an argument of torch.linspace" in section


def test_capstone_gpt_trains_with_one_compile_after_the_first_change_of_batch_and_length():
    # qkv(x).split(c, dim=2) is kept in Dynamo's graph: symbolic shapes show the split dim
    # does not depend on batch or length -- in the second block, provided the first
    # block's mask slice mask[:t] had t rows, which Dynamo then guards (t <= block_size);
    # positions arange(0, t) stay symbolic
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=8, n_layer=2, n_embd=32))
    ref = copy.deepcopy(model)
    backend, made = _counting(aot_eager_decomp_partition)
    compiled = eval_frame.compile(model, backend=backend)
    for b, t in ((1, 8), (2, 5), (3, 8), (5, 3), (2, 7)):
        x, y = torch.randint(0, 128, (b, t)), torch.randint(0, 128, (b, t))
        model.zero_grad()
        ref.zero_grad()
        out, expected = compiled(x), ref(x)
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
        model.loss(out, y).backward()
        ref.loss(expected, y).backward()
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-5, msg=name)
    assert [c.num_compiles for c in made] == [1, 1]
    entry = eval_frame.cache_entries(model.forward)[-1]
    assert "(L['idx'].size()[1] <= 8)  # split's count is static" in str(entry.check)
    masked_fill = next(i for i, text in enumerate(inspect.getsource(models).splitlines(), 1)
                       if "att = att.masked_fill(" in text)
    lines, first = inspect.getsourcelines(slice_indices)
    compared = first + next(i for i, text in enumerate(lines) if "min(max(start, 0)" in text)
    assert [str(g) for g in made[1].artifacts.shape_env.guards] == [
        f"(s1 <= 8)  # compared at table.py:{compared} in slice_indices, tracing "
        f"models.py:{masked_fill}"
        " in forward: att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float(\"-inf\"))"]


def test_mark_dynamic_gives_one_aot_compile_from_the_first_call():
    import tutorcompile as tc
    torch.manual_seed(0)
    model = MLP((10, 16, 5))
    backend, made = _counting(aot_eager_decomp_partition)
    compiled = eval_frame.compile(model, backend=backend)
    with torch.no_grad():
        for b in range(2, 17):
            x, = model.example_inputs(b)
            tc.mark_dynamic(x, 0)
            torch.testing.assert_close(compiled(x), model(x))
    assert [c.num_compiles for c in made] == [1]


def alibi_scores(q, k, slopes):
    """BLOOM's attention bias: ``slopes`` tiled to the batch (a count that is a size), added
    by a ``baddbmm`` called with keywords."""
    bias = slopes.repeat(q.shape[0], q.shape[1], 1)
    return bias.baddbmm(batch1=q, batch2=k.transpose(1, 2), alpha=0.5).softmax(-1)


def test_a_repeat_count_that_is_a_size_stays_symbolic():
    backend, made = _counting(aot_eager_decomp_partition)
    compiled = eval_frame.compile(alibi_scores, backend=backend)
    slopes = torch.randn(1, 1, 6, requires_grad=True)
    for b in (1, 2, 3, 16, 7):
        q, k = torch.randn(b, 6, 8), torch.randn(b, 6, 8)
        out, expected = compiled(q, k, slopes), alibi_scores(q, k, slopes)
        torch.testing.assert_close(out, expected)
        got, = torch.autograd.grad(out.square().sum(), slopes)
        want, = torch.autograd.grad(expected.square().sum(), slopes)
        torch.testing.assert_close(got, want)
    assert [c.num_compiles for c in made] == [1, 1]
    assert made[1].artifacts.decomposition_report.extern == {}


def _exactly(model, compiled, batches):
    """Eager's values and gradients to the last bit (every op is PyTorch's)."""
    ref = copy.deepcopy(model)
    for x, y in batches:
        model.zero_grad()
        ref.zero_grad()
        out, expected = compiled(x), ref(x)
        assert torch.equal(out, expected)
        model.loss(out, y).backward()
        ref.loss(expected, y).backward()
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            assert torch.equal(p.grad, q.grad), name


@pytest.mark.parametrize("name", ["mlp", "cnn", "gpt"])
def test_aot_eager_compiles_twice_for_every_batch_size_and_length(name):
    torch.manual_seed(0)
    if name == "gpt":
        model = GPT(GPTConfig(block_size=64, n_layer=2, n_embd=32))
        batches = [(torch.randint(0, 128, (b, t)), torch.randint(0, 128, (b, t)))
                   for b, t in ((1, 8), (2, 9), (16, 64), (5, 33), (3, 8))]
    else:
        model = MLP((10, 16, 5)) if name == "mlp" else AlexNet(width=4, dropout=0.0)
        batches = [(model.example_inputs(b)[0], model.targets(b)) for b in (1, 2, 3, 16, 7)]
    backend, made = _counting(aot_eager)
    _exactly(model, eval_frame.compile(model, backend=backend), batches)
    assert [c.num_compiles for c in made] == [1, 1]
    guards = [str(g.expr) for g in made[1].artifacts.shape_env.guards]
    assert guards == (["s1 <= 64"] if name == "gpt" else [])


def ranks_in_pairs(x, w):
    """An extern with symbolic sizes (integer floor division stays a PyTorch call), and an
    autograd.Function (one opaque call): neither pins the batch size."""
    values, perm = torch.sort(x * w, dim=-1)
    return _Twice.apply(values) * (perm // 2).to(x.dtype)


class _Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        return t * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_an_extern_keeps_symbolic_sizes_read_off_two_samples():
    backend, made = _counting(aot_eager_decomp_partition)
    compiled = eval_frame.compile(ranks_in_pairs, backend=backend)
    w = torch.randn(5, requires_grad=True)
    for b in (1, 2, 3, 16, 5):   # (b = 5 = the row length at the hints: told apart)
        x = torch.randn(b, 5)
        out, expected = compiled(x, w), ranks_in_pairs(x, w)
        torch.testing.assert_close(out, expected)
        got, = torch.autograd.grad(out.sum(), w)
        want, = torch.autograd.grad(expected.sum(), w)
        torch.testing.assert_close(got, want)
    assert [c.num_compiles for c in made] == [1, 1]
    assert not made[1].artifacts.shape_env.guards


def shift_tokens_right(ids):
    """BART's decoder inputs: the ids moved one place right, a start token in front -- a
    slice assignment whose length is the symbolic length minus one."""
    shifted = ids.new_zeros(ids.shape)
    shifted[:, 1:] = ids[:, :-1].clone()
    shifted[:, 0] = 2
    return shifted * 3


LENGTHS = ((1, 8), (2, 9), (3, 17), (16, 64), (5, 8))   # (batch, length)


def _two_compiles_over_lengths(fn, make=torch.randn, sizes=LENGTHS):
    """``fn`` with automatic dynamic sizes, on a ``(b, t)`` input of each size: eager's
    values, from two compiles (the first call's static graph, then one with symbolic
    sizes) -- where each of these constructs once cost a compile per length."""
    backend, made = _counting(aot_eager_decomp_partition)
    compiled = eval_frame.compile(fn, backend=backend)
    for b, t in sizes:
        x = make(b, t)
        torch.testing.assert_close(compiled(x), fn(x))   # (integers: exactly)
    assert [c.num_compiles for c in made] == [1, 1]


def test_a_slice_assignment_of_a_symbolic_length_is_not_pinned_to_it():
    _two_compiles_over_lengths(shift_tokens_right, lambda b, t: torch.randint(0, 100, (b, t)))


def ranges_of_the_length(x):
    """MPT's ALiBi (``arange(1 - t, 1, dtype=torch.int32)``), XLNet's relative positions
    (``arange(t, -2, -1.0)``: a float step makes floats) and a step of 3."""
    t = x.shape[1]
    alibi = torch.arange(1 - t, 1, dtype=torch.int32)
    backwards = torch.arange(t, -2, -1.0)
    return x * alibi + backwards[:t].sum() + torch.arange(0, t, 3).sum()


def test_arange_of_a_symbolic_length_with_any_whole_step_and_dtype_stays_symbolic():
    _two_compiles_over_lengths(ranges_of_the_length)


def alibi_cut_to_the_length(x):
    """MPT's ALiBi bias: built for the longest length from constants only (a constant
    tensor of the graph), then cut at ``max(0, 64 - t)``, a symbolic bound of a slice."""
    bias = torch.arange(-63.0, 1.0).view(1, 1, 64)
    return x + bias[:, 0, max(0, bias.size(2) - x.shape[1]):]


def test_a_constant_tensor_sliced_at_a_symbolic_bound_is_not_pinned_to_it():
    _two_compiles_over_lengths(alibi_cut_to_the_length)


def repeat_to_the_length(x):
    """CANINE's ``_repeat_molecules``: each of ``t // 4`` molecules 4 times, then the last
    one ``t % 4`` more times -- a repeat count that is a symbolic size."""
    molecules = x[:, ::4][:, :x.shape[1] // 4]
    last = molecules[:, -1:]
    return x + torch.cat([molecules.repeat_interleave(4, dim=1),
                          last.repeat_interleave(x.shape[1] % 4, dim=1)], dim=1)


def test_repeat_interleave_by_a_symbolic_count_stays_symbolic():
    _two_compiles_over_lengths(repeat_to_the_length, sizes=LENGTHS[:-1] + ((5, 11),))


def molecules_after_the_first(x):
    """CANINE's ``t // 4 - 1`` molecules: one molecule at t = 9, the size the symbolic graph
    is first compiled for -- a symbolic size whose example value happens to be 1."""
    molecules = x[:, ::4][:, 1:x.shape[1] // 4]
    return molecules.repeat_interleave(4, dim=1) * x[:, :4 * (x.shape[1] // 4) - 4]


def test_a_symbolic_size_that_is_1_at_the_example_is_not_guarded_to_stay_1():
    backend, made = _counting(aot_eager_decomp_partition)
    compiled = eval_frame.compile(molecules_after_the_first, backend=backend)
    _values_and_grads_at(compiled, molecules_after_the_first,
                         ((1, 8), (2, 9), (3, 17), (16, 64), (5, 11)))
    # before: expand's shape rule and the gradient's sum_to_shape asked ``t // 4 - 1 == 1``
    # first, and the guard failed at every other length
    assert [c.num_compiles for c in made] == [1, 1]


def test_the_gradient_of_a_repeat_by_a_count_that_is_1_at_the_example_stays_symbolic():
    """``last`` repeated ``t % 4`` times: 1 at t = 9, where the symbolic graph is made. The
    gradient sums over that dimension whatever its size, instead of guarding ``t % 4 == 1``
    (a recompile at t = 11)."""
    backend, made = _counting(aot_eager_decomp_partition)
    compiled = eval_frame.compile(repeat_to_the_length, backend=backend)
    _values_and_grads_at(compiled, repeat_to_the_length,
                         ((1, 10), (2, 9), (3, 17), (4, 11), (5, 14)))   # (t % 4 never 0)
    assert [c.num_compiles for c in made] == [1, 1]
