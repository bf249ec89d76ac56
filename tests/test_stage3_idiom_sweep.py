"""Stage 3: a sweep of Python and PyTorch idioms under ``fullgraph=True`` (the corpus lives in
``tests/idiom_sweep_cases.py``, where ``assert`` statements stay CPython's bytecode).

Each case runs eager, then compiled whole (``backend="eager"``, ``fullgraph=True``) on two
calls -- the compile, then a cache hit with fresh inputs of the same shapes -- and must give
eager's values. Every other case marked ``grad`` also runs under ``aot_eager`` (a few under
``inductor``) with gradients. A case in ``EXPECTED_BREAKS`` cannot be one graph (nor is it
under ``torch.compile``, unless the reason says otherwise): under ``fullgraph`` it must raise
a ``GraphBreakError`` that names the construct and the user's line, and compiled without
``fullgraph`` it must still give eager's answer.

Measured on this corpus ("one graph" = compiled whole under ``fullgraph=True`` with eager's
answer on both calls; a wrong answer is a different value with no error)::

                                 cases   one graph   wrong answer   break
    torch.compile (oracle)        186       159           2           25
    tutorcompile, before sweep    178       150           2           26
    tutorcompile, after sweep     186       171           0           15

(the sweep also found five silent wrong answers outside these counts, each now a
regression test below: ``callable()`` of an object with ``__call__``, ``!=`` of objects
defining only ``__eq__``, the truth of an empty ``ModuleList``, ``len()`` of a Sequential
built inside, and ``y **= 2``-style writes under AOT). torch.compile captures three cases
tutorcompile still breaks on (see ``EXPECTED_BREAKS``); tutorcompile captures fifteen that
torch.compile breaks on or gets wrong.
"""

import pytest
import torch

import tutorcompile as tc
from tests.capture_cases import check_one_graph
from tests.idiom_sweep_cases import CASES
from tutorcompile.dynamo import GraphBreakError

pytestmark = pytest.mark.stage3

# name -> words of the break reason. Each is also a break under torch.compile unless noted.
EXPECTED_BREAKS = {
    # a class statement builds a new class object on every call (torch: __build_class__)
    "class_defined_inside": "class statement",
    "getattr_chains_and_setattr": "class statement",
    "slots_class": "class statement",
    "user_iterator_class": "class statement",
    "generator_method_iteration": "class statement",
    "callable_objects_and_partial_methods": "class statement",
    "default_dict_factory_and_missing": "class statement",
    "dict_subclass_and_list_subclass": "class statement",
    # a module with parameters made inside the region (torch: nn.Parameter constructor)
    "module_with_container_dunders": "constructing Linear",
    # a mutable C type with no tracker (torch: no handler for bytearray either)
    "bytes_and_bytearray": "bytearray",
    # instantiating an abstract class raises in C, while tracing (torch breaks too)
    "abstract_base_classes": "Can't instantiate abstract class",
    # types.SimpleNamespace is a C class with no tracker (torch breaks too)
    "simple_namespace_and_mappingproxy": "SimpleNamespace",
    # torch.compile captures these three; tutorcompile does not yet:
    # the output's shape depends on the data (a DynamicOutputShapeException while tracing)
    "boolean_mask_indexing": "output depends on tensor data",
    # a set/dict member hashed by the class's own __hash__ (members are constants or
    # objects that hash by identity)
    "user_objects_hashed_by_their_own_hash": "a set holding",
    # an instance of a list subclass built inside the function (no tracker keeps its class)
    "dict_and_list_subclasses_at_module_level": "constructing an instance of _Stack",
}


def _inputs(case, seed, module):
    torch.manual_seed(seed)
    return [torch.randn(*shape) for shape in case.shapes] + \
        ([module] if module is not None else [])


def _flat(value):
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _flat(v)]
    return [value]


def _assert_same(got, want):
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        if isinstance(w, torch.Tensor):
            torch.testing.assert_close(g, w)
        else:
            assert g == w


def _module(case):
    torch.manual_seed(1)
    return case.module() if case.module is not None else None


@pytest.mark.parametrize("name", sorted(set(CASES) - set(EXPECTED_BREAKS)))
def test_one_graph_equal_to_eager_on_two_calls(name):
    case = CASES[name]
    module = _module(case)
    tc.reset()
    compiled = tc.compile(case.fn, backend="eager", fullgraph=True)
    for seed in (0, 1):  # the compile, then a cache hit with fresh values
        want = case.fn(*_inputs(case, seed, module))
        _assert_same(compiled(*_inputs(case, seed, module)), want)


@pytest.mark.parametrize("name", sorted(EXPECTED_BREAKS))
def test_an_expected_break_names_its_reason_and_stays_right(name):
    case = CASES[name]
    module = _module(case)
    tc.reset()
    with pytest.raises(GraphBreakError) as info:
        tc.compile(case.fn, backend="eager", fullgraph=True)(*_inputs(case, 0, module))
    assert EXPECTED_BREAKS[name] in info.value.reason
    assert info.value.filename.endswith("idiom_sweep_cases.py") and info.value.lineno
    tc.reset()
    compiled = tc.compile(case.fn, backend="eager")
    for seed in (0, 1):
        want = case.fn(*_inputs(case, seed, module))
        _assert_same(compiled(*_inputs(case, seed, module)), want)


# (every other case marked ``grad``, to keep the module's run short)
GRAD_CASES = sorted(n for n, c in CASES.items() if c.grad and n not in EXPECTED_BREAKS)[::2]
INDUCTOR_CASES = ["partial_of_partial", "star_unpacking_in_calls_and_literals",
                  "module_containers", "in_place_ops_on_views", "user_container_dunders"]


@pytest.mark.parametrize("name", GRAD_CASES)
def test_values_and_gradients_under_aot_eager(name):
    case = CASES[name]
    module = _module(case)
    check_one_graph(case.fn, lambda: _inputs(case, 0, module), "aot_eager")


@pytest.mark.parametrize("name", INDUCTOR_CASES)
def test_values_and_gradients_under_inductor(name):
    case = CASES[name]
    module = _module(case)
    check_one_graph(case.fn, lambda: _inputs(case, 0, module), "inductor",
                    atol=1e-4, rtol=1e-4)


# --- regressions the sweep found, in more spellings than its one case --------------------
def _partials_flatten(x):
    import functools
    inner = functools.partial(torch.add, alpha=2)
    outer = functools.partial(inner, x)
    again = functools.partial(functools.partial(torch.mul), x, 3)
    return outer(x) + again() + len(outer.args) + len(outer.keywords) + \
        (outer.func is torch.add) + (again.func is torch.mul)


def test_a_partial_of_a_partial_is_flattened_as_cpython_does():
    check_one_graph(_partials_flatten, lambda: [torch.randn(3)], "eager")


def _make_partials():
    import functools
    plain = functools.partial(torch.add, alpha=3)
    named = functools.partial(torch.add, alpha=3)
    functools.update_wrapper(named, torch.add)  # an instance __dict__: CPython nests
    return plain, named


_PLAIN, _NAMED = _make_partials()


def _partials_of_program_partials(x):
    import functools
    a = functools.partial(_PLAIN, x)
    b = functools.partial(_NAMED, x)
    return a(x) + b(x) + (a.func is torch.add) + (b.func is _NAMED) + len(a.keywords) + \
        len(b.keywords)


def test_a_partial_of_a_program_partial_flattens_only_without_an_instance_dict():
    check_one_graph(_partials_of_program_partials, lambda: [torch.randn(3)], "eager")


def _index_with_bounds(x):
    import collections
    names = ["q", "k", "v", "k"]
    dims = (4, 6, 4, 6)
    window = collections.deque("abcb")
    return x * names.index("k", 2) + dims.index(4, 1) * 10 + names.index("k", -1) * 100 + \
        window.index("b", 2) * 1000 + names.index("k", 0, 2) + dims.index(6, -3, -1)


def test_index_with_a_start_searches_from_the_start():
    check_one_graph(_index_with_bounds, lambda: [torch.randn(3)], "eager")


class _CallableByType:
    def __call__(self, t):
        return t * 2

    def method(self):
        return 1


class _Plain:
    pass


def _callable_by_type(x):
    import functools

    def gen():
        yield 1
    p = _Plain()
    p.__call__ = lambda: 1  # an instance attribute: CPython looks only at the type
    c = _CallableByType()
    flags = [callable(c), callable(c.method), callable(_Plain), callable(p), callable(gen()),
             callable(x), callable(x.sum), callable(iter([1])), callable({}), callable(print),
             callable(functools.partial(c, 1)), callable(str.upper), callable(3)]
    return x * sum(f << i for i, f in enumerate(flags))


def test_callable_looks_at_the_type():
    check_one_graph(_callable_by_type, lambda: [torch.randn(3)], "eager")


def _int_with_a_base(x):
    return x * int("ff", 16) + int("17", base=8) + int("0b101", 0) + int(b"12") + float(" 2.5 ")


def test_int_with_a_base_folds():
    check_one_graph(_int_with_a_base, lambda: [torch.randn(3)], "eager")


def _operator_spellings(x):
    import operator
    a = [1]
    b = operator.iconcat(a, [2])
    y = x.clone()
    y = operator.ifloordiv(y, 2)
    y = operator.ipow(y, 2)
    y = operator.imod(y, 3)
    try:
        operator.concat(1, 2)
        caught = 0
    except TypeError:
        caught = 1
    return y + pow(x, 2) + pow(2, x) + pow(3, 2, 5) + len(a) + (a is b) + caught + \
        len(operator.concat((1,), (2, 3))) + operator.ixor(5, 3) + operator.ilshift(1, 3)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_pow_and_every_in_place_operator_function(backend):
    check_one_graph(_operator_spellings, lambda: [torch.randn(3)], backend, gradients=False)


class _EqOnly:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, _EqOnly) and other.v == self.v


class _Signed:
    def __init__(self, v):
        self.v = v

    def __neg__(self):
        return _Signed(-self.v)

    def __pos__(self):
        return _Signed(self.v + 100)

    def __invert__(self):
        return self.v * 3

    def __abs__(self):
        return abs(self.v)


def _not_equal_from_eq_and_unary_dunders(x):
    a, b = _EqOnly(1), _EqOnly(1)
    flags = [a != b, a != _EqOnly(2), a != 3, 3 != a, a == b]
    s = _Signed(-2)
    try:
        -_EqOnly(1)
        caught = 0
    except TypeError:
        caught = 1
    return x * sum(f << i for i, f in enumerate(flags)) + (-s).v + (+s).v + ~s + abs(s) + \
        caught + (-_Signed(x)).v


def test_not_equal_asks_eq_and_unary_operators_call_their_dunders():
    check_one_graph(_not_equal_from_eq_and_unary_dunders, lambda: [torch.randn(3)], "eager")


def _min_max_of_objects(x):
    from tests.idiom_sweep_cases import _Version
    a, b, c = _Version(1, 2), _Version(1, 5), _Version(1, 5)
    return x * max(a, b).minor + min([b, a, c]).minor + (max(b, c) is b) * 10 + \
        (min(c, b) is c) * 100 + max(x.unbind(0)[:1] and [a, c]).minor


def test_min_max_of_objects_compare_by_their_dunders():
    check_one_graph(_min_max_of_objects, lambda: [torch.randn(3)], "eager")


def _sets_of_tuples_and_shapes(x):
    shapes = {x.shape, x[0].shape, x.shape}
    pairs = {(1, 2), (1, 2), (3,)}
    try:
        {([1],)}  # noqa: B018 -- the unhashable member under test
        caught = 0
    except TypeError:
        caught = 1
    return x * len(shapes) + len(pairs) + (torch.Size([6]) in shapes) + ((1, 2) in pairs) + \
        caught + (x.shape in frozenset([x.shape])) + sum(len(s) for s in shapes)


def test_a_set_holds_tuples_and_static_shapes():
    check_one_graph(_sets_of_tuples_and_shapes, lambda: [torch.randn(4, 6)], "eager")


def _counter_arithmetic(x):
    import collections
    c = collections.Counter("abracadabra")
    total = c + collections.Counter(a=1, z=2)
    less = c - collections.Counter(a=10)
    union = c | collections.Counter(b=9)
    common = c & collections.Counter(b=1)
    neg = -collections.Counter(a=-2, b=3)
    acc = collections.Counter(a=1)
    acc += collections.Counter(a=2)
    try:
        c + {"a": 1}
        caught = 0
    except TypeError:
        caught = 1
    od = collections.OrderedDict(a=1) | {"b": 2}
    od.move_to_end("a")
    return x * (total["a"] + total["z"]) + len(less) + union["b"] + common["b"] + neg["a"] + \
        acc["a"] + caught + (list(od)[0] == "b") + c.most_common(1)[0][1] + c["zz"]


def test_counter_operators_and_folded_dict_subclasses_keep_their_class():
    check_one_graph(_counter_arithmetic, lambda: [torch.randn(3)], "eager")


class _ConfigError(ValueError):
    """A library's own kind of error: a name, a class attribute, no code."""
    code = 3


class _StrictConfigError(_ConfigError):
    pass


def _own_exception_classes(x):
    import dataclasses
    try:
        raise _ConfigError("bad width")
    except ValueError as e:
        n = len(str(e)) + e.code + isinstance(e, _ConfigError) + len(e.args)
    try:
        raise _StrictConfigError("m")
    except _ConfigError as e:
        n += (type(e) is _StrictConfigError) * 10
    try:
        raise dataclasses.FrozenInstanceError("x")
    except AttributeError:
        n += 100
    return x + n


def test_a_librarys_own_exception_class_is_raised_and_caught():
    check_one_graph(_own_exception_classes, lambda: [torch.randn(3)], "eager")


class _WithEmptyContainers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.extra = torch.nn.ModuleList()
        self.heads = torch.nn.ModuleDict({"a": torch.nn.Identity()})
        self.scales = torch.nn.ParameterList()

    def forward(self, x):
        if self.extra:
            x = x + 1000
        if self.heads:
            x = x + 1
        if not self.scales:
            x = x + 10
        return x


def _truth_and_length_of_modules(x, module):
    empty = torch.nn.Sequential()
    built = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh())
    return module(x) + len(built) * 100 + bool(empty) + (5 if built else 50) + \
        (0 if empty else 7) + len(empty) * 1000


def test_an_empty_module_container_is_false_and_a_built_one_has_its_length():
    module = _WithEmptyContainers()
    check_one_graph(_truth_and_length_of_modules, lambda: [torch.randn(3), module], "eager")


def _slices_of_sequentials(x, seq):
    built = torch.nn.Sequential(torch.nn.ReLU(), seq[0])
    return seq[1:](x), seq[:-1](x), seq[::2](x), x + len(seq[1:3]) + len(seq[5:]), \
        seq[2:][0](x), built[1](x), built[-1:](x), seq[1:][1:](x)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_slice_of_a_sequential_is_a_sequential_built_while_tracing(backend):
    torch.manual_seed(0)
    seq = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 3),
                              torch.nn.Tanh())
    check_one_graph(_slices_of_sequentials, lambda: [torch.randn(2, 3), seq], backend)
    tc.reset()
    _, sliced = tc.compile(lambda x, s: (s[1:](x), s[1:]), backend="eager",
                           fullgraph=True)(torch.randn(2, 3), seq)
    assert type(sliced) is torch.nn.Sequential and list(sliced._modules) == ["1", "2", "3"]
    assert sliced[1] is seq[2]


def _values_of_tables_written_in_the_program(x):
    table = torch.tensor([[1, 2], [3, 4]])
    vals = table.tolist()
    vals[0].append(9)
    written = torch.tensor([1.0, 2.0])
    written.add_(1)
    return x * vals[1][0] + (torch.tensor(3) + 1).item() + int(torch.tensor(2)) + \
        float(torch.tensor([1.5])) + len(vals[0]) + sum(torch.as_tensor([4, 5]).tolist()), \
        written


def _values_of_a_written_table(x):
    table = torch.tensor([1.0, 2.0])
    table.add_(x.sum())
    return table.tolist()


def test_tolist_item_int_of_a_table_the_program_wrote():
    check_one_graph(_values_of_tables_written_in_the_program, lambda: [torch.randn(3)],
                    "eager")
    tc.reset()
    with pytest.raises(GraphBreakError, match="data-dependent"):
        tc.compile(_values_of_a_written_table, backend="eager", fullgraph=True)(torch.ones(2))


@torch.inference_mode()
def _tripled_for_inference(t):
    return t * 3


def _inference_mode_regions(x):
    with torch.inference_mode():
        y = x * 2 + torch.is_inference_mode_enabled()
        grad = torch.is_grad_enabled()
    return y.sum(-1) + grad + _tripled_for_inference(x).sum(-1) + \
        torch.is_inference_mode_enabled() * 10 + torch.is_grad_enabled()


def test_inference_mode_regions_and_the_query_inside_them():
    check_one_graph(_inference_mode_regions, lambda: [torch.randn(2, 3)], "eager",
                    gradients=False)
    tc.reset()
    compiled = tc.compile(_inference_mode_regions, backend="eager", fullgraph=True)
    x = torch.randn(2, 3)
    with torch.inference_mode():   # the global mode is guarded: a second graph
        torch.testing.assert_close(compiled(x), _inference_mode_regions(x))


def _grad_fn_of_tensors_without_grad(x):
    y = x * 2
    return y + (x.grad_fn is None) + (y.grad_fn is None) * 10


def test_grad_fn_of_a_tensor_that_does_not_require_grad_is_none():
    check_one_graph(_grad_fn_of_tensors_without_grad, lambda: [torch.randn(3)], "eager",
                    gradients=False)
    tc.reset()
    with pytest.raises(GraphBreakError, match="grad_fn"):
        tc.compile(_grad_fn_of_tensors_without_grad, backend="eager",
                   fullgraph=True)(torch.randn(3, requires_grad=True))


def _augmented_assignments_on_tensors(x):
    y = x * 1
    y **= 2
    z = x.detach() * 3
    z //= 2
    m = x.detach() * 3
    m %= 2
    b = (x > 0).int()
    b |= (x < -1).int()
    b &= 1
    b ^= 1
    b <<= 2
    b >>= 1
    w = x * 1
    w @= torch.ones(3, 3)   # no __imatmul__ on Tensor: a new tensor, w itself unchanged
    return y, z, m, b, w


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_every_augmented_assignment_writes_its_tensor_under_aot(backend):
    check_one_graph(_augmented_assignments_on_tensors, lambda: [torch.randn(3)], backend)
