"""Stage 1: the tape autograd (Tensor) and the scalar warm-up (Value), against torch.autograd.

Semantics checked: gradient accumulation for reused values and across backward calls,
no_grad, leaf vs non-leaf (.grad kept only for leaves unless retain_grad), freeing the tape,
error messages; and a small MLP trained with our tape matching one trained with torch.
Tolerances: float64 rtol/atol 1e-7 unless stated.
"""

from __future__ import annotations

import pytest
import torch

import tutorcompile.autograd as ag
from tutorcompile.ops import prims

pytestmark = pytest.mark.stage1

F64 = torch.float64
TOL = dict(rtol=1e-7, atol=1e-7)


def pair(*shape, positive=False):
    """The same data as our leaf Tensor and as a torch leaf tensor."""
    data = torch.randn(shape, dtype=F64)
    if positive:
        data = data.abs() + 0.5
    return ag.tensor(data, requires_grad=True), data.clone().requires_grad_()


def test_value_matches_torch_on_scalars():
    a, b = ag.Value(0.7, label="a"), ag.Value(-1.3, label="b")
    out = ((a * b + a.tanh()) ** 2 / (b.exp() + 1.0) - a.sigmoid() + (a - b).relu()
           + (a * a).log())
    out.backward()
    ta = torch.tensor(0.7, dtype=F64, requires_grad=True)
    tb = torch.tensor(-1.3, dtype=F64, requires_grad=True)
    tout = ((ta * tb + ta.tanh()) ** 2 / (tb.exp() + 1.0) - ta.sigmoid() + (ta - tb).relu()
            + (ta * ta).log())
    tout.backward()
    assert out.data == pytest.approx(tout.item(), rel=1e-12)
    assert a.grad == pytest.approx(ta.grad.item(), rel=1e-10)
    assert b.grad == pytest.approx(tb.grad.item(), rel=1e-10)


def test_value_reuse_accumulates():
    x = ag.Value(3.0)
    y = x * x + x  # dy/dx = 2x + 1
    y.backward()
    assert x.grad == 7.0


def test_tensor_matches_torch_on_an_expression_with_broadcasting():
    x, tx = pair(4, 3)
    w, tw = pair(3, 5)
    b, tb = pair(5)
    s, ts = pair(4, 1, positive=True)
    out = (((x @ w + b).tanh() * s.sqrt()).sigmoid() / (1.0 + s)).sum()
    tout = (((tx @ tw + tb).tanh() * ts.sqrt()).sigmoid() / (1.0 + ts)).sum()
    out.backward()
    tout.backward()
    torch.testing.assert_close(out.data, tout.detach(), **TOL)
    for ours, theirs in [(x, tx), (w, tw), (b, tb), (s, ts)]:
        torch.testing.assert_close(ours.grad, theirs.grad, **TOL)


def test_reused_value_accumulates_gradients():
    x, tx = pair(3)
    y = x * x * x + x.exp() * x  # x used four times
    (tx * tx * tx + tx.exp() * tx).sum().backward()
    y.sum().backward()
    torch.testing.assert_close(x.grad, tx.grad, **TOL)


def test_grad_accumulates_across_backward_calls():
    x, tx = pair(3)
    for _ in range(2):
        (x * 2.0).sum().backward()
        (tx * 2.0).sum().backward()
    torch.testing.assert_close(x.grad, tx.grad)
    torch.testing.assert_close(x.grad, torch.full((3,), 4.0, dtype=F64))


def test_leaf_and_non_leaf():
    x, _ = pair(3)
    c = ag.tensor([1.0, 2.0, 3.0])
    assert x.is_leaf and c.is_leaf and not c.requires_grad
    y = x * 2.0
    z = y.sin()
    assert not y.is_leaf and y.requires_grad and y.grad_fn is not None
    assert repr(y.grad_fn) == "<MulBackward>"
    y.retain_grad()
    z.sum().backward()
    assert z.grad is None, "a non-leaf keeps no .grad without retain_grad()"
    torch.testing.assert_close(y.grad, y.data.cos(), **TOL)
    torch.testing.assert_close(x.grad, 2.0 * y.data.cos(), **TOL)
    assert c.grad is None


def test_constants_do_not_get_gradients():
    x, _ = pair(3)
    c = ag.tensor(torch.ones(3, dtype=F64))
    (x * c).sum().backward()
    assert c.grad is None and x.grad is not None


def test_no_grad_records_nothing():
    x, _ = pair(3)
    with ag.no_grad():
        assert not ag.is_grad_enabled()
        y = x * 2.0
    assert ag.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf

    @ag.no_grad()
    def step():
        return x.exp()
    assert step().grad_fn is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.sum().backward()


def test_detach_cuts_the_tape():
    x, _ = pair(3)
    y = (x * 3.0).detach()
    (y * x).sum().backward()
    torch.testing.assert_close(x.grad, y.data)


def test_second_backward_needs_retain_graph():
    x, tx = pair(3)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    ty = (tx.exp() * tx).sum()
    ty.backward(retain_graph=True)
    ty.backward()
    torch.testing.assert_close(x.grad, tx.grad, **TOL)
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_backward_with_explicit_gradient_and_errors():
    x, tx = pair(2, 3)
    g = torch.randn(2, 3, dtype=F64)
    (x * x).backward(g)
    (tx * tx).backward(g)
    torch.testing.assert_close(x.grad, tx.grad, **TOL)
    with pytest.raises(RuntimeError, match="one element"):
        (x * x).backward()
    with pytest.raises(RuntimeError, match="floating point"):
        ag.tensor([1, 2], requires_grad=True)


def test_indexing_cat_and_reductions():
    x, tx = pair(4, 5)
    y, ty = pair(2, 5)
    out = ag.cat([x[1:3], y, x[-1:]], 0)
    tout = torch.cat([tx[1:3], ty, tx[-1:]], 0)
    loss = (out.amax(1) + out.mean(0, keepdim=True).sum() + out.var(1).sum() + x[0, 2]).sum()
    tloss = (tout.amax(1) + tout.mean(0, keepdim=True).sum() + tout.var(1).sum()
             + tx[0, 2]).sum()
    loss.backward()
    tloss.backward()
    torch.testing.assert_close(loss.data, tloss.detach(), **TOL)
    torch.testing.assert_close(x.grad, tx.grad, **TOL)
    torch.testing.assert_close(y.grad, ty.grad, **TOL)


def test_integer_tensor_indexing():
    x, tx = pair(5, 3)
    idx = torch.tensor([4, 0, 4])
    (x[idx, 1:] * x[ag.tensor(idx)][:, :2]).sum().backward()
    (tx[idx, 1:] * tx[idx][:, :2]).sum().backward()
    torch.testing.assert_close(x.grad, tx.grad, **TOL)


def test_views_and_where():
    x, tx = pair(2, 3, 4)
    out = ag.where(x > 0.0, x.permute(0, 2, 1).reshape(2, 3, 4), x.unsqueeze(0).squeeze(0) ** 2)
    tout = torch.where(tx > 0.0, tx.permute(0, 2, 1).reshape(2, 3, 4),
                       tx.unsqueeze(0).squeeze(0) ** 2)
    (out * out.transpose(0, 2).T).sum().backward()
    (tout * tout.transpose(0, 2).permute(2, 1, 0)).sum().backward()
    torch.testing.assert_close(x.grad, tx.grad, **TOL)


def test_prims_called_on_tensors_record_the_tape():
    x, tx = pair(3)
    y = prims.erf(prims.mul(x, x))
    assert y.grad_fn is not None and y.grad_fn.prim is prims.erf
    y.sum().backward()
    torch.special.erf(tx * tx).sum().backward()
    torch.testing.assert_close(x.grad, tx.grad, **TOL)


def test_integer_results_do_not_require_grad():
    x, _ = pair(3)
    mask = x > 0.0
    assert mask.dtype == torch.bool and not mask.requires_grad
    assert ((x == x).data.all() and not (x != x).data.any()), "== is elementwise"
    assert len({x, x * 1.0}) == 2, "Tensors hash by identity"


def test_tape_runs_on_every_device(device):
    x = ag.tensor(torch.randn(4, 3, dtype=F64, device=device), requires_grad=True)
    w = ag.tensor(torch.randn(3, 2, dtype=F64, device=device), requires_grad=True)
    loss = ((x @ w).relu()[1:, :] * x[1:, :2]).amax(1).sum()
    loss.backward()
    tx, tw = x.data.clone().requires_grad_(), w.data.clone().requires_grad_()
    ((tx @ tw).relu()[1:, :] * tx[1:, :2]).amax(1).sum().backward()
    assert x.grad.device.type == device
    torch.testing.assert_close(x.grad, tx.grad, **TOL)
    torch.testing.assert_close(w.grad, tw.grad, **TOL)


def test_topological_order_puts_inputs_first():
    x, _ = pair(3)
    a = x.exp()
    b = a * x
    c = b + a
    order = ag.topological_order(c)
    pos = {id(t): i for i, t in enumerate(order)}
    assert len(order) == 4 and order[-1] is c
    for t in order:
        if t.grad_fn is not None:
            for i in t.grad_fn.inputs:
                assert pos[id(i)] < pos[id(t)]


def test_deep_graph_does_not_recurse():
    x, _ = pair(2)
    y = x
    for _ in range(3000):
        y = y * 1.0001
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((2,), 1.0001 ** 3000, dtype=F64), **TOL)


def test_tiny_mlp_trains_like_torch():
    torch.manual_seed(0)
    X = torch.randn(32, 3, dtype=F64)
    Y = (X[:, :1] * X[:, 1:2] - X[:, 2:]).tanh()
    shapes = [(3, 16), (16,), (16, 1), (1,)]
    init = [torch.randn(s, dtype=F64) * 0.5 for s in shapes]
    ours = [ag.tensor(p, requires_grad=True) for p in init]
    theirs = [p.clone().requires_grad_() for p in init]

    def loss_of(params, x, y):
        w1, b1, w2, b2 = params
        h = (x @ w1 + b1).relu()
        return ((h @ w2 + b2 - y) ** 2).mean()

    xs, ys = ag.tensor(X), ag.tensor(Y)
    first = None
    for _ in range(20):
        loss, tloss = loss_of(ours, xs, ys), loss_of(theirs, X, Y)
        torch.testing.assert_close(loss.data, tloss.detach(), **TOL)
        first = first if first is not None else loss.item()
        loss.backward()
        tloss.backward()
        with ag.no_grad(), torch.no_grad():
            for p, tp in zip(ours, theirs):
                torch.testing.assert_close(p.grad, tp.grad, **TOL)
                p.data -= 0.1 * p.grad
                tp -= 0.1 * tp.grad
                p.grad = None
                tp.grad = None
    assert loss.item() < 0.8 * first, "training did not reduce the loss"
