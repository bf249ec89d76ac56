"""Stage 3: ``tc.compile(optimizer.step)`` -- torch.optim's own Python, captured.

An optimizer step is Python over tensors: ``_use_grad`` sets the grad mode, ``step`` reads
``self.state[p]`` (a dict keyed by the parameters), and the update itself is per-parameter
tensor methods (``_single_tensor_adam``) or ``torch._foreach_*`` calls over lists. Each
optimizer here, with its state already made, is one graph with no break (``_use_grad``'s
``torch.set_grad_enabled(False)`` statement, and the one that puts the mode back, are traced;
its ``torch._dynamo.graph_break()`` calls are torch.compile's, not ours), and after
three steps under every backend the parameters and the state equal eager's. The pieces it
needed are checked on small programs of their own: dicts keyed by tensors, ``out=``
arguments through functionalization, ``addcdiv`` with a tensor ``value``, profiler ranges.
"""

import pytest
import torch
import torch.nn as nn

import tutorcompile as tc

pytestmark = [pytest.mark.stage3, pytest.mark.usefixtures("fresh_compiler")]

BACKENDS = ["eager", "aot_eager", "inductor"]

OPTIMIZERS = {
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    "sgd_nesterov_weight_decay": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9,
                                                           nesterov=True, weight_decay=0.01),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01),
    "adam_amsgrad": lambda p: torch.optim.Adam(p, lr=0.01, amsgrad=True),
    "adamw_per_parameter": lambda p: torch.optim.AdamW(p, lr=0.01, foreach=False),
    "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=0.01, foreach=True),
    "rmsprop": lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.5),
    "adagrad": lambda p: torch.optim.Adagrad(p, lr=0.01),
}


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _train(kind, step_of, scheduled=False, steps=3):
    model = _model()
    opt = OPTIMIZERS[kind](model.parameters())
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5) if scheduled \
        else None
    step = step_of(opt)
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    for _ in range(steps):
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        step()
        if sched is not None:
            sched.step()
    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]
    return [p.detach() for p in model.parameters()] + state


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", OPTIMIZERS)
def test_a_compiled_step_updates_parameters_and_state_as_eager(kind, backend):
    want = _train(kind, lambda opt: opt.step)
    got = _train(kind, lambda opt: tc.compile(opt.step, backend=backend))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        # while compiling, torch.optim keeps the step count a tensor (``_get_value``):
        # the bias corrections round as float32 tensor math instead of Python floats
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", OPTIMIZERS)
def test_a_step_with_its_state_made_is_one_graph(kind):
    model = _model()
    opt = OPTIMIZERS[kind](model.parameters())
    model(torch.randn(2, 8)).sum().backward()
    opt.step()     # the state exists: what every later step sees
    explained = tc.explain(opt.step)()
    assert explained.graph_count == 1, explained
    assert not explained.break_reasons, [r.reason for r in explained.break_reasons]
    assert torch.is_grad_enabled()     # _use_grad's last statement, replayed after the graph


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_an_lr_scheduler_between_compiled_steps(backend):
    want = _train("sgd_momentum", lambda opt: opt.step, scheduled=True)
    got = _train("sgd_momentum", lambda opt: tc.compile(opt.step, backend=backend),
                 scheduled=True)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


def test_a_graph_reused_for_a_new_optimizer_keys_the_state_by_its_own_parameters():
    """The second optimizer's steps hit the graphs the first one compiled (same code, same
    shapes): its state must be keyed by its own parameters, and its values its own."""
    for _ in range(2):
        want = _train("sgd_momentum", lambda opt: opt.step)
        model = _model()
        opt = OPTIMIZERS["sgd_momentum"](model.parameters())
        step = tc.compile(opt.step, backend="aot_eager")
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
        for _ in range(3):
            opt.zero_grad()
            model(x).pow(2).sum().backward()
            step()
        assert {id(p) for p in opt.state} == {id(p) for p in model.parameters()}
        for p, w in zip(model.parameters(), want):
            torch.testing.assert_close(p.detach(), w, rtol=1e-5, atol=1e-6)


# --- the pieces, on programs of their own ----------------------------------------------
def test_a_dict_keyed_by_tensors_is_read_one_key_at_a_time():
    a, b = torch.randn(3), torch.randn(3)
    scales = {a: 2.0, b: torch.full((3,), 3.0)}

    def reads(x, y):
        return x * scales[x] + y * scales.get(y, 0), x in scales
    explained = tc.explain(reads)(a, b)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    got, want = tc.compile(reads, backend="eager", fullgraph=True)(a, b), reads(a, b)
    torch.testing.assert_close(got[0], want[0])
    assert got[1:] == want[1:]

    def writes(x):
        scales[x] = 5.0
        return x * 2
    explained = tc.explain(writes)(a)
    assert any("dict keyed by tensors" in r.reason for r in explained.break_reasons)
    torch.testing.assert_close(tc.compile(writes)(a), a * 2)
    assert scales[a] == 5.0


def test_a_missing_tensor_key_raises_key_error_and_a_defaultdict_fills_it():
    import collections
    t = torch.randn(2)
    plain, default = {}, collections.defaultdict(dict)

    def reads(x):
        return plain[x]

    def fills(x):
        default[x]["n"] = x + 1
        return x * 2
    with pytest.raises(KeyError):
        tc.compile(reads, backend="eager")(t)
    torch.testing.assert_close(tc.compile(fills, backend="eager")(t), t * 2)
    torch.testing.assert_close(default[t]["n"], t + 1)


def test_a_key_the_graph_computes_is_a_break():
    d = {}

    def fn(x):
        y = x + 1
        d[y] = 1
        return y
    explained = tc.explain(fn)(torch.randn(2))
    assert any("keyed by a tensor the graph computes" in r.reason
               for r in explained.break_reasons)


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_arguments_become_writes_of_the_out_tensor(backend):
    def fn(a, b, m):
        torch.maximum(m, a * b, out=m)
        return torch.add(a, b, out=torch.empty_like(a)) + m
    a, b = torch.randn(5), torch.randn(5)
    m1, m2 = torch.zeros(5), torch.zeros(5)
    want = fn(a, b, m1)
    torch.testing.assert_close(tc.compile(fn, backend=backend)(a, b, m2), want)
    torch.testing.assert_close(m2, m1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_addcdiv_and_addcmul_with_a_tensor_value(backend):
    def fn(p, a, b, v):
        q = torch.addcmul(p, a, b, value=v)
        p = p.clone()
        p.addcdiv_(a, b.abs() + 1, value=-v)
        return p + q
    args = [torch.randn(4) for _ in range(3)] + [torch.tensor(0.3)]
    explained = tc.explain(fn)(*args)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    torch.testing.assert_close(tc.compile(fn, backend=backend)(*args), fn(*args))


def test_a_profiler_range_in_user_code_is_no_break():
    def fn(x):
        with torch.autograd.profiler.record_function("my block"):
            y = x.sin()
        return y * 2
    explained = tc.explain(fn)(torch.randn(3))
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    x = torch.randn(3)
    torch.testing.assert_close(tc.compile(fn)(x), fn(x))


def test_grouping_tensors_by_device_and_dtype_is_traced_from_metadata():
    # third-party foreach optimizers (pytorch_optimizer) call torch's grouping helper
    # directly: a dict of lists, computed from each tensor's device and dtype
    from torch.utils._foreach_utils import _group_tensors_by_device_and_dtype

    def grouped(a, b, c):
        groups = _group_tensors_by_device_and_dtype([[a, b, c], [c, None, a]],
                                                    with_indices=True)
        out = [sum(t.sum() for t in lists[0]) * len(indices)
               for lists, indices in groups.values()]
        return out, [key for key in groups]

    args = (torch.randn(3), torch.randn(2, dtype=torch.float64), torch.randn(4))
    tc.reset()
    got = tc.compile(grouped, backend="eager", fullgraph=True)(*args)
    want = grouped(*args)
    assert sorted(got[1], key=str) == sorted(want[1], key=str)
    for key in want[1]:
        torch.testing.assert_close(got[0][got[1].index(key)], want[0][want[1].index(key)])


_WRITES = []


class _LoggedDict(dict):
    def __setitem__(self, key, value):
        _WRITES.append(key)
        super().__setitem__(key, value)


def _put_back(x, state):
    buf = state["momentum"]
    buf.mul_(0.5)
    state["momentum"] = buf       # the object already there: the dict does not change
    return x + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_putting_back_the_object_a_dict_holds_is_no_write(backend):
    """An optimizer puts each momentum buffer back into its state every step. Writing the
    value a dict already holds changes nothing, so it is no write to replay after the
    graph and no guard on the dict's other keys: a key added later compiles nothing new.
    A dict subclass's own ``__setitem__`` still runs, every call."""
    made = []

    def counting(gm, example_inputs):
        made.append(gm)
        return tc.compile(gm, backend=backend) if backend != "eager" else gm
    compiled = tc.compile(_put_back, backend=counting, fullgraph=True)
    x, buf = torch.randn(3), torch.ones(3)
    state = {"momentum": buf, "lr": 0.1}
    torch.testing.assert_close(compiled(x, state), x + 1)
    state["step"] = 1
    torch.testing.assert_close(compiled(x, state), x + 1)
    assert state["momentum"] is buf and torch.equal(buf, torch.full((3,), 0.25))
    assert len(made) == 1
    logged = _LoggedDict(momentum=torch.ones(3))
    _WRITES.clear()
    compiled(x, logged)
    compiled(x, logged)
    assert _WRITES == ["momentum", "momentum"]
    assert torch.equal(logged["momentum"], torch.full((3,), 0.25))


def test_a_function_no_gradient_leaves_compiles_as_inference():
    """Parameters require grad, but the step writes them under ``no_grad`` and returns
    nothing a gradient flows to: AOT finds no tangent in the joint graph and compiles an
    inference graph (no autograd.Function per call), whose write of the parameter is its
    new values. Returning the parameter itself keeps the joint graph: its gradient flows."""
    from tutorcompile.aot import aot_graph

    def sgd(p, g):
        with torch.no_grad():
            p.sub_(0.1 * g)

    def sgd_and_return(p, g):
        with torch.no_grad():
            p.sub_(0.1 * g)
        return p * 2

    p, g = torch.randn(5, requires_grad=True), torch.randn(5)
    want = p.detach() - 0.1 * g
    made = []

    def aot(gm, example_inputs):
        made.append(aot_graph(gm))
        return made[-1]
    tc.compile(sgd, backend=aot)(p, g)
    art = made[0].artifacts
    assert art.joint is None and art.grad_off
    assert "write_through_detach" not in str(art.prim_graph)
    torch.testing.assert_close(p.detach(), want)
    assert p.is_leaf and p.requires_grad and p.grad is None

    q = torch.randn(5, requires_grad=True)
    tc.compile(sgd_and_return, backend="aot_eager")(q, g).sum().backward()
    torch.testing.assert_close(q.grad, torch.full((5,), 2.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_of_place_foreach_ops_with_a_tensor_scalar(backend):
    """``torch._foreach_add(xs, lr)``: the fake kernel asks the tensor scalar for its value
    (a break, "output depends on tensor data"); its per-tensor calls give the shapes."""
    def fn(xs, ys, lr):
        zs = torch._foreach_add(xs, lr)
        zs = torch._foreach_mul(zs, lr)
        ws = torch._foreach_addcmul(zs, xs, ys, value=0.5)
        torch._foreach_add_(xs, lr)
        return torch._foreach_maximum(ws, 0.1), xs

    def args():
        g = torch.Generator().manual_seed(0)
        return ([torch.randn(3, generator=g), torch.randn(2, 4, generator=g)],
                [torch.randn(3, generator=g), torch.randn(2, 4, generator=g)],
                torch.tensor(0.3))
    explained = tc.explain(fn)(*args())
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    torch.testing.assert_close(tc.compile(fn, backend=backend)(*args()), fn(*args()))


def test_a_step_wrapped_by_an_lr_scheduler_is_compiled_from_a_training_step():
    # the scheduler replaces ``opt.step`` by a wrapper that takes no argument and reaches
    # the optimizer through a weak reference in its closure: a frame holding neither a
    # tensor nor a torch module would run as plain Python -- and so would the step it calls
    model = _model()
    opt = OPTIMIZERS["sgd_momentum"](model.parameters())
    model(torch.randn(2, 8)).sum().backward()
    opt.step()
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    def train_step():
        opt.step()
        sched.step()

    explained = tc.explain(train_step)()
    assert explained.graph_count == 1 and explained.op_count > 0, explained
    want = _train("sgd_momentum", lambda opt: opt.step, scheduled=True)
    got = _train("sgd_momentum", lambda opt: tc.compile(lambda: opt.step()), scheduled=True)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)

