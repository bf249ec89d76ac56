"""Symbolic sizes in the fusion compiler: ``tc.compile(model)`` (backend ``"inductor"``, C++
kernels) compiles once for every batch size and sequence length.

After the first size change Dynamo marks the dimension dynamic and AOT builds graphs whose
sizes are symbols (``s0``); the inductor lowers them as such: the C++ kernels take the sizes
as ``int64_t`` arguments and the wrapper reads them from its inputs and allocates with
expressions in them. The capstone MLP, CNN and GPT then train with eager's values and
gradients for every size, with two compilations in all (the first, static, call and the
symbolic one); what lowering relied on is guarded (the GPT's mask slice: ``s1 <= 64``).
"""

from __future__ import annotations

import copy

import pytest
import torch

from tests.kernel_backends import BACKENDS, on
from tests.test_stage4_dynamic import _values_and_grads_at
from tutorcompile.dynamo import backends, eval_frame
from tutorcompile.models import GPT, MLP, AlexNet, GPTConfig

pytestmark = [pytest.mark.stage5, pytest.mark.usefixtures("fresh_compiler")]


def _counting(backend="cpp"):
    """The ``"inductor"`` backend, keeping what it returned (``.compiled.num_compiles``: how
    many times AOT, and so the kernels, compiled each graph Dynamo handed down)."""
    made = []

    def counting(gm, example_inputs):
        made.append(backends.inductor(gm, example_inputs, options={"codegen": backend}))
        return made[-1]
    return counting, made


def _train_and_compare(model, compiled, batches, tol=1e-5):
    ref = copy.deepcopy(model)
    for x, y in batches:
        model.zero_grad()
        ref.zero_grad()
        out, expected = compiled(x), ref(x)
        torch.testing.assert_close(out, expected, rtol=tol, atol=tol)
        model.loss(out, y).backward()
        ref.loss(expected, y).backward()
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=tol, atol=tol, msg=name)


def test_mlp_trains_with_two_compiles_for_batch_sizes_1_to_16():
    torch.manual_seed(0)
    model = MLP((10, 16, 5))
    backend, made = _counting()
    compiled = eval_frame.compile(model, backend=backend)
    _train_and_compare(model, compiled, [(model.example_inputs(b)[0], model.targets(b))
                                         for b in range(1, 17)])
    assert [c.compiled.num_compiles for c in made] == [1, 1]
    art = made[1].compiled.artifacts
    assert art.shape_env.guards == []   # nothing the kernels do depends on the batch size
    forward = art.forward.compiled
    assert forward.symbolic is not None and len(forward._variants) == 0
    assert "s0 = primals_l_x.size(0)" in forward.wrapper_code
    assert "empty_strided((s0, 16), (16, 1)" in forward.wrapper_code
    kernel = next(src for name, src in forward.kernel_sources.items() if "relu" in name)
    assert "const int64_t s0)" in kernel and "x0 < s0;" in kernel


def test_capstone_cnn_trains_with_two_compiles():
    torch.manual_seed(0)
    model = AlexNet(width=4, dropout=0.0)
    backend, made = _counting()
    compiled = eval_frame.compile(model, backend=backend)
    _train_and_compare(model, compiled, [(model.example_inputs(b)[0], model.targets(b))
                                         for b in (1, 2, 3, 5, 16)], tol=1e-4)
    assert [c.compiled.num_compiles for c in made] == [1, 1]
    assert made[1].compiled.artifacts.shape_env.guards == []
    backward = made[1].compiled.artifacts.backward.compiled
    assert backward.symbolic is not None and not backward._variants
    # the wrapper makes the same calls as the static one's: a max pool saves which element
    # of each window it picked (bool masks of the symbolic pooled shape, for its
    # gradient), the convolutions and their gradients are PyTorch's calls (the input
    # gradient's stand-in expanded to the symbolic shape per call), each written with
    # settled arguments
    forward = made[1].compiled.artifacts.forward.compiled
    assert "empty_strided((s0, 4, 16, 16), (1024, 256, 16, 1), dtype=torch.bool" in \
        forward.wrapper_code
    assert forward.wrapper_code.count("torch.convolution(") == 5
    assert backward.wrapper_code.count(".expand((s0, ") == 4
    assert backward.wrapper_code.count("convolution_backward.default(") == 9
    for code in (forward.wrapper_code, backward.wrapper_code):
        assert "_ref_fn(" not in code


def test_capstone_gpt_trains_with_two_compiles_for_batch_and_length():
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=64, n_layer=2, n_embd=32))
    backend, made = _counting()
    compiled = eval_frame.compile(model, backend=backend)
    # the first change changes both sizes (changed one at a time, Dynamo -- like
    # torch.compile -- marks each dynamic in turn: one recompile each)
    sizes = [(1, 8), (2, 9), (3, 17), (16, 64), (5, 8), (9, 33), (16, 8), (4, 64)]
    _train_and_compare(model, compiled, [(torch.randint(0, 128, (b, t)),
                                          torch.randint(0, 128, (b, t))) for b, t in sizes],
                       tol=1e-4)
    assert [c.compiled.num_compiles for c in made] == [1, 1]
    assert [str(g.expr) for g in made[1].compiled.artifacts.shape_env.guards] == ["s1 <= 64"]
    forward = made[1].compiled.artifacts.forward.compiled
    assert "s1 = primals_l_idx.size(1)" in forward.wrapper_code
    # q, k, v are strided views of one (s0, s1, 96) tensor, saved for the backward: their
    # strides are symbolic too (checked per call), so no size compiles a layout of its own
    backward = made[1].compiled.artifacts.backward.compiled
    assert "permute_1.stride() != (96*s1, 8, 96, 1)" in backward.wrapper_code
    assert backward.symbolic is not None and not backward._variants
    # attention's softmax reduces over the symbolic length
    softmax = next(src for name, src in forward.kernel_sources.items() if "amax" in name)
    assert "r0 < s1;" in softmax


def _symbolic_sin_graph(hint: int, width: int = 8, device: str | torch.device = "cpu"):
    """``sin(x)`` for ``x`` of shape ``(s0, width)`` on ``device``, as AOT hands it down (a
    strided input's metadata says contiguous; the lowering takes the example's strides)."""
    from tutorcompile.fx import Graph
    from tutorcompile.fx.interpreter import TensorMeta
    from tutorcompile.fx.symbolic_shapes import ShapeEnv, SymShape
    from tutorcompile.ops import PRIMS
    env = ShapeEnv()
    s0 = env.create_symbol(hint, (0, 0))
    graph = Graph()
    x = graph.placeholder("x")
    x.meta["tensor_meta"] = TensorMeta(SymShape((s0, width)), torch.float32,
                                       torch.device(device), (width, 1), False)
    y = graph.call_function(PRIMS["sin"], (x,))
    y.meta["tensor_meta"] = x.meta["tensor_meta"]
    graph.output((y,))
    return graph, env


def test_a_strided_input_is_checked_per_call_and_another_layout_compiles_for_itself():
    from tutorcompile.inductor import compile_fx
    graph, env = _symbolic_sin_graph(4)
    compiled = compile_fx(graph, [torch.randn(4, 16)[:, ::2]], codegen="cpp")
    assert compiled.symbolic is not None
    assert "if (x.stride() != (16, 2)):\n        return compile_for_layout(x)" in \
        compiled.wrapper_code
    for x in (torch.randn(6, 16)[:, ::2], torch.randn(3, 16)[:, ::2]):   # any batch size
        torch.testing.assert_close(compiled(x)[0], torch.sin(x))
    assert not compiled._variants
    x = torch.randn(5, 8)   # contiguous: not the layout the kernel indexes
    torch.testing.assert_close(compiled(x)[0], torch.sin(x))
    assert list(compiled._variants) == [compiled._key([x])]


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_kernels_take_the_sizes_as_arguments(backend):
    from tutorcompile.inductor import compile_fx
    (example,) = on(backend, torch.randn(4, 8))
    graph, env = _symbolic_sin_graph(4, device=example.device)   # (buffers go where it says)
    compiled = compile_fx(graph, [example], codegen=backend)
    (source,) = compiled.kernel_sources.values()
    if backend == "cpp":
        assert "const int64_t s0)" in source and "x0 < s0;" in source
    else:   # xnumel is an argument already; the wrapper computes the grid
        assert "xmask = xindex < xnumel" in source
        assert "((max(1, -(-(8*s0) // 32)),), x, buf0, 8*s0, XBLOCK=32, num_warps=1, " \
            "num_stages=1)" in compiled.wrapper_code
    for b in (2, 4, 7):
        (x,) = on(backend, torch.randn(b, 8))
        torch.testing.assert_close(compiled(x)[0], torch.sin(x))
    assert compiled.symbolic is not None and not compiled._variants


@pytest.mark.parametrize("width, parallel, serial", [
    (8, "#pragma omp parallel for\n", "for (int64_t x0 = 0; x0 < s0; x0++)"),   # rows
    (4, "#pragma omp parallel for simd\n", "#pragma omp simd\n"),   # one flat loop
])
def test_threads_or_not_is_a_plain_if_between_two_copies_of_the_loop(width, parallel, serial):
    # OpenMP's ``if`` clause (``#pragma omp parallel for if(8 * s0 >= 32768)``) moved the
    # loop into OpenMP's outlined function even for the sizes it runs on one thread: the
    # pointers lost ``__restrict__`` there, and AlexNet's small symbolic kernels ran 1.1-2.5x
    # their static twins at batch 2. Small sizes now run a copy with no OpenMP region at all
    from tutorcompile.inductor import compile_fx
    graph, env = _symbolic_sin_graph(4, width)
    compiled = compile_fx(graph, [torch.randn(4, width)], codegen="cpp")
    (source,) = compiled.kernel_sources.values()
    assert f"if ({width} * s0 >= 32768)\n" in source
    threads, one = source.split("\n    else\n")
    assert parallel in threads and "omp parallel" not in one and serial in one
    assert " if(" not in source    # no OpenMP if clause
    for b in (3, 32768 // width + 5):   # both copies run
        x = torch.randn(b, width)
        torch.testing.assert_close(compiled(x)[0], torch.sin(x))
    assert compiled.symbolic is not None and not compiled._variants


def test_views_of_a_symbolic_buffer_are_one_as_strided_each():
    # attention's heads: slices of one (s0*8, 48) product, reshaped and permuted, as the
    # static wrapper writes them (one strided view each, not four calls); the strides come
    # from the views' index arithmetic, whose floors and digits work out over the index
    # ranges (FloorDiv(64*i0 + 16*i1 + i3, 64) is i0 when i1 < 4 and i3 < 16)
    def heads(x, w, b):
        qkv = torch.nn.functional.linear(x, w, b)
        q = qkv[..., :16].reshape(x.shape[0], 8, 2, 8).permute(0, 2, 1, 3)
        k = qkv[..., 16:32].reshape(x.shape[0], 8, 2, 8).permute(0, 2, 3, 1)
        return q @ k
    backend, made = _counting()
    compiled = eval_frame.compile(heads, backend=backend)
    w, b = torch.randn(48, 16), torch.randn(48)
    for n in (2, 3, 5, 7):
        x = torch.randn(n, 8, 16)
        torch.testing.assert_close(compiled(x, w, b), heads(x, w, b))
    assert [c.compiled.num_compiles for c in made] == [1, 1]
    code = made[1].compiled.artifacts.forward.compiled.wrapper_code
    assert "reinterpret(buf0, (s0, 2, 8, 8), (384, 8, 48, 1), 0)" in code
    assert "reinterpret(buf0, (s0, 2, 8, 8), (384, 8, 1, 48), 16)" in code
    assert "_ref_fn(" not in code and "torch.reshape(buf0" not in code


def test_views_of_a_static_buffer_at_a_symbolic_length_stay_symbolic():
    # a table computed from a weight (static sizes) sliced to the input's length, viewed and
    # handed to PyTorch: replayed on meta at the hints, the chain's layout would be the
    # hint's (9 rows for every length) if its symbolic slice bound were not followed
    def positions(x, w):
        p = (w * 2)[: x.shape[1]].reshape(x.shape[1], 4, 4).permute(1, 0, 2)
        return torch.matmul(p, x.reshape(x.shape[0], x.shape[1], 4, 4)[0].permute(1, 2, 0))
    backend, made = _counting()
    compiled = eval_frame.compile(positions, backend=backend)
    w = torch.randn(64, 16)
    for t in (8, 9, 17, 33):
        x = torch.randn(2, t, 16)
        torch.testing.assert_close(compiled(x, w), positions(x, w))
    assert [c.compiled.num_compiles for c in made] == [1, 1]
    code = made[1].compiled.artifacts.forward.compiled.wrapper_code
    assert "reinterpret(buf0, (4, s0, 4), (4, 16, 1), 0)" in code


def test_what_lowering_relied_on_is_checked_per_call():
    # x[:5] of x of shape (s0, 8): the slice's length is 5 only while s0 >= 5, a guard
    # recorded while lowering; AOT may have matched other sizes to this graph before the
    # guard existed (a backward compiles at the first backward), so the graph checks it
    from tutorcompile.inductor import compile_fx
    from tutorcompile.ops import PRIMS
    graph, env = _symbolic_sin_graph(8)
    sin = next(n for n in graph.nodes if n.target is PRIMS["sin"])
    x = graph.placeholders[0]
    with graph.inserting_before(sin):
        first = graph.call_function(PRIMS["slice"], (x, 0, 0, 5))
    first.meta["tensor_meta"] = type(x.meta["tensor_meta"])(
        torch.Size((5, 8)), torch.float32, torch.device("cpu"), (8, 1), False)
    sin.args = (first,)
    sin.meta["tensor_meta"] = first.meta["tensor_meta"]
    compiled = compile_fx(graph, [torch.randn(8, 8)], codegen="cpp")
    assert [str(g.expr) for g in env.guards] == ["s0 >= 5"]
    for b in (6, 9, 3):
        x = torch.randn(b, 8)
        torch.testing.assert_close(compiled(x)[0], torch.sin(x[:5]))
    assert list(compiled._variants) == [compiled._key([x])]   # only batch 3 compiled again


def test_a_slice_with_a_symbolic_bound_trains_without_specialising():
    # x[:, 1:] of x of shape (b, s1): its gradient is a slice_scatter into s1 columns whose
    # last column is s1 - 1, a bound the kernel computes from its size arguments (Mistral's
    # sliding-window mask once compiled per sequence length here)
    def shifted(x, w):
        return ((x[:, 1:] * w[:, :-1]).sin() + x[:, :-1]).sum(1)
    backend, made = _counting()
    compiled = eval_frame.compile(shifted, backend=backend)
    for b, t in [(2, 5), (3, 9), (4, 17), (2, 33)]:
        x = torch.randn(b, t, requires_grad=True)
        w = torch.randn(b, t, requires_grad=True)
        out = compiled(x, w)
        torch.testing.assert_close(out, shifted(x, w))
        grads = torch.autograd.grad(out.sum(), (x, w))
        expected = torch.autograd.grad(shifted(x, w).sum(), (x, w))
        for g, e in zip(grads, expected):
            torch.testing.assert_close(g, e)
    assert [c.compiled.num_compiles for c in made] == [1, 1]


def test_a_tiled_column_reduction_covers_every_column_of_a_symbolic_width():
    # sum over rows keeps the contiguous columns: the C++ kernel walks tiles of columns,
    # ceil(4 * s1 / 32) of them. Printed as C++'s truncating ``/`` of a negative numerator,
    # ``-(-n // 32)`` lost the last tile for widths that are not a multiple of 8 -- a
    # silently wrong answer found on T5's relative-position bias gradient
    def column_sums(x):
        return (x * 2).sum(0)
    backend, made = _counting()
    compiled = eval_frame.compile(column_sums, backend=backend)
    for b, t in [(2, 8), (3, 9), (5, 17), (4, 33), (3, 64)]:
        x = torch.randn(b, 4, t)
        torch.testing.assert_close(compiled(x), column_sums(x))
    assert [c.compiled.num_compiles for c in made] == [1, 1]
    kernel = "\n".join(made[1].compiled.artifacts.forward.compiled.kernel_sources.values())
    assert "xt < " in kernel and "s1" in kernel   # the tiled loop, over the symbolic width


def test_whole_tiles_of_a_symbolic_column_reduction_run_a_constant_count():
    # a bias gradient: the sum over a symbolic batch of 96 columns, three whole tiles. With
    # the tile loops counting to a run-time ``xlen`` g++ kept the tile's sums in memory
    # across the rows (1.4-1.8x the static kernel, which unrolls its constant r loop)
    def column_sums(x):
        return (x * 2).sum(0)
    backend, made = _counting()
    compiled = eval_frame.compile(column_sums, backend=backend)
    for b in (2, 3, 5, 9):
        x = torch.randn(b, 96)
        torch.testing.assert_close(compiled(x), column_sums(x))
    assert [c.compiled.num_compiles for c in made] == [1, 1]
    (kernel,) = made[1].compiled.artifacts.forward.compiled.kernel_sources.values()
    assert "r0_chunk < s0;" in kernel   # the rows: a symbolic count
    assert "xt < 3;" in kernel and "xi < 32;" in kernel and "xlen" not in kernel


def test_a_floor_of_a_negative_symbolic_quotient_prints_as_a_floor_in_cpp():
    import ast

    import sympy

    from tutorcompile.inductor.codegen.common import print_index

    class CSemantics(ast.NodeTransformer):
        """``a / b`` and ``a % b`` as C evaluates them on integers: truncated toward 0."""
        def visit_BinOp(self, node):
            self.generic_visit(node)
            fn = {ast.Div: "c_div", ast.Mod: "c_mod"}.get(type(node.op))
            return node if fn is None else ast.Call(ast.Name(fn, ast.Load()),
                                                    [node.left, node.right], [])

    def c_div(a, b):
        return abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)

    def c_mod(a, b):
        return a - b * c_div(a, b)

    s0 = sympy.Symbol("s0", integer=True, positive=True)
    text = print_index(sympy.floor(-3 * s0 / 8), "cpp")
    python = text.replace("&&", " and ")
    for value in range(1, 40):
        tree = CSemantics().visit(ast.parse(python.replace("s0", str(value)), mode="eval"))
        got = eval(compile(ast.fix_missing_locations(tree), "<c>", "eval"),  # noqa: S307
                   {"c_div": c_div, "c_mod": c_mod})
        assert got == (-3 * value) // 8, (value, text)


def test_a_row_reduction_reads_its_row_at_x0_times_the_symbolic_row_length():
    # kept dims (s0, 4, s1) flatten into x0; a contiguous row starts at x0 * s2. Written as
    # its digits (4*x0_0*s1*s2 + x0_1*s1*s2 + x0_2*s2) the kernel paid three divisions per
    # row: a softmax over rows of 64 ran ~1.3x the static kernel's time, ~1.1x now
    import tutorcompile as tc

    def scores(x):
        return torch.softmax(x * 0.125, -1)
    backend, made = _counting()
    compiled = eval_frame.compile(scores, backend=backend)
    x = torch.randn(2, 4, 6, 6)
    for d in (0, 2, 3):
        tc.mark_dynamic(x, d)
    torch.testing.assert_close(compiled(x), scores(x))
    for shape in [(3, 4, 5, 7), (2, 4, 9, 9)]:
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x), scores(x))
    assert [c.compiled.num_compiles for c in made] == [1]
    (kernel,) = made[0].compiled.artifacts.forward.compiled.kernel_sources.values()
    assert "[(r0 + x0 * s2)]" in kernel and "x0_0" not in kernel.split("for (int64_t r0")[1]


def route_to_rows(h, idx):
    """Mixtral's experts in small: rows picked by sorted flat indices floor-divided by a
    size (``perm // top_k``), which PyTorch's indexing wraps and bounds-checks against
    ``h.size(0)`` -- sizes that are operands of pointwise ops inside the kernel."""
    values, perm = torch.sort(idx.reshape(-1))
    return h[perm // idx.size(-1)].sum(-1) * values


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_a_size_that_is_an_operand_inside_a_kernel_is_read_from_the_size_arguments(backend):
    """``where < s2`` in the kernel printed the example's 9 (and ``lt``'s bool literal for
    it, ``true``): wrong for every other size. Now it is the argument ``s2``."""
    made = []

    def keep(gm, example_inputs):
        made.append(backends.inductor(gm, example_inputs, options={"codegen": backend}))
        return made[-1]
    compiled = eval_frame.compile(route_to_rows, backend=keep, dynamic=True)
    for n in (9, 18, 5):
        h, idx = on(backend, torch.randn(n, 4), torch.randint(0, 8, (n, 2)))
        torch.testing.assert_close(compiled(h, idx), route_to_rows(h, idx))
    assert [getattr(m, "compiled", m).num_compiles for m in made] == [1]
    kernels = "".join(made[0].compiled.artifacts.forward.compiled.kernel_sources.values())
    assert "s2" in kernels and "true)" not in kernels
    # the bounds check of an index is against the symbolic size too, not pinned to it
    gather = eval_frame.compile(lambda t, i: t[i] * 2, backend=keep, dynamic=True)
    for rows in (6, 9):
        t, i = on(backend, torch.randn(rows, 3), torch.tensor([0, rows - 1]))
        torch.testing.assert_close(gather(t, i), t[[0, rows - 1]] * 2)
    if backend == "triton" and torch.cuda.is_available():
        pytest.skip("a device-side assert leaves the CUDA context unusable")
    with pytest.raises(IndexError, match="out of"):
        gather(torch.randn(4, 3), torch.tensor([4, 0]))
    assert getattr(made[-1], "compiled", made[-1]).num_compiles == 1


def test_every_partial_product_of_a_materialised_size_knows_its_size():
    """``2*s0*s1`` is built as ``(s0 * s1) * 2``: the inner node is a size too (its
    ``meta["sym"]``), or lowering meets ``operator.mul`` as an op with no tensor meta
    (Mixtral's backward)."""
    from tutorcompile.fx import Graph
    from tutorcompile.fx.symbolic_shapes import ShapeEnv, materialize
    env = ShapeEnv()
    s0, s1 = env.create_symbol(5, (0, 0)), env.create_symbol(7, (0, 1))
    graph = Graph()
    x = graph.placeholder("x")
    materialize(2 * s0 * s1, graph, {s0.expr: (x, 0), s1.expr: (x, 1)}, {})
    computed = [n for n in graph.nodes if n.op == "call_function"]
    assert len(computed) == 4   # s0, s1, s0*s1, 2*s0*s1
    assert all("sym" in n.meta for n in computed), [n.name for n in computed]


class _FirstEight(torch.autograd.Function):
    """An opaque call whose result has min(n, 8) rows: 8 at the hint 16 and at 16 + 7."""

    @staticmethod
    def forward(ctx, x):
        return x[:8] * 2

    @staticmethod
    def backward(ctx, g):
        raise NotImplementedError


def first_rows(x):
    return (_FirstEight.apply(x) * x[:4].sum(0)).sum(0)


def test_an_extern_whose_size_is_a_clamp_of_a_symbol_is_not_taken_for_a_constant():
    """An extern's symbolic result is read off meta runs; a size that is the same number at
    the hint and at the moved point (``min(n, 8)``) is checked at a third, small one -- the
    kernels once assumed 8 rows of a 5-row result (a silently wrong sum)."""
    compiled = eval_frame.compile(first_rows, backend=_counting()[0])
    with torch.no_grad():
        for n in (16, 20, 5, 12, 3):
            x = torch.randn(n, 4)
            torch.testing.assert_close(compiled(x), first_rows(x))


def test_a_size_used_as_a_value_is_an_expression_of_the_kernel_size_arguments():
    # the gradient of a cat at ``4 * (t // 4)`` (whole molecules, then the rest) puts that
    # offset into a kernel as a value: the C++ kernel printed it as a literal, ``int()`` of
    # the size -- specialised, a compile per multiple of 4
    def molecules_then_rest(x):
        t = x.shape[1]
        return torch.cat([x[:, :4 * (t // 4)] * 2, x[:, 4 * (t // 4):]], 1)
    backend, made = _counting()
    compiled = eval_frame.compile(molecules_then_rest, backend=backend)
    _values_and_grads_at(compiled, molecules_then_rest,
                         [(1, 9), (2, 10), (3, 17), (5, 11), (4, 33)])   # (t % 4 never 0)
    assert [c.compiled.num_compiles for c in made] == [1, 1]


def test_a_symbolic_size_that_is_1_at_the_example_is_lowered_without_a_guard():
    # CANINE's ``t // 4 - 1`` molecules are 1 at t = 9, where the symbolic graph is made:
    # reshape, expand and the kernels' indexing asked ``== 1`` of it (a guard that failed
    # at every other length); they now tell a literal 1 by its expression
    def molecules_after_the_first(x):
        molecules = x[:, ::4][:, 1:x.shape[1] // 4]
        return molecules.repeat_interleave(4, dim=1) * x[:, :4 * (x.shape[1] // 4) - 4]
    backend, made = _counting()
    compiled = eval_frame.compile(molecules_after_the_first, backend=backend)
    _values_and_grads_at(compiled, molecules_after_the_first,
                         [(1, 8), (2, 9), (3, 17), (16, 64), (5, 11)])
    assert [c.compiled.num_compiles for c in made] == [1, 1]


def decaying_sum(x):
    # Mamba's selective scan (its combine_fn over (decay, value) pairs), along the length
    from torch._higher_order_ops.associative_scan import associative_scan

    def combine_fn(left, right):
        return left[0] * right[0], right[0] * left[1] + right[1]
    _, states = associative_scan(combine_fn, (torch.sigmoid(x), x), dim=1,
                                 combine_mode="generic")
    return states * 2


def running_max_from_the_right(x):
    from torch._higher_order_ops.associative_scan import associative_scan
    return associative_scan(torch.maximum, x.double(), dim=1, reverse=True,
                            combine_mode="generic").float()


def scan_with_a_row_sum(x):
    from torch._higher_order_ops.associative_scan import associative_scan

    def combine_fn(acc, cur):   # (associative: PyTorch's scan regroups the steps)
        return acc + cur - cur.mean(0, keepdim=True)
    return associative_scan(combine_fn, x, dim=1, combine_mode="generic")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [decaying_sum, running_max_from_the_right])
def test_a_scan_over_a_symbolic_length_is_one_kernel_looping_over_it(fn, backend):
    """Was PyTorch's loop, a few small ops per position (Mamba at length 16: 1.11-1.34x the
    static graph's time): a pointwise ``combine_fn`` is spelled into one kernel whose
    length is an argument -- a tuple of leaves or one, either direction, float32 or
    float64 -- and its gradient, from the VJP rules of its prims, into another, with
    eager's values and gradients."""
    counting, made = _counting(backend)
    compiled = eval_frame.compile(fn, backend=counting)
    _values_and_grads_at(compiled, fn, [(2, 5), (3, 9), (4, 17), (2, 33), (5, 9)],
                         place=lambda x: on(backend, x)[0])
    assert [c.compiled.num_compiles for c in made] == [1, 1]
    language = {"cpp": "C++", "triton": "Triton"}[backend]
    forward = made[1].compiled.artifacts.forward.compiled
    assert f"a generated {language} loop over the scan dimension" in forward.wrapper_code
    assert "sequential_scan runs in PyTorch" not in forward.wrapper_code
    (scan,) = [k for k in forward.kernel_sources if k.startswith(f"{backend}_scan")]
    loop = "range(1, n)" if backend == "triton" else "for (int64_t step = 1; step < n; step++)"
    assert loop in forward.kernel_sources[scan], forward.kernel_sources[scan]
    assert f"{scan}(" in forward.wrapper_code   # called by its own name
    backward = made[1].compiled.artifacts.backward.compiled
    assert f"a generated {language} loop back over it" in backward.wrapper_code, \
        backward.wrapper_code


def test_a_scan_whose_combine_fn_is_not_pointwise_runs_in_pytorch_and_says_why():
    backend, made = _counting()
    compiled = eval_frame.compile(scan_with_a_row_sum, backend=backend)
    _values_and_grads_at(compiled, scan_with_a_row_sum, [(2, 5), (3, 9), (4, 17)])
    assert [c.compiled.num_compiles for c in made] == [1, 1]
    assert "sequential_scan runs in PyTorch: combine_fn calls mean, not a pointwise prim" in \
        made[1].compiled.artifacts.forward.compiled.wrapper_code


def gated_scan(x, gate):
    from torch._higher_order_ops.associative_scan import associative_scan

    def combine_fn(left, right):
        return left[0] * right[0], right[0] * left[1] + right[1]
    return associative_scan(combine_fn, (gate, x), dim=0, reverse=True,
                            combine_mode="generic")[1]


def test_a_scan_of_two_inputs_only_one_needing_a_gradient_compiles_twice():
    """Leaves from two inputs have sizes of their own symbols: the result's sizes were
    found by running the scan at sizes where those differed (combine_fn then failed on
    slices of two shapes), so the length was specialised -- a compile per length."""
    backend, made = _counting()
    compiled = eval_frame.compile(gated_scan, backend=backend)
    for t, b in ((5, 2), (9, 3), (17, 4), (6, 2)):
        x, gate = torch.randn(t, b, 3, requires_grad=True), torch.rand(t, b, 3)
        y = x.detach().requires_grad_()
        out, want = compiled(x, gate), gated_scan(y, gate)
        torch.testing.assert_close(out, want)
        out.sin().sum().backward()
        want.sin().sum().backward()
        torch.testing.assert_close(x.grad, y.grad)
    assert [c.compiled.num_compiles for c in made] == [1, 1]


def ragged_tail(x):
    return torch.cat([x, torch.full((x.shape[0], x.shape[1] % 3), 2.0, device=x.device)], 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_kernel_left_with_no_buffers_at_a_size_of_0_is_still_called_right(backend):
    """Was a SyntaxError in the Triton wrapper (``kernel(grid, , s0*(s1 % 3), ...)``): the
    graph recompiled at a length where the filled block is empty, and its kernel had no
    tensor to take."""
    counting, made = _counting(backend)
    compiled = eval_frame.compile(ragged_tail, backend=counting)
    for b, t in ((1, 8), (2, 10), (3, 17), (2, 9), (4, 64)):   # t % 3: 2, 1, 2, 0, 1
        (x,) = on(backend, torch.randn(b, t))
        torch.testing.assert_close(compiled(x), ragged_tail(x))
