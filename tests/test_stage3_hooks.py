"""Module hooks registered, and modules changed, after a module was compiled run as in eager.

A compiled module inlines its submodules' ``forward``s; a hook registered later on one of
them (or on the compiled module itself) used to be skipped silently. A submodule inlined
without hooks is guarded to stay so (one guard per frame: the count of hook handles ever
made, then the hook dicts themselves), so a new hook means a recompile, which breaks the
graph at that submodule and lets PyTorch run it with its hooks; the compiled module runs
its own forward hooks around the compiled forward.
"""

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


def test_backward_hooks_on_the_compiled_module_run_it_uncompiled_and_say_so():
    model = _model()
    compiled = tc.compile(model)
    x = torch.randn(2, 4, requires_grad=True)
    seen = []
    model.register_full_backward_hook(lambda m, gin, gout: seen.append(gout[0].shape))
    with pytest.warns(tc.FallbackWarning, match="has backward hooks; it runs uncompiled"):
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
