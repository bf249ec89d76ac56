"""Stage 5: generated C++ and Triton kernels against eager, prim by prim and graph by graph.

Both code generators are tested by the same tests (``backend`` is parametrised): C++ builds
a shared library with the system compiler; Triton runs under its CPU interpreter (few,
large programs: the launcher picks big blocks). Tolerances: float32 sums are reassociated
(vectorised / blocked), so reductions get 1e-4; pointwise results 1e-5.
"""

import platform

import pytest
import torch

from tests.kernel_backends import BACKENDS, on
from tutorcompile.environment import probe
from tutorcompile.fx import GraphModule
from tutorcompile.inductor import examples
from tutorcompile.inductor.codegen import triton as triton_codegen
from tutorcompile.inductor.compile_fx import compile_fx
from tutorcompile.ops import ops, trace

pytestmark = [pytest.mark.stage5,
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]  # masked lanes, interpreter


def run(fn, *inputs, backend, rtol=1e-5, atol=1e-5, **options):
    inputs = on(backend, *inputs)
    graph = trace(fn, *inputs)
    compiled = compile_fx(graph, inputs, codegen=backend, **options)
    got = compiled(*inputs)
    expected = GraphModule({}, graph)(*inputs)
    torch.testing.assert_close(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    return compiled


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_pointwise_prim(backend):
    covered, missing = examples.pointwise_names()
    assert not missing, f"pointwise prims without a test: {missing}"
    inputs = on(backend, *examples.pointwise_inputs())
    graph = trace(examples.all_pointwise, *inputs)
    compiled = compile_fx(graph, inputs, codegen=backend)
    got = compiled(*inputs)
    expected = GraphModule({}, graph)(*inputs)
    names = ([f"{n}" for n in examples.UNARY] + [f"{n}" for n in examples.BINARY]
             + ["pow of negatives, fifth power", "pow of negatives, integer tensor",
                "pow of a negative number"]
             + list(examples.LOGICAL) + ["add scalar", "mul scalar", "maximum scalar", "where",
                                         "where scalar", "convert", "int div"])
    for name, a, b in zip(names, got, expected):
        assert a.dtype == b.dtype, f"{name}: dtype {a.dtype} != {b.dtype}"
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, equal_nan=True,
                                   msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_pow_by_a_constant_is_what_aten_computes(backend):
    """``x ** c`` for the exponents ATen's pow kernels special-case (2, 3, 0.5, -0.5, -1,
    -2) is their products, square root or reciprocal, not a ``pow`` call per element (a
    scalar libm call in C++, GPT-2's tanh GELU): eager's values, the products and
    reciprocals to the last bit on the CPU (``std::sqrt`` is correctly rounded, PyTorch's
    vector sqrt not always); another exponent keeps ``pow``."""
    x = torch.rand(64, 33) + 0.5
    x[0, :3] = torch.tensor([-1.5, 0.0, 3.0])
    pow_call = "std::pow(" if backend == "cpp" else "tl.log2("   # (Triton: exp2 of log2)
    for c in (2, 3.0, 0.5, -0.5, -1.0, -2.0):
        compiled = run(lambda x, c=c: ops.pow(x, c), x, backend=backend, rtol=1e-6, atol=0)
        sources = "\n".join(compiled.kernel_sources.values())
        assert pow_call not in sources, (c, sources)
        if backend == "cpp" and c not in (0.5, -0.5):
            torch.testing.assert_close(compiled(x), torch.pow(x, c), rtol=0, atol=0)
    compiled = run(lambda x: ops.pow(x, 2.5), x, backend=backend, rtol=1e-5, atol=1e-6)
    assert pow_call in "\n".join(compiled.kernel_sources.values())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape,dims,keepdim", [((33, 65), (1,), True), ((33, 65), (0,), False),
                                                ((3, 17, 5), (0, 2), True),
                                                ((129,), None, False)])
def test_reductions_odd_sizes(backend, shape, dims, keepdim):
    x = torch.randn(*shape)

    def fn(x):
        return (ops.sum(x, dims, keepdim=keepdim), ops.amax(x, dims, keepdim=keepdim),
                ops.mean(ops.mul(x, x), dims, keepdim=keepdim))
    run(fn, x, backend=backend, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reductions_on_non_contiguous_input(backend):
    # the view is taken on the kernel's device: moving it there would copy it dense
    (base,) = on(backend, torch.randn(40, 30))
    x = base[::2, 1:].t()                                  # (29, 20), strided, offset
    assert x.storage_offset() == 1 and x.stride() == (1, 60)
    run(lambda x: (ops.var(x, (1,), correction=1), ops.amax(x, (0,))), x, backend=backend,
        rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["softmax", "layernorm", "rmsnorm", "chain"])
def test_examples_match_torch(backend, name):
    x = torch.randn(19, 77)
    args = {"softmax": (x,), "layernorm": (x, torch.randn(77), torch.randn(77)),
            "rmsnorm": (x, torch.randn(77)), "chain": (x, torch.randn(77))}[name]
    args = on(backend, *args)
    compiled = compile_fx(trace(getattr(examples, name), *args), args, codegen=backend)
    torch.testing.assert_close(compiled(*args), examples.TORCH[name](*args), rtol=1e-4,
                               atol=1e-4)


def test_triton_looped_reduction(monkeypatch):
    """Rows longer than the persistent limit are walked in RBLOCK steps."""
    monkeypatch.setattr(triton_codegen.config, "triton_persistent_rblock_interpreted", 16)
    monkeypatch.setattr(triton_codegen.config, "triton_persistent_rblock", 16)
    monkeypatch.setattr(triton_codegen.config, "triton_looped_rblock_interpreted", 32)
    x = torch.randn(6, 100)
    compiled = run(examples.softmax, x, backend="triton", rtol=1e-5, atol=1e-5)
    source = next(iter(compiled.kernel_sources.values()))
    assert "looped reduction" in source and "for roffset in range(0, rnumel, RBLOCK)" in source
    ln_args = on("triton", torch.randn(5, 70), torch.randn(70), torch.randn(70))
    compiled = compile_fx(trace(examples.layernorm, *ln_args), ln_args, codegen="triton")
    torch.testing.assert_close(compiled(*ln_args), examples.TORCH["layernorm"](*ln_args),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_infinities_survive(backend):
    """A masked softmax: -inf inputs, a max-reduction that starts at -inf."""
    x = torch.randn(4, 9)
    x[:, ::3] = float("-inf")
    run(examples.softmax, x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mlp_with_extern_matmuls(backend):
    args = on(backend, torch.randn(8, 16), torch.randn(16, 32), torch.randn(32),
              torch.randn(32, 4))
    compiled = compile_fx(trace(examples.mlp, *args), args, codegen=backend)
    torch.testing.assert_close(compiled(*args), examples.TORCH["mlp"](*args), rtol=1e-4,
                               atol=1e-4)
    kinds = [k.kind for k in compiled.fusion_report.kernels]
    assert kinds == ["extern", "pointwise", "extern"], kinds   # bias + gelu: one epilogue


def test_cpp_falls_back_to_pytorch_for_a_dtype_it_cannot_hold():
    """(float16 and bfloat16 are kernels: tests/test_stage5_half.py.)"""
    x = torch.randn(4, 8, dtype=torch.complex64)
    compiled = run(lambda x: ops.exp(ops.add(x, 1.0)), x, backend="cpp")
    assert compiled.num_kernels == 0
    assert "the cpp code generator has no complex64" in compiled.wrapper_code


@pytest.mark.gpu
def test_triton_on_cuda():
    x = torch.randn(300, 1000, device="cuda")
    compiled = compile_fx(trace(examples.softmax, x), [x])
    assert compiled.codegen == "triton"
    torch.testing.assert_close(compiled(x), torch.softmax(x, -1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_column_reductions_with_an_epilogue(backend):
    """Reducing the outer dimension (bias gradients, column softmax): C++ tiles the kept,
    contiguous dimension; 45 columns = one full tile of 32 and a ragged one."""
    x = torch.randn(70, 45)
    compiled = run(lambda x: (ops.sum(x, (0,)), ops.div(x, ops.amax(x, (0,), keepdim=True)),
                              ops.mean(ops.exp(x), (0,), keepdim=True)),
                   x, backend=backend, rtol=1e-4, atol=1e-4)
    assert compiled.num_kernels == 1
    if backend == "cpp":
        assert "xi < xlen" in next(iter(compiled.kernel_sources.values()))


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_autotune_keeps_a_correct_variant(backend):
    x = torch.randn(40, 70)
    compiled = run(lambda x: ops.div(x, ops.sum(ops.exp(x), (0,), keepdim=True)), x,
                   backend=backend, rtol=1e-4, atol=1e-4, mode="max-autotune")
    assert "max-autotune" in next(iter(compiled.kernel_sources.values()))


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_reductions_keep_nans(backend, monkeypatch):
    """torch.amax returns NaN for a row holding one; std::max and tl.max would drop it.
    Rows of 50 are looped in steps of 16 (on a GPU too), the last step masked."""
    for where in ("_interpreted", ""):   # (the knobs under the interpreter, on a GPU)
        monkeypatch.setattr(triton_codegen.config, f"triton_persistent_rblock{where}", 32)
        monkeypatch.setattr(triton_codegen.config, f"triton_looped_rblock{where}", 16)
    rows, cols = torch.randn(4, 50), torch.randn(50, 40)
    rows[1, 7] = cols[7, 3] = float("nan")
    run(lambda r, c: (ops.amax(r, (1,)), ops.amax(c, (0,)), ops.amax(r, (1,), keepdim=True)),
        rows, cols, backend=backend)


@pytest.mark.skipif(not probe().has_cxx or platform.machine() != "x86_64"
                    or not platform.libc_ver()[0] == "glibc",
                    reason="needs g++ on x86-64 glibc (libmvec)")
def _vectorized_lines(source: str) -> tuple[str, set[int]]:
    """Build ``source`` after the kernel prelude as the code cache does, asking g++ which
    loops it vectorised: (the full text, the line numbers its reports name)."""
    import subprocess
    import tempfile

    from tutorcompile.inductor import codecache
    from tutorcompile.inductor.codegen.cpp import CPP_PRELUDE
    compiler, version = codecache.cxx_compiler()
    if "g++" not in version and "GCC" not in version:
        pytest.skip("the vectoriser's report is read in g++'s words")
    text = CPP_PRELUDE + source
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/kernel.cpp"
        with open(path, "w") as f:
            f.write(text)
        flags = [f for f in codecache.cpp_flags() if f != "-shared"]
        report = subprocess.run([compiler, *flags, "-c", path, "-o", f"{tmp}/kernel.o",
                                 "-fopt-info-vec-optimized"], capture_output=True, text=True,
                                check=True).stderr
    return text, {int(line.split(":")[1]) for line in report.splitlines()
                  if line.startswith(path) and "vectorized" in line}


def _simd_loops(text: str) -> list[tuple[int, int]]:
    """(first, last) line numbers of each ``#pragma omp simd`` loop, pragma to closing brace."""
    lines = text.splitlines()
    loops = []
    for i, line in enumerate(lines):
        if not line.strip().startswith("#pragma omp simd"):
            continue
        depth, j = 0, i + 1
        while True:
            depth += lines[j].count("{") - lines[j].count("}")
            if depth == 0 and "}" in lines[j]:
                break
            j += 1
        loops.append((i + 1, j + 1))
    return loops


def test_masked_softmax_kernel_is_vectorised():
    """A causal-masked softmax (a bool mask selecting -inf, then exp) compiles to loops the
    compiler really vectorises -- every ``omp simd`` loop, the exp's included (exp is the
    prelude's branch-free ``simd_exp``: glibc's vector expf leaves its fast path for the
    masked lanes' exp(-inf)) -- and the values match PyTorch."""
    if not probe().has_cxx:
        pytest.skip("no C++ compiler")

    def masked_softmax(x, mask):
        x = ops.where(mask, float("-inf"), ops.mul(x, 0.25))
        e = ops.exp(ops.sub(x, ops.amax(x, [1], True)))
        return ops.div(e, ops.sum(e, [1], True))
    x = torch.randn(64, 32)
    mask = torch.ones(64, 32, dtype=torch.bool).triu(1)
    compiled = compile_fx(trace(masked_softmax, x, mask), [x, mask], codegen="cpp")
    out = compiled(x, mask)
    out = out[0] if isinstance(out, tuple) else out
    torch.testing.assert_close(out, torch.softmax((x * 0.25).masked_fill(mask, float("-inf")),
                                                  1))
    (source,) = compiled.kernel_sources.values()
    assert "simd_exp(" in source, source
    text, vectorized = _vectorized_lines(source)
    loops = _simd_loops(text)
    assert len(loops) >= 3, source
    for first, last in loops:
        assert any(first <= line <= last for line in vectorized), \
            (first, last, sorted(vectorized), source)


def test_simd_exp_matches_exp_within_an_ulp():
    """The prelude's ``simd_exp`` against PyTorch's exp in float64, over the whole float
    range: within 1 ulp where the result is a normal float, a denormal step below,
    and exact at the edges (-inf -> 0, inf -> inf, NaN -> NaN, overflow, underflow)."""
    if not probe().has_cxx:
        pytest.skip("no C++ compiler")
    x = torch.cat([torch.linspace(-110, 110, 400_001),
                   torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, 88.72,
                                 88.73, -87.33, -103.9, -104.0, -200.0])])
    out = run(lambda x: ops.exp(x), x, backend="cpp", rtol=1e-6, atol=1.5e-45)
    ref = torch.exp(x.double())
    got = out(x)
    got = (got[0] if isinstance(got, tuple) else got).double()
    normal = (ref > torch.finfo(torch.float32).tiny) & (ref < torch.finfo(torch.float32).max)
    ulp = torch.finfo(torch.float32).eps * ref[normal]   # (an upper bound on one ulp)
    assert ((got[normal] - ref[normal]).abs() <= ulp).all()
    edges = ~normal
    torch.testing.assert_close(got[edges], ref[edges].float().double(), rtol=0, atol=1.5e-45,
                               equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv_bias_gradient_reductions_are_split(backend):
    """``sum``/``amax`` over ``(0, 2, 3)`` of an ``(N, C, H, W)`` tensor (a conv's bias
    gradient) becomes a reduction over the contiguous ``(2, 3)`` and then one over ``0``."""
    x = torch.randn(4, 6, 8, 16)
    compiled = run(lambda x: (ops.sum(ops.relu(x), (0, 2, 3)), ops.amax(x, (0, 2, 3), True),
                              ops.sum(x, (0, 3))),
                   x, backend=backend, rtol=1e-4, atol=1e-4)
    reductions = [g for g in compiled.scheduler.groups
                  if any(b.is_reduction for b in g.buffers)]
    assert len(reductions) >= 4, compiled.fusion_report   # two per split reduction


def test_reduction_over_dims_that_do_not_collapse_nests_its_loop():
    """C++: a flat loop over reduced dims that are apart in memory would divide its index
    (``r0 / 32``) and run scalar; the kernel nests an inner loop over the last reduced dim."""
    if not probe().has_cxx:
        pytest.skip("no C++ compiler")
    x = torch.randn(8, 4, 32)
    compiled = run(lambda x: (ops.mul(x, 2.0), ops.sum(ops.mul(x, 2.0), (0, 2))), x,
                   backend="cpp", rtol=1e-4, atol=1e-4, fusion=False)
    source = next(s for s in compiled.kernel_sources.values() if "acc" in s)
    assert "r1 < 32" in source and "r0 /" not in source, source


def test_a_stored_value_is_read_back_not_recomputed():
    """C++: a reduction kernel that stores a full-size value (a softmax's exp, saved for the
    backward) reads it back in the loops after the one that wrote it: one exp per element."""
    if not probe().has_cxx:
        pytest.skip("no C++ compiler")

    def softmax_keeping_exp(x):
        e = ops.exp(ops.sub(x, ops.amax(x, [1], True)))
        return ops.div(e, ops.sum(e, [1], True)), e
    compiled = run(softmax_keeping_exp, torch.randn(16, 40), backend="cpp", rtol=1e-5)
    (source,) = compiled.kernel_sources.values()
    assert source.count("simd_exp(") == 1, source


@pytest.mark.parametrize("with_column_sum", [False, True])
def test_vector_loop_over_a_transposed_view_of_heads_is_split(with_column_sum):
    """C++: attention's ``(b, h, t, d) -> (b*t, h*d)`` view indexes a column ``x`` as
    ``512*((x / 16) % 4) + x % 16``, a gather in every lane; the vector loop is split at 16
    (``x = 16*x1a + x1b``) so the loads are contiguous runs of ``x1b`` -- in a pointwise
    kernel and in a column sum's tiles (the bias gradient fused after it)."""
    if not probe().has_cxx:
        pytest.skip("no C++ compiler")

    def merge_heads(x):
        y = ops.mul(ops.reshape(ops.permute(x, (0, 2, 1, 3)), (256, 64)), 2.0)
        return (y, ops.sum(y, (0,))) if with_column_sum else y
    compiled = run(merge_heads, torch.randn(8, 4, 32, 16), backend="cpp", rtol=1e-5,
                   atol=1e-4)
    (source,) = compiled.kernel_sources.values()
    assert "xib < 16" in source or "x1b < 16" in source, source
    loads = [line for line in source.splitlines() if "in_ptr" in line and "[" in line]
    assert loads and not any("/ 16" in line or "% 16" in line for line in loads), source


def test_division_by_a_row_value_is_a_multiplication_by_its_reciprocal():
    """C++: a softmax divides every element of a row by the row's sum -- the same value in
    every lane of the vector loop, so the kernel multiplies by ``1 / sum`` (g++ computes it
    once per row; a vector division costs several multiplications). A division by a value
    that differs between lanes stays a division."""
    if not probe().has_cxx:
        pytest.skip("no C++ compiler")

    def softmax(x):
        e = ops.exp(ops.sub(x, ops.amax(x, [1], True)))
        return ops.div(e, ops.sum(e, [1], True))
    x = torch.randn(16, 40)
    (softmax,) = run(softmax, x, backend="cpp", rtol=1e-6, atol=1e-7).kernel_sources.values()
    (ratio,) = run(lambda x, y: ops.div(x, y), x, torch.rand(16, 40) + 0.5, backend="cpp",
                   rtol=0, atol=0).kernel_sources.values()
    assert "(1.0f / acc" in softmax and "/ acc" not in softmax.replace("(1.0f / acc", ""), \
        softmax
    assert "(1.0f /" not in ratio and " / " in ratio, ratio


def test_a_transposed_read_of_a_stored_value_is_not_read_back():
    """C++: only the element the earlier loop stored in this row may be read back; a
    transposed read reaches rows not written yet, so it computes the value again."""
    if not probe().has_cxx:
        pytest.skip("no C++ compiler")

    def f(x, y):
        m = ops.maximum(y, x)
        return m, ops.sum(ops.mul(m, m), (1,), keepdim=True), ops.add(ops.permute(m, (1, 0)), y)
    compiled = run(f, torch.randn(12, 12), torch.randn(12, 1), backend="cpp", rtol=1e-5)
    assert len(compiled.kernel_sources) == 1, compiled.kernel_sources


def _centred(x):  # a batch norm's first step
    return ops.sub(x, ops.mean(x, (0, 2, 3), keepdim=True))


def _column_sums(x):  # a bias gradient
    return ops.sum(x, (0,))


def _row_sums(x):
    return ops.sum(x, (1,))


@pytest.mark.parametrize("layout, fn, shape, offset", [
    ("nested", _centred, (4, 8, 32, 32), 3.0), ("tiled", _column_sums, (4096, 32), 3.0),
    ("flat", _row_sums, (16, 65536), 0.0)], ids=["nested", "tiled", "flat"])
def test_long_float_sums_are_as_close_as_eager(layout, fn, shape, offset):
    """C++: long float32 sums land as close to the float64 result as eager's. Each layout
    adds in its own loop shape: a nested r loop over reduced dims apart in memory (a batch
    norm's mean over N, H, W), a tile of column sums, a flat ``omp simd`` row. Added in
    float, the nested loop and the tile put every value into one accumulator: the centred
    values came out 12x and the column sums 15x further from float64 than eager's (a batch
    norm's output with 9-12x eager's error flipped ReLUs in resnet18); the flat row, each
    vector lane adding 65536 / lanes values, 4.5x."""
    if not probe().has_cxx:
        pytest.skip("no C++ compiler")
    torch.manual_seed(0)
    x = offset + 0.1 * torch.randn(shape) if offset else torch.randn(shape)
    compiled = compile_fx(trace(fn, x), [x], codegen="cpp")
    if layout == "nested":
        assert any("r1 <" in s for s in compiled.kernel_sources.values())
    if layout == "tiled":  # float vectors across the tile, chunks of rows summed in double
        assert any("float part" in s and "r0_chunk" in s for s in compiled.kernel_sources.values())
    exact = GraphModule({}, trace(fn, x.double()))(x.double())
    eager = GraphModule({}, trace(fn, x))(x)

    def error(v):
        return (v.double() - exact).abs().mean().item()
    ratio = error(compiled(x)) / error(eager)
    assert ratio <= 2, f"{ratio:.1f}x eager's error"


def test_a_split_reshape_indexes_without_dividing():
    """A reshape that only splits dims (``(N, C, 32, 32) -> (N, C, 16, 2, 16, 2)``, max
    pooling's windows) maps each index to ``2*ho + i``: loads through it are affine in the
    loop variables, with no division for the vectoriser to turn into a gather."""
    def window_corners(x):
        w = ops.reshape(x, (2, 3, 4, 2, 8, 2))
        corner = [ops.reshape(ops.slice(ops.slice(w, 3, i, i + 1), 5, j, j + 1), (2, 3, 4, 8))
                  for i, j in ((0, 1), (1, 0))]
        return ops.add(*corner)
    compiled = run(window_corners, torch.randn(2, 3, 8, 16), backend="cpp")
    loads = [line for s in compiled.kernel_sources.values() for line in s.splitlines()
             if "in_ptr" in line and "[" in line]
    assert loads and not any("/" in line or "%" in line for line in loads), loads


def test_a_short_last_dim_vectorises_the_dim_before_it():
    """C++: writing a value into every other element along a last dim of 2 (a max pool's
    gradient in its window view) from a flat loop reads the source at ``x0 / 2`` -- a
    gather, left scalar where gathers are slow. The dim before it becomes the vector loop
    and the short one runs unrolled inside it: the source is read at ``x1``."""
    if not probe().has_cxx:
        pytest.skip("no C++ compiler")
    g = torch.randn(64, 16, 1)
    compiled = run(lambda g: ops.slice_scatter(ops.full((64, 16, 2), 0.0), g, 2, 1, 2), g,
                   backend="cpp")
    (source,) = compiled.kernel_sources.values()
    assert "#pragma GCC unroll 2" in source and "x2 < 2" in source, source
    loads = [line for line in source.splitlines() if "in_ptr" in line and "[" in line]
    assert loads and not any("/" in line for line in loads), source


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_in_maximum_minimum_and_relu_follows_eager(backend):
    """A NaN on either side of ``torch.maximum``/``minimum`` is the answer, ``relu(NaN)`` is
    NaN, and their gradients go where PyTorch's go (a NaN wins no comparison, so nothing
    is masked: ``relu`` passes it, both sides of ``maximum`` get it). ``std::max`` drops a
    NaN second argument and Triton's ``maximum`` drops either on a GPU unless asked."""
    import tutorcompile as tc
    from tutorcompile.inductor.compile_fx import inductor_backend
    nan = float("nan")

    def fn(a, b):
        return torch.maximum(a, b) * 2 + torch.minimum(a, b) * 3 + torch.relu(a) * 5
    a = torch.tensor([1.0, nan, 2.0, nan, 4.0, -1.0])
    b = torch.tensor([nan, 1.0, 3.0, nan, 4.0, -2.0])
    tc.reset()
    compiled = tc.compile(fn, backend=lambda gm, ex: inductor_backend(gm, ex, codegen=backend))
    leaves = [t.clone().requires_grad_() for t in on(backend, a, b)]
    refs = [t.clone().requires_grad_() for t in (a, b)]
    got, want = compiled(*leaves), fn(*refs)
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)
    got.sum().backward()
    want.sum().backward()
    for leaf, ref in zip(leaves, refs):
        torch.testing.assert_close(leaf.grad.cpu(), ref.grad, equal_nan=True)
