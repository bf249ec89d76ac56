"""Stage 5: float16 and bfloat16 tensors in generated kernels, stored in 16 bits, computed in
float32 (``compute_dtype`` in tutorcompile/inductor/codegen/common.py).

Both code generators: C++ (16-bit values as ``uint16_t`` bits, converted in the kernel) and
Triton (``.to(tl.float32)`` after each load: Triton has no ``erf`` or ``exp`` of 16-bit
operands). Eager rounds after every op; a fused kernel rounds only where a value is stored
or the program converts, so it is checked against a float32 reference -- it must be as close
to it as eager is -- and against eager within the dtype's tolerance.
"""

import pytest
import torch
import torch.nn.functional as F

import tutorcompile as tc
from tests.kernel_backends import BACKENDS, on
from tutorcompile import models
from tutorcompile.dynamo import backends
from tutorcompile.inductor.codegen.triton import interpreted

pytestmark = [pytest.mark.stage5,
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]  # masked lanes, interpreter

HALVES = [torch.float16, torch.bfloat16]
EPS = {torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7}   # one unit in the last place at 1


def block(x, w, b):
    """Math Triton refuses on 16-bit operands, two reductions, explicit conversions."""
    h = F.layer_norm(x, (x.shape[-1],), w, b)
    g = F.gelu(h) * torch.sigmoid(x).to(torch.float32).to(x.dtype)
    return torch.softmax(g, -1) + torch.erf(x).exp().mean(-1, keepdim=True)


def compiled_fn(fn, backend):
    """``fn`` through our Dynamo and AOT to the inductor with one kernel writer; and a list
    that collects the inductor's compiled graphs (forward, backward), to look inside."""
    made, graphs = [], []

    def keep(gm, example_inputs):
        made.append(backends.inductor(gm, example_inputs, options={"codegen": backend}))
        return made[-1]

    def collect():
        for m in made:
            art = getattr(m, "compiled", m).artifacts
            for part in (art.forward, art.backward):
                if part is not None:
                    graphs.append(getattr(part, "compiled", part))
        return graphs
    tc.reset()
    return tc.compile(fn, backend=keep), collect


def no_fallbacks(graphs, dtype):
    """Every compiled graph made kernels, and no op ran in PyTorch for its dtype."""
    assert graphs and all(g.num_kernels > 0 for g in graphs)
    name = str(dtype).replace("torch.", "")
    notes = [n for g in graphs for n in g.scheduler.lowering.fallbacks if name in n]
    assert not notes, notes


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
def test_16_bit_floats_are_kernels_computed_in_float32(backend, dtype):
    torch.manual_seed(0)
    x, w, b = on(backend, torch.randn(24, 40), torch.randn(40), torch.randn(40))
    inputs = [t.to(dtype) for t in (x, w, b)]
    compiled, graphs = compiled_fn(block, backend)
    got = compiled(*inputs)
    no_fallbacks(graphs(), dtype)
    assert got.dtype == dtype
    eager = block(*inputs).float()
    reference = block(*[t.float() for t in inputs])   # what the 16-bit values stand for
    ours, theirs = (got.float() - reference).abs().max(), (eager - reference).abs().max()
    assert ours <= theirs * 1.25 + EPS[dtype], (ours, theirs)
    torch.testing.assert_close(got.float(), eager, rtol=4 * EPS[dtype], atol=4 * EPS[dtype])


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
def test_converting_to_and_from_16_bits_matches_torch_bit_for_bit(backend, dtype):
    """Every 16-bit pattern widens exactly; float32 values round to nearest, ties to even
    (halfway cases, overflow to infinity, subnormals, signed zeros, NaN stay NaN)."""
    if backend == "triton" and interpreted() and dtype == torch.bfloat16:
        pytest.skip("Triton's CPU interpreter emulates bfloat16 inexactly (subnormals read "
                    "as other values, rounding truncates); on a GPU the check runs")
    patterns = torch.arange(-2 ** 15, 2 ** 15, dtype=torch.int32).to(torch.int16)
    (bits,) = on(backend, patterns)
    halves = bits.view(dtype)
    widen, graphs = compiled_fn(lambda h: h.to(torch.float32) * 1.0, backend)
    torch.testing.assert_close(widen(halves), halves.float(), rtol=0, atol=0, equal_nan=True)
    no_fallbacks(graphs(), dtype)

    finfo = torch.finfo(dtype)
    up = halves[torch.isfinite(halves)].float()
    ties = (up + up.nextafter(torch.full_like(up, float("inf")))) / 2   # halfway to the next
    specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), finfo.max,
                             finfo.max * 1.001, finfo.tiny / 3, -finfo.tiny / 5, 1e-30])
    values = torch.cat([ties, ties.nextafter(torch.zeros_like(ties)), up * 1.0001,
                        *on(backend, specials, torch.randn(4096) * 100)])
    narrow, graphs = compiled_fn(lambda v: (v * 1.0).to(dtype), backend)
    got, want = narrow(values), values.to(dtype)
    no_fallbacks(graphs(), dtype)
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(got[~nan].view(torch.int16), want[~nan].view(torch.int16))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_capstone_gpt_trains_in_16_bits_through_generated_kernels(backend, dtype):
    """The GPT in float16 / bfloat16 under the inductor (C++ kernels; Triton kernels on the
    GPU, or under the interpreter without one): no op falls back to PyTorch for its dtype,
    and the loss and every gradient are eager's within a few units in the last place of the
    gradient's size."""
    torch.manual_seed(0)
    model = models.GPT().to(dtype)
    ref = models.GPT().to(dtype)
    ref.load_state_dict(model.state_dict())
    ids, targets = model.example_inputs(4)[0], model.targets(4)
    if on(backend, ids)[0].is_cuda:
        model, ref, ids, targets = model.cuda(), ref.cuda(), ids.cuda(), targets.cuda()
    compiled, graphs = compiled_fn(model, backend)
    logits, want = compiled(ids), ref(ids)
    assert logits.dtype == dtype
    torch.testing.assert_close(logits.float(), want.float(), rtol=4 * EPS[dtype],
                               atol=4 * EPS[dtype])
    for out in (logits, want):
        F.cross_entropy(out.float().flatten(0, 1), targets.flatten()).backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        scale = q.grad.float().abs().max().item()
        torch.testing.assert_close(p.grad.float(), q.grad.float(), rtol=0,
                                   atol=8 * EPS[dtype] * scale + 1e-6, msg=name)
    assert len(graphs()) == 2   # forward and backward
    no_fallbacks(graphs(), dtype)
