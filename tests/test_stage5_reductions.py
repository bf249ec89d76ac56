"""Stage 5: how Triton reductions are launched and how many passes over a row they make.

Warps per program come from the block (``choose_num_warps``, a table checked here; under the
interpreter they change nothing, so the tests check the choice and that launches pass it).
Looped reductions (rows longer than the persistent limit, forced small here by lowering
the limit) compute a row's statistics in one pass where the program allows it: softmax's
max and sum of exponentials together (online softmax), a mean and a sum of squared
deviations together (Welford). Values are checked against eager -- against float64 where
eager's own float32 error matters -- with rows of large offset and small spread, where a
naive one-pass sum of squares loses every digit.
"""

import pytest
import torch
import torch.nn.functional as F

import tutorcompile as tc
from tests.kernel_backends import BACKENDS, on
from tutorcompile.dynamo import backends
from tutorcompile.environment import probe
from tutorcompile.fx import GraphModule
from tutorcompile.inductor import autotune, examples
from tutorcompile.inductor.codegen import triton as triton_codegen
from tutorcompile.inductor.compile_fx import compile_fx
from tutorcompile.ops import PRIMS, ops, trace

pytestmark = [pytest.mark.stage5,
              pytest.mark.skipif(not probe().has_triton, reason="no triton"),
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]  # masked lanes, interpreter


@pytest.mark.parametrize("kind, xblock, rblock, rnumel, warps", [
    ("pointwise", 64, 1, 1, 1),          # a small block: one warp
    ("pointwise", 128, 1, 1, 4),         # from 128 elements at least 4 warps
    ("pointwise", 1024, 1, 1, 4),        # 256 elements a warp
    ("pointwise", 4096, 1, 1, 8),        # at most 8
    ("persistent", 1, 64, 64, 2),        # at least 2
    ("persistent", 1, 1024, 1024, 8),    # 128 elements a warp ...
    ("persistent", 1, 4096, 4096, 8),    # ... at most 8: the row lives in registers
    ("looped", 4, 1024, 4096, 16),       # a looped block may use 16
    ("looped", 1, 1024, 4096, 8),
    ("looped", 8, 1024, 65536, 32),      # rows over 8192: up to 32
])
def test_num_warps_follow_the_block(kind, xblock, rblock, rnumel, warps):
    assert triton_codegen.choose_num_warps(kind, xblock, rblock, rnumel) == warps


def _plan(fn, *inputs):
    """The kernel plan of the one kernel ``fn`` compiles to, and the compiled graph."""
    inputs = on("triton", *inputs)
    compiled = compile_fx(trace(fn, *inputs), inputs, codegen="triton")
    (group,) = [g for g in compiled.scheduler.groups if not g.is_extern]
    return compiled.scheduler.plan(group.buffers), compiled


def test_launches_pass_num_warps_and_num_stages():
    plan, compiled = _plan(examples.softmax, torch.randn(6, 100))
    call, _, _ = triton_codegen.compile_triton_kernel(plan, "k")
    assert f"num_warps={call.num_warps}, num_stages=1" in compiled.wrapper_code
    launched = {}

    class Launcher:   # stands in for the jitted function: records how it is launched
        def __getitem__(self, grid):
            return lambda *args, **kwargs: launched.update(kwargs)
    call.fn = Launcher()
    call(*[torch.empty(0)] * len(call.arg_names))
    assert launched["num_warps"] == call.num_warps == triton_codegen.choose_num_warps(
        "persistent", call.xblock, call.rblock, 100)
    assert launched["num_stages"] == 1


def test_max_autotune_tries_warps_on_a_gpu(monkeypatch):
    plan, _ = _plan(examples.softmax, torch.randn(64, 4096))
    monkeypatch.setattr(autotune, "interpreted", lambda: False)
    monkeypatch.setattr(triton_codegen, "interpreted", lambda: False)
    cands = autotune.candidate_blocks(plan, persistent=False)
    assert cands[0] == (4, 1024, 16)     # the heuristic's choice first
    assert (4, 1024, 8) in cands and (4, 1024, 32) in cands
    assert (2, 1024, 16) in cands        # other blocks, with their own warps


# ---------------------------------------------------------------------------------------
# One-pass statistics in looped reductions
# ---------------------------------------------------------------------------------------

@pytest.fixture
def looped(monkeypatch):
    """Rows over 16 elements are looped, in steps of 32 (rows of 100: 4 steps, a masked tail)."""
    monkeypatch.setattr(triton_codegen.config, "triton_persistent_rblock_interpreted", 16)
    monkeypatch.setattr(triton_codegen.config, "triton_persistent_rblock", 16)
    monkeypatch.setattr(triton_codegen.config, "triton_looped_rblock_interpreted", 32)
    monkeypatch.setattr(triton_codegen.config, "triton_looped_rblock", 32)


def compiled_torch_fn(fn):
    """``fn`` (torch-level code) through our Dynamo, AOT and the Triton kernel writer; and a
    function that lists the compiled graphs' kernel sources. (Its inputs go through
    ``on("triton", ...)``: CUDA tensors on a GPU machine.)"""
    made = []

    def keep(gm, example_inputs):
        made.append(backends.inductor(gm, example_inputs, options={"codegen": "triton"}))
        return made[-1]

    def sources():
        out = []
        for m in made:
            forward = getattr(m, "compiled", m).artifacts.forward
            out += list(getattr(forward, "compiled", forward).kernel_sources.values())
        return out
    tc.reset()
    return tc.compile(fn, backend=keep), sources


def r_loops(source: str) -> int:
    return source.count("for roffset in range(0, rnumel, RBLOCK)")


def offset_rows(rows=6, cols=100, offset=1e4, seed=0):
    """Rows of ``offset`` plus unit noise: their statistics need care in float32."""
    g = torch.Generator().manual_seed(seed)
    return offset + torch.randn(rows, cols, generator=g)


def error_vs_float64(got, fn, *inputs):
    exact = fn(*[t.double() for t in inputs])
    return (got.double() - exact).abs().max().item()


@pytest.mark.parametrize("fn", [lambda x: torch.softmax(x, -1),
                                lambda x: torch.log_softmax(x, -1)],
                         ids=["softmax", "log_softmax"])
def test_looped_softmax_reads_each_row_twice(looped, fn):
    """Online softmax: the max and the sum of exponentials in one pass, the output in a
    second (three passes without it). Rows with -inf (some, all), NaN and +inf give what
    eager gives: the running max starts at -inf and meets them all."""
    (x,) = on("triton", offset_rows())
    x[1, ::7] = float("-inf")
    x[2] = float("-inf")
    x[3, 50] = float("nan")
    x[4, 5] = float("inf")
    compiled, sources = compiled_torch_fn(fn)
    got = compiled(x)
    (source,) = sources()
    assert r_loops(source) == 2, source
    torch.testing.assert_close(got, fn(x), rtol=1e-5, atol=1e-5, equal_nan=True)
    assert error_vs_float64(got[5:], fn, x[5:]) <= 1e-5


def test_looped_softmax_in_bfloat16(looped):
    (x,) = on("triton", torch.randn(6, 100).to(torch.bfloat16))
    compiled, sources = compiled_torch_fn(lambda x: torch.softmax(x, -1))
    got = compiled(x)
    assert r_loops(sources()[0]) == 2
    torch.testing.assert_close(got.float(), torch.softmax(x, -1).float(), rtol=2 ** -6,
                               atol=2 ** -8)


def test_looped_layer_norm_statistics_in_one_pass(looped):
    """Welford: the mean and the variance of each row in one pass (the program's mean, and
    ``var``'s own sum of x and its sum of squared deviations: three passes without it), the
    output in a second. Rows of 1e4 + unit noise: a naive sum of squares in float32 would
    lose the variance entirely; Welford is as close to float64 as eager."""
    x, w, b = on("triton", offset_rows(), torch.randn(100), torch.randn(100))

    def fn(x, w, b):
        return F.layer_norm(x, (100,), w, b)
    compiled, sources = compiled_torch_fn(fn)
    got = compiled(x, w, b)
    (source,) = sources()
    assert r_loops(source) == 2, source
    assert "mean" in source.split("for roffset")[1]   # Welford's running mean, first loop
    ours, eager = error_vs_float64(got, fn, x, w, b), error_vs_float64(fn(x, w, b), fn, x, w, b)
    assert ours <= 2 * eager + 1e-6, (ours, eager)


def test_looped_layer_norm_in_bfloat16(looped):
    x, w, b = on("triton", torch.randn(6, 100).to(torch.bfloat16),
                 torch.randn(100).to(torch.bfloat16), torch.randn(100).to(torch.bfloat16))
    compiled, sources = compiled_torch_fn(lambda x, w, b: F.layer_norm(x, (100,), w, b))
    got = compiled(x, w, b)
    assert r_loops(sources()[0]) == 2
    torch.testing.assert_close(got.float(), F.layer_norm(x, (100,), w, b).float(),
                               rtol=2 ** -6, atol=2 ** -5)


@pytest.mark.parametrize("fn, loops", [
    (lambda x: torch.var(x, -1), 1),
    (lambda x: torch.var_mean(x, -1, correction=0), 1),
    (lambda x: torch.std(x, -1, keepdim=True), 1),
], ids=["var", "var_mean", "std"])
def test_looped_variance_is_one_pass(looped, fn, loops):
    (x,) = on("triton", offset_rows())
    compiled, sources = compiled_torch_fn(fn)
    got = compiled(x)
    (source,) = sources()
    assert r_loops(source) == loops, source
    expected = fn(x)
    for a, e, exact in zip(_tuple(got), _tuple(expected), _tuple(fn(x.double()))):
        ours, eager = (a.double() - exact).abs().max(), (e.double() - exact).abs().max()
        assert ours <= 2 * eager + 1e-6, (ours, eager)


def _tuple(v):
    return v if isinstance(v, tuple) else (v,)


def test_looped_batch_norm_statistics_in_one_pass(looped):
    """Training batch norm: per-channel statistics over N, H, W (120 values a channel,
    apart in memory) in one pass, the output in a second; the running statistics too."""
    x, rm, rv = on("triton", 1e3 + torch.randn(4, 3, 5, 6), torch.zeros(3), torch.ones(3))

    def fn(x, rm, rv):
        return F.batch_norm(x, rm, rv, training=True)
    compiled, sources = compiled_torch_fn(fn)
    rm2, rv2 = rm.clone(), rv.clone()
    got = compiled(x, rm, rv)
    expected = fn(x, rm2, rv2)
    assert max(r_loops(s) for s in sources()) == 2, sources()
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close((rm, rv), (rm2, rv2), rtol=1e-5, atol=1e-5)


def test_welford_returns_squares_about_the_programs_centre(looped):
    """``sum((x - c)**2)`` about a ``c`` that is not the mean (here ``sum(x) / 7``) is still
    one pass, and exactly what the program asked for: ``M2 + n * (mean - c)**2``."""
    x = torch.randn(6, 100) + 3

    def fn(x):
        c = ops.div(ops.sum(x, (1,), keepdim=True), 7.0)
        d = ops.sub(x, c)
        return ops.sum(ops.mul(d, d), (1,))
    inputs = on("triton", x)
    compiled = compile_fx(trace(fn, *inputs), inputs, codegen="triton")
    (source,) = compiled.kernel_sources.values()
    assert r_loops(source) == 1, source
    x = inputs[0].double()   # (where the kernel ran: CUDA on a GPU machine)
    expected = ((x - x.sum(1, keepdim=True) / 7) ** 2).sum(1)
    torch.testing.assert_close(compiled(*inputs).double(), expected, rtol=1e-5, atol=1e-3)


def test_other_statistics_keep_their_passes(looped):
    """Patterns that only look alike are not rewritten: squares about another row's sum, a
    sum of exp of x minus another tensor's max."""
    x, y = torch.randn(6, 100), torch.randn(6, 100)

    def fn(x, y):
        d = ops.sub(x, ops.div(ops.sum(y, (1,), keepdim=True), 100.0))
        e = ops.exp(ops.sub(x, ops.amax(y, (1,), keepdim=True)))
        return ops.sum(ops.mul(d, d), (1,)), ops.sum(e, (1,))
    inputs = on("triton", x, y)
    compiled = compile_fx(trace(fn, *inputs), inputs, codegen="triton")
    for got, expected in zip(compiled(*inputs), GraphModule({}, trace(fn, *inputs))(*inputs)):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-4)
    assert all("mean" not in s and "tl.exp(max" not in s
               for s in compiled.kernel_sources.values())


def test_max_autotune_times_the_one_pass_looped_variant(looped):
    """Under max-autotune a reduction's looped variant (one-pass statistics) competes with
    the persistent one; whichever wins is right."""
    args = on("triton", torch.randn(6, 40) + 3, torch.randn(40), torch.randn(40))
    plan, _ = _plan(examples.layernorm, *args)
    looped_source, *_ = triton_codegen.generate_triton_kernel(plan, "k", persistent=False)
    assert r_loops(looped_source) == 2
    compiled = compile_fx(trace(examples.layernorm, *args), args, codegen="triton",
                          mode="max-autotune")
    assert "max-autotune" in next(iter(compiled.kernel_sources.values()))
    torch.testing.assert_close(compiled(*args), examples.TORCH["layernorm"](*args), rtol=1e-4,
                               atol=1e-4)


def test_one_pass_statistics_over_a_symbolic_row_length():
    """A row of symbolic length is always looped; its statistics still take one pass each,
    and one compiled kernel serves every length: softmax's statistics, layer norm's, the
    output (five passes without them)."""
    def fn(x, w):
        return torch.softmax(x, -1) + F.layer_norm(x, (x.shape[-1],)) * w.sum()
    compiled, sources = compiled_torch_fn(fn)
    (w,) = on("triton", torch.randn(3))
    for cols in (20, 37, 70):
        (x,) = on("triton", offset_rows(5, cols, offset=100.0, seed=cols))
        tc.mark_dynamic(x, 1)
        torch.testing.assert_close(compiled(x, w), fn(x, w), rtol=1e-4, atol=1e-4)
    (looped,) = [s for s in sources() if "looped reduction" in s]
    assert r_loops(looped) == 3, looped


def _unary_pointwise_prims():
    """Every pointwise prim that takes one float tensor (found by calling it)."""
    found = []
    x = torch.randn(3)
    for prim in PRIMS.values():
        if prim.kind != "pointwise":
            continue
        try:
            out = prim.reference(x)
        except Exception:  # noqa: BLE001 -- not unary, or not on floats
            continue
        if isinstance(out, torch.Tensor) and out.shape == x.shape:
            found.append(prim.name)
    return found


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_unary_prim_reads_a_reduction_value_in_its_kernel(backend):
    """A pointwise op fused after a reduction over a middle dimension reads the reduction's
    value where the kernel keeps it -- in C++ a tile's accumulator, ``acc0[xi]``, an lvalue:
    relu's spelling took ``decltype`` of its operand, a reference there, and g++ refused
    the kernel (``relu(x.amax(1))`` of any 3-d x did not compile). Every unary prim's
    spelling, on that operand, both code generators, against the prim graph run eagerly."""
    names = _unary_pointwise_prims()
    assert {"relu", "exp", "abs", "neg", "sigmoid"} <= set(names), names
    x, = on(backend, torch.randn(5, 4, 3).abs() + 0.25)   # (positive: log, sqrt, rsqrt...)

    def fn(x):
        m = ops.amax(x, (1,), keepdim=True)
        return tuple(getattr(ops, name)(m) for name in names) + (m,)
    graph = trace(fn, x)
    compiled = compile_fx(graph, [x], codegen=backend)
    expected = GraphModule({}, graph)(x)
    for name, got, want in zip(names + ["amax"], compiled(x), expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=True,
                                   msg=lambda m, name=name: f"{name}: {m}")
