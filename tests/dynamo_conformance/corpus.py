"""Functions the bytecode VM must run exactly as CPython does (no torch, stdlib only).

Each entry of ``CASES`` is ``(function, args, kwargs)``. ``PURE`` functions neither mutate
their arguments nor depend on state, so they can also be stopped after any instruction and
resumed from a copy of the frame.
"""

import collections
import collections.abc
import dataclasses
import functools
import itertools
import math
import operator
from collections import OrderedDict, namedtuple

COUNTER = 10
Point = namedtuple("Point", "x y")


def arith(a, b):
    return a + b, a - b, a * b, a / b, a // b, a % b, a ** 2, -a, +b, ~a, a << 2, a >> 1


def float_arith(a, b):
    return a + b, a - b, a * b, a / b, a // b, a % b, a ** 2, -a, +b


def bitwise(a, b):
    return a & b, a | b, a ^ b


def compare_chain(a, b, c):
    return a < b < c, a <= b, a == b, a != c, a > c >= b


def bool_ops(a, b):
    return (a and b), (a or b), (not a), (a and not b or b)


def if_elif(x):
    if x < 0:
        return "neg"
    elif x == 0:
        return "zero"
    elif x < 10:
        return "small"
    else:
        return "big"


def ternary(x):
    return "even" if x % 2 == 0 else "odd"


def while_loop(n):
    total, i = 0, 0
    while i < n:
        total += i * i
        i += 1
    return total


def for_break_continue_else(xs):
    out = []
    for x in xs:
        if x % 3 == 0:
            continue
        if x > 10:
            break
        out.append(x)
    else:
        out.append("no break")
    return out


def nested_loops(n):
    pairs = []
    for i in range(n):
        for j in range(i):
            if (i + j) % 2:
                pairs.append((i, j))
    return pairs


def list_comp(xs):
    return [x * 2 for x in xs if x % 2]


def nested_comp(n):
    return [[i * j for j in range(n)] for i in range(n)]


def dict_set_comp(xs):
    return {x: x * x for x in xs}, {x % 3 for x in xs}


def genexpr_sum(xs):
    return sum(x * x for x in xs)


def comp_shadowing(x):
    y = [x for x in range(3)]
    return x, y


def comp_with_closure(n):
    fns = [lambda: i for i in range(n)]  # noqa: B023 (late binding is the point)
    return [f() for f in fns]


def closure_counter(n):
    count = 0

    def bump(k):
        nonlocal count
        count += k
        return count
    for i in range(n):
        bump(i)
    return count


def closure_read(a):
    def inner(b):
        return a * b
    return inner(3) + inner(4)


def make_adder(k):
    return lambda x: x + k


def call_returned_closure(a):
    return make_adder(a)(10)


def lambda_sort(xs):
    return sorted(xs, key=lambda t: (-t[1], t[0]))


def default_args(a, b=2, *, c=3, d=4):
    return a + b * c - d


def call_defaults(a):
    return default_args(a), default_args(a, 5), default_args(a, c=10), default_args(a, 1, d=0)


def star_args(*args, **kwargs):
    return args, sorted(kwargs.items())


def call_star(a, b):
    xs = [a, b]
    kw = {"p": 1, "q": 2}
    return star_args(*xs, 3, **kw, r=4), star_args(), star_args(*xs)


def posonly(a, b, /, c):
    return a * 100 + b * 10 + c


def call_posonly(x):
    return posonly(x, 2, c=3), posonly(1, x, 3)


def unpacking(t):
    a, b, c = t
    d, *e = t
    *f, g = t
    (h, i), j = (a, b), c
    return a, b, c, d, e, f, g, h, i, j


def swap(a, b):
    a, b = b, a
    return a, b


def fstrings(x, y):
    return f"{x}-{y!r}-{x:>5}-{y!s:^7}-{x * 2:.2f}-{'lit'}"


def slicing(xs):
    ys = list(xs)
    ys[1:3] = [99, 98, 97]
    del ys[0]
    return xs[1:], xs[:-1], xs[::2], xs[1:4:2], ys


def subscript_store(d):
    d = dict(d)
    d["new"] = 1
    del d["a"]
    d["b"] += 10
    return sorted(d.items())


def try_except(x):
    try:
        return 10 // x
    except ZeroDivisionError:
        return "div by zero"


def try_except_as(x):
    try:
        int(x)
    except ValueError as e:
        return type(e).__name__
    else:
        return "ok"


def try_finally(x):
    log = []
    try:
        log.append("try")
        if x:
            raise KeyError(x)
    except KeyError as e:
        log.append(f"caught {e}")
    finally:
        log.append("finally")
    return log


def nested_try(x):
    try:
        try:
            return [1, 2][x]
        except IndexError:
            raise ValueError("wrapped") from None
    except ValueError as e:
        return str(e)


def raise_and_reraise(x):
    try:
        try:
            raise TypeError("inner")
        except TypeError:
            if x:
                raise
            return "swallowed"
    except TypeError as e:
        return f"reraised {e}"


class Ctx:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, typ, val, tb):
        self.log.append(f"exit {typ.__name__ if typ else None}")
        return typ is KeyError


def with_block(x):
    log = []
    with Ctx(log) as c:
        log.append(c is not None)
        if x:
            raise KeyError("suppressed")
    return log


def assert_stmt(x):
    try:
        assert x > 0, "must be positive"
        return "ok"
    except AssertionError as e:
        return str(e)


def walrus(xs):
    out = []
    for x in xs:
        if (y := x * 2) > 4:
            out.append(y)
    return out


def globals_read(x):
    return x + COUNTER + math.floor(2.5)


def globals_write(x):
    global COUNTER
    old = COUNTER
    COUNTER = x
    new = COUNTER
    COUNTER = old
    return new


class Base:
    def __init__(self, v):
        self.v = v

    def describe(self):
        return f"Base({self.v})"

    @property
    def double(self):
        return self.v * 2

    @staticmethod
    def static(a):
        return a + 1

    @classmethod
    def make(cls, v):
        return cls(v)


class Derived(Base):
    def describe(self):
        return "Derived/" + super().describe()


def methods_and_classes(v):
    b = Derived.make(v)
    return b.describe(), b.double, Base.static(v), isinstance(b, Base), type(b).__name__


def attribute_store(v):
    b = Base(v)
    b.v += 1
    b.extra = "x"
    del b.extra
    return b.v, hasattr(b, "extra")


def string_methods(s):
    return s.upper(), s.split(","), "-".join(reversed(s.split(","))), s.startswith("a")


def dict_methods(n):
    d = {}
    for i in range(n):
        d.setdefault(i % 3, []).append(i)
    return sorted(d.items()), list(d.keys()), d.get(5, "missing")


def set_ops(a, b):
    a, b = set(a), set(b)
    return sorted(a | b), sorted(a & b), sorted(a - b), 2 in a


def is_and_in(x, xs):
    return x is None, x is not None, x in xs, x not in xs


def recursion(n):
    return 1 if n <= 1 else n * recursion(n - 1)


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def builtins_calls(xs):
    return len(xs), max(xs), min(xs), sum(xs), sorted(xs), list(enumerate(xs)), \
        list(zip(xs, xs[1:])), any(xs), all(xs), abs(-3), round(2.567, 2)


def namedtuple_use(x, y):
    p = Point(x, y)
    return p.x + p.y, p._replace(x=0), tuple(p)


def ordered_dict(n):
    d = OrderedDict()
    for i in range(n):
        d[str(i)] = i
    d.move_to_end("0")
    return list(d.items())


def partial_use(a):
    f = functools.partial(default_args, b=1)
    return f(a), f(a, c=2)


def kwargs_only_call(a):
    return dict(x=a, y=a + 1), sorted({"k": a}.items())


def augmented_assign(x):
    x += 1
    x *= 3
    x -= 2
    x //= 2
    x **= 2
    x %= 7
    x <<= 1
    x |= 1
    return x


def list_mutation(n):
    xs = []
    for i in range(n):
        xs.append(i)
    xs.extend([10, 11])
    xs.insert(0, -1)
    xs.pop()
    xs.reverse()
    return xs


def mutates_argument(xs):
    xs.append(len(xs))
    return xs


def early_return_in_loop(xs, target):
    for i, x in enumerate(xs):
        if x == target:
            return i
    return -1


def while_else(n):
    i = 0
    while i < n:
        i += 2
    else:
        i += 100
    return i


def generator_function(n):
    def gen():
        for i in range(n):
            yield i * i
    return list(gen())


def deep_closure(a):
    def f1(b):
        def f2(c):
            def f3(d):
                return a + b + c + d
            return f3
        return f2
    return f1(1)(2)(3)


def closure_in_loop_cells(n):
    out = []
    for i in range(n):
        def f(i=i):
            return i * 10
        out.append(f())
    return out


def star_unpack_in_literals(a, b):
    return [*a, *b], (*a, 0), {**{"x": 1}, **{"y": 2}}, {*a, *b} == set(a) | set(b)


def exception_in_callee(x):
    def bad():
        return {}[x]
    try:
        return bad()
    except KeyError as e:
        return f"missing {e}"


def lambda_default_closure(n):
    fs = [(lambda k=k: k * n) for k in range(3)]
    return [f() for f in fs]


def conditional_import(x):
    import operator as op
    from math import sqrt
    return op.mul(x, 2), sqrt(x)


def bytes_and_format(x):
    return "%d-%s" % (x, "a"), "{}/{}".format(x, x + 1), bytes([x % 256])  # noqa: UP031, UP032


def none_checks(x):
    y = None if x > 2 else x
    if y is None:
        return "none"
    return y


def min_max_key(words):
    return max(words, key=len), min(words, key=lambda w: w[-1])


def tuple_compare(a, b):
    return (a, b) < (b, a), [a] == [a], (a,) * 3


def nonlocal_rebinding():
    x = 1

    def set_x(v):
        nonlocal x
        x = v
    set_x(5)
    return x


def del_and_unbound(x):
    y = x
    del y
    try:
        return y  # noqa: F821
    except UnboundLocalError:
        return "unbound"



# --- what real model code uses (issue: real-world capture) ----------------------------------
@dataclasses.dataclass
class Config:
    scale: int = 2
    shift: int = 1


@functools.lru_cache(maxsize=8)
def cached_heads(n):
    return n // 2


class ValueBase:
    def value(self, x):
        return x + 1


class ValueDerived(ValueBase):
    def value(self, x):
        return super().value(x) * 2


class Registry(dict):
    def get(self, key):  # noqa: A003 (a dict subclass's override, as in transformers)
        return super().get(str(key)) or {}


class Lazy:
    def __getattr__(self, name):
        return name.upper()


def set_literals_and_ops(a, b):
    s, t = {a, 1, 2}, {b, 2}
    u = {x % 3 for x in range(a + b)}
    return sorted(s | t), sorted(s & t), sorted(s - t), sorted(s ^ t), 2 in s, sorted(u)


def dict_views_live(x):
    d = {"a": x}
    keys, values, items = d.keys(), d.values(), d.items()
    d["b"] = x * 2
    return len(keys), sorted(values), sorted(items), "b" in keys


def ordered_and_default(x):
    o = collections.OrderedDict(b=1, a=x)
    o.move_to_end("b")
    d = collections.defaultdict(list)
    for i in range(x):
        d[i % 2].append(i)
    return list(o.items()), dict(d), type(d).__name__


def dataclass_use(x):
    c = Config(scale=x)
    r = dataclasses.replace(c, shift=5)
    return c.scale * 2 + r.shift, dataclasses.asdict(r)


def functools_use(x):
    add3 = functools.partial(operator.add, 3)
    return add3(x), cached_heads(x * 2), functools.reduce(operator.mul, range(1, x + 1))


def itertools_use(x):
    return (list(itertools.chain([1, x], [3])), list(itertools.product([1, 2], [x])),
            list(itertools.zip_longest([1, 2], [x], fillvalue=0)),
            list(itertools.accumulate([1, x, 3])), list(itertools.islice(range(10), 2, x)))


def key_functions(words):
    return (sorted(words, key=len), sorted(words, key=lambda w: w[-1], reverse=True),
            max(words, key=len), min(words, key=lambda w: (len(w), w)), max([], default=-1))


def iteration_builtins(xs):
    return (list(map(lambda v: v * 2, xs)), list(filter(None, xs)), list(zip(xs, xs[1:])),
            list(enumerate(reversed(xs), 1)), list(map(operator.add, xs, xs)))


def deque_use(x):
    q = collections.deque([1, 2])
    q.append(x)
    q.appendleft(0)
    q.rotate(1)
    return q.popleft(), q.pop(), list(q)


def fromkeys_use(keys):
    return dict.fromkeys(keys, 0), dict.fromkeys(keys)


def super_and_dict_subclass(x):
    return ValueDerived().value(x), Registry({str(x): [x]}).get(x), Registry().get(x + 1)


def kwargs_forwarding(x):
    def inner(a, *, scale=1, **extra):
        return a * scale + extra.get("shift", 0)

    def outer(a, **kwargs):
        kwargs.setdefault("scale", 2)
        return inner(a, **kwargs)
    return outer(x, shift=3), outer(x, scale=5)


def generators_and_comprehensions(xs):
    def pairs(seq):
        for i, v in enumerate(seq):  # noqa: UP028 (a loop of yields is the case)
            yield i, v
    return list(pairs(xs)), {k: v for k, v in pairs(xs)}, sum(v for _, v in pairs(xs))


def getattr_hook_and_abc(x):
    lazy = Lazy()
    return (lazy.shape, isinstance([x], collections.abc.Sequence),
            isinstance({}, collections.abc.Mapping), math.sqrt(x * x), math.floor(2.5))


class TimesTen(collections.abc.Sequence):
    """``Sequence.__iter__`` stops on the IndexError that ``__getitem__`` raises."""

    def __init__(self, xs):
        self.xs = xs

    def __len__(self):
        return len(self.xs)

    def __getitem__(self, i):
        if i >= len(self.xs):
            raise IndexError("view index out of range")
        return self.xs[i] * 10


def raise_inside_callee(xs):
    return list(TimesTen(xs)), [v for v in TimesTen(xs)]


def match_statements(subject):
    """Structural pattern matching: mapping, sequence, class and self-matching patterns."""
    match subject:
        case {"a": 1, **rest}:
            return "mapping", sorted(rest)
        case [first, second, *others]:
            return "sequence", first + second, len(others)
        case Config(scale=0, shift=shift):
            return "keyword", shift
        case Config(2, 1):
            return "positional"
        case int(n) if n > 10:
            return "big int", n
        case str() | bytes():
            return "text"
    return "none"


CASES = [
    (arith, (7, 3), {}), (float_arith, (2.5, 1.5), {}), (bitwise, (12, 10), {}),
    (compare_chain, (1, 2, 3), {}), (compare_chain, (3, 2, 1), {}),
    (bool_ops, (0, 5), {}), (bool_ops, (3, []), {}),
    (if_elif, (-4,), {}), (if_elif, (0,), {}), (if_elif, (5,), {}), (if_elif, (50,), {}),
    (ternary, (3,), {}), (while_loop, (10,), {}),
    (for_break_continue_else, ([1, 2, 3, 4, 5],), {}),
    (for_break_continue_else, ([1, 2, 30, 4],), {}), (nested_loops, (5,), {}),
    (list_comp, ([1, 2, 3, 4, 5],), {}), (nested_comp, (3,), {}),
    (dict_set_comp, ([1, 2, 3, 4],), {}), (genexpr_sum, ([1, 2, 3],), {}),
    (comp_shadowing, (7,), {}), (comp_with_closure, (3,), {}),
    (closure_counter, (5,), {}), (closure_read, (2,), {}), (call_returned_closure, (5,), {}),
    (lambda_sort, ([(1, 2), (0, 2), (3, 1)],), {}), (default_args, (1,), {"d": 0}),
    (call_defaults, (1,), {}), (star_args, (1, 2), {"z": 3}), (call_star, (1, 2), {}),
    (call_posonly, (4,), {}), (unpacking, ((1, 2, 3),), {}), (swap, (1, 2), {}),
    (fstrings, (3, "s"), {}), (slicing, ([1, 2, 3, 4, 5],), {}),
    (subscript_store, ({"a": 1, "b": 2},), {}), (try_except, (0,), {}),
    (try_except, (5,), {}), (try_except_as, ("x",), {}), (try_except_as, ("3",), {}),
    (try_finally, (0,), {}), (try_finally, (1,), {}), (nested_try, (5,), {}),
    (raise_and_reraise, (0,), {}), (raise_and_reraise, (1,), {}),
    (with_block, (0,), {}), (with_block, (1,), {}), (assert_stmt, (1,), {}),
    (assert_stmt, (-1,), {}), (walrus, ([1, 2, 3, 4],), {}), (globals_read, (1,), {}),
    (globals_write, (42,), {}), (methods_and_classes, (3,), {}), (attribute_store, (3,), {}),
    (string_methods, ("a,b,c",), {}), (dict_methods, (7,), {}), (set_ops, ([1, 2], [2, 3]), {}),
    (is_and_in, (None, [1]), {}), (is_and_in, (1, [1]), {}), (recursion, (6,), {}),
    (fib, (15,), {}), (builtins_calls, ([3, 1, 2],), {}), (namedtuple_use, (1, 2), {}),
    (ordered_dict, (4,), {}), (partial_use, (1,), {}), (kwargs_only_call, (1,), {}),
    (augmented_assign, (5,), {}), (list_mutation, (4,), {}), (mutates_argument, ([1],), {}),
    (early_return_in_loop, ([4, 5, 6], 5), {}), (early_return_in_loop, ([4], 5), {}),
    (while_else, (5,), {}), (generator_function, (4,), {}), (deep_closure, (1,), {}),
    (closure_in_loop_cells, (3,), {}), (star_unpack_in_literals, ([1], [2]), {}),
    (exception_in_callee, ("k",), {}), (lambda_default_closure, (2,), {}),
    (conditional_import, (4,), {}), (bytes_and_format, (65,), {}), (none_checks, (1,), {}),
    (none_checks, (5,), {}), (min_max_key, (["ab", "abc", "zb"],), {}),
    (tuple_compare, (1, 2), {}), (nonlocal_rebinding, (), {}), (del_and_unbound, (1,), {}),
    (set_literals_and_ops, (3, 4), {}), (dict_views_live, (2,), {}),
    (ordered_and_default, (5,), {}), (dataclass_use, (3,), {}), (functools_use, (4,), {}),
    (itertools_use, (5,), {}), (key_functions, (["bb", "a", "ccc", "ab"],), {}),
    (iteration_builtins, ([0, 1, 2, 3],), {}), (deque_use, (7,), {}),
    (fromkeys_use, (["a", "b"],), {}), (super_and_dict_subclass, (3,), {}),
    (kwargs_forwarding, (2,), {}), (generators_and_comprehensions, ([5, 6, 7],), {}),
    (getattr_hook_and_abc, (3,), {}), (raise_inside_callee, ([1, 2, 3],), {}),
    *[(match_statements, (subject,), {}) for subject in (
        {"a": 1, "b": 2}, [1, 2, 3, 4], (1, 2), Config(0, 7), Config(), 11, 3, "s", b"b",
        2.5)],
]

RAISING = [(try_except, ("a",), {}, TypeError), (unpacking, ((1, 2),), {}, ValueError),
           (default_args, (), {}, TypeError), (posonly, (1,), {"b": 2, "c": 3}, TypeError)]

IMPURE = {mutates_argument, subscript_store, list_mutation, globals_write, with_block,
          closure_counter, attribute_store, generator_function, ordered_dict, try_finally,
          dict_methods, comp_with_closure, lambda_sort, methods_and_classes, nonlocal_rebinding,
          nested_comp, lambda_default_closure, ordered_and_default, deque_use,
          generators_and_comprehensions, raise_inside_callee, dict_views_live,
          set_literals_and_ops, kwargs_forwarding}  # the last two: cells + lists (no deepcopy)
