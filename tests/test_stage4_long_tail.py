"""Stage 4: scatters, searches and small constructions decompose to prims and compile.

slice/select_scatter and index_add become the inductor's slice_scatter / index_add kernels,
index_fill checks its index through an indirect load, searchsorted/bucketize/isin count
comparisons, trapezoid sums neighbours, block_diag and cartesian_prod are ``cat``\\ s,
F.interpolate reads computed source positions through index_select and weights them. Each
is compiled with the inductor (C++) and compared with eager, values and gradients (the
OpInfo sweep counts the kernels they become).
"""

import pytest
import torch
import torch.nn.functional as F

import tutorcompile as tc
from tutorcompile.aot.decompositions import DECOMPOSITIONS

pytestmark = pytest.mark.stage4

torch.manual_seed(0)
X, Y, S = torch.randn(4, 6), torch.randn(4, 6), torch.randn(4, 2)
IMG = torch.randn(2, 3, 5, 6)
SPECIAL = torch.tensor([-7.3, -2.5, -0.4, 1e-3, 0.3, 1.0, 2.0, 3.7, 9.9, 10.0, 42.0, 1e4])
SORTED = torch.sort(torch.randn(7)).values

CASES = {
    "slice_scatter": (lambda x, s: torch.slice_scatter(x, s, 1, 1, 6, 3), (X, S)),
    "select_scatter": (lambda x, s: torch.select_scatter(x, s, 0, -1), (X, torch.randn(6))),
    "index_add": (lambda x, i, s: x.index_add(0, i, s, alpha=2),
                  (X, torch.tensor([3, 0, 3]), torch.randn(3, 6))),
    "index_fill": (lambda x, i: x.index_fill(1, i, -2.0), (X, torch.tensor([-1, 2, 2]))),
    "trapezoid": (lambda y, x: torch.trapezoid(y, x, dim=1), (X, torch.randn(6))),
    "trapz dx": (lambda y: torch.trapz(y, dx=0.5, dim=0), (X,)),
    "cumulative_trapezoid": (lambda y: torch.cumulative_trapezoid(y, dim=1), (X,)),
    "searchsorted": (lambda s, v: torch.searchsorted(s, v, right=True),
                     (SORTED, torch.tensor([SORTED[2].item(), -9.0, float("nan"), 0.1]))),
    "bucketize": (lambda v, b: torch.bucketize(v, b), (X, SORTED)),
    "isin": (lambda a, b: torch.isin(a, b, invert=True), (torch.tensor([1, 5, 2, 7]),
                                                           torch.tensor([[2, 3], [7, 9]]))),
    "block_diag": (lambda a, b, c: torch.block_diag(a, b, c), (S, torch.randn(3),
                                                              torch.randn(()))),
    "cartesian_prod": (lambda a, b: torch.cartesian_prod(a, b), (torch.randn(3),
                                                                 torch.randn(2))),
    "cdist": (lambda a, b: torch.cdist(a, b, p=1.0), (X, Y[:3])),
    "rpow": (lambda x: 2.0 ** x, (X,)),
    "sum_to_size": (lambda x: x.sum_to_size(1, 6), (X,)),
    "fill": (lambda x: torch.fill(x, 3.0) * x, (X,)),
    "scatter_reduce mean": (lambda x, i, s: x.scatter_reduce(1, i, s, "mean",
                                                            include_self=False),
                            (X, torch.tensor([[0, 5, 5], [1, 1, 1], [2, 3, 2], [4, 4, 0]]),
                             torch.randn(4, 3))),
    "scatter_reduce sum": (lambda x, i, s: x.scatter_reduce(0, i, s, "sum"),
                           (X, torch.tensor([[3, 0, 3, 1, 1, 2]]), torch.randn(1, 6))),
    "index_reduce mean": (lambda x, i, s: x.index_reduce(0, i, s, "mean"),
                          (X, torch.tensor([2, 0, 2]), torch.randn(3, 6))),
    "lgamma": (torch.lgamma, (SPECIAL,)),
    "digamma": (torch.digamma, (SPECIAL,)),
    "erfinv": (torch.erfinv, (torch.tensor([-0.999, -0.71, -0.3, 0.0, 0.2, 0.69, 0.95]),)),
    "spherical_bessel_j0": (torch.special.spherical_bessel_j0, (SPECIAL,)),
    "i0": (torch.i0, (SPECIAL,)),
    "i1e": (torch.special.i1e, (torch.tensor([-9.0, -8.0, -0.5, 0.0, 0.5, 8.0, 9.0, 50.0]),)),
    "avg_pool1d ceil_mode": (lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True,
                                                     count_include_pad=False), (IMG[0],)),
    "avg_pool2d ceil_mode": (lambda x: F.avg_pool2d(x, 2, 2, ceil_mode=True), (IMG,)),
    "max_pool2d ceil_mode": (lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), (IMG,)),
    "renorm": (lambda x: torch.renorm(x, 2, 0, 1.5), (X,)),
    "index_reduce 0-d": (lambda x, i, s: x.index_reduce(0, i, s, "mean"),
                         (torch.randn(()), torch.tensor([0]), torch.randn(()))),
    "interpolate nearest": (lambda x: F.interpolate(x, scale_factor=1.7), (IMG,)),
    "interpolate nearest-exact": (lambda x: F.interpolate(x, size=(3, 7), mode="nearest-exact"),
                                  (IMG,)),
    "interpolate bilinear": (lambda x: F.interpolate(x, scale_factor=(1.5, 0.7),
                                                     mode="bilinear"), (IMG,)),
    "interpolate bilinear corners": (lambda x: F.interpolate(x, size=(7, 3), mode="bilinear",
                                                             align_corners=True), (IMG,)),
    "interpolate bicubic": (lambda x: F.interpolate(x, size=(9, 4), mode="bicubic"), (IMG,)),
    "interpolate linear": (lambda x: F.interpolate(x[0], scale_factor=2.5, mode="linear",
                                                   recompute_scale_factor=True), (IMG,)),
    "interpolate area": (lambda x: F.interpolate(x, size=(2, 3), mode="area"), (IMG,)),
}


@pytest.mark.parametrize("name", CASES)
def test_compiles_to_kernels_like_eager(name):
    fn, args = CASES[name]
    tc.reset()
    compiled = tc.compile(fn, backend="inductor")
    eager_in = [a.clone().requires_grad_(a.is_floating_point()) for a in args]
    got_in = [a.clone().requires_grad_(a.is_floating_point()) for a in args]
    expected, got = fn(*eager_in), compiled(*got_in)
    torch.testing.assert_close(got, expected, equal_nan=True)
    if expected.requires_grad:
        cot = torch.randn_like(expected)
        wanted = [i for i, a in enumerate(eager_in) if a.requires_grad]
        ge = torch.autograd.grad(expected, [eager_in[i] for i in wanted], cot,
                                 allow_unused=True)
        gg = torch.autograd.grad(got, [got_in[i] for i in wanted], cot, allow_unused=True)
        for e, g in zip(ge, gg):
            torch.testing.assert_close(torch.zeros_like(e) if g is None else g,
                                       torch.zeros_like(g) if e is None else e)


def test_special_functions_at_their_edges():
    """Poles, zeros of each sign, |y| = 1 and beyond, infinities and NaN: values as eager."""
    x = torch.tensor([0.0, -0.0, -1.0, -3.0, 1.0, 2.0, float("inf"), float("-inf"),
                      float("nan"), 1e30, -1e-30, 0.5])
    y = torch.tensor([-1.0, 1.0, 1.5, -2.0, 0.0, -0.0, float("nan"), 1e-8, 0.7, 0.70001])
    for fn, arg in ((torch.lgamma, x), (torch.digamma, x), (torch.erfinv, y),
                    (torch.special.spherical_bessel_j0, x), (torch.i0, x),
                    (torch.special.i0e, x), (torch.special.i1, x), (torch.special.i1e, x),
                    (torch.special.i1, torch.tensor([8.0, -8.0, 7.99, 8.01, 80.0]))):
        tc.reset()
        got = tc.compile(fn, backend="inductor")(arg)
        torch.testing.assert_close(got, fn(arg), equal_nan=True, msg=fn.__name__)


def test_empty_like_is_a_tensor_of_the_shape():
    tc.reset()
    got = tc.compile(lambda x: torch.empty_like(x, dtype=torch.float64) + 1,
                     backend="inductor")(X)
    assert got.shape == X.shape and got.dtype == torch.float64


def test_rules_are_registered():
    for fn in (torch.slice_scatter, torch.select_scatter, torch.index_add, torch.index_fill,
               torch.trapezoid, torch.trapz, torch.cumulative_trapezoid, torch.searchsorted,
               torch.bucketize, torch.isin, torch.block_diag, torch.cartesian_prod,
               torch.cdist, torch.Tensor.__rpow__, torch.fill, torch.scatter_reduce,
               torch.index_reduce, torch.empty_like, F.interpolate, torch.lgamma,
               torch.digamma, torch.erfinv, torch.special.spherical_bessel_j0):
        assert fn in DECOMPOSITIONS, fn


def test_index_fill_rejects_an_index_out_of_range():
    x, index = torch.randn(3, 4), torch.tensor([4])
    with pytest.raises(IndexError):
        x.index_fill(1, index, 0.0)
    tc.reset()
    with pytest.raises(IndexError):
        tc.compile(lambda a, i: a.index_fill(1, i, 0.0), backend="inductor")(x, index)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_method_of_a_constant_tensor_reading_graph_values_is_a_graph_call(backend):
    # BLOOM: alibi (folded from constants when no mask is given) .baddbmm(batch1=query, ...)
    def f(b, c):
        alibi = torch.ones(2, 3, 5) * 0.5
        return alibi.baddbmm(batch1=b, batch2=c, beta=1.0, alpha=0.25)

    b, c = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    torch.testing.assert_close(tc.compile(f, backend=backend)(b, c), f(b, c))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_gradients_of_a_write_into_a_slice_of_a_complex_tensor(backend):
    # neuralop's FNO: the low Fourier modes written into a complex buffer; a complex prim's
    # gradient is PyTorch's autograd of its reference, and torch.slice_scatter has no
    # complex derivative
    def f(x, w):
        spectrum = torch.fft.rfft(x)
        out = torch.zeros_like(spectrum)
        out[:, :3] = spectrum[:, :3] * w
        return torch.fft.irfft(out, n=x.shape[-1])

    def make():
        torch.manual_seed(0)
        return (torch.randn(2, 8, requires_grad=True),
                torch.randn(3, dtype=torch.complex64, requires_grad=True))

    tc.reset()
    expected, got = make(), make()
    f(*expected).pow(2).sum().backward()
    tc.compile(f, backend=backend)(*got).pow(2).sum().backward()
    for a, b in zip(expected, got):
        torch.testing.assert_close(b.grad, a.grad)
