"""Stage 4: the special functions, scans and samplers added for the OpInfo sweep's kernels.

Each case is compiled with the inductor (C++ kernels) and compared with eager PyTorch, values
and gradients, on inputs that cross every branch of its decomposition (reflection formulas,
asymptotic series, poles); the OpInfo sweep (``tests/test_opinfo_sweep.py``) runs the same
ops on PyTorch's own samples and counts the kernels they become.
"""

import pytest
import torch
import torch.nn.functional as F

import tutorcompile as tc
from tutorcompile.aot import aot_function

pytestmark = pytest.mark.stage4

torch.manual_seed(0)
# both sides of 0, near and far from the poles, the half-integers, past the shift of 10
GAMMA_ARGS = torch.tensor([-8.48, -7.3, -2.5, -2.02, -0.4, 1e-3, 0.3, 1.0, 2.0, 3.7, 9.9,
                           10.0, 42.0, 1e4])



def _polygamma(n):
    return lambda x: torch.polygamma(n, x)


CASES = {
    **{f"polygamma {n}": (_polygamma(n), (GAMMA_ARGS,)) for n in range(5)},
    "polygamma method": (lambda x: x.polygamma(3), (GAMMA_ARGS,)),
}


def _check(fn, args, tol=None):
    """Every call decomposes to prims (no PyTorch call is left), and the inductor's kernels
    give eager's values and gradients."""
    tol = tol or {}
    aot = aot_function(fn)
    aot(*args)
    assert aot.artifacts.decomposition_report.extern == {}, str(
        aot.artifacts.decomposition_report)
    tc.reset()
    compiled = tc.compile(fn, backend="inductor")
    eager_in = [a.clone().requires_grad_(a.is_floating_point()) for a in args]
    got_in = [a.clone().requires_grad_(a.is_floating_point()) for a in args]
    expected, got = fn(*eager_in), compiled(*got_in)
    torch.testing.assert_close(got, expected, equal_nan=True, **tol)
    if expected.requires_grad:
        cot = torch.randn_like(expected)
        wanted = [i for i, a in enumerate(eager_in) if a.requires_grad]
        ge = torch.autograd.grad(expected, [eager_in[i] for i in wanted], cot,
                                 allow_unused=True)
        gg = torch.autograd.grad(got, [got_in[i] for i in wanted], cot, allow_unused=True,
                                 materialize_grads=True)
        for e, g in zip(ge, gg):
            torch.testing.assert_close(torch.zeros_like(e) if g is None else g,
                                       torch.zeros_like(g) if e is None else e,
                                       equal_nan=True, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("name", CASES)
def test_compiles_to_kernels_like_eager(name):
    fn, args = CASES[name]
    _check(fn, args)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_polygamma_at_poles_and_between_them(n):
    """Poles (0, -0, the negative integers) give eager's infinities; between the poles, where
    the reflection cancels, the values still match eager's to float32 accuracy."""
    x = torch.cat([torch.tensor([0.0, -0.0, -1.0, -3.0, float("inf"), float("nan")]),
                   torch.linspace(-6, 0, 3001)])
    tc.reset()
    got = tc.compile(lambda x: torch.polygamma(n, x), backend="inductor")(x)
    torch.testing.assert_close(got, torch.polygamma(n, x), equal_nan=True, rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("kind", "tuvw")
def test_chebyshev_polynomials_from_their_closed_forms(kind):
    """Inside [-1, 1], at +-1, beyond (both signs), infinities; degrees negative, fractional
    (truncated), 0, 1, 2, large enough to overflow (NaN once the recurrence's P_{n-2} is
    infinite, as eager's loop gives) -- values as eager's recurrence."""
    fn = getattr(torch.special, f"chebyshev_polynomial_{kind}")
    x = torch.cat([torch.tensor([-8.48, -1.0, 1.0, 0.0, -0.5, 0.999, 1.0001, -1.0001, 3.0,
                                 float("inf"), float("-inf"), 50.0, -50.0]),
                   torch.randn(40) * 3])
    tc.reset()
    compiled = tc.compile(fn, backend="inductor")
    for n in (torch.tensor(3.61), torch.tensor(-1.77), 0, 1, 2, 5, 7, 9, 12, 30, 60,
              torch.arange(-2.0, 51.0)):
        torch.testing.assert_close(compiled(x, n), fn(x, n), equal_nan=True, rtol=1e-4,
                                   atol=1e-4)
    _check(lambda x, n: fn(x, n), (torch.randn(6), torch.tensor([0.0, 1.0, 2.0, 3.0, 7.0,
                                                                   11.0])))


def test_normal_tails_match_eager_across_their_branches():
    """erfcx on both sides of 1, 8, 50, 5e7 and below -6.1 (where it overflows, with eager's
    -inf gradient); log_ndtr on both sides of -1 and far out; ndtri in the centre, both
    tails, both rational fits of the tail, at 0 and 1 and outside."""
    x = torch.cat([torch.tensor([-30.0, -9.5, -9.3, -6.2, -6.0, -1.0, -0.5, 0.0, 0.5, 0.99, 1.0,
                                 1.01, 4.0, 7.99, 8.0, 8.01, 26.0, 49.0, 50.0, 51.0, 1e3, 1e8,
                                 1e30, float("inf"), float("-inf"), float("nan")]),
                   torch.linspace(-12, 12, 241)])
    p = torch.cat([torch.tensor([0.0, 1.0, -0.1, 1.1, 1e-30, 1e-10, 1e-5, 0.1353, 0.1354,
                                 0.5, 0.8646, 0.8647, 1 - 1e-7, float("nan")]),
                   torch.rand(200)])
    for fn, arg in ((torch.special.erfcx, x), (torch.special.log_ndtr, x),
                    (torch.special.ndtri, p)):
        tc.reset()
        got = tc.compile(lambda a, fn=fn: fn(a), backend="inductor")(arg)
        torch.testing.assert_close(got, fn(arg), equal_nan=True, rtol=1e-4, atol=1e-4)
    # (gradients where eager's overflow to -inf and ours, multiplied in another order, do
    # not -- near x = -9.3 -- are left out)
    finite = x[torch.isfinite(x) & (x > -9.2)]
    _check(lambda a: torch.special.erfcx(a), (finite,))
    _check(lambda a: torch.special.log_ndtr(a), (finite,))
    _check(lambda a: torch.special.ndtri(a), (p[4:-1],))


def _scatter_case(reduce, include_self, index_reduce, dim):
    x = torch.randn(4, 6)
    x[1, 2] = 0.0
    if index_reduce:
        index = torch.tensor([2, 0, 2]) if dim == 0 else torch.tensor([2, 0, 2, 5])
        src = torch.randn(3, 6) if dim == 0 else torch.randn(4, 4)
        src[0, 2] = x[2, 2] if dim == 0 else x[0, 2]       # a tie with the target
        return (lambda a, i, s: a.index_reduce(dim, i, s, reduce, include_self=include_self),
                (x, index, src))
    index = torch.tensor([[0, 5, 5], [1, 1, 1], [2, 3, 2], [4, 4, 0]])
    src = torch.randn(4, 3)
    src[2, 0] = 0.0
    src[1, 1] = x[1, 1]
    return (lambda a, i, s: a.scatter_reduce(1, i, s, reduce, include_self=include_self),
            (x, index, src))


@pytest.mark.parametrize("index_reduce,dim", [(False, 1), (True, 0), (True, 1)])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["prod", "amax", "amin"])
def test_colliding_scatter_reductions_compare_densely(reduce, include_self, index_reduce, dim):
    """prod/amax/amin of writes that collide, with zeros and ties with the target: values
    and gradients as eager (ties share the gradient as PyTorch's backward shares it)."""
    torch.manual_seed(1)
    _check(*_scatter_case(reduce, include_self, index_reduce, dim))


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("initial", [None, 1.0, -3.0])
def test_segment_reduce_with_empty_segments(reduce, initial):
    """Empty segments (initial, or PyTorch's default), by lengths and by offsets, 1-d and 2-d
    data (no ties: see segment_reduce's docstring)."""
    torch.manual_seed(2)
    for bounds in ({"lengths": torch.tensor([0, 1, 2, 2, 0, 2])},
                   {"offsets": torch.tensor([0, 0, 1, 3, 5, 5, 7])}):
        for data in (torch.randn(7), torch.randn(7, 3)):
            _check(lambda x, bounds=bounds: torch.segment_reduce(x, reduce, initial=initial,
                                                                 **bounds), (data,))


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding", ["zeros", "border"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("k", [2, 3])
def test_grid_sample_reads_and_weights_as_eager(k, mode, padding, align_corners):
    """Points inside, outside and exactly on the edges (where ``border`` gives no gradient,
    as ATen): input and grid gradients as eager's."""
    torch.manual_seed(3)
    x = torch.randn((2, 3) + (5, 6, 4)[:k])
    grid = torch.rand((2, 4, 7) + ((3,) if k == 3 else ()) + (k,)) * 2.4 - 1.2
    grid[0, 0, 0], grid[0, 0, 1] = 1.0, -1.0
    _check(lambda a, g: F.grid_sample(a, g, mode=mode, padding_mode=padding,
                                      align_corners=align_corners), (x, grid))


def test_nextafter_steps_exactly_one_float():
    """Every pair of zeros, +-1, powers of two, subnormals, the smallest normals, the
    largest floats, infinities, NaN: bit-exact as eager; gradients as eager's (1, 0 where
    x == y; 0 for y)."""
    f32 = torch.finfo(torch.float32)
    vals = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 3.0, -8.48, 1e-40, -1e-40, f32.tiny,
                         -f32.tiny, f32.tiny * 2, f32.tiny * 1.5, 2.0 ** -110, 2.0 ** -149,
                         f32.max, -f32.max, float("inf"), float("-inf"), float("nan"), 1e30])
    x, y = (t.flatten() for t in torch.meshgrid(vals, vals, indexing="ij"))
    tc.reset()
    got = tc.compile(lambda a, b: torch.nextafter(a, b), backend="inductor")(x, y)
    expected = torch.nextafter(x, y)
    assert ((got == expected) | (got.isnan() & expected.isnan())).all()
    a = torch.tensor([1.0, -2.5, 3.0, 0.0])
    _check(lambda a, b: torch.nextafter(a, b), (a, torch.tensor([2.0, 0.0, 3.0, -1.0])))


def test_max_unpool_writes_back_last_writer_wins_and_every_write_gets_its_gradient():
    """Overlapping pooling windows record the same position twice; arbitrary indices may
    collide with different values (the last write wins, as PyTorch's loop); every write's
    gradient is its position's; an index outside the plane raises, as eager."""
    torch.manual_seed(4)
    x = torch.randn(2, 3, 7, 6)
    pooled, idx = F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)
    _check(lambda p, i: F.max_unpool2d(p, i, 3, stride=2, padding=1, output_size=(7, 6)),
           (pooled, idx))
    values = torch.randn(1, 2, 5)
    colliding = torch.tensor([[[3, 1, 3, 0, 3], [2, 2, 9, 8, 0]]])
    _check(lambda v, i: F.max_unpool1d(v, i, 2), (values, colliding))
    _check(lambda v, i: F.max_unpool3d(v, i, 2),
           (torch.randn(1, 2, 2, 2, 1), torch.randint(0, 8, (1, 2, 2, 2, 1))))
    tc.reset()
    with pytest.raises(IndexError, match="out of range"):
        tc.compile(lambda v, i: F.max_unpool1d(v, i, 2), backend="inductor")(
            values, torch.tensor([[[3, 1, 3, 0, 10], [2, 2, 9, 8, 0]]]))


EMBEDDING_BAGS = {
    "sum weighted": (lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum",
                                                        per_sample_weights=p),
                     lambda: (torch.tensor([5, 1, 6, 5, 6]), torch.tensor([0, 3]),
                              torch.randn(5))),
    "mean empty bag": (lambda w, i, o: F.embedding_bag(i, w, o, mode="mean"),
                       lambda: (torch.tensor([5, 1, 6, 5, 6]), torch.tensor([0, 0, 3, 5]))),
    "max": (lambda w, i, o: F.embedding_bag(i, w, o, mode="max"),
            lambda: (torch.tensor([5, 1, 6, 5, 6]), torch.tensor([0, 2, 2]))),
    "last offset, padding": (lambda w, i, o: F.embedding_bag(i, w, o, mode="mean",
                                                             include_last_offset=True,
                                                             padding_idx=5),
                             lambda: (torch.tensor([5, 1, 6, 5, 6]),
                                      torch.tensor([0, 2, 4, 5]))),
    "2-d": (lambda w, i: F.embedding_bag(i, w, mode="sum"),
            lambda: (torch.tensor([[1, 2, 3], [4, 4, 9]]),)),
    "2-d padding": (lambda w, i: F.embedding_bag(i, w, mode="mean", padding_idx=4),
                    lambda: (torch.tensor([[1, 2, 3], [4, 4, 9]]),)),
}


@pytest.mark.parametrize("name", EMBEDDING_BAGS)
def test_embedding_bag_reduces_bags_as_eager(name):
    torch.manual_seed(5)
    fn, rest = EMBEDDING_BAGS[name]
    _check(fn, (torch.randn(10, 5),) + rest())


@pytest.mark.parametrize("kwargs", [{}, {"spacing": None}, {"spacing": 2.0}, {"dim": 1},
                                    {"dim": (0, -1), "spacing": [0.5, 3]}, {"edge_order": 2},
                                    {"spacing": (2.0,), "dim": 2, "edge_order": 2}])
def test_gradient_by_finite_differences(kwargs):
    torch.manual_seed(6)
    x = torch.randn(5, 4, 6)
    tc.reset()
    compiled = tc.compile(lambda a: torch.gradient(a, **kwargs), backend="inductor")
    for got, expected in zip(compiled(x), torch.gradient(x, **kwargs), strict=True):
        torch.testing.assert_close(got, expected)
    _check(lambda a: torch.stack(torch.gradient(a, **kwargs)).sum(0), (x,))


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_of_an_empty_1d_input_is_pytorchs_call(training):
    """OpInfo's fourth batch_norm sample: a (0,) input has no channel dimension; the rule
    declines it (PyTorch's call) instead of raising IndexError while decomposing."""
    def fn(x, rm, rv):
        return F.batch_norm(x, rm, rv, training=training)
    args = (torch.randn(0), torch.randn(0), torch.rand(0))
    tc.reset()
    got = tc.compile(fn, backend="inductor")(*(a.clone() for a in args))
    torch.testing.assert_close(got, fn(*(a.clone() for a in args)))


@pytest.mark.parametrize("kwargs", [{}, {"min": 0, "max": 10}, {"bins": 1, "min": 0, "max": 10},
                                    {"bins": 7}, {"bins": 10, "min": 0, "max": 9.9}])
def test_histc_counts_as_eager(kwargs):
    """The data's own range, a single point (widened), elements on the edges and outside
    (and NaN with given bounds): exactly eager's counts."""
    torch.manual_seed(7)
    tc.reset()
    compiled = tc.compile(lambda a: torch.histc(a, **kwargs), backend="inductor")
    for x in (torch.tensor(-8.48), torch.randn(1000) * 3, torch.tensor([1.0, 1.0, 1.0]),
              torch.arange(100.0) / 10, torch.tensor([0.0, 10.0, 10.5, -1.0, float("nan")])):
        if "min" in kwargs or not x.isnan().any():
            torch.testing.assert_close(compiled(x), torch.histc(x, **kwargs), rtol=0, atol=0)


EINSUMS = {
    "i->": (3,), "i,j->ij": ((3,), (4,)), "ij->ji": ((3, 4),), "ji": ((3, 4),),
    "bij,bjk->bik": ((2, 3, 4), (2, 4, 5)), "ij,jk": ((3, 4), (4, 5)), "i,i->": ((4,), (4,)),
    "bhqd,bhkd->bhqk": ((2, 3, 4, 5), (2, 3, 6, 5)), "ij,jk,kl->il": ((2, 3), (3, 4), (4, 5)),
    "ijk,ik->j": ((2, 3, 4), (2, 4)), "ab,cd->": ((2, 3), (4, 5)), "abc->b": ((2, 3, 4),),
    "i,i,i->i": ((4,), (4,), (4,)), "a,b,c": ((2,), (3,), (4,)),
}


@pytest.mark.parametrize("equation", EINSUMS)
def test_einsum_as_sums_products_and_matmuls(equation):
    torch.manual_seed(8)
    shapes = EINSUMS[equation]
    shapes = (shapes,) if isinstance(shapes[0], int) else shapes
    _check(lambda *ops: torch.einsum(equation, *ops), tuple(torch.randn(s) for s in shapes))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("kwargs", [{"momentum": 0.5, "eps": 0.6}, {}, {"use_input_stats": False}])
def test_instance_norm_updates_running_statistics_as_eager(backend, kwargs):
    """Functionalized like batch norm: the compiled call writes back the running mean and
    variance PyTorch's in-place update leaves (instance means and unbiased variances
    averaged over the batch); output and gradients as eager's."""
    torch.manual_seed(9)
    x, w, b = torch.randn(3, 4, 5, 6), torch.randn(4), torch.randn(4)
    rm, rv = torch.randn(4), torch.rand(4) + 0.5

    def fn(x, rm, rv, w, b):
        return F.instance_norm(x, rm, rv, w, b, **kwargs)
    eager = [x.clone().requires_grad_(), rm.clone(), rv.clone(), w.clone().requires_grad_(),
             b.clone().requires_grad_()]
    got = [x.clone().requires_grad_(), rm.clone(), rv.clone(), w.clone().requires_grad_(),
           b.clone().requires_grad_()]
    tc.reset()
    expected, out = fn(*eager), tc.compile(fn, backend=backend)(*got)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(got[1], eager[1])
    torch.testing.assert_close(got[2], eager[2])
    cot = torch.randn_like(expected)
    for e, g in zip(torch.autograd.grad(expected, [eager[0], eager[3], eager[4]], cot),
                    torch.autograd.grad(out, [got[0], got[3], got[4]], cot)):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)
    if backend == "inductor":
        aot = aot_function(fn)
        aot(*(t.detach().clone() for t in (x, rm, rv, w, b)))
        assert "F.instance_norm" not in aot.artifacts.decomposition_report.extern


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_batch_norm_with_update_writes_back_the_statistics(backend):
    """aten._batch_norm_with_update functionalized: its four results as eager's, the
    running statistics updated in the caller's tensors, and the output's gradients."""
    torch.manual_seed(10)
    x, w, b = torch.randn(5, 3, 4), torch.randn(3), torch.randn(3)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5

    def fn(x, w, b, rm, rv):
        return torch.ops.aten._batch_norm_with_update(x, w, b, rm, rv, 0.5, 0.6)
    eager = [x.clone().requires_grad_(), w.clone().requires_grad_(),
             b.clone().requires_grad_(), rm.clone(), rv.clone()]
    got = [x.clone().requires_grad_(), w.clone().requires_grad_(),
           b.clone().requires_grad_(), rm.clone(), rv.clone()]
    tc.reset()
    expected, out = fn(*eager), tc.compile(fn, backend=backend)(*got)
    assert len(out) == len(expected) == 4
    for e, g in zip(expected, out):
        torch.testing.assert_close(g, e)
    torch.testing.assert_close(got[3], eager[3])
    torch.testing.assert_close(got[4], eager[4])
    cot = torch.randn_like(expected[0])
    for e, g in zip(torch.autograd.grad(expected[0], eager[:3], cot),
                    torch.autograd.grad(out[0], got[:3], cot)):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)
