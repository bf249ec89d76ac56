"""The check shared by the capture corpora (``test_stage3_idioms``, ``_builtins``,
``_higher_order``): a function compiled with ``fullgraph=True`` gives eager's outputs and the
gradients of their sum, and ``tc.explain`` counts one graph and no break."""

import contextlib
import math

import torch

import tutorcompile as tc


def _tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def _leaves(args):
    """The inputs with their own gradient: floating tensors, and modules' parameters."""
    leaves = []
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            leaves.append(a.requires_grad_())
        elif isinstance(a, torch.nn.Module):
            leaves += list(a.parameters())
    return leaves


def run_with_gradients(fn, args, gradients=True):
    """Outputs (tensors, then everything else) and the gradients of their sum (none when
    ``gradients`` is false: no input then requires grad)."""
    leaves = _leaves(args) if gradients else []
    out = fn(*args)
    tensors = _tensors(out)
    loss = sum(t.float().sum() for t in tensors if t.requires_grad)
    grads = torch.autograd.grad(loss, leaves, allow_unused=True) if torch.is_tensor(
        loss) else ()
    others = [v for v in (out if isinstance(out, tuple) else (out,))
              if not isinstance(v, torch.Tensor)]
    return tensors, grads, others


def check_one_graph(fn, make_inputs, backend, *, gradients=True, **tolerance):
    """``fn`` compiled whole (a break raises) equals eager on fresh inputs of the same seed:
    outputs, whether they require grad, gradients (None exactly where eager has none, and
    not asked for when ``gradients`` is false), the values it returns besides tensors; and
    it is one graph with no break."""
    def make():
        torch.manual_seed(0)
        return make_inputs()
    tc.reset()
    expected = run_with_gradients(fn, make(), gradients)
    got = run_with_gradients(tc.compile(fn, backend=backend, fullgraph=True), make(),
                             gradients)
    for a, b in zip(expected[0], got[0], strict=True):
        torch.testing.assert_close(b, a, **tolerance)
        assert b.requires_grad == a.requires_grad
    for a, b in zip(expected[1], got[1], strict=True):
        if a is None or b is None:
            assert a is None and b is None
        else:
            torch.testing.assert_close(b, a, **tolerance)
    assert got[2] == expected[2]  # side effects seen by the function, in CPython's order
    explained = tc.explain(fn)(*make())
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)


def checks_then_computes(x):
    """Argument checks that raise (``test_stage3_assumptions``). It lives here because
    pytest rewrites the ``assert`` statements of test modules into other bytecode."""
    if (x < -5).any():
        raise ValueError(f"too small: {x.min()}")
    assert x.abs().max() < 100, "too large"
    return x.tanh() * 2


def writes_its_own_tensor_then_checks(x):
    """A check after writes into tensors the function made (piq builds its Haar filter
    with ``kernel[k // 2:] = -kernel[k // 2:]``): running the frame again makes them again,
    so the check is an assumption (``test_stage3_assumptions``)."""
    kernel = torch.ones(2, 2) / 2
    kernel[1:, :] = -kernel[1:, :]
    scratch = x.detach().clone()
    scratch.mul_(2)
    torch.add(scratch, 1, out=scratch)
    assert x.abs().max() < 100, "too large"
    return (x * kernel.sum() + scratch + kernel[0, 0]).tanh()


def _monotone(name, t):
    diff = t[1:] > t[:-1]
    assert diff.all() or (~diff).all(), f"{name} must be strictly increasing or decreasing"


def checks_either_direction(x, t):
    """``assert a or b`` on tensors in a called helper (torchdiffeq's check of its time
    grid): one checked assumption, ``a | b`` (``test_stage3_assumptions``)."""
    _monotone("t", t)
    return x * t.sum()


CALLS = []


def _counted_check(x):
    CALLS.append(1)
    return (x < 100).all()


def an_or_whose_second_operand_writes(x):
    """The second operand of ``assert a or b`` appends to a list: eager appends only when
    ``a`` is false, so the trace cannot take it for granted (``test_stage3_assumptions``)."""
    assert (x > 0).all() or _counted_check(x), "out of range"
    return x * 2


# --- a graph break inside a function a context manager decorates (probe-11: an optimizer's
# ``@torch.no_grad()`` step). The break happens inside torch's or contextlib's wrapper
# (``with cm: return func(*args)``); the function itself is then compiled as a frame of its
# own, the region entered for real -- not run uncompiled with its wrapper. These live here:
# they are not test modules, so pytest leaves their bytecode alone.
def _breaks_inside(x):
    y = x * 2
    scale = math.sqrt(y.abs().sum())   # a tensor's value in Python: a graph break
    return y.sin() * scale


def _enter_and_leave():
    @contextlib.contextmanager
    def region():
        yield
    return region()


CONTEXT_DECORATED = {
    "no_grad": torch.no_grad()(_breaks_inside),
    "enable_grad": torch.enable_grad()(_breaks_inside),
    "set_grad_enabled": torch.set_grad_enabled(False)(_breaks_inside),
    "autocast_disabled": torch.autocast("cpu", enabled=False)(_breaks_inside),
    "contextmanager": _enter_and_leave()(_breaks_inside),
}


def calls_a_context_decorated_function(x, name):
    return CONTEXT_DECORATED[name](x + 1) + 1


class SqrtNormalizedSGD(torch.optim.Optimizer):
    """An optimizer whose ``@torch.no_grad()`` step reads a tensor's value in Python
    (Ranger21 normalises by ``math.sqrt`` of its variance sum so)."""

    def __init__(self, params, lr=0.1):
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self):
        total = sum(p.grad.pow(2).sum() for g in self.param_groups for p in g["params"])
        scale = 1.0 / math.sqrt(total)
        for group in self.param_groups:
            for p in group["params"]:
                p.add_(p.grad * p.grad.sign(), alpha=-group["lr"] * scale)


# --- torch.compiler.allow_in_graph (probe-11: einx marks each of its ops so) ---------------
# A marked function is one node of the graph, never traced into: these read ``id()`` of a
# tensor and print, which tracing into would break on.
def _scaled_by_a_table(x, k):
    table = {id(x): k}
    return x * table[id(x)] + x.sin()


scaled_by_a_table = torch.compiler.allow_in_graph(_scaled_by_a_table)


@torch._dynamo.allow_in_graph
def summed_by_name(tensors, how="sum"):
    print(end="")
    out = tensors[0]
    for t in tensors[1:]:
        out = out + t if how == "sum" else out * t
    return out


@torch._dynamo.allow_in_graph
def split_in_two(x):
    return x[:1] * 2, x[1:]


def uses_marked_functions(x, y):
    a = scaled_by_a_table(x * 2, 3.0)
    b = summed_by_name([a, y, y.cos()], how="prod")
    return summed_by_name((a, b)) + _scaled_by_a_table.__name__.count("_")


def uses_a_marked_function_returning_a_tuple(x):
    head, tail = split_in_two(x + 1)
    return head.sum() + tail.sum()
