"""Stage 3: guards -- a compiled function never reuses a graph whose assumptions changed."""

import functools
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tutorcompile.dynamo import eval_frame
from tutorcompile.dynamo.eval_frame import RECOMPILE_LOG, cache_entries
from tutorcompile.dynamo.exc import RecompileLimitWarning

# These tests check capture, guards and breaks: the eager backend runs each captured
# graph as it is (tutorcompile.compile's default backend, 'inductor', adds AOT and codegen).
compile_eager = functools.partial(eval_frame.compile, backend="eager")

pytestmark = [pytest.mark.stage3, pytest.mark.usefixtures("fresh_compiler")]

OFFSET = 1.0
TABLE = torch.ones(3)


def uses_shape(x):
    return x * x.shape[0] + x.sum(0)


def test_shape_change_recompiles_with_the_reason():
    c = compile_eager(uses_shape, dynamic=False)
    for shape in [(2, 3), (4, 3), (2, 3)]:
        x = torch.randn(shape)
        torch.testing.assert_close(c(x), uses_shape(x))
    assert len(cache_entries(uses_shape)) == 2
    assert "size mismatch at dim 0: expected 2, got 4" in RECOMPILE_LOG[0]


def test_dtype_change_recompiles():
    c = compile_eager(uses_shape)
    assert c(torch.ones(2, 2)).dtype == torch.float32
    out = c(torch.ones(2, 2, dtype=torch.float64))
    assert out.dtype == torch.float64
    assert "dtype: expected torch.float32, got torch.float64" in RECOMPILE_LOG[0]


def test_device_change_recompiles():
    c = compile_eager(uses_shape)
    c(torch.ones(2, 2))
    out = c(torch.ones(2, 2, device="meta"))
    assert out.device.type == "meta"
    assert "device: expected cpu, got meta" in RECOMPILE_LOG[0]


def test_requires_grad_change_recompiles_and_grads_are_right():
    c = compile_eager(uses_shape)
    c(torch.ones(2, 2))
    x = torch.randn(2, 2, requires_grad=True)
    c(x).sum().backward()
    g = x.grad.clone()
    x.grad = None
    uses_shape(x).sum().backward()
    torch.testing.assert_close(g, x.grad)
    assert "requires_grad" in RECOMPILE_LOG[0]


def reads_globals(x):
    return x + OFFSET + TABLE


def test_global_constant_change_is_seen():
    global OFFSET
    c = compile_eager(reads_globals)
    x = torch.zeros(3)
    torch.testing.assert_close(c(x), torch.full((3,), 2.0))
    OFFSET = 5.0
    try:
        torch.testing.assert_close(c(x), torch.full((3,), 6.0))
    finally:
        OFFSET = 1.0
    assert "G['OFFSET']" in RECOMPILE_LOG[0]


def test_global_tensor_is_a_graph_input_not_a_baked_constant():
    global TABLE
    c = compile_eager(reads_globals)
    x = torch.zeros(3)
    c(x)
    old = TABLE
    TABLE = torch.full((3,), 10.0)
    try:
        torch.testing.assert_close(c(x), torch.full((3,), 11.0))
    finally:
        TABLE = old
    assert len(cache_entries(reads_globals)) == 1  # same metadata: no recompile needed


def test_constant_argument_change_recompiles():
    def f(x, k):
        return x * k
    c = compile_eager(f)
    assert c(torch.ones(1), 2).item() == 2
    assert c(torch.ones(1), 3).item() == 3
    assert c(torch.ones(1), 2.5).item() == 2.5
    assert len(cache_entries(f)) == 3


def test_closure_variable_change_recompiles():
    k = 2.0

    def f(x):
        return x * k
    c = compile_eager(f)
    assert c(torch.ones(1)).item() == 2.0
    k = 7.0
    assert c(torch.ones(1)).item() == 7.0


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)
        self.drop = torch.nn.Dropout(0.5)
        self.scale = 1.0

    def forward(self, x):
        return self.drop(self.fc(x)) * self.scale


def test_module_attribute_and_training_flag_changes_are_seen():
    m = Scaled().eval()
    c = compile_eager(m)
    x = torch.randn(4, 3)
    torch.testing.assert_close(c(x), m(x))
    m.scale = 3.0
    torch.testing.assert_close(c(x), m(x))
    m.train()
    torch.manual_seed(0)
    got = c(x)
    torch.manual_seed(0)
    torch.testing.assert_close(got, m(x))
    assert (got == 0).any()  # dropout is active again
    assert any("training" in r for r in RECOMPILE_LOG)


def test_swapped_submodule_is_seen():
    m = Scaled().eval()
    c = compile_eager(m)
    x = torch.randn(2, 3)
    c(x)
    m.fc = torch.nn.Linear(3, 3)
    torch.testing.assert_close(c(x), m(x))


def test_grad_mode_is_guarded():
    def f(x):
        return x * 2
    c = compile_eager(f)
    w = torch.ones(2, requires_grad=True)
    assert c(w).requires_grad
    with torch.no_grad():
        assert not c(w).requires_grad


def test_guards_print_as_python():
    def f(x, n):
        return x * n
    compile_eager(f)(torch.ones(2, 3), 4)
    text = str(cache_entries(f)[0].check)
    assert ("check_tensor(L['x'], torch.Tensor, torch.float32, device='cpu', size=(2, 3), "
            "stride=(3, 1), requires_grad=False)") in text
    assert "type(L['n']) is int and L['n'] == 4" in text
    assert "torch.is_grad_enabled() == True" in text
    assert "def ___check(L, G, B, S)" in cache_entries(f)[0].check.source


def test_recompile_limit_falls_back_with_a_warning():
    def f(x, k):
        return x + k
    c = compile_eager(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(11):
            assert c(torch.zeros(1), k).item() == k
    assert len(cache_entries(f)) == 8
    assert any(issubclass(w.category, RecompileLimitWarning) for w in caught)


def test_reset_clears_caches():
    compile_eager(uses_shape)(torch.ones(2, 2))
    assert cache_entries(uses_shape)
    eval_frame.reset()
    assert cache_entries(uses_shape) == []


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=3),
       st.sampled_from([torch.float32, torch.float64]))
def test_any_shape_sequence_is_right(shape, dtype):
    def f(x):
        y = x.reshape(-1) * x.shape[-1]
        return y.sum() + x.dim()
    eval_frame.reset()
    c = compile_eager(f)
    for s in (shape, shape[::-1], [d + 1 for d in shape]):
        x = torch.randn(s, dtype=dtype)
        torch.testing.assert_close(c(x), f(x))


def _make_scaler(k):
    def scale(t):
        return t * k
    return scale


SCALER = _make_scaler(2.0)


def uses_global_closure(x):
    return SCALER(x) + 1


def test_closure_of_an_inlined_global_function_is_guarded():
    c = compile_eager(uses_global_closure)
    assert c(torch.ones(1)).item() == 3.0
    SCALER.__closure__[0].cell_contents = 5.0
    try:
        assert c(torch.ones(1)).item() == 6.0
    finally:
        SCALER.__closure__[0].cell_contents = 2.0
    assert "__closure__[0].cell_contents" in RECOMPILE_LOG[0]


@pytest.mark.parametrize("batched", [True, False], ids=["cxx-batch", "python"])
def test_check_function_is_cheapest_first_and_agrees_with_each_guard(batched, monkeypatch):
    """The generated check reads shared sources once, tests identity/constant guards before
    tensors, checks static tensors in one batched C++ call (or, without it, inline attribute
    reads), and answers exactly what the guards say one by one -- on the hit and on each
    kind of miss."""
    from tutorcompile.dynamo import guards
    if not batched:
        monkeypatch.setattr(guards, "TensorGuards", None)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU()).eval()
    x = torch.randn(2, 3)
    compile_eager(model)(x)
    (entry,) = cache_entries(model)
    check = entry.check
    source = check.source
    assert "check_tensor(" not in source  # static tensors: no call per tensor
    # L['self']._modules read once, into a local (the hook guard reads the submodules only
    # once the count of hook handles has moved: not on this path)
    hot = "\n".join(ln for ln in source.splitlines() if ".next_id == " not in ln)
    assert hot.count("._modules") == 1
    lines = [ln.strip() for ln in source.splitlines() if ln.strip().startswith("if not")]
    tensor_test = ("is torch.Tensor" if batched else ".stride()", "is torch.nn.Parameter",
                   "___check_tensors(")
    first_tensor = next(i for i, ln in enumerate(lines) if tensor_test[0] in ln)
    assert all(any(t in ln for t in tensor_test) for ln in lines[first_tensor:])
    assert lines[-1].startswith("if not ___check_tensors(") == batched   # all 3 tensors

    def one_by_one(L):
        return check.failure(L, type(model).forward.__globals__, {}, []) is None

    def both(L):
        answer = check(L, type(model).forward.__globals__, {}, [])
        assert answer == one_by_one(L), L
        return answer

    assert both({"self": model, "input": x})
    assert not both({"self": model, "input": x.t().contiguous().t()})       # stride
    assert not both({"self": model, "input": x.double()})                   # dtype
    assert not both({"self": model, "input": x.requires_grad_(True)})       # requires_grad
    x.requires_grad_(False)
    assert not both({"self": model, "input": torch.nn.Parameter(x)})        # type
    assert not both({"self": model, "input": torch.randn(3, 3)})            # size
    model[1].train()                                                        # a bool attr
    assert not both({"self": model, "input": x})
    model[1].eval()
    del model[0]._parameters["bias"]                                        # a missing source
    assert not both({"self": model, "input": x})


def test_a_dynamic_tensor_check_is_inline_and_agrees_with_each_guard():
    """A tensor with a dynamic dim is checked inline too (each dim on its own: the dynamic
    one at least 2, the others exact, contiguity as traced), no ``check_tensor`` call per
    hit, and answers exactly what the guard says on each kind of miss."""
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU()).eval()
    compiled = compile_eager(model)
    compiled(torch.randn(2, 3))
    compiled(torch.randn(5, 3))                    # a new batch size: dim 0 dynamic
    entry = cache_entries(model)[-1]
    check = entry.check
    assert "check_tensor(" not in check.source and ".size(0) >= 2" in check.source

    def both(x):
        L = {"self": model, "input": x}
        answer = check(L, type(model).forward.__globals__, {}, [])
        assert answer == (check.failure(L, type(model).forward.__globals__, {}, []) is None)
        return answer

    assert both(torch.randn(7, 3)) and both(torch.randn(2, 3))
    assert not both(torch.randn(1, 3))                             # 0/1 specialised
    assert not both(torch.randn(7, 4))                             # a static dim
    assert not both(torch.randn(3, 7).t())                         # not contiguous
    assert not both(torch.randn(7, 3, 1))                          # rank
    assert not both(torch.randn(7, 3).double())                    # dtype


def test_building_the_check_is_linear_in_the_guards(monkeypatch):
    """Each guard's expression has only its own source chain's locals put in: the number of
    substitutions per guard stays flat as the network deepens. Trying every bound name on
    every guard was quadratic -- shufflenet_v2's 2,700 guards took 167 s in ``re``."""
    from tutorcompile.dynamo import guards
    subs = []
    pattern = guards._name_pattern.__wrapped__

    def counting(name):
        subs.append(name)
        return pattern(name)
    monkeypatch.setattr(guards, "_name_pattern", counting)
    per_guard = {}
    for depth in (8, 64):
        eval_frame.reset()
        subs.clear()
        model = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(depth)])
        x = torch.randn(1, 2)
        torch.testing.assert_close(compile_eager(model)(x), model(x))
        (entry,) = cache_entries(model)
        per_guard[depth] = len(subs) / len(entry.check)
        assert len(entry.check) > 3 * depth
    assert per_guard[64] <= 1.5 * per_guard[8], per_guard  # quadratic: about 8 times


class _CountingConfig:
    """A config whose attribute reads run Python (as transformers' ``__getattribute__``)."""
    reads = 0

    def __init__(self, mode, layers):
        self.mode, self.layers = mode, layers

    def __getattribute__(self, name):
        type(self).reads += 1
        return object.__getattribute__(self, name)


def scaled_by_config(x, config):
    return x * config.layers if config.mode == "{double}" else x - config.layers


def test_a_constant_guard_reads_its_value_once_and_compares_any_literal():
    """Each constant the graph assumed (a config's attribute) is read once per check, not
    once for its type and again for its value; a string with braces is compared as it is.
    Changing either value recompiles and gives eager's answer."""
    c = compile_eager(scaled_by_config)
    x = torch.randn(3)
    config = _CountingConfig("{double}", 3)
    c(x, config)
    entry = cache_entries(scaled_by_config)[0]
    _CountingConfig.reads = 0
    assert entry.check(*_locals_of(scaled_by_config, x, config))
    assert _CountingConfig.reads == 2       # mode and layers, once each
    for mode, layers in [("{double}", 3), ("{double}", 4), ("plain", 4), ("{double}", 3)]:
        config = _CountingConfig(mode, layers)
        torch.testing.assert_close(c(x, config), scaled_by_config(x, config))
    assert len(cache_entries(scaled_by_config)) == 3


def _locals_of(fn, *args):
    import builtins
    return dict(zip(fn.__code__.co_varnames, args)), fn.__globals__, builtins.__dict__, []
