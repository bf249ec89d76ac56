"""Stage 5: the compile entry, the code cache, golden generated source, the torch.compile
backend (real Dynamo -> our AOTAutograd -> our kernels), and the fallbacks."""

import importlib
import operator

import pytest
import torch

import tutorcompile as tc
from tests.kernel_backends import BACKENDS, on
from tutorcompile.environment import probe
from tutorcompile.inductor import codecache, examples
from tutorcompile.inductor.compile_fx import compile_fx, inductor_backend
from tutorcompile.ops import PRIMS, ops, trace

pytestmark = pytest.mark.stage5
# the module (the package re-exports the function under the same name)
compile_fx_module = importlib.import_module("tutorcompile.inductor.compile_fx")
needs_cxx = pytest.mark.skipif(not probe().has_cxx, reason="no C++ compiler")

GOLDEN_CPP = """\
// cpp_poi_fused_add_relu_0: graph nodes add, relu
extern "C" void cpp_poi_fused_add_relu_0(const float* __restrict__ in_ptr_x,
    const float* __restrict__ in_ptr_b,
    float* __restrict__ out_ptr_buf1)
{
    for (int64_t x0 = 0; x0 < 4; x0++)
    {
        #pragma omp simd
        for (int64_t x1 = 0; x1 < 8; x1++)
        {
            auto tmp0 = in_ptr_x[(8 * x0 + x1)];
            auto tmp1 = in_ptr_b[x1];
            auto tmp2 = (tmp0 + tmp1);
            auto tmp3 = std::max(tmp2, std::decay_t<decltype(tmp2)>(0));
            out_ptr_buf1[(8 * x0 + x1)] = tmp3;
        }
    }
}"""

GOLDEN_WRAPPER = """\
def call(x, b):
    # cpp_poi_fused_add_relu_0: graph nodes add, relu
    buf1 = empty_strided((4, 8), (8, 1), dtype=torch.float32, device=cpu)
    cpp_poi_fused_add_relu_0(x.data_ptr(), b.data_ptr(), buf1.data_ptr())
    return buf1
"""

GOLDEN_TRITON = """\
@triton.jit
def triton_red_fused_amax_sub_exp_sum_div_0(in_ptr_x, out_ptr_buf4, xnumel, rnumel, \
XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    # persistent reduction; graph nodes: amax, sub, exp, sum_, div
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    rbase = tl.arange(0, RBLOCK)[None, :]
    rindex = rbase
    rmask = rindex < rnumel
    tmp0 = tl.load(in_ptr_x + (8 * xindex + rindex), xmask & rmask, other=0)
    tmp1 = tl.where(xmask & rmask, tmp0, float('-inf'))
    tmp2 = tl.max(tmp1, 1)[:, None]
    tmp3 = tl.sum(tl.where(xmask & rmask & (tmp0 != tmp0), 1, 0), 1)[:, None]
    tmp4 = tl.where(tmp3 > 0, float('nan'), tmp2)
    tmp5 = (tmp0 - tmp4)
    tmp6 = tl.exp(tmp5)
    tmp7 = tl.where(xmask & rmask, tmp6, 0.0)
    tmp8 = tl.sum(tmp7, 1)[:, None]
    tmp9 = (tmp6 / tmp8)
    tl.store(out_ptr_buf4 + (8 * xindex + rindex), tmp9, xmask & rmask)"""


def relu_add(x, b):
    return ops.relu(ops.add(x, b))


@needs_cxx
def test_golden_cpp_kernel_and_wrapper():
    x, b = torch.randn(4, 8), torch.randn(8)
    compiled = compile_fx(trace(relu_add, x, b), [x, b], codegen="cpp")
    assert compiled.kernel_sources == {"cpp_poi_fused_add_relu_0": GOLDEN_CPP}
    assert compiled.wrapper_code == GOLDEN_WRAPPER
    assert GOLDEN_CPP in compiled.output_code and GOLDEN_WRAPPER in compiled.output_code
    torch.testing.assert_close(compiled(x, b), torch.relu(x + b))


def test_golden_triton_softmax():
    x = torch.randn(4, 8, device="cuda" if torch.cuda.is_available() else "cpu")
    compiled = compile_fx(trace(examples.softmax, x), [x], codegen="triton")
    assert list(compiled.kernel_sources.values()) == [GOLDEN_TRITON]
    torch.testing.assert_close(compiled(x), torch.softmax(x, -1))


@needs_cxx
def test_cache_hit_does_not_run_the_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("TUTORCOMPILE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(codecache, "_loaded", {})
    x, b = torch.randn(3, 5), torch.randn(5)
    before = codecache.stats["cpp_compiles"]
    compile_fx(trace(relu_add, x, b), [x, b], codegen="cpp")
    assert codecache.stats["cpp_compiles"] == before + 1
    assert list(tmp_path.glob("cpp/*/kernel.so")) and list(tmp_path.glob("cpp/*/flags.txt"))
    monkeypatch.setattr(codecache, "_loaded", {})        # a new process: only the disk cache
    hits = codecache.stats["cpp_hits"]
    compiled = compile_fx(trace(relu_add, x, b), [x, b], codegen="cpp")
    assert codecache.stats["cpp_compiles"] == before + 1
    assert codecache.stats["cpp_hits"] == hits + 1
    torch.testing.assert_close(compiled(x, b), torch.relu(x + b))


@needs_cxx
def test_new_strides_compile_a_new_variant():
    x, b = torch.randn(6, 4), torch.randn(4)
    compiled = compile_fx(trace(relu_add, x, b), [x, b], codegen="cpp")
    xt = torch.randn(4, 6).t()
    torch.testing.assert_close(compiled(xt, b), torch.relu(xt + b))
    torch.testing.assert_close(compiled(x, b), torch.relu(x + b))
    assert len(compiled._variants) == 2


def test_eager_backend_and_no_compiler_fallback(monkeypatch):
    x, b = torch.randn(3, 5), torch.randn(5)
    compiled = compile_fx(trace(relu_add, x, b), [x, b], codegen="eager")
    torch.testing.assert_close(compiled(x, b), torch.relu(x + b))

    class NoCxx:
        has_cxx = False
        has_triton = True
        has_openmp = False
        has_cuda = False
    monkeypatch.setattr(compile_fx_module, "probe", lambda: NoCxx())
    if torch.cuda.is_available():   # Triton then needs CUDA tensors
        x, b = x.cuda(), b.cuda()
    with pytest.warns(tc.FallbackWarning, match="no C.. compiler"):
        compiled = compile_fx(trace(relu_add, x, b), [x, b], codegen="cpp")
    assert compiled.codegen == "triton"
    torch.testing.assert_close(compiled(x, b), torch.relu(x + b))


def test_torch_compile_backend_forward_and_backward():
    """Real Dynamo captures, our AOTAutograd makes prim graphs, our kernels run them."""
    def f(x, w, b):
        h = x @ w + b
        return torch.nn.functional.gelu(h) * torch.sigmoid(h)
    x = torch.randn(16, 8)
    w = torch.randn(8, 12, requires_grad=True)
    b = torch.randn(12, requires_grad=True)
    torch._dynamo.reset()
    compiled = torch.compile(f, backend=inductor_backend)
    out = compiled(x, w, b)
    expected = f(x, w, b)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    grads = torch.autograd.grad(out.sum(), (w, b))
    expected_grads = torch.autograd.grad(expected.sum(), (w, b))
    for g, e in zip(grads, expected_grads):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)
    torch._dynamo.reset()


def test_our_dynamo_our_aot_our_kernels():
    """The whole tutorcompile pipeline: stage 3 captures, stage 4 partitions, stage 5 fuses."""
    dynamo = pytest.importorskip("tutorcompile.dynamo")

    def f(x, w, b):
        return torch.softmax(torch.relu(x @ w + b), -1)
    x = torch.randn(16, 8)
    w = torch.randn(8, 12, requires_grad=True)
    b = torch.randn(12, requires_grad=True)
    compiled = dynamo.compile(f, backend=inductor_backend)
    out, expected = compiled(x, w, b), f(x, w, b)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    ours = torch.autograd.grad((out * out).sum(), (w, b))
    theirs = torch.autograd.grad((expected * expected).sum(), (w, b))
    for g, e in zip(ours, theirs):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)


@needs_cxx
def test_torch_level_calls_become_externs():
    """Calls that are not prims run in PyTorch, named in the wrapper; the rest still fuses."""
    from tutorcompile.fx.tracer import symbolic_trace

    def f(x, b):
        return torch.softmax(torch.relu(x + b) * 2, -1).exp()
    x, b = torch.randn(4, 8), torch.randn(8)
    graph = to_prims(symbolic_trace(f).graph)
    compiled = compile_fx(graph, [x, b], codegen="cpp")
    torch.testing.assert_close(compiled(x, b), f(x, b))
    assert "torch.softmax(buf2, -1)" in compiled.wrapper_code
    assert compiled.num_kernels == 2 and "# reuse" in compiled.wrapper_code


@needs_cxx
def test_detach_inside_the_graph_is_the_value_itself():
    """The compiled graph runs without autograd, so a detach between ops is no call at all
    (Inductor's ``nop``); a detached graph output is still a tensor of its own."""
    from tutorcompile.fx.tracer import symbolic_trace

    def f(x, w):
        return torch.relu(x @ torch.detach(w)), torch.detach(w)
    x, w = torch.randn(4, 8), torch.randn(8, 3, requires_grad=True)
    graph = to_prims(symbolic_trace(f).graph)
    compiled = compile_fx(graph, [x, w], codegen="cpp")
    out, w_out = compiled(x, w)
    torch.testing.assert_close(out, f(x, w)[0])
    assert w_out is not w and not w_out.requires_grad and torch.equal(w_out, w)
    assert compiled.wrapper_code.count("= torch.detach(") == 1, compiled.wrapper_code


@needs_cxx
def test_wrapper_with_externs_calls_pytorch_and_kernels_directly():
    """The wrapper of a model with extern calls does only the work: PyTorch functions and
    loaded kernels bound once as globals, no op-table dispatch, no graph at run time."""
    from tutorcompile.fx import GraphModule
    from tutorcompile.fx.node import Node
    from tutorcompile.ops import Prim

    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    x = torch.randn(4, 8)
    compiled = aot_module_inference(model, x)
    code = compiled.wrapper_code
    assert "torch.addmm(" in code and ".data_ptr()" in code, code
    assert "prims." not in code, code
    variant = compiled._current
    for value in variant.run.__globals__.values():
        assert not isinstance(value, (Prim, Node, GraphModule)), value
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, *model.parameters())[0], model(x))


def aot_module_inference(model, x):
    """The inference forward graph of ``model`` compiled by stage 5 (through stage 4)."""
    from tutorcompile.aot import aot_module
    from tutorcompile.inductor.compile_fx import inner_compiler
    compiler = inner_compiler(codegen="cpp")
    aot = aot_module(model, fw_compiler=compiler)
    with torch.no_grad():
        aot(x)
    return aot.artifacts.forward.compiled


@needs_cxx
def test_matmul_bias_add_becomes_addmm():
    """A linear layer's bias add is the matmul's epilogue (one BLAS call), 2-d and 3-d."""
    from tutorcompile.fx.tracer import symbolic_trace

    def f(x, w, b):
        return torch.relu(torch.matmul(x, w) + b)
    for x in (torch.randn(4, 8), torch.randn(2, 3, 8)):
        w, b = torch.randn(8, 5), torch.randn(5)
        graph = to_prims(symbolic_trace(f).graph)
        compiled = compile_fx(graph, [x, w, b], codegen="cpp")
        assert "torch.addmm(" in compiled.wrapper_code, compiled.wrapper_code
        torch.testing.assert_close(compiled(x, w, b), f(x, w, b))
        unfused = compile_fx(graph, [x, w, b], codegen="cpp", fusion=False)
        assert "addmm" not in unfused.wrapper_code


@needs_cxx
def test_a_matmul_result_goes_to_its_kernel_uncopied():
    """``addmm``/``mm`` always return a new row-major tensor: the kernel that reads it gets
    it as it comes (no ``.contiguous()`` call per extern per call), and its memory joins the
    pool. A matrix times a batch of matrices may come back transposed from ``matmul``: that
    one keeps its copy."""
    from tutorcompile.fx.tracer import symbolic_trace

    def linear(x, w, b):
        return torch.relu(torch.matmul(x, w) + b)
    x, w, b = torch.randn(4, 8), torch.randn(8, 5), torch.randn(5)
    compiled = compile_fx(to_prims(symbolic_trace(linear).graph), [x, w, b], codegen="cpp")
    code = compiled.wrapper_code
    assert "torch.addmm(" in code and ".contiguous()" not in code, code
    torch.testing.assert_close(compiled(x, w, b), linear(x, w, b))

    a, batch = torch.randn(3, 4), torch.randn(2, 4, 5)
    compiled = compile_fx(trace(lambda a, b: ops.relu(ops.matmul(a, b)), a, batch),
                          [a, batch], codegen="cpp")
    assert "torch.matmul(a, b).contiguous()" in compiled.wrapper_code, compiled.wrapper_code
    torch.testing.assert_close(compiled(a, batch), torch.relu(a @ batch))


@needs_cxx
def test_a_chain_of_views_of_our_buffer_is_one_as_strided_call():
    """Views of the qkv product reach a PyTorch call as one strided view of the product (its
    layout found once, at compile time: ``reinterpret``, a view no caller sees;
    ``torch.as_strided`` where one is returned): q, ``reshape -> narrow`` of it and merged
    to the matrix ``torch.mm`` takes, is one call instead of three. Values are eager's."""
    x, w, w2 = torch.randn(8, 6), torch.randn(6, 24), torch.randn(8, 5)

    def f(x, w, w2):
        qkv = ops.reshape(ops.matmul(x, w), (2, 4, 24))
        return ops.matmul(ops.slice(qkv, 2, 0, 8), w2)      # (2, 4, 8): rows of 24

    compiled = compile_fx(trace(f, x, w, w2), [x, w, w2], codegen="cpp")
    code = compiled.wrapper_code
    assert "reinterpret(buf0, (8, 8), (24, 1), 0)" in code, code
    assert "torch.narrow(" not in code and "torch.matmul(" not in code, code
    torch.testing.assert_close(compiled(x, w, w2),
                               (x @ w).reshape(2, 4, 24)[..., :8] @ w2)
    returned = compile_fx(trace(lambda x, w: ops.permute(ops.reshape(ops.slice(ops.reshape(
        ops.matmul(x, w), (2, 4, 24)), 2, 0, 8), (2, 4, 2, 4)), (0, 2, 1, 3)), x, w), [x, w],
        codegen="cpp")
    assert "torch.as_strided(buf0, (2, 2, 4, 4), (96, 4, 24, 1), 0)" in returned.wrapper_code
    assert returned(x, w)._base is not None        # a real view, as eager's


def _aten_calls(run) -> list[str]:
    """The ATen ops PyTorch runs during ``run()`` (the wrapper's calls and what they do
    inside), as the profiler names them without the ``aten::``."""
    with torch.profiler.profile() as prof:
        run()
    return [e.name.removeprefix("aten::") for e in prof.events() if e.name.startswith("aten::")]


@needs_cxx
def test_batched_products_get_their_operands_from_our_kernels_uncopied():
    """Attention's heads, split off a projection and moved before the time dimension, are
    batches of matrices whose batch dimensions do not merge into one stride: ``torch.matmul``
    copies them inside, on every call and for every product that reads them. The graph merges
    the batch dimensions (``batch_matmuls``) and a kernel of ours copies each such operand
    once (``matrix_operand``): ``q``, ``k`` (read transposed) and ``v`` in one loop. PyTorch
    then runs ``bmm`` alone, forward and backward, without the ``matmul``, ``clone``,
    ``copy_`` and ``_unsafe_view`` that eager's products make; values and gradients are
    eager's."""
    from tutorcompile.aot import aot_function
    from tutorcompile.inductor.compile_fx import inner_compiler
    B, T, H, D = 2, 5, 3, 4

    def attention(x, w):
        q, k, v = (x @ w).split(H * D, -1)
        q, k, v = (t.reshape(B, T, H, D).transpose(1, 2) for t in (q, k, v))
        return torch.softmax(q @ k.transpose(-2, -1), -1) @ v

    x, g = torch.randn(B, T, 8, dtype=torch.float64), torch.randn(B, H, T, D).double()
    w = torch.randn(8, 3 * H * D, dtype=torch.float64, requires_grad=True)
    compiled = tc.compile(attention, backend="inductor")
    (compiled(x, w) * g).sum().backward()
    grad, w.grad = w.grad, None
    eager_calls = _aten_calls(lambda: (attention(x, w) * g).sum().backward())
    torch.testing.assert_close(grad, w.grad)
    torch.testing.assert_close(compiled(x, w), attention(x, w))
    # what PyTorch's matmul does inside, which the compiled code must not
    inside = {"copy_", "clone", "_unsafe_view", "matmul"}
    assert inside & set(eager_calls), eager_calls      # (the check can see them)
    calls = _aten_calls(lambda: (compiled(x, w) * g).sum().backward())
    assert calls.count("bmm") == 2 + 4, calls           # forward 2, backward 4
    assert not inside & set(calls), calls
    # the forward saves its copies of q, k and v: the backward's products read them as
    # they are, with no copy of their own (before: one kernel copying each again)
    aot = aot_function(attention, fw_compiler=inner_compiler(codegen="cpp"),
                       bw_compiler=inner_compiler(codegen="cpp"))
    (aot(x, w) * g).sum().backward()
    assert len(aot.artifacts.forward.compiled.scheduler.lowering.matrix_copies) == 3
    assert aot.artifacts.backward.compiled.scheduler.lowering.matrix_copies == {}

    # a chain of permutes is merged as one; a permute the graph makes only further down
    # is not used above its place (it would be read before it exists)
    def later_view(x, y):
        a = ops.permute(ops.permute(x, (1, 0, 3, 2)), (0, 1, 3, 2))      # x moved (1, 0, 2, 3)
        return ops.matmul(a, y), ops.permute(x, (1, 0, 2, 3))
    x, y = torch.randn(3, 2, 5, 4), torch.randn(2, 3, 4, 6)
    graph = compile_fx(trace(later_view, x, y), [x, y], codegen="cpp")
    torch.testing.assert_close(graph(x, y), (x.transpose(0, 1) @ y, x.transpose(0, 1)))

    # inference: one copy per operand, shared by the products that read it
    def two_products(x, y):
        heads = ops.permute(ops.reshape(x, (B, T, H, D)), (0, 2, 1, 3))
        other = ops.permute(ops.reshape(y, (B, T, H, D)), (0, 2, 3, 1))
        return ops.matmul(heads, other), ops.matmul(ops.permute(heads, (0, 1, 3, 2)), heads)
    x, y = torch.randn(B, T, H * D), torch.randn(B, T, H * D)
    graph = compile_fx(trace(two_products, x, y), [x, y], codegen="cpp")
    assert len(graph.scheduler.lowering.matrix_copies) == 2, graph.wrapper_code
    assert "torch.bmm(" in graph.wrapper_code and "torch.matmul(" not in graph.wrapper_code
    hx = x.reshape(B, T, H, D).transpose(1, 2)
    expected = (hx @ y.reshape(B, T, H, D).permute(0, 2, 3, 1), hx.transpose(-2, -1) @ hx)
    torch.testing.assert_close(graph(x, y), expected)


@needs_cxx
@pytest.mark.parametrize("dims", [1, 2])
def test_a_convolution_and_its_gradients_are_direct_pytorch_calls(dims):
    """The wrapper spells a convolution as ``torch.convolution`` and its gradients as
    ``aten.convolution_backward`` with every argument settled at compile time (stride 2,
    a padding tuple, groups), not the prim's Python reference (which normalised the
    arguments and made a stand-in tensor on every call). Values and gradients are eager's.
    (On contiguous tensors: channels-last copies are another test's.)"""
    from tutorcompile.aot import aot_function
    from tutorcompile.inductor import config
    from tutorcompile.inductor.compile_fx import inner_compiler
    conv = torch.nn.functional.conv1d if dims == 1 else torch.nn.functional.conv2d
    x = torch.randn(2, 4, *(9,) * dims, requires_grad=True)
    w = torch.randn(6, 2, *(3,) * dims, requires_grad=True)
    b = torch.randn(6, requires_grad=True)

    def f(x, w, b):
        return torch.relu(conv(x, w, b, stride=2, padding=(1,) * dims, groups=2))
    compiler = inner_compiler(codegen="cpp")
    compiled = aot_function(f, fw_compiler=compiler, bw_compiler=compiler)
    with config.patch(conv_layout="contiguous"):
        out = compiled(x, w, b)
        g = torch.randn_like(out)
        grads = torch.autograd.grad(out, (x, w, b), g)
    expected = f(x, w, b)
    torch.testing.assert_close(out, expected)
    for got, want in zip(grads, torch.autograd.grad(expected, (x, w, b), g)):
        torch.testing.assert_close(got, want)
    art = compiled.artifacts
    forward, backward = art.forward.compiled.wrapper_code, art.backward.compiled.wrapper_code
    stride, ones, zeros = repr((2,) * dims), repr((1,) * dims), repr((0,) * dims)
    assert (f"torch.convolution(primals_x, primals_w, primals_b, {stride}, {ones}, {ones}, "
            f"False, {zeros}, 2)") in forward, forward
    # both gradients in one call (compile_fx.fuse_convolution_backward), as eager makes
    assert backward.count("torch.ops.aten.convolution_backward.default(") == 1, backward
    assert "[True, True, False])" in backward, backward
    assert "_fn(" not in forward + backward, forward + backward


@needs_cxx
@pytest.mark.parametrize("layout", ["measure", "contiguous", "channels_last"])
def test_stacked_convolutions_pair_every_gradient_and_run_in_the_layout_chosen(layout):
    """Three convolutions in a row: each layer's input gradient is the next one's ``g``, so
    pairing one layer's gradients replaced a node that the next pair still named (the pass
    raised "was erased from the graph"), and a pair's call could come after a reader of its
    input gradient. Every layer is now one ``convolution_backward``, in an order where each
    value is computed before it is read. Each convolution runs on contiguous tensors or on
    channels-last copies (``config.conv_layout``): forced either way, or measured, when the
    autotune table holds both timings of each and marks the one the wrapper calls. Values
    and gradients are eager's in every layout, and outputs contiguous."""
    from tutorcompile.aot import aot_function
    from tutorcompile.inductor import config
    from tutorcompile.inductor.compile_fx import inner_compiler
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(8, 8, 7, padding=3, groups=8), torch.nn.Conv2d(8, 16, 1),
        torch.nn.Conv2d(16, 16, 5, stride=2, padding=2, groups=16, bias=False))
    x = torch.randn(2, 8, 12, 12, requires_grad=True)
    params = list(model.parameters())

    def f(x, *params):
        return torch.func.functional_call(model, dict(zip(
            [n for n, _ in model.named_parameters()], params)), (x,))
    compiler = inner_compiler(codegen="cpp")
    with config.patch(conv_layout=layout):
        compiled = aot_function(f, fw_compiler=compiler, bw_compiler=compiler)
        out = compiled(x, *params)
        g = torch.randn_like(out)
        expected = f(x, *params)
        torch.testing.assert_close(out, expected)
        assert out.is_contiguous()   # (a channels-last result would fail the user's .view)
        for got, want in zip(torch.autograd.grad(out, (x, *params), g),
                             torch.autograd.grad(expected, (x, *params), g)):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    art = compiled.artifacts
    for compiled_graph, on_copies, plain in (
            (art.forward.compiled, "convolution_channels_last_fn(", "torch.convolution("),
            (art.backward.compiled, "convolution_backward_channels_last_fn(",
             "torch.ops.aten.convolution_backward.default(")):
        code, rows = compiled_graph.wrapper_code, compiled_graph.autotune_table.rows
        if layout == "measure":
            assert len(rows) == 6 and all(r.time_s > 0 for r in rows), rows
            chosen = [r.choice for r in rows if r.chosen]
            assert len(chosen) == 3, rows
            copies = chosen.count("channels-last copies")
        else:
            assert rows == []
            copies = 3 if layout == "channels_last" else 0
        assert code.count(on_copies) == copies, code
        assert code.count(plain) == 3 - copies, code


@needs_cxx
def test_measuring_a_convolution_layout_leaves_the_random_stream_alone():
    """Timing a convolution both ways while compiling draws its scratch tensors from a
    generator of its own: it moved the global stream, so a model with dropout, compiled at
    its first call after ``manual_seed``, drew other masks than eager (MobileNet-V3's
    training step was off by 0.02)."""
    import tutorcompile as tc
    from tutorcompile.inductor import config
    conv, x = torch.nn.Conv2d(8, 16, 1), torch.randn(2, 8, 8, 8)
    tc.reset()
    torch.manual_seed(0)
    state = torch.get_rng_state()
    with config.patch(conv_layout="measure"):
        out = tc.compile(conv, backend="inductor")(x)
    assert torch.equal(torch.get_rng_state(), state)
    torch.testing.assert_close(out, conv(x))


def test_sort_topologically_moves_a_node_up_before_its_first_reader():
    from tutorcompile.fx import Graph
    graph = Graph()
    a = graph.placeholder("a")
    b = graph.call_function(torch.neg, (a,))
    c = graph.call_function(torch.sin, (b,))
    graph.output(c)
    with graph.inserting_before(graph.output_node):   # d is made after c, its reader
        d = graph.call_function(torch.cos, (a,))
    c.args = (d,)
    graph.sort_topologically()
    names = [n.name for n in graph.nodes]
    assert names.index(d.name) < names.index(c.name)
    assert names[0] == "a" and names[-1] == "output" and names.index(b.name) == 1
    graph.lint()


@needs_cxx
def test_a_prim_of_a_tensor_constant_is_computed_once_and_never_overwritten():
    """``reshape`` of a tensor folded into the graph (an ``arange`` of positions) gives the
    same value on every call: the wrapper computes it at compile time and holds it. It used
    to run on every call and, as memory of ours, went back to the pool after its last
    reader -- while it was a *view of the constant*: the next int64 buffer of its size was
    written into the constant, and the second call gathered the wrong rows."""
    pos = torch.arange(8).reshape(2, 4)
    w, n = torch.randn(10, 3), torch.arange(8) * 7

    def f(w, n):
        rows = ops.mul(ops.index_select(w, 0, ops.reshape(pos, (8,))), 2.0)
        return rows, ops.add(ops.mul(n, 3), 1)
    compiled = compile_fx(trace(f, w, n), [w, n], codegen="cpp")
    assert "torch.reshape(" not in compiled.wrapper_code, compiled.wrapper_code
    assert "computed once at compile time" in compiled.wrapper_code
    for _ in range(3):
        rows, m = compiled(w, n)
        torch.testing.assert_close(rows, w[torch.arange(8)] * 2)
        torch.testing.assert_close(m, n * 3 + 1)
    torch.testing.assert_close(pos, torch.arange(8).reshape(2, 4))


@needs_cxx
def test_views_from_pytorch_calls_keep_their_buffer_alive():
    """``split`` returns views of a kernel's output: that buffer must not be handed to a
    later kernel (memory planning) while the views are still to be read."""
    from tutorcompile.fx.tracer import symbolic_trace

    def f(x):
        y = torch.exp(x)
        a, b = torch.split(y, 4, 1)
        z = torch.sin(torch.softmax(x, -1))  # a kernel after the split, same layout as y
        return torch.cat([b, a], 1), z
    x = torch.randn(4, 8)
    graph = to_prims(symbolic_trace(f).graph)
    compiled = compile_fx(graph, [x], codegen="cpp")
    for got, expected in zip(compiled(x), f(x)):
        torch.testing.assert_close(got, expected)


_TORCH_TO_PRIM = {
    operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "div",
    operator.neg: "neg", torch.add: "add", torch.sub: "sub", torch.mul: "mul",
    torch.div: "div", torch.neg: "neg", torch.exp: "exp", torch.log: "log",
    torch.sqrt: "sqrt", torch.rsqrt: "rsqrt", torch.abs: "abs", torch.sin: "sin",
    torch.cos: "cos", torch.tanh: "tanh", torch.sigmoid: "sigmoid", torch.relu: "relu",
    torch.nn.functional.relu: "relu", torch.erf: "erf", torch.maximum: "maximum",
    torch.minimum: "minimum", torch.where: "where", torch.matmul: "matmul",
}
_METHOD_TO_PRIM = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "exp": "exp",
                   "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "abs": "abs",
                   "sin": "sin", "cos": "cos", "tanh": "tanh", "sigmoid": "sigmoid",
                   "relu": "relu", "neg": "neg"}


def to_prims(graph):
    """A graph mixing prims and torch-level calls, as stage 5 receives when a call has no
    decomposition: calls with a one-to-one prim (positional args, no kwargs) become that
    prim; everything else stays and runs in PyTorch."""
    graph = graph.copy()
    for node in graph.nodes:
        name = None
        if node.op == "call_function":
            try:
                name = _TORCH_TO_PRIM.get(node.target)
            except TypeError:
                name = None
        elif node.op == "call_method":
            name = _METHOD_TO_PRIM.get(node.target)
        if name is None or node.kwargs or name not in PRIMS:
            continue
        prim = PRIMS[name]
        with graph.inserting_before(node):
            new = graph.call_function(prim, node.args, {})
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        graph.erase_node(node)
    return graph


@needs_cxx
def test_a_slice_a_pytorch_call_reads_is_one_narrow():
    """A step-1 slice that a PyTorch call reads is rebuilt as ``torch.narrow`` (negative and
    open bounds included), not by indexing with a tuple of slices."""
    a, b = torch.randn(6, 10), torch.randn(4, 3)

    def f(a, b):
        return (ops.matmul(ops.slice(a, 1, 2, 6), b), ops.matmul(ops.slice(a, -1, -4), b),
                ops.matmul(ops.slice(a, 1, 6, 100), b))
    compiled = compile_fx(trace(f, a, b), [a, b], codegen="cpp")
    got = compiled(a, b)
    for out, expected in zip(got, (a[:, 2:6] @ b, a[:, -4:] @ b, a[:, 6:100] @ b)):
        torch.testing.assert_close(out, expected)
    code = compiled.wrapper_code
    for call in ("torch.narrow(a, 1, 2, 4)", "torch.narrow(a, 1, 6, 4)"):
        assert code.count(call) == (2 if call.endswith("6, 4)") else 1), code
    assert "slice" not in code.replace("view_slice", ""), code


@needs_cxx
def test_a_permute_of_a_permute_is_one_call_or_none():
    """A PyTorch call's operand that is a transpose of a transpose is passed as the tensor
    itself; a chain of permutes becomes one permute of the first base."""
    a, b, c, d = torch.randn(4, 6), torch.randn(6, 5), torch.randn(2, 3, 4), torch.randn(3, 2, 5)

    def f(a, b, c, d):
        twice = ops.permute(ops.permute(a, (1, 0)), (1, 0))
        chain = ops.permute(ops.permute(ops.permute(c, (2, 0, 1)), (0, 2, 1)), (1, 0, 2))
        return ops.matmul(twice, b), ops.matmul(chain, d)
    compiled = compile_fx(trace(f, a, b, c, d), [a, b, c, d], codegen="cpp")
    got = compiled(a, b, c, d)
    torch.testing.assert_close(got[0], a @ b)
    torch.testing.assert_close(got[1], c.permute(2, 0, 1).permute(0, 2, 1).permute(1, 0, 2) @ d)
    code = compiled.wrapper_code
    assert "torch.mm(a, b)" in code, code            # two matrices: the BLAS call itself
    assert code.count("torch.permute(") == 1, code   # the chain, as one call


def cat_and_its_contiguous(a, b):
    c = torch.cat([a, b], 1)  # MRA returns one value twice, once through .contiguous()
    return c, c.contiguous(), c.float()


@needs_cxx
def test_one_value_returned_as_several_outputs_gets_a_tangent_each():
    """Inductor's decompositions make ``c.contiguous()`` and ``c.float()`` the node ``c``
    itself: three user outputs, one value. Each needs its own tangent placeholder (the
    joint graph once named all three ``tangents_cat`` and refused the second), and the
    value's gradient is their sum."""
    a, b = (torch.randn(3, 4, requires_grad=True) for _ in range(2))
    tc.reset()
    got = tc.compile(cat_and_its_contiguous, backend="inductor")(a, b)
    want = cat_and_its_contiguous(a, b)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    weights = (1.0, 3.0, -2.0)
    grads = torch.autograd.grad(sum(w * o.sum() for w, o in zip(weights, got)), [a, b])
    expected = torch.autograd.grad(sum(w * o.sum() for w, o in zip(weights, want)), [a, b])
    for g, w in zip(grads, expected):
        torch.testing.assert_close(g, w)


@needs_cxx
def test_complex_tensors_run_in_pytorch_whatever_the_prim():
    """The code generators have no complex type: every prim on a complex tensor -- a view,
    a scatter into a slice, not only arithmetic -- runs in PyTorch (a spectral convolution,
    as in neural operators: rfft2, a complex einsum into a slice of zeros, irfft2)."""
    weight = torch.randn(2, 2, 3, 3, dtype=torch.cfloat)

    def spectral_conv(x):
        xf = torch.fft.rfft2(x)
        out = torch.zeros(1, 2, 8, 5, dtype=torch.cfloat)
        out[..., :3, :3] = torch.einsum("bixy,ioxy->boxy", xf[..., :3, :3], weight)
        return torch.fft.irfft2(out, s=x.shape[-2:]).relu()
    x = torch.randn(1, 2, 8, 8)
    torch.testing.assert_close(tc.compile(spectral_conv, fullgraph=True)(x), spectral_conv(x),
                               rtol=1e-4, atol=1e-5)


# --- inputs written in place --------------------------------------------------------------
def _updates_in_place(x, y):
    x.mul_(0.9).add_(y)          # an optimizer's momentum buffer: read, then written, per element


def _update_returned(x):
    x.add_(1)
    return x


def _read_transposed_first(x):   # the update would overwrite what x.t() still reads
    y = x.t() + 0
    x.add_(1)
    return y


def _shifted(x):                 # each element reads its neighbour
    x[1:] = x[1:] * 2 + x[:-1]


def _read_flipped(x):            # each element reads its mirror image
    z = x * 3
    x.sub_(z.flip(0))
    return z


def _summed_after(x):            # a later kernel reads the new value (a reduction's loop)
    x.add_(1)
    return x.sum()


def _old_value_read_after(x, y):  # the old x is read by a buffer computed after the store
    z = x * 3
    x.copy_(y * 2)
    return z + x


def _old_value_read_beside(x, y):  # the old x is read outside the new value's computation
    z = x * 2
    x.mul_(y)
    return z + x


def _copied_from_a_view_then_written(x, y):   # x's new value is a view of y as it was
    x.copy_(y.t())
    y.mul_(2)


IN_PLACE = {_updates_in_place: True, _update_returned: True, _read_transposed_first: False,
            _shifted: False, _read_flipped: False, _summed_after: False,
            _old_value_read_after: False, _old_value_read_beside: False,
            _copied_from_a_view_then_written: False}


@pytest.mark.parametrize("kernels", BACKENDS)
@pytest.mark.parametrize("fn", IN_PLACE, ids=lambda f: f.__name__.strip("_"))
def test_a_kernel_stores_an_inputs_new_values_into_it_only_where_no_read_can_see_it(
        fn, kernels, tmp_path):
    """A graph that writes its input gives the new values back for AOT to copy in; where the
    kernel computing them reads the input only at the element it writes, and nothing after
    it reads the input, the kernel stores into the input itself: no allocation, no copy,
    and in C++ the two pointers are not ``__restrict__``."""
    from tutorcompile import _logging as logs

    make = (lambda: (torch.randn(4, 4), torch.randn(4, 4))) if fn in (
        _updates_in_place, _old_value_read_after, _old_value_read_beside,
        _copied_from_a_view_then_written) else \
        (lambda: (torch.randn(4, 4),)) if fn is _read_transposed_first else \
        (lambda: (torch.randn(9),))
    want_inputs = make()
    got_inputs = on(kernels, *(t.clone() for t in want_inputs))
    want = fn(*want_inputs)
    with logs.debug(tmp_path) as folder:
        got = tc.compile(fn, options={"codegen": kernels})(*got_inputs)
    for g, w in zip(got_inputs, want_inputs):
        torch.testing.assert_close(g.cpu(), w)
    if want is None:
        assert got is None
    else:
        torch.testing.assert_close(got.cpu(), want)
    if fn is _update_returned:
        assert got is got_inputs[0]          # as eager: the input itself, updated
    (code,) = (p.read_text() for p in folder.glob("*output_code*"))
    assert ("written in place" in code) == IN_PLACE[fn], code
    if kernels == "cpp" and IN_PLACE[fn]:
        assert "const float* in_ptr_l_x," in code, code


def _copied_then_written(x, y):
    x.copy_(y)               # x's new value is y as it was ...
    y.clamp_(-0.5, 0.5)      # ... and y is written too
    return x.sum()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_new_value_that_is_another_written_input_is_copied_before_that_input(backend):
    """The epilogue copies each mutated input's new value back one after another. When
    one new value is another mutated input as it was (or a view of it), it is copied
    first: before, x got y's clamped values."""
    x, y = torch.randn(4, 4), torch.randn(4, 4) * 2
    want = [x.clone(), y.clone()]
    want_out = _copied_then_written(*want)
    got = [x.clone(), y.clone()]
    torch.testing.assert_close(tc.compile(_copied_then_written, backend=backend)(*got),
                               want_out)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


_READS = ["{x} * 2", "{x}.t().contiguous() + 0", "{x}.flip(0) * 1", "{x}.sin()",
          "{x}.sum(1, keepdim=True) + {x}", "{x}[:, :1] + {x}", "{x}.roll(1, 0) + 0",
          "{x} + {y}", "{x}.view(-1)[:8].view(2, 4).sum() + {x}", "{x}[::2].repeat(2, 1) * 1"]
_WRITES = ["{x}.add_({v})", "{x}.mul_(2)", "{x}.copy_({v})", "{x}.sub_({v}.t())",
           "{x}[1:].add_(1)", "{x}.clamp_(-0.5, 0.5)", "{x}.addcmul_({v}, {y})",
           "{x}[0].add_({v}[1])", "{x}.t().mul_({v})", "{x}.view(-1)[::2].zero_()",
           "{x}[:, 2:].copy_({v}[:, :2])", "{x}.copy_({v}.t())", "{x}.unsqueeze(0).div_(3)"]


def _random_program(rng) -> str:
    lines, values = [], ["y"]
    for i in range(rng.randint(2, 6)):
        if rng.random() < 0.5:
            lines.append(f"v{i} = " + rng.choice(_READS).format(x=rng.choice("xy"), y="y"))
            values.append(f"v{i}")
        else:
            lines.append(rng.choice(_WRITES).format(x=rng.choice("xxy"), v=rng.choice(values),
                                                    y="y"))
    result = " + ".join(rng.sample(values, min(2, len(values))))
    return "def f(x, y):\n    " + "\n    ".join(lines) + f"\n    return {result} + x\n"


@needs_cxx
@pytest.mark.usefixtures("fresh_compiler")
def test_random_programs_that_write_their_inputs_match_eager():
    """Reads and writes of two inputs in random order, through views (the sweep that
    found the in-place rules' holes, and the copy-back order's): every result and both
    inputs after the call equal eager's, under inductor, whether or not a kernel wrote
    an input in place."""
    import random
    rng, checked = random.Random(0), 0
    while checked < 30:
        source = _random_program(rng)
        namespace = {"torch": torch}
        exec(source, namespace)
        f = namespace["f"]
        x, y = torch.randn(4, 4), torch.randn(4, 4)
        want_inputs = [x.clone(), y.clone()]
        try:
            want = f(*want_inputs)
        except RuntimeError:          # (an in-place write eager refuses: overlapping memory)
            continue
        tc.reset()
        got_inputs = [x.clone(), y.clone()]
        got = tc.compile(f)(*got_inputs)
        torch.testing.assert_close(got, want, msg=source)
        for g, w in zip(got_inputs, want_inputs):
            torch.testing.assert_close(g, w, msg=source)
        checked += 1


def test_an_optimizer_step_writes_parameters_and_state_in_place(tmp_path):
    """SGD with momentum under inductor: every parameter and momentum buffer is written by
    the kernel that computes it (the step compiles as an inference graph: no gradient
    leaves it), and the values are eager's."""
    from tutorcompile import _logging as logs

    torch.manual_seed(0)
    models = [torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
              for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in models]
    x, step = torch.randn(4, 8), tc.compile(opts[1].step)
    for k in range(3):
        for m, opt in zip(models, opts):
            opt.zero_grad()
            m(x).pow(2).sum().backward()
        opts[0].step()
        if k == 0:
            opts[1].step()                  # its momentum buffers made
        elif k == 1:
            with logs.debug(tmp_path) as folder:
                step()                      # compiled here
        else:
            step()
    for p, q in zip(models[0].parameters(), models[1].parameters()):
        torch.testing.assert_close(q, p)
        assert q.is_leaf and q.requires_grad and q.grad_fn is None
    (code,) = (p.read_text() for p in folder.glob("*output_code*"))
    assert code.count("written in place") == 8, code    # 4 parameters, 4 momentum buffers
    body = code.split("def call(")[1]
    assert "empty_strided(" not in body and "keep(" not in body, code


def test_the_old_name_of_codegen_still_works_with_a_warning():
    """``backend=`` was compile_fx's name for the code generator (now ``codegen=``: a
    backend is what tc.compile hands its graphs to); the old spelling warns and works."""
    x, b = torch.randn(4, 8), torch.randn(8)
    with pytest.warns(DeprecationWarning, match="backend= is now codegen="):
        compiled = compile_fx(trace(relu_add, x, b), [x, b], backend="cpp")
    assert compiled.codegen == "cpp"
    torch.testing.assert_close(compiled(x, b), torch.relu(x + b))
    with pytest.raises(ValueError, match="disagree"), pytest.warns(DeprecationWarning):
        compile_fx(trace(relu_add, x, b), [x, b], codegen="cpp", backend="eager")
    with pytest.warns(DeprecationWarning, match="backend= is now codegen="):
        f = tc.compile(lambda x, b: torch.relu(x + b), options={"backend": "cpp"})
        torch.testing.assert_close(f(x, b), torch.relu(x + b))


def test_kept_buffers_hand_memory_back_only_when_nothing_holds_it():
    """``KeptBuffers.take``: the slot's last tensor again when only the slot holds it; new
    memory while a Python reference, a view of its memory or autograd's saved tensors
    still hold it."""
    from tutorcompile.inductor.wrapper import CAN_KEEP, KeptBuffers
    if not CAN_KEEP:
        pytest.skip("this torch cannot count a tensor's holders")
    keep = KeptBuffers(1).take

    def take():
        return keep(0, (4, 8), (8, 1), torch.float32, torch.device("cpu"))
    first = take()
    address = first.data_ptr()
    held = take()                               # `first` (that very tensor) is held
    assert held.data_ptr() != address
    del first, held
    assert take().data_ptr() != address         # the slot kept the newer tensor
    latest = take()
    address = latest.data_ptr()
    view = latest[1:]
    del latest
    assert take().data_ptr() != address         # a view still reads its memory
    del view
    latest = take()
    address = latest.data_ptr()
    loss = (torch.ones(4, 8, requires_grad=True) * latest).sum()   # mul saves `latest`
    del latest
    assert take().data_ptr() != address         # autograd holds it for the backward
    loss.backward()
    del loss
    latest = take()
    address = latest.data_ptr()
    del latest
    assert take().data_ptr() == address         # nothing holds it: the same memory


def _mlp_step(x, w1, w2):
    return (torch.tanh(x @ w1).sin() @ w2).relu().sum()


def test_a_kept_saved_value_is_not_overwritten_by_a_second_forward(tmp_path):
    """A training forward's saved values are kept between calls, but a second forward
    before the first one's backward gets memory of its own: both backwards see their own
    values (gradient accumulation over two micro-batches), and match eager's."""
    w1 = torch.randn(16, 32, requires_grad=True)
    w2 = torch.randn(32, 8, requires_grad=True)
    x1, x2 = torch.randn(4, 16), torch.randn(4, 16)
    from tutorcompile import _logging as logs
    from tutorcompile.inductor import config
    compiled = tc.compile(_mlp_step, backend="inductor")
    with config.patch(keep_buffers_min_bytes=0), logs.debug(tmp_path) as folder:
        compiled(x1, w1, w2).backward()         # (every buffer kept, small as they are)
    forward = min(folder.glob("*output_code*")).read_text()   # (the backward's is later)
    assert "= keep(" in forward.split("def call(")[1], forward
    w1.grad = w2.grad = None
    for _ in range(2):                          # the second time round, memory is kept
        (compiled(x1, w1, w2) + 2 * compiled(x2, w1, w2)).backward()
        ours = (w1.grad, w2.grad)
        w1.grad = w2.grad = None
        (_mlp_step(x1, w1, w2) + 2 * _mlp_step(x2, w1, w2)).backward()
        for g, e in zip(ours, (w1.grad, w2.grad)):
            torch.testing.assert_close(g, e)
        w1.grad = w2.grad = None


@needs_cxx
def test_only_buffers_no_caller_sees_are_kept():
    """The wrapper takes kept memory for large intermediates and, in a training forward,
    for the values saved for the backward; an output the caller gets is allocated anew each
    call, so the caller may keep it, and small buffers as before
    (``config.keep_buffers``, ``config.keep_buffers_min_bytes``)."""
    from tutorcompile.inductor import config

    def f(x):
        return torch.softmax(torch.exp(x) @ x, -1).sin()
    x = torch.randn(256, 256)                   # 256 KiB a buffer
    compiled = compile_fx(to_prims(symbolic_trace_fn(f)), [x], codegen="cpp")
    code = compiled.wrapper_code
    assert "keep(0, (256, 256)" in code, code   # exp(x): an intermediate
    returned = code.split("return ")[1].strip()
    assert f"{returned} = empty_strided(" in code, code
    with config.patch(keep_buffers_min_bytes=1 << 20):
        small = compile_fx(to_prims(symbolic_trace_fn(f)), [x], codegen="cpp")
    assert "keep(" not in small.wrapper_code
    first = compiled(x)
    second = compiled(x + 1)
    assert first.data_ptr() != second.data_ptr()
    torch.testing.assert_close(first, f(x), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(second, f(x + 1), rtol=1e-4, atol=1e-5)
    with config.patch(keep_buffers=False):
        plain = compile_fx(to_prims(symbolic_trace_fn(f)), [x], codegen="cpp")
    assert "keep(" not in plain.wrapper_code


def symbolic_trace_fn(f):
    from tutorcompile.fx.tracer import symbolic_trace
    return symbolic_trace(f).graph
