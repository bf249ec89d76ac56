"""Stage 1: the prim table -- shape rules, VJP rules and spellings, checked against PyTorch.

For every prim, hypothesis draws inputs (with broadcasting where the prim broadcasts) and:

* the shape/dtype rule agrees with what the PyTorch reference actually returns;
* the VJP rule, applied through ``autodiff.vjp`` (which sums broadcast gradients), agrees with
  ``torch.autograd.grad`` on the reference, in float64 to rtol/atol 1e-7;
* under the graph handler the prim records one node whose GraphModule gives the same value.

A sample of rules is also checked against finite differences with ``torch.autograd.gradcheck``.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tutorcompile.fx import GraphModule
from tutorcompile.ops import (
    PRIMS,
    GraphHandler,
    KernelSpellingHandler,
    backward_graph,
    ops,
    prims,
    set_handler,
    sum_to_shape,
    trace,
    vjp,
)
from tutorcompile.ops.table import is_tensor_like

pytestmark = pytest.mark.stage1

F64 = torch.float64
TOL = dict(rtol=1e-7, atol=1e-7)
SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# --- input strategies -----------------------------------------------------------------------

def _seed(data) -> torch.Generator:
    return torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1), label="seed"))


def _shape(data, min_ndim=0, max_ndim=3, max_size=4) -> tuple[int, ...]:
    ndim = data.draw(st.integers(min_ndim, max_ndim), label="ndim")
    return tuple(data.draw(st.lists(st.integers(1, max_size), min_size=ndim, max_size=ndim),
                           label="shape"))


def _broadcast_partner(data, shape) -> tuple[int, ...]:
    """A shape that broadcasts with ``shape``: leading dims dropped, some dims set to 1."""
    drop = data.draw(st.integers(0, len(shape)), label="drop")
    return tuple(1 if data.draw(st.booleans(), label="one") else s for s in shape[drop:])


def _randn(shape, gen, positive=False):
    t = torch.randn(shape, generator=gen, dtype=F64)
    return t.abs() + 0.5 if positive else t


def _dims(data, ndim):
    if data.draw(st.booleans(), label="all dims"):
        return None
    return tuple(data.draw(st.sets(st.integers(-ndim, ndim - 1), max_size=ndim), label="dims")) \
        if ndim else None


def sample(name: str, data) -> tuple[tuple, dict]:
    """Random arguments for prim ``name`` (float64 tensors, broadcasting where it applies)."""
    g = _seed(data)
    shape = _shape(data)
    if name in ("add", "sub", "mul", "maximum", "minimum", "div", "pow",
                "eq", "ne", "lt", "le", "gt", "ge"):
        a = _randn(shape, g, positive=name == "pow")
        other = _broadcast_partner(data, shape)
        if data.draw(st.booleans(), label="swap"):
            shape, other = other, shape
            a = _randn(shape, g, positive=name == "pow")
        if data.draw(st.integers(0, 4), label="scalar") == 0:
            b = data.draw(st.sampled_from([2.0, -0.5, 3]), label="b")
        else:
            b = _randn(other, g)
            if name == "div":
                b = b.sign() * (b.abs() + 0.5)
        return (a, b), {}
    if name in ("exp", "sin", "cos", "tanh", "sigmoid", "neg", "erf", "abs", "relu", "floor",
                "ceil"):
        return (_randn(shape, g),), {}
    if name in ("logical_and", "logical_or", "logical_xor"):
        other = _broadcast_partner(data, shape)
        return (_randn(shape, g) > 0, _randn(other, g) > 0), {}
    if name in ("log", "sqrt", "rsqrt"):
        return (_randn(shape, g, positive=True),), {}
    if name == "where":
        a, b = _broadcast_partner(data, shape), _broadcast_partner(data, shape)
        return (torch.rand(shape, generator=g) > 0.5, _randn(a, g), _randn(b, g)), {}
    if name == "convert_element_type":
        return (_randn(shape, g), data.draw(st.sampled_from([torch.float32, F64]))), {}
    if name in ("sum", "amax", "mean", "var"):
        a = _randn(shape, g)
        kwargs = {"keepdim": data.draw(st.booleans(), label="keepdim")}
        if name == "var":
            kwargs["correction"] = data.draw(st.sampled_from([0, 1]), label="correction")
            a = _randn(shape + (3,), g)  # reduce over >= 3 elements: n - correction > 0
            dims = _dims(data, a.ndim)
            return (a, None if dims is None else tuple(dims) + (-1,)), kwargs
        return (a, _dims(data, a.ndim) or ()), kwargs
    if name == "reshape":
        a = _randn(shape, g)
        target = data.draw(st.sampled_from([(-1,), (math.prod(shape), 1), (1, -1)]))
        return (a, target), {}
    if name == "permute":
        a = _randn(shape, g)
        return (a, tuple(data.draw(st.permutations(range(len(shape)))))), {}
    if name == "expand":
        small = _broadcast_partner(data, shape)
        target = tuple(data.draw(st.sampled_from([s, -1])) if i >= len(shape) - len(small)
                       and small[i - len(shape) + len(small)] == s else s
                       for i, s in enumerate(shape))
        return (_randn(small, g), target), {}
    if name == "squeeze":
        a = _randn(tuple(data.draw(st.sampled_from([1, 2])) for _ in shape), g)
        return (a, _dims(data, a.ndim)), {}
    if name == "unsqueeze":
        return (_randn(shape, g), data.draw(st.integers(-len(shape) - 1, len(shape)))), {}
    if name in ("slice", "slice_scatter"):
        shape = shape or (3,)
        dim = data.draw(st.integers(-len(shape), len(shape) - 1), label="dim")
        start = data.draw(st.sampled_from([None, 0, 1, -2]), label="start")
        end = data.draw(st.sampled_from([None, 2, -1, 10]), label="end")
        step = data.draw(st.integers(1, 2), label="step")
        a = _randn(shape, g)
        if name == "slice":
            return (a, dim, start, end, step), {}
        src = _randn(prims.slice.meta(a, dim, start, end, step)[0], g)
        return (a, src, dim, start, end, step), {}
    if name in ("index_select", "index_add"):
        shape = shape or (3,)
        dim = data.draw(st.integers(-len(shape), len(shape) - 1), label="dim")
        n = data.draw(st.integers(1, 5), label="n")
        index = torch.randint(0, shape[dim], (n,), generator=g)
        a = _randn(shape, g)
        if name == "index_select":
            return (a, dim, index), {}
        src = _randn(prims.index_select.meta(a, dim, index)[0], g)
        return (a, dim, index, src), {}
    if name == "cat":
        shape = shape or (2,)
        dim = data.draw(st.integers(-len(shape), len(shape) - 1), label="dim")
        parts = []
        for _ in range(data.draw(st.integers(1, 3), label="parts")):
            s = list(shape)
            s[dim] = data.draw(st.integers(1, 3), label="size")
            parts.append(_randn(tuple(s), g))
        return (parts, dim), {}
    if name == "matmul":
        m, k, n = (data.draw(st.integers(1, 4)) for _ in range(3))
        batch = _shape(data, 0, 2, 3)
        return (_randn(batch + (m, k), g), _randn(_broadcast_partner(data, batch) + (k, n), g)
                ), {}
    if name == "convolution":
        nd = data.draw(st.sampled_from([1, 2]), label="conv dims")
        groups = data.draw(st.sampled_from([1, 2]), label="groups")
        cin, cout = 2 * groups, 2 * groups
        x = _randn((2, cin) + (5,) * nd, g)
        w = _randn((cout, cin // groups) + (3,) * nd, g)
        bias = _randn((cout,), g) if data.draw(st.booleans(), label="bias") else None
        return (x, w, bias), dict(stride=data.draw(st.sampled_from([1, 2])),
                                  padding=data.draw(st.sampled_from([0, 1])), groups=groups)
    if name in ("convolution_backward_input", "convolution_backward_weight"):
        x, w = _randn((2, 2, 5, 5), g), _randn((4, 2, 3, 3), g)
        gout = _randn((2, 4, 3, 3), g)
        if name == "convolution_backward_input":
            return (gout, w, tuple(x.shape)), {}
        return (gout, x, tuple(w.shape)), {}
    if name == "full":
        return (shape, data.draw(st.sampled_from([0.0, 1.5, 2, True]))), {}
    if name == "iota":
        return (data.draw(st.integers(0, 6), label="length"),
                data.draw(st.integers(-3, 3), label="start"),
                data.draw(st.integers(1, 3), label="step")), {"dtype": torch.int64}
    raise AssertionError(f"no sample inputs for prim {name!r}: add them to this test")


def _torch_grads(prim, args, kwargs, grad_out):
    """Gradients of the PyTorch reference, by torch.autograd, per positional argument."""
    leaves = []

    def leaf(v):
        if isinstance(v, torch.Tensor) and v.dtype.is_floating_point:
            v = v.detach().clone().requires_grad_()
            leaves.append(v)
        return v
    targs = [[leaf(x) for x in a] if isinstance(a, list) else leaf(a) for a in args]
    out = prim.reference(*targs, **kwargs)
    grads = iter(torch.autograd.grad(out, leaves, grad_out, allow_unused=True)
                 if out.requires_grad else [None] * len(leaves))

    def take(v):
        return next(grads) if isinstance(v, torch.Tensor) and v.requires_grad else None
    return [[take(x) for x in a] if isinstance(a, list) else take(a) for a in targs]


def _assert_grad_close(ours, theirs, where):
    if isinstance(theirs, list):
        for i, (o, t) in enumerate(zip(ours, theirs)):
            _assert_grad_close(o, t, f"{where}[{i}]")
        return
    if theirs is None or not theirs.abs().sum():  # torch: no gradient (or all zero)
        assert ours is None or not ours.abs().sum(), f"{where}: expected no gradient"
        return
    assert ours is not None, f"{where}: our VJP gave no gradient, torch has one"
    torch.testing.assert_close(ours, theirs.to(ours.dtype), **TOL, msg=lambda m: f"{where}: {m}")


ALL = list(PRIMS)
DIFFERENTIABLE = [n for n in ALL if PRIMS[n].vjp is not None and n != "full"]


def test_table_declares_every_required_prim():
    required = """add sub mul div neg pow exp log sqrt rsqrt abs sin cos tanh sigmoid relu erf
        maximum minimum where eq ne lt le gt ge convert_element_type sum amax mean var reshape
        permute expand squeeze unsqueeze slice index_select cat matmul convolution""".split()
    missing = [n for n in required if n not in PRIMS]
    assert not missing, f"missing prims: {missing}"
    for name, prim in PRIMS.items():
        assert prim.kind in ("pointwise", "reduction", "view", "factory", "extern"), name
        assert getattr(prims, name) is prim and prim.__name__ == name
        assert getattr(ops, name) is prim
        if prim.is_pointwise:
            assert prim.triton and prim.cpp, f"{name} needs Triton and C++ spellings"
    assert {PRIMS[n].kind for n in ("matmul", "convolution")} == {"extern"}


@pytest.mark.parametrize("name", ALL)
@SETTINGS
@given(data=st.data())
def test_shape_rule_matches_reference(name, data):
    prim = PRIMS[name]
    args, kwargs = sample(name, data)
    out = prim.reference(*args, **kwargs)
    shape, dtype = prim.meta(*args, **kwargs)
    assert tuple(shape) == tuple(out.shape), f"{name}: rule says {shape}, torch {out.shape}"
    assert dtype == out.dtype, f"{name}: rule says {dtype}, torch {out.dtype}"


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@SETTINGS
@given(data=st.data())
def test_vjp_matches_torch_autograd(name, data):
    prim = PRIMS[name]
    args, kwargs = sample(name, data)
    out = prim.reference(*args, **kwargs)
    if not out.dtype.is_floating_point:  # comparisons: piecewise constant, no gradient
        ours = vjp(prim, torch.ones(out.shape, dtype=F64), out, args, kwargs)
        assert all(g is None for g in ours), f"{name} should pass no gradient"
        return
    grad_out = torch.randn(out.shape, dtype=out.dtype, generator=_seed(data))
    ours = vjp(prim, grad_out, out, args, kwargs)
    theirs = _torch_grads(prim, args, kwargs, grad_out)
    for i, (o, t) in enumerate(zip(ours, theirs)):
        _assert_grad_close(o, t, f"{name} argument {i}")


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_graph_handler_records_one_node_per_call(name, data):
    prim = PRIMS[name]
    args, kwargs = sample(name, data)
    expected = prim.reference(*args, **kwargs)
    handler = GraphHandler()
    inputs, values = [], []

    def as_value(v):
        if isinstance(v, torch.Tensor):
            inputs.append(v)
            return handler.placeholder(f"t{len(inputs)}", v)
        return v
    gargs = [[as_value(x) for x in a] if isinstance(a, list) else as_value(a) for a in args]
    with set_handler(handler):
        result = prim(*gargs, **kwargs)
    values.append(result)
    assert tuple(result.shape) == tuple(expected.shape) and result.dtype == expected.dtype
    graph = handler.output(result)
    graph.lint()
    assert [n.target for n in graph.nodes if n.op == "call_function"] == [prim]
    gm = GraphModule({}, graph)
    assert f"prims.{name}(" in gm.code
    torch.testing.assert_close(gm(*inputs), expected, rtol=0, atol=0)


def _as_function(prim, args, kwargs):
    """A torch.autograd.Function whose backward is OUR VJP rule, for gradcheck."""
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)
                 and a.dtype.is_floating_point]

    class PrimFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *tensors):
            full = list(args)
            for i, t in zip(positions, tensors):
                full[i] = t
            out = prim.reference(*full, **kwargs)
            ctx.save_for_backward(*tensors, out)
            return out

        @staticmethod
        def backward(ctx, grad):
            *tensors, out = ctx.saved_tensors
            full = list(args)
            for i, t in zip(positions, tensors):
                full[i] = t
            grads = vjp(prim, grad, out, full, kwargs)
            return tuple(grads[i] for i in positions)
    return PrimFn.apply, [args[i].detach().clone().requires_grad_() for i in positions]


@pytest.mark.parametrize("name", ["tanh", "div", "pow", "var", "amax", "matmul", "convolution",
                                  "index_select", "slice", "sigmoid", "rsqrt", "erf", "mean"])
@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_gradcheck_against_finite_differences(name, data):
    args, kwargs = sample(name, data)
    fn, inputs = _as_function(PRIMS[name], args, kwargs)
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-5)


@SETTINGS
@given(data=st.data())
def test_sum_to_shape_undoes_broadcasting(data):
    shape = _shape(data)
    small = _broadcast_partner(data, shape)
    g = torch.randn(shape, dtype=F64)
    x = torch.zeros(small, dtype=F64, requires_grad=True)
    (expected,) = torch.autograd.grad(x.expand(shape), x, g)
    torch.testing.assert_close(sum_to_shape(g, small), expected, **TOL)


def test_prims_print_as_prims_in_generated_code():
    graph = trace(lambda x, y: ops.relu(ops.add(x, y)), torch.randn(2, 3), torch.randn(3))
    code = GraphModule({}, graph).code
    assert "prims.add(x, y)" in code and "prims.relu(add)" in code


def test_shape_rules_give_clear_errors():
    with pytest.raises(ValueError, match="cannot be broadcast"):
        prims.add.meta(torch.empty(2, 3), torch.empty(4))
    with pytest.raises(ValueError, match="inner sizes differ"):
        prims.matmul.meta(torch.empty(2, 3), torch.empty(4, 5))
    with pytest.raises(TypeError, match="floating point"):
        prims.mean.meta(torch.empty(3, dtype=torch.int64))
    with pytest.raises(ValueError, match="has 8 elements"):
        prims.reshape.meta(torch.empty(2, 3), (4, 2))


def test_type_promotion_follows_pytorch():
    i = torch.ones(3, dtype=torch.int32)
    f = torch.ones(3)
    zero64, zero_i8 = torch.tensor(1.0, dtype=F64), torch.tensor(1, dtype=torch.int8)
    for args in [(i, 0.5), (i, 2), (f, 2.0), (i, f), (f, torch.ones(3, dtype=F64)),
                 (torch.ones(3, dtype=torch.bool), 1), (f, zero64), (i, zero64),
                 (zero64, zero_i8), (zero_i8, 2.5), (zero_i8, 300), (i, zero_i8),
                 (torch.ones(3, dtype=torch.bool), True), (torch.ones(3, dtype=torch.float16), 2.0),
                 (torch.ones(3, dtype=torch.int16), torch.tensor(True))]:
        assert prims.add.meta(*args)[1] == torch.add(*args).dtype, args
    assert prims.div.meta(i, 2)[1] == torch.div(i, 2).dtype
    assert prims.exp.meta(i)[1] == torch.exp(i).dtype
    assert prims.sum.meta(i)[1] == torch.sum(i).dtype


def test_kernel_spellings_render_every_pointwise_prim():
    for language in ("triton", "cpp"):
        with set_handler(KernelSpellingHandler(language)):
            for prim in PRIMS.values():
                if not prim.is_pointwise:
                    continue
                if prim.name == "convert_element_type":
                    text = prim("x", torch.float16)
                    assert text == ("x.to(tl.float16)" if language == "triton"
                                    else "static_cast<at::Half>(x)")
                    continue
                n = prim.triton.count("{") - prim.triton.count("{{")
                arity = len({f"{{{i}}}" for i in range(3) if f"{{{i}}}" in prim.triton})
                assert arity and n >= arity
                text = prim(*["x", "y", "z"][:arity])
                assert "{" not in text and "x" in text, (prim.name, text)
            assert ops.tanh(ops.add("x", 1.0)) == (
                "(2 * tl.sigmoid(2 * (x + 1.0)) - 1)" if language == "triton"
                else "std::tanh((x + 1.0))")
            with pytest.raises(NotImplementedError, match="reduction"):
                ops.sum("x")


def test_triton_spellings_avoid_libdevice():
    # FACTS.md: libdevice externs fail under TRITON_INTERPRET=1
    for prim in PRIMS.values():
        if prim.is_pointwise:
            assert "libdevice" not in prim.triton and "tl.math.tanh" not in prim.triton


def test_no_vjp_prims_say_so():
    args, kwargs = (torch.randn(2, 4, 3, 3), torch.randn(4, 2, 3, 3), (2, 2, 5, 5)), {}
    out = prims.convolution_backward_input(*args)
    with pytest.raises(NotImplementedError, match="no VJP rule"):
        vjp(prims.convolution_backward_input, out, out, args, kwargs)


def test_adding_a_prim_is_one_entry():
    """One register() call makes a prim work eagerly, in graphs, in backward graphs and on
    the tape."""
    from tutorcompile.autograd import tensor
    from tutorcompile.ops.prims import register
    from tutorcompile.ops.table import float_meta
    softplus = register("softplus_for_test", "pointwise", torch.nn.functional.softplus,
                        float_meta, vjp=lambda g, out, a: (ops.mul(g, ops.sigmoid(a)),),
                        triton="tl.log(1 + tl.exp({0}))", cpp="std::log1p(std::exp({0}))")
    try:
        x = torch.randn(5, dtype=F64)
        xt = x.clone().requires_grad_()
        torch.nn.functional.softplus(xt).sum().backward()
        torch.testing.assert_close(softplus(x), torch.nn.functional.softplus(x))
        graph = trace(lambda a: ops.sum(ops.softplus_for_test(a)), x)
        assert "prims.softplus_for_test(a)" in GraphModule({}, graph).code
        (gx,) = GraphModule({}, backward_graph(graph))(x, torch.tensor(1.0, dtype=F64))
        torch.testing.assert_close(gx, xt.grad)
        t = tensor(x, requires_grad=True)
        prims.softplus_for_test(t).sum().backward()
        torch.testing.assert_close(t.grad, xt.grad)
    finally:
        PRIMS.pop("softplus_for_test")
        delattr(prims, "softplus_for_test")


def test_is_tensor_like():
    assert is_tensor_like(torch.ones(1)) and not is_tensor_like(1.0) and not is_tensor_like(None)
