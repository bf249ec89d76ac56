"""Stage 5: matmul choices under ``mode="max-autotune"`` (Triton backend): the PyTorch call
or a Triton matmul template, with pointwise consumers fused as the template's epilogue.

Under the Triton interpreter the template always loses on time (milliseconds per program),
so the tests that check the template's values force it (``autotune.matmul_choice.force``);
the choice itself is checked on the table of timings. Shapes are small (the interpreter is
slow) and ragged: 33 x 17 @ 17 x 45 leaves a partial tile in M, N and K. Tolerances:
float32 1e-4 (the template sums K in blocks); float16/bfloat16 those of one rounding.
"""

import functools
import importlib

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import tutorcompile as tc
from tests.kernel_backends import on
from tutorcompile.environment import probe
from tutorcompile.fx import GraphModule
from tutorcompile.inductor import autotune
from tutorcompile.inductor.compile_fx import compile_fx
from tutorcompile.ops import ops, trace

pytestmark = [pytest.mark.stage5,
              pytest.mark.skipif(not probe().has_triton, reason="no triton"),
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]

TOL = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


@pytest.fixture
def force_template(monkeypatch):
    monkeypatch.setattr(autotune.matmul_choice, "force", "template")


def run(fn, *inputs, tol=1e-4, mode="max-autotune"):
    inputs = on("triton", *inputs)
    graph = trace(fn, *inputs)
    compiled = compile_fx(graph, inputs, codegen="triton", mode=mode)
    expected = GraphModule({}, graph)(*inputs)
    torch.testing.assert_close(compiled(*inputs), expected, rtol=tol, atol=tol)
    return compiled


def templates(compiled) -> dict[str, str]:
    return {k: v for k, v in compiled.kernel_sources.items() if "_tem_" in k}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_template_mm_ragged_and_transposed(force_template, dtype):
    a, b = torch.randn(33, 17, dtype=dtype), torch.randn(17, 45, dtype=dtype)
    bt = torch.randn(45, 17, dtype=dtype)   # read transposed: a view, no copy
    compiled = run(lambda a, b, bt: (ops.matmul(a, b), ops.matmul(a, ops.permute(bt, (1, 0)))),
                   a, b, bt, tol=TOL[dtype])
    sources = templates(compiled)
    assert len(sources) == 2 and compiled.num_kernels == 2
    assert all("tl.dot" in s and "for k in range(0, 17, BLOCK_K)" in s for s in sources.values())
    # the transposed operand is read with its strides: element (k, n) of bt.T is bt[n, k]
    assert any("17 * rn + rkb" in s for s in sources.values())
    if dtype == torch.float32:   # full precision, as torch.mm (not Triton's default TF32)
        assert all('input_precision="ieee"' in s for s in sources.values())


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 40),
       batch=st.sampled_from([(), (2,)]), a_t=st.booleans(), b_t=st.booleans())
def test_template_matches_torch_for_any_sizes_and_layouts(m, n, k, batch, a_t, b_t):
    """Every size from 1 (blocks mostly masked) to past a block, either operand read
    transposed. (The choice is forced inside: hypothesis runs the body many times.)"""
    a = torch.randn(*batch, k, m).transpose(-1, -2) if a_t else torch.randn(*batch, m, k)
    b = torch.randn(*batch, n, k).transpose(-1, -2) if b_t else torch.randn(*batch, k, n)
    old, autotune.matmul_choice.force = autotune.matmul_choice.force, "template"
    try:
        compiled = run(lambda a, b: ops.matmul(a, b), a, b)
    finally:
        autotune.matmul_choice.force = old
    assert len(templates(compiled)) == 1


def test_template_addmm_and_bmm(force_template):
    x, w, bias = torch.randn(20, 30), torch.randn(40, 30), torch.randn(40)
    compiled = run(lambda x, w, bias: ops.add(ops.matmul(x, ops.permute(w, (1, 0))), bias),
                   x, w, bias)   # fuse_addmm makes it torch.addmm: the bias is in the template
    (source,) = templates(compiled).values()
    assert "matmul template (addmm" in source and compiled.num_kernels == 1
    p, q = torch.randn(3, 9, 21), torch.randn(3, 21, 18)
    w2 = torch.randn(21, 18)    # times a matrix: the batch merges into the rows (27x21)
    compiled = run(lambda p, q, w2: (ops.matmul(p, q), ops.matmul(p, w2)), p, q, w2)
    bmm, mm = templates(compiled).values()
    assert "tl.program_id(1)" in bmm and "matmul template (bmm, 3 x 9x21 @ 21x18)" in bmm
    assert "matmul template (mm, 27x21 @ 21x18)" in mm
    # attention's (batch, heads) dims: one grid axis, unflattened; a broadcast head dim
    q4, k4 = torch.randn(2, 3, 5, 8), torch.randn(2, 1, 8, 6)
    compiled = run(lambda q4, k4: ops.matmul(q4, k4), q4, k4)
    (source,) = templates(compiled).values()
    assert "matmul template (bmm, 2x3 x 5x8 @ 8x6)" in source


def test_fused_epilogues(force_template):
    x, w, bias = torch.randn(24, 16), torch.randn(16, 32), torch.randn(32)
    res = torch.randn(24, 32)
    compiled = run(lambda x, w, bias: ops.relu(ops.add(ops.matmul(x, w), bias)), x, w, bias)
    assert compiled.num_kernels == 1    # addmm + relu: one template kernel, nothing else
    (source,) = templates(compiled).values()
    assert "tl.maximum" in source and "epilogue" in source
    assert "# max-autotune: BLOCK_M=" in source and "extern torch.addmm" in source

    def gelu_residual(x, w, res):
        y = ops.matmul(x, w)
        gelu = ops.mul(ops.mul(y, 0.5), ops.add(ops.erf(ops.mul(y, 0.7071067811865476)), 1.0))
        return ops.add(res, gelu)
    compiled = run(gelu_residual, x, w, res)
    assert compiled.num_kernels == 1
    (source,) = templates(compiled).values()
    assert "erf" in source and source.count("tl.store") == 1   # the product is never stored
    # an epilogue that casts: float16 out of a float32 product
    compiled = run(lambda x, w: ops.convert_element_type(ops.matmul(x, w), torch.float16),
                   x, w, tol=2e-3)
    assert compiled.num_kernels == 1


def test_a_consumer_that_is_not_an_epilogue_stays_apart(force_template):
    """A reduction of the product, or a read of it at another position (its transpose),
    is not an epilogue: its own kernel reads the stored product."""
    x, w = torch.randn(32, 16), torch.randn(16, 32)
    compiled = run(lambda x, w: ops.sum(ops.matmul(x, w), (1,)), x, w)
    assert compiled.num_kernels == 2
    assert any("not pointwise" in r.reason for r in compiled.fusion_report.refused)

    def plus_transpose(x, w):
        y = ops.matmul(x, w)
        return ops.add(y, ops.permute(y, (1, 0)))
    compiled = run(plus_transpose, x, w)
    assert compiled.num_kernels == 2
    assert any("another position" in r.reason for r in compiled.fusion_report.refused)


def record_compilations(monkeypatch) -> list:
    """The CompiledGraphs tc.compile makes from now on (forward, then backward)."""
    compiled_graphs = []
    compile_fx_module = importlib.import_module("tutorcompile.inductor.compile_fx")
    original = compile_fx_module.compile_fx

    @functools.wraps(original)   # (the options tc.compile accepts come from its signature)
    def recording(*args, **kwargs):
        compiled_graphs.append(original(*args, **kwargs))
        return compiled_graphs[-1]
    monkeypatch.setattr(compile_fx_module, "compile_fx", recording)
    tc.reset()
    return compiled_graphs


def test_mlp_forward_and_backward_with_templates(force_template, monkeypatch):
    compiled_graphs = record_compilations(monkeypatch)
    torch.manual_seed(0)
    model, x = on("triton", nn.Sequential(nn.Linear(12, 20), nn.GELU(), nn.Linear(20, 6)),
                  torch.randn(9, 12))
    expected = model(x).square().sum()
    expected.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled = tc.compile(model, mode="max-autotune", options={"codegen": "triton"})
    got = compiled(x).square().sum()
    got.backward()
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    for p, g in zip(model.parameters(), grads):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-4)
    forward, backward = compiled_graphs
    assert len(templates(forward)) == 2 and len(templates(backward)) >= 3
    assert any("epilogue" in s for s in templates(forward).values())   # the GELU
    tc.reset()


class ResidualBlock(nn.Module):
    """nn.Linear on a 3-d input (a reshape around addmm), a residual add, and a batched
    product with an expanded weight (its gradient's operands broadcast)."""

    def __init__(self):
        super().__init__()
        self.l1, self.w2 = nn.Linear(12, 12), nn.Parameter(torch.randn(12, 12) / 4)

    def forward(self, x):
        h = x + torch.relu(self.l1(x))
        return h + (h @ self.w2.expand(2, 12, 12)).sum()


def test_residual_epilogue_through_a_reshape_and_broadcast_operands(force_template,
                                                                     monkeypatch):
    compiled_graphs = record_compilations(monkeypatch)
    torch.manual_seed(0)
    model, x = on("triton", ResidualBlock(), torch.randn(2, 5, 12))
    expected = model(x)
    expected.square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    got = tc.compile(model, mode="max-autotune", options={"codegen": "triton"})(x)
    got.square().sum().backward()
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    for p, g in zip(model.parameters(), grads):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-4)
    forward, backward = compiled_graphs
    # addmm + relu + the residual add: one template kernel, read back through the reshape
    assert "triton_tem_fused_addmm_relu_add_0" in forward.kernel_sources
    assert len(templates(backward)) == 3   # every product of the backward is a template
    assert any("tl.broadcast_to" in s for s in templates(backward).values())
    tc.reset()


def test_autotune_table_lists_the_extern_and_the_templates(capsys):
    """Nothing forced: every candidate is timed, and the fastest correct one is chosen
    (usually PyTorch's call under the interpreter); TUTORCOMPILE_LOGS=autotuning shows it."""
    tc.set_logs(autotuning=True)
    try:
        compiled = run(lambda a, b: ops.relu(ops.matmul(a, b)), torch.randn(33, 17),
                       torch.randn(17, 45))
    finally:
        tc.set_logs()
    logged = capsys.readouterr().out
    assert logged.startswith("[tutorcompile:autotuning]")
    assert str(compiled.autotune_table) in logged
    rows = [r for r in compiled.autotune_table.rows if r.op.startswith("matmul")]
    assert [r.choice for r in rows][:2] == ["extern torch.mm", "triton template"]
    assert all(r.time_s is not None and r.time_s > 0 for r in rows)
    (chosen,) = [r for r in rows if r.chosen]
    assert chosen.time_s == min(r.time_s for r in rows)
    text = str(compiled.autotune_table)
    assert "extern torch.mm" in text and "BLOCK_M=" in text and " ms" in text
    assert "# ---- max-autotune ----" in compiled.output_code
    if chosen.choice.startswith("extern"):
        assert not templates(compiled) and "torch.mm(" in compiled.wrapper_code
        # the relu is then a kernel of its own, whose block sizes are timed in the table too
        assert any(r.choice == "triton kernel" and r.chosen
                   for r in compiled.autotune_table.rows)
    else:
        (source,) = templates(compiled).values()
        assert f"# max-autotune: {chosen.config}" in source


def test_a_wrong_template_is_rejected(monkeypatch):
    """A template whose values differ from PyTorch's is never chosen, even when forced."""
    from tutorcompile.inductor.codegen import triton_template
    monkeypatch.setattr(autotune.matmul_choice, "force", "template")
    real = triton_template.TemplateKernelCall.__init__

    def one_tile(self, *args, **kwargs):   # launch one program: the other tiles stay unset
        real(self, *args, **kwargs)
        self.grid = (1, self.grid[1])
    monkeypatch.setattr(triton_template.TemplateKernelCall, "__init__", one_tile)
    # 130 x 130: several tiles in every config (a GPU's 128 x 128 blocks too), so one
    # program always leaves some unset
    compiled = run(lambda a, b: ops.matmul(a, b), torch.randn(130, 8), torch.randn(8, 130))
    assert not templates(compiled)
    rows = compiled.autotune_table.rows
    assert [r.note for r in rows[1:]] == ["rejected: differs from PyTorch"] * (len(rows) - 1)
    assert rows[0].chosen and "no template config ran" in rows[0].note


@pytest.mark.parametrize("mode", [None, "default"])
def test_default_mode_keeps_the_extern(force_template, mode):
    compiled = run(lambda a, b: ops.relu(ops.matmul(a, b)), torch.randn(8, 16),
                   torch.randn(16, 8), mode=mode)
    assert not templates(compiled) and not compiled.autotune_table.rows
    assert "torch.mm(" in compiled.wrapper_code


@pytest.mark.skipif(not probe().has_cxx, reason="no C++ compiler")
def test_cpp_backend_keeps_the_extern_under_max_autotune(force_template):
    """Templates are Triton's: C++ max-autotune times its kernels' variants only."""
    a, b = torch.randn(8, 16), torch.randn(16, 8)
    graph = trace(lambda a, b: ops.relu(ops.matmul(a, b)), a, b)
    compiled = compile_fx(graph, [a, b], codegen="cpp", mode="max-autotune")
    torch.testing.assert_close(compiled(a, b), torch.relu(a @ b))
    assert "torch.mm(" in compiled.wrapper_code
    assert {r.choice for r in compiled.autotune_table.rows} == {"cpp kernel"}


def test_lowering_reference_evaluates_a_template(force_template):
    """The loop IR's own interpreter computes a template buffer as PyTorch's product."""
    from tutorcompile.inductor.lowering import evaluate_lowering, lower_graph
    # (choosing the template runs its configs: on a GPU, on CUDA tensors)
    x, w, bias = on("triton", torch.randn(6, 5), torch.randn(5, 7), torch.randn(7))
    graph = trace(lambda x, w, bias: ops.relu(ops.matmul(x, w)), x, w, bias)
    lowering = lower_graph(graph, [x, w, bias], "triton", "max-autotune")
    assert any(type(b).__name__ == "TemplateBuffer" for b in lowering.buffers)
    torch.testing.assert_close(evaluate_lowering(lowering, x, w, bias), torch.relu(x @ w))
