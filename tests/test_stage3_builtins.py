"""Stage 3: builtins and standard-library types inside the traced code, in every spelling.

A corpus of small functions written for these tests, one feature each: ``fromkeys`` of dict
and its subclasses, namedtuple classes made (or extended with methods) by the program,
NumPy's dtype descriptions, ``min``/``max`` of one-element tensors, ``in`` that stops at the
first match, deques, ``obj.__class__``, grad-mode decorators applied inside the function,
a list indexed by a tensor whose value the graph knows, ``torch.backends`` flags and
PyTorch's legacy constructors (``torch.Tensor([k])``), ``list.sort`` with a key, ``vars``. Each
must be one graph with no break (``fullgraph=True``) under every backend and give eager's
values and gradients. What must stay a break -- a membership test that really compares a
tensor, a list indexed by an input tensor -- is checked to break with its reason, and what
the compiled code assumed (a flag, a class's defaults or methods) to recompile when it
changes.
"""

import collections
import contextlib
import dataclasses
import typing

import numpy as np
import pytest
import torch

import tutorcompile as tc
from tests.capture_cases import check_one_graph

pytestmark = pytest.mark.stage3

BACKENDS = ["eager", "aot_eager", "inductor"]


# --- 1. fromkeys of dict and of its subclasses -------------------------------------------------
class Upper(dict):
    """A dict subclass whose own ``__setitem__`` (Python) ``fromkeys`` must go through."""

    def __setitem__(self, key, value):
        super().__setitem__(key.upper(), value)


class Tally(collections.OrderedDict):
    def total(self):
        return sum(self.values())


def fromkeys_every_spelling(x):
    plain = dict.fromkeys("ab", 2)
    ordered = collections.OrderedDict.fromkeys(("p", "q"), value=x)
    ordered.move_to_end("p")
    defaulted = collections.defaultdict.fromkeys(iter(plain))
    defaulted.setdefault("c", 5)
    upper = Upper.fromkeys(["k"], 3)
    tally = Tally.fromkeys("xy", x * 2)
    again = plain.fromkeys([1, 2])   # through an instance: its class's method
    return x * plain["b"] + list(ordered.values())[0] + defaulted["c"] + upper["K"] + \
        tally.total() + len(again) + (defaulted["a"] is None)


def dict_subclass_made_inside(x):
    tally = Tally(first=x, second=2)
    tally["third"] = x * 3
    tally.move_to_end("first")
    return tally.total() * len(tally) + (list(tally)[-1] == "first")


# --- 2. namedtuple classes ---------------------------------------------------------------------
def namedtuple_made_inside(x, y):
    Point = collections.namedtuple("Point", ["u", "v", "w"], defaults=(1, None))
    Pair = collections.namedtuple("Pair", "first second")
    p = Point(x, w=y)
    q = p._replace(v=3)
    pair = Pair._make([x, y])
    return q.u * q.v + p.w + pair.first * pair.second + len(Point._fields) + \
        (type(p).__name__ == "Point") + (p.v if p.v is not None else 10)


class Span(typing.NamedTuple):
    lo: torch.Tensor
    hi: torch.Tensor
    scale: float = 2.0

    def width(self):
        return (self.hi - self.lo) * self.scale

    @property
    def middle(self):
        return (self.lo + self.hi) / 2

    @staticmethod
    def unit():
        return 1.0

    @classmethod
    def arity(cls):
        return len(cls._fields)


class Interval(collections.namedtuple("Interval", "a b")):
    __slots__ = ()

    def length(self):
        return self.b - self.a


class Checked(collections.namedtuple("Checked", "a b")):
    """A namedtuple subclass with its own ``__new__`` (inlined, down to ``tuple.__new__``)."""

    def __new__(cls, a, b=1.5):
        return super().__new__(cls, a, b * 2)


def namedtuple_methods(x, y):
    span = Span(x, y)
    wide = span._replace(scale=3.0)
    interval = Interval(x, y)
    checked = Checked(x)
    return span.width() + wide.width() + span.middle * span.unit() + span.arity() + \
        interval.length() + checked.a * checked.b + Checked._make([y, 2]).b


# --- 3. NumPy and torch dtype descriptions, folded ---------------------------------------------
def dtype_descriptions(x):
    tiny = np.finfo(np.float32).tiny
    low = np.iinfo("int16").min
    width = np.dtype("float64").itemsize + np.finfo(np.dtype(np.float16)).bits + \
        np.iinfo(np.int8).dtype.itemsize
    return x.clamp(min=float(tiny)) + low / 1000 + width + torch.finfo(x.dtype).eps


# --- 4. min and max of one-element tensors -----------------------------------------------------
def min_max_of_scalar_tensors(a, b, c):
    s, t = a.sum(), b.sum()
    clipped = min(max(s, 0), 1)
    other = max(0, min(1, t))
    return max(s, t) - min(s, t) + clipped * other + max([s, -5.0, t]) + min(s, s) + c


# --- 5. `in` stops at the first match ----------------------------------------------------------
class Loud:
    """Compares equal to anything, noting each comparison (CPython's order is observable)."""

    def __init__(self, log):
        self.log = log

    def __eq__(self, other):
        self.log.append(other)
        return True


def membership_stops_at_first_match(x):
    log = []
    values = [1, 2, 3, x]
    hits = (3 in values) + (x in [x, 0]) + (7 not in (1, 2)) + ("b" in ("a", "b", x))
    hits += Loud(log) in ["first", x]   # equal to the first: the tensor is never compared
    hits += ([x, 1] == [x, 1]) + ([1] == (1,)) * 10   # identity first; a list is no tuple
    return x * hits + len(log)


# --- 6. deques ---------------------------------------------------------------------------------
def deque_methods(x):
    d = collections.deque([x, 1, 2], maxlen=4)
    d.append(x * 2)            # full now
    d.appendleft(10)           # drops the rightmost
    d.extend([3, 4])           # drops two from the left
    d.extendleft(collections.deque([5]))
    first = d.popleft()
    d.rotate(-1)
    copy = d.copy()
    copy.pop()
    copy.insert(1, 6)
    d += [7]
    joined = collections.deque([x]) + collections.deque([8])
    return sum(t for t in d if isinstance(t, torch.Tensor)) * first + len(copy) + \
        copy.maxlen + joined[0] * joined[-1] + (7 in d) + d.index(7)


# --- 7. a value's class ------------------------------------------------------------------------
def class_of_values(x):
    label = f"{x.__class__.__name__}:{[].__class__.__name__}"
    same = (x.__class__ is torch.Tensor) + ({}.__class__ is dict) + \
        (collections.deque().__class__ is collections.deque)
    return x * len(label) + same if label.startswith("Tensor") else x


# --- 8. grad-mode regions as decorators, applied inside ----------------------------------------
def decorators_applied_inside(x, w):
    @torch.no_grad()
    def frozen(t):
        return (t * w + 1) * 2

    @torch.enable_grad()
    def live(t):
        return t * w

    with torch.no_grad():
        inside = live(x)       # enable_grad inside no_grad: still differentiable
    return frozen(x) + inside + live(x) + len(frozen.__name__)


# --- 9. a list indexed by a tensor the graph knows ---------------------------------------------
def index_with_a_constant_tensor(a, b):
    items = [a, b, a + b, a * b]
    i = torch.as_tensor(2)
    j = torch.tensor(0) + 1     # computed from constants only: known too
    return items[i] + items[j] + (10, 20, 30)[torch.tensor(-1)] + items[torch.tensor(1) * 3]


# --- 10. torch.backends flags, read and guarded ------------------------------------------------
def reads_backend_flags(x):
    if torch.backends.cuda.matmul.allow_tf32:
        x = x + 1
    return x * 2 if torch.backends.cudnn.enabled else x * 3


# --- 10b. C functions of SciPy's pocketfft: fast FFT sizes, folded on constants -----------------
try:   # (SciPy is no dependency of the project: the case is skipped without it)
    import scipy.fft as scipy_fft
    import scipy.fftpack as scipy_fftpack
    from scipy.fft._pocketfft import pypocketfft
except ImportError:
    scipy_fft = None


def pads_to_a_fast_fft_size(x):
    # (mega-pytorch pads its EMA kernel so: ``scipy.fftpack.next_fast_len(N + M - 1)``; the
    # function in scipy.fft is an lru_cache around the C ``good_size``)
    n = x.shape[-1]
    sizes = (scipy_fftpack.next_fast_len(2 * n - 1), scipy_fft.next_fast_len(2 * n + 1, True),
             scipy_fft.next_fast_len(target=97, real=False), scipy_fft.prev_fast_len(100),
             pypocketfft.good_size(n * 11, False))
    f = torch.fft.rfft(x, n=sizes[0])
    return torch.fft.irfft(f * f, n=sizes[0])[..., :n] * sum(sizes)


@pytest.mark.skipif(scipy_fft is None, reason="SciPy is not installed")
@pytest.mark.parametrize("backend", BACKENDS)
def test_fast_fft_sizes_from_scipy_are_constants(backend):
    check_one_graph(pads_to_a_fast_fft_size, lambda: [torch.randn(2, 7, requires_grad=True)],
                    backend)


# --- 11. PyTorch's legacy constructors ----------------------------------------------------------
def legacy_constructors(x, k=4):
    # (colt5-attention: ``torch.Tensor([k]).to(s)``; a float tensor where torch.tensor's is
    # an integer one)
    a = torch.Tensor([k, 2]).to(x)
    b = torch.LongTensor([1, x.shape[0]])
    c = torch.Tensor(2, x.shape[0]).fill_(1.0)
    d = torch.FloatTensor(x.shape).zero_()
    return x * a.sum() + b.sum() + c.sum() + d.sum() + torch.Tensor().numel()


# --- 12. list.sort with a key, vars() -----------------------------------------------------------
class _Settings:
    def __init__(self):
        self.scale, self.shift = 2.0, 1.0


SETTINGS = _Settings()


def sort_in_place_and_vars(x, y):
    ts = [x * 3, y[:2], y]
    ts.sort(key=lambda t: t.shape[0], reverse=True)   # tensors ordered by a constant key
    made = _Settings()
    made.shift = 5.0
    knobs = vars(SETTINGS)
    # items sorted by their distinct keys: Python never compares the tensors (gpytorch)
    first = sorted({"b": x * 2, "a": y}.items())[0][1]
    return ts[0] * knobs["scale"] + knobs["shift"] + vars(made)["shift"] + ts[-1].sum() + first


CASES = {
    "sort_in_place_and_vars": (sort_in_place_and_vars,
                               lambda: [torch.randn(3), torch.randn(3)]),
    "legacy_constructors": (legacy_constructors, lambda: [torch.randn(3)]),
    "fromkeys_every_spelling": (fromkeys_every_spelling, lambda: [torch.randn(3)]),
    "dict_subclass_made_inside": (dict_subclass_made_inside, lambda: [torch.randn(3)]),
    "namedtuple_made_inside": (namedtuple_made_inside, lambda: [torch.randn(3), torch.randn(3)]),
    "namedtuple_methods": (namedtuple_methods, lambda: [torch.randn(3), torch.randn(3)]),
    "dtype_descriptions": (dtype_descriptions, lambda: [torch.randn(3)]),
    "min_max_of_scalar_tensors": (min_max_of_scalar_tensors,
                                  lambda: [torch.randn(4) * 0.3, torch.randn(4), torch.randn(3)]),
    "membership_stops_at_first_match": (membership_stops_at_first_match,
                                        lambda: [torch.randn(3)]),
    "deque_methods": (deque_methods, lambda: [torch.randn(3)]),
    "class_of_values": (class_of_values, lambda: [torch.randn(3)]),
    "decorators_applied_inside": (decorators_applied_inside,
                                  lambda: [torch.randn(3), torch.randn(3)]),
    "index_with_a_constant_tensor": (index_with_a_constant_tensor,
                                     lambda: [torch.randn(3), torch.randn(3)]),
    "reads_backend_flags": (reads_backend_flags, lambda: [torch.randn(3)]),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(CASES))
def test_one_graph_with_eager_values_and_gradients(name, backend):
    check_one_graph(*CASES[name], backend)


# --- min / max: exactly CPython's choice, ties and NaN included --------------------------------
def min_max_ties(a):
    return max(0, a) + 3 * min(a, 0) + 5 * max(a, 0.0)


@pytest.mark.parametrize("value", [0.0, 1.0, -1.0, float("nan")])
def test_min_max_keep_the_item_python_keeps_on_ties_and_nan(value):
    """``max(0, a)`` keeps 0 unless ``a > 0``: at a tie the gradient to ``a`` is 0, at NaN the
    result is 0 (``torch.maximum`` would split the gradient; ``clamp`` would give NaN)."""
    tc.reset()
    eager_in = torch.tensor(value, requires_grad=True)
    compiled_in = torch.tensor(value, requires_grad=True)
    expected = min_max_ties(eager_in)
    got = tc.compile(min_max_ties, backend="aot_eager", fullgraph=True)(compiled_in)
    torch.testing.assert_close(got, expected, equal_nan=True)
    expected.backward()
    got.backward()
    torch.testing.assert_close(compiled_in.grad, eager_in.grad)


def test_max_of_a_tensor_of_many_elements_raises_what_eager_raises():
    def biggest(x):
        return max(x, 0)
    tc.reset()
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        biggest(torch.randn(3))
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        tc.compile(biggest, backend="eager")(torch.randn(3))


def test_min_max_whose_result_dtype_depends_on_the_winner_is_a_break():
    def mixed(x):
        return max(x.sum().int(), 0.5) * x   # eager: an int tensor, or the float 0.5
    tc.reset()
    out = tc.explain(mixed)(torch.randn(3))
    assert out.graph_break_count >= 1
    assert "dtypes" in out.break_reasons[0].reason


# --- what must stay a break --------------------------------------------------------------------
def membership_that_compares_a_tensor(x):
    return x * (3 in [1, x, 3])   # ``x == 3`` comes first: data-dependent


def test_in_that_must_compare_a_tensor_is_a_break():
    tc.reset()
    x = torch.tensor([3.0])
    out = tc.explain(membership_that_compares_a_tensor)(x)
    assert out.graph_break_count == 1
    assert "data-dependent ==" in out.break_reasons[0].reason
    torch.testing.assert_close(tc.compile(membership_that_compares_a_tensor,
                                          backend="eager")(x), x)


def index_with_an_input(a, i):
    return [a, a + 1, a + 2][i]


def index_with_a_size(a, i):
    return [a, a + 1, a + 2, a + 3, a + 4][torch.tensor(a.shape[0]) - 2]


def index_with_a_written_constant(a, i):
    j = torch.tensor(0)
    j.add_(a.shape[0] - 2)       # written in place: its value is not taken as known
    return [a, a + 1, a + 2][j]


@pytest.mark.parametrize("fn, dynamic", [
    (index_with_an_input, False), (index_with_an_input, True), (index_with_a_size, True),
    (index_with_a_written_constant, False), (index_with_a_written_constant, True)])
def test_a_list_indexed_by_a_tensor_not_made_of_constants_is_a_break(fn, dynamic):
    """An input's value, or one computed from a dynamic size (whose example value is only
    the hint: the graph must not bake it in), or a constant written in place, is not known.
    (With static shapes a size is a guarded constant: ``index_with_a_size`` is one graph.)"""
    tc.reset()
    compiled = tc.compile(fn, backend="eager", dynamic=dynamic)
    for n in (3, 4):
        a, i = torch.randn(n), torch.tensor(2)
        torch.testing.assert_close(compiled(a, i), fn(a, i))
    out = tc.explain(fn, dynamic=dynamic)(torch.randn(3), torch.tensor(2))
    assert out.graph_break_count == 1
    assert "with a tensor (its value is not known while tracing)" in out.break_reasons[0].reason


def namedtuple_with_a_tensor_default(x):
    Box = collections.namedtuple("Box", ["a", "b"], defaults=[x])
    return Box(1).b * 2


class Noted(collections.namedtuple("Noted", "a b")):
    def __init__(self, a, b):
        self.note = "made"   # (an __init__ on a tuple: runs after the fields are set)


def namedtuple_with_its_own_init(x):
    return Noted(x, 1).a + x


def decorated_generator(x):
    @torch.no_grad()
    def halves(t):
        yield from t.chunk(2)
    return sum(halves(x))


@pytest.mark.parametrize("fn, reason", [
    (namedtuple_with_a_tensor_default, "namedtuple with a defaults"),
    (namedtuple_with_its_own_init, "its own __init__"),
    (decorated_generator, "generator function"),
])
def test_unmodelled_spellings_stay_breaks_with_a_reason(fn, reason):
    tc.reset()
    x = torch.randn(4)
    out = tc.explain(fn)(x)
    assert out.graph_break_count >= 1
    assert reason in out.break_reasons[0].reason
    torch.testing.assert_close(tc.compile(fn, backend="eager")(x), fn(x))


# --- what the compiled code assumed is guarded -------------------------------------------------
def test_a_backend_flag_changed_after_compiling_recompiles():
    tc.reset()
    compiled = tc.compile(reads_backend_flags, backend="eager", fullgraph=True)
    x = torch.randn(3)
    before_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for tf32, cudnn in [(False, True), (True, True), (True, False)]:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            # (the cudnn flags through their context manager: once torch.testing's internals
            # are imported -- the OpInfo sweep does -- setting them directly raises)
            with torch.backends.cudnn.flags(enabled=cudnn):
                torch.testing.assert_close(compiled(x), reads_backend_flags(x))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before_tf32


@contextlib.contextmanager
def _tf32_off():
    # (invariant-point-attention wraps its attention in this)
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = before


def writes_backend_flags(x):
    with _tf32_off():
        y = x @ x.t()
    matmul = torch.backends.cuda.matmul
    name = "allow_tf32"
    setattr(matmul, name, getattr(matmul, name))
    matmul.allow_fp16_reduced_precision_reduction = \
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    return y + 1


def toggles_a_backend_flag(x):
    torch.backends.cuda.matmul.allow_tf32 = not torch.backends.cuda.matmul.allow_tf32
    return x + 1


def test_a_backend_flag_written_with_its_own_value_is_no_break_and_is_guarded():
    # a write that keeps the setting is nothing to replay; one that changes it (here, once
    # the caller enabled TF32) would leave the graph's kernels under the caller's setting:
    # a break with a reason, and eager's effect on the flag
    tc.reset()
    x, before = torch.randn(3, 3), torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        check_one_graph(writes_backend_flags, lambda: [torch.randn(3, 3, requires_grad=True)],
                        "eager")
        compiled = tc.compile(writes_backend_flags, backend="eager")
        torch.testing.assert_close(compiled(x), writes_backend_flags(x))
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.testing.assert_close(compiled(x), writes_backend_flags(x))
        assert torch.backends.cuda.matmul.allow_tf32 is True
        reasons = [r.reason for r in tc.explain(writes_backend_flags)(x).break_reasons]
        assert reasons and "setting 'allow_tf32' changed" in reasons[0]
        torch.backends.cuda.matmul.allow_tf32 = False
        tc.compile(toggles_a_backend_flag, backend="eager")(x)
        assert torch.backends.cuda.matmul.allow_tf32 is True
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


Corner = collections.namedtuple("Corner", "x y", defaults=[1.0])


def uses_a_default(x):
    return Corner(x).y * x


def test_a_namedtuple_default_changed_after_compiling_recompiles():
    tc.reset()
    compiled = tc.compile(uses_a_default, backend="eager", fullgraph=True)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x)
    try:
        Corner.__new__.__defaults__ = (4.0,)
        torch.testing.assert_close(compiled(x), x * 4)
    finally:
        Corner.__new__.__defaults__ = (1.0,)


class Ruler(typing.NamedTuple):
    lo: torch.Tensor

    def measure(self):
        return self.lo * 2


def measures(x):
    return Ruler(x).measure()


def test_a_namedtuple_method_replaced_after_compiling_recompiles():
    tc.reset()
    compiled = tc.compile(measures, backend="eager", fullgraph=True)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x * 2)
    original = Ruler.measure
    try:
        Ruler.measure = lambda self: self.lo * 5
        torch.testing.assert_close(compiled(x), x * 5)
    finally:
        Ruler.measure = original


def test_a_namedtuple_class_made_inside_gives_instances_like_eagers():
    def make(x):
        Row = collections.namedtuple("Row", "a b", defaults=[0])
        return Row(x), Row(x, x * 2)
    tc.reset()
    x = torch.randn(3)
    first, second = tc.compile(make, backend="eager", fullgraph=True)(x)
    expected = make(x)
    assert type(first).__name__ == "Row" and type(first)._fields == ("a", "b")
    assert type(first).__module__ == __name__   # the caller's module, as namedtuple reads it
    assert first.b == 0 and type(first) is type(second)
    torch.testing.assert_close(second.b, expected[1].b)


def test_a_deque_that_escapes_is_rebuilt_with_its_maxlen():
    def grow(x):
        d = collections.deque([x], maxlen=2)
        d.extend([x + 1, x + 2])
        return d
    tc.reset()
    x = torch.randn(3)
    got = tc.compile(grow, backend="eager", fullgraph=True)(x)
    assert isinstance(got, collections.deque) and got.maxlen == 2 and len(got) == 2
    torch.testing.assert_close(list(got), [x + 1, x + 2])


def test_a_function_decorated_inside_escapes_as_a_decorated_function():
    def make(w):
        @torch.no_grad()
        def scale(t):
            return t * w
        return w * 1, scale
    tc.reset()
    w = torch.randn(3, requires_grad=True)
    _, scale = tc.compile(make, backend="eager", fullgraph=True)(w)
    out = scale(torch.ones(3))
    assert not out.requires_grad
    torch.testing.assert_close(out, w.detach())


def test_the_legacy_constructor_follows_the_default_dtype():
    """``torch.Tensor([2])`` is of the default dtype, read when the code runs: guarded."""
    compiled = tc.compile(lambda x: (x + 1, torch.Tensor([2])), fullgraph=True)
    x = torch.randn(3)
    assert compiled(x)[1].dtype == torch.float32
    torch.set_default_dtype(torch.float64)
    try:
        assert compiled(x)[1].dtype == torch.float64
    finally:
        torch.set_default_dtype(torch.float32)
        tc.reset()


def test_sorting_pairs_whose_keys_tie_and_values_are_tensors_is_a_break():
    """Only where Python would compare two tensors (equal first elements) is it a break."""
    def f(x, y):
        return sorted([(1, x), (1, y)])[0][1] * 2
    x, y = torch.randn(1), torch.randn(1)
    report = tc.explain(f)(x, y)
    assert report.graph_break_count >= 1
    assert "ordering by" in report.break_reasons[0].reason
    torch.testing.assert_close(tc.compile(f)(x, y), f(x, y))
    tc.reset()


# --- str / repr / f-strings of objects whose class writes __str__ or __repr__ --------------------
class Shelf:
    """``__str__`` and ``__repr__`` both written: ``str`` takes the first, ``!r`` the second."""

    def __init__(self, label, slots):
        self.label, self.slots = label, slots

    def __str__(self):
        return f"{self.label}[{self.slots}]"

    def __repr__(self):
        return "Shelf(" + repr(self.label) + ", " + str(self.slots) + ")"


class Tag:
    """Only ``__repr__``: ``str(tag)`` and ``f"{tag}"`` fall back to it, as object.__str__ does."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "<" + self.name.upper() + ">"


@dataclasses.dataclass
class Knob:
    """A dataclass: its generated ``__repr__`` sits behind a guard against self-reference."""
    name: str
    turns: int = 2
    marks: list = dataclasses.field(default_factory=list)


class Plain:
    pass


def text_of_objects_made_inside(x):
    shelf = Shelf("top", 3)
    tag = Tag("io")
    knob = Knob("gain", marks=[1, "a"])
    parts = [str(shelf), repr(shelf), f"{shelf}", f"{shelf!r}", f"{shelf!s:>12}",
             str(tag), repr(tag), f"{tag}|{tag!r}", repr(knob), f"{knob}", str([tag, shelf])]
    return x * len("".join(parts)), parts


def text_of_an_argument(x, shelf):
    return x + len(str(shelf)), f"<{shelf}>"


@pytest.mark.parametrize("backend", BACKENDS)
def test_str_and_repr_of_objects_with_their_own_methods_are_one_graph(backend):
    check_one_graph(text_of_objects_made_inside, lambda: [torch.randn(3)], backend)


def test_str_of_an_argument_reads_its_fields_under_guards():
    tc.reset()
    compiled = tc.compile(text_of_an_argument, backend="eager", fullgraph=True)
    shelf, x = Shelf("left", 2), torch.randn(3)
    expected = text_of_an_argument(x, shelf)
    got = compiled(x, shelf)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1] == "<left[2]>"
    shelf.label = "a much longer label"   # the text was computed while tracing: recompiles
    got, expected = compiled(x, shelf), text_of_an_argument(x, shelf)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1]


def default_repr(x):
    return x + 1, str(Plain())


def format_spec_on_plain_format(x):
    try:
        text = f"{Tag('t'):>9}"
    except TypeError as e:
        text = str(e)
    return x + 1, text


def test_text_that_a_graph_cannot_know_or_that_python_refuses():
    """``object.__repr__`` prints an address (a break that says so); ``object.__format__``
    refuses a spec with the TypeError eager raises."""
    tc.reset()
    x = torch.randn(3)
    out = tc.explain(default_repr)(x)
    assert out.graph_break_count >= 1 and "str" in out.break_reasons[0].reason
    got = tc.compile(format_spec_on_plain_format, backend="eager", fullgraph=True)(x)
    assert got[1] == format_spec_on_plain_format(x)[1] == \
        "unsupported format string passed to Tag.__format__"
