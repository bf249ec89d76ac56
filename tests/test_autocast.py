"""torch.autocast compiled for real: the casts autocast makes are graph nodes.

Oracle: eager PyTorch under the same autocast state. Outputs must have eager's dtypes
exactly; values and gradients agree within bfloat16 tolerance (``assert_close``'s defaults
for bf16 tensors, and the same rtol for float32 gradients that flowed through bf16 ops).
"""
from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F

import tutorcompile as tc
from tutorcompile.aot import aot_function
from tutorcompile.aot.aot_autograd import eager_compiler
from tutorcompile.dynamo.eval_frame import cache_entries
from tutorcompile.models import GPT, GPTConfig

pytestmark = pytest.mark.usefixtures("fresh_compiler")

BACKENDS = ["eager", "aot_eager", "inductor"]
BF16 = {"rtol": 1.6e-2, "atol": 1e-2}   # bf16 has 8 bits of mantissa


class MixedBlock(torch.nn.Module):
    """Linear + GELU + LayerNorm + softmax: under autocast the Linear runs in bf16, GELU and
    LayerNorm keep its bf16, softmax stays in its input's dtype, the scores matmul is bf16."""

    def __init__(self, d: int = 16):
        super().__init__()
        self.fc = torch.nn.Linear(d, d)
        self.ln = torch.nn.LayerNorm(d)

    def forward(self, x):
        h = self.ln(F.gelu(self.fc(x)))
        scores = (h @ h.transpose(-1, -2)) * h.shape[-1] ** -0.5   # attention's scaling
        return torch.softmax(scores, dim=-1), h.float().square().mean()


class RegionInside(MixedBlock):
    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return super().forward(x)


def _check(got, want, tol=None):
    """Same dtypes exactly; values within bf16 rounding. (Inductor computes a fused
    chain in float32 and rounds once where eager rounds after every op, so the two differ
    by bf16 rounding, not more.)"""
    for g, w in zip(got, want):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        torch.testing.assert_close(g, w, **(tol or BF16))


def _grads(model, x, outs):
    loss = outs[0].float().sum() * 3 + outs[1]
    return torch.autograd.grad(loss, [x, *model.parameters()])


def _check_grads(model, x, got, want):
    """Gradients through bf16 ops, against float64 ones: the compiled gradients' error is
    within a few times eager's own (fused kernels round at other points than eager; the
    error of either is bf16 rounding, amplified alike)."""
    m64 = copy.deepcopy(model).double()
    x64 = x.detach().double().requires_grad_()
    exact = _grads(m64, x64, MixedBlock.forward(m64, x64))
    for g, w, e in zip(_grads(model, x, got), _grads(model, x, want), exact):
        assert g.dtype == w.dtype
        eager_error = (w.double() - e).abs().max().item()
        assert (g.double() - e).abs().max().item() <= 4 * eager_error + 1e-4


@pytest.mark.parametrize("backend", BACKENDS)
def test_region_inside_the_function_is_one_graph_with_eager_dtypes_values_and_grads(backend):
    torch.manual_seed(0)
    model = RegionInside()
    x = torch.randn(2, 8, 16, requires_grad=True)
    compiled = tc.compile(model, backend=backend, fullgraph=True)
    got, want = compiled(x), model(x)
    assert want[0].dtype == torch.bfloat16
    _check(got, want)
    _check_grads(model, x, got, want)
    assert len(cache_entries(model.forward)) == 1


def test_the_graph_holds_the_casts_and_no_autocast_state():
    model = RegionInside()
    explained = tc.explain(model)(torch.randn(2, 8, 16))
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    code = explained.graphs[0].code
    assert "to(dtype = torch.bfloat16)" in code or "to(dtype=torch.bfloat16)" in code
    assert "autocast" not in code


@pytest.mark.parametrize("backend", BACKENDS)
def test_autocast_around_the_call_compiles_under_it_and_recompiles_outside(backend):
    """Under autocast the frame is compiled for it (guarded on the state); a later call
    without autocast fails that guard and compiles again -- never the stale bf16 entry --
    and a call under autocast again finds its own entry."""
    torch.manual_seed(0)
    model = MixedBlock()
    x = torch.randn(2, 8, 16, requires_grad=True)
    compiled = tc.compile(model, backend=backend)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, want = compiled(x), model(x)
    _check(got, want)
    _check_grads(model, x, got, want)
    got, want = compiled(x), model(x)
    assert got[0].dtype == torch.float32
    _check(got, want)
    assert len(cache_entries(model.forward)) == 2
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert compiled(x)[0].dtype == torch.bfloat16
    assert len(cache_entries(model.forward)) == 2


def test_fullgraph_works_under_autocast_around_the_call():
    model = MixedBlock()
    x = torch.randn(2, 8, 16)
    compiled = tc.compile(model, backend="inductor", fullgraph=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _check(compiled(x), model(x))


def nested_disabled(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a = x @ w                                  # bf16
        with torch.autocast("cpu", enabled=False):
            b = x @ w                              # float32: autocast off inside
        return a, b, a.float() + b


@pytest.mark.parametrize("backend", BACKENDS)
def test_enabled_false_nested_in_an_enabled_region(backend):
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    got = tc.compile(nested_disabled, backend=backend, fullgraph=True)(x, w)
    want = nested_disabled(x, w)
    assert [t.dtype for t in want] == [torch.bfloat16, torch.float32, torch.float32]
    _check(got, want)


def amp_spelling(x, w):
    with torch.amp.autocast("cpu", dtype=torch.bfloat16):
        return F.linear(x, w).relu()


def cpu_amp_spelling(x, w):
    with torch.cpu.amp.autocast(dtype=torch.bfloat16):
        return F.linear(x, w).relu()


@pytest.mark.parametrize("fn", [amp_spelling, cpu_amp_spelling])
def test_every_spelling_of_autocast_is_captured(fn):
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)   # torch.cpu.amp is deprecated
        got = tc.compile(fn, backend="aot_eager", fullgraph=True)(x, w)
        want = fn(x, w)
    assert want.dtype == torch.bfloat16
    _check([got], [want])


def half_region(x, w):
    with torch.autocast("cpu", dtype=torch.float16):
        return torch.softmax(x @ w, -1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float16_cpu_autocast(backend):
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    want = half_region(x, w)
    if want.dtype != torch.float16:
        pytest.skip("this torch does not autocast to float16 on CPU")
    _check([tc.compile(half_region, backend=backend, fullgraph=True)(x, w)], [want])


def einsum_region(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return torch.einsum("ij,jk->ik", a, b).relu() + 1


def test_an_op_autocast_casts_inside_breaks_with_the_reason_and_stays_right():
    """``einsum`` has no autocast policy of its own: autocast casts the views it hands to
    ``bmm``, not its inputs, so no ``.to`` before the call says it. A graph break, never a
    float32 result where eager gives bf16."""
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    got, want = tc.compile(einsum_region, backend="inductor")(a, b), einsum_region(a, b)
    assert want.dtype == torch.bfloat16
    _check([got], [want])
    with pytest.raises(tc.dynamo.GraphBreakError, match="einsum under torch.autocast") as e:
        tc.compile(einsum_region, backend="eager", fullgraph=True)(a, b)
    assert "test_autocast.py" in str(e.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gpt_forward_and_backward_under_autocast(backend):
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=8, n_layer=2, n_embd=32))
    idx, targets = model.example_inputs(batch=2)[0], model.targets(batch=2)
    compiled = tc.compile(model, backend=backend)
    results = []
    for run in (compiled, model):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = run(idx)
            loss = model.loss(logits, targets)
        loss.backward()
        results.append((logits, loss, [p.grad.clone() for p in model.parameters()]))
    (logits, loss, grads), (want_logits, want_loss, want_grads) = results
    assert logits.dtype == want_logits.dtype == torch.bfloat16
    torch.testing.assert_close(logits, want_logits, **BF16)
    torch.testing.assert_close(loss, want_loss, **BF16)
    for g, w in zip(grads, want_grads):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w, **BF16)


def test_aot_function_records_the_casts_and_keys_on_the_autocast_state():
    w = torch.randn(8, 8, requires_grad=True)

    def inside(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return F.gelu(F.linear(x, w)).sum(-1)

    def plain(x):
        return F.gelu(F.linear(x, w)).sum(-1)

    x = torch.randn(4, 8)
    got, want = aot_function(inside, eager_compiler, decompositions={})(x), inside(x)
    assert got.dtype == want.dtype == torch.bfloat16
    assert torch.equal(got, want)
    compiled = aot_function(plain, eager_compiler, decompositions={})
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, want = compiled(x), plain(x)
    assert got.dtype == torch.bfloat16 and torch.equal(got, want)
    assert compiled(x).dtype == torch.float32 and compiled.num_compiles == 2


def unsqueezes_in_place(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x.clone()
        y.unsqueeze_(0)      # mutates metadata: the probe must not apply it to the example
        return (y @ w) * y.dim()   # (a size read while tracing comes from the example)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_metadata_mutation_under_autocast_is_traced_once(backend):
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    got, want = tc.compile(unsqueezes_in_place, backend=backend)(x, w), unsqueezes_in_place(x, w)
    assert got.shape == want.shape == (1, 4, 8)
    _check([got], [want])


# --- PyTorch's Dynamo in front: its graphs hold _enter_autocast nodes, or none at all ----------
def inside_with_nested_off(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = F.gelu(F.linear(x, w)) + 1
        with torch.autocast("cpu", enabled=False):
            z = y.float() @ w
    return y, z


@pytest.mark.parametrize("backend", ["tutorcompile", "aot_eager_backend"])
def test_graphs_from_pytorchs_dynamo_get_the_casts(backend):
    """Real Dynamo records ``torch.amp._enter_autocast``/``_exit_autocast`` nodes for a
    region, and nothing for autocast around the call: our AOT stage turns both into casts
    (without them its graphs computed float32 where eager gives bfloat16)."""
    from tutorcompile.aot import aot_eager_backend
    from tutorcompile.torch_backend import register
    be = register() if backend == "tutorcompile" else aot_eager_backend
    x, w = torch.randn(4, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)
    torch._dynamo.reset()
    got, want = torch.compile(inside_with_nested_off, backend=be)(x, w), \
        inside_with_nested_off(x, w)
    assert [t.dtype for t in want] == [torch.bfloat16, torch.float32]
    _check(got, want)
    grads = [torch.autograd.grad(a.float().sum() + b.sum(), [x, w]) for a, b in (got, want)]
    for g, e in zip(*grads):   # sums of bf16 products: bf16 rounding of the tensor's scale
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e, rtol=1.6e-2, atol=1.6e-2 * e.abs().max().item())

    def plain(x, w):
        return torch.softmax(F.linear(x, w), -1)
    torch._dynamo.reset()
    compiled = torch.compile(plain, backend=be)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, want = compiled(x, w), plain(x, w)
    assert want.dtype == torch.bfloat16
    _check([got], [want])
    assert compiled(x, w).dtype == torch.float32
    torch._dynamo.reset()


def test_a_batch_size_that_changes_under_autocast_keeps_the_casts():
    """After a size changes the frame is captured again with that size dynamic; the casts
    are captured again with it, and eager's numbers stay exact on aot_eager."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=8, n_layer=1, n_embd=32))
    compiled = tc.compile(model, backend="aot_eager")
    for batch in (2, 3, 5):
        idx = torch.randint(0, 128, (batch, 8))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got, want = compiled(idx), model(idx)
        assert got.dtype == want.dtype == torch.bfloat16
        assert torch.equal(got, want)


def region_made_before_a_break(x, w):
    ctx = torch.autocast("cpu", dtype=torch.bfloat16)
    y = x @ w
    print("a break before the region is entered")
    with ctx:
        return y @ w


def data_dependent_in_region(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return x.nonzero().float() @ w


def test_a_region_made_before_a_break_is_rebuilt_after_it(capsys):
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    got = tc.compile(region_made_before_a_break, backend="aot_eager")(x, w)
    want = region_made_before_a_break(x, w)
    assert got.dtype == want.dtype == torch.bfloat16 and torch.equal(got, want)


def test_a_call_whose_casts_fake_tensors_cannot_show_is_a_break_not_a_guess():
    x, w = torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.randn(2, 2)
    report = tc.explain(data_dependent_in_region)(x, w)
    # a break inside the region: the rest of the block runs in a real autocast region
    assert any("nonzero under torch.autocast" in b.reason for b in report.break_reasons)
    got = tc.compile(data_dependent_in_region, backend="aot_eager")(x, w)
    want = data_dependent_in_region(x, w)
    assert got.dtype == want.dtype == torch.bfloat16 and torch.equal(got, want)


def test_the_guard_holds_the_autocast_dtype():
    """An entry compiled under bfloat16 autocast fails its guard under float16 autocast."""
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    with torch.autocast("cpu", dtype=torch.float16):
        if (x @ w).dtype != torch.float16:
            pytest.skip("this torch does not autocast to float16 on CPU")

    def mm(x, w):
        return x @ w
    compiled = tc.compile(mm, backend="inductor")
    for dtype in (torch.bfloat16, torch.float16, torch.bfloat16):
        with torch.autocast("cpu", dtype=dtype):
            got, want = compiled(x, w), mm(x, w)
        assert got.dtype == want.dtype == dtype
        _check([got], [want])
    assert len(cache_entries(mm)) == 2


@torch.autocast("cpu", dtype=torch.bfloat16)
def decorated(x, w):
    return F.linear(x, w).relu()


REGION = torch.autocast("cpu", dtype=torch.bfloat16)


def with_a_global_region(x, w):
    with REGION:
        return F.linear(x, w).relu()


def test_decorator_form_and_a_region_made_outside_are_captured():
    """``@torch.autocast(...)`` and ``with REGION:`` enter an object made outside the frame:
    its state is read from it, and a global one is guarded by identity (rebinding it to
    another region compiles again)."""
    global REGION
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    for fn in (decorated, with_a_global_region):
        report = tc.explain(fn)(x, w)
        assert report.graph_count == 1 and report.graph_break_count == 0
        assert not report.skipped_frames
        got, want = tc.compile(fn, backend="aot_eager")(x, w), fn(x, w)
        assert got.dtype == want.dtype == torch.bfloat16 and torch.equal(got, want)
    compiled = tc.compile(with_a_global_region, backend="aot_eager")
    saved, REGION = REGION, torch.autocast("cpu", enabled=False)
    try:
        got, want = compiled(x, w), with_a_global_region(x, w)
        assert got.dtype == want.dtype == torch.float32 and torch.equal(got, want)
    finally:
        REGION = saved
