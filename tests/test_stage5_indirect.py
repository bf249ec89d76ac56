"""Stage 5: indirect loads -- an index read from a tensor -- in both code generators.

``index_select`` (and so embedding, gather, take, flip) loads at a position that is itself a
loaded value (``ir.indirect_indexing``); ``index_add`` (scatter_add, the gradient of
index_select) sums the rows whose index matches; ``slice_scatter`` (the gradient of a slice)
picks by position. Each is checked against eager, fused with its neighbours into one kernel,
and an index out of range raises an ``IndexError`` (as PyTorch does) instead of reading
outside the buffer -- in the reference interpreter, the C++ kernel and the Triton kernel.
"""

import pytest
import torch
import torch.nn.functional as F

import tutorcompile as tc
from tests.kernel_backends import BACKENDS, on
from tutorcompile.environment import probe
from tutorcompile.fx import GraphModule
from tutorcompile.inductor.compile_fx import compile_fx
from tutorcompile.inductor.lowering import evaluate_lowering, lower_graph
from tutorcompile.ops import PRIMS, ops, trace

pytestmark = pytest.mark.stage5


def embed_relu_sum(w, idx, b):
    return ops.sum(ops.relu(ops.add(ops.index_select(w, 0, idx), b)), (1,))


def select_columns(w, idx):
    return ops.mul(ops.index_select(w, 1, idx), 2.0)


def add_rows(base, idx, src):
    return ops.relu(ops.index_add(base, 0, idx, src))


def add_columns(base, idx, src):
    return ops.index_add(base, 1, idx, src)


def scatter_strided(base, src):
    return ops.mul(ops.slice_scatter(base, src, 1, 1, 8, 3), 2.0)


def scatter_rows(base, src):
    return ops.slice_scatter(base, src, 0, 2, None, 1)


CASES = {
    "index_select rows, fused into a reduction": (
        embed_relu_sum, lambda: (torch.randn(10, 16), torch.tensor([1, 9, 0, 3, 3]),
                                 torch.randn(16))),
    "index_select columns (int32 index)": (
        select_columns, lambda: (torch.randn(3, 7), torch.tensor([6, 0, 0, 2],
                                                                 dtype=torch.int32))),
    "index_add with repeated rows": (
        add_rows, lambda: (torch.randn(5, 3), torch.tensor([0, 4, 0, 2, 0, 4]),
                           torch.randn(6, 3))),
    "index_add along dim 1": (
        add_columns, lambda: (torch.randn(2, 5), torch.tensor([3, 3, 1]), torch.randn(2, 3))),
    "slice_scatter with a step": (
        scatter_strided, lambda: (torch.randn(4, 9), torch.randn(4, 3))),
    "slice_scatter to the end": (
        scatter_rows, lambda: (torch.randn(5, 3), torch.randn(3, 3))),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES)
def test_one_kernel_matches_eager(case, backend):
    fn, make = CASES[case]
    args = on(backend, *make())
    graph = trace(fn, *args)
    expected = GraphModule({}, graph)(*args)
    torch.testing.assert_close(evaluate_lowering(lower_graph(graph, args), *args), expected)
    compiled = compile_fx(graph, args, codegen=backend)
    torch.testing.assert_close(compiled(*args), expected)
    (source,) = compiled.kernel_sources.values()   # one fused kernel, no PyTorch call
    if "index" in case:
        assert "index out of bounds" in source


def test_a_large_index_add_runs_in_pytorch():
    """``index_add`` compares every output row with every index when it is a kernel: a
    position-embedding gradient (32 indices into a 32 x 64 table, 65k compares) runs in
    PyTorch's scatter, linear in the indices, instead."""
    if not probe().has_cxx:
        pytest.skip("no C++ compiler")
    args = (torch.zeros(32, 64), torch.arange(32), torch.randn(32, 64))
    graph = trace(add_rows_into, *args)
    compiled = compile_fx(graph, args, codegen="cpp")
    torch.testing.assert_close(compiled(*args), GraphModule({}, graph)(*args))
    externs = [g for g in compiled.scheduler.groups if g.is_extern]
    assert [g.buffers[0].kernel for g in externs] == [PRIMS["index_add"]], \
        compiled.fusion_report


def add_rows_into(base, idx, src):
    return ops.index_add(base, 0, idx, src)


BAD = {
    "index_select": (embed_relu_sum, lambda: (torch.randn(10, 16),
                                              torch.tensor([1, 10, 0]), torch.randn(16))),
    "index_select negative": (select_columns, lambda: (torch.randn(3, 7),
                                                       torch.tensor([-1, 0]))),
    "index_add": (add_rows, lambda: (torch.randn(5, 3), torch.tensor([0, 5]),
                                     torch.randn(2, 3))),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", BAD)
def test_index_out_of_range_raises(case, backend):
    fn, make = BAD[case]
    args = on(backend, *make())
    graph = trace(fn, *args)
    with pytest.raises(IndexError, match="out of"):
        evaluate_lowering(lower_graph(graph, args), *args)
    compiled = compile_fx(graph, args, codegen=backend)
    if backend == "triton" and torch.cuda.is_available():
        pytest.skip("a device-side assert leaves the CUDA context unusable")
    with pytest.raises(IndexError, match="index out of bounds"):
        compiled(*args)


def _check(fn, *args):
    """tc.compile (inductor, C++) against eager: values and the gradients of float inputs."""
    tc.reset()
    compiled = tc.compile(fn, backend="inductor")
    eager_in = [a.detach().clone().requires_grad_(a.is_floating_point()) for a in args]
    got_in = [a.detach().clone().requires_grad_(a.is_floating_point()) for a in args]
    expected, got = fn(*eager_in), compiled(*got_in)
    torch.testing.assert_close(got, expected)
    cotangent = torch.randn_like(expected)
    wanted = [a for a in eager_in if a.requires_grad]
    torch.testing.assert_close(
        torch.autograd.grad(got, [a for a in got_in if a.requires_grad], cotangent),
        torch.autograd.grad(expected, wanted, cotangent))
    return compiled


@pytest.mark.parametrize("name", ["embedding", "gather", "take", "getitem", "flip"])
def test_indexing_ops_compile_with_gradients(name):
    torch.manual_seed(0)
    x = torch.randn(4, 6)
    fns = {
        "embedding": (lambda w, i: F.embedding(i, w).sum(-1), (x, torch.tensor([[0, 3], [2, 2]]))),
        "gather": (lambda a, i: torch.gather(a, 1, i) * 2, (x, torch.randint(0, 6, (4, 3)))),
        "take": (lambda a, i: torch.take(a, i).exp(), (x, torch.tensor([[-1, 3], [23, -24]]))),
        "getitem": (lambda a, i: a[i] + 1, (x, torch.tensor([-1, 2, -4]))),
        "flip": (lambda a: torch.flip(a, (0, 1)) + 1, (x,)),
    }
    fn, args = fns[name]
    _check(fn, *args)


@pytest.mark.parametrize("index", [[[6], [0], [0], [0]], [[-1], [0], [0], [0]]])
def test_gather_checks_the_index_along_its_dimension(index):
    """A gather index past the end of its row still lands inside the flattened tensor (the
    next row): it must raise as eager does, not read the neighbour."""
    x, index = torch.randn(4, 6), torch.tensor(index)
    with pytest.raises(RuntimeError):
        torch.gather(x, 1, index)
    tc.reset()
    with pytest.raises(IndexError):
        tc.compile(lambda a, i: torch.gather(a, 1, i), backend="inductor")(x, index)


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_tensor_kernel_writes_nothing(backend):
    """A pointwise kernel over a shape with a 0 in an outer dimension: the C++ loops used to
    treat the outer dimensions as one row and write past the (empty) buffer."""
    args = on(backend, torch.zeros(0, 3, 13), torch.randn(0, 3, 3))
    graph = trace(scatter_strided_wide, *args)
    compiled = compile_fx(graph, args, codegen=backend)
    assert compiled(*args).shape == (0, 3, 13)


def scatter_strided_wide(base, src):
    return ops.add(ops.slice_scatter(base, src, 2, 5, 12, 3), 1.0)
