# ruff: noqa: UP003, UP007, UP008, UP031, UP032, UP033, UP045, B009, B010
"""A sweep of Python and PyTorch idioms, each a small function on tensors (``test_stage3_
idiom_sweep``). Written for this sweep in the style of PyTorch's Dynamo tests: one feature a
model author uses per case -- every builtin, the containers and their methods, the standard
library (collections, dataclasses, enum, functools, itertools, operator, math, contextlib),
the statements (match, try, while/else, del), user classes and their dunders, nn.Module
containers and walks, and the tensor queries that branch a model.

It is not a test module, so ``assert`` statements stay CPython's bytecode (pytest rewrites
those of test modules). ``CASES`` maps a name to a :class:`Case`.
"""

import abc
import collections
import contextlib
import dataclasses
import enum
import functools
import itertools
import math
import operator
import typing
from typing import TYPE_CHECKING, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:  # never true when running: the import below must not be traced
    from collections.abc import Iterator  # noqa: F401


@dataclasses.dataclass
class Case:
    """``fn(*tensors, *extras)``: ``shapes`` are the tensors' shapes (fresh random values per
    call), ``module`` makes an nn.Module passed last (one object for every call)."""
    fn: typing.Callable
    shapes: tuple = ((4, 6),)
    module: typing.Callable | None = None
    grad: bool = False  # also run under aot_eager and inductor, with gradients


CASES: dict[str, Case] = {}


def case(*shapes, module=None, grad=False):
    def register(fn):
        CASES[fn.__name__] = Case(fn, shapes or ((4, 6),), module, grad)
        return fn
    return register


# --- builtins ---------------------------------------------------------------------------------
@case(grad=True)
def sorted_with_key_and_reverse(x):
    dims = sorted(range(x.dim()), key=lambda d: x.shape[d], reverse=True)
    names = sorted(["bb", "a", "ccc"], key=len)
    return x.permute(*dims) * len(names[-1])


@case()
def min_max_with_key_and_default(x):
    sizes = {"a": 3, "b": 7, "c": 5}
    biggest = max(sizes, key=sizes.get)
    smallest = min(sizes.items(), key=lambda kv: kv[1])[0]
    empty = max([], default=2)
    floor = min((s for s in x.shape if s > 100), default=-1)
    return x * sizes[biggest] + sizes[smallest] + empty + floor


@case(grad=True)
def sum_with_start(x):
    parts = x.unbind(0)
    total = sum(parts, start=torch.zeros(x.shape[-1]))
    count = sum((1 for _ in parts), 10)
    return total * count + sum([0.5, 1.5])


@case()
def any_all_over_generators(x):
    big = any(s > 5 for s in x.shape)
    even = all(s % 2 == 0 for s in x.shape)
    none = any(())
    return x + big * 2 + even * 3 + none + all([])


@case()
def enumerate_with_start(x):
    out = x
    for i, row in enumerate(x[:2], start=1):
        out = out + row * i
    for i, _ in enumerate("ab", 5):
        out = out + i
    return out


@case((4, 6), (4, 6))
def zip_strict(x, y):
    total = 0
    for a, b in zip(x.unbind(0), y.unbind(0), strict=True):
        total = total + a * b
    return total


@case()
def zip_strict_mismatch_caught(x):
    try:
        list(zip([1, 2], [1], strict=True))
        flag = 0
    except ValueError:
        flag = 1
    return x + flag


@case()
def reversed_dict_and_range(x):
    d = {"a": 1, "b": 2, "c": 3}
    keys = list(reversed(d))
    vals = list(reversed(d.values()))
    rng = list(reversed(range(1, 7, 2)))
    return x * rng[0] + vals[0] + len(keys[0])


@case()
def divmod_round_abs(x):
    q, r = divmod(x.shape[-1], 4)
    fq, fr = divmod(7.5, 2)
    return x * q + r + round(2.567, 2) + round(3.5) + abs(-3) + fq + fr + round(17, -1)


@case()
def pow_with_modulus(x):
    return x * pow(3, 4, 5) + pow(2, -1) + pow(2, 10) % 7


@case()
def isinstance_with_tuples_and_unions(x):
    n = 3
    a = isinstance(n, int | float)
    b = isinstance(x, (list, torch.Tensor))
    c = isinstance(2.5, typing.Union[int, str])
    d = isinstance(True, int)
    return x + a + b * 2 + c * 4 + d * 8


class _Thing:
    kind = "thing"

    def __init__(self):
        self.a = 2
        self.b = 3


@case()
def callable_getattr_default_vars(x):
    t = _Thing()
    scale = getattr(t, "scale", 1.5)
    return x * scale + callable(t) + callable(len) * 2 + vars(t)["b"] + len(vars(t)) + \
        (getattr(t, "kind") == "thing")  # noqa: B009


@case()
def identity_checks(x):
    a = [1]
    b = a
    c = [1]
    same = a is b
    other = a is not c
    return x + same + other * 2 + (x is x) + (None is None)


@case()
def iter_next_with_default(x):
    it = iter([x, x * 2])
    first = next(it)
    second = next(it)
    third = next(it, None)
    return first + second if third is None else third


@case()
def iter_with_sentinel(x):
    values = [3, 2, 1, 0, 5]
    it = iter(values.pop, 1)  # pops 5, 0 then stops at 1
    return x * sum(it) + len(values)


@case()
def slice_objects(x):
    s = slice(1, None, 2)
    t = slice(0, 3)
    start, stop, step = s.indices(x.shape[-1])
    return x[:, s].sum() + x[t].sum() + start + stop + step + (s.stop is None)


@case()
def fstrings_with_format_specs(x):
    label = f"{3.14159:.2f}|{7:03d}|{'ab':>4}|{255:x}|{0.5:%}"
    parts = label.split("|")
    return x * float(parts[0]) + int(parts[1]) + len(parts[2]) + int(parts[3], 16) + \
        len(parts[4]) + len(format(12, "b"))


@case()
def str_methods(x):
    name = "layer.0.weight"
    head, sep, tail = name.partition(".")
    pieces = name.split(".")
    joined = "_".join(pieces)
    scale = len(head) + name.startswith("layer") + name.endswith(("bias", "weight")) + \
        len(joined.replace("_", "")) + len(str.upper(tail)) + len("{}-{}".format(1, 22)) + \
        name.rsplit(".", 1)[1].count("e") + name.find("0") + ("0" in pieces)
    return x * scale + len(sep)


@case()
def str_percent_and_conversions(x):
    s = "%d-%s-%.1f" % (3, "ab", 2.25)
    return x * len(s) + int("12") + float("1.5") + len(str(345)) + int("ff", 16) + \
        "Ab_c".title().count("A") + "  pad ".strip().isalpha()


@case()
def bytes_and_bytearray(x):
    b = b"abc"
    ba = bytearray(b"xy")
    ba.append(122)
    return x * b[1] + len(b + b"d") + b.decode().upper().count("A") + ba[-1] + \
        int.from_bytes(bytes([1, 2]), "big") + (3).to_bytes(2, "little")[0]


@case()
def numeric_conversions(x):
    return x * int(3.9) + float(2) + bool(0) + complex(1, 2).imag + int(True) + \
        (7).__index__() + hex(255).count("f") + ord("a") - len(chr(98)) + bin(5).count("1")


# --- containers -------------------------------------------------------------------------------
@case(grad=True)
def list_methods(x):
    xs = [x, x * 2, x * 3]
    xs.insert(1, x - 1)
    last = xs.pop()
    xs.append(last)
    xs.reverse()
    nums = [3, 1, 2, 3]
    nums.remove(3)
    nums.sort(key=lambda v: -v)
    ys = xs.copy()
    ys.clear()
    return sum(xs) * nums[0] + nums.index(1) + nums.count(3) + len(ys)


@case()
def dict_methods(x):
    d = dict(a=x, b=x * 2)
    d.setdefault("c", x * 3)
    d.setdefault("a", x * 100)
    popped = d.pop("b")
    missing = d.pop("zz", None)
    d.update({"e": x + 1}, f=x - 1)
    k, v = d.popitem()
    fresh = dict.fromkeys(["p", "q"], 0)
    return sum(d.values()) + popped + v * len(k) + (missing is None) + len(fresh) + \
        len(list(d.items()))


@case()
def set_methods(x):
    s = {1, 2, 3}
    s.add(4)
    s.discard(10)
    s.discard(1)
    u = s.union({7}) | {8}
    i = s.intersection([2, 3, 9]) & {3}
    d = s.difference({2}) - {4}
    sd = s.symmetric_difference({3, 5})
    return x * len(u) + len(i) + sum(d) + sum(sd) + s.issubset({2, 3, 4, 5}) + \
        s.isdisjoint({0}) + ({2, 3} <= s)


@case()
def comprehensions(x):
    squares = {i: i * i for i in range(4) if i % 2}
    evens = {i % 3 for i in range(10)}
    grid = [[i * j for j in range(3)] for i in range(2)]
    flat = [v for row in grid for v in row if v]
    rows = [x[i] * w for i, w in enumerate(flat[:2])]
    return sum(rows) + sum(squares.values()) + len(evens)


@case()
def dict_views_and_set_operations(x):
    a = {"w": 1, "b": 2, "g": 3}
    b = {"b": 20, "z": 30}
    common = a.keys() & b.keys()
    only = a.keys() - b.keys()
    either = a.keys() | {"q"}
    pairs = a.items() & {("w", 1), ("b", 99)}
    return x * len(common) + len(only) * 10 + len(either) + len(pairs) + ("g" in a.keys()) + \
        (3 in a.values())


@case()
def dict_merge_operators(x):
    base = {"scale": 2, "shift": 1}
    over = {"shift": 5}
    merged = base | over
    merged |= {"extra": 3}
    spread = {**base, **over, "k": 4}
    return x * merged["scale"] + merged["shift"] + merged["extra"] + spread["k"] + len(spread)


@case(grad=True)
def star_unpacking_in_calls_and_literals(x):
    args = (x, 1)
    kwargs = {"dim": -1}
    parts = [*x.chunk(2), *[x[:2]]]
    packed = (*args[1:], 7)
    return torch.sum(*args[:1], **kwargs) + len(parts) + sum(packed) + \
        torch.cat([*parts[:2]], dim=0).sum(**{"dim": 0}).mean()


@case()
def star_assignments(x):
    first, *middle, last = x.unbind(0)
    *init, tail = [1, 2, 3]
    head, *rest = "abc"
    return first + last + sum(middle) + sum(init) * tail + len(rest) + len(head)


@case()
def nested_unpacking(x):
    (a, b), (c, (d, e)) = x.chunk(2), (x[0], x.split([2, 4], dim=-1))
    for (i, j), k in [((1, 2), 3), ((4, 5), 6)]:
        a = a * i + j - k
    return a.sum() + b.sum() + c.sum() + d.sum() + e.sum()


@case()
def zip_transpose(x):
    matrix = [[1, 2, 3], [4, 5, 6]]
    cols = list(zip(*matrix))
    rows = list(map(list, zip(*cols)))
    return x * cols[2][1] + rows[1][0] + len(cols)


@case()
def filter_map_lambdas(x):
    vals = [0, 1, None, 2, 0, 3]
    truthy = list(filter(None, vals))
    doubled = list(map(lambda v: v * 2, truthy))
    odd = list(filter(lambda v: v % 2, range(7)))
    return x * sum(doubled) + len(odd)


@case()
def lambdas_capturing_loop_variables(x):
    fns = [lambda v, i=i: v * i for i in range(1, 4)]
    late = [lambda v: v * i for i in range(1, 4)]  # noqa: B023 -- late binding under test
    return sum(f(x) for f in fns) + late[0](x)


@case()
def bool_of_containers(x):
    empty = [], {}, (), set(), ""
    full = [0], {"a": 1}, (None,), {0}, " "
    return x + sum(not e for e in empty) + sum(bool(f) for f in full) * 10


@case()
def tuple_comparisons(x):
    a = (1, 2, 3)
    b = (1, 3)
    return x + (a < b) + ((2, "a") > (2, "A")) + (a == (1, 2, 3)) + ([1, 2] < [1, 2, 0]) + \
        max([(1, "b"), (1, "c"), (0, "z")])[1].count("c")


@case()
def dict_items_sorted_by_value(x):
    scores = {"a": 3, "b": 1, "c": 2}
    order = [k for k, _ in sorted(scores.items(), key=lambda kv: kv[1])]
    ranked = dict(sorted(scores.items(), key=operator.itemgetter(1), reverse=True))
    return x * ord(order[0]) + list(ranked)[0].count("a")


@case()
def frozenset_and_set_of_shapes(x):
    shapes = {x.shape, x[0].shape, x.shape}
    allowed = frozenset({"relu", "gelu"})
    return x * len(shapes) + ("gelu" in allowed) + (torch.Size([6]) in shapes)


@case()
def del_locals_and_items(x):
    d = {"a": x, "b": x * 2}
    xs = [1, 2, 3, 4]
    tmp = x + 1
    del d["a"], xs[0], xs[-1]
    y = tmp * 2
    del tmp
    del xs[:1]
    return d["b"] + y + len(d) + sum(xs)


# --- collections ------------------------------------------------------------------------------
@case()
def deque_with_maxlen(x):
    window = collections.deque(maxlen=3)
    for i in range(5):
        window.append(x * i)
    window.appendleft(x)
    window.rotate(1)
    d = collections.deque([1, 2, 3])
    d.extendleft([0, -1])
    return sum(window) + d[0] + len(d) + d.popleft() + d.pop() + window.maxlen


@case()
def ordered_dict_move_to_end(x):
    od = collections.OrderedDict([("a", 1), ("b", 2), ("c", 3)])
    od.move_to_end("a")
    od.move_to_end("c", last=False)
    k, v = od.popitem(last=False)
    return x * v + len(k) + list(od)[0].count("b") * 10 + list(od.values())[-1]


@case(grad=True)
def defaultdict_of_lists(x):
    groups = collections.defaultdict(list)
    for i, row in enumerate(x.unbind(0)):
        groups["even" if i % 2 == 0 else "odd"].append(row)
    counts = collections.defaultdict(int)
    for ch in "abca":
        counts[ch] += 1
    return torch.stack(groups["even"]).sum(0) * counts["a"] + len(groups["missing"]) + \
        torch.stack(groups["odd"]).mean(0)


@case()
def counter_most_common(x):
    c = collections.Counter("abracadabra")
    top, n = c.most_common(1)[0]
    c.update("zz")
    d = c + collections.Counter(a=1)
    return x * n + len(top) + c["z"] + d["a"] + c["missing"] + sum(c.values())


class _Pair(NamedTuple):
    left: int
    right: int = 4


_Point = collections.namedtuple("_Point", ["x", "y"], defaults=[0])


@case()
def namedtuple_methods(x):
    p = _Point(2, 3)
    q = p._replace(y=5)
    d = q._asdict()
    r = _Point._make([7, 8])
    pair = _Pair(1)
    return x * q.y + d["x"] + len(_Point._fields) + r.x + pair.right + _Point(1).y + \
        pair._replace(left=9)[0] + len(pair)


@case()
def chain_map_lookups(x):
    defaults = {"scale": 1, "shift": 0}
    overrides = {"scale": 3}
    cfg = collections.ChainMap(overrides, defaults)
    child = cfg.new_child({"shift": 2})
    return x * cfg["scale"] + child["shift"] + cfg.get("missing", 5) + len(cfg) + \
        ("shift" in cfg)


# --- dataclasses ------------------------------------------------------------------------------
@dataclasses.dataclass
class _Config:
    hidden: int = 6
    dropout: float = 0.0
    names: list = dataclasses.field(default_factory=lambda: ["a", "b"])
    derived: int = dataclasses.field(init=False, default=0)

    def __post_init__(self):
        self.derived = self.hidden * 2


@dataclasses.dataclass(frozen=True)
class _Frozen:
    a: int
    b: int = 2


@case()
def dataclass_fields_replace_asdict(x):
    cfg = _Config(hidden=3)
    other = dataclasses.replace(cfg, hidden=5)
    as_dict = dataclasses.asdict(cfg)
    names = [f.name for f in dataclasses.fields(cfg)]
    return x * other.derived + as_dict["hidden"] + len(names) + len(cfg.names) + \
        dataclasses.is_dataclass(cfg) + (cfg == _Config(hidden=3))


@case()
def frozen_dataclass(x):
    f = _Frozen(1)
    try:
        f.a = 5
        caught = 0
    except dataclasses.FrozenInstanceError:
        caught = 1
    g = dataclasses.replace(f, b=7)
    return x * g.b + f.a + caught + (f == _Frozen(1, 2)) + dataclasses.astuple(g)[1]


# --- enum -------------------------------------------------------------------------------------
class _Act(enum.Enum):
    RELU = "relu"
    TANH = "tanh"


class _Level(enum.IntEnum):
    LOW = 1
    HIGH = 3


class _Perm(enum.Flag):
    R = enum.auto()
    W = enum.auto()
    X = enum.auto()


_ACT_FNS = {_Act.RELU: torch.relu, _Act.TANH: torch.tanh}


@case(grad=True)
def enum_members(x):
    act = _Act("tanh")
    perm = _Perm.R | _Perm.W
    level = _Level.HIGH
    return _ACT_FNS[act](x) * (level + 1) + (_Perm.W in perm) + (_Perm.X in perm) * 10 + \
        len(list(_Act)) + (act is _Act.TANH) + len(act.value) + len(_Act["RELU"].name) + \
        (level > _Level.LOW)


# --- functools --------------------------------------------------------------------------------
def _affine(x, scale, shift, *, power=1):
    return (x * scale + shift) ** power


@case(grad=True)
def partial_of_partial(x):
    p = functools.partial(_affine, scale=2)
    q = functools.partial(p, shift=1, power=2)
    r = functools.partial(torch.sum, dim=-1, keepdim=True)
    return q(x) + r(x) + len(q.keywords)


@case()
def reduce_over_tensors(x):
    out = functools.reduce(operator.add, x.unbind(0))
    prod = functools.reduce(lambda a, b: a * b, [1, 2, 3], 10)
    return out * prod + functools.reduce(max, x.shape)


@functools.lru_cache(maxsize=None)
def _positions(n):
    return tuple(i * 0.5 for i in range(n))


@functools.cache
def _fib(n):
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


@case()
def lru_cache_on_a_helper(x):
    pos = _positions(x.shape[-1])
    return x * torch.tensor(pos) + _fib(10)


def _logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1
    return wrapper


@_logged
def _scaled(x, k=2):
    """Scale."""
    return x * k


@case(grad=True)
def wraps_decorator(x):
    return _scaled(x, k=3) + len(_scaled.__name__) + len(_scaled.__doc__) + \
        (_scaled.__wrapped__(x) * 0)


@functools.singledispatch
def _describe(value):
    return 0


@_describe.register
def _(value: int):
    return value * 2


@_describe.register(list)
def _(value):
    return len(value)


@case()
def singledispatch_helper(x):
    return x * _describe(3) + _describe([1, 2]) + _describe("s")


class _Lazy:
    def __init__(self, n):
        self.n = n

    @functools.cached_property
    def squared(self):
        return self.n * self.n


@case()
def cached_property_on_object(x):
    obj = _Lazy(3)
    a = obj.squared
    obj.n = 10
    return x * a + obj.squared + ("squared" in vars(obj))


@functools.total_ordering
class _Version:
    def __init__(self, major, minor):
        self.major, self.minor = major, minor

    def __eq__(self, other):
        return (self.major, self.minor) == (other.major, other.minor)

    def __lt__(self, other):
        return (self.major, self.minor) < (other.major, other.minor)


@case()
def total_ordering_class(x):
    a, b = _Version(1, 2), _Version(1, 5)
    return x + (a <= b) + (b >= a) * 2 + (a > b) * 4 + (max(a, b).minor)


# --- itertools --------------------------------------------------------------------------------
@case()
def itertools_product_permutations(x):
    pairs = list(itertools.product(range(2), "ab"))
    perms = list(itertools.permutations([1, 2, 3], 2))
    combos = list(itertools.combinations(range(4), 2))
    return x * len(pairs) + len(perms) + sum(a * b for a, b in combos)


@case(grad=True)
def itertools_accumulate(x):
    running = list(itertools.accumulate(x.unbind(0)))
    prods = list(itertools.accumulate([1, 2, 3, 4], operator.mul))
    init = list(itertools.accumulate([1, 2], initial=100))
    return running[-1] * prods[-1] + init[-1]


@case()
def itertools_groupby(x):
    words = ["ab", "ac", "b", "bd", "c"]
    groups = {k: list(g) for k, g in itertools.groupby(words, key=lambda w: w[0])}
    runs = [len(list(g)) for _, g in itertools.groupby([1, 1, 2, 2, 2, 1])]
    return x * len(groups["b"]) + max(runs)


@case(grad=True)
def itertools_islice_starmap(x):
    rows = list(itertools.islice(x.unbind(0), 1, None, 2))
    scaled = list(itertools.starmap(operator.mul, zip(rows, [2, 3])))
    return sum(scaled) + sum(itertools.starmap(pow, [(2, 3), (3, 2)]))


@case()
def itertools_zip_longest_pairwise(x):
    pairs = list(itertools.zip_longest([1, 2, 3], "ab", fillvalue="-"))
    diffs = [b - a for a, b in itertools.pairwise([1, 4, 9, 16])]
    return x * len(pairs) + pairs[-1][1].count("-") + sum(diffs)


@case()
def itertools_repeat_cycle_tee(x):
    reps = list(itertools.repeat(2, 3))
    cyc = list(itertools.islice(itertools.cycle([1, 2]), 5))
    a, b = itertools.tee(iter([1, 2, 3]))
    first = list(a)
    flat = list(itertools.chain.from_iterable([[1], [2, 3]]))
    counted = list(itertools.islice(itertools.count(5, 2), 3))
    return x * sum(reps) + sum(cyc) + sum(first) + sum(b) + len(flat) + counted[-1] + \
        len(list(itertools.compress("abc", [1, 0, 1]))) + \
        sum(itertools.takewhile(lambda v: v < 3, [1, 2, 3, 1])) + \
        sum(itertools.dropwhile(lambda v: v < 3, [1, 2, 3, 1]))


# --- operator ---------------------------------------------------------------------------------
@case()
def operator_getters(x):
    get_dims = operator.itemgetter(0, -1)
    get_shape = operator.attrgetter("shape")
    nested = operator.attrgetter("real.shape")
    call = operator.methodcaller("sum", dim=0)
    first, last = get_dims(x.shape)
    return call(x) * first + last + len(get_shape(x)) + nested(x)[0] + \
        operator.itemgetter(1)([x, x * 2]).sum()


@case(grad=True)
def operator_inplace_functions(x):
    y = x.clone()
    y = operator.iadd(y, 1)
    y = operator.imul(y, 2)
    n = operator.iadd(3, 4)
    lst = operator.iconcat([1], [2])
    return operator.add(y, operator.neg(x)) * n + len(lst) + operator.getitem(x, 0) + \
        operator.truediv(operator.pow(x, 2), 2) + operator.not_(False) + \
        operator.contains([1, 2], 2)


# --- math -------------------------------------------------------------------------------------
@case()
def math_functions(x):
    n = math.prod(x.shape)
    close = math.isclose(0.1 + 0.2, 0.3)
    c = math.ceil(x.shape[-1] / 4)
    g = math.gcd(12, 18)
    capped = min(math.inf, n)
    return x * n + close + c + g + capped + math.floor(2.7) + math.sqrt(16) + \
        math.isfinite(1.0) + math.log(math.e) + math.isinf(-math.inf) + math.copysign(2, -1) + \
        math.trunc(-2.5) + math.fsum([0.1] * 10) + math.dist((0, 0), (3, 4)) + \
        math.isqrt(17) + math.hypot(3, 4) + math.radians(180) / math.pi


# --- contextlib -------------------------------------------------------------------------------
@contextlib.contextmanager
def _scaled_region(state, k):
    state.append(k)
    try:
        yield k * 2
    finally:
        state.pop()


@case()
def contextmanager_generator(x):
    state = []
    with _scaled_region(state, 3) as k:
        inside = len(state)
        y = x * k
    return y + inside + len(state)


@case()
def nullcontext_and_suppress(x):
    with contextlib.nullcontext(x) as same:
        y = same * 2
    with contextlib.suppress(KeyError):
        y = y + {}["missing"]
    with contextlib.suppress(ValueError):
        y = y + 1
    return y


@case()
def exit_stack(x):
    state = []
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(_scaled_region(state, 2))
        b = stack.enter_context(_scaled_region(state, 5))
        depth = len(state)
        stack.callback(state.append, 99)
    return x * (a + b) + depth + len(state) + state[-1]


@case(grad=True)
def no_grad_regions(x):
    with torch.no_grad():
        frozen = x * 2
    with torch.enable_grad():
        live = x * 3
    with torch.set_grad_enabled(False):
        inner = torch.is_grad_enabled()
    return frozen + live + inner + torch.is_grad_enabled()


@torch.no_grad()
def _stats(x):
    return x.mean(), x.std()


@case(grad=True)
def no_grad_decorator_on_helper(x):
    mean, std = _stats(x)
    return (x - mean) / (std + 1e-5)


@case()
def inference_mode_region(x):
    with torch.inference_mode():
        y = x * 2 + 1
    return y.sum(-1)


@case()
def autocast_region(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x.t()
    return y.float() + (y.dtype == torch.bfloat16)


# --- generators -------------------------------------------------------------------------------
def _pieces(x, n):
    for i in range(n):
        yield x[i] * (i + 1)


def _all_pieces(x):
    yield from _pieces(x, 2)
    yield x[-1]
    yield from (x[1] * k for k in range(2))


@case(grad=True)
def generators_and_yield_from(x):
    return torch.stack(list(_all_pieces(x))).sum(0) + torch.stack(tuple(_pieces(x, 3)))[0]


@case(grad=True)
def generator_expressions_into_stack_and_cat(x):
    a = torch.stack([r * 2 for r in x])
    b = torch.cat(tuple(r.unsqueeze(0) for r in x.unbind(0)), dim=0)
    c = torch.stack(list(x[i] for i in range(x.shape[0])), dim=1)
    return a + b + c.t()


def _running_mean():
    total, count = 0.0, 0
    value = yield
    while True:
        total += value
        count += 1
        value = yield total / count


@case()
def generator_send(x):
    gen = _running_mean()
    next(gen)
    gen.send(1.0)
    m = gen.send(3.0)
    return x * m


@case()
def next_with_stop_iteration_caught(x):
    it = iter([x])
    out = next(it)
    try:
        out = out + next(it)
    except StopIteration:
        out = out * 2
    return out


# --- closures, recursion, globals -------------------------------------------------------------
@case(grad=True)
def closures_with_nonlocal(x):
    calls = 0

    def bump(t):
        nonlocal calls
        calls += 1
        return t * calls
    y = bump(x) + bump(x)
    return y * calls


def _make_scaler(k):
    def outer(a):
        def inner(t):
            return t * k + a
        return inner
    return outer


@case(grad=True)
def curried_closures(x):
    return _make_scaler(3)(1)(x) + _make_scaler(2)(0)(x)


def _tree_sum(node):
    if isinstance(node, torch.Tensor):
        return node
    if isinstance(node, dict):
        return sum(_tree_sum(v) for v in node.values())
    return sum(_tree_sum(v) for v in node)


def _factorial(n):
    return 1 if n <= 1 else n * _factorial(n - 1)


@case(grad=True)
def recursion(x):
    tree = {"a": [x, (x * 2, {"b": x + 1})], "c": x}
    return _tree_sum(tree) * _factorial(4)


def _collect(value, acc=[]):  # noqa: B006 -- the mutable default is the idiom under test
    acc.append(value)
    n = len(acc)
    acc.clear()
    return n


def _with_defaults(t, scale=2, *, shift=(1, 2)):
    return t * scale + shift[1]


@case()
def default_arguments(x):
    return x * _collect(1) + _with_defaults(x) + _with_defaults(x, 3, shift=(0, 0)) + \
        _with_defaults.__defaults__[0]


_STEP = 0
_TABLE = {"gain": 1.5}


@case()
def globals_read_and_written(x):
    global _STEP
    _STEP = x.shape[0]
    _TABLE["last"] = _STEP
    return x * _STEP * _TABLE["gain"] + _TABLE["last"]


# --- classes ----------------------------------------------------------------------------------
@case(grad=True)
def class_defined_inside(x):
    class Local:
        def __init__(self, k):
            self.k = k

        def apply(self, t):
            return t * self.k

    return Local(3).apply(x) + Local(1).k


class _Celsius:
    """A data descriptor: reads and writes go through __get__/__set__."""

    def __set_name__(self, owner, name):
        self.private = "_" + name

    def __get__(self, obj, objtype=None):
        return getattr(obj, self.private) * 2

    def __set__(self, obj, value):
        setattr(obj, self.private, value + 1)


class _WithProps:
    temp = _Celsius()

    def __init__(self, v):
        self._v = v
        self.temp = v

    @property
    def v(self):
        return self._v

    @v.setter
    def v(self, value):
        self._v = value * 10


@case()
def properties_and_descriptors(x):
    p = _WithProps(2)
    p.v = 3
    return x * p.v + p.temp


class _Bag:
    def __init__(self, items):
        self._items = list(items)
        self._extra = {"scale": 2}

    def __getattr__(self, name):
        try:
            return self._extra[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, i):
        return self._items[i]

    def __len__(self):
        return len(self._items)

    def __iter__(self):
        return iter(self._items)

    def __contains__(self, v):
        return v in self._items

    def __bool__(self):
        return bool(self._items)


@case(grad=True)
def user_container_dunders(x):
    bag = _Bag([x, x * 2, x * 3])
    empty = _Bag([])
    total = sum(t for t in bag)
    return total * bag.scale + bag[-1] + len(bag) + (1 in _Bag([1])) + bool(empty) + \
        (0 if not empty else 100) + hasattr(bag, "nothing") + bag[0:2][1]


class _Vec:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        return _Vec(self.t + (other.t if isinstance(other, _Vec) else other))

    def __radd__(self, other):
        return self.__add__(other)

    def __mul__(self, k):
        return _Vec(self.t * k)

    __rmul__ = __mul__

    def __neg__(self):
        return _Vec(-self.t)

    def __matmul__(self, other):
        return self.t @ other.t

    def __eq__(self, other):
        return isinstance(other, _Vec) and other.t is self.t

    def __hash__(self):
        return 7

    def __call__(self, k):
        return self.t * k


@case(grad=True)
def user_operator_dunders(x):
    a, b = _Vec(x), _Vec(x * 2)
    c = -(a + b) * 2
    d = 3 * a + 1
    e = sum([a, b])
    return c.t + d.t + e.t + (a @ _Vec(x.t())).sum() + (a == a) + a(2)


@case()
def user_objects_hashed_by_their_own_hash(x):
    a = _Vec(x)
    s = {a, a}
    return x * len(s) + {a: 5}[a]


class _Base:
    scale = 1

    def __init__(self, k):
        self.k = k

    def apply(self, t):
        return t * self.k

    @classmethod
    def make(cls, k):
        return cls(k + 1)

    @staticmethod
    def offset():
        return 10


class _Child(_Base):
    scale = 3

    def apply(self, t):
        return super().apply(t) * self.scale + super(_Child, self).offset()


class _Mixin:
    def describe(self):
        return len(type(self).__name__)


class _Both(_Mixin, _Child):
    pass


@case(grad=True)
def inheritance_super_classmethods(x):
    c = _Child.make(2)
    b = _Both(1)
    return c.apply(x) + _Base.offset() + c.offset() + b.describe() + b.apply(x) + \
        isinstance(b, _Base) + issubclass(_Both, _Mixin) + len(_Both.__mro__) + \
        (type(c) is _Child)


@case()
def type_of_x_construction(x):
    shape = x.shape
    same = type(shape)([2, 3])
    d = {"a": 1}
    copy = type(d)(d, b=2)
    tup = type((1,))(i for i in range(3))
    return x * same[1] + len(copy) + sum(tup) + len(type(x).__name__)


class _Op(abc.ABC):
    @abc.abstractmethod
    def forward(self, t):
        ...

    def __call__(self, t):
        return self.forward(t)


class _Double(_Op):
    def forward(self, t):
        return t * 2


@case(grad=True)
def abstract_base_classes(x):
    op = _Double()
    try:
        _Op()
        failed = 0
    except TypeError:
        failed = 1
    return op(x) + isinstance(op, _Op) + failed


@case()
def typing_casts_and_checks(x):
    y = typing.cast(torch.Tensor, x * 2)
    hint = typing.Optional[int]
    if TYPE_CHECKING:
        y = y * 100
    return y + (typing.get_origin(hint) is typing.Union) + len(typing.get_args(hint))


# --- statements -------------------------------------------------------------------------------
@case()
def try_except_else_finally(x):
    log = []
    try:
        y = x * 2
    except RuntimeError:
        y = x
    else:
        log.append("else")
        y = y + 1
    finally:
        log.append("finally")
    return y + len(log)


@case()
def raise_and_catch_inside(x):
    def check(n):
        if n > 3:
            raise ValueError(f"too big: {n}")
        return n
    try:
        check(x.shape[0] + 1)
        msg = ""
    except ValueError as e:
        msg = str(e)
    try:
        raise KeyError("k")
    except (TypeError, KeyError) as e:
        kind = type(e).__name__
    return x * len(msg) + len(kind)


@case()
def exception_chaining_and_reraise(x):
    try:
        try:
            {}["a"]
        except KeyError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        cause = type(outer.__cause__).__name__
    return x * len(cause)


@case()
def assert_with_messages(x):
    assert x.dim() == 2, f"expected 2-d, got {x.dim()}"
    assert isinstance(x.shape[0], int), "int dims"
    n, d = x.shape
    assert d % 2 == 0, "even width"
    return x.reshape(n, 2, d // 2).sum(1)


def _match_literal(mode):
    match mode:
        case "sum" | "add":
            return 1
        case "mean":
            return 2
        case int(n) if n > 5:
            return n
        case _:
            return 0


@case()
def match_literals(x):
    return x * _match_literal("add") + _match_literal("mean") * 10 + _match_literal(7) + \
        _match_literal(None)


@dataclasses.dataclass
class _Conv:
    kernel: int
    stride: int = 1


@dataclasses.dataclass
class _Pool:
    size: int


def _match_class(layer):
    match layer:
        case _Conv(kernel=k, stride=1):
            return k
        case _Conv(k, s):
            return k * s
        case _Pool(size=s):
            return -s
        case _Point(x=px, y=py):
            return px + py
    return 0


@case()
def match_class_patterns(x):
    return x * _match_class(_Conv(3)) + _match_class(_Conv(2, 2)) + _match_class(_Pool(4)) + \
        _match_class(_Point(1, 1)) + _match_class("other")


def _match_mapping(cfg):
    match cfg:
        case {"type": "linear", "dim": d, **rest}:
            return d + len(rest)
        case {"type": "conv"}:
            return 100
        case _:
            return -1


def _match_sequence(seq):
    match seq:
        case []:
            return 0
        case [a]:
            return a
        case [a, b]:
            return a * b
        case [a, *rest]:
            return a + len(rest) * 10
        case (str() as s,):
            return len(s)


@case()
def match_mapping_and_sequence(x):
    m = _match_mapping({"type": "linear", "dim": 4, "bias": True}) + \
        _match_mapping({"type": "conv", "k": 3}) + _match_mapping({"type": "x"})
    s = _match_sequence([]) + _match_sequence([5]) + _match_sequence((2, 3)) + \
        _match_sequence([1, 2, 3, 4])
    return x * m + s


@case()
def match_on_tensor_shape(x):
    match x.shape:
        case (n, d) if d > n:
            y = x.sum(0) * n
        case (n, d):
            y = x.sum(1) * d
        case _:
            y = x
    return y


@case()
def walrus_and_chained_comparisons(x):
    if (n := x.shape[0]) > 2:
        y = x * n
    else:
        y = x
    vals = [v for i in range(5) if (v := i * i) % 2]
    inside = 0 < x.shape[-1] <= 6 < 10
    return y + sum(vals) + inside + (1 < 2 > 3)


@case()
def conditional_expressions(x):
    act = torch.relu if x.shape[0] > 2 else torch.tanh
    k = 2 if x.dtype == torch.float32 else 3
    return act(x) * k + (1 if not x.is_cuda else 0)


@case()
def while_with_break_else(x):
    i = 0
    while i < 10:
        x = x * 0.5
        i += 1
        if i == 3:
            break
    else:
        x = x * 1000
    j = 0
    while j < 2:
        j += 1
    else:
        x = x + j
    return x


@case()
def for_else(x):
    for s in x.shape:
        if s == 100:
            found = s
            break
    else:
        found = -1
    for s in (1, 2):
        if s == 2:
            break
    else:
        found = 1000
    return x * found


@case()
def continue_and_nested_loops(x):
    total = x
    for i in range(3):
        if i == 1:
            continue
        for j in range(3):
            if j > i:
                break
            total = total + i * j
    return total


# --- tensor queries ---------------------------------------------------------------------------
@case(grad=True)
def tensor_methods_by_name(x):
    out = x
    for name in ("relu", "sigmoid", "exp"):
        out = out + getattr(x, name)()
    fn = getattr(torch, "tanh")  # noqa: B009
    act = getattr(F, "gelu")  # noqa: B009
    return out + fn(x) + act(x) + getattr(x, "sum")(dim=-1, keepdim=True)


@case()
def torch_size_arithmetic(x):
    shape = x.shape
    new = shape[:-1] + (2, shape[-1] // 2)
    n, *rest = shape
    extended = (1, *shape)
    same = shape == (4, 6)
    return x.view(new).sum(-2) * n + len(rest) + len(extended) + same + \
        shape.numel() + torch.Size([2, 3])[1] + isinstance(shape, tuple) + \
        x.reshape(*shape[::-1]).shape[0]


@case()
def tensor_metadata_queries(x):
    return x * x.dim() + x.ndim + x.numel() + x.size(1) + x.size(-1) + x.stride()[0] + \
        x.stride(1) + len(x) + x.element_size() + x.is_contiguous() + x.t().is_contiguous() + \
        x.nelement() + x.storage_offset() + x[1:].storage_offset() + x.size()[0]


@case((4, 6), (4, 6))
def dtype_checks(x, y):
    low = x.dtype in (torch.float16, torch.bfloat16)
    eps = torch.finfo(x.dtype).eps
    imax = torch.iinfo(torch.int8).max
    big = torch.finfo(torch.float16).max
    yi = (y * 10).to(torch.int64)
    return x * (not low) + eps * 1e6 + imax + big / 65504 + yi.is_floating_point() + \
        x.is_floating_point() + x.dtype.is_floating_point + (yi.dtype == torch.long) + \
        torch.is_floating_point(x) + x.dtype.itemsize + torch.is_complex(x) + \
        (x.dtype is torch.float32) + yi.float().sum()


@case()
def device_checks(x):
    dev = x.device
    on_cpu = dev.type == "cpu"
    same = x.device == torch.device("cpu")
    z = torch.zeros(3, device=x.device, dtype=x.dtype)
    return x * on_cpu + same + (str(dev) == "cpu") + z.sum() + x.is_cuda + (dev.index is None)


@case()
def torch_predicates(x):
    return x * torch.is_tensor(x) + torch.is_tensor(3) + torch.jit.is_scripting() + \
        torch.compiler.is_compiling() * 0 + torch.jit.is_tracing() + \
        isinstance(x, torch.Tensor) + torch.is_grad_enabled() + torch.numel(x)


@case(grad=True)
def functional_with_keywords(x):
    y = F.layer_norm(x, normalized_shape=(x.shape[-1],), eps=1e-6)
    y = F.dropout(y, p=0.5, training=False)
    y = F.softmax(y, dim=-1, dtype=torch.float32)
    y = F.pad(y, pad=(1, 1), mode="constant", value=0.5)
    z = F.normalize(x, p=2.0, dim=-1)
    w = F.leaky_relu(x, negative_slope=0.2) + F.gelu(x, approximate="tanh")
    return y[..., 1:-1] + z + w + F.mse_loss(x, z, reduction="sum")


@case(grad=True)
def in_place_ops_on_views(x):
    y = x.clone()
    y[0].mul_(2)
    y[:, :2].add_(1)
    row = y.narrow(0, 1, 2)
    row.zero_()
    col = y.t()[0]
    col.fill_(3)
    y.diagonal().sub_(1)
    return y * x


@case()
def torch_where_with_scalars(x):
    a = torch.where(x > 0, x, 0.0)
    b = torch.where(x > 0, 1.0, -1.0)
    c = torch.where(x > 0.5, 2, x)
    return a + b + c + x.masked_fill(x < 0, 0).sum() + x.clamp(min=-0.5, max=0.5)


@case()
def tolist_on_constants_and_tensors_from_numbers(x):
    table = torch.tensor([[1, 2], [3, 4]])
    vals = table.tolist()
    shape_t = torch.tensor(x.shape)
    nums = torch.tensor([1.5, 2, True])
    return x * vals[1][0] + shape_t.sum() + nums.sum() + torch.tensor(x.shape[-1] * 2.0) + \
        torch.as_tensor([1, 2]).sum() + torch.tensor(vals).max()


@case()
def tensor_factories_from_shapes(x):
    a = x.new_zeros(x.shape[-1])
    b = x.new_ones((2, x.shape[-1]))
    c = torch.full(x.shape, 0.5)
    d = torch.arange(x.shape[-1], dtype=x.dtype)
    e = torch.empty_like(x).fill_(1)
    f = x.new_tensor([1.0, 2.0]).sum()
    return x + a + b.sum(0) + c + d + e + f + torch.eye(x.shape[-1])[0] + \
        torch.linspace(0, 1, steps=x.shape[-1])


@case(grad=True)
def chunk_split_unbind_unpacking(x):
    a, b = x.chunk(2, dim=-1)
    first, *others = torch.split(x, [1, 3])
    rows = x.unbind()
    q, k, v = x.reshape(4, 3, 2).unbind(1)
    return (a * b).sum() + first.sum() + sum(o.sum() for o in others) + rows[-1] + \
        (q * k + v).sum()


@case(grad=True)
def indexing_with_ellipsis_none_and_transposes(x):
    y = x[None, ..., None]
    z = x[..., ::2]
    return y.squeeze().T.T + x.mT.t() + z.repeat(1, 2) + x[[0, 2]].sum() + \
        x[:, -1:].expand_as(x) + x.H.mT


@case()
def boolean_mask_indexing(x):
    return x[x > 0].sum() + x


# --- nn.Modules -------------------------------------------------------------------------------
class _Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(6, 6) for _ in range(3)])
        self.heads = nn.ModuleDict({"a": nn.Linear(6, 2), "b": nn.Linear(6, 3)})
        self.scales = nn.ParameterList([nn.Parameter(torch.ones(6) * i) for i in range(2)])
        self.seq = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 6))

    def forward(self, x):
        for layer in self.layers[:2]:
            x = layer(x)
        x = self.layers[-1](x) + self.seq[0](x) + self.seq[1:](x)
        for i, p in enumerate(self.scales):
            x = x * p + i
        outs = [head(x).sum(-1) for head in self.heads.values()]
        keys = list(self.heads.keys())
        return sum(outs) + len(self.layers) + len(self.seq) + ("a" in self.heads) + \
            self.heads[keys[1]](x).mean() + len(self.scales)


@case((4, 6), module=_Stack, grad=True)
def module_containers(x, m):
    return m(x)


class _Walker(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 6)
        self.b = nn.Sequential(nn.Linear(6, 6, bias=False), nn.LayerNorm(6))
        self.register_buffer("shift", torch.arange(6.0))
        self.register_buffer("unused", None)

    def forward(self, x):
        total = 0
        for name, p in self.named_parameters():
            if name.endswith("weight"):
                total = total + p.sum()
        n_children = len(list(self.children()))
        n_linear = sum(isinstance(m, nn.Linear) for m in self.modules())
        n_buffers = len(list(self.buffers()))
        names = [n for n, _ in self.named_modules()]
        return self.b(self.a(x)) + self.shift + total + n_children + n_linear * 10 + \
            n_buffers + len(names) + (self.unused is None)


@case((4, 6), module=_Walker, grad=True)
def module_walks_and_buffers(x, m):
    return m(x)


class _Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 6)
        self.drop = nn.Dropout(0.0)

    def forward(self, x):
        if self.training:
            x = self.drop(x) * 2
        else:
            x = x * 3
        return self.proj(x)


@case((4, 6), module=_Branchy, grad=True)
def module_training_branch(x, m):
    m.eval()
    y = m(x)
    m.train()
    return y + m(x)


class _Residual(nn.Linear):
    def __init__(self, n):
        super().__init__(n, n)
        self.gain = 0.5

    def forward(self, x):
        return x + super().forward(x) * self.gain


@case((4, 6), module=lambda: _Residual(6), grad=True)
def module_super_forward(x, m):
    return m(x)


class _Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(6, 6), nn.Linear(6, 6)])

    def __len__(self):
        return len(self.blocks)

    def __getitem__(self, i):
        return self.blocks[i]

    def __iter__(self):
        return iter(self.blocks)

    def __contains__(self, m):
        return any(b is m for b in self.blocks)

    def forward(self, x):
        for b in self:
            x = b(x)
        return x


@case((4, 6), module=_Blocks, grad=True)
def module_with_container_dunders(x, m):
    return m(x) + len(m) + m[0](x) + (m[1] in m) + (nn.Linear(1, 1) in m)


class _Lookup(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 6)
        self.norm = nn.LayerNorm(6)
        self.act_name = "gelu"

    @property
    def width(self):
        return self.embed.embedding_dim

    def forward(self, x):
        idx = torch.arange(x.shape[0]) % self.embed.num_embeddings
        act = getattr(F, self.act_name)
        h = self.norm(x + self.embed(idx))
        return act(h) * self.width + getattr(self, "missing", 0) + self.norm.eps * 0 + \
            self.norm.weight.shape[0] + self.embed.weight.dtype.is_floating_point


@case((4, 6), module=_Lookup, grad=True)
def module_attributes_and_properties(x, m):
    return m(x)


class _Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(6, 6)

    @staticmethod
    def act(t):
        return t.clamp(min=0)

    @classmethod
    def factor(cls):
        return len(cls.__name__)

    def forward(self, x):
        return self.act(self.inner(x)) * self.factor() + type(self).act(x)


@case((4, 6), module=_Scaled, grad=True)
def module_static_and_class_methods(x, m):
    return m(x)


class _Gate(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode
        self.w = nn.Parameter(torch.ones(6))

    def forward(self, x):
        match self.mode:
            case "mul":
                return x * self.w
            case "add":
                return x + self.w
        return x


@case((4, 6), module=lambda: _Gate("add"), grad=True)
def module_match_on_attribute(x, m):
    return m(x)


class _FunctionalMix(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 4, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        y = self.conv(x.unsqueeze(0))
        y = self.bn(y)
        return F.max_pool1d(y, kernel_size=2, stride=2).squeeze(0)


@case((4, 6), module=_FunctionalMix)
def module_conv_and_batchnorm(x, m):
    m.eval()
    return m(x)


# --- more Python ------------------------------------------------------------------------------
_REGISTRY = {}


def _register(name):
    def deco(fn):
        _REGISTRY[name] = fn
        return fn
    return deco


@_register("square")
def _square(t):
    return t * t


@_register("cube")
def _cube(t):
    return t * t * t


@case(grad=True)
def registry_dispatch(x):
    return sum(_REGISTRY[k](x) for k in sorted(_REGISTRY)) + len(_REGISTRY)


@case()
def dict_dispatch_of_lambdas(x):
    ops = {"a": lambda t: t + 1, "b": lambda t: t * 2, "c": torch.neg}
    out = x
    for name in "bca":
        out = ops[name](out)
    return out + ops.get("z", lambda t: t)(x)


@case()
def str_join_of_generated_names(x):
    names = [f"layer_{i}" for i in range(3)]
    key = ".".join(names)
    parsed = [int(n.split("_")[1]) for n in key.split(".")]
    return x * sum(parsed) + len(key) + key.index("1") + key.isascii()


@case()
def issubclass_and_abc_checks(x):
    seq = isinstance([1], collections.abc.Sequence)
    mapping = isinstance({}, collections.abc.Mapping)
    it = isinstance(iter([]), collections.abc.Iterator)
    num = issubclass(bool, int)
    tup = isinstance((), collections.abc.Sequence)
    return x + seq + mapping * 2 + it * 4 + num * 8 + tup * 16


@case()
def type_names_and_qualnames(x):
    return x * len(type(x).__name__) + len(_Child.__qualname__) + len(_Child.__bases__) + \
        len(type(3).__name__) + (type(None).__name__ == "NoneType")


@case(grad=True)
def list_of_tensors_sorted_by_norm(x):
    rows = list(x.unbind(0))
    ranked = sorted(range(len(rows)), key=lambda i: x.shape[0] - i)
    return torch.stack([rows[i] for i in ranked]) * 2


@case()
def string_formatting_methods(x):
    tpl = "{name}:{value:.1f}"
    s = tpl.format(name="w", value=2.25)
    t = "{0}{1}{0}".format("a", "b")
    return x * len(s) + len(t) + len("x".center(5)) + len("7".zfill(3)) + \
        "a,b,,c".split(",").count("") + len("ab".ljust(4, "-")) + "AbC".swapcase().count("a") + \
        "abc".removeprefix("a").count("b") + len("  a b  ".split())


@case()
def min_max_of_tensors_and_numbers(x):
    a = max(x.shape)
    b = min(3, 2.5, 7)
    c = torch.maximum(x[0], x[1])
    return c + a + b + max(x.shape[-1], 2.5) + min([4, 1, 3])


@case()
def nested_functions_with_defaults_and_kwargs(x):
    def apply(t, *fns, scale=1, **opts):
        for f in fns:
            t = f(t)
        return t * scale + opts.get("bias", 0) + len(opts)
    return apply(x, torch.sin, torch.cos, scale=2, bias=3, extra=None)


@case()
def hashable_tuple_keys(x):
    cache = {}
    for i in range(3):
        cache[(i, "a")] = i * 2
    cache[x.shape] = 100
    return x * cache[(2, "a")] + cache[(4, 6)] + len(cache)


@case()
def getattr_chains_and_setattr(x):
    class NS:
        pass
    ns = NS()
    setattr(ns, "scale", 3)
    ns.inner = NS()
    ns.inner.shift = 2
    has = hasattr(ns, "scale") + hasattr(ns, "nope")
    delattr(ns, "scale")
    return x * getattr(ns.inner, "shift") + has + getattr(ns, "scale", 7)  # noqa: B009


@case()
def simple_namespace_and_mappingproxy(x):
    import types
    ns = types.SimpleNamespace(a=1, b=2)
    ns.c = 3
    proxy = types.MappingProxyType({"k": 4})
    return x * (ns.a + ns.b + ns.c) + proxy["k"] + len(vars(ns))


@case(grad=True)
def list_multiplication_and_slicing(x):
    pads = [0] * 4
    pads[1::2] = [1, 1]
    pattern = [1, 2] * 2
    rev = pattern[::-1]
    return F.pad(x, pads)[..., 1:-1, 1:-1] * rev[0] + sum(pattern[1:3])


@case()
def enumerate_reversed_and_range_args(x):
    out = x
    for i, v in reversed(list(enumerate([3, 4, 5]))):
        out = out + i * v
    r = range(10, 0, -3)
    return out + len(r) + r[1] + r.index(4) + (7 in r) + sum(range(0)) + r[-1]


@case()
def int_float_methods(x):
    return x * (7).bit_length() + (2.5).as_integer_ratio()[1] + (10).__floordiv__(3) + \
        float("inf").__gt__(1) + (3.0).is_integer() + abs(-2.5).__round__() + int.__add__(1, 2)


@case()
def boolean_short_circuit_values(x):
    a = None or 5
    b = 0 and 3
    c = [] or [1, 2]
    d = "x" and "yz"
    return x * a + b + len(c) + len(d) + (not None)


@case()
def augmented_assignment_on_containers(x):
    d = {"n": 1}
    d["n"] += 2
    lst = [1, 2]
    lst += [3]
    lst *= 2
    t = (1,)
    t += (2,)
    s = {1}
    s |= {2, 3}
    s -= {1}
    return x * d["n"] + len(lst) + len(t) + sum(s)


@case(grad=True)
def tensor_augmented_ops(x):
    y = x * 1
    y += 1
    y *= 2
    y -= x
    y /= 2
    y **= 2
    return y


@case()
def tensor_comparisons_and_logic(x):
    m = (x > 0) & (x < 1) | (x == 0)
    n = ~m ^ (x != 0.5)
    return m.float() + n.float() + m.any() + m.all() + m.sum() + torch.logical_not(m).float()


@case()
def all_any_over_tensor_shapes_and_dims(x):
    ok = all(d > 0 for d in x.shape) and any(d == 6 for d in x.shape)
    dims = [d for d in range(x.ndim) if x.shape[d] % 2 == 0]
    return x.sum(dim=dims) * ok


@case()
def nested_dict_config_access(x):
    cfg = {"model": {"layers": [{"dim": 6, "act": "relu"}, {"dim": 6, "act": "tanh"}]}}
    out = x
    for layer in cfg["model"]["layers"]:
        out = getattr(torch, layer["act"])(out) * layer["dim"]
    return out + len(cfg.get("train", {}))


@case()
def exception_types_and_messages(x):
    errors = []
    for bad in ("a", None):
        try:
            int(bad)
        except (ValueError, TypeError) as e:
            errors.append(type(e).__name__)
    try:
        [1][5]
    except IndexError:
        errors.append("idx")
    try:
        {}.__getitem__("k")
    except LookupError:
        errors.append("lookup")
    return x * len(errors) + len(errors[0]) + len(errors[1])


@case()
def finally_runs_on_return_path(x):
    log = []

    def helper(t):
        try:
            return t * 2
        finally:
            log.append(1)
    y = helper(x)
    return y + len(log)


class _Registry(type):
    classes = []

    def __new__(mcs, name, bases, ns):
        cls = super().__new__(mcs, name, bases, ns)
        mcs.classes.append(name)
        return cls


class _Registered(metaclass=_Registry):
    factor = 2

    def run(self, t):
        return t * self.factor


class _SubclassHook:
    subclasses = []

    def __init_subclass__(cls, tag="", **kw):
        super().__init_subclass__(**kw)
        cls.tag = tag
        _SubclassHook.subclasses.append(cls)


class _Hooked(_SubclassHook, tag="hooked"):
    pass


@case()
def metaclass_and_init_subclass(x):
    return _Registered().run(x) + len(_Registry.classes) + len(_Hooked.tag) + \
        len(_SubclassHook.subclasses)


@case()
def slots_class(x):
    class P:
        __slots__ = ("a", "b")

        def __init__(self, a, b):
            self.a, self.b = a, b
    p = P(2, 3)
    p.a += 1
    return x * p.a + p.b + hasattr(p, "__dict__")


@case()
def user_iterator_class(x):
    class Countdown:
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return self

        def __next__(self):
            if self.n <= 0:
                raise StopIteration
            self.n -= 1
            return self.n
    return x * sum(Countdown(4)) + len(list(Countdown(2)))


@case()
def generator_method_iteration(x):
    class Tree:
        def __init__(self, *kids):
            self.kids = kids

        def __iter__(self):
            for k in self.kids:
                if isinstance(k, Tree):
                    yield from k
                else:
                    yield k
    t = Tree(x, Tree(x * 2, Tree(x * 3)), x + 1)
    return sum(t) + len(list(t))


@case()
def reprs_and_strs_of_values(x):
    s = repr([1, "a", None]) + str((1, 2.5)) + repr({"k": True})
    return x * len(s) + len(str(torch.float32)) + len(repr(3.0))


@case()
def enum_iteration_and_lookup(x):
    total = 0
    for member in _Level:
        total += member.value
    names = [m.name for m in _Perm]
    return x * total + len(names) + _Level(3) + _Level["LOW"] + (_Act.RELU.value == "relu")


@case()
def generators_in_builtins(x):
    rows = x.unbind(0)
    return max((r.sum() for r in rows), key=lambda t: 0) + sum(r.mean() for r in rows) + \
        torch.stack(sorted(rows, key=lambda r: 0)).sum(0) + len(tuple(enumerate(rows)))


@case()
def dict_iteration_order_and_mutation(x):
    d = {"a": 1, "b": 2}
    d["c"] = 3
    del d["a"]
    d["a"] = 4
    keys = "".join(d)
    out = x
    for k, v in d.items():
        out = out + v * len(k)
    return out + ord(keys[-1]) + list(d.values())[0]


@case()
def string_iteration_and_membership(x):
    vowels = sum(1 for ch in "transformer" if ch in "aeiou")
    rev = "".join(reversed("abc"))
    return x * vowels + ord(rev[0]) + ("form" in "transformer") + "abc"[::-1].count("c") + \
        len(list("xyz")) + len(set("hello"))


@case()
def sorted_stability_and_multi_key(x):
    items = [("b", 2), ("a", 2), ("c", 1)]
    by_both = sorted(items, key=lambda it: (it[1], it[0]))
    by_neg = sorted(items, key=lambda it: -it[1])
    return x * ord(by_both[0][0]) + ord(by_neg[0][0]) + len(sorted({3: 1, 1: 2}))


@case()
def ternary_on_none_checks(x, mask=None, bias=None):
    y = x if mask is None else x * mask
    y = y + (bias if bias is not None else 0)
    return y


@case(grad=True)
def optional_arguments_of_helpers(x):
    def layer(t, weight=None, *, eps=1e-5, scale: float | None = None):
        if weight is not None:
            t = t * weight
        if scale:
            t = t * scale
        return t / (t.norm() + eps)
    return layer(x) + layer(x, torch.ones(6), scale=2.0)


@case()
def math_on_shapes(x):
    n, d = x.shape
    heads = math.gcd(d, 4)
    head_dim = d // heads
    scale = 1 / math.sqrt(head_dim)
    return x.view(n, heads, head_dim).transpose(0, 1).sum(0) * scale + int(math.log2(n))


@case()
def torch_size_methods_and_iteration(x):
    s = x.shape
    dims = [d for d in s]
    idx = s.index(6)
    cnt = s.count(4)
    return x * sum(dims) + idx + cnt + len(s) + s[-1:][0] + (6 in s) + torch.Size(dims).numel()


@case()
def tensor_dtype_conversions(x):
    a = x.to(torch.float64).sum()
    b = x.double().float().half().float()
    c = (x > 0).int().sum()
    d = x.type(torch.float64).dtype == torch.float64
    e = x.to(dtype=torch.int32, copy=True).dtype.is_signed
    return x + a.float() + b + c + d + e + x.long().float() + torch.promote_types(
        torch.int32, torch.float16).itemsize


@case()
def einsum_and_matmul_variants(x):
    w = torch.ones(6, 3)
    return torch.einsum("nd,dk->nk", x, w) + x @ w + torch.matmul(x, w) + x.mm(w) + \
        torch.bmm(x[None], w[None])[0] + torch.einsum("ij->j", x).sum()


@case()
def clone_detach_requires_grad_checks(x):
    y = x.detach().clone()
    flag = y.requires_grad
    leaf = x.is_leaf
    return y * 2 + flag + leaf + (x.grad is None) + (x.grad_fn is None)


@case(grad=True)
def scalar_tensor_python_math(x):
    s = x.sum()
    return x * (s * 2 + 1) / (1 + s.abs()) + 2 ** x + 1 - x + 3 // (x.detach().abs() + 1) + \
        abs(x) - x + pow(x, 2) + round(1.26, 1) * x


@case()
def zip_of_dicts_and_enumerate_pairs(x):
    a = {"p": 1, "q": 2}
    b = {"p": 10, "q": 20}
    merged = {k: va + b[k] for k, va in a.items()}
    out = x
    for (ka, va), (kb, vb) in zip(a.items(), b.items()):
        out = out + va * vb + (ka == kb)
    return out + sum(merged.values())


@case()
def list_index_membership_and_count(x):
    names = ["q", "k", "v", "k"]
    i = names.index("k")
    j = names.index("k", i + 1)
    return x * i + j + names.count("k") + ("o" not in names) + names[-1:][0].count("k")


@case()
def while_true_with_counter(x):
    steps = 0
    y = x
    while True:
        y = y * 0.5
        steps += 1
        if steps >= 3:
            break
    return y + steps


@case()
def exception_in_generator_cleanup(x):
    log = []

    def gen():
        try:
            yield 1
            yield 2
        finally:
            log.append("closed")
    g = gen()
    first = next(g)
    g.close()
    return x * first + len(log)


@case()
def keyword_only_and_positional_only(x):
    def f(a, b=2, /, c=3, *, d=4):
        return a * b + c * d
    return f(x) + f(x, 1, c=1) + f(x, 1, 1, d=1)


@case()
def callable_objects_and_partial_methods(x):
    class Scale:
        def __init__(self, k):
            self.k = k

        def __call__(self, t):
            return t * self.k

        def shifted(self, t, s):
            return t + s
    s = Scale(2)
    bound = functools.partial(s.shifted, s=3)
    method = Scale.shifted
    return s(x) + bound(x) + method(s, x, 1) + callable(s) + callable(s.k)


@case()
def sum_of_lists_and_tuples(x):
    lists = [[1], [2, 3], []]
    flat = sum(lists, [])
    tups = sum(((1,), (2,)), ())
    return x * len(flat) + len(tups) + sum(flat)


@case()
def any_all_short_circuit_on_side_effects(x):
    seen = []

    def check(v):
        seen.append(v)
        return v > 1
    a = any(check(v) for v in [0, 2, 5])
    b = all(check(v) for v in [5, 0, 9])
    return x * len(seen) + a + b


@case()
def default_dict_factory_and_missing(x):
    class Defaulting(dict):
        def __missing__(self, key):
            return len(key)
    d = Defaulting(a=10)
    return x * d["a"] + d["hello"]


@case()
def dict_subclass_and_list_subclass(x):
    class Attrs(dict):
        def __getattr__(self, k):
            return self[k]

    class Stack(list):
        def top(self):
            return self[-1]
    a = Attrs(scale=3)
    s = Stack([1, 2])
    s.append(5)
    return x * a.scale + s.top() + len(s)


@case(grad=True)
def tensor_subscript_assignment(x):
    y = torch.zeros_like(x)
    y[0] = x[0] * 2
    y[1:3, :3] = 1.0
    y[..., -1] = x[..., 0]
    y[y > 1.5] = 0
    return y


@case()
def torch_functions_with_out_of_python_values(x):
    k = x.shape[-1] // 2
    top = torch.topk(x, k=k, dim=-1)
    vals, idx = torch.sort(x, dim=-1, descending=True)
    mx = x.max(dim=-1)
    return top.values + vals[..., :k] + idx[..., :k].float() + mx.values.unsqueeze(-1) + \
        mx[1].unsqueeze(-1).float() + x.argmax(-1, keepdim=True).float()


@case()
def operator_module_on_tensors_and_lists(x):
    fns = [operator.add, operator.mul, operator.sub]
    out = x
    for f in fns:
        out = f(out, x)
    return out + operator.length_hint([1, 2]) + operator.truth(x.shape[0]) + \
        operator.floordiv(7, 2) + operator.mod(7, 4) + operator.lshift(1, 2)


@case()
def builtin_hash_of_ints_and_tuples(x):
    return x * (hash(3) == 3) + (hash((1, 2)) == hash((1, 2))) + (hash(True) == 1)


@case()
def global_constants_and_module_attributes(x):
    return x * math.pi + torch.pi * 0 + len(torch.__name__) + F.relu(x) * 0 + \
        (torch.float32 is torch.float) + math.tau / 2 - math.pi


# --- the classes above defined inside functions, here at module level -------------------------
class _NS:
    pass


@case()
def attribute_writes_on_a_plain_object(x):
    ns = _NS()
    setattr(ns, "scale", 3)
    ns.inner = _NS()
    ns.inner.shift = 2
    has = hasattr(ns, "scale") + hasattr(ns, "nope")
    delattr(ns, "scale")
    return x * getattr(ns.inner, "shift") + has + getattr(ns, "scale", 7)


class _SlotPoint:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b


@case()
def slots_class_at_module_level(x):
    p = _SlotPoint(2, 3)
    p.a += 1
    return x * p.a + p.b + hasattr(p, "__dict__")


class _Countdown:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return self

    def __next__(self):
        if self.n <= 0:
            raise StopIteration
        self.n -= 1
        return self.n


@case()
def user_iterator_class_at_module_level(x):
    return x * sum(_Countdown(4)) + len(list(_Countdown(2))) + max(_Countdown(3))


class _Tree:
    def __init__(self, *kids):
        self.kids = kids

    def __iter__(self):
        for k in self.kids:
            if isinstance(k, _Tree):
                yield from k
            else:
                yield k


@case(grad=True)
def generator_method_iteration_at_module_level(x):
    t = _Tree(x, _Tree(x * 2, _Tree(x * 3)), x + 1)
    return sum(t) + len(list(t))


class _ScaleBy:
    def __init__(self, k):
        self.k = k

    def __call__(self, t):
        return t * self.k

    def shifted(self, t, s):
        return t + s


@case(grad=True)
def callable_objects_and_partial_methods_at_module_level(x):
    s = _ScaleBy(2)
    bound = functools.partial(s.shifted, s=3)
    method = _ScaleBy.shifted
    return s(x) + bound(x) + method(s, x, 1) + callable(s) + callable(s.k)


class _Defaulting(dict):
    def __missing__(self, key):
        return len(key)


class _Attrs(dict):
    def __getattr__(self, k):
        return self[k]


class _Stack(list):
    def top(self):
        return self[-1]


@case()
def dict_and_list_subclasses_at_module_level(x):
    d = _Defaulting(a=10)
    a = _Attrs(scale=3)
    s = _Stack([1, 2])
    s.append(5)
    return x * d["a"] + d["hello"] + a.scale + s.top() + len(s) + ("zz" in d)


# --- a dict subclass's own __setattr__ (probe-11: frozendict in einx, AttrDict configs) ------
# ``d.name = v`` on a dict subclass runs the class's hook, as on any object: an item written
# (``__setattr__ = dict.__setitem__``), a frozen mapping's refusal, a hook that changes the
# value. Only object's own rule -- called directly (frozendict's ``__new__``:
# ``object.__setattr__(self, "_hash", -1)``) or as ``super().__setattr__`` -- sets an attribute.
class _ItemAttrs(dict):
    __getattr__ = dict.__getitem__
    __setattr__ = dict.__setitem__


class _HookedItemAttrs(dict):
    def __getattr__(self, name):
        return self[name]

    def __setattr__(self, name, value):
        self[name] = value


class _FrozenMapping(dict):
    def __new__(cls, *args, **kwargs):
        made = dict.__new__(cls, *args, **kwargs)
        object.__setattr__(made, "_hash", -1)      # past its own __setattr__
        return made

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")


class _DoublingAttrs(dict):
    def __setattr__(self, name, value):
        super().__setattr__(name, value * 2)


def dict_subclass_setattr_writes_an_item(x):
    a, b = _ItemAttrs(scale=x), _HookedItemAttrs(scale=x + 1)
    a.shift = x * 2
    b.shift = x * 3
    return a["shift"] + a.scale + b["shift"] + b.scale + len(a) * len(b)


def dict_subclass_setattr_refused(x):
    frozen = _FrozenMapping(a=x)
    try:
        frozen.b = x
    except AttributeError:
        return x * frozen["a"] + frozen._hash + len(frozen)
    return x


def dict_subclass_setattr_through_object(x):
    frozen = _FrozenMapping(a=x)
    object.__setattr__(frozen, "extra", x * 3)
    dict.__setattr__(frozen, "more", 2)
    return frozen["a"] + frozen._hash + frozen.extra * frozen.more


def dict_subclass_setattr_hook_changes_the_value(x):
    d = _DoublingAttrs(a=x)
    d.b = x + 1
    setattr(d, "c", 3)
    return d.b * d.c + d["a"] + len(d)
