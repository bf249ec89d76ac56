"""Stage 5: the scheduler's fusion decisions, their reasons, and the bytes they save.

Fusion is decided before any code is compiled, so most of these tests only lower and
schedule (``schedule``); the random-graph tests run the result against eager.
"""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kernel_backends import on
from tutorcompile.environment import probe
from tutorcompile.fx import GraphModule
from tutorcompile.inductor import config as inductor_config
from tutorcompile.inductor import examples
from tutorcompile.inductor.compile_fx import compile_fx
from tutorcompile.inductor.lowering import lower_graph
from tutorcompile.inductor.scheduler import schedule
from tutorcompile.ops import ops, trace

pytestmark = pytest.mark.stage5


def scheduled(fn, *inputs, backend="cpp", fusion=True):
    graph = trace(fn, *inputs)
    return graph, schedule(lower_graph(graph, inputs, backend), backend, fusion)


@pytest.mark.parametrize("name,args", [
    ("softmax", (torch.randn(64, 100),)),
    ("layernorm", (torch.randn(64, 100), torch.randn(100), torch.randn(100))),
    ("rmsnorm", (torch.randn(64, 100), torch.randn(100))),
    ("chain", (torch.randn(64, 100), torch.randn(100))),
])
@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_each_example_is_one_kernel(name, args, backend):
    # (scheduled, not compiled: Triton's buffers are still on the device it would run on)
    graph, sched = scheduled(getattr(examples, name), *on(backend, *args), backend=backend)
    report = sched.report
    assert report.kernels_after == 1, str(report)
    assert report.kernels_before == len(sched.buffers) > 1
    kernel = report.kernels[0].name
    calls = [n for n in graph.nodes if n.op == "call_function"]
    assert all(n.meta["kernel"] == kernel for n in calls)
    assert not report.refused or all("not chosen" not in r.reason for r in report.refused)


def test_softmax_bytes_match_the_triton_tutorial():
    """Naive: read 5MN + 2M, write 3MN + 2M elements; fused: read MN, write MN."""
    M, N = 64, 100
    _, sched = scheduled(examples.softmax, torch.randn(M, N))
    r = sched.report
    assert (r.bytes_read_before, r.bytes_written_before) == (4 * (5 * M * N + 2 * M),
                                                             4 * (3 * M * N + 2 * M))
    assert (r.bytes_read_after, r.bytes_written_after) == (4 * M * N, 4 * M * N)
    text = str(r)
    assert "5 before fusion -> 1 after" in text


def test_fusion_disabled_gives_one_kernel_per_op():
    _, sched = scheduled(examples.softmax, torch.randn(8, 10), fusion=False)
    assert sched.report.kernels_after == sched.report.kernels_before == 5


def test_reductions_over_different_dims_are_refused_with_a_reason():
    def fn(x):
        return ops.add(ops.sum(x, (0,), keepdim=True), ops.sum(x, (1,), keepdim=True))
    _, sched = scheduled(fn, torch.randn(6, 6))
    reasons = [r.reason for r in sched.report.refused]
    assert sched.report.kernels_after == 2
    assert any("reductions over different loops" in r for r in reasons), reasons


def test_cycle_through_an_extern_is_refused():
    """p -> matmul -> add and p -> add: fusing p with add would need matmul in between."""
    def fn(x, w):
        p = ops.exp(x)
        return ops.add(p, ops.matmul(p, w))
    _, sched = scheduled(fn, torch.randn(8, 8), torch.randn(8, 8))
    reasons = [str(r) for r in sched.report.refused]
    assert sched.report.kernels_after == 3
    assert any("cycle" in r for r in reasons), reasons
    assert any("extern kernel" in r for r in reasons), reasons


def test_reading_a_reduction_at_another_row_is_refused():
    """out[i, j] = x[i, j] - max(x[j, :]): the max of row j is not the row being computed."""
    def fn(x):
        m = ops.amax(x, (1,), keepdim=True)
        return ops.sub(x, ops.permute(m, (1, 0)))
    graph, sched = scheduled(fn, torch.randn(7, 7))
    reasons = [r.reason for r in sched.report.refused]
    assert sched.report.kernels_after == 2
    assert any("another row" in r for r in reasons), reasons


def test_horizontal_fusion_of_siblings():
    def fn(x):
        return ops.exp(x), ops.sin(x), ops.sum(x, (1,))
    _, sched = scheduled(fn, torch.randn(16, 32))
    # exp and sin share a pass over x; the row sum iterates rows and fuses with them too
    assert sched.report.kernels_after == 1, str(sched.report)
    assert sched.report.bytes_read_after == 16 * 32 * 4


def test_buffer_reuse_in_the_wrapper():
    def fn(x, w):
        a = ops.matmul(ops.exp(x), w)
        b = ops.matmul(ops.sin(a), w)
        return ops.matmul(ops.cos(b), w)
    x, w = torch.randn(8, 8), torch.randn(8, 8)
    compiled = compile_fx(trace(fn, x, w), [x, w], codegen="cpp")
    torch.testing.assert_close(compiled(x, w), GraphModule({}, trace(fn, x, w))(x, w),
                               rtol=1e-4, atol=1e-4)
    assert "# reuse" in compiled.wrapper_code, compiled.wrapper_code


def _strided_slice_gradient(g, x):
    """The gradient of ``x[:, ::2, 1::2]`` added to ``x``: two ``slice_scatter`` s, the first
    into a shape (2, 3, 8) that lines up with nothing else (as in a pooling window's
    gradient). The zeros are made where the inputs are (CUDA for Triton on a GPU)."""
    inner = ops.slice_scatter(ops.full((2, 3, 8), 0.0, device=g.device), g, 2, 1, 8, 2)
    return ops.add(x, ops.slice_scatter(ops.full((2, 6, 8), 0.0, device=x.device), inner,
                                        1, 0, 6, 2))


@pytest.mark.parametrize("backend", [
    pytest.param("cpp", marks=pytest.mark.skipif(not probe().has_cxx, reason="no g++")),
    pytest.param("triton", marks=pytest.mark.skipif(not probe().has_triton,
                                                    reason="no triton"))])
def test_a_buffer_that_lines_up_with_nothing_is_computed_where_it_is_read(backend):
    g, x = on(backend, torch.randn(2, 3, 4), torch.randn(2, 6, 8))
    graph = trace(_strided_slice_gradient, g, x)
    compiled = compile_fx(graph, [g, x], codegen=backend)
    assert compiled.fusion_report.kernels_after == 1, str(compiled.fusion_report)
    expected = x.clone()
    expected[:, ::2, 1::2] += g
    torch.testing.assert_close(compiled(g, x), expected)


def test_a_costly_value_is_not_computed_again_for_every_element_it_broadcasts_to():
    def fn(x, y, cheap):
        h = y
        for _ in range(6):
            h = ops.sin(ops.exp(h))             # 12 operations per element of y
        return ops.add(x, h), ops.mul(x, ops.exp(cheap))
    _, sched = scheduled(fn, torch.randn(16, 32), torch.randn(16, 1), torch.randn(1, 32))
    kernels = [k.graph_nodes for k in sched.report.kernels]
    # exp(cheap) is one operation: computed in the kernel that reads it, 32 times over
    assert any("exp_6" in nodes and "mul" in nodes for nodes in kernels), kernels
    # of the chain on y, at most 8 operations are computed again per element of x; the
    # rest has a kernel of its own (16 elements, stored once)
    (big,) = [nodes for nodes in kernels if "add" in nodes]
    chain = [n for n in big if n.startswith(("exp", "sin")) and n != "exp_6"]
    assert 0 < len(chain) <= 8, kernels
    assert len(kernels) == 2, kernels
    reasons = [r.reason for r in sched.report.refused]
    assert any("operations (more than 8)" in r for r in reasons), reasons


# -- random fused graphs against eager -----------------------------------------------------

UNARY = [ops.exp, ops.sin, ops.relu, ops.sigmoid, ops.neg, ops.abs]
BINARY = [ops.add, ops.mul, ops.sub, ops.maximum]


def random_program(choices):
    def fn(x, y):
        values = [x, y]
        for kind, i, j, k in choices:
            a, b = values[i % len(values)], values[j % len(values)]
            if kind == 0:
                values.append(UNARY[k % len(UNARY)](a))
            elif kind == 1:
                values.append(BINARY[k % len(BINARY)](a, b))
            elif kind == 2:
                values.append(ops.sum(a, (1,), keepdim=True))
            elif kind == 3:
                values.append(ops.amax(a, (1,), keepdim=True))
            else:
                values.append(ops.permute(a, (1, 0)) if a.shape[0] == a.shape[1] else a)
        return tuple(values[2:])
    return fn


programs = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 20), st.integers(0, 20),
                              st.integers(0, 20)), min_size=2, max_size=8)


@pytest.mark.parametrize("backend", [
    pytest.param("cpp", marks=pytest.mark.skipif(not probe().has_cxx, reason="no g++")),
    pytest.param("triton", marks=pytest.mark.skipif(not probe().has_triton,
                                                    reason="no triton"))])
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(choices=programs, n=st.sampled_from([5, 12]))
def test_random_fused_graphs_match_eager(backend, choices, n):
    x, y = torch.randn(n, n), torch.randn(n, 1)
    if backend == "triton" and torch.cuda.is_available():
        x, y = x.cuda(), y.cuda()
    fn = random_program(choices)
    graph = trace(fn, x, y)
    compiled = compile_fx(graph, [x, y], codegen=backend)
    torch.testing.assert_close(compiled(x, y), GraphModule({}, graph)(x, y), rtol=1e-4,
                               atol=1e-4)
    assert compiled.fusion_report.kernels_after <= compiled.fusion_report.kernels_before


def _deep_model(depth):
    """``depth`` pre-norm residual blocks: layernorm -> matmul -> GELU -> matmul -> + x."""
    def fn(x, w, b, w1, w2):
        for _ in range(depth):
            h = examples.layernorm(x, w, b)
            x = ops.add(x, ops.matmul(examples.gelu(ops.matmul(h, w1)), w2))
        return examples.softmax(x)
    return fn, (torch.randn(8, 16), torch.randn(16), torch.randn(16), torch.randn(16, 32),
                torch.randn(32, 16))


def test_scheduler_work_grows_linearly_with_depth(monkeypatch):
    """The scheduler's counted steps (groups visited, edges followed, pairs made) per block
    stay flat as the model gets deeper: no step looks at the whole graph once per merge.
    (A narrow sibling window makes the small graphs of this test show the asymptote.)"""
    monkeypatch.setattr(inductor_config, "horizontal_window", 16)
    work, kernels = {}, {}
    for depth in (2, 4, 8, 16):
        fn, args = _deep_model(depth)
        _, sched = scheduled(fn, *args)
        work[depth], kernels[depth] = sched.work, sched.report.kernels_after
    assert kernels[16] - kernels[8] == 2 * (kernels[8] - kernels[4])   # same fusion per block
    per_block = {d: (work[d] - work[2]) / (d - 2) for d in (4, 8, 16)}
    assert per_block[16] <= 1.25 * per_block[4], (work, per_block)


@pytest.mark.skipif(not probe().has_cxx, reason="no g++")
def test_a_repeated_layer_builds_its_kernels_once(tmp_path, monkeypatch, capsys):
    """Kernels are built from canonical source: eight blocks build no more kernels than
    four, and the result still matches eager. compile_times reports every phase."""
    from tutorcompile import _logging
    from tutorcompile.inductor import codecache
    monkeypatch.setenv("TUTORCOMPILE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(codecache, "_loaded", {})
    _logging.set_logs(compile_times=True)
    builds = {}
    try:
        for depth in (4, 8):
            fn, args = _deep_model(depth)
            graph = trace(fn, *args)
            before = codecache.stats["cpp_compiles"]
            compiled = compile_fx(graph, args, codegen="cpp")
            builds[depth] = codecache.stats["cpp_compiles"] - before
            torch.testing.assert_close(compiled(*args), GraphModule({}, graph)(*args))
    finally:
        _logging.set_logs()
    assert builds[4] > 0 and builds[8] == 0, builds
    assert len(list(tmp_path.glob("cpp/*/kernel.so"))) < compiled.num_kernels
    out = capsys.readouterr().out
    assert "[tutorcompile:compile_times]" in out
    assert all(p in out for p in ("lowering", "scheduling", "codegen", "build"))


def test_canonical_source_names_nothing_from_the_graph():
    from tutorcompile.inductor.codegen.common import canonical_source
    src = ('// cpp_poi_fused_add_3: graph nodes add_7\n'
           'extern "C" void cpp_poi_fused_add_3(const float* in_ptr_buf2, const float* '
           'in_ptr_x, float* out_ptr_buf3)\n{ out_ptr_buf3[0] = in_ptr_buf2[0] + in_ptr_x[0]; }')
    assert canonical_source(src, "cpp_poi_fused_add_3",
                            ["in_ptr_buf2", "in_ptr_x", "out_ptr_buf3"]) == (
        'extern "C" void kernel(const float* in_ptr0, const float* in_ptr1, float* out_ptr0)\n'
        '{ out_ptr0[0] = in_ptr0[0] + in_ptr1[0]; }')


# -- a gradient and the column sums that read it (bias and layer-norm weight gradients) -----

def _gelu_backward(g, x, b):
    """A linear layer's input gradient through ``gelu(x + b)`` (the tanh form, as GPT-2's),
    then its bias gradient: the column sum over the ``b*t`` rows of the same gradient seen as
    ``[b*t, n]``, and the matmul that reads it too (so it is stored)."""
    pre = ops.add(x, b)
    t = ops.tanh(ops.mul(ops.add(pre, ops.mul(ops.pow(pre, 3), 0.044715)), 0.7978845608))
    slope = ops.add(ops.mul(ops.add(t, 1.0), 0.5),
                    ops.mul(ops.mul(pre, ops.sub(1.0, ops.mul(t, t))), 0.3989422804))
    d = ops.reshape(ops.mul(g, slope), (g.shape[0] * g.shape[1], g.shape[2]))
    return d, ops.sum(d, (0,))


def _layer_norm_backward(g, x, w, mean, rstd):
    """A layer norm's input, weight and bias gradients, and the bias gradient of the linear
    layer before it (the column sum of the input gradient), as the decomposition gives them:
    row sums for the input gradient, column sums over the ``b*t`` rows for the others."""
    n = x.shape[-1]
    xhat = ops.mul(ops.sub(x, mean), rstd)
    gw = ops.mul(g, w)
    a = ops.sum(gw, (2,), keepdim=True)
    b = ops.sum(ops.mul(gw, xhat), (2,), keepdim=True)
    dx = ops.mul(rstd, ops.sub(ops.sub(gw, ops.div(a, n)), ops.mul(xhat, ops.div(b, n))))
    rows = (x.shape[0] * x.shape[1], n)
    dw = ops.sum(ops.reshape(ops.mul(g, xhat), rows), (0,))
    db = ops.sum(ops.reshape(g, rows), (0,))
    return dx, dw, db, ops.sum(ops.reshape(dx, rows), (0,))


def _stored_by_kernel(sched):
    return [[sched.by_name[s] for s in k.stored] for k in sched.report.kernels
            if k.kind != "extern"]


@pytest.mark.parametrize("backend", [
    pytest.param("cpp", marks=pytest.mark.skipif(not probe().has_cxx, reason="no g++")),
    pytest.param("triton", marks=pytest.mark.skipif(not probe().has_triton,
                                                    reason="no triton"))])
@pytest.mark.parametrize("rows, n", [((2, 16), 64), ((3, 5), 37), ((1, 7), 3)])
def test_a_gradient_and_its_bias_gradient_are_one_kernel_for_triton(backend, rows, n):
    """Triton: the gradient is stored in the pass that sums it. C++ keeps two kernels (a
    contiguous pass, then the column sum): fused, its column tiles walk the producer in
    strided order, measured slower (``Scheduler.fuse``); the report says why."""
    # x non-contiguous (a transposed layout), b broadcast over the rows
    g, x, b = on(backend, torch.randn(*rows, n), torch.randn(n, rows[1], rows[0]).permute(2, 1, 0),
                 torch.randn(n))
    graph = trace(_gelu_backward, g, x, b)
    compiled = compile_fx(graph, [g, x, b], codegen=backend)
    expected = GraphModule({}, trace(_gelu_backward, g, x, b))(g, x, b)
    torch.testing.assert_close(compiled(g, x, b), expected, rtol=1e-4, atol=1e-4)
    report = compiled.fusion_report
    if backend == "cpp":
        assert len(_stored_by_kernel(compiled.scheduler)) == 2, str(report)
        assert any("lines up neither with the reduction's input" in r.reason
                   for r in report.refused), str(report)
        return
    (stored,) = _stored_by_kernel(compiled.scheduler)   # one kernel stores both
    assert sorted(len(s.get_size()) for s in stored) == [1, 3], str(report)


@pytest.mark.parametrize("backend", [
    pytest.param("cpp", marks=pytest.mark.skipif(not probe().has_cxx, reason="no g++")),
    pytest.param("triton", marks=pytest.mark.skipif(not probe().has_triton,
                                                    reason="no triton"))])
@pytest.mark.parametrize("rows, n", [((2, 16), 64), ((3, 5), 37)])
def test_layer_norm_backward_keeps_its_input_gradient_in_the_row_kernel(backend, rows, n):
    """Row sums and the pointwise ops after them make the input gradient in one kernel; the
    column sums of ``g * xhat`` and ``g``, and the bias gradient of the layer before (a
    column sum of the input gradient, over the same loops), another. A column kernel that
    took part of the input gradient's chain made the row kernel store more intermediates
    of the full size."""
    x, g = torch.randn(*rows, n), torch.randn(*rows, n)
    inputs = on(backend, g, x, torch.randn(n), x.mean(-1, keepdim=True),
                torch.rsqrt(x.var(-1, keepdim=True, correction=0) + 1e-5))
    graph = trace(_layer_norm_backward, *inputs)
    compiled = compile_fx(graph, list(inputs), codegen=backend)
    expected = GraphModule({}, trace(_layer_norm_backward, *inputs))(*inputs)
    torch.testing.assert_close(compiled(*inputs), expected, rtol=1e-4, atol=1e-4)
    report = compiled.fusion_report
    assert report.kernels_after == 2, str(report)
    full = [[s for s in stored if len(s.get_size()) == 3 and s.get_size()[-1] == n]
            for stored in _stored_by_kernel(compiled.scheduler)]
    # the row kernel stores the input gradient and ``xhat``, which the column kernel reads
    # (a buffer belongs to one kernel); no other intermediate of the full size
    assert sorted(len(f) for f in full) == [0, 2], str(report)


class _MLPBlock(torch.nn.Module):
    """layer norm -> linear -> GELU (tanh) -> linear, at odd widths; the first linear as
    GPT-2's ``Conv1D`` (``addmm`` on the rows as a matrix ``[b*t, d]``: its bias gradient
    sums the GELU's gradient seen as that matrix)."""

    def __init__(self, d=37, h=53):
        super().__init__()
        self.ln = torch.nn.LayerNorm(d)
        self.w1, self.b1 = torch.nn.Parameter(torch.randn(d, h) / 6), \
            torch.nn.Parameter(torch.randn(h))
        self.fc2 = torch.nn.Linear(h, d)

    def forward(self, x):
        h = self.ln(x)
        h = torch.addmm(self.b1, h.reshape(-1, h.size(-1)), self.w1)
        h = h.reshape(*x.shape[:-1], -1)
        return self.fc2(torch.nn.functional.gelu(h, approximate="tanh"))


@pytest.mark.parametrize("backend", [
    pytest.param("cpp", marks=pytest.mark.skipif(not probe().has_cxx, reason="no g++")),
    pytest.param("triton", marks=pytest.mark.skipif(not probe().has_triton,
                                                    reason="no triton"))])
@pytest.mark.usefixtures("fresh_compiler")
def test_bias_gradients_fuse_at_symbolic_sizes(backend):
    """The training step of an MLP block, compiled once for every batch size and length:
    values and gradients as eager's, and (Triton) the GELU's gradient and the first bias
    gradient share a kernel (a reduction that stores a 3-d gradient and a 1-d sum)."""
    import copy

    from tutorcompile.dynamo import backends, eval_frame
    from tutorcompile.inductor.ir import size_expr
    torch.manual_seed(0)
    model = _MLPBlock()
    model, ref = on(backend, model, copy.deepcopy(model))
    made = []

    def keep(gm, example_inputs):
        made.append(backends.inductor(gm, example_inputs, options={"codegen": backend}))
        return made[-1]
    compiled = eval_frame.compile(model, backend=keep, dynamic=True)
    for b, t in [(3, 5), (2, 9), (4, 2)]:
        (x,) = on(backend, torch.randn(b, t, 37))
        model.zero_grad()
        ref.zero_grad()
        out, want = compiled(x), ref(x)
        torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
        out.pow(2).sum().backward()
        want.pow(2).sum().backward()
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4, msg=name)
    assert len(made) == 1
    backward = made[0].compiled.artifacts.backward.compiled
    assert backward.symbolic is not None
    report = backward.fusion_report
    kinds = [k.kind for k in report.kernels if k.kind != "extern"]
    # the output's bias gradient, the GELU's gradient with its bias gradient (C++: apart),
    # the layer norm's column sums (the input needs no gradient: no row kernel)
    assert kinds == (["reduction"] * 3 if backend == "triton" else
                     ["reduction", "pointwise", "reduction", "reduction"]), str(report)

    def one_row(buffer):   # a bias gradient: (1, 1, h)
        return all(size_expr(s) == 1 for s in buffer.get_size()[:-1])
    kernels = [sorted(map(one_row, stored)) for stored in _stored_by_kernel(backward.scheduler)]
    assert ([False, True] in kernels) == (backend == "triton"), str(report)


def _three_bias_gradients(gq, gk, gv, x):
    """Column sums of three unrelated gradients (a transformer's query, key and value bias
    gradients, each of another matmul's output), and a far-away one after a long chain."""
    sums = [ops.sum(g, (0, 1)) for g in (gq, gk, gv)]
    h = x
    for _ in range(inductor_config.unrelated_span // 2 + 4):   # (one kernel with the sum after it)
        h = ops.sin(ops.exp(h))
    return (*sums, ops.sum(h, (0, 1)))


@pytest.mark.parametrize("backend", [
    pytest.param("cpp", marks=pytest.mark.skipif(not probe().has_cxx, reason="no g++")),
    pytest.param("triton", marks=pytest.mark.skipif(not probe().has_triton,
                                                    reason="no triton"))])
def test_reductions_over_the_same_loops_that_share_nothing_share_a_kernel(backend):
    """Nothing fuses them for bytes; the last pass makes them one kernel (one call) when
    they lie close in the graph -- not the fourth, whose inputs a merge would keep alive
    across the chain before it."""
    inputs = on(backend, *[torch.randn(3, 5, 37) for _ in range(4)])
    graph = trace(_three_bias_gradients, *inputs)
    compiled = compile_fx(graph, list(inputs), codegen=backend)
    expected = GraphModule({}, trace(_three_bias_gradients, *inputs))(*inputs)
    torch.testing.assert_close(compiled(*inputs), expected, rtol=1e-4, atol=1e-4)
    reductions = [k for k in compiled.fusion_report.kernels if k.kind == "reduction"]
    sums = sorted(len([n for n in k.graph_nodes if n.startswith("sum")]) for k in reductions)
    assert sums == [1, 3], str(compiled.fusion_report)


def _momentum_steps(params, grads, bufs, lr):
    """An optimizer step written per parameter: each update reads the graph's inputs and
    writes its new values back into them."""
    for p, g, b in zip(params, grads, bufs):
        b.mul_(0.9).add_(g)
        p.add_(b, alpha=-lr)


def _unrelated_results(xs):
    return [x.sin() * 2 for x in xs]


def _forward_kernels(fn, *args):
    from tutorcompile.dynamo import backends, eval_frame
    made = []

    def keep(gm, example_inputs):
        made.append(backends.inductor(gm, example_inputs, options={"codegen": "cpp"}))
        return made[-1]
    out = eval_frame.compile(fn, backend=keep)(*args)
    report = made[0].compiled.artifacts.forward.compiled.fusion_report
    return out, [k for k in report.kernels if k.kind != "extern"]


@pytest.mark.skipif(not probe().has_cxx, reason="no g++")
def test_updates_written_into_inputs_share_a_kernel_per_shape_however_far_apart():
    """Per-parameter optimizer updates share nothing, and lie far apart in the graph; they
    hold no memory of the graph's (inputs in, new values of inputs out), so those over the
    same loops become one kernel each: three shapes, three kernels, not six."""
    shapes = [(16, 8), (8,), (4, 8)] * 2
    torch.manual_seed(0)
    made = [[torch.randn(s) for s in shapes] for _ in range(3)]
    want = [[t.clone() for t in ts] for ts in made]
    _momentum_steps(*want, 0.1)
    _, kernels = _forward_kernels(_momentum_steps, *made, 0.1)
    for got, expected in zip(made, want):
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e)
    assert len(kernels) == 3, kernels


@pytest.mark.skipif(not probe().has_cxx, reason="no g++")
def test_unrelated_kernels_with_results_of_their_own_stay_apart():
    xs = [torch.randn(8, 8) for _ in range(3)]
    out, kernels = _forward_kernels(_unrelated_results, xs)
    for o, x in zip(out, xs):
        torch.testing.assert_close(o, x.sin() * 2)
    assert len(kernels) == 3, kernels
