"""Module hooks: inlined into the graph where eager would call them, and guarded.

A compiled module inlines its submodules' ``forward``s, and with them their forward
pre-hooks and forward hooks (global ones first, with or without kwargs), as
``Module._call_impl`` calls them: transformers' gradient checkpointing registers one on the
input embeddings, and the model stays one graph. What the graph ran is guarded: a module
inlined without hooks stays so (one guard per frame: the count of hook handles ever made,
then the hook dicts themselves), and one with hooks keeps the very same hooks -- so a hook
registered or removed later recompiles. A submodule with backward hooks is a break; the
compiled module runs its own hooks around the compiled forward, and any module's with
them, its full backward hooks too (PyTorch's ``BackwardHook`` around the compiled forward).

``tensor.register_hook(hook)`` inside the traced code, on a tensor the graph computes, is in
the graph: the hook is traced into a body that changes the tensor's gradient in the
backward (every use of the tensor reads it, so the hook sees the whole gradient, as
autograd's does). A hook that writes outside itself or a kept handle is a break. On a
tensor from outside (an argument, a parameter) the hook outlives the call, as in eager: the
registration is made after the graph, with the hook rebuilt -- any hook, since it is not
traced.
"""

import functools
import warnings

import pytest
import torch
import torch.nn as nn

import tutorcompile as tc


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def _counting():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm
    return backend, graphs


@pytest.mark.parametrize("where", ["submodule", "compiled module"])
@pytest.mark.parametrize("kind", ["forward", "forward_pre", "forward_with_kwargs"])
def test_a_hook_registered_after_compiling_runs(where, kind):
    model = _model()
    compiled = tc.compile(model, backend="aot_eager")
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), model(x))
    target = model[0] if where == "submodule" else model
    if kind == "forward":
        handle = target.register_forward_hook(lambda m, args, out: out * 10)
    elif kind == "forward_pre":
        handle = target.register_forward_pre_hook(lambda m, args: (args[0] + 1,))
    else:
        handle = target.register_forward_hook(lambda m, args, kwargs, out: out - 2,
                                              with_kwargs=True)
    want = model(x)
    torch.testing.assert_close(compiled(x), want)
    handle.remove()
    torch.testing.assert_close(compiled(x), model(x))


def test_a_full_backward_hook_on_a_submodule_changes_the_gradients_as_in_eager():
    model = _model()
    compiled = tc.compile(model, backend="aot_eager")
    x = torch.randn(2, 4)
    compiled(x).sum().backward()
    model.zero_grad()
    model[2].register_full_backward_hook(lambda m, gin, gout: (gin[0] * 3,))
    model(x).sum().backward()
    want = model[0].weight.grad.clone()
    model.zero_grad()
    compiled(x).sum().backward()
    torch.testing.assert_close(model[0].weight.grad, want)


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)

    def forward(self, x):
        return self.a(x).tanh()


class _Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner, self.head = _Block(), nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.inner(x).sin())


@pytest.mark.parametrize("where", ["inner", "outer"])
@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_full_backward_hooks_run_around_a_compiled_forward(where, backend):
    """PyTorch's BackwardHook wraps the module's inputs and outputs; its forward, between
    them, is compiled -- the compiled module's own (one graph), or a submodule's (a break
    around it, its forward a graph of its own: two graphs, as in torch.compile). The hooks
    see and change the gradients at the boundary as in eager; the pre-hook runs first."""
    def run(compiler):
        torch.manual_seed(0)
        model, seen = _Outer(), []
        target = model.inner if where == "inner" else model
        target.register_full_backward_hook(
            lambda m, gin, gout: (seen.append((gin[0].shape, gout[0].shape)), (gin[0] * 2,))[1])
        target.register_full_backward_pre_hook(lambda m, gout: seen.append("pre"))
        x = torch.randn(3, 8, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error", tc.FallbackWarning)   # nothing runs uncompiled
            compiler(model)(x).sum().backward()
        return [x.grad] + [p.grad for p in model.parameters()], seen

    want, want_seen = run(lambda m: m)
    got, seen = run(lambda m: tc.compile(m, backend=backend))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    assert seen == want_seen and seen[0] == "pre"
    torch.manual_seed(0)
    model = _Outer()
    (model.inner if where == "inner" else model).register_full_backward_hook(
        lambda m, gin, gout: None)
    tc.reset()
    explanation = tc.explain(model)(torch.randn(3, 8))
    assert explanation.graph_count == (2 if where == "inner" else 1), explanation


def test_a_legacy_backward_hook_runs_the_module_uncompiled_and_says_so():
    model = _model()
    compiled = tc.compile(model)
    x = torch.randn(2, 4, requires_grad=True)
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # (PyTorch's own warning about the legacy hook)
        model.register_backward_hook(lambda m, gin, gout: seen.append(gout[0].shape))
    with pytest.warns(tc.FallbackWarning, match="register_backward_hook; it runs uncompiled"):
        compiled(x).sum().backward()
    assert seen == [torch.Size([2, 3])]


def test_hooks_made_elsewhere_cost_no_recompile():
    """Any hook registration moves the handle count; the modules' own dicts, still empty,
    keep the compiled entry."""
    backend, graphs = _counting()
    model = _model()
    compiled = tc.compile(model, backend=backend)
    x = torch.randn(2, 4)
    compiled(x)
    other = torch.randn(3, requires_grad=True)
    other.register_hook(lambda g: g)
    nn.Linear(2, 2).register_forward_hook(lambda *a: None)
    compiled(x)
    assert len(graphs) == 1


def test_the_guard_names_the_hooks():
    model = _model()
    tc.reset()
    explanation = tc.explain(model)(torch.randn(2, 4))
    assert any("no module hooks registered since" in str(g)
               for guards in explanation.guards for g in guards)


def test_global_module_hooks_are_seen_too():
    model = _model()
    compiled = tc.compile(model, backend="aot_eager")
    x = torch.randn(2, 4)
    compiled(x)
    handle = nn.modules.module.register_module_forward_hook(
        lambda m, args, out: out * 2 if isinstance(m, nn.Linear) else None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.testing.assert_close(compiled(x), model(x))
    finally:
        handle.remove()


CHANGES = {
    "forward assigned to the instance": lambda m: setattr(m[1], "forward", lambda x: x * 5),
    "class swapped": lambda m: setattr(m[1], "__class__", nn.Tanh),
    "submodule replaced": lambda m: m.__setitem__(0, nn.Linear(4, 8)),
    "a new weight": lambda m: setattr(m[2], "weight", nn.Parameter(torch.randn(3, 8))),
    "bias removed": lambda m: setattr(m[0], "bias", None),
    "evaluation mode": lambda m: m.eval(),
}


@pytest.mark.parametrize("change", CHANGES)
def test_a_module_changed_after_compiling_runs_as_changed(change):
    """What the inlined forwards assumed is guarded: the class whose forward was inlined
    (a swapped ``__class__``, an instance ``forward`` as accelerate's hooks assign, were
    silently ignored), the submodules, parameters and flags read."""
    model = _model()
    compiled = tc.compile(model, backend="aot_eager")
    x = torch.randn(2, 4)
    compiled(x)
    CHANGES[change](model)
    torch.testing.assert_close(compiled(x), model(x))


HOOKS = {
    "forward": lambda m: m.register_forward_hook(lambda mod, args, out: out * 10),
    "forward_pre": lambda m: m.register_forward_pre_hook(lambda mod, args: (args[0] + 1,)),
    "forward_pre_returning_a_tensor": lambda m: m.register_forward_pre_hook(
        lambda mod, args: args[0].tanh()),
    "forward_with_kwargs": lambda m: m.register_forward_hook(
        lambda mod, args, kwargs, out: out - len(kwargs), with_kwargs=True),
    "forward_pre_with_kwargs": lambda m: m.register_forward_pre_hook(
        lambda mod, args, kwargs: ((args[0] * 2,), kwargs), with_kwargs=True),
    "observing_only": lambda m: m.register_forward_hook(
        lambda mod, args, out: None),
    "prepended": lambda m: m.register_forward_hook(lambda mod, args, out: out.relu(),
                                                   prepend=True),
}


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("kind", HOOKS)
def test_a_submodules_hooks_are_inlined_into_one_graph(kind, backend):
    model = _model()
    HOOKS[kind](model[0])
    HOOKS["forward"](model[2])
    x = torch.randn(2, 4, requires_grad=True)
    want = model(x)
    want_grad = torch.autograd.grad(want.sum(), x)[0]
    explained = tc.explain(model)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained
    got = tc.compile(model, backend=backend, fullgraph=True)(x)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.autograd.grad(got.sum(), x)[0], want_grad)


def test_a_global_hook_is_inlined_and_its_removal_recompiles():
    backend, graphs = _counting()
    model = _model()
    handle = nn.modules.module.register_module_forward_hook(
        lambda m, args, out: out * 2 if isinstance(m, nn.Linear) else None)
    try:
        compiled = tc.compile(model, backend=backend)
        x = torch.randn(2, 4)
        torch.testing.assert_close(compiled(x), model(x))
    finally:
        handle.remove()
    torch.testing.assert_close(compiled(x), model(x))
    assert len(graphs) == 2


def test_a_removed_or_replaced_hook_is_not_run_again():
    """Removing a hook leaves the handle count alone: the hooks themselves are guarded."""
    backend, graphs = _counting()
    model = _model()
    handle = model[0].register_forward_hook(lambda mod, args, out: out * 10)
    compiled = tc.compile(model, backend=backend)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), model(x))
    handle.remove()
    torch.testing.assert_close(compiled(x), model(x))
    model[0].register_forward_hook(lambda mod, args, out: out * -1)
    torch.testing.assert_close(compiled(x), model(x))
    assert len(graphs) == 3


def test_a_hook_with_state_sees_each_call():
    """A hook that counts calls writes its object on every call, after the graph."""
    class Counter:
        def __init__(self):
            self.calls = 0

        def __call__(self, mod, args, out):
            self.calls += 1
            return out + self.calls

    model = _model()
    counter = Counter()
    model[0].register_forward_hook(counter)
    compiled = tc.compile(model, backend="aot_eager")
    x = torch.randn(2, 4)
    outs = [compiled(x) for _ in range(3)]
    assert counter.calls == 3
    counter.calls = 0
    for out in outs:
        torch.testing.assert_close(out, model(x))


# --- tensor.register_hook inside the traced code ---------------------------------------

class _HookedBlock(nn.Module):
    """Hooks on intermediates, as gradient-scaling and gradient-clipping code registers
    them in ``forward``: two on one tensor (they run in order), one reading an input, one
    that returns None, and a use of the tensor made before its hooks were registered."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        self.scale = 2.0

    def forward(self, x, s):
        h = self.a(x)
        early = h.sin()                    # registered later, the hooks still see this use
        h.register_hook(lambda g: g * self.scale)
        y = self.b(h).relu()
        y.register_hook(lambda g: g.clamp(-0.1, 0.1) * s)
        y.register_hook(lambda g: None)
        h.register_hook(lambda g: g + 1)
        return y.sum() + early.sum(), h


def _hooked_gradients(fn, model, x, s):
    model.zero_grad(set_to_none=True)
    out, h = fn(x, s)
    (out + (h * h).sum()).backward()       # a use of h outside: its gradient is hooked too
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_tensor_hooks_in_forward_are_in_the_graph(backend):
    torch.manual_seed(0)
    model, x, s = _HookedBlock(), torch.randn(3, 4), torch.tensor(3.0)
    tc.reset()
    explanation = tc.explain(model)(x, s)
    assert (explanation.graph_count, explanation.break_reasons) == (1, [])
    compiled = tc.compile(model, backend=backend, fullgraph=True)
    for scale in (2.0, 0.5):               # what a hook reads is guarded
        model.scale = scale
        want = _hooked_gradients(model, model, x, s)
        got = _hooked_gradients(compiled, model, x, s)
        for g, e in zip(got, want):
            torch.testing.assert_close(g, e)


def _hook_with_side_effect(x, seen):
    h = x * 2
    h.register_hook(lambda g: seen.append(g.shape))
    return (h * h).sum()


def _kept_handle(x):
    h = x * 2
    handle = h.register_hook(lambda g: g * 3)
    y = (h * h).sum()
    handle.remove()
    return y


def _hook_reads_a_use(x):
    h = x * 2
    total = h.sum()
    h.register_hook(lambda g: g * total)
    return (h * h).sum()


@pytest.mark.parametrize("fn, args, reason", [
    (_hook_with_side_effect, ([],), "writes to an object from outside"),
    (_kept_handle, (), "handle tensor.register_hook"),
    (_hook_reads_a_use, (), "reads a value computed from the tensor"),
])
def test_tensor_hooks_the_graph_cannot_hold_break_and_run_right(fn, args, reason):
    x = torch.randn(3, requires_grad=True)
    fn(x, *args).backward()
    want, x.grad = x.grad, None
    tc.reset()
    explanation = tc.explain(fn)(x, *args)
    assert any(reason in str(r) for r in explanation.break_reasons), \
        explanation.break_reasons
    tc.compile(fn, backend="aot_eager")(x, *args).backward()
    torch.testing.assert_close(x.grad, want)


# --- tensor.register_hook on a tensor from outside: registered after the graph ------------

_SEEN: list = []


def _clip(g):
    return g.clamp(-0.5, 0.5)


class _ScaledInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def halve(self, g):
        return g * 0.5

    def forward(self, x, y):
        k = y.detach() * 2                              # a value the graph computes
        x.register_hook(lambda g: g * k)                # a closure over it
        x.register_hook(self.halve)                     # a bound method
        y.register_hook(_clip)                          # a module-level function
        y.register_hook(functools.partial(torch.mul, other=3.0))
        self.lin.weight.register_hook(lambda g: _SEEN.append(g.shape))  # writes outside
        return self.lin(x * y).tanh()


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_hooks_on_tensors_from_outside_are_registered_after_the_graph(backend):
    def run(compiler):
        torch.manual_seed(0)
        model = _ScaledInput()                          # its weight's hooks are its own
        x, y = torch.randn(4, 3, requires_grad=True), torch.randn(4, 3, requires_grad=True)
        fn = compiler(model)
        _SEEN.clear()
        for _ in range(2):                              # hooks pile up per call, as in eager
            out = fn(x, y)
        out.sum().backward()
        return x.grad, y.grad, model.lin.weight.grad, list(_SEEN)

    want = run(lambda model: model)
    tc.reset()
    x, y = torch.randn(4, 3, requires_grad=True), torch.randn(4, 3, requires_grad=True)
    explanation = tc.explain(_ScaledInput())(x, y)
    assert (explanation.graph_count, explanation.break_reasons) == (1, [])
    got = run(lambda model: tc.compile(model, backend=backend, fullgraph=True))
    for g, e in zip(got[:3], want[:3]):
        torch.testing.assert_close(g, e)
    assert got[3] == want[3] == [torch.Size([3, 3])] * 2


def _input_hook_kept_handle(x):
    handle = x.register_hook(lambda g: g * 3)
    y = x.sin()
    handle.remove()
    return y


def test_a_kept_handle_of_an_input_hook_is_a_break():
    x = torch.randn(3, requires_grad=True)
    tc.reset()
    explanation = tc.explain(_input_hook_kept_handle)(x)
    assert any("handle tensor.register_hook" in str(r) for r in explanation.break_reasons)
    tc.compile(_input_hook_kept_handle, backend="aot_eager")(x).sum().backward()
    torch.testing.assert_close(x.grad, x.detach().cos())
