"""Stage 3: NumPy code on tensors, captured as torch ops (``torch._numpy``) in one graph.

Programs written for these tests, in the ways code mixes the two: an array made with
``x.numpy()``, NumPy functions and submodules on it (``np.mean``, ``np.linalg.norm``,
``np.fft``), ndarray methods and attributes, operators between arrays, and back to torch
with ``torch.from_numpy``. Each is one graph with ``fullgraph=True`` under every backend,
and gives what eager NumPy gives -- NumPy's types and dtypes included (an array returned
is a ``numpy.ndarray``, a full reduction a NumPy scalar; ``np.mean`` of integers is
float64).
"""

import numpy as np
import pytest
import torch

import tutorcompile as tc

pytestmark = pytest.mark.stage3

BACKENDS = ["eager", "aot_eager", "inductor"]


def normalise_rows(x):
    a = x.numpy()
    centred = a - np.mean(a, axis=1, keepdims=True)
    return torch.from_numpy(centred / (np.std(a, axis=1, keepdims=True) + 1e-5))


def metadata_and_views(x):
    a = x.numpy()
    return (a.shape, a.ndim, a.size, a.itemsize, a.strides, a.dtype,
            torch.from_numpy(a.T.copy()), a.reshape(a.size).sum())


def reductions_with_axes(x):
    a = x.numpy()
    return a.max(axis=0), a.argmin(axis=1), np.sum(a > 0, axis=0), a.all(axis=0)


def submodules(x):
    a = x.numpy()
    return np.linalg.norm(a, axis=0), np.fft.fftshift(a), np.linalg.det(a @ a.T + np.eye(4))


def integers_promote_as_numpy_does(x):
    counts = x.numpy()
    return np.mean(counts), counts // 2, counts * 1.5


def meshgrid_and_stack(x, y):
    gx, gy = np.meshgrid(x.numpy(), y.numpy())
    return torch.from_numpy(np.stack([gx, gy]))


def dtype_arguments(x):
    return np.ones_like(x.numpy(), dtype=np.float64), np.zeros_like(x, dtype=np.int32)


def numpy_between_torch_ops(x):
    y = torch.relu(x)
    z = np.clip(y.numpy(), 0.1, 0.5)
    return torch.from_numpy(z).sin() + torch.as_tensor(z)


def integer_division_runs_numpys_loop(x):
    """``/`` of integers is NumPy's float64 loop, not torch's default float32; so are
    ``arctan2`` and ``fabs`` of integers (``fabs`` is ``absolute`` in torch._numpy)."""
    counts = x.numpy()
    small = counts.astype(np.int32)
    positions = np.arange(counts.shape[1]) / counts.shape[1]
    return (counts / 3, 7 / (counts + 1), small / small.max(), np.true_divide(counts, 2),
            np.divide(small, counts + 1), (counts > 4) / 2, np.arctan2(counts, 3),
            np.fabs(counts - 4), np.absolute(small - 4), torch.from_numpy(positions),
            counts * 0.5, small + 1)


def indexing_and_iterating_give_arrays(x):
    """``a[0]``, ``a[:, 1]``, the rows of ``for``, ``*``-unpacking and ``zip``: arrays,
    whose ``max(0)`` is NumPy's (a number), not torch's (values, indices)."""
    a = x.numpy()
    first, *rest = a
    rows = [row.max(0) for row in a]
    pairs = [(i, (r * s).sum()) for i, (r, s) in enumerate(zip(a, a[1:]))]
    items = [v for v in a[0]]   # a 1-d array's items: NumPy's scalars
    return (a[0].max(0), a[:, 1].max(0), a[1:].max(0), first.max(0), len(rest), rows, pairs,
            items, (-a).max(0), abs(a).argmax(0), (~(a > 0)).sum(0), (+a)[..., 0])


def scalars_copy_rows_view(x):
    """``a[0, 0]`` is NumPy's scalar, a copy (``s += 1`` and later writes to ``a`` leave it
    be); ``a[1]`` and ``a[..., 0]`` are views that show later writes; ``a += 1`` keeps an
    array."""
    a = x.numpy().copy()
    s = a[0, 0]
    row, col = a[1], a[..., 0]
    a[0, 0] = 100.0
    a[1, 1] = -5.0
    s += 1
    row[2] = 7.0
    a += 1
    a *= 2
    return s, row, col, a, a.max(0), a[1].max(0)


def kinds_of_arrays_and_scalars(x):
    a = x.numpy()
    total = a.sum()
    return (type(a) is np.ndarray, isinstance(a, np.ndarray), isinstance(a, torch.Tensor),
            type(total) is np.float32, isinstance(total, np.floating),
            isinstance(a[0], np.ndarray), type(a[0, 0]).__name__, [type(v).__name__ for v in a[0]],
            torch.from_numpy(a) * 1)


def writes_show_through_numpys_views(x):
    """``a.T``, ``a.reshape(...)``, ``a.transpose(...)`` share the array's memory: a write
    to the array shows through them, and a write through one reaches the array -- under
    AOT's functionalization too, which took their results for new arrays."""
    a = x.numpy().copy()
    t, flat, swapped = a.T, a.reshape(-1), a.transpose(1, 0)
    a[0, 0] = 100.0
    flat[1] = -7.0
    swapped[2, 3] = 5.0
    return t, flat, swapped, a, torch.from_numpy(t) * 2


CASES = {
    "writes_show_through_numpys_views": (writes_show_through_numpys_views,
                                         lambda: [torch.randn(4, 3)]),
    "indexing_and_iterating_give_arrays": (indexing_and_iterating_give_arrays,
                                           lambda: [torch.randn(4, 3)]),
    "scalars_copy_rows_view": (scalars_copy_rows_view, lambda: [torch.randn(4, 3)]),
    "kinds_of_arrays_and_scalars": (kinds_of_arrays_and_scalars, lambda: [torch.randn(4, 3)]),
    "integer_division_runs_numpys_loop": (integer_division_runs_numpys_loop,
                                          lambda: [torch.randint(0, 9, (3, 5))]),
    "normalise_rows": (normalise_rows, lambda: [torch.randn(4, 6)]),
    "metadata_and_views": (metadata_and_views, lambda: [torch.randn(4, 6)]),
    "reductions_with_axes": (reductions_with_axes, lambda: [torch.randn(4, 6)]),
    "submodules": (submodules, lambda: [torch.randn(4, 4)]),
    "integers_promote_as_numpy_does": (integers_promote_as_numpy_does,
                                       lambda: [torch.randint(0, 9, (3, 5))]),
    "meshgrid_and_stack": (meshgrid_and_stack, lambda: [torch.randn(3), torch.randn(4)]),
    "dtype_arguments": (dtype_arguments, lambda: [torch.randn(2, 3)]),
    "numpy_between_torch_ops": (numpy_between_torch_ops, lambda: [torch.randn(5)]),
}


def _same(got, want):
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    elif isinstance(want, np.ndarray):
        assert type(got) is np.ndarray and got.dtype == want.dtype, (type(got), want.dtype)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    elif isinstance(want, np.generic):   # NumPy's scalar of a full reduction
        assert type(got) is type(want), (type(got), type(want))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    elif isinstance(want, torch.Tensor):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    else:
        assert got == want


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", CASES)
def test_numpy_on_tensors_is_one_graph_with_numpys_results(name, backend):
    fn, make = CASES[name]
    torch.manual_seed(0)
    args = make()
    compiled = tc.compile(fn, backend=backend, fullgraph=True)
    for _ in range(2):   # the compiling call, then a cache hit
        _same(compiled(*args), fn(*args))
    if backend == "eager":
        explained = tc.explain(fn)(*args)
        assert (explained.graph_count, explained.graph_break_count) == (1, 0)


def test_numpy_of_a_tensor_that_requires_grad_raises_as_in_eager():
    def fn(x):
        return np.sum(x.numpy())
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="requires grad"):
        fn(x)
    with pytest.raises(RuntimeError, match="requires grad"):
        tc.compile(fn)(x)


def test_an_array_method_that_needs_the_data_is_a_break():
    def fn(x):
        return x.numpy().tolist()
    explained = tc.explain(fn)(torch.randn(3))
    assert any("tolist" in r.reason for r in explained.break_reasons)
    x = torch.randn(3)
    assert tc.compile(fn)(x) == fn(x)


def test_numpy_on_constants_still_folds():
    def fn(x):
        return x * np.sqrt(2.0) + np.float32(1.5) + np.pi
    explained = tc.explain(fn)(torch.randn(3))
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    x = torch.randn(3)
    torch.testing.assert_close(tc.compile(fn)(x), fn(x))


class TrilPermute(torch.nn.Module):
    """normflows' LU layer: index arrays made by NumPy in ``__init__``, kept on the module."""

    def __init__(self):
        super().__init__()
        self.rows, self.cols = np.tril_indices(4, k=-1)
        self.perm = np.array([2, 0, 3, 1])
        self.entries = torch.nn.Parameter(torch.randn(6))

    def forward(self, x):
        lower = x.new_zeros(4, 4)
        lower[self.rows, self.cols] = self.entries
        return x[:, self.perm] @ lower


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_array_from_outside_is_an_input_read_on_every_call(backend):
    torch.manual_seed(0)
    model, x = TrilPermute(), torch.randn(3, 4)
    compiled = tc.compile(model, backend=backend, fullgraph=True)
    got, want = compiled(x), model(x)
    torch.testing.assert_close(got, want)
    got.sum().backward()
    grad = model.entries.grad.clone()
    model.entries.grad = None
    want.sum().backward()
    torch.testing.assert_close(grad, model.entries.grad)
    model.perm[:] = [3, 2, 1, 0]            # written in place: read again, no recompile
    torch.testing.assert_close(compiled(x), model(x))
    model.perm = np.array([1, 0, 3, 2], dtype=np.int32)   # another dtype: compiled again
    torch.testing.assert_close(compiled(x), model(x))


def test_numpy_functions_on_constants_give_numbers_not_arrays():
    # tensorly: ``int(np.prod(shape[-2:]))`` of a static shape is a number while tracing --
    # traced as a 0-d array, ``int()`` of it was a graph break
    def fn(x):
        n = int(np.prod([x.shape[i] for i in (1, 2)]))
        m = np.sum((x.ndim, 1)) + np.max([2, 5])
        return x.reshape(x.shape[0], n) * m
    explained = tc.explain(fn)(torch.randn(2, 3, 4))
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    x = torch.randn(2, 3, 4)
    torch.testing.assert_close(tc.compile(fn)(x), fn(x))
