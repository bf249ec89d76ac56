"""What a compiled function read is guarded: change it after compiling, and the next call
answers as eager does (a recompile), never with the value the graph was built on.

Each case compiles a function, calls it, changes one piece of state it reads, and compares
the next call with eager. Found by this sweep and fixed: a method replaced on the class or
set on the instance (the class's method stayed inlined), a global-state query of torch
(``torch.are_deterministic_algorithms_enabled()`` folded without a guard).
"""

import enum
import functools

import pytest
import torch

import tutorcompile as tc

SCALE = 2.0
CONFIG = {"a": 2.0}
ITEMS = [1.0, 2.0]
NAMES = {"a"}


class Mode(enum.Enum):
    A = 1
    B = 2


class Settings:
    scale = 2.0


def _global():
    def f(x):
        return x * SCALE

    def change():
        global SCALE
        SCALE = 3.0
    return f, change


def _closure():
    s = 2.0

    def f(x):
        return x * s

    def change():
        nonlocal s
        s = 5.0
    return f, change


def _defaults():
    def f(x, k=2.0):
        return x * k
    return f, lambda: setattr(f, "__defaults__", (7.0,))


def _object_attribute():
    settings = Settings()

    def f(x):
        return x * settings.scale
    return f, lambda: setattr(settings, "scale", 4.0)


def _class_attribute():
    class C:
        k = 2.0

    def f(x):
        return x * C.k
    return f, lambda: setattr(C, "k", 9.0)


def _dict_value():
    def f(x):
        return x * CONFIG["a"]
    return f, lambda: CONFIG.__setitem__("a", 6.0)


def _list_append():
    def f(x):
        return x * sum(ITEMS)
    return f, lambda: ITEMS.append(5.0)


def _set_member():
    def f(x):
        return x * (2 if "b" in NAMES else 3)
    return f, lambda: NAMES.add("b")


def _enum_in_dict():
    state = {"mode": Mode.A}

    def f(x):
        return x * (2 if state["mode"] is Mode.A else 3)
    return f, lambda: state.__setitem__("mode", Mode.B)


def _partial_keywords():
    p = functools.partial(torch.mul, other=2.0)

    def f(x):
        return p(x)
    return f, lambda: p.keywords.__setitem__("other", 8.0)


def _method_on_class():
    class A:
        def go(self, x):
            return x * 2
    a = A()

    def f(x):
        return a.go(x)
    return f, lambda: setattr(A, "go", lambda self, x: x * 3)


def _method_on_instance():
    class A:
        def go(self, x):
            return x * 2
    a = A()

    def f(x):
        return a.go(x)
    return f, lambda: setattr(a, "go", lambda x: x * 4)


def _inherited_static_class_methods():
    class Base:
        @staticmethod
        def s(x):
            return x * 2

        @classmethod
        def c(cls, x):
            return x * 3

    class Derived(Base):
        pass
    d = Derived()

    def f(x):
        return d.s(x) + d.c(x)
    return f, lambda: setattr(Base, "s", staticmethod(lambda x: x * 20))


def _dict_subclass_attributes():
    class Config(dict):   # an instance attribute, a class constant, __getattr__ for keys
        kind = "double"

        def __getattr__(self, name):
            return self[name]
    cfg = Config(scale=2.0)
    cfg.offset = 1.0

    def f(x):
        return x * cfg.scale * (2 if cfg.kind == "double" else 1) + cfg.offset

    def change():
        cfg["scale"] = 3.0
        cfg.offset = 5.0
        type(cfg).kind = "single"
    return f, change


def _deterministic_flag():
    def f(x):
        return x * (2 if torch.are_deterministic_algorithms_enabled() else 3)

    def change():
        torch.use_deterministic_algorithms(not torch.are_deterministic_algorithms_enabled())
    return f, change


CASES = {name[1:]: make for name, make in list(globals().items())
         if name.startswith("_") and callable(make) and not name.startswith("__")}


@pytest.mark.parametrize("case", CASES)
def test_a_change_after_compiling_is_seen(case):
    deterministic = torch.are_deterministic_algorithms_enabled()
    try:
        fn, change = CASES[case]()
        compiled = tc.compile(fn, backend="aot_eager")
        x = torch.ones(3)
        torch.testing.assert_close(compiled(x), fn(x))
        change()
        torch.testing.assert_close(compiled(x), fn(x))
    finally:
        torch.use_deterministic_algorithms(deterministic)


def test_an_unchanged_method_is_one_compile():
    """The guards on a method (the class's attribute, no instance attribute) pass again."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm
    fn, _ = _inherited_static_class_methods()
    compiled = tc.compile(fn, backend=backend)
    for _ in range(3):
        compiled(torch.ones(3))
    assert len(graphs) == 1


# --- torch.set_grad_enabled as a statement ----------------------------------------------------

def _grad_off_then_on(x):
    torch.set_grad_enabled(False)
    frozen = x * 2
    torch.set_grad_enabled(True)
    return frozen, x * 3


def _grad_left_off(x):
    torch.set_grad_enabled(False)
    return x * 2


def _grad_statement_inside_no_grad(x):
    with torch.no_grad():
        torch.set_grad_enabled(True)    # until the block ends, whose exit restores the mode
        inside = x * 2
    return inside, x * 3


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("fn", [_grad_off_then_on, _grad_left_off,
                                _grad_statement_inside_no_grad], ids=lambda f: f.__name__)
def test_a_set_grad_enabled_statement_is_traced_and_leaves_the_mode_eager_leaves(fn, backend):
    x = torch.randn(3, requires_grad=True)
    try:
        expected = fn(x)
        mode_after = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        explained = tc.explain(fn)(x)
        assert explained.graph_count == 1 and not explained.break_reasons, explained
        torch.set_grad_enabled(True)
        tc.reset()
        got = tc.compile(fn, backend=backend)(x)
        assert torch.is_grad_enabled() == mode_after
        for g, e in zip(got if isinstance(got, tuple) else [got],
                        expected if isinstance(expected, tuple) else [expected]):
            torch.testing.assert_close(g, e)
            assert g.requires_grad == e.requires_grad
    finally:
        torch.set_grad_enabled(True)


def test_a_break_after_a_set_grad_enabled_statement_resumes_in_the_mode_it_set(capsys):
    def fn(x):
        torch.set_grad_enabled(False)
        y = x * 2
        print("grad mode", torch.is_grad_enabled())    # a break: the rest runs resumed
        return y + x
    x = torch.randn(3, requires_grad=True)
    try:
        explained = tc.explain(fn)(x)
        assert explained.graph_count == 2 and len(explained.break_reasons) == 1
        torch.set_grad_enabled(True)
        tc.reset()
        capsys.readouterr()
        out = tc.compile(fn, backend="aot_eager")(x)
        assert capsys.readouterr().out == "grad mode False\n"
        assert not out.requires_grad and not torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)


# --- torch function modes: what each torch call computes is theirs to decide --------------
class _SinPlusOne(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out + 1 if func is torch.sin else out


def _sin_twice(x):
    return torch.sin(x) * 2


def _mode_inside(x):
    with _SinPlusOne():
        y = torch.sin(x)
    return torch.sin(y) * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_a_function_mode_around_the_call_gets_eager_answers(backend):
    # a graph of ours computes torch.sin itself (inductor's kernel), so one compiled without
    # the mode must not run under it, nor one traced under it run without it
    x = torch.zeros(3)
    compiled = tc.compile(_sin_twice, backend=backend)
    torch.testing.assert_close(compiled(x), _sin_twice(x))
    with _SinPlusOne():
        expected = _sin_twice(x)
        torch.testing.assert_close(compiled(x), expected)
    assert expected.eq(2).all()
    tc.reset()
    with _SinPlusOne():
        torch.testing.assert_close(compiled(x), expected)
    torch.testing.assert_close(compiled(x), torch.zeros(3))


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_function_mode_entered_inside_runs_its_block_uncompiled(backend):
    x = torch.zeros(3)
    torch.testing.assert_close(tc.compile(_mode_inside, backend=backend)(x), _mode_inside(x))
    assert torch._C._len_torch_function_stack() == 0    # entered and left once
    with pytest.raises(tc.TutorcompileError, match="torch function mode is active"):
        with _SinPlusOne():
            tc.reset()
            tc.compile(_sin_twice, fullgraph=True)(x)
