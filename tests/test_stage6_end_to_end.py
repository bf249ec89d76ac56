"""The whole compiler on the capstone models: Dynamo → AOTAutograd → fused kernels.

Inference (eval mode, no grad) and a training step (loss and every parameter's gradient)
are compared with eager PyTorch. Dropout is 0 in training so both sides compute the same.
"""

import functools

import pytest
import torch

import tutorcompile as tc
from tutorcompile.bench import call_path
from tutorcompile.models import GPT, MLP, AlexNet, GPTConfig

pytestmark = [pytest.mark.stage6, pytest.mark.usefixtures("fresh_compiler")]

MODELS = {
    "gpt": lambda: GPT(GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2,
                                 n_embd=32)),
    "alexnet": lambda: AlexNet(width=8, dropout=0.0),
    "mlp": lambda: MLP((10, 5, 2)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_inference_matches_eager(name):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    inputs = model.example_inputs(batch=2)
    compiled = tc.compile(model, backend="inductor")
    with torch.no_grad():
        torch.testing.assert_close(compiled(*inputs), model(*inputs), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_training_step_matches_eager(name):
    torch.manual_seed(0)
    model = MODELS[name]().train()
    inputs, targets = model.example_inputs(batch=2), model.targets(batch=2)
    params = list(model.parameters())

    compiled = tc.compile(model, backend="inductor")
    loss = model.loss(compiled(*inputs), targets)
    grads = torch.autograd.grad(loss, params)

    expected_loss = model.loss(model(*inputs), targets)
    expected = torch.autograd.grad(expected_loss, params)
    torch.testing.assert_close(loss, expected_loss, rtol=1e-4, atol=1e-5)
    for (pname, _), g, e in zip(model.named_parameters(), grads, expected):
        torch.testing.assert_close(g, e, rtol=1e-3, atol=1e-5,
                                   msg=lambda m, pname=pname: f"{pname}: {m}")


def test_alexnet_takes_the_classic_224_images():
    """``image_size=224`` sizes the first linear layer for what the three pools leave
    (28×28), so the classic benchmark's images go through, compiled as in eager."""
    torch.manual_seed(0)
    model = AlexNet(width=2, dropout=0.0, image_size=224).eval()
    (x,) = model.example_inputs(batch=1)
    assert x.shape == (1, 3, 224, 224)
    assert model.classifier[1].in_features == 2 * 2 * 28 * 28
    with torch.no_grad():
        expected = model(x)
        assert expected.shape == (1, 10)
        torch.testing.assert_close(tc.compile(model, backend="inductor")(x), expected,
                                   rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="multiple of 8"):
        AlexNet(image_size=100)


def test_a_few_optimizer_steps_track_eager():
    torch.manual_seed(0)
    eager_model = MLP((16, 32, 4), softmax=False)
    ours_model = MLP((16, 32, 4), softmax=False)
    ours_model.load_state_dict(eager_model.state_dict())
    compiled = tc.compile(ours_model, backend="inductor")
    opt_e = torch.optim.SGD(eager_model.parameters(), lr=0.1)
    opt_o = torch.optim.SGD(ours_model.parameters(), lr=0.1)
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    for _ in range(5):
        for opt, fn in ((opt_e, eager_model), (opt_o, compiled)):
            opt.zero_grad()
            torch.nn.functional.mse_loss(fn(x), y).backward()
            opt.step()
    for a, b in zip(eager_model.parameters(), ours_model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_cache_hit_path_fetches_inputs_with_one_generated_function():
    """A cache hit binds the call, checks guards and fetches every graph input through one
    generated function (not a walk over the sources); the result is still eager's, and a
    changed parameter is seen on the next call."""
    from tutorcompile.dynamo.eval_frame import cache_entries
    model = MLP((10, 5, 2)).eval()
    x = torch.randn(3, 10)
    compiled = tc.compile(model, backend="aot_eager")
    with torch.no_grad():
        compiled(x)
        (entry,) = cache_entries(model)
        assert entry.fetch_inputs.__name__ == "fetch_inputs"
        assert entry.returns_output is not None
        model.net[0].weight.mul_(2)
        torch.testing.assert_close(compiled(x), model(x))


def test_a_cache_hit_keys_its_inputs_once(monkeypatch):
    """AOT's cache entry is keyed on shapes, strides and dtypes, so its forward and backward
    call the generated wrappers directly, with no second key of the same inputs; an input
    with other strides still compiles anew and gets eager's values and gradients."""
    from tutorcompile.inductor.compile_fx import CompiledGraph
    model = MLP((10, 5, 2))
    compiled = tc.compile(model)
    x = torch.randn(3, 10)
    compiled(x).sum().backward()

    def no_second_key(inputs):
        raise AssertionError("a compiled graph keyed inputs AOT's cache had matched")
    monkeypatch.setattr(CompiledGraph, "_key", staticmethod(no_second_key))
    for p in model.parameters():
        p.grad = None
    compiled(x).sum().backward()
    grads = [p.grad for p in model.parameters()]
    monkeypatch.undo()
    for p in model.parameters():
        p.grad = None
    model(x).sum().backward()
    for got, p in zip(grads, model.parameters()):
        torch.testing.assert_close(got, p.grad)
    xt = torch.randn(10, 3).t()                       # the same shape, other strides
    torch.testing.assert_close(compiled(xt), model(xt))


def test_a_static_cache_hit_calls_the_compiled_wrapper_with_no_key(monkeypatch):
    """When Dynamo's guards pin every graph input (no dynamic size), its cache entry calls
    the backend's ``direct()`` form -- the inference wrapper itself, or the autograd.Function
    -- and AOT's per-call key never runs. Grad mode, a frozen parameter and a new batch size
    each fail a guard and compile again, with eager's values and gradients."""
    from tutorcompile.aot import aot_autograd
    from tutorcompile.dynamo.eval_frame import cache_entries
    torch.manual_seed(0)
    model = MLP((10, 5, 2))
    compiled = tc.compile(model)
    x = torch.randn(3, 10)

    def check(x, grad=True):
        for p in model.parameters():
            p.grad = None
        with torch.set_grad_enabled(grad):
            got = compiled(x)
            if grad:
                got.square().sum().backward()
        grads = [p.grad for p in model.parameters()]
        for p in model.parameters():
            p.grad = None
        with torch.set_grad_enabled(grad):
            expected = model(x)
            if grad:
                expected.square().sum().backward()
        torch.testing.assert_close(got, expected)
        for g, p in zip(grads, model.parameters()):
            assert (g is None) == (p.grad is None)
            if g is not None:
                torch.testing.assert_close(g, p.grad)

    check(x)
    check(x, grad=False)
    entries = cache_entries(model)
    assert len(entries) == 2
    training, inference = entries
    assert training.call.func == aot_autograd._apply    # (the autograd.Function's C++ apply)
    assert inference.call is inference.compiled.compiled.artifacts.forward_run

    def no_key(inputs):
        raise AssertionError("AOT keyed inputs that Dynamo's guards had matched")
    monkeypatch.setattr(aot_autograd, "_key", no_key)
    check(x)
    check(x, grad=False)
    monkeypatch.undo()
    model.net[0].weight.requires_grad_(False)        # a frozen layer: requires_grad guard
    check(x)
    model.net[0].weight.requires_grad_(True)
    check(torch.randn(5, 10))                        # a new batch size: dynamic from here on
    # symbolic in the batch size, with no guard of AOT's own: the guards' "any size >= 2"
    # is all it needs, so no key either
    monkeypatch.setattr(aot_autograd, "_key", no_key)
    check(torch.randn(7, 10))
    monkeypatch.undo()
    assert all(e.call not in (e.compiled, e.compiled.compiled) for e in cache_entries(model))


def test_a_dynamic_entry_keys_its_inputs_when_aot_relied_on_a_size():
    """With ``dynamic=True`` every dim is a symbol; the matmul needs the feature size to
    be the weight's (a guard ``s1 == 10`` in AOT's shape environment, which Dynamo's guards
    do not check), so that entry keeps AOT's keyed path, where the guard is checked."""
    from tutorcompile.dynamo.eval_frame import cache_entries
    torch.manual_seed(0)
    model = MLP((10, 5, 2))
    compiled = tc.compile(model, dynamic=True)
    with torch.no_grad():
        for b in (3, 6):
            x = torch.randn(b, 10)
            torch.testing.assert_close(compiled(x), model(x))
    (entry,) = cache_entries(model)
    arts = list(entry.compiled.compiled.cache.values())
    assert all(a is arts[0] for a in arts) and arts[0].shape_env.guards
    assert entry.call is entry.compiled.compiled      # AOTCompiled.__call__: keyed


def _python_calls(fn, *args) -> list[str]:
    """The Python functions one call of ``fn`` runs (C functions left out), in order."""
    return [frame.name for frame in call_path(fn, *args).frames]


def test_a_cache_hit_runs_only_the_guards_and_the_wrapper():
    """A counted, not timed, check of the per-call path: a cache hit of a compiled MLP in
    inference runs, in Python, only the module call, the cache lookup, one generated
    function for the guards and the graph inputs, and the generated wrapper (which calls
    PyTorch and the kernels directly: no op table, no graph, no helper)."""
    from tutorcompile.dynamo.eval_frame import cache_entries
    model = MLP((784, 256, 256, 10)).eval()
    x = torch.randn(8, 784)
    compiled = tc.compile(model)
    with torch.no_grad():
        compiled(x)
        compiled(x)         # (the first cache hit caches which entries return at once)
        calls = _python_calls(compiled, x)
        (entry,) = cache_entries(model)
        wrapper = entry.call
        torch.testing.assert_close(compiled(x), model(x))
    ours = calls[calls.index("forward"):]
    assert ours == ["forward", "_run_plain", "_fast_cache_hit", "___check_and_fetch", "call"], \
        calls
    assert wrapper.__name__ == "call"
    code = entry.compiled.compiled.artifacts.forward.compiled.wrapper_code
    assert code.count("torch.addmm(") == 3 and ".contiguous()" not in code, code


def _decorated(fn):
    """A decorator as libraries write one (transformers' ``can_return_tuple``): a closure
    over the function, called with ``*args, **kwargs``."""
    scale = [2.0]

    @functools.wraps(fn)
    def wrapper(self, *args, flag=True, **kwargs):
        out = fn(self, *args, **kwargs)
        return out * scale[0] if flag else out
    wrapper.scale = scale
    return wrapper


class _KeywordModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    @_decorated
    def forward(self, x, bias=None, *, shift=0.0, **extra):
        y = self.lin(x) + shift
        return y if bias is None else y + bias


def test_a_cache_hit_with_keywords_varargs_and_a_closure_skips_the_vm():
    """A forward behind a decorator (a closure called with ``*args, **kwargs``) and called
    with keywords takes the same cache-hit path as a positional call -- no VM frame -- and
    binding decides as CPython does: another keyword, a default filled in, a new value in
    the closure's cell or a call that does not bind each gives eager's answer."""
    torch.manual_seed(0)
    model = _KeywordModel()
    compiled = tc.compile(model)
    x, b = torch.randn(2, 4), torch.randn(4)
    with torch.no_grad():
        for _ in range(2):
            compiled(x, shift=1.0)
        calls = _python_calls(lambda: compiled(x, shift=1.0))
        assert "_fast_cache_hit" in calls and "make_frame" not in calls, calls
        assert "run_frame" not in calls, calls
        cases = [((x,), {"shift": 1.0}), ((x,), {"shift": 2.0}), ((x, b), {}),
                 ((x,), {"bias": b, "flag": False}), ((x,), {"unused": 3})]
        for args, kwargs in cases:
            torch.testing.assert_close(compiled(*args, **kwargs), model(*args, **kwargs))
        type(model).forward.scale[0] = 5.0     # the closure's list, read through its cell
        torch.testing.assert_close(compiled(x, shift=1.0), model(x, shift=1.0))
        type(model).forward.scale[0] = 2.0
        with pytest.raises(TypeError, match="got multiple values for argument 'bias'"):
            compiled(x, b, bias=b)


class _Holder:
    pass


def _writes_outside(x, holder, table):
    """Side effects a cache hit replays: an attribute of an outside object, a dict entry."""
    holder.last = x.sum()
    table["rows"] = x.shape[0]
    return {"y": x.sin() * 2}


def _breaks(x):
    y = x.cos()
    print("", end="")    # a graph break: the frame goes on in the VM from here
    return y + 1


def test_a_cache_hit_replays_writes_and_resumes_breaks_with_one_guard_check():
    """An entry that returns a value to build and writes to replay runs from the cache-hit
    path too (no VM frame), replaying the writes as eager makes them; an entry that ends in
    a graph break goes on in the VM from the entry the hit path found, without checking its
    guards a second time."""
    x = torch.randn(3)
    compiled = tc.compile(_writes_outside)
    holder, table = _Holder(), {}
    for _ in range(2):
        compiled(x, holder, table)
    holder, table = _Holder(), {}
    calls = _python_calls(compiled, x, holder, table)
    assert "make_frame" not in calls and calls.count("___check_and_fetch") == 1, calls
    expected_holder, expected_table = _Holder(), {}
    want = _writes_outside(x, expected_holder, expected_table)
    got = compiled(x, holder, table)
    torch.testing.assert_close(got["y"], want["y"])
    torch.testing.assert_close(holder.last, expected_holder.last)
    assert table == expected_table == {"rows": 3}
    broken = tc.compile(_breaks)
    for _ in range(2):
        broken(x)
    calls = _python_calls(broken, x)
    assert calls.count("___check_and_fetch") == 1 and calls.count("___check") == 1, calls
    torch.testing.assert_close(broken(x), _breaks(x))


def test_a_training_cache_hit_calls_the_autograd_function_directly():
    """In training the cache hit goes from the guards to the ``autograd.Function``'s C++
    apply (not ``Function.apply``'s Python, which unwraps functorch wrappers argument by
    argument), whose forward calls the generated wrapper. Gradients are eager's."""
    torch.manual_seed(0)
    model = MLP((784, 256, 256, 10))
    x = torch.randn(8, 784)
    compiled = tc.compile(model)
    for _ in range(2):
        compiled(x).sum().backward()
    calls = _python_calls(compiled, x)
    ours = calls[calls.index("forward"):]
    assert ours == ["forward", "_run_plain", "_fast_cache_hit", "___check_and_fetch",
                    "_apply", "forward", "call", "save_for_backward", "<listcomp>"], calls
    for p in model.parameters():
        p.grad = None
    compiled(x).square().sum().backward()
    grads = [p.grad for p in model.parameters()]
    for p in model.parameters():
        p.grad = None
    model(x).square().sum().backward()
    for got, p in zip(grads, model.parameters()):
        torch.testing.assert_close(got, p.grad)
